//! Expectations files for CI: the findings a fixture workspace is known to have.
//!
//! Format: `{"schema_version":1,"findings":[{code, session_id, run_id, event_id,
//! operation_id, tool_call_id}, ...]}`, entries sorted, compared as a multiset. Only
//! database content decides findings, so writing and comparing round-trip exactly.

use serde::{Deserialize, Serialize};

use crate::findings::Finding;

/// One expected finding: its code and the ids that identify it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub code: String,
    pub session_id: Option<String>,
    pub run_id: Option<String>,
    pub event_id: Option<String>,
    pub operation_id: Option<String>,
    pub tool_call_id: Option<String>,
}

impl From<&Finding> for Expected {
    fn from(f: &Finding) -> Expected {
        Expected {
            code: f.code.to_owned(),
            session_id: f.session_id.clone(),
            run_id: f.run_id.clone(),
            event_id: f.event_id.clone(),
            operation_id: f.operation_id.clone(),
            tool_call_id: f.tool_call_id.clone(),
        }
    }
}

/// The file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectFile {
    pub schema_version: u32,
    pub findings: Vec<Expected>,
}

impl ExpectFile {
    /// The file for these findings, sorted.
    pub fn from_findings(findings: &[Finding]) -> ExpectFile {
        let mut findings: Vec<Expected> = findings.iter().map(Expected::from).collect();
        findings.sort();
        ExpectFile {
            schema_version: 1,
            findings,
        }
    }

    /// Pretty JSON with a trailing newline (reviewable in a diff).
    pub fn to_text(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Parses a file's text.
    pub fn parse(text: &str) -> Result<ExpectFile, String> {
        let f: ExpectFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if f.schema_version != 1 {
            return Err(format!(
                "schema_version {} is not supported (expected 1)",
                f.schema_version
            ));
        }
        Ok(f)
    }
}

/// The result of comparing findings with expectations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// Expected but not found.
    pub missing: Vec<Expected>,
    /// Found but not expected.
    pub new: Vec<Expected>,
}

impl Comparison {
    pub fn matches(&self) -> bool {
        self.missing.is_empty() && self.new.is_empty()
    }
}

/// Multiset comparison of actual findings against expected ones.
pub fn compare(actual: &[Finding], expected: &[Expected]) -> Comparison {
    let mut want: Vec<Expected> = expected.to_vec();
    want.sort();
    let mut got: Vec<Expected> = actual.iter().map(Expected::from).collect();
    got.sort();
    let mut out = Comparison::default();
    let (mut i, mut j) = (0, 0);
    while i < want.len() || j < got.len() {
        match (want.get(i), got.get(j)) {
            (Some(w), Some(g)) if w == g => {
                i += 1;
                j += 1;
            }
            (Some(w), Some(g)) if w < g => {
                out.missing.push(w.clone());
                i += 1;
            }
            (Some(_), Some(g)) => {
                out.new.push(g.clone());
                j += 1;
            }
            (Some(w), None) => {
                out.missing.push(w.clone());
                i += 1;
            }
            (None, Some(g)) => {
                out.new.push(g.clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(code: &'static str, ev: &str) -> Finding {
        Finding::new(code, "m").session("s").event(ev)
    }

    #[test]
    fn exact_match_missing_new_and_multiplicity() {
        let actual = vec![
            f("orphan_response", "e1"),
            f("orphan_response", "e1"),
            f("duplicate_call", "e2"),
        ];
        let exp = ExpectFile::from_findings(&actual);
        assert!(compare(&actual, &exp.findings).matches());
        let c = compare(&actual[..2], &exp.findings);
        assert_eq!(c.missing.len(), 1);
        assert_eq!(c.missing[0].code, "duplicate_call");
        let c = compare(&actual, &exp.findings[..2]);
        assert_eq!(c.new.len(), 1);
        // Multiplicity counts: one copy fewer is a missing entry.
        let c = compare(&actual[1..], &exp.findings);
        assert_eq!(c.missing.len(), 1);
    }

    #[test]
    fn round_trips_through_text_and_rejects_extra_keys() {
        let exp = ExpectFile::from_findings(&[f("orphan_response", "e1")]);
        assert_eq!(ExpectFile::parse(&exp.to_text()).unwrap(), exp);
        let bad = exp
            .to_text()
            .replace("\"code\"", "\"severity\": \"error\", \"code\"");
        assert!(ExpectFile::parse(&bad).is_err());
    }
}

/// `expectations` in the scan report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExpectationsReport {
    pub file: String,
    /// `expect` (exact match) or `baseline` (only new findings fail).
    pub mode: &'static str,
    pub matched: bool,
    pub missing: Vec<Expected>,
    pub new: Vec<Expected>,
}
