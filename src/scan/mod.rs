//! `doctor scan`: every finding about one workspace, computed from its rows.
//!
//! Pure: the caller streams `runtime_events` rows in Maka's health-scan order into a
//! [`Walker`], then hands the other tables to [`Walker::finish`]. Memory grows with
//! runs and tool operations, not with events: only terminal-looking events are kept.

pub mod projection;
mod report;
pub mod runs;

pub use report::*;

use std::collections::HashMap;

use crate::db::schema::{diff_schema, CAPABILITIES, REGISTRY, RUNTIME_USER_VERSION};
use crate::db::SchemaFacts;
use crate::db::{EventRow, HeaderRow, JournalRow, OperationRow, SessionRow};
use crate::event::{decode_event_text, row_identity_matches, RowIdentity, RuntimeEvent};
use crate::findings::Finding;
use crate::ledger::scanner::{ScanOptions as ScannerOptions, ToolLedgerScanner};

/// The reserved session of Maka's workspace-version authority: events without run
/// headers, never written by anyone else.
pub const WORKSPACE_AUTHORITY_SESSION: &str = "maka_workspace_authority";

/// A row that does not decode, in scan order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeFailure {
    pub event_id: String,
    pub session_id: String,
    pub run_id: String,
    pub message: String,
}

/// What the walk keeps about one run (keyed by the row's session and run columns).
#[derive(Clone, Debug, Default)]
pub struct RunAcc {
    pub rows: u64,
    pub undecodable: u64,
    pub max_seq: i64,
    /// Largest event `ts` of the run's decodable rows.
    pub last_ts: Option<f64>,
    /// `invocation_id` columns seen (normally exactly one).
    pub invocations: Vec<String>,
    /// Terminal-looking events (any partial flag, any turn) with their `event_seq`.
    pub terminals: Vec<(i64, RuntimeEvent)>,
    /// Last decodable row by `event_seq`: (seq, event id).
    pub tail: Option<(i64, String)>,
}

/// Streams rows; see the module docs.
pub struct Walker {
    scanner: ToolLedgerScanner,
    runs: HashMap<(String, String), RunAcc>,
    decode_failures: Vec<DecodeFailure>,
    seq_findings: Vec<Finding>,
    current_invocation: Option<String>,
    expected_seq: i64,
    /// `committed_at` of tool-lane rows, for the projection rebuild.
    tool_commits: HashMap<String, i64>,
    events: u64,
}

impl Default for Walker {
    fn default() -> Self {
        Walker::new()
    }
}

impl Walker {
    pub fn new() -> Walker {
        Walker {
            // Rows come from a table whose primary key is event_id.
            scanner: ToolLedgerScanner::new(ScannerOptions::store_rows()),
            runs: HashMap::new(),
            decode_failures: Vec::new(),
            seq_findings: Vec::new(),
            current_invocation: None,
            expected_seq: 1,
            tool_commits: HashMap::new(),
            events: 0,
        }
    }

    /// Number of rows seen.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Feeds the next row in `invocation_id, event_seq, event_id` order.
    pub fn push_row(&mut self, row: EventRow) {
        self.events += 1;
        self.check_seq(&row);
        let key = (row.session_id.clone(), row.run_id.clone());
        let decoded = decode_row(&row);
        let acc = self.runs.entry(key).or_default();
        acc.rows += 1;
        acc.max_seq = acc.max_seq.max(row.event_seq);
        if !acc.invocations.contains(&row.invocation_id) {
            acc.invocations.push(row.invocation_id.clone());
        }
        match decoded {
            Err(message) => {
                acc.undecodable += 1;
                self.decode_failures.push(DecodeFailure {
                    event_id: row.event_id,
                    session_id: row.session_id,
                    run_id: row.run_id,
                    message,
                });
            }
            Ok(event) => {
                acc.last_ts = Some(acc.last_ts.map_or(event.ts, |t| t.max(event.ts)));
                if acc.tail.as_ref().is_none_or(|(s, _)| row.event_seq >= *s) {
                    acc.tail = Some((row.event_seq, row.event_id.clone()));
                }
                if event.is_terminal() {
                    acc.terminals.push((row.event_seq, event.clone()));
                }
                if is_tool_bearing(&event) {
                    self.tool_commits
                        .insert(row.event_id.clone(), row.committed_at);
                }
                // Rows arrive in store order, so the scanner's order check cannot fail.
                let pushed = self.scanner.push(&event);
                debug_assert!(pushed.is_ok());
            }
        }
    }

    fn check_seq(&mut self, row: &EventRow) {
        if self.current_invocation.as_deref() != Some(row.invocation_id.as_str()) {
            self.current_invocation = Some(row.invocation_id.clone());
            self.expected_seq = 1;
        }
        if row.event_seq != self.expected_seq {
            self.seq_findings.push(
                Finding::new(
                    "event_seq_gap",
                    format!(
                        "invocation `{}`: event_seq {} where {} was expected",
                        row.invocation_id, row.event_seq, self.expected_seq
                    ),
                )
                .session(&row.session_id)
                .run(&row.run_id)
                .event(&row.event_id),
            );
        }
        self.expected_seq = row.event_seq + 1;
    }

    /// Completes the scan with the other tables.
    pub fn finish(self, tables: Tables) -> ScanReport {
        report::build(self, tables)
    }

    /// What the walk computed, for callers that assemble their own report (replay).
    pub fn into_parts(self) -> WalkParts {
        WalkParts {
            scan: self.scanner.finish(),
            runs: self.runs,
            decode_failures: self.decode_failures,
            seq_findings: self.seq_findings,
            tool_commits: self.tool_commits,
            events: self.events,
        }
    }
}

/// The result of a walk: the scanner's result, per-run facts, undecodable rows,
/// `event_seq` gaps, and the `committed_at` of every tool-bearing row.
pub struct WalkParts {
    pub scan: crate::ledger::scanner::ToolLedgerScan,
    pub runs: HashMap<(String, String), RunAcc>,
    pub decode_failures: Vec<DecodeFailure>,
    pub seq_findings: Vec<Finding>,
    pub tool_commits: HashMap<String, i64>,
    pub events: u64,
}

/// Tool-bearing as Maka's gate defines it: a call or response, or a dispatch or
/// recovery fact.
pub fn is_tool_bearing(event: &RuntimeEvent) -> bool {
    matches!(
        event.content_kind(),
        Some("function_call" | "function_response")
    ) || event
        .actions
        .as_ref()
        .is_some_and(|a| a.tool_dispatch.is_some() || a.tool_recovery.is_some())
}

/// Decodes a row as Maka's store reads it: strict decode, then the row/payload
/// identity check.
pub fn decode_row(row: &EventRow) -> Result<RuntimeEvent, String> {
    let event = decode_event_text(&row.payload_json).map_err(|e| e.to_string())?;
    let identity = RowIdentity {
        event_id: row.event_id.clone(),
        session_id: row.session_id.clone(),
        invocation_id: row.invocation_id.clone(),
        run_id: row.run_id.clone(),
        turn_id: row.turn_id.clone(),
    };
    if !row_identity_matches(&event, &identity) {
        return Err(format!(
            "RuntimeEvent row/payload identity mismatch for {}",
            row.event_id
        ));
    }
    Ok(event)
}

/// The tables besides `runtime_events` that the scan reads (absent tables are `None`).
#[derive(Default)]
pub struct Tables {
    pub schema: SchemaFacts,
    pub headers: Option<Vec<HeaderRow>>,
    pub operations: Option<Vec<OperationRow>>,
    pub journal: Option<Vec<JournalRow>>,
    pub sessions: Option<Vec<SessionRow>>,
    pub events_without_ordinal: Vec<(String, String, String)>,
    pub ordinal_gaps: Vec<(String, i64, i64)>,
    pub integrity: Option<Vec<String>>,
}

/// Findings about the schema: object differences (errors) and versions (warnings).
pub fn schema_findings(facts: &SchemaFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    let diff = diff_schema(&facts.objects);
    for key in &diff.missing {
        out.push(Finding::new(
            "schema_object_missing",
            format!("schema object `{key}` is missing"),
        ));
    }
    for key in &diff.changed {
        out.push(Finding::new(
            "schema_object_changed",
            format!("schema object `{key}` differs from Maka's definition"),
        ));
    }
    for key in &diff.unexpected {
        out.push(Finding::new(
            "schema_object_unexpected",
            format!("schema object `{key}` is not part of Maka's schema"),
        ));
    }
    if facts.user_version != RUNTIME_USER_VERSION {
        out.push(Finding::new(
            "schema_version_mismatch",
            format!(
                "user_version is {}, Maka writes {RUNTIME_USER_VERSION}",
                facts.user_version
            ),
        ));
    }
    match &facts.registry {
        None => out.push(Finding::new(
            "schema_registry_mismatch",
            "operational_schema_migrations is missing",
        )),
        Some(reg) => {
            for (scope, version) in REGISTRY {
                match reg.get(*scope) {
                    Some(v) if v == version => {}
                    Some(v) => out.push(Finding::new(
                        "schema_registry_mismatch",
                        format!("scope `{scope}` is at version {v}, Maka's current is {version}"),
                    )),
                    None => out.push(Finding::new(
                        "schema_registry_mismatch",
                        format!("scope `{scope}` is not registered"),
                    )),
                }
            }
            for scope in reg.keys() {
                if !REGISTRY.iter().any(|(s, _)| s == scope) {
                    out.push(Finding::new(
                        "schema_registry_mismatch",
                        format!("scope `{scope}` is unknown to Maka's current release"),
                    ));
                }
            }
        }
    }
    match &facts.capabilities {
        None => out.push(Finding::new(
            "schema_capability_mismatch",
            "runtime_capabilities is missing",
        )),
        Some(caps) => {
            for cap in CAPABILITIES {
                match caps.get(*cap) {
                    Some(1) => {}
                    Some(v) => out.push(Finding::new(
                        "schema_capability_mismatch",
                        format!("capability `{cap}` is at version {v}, Maka requires 1"),
                    )),
                    None => out.push(Finding::new(
                        "schema_capability_mismatch",
                        format!("capability `{cap}` is missing"),
                    )),
                }
            }
        }
    }
    out
}
