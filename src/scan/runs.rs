//! Each run's terminal state, as Maka classifies it, turned into findings.

use serde::Serialize;

use super::RunAcc;
use crate::event::{EventStatus, RuntimeEvent};
use crate::findings::Finding;
use crate::header::RunHeader;
use crate::ledger::terminal::{classify_terminal_ledger, RunHeaderView, TerminalKind};

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Header and log agree on a terminal state.
    Terminal,
    /// Header open, no terminal event at all.
    Stuck,
    /// A row of the run does not decode.
    Unreadable,
    /// Header open, one usable terminal event at the tail: Maka adopts it.
    AwaitingAdoption,
    /// Two or more terminal events.
    Ambiguous,
    /// The only terminal event has no terminal status.
    TerminalWithoutStatus,
    /// The terminal event is not the run's last immutable event.
    TerminalNotTail,
    /// Only a partial or other-turn terminal-looking event.
    TerminalUnusable,
    /// Header terminal, no valid terminal event.
    HeaderTerminalWithoutEvent,
    /// Header terminal and the terminal event says otherwise.
    HeaderContradictsTerminal,
    /// Header cannot be decoded.
    HeaderUndecodable,
    /// Events without a header.
    NoHeader,
    /// Events that neither a header nor an opening fact describes, in a file whose
    /// headers cannot be read (a Maka newer than main): not judged.
    NotJudged,
}

/// One run, for reports and repair planning.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub session_id: String,
    pub run_id: String,
    pub header_status: Option<String>,
    pub state: RunState,
    /// `fact`, `none`, `incomplete_single_terminal`, `ambiguous` (Maka's words).
    pub classification: Option<String>,
    pub terminal_event_ids: Vec<String>,
    pub events: u64,
    pub max_seq: i64,
    pub last_event_ts: Option<f64>,
    pub invocation_ids: Vec<String>,
    /// Judged off the runtime event spine (its invocation-opening fact), not a header.
    pub on_spine: bool,
}

fn header_view(h: &RunHeader) -> RunHeaderView {
    RunHeaderView {
        session_id: h.session_id.as_str().into(),
        run_id: h.run_id.as_str().into(),
        turn_id: h.turn_id.as_str().into(),
        status: h.status,
        failure_class: h.failure_class.as_deref().map(Into::into),
        abort_source: h.abort_source.as_deref().map(Into::into),
    }
}

/// Matching terminals: not partial, same session/run/turn as the header.
fn matching<'a>(h: &RunHeader, acc: &'a RunAcc) -> Vec<&'a (i64, RuntimeEvent)> {
    acc.terminals
        .iter()
        .filter(|(_, e)| {
            !e.partial
                && e.session_id == *h.session_id.as_str()
                && e.run_id == *h.run_id.as_str()
                && e.turn_id == *h.turn_id.as_str()
        })
        .collect()
}

/// Assesses one run that has a decodable header (`acc` is empty when it has no events).
pub fn assess_header_run(h: &RunHeader, acc: &RunAcc) -> (RunReport, Vec<Finding>) {
    let mut findings = Vec::new();
    let (state, classification, ids) = assess(h, acc);
    let f = |code: &'static str, msg: String| {
        Finding::new(code, msg)
            .session(&h.session_id)
            .run(&h.run_id)
    };
    let status = h.status.as_str();
    match state {
        RunState::Stuck => findings.push(f(
            "run_stuck_running",
            format!(
                "header is `{status}` and the log has no terminal event ({} events)",
                acc.rows
            ),
        )),
        RunState::Unreadable => findings.push(f(
            "run_unreadable",
            format!(
                "{} of {} rows of this run cannot be decoded",
                acc.undecodable, acc.rows
            ),
        )),
        RunState::Ambiguous => findings.push(f(
            "run_terminal_ambiguous",
            format!("{} terminal events: {}", ids.len(), ids.join(", ")),
        )),
        RunState::TerminalWithoutStatus => {
            let mut x = f(
                "run_terminal_without_status",
                "the only terminal event has no terminal status".into(),
            );
            x.event_id = ids.first().cloned();
            findings.push(x);
        }
        RunState::TerminalNotTail => {
            let mut x = f(
                "run_terminal_not_tail",
                format!(
                    "terminal event is not the last event of the run (event_seq {} is)",
                    acc.max_seq
                ),
            );
            x.event_id = ids.first().cloned();
            findings.push(x);
        }
        RunState::TerminalUnusable => {
            let unusable: Vec<String> = acc
                .terminals
                .iter()
                .map(|(_, e)| e.id.to_string())
                .collect();
            let mut x = f(
                "run_terminal_unusable",
                format!("header is `{status}`; the only terminal-looking events are partial or name another turn"),
            );
            x.event_id = unusable.first().cloned();
            findings.push(x);
        }
        RunState::HeaderTerminalWithoutEvent => findings.push(f(
            "run_header_terminal_without_event",
            format!("header is `{status}` but the log has no valid terminal event"),
        )),
        RunState::HeaderContradictsTerminal => {
            let mut x = f(
                "run_header_contradicts_terminal",
                format!("header is `{status}` but its terminal event says otherwise"),
            );
            x.event_id = ids.first().cloned();
            findings.push(x);
        }
        _ => {}
    }
    let report = RunReport {
        session_id: h.session_id.clone(),
        run_id: h.run_id.clone(),
        header_status: Some(h.status.as_str().to_owned()),
        state,
        classification,
        terminal_event_ids: ids,
        events: acc.rows,
        max_seq: acc.max_seq,
        last_event_ts: acc.last_ts,
        invocation_ids: acc.invocations.clone(),
        on_spine: false,
    };
    (report, findings)
}

/// Assesses a run that has events but no header row.
pub fn assess_orphan_run(s: &str, r: &str, acc: &RunAcc) -> (RunReport, Vec<Finding>) {
    let mut findings = Vec::new();
    let state = if acc.undecodable > 0 {
        RunState::Unreadable
    } else {
        RunState::NoHeader
    };
    if acc.undecodable > 0 {
        findings.push(unreadable_finding(s, r, acc));
    }
    findings.push(
        Finding::new(
            "run_header_missing",
            format!("{} runtime events but no core_agent_runs row", acc.rows),
        )
        .session(s)
        .run(r),
    );
    let report = RunReport {
        session_id: s.to_owned(),
        run_id: r.to_owned(),
        header_status: None,
        state,
        classification: None,
        terminal_event_ids: acc
            .terminals
            .iter()
            .map(|(_, e)| e.id.to_string())
            .collect(),
        events: acc.rows,
        max_seq: acc.max_seq,
        last_event_ts: acc.last_ts,
        invocation_ids: acc.invocations.clone(),
        on_spine: false,
    };
    (report, findings)
}

/// Assesses a run that has no header but an invocation-opening fact (a Maka newer
/// than main opens every run with one: in its events, or on the shelf its migration
/// keeps), turn `turn`. There is no header status: the log alone says whether the run
/// ended. It is stuck only when every row decodes and it has no terminal-looking event
/// at all (what the newer start-up recovery fails closed, `app_restarted`); the
/// terminal problems are judged as for a header run, against the opening's turn.
pub fn assess_spine_run(s: &str, r: &str, turn: &str, acc: &RunAcc) -> (RunReport, Vec<Finding>) {
    let f = |code: &'static str, msg: String| Finding::new(code, msg).session(s).run(r);
    let matched: Vec<&(i64, RuntimeEvent)> = acc
        .terminals
        .iter()
        .filter(|(_, e)| !e.partial && e.session_id == *s && e.run_id == *r && e.turn_id == *turn)
        .collect();
    let ids: Vec<String> = matched.iter().map(|(_, e)| e.id.to_string()).collect();
    let mut findings = Vec::new();
    let state = if acc.undecodable > 0 {
        findings.push(unreadable_finding(s, r, acc));
        RunState::Unreadable
    } else if matched.len() > 1 {
        findings.push(f(
            "run_terminal_ambiguous",
            format!("{} terminal events: {}", ids.len(), ids.join(", ")),
        ));
        RunState::Ambiguous
    } else if let Some((seq, event)) = matched.first() {
        let problem = if !event.status.is_some_and(EventStatus::is_terminal) {
            Some((
                RunState::TerminalWithoutStatus,
                f(
                    "run_terminal_without_status",
                    "the only terminal event has no terminal status".into(),
                ),
            ))
        } else if *seq < acc.max_seq {
            Some((
                RunState::TerminalNotTail,
                f(
                    "run_terminal_not_tail",
                    format!(
                        "terminal event is not the last event of the run (event_seq {} is)",
                        acc.max_seq
                    ),
                ),
            ))
        } else {
            None
        };
        match problem {
            Some((state, mut x)) => {
                x.event_id = ids.first().cloned();
                findings.push(x);
                state
            }
            None => RunState::Terminal,
        }
    } else if let Some((_, e)) = acc.terminals.first() {
        let mut x = f(
            "run_terminal_unusable",
            "opened by its invocation-opening fact; the only terminal-looking events are \
             partial or name another turn"
                .into(),
        );
        x.event_id = Some(e.id.to_string());
        findings.push(x);
        RunState::TerminalUnusable
    } else {
        findings.push(f(
            "run_stuck_running",
            format!(
                "opened by its invocation-opening fact (no header: a Maka newer than main \
                 wrote it) and the log has no terminal event ({} events)",
                acc.rows
            ),
        ));
        RunState::Stuck
    };
    let report = RunReport {
        state,
        terminal_event_ids: ids,
        on_spine: true,
        ..header_undecodable_report(s, r, acc)
    };
    (report, findings)
}

/// A run with events but neither a header nor an opening fact, under rules that read
/// runs off the spine: with readable headers, a run without its header (as for main);
/// else a run with a row Maka cannot decode is unreadable (a fact), and any other is
/// not judged (`None`: whether it is open is unknown).
pub fn assess_unopened_run(
    s: &str,
    r: &str,
    acc: &RunAcc,
    headers_readable: bool,
) -> Option<(RunReport, Vec<Finding>)> {
    if headers_readable {
        return Some(assess_orphan_run(s, r, acc));
    }
    if acc.undecodable == 0 {
        return None;
    }
    let finding = unreadable_finding(s, r, acc);
    let report = RunReport {
        state: RunState::Unreadable,
        ..header_undecodable_report(s, r, acc)
    };
    Some((report, vec![finding]))
}

/// The report of a run that neither a header nor an opening fact describes, in a
/// source whose headers cannot be read: not judged.
pub fn not_judged_report(s: &str, r: &str, acc: &RunAcc) -> RunReport {
    RunReport {
        state: RunState::NotJudged,
        ..header_undecodable_report(s, r, acc)
    }
}

/// `run_unreadable`: rows of the run that do not decode.
fn unreadable_finding(s: &str, r: &str, acc: &RunAcc) -> Finding {
    Finding::new(
        "run_unreadable",
        format!(
            "{} of {} rows of this run cannot be decoded",
            acc.undecodable, acc.rows
        ),
    )
    .session(s)
    .run(r)
}

/// The report of a run whose header does not decode.
pub fn header_undecodable_report(s: &str, r: &str, acc: &RunAcc) -> RunReport {
    RunReport {
        session_id: s.to_owned(),
        run_id: r.to_owned(),
        header_status: None,
        state: RunState::HeaderUndecodable,
        classification: None,
        terminal_event_ids: Vec::new(),
        events: acc.rows,
        max_seq: acc.max_seq,
        last_event_ts: acc.last_ts,
        invocation_ids: acc.invocations.clone(),
        on_spine: false,
    }
}

/// One run's state, Maka's classification word, and the matching terminal ids.
fn assess(h: &RunHeader, acc: &RunAcc) -> (RunState, Option<String>, Vec<String>) {
    let Some((state, class)) = classified_state(h, acc) else {
        return (RunState::Unreadable, None, Vec::new());
    };
    let word = class.kind.as_str().to_owned();
    let ids: Vec<String> = class
        .terminal_event_ids
        .iter()
        .map(ToString::to_string)
        .collect();
    (state, Some(word), ids)
}

/// The state [`assess_header_run`] gives the run, without its report: the walk asks
/// it of every run, and keeps the report only of runs not plainly terminal. Its
/// findings are empty exactly when this is `Terminal` or `AwaitingAdoption`.
pub fn header_run_state(h: &RunHeader, acc: &RunAcc) -> RunState {
    classified_state(h, acc).map_or(RunState::Unreadable, |(state, _)| state)
}

/// The state and Maka's classification; `None` when a row does not decode.
fn classified_state(
    h: &RunHeader,
    acc: &RunAcc,
) -> Option<(RunState, crate::ledger::terminal::TerminalClassification)> {
    if acc.undecodable > 0 {
        return None;
    }
    let events: Vec<&RuntimeEvent> = acc.terminals.iter().map(|(_, e)| e).collect();
    let class = classify_terminal_ledger(&header_view(h), &events);
    let matched = matching(h, acc);
    let is_tail = |seq: i64| seq >= acc.max_seq;
    let state = match class.kind {
        TerminalKind::Ambiguous => RunState::Ambiguous,
        TerminalKind::None => {
            if !acc.terminals.is_empty() {
                RunState::TerminalUnusable
            } else if h.status.is_terminal() {
                RunState::HeaderTerminalWithoutEvent
            } else {
                RunState::Stuck
            }
        }
        TerminalKind::IncompleteSingleTerminal | TerminalKind::Fact => {
            let (seq, ev) = matched
                .first()
                .map(|(s, e)| (*s, e))
                .expect("one matching terminal");
            let has_status = ev.status.is_some_and(EventStatus::is_terminal);
            if !has_status {
                RunState::TerminalWithoutStatus
            } else if !is_tail(seq) {
                RunState::TerminalNotTail
            } else if !h.status.is_terminal() {
                RunState::AwaitingAdoption
            } else if class.kind == TerminalKind::Fact
                && class
                    .fact
                    .as_ref()
                    .is_some_and(|f| f.run_status.run_status() != h.status)
            {
                RunState::HeaderContradictsTerminal
            } else {
                RunState::Terminal
            }
        }
    };
    Some((state, class))
}

/// What an in-memory walk needs to judge runs off the event spine (rules that read
/// runs by their opening fact): the shelved openings, `(session, run) → turn`, and
/// whether the source's headers can be read at all.
pub struct Spine {
    pub shelved: std::collections::HashMap<(String, String), String>,
    pub headers_readable: bool,
}

/// Assesses every run of an in-memory walk (replay holds one session): headers in
/// their order, then runs with events but no header (sorted), then undecodable headers.
/// With `spine`, a run without a header but with an opening fact is judged off the
/// spine, and one with neither, where headers cannot be read, is not judged.
pub fn assess_runs(
    headers: &[RunHeader],
    header_failed: &std::collections::BTreeSet<(String, String)>,
    runs: &std::collections::HashMap<(String, String), RunAcc>,
    spine: Option<&Spine>,
) -> (Vec<RunReport>, Vec<Finding>) {
    let empty = RunAcc::default();
    let mut reports = Vec::new();
    let mut findings = Vec::new();
    for h in headers {
        let acc = runs
            .get(&(h.session_id.clone(), h.run_id.clone()))
            .unwrap_or(&empty);
        let (r, f) = assess_header_run(h, acc);
        reports.push(r);
        findings.extend(f);
    }
    let with_header: std::collections::BTreeSet<(&str, &str)> = headers
        .iter()
        .map(|h| (h.session_id.as_str(), h.run_id.as_str()))
        .collect();
    let mut orphans: Vec<(&(String, String), &RunAcc)> = runs
        .iter()
        .filter(|((s, r), _)| {
            s != super::WORKSPACE_AUTHORITY_SESSION
                && !with_header.contains(&(s.as_str(), r.as_str()))
                && !header_failed.contains(&(s.clone(), r.clone()))
        })
        .collect();
    orphans.sort_by(|a, b| a.0.cmp(b.0));
    for ((s, r), acc) in orphans {
        let opened = spine.and_then(|sp| {
            acc.opened
                .clone()
                .or_else(|| sp.shelved.get(&(s.clone(), r.clone())).cloned())
        });
        let (rep, f) = match (spine, opened) {
            (Some(_), Some(turn)) => assess_spine_run(s, r, &turn, acc),
            (Some(sp), None) => assess_unopened_run(s, r, acc, sp.headers_readable)
                .unwrap_or_else(|| (not_judged_report(s, r, acc), Vec::new())),
            (None, _) => assess_orphan_run(s, r, acc),
        };
        reports.push(rep);
        findings.extend(f);
    }
    for (s, r) in header_failed {
        let acc = runs.get(&(s.clone(), r.clone())).unwrap_or(&empty);
        reports.push(header_undecodable_report(s, r, acc));
    }
    (reports, findings)
}
