//! The only module that talks to SQLite.
//!
//! Reading never changes the database or its `-wal`, and creates nothing beside them:
//! - a WAL-mode file without `-wal` (no connection has it open) is opened
//!   `immutable=1`, so SQLite creates no `-wal`/`-shm`;
//! - with a `-wal` and its `-shm` (Maka running, or crashed) it is opened `mode=ro`,
//!   so committed frames still in the `-wal` are seen;
//! - with a `-wal` but no `-shm` (nobody has it open; a copied workspace) a private
//!   copy of both is read, as SQLite would otherwise create the `-shm`;
//! - a rollback-journal file is opened `mode=ro` without `immutable`, so another
//!   writer's lock and a hot journal are honoured, never read through.
//!
//! A read that takes no locks (`immutable=1`, or the private copy) is trusted only when
//! the file and its companions did not change while it ran ([`Workspace::read`]): Maka
//! may open the file meanwhile, and its checkpoint then writes pages under the read.
//!
//! Symbolic links are resolved first: SQLite looks for the `-wal` beside the real
//! file. A `-wal`, `-shm` or `-journal` that is not a regular file (a FIFO would block
//! the open) is refused. Nothing here checkpoints, sets `mmap_size`, analyzes, or writes outside
//! `write_txn`.

pub mod backup;
mod cascade;
pub mod derived;
pub mod diagnosis;
pub mod excise;
pub mod facts;
pub mod files;
pub mod listed;
pub mod quarantine;
mod raw;
pub mod rows;
pub mod schema;
pub mod session;
pub mod shape;
pub mod startup;
pub mod tasks;
pub mod write;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

pub use rows::*;
pub use shape::KnownFrom;

/// How long a read waits for another connection's lock before giving up. Maka itself
/// waits 5 s; a doctor should not hang longer than that.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Turns off SQLite's memory statistics for this process. With them on (SQLite's
/// default), every allocation and free SQLite makes takes one process-wide mutex; a
/// scan runs up to five connections on as many threads, each filling its page cache,
/// and they queued on that mutex and slept (seen with `perf`'s scheduler events on
/// the bench workspace). Nothing here reads the statistics or sets a soft heap limit
/// (which needs them). Call it first thing in `main`, before any thread or connection
/// exists. `false` when SQLite refused it (already initialized): nothing changed,
/// which is only slower.
#[allow(unsafe_code)]
pub fn tune_sqlite_for_this_process() -> bool {
    // SAFETY: `sqlite3_config` takes this option with one `int` argument and touches
    // only SQLite's global configuration. It must not run beside another SQLite call:
    // the caller promises that no other thread exists yet. Once SQLite is initialized
    // it returns SQLITE_MISUSE and changes nothing.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_config(
            rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
            std::ffi::c_int::from(0u8),
        )
    };
    rc == rusqlite::ffi::SQLITE_OK
}

/// `PRAGMA cache_size` of read connections (negative: KiB). 4 MiB: the scan reads
/// `runtime_events` in run order, all over the file, so a larger cache hardly ever hits
/// again; 16 MiB cost 12 to 15 MB of peak memory for no measurable speed (measured on
/// the bench workspace and at 1M events, 2026-12-01).
pub const READ_CACHE_KIB: i64 = -4 * 1024;

/// `PRAGMA cache_size` of a [`Workspace::rows_reader`]: on the bench workspace as
/// fast as 4 MiB and 256 KiB, for 2 to 3 MB less peak memory than 4 MiB at 1M events
/// (2026-12-05).
const ROWS_CACHE_KIB: i64 = -1024;

/// `PRAGMA cache_size` of a [`Workspace::reader_twin`].
const TWIN_CACHE_KIB: i64 = -2 * 1024;

/// `PRAGMA cache_size` of a [`Workspace::sequential_reader`]. With the 2 MiB of a twin
/// each, the scan's headers and journal readers took the peak RSS of a 5M-event scan to
/// 96.4 MiB; with this, 92.4 MiB, as fast (2026-12-02).
const SEQUENTIAL_CACHE_KIB: i64 = -256;

/// Why a workspace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("`{path}` does not exist")]
    NotFound { path: PathBuf },
    #[error("`{path}` is a directory without `runtime.sqlite`")]
    NoDatabaseInDir { path: PathBuf },
    #[error("`{path}` is not a file")]
    NotAFile { path: PathBuf },
    #[error("`{path}` is not a file (SQLite keeps only files beside a database)")]
    CompanionNotAFile { path: PathBuf },
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{path}` is not a SQLite database ({detail})")]
    NotADatabase { path: PathBuf, detail: String },
    #[error("`{path}` is not a Maka workspace database: it has no `runtime_events` table")]
    NotAWorkspace { path: PathBuf },
    #[error(
        "`{path}` is locked by another connection (gave up after {} s: {detail})",
        BUSY_TIMEOUT.as_secs()
    )]
    Busy { path: PathBuf, detail: String },
    #[error(
        "`{path}` holds an interrupted write (a hot journal) that only a writer may roll back ({detail})"
    )]
    HotJournal { path: PathBuf, detail: String },
    #[error("`{path}` is damaged: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "`{path}` changed under every one of {MAX_READS} reads (something opened or wrote it \
         while it was read without locks)"
    )]
    KeptChanging { path: PathBuf },
    #[error("`{path}`: {detail}")]
    Sqlite { path: PathBuf, detail: String },
}

impl DbError {
    /// What the user can do about it.
    pub fn hint(&self) -> String {
        match self {
            DbError::NotFound { .. } => {
                "pass `--workspace` with a Maka workspace directory or its `runtime.sqlite`".into()
            }
            DbError::NoDatabaseInDir { .. } => {
                "a Maka workspace directory holds `runtime.sqlite`; check the path, or name the \
                 database file itself"
                    .into()
            }
            DbError::NotAFile { .. } => "name a workspace directory or a database file".into(),
            DbError::CompanionNotAFile { .. } => {
                "move it out of the way (keep it if you are unsure), then run the command again"
                    .into()
            }
            DbError::Io { .. } => {
                "check the file's permissions and that the disk is readable".into()
            }
            DbError::NotADatabase { .. } | DbError::NotAWorkspace { .. } => {
                "point `--workspace` at the `runtime.sqlite` of a Maka workspace".into()
            }
            DbError::Busy { .. } => {
                "another process holds a lock on the database; wait for it to finish (or quit \
                 Maka) and try again"
                    .into()
            }
            DbError::HotJournal { .. } => {
                "keep a copy of the file and its `-journal`; opening it once with Maka (or \
                 `sqlite3`) rolls the interrupted write back, then scan again"
                    .into()
            }
            DbError::Corrupt { .. } => {
                "the file is damaged; keep a copy, run `wsledger doctor scan --integrity`, and \
                 restore from a backup if you have one"
                    .into()
            }
            DbError::KeptChanging { .. } => {
                "Maka is probably starting or stopping: run the command again in a moment".into()
            }
            DbError::Sqlite { .. } => "check that the file is a Maka workspace database".into(),
        }
    }

    pub(crate) fn from_sqlite(path: &Path, e: &rusqlite::Error) -> DbError {
        let path = path.to_path_buf();
        let detail = e.to_string();
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => DbError::NotADatabase { path, detail },
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                DbError::Busy { path, detail }
            }
            Some(rusqlite::ErrorCode::DatabaseCorrupt) => DbError::Corrupt { path, detail },
            Some(rusqlite::ErrorCode::ReadOnly)
                if matches!(e, rusqlite::Error::SqliteFailure(f, _)
                    if f.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK) =>
            {
                DbError::HotJournal { path, detail }
            }
            _ => DbError::Sqlite { path, detail },
        }
    }
}

/// Resolves `--workspace`: a directory holding `runtime.sqlite`, or the file itself.
pub fn resolve_database_path(path: &Path) -> Result<PathBuf, DbError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => DbError::NotFound {
            path: path.to_path_buf(),
        },
        _ => DbError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    })?;
    if meta.is_dir() {
        let db = path.join("runtime.sqlite");
        return match std::fs::metadata(&db) {
            Ok(m) if m.is_file() => Ok(db),
            Ok(_) => Err(DbError::NotAFile { path: db }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(DbError::NoDatabaseInDir {
                path: path.to_path_buf(),
            }),
            Err(e) => Err(DbError::Io {
                path: db,
                source: e,
            }),
        };
    }
    if !meta.is_file() {
        return Err(DbError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    Ok(path.to_path_buf())
}

/// The `-wal` file of a database.
pub fn wal_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// The `-shm` file of a database.
pub fn shm_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-shm");
    PathBuf::from(s)
}

/// A workspace database opened for reading.
pub struct Workspace {
    conn: Connection,
    path: PathBuf,
    /// How to open another connection that sees exactly what this one sees: set only
    /// when nobody can change what is read (`immutable=1`, or our private copy).
    twin: Option<(String, OpenFlags)>,
    /// Kept alive while a read needs a private copy (see `open_read_only`).
    _copy_dir: Option<tempfile::TempDir>,
    /// For a read that takes no locks on the file (`immutable=1`, or a private copy of
    /// it): the file as it was before the read began (see [`Workspace::read`]).
    stamp: Option<Stamp>,
    /// Opened in place through a `-wal`: Maka may be committing meanwhile.
    live: bool,
}

/// A name as an SQL identifier (in double quotes, a double quote doubled).
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A `file:` URI for an SQLite open: every byte of the path outside the unreserved
/// set is percent-encoded (so `?`, `#`, `%` and bytes that are not UTF-8 survive).
fn file_uri(path: &Path, query: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

/// What lies beside a database: its `-wal` and `-shm` (and no `-journal`, `-wal` or
/// `-shm` that is not a regular file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Companions {
    wal: bool,
    shm: bool,
}

fn companions(real: &Path) -> Result<Companions, DbError> {
    let present = |p: PathBuf| match std::fs::symlink_metadata(&p) {
        Ok(m) if m.is_file() => Ok(true),
        Ok(_) => Err(DbError::CompanionNotAFile { path: p }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(DbError::Io { path: p, source: e }),
    };
    // SQLite opens a `-journal` it finds (to check for a hot journal): a FIFO there
    // would block the open forever.
    let mut journal = real.as_os_str().to_owned();
    journal.push("-journal");
    present(PathBuf::from(journal))?;
    Ok(Companions {
        wal: present(wal_path(real))?,
        shm: present(shm_path(real))?,
    })
}

impl Workspace {
    /// Opens `db` read-only without changing it or its `-wal` (see the module docs).
    pub fn open_read_only(db: &Path) -> Result<Workspace, DbError> {
        let header = check_readable(db)?;
        // SQLite finds the `-wal` and `-journal` beside the file a link points to.
        let real = std::fs::canonicalize(db).map_err(|e| DbError::Io {
            path: db.to_path_buf(),
            source: e,
        })?;
        let found = companions(&real)?;
        if found.wal && !found.shm {
            // Nobody has the file open (a connection keeps its -shm), and opening it
            // in place would create a -shm beside it.
            return Workspace::open_private_copy(db, &real);
        }
        let immutable = !found.wal && header.wal_mode;
        // Before the first page is read: what the read relies on staying as it is.
        let stamp = if immutable {
            Some(Stamp::take(&real)?)
        } else {
            None
        };
        let query = if immutable {
            "mode=ro&immutable=1"
        } else {
            "mode=ro"
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let attempt = Connection::open_with_flags(file_uri(&real, query), flags)
            .map_err(|e| DbError::from_sqlite(db, &e))
            .and_then(|conn| {
                let ws = Workspace {
                    conn,
                    path: db.to_path_buf(),
                    twin: immutable.then(|| (file_uri(&real, query), flags)),
                    _copy_dir: None,
                    stamp,
                    live: found.wal,
                };
                ws.prepare_read()?;
                Ok(ws)
            });
        match attempt {
            Ok(ws) => {
                if immutable && wal_path(&real).exists() {
                    // Maka began writing while we opened: read again through the WAL.
                    return Workspace::open_read_only(db);
                }
                Ok(ws)
            }
            // A WAL database whose -shm we may not write (a read-only directory, or
            // another user's files): read a private copy instead.
            Err(DbError::Sqlite { .. }) if found.wal => Workspace::open_private_copy(db, &real),
            Err(e) => Err(e),
        }
    }

    fn open_private_copy(db: &Path, real: &Path) -> Result<Workspace, DbError> {
        // Taken before copying: a copy made while someone opened the file may be torn.
        let stamp = Stamp::take(real)?;
        let dir = tempfile::tempdir().map_err(|e| DbError::Io {
            path: db.to_path_buf(),
            source: e,
        })?;
        let copy = dir.path().join("runtime.sqlite");
        let io = |e| DbError::Io {
            path: db.to_path_buf(),
            source: e,
        };
        std::fs::copy(real, &copy).map_err(io)?;
        std::fs::copy(wal_path(real), wal_path(&copy)).map_err(io)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let uri = file_uri(&copy, "mode=rw");
        let conn =
            Connection::open_with_flags(&uri, flags).map_err(|e| DbError::from_sqlite(db, &e))?;
        let ws = Workspace {
            conn,
            path: db.to_path_buf(),
            twin: Some((uri, flags)),
            _copy_dir: Some(dir),
            stamp: Some(stamp),
            live: false,
        };
        ws.prepare_read()?;
        Ok(ws)
    }

    fn prepare_read(&self) -> Result<(), DbError> {
        self.conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| self.err(&e))?;
        self.conn
            .pragma_update(None, "query_only", true)
            .map_err(|e| self.err(&e))?;
        // A fixed page cache (not growing with the file): the scan's point lookups
        // into headers and tool projections keep their index pages here instead of
        // re-reading them from the OS for every lookup.
        self.conn
            .pragma_update(None, "cache_size", READ_CACHE_KIB)
            .map_err(|e| self.err(&e))?;
        // Point lookups are re-run with new values many times per scan: without the
        // planner stability guarantee, the bundled STAT4 build re-prepares such a
        // statement on every new binding.
        self.conn
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
                true,
            )
            .map_err(|e| self.err(&e))?;
        // Touch the schema now so "not a database" and lock errors surface at open.
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .map_err(|e| self.err(&e))?;
        let _ = n;
        Ok(())
    }

    /// A second read connection that sees exactly what this one sees, for reading
    /// another table on another thread; `None` when that cannot be promised (a live
    /// `-wal` or a rollback journal: another process may commit between the two).
    /// It must not outlive `self` (a private copy is removed with `self`).
    pub fn reader_twin(&self) -> Result<Option<Workspace>, DbError> {
        let Some((uri, flags)) = &self.twin else {
            return Ok(None);
        };
        let conn = Connection::open_with_flags(uri, *flags).map_err(|e| self.err(&e))?;
        let ws = Workspace {
            conn,
            path: self.path.clone(),
            twin: None,
            _copy_dir: None,
            stamp: None,
            live: false,
        };
        ws.prepare_read()?;
        // Smaller than the scan's own: a twin's reads are mostly passes over whole
        // tables (the quarantine preview's counts), which read few pages twice.
        ws.conn
            .pragma_update(None, "cache_size", TWIN_CACHE_KIB)
            .map_err(|e| ws.err(&e))?;
        Ok(Some(ws))
    }

    /// A [`Workspace::reader_twin`] for reading `runtime_events` in the scan's order
    /// beside the walk, with a page cache of [`ROWS_CACHE_KIB`].
    pub fn rows_reader(&self) -> Result<Option<Workspace>, DbError> {
        self.twin_with_cache(ROWS_CACHE_KIB)
    }

    /// A [`Workspace::reader_twin`] for reading tables front to back beside the scan: a
    /// page cache of [`SEQUENTIAL_CACHE_KIB`], since hardly a page is read twice.
    pub fn sequential_reader(&self) -> Result<Option<Workspace>, DbError> {
        self.twin_with_cache(SEQUENTIAL_CACHE_KIB)
    }

    /// A [`Workspace::reader_twin`] with a page cache of `kib` (negative: KiB).
    fn twin_with_cache(&self, kib: i64) -> Result<Option<Workspace>, DbError> {
        let Some(ws) = self.reader_twin()? else {
            return Ok(None);
        };
        ws.conn
            .pragma_update(None, "cache_size", kib)
            .map_err(|e| ws.err(&e))?;
        Ok(Some(ws))
    }

    /// Opens `db` read-only (see [`Workspace::open_read_only`]) and runs `read` on it
    /// inside one read snapshot, so that every statement sees one committed state.
    ///
    /// A read that takes no locks is trusted only when the file did not change while it
    /// ran: when it did (a `-wal` or `-shm` appeared, or the file's size, times or header
    /// changed: Maka opened it and checkpointed under the read), or when the read met a
    /// damaged page, it is done again before anything is reported. The next read opens
    /// the file the way it then is (through the `-wal`, with SQLite's locking, once Maka
    /// has it open), so damage is reported only when a read that honours locking, or one
    /// the file provably did not change under, sees it.
    pub fn read<T>(
        db: &Path,
        mut read: impl FnMut(&Workspace) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let mut damage_seen = false;
        for _ in 0..MAX_READS {
            let ws = match Workspace::open_read_only(db) {
                // The open already reads pages (the schema): judged like any read.
                Err(e) if is_damage(&e) && !damage_seen => {
                    damage_seen = true;
                    continue;
                }
                other => other?,
            };
            let result = ws.read_snapshot().and_then(|_snapshot| read(&ws));
            if ws.stamp.is_none() {
                return result;
            }
            if ws.disturbed()? {
                continue;
            }
            match result {
                Err(e) if is_damage(&e) && !damage_seen => damage_seen = true,
                other => return other,
            }
        }
        Err(DbError::KeptChanging {
            path: db.to_path_buf(),
        })
    }

    /// Whether the file changed since a read that takes no locks began.
    fn disturbed(&self) -> Result<bool, DbError> {
        let Some(before) = &self.stamp else {
            return Ok(false);
        };
        let real = std::fs::canonicalize(&self.path).map_err(|e| DbError::Io {
            path: self.path.clone(),
            source: e,
        })?;
        Ok(Stamp::take(&real)? != *before)
    }

    /// Whether this read is one snapshot of a file others may be committing to (it was
    /// opened in place through its `-wal`).
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Holds one read snapshot until the guard is dropped: every statement run
    /// meanwhile sees the same committed state, even while Maka commits to the `-wal`
    /// (without it each statement takes the newest one). Nothing when a transaction is
    /// already open on this connection.
    pub fn read_snapshot(&self) -> Result<ReadSnapshot<'_>, DbError> {
        if !self.conn.is_autocommit() {
            return Ok(ReadSnapshot { ws: None });
        }
        self.conn
            .execute_batch("BEGIN DEFERRED")
            .map_err(|e| self.err(&e))?;
        Ok(ReadSnapshot { ws: Some(self) })
    }

    pub(crate) fn err(&self, e: &rusqlite::Error) -> DbError {
        DbError::from_sqlite(&self.path, e)
    }

    /// The database file this workspace was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }
}

/// See [`Workspace::read_snapshot`].
pub struct ReadSnapshot<'a> {
    ws: Option<&'a Workspace>,
}

impl Drop for ReadSnapshot<'_> {
    fn drop(&mut self) {
        if let Some(ws) = self.ws {
            // Ends a read transaction: nothing to lose if it fails.
            let _ = ws.conn.execute_batch("COMMIT");
        }
    }
}

/// How many reads [`Workspace::read`] makes at most before giving up.
pub const MAX_READS: usize = 4;

fn is_damage(e: &DbError) -> bool {
    matches!(e, DbError::Corrupt { .. } | DbError::NotADatabase { .. })
}

/// A file's identity, size and times.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    fn of(path: &Path) -> Result<Option<FileStamp>, DbError> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::symlink_metadata(path) {
            Ok(m) => Ok(Some(FileStamp {
                dev: m.dev(),
                ino: m.ino(),
                len: m.len(),
                mtime: (m.mtime(), m.mtime_nsec()),
                ctime: (m.ctime(), m.ctime_nsec()),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(DbError::Io {
                path: path.to_path_buf(),
                source: e,
            }),
        }
    }
}

/// What a read without locks relies on staying the same: the database file (its
/// identity, size, times and header, whose change counter a rollback-mode writer
/// bumps), its `-wal` and whether a `-shm` exists (every connection in WAL mode
/// makes one). Writing pages into the file changes its times even when neither the
/// size nor the header changes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    db: Option<FileStamp>,
    header: Vec<u8>,
    wal: Option<FileStamp>,
    shm: Option<FileStamp>,
}

impl Stamp {
    /// Takes the stamp of `real` (a resolved path). It opens the file to read its
    /// header: never call it while a connection of this process holds SQLite locks on
    /// the file (closing any descriptor of it would drop them).
    fn take(real: &Path) -> Result<Stamp, DbError> {
        use std::io::Read;
        let io = |e| DbError::Io {
            path: real.to_path_buf(),
            source: e,
        };
        let mut header = Vec::with_capacity(100);
        std::fs::File::open(real)
            .and_then(|f| f.take(100).read_to_end(&mut header))
            .map_err(io)?;
        Ok(Stamp {
            db: FileStamp::of(real)?,
            header,
            wal: FileStamp::of(&wal_path(real))?,
            shm: FileStamp::of(&shm_path(real))?,
        })
    }
}

/// Environment variable naming a directory of FIFOs that pause a command at named
/// points (tests only; see [`pause_point`]).
pub const PAUSE_DIR_ENV: &str = "WSLEDGER_TEST_PAUSE_DIR";

/// A test hook: when `$WSLEDGER_TEST_PAUSE_DIR/<name>.paused` exists (a FIFO the test
/// made), opens it for writing and closes it (the test, reading it, learns that the
/// command got here), then reads `<name>.resume` to its end (the test closes it when it
/// has done what it does at this point). Waits on the test, not on a clock. Names are
/// file names (`:` is kept, `/` never used).
pub fn pause_point(name: &str) {
    let Some(dir) = std::env::var_os(PAUSE_DIR_ENV).filter(|d| !d.is_empty()) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let paused = dir.join(format!("{name}.paused"));
    if !paused.exists() {
        return;
    }
    let _ = std::fs::OpenOptions::new().write(true).open(&paused);
    let _ = std::fs::read(dir.join(format!("{name}.resume")));
}

/// What the first 100 bytes say.
struct Header {
    /// File format read/write versions 2: the file is in WAL mode.
    wal_mode: bool,
}

fn check_readable(db: &Path) -> Result<Header, DbError> {
    use std::io::Read;
    let mut f = std::fs::File::open(db).map_err(|e| DbError::Io {
        path: db.to_path_buf(),
        source: e,
    })?;
    let mut header = [0u8; 100];
    let mut got = 0;
    while got < header.len() {
        match f.read(&mut header[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => {
                return Err(DbError::Io {
                    path: db.to_path_buf(),
                    source: e,
                })
            }
        }
    }
    if got == 0 {
        return Err(DbError::NotADatabase {
            path: db.to_path_buf(),
            detail: "the file is empty".into(),
        });
    }
    if got < 16 || header[..16] != *b"SQLite format 3\0" {
        return Err(DbError::NotADatabase {
            path: db.to_path_buf(),
            detail: "it does not start with the SQLite header".into(),
        });
    }
    Ok(Header {
        wal_mode: got >= 20 && header[18] == 2 && header[19] == 2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_encode_every_byte_that_could_mean_something() {
        use std::os::unix::ffi::OsStrExt;
        let p = Path::new(std::ffi::OsStr::from_bytes(
            b"/w s/a?b#c%d\xff/runtime.sqlite",
        ));
        assert_eq!(
            file_uri(p, "mode=ro"),
            "file:/w%20s/a%3Fb%23c%25d%FF/runtime.sqlite?mode=ro"
        );
    }

    #[test]
    fn a_read_snapshot_does_not_see_later_commits() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runtime.sqlite");
        // Another connection keeps the file open in WAL mode, as Maka would.
        let maka = Connection::open(&db).unwrap();
        maka.pragma_update(None, "journal_mode", "WAL").unwrap();
        maka.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        let ws = Workspace::open_read_only(&db).unwrap();
        let count = |ws: &Workspace| -> i64 {
            ws.conn()
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .unwrap()
        };
        let snapshot = ws.read_snapshot().unwrap();
        assert_eq!(count(&ws), 1);
        maka.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert_eq!(count(&ws), 1, "a commit became visible inside the snapshot");
        // Nested: no second transaction.
        drop(ws.read_snapshot().unwrap());
        assert_eq!(count(&ws), 1);
        drop(snapshot);
        assert_eq!(count(&ws), 2);
    }

    /// A WAL-mode file that no connection has open (no `-wal`): read `immutable=1`.
    fn closed_wal_file(dir: &Path) -> PathBuf {
        let db = dir.join("runtime.sqlite");
        let c = Connection::open(&db).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        drop(c);
        assert!(!wal_path(&db).exists());
        db
    }

    fn count(ws: &Workspace) -> Result<i64, DbError> {
        ws.conn()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .map_err(|e| ws.err(&e))
    }

    fn injected(ws: &Workspace) -> DbError {
        DbError::Corrupt {
            path: ws.path().to_path_buf(),
            detail: "injected".into(),
        }
    }

    #[test]
    fn damage_met_without_locks_is_read_again_before_it_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let db = closed_wal_file(dir.path());
        let mut reads = 0;
        let n = Workspace::read(&db, |ws| {
            reads += 1;
            assert!(ws.stamp.is_some(), "read without locks");
            if reads == 1 {
                return Err(injected(ws));
            }
            count(ws)
        })
        .unwrap();
        assert_eq!((n, reads), (1, 2));
        // Damage that a second read of the unchanged file sees too is reported.
        let mut reads = 0;
        let r = Workspace::read(&db, |ws| -> Result<(), DbError> {
            reads += 1;
            Err(injected(ws))
        });
        assert!(matches!(r, Err(DbError::Corrupt { .. })), "{r:?}");
        assert_eq!(reads, 2);
        assert!(!wal_path(&db).exists() && !shm_path(&db).exists());
    }

    #[test]
    fn a_file_written_under_a_read_without_locks_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = closed_wal_file(dir.path());
        let mut reads = 0;
        let n = Workspace::read(&db, |ws| {
            reads += 1;
            let n = count(ws)?;
            if reads == 1 {
                // Maka opens the file, commits, checkpoints and quits meanwhile.
                let maka = Connection::open(&db).unwrap();
                maka.execute("INSERT INTO t VALUES (2)", []).unwrap();
            }
            Ok(n)
        })
        .unwrap();
        assert_eq!((n, reads), (2, 2));
    }

    #[test]
    fn a_read_through_the_wal_is_final() {
        let dir = tempfile::tempdir().unwrap();
        let db = closed_wal_file(dir.path());
        let maka = Connection::open(&db).unwrap();
        maka.execute("INSERT INTO t VALUES (2)", []).unwrap();
        let mut reads = 0;
        let r = Workspace::read(&db, |ws| -> Result<(), DbError> {
            reads += 1;
            assert!(ws.is_live() && ws.stamp.is_none());
            Err(injected(ws))
        });
        assert!(matches!(r, Err(DbError::Corrupt { .. })));
        assert_eq!(reads, 1, "SQLite's locking already stood behind this read");
    }

    #[test]
    fn a_fifo_beside_the_database_is_refused_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runtime.sqlite");
        std::fs::write(&db, b"").unwrap();
        let fifo = dir.path().join("runtime.sqlite-journal");
        let ok = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return; // no mkfifo here; the CLI corpus covers it
        }
        match companions(&db) {
            Err(DbError::CompanionNotAFile { path }) => assert_eq!(path, fifo),
            other => panic!("{other:?}"),
        }
    }
}
