//! `doctor repair` on copies of the real fixtures: the dry run changes nothing and
//! prints the scan's plan; `--apply` leaves the gate clear, start-up unblocked and no
//! stuck run; its bundles restore exactly; a second run plans nothing; refusals change
//! nothing; a killed apply leaves the old, the quarantined or the finished database.

mod common;

use std::path::Path;

use common::crash::{trials, Killer};
use common::writing::{
    assert_after_is_clear, assert_gate_clear_and_startup_unblocked, assert_refused, scan_report,
};
use common::{json_of, stderr, Ws};
use wsledger::bundle::{Bundle, Cell};
use wsledger::db::Workspace;
use wsledger::scan::runs::RunState;

/// Every bundled real workspace that is damaged or has a stuck run.
fn broken_fixtures() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("fixtures")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("generation.json").exists())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "healthy")
        .collect();
    v.sort();
    assert_eq!(v.len(), 10, "{v:?}");
    v
}

#[test]
fn repair_leaves_every_broken_real_workspace_clear_and_its_bundles_restore_exactly() {
    for name in broken_fixtures() {
        let ws = Ws::copy(&name);
        let untouched = Ws::copy(&name);
        // Dry run: the plan, nothing written.
        let before = ws.db_hash();
        let dry = json_of(&ws.run(&["doctor", "repair", "--format", "json"]));
        assert_eq!(ws.db_hash(), before, "{name}");
        assert_eq!(dry["applied"], false);
        let steps = dry["diagnosis"]["plan"]["steps"].as_array().unwrap();
        assert!(!steps.is_empty(), "{name}: nothing planned");
        assert!(!ws.has_backup());

        let doc = json_of(&ws.run(&["doctor", "repair", "--apply", "--format", "json"]));
        assert_eq!(doc["applied"], true, "{name}");
        assert!(doc["backup"].is_string(), "{name}: one backup");
        assert_eq!(
            ws.files().iter().filter(|f| f.ends_with(".bak")).count(),
            1,
            "{name}: exactly one backup"
        );
        assert_after_is_clear(&doc, &name);
        assert_eq!(doc["after"]["stuck_runs"], 0, "{name}");
        // Our own rescan agrees.
        let after = scan_report(&ws.db());
        assert_gate_clear_and_startup_unblocked(&after, &name);
        assert!(
            after.runs.iter().all(|r| r.state != RunState::Stuck),
            "{name}"
        );
        // A second run finds nothing to do and writes nothing.
        let h = ws.db_hash();
        let again = json_of(&ws.run(&["doctor", "repair", "--apply", "--format", "json"]));
        assert_eq!(again["applied"], false, "{name}");
        assert_eq!(
            again["diagnosis"]["plan"]["steps"]
                .as_array()
                .unwrap()
                .len(),
            0,
            "{name}: {again:#}"
        );
        assert_eq!(ws.db_hash(), h, "{name}");

        // One bundle per damaged session: an excision where it heals the session, a
        // quarantine elsewhere; each gives back every row it holds, exactly.
        let bundles = ws.bundle_paths();
        let damaged = dry["diagnosis"]["damaged_sessions"].as_array().unwrap();
        assert_eq!(bundles.len(), damaged.len(), "{name}");
        if bundles.is_empty() {
            continue;
        }
        let kind = |b: &String| {
            Bundle::from_json_text(&std::fs::read_to_string(b).unwrap())
                .unwrap()
                .kind
                .unwrap()
        };
        for (kind_name, remedy) in [("excise", "excise"), ("quarantine", "quarantine")] {
            let these: Vec<&String> = bundles.iter().filter(|b| kind(b) == kind_name).collect();
            let planned = damaged.iter().filter(|s| s["remedy"] == remedy).count();
            assert_eq!(these.len(), planned, "{name}: {kind_name} bundles");
        }
        let excised_rows: Vec<(String, Vec<Cell>)> = bundles
            .iter()
            .filter(|b| kind(b) == "excise")
            .flat_map(|b| {
                let bundle = Bundle::from_json_text(&std::fs::read_to_string(b).unwrap()).unwrap();
                bundle
                    .tables
                    .into_iter()
                    .flat_map(|(t, rows)| {
                        rows.into_iter().map(move |r| {
                            (t.clone(), r.columns.into_iter().map(|(_, c)| c).collect())
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let quarantined: Vec<String> = damaged
            .iter()
            .filter(|s| s["remedy"] == "quarantine")
            .map(|s| s["session_id"].as_str().unwrap().to_owned())
            .collect();
        let q_paths: Vec<&String> = bundles.iter().filter(|b| kind(b) == "quarantine").collect();
        let x_paths: Vec<&String> = bundles.iter().filter(|b| kind(b) == "excise").collect();
        let mut excised_back = true;
        for (group, excise) in [(q_paths, false), (x_paths, true)] {
            if group.is_empty() {
                continue;
            }
            let h = ws.db_hash();
            let o = ws.restore(&["--apply"], &group);
            if excise && o.status.code() == Some(2) {
                // The terminal event finalize wrote took the excised event's
                // event_seq or ordinal (it was the run's last): refused, nothing changed.
                assert!(stderr(&o).contains("collides"), "{name}: {}", stderr(&o));
                assert_eq!(ws.db_hash(), h, "{name}");
                excised_back = false;
                continue;
            }
            assert!(o.status.success(), "{name}: {}", stderr(&o));
        }
        let restored = Workspace::open_read_only(&ws.db()).unwrap();
        let original = Workspace::open_read_only(&untouched.db()).unwrap();
        for s in &quarantined {
            assert_eq!(
                restored.deletion(s).unwrap().tables,
                original.deletion(s).unwrap().tables,
                "{name}: session {s}"
            );
        }
        let dump = restored.dump_tables().unwrap();
        for (t, row) in excised_rows.iter().filter(|_| excised_back) {
            assert!(
                dump[t].contains(row),
                "{name}: an excised row of {t} is back"
            );
        }
    }
}

#[test]
fn a_healthy_workspace_plans_nothing_and_apply_changes_nothing() {
    let ws = Ws::copy("healthy");
    let before = ws.db_hash();
    let o = ws.run(&["doctor", "repair", "--apply"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("plan: nothing to do"), "{out}");
    assert_eq!(ws.db_hash(), before);
    assert!(!ws.has_backup());
    assert!(!ws.bundles().exists());
}

#[test]
fn a_held_owner_lock_refuses_and_changes_nothing() {
    let ws = Ws::copy("corrupt-ledger");
    let held = ws.hold_owner_lock();
    let before = ws.db_hash();
    let o = ws.run(&["doctor", "repair", "--apply"]);
    assert_refused(&o);
    assert!(stderr(&o).contains("owner.lock"), "{}", stderr(&o));
    assert_eq!(ws.db_hash(), before);
    assert!(!ws.bundles().exists(), "nothing created before the refusal");
    assert!(!ws.has_backup());
    drop(held);
    let o = ws.run(&["doctor", "repair", "--apply"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // One lock for both steps.
    assert_eq!(
        stderr(&o).matches("owner lock:").count(),
        1,
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_read_only_database_refuses_and_changes_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Ws::copy("stuck-running");
    let before = ws.db_hash();
    std::fs::set_permissions(ws.db(), std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = ws.run(&["doctor", "repair", "--apply"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("read-only"), "{}", stderr(&o));
    assert!(stderr(&o).contains("hint:"));
    assert_eq!(ws.db_hash(), before);
    assert!(!ws.has_backup());
}

#[test]
fn github_format_is_refused() {
    let ws = Ws::copy("stuck-running");
    let o = ws.run(&["doctor", "repair", "--format", "github"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
}

#[test]
fn a_killed_apply_leaves_the_old_the_quarantined_or_the_finished_database() {
    let trials = trials(15, 60);
    // Both steps: a damaged session to set aside, then a stuck run to finalize.
    let fixture = "corrupt-ledger";
    let args = ["doctor", "repair", "--apply", "--no-backup"];
    let original = Ws::copy(fixture).tables();
    let half = Ws::copy(fixture);
    // The plan's first step is the excision of the damaged event.
    assert!(half
        .run(&["doctor", "excise", "--apply", "--no-backup"])
        .status
        .success());
    let quarantined = half.tables();
    let done = Ws::copy(fixture);
    let mut killer = Killer::timing(done.command(&args));
    let finished = done.tables();
    assert!(original != quarantined && quarantined != finished);
    let seed = killer.seed;
    let (mut old, mut mid, mut new) = (0, 0, 0);
    for trial in 0..trials {
        let ws = killer.kill_on_copy(fixture, trial, |ws| ws.command(&args));
        let now = ws.tables();
        if now == original {
            old += 1;
            continue;
        }
        // Once the quarantine committed, its bundle is complete on disk.
        assert_eq!(ws.bundle_paths().len(), 1, "trial {trial} (seed {seed})");
        if now == quarantined {
            mid += 1;
        } else if now == finished {
            new += 1;
        } else {
            panic!("trial {trial} (seed {seed}): partly written");
        }
        // Whatever was left, running it again finishes the job.
        let o = ws.run(&args);
        assert!(o.status.success(), "trial {trial}: {}", stderr(&o));
        assert_eq!(ws.tables(), finished, "trial {trial} (seed {seed})");
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "{trials} trials: {old} unchanged, {mid} quarantined, {new} repaired (seed {seed})"
        );
    }
}

#[test]
fn repair_leaves_every_broken_release_workspace_clear() {
    let mut seen = 0;
    for tag in ["v0.1.5", "v0.1.7", "v0.1.11"] {
        for sc in std::fs::read_dir(Path::new("fixtures/releases").join(tag)).unwrap() {
            let name = format!(
                "releases/{tag}/{}",
                sc.unwrap().file_name().to_string_lossy()
            );
            if name.ends_with("/healthy")
                || !Path::new("fixtures")
                    .join(&name)
                    .join("runtime.sqlite")
                    .exists()
            {
                continue;
            }
            seen += 1;
            let ws = Ws::copy(&name);
            let doc = json_of(&ws.run(&["doctor", "repair", "--apply", "--format", "json"]));
            assert_eq!(doc["applied"], true, "{name}");
            assert_after_is_clear(&doc, &name);
            assert_eq!(doc["after"]["stuck_runs"], 0, "{name}");
            let h = ws.db_hash();
            let again = json_of(&ws.run(&["doctor", "repair", "--apply", "--format", "json"]));
            assert_eq!(again["applied"], false, "{name}");
            assert_eq!(ws.db_hash(), h, "{name}");
        }
    }
    assert_eq!(seen, 8);
}

#[test]
fn a_file_no_repair_may_write_is_refused_before_anything_is_created() {
    let ws = Ws::copy("corrupt-ledger");
    let c = rusqlite::Connection::open(ws.db()).unwrap();
    c.execute_batch("ALTER TABLE tool_journal_events ADD COLUMN extra TEXT")
        .unwrap();
    drop(c);
    let before = ws.db_hash();
    let o = ws.run(&["doctor", "repair", "--apply"]);
    assert_refused(&o);
    assert!(
        stderr(&o).contains("cannot be repaired in its schema"),
        "{}",
        stderr(&o)
    );
    assert_eq!(ws.db_hash(), before);
    assert!(!ws.bundles().exists());
    assert!(!ws.has_backup());
}
