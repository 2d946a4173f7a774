//! `doctor restore` of a rederive bundle (`kind: "rederive"`, written by `doctor
//! rederive` and `doctor repair`): it takes the rederive back, leaving the file as it
//! was before (the objects missing again, so Maka refuses it again). Checked against
//! the workspace (the schema the rederive left, every object it created still with its
//! text, every table it filled still holding exactly its rows), then (through
//! [`crate::apply`]) the registry rows it added deleted and the objects it created
//! dropped, in one transaction.

use std::path::Path;

use serde_json::{json, Value};

use super::document::{bundle_rows_json, record_apply, restore_document, state};
use crate::apply::{apply, note_dry_run, write_only, Target, WriteOptions};
use crate::bundle::Bundle;
use crate::db::derived::UnderiveSet;
use crate::db::Workspace;
use crate::error::UserError;
use crate::notes::Notes;
use crate::scan::{scan_workspace, ScanOptions};

/// Reads what a rederive bundle says it created.
fn parse(path: &Path, bundle: &Bundle) -> Result<UnderiveSet, UserError> {
    let bad = |what: &str| {
        UserError::new(
            format!(
                "`{}`: `rederive.{what}` is missing or malformed",
                path.display()
            ),
            "a rederive bundle is written by `wsledger doctor rederive --apply`",
        )
    };
    let meta = bundle
        .rederive
        .as_ref()
        .ok_or_else(|| bad("(the object)"))?;
    let objects = meta
        .get("objects")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("objects"))?
        .iter()
        .map(|o| {
            let key = o.get("object").and_then(Value::as_str)?;
            let sql = o.get("sql").and_then(Value::as_str)?;
            let derived = crate::release::derived::is_derived_key(key);
            derived.then(|| (key.to_owned(), sql.to_owned()))
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| bad("objects"))?;
    let registry_scopes: Vec<String> =
        serde_json::from_value(meta.get("registry_scopes").cloned().unwrap_or(json!([])))
            .map_err(|_| bad("registry_scopes"))?;
    Ok(UnderiveSet {
        objects,
        rows: bundle.tables.clone(),
        registry_scopes,
    })
}

/// Checks a rederive bundle against `db` and plans taking it back, and with `apply`
/// carries it out; returns the document it prints.
pub fn run(
    db: &Path,
    path: &Path,
    bundle: &Bundle,
    opts: &WriteOptions,
    notes: &mut dyn Notes,
) -> Result<Value, UserError> {
    let shown = db.display().to_string();
    let set = parse(path, bundle)?;
    let (report, archived, binding) = Workspace::read(db, |ws| {
        let refuse = |what: String| {
            Err(UserError::new(
                format!("`{}`: {what}; nothing was changed", path.display()),
                "a rederive bundle goes back only into the file it was written for, as the \
                 rederive left it",
            ))
        };
        if ws.schema_facts()?.bundle_schema() != bundle.schema {
            return Ok(refuse(
                "the workspace's schema versions are not those the rederive left".into(),
            ));
        }
        let texts = ws.schema_texts()?;
        for (key, sql) in &set.objects {
            if texts.get(key) != Some(sql) {
                return Ok(refuse(format!(
                    "`{key}` is not in the workspace as the rederive created it"
                )));
            }
        }
        let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        let archived = ws.archived_sessions()?;
        Ok(Ok((report, archived, ws.root_binding()?)))
    })??;
    let objects: Vec<Value> = set.objects.iter().map(|(k, _)| json!(k)).collect();
    let item = json!({
        "session_id": null,
        "removes": objects,
        "registry_scopes": set.registry_scopes,
        "rows": bundle_rows_json(bundle),
        "bundle": path.display().to_string(),
    });
    let mut doc = restore_document(
        &shown,
        Some("rederive"),
        vec![item],
        state(&report, &archived),
    );
    if !opts.apply {
        note_dry_run(notes, None, "take the rederive back");
        return Ok(doc);
    }
    let target = Target::new(db, binding.as_deref(), None, opts.backup, opts.now);
    let mut write = write_only(|step: crate::apply::Step<'_>| {
        step.writer.underive(&set).map_err(UserError::from)
    });
    let applied = apply(&target, &mut write, notes)?;
    record_apply(&mut doc, &applied);
    notes.note(&format!(
        "took the rederive back: {} object(s) removed again",
        set.objects.len()
    ));
    Ok(doc)
}
