//! Scanner issues as findings, unsettled operations, supersession groups, and the
//! comparison of the stored tool projections with a rebuild from the log (Maka's
//! `rebuildToolProjectionsFromRuntimeEvents`, which keeps dispatched operations only).

use crate::fast_hash::{HashMap, HashSet};
use crate::hash128::Keyed128;
use std::borrow::Cow;
use std::hash::Hash;

use serde::Serialize;
use serde_json::Value;

use super::report::{Occurrence, SupersessionGroup};
use crate::db::{JournalRow, JournalRowRef, OperationRow, OperationRowRef, StoredOperationKey};
use crate::findings::Finding;
use crate::json::JsStr;
use crate::ledger::scanner::{IssueCode, LedgerIssue, Operation, ToolLedgerScan};

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
        IssueCode::ParentOperationMissing => {
            format!("dispatch names a parent operation no dispatch bound{call}{op}")
        }
        IssueCode::ParentIdentityConflict => {
            format!("dispatch's parent operation belongs to another tool call{call}{op}")
        }
        IssueCode::ParentDependencyCycle => {
            format!("dispatch's operation is on a cycle of parent operations{call}{op}")
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

/// One column whose stored value differs from the value the log implies.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldDiff {
    pub field: &'static str,
    /// The stored value (`null`, a string or an integer).
    pub stored: Value,
    /// The value the rebuild from the log writes.
    pub implied: Value,
}

impl FieldDiff {
    fn describe(&self) -> String {
        let show = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        format!(
            "{}: stored `{}`, log implies `{}`",
            self.field,
            show(&self.stored),
            show(&self.implied)
        )
    }
}

/// What kind of disagreement a [`ProjectionDiff`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffKind {
    /// A dispatched operation has no `tool_operations` row.
    OperationMissing,
    /// The row exists; `fields` differ.
    OperationMismatch,
    /// A row with a dispatch that no dispatched operation of the log explains.
    OperationExtra,
    /// A journal row the rebuild writes is missing.
    JournalMissing,
    /// The journal row exists; `fields` differ.
    JournalMismatch,
    /// A journal row of the operation the rebuild does not write.
    JournalExtra,
}

/// One disagreement between the stored tool projections and Maka's rebuild.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProjectionDiff {
    pub kind: DiffKind,
    pub session_id: Option<String>,
    pub run_id: String,
    pub operation_id: String,
    pub tool_call_id: String,
    /// For journal kinds: the journal row's id and state.
    pub journal_event_id: Option<String>,
    pub journal_state: Option<String>,
    /// For extra rows: the stored row's tool name.
    pub tool_name: Option<String>,
    /// For mismatches: the differing columns, in table order.
    pub fields: Vec<FieldDiff>,
}

fn text(s: &str) -> Value {
    Value::from(s)
}

fn opt(v: &Option<String>) -> Value {
    v.as_deref().map_or(Value::Null, Value::from)
}

fn field_diffs(stored: &OperationRow, want: &OperationRow) -> Vec<FieldDiff> {
    let pairs: [(&'static str, Value, Value); 12] = [
        (
            "invocation_id",
            text(&stored.invocation_id),
            text(&want.invocation_id),
        ),
        ("run_id", text(&stored.run_id), text(&want.run_id)),
        ("turn_id", text(&stored.turn_id), text(&want.turn_id)),
        (
            "provider_tool_call_id",
            text(&stored.provider_tool_call_id),
            text(&want.provider_tool_call_id),
        ),
        ("tool_name", text(&stored.tool_name), text(&want.tool_name)),
        (
            "canonical_args_hash",
            text(&stored.canonical_args_hash),
            text(&want.canonical_args_hash),
        ),
        (
            "recovery_mode",
            text(&stored.recovery_mode),
            text(&want.recovery_mode),
        ),
        (
            "current_state",
            text(&stored.current_state),
            text(&want.current_state),
        ),
        (
            "call_event_id",
            text(&stored.call_event_id),
            text(&want.call_event_id),
        ),
        (
            "result_event_id",
            opt(&stored.result_event_id),
            opt(&want.result_event_id),
        ),
        (
            "version",
            Value::from(stored.version),
            Value::from(want.version),
        ),
        (
            "dispatch_event_id",
            opt(&stored.dispatch_event_id),
            opt(&want.dispatch_event_id),
        ),
    ];
    pairs
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(field, stored, implied)| FieldDiff {
            field,
            stored,
            implied,
        })
        .collect()
}

fn journal_diffs(stored: &JournalRow, want: &JournalRow) -> Vec<FieldDiff> {
    let pairs: [(&'static str, Value, Value); 10] = [
        (
            "operation_id",
            text(&stored.operation_id),
            text(&want.operation_id),
        ),
        (
            "invocation_id",
            text(&stored.invocation_id),
            text(&want.invocation_id),
        ),
        ("run_id", text(&stored.run_id), text(&want.run_id)),
        ("turn_id", text(&stored.turn_id), text(&want.turn_id)),
        ("state", text(&stored.state), text(&want.state)),
        (
            "runtime_event_id",
            opt(&stored.runtime_event_id),
            opt(&want.runtime_event_id),
        ),
        (
            "canonical_args_hash",
            opt(&stored.canonical_args_hash),
            opt(&want.canonical_args_hash),
        ),
        (
            "recovery_mode",
            opt(&stored.recovery_mode),
            opt(&want.recovery_mode),
        ),
        (
            "metadata_json",
            opt(&stored.metadata_json),
            opt(&want.metadata_json),
        ),
        (
            "committed_at",
            Value::from(stored.committed_at),
            Value::from(want.committed_at),
        ),
    ];
    pairs
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(field, stored, implied)| FieldDiff {
            field,
            stored,
            implied,
        })
        .collect()
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

/// Where the stored projection rows of an expected operation disagree with the
/// rebuild from the log. `stored` is the `tool_operations` row with its operation id,
/// `journal` the journal rows with its operation id (journal order), `commits` the
/// `committed_at` of the operation's events.
pub fn operation_diffs(
    op: &Operation,
    stored: Option<&OperationRow>,
    journal: &[JournalRow],
    commits: &HashMap<String, i64>,
) -> Vec<ProjectionDiff> {
    let mut out = Vec::new();
    let (Some(op_id), Some(want)) = (op.operation_id.as_ref(), expected_row(op)) else {
        return out;
    };
    let op_id = op_id.to_string();
    let diff = |kind, journal: Option<&JournalRow>, fields| ProjectionDiff {
        kind,
        session_id: Some(op.session_id.to_string()),
        run_id: op.run_id.to_string(),
        operation_id: op_id.clone(),
        tool_call_id: op.tool_call_id.to_string(),
        journal_event_id: journal.map(|j| j.journal_event_id.clone()),
        journal_state: journal.map(|j| j.state.clone()),
        tool_name: None,
        fields,
    };
    match stored {
        None => out.push(diff(DiffKind::OperationMissing, None, Vec::new())),
        Some(row) => {
            let fields = field_diffs(row, &want);
            if !fields.is_empty() {
                out.push(diff(DiffKind::OperationMismatch, None, fields));
            }
        }
    }
    let want_journal = expected_journal(op, commits);
    for w in &want_journal {
        match journal
            .iter()
            .find(|h| h.journal_event_id == w.journal_event_id)
        {
            None => out.push(diff(DiffKind::JournalMissing, Some(w), Vec::new())),
            Some(h) => {
                let fields = journal_diffs(h, w);
                if !fields.is_empty() {
                    out.push(diff(DiffKind::JournalMismatch, Some(w), fields));
                }
            }
        }
    }
    for h in journal {
        if !want_journal
            .iter()
            .any(|w| w.journal_event_id == h.journal_event_id)
        {
            out.push(diff(DiffKind::JournalExtra, Some(h), Vec::new()));
        }
    }
    out
}

/// A stored `tool_operations` row (with a dispatch) that no dispatched operation of
/// the log explains.
pub fn extra_operation_diff(row: &StoredOperationKey, session: Option<String>) -> ProjectionDiff {
    ProjectionDiff {
        kind: DiffKind::OperationExtra,
        session_id: session,
        run_id: row.run_id.clone(),
        operation_id: row.operation_id.clone(),
        tool_call_id: row.provider_tool_call_id.clone(),
        journal_event_id: None,
        journal_state: None,
        tool_name: Some(row.tool_name.clone()),
        fields: Vec::new(),
    }
}

/// A projection diff as a `doctor scan` finding.
pub fn diff_finding(d: &ProjectionDiff) -> Finding {
    let fields = || {
        d.fields
            .iter()
            .map(FieldDiff::describe)
            .collect::<Vec<_>>()
            .join("; ")
    };
    let journal = d.journal_event_id.clone().unwrap_or_default();
    let state = d.journal_state.clone().unwrap_or_default();
    let (code, msg) = match d.kind {
        DiffKind::OperationMissing => (
            "projection_operation_missing",
            "dispatched operation has no tool_operations row".to_owned(),
        ),
        DiffKind::OperationMismatch => ("projection_operation_mismatch", fields()),
        DiffKind::JournalMissing => (
            "projection_journal_missing",
            format!("journal row `{journal}` ({state}) is missing"),
        ),
        DiffKind::JournalMismatch => (
            "projection_journal_mismatch",
            format!("journal row `{journal}`: {}", fields()),
        ),
        DiffKind::JournalExtra => (
            "projection_journal_extra",
            format!("journal row `{journal}` ({state}) is not implied by the log"),
        ),
        DiffKind::OperationExtra => (
            "projection_operation_extra",
            format!(
                "tool_operations row for `{}` has no dispatched operation in the log",
                d.tool_name.as_deref().unwrap_or_default()
            ),
        ),
    };
    let mut f = Finding::new(code, msg)
        .run(d.run_id.clone())
        .operation(d.operation_id.clone())
        .tool_call(d.tool_call_id.clone());
    f.session_id = d.session_id.clone();
    f
}

/// [`operation_diffs`] as findings.
pub fn operation_projection_findings(
    op: &Operation,
    stored: Option<&OperationRow>,
    journal: &[JournalRow],
    commits: &HashMap<String, i64>,
) -> Vec<Finding> {
    operation_diffs(op, stored, journal, commits)
        .iter()
        .map(diff_finding)
        .collect()
}

/// A stored row no dispatched operation explains, as a finding.
pub fn extra_operation_finding(row: &StoredOperationKey, session: Option<String>) -> Finding {
    diff_finding(&extra_operation_diff(row, session))
}

/// Every projection diff of a whole (in-memory) scan: what replay compares for one
/// session. Operations named in a scanner issue, or with recovery facts, are left out
/// (Maka's rebuild refuses the first and interprets the second through its bundle rules).
pub fn projection_diffs(
    scan: &ToolLedgerScan,
    stored_ops: &[OperationRow],
    stored_journal: &[JournalRow],
    commits: &HashMap<String, i64>,
) -> Vec<ProjectionDiff> {
    let stored: HashMap<&str, &OperationRow> = stored_ops
        .iter()
        .map(|r| (r.operation_id.as_str(), r))
        .collect();
    let mut journal_by_op: HashMap<&str, Vec<JournalRow>> = HashMap::default();
    for j in stored_journal {
        journal_by_op
            .entry(j.operation_id.as_str())
            .or_default()
            .push(j.clone());
    }
    let named: HashSet<String> = scan
        .issues
        .iter()
        .filter_map(|i| i.operation_id.as_ref().map(ToString::to_string))
        .collect();
    let mut expected: HashSet<String> = HashSet::default();
    let mut skipped: HashSet<String> = named.clone();
    let mut session_of_run: HashMap<String, String> = HashMap::default();
    let mut out = Vec::new();
    for op in &scan.operations {
        session_of_run.insert(op.run_id.to_string(), op.session_id.to_string());
        let Some(op_id) = op.operation_id.as_ref().map(ToString::to_string) else {
            continue;
        };
        if op.dispatch.is_none() {
            continue;
        }
        if !is_expected(op) || named.contains(&op_id) {
            skipped.insert(op_id);
            continue;
        }
        let journal = journal_by_op
            .get(op_id.as_str())
            .cloned()
            .unwrap_or_default();
        out.extend(operation_diffs(
            op,
            stored.get(op_id.as_str()).copied(),
            &journal,
            commits,
        ));
        expected.insert(op_id);
    }
    for row in stored_ops {
        // Rows without a dispatch are Maka's pre-authority legacy rows: left alone.
        if row.dispatch_event_id.is_none()
            || expected.contains(&row.operation_id)
            || skipped.contains(&row.operation_id)
        {
            continue;
        }
        let key = StoredOperationKey {
            operation_id: row.operation_id.clone(),
            invocation_id: row.invocation_id.clone(),
            run_id: row.run_id.clone(),
            provider_tool_call_id: row.provider_tool_call_id.clone(),
            tool_name: row.tool_name.clone(),
            has_dispatch: true,
        };
        out.push(extra_operation_diff(
            &key,
            session_of_run.get(&row.run_id).cloned(),
        ));
    }
    out
}

/// Every supersession group of a whole (in-memory) scan, for replay.
pub fn supersession_groups(
    scan: &ToolLedgerScan,
    stored_ops: &[OperationRow],
) -> Vec<SupersessionGroup> {
    let by_key: HashMap<(String, String), &OperationRow> = stored_ops
        .iter()
        .map(|r| {
            (
                (r.invocation_id.clone(), r.provider_tool_call_id.clone()),
                r,
            )
        })
        .collect();
    let by_op_id: HashMap<&str, &OperationRow> = stored_ops
        .iter()
        .map(|r| (r.operation_id.as_str(), r))
        .collect();
    let mut groups = Vec::new();
    for op in &scan.operations {
        if has_duplicates(op, &scan.issues) {
            let key = (op.invocation_id.to_string(), op.tool_call_id.to_string());
            groups.extend(operation_groups(
                op,
                &scan.issues,
                by_key.get(&key).copied(),
            ));
        }
    }
    for issue in scan
        .issues
        .iter()
        .filter(|i| i.code == IssueCode::DuplicateOperation)
    {
        let Some(op_id) = &issue.operation_id else {
            continue;
        };
        let owner = scan
            .operations
            .iter()
            .filter(|o| o.operation_id.as_ref() == Some(op_id))
            .filter_map(|o| o.dispatch.as_ref())
            .map(|d| d.event_id.to_string())
            .find(|d| *d != issue.event_id.to_string());
        let stored = by_op_id.get(op_id.to_string().as_str()).copied();
        groups.extend(duplicate_operation_group(issue, owner, stored));
    }
    groups
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

fn split(v: u128) -> [u64; 2] {
    [v as u64, (v >> 64) as u64]
}

fn join(v: [u64; 2]) -> u128 {
    u128::from(v[0]) | (u128::from(v[1]) << 64)
}

/// A string as `to_string` renders it, borrowed when it is UTF-8.
fn t(s: &JsStr) -> Cow<'_, str> {
    s.as_str()
        .map_or_else(|| Cow::Owned(s.to_string_lossy()), Cow::Borrowed)
}

fn key_with(hasher: &Keyed128, operation_id: &str) -> u64 {
    hasher.hash(operation_id) as u64
}

/// A text given as two pieces, hashed as the one text they make, so that the walk
/// need not format a journal id (`{operation}_prepared`) to hash it. Both sides of a
/// digest hash their journal texts as this; with one piece empty it writes what a
/// `str` writes (its bytes, then 0xff), since [`Keyed128`] hashes the bytes written,
/// however they are split into writes.
#[derive(Clone, Copy)]
struct Joined<'a>(&'a str, &'a str);

impl Hash for Joined<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(self.0.as_bytes());
        state.write(self.1.as_bytes());
        state.write_u8(0xff);
    }
}

fn journal_hash_with(
    hasher: &Keyed128,
    texts: [Joined<'_>; 6],
    opts: [Option<&str>; 4],
    committed_at: i64,
) -> u128 {
    hasher.hash(&("journal", texts, opts, committed_at))
}

fn journal_entry_with(hasher: &Keyed128, row: &JournalRowRef<'_>) -> JournalEntry {
    JournalEntry {
        key: key_with(hasher, &row.texts[1]),
        hash: journal_hash_with(
            hasher,
            row.texts.each_ref().map(|c| Joined(c, "")),
            row.opts.each_ref().map(|c| c.as_deref()),
            row.committed_at,
        ),
    }
}

/// What one stored journal row adds to [`StoredDigests`]: its operation id's map key
/// and the row's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalEntry {
    key: u64,
    hash: u128,
}

/// [`StoredDigests::add_journal`]'s hashing, apart from the map (see
/// [`StoredDigests::journal_hasher`]).
#[derive(Clone, Debug)]
pub struct JournalHasher {
    hasher: Keyed128,
}

impl JournalHasher {
    pub fn entry(&self, row: &JournalRowRef<'_>) -> JournalEntry {
        journal_entry_with(&self.hasher, row)
    }
}

/// The `committed_at` of an operation's dispatch and response events, as far as the
/// walk saw them: all [`StoredDigests::matches`] and [`operation_diffs`] read of the
/// invocation's commits. Taken when the operation closes, so that the comparison can
/// happen later, on another thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OperationCommits {
    pub dispatch: Option<i64>,
    pub response: Option<i64>,
}

/// What `commits` (event id to `committed_at`) holds for `op`'s dispatch and response.
pub fn commits_of(op: &Operation, commits: &HashMap<String, i64>) -> OperationCommits {
    let of = |id: &JsStr| commits.get(&*t(id)).copied();
    OperationCommits {
        dispatch: op.dispatch.as_ref().and_then(|d| of(&d.event_id)),
        response: op.response.as_ref().and_then(|r| of(&r.event_id)),
    }
}

/// The commits map [`commits_of`] was read from, reduced to those two entries: the
/// same answers for `op`.
pub fn commit_map(op: &Operation, at: OperationCommits) -> HashMap<String, i64> {
    let mut m = HashMap::default();
    if let (Some(d), Some(c)) = (&op.dispatch, at.dispatch) {
        m.insert(t(&d.event_id).into_owned(), c);
    }
    if let (Some(r), Some(c)) = (&op.response, at.response) {
        m.insert(t(&r.event_id).into_owned(), c);
    }
    m
}

/// Digests of the stored tool projections, one per operation id, read once in table
/// order: lets the walk skip the point lookups of an operation whose stored rows are
/// exactly the rows Maka's rebuild writes (the usual case). A digest is a 128-bit sum
/// (keyed XXH3-128, a random secret per scan) over the compared columns of the operation's
/// `tool_operations` row and of each of its journal rows, so it is equal exactly when
/// [`operation_diffs`] finds nothing, up to a 2^-128 chance; whenever it differs the
/// caller does the exact lookups. Memory: one map entry per operation id, 24 bytes:
/// the key is 64 bits of the id's keyed hash (two ids that share one share a sum,
/// which then matches neither: only extra lookups), the sum 128 bits as two `u64`s
/// (a `u128` would align the entry to 32 bytes).
pub struct StoredDigests {
    hasher: Keyed128,
    sums: HashMap<u64, [u64; 2]>,
}

impl Default for StoredDigests {
    fn default() -> Self {
        StoredDigests::new()
    }
}

impl StoredDigests {
    pub fn new() -> StoredDigests {
        StoredDigests {
            hasher: Keyed128::random(),
            sums: HashMap::default(),
        }
    }

    /// Room for `n` operation ids without growing.
    pub fn with_capacity(n: usize) -> StoredDigests {
        StoredDigests {
            hasher: Keyed128::random(),
            sums: HashMap::with_capacity_and_hasher(n, Default::default()),
        }
    }

    fn hash<T: Hash + ?Sized>(&self, v: &T) -> u128 {
        self.hasher.hash(v)
    }

    /// The compared columns of an operation row (every column but the key).
    fn operation_hash(
        &self,
        texts: [&str; 9],
        result_event_id: Option<&str>,
        version: i64,
        dispatch_event_id: Option<&str>,
    ) -> u128 {
        self.hash(&(
            "operation",
            texts,
            result_event_id,
            version,
            dispatch_event_id,
        ))
    }

    fn operation_row_hash(&self, r: &OperationRow) -> u128 {
        self.operation_hash(
            [
                &r.invocation_id,
                &r.run_id,
                &r.turn_id,
                &r.provider_tool_call_id,
                &r.tool_name,
                &r.canonical_args_hash,
                &r.recovery_mode,
                &r.current_state,
                &r.call_event_id,
            ],
            r.result_event_id.as_deref(),
            r.version,
            r.dispatch_event_id.as_deref(),
        )
    }

    /// The compared columns of a journal row, with the id rows are matched by.
    fn journal_hash(
        &self,
        texts: [Joined<'_>; 6],
        opts: [Option<&str>; 4],
        committed_at: i64,
    ) -> u128 {
        journal_hash_with(&self.hasher, texts, opts, committed_at)
    }

    fn journal_row_hash(&self, r: &JournalRow) -> u128 {
        self.journal_hash(
            [
                &r.journal_event_id,
                &r.operation_id,
                &r.invocation_id,
                &r.run_id,
                &r.turn_id,
                &r.state,
            ]
            .map(|t| Joined(t, "")),
            [
                r.runtime_event_id.as_deref(),
                r.canonical_args_hash.as_deref(),
                r.recovery_mode.as_deref(),
                r.metadata_json.as_deref(),
            ],
            r.committed_at,
        )
    }

    /// The map key of an operation id.
    fn key(&self, operation_id: &str) -> u64 {
        key_with(&self.hasher, operation_id)
    }

    fn add(&mut self, operation_id: &str, h: u128) {
        self.add_entry(JournalEntry {
            key: self.key(operation_id),
            hash: h,
        });
    }

    /// Adds what [`JournalHasher::entry`] made of a stored journal row.
    pub fn add_entry(&mut self, e: JournalEntry) {
        let sum = self.sums.entry(e.key).or_insert([0; 2]);
        *sum = split(join(*sum).wrapping_add(e.hash));
    }

    /// Hashes journal rows for this map apart from it (on another thread, while the
    /// map's owner reads the operations): the hashing is most of a journal row's cost.
    pub fn journal_hasher(&self) -> JournalHasher {
        JournalHasher {
            hasher: self.hasher.clone(),
        }
    }

    /// Adds a stored `tool_operations` row.
    pub fn add_operation(&mut self, row: &OperationRowRef<'_>) {
        let h = self.operation_hash(
            row.texts.each_ref().map(|c| &**c),
            row.result_event_id.as_deref(),
            row.version,
            row.dispatch_event_id.as_deref(),
        );
        self.add(&row.operation_id, h);
    }

    /// Adds a stored `tool_journal_events` row.
    pub fn add_journal(&mut self, row: &JournalRowRef<'_>) {
        self.add_entry(journal_entry_with(&self.hasher, row));
    }

    /// Whether the stored rows of `op`'s operation id are exactly the rebuild's
    /// (then [`operation_diffs`] is empty); `false` means "look them up".
    pub fn matches(&self, op: &Operation, commits: &HashMap<String, i64>) -> bool {
        self.matches_at(op, commits_of(op, commits))
    }

    /// [`StoredDigests::matches`] with the commits it reads ([`commits_of`]).
    pub fn matches_at(&self, op: &Operation, at: OperationCommits) -> bool {
        // The rows of `expected_row` and `expected_journal`, hashed from borrowed text.
        let (Some(op_id), Some(d)) = (op.operation_id.as_ref(), op.dispatch.as_ref()) else {
            return false;
        };
        let op_id = t(op_id);
        let Some(&stored) = self.sums.get(&self.key(&op_id)) else {
            return false;
        };
        let (inv, run, turn) = (t(&op.invocation_id), t(&op.run_id), t(&op.turn_id));
        let (args, mode, dispatch) = (
            t(&d.canonical_args_hash),
            d.recovery_mode.as_str(),
            t(&d.event_id),
        );
        let call = op.call_event_id.as_ref().map(t);
        let result = op.response.as_ref().map(|r| t(&r.event_id));
        let state = if result.is_some() {
            "outcome_committed"
        } else {
            "prepared"
        };
        let mut sum = self.operation_hash(
            [
                &inv,
                &run,
                &turn,
                &t(&op.tool_call_id),
                &t(&op.tool_name),
                &args,
                mode,
                state,
                call.as_deref().unwrap_or_default(),
            ],
            result.as_deref(),
            1 + i64::from(result.is_some()),
            Some(&dispatch),
        );
        // A journal row's id is `{operation}_{suffix}` (see `expected_journal`).
        let journal = |suffix: &str, state: &str, event: &str, committed_at: Option<i64>| {
            let texts = [&op_id, &inv, &run, &turn, state].map(|t| Joined(t, ""));
            self.journal_hash(
                [
                    Joined(&op_id, suffix),
                    texts[0],
                    texts[1],
                    texts[2],
                    texts[3],
                    texts[4],
                ],
                [Some(event), Some(&args), Some(mode), None],
                committed_at.unwrap_or_default(),
            )
        };
        let prepared = journal("_prepared", "prepared", &dispatch, at.dispatch);
        sum = sum.wrapping_add(prepared);
        if let Some(r) = &result {
            sum = sum.wrapping_add(journal("_outcome", "outcome_committed", r, at.response));
        }
        debug_assert_eq!(sum, self.expected_sum(op, &commit_map(op, at)));
        sum == join(stored)
    }

    /// [`StoredDigests::matches`]' sum from the rebuilt rows themselves (checked
    /// against it in debug builds).
    fn expected_sum(&self, op: &Operation, commits: &HashMap<String, i64>) -> u128 {
        let want = expected_row(op).expect("dispatched operation with an id");
        let mut sum = self.operation_row_hash(&want);
        for j in expected_journal(op, commits) {
            sum = sum.wrapping_add(self.journal_row_hash(&j));
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal_row<'a>(op: &'a str, state: &'a str, event: Option<&'a str>) -> JournalRowRef<'a> {
        JournalRowRef {
            texts: [
                Cow::Owned(format!("{op}_{state}")),
                Cow::Borrowed(op),
                Cow::Borrowed("inv"),
                Cow::Borrowed("run"),
                Cow::Borrowed("turn"),
                Cow::Borrowed(state),
            ],
            opts: [
                event.map(Cow::Borrowed),
                Some(Cow::Borrowed("sha256:00")),
                None,
                None,
            ],
            committed_at: 7,
        }
    }

    /// The journal thread's entries (`JournalHasher::entry`, then `add_entry`) build
    /// exactly the sums `add_journal` builds in place.
    #[test]
    fn a_text_in_two_pieces_hashes_as_the_text() {
        let k = Keyed128::random();
        let whole = k.hash("op-1_prepared");
        assert_eq!(k.hash(&Joined("op-1", "_prepared")), whole);
        assert_eq!(k.hash(&Joined("op-1_prepared", "")), whole);
        assert_eq!(k.hash(&Joined("", "op-1_prepared")), whole);
        assert_ne!(k.hash(&Joined("op-1", "_outcome")), whole);
        // In a tuple, as the digests hash it: pieces do not leak into the next text.
        assert_eq!(
            k.hash(&[Joined("a", "b"), Joined("c", "")]),
            k.hash(&["ab", "c"])
        );
        assert_ne!(
            k.hash(&[Joined("a", "b"), Joined("c", "")]),
            k.hash(&["a", "bc"])
        );
    }

    #[test]
    fn journal_rows_hashed_apart_sum_as_rows_added_in_place() {
        let mut here = StoredDigests::new();
        let mut apart = StoredDigests {
            hasher: here.hasher.clone(),
            sums: HashMap::default(),
        };
        let hasher = here.journal_hasher();
        let rows = [
            journal_row("toolop_a", "prepared", Some("ev1")),
            journal_row("toolop_a", "outcome_committed", Some("ev2")),
            journal_row("toolop_b", "prepared", None),
        ];
        for r in &rows {
            here.add_journal(r);
            apart.add_entry(hasher.entry(r));
        }
        assert_eq!(here.sums.len(), 2);
        assert_eq!(here.sums, apart.sums);
        // A column of a row counts: another event id gives another sum.
        apart.add_entry(hasher.entry(&journal_row("toolop_b", "prepared", Some("ev3"))));
        here.add_journal(&journal_row("toolop_b", "prepared", Some("ev4")));
        assert_ne!(here.sums, apart.sums);
    }
}
