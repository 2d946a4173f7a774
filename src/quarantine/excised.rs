//! `doctor restore` of excision bundles (`kind: "excise"`, written by `doctor excise`
//! and `doctor repair`): each bundle checked against the workspace (its schema, its
//! columns, the events not back yet), then (through [`crate::apply`]) every row
//! inserted in one transaction.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::document::{bundle_rows_json, record_apply, restore_document, state};
use crate::apply::{apply, note_dry_run, write_only, Step, Target, WriteOptions};
use crate::bundle::Bundle;
use crate::db::excise::ExcisionRestore;
use crate::db::Workspace;
use crate::error::UserError;
use crate::notes::Notes;
use crate::scan::{scan_workspace, ScanOptions};

/// An excision bundle read for a restore.
pub struct Parsed {
    pub path: PathBuf,
    pub bundle: Bundle,
    pub item: ExcisionRestore,
}

/// Reads an excision bundle (`kind: "excise"`).
pub fn parse_bundle(path: &Path, bundle: Bundle) -> Result<Parsed, UserError> {
    let hint = "an excision bundle is written by `wsledger doctor excise --apply`";
    let bad = |what: &str| {
        UserError::new(
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

/// Checks the excision bundles against `db` and plans their restore, and with
/// `apply` carries it out; returns the document it prints.
pub fn run(
    db: &Path,
    parsed: &[Parsed],
    opts: &WriteOptions,
    notes: &mut dyn Notes,
) -> Result<Value, UserError> {
    let shown = db.display().to_string();
    let (report, archived, binding) = Workspace::read(db, |ws| {
        let facts = ws.schema_facts()?;
        let current = facts.bundle_schema();
        for p in parsed {
            let refuse = |what: String| {
                Err(UserError::new(
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
        Ok(Ok((report, ws.archived_sessions()?, ws.root_binding()?)))
    })??;
    let sessions = parsed
        .iter()
        .map(|p| {
            json!({
                "session_id": p.bundle.session_id,
                "events": p.item.events,
                "rows": bundle_rows_json(&p.bundle),
                "bundle": p.path.display().to_string(),
            })
        })
        .collect();
    let before = state(&report, &archived);
    let mut doc = restore_document(&shown, Some("excise"), sessions, before);
    if !opts.apply {
        note_dry_run(notes, None, "restore");
        return Ok(doc);
    }
    let target = Target::new(db, binding.as_deref(), None, opts.backup, opts.now);
    let mut write = write_only(|step| write_excised(step, parsed));
    let applied = apply(&target, &mut write, notes)?;
    record_apply(&mut doc, &applied);
    if let Some(n) = applied.written {
        doc["notes"] = json!([n]);
    }
    notes.note(&format!(
        "restored the excised rows of {} bundle(s)",
        parsed.len()
    ));
    Ok(doc)
}

/// An excision restore's part of an apply: every row inserted in one transaction.
/// Returns the note on rows that got a new rowid, if any did.
fn write_excised(step: Step<'_>, parsed: &[Parsed]) -> Result<Option<String>, UserError> {
    let items: Vec<ExcisionRestore> = parsed.iter().map(|p| p.item.clone()).collect();
    let moved = step
        .writer
        .restore_excised(&items)
        .map_err(|e| UserError::new(e.to_string(), e.hint()))?;
    if moved == 0 {
        return Ok(None);
    }
    let n = format!("{moved} row(s) got a new rowid: their old one was taken since");
    step.notes.note(&n);
    Ok(Some(n))
}
