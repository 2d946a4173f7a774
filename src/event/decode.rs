//! Strict decode of a RuntimeEvent, mirroring Maka's `decodeRuntimeEvent`.
//!
//! Every closed record rejects keys it does not know, `null` never stands in for an
//! absent optional key, and the text content is normalized the way Maka rebuilds it.
//! The payload is taken by value: the decoder moves sub-values into the typed event
//! and never walks into open records (`stateDelta`, `args`, `result`, ...), so an
//! arbitrarily deep open value costs nothing here.
//!
//! Error details name the first offending path, e.g.
//! `actions.toolDispatch.recoveryMode: expected one of "replay_safe", ...`.

use super::direct::Keep;
use super::key_order::{KeyOrder, MAX_NAMES};
use super::{
    Actions, Author, Content, EventStatus, ModelVisibility, Origin, RecoveryMode, Refs, Role,
    RowIdentity, RuntimeEvent, ToolDispatch, ToolRecovery,
};
use crate::json::{JsObject, JsStr, Json};

/// Why a payload is not a RuntimeEvent Maka would read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The text is not JSON (`JSON.parse` throws).
    #[error("payload is not JSON: {0}")]
    Json(String),
    /// Maka's closed decoder rejects it ("Invalid RuntimeEvent schema"); the detail
    /// names the first offending path, e.g. `actions.toolDispatch.recoveryMode`.
    #[error("invalid RuntimeEvent schema: {0}")]
    Schema(String),
}

/// Decodes and normalizes a parsed payload.
pub fn decode_event(value: Json) -> Result<RuntimeEvent, DecodeError> {
    decode_envelope(value).map_err(|e| DecodeError::Schema(finish(e)))
}

/// Parses (JavaScript `JSON.parse` rules) and decodes a payload text.
pub fn decode_event_text(text: &str) -> Result<RuntimeEvent, DecodeError> {
    // Most payloads are plain enough to read in place (see `direct`); the rest, and
    // every error, take the exact path.
    if let Some(event) = super::direct::decode_plain(text, Keep::All) {
        return Ok(event);
    }
    decode_event_text_exact(text)
}

/// [`decode_event_text`] for the scan's walk: the same verdict, and the same event but
/// for the values the walk does not read, when it is read in place: a plain
/// `actions.tokenUsage`, and a function response's `result` and `providerOutput`, are
/// checked where they stand and kept as `null`. Boxed: the walk's events travel
/// through several calls and a batch, and a batch's decoded rows are a vector
/// (unboxed, a scan of the bench workspace took 72 M more instructions).
pub fn decode_event_text_for_walk(text: &str) -> Result<Box<RuntimeEvent>, DecodeError> {
    if let Some(event) = super::direct::decode_plain(text, Keep::ForWalk) {
        return Ok(Box::new(event));
    }
    decode_event_text_exact(text).map(Box::new)
}

/// [`decode_event_text_for_walk`] for the scan's batches, and the text of a
/// function call's arguments when it was left as `null` because that text is already
/// their identity form (the batch hashes it: `args_hash::hash_of_identity_form`).
pub fn decode_event_text_for_batch(
    text: &str,
) -> Result<(Box<RuntimeEvent>, Option<&str>), DecodeError> {
    if let Some((event, raw_args)) = super::direct::decode_plain_with_args(text, Keep::ForBatch) {
        return Ok((Box::new(event), raw_args));
    }
    decode_event_text_exact(text).map(|e| (Box::new(e), None))
}

/// [`decode_event_text`] through the whole `Json` tree, never in place.
pub fn decode_event_text_exact(text: &str) -> Result<RuntimeEvent, DecodeError> {
    let value = crate::json::parse(text).map_err(|e| DecodeError::Json(e.to_string()))?;
    decode_event(value)
}

/// Maka's store identity check on a parsed payload that may not decode: the payload
/// is an object whose `id`, `sessionId`, `invocationId`, `runId` and `turnId` are
/// strings equal to the row's columns.
pub fn payload_identity_matches(value: &Json, row: &RowIdentity) -> bool {
    let Json::Object(o) = value else { return false };
    let is = |key: &str, want: &str| matches!(o.get(key), Some(Json::String(s)) if *s == *want);
    is("id", &row.event_id)
        && is("sessionId", &row.session_id)
        && is("invocationId", &row.invocation_id)
        && is("runId", &row.run_id)
        && is("turnId", &row.turn_id)
}

// ---------------------------------------------------------------------------------
// Error plumbing
// ---------------------------------------------------------------------------------

/// A failure is `"<relative path>: <message>"`; a message about the value itself
/// starts with `": "`, one about an array element with `"[i]"`.
type V<T> = Result<T, String>;

fn at(prefix: &str, e: String) -> String {
    if e.starts_with(':') || e.starts_with('[') {
        format!("{prefix}{e}")
    } else {
        format!("{prefix}.{e}")
    }
}

fn at_index(i: usize, e: String) -> String {
    at(&format!("[{i}]"), e)
}

fn finish(e: String) -> String {
    if e.starts_with(':') {
        format!("payload{e}")
    } else {
        e
    }
}

fn type_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(n) if !n.is_finite() => "non-finite number",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

fn quote(s: &JsStr) -> String {
    let lossy = s.to_string_lossy();
    if lossy.chars().count() > 64 {
        let cut: String = lossy.chars().take(64).collect();
        format!("{cut:?}...")
    } else {
        format!("{lossy:?}")
    }
}

/// What a value is, for messages: its type, and the value itself for a number.
fn describe(v: &Json) -> String {
    match v {
        Json::Number(n) if *n == 0.0 && n.is_sign_negative() => "number -0".into(),
        Json::Number(n) if n.is_finite() => {
            format!("number {}", crate::json::js_number_to_string(*n))
        }
        other => type_name(other).into(),
    }
}

fn expected(what: &str, got: &Json) -> String {
    format!(": expected {what}, got {}", describe(got))
}

fn one_of(domain: &[&str]) -> String {
    let list: Vec<String> = domain.iter().map(|d| format!("{d:?}")).collect();
    format!("one of {}", list.join(", "))
}

fn missing(key: &str) -> String {
    format!("{key}: missing required key")
}

fn unknown_key(k: &JsStr) -> String {
    format!(": unknown key {}", quote(k))
}

// ---------------------------------------------------------------------------------
// Small predicates (JavaScript semantics)
// ---------------------------------------------------------------------------------

/// Stands in for an absent value in by-reference checks.
static NULL: Json = Json::Null;

const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `Number.isSafeInteger`.
pub(super) fn is_safe_integer(n: f64) -> bool {
    n.is_finite() && n.trunc() == n && n.abs() <= MAX_SAFE_INTEGER
}

/// `/^sha256:[0-9a-f]{64}$/`.
pub(super) fn is_sha256_digest(s: &JsStr) -> bool {
    let b = s.as_wtf8();
    b.len() == 71
        && b.starts_with(b"sha256:")
        && b[7..]
            .iter()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_lower_hex(b: &[u8], len: usize) -> bool {
    b.len() == len && b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Moves the values of a closed object into slots named by `names`; any other key
/// is an error.
fn take_fields<const N: usize>(obj: JsObject, names: &[&str; N]) -> V<[Option<Json>; N]> {
    let mut slots: [Option<Json>; N] = std::array::from_fn(|_| None);
    for (k, v) in obj.into_entries() {
        match names.iter().position(|n| k == *n) {
            Some(i) => slots[i] = Some(v),
            None => return Err(unknown_key(&k)),
        }
    }
    Ok(slots)
}

fn req(slot: Option<Json>, key: &str) -> V<Json> {
    slot.ok_or_else(|| missing(key))
}

fn str_value(v: Json, key: &str) -> V<JsStr> {
    v.into_js_string()
        .map_err(|v| at(key, expected("a string", &v)))
}

fn req_str(slot: Option<Json>, key: &str) -> V<JsStr> {
    str_value(req(slot, key)?, key)
}

fn req_nonempty_str(slot: Option<Json>, key: &str) -> V<JsStr> {
    let s = str_value(req(slot, key)?, key)?;
    if s.is_empty() {
        return Err(format!("{key}: must be a non-empty string"));
    }
    Ok(s)
}

fn opt_str(slot: Option<Json>, key: &str) -> V<Option<JsStr>> {
    slot.map(|v| str_value(v, key)).transpose()
}

fn opt_bool(slot: Option<Json>, key: &str) -> V<Option<bool>> {
    match slot {
        None => Ok(None),
        Some(Json::Bool(b)) => Ok(Some(b)),
        Some(other) => Err(at(key, expected("a boolean", &other))),
    }
}

fn opt_object(slot: Option<Json>, key: &str) -> V<Option<JsObject>> {
    slot.map(|v| {
        v.into_object()
            .map_err(|v| at(key, expected("an object", &v)))
    })
    .transpose()
}

/// An enum member, by exact (case-sensitive) string equality.
fn member<T: Copy>(v: &Json, domain: &[(&str, T)]) -> Option<T> {
    let Json::String(s) = v else { return None };
    domain
        .iter()
        .find(|(name, _)| *s == **name)
        .map(|(_, t)| *t)
}

fn enum_value<T: Copy>(v: Json, key: &str, domain: &[(&str, T)]) -> V<T> {
    member(&v, domain).ok_or_else(|| {
        let names: Vec<&str> = domain.iter().map(|(n, _)| *n).collect();
        let got = match &v {
            Json::String(s) => quote(s),
            other => describe(other),
        };
        format!("{key}: expected {}, got {got}", one_of(&names))
    })
}

// ---------------------------------------------------------------------------------
// Envelope
// ---------------------------------------------------------------------------------

pub(super) const ROLES: &[(&str, Role)] = &[
    ("user", Role::User),
    ("model", Role::Model),
    ("tool", Role::Tool),
    ("system", Role::System),
];
pub(super) const AUTHORS: &[(&str, Author)] = &[
    ("user", Author::User),
    ("host", Author::Host),
    ("agent", Author::Agent),
    ("tool", Author::Tool),
    ("system", Author::System),
];
pub(super) const ORIGINS: &[(&str, Origin)] = &[
    ("provider", Origin::Provider),
    ("code_mode", Origin::CodeMode),
];
pub(super) const VISIBILITIES: &[(&str, ModelVisibility)] = &[
    ("visible", ModelVisibility::Visible),
    ("hidden", ModelVisibility::Hidden),
];
pub(super) const STATUSES: &[(&str, EventStatus)] = &[
    ("streaming", EventStatus::Streaming),
    ("completed", EventStatus::Completed),
    ("failed", EventStatus::Failed),
    ("aborted", EventStatus::Aborted),
    ("cancelled", EventStatus::Cancelled),
];
pub(super) const RECOVERY_MODES: &[(&str, RecoveryMode)] = &[
    ("replay_safe", RecoveryMode::ReplaySafe),
    ("idempotent", RecoveryMode::Idempotent),
    ("reconcile", RecoveryMode::Reconcile),
    ("reattach", RecoveryMode::Reattach),
    ("outcome_unknown", RecoveryMode::OutcomeUnknown),
    ("never_auto_retry", RecoveryMode::NeverAutoRetry),
];

pub(super) const ENVELOPE_KEYS: [&str; 16] = [
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

fn decode_envelope(value: Json) -> V<RuntimeEvent> {
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
// Content
// ---------------------------------------------------------------------------------

const CONTENT_KINDS: [&str; 5] = [
    "text",
    "thinking",
    "function_call",
    "function_response",
    "error",
];

pub(super) fn decode_content(value: Json) -> V<Content> {
    let obj = value.into_object().map_err(|v| expected("an object", &v))?;
    let kind = match obj.get("kind") {
        Some(Json::String(s)) => CONTENT_KINDS.iter().position(|k| *s == **k),
        _ => None,
    };
    let Some(kind) = kind else {
        let got = match obj.get("kind") {
            None => "nothing".to_string(),
            Some(Json::String(s)) => quote(s),
            Some(other) => describe(other),
        };
        return Err(format!(
            "kind: expected {}, got {got}",
            one_of(&CONTENT_KINDS)
        ));
    };
    match kind {
        0 => decode_text_content(obj),
        1 => {
            let [_, text, signature, provider_options] =
                take_fields(obj, &["kind", "text", "signature", "providerOptions"])?;
            Ok(Content::Thinking {
                text: req_str(text, "text")?,
                signature: opt_str(signature, "signature")?,
                provider_options: opt_object(provider_options, "providerOptions")?,
            })
        }
        2 => {
            let [_, id, name, args, provider_options, provider_executed] = take_fields(
                obj,
                &[
                    "kind",
                    "id",
                    "name",
                    "args",
                    "providerOptions",
                    "providerExecuted",
                ],
            )?;
            let (id, name, args) = (req(id, "id")?, req(name, "name")?, req(args, "args")?);
            Ok(Content::FunctionCall {
                id: str_value(id, "id")?,
                name: str_value(name, "name")?,
                args,
                provider_options: opt_object(provider_options, "providerOptions")?,
                provider_executed: opt_bool(provider_executed, "providerExecuted")?,
            })
        }
        3 => {
            let [_, id, name, result, is_error, provider_executed, provider_output] = take_fields(
                obj,
                &[
                    "kind",
                    "id",
                    "name",
                    "result",
                    "isError",
                    "providerExecuted",
                    "providerOutput",
                ],
            )?;
            let (id, name, result) = (req(id, "id")?, req(name, "name")?, req(result, "result")?);
            Ok(Content::FunctionResponse {
                id: str_value(id, "id")?,
                name: str_value(name, "name")?,
                result,
                is_error: opt_bool(is_error, "isError")?,
                provider_executed: opt_bool(provider_executed, "providerExecuted")?,
                provider_output,
            })
        }
        _ => {
            let [_, message, code, reason, details] =
                take_fields(obj, &["kind", "message", "code", "reason", "details"])?;
            let message = req(message, "message")?;
            let details = match details {
                None => None,
                Some(o @ Json::Object(_)) => Some(o),
                Some(items @ Json::Array(_)) => {
                    let list = items.as_array().unwrap_or_default();
                    if let Some(i) = list.iter().position(|x| !matches!(x, Json::String(_))) {
                        return Err(format!(
                            "details[{i}]: expected a string (details is a string array or an object), got {}",
                            describe(&list[i])
                        ));
                    }
                    Some(items)
                }
                Some(other) => {
                    return Err(at(
                        "details",
                        expected("a string array or an object", &other),
                    ))
                }
            };
            Ok(Content::Error {
                message: str_value(message, "message")?,
                code: opt_str(code, "code")?,
                reason: opt_str(reason, "reason")?,
                details,
            })
        }
    }
}

const TEXT_CONTENT_KEYS: [&str; 9] = [
    "kind",
    "text",
    "displayText",
    "origin",
    "attachments",
    "quotes",
    "inlineReferences",
    "steering",
    "providerOptions",
];

const INLINE_REFERENCE_MAX_COUNT: usize = 32;
const INLINE_REFERENCE_VALUE_MAX_UNITS: usize = 4096;
const INLINE_REFERENCE_LABEL_MAX_UNITS: usize = 200;

/// Text content: validated like Maka's `isMessageContent` plus the text-only keys, then
/// rebuilt: `displayText` equal to `text` dropped, empty `attachments` / `quotes`
/// dropped, attachment `bytes: -0` written as `0`, quotes and origin rebuilt (legacy
/// `automation` origin renamed), `steering` kept only as `true`, `providerOptions`
/// dropped.
fn decode_text_content(obj: JsObject) -> V<Content> {
    let [_, text, display_text, origin, attachments, quotes, inline_references, steering, provider_options] =
        take_fields(obj, &TEXT_CONTENT_KEYS)?;
    let text = req_str(text, "text")?;
    let origin = match origin {
        None => None,
        Some(v) => match decode_turn_origin(&v) {
            Some(o) => Some(o),
            None => return Err(turn_origin_error(&v)),
        },
    };
    let steering = match steering {
        None => false,
        Some(Json::Bool(true)) => true,
        Some(other) => {
            let got = match other {
                Json::Bool(false) => "false".to_string(),
                ref o => describe(o),
            };
            return Err(format!("steering: must be true when present, got {got}"));
        }
    };
    match provider_options {
        None | Some(Json::Object(_)) => {}
        Some(other) => return Err(at("providerOptions", expected("an object", &other))),
    }
    let display_text = opt_str(display_text, "displayText")?;
    let attachments = match attachments.map(Json::into_array) {
        None => None,
        Some(Ok(items)) => {
            for (i, a) in items.iter().enumerate() {
                check_attachment_ref(a).map_err(|e| at("attachments", at_index(i, e)))?;
            }
            Some(items)
        }
        Some(Err(other)) => return Err(at("attachments", expected("an array", &other))),
    };
    let quotes = match quotes.map(Json::into_array) {
        None => None,
        Some(Ok(items)) => {
            for (i, q) in items.iter().enumerate() {
                check_closed(q, QUOTE_FIELDS).map_err(|e| at("quotes", at_index(i, e)))?;
            }
            Some(items)
        }
        Some(Err(other)) => return Err(at("quotes", expected("an array", &other))),
    };
    let inline_references = match inline_references.map(Json::into_array) {
        None => None,
        Some(Ok(items)) => {
            if items.len() > INLINE_REFERENCE_MAX_COUNT {
                return Err(format!(
                    "inlineReferences: at most {INLINE_REFERENCE_MAX_COUNT} references, got {}",
                    items.len()
                ));
            }
            for (i, r) in items.iter().enumerate() {
                check_inline_reference(r).map_err(|e| at("inlineReferences", at_index(i, e)))?;
            }
            check_inline_references_match(&items, display_text.as_ref().unwrap_or(&text))
                .map_err(|e| at("inlineReferences", e))?;
            Some(items)
        }
        Some(Err(other)) => return Err(at("inlineReferences", expected("an array", &other))),
    };

    let mut fields = JsObject::new();
    fields.push_unique(JsStr::new("kind"), Json::String(JsStr::new("text")));
    fields.push_unique(JsStr::new("text"), Json::String(text.clone()));
    if let Some(d) = display_text {
        if d != text {
            fields.push_unique(JsStr::new("displayText"), Json::String(d));
        }
    }
    if let Some(items) = attachments {
        if !items.is_empty() {
            let items = items.into_iter().map(normalize_attachment).collect();
            fields.push_unique(JsStr::new("attachments"), Json::Array(items));
        }
    }
    if let Some(items) = quotes {
        if !items.is_empty() {
            fields.push_unique(JsStr::new("quotes"), Json::Array(items));
        }
    }
    if let Some(items) = inline_references {
        fields.push_unique(JsStr::new("inlineReferences"), Json::Array(items));
    }
    if let Some(o) = origin {
        fields.push_unique(JsStr::new("origin"), Json::Object(o));
    }
    if steering {
        fields.push_unique(JsStr::new("steering"), Json::Bool(true));
    }
    Ok(Content::Text {
        text,
        steering,
        fields,
    })
}

/// An attachment with `bytes: -0` written as `0` (Maka's `Object.is(bytes, -0)` rewrite).
fn normalize_attachment(mut a: Json) -> Json {
    if let Json::Object(o) = &mut a {
        if let Some(Json::Number(n)) = o.get_mut("bytes") {
            if *n == 0.0 {
                *n = 0.0;
            }
        }
    }
    a
}

/// Maka's `decodeTurnOrigin`: one of four closed shapes; the released `automation`
/// kind is read as `legacy_automation`. The result is rebuilt.
fn decode_turn_origin(v: &Json) -> Option<JsObject> {
    let o = v.as_object()?;
    let kind = o.get("kind")?.as_js_str()?;
    let (out_kind, keys): (&str, &[&str]) = if *kind == "scheduled_task" {
        ("scheduled_task", &["scheduledTaskId"])
    } else if *kind == "automation" || *kind == "legacy_automation" {
        ("legacy_automation", &["automationId"])
    } else if *kind == "goal" {
        ("goal", &["goalId"])
    } else if *kind == "agent_graph" {
        ("agent_graph", &["graphId", "wakeId", "attemptId"])
    } else {
        return None;
    };
    if o.len() != keys.len() + 1 {
        return None;
    }
    let mut out = JsObject::new();
    out.push_unique(JsStr::new("kind"), Json::String(JsStr::new(out_kind)));
    for key in keys {
        match o.get(key) {
            Some(Json::String(s)) => out.push_unique(JsStr::new(key), Json::String(s.clone())),
            _ => return None,
        }
    }
    Some(out)
}

fn turn_origin_error(v: &Json) -> String {
    let Some(o) = v.as_object() else {
        return at("origin", expected("a turn origin object", v));
    };
    match o.get("kind") {
        Some(Json::String(k)) => format!(
            "origin: not a valid turn origin of kind {} (kinds: scheduled_task, legacy_automation, goal, agent_graph, each with exactly its id fields as strings)",
            quote(k)
        ),
        _ => "origin.kind: expected one of \"scheduled_task\", \"legacy_automation\", \"goal\", \"agent_graph\"".to_string(),
    }
}

const ATTACHMENT_KINDS: &[&str] = &["image", "pdf", "doc", "code", "other"];

fn check_attachment_ref(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("kind", true, Ty::Enum(ATTACHMENT_KINDS)),
            F("name", true, Ty::Str),
            F("mimeType", true, Ty::Str),
            F("bytes", true, Ty::SafeIntNonNeg),
            F("ref", true, Ty::Any),
        ],
    )?;
    let r = o.get("ref").unwrap_or(&NULL);
    check_storage_ref(r).map_err(|e| at("ref", e))
}

fn check_storage_ref(v: &Json) -> V<()> {
    let Some(o) = v.as_object() else {
        return Err(expected("a storage ref object", v));
    };
    let kind = o.get("kind").and_then(Json::as_js_str);
    let fields: &[F] = match kind {
        Some(k) if *k == "session_file" => &[
            F("kind", true, Ty::Any),
            F("sessionId", true, Ty::Str),
            F("relativePath", true, Ty::Str),
        ],
        Some(k) if *k == "workspace_file" => {
            &[F("kind", true, Ty::Any), F("relativePath", true, Ty::Str)]
        }
        Some(k) if *k == "external_file" => {
            &[F("kind", true, Ty::Any), F("absolutePath", true, Ty::Str)]
        }
        _ => {
            return Err(
                "kind: expected one of \"session_file\", \"workspace_file\", \"external_file\""
                    .to_string(),
            )
        }
    };
    check_closed(v, fields).map(|_| ())
}

const QUOTE_FIELDS: &[F] = &[
    F("text", true, Ty::Str),
    F("label", false, Ty::Str),
    F("sourceTurnId", false, Ty::Str),
];

fn check_inline_reference(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("kind", true, Ty::Enum(&["skill", "workspace_file"])),
            F("value", true, Ty::NonEmptyStr),
            F("label", true, Ty::NonEmptyStr),
            F("start", true, Ty::SafeIntNonNeg),
        ],
    )?;
    let value = o
        .get("value")
        .and_then(Json::as_js_str)
        .ok_or_else(|| missing("value"))?;
    let label = o
        .get("label")
        .and_then(Json::as_js_str)
        .ok_or_else(|| missing("label"))?;
    if value.utf16_len() > INLINE_REFERENCE_VALUE_MAX_UNITS {
        return Err(format!(
            "value: longer than {INLINE_REFERENCE_VALUE_MAX_UNITS} UTF-16 units"
        ));
    }
    if label.utf16_len() > INLINE_REFERENCE_LABEL_MAX_UNITS {
        return Err(format!(
            "label: longer than {INLINE_REFERENCE_LABEL_MAX_UNITS} UTF-16 units"
        ));
    }
    let b = value.as_wtf8();
    let is_skill = o
        .get("kind")
        .and_then(Json::as_js_str)
        .is_some_and(|k| *k == "skill");
    if is_skill {
        let ok = b.len() > 7
            && b.starts_with(b"/skill:")
            && b[7..]
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
        if !ok {
            return Err(
                "value: a skill reference must match /skill:<name> ([A-Za-z0-9._-]+)".into(),
            );
        }
    } else if !(b.first() == Some(&b'@') && is_canonical_relative_path(&b[1..])) {
        return Err(
            "value: a workspace_file reference must be \"@\" followed by a canonical relative path"
                .into(),
        );
    }
    Ok(())
}

/// Maka's canonical relative path: non-empty, no NUL, no backslash, not rooted, no
/// drive prefix, every `/` segment non-empty and not `.` / `..`.
fn is_canonical_relative_path(p: &[u8]) -> bool {
    let drive_prefix = p.len() >= 2 && p[0].is_ascii_alphabetic() && p[1] == b':';
    if p.is_empty() || p.contains(&0) || p.contains(&b'\\') || p[0] == b'/' || drive_prefix {
        return false;
    }
    p.split(|c| *c == b'/')
        .all(|seg| !seg.is_empty() && seg != b"." && seg != b"..")
}

/// Each reference's `value` must sit at `start` (UTF-16 offset) in `displayText ?? text`,
/// in order and without overlap.
fn check_inline_references_match(refs: &[Json], text: &JsStr) -> V<()> {
    if refs.is_empty() {
        return Ok(());
    }
    let units: Vec<u16> = text.utf16().collect();
    let mut previous_end = 0f64;
    for (i, r) in refs.iter().enumerate() {
        let Some(o) = r.as_object() else { continue };
        let start = o.get("start").and_then(Json::as_f64).unwrap_or(0.0);
        let value: Vec<u16> = o
            .get("value")
            .and_then(Json::as_js_str)
            .map(|v| v.utf16().collect())
            .unwrap_or_default();
        if start < previous_end {
            return Err(format!("[{i}].start: overlaps the previous reference"));
        }
        // `text.slice(start, start + value.length)` with the bounds clamped.
        let begin = (start as usize).min(units.len());
        let end = (start + value.len() as f64).min(units.len() as f64) as usize;
        if units[begin..end.max(begin)] != value[..] {
            return Err(format!("[{i}]: value does not occur in the text at start"));
        }
        previous_end = start + value.len() as f64;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Table-driven checks for closed records that are kept as JSON
// ---------------------------------------------------------------------------------

#[derive(Clone, Copy)]
pub(super) enum Ty {
    /// Presence only.
    Any,
    Str,
    NonEmptyStr,
    Bool,
    /// Exactly `true`.
    True,
    Finite,
    SafeIntNonNeg,
    SafeIntPos,
    /// The number 1.
    One,
    /// The number 0 (`-0` included, as `=== 0`).
    Zero,
    Enum(&'static [&'static str]),
    StrArray,
    /// An object whose values are all finite numbers.
    StrNumRecord,
    Sha256,
    /// A closed record of these fields.
    Record(&'static Fields),
    /// An array of closed records of these fields.
    Records(&'static Fields),
    Check(fn(&Json) -> V<()>),
}

/// A field of a closed record: name, required, type.
#[derive(Clone, Copy)]
pub(super) struct F(pub(super) &'static str, pub(super) bool, pub(super) Ty);

/// The fields of a closed record that the in-place decoder also reads, with their
/// sorted order, in which it looks for a key's field.
pub(super) struct Fields {
    pub(super) list: &'static [F],
    pub(super) order: KeyOrder,
    /// A bit per required field, by index.
    pub(super) required: u128,
}

impl Fields {
    pub(super) const fn new(list: &'static [F]) -> Fields {
        assert!(list.len() <= MAX_NAMES, "too many fields");
        let mut names = [""; MAX_NAMES];
        let mut required = 0u128;
        let mut k = 0;
        while k < list.len() {
            names[k] = list[k].0;
            if list[k].1 {
                required |= 1 << k;
            }
            k += 1;
        }
        Fields {
            list,
            order: KeyOrder::new(names.split_at(list.len()).0),
            required,
        }
    }
}

pub(super) fn check_ty(v: &Json, ty: Ty) -> V<()> {
    let ok = match ty {
        Ty::Any => true,
        Ty::Str => matches!(v, Json::String(_)),
        Ty::NonEmptyStr => match v {
            Json::String(s) if s.is_empty() => return Err(": must be a non-empty string".into()),
            Json::String(_) => true,
            _ => false,
        },
        Ty::Bool => matches!(v, Json::Bool(_)),
        Ty::True => matches!(v, Json::Bool(true)),
        Ty::Finite => matches!(v, Json::Number(n) if n.is_finite()),
        Ty::SafeIntNonNeg => matches!(v, Json::Number(n) if is_safe_integer(*n) && *n >= 0.0),
        Ty::SafeIntPos => matches!(v, Json::Number(n) if is_safe_integer(*n) && *n > 0.0),
        Ty::One => matches!(v, Json::Number(n) if *n == 1.0),
        Ty::Zero => matches!(v, Json::Number(n) if *n == 0.0),
        Ty::Enum(domain) => matches!(v, Json::String(s) if domain.iter().any(|d| *s == **d)),
        Ty::StrArray => match v {
            Json::Array(items) => {
                if let Some(i) = items.iter().position(|x| !matches!(x, Json::String(_))) {
                    return Err(at_index(i, expected("a string", &items[i])));
                }
                true
            }
            _ => false,
        },
        Ty::StrNumRecord => match v {
            Json::Object(o) => {
                for (k, x) in o.iter() {
                    if !matches!(x, Json::Number(n) if n.is_finite()) {
                        return Err(format!(
                            "{}: expected a finite number, got {}",
                            quote(k),
                            describe(x)
                        ));
                    }
                }
                true
            }
            _ => false,
        },
        Ty::Sha256 => matches!(v, Json::String(s) if is_sha256_digest(s)),
        Ty::Record(fields) => return check_closed(v, fields.list).map(|_| ()),
        Ty::Records(Fields { list: fields, .. }) => {
            let Json::Array(items) = v else {
                return Err(expected("an array", v));
            };
            for (i, x) in items.iter().enumerate() {
                check_closed(x, fields).map_err(|e| at_index(i, e))?;
            }
            return Ok(());
        }
        Ty::Check(f) => return f(v),
    };
    if ok {
        return Ok(());
    }
    let what = match ty {
        Ty::Any | Ty::Check(_) | Ty::Record(_) | Ty::Records(_) => "a value".to_string(),
        Ty::Str => "a string".into(),
        Ty::NonEmptyStr => "a non-empty string".into(),
        Ty::Bool => "a boolean".into(),
        Ty::True => "true".into(),
        Ty::Finite => "a finite number".into(),
        Ty::SafeIntNonNeg => "a safe integer >= 0".into(),
        Ty::SafeIntPos => "a safe integer > 0".into(),
        Ty::One => "the number 1".into(),
        Ty::Zero => "the number 0".into(),
        Ty::Enum(domain) => one_of(domain),
        Ty::StrArray => "an array of strings".into(),
        Ty::StrNumRecord => "an object of finite numbers".into(),
        Ty::Sha256 => "a sha256:<64 lowercase hex> digest".into(),
    };
    match (ty, v) {
        (Ty::Enum(_), Json::String(s)) => Err(format!(": expected {what}, got {}", quote(s))),
        (Ty::Sha256, Json::String(s)) => Err(format!(": expected {what}, got {}", quote(s))),
        _ => Err(expected(&what, v)),
    }
}

/// Maka's `isRecord` + `hasExactShape` + the field checks, in that order.
fn check_closed<'a>(v: &'a Json, fields: &[F]) -> V<&'a JsObject> {
    let Some(o) = v.as_object() else {
        return Err(expected("an object", v));
    };
    for k in o.keys() {
        if !fields.iter().any(|f| *k == *f.0) {
            return Err(unknown_key(k));
        }
    }
    for f in fields {
        if f.1 && !o.contains_key(f.0) {
            return Err(missing(f.0));
        }
    }
    for f in fields {
        if let Some(x) = o.get(f.0) {
            check_ty(x, f.2).map_err(|e| at(f.0, e))?;
        }
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------
// Actions
// ---------------------------------------------------------------------------------

pub(super) const ACTION_KEYS: [&str; 16] = [
    "stateDelta",
    "artifactDelta",
    "permissionRequest",
    "permissionDecision",
    "permissionAnswerAccepted",
    "permissionClosureAccepted",
    "userQuestionRequest",
    "userQuestionAnswerAccepted",
    "transferToAgent",
    "endInvocation",
    "tokenUsage",
    "toolDispatch",
    "toolRecovery",
    "runtimeProtocol",
    "continuationStart",
    "workspaceFact",
];

/// `INTERACTION_ID_MAX_BYTES` and `INTERACTION_TOOL_NAME_MAX_BYTES`.
const INTERACTION_ID_MAX_BYTES: usize = 256;
const INTERACTION_TOOL_NAME_MAX_BYTES: usize = 256;

pub(super) const TOOL_BOUNDARY_PROTOCOL_V1: &str = "t1_after_preflight_v1";

/// Runs a by-reference check on a kept value and keeps it.
fn kept(slot: Option<Json>, key: &str, check: fn(&Json) -> V<()>) -> V<Option<Json>> {
    match slot {
        None => Ok(None),
        Some(v) => {
            check(&v).map_err(|e| at(key, e))?;
            Ok(Some(v))
        }
    }
}

pub(super) fn decode_actions(value: Json) -> V<Actions> {
    let obj = value.into_object().map_err(|v| expected("an object", &v))?;
    let key_count = obj.len();
    let [state_delta, artifact_delta, permission_request, permission_decision, permission_answer_accepted, permission_closure_accepted, user_question_request, user_question_answer_accepted, transfer_to_agent, end_invocation, token_usage, tool_dispatch, tool_recovery, runtime_protocol, continuation_start, workspace_fact] =
        take_fields(obj, &ACTION_KEYS)?;
    if permission_closure_accepted.is_some() && key_count != 1 {
        return Err(": permissionClosureAccepted must be the only key of actions".into());
    }
    let state_delta = opt_object(state_delta, "stateDelta")?;
    let artifact_delta = match artifact_delta.map(Json::into_object) {
        None => None,
        Some(Ok(o)) => {
            for (k, x) in o.iter() {
                let ok = match x {
                    Json::String(_) | Json::Bool(_) => true,
                    Json::Number(n) => n.is_finite(),
                    _ => false,
                };
                if !ok {
                    return Err(format!(
                        "artifactDelta.{}: expected a string, boolean or finite number, got {}",
                        quote(k),
                        describe(x)
                    ));
                }
            }
            Some(o)
        }
        Some(Err(other)) => return Err(at("artifactDelta", expected("an object", &other))),
    };
    let transfer_to_agent = opt_str(transfer_to_agent, "transferToAgent")?;
    let end_invocation = opt_bool(end_invocation, "endInvocation")?;
    Ok(Actions {
        state_delta,
        artifact_delta,
        permission_request: kept(
            permission_request,
            "permissionRequest",
            check_permission_request,
        )?,
        permission_decision: kept(
            permission_decision,
            "permissionDecision",
            check_permission_decision,
        )?,
        permission_answer_accepted: kept(
            permission_answer_accepted,
            "permissionAnswerAccepted",
            check_answer_accepted,
        )?,
        permission_closure_accepted: kept(
            permission_closure_accepted,
            "permissionClosureAccepted",
            check_closure_accepted,
        )?,
        user_question_request: kept(
            user_question_request,
            "userQuestionRequest",
            check_user_question_request,
        )?,
        user_question_answer_accepted: kept(
            user_question_answer_accepted,
            "userQuestionAnswerAccepted",
            check_answer_accepted,
        )?,
        transfer_to_agent,
        end_invocation,
        token_usage: kept(token_usage, "tokenUsage", check_token_usage)?,
        tool_dispatch: tool_dispatch
            .map(|v| decode_tool_dispatch(v).map_err(|e| at("toolDispatch", e)))
            .transpose()?,
        tool_recovery: tool_recovery
            .map(|v| decode_tool_recovery(v).map_err(|e| at("toolRecovery", e)))
            .transpose()?,
        runtime_protocol: kept(runtime_protocol, "runtimeProtocol", check_runtime_protocol)?,
        continuation_start: kept(
            continuation_start,
            "continuationStart",
            check_continuation_start,
        )?,
        workspace_fact: kept(workspace_fact, "workspaceFact", check_workspace_fact)?,
        newer: Default::default(),
    })
}

fn check_request_id_bytes(o: &JsObject) -> V<()> {
    let id = o
        .get("requestId")
        .and_then(Json::as_js_str)
        .ok_or_else(|| missing("requestId"))?;
    if id.is_empty() || id.utf8_len() > INTERACTION_ID_MAX_BYTES {
        return Err(format!(
            "requestId: must be 1..={INTERACTION_ID_MAX_BYTES} UTF-8 bytes, got {}",
            id.utf8_len()
        ));
    }
    Ok(())
}

pub(super) fn check_answer_accepted(v: &Json) -> V<()> {
    let o = check_closed(v, &[F("requestId", true, Ty::Str)])?;
    check_request_id_bytes(o)
}

fn check_closure_accepted(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("requestId", true, Ty::Str),
            F("reason", true, Ty::Enum(&["timed_out"])),
        ],
    )?;
    check_request_id_bytes(o)
}

const APPROVALS_REVIEWERS: &[&str] = &["user", "auto_review"];
const APPROVAL_RISK_LEVELS: &[&str] = &["low", "medium", "high", "critical"];

pub(super) fn check_permission_decision(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("requestId", true, Ty::Str),
            F("decision", true, Ty::Enum(&["allow", "deny"])),
            F("rememberForTurn", false, Ty::Bool),
            F("reviewer", false, Ty::Enum(APPROVALS_REVIEWERS)),
            F("rationale", false, Ty::Str),
            F("riskLevel", false, Ty::Enum(APPROVAL_RISK_LEVELS)),
            F("toolName", false, Ty::NonEmptyStr),
        ],
    )?;
    if let Some(Json::String(name)) = o.get("toolName") {
        if name.utf8_len() > INTERACTION_TOOL_NAME_MAX_BYTES {
            return Err(format!(
                "toolName: must be at most {INTERACTION_TOOL_NAME_MAX_BYTES} UTF-8 bytes, got {}",
                name.utf8_len()
            ));
        }
    }
    Ok(())
}

const TOOL_CATEGORIES: &[&str] = &[
    "read",
    "web_read",
    "file_write",
    "fs_destructive",
    "shell_safe",
    "shell_unsafe",
    "git_destructive",
    "network_send",
    "privileged",
    "browser",
    "computer_use",
    "client_capability",
    "custom_tool",
    "subagent",
];

const TOOL_PERMISSION_REASONS: &[&str] = &[
    "shell_dangerous",
    "file_write",
    "fs_destructive",
    "network",
    "git_destructive",
    "privileged",
    "browser",
    "computer_use",
    "custom",
];

fn check_allow_once_deny(v: &Json) -> V<()> {
    match v {
        Json::Array(items)
            if items.len() == 2
                && matches!(&items[0], Json::String(s) if *s == "allow_once")
                && matches!(&items[1], Json::String(s) if *s == "deny") =>
        {
            Ok(())
        }
        _ => Err(": expected exactly [\"allow_once\", \"deny\"]".into()),
    }
}

fn check_additional_permission_risk(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("outsideWorkspace", true, Ty::Bool),
            F("protectedMetadata", true, Ty::Bool),
            F("networkEnabled", true, Ty::Bool),
        ],
    )
    .map(|_| ())
}

fn check_sandbox_escalation_risk(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("unsandboxedExecution", true, Ty::True),
            F("unrestrictedFileSystem", true, Ty::True),
            F("unrestrictedNetwork", true, Ty::True),
            F("protectedMetadataExposed", true, Ty::True),
        ],
    )
    .map(|_| ())
}

pub(super) fn check_permission_request(v: &Json) -> V<()> {
    let Some(o) = v.as_object() else {
        return Err(expected("an object", v));
    };
    for (key, ty) in [
        ("requestId", Ty::Str),
        ("toolUseId", Ty::Str),
        ("toolName", Ty::Str),
        ("category", Ty::Enum(TOOL_CATEGORIES)),
    ] {
        match o.get(key) {
            None => return Err(missing(key)),
            Some(x) => check_ty(x, ty).map_err(|e| at(key, e))?,
        }
    }
    let kind = o.get("kind").and_then(Json::as_js_str);
    let common = [
        F("kind", true, Ty::Any),
        F("requestId", true, Ty::Any),
        F("toolUseId", true, Ty::Any),
        F("toolName", true, Ty::Any),
        F("category", true, Ty::Any),
    ];
    match kind {
        Some(k) if *k == "tool_permission" => {
            let mut fields = common.to_vec();
            fields.extend([
                F("reason", true, Ty::Enum(TOOL_PERMISSION_REASONS)),
                F("args", true, Ty::Any),
                F("rememberForTurnAllowed", true, Ty::Bool),
                F("hint", false, Ty::Str),
            ]);
            check_closed(v, &fields).map(|_| ())
        }
        Some(k) if *k == "additional_permissions" => {
            let mut fields = common.to_vec();
            fields.extend([
                F("reason", true, Ty::Enum(&["additional_permissions"])),
                F("additionalPermissions", true, Ty::Check(check_additional_permission_profile)),
                F("cwd", true, Ty::Str),
                F("justification", true, Ty::Str),
                F("intentHash", true, Ty::Str),
                F("permissionsHash", true, Ty::Str),
                F("risk", true, Ty::Check(check_additional_permission_risk)),
                F("alsoApprovesToolExecution", true, Ty::Bool),
                F("availableDecisions", true, Ty::Check(check_allow_once_deny)),
                F("hint", false, Ty::Str),
            ]);
            check_closed(v, &fields).map(|_| ())
        }
        Some(k) if *k == "sandbox_escalation" => {
            let mut fields = common.to_vec();
            fields[3] = F("toolName", true, Ty::Enum(&["Bash"]));
            fields.extend([
                F("reason", true, Ty::Enum(&["sandbox_escalation"])),
                F("command", true, Ty::Str),
                F("cwd", true, Ty::Str),
                F("justification", true, Ty::Str),
                F("intentHash", true, Ty::Str),
                F("commandHash", true, Ty::Str),
                F("trigger", true, Ty::Enum(&["proactive", "sandbox_denial"])),
                F("risk", true, Ty::Check(check_sandbox_escalation_risk)),
                F("alsoApprovesToolExecution", true, Ty::Bool),
                F("availableDecisions", true, Ty::Check(check_allow_once_deny)),
                F("hint", false, Ty::Str),
            ]);
            check_closed(v, &fields).map(|_| ())
        }
        _ => Err(
            "kind: expected one of \"tool_permission\", \"additional_permissions\", \"sandbox_escalation\""
                .into(),
        ),
    }
}

fn check_user_question_option(v: &Json) -> V<()> {
    check_closed(
        v,
        &[F("label", true, Ty::Str), F("description", false, Ty::Str)],
    )
    .map(|_| ())
}

fn check_array_of(v: &Json, each: fn(&Json) -> V<()>) -> V<()> {
    let Json::Array(items) = v else {
        return Err(expected("an array", v));
    };
    for (i, x) in items.iter().enumerate() {
        each(x).map_err(|e| at_index(i, e))?;
    }
    Ok(())
}

fn check_user_question(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("question", true, Ty::Str),
            F(
                "options",
                true,
                Ty::Check(|x| check_array_of(x, check_user_question_option)),
            ),
        ],
    )
    .map(|_| ())
}

pub(super) fn check_user_question_request(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("requestId", true, Ty::Str),
            F("toolUseId", true, Ty::Str),
            F(
                "questions",
                true,
                Ty::Check(|x| check_array_of(x, check_user_question)),
            ),
        ],
    )
    .map(|_| ())
}

/// `actions.runtimeProtocol` (also checked in place for the scan's walk).
pub(super) const RUNTIME_PROTOCOL_FIELDS: Fields = Fields::new(&[F(
    "toolBoundary",
    true,
    Ty::Enum(&[TOOL_BOUNDARY_PROTOCOL_V1]),
)]);

pub(super) fn check_runtime_protocol(v: &Json) -> V<()> {
    check_closed(v, RUNTIME_PROTOCOL_FIELDS.list).map(|_| ())
}

fn check_continuation_source(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("sessionId", true, Ty::NonEmptyStr),
            F("invocationId", true, Ty::NonEmptyStr),
            F("runId", true, Ty::NonEmptyStr),
            F("turnId", true, Ty::NonEmptyStr),
            F("highWater", true, Ty::SafeIntPos),
            F("prefixDigest", true, Ty::Sha256),
        ],
    )
    .map(|_| ())
}

pub(super) fn check_continuation_start(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("protocol", true, Ty::Enum(&["continuation_start_v2"])),
            F(
                "provenance",
                true,
                Ty::Enum(&["runtime_admission", "claim_repair"]),
            ),
            F("claimId", true, Ty::NonEmptyStr),
            F("boundaryDigest", true, Ty::Sha256),
            F(
                "immediateSource",
                true,
                Ty::Check(check_continuation_source),
            ),
            F("replayManifestDigest", true, Ty::Sha256),
            F("providerProjectionVersion", true, Ty::One),
            F("providerReplayDigest", true, Ty::Sha256),
        ],
    )
    .map(|_| ())
}

// ----- tool dispatch / recovery -----

fn decode_tool_dispatch(value: Json) -> V<ToolDispatch> {
    let obj = value.into_object().map_err(|v| expected("an object", &v))?;
    let [protocol, operation_id, provider_tool_call_id, tool_name, canonical_args_hash, recovery_mode] =
        take_fields(
            obj,
            &[
                "protocol",
                "operationId",
                "providerToolCallId",
                "toolName",
                "canonicalArgsHash",
                "recoveryMode",
            ],
        )?;
    for (slot, key) in [
        (&protocol, "protocol"),
        (&operation_id, "operationId"),
        (&provider_tool_call_id, "providerToolCallId"),
        (&tool_name, "toolName"),
        (&canonical_args_hash, "canonicalArgsHash"),
        (&recovery_mode, "recoveryMode"),
    ] {
        if slot.is_none() {
            return Err(missing(key));
        }
    }
    enum_value(
        req(protocol, "protocol")?,
        "protocol",
        &[(TOOL_BOUNDARY_PROTOCOL_V1, ())],
    )?;
    Ok(ToolDispatch {
        operation_id: req_str(operation_id, "operationId")?,
        provider_tool_call_id: req_str(provider_tool_call_id, "providerToolCallId")?,
        tool_name: req_str(tool_name, "toolName")?,
        canonical_args_hash: req_str(canonical_args_hash, "canonicalArgsHash")?,
        recovery_mode: enum_value(
            req(recovery_mode, "recoveryMode")?,
            "recoveryMode",
            RECOVERY_MODES,
        )?,
        newer: Default::default(),
    })
}

const TOOL_RECONCILE_RESULT_FACT_KIND: &str = "maka.tool.reconcile_result";
const TOOL_RECOVERY_DECISION_FACT_KIND: &str = "maka.tool.recovery_decision";

fn check_distinct_nonempty_strings(v: &Json) -> V<()> {
    let Json::Array(items) = v else {
        return Err(expected("a non-empty array of strings", v));
    };
    if items.is_empty() {
        return Err(": must not be empty".into());
    }
    for (i, x) in items.iter().enumerate() {
        check_ty(x, Ty::NonEmptyStr).map_err(|e| at_index(i, e))?;
        if items[..i].iter().any(|y| y == x) {
            return Err(format!("[{i}]: duplicate id"));
        }
    }
    Ok(())
}

fn check_tool_recovery_envelope(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("kind", true, Ty::Any),
            F("version", true, Ty::One),
            F("payload", true, Ty::Any),
        ],
    )?;
    let kind = o.get("kind").and_then(Json::as_js_str);
    let payload = o.get("payload").unwrap_or(&NULL);
    let r = match kind {
        Some(k) if *k == TOOL_RECONCILE_RESULT_FACT_KIND => check_closed(
            payload,
            &[
                F("protocol", true, Ty::Enum(&["tool_reconcile_v1"])),
                F("operationId", true, Ty::NonEmptyStr),
                F(
                    "observation",
                    true,
                    Ty::Enum(&["matches_expected_state", "matches_prior_state", "diverged", "unreadable"]),
                ),
                F("observationSchema", true, Ty::Enum(&["state_identity_v1"])),
                F("observationDigest", true, Ty::Sha256),
            ],
        )
        .map(|_| ()),
        Some(k) if *k == TOOL_RECOVERY_DECISION_FACT_KIND => check_recovery_decision(payload),
        _ => {
            return Err(format!(
                "kind: expected one of {TOOL_RECONCILE_RESULT_FACT_KIND:?}, {TOOL_RECOVERY_DECISION_FACT_KIND:?}"
            ))
        }
    };
    r.map_err(|e| at("payload", e))
}

fn check_recovery_decision(v: &Json) -> V<()> {
    let Some(o) = v.as_object() else {
        return Err(expected("an object", v));
    };
    let base = [
        F("protocol", true, Ty::Enum(&["tool_recovery_v1"])),
        F("operationId", true, Ty::NonEmptyStr),
        F(
            "evidenceEventIds",
            true,
            Ty::Check(check_distinct_nonempty_strings),
        ),
        F("disposition", true, Ty::Enum(&["completed", "parked"])),
    ];
    let completed = matches!(o.get("disposition"), Some(Json::String(s)) if *s == "completed");
    let mut fields = base.to_vec();
    if completed {
        fields.push(F(
            "reasonCode",
            true,
            Ty::Enum(&["reconcile_matches_expected_state"]),
        ));
        fields.push(F("outcomeEventId", true, Ty::NonEmptyStr));
    } else {
        fields.push(F(
            "reasonCode",
            true,
            Ty::Enum(&[
                "reconcile_matches_prior_state",
                "reconcile_diverged",
                "reconcile_unreadable",
            ]),
        ));
    }
    check_closed(v, &fields).map(|_| ())
}

pub(super) fn decode_tool_recovery(value: Json) -> V<ToolRecovery> {
    check_tool_recovery_envelope(&value)?;
    let o = value
        .as_object()
        .ok_or_else(|| expected("an object", &value))?;
    let kind = o
        .get("kind")
        .and_then(Json::as_js_str)
        .cloned()
        .unwrap_or_default();
    let operation_id = o
        .get("payload")
        .and_then(Json::as_object)
        .and_then(|p| p.get("operationId"))
        .and_then(Json::as_js_str)
        .cloned()
        .unwrap_or_default();
    Ok(ToolRecovery {
        kind,
        operation_id,
        envelope: value,
    })
}

// ----- workspace fact -----

/// `/^<prefix>[a-f0-9]{32}$/u`.
fn identifier(prefix: &'static str) -> impl Fn(&Json) -> bool {
    move |v| {
        matches!(v, Json::String(s) if {
            let b = s.as_wtf8();
            b.starts_with(prefix.as_bytes()) && is_lower_hex(&b[prefix.len()..], 32)
        })
    }
}

fn check_identifier(v: &Json, key: &str, prefix: &'static str) -> V<()> {
    if identifier(prefix)(v) {
        Ok(())
    } else {
        Err(format!("{key}: expected {prefix}<32 lowercase hex>"))
    }
}

fn check_git_oid(o: &JsObject, key: &str, format: &JsStr) -> V<()> {
    let len = if *format == "sha1" { 40 } else { 64 };
    match o.get(key) {
        Some(Json::String(s)) if is_lower_hex(s.as_wtf8(), len) => Ok(()),
        _ => Err(format!(
            "{key}: expected a {len}-digit lowercase hex object id"
        )),
    }
}

const WORKSPACE_MATERIALIZATION_SEMANTICS_V1: &str = "git_tree_materialized_with_fixed_config_v1";

pub(super) fn check_workspace_fact(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("kind", true, Ty::Any),
            F("version", true, Ty::One),
            F("payload", true, Ty::Any),
        ],
    )?;
    let kind = o.get("kind").and_then(Json::as_js_str);
    let payload = o.get("payload").unwrap_or(&NULL);
    let r = match kind {
        Some(k) if *k == "maka.workspace.epoch_opened" => check_workspace_epoch_opened(payload),
        Some(k) if *k == "maka.workspace.baseline_accepted" => {
            check_workspace_baseline_accepted(payload)
        }
        _ => {
            return Err(
                "kind: expected one of \"maka.workspace.epoch_opened\", \"maka.workspace.baseline_accepted\""
                    .into(),
            )
        }
    };
    r.map_err(|e| at("payload", e))
}

fn check_workspace_epoch_opened(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("protocol", true, Ty::Enum(&["workspace_epoch_opened_v1"])),
            F("repositoryId", true, Ty::Any),
            F("workspaceId", true, Ty::Any),
            F("workspaceEpochId", true, Ty::Any),
            F("workspaceInstanceId", true, Ty::Any),
            F("initialWorkspaceVersionId", true, Ty::Any),
            F("mode", true, Ty::Enum(&["managed_worktree"])),
            F("objectFormat", true, Ty::Enum(&["sha1", "sha256"])),
            F("sourceCommitOid", true, Ty::Any),
            F("sourceTreeOid", true, Ty::Any),
            F("materializationProfileDigest", true, Ty::Sha256),
            F(
                "materializationSemantics",
                true,
                Ty::Enum(&[WORKSPACE_MATERIALIZATION_SEMANTICS_V1]),
            ),
            F("policyHash", true, Ty::Sha256),
        ],
    )?;
    let get = |k: &str| o.get(k).unwrap_or(&NULL);
    check_identifier(get("repositoryId"), "repositoryId", "repository_")?;
    check_identifier(get("workspaceId"), "workspaceId", "workspace_")?;
    check_identifier(get("workspaceEpochId"), "workspaceEpochId", "epoch_")?;
    check_identifier(
        get("workspaceInstanceId"),
        "workspaceInstanceId",
        "instance_",
    )?;
    check_identifier(
        get("initialWorkspaceVersionId"),
        "initialWorkspaceVersionId",
        "version_",
    )?;
    let format = o
        .get("objectFormat")
        .and_then(Json::as_js_str)
        .ok_or_else(|| missing("objectFormat"))?;
    check_git_oid(o, "sourceCommitOid", format)?;
    check_git_oid(o, "sourceTreeOid", format)
}

fn check_workspace_baseline_accepted(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F(
                "protocol",
                true,
                Ty::Enum(&["workspace_baseline_accepted_v1"]),
            ),
            F("repositoryId", true, Ty::Any),
            F("workspaceId", true, Ty::Any),
            F("workspaceEpochId", true, Ty::Any),
            F("workspaceVersionId", true, Ty::Any),
            F("objectFormat", true, Ty::Enum(&["sha1", "sha256"])),
            F("parents", true, Ty::Check(check_empty_array)),
            F("origin", true, Ty::Check(check_baseline_origin)),
            F("commitOid", true, Ty::Any),
            F("treeOid", true, Ty::Any),
            F("policyHash", true, Ty::Sha256),
            F("treeDeltaDigest", true, Ty::Sha256),
            F("changedFileCount", true, Ty::SafeIntNonNeg),
            F("deletedFileCount", true, Ty::Zero),
        ],
    )?;
    let get = |k: &str| o.get(k).unwrap_or(&NULL);
    check_identifier(get("repositoryId"), "repositoryId", "repository_")?;
    check_identifier(get("workspaceId"), "workspaceId", "workspace_")?;
    check_identifier(get("workspaceEpochId"), "workspaceEpochId", "epoch_")?;
    check_identifier(get("workspaceVersionId"), "workspaceVersionId", "version_")?;
    let format = o
        .get("objectFormat")
        .and_then(Json::as_js_str)
        .ok_or_else(|| missing("objectFormat"))?;
    check_git_oid(o, "commitOid", format)?;
    check_git_oid(o, "treeOid", format)
}

fn check_empty_array(v: &Json) -> V<()> {
    match v {
        Json::Array(items) if items.is_empty() => Ok(()),
        _ => Err(": expected an empty array".into()),
    }
}

fn check_baseline_origin(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("kind", true, Ty::Enum(&["baseline"])),
            F("epochOpenedEventId", true, Ty::Any),
        ],
    )?;
    let id = o.get("epochOpenedEventId").unwrap_or(&NULL);
    if js_to_string_is_event_id(id) {
        Ok(())
    } else {
        Err("epochOpenedEventId: String(value) must match [A-Za-z0-9_-]{1,128}".into())
    }
}

/// `/^[A-Za-z0-9_-]{1,128}$/u.test(String(value))`. `String()` of an array joins its
/// elements with commas (never allowed here), so only a chain of one-element arrays
/// can reach a scalar; `null` inside an array prints as the empty string.
fn js_to_string_is_event_id(v: &Json) -> bool {
    let ok = |b: &[u8]| {
        (1..=128).contains(&b.len())
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
    };
    let mut cur = v;
    let mut in_array = false;
    loop {
        match cur {
            Json::Array(items) if items.len() == 1 => {
                cur = &items[0];
                in_array = true;
            }
            Json::Array(_) => return false,
            Json::Null => return !in_array && ok(b"null"),
            Json::Bool(b) => return ok(if *b { b"true" } else { b"false" }),
            Json::Number(n) => {
                let s = if n.is_nan() {
                    "NaN".to_string()
                } else if n.is_infinite() {
                    if *n > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
                } else {
                    crate::json::js_number_to_string(*n)
                };
                return ok(s.as_bytes());
            }
            Json::String(s) => return ok(s.as_wtf8()),
            Json::Object(_) => return false,
        }
    }
}

// ----- token usage -----

const PREFIX_CHANGE_REASONS: &[&str] = &[
    "first_turn",
    "system_prompt_changed",
    "tool_schema_changed",
    "provider_options_changed",
    "model_or_provider_changed",
    "history_projection_changed",
    "stable",
    "unknown",
];

pub(super) const TOKEN_USAGE_FIELDS: Fields = Fields::new(&[
    F("input", true, Ty::Finite),
    F("output", true, Ty::Finite),
    F("cacheHitInput", false, Ty::Finite),
    F("cacheMissInput", false, Ty::Finite),
    F("cacheWriteInput", false, Ty::Finite),
    F(
        "cacheMissInputSource",
        false,
        Ty::Enum(&["explicit", "derived"]),
    ),
    F("reasoning", false, Ty::Finite),
    F("total", false, Ty::Finite),
    F("rawFinishReason", false, Ty::Str),
    F("runtimeSteps", false, Ty::Finite),
    F("cacheRead", false, Ty::Finite),
    F("cacheCreation", false, Ty::Finite),
    F("costUsd", false, Ty::Finite),
    F("systemPromptHash", false, Ty::Str),
    F("contextRemaining", false, Ty::Finite),
    F("prefixHash", false, Ty::Str),
    F("prefixChangeReason", false, Ty::Enum(PREFIX_CHANGE_REASONS)),
    F("requestShapeHash", false, Ty::Str),
    F(
        "requestShapeChangeReason",
        false,
        Ty::Enum(PREFIX_CHANGE_REASONS),
    ),
    F("promptSegments", false, Ty::Records(&PROMPT_SEGMENT_FIELDS)),
    F("contextBudget", false, Ty::Record(&CONTEXT_BUDGET_FIELDS)),
    F("providerRequestTraceId", false, Ty::Str),
]);

pub(super) fn check_token_usage(v: &Json) -> V<()> {
    check_closed(v, TOKEN_USAGE_FIELDS.list).map(|_| ())
}

const PROMPT_SEGMENT_FIELDS: Fields = Fields::new(&[
    F(
        "kind",
        true,
        Ty::Enum(&[
            "system_prompt",
            "tool_schema",
            "prior_history",
            "current_user",
            "turn_tail",
        ]),
    ),
    F("chars", true, Ty::Finite),
    F("estimatedTokens", true, Ty::Finite),
    F("messageCount", false, Ty::Finite),
    F("eventCount", false, Ty::Finite),
    F("toolCount", false, Ty::Finite),
]);

fn check_compaction_decision(v: &Json) -> V<()> {
    const FIELDS: &[F] = &[
        F("stage", true, Ty::Enum(&["priorReplay", "activeStep"])),
        F(
            "sourceKind",
            true,
            Ty::Enum(&["runtimeEvents", "providerMessages"]),
        ),
        F(
            "decision",
            true,
            Ty::Enum(&["unchanged", "replaced", "failedOpen"]),
        ),
        F("phase", false, Ty::Enum(&["pre_turn", "mid_turn"])),
        F("boundaryKind", false, Ty::Str),
        F("boundaryIds", false, Ty::StrArray),
        F("coveredTurns", false, Ty::Finite),
        F("coveredRuntimeEvents", false, Ty::Finite),
        F("coveredToolCalls", false, Ty::Finite),
        F("coveredProviderMessages", false, Ty::Finite),
        F("coverageHashes", false, Ty::StrArray),
        F("estimatedTokensBefore", false, Ty::Finite),
        F("estimatedTokensAfter", false, Ty::Finite),
        F("estimatedTokensSaved", false, Ty::Finite),
        F("candidateEstimatedTokens", false, Ty::Finite),
        F("preservedHeadEstimatedTokens", false, Ty::Finite),
        F("preservedTailEstimatedTokens", false, Ty::Finite),
        F("acceptedProjectionEstimatedTokens", false, Ty::Finite),
        F("compactCallInputTokens", false, Ty::Finite),
        F("compactCallOutputTokens", false, Ty::Finite),
        F("compactCallCacheReadInputTokens", false, Ty::Finite),
        F("compactCallCacheWriteInputTokens", false, Ty::Finite),
        F("compactCallTotalTokens", false, Ty::Finite),
        F("reason", false, Ty::Str),
        F("failOpenReason", false, Ty::Str),
        F("skippedReasonCounts", false, Ty::StrNumRecord),
        F("validationReasonCounts", false, Ty::StrNumRecord),
    ];
    check_closed(v, FIELDS).map(|_| ())
}

const CONTEXT_BUDGET_FIELDS: Fields = Fields::new(&[
    F("enabled", true, Ty::Bool),
    F("estimatedTokensBefore", true, Ty::Finite),
    F("estimatedTokensAfter", true, Ty::Finite),
    F("keptTurns", true, Ty::Finite),
    F("droppedTurns", true, Ty::Finite),
    F("keptEvents", true, Ty::Finite),
    F("droppedEvents", true, Ty::Finite),
    F("policyName", false, Ty::Str),
    F("maxHistoryEstimatedTokens", false, Ty::Finite),
    F("maxHistoryTurns", false, Ty::Finite),
    F("prunedToolResults", false, Ty::Finite),
    F("prunedToolResultEstimatedTokensBefore", false, Ty::Finite),
    F("prunedToolResultEstimatedTokensAfter", false, Ty::Finite),
    F("archivePlaceholders", false, Ty::Finite),
    F("archiveWriteFailures", false, Ty::Finite),
    F("unarchivedToolResults", false, Ty::Finite),
    F("archivePlaceholderReasonCounts", false, Ty::StrNumRecord),
    F("activePrunedToolResults", false, Ty::Finite),
    F("activeSupersededToolResults", false, Ty::Finite),
    F("activeDuplicateToolResults", false, Ty::Finite),
    F("activeArchiveFailures", false, Ty::Finite),
    F("activeEstimatedTokensSaved", false, Ty::Finite),
    F("semanticCompactEnabled", false, Ty::Bool),
    F(
        "semanticCompactMode",
        false,
        Ty::Enum(&["off", "validate_only", "prepare_step_dry_run", "replace"]),
    ),
    F(
        "compactionDecisions",
        false,
        Ty::Check(|x| check_array_of(x, check_compaction_decision)),
    ),
    F(
        "archiveRetrievalMode",
        false,
        Ty::Enum(&["eager", "history_search_gated"]),
    ),
    F("archiveRetrievalEligibleTurns", false, Ty::Finite),
    F("retrievedArchiveToolResults", false, Ty::Finite),
    F("retrievedArchiveEstimatedTokens", false, Ty::Finite),
    F("archiveRetrievalSkipped", false, Ty::Finite),
    F("archiveRetrievalFailures", false, Ty::Finite),
    F(
        "archiveRetrievalSkippedReasonCounts",
        false,
        Ty::StrNumRecord,
    ),
    F(
        "archiveRetrievalFailureReasonCounts",
        false,
        Ty::StrNumRecord,
    ),
    F("historySearchMatches", false, Ty::Finite),
    F("historyAroundRetrievedEvents", false, Ty::Finite),
    F("historyAroundEstimatedTokens", false, Ty::Finite),
    F("historyAroundSkippedEvents", false, Ty::Finite),
    F("synthesisCacheEnabled", false, Ty::Bool),
    F(
        "synthesisCacheMode",
        false,
        Ty::Enum(&[
            "off",
            "lookup",
            "read_write",
            "write_only",
            "fallback_archive_retrieval",
        ]),
    ),
    F("synthesisCacheBlocksLoaded", false, Ty::Finite),
    F("synthesisCacheLoadSkipped", false, Ty::Finite),
    F(
        "synthesisCacheLoadSkippedReasonCounts",
        false,
        Ty::StrNumRecord,
    ),
    F("synthesisCacheLoadFailures", false, Ty::Finite),
    F("synthesisCacheBlocksAvailable", false, Ty::Finite),
    F("synthesisCacheBlocksSelected", false, Ty::Finite),
    F("synthesisCacheBlockIds", false, Ty::StrArray),
    F("synthesisCacheEstimatedTokens", false, Ty::Finite),
    F("synthesisCacheSkipped", false, Ty::Finite),
    F("synthesisCacheSkippedReasonCounts", false, Ty::StrNumRecord),
    F("synthesisCacheInvalidated", false, Ty::Finite),
    F(
        "synthesisCacheInvalidationReasonCounts",
        false,
        Ty::StrNumRecord,
    ),
    F("synthesisCacheWritesAttempted", false, Ty::Finite),
    F("synthesisCacheBlocksWritten", false, Ty::Finite),
    F("synthesisCacheWrittenBlockIds", false, Ty::StrArray),
    F("synthesisCacheWriteEstimatedTokens", false, Ty::Finite),
    F("synthesisCacheWriteSkipped", false, Ty::Finite),
    F(
        "synthesisCacheWriteSkippedReasonCounts",
        false,
        Ty::StrNumRecord,
    ),
    F("synthesisCacheWriteFailures", false, Ty::Finite),
    F("synthesisCacheEvicted", false, Ty::Finite),
    F(
        "synthesisCacheEvictionReasonCounts",
        false,
        Ty::StrNumRecord,
    ),
    F("historyCompactEnabled", false, Ty::Bool),
    F(
        "historyCompactMode",
        false,
        Ty::Enum(&["off", "deterministic", "lookup", "read_write"]),
    ),
    F("historyCompactBlocksLoaded", false, Ty::Finite),
    F("historyCompactLoadSkipped", false, Ty::Finite),
    F(
        "historyCompactLoadSkippedReasonCounts",
        false,
        Ty::StrNumRecord,
    ),
    F("historyCompactLoadFailures", false, Ty::Finite),
    F("historyCompactBlocksAvailable", false, Ty::Finite),
    F("historyCompactBlocksSelected", false, Ty::Finite),
    F("historyCompactBlockIds", false, Ty::StrArray),
    F("historyCompactedTurns", false, Ty::Finite),
    F("historyCompactedEvents", false, Ty::Finite),
    F("historyCompactedEstimatedTokensBefore", false, Ty::Finite),
    F("historyCompactedEstimatedTokensAfter", false, Ty::Finite),
    F("historyCompactSkipped", false, Ty::Finite),
    F("historyCompactSkippedReasonCounts", false, Ty::StrNumRecord),
    F("historyCompactCoverageHashes", false, Ty::StrArray),
    F("historyCompactWritesAttempted", false, Ty::Finite),
    F("historyCompactBlocksWritten", false, Ty::Finite),
    F("historyCompactWrittenBlockIds", false, Ty::StrArray),
    F("historyCompactWriteEstimatedTokens", false, Ty::Finite),
    F("historyCompactWriteSkipped", false, Ty::Finite),
    F(
        "historyCompactWriteSkippedReasonCounts",
        false,
        Ty::StrNumRecord,
    ),
    F("historyCompactWriteFailures", false, Ty::Finite),
    F("highWaterName", false, Ty::Str),
    F("highWaterSeq", false, Ty::Finite),
    F(
        "highWaterReason",
        false,
        Ty::Enum(&[
            "archive_prune",
            "history_search_gated_retrieval",
            "synthesis_cache_write",
            "synthesis_cache_select",
            "history_compact",
            "manual_reset",
            "system_change",
            "tools_change",
            "log_rewrite",
        ]),
    ),
    F("highWaterRequestShapeHashBefore", false, Ty::Str),
    F("highWaterRequestShapeHashAfter", false, Ty::Str),
    F("historyRewriteVersion", false, Ty::Str),
    F("historyRewriteResetReason", false, Ty::Str),
    F("historyRewriteGate", false, Ty::Str),
]);

// ----- additional permission profile -----

const MAX_ADDITIONAL_FILESYSTEM_ENTRIES: usize = 32;
const MAX_ADDITIONAL_PERMISSION_PATH_UNITS: usize = 4096;
const MAX_ADDITIONAL_PERMISSION_SERIALIZED_BYTES: usize = 64 * 1024;

struct FsEntry<'a> {
    path: &'a JsStr,
    write: bool,
    subtree: bool,
}

fn has_only_keys(o: &JsObject, allowed: &[&str]) -> bool {
    o.keys().all(|k| allowed.iter().any(|a| *k == **a))
}

/// Maka's `validateAdditionalPermissionProfile(...).ok`.
fn check_additional_permission_profile(v: &Json) -> V<()> {
    let Some(o) = v.as_object() else {
        return Err(expected("an object", v));
    };
    if !has_only_keys(o, &["fileSystem", "network"]) {
        return Err(": unsupported key (allowed: fileSystem, network)".into());
    }
    let mut entries: Vec<FsEntry> = Vec::new();
    if let Some(fs) = o.get("fileSystem") {
        let items = match fs.as_object() {
            Some(f) if has_only_keys(f, &["entries"]) => match f.get("entries") {
                Some(Json::Array(items)) => items,
                _ => return Err("fileSystem: must contain an entries array".into()),
            },
            _ => return Err("fileSystem: must contain an entries array".into()),
        };
        if items.len() > MAX_ADDITIONAL_FILESYSTEM_ENTRIES {
            return Err(format!(
                "fileSystem.entries: at most {MAX_ADDITIONAL_FILESYSTEM_ENTRIES} entries"
            ));
        }
        for (i, c) in items.iter().enumerate() {
            let here = |m: &str| format!("fileSystem.entries[{i}]: {m}");
            let Some(c) = c
                .as_object()
                .filter(|c| has_only_keys(c, &["path", "access", "scope"]))
            else {
                return Err(here("unsupported fields"));
            };
            let path = c.get("path").and_then(Json::as_js_str);
            let access = c.get("access").and_then(Json::as_js_str);
            let scope = c.get("scope").and_then(Json::as_js_str);
            let (Some(path), Some(access), Some(scope)) = (path, access, scope) else {
                return Err(here("must contain path, access and scope"));
            };
            if !(*access == "read" || *access == "write")
                || !(*scope == "exact" || *scope == "subtree")
            {
                return Err(here("must contain path, access and scope"));
            }
            let units: Vec<u16> = path.utf16().collect();
            if !is_normalized_absolute_path(&units) {
                return Err(here("path must be a normalized absolute path"));
            }
            if units.len() > MAX_ADDITIONAL_PERMISSION_PATH_UNITS {
                return Err(here("path exceeds the length limit"));
            }
            // A normalized path has no trailing separators to trim.
            entries.push(FsEntry {
                path,
                write: *access == "write",
                subtree: *scope == "subtree",
            });
        }
    }
    let network = match o.get("network") {
        None => false,
        Some(n) => match n.as_object() {
            Some(n)
                if has_only_keys(n, &["enabled"])
                    && matches!(n.get("enabled"), Some(Json::Bool(true))) =>
            {
                true
            }
            _ => return Err("network: only supports enabled: true".into()),
        },
    };
    if entries.is_empty() && !network {
        return Err(": must contain at least one permission".into());
    }
    let compacted = compact_entries(entries);
    // {"fileSystem":{"entries":[{"path":…,"access":…,"scope":…},…]},"network":{"enabled":true}}
    let mut size = 2;
    if !compacted.is_empty() {
        size += "\"fileSystem\":{\"entries\":[]}".len();
        for (i, e) in compacted.iter().enumerate() {
            size += usize::from(i > 0);
            size += "{\"path\":,\"access\":,\"scope\":}".len() + json_string_bytes(e.path);
            size += if e.write { 7 } else { 6 };
            size += if e.subtree { 9 } else { 7 };
        }
    }
    if network {
        size += usize::from(!compacted.is_empty()) + "\"network\":{\"enabled\":true}".len();
    }
    if size > MAX_ADDITIONAL_PERMISSION_SERIALIZED_BYTES {
        return Err(": exceeds the serialized size limit".into());
    }
    Ok(())
}

/// Bytes of `JSON.stringify(s)` in UTF-8 (quotes included).
fn json_string_bytes(s: &JsStr) -> usize {
    2 + s
        .code_points()
        .map(|c| match c {
            0x22 | 0x5c | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2,
            0..=0x1f => 6,
            0xd800..=0xdfff => 6,
            0x20..=0x7f => 1,
            0x80..=0x7ff => 2,
            0x800..=0xffff => 3,
            _ => 4,
        })
        .sum::<usize>()
}

fn is_drive_path(p: &[u16]) -> bool {
    p.len() >= 3
        && (p[0] < 0x80 && (p[0] as u8).is_ascii_alphabetic())
        && p[1] == u16::from(b':')
        && p[2] == u16::from(b'\\')
}

/// Maka's `isNormalizedAbsolutePath`, on UTF-16 units.
fn is_normalized_absolute_path(p: &[u16]) -> bool {
    const SLASH: u16 = b'/' as u16;
    const BACKSLASH: u16 = b'\\' as u16;
    const COLON: u16 = b':' as u16;
    let bad_segment =
        |s: &[u16]| s.is_empty() || s == [b'.' as u16] || s == [b'.' as u16, b'.' as u16];
    if p.is_empty() || p.contains(&0) {
        return false;
    }
    if is_drive_path(p) {
        if p[2..].contains(&COLON) || p.contains(&SLASH) {
            return false;
        }
        if p.len() > 3 && p.last() == Some(&BACKSLASH) {
            return false;
        }
        if p.len() == 3 {
            return true;
        }
        return !p[3..].split(|c| *c == BACKSLASH).any(bad_segment);
    }
    if p[0] != SLASH || p.contains(&BACKSLASH) {
        return false;
    }
    if p.len() > 1 && p.last() == Some(&SLASH) {
        return false;
    }
    !p.split(|c| *c == SLASH).skip(1).any(bad_segment)
}

/// `comparablePath`: drive paths lower-cased (the paths here are already trimmed).
fn comparable_path(path: &JsStr) -> Vec<u16> {
    let units: Vec<u16> = path.utf16().collect();
    if !is_drive_path(&units) {
        return units;
    }
    match path.as_str() {
        Some(s) => s.to_lowercase().encode_utf16().collect(),
        None => path
            .code_points()
            .flat_map(|c| match char::from_u32(c) {
                Some(ch) => ch
                    .to_lowercase()
                    .flat_map(|l| {
                        let mut buf = [0u16; 2];
                        l.encode_utf16(&mut buf).to_vec()
                    })
                    .collect::<Vec<u16>>(),
                None => vec![c as u16],
            })
            .collect(),
    }
}

fn path_within_root(path: &JsStr, root: &JsStr) -> bool {
    let p = comparable_path(path);
    let r = comparable_path(root);
    let p_drive = is_drive_path(&path.utf16().collect::<Vec<_>>());
    let r_drive = is_drive_path(&root.utf16().collect::<Vec<_>>());
    if p.is_empty()
        || r.is_empty()
        || !is_normalized_absolute_path(&p)
        || !is_normalized_absolute_path(&r)
        || p_drive != r_drive
    {
        return false;
    }
    if r == [b'/' as u16] {
        return p.first() == Some(&(b'/' as u16));
    }
    let sep = if r_drive { b'\\' as u16 } else { b'/' as u16 };
    let mut prefix = r.clone();
    if prefix.last() != Some(&sep) {
        prefix.push(sep);
    }
    p == r || p.starts_with(&prefix)
}

fn same_path(a: &JsStr, b: &JsStr) -> bool {
    let da = is_drive_path(&a.utf16().collect::<Vec<_>>());
    let db = is_drive_path(&b.utf16().collect::<Vec<_>>());
    da == db && comparable_path(a) == comparable_path(b)
}

fn permission_covers(existing: &FsEntry, candidate: &FsEntry) -> bool {
    if candidate.write && !existing.write {
        return false;
    }
    if !existing.subtree {
        return !candidate.subtree && same_path(existing.path, candidate.path);
    }
    path_within_root(candidate.path, existing.path)
}

/// Maka's `compactAdditionalFileSystemPermissions`, for its size only: the entries
/// that no other entry covers. (Maka orders paths with `localeCompare`; this uses
/// UTF-16 order, which can only pick a different one of two entries that differ in
/// the letter case of a drive path.)
fn compact_entries(mut entries: Vec<FsEntry>) -> Vec<FsEntry> {
    entries.sort_by(|a, b| {
        a.path
            .cmp_utf16(b.path)
            .then(b.subtree.cmp(&a.subtree))
            .then(b.write.cmp(&a.write))
    });
    let mut compacted: Vec<FsEntry> = Vec::new();
    for entry in entries {
        if compacted.iter().any(|e| permission_covers(e, &entry)) {
            continue;
        }
        compacted.retain(|e| !permission_covers(&entry, e));
        compacted.push(entry);
    }
    compacted
}

// ---------------------------------------------------------------------------------
// Refs
// ---------------------------------------------------------------------------------

pub(super) const REF_KEYS: [&str; 15] = [
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
    use super::*;
    use crate::json::parse;

    const BASE: &str = r#"{"id":"e1","invocationId":"inv","runId":"inv","sessionId":"s","turnId":"t",
        "ts":1,"partial":false,"role":"user","author":"user",
        "content":{"kind":"text","text":"hi /skill:demo @src/a.rs"}}"#;

    fn base() -> Json {
        parse(BASE).expect("base parses")
    }

    /// Sets `path` (object keys, created as needed) to the JSON `value`.
    fn set(v: &mut Json, path: &[&str], value: &str) {
        let mut cur = v;
        for (i, key) in path.iter().enumerate() {
            let Json::Object(o) = cur else {
                panic!("not an object at {key}")
            };
            if i + 1 == path.len() {
                o.insert(JsStr::new(key), parse(value).expect("value parses"));
                return;
            }
            if o.get(key).is_none() {
                o.insert(JsStr::new(key), Json::Object(JsObject::new()));
            }
            cur = o.get_mut(key).expect("just inserted");
        }
    }

    fn remove(v: &mut Json, path: &[&str]) {
        let mut cur = v;
        for key in &path[..path.len() - 1] {
            cur = cur.as_object_mut_for_test(key);
        }
        if let Json::Object(o) = cur {
            o.remove(path[path.len() - 1]);
        }
    }

    trait Nav {
        fn as_object_mut_for_test(&mut self, key: &str) -> &mut Json;
    }
    impl Nav for Json {
        fn as_object_mut_for_test(&mut self, key: &str) -> &mut Json {
            match self {
                Json::Object(o) => o.get_mut(key).expect("key present"),
                _ => panic!("not an object"),
            }
        }
    }

    fn with(path: &[&str], value: &str) -> Result<RuntimeEvent, DecodeError> {
        let mut v = base();
        set(&mut v, path, value);
        decode_event(v)
    }

    fn ok(path: &[&str], value: &str) -> RuntimeEvent {
        with(path, value).unwrap_or_else(|e| panic!("{path:?} = {value}: {e}"))
    }

    /// Rejected, and the detail starts with `detail`.
    fn rejects(path: &[&str], value: &str, detail: &str) {
        match with(path, value) {
            Ok(_) => panic!("{path:?} = {value} was accepted"),
            Err(DecodeError::Schema(d)) => {
                assert!(
                    d.starts_with(detail),
                    "{path:?} = {value}: detail {d:?}, want {detail:?}"
                )
            }
            Err(e) => panic!("{path:?} = {value}: {e}"),
        }
    }

    fn text_fields(e: &RuntimeEvent) -> &JsObject {
        match &e.content {
            Some(Content::Text { fields, .. }) => fields,
            other => panic!("not text: {other:?}"),
        }
    }

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

    #[test]
    fn utf8_byte_limits() {
        let accepted = |id: String| format!(r#"{{"requestId":"{id}"}}"#);
        for key in ["permissionAnswerAccepted", "userQuestionAnswerAccepted"] {
            ok(&["actions", key], &accepted("x".repeat(256)));
            rejects(
                &["actions", key],
                &accepted("x".repeat(257)),
                &format!("actions.{key}.requestId"),
            );
            ok(&["actions", key], &accepted("€".repeat(85)));
            rejects(
                &["actions", key],
                &accepted("€".repeat(86)),
                &format!("actions.{key}.requestId"),
            );
            // A lone surrogate counts as U+FFFD: three bytes.
            ok(&["actions", key], &accepted("\\ud800".repeat(85)));
            rejects(
                &["actions", key],
                &accepted("\\ud800".repeat(86)),
                &format!("actions.{key}.requestId"),
            );
            // A surrogate pair is one four-byte character.
            ok(&["actions", key], &accepted("\\ud83d\\ude00".repeat(64)));
            rejects(
                &["actions", key],
                &accepted(format!("{}x", "\\ud83d\\ude00".repeat(64))),
                "actions",
            );
            rejects(
                &["actions", key],
                &accepted(String::new()),
                &format!("actions.{key}.requestId"),
            );
        }
        let decision =
            |name: String| format!(r#"{{"requestId":"","decision":"allow","toolName":"{name}"}}"#);
        ok(
            &["actions", "permissionDecision"],
            &decision("é".repeat(128)),
        );
        rejects(
            &["actions", "permissionDecision"],
            &decision(format!("{}a", "é".repeat(128))),
            "actions.permissionDecision.toolName",
        );
        rejects(
            &["actions", "permissionDecision"],
            &decision(String::new()),
            "actions.permissionDecision.toolName",
        );
    }

    #[test]
    fn permission_closure_must_be_alone() {
        let closure = r#"{"requestId":"r","reason":"timed_out"}"#;
        let e = ok(&["actions", "permissionClosureAccepted"], closure);
        assert_eq!(
            e.actions.unwrap().present_keys(),
            vec!["permissionClosureAccepted"]
        );
        let mut v = base();
        set(&mut v, &["actions", "permissionClosureAccepted"], closure);
        set(&mut v, &["actions", "stateDelta"], "{}");
        assert_eq!(
            decode_event(v).unwrap_err(),
            DecodeError::Schema(
                "actions: permissionClosureAccepted must be the only key of actions".into()
            )
        );
        rejects(
            &["actions", "permissionClosureAccepted"],
            r#"{"requestId":"r","reason":"other"}"#,
            "actions.permissionClosureAccepted.reason",
        );
    }

    #[test]
    fn text_content_is_normalized() {
        let e = ok(&["content", "displayText"], r#""hi /skill:demo @src/a.rs""#);
        assert!(text_fields(&e).get("displayText").is_none());
        let e = ok(&["content", "displayText"], r#""shown""#);
        assert_eq!(
            text_fields(&e).get("displayText").and_then(Json::as_str),
            Some("shown")
        );

        let e = ok(&["content", "attachments"], "[]");
        assert!(text_fields(&e).get("attachments").is_none());
        let e = ok(&["content", "quotes"], "[]");
        assert!(text_fields(&e).get("quotes").is_none());
        let e = ok(&["content", "inlineReferences"], "[]");
        assert!(text_fields(&e).get("inlineReferences").is_some());

        let e = ok(&["content", "providerOptions"], r#"{"openai":{"x":1}}"#);
        assert!(text_fields(&e).get("providerOptions").is_none());
        rejects(
            &["content", "providerOptions"],
            "[]",
            "content.providerOptions",
        );

        let e = ok(
            &["content", "origin"],
            r#"{"automationId":"a","kind":"automation"}"#,
        );
        let origin = text_fields(&e)
            .get("origin")
            .and_then(Json::as_object)
            .unwrap();
        assert_eq!(
            origin.get("kind").and_then(Json::as_str),
            Some("legacy_automation")
        );
        assert_eq!(origin.get("automationId").and_then(Json::as_str), Some("a"));
        ok(
            &["content", "origin"],
            r#"{"kind":"agent_graph","graphId":"g","wakeId":"w","attemptId":"a"}"#,
        );
        rejects(
            &["content", "origin"],
            r#"{"kind":"automation","goalId":"g"}"#,
            "content.origin",
        );
        rejects(
            &["content", "origin"],
            r#"{"kind":"goal","goalId":1}"#,
            "content.origin",
        );

        let e = ok(&["content", "steering"], "true");
        assert!(matches!(
            e.content,
            Some(Content::Text { steering: true, .. })
        ));
        assert_eq!(text_fields(&e).get("steering"), Some(&Json::Bool(true)));
        rejects(
            &["content", "steering"],
            "false",
            "content.steering: must be true",
        );

        let attachment = r#"[{"kind":"pdf","name":"","mimeType":"","bytes":-0,"ref":{"kind":"external_file","absolutePath":""}}]"#;
        let e = ok(&["content", "attachments"], attachment);
        let bytes = text_fields(&e)
            .get("attachments")
            .and_then(|a| a.as_array())
            .unwrap()[0]
            .as_object()
            .unwrap()
            .get("bytes")
            .and_then(Json::as_f64)
            .unwrap();
        assert!(bytes == 0.0 && bytes.is_sign_positive());

        // Thinking content with kind changed to text decodes; its fields keep kind.
        let e = ok(&["content"], r#"{"kind":"text","text":"x"}"#);
        assert_eq!(
            text_fields(&e).get("kind").and_then(Json::as_str),
            Some("text")
        );
    }

    #[test]
    fn inline_references() {
        let r = |kind: &str, value: &str, start: &str| {
            format!(r#"{{"kind":"{kind}","value":"{value}","label":"l","start":{start}}}"#)
        };
        let skill = r("skill", "/skill:demo", "3");
        let file = r("workspace_file", "@src/a.rs", "15");
        ok(
            &["content", "inlineReferences"],
            &format!("[{skill},{file}]"),
        );
        rejects(
            &["content", "inlineReferences"],
            &format!("[{file},{skill}]"),
            "content.inlineReferences[1].start: overlaps",
        );
        rejects(
            &["content", "inlineReferences"],
            &format!("[{}]", r("skill", "/skill:demo", "4")),
            "content.inlineReferences[0]: value does not occur",
        );
        rejects(
            &["content", "inlineReferences"],
            &format!("[{}]", r("skill", "/skill:de mo", "3")),
            "content.inlineReferences[0].value",
        );
        rejects(
            &["content", "inlineReferences"],
            &format!("[{}]", r("workspace_file", "@../a", "0")),
            "content.inlineReferences[0].value",
        );
        rejects(
            &["content", "inlineReferences"],
            &format!("[{}]", r("skill", "/skill:demo", "3.5")),
            "content.inlineReferences[0].start",
        );
        // Offsets are UTF-16 units and refer to displayText when present.
        let mut v = base();
        set(&mut v, &["content", "displayText"], r#""😀 /skill:demo""#);
        set(
            &mut v,
            &["content", "inlineReferences"],
            &format!("[{}]", r("skill", "/skill:demo", "3")),
        );
        decode_event(v).expect("emoji is two UTF-16 units");
        let refs: Vec<String> = (0..33).map(|_| r("skill", "/skill:demo", "3")).collect();
        rejects(
            &["content", "inlineReferences"],
            &format!("[{}]", refs.join(",")),
            "content.inlineReferences: at most 32",
        );
    }

    #[test]
    fn reserved_facts() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let decision = |extra: &str, ids: &str| {
            format!(
                r#"{{"kind":"maka.tool.recovery_decision","version":1,"payload":{{"protocol":"tool_recovery_v1","operationId":"op","evidenceEventIds":{ids}{extra}}}}}"#
            )
        };
        let completed = r#","disposition":"completed","reasonCode":"reconcile_matches_expected_state","outcomeEventId":"o""#;
        let e = ok(
            &["actions", "toolRecovery"],
            &decision(completed, r#"["a","b"]"#),
        );
        let r = e.actions.unwrap().tool_recovery.unwrap();
        assert_eq!(
            (r.kind.as_str(), r.operation_id.as_str()),
            (Some("maka.tool.recovery_decision"), Some("op"))
        );
        rejects(
            &["actions", "toolRecovery"],
            &decision(completed, r#"["a","a"]"#),
            "actions.toolRecovery.payload.evidenceEventIds[1]: duplicate",
        );
        rejects(
            &["actions", "toolRecovery"],
            &decision(completed, "[]"),
            "actions.toolRecovery.payload.evidenceEventIds",
        );
        let parked = r#","disposition":"parked","reasonCode":"reconcile_diverged""#;
        ok(&["actions", "toolRecovery"], &decision(parked, r#"["a"]"#));
        rejects(
            &["actions", "toolRecovery"],
            &decision(&format!(r#"{parked},"outcomeEventId":"o""#), r#"["a"]"#),
            "actions.toolRecovery.payload: unknown key",
        );

        let cont = |hw: &str| {
            format!(
                r#"{{"protocol":"continuation_start_v2","provenance":"claim_repair","claimId":"c","boundaryDigest":"{digest}","immediateSource":{{"sessionId":"s","invocationId":"i","runId":"r","turnId":"t","highWater":{hw},"prefixDigest":"{digest}"}},"replayManifestDigest":"{digest}","providerProjectionVersion":1,"providerReplayDigest":"{digest}"}}"#
            )
        };
        ok(&["actions", "continuationStart"], &cont("2"));
        rejects(
            &["actions", "continuationStart"],
            &cont("0"),
            "actions.continuationStart.immediateSource.highWater",
        );

        let hex = |n: usize| "0".repeat(n);
        let baseline = |epoch_event: &str| {
            format!(
                r#"{{"kind":"maka.workspace.baseline_accepted","version":1,"payload":{{"protocol":"workspace_baseline_accepted_v1","repositoryId":"repository_{h32}","workspaceId":"workspace_{h32}","workspaceEpochId":"epoch_{h32}","workspaceVersionId":"version_{h32}","objectFormat":"sha1","parents":[],"origin":{{"kind":"baseline","epochOpenedEventId":{epoch_event}}},"commitOid":"{h40}","treeOid":"{h40}","policyHash":"{digest}","treeDeltaDigest":"{digest}","changedFileCount":0,"deletedFileCount":0}}}}"#,
                h32 = hex(32),
                h40 = hex(40),
            )
        };
        // `String(value)` is what the pattern sees.
        for good in [
            r#""ev_1""#,
            "123",
            "-5",
            "true",
            "null",
            r#"["x"]"#,
            r#"[["x"]]"#,
            "1e-7",
        ] {
            ok(&["actions", "workspaceFact"], &baseline(good));
        }
        for bad in [
            r#""a.b""#,
            "{}",
            "[]",
            "[null]",
            r#"["a","b"]"#,
            "1.5",
            "1e21",
            r#""""#,
        ] {
            rejects(
                &["actions", "workspaceFact"],
                &baseline(bad),
                "actions.workspaceFact.payload.origin.epochOpenedEventId",
            );
        }
        let epoch = format!(
            r#"{{"kind":"maka.workspace.epoch_opened","version":1,"payload":{{"protocol":"workspace_epoch_opened_v1","repositoryId":"repository_{h32}","workspaceId":"workspace_{h32}","workspaceEpochId":"epoch_{h32}","workspaceInstanceId":"instance_{h32}","initialWorkspaceVersionId":"version_{h32}","mode":"managed_worktree","objectFormat":"sha256","sourceCommitOid":"{h64}","sourceTreeOid":"{h64}","materializationProfileDigest":"{digest}","materializationSemantics":"git_tree_materialized_with_fixed_config_v1","policyHash":"{digest}"}}}}"#,
            h32 = hex(32),
            h64 = hex(64),
        );
        ok(&["actions", "workspaceFact"], &epoch);
        rejects(
            &["actions", "workspaceFact"],
            &epoch.replace(&hex(64), &hex(40)),
            "actions.workspaceFact.payload.sourceCommitOid",
        );
    }

    fn permission(kind_fields: &str) -> String {
        format!(
            r#"{{"requestId":"r","toolUseId":"u","toolName":"Bash","category":"shell_unsafe",{kind_fields}}}"#
        )
    }

    fn additional(profile: &str) -> String {
        permission(&format!(
            r#""kind":"additional_permissions","reason":"additional_permissions","additionalPermissions":{profile},"cwd":"/","justification":"j","intentHash":"h","permissionsHash":"h","risk":{{"outsideWorkspace":true,"protectedMetadata":false,"networkEnabled":false}},"alsoApprovesToolExecution":false,"availableDecisions":["allow_once","deny"]"#
        ))
    }

    #[test]
    fn permission_requests() {
        let pr = ["actions", "permissionRequest"];
        ok(
            &pr,
            &permission(
                r#""kind":"tool_permission","reason":"custom","args":null,"rememberForTurnAllowed":true"#,
            ),
        );
        rejects(
            &pr,
            &permission(
                r#""kind":"tool_permission","reason":"custom","rememberForTurnAllowed":true"#,
            ),
            "actions.permissionRequest.args: missing",
        );
        rejects(
            &pr,
            &permission(r#""kind":"other""#),
            "actions.permissionRequest.kind",
        );
        let escalation = r#""kind":"sandbox_escalation","reason":"sandbox_escalation","command":"ls","cwd":"/","justification":"j","intentHash":"h","commandHash":"h","trigger":"proactive","risk":{"unsandboxedExecution":true,"unrestrictedFileSystem":true,"unrestrictedNetwork":true,"protectedMetadataExposed":true},"alsoApprovesToolExecution":true,"availableDecisions":["allow_once","deny"]"#;
        ok(&pr, &permission(escalation));
        rejects(
            &pr,
            &permission(escalation).replace(r#""toolName":"Bash""#, r#""toolName":"Sh""#),
            "actions.permissionRequest.toolName",
        );
        rejects(
            &pr,
            &permission(escalation).replace(r#"["allow_once","deny"]"#, r#"["deny","allow_once"]"#),
            "actions.permissionRequest.availableDecisions",
        );

        ok(&pr, &additional(r#"{"network":{"enabled":true}}"#));
        ok(
            &pr,
            &additional(
                r#"{"fileSystem":{"entries":[{"path":"/a/b","access":"read","scope":"exact"}]}}"#,
            ),
        );
        ok(
            &pr,
            &additional(
                r#"{"fileSystem":{"entries":[{"path":"C:\\a","access":"write","scope":"subtree"}]}}"#,
            ),
        );
        for bad_path in [
            "/",
            "/a/",
            "a/b",
            "/a/../b",
            "/a//b",
            "C:\\\\a\\\\",
            "C:\\\\a/b",
        ] {
            let profile = format!(
                r#"{{"fileSystem":{{"entries":[{{"path":"{bad_path}","access":"read","scope":"exact"}}]}}}}"#
            );
            rejects(
                &pr,
                &additional(&profile),
                "actions.permissionRequest.additionalPermissions.fileSystem.entries[0]",
            );
        }
        rejects(
            &pr,
            &additional("{}"),
            "actions.permissionRequest.additionalPermissions: must contain at least one",
        );
        rejects(
            &pr,
            &additional(r#"{"network":{"enabled":false}}"#),
            "actions.permissionRequest.additionalPermissions.network",
        );
    }

    #[test]
    fn additional_permission_size_counts_compacted_entries() {
        let pr = ["actions", "permissionRequest"];
        let long = "x".repeat(4000);
        let entries = |root_scope: &str| {
            let mut list = vec![format!(
                r#"{{"path":"/{long}","access":"write","scope":"{root_scope}"}}"#
            )];
            for i in 0..20 {
                list.push(format!(
                    r#"{{"path":"/{long}/{i}","access":"read","scope":"exact"}}"#
                ));
            }
            format!(r#"{{"fileSystem":{{"entries":[{}]}}}}"#, list.join(","))
        };
        // 21 paths of ~4 KB: over 64 KiB unless the subtree root covers the other 20.
        ok(&pr, &additional(&entries("subtree")));
        rejects(
            &pr,
            &additional(&entries("exact")),
            "actions.permissionRequest.additionalPermissions: exceeds the serialized size limit",
        );
    }

    #[test]
    fn payload_identity_is_checked_on_undecodable_payloads() {
        let row = RowIdentity {
            event_id: "e1".into(),
            session_id: "s".into(),
            invocation_id: "inv".into(),
            run_id: "inv".into(),
            turn_id: "t".into(),
        };
        let mut v = base();
        set(&mut v, &["role"], r#""nobody""#);
        assert!(payload_identity_matches(&v, &row));
        assert!(decode_event(v).is_err());
        let mut v = base();
        set(&mut v, &["id"], r#""e\ud800""#);
        assert!(!payload_identity_matches(
            &v,
            &RowIdentity {
                event_id: "e\u{FFFD}".into(),
                ..row.clone()
            }
        ));
        assert!(!payload_identity_matches(&parse("[]").unwrap(), &row));
        let e = decode_event(base()).unwrap();
        assert!(crate::event::row_identity_matches(&e, &row));
    }

    #[test]
    fn error_content_details() {
        ok(
            &["content"],
            r#"{"kind":"error","message":"","details":["a","b"]}"#,
        );
        ok(
            &["content"],
            r#"{"kind":"error","message":"m","details":{"status":429},"code":"c","reason":"r"}"#,
        );
        rejects(
            &["content"],
            r#"{"kind":"error","message":"m","details":["a",1]}"#,
            "content.details[1]",
        );
        rejects(
            &["content"],
            r#"{"kind":"error","message":"m","code":null}"#,
            "content.code",
        );
    }
}
