//! The JSON document `doctor quarantine` and `doctor restore` print (rendered by
//! `report::quarantine`): the gate and start-up state, rows per table, folders.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::apply::Applied;
use crate::db::files::{self, FileRecord};
use crate::db::quarantine::Deletion;
use crate::scan::startup::startup_blockers;
use crate::scan::ScanReport;

/// Gate and start-up state of a scan.
pub fn state(report: &ScanReport, archived: &BTreeSet<String>) -> Value {
    let blockers = startup_blockers(report, archived);
    json!({
        "tool_writes_refused": report.maka_gate.tool_writes_refused,
        // Maka refusing to open the file (`startup_refused`) blocks start-up too.
        "startup_blocked": !blockers.is_empty()
            || report.startup.as_ref().is_some_and(|s| !s.opens),
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
