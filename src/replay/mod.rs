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
//!
//! This file is the room's face: the codes, the document's types and [`replay`]
//! (in `fold`). The work is in parts named by what they do: `fold` (the whole pass),
//! `steps`, `terminal_checks`, `continuation_checks`, `cache_comparison`,
//! `session_info`, `supersession`, on the walk, context, transcript and digest modules.

mod cache_comparison;
pub mod context;
mod continuation_checks;
pub mod digest;
mod fold;
pub mod input;
mod session_info;
pub mod source;
mod steps;
mod supersession;
mod terminal_checks;
pub mod transcript;
mod walk;

pub use fold::replay;
pub use input::{operation_ids_named, InputError, SessionRows};

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::json::Json;
use crate::scan::runs::RunState;

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

#[cfg(test)]
mod tests;
