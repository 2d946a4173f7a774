//! Replay on hand-built sessions: terminal classification against the header and the
//! operational terminal event, and continuation prefix digests (no real fixture has
//! these shapes).

use serde_json::json;

use super::digest::{prefix_digest, PrefixIdentity};
use super::input::{ClaimRow, RunEventRow};
use super::*;
use crate::db::{EventRow, HeaderRow};
use crate::event::{decode_event_text, RuntimeEvent};

const S: &str = "sess-1";
const R: &str = "run-1";

fn event(seq: i64, id: &str, body: &str) -> EventRow {
    let payload = format!(
        r#"{{"id":"{id}","sessionId":"{S}","invocationId":"{R}","runId":"{R}","turnId":"turn-1","ts":{},"partial":false,{body}}}"#,
        1000 + seq
    );
    EventRow {
        event_id: id.into(),
        session_id: S.into(),
        invocation_id: R.into(),
        run_id: R.into(),
        turn_id: "turn-1".into(),
        event_seq: seq,
        event_kind: String::new(),
        payload_json: payload,
        committed_at: 1000 + seq,
    }
}

fn user(seq: i64) -> EventRow {
    event(
        seq,
        "e-user",
        r#""role":"user","author":"user","content":{"kind":"text","text":"hi"}"#,
    )
}

fn model(seq: i64) -> EventRow {
    event(
        seq,
        "e-model",
        r#""role":"model","author":"agent","content":{"kind":"text","text":"hello"}"#,
    )
}

fn terminal(seq: i64, status: &str, delta: &str) -> EventRow {
    event(
        seq,
        "e-end",
        &format!(
            r#""role":"system","author":"system","status":"{status}","actions":{{"endInvocation":true,"stateDelta":{{{delta}}}}}"#
        ),
    )
}

fn header(status: &str, extra: &str) -> HeaderRow {
    HeaderRow {
        session_id: S.into(),
        run_id: R.into(),
        created_at: 1,
        record_json: format!(
            r#"{{"runId":"{R}","sessionId":"{S}","turnId":"turn-1","status":"{status}","backendKind":"ai-sdk","llmConnectionSlug":"x","modelId":"m","cwd":"/","permissionMode":"ask","createdAt":1,"updatedAt":1{extra}}}"#
        ),
    }
}

fn run_event(seq: i64, kind: &str, data: &str) -> RunEventRow {
    RunEventRow {
        run_id: R.into(),
        sequence: seq,
        event_id: format!("op-{seq}"),
        event_type: kind.into(),
        event_ts: 2000,
        record_json: format!(
            r#"{{"type":"{kind}","id":"op-{seq}","runId":"{R}","sessionId":"{S}","turnId":"turn-1","ts":2000{data}}}"#
        ),
    }
}

fn rows(events: Vec<EventRow>, h: Option<HeaderRow>, run_events: Vec<RunEventRow>) -> SessionRows {
    SessionRows {
        session_id: S.into(),
        events,
        headers: h.into_iter().collect(),
        run_events,
        ..SessionRows::default()
    }
}

fn codes(r: &Replay) -> Vec<(&'static str, Option<String>, Value, Value)> {
    r.all_divergences()
        .map(|d| (d.code, d.field.clone(), d.stored.clone(), d.implied.clone()))
        .collect()
}

#[test]
fn a_consistent_run_has_no_divergence() {
    let r = replay(&rows(
        vec![user(1), model(2), terminal(3, "completed", "")],
        Some(header("completed", "")),
        vec![
            run_event(0, "run_started", ""),
            run_event(1, "run_completed", ""),
        ],
    ));
    assert_eq!(codes(&r), []);
    let run = &r.runs[0];
    assert_eq!(run.status.as_deref(), Some("completed"));
    assert_eq!(run.classification.as_deref(), Some("fact"));
    assert_eq!(run.terminal_event_id.as_deref(), Some("e-end"));
    assert_eq!(
        run.operational_terminal
            .as_ref()
            .map(|o| o.event_type.as_str()),
        Some("run_completed")
    );
    let kinds: Vec<&str> = run
        .steps
        .iter()
        .map(|s| match &s.body {
            StepBody::User { .. } => "user",
            StepBody::Assistant { .. } => "assistant",
            StepBody::TurnState { .. } => "turn_state",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["user", "assistant", "turn_state"]);
}

#[test]
fn headers_and_operational_events_are_compared_with_the_log() {
    // Header still running, log completed at its tail: awaiting adoption, a note only.
    let r = replay(&rows(
        vec![user(1), terminal(2, "completed", "")],
        Some(header("running", "")),
        vec![],
    ));
    assert!(codes(&r).is_empty(), "{:?}", codes(&r));
    assert!(r.runs[0]
        .notes
        .iter()
        .any(|n| n.code == "run_awaiting_adoption"));
    // Header terminal, log without a terminal event.
    let r = replay(&rows(
        vec![user(1)],
        Some(header("completed", "")),
        vec![run_event(0, "run_completed", "")],
    ));
    let c: Vec<&str> = codes(&r).into_iter().map(|x| x.0).collect();
    assert_eq!(c, ["header_status_mismatch", "run_terminal_event_mismatch"]);
    // Failed: failure classes of header and run event against the fact's.
    let r = replay(&rows(
        vec![
            user(1),
            terminal(2, "failed", r#""failureClass":"app_restarted""#),
        ],
        Some(header("failed", r#","failureClass":"unknown""#)),
        vec![run_event(
            0,
            "run_failed",
            r#","data":{"failureClass":"runtime_error"}"#,
        )],
    ));
    assert_eq!(
        codes(&r),
        [
            (
                "header_failure_class_mismatch",
                Some("failureClass".into()),
                json!("unknown"),
                json!("app_restarted")
            ),
            (
                "run_terminal_event_mismatch",
                Some("data.failureClass".into()),
                json!("runtime_error"),
                json!("app_restarted")
            ),
        ]
    );
    // The wrong kind of run event.
    let r = replay(&rows(
        vec![user(1), terminal(2, "completed", "")],
        Some(header("completed", "")),
        vec![run_event(0, "run_failed", "")],
    ));
    assert_eq!(
        codes(&r),
        [(
            "run_terminal_event_mismatch",
            Some("event_type".into()),
            json!("run_failed"),
            json!("run_completed")
        )]
    );
    // A stuck run with no terminal of either kind agrees with its log.
    let r = replay(&rows(vec![user(1)], Some(header("running", "")), vec![]));
    assert_eq!(codes(&r), []);
    assert_eq!(r.runs[0].state, RunState::Stuck);
    assert!(r.runs[0].notes.iter().any(|n| n.code == "run_in_flight"));
    // Two terminal events; a terminal that is not the tail; no header.
    let mut second = terminal(3, "completed", "");
    second.event_id = "e-end-2".into();
    second.payload_json = second.payload_json.replace("\"e-end\"", "\"e-end-2\"");
    let r = replay(&rows(
        vec![user(1), terminal(2, "completed", ""), second],
        Some(header("completed", "")),
        vec![run_event(0, "run_completed", "")],
    ));
    assert_eq!(codes(&r)[0].0, "terminal_ambiguous");
    let r = replay(&rows(
        vec![user(1), terminal(2, "completed", ""), model(3)],
        Some(header("running", "")),
        vec![],
    ));
    assert_eq!(codes(&r)[0].0, "terminal_not_tail");
    let r = replay(&rows(vec![user(1), model(2)], None, vec![]));
    assert_eq!(codes(&r)[0].0, "header_missing");
    // ... except in Maka's workspace-authority session, whose runs have none.
    let mut authority = rows(vec![user(1)], None, vec![]);
    authority.session_id = "maka_workspace_authority".into();
    for e in &mut authority.events {
        e.session_id = authority.session_id.clone();
        e.payload_json = e.payload_json.replace(
            "\"sessionId\":\"sess-1\"",
            "\"sessionId\":\"maka_workspace_authority\"",
        );
    }
    let r = replay(&authority);
    assert_eq!(codes(&r), []);
    assert_eq!(r.runs[0].state, RunState::NoHeader);
}

#[test]
fn continuation_claims_are_checked_against_the_recomputed_prefix() {
    let events = vec![user(1), model(2), terminal(3, "completed", "")];
    let decoded: Vec<RuntimeEvent> = events
        .iter()
        .map(|e| decode_event_text(&e.payload_json).unwrap())
        .collect();
    let identity = PrefixIdentity {
        session_id: S.into(),
        invocation_id: R.into(),
        run_id: R.into(),
        turn_id: "turn-1".into(),
    };
    let good = prefix_digest(
        &identity,
        &decoded
            .iter()
            .enumerate()
            .map(|(i, e)| (i as i64 + 1, e))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let claim = |digest: &str, high_water: i64| ClaimRow {
        claim_id: "claim-1".into(),
        source_session_id: S.into(),
        source_invocation_id: R.into(),
        source_run_id: R.into(),
        source_turn_id: "turn-1".into(),
        source_event_high_water: high_water,
        source_prefix_digest: digest.into(),
        boundary_json: format!(
            r#"{{"protocol":"runtime_boundary_cursor_v1","segments":[{{"protocol":"runtime_prefix_segment_v1","identity":{{"sessionId":"{S}","invocationId":"{R}","runId":"{R}","turnId":"turn-1"}},"position":{{"lastEventSeq":{high_water},"eventCount":{high_water},"lastEventId":"e-end"}},"prefixDigest":"{digest}"}}]}}"#
        ),
        target_session_id: S.into(),
        target_run_id: "run-2".into(),
        start_event_id: None,
    };
    let with = |c: ClaimRow| {
        let mut r = rows(
            events.clone(),
            Some(header("completed", "")),
            vec![run_event(0, "run_completed", "")],
        );
        r.claims = vec![c];
        replay(&r)
    };
    assert_eq!(codes(&with(claim(&good, 3))), []);
    let wrong = format!("sha256:{}", "0".repeat(64));
    let r = with(claim(&wrong, 3));
    let got = codes(&r);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        got[0],
        (
            "continuation_digest_mismatch",
            Some("source_prefix_digest".into()),
            json!(wrong),
            json!(good)
        )
    );
    assert_eq!(
        got[1].1.as_deref(),
        Some("boundary_json.segments[0].prefixDigest")
    );
    // A claim pinning more events than the run has.
    let r = with(claim(&good, 5));
    assert_eq!(codes(&r)[0].0, "continuation_prefix_unreadable");
}
