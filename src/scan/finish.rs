//! The end of the walk ([`Walker::finish`]): split runs re-read, headers without events,
//! late touches, extra stored operations, re-used operation ids and the ordinal checks.

use crate::fast_hash::HashSet;

use super::judge_runs::assess_with_header;
use super::{
    decode_row_with, projection, report, Ordinals, RunAcc, ScanReport, ScanStore, Tables, Walker,
};
use crate::db::DbError;
use crate::json::JsStr;
use crate::ledger::scanner::{IssueCode, LateTouch};

impl Walker {
    /// Whether every stored `tool_operations` row with a `dispatch_event_id` belongs to
    /// a bound operation or to one a scanner issue names (then none is "extra"),
    /// shown by counting: the bound operations the store vouched for each have such a
    /// row (their digest covers `dispatch_event_id`) under their own operation id, and
    /// so has each issue's operation that is not among them and has one (looked up:
    /// issues are few). Distinct ids, so distinct rows: when there are as many as the
    /// store counted, those are all the rows. `false` when the store did not count.
    fn dispatched_rows_explained(
        &self,
        issue_ops: &HashSet<JsStr>,
        store: &mut dyn ScanStore,
    ) -> Result<bool, DbError> {
        let Some(rows) = store.dispatched_rows() else {
            return Ok(false);
        };
        let mut explained = self.vouched;
        for id in issue_ops {
            // The pass compares ids as stored text: a lone surrogate has no such text.
            let Some(text) = id.as_str() else {
                return Ok(false);
            };
            let vouched = self.scanner.bound_index(id).is_some_and(|ix| {
                self.vouched_bits
                    .get(ix / 64)
                    .is_some_and(|w| w & (1 << (ix % 64)) != 0)
            });
            if !vouched
                && store
                    .operation(text)?
                    .is_some_and(|r| r.dispatch_event_id.is_some())
            {
                explained += 1;
            }
        }
        Ok(explained == rows)
    }
    /// Completes the scan: the last invocation, re-assessed runs, headers without
    /// events, late changes to closed operations, extra stored operations and the
    /// ordinal checks; then the report.
    pub fn finish(
        mut self,
        store: &mut dyn ScanStore,
        tables: Tables,
    ) -> Result<ScanReport, DbError> {
        self.settle_deferred(store)?;
        self.close_invocation(store)?;
        // Issues Maka's newer scanner finds once every event is scanned.
        self.scanner.settle_dependencies();
        // Runs whose rows came back in a later invocation: from all their rows.
        for (s, r) in std::mem::take(&mut self.split_runs) {
            let had = self
                .run_results
                .iter()
                .any(|x| x.key.0 == s && x.key.1 == r && x.had_header);
            let found_before = had || store.header(&s, &r)?.is_some();
            if found_before {
                self.headers_found -= 1;
            }
            self.run_results.retain(|x| !(x.key.0 == s && x.key.1 == r));
            let mut acc = RunAcc::default();
            for row in store.run_rows(&s, &r)? {
                let decoded = decode_row_with(&row, &self.rules.decoder).ok();
                acc.add(
                    &row.invocation_id,
                    row.event_seq,
                    &row.event_id,
                    decoded.as_ref(),
                );
            }
            let result = self.assess_run(s, r, &acc, store)?;
            self.keep(result);
        }
        // Headers without events.
        if self.headers_found < store.header_count()? {
            let mut missing = Vec::new();
            let closed = &self.closed_runs;
            let hasher = &self.run_hasher;
            store.for_each_header_key(&mut |s, r, walked| {
                let walked = walked.unwrap_or_else(|| closed.contains(&hasher.hash(&(s, r))));
                if !walked {
                    missing.push((s.to_owned(), r.to_owned()));
                }
                Ok(())
            })?;
            for (s, r) in missing {
                if let Some(row) = store.header(&s, &r)? {
                    let result = assess_with_header(&row, &RunAcc::default(), &self.rules.header);
                    self.keep(result);
                }
            }
        }
        // Operations reached after their invocation ended.
        let late = self.scanner.take_late_touches();
        let mut not_expected: HashSet<JsStr> = HashSet::default();
        let mut not_unsettled: HashSet<JsStr> = HashSet::default();
        for t in &late {
            match t {
                LateTouch::Issue { operation_id, .. } => {
                    not_expected.insert(operation_id.clone());
                    not_unsettled.insert(operation_id.clone());
                }
                LateTouch::Reconcile { operation_id, .. } => {
                    not_expected.insert(operation_id.clone());
                }
                LateTouch::Decision { operation_id, .. } => {
                    not_expected.insert(operation_id.clone());
                    not_unsettled.insert(operation_id.clone());
                }
            }
        }
        let issue_ops: HashSet<JsStr> = self
            .scanner
            .issues()
            .iter()
            .filter_map(|i| i.operation_id.clone())
            .collect();
        self.unsettled.retain(|(op, _)| !not_unsettled.contains(op));
        self.projection
            .retain(|(op, _)| !not_expected.contains(op) && !issue_ops.contains(op));
        // Stored operations no dispatched operation explains: found by a second pass
        // over `tool_operations` (a tenth of the scan at 5M events), unless counting
        // shows there are none.
        let explained = late.is_empty() && self.dispatched_rows_explained(&issue_ops, store)?;
        let mut extras = Vec::new();
        if !explained {
            let scanner = &self.scanner;
            let issue_ops = &issue_ops;
            store.for_each_operation(&mut |row| {
                if row.has_dispatch {
                    let id = JsStr::new(&row.operation_id);
                    if !scanner.is_bound(&id) && !issue_ops.contains(&id) {
                        extras.push(row);
                    }
                }
                Ok(())
            })?;
        }
        extras.sort_by(|a, b| a.operation_id.cmp(&b.operation_id));
        let mut extra_findings = Vec::new();
        for row in &extras {
            let session = store.session_of(&row.invocation_id, &row.run_id)?;
            extra_findings.push(projection::extra_operation_finding(row, session));
        }
        // Re-used operation ids.
        let dup_ops: Vec<_> = self
            .scanner
            .issues()
            .iter()
            .filter(|i| i.code == IssueCode::DuplicateOperation)
            .cloned()
            .collect();
        for issue in &dup_ops {
            let Some(op_id) = &issue.operation_id else {
                continue;
            };
            let owner = self.scanner.binding_dispatch(op_id).map(|d| d.to_string());
            let stored = store.operation(&op_id.to_string())?;
            if let Some(g) = projection::duplicate_operation_group(issue, owner, stored.as_ref()) {
                self.supersession.push(g);
            }
        }
        // Ordinals: gaps per session, and every event has one (sum of id hashes; the
        // exact query runs only if the sums differ).
        let ordinals = store.ordinal_summary(&self.event_hasher)?;
        let (has_ordinals, ord_sum, ordinal_gaps) = (ordinals.present, ordinals.sum, ordinals.gaps);
        let events_without_ordinal = if has_ordinals && ord_sum != self.event_sum {
            store.events_without_ordinal()?
        } else {
            Vec::new()
        };
        Ok(report::build(
            self,
            tables,
            Ordinals {
                events_without_ordinal,
                ordinal_gaps,
            },
            extra_findings,
        ))
    }
}
