//! The walk itself: a [`Walker`] built and configured, rows and decoded batches fed
//! in scan order, and each invocation closed (its runs and operations) as the next opens.

use std::collections::BTreeSet;

use crate::fast_hash::{HashMap, HashSet};

use super::event_batch::{batch_row, payload_of, Prepared};
use super::judge_runs::plainly_terminal;
use super::{
    decode_row_as, is_tool_bearing, DecodeFailure, Decoded, EventBatch, EventHasher,
    ProjectionCheck, RunAcc, RunCheck, ScanStore, Walker,
};
use crate::db::{lossy, DbError, EventRowRef};
use crate::findings::Finding;
use crate::ledger::scanner::{ScanOptions as ScannerOptions, ToolLedgerScanner};
use crate::release::Rules;

impl Walker {
    pub fn new() -> Walker {
        Walker {
            rules: Rules::MAIN,
            // Rows come from a table whose primary key is event_id, in store order.
            scanner: ToolLedgerScanner::new(ScannerOptions::store_rows()),
            keep_all_runs: false,
            current_invocation: None,
            expected_seq: 1,
            inv_runs: Vec::new(),
            inv_commits: HashMap::default(),
            run_hasher: crate::hash128::Keyed128::random(),
            closed_runs: HashSet::default(),
            split_runs: BTreeSet::new(),
            headers_found: 0,
            event_hasher: crate::hash128::Keyed128::random(),
            event_sum: 0,
            events: 0,
            decode_failures: Vec::new(),
            seq_findings: Vec::new(),
            run_results: Vec::new(),
            unsettled: Vec::new(),
            projection: Vec::new(),
            supersession: Vec::new(),
            vouched_bits: Vec::new(),
            vouched: 0,
            deferred: None,
            deferred_runs: None,
            newer: false,
            newer_parts: std::collections::BTreeMap::new(),
            newer_events: 0,
            spine_runs: HashSet::default(),
            unjudged_runs: HashSet::default(),
            unjudged_sample: Vec::new(),
        }
    }

    /// From now on, an expected operation is not compared with the stored projection
    /// when it closes: it waits in [`Walker::take_projection_checks`] until a batch
    /// carries it to where the digests are ([`EventBatch::check_projections`]), and is
    /// finished when that batch is walked. Lets another thread do the hashing; the
    /// findings come out in the same order. [`Walker::finish`] settles what is left.
    pub fn defer_projection_checks(&mut self) {
        self.deferred.get_or_insert_with(Vec::new);
    }

    /// From now on, a closed run is not judged against its header brief when it
    /// closes (unless every run is kept): it waits in [`Walker::take_run_checks`]
    /// until a batch carries it to where the briefs are ([`EventBatch::check_runs`]),
    /// and is finished when that batch is walked. The report is the same: run results
    /// are sorted by key. [`Walker::finish`] settles what is left.
    pub fn defer_run_checks(&mut self) {
        if !self.keep_all_runs {
            self.deferred_runs.get_or_insert_with(Vec::new);
        }
    }

    /// The runs waiting to be judged, oldest first.
    pub fn take_run_checks(&mut self) -> Vec<RunCheck> {
        self.deferred_runs
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The operations waiting to be compared, oldest first.
    pub fn take_projection_checks(&mut self) -> Vec<ProjectionCheck> {
        self.deferred
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Keep a [`RunReport`] (and header) for every run, not only for runs that are not
    /// plainly terminal. Memory then grows with the number of runs.
    pub fn keep_all_runs(mut self, yes: bool) -> Walker {
        self.keep_all_runs = yes;
        self
    }

    /// Judge the file with these release rules (main's by default). Call before the
    /// first row.
    pub fn with_rules(mut self, rules: Rules) -> Walker {
        self.rules = rules;
        self.newer = rules.decoder.is_newer_than_main();
        self.scanner = ToolLedgerScanner::new(ScannerOptions {
            dispatch_parent_refs: rules.dispatch_parent_refs,
            tool_dependencies: rules.scanner_tool_dependencies,
            ..ScannerOptions::store_rows()
        });
        self
    }

    /// Expect about `n` dispatched operations (the `tool_operations` rows): the
    /// operation index is sized once instead of doubling as it fills.
    pub fn expect_operations(&mut self, n: usize) {
        self.scanner.reserve_operations(n);
    }

    /// The rules the walk applies.
    pub fn rules(&self) -> Rules {
        self.rules
    }

    /// Number of rows seen.
    pub fn events(&self) -> u64 {
        self.events
    }

    pub(super) fn run_fingerprint(&self, s: &str, r: &str) -> u128 {
        self.run_hasher.hash(&(s, r))
    }

    /// The keys of its event-id hash, for a store that reduces the ordinal rows
    /// elsewhere ([`ScanStore::ordinal_summary`]).
    pub fn event_hasher(&self) -> EventHasher {
        self.event_hasher.clone()
    }

    /// Feeds the next row in `invocation_id, event_seq, event_id` order.
    pub fn push_row(
        &mut self,
        row: &EventRowRef<'_>,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        let mut decoded = Decoded::from(decode_row_as(row, &self.rules.decoder));
        self.push_decoded(row, &[], &mut decoded, Prepared::default(), store)
    }

    /// Feeds a batch whose rows were decoded with [`EventBatch::decode`] (possibly on
    /// another thread), as [`Walker::push_row`] would each row. Leaves it without rows;
    /// the decoded events stay until the next [`EventBatch::decode`], so that they are
    /// freed by the thread that made them (memory moving between threads' allocator
    /// arenas costs more than the decoding saved). Only terminal events are taken out,
    /// by their run, which is judged and mostly dropped on that thread too.
    pub fn push_batch(
        &mut self,
        batch: &mut EventBatch,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        debug_assert_eq!(batch.decoded.len(), batch.rows.len());
        for (i, d) in batch.decoded.iter_mut().enumerate() {
            let prepared = Prepared {
                args_hash: batch.args_hashes[i].take(),
                id_hash: Some(batch.id_hashes[i]),
                lane: batch.lanes[i],
            };
            let row = batch_row(&batch.rows, &batch.text, i);
            let payload = payload_of(&batch.rows, &batch.payloads, i);
            self.push_decoded(&row, payload, d, prepared, store)?;
        }
        batch.text.clear();
        batch.payloads.clear();
        batch.rows.clear();
        // Walked events are dropped now, not when the batch is next decoded: spare
        // batches would otherwise hold them (about 3 MB at 1M events).
        batch.decoded.clear();
        Ok(())
    }

    /// Feeds one decoded row; `payload` is its payload as stored when `decoded` is an
    /// ordinary event checked in place (decoded here in the rare case that the
    /// scanner must see it).
    fn push_decoded(
        &mut self,
        row: &EventRowRef<'_>,
        payload: &[u8],
        decoded: &mut Decoded,
        prepared: Prepared,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        let Prepared {
            args_hash,
            id_hash,
            lane,
        } = prepared;
        self.events += 1;
        if self.current_invocation.as_deref() != Some(&*row.invocation_id) {
            self.close_invocation(store)?;
            self.current_invocation = Some(row.invocation_id.to_string());
            self.expected_seq = 1;
        }
        self.check_seq(row);
        let id = &*row.event_id;
        let id_hash = id_hash.unwrap_or_else(|| self.event_hasher.hash(id));
        self.event_sum = self.event_sum.wrapping_add(id_hash);
        let pos = match self
            .inv_runs
            .iter()
            .position(|((s, r), _)| *s == *row.session_id && *r == *row.run_id)
        {
            Some(p) => p,
            None => {
                self.inv_runs.push((
                    (row.session_id.to_string(), row.run_id.to_string()),
                    RunAcc::default(),
                ));
                self.inv_runs.len() - 1
            }
        };
        let acc = &mut self.inv_runs[pos].1;
        if let Decoded::Ordinary(o) = decoded {
            let ids = [
                id,
                &*row.invocation_id,
                &*row.run_id,
                &*row.session_id,
                &*row.turn_id,
            ];
            if self.scanner.push_ordinary(ids) {
                acc.add_row(&row.invocation_id, row.event_seq, id, Some(o.ts));
                return Ok(());
            }
            // The scanner reports something about it, for which it needs the event
            // (which the check in place showed decodes, ordinary and not terminal).
            let row = EventRowRef {
                payload_json: lossy(payload),
                ..row.clone()
            };
            *decoded = Decoded::from(decode_row_as(&row, &self.rules.decoder));
        }
        let terminal = match &*decoded {
            Decoded::Failed(message) => {
                acc.add_row(&row.invocation_id, row.event_seq, id, None);
                self.decode_failures.push(DecodeFailure {
                    event_id: id.to_owned(),
                    session_id: row.session_id.to_string(),
                    run_id: row.run_id.to_string(),
                    message: message.to_owned(),
                });
                false
            }
            Decoded::Event(event) => {
                acc.add_row(&row.invocation_id, row.event_seq, id, Some(event.ts));
                if self.newer {
                    acc.note_opening(event);
                    let parts = crate::event::newer::newer_parts(event);
                    self.newer_events += u64::from(!parts.is_empty());
                    for p in parts {
                        *self.newer_parts.entry(p).or_default() += 1;
                    }
                }
                if is_tool_bearing(event) {
                    self.inv_commits.insert(id.to_owned(), row.committed_at);
                }
                // Rows arrive in store order, so the scanner's order check cannot fail.
                let pushed = self.scanner.push_prepared(event, args_hash, lane);
                debug_assert!(pushed.is_ok());
                event.is_terminal()
            }
            Decoded::Ordinary(_) => unreachable!("replaced above"),
        };
        if terminal {
            // The run keeps it: taken, not copied (nothing reads it here again).
            if let Decoded::Event(event) =
                std::mem::replace(decoded, Decoded::Failed(String::new()))
            {
                self.inv_runs[pos].1.terminals.push((row.event_seq, *event));
            }
        }
        Ok(())
    }

    fn check_seq(&mut self, row: &EventRowRef<'_>) {
        if row.event_seq != self.expected_seq {
            self.seq_findings.push(
                Finding::new(
                    "event_seq_gap",
                    format!(
                        "invocation `{}`: event_seq {} where {} was expected",
                        row.invocation_id, row.event_seq, self.expected_seq
                    ),
                )
                .session(&*row.session_id)
                .run(&*row.run_id)
                .event(&*row.event_id),
            );
        }
        // A hostile `event_seq` (i64::MAX, or a huge REAL read as i64::MAX) must not
        // overflow.
        self.expected_seq = row.event_seq.saturating_add(1);
    }

    /// Assesses and drops the current invocation's runs and operations.
    pub(super) fn close_invocation(&mut self, store: &mut dyn ScanStore) -> Result<(), DbError> {
        let ops = self.scanner.close_invocation();
        for op in ops {
            self.close_operation(op, store)?;
        }
        let runs = std::mem::take(&mut self.inv_runs);
        for ((s, r), acc) in runs {
            // The store's mark when it keeps one (one bit per run), else our own set.
            let again = match store.mark_walked(&s, &r) {
                Some(was) => was,
                None => !self.closed_runs.insert(self.run_fingerprint(&s, &r)),
            };
            if again {
                // The run came back in another invocation: assessed again at the end
                // from all its rows.
                self.split_runs.insert((s, r));
                continue;
            }
            if let Some(waiting) = &mut self.deferred_runs {
                waiting.push(RunCheck {
                    session_id: s,
                    run_id: r,
                    acc,
                });
                continue;
            }
            if !self.keep_all_runs && plainly_terminal(&s, &r, &acc, store) {
                // What `assess_run` would find, and `keep` drop.
                self.headers_found += 1;
                continue;
            }
            let result = self.assess_run(s, r, &acc, store)?;
            self.keep(result);
        }
        self.inv_commits.clear();
        Ok(())
    }
}
