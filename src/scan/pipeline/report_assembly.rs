//! The report put together: after the walk (totals, the walker's end, supersession
//! payloads compared), or without one for a ledger wsledger does not read.

use std::collections::BTreeSet;

use super::store::Store;
use super::ScanOptions;
use crate::db::{DbError, Workspace};
use crate::scan::{ScanReport, ScanStore, Tables, Walker};

/// The report of a file whose `runtime_events` wsledger does not read (a shape no
/// generation it knows defines): the schema's word and no ledger check at all (the
/// report names the table, `ledger_not_read`).
pub(super) fn unread_ledger(
    ws: &Workspace,
    opts: ScanOptions,
    schema: crate::db::SchemaFacts,
) -> Result<ScanReport, DbError> {
    let tables = crate::scan::Tables {
        sessions: 0,
        runs: 0,
        operations: 0,
        integrity: if opts.integrity {
            Some(ws.quick_check()?)
        } else {
            None
        },
        schema,
    };
    let mut report = crate::scan::report::build(
        Walker::new(),
        tables,
        crate::scan::Ordinals::default(),
        Vec::new(),
    );
    report.summary.live_snapshot = ws.is_live();
    Ok(report)
}

/// After the walk: the totals, the walker's end-of-scan work and the supersession
/// groups' payload comparison.
pub(super) fn finish_scan(
    ws: &Workspace,
    opts: ScanOptions,
    schema: crate::db::SchemaFacts,
    excluded: &BTreeSet<String>,
    walker: Walker,
    store: &mut Store<'_>,
) -> Result<ScanReport, DbError> {
    let readable = crate::db::shape::ReadableTables::of(&schema.objects);
    let has = |t: &str| readable.reads(t);
    let count = |t: &str| -> Result<usize, DbError> {
        Ok(if has(t) {
            ws.count_rows(t)? as usize
        } else {
            0
        })
    };
    // Excluded sessions are counted out of the totals (their rows would be gone).
    let sessions_gone = if has("session_metadata") {
        excluded
            .iter()
            .filter(|s| ws.session_exists(s).unwrap_or(false))
            .count()
    } else {
        excluded.len()
    };
    let runs_total = store.header_count()? as usize;
    let tables = Tables {
        sessions: if has("session_metadata") {
            count("session_metadata")?
        } else {
            ws.event_session_count()? as usize
        }
        .saturating_sub(sessions_gone),
        runs: runs_total,
        operations: count("tool_operations")?.saturating_sub(store.gone.operations.len()),
        integrity: if opts.integrity {
            Some(ws.quick_check()?)
        } else {
            None
        },
        schema,
    };
    let mut report = walker.finish(store, tables)?;
    report.journal_refs = store.journal_refs.take();
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
