//! A `core_agent_run_events` record Maka cannot decode stops its strict start-up
//! recovery: the scan reports it and quarantine counts its session as blocking.

mod common;

use common::{copy_fixture, wsledger};
use serde_json::Value;

#[test]
fn an_undecodable_run_event_is_reported_and_blocks_start_up() {
    let (_tmp, ws) = copy_fixture("healthy");
    let db = ws.join("runtime.sqlite");
    let (session, run) = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let (s, r, seq): (String, String, i64) = conn
            .query_row(
                "SELECT session_id, run_id, sequence FROM core_agent_run_events ORDER BY session_id, run_id, sequence LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        conn.execute(
            "UPDATE core_agent_run_events SET record_json = json_set(record_json, '$.unexpected', 1) WHERE session_id = ?1 AND run_id = ?2 AND sequence = ?3",
            rusqlite::params![s, r, seq],
        )
        .unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        (s, r)
    };
    let w = ws.to_str().unwrap();
    let out = wsledger(&["doctor", "scan", "-w", w, "--format", "json"]);
    assert_eq!(out.status, 1, "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let f: Vec<&Value> = doc["findings"].as_array().unwrap().iter().collect();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["code"], "run_event_undecodable");
    assert_eq!(f[0]["session_id"], session.as_str());
    assert_eq!(f[0]["run_id"], run.as_str());
    assert!(f[0]["message"].as_str().unwrap().contains("unexpected"));

    let out = wsledger(&["doctor", "quarantine", "-w", w, "--format", "json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let plan: Value = serde_json::from_str(&out.stdout).unwrap();
    let sessions = plan["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["session_id"], session.as_str());
    assert_eq!(plan["before"]["startup_blocked"], true);
    assert_eq!(plan["after"]["startup_blocked"], false);
}

#[test]
fn finalize_skips_a_stuck_run_whose_run_event_does_not_decode() {
    let (_tmp, ws) = copy_fixture("stuck-running");
    let db = ws.join("runtime.sqlite");
    let w = ws.to_str().unwrap();
    let plan: Value = serde_json::from_str(
        &wsledger(&["doctor", "finalize-runs", "-w", w, "--format", "json"]).stdout,
    )
    .unwrap();
    let run = plan["plan"][0]["run_id"].as_str().unwrap().to_owned();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute(
            "UPDATE core_agent_run_events SET record_json = json_set(record_json, '$.data', json('[]')) WHERE run_id = ?1 AND sequence = 0",
            [&run],
        )
        .unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let out = wsledger(&["doctor", "finalize-runs", "-w", w, "--format", "json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let plan: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(plan["plan"].as_array().unwrap().is_empty());
    assert_eq!(plan["skipped"][0]["run_id"], run.as_str());
    assert_eq!(plan["skipped"][0]["reason"], "rows_undecodable");
}
