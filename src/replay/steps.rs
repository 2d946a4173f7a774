//! A run's transcript steps: each event's steps (user and assistant text, thinking,
//! tool calls and results with their lane and partner, permission facts, token usage,
//! the turn's terminal state), with partial snapshots merged in as Maka's store does.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::fold::{lossy, RunRows};
use super::{input, transcript, Lane, Step, StepBody};
use crate::event::{Content, Role, RuntimeEvent};
use crate::json::Json;
use crate::ledger::scanner::Operation;

fn opt_lossy(s: Option<&crate::json::JsStr>) -> Option<String> {
    s.map(lossy)
}

/// The run's steps: its events in `event_seq` order, partial snapshots merged after
/// their anchor event (snapshots without an anchor first, unknown anchors last), as
/// Maka's store merges them.
pub(super) fn build_steps(
    r: &RunRows<'_>,
    snaps: &[&input::SnapshotRow],
    partner: &HashMap<String, String>,
    op_by_event: &HashMap<String, &Operation>,
) -> Vec<Step> {
    let snapshot_step = |s: &input::SnapshotRow| Step {
        run_id: r.run_id.clone(),
        index: 0,
        event_id: None,
        event_seq: None,
        ts: crate::json::parse(&s.payload_json).ok().and_then(|v| {
            v.as_object()
                .and_then(|o| o.get("ts"))
                .and_then(Json::as_f64)
        }),
        body: StepBody::Partial {
            stream_key: Some(s.stream_key.clone()),
            text: s.text.clone(),
        },
    };
    let known: HashSet<&str> = r
        .events
        .iter()
        .map(|(_, row, _)| row.event_id.as_str())
        .collect();
    let mut steps: Vec<Step> = snaps
        .iter()
        .filter(|s| s.after_event_id.is_none())
        .map(|s| snapshot_step(s))
        .collect();
    for (seq, row, decoded) in &r.events {
        let at = |body: StepBody, ts: Option<f64>| Step {
            run_id: r.run_id.clone(),
            index: 0,
            event_id: Some(row.event_id.clone()),
            event_seq: Some(*seq),
            ts,
            body,
        };
        match decoded {
            Err(message) => steps.push(at(
                StepBody::Undecodable {
                    message: message.clone(),
                },
                None,
            )),
            Ok(e) => {
                for body in event_steps(e, partner, op_by_event, r) {
                    steps.push(at(body, Some(e.ts)));
                }
            }
        }
        for s in snaps
            .iter()
            .filter(|s| s.after_event_id.as_deref() == Some(row.event_id.as_str()))
        {
            steps.push(snapshot_step(s));
        }
    }
    for s in snaps.iter().filter(|s| {
        s.after_event_id
            .as_deref()
            .is_some_and(|a| !known.contains(a))
    }) {
        steps.push(snapshot_step(s));
    }
    // Thinking joins the text of its step when the step has text.
    let mut merged: Vec<Step> = Vec::with_capacity(steps.len());
    let mut thinking: Vec<(String, String)> = Vec::new();
    for st in &steps {
        if let StepBody::Thinking { message_id, text } = &st.body {
            if steps.iter().any(
                |x| matches!(&x.body, StepBody::Assistant { message_id: m, .. } if m == message_id),
            ) {
                thinking.push((message_id.clone(), text.clone()));
                continue;
            }
        }
        merged.push(st.clone());
    }
    for st in &mut merged {
        if let StepBody::Assistant {
            message_id,
            thinking: t,
            ..
        } = &mut st.body
        {
            let parts: Vec<&str> = thinking
                .iter()
                .filter(|(m, _)| m == message_id)
                .map(|(_, x)| x.as_str())
                .collect();
            if !parts.is_empty() {
                *t = Some(parts.concat());
            }
        }
    }
    merged
}

fn event_steps(
    e: &RuntimeEvent,
    partner: &HashMap<String, String>,
    op_by_event: &HashMap<String, &Operation>,
    r: &RunRows<'_>,
) -> Vec<StepBody> {
    let mut out = Vec::new();
    let id = lossy(&e.id);
    let op = op_by_event.get(&id);
    let t1 = |is_call: bool| -> (Lane, Option<String>, Option<String>) {
        match op {
            Some(op) if op.dispatch.is_some() => {
                let mine = if is_call {
                    op.call_event_id.as_ref() == Some(&e.id)
                } else {
                    op.response.as_ref().is_some_and(|x| x.event_id == e.id)
                };
                if mine {
                    return (
                        Lane::T1,
                        op.operation_id.as_ref().map(lossy),
                        op.dispatch.as_ref().map(|d| lossy(&d.event_id)),
                    );
                }
                (Lane::Generic, None, None)
            }
            _ => (Lane::Generic, None, None),
        }
    };
    if e.partial {
        if let Some(Content::Text { text, .. } | Content::Thinking { text, .. }) = &e.content {
            out.push(StepBody::Partial {
                stream_key: None,
                text: lossy(text),
            });
        }
        return out;
    }
    match &e.content {
        Some(Content::Text {
            text,
            steering,
            fields,
        }) => match e.role {
            Role::User => out.push(StepBody::User {
                message_id: transcript::stable_message_id(e),
                text: lossy(text),
                display_text: fields
                    .get("displayText")
                    .and_then(Json::as_js_str)
                    .map(lossy),
                steering: *steering,
            }),
            Role::Model => out.push(StepBody::Assistant {
                message_id: transcript::step_message_id(e),
                text: lossy(text),
                thinking: None,
            }),
            Role::System => out.push(StepBody::Text {
                role: "system".into(),
                text: lossy(text),
            }),
            Role::Tool => out.push(StepBody::Text {
                role: "tool".into(),
                text: lossy(text),
            }),
        },
        Some(Content::Thinking { text, .. }) => out.push(StepBody::Thinking {
            message_id: transcript::step_message_id(e),
            text: lossy(text),
        }),
        Some(Content::FunctionCall {
            id: call,
            name,
            args,
            ..
        }) => {
            let (lane, operation_id, dispatch) = t1(true);
            out.push(StepBody::ToolCall {
                tool_call_id: lossy(call),
                tool_name: lossy(name),
                step_id: opt_lossy(e.refs.as_ref().and_then(|r| r.step_id.as_ref())),
                args: args.to_serde(),
                lane,
                operation_id,
                dispatch_event_id: dispatch,
                result_event_id: partner.get(&id).cloned(),
            });
        }
        Some(Content::FunctionResponse {
            id: call,
            name,
            result,
            is_error,
            ..
        }) => {
            let (lane, operation_id, _) = t1(false);
            let duration = e
                .actions
                .as_ref()
                .and_then(|a| a.state_delta.as_ref())
                .and_then(|s| s.get("durationMs"))
                .and_then(Json::as_f64);
            out.push(StepBody::ToolResult {
                tool_call_id: lossy(call),
                tool_name: lossy(name),
                is_error: *is_error == Some(true),
                result: result.to_serde(),
                duration_ms: duration,
                lane,
                operation_id,
                call_event_id: partner.get(&id).cloned(),
            });
        }
        Some(Content::Error { message, code, .. }) if !e.is_terminal() => {
            out.push(StepBody::Error {
                message: lossy(message),
                code: opt_lossy(code.as_ref()),
            })
        }
        _ => {}
    }
    if let Some(a) = &e.actions {
        let field = |v: &Option<Json>, k: &str| {
            v.as_ref()
                .and_then(Json::as_object)
                .and_then(|o| o.get(k))
                .and_then(Json::as_js_str)
                .map(lossy)
        };
        if a.permission_request.is_some() {
            out.push(StepBody::PermissionRequest {
                request_id: field(&a.permission_request, "requestId"),
                tool_call_id: field(&a.permission_request, "toolUseId"),
                tool_name: field(&a.permission_request, "toolName"),
            });
        }
        if let Some(d) = &a.permission_decision {
            out.push(StepBody::PermissionDecision {
                request_id: field(&a.permission_decision, "requestId"),
                tool_call_id: opt_lossy(e.refs.as_ref().and_then(|r| r.tool_call_id.as_ref())),
                decision: d
                    .as_object()
                    .and_then(|o| o.get("decision"))
                    .map_or(Value::Null, Json::to_serde),
            });
        }
        if let Some(u) = a.token_usage.as_ref().and_then(Json::as_object) {
            let g = |k: &str| u.get(k).map_or(Value::Null, Json::to_serde);
            out.push(StepBody::TokenUsage {
                input: g("input"),
                output: g("output"),
                total: g("total"),
            });
        }
    }
    if e.is_terminal() {
        let header = r.header.as_ref();
        let status = transcript::turn_status(e.status, header);
        out.push(StepBody::TurnState {
            status: status.map(str::to_owned),
            error_class: (status == Some("failed"))
                .then(|| transcript::failure_class(e, header).unwrap_or_else(|| "unknown".into())),
            abort_source: (status == Some("aborted"))
                .then(|| transcript::abort_source(e, header))
                .flatten(),
            error_message: match &e.content {
                Some(Content::Error { message, .. }) => Some(lossy(message)),
                _ => None,
            },
        });
    }
    out
}
