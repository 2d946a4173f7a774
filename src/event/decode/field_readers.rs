//! Small predicates with JavaScript semantics (`Number.isSafeInteger`, digests, hex),
//! and the readers that move a closed object's values into slots by key and read
//! required, optional and enum-valued fields out of them.

use super::error_path::{at, describe, expected, missing, one_of, quote, unknown_key, V};
use crate::json::{JsObject, JsStr, Json};

// ---------------------------------------------------------------------------------
// Small predicates (JavaScript semantics)
// ---------------------------------------------------------------------------------

/// Stands in for an absent value in by-reference checks.
pub(super) static NULL: Json = Json::Null;

const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `Number.isSafeInteger`.
pub(in crate::event) fn is_safe_integer(n: f64) -> bool {
    n.is_finite() && n.trunc() == n && n.abs() <= MAX_SAFE_INTEGER
}

/// `/^sha256:[0-9a-f]{64}$/`.
pub(in crate::event) fn is_sha256_digest(s: &JsStr) -> bool {
    let b = s.as_wtf8();
    b.len() == 71
        && b.starts_with(b"sha256:")
        && b[7..]
            .iter()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

pub(super) fn is_lower_hex(b: &[u8], len: usize) -> bool {
    b.len() == len && b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Moves the values of a closed object into slots named by `names`; any other key
/// is an error.
pub(super) fn take_fields<const N: usize>(
    obj: JsObject,
    names: &[&str; N],
) -> V<[Option<Json>; N]> {
    let mut slots: [Option<Json>; N] = std::array::from_fn(|_| None);
    for (k, v) in obj.into_entries() {
        match names.iter().position(|n| k == *n) {
            Some(i) => slots[i] = Some(v),
            None => return Err(unknown_key(&k)),
        }
    }
    Ok(slots)
}

pub(super) fn req(slot: Option<Json>, key: &str) -> V<Json> {
    slot.ok_or_else(|| missing(key))
}

pub(super) fn str_value(v: Json, key: &str) -> V<JsStr> {
    v.into_js_string()
        .map_err(|v| at(key, expected("a string", &v)))
}

pub(super) fn req_str(slot: Option<Json>, key: &str) -> V<JsStr> {
    str_value(req(slot, key)?, key)
}

pub(super) fn req_nonempty_str(slot: Option<Json>, key: &str) -> V<JsStr> {
    let s = str_value(req(slot, key)?, key)?;
    if s.is_empty() {
        return Err(format!("{key}: must be a non-empty string"));
    }
    Ok(s)
}

pub(super) fn opt_str(slot: Option<Json>, key: &str) -> V<Option<JsStr>> {
    slot.map(|v| str_value(v, key)).transpose()
}

pub(super) fn opt_bool(slot: Option<Json>, key: &str) -> V<Option<bool>> {
    match slot {
        None => Ok(None),
        Some(Json::Bool(b)) => Ok(Some(b)),
        Some(other) => Err(at(key, expected("a boolean", &other))),
    }
}

pub(super) fn opt_object(slot: Option<Json>, key: &str) -> V<Option<JsObject>> {
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

pub(super) fn enum_value<T: Copy>(v: Json, key: &str, domain: &[(&str, T)]) -> V<T> {
    member(&v, domain).ok_or_else(|| {
        let names: Vec<&str> = domain.iter().map(|(n, _)| *n).collect();
        let got = match &v {
            Json::String(s) => quote(s),
            other => describe(other),
        };
        format!("{key}: expected {}, got {got}", one_of(&names))
    })
}
