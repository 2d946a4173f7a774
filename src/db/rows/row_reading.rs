//! A row of each table read from the statement it is on into its type, with the column
//! lists the queries select.

use rusqlite::Row;

use super::columns::{int, opt_text, text, Columns};
use super::{EventRow, HeaderRow, JournalRow, OperationRow};
pub(super) const EVENTS_OF_SESSION: &str =
    "SELECT event_id, session_id, invocation_id, run_id, turn_id, \
     event_seq, event_kind, payload_json, committed_at FROM runtime_events \
     WHERE session_id = ?1 ORDER BY invocation_id, event_seq, event_id";

pub(super) fn event_row(r: &Row<'_>) -> rusqlite::Result<EventRow> {
    Ok(EventRow {
        event_id: text(r, 0)?,
        session_id: text(r, 1)?,
        invocation_id: text(r, 2)?,
        run_id: text(r, 3)?,
        turn_id: text(r, 4)?,
        event_seq: int(r, 5)?,
        event_kind: text(r, 6)?,
        payload_json: text(r, 7)?,
        committed_at: int(r, 8)?,
    })
}

pub(super) const HEADER_COLUMNS: &str = "session_id, run_id, created_at, record_json";
pub(super) const OPERATION_COLUMNS: &str = "operation_id, invocation_id, run_id, turn_id, \
     provider_tool_call_id, tool_name, canonical_args_hash, recovery_mode, current_state, \
     call_event_id, result_event_id, version, dispatch_event_id";
pub(super) const JOURNAL_COLUMNS: &str =
    "journal_seq, journal_event_id, operation_id, invocation_id, \
     run_id, turn_id, state, runtime_event_id, canonical_args_hash, recovery_mode, \
     metadata_json, committed_at";

pub(super) fn header_row(r: &(impl Columns + ?Sized)) -> rusqlite::Result<HeaderRow> {
    Ok(HeaderRow {
        session_id: text(r, 0)?,
        run_id: text(r, 1)?,
        created_at: int(r, 2)?,
        record_json: text(r, 3)?,
    })
}

pub(in crate::db) fn operation_row(r: &Row<'_>) -> rusqlite::Result<OperationRow> {
    Ok(OperationRow {
        operation_id: text(r, 0)?,
        invocation_id: text(r, 1)?,
        run_id: text(r, 2)?,
        turn_id: text(r, 3)?,
        provider_tool_call_id: text(r, 4)?,
        tool_name: text(r, 5)?,
        canonical_args_hash: text(r, 6)?,
        recovery_mode: text(r, 7)?,
        current_state: text(r, 8)?,
        call_event_id: text(r, 9)?,
        result_event_id: opt_text(r, 10)?,
        version: int(r, 11)?,
        dispatch_event_id: opt_text(r, 12)?,
    })
}

pub(super) fn journal_row(r: &Row<'_>) -> rusqlite::Result<JournalRow> {
    Ok(JournalRow {
        journal_seq: int(r, 0)?,
        journal_event_id: text(r, 1)?,
        operation_id: text(r, 2)?,
        invocation_id: text(r, 3)?,
        run_id: text(r, 4)?,
        turn_id: text(r, 5)?,
        state: text(r, 6)?,
        runtime_event_id: opt_text(r, 7)?,
        canonical_args_hash: opt_text(r, 8)?,
        recovery_mode: opt_text(r, 9)?,
        metadata_json: opt_text(r, 10)?,
        committed_at: int(r, 11)?,
    })
}
