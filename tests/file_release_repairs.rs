//! Repairs on files of Maka v0.1.2 and v0.1.3, which keep each session's transcript
//! in `sessions/<id>/session.jsonl` beside the database (see
//! `tests/common/file_release.rs` for how those workspaces are built from a v0.1.5
//! fixture and the release's schema dump).

mod common;

use std::path::Path;

use common::file_release::{build, dump, schema, stuck_runs, tree};
use common::writing::assert_after_is_clear;
use common::Ws;
use serde_json::Value;

const TAGS: [&str; 2] = ["v0.1.2", "v0.1.3"];
const STUCK: &str = "releases/v0.1.5/stuck-running";
const STUCK_SESSION: &str = "33b321b2-cfd6-4919-804d-56e0f77082c9";
const STUCK_RUN: &str = "7c915657-d56f-4eea-b1ba-90ba0fbff9a2";
const STUCK_TURN: &str = "eeac9026-92a7-4356-a723-402c7f5fbdee";
const ORPHAN: &str = "releases/v0.1.5/orphan-response";

fn json(out: &common::Output) -> Value {
    assert_eq!(out.status, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// `doctor <command> --out <out> --apply --no-backup --format json`: its JSON.
fn apply_no_backup_into(ws: &Ws, command: &str, out: &Path) -> Value {
    let out = out.to_str().unwrap();
    json(&ws.doctor(
        command,
        &["--out", out, "--apply", "--no-backup", "--format", "json"],
    ))
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
        let dry = json(&ws.doctor("finalize-runs", &["--project-header", "--format", "json"]));
        assert_eq!(dry["plan"][0]["run_id"], STUCK_RUN, "{tag}");
        assert_eq!(dry["plan"][0]["transcript_file"], file.to_str().unwrap());
        assert_eq!(dry["plan"][0]["ordinal"], Value::Null, "no ordinal table");
        assert_eq!(dry["schema_basis"]["releases"][0], tag);
        assert_eq!(std::fs::read(&file).unwrap(), before);

        let doc = json(&ws.doctor(
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
        let again = json(&ws.doctor(
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
    let doc = json(&ws.doctor(
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
    let doc = json(&ws.doctor(
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
    let doc = json(&ws.doctor(
        "finalize-runs",
        &["--apply", "--no-backup", "--format", "json"],
    ));
    assert_eq!(doc["plan"][0]["run_id"], STUCK_RUN);
    assert!(!file.exists());
    assert_eq!(schema(&ws.db()), schema_before);
}

fn dirs(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Quarantine moves the damaged session's rows into its bundle and its folder beside
/// it (checked, then removed from `sessions/`); the gate clears and nothing is added
/// under `sessions/`. Restore puts every row back table by table and every file byte
/// for byte.
#[test]
fn quarantine_moves_the_session_folder_and_restore_puts_it_back() {
    for tag in TAGS {
        let ws = build(tag, ORPHAN, None);
        let sessions = ws.root().join("sessions");
        let rows_before = dump(&ws.db());
        let files_before = tree(&sessions);
        let dirs_before = dirs(&sessions);
        let schema_before = schema(&ws.db());
        let out = ws.dir.path().join("bundles");
        let out_arg = out.to_str().unwrap().to_owned();

        let dry = json(&ws.doctor("quarantine", &["--out", &out_arg, "--format", "json"]));
        assert_eq!(dry["apply_refusal"], Value::Null, "{tag}: {dry}");
        assert_eq!(dry["before"]["tool_writes_refused"], true, "{tag}");
        let s = &dry["sessions"][0];
        let id = s["session_id"].as_str().unwrap().to_owned();
        let f = &s["session_files"];
        assert_eq!(f["folder"], sessions.join(&id).to_str().unwrap());
        let copy = out.join(format!("{id}.files"));
        assert_eq!(f["moved_to"], copy.to_str().unwrap());
        assert_eq!(f["files"][0]["path"], "session.jsonl");
        assert!(!out.exists(), "a dry run creates nothing");

        let doc = json(&ws.doctor(
            "quarantine",
            &["--out", &out_arg, "--apply", "--format", "json"],
        ));
        assert_eq!(doc["applied"], true);
        assert_after_is_clear(&doc, tag);
        assert!(!sessions.join(&id).exists(), "{tag}: the folder moved");
        let mut expected_dirs = dirs_before.clone();
        expected_dirs.retain(|d| *d != id);
        assert_eq!(
            dirs(&sessions),
            expected_dirs,
            "{tag}: nothing added under sessions/"
        );
        let moved: std::collections::BTreeMap<String, Vec<u8>> = files_before
            .iter()
            .filter_map(|(p, b)| {
                p.strip_prefix(&format!("{id}/"))
                    .map(|rest| (rest.to_owned(), b.clone()))
            })
            .collect();
        assert_eq!(tree(&copy), moved, "{tag}: the copy is the folder");
        assert_eq!(schema(&ws.db()), schema_before, "{tag}");
        let tombstone_columns: i64 = ws
            .conn()
            .query_row(
                "SELECT count(*) FROM pragma_table_info('session_metadata_tombstones')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let tombstoned: i64 = ws
            .conn()
            .query_row(
                "SELECT count(*) FROM session_metadata_tombstones WHERE session_id = ?1",
                [&id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            (tombstone_columns, tombstoned),
            (if tag == "v0.1.2" { 2 } else { 4 }, 1)
        );

        let bundle = out.join(format!("{id}.bundle.json"));
        let bundle_arg = bundle.to_str().unwrap().to_owned();
        let dry = json(&ws.doctor("restore", &[&bundle_arg, "--format", "json"]));
        assert_eq!(
            dry["sessions"][0]["session_files"]["from"],
            copy.to_str().unwrap()
        );
        assert!(!sessions.join(&id).exists(), "a dry run puts nothing back");
        let doc = json(&ws.doctor("restore", &[&bundle_arg, "--apply", "--format", "json"]));
        assert_eq!(doc["applied"], true);
        assert_eq!(
            tree(&sessions),
            files_before,
            "{tag}: every file back, byte for byte"
        );
        let rows_after = dump(&ws.db());
        for (table, rows) in &rows_before {
            assert_eq!(rows_after.get(table), Some(rows), "{tag}: table {table}");
        }
        assert_eq!(rows_after.len(), rows_before.len());
        assert_eq!(schema(&ws.db()), schema_before, "{tag}");
    }
}

/// A bundle directory inside `sessions/` would make v0.1.2 and v0.1.3 refuse to open
/// the workspace: refused with exit 2 before anything is created.
#[test]
fn a_bundle_directory_inside_sessions_is_refused() {
    let ws = build("v0.1.3", ORPHAN, None);
    let sessions = ws.root().join("sessions");
    let files_before = tree(&sessions);
    let listing = dirs(&ws.root());
    for out in [
        sessions.join("q"),
        sessions.clone(),
        sessions.join("a/../b"),
    ] {
        let out_arg = out.to_str().unwrap().to_owned();
        for apply in [false, true] {
            let mut args = vec!["--out", out_arg.as_str()];
            if apply {
                args.push("--apply");
            }
            let r = ws.doctor("quarantine", &args);
            assert_eq!(r.status, 2, "{}: {}", out.display(), r.stderr);
            assert!(r.stdout.is_empty());
            assert!(
                r.stderr.contains("inside") && r.stderr.contains("hint:"),
                "{}",
                r.stderr
            );
        }
    }
    let r = ws.doctor(
        "repair",
        &["--out", sessions.join("q").to_str().unwrap(), "--apply"],
    );
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert_eq!(tree(&sessions), files_before);
    assert_eq!(dirs(&ws.root()), listing, "no backup, no bundle directory");
}

/// Restore refuses a session whose folder is back in `sessions/` with other files,
/// and a bundle whose folder copy differs from what it records; nothing is changed.
#[test]
fn restore_refuses_a_folder_in_the_way_or_a_changed_copy() {
    let ws = build("v0.1.2", ORPHAN, None);
    let out = ws.dir.path().join("bundles");
    let doc = apply_no_backup_into(&ws, "quarantine", &out);
    let id = doc["sessions"][0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let bundle = out.join(format!("{id}.bundle.json"));
    let bundle_arg = bundle.to_str().unwrap().to_owned();
    let rows = dump(&ws.db());
    let squatter = ws.root().join("sessions").join(&id);
    std::fs::create_dir(&squatter).unwrap();
    std::fs::write(squatter.join("session.jsonl"), "{}\n").unwrap();
    let r = ws.doctor("restore", &[&bundle_arg, "--apply", "--no-backup"]);
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);
    std::fs::remove_dir_all(&squatter).unwrap();
    let copy = out.join(format!("{id}.files")).join("session.jsonl");
    let mut bytes = std::fs::read(&copy).unwrap();
    bytes.push(b'\n');
    std::fs::write(&copy, bytes).unwrap();
    let r = ws.doctor("restore", &[&bundle_arg, "--apply", "--no-backup"]);
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(r.stderr.contains("differs"), "{}", r.stderr);
    assert!(!squatter.exists());
    assert_eq!(dump(&ws.db()), rows);
}

/// Excision on v0.1.2 and v0.1.3 files: only the damaged event goes (those releases
/// have no ordinal table), in their own schema; session files and the session's rows
/// are untouched; restore puts the event back exactly.
#[test]
fn excise_removes_only_the_event_and_leaves_the_session_files() {
    for tag in TAGS {
        let ws = build(tag, ORPHAN, None);
        let sessions = ws.root().join("sessions");
        let rows_before = dump(&ws.db());
        let files_before = tree(&sessions);
        let schema_before = schema(&ws.db());
        let out = ws.dir.path().join("bundles");
        let doc = apply_no_backup_into(&ws, "excise", &out);
        assert_eq!(doc["applied"], true, "{tag}: {doc}");
        assert_after_is_clear(&doc, tag);
        assert_eq!(
            doc["sessions"][0]["rows"],
            serde_json::json!({"runtime_events": 1}),
            "{tag}"
        );
        assert_eq!(schema(&ws.db()), schema_before, "{tag}: schema");
        assert_eq!(tree(&sessions), files_before, "{tag}: session files");
        let after = dump(&ws.db());
        for (t, rows) in &rows_before {
            if t == "runtime_events" {
                assert_eq!(after[t].len() + 1, rows.len(), "{tag}");
            } else {
                assert_eq!(&after[t], rows, "{tag}: {t}");
            }
        }
        let bundle = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .next()
            .unwrap();
        let o = ws.doctor(
            "restore",
            &["--apply", "--no-backup", bundle.to_str().unwrap()],
        );
        assert_eq!(o.status, 0, "{tag}: {}", o.stderr);
        assert_eq!(dump(&ws.db()), rows_before, "{tag}: restored exactly");
    }
}
