//! `doctor finalize-runs` from plan to rescan: the plan is read and shown, checked,
//! or written through the apply scaffold ([`crate::apply`]), then verified.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{plan_finalize, Action, Plan, PlanOptions};
use crate::apply::{apply, note_dry_run, Step, Target, WritingCommand};
use crate::db::write::{ApplyOptions, Writer, TRANSCRIPT_BACKUP_SUFFIX};
use crate::error::UserError;
use crate::findings::Finding;
use crate::notes::Notes;
use crate::scan::runs::RunState;
use crate::scan::{ScanOptions, ScanReport};

/// What `doctor finalize-runs` is asked to do with its plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Show it (the default).
    DryRun,
    /// Show it and say whether it is empty (`--check`).
    Check,
    /// Write it (`--apply`), after a backup unless `backup` is false.
    Apply { backup: bool },
}

/// What `doctor finalize-runs` did.
pub struct Finalized {
    pub plan: Plan,
    /// Lines after the plan's table.
    pub footer: Vec<String>,
    /// Said on stderr too when the output is not a table.
    pub footer_note: Option<String>,
    /// Under `--check`: the plan is not empty, or a stuck run is left out of it.
    pub found: bool,
}

/// Plans `doctor finalize-runs` on `db` and shows, checks or writes the plan.
pub fn run(
    db: &Path,
    opts: &PlanOptions,
    mode: Mode,
    notes: &mut dyn Notes,
) -> Result<Finalized, UserError> {
    if mode != Mode::Check {
        crate::apply::refuse_newer(db, matches!(mode, Mode::Apply { .. }), notes)?;
    }
    let planning = plan_finalize(db, opts)?;
    let mut plan = planning.plan;
    if !plan.plan.is_empty() {
        let facts = crate::db::Workspace::open_read_only(db)?.schema_facts()?;
        if let Some(n) =
            crate::release::advice::owner_lock_note(crate::release::recognize(&facts).generation)
        {
            notes.note(&n);
        }
    }
    let before = planning.report;
    // Finalizing closes runs; it never makes Maka open a file it refuses.
    let writer = &before.workspace_release.rules;
    if let Some(words) = before
        .startup
        .as_ref()
        .and_then(|s| crate::startup::command_words(s, writer, "finalize-runs"))
    {
        notes.note(&words);
    }
    let mut footer = Vec::new();
    let deferred = plan
        .plan
        .iter()
        .any(|e| e.action == Action::Finalize && !e.header_written);
    if deferred {
        footer.push(
            "run headers stay open until Maka adopts the terminal events at its next start \
             (--project-header writes them now)"
                .to_owned(),
        );
    }
    let footer_note = footer.first().cloned();
    let backup = match mode {
        Mode::Check => {
            let stuck_left = before
                .runs
                .iter()
                .filter(|r| r.state == RunState::Stuck)
                .filter(|r| opts.session.as_ref().is_none_or(|s| *s == r.session_id))
                .filter(|r| opts.run.as_ref().is_none_or(|x| *x == r.run_id))
                .any(|r| {
                    !plan
                        .plan
                        .iter()
                        .any(|e| e.session_id == r.session_id && e.run_id == r.run_id)
                });
            let found = !plan.plan.is_empty() || stuck_left;
            return Ok(Finalized {
                plan,
                footer,
                footer_note: None,
                found,
            });
        }
        Mode::Apply { backup } if !plan.plan.is_empty() => backup,
        _ => {
            if mode == Mode::DryRun && !plan.plan.is_empty() {
                let refusal = plan.apply_refusal.as_deref();
                note_dry_run(notes, refusal, "write this plan");
            }
            return Ok(Finalized {
                plan,
                footer,
                footer_note,
                found: false,
            });
        }
    };
    let refusal = plan.apply_refusal.as_deref();
    let binding = planning.root_binding.as_deref();
    let target = Target {
        // Every run, terminal ones included: the planned runs are terminal after a
        // --project-header write and must still be found.
        rescan: ScanOptions {
            all_runs: true,
            ..ScanOptions::default()
        },
        ..Target::new(db, binding, refusal, backup, opts.now_ms)
    };
    let applied = apply(&target, &mut FinalizeWrite { plan: &mut plan }, notes)?;
    plan.backup = applied.backup;
    plan.applied = true;
    verify(&before, &applied.after, &plan)?;
    notes.note(&format!(
        "applied: {} run(s) written; the rescan finds none of them stuck and no new finding",
        plan.plan.len()
    ));
    Ok(Finalized {
        plan,
        footer,
        footer_note,
        found: false,
    })
}

/// Finalize's part of an apply: the transcript files backed up beside the database,
/// then the plan written in one transaction.
struct FinalizeWrite<'a> {
    plan: &'a mut Plan,
}

impl WritingCommand for FinalizeWrite<'_> {
    type Staged = ();
    type Written = ();

    fn stage(&mut self, _writer: &Writer) -> Result<(), UserError> {
        Ok(())
    }

    fn back_up_more(&mut self, _staged: &(), backup: &str) -> Result<(), UserError> {
        self.plan.transcript_backup = backup_transcripts(self.plan, backup)?;
        Ok(())
    }

    fn write(&mut self, step: Step<'_>, _staged: ()) -> Result<(), UserError> {
        write_finalize(step.writer, self.plan)
    }
}

/// Copies every session transcript file the plan appends to (v0.1.2, v0.1.3) into
/// `<backup>.sessions/<session id>/`, the layout of `sessions/`, checked against what
/// the plan read; returns that directory (none when no file is appended; removed
/// again on a failure).
pub fn backup_transcripts(plan: &Plan, backup: &str) -> Result<Option<String>, UserError> {
    use crate::db::files::{copy_tree, FileRecord, TranscriptState, TRANSCRIPT_FILE};
    let files: Vec<(&str, &crate::db::files::TranscriptFile)> =
        plan.writes
            .sessions
            .iter()
            .filter(|(s, _)| {
                plan.writes.runs.iter().any(|r| {
                    r.session_id == *s && r.message.as_ref().is_some_and(|m| m.file.is_some())
                })
            })
            .filter_map(|(s, rows)| rows.transcript_file.as_ref().map(|f| (s.as_str(), f)))
            .collect();
    if files.is_empty() {
        return Ok(None);
    }
    let dir = PathBuf::from(format!("{backup}{TRANSCRIPT_BACKUP_SUFFIX}"));
    let fail = |e: std::io::Error| {
        let _ = std::fs::remove_dir_all(&dir);
        UserError::new(
            format!(
                "backup of the transcript files into `{}` failed, nothing was written: {e}",
                dir.display()
            ),
            "make the directory beside the database writable (or free disk space), or pass \
             --no-backup",
        )
    };
    std::fs::create_dir(&dir).map_err(fail)?;
    for (session, f) in files {
        let TranscriptState::Ready { len, sha256, .. } = &f.state else {
            continue;
        };
        let record = FileRecord {
            path: TRANSCRIPT_FILE.to_owned(),
            size: *len,
            sha256: sha256.clone(),
        };
        let src = f.path.parent().unwrap_or(Path::new("."));
        copy_tree(
            src,
            &[record],
            &dir.join(format!(".{session}.tmp")),
            &dir.join(session),
        )
        .map_err(fail)?;
    }
    Ok(Some(dir.display().to_string()))
}

/// Writes a finalize plan in one transaction (`Writer::apply` revalidates every
/// planned row inside it).
pub fn write_finalize(writer: &Writer, plan: &Plan) -> Result<(), UserError> {
    writer
        .apply(&plan.writes, &ApplyOptions::default())
        .map_err(|e| UserError::new(e.to_string(), e.hint()))
}

type FindingKey = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn finding_key(f: &Finding) -> FindingKey {
    (
        f.code.to_owned(),
        f.session_id.clone(),
        f.run_id.clone(),
        f.event_id.clone(),
        f.operation_id.clone(),
        f.tool_call_id.clone(),
    )
}

/// After an apply: no planned run is still stuck (or otherwise unfinished), and the
/// rescan has no finding the first scan did not have.
pub fn verify(before: &ScanReport, after: &ScanReport, plan: &Plan) -> Result<(), UserError> {
    let mut problems = Vec::new();
    // By key: a plan can hold thousands of runs, the rescan every run of the file.
    let mut states: std::collections::HashMap<(&str, &str), RunState> =
        std::collections::HashMap::with_capacity(after.runs.len());
    for r in &after.runs {
        states
            .entry((r.session_id.as_str(), r.run_id.as_str()))
            .or_insert(r.state);
    }
    for e in &plan.plan {
        let state = states
            .get(&(e.session_id.as_str(), e.run_id.as_str()))
            .copied();
        let ok = match state {
            Some(RunState::Terminal) => true,
            Some(RunState::AwaitingAdoption) => !e.header_written,
            _ => false,
        };
        if !ok {
            problems.push(format!("run `{}` is {:?} after the write", e.run_id, state));
        }
    }
    let mut counts: BTreeMap<FindingKey, i64> = BTreeMap::new();
    for f in &before.findings {
        *counts.entry(finding_key(f)).or_default() += 1;
    }
    for f in &after.findings {
        let c = counts.entry(finding_key(f)).or_default();
        *c -= 1;
        if *c < 0 {
            problems.push(format!("new finding `{}`: {}", f.code, f.message));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(UserError::new(
        format!(
            "the plan was written, but the rescan disagrees: {}",
            problems.join("; ")
        ),
        match &plan.backup {
            Some(b) => format!(
                "the database before the write is in `{b}`; please report this with the \
                 output of `wsledger doctor scan`"
            ),
            None => "please report this with the output of `wsledger doctor scan`".into(),
        },
    ))
}
