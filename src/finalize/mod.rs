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

pub mod apply;
pub mod ids;
pub mod planning;
pub mod records;
pub mod recovery;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::db::facts::{ClaimRow, InvocationUsers, RunRows, SessionRows};
use crate::db::write::{
    HeaderWrite, MessageWrite, NewEvent, OutcomeWrite, RunEventWrite, RunWrite, SessionWrite,
    WriteSet,
};
use crate::event::{Content, EventStatus, ModelVisibility, Origin, RuntimeEvent};
use crate::header::RunHeader;
use crate::ledger::scanner::scan_tool_ledger;
use crate::scan::runs::{RunReport, RunState};
use crate::scan::{decode_row, ScanReport, WORKSPACE_AUTHORITY_SESSION};

use records::EventIds;

pub use planning::{plan_finalize, plan_finalize_on, FinalizePlanning, PlanUse};

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

/// Per-session counters while planning several runs of one session.
struct SessionCursor {
    next_ordinal: i64,
    next_message: i64,
    /// Session header as it will be after the writes planned so far.
    payload: Option<Map<String, Value>>,
    version: i64,
    status_written: bool,
    messages: Vec<Map<String, Value>>,
    archived: bool,
    boundary_requests: Vec<crate::db::facts::BoundaryRequestRow>,
    /// The session's transcript file (releases that keep transcripts in files).
    transcript_file: Option<crate::db::files::TranscriptFile>,
}

impl SessionCursor {
    fn new(rows: Option<&SessionRows>) -> SessionCursor {
        let meta = rows.and_then(|r| r.meta.as_ref());
        SessionCursor {
            next_ordinal: rows.map_or(0, |r| r.max_ordinal) + 1,
            next_message: rows
                .and_then(|r| r.messages.iter().map(|m| m.sequence).max())
                .map_or(0, |m| m + 1),
            payload: meta.and_then(|m| match serde_json::from_str(&m.payload_json) {
                Ok(Value::Object(o)) => Some(o),
                _ => None,
            }),
            version: meta.map_or(0, |m| m.metadata_version),
            status_written: false,
            messages: rows.map_or_else(Vec::new, |r| recovery::decoded_messages(&r.messages)),
            archived: meta.is_some_and(|m| m.is_archived),
            boundary_requests: rows.map_or_else(Vec::new, |r| r.boundary_requests.clone()),
            transcript_file: rows.and_then(|r| r.transcript_file.clone()),
        }
    }
}

enum Outcome {
    Plan(Box<(PlanEntry, RunWrite)>),
    Skip(SkipReason, String),
    Ignore,
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

struct RunCtx<'a> {
    report: &'a ScanReport,
    opts: &'a PlanOptions,
    claims: &'a [ClaimRow],
}

fn skip(reason: SkipReason, detail: impl Into<String>) -> Outcome {
    Outcome::Skip(reason, detail.into())
}

/// Is the run a continuation claim's source segment or target?
fn claim_involvement(
    claims: &[ClaimRow],
    h: &RunHeader,
    invocation: Option<&str>,
) -> Option<String> {
    for c in claims {
        let mut source = c.source_session_id == h.session_id && c.source_run_id == h.run_id;
        if let Ok(Value::Object(b)) = serde_json::from_str::<Value>(&c.boundary_json) {
            if let Some(Value::Array(segments)) = b.get("segments") {
                source |= segments.iter().any(|s| {
                    let id = s.get("identity");
                    id.and_then(|i| i.get("sessionId")).and_then(Value::as_str)
                        == Some(h.session_id.as_str())
                        && id.and_then(|i| i.get("runId")).and_then(Value::as_str)
                            == Some(h.run_id.as_str())
                });
            }
        }
        if source {
            return Some(format!(
                "the run is a source of continuation claim `{}`; Maka seals it",
                c.claim_id
            ));
        }
        let target = invocation.is_some_and(|i| i == c.target_invocation_id)
            || (c.target_session_id == h.session_id
                && (c.target_run_id == h.run_id || c.target_turn_id == h.turn_id));
        if target {
            return Some(format!(
                "the run is the target of continuation claim `{}`; it belongs to Maka's claim saga",
                c.claim_id
            ));
        }
    }
    None
}

fn plan_run(
    ctx: &RunCtx<'_>,
    r: &RunReport,
    header: Option<&RunHeader>,
    input: Option<&RunInput>,
    cursor: &mut SessionCursor,
) -> Outcome {
    let opts = ctx.opts;
    let empty = RunRows::default();
    let rows = input.map_or(&empty, |i| &i.rows);
    let events: Vec<RuntimeEvent> = rows
        .events
        .iter()
        .filter_map(|e| decode_row(e).ok())
        .collect();
    if let Some(min_age) = opts.older_than_ms {
        let last = last_activity(header, rows, &events);
        if (opts.now_ms as f64) - last < min_age as f64 {
            return Outcome::Ignore;
        }
    }
    if r.session_id == WORKSPACE_AUTHORITY_SESSION {
        return skip(
            SkipReason::WorkspaceAuthority,
            "the workspace-authority session is written only by Maka's workspace authority",
        );
    }
    if cursor.archived && !opts.include_archived {
        return skip(
            SkipReason::ArchivedSession,
            "the session is archived and Maka's recovery skips it; pass --include-archived",
        );
    }
    match r.state {
        RunState::Unreadable => {
            let bad = rows
                .events
                .iter()
                .filter(|e| decode_row(e).is_err())
                .count();
            return skip(
                SkipReason::RowsUndecodable,
                format!(
                    "{bad} of the run's {} runtime events do not decode; Maka cannot read the run",
                    rows.events.len()
                ),
            );
        }
        RunState::HeaderUndecodable => {
            return skip(
                SkipReason::RowsUndecodable,
                "the run header does not decode; Maka cannot read the run",
            )
        }
        RunState::Ambiguous => {
            return skip(
                SkipReason::AmbiguousTerminals,
                format!(
                    "{} terminal events ({}); Maka's recovery refuses ambiguous terminal facts",
                    r.terminal_event_ids.len(),
                    r.terminal_event_ids.join(", ")
                ),
            )
        }
        RunState::TerminalUnusable => {
            return skip(
                SkipReason::AmbiguousTerminals,
                "the run already holds terminal-looking events that are partial or name another \
                 turn: they seal it, so no terminal can be added",
            )
        }
        RunState::TerminalWithoutStatus | RunState::TerminalNotTail => {
            let (reason, what) = if r.state == RunState::TerminalWithoutStatus {
                let what = "has endInvocation but no terminal status";
                (SkipReason::TerminalWithoutStatus, what)
            } else {
                (SkipReason::TerminalNotTail, "is not the run's last event")
            };
            let events = r.terminal_event_ids.join(", ");
            return skip(reason, format!("terminal event {events} {what}"));
        }
        RunState::Stuck | RunState::AwaitingAdoption | RunState::HeaderTerminalWithoutEvent => {}
        RunState::Terminal
        | RunState::HeaderContradictsTerminal
        | RunState::NoHeader
        | RunState::NotJudged => return Outcome::Ignore,
    }
    if r.on_spine {
        // Opened by its invocation-opening fact: a Maka newer than wsledger wrote it,
        // and only that Maka's own start-up recovery settles it.
        return skip(
            SkipReason::RunOnSpine,
            "the run is opened by its invocation-opening fact (written by a Maka newer \
             than wsledger): wsledger writes no terminal event for it; that Maka's start-up \
             recovery settles it",
        );
    }
    let (Some(h), Some(input)) = (header, input) else {
        return Outcome::Ignore;
    };
    // Maka's strict recovery reads every run event before it decides anything: one it
    // cannot decode stops its start-up, whatever terminal event we would write.
    for e in &input.rows.run_events {
        if let Err(why) = crate::header::check_run_event(
            &e.record_json,
            &h.session_id,
            &h.run_id,
            Some(&h.turn_id),
        ) {
            return skip(
                SkipReason::RowsUndecodable,
                format!(
                    "run event sequence {} does not decode ({why}); Maka's strict recovery \
                     stops on it",
                    e.sequence
                ),
            );
        }
    }
    if input.rows.events.len() != events.len() {
        return skip(
            SkipReason::RowsUndecodable,
            "a runtime event of the run no longer decodes",
        );
    }
    let action = match r.state {
        RunState::Stuck => Action::Finalize,
        RunState::AwaitingAdoption => Action::Adopt,
        _ => Action::RepairMissingTerminal,
    };
    let invocation = match action {
        Action::Adopt => None,
        _ => match invocation_for(h, &input.rows) {
            Ok(i) => Some(i),
            Err(detail) => return skip(SkipReason::InvocationConflict, detail),
        },
    };
    if let Some(detail) = claim_involvement(ctx.claims, h, invocation.as_deref()) {
        return skip(SkipReason::ContinuationClaim, detail);
    }
    if action == Action::Adopt && !opts.project_header {
        return skip(
            SkipReason::AwaitingAdoption,
            format!(
                "terminal event {} is already written; Maka adopts it into the header at its next \
                 start (or pass --project-header)",
                r.terminal_event_ids.join(", ")
            ),
        );
    }
    if let Some(inv) = &invocation {
        let users = input.invocation_users.as_deref().unwrap_or(&[]);
        if let Some((s, run, t)) = users
            .iter()
            .find(|(s, run, t)| *s != h.session_id || *run != h.run_id || *t != h.turn_id)
        {
            return skip(
                SkipReason::InvocationConflict,
                format!(
                    "invocation id `{inv}` is also used by session `{s}`, run `{run}`, turn `{t}`"
                ),
            );
        }
    }
    match action {
        Action::Finalize | Action::RepairMissingTerminal => plan_new_terminal(
            ctx,
            h,
            input,
            &events,
            invocation.unwrap_or_default(),
            action,
            cursor,
        ),
        Action::Adopt => plan_adopt(h, input, &events, cursor),
    }
}

/// The unsettled operations of the run that Maka answers before sealing it, with the
/// response Maka writes for each.
fn outcomes_needed<'a>(
    h: &RunHeader,
    rows: &'a RunRows,
    events: &[RuntimeEvent],
) -> Result<Vec<(&'a crate::db::OperationRow, bool)>, String> {
    let unsettled = |o: &&crate::db::OperationRow| {
        o.current_state == "prepared"
            && o.result_event_id.is_none()
            && o.dispatch_event_id.is_some()
    };
    // Client-capability recovery: every unsettled `outcome_unknown` operation.
    let mut out: Vec<(&crate::db::OperationRow, bool)> = rows
        .operations
        .iter()
        .filter(unsettled)
        .filter(|o| o.recovery_mode == "outcome_unknown")
        .map(|o| (o, false))
        .collect();
    // Code-mode runs: every provider `exec` dispatched without a response.
    if h.tool_mode.as_deref() == Some("code_mode") {
        let scan = scan_tool_ledger(events);
        for op in &scan.operations {
            let (Some(op_id), Some(_), None, Some(call_id)) = (
                op.operation_id.as_ref(),
                op.dispatch.as_ref(),
                op.response.as_ref(),
                op.call_event_id.as_ref(),
            ) else {
                continue;
            };
            if !op.issues.is_empty()
                || !op.reconcile_event_ids.is_empty()
                || !op.decision_event_ids.is_empty()
            {
                continue;
            }
            let Some(call) = events.iter().find(|e| e.id == *call_id) else {
                continue;
            };
            let Some(Content::FunctionCall { name, .. }) = &call.content else {
                continue;
            };
            if *name != *"exec"
                || call.origin == Some(Origin::CodeMode)
                || call.model_visibility == Some(ModelVisibility::Hidden)
            {
                continue;
            }
            let op_id = op_id.to_string();
            if out.iter().any(|(o, _)| o.operation_id == op_id) {
                continue;
            }
            let Some(row) = rows.operations.iter().find(|o| o.operation_id == op_id) else {
                return Err(format!(
                    "code-mode `exec` operation `{op_id}` has no tool_operations row to settle"
                ));
            };
            if !unsettled(&row) {
                return Err(format!(
                    "code-mode `exec` operation `{op_id}` has no response but its row is `{}`",
                    row.current_state
                ));
            }
            out.push((row, true));
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn plan_new_terminal(
    ctx: &RunCtx<'_>,
    h: &RunHeader,
    input: &RunInput,
    events: &[RuntimeEvent],
    invocation: String,
    action: Action,
    cursor: &mut SessionCursor,
) -> Outcome {
    let opts = ctx.opts;
    let rows = &input.rows;
    let repair = action == Action::RepairMissingTerminal;
    if repair {
        if let Some(status) = trusted(h, cursor) {
            return skip(
                SkipReason::NeedsTranscriptBackfill,
                format!(
                    "the transcript's last turn_state agrees with the `{}` header: Maka backfills \
                     a `{status}` terminal from it",
                    h.status.as_str()
                ),
            );
        }
        if let Some(missing) =
            recovery::transcript_content_missing_from_log(h, &cursor.messages, events)
        {
            return skip(
                SkipReason::NeedsTranscriptBackfill,
                format!(
                    "the transcript holds `{missing}` of this turn and the log lacks it: Maka \
                     backfills it before sealing the run"
                ),
            );
        }
    }
    if opts.project_header {
        if let Some(detail) = transcript_refusal(h, "failed", cursor) {
            return skip(SkipReason::TranscriptUnavailable, detail);
        }
    }
    let ops = match outcomes_needed(h, rows, events) {
        Ok(ops) => ops,
        Err(detail) => return skip(SkipReason::NeedsToolOutcome, detail),
    };
    if !ops.is_empty() && ctx.report.maka_gate.tool_writes_refused {
        let names: Vec<&str> = ops.iter().map(|(o, _)| o.operation_id.as_str()).collect();
        return skip(
            SkipReason::NeedsToolOutcome,
            format!(
                "operation(s) {} need a T2 outcome before the run is sealed, and Maka's ledger \
                 gate refuses tool writes in this workspace",
                names.join(", ")
            ),
        );
    }
    let last_event_ts = events.iter().map(|e| e.ts).fold(f64::MIN, f64::max);
    let ts: i64 = if repair {
        let base = h.completed_at.unwrap_or(h.updated_at);
        base.max(last_event_ts).ceil() as i64
    } else {
        last_activity(Some(h), rows, events).floor() as i64 + 1
    };
    let session_id = h.session_id.as_str();
    let run_id = h.run_id.as_str();
    let mut next_seq = rows.events.iter().map(|e| e.event_seq).max().unwrap_or(0) + 1;
    let mut write = RunWrite {
        session_id: session_id.to_owned(),
        run_id: run_id.to_owned(),
        expected: rows.clone(),
        invocation: Some((
            invocation.clone(),
            input.invocation_users.clone().unwrap_or_default(),
        )),
        outcomes: Vec::new(),
        terminal: None,
        header: None,
        run_event: None,
        message: None,
        session: None,
    };
    let mut settles = Vec::new();
    for (op, code_mode) in ops {
        let id = format!("{}_response", op.operation_id);
        let ids = EventIds {
            id: &id,
            invocation_id: &op.invocation_id,
            session_id,
            run_id: &op.run_id,
            turn_id: &op.turn_id,
        };
        let value = if code_mode {
            records::code_mode_interrupted_response(
                &ids,
                ts,
                &op.provider_tool_call_id,
                &op.tool_name,
                &op.operation_id,
            )
        } else {
            records::outcome_unknown_response(
                &ids,
                ts,
                &op.provider_tool_call_id,
                &op.tool_name,
                &op.operation_id,
            )
        };
        let encoded = match records::encode_event(&value) {
            Ok(e) => e,
            Err(e) => {
                return skip(
                    SkipReason::NeedsToolOutcome,
                    format!(
                        "the T2 outcome of `{}` does not encode: {e}",
                        op.operation_id
                    ),
                )
            }
        };
        let key = ids::stream_key(
            &format!("tool:call:{}", op.provider_tool_call_id),
            [session_id, &op.invocation_id, &op.run_id, &op.turn_id],
            "tool",
            "tool",
        );
        write.outcomes.push(OutcomeWrite {
            event: NewEvent {
                event_id: id.clone(),
                session_id: session_id.to_owned(),
                invocation_id: op.invocation_id.clone(),
                run_id: op.run_id.clone(),
                turn_id: op.turn_id.clone(),
                event_seq: next_seq,
                event_kind: encoded.event_kind,
                payload_json: encoded.payload_json,
                committed_at: ts,
                ordinal: cursor.next_ordinal,
            },
            operation_id: op.operation_id.clone(),
            journal_event_id: format!("{}_outcome", op.operation_id),
            invocation_id: op.invocation_id.clone(),
            run_id: op.run_id.clone(),
            turn_id: op.turn_id.clone(),
            canonical_args_hash: op.canonical_args_hash.clone(),
            recovery_mode: op.recovery_mode.clone(),
            completed_stream_key: key,
        });
        settles.push(op.operation_id.clone());
        next_seq += 1;
        cursor.next_ordinal += 1;
    }

    // The terminal event.
    let event_id = ids::derived_uuid(ids::TERMINAL_EVENT, session_id, run_id);
    let (failure_class, reason, message, diagnostic) = if repair {
        let fc = "missing_terminal_event";
        (
            fc.to_owned(),
            fc.to_owned(),
            "terminal run header had no terminal RuntimeEvent".to_owned(),
            Map::new(),
        )
    } else {
        let d = recovery::classify(h.status, &rows.run_events);
        let mut diag = Map::new();
        if let Some(t) = &d.last_event_type {
            diag.insert("lastEventType".into(), json!(t));
        }
        if d.event_corrupt {
            diag.insert("eventCorrupt".into(), Value::Bool(true));
        }
        let sessions = recovery::restart_closures(h, &cursor.boundary_requests);
        let mut fc = "app_restarted".to_owned();
        if !sessions.is_empty() {
            fc = "sandbox_boundary_closed_by_restart".into();
            diag.insert(
                "sandboxBoundaryClosureReason".into(),
                json!("host_restarted"),
            );
            diag.insert("sandboxBoundaryRequestIds".into(), json!(sessions));
        }
        let message = fc.clone();
        (fc, d.recovery_reason.to_owned(), message, diag)
    };
    let ids = EventIds {
        id: &event_id,
        invocation_id: &invocation,
        session_id,
        run_id,
        turn_id: &h.turn_id,
    };
    let value = records::failed_terminal(&ids, ts, &failure_class, &message, &reason, &diagnostic);
    let encoded = match records::encode_event(&value) {
        Ok(e) => e,
        Err(e) => {
            return skip(
                SkipReason::InvocationConflict,
                format!("the terminal event for this run does not encode: {e}"),
            )
        }
    };
    let terminal_seq = next_seq;
    let terminal_ordinal = cursor.next_ordinal;
    cursor.next_ordinal += 1;
    write.terminal = Some(NewEvent {
        event_id: event_id.clone(),
        session_id: session_id.to_owned(),
        invocation_id: invocation.clone(),
        run_id: run_id.to_owned(),
        turn_id: h.turn_id.clone(),
        event_seq: terminal_seq,
        event_kind: encoded.event_kind,
        payload_json: encoded.payload_json,
        committed_at: ts,
        ordinal: terminal_ordinal,
    });

    // The projection (repair: the header always; the rest with --project-header).
    let mut run_data = Map::new();
    run_data.insert("failureClass".into(), json!(failure_class));
    run_data.insert("recovered".into(), Value::Bool(true));
    run_data.insert("recoveryReason".into(), json!(reason));
    for (k, v) in &diagnostic {
        run_data.insert(k.clone(), v.clone());
    }
    run_data.insert("repairedBy".into(), json!(records::REPAIRED_BY));
    let projection = Projection {
        run_status: "failed",
        ts,
        failure_class: Some(&failure_class),
        abort_source: None,
        run_data,
    };
    if repair || opts.project_header {
        write.header = Some(header_write(h, &projection, rows));
    }
    if opts.project_header {
        project_rest(h, rows, &projection, cursor, &mut write);
    }
    Outcome::Plan(Box::new((
        PlanEntry {
            session_id: session_id.to_owned(),
            run_id: run_id.to_owned(),
            action,
            status: "failed".into(),
            failure_class: Some(failure_class.clone()),
            event_id,
            recovery_reason: reason,
            event_seq: terminal_seq,
            ordinal: Some(terminal_ordinal),
            ts,
            transcript_file: appended_file(&write),
            settles,
            header_written: repair || opts.project_header,
        },
        write,
    )))
}

/// The transcript status of a turn whose run ends with `run_status`.
fn turn_status_of(run_status: &str) -> &str {
    match run_status {
        "cancelled" => "aborted",
        s => s,
    }
}

/// Whether Maka's recovery writes a `turn_state` record for the run: a session-inline
/// run of a session with a header, whose turn's latest turn_state has another status.
fn turn_state_needed(h: &RunHeader, turn_status: &str, cursor: &SessionCursor) -> bool {
    records::is_session_inline(h)
        && cursor.payload.is_some()
        && recovery::latest_turn_state(&cursor.messages, &h.turn_id)
            .and_then(recovery::turn_state_status)
            != Some(turn_status)
}

/// Why the `turn_state` record the run needs cannot be appended to the session's
/// transcript file (v0.1.2, v0.1.3), if it cannot. Checked before anything else of
/// the run is planned, so a skipped run leaves the session's counters alone.
fn transcript_refusal(h: &RunHeader, run_status: &str, cursor: &SessionCursor) -> Option<String> {
    let file = cursor.transcript_file.as_ref()?;
    let crate::db::files::TranscriptState::Refused(why) = &file.state else {
        return None;
    };
    turn_state_needed(h, turn_status_of(run_status), cursor).then(|| {
        format!(
            "the session's transcript `{}` {why}: the release's recovery appends this run's \
             turn_state record to that file, so the run is left alone",
            file.path.display()
        )
    })
}

/// The session file a run's write appends to, for the plan entry.
fn appended_file(write: &RunWrite) -> Option<String> {
    write
        .message
        .as_ref()
        .and_then(|m| m.file.as_ref())
        .map(|p| p.display().to_string())
}

fn trusted(h: &RunHeader, cursor: &SessionCursor) -> Option<&'static str> {
    recovery::trusted_transcript_terminal(h, &cursor.messages)
}

/// What the header and the rest of the projection say.
struct Projection<'a> {
    run_status: &'a str,
    ts: i64,
    failure_class: Option<&'a str>,
    abort_source: Option<&'a str>,
    run_data: Map<String, Value>,
}

fn header_write(h: &RunHeader, p: &Projection<'_>, rows: &RunRows) -> HeaderWrite {
    let rec = records::patched_header(h, p.run_status, p.ts, p.failure_class, p.abort_source);
    HeaderWrite {
        created_at: h.created_at as i64,
        record_json: ids::js_stringify(&Value::Object(rec)),
        expected_record_json: rows
            .header
            .as_ref()
            .map(|r| r.record_json.clone())
            .unwrap_or_default(),
    }
}

/// The run event, the `turn_state` record and the session status (recipe B).
fn project_rest(
    h: &RunHeader,
    rows: &RunRows,
    p: &Projection<'_>,
    cursor: &mut SessionCursor,
    write: &mut RunWrite,
) {
    let session_id = h.session_id.as_str();
    let run_id = h.run_id.as_str();
    if !recovery::has_terminal_run_event(&rows.run_events) {
        let id = ids::derived_uuid(ids::RUN_EVENT, session_id, run_id);
        let (kind, rec) =
            records::terminal_run_event(&id, h, p.run_status, p.ts, p.run_data.clone());
        write.run_event = Some(RunEventWrite {
            sequence: rows
                .run_events
                .iter()
                .map(|e| e.sequence)
                .max()
                .map_or(0, |m| m + 1),
            event_id: id,
            event_type: kind,
            event_ts: p.ts,
            record_json: ids::js_stringify(&rec),
        });
    }
    let turn_status = turn_status_of(p.run_status);
    if turn_state_needed(h, turn_status, cursor) {
        let id = ids::derived_uuid(ids::TURN_STATE, session_id, run_id);
        let retained = recovery::turn_has_retained_output(&cursor.messages, &h.turn_id);
        let rec = records::turn_state(
            &id,
            h,
            p.ts,
            turn_status,
            p.failure_class,
            p.abort_source,
            retained,
        );
        if let Value::Object(o) = &rec {
            cursor.messages.push(o.clone());
        }
        write.message = Some(MessageWrite {
            sequence: cursor.next_message,
            message_id: id,
            message_type: "turn_state".into(),
            message_ts: p.ts,
            record_json: ids::js_stringify(&rec),
            file: cursor.transcript_file.as_ref().map(|f| f.path.clone()),
        });
        cursor.next_message += 1;
    }
    if !cursor.status_written {
        if let Some(payload) = &cursor.payload {
            let status = payload.get("status").and_then(Value::as_str);
            // Maka's recovery sets a session with a recovered run `active`
            // (`session-manager.ts`, the same in every release; measured on v0.1.5,
            // v0.1.7 and v0.1.11 files, where a latched store had left it `blocked`). A
            // session that already is active keeps its row (issue notes, 25).
            if status.is_some_and(|s| s != "active") {
                let next = records::active_session(payload, p.ts);
                write.session = Some(SessionWrite {
                    expected_version: cursor.version,
                    payload_json: ids::js_stringify(&Value::Object(next.clone())),
                    committed_at: p.ts,
                });
                cursor.payload = Some(next);
                cursor.version += 1;
                cursor.status_written = true;
            }
        }
    }
}

fn plan_adopt(
    h: &RunHeader,
    input: &RunInput,
    events: &[RuntimeEvent],
    cursor: &mut SessionCursor,
) -> Outcome {
    use crate::ledger::terminal::{classify_terminal_ledger, RunHeaderView, TerminalKind};
    let rows = &input.rows;
    let view = RunHeaderView {
        session_id: h.session_id.as_str().into(),
        run_id: h.run_id.as_str().into(),
        turn_id: h.turn_id.as_str().into(),
        status: h.status,
        failure_class: h.failure_class.as_deref().map(Into::into),
        abort_source: h.abort_source.as_deref().map(Into::into),
    };
    let class = classify_terminal_ledger(&view, events);
    let Some(term) = class
        .terminal_event_ids
        .first()
        .and_then(|id| events.iter().find(|e| e.id == *id))
    else {
        return Outcome::Ignore;
    };
    let seq = rows
        .events
        .iter()
        .find(|e| term.id == *e.event_id.as_str())
        .map_or(0, |e| e.event_seq);
    let run_status = match term.status {
        Some(EventStatus::Completed) => "completed",
        Some(EventStatus::Failed) => "failed",
        Some(EventStatus::Aborted | EventStatus::Cancelled) => "cancelled",
        _ => return Outcome::Ignore,
    };
    if let Some(detail) = transcript_refusal(h, run_status, cursor) {
        return Outcome::Skip(SkipReason::TranscriptUnavailable, detail);
    }
    let ts = last_activity(Some(h), rows, events).floor() as i64 + 1;
    let mut data = Map::new();
    let (failure_class, abort_source, reason) = match (&class.kind, &class.fact) {
        (TerminalKind::Fact, Some(fact)) => {
            let fc = fact.failure_class.as_ref().map(|s| s.to_string_lossy());
            let ab = fact.abort_source.as_ref().map(|s| s.to_string_lossy());
            if let Some(f) = &fc {
                data.insert("failureClass".into(), json!(f));
            }
            data.insert("recovered".into(), Value::Bool(true));
            data.insert(
                "recoveryReason".into(),
                json!("runtime_event_terminal_fact"),
            );
            data.insert("runtimeEventId".into(), json!(term.id.to_string_lossy()));
            data.insert(
                "runtimeEventStatus".into(),
                json!(term.status.map(EventStatus::as_str)),
            );
            (fc, ab, "runtime_event_terminal_fact".to_owned())
        }
        _ => {
            // An incomplete single terminal: its status wins, the class or source is
            // Maka's recovery default, the reason comes from the run events.
            let d = recovery::classify(h.status, &rows.run_events);
            let fc = (run_status == "failed").then(|| "app_restarted".to_owned());
            let ab = (run_status == "cancelled").then(|| "unknown".to_owned());
            if let Some(f) = &fc {
                data.insert("failureClass".into(), json!(f));
            }
            data.insert("recovered".into(), Value::Bool(true));
            data.insert("recoveryReason".into(), json!(d.recovery_reason));
            if let Some(t) = &d.last_event_type {
                data.insert("lastEventType".into(), json!(t));
            }
            if d.event_corrupt {
                data.insert("eventCorrupt".into(), Value::Bool(true));
            }
            (fc, ab, d.recovery_reason.to_owned())
        }
    };
    data.insert("repairedBy".into(), json!(records::REPAIRED_BY));
    let projection = Projection {
        run_status,
        ts,
        failure_class: failure_class.as_deref(),
        abort_source: abort_source.as_deref(),
        run_data: data,
    };
    let mut write = RunWrite {
        session_id: h.session_id.clone(),
        run_id: h.run_id.clone(),
        expected: rows.clone(),
        invocation: None,
        outcomes: Vec::new(),
        terminal: None,
        header: Some(header_write(h, &projection, rows)),
        run_event: None,
        message: None,
        session: None,
    };
    project_rest(h, rows, &projection, cursor, &mut write);
    Outcome::Plan(Box::new((
        PlanEntry {
            session_id: h.session_id.clone(),
            run_id: h.run_id.clone(),
            action: Action::Adopt,
            status: run_status.to_owned(),
            failure_class: failure_class.clone(),
            event_id: term.id.to_string_lossy(),
            recovery_reason: reason,
            event_seq: seq,
            ordinal: None,
            ts,
            transcript_file: appended_file(&write),
            settles: Vec::new(),
            header_written: true,
        },
        write,
    )))
}
