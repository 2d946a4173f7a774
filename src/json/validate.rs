//! Checking JSON text without building it: the grammar `JSON.parse` accepts, walked
//! byte by byte, nothing allocated but a stack of open containers. For hot paths that
//! only need to know that a value parses and where it ends.

use super::parse::find_string_stop;

pub(crate) fn ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of the string starting at `i` (a `"`), and whether it holds an escape.
/// `None`: not a valid JSON string (a raw control character, a bad escape, no end).
pub fn skip_string(b: &[u8], i: usize) -> Option<(usize, bool)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut i = i + 1;
    let mut escaped = false;
    loop {
        i = find_string_stop(b, i)?;
        match b[i] {
            b'"' => return Some((i + 1, escaped)),
            b'\\' => {
                escaped = true;
                match *b.get(i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                    b'u' => {
                        let hex = b.get(i + 2..i + 6)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        i += 6;
                    }
                    _ => return None,
                }
            }
            _ => return None, // a raw control character
        }
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

/// Top-level members of an object, borrowed: `(raw key, raw value)` for each key
/// without escapes. `None`: not a valid object, or a key with an escape (the caller
/// then needs a real parse).
pub fn plain_members(text: &str) -> Option<Vec<(&str, &str)>> {
    let b = text.as_bytes();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::with_capacity(8);
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return (ws(b, i + 1) == b.len()).then_some(out);
    }
    loop {
        let (end, escaped) = skip_string(b, i)?;
        if escaped {
            return None;
        }
        let k = &text[i + 1..end - 1];
        i = ws(b, end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let from = ws(b, i + 1);
        let to = skip_value(b, from)?;
        out.push((k, &text[from..to]));
        i = ws(b, to);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return (ws(b, i + 1) == b.len()).then_some(out),
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

    #[test]
    fn deep_nesting_is_fine() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(is_json(&deep));
        assert!(!is_json(&deep[1..]));
    }

    #[test]
    fn members_are_borrowed_raw() {
        let m = plain_members(r#"{"a": "x", "b" :{"c":[1,2]} ,"d":-1.5}"#).unwrap();
        assert_eq!(
            m,
            vec![("a", "\"x\""), ("b", "{\"c\":[1,2]}"), ("d", "-1.5")]
        );
        assert!(plain_members(r#"{"a\u0062":1}"#).is_none());
        assert!(plain_members(r#"{"a":1} x"#).is_none());
        assert!(plain_members("[]").is_none());
        assert_eq!(plain_members(" { } ").unwrap(), vec![]);
    }
}
