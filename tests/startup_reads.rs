//! What Maka's strict start-up and its store read besides the log, on real fixtures
//! altered the way Maka's own tests leave files: a run whose session has no session
//! row (never listed, never planned), a stored message Maka cannot read (start-up
//! stops), a continuation-claim row that disagrees with its payload (every append
//! refused, plain ones included).

mod common;

use common::{STUCK_RUN, STUCK_SESSION};

use std::path::Path;

use common::findings_with;
use serde_json::Value;

fn exec(dir: &Path, sql: &str) {
    let c = rusqlite::Connection::open(dir.join("runtime.sqlite")).unwrap();
    c.execute_batch(sql).unwrap();
}

fn scan(dir: &Path) -> (i32, Value) {
    let out = common::wsledger(&common::scan_json_args(dir));
    assert!(
        out.status == 0 || out.status == 1,
        "{}: {}",
        out.status,
        out.stderr
    );
    (out.status, serde_json::from_str(&out.stdout).unwrap())
}

#[test]
fn a_run_outside_every_listed_session_is_reported_once_and_never_planned() {
    let (_tmp, dir) = common::copy_fixture("stuck-running");
    let (_, before) = scan(&dir);
    assert_eq!(findings_with(&before, "run_stuck_running").len(), 1);
    // The session row goes, its run header stays (as Maka's tests leave such files).
    exec(
        &dir,
        &format!(
            "PRAGMA foreign_keys = OFF; DELETE FROM session_metadata WHERE session_id = '{STUCK_SESSION}';"
        ),
    );
    let (_, after) = scan(&dir);
    assert!(
        findings_with(&after, "run_stuck_running").is_empty(),
        "{after}"
    );
    // Every run of the session, once each (the stuck one and its finished sibling).
    let outside = findings_with(&after, "run_outside_sessions");
    assert_eq!(outside.len(), 2, "{after}");
    assert!(outside.iter().all(|f| f["session_id"] == STUCK_SESSION));
    assert!(outside.iter().any(|f| f["run_id"] == STUCK_RUN));
    assert!(outside.iter().all(|f| f["severity"] == "warning"));
    assert_eq!(
        findings_with(&after, "run_outside_sessions").len(),
        after["summary"]["warnings"]
    );
    assert_eq!(after["summary"]["stuck_runs"], 0);
    assert_eq!(after["diagnosis"]["before"]["startup_blocked"], false);
    assert_eq!(after["diagnosis"]["before"]["stuck_runs"], 0);
    let plan = common::wsledger(&[
        "doctor",
        "finalize-runs",
        "--workspace",
        dir.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
    assert_eq!(plan["plan"], serde_json::json!([]), "{plan}");
}

#[test]
fn a_stored_message_maka_cannot_read_stops_its_start_up() {
    let (_tmp, dir) = common::copy_fixture("healthy");
    let (status, before) = scan(&dir);
    assert_eq!(status, 0);
    assert_eq!(before["diagnosis"]["before"]["startup_blocked"], false);
    // A record marked as stored in chunks, with no payload row or chunks: Maka's read
    // says "Stored Session message N for ... is incompatible".
    exec(
        &dir,
        "UPDATE session_messages SET record_json = '{\"$maka\":\"session-message-chunks-v1\"}' \
         WHERE rowid = (SELECT min(rowid) FROM session_messages);",
    );
    let session: String = rusqlite::Connection::open(dir.join("runtime.sqlite"))
        .unwrap()
        .query_row(
            "SELECT session_id FROM session_messages WHERE rowid = \
             (SELECT min(rowid) FROM session_messages)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let (status, after) = scan(&dir);
    assert_eq!(status, 1);
    let bad = findings_with(&after, "session_message_unreadable");
    assert_eq!(bad.len(), 1, "{after}");
    assert_eq!(bad[0]["session_id"], session.as_str());
    assert_eq!(after["diagnosis"]["before"]["startup_blocked"], true);
    // Quarantining the session is the plan, and start-up then goes through.
    let steps = after["diagnosis"]["plan"]["steps"].as_array().unwrap();
    assert_eq!(steps[0]["action"], "quarantine", "{steps:?}");
    assert_eq!(after["diagnosis"]["after"]["startup_blocked"], false);
}

#[test]
fn a_claim_row_that_disagrees_with_its_payload_refuses_every_append() {
    let (_tmp, dir) = common::copy_fixture("healthy");
    let claim = |id: &str, source_run: &str, target: &str| {
        format!(
            "INSERT INTO runtime_continuation_claims(claim_id, source_session_id, \
             source_invocation_id, source_run_id, source_turn_id, source_event_high_water, \
             source_prefix_digest, boundary_digest, boundary_json, provider_projection_version, \
             provider_replay_digest, target_session_id, target_invocation_id, target_run_id, \
             target_turn_id, target_run_header_json, claimed_at, protocol_version) VALUES \
             ('{id}', 's', 'i', '{source_run}', 't', 2, 'sha256:ab', 'b-{id}', \
             '{{\"segments\":[{{\"identity\":{{\"sessionId\":\"s\",\"invocationId\":\"i\",\
             \"runId\":\"r\",\"turnId\":\"t\"}},\"position\":{{\"lastEventSeq\":2}},\
             \"prefixDigest\":\"sha256:ab\"}}]}}', 1, 'p', 'target-{target}', 'ti-{target}', \
             'tr-{target}', 'tt', '{{}}', 1, 1);"
        )
    };
    // A claim row whose columns are its payload's: nothing changes.
    exec(&dir, &claim("claim-ok", "r", "a"));
    let (status, doc) = scan(&dir);
    assert_eq!(status, 0, "{doc}");
    assert_eq!(doc["maka_gate"]["plain_appends_refused"], false);
    assert_eq!(doc["maka_gate"]["claim_failure"], Value::Null);
    // A forged source run: Maka's store refuses every append.
    exec(&dir, &claim("claim-forged", "forged", "b"));
    let (status, doc) = scan(&dir);
    assert_eq!(status, 1);
    let gate = &doc["maka_gate"];
    assert_eq!(gate["plain_appends_refused"], true, "{gate}");
    assert_eq!(gate["tool_writes_refused"], true);
    assert_eq!(gate["first_issue"], Value::Null);
    assert_eq!(gate["claim_failure"]["claim_id"], "claim-forged");
    assert_eq!(
        gate["claim_failure"]["message"],
        "Continuation claim row/payload identity mismatch for claim-forged"
    );
    assert_eq!(
        findings_with(&doc, "continuation_claim_unreadable").len(),
        1
    );
    // No quarantine or finalize step rewrites a claim row: the gate stays shut.
    assert_eq!(doc["diagnosis"]["after"]["tool_writes_refused"], true);
}
