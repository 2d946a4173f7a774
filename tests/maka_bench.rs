//! The workspace Maka's own code wrote (`../shared/bench`, unpacked into the target
//! directory; see `benches/common/maka_bench.rs`): the scan must find exactly what
//! Maka found in it (`verdict.json`): its four tool-ledger issues (code and event id,
//! in Maka's order), its two stuck runs, and nothing else. Skipped, saying how to get
//! the file, when it is not unpacked. Not timed: speed is `benches/scan.rs`'s.

mod common;

use common::maka_bench;
use serde_json::Value;
use wsledger::scan::{scan_path, ScanOptions};

#[test]
fn the_bench_workspace_scans_to_makas_verdict() {
    let Some(db) = maka_bench::present() else {
        maka_bench::say_skipped();
        return;
    };
    let verdict: Value = serde_json::from_str(
        &std::fs::read_to_string(maka_bench::verdict())
            .unwrap_or_else(|e| panic!("{}: {e}", maka_bench::verdict().display())),
    )
    .unwrap();
    let report = scan_path(&db, ScanOptions::default(), &mut |_, _| {}).unwrap();
    let got = serde_json::to_value(&report).unwrap();
    // Schema findings depend on which Maka release wrote the file, which the verdict
    // does not judge; everything else must be Maka's.
    let ledger: Vec<&Value> = got["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["code"].as_str().unwrap().starts_with("schema_"))
        .collect();
    let issues: Vec<(&str, &str, &Value, &Value)> = ledger
        .iter()
        .filter(|f| f["code"] != "run_stuck_running")
        .map(|f| {
            (
                f["code"].as_str().unwrap(),
                f["event_id"].as_str().unwrap_or_default(),
                &f["operation_id"],
                &f["tool_call_id"],
            )
        })
        .collect();
    let null = Value::Null;
    let expected: Vec<(&str, &str, &Value, &Value)> = verdict["wholeFile"]["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["code"].as_str().unwrap(),
                i["eventId"].as_str().unwrap(),
                i.get("operationId").unwrap_or(&null),
                i.get("toolCallId").unwrap_or(&null),
            )
        })
        .collect();
    assert_eq!(expected.len(), 4, "the verdict names four issues");
    assert_eq!(
        issues, expected,
        "tool-ledger findings differ from Maka's issues"
    );
    let mut stuck: Vec<(&str, &str)> = ledger
        .iter()
        .filter(|f| f["code"] == "run_stuck_running")
        .map(|f| {
            (
                f["session_id"].as_str().unwrap(),
                f["run_id"].as_str().unwrap(),
            )
        })
        .collect();
    let mut expected_stuck: Vec<(&str, &str)> = verdict["summary"]["stuckRunningRuns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["sessionId"].as_str().unwrap(),
                r["runId"].as_str().unwrap(),
            )
        })
        .collect();
    stuck.sort();
    expected_stuck.sort();
    assert_eq!(expected_stuck.len(), 2, "the verdict names two stuck runs");
    assert_eq!(stuck, expected_stuck, "stuck runs differ from Maka's");
    // Maka's gate: refused at the first issue; totals as Maka counted them.
    let first = &verdict["toolLedgerHealth"]["firstIssue"];
    assert_eq!(got["maka_gate"]["first_issue"]["code"], first["code"]);
    assert_eq!(
        got["maka_gate"]["first_issue"]["event_id"],
        first["eventId"]
    );
    assert_eq!(
        got["maka_gate"]["tool_writes_refused"],
        !verdict["summary"]["acceptsToolBearingAppend"]
            .as_bool()
            .unwrap()
    );
    let (s, c) = (&got["summary"], &verdict["counts"]);
    assert_eq!(s["events"], c["runtimeEvents"]);
    assert_eq!(s["runs"], c["agentRuns"]);
    assert_eq!(s["operations"], c["toolOperations"]);
    assert_eq!(s["sessions"], c["sessions"]);
    assert_eq!(s["scanner_issues"], 4);
    assert_eq!(s["stuck_runs"], 2);
    assert_eq!(
        s["undecodable_events"],
        verdict["summary"]["decodeFailureCount"]
    );
    // Supersession groups only where Maka found a duplicate.
    let corrupt: Vec<&str> = verdict["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["toolLedger"]["hasCorruption"] == true)
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    for g in got["supersession"].as_array().unwrap() {
        assert!(
            corrupt.contains(&g["session_id"].as_str().unwrap()),
            "supersession group outside Maka's corrupt sessions: {g}"
        );
    }
}

/// The diagnosis counts what quarantine would set aside from several damaged sessions
/// at once (one pass over each tool table for all of them, on a second connection):
/// each count must be the rows quarantine reads for that session. The bench workspace
/// has four.
#[test]
fn the_bench_workspace_diagnosis_counts_what_quarantine_moves() {
    let Some(db) = maka_bench::present() else {
        maka_bench::say_skipped();
        return;
    };
    let (diagnosis, want) = wsledger::db::Workspace::read(&db, |ws| {
        let report = wsledger::scan::scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        let (d, _) = wsledger::diagnosis::diagnose_workspace(ws, &report, "bench")?;
        let mut want = std::collections::BTreeMap::new();
        for s in &d.damaged_sessions {
            want.insert(
                s.session_id.clone(),
                common::rows_set_aside(ws, &s.session_id)?,
            );
        }
        Ok((d, want))
    })
    .unwrap();
    assert_eq!(diagnosis.damaged_sessions.len(), 4);
    for s in &diagnosis.damaged_sessions {
        assert_eq!(s.set_aside.rows, want[&s.session_id], "{}", s.session_id);
        assert!(s.set_aside.rows["runtime_events"] > 0, "{}", s.session_id);
    }
}
