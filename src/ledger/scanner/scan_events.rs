//! The scanner's entry points: made, fed event by event (whole, prepared, or an ordinary
//! event by its identity), its dependencies settled, and finished.

use crate::fast_hash::{HashMap, HashSet};
use std::sync::Arc;

use super::invocations::{InvocationState, Spine};
use super::operation_ids::OpIds;
use super::{
    tool_ledger_lane_as, IssueCode, Lane, LedgerIssue, ScanOptions, ScanOrderError, ToolLedgerScan,
    ToolLedgerScanner,
};
use crate::event::RuntimeEvent;
use crate::json::JsStr;
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
}
