//! What of a scan makes Maka's strict start-up recovery stop: the runs and headers it
//! throws on. Pure: a scan report in, blockers out.

use std::collections::BTreeSet;

use super::runs::{RunReport, RunState};
use super::{ScanReport, WORKSPACE_AUTHORITY_SESSION};

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
    // So does a session header it cannot read (every session's, archived ones too);
    // it names no run, so its run is "".
    for f in &report.findings {
        if let (true, Some(s)) = (f.code == "session_header_undecodable", &f.session_id) {
            let key = (s.clone(), String::new(), "session_header_undecodable");
            if !out.contains(&key) {
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
