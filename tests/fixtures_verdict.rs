//! Our verdict on every real workspace equals Maka's own (`verdict.json`).

mod common;

use std::path::{Path, PathBuf};

use common::{makas_issues, verdict};
use serde_json::Value;
use wsledger::scan::runs::RunState;
use wsledger::scan::{scan_path, ScanOptions};

/// Every real workspace: main's (`fixtures/<scenario>`) and the released builds'
/// (`fixtures/releases/<tag>/<scenario>`, copied from `../shared/maka-releases`).
fn fixtures() -> Vec<PathBuf> {
    let with_verdict = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("verdict.json").exists())
            .collect();
        v.sort();
        v
    };
    let mut v = with_verdict(Path::new("fixtures"));
    assert!(v.len() >= 11, "the real fixtures are missing");
    let mut tags: Vec<PathBuf> = std::fs::read_dir("fixtures/releases")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with('v'))
        .collect();
    tags.sort();
    let before = v.len();
    for tag in tags {
        v.extend(with_verdict(&tag));
    }
    assert!(v.len() - before >= 11, "the release fixtures are missing");
    v
}

/// The release that wrote a fixture: `generation.json`'s tag, or main's build.
fn writer(dir: &Path) -> String {
    let g: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("generation.json")).unwrap())
            .unwrap();
    g["release"]["tag"].as_str().unwrap_or("main").to_owned()
}

fn pairs(list: &Value, a: &str, b: &str) -> Vec<(String, String)> {
    common::text_pairs(list.as_array().unwrap(), a, b)
}

#[test]
fn every_real_workspace_gets_makas_verdict() {
    let mut failures = Vec::new();
    for dir in fixtures() {
        let v = verdict(&dir);
        let report = scan_path(
            &dir.join("runtime.sqlite"),
            ScanOptions {
                all_runs: true,
                ..ScanOptions::default()
            },
            &mut |_, _| {},
        )
        .unwrap();
        let name = dir.display().to_string();
        let mut check = |what: &str, ok: bool, detail: String| {
            if !ok {
                failures.push(format!("{name}: {what}: {detail}"));
            }
        };

        // The release that wrote it, recognised from the schema alone; a known
        // release's healthy file has no warning or error about its schema.
        let wr = &report.workspace_release;
        let tag = writer(&dir);
        check(
            "release",
            wr.exact && wr.matches.contains(&tag),
            format!("{wr:?} should match {tag}"),
        );
        check(
            "runtime schema",
            Some(wr.runtime_schema) == v["schema"]["user_version"].as_i64().or(Some(12)),
            format!("{}", wr.runtime_schema),
        );
        let schema_problems: Vec<&str> = report
            .findings
            .iter()
            .filter(|f| f.code.starts_with("schema_") && f.code != "schema_older_release")
            .map(|f| f.code)
            .collect();
        check(
            "schema findings",
            schema_problems.is_empty(),
            format!("{schema_problems:?}"),
        );

        // Scanner issues: code, event id, operation/tool call ids, in Maka's order.
        let want = makas_issues(&v).unwrap();
        let got = common::scanner_issues(&report);
        check(
            "scanner issues",
            got == want,
            format!("{got:?} != {want:?}"),
        );

        // Decode failures (event id and session).
        let want = pairs(&v["wholeFile"]["decodeFailures"], "eventId", "sessionId");
        let got: Vec<(String, String)> = report
            .findings
            .iter()
            .filter(|f| f.code == "event_undecodable")
            .map(|f| (f.event_id.clone().unwrap(), f.session_id.clone().unwrap()))
            .collect();
        check(
            "decode failures",
            got == want,
            format!("{got:?} != {want:?}"),
        );

        // The gate.
        let accepts = v["summary"]["acceptsToolBearingAppend"].as_bool().unwrap();
        check(
            "gate",
            report.maka_gate.tool_writes_refused != accepts,
            format!(
                "refused={} accepts={accepts}",
                report.maka_gate.tool_writes_refused
            ),
        );
        let first = v["toolLedgerHealth"]["issue"]["eventId"]
            .as_str()
            .map(str::to_owned);
        let got_first = report
            .maka_gate
            .first_issue
            .as_ref()
            .map(|i| i.event_id.clone());
        if v["toolLedgerHealth"]["status"] == "corrupt" {
            check(
                "first issue",
                got_first.is_some(),
                format!("{got_first:?} vs {first:?}"),
            );
        }
        if v["toolLedgerHealth"]["status"] == "decode_failure" {
            check(
                "first issue is null on decode failure",
                got_first.is_none(),
                format!("{got_first:?}"),
            );
        }

        // Stuck and unreadable runs.
        let mut want = pairs(&v["summary"]["stuckRunningRuns"], "sessionId", "runId");
        let mut got: Vec<(String, String)> = report
            .runs
            .iter()
            .filter(|r| r.state == RunState::Stuck)
            .map(|r| (r.session_id.clone(), r.run_id.clone()))
            .collect();
        want.sort();
        got.sort();
        check("stuck runs", got == want, format!("{got:?} != {want:?}"));
        let mut want = pairs(&v["summary"]["unreadableRuns"], "sessionId", "runId");
        let mut got: Vec<(String, String)> = report
            .runs
            .iter()
            .filter(|r| r.state == RunState::Unreadable)
            .map(|r| (r.session_id.clone(), r.run_id.clone()))
            .collect();
        want.sort();
        got.sort();
        check(
            "unreadable runs",
            got == want,
            format!("{got:?} != {want:?}"),
        );

        // Per-run classification words, where Maka could read the run.
        for run in v["runs"].as_array().unwrap() {
            let (s, r) = (
                run["sessionId"].as_str().unwrap(),
                run["runId"].as_str().unwrap(),
            );
            let ours = report
                .runs
                .iter()
                .find(|x| x.session_id == s && x.run_id == r);
            let Some(ours) = ours else {
                check("run present", false, format!("{s}/{r}"));
                continue;
            };
            if let Some(word) = run["terminalLedgerClassification"].as_str() {
                check(
                    "classification",
                    ours.classification.as_deref() == Some(word),
                    format!("{s}/{r}: {:?} != {word}", ours.classification),
                );
            }
            check(
                "header status",
                ours.header_status.as_deref() == run["headerStatus"].as_str(),
                format!("{s}/{r}"),
            );
        }

        // The release's own strict start-up (recorded for the release fixtures).
        if let Some(strict) = v["summary"]["strictStartupRecovery"].as_str() {
            let blockers =
                wsledger::quarantine::startup_blockers(&report, &std::collections::BTreeSet::new());
            check(
                "strict start-up",
                blockers.is_empty() == strict.starts_with("ok"),
                format!("{blockers:?} vs Maka's {strict:?}"),
            );
        }

        // Unsettled operations (Maka lists them from the projection).
        let want = v["summary"]["unsettledToolOperations"].as_u64().unwrap() as usize;
        check(
            "unsettled operations",
            report.summary.unsettled_operations == want,
            format!("{} != {want}", report.summary.unsettled_operations),
        );
        check(
            "events",
            report.summary.events == v["counts"]["runtimeEvents"].as_u64().unwrap(),
            String::new(),
        );
        check(
            "runs",
            report.summary.runs as u64 == v["counts"]["agentRuns"].as_u64().unwrap(),
            String::new(),
        );
        check(
            "sessions",
            report.summary.sessions as u64 == v["counts"]["sessions"].as_u64().unwrap(),
            String::new(),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn healthy_workspace_has_no_findings_and_an_open_gate() {
    let report = scan_path(
        Path::new("fixtures/healthy/runtime.sqlite"),
        ScanOptions::default(),
        &mut |_, _| {},
    )
    .unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert!(!report.maka_gate.tool_writes_refused);
}

#[test]
fn duplicates_form_supersession_groups_with_the_kept_occurrence() {
    for (name, kind, identical) in [
        ("damage-duplicate-call", "call", false),
        ("damage-duplicate-dispatch", "dispatch", true),
        ("damage-duplicate-response", "response", false),
    ] {
        let dir = Path::new("fixtures").join(name);
        let report = scan_path(
            &dir.join("runtime.sqlite"),
            ScanOptions::default(),
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(report.supersession.len(), 1, "{name}");
        let g = &report.supersession[0];
        assert_eq!(g.kind, kind);
        assert_eq!(g.identical, Some(identical), "{name}");
        assert_eq!(g.occurrences.len(), 2);
        // The duplicate is the scanner's issue; the projection keeps the first occurrence.
        assert_eq!(
            g.occurrences[1].event_id,
            report.issues[0].event_id.to_string()
        );
        assert_eq!(
            g.projection_keeps.as_deref(),
            Some(g.occurrences[0].event_id.as_str()),
            "{name}"
        );
    }
    let healthy = scan_path(
        Path::new("fixtures/healthy/runtime.sqlite"),
        ScanOptions::default(),
        &mut |_, _| {},
    )
    .unwrap();
    assert!(healthy.supersession.is_empty());
}

/// The default scan judges most runs plainly terminal from the header it read up front
/// and drops them without their report; what it finds must be exactly what the scan
/// that assesses every run in full finds.
#[test]
fn dropping_plainly_terminal_runs_changes_no_finding() {
    let findings = |db: &Path, all_runs: bool| {
        let report = scan_path(
            db,
            ScanOptions {
                all_runs,
                ..ScanOptions::default()
            },
            &mut |_, _| {},
        )
        .unwrap();
        serde_json::to_value(&report.findings).unwrap()
    };
    let mut with_run_findings = 0;
    for dir in fixtures() {
        let db = dir.join("runtime.sqlite");
        let full = findings(&db, true);
        assert_eq!(findings(&db, false), full, "{}", dir.display());
        if full
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"].as_str().unwrap().starts_with("run_"))
        {
            with_run_findings += 1;
        }
    }
    // Runs that are not plainly terminal are among them.
    assert!(with_run_findings >= 2, "{with_run_findings}");
}
