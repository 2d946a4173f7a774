//! `wsledger info`: counts, schema, and the owner-lock probe (which creates nothing).

mod common;

use std::process::Command;

use common::copy_fixture;
use serde_json::Value;

const ROOT: &str = "1111111111111111111111111111111111111111111111111111111111111111";

fn info(ws: &std::path::Path, control: &std::path::Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_wsledger"))
        .args(["info", "--format", "json", "-w", ws.to_str().unwrap()])
        .env("WSLEDGER_MAKA_CONTROL_DIR", control)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn info_reports_counts_gate_and_lock_state() {
    let (_tmp, ws) = copy_fixture("corrupt-ledger");
    let control = tempfile::tempdir().unwrap();
    let doc = info(&ws, control.path());
    assert_eq!(doc["events"], 34);
    assert_eq!(doc["sessions"], 2);
    assert_eq!(doc["runs"], 6);
    assert_eq!(doc["user_version"], 12);
    assert_eq!(doc["schema_current"], true);
    assert_eq!(doc["maka_gate"]["tool_writes_refused"], true);
    assert_eq!(doc["owner_lock"], "no_root");

    std::fs::write(ws.join(".maka-storage-root.json"), format!(r#"{{"schemaVersion":1,"kind":"interactive","rootId":"{ROOT}","rootIdentity":{{"dev":"0","ino":"0"}}}}"#)).unwrap();
    let doc = info(&ws, control.path());
    assert_eq!(doc["owner_lock"], "free");
    assert!(
        std::fs::read_dir(control.path()).unwrap().next().is_none(),
        "the probe creates nothing"
    );

    let held = wsledger::lock::acquire(control.path(), &[ROOT.to_owned()]).unwrap();
    let doc = info(&ws, control.path());
    assert_eq!(doc["owner_lock"], "held");
    drop(held);
    let doc = info(&ws, control.path());
    assert_eq!(doc["owner_lock"], "free");
}

#[test]
fn info_says_whether_maka_opens_the_file() {
    let (_tmp, ws) = copy_fixture("healthy");
    let control = tempfile::tempdir().unwrap();
    let doc = info(&ws, control.path());
    assert_eq!(doc["startup"]["opens"], true, "{doc}");
    assert_eq!(doc["startup"]["strict_recovery"]["blocked"], false);

    // A dropped index: Maka refuses to open it.
    let c = rusqlite::Connection::open(ws.join("runtime.sqlite")).unwrap();
    c.execute_batch("DROP INDEX runtime_events_by_run").unwrap();
    drop(c);
    let doc = info(&ws, control.path());
    assert_eq!(doc["startup"]["opens"], false, "{doc}");
    assert_eq!(doc["startup"]["refusal"]["reason"], "schema_object_missing");
    let row = start_up_row(&ws);
    assert!(
        row.contains("REFUSED") && row.contains("schema_object_missing"),
        "{row}"
    );
}

/// The `start-up` row of `wsledger info`'s table.
fn start_up_row(ws: &std::path::Path) -> String {
    let table = common::wsledger(&["info", "-w", ws.to_str().unwrap()]);
    assert_eq!(table.status, 0, "{}", table.stderr);
    table
        .stdout
        .lines()
        .find(|l| l.contains("start-up"))
        .unwrap()
        .to_owned()
}

#[test]
fn info_says_the_start_up_of_a_newer_maka_is_not_known() {
    // A schema newer than every generation wsledger knows: that Maka opens it; what its
    // start-up does is not known, and nothing says it refuses (issue notes, 41).
    let (_tmp, ws) = copy_fixture("healthy");
    let control = tempfile::tempdir().unwrap();
    let c = rusqlite::Connection::open(ws.join("runtime.sqlite")).unwrap();
    c.pragma_update(None, "user_version", 99).unwrap();
    drop(c);
    let doc = info(&ws, control.path());
    assert_eq!(doc["startup"]["opens"], serde_json::Value::Null, "{doc}");
    assert!(doc["startup"]["refusal"].is_null());
    assert_eq!(doc["workspace_release"]["known_from"], "none");
    let row = start_up_row(&ws);
    assert!(
        row.contains("not known: written by a Maka newer than this wsledger (runtime 99")
            && !row.contains("REFUSED"),
        "{row}"
    );
}
