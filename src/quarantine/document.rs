//! The JSON document `doctor quarantine` and `doctor restore` print (rendered by
//! `report::bundle`): the gate and start-up state, rows per table, folders, the head
//! of a restore's document and what an apply did.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::apply::Applied;
use crate::bundle::Bundle;
use crate::db::files::{self, FileRecord};
use crate::db::quarantine::Deletion;
use crate::scan::startup::startup_blockers;
use crate::scan::ScanReport;

/// Gate and start-up state of a scan.
pub fn state(report: &ScanReport, archived: &BTreeSet<String>) -> Value {
    let blockers = startup_blockers(report, archived);
    // Not known for a file of a Maka newer than this wsledger (issue notes, 41).
    let known = report.startup.as_ref().is_none_or(|s| s.known());
    json!({
        "tool_writes_refused": report.maka_gate.tool_writes_refused,
        // Maka refusing to open the file (`startup_refused`) blocks start-up too.
        "startup_blocked": known.then(|| !blockers.is_empty()
            || report.startup.as_ref().is_some_and(|s| s.refused())),
        "startup_blockers": blockers
            .iter()
            .map(|(s, r, c)| {
                // A session header names no run.
                let run = (!r.is_empty()).then_some(r);
                json!({"session_id": s, "run_id": run, "code": c})
            })
            .collect::<Vec<_>>(),
    })
}

/// What an apply did, into the document of the command that ran it: the backup,
/// `applied`, and the state the rescan found (`after`).
pub fn record_apply<W>(doc: &mut Value, applied: &Applied<W>) {
    doc["backup"] = json!(applied.backup);
    doc["applied"] = Value::Bool(true);
    doc["after"] = state(&applied.after, &applied.archived_after);
}

/// `doctor restore`'s document before an apply (`kind`: the bundles', when not
/// quarantine bundles): its `sessions` and the state now (`before`).
pub fn restore_document(
    shown: &str,
    kind: Option<&str>,
    sessions: Vec<Value>,
    before: Value,
) -> Value {
    let mut doc = json!({"schema_version": 1, "command": "restore"});
    if let Some(kind) = kind {
        doc["kind"] = json!(kind);
    }
    doc["workspace"] = json!(shown);
    doc["applied"] = Value::Bool(false);
    doc["backup"] = Value::Null;
    doc["sessions"] = Value::Array(sessions);
    doc["before"] = before;
    doc["notes"] = json!([]);
    doc
}

/// Rows per table of a bundle (tables without rows left out).
pub fn bundle_rows_json(bundle: &Bundle) -> Value {
    let rows = bundle.tables.iter().filter(|(_, r)| !r.is_empty());
    Value::Object(
        rows.map(|(t, r)| (t.clone(), Value::from(r.len())))
            .collect(),
    )
}

pub fn rows_json(d: &Deletion) -> Value {
    Value::Object(
        d.counts()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(t, n)| (t, Value::from(n)))
            .collect(),
    )
}

/// `session_files` of a quarantine plan entry (`moved_to`) or restore (`from`).
pub fn folder_json(db: &Path, session: &str, other: (&str, PathBuf), recs: &[FileRecord]) -> Value {
    json!({
        "folder": files::session_dir(db, session).display().to_string(),
        other.0: other.1.display().to_string(),
        "files": recs,
    })
}
