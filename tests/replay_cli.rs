//! `wsledger replay` end to end: exit statuses, output shapes, export and bundle
//! replay, read-only access through the session indexes, an edited tool projection,
//! and output snapshots.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{findings_with, names, ndjson_lines, snapshot};
use serde_json::Value;
use sha2::{Digest, Sha256};
use wsledger::db::session::SESSION_QUERIES;
use wsledger::db::Workspace;

const HEALTHY: &str = "8e8398b5-d6f0-4e87-a546-02fb76b5e878";
const ORPHAN: &str = "ddd31307-aa5d-4265-95ff-3bf0ff88f6ab";
const UNDECODABLE: &str = "5c065df1-678b-447a-9dce-9f2656fe3d13";

fn wsledger(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wsledger"))
        .args(args)
        .env("COLUMNS", "100")
        .env_remove("NO_COLOR")
        .env_remove("WSLEDGER_WORKSPACE")
        .output()
        .unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn json_out(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

/// `replay --format <format> --bundle <bundles>`.
fn replay_bundles(format: &str, bundles: &[&str]) -> Output {
    let mut argv = vec!["replay", "--format", format, "--bundle"];
    argv.extend(bundles);
    wsledger(&argv)
}

fn replay_json(ws: &str, session: &str) -> (i32, Value) {
    let o = wsledger(&["replay", "-w", ws, "--session", session, "--format", "json"]);
    (code(&o), json_out(&o))
}

#[test]
fn exit_status_follows_divergences_and_errors() {
    let (c, doc) = replay_json("fixtures/healthy", HEALTHY);
    assert_eq!(c, 0);
    assert_eq!(doc["summary"]["divergences"], 0);
    assert_eq!(doc["schema_version"], 1);
    let (c, doc) = replay_json("fixtures/orphan-response", ORPHAN);
    assert_eq!(c, 1);
    assert_eq!(doc["summary"]["divergence_codes"]["result_without_call"], 1);
    // A damaged session never exits 2: the undecodable row is a divergence.
    let (c, doc) = replay_json("fixtures/damage-undecodable-row", UNDECODABLE);
    assert_eq!(c, 1);
    assert_eq!(doc["summary"]["divergence_codes"]["event_undecodable"], 1);
    assert!(doc["summary"]["steps"].as_u64().unwrap() > 10);

    // Unknown session: exit 2, nothing on stdout, the nearest ids in the hint.
    let o = wsledger(&[
        "replay",
        "-w",
        "fixtures/healthy",
        "--session",
        "8e8398b5-0000",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 2);
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(
        err.starts_with("error: session `8e8398b5-0000` not found"),
        "{err}"
    );
    let hint = err.lines().find(|l| l.starts_with("hint: ")).unwrap();
    assert!(
        hint.starts_with(&format!("hint: nearest session ids: {HEALTHY}")),
        "{hint}"
    );
    // Unknown run.
    let o = wsledger(&[
        "replay",
        "-w",
        "fixtures/healthy",
        "--session",
        HEALTHY,
        "--run",
        "nope",
    ]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("has no run `nope`"));
    // Not a workspace.
    let o = wsledger(&["replay", "-w", "fixtures/none", "--session", HEALTHY]);
    assert_eq!(code(&o), 2);
    // --session or --bundle is required.
    let o = wsledger(&["replay", "-w", "fixtures/healthy"]);
    assert_eq!(code(&o), 2);
}

#[test]
fn run_filter_keeps_one_run_and_its_divergences() {
    let (_, full) = replay_json("fixtures/orphan-response", ORPHAN);
    let runs = full["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    // The run without damage exits 0 on its own; the damaged one 1.
    for run in runs {
        let id = run["run_id"].as_str().unwrap();
        let o = wsledger(&[
            "replay",
            "-w",
            "fixtures/orphan-response",
            "--session",
            ORPHAN,
            "--run",
            id,
            "--format",
            "json",
        ]);
        let doc = json_out(&o);
        assert_eq!(doc["runs"].as_array().unwrap().len(), 1);
        assert_eq!(doc["runs"][0], *run);
        let diverged = !run["divergences"].as_array().unwrap().is_empty();
        assert_eq!(code(&o), i32::from(diverged));
    }
}

#[test]
fn ndjson_is_steps_and_divergences_then_one_summary() {
    let o = wsledger(&[
        "replay",
        "-w",
        "fixtures/orphan-response",
        "--session",
        ORPHAN,
        "--format",
        "ndjson",
    ]);
    assert_eq!(code(&o), 1);
    let lines = ndjson_lines(&stdout(&o));
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(*types.last().unwrap(), "summary");
    assert!(types[..types.len() - 1]
        .iter()
        .all(|t| *t == "step" || *t == "divergence"));
    assert_eq!(types.iter().filter(|t| **t == "divergence").count(), 2);
    let summary = &lines.last().unwrap()["data"];
    assert_eq!(summary["summary"]["divergences"], 2);
    assert!(summary["runs"][0].get("steps").is_none());
    let (_, doc) = replay_json("fixtures/orphan-response", ORPHAN);
    assert_eq!(
        types.iter().filter(|t| **t == "step").count() as u64,
        doc["summary"]["steps"].as_u64().unwrap()
    );
}

fn sha256(p: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

#[test]
fn export_then_bundle_replays_like_the_database_and_reads_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new("fixtures/orphan-response");
    let db = fixture.join("runtime.sqlite");
    let (hash, files) = (sha256(&db), names(fixture));
    let bundle = dir.path().join("orphan.json");
    let o = wsledger(&[
        "replay",
        "-w",
        "fixtures/orphan-response",
        "--session",
        ORPHAN,
        "--export",
        bundle.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("wrote session bundle"));
    let from_db = json_out(&o);
    // The database file and its directory are exactly as before.
    assert_eq!(sha256(&db), hash);
    assert_eq!(names(fixture), files);

    let o = wsledger(&[
        "replay",
        "--bundle",
        bundle.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 1);
    let mut from_bundle = json_out(&o);
    assert_eq!(from_bundle["source"], bundle.to_str().unwrap());
    from_bundle["source"] = from_db["source"].clone();
    assert_eq!(from_bundle, from_db);

    // The bundle document: format, version, schema, tables of rows.
    let b: Value = serde_json::from_str(&std::fs::read_to_string(&bundle).unwrap()).unwrap();
    assert_eq!(b["format"], "wsledger.session-bundle");
    assert_eq!(b["version"], 1);
    assert_eq!(b["session_id"], ORPHAN);
    assert_eq!(b["schema"]["user_version"], 12);
    assert_eq!(b["schema"]["registry"]["runtime"], 12);
    let events = b["tables"]["runtime_events"].as_array().unwrap();
    assert_eq!(events.len(), 23);
    assert!(events[0]["event_seq"].is_i64());
    assert!(events[0]["payload_json"].is_string());
    let ops = b["tables"]["tool_operations"].as_array().unwrap();
    assert_eq!(ops.len(), 3);
    assert!(b["tables"]["session_metadata"][0]["last_message_at"].is_i64());
}

#[test]
fn many_bundles_give_one_result_each_and_do_not_stop_at_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let healthy = dir.path().join("healthy.json");
    let orphan = dir.path().join("orphan.json");
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"format\":\"something else\"}").unwrap();
    for (ws, s, f) in [
        ("fixtures/healthy", HEALTHY, &healthy),
        ("fixtures/orphan-response", ORPHAN, &orphan),
    ] {
        let o = wsledger(&[
            "replay",
            "-w",
            ws,
            "--session",
            s,
            "--export",
            f.to_str().unwrap(),
            "-q",
        ]);
        assert!(code(&o) <= 1);
    }
    let missing = dir.path().join("missing.json");
    let args = [
        healthy.to_str().unwrap(),
        broken.to_str().unwrap(),
        orphan.to_str().unwrap(),
        missing.to_str().unwrap(),
    ];
    let o = replay_bundles("json", &args);
    assert_eq!(code(&o), 2);
    let doc = json_out(&o);
    assert_eq!(doc["schema_version"], 1);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    for (r, p) in results.iter().zip(args) {
        assert_eq!(r["path"], p);
    }
    assert_eq!(results[0]["status"], 0);
    assert!(results[0]["error"].is_null());
    assert_eq!(results[0]["session_id"], HEALTHY);
    assert_eq!(results[1]["status"], 2);
    assert!(results[1]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not a wsledger session bundle"));
    assert_eq!(results[2]["status"], 1);
    assert_eq!(results[2]["summary"]["divergences"], 2);
    assert_eq!(results[3]["status"], 2);

    // Without a failing input the status is the worst check: 1.
    let o = replay_bundles(
        "json",
        &[healthy.to_str().unwrap(), orphan.to_str().unwrap()],
    );
    assert_eq!(code(&o), 1);
    // NDJSON of several bundles: every record names its bundle.
    let o = replay_bundles(
        "ndjson",
        &[healthy.to_str().unwrap(), broken.to_str().unwrap()],
    );
    assert_eq!(code(&o), 2);
    let lines = ndjson_lines(&stdout(&o));
    assert!(lines.iter().all(|l| l["path"].is_string()));
    assert_eq!(lines.last().unwrap()["type"], "error");
    assert_eq!(lines.iter().filter(|l| l["type"] == "summary").count(), 1);
}

#[test]
fn every_session_query_goes_through_an_index() {
    let ws = Workspace::open_read_only(Path::new("fixtures/healthy/runtime.sqlite")).unwrap();
    for (table, sql) in SESSION_QUERIES {
        let plan = ws.query_plan(sql).unwrap();
        assert!(
            plan.iter().any(|l| l.starts_with("SEARCH"))
                && !plan.iter().any(|l| l.starts_with("SCAN")),
            "{table}: {sql}\n{plan:?}"
        );
    }
}

/// A copy of a real fixture's database in a temporary directory, for edits.
fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    common::copy_db(&Path::new("fixtures").join(name))
}

fn edit(db: &Path, sql: &str) {
    let c = rusqlite::Connection::open(db).unwrap();
    let n = c.execute(sql, []).unwrap();
    assert_eq!(n, 1, "{sql}");
    c.pragma_update(None, "wal_checkpoint", "TRUNCATE").ok();
}

fn divergences(doc: &Value) -> Vec<Value> {
    let mut v: Vec<Value> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["divergences"].as_array().unwrap().clone())
        .collect();
    v.extend(doc["divergences"].as_array().unwrap().clone());
    v
}

#[test]
fn an_edited_tool_projection_shows_exactly_that_divergence() {
    let (_, before) = replay_json("fixtures/healthy", HEALTHY);
    // An operation of the session: its run's Read call.
    let op: String = {
        let ws = Workspace::open_read_only(Path::new("fixtures/healthy/runtime.sqlite")).unwrap();
        let b = ws
            .export_session(HEALTHY, &wsledger::replay::operation_ids_named)
            .unwrap();
        b.rows("tool_operations")[0]
            .get("operation_id")
            .unwrap()
            .text_lossy()
            .unwrap()
    };

    // A wrong current_state.
    let (dir, db) = copy_fixture("healthy");
    edit(
        &db,
        &format!(
            "UPDATE tool_operations SET current_state = 'prepared' WHERE operation_id = '{op}'"
        ),
    );
    let ws = dir.path().to_str().unwrap();
    let (c, after) = replay_json(ws, HEALTHY);
    assert_eq!(c, 1);
    let d = divergences(&after);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0]["code"], "tool_operation_mismatch");
    assert_eq!(d[0]["operation_id"], op.as_str());
    assert_eq!(d[0]["field"], "current_state");
    assert_eq!(d[0]["stored"], "prepared");
    assert_eq!(d[0]["implied"], "outcome_committed");
    // Nothing else changed: same steps, pairing and notes as the original.
    for (a, b) in after["runs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(before["runs"].as_array().unwrap())
    {
        assert_eq!(a["steps"], b["steps"]);
        assert_eq!(a["pairing"], b["pairing"]);
        assert_eq!(a["notes"], b["notes"]);
    }
    assert_eq!(after["notes"], before["notes"]);
    // `doctor scan` reports the same disagreement (its message format is unchanged).
    let o = wsledger(&["doctor", "scan", ws, "--format", "json"]);
    let scan = json_out(&o);
    let f = findings_with(&scan, "projection_operation_mismatch");
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0]["message"],
        "current_state: stored `prepared`, log implies `outcome_committed`"
    );

    // A deleted row.
    let (dir, db) = copy_fixture("healthy");
    edit(
        &db,
        &format!("DELETE FROM tool_operations WHERE operation_id = '{op}'"),
    );
    let (c, after) = replay_json(dir.path().to_str().unwrap(), HEALTHY);
    assert_eq!(c, 1);
    let d = divergences(&after);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0]["code"], "tool_operation_missing");
    assert_eq!(d[0]["operation_id"], op.as_str());
}

#[test]
fn output_snapshots() {
    for (name, ws, session, want) in [
        ("healthy", "fixtures/healthy", HEALTHY, 0),
        ("orphan-response", "fixtures/orphan-response", ORPHAN, 1),
    ] {
        for (format, ext) in [("text", "txt"), ("json", "json"), ("ndjson", "ndjson")] {
            let o = wsledger(&[
                "replay",
                "-w",
                ws,
                "--session",
                session,
                "--format",
                format,
                "--color",
                "never",
            ]);
            assert_eq!(code(&o), want, "{name} {format}");
            snapshot(&format!("replay-{name}.{ext}"), &stdout(&o));
        }
    }
}

#[test]
fn database_text_is_escaped_and_colour_is_only_on_request() {
    // A user message carrying a terminal escape, a bidi override and a newline.
    let (dir, db) = copy_fixture("healthy");
    edit(
        &db,
        "UPDATE runtime_events SET payload_json = replace(payload_json, \
         'Is the project layout sensible?', 'Is\\u001b[2J the\\u202e layout\\nok?') \
         WHERE session_id = '8e8398b5-d6f0-4e87-a546-02fb76b5e878' AND event_kind = 'text' \
         AND payload_json LIKE '%Is the project layout sensible?%'",
    );
    let ws = dir.path().to_str().unwrap();
    for color in ["never", "always"] {
        let o = wsledger(&["replay", "-w", ws, "--session", HEALTHY, "--color", color]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.contains("Is\\u{1b}[2J the\\u{202e} layout\\nok?"),
            "{out}"
        );
        assert!(!out.contains('\u{202e}'));
        let escapes = out.matches('\x1b').count();
        if color == "never" {
            assert_eq!(escapes, 0);
        } else {
            // Only our own SGR sequences: every ESC starts `ESC[<digits>m`.
            assert!(escapes > 0);
            assert!(out.split('\x1b').skip(1).all(|rest| {
                let body = rest.strip_prefix('[').unwrap_or("");
                let end = body.find('m').unwrap_or(usize::MAX);
                end != usize::MAX && body[..end].chars().all(|c| c.is_ascii_digit())
            }));
        }
    }
}

#[test]
fn docs_document_every_divergence_and_note_code() {
    let doc = std::fs::read_to_string("docs/replay.md").unwrap();
    let section = &doc[doc.find("## `replay`").expect("a `## replay` section")..];
    for (code, meaning) in wsledger::replay::DIVERGENCE_CODES
        .iter()
        .chain(wsledger::replay::NOTE_CODES)
    {
        assert!(
            section.contains(&format!("| `{code}` | {meaning} |")),
            "docs/replay.md lacks {code}"
        );
    }
}
