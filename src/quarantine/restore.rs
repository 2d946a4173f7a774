//! `doctor restore`: quarantine bundles parsed and checked against the workspace,
//! then (through [`crate::apply`]) their session folders put back and every row
//! inserted in one transaction. Excision bundles (`kind: "excise"`) take their own
//! path (`super::excised`); a bundle without `kind` is a quarantine bundle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::document::{bundle_rows_json, folder_json, record_apply, restore_document, state};
use super::files::folder_copy_name;
use crate::apply::{apply, note_dry_run, write_only, Step, Target, WriteOptions};
use crate::bundle::{Bundle, SchemaInfo};
use crate::db::files::{self, FileRecord};
use crate::db::quarantine::RestoreItem;
use crate::db::Workspace;
use crate::error::UserError;
use crate::notes::Notes;
use crate::scan::{scan_workspace, ScanOptions, ScanReport};

/// What `doctor restore` is asked to do.
pub struct Request {
    /// The bundles written by `doctor quarantine --apply` or `doctor excise --apply`.
    pub bundles: Vec<PathBuf>,
    /// `--apply` (otherwise only the checks and the plan), `--no-backup`; no `--out`.
    pub write: WriteOptions,
}

/// Checks the bundles against `db` and plans `doctor restore`, and with `apply`
/// carries it out; returns the document it prints.
pub fn run(db: &Path, req: &Request, notes: &mut dyn Notes) -> Result<Value, UserError> {
    crate::apply::refuse_newer(db, req.write.apply, notes)?;
    // A rederive bundle is taken back on its own.
    if let Some((path, bundle)) = rederive_bundle(&req.bundles)? {
        return super::rederived::run(db, &path, &bundle, &req.write, notes);
    }
    // Excision bundles have their own restore.
    if let Some(excised) = excision_bundles(&req.bundles)? {
        return super::excised::run(db, &excised, &req.write, notes);
    }
    let shown = db.display().to_string();
    let parsed = req
        .bundles
        .iter()
        .map(|p| parse_bundle(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ids = BTreeSet::new();
    for p in &parsed {
        if !ids.insert(p.bundle.session_id.clone()) {
            return Err(UserError::new(
                format!("session `{}` is named by two bundles", p.bundle.session_id),
                "name each bundle once",
            ));
        }
    }
    // The checks and the plan at one snapshot.
    let (binding, report, archived, in_place) =
        Workspace::read(db, |ws| read_restore(ws, &parsed, &shown))??;
    let sessions = parsed
        .iter()
        .map(|p| {
            let mut v = json!({
                "session_id": p.bundle.session_id,
                "rows": bundle_rows_json(&p.bundle),
                "bundle": p.path.display().to_string(),
            });
            if let Some((copy, recs)) = &p.files {
                v["session_files"] =
                    folder_json(db, &p.bundle.session_id, ("from", copy.clone()), recs);
            }
            v
        })
        .collect();
    let before = state(&report, &archived);
    let mut doc = restore_document(&shown, None, sessions, before);
    if !req.write.apply {
        note_dry_run(notes, None, "restore");
        return Ok(doc);
    }
    let target = Target::new(
        db,
        binding.as_deref(),
        None,
        req.write.backup,
        req.write.now,
    );
    let mut write = write_only(|step| write_restore(step, &parsed, &ids, &in_place));
    let applied = apply(&target, &mut write, notes)?;
    record_apply(&mut doc, &applied);
    doc["notes"] = json!(applied.written);
    notes.note(&format!("restored {} session(s)", parsed.len()));
    Ok(doc)
}

/// A restore's part of an apply: the session folders put back (staged beside
/// `sessions/`), then every row inserted in one transaction. Returns the notes on what
/// did not go back exactly as it was.
fn write_restore(
    step: Step<'_>,
    parsed: &[Parsed],
    ids: &BTreeSet<String>,
    in_place: &[bool],
) -> Result<Vec<String>, UserError> {
    let (writer, printed) = (step.writer, step.notes);
    let db = writer.path().to_path_buf();
    // The catalog generation goes back to its value before the quarantine only when
    // every session of that quarantine comes back together and nothing else moved it.
    let first = parsed[0].generation;
    let whole_batch = parsed.iter().all(|p| p.generation == first)
        && parsed[0].sessions.iter().cloned().collect::<BTreeSet<_>>() == *ids;
    let generation = if whole_batch { first } else { None };
    let items: Vec<RestoreItem> = parsed
        .iter()
        .map(|p| RestoreItem {
            session_id: p.bundle.session_id.clone(),
            tables: p.bundle.tables.clone(),
            rowids: p.rowids.clone(),
            remove_tombstone: p.tombstone_added,
        })
        .collect();
    // The folders first: until the transaction below removes the tombstone, a folder
    // of a tombstoned session is one v0.1.2 and v0.1.3 accept at open; staged beside
    // `sessions/` (never in it), then renamed into place.
    let mut placed: Vec<PathBuf> = Vec::new();
    let unplace = |placed: &[PathBuf]| {
        for d in placed {
            let _ = files::remove_tree(d);
        }
    };
    for (p, already) in parsed.iter().zip(in_place) {
        let (Some((copy, recs)), false) = (&p.files, *already) else {
            continue;
        };
        let id = &p.bundle.session_id;
        let dest = files::session_dir(&db, id);
        let root = files::workspace_root(&db);
        let put = (|| {
            if let Some(parent) = dest.parent().filter(|d| !d.exists()) {
                std::fs::create_dir(parent)?;
                files::sync_dir(&root)?;
            }
            files::copy_tree(
                copy,
                recs,
                &root.join(format!(".wsledger-restore-{id}.tmp")),
                &dest,
            )
        })();
        if let Err(e) = put {
            unplace(&placed);
            return Err(UserError::new(
                format!(
                    "cannot put the session folder back into `{}`: {e}; nothing was changed",
                    dest.display()
                ),
                "check the permissions of the workspace directory (and free disk space)",
            ));
        }
        placed.push(dest);
    }
    let outcome = writer.restore(&items, generation).map_err(|e| {
        unplace(&placed);
        UserError::from(e)
    })?;
    let mut notes = Vec::new();
    if !outcome.generation_restored {
        notes.push(
            "session_catalog_state.generation was left counting up (other sessions of the \
             quarantine stay out, or the catalog changed since): Maka rereads its catalog"
                .to_owned(),
        );
    }
    if outcome.rowids_moved > 0 {
        notes.push(format!(
            "{} row(s) got a new rowid: their old one was taken since",
            outcome.rowids_moved
        ));
    }
    for n in &notes {
        printed.note(n);
    }
    Ok(notes)
}

/// The one rederive bundle named (`None` when none is; an error when it is named with
/// other bundles).
fn rederive_bundle(paths: &[PathBuf]) -> Result<Option<(PathBuf, Bundle)>, UserError> {
    let mut found = None;
    for path in paths {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        if let Ok(b) = Bundle::from_json_text(&text) {
            if b.kind.as_deref() == Some("rederive") {
                found = Some((path.clone(), b));
            }
        }
    }
    if found.is_some() && paths.len() > 1 {
        return Err(UserError::new(
            "a rederive bundle was named with other bundles",
            "take a rederive back on its own: name only its bundle",
        ));
    }
    Ok(found)
}

/// The bundles read as excision bundles when every one is (`None` when none is; an
/// error when kinds are mixed).
fn excision_bundles(paths: &[PathBuf]) -> Result<Option<Vec<super::excised::Parsed>>, UserError> {
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|e| {
            UserError::new(
                format!("cannot read bundle `{}`: {e}", path.display()),
                "name bundles written by `doctor quarantine --apply` or `doctor excise --apply`",
            )
        })?;
        match Bundle::from_json_text(&text) {
            Ok(b) if b.kind.as_deref() == Some("excise") => out.push((path, b)),
            // Read (and refused if need be) by the quarantine restore.
            _ => {}
        }
    }
    if out.is_empty() {
        return Ok(None);
    }
    if out.len() != paths.len() {
        return Err(UserError::new(
            "excision bundles and quarantine bundles were named together",
            "restore them in two runs: the excision bundles, then the quarantine bundles",
        ));
    }
    out.into_iter()
        .map(|(p, b)| super::excised::parse_bundle(p, b))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// What a quarantine bundle says about how to put its session back.
struct Parsed {
    path: PathBuf,
    bundle: Bundle,
    rowids: BTreeMap<String, Vec<i64>>,
    tombstone_added: bool,
    sessions: Vec<String>,
    generation: Option<(i64, i64)>,
    /// The session folder's copy beside the bundle and its files (v0.1.2, v0.1.3).
    files: Option<(PathBuf, Vec<FileRecord>)>,
}

fn parse_bundle(path: &Path) -> Result<Parsed, UserError> {
    let hint = "a quarantine bundle is written by `wsledger doctor quarantine --apply`";
    let text = std::fs::read_to_string(path).map_err(|e| {
        UserError::new(
            format!("cannot read bundle `{}`: {e}", path.display()),
            hint,
        )
    })?;
    let bundle = Bundle::from_json_text(&text)
        .map_err(|e| UserError::new(format!("`{}`: {e}", path.display()), hint))?;
    let Some(meta) = bundle.quarantine.clone() else {
        return Err(UserError::new(
            format!(
                "`{}` is a session bundle but not a quarantine bundle (it does not hold \
                 exactly what a conversation deletion removed)",
                path.display()
            ),
            hint,
        ));
    };
    let bad = |what: &str| {
        UserError::new(
            format!(
                "`{}`: `quarantine.{what}` is missing or malformed",
                path.display()
            ),
            hint,
        )
    };
    let rowids: BTreeMap<String, Vec<i64>> =
        serde_json::from_value(meta.get("rowids").cloned().unwrap_or(json!({})))
            .map_err(|_| bad("rowids"))?;
    let tombstone_added = meta
        .get("tombstone_added")
        .and_then(Value::as_bool)
        .ok_or_else(|| bad("tombstone_added"))?;
    let sessions: Vec<String> =
        serde_json::from_value(meta.get("sessions").cloned().unwrap_or(json!([])))
            .map_err(|_| bad("sessions"))?;
    let generation = match meta.get("catalog_generation") {
        Some(Value::Object(g)) => match (
            g.get("after").and_then(Value::as_i64),
            g.get("before").and_then(Value::as_i64),
        ) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => return Err(bad("catalog_generation")),
        },
        _ => None,
    };
    let files = match meta.get("session_files") {
        None | Some(Value::Null) => None,
        Some(f) => {
            let copy = f
                .get("copy")
                .and_then(Value::as_str)
                .filter(|c| *c == folder_copy_name(&bundle.session_id))
                .ok_or_else(|| bad("session_files.copy"))?;
            let recs: Vec<FileRecord> = serde_json::from_value(f["files"].clone())
                .map_err(|_| bad("session_files.files"))?;
            let safe = |r: &FileRecord| {
                Path::new(&r.path)
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
            };
            if !recs.iter().all(safe) {
                return Err(bad("session_files.files"));
            }
            let dir = path.parent().unwrap_or(Path::new("."));
            Some((dir.join(copy), recs))
        }
    };
    Ok(Parsed {
        path: path.to_path_buf(),
        bundle,
        rowids,
        tombstone_added,
        sessions,
        generation,
        files,
    })
}

/// Checks the bundles against the workspace and reads what a restore is planned
/// from. The outer error is the database's, the inner one a refusal.
#[allow(clippy::type_complexity)]
fn read_restore(
    ws: &Workspace,
    parsed: &[Parsed],
    shown: &str,
) -> Result<
    Result<(Option<String>, ScanReport, BTreeSet<String>, Vec<bool>), UserError>,
    crate::db::DbError,
> {
    let facts = ws.schema_facts()?;
    let current = facts.bundle_schema();
    for p in parsed {
        let refuse = |what: String| {
            UserError::new(
                format!("`{}`: {what}; nothing was changed", p.path.display()),
                "restore into a workspace with the schema the bundle was taken from",
            )
        };
        if p.bundle.schema != current {
            let name = |s: &SchemaInfo| {
                crate::release::generation_by_versions(
                    s.user_version,
                    s.registry.as_ref(),
                    s.capabilities.as_ref(),
                )
                .map_or_else(
                    || "an unknown release".to_owned(),
                    |g| format!("Maka {}", g.display()),
                )
            };
            return Ok(Err(refuse(format!(
                "the bundle was taken from a file of {} (runtime schema {}), this workspace is \
                 {} (runtime schema {}): a bundle goes back only into the generation it came from",
                name(&p.bundle.schema),
                p.bundle.schema.user_version,
                name(&current),
                current.user_version
            ))));
        }
        for (table, rows) in &p.bundle.tables {
            if !facts.tables.iter().any(|t| t == table) {
                return Ok(Err(refuse(format!("the workspace has no table `{table}`"))));
            }
            let shape = ws.table_shape(table)?;
            for r in rows {
                let cols: Vec<&str> = r.columns.iter().map(|(c, _)| c.as_str()).collect();
                if cols != shape.columns.iter().map(String::as_str).collect::<Vec<_>>() {
                    return Ok(Err(refuse(format!(
                        "the columns of `{table}` differ from the bundle's"
                    ))));
                }
            }
        }
        let live = ws.deletion(&p.bundle.session_id)?;
        if !live.is_empty() {
            return Ok(Err(UserError::new(
                format!(
                    "session `{}` already has rows in `{shown}`; nothing was changed",
                    p.bundle.session_id
                ),
                "a session is restored only while it is quarantined",
            )));
        }
    }
    // The session folders: each copy must be what its bundle records, and the
    // folder must not be in `sessions/` yet (unless a restore that stopped after
    // putting it back left exactly it there).
    let mut in_place = Vec::new();
    for p in parsed {
        let Some((copy, recs)) = &p.files else {
            in_place.push(false);
            continue;
        };
        let refuse = |what: String| {
            Ok(Err(UserError::new(
                format!("`{}`: {what}; nothing was changed", p.path.display()),
                "a quarantine keeps the session folder's copy beside its bundle; restore \
                 from the bundle directory as the quarantine wrote it",
            )))
        };
        match files::tree_matches(copy, recs) {
            Ok(true) => {}
            Ok(false) => {
                return refuse(format!(
                    "the session folder copy `{}` differs from the files the bundle records",
                    copy.display()
                ))
            }
            Err(e) => {
                return refuse(format!(
                    "the session folder copy `{}` cannot be read ({e})",
                    copy.display()
                ))
            }
        }
        let dest = files::session_dir(ws.path(), &p.bundle.session_id);
        if std::fs::symlink_metadata(&dest).is_err() {
            in_place.push(false);
        } else if files::tree_matches(&dest, recs).unwrap_or(false) {
            in_place.push(true);
        } else {
            return Ok(Err(UserError::new(
                format!("`{}` already exists; nothing was changed", dest.display()),
                "a session is restored only while it is quarantined: its folder must not \
                 be in `sessions/`",
            )));
        }
    }
    let binding = ws.root_binding()?;
    let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
    let archived = ws.archived_sessions()?;
    Ok(Ok((binding, report, archived, in_place)))
}
