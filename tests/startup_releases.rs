//! The start-up model against what the releases were measured doing: the 26 release
//! pairs of `fixtures/releases/schemas/migrated/` (a release's healthy workspace
//! opened once by a later release: migrated, or refused with Maka's message), and
//! every release fixture (written by its release, which opened it again to write its
//! verdict: so its own composition opens it).

use std::path::PathBuf;

use serde_json::Value;
use wsledger::db::startup::StartupFacts;
use wsledger::release::generation_of;
use wsledger::scan::pipeline::{scan_path, ScanOptions};
use wsledger::startup::verdict;

const MIGRATED: &str = "fixtures/releases/schemas/migrated";

#[test]
fn the_measured_release_pairs_are_previewed_as_measured() {
    let mut pairs = 0;
    for e in std::fs::read_dir(MIGRATED).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let (from, to) = name.split_once("-by-").unwrap();
        let to = if to.starts_with("main") { "main" } else { to };
        let measured: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let g = generation_of(from).unwrap_or_else(|| panic!("{from} is in the catalog"));
        let facts = StartupFacts::of_schema(&g.facts(0));
        let v = verdict(&facts, to).unwrap();
        match measured["error"].as_str() {
            Some(message) => {
                let r = v
                    .refusal
                    .as_ref()
                    .unwrap_or_else(|| panic!("{name}: {v:?}"));
                assert!(!v.opens, "{name}");
                assert_eq!(r.maka_message, message, "{name}");
            }
            None => {
                assert!(v.opens, "{name}: {v:?}");
                // Every store ends at the version the migrated file records.
                let registry = measured["registry"].as_array().unwrap();
                for m in &v.migrations {
                    let Some(to_version) = m.to else { continue };
                    if m.store == "runtime" {
                        assert_eq!(
                            Some(to_version),
                            measured["user_version"].as_i64(),
                            "{name}"
                        );
                        continue;
                    }
                    let recorded = registry
                        .iter()
                        .find(|r| r["scope"] == m.store.as_str())
                        .and_then(|r| r["version"].as_i64());
                    assert_eq!(recorded, Some(to_version), "{name}: {}", m.store);
                }
            }
        }
        pairs += 1;
    }
    assert_eq!(pairs, 26);
}

/// Fixture workspaces with a `verdict.json`: the release fixtures here and, when the
/// shared folder is beside the checkout, `../shared/maka-releases/`.
fn release_fixtures() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in ["fixtures/releases", "../shared/maka-releases"] {
        let Ok(tags) = std::fs::read_dir(root) else {
            continue;
        };
        for tag in tags.flatten() {
            let Ok(cases) = std::fs::read_dir(tag.path()) else {
                continue;
            };
            for case in cases.flatten() {
                if case.path().join("verdict.json").is_file() {
                    out.push(case.path());
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_release_fixture_opens_under_the_release_that_wrote_it() {
    let dirs = release_fixtures();
    assert!(dirs.len() >= 10, "{dirs:?}");
    for dir in dirs {
        let report = scan_path(
            &dir.join("runtime.sqlite"),
            ScanOptions::default(),
            &mut |_, _| {},
        )
        .unwrap();
        let doc = serde_json::to_value(&report).unwrap();
        let s = &doc["startup"];
        assert_eq!(s["opens"], true, "{}: {s}", dir.display());
        assert_eq!(
            s["release"],
            doc["workspace_release"]["rules"],
            "{}",
            dir.display()
        );
        assert!(
            !doc["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["code"] == "startup_refused"),
            "{}",
            dir.display()
        );
        // The newer builds open these healthy-schema files too (migrating them), as
        // measured on the fresh files of the same releases.
        let targets = doc["upgrade"]["targets"].as_array().into_iter().flatten();
        // Maka 0.2 is known from its release notes only: no composition.
        for t in targets.filter(|t| t["migration"] != "not_known") {
            assert_eq!(t["composition"]["opens"], true, "{}: {t}", dir.display());
        }
    }
}
