//! `wsledger doctor finalize-runs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;

use super::{workspace, CliError, ExitStatus, GlobalArgs, Printer};
use crate::db::backup::backup_path;
use crate::db::write::{ApplyOptions, Writer, TRANSCRIPT_BACKUP_SUFFIX};
use crate::doctor::{plan_finalize, scan_path, ScanOptions};
use crate::finalize::{Action, Plan, PlanOptions};
use crate::findings::Finding;
use crate::lock;
use crate::report::finalize::render_plan;
use crate::report::Format;
use crate::scan::runs::RunState;
use crate::scan::ScanReport;

/// Pins "now" (ms since the epoch) for `--older-than` and the backup name (tests).
pub const NOW_ENV: &str = "WSLEDGER_NOW_MS";
/// Puts backups in this directory instead of beside the database (tests).
pub const BACKUP_DIR_ENV: &str = "WSLEDGER_BACKUP_DIR";

/// Finish runs left `running` by a dropped terminal event, exactly as Maka's own
/// start-up recovery would, so Maka accepts the result.
///
/// Without `--apply` this is a dry run: it prints the plan (what each run gets:
/// event id, status, failure class, recovery reason, event_seq, ordinal) and every
/// run it leaves alone with the reason, and changes nothing.
///
/// With `--apply` it refuses while Maka runs (it takes Maka's own owner lock) or
/// another process has the database open (it holds a lock on the file or its `-shm`),
/// refuses a schema other than Maka's current one, backs the database up with
/// SQLite's online backup API, writes the whole plan in one transaction after
/// checking that no planned run changed, then rescans.
#[derive(Debug, Args)]
pub struct FinalizeArgs {
    /// Only runs of this session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only this run
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Only runs whose last activity is at least this old: a number and a unit
    /// (ms, s, m, h, d, w), e.g. `30m`, `2h`, `7d`, `1h30m`
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub older_than: Option<i64>,
    /// Also finalize runs of archived sessions (Maka's recovery skips them)
    #[arg(long)]
    pub include_archived: bool,
    /// Write the plan (default: dry run, nothing is written)
    #[arg(long, conflicts_with = "check")]
    pub apply: bool,
    /// Never write; exit 1 when the plan is not empty or a stuck run is left out of it
    #[arg(long)]
    pub check: bool,
    /// With --apply: do not back the database up first
    #[arg(long)]
    pub no_backup: bool,
    /// Also write what Maka's start-up writes after the event: the run header, the
    /// `run_failed` run event, the `turn_state` record and the session status
    #[arg(long)]
    pub project_header: bool,
}

/// Parses `30m`, `2h`, `7d`, `1h30m`, `500ms` into milliseconds.
pub fn parse_duration(s: &str) -> Result<i64, String> {
    let bad = || format!("`{s}` is not a duration (e.g. 30m, 2h, 7d)");
    let mut total: i64 = 0;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let ms = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(ms)
            .and_then(|x| total.checked_add(x))
            .ok_or_else(bad)?;
    }
    Ok(total)
}

pub(crate) fn now_ms() -> Result<i64, CliError> {
    if let Some(v) = std::env::var(NOW_ENV).ok().filter(|v| !v.trim().is_empty()) {
        return v.trim().parse().map_err(|_| {
            CliError::new(
                format!("{NOW_ENV}=`{v}` is not a number of milliseconds"),
                format!("unset {NOW_ENV}"),
            )
        });
    }
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64))
}

/// Writes the plan to stdout; a closed pipe (`| head`) is not an error.
fn render(
    printer: &mut Printer,
    plan: &Plan,
    shown: &str,
    format: Format,
    footer: &[String],
) -> Result<(), CliError> {
    let opts = printer.render_opts();
    match render_plan(printer.out(), plan, shown, format, &opts, footer) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(
            format!("writing output: {e}"),
            "check that stdout is writable",
        )),
        _ => Ok(()),
    }
}

pub fn run(
    global: &GlobalArgs,
    args: &FinalizeArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let format = super::plan_format(global)?;
    let db = workspace::database_path(global.workspace()?)?;
    let shown = db.display().to_string();
    let now = now_ms()?;
    let opts = PlanOptions {
        session: args.session.clone(),
        run: args.run.clone(),
        older_than_ms: args.older_than,
        now_ms: now,
        include_archived: args.include_archived,
        project_header: args.project_header,
    };
    let planning = plan_finalize(&db, &opts)?;
    let mut plan = planning.plan;
    if !plan.plan.is_empty() {
        let facts = crate::db::Workspace::open_read_only(&db)?.schema_facts()?;
        if let Some(n) =
            crate::release::advice::owner_lock_note(crate::release::recognize(&facts).generation)
        {
            printer.note(&n);
        }
    }
    let before = planning.report;
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

    if args.check {
        let stuck_left = before
            .runs
            .iter()
            .filter(|r| r.state == RunState::Stuck)
            .filter(|r| args.session.as_ref().is_none_or(|s| *s == r.session_id))
            .filter(|r| args.run.as_ref().is_none_or(|x| *x == r.run_id))
            .any(|r| {
                !plan
                    .plan
                    .iter()
                    .any(|e| e.session_id == r.session_id && e.run_id == r.run_id)
            });
        render(printer, &plan, &shown, format, &footer)?;
        return Ok(if !plan.plan.is_empty() || stuck_left {
            ExitStatus::Findings
        } else {
            ExitStatus::Success
        });
    }
    if !args.apply || plan.plan.is_empty() {
        if !args.apply && !plan.plan.is_empty() {
            match &plan.apply_refusal {
                Some(why) => printer.note(&format!(
                    "dry run: nothing was written; --apply would refuse this file: {why}"
                )),
                None => printer.note(
                    "dry run: nothing was written; run again with --apply to write this plan",
                ),
            }
        }
        if deferred && format != Format::Table {
            printer.note(&footer[0]);
        }
        render(printer, &plan, &shown, format, &footer)?;
        return Ok(ExitStatus::Success);
    }

    // --apply with a plan. A file no repair may write is refused before anything
    // (lock, backup) happens.
    if let Some(why) = &plan.apply_refusal {
        return Err(super::schema_refusal(&db, why));
    }
    check_writable(&db)?;
    // The lock first: while Maka holds it the file is not even opened for writing.
    let _lock = take_owner_lock(&db, planning.root_binding.as_deref(), printer)?;
    // Declared before the writer, so dropped after it (see `OpenProbe`).
    let mut open_probe = lock::OpenProbe::new(&db);
    refuse_if_open(&db, &mut open_probe)?;
    let writer = Writer::open(&db)?;
    writer
        .check_schema()
        .map_err(|e| CliError::new(e.to_string(), e.hint()))?;
    if !args.no_backup {
        let backup = backup_before_write(&writer, &db, now)?;
        // Nothing was written yet: a failed copy takes the database backup with it.
        plan.transcript_backup = backup_transcripts(&plan, &backup).inspect_err(|_| {
            let _ = std::fs::remove_file(&backup);
        })?;
        plan.backup = Some(backup);
    }
    recheck_after_backup(&db, &mut open_probe, plan.backup.as_deref(), printer)?;
    write_finalize(&writer, &plan)?;
    drop(writer);
    drop(open_probe);
    plan.applied = true;
    // Every run, terminal ones included: the planned runs are terminal after a
    // --project-header write and must still be found.
    let all = ScanOptions {
        all_runs: true,
        ..ScanOptions::default()
    };
    let after = scan_path(&db, all, &mut |_, _| {})?;
    verify(&before, &after, &plan)?;
    printer.note(&format!(
        "applied: {} run(s) written; the rescan finds none of them stuck and no new finding",
        plan.plan.len()
    ));
    if deferred && format != Format::Table {
        printer.note(&footer[0]);
    }
    render(printer, &plan, &shown, format, &footer)?;
    Ok(ExitStatus::Success)
}

/// Backs the database up with SQLite's online backup API before the first write of a
/// command (into `WSLEDGER_BACKUP_DIR` when set, else beside it); returns its path.
pub(crate) fn backup_before_write(
    writer: &Writer,
    db: &Path,
    now: i64,
) -> Result<String, CliError> {
    let dir = std::env::var_os(BACKUP_DIR_ENV).map(PathBuf::from);
    let dest = backup_path(db, dir.as_deref(), now);
    writer.backup_to(&dest).map_err(|e| {
        CliError::new(
            format!("backup failed, nothing was written: {e}"),
            "make the directory beside the database writable (or free disk space), or \
             pass --no-backup",
        )
    })?;
    Ok(dest.display().to_string())
}

/// Copies every session transcript file the plan appends to (v0.1.2, v0.1.3) into
/// `<backup>.sessions/<session id>/`, the layout of `sessions/`, checked against what
/// the plan read; returns that directory (none when no file is appended; removed
/// again on a failure).
pub(crate) fn backup_transcripts(plan: &Plan, backup: &str) -> Result<Option<String>, CliError> {
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
        CliError::new(
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

/// After the backup, before the first write: refuses again while another process has
/// the file open (a backup of a large file takes a while). Nothing was written then,
/// so the backup of the unchanged file goes too; otherwise says where it is.
pub(crate) fn recheck_after_backup(
    db: &Path,
    probe: &mut lock::OpenProbe,
    backup: Option<&str>,
    printer: &mut Printer,
) -> Result<(), CliError> {
    if let Err(e) = refuse_if_open(db, probe) {
        if let Some(b) = backup {
            let _ = std::fs::remove_file(b);
            let _ = std::fs::remove_dir_all(format!("{b}{TRANSCRIPT_BACKUP_SUFFIX}"));
        }
        return Err(e);
    }
    if let Some(b) = backup {
        printer.note(&format!("backup: {b}"));
    }
    Ok(())
}

/// Writes a finalize plan in one transaction (`Writer::apply` revalidates every
/// planned row inside it).
pub(crate) fn write_finalize(writer: &Writer, plan: &Plan) -> Result<(), CliError> {
    writer
        .apply(&plan.writes, &ApplyOptions::default())
        .map_err(|e| CliError::new(e.to_string(), e.hint()))
}

/// Refuses files and directories without a write bit (as root, SQLite itself would
/// happily write through missing permission bits). A symbolic link is followed first:
/// SQLite writes beside the real file.
pub(crate) fn check_writable(db: &Path) -> Result<(), CliError> {
    let real = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    let db = real.as_path();
    let dir = db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut paths = vec![db.to_path_buf(), dir.to_path_buf()];
    for ext in ["-wal", "-shm"] {
        let mut s = db.as_os_str().to_owned();
        s.push(ext);
        let p = PathBuf::from(s);
        if p.exists() {
            paths.push(p);
        }
    }
    for p in paths {
        let meta = std::fs::metadata(&p).map_err(|e| {
            CliError::new(
                format!("cannot read `{}`: {e}", p.display()),
                "check the path and its permissions",
            )
        })?;
        if meta.permissions().readonly() {
            return Err(CliError::new(
                format!(
                    "`{}` is read-only (no write bit); nothing was written",
                    p.display()
                ),
                "give the file and its directory write permission (or copy the workspace \
                 and finalize the copy), then run the command again",
            ));
        }
    }
    Ok(())
}

/// Refuses while another process has the database open: Maka without a marker, or
/// any other program. Probed with `F_GETLK` on the database and its `-shm` (see
/// [`lock::OpenProbe`]); our own connections do not count.
pub(crate) fn refuse_if_open(db: &Path, probe: &mut lock::OpenProbe) -> Result<(), CliError> {
    match probe.held_by_other() {
        Ok(None) => Ok(()),
        Ok(Some(by)) => {
            let who = by.describe();
            Err(CliError::new(
                format!(
                    "`{}`: another process has this database open ({who}); nothing was written",
                    db.display()
                ),
                "quit Maka (or the other program using the workspace; `wsledger info` shows \
                 its pid), then run the command again",
            ))
        }
        Err(e) => Err(CliError::new(
            format!(
                "cannot tell whether another process has `{}` open: {e}; nothing was written",
                db.display()
            ),
            "check the permissions of the database and its `-shm`",
        )),
    }
}

pub(crate) fn take_owner_lock(
    db: &Path,
    binding: Option<&str>,
    printer: &mut Printer,
) -> Result<Option<lock::OwnerLock>, CliError> {
    let lerr = |e: lock::LockError| CliError::new(e.to_string(), e.hint());
    let roots = lock::root_ids(db, binding).map_err(lerr)?;
    if roots.marker_moved {
        printer.warn(&format!(
            "the storage-root marker beside `{}` names another directory (moved or copied \
             workspace); locking its root id anyway",
            db.display()
        ));
    }
    let ids = roots.ids;
    if ids.is_empty() {
        printer.note(
            "no storage-root marker and no root binding: no Maka can hold a lock on this file; \
             applying without the owner lock",
        );
        return Ok(None);
    }
    let ns = lock::namespace().map_err(lerr)?;
    let held = lock::acquire(&ns, &ids).map_err(lerr)?;
    for p in &held.paths {
        printer.note(&format!("owner lock: {}", p.display()));
    }
    Ok(Some(held))
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
pub(crate) fn verify(before: &ScanReport, after: &ScanReport, plan: &Plan) -> Result<(), CliError> {
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
    Err(CliError::new(
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

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30m"), Ok(1_800_000));
        assert_eq!(parse_duration("2h"), Ok(7_200_000));
        assert_eq!(parse_duration("7d"), Ok(604_800_000));
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("3y").is_err());
        assert!(parse_duration("99999999999999999d").is_err());
    }
}
