//! Commands' building blocks that combine the database with the pure core: open,
//! read, compute. Rendering and argument handling stay in `cli`.

use std::path::Path;

use crate::db::{DbError, Workspace};
use crate::scan::{ScanReport, Tables, Walker};

/// Options of a scan.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanOptions {
    /// Also run SQLite's `PRAGMA quick_check` over the whole file.
    pub integrity: bool,
}

/// Reads every table the scan needs and computes the report. `progress` is called
/// with (rows read, total rows) now and then.
pub fn scan_workspace(
    ws: &Workspace,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    let schema = ws.schema_facts()?;
    let has = |t: &str| schema.tables.iter().any(|x| x == t);
    if !has("runtime_events") {
        return Err(DbError::NotAWorkspace {
            path: ws.path().to_path_buf(),
        });
    }
    let total = ws.event_count()?;
    let mut walker = Walker::new();
    let mut n = 0u64;
    ws.for_each_event(|row| {
        walker.push_row(row);
        n += 1;
        if n.is_multiple_of(4096) {
            progress(n, total);
        }
    })?;
    progress(n, total);
    let has_ordinals = has("runtime_session_event_ordinals");
    let tables = Tables {
        headers: if has("core_agent_runs") {
            Some(ws.run_headers()?)
        } else {
            None
        },
        operations: if has("tool_operations") {
            Some(ws.tool_operations()?)
        } else {
            None
        },
        journal: if has("tool_journal_events") {
            Some(ws.tool_journal()?)
        } else {
            None
        },
        sessions: if has("session_metadata") {
            Some(ws.sessions()?)
        } else {
            None
        },
        events_without_ordinal: if has_ordinals {
            ws.events_without_ordinal()?
        } else {
            Vec::new()
        },
        ordinal_gaps: if has_ordinals {
            ws.ordinal_gaps()?
        } else {
            Vec::new()
        },
        integrity: if opts.integrity {
            Some(ws.quick_check()?)
        } else {
            None
        },
        schema,
    };
    let mut report = walker.finish(tables);
    fill_identical(ws, &mut report)?;
    Ok(report)
}

/// Decides for each supersession group whether its occurrences carry the same fact (a
/// retry with a fresh id) or differ. Reads only the few payloads involved.
fn fill_identical(ws: &Workspace, report: &mut ScanReport) -> Result<(), DbError> {
    for group in &mut report.supersession {
        let ids: Vec<String> = group
            .occurrences
            .iter()
            .map(|o| o.event_id.clone())
            .collect();
        let payloads = ws.payloads_of(&ids)?;
        let facts: Vec<Option<String>> = ids
            .iter()
            .map(|id| payloads.get(id).and_then(|p| fact_without_identity(p)))
            .collect();
        group.identical = if facts.iter().all(Option::is_some) {
            Some(facts.windows(2).all(|w| w[0] == w[1]))
        } else {
            None
        };
    }
    Ok(())
}

/// The canonical text of an event without its `id` and `ts`: what a retry repeats.
fn fact_without_identity(payload: &str) -> Option<String> {
    let event = crate::event::decode_event_text(payload).ok()?;
    let mut json = crate::event::event_to_json(&event);
    if let crate::json::Json::Object(o) = &mut json {
        o.remove("id");
        o.remove("ts");
    }
    crate::json::stable_stringify(&json).ok()
}

/// Opens `db` read-only and scans it.
pub fn scan_path(
    db: &Path,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    let ws = Workspace::open_read_only(db)?;
    scan_workspace(&ws, opts, progress)
}
