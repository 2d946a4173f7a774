//! `JSON.parse` with JavaScript's rules, without recursion on the thread stack.

use super::{JsObject, JsStr, Json, KeySet};

/// Why a text is not JSON (the position is a byte offset into the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at byte {offset}")]
pub struct ParseError {
    pub message: String,
    pub offset: usize,
}

/// Parses `text` as `JSON.parse` does: numbers as doubles (`1e400` is infinity),
/// a repeated key keeps its first position and takes its last value, lone surrogate
/// escapes are kept, and any nesting depth is accepted.
///
/// ```
/// use wsledger::json::{parse, stable_stringify};
///
/// // The repeated key keeps its place and takes the last value; keys come out sorted.
/// let v = parse(r#"{"b":1,"a":[1.0,-0,1e21],"b":"\ud800"}"#).unwrap();
/// assert_eq!(stable_stringify(&v).unwrap(), r#"{"a":[1,0,1e+21],"b":"\ud800"}"#);
/// assert!(parse("[1,]").is_err());
/// ```
pub fn parse(text: &str) -> Result<Json, ParseError> {
    parse_from(text, 0, true).map(|(value, _)| value)
}

/// The one JSON value that starts at byte `start` of `text` (after any whitespace),
/// and the position just after it; what follows it is not looked at. The value is
/// the one [`parse`] gives for it as part of a larger document: parsing is the same
/// whatever surrounds a value.
pub(crate) fn parse_value_at(text: &str, start: usize) -> Result<(Json, usize), ParseError> {
    parse_from(text, start, false)
}

fn parse_from(text: &str, start: usize, whole: bool) -> Result<(Json, usize), ParseError> {
    STACKS.with(|cell| {
        let mut stacks = cell.take();
        let parsed = Parser {
            text,
            bytes: text.as_bytes(),
            pos: start,
            scratch: Vec::new(),
        }
        .run(&mut stacks, whole);
        stacks.reset();
        cell.set(stacks);
        parsed
    })
}

/// The parser's open containers and pending elements, kept per thread from one parse
/// to the next: a scan parses hundreds of thousands of small payloads, and growing
/// fresh vectors for each cost about a tenth of the parse.
#[derive(Default)]
struct Stacks {
    frames: Vec<Frame>,
    values: Vec<Json>,
    entries: Vec<(JsStr, Json)>,
}

impl Stacks {
    /// Elements kept between parses; a larger document's vectors are freed.
    const KEEP: usize = 1024;

    fn reset(&mut self) {
        // After an error they still hold the partial document.
        self.frames.clear();
        self.values.clear();
        self.entries.clear();
        if self.frames.capacity() > Self::KEEP {
            self.frames = Vec::new();
        }
        if self.values.capacity() > Self::KEEP {
            self.values = Vec::new();
        }
        if self.entries.capacity() > Self::KEEP {
            self.entries = Vec::new();
        }
    }
}

thread_local! {
    static STACKS: std::cell::Cell<Stacks> = std::cell::Cell::new(Stacks::default());
}

/// An array or object still being read. Open containers live here, on the heap, not
/// on the thread stack. Their elements so far sit at the end of the parser's shared
/// `values` / `entries` stacks from `start` on, so each finished container is
/// allocated once, at its exact size.
enum Frame {
    Array {
        start: usize,
    },
    /// `key` is the key whose value is being read.
    Object {
        start: usize,
        key: JsStr,
        keys: KeySet,
    },
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Reused buffer for strings with escapes.
    scratch: Vec<u8>,
}

/// Bytes that end the plain part of a string: `"`, `\` and the control characters.
static STRING_STOP: [bool; 256] = {
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

/// The first position at or after `from` holding a `STRING_STOP` byte. Reads eight
/// bytes at a time: long plain strings are the bulk of stored payload bytes.
#[inline]
pub(crate) fn find_string_stop(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Sets the high bit of the first byte of `v` that is zero (later bits may be false
    // positives, so only the lowest one is used).
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut i = from;
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    while let Some(chunk) = bytes.get(i..i + 16) {
        let mask = stop_mask16(chunk.try_into().expect("sixteen bytes"));
        if mask != 0 {
            return Some(i + mask.trailing_zeros() as usize);
        }
        i += 16;
    }
    while let Some(chunk) = bytes.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let found = zero_byte(x ^ (ONES * u64::from(b'"')))
            | zero_byte(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes[i..]
        .iter()
        .position(|&b| STRING_STOP[b as usize])
        .map(|n| i + n)
}

/// Bit `k` set when byte `k` of `chunk` is a `STRING_STOP` byte, sixteen bytes at a
/// time in SSE2 (part of every x86_64), through `safe_arch`'s safe wrappers: a handful
/// of instructions, against about fifteen for eight bytes word at a time.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
fn stop_mask16(chunk: &[u8; 16]) -> u32 {
    use safe_arch::{
        bitor_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, min_u8_m128i, move_mask_i8_m128i,
        set_splat_i8_m128i,
    };
    let x = load_unaligned_m128i(chunk);
    let quote = cmp_eq_mask_i8_m128i(x, set_splat_i8_m128i(b'"' as i8));
    let backslash = cmp_eq_mask_i8_m128i(x, set_splat_i8_m128i(b'\\' as i8));
    // Unsigned `x <= 0x1F`: the smaller of the two is `x` itself.
    let control = cmp_eq_mask_i8_m128i(min_u8_m128i(x, set_splat_i8_m128i(0x1F)), x);
    move_mask_i8_m128i(bitor_m128i(bitor_m128i(quote, backslash), control)) as u32
}

fn is_json_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl Parser<'_> {
    /// Parses one value from `pos`; with `whole`, only whitespace may follow it.
    fn run(mut self, stacks: &mut Stacks, whole: bool) -> Result<(Json, usize), ParseError> {
        let Stacks {
            frames: stack,
            values,
            entries,
        } = stacks;
        'value: loop {
            self.skip_ws();
            let mut value = match self.bytes.get(self.pos) {
                None => return Err(self.error("Unexpected end of JSON input")),
                Some(b'{') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.bytes.get(self.pos) == Some(&b'}') {
                        self.pos += 1;
                        Json::Object(JsObject::new())
                    } else {
                        let key = self.parse_key()?;
                        let start = entries.len();
                        stack.push(Frame::Object {
                            start,
                            key,
                            keys: KeySet::default(),
                        });
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.bytes.get(self.pos) == Some(&b']') {
                        self.pos += 1;
                        Json::Array(Vec::new())
                    } else {
                        stack.push(Frame::Array {
                            start: values.len(),
                        });
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.pos += 1;
                    Json::String(self.parse_string()?)
                }
                Some(b't') => self.literal(b"true", Json::Bool(true))?,
                Some(b'f') => self.literal(b"false", Json::Bool(false))?,
                Some(b'n') => self.literal(b"null", Json::Null)?,
                Some(b'-' | b'0'..=b'9') => Json::Number(self.parse_number()?),
                Some(_) => return Err(self.unexpected()),
            };
            // Hand the finished value to the innermost open container, closing
            // containers as long as their closing bracket follows.
            loop {
                let Some(top) = stack.last_mut() else {
                    if !whole {
                        return Ok((value, self.pos));
                    }
                    self.skip_ws();
                    if self.pos < self.bytes.len() {
                        return Err(self.unexpected());
                    }
                    return Ok((value, self.pos));
                };
                match top {
                    Frame::Array { start } => {
                        let start = *start;
                        values.push(value);
                        self.skip_ws();
                        match self.bytes.get(self.pos) {
                            Some(b',') => {
                                self.pos += 1;
                                continue 'value;
                            }
                            Some(b']') => {
                                self.pos += 1;
                                stack.pop();
                                value = Json::Array(values.drain(start..).collect());
                            }
                            _ => return Err(self.unexpected()),
                        }
                    }
                    Frame::Object { start, key, keys } => {
                        let start = *start;
                        keys.insert(entries, start, std::mem::take(key), value);
                        self.skip_ws();
                        match self.bytes.get(self.pos) {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                *key = self.parse_key()?;
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                stack.pop();
                                value = Json::Object(JsObject {
                                    entries: entries.drain(start..).collect(),
                                });
                            }
                            _ => return Err(self.unexpected()),
                        }
                    }
                }
            }
        }
    }

    fn error(&self, message: &str) -> ParseError {
        ParseError {
            message: message.to_owned(),
            offset: self.pos,
        }
    }

    fn unexpected(&self) -> ParseError {
        match self.text[self.pos..].chars().next() {
            None => self.error("Unexpected end of JSON input"),
            Some(c) => self.error(&format!("Unexpected token {c:?}")),
        }
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            if !is_json_ws(b) {
                break;
            }
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &[u8], value: Json) -> Result<Json, ParseError> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end) == Some(word) {
            self.pos = end;
            Ok(value)
        } else {
            // Point at the first byte that differs.
            while self.bytes.get(self.pos) == word.get(self.pos + word.len() - end) {
                self.pos += 1;
            }
            Err(self.unexpected())
        }
    }

    /// A key string followed by `:`; `pos` is at the opening quote.
    fn parse_key(&mut self) -> Result<JsStr, ParseError> {
        if self.bytes.get(self.pos) != Some(&b'"') {
            return Err(self.unexpected());
        }
        self.pos += 1;
        let key = self.parse_string()?;
        self.skip_ws();
        if self.bytes.get(self.pos) != Some(&b':') {
            return Err(self.unexpected());
        }
        self.pos += 1;
        Ok(key)
    }

    /// The rest of a string; `pos` is just after the opening quote.
    fn parse_string(&mut self) -> Result<JsStr, ParseError> {
        let bytes = self.bytes;
        let start = self.pos;
        let mut i = match find_string_stop(bytes, start) {
            Some(n) => n,
            None => {
                self.pos = bytes.len();
                return Err(self.error("Unterminated string in JSON"));
            }
        };
        if bytes[i] == b'"' {
            // No escapes: the slice ends at an ASCII byte, so it is a `str` slice.
            self.pos = i + 1;
            return Ok(JsStr::new(&self.text[start..i]));
        }
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        buf.extend_from_slice(&bytes[start..i]);
        let mut lone_surrogate = false;
        loop {
            match bytes[i] {
                b'"' => {
                    self.pos = i + 1;
                    break;
                }
                b'\\' => {
                    i += 1;
                    let Some(&e) = bytes.get(i) else {
                        self.pos = i;
                        return Err(self.error("Unterminated string in JSON"));
                    };
                    i += 1;
                    let simple = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0C,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => 0,
                        _ => {
                            self.pos = i - 1;
                            return Err(self.error("Bad escaped character in JSON"));
                        }
                    };
                    if e != b'u' {
                        buf.push(simple);
                    } else {
                        let Some(unit) = hex4(bytes, i) else {
                            self.pos = i;
                            return Err(self.error("Bad Unicode escape in JSON"));
                        };
                        i += 4;
                        let mut cp = u32::from(unit);
                        if (0xD800..0xDC00).contains(&unit) && bytes.get(i..i + 2) == Some(b"\\u") {
                            if let Some(low @ 0xDC00..=0xDFFF) = hex4(bytes, i + 2) {
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                                i += 6;
                            }
                        }
                        if (0xD800..0xE000).contains(&cp) {
                            lone_surrogate = true;
                        }
                        push_wtf8(&mut buf, cp);
                    }
                }
                _ => {
                    self.pos = i;
                    return Err(self.error("Bad control character in string literal in JSON"));
                }
            }
            let run = i;
            match find_string_stop(bytes, i) {
                Some(n) => i = n,
                None => {
                    self.pos = bytes.len();
                    return Err(self.error("Unterminated string in JSON"));
                }
            }
            buf.extend_from_slice(&bytes[run..i]);
        }
        let s = if lone_surrogate {
            JsStr::from_ill_formed_wtf8(&buf)
        } else {
            match std::str::from_utf8(&buf) {
                Ok(s) => JsStr::new(s),
                Err(_) => unreachable!("escapes decode to UTF-8 when no surrogate is lone"),
            }
        };
        self.scratch = buf;
        Ok(s)
    }

    fn parse_number(&mut self) -> Result<f64, ParseError> {
        let bytes = self.bytes;
        let start = self.pos;
        let mut i = start;
        let negative = bytes[i] == b'-';
        if negative {
            i += 1;
        }
        let digit = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
        match bytes.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                i += 1;
                while digit(i) {
                    i += 1;
                }
            }
            _ => {
                self.pos = i;
                return Err(if i < bytes.len() {
                    self.unexpected()
                } else {
                    self.error("No number after minus sign in JSON")
                });
            }
        }
        let int_end = i;
        let mut integer = true;
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            if !digit(i) {
                self.pos = i;
                return Err(self.unexpected_or("Unterminated fractional number in JSON"));
            }
            while digit(i) {
                i += 1;
            }
            integer = false;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !digit(i) {
                self.pos = i;
                return Err(self.unexpected_or("Exponent part is missing a number in JSON"));
            }
            while digit(i) {
                i += 1;
            }
            integer = false;
        }
        self.pos = i;
        let int_start = start + usize::from(negative);
        if integer && int_end - int_start <= 15 {
            // Exact in a double: no rounding question.
            let v = bytes[int_start..int_end]
                .iter()
                .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
            let f = v as f64;
            return Ok(if negative { -f } else { f });
        }
        // `str::parse` rounds correctly and gives infinity / zero out of range.
        match self.text[start..i].parse::<f64>() {
            Ok(f) => Ok(f),
            Err(_) => {
                self.pos = start;
                Err(self.error("Invalid number in JSON"))
            }
        }
    }

    fn unexpected_or(&self, at_end: &str) -> ParseError {
        if self.pos < self.bytes.len() {
            self.unexpected()
        } else {
            self.error(at_end)
        }
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u16> {
    let digits = bytes.get(at..at + 4)?;
    let mut v: u16 = 0;
    for &d in digits {
        let n = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | u16::from(n);
    }
    Some(v)
}

/// Appends a code point (a lone surrogate included) in generalized UTF-8.
fn push_wtf8(buf: &mut Vec<u8>, cp: u32) {
    if cp < 0x80 {
        buf.push(cp as u8);
    } else if cp < 0x800 {
        buf.extend_from_slice(&[0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]);
    } else if cp < 0x10000 {
        buf.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    } else {
        buf.extend_from_slice(&[
            0xF0 | (cp >> 18) as u8,
            0x80 | ((cp >> 12) & 0x3F) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::stable_stringify;

    fn ok(text: &str) -> Json {
        parse(text).unwrap_or_else(|e| panic!("{text:?} should parse: {e}"))
    }

    fn stable(text: &str) -> String {
        stable_stringify(&ok(text)).unwrap()
    }

    #[test]
    fn scalars_and_whitespace() {
        assert_eq!(ok("null"), Json::Null);
        assert_eq!(ok(" \t\r\ntrue\n"), Json::Bool(true));
        assert_eq!(ok("false"), Json::Bool(false));
        assert_eq!(ok("\"a\""), Json::String(JsStr::new("a")));
        assert_eq!(ok("[ 1 , { \"a\" : [ ] } ]"), ok("[1,{\"a\":[]}]"));
    }

    #[test]
    fn rejects_what_json_parse_rejects() {
        for bad in [
            "",
            " ",
            "\u{feff}{}",
            "[1,]",
            "{\"a\":1,}",
            "NaN",
            "Infinity",
            "-Infinity",
            "+1",
            "01",
            "-01",
            "1.",
            ".5",
            "1e",
            "1e+",
            "-",
            "0x10",
            "'a'",
            "{'a':1}",
            "\"a\u{1}\"",
            "\"\t\"",
            "\"\n\"",
            "\"\\x41\"",
            "\"\\u12\"",
            "\"\\u12g4\"",
            "\"\\\"",
            "\"abc",
            "[",
            "{",
            "{\"a\"}",
            "{\"a\" 1}",
            "{1:2}",
            "[1 2]",
            "tru",
            "nul",
            "truex",
            "1 2",
            "{}{}",
            "\u{a0}1",
            "\u{2028}1",
            "\u{b}1",
            "\u{c}1",
            "[1]]",
            "\"\\U0041\"",
            "/*c*/1",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn numbers_are_doubles() {
        let n = |t: &str| ok(t).as_f64().unwrap();
        assert_eq!(n("0"), 0.0);
        assert!(n("-0").is_sign_negative() && n("-0") == 0.0);
        assert!(n("-0.0").is_sign_negative());
        assert!(n("-1e-400").is_sign_negative() && n("-1e-400") == 0.0);
        assert_eq!(n("1e400"), f64::INFINITY);
        assert_eq!(n("-1e400"), f64::NEG_INFINITY);
        assert_eq!(n("1E3"), 1000.0);
        assert_eq!(n("1e+2"), 100.0);
        assert_eq!(n("-2.50"), -2.5);
        assert_eq!(n("9007199254740993"), 9007199254740992.0);
        assert_eq!(n("18446744073709551615"), 18446744073709551615.0);
        assert_eq!(n("0.30000000000000004"), 0.1 + 0.2);
        assert_eq!(n("123456789012345"), 123456789012345.0);
        assert_eq!(n("-999999999999999"), -999999999999999.0);
        assert_eq!(n("1e99999999999999999999999"), f64::INFINITY);
        assert_eq!(n("0e-99999999999999999999999"), 0.0);
        assert_eq!(n("2.2250738585072011e-308"), 2.225_073_858_507_201e-308);
    }

    #[test]
    fn escapes_decode() {
        assert_eq!(
            ok(r#""\u0041\u00e9\/\"\\\b\f\n\r\t""#).as_str(),
            Some("Aé/\"\\\u{8}\u{c}\n\r\t")
        );
        assert_eq!(ok(r#""\uD83D\uDE00""#).as_str(), Some("😀"));
        assert_eq!(ok(r#""x\ud83d\ude00y""#), ok("\"x😀y\""));
        // Raw non-ASCII passes through unchanged, escaped or not.
        assert_eq!(ok("\"é\u{2028}\u{7f}\""), ok(r#""\u00e9\u2028\u007f""#));
    }

    #[test]
    fn lone_surrogates_are_kept() {
        for (text, units) in [
            (r#""\ud800""#, vec![0xD800]),
            (r#""\udc00""#, vec![0xDC00]),
            (r#""a\uDBFFb""#, vec![0x61, 0xDBFF, 0x62]),
            (r#""\ud800\ud800\udc00""#, vec![0xD800, 0xD800, 0xDC00]),
            (r#""\udc00\ud800""#, vec![0xDC00, 0xD800]),
            (r#""\ud800\u0041""#, vec![0xD800, 0x41]),
            (r#""\ud800\n""#, vec![0xD800, 0x0A]),
        ] {
            let v = ok(text);
            let s = v.as_js_str().unwrap();
            assert!(!s.is_well_formed(), "{text}");
            assert_eq!(s.utf16().collect::<Vec<_>>(), units, "{text}");
            assert_eq!(s.utf16_len(), units.len(), "{text}");
        }
        // Round trip through the stringifier: lowercase `\udxxx`.
        assert_eq!(
            stable(r#"["\uD800", "a\uDBFFb", "\uDC00\uD800"]"#),
            r#"["\ud800","a\udbffb","\udc00\ud800"]"#
        );
        // A well-formed pair is one supplementary character, written raw.
        assert_eq!(stable(r#""\uD83D\uDE00""#), "\"😀\"");
        assert_eq!(ok(r#""\ud800""#), ok(r#""\uD800""#));
        assert_ne!(ok(r#""\ud800""#), ok(r#""\ud801""#));
    }

    #[test]
    fn duplicate_keys_keep_first_position_last_value() {
        let v = ok(r#"{"a":1,"b":2,"a":3}"#);
        let o = v.as_object().unwrap();
        let keys: Vec<_> = o.keys().map(|k| k.to_string()).collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(o.get("a"), Some(&Json::Number(3.0)));
        // Escaped spelling of the same key is the same key.
        let v = ok(r#"{"id":"x","\u0069d":"y"}"#);
        assert_eq!(v.as_object().unwrap().len(), 1);
        assert_eq!(
            v.as_object().unwrap().get("id").and_then(Json::as_str),
            Some("y")
        );
    }

    #[test]
    fn duplicate_keys_in_large_objects() {
        // Beyond the size where the builder switches to a hash index.
        let mut text = String::from("{");
        for i in 0..2000 {
            text.push_str(&format!("\"k{i}\":{i},"));
        }
        for i in (0..2000).step_by(3) {
            text.push_str(&format!("\"k{i}\":\"again{i}\","));
        }
        text.push_str("\"k0\":\"last\"}");
        let v = ok(&text);
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 2000);
        for (i, (k, val)) in o.iter().enumerate() {
            assert_eq!(k.to_string(), format!("k{i}"));
            let expected = if i == 0 {
                Json::String("last".into())
            } else if i % 3 == 0 {
                Json::String(format!("again{i}").into())
            } else {
                Json::Number(i as f64)
            };
            assert_eq!(val, &expected);
        }
    }

    #[test]
    fn deep_nesting_parses_and_drops() {
        const DEPTH: usize = 1_000_000;
        let text = "[".repeat(DEPTH) + &"]".repeat(DEPTH);
        let v = ok(&text);
        let cloned = v.clone();
        assert_eq!(v, cloned);
        assert_eq!(stable_stringify(&v).unwrap(), text);
        drop(cloned);
        drop(v);

        let text = "{\"a\":".repeat(DEPTH) + "[1,{}]" + &"}".repeat(DEPTH);
        let v = ok(&text);
        assert_eq!(stable_stringify(&v).unwrap(), text);
        let serde = v.to_serde();
        let back = Json::from_serde(&serde);
        assert_eq!(back, v);
        // serde_json drops recursively; keep it alive past the test body's stack use.
        std::mem::forget(serde);
        drop(v);
        drop(back);

        // Errors deep inside must not leak a deep structure onto the stack either.
        let bad = "[{\"a\":".repeat(DEPTH) + "x";
        assert!(parse(&bad).is_err());
    }

    #[test]
    fn string_stop_scan_agrees_with_bytewise_scan() {
        // Every stop byte at every offset and alignment, among bytes that must not stop
        // the scan (including UTF-8 lead/continuation bytes and 0x20, 0x7F, 0xFF).
        let fillers = [
            b'a', b' ', 0x7F, 0x80, 0xBF, 0xC3, 0xE2, 0xFF, b'!', b'#', b'[', b']',
        ];
        let stops: Vec<u8> = (0u8..0x20).chain([b'"', b'\\']).collect();
        for len in 0..40 {
            for &filler in &fillers {
                let mut buf = vec![filler; len];
                assert_eq!(find_string_stop(&buf, 0), None);
                for pos in 0..len {
                    for &stop in &stops {
                        buf[pos] = stop;
                        for from in 0..=pos {
                            assert_eq!(find_string_stop(&buf, from), Some(pos));
                        }
                        // A later stop does not hide this one.
                        if pos + 3 < len {
                            buf[pos + 3] = b'"';
                            assert_eq!(find_string_stop(&buf, 0), Some(pos));
                            buf[pos + 3] = filler;
                        }
                        buf[pos] = filler;
                    }
                }
            }
        }
    }

    #[test]
    fn error_offsets_are_byte_offsets() {
        assert_eq!(parse("[1,]").unwrap_err().offset, 3);
        assert_eq!(parse("\"é\u{1}\"").unwrap_err().offset, 3);
        assert_eq!(parse("tru").unwrap_err().offset, 3);
        assert_eq!(parse("trux").unwrap_err().offset, 3);
    }
}
