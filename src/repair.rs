//! `doctor repair`: the scan's plan as one command. It reads the diagnosis, then
//! (through [`crate::apply`], one lock and one backup) removes the damaged events as
//! `doctor excise` does wherever that heals the session, sets the other damaged
//! sessions aside as `doctor quarantine` does and finalizes what is still stuck as
//! `doctor finalize-runs` does, then reports the state the rescan finds.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::apply::{apply, basis_refusal, Step, Target, WriteOptions, WritingCommand};
use crate::bundle::SchemaInfo;
use crate::db::write::Writer;
use crate::db::Workspace;
use crate::diagnosis::{diagnose_workspace_with, After, Diagnosis};
use crate::error::UserError;
use crate::excise::apply::ExciseWrite;
use crate::excise::{ExcisePlan, SessionPlan};
use crate::finalize::apply::{backup_transcripts, verify, write_finalize};
use crate::finalize::{plan_finalize, PlanOptions};
use crate::notes::Notes;
use crate::quarantine::apply::{default_out_dir, BundleTarget, QuarantineWrite};
use crate::quarantine::{damaged_sessions, startup_blockers, Reason};
use crate::rederive::apply::{prepare, Prepared, RederiveWrite};
use crate::rederive::Outcome;
use crate::scan::runs::RunState;
use crate::scan::{scan_path, scan_workspace, ScanOptions};
use crate::startup::Startup;

/// What `doctor repair` did: its JSON document, the diagnosis it carried out, and
/// the state the rescan found after an apply.
pub struct Repaired {
    pub doc: Value,
    pub diagnosis: Diagnosis,
    pub after: Option<After>,
}

/// What the plan is made from (read at one snapshot).
struct RepairRead {
    /// The missing derived objects the plan puts back, and (when they go first) their
    /// write prepared at this snapshot.
    rederive: Option<(crate::rederive::Plan, Option<Result<Prepared, String>>)>,
    /// The judged build's `startup`, and `--maka all`'s `compatibility`.
    startup: (Option<Startup>, Option<Vec<Startup>>),
    diagnosis: Diagnosis,
    targets: BTreeMap<String, Vec<Reason>>,
    blocked: Vec<String>,
    schema: SchemaInfo,
    basis: Result<crate::release::repair_basis::WriteBasis, Vec<String>>,
    binding: Option<String>,
    /// The excision the plan prefers (sessions it heals are not quarantined).
    excise: ExcisePlan,
}

/// Reads the diagnosis of `db` (`shown`: the workspace as its commands name it) and,
/// with `req.apply`, carries its plan out.
pub fn run(
    db: &Path,
    shown: &str,
    req: &WriteOptions,
    notes: &mut dyn Notes,
) -> Result<Repaired, UserError> {
    run_as(db, shown, req, None, notes)
}

/// [`run`] with the start-up, gate and plan of the build `--maka` names (or of the
/// writer, with every build's start-up beside it). What is written is the same: a
/// repair writes in the writer's schema as the writer does.
pub fn run_as(
    db: &Path,
    shown: &str,
    req: &WriteOptions,
    maka: Option<crate::startup::builds::Maka>,
    notes: &mut dyn Notes,
) -> Result<Repaired, UserError> {
    crate::apply::refuse_newer(db, req.apply, notes)?;
    let shown = shown.to_owned();
    let now = req.now;
    let opts = ScanOptions {
        maka,
        ..ScanOptions::default()
    };

    // Everything the plan is made from, at one snapshot.
    let read = Workspace::read(db, |ws| {
        let report = scan_workspace(ws, opts, &mut |_, _| {})?;
        let startup = (report.startup.clone(), report.compatibility.clone());
        let archived = ws.archived_sessions()?;
        // Made once: the diagnosis's plan and the writes below follow the same one.
        let excise = crate::excise::plan_on(ws, &report, &archived, &[])?;
        let (diagnosis, _) = diagnose_workspace_with(ws, &report, &shown, Some(&excise))?;
        let mut targets = damaged_sessions(&report, &archived);
        for p in excise.excised() {
            targets.remove(&p.session_id);
        }
        let mut blocked = Vec::new();
        for s in targets.keys() {
            let d = ws.deletion(s)?;
            if !d.blockers.is_empty() {
                blocked.push(format!("{s}: {}", d.blockers.join("; ")));
            }
        }
        let facts = ws.schema_facts()?;
        let rederive = match crate::rederive::plan_on(ws, &report)? {
            Outcome::Planned(p) => {
                // Put back first, unless the projections wait for the excision.
                let first = p.ledger_damage.is_none();
                let prepared = if first {
                    Some(prepare(ws, &p, now)?)
                } else {
                    None
                };
                Some((p, prepared))
            }
            _ => None,
        };
        let schema = crate::release::repair_basis::bundle_schema(&facts);
        Ok(RepairRead {
            rederive,
            startup,
            diagnosis,
            targets,
            blocked,
            schema,
            basis: crate::release::repair_basis::write_basis_before_rederive(&facts),
            binding: ws.root_binding()?,
            excise,
        })
    })?;
    let RepairRead {
        rederive,
        startup,
        diagnosis,
        targets,
        blocked,
        schema,
        basis,
        binding,
        excise,
    } = read;
    let excised: Vec<&SessionPlan> = excise.excised().collect();

    let mut doc = json!({
        "schema_version": 1,
        "command": "repair",
        "workspace": shown,
        "applied": false,
        "backup": null,
        "bundles": [],
        "excised": [],
        "finalized_runs": 0,
        "rederived": null,
        "diagnosis": diagnosis,
        "after": null,
    });
    if maka.is_some() {
        // The start-up the plan speaks for (and every build's, under `all`).
        let database = db.display().to_string();
        for w in
            crate::startup::desktop_warnings(startup.0.as_ref(), startup.1.as_deref(), &database)
        {
            notes.warn(&w);
        }
        doc["startup"] = json!(startup.0);
        if let Some(rows) = &startup.1 {
            doc["compatibility"] = json!(rows);
        }
    }
    let nothing = diagnosis.plan.steps.is_empty();
    // What is put back first must be exact before anything is written.
    let first_refused = rederive.as_ref().and_then(|(_, prepared)| match prepared {
        Some(Err(why)) => Some(why.clone()),
        _ => None,
    });
    if !req.apply || nothing {
        if !req.apply && !nothing {
            match (&diagnosis.plan.refused, &first_refused) {
                (Some(why), _) => notes.note(&format!("dry run: nothing was written; {why}")),
                (None, Some(why)) => notes.note(&format!(
                    "dry run: nothing was written; --apply would refuse this file: the \
                     missing derived objects cannot be put back: {why}"
                )),
                (None, None) => notes.note(
                    "dry run: nothing was written; run again with --apply to carry the plan out",
                ),
            }
        }
        return Ok(Repaired {
            doc,
            diagnosis,
            after: None,
        });
    }
    if !blocked.is_empty() {
        return Err(UserError::new(
            format!(
                "Maka's own deletion of session(s) would fail ({}); nothing was changed",
                blocked.join("; ")
            ),
            "run without --apply to see the blockers",
        ));
    }

    if let Some(why) = first_refused {
        return Err(UserError::new(
            format!(
                "`{}`: the missing derived objects cannot be put back: {why}; nothing was \
                 changed",
                db.display()
            ),
            "run without --apply to see the plan",
        ));
    }

    // --apply: one lock, one backup, then each step in its own transaction.
    let out_dir = req.out.clone().unwrap_or_else(|| default_out_dir(db));
    // The bundle names the database file, as `doctor quarantine`'s does.
    let file = db.display().to_string();
    let refusal = basis_refusal(&basis);
    let mut target = Target::new(db, binding.as_deref(), refusal.as_deref(), req.backup, now);
    // The state after is judged for the same build.
    target.rescan.maka = maka;
    let bundles = || BundleTarget::new(&out_dir, &schema, &file, now, &basis);
    let quarantine = QuarantineWrite {
        targets: &targets,
        bundles: bundles(),
    };
    let excise = (!excised.is_empty()).then(|| ExciseWrite::new(excised, bundles()));
    let rederive = rederive.map(|(p, prepared)| {
        let first = prepared.is_some();
        let bundle = out_dir.join(crate::rederive::apply::bundle_name(now));
        let prepared = prepared.and_then(Result::ok);
        (
            RederiveWrite::new(p, prepared, &out_dir, bundle, now),
            first,
        )
    });
    let mut write = RepairWrite {
        db,
        excise,
        quarantine,
        rederive,
    };
    let applied = apply(&target, &mut write, notes)?;
    let (excised, bundles, finalized) = applied.written;
    if let Some((r, _)) = &write.rederive {
        if r.done {
            doc["rederived"] = json!({
                "objects": r.plan.objects.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                "registry_rows": r.plan.registry_rows.len(),
                "bundle": r.bundle.display().to_string(),
            });
        }
    }
    doc["backup"] = json!(applied.backup);
    doc["excised"] = json!(excised);
    doc["bundles"] = json!(bundles);
    doc["finalized_runs"] = json!(finalized);
    doc["applied"] = Value::Bool(true);
    let after = &applied.after;
    let state = After {
        tool_writes_refused: after.maka_gate.tool_writes_refused,
        startup_blocked: !startup_blockers(after, &applied.archived_after).is_empty()
            || after.startup.as_ref().is_some_and(|s| s.blocked()),
        stuck_runs: after
            .runs
            .iter()
            .filter(|r| r.state == RunState::Stuck)
            .count(),
        startup_unknown: false,
    };
    doc["after"] = after_json(&state);
    Ok(Repaired {
        doc,
        diagnosis,
        after: Some(state),
    })
}

/// `after` in the JSON document.
fn after_json(a: &After) -> Value {
    json!({
        "tool_writes_refused": a.tool_writes_refused,
        "startup_blocked": a.startup_blocked,
        "stuck_runs": a.stuck_runs,
    })
}

/// Repair's part of an apply: excision's (when it heals a damaged session), then
/// quarantine's (for the damaged sessions it does not heal), then the finalize plan
/// made on the file as they left it, written and verified.
struct RepairWrite<'a> {
    db: &'a Path,
    excise: Option<ExciseWrite<'a>>,
    quarantine: QuarantineWrite<'a>,
    /// The missing derived objects put back, and whether first (else after the
    /// excision and quarantine, planned on the file as they leave it).
    rederive: Option<(RederiveWrite<'a>, bool)>,
}

/// What repair stages under the lock: excision's, then quarantine's; with a rederive
/// step, only the bundle directory (the others stage inside the write).
type RepairStaged = (
    Option<crate::excise::apply::Staged>,
    Option<crate::quarantine::apply::Staged>,
    Option<crate::quarantine::files::MadeDirs>,
);

impl WritingCommand for RepairWrite<'_> {
    type Staged = RepairStaged;
    /// The sessions excised (as the JSON lists them), the quarantine bundles written,
    /// and how many runs were finalized.
    type Written = (Vec<Value>, Vec<String>, usize);

    fn check(&mut self) -> Result<(), UserError> {
        if let Some((r, _)) = self.rederive.as_mut() {
            r.check()?;
        }
        if self.excise.is_some() || !self.quarantine.targets.is_empty() {
            let out_dir = self.quarantine.bundles.out_dir;
            crate::quarantine::files::refuse_out_in_sessions(out_dir, self.db)?;
            self.quarantine.check()?;
        }
        Ok(())
    }

    fn stage(&mut self, writer: &Writer) -> Result<Self::Staged, UserError> {
        if let Some((r, _)) = self.rederive.as_mut() {
            // The other steps read their rows again once what is missing is back (or,
            // after it, just before their writes).
            return Ok((None, None, Some(r.stage(writer)?)));
        }
        let excise = match self.excise.as_mut() {
            Some(x) => Some(x.stage(writer)?),
            None => None,
        };
        if self.quarantine.targets.is_empty() {
            return Ok((excise, None, None));
        }
        Ok((excise, Some(self.quarantine.stage(writer)?), None))
    }

    fn write(&mut self, step: Step<'_>, staged: Self::Staged) -> Result<Self::Written, UserError> {
        let (db, writer, backup, notes) = (self.db, step.writer, step.backup, step.notes);
        let (mut excise_staged, mut staged, made) = staged;
        let first = self.rederive.as_ref().is_some_and(|(_, first)| *first);
        if let (Some((r, true)), Some(_)) = (self.rederive.as_mut(), &made) {
            r.write_on(writer, notes)?;
        }
        if made.is_some() {
            // Staged now, on the file as the rederive left it (or before the excision
            // and quarantine it comes after).
            if let Some(x) = self.excise.as_mut() {
                excise_staged = Some(x.stage(writer)?);
            }
            if !self.quarantine.targets.is_empty() {
                staged = Some(self.quarantine.stage(writer)?);
            }
        }
        let mut excised = Vec::new();
        if let (Some(x), Some(x_staged)) = (self.excise.as_mut(), excise_staged) {
            // Excision first: the sessions it heals keep their conversation.
            let excise_step = Step {
                writer,
                backup,
                notes: &mut *notes,
            };
            x.write(excise_step, x_staged)?;
            excised = x
                .chosen
                .iter()
                .zip(&x.paths)
                .map(|(p, b)| {
                    json!({
                        "session_id": p.session_id,
                        "name": p.name,
                        "events": p.targets,
                        "removed": p.removed_words(),
                        "bundle": b.display().to_string(),
                    })
                })
                .collect();
        }
        let mut bundles = Vec::new();
        if let Some(staged) = staged {
            let quarantine_step = Step {
                writer,
                backup,
                notes: &mut *notes,
            };
            let (moved, _) = self.quarantine.write(quarantine_step, staged)?;
            let out_dir = self.quarantine.bundles.out_dir;
            bundles = self
                .quarantine
                .targets
                .keys()
                .map(|s| {
                    out_dir
                        .join(crate::quarantine::bundle_file_name(s))
                        .display()
                        .to_string()
                })
                .collect();
            notes.note(&format!(
                "quarantined {moved} session(s); bundles in {}",
                out_dir.display()
            ));
        }
        if let (Some((r, false)), false) = (self.rederive.as_mut(), first) {
            // Planned on the file as the excision and quarantine left it.
            r.write_on(writer, notes)?;
        }
        if let Some(mut m) = made {
            m.keep();
        }
        // Planned on the file as the quarantine left it.
        let planning = plan_finalize(db, &PlanOptions::default())?;
        let plan = planning.plan;
        if !plan.plan.is_empty() {
            if let Some(b) = backup {
                if let Some(t) = backup_transcripts(&plan, b)? {
                    notes.note(&format!("transcript backup: {t}"));
                }
            }
            write_finalize(writer, &plan)?;
            let all = ScanOptions {
                all_runs: true,
                ..ScanOptions::default()
            };
            let rescan = scan_path(db, all, &mut |_, _| {})?;
            verify(&planning.report, &rescan, &plan)?;
            notes.note(&format!("finalized {} run(s)", plan.plan.len()));
        }
        Ok((excised, bundles, plan.plan.len()))
    }
}
