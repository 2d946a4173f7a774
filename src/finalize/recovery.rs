//! What Maka's start-up recovery decides for a run, from its operational run events
//! and its transcript. Pure.

use serde_json::{Map, Value};

use crate::db::facts::{BoundaryRequestRow, MessageRow, RunEventRow};
use crate::header::{HeaderStatus, RunHeader};

/// Maka's recovery diagnostic for a non-terminal run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub recovery_reason: &'static str,
    /// Type of the last run event that is not `event_corrupt`.
    pub last_event_type: Option<String>,
    /// Some run event is corrupt.
    pub event_corrupt: bool,
}

/// A run event's `type`; a record that does not decode reads as `event_corrupt`, as
/// in Maka's evidence read.
fn run_event_type(e: &RunEventRow) -> String {
    match serde_json::from_str::<Value>(&e.record_json) {
        Ok(Value::Object(o)) => match o.get("type") {
            Some(Value::String(t)) if !t.is_empty() => t.clone(),
            _ => "event_corrupt".into(),
        },
        _ => "event_corrupt".into(),
    }
}

/// Whether the run already has `run_completed`, `run_failed` or `run_cancelled`.
pub fn has_terminal_run_event(events: &[RunEventRow]) -> bool {
    events.iter().any(|e| {
        matches!(
            run_event_type(e).as_str(),
            "run_completed" | "run_failed" | "run_cancelled"
        )
    })
}

/// Maka's `classifyAgentRunRecovery` for a non-terminal header (always failed /
/// `app_restarted`); the reason comes from the last non-corrupt run event.
pub fn classify(header_status: HeaderStatus, events: &[RunEventRow]) -> Diagnostic {
    let types: Vec<String> = events.iter().map(run_event_type).collect();
    let corrupt = types.iter().any(|t| t == "event_corrupt");
    let last = types.iter().rev().find(|t| *t != "event_corrupt").cloned();
    let terminal_event = types
        .iter()
        .any(|t| matches!(t.as_str(), "run_completed" | "run_failed" | "run_cancelled"));
    let l = last.as_deref();
    let reason = if l == Some("model_stream_completed") && !terminal_event {
        "model_stream_completed_without_runtime_terminal"
    } else if header_status == HeaderStatus::WaitingForUser
        || matches!(l, Some("permission_requested" | "permission_failed"))
    {
        "stale_user_wait"
    } else if l == Some("tool_started") {
        "tool_interrupted"
    } else if matches!(header_status, HeaderStatus::Created | HeaderStatus::Running)
        || matches!(
            l,
            None | Some(
                "run_created"
                    | "run_started"
                    | "turn_started"
                    | "model_resolved"
                    | "model_stream_started"
                    | "run_status_changed"
            )
        )
    {
        "run_interrupted"
    } else {
        "non_terminal_run_recovered"
    };
    Diagnostic {
        recovery_reason: reason,
        last_event_type: last,
        event_corrupt: corrupt,
    }
}

/// Request ids of sandbox boundary requests a host restart closed against this run
/// (Maka then reports the failure as `sandbox_boundary_closed_by_restart`).
pub fn restart_closures(header: &RunHeader, requests: &[BoundaryRequestRow]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| r.status == "denied" && r.outcome_reason.as_deref() == Some("host_restarted"))
        .filter(|r| match &r.run_id {
            Some(run) => *run == header.run_id,
            None => r.turn_id.as_deref() == Some(header.turn_id.as_str()),
        })
        .filter_map(|r| r.request_id.clone())
        .collect()
}

/// Transcript records, decoded as JSON objects (records that do not parse are left out).
pub fn decoded_messages(messages: &[MessageRow]) -> Vec<Map<String, Value>> {
    messages
        .iter()
        .filter_map(|m| match serde_json::from_str::<Value>(&m.record_json) {
            Ok(Value::Object(o)) => Some(o),
            _ => None,
        })
        .collect()
}

fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str)
}

/// The latest `turn_state` record of a turn, in transcript order.
pub fn latest_turn_state<'a>(
    messages: &'a [Map<String, Value>],
    turn_id: &str,
) -> Option<&'a Map<String, Value>> {
    messages
        .iter()
        .rev()
        .find(|m| str_of(m, "type") == Some("turn_state") && str_of(m, "turnId") == Some(turn_id))
}

/// `status` of a turn_state record.
pub fn turn_state_status(m: &Map<String, Value>) -> Option<&str> {
    str_of(m, "status")
}

/// Maka's `turnHasRetainedOutput`: an assistant record with non-blank text, or a tool
/// result, in the turn.
pub fn turn_has_retained_output(messages: &[Map<String, Value>], turn_id: &str) -> bool {
    messages.iter().any(|m| {
        str_of(m, "turnId") == Some(turn_id)
            && match str_of(m, "type") {
                Some("assistant") => str_of(m, "text").is_some_and(|t| !t.trim().is_empty()),
                Some("tool_result") => true,
                _ => false,
            }
    })
}

/// Whether Maka's ledger repair would backfill a terminal from the transcript instead
/// of writing `missing_terminal_event`: the turn's latest `turn_state` is terminal and
/// agrees with the (terminal) header. Returns the event status it would write.
pub fn trusted_transcript_terminal(
    header: &RunHeader,
    messages: &[Map<String, Value>],
) -> Option<&'static str> {
    let turn = messages
        .iter()
        .filter(|m| str_of(m, "turnId") == Some(header.turn_id.as_str()));
    let mut turn = turn;
    let latest = turn.rfind(|m| str_of(m, "type") == Some("turn_state"))?;
    let legacy = turn_state_status(latest)?;
    let error_class = str_of(latest, "errorClass").filter(|s| !s.is_empty());
    let abort_source = str_of(latest, "abortSource").filter(|s| !s.is_empty());
    let run_class = header.failure_class.as_deref().filter(|s| !s.is_empty());
    let run = header.status;
    let (legacy_failed, run_failed) = (legacy == "failed", run == HeaderStatus::Failed);
    let (legacy_aborted, run_cancelled) = (legacy == "aborted", run == HeaderStatus::Cancelled);
    // Maka's backfill `terminalStatus`.
    let status = if legacy == "completed" || run == HeaderStatus::Completed {
        "completed"
    } else if (legacy_failed && run_failed)
        || ((legacy_failed || run_failed) && (run_class.is_some() || error_class.is_some()))
    {
        "failed"
    } else if (legacy_aborted && run_cancelled)
        || ((legacy_aborted || run_cancelled) && abort_source.is_some())
    {
        "aborted"
    } else {
        return None;
    };
    let trusted = match status {
        "completed" => run == HeaderStatus::Completed && legacy == "completed",
        "failed" => {
            run == HeaderStatus::Failed
                && legacy == "failed"
                && (run_class.is_none() || error_class.is_none() || run_class == error_class)
        }
        _ => run == HeaderStatus::Cancelled && legacy == "aborted",
    };
    trusted.then_some(status)
}

/// The first transcript record of the turn whose content the run's log lacks (Maka's
/// repair would backfill it before sealing), as `"<type> <id>"`. An approximation of
/// Maka's matching: a record counts as present when an event references it by
/// `refs.storedMessageId`, or carries the same text, tool call, tool result,
/// permission decision or token counts.
pub fn transcript_content_missing_from_log(
    header: &RunHeader,
    messages: &[Map<String, Value>],
    events: &[crate::event::RuntimeEvent],
) -> Option<String> {
    use crate::event::{Content, Role};
    let turn: Vec<&Map<String, Value>> = messages
        .iter()
        .filter(|m| str_of(m, "turnId") == Some(header.turn_id.as_str()))
        .collect();
    let referenced = |id: &str| {
        events.iter().any(|e| {
            e.refs
                .as_ref()
                .and_then(|r| r.stored_message_id.as_ref())
                .is_some_and(|s| *s == *id)
                || e.id == *id
        })
    };
    let text_event = |role: Role, text: &str| {
        events.iter().any(|e| {
            !e.partial
                && e.role == role
                && matches!(&e.content, Some(Content::Text { text: t, .. }) if *t == *text)
        })
    };
    let thinking_event = |text: &str| {
        events.iter().any(|e| {
            !e.partial
                && matches!(&e.content, Some(Content::Thinking { text: t, .. }) if *t == *text)
        })
    };
    let call_ids: Vec<&str> = turn
        .iter()
        .filter(|m| str_of(m, "type") == Some("tool_call"))
        .filter_map(|m| str_of(m, "id"))
        .collect();
    for m in &turn {
        let kind = str_of(m, "type").unwrap_or("");
        let id = str_of(m, "id").unwrap_or("");
        if !id.is_empty() && referenced(id) {
            continue;
        }
        let present = match kind {
            "user" => text_event(Role::User, str_of(m, "text").unwrap_or("")),
            "assistant" => {
                let text_ok = text_event(Role::Model, str_of(m, "text").unwrap_or(""));
                let thinking = m.get("thinking").and_then(Value::as_object);
                let parts: Vec<&str> = match thinking {
                    None => Vec::new(),
                    Some(t) => match t.get("parts").and_then(Value::as_array) {
                        Some(parts) => parts
                            .iter()
                            .filter_map(|p| p.get("text").and_then(Value::as_str))
                            .collect(),
                        None => t.get("text").and_then(Value::as_str).into_iter().collect(),
                    },
                };
                text_ok && parts.iter().all(|p| thinking_event(p))
            }
            "tool_call" => {
                let provider_native = m.get("providerExecuted") == Some(&Value::Bool(true));
                provider_native
                    || events.iter().any(|e| {
                        matches!(&e.content, Some(Content::FunctionCall { id: cid, .. }) if *cid == *id)
                    })
            }
            "tool_result" => {
                let use_id = str_of(m, "toolUseId").unwrap_or("");
                let provider_without_output = m.get("providerExecuted") == Some(&Value::Bool(true))
                    && m.get("providerOutput").is_none();
                provider_without_output
                    || !call_ids.contains(&use_id)
                    || events.iter().any(|e| {
                        matches!(&e.content, Some(Content::FunctionResponse { id: rid, .. }) if *rid == *use_id)
                    })
            }
            "permission_decision" => {
                let use_id = str_of(m, "toolUseId").unwrap_or("");
                !call_ids.contains(&use_id)
                    || events.iter().any(|e| {
                        e.actions
                            .as_ref()
                            .and_then(|a| a.permission_decision.as_ref())
                            .and_then(|d| d.as_object())
                            .and_then(|d| d.get("requestId"))
                            .and_then(|r| r.as_str())
                            == Some(id)
                    })
            }
            "token_usage" => {
                let want = (
                    m.get("input").and_then(Value::as_f64),
                    m.get("output").and_then(Value::as_f64),
                );
                events.iter().any(|e| {
                    let usage = e
                        .actions
                        .as_ref()
                        .and_then(|a| a.token_usage.as_ref())
                        .and_then(|u| u.as_object());
                    usage.is_some_and(|u| {
                        (
                            u.get("input").and_then(|v| v.as_f64()),
                            u.get("output").and_then(|v| v.as_f64()),
                        ) == want
                    })
                })
            }
            _ => true,
        };
        if !present {
            return Some(format!("{kind} {id}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: i64, t: &str) -> RunEventRow {
        RunEventRow {
            sequence: seq,
            event_id: format!("e{seq}"),
            event_type: t.into(),
            event_ts: seq,
            record_json: format!(r#"{{"type":"{t}","id":"e{seq}"}}"#),
        }
    }

    #[test]
    fn reasons_follow_makas_order() {
        let r = |s: HeaderStatus, types: &[&str]| {
            let evs: Vec<_> = types
                .iter()
                .enumerate()
                .map(|(i, t)| ev(i as i64, t))
                .collect();
            classify(s, &evs).recovery_reason
        };
        use HeaderStatus::*;
        assert_eq!(
            r(Running, &["run_started", "model_stream_completed"]),
            "model_stream_completed_without_runtime_terminal"
        );
        assert_eq!(
            r(Running, &["model_stream_completed", "run_failed"]),
            "run_interrupted"
        );
        assert_eq!(r(WaitingForUser, &["tool_started"]), "stale_user_wait");
        assert_eq!(r(Running, &["permission_requested"]), "stale_user_wait");
        assert_eq!(
            r(Running, &["run_started", "tool_started"]),
            "tool_interrupted"
        );
        assert_eq!(r(Running, &["tool_completed"]), "run_interrupted");
        assert_eq!(r(Created, &[]), "run_interrupted");
    }

    #[test]
    fn corrupt_events_are_skipped_for_the_last_type_and_flagged() {
        let mut evs = vec![ev(0, "run_started"), ev(1, "tool_started")];
        evs.push(RunEventRow {
            record_json: "{broken".into(),
            ..ev(2, "x")
        });
        let d = classify(HeaderStatus::Running, &evs);
        assert_eq!(d.recovery_reason, "tool_interrupted");
        assert_eq!(d.last_event_type.as_deref(), Some("tool_started"));
        assert!(d.event_corrupt);
    }
}
