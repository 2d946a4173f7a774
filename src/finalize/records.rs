//! The records finalize writes, built exactly as Maka builds them (its terminal-event,
//! tool-outcome, header, run-event, turn-state and session-status builders). Pure.

use serde_json::{json, Map, Value};

use crate::event::{decode_event, encode_canonical, event_kind, EncodeError};
use crate::header::RunHeader;
use crate::json::Json;

/// The marker finalize leaves in every `stateDelta` / run-event `data` it writes.
pub const REPAIRED_BY: &str = "wsledger";

/// Text of Maka's synthetic result for an unanswered `outcome_unknown` dispatch.
pub const OUTCOME_UNKNOWN_TEXT: &str = "outcome_unknown: the Host restarted after dispatching this Client Capability call. The client-side effect may have happened; do not retry it automatically.";

/// Message of Maka's synthetic result for an interrupted code-mode `exec`.
pub const CODE_MODE_INTERRUPTED: &str = "Code Mode execution was interrupted by runtime recovery.";

/// A RuntimeEvent ready to insert: canonical payload and `event_kind`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedEvent {
    pub payload_json: String,
    pub event_kind: String,
}

/// Validates (Maka's closed decoder), normalizes and encodes an event value.
pub fn encode_event(value: &Value) -> Result<EncodedEvent, EncodeError> {
    let event = decode_event(Json::from_serde(value)).map_err(|e| match e {
        crate::event::DecodeError::Schema(d) | crate::event::DecodeError::Json(d) => {
            EncodeError::Schema(d)
        }
    })?;
    Ok(EncodedEvent {
        payload_json: encode_canonical(&event)?,
        event_kind: event_kind(&event).to_owned(),
    })
}

/// Identity of a new event.
#[derive(Clone, Debug)]
pub struct EventIds<'a> {
    pub id: &'a str,
    pub invocation_id: &'a str,
    pub session_id: &'a str,
    pub run_id: &'a str,
    pub turn_id: &'a str,
}

/// Maka's synthetic failed terminal (`buildSyntheticTerminalRuntimeEvent`): error
/// content with the failure class, `endInvocation`, and a `stateDelta` with
/// `recovered`, `recoveryReason`, the diagnostic, `failureClass` and our marker.
pub fn failed_terminal(
    ids: &EventIds<'_>,
    ts: i64,
    failure_class: &str,
    message: &str,
    recovery_reason: &str,
    diagnostic: &Map<String, Value>,
) -> Value {
    let mut delta = Map::new();
    delta.insert("recovered".into(), Value::Bool(true));
    delta.insert("recoveryReason".into(), json!(recovery_reason));
    for (k, v) in diagnostic {
        delta.insert(k.clone(), v.clone());
    }
    delta.insert("failureClass".into(), json!(failure_class));
    delta.insert("repairedBy".into(), json!(REPAIRED_BY));
    json!({
        "id": ids.id,
        "invocationId": ids.invocation_id,
        "runId": ids.run_id,
        "sessionId": ids.session_id,
        "turnId": ids.turn_id,
        "ts": ts,
        "partial": false,
        "role": "system",
        "author": "system",
        "status": "failed",
        "content": {
            "kind": "error",
            "code": failure_class,
            "reason": failure_class,
            "message": message,
        },
        "actions": {
            "endInvocation": true,
            "stateDelta": Value::Object(delta),
        },
    })
}

/// Maka's answer to an unanswered `outcome_unknown` dispatch (client-capability
/// recovery): an error `function_response` with an uncertain-outcome text result.
pub fn outcome_unknown_response(
    ids: &EventIds<'_>,
    ts: i64,
    tool_call_id: &str,
    tool_name: &str,
    operation_id: &str,
) -> Value {
    json!({
        "id": ids.id,
        "invocationId": ids.invocation_id,
        "runId": ids.run_id,
        "sessionId": ids.session_id,
        "turnId": ids.turn_id,
        "ts": ts,
        "partial": false,
        "role": "tool",
        "author": "tool",
        "content": {
            "kind": "function_response",
            "id": tool_call_id,
            "name": tool_name,
            "result": {
                "kind": "text",
                "text": OUTCOME_UNKNOWN_TEXT,
                "uncertainOutcome": {"code": "outcome_unknown", "retrySafe": false},
            },
            "isError": true,
        },
        "refs": {"operationId": operation_id, "toolCallId": tool_call_id},
    })
}

/// Maka's answer to an interrupted code-mode `exec` dispatch.
pub fn code_mode_interrupted_response(
    ids: &EventIds<'_>,
    ts: i64,
    tool_call_id: &str,
    tool_name: &str,
    operation_id: &str,
) -> Value {
    json!({
        "id": ids.id,
        "invocationId": ids.invocation_id,
        "runId": ids.run_id,
        "sessionId": ids.session_id,
        "turnId": ids.turn_id,
        "ts": ts,
        "partial": false,
        "role": "tool",
        "author": "tool",
        "origin": "provider",
        "modelVisibility": "visible",
        "content": {
            "kind": "function_response",
            "id": tool_call_id,
            "name": tool_name,
            "result": {
                "kind": "json",
                "value": {
                    "kind": "code_mode",
                    "status": "interrupted",
                    "message": CODE_MODE_INTERRUPTED,
                },
            },
            "isError": true,
        },
        "refs": {"operationId": operation_id, "toolCallId": tool_call_id},
    })
}

/// The terminal projection onto the header (Maka's `updateRun` merge): `status`,
/// `updatedAt` = `completedAt` = `ts`, `failureClass` (failed) or `abortSource`
/// (cancelled). Existing keys keep their place; new keys go last. The legacy
/// `permissionMode: execute` is written back as `ask`, as Maka does on update.
pub fn patched_header(
    header: &RunHeader,
    status: &str,
    ts: i64,
    failure_class: Option<&str>,
    abort_source: Option<&str>,
) -> Map<String, Value> {
    let mut rec = header.record.clone();
    rec.insert("status".into(), json!(status));
    rec.insert("updatedAt".into(), json!(ts));
    rec.insert("completedAt".into(), json!(ts));
    if let Some(f) = failure_class {
        rec.insert("failureClass".into(), json!(f));
    }
    if let Some(a) = abort_source {
        rec.insert("abortSource".into(), json!(a));
    }
    if rec.get("permissionMode").and_then(Value::as_str) == Some("execute") {
        rec.insert("permissionMode".into(), json!("ask"));
    }
    rec
}

/// The operational terminal event (`run_completed` / `run_failed` / `run_cancelled`).
pub fn terminal_run_event(
    id: &str,
    header: &RunHeader,
    run_status: &str,
    ts: i64,
    data: Map<String, Value>,
) -> (String, Value) {
    let kind = match run_status {
        "cancelled" => "run_cancelled",
        "failed" => "run_failed",
        _ => "run_completed",
    };
    let mut rec = Map::new();
    rec.insert("type".into(), json!(kind));
    rec.insert("id".into(), json!(id));
    rec.insert("runId".into(), json!(header.run_id));
    rec.insert("sessionId".into(), json!(header.session_id));
    rec.insert("turnId".into(), json!(header.turn_id));
    rec.insert("ts".into(), json!(ts));
    if !data.is_empty() {
        rec.insert("data".into(), Value::Object(data));
    }
    (kind.to_owned(), Value::Object(rec))
}

/// Maka's `turn_state` transcript record (`buildTurnStateMessage`).
pub fn turn_state(
    id: &str,
    header: &RunHeader,
    ts: i64,
    turn_status: &str,
    error_class: Option<&str>,
    abort_source: Option<&str>,
    partial_output_retained: bool,
) -> Value {
    let mut rec = Map::new();
    rec.insert("type".into(), json!("turn_state"));
    rec.insert("id".into(), json!(id));
    rec.insert("turnId".into(), json!(header.turn_id));
    rec.insert("ts".into(), json!(ts));
    rec.insert("status".into(), json!(turn_status));
    for key in [
        "parentTurnId",
        "retriedFromTurnId",
        "regeneratedFromTurnId",
        "branchOfTurnId",
        "parentSessionId",
    ] {
        if let Some(v) = header
            .record
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            rec.insert(key.into(), json!(v));
        }
    }
    if turn_status == "aborted" {
        rec.insert("abortedAt".into(), json!(ts));
        if let Some(a) = abort_source {
            rec.insert("abortSource".into(), json!(a));
        }
    }
    if turn_status == "failed" {
        rec.insert("errorClass".into(), json!(error_class.unwrap_or("unknown")));
    }
    rec.insert(
        "partialOutputRetained".into(),
        Value::Bool(partial_output_retained),
    );
    Value::Object(rec)
}

/// Maka's `isSessionInlineRun`: the run's output belongs to its session transcript.
pub fn is_session_inline(header: &RunHeader) -> bool {
    let has = |k: &str| header.record.contains_key(k);
    !has("parentRunId") || (has("continuationSource") && !has("agentId"))
}

/// The session header with status `active` (Maka's status patch: `statusUpdatedAt`
/// = `ts`, no `blockedReason`).
pub fn active_session(payload: &Map<String, Value>, ts: i64) -> Map<String, Value> {
    let mut p = payload.clone();
    p.insert("status".into(), json!("active"));
    p.insert("statusUpdatedAt".into(), json!(ts));
    p.shift_remove("blockedReason");
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"runId":"r1","invocationId":"r1","sessionId":"s1","turnId":"t1","status":"running","backendKind":"ai-sdk","llmConnectionSlug":"x","modelId":"m","cwd":"/","permissionMode":"execute","createdAt":1,"updatedAt":2,"traceWriteError":"w"}"#;

    fn header() -> RunHeader {
        crate::header::decode_header(HEADER, "s1", "r1").unwrap()
    }

    #[test]
    fn failed_terminal_is_makas_shape_in_canonical_form() {
        let ids = EventIds {
            id: "e1",
            invocation_id: "r1",
            session_id: "s1",
            run_id: "r1",
            turn_id: "t1",
        };
        let mut diag = Map::new();
        diag.insert("lastEventType".into(), json!("model_stream_started"));
        let v = failed_terminal(
            &ids,
            5,
            "app_restarted",
            "app_restarted",
            "run_interrupted",
            &diag,
        );
        let e = encode_event(&v).unwrap();
        assert_eq!(e.event_kind, "error");
        assert_eq!(
            e.payload_json,
            r#"{"actions":{"endInvocation":true,"stateDelta":{"failureClass":"app_restarted","lastEventType":"model_stream_started","recovered":true,"recoveryReason":"run_interrupted","repairedBy":"wsledger"}},"author":"system","content":{"code":"app_restarted","kind":"error","message":"app_restarted","reason":"app_restarted"},"id":"e1","invocationId":"r1","partial":false,"role":"system","runId":"r1","sessionId":"s1","status":"failed","ts":5,"turnId":"t1"}"#
        );
    }

    #[test]
    fn tool_outcomes_pass_the_decoder() {
        let ids = EventIds {
            id: "op_response",
            invocation_id: "r1",
            session_id: "s1",
            run_id: "r1",
            turn_id: "t1",
        };
        let a = encode_event(&outcome_unknown_response(&ids, 1, "c1", "t", "op")).unwrap();
        assert_eq!(a.event_kind, "function_response");
        let b = encode_event(&code_mode_interrupted_response(&ids, 1, "c1", "exec", "op")).unwrap();
        assert!(b.payload_json.contains(r#""origin":"provider""#));
    }

    #[test]
    fn header_patch_keeps_key_order_and_appends_new_keys() {
        let rec = patched_header(&header(), "failed", 9, Some("app_restarted"), None);
        let keys: Vec<&str> = rec.keys().map(String::as_str).collect();
        assert_eq!(keys[4], "status");
        assert_eq!(
            &keys[keys.len() - 2..],
            &["completedAt", "failureClass"],
            "{keys:?}"
        );
        assert_eq!(rec["permissionMode"], json!("ask"));
        assert_eq!(rec["traceWriteError"], json!("w"));
        assert_eq!(rec["updatedAt"], json!(9));
    }

    #[test]
    fn turn_state_fields() {
        let v = turn_state(
            "id",
            &header(),
            7,
            "failed",
            Some("app_restarted"),
            None,
            false,
        );
        assert_eq!(
            crate::finalize::ids::js_stringify(&v),
            r#"{"type":"turn_state","id":"id","turnId":"t1","ts":7,"status":"failed","errorClass":"app_restarted","partialOutputRetained":false}"#
        );
        assert!(is_session_inline(&header()));
    }
}
