//! Runs the walk meets in unusual places: a run header with no events at all, and a
//! run whose rows come back in a later invocation. The walk remembers which runs it
//! closed (one bit per run header it read up front, a set for the others); both cases
//! depend on that memory.

mod common;

use common::{copy_fixture, wsledger};
use serde_json::Value;

fn findings(ws: &std::path::Path) -> Vec<(String, Option<String>)> {
    let out = wsledger(&common::scan_json_args(ws));
    assert!(out.status == 0 || out.status == 1, "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["run_id"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

fn change(ws: &std::path::Path, sql: &str) {
    let conn = rusqlite::Connection::open(ws.join("runtime.sqlite")).unwrap();
    conn.execute_batch(sql).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
}

#[test]
fn a_run_header_without_events_is_reported_once() {
    let (_tmp, ws) = copy_fixture("healthy");
    assert_eq!(findings(&ws), vec![]);
    // A copy of a terminal header under a run id no event has.
    change(
        &ws,
        "INSERT INTO core_agent_runs SELECT session_id, 'no-events', created_at, \
         json_set(record_json, '$.runId', 'no-events'), latest_model_call_sequence \
         FROM core_agent_runs ORDER BY session_id, run_id LIMIT 1",
    );
    assert_eq!(
        findings(&ws),
        vec![(
            "run_header_terminal_without_event".to_owned(),
            Some("no-events".to_owned())
        )]
    );
}

#[test]
fn a_run_whose_rows_come_back_in_a_later_invocation_is_assessed_from_all_of_them() {
    let (_tmp, ws) = copy_fixture("healthy");
    // The last event of the first run (in scan order) moves to the invocation that
    // sorts next, so the walk meets the run, closes it, and meets it again.
    let conn = rusqlite::Connection::open(ws.join("runtime.sqlite")).unwrap();
    let invocations: Vec<String> = conn
        .prepare("SELECT DISTINCT invocation_id FROM runtime_events ORDER BY invocation_id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    drop(conn);
    let (first, next) = (&invocations[0], &invocations[1]);
    change(
        &ws,
        &format!(
            "UPDATE runtime_events SET invocation_id = '{next}', event_seq = 1000, \
             payload_json = json_set(payload_json, '$.invocationId', '{next}') \
             WHERE event_id = (SELECT event_id FROM runtime_events \
             WHERE invocation_id = '{first}' ORDER BY event_seq DESC LIMIT 1)"
        ),
    );
    let got = findings(&ws);
    // Maka's scanner sees the invocation change inside the run; the run is assessed
    // once, from all its rows (its last row is no longer where its sequence expects).
    assert_eq!(
        got,
        vec![
            (
                "invocation_identity_conflict".to_owned(),
                Some(first.clone())
            ),
            ("event_seq_gap".to_owned(), Some(first.clone())),
        ]
    );
}
