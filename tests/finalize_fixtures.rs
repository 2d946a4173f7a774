//! `doctor finalize-runs` on the real fixtures (always on copies).

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::finalize::*;
use common::{integrity_ok, names, stderr, text_pairs};
use serde_json::Value;
use wsledger::scan::runs::RunState;

/// Fixtures with stuck runs, and the recovery reason Maka's recovery picks for each
/// (from the run's last operational event and header status).
const STUCK: &[(&str, &str)] = &[
    ("stuck-running", "run_interrupted"),
    ("corrupt-ledger", "run_interrupted"),
    ("crash-mid-tool", "tool_interrupted"),
];

fn verdict(name: &str) -> Value {
    common::verdict(&Path::new("fixtures").join(name))
}

/// `(session, run)` of the stuck runs Maka reports for a fixture.
fn verdict_stuck(name: &str) -> BTreeSet<(String, String)> {
    let runs = &verdict(name)["summary"]["stuckRunningRuns"];
    text_pairs(runs.as_array().unwrap(), "sessionId", "runId")
        .into_iter()
        .collect()
}

fn plan_runs(doc: &Value) -> BTreeSet<(String, String)> {
    text_pairs(doc["plan"].as_array().unwrap(), "session_id", "run_id")
        .into_iter()
        .collect()
}

#[test]
fn dry_run_plans_every_stuck_run_and_changes_no_byte() {
    for (name, reason) in STUCK {
        let ws = Ws::copy(name);
        let before = ws.hash();
        let listing = names(&ws.root());
        let o = ws.finalize(&["--format", "json"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let doc = stdout_json(&o);
        // The contract's fields, exactly.
        let keys: Vec<&str> = doc
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "schema_version",
                "plan",
                "skipped",
                "applied",
                "backup",
                "schema_basis",
                "apply_refusal"
            ],
            "{name}"
        );
        assert_eq!(doc["applied"], Value::Bool(false));
        assert_eq!(doc["backup"], Value::Null);
        assert_eq!(plan_runs(&doc), verdict_stuck(name), "{name}");
        for e in doc["plan"].as_array().unwrap() {
            let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                [
                    "session_id",
                    "run_id",
                    "action",
                    "status",
                    "failure_class",
                    "event_id",
                    "recovery_reason",
                    "event_seq",
                    "ordinal",
                    "ts"
                ]
            );
            assert_eq!(e["action"], "finalize");
            assert_eq!(e["status"], "failed");
            assert_eq!(e["failure_class"], "app_restarted");
            assert_eq!(e["recovery_reason"], *reason, "{name}");
        }
        // Table and NDJSON dry runs too.
        assert!(ws.finalize(&[]).status.success());
        let nd = ws.finalize(&["--format", "ndjson"]);
        let lines = common::ndjson_lines(&String::from_utf8(nd.stdout).unwrap());
        assert_eq!(lines.last().unwrap()["type"], "summary");
        assert_eq!(
            lines.iter().filter(|l| l["type"] == "plan").count(),
            verdict_stuck(name).len()
        );
        assert_eq!(ws.hash(), before, "{name}: the dry run changed the file");
        assert_eq!(names(&ws.root()), listing, "{name}: the dry run made files");
    }
}

#[test]
fn apply_leaves_no_stuck_run_no_new_finding_and_the_same_schema() {
    for (name, _) in STUCK {
        let ws = Ws::copy(name);
        let before = ws.scan();
        let schema = ws.schema();
        let rows_before = ws.dump();
        let o = ws.finalize(&["--apply", "--format", "json"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let doc = stdout_json(&o);
        assert_eq!(doc["applied"], Value::Bool(true));
        assert!(
            stderr(&o).contains("Maka adopts") || stderr(&o).contains("adopts the terminal"),
            "{name}: the output must say Maka adopts the header: {}",
            stderr(&o)
        );
        // The backup is complete: it holds exactly the rows from before.
        let backup = doc["backup"].as_str().expect("a backup path");
        assert!(backup.contains("runtime.sqlite.wsledger-") && backup.ends_with(".bak"));
        assert_eq!(
            dump(Path::new(backup)),
            rows_before,
            "{name}: backup differs"
        );

        let after = ws.scan();
        assert!(stuck(&after).is_empty(), "{name}: {:?}", stuck(&after));
        assert_eq!(
            new_findings(&before, &after),
            Vec::<String>::new(),
            "{name}"
        );
        assert_eq!(ws.schema(), schema, "{name}: sqlite_schema changed");
        assert!(integrity_ok(&ws.db()));
        for (s, r) in plan_runs(&doc) {
            let run = after
                .runs
                .iter()
                .find(|x| x.session_id == s && x.run_id == r)
                .unwrap();
            // Without --project-header the header is left for Maka to adopt.
            assert_eq!(run.state, RunState::AwaitingAdoption, "{name}");
        }

        // A second apply has nothing to do and writes nothing.
        let hash = ws.hash();
        let again = stdout_json(&ws.finalize(&["--apply", "--format", "json"]));
        assert_eq!(again["plan"], Value::Array(Vec::new()), "{name}");
        assert_eq!(again["applied"], Value::Bool(false));
        assert_eq!(again["backup"], Value::Null);
        let skipped = again["skipped"].as_array().unwrap();
        let awaiting = skipped
            .iter()
            .filter(|s| s["reason"] == "awaiting_adoption");
        let adopt: BTreeSet<(String, String)> = text_pairs(awaiting, "session_id", "run_id")
            .into_iter()
            .collect();
        assert_eq!(adopt, plan_runs(&doc), "{name}");
        assert_eq!(ws.hash(), hash, "{name}: the second apply wrote");
    }
}

#[test]
fn project_header_ends_with_what_makas_recovery_ends_with() {
    for (name, _) in STUCK {
        let ws = Ws::copy(name);
        let before = ws.scan();
        let schema = ws.schema();
        let o = ws.finalize(&[
            "--apply",
            "--project-header",
            "--no-backup",
            "--format",
            "json",
        ]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let doc = stdout_json(&o);
        assert_eq!(doc["backup"], Value::Null);
        let after = ws.scan();
        assert_eq!(
            new_findings(&before, &after),
            Vec::<String>::new(),
            "{name}"
        );
        assert_eq!(ws.schema(), schema);
        // Maka's own recovery of the same file (verdict.json startupRecovery).
        for change in verdict(name)["startupRecovery"]["runChanges"]
            .as_array()
            .unwrap()
        {
            let (s, r) = (
                change["sessionId"].as_str().unwrap(),
                change["runId"].as_str().unwrap(),
            );
            let run = after
                .runs
                .iter()
                .find(|x| x.session_id == s && x.run_id == r)
                .unwrap();
            assert_eq!(run.state, RunState::Terminal, "{name}");
            let h = after
                .headers
                .iter()
                .find(|x| x.session_id == s && x.run_id == r)
                .unwrap();
            assert_eq!(h.status.as_str(), change["headerStatusAfter"]);
            assert_eq!(
                h.failure_class.as_deref(),
                change["headerFailureClassAfter"].as_str()
            );
            assert_eq!(run.terminal_event_ids.len(), 1);
        }
        // Run event, transcript record and session status as Maka writes them.
        let c = ws.conn();
        for (s, r) in plan_runs(&doc) {
            let last: String = c
                .query_row(
                    "SELECT event_type FROM core_agent_run_events WHERE session_id = ?1 \
                     AND run_id = ?2 ORDER BY sequence DESC LIMIT 1",
                    [&s, &r],
                    |x| x.get(0),
                )
                .unwrap();
            assert_eq!(last, "run_failed");
            let turn_state: String = c
                .query_row(
                    "SELECT record_json FROM session_messages WHERE session_id = ?1 \
                     AND message_type = 'turn_state' ORDER BY sequence DESC LIMIT 1",
                    [&s],
                    |x| x.get(0),
                )
                .unwrap();
            assert!(turn_state.contains(r#""status":"failed""#), "{turn_state}");
            let session: String = c
                .query_row(
                    "SELECT payload_json FROM session_metadata WHERE session_id = ?1",
                    [&s],
                    |x| x.get(0),
                )
                .unwrap();
            assert!(
                !session.contains(r#""status":"running""#)
                    && !session.contains(r#""status":"waiting_for_user""#),
                "{session}"
            );
        }
        let again = stdout_json(&ws.finalize(&["--apply", "--project-header", "--format", "json"]));
        assert_eq!(again["plan"], Value::Array(Vec::new()));
        assert_eq!(again["skipped"], Value::Array(Vec::new()));
    }
}

#[test]
fn stuck_running_needs_no_transcript_write_and_unblocks_its_session() {
    // Its transcript already caches a failed turn and its session is `blocked`.
    let ws = Ws::copy("stuck-running");
    let messages = |ws: &Ws| -> i64 {
        ws.conn()
            .query_row("SELECT count(*) FROM session_messages", [], |r| r.get(0))
            .unwrap()
    };
    let versions = |ws: &Ws| -> i64 {
        ws.conn()
            .query_row(
                "SELECT sum(metadata_version) FROM session_metadata",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    let (m, v) = (messages(&ws), versions(&ws));
    let o = ws.finalize(&["--apply", "--project-header", "--no-backup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(messages(&ws), m);
    // The stuck run's session was left `blocked` by the latched store: recovery sets
    // it `active` (one header update), as every release's own recovery does.
    assert_eq!(versions(&ws), v + 1);
    let blocked: i64 = ws
        .conn()
        .query_row(
            "SELECT count(*) FROM session_metadata \
             WHERE json_extract(payload_json, '$.status') = 'blocked'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(blocked, 0);
}

#[test]
fn a_rerun_from_the_backup_writes_the_same_bytes() {
    for (name, _) in STUCK {
        let first = Ws::copy(name);
        let o = first.finalize_env(
            &["--apply", "--project-header", "--format", "json"],
            &[("WSLEDGER_NOW_MS", "1800000000000")],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let doc = stdout_json(&o);
        let backup = doc["backup"].as_str().unwrap().to_owned();
        assert!(
            backup.ends_with("runtime.sqlite.wsledger-20270115T080000Z.bak"),
            "{backup}"
        );
        let second = Ws::copy(name);
        std::fs::copy(&backup, second.db()).unwrap();
        let o2 = second.finalize_env(
            &["--apply", "--project-header", "--format", "json"],
            &[("WSLEDGER_NOW_MS", "1900000000000")],
        );
        let doc2 = stdout_json(&o2);
        assert_eq!(doc["plan"], doc2["plan"], "{name}");
        assert_eq!(
            first.dump(),
            second.dump(),
            "{name}: different bytes on a rerun"
        );
    }
}

#[test]
fn the_unreadable_run_is_skipped_with_rows_undecodable() {
    let ws = Ws::copy("damage-undecodable-row");
    let want = &verdict("damage-undecodable-row")["summary"]["unreadableRuns"][0];
    let before = ws.hash();
    let doc = stdout_json(&ws.finalize(&["--apply", "--format", "json"]));
    assert_eq!(doc["plan"], Value::Array(Vec::new()));
    let skipped = doc["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["session_id"], want["sessionId"]);
    assert_eq!(skipped[0]["run_id"], want["runId"]);
    assert_eq!(skipped[0]["reason"], "rows_undecodable");
    assert!(!skipped[0]["detail"].as_str().unwrap().is_empty());
    // An empty plan takes no lock, makes no backup and writes nothing.
    assert_eq!(doc["applied"], Value::Bool(false));
    assert_eq!(doc["backup"], Value::Null);
    assert_eq!(ws.hash(), before);
    assert!(!ws.control().exists());
}

#[test]
fn check_fails_while_a_stuck_run_remains() {
    let ws = Ws::copy("stuck-running");
    let before = ws.hash();
    assert_eq!(ws.finalize(&["--check"]).status.code(), Some(1));
    assert_eq!(ws.hash(), before, "--check wrote");
    // --check and --apply exclude each other (a usage error).
    assert_eq!(ws.finalize(&["--check", "--apply"]).status.code(), Some(2));
    assert!(ws.finalize(&["--apply", "--no-backup"]).status.success());
    assert_eq!(ws.finalize(&["--check"]).status.code(), Some(0));
    assert_eq!(
        Ws::copy("healthy").finalize(&["--check"]).status.code(),
        Some(0)
    );
    // A stuck run left out of the plan (here: too recent for --older-than) still fails.
    let ws = Ws::copy("crash-mid-tool");
    let o = ws.finalize_env(
        &["--check", "--older-than", "7d", "--format", "json"],
        &[("WSLEDGER_NOW_MS", "1767895300000")],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout_json(&o)["plan"], Value::Array(Vec::new()));
}

#[test]
fn filters_select_runs() {
    let ws = Ws::copy("crash-mid-tool");
    let (s, r) = verdict_stuck("crash-mid-tool").into_iter().next().unwrap();
    let n = |args: &[&str], now: &str| {
        let o = ws.finalize_env(args, &[("WSLEDGER_NOW_MS", now)]);
        stdout_json(&o)["plan"].as_array().unwrap().len()
    };
    let now = "1767895300000"; // 100 s after the run's last activity
    assert_eq!(n(&["--format", "json", "--session", &s], now), 1);
    assert_eq!(n(&["--format", "json", "--session", "other"], now), 0);
    assert_eq!(n(&["--format", "json", "--run", &r], now), 1);
    assert_eq!(n(&["--format", "json", "--run", "other"], now), 0);
    assert_eq!(n(&["--format", "json", "--older-than", "1m"], now), 1);
    assert_eq!(n(&["--format", "json", "--older-than", "2m"], now), 0);
    assert_eq!(
        ws.finalize(&["--older-than", "soon"]).status.code(),
        Some(2)
    );
}

#[test]
fn event_id_and_ts_are_derived_from_the_run() {
    for (name, _) in STUCK {
        let ws = Ws::copy(name);
        let doc = stdout_json(&ws.finalize(&["--format", "json"]));
        for e in doc["plan"].as_array().unwrap() {
            let (s, r) = (
                e["session_id"].as_str().unwrap(),
                e["run_id"].as_str().unwrap(),
            );
            assert_eq!(
                e["event_id"],
                wsledger::finalize::ids::derived_uuid("wsledger.terminal.v1", s, r)
            );
            // 1 + the latest of: event ts, snapshot updated_at, header updatedAt.
            let c = ws.conn();
            let latest: i64 = c
                .query_row(
                    "SELECT max(t) FROM (
                       SELECT json_extract(payload_json, '$.ts') AS t FROM runtime_events
                         WHERE session_id = ?1 AND run_id = ?2
                       UNION ALL SELECT updated_at FROM runtime_partial_snapshots
                         WHERE session_id = ?1 AND run_id = ?2
                       UNION ALL SELECT json_extract(record_json, '$.updatedAt') FROM core_agent_runs
                         WHERE session_id = ?1 AND run_id = ?2)",
                    [s, r],
                    |x| x.get(0),
                )
                .unwrap();
            assert_eq!(e["ts"], latest + 1, "{name}");
            let seq: i64 = c
                .query_row(
                    "SELECT max(event_seq) FROM runtime_events WHERE session_id = ?1 AND run_id = ?2",
                    [s, r],
                    |x| x.get(0),
                )
                .unwrap();
            assert_eq!(e["event_seq"], seq + 1);
            let ordinal: i64 = c
                .query_row(
                    "SELECT max(ordinal) FROM runtime_session_event_ordinals WHERE session_id = ?1",
                    [s],
                    |x| x.get(0),
                )
                .unwrap();
            assert_eq!(e["ordinal"], ordinal + 1);
        }
    }
}

/// `runs_rows` reads the tool operations of many runs in one statement; each run must
/// get exactly the rows (and order) of the plain per-run query.
#[test]
fn runs_rows_gives_each_run_its_own_tool_operations() {
    for name in [
        "healthy",
        "crash-mid-tool",
        "orphan-response",
        "damage-duplicate-dispatch",
    ] {
        let db = Path::new("fixtures").join(name).join("runtime.sqlite");
        let ws = wsledger::db::Workspace::open_read_only(&db).unwrap();
        let c = rusqlite::Connection::open_with_flags(
            format!("file:{}?mode=ro&immutable=1", db.display()),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap();
        let runs: Vec<(String, String)> = c
            .prepare("SELECT DISTINCT session_id, run_id FROM runtime_events ORDER BY 2 DESC")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let keys: Vec<(&str, &str)> = runs.iter().map(|(s, r)| (s.as_str(), r.as_str())).collect();
        let all = ws.runs_rows(&keys).unwrap();
        assert_eq!(all.len(), runs.len());
        let mut found = 0;
        for ((s, r), rows) in runs.iter().zip(&all) {
            let want: Vec<String> = c
                .prepare(
                    "SELECT operation_id FROM tool_operations WHERE call_event_id IN \
                     (SELECT event_id FROM runtime_events WHERE session_id = ?1 AND run_id = ?2) \
                     ORDER BY invocation_id, operation_id",
                )
                .unwrap()
                .query_map([s, r], |x| x.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let got: Vec<&str> = rows
                .operations
                .iter()
                .map(|o| o.operation_id.as_str())
                .collect();
            assert_eq!(got, want, "{name}: run {r}");
            assert_eq!(ws.run_rows(s, r).unwrap(), *rows, "{name}: run {r}");
            found += want.len();
        }
        assert!(found > 0, "{name}: no operation found");
    }
}

/// The statement behind `runs_rows`: `tool_operations` read in one pass for every
/// run at once (its event ids a list SQLite builds once), never once per run, in
/// table order, and never through an automatic index (which reads the table and sorts
/// it too).
#[test]
fn tool_operations_of_many_runs_are_read_in_one_pass() {
    let ws = wsledger::db::Workspace::open_read_only(Path::new("fixtures/healthy/runtime.sqlite"))
        .unwrap();
    let plan = ws
        .query_plan(wsledger::db::facts::OPERATIONS_OF_RUNS)
        .unwrap();
    let scans: Vec<_> = plan.iter().filter(|l| l.starts_with("SCAN o")).collect();
    assert_eq!(scans.len(), 1, "{plan:?}");
    // In table order: through an index, each row is a seek.
    assert!(!scans[0].contains("INDEX"), "{plan:?}");
    assert!(plan.iter().any(|l| l.contains("LIST SUBQUERY")), "{plan:?}");
    assert!(!plan.iter().any(|l| l.contains("AUTOMATIC")), "{plan:?}");
}
