//! Every repair on a file of every release from v0.1.2 to v0.1.11, including the
//! releases with no real file in `fixtures/` (v0.1.2–v0.1.4, v0.1.6, v0.1.8–v0.1.10):
//! those are built from the release's schema dump with a real release fixture's rows
//! transplanted (`tests/common/file_release.rs`). Each file is recognised as exactly
//! its release; finalize-runs leaves no stuck run, quarantine clears the gate, restore
//! brings every row back; no apply touches a schema object.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::file_release::{build, FileReleaseWs};
use serde_json::Value;
use wsledger::doctor::{scan_path, ScanOptions};
use wsledger::scan::runs::RunState;

const TAGS: [&str; 10] = [
    "v0.1.2", "v0.1.3", "v0.1.4", "v0.1.5", "v0.1.6", "v0.1.7", "v0.1.8", "v0.1.9", "v0.1.10",
    "v0.1.11",
];

/// The real fixture whose rows a `tag` file is built from: the nearest release at or
/// below it that has one (v0.1.7 brings the ordinal table; v0.1.11 drops the session
/// status columns).
fn source(tag: &str, scenario: &str) -> String {
    let minor: u32 = tag.trim_start_matches("v0.1.").parse().unwrap();
    let from = match minor {
        ..=6 => "v0.1.5",
        7..=10 => "v0.1.7",
        _ => "v0.1.11",
    };
    format!("releases/{from}/{scenario}")
}

fn doctor(ws: &FileReleaseWs, command: &str, args: &[&str]) -> common::Output {
    let root = ws.root();
    let mut all = vec!["doctor", command, "-w", root.to_str().unwrap()];
    all.extend_from_slice(args);
    common::wsledger_env(
        &all,
        &[("WSLEDGER_MAKA_CONTROL_DIR", ws.control().to_str().unwrap())],
    )
}

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

/// Every row of every table, as text, table → sorted rows.
fn rows(db: &Path) -> BTreeMap<String, Vec<String>> {
    let c = rusqlite::Connection::open(db).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut out = BTreeMap::new();
    for t in tables {
        let mut stmt = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = stmt.column_count();
        let mut all: Vec<String> = stmt
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        all.sort();
        out.insert(t, all);
    }
    out
}

fn not_terminal(db: &Path) -> usize {
    let all = ScanOptions {
        all_runs: true,
        ..ScanOptions::default()
    };
    scan_path(db, all, &mut |_, _| {})
        .unwrap()
        .runs
        .iter()
        .filter(|r| r.state != RunState::Terminal)
        .count()
}

fn json(out: &common::Output, what: &str) -> Value {
    assert!(
        out.status <= 1,
        "{what}: exit {}: {}",
        out.status,
        out.stderr
    );
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{what}: {e}: {}", out.stdout))
}

#[test]
fn every_release_is_recognised_exactly_and_finalized() {
    for tag in TAGS {
        let ws = build(tag, &source(tag, "stuck-running"), None);
        let info = common::wsledger(&["info", "--format", "json", "-w", ws.db().to_str().unwrap()]);
        let info = json(&info, tag);
        let release = &info["workspace_release"];
        assert_eq!(release["exact"], true, "{tag}: {release}");
        assert!(
            release["matches"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m == tag),
            "{tag}: {release}"
        );
        assert!(
            not_terminal(&ws.db()) > 0,
            "{tag}: nothing stuck to begin with"
        );
        let before = schema(&ws.db());
        let dry = json(
            &doctor(
                &ws,
                "finalize-runs",
                &["--project-header", "--format", "json"],
            ),
            tag,
        );
        assert!(
            dry.get("apply_refusal").is_none_or(Value::is_null),
            "{tag}: {dry}"
        );
        let out = doctor(&ws, "finalize-runs", &["--project-header", "--apply"]);
        assert_eq!(out.status, 0, "{tag}: {}", out.stderr);
        assert_eq!(not_terminal(&ws.db()), 0, "{tag}: a run is still stuck");
        assert_eq!(schema(&ws.db()), before, "{tag}: a schema object changed");
    }
}

#[test]
fn every_release_is_quarantined_and_restored_exactly() {
    for tag in TAGS {
        let ws = build(tag, &source(tag, "orphan-response"), None);
        let db = ws.db();
        let (schema_before, rows_before) = (schema(&db), rows(&db));
        let scan = |what: &str| {
            let out =
                common::wsledger(&["doctor", "scan", "--format", "json", db.to_str().unwrap()]);
            json(&out, what)
        };
        let gate = |v: &Value| v["maka_gate"]["first_issue"].clone();
        assert!(
            !gate(&scan(tag)).is_null(),
            "{tag}: no damage to begin with"
        );
        let out_dir = ws.dir.path().join("bundles");
        let out = out_dir.to_str().unwrap();
        let q = doctor(&ws, "quarantine", &["--apply", "--out", out]);
        assert_eq!(q.status, 0, "{tag}: {}", q.stderr);
        let after = scan(tag);
        assert!(gate(&after).is_null(), "{tag}: {}", after["maka_gate"]);
        assert_eq!(
            schema(&db),
            schema_before,
            "{tag}: quarantine changed the schema"
        );
        let bundles: Vec<String> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| p.to_str().unwrap().to_owned())
            .collect();
        assert!(!bundles.is_empty(), "{tag}: no bundle");
        for b in &bundles {
            let r = doctor(&ws, "restore", &["--apply", b]);
            assert_eq!(r.status, 0, "{tag}: {}", r.stderr);
        }
        assert_eq!(
            schema(&db),
            schema_before,
            "{tag}: restore changed the schema"
        );
        let back = rows(&db);
        for (t, want) in &rows_before {
            assert_eq!(&back[t], want, "{tag}: table {t} after restore");
        }
    }
}
