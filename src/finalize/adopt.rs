//! `adopt`: a run whose open header has one usable terminal event at its tail gets the
//! header (and the rest of the projection) that event implies.

use serde_json::{json, Map, Value};

use super::header_projection::{header_write, project_rest, Projection};
use super::run_plan::Outcome;
use super::session_cursor::{appended_file, transcript_refusal, SessionCursor};
use super::{last_activity, Action, PlanEntry, RunInput, SkipReason};
use super::{records, recovery};
use crate::db::write::RunWrite;
use crate::event::{EventStatus, RuntimeEvent};
use crate::header::RunHeader;
pub(super) fn plan_adopt(
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
