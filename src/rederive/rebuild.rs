//! The tool projections re-derived from the runtime events, as Maka's rebuild
//! (`rebuildToolProjectionsFromRuntimeEventsSync`, the same in every release from v0.1.2
//! to main) fills them: the ledger scanned in store order, stopping on any scanner issue
//! or undecodable row; one `tool_operations` row per dispatched operation
//! (`outcome_committed` with its response, else `prepared`; `version` 1 plus its tail);
//! one journal row `<operation>_prepared` at the dispatch's `committed_at` and, with a
//! response, `<operation>_outcome` at the response's.
//!
//! The rows are returned in the order Maka's live writers committed them (each
//! operation row with its dispatch, each journal row with its event: `runtime_events`
//! rowid order), which numbers `journal_seq` as the file had it: Maka's rebuild
//! numbers them in its scan order instead, but reads `journal_seq` only to order one
//! operation's rows, which both orders keep (the dispatch before the response).
//! Operations with recovery facts (reconcile, decision) are not modelled: the rebuild
//! refuses them (no production build writes them).

use std::collections::HashMap;

use crate::bundle::{Cell, Row};
use crate::db::{DbError, Workspace};
use crate::ledger::scanner::{Operation, ScanOptions, ToolLedgerScanner};
use crate::release::Rules;

/// The re-derived rows, each table in commit order; journal rows without `journal_seq`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rebuilt {
    pub operations: Vec<Row>,
    pub journal: Vec<Row>,
}

fn text(s: impl Into<String>) -> Cell {
    Cell::Text(s.into().into_bytes())
}

fn row(columns: Vec<(&str, Cell)>) -> Row {
    Row {
        columns: columns
            .into_iter()
            .map(|(n, c)| (n.to_owned(), c))
            .collect(),
    }
}

/// Re-derives both projections from the ledger of `ws` under the scanner rules of the
/// release that wrote it. `Ok(Err(why))` when Maka's rebuild would stop (or is not
/// modelled), in words.
pub fn rebuild(ws: &Workspace, rules: &Rules) -> Result<Result<Rebuilt, String>, DbError> {
    let options = ScanOptions {
        dispatch_parent_refs: rules.dispatch_parent_refs,
        ..ScanOptions::store_rows()
    };
    let mut scanner = ToolLedgerScanner::new(options);
    let mut ops: Vec<Operation> = Vec::new();
    let mut commits: HashMap<String, i64> = HashMap::new();
    let mut current: Option<String> = None;
    let mut failure: Option<String> = None;
    ws.for_each_event(|r| {
        if failure.is_some() {
            return;
        }
        if current.as_deref() != Some(r.invocation_id.as_str()) {
            ops.extend(scanner.close_invocation());
            current = Some(r.invocation_id.clone());
        }
        match crate::scan::decode_row(&r) {
            Err(e) => {
                failure = Some(format!(
                    "event {} does not decode ({e}): Maka's rebuild stops on it",
                    r.event_id
                ))
            }
            Ok(event) => {
                commits.insert(r.event_id.clone(), r.committed_at);
                if let Err(e) = scanner.push(&event) {
                    failure = Some(e.to_string());
                }
            }
        }
    })?;
    if let Some(why) = failure {
        return Ok(Err(why));
    }
    ops.extend(scanner.close_invocation());
    let late = scanner.take_late_touches();
    let scan = scanner.finish();
    ops.extend(scan.operations);
    if let Some(i) = scan.issues.first() {
        return Ok(Err(format!(
            "the ledger holds damage Maka's rebuild stops on ({} at event {})",
            i.code.as_str(),
            i.event_id
        )));
    }
    if !late.is_empty() {
        return Ok(Err(
            "the ledger holds tool recovery facts, which wsledger does not rebuild".to_owned(),
        ));
    }
    // (row, rowid of the event it was committed with)
    let mut operations: Vec<(Row, String)> = Vec::new();
    let mut journal: Vec<(Row, String)> = Vec::new();
    for op in &ops {
        let (Some(op_id), Some(d)) = (op.operation_id.as_ref(), op.dispatch.as_ref()) else {
            continue;
        };
        if !op.reconcile_event_ids.is_empty() || !op.decision_event_ids.is_empty() {
            return Ok(Err(format!(
                "operation {op_id} has tool recovery facts, which wsledger does not rebuild"
            )));
        }
        let Some(call) = op.call_event_id.as_ref() else {
            return Ok(Err(format!(
                "operation {op_id} has a dispatch and no call: Maka's rebuild stops on it"
            )));
        };
        let (op_id, dispatch) = (op_id.to_string(), d.event_id.to_string());
        let hash = d.canonical_args_hash.to_string();
        let mode = d.recovery_mode.as_str().to_owned();
        let response = op.response.as_ref().map(|r| r.event_id.to_string());
        let committed = |id: &str| commits.get(id).copied().unwrap_or_default();
        let spine = [
            ("invocation_id", op.invocation_id.to_string()),
            ("run_id", op.run_id.to_string()),
            ("turn_id", op.turn_id.to_string()),
        ];
        let mut cols = vec![("operation_id", text(op_id.clone()))];
        cols.extend(spine.iter().map(|(n, v)| (*n, text(v.clone()))));
        cols.extend([
            ("provider_tool_call_id", text(op.tool_call_id.to_string())),
            ("tool_name", text(op.tool_name.to_string())),
            ("canonical_args_hash", text(hash.clone())),
            ("recovery_mode", text(mode.clone())),
            (
                "current_state",
                text(if response.is_some() {
                    "outcome_committed"
                } else {
                    "prepared"
                }),
            ),
            ("call_event_id", text(call.to_string())),
            ("result_event_id", response.clone().map_or(Cell::Null, text)),
            ("version", Cell::Integer(1 + i64::from(response.is_some()))),
            ("dispatch_event_id", text(dispatch.clone())),
        ]);
        operations.push((row(cols), dispatch.clone()));
        let entry = |id: String, state: &str, event: &str| {
            let mut cols = vec![
                ("journal_event_id", text(id)),
                ("operation_id", text(op_id.clone())),
            ];
            cols.extend(spine.iter().map(|(n, v)| (*n, text(v.clone()))));
            cols.extend([
                ("state", text(state)),
                ("runtime_event_id", text(event)),
                ("canonical_args_hash", text(hash.clone())),
                ("recovery_mode", text(mode.clone())),
                ("external_handle", Cell::Null),
                ("metadata_json", Cell::Null),
                ("committed_at", Cell::Integer(committed(event))),
            ]);
            (row(cols), event.to_owned())
        };
        journal.push(entry(format!("{op_id}_prepared"), "prepared", &dispatch));
        if let Some(r) = &response {
            journal.push(entry(format!("{op_id}_outcome"), "outcome_committed", r));
        }
    }
    // Commit order: the rowid of the event each row was written with.
    let rowids = ws.event_rowids(
        operations
            .iter()
            .map(|(_, e)| e.as_str())
            .chain(journal.iter().map(|(_, e)| e.as_str())),
    )?;
    let order = |rows: &mut Vec<(Row, String)>| {
        rows.sort_by_key(|(_, e)| rowids.get(e).copied().unwrap_or(i64::MAX));
    };
    order(&mut operations);
    order(&mut journal);
    Ok(Ok(Rebuilt {
        operations: operations.into_iter().map(|(r, _)| r).collect(),
        journal: journal.into_iter().map(|(r, _)| r).collect(),
    }))
}

/// Journal rows numbered from `base` (`sqlite_sequence` of the table, 0 without a row),
/// as `AUTOINCREMENT` numbers them, `journal_seq` first.
pub fn numbered(journal: &[Row], base: i64) -> Vec<Row> {
    journal
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut columns = vec![("journal_seq".to_owned(), Cell::Integer(base + 1 + i as i64))];
            columns.extend(r.columns.iter().cloned());
            Row { columns }
        })
        .collect()
}
