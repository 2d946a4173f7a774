//! The only module that talks to SQLite.
//!
//! Reading never changes the database or its `-wal`: without a `-wal` the file is
//! opened `immutable=1` (SQLite then creates no `-wal`/`-shm`); with one it is opened
//! `mode=ro` so committed frames still in the `-wal` are seen. Nothing here
//! checkpoints, sets `mmap_size`, analyzes, or writes outside `write_txn`.

pub mod backup;
pub mod facts;
pub mod quarantine;
pub mod rows;
pub mod schema;
pub mod session;
pub mod write;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

pub use rows::*;

/// How long a read waits for another connection's lock before giving up. Maka itself
/// waits 5 s; a doctor should not hang longer than that.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// `PRAGMA cache_size` of read connections (negative: KiB).
pub const READ_CACHE_KIB: i64 = -32 * 1024;

/// Why a workspace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("`{path}` does not exist")]
    NotFound { path: PathBuf },
    #[error("`{path}` is a directory without `runtime.sqlite`")]
    NoDatabaseInDir { path: PathBuf },
    #[error("`{path}` is not a file")]
    NotAFile { path: PathBuf },
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{path}` is not a SQLite database ({detail})")]
    NotADatabase { path: PathBuf, detail: String },
    #[error("`{path}` is not a Maka workspace database: it has no `runtime_events` table")]
    NotAWorkspace { path: PathBuf },
    #[error("`{path}` is locked by another connection ({detail})")]
    Busy { path: PathBuf, detail: String },
    #[error("`{path}` is damaged: {detail}")]
    Corrupt { path: PathBuf, detail: String },
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
            DbError::Corrupt { .. } => {
                "the file is damaged; keep a copy, run `wsledger doctor scan --integrity`, and \
                 restore from a backup if you have one"
                    .into()
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

/// A workspace database opened for reading.
pub struct Workspace {
    conn: Connection,
    path: PathBuf,
    /// Kept alive while a read needs a private copy (see `open_read_only`).
    _copy_dir: Option<tempfile::TempDir>,
}

/// Percent-encodes the characters of a path that mean something in an SQLite
/// `file:` URI.
fn file_uri(path: &Path, query: &str) -> String {
    let mut uri = String::from("file:");
    for ch in path.to_string_lossy().chars() {
        match ch {
            '?' | '#' | '%' => uri.push_str(&format!("%{:02X}", ch as u32)),
            c => uri.push(c),
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

impl Workspace {
    /// Opens `db` read-only without changing it or its `-wal`.
    pub fn open_read_only(db: &Path) -> Result<Workspace, DbError> {
        check_readable(db)?;
        let wal = wal_path(db);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let has_wal = wal.exists();
        let query = if has_wal {
            "mode=ro"
        } else {
            "mode=ro&immutable=1"
        };
        let attempt = Connection::open_with_flags(file_uri(db, query), flags)
            .map_err(|e| DbError::from_sqlite(db, &e))
            .and_then(|conn| {
                let ws = Workspace {
                    conn,
                    path: db.to_path_buf(),
                    _copy_dir: None,
                };
                ws.prepare_read()?;
                Ok(ws)
            });
        match attempt {
            Ok(ws) => {
                if !has_wal && wal.exists() {
                    // Maka began writing while we opened: read again through the WAL.
                    return Workspace::open_read_only(db);
                }
                Ok(ws)
            }
            // A WAL database in a directory we cannot write (no `-shm` can be made):
            // read a private copy instead of touching anything beside the original.
            Err(DbError::Sqlite { .. }) if has_wal => Workspace::open_private_copy(db),
            Err(e) => Err(e),
        }
    }

    fn open_private_copy(db: &Path) -> Result<Workspace, DbError> {
        let dir = tempfile::tempdir().map_err(|e| DbError::Io {
            path: db.to_path_buf(),
            source: e,
        })?;
        let copy = dir.path().join("runtime.sqlite");
        let io = |e| DbError::Io {
            path: db.to_path_buf(),
            source: e,
        };
        std::fs::copy(db, &copy).map_err(io)?;
        std::fs::copy(wal_path(db), wal_path(&copy)).map_err(io)?;
        let conn = Connection::open_with_flags(
            &copy,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| DbError::from_sqlite(db, &e))?;
        let ws = Workspace {
            conn,
            path: db.to_path_buf(),
            _copy_dir: Some(dir),
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
        // A fixed page cache (32 MiB, not growing with the file): the scan's point
        // lookups into headers and tool projections keep their index pages here
        // instead of re-reading them from the OS for every lookup.
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

fn check_readable(db: &Path) -> Result<(), DbError> {
    use std::io::Read;
    let mut f = std::fs::File::open(db).map_err(|e| DbError::Io {
        path: db.to_path_buf(),
        source: e,
    })?;
    let mut header = [0u8; 16];
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
    if got < 16 || header != *b"SQLite format 3\0" {
        return Err(DbError::NotADatabase {
            path: db.to_path_buf(),
            detail: "it does not start with the SQLite header".into(),
        });
    }
    Ok(())
}
