//! Maka's lane check: which tool-ledger lane an event claims, and whether its envelope
//! (role, author, actions, refs) is one that lane allows.

use super::{RECONCILE_RESULT_KIND, RECOVERY_DECISION_KIND};
use crate::event::RuntimeEvent;
use crate::json::Json;
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Actions;
    use crate::json::JsObject;
    use crate::ledger::scanner::test_events::*;

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
}
