//! Planning one run: which recipe its state calls for, or why it is left alone
//! (filters, continuation claims), and the unsettled operations Maka answers first.

use serde_json::Value;

use super::adopt::plan_adopt;
use super::new_terminal::plan_new_terminal;
use super::session_cursor::SessionCursor;
use super::{invocation_for, last_activity, Action, PlanEntry, PlanOptions, RunInput, SkipReason};
use crate::db::facts::{ClaimRow, RunRows};
use crate::db::write::RunWrite;
use crate::event::{Content, ModelVisibility, Origin, RuntimeEvent};
use crate::header::RunHeader;
use crate::ledger::scanner::scan_tool_ledger;
use crate::scan::runs::{RunReport, RunState};
use crate::scan::{decode_row, ScanReport, WORKSPACE_AUTHORITY_SESSION};
pub(super) enum Outcome {
    Plan(Box<(PlanEntry, RunWrite)>),
    Skip(SkipReason, String),
    Ignore,
}
pub(super) struct RunCtx<'a> {
    pub(super) report: &'a ScanReport,
    pub(super) opts: &'a PlanOptions,
    pub(super) claims: &'a [ClaimRow],
}

pub(super) fn skip(reason: SkipReason, detail: impl Into<String>) -> Outcome {
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

pub(super) fn plan_run(
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
pub(super) fn outcomes_needed<'a>(
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
