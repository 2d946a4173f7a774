//! What the scan keeps per invocation (spine, provider-call-id index, pending calls and
//! responses), and entering, leaving and interning within an invocation.

use crate::fast_hash::HashMap;
use std::sync::Arc;

use super::{IssueCode, ScanOrderError, ToolLedgerScanner};
use crate::event::RuntimeEvent;
use crate::json::JsStr;

/// (session, run, turn) of an event, shared where possible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Spine {
    pub(super) session: Arc<JsStr>,
    pub(super) run: Arc<JsStr>,
    pub(super) turn: Arc<JsStr>,
}

impl Spine {
    pub(super) fn matches(&self, event: &RuntimeEvent) -> bool {
        *self.session == event.session_id
            && *self.run == event.run_id
            && *self.turn == event.turn_id
    }
}

/// A call that has no dispatch yet: Maka's canonical hash of its tool name and
/// arguments, which the dispatch must carry (`None`: they do not hash).
pub(super) struct PendingCall {
    pub(super) args_hash: Option<String>,
    /// The call's refs a dispatch is compared with, under the tool-dependency rules.
    pub(super) refs: Option<Box<crate::ledger::dependencies::CallRefs>>,
}

/// A response that a later dispatch may still have to check.
pub(super) struct PendingResponse {
    pub(super) event_id: JsStr,
    pub(super) spine: Spine,
    pub(super) refs_operation_id: Option<JsStr>,
    pub(super) refs_tool_call_id: Option<JsStr>,
}

/// Per-operation state that only a later dispatch of the same invocation needs.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) call: Option<PendingCall>,
    pub(super) response: Option<PendingResponse>,
}

/// What the scan keeps about one invocation while it is current.
pub(super) struct InvocationState {
    pub(super) invocation_id: JsStr,
    /// Maka's `byToolCall` restricted to this invocation: provider call id -> operation.
    pub(super) by_tool_call: HashMap<JsStr, usize>,
    /// Operations of this invocation that have no dispatch yet.
    pub(super) pending: HashMap<usize, Pending>,
}

impl InvocationState {
    pub(super) fn new(invocation_id: &JsStr) -> Self {
        InvocationState {
            invocation_id: invocation_id.clone(),
            by_tool_call: HashMap::default(),
            pending: HashMap::default(),
        }
    }
}
impl ToolLedgerScanner {
    /// Under store order, leaves the current invocation (if any) for `invocation`,
    /// which the caller then makes current; `false`, with nothing done, when its id
    /// does not grow: the store orders by `invocation_id` (bytes), so that would be a
    /// return to a left invocation.
    pub(super) fn leave_in_store_order(&mut self, invocation: &JsStr) -> bool {
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
    pub(super) fn enter_invocation(&mut self, event: &RuntimeEvent) -> Result<(), ScanOrderError> {
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
    pub(super) fn spine_of(&mut self, event: &RuntimeEvent) -> Spine {
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

    pub(super) fn intern(&mut self, s: &JsStr) -> Arc<JsStr> {
        if let Some(shared) = self.interned.get(s) {
            return shared.clone();
        }
        let shared = Arc::new(s.clone());
        self.interned.insert(shared.clone());
        shared
    }

    pub(super) fn invocation_arc(&self, invocation: &JsStr) -> Arc<JsStr> {
        match self.spines.get_key_value(invocation) {
            Some((key, _)) => key.clone(),
            None => Arc::new(invocation.clone()),
        }
    }

    pub(super) fn state(&mut self) -> &mut InvocationState {
        self.current
            .as_mut()
            .expect("push enters the event's invocation first")
    }
}
