//! Closed operations compared with their stored projection rows, as each closes or
//! where a batch was decoded, and the deferred checks (runs too) settled on the walk.

use crate::fast_hash::HashMap;

use super::judge_runs::plainly_terminal;
use super::{projection, EventBatch, ProjectionCheck, ScanStore, Walker};
use crate::db::DbError;
use crate::ledger::scanner::Operation;

impl Walker {
    pub(super) fn close_operation(
        &mut self,
        op: Operation,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        if let Some(f) = projection::unsettled_finding(&op) {
            self.unsettled
                .push((op.operation_id.clone().unwrap_or_default(), f));
        }
        if projection::has_duplicates(&op, self.scanner.issues()) {
            let stored = store
                .operation_by_call(&op.invocation_id.to_string(), &op.tool_call_id.to_string())?;
            self.supersession.extend(projection::operation_groups(
                &op,
                self.scanner.issues(),
                stored.as_ref(),
            ));
        }
        if !projection::is_expected(&op) {
            return Ok(());
        }
        let bound = self
            .scanner
            .bound_index(&op.operation_id.clone().unwrap_or_default());
        let commits = projection::commits_of(&op, &self.inv_commits);
        match &mut self.deferred {
            Some(waiting) => waiting.push(ProjectionCheck { op, bound, commits }),
            None => {
                let matches = store.projection_matches(&op, &self.inv_commits);
                // The invocation's own commits here (the reduced map only elsewhere).
                let all = std::mem::take(&mut self.inv_commits);
                let check = ProjectionCheck { op, bound, commits };
                let settled = self.settle_check(check, matches, Some(&all), store);
                self.inv_commits = all;
                settled?;
            }
        }
        Ok(())
    }

    /// Finishes an expected operation once it is known whether the store vouched for
    /// its projection rows: counted if so, else looked up and compared row by row, with
    /// `commits_seen` (the invocation's commits) when given, else the two it carries.
    fn settle_check(
        &mut self,
        check: ProjectionCheck,
        matches: bool,
        commits_seen: Option<&HashMap<String, i64>>,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        let ProjectionCheck { op, bound, commits } = check;
        if matches {
            if let Some(ix) = bound {
                let (word, bit) = (ix / 64, 1u64 << (ix % 64));
                if self.vouched_bits.len() <= word {
                    self.vouched_bits.resize(word + 1, 0);
                }
                if self.vouched_bits[word] & bit == 0 {
                    self.vouched_bits[word] |= bit;
                    self.vouched += 1;
                }
            }
            return Ok(());
        }
        let op_id = op.operation_id.clone().unwrap_or_default();
        let id = op_id.to_string();
        let stored = store.operation(&id)?;
        let journal = store.journal(&id)?;
        let carried;
        let commits = match commits_seen {
            Some(all) => all,
            None => {
                carried = projection::commit_map(&op, commits);
                &carried
            }
        };
        for f in projection::operation_projection_findings(&op, stored.as_ref(), &journal, commits)
        {
            self.projection.push((op_id.clone(), f));
        }
        Ok(())
    }

    /// Finishes the operations `batch` carried, with the answers found where it was
    /// decoded ([`EventBatch::check_projections`]). Call before walking its rows.
    pub fn settle_batch_checks(
        &mut self,
        batch: &mut EventBatch,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        let checks = std::mem::take(&mut batch.checks);
        debug_assert_eq!(checks.len(), batch.verdicts.len());
        for (i, c) in checks.into_iter().enumerate() {
            // One without an answer (none should be) is compared here.
            let matches = match batch.verdicts.get(i) {
                Some(&v) => v,
                None => store.projection_matches(&c.op, &projection::commit_map(&c.op, c.commits)),
            };
            self.settle_check(c, matches, None, store)?;
        }
        batch.verdicts.clear();
        // Runs not found plainly terminal where the batch was decoded (had it not been
        // asked, `keep` would still drop the plain ones: only slower).
        self.headers_found += std::mem::take(&mut batch.plain_runs);
        for c in std::mem::take(&mut batch.runs) {
            self.settle_run(c, store)?;
        }
        Ok(())
    }

    /// Stops deferring: compares and finishes every operation still waiting, here.
    pub(super) fn settle_deferred(&mut self, store: &mut dyn ScanStore) -> Result<(), DbError> {
        for c in self.deferred_runs.take().unwrap_or_default() {
            if plainly_terminal(&c.session_id, &c.run_id, &c.acc, store) {
                self.headers_found += 1;
            } else {
                self.settle_run(c, store)?;
            }
        }
        for c in self.deferred.take().unwrap_or_default() {
            let matches =
                store.projection_matches(&c.op, &projection::commit_map(&c.op, c.commits));
            self.settle_check(c, matches, None, store)?;
        }
        Ok(())
    }
}
