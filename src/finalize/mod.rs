//! `doctor finalize-runs`: the plan. Pure: values in (the scan report and the rows of
//! each candidate run), a [`Plan`] out. No I/O and no clock: "now" is an input.
//!
//! Which runs, what is written, and why, follow Maka's own start-up recovery:
//! - header `created|running|waiting_for_user`, no terminal event → `finalize`: a
//!   failed / `app_restarted` terminal RuntimeEvent with the recovery reason Maka's
//!   recovery would choose (after the T2 outcomes Maka settles first);
//! - header open, one usable terminal event at the tail → `adopt` (only with
//!   `--project-header`; otherwise left for Maka and listed as `awaiting_adoption`);
//! - header terminal, no terminal event → `repair_missing_terminal`: what Maka's
//!   ledger repair ends with (failed / `missing_terminal_event`) plus the header patch.
//!
//! Event ids and timestamps are derived from the run (see [`ids`]), so planning the
//! same rows twice gives the same bytes.

mod adopt;
pub mod apply;
mod header_projection;
pub mod ids;
mod new_terminal;
pub mod planning;
pub mod records;
pub mod recovery;
mod run_plan;
mod session_cursor;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::db::facts::{ClaimRow, InvocationUsers, RunRows, SessionRows};
use crate::db::write::WriteSet;
use crate::event::RuntimeEvent;
use crate::header::RunHeader;
use crate::scan::runs::{RunReport, RunState};
use crate::scan::ScanReport;

pub use planning::{plan_finalize, plan_finalize_on, FinalizePlanning, PlanUse};

use run_plan::{plan_run, Outcome, RunCtx};
use session_cursor::SessionCursor;

/// Version of the plan's JSON document.
pub const PLAN_SCHEMA_VERSION: u32 = 1;

/// Options of a plan.
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    pub session: Option<String>,
    pub run: Option<String>,
    /// Only runs whose last activity is at least this old (ms).
    pub older_than_ms: Option<i64>,
    /// "Now" in ms since the epoch (for `older_than_ms`).
    pub now_ms: i64,
    pub include_archived: bool,
    pub project_header: bool,
}

/// What the plan does to a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Finalize,
    Adopt,
    RepairMissingTerminal,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Finalize => "finalize",
            Action::Adopt => "adopt",
            Action::RepairMissingTerminal => "repair_missing_terminal",
        }
    }
}

/// Why a run is left alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    AmbiguousTerminals,
    TerminalWithoutStatus,
    TerminalNotTail,
    ContinuationClaim,
    WorkspaceAuthority,
    ArchivedSession,
    RowsUndecodable,
    AwaitingAdoption,
    InvocationConflict,
    NeedsToolOutcome,
    NeedsTranscriptBackfill,
    TranscriptUnavailable,
    RunOnSpine,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::AmbiguousTerminals => "ambiguous_terminals",
            SkipReason::TerminalWithoutStatus => "terminal_without_status",
            SkipReason::TerminalNotTail => "terminal_not_tail",
            SkipReason::ContinuationClaim => "continuation_claim",
            SkipReason::WorkspaceAuthority => "workspace_authority",
            SkipReason::ArchivedSession => "archived_session",
            SkipReason::RowsUndecodable => "rows_undecodable",
            SkipReason::AwaitingAdoption => "awaiting_adoption",
            SkipReason::InvocationConflict => "invocation_conflict",
            SkipReason::NeedsToolOutcome => "needs_tool_outcome",
            SkipReason::NeedsTranscriptBackfill => "needs_transcript_backfill",
            SkipReason::TranscriptUnavailable => "transcript_unavailable",
            SkipReason::RunOnSpine => "run_on_spine",
        }
    }
}

/// One planned run (the JSON contract's `plan[]` entry).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanEntry {
    pub session_id: String,
    pub run_id: String,
    pub action: Action,
    /// The header's status once projected (`failed`, `completed`, `cancelled`).
    pub status: String,
    pub failure_class: Option<String>,
    /// The terminal RuntimeEvent written (`adopt`: the one adopted).
    pub event_id: String,
    pub recovery_reason: String,
    /// `event_seq` of that event.
    pub event_seq: i64,
    /// Session ordinal written for it (`adopt`: none).
    pub ordinal: Option<i64>,
    /// The event's `ts` (also `committed_at`, and the header's `completedAt`).
    pub ts: i64,
    /// The session file a `turn_state` line is appended to (v0.1.2, v0.1.3; absent
    /// where the record goes to `session_messages` or none is written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_file: Option<String>,
    /// Operations whose T2 outcome is written first (not part of the JSON contract).
    #[serde(skip)]
    pub settles: Vec<String>,
    /// Whether the header, run event, transcript and session are written too.
    #[serde(skip)]
    pub header_written: bool,
}

/// One run left alone (the JSON contract's `skipped[]` entry).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub session_id: String,
    pub run_id: String,
    pub reason: SkipReason,
    pub detail: String,
}

/// The plan; its JSON form is the dry run's output.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub schema_version: u32,
    pub plan: Vec<PlanEntry>,
    pub skipped: Vec<Skipped>,
    pub applied: bool,
    pub backup: Option<String>,
    /// The Maka release whose schema the apply writes in (`releases`, `exact`,
    /// `differences`); `null` when an apply would refuse.
    pub schema_basis: Option<serde_json::Value>,
    /// Why `--apply` would refuse this file (`null` when it would not).
    pub apply_refusal: Option<String>,
    /// Where the transcript files an apply appends to were copied before it (beside
    /// the database backup); absent when no file is appended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_backup: Option<String>,
    /// Exactly what an apply writes.
    #[serde(skip)]
    pub writes: WriteSet,
}

/// The rows of one candidate run.
#[derive(Clone, Debug)]
pub struct RunInput {
    pub rows: RunRows,
    /// Users of the invocation id [`invocation_for`] chose (absent when it refused).
    pub invocation_users: Option<InvocationUsers>,
}

/// Everything the planner reads besides the scan.
#[derive(Clone, Debug, Default)]
pub struct PlanInput {
    pub runs: HashMap<(String, String), RunInput>,
    pub sessions: BTreeMap<String, SessionRows>,
    pub claims: Vec<ClaimRow>,
    /// The ledger's fingerprint when planned (kept when tool outcomes are written).
    pub ledger: Option<crate::db::facts::LedgerFingerprint>,
}

/// Runs the planner needs rows for: those that pass `--session`/`--run` and whose
/// state is one finalize plans or reports.
pub fn candidates(report: &ScanReport, opts: &PlanOptions) -> Vec<(String, String)> {
    report
        .runs
        .iter()
        .filter(|r| passes_filters(r, opts))
        .filter(|r| reportable(r.state))
        .map(|r| (r.session_id.clone(), r.run_id.clone()))
        .collect()
}

fn passes_filters(r: &RunReport, opts: &PlanOptions) -> bool {
    opts.session.as_ref().is_none_or(|s| *s == r.session_id)
        && opts.run.as_ref().is_none_or(|x| *x == r.run_id)
}

fn reportable(state: RunState) -> bool {
    !matches!(
        state,
        RunState::Terminal
            | RunState::HeaderContradictsTerminal
            | RunState::NoHeader
            | RunState::NotJudged
    )
}

/// The invocation id new events of this run use: the one its events and partial
/// snapshots use, else the header's, else `recovery-<runId>`. `Err` names the
/// disagreement (rows among themselves, rows and header, turn ids).
pub fn invocation_for(header: &RunHeader, rows: &RunRows) -> Result<String, String> {
    let mut seen: Vec<&str> = Vec::new();
    for inv in rows
        .events
        .iter()
        .map(|e| e.invocation_id.as_str())
        .chain(rows.snapshots.iter().map(|s| s.invocation_id.as_str()))
    {
        if !seen.contains(&inv) {
            seen.push(inv);
        }
    }
    if seen.len() > 1 {
        return Err(format!(
            "the run's rows use {} invocation ids ({})",
            seen.len(),
            seen.join(", ")
        ));
    }
    let turns_ok = rows.events.iter().all(|e| e.turn_id == header.turn_id)
        && rows.snapshots.iter().all(|s| s.turn_id == header.turn_id);
    if !turns_ok {
        return Err(format!(
            "rows of the run name a turn other than the header's `{}`",
            header.turn_id
        ));
    }
    match (seen.first(), header.invocation_id.as_deref()) {
        (Some(row), Some(h)) if *row != h => Err(format!(
            "the header's invocationId `{h}` differs from the rows' `{row}`"
        )),
        (Some(row), _) => Ok((*row).to_owned()),
        (None, Some(h)) => Ok(h.to_owned()),
        (None, None) => Ok(format!("recovery-{}", header.run_id)),
    }
}

/// Latest activity of a run (issue notes, item 22): its events' `ts`, its partial
/// snapshots' `updated_at`, and the header's `updatedAt`.
pub fn last_activity(header: Option<&RunHeader>, rows: &RunRows, events: &[RuntimeEvent]) -> f64 {
    let mut t = header.map_or(f64::MIN, |h| h.updated_at);
    for e in events {
        t = t.max(e.ts);
    }
    for s in &rows.snapshots {
        t = t.max(s.updated_at as f64);
    }
    t
}

/// Computes the plan.
pub fn plan(report: &ScanReport, input: &PlanInput, opts: &PlanOptions) -> Plan {
    let headers: HashMap<(&str, &str), &RunHeader> = report
        .headers
        .iter()
        .map(|h| ((h.session_id.as_str(), h.run_id.as_str()), h))
        .collect();
    let mut cursors: BTreeMap<String, SessionCursor> = BTreeMap::new();
    let mut out = Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        plan: Vec::new(),
        skipped: Vec::new(),
        applied: false,
        backup: None,
        schema_basis: None,
        apply_refusal: None,
        transcript_backup: None,
        writes: WriteSet {
            claims: input.claims.clone(),
            ..WriteSet::default()
        },
    };
    let mut touched_sessions: Vec<String> = Vec::new();
    for r in report.runs.iter().filter(|r| passes_filters(r, opts)) {
        if !reportable(r.state) {
            continue;
        }
        let key = (r.session_id.clone(), r.run_id.clone());
        let cursor = cursors
            .entry(r.session_id.clone())
            .or_insert_with(|| SessionCursor::new(input.sessions.get(&r.session_id)));
        let header = headers
            .get(&(r.session_id.as_str(), r.run_id.as_str()))
            .copied();
        let run_input = input.runs.get(&key);
        let ctx = RunCtx {
            report,
            opts,
            claims: &input.claims,
        };
        match plan_run(&ctx, r, header, run_input, cursor) {
            Outcome::Ignore => {}
            Outcome::Skip(reason, detail) => out.skipped.push(Skipped {
                session_id: r.session_id.clone(),
                run_id: r.run_id.clone(),
                reason,
                detail,
            }),
            Outcome::Plan(b) => {
                let (entry, write) = *b;
                if !touched_sessions.contains(&r.session_id) {
                    touched_sessions.push(r.session_id.clone());
                }
                out.plan.push(entry);
                out.writes.runs.push(write);
            }
        }
    }
    for s in touched_sessions {
        let rows = input.sessions.get(&s).cloned().unwrap_or_default();
        out.writes.sessions.push((s, rows));
    }
    if out.writes.runs.iter().any(|r| !r.outcomes.is_empty()) {
        out.writes.ledger = input.ledger;
    }
    out
}
