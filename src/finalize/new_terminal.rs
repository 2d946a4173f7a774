//! A new failed terminal event for a run (`finalize` and `repair_missing_terminal`):
//! the outcomes settled first, the event, and the header and session writes.

use serde_json::{json, Map, Value};

use super::header_projection::{header_write, project_rest, Projection};
use super::records::EventIds;
use super::run_plan::{outcomes_needed, skip, Outcome, RunCtx};
use super::session_cursor::{appended_file, transcript_refusal, trusted, SessionCursor};
use super::{ids, records, recovery};
use super::{last_activity, Action, PlanEntry, RunInput, SkipReason};
use crate::db::write::{NewEvent, OutcomeWrite, RunWrite};
use crate::event::RuntimeEvent;
use crate::header::RunHeader;

#[allow(clippy::too_many_arguments)]
pub(super) fn plan_new_terminal(
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
        let why = match &ctx.report.maka_gate.missing_table {
            Some(t) => format!("table {t} is missing, so every tool write fails"),
            None => "Maka's ledger gate refuses tool writes in this workspace".to_owned(),
        };
        return skip(
            SkipReason::NeedsToolOutcome,
            format!(
                "operation(s) {} need a T2 outcome before the run is sealed, and {why}",
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
