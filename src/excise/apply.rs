//! `doctor excise` from plan to rescan: the plan's document, and the apply (through
//! [`crate::apply`]) that writes and reads back a bundle per session, then deletes
//! every excision in one transaction. Its bundles go back through `doctor restore`
//! (`quarantine::restore`, which reads both kinds).

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{bundle_file_name, plan_on, ExcisePlan, SessionPlan};
use crate::apply::{apply, basis_refusal, Step, Target, WritingCommand};
use crate::bundle::{Bundle, SchemaInfo};
use crate::db::excise::Excision;
use crate::db::write::Writer;
use crate::db::Workspace;
use crate::error::UserError;
use crate::notes::Notes;
use crate::quarantine::apply::bundle_dir_for;
use crate::quarantine::document::state;
use crate::quarantine::files::{check_out_dir, make_out_dir, write_durably, MadeDirs};
use crate::release::repair_basis::WriteBasis;
use crate::scan::{scan_workspace, ScanOptions, ScanReport};

/// What `doctor excise` is asked to do.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// Limit the excision to these sessions (empty: every damaged one).
    pub sessions: Vec<String>,
    /// `--out` (default: `wsledger-quarantine` beside the database).
    pub out: Option<PathBuf>,
    /// Remove the events (`--apply`); otherwise only the plan is shown.
    pub apply: bool,
    /// Back the database up first (not with `--no-backup`).
    pub backup: bool,
    /// Milliseconds since the epoch.
    pub now: i64,
}

/// Everything the plan is made from, at one snapshot.
struct Read {
    report: ScanReport,
    archived: std::collections::BTreeSet<String>,
    plan: ExcisePlan,
    schema: SchemaInfo,
    basis: Result<WriteBasis, Vec<String>>,
    binding: Option<String>,
}

fn werr(e: crate::db::write::WriteError) -> UserError {
    UserError::new(e.to_string(), e.hint())
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

/// Plans `doctor excise` on `db`, and with `apply` carries it out; returns the
/// document it prints.
pub fn run(db: &Path, req: &Request, notes: &mut dyn Notes) -> Result<Value, UserError> {
    let shown = db.display().to_string();
    let now = req.now;
    let out_dir = bundle_dir_for(db, &req.sessions, req.out.as_deref(), "excised")?;
    let Read {
        report,
        archived,
        plan,
        schema,
        basis,
        binding,
    } = Workspace::read(db, |ws| {
        let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        let archived = ws.archived_sessions()?;
        let plan = plan_on(ws, &report, &archived, &req.sessions)?;
        let facts = ws.schema_facts()?;
        Ok(Read {
            schema: facts.bundle_schema(),
            basis: crate::release::repair_basis::write_basis(&facts),
            binding: ws.root_binding()?,
            report,
            archived,
            plan,
        })
    })?;
    for s in &req.sessions {
        if !plan.sessions.iter().any(|p| &p.session_id == s) {
            notes.note(&format!(
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
        "before": state(&report, &archived),
        "after": plan.predicted.as_ref().map_or_else(|| state(&report, &archived), |r| state(r, &archived)),
        "schema_basis": basis.as_ref().ok().map(WriteBasis::to_json),
        "apply_refusal": basis.as_ref().err().map(|w| w.join("; ")),
        "notes": [],
    });
    let chosen: Vec<&SessionPlan> = plan.excised().collect();
    if !req.apply || chosen.is_empty() {
        if !chosen.is_empty() {
            match &basis {
                Err(why) => notes.note(&format!(
                    "dry run: nothing was written; --apply would refuse this file: {}",
                    why.join("; ")
                )),
                Ok(_) => {
                    notes.note("dry run: nothing was written; run again with --apply to excise")
                }
            }
        }
        return Ok(doc);
    }

    // --apply.
    let refusal = basis_refusal(&basis);
    let target = Target::new(db, binding.as_deref(), refusal.as_deref(), req.backup, now);
    let mut write = ExciseWrite::new(chosen, &out_dir, &schema, &shown, now, &basis);
    let applied = apply(&target, &mut write, notes)?;
    doc["backup"] = json!(applied.backup);
    doc["applied"] = Value::Bool(true);
    doc["after"] = state(&applied.after, &applied.archived_after);
    Ok(doc)
}

/// An excision's part of an apply: the bundle directory checked (before the lock)
/// and made (under it), each session's excision read again, then the bundles written
/// and the events deleted in one transaction.
pub struct ExciseWrite<'a> {
    pub chosen: Vec<&'a SessionPlan>,
    pub out_dir: &'a Path,
    /// Each chosen session's bundle.
    pub paths: Vec<PathBuf>,
    schema: &'a SchemaInfo,
    /// The database as the bundles name it.
    shown: &'a str,
    now: i64,
    /// The release whose schema the rows are taken from.
    release: Option<Value>,
}

impl<'a> ExciseWrite<'a> {
    pub fn new(
        chosen: Vec<&'a SessionPlan>,
        out_dir: &'a Path,
        schema: &'a SchemaInfo,
        shown: &'a str,
        now: i64,
        basis: &Result<WriteBasis, Vec<String>>,
    ) -> ExciseWrite<'a> {
        let stamp = crate::db::backup::utc_stamp(now);
        let paths = chosen
            .iter()
            .map(|p| out_dir.join(bundle_file_name(&p.session_id, &stamp)))
            .collect();
        ExciseWrite {
            chosen,
            out_dir,
            paths,
            schema,
            shown,
            now,
            release: basis.as_ref().ok().map(WriteBasis::to_json),
        }
    }
}

/// What an excision reads again and makes under the lock.
pub struct Staged {
    fresh: Vec<Excision>,
    made: MadeDirs,
}

impl WritingCommand for ExciseWrite<'_> {
    type Staged = Staged;
    type Written = ();

    fn check(&mut self) -> Result<(), UserError> {
        check_out_dir(self.out_dir)
    }

    fn stage(&mut self, writer: &Writer) -> Result<Staged, UserError> {
        let fresh = read_again(writer, &self.chosen)?;
        // The bundle directory only under the lock; removed again on a refusal.
        let made = make_out_dir(self.out_dir)?;
        Ok(Staged { fresh, made })
    }

    fn write(&mut self, step: Step<'_>, mut staged: Staged) -> Result<(), UserError> {
        self.write_excision(step.writer, &staged.fresh)?;
        staged.made.keep();
        step.notes.note(&format!(
            "excised {} event(s) from {} session(s); bundles in {}",
            self.chosen.iter().map(|p| p.targets.len()).sum::<usize>(),
            self.chosen.len(),
            self.out_dir.display()
        ));
        Ok(())
    }
}

/// Under the owner lock: each chosen session's excision read again (what the bundles
/// hold and the transaction checks), refusing one that can no longer be written.
fn read_again(writer: &Writer, chosen: &[&SessionPlan]) -> Result<Vec<Excision>, UserError> {
    let mut fresh = Vec::new();
    for p in chosen {
        let x = writer
            .read_excision(&p.session_id, &p.excision.events)
            .map_err(werr)?;
        if !x.blockers.is_empty() {
            return Err(UserError::new(
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

impl ExciseWrite<'_> {
    /// After the backup: writes and reads back each session's bundle, then deletes
    /// every excision in one transaction. A failure before the commit removes the
    /// bundles written so far.
    fn write_excision(&self, writer: &Writer, fresh: &[Excision]) -> Result<(), UserError> {
        let mut written: Vec<PathBuf> = Vec::new();
        let cleanup = |written: &[PathBuf]| {
            for p in written {
                let _ = std::fs::remove_file(p);
            }
        };
        for ((p, x), path) in self.chosen.iter().zip(fresh).zip(&self.paths) {
            let mut meta = Map::new();
            meta.insert("tool".into(), json!("wsledger doctor excise"));
            meta.insert("excised_at_ms".into(), json!(self.now));
            meta.insert("database".into(), json!(self.shown));
            if let Some(r) = &self.release {
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
                schema: self.schema.clone(),
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
                return Err(UserError::new(
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
            return Err(werr(e));
        }
        Ok(())
    }
}
