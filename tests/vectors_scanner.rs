//! Conformance: `tests/vectors/scanner.jsonl` (Maka's `scanToolLedger` output, and the
//! `runtime_events` rows Maka's store writes for the same events).
//!
//! Every line is checked; the test reports every failing line by name.

mod common;

use std::collections::HashMap;

use common::{check_vectors, open_fixture};
use serde_json::Value;
use wsledger::event::{
    decode_event_text, event_kind, row_identity_matches, RowIdentity, RuntimeEvent,
};
use wsledger::json::JsStr;
use wsledger::ledger::scanner::{scan_tool_ledger, ScanOptions, ToolLedgerScan, ToolLedgerScanner};

const VECTORS: &str = include_str!("vectors/scanner.jsonl");

/// `(code, eventId, operationId, toolCallId)`, absent keys as `None`.
type IssueKey = (String, String, Option<String>, Option<String>);

fn str_field(v: &Value, key: &str) -> Result<String, String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("no string `{key}`"))
}

fn expected_issues(maka: &Value) -> Result<Vec<IssueKey>, String> {
    let list = maka["issues"]
        .as_array()
        .ok_or("maka.issues is not an array")?;
    list.iter()
        .map(|i| {
            let opt = |k: &str| match i.get(k) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(format!("issue `{k}` is {other}")),
            };
            Ok((
                str_field(i, "code")?,
                str_field(i, "eventId")?,
                opt("operationId")?,
                opt("toolCallId")?,
            ))
        })
        .collect()
}

fn lossless(s: &JsStr) -> Result<String, String> {
    s.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("ill-formed string {s:?}"))
}

fn actual_issues(scan: &ToolLedgerScan) -> Result<Vec<IssueKey>, String> {
    scan.issues
        .iter()
        .map(|i| {
            Ok((
                i.code.as_str().to_owned(),
                lossless(&i.event_id)?,
                i.operation_id.as_ref().map(lossless).transpose()?,
                i.tool_call_id.as_ref().map(lossless).transpose()?,
            ))
        })
        .collect()
}

/// Compares a scan with Maka's result, and checks that each issue is attributed to the
/// session and run of an event carrying the id it names.
fn compare(scan: &ToolLedgerScan, events: &[RuntimeEvent], maka: &Value) -> Result<(), String> {
    let expected = expected_issues(maka)?;
    let actual = actual_issues(scan)?;
    if actual != expected {
        return Err(format!(
            "issues differ:\n  expected {expected:?}\n  actual   {actual:?}"
        ));
    }
    let operations = maka["operations"]
        .as_u64()
        .ok_or("maka.operations is not a count")?;
    if scan.operations.len() as u64 != operations {
        return Err(format!(
            "{} operations, Maka built {operations}",
            scan.operations.len()
        ));
    }
    for issue in &scan.issues {
        let attributed = events.iter().any(|e| {
            e.id == issue.event_id && e.session_id == issue.session_id && e.run_id == issue.run_id
        });
        if !attributed {
            return Err(format!(
                "issue {issue:?} is attributed to no event with that id"
            ));
        }
    }
    Ok(())
}

fn decode_value(v: &Value) -> Result<RuntimeEvent, String> {
    let text = serde_json::to_string(v).map_err(|e| e.to_string())?;
    decode_event_text(&text).map_err(|e| format!("event does not decode: {e}"))
}

fn scan_with(options: ScanOptions, events: &[RuntimeEvent]) -> Result<ToolLedgerScan, String> {
    let mut scanner = ToolLedgerScanner::new(options);
    for e in events {
        scanner.push(e).map_err(|e| e.to_string())?;
    }
    Ok(scanner.finish())
}

fn check_rows(rows: &[Value], events: &[RuntimeEvent], maka: &Value) -> Result<(), String> {
    if rows.len() != events.len() {
        return Err(format!("{} rows for {} events", rows.len(), events.len()));
    }
    // event_seq: 1.. per invocation, in write (= list) order.
    let mut per_invocation: HashMap<&JsStr, u64> = HashMap::new();
    let mut expected_seq: HashMap<&JsStr, u64> = HashMap::new();
    for e in events {
        let n = per_invocation.entry(&e.invocation_id).or_insert(0);
        *n += 1;
        expected_seq.insert(&e.id, *n);
    }
    let mut decoded = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let identity = RowIdentity {
            event_id: str_field(row, "event_id")?,
            session_id: str_field(row, "session_id")?,
            invocation_id: str_field(row, "invocation_id")?,
            run_id: str_field(row, "run_id")?,
            turn_id: str_field(row, "turn_id")?,
        };
        let payload = str_field(row, "payload_json")?;
        let event = decode_event_text(&payload)
            .map_err(|e| format!("row {} does not decode: {e}", identity.event_id))?;
        if !row_identity_matches(&event, &identity) {
            return Err(format!(
                "row {} identity does not match its payload",
                identity.event_id
            ));
        }
        if event != events[i] {
            return Err(format!(
                "row {i} decodes to another event than list entry {i}"
            ));
        }
        let kind = str_field(row, "event_kind")?;
        if event_kind(&event) != kind {
            return Err(format!(
                "row {}: event_kind {} derived, {kind} stored",
                identity.event_id,
                event_kind(&event)
            ));
        }
        let seq = row["event_seq"]
            .as_u64()
            .ok_or("event_seq is not a count")?;
        if expected_seq.get(&event.id) != Some(&seq) {
            return Err(format!(
                "row {}: event_seq {seq} stored, {:?} derived",
                identity.event_id,
                expected_seq.get(&event.id)
            ));
        }
        decoded.push(event);
    }
    // Rows are in store order with unique ids: the bounded-memory mode must agree.
    let scan = scan_with(ScanOptions::store_rows(), &decoded)?;
    compare(&scan, &decoded, maka).map_err(|e| format!("rows, store-order scan: {e}"))
}

fn check_line(v: &Value) -> Result<(), String> {
    let maka = &v["maka"];
    let events: Vec<RuntimeEvent> = v["events"]
        .as_array()
        .ok_or("events is not an array")?
        .iter()
        .map(decode_value)
        .collect::<Result<_, _>>()?;
    let scan = scan_tool_ledger(&events);
    compare(&scan, &events, maka).map_err(|e| format!("events: {e}"))?;
    match &v["rows"] {
        Value::Array(rows) => check_rows(rows, &events, maka),
        Value::Null => {
            let reason = str_field(v, "rows_absent")?;
            if reason != "duplicate_event_id" && reason != "not_a_store_order" {
                return Err(format!("unknown rows_absent {reason}"));
            }
            Ok(())
        }
        other => Err(format!("rows is {other}")),
    }
}

#[test]
fn scanner_vectors() {
    let (lines, failures) = check_vectors(VECTORS, check_line);
    assert_eq!(lines, 99, "scanner.jsonl has 99 lines");
    common::assert_no_failures(&failures, &format!("of {lines} lines fail"));
}

/// One fixture workspace: `runtime_events` rows in the store's health-scan order,
/// decoded and identity-checked (undecodable rows left out, as Maka's verdict does).
struct FixtureRows {
    events: Vec<RuntimeEvent>,
    decode_failures: Vec<String>,
}

fn read_fixture_rows(db: &rusqlite::Connection) -> Result<FixtureRows, String> {
    let mut stmt = db
        .prepare(
            "SELECT event_id, session_id, invocation_id, run_id, turn_id, payload_json \
             FROM runtime_events ORDER BY invocation_id, event_seq, event_id",
        )
        .map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                RowIdentity {
                    event_id: r.get(0)?,
                    session_id: r.get(1)?,
                    invocation_id: r.get(2)?,
                    run_id: r.get(3)?,
                    turn_id: r.get(4)?,
                },
                r.get::<_, String>(5)?,
            ))
        })
        .map_err(|e| e.to_string())?;
    let mut out = FixtureRows {
        events: Vec::new(),
        decode_failures: Vec::new(),
    };
    for row in rows {
        let (identity, payload) = row.map_err(|e| e.to_string())?;
        match decode_event_text(&payload) {
            Ok(event) if row_identity_matches(&event, &identity) => out.events.push(event),
            _ => out.decode_failures.push(identity.event_id),
        }
    }
    Ok(out)
}

fn check_fixture(dir: &std::path::Path) -> Result<(), String> {
    let verdict = common::verdict(dir);
    let whole = &verdict["wholeFile"];
    let db = open_fixture(dir)?;
    let rows = read_fixture_rows(&db)?;

    let failures: Vec<String> = whole["decodeFailures"]
        .as_array()
        .ok_or("no decodeFailures")?
        .iter()
        .map(|f| str_field(f, "eventId"))
        .collect::<Result<_, _>>()?;
    if failures != rows.decode_failures {
        return Err(format!(
            "undecodable rows {:?}, Maka {failures:?}",
            rows.decode_failures
        ));
    }
    let scan = scan_with(ScanOptions::store_rows(), &rows.events)?;
    compare(&scan, &rows.events, whole)
}

/// The real fixture workspaces: a store-order scan of every decodable row reproduces
/// Maka's whole-file verdict (issues in order, operation count, undecodable rows).
#[test]
fn fixture_workspaces_whole_file_scan() {
    let dirs = common::real_fixtures();
    assert!(
        dirs.len() >= 11,
        "expected the fixture workspaces, found {}",
        dirs.len()
    );
    let failures: Vec<String> = dirs
        .iter()
        .filter_map(|d| {
            check_fixture(d)
                .err()
                .map(|e| format!("{}: {e}", d.display()))
        })
        .collect();
    common::assert_no_failures(&failures, "fixtures fail");
}
