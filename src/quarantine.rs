//! `doctor quarantine`: which sessions hold the damage that keeps Maka's gate shut or
//! its start-up from finishing. Pure: a scan report in, reasons out.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::scan::runs::{RunReport, RunState};
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

/// The code under which a run's state makes Maka's strict start-up recovery throw,
/// or `None` when it does not.
pub fn startup_code(run: &RunReport) -> Option<&'static str> {
    if run.session_id == WORKSPACE_AUTHORITY_SESSION {
        return None;
    }
    let code = match run.state {
        RunState::Unreadable => "run_unreadable",
        RunState::Ambiguous => "ambiguous_terminals",
        RunState::TerminalWithoutStatus => "terminal_without_status",
        RunState::TerminalNotTail => "terminal_not_tail",
        RunState::TerminalUnusable => "terminal_unusable",
        RunState::HeaderUndecodable => "run_header_undecodable",
        _ if run.invocation_ids.len() > 1 => "run_identity_conflict",
        _ => return None,
    };
    Some(code)
}

/// The start-up blocker code of a stuck run whose recovery write Maka's store refuses
/// (every append is refused): the session holds no damage of its own.
pub const APPENDS_REFUSED: &str = "appends_refused";

/// Runs that make Maka's strict start-up recovery throw: `(session, run, code)`.
/// Runs of archived sessions are left out (Maka's recovery skips those sessions).
pub fn startup_blockers(
    report: &ScanReport,
    archived: &BTreeSet<String>,
) -> Vec<(String, String, &'static str)> {
    let mut out: Vec<(String, String, &'static str)> = report
        .runs
        .iter()
        .filter(|r| !archived.contains(&r.session_id))
        .filter_map(|r| startup_code(r).map(|c| (r.session_id.clone(), r.run_id.clone(), c)))
        .collect();
    // So does a session header or a stored message it cannot read (every session's,
    // archived ones too); it names no run, so its run is "".
    for f in &report.findings {
        let code = match f.code {
            "session_header_undecodable" => "session_header_undecodable",
            "session_message_unreadable" => "session_message_unreadable",
            _ => continue,
        };
        if let Some(s) = &f.session_id {
            let key = (s.clone(), String::new(), code);
            if !out.contains(&key) {
                out.push(key);
            }
        }
    }
    // So does a continuation claim it cannot read, when it recovers the claim's target
    // session (listed, not archived: the finding names it only then).
    for f in &report.findings {
        if let (true, Some(s)) = (f.code == "continuation_claim_unreadable", &f.session_id) {
            let key = (s.clone(), String::new(), "continuation_claim_unreadable");
            if !archived.contains(s) && !out.contains(&key) {
                out.push(key);
            }
        }
    }
    // While Maka's store refuses every append (a continuation claim that does not
    // read), the terminal event its recovery writes for a stuck run is refused too, and
    // strict start-up throws on it.
    if report.maka_gate.plain_appends_refused {
        for r in &report.runs {
            let key = (r.session_id.clone(), r.run_id.clone(), APPENDS_REFUSED);
            if r.state == RunState::Stuck
                && r.session_id != WORKSPACE_AUTHORITY_SESSION
                && !archived.contains(&r.session_id)
                && !out.contains(&key)
            {
                out.push(key);
            }
        }
    }
    // A run event Maka cannot decode stops its strict recovery just the same.
    for f in &report.findings {
        if let (true, Some(s), Some(r)) =
            (f.code == "run_event_undecodable", &f.session_id, &f.run_id)
        {
            let key = (s.clone(), r.clone(), "run_event_undecodable");
            if s != WORKSPACE_AUTHORITY_SESSION && !archived.contains(s) && !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
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
