//! Checking JSON text without building it: the grammar `JSON.parse` accepts, walked
//! byte by byte, nothing allocated but a stack of open containers. For hot paths that
//! only need to know that a value parses and where it ends.

use super::parse::find_string_stop;

pub(crate) fn ws(b: &[u8], mut i: usize) -> usize {
    // Maka writes no whitespace between tokens: one test in the usual case.
    if b.get(i).is_some_and(|&c| c > b' ') {
        return i;
    }
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of the string starting at `i` (a `"`), and whether it holds an escape.
/// `None`: not a valid JSON string (a raw control character, a bad escape, no end).
#[inline]
pub fn skip_string(b: &[u8], i: usize) -> Option<(usize, bool)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    // Most strings have no escape: this much is inlined where strings are read.
    let stop = find_string_stop(b, i + 1)?;
    if b[stop] == b'"' {
        return Some((stop + 1, false));
    }
    skip_string_from_stop(b, stop)
}

/// The rest of [`skip_string`] from a stop byte that is not the closing quote.
#[inline(never)]
fn skip_string_from_stop(b: &[u8], stop: usize) -> Option<(usize, bool)> {
    let mut i = stop;
    loop {
        match b[i] {
            b'"' => return Some((i + 1, true)),
            b'\\' => match *b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = b.get(i + 2..i + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            _ => return None, // a raw control character
        }
        i = find_string_stop(b, i)?;
    }
}

/// The end of the number starting at `i`, and whether it is plainly finite (no
/// exponent, at most 300 integer digits: `JSON.parse` cannot make it infinite).
pub fn skip_number(b: &[u8], i: usize) -> Option<(usize, bool)> {
    let digits = |mut j: usize| {
        let from = j;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        (j, j - from)
    };
    let mut i = i;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let (end, n) = digits(i);
    if n == 0 || (n > 1 && b[i] == b'0') {
        return None;
    }
    let int_digits = n;
    i = end;
    if b.get(i) == Some(&b'.') {
        let (end, n) = digits(i + 1);
        if n == 0 {
            return None;
        }
        i = end;
    }
    let mut plain = int_digits <= 300;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        plain = false;
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let (end, n) = digits(i);
        if n == 0 {
            return None;
        }
        i = end;
    }
    Some((i, plain))
}

/// The end of the JSON value starting at `i` (after any whitespace). `None`: not
/// valid JSON. Nesting is unbounded (a stack on the heap), as in `JSON.parse`.
pub fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    let mut open: Vec<u8> = Vec::new();
    let mut i = i;
    // After a `,` or `{` in an object: a key, then `:`.
    let key = |i: usize| -> Option<usize> {
        let (i, _) = skip_string(b, ws(b, i))?;
        let i = ws(b, i);
        (b.get(i) == Some(&b':')).then_some(i + 1)
    };
    loop {
        i = ws(b, i);
        match *b.get(i)? {
            b'{' => {
                let j = ws(b, i + 1);
                if b.get(j) == Some(&b'}') {
                    i = j + 1;
                } else {
                    open.push(b'{');
                    i = key(j)?;
                    continue;
                }
            }
            b'[' => {
                let j = ws(b, i + 1);
                if b.get(j) == Some(&b']') {
                    i = j + 1;
                } else {
                    open.push(b'[');
                    i = j;
                    continue;
                }
            }
            b'"' => i = skip_string(b, i)?.0,
            b't' => i = literal(b, i, b"true")?,
            b'f' => i = literal(b, i, b"false")?,
            b'n' => i = literal(b, i, b"null")?,
            b'-' | b'0'..=b'9' => i = skip_number(b, i)?.0,
            _ => return None,
        }
        // A value ended: close what it ends, or go on to the next one.
        loop {
            let Some(&top) = open.last() else {
                return Some(i);
            };
            i = ws(b, i);
            match (*b.get(i)?, top) {
                (b',', b'{') => {
                    i = key(i + 1)?;
                    break;
                }
                (b',', b'[') => {
                    i += 1;
                    break;
                }
                (b'}', b'{') | (b']', b'[') => {
                    open.pop();
                    i += 1;
                }
                _ => return None,
            }
        }
    }
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len()) == Some(word)).then_some(i + word.len())
}

/// Whether `text` is one JSON value, as `JSON.parse` would accept it.
pub fn is_json(text: &str) -> bool {
    let b = text.as_bytes();
    skip_value(b, 0).is_some_and(|end| ws(b, end) == b.len())
}

/// A top-level member's value as [`each_member`] hands it out, raw (borrowed from the
/// text, escapes not decoded).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RawValue<'a> {
    /// A string: its text between the quotes, and whether it holds an escape.
    Str(&'a str, bool),
    /// A number: its text, and whether it is plainly finite (see [`skip_number`]).
    Num(&'a str, bool),
    /// An object, an array or a literal.
    Other(&'a str),
}

/// Calls `each` with the raw key and value of every top-level member of the object
/// `text`, in order, in one pass (each value is read once, as [`skip_value`] reads
/// it). `None`: not one valid object, a key with an escape (the caller then needs a
/// real parse), or `each` gave up.
pub fn each_member<'a>(
    text: &'a str,
    mut each: impl FnMut(&'a str, RawValue<'a>) -> Option<()>,
) -> Option<()> {
    let b = text.as_bytes();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return (ws(b, i + 1) == b.len()).then_some(());
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        // Stopped by anything but the closing quote: an escape, or a control
        // character that makes the text invalid anyway.
        let end = find_string_stop(b, i + 1)?;
        if b[end] != b'"' {
            return None;
        }
        let key = &text[i + 1..end];
        i = ws(b, end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let from = ws(b, i + 1);
        let (to, value) = match *b.get(from)? {
            b'"' => {
                let (to, escaped) = skip_string(b, from)?;
                (to, RawValue::Str(&text[from + 1..to - 1], escaped))
            }
            b'-' | b'0'..=b'9' => {
                let (to, plain) = skip_number(b, from)?;
                (to, RawValue::Num(&text[from..to], plain))
            }
            _ => {
                let to = skip_value(b, from)?;
                (to, RawValue::Other(&text[from..to]))
            }
        };
        each(key, value)?;
        i = ws(b, to);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return (ws(b, i + 1) == b.len()).then_some(()),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_parser_on_valid_and_invalid_text() {
        let cases = [
            "{}",
            "[]",
            " {\"a\" : [1, -2.5e+3, true, false, null, \"x\\u00e9\\n\"] } ",
            "{\"a\":{\"b\":{\"c\":[[[]]]}}}",
            "\"\\ud800\"",
            "0",
            "-0.0",
            "1e400",
            "{\"a\":1,}",
            "[1,]",
            "[01]",
            "[1.]",
            "[.5]",
            "[1e]",
            "[-]",
            "{\"a\" 1}",
            "{a:1}",
            "[\"\\x\"]",
            "[\"\\u12g4\"]",
            "[\"tab\there\"]",
            "[tru]",
            "[nulll]",
            "{\"a\":1}}",
            "{\"a\":1",
            "[1 2]",
            "",
            "   ",
            "\"open",
            "[\"a\",{\"b\":[]},\"c\"]",
            "{\"\":\"\"}",
        ];
        for c in cases {
            assert_eq!(
                is_json(c),
                crate::json::parse(c).is_ok(),
                "{c:?}: the validator and the parser disagree"
            );
        }
    }

    /// `skip_string` as JSON's grammar reads it, a byte at a time.
    fn string_end_bytewise(b: &[u8], i: usize) -> Option<(usize, bool)> {
        (b.get(i) == Some(&b'"')).then_some(())?;
        let (mut i, mut escaped) = (i + 1, false);
        loop {
            match *b.get(i)? {
                b'"' => return Some((i + 1, escaped)),
                b'\\' => {
                    escaped = true;
                    i += match *b.get(i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
                        b'u' if b.get(i + 2..i + 6)?.iter().all(u8::is_ascii_hexdigit) => 6,
                        _ => return None,
                    };
                }
                c if c < 0x20 => return None,
                _ => i += 1,
            }
        }
    }

    #[test]
    fn a_string_ends_where_a_bytewise_reading_ends_it() {
        // Escapes (good and bad), a control byte and the closing quote at every offset
        // across the sixteen-byte steps, with and without text after the string.
        let pieces: [&[u8]; 8] = [
            br#"\""#,
            br"\\",
            br"\u00e9",
            br"\u00g9",
            br"\x",
            b"\x01",
            "é".as_bytes(),
            b"\"",
        ];
        for len in 0..40 {
            for piece in pieces {
                for at in 0..=len {
                    for tail in [&b""[..], b"\"", b"\" , \"next\": 1}"] {
                        let mut text = vec![b'"'];
                        text.extend(std::iter::repeat_n(b'a', at));
                        text.extend_from_slice(piece);
                        text.extend(std::iter::repeat_n(b'b', len - at));
                        text.extend_from_slice(tail);
                        assert_eq!(
                            skip_string(&text, 0),
                            string_end_bytewise(&text, 0),
                            "{}",
                            String::from_utf8_lossy(&text)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn deep_nesting_is_fine() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(is_json(&deep));
        assert!(!is_json(&deep[1..]));
    }

    fn members(text: &str) -> Option<Vec<(&str, RawValue<'_>)>> {
        let mut out = Vec::new();
        each_member(text, |k, v| {
            out.push((k, v));
            Some(())
        })?;
        Some(out)
    }

    #[test]
    fn members_are_borrowed_raw() {
        let m = members(r#"{"a": "x\n", "b" :{"c":[1,2]} ,"d":-1.5,"e":1e400,"f":null}"#);
        assert_eq!(
            m.unwrap(),
            vec![
                ("a", RawValue::Str("x\\n", true)),
                ("b", RawValue::Other("{\"c\":[1,2]}")),
                ("d", RawValue::Num("-1.5", true)),
                ("e", RawValue::Num("1e400", false)),
                ("f", RawValue::Other("null")),
            ]
        );
        assert!(members(r#"{"a\u0062":1}"#).is_none());
        assert!(members(r#"{"a":1} x"#).is_none());
        assert!(members(r#"{"a":01}"#).is_none());
        assert!(members(r#"{"a":"x}"#).is_none());
        assert!(members("{\"a\tb\":1}").is_none());
        assert!(members("[]").is_none());
        assert_eq!(members(" { } ").unwrap(), vec![]);
        // Giving up stops the walk.
        let mut seen = 0;
        assert!(each_member(r#"{"a":1,"b":2}"#, |_, _| {
            seen += 1;
            None
        })
        .is_none());
        assert_eq!(seen, 1);
    }

    #[test]
    fn each_member_agrees_with_the_parser_on_damaged_objects() {
        use crate::json::Json;
        let mut damage = crate::mutate::Mutator::new(0x6a09_e667_f3bc_c908);
        let base = r#"{"runId":"r1","n":-12.5e3,"o":{"x":[1,{"y":"\u00e9"}]},"t":true,"s":"a\"b"}"#;
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..4000 {
            let Some(text) = damage.mutate(base) else {
                continue;
            };
            let parsed = crate::json::parse(&text);
            match members(&text) {
                Some(m) => {
                    accepted += 1;
                    let Ok(Json::Object(o)) = &parsed else {
                        panic!("accepted what the parser refuses: {text}");
                    };
                    for (k, v) in &m {
                        let once = m.iter().filter(|(x, _)| x == k).count() == 1;
                        match (o.get(k), v) {
                            (None, _) => panic!("{k} missing: {text}"),
                            (Some(Json::String(p)), RawValue::Str(s, false)) if once => {
                                assert_eq!(p, s, "{text}")
                            }
                            (Some(Json::Number(_)), RawValue::Num(..)) => {}
                            (Some(_), _) if !once => {}
                            (Some(p), RawValue::Str(..)) => {
                                assert!(matches!(p, Json::String(_)), "{text}")
                            }
                            (Some(p), RawValue::Other(_)) => {
                                assert!(!matches!(p, Json::String(_) | Json::Number(_)))
                            }
                            (Some(p), v) => panic!("{p:?} read as {v:?}: {text}"),
                        }
                    }
                }
                None => {
                    refused += 1;
                    // Refused only for what is not an object, or a key with an escape.
                    if matches!(parsed, Ok(Json::Object(_))) {
                        assert!(text.contains('\\'), "refused a plain object: {text}");
                    }
                }
            }
        }
        assert!(accepted > 100 && refused > 100, "{accepted} {refused}");
    }
}
