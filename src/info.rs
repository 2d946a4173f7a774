//! `wsledger info`: where the workspace is, what schema it has, how big it is, whether
//! Maka holds it, whether Maka would open it, and what Maka's gate does with it.

use std::path::Path;

use crate::db::{DbError, Workspace};
use crate::scan::pipeline::{scan_workspace, ScanOptions};

/// `wsledger info`: where the workspace is, what schema it has, how big it is,
/// whether Maka holds it, whether Maka would open it, and what Maka's gate does with it.
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
    /// Which Maka release wrote the file (as in `doctor scan`).
    pub workspace_release: crate::scan::release::WorkspaceRelease,
    pub sessions: usize,
    pub runs: usize,
    pub events: u64,
    pub operations: usize,
    /// `held`, `free`, `no_root` (no marker and no binding: no Maka can lock it) or
    /// `unknown` (the probe failed; see `owner_lock_error`).
    pub owner_lock: String,
    pub owner_lock_paths: Vec<String>,
    pub owner_lock_error: Option<String>,
    /// `yes` when another process holds a lock on the database or its `-shm` (it has
    /// the file open), `no`, or `unknown` (the probe failed; see `open_error`).
    pub open_by_other_process: String,
    /// The pid of that process, when the kernel says it.
    pub open_by_pid: Option<u32>,
    pub open_error: Option<String>,
    pub maka_gate: crate::scan::MakaGate,
    /// Whether the writing release opens the file and its strict start-up recovery
    /// completes: the `startup` object of `doctor scan`.
    pub startup: Option<crate::startup::Startup>,
    /// `--maka all`: every catalogued build's `startup` object (as `doctor scan`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<Vec<crate::startup::Startup>>,
    /// Every catalogued build's composition (the table's "other builds" row; not in
    /// JSON).
    #[serde(skip)]
    pub other_builds: Vec<crate::startup::Startup>,
    pub findings: usize,
}

/// Gathers [`InfoReport`] for `db`. Creates nothing: the lock is probed, not taken.
pub fn workspace_info(
    db: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<InfoReport, DbError> {
    workspace_info_as(db, None, progress)
}

/// [`workspace_info`] with the start-up of the build `--maka` names (or every one).
pub fn workspace_info_as(
    db: &Path,
    maka: Option<crate::startup::builds::Maka>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<InfoReport, DbError> {
    let opts = ScanOptions {
        maka,
        ..ScanOptions::default()
    };
    let (facts, report, binding) = Workspace::read(db, |ws| {
        let facts = ws.schema_facts()?;
        let report = scan_workspace(ws, opts, &mut *progress)?;
        Ok((facts, report, ws.root_binding().ok().flatten()))
    })?;
    // Probed only now: no connection of ours is open on the file (see `OpenProbe`).
    let open_by = crate::lock::probe_open(db);
    let size = |p: &Path| std::fs::metadata(p).ok().map(|m| m.len());
    // The -wal is beside the file a link points to.
    let real = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    let (owner_lock, owner_lock_paths, owner_lock_error) =
        crate::lock::probe_owner_lock(db, binding.as_deref());
    Ok(InfoReport {
        schema_version: 1,
        database: db.display().to_string(),
        database_bytes: size(db).unwrap_or(0),
        wal_bytes: size(&crate::db::wal_path(&real)),
        user_version: facts.user_version,
        registry: facts.registry.clone(),
        capabilities: facts.capabilities.clone(),
        schema_current: report.summary.schema_current,
        workspace_release: report.workspace_release.clone(),
        sessions: report.summary.sessions,
        runs: report.summary.runs,
        events: report.summary.events,
        operations: report.summary.operations,
        owner_lock,
        owner_lock_paths,
        owner_lock_error,
        open_by_other_process: match &open_by {
            Ok(Some(_)) => "yes",
            Ok(None) => "no",
            Err(_) => "unknown",
        }
        .into(),
        open_by_pid: open_by.as_ref().ok().and_then(|o| o.as_ref()?.pid),
        open_error: open_by.as_ref().err().cloned(),
        maka_gate: report.maka_gate.clone(),
        startup: report.startup.clone(),
        compatibility: report.compatibility.clone(),
        other_builds: report.other_builds.clone(),
        findings: report.summary.findings,
    })
}
