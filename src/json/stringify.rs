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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn stable(text: &str) -> String {
        stable_stringify(&parse(text).unwrap()).unwrap()
    }

    #[test]
    fn numbers_print_like_javascript() {
        for (n, js) in [
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (1.5, "1.5"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0 / 3.0, "0.3333333333333333"),
            (100.0, "100"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (1e100, "1e+100"),
            (123456789012345680000.0, "123456789012345680000"),
            (18446744073709551615.0, "18446744073709552000"),
            (9007199254740993.0, "9007199254740992"),
            (1e-6, "0.000001"),
            (1.5e-6, "0.0000015"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (-1e-7, "-1e-7"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
        ] {
            assert_eq!(js_number_to_string(n), js, "{n:e}");
        }
        assert_eq!(js_number_to_string(f64::NAN), "NaN");
        assert_eq!(js_number_to_string(f64::INFINITY), "Infinity");
        assert_eq!(js_number_to_string(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn number_spellings_normalize() {
        assert_eq!(
            stable(r#"[1.0, 1E3, 1e+2, -2.50, -0, -0.0, 0e5, 1e-7, 0.000001, 1e21, 1e20]"#),
            "[1,1000,100,-2.5,0,0,0,1e-7,0.000001,1e+21,100000000000000000000]"
        );
    }

    #[test]
    fn non_finite_is_an_error() {
        for text in ["1e400", "[-1e400]", r#"{"a":{"b":[1e999]}}"#] {
            assert_eq!(
                stable_stringify(&parse(text).unwrap()),
                Err(StringifyError::NonFinite)
            );
        }
        assert_eq!(
            stable_stringify(&Json::Number(f64::NAN)),
            Err(StringifyError::NonFinite)
        );
    }

    fn escaped(s: &JsStr) -> String {
        let mut out = String::new();
        write_js_string(&mut out, s);
        out
    }

    #[test]
    fn strings_escape_like_json_stringify() {
        let all_controls: String = (0u8..0x20).map(char::from).collect();
        assert_eq!(
            escaped(&JsStr::new(&all_controls)),
            concat!(
                r#""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r"#,
                r#"\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018"#,
                r#"\u0019\u001a\u001b\u001c\u001d\u001e\u001f""#
            )
        );
        assert_eq!(escaped(&JsStr::new("a\"b\\c/d")), r#""a\"b\\c/d""#);
        // DEL, C1 controls, line/paragraph separators, BOM and non-ASCII stay raw.
        let raw = "\u{7f}\u{85}\u{2028}\u{2029}\u{feff}é日本😀";
        assert_eq!(escaped(&JsStr::new(raw)), format!("\"{raw}\""));
        assert_eq!(escaped(&JsStr::new("")), "\"\"");
        // Lone surrogates become lowercase escapes; a pair is one raw character.
        let lone = parse(r#""\uDABC\u0001x\uDFFF""#).unwrap();
        assert_eq!(
            escaped(lone.as_js_str().unwrap()),
            r#""\udabc\u0001x\udfff""#
        );
        assert_eq!(stable(r#""\/\u00e9""#), "\"/é\"");
    }

    #[test]
    fn keys_in_javascript_property_order() {
        assert_eq!(
            stable(r#"{"b":1,"10":2,"9":3,"a":4,"1":5,"0":6}"#),
            r#"{"0":6,"1":5,"9":3,"10":2,"a":4,"b":1}"#
        );
        // Only canonical array indices (up to 2^32 - 2) are numeric.
        assert_eq!(
            stable(
                r#"{"4294967295":0,"4294967294":1,"01":2,"-1":3,"1.0":4,"":5,"2":6," 3":7,"+4":8}"#
            ),
            r#"{"2":6,"4294967294":1,"":5," 3":7,"+4":8,"-1":3,"01":2,"1.0":4,"4294967295":0}"#
        );
        // UTF-16 order: an astral character sorts before U+E000..U+FFFF.
        assert_eq!(
            stable("{\"\u{ffff}\":1,\"\u{e000}\":2,\"😀\":3,\"z\":4,\"\u{d7ff}\":5}"),
            "{\"z\":4,\"\u{d7ff}\":5,\"😀\":3,\"\u{e000}\":2,\"\u{ffff}\":1}"
        );
        // Lone surrogate keys take their code-unit place.
        assert_eq!(
            stable(r#"{"\udc00":1,"\ud83d\ude00":2,"\ud83d":3,"\ue000":4}"#),
            "{\"\\ud83d\":3,\"😀\":2,\"\\udc00\":1,\"\u{e000}\":4}"
        );
        // Nested objects are sorted too; arrays keep their order; __proto__ is data.
        assert_eq!(
            stable(r#"{"z":[{"y":1,"x":2},3,1],"__proto__":{"b":0,"a":0}}"#),
            r#"{"__proto__":{"a":0,"b":0},"z":[{"x":2,"y":1},3,1]}"#
        );
    }

    #[test]
    fn output_is_compact_and_parses_back() {
        let text = " { \"a\" : [ 1 , { } , [ ] , \"x\\ny\" , null , true , false ] } ";
        let out = stable(text);
        assert_eq!(out, r#"{"a":[1,{},[],"x\ny",null,true,false]}"#);
        assert_eq!(stable(&out), out);
        assert_eq!(parse(&out).unwrap(), parse(text).unwrap());
    }
}

/// Real and conformance data: the vector files and the fixture workspaces.
#[cfg(test)]
mod data_tests {
    use super::*;
    use crate::json::parse;

    fn lines(text: &str) -> impl Iterator<Item = serde_json::Value> + '_ {
        text.lines()
            .map(|l| serde_json::from_str(l).expect("vector line is JSON"))
    }

    #[test]
    fn decode_vectors_syntax_verdicts() {
        // Maka's JSON.parse rejects exactly the lines whose error is not a schema error.
        let mut failures = Vec::new();
        for v in lines(include_str!("../../tests/vectors/decode.jsonl")) {
            let payload = v["payload_json"].as_str().unwrap();
            let syntax_error = v["maka_error"]
                .as_str()
                .is_some_and(|e| e != "Invalid RuntimeEvent schema");
            if parse(payload).is_ok() == syntax_error {
                failures.push(v["name"].to_string());
            }
        }
        assert!(failures.is_empty(), "{failures:?}");
    }

    #[test]
    fn canonical_vectors_are_fixed_points() {
        let mut failures = Vec::new();
        let mut checked = 0;
        for v in lines(include_str!("../../tests/vectors/canonical.jsonl")) {
            let Some(canonical) = v["canonical"].as_str() else {
                continue;
            };
            checked += 1;
            if stable_stringify(&parse(canonical).unwrap()).as_deref() != Ok(canonical) {
                failures.push(v["name"].to_string());
            }
        }
        assert!(checked > 10);
        assert!(failures.is_empty(), "{failures:?}");
    }

    #[test]
    fn fixture_rows_are_fixed_points() {
        // Every stored payload Maka wrote is its own stable JSON.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        let mut rows = 0;
        let mut failures = Vec::new();
        for dir in std::fs::read_dir(&root).unwrap() {
            let db = dir.unwrap().path().join("runtime.sqlite");
            if !db.exists() {
                continue;
            }
            let uri = format!("file:{}?immutable=1", db.display());
            let flags =
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
            let conn = rusqlite::Connection::open_with_flags(uri, flags).unwrap();
            let mut stmt = conn
                .prepare("SELECT event_id, payload_json FROM runtime_events")
                .unwrap();
            let all = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .unwrap();
            for row in all {
                let (id, payload) = row.unwrap();
                rows += 1;
                match parse(&payload) {
                    Ok(v) if stable_stringify(&v).as_deref() == Ok(payload.as_str()) => {}
                    Ok(_) => failures.push(format!("{}: {id} not a fixed point", db.display())),
                    Err(e) => failures.push(format!("{}: {id}: {e}", db.display())),
                }
            }
        }
        assert!(rows > 100, "{rows} rows");
        assert!(failures.is_empty(), "{failures:#?}");
    }
}
