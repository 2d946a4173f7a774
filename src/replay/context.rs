//! The tool pairing of the model context Maka would send next
//! (`buildRuntimeEventModelReplayPlan`): which call each result answers, which
//! results have no call (`unmatched_tool_result`, a provider rejects the request)
//! and which calls have no result (`unmatched_tool_call`, dropped from the request).
//!
//! Pairing follows Maka exactly: calls are keyed by provider call id alone; a later
//! call with the same id replaces the earlier one; a result consumes its call.

use crate::event::{Content, ModelVisibility, Role, RuntimeEvent};

/// A result whose call is in the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paired {
    pub call_event_id: String,
    pub result_event_id: String,
    /// Set when the result's tool name differs from the call's (`tool_id_mismatch`).
    pub name_mismatch: Option<(String, String)>,
}

/// An event left unpaired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unpaired {
    pub event_id: String,
    pub tool_call_id: String,
    pub tool_name: String,
}

/// The pairing part of the model replay plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextPlan {
    pub paired: Vec<Paired>,
    pub results_without_call: Vec<Unpaired>,
    pub calls_without_result: Vec<Unpaired>,
}

/// Builds the pairing over `events` in Maka's order. With `strict` false, the
/// visibility and role filters of the model plan are not applied (the pairing a
/// reader of the transcript sees).
pub fn plan(events: &[&RuntimeEvent], strict: bool) -> ContextPlan {
    let mut out = ContextPlan::default();
    // Insertion-ordered map: provider call id → (call event id, name).
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for e in events {
        if e.partial {
            continue;
        }
        if strict && e.model_visibility == Some(ModelVisibility::Hidden) {
            continue;
        }
        if strict && e.role == Role::System {
            continue;
        }
        match &e.content {
            Some(Content::FunctionCall { id, name, .. }) => {
                if strict && e.role != Role::Model {
                    continue;
                }
                let id = id.to_string_lossy();
                let entry = (e.id.to_string_lossy(), name.to_string_lossy());
                match calls.iter_mut().find(|(k, _, _)| *k == id) {
                    Some(slot) => (slot.1, slot.2) = entry,
                    None => calls.push((id, entry.0, entry.1)),
                }
            }
            Some(Content::FunctionResponse { id, name, .. }) => {
                if strict && e.role != Role::Tool {
                    continue;
                }
                let id = id.to_string_lossy();
                let name = name.to_string_lossy();
                match calls.iter().position(|(k, _, _)| *k == id) {
                    None => out.results_without_call.push(Unpaired {
                        event_id: e.id.to_string_lossy(),
                        tool_call_id: id,
                        tool_name: name,
                    }),
                    Some(i) => {
                        let (_, call_event, call_name) = calls.remove(i);
                        out.paired.push(Paired {
                            call_event_id: call_event,
                            result_event_id: e.id.to_string_lossy(),
                            name_mismatch: (call_name != name).then_some((call_name, name)),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out.calls_without_result = calls
        .into_iter()
        .map(|(id, event_id, name)| Unpaired {
            event_id,
            tool_call_id: id,
            tool_name: name,
        })
        .collect();
    out
}
