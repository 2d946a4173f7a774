//! A run's terminal classification compared with its header and its operational
//! terminal event (`core_agent_run_events`), or, for a run read off the event spine,
//! its terminal problems; with the run-level notes (in flight, child run, snapshots left).

use serde_json::{json, Value};

use super::fold::{lossy, RunRows};
use super::{input, Divergence, Note, OperationalTerminal, RunReplay};
use crate::event::RuntimeEvent;
use crate::header::RunHeader;
use crate::ledger::terminal::{
    classify_terminal_ledger, RunHeaderView, TerminalFact, TerminalKind,
};
use crate::scan::runs::RunState;

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
pub(super) fn terminal_checks(
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
