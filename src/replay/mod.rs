//! `replay`: one session rebuilt from its event log, and every place the stored
//! projections disagree with it.
//!
//! Pure: the input is the session's own rows ([`SessionRows`], from the database or
//! a bundle), the output a [`Replay`] value. Nothing here reads a file or a clock, and
//! nothing outside the session is consulted, so a bundle replays exactly like the
//! database it was exported from.
//!
//! Per run, in Maka's session order (`created_at, run_id` of the headers), the log is
//! folded into the five re-derivations of maka-ledger §6:
//! 1. the transcript (steps: user and assistant text, thinking, tool calls with their
//!    results, permission facts, token usage, the turn's terminal state);
//! 2. the model context's tool pairing (results without a call, calls without one);
//! 3. the tool projection rebuild, compared field by field with `tool_operations`
//!    and `tool_journal_events` (the scan's comparison, reused);
//! 4. the terminal classification, compared with the run header and the operational
//!    terminal event;
//! 5. the continuation prefix digest of every claim naming the run.

pub mod context;
pub mod digest;
pub mod input;
pub mod source;
pub mod transcript;
mod walk;

pub use input::{operation_ids_named, InputError, SessionRows};

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::{json, Value};

use crate::db::EventRow;
use crate::event::{Content, Role, RuntimeEvent};
use crate::header::{decode_header, RunHeader};
use crate::json::Json;
use crate::ledger::scanner::{Operation, ToolLedgerScan};
use crate::ledger::terminal::{
    classify_terminal_ledger, RunHeaderView, TerminalFact, TerminalKind,
};
use crate::scan::projection::{projection_diffs, supersession_groups, DiffKind};
use crate::scan::runs::{assess_runs, RunReport, RunState};
use crate::scan::{decode_row_with, RunAcc};

/// Every divergence code, with what it means. A divergence makes `replay` exit 1.
pub const DIVERGENCE_CODES: &[(&str, &str)] = &[
    ("event_undecodable", "a runtime_events row Maka cannot decode (bad payload, or payload ids differ from the row); the rest of the session still replays"),
    ("event_seq_gap", "an invocation's event_seq values are not 1..n"),
    ("scanner_issue", "Maka's tool-ledger scanner reports an issue in this session (`detail.issue` is Maka's code)"),
    ("result_without_call", "a tool result with no earlier call in the model context (Maka's unmatched_tool_result: a provider rejects the request)"),
    ("call_without_result", "a tool call with no result (Maka's unmatched_tool_call: dropped from the model context)"),
    ("tool_name_mismatch", "a tool result names another tool than its call (Maka's tool_id_mismatch)"),
    ("tool_operation_missing", "a dispatched operation of the log has no tool_operations row"),
    ("tool_operation_mismatch", "a tool_operations column differs from the rebuild (`field`, `stored`, `implied`)"),
    ("tool_operation_extra", "a tool_operations row with a dispatch that no dispatched operation of the log explains"),
    ("tool_journal_missing", "a tool_journal_events row the rebuild writes is missing"),
    ("tool_journal_mismatch", "a tool_journal_events column differs from the rebuild (`field`, `stored`, `implied`)"),
    ("tool_journal_extra", "a tool_journal_events row of an operation that the rebuild does not write"),
    ("header_status_mismatch", "the run header's status differs from what the terminal classification of the log implies"),
    ("header_failure_class_mismatch", "a failed header's failureClass differs from the terminal fact's"),
    ("header_abort_source_mismatch", "a cancelled header's abortSource differs from the terminal fact's"),
    ("header_missing", "the log has events of a run with no core_agent_runs row"),
    ("header_undecodable", "the run's core_agent_runs record cannot be decoded"),
    ("terminal_ambiguous", "the run has two or more terminal events"),
    ("terminal_incomplete", "the run's only terminal event is not a complete terminal fact (no terminal status, failed without a failure class, cancelled without an abort source)"),
    ("terminal_not_tail", "the run's terminal event is not its last immutable event"),
    ("terminal_unusable", "the run's only terminal-looking events are partial or name another turn"),
    ("run_terminal_event_missing", "the log has a terminal fact but core_agent_run_events has no run_completed/run_failed/run_cancelled"),
    ("run_terminal_event_mismatch", "the operational terminal event disagrees with the terminal classification (type, failure class, more than one, or one where the log has none)"),
    ("continuation_digest_mismatch", "a continuation claim's stored prefix digest differs from the digest recomputed from the source run's rows"),
    ("continuation_prefix_unreadable", "the prefix a continuation claim pins cannot be recomputed (rows missing, undecodable, a gap, or an identity mismatch)"),
];

/// Every note code. Notes never change the exit status.
pub const NOTE_CODES: &[(&str, &str)] = &[
    ("session_missing", "the session has no session_metadata row"),
    ("session_archived", "the session is archived (Maka's start-up recovery skips it)"),
    ("session_status", "the session status disagrees with its runs (soft in Maka)"),
    ("session_messages_differ", "the cached transcript (session_messages) differs from the projection of the log, as Maka's soft comparison counts it"),
    ("session_messages_unreadable", "a session_messages record cannot be read"),
    ("transcript_diagnostic", "Maka's transcript read model reports a diagnostic for an event (`detail.hard`: Maka's session view refuses the session)"),
    ("partial_snapshot_left", "a partial stream snapshot was never completed by an immutable event"),
    ("run_in_flight", "the run is open in the log (its header, or for a Maka newer than main its invocation-opening fact, and no terminal event); Maka shows its cached messages instead of a projection"),
    ("run_not_judged", "the run has neither a readable header (a Maka newer than main dropped core_agent_runs.record_json) nor an invocation-opening fact: whether it is open is not judged"),
    ("run_awaiting_adoption", "the header is still open but the log holds the run's terminal event at its tail: Maka shows the run terminal and adopts the event into the header at its next start (what finalize-runs --apply leaves without --project-header)"),
    ("run_not_inline", "the run is not session-inline (a child run); Maka's session view leaves it out"),
    ("tool_operation_legacy", "a tool_operations row without dispatch_event_id: a pre-authority legacy row Maka leaves alone"),
    ("continuation_source_elsewhere", "a continuation claim targets this session but its source run is in another session"),
    ("event_seq_gap_excised", "an event_seq gap left by `doctor excise`: every event it skips is in an excision bundle beside the database, so it is not damage"),
    ("transcript_in_files", "the workspace was written by Maka v0.1.2 or v0.1.3, which keep the session's transcript as a file (`sessions/<id>/session.jsonl` beside the database), not in session_messages: it is not compared"),
];

/// A disagreement between a stored projection and the log (or damage in the log).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Divergence {
    pub code: &'static str,
    pub message: String,
    pub run_id: Option<String>,
    pub event_id: Option<String>,
    pub operation_id: Option<String>,
    pub tool_call_id: Option<String>,
    /// The column or field compared, when one is.
    pub field: Option<String>,
    /// The stored value (`null` when absent or not applicable).
    pub stored: Value,
    /// The value the log implies (`null` when absent or not applicable).
    pub implied: Value,
    /// Extra facts (e.g. `{"issue": "orphan_response"}` for a scanner issue).
    pub detail: Value,
}

impl Divergence {
    fn new(code: &'static str, message: impl Into<String>) -> Divergence {
        Divergence {
            code,
            message: message.into(),
            run_id: None,
            event_id: None,
            operation_id: None,
            tool_call_id: None,
            field: None,
            stored: Value::Null,
            implied: Value::Null,
            detail: Value::Null,
        }
    }
    fn run(mut self, r: impl Into<String>) -> Self {
        self.run_id = Some(r.into());
        self
    }
    fn event(mut self, e: impl Into<String>) -> Self {
        self.event_id = Some(e.into());
        self
    }
    fn values(mut self, field: impl Into<String>, stored: Value, implied: Value) -> Self {
        self.field = Some(field.into());
        self.stored = stored;
        self.implied = implied;
        self
    }
}

/// Something worth knowing that is not a divergence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Note {
    pub code: &'static str,
    pub message: String,
    pub run_id: Option<String>,
    pub event_id: Option<String>,
    pub detail: Value,
}

impl Note {
    fn new(code: &'static str, message: impl Into<String>) -> Note {
        Note {
            code,
            message: message.into(),
            run_id: None,
            event_id: None,
            detail: Value::Null,
        }
    }
}

/// Which lane a tool event travelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// Durable dispatch protocol: call, dispatch and outcome bound to an operation.
    T1,
    /// Plain call/response events with no operation.
    Generic,
}

/// What one step shows.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepBody {
    /// User text.
    User {
        message_id: String,
        text: String,
        display_text: Option<String>,
        steering: bool,
    },
    /// A model step's text, with the thinking of the same step.
    Assistant {
        message_id: String,
        text: String,
        thinking: Option<String>,
    },
    /// Thinking with no text of its step.
    Thinking { message_id: String, text: String },
    /// Text of another role (system, tool).
    Text { role: String, text: String },
    /// A tool call, and the result the model context pairs it with.
    ToolCall {
        tool_call_id: String,
        tool_name: String,
        /// The model step that made the call (`refs.stepId`).
        step_id: Option<String>,
        args: Value,
        lane: Lane,
        operation_id: Option<String>,
        dispatch_event_id: Option<String>,
        result_event_id: Option<String>,
    },
    /// A tool result, and the call it answers.
    ToolResult {
        tool_call_id: String,
        tool_name: String,
        is_error: bool,
        result: Value,
        #[serde(serialize_with = "js_number")]
        duration_ms: Option<f64>,
        lane: Lane,
        operation_id: Option<String>,
        call_event_id: Option<String>,
    },
    PermissionRequest {
        request_id: Option<String>,
        tool_call_id: Option<String>,
        tool_name: Option<String>,
    },
    PermissionDecision {
        request_id: Option<String>,
        tool_call_id: Option<String>,
        decision: Value,
    },
    TokenUsage {
        input: Value,
        output: Value,
        total: Value,
    },
    /// Error content on a non-terminal event.
    Error {
        message: String,
        code: Option<String>,
    },
    /// The turn's terminal state, as Maka's read model shows it.
    TurnState {
        /// `completed`, `failed` or `aborted` (Maka's turn status); null when the
        /// event's status cannot be mapped.
        status: Option<String>,
        error_class: Option<String>,
        abort_source: Option<String>,
        error_message: Option<String>,
    },
    /// Streamed text that never became an immutable event (a partial snapshot or a
    /// partial row).
    Partial {
        stream_key: Option<String>,
        text: String,
    },
    /// A row Maka cannot decode.
    Undecodable { message: String },
}

/// Numbers as JavaScript prints them (`1767780903320`, not `1767780903320.0`).
fn js_number<S: serde::Serializer>(n: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    n.map(|x| Json::Number(x).to_serde()).serialize(s)
}

/// One step of a run's transcript.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    pub run_id: String,
    /// Position in the run (0-based).
    pub index: usize,
    /// The event the step comes from (null for a partial snapshot).
    pub event_id: Option<String>,
    pub event_seq: Option<i64>,
    /// The event's `ts` (ms).
    #[serde(serialize_with = "js_number")]
    pub ts: Option<f64>,
    #[serde(flatten)]
    pub body: StepBody,
}

/// A call and its result, as the model context pairs them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pair {
    pub tool_call_id: String,
    pub tool_name: String,
    pub call_event_id: Option<String>,
    pub result_event_id: Option<String>,
    /// `paired`, `call_without_result` or `result_without_call`.
    pub status: &'static str,
}

/// The operational terminal event of a run (`core_agent_run_events`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OperationalTerminal {
    pub event_id: String,
    pub event_type: String,
    pub sequence: i64,
}

/// One run, replayed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReplay {
    pub run_id: String,
    pub turn_id: Option<String>,
    pub invocation_ids: Vec<String>,
    /// Maka's session view shows the run (false for child runs).
    pub session_inline: bool,
    /// Status stored in the header (null without a readable header).
    pub header_status: Option<String>,
    /// Status the log implies: the terminal fact's, else the header's.
    pub status: Option<String>,
    /// Maka's terminal classification: `fact`, `none`, `incomplete_single_terminal`,
    /// `ambiguous` (null when the run cannot be read or has no header).
    pub classification: Option<String>,
    /// The doctor's run state (as in `doctor scan`).
    pub state: RunState,
    pub failure_class: Option<String>,
    pub abort_source: Option<String>,
    pub terminal_event_id: Option<String>,
    pub operational_terminal: Option<OperationalTerminal>,
    pub events: u64,
    pub undecodable_events: u64,
    pub steps: Vec<Step>,
    pub pairing: Vec<Pair>,
    pub divergences: Vec<Divergence>,
    pub notes: Vec<Note>,
}

/// Which occurrence of a re-used id each projection keeps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kept {
    /// The occurrence the stored `tool_operations` row references.
    pub tool_operations: Option<String>,
    /// The occurrences Maka's transcript shows (it shows every call and result row;
    /// dispatches have none).
    pub transcript: Vec<String>,
    /// The occurrence the model context pairs (a later call replaces an earlier one;
    /// the first result consumes the call).
    pub model_context: Option<String>,
}

/// A re-used identity and what each projection kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Supersession {
    /// `call`, `dispatch`, `response` or `operation`.
    pub kind: String,
    pub run_id: String,
    pub invocation_id: Option<String>,
    pub tool_call_id: Option<String>,
    pub operation_id: Option<String>,
    /// Occurrences in scan order.
    pub event_ids: Vec<String>,
    pub kept: Kept,
}

/// The session as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    pub exists: bool,
    pub name: Option<String>,
    pub status: Option<String>,
    pub is_archived: bool,
    pub user_version: i64,
}

/// Counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub runs: usize,
    pub events: u64,
    pub undecodable_events: u64,
    pub steps: usize,
    pub tool_calls: usize,
    pub paired: usize,
    pub calls_without_result: usize,
    pub results_without_call: usize,
    pub divergences: usize,
    pub notes: usize,
    /// Divergence code → count.
    pub divergence_codes: BTreeMap<String, usize>,
}

/// A replayed session: the `replay` JSON document (schema_version 1).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Replay {
    pub schema_version: u32,
    pub session_id: String,
    pub session: SessionInfo,
    pub runs: Vec<RunReplay>,
    /// Divergences not tied to one run.
    pub divergences: Vec<Divergence>,
    /// Notes not tied to one run.
    pub notes: Vec<Note>,
    pub supersession: Vec<Supersession>,
    pub summary: Summary,
}

impl Replay {
    /// Adds a session note of a registered code (`NOTE_CODES`).
    pub fn add_session_note(&mut self, code: &'static str, message: impl Into<String>) {
        debug_assert!(NOTE_CODES.iter().any(|(c, _)| *c == code));
        self.notes.push(Note::new(code, message));
    }

    /// Every divergence, run by run, then the session's.
    pub fn all_divergences(&self) -> impl Iterator<Item = &Divergence> {
        self.runs
            .iter()
            .flat_map(|r| r.divergences.iter())
            .chain(self.divergences.iter())
    }

    /// Keeps one run (and what names it); false when the session has no such run.
    pub fn keep_run(&mut self, run_id: &str) -> bool {
        if !self.runs.iter().any(|r| r.run_id == run_id) {
            return false;
        }
        self.runs.retain(|r| r.run_id == run_id);
        self.divergences
            .retain(|d| d.run_id.as_deref() == Some(run_id));
        self.notes.retain(|n| n.run_id.as_deref() == Some(run_id));
        self.supersession.retain(|s| s.run_id == run_id);
        self.recount();
        true
    }

    fn recount(&mut self) {
        let mut s = Summary {
            runs: self.runs.len(),
            ..Summary::default()
        };
        for r in &self.runs {
            s.events += r.events;
            s.undecodable_events += r.undecodable_events;
            s.steps += r.steps.len();
            s.tool_calls += r
                .steps
                .iter()
                .filter(|st| matches!(st.body, StepBody::ToolCall { .. }))
                .count();
            for p in &r.pairing {
                match p.status {
                    "paired" => s.paired += 1,
                    "call_without_result" => s.calls_without_result += 1,
                    _ => s.results_without_call += 1,
                }
            }
            s.notes += r.notes.len();
        }
        s.notes += self.notes.len();
        let codes: Vec<&'static str> = self.all_divergences().map(|d| d.code).collect();
        s.divergences = codes.len();
        for c in codes {
            *s.divergence_codes.entry(c.to_owned()).or_default() += 1;
        }
        self.summary = s;
    }
}

/// One run's rows as replay walks them.
struct RunRows<'a> {
    run_id: String,
    header: Option<RunHeader>,
    header_error: Option<String>,
    /// (seq, row, decoded) in `event_seq, event_id` order.
    events: Vec<(i64, &'a EventRow, Result<RuntimeEvent, String>)>,
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

fn is_session_inline(h: &RunHeader) -> bool {
    let has = |k: &str| h.record.get(k).is_some_and(|v| !v.is_null());
    !has("parentRunId") || (has("continuationSource") && !has("agentId"))
}

fn lossy(s: &crate::json::JsStr) -> String {
    s.to_string_lossy()
}

/// What a gap is when every event_seq it skips is in an excision bundle: the note's
/// message; `None` when any one is not (then it is damage, a divergence).
fn excised_gap(
    excised: &std::collections::BTreeMap<(String, i64), String>,
    gap: &walk::SeqGap,
) -> Option<String> {
    let missing = gap.missing.clone();
    // A range longer than the bundles' rows cannot be covered by them.
    let len = i128::from(missing.end) - i128::from(missing.start);
    if missing.is_empty() || len > excised.len() as i128 {
        return None;
    }
    let mut bundles = std::collections::BTreeSet::new();
    for seq in missing.clone() {
        bundles.insert(excised.get(&(gap.invocation_id.clone(), seq))?.as_str());
    }
    let seqs: Vec<i64> = missing.collect();
    let them = if seqs.len() == 1 { "it" } else { "them" };
    Some(format!(
        "invocation `{}`: event_seq {} {} excised into {} (`wsledger doctor restore` puts {them} back)",
        gap.invocation_id,
        crate::excise::gaps::list(&seqs),
        crate::excise::gaps::were(&seqs),
        bundles.into_iter().collect::<Vec<_>>().join(", ")
    ))
}

/// Replays one session.
pub fn replay(rows: &SessionRows) -> Replay {
    // 1. Walk the session's rows as the scan does: decode, scanner, per-run facts.
    let rules = rows.rules();
    let parts = walk::walk(&rows.events, &rules);
    let scan = parts.scan;

    // 2. Runs, in Maka's session order: headers by (created_at, run_id), then runs that
    // only have events.
    let mut runs: Vec<RunRows<'_>> = Vec::new();
    for h in &rows.headers {
        let (header, header_error) = match decode_header(&h.record_json, &h.session_id, &h.run_id) {
            Ok(x) => (Some(x), None),
            Err(e) => (None, Some(e)),
        };
        if runs.iter().any(|r| r.run_id == h.run_id) {
            continue;
        }
        runs.push(RunRows {
            run_id: h.run_id.clone(),
            header,
            header_error,
            events: Vec::new(),
        });
    }
    let with_header: HashSet<String> = runs.iter().map(|r| r.run_id.clone()).collect();
    let mut first_commit: HashMap<&str, i64> = HashMap::new();
    for e in &rows.events {
        if !with_header.contains(&e.run_id) {
            let t = first_commit
                .entry(e.run_id.as_str())
                .or_insert(e.committed_at);
            *t = (*t).min(e.committed_at);
        }
    }
    let mut headerless: Vec<(i64, String)> = first_commit
        .into_iter()
        .map(|(r, t)| (t, r.to_owned()))
        .collect();
    headerless.sort();
    for (_, run_id) in headerless {
        runs.push(RunRows {
            run_id,
            header: None,
            header_error: None,
            events: Vec::new(),
        });
    }
    let index: HashMap<String, usize> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| (r.run_id.clone(), i))
        .collect();
    for row in &rows.events {
        if let Some(&i) = index.get(&row.run_id) {
            runs[i]
                .events
                .push((row.event_seq, row, decode_row_with(row, &rules.decoder)));
        }
    }
    for r in &mut runs {
        r.events
            .sort_by(|a, b| (a.0, &a.1.event_id).cmp(&(b.0, &b.1.event_id)));
    }

    // 3. Run states, as the scan assesses them.
    let headers: Vec<RunHeader> = runs.iter().filter_map(|r| r.header.clone()).collect();
    let header_failed = runs
        .iter()
        .filter(|r| r.header_error.is_some())
        .map(|r| (rows.session_id.clone(), r.run_id.clone()))
        .collect();
    let spine = rules.runs_on_spine.then(|| crate::scan::runs::Spine {
        shelved: rows
            .shelved
            .iter()
            .map(|(r, t)| ((rows.session_id.clone(), r.clone()), t.clone()))
            .collect(),
        headers_readable: rows.headers_readable,
    });
    let (reports, _) = assess_runs(&headers, &header_failed, &parts.runs, spine.as_ref());
    let report_of = |run_id: &str| reports.iter().find(|r| r.run_id == run_id);

    // 4. The log in Maka's order (runs in order, events by event_seq).
    let ordered: Vec<&RuntimeEvent> = runs
        .iter()
        .flat_map(|r| r.events.iter().filter_map(|(_, _, d)| d.as_ref().ok()))
        .collect();
    let strict = context::plan(&ordered, true);
    let loose = context::plan(&ordered, false);
    let mut partner: HashMap<String, String> = HashMap::new();
    for p in loose.paired.iter().chain(strict.paired.iter()) {
        partner.insert(p.call_event_id.clone(), p.result_event_id.clone());
        partner.insert(p.result_event_id.clone(), p.call_event_id.clone());
    }
    let run_of_event: HashMap<String, String> = rows
        .events
        .iter()
        .map(|e| (e.event_id.clone(), e.run_id.clone()))
        .collect();

    // Tool facts by event.
    let mut op_by_event: HashMap<String, &Operation> = HashMap::new();
    for op in &scan.operations {
        for id in op
            .call_event_id
            .iter()
            .chain(op.dispatch.as_ref().map(|d| &d.event_id))
            .chain(op.response.as_ref().map(|r| &r.event_id))
        {
            op_by_event.insert(lossy(id), op);
        }
    }

    // 5. The transcript projection (Maka's rows) for the cache comparison.
    let header_map: HashMap<String, &RunHeader> =
        headers.iter().map(|h| (h.run_id.clone(), h)).collect();
    let projection = transcript::project(&ordered, &header_map);

    // 6. Tool projection rebuild vs stored rows.
    let diffs = projection_diffs(&scan, &rows.operations, &rows.journal, &parts.tool_commits);

    let mut out_runs: Vec<RunReplay> = Vec::new();
    let mut session_divergences: Vec<Divergence> = Vec::new();
    let mut session_notes: Vec<Note> = Vec::new();
    let run_ids: HashSet<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    let mut run_events_of: HashMap<&str, Vec<&input::RunEventRow>> = HashMap::new();
    for e in &rows.run_events {
        run_events_of.entry(e.run_id.as_str()).or_default().push(e);
    }
    let mut snapshots_of: HashMap<&str, Vec<&input::SnapshotRow>> = HashMap::new();
    for s in &rows.snapshots {
        snapshots_of.entry(s.run_id.as_str()).or_default().push(s);
    }

    for r in &runs {
        let report = report_of(&r.run_id);
        let acc = parts
            .runs
            .get(&(rows.session_id.clone(), r.run_id.clone()))
            .cloned()
            .unwrap_or_default();
        let mut rr = new_run(r, report, &acc);
        rr.steps = build_steps(
            r,
            snapshots_of
                .get(r.run_id.as_str())
                .map_or(&[][..], Vec::as_slice),
            &partner,
            &op_by_event,
        );
        for (i, s) in rr.steps.iter_mut().enumerate() {
            s.index = i;
        }
        terminal_checks(
            r,
            run_events_of
                .get(r.run_id.as_str())
                .map_or(&[][..], Vec::as_slice),
            snapshots_of
                .get(r.run_id.as_str())
                .map_or(&[][..], Vec::as_slice),
            &mut rr,
        );
        out_runs.push(rr);
    }

    // Divergences from the walk, attributed to runs.
    let push = |d: Divergence, out_runs: &mut Vec<RunReplay>, session: &mut Vec<Divergence>| match d
        .run_id
        .as_ref()
        .and_then(|id| out_runs.iter_mut().find(|r| r.run_id == *id))
    {
        Some(run) => run.divergences.push(d),
        None => session.push(d),
    };
    for f in &parts.decode_failures {
        push(
            Divergence::new("event_undecodable", f.message.clone())
                .run(&f.run_id)
                .event(&f.event_id),
            &mut out_runs,
            &mut session_divergences,
        );
    }
    for g in &parts.seq_gaps {
        let f = &g.finding;
        if let Some(message) = excised_gap(&rows.excised_seqs, g) {
            let mut n = Note::new("event_seq_gap_excised", message);
            n.run_id = f.run_id.clone();
            n.event_id = f.event_id.clone();
            match out_runs
                .iter_mut()
                .find(|r| Some(&r.run_id) == f.run_id.as_ref())
            {
                Some(run) => run.notes.push(n),
                None => session_notes.push(n),
            }
            continue;
        }
        let mut d = Divergence::new("event_seq_gap", f.message.clone());
        d.run_id = f.run_id.clone();
        d.event_id = f.event_id.clone();
        push(d, &mut out_runs, &mut session_divergences);
    }
    for issue in &scan.issues {
        let mut d = Divergence::new(
            "scanner_issue",
            format!(
                "Maka's tool-ledger scanner: {}",
                crate::scan::projection::issue_finding(issue).message
            ),
        )
        .run(lossy(&issue.run_id))
        .event(lossy(&issue.event_id));
        d.operation_id = issue.operation_id.as_ref().map(lossy);
        d.tool_call_id = issue.tool_call_id.as_ref().map(lossy);
        d.detail = json!({"issue": issue.code.as_str()});
        push(d, &mut out_runs, &mut session_divergences);
    }

    // Model context pairing.
    let unpaired = |code: &'static str, message: String, event_id: &str, tool_call_id: &str| {
        let run = run_of_event.get(event_id).cloned().unwrap_or_default();
        let mut d = Divergence::new(code, message).run(run).event(event_id);
        d.tool_call_id = Some(tool_call_id.to_owned());
        d.operation_id = op_by_event
            .get(event_id)
            .and_then(|o| o.operation_id.as_ref().map(lossy));
        d
    };
    for u in &strict.results_without_call {
        let message = format!(
            "result of `{}` for tool call `{}` has no earlier call in the model context",
            u.tool_name, u.tool_call_id
        );
        let d = unpaired("result_without_call", message, &u.event_id, &u.tool_call_id);
        push(d, &mut out_runs, &mut session_divergences);
    }
    for u in &strict.calls_without_result {
        let message = format!(
            "call of `{}` (tool call `{}`) has no result; Maka drops it from the model context",
            u.tool_name, u.tool_call_id
        );
        let d = unpaired("call_without_result", message, &u.event_id, &u.tool_call_id);
        push(d, &mut out_runs, &mut session_divergences);
    }
    for p in &strict.paired {
        if let Some((call, result)) = &p.name_mismatch {
            let run = run_of_event
                .get(&p.result_event_id)
                .cloned()
                .unwrap_or_default();
            let d = Divergence::new(
                "tool_name_mismatch",
                format!("result names `{result}` but its call names `{call}`"),
            )
            .run(run)
            .event(&p.result_event_id)
            .values("name", json!(result), json!(call));
            push(d, &mut out_runs, &mut session_divergences);
        }
    }
    // Pairing lists.
    let pair_of = |call: Option<&str>, result: Option<&str>, id: &str, name: &str, status| Pair {
        tool_call_id: id.to_owned(),
        tool_name: name.to_owned(),
        call_event_id: call.map(str::to_owned),
        result_event_id: result.map(str::to_owned),
        status,
    };
    let paired_by_call: HashMap<&str, &str> = strict
        .paired
        .iter()
        .map(|p| (p.call_event_id.as_str(), p.result_event_id.as_str()))
        .collect();
    let open_calls: HashSet<&str> = strict
        .calls_without_result
        .iter()
        .map(|u| u.event_id.as_str())
        .collect();
    let orphan_results: HashSet<&str> = strict
        .results_without_call
        .iter()
        .map(|u| u.event_id.as_str())
        .collect();
    for run in &mut out_runs {
        let mut pairs = Vec::new();
        for st in &run.steps {
            match &st.body {
                StepBody::ToolCall {
                    tool_call_id,
                    tool_name,
                    ..
                } => {
                    let id = st.event_id.as_deref().unwrap_or_default();
                    if let Some(result) = paired_by_call.get(id) {
                        pairs.push(pair_of(
                            Some(id),
                            Some(result),
                            tool_call_id,
                            tool_name,
                            "paired",
                        ));
                    } else if open_calls.contains(id) {
                        pairs.push(pair_of(
                            Some(id),
                            None,
                            tool_call_id,
                            tool_name,
                            "call_without_result",
                        ));
                    }
                }
                StepBody::ToolResult {
                    tool_call_id,
                    tool_name,
                    ..
                } => {
                    let id = st.event_id.as_deref().unwrap_or_default();
                    if orphan_results.contains(id) {
                        pairs.push(pair_of(
                            None,
                            Some(id),
                            tool_call_id,
                            tool_name,
                            "result_without_call",
                        ));
                    }
                }
                _ => {}
            }
        }
        run.pairing = pairs;
    }

    // Tool projections.
    for d in &diffs {
        let (code, what) = match d.kind {
            DiffKind::OperationMissing => (
                "tool_operation_missing",
                "dispatched operation has no tool_operations row",
            ),
            DiffKind::OperationMismatch => ("tool_operation_mismatch", "tool_operations"),
            DiffKind::OperationExtra => (
                "tool_operation_extra",
                "tool_operations row has no dispatched operation in the log",
            ),
            DiffKind::JournalMissing => ("tool_journal_missing", "journal row is missing"),
            DiffKind::JournalMismatch => ("tool_journal_mismatch", "tool_journal_events"),
            DiffKind::JournalExtra => (
                "tool_journal_extra",
                "journal row is not implied by the log",
            ),
        };
        let base = || {
            let mut x = Divergence::new(code, "").run(&d.run_id);
            x.operation_id = Some(d.operation_id.clone());
            x.tool_call_id = Some(d.tool_call_id.clone());
            if let Some(j) = &d.journal_event_id {
                x.detail = json!({"journal_event_id": j, "state": d.journal_state});
            }
            x
        };
        if d.fields.is_empty() {
            let mut x = base();
            x.message = match &d.journal_event_id {
                Some(j) => format!("{what}: `{j}`"),
                None => what.to_owned(),
            };
            if d.kind == DiffKind::OperationMissing || d.kind == DiffKind::JournalMissing {
                x.implied = json!("row");
            } else {
                x.stored = json!("row");
            }
            push(x, &mut out_runs, &mut session_divergences);
        }
        for f in &d.fields {
            let mut x = base();
            let row = d
                .journal_event_id
                .as_deref()
                .map_or(String::new(), |j| format!(" of `{j}`"));
            x.message = format!(
                "{what}.{}{row}: stored {}, the log implies {}",
                f.field, f.stored, f.implied
            );
            x.field = Some(f.field.to_owned());
            x.stored = f.stored.clone();
            x.implied = f.implied.clone();
            push(x, &mut out_runs, &mut session_divergences);
        }
    }
    for op in &rows.operations {
        if op.dispatch_event_id.is_none() {
            let mut n = Note::new(
                "tool_operation_legacy",
                format!(
                    "tool_operations row `{}` has no dispatch_event_id (pre-authority legacy row)",
                    op.operation_id
                ),
            );
            n.run_id = Some(op.run_id.clone()).filter(|r| run_ids.contains(r.as_str()));
            n.detail = json!({"operation_id": op.operation_id});
            match n
                .run_id
                .clone()
                .and_then(|id| out_runs.iter_mut().find(|r| r.run_id == id))
            {
                Some(run) => run.notes.push(n),
                None => session_notes.push(n),
            }
        }
    }

    // 7. Continuation claims.
    continuation_checks(
        rows,
        &runs,
        &mut out_runs,
        &mut session_divergences,
        &mut session_notes,
    );

    // 8. Notes: transcript diagnostics, cache comparison, session facts.
    for d in &projection.diagnostics {
        if d.code == "partial_skipped" {
            continue;
        }
        let mut n = Note::new(
            "transcript_diagnostic",
            format!("Maka's read model: {} ({})", d.message, d.code),
        );
        n.run_id = Some(d.run_id.clone());
        n.event_id = Some(d.event_id.clone());
        n.detail = json!({"code": d.code, "hard": d.hard});
        match out_runs.iter_mut().find(|r| r.run_id == d.run_id) {
            Some(run) => run.notes.push(n),
            None => session_notes.push(n),
        }
    }
    cache_comparison(rows, &runs, &out_runs, &projection, &mut session_notes);
    let session = session_info(rows, &out_runs, &mut session_notes);

    // 9. Supersession.
    let supersession = supersession(&scan, rows, &strict);

    let mut replay = Replay {
        schema_version: 1,
        session_id: rows.session_id.clone(),
        session,
        runs: out_runs,
        divergences: session_divergences,
        notes: session_notes,
        supersession,
        summary: Summary::default(),
    };
    replay.recount();
    replay
}

fn new_run(r: &RunRows<'_>, report: Option<&RunReport>, acc: &RunAcc) -> RunReplay {
    let state = report.map_or(
        if r.header_error.is_some() {
            RunState::HeaderUndecodable
        } else if acc.undecodable > 0 {
            RunState::Unreadable
        } else {
            RunState::NoHeader
        },
        |rep| rep.state,
    );
    let turn_id = r
        .header
        .as_ref()
        .map(|h| h.turn_id.clone())
        .or_else(|| r.events.first().map(|(_, row, _)| row.turn_id.clone()));
    let mut invocation_ids: Vec<String> = Vec::new();
    for (_, row, _) in &r.events {
        if !invocation_ids.contains(&row.invocation_id) {
            invocation_ids.push(row.invocation_id.clone());
        }
    }
    RunReplay {
        run_id: r.run_id.clone(),
        turn_id,
        invocation_ids,
        session_inline: r.header.as_ref().is_none_or(is_session_inline),
        header_status: r.header.as_ref().map(|h| h.status.as_str().to_owned()),
        status: r.header.as_ref().map(|h| h.status.as_str().to_owned()),
        classification: report.and_then(|rep| rep.classification.clone()),
        state,
        failure_class: None,
        abort_source: None,
        terminal_event_id: None,
        operational_terminal: None,
        events: r.events.len() as u64,
        undecodable_events: r.events.iter().filter(|(_, _, d)| d.is_err()).count() as u64,
        steps: Vec::new(),
        pairing: Vec::new(),
        divergences: Vec::new(),
        notes: Vec::new(),
    }
}

fn opt_lossy(s: Option<&crate::json::JsStr>) -> Option<String> {
    s.map(lossy)
}

/// The run's steps: its events in `event_seq` order, partial snapshots merged after
/// their anchor event (snapshots without an anchor first, unknown anchors last), as
/// Maka's store merges them.
fn build_steps(
    r: &RunRows<'_>,
    snaps: &[&input::SnapshotRow],
    partner: &HashMap<String, String>,
    op_by_event: &HashMap<String, &Operation>,
) -> Vec<Step> {
    let snapshot_step = |s: &input::SnapshotRow| Step {
        run_id: r.run_id.clone(),
        index: 0,
        event_id: None,
        event_seq: None,
        ts: crate::json::parse(&s.payload_json).ok().and_then(|v| {
            v.as_object()
                .and_then(|o| o.get("ts"))
                .and_then(Json::as_f64)
        }),
        body: StepBody::Partial {
            stream_key: Some(s.stream_key.clone()),
            text: s.text.clone(),
        },
    };
    let known: HashSet<&str> = r
        .events
        .iter()
        .map(|(_, row, _)| row.event_id.as_str())
        .collect();
    let mut steps: Vec<Step> = snaps
        .iter()
        .filter(|s| s.after_event_id.is_none())
        .map(|s| snapshot_step(s))
        .collect();
    for (seq, row, decoded) in &r.events {
        let at = |body: StepBody, ts: Option<f64>| Step {
            run_id: r.run_id.clone(),
            index: 0,
            event_id: Some(row.event_id.clone()),
            event_seq: Some(*seq),
            ts,
            body,
        };
        match decoded {
            Err(message) => steps.push(at(
                StepBody::Undecodable {
                    message: message.clone(),
                },
                None,
            )),
            Ok(e) => {
                for body in event_steps(e, partner, op_by_event, r) {
                    steps.push(at(body, Some(e.ts)));
                }
            }
        }
        for s in snaps
            .iter()
            .filter(|s| s.after_event_id.as_deref() == Some(row.event_id.as_str()))
        {
            steps.push(snapshot_step(s));
        }
    }
    for s in snaps.iter().filter(|s| {
        s.after_event_id
            .as_deref()
            .is_some_and(|a| !known.contains(a))
    }) {
        steps.push(snapshot_step(s));
    }
    // Thinking joins the text of its step when the step has text.
    let mut merged: Vec<Step> = Vec::with_capacity(steps.len());
    let mut thinking: Vec<(String, String)> = Vec::new();
    for st in &steps {
        if let StepBody::Thinking { message_id, text } = &st.body {
            if steps.iter().any(
                |x| matches!(&x.body, StepBody::Assistant { message_id: m, .. } if m == message_id),
            ) {
                thinking.push((message_id.clone(), text.clone()));
                continue;
            }
        }
        merged.push(st.clone());
    }
    for st in &mut merged {
        if let StepBody::Assistant {
            message_id,
            thinking: t,
            ..
        } = &mut st.body
        {
            let parts: Vec<&str> = thinking
                .iter()
                .filter(|(m, _)| m == message_id)
                .map(|(_, x)| x.as_str())
                .collect();
            if !parts.is_empty() {
                *t = Some(parts.concat());
            }
        }
    }
    merged
}

fn event_steps(
    e: &RuntimeEvent,
    partner: &HashMap<String, String>,
    op_by_event: &HashMap<String, &Operation>,
    r: &RunRows<'_>,
) -> Vec<StepBody> {
    let mut out = Vec::new();
    let id = lossy(&e.id);
    let op = op_by_event.get(&id);
    let t1 = |is_call: bool| -> (Lane, Option<String>, Option<String>) {
        match op {
            Some(op) if op.dispatch.is_some() => {
                let mine = if is_call {
                    op.call_event_id.as_ref() == Some(&e.id)
                } else {
                    op.response.as_ref().is_some_and(|x| x.event_id == e.id)
                };
                if mine {
                    return (
                        Lane::T1,
                        op.operation_id.as_ref().map(lossy),
                        op.dispatch.as_ref().map(|d| lossy(&d.event_id)),
                    );
                }
                (Lane::Generic, None, None)
            }
            _ => (Lane::Generic, None, None),
        }
    };
    if e.partial {
        if let Some(Content::Text { text, .. } | Content::Thinking { text, .. }) = &e.content {
            out.push(StepBody::Partial {
                stream_key: None,
                text: lossy(text),
            });
        }
        return out;
    }
    match &e.content {
        Some(Content::Text {
            text,
            steering,
            fields,
        }) => match e.role {
            Role::User => out.push(StepBody::User {
                message_id: transcript::stable_message_id(e),
                text: lossy(text),
                display_text: fields
                    .get("displayText")
                    .and_then(Json::as_js_str)
                    .map(lossy),
                steering: *steering,
            }),
            Role::Model => out.push(StepBody::Assistant {
                message_id: transcript::step_message_id(e),
                text: lossy(text),
                thinking: None,
            }),
            Role::System => out.push(StepBody::Text {
                role: "system".into(),
                text: lossy(text),
            }),
            Role::Tool => out.push(StepBody::Text {
                role: "tool".into(),
                text: lossy(text),
            }),
        },
        Some(Content::Thinking { text, .. }) => out.push(StepBody::Thinking {
            message_id: transcript::step_message_id(e),
            text: lossy(text),
        }),
        Some(Content::FunctionCall {
            id: call,
            name,
            args,
            ..
        }) => {
            let (lane, operation_id, dispatch) = t1(true);
            out.push(StepBody::ToolCall {
                tool_call_id: lossy(call),
                tool_name: lossy(name),
                step_id: opt_lossy(e.refs.as_ref().and_then(|r| r.step_id.as_ref())),
                args: args.to_serde(),
                lane,
                operation_id,
                dispatch_event_id: dispatch,
                result_event_id: partner.get(&id).cloned(),
            });
        }
        Some(Content::FunctionResponse {
            id: call,
            name,
            result,
            is_error,
            ..
        }) => {
            let (lane, operation_id, _) = t1(false);
            let duration = e
                .actions
                .as_ref()
                .and_then(|a| a.state_delta.as_ref())
                .and_then(|s| s.get("durationMs"))
                .and_then(Json::as_f64);
            out.push(StepBody::ToolResult {
                tool_call_id: lossy(call),
                tool_name: lossy(name),
                is_error: *is_error == Some(true),
                result: result.to_serde(),
                duration_ms: duration,
                lane,
                operation_id,
                call_event_id: partner.get(&id).cloned(),
            });
        }
        Some(Content::Error { message, code, .. }) if !e.is_terminal() => {
            out.push(StepBody::Error {
                message: lossy(message),
                code: opt_lossy(code.as_ref()),
            })
        }
        _ => {}
    }
    if let Some(a) = &e.actions {
        let field = |v: &Option<Json>, k: &str| {
            v.as_ref()
                .and_then(Json::as_object)
                .and_then(|o| o.get(k))
                .and_then(Json::as_js_str)
                .map(lossy)
        };
        if a.permission_request.is_some() {
            out.push(StepBody::PermissionRequest {
                request_id: field(&a.permission_request, "requestId"),
                tool_call_id: field(&a.permission_request, "toolUseId"),
                tool_name: field(&a.permission_request, "toolName"),
            });
        }
        if let Some(d) = &a.permission_decision {
            out.push(StepBody::PermissionDecision {
                request_id: field(&a.permission_decision, "requestId"),
                tool_call_id: opt_lossy(e.refs.as_ref().and_then(|r| r.tool_call_id.as_ref())),
                decision: d
                    .as_object()
                    .and_then(|o| o.get("decision"))
                    .map_or(Value::Null, Json::to_serde),
            });
        }
        if let Some(u) = a.token_usage.as_ref().and_then(Json::as_object) {
            let g = |k: &str| u.get(k).map_or(Value::Null, Json::to_serde);
            out.push(StepBody::TokenUsage {
                input: g("input"),
                output: g("output"),
                total: g("total"),
            });
        }
    }
    if e.is_terminal() {
        let header = r.header.as_ref();
        let status = transcript::turn_status(e.status, header);
        out.push(StepBody::TurnState {
            status: status.map(str::to_owned),
            error_class: (status == Some("failed"))
                .then(|| transcript::failure_class(e, header).unwrap_or_else(|| "unknown".into())),
            abort_source: (status == Some("aborted"))
                .then(|| transcript::abort_source(e, header))
                .flatten(),
            error_message: match &e.content {
                Some(Content::Error { message, .. }) => Some(lossy(message)),
                _ => None,
            },
        });
    }
    out
}

/// A run judged off the event spine (its opening fact, no header): its terminal
/// problems are divergences, an open run a note.
fn spine_checks(rr: &mut RunReplay, run_id: &str, ids: Vec<String>) {
    if rr.state == RunState::Terminal {
        rr.terminal_event_id = ids.first().cloned();
    }
    let div = |code, msg: &str| {
        let mut d = Divergence::new(code, msg.to_owned()).run(run_id);
        d.event_id = ids.first().cloned();
        d
    };
    match rr.state {
        RunState::Ambiguous => rr.divergences.push(div(
            "terminal_ambiguous",
            &format!("{} terminal events: {}", ids.len(), ids.join(", ")),
        )),
        RunState::TerminalNotTail => rr.divergences.push(div(
            "terminal_not_tail",
            "the terminal event is not the run's last immutable event",
        )),
        RunState::TerminalWithoutStatus => rr.divergences.push(div(
            "terminal_incomplete",
            "the only terminal event has no terminal status",
        )),
        RunState::TerminalUnusable => rr.divergences.push(div(
            "terminal_unusable",
            "the only terminal-looking events are partial or name another turn",
        )),
        RunState::Stuck => {
            let mut n = Note::new(
                "run_in_flight",
                "opened by its invocation-opening fact and no terminal event: the run is open",
            );
            n.run_id = Some(run_id.to_owned());
            rr.notes.push(n);
        }
        _ => {}
    }
}

/// Terminal classification vs header and operational terminal event.
fn terminal_checks(
    r: &RunRows<'_>,
    run_events: &[&input::RunEventRow],
    snapshots: &[&input::SnapshotRow],
    rr: &mut RunReplay,
) {
    let run_id = r.run_id.clone();
    let div = |code, msg: String| Divergence::new(code, msg).run(&run_id);
    match rr.state {
        RunState::NoHeader => {
            // Maka's workspace-version authority writes runs without headers.
            let authority = r.events.first().is_some_and(|(_, row, _)| {
                row.session_id == crate::scan::WORKSPACE_AUTHORITY_SESSION
            });
            if !authority {
                rr.divergences.push(div(
                    "header_missing",
                    format!("{} runtime events but no core_agent_runs row", rr.events),
                ));
            }
            return;
        }
        RunState::HeaderUndecodable => {
            rr.divergences.push(div(
                "header_undecodable",
                format!(
                    "run header cannot be decoded: {}",
                    r.header_error.clone().unwrap_or_default()
                ),
            ));
            return;
        }
        RunState::Unreadable => return,
        RunState::NotJudged => {
            let mut n = Note::new(
                "run_not_judged",
                "no readable header (a Maka newer than main dropped core_agent_runs.record_json) \
                 and no invocation-opening fact: whether the run is open is not judged",
            );
            n.run_id = Some(run_id.clone());
            rr.notes.push(n);
            return;
        }
        _ => {}
    }
    if r.header.is_none() {
        let ids: Vec<String> = r
            .events
            .iter()
            .filter_map(|(_, _, d)| d.as_ref().ok())
            .filter(|e| e.is_terminal() && !e.partial)
            .map(|e| lossy(&e.id))
            .collect();
        spine_checks(rr, &run_id, ids);
        return;
    }
    let Some(h) = &r.header else { return };
    let decoded: Vec<RuntimeEvent> = r
        .events
        .iter()
        .filter_map(|(_, _, d)| d.as_ref().ok().cloned())
        .collect();
    let class = classify_terminal_ledger(&header_view(h), &decoded);
    rr.classification = Some(class.kind.as_str().to_owned());
    let fact: Option<&TerminalFact> = class.fact.as_ref();
    if let Some(f) = fact {
        rr.status = Some(f.run_status.as_str().to_owned());
        rr.failure_class = f.failure_class.as_ref().map(lossy);
        rr.abort_source = f.abort_source.as_ref().map(lossy);
        rr.terminal_event_id = Some(lossy(&f.terminal_event_id));
    } else {
        rr.failure_class = h
            .failure_class
            .clone()
            .filter(|_| h.status == crate::header::HeaderStatus::Failed);
        rr.abort_source = h
            .abort_source
            .clone()
            .filter(|_| h.status == crate::header::HeaderStatus::Cancelled);
        rr.terminal_event_id = class.single_terminal_event_id().map(lossy);
    }
    let ids = class
        .terminal_event_ids
        .iter()
        .map(lossy)
        .collect::<Vec<_>>();
    let stored_status = json!(h.status.as_str());
    match rr.state {
        RunState::Ambiguous => rr.divergences.push(
            div(
                "terminal_ambiguous",
                format!("{} terminal events: {}", ids.len(), ids.join(", ")),
            )
            .values("status", stored_status.clone(), json!("ambiguous")),
        ),
        RunState::TerminalNotTail => {
            let mut d = div(
                "terminal_not_tail",
                "the terminal event is not the run's last immutable event".into(),
            );
            d.event_id = ids.first().cloned();
            rr.divergences.push(d);
        }
        RunState::TerminalUnusable => {
            let mut d = div(
                "terminal_unusable",
                "the only terminal-looking events are partial or name another turn".into(),
            );
            d.detail = json!({"event_ids": r.events.iter().filter_map(|(_, _, d)| d.as_ref().ok()).filter(|e| e.is_terminal()).map(|e| lossy(&e.id)).collect::<Vec<_>>()});
            rr.divergences.push(d);
        }
        RunState::HeaderTerminalWithoutEvent => rr.divergences.push(
            div(
                "header_status_mismatch",
                format!(
                    "header is `{}` but the log has no terminal event",
                    h.status.as_str()
                ),
            )
            .values("status", stored_status.clone(), Value::Null),
        ),
        _ => {}
    }
    if class.kind == TerminalKind::IncompleteSingleTerminal {
        let mut d = div(
            "terminal_incomplete",
            format!(
                "the terminal event is not a complete terminal fact: {}",
                class.diagnostics.first().map_or("", |x| x.message)
            ),
        );
        d.event_id = ids.first().cloned();
        rr.divergences.push(d);
    }
    // An open header with a usable terminal event at the tail is not a disagreement:
    // Maka reads the run as terminal and adopts the event at its next start (issue
    // notes 14 and 28), so the header and the run event are only waiting.
    let awaiting = rr.state == RunState::AwaitingAdoption;
    if let (true, Some(f)) = (awaiting, fact) {
        let mut n = Note::new(
            "run_awaiting_adoption",
            format!(
                "header `{}`; the terminal event makes the run `{}`, which Maka adopts at its next start",
                h.status.as_str(),
                f.run_status.run_status().as_str()
            ),
        );
        n.run_id = Some(run_id.clone());
        n.event_id = Some(lossy(&f.terminal_event_id));
        rr.notes.push(n);
    }
    if let Some(f) = fact.filter(|_| !awaiting) {
        let implied = f.run_status.run_status();
        if h.status != implied {
            let mut d = div(
                "header_status_mismatch",
                format!(
                    "header is `{}` but the terminal event makes the run `{}`",
                    h.status.as_str(),
                    implied.as_str()
                ),
            )
            .values("status", stored_status.clone(), json!(implied.as_str()));
            d.event_id = Some(lossy(&f.terminal_event_id));
            rr.divergences.push(d);
        } else if implied == crate::header::HeaderStatus::Failed
            && h.failure_class.as_deref() != f.failure_class.as_ref().map(lossy).as_deref()
        {
            let mut d = div(
                "header_failure_class_mismatch",
                "the header's failureClass differs from the terminal fact's".into(),
            )
            .values(
                "failureClass",
                json!(h.failure_class),
                json!(f.failure_class.as_ref().map(lossy)),
            );
            d.event_id = Some(lossy(&f.terminal_event_id));
            rr.divergences.push(d);
        } else if implied == crate::header::HeaderStatus::Cancelled
            && h.abort_source.as_deref() != f.abort_source.as_ref().map(lossy).as_deref()
        {
            let mut d = div(
                "header_abort_source_mismatch",
                "the header's abortSource differs from the terminal fact's".into(),
            )
            .values(
                "abortSource",
                json!(h.abort_source),
                json!(f.abort_source.as_ref().map(lossy)),
            );
            d.event_id = Some(lossy(&f.terminal_event_id));
            rr.divergences.push(d);
        }
    }

    // The operational terminal event.
    let op_terminals: Vec<&input::RunEventRow> = run_events
        .iter()
        .copied()
        .filter(|e| {
            matches!(
                e.event_type.as_str(),
                "run_completed" | "run_failed" | "run_cancelled"
            )
        })
        .collect();
    rr.operational_terminal = op_terminals.first().map(|e| OperationalTerminal {
        event_id: e.event_id.clone(),
        event_type: e.event_type.clone(),
        sequence: e.sequence,
    });
    if op_terminals.len() > 1 {
        let mut d = div(
            "run_terminal_event_mismatch",
            format!(
                "{} operational terminal events: {}",
                op_terminals.len(),
                op_terminals
                    .iter()
                    .map(|e| e.event_type.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        d.detail =
            json!({"event_ids": op_terminals.iter().map(|e| &e.event_id).collect::<Vec<_>>()});
        rr.divergences.push(d);
        return;
    }
    let op = op_terminals.first();
    match (fact, op) {
        (Some(_), None) if awaiting => {}
        (Some(f), None) => {
            let want = format!("run_{}", f.run_status.as_str());
            rr.divergences.push(
                div(
                    "run_terminal_event_missing",
                    format!("the log's terminal fact implies a `{want}` run event; there is none"),
                )
                .values("event_type", Value::Null, json!(want)),
            );
        }
        (Some(f), Some(op)) => {
            let want = format!("run_{}", f.run_status.as_str());
            if op.event_type != want {
                let mut d = div(
                    "run_terminal_event_mismatch",
                    format!(
                        "operational terminal event is `{}`, the log implies `{want}`",
                        op.event_type
                    ),
                )
                .values("event_type", json!(op.event_type), json!(want));
                d.detail = json!({"run_event_id": op.event_id});
                rr.divergences.push(d);
            } else if let Some(want_class) = f.failure_class.as_ref().map(lossy) {
                let data: Option<Value> = serde_json::from_str::<Value>(&op.record_json)
                    .ok()
                    .and_then(|v| v.get("data").cloned());
                let stored = data
                    .as_ref()
                    .and_then(|d| d.get("failureClass"))
                    .cloned()
                    .unwrap_or(Value::Null);
                if stored != json!(want_class) {
                    let mut d = div(
                        "run_terminal_event_mismatch",
                        "the run_failed event's failureClass differs from the terminal fact's"
                            .into(),
                    )
                    .values("data.failureClass", stored, json!(want_class));
                    d.detail = json!({"run_event_id": op.event_id});
                    rr.divergences.push(d);
                }
            }
        }
        (None, Some(op))
            if class.kind == TerminalKind::None && rr.state != RunState::TerminalUnusable =>
        {
            let mut d = div(
                "run_terminal_event_mismatch",
                format!(
                    "operational terminal event `{}` but the log has no terminal event",
                    op.event_type
                ),
            )
            .values("event_type", json!(op.event_type), Value::Null);
            d.detail = json!({"run_event_id": op.event_id});
            rr.divergences.push(d);
        }
        _ => {}
    }
    if rr.state == RunState::Stuck {
        let mut n = Note::new(
            "run_in_flight",
            format!(
                "header `{}` and no terminal event: the run is open; Maka shows its cached messages",
                h.status.as_str()
            ),
        );
        n.run_id = Some(run_id.clone());
        rr.notes.push(n);
    }
    if !rr.session_inline {
        let mut n = Note::new(
            "run_not_inline",
            "child run (parentRunId without continuation): Maka's session view leaves it out",
        );
        n.run_id = Some(run_id.clone());
        rr.notes.push(n);
    }
    for s in snapshots {
        let mut n = Note::new(
            "partial_snapshot_left",
            format!(
                "partial stream `{}` ({} characters) was never completed by an immutable event",
                s.stream_key,
                s.text.chars().count()
            ),
        );
        n.run_id = Some(run_id.clone());
        n.event_id = s.after_event_id.clone();
        n.detail = json!({"stream_key": s.stream_key, "after_event_id": s.after_event_id, "updated_at": s.updated_at});
        rr.notes.push(n);
    }
}

fn continuation_checks(
    rows: &SessionRows,
    runs: &[RunRows<'_>],
    out_runs: &mut [RunReplay],
    session_divergences: &mut Vec<Divergence>,
    session_notes: &mut Vec<Note>,
) {
    // Recomputes the prefix of (run, invocation) up to `high_water`.
    let recompute =
        |identity: &digest::PrefixIdentity, high_water: i64| -> Result<String, String> {
            let run = runs
                .iter()
                .find(|r| r.run_id == identity.run_id)
                .ok_or_else(|| format!("the session has no rows of run `{}`", identity.run_id))?;
            let mut prefix: Vec<(i64, &RuntimeEvent)> = Vec::new();
            for (seq, row, d) in &run.events {
                if row.invocation_id != identity.invocation_id || *seq > high_water {
                    continue;
                }
                match d {
                    Ok(e) => prefix.push((*seq, e)),
                    Err(m) => return Err(format!("row `{}` cannot be decoded: {m}", row.event_id)),
                }
            }
            if prefix.len() as i64 != high_water {
                return Err(format!(
                    "the claim pins {high_water} events but the run has {} up to that point",
                    prefix.len()
                ));
            }
            digest::prefix_digest(identity, &prefix)
        };
    let mut push = |d: Divergence| match d
        .run_id
        .as_ref()
        .and_then(|id| out_runs.iter_mut().find(|r| r.run_id == *id))
    {
        Some(run) => run.divergences.push(d),
        None => session_divergences.push(d),
    };
    for c in &rows.claims {
        let source_here = c.source_session_id == rows.session_id;
        if !source_here {
            if c.target_session_id == rows.session_id {
                let mut n = Note::new(
                    "continuation_source_elsewhere",
                    format!(
                        "claim `{}` continues run `{}` of session `{}`; its prefix is not replayed here",
                        c.claim_id, c.source_run_id, c.source_session_id
                    ),
                );
                n.run_id = Some(c.target_run_id.clone());
                n.detail = json!({"claim_id": c.claim_id});
                session_notes.push(n);
            }
            continue;
        }
        let identity = digest::PrefixIdentity {
            session_id: c.source_session_id.clone(),
            invocation_id: c.source_invocation_id.clone(),
            run_id: c.source_run_id.clone(),
            turn_id: c.source_turn_id.clone(),
        };
        let base = |code, msg: String| {
            let mut d = Divergence::new(code, msg).run(&c.source_run_id);
            d.detail = json!({"claim_id": c.claim_id});
            d
        };
        let recomputed = match recompute(&identity, c.source_event_high_water) {
            Ok(x) => x,
            Err(m) => {
                push(
                    base(
                        "continuation_prefix_unreadable",
                        format!("claim `{}`: {m}", c.claim_id),
                    )
                    .values(
                        "source_prefix_digest",
                        json!(c.source_prefix_digest),
                        Value::Null,
                    ),
                );
                continue;
            }
        };
        if recomputed != c.source_prefix_digest {
            push(
                base(
                    "continuation_digest_mismatch",
                    format!(
                        "claim `{}`: stored source prefix digest differs from the recomputed one",
                        c.claim_id
                    ),
                )
                .values(
                    "source_prefix_digest",
                    json!(c.source_prefix_digest),
                    json!(recomputed),
                ),
            );
        }
        // Every boundary segment of this session's runs.
        if let Ok(b) = serde_json::from_str::<Value>(&c.boundary_json) {
            let segs = b
                .get("segments")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (i, seg) in segs.iter().enumerate() {
                let ident = &seg["identity"];
                let g = |k: &str| {
                    ident
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                if g("sessionId") != rows.session_id {
                    continue;
                }
                let id = digest::PrefixIdentity {
                    session_id: g("sessionId"),
                    invocation_id: g("invocationId"),
                    run_id: g("runId"),
                    turn_id: g("turnId"),
                };
                let hw = seg["position"]["lastEventSeq"].as_i64().unwrap_or(0);
                let stored = seg.get("prefixDigest").cloned().unwrap_or(Value::Null);
                let field = format!("boundary_json.segments[{i}].prefixDigest");
                match recompute(&id, hw) {
                    Ok(d) if json!(d) != stored => {
                        let mut x = base(
                            "continuation_digest_mismatch",
                            format!(
                                "claim `{}`: boundary segment {i} digest differs",
                                c.claim_id
                            ),
                        )
                        .values(field, stored, json!(d));
                        x.run_id = Some(id.run_id.clone());
                        push(x);
                    }
                    Err(m) => {
                        let mut x = base(
                            "continuation_prefix_unreadable",
                            format!("claim `{}`: boundary segment {i}: {m}", c.claim_id),
                        )
                        .values(field, stored, Value::Null);
                        x.run_id = Some(id.run_id.clone());
                        push(x);
                    }
                    _ => {}
                }
            }
        }
        // The continuation-start event of the target run.
        if let Some(start) = &c.start_event_id {
            let event = runs
                .iter()
                .flat_map(|r| r.events.iter())
                .find(|(_, row, _)| row.event_id == *start)
                .and_then(|(_, _, d)| d.as_ref().ok());
            let digest = event
                .and_then(|e| e.actions.as_ref())
                .and_then(|a| a.continuation_start.as_ref())
                .and_then(Json::as_object)
                .and_then(|o| o.get("immediateSource"))
                .and_then(Json::as_object)
                .and_then(|o| o.get("prefixDigest"))
                .and_then(Json::as_js_str)
                .map(lossy);
            if let Some(d) = digest {
                if d != recomputed {
                    let mut x = base(
                        "continuation_digest_mismatch",
                        format!(
                            "claim `{}`: the continuation-start event pins another prefix digest",
                            c.claim_id
                        ),
                    )
                    .values(
                        "continuationStart.immediateSource.prefixDigest",
                        json!(d),
                        json!(recomputed),
                    );
                    x.event_id = Some(start.clone());
                    push(x);
                }
            }
        }
    }
}

/// Maka's soft comparison of the projection with `session_messages`, over the turns
/// Maka projects (runs that are session-inline and not in flight).
fn cache_comparison(
    rows: &SessionRows,
    runs: &[RunRows<'_>],
    out_runs: &[RunReplay],
    projection: &transcript::Projection,
    notes: &mut Vec<Note>,
) {
    // Maka projects inline runs with a terminal fact; an open inline run without one
    // is in flight (its cached messages stand for it on both sides).
    let excluded_runs: HashSet<&str> = out_runs
        .iter()
        .filter(|r| !r.session_inline || r.classification.as_deref() != Some("fact"))
        .map(|r| r.run_id.as_str())
        .collect();
    let in_flight_turns: HashSet<String> = out_runs
        .iter()
        .filter(|r| {
            r.session_inline
                && r.classification.as_deref() != Some("fact")
                && r.header_status
                    .as_deref()
                    .is_some_and(|s| matches!(s, "created" | "running" | "waiting_for_user"))
        })
        .filter_map(|r| r.turn_id.clone())
        .collect();
    let event_run: HashMap<&str, &str> = runs
        .iter()
        .flat_map(|r| {
            r.events
                .iter()
                .map(move |(_, row, _)| (row.event_id.as_str(), r.run_id.as_str()))
        })
        .collect();
    let projected: Vec<Value> = projection
        .messages
        .iter()
        .filter(|(ev, _)| {
            event_run
                .get(ev.as_str())
                .is_none_or(|r| !excluded_runs.contains(r))
        })
        .map(|(_, m)| m.clone())
        .collect();
    let mut cached = Vec::new();
    for m in &rows.messages {
        match m
            .record_json
            .as_ref()
            .map(|t| serde_json::from_str::<Value>(t))
        {
            Ok(Ok(v)) => {
                let turn = v.get("turnId").and_then(Value::as_str).unwrap_or_default();
                if !in_flight_turns.contains(turn) {
                    cached.push(v);
                }
            }
            Ok(Err(e)) => {
                let mut n = Note::new(
                    "session_messages_unreadable",
                    format!("session_messages {} is not JSON: {e}", m.sequence),
                );
                n.detail = json!({"sequence": m.sequence, "message_id": m.message_id});
                notes.push(n);
            }
            Err(e) => {
                let mut n = Note::new("session_messages_unreadable", e.clone());
                n.detail = json!({"sequence": m.sequence, "message_id": m.message_id});
                notes.push(n);
            }
        }
    }
    if rows.messages.is_empty() && projected.is_empty() {
        return;
    }
    let (missing, unexpected) = transcript::compare_with_cache(&projected, &cached);
    if missing.is_empty() && unexpected.is_empty() {
        return;
    }
    let mut n = Note::new(
        "session_messages_differ",
        format!(
            "cached transcript: {} semantic messages the projection lacks, {} projected messages the cache lacks (soft in Maka)",
            missing.len(),
            unexpected.len()
        ),
    );
    n.detail =
        json!({"missing_legacy_message": missing, "unexpected_projected_message": unexpected});
    notes.push(n);
}

fn session_info(rows: &SessionRows, runs: &[RunReplay], notes: &mut Vec<Note>) -> SessionInfo {
    let status = rows.session.as_ref().and_then(|s| {
        serde_json::from_str::<Value>(&s.payload_json)
            .ok()
            .and_then(|v| v.get("status").and_then(Value::as_str).map(str::to_owned))
    });
    match &rows.session {
        None => notes.push(Note::new(
            "session_missing",
            "the session has no session_metadata row",
        )),
        Some(s) if s.is_archived => notes.push(Note::new(
            "session_archived",
            "the session is archived: Maka's start-up recovery skips it",
        )),
        _ => {}
    }
    let open: Vec<&str> = runs
        .iter()
        .filter(|r| {
            r.header_status.is_some()
                && r.status
                    .as_deref()
                    .is_some_and(|s| matches!(s, "created" | "running" | "waiting_for_user"))
        })
        .map(|r| r.run_id.as_str())
        .collect();
    if let Some(st) = &status {
        let busy = matches!(st.as_str(), "running" | "waiting_for_user");
        if busy && open.is_empty() {
            let mut n = Note::new(
                "session_status",
                format!("session status is `{st}` but no run of the session is open"),
            );
            n.detail = json!({"status": st});
            notes.push(n);
        } else if !busy && !open.is_empty() {
            let mut n = Note::new(
                "session_status",
                format!(
                    "session status is `{st}` while run(s) {} are open in the log",
                    open.join(", ")
                ),
            );
            n.detail = json!({"status": st, "open_runs": open});
            notes.push(n);
        }
    }
    SessionInfo {
        exists: rows.session.is_some(),
        name: rows.session.as_ref().map(|s| s.name.clone()),
        status,
        is_archived: rows.session.as_ref().is_some_and(|s| s.is_archived),
        user_version: rows.schema.user_version,
    }
}

fn supersession(
    scan: &ToolLedgerScan,
    rows: &SessionRows,
    strict: &context::ContextPlan,
) -> Vec<Supersession> {
    supersession_groups(scan, &rows.operations)
        .into_iter()
        .map(|g| {
            let ids: Vec<String> = g.occurrences.iter().map(|o| o.event_id.clone()).collect();
            let model_context = match g.kind.as_str() {
                "call" => strict
                    .paired
                    .iter()
                    .map(|p| &p.call_event_id)
                    .chain(strict.calls_without_result.iter().map(|u| &u.event_id))
                    .find(|e| ids.contains(e))
                    .cloned(),
                "response" => strict
                    .paired
                    .iter()
                    .map(|p| &p.result_event_id)
                    .find(|e| ids.contains(e))
                    .cloned(),
                _ => None,
            };
            let transcript = match g.kind.as_str() {
                "call" | "response" => ids.clone(),
                _ => Vec::new(),
            };
            Supersession {
                kind: g.kind,
                run_id: g.run_id,
                invocation_id: g.invocation_id,
                tool_call_id: g.tool_call_id,
                operation_id: g.operation_id,
                event_ids: ids,
                kept: Kept {
                    tool_operations: g.projection_keeps,
                    transcript,
                    model_context,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
