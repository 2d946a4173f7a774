//! Rows exactly as stored, and the queries that read them. No interpretation here:
//! a column of an unexpected type is read as text so the core can judge it.

mod columns;
mod row_reading;
mod scan_reads;
mod whole_tables;

pub use columns::lossy;
pub(super) use columns::{int, opt_text, text};
pub(super) use row_reading::operation_row;

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::schema::SchemaObject;

/// One `runtime_events` row.
#[derive(Clone, Debug)]
pub struct EventRow {
    pub event_id: String,
    pub session_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
    pub event_seq: i64,
    pub event_kind: String,
    /// The payload text; bytes that are not UTF-8 are replaced as Node replaces them.
    pub payload_json: String,
    pub committed_at: i64,
}

impl EventRow {
    /// The same row, borrowed (`event_kind` is not part of it).
    pub fn borrowed(&self) -> EventRowRef<'_> {
        EventRowRef {
            event_id: Cow::Borrowed(&self.event_id),
            session_id: Cow::Borrowed(&self.session_id),
            invocation_id: Cow::Borrowed(&self.invocation_id),
            run_id: Cow::Borrowed(&self.run_id),
            turn_id: Cow::Borrowed(&self.turn_id),
            event_seq: self.event_seq,
            payload_json: Cow::Borrowed(&self.payload_json),
            committed_at: self.committed_at,
        }
    }
}

/// One `core_agent_runs` row.
#[derive(Clone, Debug)]
pub struct HeaderRow {
    pub session_id: String,
    pub run_id: String,
    pub created_at: i64,
    pub record_json: String,
}

/// One `tool_operations` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRow {
    pub operation_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
    pub provider_tool_call_id: String,
    pub tool_name: String,
    pub canonical_args_hash: String,
    pub recovery_mode: String,
    pub current_state: String,
    pub call_event_id: String,
    pub result_event_id: Option<String>,
    pub version: i64,
    pub dispatch_event_id: Option<String>,
}

/// One `tool_journal_events` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalRow {
    pub journal_seq: i64,
    pub journal_event_id: String,
    pub operation_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
    pub state: String,
    pub runtime_event_id: Option<String>,
    pub canonical_args_hash: Option<String>,
    pub recovery_mode: Option<String>,
    pub metadata_json: Option<String>,
    pub committed_at: i64,
}

/// One `session_metadata` row, reduced to what the doctor reads.
#[derive(Clone, Debug)]
pub struct SessionRow {
    pub session_id: String,
    pub is_archived: bool,
    pub payload_json: String,
}

/// Per-run facts from `core_agent_run_events`.
#[derive(Clone, Debug, Default)]
pub struct RunEventsSummary {
    pub count: i64,
    pub max_sequence: Option<i64>,
    /// `event_type` of the run events in sequence order.
    pub types: Vec<String>,
    /// Raw record JSON of each run event, in sequence order.
    pub records: Vec<String>,
}

/// `(session_id, run_id) → (snapshot count, max updated_at)`.
pub type SnapshotSummary = BTreeMap<(String, String), (i64, i64)>;

/// Receives `(session, run, sequence, record_json, header turn id)`.
pub type RunEventVisitor<'a> = dyn FnMut(&str, &str, i64, &str, Option<&str>) + 'a;

/// Everything about the schema that the doctor checks.
#[derive(Clone, Debug, Default)]
pub struct SchemaFacts {
    pub user_version: i64,
    pub tables: Vec<String>,
    pub objects: Vec<SchemaObject>,
    /// `operational_schema_migrations` (scope → version); `None` if the table is absent.
    pub registry: Option<BTreeMap<String, i64>>,
    /// `runtime_capabilities` (capability → version); `None` if the table is absent.
    pub capabilities: Option<BTreeMap<String, i64>>,
}

impl SchemaFacts {
    /// The schema as a bundle records it (a bundle goes back only into it).
    pub fn bundle_schema(&self) -> crate::bundle::SchemaInfo {
        crate::bundle::SchemaInfo {
            user_version: self.user_version,
            registry: self.registry.clone(),
            capabilities: self.capabilities.clone(),
        }
    }
}

/// The order of Maka's health scan and projection rebuild, with the columns the scan
/// reads: `event_id, session_id, invocation_id, run_id, turn_id, event_seq,
/// payload_json, committed_at`.
pub const EVENTS_IN_SCAN_ORDER: &str = "SELECT event_id, session_id, invocation_id, run_id, \
     turn_id, event_seq, payload_json, committed_at FROM runtime_events \
     ORDER BY invocation_id, event_seq, event_id";

/// The benchmark's first floor (`benches/scan.rs`): what the `sqlite3` tool is timed
/// reading in issue #16, the scan's rows in its order.
pub const EVENTS_AS_SQLITE3_READS: &str = "select invocation_id,event_seq,event_id,session_id,\
     run_id,turn_id,payload_json from runtime_events order by invocation_id,event_seq,event_id";

/// The benchmark's second floor: every table the scan reads, once each, with every
/// column it reads (`runtime_events` in the scan's order, the others in table order).
pub const TABLES_THE_SCAN_READS: &[&str] = &[
    "SELECT type, name, tbl_name, sql FROM sqlite_schema",
    "SELECT scope, version FROM operational_schema_migrations",
    "SELECT capability, version FROM runtime_capabilities",
    "SELECT count(*) FROM session_metadata",
    EVENTS_IN_SCAN_ORDER,
    "SELECT session_id, run_id, created_at, record_json FROM core_agent_runs",
    "SELECT session_id, run_id, sequence, record_json FROM core_agent_run_events",
    "SELECT operation_id, invocation_id, run_id, turn_id, provider_tool_call_id, tool_name, \
     canonical_args_hash, recovery_mode, current_state, call_event_id, result_event_id, \
     version, dispatch_event_id FROM tool_operations",
    "SELECT journal_seq, journal_event_id, operation_id, invocation_id, run_id, turn_id, \
     state, runtime_event_id, canonical_args_hash, recovery_mode, metadata_json, \
     committed_at FROM tool_journal_events",
    "SELECT session_id, ordinal, event_id FROM runtime_session_event_ordinals",
];

/// One `runtime_events` row as SQLite hands it out (valid during the callback): text
/// is borrowed unless it had to be converted.
#[derive(Clone, Debug)]
pub struct EventRowRef<'a> {
    pub event_id: Cow<'a, str>,
    pub session_id: Cow<'a, str>,
    pub invocation_id: Cow<'a, str>,
    pub run_id: Cow<'a, str>,
    pub turn_id: Cow<'a, str>,
    pub event_seq: i64,
    pub payload_json: Cow<'a, str>,
    pub committed_at: i64,
}

/// A `runtime_events` row with its text columns as stored bytes ([`stored_bytes`]),
/// not yet read as text: [`lossy`] of each is the column as [`EventRowRef`] has it.
#[derive(Clone, Debug)]
pub struct StoredEventRow<'a> {
    /// `event_id`, `session_id`, `invocation_id`, `run_id`, `turn_id`, in that order.
    pub ids: [Cow<'a, [u8]>; 5],
    pub event_seq: i64,
    pub committed_at: i64,
}

/// A stored `tool_operations` row reduced to what the extra-row check needs.
#[derive(Clone, Debug)]
pub struct StoredOperationKey {
    pub operation_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub provider_tool_call_id: String,
    pub tool_name: String,
    pub has_dispatch: bool,
}

/// One `tool_operations` row as SQLite hands it out (valid during the callback),
/// converted as [`OperationRow`] converts it, borrowed where it can be.
pub struct OperationRowRef<'a> {
    pub operation_id: Cow<'a, str>,
    /// `invocation_id, run_id, turn_id, provider_tool_call_id, tool_name,
    /// canonical_args_hash, recovery_mode, current_state, call_event_id`.
    pub texts: [Cow<'a, str>; 9],
    pub result_event_id: Option<Cow<'a, str>>,
    pub version: i64,
    pub dispatch_event_id: Option<Cow<'a, str>>,
}

/// One `tool_journal_events` row as SQLite hands it out, converted as
/// [`JournalRow`] converts it (without `journal_seq`).
pub struct JournalRowRef<'a> {
    /// `journal_event_id, operation_id, invocation_id, run_id, turn_id, state`.
    pub texts: [Cow<'a, str>; 6],
    /// `runtime_event_id, canonical_args_hash, recovery_mode, metadata_json`.
    pub opts: [Option<Cow<'a, str>>; 4],
    pub committed_at: i64,
}

/// One `session_metadata` row as the session-header check (`session_header`) needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionHeaderRow {
    pub session_id: String,
    pub payload_json: String,
    /// `metadata_version`, as stored (SQLite may hold any type there).
    pub metadata_version: serde_json::Value,
    /// `committed_at`, as stored.
    pub committed_at: serde_json::Value,
}
