//! The scan's point lookups on the workspace's connection ([`Store`], the walk's
//! [`ScanStore`]), with the stored projections' digests read up front.

use std::sync::Arc;

use super::exclusion::Exclusion;
use super::header_briefs::HeaderBriefs;
use crate::db::{
    DbError, EventRow, HeaderRow, JournalRow, OperationRow, StoredOperationKey, Workspace,
};
use crate::scan::{EventHasher, HeaderBrief, OrdinalSummary, ScanStore};
/// The scan's point lookups, on the workspace's connection.
pub(super) struct Store<'a> {
    pub(super) ws: &'a Workspace,
    pub(super) has_headers: bool,
    pub(super) has_operations: bool,
    pub(super) has_journal: bool,
    pub(super) has_ordinals: bool,
    pub(super) gone: &'a Exclusion,
    /// Digests of the stored projections, when usable (see `read_digests`).
    pub(super) digests: Option<Arc<crate::scan::projection::StoredDigests>>,
    /// `tool_operations` rows with a `dispatch_event_id`, counted with the digests.
    pub(super) dispatched_rows: u64,
    /// Decodable headers by a 128-bit fingerprint of `(session, run)`, when usable
    /// (shared with the run-event check).
    pub(super) briefs: Option<Arc<HeaderBriefs>>,
    /// One bit per entry of `briefs`: its run was walked (see `mark_walked`); empty
    /// until the first mark.
    pub(super) walked: Vec<u64>,
    /// The ordinal rows, when reduced beside the walk.
    pub(super) ordinals: Option<OrdinalSummary>,
    /// Gathered with the journal's digests, for the diagnosis (see
    /// [`crate::db::quarantine::JournalEventRefs`]).
    pub(super) journal_refs: Option<Arc<crate::db::quarantine::JournalEventRefs>>,
    /// Opening facts a newer Maka's migration shelved, `(session, run) → turn` (read
    /// only under rules that judge runs off the event spine).
    pub(super) shelved: std::collections::HashMap<(String, String), String>,
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
    pub(super) fn read_digests<'scope>(
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
pub(super) fn ordinals_of(
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
