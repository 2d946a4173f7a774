//! Judging a closed run: against its header (or its brief, when plainly terminal),
//! off the event spine, or as an orphan; and which results the report keeps.

use super::runs::{self, RunReport};
use super::{HeaderBrief, RunAcc, RunCheck, ScanStore, Walker, WORKSPACE_AUTHORITY_SESSION};
use crate::db::{DbError, HeaderRow};
use crate::findings::Finding;
use crate::header::{decode_header_as, RunHeader};
use crate::release::rules::HeaderRules;

/// Where a run's result sorts among the run findings: headers in Maka's session order
/// (session, created_at, run), then runs without a header by key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum RunOrder {
    Header(String, i64, String),
    Orphan(String, String),
    HeaderFailed(String, String),
}

/// One assessed run.
pub(super) struct RunResult {
    pub(super) key: (String, String),
    pub(super) order: RunOrder,
    /// The header row was found (decodable or not).
    pub(super) had_header: bool,
    pub(super) findings: Vec<Finding>,
    /// `run_header_undecodable` (reported before the run findings).
    pub(super) header_failure: Option<Finding>,
    pub(super) report: Option<RunReport>,
    pub(super) header: Option<RunHeader>,
    pub(super) state: runs::RunState,
}

impl RunResult {
    /// A run without a header row that is not assessed (no report, no finding).
    fn unassessed(s: String, r: String, state: runs::RunState) -> Self {
        RunResult {
            order: RunOrder::Orphan(s.clone(), r.clone()),
            key: (s, r),
            had_header: false,
            findings: Vec::new(),
            header_failure: None,
            report: None,
            header: None,
            state,
        }
    }

    /// A run judged without a header row.
    fn without_header(s: String, r: String, report: RunReport, findings: Vec<Finding>) -> Self {
        RunResult {
            order: RunOrder::Orphan(s.clone(), r.clone()),
            key: (s, r),
            had_header: false,
            findings,
            header_failure: None,
            state: report.state,
            report: Some(report),
            header: None,
        }
    }
}

impl Walker {
    /// Finishes a run found not plainly terminal away from the walk.
    pub(super) fn settle_run(
        &mut self,
        check: RunCheck,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        let RunCheck {
            session_id,
            run_id,
            acc,
        } = check;
        let result = self.assess_run(session_id, run_id, &acc, store)?;
        self.keep(result);
        Ok(())
    }

    pub(super) fn assess_run(
        &mut self,
        s: String,
        r: String,
        acc: &RunAcc,
        store: &mut dyn ScanStore,
    ) -> Result<RunResult, DbError> {
        let header = store.header(&s, &r)?;
        Ok(match header {
            Some(row) => {
                self.headers_found += 1;
                assess_with_header(&row, acc, &self.rules.header)
            }
            None if s == WORKSPACE_AUTHORITY_SESSION => {
                RunResult::unassessed(s, r, runs::RunState::NoHeader)
            }
            None if self.rules.runs_on_spine => {
                let opened = acc.opened.clone().or_else(|| store.shelved_opening(&s, &r));
                let fingerprint = self.run_fingerprint(&s, &r);
                let (report, findings) = match opened {
                    Some(turn) => {
                        self.spine_runs.insert(fingerprint);
                        runs::assess_spine_run(&s, &r, &turn, acc)
                    }
                    None => {
                        match runs::assess_unopened_run(&s, &r, acc, store.headers_readable()) {
                            Some(judged) => judged,
                            None => {
                                // Neither a header nor an opening fact says what the run is.
                                if self.unjudged_runs.insert(fingerprint)
                                    && self.unjudged_sample.len() < 3
                                {
                                    self.unjudged_sample.push((s.clone(), r.clone()));
                                }
                                return Ok(RunResult::unassessed(s, r, runs::RunState::NotJudged));
                            }
                        }
                    }
                };
                RunResult::without_header(s, r, report, findings)
            }
            None => {
                let (report, findings) = runs::assess_orphan_run(&s, &r, acc);
                RunResult::without_header(s, r, report, findings)
            }
        })
    }

    pub(super) fn keep(&mut self, mut result: RunResult) {
        let plain = result.state == runs::RunState::Terminal
            && result.findings.is_empty()
            && result.header_failure.is_none();
        if plain && !self.keep_all_runs {
            return;
        }
        if result.report.is_none() && result.findings.is_empty() && result.header_failure.is_none()
        {
            return;
        }
        if !self.keep_all_runs && plain {
            result.header = None;
        }
        self.run_results.push(result);
    }
}

/// Whether the run has a decodable header known to the store and is plainly
/// terminal: no findings, state `Terminal`.
pub(super) fn plainly_terminal(s: &str, r: &str, acc: &RunAcc, store: &mut dyn ScanStore) -> bool {
    plain_with_brief(store.header_brief(s, r), s, r, acc)
}

/// [`plainly_terminal`] given the run's brief, wherever it is judged.
pub(super) fn plain_with_brief(
    brief: Option<&HeaderBrief>,
    s: &str,
    r: &str,
    acc: &RunAcc,
) -> bool {
    // `Terminal` has no findings (see `header_run_state`).
    brief.is_some_and(|b| runs::header_run_state(&b.header(s, r), acc) == runs::RunState::Terminal)
}

pub(super) fn assess_with_header(row: &HeaderRow, acc: &RunAcc, rules: &HeaderRules) -> RunResult {
    let (s, r) = (row.session_id.clone(), row.run_id.clone());
    match decode_header_as(&row.record_json, &row.session_id, &row.run_id, rules) {
        Ok(h) => {
            let (report, findings) = runs::assess_header_run(&h, acc);
            RunResult {
                order: RunOrder::Header(s.clone(), row.created_at, r.clone()),
                key: (s, r),
                had_header: true,
                findings,
                header_failure: None,
                state: report.state,
                report: Some(report),
                header: Some(h),
            }
        }
        Err(e) => RunResult {
            order: RunOrder::HeaderFailed(s.clone(), r.clone()),
            header_failure: Some(
                Finding::new(
                    "run_header_undecodable",
                    format!("run header cannot be decoded: {e}"),
                )
                .session(&s)
                .run(&r),
            ),
            report: Some(runs::header_undecodable_report(&s, &r, acc)),
            key: (s, r),
            had_header: true,
            findings: Vec::new(),
            header: None,
            state: runs::RunState::HeaderUndecodable,
        },
    }
}
