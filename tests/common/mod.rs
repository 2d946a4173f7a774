//! Helpers shared by the tests: run the built binary with a clean environment, copy
//! fixtures, compare files and outputs. Each helper lives here once.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// `fixtures/stuck-running`: the session of its stuck run, the run, its turn.
pub const STUCK_SESSION: &str = "f71d0584-d4e4-474b-b6a6-a3455384ac70";
pub const STUCK_RUN: &str = "5b259680-b628-4ad9-8113-0fc667710889";
pub const STUCK_TURN: &str = "d9fb606e-b1e2-42ad-bb6d-81438147b7c6";

pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `wsledger` with `args`, no inherited WSLEDGER_* variables, no colour.
pub fn wsledger(args: &[&str]) -> Output {
    wsledger_env(args, &[])
}

/// [`wsledger`] with extra environment variables.
pub fn wsledger_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_wsledger"))
        .args(args)
        .env_remove("WSLEDGER_WORKSPACE")
        .env_remove("WSLEDGER_MAKA")
        .env("NO_COLOR", "1")
        .env("COLUMNS", "120")
        .envs(env.iter().copied())
        .output()
        .expect("run wsledger");
    Output {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `check` on every line of a JSONL vector file: the number of lines, and a
/// failure for each failing line, named by its vector's `name`.
pub fn check_vectors(
    text: &str,
    check: impl Fn(&serde_json::Value) -> Result<(), String>,
) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut lines = 0;
    for line in text.lines() {
        lines += 1;
        let v: serde_json::Value = serde_json::from_str(line).expect("vector line is JSON");
        let name = v["name"].as_str().unwrap_or("<unnamed>").to_owned();
        if let Err(e) = check(&v) {
            failures.push(format!("{name}: {e}"));
        }
    }
    (lines, failures)
}

/// Fails when there is any failure: how many (`<n> <what>:`), then each on a line of
/// its own.
pub fn assert_no_failures(failures: &[String], what: &str) {
    assert!(
        failures.is_empty(),
        "{} {what}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A fixture workspace's database, read-only and immutable.
pub fn open_fixture(dir: &Path) -> Result<rusqlite::Connection, String> {
    use rusqlite::OpenFlags;
    let uri = format!(
        "file:{}?mode=ro&immutable=1",
        dir.join("runtime.sqlite").display()
    );
    rusqlite::Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .map_err(|e| e.to_string())
}

/// Each line of an NDJSON text, parsed.
pub fn ndjson_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The codes of a scan report's findings, in order.
pub fn finding_codes(doc: &serde_json::Value) -> Vec<&str> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

/// The findings of a scan report's JSON whose code is `code`, in order.
pub fn findings_with<'a>(doc: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .collect()
}

/// `(item[a], item[b])` of each item, as text (both must be strings).
pub fn text_pairs<'a>(
    items: impl IntoIterator<Item = &'a serde_json::Value>,
    a: &str,
    b: &str,
) -> Vec<(String, String)> {
    items
        .into_iter()
        .map(|x| {
            (
                x[a].as_str().unwrap().to_owned(),
                x[b].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The rows a quarantine of `session` would move, counted per table, the tables it
/// reaches no row of left out: what the diagnosis must say it sets aside.
pub fn rows_set_aside(
    ws: &wsledger::db::Workspace,
    session: &str,
) -> Result<std::collections::BTreeMap<String, usize>, wsledger::db::DbError> {
    Ok(ws
        .deletion(session)?
        .counts()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect())
}

/// `doctor scan --format json -w <ws>`.
pub fn scan_json_args(ws: &Path) -> [&str; 6] {
    [
        "doctor",
        "scan",
        "--format",
        "json",
        "-w",
        ws.to_str().unwrap(),
    ]
}

/// Every real fixture workspace directory.
pub fn real_fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("fixtures")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("verdict.json").exists())
        .collect();
    v.sort();
    v
}

/// Maka's own word on a fixture workspace: its `verdict.json`.
pub fn verdict(dir: &Path) -> serde_json::Value {
    let path = dir.join("verdict.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `(code, event id, operation id, tool call id)` of a scanner issue.
pub type Issue = (String, String, Option<String>, Option<String>);

/// The scanner issues of a verdict's `wholeFile`, in Maka's order; `None` when it
/// lists none.
pub fn makas_issues(verdict: &serde_json::Value) -> Option<Vec<Issue>> {
    let issues = verdict["wholeFile"]["issues"].as_array()?;
    Some(
        issues
            .iter()
            .map(|i| {
                (
                    i["code"].as_str().unwrap().to_owned(),
                    i["eventId"].as_str().unwrap().to_owned(),
                    i["operationId"].as_str().map(str::to_owned),
                    i["toolCallId"].as_str().map(str::to_owned),
                )
            })
            .collect(),
    )
}

/// The scanner issues of a scan, as [`makas_issues`] gives Maka's.
pub fn scanner_issues(report: &wsledger::scan::ScanReport) -> Vec<Issue> {
    report
        .issues
        .iter()
        .map(|i| {
            (
                i.code.as_str().to_owned(),
                i.event_id.to_string(),
                i.operation_id.as_ref().map(ToString::to_string),
                i.tool_call_id.as_ref().map(ToString::to_string),
            )
        })
        .collect()
}

/// A file the tests generate (`path`, e.g. a catalog), compared with `want`: written
/// first when `WSLEDGER_WRITE_CATALOG` is set. `from` says what it is generated from,
/// `test` the test file that regenerates it. Returns the file's text.
pub fn generated_file(path: &str, want: &str, from: &str, test: &str) -> String {
    if std::env::var_os("WSLEDGER_WRITE_CATALOG").is_some() {
        std::fs::write(path, want).unwrap();
    }
    let have = std::fs::read_to_string(path).unwrap();
    assert!(
        have == want,
        "{path} differs from {from}; regenerate with \
         WSLEDGER_WRITE_CATALOG=1 cargo test --test {test}"
    );
    have
}

/// A fresh temporary directory holding a copy of `<workspace>/runtime.sqlite` alone:
/// the directory and the copy's path.
pub fn copy_db(workspace: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.sqlite");
    std::fs::copy(workspace.join("runtime.sqlite"), &db).unwrap();
    (dir, db)
}

/// Copies a fixture workspace into a fresh temporary directory.
pub fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new("fixtures").join(name);
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            continue; // e.g. `recovered-by-release/` beside a release fixture
        }
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let path = dir.path().to_path_buf();
    (dir, path)
}

/// SHA-256 of a file's bytes (hex), or "absent".
pub fn file_hash(p: &Path) -> String {
    use sha2::{Digest, Sha256};
    match std::fs::read(p) {
        Ok(b) => hex::encode(Sha256::digest(b)),
        Err(_) => "absent".into(),
    }
}

/// The path of a database's `-wal`.
pub fn wal(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// The names in a directory, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// SQLite's `PRAGMA integrity_check` passes.
pub fn integrity_ok(db: &Path) -> bool {
    let c = rusqlite::Connection::open(db).unwrap();
    let r: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    r == "ok"
}

/// A command's stderr, as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON on stdout of a command that succeeded.
pub fn json_of(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Writes Maka's storage-root marker into `dir` (a workspace directory).
pub fn write_marker(dir: &Path, root_id: &str) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).unwrap();
    std::fs::write(
        dir.join(".maka-storage-root.json"),
        format!(
            r#"{{"schemaVersion":1,"kind":"interactive","rootId":"{root_id}","rootIdentity":{{"dev":"{}","ino":"{}"}}}}"#,
            m.dev(),
            m.ino()
        ),
    )
    .unwrap();
}

/// Compares `actual` with the committed snapshot `tests/snapshots/<name>`, or rewrites
/// it when `UPDATE_SNAPSHOTS=1`.
pub fn snapshot(name: &str, actual: &str) {
    let path = Path::new("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1)", path.display()));
    if want != actual {
        let line = want
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the snapshot at line {}:\n  want: {:?}\n  got:  {:?}",
            path.display(),
            line + 1,
            want.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

pub mod crash;
pub mod file_release;
pub mod finalize;
#[path = "../../benches/common/maka_bench.rs"]
pub mod maka_bench;
pub mod maka_tests;
pub mod newer;
pub mod spine;
pub mod writing;
pub mod ws;

pub use ws::Ws;
