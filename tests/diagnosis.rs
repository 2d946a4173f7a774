//! The scan's `diagnosis`: every stuck or unreadable run of every real workspace gets
//! the cause its `generation.json` says it was made with; damaged sessions carry
//! their title, costs and producer inference; the plan's hints do not contradict it.

mod common;

use common::{STUCK_RUN, STUCK_SESSION};

use std::path::Path;

use common::finalize::*;
use serde_json::Value;

fn scan_doc(ws: &Path) -> Value {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_wsledger"))
        .args(["doctor", "scan", "--format", "json", "--workspace"])
        .arg(ws)
        .env_remove("WSLEDGER_WORKSPACE")
        .output()
        .unwrap();
    assert!(
        o.status.code() != Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// What `generation.json` says about each stuck run: (session, run if named, code,
/// event id the cause must name if any).
fn expected(gen: &Value) -> Vec<(String, Option<String>, &'static str, Option<String>)> {
    let mut out = Vec::new();
    let evidence = gen["evidence"].as_array().cloned().unwrap_or_default();
    let mut stuck: Vec<Value> = gen["stuckRuns"].as_array().cloned().unwrap_or_default();
    if gen["stuckRun"].is_object() {
        stuck.push(gen["stuckRun"].clone());
    }
    for s in stuck {
        let how = s["how"].as_str().unwrap_or("latch");
        let (code, event) = if how == "#2234" {
            let id = evidence
                .iter()
                .find(|e| e["publicAppend"]["accepted"] == false)
                .and_then(|e| e["eventId"].as_str())
                .map(str::to_owned);
            ("latched_ledger_rejection", id)
        } else {
            let msg = evidence
                .iter()
                .find_map(|e| e["error"]["message"].as_str())
                .unwrap_or("");
            assert!(msg.contains("disk I/O error"), "latch with {msg}");
            ("latched_transient_write_failure", None)
        };
        out.push((
            s["sessionId"].as_str().unwrap().to_owned(),
            s["runId"].as_str().map(str::to_owned),
            code,
            event,
        ));
    }
    if gen["crash"].is_object() {
        let c = &gen["crash"];
        let text = format!("{} {}", c["how"], c["childLog"]);
        let code = if text.contains("stream") {
            "crashed_mid_stream"
        } else if text.contains("implementation") {
            "crashed_mid_tool"
        } else {
            "crashed_before_first_step"
        };
        out.push((
            c["sessionId"].as_str().unwrap().to_owned(),
            c["runId"].as_str().map(str::to_owned),
            code,
            None,
        ));
    }
    // In-run damage: the run whose own append hit the damaged row.
    for r in gen["runs"].as_array().cloned().unwrap_or_default() {
        // (Other send errors belong to the stuck runs named above.)
        if let Some(m) = r["sendError"]["message"]
            .as_str()
            .filter(|m| m.contains("row/payload identity mismatch"))
        {
            let id = m.rsplit(' ').next().unwrap().to_owned();
            out.push((
                r["sessionId"].as_str().unwrap().to_owned(),
                None,
                "latched_row_payload_mismatch",
                Some(id),
            ));
        }
    }
    out
}

fn check_causes(dir: &Path) {
    let gen: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("generation.json")).unwrap())
            .unwrap();
    // On a copy: a scan of a WAL file may create nothing, but the shared folder stays
    // untouched all the same.
    let (copy, _) = common::copy_db(dir);
    let doc = scan_doc(copy.path());
    let ctx = dir.display().to_string();
    let causes = doc["diagnosis"]["causes"].as_array().unwrap().clone();
    // One cause per stuck or unreadable run.
    let runs = doc["summary"]["stuck_runs"].as_u64().unwrap()
        + doc["summary"]["unreadable_runs"].as_u64().unwrap();
    assert_eq!(causes.len() as u64, runs, "{ctx}: {causes:?}");
    let want = expected(&gen);
    assert_eq!(causes.len(), want.len(), "{ctx}: {causes:#?} vs {want:?}");
    for (session, run, code, event) in want {
        let c = causes
            .iter()
            .find(|c| {
                c["session_id"] == session.as_str()
                    && run.as_ref().is_none_or(|r| c["run_id"] == r.as_str())
            })
            .unwrap_or_else(|| panic!("{ctx}: no cause for {session}"));
        assert_eq!(c["code"], code, "{ctx}: {c:#}");
        if let Some(e) = event {
            assert_eq!(c["evidence"]["event_id"], e.as_str(), "{ctx}: {c:#}");
        }
        match code {
            "crashed_mid_tool" => {
                assert_eq!(c["evidence"]["tool_name"], "Bash", "{ctx}");
                assert_eq!(c["evidence"]["recovery_mode"], "never_auto_retry");
                assert_eq!(c["evidence"]["rerun_safe"], false);
                assert!(c["evidence"]["operation_id"]
                    .as_str()
                    .unwrap()
                    .starts_with("toolop_"));
            }
            "crashed_mid_stream" => {
                assert!(c["evidence"]["partial_text_chars"].as_i64().unwrap() > 0);
                assert!(c["evidence"]["read_with"]
                    .as_str()
                    .unwrap()
                    .contains("wsledger replay"));
            }
            _ => {}
        }
    }
}

#[test]
fn every_stuck_run_of_the_bundled_real_workspaces_gets_its_generation_cause() {
    let mut seen = 0;
    for dir in std::fs::read_dir("fixtures").unwrap() {
        let dir = dir.unwrap().path();
        if dir.join("generation.json").exists() {
            check_causes(&dir);
            seen += 1;
        }
    }
    assert_eq!(seen, 11);
}

/// The release workspaces bundled under `fixtures/releases/<tag>/<scenario>`.
#[test]
fn every_stuck_run_of_the_release_workspaces_gets_its_generation_cause() {
    let mut seen = 0;
    for tag in std::fs::read_dir("fixtures/releases").unwrap() {
        let tag = tag.unwrap().path();
        if !tag.is_dir() {
            continue;
        }
        for sc in std::fs::read_dir(&tag).unwrap() {
            let sc = sc.unwrap().path();
            if sc.join("generation.json").exists() {
                check_causes(&sc);
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 11, "release workspaces");
}

#[test]
fn a_damaged_session_has_its_title_costs_and_producer() {
    let doc = scan_doc(Path::new("fixtures/corrupt-ledger"));
    let d = &doc["diagnosis"];
    let s = &d["damaged_sessions"][0];
    assert_eq!(s["session_id"], "7d91bf1b-a11e-44a9-8736-0a152a7c712a");
    assert_eq!(s["name"], "Old session (damaged in December)");
    assert!(s["last_activity_ms"].as_i64().unwrap() > 1_700_000_000_000);
    assert_eq!(s["set_aside"]["messages"], 12);
    assert_eq!(s["set_aside"]["runs"], 3);
    assert_eq!(s["set_aside"]["tool_calls"], 4);
    let r = &s["reasons"][0];
    assert_eq!(r["code"], "orphan_response");
    assert_eq!(r["producer"]["code"], "maka_2234_refusal_fallback");
    assert_eq!(r["producer"]["inference"], true);
    assert_eq!(
        d["blast_radius"],
        "damage in 1 session(s) makes Maka refuse tool writes in all 2 session(s) of this workspace"
    );
    // Each choice's cost in the user's terms; excision heals it, so it is the choice.
    assert_eq!(s["remedy"], "excise");
    assert!(s["excise_fallback"].is_null());
    assert_eq!(
        s["excise_cost"],
        "removes 1 tool result from conversation \"Old session (damaged in December)\" \
         (7d91bf1b-a11e-44a9-8736-0a152a7c712a); the conversation stays listed with its messages"
    );
    assert_eq!(
        s["quarantine_cost"],
        "hides conversation \"Old session (damaged in December)\" \
         (7d91bf1b-a11e-44a9-8736-0a152a7c712a): 12 message(s), 3 run(s), 4 tool call(s), \
         until it is restored"
    );
    // Excise first, then finalize what is left; afterwards all clear.
    let steps = d["plan"]["steps"].as_array().unwrap();
    let actions: Vec<&str> = steps
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["excise", "finalize_runs"]);
    assert_eq!(
        steps[0]["command"],
        "wsledger doctor excise --workspace fixtures/corrupt-ledger --apply"
    );
    assert_eq!(steps[0]["costs"], s["excise_cost"]);
    assert_eq!(steps[0]["reversible"], true);
    assert_eq!(steps[1]["reversible"], false);
    for k in ["fixes", "costs", "command"] {
        assert!(steps[1][k].as_str().is_some_and(|s| !s.is_empty()));
    }
    assert_eq!(d["before"]["tool_writes_refused"], true);
    assert_eq!(d["after"]["tool_writes_refused"], false);
    assert_eq!(d["after"]["startup_blocked"], false);
    assert_eq!(d["after"]["stuck_runs"], 0);
}

#[test]
fn a_duplicate_without_the_fingerprint_has_no_producer() {
    let doc = scan_doc(Path::new("fixtures/damage-duplicate-response"));
    let s = &doc["diagnosis"]["damaged_sessions"][0];
    assert_eq!(s["reasons"][0]["code"], "duplicate_response");
    assert!(s["reasons"][0].get("producer").is_none(), "{s:#}");
}

#[test]
fn a_healthy_workspace_has_an_empty_plan() {
    let doc = scan_doc(Path::new("fixtures/healthy"));
    let d = &doc["diagnosis"];
    assert_eq!(d["causes"].as_array().unwrap().len(), 0);
    assert_eq!(d["damaged_sessions"].as_array().unwrap().len(), 0);
    assert_eq!(d["plan"]["steps"].as_array().unwrap().len(), 0);
    assert!(d["plan"]["all_in_one"].is_null());
    assert!(d["blast_radius"].is_null());
}

#[test]
fn a_stuck_run_whose_rows_carry_two_invocation_ids_is_told_quarantine_not_finalize() {
    let ws = Ws::copy("stuck-running");
    ws.conn()
        .execute(
            "UPDATE runtime_events SET invocation_id = 'other-invocation', payload_json = \
             replace(payload_json, '\"invocationId\":\"' || ?1 || '\"', \
             '\"invocationId\":\"other-invocation\"') WHERE event_id = (SELECT event_id \
             FROM runtime_events WHERE run_id = ?1 ORDER BY event_seq LIMIT 1)",
            [STUCK_RUN],
        )
        .unwrap();
    let doc = scan_doc(&ws.root());
    let d = &doc["diagnosis"];
    let cause = d["causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["run_id"] == STUCK_RUN)
        .unwrap();
    assert_eq!(cause["remedy"], "quarantine");
    assert_eq!(
        cause["evidence"]["invocation_ids"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let steps: Vec<&str> = d["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["quarantine"], "{d:#}");
    let f = common::findings_with(&doc, "run_stuck_running")
        .into_iter()
        .find(|f| f["run_id"] == STUCK_RUN)
        .unwrap();
    let hint = f["hint"].as_str().unwrap();
    assert!(hint.contains("doctor quarantine"), "{hint}");
    assert!(!hint.contains("finalize-runs"), "{hint}");
    assert!(d["damaged_sessions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["session_id"] == STUCK_SESSION));
}

#[test]
fn a_stuck_run_finalize_plans_is_told_the_finalize_step() {
    let doc = scan_doc(Path::new("fixtures/stuck-running"));
    let f = &doc["findings"][0];
    assert_eq!(f["code"], "run_stuck_running");
    let hint = f["hint"].as_str().unwrap();
    assert!(
        hint.contains("Step 1")
            && hint.contains("doctor finalize-runs --workspace fixtures/stuck-running --apply"),
        "{hint}"
    );
}

// corrupt-ledger: the old damaged session, its orphaned response, the stuck run.
const OLD_SESSION: &str = "7d91bf1b-a11e-44a9-8736-0a152a7c712a";
const ORPHAN_EVENT: &str = "fca88b95-bf99-4172-bc37-52b9b4d96c87";
const CRASH_RUN: &str = "adf23259-0cbf-46df-8918-28c57363ad5b";

fn set_trace_error(ws: &Ws, run: &str, text: &str) {
    ws.conn()
        .execute(
            "UPDATE core_agent_runs SET record_json = json_set(record_json, '$.traceWriteError', ?2) \
             WHERE run_id = ?1",
            rusqlite::params![run, text],
        )
        .unwrap();
}

fn cause_of(ws: &Ws, run: &str) -> Value {
    let doc = scan_doc(&ws.root());
    doc["diagnosis"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["run_id"] == run)
        .cloned()
        .unwrap()
}

#[test]
fn the_old_rejection_words_naming_an_event_in_the_file_are_corruption() {
    // v0.1.5's words for damage elsewhere: the named event is in the file.
    let ws = Ws::copy("corrupt-ledger");
    set_trace_error(
        &ws,
        CRASH_RUN,
        &format!("append runtime event: Tool ledger transition rejected: orphan_response at {ORPHAN_EVENT}"),
    );
    let c = cause_of(&ws, CRASH_RUN);
    assert_eq!(c["code"], "latched_ledger_corruption", "{c:#}");
    assert_eq!(c["evidence"]["event_id"], ORPHAN_EVENT);
    assert_eq!(c["evidence"]["issue_code"], "orphan_response");
    assert_eq!(c["evidence"]["damaged_session_id"], OLD_SESSION);
    // The same words naming an event the file does not hold: a refused append.
    set_trace_error(
        &ws,
        CRASH_RUN,
        "append runtime event: Tool ledger transition rejected: orphan_response at not-in-the-file",
    );
    let c = cause_of(&ws, CRASH_RUN);
    assert_eq!(c["code"], "latched_ledger_rejection", "{c:#}");
    assert_eq!(c["evidence"]["event_id"], "not-in-the-file");
    // Any other text is kept as it is.
    set_trace_error(&ws, CRASH_RUN, "append runtime event: something else");
    let c = cause_of(&ws, CRASH_RUN);
    assert_eq!(c["code"], "latched_other", "{c:#}");
    assert_eq!(
        c["evidence"]["trace_write_error"],
        "append runtime event: something else"
    );
}

#[test]
fn a_crash_before_the_first_step_leaves_only_the_user_message() {
    let ws = Ws::copy("corrupt-ledger");
    ws.conn()
        .execute(
            "DELETE FROM runtime_partial_snapshots WHERE run_id = ?1",
            [CRASH_RUN],
        )
        .unwrap();
    let c = cause_of(&ws, CRASH_RUN);
    assert_eq!(c["code"], "crashed_before_first_step", "{c:#}");
    assert_eq!(c["evidence"]["events"], 1);
}

#[test]
fn every_cause_has_advice_in_the_same_order() {
    let codes: Vec<_> = wsledger::diagnosis::CAUSE_CODES
        .iter()
        .map(|c| c.0)
        .collect();
    let advised: Vec<_> = wsledger::diagnosis::CAUSE_ADVICE
        .iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(codes, advised);
    for (code, advice) in wsledger::diagnosis::CAUSE_ADVICE {
        // Advice names a command to run, never schema surgery or a downgrade.
        assert!(advice.contains("wsledger "), "{code}");
        for banned in ["ALTER", "DROP", "downgrade", "older Maka"] {
            assert!(!advice.contains(banned), "{code}: {banned}");
        }
    }
}

#[test]
fn docs_document_every_cause_producer_and_field() {
    let doc = std::fs::read_to_string("docs/diagnosis.md").unwrap();
    for (code, _) in wsledger::diagnosis::CAUSE_CODES
        .iter()
        .chain(wsledger::diagnosis::PRODUCERS)
    {
        assert!(
            doc.contains(&format!("| `{code}` |")),
            "docs/diagnosis.md lacks {code}"
        );
    }
    for field in [
        "causes",
        "damaged_sessions",
        "plan.steps[]",
        "`after`",
        "session_id",
        "run_id",
        "evidence",
        "last_activity_ms",
        "reasons",
        "set_aside",
        "command",
        "fixes",
        "reversible",
        "tool_writes_refused",
        "startup_blocked",
        "stuck_runs",
    ] {
        assert!(doc.contains(field), "docs/diagnosis.md lacks {field}");
    }
}

#[test]
fn the_quarantine_plan_names_each_session_by_title() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_wsledger"))
        .args(["doctor", "quarantine", "--format", "json", "--workspace"])
        .arg("fixtures/corrupt-ledger")
        .env_remove("WSLEDGER_WORKSPACE")
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &doc["sessions"][0];
    assert_eq!(s["session_id"], OLD_SESSION);
    assert_eq!(s["name"], "Old session (damaged in December)");
    assert!(s["last_activity_ms"].as_i64().is_some());
}

#[test]
fn a_plan_on_a_file_no_repair_may_write_says_its_steps_are_refused() {
    // A column Maka never had: no known generation, and a repair table differs (the
    // journal: the ledger itself is still read, so there is a plan).
    let ws = Ws::copy("stuck-running");
    ws.conn()
        .execute_batch("ALTER TABLE tool_journal_events ADD COLUMN extra TEXT")
        .unwrap();
    let doc = scan_doc(&ws.root());
    let why = doc["diagnosis"]["plan"]["refused"].as_str().unwrap();
    assert!(
        why.starts_with("every step's --apply refuses this file"),
        "{why}"
    );
    let doc = scan_doc(Path::new("fixtures/stuck-running"));
    assert!(doc["diagnosis"]["plan"]["refused"].is_null());
    let doc = scan_doc(Path::new("fixtures/releases/v0.1.5/stuck-refused-orphan"));
    assert!(
        doc["diagnosis"]["plan"]["refused"].is_null(),
        "a known release is repaired in its own schema"
    );
}
