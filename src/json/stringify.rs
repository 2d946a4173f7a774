//! `JSON.stringify`-compatible output and Maka's `stableJsonStringify`.

use super::{JsStr, Json};
use std::cmp::Ordering;

/// Why a value cannot be written as strict JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StringifyError {
    /// A number that JSON cannot represent (NaN or an infinity).
    #[error("value is not strict JSON: non-finite number")]
    NonFinite,
}

/// Maka's `stableJsonStringify`: compact JSON, object keys at every depth in
/// JavaScript property order (canonical array-index keys first in numeric order, then
/// the rest in UTF-16 code-unit order), numbers and strings as `JSON.stringify` prints
/// them. Arrays keep their order; `__proto__` keys are ordinary data.
///
/// Written without recursion, so any nesting depth is fine.
pub fn stable_stringify(value: &Json) -> Result<String, StringifyError> {
    let mut out = String::new();
    write_stable(&mut out, value)?;
    Ok(out)
}

/// Appends the [`stable_stringify`] text of `value` to `out`. On error, `out` holds a
/// partial text.
pub fn write_stable(out: &mut String, value: &Json) -> Result<(), StringifyError> {
    /// An open container: arrays walk their slice; objects walk a range of `order`.
    enum Frame<'a> {
        Array(std::slice::Iter<'a, Json>, bool),
        Object { start: usize, next: usize },
    }
    let mut frames: Vec<Frame<'_>> = Vec::new();
    // The entries of every open object, each object's range sorted in property order.
    let mut order: Vec<(u64, &(JsStr, Json))> = Vec::new();
    let mut numbers = ryu_js::Buffer::new();
    let mut current = Some(value);
    loop {
        if let Some(v) = current.take() {
            match v {
                Json::Null => out.push_str("null"),
                Json::Bool(true) => out.push_str("true"),
                Json::Bool(false) => out.push_str("false"),
                Json::Number(n) => {
                    if !n.is_finite() {
                        return Err(StringifyError::NonFinite);
                    }
                    out.push_str(numbers.format_finite(*n));
                }
                Json::String(s) => write_js_string(out, s),
                Json::Array(items) => {
                    out.push('[');
                    frames.push(Frame::Array(items.iter(), true));
                }
                Json::Object(obj) => {
                    out.push('{');
                    let start = order.len();
                    order.extend(obj.entries.iter().map(|e| (property_rank(&e.0), e)));
                    let range = &mut order[start..];
                    if !range.is_sorted_by(|a, b| property_cmp(a, b) != Ordering::Greater) {
                        range.sort_unstable_by(property_cmp);
                    }
                    frames.push(Frame::Object { start, next: start });
                }
            }
        }
        let Some(top) = frames.last_mut() else {
            return Ok(());
        };
        match top {
            Frame::Array(items, first) => match items.next() {
                Some(v) => {
                    if !std::mem::take(first) {
                        out.push(',');
                    }
                    current = Some(v);
                }
                None => {
                    out.push(']');
                    frames.pop();
                }
            },
            Frame::Object { start, next } => {
                if *next < order.len() {
                    if *next > *start {
                        out.push(',');
                    }
                    let (key, v) = order[*next].1;
                    *next += 1;
                    write_js_string(out, key);
                    out.push(':');
                    current = Some(v);
                } else {
                    out.push('}');
                    order.truncate(*start);
                    frames.pop();
                }
            }
        }
    }
}

/// Keys are unique within an object, so an unstable sort gives the one order.
fn property_cmp(a: &(u64, &(JsStr, Json)), b: &(u64, &(JsStr, Json))) -> Ordering {
    a.0.cmp(&b.0).then_with(|| {
        if a.0 == NOT_INDEX {
            a.1 .0.cmp_utf16(&b.1 .0)
        } else {
            Ordering::Equal
        }
    })
}

const NOT_INDEX: u64 = u64::MAX;

/// The numeric value of a canonical array-index key (`"0"` ..= `"4294967294"`, no
/// sign, no leading zero), which JavaScript lists first in numeric order; other keys
/// rank after all indices.
pub(crate) fn property_rank(key: &JsStr) -> u64 {
    let b = key.as_wtf8();
    if b.is_empty() || b.len() > 10 || (b.len() > 1 && b[0] == b'0') {
        return NOT_INDEX;
    }
    let mut v: u64 = 0;
    for &d in b {
        if !d.is_ascii_digit() {
            return NOT_INDEX;
        }
        v = v * 10 + u64::from(d - b'0');
    }
    if v <= 4_294_967_294 {
        v
    } else {
        NOT_INDEX
    }
}

/// ECMAScript `Number::toString` for a finite double (`-0` prints as `0`). Non-finite
/// values print as JavaScript's `String(n)` does (`NaN`, `Infinity`, `-Infinity`).
pub fn js_number_to_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".to_owned();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    ryu_js::Buffer::new().format_finite(n).to_owned()
}

/// Bytes a string literal cannot hold raw: `"`, `\` and the control characters.
static NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string literal, escaped as `JSON.stringify` escapes it.
pub fn write_js_string(out: &mut String, s: &super::JsStr) {
    out.push('"');
    match s.as_str() {
        Some(text) => write_escaped_str(out, text),
        None => {
            // Lone surrogates present: write each well-formed run as text and each
            // lone surrogate as a `\udxxx` escape.
            let mut run = String::new();
            for cp in s.code_points() {
                match char::from_u32(cp) {
                    Some(c) => run.push(c),
                    None => {
                        write_escaped_str(out, &run);
                        run.clear();
                        push_unicode_escape(out, cp);
                    }
                }
            }
            write_escaped_str(out, &run);
        }
    }
    out.push('"');
}

fn write_escaped_str(out: &mut String, text: &str) {
    let bytes = text.as_bytes();
    let mut plain = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !NEEDS_ESCAPE[b as usize] {
            continue;
        }
        // `i` is an ASCII byte, so both slices are on character boundaries.
        out.push_str(&text[plain..i]);
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0C => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => push_unicode_escape(out, u32::from(b)),
        }
        plain = i + 1;
    }
    out.push_str(&text[plain..]);
}

fn push_unicode_escape(out: &mut String, unit: u32) {
    out.push_str("\\u");
    for shift in [12, 8, 4, 0] {
        out.push(char::from(HEX[((unit >> shift) & 0xF) as usize]));
    }
}
