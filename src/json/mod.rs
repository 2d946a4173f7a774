//! JSON with JavaScript semantics, as Maka's `JSON.parse` / `JSON.stringify` see it.
//!
//! Maka stores and compares payloads as JavaScript values: numbers are IEEE doubles
//! (`-0` kept), strings are UTF-16 and may hold lone surrogates, a repeated object key
//! keeps its first position but takes its last value, and nesting depth is unlimited.
//! `serde_json` differs on all of these, so payloads go through this module instead.
//! Pure: no I/O.

mod parse;
mod stringify;

pub use parse::{parse, ParseError};
pub use stringify::{js_number_to_string, stable_stringify, write_js_string, StringifyError};

use std::cmp::Ordering;
use std::fmt;

/// A JavaScript string, stored as WTF-8 (UTF-8 that may also encode lone surrogates).
///
/// Equality and hashing are by code units, which is JavaScript's `===` on strings.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct JsStr {
    bytes: Box<[u8]>,
    /// True when `bytes` is valid UTF-8 (no lone surrogate), the common case.
    well_formed: bool,
}

impl JsStr {
    /// A well-formed string.
    pub fn new(s: &str) -> Self {
        JsStr { bytes: s.as_bytes().into(), well_formed: true }
    }

    /// Builds a string from WTF-8 bytes. The caller guarantees the bytes are WTF-8.
    pub(crate) fn from_wtf8_unchecked(bytes: Vec<u8>) -> Self {
        let well_formed = std::str::from_utf8(&bytes).is_ok();
        JsStr { bytes: bytes.into_boxed_slice(), well_formed }
    }

    /// The string, when it holds no lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        if self.well_formed {
            // Checked when the value was built.
            std::str::from_utf8(&self.bytes).ok()
        } else {
            None
        }
    }

    /// The string with any lone surrogate replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> String {
        match self.as_str() {
            Some(s) => s.to_owned(),
            None => self.code_points().map(|c| char::from_u32(c).unwrap_or('\u{FFFD}')).collect(),
        }
    }

    /// Raw WTF-8 bytes.
    pub fn as_wtf8(&self) -> &[u8] {
        &self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// True when the string has no lone surrogate.
    pub fn is_well_formed(&self) -> bool {
        self.well_formed
    }

    /// Code points, lone surrogates included (as 0xD800..=0xDFFF).
    pub fn code_points(&self) -> impl Iterator<Item = u32> + '_ {
        Wtf8CodePoints { bytes: &self.bytes, pos: 0 }
    }

    /// UTF-16 code units, as JavaScript sees the string.
    pub fn utf16(&self) -> impl Iterator<Item = u16> + '_ {
        self.code_points().flat_map(|cp| {
            if cp >= 0x10000 {
                let c = cp - 0x10000;
                [Some(0xD800 | (c >> 10) as u16), Some(0xDC00 | (c & 0x3FF) as u16)]
            } else {
                [Some(cp as u16), None]
            }
            .into_iter()
            .flatten()
        })
    }

    /// JavaScript string length (UTF-16 code units).
    pub fn utf16_len(&self) -> usize {
        self.code_points().map(|c| if c >= 0x10000 { 2 } else { 1 }).sum()
    }

    /// Length of the string's UTF-8 encoding as `TextEncoder` produces it (lone
    /// surrogates become U+FFFD, three bytes each, the same as in WTF-8).
    pub fn utf8_len(&self) -> usize {
        self.bytes.len()
    }

    /// `Array.prototype.sort()` order: UTF-16 code-unit order.
    pub fn cmp_utf16(&self, other: &JsStr) -> Ordering {
        if self.well_formed && other.well_formed {
            // Byte order equals code-point order; it differs from UTF-16 order only
            // when a supplementary character meets U+E000..=U+FFFF.
            let a = &self.bytes;
            let b = &other.bytes;
            let common = a.iter().zip(b.iter()).position(|(x, y)| x != y);
            match common {
                None => return a.len().cmp(&b.len()),
                Some(i) => {
                    let hi = |x: u8| x >= 0xEE; // lead byte of U+E000..=U+FFFF or 4-byte
                    if !(hi(a[i]) && hi(b[i])) {
                        return a[i].cmp(&b[i]);
                    }
                }
            }
        }
        self.utf16().cmp(other.utf16())
    }
}

impl PartialEq<str> for JsStr {
    fn eq(&self, other: &str) -> bool {
        &*self.bytes == other.as_bytes()
    }
}

impl PartialEq<&str> for JsStr {
    fn eq(&self, other: &&str) -> bool {
        &*self.bytes == other.as_bytes()
    }
}

impl From<&str> for JsStr {
    fn from(s: &str) -> Self {
        JsStr::new(s)
    }
}

impl From<String> for JsStr {
    fn from(s: String) -> Self {
        JsStr { bytes: s.into_bytes().into_boxed_slice(), well_formed: true }
    }
}

impl fmt::Debug for JsStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string_lossy(), f)
    }
}

impl fmt::Display for JsStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

struct Wtf8CodePoints<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Iterator for Wtf8CodePoints<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        let b = self.bytes;
        let i = self.pos;
        let lead = *b.get(i)?;
        let (len, init) = match lead {
            0x00..=0x7F => (1, u32::from(lead)),
            0xC0..=0xDF => (2, u32::from(lead & 0x1F)),
            0xE0..=0xEF => (3, u32::from(lead & 0x0F)),
            _ => (4, u32::from(lead & 0x07)),
        };
        let mut cp = init;
        for k in 1..len {
            cp = (cp << 6) | u32::from(b.get(i + k).copied().unwrap_or(0x80) & 0x3F);
        }
        self.pos = i + len;
        Some(cp)
    }
}

/// A parsed JSON value with JavaScript semantics.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// Always a finite-or-not IEEE double, as `JSON.parse` produces (`1e400` is infinity).
    Number(f64),
    String(JsStr),
    Array(Vec<Json>),
    Object(JsObject),
}

/// A JSON object: keys unique, in first-insertion order (JavaScript property order is
/// recomputed where it matters, by the stringifier).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsObject {
    entries: Vec<(JsStr, Json)>,
}

impl JsObject {
    pub fn new() -> Self {
        JsObject { entries: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.entries.iter().find(|(k, _)| *k == *key).map(|(_, v)| v)
    }

    pub fn get_js(&self, key: &JsStr) -> Option<&Json> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key`; an existing key keeps its position and takes the new value.
    pub fn insert(&mut self, key: JsStr, value: Json) {
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.entries.push((key, value));
        }
    }

    /// Appends without checking for an existing key (the caller knows it is new).
    pub(crate) fn push_unique(&mut self, key: JsStr, value: Json) {
        self.entries.push((key, value));
    }

    pub fn remove(&mut self, key: &str) -> Option<Json> {
        let pos = self.entries.iter().position(|(k, _)| *k == *key)?;
        Some(self.entries.remove(pos).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&JsStr, &Json)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &JsStr> {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn into_entries(self) -> Vec<(JsStr, Json)> {
        self.entries
    }
}

impl FromIterator<(JsStr, Json)> for JsObject {
    fn from_iter<I: IntoIterator<Item = (JsStr, Json)>>(iter: I) -> Self {
        let mut o = JsObject::new();
        for (k, v) in iter {
            o.insert(k, v);
        }
        o
    }
}

impl Json {
    pub fn as_object(&self) -> Option<&JsObject> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_js_str(&self) -> Option<&JsStr> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The string value when it is a well-formed string.
    pub fn as_str(&self) -> Option<&str> {
        self.as_js_str().and_then(JsStr::as_str)
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Converts to a `serde_json::Value` for reports (lone surrogates become U+FFFD,
    /// non-finite numbers become null). Not for hashing or canonical bytes.
    pub fn to_serde(&self) -> serde_json::Value {
        todo!("implemented by the json module")
    }

    /// Converts from a `serde_json::Value` (test vectors, reports).
    pub fn from_serde(_v: &serde_json::Value) -> Json {
        todo!("implemented by the json module")
    }
}
