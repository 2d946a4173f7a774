//! Commands' building blocks that combine the database with the pure core: open,
//! read, compute. Rendering and argument handling stay in `cli`.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use crate::db::{
    DbError, EventRow, HeaderRow, JournalRow, OperationRow, StoredOperationKey, Workspace,
};
use crate::scan::{HeaderBrief, ScanReport, ScanStore, Tables, Walker};

/// Options of a scan.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanOptions {
    /// Also run SQLite's `PRAGMA quick_check` over the whole file.
    pub integrity: bool,
    /// Keep a report for every run in [`ScanReport::runs`] (by default only runs that
    /// are not plainly terminal are kept, so memory does not grow with the file).
    pub all_runs: bool,
    /// The progress callback does not use the total (no bar is shown): skip counting
    /// `runtime_events` before the walk (the callback then gets 0 as the total).
    pub no_total: bool,
}

/// The scan's point lookups, on the workspace's connection.
struct Store<'a> {
    ws: &'a Workspace,
    has_headers: bool,
    has_operations: bool,
    has_journal: bool,
    has_ordinals: bool,
    gone: Exclusion,
    /// Digests of the stored projections, when usable (see `read_digests`).
    digests: Option<crate::scan::projection::StoredDigests>,
    /// Decodable headers by a 128-bit fingerprint of `(session, run)`, when usable.
    briefs: Option<HeaderBriefs>,
}

/// Every decodable run header, reduced ([`HeaderBrief`]), by fingerprint of
/// `(session, run)`. Memory: about 100 bytes per run header.
struct HeaderBriefs {
    hashers: (
        std::collections::hash_map::RandomState,
        std::collections::hash_map::RandomState,
    ),
    map: std::collections::HashMap<u128, HeaderBrief>,
}

impl HeaderBriefs {
    fn key(&self, s: &str, r: &str) -> u128 {
        use std::hash::BuildHasher;
        (u128::from(self.hashers.0.hash_one((s, r))) << 64)
            | u128::from(self.hashers.1.hash_one((s, r)))
    }
}

impl Store<'_> {
    /// Reads the digests of the stored tool projections in one pass over each table.
    /// Not for an after-scan (exclusions change what the lookups return), and not
    /// when an operation id is not UTF-8 text (a lookup by text would not find it).
    fn read_digests(&mut self) -> Result<(), DbError> {
        if !self.gone.sessions.is_empty() {
            return Ok(());
        }
        let mut d = crate::scan::projection::StoredDigests::with_capacity(if self.has_operations {
            self.ws.count_rows("tool_operations")? as usize
        } else {
            0
        });
        let mut usable = true;
        if self.has_operations {
            self.ws.for_each_operation_row(|row, key_ok| {
                usable &= key_ok;
                d.add_operation(row);
            })?;
        }
        if self.has_journal && usable {
            self.ws.for_each_journal_row(|row, key_ok| {
                usable &= key_ok;
                d.add_journal(row);
            })?;
        }
        self.digests = usable.then_some(d);
        Ok(())
    }

    /// Reads and decodes every run header once. Not for an after-scan. A header that
    /// does not decode, or whose keys are not UTF-8 text, is left out (its run is
    /// then looked up as before).
    fn read_briefs(&mut self) -> Result<(), DbError> {
        if !self.gone.sessions.is_empty() || !self.has_headers {
            return Ok(());
        }
        let mut b = HeaderBriefs {
            hashers: Default::default(),
            // Sized once: no transient doubling while it fills.
            map: std::collections::HashMap::with_capacity(
                self.ws.count_rows("core_agent_runs")? as usize
            ),
        };
        self.ws.for_each_header_row(|row, keys_ok| {
            if !keys_ok {
                return;
            }
            if let Ok(h) =
                crate::header::decode_header(&row.record_json, &row.session_id, &row.run_id)
            {
                let k = b.key(&row.session_id, &row.run_id);
                if let Some(brief) = HeaderBrief::new(&h) {
                    b.map.insert(k, brief);
                }
            }
        })?;
        self.briefs = Some(b);
        Ok(())
    }
}

/// What Maka's conversation deletion of some sessions removes, for a scan of the
/// workspace as it would be afterwards (`doctor quarantine`'s "after"). Empty for an
/// ordinary scan.
#[derive(Default)]
struct Exclusion {
    sessions: BTreeSet<String>,
    /// Event ids of those sessions.
    events: HashSet<String>,
    /// Operation ids whose call, dispatch or result event is theirs (Maka's purge
    /// deletes those rows and their journal).
    operations: HashSet<String>,
}

impl Exclusion {
    fn read(
        ws: &Workspace,
        sessions: &BTreeSet<String>,
        has_ops: bool,
    ) -> Result<Exclusion, DbError> {
        let mut gone = Exclusion {
            sessions: sessions.clone(),
            ..Exclusion::default()
        };
        if sessions.is_empty() {
            return Ok(gone);
        }
        for s in sessions {
            gone.events
                .extend(ws.session_events(s)?.into_iter().map(|r| r.event_id));
        }
        if has_ops {
            for o in ws.tool_operations()? {
                let touched = [
                    Some(&o.call_event_id),
                    o.dispatch_event_id.as_ref(),
                    o.result_event_id.as_ref(),
                ]
                .into_iter()
                .flatten()
                .any(|id| gone.events.contains(id));
                if touched {
                    gone.operations.insert(o.operation_id);
                }
            }
        }
        Ok(gone)
    }

    fn session(&self, s: &str) -> bool {
        self.sessions.contains(s)
    }

    fn operation(&self, row: &Option<OperationRow>) -> bool {
        row.as_ref()
            .is_some_and(|r| self.operations.contains(&r.operation_id))
    }
}

impl ScanStore for Store<'_> {
    fn header(&mut self, session_id: &str, run_id: &str) -> Result<Option<HeaderRow>, DbError> {
        if !self.has_headers || self.gone.session(session_id) {
            return Ok(None);
        }
        self.ws.header_of(session_id, run_id)
    }
    fn operation(&mut self, operation_id: &str) -> Result<Option<OperationRow>, DbError> {
        if !self.has_operations {
            return Ok(None);
        }
        let row = self.ws.operation_of(operation_id)?;
        Ok(if self.gone.operation(&row) { None } else { row })
    }
    fn operation_by_call(
        &mut self,
        invocation_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<OperationRow>, DbError> {
        if !self.has_operations {
            return Ok(None);
        }
        let row = self.ws.operation_by_call(invocation_id, tool_call_id)?;
        Ok(if self.gone.operation(&row) { None } else { row })
    }
    fn header_brief(&mut self, session_id: &str, run_id: &str) -> Option<&HeaderBrief> {
        let b = self.briefs.as_ref()?;
        b.map.get(&b.key(session_id, run_id))
    }
    fn projection_matches(
        &mut self,
        op: &crate::ledger::scanner::Operation,
        commits: &std::collections::HashMap<String, i64>,
    ) -> bool {
        self.digests
            .as_ref()
            .is_some_and(|d| d.matches(op, commits))
    }
    fn journal(&mut self, operation_id: &str) -> Result<Vec<JournalRow>, DbError> {
        if !self.has_journal {
            return Ok(Vec::new());
        }
        if self.gone.operations.contains(operation_id) {
            return Ok(Vec::new());
        }
        let mut rows = self.ws.journal_of(operation_id)?;
        rows.retain(|j| {
            !j.runtime_event_id
                .as_ref()
                .is_some_and(|id| self.gone.events.contains(id))
        });
        Ok(rows)
    }
    fn run_rows(&mut self, session_id: &str, run_id: &str) -> Result<Vec<EventRow>, DbError> {
        if self.gone.session(session_id) {
            return Ok(Vec::new());
        }
        self.ws.run_event_rows(session_id, run_id)
    }
    fn header_count(&mut self) -> Result<u64, DbError> {
        if !self.has_headers {
            return Ok(0);
        }
        if self.gone.sessions.is_empty() {
            return self.ws.count_rows("core_agent_runs");
        }
        let mut n = 0;
        self.for_each_header_key(&mut |_, _| {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }
    fn for_each_header_key(
        &mut self,
        f: &mut dyn FnMut(&str, &str) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        if !self.has_headers {
            return Ok(());
        }
        let gone = &self.gone;
        self.ws.for_each_header_key(&mut |s: &str, r: &str| {
            if gone.session(s) {
                return Ok(());
            }
            f(s, r)
        })
    }
    fn for_each_operation(
        &mut self,
        f: &mut dyn FnMut(StoredOperationKey) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        if !self.has_operations {
            return Ok(());
        }
        let gone = &self.gone;
        self.ws
            .for_each_stored_operation(&mut |row: StoredOperationKey| {
                if gone.operations.contains(&row.operation_id) {
                    return Ok(());
                }
                f(row)
            })
    }
    fn session_of(&mut self, invocation_id: &str, run_id: &str) -> Result<Option<String>, DbError> {
        self.ws.session_of_run_events(invocation_id, run_id)
    }
    fn for_each_ordinal(&mut self, f: &mut dyn FnMut(&str, i64, &str)) -> Result<bool, DbError> {
        if !self.has_ordinals {
            return Ok(false);
        }
        let gone = &self.gone;
        // Ordinal rows cascade with their events.
        self.ws.for_each_ordinal(&mut |s: &str, o: i64, e: &str| {
            if !gone.session(s) {
                f(s, o, e)
            }
        })?;
        Ok(true)
    }
    fn events_without_ordinal(&mut self) -> Result<Vec<(String, String, String)>, DbError> {
        if !self.has_ordinals {
            return Ok(Vec::new());
        }
        let mut rows = self.ws.events_without_ordinal()?;
        rows.retain(|(_, s, _)| !self.gone.session(s));
        Ok(rows)
    }
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
    let total = if opts.no_total { 0 } else { ws.event_count()? };
    let mut store = Store {
        ws,
        has_headers: has("core_agent_runs"),
        has_operations: has("tool_operations"),
        has_journal: has("tool_journal_events"),
        has_ordinals: has("runtime_session_event_ordinals"),
        gone: Exclusion::read(ws, excluded, has("tool_operations"))?,
        digests: None,
        briefs: None,
    };
    store.read_digests()?;
    store.read_briefs()?;
    let mut walker = Walker::new().keep_all_runs(opts.all_runs);
    let mut n = 0u64;
    ws.for_each_event_ref(|row| {
        if store.gone.session(&row.session_id) {
            return Ok(());
        }
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
    // Excluded sessions are counted out of the totals (their rows would be gone).
    let sessions_gone = if has("session_metadata") {
        excluded
            .iter()
            .filter(|s| ws.session_exists(s).unwrap_or(false))
            .count()
    } else {
        excluded.len()
    };
    let runs_total = store.header_count()? as usize;
    let tables = Tables {
        sessions: if has("session_metadata") {
            count("session_metadata")?
        } else {
            ws.event_session_count()? as usize
        }
        .saturating_sub(sessions_gone),
        runs: runs_total,
        operations: count("tool_operations")?.saturating_sub(store.gone.operations.len()),
        integrity: if opts.integrity {
            Some(ws.quick_check()?)
        } else {
            None
        },
        schema,
    };
    let has_run_events = tables
        .schema
        .tables
        .iter()
        .any(|t| t == "core_agent_run_events");
    let mut report = walker.finish(&mut store, tables)?;
    fill_identical(ws, &mut report)?;
    if has_run_events {
        let mut bad = Vec::new();
        ws.for_each_run_event(&mut |s, r, seq, record, turn| {
            if store.gone.session(s) {
                return;
            }
            if let Err(why) = crate::header::check_run_event(record, s, r, turn) {
                bad.push(
                    crate::findings::Finding::new(
                        "run_event_undecodable",
                        format!("core_agent_run_events sequence {seq}: {why}"),
                    )
                    .session(s)
                    .run(r),
                );
            }
        })?;
        if !bad.is_empty() {
            report.findings.extend(bad);
            report.recount();
        }
    }
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
    let runs = candidates(&report, opts);
    let keys: Vec<(&str, &str)> = runs.iter().map(|(s, r)| (s.as_str(), r.as_str())).collect();
    // All runs at once: their tool operations are found in one pass.
    let all_rows = ws.runs_rows(&keys)?;
    for ((session, run), rows) in runs.into_iter().zip(all_rows) {
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
