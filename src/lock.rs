//! Maka's storage-root owner lock: the proof that no Maka process owns the workspace.
//!
//! Maka takes `<namespace>/<rootId>/owner.lock` exclusively before it opens a
//! workspace for writing. The namespace is under the home directory of the passwd
//! database (not `$HOME`): `~/.cache/maka/runtime-hosts` on Linux,
//! `~/Library/Caches/Maka/runtime-hosts` on macOS. The primitive must be Maka's own:
//! an open-file-description `fcntl` record lock (`F_OFD_SETLK`, whole file) on Linux
//! and `flock` on macOS. (`flock` on Linux does not conflict with Maka's lock.)
//! `WSLEDGER_MAKA_CONTROL_DIR` replaces the namespace (tests).

use std::fs::File;
use std::path::{Path, PathBuf};

/// Environment variable that replaces the control namespace directory.
pub const CONTROL_DIR_ENV: &str = "WSLEDGER_MAKA_CONTROL_DIR";

/// The storage-root marker Maka writes beside the database.
pub const MARKER_FILE: &str = ".maka-storage-root.json";

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("Maka's owner lock `{path}` is held by another process")]
    Held { path: PathBuf },
    #[error("cannot take Maka's owner lock `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot find the home directory of the current user in the passwd database")]
    NoHome,
    #[error("`{path}` is not a valid Maka storage-root marker: {detail}")]
    BadMarker { path: PathBuf, detail: String },
    #[error("this platform has no supported owner-lock primitive")]
    Unsupported,
}

impl LockError {
    pub fn hint(&self) -> String {
        match self {
            LockError::Held { .. } => {
                "Maka is running on this workspace: quit Maka (and wait for its runtime host to \
                 exit), then run the command again"
                    .into()
            }
            LockError::Io { .. } => "check the permissions of the lock directory".into(),
            LockError::NoHome => format!("set {CONTROL_DIR_ENV} to Maka's runtime-hosts directory"),
            LockError::BadMarker { .. } => {
                "open the workspace in Maka once so it can check and repair its storage-root \
                 marker"
                    .into()
            }
            LockError::Unsupported => "run wsledger on Linux or macOS".into(),
        }
    }
}

/// Held owner locks; released when dropped (closing the file releases OFD/flock locks).
#[derive(Debug)]
pub struct OwnerLock {
    _files: Vec<File>,
    pub paths: Vec<PathBuf>,
}

/// The storage root id from the marker beside the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerRoot {
    pub root_id: String,
    /// The marker's `rootIdentity` no longer matches the directory (moved or copied).
    pub identity_mismatch: bool,
}

/// 64 lower-case hex digits.
pub fn is_root_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Reads `.maka-storage-root.json` in `dir`; `None` when there is none.
pub fn marker_root(dir: &Path) -> Result<Option<MarkerRoot>, LockError> {
    let path = dir.join(MARKER_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LockError::Io { path, source: e }),
    };
    let bad = |detail: &str| LockError::BadMarker {
        path: path.clone(),
        detail: detail.to_owned(),
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|_| bad("not JSON"))?;
    let root_id = value
        .get("rootId")
        .and_then(serde_json::Value::as_str)
        .filter(|s| is_root_id(s))
        .ok_or_else(|| bad("no 64-hex `rootId`"))?
        .to_owned();
    let identity = value.get("rootIdentity");
    let field = |k: &str| {
        identity
            .and_then(|i| i.get(k))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let identity_mismatch = match (field("dev"), field("ino"), dir_identity(dir)) {
        (Some(dev), Some(ino), Some((d, i))) => dev != d.to_string() || ino != i.to_string(),
        _ => true,
    };
    Ok(Some(MarkerRoot {
        root_id,
        identity_mismatch,
    }))
}

#[cfg(unix)]
fn dir_identity(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).ok()?;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn dir_identity(_dir: &Path) -> Option<(u64, u64)> {
    None
}

/// The root ids whose owner locks guard a database: the marker's beside it, and the
/// `runtime_storage_root_binding` row's when it differs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RootIds {
    pub ids: Vec<String>,
    /// The marker names another directory (the workspace was moved or copied).
    pub marker_moved: bool,
}

/// Collects the root ids for the database `db` (marker in its directory, binding row).
/// A symbolic link is followed first: the marker is beside the real file.
pub fn root_ids(db: &Path, binding: Option<&str>) -> Result<RootIds, LockError> {
    let real = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    let dir = real
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut out = RootIds::default();
    if let Some(m) = marker_root(dir)? {
        out.marker_moved = m.identity_mismatch;
        out.ids.push(m.root_id);
    }
    if let Some(b) = binding {
        if !out.ids.iter().any(|i| i == b) {
            out.ids.push(b.to_owned());
        }
    }
    Ok(out)
}

/// Whether someone holds Maka's owner lock on `path`, probed without taking it and
/// without creating anything (`F_OFD_GETLK` on Linux). A missing lock file is free.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn probe_held(path: &Path) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    // SAFETY: `flock` is plain old data; zeroed is valid, then the fields are set.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: the descriptor is open for the lifetime of `file`, and `fl` is a valid
    // `struct flock` that F_OFD_GETLK fills in.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// Whether someone holds the owner lock (macOS: a momentary non-blocking `flock`).
#[cfg(all(unix, not(target_os = "linux")))]
pub fn probe_held(path: &Path) -> std::io::Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    // Taking and dropping the lock at once: closing the file releases it.
    Ok(!try_lock_exclusive(&file)?)
}

#[cfg(not(unix))]
pub fn probe_held(_path: &Path) -> std::io::Result<bool> {
    Err(std::io::Error::other("unsupported platform"))
}

/// A lock another process holds on a file of the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenBy {
    /// The locked file: the database or its `-shm`.
    pub path: PathBuf,
    /// The holder's pid; `None` when the kernel does not say (an open-file-description
    /// lock, or a process in another pid namespace).
    pub pid: Option<u32>,
}

impl OpenBy {
    /// Who, in words: "pid N, which holds a lock on `…`".
    pub fn describe(&self) -> String {
        match self.pid {
            Some(pid) => format!("pid {pid}, which holds a lock on `{}`", self.path.display()),
            None => format!(
                "it holds a lock on `{}`; its pid cannot be read",
                self.path.display()
            ),
        }
    }
}

/// Whether another process has a database open, probed with `F_GETLK` on the database
/// file and its `-shm` without taking or creating anything.
///
/// Every SQLite connection to a WAL database holds a read lock on the `-shm` (its
/// "dead man switch" byte) and one on the database file for as long as it is open, and
/// a rollback-journal connection holds one on the database file during a transaction.
/// `F_GETLK` reports locks of other processes only, so our own connections never count.
///
/// The probe keeps every file it opened until it is dropped: closing any descriptor of
/// a file drops all of this process's POSIX locks on it, SQLite's included. Drop it
/// only after every connection opened meanwhile is closed.
#[derive(Debug)]
pub struct OpenProbe {
    db: PathBuf,
    files: Vec<(PathBuf, File)>,
}

impl OpenProbe {
    /// A probe for `db` (a symbolic link is followed: SQLite locks the real file).
    pub fn new(db: &Path) -> OpenProbe {
        OpenProbe {
            db: std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf()),
            files: Vec::new(),
        }
    }

    /// The first lock another process holds on the database file or its `-shm`.
    pub fn held_by_other(&mut self) -> std::io::Result<Option<OpenBy>> {
        let mut shm = self.db.as_os_str().to_owned();
        shm.push("-shm");
        for path in [self.db.clone(), PathBuf::from(shm)] {
            let i = match self.files.iter().position(|(p, _)| *p == path) {
                Some(i) => i,
                None => match open_for_probe(&path)? {
                    Some(f) => {
                        self.files.push((path.clone(), f));
                        self.files.len() - 1
                    }
                    None => continue,
                },
            };
            if let Some(pid) = posix_lock_holder(&self.files[i].1)? {
                return Ok(Some(OpenBy { path, pid }));
            }
        }
        Ok(None)
    }
}

/// Opens a regular file for a lock probe; `None` when it does not exist. Never blocks
/// (a FIFO in its place is not opened).
fn open_for_probe(path: &Path) -> std::io::Result<Option<File>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(std::io::Error::other(format!(
                "`{}` is not a regular file",
                path.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK);
    }
    match o.open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// `F_GETLK` over the whole file: `Some(pid)` when another process holds any lock on
/// it (`Some(None)`: its pid is not known), `None` when none does.
#[cfg(unix)]
#[allow(unsafe_code)]
fn posix_lock_holder(file: &File) -> std::io::Result<Option<Option<u32>>> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: `flock` is plain old data; zeroed is valid, then the fields are set.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    // A write lock conflicts with every lock, read or write.
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0;
    fl.l_len = 0; // whole file
                  // SAFETY: the descriptor is open for the lifetime of `file`, and `fl` is a valid
                  // `struct flock` that F_GETLK fills in.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if fl.l_type == libc::F_UNLCK as libc::c_short {
        return Ok(None);
    }
    Ok(Some(u32::try_from(fl.l_pid).ok().filter(|p| *p > 0)))
}

#[cfg(not(unix))]
fn posix_lock_holder(_file: &File) -> std::io::Result<Option<Option<u32>>> {
    Err(std::io::Error::other("unsupported platform"))
}

/// Maka's control namespace (or `WSLEDGER_MAKA_CONTROL_DIR`).
pub fn namespace() -> Result<PathBuf, LockError> {
    if let Some(dir) = std::env::var_os(CONTROL_DIR_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let home = passwd_home().ok_or(LockError::NoHome)?;
    Ok(if cfg!(target_os = "macos") {
        home.join("Library/Caches/Maka/runtime-hosts")
    } else {
        home.join(".cache/maka/runtime-hosts")
    })
}

/// `<namespace>/<rootId>/owner.lock`.
pub fn lock_path(namespace: &Path, root_id: &str) -> PathBuf {
    namespace.join(root_id).join("owner.lock")
}

/// The passwd database's home directory of the real user (`getpwuid_r`).
#[cfg(unix)]
#[allow(unsafe_code)]
pub fn passwd_home() -> Option<PathBuf> {
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: `passwd` is plain old data; zeroed is a valid (empty) value.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live, writable memory of the stated size; on
    // success `result` points at `pwd`, whose strings point into `buf`.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
        return None;
    }
    // SAFETY: `pw_dir` is a NUL-terminated string inside `buf`, which outlives this use.
    let dir = unsafe { CStr::from_ptr(pwd.pw_dir) };
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()));
    (!path.as_os_str().is_empty()).then_some(path)
}

#[cfg(not(unix))]
pub fn passwd_home() -> Option<PathBuf> {
    None
}

/// Tries Maka's exclusive lock on an open file: `Ok(true)` taken, `Ok(false)` held
/// by someone else.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: `flock` is plain old data; zeroed is valid, then the fields are set.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0;
    fl.l_len = 0; // whole file
    fl.l_pid = 0; // required for OFD locks
                  // SAFETY: the descriptor is open for the lifetime of `file`, and `fl` is a valid
                  // `struct flock` for F_OFD_SETLK.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

/// Tries Maka's exclusive lock on an open file (macOS: `flock`).
#[cfg(all(unix, not(target_os = "linux")))]
#[allow(unsafe_code)]
pub fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: the descriptor is open for the lifetime of `file`.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(not(unix))]
pub fn try_lock_exclusive(_file: &File) -> std::io::Result<bool> {
    Err(std::io::Error::other("unsupported platform"))
}

/// Opens (creating `0600` in `0700` directories) and locks `owner.lock` of every
/// root id. All or nothing: on failure the locks taken so far are released.
pub fn acquire(namespace: &Path, root_ids: &[String]) -> Result<OwnerLock, LockError> {
    if cfg!(not(unix)) {
        return Err(LockError::Unsupported);
    }
    let mut files = Vec::new();
    let mut paths = Vec::new();
    for id in root_ids {
        if !is_root_id(id) {
            return Err(LockError::BadMarker {
                path: PathBuf::from(id),
                detail: "root id is not 64 lower-case hex digits".into(),
            });
        }
        let path = lock_path(namespace, id);
        let dir = path.parent().unwrap_or(namespace);
        create_private_dir(dir).map_err(|e| LockError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
        let file = open_lock_file(&path).map_err(|e| LockError::Io {
            path: path.clone(),
            source: e,
        })?;
        match try_lock_exclusive(&file) {
            Ok(true) => {}
            Ok(false) => return Err(LockError::Held { path }),
            Err(e) => return Err(LockError::Io { path, source: e }),
        }
        files.push(file);
        paths.push(path);
    }
    Ok(OwnerLock {
        _files: files,
        paths,
    })
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Opens the lock file as Maka does (`a+`, mode `0600`).
pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true).append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

/// Who else has `db` open (see [`OpenProbe`]).
pub fn probe_open(db: &Path) -> Result<Option<OpenBy>, String> {
    OpenProbe::new(db)
        .held_by_other()
        .map_err(|e| e.to_string())
}

/// Maka's owner lock of `db`, probed, never taken: `held`, `free`, `no_root` or
/// `unknown`, the lock files, and why it is unknown.
pub fn probe_owner_lock(db: &Path, binding: Option<&str>) -> (String, Vec<String>, Option<String>) {
    let roots = match root_ids(db, binding) {
        Ok(r) => r,
        Err(e) => return ("unknown".into(), Vec::new(), Some(e.to_string())),
    };
    if roots.ids.is_empty() {
        return ("no_root".into(), Vec::new(), None);
    }
    let ns = match namespace() {
        Ok(n) => n,
        Err(e) => return ("unknown".into(), Vec::new(), Some(e.to_string())),
    };
    let paths: Vec<std::path::PathBuf> = roots.ids.iter().map(|id| lock_path(&ns, id)).collect();
    let mut held = false;
    for p in &paths {
        match probe_held(p) {
            Ok(h) => held |= h,
            Err(e) => {
                let shown = paths.iter().map(|p| p.display().to_string()).collect();
                return (
                    "unknown".into(),
                    shown,
                    Some(format!("{}: {e}", p.display())),
                );
            }
        }
    }
    let shown = paths.iter().map(|p| p.display().to_string()).collect();
    (if held { "held" } else { "free" }.into(), shown, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_open_file_description_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let id = "a".repeat(64);
        let held = acquire(dir.path(), std::slice::from_ref(&id)).unwrap();
        let again = acquire(dir.path(), &[id]);
        assert!(matches!(again, Err(LockError::Held { .. })), "{again:?}");
        drop(held);
        assert!(acquire(dir.path(), &["a".repeat(64)]).is_ok());
    }

    #[test]
    fn our_own_connections_do_not_count_as_another_process() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runtime.sqlite");
        let c = rusqlite::Connection::open(&db).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.execute_batch("CREATE TABLE t(x); BEGIN; SELECT count(*) FROM t;")
            .unwrap();
        let mut probe = OpenProbe::new(&db);
        assert_eq!(probe.held_by_other().unwrap(), None);
        drop(c);
        drop(probe);
        // Nothing there at all: nothing to report, nothing created.
        let mut probe = OpenProbe::new(&dir.path().join("none.sqlite"));
        assert_eq!(probe.held_by_other().unwrap(), None);
        assert!(!dir.path().join("none.sqlite").exists());
    }

    #[test]
    fn rejects_root_ids_that_are_not_hex() {
        let dir = tempfile::tempdir().unwrap();
        let r = acquire(dir.path(), &["../x".into()]);
        assert!(matches!(r, Err(LockError::BadMarker { .. })));
    }

    #[test]
    fn reads_marker_and_flags_moved_roots() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(marker_root(dir.path()).unwrap(), None);
        let id = "b".repeat(64);
        std::fs::write(
            dir.path().join(MARKER_FILE),
            format!(r#"{{"schemaVersion":1,"kind":"interactive","rootId":"{id}","rootIdentity":{{"dev":"1","ino":"2"}}}}"#),
        )
        .unwrap();
        let m = marker_root(dir.path()).unwrap().unwrap();
        assert_eq!(m.root_id, id);
        assert!(m.identity_mismatch);
    }
}
