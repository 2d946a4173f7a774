//! Scanner issues as findings, unsettled operations, supersession groups, and the
//! comparison of the stored tool projections with a rebuild from the log (Maka's
//! `rebuildToolProjectionsFromRuntimeEvents`, which keeps dispatched operations only).

use std::collections::HashMap;

use super::report::{Occurrence, SupersessionGroup};
use crate::db::{JournalRow, OperationRow, StoredOperationKey};
use crate::findings::Finding;
use crate::ledger::scanner::{IssueCode, LedgerIssue, Operation};

/// A scanner issue as a finding (code verbatim, attributed to the event's session and run).
pub fn issue_finding(issue: &LedgerIssue) -> Finding {
    let call = issue
        .tool_call_id
        .as_ref()
        .map(|t| format!(" for tool call `{t}`"))
        .unwrap_or_default();
    let op = issue
        .operation_id
        .as_ref()
        .map(|o| format!(" (operation `{o}`)"))
        .unwrap_or_default();
    let what = match issue.code {
        IssueCode::DuplicateEventId => "event id already seen earlier in the scan".to_owned(),
        IssueCode::SemanticLaneConflict => "tool event does not fit its semantic lane".to_owned(),
        IssueCode::DuplicateCall => format!("second function_call{call}{op}"),
        IssueCode::DuplicateOperation => {
            format!("dispatch re-uses an operation id bound to another call{call}{op}")
        }
        IssueCode::DuplicateDispatch => format!("second dispatch{call}{op}"),
        IssueCode::DuplicateResponse => format!("second function_response{call}{op}"),
        IssueCode::OrphanDispatch => format!("dispatch without a call{call}{op}"),
        IssueCode::OrphanResponse => {
            format!("function_response{call} has no earlier call in its invocation")
        }
        IssueCode::CanonicalArgsHashConflict => {
            format!("dispatch hash differs from the call's arguments{call}{op}")
        }
        IssueCode::InvocationIdentityConflict => {
            "event's session/run/turn differ from its invocation's first event".to_owned()
        }
        IssueCode::IdentityConflict => {
            format!("identity differs between call, dispatch and response{call}{op}")
        }
        IssueCode::EventOrderConflict => {
            format!("tool fact before the fact it depends on{call}{op}")
        }
    };
    let mut f = Finding::new(issue.code.as_str(), what)
        .session(issue.session_id.to_string())
        .run(issue.run_id.to_string())
        .event(issue.event_id.to_string());
    f.operation_id = issue.operation_id.as_ref().map(ToString::to_string);
    f.tool_call_id = issue.tool_call_id.as_ref().map(ToString::to_string);
    f
}

fn settled(op: &Operation) -> bool {
    op.response.is_some() || !op.decision_event_ids.is_empty()
}

/// `operation_unsettled` for a dispatched operation without an outcome (operations
/// named in a scanner issue are reported there).
pub fn unsettled_finding(op: &Operation) -> Option<Finding> {
    if op.dispatch.is_none() || settled(op) || !op.issues.is_empty() {
        return None;
    }
    let mode = op
        .dispatch
        .as_ref()
        .map_or("", |d| d.recovery_mode.as_str());
    let mut f = Finding::new(
        "operation_unsettled",
        format!(
            "`{}` was dispatched (recovery mode {mode}) and has no outcome",
            op.tool_name
        ),
    )
    .session(op.session_id.to_string())
    .run(op.run_id.to_string())
    .tool_call(op.tool_call_id.to_string());
    if let Some(d) = &op.dispatch {
        f.event_id = Some(d.event_id.to_string());
    }
    f.operation_id = op.operation_id.as_ref().map(ToString::to_string);
    Some(f)
}

/// The `tool_operations` row Maka's rebuild writes for a dispatched operation.
fn expected_row(op: &Operation) -> Option<OperationRow> {
    let d = op.dispatch.as_ref()?;
    let op_id = op.operation_id.as_ref()?;
    Some(OperationRow {
        operation_id: op_id.to_string(),
        invocation_id: op.invocation_id.to_string(),
        run_id: op.run_id.to_string(),
        turn_id: op.turn_id.to_string(),
        provider_tool_call_id: op.tool_call_id.to_string(),
        tool_name: op.tool_name.to_string(),
        canonical_args_hash: d.canonical_args_hash.to_string(),
        recovery_mode: d.recovery_mode.as_str().to_owned(),
        current_state: if op.response.is_some() {
            "outcome_committed"
        } else {
            "prepared"
        }
        .to_owned(),
        call_event_id: op
            .call_event_id
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        result_event_id: op.response.as_ref().map(|r| r.event_id.to_string()),
        version: 1 + i64::from(op.response.is_some()),
        dispatch_event_id: Some(d.event_id.to_string()),
    })
}

/// The journal rows Maka's rebuild writes for a dispatched operation (no recovery facts).
fn expected_journal(op: &Operation, commits: &HashMap<String, i64>) -> Vec<JournalRow> {
    let (Some(d), Some(op_id)) = (op.dispatch.as_ref(), op.operation_id.as_ref()) else {
        return Vec::new();
    };
    let row = |id: String, state: &str, event: &str| JournalRow {
        journal_seq: 0,
        journal_event_id: id,
        operation_id: op_id.to_string(),
        invocation_id: op.invocation_id.to_string(),
        run_id: op.run_id.to_string(),
        turn_id: op.turn_id.to_string(),
        state: state.to_owned(),
        runtime_event_id: Some(event.to_owned()),
        canonical_args_hash: Some(d.canonical_args_hash.to_string()),
        recovery_mode: Some(d.recovery_mode.as_str().to_owned()),
        metadata_json: None,
        committed_at: commits.get(event).copied().unwrap_or_default(),
    };
    let mut rows = vec![row(
        format!("{op_id}_prepared"),
        "prepared",
        &d.event_id.to_string(),
    )];
    if let Some(r) = &op.response {
        rows.push(row(
            format!("{op_id}_outcome"),
            "outcome_committed",
            &r.event_id.to_string(),
        ));
    }
    rows
}

fn field_diffs(stored: &OperationRow, want: &OperationRow) -> Vec<String> {
    let mut out = Vec::new();
    let mut cmp = |name: &str, a: String, b: String| {
        if a != b {
            out.push(format!("{name}: stored `{a}`, log implies `{b}`"));
        }
    };
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "null".into());
    cmp(
        "invocation_id",
        stored.invocation_id.clone(),
        want.invocation_id.clone(),
    );
    cmp("run_id", stored.run_id.clone(), want.run_id.clone());
    cmp("turn_id", stored.turn_id.clone(), want.turn_id.clone());
    cmp(
        "provider_tool_call_id",
        stored.provider_tool_call_id.clone(),
        want.provider_tool_call_id.clone(),
    );
    cmp(
        "tool_name",
        stored.tool_name.clone(),
        want.tool_name.clone(),
    );
    cmp(
        "canonical_args_hash",
        stored.canonical_args_hash.clone(),
        want.canonical_args_hash.clone(),
    );
    cmp(
        "recovery_mode",
        stored.recovery_mode.clone(),
        want.recovery_mode.clone(),
    );
    cmp(
        "current_state",
        stored.current_state.clone(),
        want.current_state.clone(),
    );
    cmp(
        "call_event_id",
        stored.call_event_id.clone(),
        want.call_event_id.clone(),
    );
    cmp(
        "result_event_id",
        o(&stored.result_event_id),
        o(&want.result_event_id),
    );
    cmp(
        "version",
        stored.version.to_string(),
        want.version.to_string(),
    );
    cmp(
        "dispatch_event_id",
        o(&stored.dispatch_event_id),
        o(&want.dispatch_event_id),
    );
    out
}

fn journal_diffs(stored: &JournalRow, want: &JournalRow) -> Vec<String> {
    let mut out = Vec::new();
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "null".into());
    let pairs = [
        (
            "operation_id",
            stored.operation_id.clone(),
            want.operation_id.clone(),
        ),
        (
            "invocation_id",
            stored.invocation_id.clone(),
            want.invocation_id.clone(),
        ),
        ("run_id", stored.run_id.clone(), want.run_id.clone()),
        ("turn_id", stored.turn_id.clone(), want.turn_id.clone()),
        ("state", stored.state.clone(), want.state.clone()),
        (
            "runtime_event_id",
            o(&stored.runtime_event_id),
            o(&want.runtime_event_id),
        ),
        (
            "canonical_args_hash",
            o(&stored.canonical_args_hash),
            o(&want.canonical_args_hash),
        ),
        (
            "recovery_mode",
            o(&stored.recovery_mode),
            o(&want.recovery_mode),
        ),
        (
            "metadata_json",
            o(&stored.metadata_json),
            o(&want.metadata_json),
        ),
        (
            "committed_at",
            stored.committed_at.to_string(),
            want.committed_at.to_string(),
        ),
    ];
    for (name, a, b) in pairs {
        if a != b {
            out.push(format!("{name}: stored `{a}`, log implies `{b}`"));
        }
    }
    out
}

/// Whether Maka's rebuild writes projection rows for `op`: dispatched, bound to an
/// operation id, no scanner issue and no recovery fact of its own. (An issue elsewhere
/// naming its operation id also excludes it; the caller checks that at the end.)
pub fn is_expected(op: &Operation) -> bool {
    op.operation_id.is_some()
        && op.dispatch.is_some()
        && op.issues.is_empty()
        && op.reconcile_event_ids.is_empty()
        && op.decision_event_ids.is_empty()
}

/// Where the stored projection rows of an expected operation disagree with the rebuild
/// from the log. `stored` is the `tool_operations` row with its operation id, `journal`
/// the journal rows with its operation id (journal order), `commits` the
/// `committed_at` of the operation's events.
pub fn operation_projection_findings(
    op: &Operation,
    stored: Option<&OperationRow>,
    journal: &[JournalRow],
    commits: &HashMap<String, i64>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let (Some(op_id), Some(want)) = (op.operation_id.as_ref(), expected_row(op)) else {
        return out;
    };
    let op_id = op_id.to_string();
    let scope = |f: Finding| {
        f.session(op.session_id.to_string())
            .run(op.run_id.to_string())
            .operation(op_id.clone())
            .tool_call(op.tool_call_id.to_string())
    };
    match stored {
        None => out.push(scope(Finding::new(
            "projection_operation_missing",
            "dispatched operation has no tool_operations row".to_owned(),
        ))),
        Some(row) => {
            let diffs = field_diffs(row, &want);
            if !diffs.is_empty() {
                out.push(scope(Finding::new(
                    "projection_operation_mismatch",
                    diffs.join("; "),
                )));
            }
        }
    }
    let want_journal = expected_journal(op, commits);
    for w in &want_journal {
        match journal
            .iter()
            .find(|h| h.journal_event_id == w.journal_event_id)
        {
            None => out.push(scope(Finding::new(
                "projection_journal_missing",
                format!(
                    "journal row `{}` ({}) is missing",
                    w.journal_event_id, w.state
                ),
            ))),
            Some(h) => {
                let diffs = journal_diffs(h, w);
                if !diffs.is_empty() {
                    out.push(scope(Finding::new(
                        "projection_journal_mismatch",
                        format!("journal row `{}`: {}", w.journal_event_id, diffs.join("; ")),
                    )));
                }
            }
        }
    }
    for h in journal {
        if !want_journal
            .iter()
            .any(|w| w.journal_event_id == h.journal_event_id)
        {
            out.push(scope(Finding::new(
                "projection_journal_extra",
                format!(
                    "journal row `{}` ({}) is not implied by the log",
                    h.journal_event_id, h.state
                ),
            )));
        }
    }
    out
}

/// A stored `tool_operations` row (with a dispatch) that no dispatched operation of
/// the log explains.
pub fn extra_operation_finding(row: &StoredOperationKey, session: Option<String>) -> Finding {
    let mut f = Finding::new(
        "projection_operation_extra",
        format!(
            "tool_operations row for `{}` has no dispatched operation in the log",
            row.tool_name
        ),
    )
    .run(row.run_id.clone())
    .operation(row.operation_id.clone())
    .tool_call(row.provider_tool_call_id.clone());
    f.session_id = session;
    f
}

/// Whether `op` carries a duplicate call, dispatch or response issue (it then forms
/// supersession groups and needs its stored row by key).
pub fn has_duplicates(op: &Operation, issues: &[LedgerIssue]) -> bool {
    op.issues.iter().filter_map(|i| issues.get(*i)).any(|i| {
        matches!(
            i.code,
            IssueCode::DuplicateCall | IssueCode::DuplicateDispatch | IssueCode::DuplicateResponse
        )
    })
}

/// The supersession groups of one operation (re-used call, dispatch or response).
/// `stored` is the `tool_operations` row of the operation's (invocation, tool call id).
pub fn operation_groups(
    op: &Operation,
    issues: &[LedgerIssue],
    stored: Option<&OperationRow>,
) -> Vec<SupersessionGroup> {
    let mut groups = Vec::new();
    for kind in ["call", "dispatch", "response"] {
        let code = match kind {
            "call" => IssueCode::DuplicateCall,
            "dispatch" => IssueCode::DuplicateDispatch,
            _ => IssueCode::DuplicateResponse,
        };
        let dups: Vec<&LedgerIssue> = op
            .issues
            .iter()
            .filter_map(|i| issues.get(*i))
            .filter(|i| i.code == code)
            .collect();
        if dups.is_empty() {
            continue;
        }
        let first = match kind {
            "call" => op.call_event_id.clone(),
            "dispatch" => op.dispatch.as_ref().map(|d| d.event_id.clone()),
            _ => op.response.as_ref().map(|r| r.event_id.clone()),
        };
        let mut occurrences: Vec<Occurrence> = first
            .iter()
            .map(|e| Occurrence {
                event_id: e.to_string(),
                kind: kind.to_owned(),
            })
            .collect();
        occurrences.extend(dups.iter().map(|i| Occurrence {
            event_id: i.event_id.to_string(),
            kind: kind.to_owned(),
        }));
        let kept = stored.and_then(|row| {
            let referenced = match kind {
                "call" => Some(row.call_event_id.clone()),
                "dispatch" => row.dispatch_event_id.clone(),
                _ => row.result_event_id.clone(),
            };
            referenced.filter(|r| occurrences.iter().any(|o| o.event_id == *r))
        });
        groups.push(SupersessionGroup {
            session_id: op.session_id.to_string(),
            run_id: op.run_id.to_string(),
            invocation_id: Some(op.invocation_id.to_string()),
            tool_call_id: Some(op.tool_call_id.to_string()),
            operation_id: op.operation_id.as_ref().map(ToString::to_string),
            kind: kind.to_owned(),
            occurrences,
            identical: None,
            projection_keeps: kept,
        });
    }
    groups
}

/// The group of a re-used operation id: the dispatch that bound it first (`owner`),
/// then the re-use. `stored` is the `tool_operations` row of that operation id.
pub fn duplicate_operation_group(
    issue: &LedgerIssue,
    owner: Option<String>,
    stored: Option<&OperationRow>,
) -> Option<SupersessionGroup> {
    let op_id = issue.operation_id.as_ref()?;
    let mut occurrences = Vec::new();
    if let Some(d) = owner.filter(|d| *d != issue.event_id.to_string()) {
        occurrences.push(Occurrence {
            event_id: d,
            kind: "dispatch".into(),
        });
    }
    occurrences.push(Occurrence {
        event_id: issue.event_id.to_string(),
        kind: "dispatch".into(),
    });
    let kept = stored
        .and_then(|r| r.dispatch_event_id.clone())
        .filter(|r| occurrences.iter().any(|o| o.event_id == *r));
    Some(SupersessionGroup {
        session_id: issue.session_id.to_string(),
        run_id: issue.run_id.to_string(),
        invocation_id: None,
        tool_call_id: issue.tool_call_id.as_ref().map(ToString::to_string),
        operation_id: Some(op_id.to_string()),
        kind: "operation".into(),
        occurrences,
        identical: None,
        projection_keeps: kept,
    })
}
