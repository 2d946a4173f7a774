//! `doctor rederive`, and its step in `doctor repair`: on real files of main
//! (`fixtures/healthy`, and `fixtures/orphan-response`, whose ledger holds damage), of
//! v0.1.5, v0.1.7 and v0.1.11 (`fixtures/releases`), and on a file of every other
//! release built from its schema dump, each derived object (every index, every trigger,
//! `tool_operations`, `tool_journal_events`, the registry table, each registry row; of
//! the built files every fourth index) is dropped in turn and put back: every schema object and its SQL as it was, every
//! table's rows as they were (rowids and `sqlite_sequence` included; the registry's
//! `applied_at` aside), and the rescan says Maka starts. Then what must not be written:
//! a missing table of primary data, a schema that differs in more than missing objects,
//! a spelling the file does not tell, projections over a damaged ledger (the plan
//! excises first).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::file_release::build;
use common::Ws;
use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use serde_json::Value;

/// One derived object to drop, or one registry row to delete.
#[derive(Clone, Debug)]
enum Drop {
    Object(String, String),
    RegistryRow(String),
}

impl Drop {
    fn label(&self) -> String {
        match self {
            Drop::Object(kind, name) => format!("{kind}:{name}"),
            Drop::RegistryRow(scope) => format!("registry row {scope}"),
        }
    }

    fn apply(&self, db: &Path) {
        let c = Connection::open(db).unwrap();
        match self {
            Drop::Object(kind, name) => c
                .execute_batch(&format!("DROP {} \"{name}\"", kind.to_uppercase()))
                .unwrap(),
            Drop::RegistryRow(scope) => {
                c.execute(
                    "DELETE FROM operational_schema_migrations WHERE scope = ?1",
                    [scope],
                )
                .unwrap();
            }
        }
    }
}

/// Every derived object of the file, and every registry row.
fn derived(db: &Path) -> Vec<Drop> {
    let c = Connection::open(db).unwrap();
    let mut out: Vec<Drop> = c
        .prepare(
            "SELECT type, name FROM sqlite_schema WHERE sql IS NOT NULL AND (type IN \
             ('index', 'trigger') OR name IN ('tool_operations', 'tool_journal_events', \
             'operational_schema_migrations')) ORDER BY type, name",
        )
        .unwrap()
        .query_map([], |r| Ok(Drop::Object(r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    if let Ok(mut stmt) = c.prepare("SELECT scope FROM operational_schema_migrations") {
        out.extend(
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .map(|s| Drop::RegistryRow(s.unwrap())),
        );
    }
    out
}

/// Every trigger, table and registry row, and every fourth index.
fn sampled(mut drops: Vec<Drop>) -> Vec<Drop> {
    let mut i = 0;
    drops.retain(|d| match d {
        Drop::Object(k, _) if k == "index" => {
            i += 1;
            i % 4 == 1
        }
        _ => true,
    });
    drops
}

/// The file as the comparison sees it: every schema object with its SQL, and every
/// table's rows in rowid order with their rowids (the registry's `applied_at` aside).
#[derive(Debug, PartialEq)]
struct Snapshot {
    schema: Vec<(String, String, String, Option<String>)>,
    rows: BTreeMap<String, Vec<Vec<Sql>>>,
}

fn snapshot(db: &Path) -> Snapshot {
    let c = Connection::open(db).unwrap();
    let mut schema: Vec<(String, String, String, Option<String>)> = c
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    schema.sort();
    let mut rows = BTreeMap::new();
    for (kind, name, _, _) in &schema {
        if kind != "table" {
            continue;
        }
        let sql = match name.as_str() {
            "operational_schema_migrations" => {
                "SELECT scope, version FROM operational_schema_migrations ORDER BY scope".into()
            }
            "sqlite_sequence" => "SELECT name, seq FROM sqlite_sequence ORDER BY name".into(),
            t => {
                let without_rowid: i64 = c
                    .query_row(
                        "SELECT wr FROM pragma_table_list WHERE name = ?1",
                        [t],
                        |r| r.get(0),
                    )
                    .unwrap();
                if without_rowid == 0 {
                    format!("SELECT _rowid_, * FROM \"{t}\" ORDER BY _rowid_")
                } else {
                    format!("SELECT * FROM \"{t}\" ORDER BY 1, 2")
                }
            }
        };
        let mut stmt = c.prepare(&sql).unwrap();
        let n = stmt.column_count();
        let table: Vec<Vec<Sql>> = stmt
            .query_map([], |r| (0..n).map(|i| r.get::<_, Sql>(i)).collect())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        rows.insert(name.clone(), table);
    }
    Snapshot { schema, rows }
}

/// `doctor rederive --apply` without a backup, in JSON.
const APPLY: &[&str] = &[
    "doctor",
    "rederive",
    "--apply",
    "--no-backup",
    "--format",
    "json",
];

fn json(out: &common::Output, what: &str) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: exit {}: {e}: {}", out.status, out.stderr))
}

fn run(ws: &Ws, args: &[&str]) -> common::Output {
    let o = ws.run(args);
    common::Output {
        status: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The scan's start-up verdict: whether Maka opens the file, and the line.
fn startup(ws: &Ws) -> (bool, String) {
    let scan = json(&run(ws, &["doctor", "scan", "--format", "json"]), "scan");
    let opens = scan["startup"]["opens"] == true;
    let blocked = scan["startup"]["strict_recovery"]["blocked"] == true;
    (opens && !blocked, scan["startup"].to_string())
}

/// A copy of `from` (a database file) with `drop` applied.
fn dropped(from: &Path, drop: &Drop) -> Ws {
    let ws = Ws::copy_db(from);
    drop.apply(&ws.db());
    ws
}

/// The objects whose text the file does not tell (a refusal is right, and expected):
/// v0.1.11 writes its registry table in two spellings (fresh, or kept from v0.1.10),
/// and a fresh v0.1.11 file keeps nothing that tells them apart.
fn told_apart(tag: &str, drop: &Drop) -> bool {
    !(tag == "v0.1.11"
        && matches!(drop, Drop::Object(k, n) if k == "table" && n == "operational_schema_migrations"))
}

/// Drops each derived object of `db` (a file of release `tag`) in turn, puts it back
/// with `doctor rederive --apply` and compares; returns how many were checked.
fn each_dropped_and_put_back(tag: &str, db: &Path, sample: bool) -> usize {
    let want = snapshot(db);
    let mut checked = 0;
    let drops = if sample {
        sampled(derived(db))
    } else {
        derived(db)
    };
    assert!(drops.len() > 5, "{tag}: {drops:?}");
    for drop in drops {
        let what = format!("{tag} {}", drop.label());
        let ws = dropped(db, &drop);
        assert_ne!(snapshot(&ws.db()), want, "{what}: nothing was dropped");
        let out = run(&ws, APPLY);
        if !told_apart(tag, &drop) {
            assert_eq!(out.status, 2, "{what}: {}", out.stdout);
            assert!(out.stderr.contains("spellings"), "{what}: {}", out.stderr);
            continue;
        }
        let doc = json(&out, &what);
        assert_eq!(out.status, 0, "{what}: {}", out.stderr);
        assert_eq!(doc["applied"], true, "{what}: {doc}");
        let got = snapshot(&ws.db());
        assert_eq!(got.schema, want.schema, "{what}: the schema differs");
        for (t, rows) in &want.rows {
            assert_eq!(got.rows.get(t), Some(rows), "{what}: rows of {t} differ");
        }
        assert_eq!(got.rows.len(), want.rows.len(), "{what}");
        // The rescan after the write: Maka starts.
        assert_eq!(doc["after"]["startup_opens"], true, "{what}: {doc}");
        let line = doc["after"]["startup"].as_str().unwrap_or_default();
        assert!(line.starts_with("start-up: ok"), "{what}: {line}");
        if checked == 0 {
            // Run again: nothing is missing.
            let again = json(
                &run(&ws, &["doctor", "rederive", "--format", "json"]),
                &what,
            );
            assert_eq!(again["missing"], serde_json::json!([]), "{what}: {again}");
        }
        checked += 1;
    }
    checked
}

#[test]
fn every_derived_object_of_the_real_files_is_put_back_exactly() {
    let mut n = 0;
    for (tag, dir) in [
        ("main", "fixtures/healthy"),
        ("v0.1.5", "fixtures/releases/v0.1.5/healthy"),
        ("v0.1.7", "fixtures/releases/v0.1.7/healthy"),
        ("v0.1.11", "fixtures/releases/v0.1.11/healthy"),
    ] {
        n += each_dropped_and_put_back(tag, &Path::new(dir).join("runtime.sqlite"), false);
    }
    assert!(n > 200, "{n}");
}

#[test]
fn every_derived_object_of_every_other_release_is_put_back_exactly() {
    for tag in [
        "v0.1.2", "v0.1.3", "v0.1.4", "v0.1.6", "v0.1.8", "v0.1.9", "v0.1.10",
    ] {
        let from = match tag {
            "v0.1.2" | "v0.1.3" | "v0.1.4" | "v0.1.6" => "releases/v0.1.5/healthy",
            _ => "releases/v0.1.7/healthy",
        };
        let ws = build(tag, from, None);
        let n = each_dropped_and_put_back(tag, &ws.db(), true);
        assert!(n > 15, "{tag}: {n}");
    }
}

/// On a file whose ledger holds damage, the projections wait for the excision: the
/// plan orders it, `doctor rederive` alone refuses, and `doctor repair` leaves the file
/// exactly as it leaves the file that lost nothing.
#[test]
fn a_damaged_ledger_is_excised_before_the_projections_are_rebuilt() {
    let src = Path::new("fixtures/orphan-response/runtime.sqlite");
    let reference = Ws::copy_db(src);
    let out = run(&reference, &["doctor", "repair", "--apply", "--no-backup"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let want = snapshot(&reference.db());
    for drop in sampled(derived(src)) {
        let what = drop.label();
        let ws = dropped(src, &drop);
        if matches!(&drop, Drop::Object(k, n) if k == "table" && n.starts_with("tool_")) {
            let alone = run(&ws, &["doctor", "rederive", "--apply", "--no-backup"]);
            assert_eq!(alone.status, 2, "{what}: {}", alone.stdout);
            assert!(
                alone.stderr.contains("excise it first"),
                "{what}: {}",
                alone.stderr
            );
            let plan = json(&run(&ws, &["doctor", "scan", "--format", "json"]), &what);
            let actions: Vec<&str> = plan["diagnosis"]["plan"]["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["action"].as_str().unwrap())
                .collect();
            assert_eq!(actions, ["excise", "rederive"], "{what}");
        }
        let out = run(&ws, &["doctor", "repair", "--apply", "--no-backup"]);
        assert_eq!(out.status, 0, "{what}: {}", out.stderr);
        let got = snapshot(&ws.db());
        assert_eq!(got.schema, want.schema, "{what}");
        assert_eq!(got.rows, want.rows, "{what}");
        assert!(startup(&ws).0, "{what}");
    }
}

/// `doctor restore` of the rederive bundle takes it back: the file is again exactly
/// as it was with the objects missing.
#[test]
fn restore_takes_a_rederive_back() {
    let drop = Drop::Object("table".into(), "tool_journal_events".into());
    let ws = dropped(Path::new("fixtures/healthy/runtime.sqlite"), &drop);
    let before = snapshot(&ws.db());
    let doc = json(&run(&ws, APPLY), "rederive");
    let bundle = doc["bundle"].as_str().unwrap().to_owned();
    assert_ne!(snapshot(&ws.db()), before);
    let out = run(
        &ws,
        &["doctor", "restore", &bundle, "--apply", "--no-backup"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(snapshot(&ws.db()), before);
    assert!(!startup(&ws).0);
}

/// What is not derived is never made up: a missing table of primary data, a schema
/// that differs in more than missing objects. Nothing is written, and the words say
/// why and that a backup is the way back.
#[test]
fn what_cannot_be_put_back_exactly_is_refused() {
    let src = Path::new("fixtures/healthy/runtime.sqlite");
    let primary = dropped(
        src,
        &Drop::Object("table".into(), "session_messages".into()),
    );
    Drop::Object("index".into(), "runtime_events_by_run".into()).apply(&primary.db());
    let other = dropped(
        src,
        &Drop::Object("index".into(), "runtime_events_by_run".into()),
    );
    other
        .conn()
        .execute_batch("CREATE INDEX my_extra ON runtime_events(committed_at)")
        .unwrap();
    for (ws, words) in [
        (&primary, "loss is real"),
        (&other, "more than missing objects"),
    ] {
        let hash = ws.db_hash();
        let dry = json(&run(ws, &["doctor", "rederive", "--format", "json"]), words);
        let refusal = dry["apply_refusal"].as_str().unwrap_or_default();
        assert!(refusal.contains(words), "{refusal}");
        assert!(refusal.contains("backup"), "{refusal}");
        let out = run(ws, &["doctor", "rederive", "--apply"]);
        assert_eq!(out.status, 2, "{}", out.stdout);
        assert_eq!(ws.db_hash(), hash, "{words}: the file changed");
        assert!(!ws.bundles().exists());
        // The scan's plan has no rederive step and says why.
        let scan = json(&run(ws, &["doctor", "scan", "--format", "json"]), words);
        let plan = &scan["diagnosis"]["plan"];
        assert!(plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["action"] != "rederive"));
        assert!(
            plan["startup_refused"].as_str().unwrap().contains(words),
            "{plan}"
        );
    }
}

/// The plan and `doctor rederive` say it in the user's words: what was missing, that
/// Maka refused to start, what is put back, that nothing is lost.
#[test]
fn the_plan_says_what_is_missing_and_that_nothing_is_lost() {
    let ws = dropped(
        Path::new("fixtures/releases/v0.1.11/healthy/runtime.sqlite"),
        &Drop::Object("index".into(), "tool_journal_events_by_operation".into()),
    );
    let scan = run(&ws, &["doctor", "scan"]);
    let dry = run(&ws, &["doctor", "rederive"]);
    for text in [&scan.stdout, &dry.stdout] {
        for words in [
            "index `tool_journal_events_by_operation`",
            "refused to start",
            "nothing is lost",
        ] {
            assert!(text.contains(words), "{words}: {text}");
        }
    }
    assert!(dry.stdout.contains("put back:"), "{}", dry.stdout);
    assert!(
        scan.stdout.contains("1. wsledger doctor rederive"),
        "{}",
        scan.stdout
    );
    assert!(scan
        .stdout
        .contains("after: tool writes accepted; start-up not blocked"));
    // The finding's hint names the step.
    let doc = json(&run(&ws, &["doctor", "scan", "--format", "json"]), "scan");
    let refused = common::findings_with(&doc, "startup_refused");
    assert!(refused[0]["hint"]
        .as_str()
        .unwrap()
        .contains("Step 1 of the plan"));
    let out = run(&ws, &["doctor", "rederive", "--apply", "--no-backup"]);
    assert!(
        out.stdout.contains("rescan: start-up: ok"),
        "{}",
        out.stdout
    );
}

/// Every release's tool write inserts into both tool projections, so a missing one
/// fails each tool write (`no such table`) although v0.1.2 to v0.1.10 open the file:
/// the gate says so (`maka_gate.missing_table`), the plan's `rederive` step ends it,
/// and where nothing can put the table back the plan leaves tool writes refused.
#[test]
fn a_missing_tool_table_fails_every_tool_write_until_it_is_put_back() {
    let ws = dropped(
        Path::new("fixtures/releases/v0.1.5/healthy/runtime.sqlite"),
        &Drop::Object("table".into(), "tool_operations".into()),
    );
    let scan = json(&run(&ws, &["doctor", "scan", "--format", "json"]), "scan");
    let gate = &scan["maka_gate"];
    assert_eq!(gate["missing_table"], "tool_operations", "{gate}");
    assert_eq!(gate["tool_writes_refused"], true, "{gate}");
    assert_eq!(gate["first_issue"], Value::Null, "{gate}");
    assert_eq!(scan["startup"]["opens"], true, "{}", scan["startup"]);
    let d = &scan["diagnosis"];
    assert_eq!(d["before"]["tool_writes_refused"], true, "{d}");
    assert_eq!(d["after"]["tool_writes_refused"], false, "{d}");
    let radius = d["blast_radius"].as_str().unwrap_or_default();
    assert!(radius.contains("missing table tool_operations"), "{radius}");
    let step = &d["plan"]["steps"][0];
    assert_eq!(step["action"], "rederive", "{step}");
    assert!(
        step["fixes"]
            .as_str()
            .unwrap()
            .contains("no longer fail on the missing table tool_operations"),
        "{step}"
    );
    let table = run(&ws, &["doctor", "scan"]);
    assert!(
        table
            .stdout
            .contains("tool writes REFUSED in every session (table tool_operations is missing"),
        "{}",
        table.stdout
    );
    let repaired = run(&ws, &["doctor", "repair", "--apply", "--no-backup"]);
    assert_eq!(repaired.status, 0, "{}", repaired.stderr);
    assert!(
        repaired.stdout.contains("put back table:tool_operations"),
        "{}",
        repaired.stdout
    );
    let after = json(&run(&ws, &["doctor", "scan", "--format", "json"]), "rescan");
    assert_eq!(after["maka_gate"]["missing_table"], Value::Null);
    assert_eq!(after["maka_gate"]["tool_writes_refused"], false);

    // A table of primary data missing as well: nothing is put back, tool writes stay
    // refused after the plan.
    let both = dropped(
        Path::new("fixtures/releases/v0.1.5/healthy/runtime.sqlite"),
        &Drop::Object("table".into(), "tool_journal_events".into()),
    );
    Drop::Object("table".into(), "session_messages".into()).apply(&both.db());
    let scan = json(&run(&both, &["doctor", "scan", "--format", "json"]), "both");
    assert_eq!(scan["maka_gate"]["missing_table"], "tool_journal_events");
    let d = &scan["diagnosis"];
    assert_eq!(d["after"]["tool_writes_refused"], true, "{d}");
}
