//! Workspaces of releases whose real files are not in `fixtures/`, built from the
//! release's schema dump (`fixtures/releases/schemas/<tag>.json`), its registry and
//! capability rows, and the rows of a real release fixture transplanted column by
//! column (the columns both have). For Maka v0.1.2 and v0.1.3, which keep each
//! session's transcript in `sessions/<id>/session.jsonl` beside the database, one
//! transcript file per session is made from the fixture's `session_messages` rows
//! (line 1: the transcript marker Maka's `createSessionTranscriptMarker` writes).

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;

use super::Ws;

/// Tables whose rows are the release's own, not transplanted: the registry and
/// capability rows are written from the dump, the catalog projections by the
/// release's own triggers as the session rows go in.
const NOT_COPIED: &[&str] = &[
    "operational_schema_migrations",
    "runtime_capabilities",
    "session_metadata_schema",
    "session_catalog_projection",
    "session_catalog_label_projection",
];

impl Ws {
    pub fn transcript(&self, session: &str) -> PathBuf {
        self.root()
            .join("sessions")
            .join(session)
            .join("session.jsonl")
    }

    /// `wsledger doctor <command> -w <root> <args>` with this workspace's control
    /// namespace.
    pub fn doctor(&self, command: &str, args: &[&str]) -> super::Output {
        let root = self.root();
        let mut all = vec!["doctor", command, "-w", root.to_str().unwrap()];
        all.extend_from_slice(args);
        super::wsledger_env(
            &all,
            &[(
                "WSLEDGER_MAKA_CONTROL_DIR",
                self.control().to_str().unwrap(),
            )],
        )
    }
}

/// Every schema object, as SQLite stores it.
pub fn schema(db: &Path) -> Vec<(String, String, Option<String>)> {
    let c = Connection::open(db).unwrap();
    let mut stmt = c
        .prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Every row of every table of `db`, in rowid (or primary-key) order.
pub fn dump(db: &Path) -> std::collections::BTreeMap<String, Vec<Vec<wsledger::bundle::Cell>>> {
    wsledger::db::Workspace::open_read_only(db)
        .unwrap()
        .dump_tables()
        .unwrap()
}

/// The runs of `db` a full scan does not find terminal.
pub fn stuck_runs(db: &Path) -> Vec<String> {
    let all = wsledger::scan::ScanOptions {
        all_runs: true,
        ..wsledger::scan::ScanOptions::default()
    };
    wsledger::scan::scan_path(db, all, &mut |_, _| {})
        .unwrap()
        .runs
        .iter()
        .filter(|r| r.state != wsledger::scan::runs::RunState::Terminal)
        .map(|r| r.run_id.clone())
        .collect()
}

/// The transcript marker line (with its newline) of a session.
pub fn marker_line(session: &str) -> String {
    format!(
        "{}\n",
        serde_json::json!({"type": "session_transcript", "sessionId": session, "schemaVersion": 1})
    )
}

/// An empty database of release `tag` at `db`, as the release creates it: the objects
/// of its schema dump (tables first, then what refers to them), its registry rows, the
/// capability rows its runtime migrations write, and its `user_version`. Returns the
/// connection and the dump.
pub fn empty_release_db(db: &Path, tag: &str) -> (Connection, Value) {
    let dump: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("fixtures/releases/schemas/{tag}.json")).unwrap(),
    )
    .unwrap();
    let c = Connection::open(db).unwrap();
    let rank = |o: &Value| match o["type"].as_str().unwrap() {
        "table" => 0,
        "index" => 1,
        "view" => 2,
        _ => 3,
    };
    let mut objects: Vec<&Value> = dump["objects"].as_array().unwrap().iter().collect();
    objects.sort_by_key(|o| rank(o));
    for o in objects {
        if o["name"].as_str().unwrap().starts_with("sqlite_") {
            continue;
        }
        if let Some(sql) = o["sql"].as_str() {
            c.execute_batch(sql)
                .unwrap_or_else(|e| panic!("{tag}: {e}: {sql}"));
        }
    }
    for r in dump["registry"].as_array().into_iter().flatten() {
        c.execute(
            "INSERT INTO operational_schema_migrations(scope, version, applied_at) \
             VALUES (?1, ?2, ?3)",
            rusqlite::params![
                r["scope"].as_str().unwrap(),
                r["version"].as_i64().unwrap(),
                r["applied_at"].as_i64().unwrap_or(1)
            ],
        )
        .unwrap_or_else(|e| panic!("{tag}: registry: {e}"));
    }
    let uv = dump["user_version"].as_i64().unwrap();
    let has_caps = c
        .table_exists(Some("main"), "runtime_capabilities")
        .unwrap();
    if has_caps {
        // Runtime migration 5 adds recovery authority, 6 continuation, 7 workspace
        // version authority (the dumps hold no rows).
        for (min, cap) in [
            (5, "runtime_recovery_authority"),
            (6, "runtime_continuation_authority"),
            (7, "runtime_workspace_version_authority"),
        ] {
            if uv >= min {
                c.execute(
                    "INSERT INTO runtime_capabilities(capability, version) VALUES (?1, 1)",
                    [cap],
                )
                .unwrap();
            }
        }
    }
    c.pragma_update(None, "user_version", uv).unwrap();
    (c, dump)
}

/// Builds a `tag` workspace from the rows of `fixtures/<fixture>/runtime.sqlite` (a
/// real release's file). Where the release has no `session_messages` table (v0.1.2,
/// v0.1.3), the transcripts become session files. `without_failed_turn_state`:
/// a `(session, turn)` whose `failed` turn_state record is left out of its transcript
/// (as if the process died before writing it), so a recovery must append one.
pub fn build(tag: &str, fixture: &str, without_failed_turn_state: Option<(&str, &str)>) -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let ws = Ws { dir };
    std::fs::create_dir_all(ws.root()).unwrap();
    let (c, dump) = empty_release_db(&ws.db(), tag);
    // Rows go in table by table, parents not always first.
    c.pragma_update(None, "foreign_keys", false).unwrap();
    let objects: Vec<&Value> = dump["objects"].as_array().unwrap().iter().collect();
    let session_metadata_version = dump["registry"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scope"] == "session_metadata")
        .and_then(|r| r["version"].as_i64());
    c.execute(
        "INSERT INTO session_metadata_schema(scope, version) VALUES ('session_metadata', ?1)",
        [session_metadata_version.unwrap()],
    )
    .unwrap();
    let src = Path::new("fixtures").join(fixture).join("runtime.sqlite");
    c.execute("ATTACH DATABASE ?1 AS src", [src.to_str().unwrap()])
        .unwrap();
    let columns = |schema: &str, table: &str| -> Vec<String> {
        let mut stmt = c
            .prepare(&format!("PRAGMA {schema}.table_info(\"{table}\")"))
            .unwrap();
        stmt.query_map([], |r| r.get::<_, String>(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let mut tables: Vec<String> = objects
        .iter()
        .filter(|o| o["type"] == "table" && o["sql"].is_string())
        .map(|o| o["name"].as_str().unwrap().to_owned())
        .filter(|t| !NOT_COPIED.contains(&t.as_str()))
        .collect();
    // The catalog state before the session rows (their triggers count on it).
    tables.sort_by_key(|t| match t.as_str() {
        "session_catalog_state" => 0,
        "session_metadata" => 1,
        _ => 2,
    });
    for t in &tables {
        let theirs = columns("src", t);
        if theirs.is_empty() {
            continue;
        }
        let shared: Vec<String> = columns("main", t)
            .into_iter()
            .filter(|col| theirs.contains(col))
            .map(|col| format!("\"{col}\""))
            .collect();
        let list = shared.join(", ");
        let copy =
            format!("INSERT OR IGNORE INTO main.\"{t}\"({list}) SELECT {list} FROM src.\"{t}\"");
        // In rowid order where the table has one (a WITHOUT ROWID table has not).
        if c.execute_batch(&format!("{copy} ORDER BY rowid")).is_err() {
            c.execute_batch(&copy).unwrap();
        }
    }
    let in_files = !c.table_exists(Some("main"), "session_messages").unwrap();
    // One transcript file per session, from the fixture's transcript rows.
    let sessions: Vec<String> = if !in_files {
        Vec::new()
    } else {
        std::fs::create_dir_all(ws.root().join("sessions")).unwrap();
        let mut stmt = c
            .prepare("SELECT session_id FROM main.session_metadata ORDER BY session_id")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    for s in &sessions {
        let mut text = marker_line(s);
        let mut stmt = c
            .prepare(
                "SELECT record_json FROM src.session_messages WHERE session_id = ?1 \
                 ORDER BY sequence",
            )
            .unwrap();
        let records: Vec<String> = stmt
            .query_map([s], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for r in records {
            if let Some((ds, dt)) = without_failed_turn_state {
                let v: Value = serde_json::from_str(&r).unwrap();
                if ds == s
                    && v["type"] == "turn_state"
                    && v["turnId"] == dt
                    && v["status"] == "failed"
                {
                    continue;
                }
            }
            text.push_str(&r);
            text.push('\n');
        }
        let d = ws.root().join("sessions").join(s);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("session.jsonl"), text).unwrap();
    }
    c.execute_batch("DETACH DATABASE src").unwrap();
    let broken: i64 = c
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(broken, 0, "the transplanted rows keep every foreign key");
    ws
}

/// Every file under `dir`, path relative to it → bytes.
pub fn tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}
