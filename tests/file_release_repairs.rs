//! Repairs on files of Maka v0.1.2 and v0.1.3, which keep each session's transcript
//! in `sessions/<id>/session.jsonl` beside the database (see
//! `tests/common/file_release.rs` for how those workspaces are built from a v0.1.5
//! fixture and the release's schema dump).

mod common;

use std::path::Path;

use common::file_release::{build, tree, FileReleaseWs};
use serde_json::Value;
use wsledger::doctor::{scan_path, ScanOptions};
use wsledger::scan::runs::RunState;

const TAGS: [&str; 2] = ["v0.1.2", "v0.1.3"];
const STUCK: &str = "releases/v0.1.5/stuck-running";
const STUCK_SESSION: &str = "33b321b2-cfd6-4919-804d-56e0f77082c9";
const STUCK_RUN: &str = "7c915657-d56f-4eea-b1ba-90ba0fbff9a2";
const STUCK_TURN: &str = "eeac9026-92a7-4356-a723-402c7f5fbdee";

/// `wsledger doctor <command> -w <root> <args>` with the test's control namespace.
fn doctor(ws: &FileReleaseWs, command: &str, args: &[&str]) -> common::Output {
    let root = ws.root();
    let mut all = vec!["doctor", command, "-w", root.to_str().unwrap()];
    all.extend_from_slice(args);
    common::wsledger_env(
        &all,
        &[("WSLEDGER_MAKA_CONTROL_DIR", ws.control().to_str().unwrap())],
    )
}

fn json(out: &common::Output) -> Value {
    assert_eq!(out.status, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// Every schema object, as SQLite stores it.
fn schema(db: &Path) -> Vec<(String, String, Option<String>)> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c
        .prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn stuck_runs(db: &Path) -> Vec<String> {
    let all = ScanOptions {
        all_runs: true,
        ..ScanOptions::default()
    };
    scan_path(db, all, &mut |_, _| {})
        .unwrap()
        .runs
        .iter()
        .filter(|r| r.state != RunState::Terminal)
        .map(|r| r.run_id.clone())
        .collect()
}

/// The `turn_state` record main's logic writes into `session_messages` for the same
/// run of the v0.1.5 fixture, when its transcript lacks the failed turn_state too.
fn turn_state_written_on_v015() -> String {
    let (_t, dir) = common::copy_fixture(STUCK);
    let c = rusqlite::Connection::open(dir.join("runtime.sqlite")).unwrap();
    let n = c
        .execute(
            "DELETE FROM session_messages WHERE session_id = ?1 AND message_type = 'turn_state' \
             AND json_extract(record_json, '$.turnId') = ?2 \
             AND json_extract(record_json, '$.status') = 'failed'",
            [STUCK_SESSION, STUCK_TURN],
        )
        .unwrap();
    assert_eq!(n, 1);
    drop(c);
    let root = dir.to_str().unwrap().to_owned();
    let out = common::wsledger(&[
        "doctor",
        "finalize-runs",
        "-w",
        &root,
        "--apply",
        "--no-backup",
        "--project-header",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let c = rusqlite::Connection::open(dir.join("runtime.sqlite")).unwrap();
    c.query_row(
        "SELECT record_json FROM session_messages WHERE session_id = ?1 \
         ORDER BY sequence DESC LIMIT 1",
        [STUCK_SESSION],
        |r| r.get(0),
    )
    .unwrap()
}

/// finalize-runs writes what the release's recovery writes: the terminal event, the
/// header, the run event, the session row with its status columns, and, where the
/// transcript lacks the failed turn_state, exactly one line appended to the session
/// file: the record main writes into `session_messages`, byte for byte.
#[test]
fn finalize_appends_the_turn_state_line_the_release_appends() {
    let expected = turn_state_written_on_v015();
    for tag in TAGS {
        let ws = build(tag, STUCK, Some((STUCK_SESSION, STUCK_TURN)));
        let file = ws.transcript(STUCK_SESSION);
        let before = std::fs::read(&file).unwrap();
        let schema_before = schema(&ws.db());
        // The dry run names the file and writes nothing.
        let dry = json(&doctor(
            &ws,
            "finalize-runs",
            &["--project-header", "--format", "json"],
        ));
        assert_eq!(dry["plan"][0]["run_id"], STUCK_RUN, "{tag}");
        assert_eq!(dry["plan"][0]["transcript_file"], file.to_str().unwrap());
        assert_eq!(dry["plan"][0]["ordinal"], Value::Null, "no ordinal table");
        assert_eq!(dry["schema_basis"]["releases"][0], tag);
        assert_eq!(std::fs::read(&file).unwrap(), before);

        let doc = json(&doctor(
            &ws,
            "finalize-runs",
            &["--project-header", "--apply", "--format", "json"],
        ));
        assert_eq!(doc["applied"], true);
        let after = std::fs::read(&file).unwrap();
        assert!(after.starts_with(&before), "{tag}: only appended");
        let added = String::from_utf8(after[before.len()..].to_vec()).unwrap();
        assert_eq!(added, format!("{expected}\n"), "{tag}");
        assert_eq!(added.matches('\n').count(), 1);
        let rec: Value = serde_json::from_str(added.trim_end()).unwrap();
        assert_eq!(rec["type"], "turn_state");
        assert_eq!(rec["turnId"], STUCK_TURN);
        assert_eq!(rec["status"], "failed");
        assert_eq!(rec["errorClass"], "app_restarted");
        // The backup holds the database and the transcript as they were.
        let backup = doc["backup"].as_str().unwrap();
        assert!(Path::new(backup).exists());
        let copy = Path::new(doc["transcript_backup"].as_str().unwrap())
            .join(STUCK_SESSION)
            .join("session.jsonl");
        assert_eq!(std::fs::read(copy).unwrap(), before);
        // Nothing stuck, no schema object changed, the session row as the release
        // writes it (status columns included).
        assert_eq!(stuck_runs(&ws.db()), Vec::<String>::new(), "{tag}");
        assert_eq!(schema(&ws.db()), schema_before, "{tag}");
        let (status, col_at, payload_at): (String, i64, i64) = ws
            .conn()
            .query_row(
                "SELECT status, status_updated_at, payload_json ->> '$.statusUpdatedAt' \
                 FROM session_metadata WHERE session_id = ?1",
                [STUCK_SESSION],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((status.as_str(), col_at), ("active", payload_at));
        // Run again: nothing to do, the file stays as it is.
        let again = json(&doctor(
            &ws,
            "finalize-runs",
            &["--project-header", "--apply", "--format", "json"],
        ));
        assert_eq!(again["plan"], serde_json::json!([]));
        assert_eq!(std::fs::read(&file).unwrap(), after);
    }
}

/// A transcript that already ends the turn as failed gets nothing; every other
/// session file stays byte-identical.
#[test]
fn finalize_leaves_a_transcript_that_already_has_the_failed_turn_state() {
    let ws = build("v0.1.3", STUCK, None);
    let files = tree(&ws.root().join("sessions"));
    let doc = json(&doctor(
        &ws,
        "finalize-runs",
        &[
            "--project-header",
            "--apply",
            "--no-backup",
            "--format",
            "json",
        ],
    ));
    assert_eq!(doc["plan"][0]["run_id"], STUCK_RUN);
    assert!(doc["plan"][0].get("transcript_file").is_none(), "{doc}");
    assert!(doc.get("transcript_backup").is_none());
    assert_eq!(tree(&ws.root().join("sessions")), files);
    assert_eq!(stuck_runs(&ws.db()), Vec::<String>::new());
}

/// A session whose transcript file is missing: the run that needs a turn_state is
/// left alone (its reason names the file); without --project-header nothing goes to
/// the file, so the run is finalized.
#[test]
fn a_missing_transcript_file_leaves_the_run_alone() {
    let ws = build("v0.1.2", STUCK, Some((STUCK_SESSION, STUCK_TURN)));
    let file = ws.transcript(STUCK_SESSION);
    std::fs::remove_file(&file).unwrap();
    let schema_before = schema(&ws.db());
    let doc = json(&doctor(
        &ws,
        "finalize-runs",
        &["--project-header", "--apply", "--format", "json"],
    ));
    assert_eq!(doc["plan"], serde_json::json!([]));
    let s = &doc["skipped"][0];
    assert_eq!(s["run_id"], STUCK_RUN);
    assert_eq!(s["reason"], "transcript_unavailable");
    let detail = s["detail"].as_str().unwrap();
    assert!(
        detail.contains(file.to_str().unwrap()) && detail.contains("missing"),
        "{detail}"
    );
    assert_eq!(doc["backup"], Value::Null, "nothing to write, no backup");
    assert!(!file.exists(), "never created");
    assert_eq!(stuck_runs(&ws.db()), vec![STUCK_RUN.to_owned()]);
    let doc = json(&doctor(
        &ws,
        "finalize-runs",
        &["--apply", "--no-backup", "--format", "json"],
    ));
    assert_eq!(doc["plan"][0]["run_id"], STUCK_RUN);
    assert!(!file.exists());
    assert_eq!(schema(&ws.db()), schema_before);
}
