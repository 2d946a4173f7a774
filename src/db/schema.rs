//! What Maka's current workspace schema is, and how a file differs from it.
//!
//! Maka refuses to open a file whose schema objects differ from its target in any
//! way (a missing, changed or extra table, index, trigger or view). It compares a
//! normalized form of each object's SQL; `normalize_sql` reproduces that form so the
//! comparison here is the one Maka makes. Pure: no SQL is run in this module.

use std::collections::BTreeMap;

/// `user_version` of the runtime scope Maka writes today.
pub const RUNTIME_USER_VERSION: i64 = 12;

/// `operational_schema_migrations` rows of the current schema (scope, version).
pub const REGISTRY: &[(&str, i64)] = &[
    ("runtime", 12),
    ("session_metadata", 28),
    ("core_execution", 4),
    ("workflow", 9),
    ("usage", 5),
    ("artifact", 1),
    ("operational", 2),
];

/// `runtime_capabilities` rows, each at version 1.
pub const CAPABILITIES: &[&str] = &[
    "runtime_recovery_authority",
    "runtime_continuation_authority",
    "runtime_workspace_version_authority",
];

/// The normalized schema objects of a Maka workspace at the current version, taken
/// from a database Maka itself created (`fixtures/healthy`); a test keeps it in step.
const TARGET_SCHEMA: &str = include_str!("target_schema.txt");

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

/// The target schema as `key → signature`.
pub fn target_schema() -> BTreeMap<String, String> {
    TARGET_SCHEMA
        .lines()
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, s)| (k.to_owned(), s.to_owned()))
        .collect()
}

/// How one file's schema objects differ from the target.
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

/// Compares actual objects against the target.
pub fn diff_schema(actual: &[SchemaObject]) -> SchemaDiff {
    let target = target_schema();
    let actual: BTreeMap<&str, &str> = actual
        .iter()
        .map(|o| (o.key.as_str(), o.signature.as_str()))
        .collect();
    let mut diff = SchemaDiff::default();
    for (key, sig) in &target {
        match actual.get(key.as_str()) {
            None => diff.missing.push(key.clone()),
            Some(s) if *s != sig => diff.changed.push(key.clone()),
            Some(_) => {}
        }
    }
    for key in actual.keys() {
        if !target.contains_key(*key) {
            diff.unexpected.push((*key).to_owned());
        }
    }
    diff
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

    #[test]
    fn diff_reports_missing_changed_and_unexpected() {
        let mut actual: Vec<SchemaObject> = target_schema()
            .into_iter()
            .map(|(key, signature)| SchemaObject { key, signature })
            .collect();
        assert!(diff_schema(&actual).is_empty());
        let removed = actual.remove(0);
        actual[0].signature.push('x');
        actual.push(SchemaObject {
            key: "index:doctor_idx".into(),
            signature: "s".into(),
        });
        let d = diff_schema(&actual);
        assert_eq!(d.missing, vec![removed.key]);
        assert_eq!(d.changed.len(), 1);
        assert_eq!(d.unexpected, vec!["index:doctor_idx".to_owned()]);
    }
}
