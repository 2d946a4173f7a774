//! `doctor finalize-runs` on fixture copies altered into the cases the real fixtures
//! do not cover: T2 outcomes to settle, code-mode `exec`, a terminal header without
//! its event, adoption, and every reason to leave a run alone.

mod common;

use common::{STUCK_RUN, STUCK_SESSION, STUCK_TURN};

use common::finalize::*;
use serde_json::Value;
use wsledger::json::{JsStr, Json};
use wsledger::scan::runs::RunState;

// crash-mid-tool: the stuck run, its session, and its one unsettled operation.
const CRASH_SESSION: &str = "240cf9b4-c3c1-4e19-8261-2a9442b16caf";
const CRASH_RUN: &str = "ca128d82-4499-4bd5-bc6b-8b2a9dcdf152";
// crash-mid-tool: a completed run whose terminal event is its session's last.
const DONE_SESSION: &str = "b44b2e58-d1bc-4af6-8ddb-008ac7ee6e58";
const DONE_RUN: &str = "6c463b13-d7e4-4363-acc3-7f47d400a573";
const DONE_TERMINAL: &str = "821fff1c-52c5-4100-a569-c3d1824b98ea";
const DONE_TURN: &str = "1a867230-b867-49ba-a789-8870cba7f750";
fn exec(ws: &Ws, sql: &str) {
    ws.conn().execute_batch(sql).unwrap();
}

fn json_plan(ws: &Ws, args: &[&str]) -> Value {
    let mut a = vec!["--format", "json"];
    a.extend_from_slice(args);
    stdout_json(&ws.finalize(&a))
}

fn skipped_reason(doc: &Value, run: &str) -> Option<String> {
    doc["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["run_id"] == run)
        .map(|s| s["reason"].as_str().unwrap().to_owned())
}

#[test]
fn an_unanswered_outcome_unknown_dispatch_is_settled_before_the_seal() {
    let ws = outcome_unknown_ws();
    let before = ws.scan();
    assert!(!before.maka_gate.tool_writes_refused);
    assert_eq!(
        before
            .findings
            .iter()
            .filter(|f| f.code == "operation_unsettled")
            .count(),
        1
    );
    let doc = json_plan(&ws, &["--apply", "--no-backup"]);
    let e = &doc["plan"][0];
    assert_eq!(e["session_id"], CRASH_SESSION);
    assert_eq!(e["run_id"], CRASH_RUN);
    // The T2 outcome takes seq 5 and ordinal 17; the terminal follows it.
    assert_eq!(e["event_seq"], 6);
    assert_eq!(e["ordinal"], 18);
    let after = ws.scan();
    assert_eq!(new_findings(&before, &after), Vec::<String>::new());
    assert!(
        after
            .findings
            .iter()
            .all(|f| f.code != "operation_unsettled"),
        "the operation is settled"
    );
    let c = ws.conn();
    let (state, result, version): (String, String, i64) = c
        .query_row(
            "SELECT current_state, result_event_id, version FROM tool_operations \
             WHERE operation_id = ?1",
            [CRASH_OP],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        (state.as_str(), result.as_str(), version),
        (
            "outcome_committed",
            format!("{CRASH_OP}_response").as_str(),
            2
        )
    );
    let (journal_state, journal_event): (String, String) = c
        .query_row(
            "SELECT state, runtime_event_id FROM tool_journal_events WHERE journal_event_id = ?1",
            [format!("{CRASH_OP}_outcome")],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(journal_state, "outcome_committed");
    assert_eq!(journal_event, format!("{CRASH_OP}_response"));
    let (seq, kind, payload): (i64, String, String) = c
        .query_row(
            "SELECT event_seq, event_kind, payload_json FROM runtime_events WHERE event_id = ?1",
            [format!("{CRASH_OP}_response")],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((seq, kind.as_str()), (5, "function_response"));
    assert!(payload.contains(r#""uncertainOutcome":{"code":"outcome_unknown","retrySafe":false}"#));
    assert!(payload.contains(r#""isError":true"#));
}

#[test]
fn without_makas_gate_the_outcome_cannot_be_written_so_the_run_is_skipped() {
    let ws = outcome_unknown_ws();
    // One undecodable row elsewhere: Maka refuses every tool write in the file.
    exec(
        &ws,
        &format!(
            "INSERT INTO runtime_events VALUES ('bad-row', '{DONE_SESSION}', 'inv-bad', \
             'run-bad', 'turn-bad', 1, 'text', '{{\"not\":\"an event\"}}', 1);
             INSERT INTO runtime_session_event_ordinals VALUES ('{DONE_SESSION}', 13, 'bad-row');"
        ),
    );
    assert!(ws.scan().maka_gate.tool_writes_refused);
    let before = ws.hash();
    let doc = json_plan(&ws, &["--apply"]);
    assert_eq!(doc["plan"], Value::Array(Vec::new()));
    assert_eq!(
        skipped_reason(&doc, CRASH_RUN).as_deref(),
        Some("needs_tool_outcome")
    );
    assert_eq!(ws.hash(), before);
}

/// A missing tool table fails the outcome's write too (every tool write inserts into
/// both projections): the run is skipped, and the reason names the table.
#[test]
fn without_a_tool_table_the_outcome_cannot_be_written_so_the_run_is_skipped() {
    let ws = outcome_unknown_ws();
    exec(&ws, "DROP TABLE tool_journal_events");
    let gate = ws.scan().maka_gate;
    assert_eq!(gate.missing_table.as_deref(), Some("tool_journal_events"));
    assert!(gate.tool_writes_refused && gate.first_issue.is_none());
    let doc = json_plan(&ws, &[]);
    assert_eq!(
        skipped_reason(&doc, CRASH_RUN).as_deref(),
        Some("needs_tool_outcome")
    );
    let skipped = doc["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["run_id"] == CRASH_RUN)
        .unwrap();
    assert!(
        skipped
            .to_string()
            .contains("table tool_journal_events is missing, so every tool write fails"),
        "{skipped}"
    );
}

#[test]
fn a_code_mode_exec_gets_makas_interrupted_outcome() {
    let ws = Ws::copy("crash-mid-tool");
    let args = Json::from_serde(&serde_json::json!({"command": "cargo test"}));
    let hash = wsledger::args_hash::canonical_tool_args_hash(&JsStr::new("exec"), &args).unwrap();
    let old = "sha256:3a7803b5dc44f2602738a2130e7f4fa9f1ac8bbcaef03e945a4f9f880a6e42e3";
    exec(
        &ws,
        &format!(
            "UPDATE runtime_events SET payload_json = replace(replace(payload_json, \
             '\"name\":\"Bash\"', '\"name\":\"exec\"'), '\"toolName\":\"Bash\"', \
             '\"toolName\":\"exec\"') WHERE run_id = '{CRASH_RUN}';
             UPDATE runtime_events SET payload_json = replace(payload_json, '{old}', '{hash}') \
             WHERE run_id = '{CRASH_RUN}';
             UPDATE tool_operations SET tool_name = 'exec', canonical_args_hash = '{hash}' \
             WHERE operation_id = '{CRASH_OP}';
             UPDATE tool_journal_events SET canonical_args_hash = '{hash}' \
             WHERE operation_id = '{CRASH_OP}';
             UPDATE core_agent_runs SET record_json = replace(record_json, \
             '\"toolMode\":\"direct\"', '\"toolMode\":\"code_mode\"') WHERE run_id = '{CRASH_RUN}';"
        ),
    );
    let before = ws.scan();
    assert!(
        !before.maka_gate.tool_writes_refused,
        "{:?}",
        before.findings
    );
    let doc = json_plan(&ws, &["--apply", "--no-backup"]);
    assert_eq!(doc["plan"][0]["event_seq"], 6);
    let after = ws.scan();
    assert_eq!(new_findings(&before, &after), Vec::<String>::new());
    let payload: String = ws
        .conn()
        .query_row(
            "SELECT payload_json FROM runtime_events WHERE event_id = ?1",
            [format!("{CRASH_OP}_response")],
            |r| r.get(0),
        )
        .unwrap();
    assert!(payload.contains(r#""value":{"kind":"code_mode","message":"Code Mode execution was interrupted by runtime recovery.","status":"interrupted"}"#), "{payload}");
    assert!(payload.contains(r#""origin":"provider""#));
}

/// crash-mid-tool with the completed run's terminal event gone.
fn missing_terminal_ws() -> Ws {
    let ws = Ws::copy("crash-mid-tool");
    exec(
        &ws,
        &format!("DELETE FROM runtime_events WHERE event_id = '{DONE_TERMINAL}';"),
    );
    ws
}

#[test]
fn a_terminal_header_without_its_event_is_left_to_makas_backfill_when_the_transcript_agrees() {
    // The transcript's last turn_state says `completed`, like the header: Maka's repair
    // backfills a completed terminal from it, so we must not write missing_terminal_event.
    let ws = missing_terminal_ws();
    let doc = json_plan(&ws, &[]);
    assert_eq!(
        skipped_reason(&doc, DONE_RUN).as_deref(),
        Some("needs_transcript_backfill")
    );
}

#[test]
fn a_terminal_header_without_its_event_gets_missing_terminal_event() {
    let ws = missing_terminal_ws();
    // Without the completed turn_state the transcript has nothing to backfill.
    exec(
        &ws,
        &format!(
            "DELETE FROM session_messages WHERE session_id = '{DONE_SESSION}' AND \
             message_type = 'turn_state' AND record_json LIKE '%\"turnId\":\"{DONE_TURN}\"%\"status\":\"completed\"%';"
        ),
    );
    let before = ws.scan();
    let run = before.runs.iter().find(|r| r.run_id == DONE_RUN).unwrap();
    assert_eq!(run.state, RunState::HeaderTerminalWithoutEvent);
    let header = before
        .headers
        .iter()
        .find(|h| h.run_id == DONE_RUN)
        .unwrap();
    let completed_at = header.completed_at.unwrap() as i64;
    let doc = json_plan(&ws, &["--apply", "--no-backup", "--run", DONE_RUN]);
    assert_eq!(doc["plan"].as_array().unwrap().len(), 1);
    let e = &doc["plan"][0];
    assert_eq!(e["action"], "repair_missing_terminal");
    assert_eq!(e["status"], "failed");
    assert_eq!(e["failure_class"], "missing_terminal_event");
    assert_eq!(e["recovery_reason"], "missing_terminal_event");
    assert_eq!(e["event_seq"], 4);
    assert_eq!(e["ordinal"], 12);
    assert!(e["ts"].as_i64().unwrap() >= completed_at);
    let after = ws.scan();
    assert_eq!(new_findings(&before, &after), Vec::<String>::new());
    let run = after.runs.iter().find(|r| r.run_id == DONE_RUN).unwrap();
    assert_eq!(run.state, RunState::Terminal);
    let h = after.headers.iter().find(|h| h.run_id == DONE_RUN).unwrap();
    assert_eq!(h.status.as_str(), "failed");
    assert_eq!(h.failure_class.as_deref(), Some("missing_terminal_event"));
    let payload: String = ws
        .conn()
        .query_row(
            "SELECT payload_json FROM runtime_events WHERE run_id = ?1 AND event_seq = 4",
            [DONE_RUN],
            |r| r.get(0),
        )
        .unwrap();
    assert!(payload.contains(r#""message":"terminal run header had no terminal RuntimeEvent""#));
    assert!(json_plan(&ws, &["--apply", "--run", DONE_RUN])["plan"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn project_header_adopts_a_terminal_event_written_earlier() {
    let ws = Ws::copy("corrupt-ledger");
    let first = json_plan(&ws, &["--apply", "--no-backup"]);
    let event_id = first["plan"][0]["event_id"].clone();
    let before = ws.scan();
    let doc = json_plan(&ws, &["--apply", "--no-backup", "--project-header"]);
    let e = &doc["plan"][0];
    assert_eq!(e["action"], "adopt");
    assert_eq!(e["event_id"], event_id);
    assert_eq!(e["status"], "failed");
    assert_eq!(e["failure_class"], "app_restarted");
    assert_eq!(e["recovery_reason"], "runtime_event_terminal_fact");
    assert_eq!(e["ordinal"], Value::Null);
    let after = ws.scan();
    assert_eq!(new_findings(&before, &after), Vec::<String>::new());
    assert!(after
        .runs
        .iter()
        .all(|r| r.state != RunState::AwaitingAdoption && r.state != RunState::Stuck));
    let data: String = ws
        .conn()
        .query_row(
            "SELECT record_json FROM core_agent_run_events WHERE event_type = 'run_failed' \
             ORDER BY rowid DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        data.contains(r#""recoveryReason":"runtime_event_terminal_fact""#),
        "{data}"
    );
}

fn insert_event(ws: &Ws, id: &str, seq: i64, ordinal: i64, extra: &str) {
    let payload = format!(
        r#"{{{extra}"author":"system","id":"{id}","invocationId":"{STUCK_RUN}","partial":false,"role":"system","runId":"{STUCK_RUN}","sessionId":"{STUCK_SESSION}","ts":1767708606500,"turnId":"{STUCK_TURN}"}}"#
    );
    let c = ws.conn();
    c.execute(
        "INSERT INTO runtime_events VALUES (?1, ?2, ?3, ?3, ?4, ?5, 'x', ?6, 1767708606500)",
        rusqlite::params![id, STUCK_SESSION, STUCK_RUN, STUCK_TURN, seq, payload],
    )
    .unwrap();
    c.execute(
        "INSERT INTO runtime_session_event_ordinals VALUES (?1, ?2, ?3)",
        rusqlite::params![STUCK_SESSION, ordinal, id],
    )
    .unwrap();
}

const FAILED: &str =
    r#""actions":{"endInvocation":true,"stateDelta":{"failureClass":"x"}},"status":"failed","#;

fn assert_skipped(ws: &Ws, reason: &str) {
    let before = ws.hash();
    let doc = json_plan(ws, &["--apply"]);
    assert_eq!(doc["plan"], Value::Array(Vec::new()), "{reason}");
    assert_eq!(skipped_reason(&doc, STUCK_RUN).as_deref(), Some(reason));
    assert_eq!(ws.hash(), before, "{reason}: a skipped run was written");
}

#[test]
fn runs_maka_would_not_finalize_are_skipped_with_their_reason() {
    let ws = Ws::copy("stuck-running");
    insert_event(
        &ws,
        "end-only",
        6,
        19,
        r#""actions":{"endInvocation":true},"#,
    );
    assert_skipped(&ws, "terminal_without_status");

    let ws = Ws::copy("stuck-running");
    insert_event(&ws, "t1", 6, 19, FAILED);
    insert_event(&ws, "t2", 7, 20, FAILED);
    assert_skipped(&ws, "ambiguous_terminals");

    let ws = Ws::copy("stuck-running");
    insert_event(&ws, "t1", 6, 19, FAILED);
    insert_event(&ws, "later", 7, 20, r#""actions":{"stateDelta":{"k":1}},"#);
    assert_skipped(&ws, "terminal_not_tail");

    let ws = Ws::copy("stuck-running");
    exec(
        &ws,
        &format!(
            "UPDATE core_agent_runs SET record_json = replace(record_json, \
             '\"invocationId\":\"{STUCK_RUN}\"', '\"invocationId\":\"other-invocation\"') \
             WHERE run_id = '{STUCK_RUN}';"
        ),
    );
    assert_skipped(&ws, "invocation_conflict");

    for (source, target) in [(STUCK_RUN, "target-run"), ("source-run", STUCK_RUN)] {
        let ws = Ws::copy("stuck-running");
        exec(
            &ws,
            &format!(
                "INSERT INTO runtime_continuation_claims(claim_id, source_session_id, \
                 source_invocation_id, source_run_id, source_turn_id, source_event_high_water, \
                 source_prefix_digest, boundary_digest, boundary_json, provider_projection_version, \
                 provider_replay_digest, target_session_id, target_invocation_id, target_run_id, \
                 target_turn_id, target_run_header_json, claimed_at, protocol_version) VALUES \
                 ('claim-1', '{STUCK_SESSION}', 'i', '{source}', 't', 1, 'p', 'b', '{{}}', 1, 'r', \
                 '{STUCK_SESSION}', 'target-inv', '{target}', 'target-turn', '{{}}', 1, 1);"
            ),
        );
        assert_skipped(&ws, "continuation_claim");
    }

    let ws = Ws::copy("stuck-running");
    exec(
        &ws,
        &format!(
            "UPDATE session_metadata SET is_archived = 1 WHERE session_id = '{STUCK_SESSION}';"
        ),
    );
    assert_skipped(&ws, "archived_session");
    let doc = json_plan(&ws, &["--include-archived"]);
    assert_eq!(doc["plan"][0]["run_id"], STUCK_RUN);
}

#[test]
fn the_workspace_authority_session_is_never_written() {
    let ws = Ws::copy("stuck-running");
    exec(
        &ws,
        &format!(
            "INSERT INTO core_agent_runs(session_id, run_id, created_at, record_json) \
             SELECT 'maka_workspace_authority', run_id, created_at, \
             replace(record_json, '{STUCK_SESSION}', 'maka_workspace_authority') \
             FROM core_agent_runs WHERE run_id = '{STUCK_RUN}';"
        ),
    );
    // Without a session row Maka does not list the run: it is neither planned nor
    // skipped (the scan reports it once, `run_outside_sessions`).
    let doc = json_plan(&ws, &[]);
    for list in ["plan", "skipped"] {
        assert!(
            doc[list]
                .as_array()
                .unwrap()
                .iter()
                .all(|s| s["session_id"] != "maka_workspace_authority"),
            "{list}: {doc}"
        );
    }
    // Listed, it is still never written.
    exec(
        &ws,
        &format!(
            "CREATE TEMP TABLE s AS SELECT * FROM session_metadata WHERE session_id = '{STUCK_SESSION}';
             UPDATE temp.s SET session_id = 'maka_workspace_authority', \
             payload_json = replace(payload_json, '{STUCK_SESSION}', 'maka_workspace_authority');
             INSERT INTO session_metadata SELECT * FROM temp.s;"
        ),
    );
    let doc = json_plan(&ws, &[]);
    let s = doc["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == "maka_workspace_authority")
        .expect("reported");
    assert_eq!(s["reason"], "workspace_authority");
}

#[test]
fn two_stuck_runs_of_one_session_get_consecutive_ordinals_and_one_status_write() {
    let ws = Ws::copy("crash-mid-tool");
    let other = "4b46f193-dee6-4dae-b3e3-23b939909a82";
    // The session's earlier run loses its terminal event and its header is reopened.
    exec(
        &ws,
        &format!(
            "DELETE FROM runtime_events WHERE event_id = '160bdbcb-2e13-4393-8f6d-cd855c262d28';
             UPDATE core_agent_runs SET record_json = replace(record_json, \
             '\"status\":\"completed\"', '\"status\":\"running\"') WHERE run_id = '{other}';"
        ),
    );
    let before = ws.scan();
    assert_eq!(stuck(&before).len(), 2);
    let version: i64 = ws
        .conn()
        .query_row(
            "SELECT metadata_version FROM session_metadata WHERE session_id = ?1",
            [CRASH_SESSION],
            |r| r.get(0),
        )
        .unwrap();
    let doc = json_plan(&ws, &["--apply", "--no-backup", "--project-header"]);
    let plan = doc["plan"].as_array().unwrap();
    assert_eq!(plan.len(), 2);
    let ordinals: Vec<i64> = plan
        .iter()
        .map(|e| e["ordinal"].as_i64().unwrap())
        .collect();
    assert_eq!(ordinals, vec![17, 18]);
    let after = ws.scan();
    assert!(stuck(&after).is_empty());
    assert_eq!(new_findings(&before, &after), Vec::<String>::new());
    let c = ws.conn();
    let v2: i64 = c
        .query_row(
            "SELECT metadata_version FROM session_metadata WHERE session_id = ?1",
            [CRASH_SESSION],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v2, version + 1, "the session status is written once");
    let failed_states: i64 = c
        .query_row(
            "SELECT count(*) FROM session_messages WHERE session_id = ?1 AND \
             message_type = 'turn_state' AND record_json LIKE '%\"status\":\"failed\"%'",
            [CRASH_SESSION],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(failed_states, 2);
}
