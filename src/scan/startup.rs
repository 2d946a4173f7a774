//! The scan's side of Maka's start-up: what of a scan makes Maka's strict start-up
//! recovery stop (the runs and headers it throws on; pure: a scan report in, blockers
//! out), and attaching the start-up model's verdict (`crate::startup`, which knows
//! nothing of scans) to the report.

use std::collections::BTreeSet;

use super::runs::{RunReport, RunState};
use super::{ScanReport, WORKSPACE_AUTHORITY_SESSION};
use crate::db::startup::StartupFacts;
use crate::db::{DbError, Workspace};

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

/// Sets `startup` for a file of a Maka newer than this wsledger: what its start-up does
/// is not known, so nothing is said to refuse or block it (issue notes, 41).
pub(super) fn attach_not_known(ws: &Workspace, report: &mut ScanReport) -> Result<(), DbError> {
    let r = crate::release::recognize(&ws.schema_facts()?);
    report.startup = Some(crate::startup::Startup::not_known(r.newer_words()));
    Ok(())
}

/// Sets `startup` (`crate::startup`: the writing release's composition, then what the
/// scan found about strict start-up recovery) and, when Maka refuses the file, its
/// `startup_refused` finding first, without the findings that only restate a missing
/// table.
pub(super) fn attach_startup(
    ws: &Workspace,
    report: &mut ScanReport,
    facts: &StartupFacts,
) -> Result<(), DbError> {
    use crate::startup;
    let release = startup::writer_release(&report.workspace_release.rules);
    let Some(verdict) = startup::verdict(facts, release) else {
        return Ok(());
    };
    // Archived sessions are read only when some run could block (rare).
    let mut blockers = startup_blockers(report, &BTreeSet::new());
    if !blockers.is_empty() {
        blockers = startup_blockers(report, &ws.archived_sessions()?);
    }
    let blockers = blockers
        .into_iter()
        .map(|(session_id, run_id, code)| startup::Blocker {
            session_id,
            run_id,
            code: code.to_owned(),
        })
        .collect();
    let dropped = startup::drop_restated(&mut report.findings, facts, &verdict);
    let refusal = startup::refusal_finding(&verdict);
    if let Some(f) = &refusal {
        report.findings.insert(0, f.clone());
    }
    if dropped > 0 || refusal.is_some() {
        report.recount();
    }
    report.startup = Some(startup::Startup::new(verdict, blockers));
    Ok(())
}
