//! Maka's transcript projection (`projectRuntimeEventsToStoredMessages`): the
//! StoredMessage rows its read model derives from the log, as JSON, with the
//! read-model diagnostics. Used to compare with the cached `session_messages`
//! (soft, as in Maka) and by tests against Maka's own `transcript.json`.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::event::{Content, EventStatus, RuntimeEvent};
use crate::header::RunHeader;
use crate::json::{JsObject, Json};

/// A read-model diagnostic (Maka's code and message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadModelDiagnostic {
    pub code: &'static str,
    /// `hard` diagnostics make Maka's session view refuse the session.
    pub hard: bool,
    pub event_id: String,
    pub run_id: String,
    pub message: &'static str,
}

/// The projected rows and diagnostics.
#[derive(Clone, Debug, Default)]
pub struct Projection {
    /// StoredMessage rows, each with the id of the event that produced it.
    pub messages: Vec<(String, Value)>,
    pub diagnostics: Vec<ReadModelDiagnostic>,
}

const TOOL_ACTIVITY_KINDS: &[&str] = &[
    "computer",
    "read",
    "search",
    "websearch",
    "webfetch",
    "edit",
    "command",
    "explore",
    "browser",
    "tool",
];

const HARD: &[&str] = &[
    "unsupported_event",
    "incomplete_event",
    "tool_use_id_mismatch",
];

fn s(v: &crate::json::JsStr) -> Value {
    Value::from(v.to_string_lossy())
}

fn state_delta<'a>(e: &'a RuntimeEvent, key: &str) -> Option<&'a Json> {
    e.actions.as_ref()?.state_delta.as_ref()?.get(key)
}

fn string_delta(e: &RuntimeEvent, key: &str) -> Option<String> {
    state_delta(e, key)
        .and_then(Json::as_js_str)
        .map(|s| s.to_string_lossy())
}

fn non_empty(v: Option<&crate::json::JsStr>) -> Option<String> {
    v.filter(|s| !s.is_empty()).map(|s| s.to_string_lossy())
}

/// Maka's `failureClassFromRuntimeEvent`.
pub fn failure_class(e: &RuntimeEvent, header: Option<&RunHeader>) -> Option<String> {
    let from_content = |pick: fn(&Content) -> Option<&crate::json::JsStr>| match &e.content {
        Some(c @ Content::Error { .. }) => non_empty(pick(c)),
        _ => None,
    };
    string_delta(e, "failureClass")
        .or_else(|| string_delta(e, "errorClass"))
        .or_else(|| string_delta(e, "reason"))
        .or_else(|| string_delta(e, "code"))
        .or_else(|| {
            from_content(|c| match c {
                Content::Error { reason, .. } => reason.as_ref(),
                _ => None,
            })
        })
        .or_else(|| {
            from_content(|c| match c {
                Content::Error { code, .. } => code.as_ref(),
                _ => None,
            })
        })
        .or_else(|| header.and_then(|h| h.failure_class.clone()))
}

/// Maka's `abortSourceFromRuntime`.
pub fn abort_source(e: &RuntimeEvent, header: Option<&RunHeader>) -> Option<String> {
    let delta = |k: &str| string_delta(e, k).filter(|s| !s.is_empty());
    delta("abortSource")
        .or_else(|| delta("source"))
        .or_else(|| {
            header
                .and_then(|h| h.abort_source.clone())
                .filter(|s| !s.is_empty())
        })
}

/// `refs.storedMessageId ?? refs.providerEventId ?? event.id`.
pub fn stable_message_id(e: &RuntimeEvent) -> String {
    let r = e.refs.as_ref();
    r.and_then(|r| r.stored_message_id.as_ref())
        .or_else(|| r.and_then(|r| r.provider_event_id.as_ref()))
        .unwrap_or(&e.id)
        .to_string_lossy()
}

/// `refs.providerEventId ?? refs.storedMessageId ?? event.id` (a step's message id).
pub fn step_message_id(e: &RuntimeEvent) -> String {
    let r = e.refs.as_ref();
    r.and_then(|r| r.provider_event_id.as_ref())
        .or_else(|| r.and_then(|r| r.stored_message_id.as_ref()))
        .unwrap_or(&e.id)
        .to_string_lossy()
}

/// `content.id || refs.toolCallId`.
pub fn tool_use_id(e: &RuntimeEvent) -> Option<String> {
    let content_id = match &e.content {
        Some(Content::FunctionCall { id, .. } | Content::FunctionResponse { id, .. }) => Some(id),
        _ => None,
    };
    content_id
        .filter(|i| !i.is_empty())
        .or_else(|| e.refs.as_ref().and_then(|r| r.tool_call_id.as_ref()))
        .map(|s| s.to_string_lossy())
}

struct Pending {
    message_id: String,
    turn_id: String,
    event_id: String,
    run_id: String,
    thinking: Map<String, Value>,
}

struct PermissionRequest {
    tool_use_id: String,
    tool_name: String,
    hint: Option<Value>,
}

#[derive(Default)]
struct State {
    tool_name_by_use_id: HashMap<String, String>,
    permission_requests: HashMap<String, PermissionRequest>,
    pending: Vec<Pending>,
    content_order: HashMap<String, Vec<&'static str>>,
    /// Assistant rows by (turn, id): the position of the newest.
    assistants: HashMap<(String, String), usize>,
    /// Turns with an assistant row of non-blank text or a tool result so far.
    retained_turns: std::collections::HashSet<String>,
}

fn header_str(h: &RunHeader, key: &str) -> Option<String> {
    h.record
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn tool_identity(e: &RuntimeEvent, m: &mut Map<String, Value>) {
    if let Some(o) = e.origin {
        m.insert(
            "origin".into(),
            Value::from(match o {
                crate::event::Origin::Provider => "provider",
                crate::event::Origin::CodeMode => "code_mode",
            }),
        );
    }
    if let Some(v) = e.model_visibility {
        m.insert(
            "modelVisibility".into(),
            Value::from(match v {
                crate::event::ModelVisibility::Visible => "visible",
                crate::event::ModelVisibility::Hidden => "hidden",
            }),
        );
    }
    if let Some(r) = &e.refs {
        if let Some(p) = &r.parent_tool_call_id {
            m.insert("parentToolCallId".into(), s(p));
        }
        if let Some(p) = &r.parent_operation_id {
            m.insert("parentOperationId".into(), s(p));
        }
    }
}

fn obj_to_serde(o: &JsObject) -> Value {
    Json::Object(o.clone()).to_serde()
}

fn base(kind: &str, id: String, e: &RuntimeEvent) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), Value::from(kind));
    m.insert("id".into(), Value::from(id));
    m.insert("turnId".into(), s(&e.turn_id));
    m.insert("ts".into(), Json::Number(e.ts).to_serde());
    m
}

/// Projects `events` (Maka's session-view order) with the run headers by run id.
pub fn project(events: &[&RuntimeEvent], headers: &HashMap<String, &RunHeader>) -> Projection {
    let mut st = State::default();
    let mut out = Projection::default();
    for &e in events {
        record_content_order(e, &mut st);
        if e.partial {
            diag(
                &mut out,
                e,
                "partial_skipped",
                "partial RuntimeEvent skipped",
            );
            continue;
        }
        let mut projected = false;
        match &e.content {
            Some(Content::Text {
                text,
                steering,
                fields,
            }) => {
                projected |= project_text(e, text, *steering, fields, headers, &mut st, &mut out);
            }
            Some(Content::FunctionCall { .. }) => projected |= project_call(e, &mut st, &mut out),
            Some(Content::FunctionResponse { .. }) => {
                projected |= project_response(e, &mut st, &mut out)
            }
            Some(Content::Thinking {
                text,
                signature,
                provider_options,
            }) => {
                let mut t = Map::new();
                t.insert("text".into(), s(text));
                if let Some(sig) = signature {
                    t.insert("signature".into(), s(sig));
                }
                if let Some(p) = provider_options {
                    t.insert("providerOptions".into(), obj_to_serde(p));
                }
                let pending = Pending {
                    message_id: step_message_id(e),
                    turn_id: e.turn_id.to_string_lossy(),
                    event_id: e.id.to_string_lossy(),
                    run_id: e.run_id.to_string_lossy(),
                    thinking: t,
                };
                let turn = pending.turn_id.clone();
                if !attach_thinking(&pending, &turn, &mut out.messages, &st.assistants) {
                    st.pending.push(pending);
                }
                projected = true;
            }
            Some(Content::Error { .. }) if !e.is_terminal() => diag(
                &mut out,
                e,
                "unsupported_event",
                "non-terminal error content has no safe legacy read-model row",
            ),
            // The run's opening fact (newer Maka) is about the run: no transcript row.
            Some(Content::InvocationOpened { .. }) => projected = true,
            Some(Content::Error { .. }) | None => {}
        }
        if let Some(a) = &e.actions {
            if let Some(req) = a.permission_request.as_ref().and_then(Json::as_object) {
                let get = |k: &str| {
                    req.get(k)
                        .and_then(Json::as_js_str)
                        .map(|s| s.to_string_lossy())
                };
                if let (Some(id), Some(use_id), Some(name)) =
                    (get("requestId"), get("toolUseId"), get("toolName"))
                {
                    st.tool_name_by_use_id.insert(use_id.clone(), name.clone());
                    st.permission_requests.insert(
                        id,
                        PermissionRequest {
                            tool_use_id: use_id,
                            tool_name: name,
                            hint: req.get("hint").map(Json::to_serde),
                        },
                    );
                }
                projected = true;
            }
            if a.user_question_request.is_some()
                || a.user_question_answer_accepted.is_some()
                || a.permission_closure_accepted.is_some()
                || a.tool_dispatch.is_some()
                || a.tool_recovery.is_some()
                || a.workspace_fact.is_some()
                || a.artifact_delta.is_some()
                || a.transfer_to_agent.is_some()
                || a.runtime_protocol.is_some()
                || a.continuation_start.is_some()
                || !a.newer.is_empty()
            {
                projected = true;
            }
            if a.permission_answer_accepted.is_some() {
                // The row comes from Maka's interaction store, which a workspace
                // database replay does not read.
                diag(
                    &mut out,
                    e,
                    "incomplete_event",
                    "permission answer acceptance requires a canonical Interaction outcome",
                );
                projected = true;
            }
            if let Some(sd) = &a.state_delta {
                let continuation =
                    sd.get("continuationStart").and_then(Json::as_bool) == Some(true);
                let sandbox = sd.contains_key("sandboxBoundaryRequest")
                    || sd.contains_key("sandboxBoundaryDecision");
                let plan = e.role == crate::event::Role::System
                    && e.author == crate::event::Author::Agent
                    && sd.get("planId").and_then(Json::as_js_str).is_some()
                    && sd.get("title").and_then(Json::as_js_str).is_some();
                if continuation || plan || (sandbox && e.role == crate::event::Role::System) {
                    projected = true;
                }
            }
            if let Some(dec) = a.permission_decision.as_ref().and_then(Json::as_object) {
                projected |= project_permission_decision(e, dec, &mut st, &mut out);
            }
            if let Some(usage) = a.token_usage.as_ref().and_then(Json::as_object) {
                let mut m = base("token_usage", stable_message_id(e), e);
                for (k, v) in usage.iter() {
                    m.insert(k.to_string_lossy(), v.to_serde());
                }
                if let Some(t) = e
                    .refs
                    .as_ref()
                    .and_then(|r| r.provider_request_trace_id.as_ref())
                {
                    m.insert("providerRequestTraceId".into(), s(t));
                }
                out.messages
                    .push((e.id.to_string_lossy(), Value::Object(m)));
                projected = true;
            }
        }
        if e.is_terminal() {
            let retained = st.retained_turns.contains(&e.turn_id.to_string_lossy());
            projected |= project_terminal(e, headers, retained, &mut out);
        }
        if !projected {
            if e.content.is_none() {
                diag(
                    &mut out,
                    e,
                    "unclaimed_control_fact",
                    "control-only RuntimeEvent is not claimed by the legacy read-model projection",
                );
            } else {
                diag(
                    &mut out,
                    e,
                    "unsupported_event",
                    "RuntimeEvent shape is not supported by the legacy read-model projection",
                );
            }
        }
    }
    for p in std::mem::take(&mut st.pending) {
        out.diagnostics.push(ReadModelDiagnostic {
            code: "unsupported_event",
            hard: true,
            event_id: p.event_id,
            run_id: p.run_id,
            message: "thinking content has no assistant text row with a matching message id",
        });
    }
    out
}

fn diag(out: &mut Projection, e: &RuntimeEvent, code: &'static str, message: &'static str) {
    out.diagnostics.push(ReadModelDiagnostic {
        code,
        hard: HARD.contains(&code),
        event_id: e.id.to_string_lossy(),
        run_id: e.run_id.to_string_lossy(),
        message,
    });
}

fn record_content_order(e: &RuntimeEvent, st: &mut State) {
    use crate::event::Role;
    if e.role != Role::Model {
        return;
    }
    let (id, kind) = match &e.content {
        Some(Content::Text { .. }) => (step_message_id(e), "text"),
        Some(Content::Thinking { .. }) => (step_message_id(e), "thinking"),
        Some(Content::FunctionCall { .. }) => {
            match e.refs.as_ref().and_then(|r| r.step_id.as_ref()) {
                Some(step) if !step.is_empty() => (step.to_string_lossy(), "tools"),
                _ => return,
            }
        }
        _ => return,
    };
    let order = st.content_order.entry(id).or_default();
    if !order.contains(&kind) {
        order.push(kind);
    }
}

fn project_text(
    e: &RuntimeEvent,
    text: &crate::json::JsStr,
    steering: bool,
    fields: &JsObject,
    headers: &HashMap<String, &RunHeader>,
    st: &mut State,
    out: &mut Projection,
) -> bool {
    use crate::event::Role;
    match e.role {
        Role::User => {
            let mut m = base("user", stable_message_id(e), e);
            m.insert("text".into(), s(text));
            for k in [
                "displayText",
                "attachments",
                "quotes",
                "inlineReferences",
                "origin",
            ] {
                if let Some(v) = fields.get(k) {
                    m.insert(k.into(), v.to_serde());
                }
            }
            if steering {
                m.insert("steeringEventId".into(), s(&e.id));
            }
            out.messages
                .push((e.id.to_string_lossy(), Value::Object(m)));
            true
        }
        Role::Model => {
            let model_id = headers
                .get(&e.run_id.to_string_lossy())
                .and_then(|h| header_str(h, "modelId"));
            let Some(model_id) = model_id else {
                diag(
                    out,
                    e,
                    "incomplete_event",
                    "model text RuntimeEvent requires AgentRunHeader.modelId",
                );
                return false;
            };
            let id = stable_message_id(e);
            let mut m = base("assistant", id.clone(), e);
            m.insert("text".into(), s(text));
            if let Some(order) = st.content_order.get(&id) {
                let canonical: Vec<&str> = ["thinking", "text", "tools"]
                    .into_iter()
                    .filter(|k| order.contains(k))
                    .collect();
                if !order.is_empty() && *order != canonical {
                    m.insert(
                        "contentOrder".into(),
                        Value::from(order.iter().map(|k| Value::from(*k)).collect::<Vec<_>>()),
                    );
                }
            }
            m.insert("modelId".into(), Value::from(model_id));
            if !text.to_string_lossy().trim().is_empty() {
                st.retained_turns.insert(e.turn_id.to_string_lossy());
            }
            st.assistants.insert(
                (e.turn_id.to_string_lossy(), id.clone()),
                out.messages.len(),
            );
            out.messages
                .push((e.id.to_string_lossy(), Value::Object(m)));
            // Attach the step's parked thinking.
            let turn = e.turn_id.to_string_lossy();
            let mut keep = Vec::new();
            for p in std::mem::take(&mut st.pending) {
                if p.message_id == id
                    && attach_thinking(&p, &turn, &mut out.messages, &st.assistants)
                {
                    continue;
                }
                keep.push(p);
            }
            st.pending = keep;
            true
        }
        _ => {
            diag(
                out,
                e,
                "unsupported_event",
                "text content with this role is not projected",
            );
            false
        }
    }
}

/// Attaches parked thinking to the newest assistant row of `turn_id` whose id is the
/// thinking's step id (`assistants` indexes those rows by turn and id).
fn attach_thinking(
    p: &Pending,
    turn_id: &str,
    messages: &mut [(String, Value)],
    assistants: &HashMap<(String, String), usize>,
) -> bool {
    let key = (turn_id.to_owned(), p.message_id.clone());
    if let Some(&i) = assistants.get(&key) {
        let Value::Object(m) = &mut messages[i].1 else {
            return false;
        };
        let incoming = Value::Object(p.thinking.clone());
        match m.get("thinking").cloned() {
            None => {
                m.insert("thinking".into(), incoming);
            }
            Some(Value::Object(existing)) => {
                let parts = match existing.get("parts") {
                    Some(Value::Array(parts)) => parts.clone(),
                    _ => {
                        let mut first = Map::new();
                        for k in ["text", "signature", "providerOptions"] {
                            if let Some(v) = existing.get(k) {
                                first.insert(k.into(), v.clone());
                            }
                        }
                        vec![Value::Object(first)]
                    }
                };
                let text = format!(
                    "{}{}",
                    existing.get("text").and_then(Value::as_str).unwrap_or(""),
                    p.thinking.get("text").and_then(Value::as_str).unwrap_or("")
                );
                let mut parts = parts;
                parts.push(incoming);
                let mut t = Map::new();
                t.insert("text".into(), Value::from(text));
                t.insert("parts".into(), Value::from(parts));
                m.insert("thinking".into(), Value::Object(t));
            }
            Some(_) => {}
        }
        return true;
    }
    false
}

fn project_call(e: &RuntimeEvent, st: &mut State, out: &mut Projection) -> bool {
    let Some(Content::FunctionCall {
        id,
        name,
        args,
        provider_options,
        provider_executed,
    }) = &e.content
    else {
        return false;
    };
    let Some(use_id) = tool_use_id(e) else {
        diag(
            out,
            e,
            "incomplete_event",
            "function_call RuntimeEvent requires content.id or refs.toolCallId",
        );
        return false;
    };
    if id.to_string_lossy() != use_id {
        diag(
            out,
            e,
            "tool_use_id_mismatch",
            "function_call content.id differs from refs.toolCallId",
        );
    }
    st.tool_name_by_use_id
        .insert(use_id.clone(), name.to_string_lossy());
    let mut m = base("tool_call", use_id, e);
    m.insert("toolName".into(), s(name));
    if let Some(k) =
        string_delta(e, "activityKind").filter(|k| TOOL_ACTIVITY_KINDS.contains(&k.as_str()))
    {
        m.insert("activityKind".into(), Value::from(k));
    }
    for k in ["displayName", "intent"] {
        if let Some(v) = string_delta(e, k) {
            m.insert(k.into(), Value::from(v));
        }
    }
    if let Some(step) = e
        .refs
        .as_ref()
        .and_then(|r| r.step_id.as_ref())
        .filter(|s| !s.is_empty())
    {
        m.insert("stepId".into(), s(step));
    }
    tool_identity(e, &mut m);
    m.insert("args".into(), args.to_serde());
    if let Some(p) = provider_options {
        m.insert("providerOptions".into(), obj_to_serde(p));
    }
    if let Some(p) = provider_executed {
        m.insert("providerExecuted".into(), Value::from(*p));
    }
    out.messages
        .push((e.id.to_string_lossy(), Value::Object(m)));
    true
}

fn is_legacy_plan_result(v: &Json) -> bool {
    matches!(
        v.as_object()
            .and_then(|o| o.get("kind"))
            .and_then(Json::as_str),
        Some(
            "plan_submitted"
                | "plan_progress_updated"
                | "plan_execution_completed"
                | "plan_execution_cancelled"
        )
    )
}

fn project_response(e: &RuntimeEvent, st: &mut State, out: &mut Projection) -> bool {
    let Some(Content::FunctionResponse {
        id,
        name,
        result,
        is_error,
        provider_executed,
        provider_output,
    }) = &e.content
    else {
        return false;
    };
    let Some(use_id) = tool_use_id(e) else {
        diag(
            out,
            e,
            "incomplete_event",
            "function_response RuntimeEvent requires content.id or refs.toolCallId",
        );
        return false;
    };
    if id.to_string_lossy() != use_id {
        diag(
            out,
            e,
            "tool_use_id_mismatch",
            "function_response content.id differs from refs.toolCallId",
        );
    }
    let content = if is_legacy_plan_result(result) {
        let mut m = Map::new();
        m.insert("kind".into(), Value::from("json"));
        m.insert("value".into(), result.to_serde());
        Value::Object(m)
    } else if result
        .as_object()
        .and_then(|o| o.get("kind"))
        .and_then(Json::as_js_str)
        .is_some()
    {
        // Maka validates the closed ToolResultContent shapes here; wsledger only
        // requires an object with a string `kind`.
        result.to_serde()
    } else {
        diag(
            out,
            e,
            "incomplete_event",
            "function_response result is not a supported ToolResultContent",
        );
        return false;
    };
    if !name.is_empty() {
        st.tool_name_by_use_id
            .insert(use_id.clone(), name.to_string_lossy());
    }
    let mut m = base("tool_result", stable_message_id(e), e);
    m.insert("toolUseId".into(), Value::from(use_id));
    m.insert("isError".into(), Value::from(*is_error == Some(true)));
    m.insert("content".into(), content);
    if let Some(p) = provider_executed {
        m.insert("providerExecuted".into(), Value::from(*p));
    }
    if *provider_executed == Some(true) {
        if let Some(o) = provider_output {
            m.insert("providerOutput".into(), o.to_serde());
        }
    }
    if let Some(Json::Number(d)) = state_delta(e, "durationMs") {
        m.insert("durationMs".into(), Json::Number(*d).to_serde());
    }
    tool_identity(e, &mut m);
    st.retained_turns.insert(e.turn_id.to_string_lossy());
    out.messages
        .push((e.id.to_string_lossy(), Value::Object(m)));
    true
}

fn project_permission_decision(
    e: &RuntimeEvent,
    dec: &JsObject,
    st: &mut State,
    out: &mut Projection,
) -> bool {
    let get = |k: &str| {
        dec.get(k)
            .and_then(Json::as_js_str)
            .map(|s| s.to_string_lossy())
    };
    let request_id = get("requestId").unwrap_or_default();
    let request = st.permission_requests.get(&request_id);
    let use_id = e
        .refs
        .as_ref()
        .and_then(|r| r.tool_call_id.as_ref())
        .map(|s| s.to_string_lossy())
        .or_else(|| request.map(|r| r.tool_use_id.clone()));
    let Some(use_id) = use_id else {
        diag(
            out,
            e,
            "incomplete_event",
            "permission decision requires refs.toolCallId or a paired permission request",
        );
        return false;
    };
    if request.is_some_and(|r| r.tool_use_id != use_id) {
        diag(
            out,
            e,
            "tool_use_id_mismatch",
            "permission decision toolUseId does not match its paired permission request",
        );
        return false;
    }
    let state_name = st.tool_name_by_use_id.get(&use_id).cloned();
    let tool_name = get("toolName")
        .or_else(|| request.map(|r| r.tool_name.clone()))
        .or_else(|| state_name.clone());
    let Some(tool_name) = tool_name else {
        diag(
            out,
            e,
            "incomplete_event",
            "permission decision requires durable toolName or a paired permission request or tool call",
        );
        return false;
    };
    if request.is_some_and(|r| r.tool_name != tool_name)
        || state_name.is_some_and(|n| n != tool_name)
    {
        diag(
            out,
            e,
            "incomplete_event",
            "permission decision toolName does not match its paired request or tool call",
        );
        return false;
    }
    let mut m = base("permission_decision", request_id, e);
    m.insert("toolUseId".into(), Value::from(use_id));
    m.insert("toolName".into(), Value::from(tool_name));
    for k in [
        "decision",
        "rememberForTurn",
        "reviewer",
        "rationale",
        "riskLevel",
    ] {
        if let Some(v) = dec.get(k) {
            m.insert(k.into(), v.to_serde());
        }
    }
    if let Some(h) = request.and_then(|r| r.hint.clone()) {
        m.insert("hint".into(), h);
    }
    out.messages
        .push((e.id.to_string_lossy(), Value::Object(m)));
    true
}

/// Maka's legacy turn status for a terminal event (`turnStatusFor`).
pub fn turn_status(event: Option<EventStatus>, header: Option<&RunHeader>) -> Option<&'static str> {
    use crate::header::HeaderStatus;
    match event {
        Some(EventStatus::Completed) => return Some("completed"),
        Some(EventStatus::Failed) => return Some("failed"),
        Some(EventStatus::Aborted | EventStatus::Cancelled) => return Some("aborted"),
        _ => {}
    }
    match header.map(|h| h.status) {
        Some(HeaderStatus::Completed) => Some("completed"),
        Some(HeaderStatus::Failed) => Some("failed"),
        Some(HeaderStatus::Cancelled) => Some("aborted"),
        _ => None,
    }
}

fn project_terminal(
    e: &RuntimeEvent,
    headers: &HashMap<String, &RunHeader>,
    retained: bool,
    out: &mut Projection,
) -> bool {
    let Some(header) = headers.get(&e.run_id.to_string_lossy()).copied() else {
        diag(
            out,
            e,
            "incomplete_event",
            "terminal RuntimeEvent requires an AgentRunHeader",
        );
        return false;
    };
    let Some(status) = turn_status(e.status, Some(header)) else {
        diag(
            out,
            e,
            "incomplete_event",
            "terminal RuntimeEvent status cannot be mapped to a legacy TurnStatus",
        );
        return false;
    };
    let abort = (status == "aborted")
        .then(|| abort_source(e, Some(header)))
        .flatten();
    let failure = (status == "failed")
        .then(|| failure_class(e, Some(header)))
        .flatten();
    let mut m = base("turn_state", stable_message_id(e), e);
    m.insert("status".into(), Value::from(status));
    for k in [
        "parentTurnId",
        "retriedFromTurnId",
        "regeneratedFromTurnId",
        "branchOfTurnId",
        "parentSessionId",
    ] {
        if let Some(v) = header_str(header, k) {
            m.insert(k.into(), Value::from(v));
        }
    }
    if status == "aborted" {
        m.insert("abortedAt".into(), Json::Number(e.ts).to_serde());
    }
    if let Some(a) = &abort {
        m.insert("abortSource".into(), Value::from(a.clone()));
    }
    if status == "failed" {
        m.insert(
            "errorClass".into(),
            Value::from(failure.clone().unwrap_or_else(|| "unknown".into())),
        );
    }
    m.insert("partialOutputRetained".into(), Value::from(retained));
    out.messages
        .push((e.id.to_string_lossy(), Value::Object(m)));
    if failure.as_deref() == Some("tool_step_cap_reached") {
        let mut n = base(
            "system_note",
            format!("{}:step-limit-notice", e.id.to_string_lossy()),
            e,
        );
        n.insert("kind".into(), Value::from("step_limit"));
        out.messages
            .push((e.id.to_string_lossy(), Value::Object(n)));
    }
    if status == "failed" && failure.is_none() {
        diag(
            out,
            e,
            "incomplete_event",
            "failed terminal event did not carry an exact AgentRunHeader.failureClass",
        );
    }
    if status == "aborted" && abort.is_none() {
        diag(
            out,
            e,
            "incomplete_event",
            "abortSource is not present in RuntimeEvent or AgentRunHeader metadata",
        );
    }
    true
}

/// The semantic key Maka compares cached and projected messages by
/// (`compareRuntimeReadModelMessages`): the message's semantic fields, keys sorted.
pub fn semantic_key(m: &Value) -> Option<String> {
    let o = m.as_object()?;
    let t = o.get("type")?.as_str()?;
    let fields: &[&str] = match t {
        "user" => &[
            "type",
            "turnId",
            "text",
            "displayText",
            "origin",
            "attachments",
            "quotes",
        ],
        "assistant" => &["type", "turnId", "text", "modelId", "thinking"],
        "tool_call" => &[
            "type",
            "turnId",
            "toolUseId",
            "toolName",
            "activityKind",
            "displayName",
            "intent",
            "args",
        ],
        "tool_result" => &[
            "type",
            "turnId",
            "toolUseId",
            "isError",
            "content",
            "durationMs",
        ],
        "permission_decision" => &[
            "type",
            "turnId",
            "toolUseId",
            "toolName",
            "decision",
            "rememberForTurn",
            "hint",
        ],
        "token_usage" => &[
            "type",
            "turnId",
            "input",
            "output",
            "cacheHitInput",
            "cacheMissInput",
            "cacheMissInputSource",
            "cacheWriteInput",
            "reasoning",
            "total",
            "rawFinishReason",
            "runtimeSteps",
            "cacheRead",
            "cacheCreation",
            "costUsd",
            "systemPromptHash",
            "contextRemaining",
            "prefixHash",
            "prefixChangeReason",
            "requestShapeHash",
            "requestShapeChangeReason",
            "promptSegments",
            "contextBudget",
            "providerRequestTraceId",
        ],
        "turn_state" => &[
            "type",
            "turnId",
            "status",
            "parentTurnId",
            "retriedFromTurnId",
            "regeneratedFromTurnId",
            "branchOfTurnId",
            "parentSessionId",
            "abortedAt",
            "abortSource",
            "errorClass",
            "partialOutputRetained",
        ],
        "system_note" => &["type", "turnId", "kind", "data"],
        _ => return None,
    };
    let mut sem = Map::new();
    for f in fields {
        let v = match (t, *f) {
            ("tool_call", "toolUseId") => o.get("id"),
            _ => o.get(*f),
        };
        match (t, *f, v) {
            ("user", "attachments" | "quotes", None) => {
                sem.insert((*f).into(), Value::Array(Vec::new()));
            }
            (_, _, Some(v)) => {
                sem.insert((*f).into(), v.clone());
            }
            _ => {}
        }
    }
    Some(sorted(&Value::Object(sem)).to_string())
}

fn sorted(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&o[k])))
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

/// Maka's soft comparison of the projection with the cached transcript: semantic
/// messages missing from the projection, and projected ones the cache lacks, each
/// counted as a multiset.
pub fn compare_with_cache(projected: &[Value], cached: &[Value]) -> (Vec<Value>, Vec<Value>) {
    /// Keys in first-seen order, with their counts.
    fn counts(ms: &[Value]) -> (Vec<String>, HashMap<String, usize>) {
        let mut order = Vec::new();
        let mut n: HashMap<String, usize> = HashMap::new();
        for m in ms {
            if let Some(k) = semantic_key(m) {
                let c = n.entry(k.clone()).or_default();
                if *c == 0 {
                    order.push(k);
                }
                *c += 1;
            }
        }
        (order, n)
    }
    let (p_order, p) = counts(projected);
    let (c_order, c) = counts(cached);
    let parse = |k: &str| serde_json::from_str(k).unwrap_or(Value::Null);
    let missing = c_order
        .iter()
        .filter(|k| p.get(*k).copied().unwrap_or(0) < c[*k])
        .map(|k| parse(k))
        .collect();
    let unexpected = p_order
        .iter()
        .filter(|k| c.get(*k).copied().unwrap_or(0) < p[*k])
        .map(|k| parse(k))
        .collect();
    (missing, unexpected)
}
