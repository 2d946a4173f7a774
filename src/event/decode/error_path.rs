//! Error plumbing for the decoder: a failure is a message prefixed with the relative
//! path of the offending value, and each record adds its key on the way out.

use crate::json::{JsStr, Json};

// ---------------------------------------------------------------------------------
// Error plumbing
// ---------------------------------------------------------------------------------

/// A failure is `"<relative path>: <message>"`; a message about the value itself
/// starts with `": "`, one about an array element with `"[i]"`.
pub(super) type V<T> = Result<T, String>;

pub(super) fn at(prefix: &str, e: String) -> String {
    if e.starts_with(':') || e.starts_with('[') {
        format!("{prefix}{e}")
    } else {
        format!("{prefix}.{e}")
    }
}

pub(super) fn at_index(i: usize, e: String) -> String {
    at(&format!("[{i}]"), e)
}

pub(super) fn finish(e: String) -> String {
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

pub(super) fn quote(s: &JsStr) -> String {
    let lossy = s.to_string_lossy();
    if lossy.chars().count() > 64 {
        let cut: String = lossy.chars().take(64).collect();
        format!("{cut:?}...")
    } else {
        format!("{lossy:?}")
    }
}

/// What a value is, for messages: its type, and the value itself for a number.
pub(super) fn describe(v: &Json) -> String {
    match v {
        Json::Number(n) if *n == 0.0 && n.is_sign_negative() => "number -0".into(),
        Json::Number(n) if n.is_finite() => {
            format!("number {}", crate::json::js_number_to_string(*n))
        }
        other => type_name(other).into(),
    }
}

pub(super) fn expected(what: &str, got: &Json) -> String {
    format!(": expected {what}, got {}", describe(got))
}

pub(super) fn one_of(domain: &[&str]) -> String {
    let list: Vec<String> = domain.iter().map(|d| format!("{d:?}")).collect();
    format!("one of {}", list.join(", "))
}

pub(super) fn missing(key: &str) -> String {
    format!("{key}: missing required key")
}

pub(super) fn unknown_key(k: &JsStr) -> String {
    format!(": unknown key {}", quote(k))
}
