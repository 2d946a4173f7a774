//! Maka's tool-ledger scanner (`scanToolLedger`), as a streaming scanner.
//!
//! Events are pushed one at a time in scan order (for a workspace: `invocation_id,
//! event_seq, event_id`). Every issue Maka computes is kept, in Maka's emission order;
//! Maka's write gate names only the first one. Operations keep compact facts (ids,
//! names, hashes), never whole events.
//!
//! Memory: by default the scanner keeps every operation and one identity "spine" per
//! invocation. When the caller promises store order ([`ScanOptions::assume_store_order`])
//! everything that only matters inside one invocation (its spine, provider-call-id
//! index, pending call arguments and response refs, and its operations, handed out by
//! [`ToolLedgerScanner::close_invocation`]) is dropped when the invocation ends; what
//! stays is the operation-id index (Maka's `byOperation`, about 50 bytes per bound
//! operation) and the issues. The global event-id set can be skipped when ids are
//! known to be unique ([`ScanOptions::assume_unique_event_ids`]).
//!
//! Pure: no I/O.

mod invocations;
mod lanes;
mod operation_facts;
mod operation_ids;
mod scan_events;

pub use lanes::{tool_ledger_lane, tool_ledger_lane_as, Lane};

use crate::fast_hash::{HashMap, HashSet};
use invocations::{InvocationState, Spine};
use operation_ids::OpIds;
use std::fmt;
use std::sync::Arc;

use crate::event::{RecoveryMode, RuntimeEvent};
use crate::json::JsStr;

/// `actions.toolRecovery.kind` of a reconcile-result fact.
pub const RECONCILE_RESULT_KIND: &str = "maka.tool.reconcile_result";
/// `actions.toolRecovery.kind` of a recovery-decision fact.
pub const RECOVERY_DECISION_KIND: &str = "maka.tool.recovery_decision";

/// The twelve issue codes Maka's scanner declares (`ToolLedgerIssueCode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IssueCode {
    /// The same event id was seen earlier in the scan; the repeat is skipped.
    DuplicateEventId,
    /// The event claims no tool lane cleanly (two lanes, or a lane's envelope is wrong);
    /// the event is skipped.
    SemanticLaneConflict,
    /// A second function call for an operation that already has one.
    DuplicateCall,
    /// A dispatch names an operation id already bound to another operation.
    DuplicateOperation,
    /// A second dispatch for an operation that already has one.
    DuplicateDispatch,
    /// A second function response for an operation that already has one.
    DuplicateResponse,
    /// Declared by Maka but never emitted by its scanner (a dispatch without a call is
    /// an [`IssueCode::EventOrderConflict`]).
    OrphanDispatch,
    /// A function response with no earlier call, dispatch or response for its key.
    OrphanResponse,
    /// The dispatch's `canonicalArgsHash` is not the hash of the call's name and args.
    CanonicalArgsHashConflict,
    /// An event's (session, run, turn) differs from the first event of its invocation.
    InvocationIdentityConflict,
    /// Names, refs or execution identities of an operation's events disagree.
    IdentityConflict,
    /// A dispatch before its call or after its response, or a recovery fact before any
    /// dispatch bound its operation id.
    EventOrderConflict,
    /// Newer than main ([`ScanOptions::tool_dependencies`]): a dispatch names a parent
    /// operation that no dispatch bound.
    ParentOperationMissing,
    /// Newer than main: a dispatch's parent operation belongs to another tool call.
    ParentIdentityConflict,
    /// Newer than main: the dispatch's operation is on a cycle of parents.
    ParentDependencyCycle,
}

impl IssueCode {
    /// Every code, in Maka's declaration order.
    pub const ALL: [IssueCode; 12] = [
        IssueCode::DuplicateEventId,
        IssueCode::SemanticLaneConflict,
        IssueCode::DuplicateCall,
        IssueCode::DuplicateOperation,
        IssueCode::DuplicateDispatch,
        IssueCode::DuplicateResponse,
        IssueCode::OrphanDispatch,
        IssueCode::OrphanResponse,
        IssueCode::CanonicalArgsHashConflict,
        IssueCode::InvocationIdentityConflict,
        IssueCode::IdentityConflict,
        IssueCode::EventOrderConflict,
    ];

    /// Maka's exact string for the code.
    pub fn as_str(self) -> &'static str {
        match self {
            IssueCode::DuplicateEventId => "duplicate_event_id",
            IssueCode::SemanticLaneConflict => "semantic_lane_conflict",
            IssueCode::DuplicateCall => "duplicate_call",
            IssueCode::DuplicateOperation => "duplicate_operation",
            IssueCode::DuplicateDispatch => "duplicate_dispatch",
            IssueCode::DuplicateResponse => "duplicate_response",
            IssueCode::OrphanDispatch => "orphan_dispatch",
            IssueCode::OrphanResponse => "orphan_response",
            IssueCode::CanonicalArgsHashConflict => "canonical_args_hash_conflict",
            IssueCode::InvocationIdentityConflict => "invocation_identity_conflict",
            IssueCode::IdentityConflict => "identity_conflict",
            IssueCode::EventOrderConflict => "event_order_conflict",
            IssueCode::ParentOperationMissing => "parent_operation_missing",
            IssueCode::ParentIdentityConflict => "parent_identity_conflict",
            IssueCode::ParentDependencyCycle => "parent_dependency_cycle",
        }
    }

    /// The codes a scanner newer than main adds (its tool-dependency rules).
    pub const NEWER: [IssueCode; 3] = [
        IssueCode::ParentOperationMissing,
        IssueCode::ParentIdentityConflict,
        IssueCode::ParentDependencyCycle,
    ];

    /// The code Maka spells `s`, if any.
    pub fn from_maka(s: &str) -> Option<IssueCode> {
        IssueCode::ALL
            .into_iter()
            .chain(IssueCode::NEWER)
            .find(|c| c.as_str() == s)
    }
}

impl fmt::Display for IssueCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One scanner issue: Maka's `ToolLedgerIssue` plus the session and run of the event it
/// names, so that it can be attributed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerIssue {
    pub code: IssueCode,
    /// The event Maka names. Usually the event being scanned; an `identity_conflict`
    /// found when a dispatch arrives after its response names the earlier response.
    pub event_id: JsStr,
    /// Set exactly where Maka sets `operationId` (it may be `""` where Maka copies a
    /// payload's operation id; it is never `""` where Maka tests it for truthiness).
    pub operation_id: Option<JsStr>,
    /// Set exactly where Maka sets `toolCallId` (same rule as `operation_id`).
    pub tool_call_id: Option<JsStr>,
    /// `sessionId` of the event named by `event_id`.
    pub session_id: JsStr,
    /// `runId` of the event named by `event_id`.
    pub run_id: JsStr,
}
/// Which event opened an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpenedBy {
    /// The function call (the normal case).
    Call,
    /// A dispatch with no earlier call (`event_order_conflict`).
    Dispatch,
    /// A response with no earlier call or dispatch (`orphan_response`).
    Response,
}

/// The dispatch (T1) fact bound to an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchFacts {
    pub event_id: JsStr,
    /// `toolDispatch.canonicalArgsHash` as written (not checked for format).
    pub canonical_args_hash: JsStr,
    pub recovery_mode: RecoveryMode,
}

/// The response attached to an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseFacts {
    pub event_id: JsStr,
    /// `content.isError`, when present.
    pub is_error: Option<bool>,
}

/// One operation of the scan (Maka's `ToolLedgerScanOperation`), as compact facts.
///
/// Identity strings shared by many operations are reference-counted.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    /// The invocation of the operation's key (all its call/dispatch/response events
    /// share it).
    pub invocation_id: Arc<JsStr>,
    /// Session of the call event; of the event that opened the operation while it has
    /// no call.
    pub session_id: Arc<JsStr>,
    /// Run, as `session_id`.
    pub run_id: Arc<JsStr>,
    /// Turn, as `session_id`.
    pub turn_id: Arc<JsStr>,
    /// The provider tool-call id of the key (`content.id` or `providerToolCallId`).
    pub tool_call_id: JsStr,
    /// Maka's `toolName`: the name given by the event that opened the operation. A
    /// later event with another name is an `identity_conflict` and does not change it.
    pub tool_name: Arc<JsStr>,
    /// The operation id, once a dispatch set it. Set also when a dispatch opened the
    /// operation and was then refused as `duplicate_operation` (as Maka does).
    pub operation_id: Option<JsStr>,
    pub opened_by: OpenedBy,
    pub call_event_id: Option<JsStr>,
    pub dispatch: Option<DispatchFacts>,
    pub response: Option<ResponseFacts>,
    /// Reconcile-result facts, in scan order.
    pub reconcile_event_ids: Vec<JsStr>,
    /// Recovery-decision facts, in scan order.
    pub decision_event_ids: Vec<JsStr>,
    /// Indices into [`ToolLedgerScan::issues`] of the issues Maka records on this
    /// operation (a `duplicate_operation` is recorded on both operations it involves).
    pub issues: Vec<usize>,
}

/// A change to an operation whose invocation was already closed (store order): only
/// a `duplicate_operation` re-using its id, or a recovery fact naming it, can reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LateTouch {
    /// Issue `issue` (an index into the issues) was recorded on operation `operation_id`.
    Issue { operation_id: JsStr, issue: usize },
    /// A reconcile-result fact names the operation.
    Reconcile {
        operation_id: JsStr,
        event_id: JsStr,
    },
    /// A recovery-decision fact names the operation (it is then settled).
    Decision {
        operation_id: JsStr,
        event_id: JsStr,
    },
}
/// The result of a scan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolLedgerScan {
    /// Every issue, in Maka's emission order. Maka's gate reports `issues[0]`.
    pub issues: Vec<LedgerIssue>,
    /// Every operation, in the order it was opened (orphans included).
    pub operations: Vec<Operation>,
}

impl ToolLedgerScan {
    /// Maka's `hasCorruption`: at least one issue.
    pub fn has_corruption(&self) -> bool {
        !self.issues.is_empty()
    }

    /// The issue Maka's write gate names.
    pub fn first_issue(&self) -> Option<&LedgerIssue> {
        self.issues.first()
    }
}

/// Scanner options. The defaults scan any list exactly as Maka (main) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanOptions {
    /// The caller guarantees that no event id repeats (database rows: `event_id` is the
    /// primary key), so the global set of seen ids is not kept and no
    /// `duplicate_event_id` is reported.
    pub assume_unique_event_ids: bool,
    /// The caller guarantees the store's `invocation_id, event_seq, event_id` order
    /// (invocation ids strictly increasing, bytewise), so per-invocation state is
    /// dropped when the invocation changes and operations can be handed out with
    /// [`ToolLedgerScanner::close_invocation`]. An invocation id that does not grow
    /// makes [`ToolLedgerScanner::push`] fail with [`ScanOrderError`].
    pub assume_store_order: bool,
    /// The release's dispatch envelope may carry parent refs (v0.1.6 and later).
    pub dispatch_parent_refs: bool,
    /// The tool-dependency rules of Maka's scanner after main: a call whose refs
    /// disagree with its dispatch is an `identity_conflict`, and once the scan ends
    /// every dispatch naming a parent operation is checked against it
    /// (`parent_operation_missing`, `parent_identity_conflict`,
    /// `parent_dependency_cycle`; see [`super::dependencies`]).
    pub tool_dependencies: bool,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            assume_unique_event_ids: false,
            assume_store_order: false,
            dispatch_parent_refs: true,
            tool_dependencies: false,
        }
    }
}

impl ScanOptions {
    /// Both assumptions, for a scan of `runtime_events` rows in store order.
    pub fn store_rows() -> ScanOptions {
        ScanOptions {
            assume_unique_event_ids: true,
            assume_store_order: true,
            ..ScanOptions::default()
        }
    }
}

/// An event of an invocation that the scan had already left, under
/// [`ScanOptions::assume_store_order`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("event {event_id} returns to invocation {invocation_id}, which the store-order scan already left")]
pub struct ScanOrderError {
    pub event_id: JsStr,
    pub invocation_id: JsStr,
}
/// Maka's `scanToolLedger` as a streaming scanner: [`ToolLedgerScanner::push`] every
/// event in scan order, then [`ToolLedgerScanner::finish`].
pub struct ToolLedgerScanner {
    options: ScanOptions,
    issues: Vec<LedgerIssue>,
    /// Operations not yet closed; `operations[i]` has global index `ops_base + i`.
    operations: Vec<Operation>,
    /// Global index of `operations[0]`: under store order, the number of operations
    /// handed out by [`ToolLedgerScanner::close_invocation`].
    ops_base: usize,
    /// Operations of invocations left behind that nobody took (store order).
    closed: Vec<Operation>,
    /// Changes to operations already handed out (store order).
    late: Vec<LateTouch>,
    seen_event_ids: HashSet<JsStr>,
    /// invocation id -> the (session, run, turn) of its first event. Under store order
    /// only the current invocation's.
    spines: HashMap<Arc<JsStr>, Spine>,
    /// Shared copies of identity strings that are not a spine's, and of tool names
    /// (under store order, of the current invocation only).
    interned: HashSet<Arc<JsStr>>,
    /// Maka's `byOperation`: operation id -> operation. Global.
    by_operation: OpIds,
    current: Option<InvocationState>,
    /// States of invocations left behind (only without `assume_store_order`).
    parked: HashMap<JsStr, InvocationState>,
    /// The latest invocation entered (store order: ids only grow).
    last_invocation: Option<JsStr>,
    /// Bound operations and the parents their dispatches name, under
    /// [`ScanOptions::tool_dependencies`].
    dependencies: super::dependencies::Dependencies,
}

impl Default for ToolLedgerScanner {
    fn default() -> Self {
        ToolLedgerScanner::new(ScanOptions::default())
    }
}

/// Scans a list with Maka's exact semantics (any order, repeated ids allowed).
pub fn scan_tool_ledger(events: &[RuntimeEvent]) -> ToolLedgerScan {
    let mut scanner = ToolLedgerScanner::new(ScanOptions::default());
    for event in events {
        if let Err(e) = scanner.push(event) {
            unreachable!("the default options accept any order: {e}");
        }
    }
    scanner.finish()
}

/// Small event builders for the ledger unit tests.
#[cfg(test)]
pub(crate) mod test_events;
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_codes_round_trip_and_are_twelve() {
        let names: Vec<_> = IssueCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), 12);
        for code in IssueCode::ALL {
            assert_eq!(IssueCode::from_maka(code.as_str()), Some(code));
        }
        assert_eq!(IssueCode::from_maka("orphan_call"), None);
    }
}
