//! Reading what a finalize plan is made from: the scan, the rows of every candidate
//! run, the claims and the ledger's fingerprint, at one snapshot.

use std::path::Path;

use crate::db::{DbError, Workspace};
use crate::scan::pipeline::{scan_workspace, ScanOptions};
use crate::scan::ScanReport;

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
    // The scan and the rows the plan is made from, at one snapshot.
    Workspace::read(db, |ws| {
        let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        let (plan, _) = plan_finalize_on(ws, &report, opts, PlanUse::Apply)?;
        let root_binding = ws.root_binding()?;
        Ok(FinalizePlanning {
            report,
            plan,
            root_binding,
        })
    })
}

/// What a finalize plan is made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanUse {
    /// It may be applied: it records the ledger's fingerprint, which the write checks.
    Apply,
    /// It is only shown (the scan's diagnosis): the fingerprint, a read of every
    /// payload, is left out.
    Show,
}

/// Plans `doctor finalize-runs` from a scan of `ws` (made with the default options),
/// returning the rows of every candidate run beside the plan.
pub fn plan_finalize_on(
    ws: &Workspace,
    report: &ScanReport,
    opts: &crate::finalize::PlanOptions,
    purpose: PlanUse,
) -> Result<(crate::finalize::Plan, crate::finalize::PlanInput), DbError> {
    use crate::finalize::{candidates, invocation_for, plan, PlanInput, RunInput};
    let mut input = PlanInput::default();
    let runs = candidates(report, opts);
    if runs.is_empty() {
        // Nothing to plan: skip the whole-table reads (a healthy file's scan stays
        // one pass).
        let mut plan = plan(report, &input, opts);
        set_basis(ws, &mut plan)?;
        return Ok((plan, input));
    }
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
    if purpose == PlanUse::Apply {
        input.ledger = Some(ws.ledger_fingerprint()?);
    }
    let mut plan = plan(report, &input, opts);
    set_basis(ws, &mut plan)?;
    Ok((plan, input))
}

/// Which release's schema an apply writes in, or why it must refuse (both shown by
/// dry runs).
fn set_basis(ws: &Workspace, plan: &mut crate::finalize::Plan) -> Result<(), DbError> {
    // Releases before v0.1.7 have no ordinal table: the plan writes no ordinal.
    if !ws.has_table("runtime_session_event_ordinals")? {
        for e in &mut plan.plan {
            e.ordinal = None;
        }
    }
    match crate::release::repair_basis::write_basis(&ws.schema_facts()?) {
        Ok(b) => plan.schema_basis = Some(b.to_json()),
        Err(why) => plan.apply_refusal = Some(why.join("; ")),
    }
    Ok(())
}
