//! Files of every Maka release: recognised, judged by that release's rules, healthy
//! ones exit 0, and no advice can lose data.

mod common;

use std::path::Path;

use common::{copy_fixture, findings_with, wsledger};
use serde_json::Value;

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn scan(ws: &Path) -> (i32, Value) {
    let out = wsledger(&common::scan_json_args(ws));
    assert!(
        out.stderr.is_empty() || !out.stderr.contains("error:"),
        "{}",
        out.stderr
    );
    (out.status, json(&out.stdout))
}

fn sql(db: &Path, statements: &str) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch(statements).unwrap();
}

#[test]
fn healthy_files_of_every_release_scan_with_exit_0() {
    for (dir, tag, schema) in [
        ("fixtures/releases/v0.1.5/healthy", "v0.1.5", 9),
        ("fixtures/releases/v0.1.7/healthy", "v0.1.7", 11),
        ("fixtures/releases/v0.1.11/healthy", "v0.1.11", 12),
        ("fixtures/healthy", "main", 12),
    ] {
        let (status, doc) = scan(Path::new(dir));
        assert_eq!(status, 0, "{dir}: {doc}");
        let wr = &doc["workspace_release"];
        assert_eq!(wr["exact"], true, "{dir}");
        assert_eq!(wr["runtime_schema"], schema, "{dir}");
        assert!(
            wr["matches"].as_array().unwrap().iter().any(|m| m == tag),
            "{dir}: {wr}"
        );
        assert_eq!(doc["summary"]["errors"], 0, "{dir}");
        assert_eq!(doc["summary"]["warnings"], 0, "{dir}");
        // v0.1.11 and main are the newest builds: nothing to say about their schema.
        let older = findings_with(&doc, "schema_older_release").len();
        assert_eq!(
            older,
            usize::from(tag != "v0.1.11" && tag != "main"),
            "{dir}"
        );
    }
}

#[test]
fn v017_matches_every_release_of_its_generation() {
    let (_, doc) = scan(Path::new("fixtures/releases/v0.1.7/healthy"));
    assert_eq!(
        doc["workspace_release"]["matches"],
        serde_json::json!(["v0.1.7", "v0.1.8"])
    );
}

/// A `pi-agent` session is fine for the release that wrote it (v0.1.5), and stops the
/// newer builds' start-up once they have migrated it: the upgrade preview says so.
#[test]
fn pi_agent_headers_are_an_upgrade_preview_warning_not_an_error() {
    let (_t, ws) = copy_fixture("releases/v0.1.5/healthy");
    let db = ws.join("runtime.sqlite");
    let session: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT session_id FROM core_agent_runs ORDER BY session_id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    sql(
        &db,
        &format!(
            "UPDATE session_metadata SET payload_json = json_set(payload_json, '$.backend', 'pi-agent') \
             WHERE session_id = '{session}';
             UPDATE core_agent_runs SET record_json = json_set(record_json, '$.backendKind', 'pi-agent') \
             WHERE session_id = '{session}';"
        ),
    );
    let (status, doc) = scan(&ws);
    assert_eq!(status, 0, "{doc}");
    let codes = common::finding_codes(&doc);
    assert!(!codes.contains(&"session_header_undecodable"), "{codes:?}");
    assert!(!codes.contains(&"run_header_undecodable"), "{codes:?}");
    assert!(codes.contains(&"upgrade_blocks_startup"), "{codes:?}");
    // Every newer build is previewed; `pi-agent` stops only the builds that dropped it.
    let targets = doc["upgrade"]["targets"].as_array().unwrap();
    let names: Vec<&str> = targets
        .iter()
        .map(|t| t["release"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["v0.1.6", "v0.1.7", "v0.1.8", "v0.1.9", "v0.1.10", "v0.1.11", "main", "v0.2.0"]
    );
    // Maka 0.2 is known from its release notes only: not known, never guessed.
    assert_eq!(targets[7]["migration"], "not_known");
    assert!(targets[7]["startup_blocked"].is_null());
    for t in &targets[..5] {
        assert_eq!(t["migration"], "migrates");
        assert_eq!(t["startup_blocked"], false, "{t}");
        assert_eq!(t["undecodable_headers"], serde_json::json!([]), "{t}");
    }
    for t in &targets[5..7] {
        assert_eq!(t["migration"], "migrates");
        assert_eq!(t["startup_blocked"], true, "{t}");
        let headers = t["undecodable_headers"].as_array().unwrap();
        assert!(
            headers.iter().any(|h| h["run_id"].is_null()),
            "a session header: {t}"
        );
        assert!(
            headers.iter().any(|h| !h["run_id"].is_null()),
            "a run header: {t}"
        );
        assert!(headers.iter().all(|h| h["session_id"] == session.as_str()));
    }
}

/// The same header written into a v0.1.11 file is an error: v0.1.11 cannot read it.
#[test]
fn pi_agent_in_a_v0111_file_is_an_error() {
    let (_t, ws) = copy_fixture("releases/v0.1.11/healthy");
    let db = ws.join("runtime.sqlite");
    sql(
        &db,
        "UPDATE session_metadata SET payload_json = json_set(payload_json, '$.backend', 'pi-agent') \
         WHERE rowid = (SELECT min(rowid) FROM session_metadata);",
    );
    let (status, doc) = scan(&ws);
    assert_eq!(status, 1, "{doc}");
    let f = findings_with(&doc, "session_header_undecodable");
    assert_eq!(f.len(), 1, "{doc}");
    assert_eq!(f[0]["severity"], "error");
    assert!(f[0]["message"].as_str().unwrap().contains("backend"));
}

/// A file with one object no release has is closest to its release and gets warnings.
#[test]
fn an_extra_index_is_a_warning_against_the_closest_release() {
    let (_t, ws) = copy_fixture("releases/v0.1.7/healthy");
    sql(
        &ws.join("runtime.sqlite"),
        "CREATE INDEX my_extra ON runtime_events(committed_at)",
    );
    let (status, doc) = scan(&ws);
    assert_eq!(status, 0, "{doc}");
    let wr = &doc["workspace_release"];
    assert_eq!(wr["exact"], false);
    assert_eq!(wr["matches"], serde_json::json!([]));
    assert_eq!(wr["closest"], serde_json::json!(["v0.1.7", "v0.1.8"]));
    assert_eq!(wr["differences"].as_array().unwrap().len(), 1, "{wr}");
    let f = &doc["findings"].as_array().unwrap()[0];
    assert_eq!(f["code"], "schema_object_unexpected");
    assert_eq!(f["severity"], "warning");
}

/// v0.1.0 and v0.1.1 keep runtime events in an opt-in file with no run, session or
/// registry tables: recognised, and checked with v0.1.2's ledger rules (exit 0 or 1).
#[test]
fn an_opt_in_v010_file_is_recognised_and_scanned() {
    let dump: Value =
        json(&std::fs::read_to_string("fixtures/releases/schemas/v0.1.0.json").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.sqlite");
    let c = rusqlite::Connection::open(&db).unwrap();
    let mut objects: Vec<&Value> = dump["objects"].as_array().unwrap().iter().collect();
    // Tables before their indexes.
    objects.sort_by_key(|o| o["type"] != "table");
    for o in objects {
        if let Some(sql) = o["sql"].as_str() {
            c.execute_batch(sql).unwrap();
        }
    }
    c.pragma_update(None, "user_version", 4).unwrap();
    drop(c);
    let (status, doc) = scan(dir.path());
    assert_eq!(status, 0, "{doc}");
    let wr = &doc["workspace_release"];
    assert_eq!(
        wr["matches"],
        serde_json::json!(["v0.1.0", "v0.1.1"]),
        "{wr}"
    );
    assert_eq!(wr["rules"], "v0.1.1");
    let f = &doc["findings"].as_array().unwrap()[0];
    assert_eq!(f["code"], "schema_older_release");
    assert!(f["message"].as_str().unwrap().contains("opt-in"), "{f}");
    assert_eq!(doc["maka_gate"]["tool_writes_refused"], false);
}

/// No hint and no explanation tells the user to create, drop or alter a schema object,
/// or to go back to an older Maka; every mention of upgrading says it is one way.
#[test]
fn no_advice_advises_schema_surgery_or_a_downgrade() {
    use wsledger::release::advice::advises_schema_surgery;
    for info in wsledger::findings::CODES {
        for text in [info.action, info.impact, info.cause] {
            assert!(!advises_schema_surgery(text), "{}: {text}", info.code);
        }
        let out = wsledger(&["explain", info.code]);
        assert!(!advises_schema_surgery(&out.stdout), "{}", out.stdout);
        let prose = out.stdout.replace(info.code, "");
        if prose.to_lowercase().contains("upgrad") {
            assert!(out.stdout.contains("one way"), "{}", out.stdout);
        }
    }
    // The hints of every finding on every real fixture, and of the repairs' refusals.
    let mut dirs = common::real_fixtures();
    for tag in ["v0.1.5", "v0.1.7", "v0.1.11"] {
        for e in std::fs::read_dir(format!("fixtures/releases/{tag}")).unwrap() {
            dirs.push(e.unwrap().path());
        }
    }
    // And of files missing schema objects: a derived one (`doctor rederive` puts it
    // back, and the hint says so without telling anyone to create it by hand) and a table
    // of primary data (a backup).
    let mut altered = Vec::new();
    for sql in [
        "DROP INDEX tool_journal_events_by_operation",
        "DROP TABLE tool_operations",
        "DROP TABLE operational_schema_migrations",
        "DROP TABLE session_messages",
    ] {
        let (t, ws) = copy_fixture("healthy");
        rusqlite::Connection::open(ws.join("runtime.sqlite"))
            .unwrap()
            .execute_batch(sql)
            .unwrap();
        dirs.push(ws);
        altered.push(t);
    }
    let mut rederive_hints = 0;
    for dir in &dirs {
        let (_, doc) = scan(dir);
        for f in doc["findings"].as_array().unwrap() {
            let hint = f["hint"].as_str().unwrap();
            assert!(!advises_schema_surgery(hint), "{}: {hint}", dir.display());
            if hint.to_lowercase().contains("upgrad") {
                assert!(hint.contains("one way"), "{hint}");
            }
            rederive_hints += usize::from(hint.contains("doctor rederive"));
        }
        let words = doc["diagnosis"]["plan"]["startup_refused"]
            .as_str()
            .unwrap_or("");
        assert!(!advises_schema_surgery(words), "{words}");
        for step in doc["diagnosis"]["plan"]["steps"].as_array().unwrap() {
            for k in ["fixes", "costs", "undo"] {
                let text = step[k].as_str().unwrap();
                assert!(!advises_schema_surgery(text), "{text}");
            }
        }
    }
    assert!(rederive_hints >= 3, "{rederive_hints}");
    // The same under `--maka`: every hint, the plan's start-up words and the table (its
    // desktop warning, the start-up and "other builds" lines, the `all` rows).
    let said = |text: &str, what: &str| {
        assert!(!advises_schema_surgery(text), "{what}: {text}");
        if text.to_lowercase().contains("upgrad") {
            assert!(text.contains("one way"), "{what}: {text}");
        }
    };
    for dir in &dirs {
        let ws = dir.to_str().unwrap();
        for build in ["v0.1.2", "v0.1.5", "v0.1.6", "v0.1.11", "main"] {
            let out = wsledger(&[
                "doctor", "scan", "-w", ws, "--maka", build, "--format", "json",
            ]);
            let doc = json(&out.stdout);
            for f in doc["findings"].as_array().unwrap() {
                said(f["hint"].as_str().unwrap(), ws);
            }
            if let Some(w) = doc["diagnosis"]["plan"]["startup_refused"].as_str() {
                said(w, ws);
            }
            said(&out.stderr, ws);
        }
        let all = wsledger(&["doctor", "scan", "-w", ws, "--maka", "all"]);
        said(&all.stdout, ws);
        said(&all.stderr, ws);
    }
    // Every refusal's advice, for every build judging a file any build wrote, and
    // every desktop's warning.
    use wsledger::startup::{builds, desktop_warning, reasons};
    for r in reasons::REASONS {
        for m in r.messages {
            for judged in builds::names() {
                for writer in builds::names() {
                    let a = reasons::advice_for(r.code, m, judged, writer);
                    assert!(!a.is_empty(), "{}", r.code);
                    said(&a, r.code);
                }
            }
        }
    }
    for b in builds::names() {
        said(&desktop_warning(b, "ws/runtime.sqlite"), b);
    }
    assert!(advises_schema_surgery(
        "Drop the extra index with the sqlite3 shell"
    ));
    assert!(advises_schema_surgery(
        "open it with the matching Maka release"
    ));
}

/// Replay says where a v0.1.2 or v0.1.3 session's transcript lives (a file beside the
/// database), and says nothing of it for other releases.
#[test]
fn replay_of_a_v012_session_names_its_transcript_file() {
    let (_t, ws) = copy_fixture("releases/v0.1.5/healthy");
    let session: String = rusqlite::Connection::open(ws.join("runtime.sqlite"))
        .unwrap()
        .query_row("SELECT session_id FROM core_agent_runs LIMIT 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    let bundle = ws.join("s.bundle.json");
    let ws_arg = ws.to_str().unwrap().to_owned();
    let out = wsledger(&[
        "replay",
        "-w",
        &ws_arg,
        "--session",
        &session,
        "--export",
        bundle.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let notes = |doc: &Value| -> Vec<String> {
        doc["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["code"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!notes(&json(&out.stdout)).contains(&"transcript_in_files".to_owned()));
    // The same rows, as a v0.1.2 workspace would have recorded its versions.
    let mut b = json(&std::fs::read_to_string(&bundle).unwrap());
    let dump = json(&std::fs::read_to_string("fixtures/releases/schemas/v0.1.2.json").unwrap());
    b["schema"]["user_version"] = dump["user_version"].clone();
    let registry: serde_json::Map<String, Value> = dump["registry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["scope"].as_str().unwrap().to_owned(),
                r["version"].clone(),
            )
        })
        .collect();
    b["schema"]["registry"] = Value::Object(registry);
    b["schema"]["capabilities"] = serde_json::json!({"runtime_recovery_authority": 1});
    std::fs::write(&bundle, b.to_string()).unwrap();
    let out = wsledger(&[
        "replay",
        "--bundle",
        bundle.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        notes(&json(&out.stdout)).contains(&"transcript_in_files".to_owned()),
        "{}",
        out.stdout
    );
}

/// An empty workspace of every release, built from that release's own schema dump
/// (objects, registry rows, capability rows, `user_version`): recognised exactly as its
/// release, scanned with exit 0 and no warning or error, and previewed.
#[test]
fn an_empty_workspace_of_every_release_is_recognised_and_clean() {
    for tag in [
        "v0.1.0", "v0.1.1", "v0.1.2", "v0.1.3", "v0.1.4", "v0.1.5", "v0.1.6", "v0.1.7", "v0.1.8",
        "v0.1.9", "v0.1.10", "v0.1.11",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runtime.sqlite");
        let (c, _) = common::file_release::empty_release_db(&db, tag);
        drop(c);
        let (status, doc) = scan(dir.path());
        assert_eq!(status, 0, "{tag}: {doc}");
        let wr = &doc["workspace_release"];
        assert_eq!(wr["exact"], true, "{tag}: {wr}");
        assert!(
            wr["matches"].as_array().unwrap().iter().any(|m| m == tag),
            "{tag}: {wr}"
        );
        let loud: Vec<&Value> = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                f["severity"] != "info" && !f["code"].as_str().unwrap().starts_with("upgrade_")
            })
            .collect();
        assert!(loud.is_empty(), "{tag}: {loud:?}");
        let refused: Vec<&str> = doc["upgrade"]["targets"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter(|t| t["migration"] == "refuses")
                    .map(|t| t["release"].as_str().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        let want: &[&str] = match tag {
            // v0.1.0/v0.1.1 keep no registry: v0.1.11 and main refuse a nonempty file
            // without one (their composition; see docs/startup.md).
            "v0.1.0" | "v0.1.1" | "v0.1.2" => &["v0.1.11", "main"],
            "v0.1.3" => &["v0.1.11"],
            _ => &[],
        };
        assert_eq!(refused, want, "{tag}: {}", doc["upgrade"]);
    }
}

/// A session header Maka cannot read blocks its start-up; quarantine names it as the
/// reason and its "after" has no blocker left.
#[test]
fn quarantine_sets_aside_a_session_whose_header_maka_cannot_read() {
    let (_t, ws) = copy_fixture("releases/v0.1.11/healthy");
    let db = ws.join("runtime.sqlite");
    let session: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT min(session_id) FROM session_metadata", [], |r| {
            r.get(0)
        })
        .unwrap();
    sql(
        &db,
        &format!(
            "UPDATE session_metadata SET payload_json = json_set(payload_json, '$.backend', 'pi-agent') \
             WHERE session_id = '{session}'"
        ),
    );
    let out = wsledger(&[
        "doctor",
        "quarantine",
        "--format",
        "json",
        "-w",
        ws.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let doc = json(&out.stdout);
    assert_eq!(doc["before"]["startup_blocked"], true, "{doc}");
    assert_eq!(
        doc["before"]["startup_blockers"][0]["code"],
        "session_header_undecodable"
    );
    assert!(doc["before"]["startup_blockers"][0]["run_id"].is_null());
    assert_eq!(doc["after"]["startup_blocked"], false, "{doc}");
    let s = &doc["sessions"][0];
    assert_eq!(s["session_id"], session.as_str());
    assert!(
        s["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["code"] == "session_header_undecodable" && r["id"].is_null()),
        "{s}"
    );
}
