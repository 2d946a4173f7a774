//! Commands' building blocks that combine the database with the pure core: open,
//! read, compute. Rendering and argument handling stay in `cli`.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use crate::db::{DbError, Workspace};
use crate::scan::{ScanReport, Tables, Walker};

/// Options of a scan.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanOptions {
    /// Also run SQLite's `PRAGMA quick_check` over the whole file.
    pub integrity: bool,
}

/// Reads every table the scan needs and computes the report. `progress` is called
/// with (rows read, total rows) now and then.
pub fn scan_workspace(
    ws: &Workspace,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    scan_workspace_without(ws, opts, &BTreeSet::new(), progress)
}

/// Scans the workspace as it would be after Maka's conversation deletion of the
/// `excluded` sessions (`doctor quarantine`'s "after"): their events, run headers and
/// session rows are left out, and so are the tool operations whose call, dispatch or
/// result event is theirs and the journal rows Maka's purge deletes with them.
pub fn scan_workspace_without(
    ws: &Workspace,
    opts: ScanOptions,
    excluded: &BTreeSet<String>,
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
    let mut walker = Walker::new();
    let mut n = 0u64;
    let mut gone: HashSet<String> = HashSet::new();
    ws.for_each_event(|row| {
        if excluded.contains(&row.session_id) {
            gone.insert(row.event_id);
            return;
        }
        walker.push_row(row);
        n += 1;
        if n.is_multiple_of(4096) {
            progress(n, total);
        }
    })?;
    progress(n, total);
    let has_ordinals = has("runtime_session_event_ordinals");
    let purged_op = |o: &crate::db::OperationRow| {
        [
            Some(&o.call_event_id),
            o.dispatch_event_id.as_ref(),
            o.result_event_id.as_ref(),
        ]
        .into_iter()
        .flatten()
        .any(|id| gone.contains(id))
    };
    let purged_ops: HashSet<String> = if has("tool_operations") && !excluded.is_empty() {
        ws.tool_operations()?
            .iter()
            .filter(|o| purged_op(o))
            .map(|o| o.operation_id.clone())
            .collect()
    } else {
        HashSet::new()
    };
    let mut tables = Tables {
        headers: if has("core_agent_runs") {
            Some(ws.run_headers()?)
        } else {
            None
        },
        operations: if has("tool_operations") {
            Some(ws.tool_operations()?)
        } else {
            None
        },
        journal: if has("tool_journal_events") {
            Some(ws.tool_journal()?)
        } else {
            None
        },
        sessions: if has("session_metadata") {
            Some(ws.sessions()?)
        } else {
            None
        },
        events_without_ordinal: if has_ordinals {
            ws.events_without_ordinal()?
        } else {
            Vec::new()
        },
        ordinal_gaps: if has_ordinals {
            ws.ordinal_gaps()?
        } else {
            Vec::new()
        },
        integrity: if opts.integrity {
            Some(ws.quick_check()?)
        } else {
            None
        },
        schema,
    };
    if !excluded.is_empty() {
        let keep = |s: &String| !excluded.contains(s);
        if let Some(h) = &mut tables.headers {
            h.retain(|r| keep(&r.session_id));
        }
        if let Some(o) = &mut tables.operations {
            o.retain(|r| !purged_op(r));
        }
        if let Some(j) = &mut tables.journal {
            j.retain(|r| {
                !purged_ops.contains(&r.operation_id)
                    && !r
                        .runtime_event_id
                        .as_ref()
                        .is_some_and(|id| gone.contains(id))
            });
        }
        if let Some(s) = &mut tables.sessions {
            s.retain(|r| keep(&r.session_id));
        }
        tables.events_without_ordinal.retain(|r| keep(&r.1));
        tables.ordinal_gaps.retain(|r| keep(&r.0));
    }
    let mut report = walker.finish(tables);
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
    let (owner_lock, owner_lock_paths, owner_lock_error) = probe_owner_lock(db, binding.as_deref());
    Ok(InfoReport {
        schema_version: 1,
        database: db.display().to_string(),
        database_bytes: size(db).unwrap_or(0),
        wal_bytes: size(&crate::db::wal_path(db)),
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
