//! `wsledger doctor scan` through the binary: exit codes, the JSON contract, formats,
//! bad input, read-only guarantees, expectations.

mod common;

use common::{copy_fixture, file_hash, real_fixtures, wsledger};
use serde_json::Value;

/// `doctor scan -w <ws> --format <format>`.
fn scan_as(ws: &str, format: &str) -> common::Output {
    wsledger(&["doctor", "scan", "-w", ws, "--format", format])
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn exit_status_follows_findings() {
    for dir in real_fixtures() {
        let d = dir.to_str().unwrap();
        let out = wsledger(&["doctor", "scan", "--workspace", d, "--format", "json"]);
        let doc = json(&out.stdout);
        let errors = doc["summary"]["errors"].as_u64().unwrap();
        let want = if errors > 0 { 1 } else { 0 };
        assert_eq!(out.status, want, "{d}: {}", out.stderr);
    }
    assert_eq!(
        wsledger(&["doctor", "scan", "-w", "fixtures/healthy"]).status,
        0
    );
    assert_eq!(
        wsledger(&["doctor", "scan", "-w", "fixtures/orphan-response"]).status,
        1
    );
    // --fail-on warning turns the crash-mid-tool warning into a failure of its own.
    let out = wsledger(&[
        "doctor",
        "scan",
        "-w",
        "fixtures/crash-mid-tool",
        "--run",
        "nope",
        "--fail-on",
        "warning",
    ]);
    assert_eq!(out.status, 0, "filters keep nothing");
}

#[test]
fn json_document_is_the_documented_contract() {
    let out = scan_as("fixtures/corrupt-ledger", "json");
    let doc = json(&out.stdout);
    assert_eq!(doc["schema_version"], 1);
    for key in [
        "findings",
        "errors",
        "warnings",
        "events",
        "sessions",
        "runs",
        "stuck_runs",
        "runs_awaiting_adoption",
    ] {
        assert!(doc["summary"].get(key).is_some(), "summary.{key}");
    }
    assert_eq!(doc["maka_gate"]["tool_writes_refused"], true);
    assert_eq!(doc["maka_gate"]["first_issue"]["code"], "orphan_response");
    assert!(doc["maka_gate"]["decode_failure"].is_null());
    for f in doc["findings"].as_array().unwrap() {
        for key in [
            "code",
            "severity",
            "session_id",
            "run_id",
            "event_id",
            "operation_id",
            "tool_call_id",
            "message",
            "hint",
        ] {
            assert!(f.get(key).is_some(), "finding lacks {key}: {f}");
        }
    }
    let codes = common::finding_codes(&doc);
    assert_eq!(codes, ["orphan_response", "run_stuck_running"]);
    // The gate covers the whole file whatever the filters.
    let out = wsledger(&[
        "doctor",
        "scan",
        "-w",
        "fixtures/corrupt-ledger",
        "--format",
        "json",
        "--session",
        "none",
    ]);
    let doc = json(&out.stdout);
    assert_eq!(doc["findings"].as_array().unwrap().len(), 0);
    assert_eq!(doc["maka_gate"]["tool_writes_refused"], true);
    assert_eq!(out.status, 0);
}

#[test]
fn decode_failure_names_no_issue() {
    let out = scan_as("fixtures/damage-undecodable-row", "json");
    let doc = json(&out.stdout);
    assert!(doc["maka_gate"]["first_issue"].is_null());
    assert_eq!(
        doc["maka_gate"]["decode_failure"]["event_id"],
        "9c847882-a3f2-48bc-87c5-bfa3f4f7030a"
    );
    assert_eq!(out.status, 1);
}

#[test]
fn ndjson_has_findings_then_summary() {
    let out = scan_as("fixtures/corrupt-ledger", "ndjson");
    let lines: Vec<Value> = out.stdout.lines().map(json).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["type"], "finding");
    assert_eq!(lines[0]["data"]["code"], "orphan_response");
    assert_eq!(lines[2]["type"], "summary");
    assert!(lines[2]["data"].get("findings").is_none());
    assert_eq!(lines[2]["data"]["maka_gate"]["tool_writes_refused"], true);
}

#[test]
fn github_format_annotates_each_finding() {
    let out = scan_as("fixtures/corrupt-ledger", "github");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0]
        .starts_with("::error file=fixtures/corrupt-ledger,title=wsledger orphan_response::"));
}

#[test]
fn table_summarises_and_names_the_gate() {
    let out = wsledger(&["doctor", "scan", "-w", "fixtures/orphan-response"]);
    assert!(out.stdout.contains("orphan_response"));
    assert!(out.stdout.contains("maka gate: tool writes REFUSED"));
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}

#[test]
fn bad_input_is_exit_2_with_error_and_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let random = tmp.path().join("random.sqlite");
    std::fs::write(
        &random,
        (0..4096u32)
            .map(|i| (i * 7919 % 251) as u8)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let truncated = tmp.path().join("truncated.sqlite");
    let bytes = std::fs::read("fixtures/healthy/runtime.sqlite").unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let not_maka = tmp.path().join("other.sqlite");
    rusqlite::Connection::open(&not_maka)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    let cases = [
        tmp.path().join("missing"),
        tmp.path().to_path_buf(),
        empty,
        random,
        truncated,
        not_maka,
    ];
    for p in &cases {
        let out = scan_as(p.to_str().unwrap(), "json");
        assert_eq!(out.status, 2, "{}: {}", p.display(), out.stderr);
        assert!(
            out.stdout.is_empty(),
            "{}: stdout must be empty on exit 2",
            p.display()
        );
        let mut lines = out.stderr.lines();
        let first = lines.next().unwrap_or_default();
        assert!(
            first.starts_with("error: "),
            "{}: {}",
            p.display(),
            out.stderr
        );
        assert!(
            first.contains(p.file_name().unwrap().to_str().unwrap()),
            "names the file: {first}"
        );
        assert!(
            out.stderr.contains("\nhint: "),
            "{}: {}",
            p.display(),
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"));
    }
}

#[test]
fn scanning_never_changes_the_files() {
    for dir in real_fixtures() {
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let (_tmp, ws) = copy_fixture(&name);
        let db = ws.join("runtime.sqlite");
        let before = (file_hash(&db), file_hash(&ws.join("runtime.sqlite-wal")));
        for format in ["table", "json", "ndjson", "github"] {
            wsledger(&[
                "doctor",
                "scan",
                "-w",
                ws.to_str().unwrap(),
                "--format",
                format,
            ]);
        }
        assert_eq!(
            before,
            (file_hash(&db), file_hash(&ws.join("runtime.sqlite-wal"))),
            "{name}"
        );
        assert!(
            !ws.join("runtime.sqlite-shm").exists(),
            "{name}: no -shm may be created"
        );
        assert!(
            !ws.join("runtime.sqlite-wal").exists(),
            "{name}: no -wal may be created"
        );
    }
}

#[test]
fn committed_frames_in_the_wal_are_seen_and_left_alone() {
    let (_tmp, ws) = copy_fixture("healthy");
    let db = ws.join("runtime.sqlite");
    {
        // Another connection commits a change that stays in the -wal.
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        conn.execute(
            "UPDATE runtime_events SET payload_json = '{}' WHERE event_id = (SELECT min(event_id) FROM runtime_events)",
            [],
        )
        .unwrap();
        // Keep the WAL: leak the connection state by forgetting to checkpoint on close.
        conn.pragma_update(None, "journal_mode", "wal").unwrap();
        std::mem::forget(conn);
    }
    let wal = ws.join("runtime.sqlite-wal");
    assert!(wal.exists());
    let before = (file_hash(&db), file_hash(&wal));
    let out = scan_as(ws.to_str().unwrap(), "json");
    let doc = json(&out.stdout);
    assert_eq!(
        doc["summary"]["undecodable_events"], 1,
        "the -wal's committed change is seen"
    );
    assert_eq!(before, (file_hash(&db), file_hash(&wal)));
}

#[test]
fn expectations_round_trip_and_detect_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("e.json");
    let e = exp.to_str().unwrap();
    let out = wsledger(&[
        "doctor",
        "scan",
        "-w",
        "fixtures/corrupt-ledger",
        "--write-expect",
        e,
    ]);
    assert_eq!(out.status, 0);
    assert_eq!(
        wsledger(&[
            "doctor",
            "scan",
            "-w",
            "fixtures/corrupt-ledger",
            "--expect",
            e
        ])
        .status,
        0
    );
    // A different workspace: missing and new findings.
    let out = wsledger(&[
        "doctor",
        "scan",
        "-w",
        "fixtures/orphan-response",
        "--expect",
        e,
        "--format",
        "json",
    ]);
    assert_eq!(out.status, 1);
    let doc = json(&out.stdout);
    assert_eq!(doc["expectations"]["missing"].as_array().unwrap().len(), 2);
    assert_eq!(doc["expectations"]["new"].as_array().unwrap().len(), 1);
    // Baseline: known findings accepted, only new ones fail.
    assert_eq!(
        wsledger(&[
            "doctor",
            "scan",
            "-w",
            "fixtures/corrupt-ledger",
            "--baseline",
            e
        ])
        .status,
        0
    );
    assert_eq!(
        wsledger(&["doctor", "scan", "-w", "fixtures/healthy", "--baseline", e]).status,
        0
    );
    assert_eq!(
        wsledger(&[
            "doctor",
            "scan",
            "-w",
            "fixtures/orphan-response",
            "--baseline",
            e
        ])
        .status,
        1
    );
    // A bad expectations file is an error, not a mismatch.
    std::fs::write(&exp, "{").unwrap();
    assert_eq!(
        wsledger(&["doctor", "scan", "-w", "fixtures/healthy", "--expect", e]).status,
        2
    );
}

#[test]
fn many_workspaces_in_one_call() {
    let (_a, healthy) = copy_fixture("healthy");
    let (_b, orphan) = copy_fixture("orphan-response");
    let missing = orphan.join("nope");
    let args = [
        "doctor",
        "scan",
        healthy.to_str().unwrap(),
        orphan.to_str().unwrap(),
        missing.to_str().unwrap(),
        "--format",
        "json",
    ];
    let out = wsledger(&args);
    assert_eq!(out.status, 2, "an input that failed makes the call fail");
    let doc = json(&out.stdout);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["status"], 0);
    assert_eq!(results[1]["status"], 1);
    assert_eq!(results[2]["status"], 2);
    assert!(results[2]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("nope"));
    // With expectations beside each workspace.
    for ws in [&healthy, &orphan] {
        let e = ws.join("wsledger-expect.json");
        assert_eq!(
            wsledger(&[
                "doctor",
                "scan",
                ws.to_str().unwrap(),
                "--write-expect",
                e.to_str().unwrap()
            ])
            .status,
            0
        );
    }
    let out = wsledger(&[
        "doctor",
        "scan",
        healthy.to_str().unwrap(),
        orphan.to_str().unwrap(),
        "--expect-beside",
    ]);
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("status"), "summary table at the end");
}

#[test]
fn explain_covers_every_code() {
    for info in wsledger::findings::CODES {
        let out = wsledger(&["explain", info.code]);
        assert_eq!(out.status, 0);
        assert!(out.stdout.contains(info.title));
        assert!(out.stdout.contains("What to do"));
    }
    // Replay's divergence and note codes are explained too.
    let replay: Vec<_> = wsledger::cli::explain::replay_codes().collect();
    assert!(!replay.is_empty());
    for (code, kind, _) in &replay {
        let out = wsledger(&["explain", code]);
        assert_eq!(out.status, 0, "{code}");
        assert!(out.stdout.starts_with(&format!("{code} ({kind})")));
    }
    // So are the diagnosis's cause and producer codes, each cause with its own advice.
    let diagnosis: Vec<_> = wsledger::cli::explain::diagnosis_codes().collect();
    assert_eq!(
        diagnosis.len(),
        wsledger::diagnosis::CAUSE_CODES.len() + wsledger::diagnosis::PRODUCERS.len()
    );
    for (code, kind, meaning) in &diagnosis {
        assert!(
            wsledger::findings::code_info(code).is_none() && !replay.iter().any(|r| r.0 == *code),
            "{code} is also another kind of code: explain would never reach it"
        );
        let out = wsledger(&["explain", code]);
        assert_eq!(out.status, 0, "{code}");
        assert!(out
            .stdout
            .starts_with(&format!("{code} ({kind})\n  {meaning}\n")));
        let todo = out.stdout.split("What to do\n").nth(1).unwrap_or_default();
        if *kind == "cause" {
            let advice = wsledger::diagnosis::CAUSE_ADVICE
                .iter()
                .find(|(c, _)| c == code)
                .map(|(_, a)| *a);
            assert_eq!(Some(todo.trim()), advice, "{code}");
        } else {
            assert!(!todo.trim().is_empty(), "{code}");
        }
    }
    let list = wsledger(&["explain", "--list"]);
    assert_eq!(
        list.stdout.lines().count(),
        wsledger::findings::CODES.len() + replay.len() + diagnosis.len()
    );
    assert!(list
        .stdout
        .lines()
        .any(|l| l.starts_with("crashed_mid_tool") && l.contains(" cause ")));
    let unknown = wsledger(&["explain", "no_such_code"]);
    assert_eq!(unknown.status, 2);
    assert!(
        unknown.stderr.contains("no_such_code"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn docs_document_every_code_and_the_readme_the_set_up_commands() {
    let codes = std::fs::read_to_string("docs/finding-codes.md").unwrap();
    for info in wsledger::findings::CODES {
        assert!(
            codes.contains(&format!("| `{}` |", info.code)),
            "docs/finding-codes.md lacks {}",
            info.code
        );
    }
    let readme = std::fs::read_to_string("README.md").unwrap();
    // Every reference page the README links to exists.
    for link in readme.split("](docs/").skip(1) {
        let file = &link[..link.find(')').unwrap()];
        assert!(
            std::path::Path::new("docs").join(file).is_file(),
            "README links to a missing docs/{file}"
        );
    }
    assert!(readme.lines().any(|l| l == "cargo test --locked"));
    let first = readme
        .lines()
        .find(|l| l.starts_with("cargo run") || l.starts_with("wsledger doctor scan"))
        .unwrap();
    assert!(
        first.contains("doctor scan"),
        "the first runnable line is the scan: {first}"
    );
    let fixture = first.split_whitespace().last().unwrap();
    assert!(
        std::path::Path::new(fixture)
            .join("runtime.sqlite")
            .exists(),
        "{fixture}"
    );
}

#[test]
fn workspace_flag_repeats_for_scan_only() {
    let out = wsledger(&[
        "doctor",
        "scan",
        "-w",
        "fixtures/healthy",
        "-w",
        "fixtures/orphan-response",
        "--format",
        "json",
    ]);
    let doc = json(&out.stdout);
    let st: Vec<i64> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_i64().unwrap())
        .collect();
    assert_eq!(st, [0, 1]);
    assert_eq!(out.status, 1);
    let out = wsledger(&[
        "info",
        "-w",
        "fixtures/healthy",
        "-w",
        "fixtures/orphan-response",
    ]);
    assert_eq!(out.status, 2);
    assert!(out.stderr.starts_with("error: "));
}
