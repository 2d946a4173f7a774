//! The embedded target schema equals the schema Maka itself created, and every real
//! fixture matches it. `WSLEDGER_BLESS=1` rewrites the embedded file from `fixtures/healthy`.

use std::path::Path;

use wsledger::db::schema::diff_schema;
use wsledger::db::Workspace;

const TARGET: &str = "src/db/target_schema.txt";

#[test]
fn target_schema_is_the_one_maka_created() {
    let ws = Workspace::open_read_only(Path::new("fixtures/healthy/runtime.sqlite")).unwrap();
    let facts = ws.schema_facts().unwrap();
    let mut lines: Vec<String> = facts
        .objects
        .iter()
        .map(|o| format!("{}\t{}", o.key, o.signature))
        .collect();
    lines.sort();
    let text = lines.join("\n") + "\n";
    if std::env::var_os("WSLEDGER_BLESS").is_some() {
        std::fs::write(TARGET, &text).unwrap();
    }
    assert_eq!(
        lines.len(),
        117,
        "Maka's target has 68 tables, 46 indexes and 3 triggers"
    );
    let embedded = std::fs::read_to_string(TARGET).unwrap();
    assert!(
        embedded == text,
        "{TARGET} is stale: run `WSLEDGER_BLESS=1 cargo test --test schema_target`"
    );
}

#[test]
fn every_real_fixture_has_the_current_schema() {
    for entry in std::fs::read_dir("fixtures").unwrap() {
        let dir = entry.unwrap().path();
        let db = dir.join("runtime.sqlite");
        if !db.exists() {
            continue;
        }
        let ws = Workspace::open_read_only(&db).unwrap();
        let facts = ws.schema_facts().unwrap();
        assert_eq!(facts.user_version, 12, "{}", dir.display());
        let diff = diff_schema(&facts.objects);
        assert!(diff.is_empty(), "{}: {diff:?}", dir.display());
    }
}
