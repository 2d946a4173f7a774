//! `replay`: one session's rows folded into the five re-derivations. It walks the rows
//! as the scan does, orders the runs as Maka does, builds each run (steps, terminal
//! checks), then attributes the walk's damage, the model context's pairing and the
//! tool projection diffs to runs, and adds the continuation, cache and session facts.

use std::collections::{HashMap, HashSet};

use serde_json::json;

use super::cache_comparison::cache_comparison;
use super::continuation_checks::continuation_checks;
use super::session_info::session_info;
use super::steps::build_steps;
use super::supersession::supersession;
use super::terminal_checks::terminal_checks;
use super::{context, input, transcript, walk};
use super::{Divergence, Note, Pair, Replay, RunReplay, SessionRows, StepBody, Summary};
use crate::db::EventRow;
use crate::event::RuntimeEvent;
use crate::header::{decode_header, RunHeader};
use crate::ledger::scanner::Operation;
use crate::scan::projection::{projection_diffs, DiffKind};
use crate::scan::runs::{assess_runs, RunReport, RunState};
use crate::scan::{decode_row_with, RunAcc};

/// One run's rows as replay walks them.
pub(super) struct RunRows<'a> {
    pub(super) run_id: String,
    pub(super) header: Option<RunHeader>,
    pub(super) header_error: Option<String>,
    /// (seq, row, decoded) in `event_seq, event_id` order.
    pub(super) events: Vec<(i64, &'a EventRow, Result<RuntimeEvent, String>)>,
}

fn is_session_inline(h: &RunHeader) -> bool {
    let has = |k: &str| h.record.get(k).is_some_and(|v| !v.is_null());
    !has("parentRunId") || (has("continuationSource") && !has("agentId"))
}

pub(super) fn lossy(s: &crate::json::JsStr) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_excised_only_when_every_skipped_seq_is_in_a_bundle() {
        let gap = |start: i64, end: i64| walk::SeqGap {
            finding: crate::findings::Finding::new("event_seq_gap", ""),
            invocation_id: "inv".into(),
            missing: start..end,
        };
        let mut excised = std::collections::BTreeMap::new();
        excised.insert(("inv".to_owned(), 2), "b1".to_owned());
        excised.insert(("inv".to_owned(), 3), "b2".to_owned());
        let one = excised_gap(&excised, &gap(2, 3)).unwrap();
        assert!(one.contains("event_seq 2 was excised into b1"), "{one}");
        let two = excised_gap(&excised, &gap(2, 4)).unwrap();
        assert!(
            two.contains("event_seq 2, 3 were excised into b1, b2"),
            "{two}"
        );
        assert_eq!(excised_gap(&excised, &gap(2, 5)), None);
        assert_eq!(excised_gap(&excised, &gap(3, 3)), None);
        // Seqs far apart (a hostile log) are neither walked nor overflowed.
        assert_eq!(excised_gap(&excised, &gap(-4, i64::MAX)), None);
        assert_eq!(excised_gap(&excised, &gap(i64::MIN, i64::MAX)), None);
    }
}
