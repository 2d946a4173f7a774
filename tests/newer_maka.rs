//! A Maka newer than wsledger (issue #48, notes 41 and 42): files in each newer shape,
//! built from real fixtures by `common::newer`, are read honestly (known_from, the
//! scopes ahead, start-up not known, the exit status from the ledger alone, Maka's own
//! scanner verdict on the file before the migration) and never written (every
//! `--apply` exits 2, creates nothing and leaves the file byte-identical). Tables of a
//! shape wsledger does not know are not read, and said so.

mod common;

use std::path::Path;

use common::newer::{self, Shape, Step, SHAPES};
use common::writing::{assert_refused, State};
use common::{json_of, makas_issues, stderr, verdict, Ws};
use serde_json::Value;
use wsledger::scan::{scan_path, ScanOptions};

/// Fixtures written by main, and one by the newest release (older in every scope but
/// the runtime one it is moved on in: the newer scope decides).
const FIXTURES: &[&str] = &[
    "healthy",
    "corrupt-ledger",
    "stuck-running",
    "releases/v0.1.11/stuck-running",
];

/// A session of `fixtures/healthy` (and of the files built from it).
const HEALTHY_SESSION: &str = "13a66fce-ba6c-4822-a868-4a2592321076";

/// The steps that apply to `fixture`: all of them on main's files, the runtime ones on
/// an older release's.
fn steps_for(fixture: &str, shape: &Shape) -> Vec<Step> {
    if fixture.starts_with("releases/") {
        newer::runtime_steps(shape.steps)
    } else {
        shape.steps.to_vec()
    }
}

/// A private copy of `fixture` migrated to `shape`.
fn built(fixture: &str, shape: &Shape) -> Ws {
    let ws = Ws::copy(fixture);
    newer::migrate(&ws.db(), &steps_for(fixture, shape))
        .unwrap_or_else(|e| panic!("{fixture} {}: {e}", shape.name));
    ws
}

/// Whether run headers can be read in the shape (core_execution 7 drops `record_json`:
/// runs are then judged off the event spine, by the event side of the issue).
fn headers_read(fixture: &str, shape: &Shape) -> bool {
    !steps_for(fixture, shape).contains(&Step::CoreExecution7)
}

fn scan_json(ws: &Ws) -> (i32, Value) {
    let o = ws.run(&["doctor", "scan", "--format", "json"]);
    let status = o.status.code().unwrap();
    assert_ne!(status, 2, "{}", stderr(&o));
    (status, serde_json::from_slice(&o.stdout).unwrap())
}

fn codes(doc: &Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect()
}

/// Maka's scanner issues on the file (code, event, operation, tool call), as the
/// library scan finds them.
fn scanner_issues(db: &Path) -> Vec<common::Issue> {
    let options = ScanOptions {
        all_runs: true,
        ..ScanOptions::default()
    };
    common::scanner_issues(&scan_path(db, options, &mut |_, _| {}).unwrap())
}

/// Every writing command with `--apply` (`bundle`: one to restore).
fn applies(bundle: &str) -> Vec<Vec<&str>> {
    vec![
        vec!["doctor", "finalize-runs", "--apply"],
        vec!["doctor", "finalize-runs", "--apply", "--project-header"],
        vec!["doctor", "excise", "--apply"],
        vec![
            "doctor",
            "quarantine",
            "--session",
            HEALTHY_SESSION,
            "--apply",
        ],
        vec!["doctor", "repair", "--apply"],
        vec!["doctor", "rederive", "--apply"],
        vec!["doctor", "restore", bundle, "--apply"],
    ]
}

#[test]
fn every_newer_shape_is_read_with_makas_verdict_and_start_up_not_known() {
    for fixture in FIXTURES {
        let dir = Path::new("fixtures").join(fixture);
        let v = verdict(&dir);
        let want_issues = makas_issues(&v).unwrap();
        let original = Ws::copy(fixture);
        let (original_status, _) = scan_json(&original);
        for shape in SHAPES {
            let name = format!("{fixture} {}", shape.name);
            let ws = built(fixture, shape);
            // The migrations do not touch runtime_events: Maka's verdict on the file
            // before them is the verdict after.
            assert_eq!(scanner_issues(&ws.db()), want_issues, "{name}");
            let (status, doc) = scan_json(&ws);
            let wr = &doc["workspace_release"];
            assert_eq!(wr["known_from"], "source", "{name}: {wr}");
            assert_eq!(doc["startup"]["opens"], Value::Null, "{name}");
            assert!(doc["startup"]["refusal"].is_null(), "{name}");
            assert_eq!(
                doc["diagnosis"]["before"]["startup_blocked"],
                Value::Null,
                "{name}"
            );
            let found = codes(&doc);
            assert!(
                found.iter().any(|c| c == "schema_newer_than_known"),
                "{name}: {found:?}"
            );
            assert!(
                !found.iter().any(|c| c == "startup_refused"
                    || c.starts_with("schema_object")
                    || c == "schema_version_mismatch"),
                "{name}: {found:?}"
            );
            let newer = common::findings_with(&doc, "schema_newer_than_known")[0];
            assert_eq!(newer["severity"], "warning");
            let runtime = newer["detail"]["scopes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["scope"] == "runtime")
                .unwrap_or_else(|| panic!("{name}: {newer}"));
            assert_eq!(runtime["newest_verified"], 12, "{name}");
            assert!(runtime["version"].as_i64().unwrap() > 12);
            assert!(
                newer["message"]
                    .as_str()
                    .unwrap()
                    .contains("wsledger judges only what it can read"),
                "{name}"
            );
            // The exit status comes from the ledger findings alone: the same as the
            // file's before the migration, the runs judged from their headers or, where
            // the headers are gone, off the runtime event spine (their opening facts).
            assert_eq!(status, original_status, "{name}");
            if !headers_read(fixture, shape) {
                assert!(found.iter().any(|c| c == "table_not_read"), "{name}");
                assert!(!found.iter().any(|c| c == "run_header_missing"), "{name}");
            }
            if *fixture == "healthy" {
                assert_eq!(status, 0, "{name}: a healthy newer file passes");
            }
        }
    }
}

#[test]
fn the_table_and_info_say_start_up_is_not_known_and_never_refused() {
    for shape in SHAPES {
        let ws = built("healthy", shape);
        let o = ws.run(&["doctor", "scan"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert!(
            out.contains(
                "start-up: not known: written by a Maka newer than this wsledger (runtime "
            ),
            "{}: {out}",
            shape.name
        );
        // Nothing says that Maka refuses or does not open it.
        assert!(
            !out.contains("REFUSED")
                && !out.contains("Maka refuses")
                && !out.contains("does not open"),
            "{out}"
        );
        let info = ws.run(&["info"]);
        assert_eq!(info.status.code(), Some(0), "{}", stderr(&info));
        let text = String::from_utf8_lossy(&info.stdout);
        assert!(
            text.contains("not known: written by a Maka newer"),
            "{text}"
        );
        assert!(!text.contains("REFUSED"), "{text}");
        let doc = json_of(&ws.run(&["info", "--format", "json"]));
        assert_eq!(doc["startup"]["opens"], Value::Null, "{doc}");
    }
}

/// A bundle of `fixtures/healthy`'s first session, quarantined on an unmigrated copy.
fn a_bundle() -> (Ws, String) {
    let from = Ws::copy("healthy");
    let o = from.run(&[
        "doctor",
        "quarantine",
        "--session",
        HEALTHY_SESSION,
        "--apply",
        "--no-backup",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let bundle = from.bundle_paths().pop().expect("a bundle");
    (from, bundle)
}

#[test]
fn every_apply_refuses_a_newer_file_and_changes_nothing() {
    let (_keep, bundle) = a_bundle();
    let commands = applies(&bundle);
    for fixture in ["stuck-running", "corrupt-ledger", "healthy"] {
        for shape in SHAPES {
            let ws = built(fixture, shape);
            let before: State = ws.state();
            for args in &commands {
                let name = format!("{fixture} {} {args:?}", shape.name);
                let o = ws.run(args);
                assert_refused(&o);
                let err = stderr(&o);
                assert!(
                    err.contains("nothing was written")
                        && err.contains("newer than this wsledger")
                        && err.contains("update wsledger")
                        && err.contains("start-up recovery")
                        && err.contains("wsledger replay"),
                    "{name}: {err}"
                );
                // Byte-identical, no -wal/-shm, no backup, no bundle directory, and no
                // lock file in Maka's control namespace.
                ws.assert_unchanged(&before);
                assert!(!ws.control().exists(), "{name}: a lock file was made");
            }
        }
    }
}

#[test]
fn dry_runs_say_up_front_that_apply_would_refuse() {
    let (_keep, bundle) = a_bundle();
    let ws = built("stuck-running", &newer::shape("runtime-15"));
    let before = ws.state();
    for args in [
        vec!["doctor", "finalize-runs"],
        vec!["doctor", "excise"],
        vec!["doctor", "quarantine", "--session", common::STUCK_SESSION],
        vec!["doctor", "repair"],
        vec!["doctor", "restore", bundle.as_str()],
    ] {
        let o = ws.run(&args);
        let err = stderr(&o);
        // A bundle of main's generation goes back only into main's: that restore
        // refuses after the note (exit 2) for its own reason.
        if args[1] != "restore" {
            assert_ne!(o.status.code(), Some(2), "{args:?}: {err}");
        }
        assert!(
            err.lines().next().is_some_and(|l| l.starts_with(
                "dry run: --apply would refuse this file: it was written by a Maka newer"
            )),
            "{args:?}: {err}"
        );
        ws.assert_unchanged(&before);
    }
}

#[test]
fn a_version_no_source_states_is_newer_than_every_known_generation() {
    for (what, sql) in [
        ("runtime 17", "PRAGMA user_version = 17"),
        (
            "workflow 13",
            "UPDATE operational_schema_migrations SET version = 13 WHERE scope = 'workflow'",
        ),
        (
            "a new scope",
            "INSERT INTO operational_schema_migrations VALUES ('memory', 1, 0)",
        ),
    ] {
        let ws = built("healthy", &newer::shape("runtime-15"));
        ws.conn().execute_batch(sql).unwrap();
        let (status, doc) = scan_json(&ws);
        assert_eq!(status, 0, "{what}");
        assert_eq!(doc["workspace_release"]["known_from"], "none", "{what}");
        let newer = common::findings_with(&doc, "schema_newer_than_known")[0];
        assert_eq!(newer["detail"]["known_from"], "none", "{what}");
        assert_eq!(doc["startup"]["opens"], Value::Null);
        let before = ws.state();
        assert_refused(&ws.run(&["doctor", "finalize-runs", "--apply"]));
        ws.assert_unchanged(&before);
    }
}

#[test]
fn a_table_of_unknown_shape_is_not_read_and_named_once() {
    // On a source file: an extra column on the run-event table.
    let ws = built("stuck-running", &newer::shape("core-execution-6"));
    ws.conn()
        .execute_batch("ALTER TABLE core_agent_run_events ADD COLUMN doctor_note TEXT")
        .unwrap();
    let (_, doc) = scan_json(&ws);
    let unread = common::findings_with(&doc, "table_not_read");
    assert_eq!(unread.len(), 1, "{:?}", codes(&doc));
    assert_eq!(unread[0]["detail"]["table"], "core_agent_run_events");
    assert_eq!(unread[0]["severity"], "warning");
    assert_eq!(doc["workspace_release"]["known_from"], "source");
    // The ledger itself in a shape no generation defines: no ledger check, and an
    // error that says so; never exit 2.
    let ws = built("healthy", &newer::shape("runtime-14"));
    ws.conn()
        .execute_batch("ALTER TABLE runtime_events ADD COLUMN doctor_note TEXT")
        .unwrap();
    let (status, doc) = scan_json(&ws);
    assert_eq!(status, 1);
    let found = codes(&doc);
    assert_eq!(
        found,
        ["schema_newer_than_known", "ledger_not_read"],
        "{found:?}"
    );
    assert_eq!(doc["summary"]["events"], 0);
}

#[test]
fn replay_reads_a_newer_file() {
    for shape in SHAPES.iter().filter(|s| headers_read("healthy", s)) {
        let ws = built("healthy", shape);
        let o = ws.run(&["replay", "--session", HEALTHY_SESSION, "--format", "json"]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", shape.name, stderr(&o));
    }
}

/// Outside the suite (the files are not in the repository): every workspace of
/// `../shared/maka-real` and `../shared/maka-releases` that carries Maka's verdict,
/// migrated by `common::newer` to each newer shape (a release's file in its runtime
/// scope only). Each must scan without exit 2 with Maka's scanner issues, and refuse
/// every `--apply` leaving the file as it was. Prints the counts.
/// `cargo test --test newer_maka -- --ignored shared_workspaces --nocapture`
#[test]
#[ignore]
#[allow(clippy::print_stdout)] // its counts are its output, read by people
fn shared_workspaces_in_every_newer_shape() {
    let mut dirs: Vec<std::path::PathBuf> = Vec::new();
    for root in ["../shared/maka-real", "../shared/maka-releases"] {
        let mut stack = vec![std::path::PathBuf::from(root)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                }
            }
            if d.join("verdict.json").exists() && d.join("runtime.sqlite").exists() {
                dirs.push(d);
            }
        }
    }
    dirs.sort();
    let (_keep, bundle) = a_bundle();
    let applies = applies(&bundle);
    let (mut files, mut not_built, mut status) = (0, Vec::new(), [0usize; 3]);
    let (mut issues_equal, mut refused, mut failures) = (0, 0, Vec::new());
    let mut by_known = std::collections::BTreeMap::<String, usize>::new();
    let mut same_status = (0, Vec::new());
    for dir in &dirs {
        let release = dir.to_string_lossy().contains("maka-releases");
        let want = makas_issues(&verdict(dir)).unwrap();
        let original = Ws::copy_db(&dir.join("runtime.sqlite"))
            .run(&["doctor", "scan", "--format", "json"])
            .status
            .code();
        for shape in SHAPES {
            let name = format!("{} {}", dir.display(), shape.name);
            let ws = Ws::copy_db(&dir.join("runtime.sqlite"));
            let steps = if release {
                newer::runtime_steps(shape.steps)
            } else {
                shape.steps.to_vec()
            };
            if let Err(e) = newer::migrate(&ws.db(), &steps) {
                not_built.push(format!("{name}: {e}"));
                continue;
            }
            files += 1;
            let o = ws.run(&["doctor", "scan", "--format", "json"]);
            let code = o.status.code().unwrap_or(2);
            status[code.clamp(0, 2) as usize] += 1;
            if code == 2 {
                failures.push(format!("{name}: exit 2: {}", stderr(&o)));
                continue;
            }
            // Where runs are judged as before, the status is the file's before.
            if !steps.contains(&Step::CoreExecution7) {
                if Some(code) == original {
                    same_status.0 += 1;
                } else {
                    same_status
                        .1
                        .push(format!("{name}: {original:?} before, {code} now"));
                }
            }
            let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
            let known = doc["workspace_release"]["known_from"]
                .as_str()
                .unwrap()
                .to_owned();
            *by_known.entry(known).or_default() += 1;
            if doc["startup"]["opens"] != Value::Null {
                failures.push(format!("{name}: start-up judged"));
            }
            if scanner_issues(&ws.db()) == want {
                issues_equal += 1;
            } else {
                failures.push(format!("{name}: scanner issues differ from Maka's verdict"));
            }
            let before = ws.state();
            for args in &applies {
                let o = ws.run(args);
                if o.status.code() == Some(2) && ws.state() == before && !ws.control().exists() {
                    refused += 1;
                } else {
                    failures.push(format!("{name} {args:?}: not refused cleanly"));
                }
            }
        }
    }
    println!(
        "{} workspaces, {files} files built in {} shapes; not built: {}",
        dirs.len(),
        SHAPES.len(),
        not_built.len()
    );
    for n in &not_built {
        println!("  not built: {n}");
    }
    println!(
        "exit 0: {}, exit 1: {}, exit 2: {}; known_from: {by_known:?}",
        status[0], status[1], status[2]
    );
    println!("scanner issues equal to Maka's verdict: {issues_equal} of {files}");
    println!(
        "exit status as before the migration, where runs are judged as before: {} of {}",
        same_status.0,
        same_status.0 + same_status.1.len()
    );
    for m in &same_status.1 {
        println!("  {m}");
    }
    println!(
        "--apply refused, file byte-identical, nothing created: {refused} of {}",
        files * applies.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `--maka BUILD` on a newer file: an older build's own checks of the versions come
/// first and read nothing else, so its refusal is known (a downgrade), as is whether
/// its desktop deletes the file; the file's own start-up stays not known.
#[test]
fn an_older_build_named_by_maka_refuses_a_newer_file_by_its_version_checks() {
    for shape in SHAPES {
        let ws = built("healthy", shape);
        let name = shape.name;
        let o = ws.run(&["doctor", "scan", "--maka", "v0.1.11", "--format", "json"]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stderr(&o));
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        let s = &doc["startup"];
        assert_eq!(s["release"], "v0.1.11", "{name}");
        assert_eq!(s["opens"], false, "{name}");
        assert_eq!(s["refusal"]["reason"], "schema_newer", "{name}: {s}");
        let message = s["refusal"]["maka_message"].as_str().unwrap();
        assert!(
            message.starts_with("Operational schema ")
                && message.contains(" is newer than supported version "),
            "{name}: {message}"
        );
        let refused = common::findings_with(&doc, "startup_refused");
        assert_eq!(refused.len(), 1, "{name}");
        let hint = refused[0]["hint"].as_str().unwrap();
        assert!(hint.contains("do not edit the schema"), "{name}: {hint}");
        assert_eq!(
            doc["diagnosis"]["before"]["startup_blocked"], true,
            "{name}"
        );

        let o = ws.run(&["doctor", "scan", "--maka", "all", "--format", "json"]);
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["startup"]["opens"], Value::Null, "{name}");
        let rows = doc["compatibility"].as_array().unwrap();
        assert_eq!(rows.len(), wsledger::release::RELEASES.len(), "{name}");
        for row in rows {
            let build = row["release"].as_str().unwrap();
            assert_ne!(row["opens"], true, "{name} {build}: {row}");
            if row["opens"] == false {
                assert_eq!(row["refusal"]["reason"], "schema_newer", "{name} {build}");
            }
            let resets = build == "v0.1.5" || build == "v0.1.6";
            assert_eq!(row["desktop_deletes"], resets, "{name} {build}");
        }
        assert!(
            stderr(&o).contains("v0.1.5's DESKTOP APP DELETES"),
            "{name}: {}",
            stderr(&o)
        );
    }
}
