//! JSON with JavaScript semantics, as Maka's `JSON.parse` / `JSON.stringify` see it.
//!
//! Maka stores and compares payloads as JavaScript values: numbers are IEEE doubles
//! (`-0` kept), strings are UTF-16 and may hold lone surrogates, a repeated object key
//! keeps its first position but takes its last value, and nesting depth is unlimited.
//! `serde_json` differs on all of these, so payloads go through this module instead.
//! Pure: no I/O.

mod parse;
mod stringify;
pub mod validate;

pub(crate) use parse::{find_string_stop, parse_value_at};
pub use parse::{parse, ParseError};

/// `text` as a `serde_json::Value` for checking its fields, read as `JSON.parse` reads
/// it: serde_json's reading, or, where serde_json refuses what `JSON.parse` keeps (a lone
/// surrogate, which `JSON.stringify` writes as an escape, say for a string cut inside a
/// surrogate pair; nesting deeper than serde_json's 128 levels), ours with U+FFFD for each lone surrogate (one UTF-16 unit
/// for one: only two different lone surrogates compared with each other could tell).
/// `Err` is serde_json's error when ours cannot stand in (an infinite number, nesting
/// beyond 1,000: see [`Json::converts_faithfully`]).
pub fn parse_for_checks(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_str(text).or_else(|e| match parse(text) {
        Ok(j) if j.converts_faithfully() => Ok(j.to_serde()),
        _ => Err(e),
    })
}
pub use stringify::{
    js_number_to_string, stable_stringify, write_js_string, write_stable, StringifyError,
};

use std::cmp::Ordering;
use std::fmt;

/// A JavaScript string, stored as WTF-8 (UTF-8 that may also encode lone surrogates).
///
/// Equality and hashing are by code units, which is JavaScript's `===` on strings.
#[derive(Clone)]
pub struct JsStr {
    repr: Repr,
}

/// Bytes a well-formed string may have and still be kept in place, without an
/// allocation. Object keys, enum-like values, tool names and short arguments are
/// short; so are the ids Maka writes most (UUIDs: 36 bytes; provider call ids: about
/// 30). The scan's walk builds about sixteen strings a payload, and allocating and
/// freeing them was a fifth of its decoding time; at 22 bytes (a string the size of a
/// boxed one) every id was still boxed, nine allocations a tool call.
const INLINE: usize = 38;

/// Invariant (so that equal strings always have equal representations): `Inline`
/// holds exactly the well-formed strings of at most [`INLINE`] bytes, its unused
/// bytes zero; `Utf8` the longer well-formed ones; `Wtf8` only bytes that are not
/// valid UTF-8 (they hold at least one lone surrogate).
#[derive(Clone)]
enum Repr {
    Inline(u8, [u8; INLINE]),
    Utf8(Box<str>),
    Wtf8(Box<[u8]>),
}

// Length, 38 bytes and the tag: 16 bytes more than when the inline form was no larger
// than a boxed one.
const _: () = assert!(std::mem::size_of::<JsStr>() == 40);

impl Repr {
    /// The representation of the well-formed string `s`.
    #[inline]
    fn utf8(s: &str) -> Repr {
        if s.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Repr::Inline(s.len() as u8, bytes)
        } else {
            Repr::Utf8(Box::from(s))
        }
    }
}

impl PartialEq for JsStr {
    fn eq(&self, other: &JsStr) -> bool {
        match (&self.repr, &other.repr) {
            // Unused bytes are zero, so the whole arrays compare as the strings do: a
            // comparison of fixed size, made in place (ids are compared about six
            // times an event, each a call into `memcmp` otherwise).
            (Repr::Inline(a, x), Repr::Inline(b, y)) => a == b && x == y,
            _ => self.as_wtf8() == other.as_wtf8(),
        }
    }
}

impl Eq for JsStr {}

impl std::hash::Hash for JsStr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `str` hashes its bytes: the bytes tell the representation.
        state.write(self.as_wtf8());
        state.write_u8(0xff);
    }
}

impl Default for JsStr {
    fn default() -> Self {
        JsStr {
            repr: Repr::Inline(0, [0; INLINE]),
        }
    }
}

impl JsStr {
    /// A well-formed string.
    #[inline]
    pub fn new(s: &str) -> Self {
        JsStr {
            repr: Repr::utf8(s),
        }
    }

    /// Builds a string from WTF-8 bytes. The caller guarantees the bytes are WTF-8.
    #[allow(dead_code)] // for the other core modules
    pub(crate) fn from_wtf8_unchecked(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(s) => JsStr::from(s),
            Err(e) => JsStr {
                repr: Repr::Wtf8(e.into_bytes().into_boxed_slice()),
            },
        }
    }

    /// Builds a string from WTF-8 bytes known to hold a lone surrogate.
    pub(crate) fn from_ill_formed_wtf8(bytes: &[u8]) -> Self {
        debug_assert!(std::str::from_utf8(bytes).is_err());
        JsStr {
            repr: Repr::Wtf8(Box::from(bytes)),
        }
    }

    /// The string, when it holds no lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        match &self.repr {
            Repr::Inline(len, bytes) => {
                // Only ever built from a `str` (see `Repr::utf8`).
                std::str::from_utf8(&bytes[..usize::from(*len)]).ok()
            }
            Repr::Utf8(s) => Some(s),
            Repr::Wtf8(_) => None,
        }
    }

    /// The string with any lone surrogate replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> String {
        match self.as_str() {
            Some(s) => String::from(s),
            None => self
                .code_points()
                .map(|c| char::from_u32(c).unwrap_or('\u{FFFD}'))
                .collect(),
        }
    }

    /// Raw WTF-8 bytes.
    #[inline]
    pub fn as_wtf8(&self) -> &[u8] {
        match &self.repr {
            Repr::Inline(len, bytes) => &bytes[..usize::from(*len)],
            Repr::Utf8(s) => s.as_bytes(),
            Repr::Wtf8(b) => b,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.as_wtf8().is_empty()
    }

    /// True when the string has no lone surrogate.
    pub fn is_well_formed(&self) -> bool {
        !matches!(self.repr, Repr::Wtf8(_))
    }

    /// Code points, lone surrogates included (as 0xD800..=0xDFFF).
    pub fn code_points(&self) -> impl Iterator<Item = u32> + '_ {
        Wtf8CodePoints {
            bytes: self.as_wtf8(),
            pos: 0,
        }
    }

    /// UTF-16 code units, as JavaScript sees the string.
    pub fn utf16(&self) -> impl Iterator<Item = u16> + '_ {
        utf16_units(self.code_points())
    }

    /// JavaScript string length (UTF-16 code units).
    pub fn utf16_len(&self) -> usize {
        // Every byte that is not a continuation byte starts one code point; four-byte
        // sequences are two code units.
        self.as_wtf8()
            .iter()
            .map(|&b| match b {
                0x80..=0xBF => 0,
                0xF0..=0xFF => 2,
                _ => 1,
            })
            .sum()
    }

    /// Length of the string's UTF-8 encoding as `TextEncoder` produces it (lone
    /// surrogates become U+FFFD, three bytes each, the same as in WTF-8).
    pub fn utf8_len(&self) -> usize {
        self.as_wtf8().len()
    }

    /// `Array.prototype.sort()` order: UTF-16 code-unit order.
    pub fn cmp_utf16(&self, other: &JsStr) -> Ordering {
        let a = self.as_wtf8();
        let b = other.as_wtf8();
        let Some(i) = a.iter().zip(b.iter()).position(|(x, y)| x != y) else {
            return a.len().cmp(&b.len());
        };
        // The common prefix ends on a code point boundary or inside one sequence
        // whose lead byte is shared. Byte order equals code-point order, which equals
        // UTF-16 order except when a supplementary character (lead byte 0xF0..)
        // meets U+E000..=U+FFFF (lead 0xEE/0xEF), or when a surrogate is involved
        // (lead 0xED), which only WTF-8 strings have.
        let special = |x: u8| x >= 0xED;
        if !(special(a[i]) && special(b[i])) {
            return a[i].cmp(&b[i]);
        }
        // Resume at the start of the code point holding byte i.
        let mut start = i;
        while start > 0 && (0x80..=0xBF).contains(&a[start]) {
            start -= 1;
        }
        let ta = Wtf8CodePoints {
            bytes: a,
            pos: start,
        };
        let tb = Wtf8CodePoints {
            bytes: b,
            pos: start,
        };
        utf16_units(ta).cmp(utf16_units(tb))
    }
}

fn utf16_units(cps: impl Iterator<Item = u32>) -> impl Iterator<Item = u16> {
    cps.flat_map(|cp| {
        if cp >= 0x10000 {
            let c = cp - 0x10000;
            [
                Some(0xD800 | (c >> 10) as u16),
                Some(0xDC00 | (c & 0x3FF) as u16),
            ]
        } else {
            [Some(cp as u16), None]
        }
        .into_iter()
        .flatten()
    })
}

impl PartialEq<str> for JsStr {
    fn eq(&self, other: &str) -> bool {
        self.as_wtf8() == other.as_bytes()
    }
}

impl PartialEq<&str> for JsStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_wtf8() == other.as_bytes()
    }
}

impl From<&str> for JsStr {
    fn from(s: &str) -> Self {
        JsStr::new(s)
    }
}

impl From<String> for JsStr {
    fn from(s: String) -> Self {
        JsStr {
            repr: if s.len() <= INLINE {
                Repr::utf8(&s)
            } else {
                Repr::Utf8(s.into_boxed_str())
            },
        }
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
///
/// Dropping, cloning, comparing, debug-printing and the `serde_json` conversions never
/// recurse on the thread stack, so values nested to any depth are safe.
///
/// Because `Json` implements `Drop`, a payload cannot be moved out of an owned value by
/// a `match`: match on a reference, or use [`Json::take`], [`Json::into_array`],
/// [`Json::into_object`], [`Json::into_js_string`].
///
/// `==` compares numbers as `f64` (`-0 == 0`, `NaN != NaN`) and object entries in
/// insertion order.
#[derive(Default)]
pub enum Json {
    #[default]
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
#[derive(Clone, Default, PartialEq)]
pub struct JsObject {
    entries: Vec<(JsStr, Json)>,
}

impl JsObject {
    pub fn new() -> Self {
        JsObject {
            entries: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.entries
            .iter()
            .find(|(k, _)| *k == *key)
            .map(|(_, v)| v)
    }

    pub fn get_js(&self, key: &JsStr) -> Option<&Json> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        self.entries
            .iter_mut()
            .find(|(k, _)| *k == *key)
            .map(|(_, v)| v)
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
    #[allow(dead_code)] // for the other core modules
    pub(crate) fn push_unique(&mut self, key: JsStr, value: Json) {
        self.entries.push((key, value));
    }

    /// Removes `key`, keeping the order of the other entries.
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

    /// The entries in insertion order.
    pub fn entries(&self) -> &[(JsStr, Json)] {
        &self.entries
    }

    pub fn into_entries(self) -> Vec<(JsStr, Json)> {
        self.entries
    }
}

impl FromIterator<(JsStr, Json)> for JsObject {
    /// Later duplicates overwrite the value and keep the first position.
    fn from_iter<I: IntoIterator<Item = (JsStr, Json)>>(iter: I) -> Self {
        let mut b = ObjectBuilder::default();
        for (k, v) in iter {
            b.insert(k, v);
        }
        b.finish()
    }
}

/// Builds an object with JavaScript's duplicate-key rule (first position, last value).
#[derive(Default)]
pub(crate) struct ObjectBuilder {
    entries: Vec<(JsStr, Json)>,
    keys: KeySet,
}

impl ObjectBuilder {
    pub(crate) fn insert(&mut self, key: JsStr, value: Json) {
        self.keys.insert(&mut self.entries, 0, key, value);
    }

    pub(crate) fn finish(self) -> JsObject {
        JsObject {
            entries: self.entries,
        }
    }
}

/// The keys of one object whose entries are `entries[start..]`, for JavaScript's
/// duplicate-key rule in linear time. A 64-bit Bloom filter on a cheap key hash spares
/// the scan for keys that are certainly new; past a few dozen keys a hash index
/// replaces the scan.
#[derive(Default)]
pub(crate) struct KeySet {
    bloom: u64,
    index: Option<Box<KeyIndex>>,
}

/// Hash of a key → first entry (relative to the object's start) with that hash;
/// `next` chains entries with equal hashes.
struct KeyIndex {
    state: std::collections::hash_map::RandomState,
    heads: std::collections::HashMap<u64, usize>,
    next: Vec<usize>,
}

const NO_ENTRY: usize = usize::MAX;
const INDEX_THRESHOLD: usize = 32;

impl KeyIndex {
    fn hash(&self, key: &JsStr) -> u64 {
        use std::hash::BuildHasher;
        self.state.hash_one(key.as_wtf8())
    }

    fn add(&mut self, h: u64, pos: usize) {
        let prev = self.heads.insert(h, pos).unwrap_or(NO_ENTRY);
        debug_assert_eq!(self.next.len(), pos);
        self.next.push(prev);
    }
}

/// One bit of 64 chosen from the key's length and three of its bytes.
fn bloom_bit(key: &JsStr) -> u64 {
    let b = key.as_wtf8();
    let n = b.len();
    let h = match n {
        0 => 0,
        _ => {
            (n as u64)
                ^ (u64::from(b[0]) << 8)
                ^ (u64::from(b[n / 2]) << 16)
                ^ (u64::from(b[n - 1]) << 24)
        }
    };
    1 << (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
}

impl KeySet {
    /// Adds `key: value` to the object held in `entries[start..]`: an existing key
    /// takes the new value in place, a new key is appended.
    pub(crate) fn insert(
        &mut self,
        entries: &mut Vec<(JsStr, Json)>,
        start: usize,
        key: JsStr,
        value: Json,
    ) {
        if let Some(index) = self.index.as_deref_mut() {
            let h = index.hash(&key);
            let mut i = index.heads.get(&h).copied().unwrap_or(NO_ENTRY);
            while i != NO_ENTRY {
                let slot = &mut entries[start + i];
                if slot.0 == key {
                    slot.1 = value;
                    return;
                }
                i = index.next[i];
            }
            index.add(h, entries.len() - start);
            entries.push((key, value));
            return;
        }
        let bit = bloom_bit(&key);
        if self.bloom & bit != 0 {
            if let Some(slot) = entries[start..].iter_mut().find(|(k, _)| *k == key) {
                slot.1 = value;
                return;
            }
        }
        self.bloom |= bit;
        entries.push((key, value));
        let len = entries.len() - start;
        if len >= INDEX_THRESHOLD {
            let mut index = KeyIndex {
                state: Default::default(),
                heads: std::collections::HashMap::with_capacity(len * 2),
                next: Vec::with_capacity(len * 2),
            };
            for (pos, (k, _)) in entries[start..].iter().enumerate() {
                let h = index.hash(k);
                index.add(h, pos);
            }
            self.index = Some(Box::new(index));
        }
    }
}

impl Json {
    pub fn as_object(&self) -> Option<&JsObject> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(a) => Some(a),
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

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// Moves the value out, leaving `Json::Null`.
    pub fn take(&mut self) -> Json {
        std::mem::take(self)
    }

    /// The array's elements, or `Err(self)` when this is not an array.
    pub fn into_array(mut self) -> Result<Vec<Json>, Json> {
        match &mut self {
            Json::Array(a) => Ok(std::mem::take(a)),
            _ => Err(self),
        }
    }

    /// The object, or `Err(self)` when this is not an object.
    pub fn into_object(mut self) -> Result<JsObject, Json> {
        match &mut self {
            Json::Object(o) => Ok(std::mem::take(o)),
            _ => Err(self),
        }
    }

    /// The string, or `Err(self)` when this is not a string.
    pub fn into_js_string(mut self) -> Result<JsStr, Json> {
        match &mut self {
            Json::String(s) => Ok(std::mem::take(s)),
            _ => Err(self),
        }
    }

    /// True for an array or object that has at least one element.
    fn has_children(&self) -> bool {
        match self {
            Json::Array(a) => !a.is_empty(),
            Json::Object(o) => !o.entries.is_empty(),
            _ => false,
        }
    }

    /// Whether [`Json::to_serde`] keeps every value apart from a lone surrogate's
    /// code unit: no number is infinite (null in its place would pass a check for
    /// null), and no container is nested more than 1,000 deep (dropping a
    /// `serde_json::Value` recurses, and the scan checks headers on a thread with a
    /// small stack).
    pub fn converts_faithfully(&self) -> bool {
        let mut stack: Vec<(&Json, usize)> = vec![(self, 1)];
        while let Some((v, depth)) = stack.pop() {
            match v {
                Json::Number(n) if !n.is_finite() => return false,
                Json::Array(_) | Json::Object(_) if depth > 1000 => return false,
                Json::Array(a) => stack.extend(a.iter().map(|c| (c, depth + 1))),
                Json::Object(o) => stack.extend(o.entries.iter().map(|(_, c)| (c, depth + 1))),
                _ => {}
            }
        }
        true
    }

    /// Converts to a `serde_json::Value` for reports (lone surrogates become U+FFFD,
    /// non-finite numbers become null). Not for hashing or canonical bytes.
    ///
    /// Built without recursion; note that dropping a very deep `serde_json::Value`
    /// recurses inside `serde_json`.
    pub fn to_serde(&self) -> serde_json::Value {
        use serde_json::Value;
        fn leaf(v: &Json) -> Value {
            match v {
                Json::Null => Value::Null,
                Json::Bool(b) => Value::Bool(*b),
                Json::Number(n) => number_to_serde(*n),
                Json::String(s) => Value::String(s.to_string_lossy()),
                Json::Array(_) | Json::Object(_) => unreachable!("containers are opened"),
            }
        }
        enum Frame<'a> {
            Arr(std::slice::Iter<'a, Json>, Vec<Value>),
            Obj(
                std::slice::Iter<'a, (JsStr, Json)>,
                serde_json::Map<String, Value>,
                String,
            ),
        }
        fn open(v: &Json) -> Result<Frame<'_>, Value> {
            match v {
                Json::Array(a) => Ok(Frame::Arr(a.iter(), Vec::with_capacity(a.len()))),
                Json::Object(o) => Ok(Frame::Obj(
                    o.entries.iter(),
                    serde_json::Map::new(),
                    String::new(),
                )),
                other => Err(leaf(other)),
            }
        }
        let mut stack = match open(self) {
            Ok(f) => vec![f],
            Err(v) => return v,
        };
        loop {
            let top = stack.last_mut().expect("stack is not empty here");
            let next = match top {
                Frame::Arr(it, _) => it.next(),
                Frame::Obj(it, _, key) => it.next().map(|(k, v)| {
                    *key = k.to_string_lossy();
                    v
                }),
            };
            let done = match next {
                Some(child) => match open(child) {
                    Ok(f) => {
                        stack.push(f);
                        continue;
                    }
                    Err(v) => v,
                },
                None => match stack.pop() {
                    Some(Frame::Arr(_, out)) => Value::Array(out),
                    Some(Frame::Obj(_, out, _)) => Value::Object(out),
                    None => unreachable!("stack is not empty here"),
                },
            };
            match stack.last_mut() {
                None => return done,
                Some(Frame::Arr(_, out)) => out.push(done),
                Some(Frame::Obj(_, out, key)) => {
                    out.insert(std::mem::take(key), done);
                }
            }
        }
    }

    /// Converts from a `serde_json::Value` (test vectors, reports). Built without
    /// recursion.
    pub fn from_serde(v: &serde_json::Value) -> Json {
        use serde_json::Value;
        enum Frame<'a> {
            Arr(std::slice::Iter<'a, Value>, Vec<Json>),
            Obj(serde_json::map::Iter<'a>, ObjectBuilder, JsStr),
        }
        fn open(v: &Value) -> Result<Frame<'_>, Json> {
            match v {
                Value::Null => Err(Json::Null),
                Value::Bool(b) => Err(Json::Bool(*b)),
                Value::Number(n) => Err(Json::Number(n.as_f64().unwrap_or(f64::NAN))),
                Value::String(s) => Err(Json::String(JsStr::new(s))),
                Value::Array(a) => Ok(Frame::Arr(a.iter(), Vec::with_capacity(a.len()))),
                Value::Object(o) => Ok(Frame::Obj(
                    o.iter(),
                    ObjectBuilder::default(),
                    JsStr::default(),
                )),
            }
        }
        let mut stack = match open(v) {
            Ok(f) => vec![f],
            Err(v) => return v,
        };
        loop {
            let top = stack.last_mut().expect("stack is not empty here");
            let next = match top {
                Frame::Arr(it, _) => it.next(),
                Frame::Obj(it, _, key) => it.next().map(|(k, v)| {
                    *key = JsStr::new(k);
                    v
                }),
            };
            let done = match next {
                Some(child) => match open(child) {
                    Ok(f) => {
                        stack.push(f);
                        continue;
                    }
                    Err(v) => v,
                },
                None => match stack.pop() {
                    Some(Frame::Arr(_, out)) => Json::Array(out),
                    Some(Frame::Obj(_, out, _)) => Json::Object(out.finish()),
                    None => unreachable!("stack is not empty here"),
                },
            };
            match stack.last_mut() {
                None => return done,
                Some(Frame::Arr(_, out)) => out.push(done),
                Some(Frame::Obj(_, out, key)) => out.insert(std::mem::take(key), done),
            }
        }
    }
}

fn number_to_serde(n: f64) -> serde_json::Value {
    const SAFE: f64 = 9_007_199_254_740_992.0;
    if n.is_finite() && n.fract() == 0.0 && n.abs() <= SAFE && !(n == 0.0 && n.is_sign_negative()) {
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

impl Drop for Json {
    /// Frees nested containers from a heap stack instead of recursing.
    fn drop(&mut self) {
        let nested = match self {
            Json::Array(a) => a.iter().any(Json::has_children),
            Json::Object(o) => o.entries.iter().any(|(_, v)| v.has_children()),
            _ => false,
        };
        if !nested {
            // Children are scalars or empty containers: the default drop is shallow.
            return;
        }
        let mut stack: Vec<Json> = Vec::new();
        move_nested_children(self, &mut stack);
        while let Some(mut node) = stack.pop() {
            move_nested_children(&mut node, &mut stack);
            // `node` now holds no child with children of its own: dropping it is shallow.
        }
    }
}

/// Moves the children of `v` that themselves have children onto `stack`.
fn move_nested_children(v: &mut Json, stack: &mut Vec<Json>) {
    match v {
        Json::Array(a) if a.iter().any(Json::has_children) => {
            stack.extend(std::mem::take(a).into_iter().filter(Json::has_children));
        }
        Json::Object(o) if o.entries.iter().any(|(_, c)| c.has_children()) => {
            let children = std::mem::take(&mut o.entries).into_iter().map(|(_, c)| c);
            stack.extend(children.filter(Json::has_children));
        }
        _ => {}
    }
}

impl Clone for Json {
    fn clone(&self) -> Json {
        enum Frame<'a> {
            Arr(std::slice::Iter<'a, Json>, Vec<Json>),
            Obj(
                std::slice::Iter<'a, (JsStr, Json)>,
                Vec<(JsStr, Json)>,
                Option<&'a JsStr>,
            ),
        }
        fn open(v: &Json) -> Result<Frame<'_>, Json> {
            match v {
                Json::Null => Err(Json::Null),
                Json::Bool(b) => Err(Json::Bool(*b)),
                Json::Number(n) => Err(Json::Number(*n)),
                Json::String(s) => Err(Json::String(s.clone())),
                Json::Array(a) => Ok(Frame::Arr(a.iter(), Vec::with_capacity(a.len()))),
                Json::Object(o) => Ok(Frame::Obj(
                    o.entries.iter(),
                    Vec::with_capacity(o.entries.len()),
                    None,
                )),
            }
        }
        let mut stack = match open(self) {
            Ok(f) => vec![f],
            Err(v) => return v,
        };
        loop {
            let top = stack.last_mut().expect("stack is not empty here");
            let next = match top {
                Frame::Arr(it, _) => it.next(),
                Frame::Obj(it, _, key) => it.next().map(|(k, v)| {
                    *key = Some(k);
                    v
                }),
            };
            let done = match next {
                Some(child) => match open(child) {
                    Ok(f) => {
                        stack.push(f);
                        continue;
                    }
                    Err(v) => v,
                },
                None => match stack.pop() {
                    Some(Frame::Arr(_, out)) => Json::Array(out),
                    Some(Frame::Obj(_, out, _)) => Json::Object(JsObject { entries: out }),
                    None => unreachable!("stack is not empty here"),
                },
            };
            match stack.last_mut() {
                None => return done,
                Some(Frame::Arr(_, out)) => out.push(done),
                Some(Frame::Obj(_, out, key)) => {
                    out.push((key.expect("key set with its value").clone(), done))
                }
            }
        }
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        let mut stack: Vec<(&Json, &Json)> = Vec::new();
        let mut pair = (self, other);
        loop {
            match pair {
                (Json::Null, Json::Null) => {}
                (Json::Bool(a), Json::Bool(b)) if a == b => {}
                (Json::Number(a), Json::Number(b)) if a == b => {}
                (Json::String(a), Json::String(b)) if a == b => {}
                (Json::Array(a), Json::Array(b)) if a.len() == b.len() => {
                    stack.extend(a.iter().zip(b.iter()));
                }
                (Json::Object(a), Json::Object(b)) if a.entries.len() == b.entries.len() => {
                    for ((ka, va), (kb, vb)) in a.entries.iter().zip(b.entries.iter()) {
                        if ka != kb {
                            return false;
                        }
                        stack.push((va, vb));
                    }
                }
                _ => return false,
            }
            match stack.pop() {
                Some(p) => pair = p,
                None => return true,
            }
        }
    }
}

impl fmt::Debug for Json {
    /// JSON-like text in insertion order; non-finite numbers as `NaN` / `Infinity`,
    /// negative zero as `-0`. Written without recursion.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_write(f, self)
    }
}

impl fmt::Debug for JsObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Same text as the object inside a `Json`, without cloning it into one.
        f.write_str("{")?;
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let mut key = String::new();
            write_js_string(&mut key, k);
            f.write_str(&key)?;
            f.write_str(":")?;
            debug_write(f, v)?;
        }
        f.write_str("}")
    }
}

fn debug_write(f: &mut fmt::Formatter<'_>, root: &Json) -> fmt::Result {
    enum Frame<'a> {
        Arr(std::slice::Iter<'a, Json>, bool),
        Obj(std::slice::Iter<'a, (JsStr, Json)>, bool),
    }
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut buf = String::new();
    let mut current = Some(root);
    loop {
        if let Some(v) = current.take() {
            match v {
                Json::Null => f.write_str("null")?,
                Json::Bool(b) => f.write_str(if *b { "true" } else { "false" })?,
                Json::Number(n) => {
                    if *n == 0.0 && n.is_sign_negative() {
                        f.write_str("-0")?
                    } else {
                        f.write_str(&js_number_to_string(*n))?
                    }
                }
                Json::String(s) => {
                    buf.clear();
                    write_js_string(&mut buf, s);
                    f.write_str(&buf)?;
                }
                Json::Array(a) => {
                    f.write_str("[")?;
                    stack.push(Frame::Arr(a.iter(), true));
                }
                Json::Object(o) => {
                    f.write_str("{")?;
                    stack.push(Frame::Obj(o.entries.iter(), true));
                }
            }
        }
        let Some(top) = stack.last_mut() else {
            return Ok(());
        };
        match top {
            Frame::Arr(it, first) => match it.next() {
                Some(v) => {
                    if !std::mem::take(first) {
                        f.write_str(",")?;
                    }
                    current = Some(v);
                }
                None => {
                    f.write_str("]")?;
                    stack.pop();
                }
            },
            Frame::Obj(it, first) => match it.next() {
                Some((k, v)) => {
                    if !std::mem::take(first) {
                        f.write_str(",")?;
                    }
                    buf.clear();
                    write_js_string(&mut buf, k);
                    f.write_str(&buf)?;
                    f.write_str(":")?;
                    current = Some(v);
                }
                None => {
                    f.write_str("}")?;
                    stack.pop();
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_is_the_same_kept_in_place_or_boxed() {
        use std::hash::BuildHasher;
        let state = std::hash::RandomState::new();
        for n in [0, 1, INLINE - 1, INLINE, INLINE + 1, 40] {
            let text: String = "é".repeat(n / 2) + &"a".repeat(n % 2);
            let ways = [
                JsStr::new(&text),
                JsStr::from(text.clone()),
                JsStr::from(text.as_str()),
                JsStr::from_wtf8_unchecked(text.clone().into_bytes()),
            ];
            for w in &ways {
                assert_eq!(w.as_str(), Some(text.as_str()));
                assert_eq!(w.as_wtf8(), text.as_bytes());
                assert!(w.is_well_formed());
                assert_eq!(*w, ways[0]);
                assert_eq!(state.hash_one(w), state.hash_one(&ways[0]));
                // Hashed as `str` hashes the same text.
                assert_eq!(state.hash_one(w), state.hash_one(text.as_str()));
            }
            // One byte more or less is another string.
            let longer = JsStr::new(&(text.clone() + "a"));
            assert_ne!(longer, ways[0]);
            assert_ne!(state.hash_one(&longer), state.hash_one(&ways[0]));
        }
        // Equality in place is equality of the texts: a last byte apart, a NUL more.
        for n in 0..=INLINE + 1 {
            let a = "x".repeat(n);
            for b in [
                a.clone(),
                format!("{a}\0"),
                format!("{}y", "x".repeat(n.saturating_sub(1))),
            ] {
                assert_eq!(JsStr::new(&a) == JsStr::new(&b), a == b, "{a:?} {b:?}");
            }
        }
        // A lone surrogate is kept as WTF-8 however short, and is not its lossy text.
        let lone = JsStr::from_ill_formed_wtf8(&[0xed, 0xa0, 0x80]);
        assert!(!lone.is_well_formed() && lone.as_str().is_none());
        assert_ne!(lone, JsStr::new(&lone.to_string_lossy()));
        assert_eq!(JsStr::default(), JsStr::new(""));
    }

    fn js(text: &str) -> JsStr {
        parse(text).unwrap().into_js_string().unwrap()
    }

    #[test]
    fn cmp_utf16_is_code_unit_order() {
        let sorted = [
            js(r#""""#),
            js(r#""A""#),
            js(r#""a""#),
            js(r#""é""#),
            js(r#""\ud7ff""#),
            js(r#""\ud800""#),
            js(r#""\ud83d""#),
            js(r#""😀""#),
            js(r#""\ud83d\ude01""#),
            js(r#""\udbff\udfff""#),
            js(r#""\udc00""#),
            js(r#""\ue000""#),
            js(r#""\ufb01""#),
            js(r#""\uffff""#),
        ];
        for (i, a) in sorted.iter().enumerate() {
            for (j, b) in sorted.iter().enumerate() {
                assert_eq!(a.cmp_utf16(b), i.cmp(&j), "{a:?} vs {b:?}");
                assert_eq!(
                    a.cmp_utf16(b),
                    a.utf16()
                        .collect::<Vec<_>>()
                        .cmp(&b.utf16().collect::<Vec<_>>())
                );
            }
        }
    }

    #[test]
    fn js_str_basics() {
        let s = js(r#""a😀\ud800é""#);
        assert!(!s.is_well_formed());
        assert_eq!(s.as_str(), None);
        assert_eq!(s.utf16_len(), 5);
        assert_eq!(s.utf8_len(), 1 + 4 + 3 + 2);
        assert_eq!(s.to_string_lossy(), "a😀\u{fffd}é");
        assert_eq!(
            s.code_points().collect::<Vec<_>>(),
            [0x61, 0x1F600, 0xD800, 0xE9]
        );
        let w = JsStr::new("€uro");
        assert!(w.is_well_formed());
        assert_eq!(w.as_str(), Some("€uro"));
        assert_eq!(w.utf16_len(), 4);
        assert_eq!(w.utf8_len(), 6);
        assert_eq!(w, "€uro");
        assert_eq!(
            JsStr::from_wtf8_unchecked("x".as_bytes().to_vec()),
            JsStr::from("x")
        );
        assert_eq!(JsStr::from_wtf8_unchecked(s.as_wtf8().to_vec()), s);
        assert!(JsStr::default().is_empty());
    }

    #[test]
    fn object_api() {
        let mut o: JsObject = [
            (JsStr::new("a"), Json::Number(1.0)),
            (JsStr::new("b"), Json::Null),
            (JsStr::new("a"), Json::Number(2.0)),
        ]
        .into_iter()
        .collect();
        assert_eq!(o.len(), 2);
        assert_eq!(o.get("a"), Some(&Json::Number(2.0)));
        o.insert(JsStr::new("c"), Json::Bool(true));
        o.insert(JsStr::new("a"), Json::Bool(false));
        assert_eq!(
            o.keys().map(|k| k.to_string()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(o.remove("b"), Some(Json::Null));
        assert_eq!(
            o.keys().map(|k| k.to_string()).collect::<Vec<_>>(),
            ["a", "c"]
        );
        assert!(o.contains_key("c") && !o.contains_key("b"));
        assert_eq!(o.get_js(&JsStr::new("c")), Some(&Json::Bool(true)));
        // Large collections go through the hash index.
        let big: JsObject = (0..2000)
            .map(|i| {
                (
                    JsStr::from(format!("k{}", i % 700)),
                    Json::Number(f64::from(i)),
                )
            })
            .collect();
        assert_eq!(big.len(), 700);
        assert_eq!(big.get("k5"), Some(&Json::Number(1405.0)));
        assert_eq!(big.get("k699"), Some(&Json::Number(1399.0)));
        assert_eq!(big.entries()[3].0, "k3");
    }

    #[test]
    fn moving_out_of_owned_values() {
        let mut v = parse(r#"{"a":[1,"s"]}"#).unwrap();
        let taken = v.take();
        assert_eq!(v, Json::Null);
        let mut o = taken.into_object().unwrap();
        let arr = o.remove("a").unwrap().into_array().unwrap();
        assert_eq!(arr.len(), 2);
        let mut it = arr.into_iter();
        assert_eq!(it.next().unwrap().into_js_string(), Err(Json::Number(1.0)));
        assert_eq!(it.next().unwrap().into_js_string(), Ok(JsStr::new("s")));
        assert!(Json::Null.into_object().is_err());
        assert_eq!(parse("[]").unwrap().as_array(), Some(&[][..]));
    }

    #[test]
    fn equality_semantics() {
        let p = |t: &str| parse(t).unwrap();
        assert_eq!(p("-0"), p("0"));
        assert_ne!(Json::Number(f64::NAN), Json::Number(f64::NAN));
        assert_ne!(p("[1,2]"), p("[2,1]"));
        assert_ne!(p("[1]"), p("[1,1]"));
        assert_ne!(p(r#"{"a":1}"#), p(r#"{"a":1,"b":1}"#));
        assert_ne!(
            p(r#"{"a":1,"b":2}"#),
            p(r#"{"b":2,"a":1}"#),
            "insertion order counts"
        );
        assert_ne!(p(r#"{"a":[1,{"b":[2]}]}"#), p(r#"{"a":[1,{"b":[3]}]}"#));
        assert_eq!(p(r#"{"a":[1,{"b":[2]}]}"#), p(r#"{"a":[1,{"b":[2]}]}"#));
        assert_ne!(p("null"), p("false"));
        assert_ne!(p(r#""1""#), p("1"));
    }

    #[test]
    fn debug_is_json_like() {
        let v = parse(r#"{"b":[1.5,-0,null,true],"a":"x\"\ud800"}"#).unwrap();
        assert_eq!(
            format!("{v:?}"),
            r#"{"b":[1.5,-0,null,true],"a":"x\"\ud800"}"#
        );
        assert_eq!(format!("{:?}", v.as_object().unwrap()), format!("{v:?}"));
        assert_eq!(
            format!("{:?}", Json::Number(f64::NEG_INFINITY)),
            "-Infinity"
        );
    }

    #[test]
    fn serde_conversions() {
        let v = parse(r#"{"z":1,"a":[1.5,-0,1e400,"\ud800x",{}],"n":null,"t":true}"#).unwrap();
        let s = v.to_serde();
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            "{\"z\":1,\"a\":[1.5,-0.0,null,\"\u{fffd}x\",{}],\"n\":null,\"t\":true}"
        );
        let back = Json::from_serde(&s);
        let expected =
            parse(r#"{"z":1,"a":[1.5,-0,null,"\ufffdx",{}],"n":null,"t":true}"#).unwrap();
        assert_eq!(back, expected);
        assert_eq!(Json::from_serde(&serde_json::json!(3)), Json::Number(3.0));
        assert_eq!(
            Json::from_serde(&serde_json::json!("s")).as_str(),
            Some("s")
        );
    }

    #[test]
    fn deep_values_clone_compare_print_and_drop() {
        const DEPTH: usize = 1_000_000;
        let mut v = Json::Number(1.0);
        for i in 0..DEPTH {
            v = if i % 2 == 0 {
                Json::Array(vec![v, Json::Null])
            } else {
                Json::Object([(JsStr::new("k"), v)].into_iter().collect())
            };
        }
        let c = v.clone();
        assert!(c == v);
        let printed = format!("{c:?}");
        assert_eq!(printed.len(), stable_stringify(&v).unwrap().len());
        drop(c);
        drop(v);
    }
}
