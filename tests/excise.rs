//! `doctor excise` on copies of every damaged real workspace (`fixtures/`, copies of
//! `../shared/maka-real` and `../shared/maka-releases`): the gate opens, start-up is
//! not blocked, the schema is byte-identical, every session stays listed with its
//! messages, no projection finding appears, the bundle replays, and `restore --apply`
//! gives back every row, table by table. Refusals change nothing.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::writing::{
    assert_after_is_clear, assert_gate_clear_and_startup_unblocked, assert_refused, ndjson,
    scan_report,
};
use common::{json_of, stderr, Ws};
use serde_json::Value;
use wsledger::bundle::{Bundle, Cell};
use wsledger::db::Workspace;

/// The excision bundles in the workspace's default bundle directory, sorted.
fn excise_bundles(ws: &Ws) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ws.bundle_paths().into_iter().map(PathBuf::from).collect();
    v.retain(|p| p.to_string_lossy().contains(".excise-"));
    v
}

/// Every workspace under `fixtures/` (the real ones and the releases') whose ledger
/// Maka's gate refuses.
fn damaged_workspaces() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![PathBuf::from("fixtures")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.file_name().is_some_and(|n| n == "runtime.sqlite")
                && scan_report(&p).maka_gate.tool_writes_refused
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `sqlite_schema` rows, `user_version` and the schema registry's rows.
type Schema = (Vec<Vec<Option<String>>>, i64, Vec<Vec<Cell>>);

/// The schema as stored.
fn schema(db: &Path) -> Schema {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let mut stmt = c
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY rowid")
        .unwrap();
    let objects = stmt
        .query_map([], |r| {
            Ok((0..4)
                .map(|i| r.get::<_, Option<String>>(i).unwrap())
                .collect::<Vec<_>>())
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    drop(stmt);
    drop(c);
    let dump = Workspace::open_read_only(db)
        .unwrap()
        .dump_tables()
        .unwrap();
    let registry = dump
        .get("operational_schema_migrations")
        .cloned()
        .unwrap_or_default();
    (objects, v, registry)
}

/// Session id → number of `session_messages` rows, for every listed session.
fn listed_sessions(db: &Path) -> BTreeMap<String, usize> {
    let ws = Workspace::open_read_only(db).unwrap();
    let dump = ws.dump_tables().unwrap();
    let mut out: BTreeMap<String, usize> = ws
        .sessions()
        .unwrap()
        .into_iter()
        .map(|s| (s.session_id, 0))
        .collect();
    let messages = dump.get("session_messages").cloned().unwrap_or_default();
    for row in messages {
        if let Some(Cell::Text(s)) = row.first() {
            let s = String::from_utf8_lossy(s).into_owned();
            if let Some(n) = out.get_mut(&s) {
                *n += 1;
            }
        }
    }
    out
}

fn projection_keys(db: &Path) -> BTreeSet<(String, Option<String>, Option<String>)> {
    scan_report(db)
        .findings
        .iter()
        .filter(|f| f.code.starts_with("projection_"))
        .map(|f| {
            (
                f.code.to_owned(),
                f.session_id.clone(),
                f.operation_id.clone(),
            )
        })
        .collect()
}

/// Inserts (foreign keys off) a `runtime_workspace_epochs` row that references
/// `event` through a key without a cascade.
fn reference_without_cascade(c: &rusqlite::Connection, event: &str) {
    c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    c.execute(
        "INSERT INTO runtime_workspace_epochs VALUES ('w', 'e', 'r', 'i', 'managed_worktree', \
         'sha1', 'c', 't', 'v', 'd', 'git_tree_materialized_with_fixed_config_v1', 'p', \
         'maka_workspace_authority', 'ai', 'ar', 'at', ?1, 1, 0)",
        [event],
    )
    .unwrap();
}

#[test]
fn every_damaged_workspace_is_excised_keeping_its_sessions_and_restored_exactly() {
    let all = damaged_workspaces();
    assert!(all.len() >= 11, "{all:?}");
    for path in all {
        let name = path.display().to_string();
        let ws = Ws::copy_db(&path);
        let original = ws.tables();
        let schema_before = schema(&ws.db());
        let sessions_before = listed_sessions(&ws.db());
        let projection_before = projection_keys(&ws.db());
        assert!(!sessions_before.is_empty(), "{name}");

        // The plan: every damaged session heals by excision.
        let plan = json_of(&ws.run(&["doctor", "excise", "--format", "json"]));
        assert_eq!(plan["command"], "excise");
        assert_eq!(plan["applied"], false);
        assert_eq!(plan["before"]["tool_writes_refused"], true, "{name}");
        assert_after_is_clear(&plan, &name);
        let planned = plan["sessions"].as_array().unwrap().clone();
        assert!(!planned.is_empty(), "{name}");
        for s in &planned {
            assert_eq!(s["excised"], true, "{name}: {s}");
            assert!(s["fallback"].is_null(), "{name}");
            assert!(
                s["cost"].as_str().unwrap().starts_with("removes "),
                "{name}"
            );
            assert!(s["rows"]["runtime_events"].as_u64().unwrap() >= 1);
        }
        assert_eq!(ws.tables(), original, "{name}: a dry run writes nothing");

        // Apply.
        let done = json_of(&ws.run(&["doctor", "excise", "--apply", "--format", "json"]));
        assert_eq!(done["applied"], true);
        assert_after_is_clear(&done, &name);
        let report = scan_report(&ws.db());
        assert_gate_clear_and_startup_unblocked(&report, &name);
        assert!(report.issues.is_empty(), "{name}");
        assert_eq!(schema(&ws.db()), schema_before, "{name}: schema");
        assert_eq!(
            listed_sessions(&ws.db()),
            sessions_before,
            "{name}: sessions and their message counts"
        );
        assert!(
            projection_keys(&ws.db()).is_subset(&projection_before),
            "{name}: a new projection finding"
        );

        // Only the bundles' tables changed, and each lost exactly the bundle's rows.
        let bundles = excise_bundles(&ws);
        assert_eq!(bundles.len(), planned.len(), "{name}");
        let mut removed: BTreeMap<String, usize> = BTreeMap::new();
        for b in &bundles {
            let bundle = Bundle::from_json_text(&std::fs::read_to_string(b).unwrap()).unwrap();
            assert_eq!(bundle.kind.as_deref(), Some("excise"));
            for (t, rows) in &bundle.tables {
                *removed.entry(t.clone()).or_default() += rows.len();
                assert!(
                    !["session_metadata", "session_messages"].contains(&t.as_str()),
                    "{name}: {t} is never excised"
                );
            }
            let excised: Vec<String> = bundle.excise.as_ref().unwrap()["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["event_id"].as_str().unwrap().to_owned())
                .collect();
            // The bundle replays and shows the excised events.
            let o = common::wsledger(&[
                "replay",
                "--bundle",
                b.to_str().unwrap(),
                "--format",
                "json",
            ]);
            assert!(o.status < 2, "{name}: {}", o.stderr);
            let text = &o.stdout;
            for e in &excised {
                assert!(text.contains(e.as_str()), "{name}: replay shows {e}");
            }
        }
        let after = ws.tables();
        for (t, rows) in &original {
            let gone = removed.get(t).copied().unwrap_or(0);
            assert_eq!(after[t].len() + gone, rows.len(), "{name}: table {t}");
            if gone == 0 {
                assert_eq!(&after[t], rows, "{name}: table {t} changed");
            }
        }
        // A second run finds nothing to do.
        let again = json_of(&ws.run(&["doctor", "excise", "--format", "json"]));
        assert!(again["sessions"].as_array().unwrap().is_empty(), "{name}");
        // Then finalize-runs closes every stuck run, as Maka's start-up would.
        let fin = Ws::copy_db(&ws.db());
        let o = fin.run(&["doctor", "finalize-runs", "--apply", "--no-backup"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let r = scan_report(&fin.db());
        assert_gate_clear_and_startup_unblocked(&r, &name);
        assert!(
            r.runs
                .iter()
                .all(|x| x.state != wsledger::scan::runs::RunState::Stuck),
            "{name}: a stuck run is left after finalize-runs"
        );

        // Restore: every table as it was.
        let o = ws.restore(&["--apply"], &bundles);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let restored = ws.tables();
        assert_eq!(restored.len(), original.len());
        for (t, rows) in &original {
            assert_eq!(&restored[t], rows, "{name}: table {t} after restore");
        }
        // Restoring twice is refused and changes nothing.
        let hash = ws.db_hash();
        let o = ws.restore(&["--apply"], &bundles);
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert_eq!(ws.db_hash(), hash);
    }
}

#[test]
fn a_healthy_workspace_has_an_empty_plan_and_apply_changes_nothing() {
    let ws = Ws::copy_db(Path::new("fixtures/healthy/runtime.sqlite"));
    let before = ws.state();
    let doc = ws.apply_changes_nothing("excise", &before);
    assert!(doc["sessions"].as_array().unwrap().is_empty());
}

#[test]
fn table_and_ndjson_output_say_what_is_removed_and_from_which_conversation() {
    let ws = Ws::copy_db(Path::new("fixtures/corrupt-ledger/runtime.sqlite"));
    let o = ws.run(&["doctor", "excise"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "cost    removes 1 tool result from conversation \"Old session (damaged in December)\""
        ),
        "{text}"
    );
    assert!(text.contains("orphan_response"), "{text}");
    assert!(text.contains("after   tool writes refused: no"), "{text}");
    let lines = ndjson(&ws.run(&["doctor", "excise", "--format", "ndjson"]));
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[1]["type"], "summary");
}

#[test]
fn refusals_create_nothing() {
    // The workspace-authority session.
    let ws = Ws::copy_db(Path::new("fixtures/orphan-response/runtime.sqlite"));
    let before = ws.state();
    let o = ws.apply_to_workspace_authority("excise");
    assert_refused(&o);
    assert!(stderr(&o).contains("hint:"));
    // A bundle directory that cannot be made.
    assert_refused(&ws.apply_out_below_a_file("excise"));
    // A bundle directory inside `sessions/`.
    let o = ws.apply_out("excise", &ws.root().join("sessions/x"));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    ws.assert_unchanged(&before);
}

#[test]
fn a_held_owner_lock_refuses_and_changes_nothing() {
    let ws = Ws::copy_db(Path::new("fixtures/orphan-response/runtime.sqlite"));
    let held = ws.hold_owner_lock();
    let before = ws.state();
    let o = ws.run(&["doctor", "excise", "--apply"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("owner.lock"), "{}", stderr(&o));
    ws.assert_unchanged(&before);
    drop(held);
    let o = ws.run(&["doctor", "excise", "--apply"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(excise_bundles(&ws).len(), 1);
}

#[test]
fn restore_refuses_mixed_kinds_and_another_schema() {
    let ws = Ws::copy_db(Path::new("fixtures/orphan-response/runtime.sqlite"));
    ws.apply_no_backup("excise");
    let b = excise_bundles(&ws).pop().unwrap();
    // An old quarantine bundle (no `kind`) named with it.
    let q = Ws::copy_db(Path::new("fixtures/corrupt-ledger/runtime.sqlite"));
    q.apply_no_backup("quarantine");
    let qb = std::fs::read_dir(q.bundles())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".bundle.json"))
        .unwrap();
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&qb).unwrap()).unwrap();
    assert_eq!(doc["kind"], "quarantine");
    doc.as_object_mut().unwrap().remove("kind");
    let old = ws.dir.path().join("old.bundle.json");
    std::fs::write(&old, serde_json::to_string(&doc).unwrap()).unwrap();
    let before = ws.db_hash();
    let o = ws.run(&[
        "doctor",
        "restore",
        b.to_str().unwrap(),
        old.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("together"), "{}", stderr(&o));
    // Into a workspace of another release.
    let other = Ws::copy_db(Path::new("fixtures/releases/v0.1.5/healthy/runtime.sqlite"));
    let h = other.db_hash();
    let o = other.run(&["doctor", "restore", "--apply", b.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(other.db_hash(), h);
    assert_eq!(ws.db_hash(), before);
    // A bundle written before `kind` existed is still a quarantine bundle.
    let o = q.run(&[
        "doctor",
        "restore",
        "--apply",
        "--no-backup",
        old.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn repair_on_corrupt_ledger_keeps_both_sessions_accepts_tool_writes_and_leaves_no_stuck_run() {
    let ws = Ws::copy_db(Path::new("fixtures/corrupt-ledger/runtime.sqlite"));
    let sessions = listed_sessions(&ws.db());
    assert_eq!(sessions.len(), 2);
    let o = ws.run(&["doctor", "repair", "--apply"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    // The table says what was removed, and from which conversation.
    assert!(
        text.contains(
            "  removed 1 tool result from conversation \"Old session (damaged in December)\" \
             (7d91bf1b-a11e-44a9-8736-0a152a7c712a); bundle: "
        ),
        "{text}"
    );
    assert!(
        text.contains("rescan: tool writes accepted; start-up not blocked; 0 stuck run(s)"),
        "{text}"
    );
    assert_eq!(
        listed_sessions(&ws.db()),
        sessions,
        "both sessions, every message"
    );
    let report = scan_report(&ws.db());
    assert!(!report.maka_gate.tool_writes_refused);
    assert!(report
        .runs
        .iter()
        .all(|r| r.state != wsledger::scan::runs::RunState::Stuck));
    assert_eq!(excise_bundles(&ws).len(), 1);
    // A stuck run of an excised session is finalized after the excision too.
    let o = ws.run(&["doctor", "finalize-runs", "--format", "json"]);
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(plan["plan"].as_array().unwrap().is_empty(), "{plan:#}");
}

#[test]
fn gaps_an_excision_bundle_explains_are_info_naming_it_and_other_gaps_stay_warnings() {
    let ws = Ws::copy_db(Path::new("fixtures/corrupt-ledger/runtime.sqlite"));
    ws.apply_no_backup("excise");
    let bundle = excise_bundles(&ws).pop().unwrap();
    // As `doctor scan` reports them.
    let codes = |ws: &Ws| {
        let o = ws.run(&["doctor", "scan", "--format", "json"]);
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"].as_str().unwrap().contains("gap"))
            .map(|f| {
                let text = |k: &str| f[k].as_str().unwrap().to_owned();
                (text("code"), text("severity"), text("message"))
            })
            .collect::<Vec<_>>()
    };
    let found = codes(&ws);
    let got: BTreeSet<(&str, &str)> = found
        .iter()
        .map(|(c, s, _)| (c.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        got,
        BTreeSet::from([
            ("event_seq_gap_excised", "info"),
            ("ordinal_gap_excised", "info")
        ]),
        "{found:?}"
    );
    let name = bundle.display().to_string();
    assert!(found.iter().all(|(_, _, m)| m.contains(&name)), "{found:?}");
    // Moved away, the bundle explains nothing: the gaps are warnings again.
    std::fs::rename(&bundle, ws.dir.path().join("elsewhere.json")).unwrap();
    let got: BTreeSet<(String, String)> = codes(&ws).into_iter().map(|(c, s, _)| (c, s)).collect();
    let want = [("event_seq_gap", "warning"), ("ordinal_gap", "warning")];
    assert_eq!(
        got,
        want.iter()
            .map(|(c, s)| (c.to_string(), s.to_string()))
            .collect::<BTreeSet<_>>()
    );
}

#[test]
fn an_excised_dispatch_takes_its_operation_and_journal_rows_and_a_referencing_row_blocks() {
    let ws = Ws::copy_db(Path::new("fixtures/healthy/runtime.sqlite"));
    let c = rusqlite::Connection::open(ws.db()).unwrap();
    let (op, call, dispatch, session): (String, String, String, String) = c
        .query_row(
            "SELECT o.operation_id, o.call_event_id, o.dispatch_event_id, e.session_id \
             FROM tool_operations o JOIN runtime_events e ON e.event_id = o.dispatch_event_id \
             ORDER BY o.operation_id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    let journal: i64 = c
        .query_row(
            "SELECT count(*) FROM tool_journal_events WHERE operation_id = ?1 \
             OR runtime_event_id = ?2",
            [&op, &dispatch],
            |r| r.get(0),
        )
        .unwrap();
    assert!(journal >= 1);
    let w = Workspace::open_read_only(&ws.db()).unwrap();
    let x = w
        .excision(&session, std::slice::from_ref(&dispatch))
        .unwrap();
    assert!(x.blockers.is_empty(), "{:?}", x.blockers);
    assert_eq!(x.rows("runtime_events").len(), 1);
    assert_eq!(x.rows("runtime_session_event_ordinals").len(), 1);
    assert_eq!(x.rows("tool_operations").len(), 1);
    assert_eq!(x.rows("tool_journal_events").len() as i64, journal);
    // The copy with the excision applied lost exactly those rows; the file nothing.
    let before = w.dump_tables().unwrap();
    let copy = w.excised_copy(std::slice::from_ref(&x)).unwrap();
    let after = copy.dump_tables().unwrap();
    for (t, rows) in &before {
        assert_eq!(
            after[t].len() + x.rows(t).len(),
            rows.len(),
            "table {t} of the excised copy"
        );
    }
    drop(copy);
    assert_eq!(w.dump_tables().unwrap(), before);
    drop(w);
    // A row that references the event through a key without a cascade blocks it.
    reference_without_cascade(&c, &call);
    drop(c);
    let w = Workspace::open_read_only(&ws.db()).unwrap();
    let x = w.excision(&session, &[call]).unwrap();
    assert_eq!(x.blockers.len(), 1, "{:?}", x.blockers);
    assert!(x.blockers[0].contains("runtime_workspace_epochs"));
}

#[test]
fn where_excision_cannot_heal_the_plan_falls_back_to_quarantine_and_says_why() {
    let ws = Ws::copy_db(Path::new("fixtures/corrupt-ledger/runtime.sqlite"));
    let orphan = "fca88b95-bf99-4172-bc37-52b9b4d96c87";
    reference_without_cascade(&rusqlite::Connection::open(ws.db()).unwrap(), orphan);
    let before = ws.db_hash();
    let doc = json_of(&ws.run(&["doctor", "excise", "--apply", "--format", "json"]));
    assert_eq!(doc["applied"], false, "nothing excised: {doc:#}");
    let s = &doc["sessions"][0];
    assert_eq!(s["excised"], false);
    assert!(
        s["fallback"]
            .as_str()
            .unwrap()
            .contains("runtime_workspace_epochs"),
        "{s}"
    );
    assert_eq!(ws.db_hash(), before);
    assert!(excise_bundles(&ws).is_empty());
    // The writing commands judge the excision (`doctor scan` only names it): repair's
    // plan quarantines the session instead.
    let o = ws.run(&["doctor", "repair", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let repair: Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &repair["diagnosis"];
    let damaged = &d["damaged_sessions"][0];
    assert_eq!(damaged["remedy"], "quarantine");
    assert!(damaged["excise_fallback"]
        .as_str()
        .unwrap()
        .contains("runtime_workspace_epochs"));
    let actions: Vec<&str> = d["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["quarantine", "finalize_runs"]);
    assert!(d["plan"]["steps"][0]["costs"]
        .as_str()
        .unwrap()
        .contains("hides conversation \"Old session (damaged in December)\""));
}
