//! The scan's pipeline: which connections and threads read, decode and walk the
//! ledger, how deep their queues are, and the reads before and after the walk.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;

use crate::db::{
    DbError, EventRow, HeaderRow, JournalRow, OperationRow, StoredOperationKey, Workspace,
};
use crate::scan::{
    EventBatch, EventHasher, HeaderBrief, OrdinalSummary, ScanReport, ScanStore, Tables, Walker,
};

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
    /// How the work is spread over threads. Every way gives the same report; tests
    /// compare them.
    pub threads: Threads,
    /// Judge the file with these release rules instead of those of the release that
    /// wrote it (the upgrade preview).
    pub rules: Option<crate::release::Rules>,
    /// `--maka`: whose start-up `startup` speaks for (default: the writer's), or every
    /// catalogued build's as well (`compatibility`).
    pub maka: Option<crate::startup::builds::Maka>,
}

/// Batches at the decoder at once by default. The reading thread is the busier one
/// (it also walks, and shares the cores with the second connection), so it decodes a
/// batch itself only when the decoder is well behind: on the bench workspace 4 took
/// about 0.86 of the time 2 took, for 2 to 5 MB more memory.
const AUTO_AT_DECODER: usize = 4;

/// See [`walk_beside_reader`]: by default the reading thread decodes a batch itself
/// while this many are waiting to be walked (on the bench workspace 1 to 5 were
/// within noise of each other, never decoding there 10% slower), and stops reading
/// while [`ROWS_QUEUED`] are (8 was no faster than 4, for about 3 MB more at 1M events).
const DECODE_BEHIND: usize = 2;
const ROWS_QUEUED: usize = 4;

/// See [`ScanOptions::threads`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// Headers and run events on a second connection when one sees the same data, and
    /// the rows read on a third while this thread decodes and walks them
    /// (`RowReader(2)`); without such connections, payloads decoded on a second thread
    /// while the next rows are read (`AtDecoder(4)`).
    #[default]
    Auto,
    /// Everything on the calling thread, row by row.
    One,
    /// Rows read on a thread and connection of their own, which also decodes a batch
    /// while at least this many wait to be walked (`0`: every batch), while this thread
    /// decodes the rest and walks; when no other connection is certain to see the same
    /// data, as `AtDecoder(4)`. What `Auto` does, with [`DECODE_BEHIND`].
    RowReader(usize),
    /// Rows read, and walked, here, with at most this many batches at a decoder thread
    /// at once (`0`: every batch decoded on the reading thread).
    AtDecoder(usize),
}

/// The scan's point lookups, on the workspace's connection.
struct Store<'a> {
    ws: &'a Workspace,
    has_headers: bool,
    has_operations: bool,
    has_journal: bool,
    has_ordinals: bool,
    gone: &'a Exclusion,
    /// Digests of the stored projections, when usable (see `read_digests`).
    digests: Option<Arc<crate::scan::projection::StoredDigests>>,
    /// `tool_operations` rows with a `dispatch_event_id`, counted with the digests.
    dispatched_rows: u64,
    /// Decodable headers by a 128-bit fingerprint of `(session, run)`, when usable
    /// (shared with the run-event check).
    briefs: Option<Arc<HeaderBriefs>>,
    /// One bit per entry of `briefs`: its run was walked (see `mark_walked`); empty
    /// until the first mark.
    walked: Vec<u64>,
    /// The ordinal rows, when reduced beside the walk.
    ordinals: Option<OrdinalSummary>,
    /// Gathered with the journal's digests, for the diagnosis (see
    /// [`crate::db::quarantine::JournalEventRefs`]).
    journal_refs: Option<Arc<crate::db::quarantine::JournalEventRefs>>,
    /// Opening facts a newer Maka's migration shelved, `(session, run) → turn` (read
    /// only under rules that judge runs off the event spine).
    shelved: std::collections::HashMap<(String, String), String>,
}

/// Every decodable run header, reduced ([`HeaderBrief`]), sorted by a 128-bit key of
/// `(session, run)` ([`HeaderBriefs::key`]). Memory: 48 bytes per run header (and the
/// failure class and abort source where a header has one). A sorted vector, not a
/// hash map: at 500k runs the map's buckets were half empty (25 MB).
struct HeaderBriefs {
    hasher: crate::hash128::Keyed128,
    sorted: Vec<(u128, HeaderBrief)>,
}

impl HeaderBriefs {
    /// The run id's first eight bytes, then 64 bits of a keyed hash of the pair. A
    /// root run's id is its invocation's, and the walk closes runs in invocation order:
    /// sorted this way, the briefs are in about the order they are looked up, so that
    /// one lookup's binary search reads what the one before it brought into the
    /// cache. With keys sorted by the hash alone, each of 500k lookups missed the cache
    /// about twenty times (a second of a 5M-event scan, on the walk's thread). Two
    /// pairs share a key only if they share the prefix and the hash.
    fn key(&self, s: &str, r: &str) -> u128 {
        let mut prefix = [0u8; 8];
        let n = r.len().min(8);
        prefix[..n].copy_from_slice(&r.as_bytes()[..n]);
        let hash = self.hasher.hash(&(s, r)) as u64;
        u128::from(u64::from_be_bytes(prefix)) << 64 | u128::from(hash)
    }

    fn get(&self, s: &str, r: &str) -> Option<&HeaderBrief> {
        Some(&self.sorted[self.position(s, r)?].1)
    }

    fn position(&self, s: &str, r: &str) -> Option<usize> {
        let k = self.key(s, r);
        self.sorted.binary_search_by_key(&k, |e| e.0).ok()
    }

    /// Sorts what was pushed, in place (a stable sort would take half the vector
    /// again: 12 MB at 500k runs). A key pushed more than once (two header rows for one
    /// run: only in a damaged file) keeps no brief, so its run is looked up in the
    /// table like any run without one.
    fn seal(&mut self) {
        self.sorted.sort_unstable_by_key(|e| e.0);
        let mut kept = 0;
        let mut i = 0;
        while i < self.sorted.len() {
            let key = self.sorted[i].0;
            let mut end = i + 1;
            while end < self.sorted.len() && self.sorted[end].0 == key {
                end += 1;
            }
            if end == i + 1 {
                self.sorted.swap(kept, i);
                kept += 1;
            }
            i = end;
        }
        self.sorted.truncate(kept);
    }
}

impl Store<'_> {
    /// Reads the digests of the stored tool projections in one pass over each table.
    /// Not for an after-scan (exclusions change what the lookups return), and not
    /// when an operation id is not UTF-8 text (a lookup by text would not find it).
    /// `operation_rows`: how many rows `tool_operations` has.
    /// `journal_reader`: a second connection to hash the journal rows on, on a thread
    /// of their own, while the operations are read here. Hashing is most of a journal
    /// row's cost, and the walk waits for the digests; the rows' map entries come back
    /// a chunk at a time, so that memory stays one map.
    fn read_digests<'scope>(
        &mut self,
        operation_rows: usize,
        journal_reader: Option<Workspace>,
        scope: &'scope std::thread::Scope<'scope, '_>,
    ) -> Result<(), DbError> {
        use crate::db::quarantine::{JournalEventRefs, JournalRefsBuilder};
        use crate::scan::projection::{JournalEntry, StoredDigests};
        if !self.gone.sessions.is_empty() {
            return Ok(());
        }
        let mut d = StoredDigests::with_capacity(operation_rows);
        const CHUNK: usize = 1024;
        let beside = journal_reader.filter(|_| self.has_journal).and_then(|j| {
            let hasher = d.journal_hasher();
            // Chunks: each with whether every key so far was UTF-8 text.
            let (tx, rx) = std::sync::mpsc::sync_channel::<(Vec<JournalEntry>, bool)>(4);
            std::thread::Builder::new()
                .name("journal-digests".into())
                .spawn_scoped(
                    scope,
                    move || -> Result<Option<JournalEventRefs>, DbError> {
                        let (mut chunk, mut ok, mut open) = (Vec::with_capacity(CHUNK), true, true);
                        // For the quarantine preview, while the rows are at hand.
                        let mut refs = JournalRefsBuilder::for_operations(operation_rows);
                        j.for_each_journal_row(|row, key_ok, [event, operation]| {
                            if !open {
                                return;
                            }
                            refs.add(event, operation);
                            ok &= key_ok;
                            chunk.push(hasher.entry(row));
                            if chunk.len() == CHUNK {
                                let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                                open = tx.send((full, ok)).is_ok();
                            }
                        })?;
                        if open {
                            let _ = tx.send((chunk, ok));
                        }
                        // Only a table read to its end.
                        Ok(if open { refs.finish() } else { None })
                    },
                )
                .ok()
                .map(|h| (rx, h))
        });
        let mut usable = true;
        // Journal chunks are taken as they come, also while the operations are read:
        // otherwise the journal thread stops after a few chunks (its channel is bounded,
        // to bound memory) and hashes the rest alone once the operations are done.
        let mut journal_ok = true;
        let mut take = |d: &mut StoredDigests, (chunk, ok): (Vec<JournalEntry>, bool)| {
            journal_ok &= ok;
            for e in chunk {
                d.add_entry(e);
            }
        };
        if self.has_operations {
            let dispatched = &mut self.dispatched_rows;
            let mut rows = 0usize;
            self.ws.for_each_operation_row(|row, key_ok| {
                usable &= key_ok;
                *dispatched += u64::from(row.dispatch_event_id.is_some());
                d.add_operation(row);
                rows += 1;
                if rows.is_multiple_of(CHUNK) {
                    if let Some((rx, _)) = &beside {
                        while let Ok(c) = rx.try_recv() {
                            take(&mut d, c);
                        }
                    }
                }
            })?;
        }
        match beside {
            // Not needed: closing the channel stops the thread.
            Some(_) if !usable => {}
            Some((rx, h)) => {
                for c in rx {
                    take(&mut d, c);
                }
                usable &= journal_ok;
                let refs = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
                self.journal_refs = refs.map(Arc::new);
            }
            None if self.has_journal && usable => {
                self.ws.for_each_journal_row(|row, key_ok, _| {
                    usable &= key_ok;
                    d.add_journal(row);
                })?;
            }
            None => {}
        }
        self.digests = usable.then(|| Arc::new(d));
        Ok(())
    }
}

/// Reads and decodes every run header once. Not for an after-scan (`None`). A header
/// that does not decode, or whose keys are not UTF-8 text, is left out (its run is then
/// looked up as before).
fn read_briefs(
    ws: &Workspace,
    has_headers: bool,
    gone: &Exclusion,
    rules: &crate::release::rules::HeaderRules,
) -> Result<Option<HeaderBriefs>, DbError> {
    if !gone.sessions.is_empty() || !has_headers {
        return Ok(None);
    }
    let mut b = HeaderBriefs {
        hasher: crate::hash128::Keyed128::random(),
        // Sized once: no transient doubling while it fills.
        sorted: Vec::with_capacity(ws.count_rows("core_agent_runs")? as usize),
    };
    ws.for_each_header_row(|row, keys_ok| {
        if !keys_ok {
            return;
        }
        let (rec, s, r) = (&*row.record_json, &*row.session_id, &*row.run_id);
        let brief = match crate::header::header_facts_plainly(rec, s, r, rules) {
            Some(facts) => HeaderBrief::from_facts(facts),
            None => crate::header::decode_header_as(rec, s, r, rules)
                .ok()
                .and_then(|h| HeaderBrief::new(&h)),
        };
        if let Some(brief) = brief {
            b.sorted.push((b.key(s, r), brief));
        }
    })?;
    b.seal();
    Ok(Some(b))
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

    /// [`Exclusion::session`] of a column's stored bytes (read as text only when
    /// sessions are excluded: most scans exclude none).
    fn stored_session(&self, s: &[u8]) -> bool {
        !self.sessions.is_empty() && self.session(&crate::db::lossy(s))
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
    fn shelved_opening(&mut self, session_id: &str, run_id: &str) -> Option<String> {
        if self.gone.session(session_id) {
            return None;
        }
        self.shelved
            .get(&(session_id.to_owned(), run_id.to_owned()))
            .cloned()
    }
    fn headers_readable(&self) -> bool {
        self.has_headers
    }
    fn header_brief(&mut self, session_id: &str, run_id: &str) -> Option<&HeaderBrief> {
        self.briefs.as_ref()?.get(session_id, run_id)
    }
    fn mark_walked(&mut self, session_id: &str, run_id: &str) -> Option<bool> {
        // A bit per brief instead of the walk's own set of every run it closed: at
        // 500k runs that set took 9 to 18 MB, and twice that while it grew.
        let briefs = self.briefs.as_ref()?;
        let i = briefs.position(session_id, run_id)?;
        if self.walked.is_empty() {
            self.walked = vec![0; briefs.sorted.len().div_ceil(64)];
        }
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        let was = self.walked[word] & bit != 0;
        self.walked[word] |= bit;
        Some(was)
    }
    fn projection_matches(
        &mut self,
        op: &crate::ledger::scanner::Operation,
        commits: &crate::fast_hash::HashMap<String, i64>,
    ) -> bool {
        self.digests
            .as_ref()
            .is_some_and(|d| d.matches(op, commits))
    }
    fn dispatched_rows(&self) -> Option<u64> {
        self.digests.as_ref().map(|_| self.dispatched_rows)
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
        self.for_each_header_key(&mut |_, _, _| {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }
    fn for_each_header_key(
        &mut self,
        f: &mut crate::scan::HeaderKeyVisit<'_>,
    ) -> Result<(), DbError> {
        if !self.has_headers {
            return Ok(());
        }
        let gone = &self.gone;
        let (briefs, walked) = (self.briefs.as_deref(), &self.walked);
        self.ws.for_each_header_key(&mut |s: &str, r: &str| {
            if gone.session(s) {
                return Ok(());
            }
            let mark = briefs.and_then(|b| b.position(s, r)).map(|i| {
                walked
                    .get(i / 64)
                    .is_some_and(|word| word & (1u64 << (i % 64)) != 0)
            });
            f(s, r, mark)
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
        ordinals_of(self.ws, self.has_ordinals, self.gone, f)
    }
    fn ordinal_summary(&mut self, hasher: &EventHasher) -> Result<OrdinalSummary, DbError> {
        match self.ordinals.take() {
            Some(o) => Ok(o),
            None => OrdinalSummary::read(hasher, |f| self.for_each_ordinal(f)),
        }
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

/// Every ordinal row of the sessions not excluded (see [`ScanStore::for_each_ordinal`]).
fn ordinals_of(
    ws: &Workspace,
    has_ordinals: bool,
    gone: &Exclusion,
    f: &mut dyn FnMut(&str, i64, &str),
) -> Result<bool, DbError> {
    if !has_ordinals {
        return Ok(false);
    }
    // Ordinal rows cascade with their events.
    ws.for_each_ordinal(&mut |s: &str, o: i64, e: &str| {
        if !gone.session(s) {
            f(s, o, e)
        }
    })?;
    Ok(true)
}

/// Reads every table the scan needs and computes the report. `progress` is called
/// with (rows read, total rows) now and then.
pub fn scan_workspace(
    ws: &Workspace,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    // The preview reads the same snapshot as the scan.
    let _snapshot = ws.read_snapshot()?;
    let mut report = scan_workspace_without(ws, opts, &BTreeSet::new(), progress)?;
    if report.workspace_release.known_from != crate::db::KnownFrom::Build {
        // A Maka newer than this wsledger: its own start-up and any upgrade are not known;
        // an older build named by `--maka` is judged by its checks of the versions alone.
        super::startup::attach_not_known(ws, opts, &mut report)?;
        return Ok(report);
    }
    let facts = ws.startup_facts()?;
    if opts.rules.is_none() {
        super::startup::attach_builds(ws, opts, &mut report, &facts)?;
    } else {
        super::startup::attach_startup(ws, &mut report, &facts)?;
    }
    Ok(report)
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
    // One snapshot for every read on this connection (a second one is used only
    // where nothing can change, see `reader_twin`).
    let _snapshot = ws.read_snapshot()?;
    let schema = ws.schema_facts()?;
    let rules = opts
        .rules
        .unwrap_or_else(|| crate::release::recognize(&schema).rules());
    // Tables are read by shape (`db::shape`): one of a shape wsledger does not read
    // is treated as absent, and the report names it.
    let readable = crate::db::shape::ReadableTables::of(&schema.objects);
    let has = |t: &str| readable.reads(t);
    let has_sessions = has("session_metadata");
    // A newer Maka's `core_agent_runs` holds no headers (no `record_json`).
    let (has_headers, has_operations, has_journal, has_ordinals, has_run_events) = (
        has("core_agent_runs") && ws.has_header_records()?,
        has("tool_operations"),
        has("tool_journal_events"),
        has("runtime_session_event_ordinals"),
        has("core_agent_run_events"),
    );
    if !schema.tables.iter().any(|t| t == "runtime_events") {
        return Err(DbError::NotAWorkspace {
            path: ws.path().to_path_buf(),
        });
    }
    if !has("runtime_events") {
        return unread_ledger(ws, opts, schema);
    }
    let total = if opts.no_total { 0 } else { ws.event_count()? };
    let gone = Exclusion::read(ws, excluded, has_operations)?;
    // A second connection, when one sees exactly what this one does (see below).
    let twin = if opts.threads != Threads::One && (has_run_events || has_headers) {
        ws.sequential_reader()?
    } else {
        None
    };
    std::thread::scope(|scope| {
        let mut walker = Walker::new().keep_all_runs(opts.all_runs).with_rules(rules);
        // The twin reads the run headers (which the walk needs first) while this thread
        // and a third read the tool projections; then it checks the run events, reduces
        // the ordinal rows and checks the session headers (needed only at the walk's
        // end) at background priority. Should it not start, all of it happens here.
        let (briefs_tx, briefs_rx) = std::sync::mpsc::channel();
        // Never sent on: dropped when this closure returns, early on an error, which
        // tells the twin that nothing it would still do is wanted.
        let (_stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let hasher = walker.event_hasher();
        let beside = twin.and_then(|t| {
            let gone = &gone;
            std::thread::Builder::new()
                .name("headers-run-events".into())
                .spawn_scoped(scope, move || {
                    let briefs =
                        read_briefs(&t, has_headers, gone, &rules.header).map(|b| b.map(Arc::new));
                    let mine = briefs.as_ref().ok().cloned().flatten();
                    let _ = briefs_tx.send(briefs);
                    // What is left here is needed only when the walk ends. It starts at
                    // once, at background priority: while the tool projections are still
                    // hashed, a core would otherwise wait. Between steps it stops if the
                    // scan has stopped (an error drops the sender).
                    crate::background::lower_this_thread();
                    let stopped = || {
                        matches!(
                            stop_rx.try_recv(),
                            Err(std::sync::mpsc::TryRecvError::Disconnected)
                        )
                        .then(|| DbError::Io {
                            path: t.path().to_path_buf(),
                            source: std::io::Error::other("the scan stopped"),
                        })
                    };
                    if let Some(e) = stopped() {
                        return Err(e);
                    }
                    let bad = if has_run_events {
                        run_event_findings(&t, gone, mine.as_deref(), &rules.header)?
                    } else {
                        Vec::new()
                    };
                    if let Some(e) = stopped() {
                        return Err(e);
                    }
                    let ordinals =
                        OrdinalSummary::read(&hasher, |f| ordinals_of(&t, has_ordinals, gone, f))?;
                    if let Some(e) = stopped() {
                        return Err(e);
                    }
                    let sessions = if has_sessions {
                        session_header_findings(&t, gone, &rules)?
                    } else {
                        Vec::new()
                    };
                    Ok((bad, ordinals, sessions))
                })
                .ok()
        });
        let mut store = Store {
            ws,
            has_headers,
            has_operations,
            has_journal,
            has_ordinals,
            gone: &gone,
            digests: None,
            dispatched_rows: 0,
            briefs: None,
            walked: Vec::new(),
            ordinals: None,
            journal_refs: None,
            shelved: if rules.runs_on_spine {
                ws.shelved_openings()?
            } else {
                Default::default()
            },
        };
        let operation_rows = if has_operations {
            usize::try_from(ws.count_rows("tool_operations")?).unwrap_or(0)
        } else {
            0
        };
        // Operations are bound by dispatch events: never more than the events.
        let events = usize::try_from(total).unwrap_or(usize::MAX);
        walker.expect_operations(if total > 0 {
            operation_rows.min(events)
        } else {
            operation_rows
        });
        let journal_reader = if opts.threads == Threads::One {
            None
        } else {
            ws.sequential_reader()?
        };
        store.read_digests(operation_rows, journal_reader, scope)?;
        store.briefs = match briefs_rx.recv() {
            Ok(briefs) => briefs?,
            Err(_) => read_briefs(ws, has_headers, &gone, &rules.header)?.map(Arc::new),
        };
        let at_decoder = match opts.threads {
            Threads::Auto | Threads::RowReader(_) => Some(AUTO_AT_DECODER),
            Threads::One => None,
            Threads::AtDecoder(k) => Some(k),
        };
        let (row_reader, decode_behind) = match opts.threads {
            Threads::Auto => (ws.rows_reader()?, DECODE_BEHIND),
            Threads::RowReader(k) => (ws.rows_reader()?, k),
            Threads::One | Threads::AtDecoder(_) => (None, 0),
        };
        let mut progress = |n| progress(n, total);
        let walked = match row_reader {
            Some(reader) => walk_beside_reader(
                reader,
                decode_behind,
                &mut walker,
                &mut store,
                scope,
                &mut progress,
            )?,
            None => false,
        };
        if !walked {
            walk_events(
                ws,
                &mut walker,
                &mut store,
                scope,
                at_decoder,
                &mut progress,
            )?;
        }
        let bad = match beside {
            Some(h) => {
                let (mut bad, ordinals, sessions) =
                    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
                store.ordinals = Some(ordinals);
                bad.extend(sessions);
                bad
            }
            None => {
                let mut bad = if has_run_events {
                    run_event_findings(ws, &gone, store.briefs.as_deref(), &rules.header)?
                } else {
                    Vec::new()
                };
                if has_sessions {
                    bad.extend(session_header_findings(ws, &gone, &rules)?);
                }
                bad
            }
        };
        // Tests change the file here, under a read that is half done.
        crate::db::pause_point("scan:walked");
        let mut report = finish_scan(ws, opts, schema, excluded, walker, &mut store)?;
        if !bad.is_empty() {
            report.findings.extend(bad);
            report.recount();
        }
        // Runs of sessions Maka does not list are not judged (issue notes, 37).
        let mut outside = ws.runs_outside_sessions()?;
        outside.retain(|(s, _)| !gone.session(s));
        crate::scan::listed::set_aside_unlisted_runs(&mut report, &outside);
        // The store's own check before any append: every continuation-claim row.
        let claims: Vec<_> = ws
            .claim_rows()?
            .into_iter()
            .filter(|c| !gone.session(&c.target_session_id))
            .filter_map(|c| crate::scan::listed::claim_row_problem(&c).map(|why| (c, why)))
            .collect();
        let mut listed = BTreeSet::new();
        if !claims.is_empty() && has_sessions {
            for (c, _) in &claims {
                if ws.session_exists(&c.target_session_id)? {
                    listed.insert(c.target_session_id.clone());
                }
            }
        }
        crate::scan::listed::refuse_appends_on_claims(&mut report, &claims, &listed);
        report.summary.live_snapshot = ws.is_live();
        Ok(report)
    })
}

/// Streams `runtime_events` into the walker, decoding payloads (most of a scan's work)
/// on a second thread while this one reads and walks; see [`Pipeline`].
fn walk_events<'scope>(
    ws: &Workspace,
    walker: &mut Walker,
    store: &mut Store<'_>,
    scope: &'scope std::thread::Scope<'scope, '_>,
    at_decoder: Option<usize>,
    progress: &mut dyn FnMut(u64),
) -> Result<(), DbError> {
    let (to_decoder, decoder_rx) = std::sync::mpsc::channel::<EventBatch>();
    let (decoder_tx, from_decoder) = std::sync::mpsc::channel::<EventBatch>();
    let rules = walker.rules();
    let ids = walker.event_hasher();
    // With a decoder thread, it also compares the closed operations with the stored
    // projection's digests (most of that is hashing): the walk's thread is the busier.
    let digests = at_decoder.and(store.digests.clone());
    // And it judges closed runs against their header briefs.
    let briefs = at_decoder.and(store.briefs.clone());
    let decoder = at_decoder.map(|_| {
        let (ids, digests, briefs) = (ids.clone(), digests.clone(), briefs.clone());
        std::thread::Builder::new()
            .name("decode".into())
            .spawn_scoped(scope, move || {
                for mut b in decoder_rx {
                    b.decode(&rules, &ids);
                    if let Some(d) = &digests {
                        b.check_projections(d);
                    }
                    if let Some(h) = &briefs {
                        b.check_runs(|s, r| h.get(s, r));
                    }
                    if decoder_tx.send(b).is_err() {
                        break;
                    }
                }
            })
    });
    let mut n = 0u64;
    let (Some(Ok(decoder)), Some(max_at_decoder)) = (decoder, at_decoder) else {
        // Asked for, or no thread to be had: decode here, row by row.
        ws.for_each_event_ref(|row| {
            if store.gone.session(&row.session_id) {
                return Ok(());
            }
            walker.push_row(row, store)?;
            n += 1;
            if n.is_multiple_of(4096) {
                progress(n);
            }
            Ok(())
        })?;
        progress(n);
        return Ok(());
    };
    if digests.is_some() {
        walker.defer_projection_checks();
    }
    if briefs.is_some() {
        walker.defer_run_checks();
    }
    let mut pipe = Pipeline {
        to_decoder,
        from_decoder,
        queue: std::collections::VecDeque::new(),
        at_decoder: 0,
        max_at_decoder,
        spare: Vec::new(),
        rules,
        ids,
        digests,
        briefs,
    };
    let mut batch = EventBatch::default();
    let mut alive = true;
    ws.for_each_event_raw(|row, payload| {
        if !alive || store.gone.stored_session(&row.ids[1]) {
            return Ok(());
        }
        batch.push(row, payload);
        n += 1;
        if n.is_multiple_of(4096) {
            progress(n);
        }
        if batch.is_full() {
            let next = pipe.spare.pop().unwrap_or_default();
            alive = pipe.submit(std::mem::replace(&mut batch, next), walker, store)?;
        }
        Ok(())
    })?;
    if alive && !batch.is_empty() {
        alive = pipe.submit(batch, walker, store)?;
    }
    if alive {
        alive = pipe.drain(walker, store)?;
    }
    if !alive {
        // Only a panic stops the decoder early: re-raise it here.
        drop(pipe);
        if let Err(p) = decoder.join() {
            std::panic::resume_unwind(p);
        }
        return Err(DbError::Io {
            path: ws.path().to_path_buf(),
            source: std::io::Error::other("the decoding thread stopped early"),
        });
    }
    progress(n);
    Ok(())
}

/// Streams `runtime_events` into the walker with the rows read on `reader` (a second
/// connection on the same data) by a thread of their own. On Maka's bench workspace
/// SQLite's page reads are most of the walking thread's time when it reads too; here
/// it decodes and walks. The reading thread decodes a batch itself only while
/// `decode_behind` or more wait to be walked, so that both cores stay busy whichever
/// side is slower. `false` when it could not start a thread (nothing was walked).
fn walk_beside_reader<'scope, 'env>(
    reader: Workspace,
    decode_behind: usize,
    walker: &mut Walker,
    store: &mut Store<'env>,
    scope: &'scope std::thread::Scope<'scope, 'env>,
    progress: &mut dyn FnMut(u64),
) -> Result<bool, DbError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let rules = walker.rules();
    let ids = walker.event_hasher();
    // A batch, and whether it is decoded.
    let (tx, rx) =
        std::sync::mpsc::sync_channel::<Result<(EventBatch, bool), DbError>>(ROWS_QUEUED);
    let (spare_tx, spare_rx) = std::sync::mpsc::channel::<EventBatch>();
    let waiting = Arc::new(AtomicUsize::new(0));
    let thread = {
        let (waiting, ids, gone) = (waiting.clone(), ids.clone(), store.gone);
        move || {
            let mut batch = EventBatch::default();
            let send = |mut b: EventBatch| {
                let decoded = waiting.load(Ordering::Relaxed) >= decode_behind;
                if decoded {
                    b.decode(&rules, &ids);
                }
                waiting.fetch_add(1, Ordering::Relaxed);
                tx.send(Ok((b, decoded))).is_ok()
            };
            let read = reader.for_each_event_raw(|row, payload| {
                if gone.stored_session(&row.ids[1]) {
                    return Ok(());
                }
                batch.push(row, payload);
                if batch.is_full() {
                    let next = spare_rx.try_recv().unwrap_or_default();
                    if !send(std::mem::replace(&mut batch, next)) {
                        // The walk stopped on an error of its own: so does this.
                        return Err(DbError::Io {
                            path: reader.path().to_path_buf(),
                            source: std::io::Error::other("the scan stopped"),
                        });
                    }
                }
                Ok(())
            });
            match read {
                Ok(()) if !batch.is_empty() => {
                    send(batch);
                }
                Ok(()) => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        }
    };
    let Ok(handle) = std::thread::Builder::new()
        .name("read-rows".into())
        .spawn_scoped(scope, thread)
    else {
        // No thread to be had: the caller reads the rows itself.
        return Ok(false);
    };
    let mut n = 0u64;
    for msg in rx.iter() {
        let (mut b, decoded) = msg?;
        waiting.fetch_sub(1, Ordering::Relaxed);
        if !decoded {
            b.decode(&rules, &ids);
        }
        n += b.len() as u64;
        progress(n);
        walker.push_batch(&mut b, store)?;
        let _ = spare_tx.send(b);
    }
    if let Err(p) = handle.join() {
        std::panic::resume_unwind(p);
    }
    progress(n);
    Ok(true)
}

/// Batches of rows between reading and walking. Each full batch goes to the decoder
/// thread while it has fewer than `max_at_decoder` (four by default), and is otherwise
/// decoded here, so that both cores stay busy whichever side is slower; batches are
/// walked in read order. At most [`Pipeline::QUEUE`] batches wait, so memory stays
/// bounded.
struct Pipeline {
    to_decoder: std::sync::mpsc::Sender<EventBatch>,
    from_decoder: std::sync::mpsc::Receiver<EventBatch>,
    /// In read order; `None` while the decoder has it (it returns them in order).
    queue: std::collections::VecDeque<Option<EventBatch>>,
    at_decoder: usize,
    max_at_decoder: usize,
    spare: Vec<EventBatch>,
    rules: crate::release::Rules,
    ids: EventHasher,
    /// Set when the walk defers its projection checks to where batches are decoded.
    digests: Option<Arc<crate::scan::projection::StoredDigests>>,
    /// Likewise its run checks (see [`Walker::defer_run_checks`]).
    briefs: Option<Arc<HeaderBriefs>>,
}

impl Pipeline {
    const QUEUE: usize = 4;

    /// Hands a full batch on. `false`: the decoder is gone (it panicked).
    fn submit(
        &mut self,
        mut batch: EventBatch,
        walker: &mut Walker,
        store: &mut Store<'_>,
    ) -> Result<bool, DbError> {
        if !self.receive(false) {
            return Ok(false);
        }
        self.walk_ready(walker, store)?;
        // The operations closed so far ride with this batch, which is walked after
        // every batch that carried older ones.
        if self.digests.is_some() {
            batch.carry_checks(walker.take_projection_checks());
        }
        if self.briefs.is_some() {
            batch.carry_runs(walker.take_run_checks());
        }
        if self.at_decoder < self.max_at_decoder {
            if self.to_decoder.send(batch).is_err() {
                return Ok(false);
            }
            self.at_decoder += 1;
            self.queue.push_back(None);
        } else {
            batch.decode(&self.rules, &self.ids);
            if let Some(d) = &self.digests {
                batch.check_projections(d);
            }
            if let Some(h) = &self.briefs {
                batch.check_runs(|s, r| h.get(s, r));
            }
            self.queue.push_back(Some(batch));
        }
        while self.queue.len() > Self::QUEUE {
            if !self.receive(true) {
                return Ok(false);
            }
            self.walk_ready(walker, store)?;
        }
        Ok(true)
    }

    /// Walks every batch left. `false`: the decoder is gone.
    fn drain(&mut self, walker: &mut Walker, store: &mut Store<'_>) -> Result<bool, DbError> {
        while !self.queue.is_empty() {
            self.walk_ready(walker, store)?;
            if !self.queue.is_empty() && !self.receive(true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Takes what the decoder has finished (at least one batch when `wait`). `false`:
    /// the decoder is gone.
    fn receive(&mut self, wait: bool) -> bool {
        use std::sync::mpsc::TryRecvError;
        let mut wait = wait && self.at_decoder > 0;
        while self.at_decoder > 0 {
            let b = if wait {
                match self.from_decoder.recv() {
                    Ok(b) => b,
                    Err(_) => return false,
                }
            } else {
                match self.from_decoder.try_recv() {
                    Ok(b) => b,
                    Err(TryRecvError::Empty) => return true,
                    Err(TryRecvError::Disconnected) => return false,
                }
            };
            wait = false;
            self.at_decoder -= 1;
            // There are as many empty slots as batches at the decoder.
            let slot = self.queue.iter_mut().find(|s| s.is_none());
            debug_assert!(slot.is_some());
            if let Some(slot) = slot {
                *slot = Some(b);
            }
        }
        true
    }

    /// Walks the decoded batches at the front.
    fn walk_ready(&mut self, walker: &mut Walker, store: &mut Store<'_>) -> Result<(), DbError> {
        while let Some(Some(_)) = self.queue.front() {
            let Some(Some(mut b)) = self.queue.pop_front() else {
                break;
            };
            walker.settle_batch_checks(&mut b, store)?;
            walker.push_batch(&mut b, store)?;
            self.spare.push(b);
        }
        Ok(())
    }
}

/// The report of a file whose `runtime_events` wsledger does not read (a shape no
/// generation it knows defines): the schema's word and no ledger check at all (the
/// report names the table, `ledger_not_read`).
fn unread_ledger(
    ws: &Workspace,
    opts: ScanOptions,
    schema: crate::db::SchemaFacts,
) -> Result<ScanReport, DbError> {
    let tables = super::Tables {
        sessions: 0,
        runs: 0,
        operations: 0,
        integrity: if opts.integrity {
            Some(ws.quick_check()?)
        } else {
            None
        },
        schema,
    };
    let mut report = super::report::build(
        Walker::new(),
        tables,
        super::Ordinals::default(),
        Vec::new(),
    );
    report.summary.live_snapshot = ws.is_live();
    Ok(report)
}

/// After the walk: the totals, the walker's end-of-scan work and the supersession
/// groups' payload comparison.
fn finish_scan(
    ws: &Workspace,
    opts: ScanOptions,
    schema: crate::db::SchemaFacts,
    excluded: &BTreeSet<String>,
    walker: Walker,
    store: &mut Store<'_>,
) -> Result<ScanReport, DbError> {
    let readable = crate::db::shape::ReadableTables::of(&schema.objects);
    let has = |t: &str| readable.reads(t);
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
    let mut report = walker.finish(store, tables)?;
    report.journal_refs = store.journal_refs.take();
    fill_identical(ws, &mut report)?;
    Ok(report)
}

/// Every session header Maka's start-up cannot read, under the writer's rules, then
/// every stored message of a listed session that its strict start-up cannot read.
fn session_header_findings(
    ws: &Workspace,
    gone: &Exclusion,
    rules: &crate::release::Rules,
) -> Result<Vec<crate::findings::Finding>, DbError> {
    let mut out = Vec::new();
    ws.for_each_session_header(|row| {
        if gone.session(&row.session_id) {
            return;
        }
        if let Err(why) = crate::session_header::check_session_header(&row, &rules.header) {
            out.push(
                crate::findings::Finding::new(
                    "session_header_undecodable",
                    format!("session header cannot be read: {why}"),
                )
                .session(&row.session_id),
            );
        }
    })?;
    // Strict start-up reads the stored messages of every listed session too.
    let mut messages = ws.suspect_session_messages(crate::scan::listed::STORED_MESSAGE_TYPES)?;
    messages.retain(|m| !gone.session(&m.session_id));
    out.extend(crate::scan::listed::session_message_findings(&messages));
    Ok(out)
}

/// Every `core_agent_run_events` record that Maka's strict start-up recovery would
/// refuse, in `(session, run, sequence)` order. Read in table order (the primary key's
/// order would visit the table at random) and sorted here: there are few.
fn run_event_findings(
    ws: &Workspace,
    gone: &Exclusion,
    briefs: Option<&HeaderBriefs>,
    rules: &crate::release::rules::HeaderRules,
) -> Result<Vec<crate::findings::Finding>, DbError> {
    let mut bad = Vec::new();
    // The turn of a decoded header, as Maka reads it; other runs are looked up.
    let known =
        |s: &str, r: &str| -> Option<String> { briefs?.get(s, r).map(HeaderBrief::turn_id) };
    ws.for_each_run_event(&known, &mut |s, r, seq, record, turn| {
        if gone.session(s) {
            return;
        }
        if let Err(why) = crate::header::check_run_event_as(record, s, r, turn, rules) {
            bad.push((
                (s.to_owned(), r.to_owned(), seq),
                crate::findings::Finding::new(
                    "run_event_undecodable",
                    format!("core_agent_run_events sequence {seq}: {why}"),
                )
                .session(s)
                .run(r),
            ));
        }
    })?;
    bad.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(bad.into_iter().map(|(_, f)| f).collect())
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

/// Opens `db` read-only and scans it (at one snapshot, see [`Workspace::read`]).
pub fn scan_path(
    db: &Path,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    Workspace::read(db, |ws| scan_workspace(ws, opts, progress))
}

#[cfg(test)]
mod tests {
    use super::HeaderBriefs;
    use crate::header::{HeaderStatus, RunHeader};
    use crate::scan::HeaderBrief;

    fn brief(turn: &str) -> HeaderBrief {
        HeaderBrief::new(&RunHeader {
            run_id: "r".into(),
            session_id: "s".into(),
            turn_id: turn.into(),
            invocation_id: None,
            status: HeaderStatus::Completed,
            created_at: 0.0,
            updated_at: 0.0,
            completed_at: None,
            failure_class: None,
            abort_source: None,
            tool_mode: None,
            trace_write_error: None,
            record: serde_json::Map::new(),
        })
        .unwrap()
    }

    #[test]
    fn sealed_briefs_are_sorted_and_a_repeated_run_keeps_none() {
        let mut b = HeaderBriefs {
            hasher: crate::hash128::Keyed128::random(),
            sorted: Vec::new(),
        };
        let runs: Vec<String> = (0..50).map(|i| format!("run-{i}")).collect();
        for (i, r) in runs.iter().enumerate() {
            let k = b.key("s", r);
            b.sorted.push((k, brief(&format!("turn-{i}"))));
            // Every seventh run has a second header row (a damaged file).
            if i % 7 == 3 {
                b.sorted.push((k, brief("other")));
            }
        }
        b.seal();
        assert!(b.sorted.windows(2).all(|w| w[0].0 < w[1].0));
        for (i, r) in runs.iter().enumerate() {
            match b.get("s", r) {
                Some(got) => {
                    assert_ne!(i % 7, 3, "{r}");
                    assert_eq!(got.turn_id(), format!("turn-{i}"));
                }
                None => assert_eq!(i % 7, 3, "{r}"),
            }
        }
        assert_eq!(b.sorted.len(), 50 - 7);
    }
}
