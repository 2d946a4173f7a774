//! `doctor scan` on a file Maka refuses to open: exit 1, one finding for one cause,
//! the start-up line before the findings, a plan that says no repair changes it; and
//! a table that stays readable when one cause produces many rows.

mod common;

use std::path::Path;

use common::{finding_codes, findings_with, wsledger, Output};
use serde_json::Value;

/// A copy of a fixture's database (`fixtures/<fixture>/runtime.sqlite`) altered by
/// `sql`, its `-wal` checkpointed away.
fn altered(fixture: &str, sql: &str) -> tempfile::TempDir {
    let (dir, db) = common::copy_db(&Path::new("fixtures").join(fixture));
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(sql).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(c);
    dir
}

/// `doctor scan <dir> --format json`: the output and its JSON.
fn scan_json(dir: &tempfile::TempDir) -> (Output, Value) {
    let out = wsledger(&[
        "doctor",
        "scan",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
    ]);
    let doc = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: exit {}: {}", out.status, out.stderr));
    (out, doc)
}

#[test]
fn a_dropped_table_is_one_refusal_with_a_plan_that_says_so() {
    let dir = altered("healthy", "DROP TABLE tool_journal_events");
    let ws = dir.path().to_str().unwrap();
    let (out, doc) = scan_json(&dir);
    assert_eq!(out.status, 1, "{}", out.stderr);
    let findings = doc["findings"].as_array().unwrap();
    // One cause, one finding: no journal row is reported missing from a missing table.
    assert_eq!(findings.len(), 1, "{findings:?}");
    let f = &findings[0];
    assert_eq!(f["code"], "startup_refused");
    assert_eq!(f["severity"], "error");
    assert_eq!(f["detail"]["reason"], "schema_object_missing");
    assert_eq!(f["detail"]["store"], "runtime");
    assert_eq!(
        f["detail"]["maka_message"],
        "Incomplete operational SQLite schema: missing required schema object \
         index:tool_journal_events_by_operation"
    );
    // The table is derived: the plan's first step puts it back, and the hint says so.
    assert!(
        f["hint"]
            .as_str()
            .unwrap()
            .contains("Step 1 of the plan puts back"),
        "{f}"
    );
    let s = &doc["startup"];
    assert_eq!(s["opens"], false);
    assert_eq!(
        s["refusal"]["object"],
        "index:tool_journal_events_by_operation"
    );
    assert_eq!(s["strict_recovery"]["runs"], false);
    let d = &doc["diagnosis"];
    assert_eq!(d["before"]["startup_blocked"], true);
    assert_eq!(d["after"]["startup_blocked"], false);
    assert_eq!(d["plan"]["steps"][0]["action"], "rederive");
    assert!(d["plan"].get("startup_refused").is_none(), "{}", d["plan"]);
    // A table of primary data is not: no step changes the refusal, and the plan says so.
    let dir = altered("healthy", "DROP TABLE session_messages");
    let (_, doc) = scan_json(&dir);
    let d = &doc["diagnosis"];
    assert_eq!(d["after"]["startup_blocked"], true);
    let words = d["plan"]["startup_refused"].as_str().unwrap();
    assert!(words.contains("cannot put back"), "{words}");
    assert!(words.contains("wsledger info"), "{words}");

    let table = wsledger(&["doctor", "scan", ws]);
    assert_eq!(table.status, 1);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(
        lines[2].starts_with("start-up: REFUSED: "),
        "{}",
        table.stdout
    );
}

#[test]
fn a_newer_schema_is_never_sent_to_an_older_maka() {
    // A Maka newer than main wrote it: its start-up is not known, nothing says Maka
    // refuses it (issue notes, 41), and the hint never points at an older Maka.
    let dir = altered("healthy", "PRAGMA user_version = 13");
    let (out, doc) = scan_json(&dir);
    assert_eq!(out.status, 0);
    assert!(findings_with(&doc, "startup_refused").is_empty());
    assert_eq!(doc["startup"]["opens"], serde_json::Value::Null);
    let f = findings_with(&doc, "schema_newer_than_known")[0];
    let runtime = &f["detail"]["scopes"][0];
    assert_eq!(runtime["scope"], "runtime");
    assert_eq!(runtime["version"], 13);
    assert_eq!(runtime["newest_verified"], 12);
    let hint = f["hint"].as_str().unwrap();
    assert!(hint.contains("Update wsledger"), "{hint}");
    assert!(
        !wsledger::release::advice::advises_schema_surgery(hint),
        "{hint}"
    );
}

#[test]
fn many_rows_of_one_cause_are_folded_unless_verbose() {
    // The journal's rows gone (the table kept): Maka opens the file; 30 rows missing.
    let dir = altered("healthy", "DELETE FROM tool_journal_events");
    let ws = dir.path().to_str().unwrap();
    let (_, doc) = scan_json(&dir);
    assert_eq!(doc["startup"]["opens"], true);
    let n = findings_with(&doc, "projection_journal_missing").len();
    assert!(n > 10, "{n}");
    let rows = |out: &str| {
        out.lines()
            .filter(|l| l.contains("┆ projection_journal_missing"))
            .count()
    };
    let table = wsledger(&["doctor", "scan", ws]);
    assert!(table
        .stdout
        .lines()
        .nth(2)
        .unwrap()
        .starts_with("start-up: ok: "));
    // Five listed, the rest in one row that counts them.
    assert_eq!(rows(&table.stdout), 6, "{}", table.stdout);
    assert!(
        table.stdout.contains(&format!("{} more", n - 5)),
        "{}",
        table.stdout
    );
    let verbose = wsledger(&["doctor", "scan", ws, "--verbose"]);
    assert_eq!(rows(&verbose.stdout), n, "{}", verbose.stdout);
}

#[test]
fn a_newer_build_refusing_for_the_same_object_is_not_a_second_finding() {
    let dir = altered("releases/v0.1.11/healthy", "DROP TABLE tool_journal_events");
    let (out, doc) = scan_json(&dir);
    assert_eq!(out.status, 1);
    assert_eq!(finding_codes(&doc), ["startup_refused"]);
    assert_eq!(doc["startup"]["release"], "v0.1.11");
    // The preview still says main refuses it too.
    let main = &doc["upgrade"]["targets"][0];
    assert_eq!(main["release"], "main");
    assert_eq!(
        main["composition"]["refusal"]["reason"],
        "schema_object_missing"
    );
}

#[test]
fn a_missing_header_table_is_not_one_finding_per_run() {
    // main's core-execution store creates it again: Maka opens the file.
    let dir = altered("healthy", "DROP TABLE core_agent_runs");
    let (_, doc) = scan_json(&dir);
    assert_eq!(doc["startup"]["opens"], true, "{}", doc["startup"]);
    let m = &doc["startup"]["migrations"][0];
    assert_eq!(m["store"], "core_execution");
    assert!(m["recreates"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == "table:core_agent_runs"));
    let findings = doc["findings"].as_array().unwrap();
    assert!(
        findings.iter().all(|f| f["code"] != "run_header_missing"),
        "{findings:?}"
    );
    assert!(findings
        .iter()
        .any(|f| f["code"] == "schema_object_missing"));
}

#[test]
fn a_dropped_sessions_table_is_one_refusal_not_a_warning_per_run() {
    let dir = altered(
        "healthy",
        "PRAGMA foreign_keys = OFF; DROP TABLE session_metadata",
    );
    let (out, doc) = scan_json(&dir);
    assert_eq!(out.status, 1, "{}", out.stderr);
    // Every run lies outside a listed session then: that is the missing table again.
    assert_eq!(finding_codes(&doc), ["startup_refused"]);
    assert_eq!(doc["startup"]["refusal"]["store"], "session_metadata");
}

#[test]
fn a_dropped_table_of_a_version_only_release_is_one_schema_finding() {
    // v0.1.5 checks versions only and opens the file: the missing table is one
    // warning, not one per index of it.
    let dir = altered("releases/v0.1.5/healthy", "DROP TABLE tool_journal_events");
    let (_, doc) = scan_json(&dir);
    assert_eq!(doc["startup"]["release"], "v0.1.5", "{}", doc["startup"]);
    let schema: Vec<&str> = findings_with(&doc, "schema_object_missing")
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert_eq!(schema.len(), 1, "{schema:?}");
    assert!(
        schema[0].contains("`table:tool_journal_events`"),
        "{schema:?}"
    );
}

#[test]
fn finalize_runs_says_start_up_stays_refused() {
    let dir = altered("stuck-running", "DROP TABLE tool_journal_events");
    let ws = dir.path().to_str().unwrap();
    let out = wsledger(&["doctor", "finalize-runs", "--workspace", ws]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("refuses to open this file")
            && out.stderr.contains("finalize-runs does not change that")
            // What is missing is derived: the note names the step that puts it back.
            && out.stderr.contains("wsledger doctor rederive --apply"),
        "{}",
        out.stderr
    );
    // A file Maka opens gets no such note.
    let ok = wsledger(&[
        "doctor",
        "finalize-runs",
        "--workspace",
        "fixtures/stuck-running",
    ]);
    assert!(!ok.stderr.contains("refuses to open"), "{}", ok.stderr);
}
