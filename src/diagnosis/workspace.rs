//! Reading what a diagnosis is made from beside the scan: the finalize plan, titles,
//! named events and what quarantine would set aside from each damaged session.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::db::quarantine::JournalByEvent;
use crate::db::{DbError, Workspace};
use crate::finalize::planning::{plan_finalize_on, PlanUse};
use crate::quarantine::startup_blockers;
use crate::scan::ScanReport;

/// Diagnoses a scanned workspace: reads what [`crate::diagnosis::diagnose`] needs
/// beside the scan (the finalize plan, titles, costs, named events) and returns the
/// diagnosis with the finalize plan it was made from. `shown` is the workspace as
/// the plan's commands name it.
pub fn diagnose_workspace(
    ws: &Workspace,
    report: &ScanReport,
    shown: &str,
) -> Result<(crate::diagnosis::Diagnosis, crate::finalize::Plan), DbError> {
    diagnose_workspace_with(ws, report, shown, None)
}

/// [`diagnose_workspace`] with the excision plan already made on the same snapshot
/// (`doctor repair` makes it once for its plan and its writes).
pub fn diagnose_workspace_with(
    ws: &Workspace,
    report: &ScanReport,
    shown: &str,
    excise_plan: Option<&crate::excise::ExcisePlan>,
) -> Result<(crate::diagnosis::Diagnosis, crate::finalize::Plan), DbError> {
    use crate::diagnosis::{diagnose, wanted_events, wanted_tool_calls, Input};
    use std::collections::HashMap;
    // Archived sessions only matter for runs the report kept.
    let archived = if report.runs.is_empty() {
        BTreeSet::new()
    } else {
        ws.archived_sessions()?
    };
    let damaged = crate::quarantine::damaged_sessions(report, &archived);
    std::thread::scope(|scope| {
        // The deletion counts (most of the diagnosis's reading) go on while the rest is read.
        let counting = DeletionCounts::start(
            ws,
            scope,
            damaged.keys().cloned().collect(),
            report.journal_refs.clone(),
        )?;
        let (finalize, planned_from) = plan_finalize_on(
            ws,
            report,
            &crate::finalize::PlanOptions::default(),
            PlanUse::Show,
        )?;
        let mut partials = HashMap::new();
        for (s, r) in planned_from.runs.keys() {
            partials.insert((s.clone(), r.clone()), ws.partial_texts(s, r)?);
        }
        // Titles of the sessions the diagnosis and the findings name.
        let mut named: BTreeSet<&str> = report
            .findings
            .iter()
            .filter_map(|f| f.session_id.as_deref())
            .collect();
        named.extend(planned_from.runs.keys().map(|(s, _)| s.as_str()));
        named.extend(damaged.keys().map(String::as_str));
        let labels = ws.session_labels(named)?;
        let mut events = HashMap::new();
        for id in wanted_events(report) {
            if let Some(row) = ws.named_event(&id)? {
                events.insert(id, row);
            }
        }
        let mut recorded_calls = BTreeSet::new();
        for (s, call) in wanted_tool_calls(report) {
            if ws.tool_call_recorded(&s, &call)? {
                recorded_calls.insert((s, call));
            }
        }
        let set_aside = counting.finish(ws)?;
        let apply_refusal = finalize.apply_refusal.clone();
        // A writing command hands in its plan, judged on a scanned private copy.
        // Otherwise (`doctor scan`) the excision is planned without that judgement,
        // which would cost a copy of the file and a second scan: the commands that
        // write judge it again before writing and fall back to quarantine where needed.
        let excise = match (excise_plan, damaged.is_empty()) {
            (Some(p), _) => crate::excise::choices(p),
            (None, true) => std::collections::BTreeMap::new(),
            (None, false) => crate::excise::choices(&crate::excise::plan_named(ws, report, &[])?),
        };
        let mut d = diagnose(&Input {
            workspace: shown,
            report,
            archived: &archived,
            finalize: &finalize,
            runs: &planned_from.runs,
            partials: &partials,
            labels: &labels,
            set_aside: &set_aside,
            events: &events,
            recorded_calls: &recorded_calls,
            apply_refusal,
            excise: &excise,
        });
        let rederive = crate::rederive::plan_on(ws, report)?;
        amend_for_rederive(
            &mut d,
            &rederive,
            report.maka_gate.missing_table.as_deref(),
            shown,
        );
        if let Some(s) = &report.startup {
            let writer_blockers = startup_blockers(report, &archived);
            amend_for_startup(
                &mut d,
                s,
                &rederive,
                &report.workspace_release.rules,
                &writer_blockers,
            );
        }
        Ok((d, finalize))
    })
}

/// The plan's `rederive` step, when something Maka derives is missing and can be put
/// back exactly: first, or, when the projections must be rebuilt from a ledger that
/// holds damage, after the excision and quarantine (before finalize-runs). The steps'
/// own refusal of a file missing a tool projection no longer holds: the repairs
/// write in the release's schema, which the step completes. A missing tool table
/// (`missing_table`) fails every tool write until this step puts it back: without the
/// step, tool writes stay refused after the plan.
fn amend_for_rederive(
    d: &mut crate::diagnosis::Diagnosis,
    rederive: &crate::rederive::Outcome,
    missing_table: Option<&str>,
    shown: &str,
) {
    let Some(p) = rederive.planned() else {
        if missing_table.is_some() {
            d.after.tool_writes_refused = true;
        }
        return;
    };
    let ws = crate::diagnosis::shell_quote(shown);
    let (mut fixes, costs, undo) = crate::rederive::step_words(p);
    if let Some(t) = missing_table {
        fixes.push_str(&format!(
            "; tool writes no longer fail on the missing table {t}"
        ));
    }
    let step = crate::diagnosis::Step {
        action: "rederive",
        command: format!("wsledger doctor rederive --workspace {ws} --apply"),
        fixes,
        costs,
        reversible: true,
        undo,
    };
    let at = if p.ledger_damage.is_some() {
        d.plan
            .steps
            .iter()
            .position(|s| s.action == "finalize_runs")
            .unwrap_or(d.plan.steps.len())
    } else {
        0
    };
    d.plan.steps.insert(at, step);
    d.plan.all_in_one = Some(format!("wsledger doctor repair --workspace {ws} --apply"));
    d.plan.refused = None;
}

/// The diagnosis when Maka would not start for a reason the scan's runs do not show
/// (issue notes, 38): `startup_blocked` counts the composition's refusal. Without a
/// `rederive` step that fixes it no step changes it, and the plan says so and what to
/// do (and why what is missing cannot be put back, when something is); with one, the
/// steps before it leave it refused. A `rederive` step puts back the writer's objects,
/// so it fixes only the writer's own refusal, not another build's (`--maka`).
/// Under `--maka`, the judged build's strict recovery may also stop on what only it
/// cannot read (a header of a shape it does not know), which no step changes.
fn amend_for_startup(
    d: &mut crate::diagnosis::Diagnosis,
    s: &crate::startup::Startup,
    rederive: &crate::rederive::Outcome,
    writer: &str,
    writer_blockers: &[(String, String, &'static str)],
) {
    if !s.known() {
        // A Maka newer than this wsledger wrote the file: its start-up is not known.
        d.before.startup_unknown = true;
        d.after.startup_unknown = true;
        return;
    }
    if !s.refused() {
        if s.strict_recovery.blocked {
            d.before.startup_blocked = true;
            let own = |b: &crate::startup::Blocker| {
                writer_blockers
                    .iter()
                    .any(|(x, r, c)| *x == b.session_id && *r == b.run_id && *c == b.code)
            };
            if s.strict_recovery.blockers.iter().any(|b| !own(b)) {
                d.after.startup_blocked = true;
            }
        }
        return;
    }
    d.before.startup_blocked = true;
    let at = d
        .plan
        .steps
        .iter()
        .position(|s| s.action == "rederive")
        .filter(|_| s.release == crate::startup::writer_release(writer));
    let before = at.unwrap_or(d.plan.steps.len());
    for step in &mut d.plan.steps[..before] {
        step.fixes = format!("{}; {}", step.fixes, crate::startup::STAYS_REFUSED);
    }
    if at.is_some() {
        return;
    }
    d.after.startup_blocked = true;
    let cannot = match rederive {
        crate::rederive::Outcome::Refused(r) => Some((
            r.why.as_str(),
            crate::rederive::apply::refused_advice(r.primary),
        )),
        _ => None,
    };
    d.plan.startup_refused = crate::startup::plan_words_with(s, writer, cannot);
}

type SetAside = std::collections::BTreeMap<String, Vec<(String, usize)>>;

/// What quarantine would set aside from each damaged session, in rows per table
/// ([`Workspace::deletion_counts_of`]: the tool tables are read once for all of them).
/// When another connection is certain to see the same file, they are counted on it, on
/// its own thread, while the caller reads the rest; the journal rows reached through
/// the sessions' events are then counted on a third connection and thread, beside the
/// operations (the two passes are most of what the diagnosis waits for). Otherwise on
/// the caller's connection when it asks for them.
enum DeletionCounts<'scope> {
    Here(Vec<String>),
    Beside(std::thread::ScopedJoinHandle<'scope, Result<SetAside, DbError>>),
}

impl<'scope> DeletionCounts<'scope> {
    fn start<'env>(
        ws: &Workspace,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        sessions: Vec<String>,
        journal_refs: Option<Arc<crate::db::quarantine::JournalEventRefs>>,
    ) -> Result<DeletionCounts<'scope>, DbError> {
        if sessions.is_empty() {
            return Ok(DeletionCounts::Here(sessions));
        }
        let Some(twin) = ws.reader_twin()? else {
            return Ok(DeletionCounts::Here(sessions));
        };
        // Its failure only means the journal is read whole on `twin` instead.
        let by_event = ws.reader_twin().ok().flatten().and_then(|journal| {
            let sessions = sessions.clone();
            std::thread::Builder::new()
                .name("journal-by-event".into())
                .spawn_scoped(scope, move || {
                    match &journal_refs {
                        Some(refs) => journal.journal_counts_from_refs(&sessions, refs),
                        None => journal.journal_counts_by_event(&sessions),
                    }
                    .ok()
                    .flatten()
                })
                .ok()
        });
        let kept = sessions.clone();
        let spawned = std::thread::Builder::new()
            .name("deletion-counts".into())
            .spawn_scoped(scope, move || {
                let by_event = by_event.map(|h| -> JournalByEvent<'_> {
                    Box::new(move || h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                });
                count_deletions(&twin, sessions, by_event)
            });
        Ok(match spawned {
            Ok(h) => DeletionCounts::Beside(h),
            // No thread to be had: they are counted here.
            Err(_) => DeletionCounts::Here(kept),
        })
    }

    fn finish(self, ws: &Workspace) -> Result<SetAside, DbError> {
        match self {
            DeletionCounts::Here(sessions) => count_deletions(ws, sessions, None),
            DeletionCounts::Beside(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
        }
    }
}

fn count_deletions(
    w: &Workspace,
    sessions: Vec<String>,
    by_event: Option<JournalByEvent<'_>>,
) -> Result<SetAside, DbError> {
    let counts = w.deletion_counts_of(&sessions, by_event)?;
    Ok(sessions.into_iter().zip(counts).collect())
}
