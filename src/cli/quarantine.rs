//! `wsledger doctor quarantine` and `wsledger doctor restore`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Map, Value};

use super::finalize::{
    backup_before_write, check_writable, now_ms, recheck_after_backup, refuse_if_open,
    take_owner_lock, BACKUP_DIR_ENV,
};
use super::{workspace, CliError, ExitStatus, GlobalArgs, Printer};
use crate::bundle::{Bundle, SchemaInfo};
use crate::db::backup::backup_path;
use crate::db::files::{self, FileRecord};
use crate::db::quarantine::{Deletion, RestoreItem};
use crate::db::write::Writer;
use crate::db::Workspace;
use crate::doctor::{scan_workspace, scan_workspace_without, ScanOptions};
use crate::quarantine::{bundle_file_name, damaged_sessions, startup_blockers, Reason};
use crate::report::sanitize::sanitize;
use crate::report::Format;
use crate::scan::{ScanReport, WORKSPACE_AUTHORITY_SESSION};

/// Set aside the sessions that hold ledger damage, exactly as Maka's own conversation
/// deletion removes them, each kept in a bundle that `doctor restore` puts back.
///
/// Without `--apply` it prints the plan: every damaged session (scanner issues,
/// undecodable rows, run identity conflicts, runs that make Maka's strict start-up
/// recovery throw) with its reasons, the rows of each table that would move, where its
/// bundle would go, and what Maka's gate and start-up would do without those sessions.
///
/// With `--apply` it takes Maka's owner lock, refuses while another process has the
/// database open, backs the database up, writes and checks
/// every bundle, then deletes what Maka's conversation deletion deletes, in Maka's
/// order, in one transaction, and rescans. The session `maka_workspace_authority` is
/// never touched.
#[derive(Debug, Args)]
pub struct QuarantineArgs {
    /// Quarantine exactly this session (repeatable) instead of the damaged ones
    #[arg(long = "session", value_name = "ID")]
    pub sessions: Vec<String>,
    /// Directory for the bundles [default: `wsledger-quarantine` beside the database];
    /// never inside the workspace's `sessions/` (Maka v0.1.2 and v0.1.3 keep session
    /// folders there, and a session's folder moves beside its bundle)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Move the sessions (default: dry run, nothing is written)
    #[arg(long)]
    pub apply: bool,
    /// With --apply: do not back the database up first
    #[arg(long)]
    pub no_backup: bool,
}

/// Put quarantined sessions back from their bundles, every row and column as it was.
///
/// Without `--apply` it checks the bundles against the workspace and prints what it
/// would restore. With `--apply` it takes Maka's owner lock, refuses while another
/// process has the database open, backs the database up and
/// inserts every row in one transaction. It refuses, changing nothing, when a bundle's
/// schema differs from the workspace's or any of its rows collides with one in the
/// workspace.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// Bundles written by `doctor quarantine --apply`
    #[arg(value_name = "BUNDLE", required = true)]
    pub bundles: Vec<PathBuf>,
    /// Write (default: dry run, nothing is written)
    #[arg(long)]
    pub apply: bool,
    /// With --apply: do not back the database up first
    #[arg(long)]
    pub no_backup: bool,
}

/// Gate and start-up state of a scan.
fn state(report: &ScanReport, archived: &BTreeSet<String>) -> Value {
    let blockers = startup_blockers(report, archived);
    json!({
        "tool_writes_refused": report.maka_gate.tool_writes_refused,
        // Maka refusing to open the file (`startup_refused`) blocks start-up too.
        "startup_blocked": !blockers.is_empty()
            || report.startup.as_ref().is_some_and(|s| !s.opens),
        "startup_blockers": blockers
            .iter()
            .map(|(s, r, c)| {
                // A session header names no run.
                let run = (!r.is_empty()).then_some(r);
                json!({"session_id": s, "run_id": run, "code": c})
            })
            .collect::<Vec<_>>(),
    })
}

fn archived_sessions(ws: &Workspace) -> Result<BTreeSet<String>, crate::db::DbError> {
    if !ws.has_table("session_metadata")? {
        return Ok(BTreeSet::new());
    }
    Ok(ws
        .sessions()?
        .into_iter()
        .filter(|s| s.is_archived)
        .map(|s| s.session_id)
        .collect())
}

fn rows_json(d: &Deletion) -> Value {
    Value::Object(
        d.counts()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(t, n)| (t, Value::from(n)))
            .collect(),
    )
}

fn write_out(printer: &mut Printer, doc: &Value, format: Format) -> Result<(), CliError> {
    let res = (|| -> std::io::Result<()> {
        let out = printer.out();
        match format {
            Format::Ndjson => {
                let mut summary = doc.clone();
                let items = summary
                    .as_object_mut()
                    .and_then(|o| o.remove("sessions"))
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default();
                for s in items {
                    serde_json::to_writer(&mut *out, &json!({"type": "session", "data": s}))?;
                    writeln!(out)?;
                }
                serde_json::to_writer(&mut *out, &json!({"type": "summary", "data": summary}))?;
                writeln!(out)
            }
            Format::Json => {
                serde_json::to_writer_pretty(&mut *out, doc)?;
                writeln!(out)
            }
            _ => render_table(out, doc),
        }
    })();
    match res {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(
            format!("writing output: {e}"),
            "check that stdout is writable",
        )),
        _ => Ok(()),
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => sanitize(s),
        Value::Null => "-".into(),
        other => sanitize(&other.to_string()),
    }
}

fn render_table(out: &mut dyn Write, doc: &Value) -> std::io::Result<()> {
    let restore = doc.get("command").and_then(Value::as_str) == Some("restore");
    writeln!(out, "workspace: {}", s(&doc["workspace"]))?;
    let sessions = doc["sessions"].as_array().cloned().unwrap_or_default();
    if sessions.is_empty() {
        writeln!(
            out,
            "{}",
            if restore {
                "nothing to restore"
            } else {
                "nothing to quarantine: no session holds ledger damage"
            }
        )?;
    }
    for sess in &sessions {
        match sess.get("name").and_then(Value::as_str) {
            Some(n) => writeln!(
                out,
                "session {} \"{}\"",
                s(&sess["session_id"]),
                sanitize(n)
            )?,
            None => writeln!(out, "session {}", s(&sess["session_id"]))?,
        }
        if let Some(reasons) = sess.get("reasons").and_then(Value::as_array) {
            for r in reasons {
                match r.get("id") {
                    Some(Value::String(id)) => {
                        writeln!(out, "  reason  {} ({})", s(&r["code"]), sanitize(id))?
                    }
                    _ => writeln!(out, "  reason  {}", s(&r["code"]))?,
                }
            }
        }
        if let Some(b) = sess.get("blockers").and_then(Value::as_array) {
            for x in b {
                writeln!(out, "  blocked {}", s(x))?;
            }
        }
        let rows: Vec<String> = sess["rows"]
            .as_object()
            .map(|m| m.iter().map(|(t, n)| format!("{t} {n}")).collect())
            .unwrap_or_default();
        writeln!(out, "  rows    {}", sanitize(&rows.join(", ")))?;
        writeln!(out, "  bundle  {}", s(&sess["bundle"]))?;
        if let Some(f) = sess.get("session_files").filter(|f| f.is_object()) {
            let (arrow, other) = match f.get("moved_to") {
                Some(m) => ("->", m),
                None => ("<-", &f["from"]),
            };
            writeln!(
                out,
                "  files   {} {arrow} {} ({} file(s))",
                s(&f["folder"]),
                s(other),
                f["files"].as_array().map_or(0, Vec::len)
            )?;
        }
    }
    let yn = |v: &Value| {
        if v.as_bool() == Some(true) {
            "yes"
        } else {
            "no"
        }
    };
    for key in ["before", "after"] {
        if let Some(st) = doc.get(key) {
            writeln!(
                out,
                "{key:<6}  tool writes refused: {}; start-up blocked: {}",
                yn(&st["tool_writes_refused"]),
                yn(&st["startup_blocked"])
            )?;
        }
    }
    for n in doc["notes"].as_array().cloned().unwrap_or_default() {
        writeln!(out, "note: {}", s(&n))?;
    }
    writeln!(
        out,
        "{} session(s); {}",
        sessions.len(),
        if doc["applied"].as_bool() == Some(true) {
            if restore {
                "restored"
            } else {
                "quarantined"
            }
        } else {
            "nothing written"
        }
    )?;
    if let Some(b) = doc["backup"].as_str() {
        writeln!(out, "backup: {}", sanitize(b))?;
    }
    Ok(())
}

fn io_err(what: &str, path: &Path, e: &std::io::Error) -> CliError {
    CliError::new(
        format!(
            "cannot {what} `{}`: {e}; nothing was changed",
            path.display()
        ),
        "choose a writable directory with --out (or free disk space)",
    )
}

/// Writes `text` to `path` durably: a temporary file, fsync, rename, fsync of the
/// directory.
fn write_durably(path: &Path, text: &str) -> Result<(), CliError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io_err("write", path, &e))?;
    tmp.write_all(text.as_bytes())
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| io_err("write", path, &e))?;
    tmp.persist(path)
        .map_err(|e| io_err("write", path, &e.error))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err("sync", dir, &e))?;
    Ok(())
}

/// Refuses a bundle directory that cannot be made or written, creating nothing: the
/// nearest part of the path that exists must be a directory with a write bit (as
/// root, permission bits would stop nothing; see `check_writable`).
pub(crate) fn check_out_dir(dir: &Path) -> Result<(), CliError> {
    let refuse = |path: &Path, why: &str| {
        CliError::new(
            format!(
                "cannot write bundles in `{}`: `{}` {why}; nothing was changed",
                dir.display(),
                path.display()
            ),
            "choose a writable directory with --out",
        )
    };
    let mut p = dir;
    loop {
        let shown = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        match std::fs::metadata(shown) {
            Ok(m) if !m.is_dir() => return Err(refuse(shown, "is not a directory")),
            Ok(m) if m.permissions().readonly() => {
                return Err(refuse(shown, "is read-only (no write bit)"))
            }
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match p.parent() {
                Some(parent) => p = parent,
                None => return Err(refuse(shown, "does not exist")),
            },
            Err(e) => return Err(io_err("create", dir, &e)),
        }
    }
}

/// The directories an apply made for its bundles: removed again (when empty) unless
/// the apply went through.
pub(crate) struct MadeDirs {
    dirs: Vec<PathBuf>,
}

impl MadeDirs {
    fn create(dir: &Path) -> Result<MadeDirs, CliError> {
        let mut missing = Vec::new();
        let mut p = dir;
        while !p.as_os_str().is_empty() && !p.exists() {
            missing.push(p.to_path_buf());
            match p.parent() {
                Some(parent) => p = parent,
                None => break,
            }
        }
        let mut made = MadeDirs { dirs: Vec::new() };
        for d in missing.into_iter().rev() {
            std::fs::create_dir(&d).map_err(|e| io_err("create", &d, &e))?;
            made.dirs.push(d);
        }
        Ok(made)
    }

    pub(crate) fn keep(&mut self) {
        self.dirs.clear();
    }
}

impl Drop for MadeDirs {
    fn drop(&mut self) {
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn bundle_of(d: &Deletion, schema: &SchemaInfo, meta: Map<String, Value>) -> Bundle {
    Bundle {
        session_id: d.session_id.clone(),
        schema: schema.clone(),
        tables: d.tables.clone(),
        quarantine: Some(Value::Object(meta)),
    }
}

/// The files of a session folder (v0.1.2, v0.1.3), or none.
pub(crate) type Folder = Option<Vec<FileRecord>>;

/// The session's folder `sessions/<id>/` beside `db`, listed, where the release keeps
/// one (`keeps_files`) and it exists.
pub(crate) fn session_folder(
    db: &Path,
    keeps_files: bool,
    session: &str,
) -> Result<Folder, CliError> {
    let dir = files::session_dir(db, session);
    if !keeps_files || std::fs::symlink_metadata(&dir).is_err() {
        return Ok(None);
    }
    files::list_tree(&dir).map(Some).map_err(|e| {
        CliError::new(
            format!(
                "cannot read the session folder `{}`: {e}; nothing was changed",
                dir.display()
            ),
            "a session folder must hold only files and directories wsledger can read",
        )
    })
}

/// Where a quarantine keeps a session's folder: `<session id>.files` beside its bundle.
pub(crate) fn folder_copy_name(session: &str) -> String {
    format!("{session}.files")
}

/// A path made absolute with its existing part resolved (symbolic links followed).
fn resolved(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut base = abs.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(mut real) = std::fs::canonicalize(base) {
            for r in rest.iter().rev() {
                real.push(r);
            }
            return real;
        }
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                base = parent;
            }
            _ => return abs,
        }
    }
}

/// Refuses a bundle directory inside the workspace's `sessions/`: Maka v0.1.2 and
/// v0.1.3 refuse to open a workspace whose `sessions/` holds a directory that is not
/// a session's. Checked before anything is created.
pub(crate) fn refuse_out_in_sessions(out: &Path, db: &Path) -> Result<(), CliError> {
    let sessions = files::workspace_root(db).join(files::SESSIONS_DIR);
    if resolved(out).starts_with(resolved(&sessions)) {
        return Err(CliError::new(
            format!(
                "the bundle directory `{}` is inside `{}`; nothing was changed",
                out.display(),
                sessions.display()
            ),
            "Maka v0.1.2 and v0.1.3 refuse to open a workspace whose `sessions/` holds a \
             directory that is not a session: choose an --out outside it",
        ));
    }
    Ok(())
}

/// `session_files` of a quarantine plan entry (`moved_to`) or restore (`from`).
fn folder_json(db: &Path, session: &str, other: (&str, PathBuf), recs: &[FileRecord]) -> Value {
    json!({
        "folder": files::session_dir(db, session).display().to_string(),
        other.0: other.1.display().to_string(),
        "files": recs,
    })
}

/// What a quarantine is planned from.
struct QuarantineRead {
    report: ScanReport,
    archived: BTreeSet<String>,
    targets: BTreeMap<String, Vec<Reason>>,
    deletions: Vec<Deletion>,
    predicted: ScanReport,
    schema: SchemaInfo,
    /// The release schema an apply writes in, or why it would refuse.
    basis: Result<crate::db::write::WriteBasis, Vec<String>>,
    binding: Option<String>,
    /// Titles and last activity of the target sessions.
    labels: BTreeMap<String, crate::db::diagnosis::SessionLabelRow>,
    /// The release keeps session folders (v0.1.2, v0.1.3), and each target's.
    keeps_files: bool,
    folders: Vec<Folder>,
}

/// Reads what a quarantine is planned from. The outer error is the database's (a read
/// [`Workspace::read`] may do again), the inner one a refusal.
fn read_quarantine(
    ws: &Workspace,
    args: &QuarantineArgs,
    shown: &str,
) -> Result<Result<QuarantineRead, CliError>, crate::db::DbError> {
    let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
    let archived = archived_sessions(ws)?;
    let damaged = damaged_sessions(&report, &archived);
    let mut targets: BTreeMap<String, Vec<Reason>> = BTreeMap::new();
    if args.sessions.is_empty() {
        targets = damaged.clone();
    } else {
        for s in &args.sessions {
            let mut reasons = damaged.get(s).cloned().unwrap_or_default();
            reasons.push(Reason {
                code: "named".into(),
                id: None,
            });
            targets.insert(s.clone(), reasons);
        }
    }
    let mut deletions = Vec::new();
    for s in targets.keys() {
        let d = ws.deletion(s)?;
        if d.is_empty() {
            return Ok(Err(CliError::new(
                format!("session `{s}` has no rows in `{shown}`"),
                "list the sessions with `wsledger doctor scan`",
            )));
        }
        deletions.push(d);
    }
    let excluded: BTreeSet<String> = targets.keys().cloned().collect();
    let predicted = if excluded.is_empty() {
        report.clone()
    } else {
        scan_workspace_without(ws, ScanOptions::default(), &excluded, &mut |_, _| {})?
    };
    let facts = ws.schema_facts()?;
    let basis = crate::db::write::write_basis(&facts);
    let schema = SchemaInfo {
        user_version: facts.user_version,
        registry: facts.registry.clone(),
        capabilities: facts.capabilities.clone(),
    };
    let binding = ws.root_binding()?;
    let labels = ws.session_labels(targets.keys().map(String::as_str))?;
    let keeps_files = ws.transcripts_in_files()?;
    let mut folders = Vec::new();
    for s in targets.keys() {
        match session_folder(ws.path(), keeps_files, s) {
            Ok(f) => folders.push(f),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(QuarantineRead {
        report,
        archived,
        targets,
        deletions,
        predicted,
        schema,
        basis,
        binding,
        labels,
        keeps_files,
        folders,
    }))
}

/// The rescan after an apply, and the archived sessions it is judged with.
fn rescan(db: &Path) -> Result<(ScanReport, BTreeSet<String>), CliError> {
    Ok(Workspace::read(db, |ws| {
        let after = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        Ok((after, archived_sessions(ws)?))
    })?)
}

pub fn run_quarantine(
    global: &GlobalArgs,
    args: &QuarantineArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let format = super::plan_format(global)?;
    let db = workspace::database_path(global.workspace()?)?;
    let shown = db.display().to_string();
    let now = now_ms()?;
    if args
        .sessions
        .iter()
        .any(|s| s == WORKSPACE_AUTHORITY_SESSION)
    {
        return Err(CliError::new(
            format!("`{WORKSPACE_AUTHORITY_SESSION}` is Maka's workspace-authority session; it is never quarantined"),
            "name conversation sessions only",
        ));
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        db.parent()
            .unwrap_or(Path::new("."))
            .join("wsledger-quarantine")
    });
    refuse_out_in_sessions(&out_dir, &db)?;
    // Everything the plan is made from, at one snapshot.
    let QuarantineRead {
        report,
        archived,
        targets,
        deletions,
        predicted,
        schema,
        basis,
        binding,
        labels,
        keeps_files,
        folders,
    } = Workspace::read(&db, |ws| read_quarantine(ws, args, &shown))??;
    let sessions_json = || -> Vec<Value> {
        targets
            .iter()
            .zip(&deletions)
            .zip(&folders)
            .map(|(((s, reasons), d), folder)| {
                let label = labels.get(s);
                let mut v = json!({
                    "session_id": s,
                    "name": label.and_then(|l| l.name.clone()),
                    "last_activity_ms": label.and_then(|l| l.last_activity_ms),
                    "reasons": reasons,
                    "rows": rows_json(d),
                    "bundle": out_dir.join(bundle_file_name(s)).display().to_string(),
                    "blockers": d.blockers,
                });
                if keeps_files {
                    // The folder moves beside the bundle (null: the session has none).
                    v["session_files"] = folder.as_ref().map_or(Value::Null, |recs| {
                        folder_json(
                            &db,
                            s,
                            ("moved_to", out_dir.join(folder_copy_name(s))),
                            recs,
                        )
                    });
                }
                v
            })
            .collect()
    };
    let mut doc = json!({
        "schema_version": 1,
        "command": "quarantine",
        "workspace": shown,
        "applied": false,
        "backup": null,
        "sessions": sessions_json(),
        "before": state(&report, &archived),
        "after": state(&predicted, &archived),
        "schema_basis": basis.as_ref().ok().map(|b| b.to_json()),
        "apply_refusal": basis.as_ref().err().map(|w| w.join("; ")),
        "notes": [],
    });
    // A quarantine changes no schema: Maka still refuses to open a file it refuses now.
    if report.startup.as_ref().is_some_and(|s| !s.opens) {
        doc["after"]["startup_blocked"] = Value::Bool(true);
    }
    let blocked: Vec<String> = deletions
        .iter()
        .filter(|d| !d.blockers.is_empty())
        .map(|d| d.session_id.clone())
        .collect();
    if !args.apply || targets.is_empty() {
        if !args.apply && !targets.is_empty() {
            match &basis {
                Err(why) => printer.note(&format!(
                    "dry run: nothing was written; --apply would refuse this file: {}",
                    why.join("; ")
                )),
                Ok(_) => printer
                    .note("dry run: nothing was written; run again with --apply to quarantine"),
            }
        }
        write_out(printer, &doc, format)?;
        return Ok(ExitStatus::Success);
    }
    if !blocked.is_empty() {
        return Err(CliError::new(
            format!(
                "Maka's own deletion of session(s) {} would fail ({}); nothing was changed",
                blocked.join(", "),
                deletions
                    .iter()
                    .flat_map(|d| d.blockers.iter().cloned())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            "run without --apply to see the blockers",
        ));
    }

    // --apply. A file no repair may write is refused before anything is created.
    if let Err(why) = &basis {
        return Err(super::schema_refusal(&db, &why.join("; ")));
    }
    // Every check that can refuse comes before anything is created; the
    // bundle directory is made only under the lock, and removed again on a refusal.
    check_writable(&db)?;
    check_out_dir(&out_dir)?;
    let _lock = take_owner_lock(&db, binding.as_deref(), printer)?;
    // Declared before the writer, so dropped after it (see `OpenProbe`).
    let mut open_probe = crate::lock::OpenProbe::new(&db);
    refuse_if_open(&db, &mut open_probe)?;
    let writer = Writer::open(&db)?;
    writer
        .check_schema()
        .map_err(|e| CliError::new(e.to_string(), e.hint()))?;
    let (fresh, generation, folders) = read_targets(&writer, &targets)?;
    let mut made = make_out_dir(&out_dir)?;
    let backup = if args.no_backup {
        None
    } else {
        Some(backup_before_write(&writer, &db, now)?)
    };
    recheck_after_backup(&db, &mut open_probe, backup.as_deref(), printer)?;
    doc["backup"] = json!(backup);
    let release = basis.as_ref().ok().map(|b| b.to_json());
    let (moved, notes) = write_quarantine(
        &writer,
        &targets,
        &fresh,
        &folders,
        generation,
        &out_dir,
        &schema,
        &shown,
        now,
        release.as_ref(),
    )?;
    made.keep();
    drop(writer);
    drop(open_probe);
    for n in &notes {
        printer.warn(n);
    }
    doc["notes"] = json!(notes);
    let (after, archived_after) = rescan(&db)?;
    doc["applied"] = Value::Bool(true);
    doc["after"] = state(&after, &archived_after);
    printer.note(&format!(
        "quarantined {moved} session(s); bundles in {}",
        out_dir.display()
    ));
    write_out(printer, &doc, format)?;
    Ok(ExitStatus::Success)
}

/// Creates the bundle directory (removed again on a refusal unless kept) and fails on
/// one that cannot be written, before the backup.
pub(crate) fn make_out_dir(out_dir: &Path) -> Result<MadeDirs, CliError> {
    let made = MadeDirs::create(out_dir)?;
    tempfile::NamedTempFile::new_in(out_dir).map_err(|e| io_err("write in", out_dir, &e))?;
    Ok(made)
}

/// Under the owner lock: the catalog generation and each target session's rows read
/// again (what the bundles hold and the transaction checks), refusing a session
/// Maka's own deletion could not delete.
#[allow(clippy::type_complexity)]
pub(crate) fn read_targets(
    writer: &Writer,
    targets: &BTreeMap<String, Vec<Reason>>,
) -> Result<(Vec<Deletion>, Option<i64>, Vec<Folder>), CliError> {
    let werr = |e: crate::db::write::WriteError| CliError::new(e.to_string(), e.hint());
    let generation = writer.catalog_generation().map_err(werr)?;
    let keeps_files = writer.transcripts_in_files().map_err(werr)?;
    let mut folders = Vec::new();
    for s in targets.keys() {
        folders.push(session_folder(writer.path(), keeps_files, s)?);
    }
    let mut fresh = Vec::new();
    for s in targets.keys() {
        let d = writer.read_deletion(s).map_err(werr)?;
        if !d.blockers.is_empty() {
            return Err(CliError::new(
                format!("session `{s}` cannot be deleted: {}", d.blockers.join("; ")),
                "run without --apply to see the blockers",
            ));
        }
        fresh.push(d);
    }
    Ok((fresh, generation, folders))
}

/// After the backup: writes and reads back each session's bundle (with a checked
/// copy of its folder, v0.1.2 and v0.1.3), then deletes the sessions in one
/// transaction (`Writer::quarantine`), then removes the folders. A failure before the
/// commit removes the bundles and copies written so far. Returns how many sessions
/// moved, and notes on folders left in place.
///
/// The order is safe at every point for those releases' open-time check of
/// `sessions/` (a folder without a session row is refused unless tombstoned): until
/// the commit the folder and its row are both there; after it the folder is
/// tombstoned, so one left behind by a crash is accepted (and still in the bundle).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_quarantine(
    writer: &Writer,
    targets: &BTreeMap<String, Vec<Reason>>,
    fresh: &[Deletion],
    folders: &[Folder],
    generation: Option<i64>,
    out_dir: &Path,
    schema: &SchemaInfo,
    shown: &str,
    now: i64,
    release: Option<&Value>,
) -> Result<(usize, Vec<String>), CliError> {
    let werr = |e: crate::db::write::WriteError| CliError::new(e.to_string(), e.hint());
    let db = writer.path().to_path_buf();
    let removed_meta = fresh.iter().filter(|d| d.has_metadata()).count() as i64;
    let all: Vec<Value> = targets.keys().map(|s| Value::from(s.clone())).collect();
    // Bundles and folder copies written so far (removed again on a failure).
    let mut written: Vec<PathBuf> = Vec::new();
    let cleanup = |written: &[PathBuf]| {
        for p in written {
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(p)
            } else {
                std::fs::remove_file(p)
            };
        }
    };
    for (((s, reasons), d), folder) in targets.iter().zip(fresh).zip(folders) {
        let mut meta = Map::new();
        meta.insert("tool".into(), json!("wsledger doctor quarantine"));
        meta.insert("quarantined_at_ms".into(), json!(now));
        meta.insert("database".into(), json!(shown));
        meta.insert("sessions".into(), Value::Array(all.clone()));
        meta.insert("reasons".into(), json!(reasons));
        if let Some(r) = release {
            // The release whose schema the rows were taken from; restore refuses a
            // workspace of another generation.
            meta.insert("release".into(), r.clone());
        }
        meta.insert("rowids".into(), json!(d.rowids));
        meta.insert("tombstone_added".into(), json!(d.tombstone.is_none()));
        meta.insert(
            "catalog_generation".into(),
            match generation {
                Some(g) => json!({"before": g, "after": g + removed_meta}),
                None => Value::Null,
            },
        );
        if let Some(recs) = folder {
            let copy = out_dir.join(folder_copy_name(s));
            let copied = (|| {
                // A copy left by an earlier run that did not go through.
                if copy.exists() {
                    std::fs::remove_dir_all(&copy)?;
                }
                files::copy_tree(
                    &files::session_dir(&db, s),
                    recs,
                    &out_dir.join(format!(".{}.tmp", folder_copy_name(s))),
                    &copy,
                )
            })();
            if let Err(e) = copied {
                cleanup(&written);
                return Err(io_err("copy the session folder into", &copy, &e));
            }
            written.push(copy);
            meta.insert(
                "session_files".into(),
                json!({
                    "folder": format!("{}/{s}", files::SESSIONS_DIR),
                    "copy": folder_copy_name(s),
                    "files": recs,
                }),
            );
        }
        let bundle = bundle_of(d, schema, meta);
        let path = out_dir.join(bundle_file_name(s));
        if let Err(e) = write_durably(&path, &bundle.to_json_text()) {
            cleanup(&written);
            return Err(e);
        }
        written.push(path.clone());
        // Read it back: the file must hold exactly the rows about to be deleted.
        let back = std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| Bundle::from_json_text(&t).map_err(|e| e.to_string()));
        match back {
            Ok(b) if b == bundle => {}
            Ok(_) => {
                cleanup(&written);
                return Err(CliError::new(
                    format!(
                        "bundle `{}` does not read back as written; nothing was deleted",
                        path.display()
                    ),
                    "check the disk and the --out directory",
                ));
            }
            Err(e) => {
                cleanup(&written);
                return Err(CliError::new(
                    format!(
                        "bundle `{}` cannot be read back ({e}); nothing was deleted",
                        path.display()
                    ),
                    "check the disk and the --out directory",
                ));
            }
        }
    }
    if let Err(e) = writer.quarantine(fresh, generation, now) {
        cleanup(&written);
        return Err(werr(e));
    }
    // The rows are gone and the sessions tombstoned: now their folders go, as the
    // release's own removal does after its transaction.
    let mut notes = Vec::new();
    for (s, folder) in targets.keys().zip(folders) {
        let Some(recs) = folder else { continue };
        let dir = files::session_dir(&db, s);
        let removed = files::tree_matches(&dir, recs).and_then(|same| {
            if same {
                files::remove_tree(&dir).map(|_| true)
            } else {
                Ok(false)
            }
        });
        match removed {
            Ok(true) => {}
            Ok(false) => notes.push(format!(
                "the session folder `{}` changed after it was copied into the bundle; it was \
                 left in place (the session is tombstoned, so Maka ignores it)",
                dir.display()
            )),
            Err(e) => notes.push(format!(
                "the session folder `{}` could not be removed ({e}); it is in the bundle, and \
                 the session is tombstoned, so Maka ignores it",
                dir.display()
            )),
        }
    }
    Ok((fresh.len(), notes))
}

/// What a quarantine bundle says about how to put its session back.
struct Parsed {
    path: PathBuf,
    bundle: Bundle,
    rowids: BTreeMap<String, Vec<i64>>,
    tombstone_added: bool,
    sessions: Vec<String>,
    generation: Option<(i64, i64)>,
    /// The session folder's copy beside the bundle and its files (v0.1.2, v0.1.3).
    files: Option<(PathBuf, Vec<FileRecord>)>,
}

fn parse_bundle(path: &Path) -> Result<Parsed, CliError> {
    let hint = "a quarantine bundle is written by `wsledger doctor quarantine --apply`";
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::new(
            format!("cannot read bundle `{}`: {e}", path.display()),
            hint,
        )
    })?;
    let bundle = Bundle::from_json_text(&text)
        .map_err(|e| CliError::new(format!("`{}`: {e}", path.display()), hint))?;
    let Some(meta) = bundle.quarantine.clone() else {
        return Err(CliError::new(
            format!(
                "`{}` is a session bundle but not a quarantine bundle (it does not hold \
                 exactly what a conversation deletion removed)",
                path.display()
            ),
            hint,
        ));
    };
    let bad = |what: &str| {
        CliError::new(
            format!(
                "`{}`: `quarantine.{what}` is missing or malformed",
                path.display()
            ),
            hint,
        )
    };
    let rowids: BTreeMap<String, Vec<i64>> =
        serde_json::from_value(meta.get("rowids").cloned().unwrap_or(json!({})))
            .map_err(|_| bad("rowids"))?;
    let tombstone_added = meta
        .get("tombstone_added")
        .and_then(Value::as_bool)
        .ok_or_else(|| bad("tombstone_added"))?;
    let sessions: Vec<String> =
        serde_json::from_value(meta.get("sessions").cloned().unwrap_or(json!([])))
            .map_err(|_| bad("sessions"))?;
    let generation = match meta.get("catalog_generation") {
        Some(Value::Object(g)) => match (
            g.get("after").and_then(Value::as_i64),
            g.get("before").and_then(Value::as_i64),
        ) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => return Err(bad("catalog_generation")),
        },
        _ => None,
    };
    let files = match meta.get("session_files") {
        None | Some(Value::Null) => None,
        Some(f) => {
            let copy = f
                .get("copy")
                .and_then(Value::as_str)
                .filter(|c| *c == folder_copy_name(&bundle.session_id))
                .ok_or_else(|| bad("session_files.copy"))?;
            let recs: Vec<FileRecord> = serde_json::from_value(f["files"].clone())
                .map_err(|_| bad("session_files.files"))?;
            let safe = |r: &FileRecord| {
                Path::new(&r.path)
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
            };
            if !recs.iter().all(safe) {
                return Err(bad("session_files.files"));
            }
            let dir = path.parent().unwrap_or(Path::new("."));
            Some((dir.join(copy), recs))
        }
    };
    Ok(Parsed {
        path: path.to_path_buf(),
        bundle,
        rowids,
        tombstone_added,
        sessions,
        generation,
        files,
    })
}

/// Checks the bundles against the workspace and reads what a restore is planned
/// from. The outer error is the database's, the inner one a refusal.
#[allow(clippy::type_complexity)]
fn read_restore(
    ws: &Workspace,
    parsed: &[Parsed],
    shown: &str,
) -> Result<
    Result<(Option<String>, ScanReport, BTreeSet<String>, Vec<bool>), CliError>,
    crate::db::DbError,
> {
    let facts = ws.schema_facts()?;
    let current = SchemaInfo {
        user_version: facts.user_version,
        registry: facts.registry.clone(),
        capabilities: facts.capabilities.clone(),
    };
    for p in parsed {
        let refuse = |what: String| {
            CliError::new(
                format!("`{}`: {what}; nothing was changed", p.path.display()),
                "restore into a workspace with the schema the bundle was taken from",
            )
        };
        if p.bundle.schema != current {
            let name = |s: &SchemaInfo| {
                crate::release::generation_by_versions(
                    s.user_version,
                    s.registry.as_ref(),
                    s.capabilities.as_ref(),
                )
                .map_or_else(
                    || "an unknown release".to_owned(),
                    |g| format!("Maka {}", g.display()),
                )
            };
            return Ok(Err(refuse(format!(
                "the bundle was taken from a file of {} (runtime schema {}), this workspace is \
                 {} (runtime schema {}): a bundle goes back only into the generation it came from",
                name(&p.bundle.schema),
                p.bundle.schema.user_version,
                name(&current),
                current.user_version
            ))));
        }
        for (table, rows) in &p.bundle.tables {
            if !facts.tables.iter().any(|t| t == table) {
                return Ok(Err(refuse(format!("the workspace has no table `{table}`"))));
            }
            let shape = ws.table_shape(table)?;
            for r in rows {
                let cols: Vec<&str> = r.columns.iter().map(|(c, _)| c.as_str()).collect();
                if cols != shape.columns.iter().map(String::as_str).collect::<Vec<_>>() {
                    return Ok(Err(refuse(format!(
                        "the columns of `{table}` differ from the bundle's"
                    ))));
                }
            }
        }
        let live = ws.deletion(&p.bundle.session_id)?;
        if !live.is_empty() {
            return Ok(Err(CliError::new(
                format!(
                    "session `{}` already has rows in `{shown}`; nothing was changed",
                    p.bundle.session_id
                ),
                "a session is restored only while it is quarantined",
            )));
        }
    }
    // The session folders: each copy must be what its bundle records, and the
    // folder must not be in `sessions/` yet (unless a restore that stopped after
    // putting it back left exactly it there).
    let mut in_place = Vec::new();
    for p in parsed {
        let Some((copy, recs)) = &p.files else {
            in_place.push(false);
            continue;
        };
        let refuse = |what: String| {
            Ok(Err(CliError::new(
                format!("`{}`: {what}; nothing was changed", p.path.display()),
                "a quarantine keeps the session folder's copy beside its bundle; restore \
                 from the bundle directory as the quarantine wrote it",
            )))
        };
        match files::tree_matches(copy, recs) {
            Ok(true) => {}
            Ok(false) => {
                return refuse(format!(
                    "the session folder copy `{}` differs from the files the bundle records",
                    copy.display()
                ))
            }
            Err(e) => {
                return refuse(format!(
                    "the session folder copy `{}` cannot be read ({e})",
                    copy.display()
                ))
            }
        }
        let dest = files::session_dir(ws.path(), &p.bundle.session_id);
        if std::fs::symlink_metadata(&dest).is_err() {
            in_place.push(false);
        } else if files::tree_matches(&dest, recs).unwrap_or(false) {
            in_place.push(true);
        } else {
            return Ok(Err(CliError::new(
                format!("`{}` already exists; nothing was changed", dest.display()),
                "a session is restored only while it is quarantined: its folder must not \
                 be in `sessions/`",
            )));
        }
    }
    let binding = ws.root_binding()?;
    let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
    let archived = archived_sessions(ws)?;
    Ok(Ok((binding, report, archived, in_place)))
}

pub fn run_restore(
    global: &GlobalArgs,
    args: &RestoreArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let format = super::plan_format(global)?;
    let db = workspace::database_path(global.workspace()?)?;
    let shown = db.display().to_string();
    let now = now_ms()?;
    let parsed = args
        .bundles
        .iter()
        .map(|p| parse_bundle(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ids = BTreeSet::new();
    for p in &parsed {
        if !ids.insert(p.bundle.session_id.clone()) {
            return Err(CliError::new(
                format!("session `{}` is named by two bundles", p.bundle.session_id),
                "name each bundle once",
            ));
        }
    }
    // The checks and the plan at one snapshot.
    let (binding, report, archived, in_place) =
        Workspace::read(&db, |ws| read_restore(ws, &parsed, &shown))??;
    let mut doc = json!({
        "schema_version": 1,
        "command": "restore",
        "workspace": shown,
        "applied": false,
        "backup": null,
        "sessions": parsed.iter().map(|p| {
            let counts: Map<String, Value> = p.bundle.tables.iter()
                .filter(|(_, r)| !r.is_empty())
                .map(|(t, r)| (t.clone(), Value::from(r.len())))
                .collect();
            let mut v = json!({
                "session_id": p.bundle.session_id,
                "rows": counts,
                "bundle": p.path.display().to_string(),
            });
            if let Some((copy, recs)) = &p.files {
                v["session_files"] =
                    folder_json(&db, &p.bundle.session_id, ("from", copy.clone()), recs);
            }
            v
        }).collect::<Vec<_>>(),
        "before": state(&report, &archived),
        "notes": [],
    });
    if !args.apply {
        printer.note("dry run: nothing was written; run again with --apply to restore");
        write_out(printer, &doc, format)?;
        return Ok(ExitStatus::Success);
    }
    check_writable(&db)?;
    let _lock = take_owner_lock(&db, binding.as_deref(), printer)?;
    // Declared before the writer, so dropped after it (see `OpenProbe`).
    let mut open_probe = crate::lock::OpenProbe::new(&db);
    refuse_if_open(&db, &mut open_probe)?;
    let writer = Writer::open(&db)?;
    let werr = |e: crate::db::write::WriteError| CliError::new(e.to_string(), e.hint());
    writer.check_schema().map_err(werr)?;
    if !args.no_backup {
        let dir = std::env::var_os(BACKUP_DIR_ENV).map(PathBuf::from);
        let dest = backup_path(&db, dir.as_deref(), now);
        writer.backup_to(&dest).map_err(|e| {
            CliError::new(
                format!("backup failed, nothing was written: {e}"),
                "make the directory beside the database writable (or free disk space), or \
                 pass --no-backup",
            )
        })?;
        doc["backup"] = Value::from(dest.display().to_string());
    }
    // Again: a backup of a large file takes a while. Nothing was written: the
    // backup of the unchanged file goes too.
    if let Err(e) = refuse_if_open(&db, &mut open_probe) {
        if let Some(b) = doc["backup"].as_str() {
            let _ = std::fs::remove_file(b);
        }
        return Err(e);
    }
    if let Some(b) = doc["backup"].as_str() {
        printer.note(&format!("backup: {b}"));
    }
    // The catalog generation goes back to its value before the quarantine only when
    // every session of that quarantine comes back together and nothing else moved it.
    let first = parsed[0].generation;
    let whole_batch = parsed.iter().all(|p| p.generation == first)
        && parsed[0].sessions.iter().cloned().collect::<BTreeSet<_>>() == ids;
    let generation = if whole_batch { first } else { None };
    let items: Vec<RestoreItem> = parsed
        .iter()
        .map(|p| RestoreItem {
            session_id: p.bundle.session_id.clone(),
            tables: p.bundle.tables.clone(),
            rowids: p.rowids.clone(),
            remove_tombstone: p.tombstone_added,
        })
        .collect();
    // The folders first: until the transaction below removes the tombstone, a folder
    // of a tombstoned session is one v0.1.2 and v0.1.3 accept at open; staged beside
    // `sessions/` (never in it), then renamed into place.
    let mut placed: Vec<PathBuf> = Vec::new();
    let unplace = |placed: &[PathBuf]| {
        for d in placed {
            let _ = files::remove_tree(d);
        }
    };
    for (p, already) in parsed.iter().zip(&in_place) {
        let (Some((copy, recs)), false) = (&p.files, *already) else {
            continue;
        };
        let id = &p.bundle.session_id;
        let dest = files::session_dir(&db, id);
        let root = files::workspace_root(&db);
        let put = (|| {
            if let Some(parent) = dest.parent().filter(|d| !d.exists()) {
                std::fs::create_dir(parent)?;
                files::sync_dir(&root)?;
            }
            files::copy_tree(
                copy,
                recs,
                &root.join(format!(".wsledger-restore-{id}.tmp")),
                &dest,
            )
        })();
        if let Err(e) = put {
            unplace(&placed);
            return Err(CliError::new(
                format!(
                    "cannot put the session folder back into `{}`: {e}; nothing was changed",
                    dest.display()
                ),
                "check the permissions of the workspace directory (and free disk space)",
            ));
        }
        placed.push(dest);
    }
    let outcome = writer.restore(&items, generation).map_err(|e| {
        unplace(&placed);
        werr(e)
    })?;
    drop(writer);
    drop(open_probe);
    let mut notes = Vec::new();
    if !outcome.generation_restored {
        notes.push(
            "session_catalog_state.generation was left counting up (other sessions of the \
             quarantine stay out, or the catalog changed since): Maka rereads its catalog"
                .to_owned(),
        );
    }
    if outcome.rowids_moved > 0 {
        notes.push(format!(
            "{} row(s) got a new rowid: their old one was taken since",
            outcome.rowids_moved
        ));
    }
    for n in &notes {
        printer.note(n);
    }
    let (after, archived_after) = rescan(&db)?;
    doc["applied"] = Value::Bool(true);
    doc["after"] = state(&after, &archived_after);
    doc["notes"] = json!(notes);
    printer.note(&format!("restored {} session(s)", parsed.len()));
    write_out(printer, &doc, format)?;
    Ok(ExitStatus::Success)
}
