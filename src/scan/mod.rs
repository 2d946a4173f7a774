//! `doctor scan`: every finding about one workspace, computed from its rows.
//!
//! The caller streams `runtime_events` rows in Maka's health-scan order
//! (`invocation_id, event_seq, event_id`) into a [`Walker`], then calls
//! [`Walker::finish`]. The walk is bounded by what is open, not by the file: when an
//! invocation ends, its runs are assessed against their headers and its operations
//! against their stored projection rows (point lookups through a [`ScanStore`]), and
//! both are dropped. What stays for the whole walk is small per item: a 128-bit
//! fingerprint per run seen, Maka's operation-id index (about 50 bytes per bound
//! operation), a 128-bit sum over event ids (for the ordinal check), and findings. A
//! store may also answer from what it read once up front (a [`HeaderBrief`] per run
//! header, a projection digest per operation id) so that plainly terminal runs and
//! operations whose stored projection matches need no lookup.
//!
//! Exactness does not depend on the usual shapes: a run whose rows come back in a
//! later invocation is re-read from the store and assessed again; an operation
//! reached after its invocation ended (a re-used operation id, a recovery fact) is
//! reconciled at the end; headers without events are found by count, then by key, and
//! stored operations no dispatch explains likewise (see `dispatched_rows_explained`).

pub mod builds;
mod decode;
mod event_batch;
mod finish;
mod header_brief;
mod judge_runs;
pub mod listed;
mod ordinals;
pub mod pipeline;
pub mod projection;
mod projection_checks;
pub mod release;
mod report;
mod run_acc;
pub mod runs;
pub mod startup;
mod walk;

pub use decode::{decode_row, decode_row_as, decode_row_with, Decoded};
pub use event_batch::EventBatch;
pub use header_brief::HeaderBrief;
pub use ordinals::{OrdinalSummary, Ordinals};
pub use pipeline::{scan_path, scan_workspace, scan_workspace_without, ScanOptions, Threads};
pub use report::*;
pub use run_acc::RunAcc;

use std::collections::BTreeSet;

use crate::fast_hash::{HashMap, HashSet};

use crate::db::{
    DbError, EventRow, HeaderRow, JournalRow, OperationRow, SchemaFacts, StoredOperationKey,
};
use crate::event::RuntimeEvent;
use crate::findings::Finding;
use crate::json::JsStr;
use crate::ledger::scanner::{Operation, ToolLedgerScanner};
use crate::release::Rules;
use judge_runs::RunResult;

/// The reserved session of Maka's workspace-version authority: events without run
/// headers, never written by anyone else.
pub const WORKSPACE_AUTHORITY_SESSION: &str = "maka_workspace_authority";

/// A row that does not decode, in scan order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeFailure {
    pub event_id: String,
    pub session_id: String,
    pub run_id: String,
    pub message: String,
}

/// What [`ScanStore::for_each_header_key`] calls for each header: session, run, and
/// the run's [`ScanStore::mark_walked`] mark when the store keeps one.
pub type HeaderKeyVisit<'a> = dyn FnMut(&str, &str, Option<bool>) -> Result<(), DbError> + 'a;

/// The lookups the walk needs from the database (point queries through indexes).
pub trait ScanStore {
    /// The `core_agent_runs` row of `(session, run)`, if the table exists and has it.
    fn header(&mut self, session_id: &str, run_id: &str) -> Result<Option<HeaderRow>, DbError>;
    /// The `tool_operations` row of an operation id.
    fn operation(&mut self, operation_id: &str) -> Result<Option<OperationRow>, DbError>;
    /// The `tool_operations` row of `(invocation, provider tool call id)`.
    fn operation_by_call(
        &mut self,
        invocation_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<OperationRow>, DbError>;
    /// Whether the stored projection rows of `op`'s operation id are known to be
    /// exactly the rows Maka's rebuild writes (see [`projection::StoredDigests`]), so
    /// that [`ScanStore::operation`] and [`ScanStore::journal`] need not be asked.
    /// `false` when unknown.
    fn projection_matches(&mut self, _op: &Operation, _commits: &HashMap<String, i64>) -> bool {
        false
    }
    /// The number of stored `tool_operations` rows with a `dispatch_event_id`, when the
    /// store counted them beside the digests [`ScanStore::projection_matches`] answers
    /// from; `None` otherwise.
    fn dispatched_rows(&self) -> Option<u64> {
        None
    }
    /// The decoded header of `(session, run)` reduced to what classifying its run
    /// needs, when known without a lookup (see [`HeaderBrief`]); `None` when unknown.
    fn header_brief(&mut self, _session_id: &str, _run_id: &str) -> Option<&HeaderBrief> {
        None
    }
    /// Marks `(session, run)` as walked. `Some(was)` when the store keeps such marks
    /// for this run (one bit per run header it read up front, see [`HeaderBrief`]),
    /// `was` telling whether it was marked before; `None` when it keeps none for it
    /// (the walk then remembers the run itself).
    fn mark_walked(&mut self, _session_id: &str, _run_id: &str) -> Option<bool> {
        None
    }
    /// The journal rows of an operation id, in journal order.
    fn journal(&mut self, operation_id: &str) -> Result<Vec<JournalRow>, DbError>;
    /// Every row of one run, in scan order.
    fn run_rows(&mut self, session_id: &str, run_id: &str) -> Result<Vec<EventRow>, DbError>;
    /// The turn of the opening fact a migration shelved for `(session, run)` (newer
    /// Maka's `runtime_legacy_invocation_openings`), when the store read them.
    fn shelved_opening(&mut self, _session_id: &str, _run_id: &str) -> Option<String> {
        None
    }
    /// Whether the file's run headers can be read at all (a newer Maka drops
    /// `core_agent_runs.record_json`): when not, a run without an opening fact cannot
    /// be judged.
    fn headers_readable(&self) -> bool {
        true
    }
    /// Number of `core_agent_runs` rows (0 without the table).
    fn header_count(&mut self) -> Result<u64, DbError>;
    /// Every `(session, run)` of `core_agent_runs`, with its [`ScanStore::mark_walked`]
    /// mark when the store keeps one for it.
    fn for_each_header_key(&mut self, f: &mut HeaderKeyVisit<'_>) -> Result<(), DbError>;
    /// Every stored `tool_operations` row, reduced (nothing without the table).
    fn for_each_operation(
        &mut self,
        f: &mut dyn FnMut(StoredOperationKey) -> Result<(), DbError>,
    ) -> Result<(), DbError>;
    /// The session of the events of `(invocation, run)`.
    fn session_of(&mut self, invocation_id: &str, run_id: &str) -> Result<Option<String>, DbError>;
    /// Every ordinal row `(session, ordinal, event id)` in primary-key order; `false`
    /// without the table.
    fn for_each_ordinal(&mut self, f: &mut dyn FnMut(&str, i64, &str)) -> Result<bool, DbError>;
    /// The ordinal rows reduced with the walk's event hasher (a store may have it
    /// ready, read beside the walk).
    fn ordinal_summary(&mut self, hasher: &EventHasher) -> Result<OrdinalSummary, DbError> {
        OrdinalSummary::read(hasher, |f| self.for_each_ordinal(f))
    }
    /// Events without an ordinal row `(event_id, session_id, run_id)` (the exact, slow
    /// query; only run when the fast check fails).
    fn events_without_ordinal(&mut self) -> Result<Vec<(String, String, String)>, DbError>;
}

/// The keyed hash summed over event ids, for the ordinal check.
pub type EventHasher = crate::hash128::Keyed128;

/// Streams rows; see the module docs.
pub struct Walker {
    /// The rules of the release that wrote the file.
    rules: Rules,
    scanner: ToolLedgerScanner,
    keep_all_runs: bool,
    // The current invocation.
    current_invocation: Option<String>,
    expected_seq: i64,
    inv_runs: Vec<((String, String), RunAcc)>,
    /// `committed_at` of the invocation's tool-bearing rows, for the projection rebuild.
    inv_commits: HashMap<String, i64>,
    // Small, global.
    run_hasher: crate::hash128::Keyed128,
    closed_runs: HashSet<u128>,
    split_runs: BTreeSet<(String, String)>,
    headers_found: u64,
    event_hasher: EventHasher,
    event_sum: u128,
    events: u64,
    // Results (as many as findings, or runs that are not plainly terminal).
    decode_failures: Vec<DecodeFailure>,
    seq_findings: Vec<Finding>,
    run_results: Vec<RunResult>,
    /// `(operation id, finding)`.
    unsettled: Vec<(JsStr, Finding)>,
    projection: Vec<(JsStr, Finding)>,
    supersession: Vec<SupersessionGroup>,
    /// One bit per bound operation (by its index in the scanner) whose stored
    /// projection the store vouched for ([`ScanStore::projection_matches`]), and how
    /// many bits are set; see `dispatched_rows_explained`.
    vouched_bits: Vec<u64>,
    vouched: u64,
    /// Expected operations closed but not yet compared with the stored projection,
    /// in closing order, while the comparisons happen elsewhere (see
    /// [`Walker::defer_projection_checks`]); `None` when they happen as each closes.
    deferred: Option<Vec<ProjectionCheck>>,
    /// Runs closed but not yet judged against their header brief, in closing order,
    /// while that happens elsewhere (see [`Walker::defer_run_checks`]).
    deferred_runs: Option<Vec<RunCheck>>,
    /// The rules read what only a Maka newer than main writes.
    newer: bool,
    /// Events that only a Maka newer than main writes, by what they use
    /// ([`crate::event::newer::newer_parts`]), and how many events.
    newer_parts: std::collections::BTreeMap<&'static str, u64>,
    newer_events: u64,
    /// Runs judged off the event spine (their opening fact), by fingerprint.
    spine_runs: HashSet<u128>,
    /// Runs with events that neither a header nor an opening fact describes, where
    /// headers cannot be read: by fingerprint, and the first few.
    unjudged_runs: HashSet<u128>,
    unjudged_sample: Vec<(String, String)>,
}

/// A closed run whose judgement (plainly terminal or not, from its header brief) is
/// made away from the walk: see [`Walker::defer_run_checks`].
pub struct RunCheck {
    session_id: String,
    run_id: String,
    acc: RunAcc,
}

/// An expected operation whose stored projection rows are compared away from the
/// walk: what [`Walker`] needs to finish with it once the answer is known.
pub struct ProjectionCheck {
    op: Operation,
    /// Its index among the scanner's bound operations, when it closed.
    bound: Option<usize>,
    commits: projection::OperationCommits,
}

impl Default for Walker {
    fn default() -> Self {
        Walker::new()
    }
}

/// Tool-bearing as Maka's gate defines it: a call or response, or a dispatch or
/// recovery fact.
pub fn is_tool_bearing(event: &RuntimeEvent) -> bool {
    matches!(
        event.content_kind(),
        Some("function_call" | "function_response")
    ) || event
        .actions
        .as_ref()
        .is_some_and(|a| a.tool_dispatch.is_some() || a.tool_recovery.is_some())
}

/// What the scan reads from the other tables up front.
#[derive(Default)]
pub struct Tables {
    pub schema: SchemaFacts,
    /// Number of `session_metadata` rows (of sessions seen in events without it).
    pub sessions: usize,
    /// Number of `core_agent_runs` rows.
    pub runs: usize,
    /// Number of `tool_operations` rows.
    pub operations: usize,
    pub integrity: Option<Vec<String>>,
}
