//! What the tests of the writing commands (excise, quarantine, repair, finalize-runs,
//! restore) share: Maka's owner lock held, the ways they are asked to do what they
//! must refuse, the rescan after them, and their outputs read back.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use wsledger::quarantine::startup_blockers;
use wsledger::scan::{scan_path, ScanOptions, ScanReport};

use super::{json_of, stderr, Ws};

/// What a refused or empty apply must leave as it was: the database file's hash and
/// the names in the workspace directory (no backup, no bundle directory).
#[derive(Debug, PartialEq)]
pub struct State {
    hash: String,
    files: Vec<String>,
}

/// The storage-root id [`Ws::hold_owner_lock`] marks a workspace with.
pub const ROOT_ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

impl Ws {
    /// Marks the workspace as Maka's storage root [`ROOT_ID`] and takes Maka's owner
    /// lock on it in this test's control namespace, as a running Maka holds it, until
    /// the returned lock is dropped.
    pub fn hold_owner_lock(&self) -> wsledger::lock::OwnerLock {
        super::write_marker(&self.root(), ROOT_ID);
        wsledger::lock::acquire(&self.control(), &[ROOT_ID.to_owned()]).unwrap()
    }

    /// `doctor <command> --apply --no-backup --format json`, which must succeed: its
    /// JSON.
    pub fn apply_no_backup(&self, command: &str) -> Value {
        json_of(&self.run(&[
            "doctor",
            command,
            "--apply",
            "--no-backup",
            "--format",
            "json",
        ]))
    }

    /// `doctor <command> --apply --out <out>`.
    pub fn apply_out(&self, command: &str, out: &Path) -> Output {
        self.run(&["doctor", command, "--apply", "--out", out.to_str().unwrap()])
    }

    /// [`Ws::apply_out`] into a directory that cannot be made: a file stands where its
    /// parent directory would be.
    pub fn apply_out_below_a_file(&self, command: &str) -> Output {
        let blocker = self.dir.path().join("a-file");
        std::fs::write(&blocker, "x").unwrap();
        self.apply_out(command, &blocker.join("bundles"))
    }

    /// `doctor <command> --apply --session maka_workspace_authority`: the session no
    /// writing command may touch.
    pub fn apply_to_workspace_authority(&self, command: &str) -> Output {
        self.run(&[
            "doctor",
            command,
            "--apply",
            "--session",
            "maka_workspace_authority",
        ])
    }

    /// `doctor restore <extra> <bundles>`.
    pub fn restore<P: AsRef<Path>>(&self, extra: &[&str], bundles: &[P]) -> Output {
        let mut args = vec!["doctor".to_owned(), "restore".into()];
        args.extend(extra.iter().map(|a| a.to_string()));
        args.extend(bundles.iter().map(|b| b.as_ref().display().to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&args)
    }

    pub fn state(&self) -> State {
        State {
            hash: self.db_hash(),
            files: self.files(),
        }
    }

    pub fn assert_unchanged(&self, before: &State) {
        assert_eq!(self.db_hash(), before.hash);
        assert_eq!(self.files(), before.files, "no backup, no bundle directory");
    }

    /// `doctor <command> --apply --format json` where there is nothing to do: nothing
    /// applied, no backup, and the workspace as it was in `before`. Its JSON.
    pub fn apply_changes_nothing(&self, command: &str, before: &State) -> Value {
        let doc = json_of(&self.run(&["doctor", command, "--apply", "--format", "json"]));
        assert_eq!(doc["applied"], false);
        assert!(doc["backup"].is_null());
        self.assert_unchanged(before);
        doc
    }

    /// A backup (a name with `.bak` in it) is in the workspace directory.
    pub fn has_backup(&self) -> bool {
        self.files().iter().any(|f| f.contains(".bak"))
    }
}

/// `doctor scan`'s report on a database, as the library gives it.
pub fn scan_report(db: &Path) -> ScanReport {
    scan_path(db, ScanOptions::default(), &mut |_, _| {}).unwrap()
}

/// Maka's gate accepts tool writes again and nothing blocks its start-up.
pub fn assert_gate_clear_and_startup_unblocked(report: &ScanReport, name: &str) {
    assert!(!report.maka_gate.tool_writes_refused, "{name}");
    assert!(
        startup_blockers(report, &BTreeSet::new()).is_empty(),
        "{name}"
    );
}

/// A writing command's JSON says that afterwards the gate accepts tool writes and
/// start-up is not blocked.
pub fn assert_after_is_clear(doc: &Value, name: &str) {
    assert_eq!(
        doc["after"]["tool_writes_refused"], false,
        "{name}: {doc:#}"
    );
    assert_eq!(doc["after"]["startup_blocked"], false, "{name}");
}

/// How a writing command refuses: exit 2, nothing on stdout.
pub fn assert_refused(o: &Output) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// The lines of an `ndjson` stdout, each parsed.
pub fn ndjson(o: &Output) -> Vec<Value> {
    super::ndjson_lines(&String::from_utf8_lossy(&o.stdout))
}
