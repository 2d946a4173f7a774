//! `doctor quarantine` and `doctor restore`: which sessions hold the damage that keeps
//! Maka's gate shut or its start-up from finishing (here, pure: a scan report in,
//! reasons out), the bundles and folders they are set aside in (`files`), the apply
//! (`apply`), its inverse (`restore`, and `excised` for the bundles of `doctor
//! excise`) and the document both print (`document`).

pub mod apply;
pub mod document;
pub mod excised;
pub mod files;
pub mod rederived;
pub mod restore;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

pub use crate::scan::startup::{startup_blockers, startup_code, APPENDS_REFUSED};
use crate::scan::{ScanReport, WORKSPACE_AUTHORITY_SESSION};

/// Why a session is set aside.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Reason {
    /// A scanner issue code, `event_undecodable`, a run-state code, or `named` for a
    /// session given with `--session`.
    pub code: String,
    /// The event (scanner issues, undecodable rows) or run (run states) it names.
    pub id: Option<String>,
}

/// Every session holding damage, with its reasons (sorted, deduplicated). The
/// workspace-authority session is never included.
pub fn damaged_sessions(
    report: &ScanReport,
    archived: &BTreeSet<String>,
) -> BTreeMap<String, Vec<Reason>> {
    let mut out: BTreeMap<String, BTreeSet<Reason>> = BTreeMap::new();
    for issue in &report.issues {
        out.entry(issue.session_id.to_string())
            .or_default()
            .insert(Reason {
                code: issue.code.as_str().to_owned(),
                id: Some(issue.event_id.to_string()),
            });
    }
    for f in &report.findings {
        // Maka's start-up reads every session header, archived ones too.
        if f.code == "session_header_undecodable" {
            if let Some(s) = &f.session_id {
                out.entry(s.clone()).or_default().insert(Reason {
                    code: f.code.to_owned(),
                    id: None,
                });
            }
        }
        if f.code == "event_undecodable" {
            if let Some(s) = &f.session_id {
                out.entry(s.clone()).or_default().insert(Reason {
                    code: f.code.to_owned(),
                    id: f.event_id.clone(),
                });
            }
        }
    }
    for (s, r, code) in startup_blockers(report, archived) {
        if code == APPENDS_REFUSED {
            continue; // the claim row is the damage, not this session
        }
        out.entry(s).or_default().insert(Reason {
            code: code.to_owned(),
            id: (!r.is_empty()).then_some(r),
        });
    }
    out.remove(WORKSPACE_AUTHORITY_SESSION);
    out.into_iter()
        .map(|(s, r)| (s, r.into_iter().collect()))
        .collect()
}

/// A file name for a session's bundle: the id with every byte outside
/// `[A-Za-z0-9._-]` (and a leading `.`) percent-encoded.
pub fn bundle_file_name(session_id: &str) -> String {
    let mut s = String::new();
    for (i, b) in session_id.bytes().enumerate() {
        let ok = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if ok {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    if s.is_empty() {
        s.push_str("%00");
    }
    format!("{s}.bundle.json")
}

#[cfg(test)]
mod tests {
    use super::bundle_file_name;

    #[test]
    fn bundle_names_are_safe() {
        assert_eq!(bundle_file_name("abc-1_2.x"), "abc-1_2.x.bundle.json");
        assert_eq!(bundle_file_name("../a/b"), "%2E.%2Fa%2Fb.bundle.json");
        assert_eq!(bundle_file_name(""), "%00.bundle.json");
    }
}
