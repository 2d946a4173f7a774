//! The catalog's main-branch generation is the schema Maka's main build created
//! (`fixtures/healthy`), and every main-branch fixture equals it exactly.

use std::path::Path;

use wsledger::db::Workspace;
use wsledger::release::{differences, generation_of, recognize};

#[test]
fn mains_generation_is_the_one_maka_created() {
    let main = generation_of("main").unwrap();
    assert_eq!(
        main.fresh().len(),
        117,
        "Maka's target has 68 tables, 46 indexes and 3 triggers"
    );
    let ws = Workspace::open_read_only(Path::new("fixtures/healthy/runtime.sqlite")).unwrap();
    let facts = ws.schema_facts().unwrap();
    let d = differences(&facts, main, &main.variants[0]);
    assert!(d.is_empty(), "{:?}", d.lines());
}

#[test]
fn every_main_fixture_is_recognised_as_main() {
    for entry in std::fs::read_dir("fixtures").unwrap() {
        let dir = entry.unwrap().path();
        let db = dir.join("runtime.sqlite");
        if !db.exists() {
            continue;
        }
        let ws = Workspace::open_read_only(&db).unwrap();
        let facts = ws.schema_facts().unwrap();
        assert_eq!(facts.user_version, 12, "{}", dir.display());
        let r = recognize(&facts);
        assert!(r.exact(), "{}: {:?}", dir.display(), r.differences.lines());
        assert_eq!(r.matches(), ["main"], "{}", dir.display());
    }
}
