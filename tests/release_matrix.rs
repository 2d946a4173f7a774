//! Every repair on a file of every release from v0.1.2 to v0.1.11, including the
//! releases with no real file in `fixtures/` (v0.1.2–v0.1.4, v0.1.6, v0.1.8–v0.1.10):
//! those are built from the release's schema dump with a real release fixture's rows
//! transplanted (`tests/common/file_release.rs`). Each file is recognised as exactly
//! its release; finalize-runs leaves no stuck run, quarantine clears the gate, restore
//! brings every row back; no apply touches a schema object.

mod common;

use common::file_release::{build, dump, schema, stuck_runs};
use serde_json::Value;

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
            !stuck_runs(&ws.db()).is_empty(),
            "{tag}: nothing stuck to begin with"
        );
        let before = schema(&ws.db());
        let dry = json(
            &ws.doctor("finalize-runs", &["--project-header", "--format", "json"]),
            tag,
        );
        assert!(
            dry.get("apply_refusal").is_none_or(Value::is_null),
            "{tag}: {dry}"
        );
        let out = ws.doctor("finalize-runs", &["--project-header", "--apply"]);
        assert_eq!(out.status, 0, "{tag}: {}", out.stderr);
        assert_eq!(stuck_runs(&ws.db()).len(), 0, "{tag}: a run is still stuck");
        assert_eq!(schema(&ws.db()), before, "{tag}: a schema object changed");
    }
}

#[test]
fn every_release_is_quarantined_and_restored_exactly() {
    for tag in TAGS {
        let ws = build(tag, &source(tag, "orphan-response"), None);
        let db = ws.db();
        let (schema_before, rows_before) = (schema(&db), dump(&db));
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
        let q = ws.doctor("quarantine", &["--apply", "--out", out]);
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
            let r = ws.doctor("restore", &["--apply", b]);
            assert_eq!(r.status, 0, "{tag}: {}", r.stderr);
        }
        assert_eq!(
            schema(&db),
            schema_before,
            "{tag}: restore changed the schema"
        );
        let back = dump(&db);
        for (t, want) in &rows_before {
            assert_eq!(&back[t], want, "{tag}: table {t} after restore");
        }
    }
}
