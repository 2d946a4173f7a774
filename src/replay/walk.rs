//! One session's rows walked in memory: decode, Maka's scanner in exact mode, per-run
//! facts. Replay holds a single session, so unlike the workspace scan (which streams
//! and drops what it has assessed) it keeps everything for the re-derivations.

use std::collections::HashMap;

use crate::db::EventRow;
use crate::findings::Finding;
use crate::ledger::scanner::{ScanOptions, ToolLedgerScan, ToolLedgerScanner};
use crate::release::Rules;
use crate::scan::{decode_row_with, is_tool_bearing, DecodeFailure, RunAcc};

/// What the walk of one session computed.
pub struct WalkParts {
    pub scan: ToolLedgerScan,
    pub runs: HashMap<(String, String), RunAcc>,
    pub decode_failures: Vec<DecodeFailure>,
    pub seq_gaps: Vec<SeqGap>,
    /// `committed_at` of every tool-bearing row, for the projection rebuild.
    pub tool_commits: crate::fast_hash::HashMap<String, i64>,
}

/// An `event_seq` that is not the one expected in its invocation.
pub struct SeqGap {
    pub finding: Finding,
    pub invocation_id: String,
    /// The values skipped (empty when the seq went backwards or repeated).
    pub missing: std::ops::Range<i64>,
}

/// Walks `rows` (in `invocation_id, event_seq, event_id` order), decoded under `rules`.
pub fn walk(rows: &[EventRow], rules: &Rules) -> WalkParts {
    // The exact mode: a session's rows are few, and it keeps every operation.
    let mut scanner = ToolLedgerScanner::new(ScanOptions {
        tool_dependencies: rules.scanner_tool_dependencies,
        ..ScanOptions::default()
    });
    let mut parts = WalkParts {
        scan: ToolLedgerScan::default(),
        runs: HashMap::new(),
        decode_failures: Vec::new(),
        seq_gaps: Vec::new(),
        tool_commits: Default::default(),
    };
    let mut current: Option<&str> = None;
    let mut expected = 1i64;
    for row in rows {
        if current != Some(row.invocation_id.as_str()) {
            current = Some(row.invocation_id.as_str());
            expected = 1;
        }
        if row.event_seq != expected {
            let finding = Finding::new(
                "event_seq_gap",
                format!(
                    "invocation `{}`: event_seq {} where {expected} was expected",
                    row.invocation_id, row.event_seq
                ),
            )
            .session(&row.session_id)
            .run(&row.run_id)
            .event(&row.event_id);
            parts.seq_gaps.push(SeqGap {
                finding,
                invocation_id: row.invocation_id.clone(),
                missing: expected..row.event_seq.max(expected),
            });
        }
        expected = row.event_seq.saturating_add(1);
        let decoded = decode_row_with(row, &rules.decoder);
        let acc = parts
            .runs
            .entry((row.session_id.clone(), row.run_id.clone()))
            .or_default();
        acc.add(
            &row.invocation_id,
            row.event_seq,
            &row.event_id,
            decoded.as_ref().ok(),
        );
        match decoded {
            Err(message) => parts.decode_failures.push(DecodeFailure {
                event_id: row.event_id.clone(),
                session_id: row.session_id.clone(),
                run_id: row.run_id.clone(),
                message,
            }),
            Ok(event) => {
                if is_tool_bearing(&event) {
                    parts
                        .tool_commits
                        .insert(row.event_id.clone(), row.committed_at);
                }
                // Exact mode never refuses an order.
                let _ = scanner.push(&event);
            }
        }
    }
    parts.scan = scanner.finish();
    parts
}
