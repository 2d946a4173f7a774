//! On every workspace Maka's own test suite wrote (`../shared/maka-tests/`, unpacked
//! at test time): `--maka main` (the build whose suite wrote them, f19eede03) says
//! what Maka's own composition said of each (`maka.json`): whether it opens the file,
//! its error text exactly, and where it opens, whether its strict start-up recovery
//! completes. Maka's message is also mapped to a reason by the documented mapping
//! (`wsledger::startup::reasons::reason_for_message`, docs/finding-codes.md).
//! `maka.json` keeps an error's first 160 characters: a message that long is compared
//! on those.

mod common;

use common::maka_tests;
use serde_json::Value;
use wsledger::scan::pipeline::{scan_path, ScanOptions};
use wsledger::startup::builds::Maka;
use wsledger::startup::reasons::reason_for_message;

/// How many characters of an error `maka.json` keeps.
const KEPT: usize = 160;

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
            ScanOptions {
                maka: Some(Maka::Build("main")),
                ..ScanOptions::default()
            },
            &mut |_, _| {},
        )
        .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        let doc = serde_json::to_value(&report).unwrap();
        let v = &doc["startup"];
        assert_eq!(v["release"], "main");
        let got_opens = v["opens"].as_bool();
        let got_reason = v["refusal"]["reason"].as_str();
        let got_message = v["refusal"]["maka_message"]
            .as_str()
            .map(|m| m.chars().take(KEPT).collect::<String>());
        let want_message = maka["composition"]["error"].as_str().map(str::to_owned);
        let strict_agrees = !want_opens
            || v["strict_recovery"]["blocked"].as_bool()
                == Some(maka["strict_startup"]["ok"] == false);
        if got_opens != Some(want_opens)
            || got_reason != want_reason
            || got_message != want_message
            || !strict_agrees
        {
            disagree.push(format!(
                "{}: Maka {} {}; wsledger {v}",
                case.display(),
                maka["composition"],
                maka["strict_startup"]
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
