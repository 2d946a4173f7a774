//! The scan's side of Maka's start-up: what of a scan makes Maka's strict start-up
//! recovery stop (the runs and headers it throws on; pure: a scan report in, blockers
//! out), and attaching the start-up model's verdict (`crate::startup`, which knows
//! nothing of scans) to the report.

use std::collections::BTreeSet;

use super::pipeline::ScanOptions;
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
        // Strict recovery reads the runs it lists from their headers: events without a
        // header are never read, however they decode.
        RunState::Unreadable if run.header_status.is_none() => return None,
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

/// The refusals of a build's checks of the versions, which come before anything else it
/// reads (`crate::startup::reasons`).
const VERSION_CHECKS: &[&str] = &["schema_newer", "schema_scope_unknown"];

/// Sets `startup` for a file of a Maka newer than this wsledger: what its start-up does
/// is not known, so nothing is said to refuse or block it (issue notes, 41).
///
/// Under `--maka`, a catalogued build is judged all the same where its own checks of
/// the versions decide: they come first, read nothing but the versions, and refuse a
/// scope newer than the build (a downgrade). What it would do past them is not known:
/// the file's other shapes are a newer Maka's. Whether its desktop deletes the file
/// compares versions only, so it is known too.
pub(super) fn attach_not_known(
    ws: &Workspace,
    opts: ScanOptions,
    report: &mut ScanReport,
) -> Result<(), DbError> {
    use crate::release::RELEASES;
    use crate::startup::builds::Maka;
    use crate::startup::Startup;
    let why = crate::release::recognize(&ws.schema_facts()?).newer_words();
    report.startup = Some(Startup::not_known(why.clone()));
    let Some(maka) = opts.maka else {
        return Ok(());
    };
    let facts = ws.startup_facts()?;
    let judge = |build: &str| -> Startup {
        let deletes = crate::startup::builds::desktop_deletes(&facts, build);
        match crate::startup::verdict(&facts, build) {
            Some(v)
                if v.refusal
                    .as_ref()
                    .is_some_and(|r| VERSION_CHECKS.contains(&r.reason)) =>
            {
                Startup::new(v, Vec::new(), deletes)
            }
            _ => Startup::not_known_for(build, why.clone(), deletes),
        }
    };
    match maka {
        Maka::Build(b) => {
            let s = judge(b);
            let writer = crate::release::NEWER;
            if let Some(f) = s
                .refused()
                .then(|| crate::startup::verdict(&facts, b))
                .flatten()
                .and_then(|v| crate::startup::refusal_finding(&v, writer))
            {
                report.findings.insert(0, f);
                report.recount();
            }
            report.startup = Some(s);
        }
        Maka::All => {
            report.compatibility = Some(RELEASES.iter().map(|b| judge(b)).collect());
        }
    }
    Ok(())
}

/// Sets `startup` (`crate::startup`: the writing release's composition, then what the
/// scan found about strict start-up recovery) and, when Maka refuses the file, its
/// `startup_refused` finding first, without the findings that only restate a missing
/// table. For a scan under rules of its own (no other build is judged).
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
    let deletes = startup::builds::desktop_deletes(facts, release);
    set_startup(report, facts, &verdict, blockers, deletes);
    Ok(())
}

/// Sets `startup` to the judged build's and, when it refuses the file, puts its
/// `startup_refused` finding first and drops the findings that only restate it.
fn set_startup(
    report: &mut ScanReport,
    facts: &StartupFacts,
    verdict: &crate::startup::Verdict,
    blockers: Vec<crate::startup::Blocker>,
    desktop_deletes: bool,
) {
    use crate::startup;
    let writer = startup::writer_release(&report.workspace_release.rules);
    let dropped = startup::drop_restated(&mut report.findings, facts, verdict);
    let refusal = startup::refusal_finding(verdict, writer);
    if let Some(f) = &refusal {
        report.findings.insert(0, f.clone());
    }
    if dropped > 0 || refusal.is_some() {
        report.recount();
    }
    report.startup = Some(startup::Startup::new(
        verdict.clone(),
        blockers,
        desktop_deletes,
    ));
}

/// Judges the builds the scan speaks for, once: the one `startup` is for (`--maka`, by
/// default the writer), every catalogued build under `--maka all` (`compatibility`),
/// and every newer one (the upgrade preview); the compositions of the others only
/// (the table's "other builds" line).
pub(super) fn attach_builds(
    ws: &Workspace,
    opts: ScanOptions,
    report: &mut ScanReport,
    facts: &StartupFacts,
) -> Result<(), DbError> {
    use crate::release::{upgrade, RELEASES};
    use crate::startup::builds::Maka;
    let schema = ws.schema_facts()?;
    let recognition = crate::release::recognize(&schema);
    let g = recognition.generation;
    let writer = crate::startup::writer_release(&report.workspace_release.rules);
    let judged_build = match opts.maka {
        Some(Maka::Build(b)) => b,
        _ => writer,
    };
    let all = opts.maka == Some(Maka::All);
    let newer = upgrade::targets_for(g);
    let mut wanted: Vec<&'static str> = vec![judged_build];
    for b in RELEASES.iter().copied().filter(|_| all).chain(newer) {
        if !wanted.contains(&b) {
            wanted.push(b);
        }
    }
    let judged = super::builds::judge_builds(
        ws,
        opts,
        report,
        facts,
        &wanted,
        g.rank(),
        recognition.rules(),
    )?;
    let mut tasks = crate::release::maka02::TaskCount::default();
    ws.for_each_task_event(|s, record| tasks.add(s, record))?;
    let preview = super::release::upgrade_preview(g, &schema, &judged, tasks.finish());
    let writer_refuses = report.maka_gate.tool_writes_refused;
    report
        .findings
        .extend(super::release::upgrade_findings(&preview, writer_refuses));
    report.upgrade = Some(preview);
    report.recount();
    let Some(mine) = judged.iter().find(|j| j.build == judged_build) else {
        return Ok(());
    };
    if let (true, Some(gate)) = (mine.verdict.opens, &mine.gate) {
        // The gate of the build judged, where its rules read the log otherwise.
        report.maka_gate = gate.clone();
    }
    set_startup(
        report,
        facts,
        &mine.verdict,
        mine.blockers.clone(),
        mine.desktop_deletes,
    );
    if all {
        report.compatibility = Some(
            RELEASES
                .iter()
                .filter_map(|b| judged.iter().find(|j| j.build == *b))
                .map(super::builds::Judged::startup)
                .collect(),
        );
    }
    // The other builds' compositions, for the one line that says where they differ.
    report.other_builds = RELEASES
        .iter()
        .filter_map(|b| match judged.iter().find(|j| j.build == *b) {
            Some(j) => Some(j.startup()),
            None => crate::startup::verdict(facts, b).map(|v| {
                let deletes = crate::startup::builds::desktop_deletes(facts, b);
                crate::startup::Startup::new(v, Vec::new(), deletes)
            }),
        })
        .collect();
    Ok(())
}
