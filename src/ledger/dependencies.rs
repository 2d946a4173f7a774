//! The tool-dependency rules of Maka's scanner after main (its ledger reducer's
//! `toolDependencyIssues` and `callRefsConflict`; facts in docs/scan.md, "Files newer
//! than wsledger"). Used only under [`super::scanner::ScanOptions::tool_dependencies`].
//! Pure.

use crate::event::{Refs, RuntimeEvent, ToolDispatch};
use crate::fast_hash::HashMap;
use crate::json::JsStr;

use super::scanner::{IssueCode, LedgerIssue};

/// The refs of a function call that its dispatch is compared with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallRefs {
    operation_id: Option<JsStr>,
    tool_call_id: Option<JsStr>,
    parent_operation_id: Option<JsStr>,
    parent_tool_call_id: Option<JsStr>,
}

impl CallRefs {
    /// The call's refs; `None` when it has none (nothing to compare).
    pub fn of(call: &RuntimeEvent) -> Option<CallRefs> {
        let r = call.refs.as_ref()?;
        Some(CallRefs {
            operation_id: r.operation_id.clone(),
            tool_call_id: r.tool_call_id.clone(),
            parent_operation_id: r.parent_operation_id.clone(),
            parent_tool_call_id: r.parent_tool_call_id.clone(),
        })
    }

    /// Whether the call's refs disagree with its dispatch: a call operation or tool
    /// call id that is not the dispatch's, or call parent refs that are not the
    /// dispatch's parent refs.
    pub fn conflict(&self, dispatch: &ToolDispatch, dispatch_refs: Option<&Refs>) -> bool {
        let differs =
            |mine: &Option<JsStr>, theirs: &JsStr| mine.as_ref().is_some_and(|m| m != theirs);
        if differs(&self.operation_id, &dispatch.operation_id)
            || differs(&self.tool_call_id, &dispatch.provider_tool_call_id)
        {
            return true;
        }
        let has_parent = self.parent_operation_id.is_some() || self.parent_tool_call_id.is_some();
        has_parent
            && (self.parent_operation_id
                != dispatch_refs.and_then(|r| r.parent_operation_id.clone())
                || self.parent_tool_call_id
                    != dispatch_refs.and_then(|r| r.parent_tool_call_id.clone()))
    }
}

/// A dispatch that names a parent operation.
#[derive(Clone, Debug)]
struct Child {
    index: usize,
    event_id: JsStr,
    session_id: JsStr,
    run_id: JsStr,
    operation_id: JsStr,
    tool_call_id: JsStr,
    parent_operation_id: JsStr,
    parent_tool_call_id: JsStr,
}

/// What the scan keeps for the rules: the tool call of every bound operation (by its
/// operation index), and every dispatch naming a parent.
#[derive(Default)]
pub struct Dependencies {
    calls: HashMap<usize, JsStr>,
    children: Vec<Child>,
}

impl Dependencies {
    /// Operation `index` was bound by `dispatch_event` to `operation_id`, for tool call
    /// `tool_call_id`.
    pub fn bind(
        &mut self,
        index: usize,
        tool_call_id: &JsStr,
        operation_id: &JsStr,
        dispatch_event: &RuntimeEvent,
    ) {
        self.calls.insert(index, tool_call_id.clone());
        let refs = dispatch_event.refs.as_ref();
        // Maka skips a dispatch whose parent refs are not both truthy.
        let truthy = |v: Option<&JsStr>| v.filter(|s| !s.is_empty()).cloned();
        let parent_op = truthy(refs.and_then(|r| r.parent_operation_id.as_ref()));
        let parent_call = truthy(refs.and_then(|r| r.parent_tool_call_id.as_ref()));
        if let (Some(parent_operation_id), Some(parent_tool_call_id)) = (parent_op, parent_call) {
            self.children.push(Child {
                index,
                event_id: dispatch_event.id.clone(),
                session_id: dispatch_event.session_id.clone(),
                run_id: dispatch_event.run_id.clone(),
                operation_id: operation_id.clone(),
                tool_call_id: tool_call_id.clone(),
                parent_operation_id,
                parent_tool_call_id,
            });
        }
    }

    /// The issues, in Maka's order (operations in opening order: first each missing or
    /// foreign parent, then each operation on a cycle), each with the operation it is
    /// recorded on. `bound`: the operation index an operation id is bound to.
    pub fn issues(mut self, bound: impl Fn(&JsStr) -> Option<usize>) -> Vec<(usize, LedgerIssue)> {
        self.children.sort_by_key(|c| c.index);
        let issue = |c: &Child, code| {
            (
                c.index,
                LedgerIssue {
                    code,
                    event_id: c.event_id.clone(),
                    operation_id: Some(c.operation_id.clone()).filter(|s| !s.is_empty()),
                    tool_call_id: Some(c.tool_call_id.clone()),
                    session_id: c.session_id.clone(),
                    run_id: c.run_id.clone(),
                },
            )
        };
        let mut out = Vec::new();
        let mut parent_of: HashMap<usize, usize> = HashMap::default();
        for c in &self.children {
            match bound(&c.parent_operation_id) {
                None => out.push(issue(c, IssueCode::ParentOperationMissing)),
                Some(p) if self.calls.get(&p) != Some(&c.parent_tool_call_id) => {
                    out.push(issue(c, IssueCode::ParentIdentityConflict))
                }
                Some(p) => {
                    parent_of.insert(c.index, p);
                }
            }
        }
        // Each operation has at most one parent: the operations on a cycle are those
        // that a walk up the parents comes back to.
        let mut on_cycle = std::collections::BTreeSet::new();
        let mut done: std::collections::HashSet<usize> = std::collections::HashSet::new();
        for &start in parent_of.keys() {
            let mut path: Vec<usize> = Vec::new();
            let mut at = Some(start);
            while let Some(node) = at {
                if done.contains(&node) {
                    break;
                }
                if let Some(pos) = path.iter().position(|&n| n == node) {
                    on_cycle.extend(path[pos..].iter().copied());
                    break;
                }
                path.push(node);
                at = parent_of.get(&node).copied();
            }
            done.extend(path);
        }
        for c in self.children.iter().filter(|c| on_cycle.contains(&c.index)) {
            out.push(issue(c, IssueCode::ParentDependencyCycle));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::scanner::test_events::{call, disp};
    use crate::ledger::scanner::{scan_tool_ledger, ScanOptions, ToolLedgerScanner};

    fn with_parent(mut e: RuntimeEvent, op: &str, tc: &str) -> RuntimeEvent {
        let refs = e.refs.get_or_insert_with(Default::default);
        refs.parent_operation_id = Some(JsStr::new(op));
        refs.parent_tool_call_id = Some(JsStr::new(tc));
        e
    }

    fn codes(events: &[RuntimeEvent], dependencies: bool) -> Vec<(String, String)> {
        let mut s = ToolLedgerScanner::new(ScanOptions {
            tool_dependencies: dependencies,
            ..ScanOptions::default()
        });
        for e in events {
            s.push(e).unwrap();
        }
        s.finish()
            .issues
            .iter()
            .map(|i| (i.code.as_str().to_owned(), i.event_id.to_string()))
            .collect()
    }

    #[test]
    fn a_child_of_a_known_parent_is_clean_and_main_never_looks() {
        let events = vec![
            call("c1", "tc1", "exec", args()),
            disp("d1", "op1", "tc1", "exec", &hash("exec", "{}")),
            call("c2", "tc2", "Read", args()),
            with_parent(
                disp("d2", "op2", "tc2", "Read", &hash("Read", "{}")),
                "op1",
                "tc1",
            ),
        ];
        assert!(codes(&events, true).is_empty());
        assert_eq!(
            codes(&events, false),
            scan_tool_ledger(&events)
                .issues
                .iter()
                .map(|i| (i.code.as_str().to_owned(), i.event_id.to_string()))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn missing_foreign_and_cyclic_parents() {
        let h = hash("Read", "{}");
        let missing = vec![
            call("c2", "tc2", "Read", args()),
            with_parent(disp("d2", "op2", "tc2", "Read", &h), "op9", "tc9"),
        ];
        assert_eq!(
            codes(&missing, true),
            [("parent_operation_missing".into(), "d2".into())]
        );
        assert!(codes(&missing, false).is_empty());
        let foreign = vec![
            call("c1", "tc1", "Read", args()),
            disp("d1", "op1", "tc1", "Read", &h),
            call("c2", "tc2", "Read", args()),
            with_parent(disp("d2", "op2", "tc2", "Read", &h), "op1", "tcX"),
        ];
        assert_eq!(
            codes(&foreign, true),
            [("parent_identity_conflict".into(), "d2".into())]
        );
        let cycle = vec![
            call("c1", "tc1", "Read", args()),
            with_parent(disp("d1", "op1", "tc1", "Read", &h), "op2", "tc2"),
            call("c2", "tc2", "Read", args()),
            with_parent(disp("d2", "op2", "tc2", "Read", &h), "op1", "tc1"),
        ];
        assert_eq!(
            codes(&cycle, true),
            [
                ("parent_dependency_cycle".into(), "d1".into()),
                ("parent_dependency_cycle".into(), "d2".into())
            ]
        );
    }

    #[test]
    fn call_refs_that_disagree_with_the_dispatch_are_an_identity_conflict() {
        let h = hash("Read", "{}");
        let mut c = call("c1", "tc1", "Read", args());
        c.refs = Some(Box::new(Refs {
            operation_id: Some(JsStr::new("other")),
            ..Refs::default()
        }));
        let events = vec![c, disp("d1", "op1", "tc1", "Read", &h)];
        assert_eq!(
            codes(&events, true),
            [("identity_conflict".into(), "d1".into())]
        );
        assert!(codes(&events, false).is_empty());
    }

    /// The response lane of the newer scanner (the key only an event read with the
    /// newer rules carries).
    #[test]
    fn a_tool_result_may_carry_a_managed_mutation_terminal() {
        use crate::event::newer::decode_newer;
        use crate::ledger::scanner::{tool_ledger_lane, Lane};
        use crate::release::rules::DecoderRules;
        const BASE: &str = r#""id":"e","invocationId":"i","runId":"i","sessionId":"s","turnId":"t","ts":1,"partial":false"#;
        let terminal = format!(
            r#""managedMutationTerminal":{{"protocol":"managed_mutation_terminal_v1","operationId":"o","dispatchEventId":"d","workspaceInstanceId":"instance_{}","terminalKind":"operation_failed_no_effect"}}"#,
            "0".repeat(32)
        );
        let response = |actions: &str| {
            format!(
                r#"{{{BASE},"role":"tool","author":"tool","content":{{"kind":"function_response","id":"tc","name":"Write","result":null}},"actions":{{{actions}}}}}"#
            )
        };
        for (actions, lane) in [
            (terminal.clone(), Some(Lane::FunctionResponse)),
            (
                format!(r#"{terminal},"stateDelta":{{"durationMs":3}}"#),
                Some(Lane::FunctionResponse),
            ),
            (format!(r#"{terminal},"stateDelta":{{"other":3}}"#), None),
            (
                format!(r#"{terminal},"formAnswerAccepted":{{"requestId":"r"}}"#),
                None,
            ),
        ] {
            let event = decode_newer(&response(&actions), &DecoderRules::NEWER_THAN_MAIN)
                .unwrap()
                .unwrap();
            assert_eq!(tool_ledger_lane(&event), lane, "{actions}");
        }
    }

    fn args() -> crate::json::Json {
        crate::json::Json::Object(Default::default())
    }

    fn hash(name: &str, _args: &str) -> String {
        crate::args_hash::canonical_tool_args_hash(&JsStr::new(name), &args()).unwrap()
    }
}
