//! `doctor excise` from plan to rescan: the plan's document, and the apply (through
//! [`crate::apply`]) that writes and reads back a bundle per session, then deletes
//! every excision in one transaction. Its bundles go back through `doctor restore`
//! (`quarantine::restore`, which reads both kinds).

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{bundle_file_name, plan_on, SessionPlan};
use crate::apply::{apply, Step, WritingCommand};
use crate::bundle::Bundle;
use crate::db::excise::Excision;
use crate::db::write::Writer;
use crate::db::Workspace;
use crate::error::UserError;
use crate::notes::Notes;
use crate::quarantine::apply::{BundleBasis, BundleTarget};
use crate::quarantine::document::{record_apply, state};
use crate::quarantine::files::{check_out_dir, make_out_dir, write_bundle, MadeDirs, WrittenFiles};
use crate::scan::{scan_workspace, ScanOptions};

/// What `doctor excise` is asked to do (as `doctor quarantine` is).
pub use crate::quarantine::apply::Request;

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
    crate::apply::refuse_newer(db, req.write.apply, notes)?;
    let shown = db.display().to_string();
    let out_dir = req.bundle_dir(db, "excised")?;
    // Everything the plan is made from, at one snapshot.
    let (plan, basis) = Workspace::read(db, |ws| {
        let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        let archived = ws.archived_sessions()?;
        let plan = plan_on(ws, &report, &archived, &req.sessions)?;
        Ok((plan, BundleBasis::read(ws, report, archived)?))
    })?;
    for s in &req.sessions {
        if !plan.sessions.iter().any(|p| &p.session_id == s) {
            notes.note(&format!(
                "session `{s}` holds no damaged event; nothing to excise there"
            ));
        }
    }
    let stamp = crate::db::backup::utc_stamp(req.write.now);
    let bundle_of = |p: &SessionPlan| out_dir.join(bundle_file_name(&p.session_id, &stamp));
    let sessions = plan
        .sessions
        .iter()
        .map(|p| session_json(p, p.excised().then(|| bundle_of(p)).as_deref()))
        .collect();
    let after = state(
        plan.predicted.as_ref().unwrap_or(&basis.report),
        &basis.archived,
    );
    let mut doc = basis.document("excise", &shown, sessions, after);
    let chosen: Vec<&SessionPlan> = plan.excised().collect();
    if !req.write.apply || chosen.is_empty() {
        if !chosen.is_empty() {
            basis.note_dry_run(notes, "excise");
        }
        return Ok(doc);
    }

    // --apply.
    let (target, bundles) = basis.target(db, &req.write, &out_dir, &shown);
    let mut write = ExciseWrite::new(chosen, bundles);
    let applied = apply(&target, &mut write, notes)?;
    record_apply(&mut doc, &applied);
    Ok(doc)
}

/// An excision's part of an apply: the bundle directory checked (before the lock)
/// and made (under it), each session's excision read again, then the bundles written
/// and the events deleted in one transaction.
pub struct ExciseWrite<'a> {
    pub chosen: Vec<&'a SessionPlan>,
    pub bundles: BundleTarget<'a>,
    /// Each chosen session's bundle.
    pub paths: Vec<PathBuf>,
}

impl<'a> ExciseWrite<'a> {
    pub fn new(chosen: Vec<&'a SessionPlan>, bundles: BundleTarget<'a>) -> ExciseWrite<'a> {
        let stamp = crate::db::backup::utc_stamp(bundles.now());
        let paths = chosen
            .iter()
            .map(|p| {
                bundles
                    .out_dir
                    .join(bundle_file_name(&p.session_id, &stamp))
            })
            .collect();
        ExciseWrite {
            chosen,
            bundles,
            paths,
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
        check_out_dir(self.bundles.out_dir)
    }

    fn stage(&mut self, writer: &Writer) -> Result<Staged, UserError> {
        let fresh = read_again(writer, &self.chosen)?;
        // The bundle directory only under the lock; removed again on a refusal.
        let made = make_out_dir(self.bundles.out_dir)?;
        Ok(Staged { fresh, made })
    }

    fn write(&mut self, step: Step<'_>, mut staged: Staged) -> Result<(), UserError> {
        self.write_excision(step.writer, &staged.fresh)?;
        staged.made.keep();
        step.notes.note(&format!(
            "excised {} event(s) from {} session(s); bundles in {}",
            self.chosen.iter().map(|p| p.targets.len()).sum::<usize>(),
            self.chosen.len(),
            self.bundles.out_dir.display()
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
        let mut written = WrittenFiles::default();
        for ((p, x), path) in self.chosen.iter().zip(fresh).zip(&self.paths) {
            let mut meta = self.bundles.meta("wsledger doctor excise", "excised_at_ms");
            self.bundles.add_release(&mut meta);
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
                schema: self.bundles.schema().clone(),
                tables: x.tables.clone(),
                quarantine: None,
                kind: Some("excise".into()),
                excise: Some(Value::Object(meta)),
                rederive: None,
            };
            write_bundle(path, &bundle, &mut written, "nothing was excised", false)?;
        }
        if let Err(e) = writer.excise(fresh) {
            written.remove();
            return Err(werr(e));
        }
        Ok(())
    }
}
