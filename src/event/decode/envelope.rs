//! The event's envelope (ids, timestamp, role, author, status, and the sub-records it
//! hands to `content` and `actions`) and its closed `refs` record, with the top-level
//! keys and enum domains the in-place decoder reads too.

use super::actions::decode_actions;
use super::content::decode_content;
use super::error_path::{at, expected, missing, V};
use super::field_readers::{
    enum_value, is_safe_integer, is_sha256_digest, opt_str, req, req_nonempty_str, take_fields,
};
use super::field_table::{check_ty, Ty};
use crate::event::{
    Author, EventStatus, ModelVisibility, Origin, RecoveryMode, Refs, Role, RuntimeEvent,
};
use crate::json::Json;

// ---------------------------------------------------------------------------------
// Envelope
// ---------------------------------------------------------------------------------

pub(in crate::event) const ROLES: &[(&str, Role)] = &[
    ("user", Role::User),
    ("model", Role::Model),
    ("tool", Role::Tool),
    ("system", Role::System),
];
pub(in crate::event) const AUTHORS: &[(&str, Author)] = &[
    ("user", Author::User),
    ("host", Author::Host),
    ("agent", Author::Agent),
    ("tool", Author::Tool),
    ("system", Author::System),
];
pub(in crate::event) const ORIGINS: &[(&str, Origin)] = &[
    ("provider", Origin::Provider),
    ("code_mode", Origin::CodeMode),
];
pub(in crate::event) const VISIBILITIES: &[(&str, ModelVisibility)] = &[
    ("visible", ModelVisibility::Visible),
    ("hidden", ModelVisibility::Hidden),
];
pub(in crate::event) const STATUSES: &[(&str, EventStatus)] = &[
    ("streaming", EventStatus::Streaming),
    ("completed", EventStatus::Completed),
    ("failed", EventStatus::Failed),
    ("aborted", EventStatus::Aborted),
    ("cancelled", EventStatus::Cancelled),
];
pub(in crate::event) const RECOVERY_MODES: &[(&str, RecoveryMode)] = &[
    ("replay_safe", RecoveryMode::ReplaySafe),
    ("idempotent", RecoveryMode::Idempotent),
    ("reconcile", RecoveryMode::Reconcile),
    ("reattach", RecoveryMode::Reattach),
    ("outcome_unknown", RecoveryMode::OutcomeUnknown),
    ("never_auto_retry", RecoveryMode::NeverAutoRetry),
];

pub(in crate::event) const ENVELOPE_KEYS: [&str; 16] = [
    "id",
    "invocationId",
    "runId",
    "sessionId",
    "turnId",
    "ts",
    "partial",
    "role",
    "author",
    "branch",
    "origin",
    "modelVisibility",
    "status",
    "content",
    "actions",
    "refs",
];

pub(super) fn decode_envelope(value: Json) -> V<RuntimeEvent> {
    let obj = value.into_object().map_err(|v| expected("an object", &v))?;
    let [id, invocation_id, run_id, session_id, turn_id, ts, partial, role, author, branch, origin, model_visibility, status, content, actions, refs] =
        take_fields(obj, &ENVELOPE_KEYS)?;
    // Maka checks presence of every required key before any value.
    for (slot, key) in [
        (&id, "id"),
        (&invocation_id, "invocationId"),
        (&run_id, "runId"),
        (&session_id, "sessionId"),
        (&turn_id, "turnId"),
        (&ts, "ts"),
        (&partial, "partial"),
        (&role, "role"),
        (&author, "author"),
    ] {
        if slot.is_none() {
            return Err(missing(key));
        }
    }
    let id = req_nonempty_str(id, "id")?;
    let invocation_id = req_nonempty_str(invocation_id, "invocationId")?;
    let run_id = req_nonempty_str(run_id, "runId")?;
    let session_id = req_nonempty_str(session_id, "sessionId")?;
    let turn_id = req_nonempty_str(turn_id, "turnId")?;
    let ts = match req(ts, "ts")? {
        Json::Number(n) if n.is_finite() => n,
        other => return Err(at("ts", expected("a finite number", &other))),
    };
    let partial = match req(partial, "partial")? {
        Json::Bool(b) => b,
        other => return Err(at("partial", expected("a boolean", &other))),
    };
    let role = enum_value(req(role, "role")?, "role", ROLES)?;
    let author = enum_value(req(author, "author")?, "author", AUTHORS)?;
    let branch = opt_str(branch, "branch")?;
    let origin = origin
        .map(|v| enum_value(v, "origin", ORIGINS))
        .transpose()?;
    let model_visibility = model_visibility
        .map(|v| enum_value(v, "modelVisibility", VISIBILITIES))
        .transpose()?;
    let status = status
        .map(|v| enum_value(v, "status", STATUSES))
        .transpose()?;
    let content = content
        .map(|v| decode_content(v).map_err(|e| at("content", e)))
        .transpose()?;
    let actions = actions
        .map(|v| decode_actions(v).map_err(|e| at("actions", e)))
        .transpose()?;
    let refs = refs
        .map(|v| decode_refs(v).map_err(|e| at("refs", e)))
        .transpose()?;
    Ok(RuntimeEvent {
        id,
        invocation_id,
        run_id,
        session_id,
        turn_id,
        ts,
        partial,
        role,
        author,
        branch,
        origin,
        model_visibility,
        status,
        content,
        actions: actions.map(Box::new),
        refs: refs.map(Box::new),
    })
}

// ---------------------------------------------------------------------------------
// Refs
// ---------------------------------------------------------------------------------

pub(in crate::event) const REF_KEYS: [&str; 15] = [
    "storedMessageId",
    "traceEventId",
    "toolCallId",
    "providerEventId",
    "sourceMessageDigest",
    "providerRequestTraceId",
    "artifactId",
    "operationId",
    "parentToolCallId",
    "parentOperationId",
    "stepId",
    "sourceInvocationId",
    "sourceRunId",
    "sourceTurnId",
    "sourceRuntimeEventHighWater",
];

fn decode_refs(value: Json) -> V<Refs> {
    let obj = value.into_object().map_err(|v| expected("an object", &v))?;
    let [stored_message_id, trace_event_id, tool_call_id, provider_event_id, source_message_digest, provider_request_trace_id, artifact_id, operation_id, parent_tool_call_id, parent_operation_id, step_id, source_invocation_id, source_run_id, source_turn_id, high_water] =
        take_fields(obj, &REF_KEYS)?;
    let source_message_digest = match source_message_digest {
        None => None,
        Some(Json::String(ref s)) if is_sha256_digest(s) => Some(s.clone()),
        Some(other) => {
            return Err(at(
                "sourceMessageDigest",
                check_ty(&other, Ty::Sha256).err().unwrap_or_default(),
            ))
        }
    };
    let source_runtime_event_high_water = match high_water {
        None => None,
        Some(Json::Number(n)) if is_safe_integer(n) && n >= 0.0 => Some(n),
        Some(other) => {
            return Err(at(
                "sourceRuntimeEventHighWater",
                check_ty(&other, Ty::SafeIntNonNeg)
                    .err()
                    .unwrap_or_default(),
            ))
        }
    };
    Ok(Refs {
        stored_message_id: opt_str(stored_message_id, "storedMessageId")?,
        trace_event_id: opt_str(trace_event_id, "traceEventId")?,
        tool_call_id: opt_str(tool_call_id, "toolCallId")?,
        provider_event_id: opt_str(provider_event_id, "providerEventId")?,
        source_message_digest,
        provider_request_trace_id: opt_str(provider_request_trace_id, "providerRequestTraceId")?,
        artifact_id: opt_str(artifact_id, "artifactId")?,
        operation_id: opt_str(operation_id, "operationId")?,
        parent_tool_call_id: opt_str(parent_tool_call_id, "parentToolCallId")?,
        parent_operation_id: opt_str(parent_operation_id, "parentOperationId")?,
        step_id: opt_str(step_id, "stepId")?,
        source_invocation_id: opt_str(source_invocation_id, "sourceInvocationId")?,
        source_run_id: opt_str(source_run_id, "sourceRunId")?,
        source_turn_id: opt_str(source_turn_id, "sourceTurnId")?,
        source_runtime_event_high_water,
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{decode_event, DecodeError};
    use super::*;
    use crate::event::Content;

    #[test]
    fn base_decodes() {
        let e = decode_event(base()).unwrap();
        assert_eq!(e.id, "e1");
        assert_eq!(e.role, Role::User);
        assert!(e.refs.is_none() && e.actions.is_none());
    }

    #[test]
    fn null_is_never_an_absent_optional() {
        for key in [
            "branch",
            "origin",
            "modelVisibility",
            "status",
            "content",
            "actions",
            "refs",
        ] {
            rejects(&[key], "null", key);
        }
        for key in REF_KEYS {
            rejects(&["refs", key], "null", &format!("refs.{key}"));
        }
        for key in [
            "stateDelta",
            "artifactDelta",
            "transferToAgent",
            "endInvocation",
            "toolDispatch",
        ] {
            rejects(&["actions", key], "null", &format!("actions.{key}"));
        }
        for key in [
            "displayText",
            "origin",
            "attachments",
            "quotes",
            "inlineReferences",
            "steering",
        ] {
            rejects(&["content", key], "null", &format!("content.{key}"));
        }
        rejects(
            &["content", "providerOptions"],
            "null",
            "content.providerOptions",
        );
    }

    #[test]
    fn unknown_keys_rejected_at_every_closed_level() {
        rejects(&["extra"], "1", "payload: unknown key \"extra\"");
        rejects(&["__proto__"], "{}", "payload: unknown key \"__proto__\"");
        rejects(&["content", "extra"], "1", "content: unknown key");
        rejects(&["actions", "extra"], "1", "actions: unknown key");
        rejects(&["refs", "extra"], "1", "refs: unknown key");
        rejects(
            &["actions", "tokenUsage"],
            r#"{"input":1,"output":1,"x":1}"#,
            "actions.tokenUsage: unknown key \"x\"",
        );
        rejects(
            &["actions", "tokenUsage"],
            r#"{"input":1,"output":1,"contextBudget":{"enabled":true,"estimatedTokensBefore":1,"estimatedTokensAfter":1,"keptTurns":1,"droppedTurns":1,"keptEvents":1,"droppedEvents":1,"x":1}}"#,
            "actions.tokenUsage.contextBudget: unknown key \"x\"",
        );
        rejects(
            &["content", "origin"],
            r#"{"kind":"goal","goalId":"g","x":1}"#,
            "content.origin",
        );
        rejects(
            &["content", "attachments"],
            r#"[{"kind":"image","name":"a","mimeType":"image/png","bytes":1,"ref":{"kind":"workspace_file","relativePath":"a","x":1}}]"#,
            "content.attachments[0].ref: unknown key \"x\"",
        );
        // Open records take any key.
        ok(
            &["actions", "stateDelta"],
            r#"{"__proto__":{"x":1},"anything":[null]}"#,
        );
    }

    #[test]
    fn required_keys_must_be_present_but_args_and_result_may_be_null() {
        for key in [
            "id",
            "invocationId",
            "runId",
            "sessionId",
            "turnId",
            "ts",
            "partial",
            "role",
            "author",
        ] {
            let mut v = base();
            remove(&mut v, &[key]);
            let err = decode_event(v).unwrap_err();
            assert_eq!(
                err,
                DecodeError::Schema(format!("{key}: missing required key"))
            );
        }
        let call = r#"{"kind":"function_call","id":"c","name":"n","args":null}"#;
        assert!(matches!(
            ok(&["content"], call).content,
            Some(Content::FunctionCall {
                args: Json::Null,
                ..
            })
        ));
        rejects(
            &["content"],
            r#"{"kind":"function_call","id":"c","name":"n"}"#,
            "content.args: missing",
        );
        let resp = r#"{"kind":"function_response","id":"c","name":"n","result":null}"#;
        ok(&["content"], resp);
        rejects(
            &["content"],
            r#"{"kind":"function_response","id":"c","name":"n"}"#,
            "content.result: missing",
        );
        // Only the five envelope ids must be non-empty.
        rejects(
            &["sessionId"],
            r#""""#,
            "sessionId: must be a non-empty string",
        );
        ok(
            &["content"],
            r#"{"kind":"function_call","id":"","name":"","args":{}}"#,
        );
    }

    #[test]
    fn enums_are_exact() {
        rejects(&["role"], r#""User""#, "role: expected one of");
        rejects(&["author"], r#""assistant""#, "author");
        rejects(&["status"], r#""done""#, "status");
        ok(&["status"], r#""cancelled""#);
        ok(&["origin"], r#""code_mode""#);
        ok(&["modelVisibility"], r#""hidden""#);
        let dispatch = |mode: &str| {
            format!(
                r#"{{"protocol":"t1_after_preflight_v1","operationId":"op","providerToolCallId":"c","toolName":"t","canonicalArgsHash":"","recoveryMode":"{mode}"}}"#
            )
        };
        let e = ok(&["actions", "toolDispatch"], &dispatch("never_auto_retry"));
        let d = e.actions.unwrap().tool_dispatch.unwrap();
        assert_eq!(d.recovery_mode, RecoveryMode::NeverAutoRetry);
        assert_eq!(d.operation_id, "op");
        rejects(
            &["actions", "toolDispatch"],
            &dispatch("Reconcile"),
            "actions.toolDispatch.recoveryMode: expected one of",
        );
    }

    #[test]
    fn numbers_finite_and_safe_integers() {
        for ts in ["-0", "0.5", "-1", "1e308", "9007199254740993"] {
            let e = ok(&["ts"], ts);
            assert_eq!(e.ts, ts.parse::<f64>().unwrap());
        }
        assert!(ok(&["ts"], "-0").ts.is_sign_negative());
        rejects(
            &["ts"],
            "1e400",
            "ts: expected a finite number, got non-finite number",
        );
        rejects(&["ts"], r#""1""#, "ts");
        let hw = ["refs", "sourceRuntimeEventHighWater"];
        ok(&hw, "9007199254740991");
        ok(&hw, "3.0");
        ok(&hw, "0");
        rejects(&hw, "9007199254740992", "refs.sourceRuntimeEventHighWater: expected a safe integer >= 0, got number 9007199254740992");
        rejects(&hw, "3.5", "refs.sourceRuntimeEventHighWater");
        rejects(&hw, "-1", "refs.sourceRuntimeEventHighWater");
        ok(
            &["actions", "tokenUsage"],
            r#"{"input":-5.5,"output":1e300,"costUsd":0}"#,
        );
        rejects(
            &["actions", "tokenUsage"],
            r#"{"input":1,"output":-1e400}"#,
            "actions.tokenUsage.output",
        );
        ok(
            &["actions", "artifactDelta"],
            r#"{"a":1,"b":"x","c":false}"#,
        );
        rejects(
            &["actions", "artifactDelta"],
            r#"{"a":null}"#,
            "actions.artifactDelta.\"a\"",
        );
    }
}
