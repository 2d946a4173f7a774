//! Schema objects as Maka compares them.
//!
//! Maka (v0.1.11 and later) refuses to open a file whose schema objects differ from its
//! target in any way (a missing, changed or extra table, index, trigger or view). It
//! compares a normalized form of each object's SQL; `normalize_sql` reproduces that
//! form, so the release catalog (`crate::release`) compares what Maka compares. Pure: no
//! SQL is run in this module.

/// One schema object: `type:name` and its normalized signature `type:tbl_name:sql`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaObject {
    pub key: String,
    pub signature: String,
}

/// Builds the object for a `sqlite_schema` row as Maka's comparison sees it.
pub fn schema_object(kind: &str, name: &str, tbl_name: &str, sql: &str) -> SchemaObject {
    let mut signature = format!("{kind}:{tbl_name}:{}", normalize_sql(sql));
    if name == "workflow_quote_companion_cleanup" {
        // Maka accepts one released spelling of this column as if it said NOT NULL.
        signature = released_exception(&signature);
    }
    SchemaObject {
        key: format!("{kind}:{name}"),
        signature,
    }
}

fn released_exception(signature: &str) -> String {
    const FROM: &str = "RECORD_JSON TEXT";
    let mut out = String::with_capacity(signature.len() + 9);
    let mut rest = signature;
    while let Some(pos) = rest.find(FROM) {
        let after = &rest[pos + FROM.len()..];
        out.push_str(&rest[..pos + FROM.len()]);
        if after.starts_with(',') || after.starts_with(')') {
            out.push_str(" NOT NULL");
            // Only the first occurrence is rewritten, as Maka's replace does.
            out.push_str(after);
            return out;
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// How one file's schema objects differ from a generation's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaDiff {
    pub missing: Vec<String>,
    pub changed: Vec<String>,
    pub unexpected: Vec<String>,
}

impl SchemaDiff {
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.changed.is_empty() && self.unexpected.is_empty()
    }
}

/// Maka's SQL normalization: comments dropped, runs of white space folded to one
/// space, no space around `( ) , ;` (none after `(` or `,`), everything outside quotes
/// upper-cased, quoted text (`'…'`, `"…"`, `` `…` ``, `[…]`) kept verbatim.
pub fn normalize_sql(sql: &str) -> String {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = String::with_capacity(sql.len());
    let mut pending_space = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '-' && next == Some('-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            pending_space |= !out.is_empty();
            // The newline itself is white space and is handled on the next turn.
            continue;
        }
        if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() {
                if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    i += 1;
                    break;
                }
                i += 1;
            }
            i += 1;
            pending_space |= !out.is_empty();
            continue;
        }
        if matches!(c, '\'' | '"' | '`' | '[') {
            if pending_space {
                out.push(' ');
            }
            let close = if c == '[' { ']' } else { c };
            out.push(c);
            i += 1;
            while i < chars.len() {
                out.push(chars[i]);
                if chars[i] != close {
                    i += 1;
                    continue;
                }
                if close != ']' && chars.get(i + 1) == Some(&close) {
                    i += 1;
                    out.push(chars[i]);
                    i += 1;
                    continue;
                }
                break;
            }
            i += 1;
            pending_space = false;
            continue;
        }
        if c.is_whitespace() {
            pending_space |= !out.is_empty();
            i += 1;
            continue;
        }
        if matches!(c, '(' | ')' | ',' | ';') {
            let trimmed = out.trim_end().len();
            out.truncate(trimmed);
            out.push(c);
            pending_space = false;
            i += 1;
            continue;
        }
        if pending_space && !out.ends_with('(') && !out.ends_with(',') {
            out.push(' ');
        }
        out.extend(c.to_uppercase());
        pending_space = false;
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_whitespace_case_comments_and_quotes() {
        // A quoted name keeps a pending space even after `,` (Maka's rule).
        let sql = "create  table x ( -- note\n a  text /* c */ not null , \"Mixed\" 'Keep it' )";
        assert_eq!(
            normalize_sql(sql),
            "CREATE TABLE X(A TEXT NOT NULL, \"Mixed\" 'Keep it')"
        );
    }

    #[test]
    fn doubled_quote_stays_inside_the_literal() {
        assert_eq!(normalize_sql("check (a = 'it''s')"), "CHECK(A = 'it''s')");
    }

    #[test]
    fn released_exception_adds_not_null_once() {
        let o = schema_object(
            "table",
            "workflow_quote_companion_cleanup",
            "workflow_quote_companion_cleanup",
            "CREATE TABLE workflow_quote_companion_cleanup (id TEXT, record_json TEXT)",
        );
        assert!(
            o.signature.ends_with("RECORD_JSON TEXT NOT NULL)"),
            "{}",
            o.signature
        );
    }
}
