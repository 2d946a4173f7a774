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

use crate::fast_hash::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use crate::args_hash::canonical_tool_args_hash;
use crate::event::{Content, RecoveryMode, RuntimeEvent};
use crate::json::{JsStr, Json};

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

/// Which tool-ledger lane an event claims (`ToolLedgerLane`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// No tool content or tool action: not a ledger fact.
    Ordinary,
    FunctionCall,
    ToolDispatch,
    FunctionResponse,
    ReconcileResult,
    RecoveryDecision,
}

impl Lane {
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Ordinary => "ordinary",
            Lane::FunctionCall => "function_call",
            Lane::ToolDispatch => "tool_dispatch",
            Lane::FunctionResponse => "function_response",
            Lane::ReconcileResult => "reconcile_result",
            Lane::RecoveryDecision => "recovery_decision",
        }
    }
}

/// Maka's lane check (`validateToolLedgerEventLane`): the lane the event claims, or
/// `None` when it is a `semantic_lane_conflict` (more than one lane, or an envelope the
/// lane does not allow).
pub fn tool_ledger_lane(event: &RuntimeEvent) -> Option<Lane> {
    tool_ledger_lane_as(event, true)
}

/// [`tool_ledger_lane`]; `dispatch_parent_refs` off gives the lane check of Maka
/// v0.1.5 and older, whose dispatch refs are exactly `operationId` and `toolCallId`.
pub fn tool_ledger_lane_as(event: &RuntimeEvent, dispatch_parent_refs: bool) -> Option<Lane> {
    let recovery_kind = event
        .actions
        .as_ref()
        .and_then(|a| a.tool_recovery.as_ref())
        .map(|r| &r.kind);
    let claimed = [
        (
            event.content_kind() == Some("function_call"),
            Lane::FunctionCall,
        ),
        (
            event
                .actions
                .as_ref()
                .is_some_and(|a| a.tool_dispatch.is_some()),
            Lane::ToolDispatch,
        ),
        (
            event.content_kind() == Some("function_response"),
            Lane::FunctionResponse,
        ),
        (
            recovery_kind.is_some_and(|k| *k == RECONCILE_RESULT_KIND),
            Lane::ReconcileResult,
        ),
        (
            recovery_kind.is_some_and(|k| *k == RECOVERY_DECISION_KIND),
            Lane::RecoveryDecision,
        ),
    ];
    let mut lanes = claimed.iter().filter(|(on, _)| *on).map(|(_, lane)| *lane);
    let Some(lane) = lanes.next() else {
        return Some(Lane::Ordinary);
    };
    if lanes.next().is_some() || !fits_lane_envelope(event, lane, dispatch_parent_refs) {
        return None;
    }
    Some(lane)
}

fn fits_lane_envelope(event: &RuntimeEvent, lane: Lane, dispatch_parent_refs: bool) -> bool {
    use crate::event::{Author, Role};
    if event.partial || event.status.is_some() || event.branch.is_some() {
        return false;
    }
    let system = event.role == Role::System && event.author == Author::System;
    // Listed only for the lanes that compare them (not for every call and response).
    let action_keys = || event.actions.as_ref().map(|a| a.present_keys());
    let refs_keys = || event.refs.as_ref().map(|r| r.present_keys());
    match lane {
        Lane::Ordinary => true,
        Lane::FunctionCall => {
            event.role == Role::Model && event.author == Author::Agent && call_actions_fit(event)
        }
        Lane::FunctionResponse => {
            event.role == Role::Tool && event.author == Author::Tool && response_actions_fit(event)
        }
        Lane::ToolDispatch => {
            let refs_keys = refs_keys();
            event.content.is_none()
                && system
                && has_exactly(action_keys().as_deref(), &["toolDispatch"])
                && (has_exactly(refs_keys.as_deref(), &["operationId", "toolCallId"])
                    || dispatch_parent_refs
                        && has_exactly(
                            refs_keys.as_deref(),
                            &[
                                "operationId",
                                "toolCallId",
                                "parentToolCallId",
                                "parentOperationId",
                            ],
                        ))
        }
        Lane::ReconcileResult | Lane::RecoveryDecision => {
            event.content.is_none()
                && system
                && has_exactly(action_keys().as_deref(), &["toolRecovery"])
                && has_exactly(refs_keys().as_deref(), &["operationId", "toolCallId"])
        }
    }
}

/// Maka's `hasOnlyKeys`: the object is present and its keys are exactly `expected`.
fn has_exactly(keys: Option<&[&str]>, expected: &[&str]) -> bool {
    keys.is_some_and(|keys| {
        keys.len() == expected.len() && expected.iter().all(|e| keys.contains(e))
    })
}

/// A call may carry no actions, or only a non-empty `stateDelta` of string
/// `activityKind` / `displayName` / `intent`.
fn call_actions_fit(event: &RuntimeEvent) -> bool {
    let Some(actions) = &event.actions else {
        return true;
    };
    if !actions.only_state_delta() {
        return false;
    }
    let Some(delta) = &actions.state_delta else {
        return false;
    };
    !delta.is_empty()
        && delta.iter().all(|(key, value)| {
            (*key == "activityKind" || *key == "displayName" || *key == "intent")
                && matches!(value, Json::String(_))
        })
}

/// A response may carry no actions, or only `stateDelta: {durationMs: <finite number>}`;
/// Maka after main also allows `managedMutationTerminal` beside it or alone (a key only
/// an event read with the newer rules has).
fn response_actions_fit(event: &RuntimeEvent) -> bool {
    let Some(actions) = &event.actions else {
        return true;
    };
    if !actions.newer.is_empty() {
        let terminal = "managedMutationTerminal";
        let keys = actions.present_keys();
        if keys.iter().any(|k| *k != "stateDelta" && *k != terminal) {
            return false;
        }
        if actions.state_delta.is_none() {
            return keys.contains(&terminal);
        }
    } else if !actions.only_state_delta() {
        return false;
    }
    let Some(delta) = &actions.state_delta else {
        return false;
    };
    delta.len() == 1
        && delta
            .get("durationMs")
            .and_then(Json::as_f64)
            .is_some_and(f64::is_finite)
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

/// Operation ids bound by a dispatch (Maka's `byOperation`), compactly: it holds every
/// operation of the file for the whole scan, so its entry is what grows with the
/// file. Canonical ids (`toolop_` + 32 lowercase hex) are 128-bit keys (two `u64`s,
/// so an entry is 24 bytes, not 32 with a `u128`'s alignment), any other id its
/// string; values are global operation indexes (see `ToolLedgerScanner::ops_base`).
/// The binding dispatch's event id of a closed operation is kept aside only when it
/// is not the usual `<operationId>_dispatch` (rare).
#[derive(Default)]
struct OpIds {
    hex: HashMap<[u64; 2], usize>,
    other: HashMap<JsStr, usize>,
    unusual_dispatch: HashMap<usize, JsStr>,
}

/// Each byte's value as a lowercase hex digit, or `NOT_HEX`.
const HEX_DIGIT: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut c = 0;
    while c < 10 {
        t[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        t[b'a' as usize + c] = 10 + c as u8;
        c += 1;
    }
    t
};
const NOT_HEX: u8 = 0x10;

fn canonical_op_key(id: &JsStr) -> Option<[u64; 2]> {
    let b = id.as_wtf8();
    if b.len() != 39 || !b.starts_with(b"toolop_") {
        return None;
    }
    // Without a branch per digit: every dispatch and every late touch looks one up.
    let mut v = [0u64; 2];
    let mut seen = 0u8;
    for (half, digits) in v.iter_mut().zip(b[7..].chunks_exact(16)) {
        for &c in digits {
            let d = HEX_DIGIT[usize::from(c)];
            seen |= d;
            *half = (*half << 4) | u64::from(d & 0xf);
        }
    }
    (seen & NOT_HEX == 0).then_some(v)
}

impl OpIds {
    /// The global index of the operation `id` names.
    fn get(&self, id: &JsStr) -> Option<usize> {
        match canonical_op_key(id) {
            Some(k) => self.hex.get(&k).copied(),
            None => self.other.get(id).copied(),
        }
    }
    fn insert(&mut self, id: &JsStr, index: usize) {
        match canonical_op_key(id) {
            Some(k) => self.hex.insert(k, index),
            None => self.other.insert(id.clone(), index),
        };
    }
    /// Room for `n` more canonical ids without growing (a table that doubles holds
    /// both sizes for a moment).
    fn reserve(&mut self, n: usize) {
        self.hex.reserve(n);
    }
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

/// (session, run, turn) of an event, shared where possible.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Spine {
    session: Arc<JsStr>,
    run: Arc<JsStr>,
    turn: Arc<JsStr>,
}

impl Spine {
    fn matches(&self, event: &RuntimeEvent) -> bool {
        *self.session == event.session_id
            && *self.run == event.run_id
            && *self.turn == event.turn_id
    }
}

/// A call that has no dispatch yet: Maka's canonical hash of its tool name and
/// arguments, which the dispatch must carry (`None`: they do not hash).
struct PendingCall {
    args_hash: Option<String>,
    /// The call's refs a dispatch is compared with, under the tool-dependency rules.
    refs: Option<Box<super::dependencies::CallRefs>>,
}

/// A response that a later dispatch may still have to check.
struct PendingResponse {
    event_id: JsStr,
    spine: Spine,
    refs_operation_id: Option<JsStr>,
    refs_tool_call_id: Option<JsStr>,
}

/// Per-operation state that only a later dispatch of the same invocation needs.
#[derive(Default)]
struct Pending {
    call: Option<PendingCall>,
    response: Option<PendingResponse>,
}

/// What the scan keeps about one invocation while it is current.
struct InvocationState {
    invocation_id: JsStr,
    /// Maka's `byToolCall` restricted to this invocation: provider call id -> operation.
    by_tool_call: HashMap<JsStr, usize>,
    /// Operations of this invocation that have no dispatch yet.
    pending: HashMap<usize, Pending>,
}

impl InvocationState {
    fn new(invocation_id: &JsStr) -> Self {
        InvocationState {
            invocation_id: invocation_id.clone(),
            by_tool_call: HashMap::default(),
            pending: HashMap::default(),
        }
    }
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

impl ToolLedgerScanner {
    pub fn new(options: ScanOptions) -> Self {
        ToolLedgerScanner {
            options,
            issues: Vec::new(),
            operations: Vec::new(),
            ops_base: 0,
            closed: Vec::new(),
            late: Vec::new(),
            seen_event_ids: HashSet::default(),
            spines: HashMap::default(),
            interned: HashSet::default(),
            by_operation: OpIds::default(),
            current: None,
            parked: HashMap::default(),
            last_invocation: None,
            dependencies: Default::default(),
        }
    }

    /// Under [`ScanOptions::tool_dependencies`], records the issues of the dispatches
    /// whose parent operation is missing, belongs to another call, or closes a cycle
    /// (Maka finds them once every event is scanned). Call when the scan has seen
    /// every event; again, it does nothing.
    pub fn settle_dependencies(&mut self) {
        let deps = std::mem::take(&mut self.dependencies);
        let by_operation = &self.by_operation;
        for (index, issue) in deps.issues(|id| by_operation.get(id)) {
            self.record(Some(index), issue);
        }
    }

    /// Under [`ScanOptions::assume_store_order`]: ends the current invocation and hands
    /// out every operation opened since the last call (in open order). Later events can
    /// still reach them only through their operation id; such changes are collected
    /// as [`LateTouch`]es. Without store order, returns nothing.
    pub fn close_invocation(&mut self) -> Vec<Operation> {
        if !self.options.assume_store_order {
            return Vec::new();
        }
        self.current = None;
        self.spines.clear();
        self.interned.clear();
        let mut out = std::mem::take(&mut self.closed);
        let ops = std::mem::take(&mut self.operations);
        self.ops_base += ops.len();
        out.extend(ops);
        for op in &out {
            if let (Some(id), Some(d)) = (&op.operation_id, &op.dispatch) {
                let usual = d.event_id.as_wtf8().strip_suffix(b"_dispatch") == Some(id.as_wtf8());
                if !usual {
                    if let Some(index) = self.by_operation.get(id) {
                        self.by_operation
                            .unusual_dispatch
                            .insert(index, d.event_id.clone());
                    }
                }
            }
        }
        out
    }

    /// Room for `n` more bound operation ids without growing the index.
    pub fn reserve_operations(&mut self, n: usize) {
        self.by_operation.reserve(n);
    }

    /// Changes to operations already handed out by `close_invocation`.
    pub fn take_late_touches(&mut self) -> Vec<LateTouch> {
        std::mem::take(&mut self.late)
    }

    /// Whether a dispatch bound `operation_id` (Maka's `byOperation` has it).
    pub fn is_bound(&self, operation_id: &JsStr) -> bool {
        self.by_operation.get(operation_id).is_some()
    }

    /// The index of the operation `operation_id` is bound to, if it is bound (one
    /// index per bound id; ids stay bound for the whole scan).
    pub fn bound_index(&self, operation_id: &JsStr) -> Option<usize> {
        self.by_operation.get(operation_id)
    }

    /// The event id of the dispatch that bound `operation_id`, once its operation is
    /// closed.
    pub fn binding_dispatch(&self, operation_id: &JsStr) -> Option<JsStr> {
        let index = self.by_operation.get(operation_id)?;
        let first_closed = self.ops_base - self.closed.len();
        if index >= first_closed {
            let op = if index >= self.ops_base {
                &self.operations[index - self.ops_base]
            } else {
                &self.closed[index - first_closed]
            };
            return op.dispatch.as_ref().map(|d| d.event_id.clone());
        }
        let unusual = self.by_operation.unusual_dispatch.get(&index).cloned();
        Some(unusual.unwrap_or_else(|| {
            let mut b = operation_id.as_wtf8().to_vec();
            b.extend_from_slice(b"_dispatch");
            JsStr::from_wtf8_unchecked(b)
        }))
    }

    /// The operation of global index `index`, unless it was handed out.
    fn any_op(&mut self, index: usize) -> Option<&mut Operation> {
        if index >= self.ops_base {
            return self.operations.get_mut(index - self.ops_base);
        }
        let first_closed = self.ops_base - self.closed.len();
        index
            .checked_sub(first_closed)
            .and_then(|i| self.closed.get_mut(i))
    }

    fn op(&mut self, index: usize) -> &mut Operation {
        &mut self.operations[index - self.ops_base]
    }

    /// Issues found so far.
    pub fn issues(&self) -> &[LedgerIssue] {
        &self.issues
    }

    /// Number of operations opened so far.
    pub fn operation_count(&self) -> usize {
        self.ops_base + self.operations.len()
    }

    /// The scan result (under store order, the operations not handed out yet).
    pub fn finish(mut self) -> ToolLedgerScan {
        self.settle_dependencies();
        let mut operations = self.closed;
        operations.extend(self.operations);
        ToolLedgerScan {
            issues: self.issues,
            operations,
        }
    }

    /// Scans the next event. Fails only under [`ScanOptions::assume_store_order`], when
    /// the event belongs to an invocation the scan already left; the event is then not
    /// scanned, and the scan cannot be trusted any more.
    pub fn push(&mut self, event: &RuntimeEvent) -> Result<(), ScanOrderError> {
        self.push_with_args_hash(event, None)
    }

    /// [`ToolLedgerScanner::push`] of a function call whose
    /// `canonical_tool_args_hash(name, args).ok()` is already known (`args_hash`: the
    /// scan computes it on the thread that decodes the event); `None` computes it here.
    pub fn push_with_args_hash(
        &mut self,
        event: &RuntimeEvent,
        args_hash: Option<Option<String>>,
    ) -> Result<(), ScanOrderError> {
        self.push_prepared(event, args_hash, None)
    }

    /// [`ToolLedgerScanner::push_with_args_hash`] of an event whose lane,
    /// `tool_ledger_lane_as(event, dispatch_parent_refs)` under this scan's options, is
    /// already known (`lane`; `None` finds it here).
    pub fn push_prepared(
        &mut self,
        event: &RuntimeEvent,
        args_hash: Option<Option<String>>,
        lane: Option<Option<Lane>>,
    ) -> Result<(), ScanOrderError> {
        self.enter_invocation(event)?;

        if !self.options.assume_unique_event_ids {
            if self.seen_event_ids.contains(&event.id) {
                self.add_issue(None, IssueCode::DuplicateEventId, event, None, None);
                return Ok(());
            }
            self.seen_event_ids.insert(event.id.clone());
        }

        let spine = self.spine_of(event);

        let lane =
            lane.unwrap_or_else(|| tool_ledger_lane_as(event, self.options.dispatch_parent_refs));
        let Some(lane) = lane else {
            self.add_issue(None, IssueCode::SemanticLaneConflict, event, None, None);
            return Ok(());
        };
        if event.partial {
            return Ok(());
        }
        match lane {
            Lane::Ordinary => {}
            Lane::FunctionCall => self.scan_call(event, spine, args_hash),
            Lane::ToolDispatch => self.scan_dispatch(event, spine),
            Lane::FunctionResponse => self.scan_response(event, spine),
            Lane::ReconcileResult | Lane::RecoveryDecision => self.scan_recovery(event, lane),
        }
        Ok(())
    }

    /// [`ToolLedgerScanner::push_prepared`] for an event on the ordinary lane known
    /// only by its identity (`id, invocation, run, session, turn`: the row's columns,
    /// which its payload was checked to carry), for a scanner of store rows. Such an
    /// event only moves the scan to its invocation and records or checks the
    /// invocation's spine; `false`, with nothing done but the move, when that check
    /// (or the move) would report something: the caller then pushes the decoded event,
    /// which reports it.
    pub fn push_ordinary(&mut self, ids: [&str; 5]) -> bool {
        let [_, invocation, run, session, turn] = ids;
        if !(self.options.assume_store_order && self.options.assume_unique_event_ids) {
            return false;
        }
        let current = self
            .current
            .as_ref()
            .is_some_and(|s| s.invocation_id == *invocation);
        if !current {
            let invocation = JsStr::new(invocation);
            if !self.leave_in_store_order(&invocation) {
                return false;
            }
            self.current = Some(InvocationState::new(&invocation));
        }
        // In store order only the current invocation has a spine.
        match self.spines.iter().find(|(k, _)| ***k == *invocation) {
            Some((_, spine)) => {
                *spine.session == *session && *spine.run == *run && *spine.turn == *turn
            }
            None => {
                let spine = Spine {
                    session: self.intern(&JsStr::new(session)),
                    run: self.intern(&JsStr::new(run)),
                    turn: self.intern(&JsStr::new(turn)),
                };
                self.spines.insert(Arc::new(JsStr::new(invocation)), spine);
                true
            }
        }
    }

    /// Under store order, leaves the current invocation (if any) for `invocation`,
    /// which the caller then makes current; `false`, with nothing done, when its id
    /// does not grow: the store orders by `invocation_id` (bytes), so that would be a
    /// return to a left invocation.
    fn leave_in_store_order(&mut self, invocation: &JsStr) -> bool {
        if self
            .last_invocation
            .as_ref()
            .is_some_and(|last| last.as_wtf8() >= invocation.as_wtf8())
        {
            return false;
        }
        self.last_invocation = Some(invocation.clone());
        if self.current.is_some() {
            // Nobody closed the invocation we leave: keep its operations.
            let ops = std::mem::take(&mut self.operations);
            self.ops_base += ops.len();
            self.closed.extend(ops);
            self.spines.clear();
        }
        true
    }

    /// Makes `event`'s invocation the current one.
    fn enter_invocation(&mut self, event: &RuntimeEvent) -> Result<(), ScanOrderError> {
        let invocation = &event.invocation_id;
        if self
            .current
            .as_ref()
            .is_some_and(|s| s.invocation_id == *invocation)
        {
            return Ok(());
        }
        let next = if self.options.assume_store_order {
            if !self.leave_in_store_order(invocation) {
                return Err(ScanOrderError {
                    event_id: event.id.clone(),
                    invocation_id: invocation.clone(),
                });
            }
            InvocationState::new(invocation)
        } else {
            self.parked
                .remove(invocation)
                .unwrap_or_else(|| InvocationState::new(invocation))
        };
        if let Some(left) = self.current.replace(next) {
            if !self.options.assume_store_order {
                self.parked.insert(left.invocation_id.clone(), left);
            }
        }
        Ok(())
    }

    /// Maka's invocation-spine check (step 2): records the spine of a new invocation,
    /// reports `invocation_identity_conflict` for an event that differs from it, and
    /// returns the event's own (session, run, turn).
    fn spine_of(&mut self, event: &RuntimeEvent) -> Spine {
        if let Some(spine) = self.spines.get(&event.invocation_id) {
            if spine.matches(event) {
                return spine.clone();
            }
            self.add_issue(
                None,
                IssueCode::InvocationIdentityConflict,
                event,
                None,
                None,
            );
            return Spine {
                session: self.intern(&event.session_id),
                run: self.intern(&event.run_id),
                turn: self.intern(&event.turn_id),
            };
        }
        let spine = Spine {
            session: self.intern(&event.session_id),
            run: self.intern(&event.run_id),
            turn: self.intern(&event.turn_id),
        };
        self.spines
            .insert(Arc::new(event.invocation_id.clone()), spine.clone());
        spine
    }

    fn intern(&mut self, s: &JsStr) -> Arc<JsStr> {
        if let Some(shared) = self.interned.get(s) {
            return shared.clone();
        }
        let shared = Arc::new(s.clone());
        self.interned.insert(shared.clone());
        shared
    }

    fn invocation_arc(&self, invocation: &JsStr) -> Arc<JsStr> {
        match self.spines.get_key_value(invocation) {
            Some((key, _)) => key.clone(),
            None => Arc::new(invocation.clone()),
        }
    }

    fn state(&mut self) -> &mut InvocationState {
        self.current
            .as_mut()
            .expect("push enters the event's invocation first")
    }

    fn scan_call(&mut self, event: &RuntimeEvent, spine: Spine, args_hash: Option<Option<String>>) {
        let Some(Content::FunctionCall { id, name, args, .. }) = &event.content else {
            return;
        };
        let dependencies = self.options.tool_dependencies;
        let pending = || PendingCall {
            args_hash: args_hash.unwrap_or_else(|| canonical_tool_args_hash(name, args).ok()),
            refs: dependencies
                .then(|| super::dependencies::CallRefs::of(event).map(Box::new))
                .flatten(),
        };
        if let Some(&index) = self.state().by_tool_call.get(id) {
            let op = self.op(index);
            if op.call_event_id.is_some() {
                let operation_id = truthy(&op.operation_id);
                self.add_issue(
                    Some(index),
                    IssueCode::DuplicateCall,
                    event,
                    operation_id,
                    Some(id.clone()),
                );
                return;
            }
            // The operation was opened by a dispatch or an orphan response.
            op.call_event_id = Some(event.id.clone());
            op.session_id = spine.session;
            op.run_id = spine.run;
            op.turn_id = spine.turn;
            let name_differs = *op.tool_name != *name;
            let operation_id = truthy(&op.operation_id);
            if op.dispatch.is_none() {
                let call = pending();
                self.state().pending.entry(index).or_default().call = Some(call);
            }
            if name_differs {
                self.add_issue(
                    Some(index),
                    IssueCode::IdentityConflict,
                    event,
                    operation_id,
                    Some(id.clone()),
                );
            }
            return;
        }
        let index = self.open_operation(event, spine, id, name, OpenedBy::Call);
        let op = self.op(index);
        op.call_event_id = Some(event.id.clone());
        let state = self.state();
        state.by_tool_call.insert(id.clone(), index);
        state.pending.entry(index).or_default().call = Some(pending());
    }

    fn scan_dispatch(&mut self, event: &RuntimeEvent, spine: Spine) {
        let Some(dispatch) = event
            .actions
            .as_ref()
            .and_then(|a| a.tool_dispatch.as_ref())
        else {
            return;
        };
        let call_id = &dispatch.provider_tool_call_id;
        let operation_id = &dispatch.operation_id;
        let facts = DispatchFacts {
            event_id: event.id.clone(),
            canonical_args_hash: dispatch.canonical_args_hash.clone(),
            recovery_mode: dispatch.recovery_mode,
        };
        let found = self.state().by_tool_call.get(call_id).copied();
        let index = match found {
            None => {
                let index = self.open_operation(
                    event,
                    spine.clone(),
                    call_id,
                    &dispatch.tool_name,
                    OpenedBy::Dispatch,
                );
                let op = self.op(index);
                op.operation_id = Some(operation_id.clone());
                op.dispatch = Some(facts.clone());
                self.state().by_tool_call.insert(call_id.clone(), index);
                self.add_issue(
                    Some(index),
                    IssueCode::EventOrderConflict,
                    event,
                    Some(operation_id.clone()),
                    Some(call_id.clone()),
                );
                index
            }
            Some(index) if self.operations[index - self.ops_base].dispatch.is_some() => {
                self.add_issue(
                    Some(index),
                    IssueCode::DuplicateDispatch,
                    event,
                    Some(operation_id.clone()),
                    Some(call_id.clone()),
                );
                return;
            }
            Some(index) => index,
        };

        if let Some(owner) = self.by_operation.get(operation_id) {
            if owner != index {
                let at = self.add_issue(
                    Some(owner),
                    IssueCode::DuplicateOperation,
                    event,
                    Some(operation_id.clone()),
                    Some(call_id.clone()),
                );
                self.op(index).issues.push(at);
                return;
            }
        }

        let op = self.op(index);
        op.operation_id = Some(operation_id.clone());
        op.dispatch = Some(facts);
        let has_call = op.call_event_id.is_some();
        let has_response = op.response.is_some();
        let call_identity_differs = has_call
            && !(*op.session_id == *spine.session
                && *op.run_id == *spine.run
                && *op.turn_id == *spine.turn);
        let name_differs = *op.tool_name != dispatch.tool_name;
        self.by_operation.insert(operation_id, index);
        if self.options.tool_dependencies {
            self.dependencies.bind(index, call_id, operation_id, event);
        }
        // After binding, no later dispatch can reach this operation's pending facts.
        let pending = self.state().pending.remove(&index).unwrap_or_default();

        let refs = event.refs.as_ref();
        let call_refs_differ = pending
            .call
            .as_ref()
            .and_then(|c| c.refs.as_ref())
            .is_some_and(|c| c.conflict(dispatch, refs.map(|r| &**r)));
        if name_differs
            || refs.and_then(|r| r.operation_id.as_ref()) != Some(operation_id)
            || refs.and_then(|r| r.tool_call_id.as_ref()) != Some(call_id)
            || call_identity_differs
            || call_refs_differ
        {
            self.add_issue(
                Some(index),
                IssueCode::IdentityConflict,
                event,
                Some(operation_id.clone()),
                Some(call_id.clone()),
            );
        }

        if has_call {
            let hash = pending
                .call
                .as_ref()
                .and_then(|call| call.args_hash.as_deref());
            if hash.is_none_or(|h| dispatch.canonical_args_hash != *h) {
                self.add_issue(
                    Some(index),
                    IssueCode::CanonicalArgsHashConflict,
                    event,
                    Some(operation_id.clone()),
                    Some(call_id.clone()),
                );
            }
        }

        if has_response {
            self.add_issue(
                Some(index),
                IssueCode::EventOrderConflict,
                event,
                Some(operation_id.clone()),
                Some(call_id.clone()),
            );
            if let Some(response) = pending.response {
                if response.refs_operation_id.as_ref() != Some(operation_id)
                    || response.refs_tool_call_id.as_ref() != Some(call_id)
                    || response.spine != spine
                {
                    let issue = LedgerIssue {
                        code: IssueCode::IdentityConflict,
                        event_id: response.event_id,
                        operation_id: Some(operation_id.clone()),
                        tool_call_id: Some(call_id.clone()),
                        session_id: (*response.spine.session).clone(),
                        run_id: (*response.spine.run).clone(),
                    };
                    self.record(Some(index), issue);
                }
            }
        }
    }

    fn scan_response(&mut self, event: &RuntimeEvent, spine: Spine) {
        let Some(Content::FunctionResponse {
            id, name, is_error, ..
        }) = &event.content
        else {
            return;
        };
        let refs_operation_id = event.refs.as_ref().and_then(|r| r.operation_id.as_ref());
        let refs_tool_call_id = event.refs.as_ref().and_then(|r| r.tool_call_id.as_ref());
        let facts = ResponseFacts {
            event_id: event.id.clone(),
            is_error: *is_error,
        };
        // Made only when kept (most responses meet their dispatch and need none).
        let pending = |spine: Spine| PendingResponse {
            event_id: event.id.clone(),
            spine,
            refs_operation_id: refs_operation_id.cloned(),
            refs_tool_call_id: refs_tool_call_id.cloned(),
        };
        let Some(index) = self.state().by_tool_call.get(id).copied() else {
            let kept = pending(spine.clone());
            let index = self.open_operation(event, spine, id, name, OpenedBy::Response);
            self.op(index).response = Some(facts);
            let state = self.state();
            state.by_tool_call.insert(id.clone(), index);
            state.pending.entry(index).or_default().response = Some(kept);
            self.add_issue(
                Some(index),
                IssueCode::OrphanResponse,
                event,
                None,
                Some(id.clone()),
            );
            return;
        };
        let op = self.op(index);
        if op.response.is_some() {
            let operation_id = truthy(&op.operation_id);
            self.add_issue(
                Some(index),
                IssueCode::DuplicateResponse,
                event,
                operation_id,
                Some(id.clone()),
            );
            return;
        }
        op.response = Some(facts);
        let same_as_call = op.call_event_id.is_some()
            && *op.session_id == *spine.session
            && *op.run_id == *spine.run
            && *op.turn_id == *spine.turn;
        let refs_differ = op.operation_id.as_ref().is_some_and(|bound| {
            refs_operation_id != Some(bound) || refs_tool_call_id != Some(&op.tool_call_id)
        });
        let conflict = *op.tool_name != *name || !same_as_call || refs_differ;
        let operation_id = truthy(&op.operation_id);
        if op.dispatch.is_none() {
            let kept = pending(spine);
            self.state().pending.entry(index).or_default().response = Some(kept);
        }
        if conflict {
            self.add_issue(
                Some(index),
                IssueCode::IdentityConflict,
                event,
                operation_id,
                Some(id.clone()),
            );
        }
    }

    fn scan_recovery(&mut self, event: &RuntimeEvent, lane: Lane) {
        let Some(fact) = event
            .actions
            .as_ref()
            .and_then(|a| a.tool_recovery.as_ref())
        else {
            return;
        };
        let Some(index) = self.by_operation.get(&fact.operation_id) else {
            let call_id = event.refs.as_ref().and_then(|r| truthy(&r.tool_call_id));
            self.add_issue(
                None,
                IssueCode::EventOrderConflict,
                event,
                Some(fact.operation_id.clone()),
                call_id,
            );
            return;
        };
        let Some(op) = self.any_op(index) else {
            let operation_id = fact.operation_id.clone();
            let event_id = event.id.clone();
            self.late.push(if lane == Lane::ReconcileResult {
                LateTouch::Reconcile {
                    operation_id,
                    event_id,
                }
            } else {
                LateTouch::Decision {
                    operation_id,
                    event_id,
                }
            });
            return;
        };
        if lane == Lane::ReconcileResult {
            op.reconcile_event_ids.push(event.id.clone());
        } else {
            op.decision_event_ids.push(event.id.clone());
        }
    }

    fn open_operation(
        &mut self,
        event: &RuntimeEvent,
        spine: Spine,
        tool_call_id: &JsStr,
        tool_name: &JsStr,
        opened_by: OpenedBy,
    ) -> usize {
        let op = Operation {
            invocation_id: self.invocation_arc(&event.invocation_id),
            session_id: spine.session,
            run_id: spine.run,
            turn_id: spine.turn,
            tool_call_id: tool_call_id.clone(),
            tool_name: self.intern(tool_name),
            operation_id: None,
            opened_by,
            call_event_id: None,
            dispatch: None,
            response: None,
            reconcile_event_ids: Vec::new(),
            decision_event_ids: Vec::new(),
            issues: Vec::new(),
        };
        self.operations.push(op);
        self.ops_base + self.operations.len() - 1
    }

    /// Records an issue at `event`; returns its index.
    fn add_issue(
        &mut self,
        operation: Option<usize>,
        code: IssueCode,
        event: &RuntimeEvent,
        operation_id: Option<JsStr>,
        tool_call_id: Option<JsStr>,
    ) -> usize {
        let issue = LedgerIssue {
            code,
            event_id: event.id.clone(),
            operation_id,
            tool_call_id,
            session_id: event.session_id.clone(),
            run_id: event.run_id.clone(),
        };
        self.record(operation, issue)
    }

    fn record(&mut self, operation: Option<usize>, issue: LedgerIssue) -> usize {
        let at = self.issues.len();
        let operation_id = issue.operation_id.clone();
        self.issues.push(issue);
        if let Some(index) = operation {
            match self.any_op(index) {
                Some(op) => op.issues.push(at),
                None => self.late.push(LateTouch::Issue {
                    operation_id: operation_id.unwrap_or_default(),
                    issue: at,
                }),
            }
        }
        at
    }
}

/// A copy of the id when JavaScript would find it truthy (present and non-empty).
fn truthy(id: &Option<JsStr>) -> Option<JsStr> {
    id.as_ref().filter(|s| !s.is_empty()).cloned()
}

/// Small event builders for the ledger unit tests.
#[cfg(test)]
pub(crate) mod test_events {
    use crate::event::{
        Actions, Author, Content, RecoveryMode, Refs, Role, RuntimeEvent, ToolDispatch,
        ToolRecovery,
    };
    use crate::json::{JsObject, JsStr, Json};

    pub(crate) fn s(v: &str) -> JsStr {
        JsStr::new(v)
    }

    /// An event of session `S`, invocation `I`, run `R`, turn `T` with no content.
    pub(crate) fn base(id: &str, role: Role, author: Author) -> RuntimeEvent {
        RuntimeEvent {
            id: s(id),
            invocation_id: s("I"),
            run_id: s("R"),
            session_id: s("S"),
            turn_id: s("T"),
            ts: 1.0,
            partial: false,
            role,
            author,
            branch: None,
            origin: None,
            model_visibility: None,
            status: None,
            content: None,
            actions: None,
            refs: None,
        }
    }

    pub(crate) fn text(id: &str) -> RuntimeEvent {
        let mut fields = JsObject::new();
        fields.insert(s("kind"), Json::String(s("text")));
        fields.insert(s("text"), Json::String(s("hi")));
        let mut e = base(id, Role::Model, Author::Agent);
        e.content = Some(Content::Text {
            text: s("hi"),
            steering: false,
            fields,
        });
        e
    }

    pub(crate) fn args(pairs: &[(&str, &str)]) -> Json {
        Json::Object(
            pairs
                .iter()
                .map(|(k, v)| (s(k), Json::String(s(v))))
                .collect(),
        )
    }

    pub(crate) fn call(id: &str, tc: &str, name: &str, args: Json) -> RuntimeEvent {
        let mut e = base(id, Role::Model, Author::Agent);
        e.content = Some(Content::FunctionCall {
            id: s(tc),
            name: s(name),
            args,
            provider_options: None,
            provider_executed: None,
        });
        e
    }

    pub(crate) fn disp(id: &str, op: &str, tc: &str, name: &str, hash: &str) -> RuntimeEvent {
        let mut e = base(id, Role::System, Author::System);
        e.actions = Some(Box::new(Actions {
            tool_dispatch: Some(ToolDispatch {
                operation_id: s(op),
                provider_tool_call_id: s(tc),
                tool_name: s(name),
                canonical_args_hash: s(hash),
                recovery_mode: RecoveryMode::ReplaySafe,
                newer: Default::default(),
            }),
            ..Actions::default()
        }));
        e.refs = Some(Box::new(refs(Some(op), Some(tc))));
        e
    }

    /// A dispatch whose hash is the real hash of `name` and `args`.
    pub(crate) fn disp_for(id: &str, op: &str, tc: &str, name: &str, args: &Json) -> RuntimeEvent {
        let hash = crate::args_hash::canonical_tool_args_hash(&s(name), args)
            .expect("test arguments hash");
        disp(id, op, tc, name, &hash)
    }

    pub(crate) fn refs(op: Option<&str>, tc: Option<&str>) -> Refs {
        Refs {
            operation_id: op.map(s),
            tool_call_id: tc.map(s),
            ..Refs::default()
        }
    }

    pub(crate) fn resp(id: &str, tc: &str, name: &str, r: Option<Refs>) -> RuntimeEvent {
        let mut e = base(id, Role::Tool, Author::Tool);
        e.content = Some(Content::FunctionResponse {
            id: s(tc),
            name: s(name),
            result: Json::Null,
            is_error: None,
            provider_executed: None,
            provider_output: None,
        });
        e.refs = r.map(Box::new);
        e
    }

    pub(crate) fn recovery(id: &str, kind: &str, op: &str, tc: &str) -> RuntimeEvent {
        let mut e = base(id, Role::System, Author::System);
        e.actions = Some(Box::new(Actions {
            tool_recovery: Some(ToolRecovery {
                kind: s(kind),
                operation_id: s(op),
                envelope: Json::Null,
            }),
            ..Actions::default()
        }));
        e.refs = Some(Box::new(refs(Some(op), Some(tc))));
        e
    }

    /// The same event in another invocation / run / turn / session.
    pub(crate) fn moved(mut e: RuntimeEvent, inv: &str, run: &str, turn: &str) -> RuntimeEvent {
        e.invocation_id = s(inv);
        e.run_id = s(run);
        e.turn_id = s(turn);
        e
    }
}

#[cfg(test)]
mod tests {
    use super::test_events::*;
    use super::*;
    use crate::event::{Actions, EventStatus};
    use crate::json::JsObject;

    #[test]
    fn only_toolop_and_32_lowercase_hex_digits_make_a_128_bit_key() {
        // The plain reading: each digit in turn, lowercase only.
        let reference = |id: &str| -> Option<[u64; 2]> {
            let hex = id.strip_prefix("toolop_")?;
            if hex.len() != 32 || !hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
                return None;
            }
            let n = u128::from_str_radix(hex, 16).ok()?;
            Some([(n >> 64) as u64, n as u64])
        };
        let good = "toolop_07805ab410550785aecd221eff4cb9b7";
        let mut ids: Vec<String> = vec![
            good.into(),
            "toolop_00000000000000000000000000000000".into(),
            "toolop_ffffffffffffffffffffffffffffffff".into(),
            "toolop_0123456789abcdef0123456789abcdef".into(),
            good[..38].into(),
            format!("{good}0"),
            good.replace("toolop_", "toolopx"),
            "TOOLOP_07805ab410550785aecd221eff4cb9b7".into(),
        ];
        // One wrong byte at every digit position.
        for at in 7..39 {
            for bad in ['A', 'F', 'g', '/', ':', '`', '@', 'G', ' '] {
                let mut s = good.to_owned();
                s.replace_range(at..at + 1, &bad.to_string());
                ids.push(s);
            }
        }
        ids.push(format!("toolop_{}\u{e9}", &good[7..37]));
        for id in &ids {
            assert_eq!(
                canonical_op_key(&JsStr::from(id.as_str())),
                reference(id),
                "{id}"
            );
        }
        assert_eq!(
            canonical_op_key(&JsStr::from(good)),
            Some([0x07805ab410550785, 0xaecd221eff4cb9b7])
        );
    }

    const OP: &str = "op1";

    /// `(code, eventId, operationId, toolCallId)` of every issue.
    fn codes(scan: &ToolLedgerScan) -> Vec<(&'static str, String, Option<String>, Option<String>)> {
        scan.issues
            .iter()
            .map(|i| {
                (
                    i.code.as_str(),
                    i.event_id.to_string(),
                    i.operation_id.as_ref().map(JsStr::to_string),
                    i.tool_call_id.as_ref().map(JsStr::to_string),
                )
            })
            .collect()
    }

    fn issue(
        code: &'static str,
        event: &str,
        op: Option<&str>,
        tc: Option<&str>,
    ) -> (&'static str, String, Option<String>, Option<String>) {
        (
            code,
            event.to_owned(),
            op.map(str::to_owned),
            tc.map(str::to_owned),
        )
    }

    fn healthy_t1() -> Vec<RuntimeEvent> {
        let a = args(&[("path", "a.txt")]);
        vec![
            text("u1"),
            call("c1", "tc1", "Write", a.clone()),
            disp_for("d1", OP, "tc1", "Write", &a),
            resp("r1", "tc1", "Write", Some(refs(Some(OP), Some("tc1")))),
            text("m2"),
        ]
    }

    /// After its invocation is closed, an operation is found through the index alone:
    /// its binding dispatch is `<operationId>_dispatch` unless the index kept another
    /// (canonical `toolop_` ids and any other id alike).
    #[test]
    fn a_closed_operation_names_its_binding_dispatch() {
        let canonical = "toolop_0123456789abcdef0123456789abcdef";
        let a = args(&[("path", "a.txt")]);
        let mut scanner = ToolLedgerScanner::new(ScanOptions::store_rows());
        for e in [
            call("c1", "tc1", "Write", a.clone()),
            disp_for(
                &format!("{canonical}_dispatch"),
                canonical,
                "tc1",
                "Write",
                &a,
            ),
            call("c2", "tc2", "Write", a.clone()),
            disp_for("odd-dispatch", OP, "tc2", "Write", &a),
        ] {
            scanner.push(&e).unwrap();
        }
        assert_eq!(scanner.close_invocation().len(), 2);
        let named = |id: &str| scanner.binding_dispatch(&s(id)).map(|d| d.to_string());
        assert_eq!(named(canonical), Some(format!("{canonical}_dispatch")));
        assert_eq!(named(OP), Some("odd-dispatch".to_owned()));
        assert_eq!(named("toolop_ffffffffffffffffffffffffffffffff"), None);
        assert!(scanner.is_bound(&s(canonical)) && !scanner.is_bound(&s("op2")));
    }

    #[test]
    fn issue_codes_round_trip_and_are_twelve() {
        let names: Vec<_> = IssueCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), 12);
        for code in IssueCode::ALL {
            assert_eq!(IssueCode::from_maka(code.as_str()), Some(code));
        }
        assert_eq!(IssueCode::from_maka("orphan_call"), None);
    }

    #[test]
    fn healthy_t1_operation_is_clean_and_compact() {
        let mut events = healthy_t1();
        events.push(recovery("x1", RECONCILE_RESULT_KIND, OP, "tc1"));
        events.push(recovery("x2", RECOVERY_DECISION_KIND, OP, "tc1"));
        let scan = scan_tool_ledger(&events);
        assert!(scan.issues.is_empty(), "{:?}", scan.issues);
        assert!(!scan.has_corruption());
        assert_eq!(scan.operations.len(), 1);
        let op = &scan.operations[0];
        assert_eq!(op.opened_by, OpenedBy::Call);
        assert_eq!(op.call_event_id, Some(s("c1")));
        assert_eq!(op.operation_id, Some(s(OP)));
        assert_eq!(*op.tool_name, s("Write"));
        assert_eq!(*op.invocation_id, s("I"));
        assert_eq!(
            (&*op.session_id, &*op.run_id, &*op.turn_id),
            (&s("S"), &s("R"), &s("T"))
        );
        let d = op.dispatch.as_ref().expect("dispatch");
        assert_eq!(d.event_id, s("d1"));
        assert_eq!(d.recovery_mode, RecoveryMode::ReplaySafe);
        assert!(d
            .canonical_args_hash
            .as_str()
            .is_some_and(|h| h.starts_with("sha256:")));
        assert_eq!(op.response.as_ref().map(|r| &r.event_id), Some(&s("r1")));
        assert_eq!(op.reconcile_event_ids, vec![s("x1")]);
        assert_eq!(op.decision_event_ids, vec![s("x2")]);
    }

    #[test]
    fn duplicate_event_id_skips_the_repeat_entirely() {
        let mut events = healthy_t1();
        events.insert(2, events[1].clone());
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![issue("duplicate_event_id", "c1", None, None)]
        );
        assert_eq!(scan.operations.len(), 1);
        // With unique ids promised, the set is not kept and the repeat is scanned.
        let mut scanner = ToolLedgerScanner::new(ScanOptions {
            assume_unique_event_ids: true,
            ..ScanOptions::default()
        });
        for e in &events {
            scanner.push(e).expect("any order");
        }
        let scan = scanner.finish();
        assert_eq!(
            codes(&scan),
            vec![issue("duplicate_call", "c1", None, Some("tc1"))]
        );
    }

    #[test]
    fn duplicate_event_id_is_global_and_consumed_by_lane_rejects() {
        let mut bad = call("c1", "tc1", "Write", args(&[]));
        bad.branch = Some(s(""));
        let events = vec![bad, moved(text("c1"), "I2", "R2", "T2")];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("semantic_lane_conflict", "c1", None, None),
                issue("duplicate_event_id", "c1", None, None),
            ]
        );
    }

    #[test]
    fn semantic_lane_conflict_cases_and_cascade() {
        // Two lanes in one event.
        let mut two = call("c1", "tc1", "Write", args(&[]));
        two.actions = disp("x", OP, "tc1", "Write", "h").actions;
        // A dispatch with a status.
        let mut with_status = disp("d9", "op9", "tc9", "Bash", "h");
        with_status.status = Some(EventStatus::Completed);
        // A response with endInvocation.
        let mut ending = resp("r8", "tc8", "Bash", None);
        ending.actions = Some(Box::new(Actions {
            end_invocation: Some(true),
            ..Actions::default()
        }));
        let events = vec![two, with_status, ending, resp("r1", "tc1", "Write", None)];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("semantic_lane_conflict", "c1", None, None),
                issue("semantic_lane_conflict", "d9", None, None),
                issue("semantic_lane_conflict", "r8", None, None),
                // The rejected call never registered.
                issue("orphan_response", "r1", None, Some("tc1")),
            ]
        );
        assert_eq!(scan.operations.len(), 1);
    }

    #[test]
    fn lane_envelopes() {
        let mut delta = JsObject::new();
        delta.insert(s("intent"), Json::String(s("x")));
        let mut ok_call = call("c", "t", "n", Json::Null);
        ok_call.actions = Some(Box::new(Actions {
            state_delta: Some(delta),
            ..Actions::default()
        }));
        assert_eq!(tool_ledger_lane(&ok_call), Some(Lane::FunctionCall));
        let mut empty_actions = call("c", "t", "n", Json::Null);
        empty_actions.actions = Some(Box::new(Actions::default()));
        assert_eq!(tool_ledger_lane(&empty_actions), None);

        let mut duration = JsObject::new();
        duration.insert(s("durationMs"), Json::Number(12.5));
        let mut ok_resp = resp("r", "t", "n", None);
        ok_resp.actions = Some(Box::new(Actions {
            state_delta: Some(duration),
            ..Actions::default()
        }));
        assert_eq!(tool_ledger_lane(&ok_resp), Some(Lane::FunctionResponse));
        let mut inf = JsObject::new();
        inf.insert(s("durationMs"), Json::Number(f64::INFINITY));
        ok_resp.actions = Some(Box::new(Actions {
            state_delta: Some(inf),
            ..Actions::default()
        }));
        assert_eq!(tool_ledger_lane(&ok_resp), None);

        let mut d = disp("d", "o", "t", "n", "h");
        assert_eq!(tool_ledger_lane(&d), Some(Lane::ToolDispatch));
        d.refs.as_mut().unwrap().parent_tool_call_id = Some(s("p"));
        assert_eq!(tool_ledger_lane(&d), None, "parent ids come in pairs");
        d.refs.as_mut().unwrap().parent_operation_id = Some(s("po"));
        assert_eq!(tool_ledger_lane(&d), Some(Lane::ToolDispatch));
        d.refs = None;
        assert_eq!(tool_ledger_lane(&d), None);

        let mut r = recovery("x", RECOVERY_DECISION_KIND, "o", "t");
        assert_eq!(tool_ledger_lane(&r), Some(Lane::RecoveryDecision));
        r.refs.as_mut().unwrap().tool_call_id = None;
        assert_eq!(tool_ledger_lane(&r), None);

        let mut partial_text = text("p");
        partial_text.partial = true;
        assert_eq!(tool_ledger_lane(&partial_text), Some(Lane::Ordinary));
    }

    #[test]
    fn duplicate_call_carries_operation_id_only_once_bound() {
        let a = args(&[]);
        let events = vec![
            call("c1", "tc1", "Write", a.clone()),
            call("c2", "tc1", "Write", a.clone()),
            disp_for("d1", OP, "tc1", "Write", &a),
            call("c3", "tc1", "Write", a.clone()),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("duplicate_call", "c2", None, Some("tc1")),
                issue("duplicate_call", "c3", Some(OP), Some("tc1")),
            ]
        );
        assert_eq!(scan.operations[0].issues, vec![0, 1]);
    }

    #[test]
    fn duplicate_operation_is_one_issue_on_two_operations() {
        let a = args(&[]);
        let events = vec![
            call("c1", "tc1", "Write", a.clone()),
            disp_for("d1", OP, "tc1", "Write", &a),
            call("c2", "tc2", "Write", a.clone()),
            disp_for("d2", OP, "tc2", "Write", &a),
            // The second operation is unbound, so its response's refs are not compared.
            resp("r2", "tc2", "Write", None),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![issue("duplicate_operation", "d2", Some(OP), Some("tc2"))]
        );
        assert_eq!(scan.operations[0].issues, vec![0]);
        assert_eq!(scan.operations[1].issues, vec![0]);
        assert_eq!(scan.operations[1].operation_id, None);
        assert!(scan.operations[1].dispatch.is_none());
    }

    #[test]
    fn duplicate_operation_after_dispatch_without_call_keeps_the_dispatch() {
        let a = args(&[]);
        let events = vec![
            call("c1", "tc1", "Write", a.clone()),
            disp_for("d1", OP, "tc1", "Write", &a),
            disp("d2", OP, "tc2", "Write", "h"),
            call("c2", "tc2", "Write", a.clone()),
            call("c3", "tc2", "Write", a),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("event_order_conflict", "d2", Some(OP), Some("tc2")),
                issue("duplicate_operation", "d2", Some(OP), Some("tc2")),
                // Maka left the operation id on the dispatch-opened operation.
                issue("duplicate_call", "c3", Some(OP), Some("tc2")),
            ]
        );
        assert_eq!(scan.operations[1].opened_by, OpenedBy::Dispatch);
        assert_eq!(scan.operations[1].issues, vec![0, 1, 2]);
    }

    #[test]
    fn duplicate_dispatch_names_its_own_operation_id() {
        let a = args(&[]);
        let events = vec![
            call("c1", "tc1", "Write", a.clone()),
            disp_for("d1", OP, "tc1", "Write", &a),
            disp("d2", "other", "tc1", "Write", "not a hash"),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![issue(
                "duplicate_dispatch",
                "d2",
                Some("other"),
                Some("tc1")
            )]
        );
    }

    #[test]
    fn duplicate_response_and_orphans() {
        let events = vec![
            resp("r0", "tc0", "Read", None),
            resp("r00", "tc0", "Read", None),
            call("c1", "tc1", "Read", args(&[])),
            resp("r1", "tc1", "Read", None),
            resp("r2", "tc1", "Read", None),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("orphan_response", "r0", None, Some("tc0")),
                issue("duplicate_response", "r00", None, Some("tc0")),
                issue("duplicate_response", "r2", None, Some("tc1")),
            ]
        );
        assert_eq!(scan.operations.len(), 2);
        assert_eq!(scan.operations[0].opened_by, OpenedBy::Response);
    }

    #[test]
    fn orphan_response_filled_by_late_call_quietly() {
        let events = vec![
            resp("r1", "tc1", "Read", None),
            call("c1", "tc1", "Read", args(&[])),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![issue("orphan_response", "r1", None, Some("tc1"))]
        );
        assert_eq!(scan.operations[0].call_event_id, Some(s("c1")));
        // A late call with another name is an identity conflict.
        let events = vec![
            resp("r1", "tc1", "Read", None),
            call("c1", "tc1", "Bash", args(&[])),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(scan.issues[1].code, IssueCode::IdentityConflict);
        assert_eq!(scan.issues[1].event_id, s("c1"));
    }

    #[test]
    fn orphan_dispatch_is_never_emitted() {
        let scan = scan_tool_ledger(&[disp("d1", OP, "tc1", "Write", "h")]);
        assert_eq!(
            codes(&scan),
            vec![issue("event_order_conflict", "d1", Some(OP), Some("tc1"))]
        );
        assert!(!scan
            .issues
            .iter()
            .any(|i| i.code == IssueCode::OrphanDispatch));
    }

    #[test]
    fn canonical_args_hash_conflict() {
        let a = args(&[("path", "a.txt")]);
        let events = vec![
            call("c1", "tc1", "Write", a),
            disp("d1", OP, "tc1", "Write", "sha256:0"),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![issue(
                "canonical_args_hash_conflict",
                "d1",
                Some(OP),
                Some("tc1")
            )]
        );
        // An empty tool name never hashes, so it always conflicts.
        let events = vec![
            call("c1", "tc1", "", args(&[])),
            disp("d1", OP, "tc1", "", ""),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(scan.issues[0].code, IssueCode::CanonicalArgsHashConflict);
        // A late call is never hash-checked.
        let events = vec![
            disp("d1", OP, "tc1", "Write", "x"),
            call("c1", "tc1", "Write", args(&[])),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![issue("event_order_conflict", "d1", Some(OP), Some("tc1"))]
        );
    }

    #[test]
    fn invocation_identity_conflict_keeps_processing() {
        let a = args(&[]);
        let mut d = disp_for("d1", OP, "tc1", "Write", &a);
        d.run_id = s("R2");
        let events = vec![call("c1", "tc1", "Write", a), d, text("t1")];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("invocation_identity_conflict", "d1", None, None),
                issue("identity_conflict", "d1", Some(OP), Some("tc1")),
            ]
        );
        assert_eq!(scan.issues[0].run_id, s("R2"));
        assert_eq!(scan.issues[1].run_id, s("R2"));
        // The spine never moves: the first event decides.
        let mut first = text("t0");
        first.turn_id = s("T0");
        let scan = scan_tool_ledger(&[first, text("t1"), text("t2")]);
        assert_eq!(
            codes(&scan),
            vec![
                issue("invocation_identity_conflict", "t1", None, None),
                issue("invocation_identity_conflict", "t2", None, None),
            ]
        );
    }

    #[test]
    fn identity_conflicts() {
        let a = args(&[]);
        // Dispatch tool name differs from the call's; the response named like the call passes.
        let events = vec![
            call("c1", "tc1", "Bash", a.clone()),
            disp_for("d1", OP, "tc1", "Bash", &a),
            resp("r1", "tc1", "Bash", Some(refs(Some(OP), Some("tc1")))),
        ];
        let mut renamed = events.clone();
        renamed[1] = disp_for("d1", OP, "tc1", "Write", &a);
        let scan = scan_tool_ledger(&renamed);
        assert_eq!(
            codes(&scan),
            vec![
                issue("identity_conflict", "d1", Some(OP), Some("tc1")),
                // The hash is of the call's name, which the dispatch did not use.
                issue("canonical_args_hash_conflict", "d1", Some(OP), Some("tc1")),
            ]
        );
        // A generic response for a dispatched operation.
        let mut generic = events.clone();
        generic[2] = resp("r1", "tc1", "Bash", Some(refs(None, Some("tc1"))));
        let scan = scan_tool_ledger(&generic);
        assert_eq!(
            codes(&scan),
            vec![issue("identity_conflict", "r1", Some(OP), Some("tc1"))]
        );
        // Dispatch refs disagreeing with the payload.
        let mut wrong_refs = events.clone();
        wrong_refs[1].refs = Some(Box::new(refs(Some("op2"), Some("tc1"))));
        let scan = scan_tool_ledger(&wrong_refs);
        assert_eq!(
            codes(&scan),
            vec![issue("identity_conflict", "d1", Some(OP), Some("tc1"))]
        );
        // Response to a dispatch-only operation.
        let scan = scan_tool_ledger(&events[1..]);
        assert_eq!(
            codes(&scan),
            vec![
                issue("event_order_conflict", "d1", Some(OP), Some("tc1")),
                issue("identity_conflict", "r1", Some(OP), Some("tc1")),
            ]
        );
    }

    #[test]
    fn dispatch_after_response_names_the_response() {
        let a = args(&[]);
        let mut r = resp("r1", "tc1", "Write", None);
        r.session_id = s("S-resp");
        let events = vec![
            call("c1", "tc1", "Write", a.clone()),
            r,
            disp_for("d1", OP, "tc1", "Write", &a),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("invocation_identity_conflict", "r1", None, None),
                issue("identity_conflict", "r1", None, Some("tc1")),
                issue("event_order_conflict", "d1", Some(OP), Some("tc1")),
                issue("identity_conflict", "r1", Some(OP), Some("tc1")),
            ]
        );
        // Attributed to the response's own session.
        assert_eq!(scan.issues[3].session_id, s("S-resp"));
        // A T1 response with the right refs before its dispatch: order only.
        let events = vec![
            call("c1", "tc1", "Write", a.clone()),
            resp("r1", "tc1", "Write", Some(refs(Some(OP), Some("tc1")))),
            disp_for("d1", OP, "tc1", "Write", &a),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![issue("event_order_conflict", "d1", Some(OP), Some("tc1"))]
        );
        // Right refs, but the response's execution identity differs from the dispatch's.
        let mut r = resp("r1", "tc1", "Write", Some(refs(Some(OP), Some("tc1"))));
        r.turn_id = s("T-other");
        let events = vec![
            call("c1", "tc1", "Write", a.clone()),
            r,
            disp_for("d1", OP, "tc1", "Write", &a),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("invocation_identity_conflict", "r1", None, None),
                issue("identity_conflict", "r1", None, Some("tc1")),
                issue("event_order_conflict", "d1", Some(OP), Some("tc1")),
                issue("identity_conflict", "r1", Some(OP), Some("tc1")),
            ]
        );
    }

    #[test]
    fn a_late_call_becomes_the_identity_responses_are_compared_with() {
        let mut c = call("c1", "tc1", "Write", args(&[]));
        c.turn_id = s("T2");
        let mut r = resp("r1", "tc1", "Write", Some(refs(Some(OP), Some("tc1"))));
        r.turn_id = s("T2");
        let events = vec![disp("d1", OP, "tc1", "Write", "h"), c, r];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("event_order_conflict", "d1", Some(OP), Some("tc1")),
                issue("invocation_identity_conflict", "c1", None, None),
                issue("invocation_identity_conflict", "r1", None, None),
            ]
        );
        assert_eq!(*scan.operations[0].turn_id, s("T2"));
        assert_eq!(scan.operations[0].opened_by, OpenedBy::Dispatch);
    }

    #[test]
    fn a_call_after_an_orphan_response_is_hashed_by_a_later_dispatch() {
        let a = args(&[("q", "1")]);
        let events = vec![
            resp("r1", "tc1", "Read", Some(refs(Some(OP), Some("tc1")))),
            call("c1", "tc1", "Read", a.clone()),
            disp_for("d1", OP, "tc1", "Read", &a),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![
                issue("orphan_response", "r1", None, Some("tc1")),
                issue("event_order_conflict", "d1", Some(OP), Some("tc1")),
            ]
        );
    }

    #[test]
    fn recovery_fact_before_dispatch() {
        let mut events = vec![recovery("x1", RECONCILE_RESULT_KIND, OP, "")];
        events.extend(healthy_t1());
        events.push(recovery("x2", RECOVERY_DECISION_KIND, OP, "anything"));
        let scan = scan_tool_ledger(&events);
        // The empty refs call id is left out.
        assert_eq!(
            codes(&scan),
            vec![issue("event_order_conflict", "x1", Some(OP), None)]
        );
        assert_eq!(scan.operations[0].decision_event_ids, vec![s("x2")]);
        assert!(scan.operations[0].reconcile_event_ids.is_empty());
    }

    #[test]
    fn empty_operation_id_is_falsy_where_maka_tests_it() {
        let a = args(&[]);
        let events = vec![
            call("c1", "tc1", "Write", a.clone()),
            disp_for("d1", "", "tc1", "Write", &a),
            call("c2", "tc1", "Write", a),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![issue("duplicate_call", "c2", None, Some("tc1"))]
        );
    }

    #[test]
    fn pairing_is_per_invocation() {
        let a = args(&[]);
        let events = vec![
            call("c1", "tc1", "Read", a.clone()),
            moved(resp("r1", "tc1", "Read", None), "I2", "R2", "T2"),
            moved(call("c2", "tc1", "Read", a), "I2", "R2", "T2"),
        ];
        let scan = scan_tool_ledger(&events);
        assert_eq!(
            codes(&scan),
            vec![issue("orphan_response", "r1", None, Some("tc1"))]
        );
        assert_eq!(scan.operations.len(), 2);
    }

    #[test]
    fn store_order_mode_matches_exact_mode_and_rejects_a_return() {
        let a = args(&[]);
        let mut events = healthy_t1();
        events.push(moved(call("c2", "tc1", "Read", a.clone()), "J", "R2", "T2"));
        events.push(moved(resp("r2", "tc9", "Read", None), "J", "R2", "T2"));
        events.push(moved(
            disp_for("d2", OP, "tc1", "Read", &a),
            "J",
            "R2",
            "T2",
        ));
        let exact = scan_tool_ledger(&events);
        let mut scanner = ToolLedgerScanner::new(ScanOptions::store_rows());
        for e in &events {
            scanner.push(e).expect("store order");
        }
        assert_eq!(scanner.finish(), exact);
        assert_eq!(exact.issues.len(), 2);

        // Interleaved: exact mode keeps state across the return, store mode refuses it.
        let interleaved = vec![
            call("c1", "tc1", "Write", a.clone()),
            moved(text("t1"), "J", "R2", "T2"),
            disp_for("d1", OP, "tc1", "Write", &a),
        ];
        assert!(scan_tool_ledger(&interleaved).issues.is_empty());
        let mut scanner = ToolLedgerScanner::new(ScanOptions::store_rows());
        scanner.push(&interleaved[0]).expect("first");
        scanner.push(&interleaved[1]).expect("second");
        let err = scanner.push(&interleaved[2]).expect_err("return to I");
        assert_eq!(err.invocation_id, s("I"));
        assert_eq!(err.event_id, s("d1"));
    }

    #[test]
    fn partial_ordinary_events_are_ignored_but_spine_checked() {
        let mut p = text("p1");
        p.partial = true;
        p.status = Some(EventStatus::Streaming);
        p.run_id = s("R9");
        let scan = scan_tool_ledger(&[text("t0"), p]);
        assert_eq!(
            codes(&scan),
            vec![issue("invocation_identity_conflict", "p1", None, None)]
        );
    }
}
