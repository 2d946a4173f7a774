//! `doctor quarantine` from plan to rescan: which sessions move, what each bundle
//! holds, and the apply (through [`crate::apply`]) that writes the bundles and then
//! deletes the sessions as Maka's conversation deletion does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::document::{folder_json, record_apply, rows_json, state};
use super::files::{
    check_out_dir, folder_copy_name, io_err, make_out_dir, refuse_out_in_sessions, session_folder,
    write_bundle, Folder, MadeDirs, WrittenFiles,
};
use super::{bundle_file_name, damaged_sessions, Reason};
use crate::apply::{
    apply, basis_refusal, note_dry_run, Step, Target, WriteOptions, WritingCommand,
};
use crate::bundle::{Bundle, SchemaInfo};
use crate::db::files;
use crate::db::quarantine::Deletion;
use crate::db::write::Writer;
use crate::db::{DbError, Workspace};
use crate::error::UserError;
use crate::notes::Notes;
use crate::release::repair_basis::WriteBasis;
use crate::scan::WORKSPACE_AUTHORITY_SESSION;
use crate::scan::{scan_workspace, scan_workspace_without, ScanOptions, ScanReport};

/// What a command that writes bundles (`doctor quarantine`, `doctor excise`) is asked
/// to do.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The sessions named with `--session`: quarantine moves exactly these, excise
    /// excises only in these (none: every damaged one).
    pub sessions: Vec<String>,
    pub write: WriteOptions,
}

impl Request {
    /// The bundle directory (`--out`, or the default), after the refusals every
    /// command that writes bundles makes before it reads anything (see
    /// [`bundle_dir_for`]; `verb`: what it would do to a session).
    pub fn bundle_dir(&self, db: &Path, verb: &str) -> Result<PathBuf, UserError> {
        bundle_dir_for(db, &self.sessions, self.write.out.as_deref(), verb)
    }
}

/// The default bundle directory: `wsledger-quarantine` beside the database.
pub fn default_out_dir(db: &Path) -> PathBuf {
    db.parent()
        .unwrap_or(Path::new("."))
        .join("wsledger-quarantine")
}

/// What every command that writes bundles (quarantine, excise) refuses before it reads
/// anything: naming Maka's workspace-authority session (`verb`: what it would do to
/// it), or a bundle directory inside the workspace's `sessions/`. Returns the bundle
/// directory (`out`, or the default).
pub fn bundle_dir_for(
    db: &Path,
    sessions: &[String],
    out: Option<&Path>,
    verb: &str,
) -> Result<PathBuf, UserError> {
    if sessions.iter().any(|s| s == WORKSPACE_AUTHORITY_SESSION) {
        return Err(UserError::new(
            format!("`{WORKSPACE_AUTHORITY_SESSION}` is Maka's workspace-authority session; it is never {verb}"),
            "name conversation sessions only",
        ));
    }
    let out_dir = out.map_or_else(|| default_out_dir(db), Path::to_path_buf);
    refuse_out_in_sessions(&out_dir, db)?;
    Ok(out_dir)
}

/// What every command that writes bundles plans from besides its own reads, at the
/// plan's snapshot: the scan and the archived sessions, the schema the bundles
/// record, the release schema an apply writes in (or why it would refuse), and the
/// root binding that names Maka's owner lock.
pub struct BundleBasis {
    pub report: ScanReport,
    pub archived: BTreeSet<String>,
    pub schema: SchemaInfo,
    pub basis: Result<WriteBasis, Vec<String>>,
    pub binding: Option<String>,
}

impl BundleBasis {
    /// The schema and the binding read after the command's own reads (`report` and
    /// `archived` are the scan it planned from).
    pub fn read(
        ws: &Workspace,
        report: ScanReport,
        archived: BTreeSet<String>,
    ) -> Result<BundleBasis, DbError> {
        let facts = ws.schema_facts()?;
        Ok(BundleBasis {
            report,
            archived,
            schema: crate::release::repair_basis::bundle_schema(&facts),
            basis: crate::release::repair_basis::write_basis_before_rederive(&facts),
            binding: ws.root_binding()?,
        })
    }

    /// The command's document before an apply: its `sessions`, the state now and
    /// the state it predicts (`after`), the release schema or the refusal.
    pub fn document(
        &self,
        command: &str,
        shown: &str,
        sessions: Vec<Value>,
        after: Value,
    ) -> Value {
        json!({
            "schema_version": 1,
            "command": command,
            "workspace": shown,
            "applied": false,
            "backup": null,
            "sessions": sessions,
            "before": state(&self.report, &self.archived),
            "after": after,
            "schema_basis": self.basis.as_ref().ok().map(WriteBasis::to_json),
            "apply_refusal": basis_refusal(&self.basis),
            "notes": [],
        })
    }

    /// What a dry run that would write says (`to`: "run again with --apply to ...").
    pub fn note_dry_run(&self, notes: &mut dyn Notes, to: &str) {
        note_dry_run(notes, basis_refusal(&self.basis).as_deref(), to);
    }

    /// The apply of `write` on `db`, and its bundles in `out_dir` (naming the
    /// database as `shown`).
    pub fn target<'a>(
        &'a self,
        db: &'a Path,
        write: &WriteOptions,
        out_dir: &'a Path,
        shown: &'a str,
    ) -> (Target<'a>, BundleTarget<'a>) {
        let refusal = basis_refusal(&self.basis);
        let binding = self.binding.as_deref();
        let target = Target::new(db, binding, refusal.as_deref(), write.backup, write.now);
        let bundles = BundleTarget::new(out_dir, &self.schema, shown, write.now, &self.basis);
        (target, bundles)
    }
}

/// What a quarantine is planned from.
struct QuarantineRead {
    basis: BundleBasis,
    targets: BTreeMap<String, Vec<Reason>>,
    deletions: Vec<Deletion>,
    predicted: ScanReport,
    /// Titles and last activity of the target sessions.
    labels: BTreeMap<String, crate::db::diagnosis::SessionLabelRow>,
    /// The release keeps session folders (v0.1.2, v0.1.3), and each target's.
    keeps_files: bool,
    folders: Vec<Folder>,
}

/// Reads what a quarantine is planned from. The outer error is the database's (a read
/// [`Workspace::read`] may do again), the inner one a refusal.
fn read_quarantine(
    ws: &Workspace,
    sessions: &[String],
    shown: &str,
) -> Result<Result<QuarantineRead, UserError>, DbError> {
    let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
    let archived = ws.archived_sessions()?;
    let damaged = damaged_sessions(&report, &archived);
    let mut targets: BTreeMap<String, Vec<Reason>> = BTreeMap::new();
    if sessions.is_empty() {
        targets = damaged.clone();
    } else {
        for s in sessions {
            let mut reasons = damaged.get(s).cloned().unwrap_or_default();
            reasons.push(Reason {
                code: "named".into(),
                id: None,
            });
            targets.insert(s.clone(), reasons);
        }
    }
    let mut deletions = Vec::new();
    for s in targets.keys() {
        let d = ws.deletion(s)?;
        if d.is_empty() {
            return Ok(Err(UserError::new(
                format!("session `{s}` has no rows in `{shown}`"),
                "list the sessions with `wsledger doctor scan`",
            )));
        }
        deletions.push(d);
    }
    let excluded: BTreeSet<String> = targets.keys().cloned().collect();
    let predicted = if excluded.is_empty() {
        report.clone()
    } else {
        scan_workspace_without(ws, ScanOptions::default(), &excluded, &mut |_, _| {})?
    };
    let basis = BundleBasis::read(ws, report, archived)?;
    let labels = ws.session_labels(targets.keys().map(String::as_str))?;
    let keeps_files = ws.transcripts_in_files()?;
    let mut folders = Vec::new();
    for s in targets.keys() {
        match session_folder(ws.path(), keeps_files, s) {
            Ok(f) => folders.push(f),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(QuarantineRead {
        basis,
        targets,
        deletions,
        predicted,
        labels,
        keeps_files,
        folders,
    }))
}

/// Plans `doctor quarantine` on `db`, and with `apply` carries it out; returns the
/// document it prints.
pub fn run(db: &Path, req: &Request, notes: &mut dyn Notes) -> Result<Value, UserError> {
    crate::apply::refuse_newer(db, req.write.apply, notes)?;
    let shown = db.display().to_string();
    let out_dir = req.bundle_dir(db, "quarantined")?;
    // Everything the plan is made from, at one snapshot.
    let read = Workspace::read(db, |ws| read_quarantine(ws, &req.sessions, &shown))??;
    let targets = &read.targets;
    let sessions = targets
        .iter()
        .zip(&read.deletions)
        .zip(&read.folders)
        .map(|(((s, reasons), d), folder)| {
            let label = read.labels.get(s);
            let mut v = json!({
                "session_id": s,
                "name": label.and_then(|l| l.name.clone()),
                "last_activity_ms": label.and_then(|l| l.last_activity_ms),
                "reasons": reasons,
                "rows": rows_json(d),
                "bundle": out_dir.join(bundle_file_name(s)).display().to_string(),
                "blockers": d.blockers,
            });
            if read.keeps_files {
                // The folder moves beside the bundle (null: the session has none).
                v["session_files"] = folder.as_ref().map_or(Value::Null, |recs| {
                    folder_json(db, s, ("moved_to", out_dir.join(folder_copy_name(s))), recs)
                });
            }
            v
        })
        .collect();
    let basis = &read.basis;
    let after = state(&read.predicted, &basis.archived);
    let mut doc = basis.document("quarantine", &shown, sessions, after);
    // A quarantine changes no schema: Maka still refuses to open a file it refuses now.
    if basis.report.startup.as_ref().is_some_and(|s| s.refused()) {
        doc["after"]["startup_blocked"] = Value::Bool(true);
    }
    let blocked: Vec<String> = read
        .deletions
        .iter()
        .filter(|d| !d.blockers.is_empty())
        .map(|d| d.session_id.clone())
        .collect();
    if !req.write.apply || targets.is_empty() {
        if !req.write.apply && !targets.is_empty() {
            basis.note_dry_run(notes, "quarantine");
        }
        return Ok(doc);
    }
    if !blocked.is_empty() {
        return Err(UserError::new(
            format!(
                "Maka's own deletion of session(s) {} would fail ({}); nothing was changed",
                blocked.join(", "),
                read.deletions
                    .iter()
                    .flat_map(|d| d.blockers.iter().cloned())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            "run without --apply to see the blockers",
        ));
    }

    // --apply.
    let (target, bundles) = basis.target(db, &req.write, &out_dir, &shown);
    let mut write = QuarantineWrite { targets, bundles };
    let applied = apply(&target, &mut write, notes)?;
    record_apply(&mut doc, &applied);
    let (moved, written_notes) = applied.written;
    doc["notes"] = json!(written_notes);
    notes.note(&format!(
        "quarantined {moved} session(s); bundles in {}",
        out_dir.display()
    ));
    Ok(doc)
}

/// Where a command's bundles go, and what each records besides its rows: the schema
/// they are taken in, the database as the bundles name it, the time, and the release
/// whose schema that is (a restore refuses a workspace of another generation).
pub struct BundleTarget<'a> {
    pub out_dir: &'a Path,
    schema: &'a SchemaInfo,
    shown: &'a str,
    now: i64,
    release: Option<Value>,
}

impl<'a> BundleTarget<'a> {
    pub fn new(
        out_dir: &'a Path,
        schema: &'a SchemaInfo,
        shown: &'a str,
        now: i64,
        basis: &Result<WriteBasis, Vec<String>>,
    ) -> BundleTarget<'a> {
        BundleTarget {
            out_dir,
            schema,
            shown,
            now,
            release: basis.as_ref().ok().map(WriteBasis::to_json),
        }
    }

    /// The time the bundles record (milliseconds since the epoch).
    pub fn now(&self) -> i64 {
        self.now
    }

    /// The schema the rows are taken in.
    pub fn schema(&self) -> &SchemaInfo {
        self.schema
    }

    /// The start of a bundle's record of itself: the tool, when (under `at`), and
    /// the database.
    pub fn meta(&self, tool: &str, at: &str) -> Map<String, Value> {
        let mut meta = Map::new();
        meta.insert("tool".into(), json!(tool));
        meta.insert(at.into(), json!(self.now));
        meta.insert("database".into(), json!(self.shown));
        meta
    }

    /// The release whose schema the rows are taken in, into `meta` (when known).
    pub fn add_release(&self, meta: &mut Map<String, Value>) {
        if let Some(r) = &self.release {
            meta.insert("release".into(), r.clone());
        }
    }
}

/// A quarantine's part of an apply: the bundle directory checked (before the lock)
/// and made (under it), the sessions read again, then [`write_quarantine`].
pub struct QuarantineWrite<'a> {
    pub targets: &'a BTreeMap<String, Vec<Reason>>,
    pub bundles: BundleTarget<'a>,
}

/// What a quarantine reads again and makes under the lock.
pub struct Staged {
    fresh: Vec<Deletion>,
    generation: Option<i64>,
    folders: Vec<Folder>,
    made: MadeDirs,
}

impl WritingCommand for QuarantineWrite<'_> {
    type Staged = Staged;
    /// How many sessions moved, and notes on folders left in place.
    type Written = (usize, Vec<String>);

    fn check(&mut self) -> Result<(), UserError> {
        check_out_dir(self.bundles.out_dir)
    }

    fn stage(&mut self, writer: &Writer) -> Result<Staged, UserError> {
        let (fresh, generation, folders) = read_targets(writer, self.targets)?;
        // The bundle directory only under the lock; removed again on a refusal.
        let made = make_out_dir(self.bundles.out_dir)?;
        Ok(Staged {
            fresh,
            generation,
            folders,
            made,
        })
    }

    fn write(&mut self, step: Step<'_>, mut staged: Staged) -> Result<Self::Written, UserError> {
        let (moved, written_notes) = write_quarantine(
            step.writer,
            self.targets,
            &staged.fresh,
            &staged.folders,
            staged.generation,
            &self.bundles,
        )?;
        staged.made.keep();
        for n in &written_notes {
            step.notes.warn(n);
        }
        Ok((moved, written_notes))
    }
}

/// Under the owner lock: the catalog generation and each target session's rows read
/// again (what the bundles hold and the transaction checks), refusing a session
/// Maka's own deletion could not delete.
#[allow(clippy::type_complexity)]
pub fn read_targets(
    writer: &Writer,
    targets: &BTreeMap<String, Vec<Reason>>,
) -> Result<(Vec<Deletion>, Option<i64>, Vec<Folder>), UserError> {
    let werr = |e: crate::db::write::WriteError| UserError::new(e.to_string(), e.hint());
    let generation = writer.catalog_generation().map_err(werr)?;
    let keeps_files = writer.transcripts_in_files().map_err(werr)?;
    let mut folders = Vec::new();
    for s in targets.keys() {
        folders.push(session_folder(writer.path(), keeps_files, s)?);
    }
    let mut fresh = Vec::new();
    for s in targets.keys() {
        let d = writer.read_deletion(s).map_err(werr)?;
        if !d.blockers.is_empty() {
            return Err(UserError::new(
                format!("session `{s}` cannot be deleted: {}", d.blockers.join("; ")),
                "run without --apply to see the blockers",
            ));
        }
        fresh.push(d);
    }
    Ok((fresh, generation, folders))
}

/// After the backup: writes and reads back each session's bundle (with a checked
/// copy of its folder, v0.1.2 and v0.1.3), then deletes the sessions in one
/// transaction (`Writer::quarantine`), then removes the folders. A failure before the
/// commit removes the bundles and copies written so far. Returns how many sessions
/// moved, and notes on folders left in place.
///
/// The order is safe at every point for those releases' open-time check of
/// `sessions/` (a folder without a session row is refused unless tombstoned): until
/// the commit the folder and its row are both there; after it the folder is
/// tombstoned, so one left behind by a crash is accepted (and still in the bundle).
pub fn write_quarantine(
    writer: &Writer,
    targets: &BTreeMap<String, Vec<Reason>>,
    fresh: &[Deletion],
    folders: &[Folder],
    generation: Option<i64>,
    bundles: &BundleTarget<'_>,
) -> Result<(usize, Vec<String>), UserError> {
    let werr = |e: crate::db::write::WriteError| UserError::new(e.to_string(), e.hint());
    let db = writer.path().to_path_buf();
    let out_dir = bundles.out_dir;
    let removed_meta = fresh.iter().filter(|d| d.has_metadata()).count() as i64;
    let all: Vec<Value> = targets.keys().map(|s| Value::from(s.clone())).collect();
    let mut written = WrittenFiles::default();
    for (((s, reasons), d), folder) in targets.iter().zip(fresh).zip(folders) {
        let mut meta = bundles.meta("wsledger doctor quarantine", "quarantined_at_ms");
        meta.insert("sessions".into(), Value::Array(all.clone()));
        meta.insert("reasons".into(), json!(reasons));
        bundles.add_release(&mut meta);
        meta.insert("rowids".into(), json!(d.rowids));
        meta.insert("tombstone_added".into(), json!(d.tombstone.is_none()));
        meta.insert(
            "catalog_generation".into(),
            match generation {
                Some(g) => json!({"before": g, "after": g + removed_meta}),
                None => Value::Null,
            },
        );
        if let Some(recs) = folder {
            let copy = out_dir.join(folder_copy_name(s));
            let copied = (|| {
                // A copy left by an earlier run that did not go through.
                if copy.exists() {
                    std::fs::remove_dir_all(&copy)?;
                }
                files::copy_tree(
                    &files::session_dir(&db, s),
                    recs,
                    &out_dir.join(format!(".{}.tmp", folder_copy_name(s))),
                    &copy,
                )
            })();
            if let Err(e) = copied {
                written.remove();
                return Err(io_err("copy the session folder into", &copy, &e));
            }
            written.push(copy);
            meta.insert(
                "session_files".into(),
                json!({
                    "folder": format!("{}/{s}", files::SESSIONS_DIR),
                    "copy": folder_copy_name(s),
                    "files": recs,
                }),
            );
        }
        let bundle = Bundle {
            session_id: d.session_id.clone(),
            schema: bundles.schema.clone(),
            tables: d.tables.clone(),
            quarantine: Some(Value::Object(meta)),
            kind: Some("quarantine".into()),
            excise: None,
            rederive: None,
        };
        let path = out_dir.join(bundle_file_name(s));
        write_bundle(&path, &bundle, &mut written, "nothing was deleted", true)?;
    }
    if let Err(e) = writer.quarantine(fresh, generation, bundles.now) {
        written.remove();
        return Err(werr(e));
    }
    // The rows are gone and the sessions tombstoned: now their folders go, as the
    // release's own removal does after its transaction.
    let mut notes = Vec::new();
    for (s, folder) in targets.keys().zip(folders) {
        let Some(recs) = folder else { continue };
        let dir = files::session_dir(&db, s);
        let removed = files::tree_matches(&dir, recs).and_then(|same| {
            if same {
                files::remove_tree(&dir).map(|_| true)
            } else {
                Ok(false)
            }
        });
        match removed {
            Ok(true) => {}
            Ok(false) => notes.push(format!(
                "the session folder `{}` changed after it was copied into the bundle; it was \
                 left in place (the session is tombstoned, so Maka ignores it)",
                dir.display()
            )),
            Err(e) => notes.push(format!(
                "the session folder `{}` could not be removed ({e}); it is in the bundle, and \
                 the session is tombstoned, so Maka ignores it",
                dir.display()
            )),
        }
    }
    Ok((fresh.len(), notes))
}
