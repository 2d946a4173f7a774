//! The fixture databases, for the tests that check a fast path against an exact one on
//! everything Maka wrote (every release included).

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
