//! Maka's canonical event encoding (`encodeCanonicalRuntimeEvent`) and `event_kind`.
//!
//! Maka decodes (and so normalizes) the value, writes it with `stableJsonStringify`,
//! then re-parses and re-decodes the text and requires deep equality with a
//! `-0`-sensitive comparison. After a successful decode the only values that do not
//! survive that round trip are numbers: `-0` comes back as `0`, and a non-finite
//! number cannot be written at all. So the encoder refuses exactly those.

use super::decode::decode_event;
use super::{Actions, Content, Refs, RuntimeEvent, ToolDispatch};
use crate::json::{stable_stringify, JsObject, JsStr, Json};

/// Why Maka's encoder refuses a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("invalid RuntimeEvent schema: {0}")]
    Schema(String),
    /// A `-0` or a non-finite number would not survive a round trip.
    #[error("RuntimeEvent is not losslessly serializable")]
    NotLossless,
}

/// The exact text Maka writes to `payload_json` for this event.
///
/// The event is first run through the decoder again, as Maka does, so an event built
/// by hand is validated (`Schema`) and normalized (e.g. a text `displayText` equal to
/// its `text` is left out) before it is written.
pub fn encode_canonical(event: &RuntimeEvent) -> Result<String, EncodeError> {
    let decoded = decode_event(event_to_json(event)).map_err(|e| match e {
        super::DecodeError::Schema(detail) => EncodeError::Schema(detail),
        super::DecodeError::Json(detail) => EncodeError::Schema(detail),
    })?;
    let json = event_into_json(decoded);
    if !is_lossless(&json) {
        return Err(EncodeError::NotLossless);
    }
    stable_stringify(&json).map_err(|_| EncodeError::NotLossless)
}

/// The normalized event as a JSON value (key order unspecified).
pub fn event_to_json(event: &RuntimeEvent) -> Json {
    // `Json::clone` does not recurse on the thread stack.
    event_into_json(event.clone())
}

/// `runtime_events.event_kind` as Maka derives it: content kind, else status, else
/// `workspace_fact` / `tool_dispatch` / `invocation_end`, else `runtime_fact`.
pub fn event_kind(event: &RuntimeEvent) -> &'static str {
    if let Some(c) = &event.content {
        return c.kind();
    }
    if let Some(s) = event.status {
        return s.as_str();
    }
    if let Some(a) = &event.actions {
        if a.workspace_fact.is_some() {
            return "workspace_fact";
        }
        if a.tool_dispatch.is_some() {
            return "tool_dispatch";
        }
        if a.end_invocation == Some(true) {
            return "invocation_end";
        }
    }
    "runtime_fact"
}

/// True when no number anywhere in `value` is `-0` or non-finite.
fn is_lossless(value: &Json) -> bool {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Json::Number(n) => {
                if !n.is_finite() || (*n == 0.0 && n.is_sign_negative()) {
                    return false;
                }
            }
            Json::Array(items) => stack.extend(items.iter()),
            Json::Object(o) => stack.extend(o.iter().map(|(_, x)| x)),
            Json::Null | Json::Bool(_) | Json::String(_) => {}
        }
    }
    true
}

// ---------------------------------------------------------------------------------
// Typed event -> JSON (by value)
// ---------------------------------------------------------------------------------

fn key(k: &str) -> JsStr {
    JsStr::new(k)
}

fn s(v: &str) -> Json {
    Json::String(JsStr::new(v))
}

struct Builder(JsObject);

impl Builder {
    fn new() -> Self {
        Builder(JsObject::new())
    }
    fn put(&mut self, k: &str, v: Json) {
        self.0.insert(key(k), v);
    }
    fn opt(&mut self, k: &str, v: Option<Json>) {
        if let Some(v) = v {
            self.put(k, v);
        }
    }
    fn opt_str(&mut self, k: &str, v: Option<JsStr>) {
        self.opt(k, v.map(Json::String));
    }
    fn opt_bool(&mut self, k: &str, v: Option<bool>) {
        self.opt(k, v.map(Json::Bool));
    }
    fn opt_obj(&mut self, k: &str, v: Option<JsObject>) {
        self.opt(k, v.map(Json::Object));
    }
    fn done(self) -> Json {
        Json::Object(self.0)
    }
}

fn event_into_json(e: RuntimeEvent) -> Json {
    let mut b = Builder::new();
    b.put("id", Json::String(e.id));
    b.put("invocationId", Json::String(e.invocation_id));
    b.put("runId", Json::String(e.run_id));
    b.put("sessionId", Json::String(e.session_id));
    b.put("turnId", Json::String(e.turn_id));
    b.put("ts", Json::Number(e.ts));
    b.opt_str("branch", e.branch);
    b.put("partial", Json::Bool(e.partial));
    b.put(
        "role",
        s(match e.role {
            super::Role::User => "user",
            super::Role::Model => "model",
            super::Role::Tool => "tool",
            super::Role::System => "system",
        }),
    );
    b.put(
        "author",
        s(match e.author {
            super::Author::User => "user",
            super::Author::Host => "host",
            super::Author::Agent => "agent",
            super::Author::Tool => "tool",
            super::Author::System => "system",
        }),
    );
    b.opt(
        "origin",
        e.origin.map(|o| {
            s(match o {
                super::Origin::Provider => "provider",
                super::Origin::CodeMode => "code_mode",
            })
        }),
    );
    b.opt(
        "modelVisibility",
        e.model_visibility.map(|m| {
            s(match m {
                super::ModelVisibility::Visible => "visible",
                super::ModelVisibility::Hidden => "hidden",
            })
        }),
    );
    b.opt("status", e.status.map(|st| s(st.as_str())));
    b.opt("content", e.content.map(content_into_json));
    b.opt("actions", e.actions.map(|a| actions_into_json(*a)));
    b.opt("refs", e.refs.map(|r| refs_into_json(*r)));
    b.done()
}

fn content_into_json(c: Content) -> Json {
    let mut b = Builder::new();
    match c {
        Content::Text {
            text,
            steering,
            fields,
        } => {
            // The typed fields win over their copies inside `fields`.
            b.0 = fields;
            b.put("kind", s("text"));
            b.put("text", Json::String(text));
            if steering {
                b.put("steering", Json::Bool(true));
            } else {
                b.0.remove("steering");
            }
        }
        Content::Thinking {
            text,
            signature,
            provider_options,
        } => {
            b.put("kind", s("thinking"));
            b.put("text", Json::String(text));
            b.opt_str("signature", signature);
            b.opt_obj("providerOptions", provider_options);
        }
        Content::FunctionCall {
            id,
            name,
            args,
            provider_options,
            provider_executed,
        } => {
            b.put("kind", s("function_call"));
            b.put("id", Json::String(id));
            b.put("name", Json::String(name));
            b.put("args", args);
            b.opt_obj("providerOptions", provider_options);
            b.opt_bool("providerExecuted", provider_executed);
        }
        Content::FunctionResponse {
            id,
            name,
            result,
            is_error,
            provider_executed,
            provider_output,
        } => {
            b.put("kind", s("function_response"));
            b.put("id", Json::String(id));
            b.put("name", Json::String(name));
            b.put("result", result);
            b.opt_bool("isError", is_error);
            b.opt_bool("providerExecuted", provider_executed);
            b.opt("providerOutput", provider_output);
        }
        Content::Error {
            message,
            code,
            reason,
            details,
        } => {
            b.put("kind", s("error"));
            b.put("message", Json::String(message));
            b.opt_str("code", code);
            b.opt_str("reason", reason);
            b.opt("details", details);
        }
        Content::InvocationOpened { fields } => b.0 = fields,
    }
    b.done()
}

fn tool_dispatch_into_json(d: ToolDispatch) -> Json {
    let mut b = Builder::new();
    b.put("protocol", s("t1_after_preflight_v1"));
    b.put("operationId", Json::String(d.operation_id));
    b.put("providerToolCallId", Json::String(d.provider_tool_call_id));
    b.put("toolName", Json::String(d.tool_name));
    b.put("canonicalArgsHash", Json::String(d.canonical_args_hash));
    b.put("recoveryMode", s(d.recovery_mode.as_str()));
    for (k, v) in d.newer.into_vec() {
        b.put(k, v);
    }
    b.done()
}

fn actions_into_json(a: Actions) -> Json {
    let mut b = Builder::new();
    b.opt_obj("stateDelta", a.state_delta);
    b.opt_obj("artifactDelta", a.artifact_delta);
    b.opt("permissionRequest", a.permission_request);
    b.opt("permissionDecision", a.permission_decision);
    b.opt("permissionAnswerAccepted", a.permission_answer_accepted);
    b.opt("permissionClosureAccepted", a.permission_closure_accepted);
    b.opt("userQuestionRequest", a.user_question_request);
    b.opt(
        "userQuestionAnswerAccepted",
        a.user_question_answer_accepted,
    );
    b.opt_str("transferToAgent", a.transfer_to_agent);
    b.opt_bool("endInvocation", a.end_invocation);
    b.opt("tokenUsage", a.token_usage);
    b.opt("toolDispatch", a.tool_dispatch.map(tool_dispatch_into_json));
    b.opt("toolRecovery", a.tool_recovery.map(|r| r.envelope));
    b.opt("runtimeProtocol", a.runtime_protocol);
    b.opt("continuationStart", a.continuation_start);
    b.opt("workspaceFact", a.workspace_fact);
    for (k, v) in a.newer.into_vec() {
        b.put(k, v);
    }
    b.done()
}

fn refs_into_json(r: Refs) -> Json {
    let mut b = Builder::new();
    b.opt_str("storedMessageId", r.stored_message_id);
    b.opt_str("traceEventId", r.trace_event_id);
    b.opt_str("toolCallId", r.tool_call_id);
    b.opt_str("providerEventId", r.provider_event_id);
    b.opt_str("sourceMessageDigest", r.source_message_digest);
    b.opt_str("providerRequestTraceId", r.provider_request_trace_id);
    b.opt_str("artifactId", r.artifact_id);
    b.opt_str("operationId", r.operation_id);
    b.opt_str("parentToolCallId", r.parent_tool_call_id);
    b.opt_str("parentOperationId", r.parent_operation_id);
    b.opt_str("stepId", r.step_id);
    b.opt_str("sourceInvocationId", r.source_invocation_id);
    b.opt_str("sourceRunId", r.source_run_id);
    b.opt_str("sourceTurnId", r.source_turn_id);
    b.opt(
        "sourceRuntimeEventHighWater",
        r.source_runtime_event_high_water.map(Json::Number),
    );
    b.done()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{decode_event, Role};
    use crate::json::parse;

    const BASE: &str = r#"{"turnId":"t","id":"e1","invocationId":"inv","runId":"inv","sessionId":"s",
        "ts":1,"partial":false,"role":"system","author":"system"}"#;

    fn event(extra: &[(&str, &str)]) -> RuntimeEvent {
        let mut v = parse(BASE).unwrap();
        if let Json::Object(o) = &mut v {
            for (k, x) in extra {
                o.insert(JsStr::new(k), parse(x).unwrap());
            }
        }
        decode_event(v).unwrap()
    }

    #[test]
    fn sorted_compact_output() {
        let e = event(&[(
            "actions",
            r#"{"stateDelta":{"b":1,"10":2,"9":3,"a":[{"z":1,"y":2}]}}"#,
        )]);
        assert_eq!(
            encode_canonical(&e).unwrap(),
            r#"{"actions":{"stateDelta":{"9":3,"10":2,"a":[{"y":2,"z":1}],"b":1}},"author":"system","id":"e1","invocationId":"inv","partial":false,"role":"system","runId":"inv","sessionId":"s","ts":1,"turnId":"t"}"#
        );
    }

    #[test]
    fn negative_zero_and_non_finite_are_not_lossless() {
        assert_eq!(
            encode_canonical(&event(&[("ts", "-0")])),
            Err(EncodeError::NotLossless)
        );
        let deep = event(&[("actions", r#"{"stateDelta":{"a":[[{"b":-1e-400}]]}}"#)]);
        assert_eq!(encode_canonical(&deep), Err(EncodeError::NotLossless));
        let inf = event(&[("actions", r#"{"stateDelta":{"a":1e400}}"#)]);
        assert_eq!(encode_canonical(&inf), Err(EncodeError::NotLossless));
        let start = r#"{"kind":"text","text":"/skill:a","inlineReferences":[{"kind":"skill","value":"/skill:a","label":"a","start":-0}]}"#;
        assert_eq!(
            encode_canonical(&event(&[("content", start)])),
            Err(EncodeError::NotLossless)
        );
        // The decoder rewrites an attachment's -0 bytes, so that one is fine.
        let attachment = r#"{"kind":"text","text":"x","attachments":[{"kind":"doc","name":"n","mimeType":"m","bytes":-0,"ref":{"kind":"session_file","sessionId":"s","relativePath":"p"}}]}"#;
        let out = encode_canonical(&event(&[("content", attachment)])).unwrap();
        assert!(out.contains(r#""bytes":0,"#), "{out}");
    }

    #[test]
    fn round_trip_through_json_is_identity() {
        let e = event(&[
            ("branch", r#""""#),
            ("origin", r#""provider""#),
            ("modelVisibility", r#""hidden""#),
            ("status", r#""failed""#),
            (
                "content",
                r#"{"kind":"error","message":"m","details":["x"]}"#,
            ),
            (
                "actions",
                r#"{"endInvocation":true,"tokenUsage":{"input":1,"output":2},"toolDispatch":{"protocol":"t1_after_preflight_v1","operationId":"op","providerToolCallId":"c","toolName":"t","canonicalArgsHash":"h","recoveryMode":"reattach"},"artifactDelta":{"a":true}}"#,
            ),
            (
                "refs",
                r#"{"toolCallId":"c","sourceRuntimeEventHighWater":7}"#,
            ),
        ]);
        let again = decode_event(event_to_json(&e)).unwrap();
        assert_eq!(again, e);
        assert_eq!(event_kind(&e), "error");
    }

    #[test]
    fn hand_built_events_are_validated_and_normalized() {
        let mut e = event(&[]);
        e.id = JsStr::new("");
        assert!(
            matches!(encode_canonical(&e), Err(EncodeError::Schema(d)) if d.starts_with("id:"))
        );

        let mut e = event(&[]);
        e.role = Role::User;
        let mut fields = JsObject::new();
        fields.insert(JsStr::new("displayText"), Json::String(JsStr::new("same")));
        fields.insert(JsStr::new("quotes"), Json::Array(Vec::new()));
        e.content = Some(Content::Text {
            text: JsStr::new("same"),
            steering: true,
            fields,
        });
        let out = encode_canonical(&e).unwrap();
        assert!(
            out.starts_with(
                r#"{"author":"system","content":{"kind":"text","steering":true,"text":"same"},"#
            ),
            "{out}"
        );
    }

    #[test]
    fn deep_open_values_do_not_use_the_thread_stack() {
        let depth = 100_000;
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let e = event(&[("actions", &format!(r#"{{"stateDelta":{{"d":{nested}}}}}"#))]);
        let out = encode_canonical(&e).unwrap();
        let want = format!(
            r#"{{"actions":{{"stateDelta":{{"d":{nested}}}}},"author":"system","id":"e1","invocationId":"inv","partial":false,"role":"system","runId":"inv","sessionId":"s","ts":1,"turnId":"t"}}"#
        );
        assert!(out == want, "deep output differs");
    }
}
