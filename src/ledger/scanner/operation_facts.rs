//! Maka's rules for each lane's fact: calls, dispatches, responses and recovery facts
//! applied to their operation, and the issues they record.

use super::invocations::{PendingCall, PendingResponse, Spine};
use super::{
    DispatchFacts, IssueCode, Lane, LateTouch, LedgerIssue, OpenedBy, Operation, ResponseFacts,
    ToolLedgerScanner,
};
use crate::args_hash::canonical_tool_args_hash;
use crate::event::{Content, RuntimeEvent};
use crate::json::JsStr;
impl ToolLedgerScanner {
    pub(super) fn scan_call(
        &mut self,
        event: &RuntimeEvent,
        spine: Spine,
        args_hash: Option<Option<String>>,
    ) {
        let Some(Content::FunctionCall { id, name, args, .. }) = &event.content else {
            return;
        };
        let dependencies = self.options.tool_dependencies;
        let pending = || PendingCall {
            args_hash: args_hash.unwrap_or_else(|| canonical_tool_args_hash(name, args).ok()),
            refs: dependencies
                .then(|| crate::ledger::dependencies::CallRefs::of(event).map(Box::new))
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

    pub(super) fn scan_dispatch(&mut self, event: &RuntimeEvent, spine: Spine) {
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

    pub(super) fn scan_response(&mut self, event: &RuntimeEvent, spine: Spine) {
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

    pub(super) fn scan_recovery(&mut self, event: &RuntimeEvent, lane: Lane) {
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
    pub(super) fn add_issue(
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

    pub(super) fn record(&mut self, operation: Option<usize>, issue: LedgerIssue) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Actions, EventStatus};

    use crate::ledger::scanner::test_events::*;
    use crate::ledger::scanner::*;
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
