//! `wsledger doctor repair`: the scan's plan as one command.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Value};

use super::finalize::{
    backup_before_write, backup_transcripts, check_writable, now_ms, recheck_after_backup,
    refuse_if_open, take_owner_lock, verify, write_finalize,
};
use super::quarantine::{
    check_out_dir, make_out_dir, read_targets, refuse_out_in_sessions, write_quarantine,
};
use super::{workspace, CliError, ExitStatus, GlobalArgs, Printer};
use crate::bundle::SchemaInfo;
use crate::db::write::Writer;
use crate::db::Workspace;
use crate::diagnosis::After;
use crate::doctor::{
    archived_sessions, diagnose_workspace, plan_finalize, scan_path, scan_workspace, ScanOptions,
};
use crate::finalize::PlanOptions;
use crate::quarantine::{damaged_sessions, startup_blockers};
use crate::report::diagnosis::render_diagnosis;
use crate::report::sanitize::sanitize;
use crate::report::Format;
use crate::scan::runs::RunState;

/// What the plan is made from (read at one snapshot).
struct RepairRead {
    diagnosis: crate::diagnosis::Diagnosis,
    targets: std::collections::BTreeMap<String, Vec<crate::quarantine::Reason>>,
    blocked: Vec<String>,
    schema: SchemaInfo,
    basis: Result<crate::db::write::WriteBasis, Vec<String>>,
    binding: Option<String>,
}

/// Make the workspace work again: the plan `doctor scan` ends with, as one command.
///
/// Without `--apply` it prints the plan (why each run is stuck, which sessions are
/// damaged and what setting them aside costs, each step and the state afterwards)
/// and changes nothing.
///
/// With `--apply` it takes Maka's owner lock once, backs the database up once, sets
/// the damaged sessions aside exactly as `doctor quarantine --apply` does (each in a
/// bundle that `doctor restore` puts back), then finalizes what is still stuck as
/// `doctor finalize-runs --apply` does, then rescans and reports the gate, start-up
/// and stuck runs. It refuses what those commands refuse, with the same exit status.
/// Run again, it finds nothing to do.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// Directory for the quarantine bundles [default: `wsledger-quarantine` beside
    /// the database]; never inside the workspace's `sessions/`
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Carry the plan out (default: dry run, nothing is written)
    #[arg(long)]
    pub apply: bool,
    /// With --apply: do not back the database up first
    #[arg(long)]
    pub no_backup: bool,
}

fn after_json(a: &After) -> Value {
    json!({
        "tool_writes_refused": a.tool_writes_refused,
        "startup_blocked": a.startup_blocked,
        "stuck_runs": a.stuck_runs,
    })
}

/// The JSON document (`--format json`), or one `summary` record (`ndjson`).
fn write_out(printer: &mut Printer, doc: &Value, format: Format) -> Result<(), CliError> {
    let res = (|| -> std::io::Result<()> {
        let out = printer.out();
        if format == Format::Json {
            serde_json::to_writer_pretty(&mut *out, doc)?;
        } else {
            serde_json::to_writer(&mut *out, &json!({"type": "summary", "data": doc}))?;
        }
        writeln!(out)
    })();
    match res {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(
            format!("writing output: {e}"),
            "check that stdout is writable",
        )),
        _ => Ok(()),
    }
}

pub fn run(
    global: &GlobalArgs,
    args: &RepairArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let format = super::plan_format(global)?;
    let db = workspace::database_path(global.workspace()?)?;
    let shown = global
        .workspace()?
        .map_or_else(|| db.display().to_string(), |p| p.display().to_string());
    let now = now_ms()?;

    // Everything the plan is made from, at one snapshot.
    let read = Workspace::read(&db, |ws| {
        let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        let (diagnosis, _) = diagnose_workspace(ws, &report, &shown)?;
        let archived = archived_sessions(ws)?;
        let targets = damaged_sessions(&report, &archived);
        let mut blocked = Vec::new();
        for s in targets.keys() {
            let d = ws.deletion(s)?;
            if !d.blockers.is_empty() {
                blocked.push(format!("{s}: {}", d.blockers.join("; ")));
            }
        }
        let facts = ws.schema_facts()?;
        Ok(RepairRead {
            diagnosis,
            targets,
            blocked,
            schema: SchemaInfo {
                user_version: facts.user_version,
                registry: facts.registry.clone(),
                capabilities: facts.capabilities.clone(),
            },
            basis: crate::db::write::write_basis(&facts),
            binding: ws.root_binding()?,
        })
    })?;
    let RepairRead {
        diagnosis,
        targets,
        blocked,
        schema,
        basis,
        binding,
    } = read;

    let mut doc = json!({
        "schema_version": 1,
        "command": "repair",
        "workspace": shown,
        "applied": false,
        "backup": null,
        "bundles": [],
        "finalized_runs": 0,
        "diagnosis": diagnosis,
        "after": null,
    });
    let nothing = diagnosis.plan.steps.is_empty();
    if !args.apply || nothing {
        if !args.apply && !nothing {
            match &diagnosis.plan.refused {
                Some(why) => printer.note(&format!("dry run: nothing was written; {why}")),
                None => printer.note(
                    "dry run: nothing was written; run again with --apply to carry the plan out",
                ),
            }
        }
        return finish(printer, &doc, &diagnosis, format, None);
    }
    if !blocked.is_empty() {
        return Err(CliError::new(
            format!(
                "Maka's own deletion of session(s) would fail ({}); nothing was changed",
                blocked.join("; ")
            ),
            "run without --apply to see the blockers",
        ));
    }

    // --apply: one lock, one backup, then each step in its own transaction. A file no
    // repair may write is refused before anything is created.
    if let Err(why) = &basis {
        return Err(super::schema_refusal(&db, &why.join("; ")));
    }
    let release = basis.as_ref().ok().map(|b| b.to_json());
    // Every check that can refuse comes before anything is created.
    check_writable(&db)?;
    let out_dir = args.out.clone().unwrap_or_else(|| {
        db.parent()
            .unwrap_or(Path::new("."))
            .join("wsledger-quarantine")
    });
    if !targets.is_empty() {
        refuse_out_in_sessions(&out_dir, &db)?;
        check_out_dir(&out_dir)?;
    }
    let _lock = take_owner_lock(&db, binding.as_deref(), printer)?;
    // Declared before the writer, so dropped after it (see `OpenProbe`).
    let mut open_probe = crate::lock::OpenProbe::new(&db);
    refuse_if_open(&db, &mut open_probe)?;
    let writer = Writer::open(&db)?;
    writer
        .check_schema()
        .map_err(|e| CliError::new(e.to_string(), e.hint()))?;
    let (fresh, generation, folders) = if targets.is_empty() {
        (Vec::new(), None, Vec::new())
    } else {
        read_targets(&writer, &targets)?
    };
    // The bundle directory only under the lock; removed again on a refusal.
    let mut made = if targets.is_empty() {
        None
    } else {
        Some(make_out_dir(&out_dir)?)
    };
    let backup = if args.no_backup {
        None
    } else {
        Some(backup_before_write(&writer, &db, now)?)
    };
    recheck_after_backup(&db, &mut open_probe, backup.as_deref(), printer)?;
    doc["backup"] = json!(backup);
    if !targets.is_empty() {
        // The bundle names the database file, as `doctor quarantine`'s does.
        let file = db.display().to_string();
        let (moved, notes) = write_quarantine(
            &writer,
            &targets,
            &fresh,
            &folders,
            generation,
            &out_dir,
            &schema,
            &file,
            now,
            release.as_ref(),
        )?;
        if let Some(m) = made.as_mut() {
            m.keep();
        }
        for n in &notes {
            printer.warn(n);
        }
        let bundles: Vec<String> = targets
            .keys()
            .map(|s| {
                out_dir
                    .join(crate::quarantine::bundle_file_name(s))
                    .display()
                    .to_string()
            })
            .collect();
        doc["bundles"] = json!(bundles);
        printer.note(&format!(
            "quarantined {moved} session(s); bundles in {}",
            out_dir.display()
        ));
    }
    // Planned on the file as the quarantine left it.
    let planning = plan_finalize(&db, &PlanOptions::default())?;
    let plan = planning.plan;
    if !plan.plan.is_empty() {
        if let Some(b) = &backup {
            if let Some(t) = backup_transcripts(&plan, b)? {
                printer.note(&format!("transcript backup: {t}"));
            }
        }
        write_finalize(&writer, &plan)?;
        let all = ScanOptions {
            all_runs: true,
            ..ScanOptions::default()
        };
        let rescan = scan_path(&db, all, &mut |_, _| {})?;
        verify(&planning.report, &rescan, &plan)?;
        printer.note(&format!("finalized {} run(s)", plan.plan.len()));
    }
    drop(writer);
    drop(open_probe);
    doc["finalized_runs"] = json!(plan.plan.len());
    doc["applied"] = Value::Bool(true);

    let (after, archived_after) = Workspace::read(&db, |ws| {
        Ok((
            scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?,
            archived_sessions(ws)?,
        ))
    })?;
    let state = After {
        tool_writes_refused: after.maka_gate.tool_writes_refused,
        startup_blocked: !startup_blockers(&after, &archived_after).is_empty()
            || after.startup.as_ref().is_some_and(|s| !s.opens),
        stuck_runs: after
            .runs
            .iter()
            .filter(|r| r.state == RunState::Stuck)
            .count(),
    };
    doc["after"] = after_json(&state);
    finish(printer, &doc, &diagnosis, format, Some(&state))
}

fn finish(
    printer: &mut Printer,
    doc: &Value,
    diagnosis: &crate::diagnosis::Diagnosis,
    format: Format,
    after: Option<&After>,
) -> Result<ExitStatus, CliError> {
    if format != Format::Table {
        write_out(printer, doc, format)?;
        return Ok(ExitStatus::Success);
    }
    let res = (|| -> std::io::Result<()> {
        let out = printer.out();
        writeln!(
            out,
            "workspace: {}",
            sanitize(doc["workspace"].as_str().unwrap_or(""))
        )?;
        render_diagnosis(out, diagnosis)?;
        if doc["applied"] == true {
            writeln!(out, "carried out:")?;
            if let Some(b) = doc["backup"].as_str() {
                writeln!(out, "  backup: {}", sanitize(b))?;
            }
            for b in doc["bundles"].as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "  quarantined into {}",
                    sanitize(b.as_str().unwrap_or(""))
                )?;
            }
            writeln!(out, "  finalized {} run(s)", doc["finalized_runs"])?;
        }
        if let Some(a) = after {
            writeln!(
                out,
                "rescan: tool writes {}; start-up {}; {} stuck run(s)",
                if a.tool_writes_refused {
                    "REFUSED"
                } else {
                    "accepted"
                },
                if a.startup_blocked {
                    "BLOCKED"
                } else {
                    "not blocked"
                },
                a.stuck_runs
            )?;
        }
        Ok(())
    })();
    match res {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(
            format!("writing output: {e}"),
            "check that stdout is writable",
        )),
        _ => Ok(ExitStatus::Success),
    }
}
