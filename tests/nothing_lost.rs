//! Nothing lost: every read-only command, on every real fixture workspace, in the
//! three states a workspace is found in, leaves the database and its `-wal`
//! byte-identical and creates nothing beside them:
//! - closed (no `-wal`, as Maka leaves it after a clean exit);
//! - crashed (committed frames still in the `-wal`, and its `-shm`);
//! - copied without its `-shm` (committed frames in the `-wal`).
//!
//! Read-only commands: `doctor scan` in every format, with `--integrity` and with
//! expectations; `info`; `doctor finalize-runs` dry runs and `--check`; `doctor
//! quarantine` dry runs; `replay` (text, and JSON with `--export`).

mod common;
mod corpus;

use std::path::{Path, PathBuf};

use common::{file_hash, real_fixtures};

/// A committed change that changes nothing the doctor reads.
const TOUCH: &str = "UPDATE operational_schema_migrations SET applied_at = applied_at";

/// Hashes of the database and `-wal`, and the names in the directory. The `-shm` is
/// SQLite's shared memory: readers may update its read marks, so only its presence
/// is compared.
fn state(ws: &Path) -> (String, String, Vec<String>) {
    let db = ws.join("runtime.sqlite");
    let mut names: Vec<String> = std::fs::read_dir(ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (
        file_hash(&db),
        file_hash(&ws.join("runtime.sqlite-wal")),
        names,
    )
}

/// A session of the workspace (for `replay`).
fn first_session(ws: &Path) -> String {
    let c = rusqlite::Connection::open_with_flags(
        format!("file:{}?immutable=1", ws.join("runtime.sqlite").display()),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    c.query_row(
        "SELECT session_id FROM runtime_events ORDER BY session_id LIMIT 1",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// The read-only command lines (without `--workspace`).
fn commands(side: &Path, session: &str) -> Vec<Vec<String>> {
    let e = side.join("expect.json").to_str().unwrap().to_owned();
    let bundle = side.join("bundle.json").to_str().unwrap().to_owned();
    let v: Vec<Vec<&str>> = vec![
        vec!["doctor", "scan", "--format", "table"],
        vec!["doctor", "scan", "--format", "json"],
        vec!["doctor", "scan", "--format", "ndjson"],
        vec!["doctor", "scan", "--format", "github"],
        vec!["doctor", "scan", "--format", "json", "--integrity"],
        vec!["doctor", "scan", "--write-expect", &e],
        vec!["doctor", "scan", "--expect", &e],
        vec!["info"],
        vec!["info", "--format", "json"],
        vec!["doctor", "finalize-runs"],
        vec!["doctor", "finalize-runs", "--format", "json"],
        vec!["doctor", "finalize-runs", "--format", "ndjson"],
        vec!["doctor", "finalize-runs", "--check"],
        vec!["doctor", "finalize-runs", "--check", "--project-header"],
        vec!["doctor", "quarantine"],
        vec!["doctor", "quarantine", "--format", "json"],
        vec!["replay", "--session", session],
        vec![
            "replay",
            "--session",
            session,
            "--format",
            "json",
            "--export",
            &bundle,
        ],
    ];
    v.into_iter()
        .map(|c| c.into_iter().map(str::to_owned).collect())
        .collect()
}

/// Runs every read-only command on `ws` and checks that nothing changed.
fn check_untouched(label: &str, ws: &Path) {
    let session = first_session(ws);
    let before = state(ws);
    let side = tempfile::tempdir().unwrap();
    for cmd in commands(side.path(), &session) {
        let mut args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        args.extend(["--workspace", ws.to_str().unwrap()]);
        let out = common::wsledger_env(
            &args,
            &[(
                "WSLEDGER_MAKA_CONTROL_DIR",
                side.path().join("control").to_str().unwrap(),
            )],
        );
        assert!(
            out.status == 0 || out.status == 1,
            "{label}: {args:?} exit {}: {}",
            out.status,
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{label}: {}", out.stderr);
        assert_eq!(
            before,
            state(ws),
            "{label}: `wsledger {}` changed the workspace",
            cmd.join(" ")
        );
    }
}

fn fixture_names() -> Vec<String> {
    real_fixtures()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn closed_workspaces_are_left_byte_identical() {
    for name in fixture_names() {
        let (_t, ws) = corpus::fixture(&name);
        check_untouched(&format!("{name} (closed)"), &ws);
        assert!(!ws.join("runtime.sqlite-wal").exists());
        assert!(!ws.join("runtime.sqlite-shm").exists());
    }
}

#[test]
fn crashed_workspaces_with_wal_and_shm_are_left_byte_identical() {
    for name in fixture_names() {
        let (_t, ws) = corpus::committed_wal_of(&name, TOUCH, true);
        check_untouched(&format!("{name} (-wal and -shm)"), &ws);
    }
}

#[test]
fn copied_workspaces_with_wal_without_shm_are_left_byte_identical() {
    for name in fixture_names() {
        let (_t, ws) = corpus::committed_wal_of(&name, TOUCH, false);
        check_untouched(&format!("{name} (-wal, no -shm)"), &ws);
        assert!(!ws.join("runtime.sqlite-shm").exists());
    }
}

/// The committed fixtures themselves: every read-only command straight on
/// `fixtures/`, which must stay exactly as committed.
#[test]
fn the_committed_fixtures_are_never_touched() {
    let dirs: Vec<PathBuf> = real_fixtures();
    let before: Vec<_> = dirs.iter().map(|d| state(d)).collect();
    for d in &dirs {
        let side = tempfile::tempdir().unwrap();
        for cmd in commands(side.path(), &first_session(d)) {
            let mut args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            args.extend(["--workspace", d.to_str().unwrap()]);
            common::wsledger(&args);
        }
    }
    let after: Vec<_> = dirs.iter().map(|d| state(d)).collect();
    assert_eq!(before, after);
}
