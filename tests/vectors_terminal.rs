//! Conformance: `tests/vectors/terminal.jsonl` (Maka's `classifyTerminalRuntimeLedger`,
//! `classifyRuntimeEventTerminalFact` and the workspace verdict's run flags).
//!
//! Every line is checked; the test reports every failing line by name.

mod common;

use common::{check_vectors, open_fixture};
use serde_json::{json, Map, Value};
use wsledger::event::{decode_event_text, RuntimeEvent};
use wsledger::json::JsStr;
use wsledger::ledger::terminal::{
    classify_terminal_ledger, terminal_is_immutable_tail, terminal_verdict, RunHeaderView,
    RunStatus, TerminalClassification, TerminalKind,
};

const VECTORS: &str = include_str!("vectors/terminal.jsonl");

fn text(s: &JsStr) -> Value {
    Value::String(s.to_string_lossy())
}

fn ids(list: &[JsStr]) -> Value {
    Value::Array(list.iter().map(text).collect())
}

fn header_view(h: &Value) -> Result<RunHeaderView, String> {
    let string = |k: &str| h.get(k).and_then(Value::as_str).map(JsStr::new);
    let status = h["status"]
        .as_str()
        .and_then(RunStatus::from_maka)
        .ok_or("bad header status")?;
    Ok(RunHeaderView {
        session_id: string("sessionId").ok_or("no sessionId")?,
        run_id: string("runId").ok_or("no runId")?,
        turn_id: string("turnId").ok_or("no turnId")?,
        status,
        failure_class: string("failureClass"),
        abort_source: string("abortSource"),
    })
}

/// The classification in the vectors' shape.
fn classification_json(c: &TerminalClassification) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!(c.kind.as_str()));
    out.insert("terminal_event_ids".into(), ids(&c.terminal_event_ids));
    if let Some(f) = &c.fact {
        let mut fact = Map::new();
        fact.insert("runStatus".into(), json!(f.run_status.as_str()));
        fact.insert("turnStatus".into(), json!(f.turn_status.as_str()));
        fact.insert("terminalEventId".into(), text(&f.terminal_event_id));
        if let Some(class) = &f.failure_class {
            fact.insert("failureClass".into(), text(class));
        }
        if let Some(source) = &f.abort_source {
            fact.insert("abortSource".into(), text(source));
        }
        out.insert("fact".into(), Value::Object(fact));
    }
    if c.kind == TerminalKind::IncompleteSingleTerminal {
        if let Some(id) = c.single_terminal_event_id() {
            out.insert("incomplete_terminal_event_id".into(), text(id));
        }
    }
    Value::Object(out)
}

/// The diagnostics in the vectors' shape (`code`, `message`, `eventId` or `detail`).
fn diagnostics_json(c: &TerminalClassification) -> Value {
    let list = c.diagnostics.iter().map(|d| {
        let mut out = Map::new();
        out.insert("code".into(), json!(d.code.as_str()));
        out.insert("message".into(), json!(d.message));
        match &d.event_id {
            Some(id) => {
                out.insert("eventId".into(), text(id));
            }
            None => {
                let mut detail = Map::new();
                detail.insert("runId".into(), text(&d.run_id));
                detail.insert("turnId".into(), text(&d.turn_id));
                if let Some(list) = &d.detail_event_ids {
                    detail.insert("eventIds".into(), ids(list));
                }
                out.insert("detail".into(), Value::Object(detail));
            }
        }
        Value::Object(out)
    });
    Value::Array(list.collect())
}

fn check_line(v: &Value) -> Result<(), String> {
    let header = header_view(&v["header"])?;
    let events: Vec<RuntimeEvent> = v["events"]
        .as_array()
        .ok_or("events is not an array")?
        .iter()
        .map(|e| {
            let s = serde_json::to_string(e).map_err(|e| e.to_string())?;
            decode_event_text(&s).map_err(|e| format!("event does not decode: {e}"))
        })
        .collect::<Result<_, String>>()?;
    let maka = &v["maka"];
    let mut problems = Vec::new();

    let c = classify_terminal_ledger(&header, &events);
    let got = classification_json(&c);
    if got != maka["classification"] {
        problems.push(format!(
            "classification {got}, Maka {}",
            maka["classification"]
        ));
    }
    let got = diagnostics_json(&c);
    if got != maka["fact_diagnostics"] {
        problems.push(format!(
            "diagnostics {got}, Maka {}",
            maka["fact_diagnostics"]
        ));
    }

    let verdict = terminal_verdict(&header, &events);
    for (name, ours) in [
        (
            "has_terminal_runtime_event",
            verdict.has_terminal_runtime_event,
        ),
        ("stuck_running", verdict.stuck_running),
        (
            "header_terminal_without_event",
            verdict.header_terminal_without_event,
        ),
        (
            "event_terminal_but_header_open",
            verdict.event_terminal_but_header_open,
        ),
    ] {
        if maka[name].as_bool() != Some(ours) {
            problems.push(format!("{name} {ours}, Maka {}", maka[name]));
        }
    }

    // An open header with a complete fact is adopted exactly when that terminal is the
    // immutable tail (partial snapshots are not immutable rows).
    if header.status.is_open() && c.kind == TerminalKind::Fact {
        let snapshots: Vec<&str> = v
            .get("partial_snapshot_event_ids")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let immutable: Vec<RuntimeEvent> = events
            .iter()
            .filter(|e| !snapshots.iter().any(|s| e.id == *s))
            .cloned()
            .collect();
        let id = c
            .single_terminal_event_id()
            .ok_or("fact without single terminal")?;
        let tail = terminal_is_immutable_tail(id, &immutable);
        let treatment = maka["recovery"]["treatment"].as_str().unwrap_or("");
        if tail != (treatment == "adoptable") {
            problems.push(format!(
                "tail rule says {tail}, Maka's treatment is {treatment}"
            ));
        }
    }

    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[test]
fn terminal_vectors() {
    let (lines, failures) = check_vectors(VECTORS, check_line);
    assert_eq!(lines, 32, "terminal.jsonl has 32 lines");
    common::assert_no_failures(&failures, &format!("of {lines} lines fail"));
}

/// The run as Maka reads it: immutable rows in `event_seq` order, then its partial
/// snapshots (their position does not matter to classification or the flags).
fn fixture_run_events(
    db: &rusqlite::Connection,
    session: &str,
    run: &str,
) -> Result<Vec<RuntimeEvent>, String> {
    let mut events = Vec::new();
    for sql in [
        "SELECT payload_json FROM runtime_events WHERE session_id = ?1 AND run_id = ?2 \
         ORDER BY event_seq",
        "SELECT payload_json FROM runtime_partial_snapshots WHERE session_id = ?1 AND run_id = ?2",
    ] {
        let mut stmt = db.prepare(sql).map_err(|e| e.to_string())?;
        let payloads = stmt
            .query_map([session, run], |r| r.get::<_, String>(0))
            .map_err(|e| e.to_string())?;
        for payload in payloads {
            let payload = payload.map_err(|e| e.to_string())?;
            events.push(decode_event_text(&payload).map_err(|e| e.to_string())?);
        }
    }
    Ok(events)
}

fn fixture_header(
    db: &rusqlite::Connection,
    session: &str,
    run: &str,
) -> Result<RunHeaderView, String> {
    let record: String = db
        .query_row(
            "SELECT record_json FROM core_agent_runs WHERE session_id = ?1 AND run_id = ?2",
            [session, run],
            |r| r.get(0),
        )
        .map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_str(&record).map_err(|e| e.to_string())?;
    header_view(&v)
}

fn check_fixture_runs(dir: &std::path::Path) -> Result<usize, String> {
    let verdict = common::verdict(dir);
    let db = open_fixture(dir)?;
    let mut checked = 0;
    for run in verdict["runs"].as_array().ok_or("no runs")? {
        // Runs Maka cannot read (an undecodable row) have no classification.
        let Some(expected_kind) = run["terminalLedgerClassification"].as_str() else {
            continue;
        };
        let session = run["sessionId"].as_str().ok_or("no sessionId")?;
        let run_id = run["runId"].as_str().ok_or("no runId")?;
        let header = fixture_header(&db, session, run_id)?;
        let events = fixture_run_events(&db, session, run_id)?;
        let c = classify_terminal_ledger(&header, &events);
        let v = terminal_verdict(&header, &events);
        let got = json!({
            "kind": c.kind.as_str(),
            "terminalEventIds": ids(&c.terminal_event_ids),
            "hasTerminalRuntimeEvent": v.has_terminal_runtime_event,
            "stuckRunning": v.stuck_running,
            "headerTerminalWithoutEvent": v.header_terminal_without_event,
            "eventTerminalButHeaderOpen": v.event_terminal_but_header_open,
        });
        let want = json!({
            "kind": expected_kind,
            "terminalEventIds": run["terminalEventIds"],
            "hasTerminalRuntimeEvent": run["hasTerminalRuntimeEvent"],
            "stuckRunning": run["stuckRunning"],
            "headerTerminalWithoutEvent": run["headerTerminalWithoutEvent"],
            "eventTerminalButHeaderOpen": run["eventTerminalButHeaderOpen"],
        });
        if got != want {
            return Err(format!("run {run_id}: {got}, Maka {want}"));
        }
        checked += 1;
    }
    Ok(checked)
}

/// The real fixture workspaces: every readable run classifies as Maka's verdict says.
#[test]
fn fixture_workspaces_run_classification() {
    let dirs = common::real_fixtures();
    let mut failures = Vec::new();
    let mut runs = 0;
    for dir in &dirs {
        match check_fixture_runs(dir) {
            Ok(n) => runs += n,
            Err(e) => failures.push(format!("{}: {e}", dir.display())),
        }
    }
    common::assert_no_failures(&failures, "fixtures fail");
    assert!(runs >= 60, "only {runs} runs checked");
}
