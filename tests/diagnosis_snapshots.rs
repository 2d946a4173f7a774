//! Snapshots of what a person reads: `doctor scan` and `doctor repair` (dry run and
//! `--apply`) as tables, on stuck-running, corrupt-ledger and a generated bench-like
//! workspace (sessions cloned by `examples/genws.rs`, with damage and stuck runs).
//! `UPDATE_SNAPSHOTS=1` rewrites them; read the diff before committing it.

mod common;
#[allow(dead_code)]
#[path = "../examples/genws.rs"]
mod genws;

use std::path::{Path, PathBuf};

use common::{snapshot, Ws};

/// Runs wsledger on the workspace named relatively (so the output does not depend on
/// where the temporary directory is), without colour, 120 columns wide.
fn run(ws: &Ws, args: &[&str]) -> (i32, String) {
    let o = ws
        .command_relative(args)
        .args(["--color", "never"])
        .env("COLUMNS", "120")
        .output()
        .unwrap();
    assert_ne!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// 12 sessions cloned from the healthy fixture, one orphaned response, one duplicated
/// call and two stuck runs, from a fixed seed.
fn generated() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let db: PathBuf = dir.path().join("ws/runtime.sqlite");
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/healthy/runtime.sqlite");
    let args = genws::Args::new(db, None, Some(12), 7)
        .template(template)
        .damage(1, 1, 2);
    genws::run(&args).unwrap();
    // genws leaves its damage report beside the database; not part of a workspace.
    for e in std::fs::read_dir(dir.path().join("ws")).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() != "runtime.sqlite" {
            std::fs::remove_file(p).unwrap();
        }
    }
    Ws { dir }
}

fn check(name: &str, ws: &Ws) {
    let (code, scan) = run(ws, &["doctor", "scan"]);
    assert_eq!(code, 1, "{name}: the scan has errors");
    snapshot(&format!("scan-{name}.txt"), &scan);
    let (code, dry) = run(ws, &["doctor", "repair"]);
    assert_eq!(code, 0);
    snapshot(&format!("repair-{name}.txt"), &dry);
    let (code, applied) = run(ws, &["doctor", "repair", "--apply"]);
    assert_eq!(code, 0);
    snapshot(&format!("repair-apply-{name}.txt"), &applied);
    // The plan printed by the scan is the one repair carries out.
    let plan = |s: &str| {
        let from = s.find("plan:").unwrap();
        let to = from + s[from..].find("\nafter: ").unwrap();
        let end = to + 1 + s[to + 1..].find('\n').unwrap();
        s[from..end].to_owned()
    };
    assert_eq!(plan(&scan), plan(&dry), "{name}");
    assert!(applied.contains("rescan: tool writes accepted; start-up not blocked; 0 stuck run(s)"));
}

#[test]
fn scan_and_repair_tables_on_stuck_running() {
    check("stuck-running", &Ws::copy("stuck-running"));
}

#[test]
fn scan_and_repair_tables_on_corrupt_ledger() {
    let ws = Ws::copy("corrupt-ledger");
    // The README's "my workspace is broken" shows this dry run as it is.
    let (_, dry) = run(&ws, &["doctor", "repair"]);
    let readme = std::fs::read_to_string("README.md").unwrap();
    let shown = dry.strip_prefix("workspace: ws\n").unwrap();
    assert!(
        readme.contains(shown),
        "README's repair example is stale:\n{shown}"
    );
    check("corrupt-ledger", &ws);
}

#[test]
fn scan_and_repair_tables_on_a_generated_workspace() {
    check("generated", &generated());
}
