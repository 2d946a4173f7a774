//! Text from the database may hold terminal escape sequences, bidi controls and line
//! breaks written by a model or a tool; table and text output always show them
//! escaped instead of letting the terminal interpret them.

/// True for characters that must never reach a terminal raw.
fn must_escape(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// Escapes control, bidi and zero-width characters (`\n`, `\t`, `\u{1b}` …).
pub fn sanitize(s: &str) -> String {
    if !s.chars().any(must_escape) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if must_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn escapes_escape_sequences_bidi_and_newlines() {
        assert_eq!(sanitize("a\u{1b}[31mb"), "a\\u{1b}[31mb");
        assert_eq!(sanitize("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(sanitize("l1\nl2\tz"), "l1\\nl2\\tz");
        assert_eq!(sanitize("plain é"), "plain é");
    }
}
