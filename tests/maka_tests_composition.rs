//! On every workspace Maka's own test suite wrote (`../shared/maka-tests/`, unpacked
//! at test time): whether Maka opens it, and the refusal reason, equal what Maka's own
//! composition said of it (`maka.json`, written by main f19eede03). The scan's
//! `startup` speaks for the release that wrote the file; where that is not main, its
//! upgrade preview carries main's verdict (`upgrade.targets[].composition`). Maka's
//! message is mapped to a reason by the documented mapping
//! (`wsledger::startup::reasons::reason_for_message`, docs/finding-codes.md).

mod common;

use common::maka_tests;
use serde_json::Value;
use wsledger::scan::pipeline::{scan_path, ScanOptions};
use wsledger::startup::reasons::reason_for_message;

/// main's verdict in the scan document: `startup` when main wrote the file, else the
/// upgrade preview's. A file of a Maka newer than main gets no verdict from the scan
/// (its start-up is not known): main's composition model is asked directly.
fn mains_verdict(doc: &Value, db: &std::path::Path) -> Value {
    if doc["startup"]["opens"].is_null() {
        let facts = wsledger::db::Workspace::read(db, |ws| ws.startup_facts()).unwrap();
        return serde_json::to_value(wsledger::startup::verdict(&facts, "main")).unwrap();
    }
    if doc["startup"]["release"] == "main" {
        return doc["startup"].clone();
    }
    doc["upgrade"]["targets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["release"] == "main"))
        .map(|t| t["composition"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn whether_maka_opens_each_workspace_and_why_not_are_makas() {
    let Some(root) = maka_tests::present() else {
        return;
    };
    let cases = maka_tests::workspaces(&root);
    assert_eq!(cases.len(), 250, "the tarball holds 250 workspaces");
    let mut disagree = Vec::new();
    let mut refused = 0;
    for case in &cases {
        let maka: Value =
            serde_json::from_str(&std::fs::read_to_string(case.join("maka.json")).unwrap())
                .unwrap();
        let want_opens = maka["composition"]["ok"].as_bool().unwrap();
        let want_reason = maka["composition"]["error"].as_str().map(|m| {
            reason_for_message(m)
                .unwrap_or_else(|| panic!("{}: no reason for Maka's message {m}", case.display()))
        });
        let report = scan_path(
            &case.join("runtime.sqlite"),
            ScanOptions::default(),
            &mut |_, _| {},
        )
        .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        let doc = serde_json::to_value(&report).unwrap();
        let v = mains_verdict(&doc, &case.join("runtime.sqlite"));
        let got_opens = v["opens"].as_bool();
        let got_reason = v["refusal"]["reason"].as_str();
        if got_opens != Some(want_opens) || got_reason != want_reason {
            disagree.push(format!(
                "{}: Maka {}; wsledger {v}",
                case.display(),
                maka["composition"]
            ));
        }
        // The scan's own start-up verdict and its finding agree.
        let findings = doc["findings"].as_array().unwrap();
        let has_refusal = findings.iter().any(|f| f["code"] == "startup_refused");
        assert_eq!(
            has_refusal,
            doc["startup"]["opens"] == false,
            "{}: {}",
            case.display(),
            doc["startup"]
        );
        if has_refusal {
            refused += 1;
            let f = findings
                .iter()
                .find(|f| f["code"] == "startup_refused")
                .unwrap();
            assert_eq!(f["severity"], "error");
            assert_eq!(f["detail"]["reason"], doc["startup"]["refusal"]["reason"]);
        }
    }
    assert!(
        disagree.is_empty(),
        "{} of 250 disagree:\n{}",
        disagree.len(),
        disagree.join("\n")
    );
    // Maka refused 77 of them; the scans' own verdicts say so for those main wrote.
    assert!(refused >= 70, "only {refused} startup_refused findings");
}
