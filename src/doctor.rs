//! Commands' building blocks that combine the database with the pure core: open,
//! read, compute. Rendering and argument handling stay in `cli`.

use std::path::Path;

use crate::db::{
    DbError, EventRow, HeaderRow, JournalRow, OperationRow, StoredOperationKey, Workspace,
};
use crate::scan::{ScanReport, ScanStore, Tables, Walker};

/// Options of a scan.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanOptions {
    /// Also run SQLite's `PRAGMA quick_check` over the whole file.
    pub integrity: bool,
    /// Keep a report for every run in [`ScanReport::runs`] (by default only runs that
    /// are not plainly terminal are kept, so memory does not grow with the file).
    pub all_runs: bool,
}

/// The scan's point lookups, on the workspace's connection.
struct Store<'a> {
    ws: &'a Workspace,
    has_headers: bool,
    has_operations: bool,
    has_journal: bool,
    has_ordinals: bool,
}

impl ScanStore for Store<'_> {
    fn header(&mut self, session_id: &str, run_id: &str) -> Result<Option<HeaderRow>, DbError> {
        if !self.has_headers {
            return Ok(None);
        }
        self.ws.header_of(session_id, run_id)
    }
    fn operation(&mut self, operation_id: &str) -> Result<Option<OperationRow>, DbError> {
        if !self.has_operations {
            return Ok(None);
        }
        self.ws.operation_of(operation_id)
    }
    fn operation_by_call(
        &mut self,
        invocation_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<OperationRow>, DbError> {
        if !self.has_operations {
            return Ok(None);
        }
        self.ws.operation_by_call(invocation_id, tool_call_id)
    }
    fn journal(&mut self, operation_id: &str) -> Result<Vec<JournalRow>, DbError> {
        if !self.has_journal {
            return Ok(Vec::new());
        }
        self.ws.journal_of(operation_id)
    }
    fn run_rows(&mut self, session_id: &str, run_id: &str) -> Result<Vec<EventRow>, DbError> {
        self.ws.run_event_rows(session_id, run_id)
    }
    fn header_count(&mut self) -> Result<u64, DbError> {
        if !self.has_headers {
            return Ok(0);
        }
        self.ws.count_rows("core_agent_runs")
    }
    fn for_each_header_key(
        &mut self,
        f: &mut dyn FnMut(&str, &str) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        if !self.has_headers {
            return Ok(());
        }
        self.ws.for_each_header_key(f)
    }
    fn for_each_operation(
        &mut self,
        f: &mut dyn FnMut(StoredOperationKey) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        if !self.has_operations {
            return Ok(());
        }
        self.ws.for_each_stored_operation(f)
    }
    fn session_of(&mut self, invocation_id: &str, run_id: &str) -> Result<Option<String>, DbError> {
        self.ws.session_of_run_events(invocation_id, run_id)
    }
    fn for_each_ordinal(&mut self, f: &mut dyn FnMut(&str, i64, &str)) -> Result<bool, DbError> {
        if !self.has_ordinals {
            return Ok(false);
        }
        self.ws.for_each_ordinal(f)?;
        Ok(true)
    }
    fn events_without_ordinal(&mut self) -> Result<Vec<(String, String, String)>, DbError> {
        if !self.has_ordinals {
            return Ok(Vec::new());
        }
        self.ws.events_without_ordinal()
    }
}

/// Reads every table the scan needs and computes the report. `progress` is called
/// with (rows read, total rows) now and then.
pub fn scan_workspace(
    ws: &Workspace,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    let schema = ws.schema_facts()?;
    let has = |t: &str| schema.tables.iter().any(|x| x == t);
    if !has("runtime_events") {
        return Err(DbError::NotAWorkspace {
            path: ws.path().to_path_buf(),
        });
    }
    let total = ws.event_count()?;
    let mut store = Store {
        ws,
        has_headers: has("core_agent_runs"),
        has_operations: has("tool_operations"),
        has_journal: has("tool_journal_events"),
        has_ordinals: has("runtime_session_event_ordinals"),
    };
    let mut walker = Walker::new().keep_all_runs(opts.all_runs);
    let mut n = 0u64;
    ws.for_each_event_ref(|row| {
        walker.push_row(row, &mut store)?;
        n += 1;
        if n.is_multiple_of(4096) {
            progress(n, total);
        }
        Ok(())
    })?;
    progress(n, total);
    let count = |t: &str| -> Result<usize, DbError> {
        Ok(if has(t) {
            ws.count_rows(t)? as usize
        } else {
            0
        })
    };
    let tables = Tables {
        sessions: if has("session_metadata") {
            count("session_metadata")?
        } else {
            ws.event_session_count()? as usize
        },
        runs: count("core_agent_runs")?,
        operations: count("tool_operations")?,
        integrity: if opts.integrity {
            Some(ws.quick_check()?)
        } else {
            None
        },
        schema,
    };
    let mut report = walker.finish(&mut store, tables)?;
    fill_identical(ws, &mut report)?;
    Ok(report)
}

/// Decides for each supersession group whether its occurrences carry the same fact (a
/// retry with a fresh id) or differ. Reads only the few payloads involved.
fn fill_identical(ws: &Workspace, report: &mut ScanReport) -> Result<(), DbError> {
    for group in &mut report.supersession {
        let ids: Vec<String> = group
            .occurrences
            .iter()
            .map(|o| o.event_id.clone())
            .collect();
        let payloads = ws.payloads_of(&ids)?;
        let facts: Vec<Option<String>> = ids
            .iter()
            .map(|id| payloads.get(id).and_then(|p| fact_without_identity(p)))
            .collect();
        group.identical = if facts.iter().all(Option::is_some) {
            Some(facts.windows(2).all(|w| w[0] == w[1]))
        } else {
            None
        };
    }
    Ok(())
}

/// The canonical text of an event without its `id` and `ts`: what a retry repeats.
fn fact_without_identity(payload: &str) -> Option<String> {
    let event = crate::event::decode_event_text(payload).ok()?;
    let mut json = crate::event::event_to_json(&event);
    if let crate::json::Json::Object(o) = &mut json {
        o.remove("id");
        o.remove("ts");
    }
    crate::json::stable_stringify(&json).ok()
}

/// Opens `db` read-only and scans it.
pub fn scan_path(
    db: &Path,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    let ws = Workspace::open_read_only(db)?;
    scan_workspace(&ws, opts, progress)
}

/// A finalize plan and what it was made from.
pub struct FinalizePlanning {
    pub report: ScanReport,
    pub plan: crate::finalize::Plan,
    /// `runtime_storage_root_binding.root_id`, if the workspace is bound.
    pub root_binding: Option<String>,
}

/// Scans `db` read-only, reads the rows of every run finalize would touch or report,
/// and plans `doctor finalize-runs`.
pub fn plan_finalize(
    db: &Path,
    opts: &crate::finalize::PlanOptions,
) -> Result<FinalizePlanning, DbError> {
    use crate::finalize::{candidates, invocation_for, plan, PlanInput, RunInput};
    let ws = Workspace::open_read_only(db)?;
    let report = scan_workspace(&ws, ScanOptions::default(), &mut |_, _| {})?;
    let mut input = PlanInput::default();
    for (session, run) in candidates(&report, opts) {
        let rows = ws.run_rows(&session, &run)?;
        let header = report
            .headers
            .iter()
            .find(|h| h.session_id == session && h.run_id == run);
        let invocation_users = match header.map(|h| invocation_for(h, &rows)) {
            Some(Ok(inv)) => Some(ws.invocation_users(&inv)?),
            _ => None,
        };
        if !input.sessions.contains_key(&session) {
            let rows = ws.session_rows(&session)?;
            input.sessions.insert(session.clone(), rows);
        }
        input.runs.insert(
            (session, run),
            RunInput {
                rows,
                invocation_users,
            },
        );
    }
    input.claims = ws.claims()?;
    input.ledger = Some(ws.ledger_fingerprint()?);
    let root_binding = ws.root_binding()?;
    let plan = plan(&report, &input, opts);
    Ok(FinalizePlanning {
        report,
        plan,
        root_binding,
    })
}

/// `wsledger info`: where the workspace is, what schema it has, how big it is,
/// whether Maka holds it, and what Maka's gate does with it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct InfoReport {
    pub schema_version: u32,
    pub database: String,
    pub database_bytes: u64,
    pub wal_bytes: Option<u64>,
    pub user_version: i64,
    pub registry: Option<std::collections::BTreeMap<String, i64>>,
    pub capabilities: Option<std::collections::BTreeMap<String, i64>>,
    pub schema_current: bool,
    pub sessions: usize,
    pub runs: usize,
    pub events: u64,
    pub operations: usize,
    /// `held`, `free`, `no_root` (no marker and no binding: no Maka can lock it) or
    /// `unknown` (the probe failed; see `owner_lock_error`).
    pub owner_lock: String,
    pub owner_lock_paths: Vec<String>,
    pub owner_lock_error: Option<String>,
    pub maka_gate: crate::scan::MakaGate,
    pub findings: usize,
}

/// Gathers [`InfoReport`] for `db`. Creates nothing: the lock is probed, not taken.
pub fn workspace_info(
    db: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<InfoReport, DbError> {
    let ws = Workspace::open_read_only(db)?;
    let facts = ws.schema_facts()?;
    let report = scan_workspace(&ws, ScanOptions::default(), progress)?;
    let binding = ws.root_binding().ok().flatten();
    drop(ws);
    let size = |p: &Path| std::fs::metadata(p).ok().map(|m| m.len());
    // The -wal is beside the file a link points to.
    let real = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    let (owner_lock, owner_lock_paths, owner_lock_error) = probe_owner_lock(db, binding.as_deref());
    Ok(InfoReport {
        schema_version: 1,
        database: db.display().to_string(),
        database_bytes: size(db).unwrap_or(0),
        wal_bytes: size(&crate::db::wal_path(&real)),
        user_version: facts.user_version,
        registry: facts.registry.clone(),
        capabilities: facts.capabilities.clone(),
        schema_current: report.summary.schema_current,
        sessions: report.summary.sessions,
        runs: report.summary.runs,
        events: report.summary.events,
        operations: report.summary.operations,
        owner_lock,
        owner_lock_paths,
        owner_lock_error,
        maka_gate: report.maka_gate.clone(),
        findings: report.summary.findings,
    })
}

fn probe_owner_lock(db: &Path, binding: Option<&str>) -> (String, Vec<String>, Option<String>) {
    let roots = match crate::lock::root_ids(db, binding) {
        Ok(r) => r,
        Err(e) => return ("unknown".into(), Vec::new(), Some(e.to_string())),
    };
    if roots.ids.is_empty() {
        return ("no_root".into(), Vec::new(), None);
    }
    let ns = match crate::lock::namespace() {
        Ok(n) => n,
        Err(e) => return ("unknown".into(), Vec::new(), Some(e.to_string())),
    };
    let paths: Vec<std::path::PathBuf> = roots
        .ids
        .iter()
        .map(|id| crate::lock::lock_path(&ns, id))
        .collect();
    let mut held = false;
    for p in &paths {
        match crate::lock::probe_held(p) {
            Ok(h) => held |= h,
            Err(e) => {
                let shown = paths.iter().map(|p| p.display().to_string()).collect();
                return (
                    "unknown".into(),
                    shown,
                    Some(format!("{}: {e}", p.display())),
                );
            }
        }
    }
    let shown = paths.iter().map(|p| p.display().to_string()).collect();
    (if held { "held" } else { "free" }.into(), shown, None)
}
