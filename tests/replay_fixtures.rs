//! `replay` on every session of every real Maka workspace: it replays, its transcript
//! is Maka's (`transcript.json`), its run statuses and scanner issues are Maka's
//! (`verdict.json`), known damage shows as the expected divergence, and a bundle
//! replays exactly like the database.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use wsledger::bundle::Bundle;
use wsledger::db::Workspace;
use wsledger::header::decode_header;
use wsledger::replay::transcript::project;
use wsledger::replay::{operation_ids_named, replay, Replay, SessionRows, StepBody};
use wsledger::scan::decode_row;

fn fixtures() -> Vec<PathBuf> {
    let v = common::real_fixtures();
    assert!(v.len() >= 11, "the real fixtures are missing");
    v
}

fn json_file(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

struct Session {
    fixture: String,
    id: String,
    bundle: Bundle,
    rows: SessionRows,
    replay: Replay,
}

fn sessions() -> Vec<Session> {
    let mut out = Vec::new();
    for dir in fixtures() {
        let ws = Workspace::open_read_only(&dir.join("runtime.sqlite")).unwrap();
        for id in ws.session_ids().unwrap() {
            let bundle = ws.export_session(&id, &operation_ids_named).unwrap();
            let rows = SessionRows::from_bundle(&bundle).unwrap();
            let replay = replay(&rows);
            out.push(Session {
                fixture: dir.file_name().unwrap().to_string_lossy().into_owned(),
                id,
                bundle,
                rows,
                replay,
            });
        }
    }
    assert!(out.len() >= 24, "expected every fixture session");
    out
}

/// Divergence codes of a session, counted.
fn codes(r: &Replay) -> BTreeMap<String, usize> {
    r.summary.divergence_codes.clone()
}

#[test]
fn every_session_replays_with_the_expected_divergences() {
    // Sessions not listed here must replay without any divergence.
    let expected: HashMap<(&str, &str), Vec<(&str, usize)>> = [
        (
            ("corrupt-ledger", "7d91bf1b"),
            vec![("result_without_call", 1), ("scanner_issue", 1)],
        ),
        (
            ("crash-mid-tool", "240cf9b4"),
            vec![("call_without_result", 1)],
        ),
        (
            ("damage-dispatch-without-call", "e1ac3807"),
            vec![("scanner_issue", 1)],
        ),
        (
            ("damage-duplicate-call", "af8d23fd"),
            vec![("call_without_result", 1), ("scanner_issue", 1)],
        ),
        (
            ("damage-duplicate-dispatch", "dd52495b"),
            vec![("scanner_issue", 1)],
        ),
        (
            ("damage-duplicate-response", "2be83f9c"),
            vec![("result_without_call", 1), ("scanner_issue", 1)],
        ),
        (
            ("damage-semantic-lane-conflict", "ce89738c"),
            vec![("scanner_issue", 1)],
        ),
        (
            ("damage-undecodable-row", "5c065df1"),
            vec![("event_undecodable", 1)],
        ),
        (
            ("orphan-response", "ddd31307"),
            vec![("result_without_call", 1), ("scanner_issue", 1)],
        ),
    ]
    .into_iter()
    .collect();
    let mut failures = Vec::new();
    for s in sessions() {
        let key = (s.fixture.as_str(), &s.id[..8]);
        let want: BTreeMap<String, usize> = expected
            .get(&key)
            .map(|v| v.iter().map(|(c, n)| (c.to_string(), *n)).collect())
            .unwrap_or_default();
        if codes(&s.replay) != want {
            failures.push(format!(
                "{}/{}: divergences {:?}, expected {:?}",
                s.fixture,
                s.id,
                codes(&s.replay),
                want
            ));
        }
        // The summary counts what the runs hold.
        let listed = s.replay.all_divergences().count();
        if listed != s.replay.summary.divergences {
            failures.push(format!("{}/{}: summary miscounts", s.fixture, s.id));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn known_damage_shows_as_the_expected_divergence() {
    let all = sessions();
    let find = |fixture: &str, prefix: &str| {
        all.iter()
            .find(|s| s.fixture == fixture && s.id.starts_with(prefix))
            .unwrap()
    };
    // The orphan response of #2234 is a result without a call, on the scanner's event.
    for (fixture, prefix) in [
        ("orphan-response", "ddd31307"),
        ("corrupt-ledger", "7d91bf1b"),
    ] {
        let s = find(fixture, prefix);
        let divs: Vec<_> = s.replay.all_divergences().collect();
        let issue = divs.iter().find(|d| d.code == "scanner_issue").unwrap();
        assert_eq!(issue.detail["issue"], "orphan_response");
        let orphan = divs
            .iter()
            .find(|d| d.code == "result_without_call")
            .unwrap();
        assert_eq!(orphan.event_id, issue.event_id, "{fixture}");
        assert_eq!(orphan.tool_call_id, issue.tool_call_id, "{fixture}");
        // The transcript shows the result, unpaired, in its run.
        let run = s
            .replay
            .runs
            .iter()
            .find(|r| Some(&r.run_id) == orphan.run_id.as_ref())
            .unwrap();
        let step = run
            .steps
            .iter()
            .find(|st| st.event_id == orphan.event_id)
            .unwrap();
        assert!(matches!(
            &step.body,
            StepBody::ToolResult {
                call_event_id: None,
                is_error: true,
                ..
            }
        ));
        assert!(run
            .pairing
            .iter()
            .any(|p| p.status == "result_without_call" && p.result_event_id == orphan.event_id));
    }
    // Each damage-* workspace: its scanner issue, in the damaged session.
    for (fixture, code) in [
        ("damage-duplicate-call", "duplicate_call"),
        ("damage-duplicate-response", "duplicate_response"),
        ("damage-duplicate-dispatch", "duplicate_dispatch"),
        ("damage-dispatch-without-call", "event_order_conflict"),
        ("damage-semantic-lane-conflict", "semantic_lane_conflict"),
    ] {
        let issues: Vec<String> = all
            .iter()
            .filter(|s| s.fixture == fixture)
            .flat_map(|s| s.replay.all_divergences())
            .filter(|d| d.code == "scanner_issue")
            .map(|d| d.detail["issue"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(issues, [code], "{fixture}");
    }
    // Re-used ids: what each projection kept.
    let dup = find("damage-duplicate-call", "af8d23fd");
    let g = dup
        .replay
        .supersession
        .iter()
        .find(|g| g.kind == "call")
        .unwrap();
    assert_eq!(g.event_ids.len(), 2);
    assert_eq!(g.kept.tool_operations.as_ref(), Some(&g.event_ids[0]));
    assert_eq!(g.kept.transcript, g.event_ids);
    assert!(g.kept.model_context.is_some());
    let dup = find("damage-duplicate-response", "2be83f9c");
    let g = dup
        .replay
        .supersession
        .iter()
        .find(|g| g.kind == "response")
        .unwrap();
    assert_eq!(g.kept.tool_operations.as_ref(), Some(&g.event_ids[0]));
    assert_eq!(g.kept.model_context.as_ref(), Some(&g.event_ids[0]));
    // The undecodable row: a divergence, and the rest of its run still replays.
    let s = find("damage-undecodable-row", "5c065df1");
    let d = s
        .replay
        .all_divergences()
        .find(|d| d.code == "event_undecodable")
        .unwrap();
    assert!(d.message.contains("identity mismatch"));
    let run = s
        .replay
        .runs
        .iter()
        .find(|r| Some(&r.run_id) == d.run_id.as_ref())
        .unwrap();
    assert_eq!(run.events, 6);
    assert_eq!(run.undecodable_events, 1);
    assert!(run.classification.is_none());
    let kinds: Vec<&str> = run
        .steps
        .iter()
        .map(|st| match &st.body {
            StepBody::User { .. } => "user",
            StepBody::Assistant { .. } => "assistant",
            StepBody::ToolCall { .. } => "tool_call",
            StepBody::ToolResult { .. } => "tool_result",
            StepBody::Undecodable { .. } => "undecodable",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "tool_call",
            "tool_result",
            "undecodable"
        ]
    );
    // The call before the damage still pairs with its result.
    let result_id = run.steps[3].event_id.clone();
    assert!(matches!(
        &run.steps[2].body,
        StepBody::ToolCall { result_event_id, .. } if *result_event_id == result_id
    ));
    assert_eq!(run.pairing.len(), 1);
    assert_eq!(run.pairing[0].status, "paired");
}

#[test]
fn run_statuses_and_scanner_issues_are_makas() {
    let mut failures = Vec::new();
    let mut verdicts: HashMap<String, Value> = HashMap::new();
    for s in sessions() {
        let v = verdicts.entry(s.fixture.clone()).or_insert_with(|| {
            json_file(&Path::new("fixtures").join(&s.fixture).join("verdict.json"))
        });
        for vr in v["runs"].as_array().unwrap() {
            if vr["sessionId"] != json!(s.id) {
                continue;
            }
            let run_id = vr["runId"].as_str().unwrap();
            let Some(r) = s.replay.runs.iter().find(|r| r.run_id == run_id) else {
                failures.push(format!("{}: run {run_id} missing", s.fixture));
                continue;
            };
            if json!(r.header_status) != vr["headerStatus"] {
                failures.push(format!(
                    "{}: {run_id} header status {:?}",
                    s.fixture, r.header_status
                ));
            }
            if json!(r.classification) != vr["terminalLedgerClassification"] {
                failures.push(format!(
                    "{}: {run_id} classification {:?}, Maka {}",
                    s.fixture, r.classification, vr["terminalLedgerClassification"]
                ));
            }
            let want_ids: Vec<String> = vr["terminalEventIds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_owned())
                .collect();
            if want_ids.len() == 1 && r.terminal_event_id.as_ref() != Some(&want_ids[0]) {
                failures.push(format!("{}: {run_id} terminal event", s.fixture));
            }
            if vr["stuckRunning"] == json!(true) && r.state != wsledger::scan::runs::RunState::Stuck
            {
                failures.push(format!("{}: {run_id} should be stuck", s.fixture));
            }
            if vr["readError"].is_object() && r.undecodable_events == 0 {
                failures.push(format!("{}: {run_id} should be unreadable", s.fixture));
            }
        }
        let want: Vec<Value> = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["sessionId"] == json!(s.id))
            .map(|x| x["toolLedger"]["issues"].as_array().unwrap().clone())
            .unwrap_or_default();
        let got: Vec<Value> = s
            .replay
            .all_divergences()
            .filter(|d| d.code == "scanner_issue")
            .map(|d| {
                let mut m = serde_json::Map::new();
                m.insert("code".into(), d.detail["issue"].clone());
                m.insert("eventId".into(), json!(d.event_id));
                if let Some(o) = &d.operation_id {
                    m.insert("operationId".into(), json!(o));
                }
                if let Some(t) = &d.tool_call_id {
                    m.insert("toolCallId".into(), json!(t));
                }
                Value::Object(m)
            })
            .collect();
        if got != want {
            failures.push(format!(
                "{}/{}: scanner issues {got:?}, Maka {want:?}",
                s.fixture, s.id
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Our projection of the log equals the messages Maka's read model returns, turn by
/// turn, for every turn Maka projects from the log (in-flight turns come from the
/// cache in Maka and are left out); and the tool pairing follows those messages.
#[test]
fn transcript_and_pairing_are_makas() {
    let mut failures = Vec::new();
    let mut transcripts: HashMap<String, Value> = HashMap::new();
    for s in sessions() {
        let t = transcripts.entry(s.fixture.clone()).or_insert_with(|| {
            json_file(
                &Path::new("fixtures")
                    .join(&s.fixture)
                    .join("transcript.json"),
            )
        });
        let ts = t["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["session_id"] == json!(s.id))
            .unwrap();
        let in_flight: HashSet<&str> = ts["in_flight_turn_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        // Our Maka-form messages, from the session's decoded events in run order.
        let headers: Vec<_> = s
            .rows
            .headers
            .iter()
            .filter_map(|h| decode_header(&h.record_json, &h.session_id, &h.run_id).ok())
            .collect();
        let header_map: HashMap<String, _> =
            headers.iter().map(|h| (h.run_id.clone(), h)).collect();
        let mut events = Vec::new();
        for run in &s.replay.runs {
            let mut rows: Vec<_> = s
                .rows
                .events
                .iter()
                .filter(|e| e.run_id == run.run_id)
                .collect();
            rows.sort_by_key(|e| (e.event_seq, e.event_id.clone()));
            events.extend(rows.into_iter().filter_map(|e| decode_row(e).ok()));
        }
        let refs: Vec<_> = events.iter().collect();
        let ours = project(&refs, &header_map);
        let by_turn = |ms: &mut dyn Iterator<Item = Value>| {
            let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
            for x in ms {
                let turn = x["turnId"].as_str().unwrap().to_owned();
                if !in_flight.contains(turn.as_str()) {
                    m.entry(turn).or_default().push(x);
                }
            }
            m
        };
        let want = by_turn(&mut ts["messages"].as_array().unwrap().iter().cloned());
        let got = by_turn(&mut ours.messages.iter().map(|(_, m)| m.clone()));
        if want != got {
            for (turn, w) in &want {
                let g = got.get(turn).cloned().unwrap_or_default();
                if *w != g {
                    failures.push(format!(
                        "{}/{} turn {turn}:\n  maka {}\n  ours {}",
                        s.fixture,
                        s.id,
                        serde_json::to_string(w).unwrap(),
                        serde_json::to_string(&g).unwrap()
                    ));
                }
            }
            if want.len() != got.len() {
                failures.push(format!("{}/{}: turn sets differ", s.fixture, s.id));
            }
        }
        // Pairing: in Maka's messages of a turn, a tool_result answers the latest
        // unanswered tool_call with its id; the replay pairs exactly those.
        for run in &s.replay.runs {
            let turn = run.turn_id.clone().unwrap_or_default();
            let Some(msgs) = want.get(&turn) else {
                continue;
            };
            let mut open: Vec<String> = Vec::new();
            let mut expect_paired = 0usize;
            let mut expect_orphans = 0usize;
            for m in msgs {
                match m["type"].as_str() {
                    Some("tool_call") => {
                        let id = m["id"].as_str().unwrap().to_owned();
                        open.retain(|x| *x != id);
                        open.push(id);
                    }
                    Some("tool_result") => {
                        let id = m["toolUseId"].as_str().unwrap();
                        if let Some(i) = open.iter().position(|x| x == id) {
                            open.remove(i);
                            expect_paired += 1;
                        } else {
                            expect_orphans += 1;
                        }
                    }
                    _ => {}
                }
            }
            let count = |st: &str| run.pairing.iter().filter(|p| p.status == st).count();
            if (
                count("paired"),
                count("result_without_call"),
                count("call_without_result"),
            ) != (expect_paired, expect_orphans, open.len())
            {
                failures.push(format!(
                    "{}/{} run {}: pairing {:?}, transcript implies paired {expect_paired}, orphans {expect_orphans}, open {}",
                    s.fixture,
                    s.id,
                    run.run_id,
                    run.pairing,
                    open.len()
                ));
            }
            for p in run.pairing.iter().filter(|p| p.status == "paired") {
                let call = run
                    .steps
                    .iter()
                    .find(|st| st.event_id == p.call_event_id)
                    .unwrap();
                let res = run
                    .steps
                    .iter()
                    .find(|st| st.event_id == p.result_event_id)
                    .unwrap();
                match (&call.body, &res.body) {
                    (
                        StepBody::ToolCall {
                            tool_call_id: a,
                            result_event_id,
                            ..
                        },
                        StepBody::ToolResult {
                            tool_call_id: b,
                            call_event_id,
                            ..
                        },
                    ) => {
                        assert_eq!(a, b);
                        assert_eq!(result_event_id, &p.result_event_id);
                        assert_eq!(call_event_id, &p.call_event_id);
                    }
                    _ => failures.push(format!("{}: pair of non-tool steps", s.fixture)),
                }
            }
        }
        // Maka's soft comparison with the cached transcript: same differences, for
        // sessions Maka projects entirely from the log.
        if in_flight.is_empty() {
            let diag = |code: &str| -> Vec<Value> {
                ts["diagnostics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| d["code"] == code)
                    .map(|d| d["detail"].clone())
                    .collect()
            };
            let note = s
                .replay
                .notes
                .iter()
                .find(|n| n.code == "session_messages_differ");
            let (missing, unexpected) = note.map_or((json!([]), json!([])), |n| {
                (
                    n.detail["missing_legacy_message"].clone(),
                    n.detail["unexpected_projected_message"].clone(),
                )
            });
            if missing != json!(diag("missing_legacy_message"))
                || unexpected != json!(diag("unexpected_projected_message"))
            {
                failures.push(format!(
                    "{}/{}: cache comparison differs from Maka's diagnostics",
                    s.fixture, s.id
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_bundle_replays_exactly_like_the_database() {
    for s in sessions() {
        let text = s.bundle.to_json_text();
        let back = Bundle::from_json_text(&text).unwrap();
        assert_eq!(back, s.bundle, "{}/{}", s.fixture, s.id);
        let again = replay(&SessionRows::from_bundle(&back).unwrap());
        assert_eq!(again, s.replay, "{}/{}", s.fixture, s.id);
        // The bundle holds exactly the session's rows of each table.
        assert_eq!(back.rows("runtime_events").len(), s.rows.events.len());
        assert!(back.rows("runtime_events").iter().all(|r| {
            r.get("session_id").and_then(|c| c.text_lossy()).as_deref() == Some(s.id.as_str())
        }));
    }
}
