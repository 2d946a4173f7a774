//! Helpers shared by the finalize-runs tests: running the binary on a [`Ws`] and
//! comparing databases.

use std::path::Path;
use std::process::{Command, Output};

use rusqlite::Connection;
use wsledger::scan::ScanReport;
use wsledger::scan::{scan_path, ScanOptions};

pub use super::ws::Ws;

impl Ws {
    /// Runs `wsledger doctor finalize-runs -w <ws> <args>`.
    pub fn finalize(&self, args: &[&str]) -> Output {
        self.finalize_env(args, &[])
    }

    pub fn finalize_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.finalize_command(args, env).output().unwrap()
    }

    pub fn finalize_command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_wsledger"));
        c.args(["doctor", "finalize-runs", "--workspace"])
            .arg(self.root())
            .args(args)
            .env_remove("WSLEDGER_WORKSPACE")
            .env_remove("WSLEDGER_NOW_MS")
            .env_remove("WSLEDGER_BACKUP_DIR")
            .env("WSLEDGER_MAKA_CONTROL_DIR", self.control())
            .env("NO_COLOR", "1");
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    /// A scan that keeps every run (terminal ones too), for assertions on them.
    pub fn scan(&self) -> ScanReport {
        let all = ScanOptions {
            all_runs: true,
            ..ScanOptions::default()
        };
        scan_path(&self.db(), all, &mut |_, _| {}).unwrap()
    }

    /// Every row of the tables finalize may write, as text, in a fixed order.
    pub fn dump(&self) -> Vec<String> {
        dump(&self.db())
    }

    pub fn schema(&self) -> Vec<String> {
        schema(&self.db())
    }
}

/// crash-mid-tool's `Bash` operation: dispatched, never answered.
pub const CRASH_OP: &str = "toolop_e6e54c955b76c4be87dc0809acbe69a8";

/// crash-mid-tool with its `Bash` dispatch re-labelled `outcome_unknown`.
pub fn outcome_unknown_ws() -> Ws {
    let ws = Ws::copy("crash-mid-tool");
    ws.conn()
        .execute_batch(&format!(
            "UPDATE runtime_events SET payload_json = replace(payload_json, \
             '\"recoveryMode\":\"never_auto_retry\"', '\"recoveryMode\":\"outcome_unknown\"') \
             WHERE event_id = '{CRASH_OP}_dispatch';
             UPDATE tool_operations SET recovery_mode = 'outcome_unknown' WHERE operation_id = '{CRASH_OP}';
             UPDATE tool_journal_events SET recovery_mode = 'outcome_unknown' WHERE operation_id = '{CRASH_OP}';"
        ))
        .unwrap();
    ws
}

/// Tables a finalize may write, with their ordering.
pub const TABLES: &[(&str, &str)] = &[
    ("runtime_events", "event_id"),
    ("runtime_session_event_ordinals", "session_id, ordinal"),
    ("core_agent_runs", "session_id, run_id"),
    ("core_agent_run_events", "session_id, run_id, sequence"),
    ("session_messages", "session_id, sequence"),
    ("session_message_payloads", "session_id, sequence"),
    (
        "session_message_chunks",
        "session_id, sequence, chunk_index",
    ),
    ("session_metadata", "session_id"),
    ("session_catalog_projection", "session_id"),
    ("session_catalog_state", "scope"),
    ("tool_operations", "operation_id"),
    ("tool_journal_events", "journal_seq"),
    ("runtime_partial_snapshots", "stream_key"),
    ("operational_schema_migrations", "scope"),
    ("runtime_capabilities", "capability"),
];

pub fn dump(db: &Path) -> Vec<String> {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut out = Vec::new();
    for (t, order) in TABLES {
        let mut stmt = c
            .prepare(&format!("SELECT * FROM {t} ORDER BY {order}"))
            .unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let mut line = format!("{t}:");
            for i in 0..n {
                let v: rusqlite::types::Value = r.get(i).unwrap();
                line.push_str(&format!("{v:?}|"));
            }
            out.push(line);
        }
    }
    let uv: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    out.push(format!("user_version:{uv}"));
    out
}

pub fn schema(db: &Path) -> Vec<String> {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = c
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok(format!(
                "{}|{}|{}|{:?}",
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?
            ))
        })
        .unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

pub fn stdout_json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success() || o.status.code() == Some(1),
        "status {:?}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

/// Finding identities `(code, session, run, event, operation, tool call)`, sorted.
pub fn finding_keys(r: &ScanReport) -> Vec<String> {
    let mut v: Vec<String> = r
        .findings
        .iter()
        .map(|f| {
            format!(
                "{}|{:?}|{:?}|{:?}|{:?}|{:?}",
                f.code, f.session_id, f.run_id, f.event_id, f.operation_id, f.tool_call_id
            )
        })
        .collect();
    v.sort();
    v
}

/// Findings of `after` that `before` does not have (as a multiset).
pub fn new_findings(before: &ScanReport, after: &ScanReport) -> Vec<String> {
    let mut b = finding_keys(before);
    let mut out = Vec::new();
    for k in finding_keys(after) {
        match b.iter().position(|x| *x == k) {
            Some(i) => {
                b.remove(i);
            }
            None => out.push(k),
        }
    }
    out
}

/// The stuck runs (header open, no terminal event) of a report.
pub fn stuck(r: &ScanReport) -> Vec<(String, String)> {
    r.runs
        .iter()
        .filter(|x| x.state == wsledger::scan::runs::RunState::Stuck)
        .map(|x| (x.session_id.clone(), x.run_id.clone()))
        .collect()
}
