//! `content`: the five content kinds, and text content validated and rebuilt the way
//! Maka does it (display text, attachments, quotes, turn origin, inline references).

use super::error_path::{at, at_index, describe, expected, missing, one_of, quote, V};
use super::field_readers::{
    opt_bool, opt_object, opt_str, req, req_str, str_value, take_fields, NULL,
};
use super::field_table::{check_closed, Ty, F};
use crate::event::Content;
use crate::json::{JsObject, JsStr, Json};

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

pub(in crate::event) fn decode_content(value: Json) -> V<Content> {
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

#[cfg(test)]
mod tests {
    use super::super::decode_event;
    use super::super::test_support::*;
    use super::*;

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
