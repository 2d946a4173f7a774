//! The scan's result: the JSON contract of `doctor scan` (schema_version 1).

use serde::Serialize;

use super::release::{schema_findings, WorkspaceRelease};
use super::runs::RunReport;
use super::{Ordinals, Tables, Walker};
use crate::findings::{Finding, Severity};
use crate::header::RunHeader;
use crate::ledger::scanner::LedgerIssue;

/// `maka_gate.first_issue`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GateIssue {
    pub code: String,
    pub event_id: String,
    pub operation_id: Option<String>,
    pub tool_call_id: Option<String>,
}

/// `maka_gate.decode_failure`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GateDecodeFailure {
    pub event_id: String,
    pub message: String,
}

/// What Maka's workspace-wide tool-ledger gate does with this file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MakaGate {
    /// Maka refuses every tool-bearing write in every session.
    pub tool_writes_refused: bool,
    /// The issue Maka names in its errors (null when a row is undecodable: Maka then
    /// throws the decode error instead).
    pub first_issue: Option<GateIssue>,
    pub decode_failure: Option<GateDecodeFailure>,
    /// Maka refuses every append, plain (non-tool) ones included: its store reads
    /// every continuation-claim row before any append and one does not read.
    pub plain_appends_refused: bool,
    /// The first continuation-claim row that refuses every append (`null` when none).
    pub claim_failure: Option<GateClaimFailure>,
    /// A tool projection table (`tool_operations`, `tool_journal_events`) that the
    /// file's release defines and the file lacks (`null` when both are there). Every
    /// release's tool write inserts into both, so each one fails (`no such table`):
    /// `tool_writes_refused` is then true whatever the ledger holds. The releases up
    /// to v0.1.10 open such a file all the same; `doctor rederive` puts the table back.
    pub missing_table: Option<String>,
}

/// `maka_gate.claim_failure`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GateClaimFailure {
    pub claim_id: String,
    /// Maka's error text.
    pub message: String,
}

/// Counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub findings: usize,
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
    pub events: u64,
    pub sessions: usize,
    pub runs: usize,
    pub operations: usize,
    pub scanner_issues: usize,
    pub undecodable_events: usize,
    pub stuck_runs: usize,
    pub unreadable_runs: usize,
    pub runs_awaiting_adoption: usize,
    pub unsettled_operations: usize,
    /// Runtime events that only a Maka newer than main writes (read with the rules for
    /// a file newer than every known generation; named in `newer_event_kinds`).
    pub newer_events: u64,
    /// Runs whose events neither a header nor an invocation-opening fact describes, in
    /// a file whose headers cannot be read (named in `runs_not_judged`).
    pub runs_not_judged: usize,
    /// The file equals a known Maka generation (any release, not only the newest).
    pub schema_current: bool,
    /// The file was read in place through its `-wal`, at one snapshot: commits made
    /// meanwhile (Maka running) are not in the report.
    pub live_snapshot: bool,
}

/// One occurrence of a re-used identity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Occurrence {
    pub event_id: String,
    pub kind: String,
}

/// A group of re-used identities (same invocation and tool call id, or same
/// operation id), with its occurrences in scan order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SupersessionGroup {
    pub session_id: String,
    pub run_id: String,
    pub invocation_id: Option<String>,
    pub tool_call_id: Option<String>,
    pub operation_id: Option<String>,
    /// `call`, `dispatch`, `response` or `operation`.
    pub kind: String,
    pub occurrences: Vec<Occurrence>,
    /// Whether all occurrences carry the same content (a retry) or differ.
    pub identical: Option<bool>,
    /// The occurrence the stored `tool_operations` row references, if any.
    pub projection_keeps: Option<String>,
}

/// The whole scan.
#[derive(Clone, Debug, Serialize)]
pub struct ScanReport {
    pub schema_version: u32,
    pub summary: Summary,
    /// Which Maka release wrote the file (`schema_current` is `exact` here).
    pub workspace_release: WorkspaceRelease,
    /// What the newer Maka builds will say once they have migrated the file (`null`
    /// for a file of main's generation).
    pub upgrade: Option<super::release::UpgradePreview>,
    /// Will Maka open this file, and does its strict start-up recovery complete (set by
    /// `doctor scan`; see `crate::startup`): the writer's, or the build `--maka` names.
    pub startup: Option<crate::startup::Startup>,
    /// `--maka all`: the same object for every catalogued build, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<Vec<crate::startup::Startup>>,
    /// Every catalogued build's composition (strict recovery judged only for the builds
    /// above and the upgrade preview's): the table's "other builds" line.
    #[serde(skip)]
    pub other_builds: Vec<crate::startup::Startup>,
    pub maka_gate: MakaGate,
    pub findings: Vec<Finding>,
    pub supersession: Vec<SupersessionGroup>,
    #[serde(skip)]
    pub runs: Vec<RunReport>,
    #[serde(skip)]
    pub headers: Vec<RunHeader>,
    #[serde(skip)]
    pub issues: Vec<LedgerIssue>,
    /// The journal's event references, when the scan gathered them for the
    /// diagnosis (see [`crate::db::quarantine::JournalEventRefs`]).
    #[serde(skip)]
    pub journal_refs: Option<std::sync::Arc<crate::db::quarantine::JournalEventRefs>>,
}

impl ScanReport {
    /// Recounts the summary's finding counts (after filtering).
    pub fn recount(&mut self) {
        let count = |s: Severity| self.findings.iter().filter(|f| f.severity == s).count();
        self.summary.errors = count(Severity::Error);
        self.summary.warnings = count(Severity::Warning);
        self.summary.infos = count(Severity::Info);
        self.summary.findings = self.findings.len();
    }
}

pub(super) fn build(
    walker: Walker,
    tables: Tables,
    ordinals: Ordinals,
    extra_operations: Vec<Finding>,
) -> ScanReport {
    let Walker {
        scanner,
        decode_failures,
        seq_findings,
        mut run_results,
        unsettled,
        projection: projection_findings,
        supersession,
        events,
        newer_parts,
        newer_events,
        spine_runs,
        unjudged_runs,
        unjudged_sample,
        ..
    } = walker;
    let scan = scanner.finish();
    let recognition = crate::release::recognize(&tables.schema);
    let mut findings = schema_findings(&recognition, &tables.schema);
    let readable = crate::db::shape::ReadableTables::of(&tables.schema.objects);
    findings.extend(super::release::unread_findings(&readable));
    // Run headers not read are named once (`table_not_read`), not once per run.
    let headers_unread = readable.unread.iter().any(|(t, _)| t == "core_agent_runs");
    if let Some(lines) = &tables.integrity {
        if !(lines.len() == 1 && lines[0] == "ok") {
            for line in lines.iter().take(20) {
                findings.push(Finding::new(
                    "sqlite_corrupt",
                    format!("quick_check: {line}"),
                ));
            }
        }
    }
    for f in &decode_failures {
        findings.push(
            Finding::new("event_undecodable", f.message.clone())
                .session(&f.session_id)
                .run(&f.run_id)
                .event(&f.event_id),
        );
    }
    for issue in &scan.issues {
        findings.push(super::projection::issue_finding(issue));
    }
    findings.extend(newer_findings(&newer_parts, newer_events));
    findings.extend(seq_findings);

    // Runs in Maka's header order, then runs without a header by key.
    run_results.sort_by(|a, b| a.order.cmp(&b.order));
    let mut header_order: Vec<&super::RunResult> = run_results
        .iter()
        .filter(|r| r.header_failure.is_some())
        .collect();
    header_order.sort_by(|a, b| a.key.cmp(&b.key));
    for r in header_order {
        findings.extend(r.header_failure.clone());
    }
    for r in &run_results {
        findings.extend(
            r.findings
                .iter()
                .filter(|f| !(headers_unread && f.code == "run_header_missing"))
                .cloned(),
        );
    }
    let stuck = run_results
        .iter()
        .filter(|r| r.state == super::runs::RunState::Stuck)
        .count();
    let unreadable = run_results
        .iter()
        .filter(|r| r.state == super::runs::RunState::Unreadable && r.report.is_some())
        .count();
    let adoptable = run_results
        .iter()
        .filter(|r| r.state == super::runs::RunState::AwaitingAdoption)
        .count();

    if !unjudged_runs.is_empty() {
        findings.push(unjudged_finding(unjudged_runs.len(), &unjudged_sample));
    }
    let unsettled_count = unsettled.len();
    findings.extend(unsettled.into_iter().map(|(_, f)| f));

    for (event_id, session, run) in &ordinals.events_without_ordinal {
        findings.push(
            Finding::new(
                "ordinal_missing",
                "event has no runtime_session_event_ordinals row",
            )
            .session(session)
            .run(run)
            .event(event_id),
        );
    }
    for (session, count, max) in &ordinals.ordinal_gaps {
        findings.push(
            Finding::new(
                "ordinal_gap",
                format!("{count} ordinals but the highest is {max} (expected 1..{count})"),
            )
            .session(session),
        );
    }
    // Projection findings by operation id (stable within one operation), then extras.
    let mut projection_findings = projection_findings;
    projection_findings.sort_by(|a, b| a.0.as_wtf8().cmp(b.0.as_wtf8()));
    findings.extend(projection_findings.into_iter().map(|(_, f)| f));
    findings.extend(extra_operations);

    let missing_table = missing_tool_table(&recognition);
    let maka_gate = MakaGate {
        tool_writes_refused: !decode_failures.is_empty()
            || !scan.issues.is_empty()
            || missing_table.is_some(),
        first_issue: if decode_failures.is_empty() {
            scan.issues.first().map(|i| GateIssue {
                code: i.code.as_str().to_owned(),
                event_id: i.event_id.to_string(),
                operation_id: i.operation_id.as_ref().map(ToString::to_string),
                tool_call_id: i.tool_call_id.as_ref().map(ToString::to_string),
            })
        } else {
            None
        },
        decode_failure: decode_failures.first().map(|f| GateDecodeFailure {
            event_id: f.event_id.clone(),
            message: f.message.clone(),
        }),
        plain_appends_refused: false,
        claim_failure: None,
        missing_table,
    };

    let mut runs = Vec::new();
    let mut headers = Vec::new();
    for r in run_results {
        if let Some(report) = r.report {
            runs.push(report);
        }
        if let Some(h) = r.header {
            headers.push(h);
        }
    }
    let mut report = ScanReport {
        schema_version: 1,
        summary: Summary {
            events,
            sessions: tables.sessions,
            runs: tables.runs + spine_runs.len(),
            operations: tables.operations,
            scanner_issues: scan.issues.len(),
            undecodable_events: decode_failures.len(),
            stuck_runs: stuck,
            unreadable_runs: unreadable,
            runs_awaiting_adoption: adoptable,
            unsettled_operations: unsettled_count,
            newer_events,
            runs_not_judged: unjudged_runs.len(),
            schema_current: recognition.exact(),
            ..Summary::default()
        },
        workspace_release: WorkspaceRelease::of(&recognition, tables.schema.user_version),
        upgrade: None,
        startup: None,
        compatibility: None,
        other_builds: Vec::new(),
        maka_gate,
        findings,
        supersession,
        runs,
        headers,
        issues: scan.issues,
        journal_refs: None,
    };
    report.recount();
    report
}

/// One `newer_event_kinds` finding naming what newer Maka wrote, with counts (none
/// when no event uses anything newer than main).
fn newer_findings(
    parts: &std::collections::BTreeMap<&'static str, u64>,
    events: u64,
) -> Option<Finding> {
    if events == 0 {
        return None;
    }
    let named: Vec<String> = parts.iter().map(|(k, n)| format!("{k} ({n})")).collect();
    let noun = if events == 1 {
        "event uses"
    } else {
        "events use"
    };
    Some(
        Finding::new(
            "newer_event_kinds",
            format!(
                "{events} runtime {noun} what only a Maka newer than main writes: {}",
                named.join(", ")
            ),
        )
        .with_detail(serde_json::json!({
            "events": events,
            "kinds": parts.iter().map(|(k, n)| ((*k).to_owned(), serde_json::json!(n))).collect::<serde_json::Map<_, _>>(),
        })),
    )
}

/// The first tool projection table the closest known release defines and the file
/// lacks (`maka_gate.missing_table`). A file newer than wsledger is not judged so: its
/// differences from an older generation say nothing of what its Maka writes.
fn missing_tool_table(r: &crate::release::Recognition) -> Option<String> {
    if r.is_newer() {
        return None;
    }
    ["tool_operations", "tool_journal_events"]
        .into_iter()
        .find(|t| {
            r.differences
                .objects
                .missing
                .iter()
                .any(|k| k.strip_prefix("table:") == Some(*t))
        })
        .map(str::to_owned)
}

/// The one `runs_not_judged` finding: how many runs, and the first few.
fn unjudged_finding(count: usize, sample: &[(String, String)]) -> Finding {
    let named: Vec<String> = sample.iter().map(|(s, r)| format!("{s}/{r}")).collect();
    let more = if count > sample.len() { ", ..." } else { "" };
    let noun = if count == 1 { "run has" } else { "runs have" };
    Finding::new(
        "runs_not_judged",
        format!(
            "{count} {noun} runtime events but neither a readable header (this file's \
             core_agent_runs has no record_json) nor an invocation-opening fact: whether \
             they are stuck is not judged ({}{more})",
            named.join(", ")
        ),
    )
    .with_detail(serde_json::json!({ "runs": count }))
}
