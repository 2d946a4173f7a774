//! The writing steps of `doctor excise` and the restore of its bundles, in their
//! order: every refusal first, then (under Maka's owner lock, with no other process
//! holding the file) the backup, the bundles written and read back, one `BEGIN
//! IMMEDIATE` transaction that checks every row again and deletes, and the rescan.
//!
//! The safety steps (`take_owner_lock`, `refuse_if_open`, the backup) are the ones
//! `doctor quarantine` and `finalize-runs` use, called from their command files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{bundle_file_name, plan_on, state_json, ExcisePlan, SessionPlan};
use crate::bundle::{Bundle, SchemaInfo};
use crate::cli::finalize::{
    backup_before_write, check_writable, recheck_after_backup, refuse_if_open, take_owner_lock,
};
use crate::cli::quarantine::{check_out_dir, make_out_dir, refuse_out_in_sessions, write_durably};
use crate::cli::{CliError, Printer};
use crate::db::excise::{Excision, ExcisionRestore};
use crate::db::write::{WriteBasis, Writer};
use crate::db::Workspace;
use crate::doctor::{archived_sessions, scan_workspace, ScanOptions};
use crate::scan::{ScanReport, WORKSPACE_AUTHORITY_SESSION};

/// What `doctor excise` was asked.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Limit the excision to these sessions (empty: every damaged one).
    pub sessions: Vec<String>,
    /// Bundle directory (default: `wsledger-quarantine` beside the database).
    pub out: Option<PathBuf>,
    pub apply: bool,
    pub no_backup: bool,
}

/// The default bundle directory, shared with `doctor quarantine`.
pub fn default_out(db: &Path) -> PathBuf {
    db.parent()
        .unwrap_or(Path::new("."))
        .join("wsledger-quarantine")
}

/// Everything the plan is made from, at one snapshot.
struct Read {
    report: ScanReport,
    archived: BTreeSet<String>,
    plan: ExcisePlan,
    schema: SchemaInfo,
    basis: Result<WriteBasis, Vec<String>>,
    binding: Option<String>,
}

fn schema_info(ws: &Workspace) -> Result<SchemaInfo, crate::db::DbError> {
    let facts = ws.schema_facts()?;
    Ok(SchemaInfo {
        user_version: facts.user_version,
        registry: facts.registry.clone(),
        capabilities: facts.capabilities.clone(),
    })
}

fn cli(e: crate::db::write::WriteError) -> CliError {
    CliError::new(e.to_string(), e.hint())
}

/// One session of the plan as JSON.
pub fn session_json(p: &SessionPlan, bundle: Option<&Path>) -> Value {
    let rows: Map<String, Value> = p
        .excision
        .counts()
        .into_iter()
        .map(|(t, n)| (t, Value::from(n)))
        .collect();
    json!({
        "session_id": p.session_id,
        "name": p.name,
        "events": p.targets.iter().map(|t| json!({
            "event_id": t.event_id,
            "code": t.code,
            "event_kind": p.event_kind(&t.event_id),
        })).collect::<Vec<_>>(),
        "rows": rows,
        "cost": p.cost(),
        "excised": p.excised(),
        "fallback": p.fallback,
        "bundle": bundle.map(|b| b.display().to_string()),
    })
}

/// Runs `doctor excise`: the plan, and with `opts.apply` the excision. Returns the
/// JSON document the command prints.
pub fn run(db: &Path, opts: &Options, now: i64, printer: &mut Printer) -> Result<Value, CliError> {
    let shown = db.display().to_string();
    if opts
        .sessions
        .iter()
        .any(|s| s == WORKSPACE_AUTHORITY_SESSION)
    {
        return Err(CliError::new(
            format!("`{WORKSPACE_AUTHORITY_SESSION}` is Maka's workspace-authority session; it is never excised"),
            "name conversation sessions only",
        ));
    }
    let out_dir = opts.out.clone().unwrap_or_else(|| default_out(db));
    refuse_out_in_sessions(&out_dir, db)?;
    let Read {
        report,
        archived,
        plan,
        schema,
        basis,
        binding,
    } = Workspace::read(db, |ws| {
        let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        let archived = archived_sessions(ws)?;
        let plan = plan_on(ws, &report, &archived, &opts.sessions)?;
        let facts = ws.schema_facts()?;
        Ok(Read {
            schema: schema_info(ws)?,
            basis: crate::db::write::write_basis(&facts),
            binding: ws.root_binding()?,
            report,
            archived,
            plan,
        })
    })?;
    for s in &opts.sessions {
        if !plan.sessions.iter().any(|p| &p.session_id == s) {
            printer.note(&format!(
                "session `{s}` holds no damaged event; nothing to excise there"
            ));
        }
    }
    let stamp = crate::db::backup::utc_stamp(now);
    let bundle_of = |p: &SessionPlan| out_dir.join(bundle_file_name(&p.session_id, &stamp));
    let mut doc = json!({
        "schema_version": 1,
        "command": "excise",
        "workspace": shown,
        "applied": false,
        "backup": null,
        "sessions": plan.sessions.iter().map(|p| {
            session_json(p, p.excised().then(|| bundle_of(p)).as_deref())
        }).collect::<Vec<_>>(),
        "before": state_json(&report, &archived),
        "after": plan.predicted.as_ref().map_or_else(|| state_json(&report, &archived), |r| state_json(r, &archived)),
        "schema_basis": basis.as_ref().ok().map(WriteBasis::to_json),
        "apply_refusal": basis.as_ref().err().map(|w| w.join("; ")),
        "notes": [],
    });
    let chosen: Vec<&SessionPlan> = plan.excised().collect();
    if !opts.apply || chosen.is_empty() {
        if !chosen.is_empty() {
            match &basis {
                Err(why) => printer.note(&format!(
                    "dry run: nothing was written; --apply would refuse this file: {}",
                    why.join("; ")
                )),
                Ok(_) => {
                    printer.note("dry run: nothing was written; run again with --apply to excise")
                }
            }
        }
        return Ok(doc);
    }
    if let Err(why) = &basis {
        return Err(crate::cli::schema_refusal(db, &why.join("; ")));
    }
    check_writable(db)?;
    check_out_dir(&out_dir)?;
    let _lock = take_owner_lock(db, binding.as_deref(), printer)?;
    // Declared before the writer, so dropped after it (see `OpenProbe`).
    let mut open_probe = crate::lock::OpenProbe::new(db);
    refuse_if_open(db, &mut open_probe)?;
    let writer = Writer::open(db)?;
    writer.check_schema().map_err(cli)?;
    let fresh = read_again(&writer, &chosen)?;
    let mut made = make_out_dir(&out_dir)?;
    let backup = if opts.no_backup {
        None
    } else {
        Some(backup_before_write(&writer, db, now)?)
    };
    recheck_after_backup(db, &mut open_probe, backup.as_deref(), printer)?;
    doc["backup"] = json!(backup);
    let release = basis.as_ref().ok().map(WriteBasis::to_json);
    let paths: Vec<PathBuf> = chosen.iter().map(|p| bundle_of(p)).collect();
    write_excision(
        &writer,
        &chosen,
        &fresh,
        &paths,
        &schema,
        &shown,
        now,
        release.as_ref(),
    )?;
    made.keep();
    drop(writer);
    drop(open_probe);
    let (after, archived_after) = rescan(db)?;
    doc["applied"] = Value::Bool(true);
    doc["after"] = state_json(&after, &archived_after);
    printer.note(&format!(
        "excised {} event(s) from {} session(s); bundles in {}",
        chosen.iter().map(|p| p.targets.len()).sum::<usize>(),
        chosen.len(),
        out_dir.display()
    ));
    Ok(doc)
}

/// Under the owner lock: each chosen session's excision read again (what the bundles
/// hold and the transaction checks), refusing one that can no longer be written.
pub fn read_again(writer: &Writer, chosen: &[&SessionPlan]) -> Result<Vec<Excision>, CliError> {
    let mut fresh = Vec::new();
    for p in chosen {
        let x = writer
            .read_excision(&p.session_id, &p.excision.events)
            .map_err(cli)?;
        if !x.blockers.is_empty() {
            return Err(CliError::new(
                format!(
                    "the excision in session `{}` cannot be written: {}",
                    p.session_id,
                    x.blockers.join("; ")
                ),
                "run without --apply to see the plan",
            ));
        }
        fresh.push(x);
    }
    Ok(fresh)
}

/// After the backup: writes and reads back each session's bundle, then deletes every
/// excision in one transaction. A failure before the commit removes the bundles
/// written so far.
#[allow(clippy::too_many_arguments)]
pub fn write_excision(
    writer: &Writer,
    chosen: &[&SessionPlan],
    fresh: &[Excision],
    paths: &[PathBuf],
    schema: &SchemaInfo,
    shown: &str,
    now: i64,
    release: Option<&Value>,
) -> Result<(), CliError> {
    let mut written: Vec<PathBuf> = Vec::new();
    let cleanup = |written: &[PathBuf]| {
        for p in written {
            let _ = std::fs::remove_file(p);
        }
    };
    for ((p, x), path) in chosen.iter().zip(fresh).zip(paths) {
        let mut meta = Map::new();
        meta.insert("tool".into(), json!("wsledger doctor excise"));
        meta.insert("excised_at_ms".into(), json!(now));
        meta.insert("database".into(), json!(shown));
        if let Some(r) = release {
            meta.insert("release".into(), r.clone());
        }
        meta.insert(
            "events".into(),
            json!(p
                .targets
                .iter()
                .map(|t| json!({
                    "event_id": t.event_id,
                    "code": t.code,
                    "event_kind": p.event_kind(&t.event_id),
                }))
                .collect::<Vec<_>>()),
        );
        meta.insert("rowids".into(), json!(x.rowids));
        let bundle = Bundle {
            session_id: x.session_id.clone(),
            schema: schema.clone(),
            tables: x.tables.clone(),
            quarantine: None,
            kind: Some("excise".into()),
            excise: Some(Value::Object(meta)),
        };
        if let Err(e) = write_durably(path, &bundle.to_json_text()) {
            cleanup(&written);
            return Err(e);
        }
        written.push(path.clone());
        let back = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| Bundle::from_json_text(&t).map_err(|e| e.to_string()));
        if !matches!(&back, Ok(b) if *b == bundle) {
            cleanup(&written);
            return Err(CliError::new(
                format!(
                    "bundle `{}` does not read back as written; nothing was excised",
                    path.display()
                ),
                "check the disk and the --out directory",
            ));
        }
    }
    if let Err(e) = writer.excise(fresh) {
        cleanup(&written);
        return Err(cli(e));
    }
    Ok(())
}

fn rescan(db: &Path) -> Result<(ScanReport, BTreeSet<String>), CliError> {
    Ok(Workspace::read(db, |ws| {
        let after = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        Ok((after, archived_sessions(ws)?))
    })?)
}

/// An excision bundle read for a restore.
pub struct Parsed {
    pub path: PathBuf,
    pub bundle: Bundle,
    pub item: ExcisionRestore,
}

/// Reads an excision bundle (`kind: "excise"`).
pub fn parse_bundle(path: &Path, bundle: Bundle) -> Result<Parsed, CliError> {
    let hint = "an excision bundle is written by `wsledger doctor excise --apply`";
    let bad = |what: &str| {
        CliError::new(
            format!(
                "`{}`: `excise.{what}` is missing or malformed",
                path.display()
            ),
            hint,
        )
    };
    let meta = bundle.excise.clone().ok_or_else(|| bad("(the object)"))?;
    let rowids = serde_json::from_value(meta.get("rowids").cloned().unwrap_or(json!({})))
        .map_err(|_| bad("rowids"))?;
    let events: Vec<String> = meta
        .get("events")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("events"))?
        .iter()
        .map(|e| e.get("event_id").and_then(Value::as_str).map(str::to_owned))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("events"))?;
    Ok(Parsed {
        path: path.to_path_buf(),
        item: ExcisionRestore {
            session_id: bundle.session_id.clone(),
            events,
            tables: bundle.tables.clone(),
            rowids,
        },
        bundle,
    })
}

/// Restores excision bundles: checked against the workspace (its schema, its
/// columns, the events not back yet), then, with `apply`, every row inserted in one
/// transaction under the same safety as the excision. Returns the document.
pub fn restore(
    db: &Path,
    parsed: &[Parsed],
    apply: bool,
    no_backup: bool,
    now: i64,
    printer: &mut Printer,
) -> Result<Value, CliError> {
    let shown = db.display().to_string();
    let (report, archived, binding) = Workspace::read(db, |ws| {
        let current = schema_info(ws)?;
        let facts = ws.schema_facts()?;
        for p in parsed {
            let refuse = |what: String| {
                Err(CliError::new(
                    format!("`{}`: {what}; nothing was changed", p.path.display()),
                    "restore into the workspace, and the schema, the bundle was taken from",
                ))
            };
            if p.bundle.schema != current {
                return Ok(refuse(format!(
                    "the bundle was taken from a file of runtime schema {}, this workspace is \
                     runtime schema {}: a bundle goes back only into the generation it came from",
                    p.bundle.schema.user_version, current.user_version
                )));
            }
            for (table, rows) in &p.bundle.tables {
                if !facts.tables.iter().any(|t| t == table) {
                    return Ok(refuse(format!("the workspace has no table `{table}`")));
                }
                let shape = ws.table_shape(table)?;
                let want: Vec<&str> = shape.columns.iter().map(String::as_str).collect();
                if rows.iter().any(|r| {
                    r.columns
                        .iter()
                        .map(|(c, _)| c.as_str())
                        .collect::<Vec<_>>()
                        != want
                }) {
                    return Ok(refuse(format!(
                        "the columns of `{table}` differ from the bundle's"
                    )));
                }
            }
            let back = ws.events_present(&p.item.events)?;
            if back > 0 {
                return Ok(refuse(format!(
                    "{back} of its excised event(s) are in `{shown}` again: it was restored already"
                )));
            }
        }
        let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        Ok(Ok((report, archived_sessions(ws)?, ws.root_binding()?)))
    })??;
    let mut doc = json!({
        "schema_version": 1,
        "command": "restore",
        "kind": "excise",
        "workspace": shown,
        "applied": false,
        "backup": null,
        "sessions": parsed.iter().map(|p| {
            let counts: Map<String, Value> = p.bundle.tables.iter()
                .filter(|(_, r)| !r.is_empty())
                .map(|(t, r)| (t.clone(), Value::from(r.len())))
                .collect();
            json!({
                "session_id": p.bundle.session_id,
                "events": p.item.events,
                "rows": counts,
                "bundle": p.path.display().to_string(),
            })
        }).collect::<Vec<_>>(),
        "before": state_json(&report, &archived),
        "notes": [],
    });
    if !apply {
        printer.note("dry run: nothing was written; run again with --apply to restore");
        return Ok(doc);
    }
    check_writable(db)?;
    let _lock = take_owner_lock(db, binding.as_deref(), printer)?;
    let mut open_probe = crate::lock::OpenProbe::new(db);
    refuse_if_open(db, &mut open_probe)?;
    let writer = Writer::open(db)?;
    writer.check_schema().map_err(cli)?;
    let backup = if no_backup {
        None
    } else {
        Some(backup_before_write(&writer, db, now)?)
    };
    recheck_after_backup(db, &mut open_probe, backup.as_deref(), printer)?;
    doc["backup"] = json!(backup);
    let items: Vec<ExcisionRestore> = parsed.iter().map(|p| p.item.clone()).collect();
    let moved = writer.restore_excised(&items).map_err(cli)?;
    drop(writer);
    drop(open_probe);
    if moved > 0 {
        let n = format!("{moved} row(s) got a new rowid: their old one was taken since");
        printer.note(&n);
        doc["notes"] = json!([n]);
    }
    let (after, archived_after) = rescan(db)?;
    doc["applied"] = Value::Bool(true);
    doc["after"] = state_json(&after, &archived_after);
    printer.note(&format!(
        "restored the excised rows of {} bundle(s)",
        parsed.len()
    ));
    Ok(doc)
}
