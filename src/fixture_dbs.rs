//! The fixture databases and their payloads, for the tests that check a fast path
//! against an exact one on everything Maka wrote (every release included). The unit
//! tests use it as `crate::fixture_dbs`, integration tests through `#[path]`.

use std::path::{Path, PathBuf};

/// Every `runtime.sqlite` below `fixtures/`, each opened read-only and `immutable=1`
/// (so that nothing is created beside it).
pub(crate) fn fixture_databases() -> Vec<(PathBuf, rusqlite::Connection)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut dbs = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "runtime.sqlite") {
                dbs.push(path);
            }
        }
    }
    assert!(dbs.len() >= 10, "{dbs:?}");
    dbs.sort();
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
    dbs.into_iter()
        .map(|db| {
            let uri = format!("file:{}?immutable=1", db.display());
            let conn = rusqlite::Connection::open_with_flags(uri, flags).unwrap();
            (db, conn)
        })
        .collect()
}

/// Every payload Maka wrote in the fixtures (all releases) and every decode vector.
pub(crate) fn payloads() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for (_, conn) in fixture_databases() {
        let Ok(mut stmt) = conn.prepare("SELECT payload_json FROM runtime_events") else {
            continue; // a fixture whose damage is the schema itself
        };
        let rows = stmt.query_map([], |r| r.get::<_, Option<String>>(0));
        out.extend(rows.unwrap().filter_map(|r| r.ok().flatten()));
    }
    let vectors = std::fs::read_to_string(root.join("tests/vectors/decode.jsonl")).unwrap();
    for line in vectors.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(p) = v["payload_json"].as_str() {
            out.push(p.to_owned());
        }
    }
    out
}
