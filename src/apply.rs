//! The one way a command writes the workspace database: Maka's owner lock and the
//! open-file check, a backup, the write in one `BEGIN IMMEDIATE` transaction (each
//! `db::write::Writer` call is one), and a rescan. Every writing command
//! (finalize-runs, quarantine, restore, repair) goes through [`apply`].
//!
//! How a writing command uses it: implement [`WritingCommand`] for the command's
//! apply (its refusals that need no lock, what it reads again under the lock, any
//! backup beside the database's, and the write itself), then call [`apply`] with a
//! [`Target`]. The order of the steps is [`apply`]'s alone:
//! 1. the schema refusal, then the write bits, then [`WritingCommand::check`]:
//!    nothing is created before a refusal;
//! 2. the owner lock, the open-file check, the file opened for writing and its schema
//!    checked;
//! 3. [`WritingCommand::stage`] (under the lock: the rows read again, directories made);
//! 4. the backup (unless `--no-backup`) and [`WritingCommand::back_up_more`], then the
//!    open-file check again;
//! 5. [`WritingCommand::write`];
//! 6. the writer released, the rescan (still under the lock), returned in [`Applied`]
//!    for the command to judge.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::db::backup::backup_path;
use crate::db::write::{Writer, TRANSCRIPT_BACKUP_SUFFIX};
use crate::db::Workspace;
use crate::error::UserError;
use crate::lock;
use crate::notes::Notes;
use crate::release::repair_basis::WriteBasis;
use crate::scan::{scan_workspace, ScanOptions, ScanReport};

/// Puts backups in this directory instead of beside the database (tests).
pub const BACKUP_DIR_ENV: &str = "WSLEDGER_BACKUP_DIR";

/// What every writing command is asked besides what it writes: where its bundles go,
/// whether it writes at all, whether it backs the database up first, and the time.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `--out` (default: `wsledger-quarantine` beside the database); `None` for a
    /// command that writes no bundles.
    pub out: Option<PathBuf>,
    /// Write (`--apply`); otherwise only the plan is shown.
    pub apply: bool,
    /// Back the database up first (not with `--no-backup`).
    pub backup: bool,
    /// Milliseconds since the epoch.
    pub now: i64,
}

/// The file an apply writes, and how.
pub struct Target<'a> {
    pub db: &'a Path,
    /// `runtime_storage_root_binding.root_id`, which names Maka's owner lock.
    pub binding: Option<&'a str>,
    /// Why no repair may write in this file's schema (`release::repair_basis::write_basis`).
    pub schema_refusal: Option<String>,
    /// Back the database up first (`--no-backup` turns it off).
    pub backup: bool,
    /// Milliseconds since the epoch: the backup's name.
    pub now: i64,
    /// How the file is scanned again after the write.
    pub rescan: ScanOptions,
}

impl<'a> Target<'a> {
    /// `db`, rescanned with the default options after the write.
    pub fn new(
        db: &'a Path,
        binding: Option<&'a str>,
        schema_refusal: Option<&str>,
        backup: bool,
        now: i64,
    ) -> Target<'a> {
        Target {
            db,
            binding,
            schema_refusal: schema_refusal.map(str::to_owned),
            backup,
            now,
            rescan: ScanOptions::default(),
        }
    }
}

/// Why a repair must refuse a file of this basis (see `release::repair_basis::write_basis`).
pub fn basis_refusal(basis: &Result<WriteBasis, Vec<String>>) -> Option<String> {
    basis.as_ref().err().map(|w| w.join("; "))
}

/// Refuses every write into a file written by a Maka newer than every build wsledger
/// was verified against (issue notes, 41): with `apply`, an error before anything is
/// read further or created; in a dry run, a note up front that `--apply` would refuse.
/// Every writing command calls it first.
pub fn refuse_newer(db: &Path, apply: bool, notes: &mut dyn Notes) -> Result<(), UserError> {
    let Some(why) = newer_refusal_of(db)? else {
        return Ok(());
    };
    if apply {
        return Err(schema_refusal(db, &why));
    }
    notes.note(&format!("dry run: --apply would refuse this file: {why}"));
    Ok(())
}

/// [`crate::release::repair_basis::newer_refusal`] of the file at `db`.
fn newer_refusal_of(db: &Path) -> Result<Option<String>, UserError> {
    let facts = Workspace::read(db, |ws| ws.schema_facts())?;
    Ok(crate::release::repair_basis::newer_refusal(&facts))
}

/// What a dry run with something to write says: nothing was written, and what
/// `--apply` would do (`to`: run again "to ..."), or why it would refuse this file.
pub fn note_dry_run(notes: &mut dyn Notes, refusal: Option<&str>, to: &str) {
    let newer = crate::release::repair_basis::NEWER_PREFIX;
    match refusal {
        // Said up front already (`refuse_newer`).
        Some(why) if why.starts_with(newer) => notes.note("dry run: nothing was written"),
        Some(why) => notes.note(&format!(
            "dry run: nothing was written; --apply would refuse this file: {why}"
        )),
        None => notes.note(&format!(
            "dry run: nothing was written; run again with --apply to {to}"
        )),
    }
}

/// A command's part of an apply (see the module's documentation for the order).
pub trait WritingCommand {
    /// What [`WritingCommand::stage`] reads or makes under the lock.
    type Staged;
    /// What the write returns.
    type Written;

    /// Refusals that need no lock; nothing may be created here.
    fn check(&mut self) -> Result<(), UserError> {
        Ok(())
    }

    /// Under the owner lock, with the schema checked, before the backup: read again
    /// what is written, make what the write needs (removed again by its `Drop` when
    /// the apply stops before the write).
    fn stage(&mut self, writer: &Writer) -> Result<Self::Staged, UserError>;

    /// Right after the database's backup (at `backup`): any other backup. On a failure
    /// the database's backup is removed again, nothing having been written.
    fn back_up_more(&mut self, _staged: &Self::Staged, _backup: &str) -> Result<(), UserError> {
        Ok(())
    }

    /// The write itself.
    fn write(&mut self, step: Step<'_>, staged: Self::Staged) -> Result<Self::Written, UserError>;
}

/// A command that reads nothing again and makes nothing under the lock (a restore):
/// its write alone. See [`write_only`].
pub struct WriteOnly<F>(F);

/// The apply part of a command whose part is `write` alone.
pub fn write_only<W, F: FnMut(Step<'_>) -> Result<W, UserError>>(write: F) -> WriteOnly<F> {
    WriteOnly(write)
}

impl<W, F: FnMut(Step<'_>) -> Result<W, UserError>> WritingCommand for WriteOnly<F> {
    type Staged = ();
    type Written = W;

    fn stage(&mut self, _writer: &Writer) -> Result<(), UserError> {
        Ok(())
    }

    fn write(&mut self, step: Step<'_>, _staged: ()) -> Result<W, UserError> {
        (self.0)(step)
    }
}

/// What the write is handed: the writer (one transaction per call), the database's
/// backup if one was made, and where its notes go.
pub struct Step<'a> {
    pub writer: &'a Writer,
    pub backup: Option<&'a str>,
    pub notes: &'a mut dyn Notes,
}

/// What an apply did, and the file as the rescan found it.
pub struct Applied<W> {
    pub backup: Option<String>,
    pub written: W,
    pub after: ScanReport,
    pub archived_after: BTreeSet<String>,
}

/// Carries a command's write out, in the one order every writing command shares.
pub fn apply<C: WritingCommand>(
    target: &Target<'_>,
    command: &mut C,
    notes: &mut dyn Notes,
) -> Result<Applied<C::Written>, UserError> {
    let db = target.db;
    // A file no repair may write is refused before anything (lock, backup) happens; so
    // is a file of a Maka newer than this wsledger, whatever the command.
    if let Some(why) = &target.schema_refusal {
        return Err(schema_refusal(db, why));
    }
    if let Some(why) = newer_refusal_of(db)? {
        return Err(schema_refusal(db, &why));
    }
    // Every check that can refuse comes before anything is created.
    check_writable(db)?;
    command.check()?;
    // The lock first: while Maka holds it the file is not even opened for writing.
    let lock = take_owner_lock(db, target.binding, notes)?;
    // Declared before the writer, so dropped after it (see `OpenProbe`).
    let mut open_probe = lock::OpenProbe::new(db);
    refuse_if_open(db, &mut open_probe)?;
    let writer = Writer::open(db, crate::release::repair_basis::schema_gate)?;
    writer.check_schema()?;
    let staged = command.stage(&writer)?;
    let backup = if target.backup {
        let backup = backup_before_write(&writer, db, target.now)?;
        // Nothing was written yet: a failed copy takes the database backup with it.
        command.back_up_more(&staged, &backup).inspect_err(|_| {
            let _ = std::fs::remove_file(&backup);
        })?;
        Some(backup)
    } else {
        None
    };
    recheck_after_backup(db, &mut open_probe, backup.as_deref(), notes)?;
    let step = Step {
        writer: &writer,
        backup: backup.as_deref(),
        notes: &mut *notes,
    };
    let written = command.write(step, staged)?;
    drop(writer);
    drop(open_probe);
    // Rescanned under the owner lock: Maka cannot start in between.
    let (after, archived_after) = Workspace::read(db, |ws| {
        let after = scan_workspace(ws, target.rescan, &mut |_, _| {})?;
        Ok((after, ws.archived_sessions()?))
    })?;
    drop(lock);
    Ok(Applied {
        backup,
        written,
        after,
        archived_after,
    })
}

/// The refusal of a repair on a file whose schema no repair may write (`why`: what
/// `release::repair_basis::write_basis` found), before anything is created.
pub fn schema_refusal(db: &Path, why: &str) -> UserError {
    use crate::release::repair_basis::{NEWER_HINT, NEWER_PREFIX};
    let hint = if why.starts_with(NEWER_PREFIX) {
        NEWER_HINT
    } else {
        crate::db::write::SCHEMA_REFUSAL_HINT
    };
    let message = if why.starts_with(NEWER_PREFIX) {
        format!("`{}`: nothing was written: {why}", db.display())
    } else {
        format!("`{}` cannot be repaired in its schema: {why}", db.display())
    };
    UserError::new(message, hint)
}

/// Backs the database up with SQLite's online backup API before the first write of a
/// command (into `WSLEDGER_BACKUP_DIR` when set, else beside it); returns its path.
fn backup_before_write(writer: &Writer, db: &Path, now: i64) -> Result<String, UserError> {
    let dir = std::env::var_os(BACKUP_DIR_ENV).map(PathBuf::from);
    let dest = backup_path(db, dir.as_deref(), now);
    writer.backup_to(&dest).map_err(|e| {
        UserError::new(
            format!("backup failed, nothing was written: {e}"),
            "make the directory beside the database writable (or free disk space), or \
             pass --no-backup",
        )
    })?;
    Ok(dest.display().to_string())
}

/// After the backup, before the first write: refuses again while another process has
/// the file open (a backup of a large file takes a while). Nothing was written then,
/// so the backup of the unchanged file goes too; otherwise says where it is.
fn recheck_after_backup(
    db: &Path,
    probe: &mut lock::OpenProbe,
    backup: Option<&str>,
    notes: &mut dyn Notes,
) -> Result<(), UserError> {
    if let Err(e) = refuse_if_open(db, probe) {
        if let Some(b) = backup {
            let _ = std::fs::remove_file(b);
            let _ = std::fs::remove_dir_all(format!("{b}{TRANSCRIPT_BACKUP_SUFFIX}"));
        }
        return Err(e);
    }
    if let Some(b) = backup {
        notes.note(&format!("backup: {b}"));
    }
    Ok(())
}

/// Refuses files and directories without a write bit (as root, SQLite itself would
/// happily write through missing permission bits). A symbolic link is followed first:
/// SQLite writes beside the real file.
fn check_writable(db: &Path) -> Result<(), UserError> {
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
            UserError::new(
                format!("cannot read `{}`: {e}", p.display()),
                "check the path and its permissions",
            )
        })?;
        if meta.permissions().readonly() {
            return Err(UserError::new(
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
fn refuse_if_open(db: &Path, probe: &mut lock::OpenProbe) -> Result<(), UserError> {
    match probe.held_by_other() {
        Ok(None) => Ok(()),
        Ok(Some(by)) => {
            let who = by.describe();
            Err(UserError::new(
                format!(
                    "`{}`: another process has this database open ({who}); nothing was written",
                    db.display()
                ),
                "quit Maka (or the other program using the workspace; `wsledger info` shows \
                 its pid), then run the command again",
            ))
        }
        Err(e) => Err(UserError::new(
            format!(
                "cannot tell whether another process has `{}` open: {e}; nothing was written",
                db.display()
            ),
            "check the permissions of the database and its `-shm`",
        )),
    }
}

fn take_owner_lock(
    db: &Path,
    binding: Option<&str>,
    notes: &mut dyn Notes,
) -> Result<Option<lock::OwnerLock>, UserError> {
    let lerr = |e: lock::LockError| UserError::new(e.to_string(), e.hint());
    let roots = lock::root_ids(db, binding).map_err(lerr)?;
    if roots.marker_moved {
        notes.warn(&format!(
            "the storage-root marker beside `{}` names another directory (moved or copied \
             workspace); locking its root id anyway",
            db.display()
        ));
    }
    let ids = roots.ids;
    if ids.is_empty() {
        notes.note(
            "no storage-root marker and no root binding: no Maka can hold a lock on this file; \
             applying without the owner lock",
        );
        return Ok(None);
    }
    let ns = lock::namespace().map_err(lerr)?;
    let held = lock::acquire(&ns, &ids).map_err(lerr)?;
    for p in &held.paths {
        notes.note(&format!("owner lock: {}", p.display()));
    }
    Ok(Some(held))
}
