//! Repairs on files of released Maka builds write in that release's own schema, what
//! that release's own start-up recovery writes (compared table by table, column by
//! column, with `recovered-by-release/changes.json`), and never touch a schema object.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{copy_fixture, wsledger_env};
use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use serde_json::Value;

/// Every `sqlite_schema` row, as text.
fn schema_dump(db: &Path) -> Vec<String> {
    let c = Connection::open(db).unwrap();
    let mut s = c
        .prepare(
            "SELECT type, name, tbl_name, ifnull(sql, '') FROM sqlite_schema ORDER BY type, name",
        )
        .unwrap();
    s.query_map([], |r| {
        Ok(format!(
            "{}|{}|{}|{}",
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

type Rows = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;

/// Table → primary key (or rowid) → column → value, for every table.
fn rows(db: &Path) -> Rows {
    let c = Connection::open(db).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = Rows::new();
    for t in tables {
        let info: Vec<(String, i64)> = c
            .prepare(&format!("SELECT name, pk FROM pragma_table_info('{t}')"))
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut pk: Vec<&(String, i64)> = info.iter().filter(|(_, p)| *p > 0).collect();
        pk.sort_by_key(|(_, p)| *p);
        let cols: Vec<&str> = info.iter().map(|(n, _)| n.as_str()).collect();
        let key_expr = if pk.is_empty() {
            "rowid".to_owned()
        } else {
            pk.iter()
                .map(|(n, _)| format!("quote(\"{n}\")"))
                .collect::<Vec<_>>()
                .join(" || '|' || ")
        };
        let sql = format!(
            "SELECT {key_expr}, {} FROM \"{t}\"",
            cols.iter()
                .map(|c| format!("\"{c}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut stmt = c.prepare(&sql).unwrap();
        let mut q = stmt.query([]).unwrap();
        let table = out.entry(t.clone()).or_default();
        while let Some(r) = q.next().unwrap() {
            let key = format!("{:?}", r.get::<_, Sql>(0).unwrap());
            let mut row = BTreeMap::new();
            for (i, c) in cols.iter().enumerate() {
                row.insert(
                    (*c).to_owned(),
                    format!("{:?}", r.get::<_, Sql>(i + 1).unwrap()),
                );
            }
            table.insert(key, row);
        }
    }
    out
}

/// Per table: (added, deleted, changed columns of changed rows).
type Change = BTreeMap<String, (usize, usize, BTreeSet<String>)>;

fn diff(before: &Rows, after: &Rows) -> Change {
    let mut out = Change::new();
    for (t, b) in before {
        let a = &after[t];
        let added = a.keys().filter(|k| !b.contains_key(*k)).count();
        let deleted = b.keys().filter(|k| !a.contains_key(*k)).count();
        let mut changed = BTreeSet::new();
        for (k, row) in b {
            if let Some(now) = a.get(k) {
                for (c, v) in row {
                    if now.get(c) != Some(v) {
                        changed.insert(c.clone());
                    }
                }
            }
        }
        if added + deleted > 0 || !changed.is_empty() {
            out.insert(t.clone(), (added, deleted, changed));
        }
    }
    out
}

fn release_change(dir: &Path) -> Change {
    let c: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("recovered-by-release/changes.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(c["schemaObjects"]["added"], serde_json::json!([]));
    let mut out = Change::new();
    for (t, v) in c["tables"].as_object().unwrap() {
        let added = v["added"].as_array().map_or(0, Vec::len);
        let deleted = v["deleted"].as_array().map_or(0, Vec::len);
        let mut changed = BTreeSet::new();
        for ch in v["changed"].as_array().into_iter().flatten() {
            for col in ch["changedColumns"].as_array().unwrap() {
                changed.insert(col.as_str().unwrap().to_owned());
            }
        }
        if added + deleted > 0 || !changed.is_empty() {
            out.insert(t.clone(), (added, deleted, changed));
        }
    }
    out
}

fn run(ws: &Path, control: &Path, args: &[&str]) -> common::Output {
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-w", ws.to_str().unwrap()]);
    wsledger_env(
        &all,
        &[("WSLEDGER_MAKA_CONTROL_DIR", control.to_str().unwrap())],
    )
}

fn scan_json(ws: &Path) -> Value {
    let out = common::wsledger(&common::scan_json_args(ws));
    serde_json::from_str(&out.stdout).unwrap()
}

/// finalize-runs --apply --project-header writes exactly the tables and columns the
/// release's own start-up recovery writes, and leaves no stuck run.
#[test]
fn finalize_writes_what_each_release_recovery_writes() {
    for name in [
        "releases/v0.1.5/stuck-running",
        "releases/v0.1.5/stuck-refused-orphan",
        "releases/v0.1.7/stuck-running",
        "releases/v0.1.11/stuck-running",
        "releases/v0.1.11/crash-mid-tool",
    ] {
        let (_t, ws) = copy_fixture(name);
        let control = tempfile::tempdir().unwrap();
        let db = ws.join("runtime.sqlite");
        let schema_before = schema_dump(&db);
        let before = rows(&db);
        let out = run(
            &ws,
            control.path(),
            &[
                "finalize-runs",
                "--apply",
                "--project-header",
                "--format",
                "json",
            ],
        );
        assert_eq!(out.status, 0, "{name}: {}", out.stderr);
        let doc: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(doc["applied"], true, "{name}");
        assert_eq!(doc["schema_basis"]["exact"], true, "{name}: {doc}");
        assert_eq!(
            schema_dump(&db),
            schema_before,
            "{name}: schema objects changed"
        );
        let ours = diff(&before, &rows(&db));
        let theirs = release_change(&Path::new("fixtures").join(name));
        assert_eq!(
            ours, theirs,
            "{name}: ours (left) vs the release's own recovery (right)"
        );
        let after = scan_json(&ws);
        assert_eq!(after["summary"]["stuck_runs"], 0, "{name}: {after}");
        // A second run plans nothing.
        let again = run(&ws, control.path(), &["finalize-runs", "--format", "json"]);
        let again: Value = serde_json::from_str(&again.stdout).unwrap();
        assert_eq!(again["plan"], serde_json::json!([]), "{name}");
    }
}

/// quarantine --apply of a release's damaged file clears the gate; restore brings every
/// row back exactly; neither touches a schema object.
#[test]
fn quarantine_and_restore_on_release_files() {
    for name in [
        "releases/v0.1.5/orphan-response",
        "releases/v0.1.7/orphan-response",
        "releases/v0.1.11/orphan-response",
    ] {
        let (_t, ws) = copy_fixture(name);
        let control = tempfile::tempdir().unwrap();
        let out_dir = tempfile::tempdir().unwrap();
        let bundles = out_dir.path().join("q");
        let db = ws.join("runtime.sqlite");
        let schema_before = schema_dump(&db);
        let before = rows(&db);
        let out = run(
            &ws,
            control.path(),
            &[
                "quarantine",
                "--apply",
                "--format",
                "json",
                "--out",
                bundles.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status, 0, "{name}: {}", out.stderr);
        let doc: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(doc["schema_basis"]["exact"], true, "{name}");
        assert_eq!(schema_dump(&db), schema_before, "{name}");
        let after = scan_json(&ws);
        assert_eq!(
            after["maka_gate"]["tool_writes_refused"], false,
            "{name}: {after}"
        );
        let files: Vec<String> = std::fs::read_dir(&bundles)
            .unwrap()
            .map(|e| e.unwrap().path().display().to_string())
            .filter(|p| p.ends_with(".bundle.json"))
            .collect();
        assert!(!files.is_empty());
        let bundle: Value =
            serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
        assert!(
            bundle["quarantine"]["release"]["releases"].is_array(),
            "the bundle records its release: {}",
            bundle["quarantine"]
        );
        let mut args = vec!["restore", "--apply"];
        args.extend(files.iter().map(String::as_str));
        let out = run(&ws, control.path(), &args);
        assert_eq!(out.status, 0, "{name}: {}", out.stderr);
        assert_eq!(schema_dump(&db), schema_before, "{name}");
        let restored = rows(&db);
        for (t, b) in &before {
            // The tombstone and catalog generation are restored too.
            assert_eq!(&restored[t], b, "{name}: table {t} is not as before");
        }
    }
}

/// A bundle from one generation does not go into a file of another.
#[test]
fn restore_refuses_a_bundle_of_another_release() {
    let (_t, ws) = copy_fixture("releases/v0.1.7/orphan-response");
    let (_t2, other) = copy_fixture("releases/v0.1.11/healthy");
    let control = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let bundles = out_dir.path().join("q");
    let out = run(
        &ws,
        control.path(),
        &["quarantine", "--apply", "--out", bundles.to_str().unwrap()],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let file = std::fs::read_dir(&bundles)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.display().to_string().ends_with(".bundle.json"))
        .unwrap();
    let before = common::file_hash(&other.join("runtime.sqlite"));
    let out = run(
        &other,
        control.path(),
        &["restore", "--apply", file.to_str().unwrap()],
    );
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("v0.1.7"), "{}", out.stderr);
    assert!(out.stderr.contains("v0.1.11"), "{}", out.stderr);
    assert_eq!(common::file_hash(&other.join("runtime.sqlite")), before);
}

/// A file whose repair tables differ from the closest release is refused before
/// anything is created; one that differs only elsewhere is repaired, and says on
/// which release it relied.
#[test]
fn unknown_files_are_repaired_only_on_an_exact_basis() {
    let (_t, ws) = copy_fixture("releases/v0.1.7/stuck-running");
    let control = tempfile::tempdir().unwrap();
    let db = ws.join("runtime.sqlite");
    Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE INDEX my_extra ON runtime_events(committed_at)")
        .unwrap();
    let dry = run(&ws, control.path(), &["finalize-runs", "--format", "json"]);
    let doc: Value = serde_json::from_str(&dry.stdout).unwrap();
    assert_eq!(doc["schema_basis"]["exact"], false, "{doc}");
    assert_eq!(
        doc["schema_basis"]["releases"],
        serde_json::json!(["v0.1.7", "v0.1.8"])
    );
    assert_eq!(doc["apply_refusal"], Value::Null);
    let out = run(&ws, control.path(), &["finalize-runs", "--apply"]);
    assert_eq!(out.status, 0, "{}", out.stderr);

    let (_t, ws) = copy_fixture("releases/v0.1.7/stuck-running");
    let db = ws.join("runtime.sqlite");
    Connection::open(&db)
        .unwrap()
        .execute_batch("ALTER TABLE core_agent_run_events ADD COLUMN doctor_note TEXT")
        .unwrap();
    let dry = run(&ws, control.path(), &["finalize-runs", "--format", "json"]);
    let doc: Value = serde_json::from_str(&dry.stdout).unwrap();
    assert!(
        doc["apply_refusal"]
            .as_str()
            .unwrap()
            .contains("core_agent_run_events"),
        "{doc}"
    );
    let before = common::file_hash(&db);
    let out = run(&ws, control.path(), &["finalize-runs", "--apply"]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot be repaired in its schema"),
        "{}",
        out.stderr
    );
    assert_eq!(common::file_hash(&db), before);
    let backups = std::fs::read_dir(&ws)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".bak")
        })
        .count();
    assert_eq!(backups, 0, "no backup before a refusal");
}
