//! `--maka BUILD`: what each Maka build's own code did with files other builds wrote
//! (`fixtures/cross/what-each-build-does.jsonl`, a copy of `../shared/cross/`: 22 real
//! workspaces, each opened by 10 builds) is what `--maka <that build>` says, row for
//! row; `--maka all` says the same in one row per build; and the command line takes
//! the flag, its variable and a bad value as documented.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{copy_fixture, wsledger, wsledger_env};
use serde_json::Value;
use wsledger::scan::pipeline::{scan_path, ScanOptions};
use wsledger::startup::builds::{self, Maka};

/// The fixture copy of a file the cross matrix names (`maka-real/<s>/…`,
/// `maka-releases/<tag>/<s>/…`).
fn fixture_of(file: &str) -> PathBuf {
    let rel = file
        .strip_suffix("/runtime.sqlite")
        .unwrap_or_else(|| panic!("{file}"));
    let dir = match rel.split_once('/') {
        Some(("maka-real", s)) => Path::new("fixtures").join(s),
        Some(("maka-releases", rest)) => Path::new("fixtures/releases").join(rest),
        _ => panic!("{file}"),
    };
    assert!(dir.join("runtime.sqlite").is_file(), "{}", dir.display());
    dir
}

fn startup_as(dir: &Path, maka: Maka) -> Value {
    let report = scan_path(
        &dir.join("runtime.sqlite"),
        ScanOptions {
            maka: Some(maka),
            ..ScanOptions::default()
        },
        &mut |_, _| {},
    )
    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let doc = serde_json::to_value(&report).unwrap();
    match maka {
        Maka::All => doc["compatibility"].clone(),
        Maka::Build(_) => doc["startup"].clone(),
    }
}

/// Every row: the build judged, whether it opens the file, whether that migrates it,
/// its error text exactly, whether its desktop boot deletes the file, and whether its
/// strict start-up completes. The matrix's `desktop_deletes` is `null` for a build
/// without the reset step and `strict_ok`/`strict_error` are `null` where the build
/// does not open the file: wsledger says `false`, and `strict_recovery.runs: false`.
#[test]
fn every_build_judges_every_real_file_as_its_own_code_did() {
    let text = std::fs::read_to_string("fixtures/cross/what-each-build-does.jsonl").unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 220);
    let mut failures = Vec::new();
    let mut by_file: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    let mut deleting = 0;
    for row in &rows {
        let judge = row["judge"].as_str().unwrap();
        let file = row["file"].as_str().unwrap();
        let build = builds::build(judge).unwrap_or_else(|| panic!("{judge} is a build"));
        let st = startup_as(&fixture_of(file), Maka::Build(build));
        let opens = row["opens"].as_bool().unwrap();
        let strict = &st["strict_recovery"];
        let checks = [
            ("release", st["release"] == judge),
            ("opens", st["opens"].as_bool() == Some(opens)),
            (
                "migrates",
                st["migrations"].as_array().is_some_and(|m| !m.is_empty())
                    == row["migrates"].as_bool().unwrap(),
            ),
            (
                "refusal",
                st["refusal"]["maka_message"].as_str() == row["refusal"].as_str(),
            ),
            (
                "desktop_deletes",
                st["desktop_deletes"].as_bool() == Some(row["desktop_deletes"] == true),
            ),
            (
                "strict start-up",
                match row["strict_ok"].as_bool() {
                    None => strict["runs"] == false,
                    Some(ok) => strict["runs"] == true && strict["blocked"] == !ok,
                },
            ),
            (
                "strict error",
                row["strict_error"].is_null()
                    || strict["blockers"].as_array().is_some_and(|b| !b.is_empty()),
            ),
        ];
        for (what, ok) in checks {
            if !ok {
                failures.push(format!(
                    "{judge} on {file}: {what}: Maka {row}; wsledger {st}"
                ));
            }
        }
        deleting += usize::from(row["desktop_deletes"] == true);
        by_file
            .entry(file.to_owned())
            .or_default()
            .insert(judge.to_owned(), st);
    }
    common::assert_no_failures(&failures, "cross rows");
    assert_eq!(deleting, 58, "the matrix's deleting rows");
    // `--maka all` gives the same object per catalogued build.
    for (file, judged) in &by_file {
        let all = startup_as(&fixture_of(file), Maka::All);
        let rows = all.as_array().unwrap();
        let names: Vec<&str> = rows
            .iter()
            .map(|r| r["release"].as_str().unwrap())
            .collect();
        assert_eq!(names, wsledger::release::RELEASES, "{file}");
        for (judge, st) in judged {
            if let Some(row) = rows.iter().find(|r| r["release"] == judge.as_str()) {
                assert_eq!(row, st, "{judge} on {file}: --maka all differs");
            }
        }
    }
}

#[test]
fn a_bad_build_is_exit_2_naming_the_value_and_listing_the_names() {
    let ws = "fixtures/healthy";
    for (args, env) in [
        (vec!["doctor", "scan", "-w", ws, "--maka", "v9"], vec![]),
        (vec!["info", "-w", ws, "--maka", "v9"], vec![]),
        (vec!["doctor", "repair", "-w", ws, "--maka", "v9"], vec![]),
        (
            vec!["doctor", "scan", "-w", ws],
            vec![("WSLEDGER_MAKA", "v9")],
        ),
    ] {
        let out = wsledger_env(&args, &env);
        assert_eq!(out.status, 2, "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{}", out.stdout);
        assert!(out.stderr.contains("`v9`"), "{}", out.stderr);
        assert!(
            out.stderr.contains("v0.1.0, v0.1.1") && out.stderr.contains("main, cef8c44d8"),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("`all`"), "{}", out.stderr);
    }
}

/// A main-branch file judged by v0.1.5: refused in v0.1.5's own words, exit 1, and the
/// desktop warning first on stderr and in the table; the variable does the same.
#[test]
fn an_older_build_refuses_a_newer_file_and_its_desktop_warning_comes_first() {
    let args = [
        "doctor",
        "scan",
        "-w",
        "fixtures/healthy",
        "--maka",
        "v0.1.5",
    ];
    let out = wsledger(&args);
    assert_eq!(out.status, 1, "{}", out.stderr);
    let first = out.stdout.lines().next().unwrap();
    assert!(
        first.starts_with("WARNING: Maka v0.1.5's DESKTOP APP DELETES"),
        "{first}"
    );
    assert!(first.contains("copy the whole workspace folder"), "{first}");
    assert!(out
        .stderr
        .starts_with("warning: Maka v0.1.5's DESKTOP APP DELETES"));
    assert!(out.stdout.contains(
        "start-up: REFUSED: Maka v0.1.5 does not open this file (schema_newer, store runtime): \
         \"SQLite runtime schema 12 is newer than supported version 9\""
    ));
    assert!(out.stdout.contains(
        "other builds: v0.1.0-v0.1.11 refuse (schema newer) · main opens it as it is · v0.1.6 \
         desktop app deletes this file at start"
    ));
    // The advice: open it with the build that wrote it, or newer; no schema surgery.
    assert!(out
        .stdout
        .contains("open it with a Maka main-branch build or newer; do not edit the schema"));
    let env = wsledger_env(&args[..4], &[("WSLEDGER_MAKA", "v0.1.5")]);
    assert_eq!(env.stdout, out.stdout);
    // JSON: the build judged, its message, the deletion.
    let out = wsledger(&[&args[..], &["--format", "json"]].concat());
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let st = &doc["startup"];
    assert_eq!(st["release"], "v0.1.5");
    assert_eq!(st["desktop_deletes"], true);
    assert_eq!(
        st["refusal"]["maka_message"],
        "SQLite runtime schema 12 is newer than supported version 9"
    );
    assert!(doc.get("compatibility").is_none());
    assert_eq!(doc["diagnosis"]["before"]["startup_blocked"], true);
    let f = common::findings_with(&doc, "startup_refused");
    assert_eq!(f[0]["detail"]["release"], "v0.1.5");
}

/// Without `--maka` the writer's start-up stands, and the one line under it says what
/// the other builds do; `--maka all` adds a row per build, and the info command too.
#[test]
fn the_summary_line_and_the_all_table() {
    let out = wsledger(&["doctor", "scan", "-w", "fixtures/releases/v0.1.5/healthy"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("start-up: ok: Maka v0.1.5"))
        .unwrap();
    assert_eq!(
        lines[at + 1],
        "other builds: v0.1.0-v0.1.4 refuse (schema newer) · v0.1.6 migrates runtime 9->10 · \
         v0.1.7-v0.1.10 migrate runtime 9->11 · v0.1.11, main migrate runtime 9->12 · v0.1.6 \
         desktop app deletes this file at start"
    );
    assert!(
        !out.stdout.contains("WARNING"),
        "the writer's own desktop keeps it"
    );
    let all = wsledger(&[
        "doctor",
        "scan",
        "-w",
        "fixtures/releases/v0.1.5/healthy",
        "--maka",
        "all",
    ]);
    for b in wsledger::release::RELEASES {
        assert!(
            all.stdout
                .lines()
                .any(|l| l.starts_with(&format!("│ {b} "))),
            "a row for {b}: {}",
            all.stdout
        );
    }
    assert!(all
        .stdout
        .lines()
        .next()
        .unwrap()
        .contains("Maka v0.1.6's DESKTOP"));
    let info = wsledger(&[
        "info",
        "-w",
        "fixtures/releases/v0.1.5/healthy",
        "--maka",
        "all",
        "--format",
        "json",
    ]);
    let doc: Value = serde_json::from_str(&info.stdout).unwrap();
    assert_eq!(doc["compatibility"].as_array().unwrap().len(), 13, "{doc}");
    assert_eq!(doc["startup"]["release"], "v0.1.5");
}

fn sql(db: &Path, statements: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch(statements)
        .unwrap();
}

fn judged(ws: &Path, build: &str) -> Value {
    startup_as(ws, Maka::Build(builds::build(build).unwrap()))
}

/// v0.1.5's runtime store asserts its capability rows once its composition is open,
/// and its migration steps meet what a file already has, as its own tests left files.
#[test]
fn v015_capabilities_and_a_step_meeting_its_own_table() {
    let (_t, ws) = copy_fixture("releases/v0.1.5/healthy");
    let db = ws.join("runtime.sqlite");
    sql(
        &db,
        "DELETE FROM runtime_capabilities;
         INSERT INTO runtime_capabilities(capability, version) VALUES ('tool_recovery_bundle', 1);",
    );
    let st = judged(&ws, "v0.1.5");
    assert_eq!(st["opens"], false, "{st}");
    assert_eq!(st["refusal"]["reason"], "capability_unavailable");
    assert_eq!(
        st["refusal"]["maka_message"],
        "SQLite runtime recovery capability runtime_recovery_authority@1 is unavailable"
    );
    let (_t, ws) = copy_fixture("releases/v0.1.5/healthy");
    let db = ws.join("runtime.sqlite");
    sql(
        &db,
        "UPDATE runtime_capabilities SET version = 2
           WHERE capability = 'runtime_workspace_version_authority';",
    );
    let st = judged(&ws, "cef8c44d8");
    assert_eq!(
        st["refusal"]["maka_message"],
        "SQLite runtime workspace capability runtime_workspace_version_authority@1 is unavailable"
    );
    let (_t, ws) = copy_fixture("releases/v0.1.5/healthy");
    sql(&ws.join("runtime.sqlite"), "PRAGMA user_version = 8;");
    let st = judged(&ws, "v0.1.5");
    assert_eq!(st["refusal"]["reason"], "migration_failed");
    assert_eq!(
        st["refusal"]["maka_message"],
        "table runtime_storage_root_binding already exists"
    );
}

/// A run whose events do not decode but that has no header is never read by strict
/// recovery (it reads the runs it lists from their headers): it blocks no build.
#[test]
fn an_unreadable_run_without_a_header_blocks_no_strict_start_up() {
    let (_t, ws) = copy_fixture("releases/v0.1.5/healthy");
    sql(
        &ws.join("runtime.sqlite"),
        "INSERT INTO runtime_events(event_id, session_id, invocation_id, run_id, turn_id,
           event_seq, event_kind, payload_json, committed_at)
         VALUES ('orphan-event', 'orphan-session', 'orphan-invocation', 'orphan-run',
           'orphan-turn', 1, 'message', '{not json', 1);",
    );
    for build in ["v0.1.5", "main"] {
        let st = judged(&ws, build);
        assert_eq!(st["opens"], true, "{build}: {st}");
        assert_eq!(st["strict_recovery"]["blocked"], false, "{build}: {st}");
    }
}

/// Maka 0.2, from its release notes: not known whether it opens the file, but its
/// first open deletes the unfinished tasks, counted here per conversation.
#[test]
fn maka_02_is_previewed_from_its_release_notes_with_the_tasks_it_deletes() {
    let (_t, ws) = copy_fixture("healthy");
    let event = |session: &str, seq: i64, task: &str, status: &str| {
        format!(
            "INSERT INTO workflow_task_ledger_events(session_id, sequence, event_id, record_json) \
             VALUES ('{session}', {seq}, 'e{seq}{task}', '{{\"eventId\":\"e{seq}{task}\",\
             \"type\":\"task_updated\",\"sessionId\":\"{session}\",\"taskId\":\"{task}\",\
             \"nextStatus\":\"{status}\",\"task\":{{\"id\":\"{task}\",\"status\":\"{status}\"}}}}');"
        )
    };
    let statements = [
        event("s-a", 0, "t1", "pending"),
        event("s-a", 1, "t1", "completed"),
        event("s-a", 2, "t2", "in_progress"),
        event("s-b", 0, "t3", "blocked"),
        event("s-b", 1, "t4", "pending"),
    ]
    .join("\n");
    sql(&ws.join("runtime.sqlite"), &statements);
    let out = wsledger(&common::scan_json_args(&ws));
    assert_eq!(out.status, 0, "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let targets = doc["upgrade"]["targets"].as_array().unwrap();
    let t = targets.last().unwrap();
    assert_eq!(t["release"], "v0.2.0");
    assert_eq!(t["migration"], "not_known");
    assert!(
        t["composition"].is_null() && t["startup_blocked"].is_null(),
        "{t}"
    );
    assert_eq!(t["unfinished_tasks"]["total"], 3, "{t}");
    assert_eq!(
        t["unfinished_tasks"]["sessions"],
        serde_json::json!([{"session_id": "s-a", "tasks": 1}, {"session_id": "s-b", "tasks": 2}])
    );
    let f = common::findings_with(&doc, "upgrade_deletes_tasks");
    assert_eq!(f.len(), 1, "{doc}");
    assert_eq!(f[0]["severity"], "warning");
    assert!(f[0]["message"]
        .as_str()
        .unwrap()
        .contains("deletes 3 unfinished task(s) in 2 conversation(s)"));
    assert!(f[0]["hint"]
        .as_str()
        .unwrap()
        .contains("copy the workspace folder"));
    let table = wsledger(&["doctor", "scan", "-w", ws.to_str().unwrap()]);
    assert!(
        table.stdout.contains(
            "after upgrading to v0.2.0 (migrates one way): start-up not known (from its release \
         notes, not its code); DELETES 3 unfinished task(s)"
        ),
        "{}",
        table.stdout
    );
}

/// `doctor repair --maka`: the plan speaks for that build (its refusal, its desktop's
/// warning first), and the JSON carries its `startup`; nothing is written by a dry run.
#[test]
fn repair_plans_for_the_build_named() {
    let (_t, ws) = copy_fixture("stuck-running");
    let ws = ws.to_str().unwrap();
    let before = common::file_hash(&Path::new(ws).join("runtime.sqlite"));
    let out = wsledger(&["doctor", "repair", "-w", ws, "--maka", "v0.1.6"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("WARNING: Maka v0.1.6's DESKTOP APP DELETES"),
        "{}",
        out.stdout
    );
    assert!(out
        .stdout
        .contains("Maka v0.1.6 refuses to open this file (schema_newer)"));
    let json = wsledger(&[
        "doctor", "repair", "-w", ws, "--maka", "v0.1.6", "--format", "json",
    ]);
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["startup"]["release"], "v0.1.6");
    assert_eq!(doc["startup"]["desktop_deletes"], true);
    assert_eq!(doc["diagnosis"]["before"]["startup_blocked"], true);
    let plain = wsledger(&["doctor", "repair", "-w", ws, "--format", "json"]);
    let doc: Value = serde_json::from_str(&plain.stdout).unwrap();
    assert!(doc.get("startup").is_none(), "{doc}");
    assert_eq!(
        common::file_hash(&Path::new(ws).join("runtime.sqlite")),
        before
    );
}
