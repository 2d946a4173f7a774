//! `doctor finalize-runs --apply` refuses or rolls back instead of writing part of a
//! plan: Maka's owner lock held, a run changed since the plan, read-only files, a
//! full disk, an unwritable backup, a schema that is not current, and a process
//! killed at random moments.

mod common;

use common::{STUCK_RUN, STUCK_SESSION, STUCK_TURN};

use std::path::Path;

use common::crash::{trials, Killer};
use common::finalize::*;
use common::writing::{assert_refused, ROOT_ID};
use common::{integrity_ok, stderr, write_marker};
use wsledger::db::write::{ApplyOptions, WriteError, WriteSet, Writer};
use wsledger::finalize::plan_finalize;
use wsledger::finalize::PlanOptions;

/// Applies `writes` (planned before the file changed): refused as a change since the
/// plan, every row left as it was. The error.
fn refused_as_changed(ws: &Ws, writes: &WriteSet) -> WriteError {
    let rows = ws.dump();
    let err = Writer::open(&ws.db(), wsledger::release::repair_basis::schema_gate)
        .unwrap()
        .apply(writes, &ApplyOptions::default())
        .unwrap_err();
    assert!(matches!(err, WriteError::Changed { .. }), "{err}");
    assert_eq!(ws.dump(), rows, "the rolled-back apply left rows behind");
    err
}

#[test]
fn apply_is_refused_while_makas_owner_lock_is_held() {
    let ws = Ws::copy("stuck-running");
    // Maka's lock: an OFD fcntl write lock on <namespace>/<rootId>/owner.lock.
    let held = ws.hold_owner_lock();
    let before = ws.hash();
    let o = ws.finalize(&["--apply"]);
    assert_refused(&o);
    let err = stderr(&o);
    assert!(
        err.contains("error:") && err.contains("owner.lock"),
        "{err}"
    );
    assert!(err.contains("hint:") && err.contains("quit Maka"), "{err}");
    assert_eq!(ws.hash(), before, "written while the lock was held");
    assert!(!ws.has_backup());
    drop(held);

    let o = ws.finalize(&["--apply", "--no-backup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("owner lock:"), "{}", stderr(&o));
    use std::os::unix::fs::PermissionsExt;
    let lock = ws.control().join(ROOT_ID).join("owner.lock");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&lock), 0o600);
    assert_eq!(mode(lock.parent().unwrap()), 0o700);
}

#[test]
fn the_root_binding_row_is_locked_too() {
    let ws = Ws::copy("stuck-running");
    let marker = "a".repeat(64);
    let binding = "b".repeat(64);
    write_marker(&ws.root(), &marker);
    ws.conn()
        .execute(
            "INSERT INTO runtime_storage_root_binding VALUES (1, ?1, 1)",
            [&binding],
        )
        .unwrap();
    let before = ws.hash();
    // Only the binding's lock is held: marker and binding differ, so both are taken.
    let held = wsledger::lock::acquire(&ws.control(), std::slice::from_ref(&binding)).unwrap();
    let o = ws.finalize(&["--apply"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(ws.hash(), before);
    drop(held);
    assert!(ws.finalize(&["--apply", "--no-backup"]).status.success());
}

#[test]
fn a_run_that_changed_after_the_plan_rolls_everything_back() {
    let ws = Ws::copy("stuck-running");
    let opts = PlanOptions {
        project_header: true,
        ..PlanOptions::default()
    };
    let planning = plan_finalize(&ws.db(), &opts).unwrap();
    assert_eq!(planning.plan.plan.len(), 1);
    // Meanwhile another connection appends an event to the planned run.
    let payload = format!(
        r#"{{"actions":{{"stateDelta":{{"k":1}}}},"author":"system","id":"late","invocationId":"{STUCK_RUN}","partial":false,"role":"system","runId":"{STUCK_RUN}","sessionId":"{STUCK_SESSION}","ts":1767708607000,"turnId":"{STUCK_TURN}"}}"#
    );
    {
        let c = ws.conn();
        c.execute(
            "INSERT INTO runtime_events VALUES ('late', ?1, ?2, ?2, ?3, 6, 'runtime_fact', ?4, 1767708607000)",
            rusqlite::params![STUCK_SESSION, STUCK_RUN, STUCK_TURN, payload],
        )
        .unwrap();
        c.execute(
            "INSERT INTO runtime_session_event_ordinals VALUES (?1, 19, 'late')",
            [STUCK_SESSION],
        )
        .unwrap();
    }
    let err = refused_as_changed(&ws, &planning.plan.writes);
    assert!(err.to_string().contains(STUCK_RUN), "{err}");
    assert!(integrity_ok(&ws.db()));

    // A session change (the session header row is written with --project-header).
    let ws = Ws::copy("corrupt-ledger");
    let planning = plan_finalize(&ws.db(), &opts).unwrap();
    ws.conn()
        .execute(
            "UPDATE session_metadata SET metadata_version = metadata_version + 1",
            [],
        )
        .unwrap();
    refused_as_changed(&ws, &planning.plan.writes);
}

#[test]
fn read_only_files_and_directories_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let set = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let ws = Ws::copy("stuck-running");
    let before = ws.hash();
    set(&ws.db(), 0o444);
    let o = ws.finalize(&["--apply"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("read-only"), "{}", stderr(&o));
    set(&ws.db(), 0o644);
    set(&ws.root(), 0o555);
    let o = ws.finalize(&["--apply"]);
    set(&ws.root(), 0o755);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert_eq!(ws.hash(), before);
    assert!(!ws.has_backup());
    // The dry run still works on a read-only file.
    set(&ws.db(), 0o444);
    assert!(ws.finalize(&[]).status.success());
    set(&ws.db(), 0o644);
}

#[test]
fn a_full_disk_rolls_back() {
    let ws = Ws::copy("stuck-running");
    // Pack every page so that any insert needs a new one.
    ws.conn().execute_batch("VACUUM;").unwrap();
    let opts = PlanOptions {
        project_header: true,
        ..PlanOptions::default()
    };
    let planning = plan_finalize(&ws.db(), &opts).unwrap();
    let pages: i64 = ws
        .conn()
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    let rows = ws.dump();
    let err = Writer::open(&ws.db(), wsledger::release::repair_basis::schema_gate)
        .unwrap()
        .apply(
            &planning.plan.writes,
            &ApplyOptions {
                max_page_count: Some(pages),
            },
        )
        .unwrap_err();
    assert!(matches!(err, WriteError::Full { .. }), "{err}");
    assert!(err.to_string().contains("nothing was written"));
    assert_eq!(ws.dump(), rows);
    assert!(integrity_ok(&ws.db()));
    // With room, the same plan applies.
    Writer::open(&ws.db(), wsledger::release::repair_basis::schema_gate)
        .unwrap()
        .apply(&planning.plan.writes, &ApplyOptions::default())
        .unwrap();
}

#[test]
fn an_unwritable_backup_path_stops_before_any_write() {
    let ws = Ws::copy("stuck-running");
    let before = ws.hash();
    let missing = ws.dir.path().join("no").join("such").join("dir");
    let o = ws.finalize_env(
        &["--apply"],
        &[("WSLEDGER_BACKUP_DIR", missing.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("backup failed"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert_eq!(ws.hash(), before);
}

#[test]
fn a_schema_that_differs_in_the_repair_tables_is_refused() {
    for sql in [
        "ALTER TABLE core_agent_run_events ADD COLUMN doctor_note TEXT;",
        "DROP TABLE runtime_session_event_ordinals;",
    ] {
        let ws = Ws::copy("stuck-running");
        ws.conn().execute_batch(sql).unwrap();
        let before = ws.hash();
        let o = ws.finalize(&["--apply"]);
        assert_eq!(o.status.code(), Some(2), "{sql}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot be repaired in its schema"),
            "{}",
            stderr(&o)
        );
        assert_eq!(ws.hash(), before, "{sql}");
        assert!(!ws.has_backup());
    }
}

/// A file that matches no known release but has every repair table exactly as the
/// closest release is repaired on that basis, and says so.
#[test]
fn a_schema_that_differs_elsewhere_is_repaired_on_the_closest_basis() {
    for sql in [
        "CREATE INDEX doctor_idx ON runtime_events(event_kind);",
        "PRAGMA user_version = 11;",
    ] {
        let ws = Ws::copy("stuck-running");
        ws.conn().execute_batch(sql).unwrap();
        let o = ws.finalize(&["--apply", "--no-backup", "--format", "json"]);
        assert_eq!(o.status.code(), Some(0), "{sql}: {}", stderr(&o));
        let doc = stdout_json(&o);
        assert_eq!(doc["applied"], true, "{sql}");
        assert_eq!(doc["schema_basis"]["exact"], false, "{sql}");
        assert_eq!(doc["schema_basis"]["releases"], serde_json::json!(["main"]));
    }
}

#[test]
fn a_killed_apply_leaves_the_file_unchanged_or_fully_finalized() {
    let trials = trials(20, 200);
    let args = ["--apply", "--project-header"];
    let env = [("WSLEDGER_NOW_MS", "1800000000000")];
    // The two states a trial may end in.
    let untouched = Ws::copy("stuck-running");
    let original = untouched.dump();
    let done = Ws::copy("stuck-running");
    let mut killer = Killer::timing(done.finalize_command(&args, &env));
    let finalized = done.dump();
    assert_ne!(original, finalized);

    let seed = killer.seed;
    let (mut unchanged, mut complete) = (0, 0);
    for trial in 0..trials {
        let ws = killer.kill_on_copy("stuck-running", trial, |ws| {
            ws.finalize_command(&args, &env)
        });
        let rows = ws.dump();
        if rows == original {
            unchanged += 1;
        } else if rows == finalized {
            complete += 1;
        } else {
            panic!("trial {trial} (seed {seed}): the file is partly finalized");
        }
        if trial % 10 == 0 {
            // A rerun after the crash completes with the same bytes.
            let o = ws.finalize_env(&args, &env);
            assert!(o.status.success(), "trial {trial}: {}", stderr(&o));
            assert_eq!(ws.dump(), finalized, "trial {trial} (seed {seed})");
        }
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{trials} trials: {unchanged} unchanged, {complete} finalized (seed {seed})");
    }
    assert_eq!(unchanged + complete, trials);
}

#[test]
fn a_plan_that_writes_tool_outcomes_rolls_back_on_any_ledger_change() {
    // The plan writes a T2 outcome, which is only right while Maka's whole-file gate
    // accepts tool writes.
    let ws = outcome_unknown_ws();
    let planning = plan_finalize(&ws.db(), &PlanOptions::default()).unwrap();
    assert_eq!(planning.plan.plan[0].settles, vec![CRASH_OP.to_owned()]);
    // An undecodable row lands in another session meanwhile.
    ws.conn()
        .execute(
            "INSERT INTO runtime_events VALUES ('bad', 'b44b2e58-d1bc-4af6-8ddb-008ac7ee6e58', \
             'i', 'r', 't', 1, 'text', '{}', 1)",
            [],
        )
        .unwrap();
    refused_as_changed(&ws, &planning.plan.writes);
}
