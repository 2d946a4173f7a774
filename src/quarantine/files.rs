//! The files of a quarantine: the bundle directory (checked, made, removed again on a
//! refusal), bundles written durably, and the session folders that v0.1.2 and v0.1.3
//! keep beside the database.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::bundle::Bundle;
use crate::db::files::{self, FileRecord};
use crate::error::UserError;

pub fn io_err(what: &str, path: &Path, e: &std::io::Error) -> UserError {
    UserError::new(
        format!(
            "cannot {what} `{}`: {e}; nothing was changed",
            path.display()
        ),
        "choose a writable directory with --out (or free disk space)",
    )
}

/// Writes `text` to `path` durably: a temporary file, fsync, rename, fsync of the
/// directory.
pub fn write_durably(path: &Path, text: &str) -> Result<(), UserError> {
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

/// What a write has put in the bundle directory so far (bundles, folder copies):
/// removed again when the write stops before its commit.
#[derive(Default)]
pub struct WrittenFiles(Vec<PathBuf>);

impl WrittenFiles {
    pub fn push(&mut self, path: PathBuf) {
        self.0.push(path);
    }

    /// Removes everything written so far.
    pub fn remove(&self) {
        for p in &self.0 {
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(p)
            } else {
                std::fs::remove_file(p)
            };
        }
    }
}

/// Writes `bundle` to `path` durably and reads it back: the file must hold exactly
/// the rows about to go. On a failure everything `written` so far is removed, and the
/// refusal ends with `nothing` ("nothing was deleted"); `say_why`: it names why a
/// bundle cannot be read back.
pub fn write_bundle(
    path: &Path,
    bundle: &Bundle,
    written: &mut WrittenFiles,
    nothing: &str,
    say_why: bool,
) -> Result<(), UserError> {
    if let Err(e) = write_durably(path, &bundle.to_json_text()) {
        written.remove();
        return Err(e);
    }
    written.push(path.to_path_buf());
    let back = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| Bundle::from_json_text(&t).map_err(|e| e.to_string()));
    let problem = match back {
        Ok(b) if b == *bundle => return Ok(()),
        Err(e) if say_why => format!("cannot be read back ({e})"),
        _ => "does not read back as written".to_owned(),
    };
    written.remove();
    Err(UserError::new(
        format!("bundle `{}` {problem}; {nothing}", path.display()),
        "check the disk and the --out directory",
    ))
}

/// Refuses a bundle directory that cannot be made or written, creating nothing: the
/// nearest part of the path that exists must be a directory with a write bit (as
/// root, permission bits would stop nothing; see `check_writable`).
pub fn check_out_dir(dir: &Path) -> Result<(), UserError> {
    let refuse = |path: &Path, why: &str| {
        UserError::new(
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
pub struct MadeDirs {
    dirs: Vec<PathBuf>,
}

impl MadeDirs {
    pub fn create(dir: &Path) -> Result<MadeDirs, UserError> {
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

    pub fn keep(&mut self) {
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

/// The files of a session folder (v0.1.2, v0.1.3), or none.
pub type Folder = Option<Vec<FileRecord>>;

/// The session's folder `sessions/<id>/` beside `db`, listed, where the release keeps
/// one (`keeps_files`) and it exists.
pub fn session_folder(db: &Path, keeps_files: bool, session: &str) -> Result<Folder, UserError> {
    let dir = files::session_dir(db, session);
    if !keeps_files || std::fs::symlink_metadata(&dir).is_err() {
        return Ok(None);
    }
    files::list_tree(&dir).map(Some).map_err(|e| {
        UserError::new(
            format!(
                "cannot read the session folder `{}`: {e}; nothing was changed",
                dir.display()
            ),
            "a session folder must hold only files and directories wsledger can read",
        )
    })
}

/// Where a quarantine keeps a session's folder: `<session id>.files` beside its bundle.
pub fn folder_copy_name(session: &str) -> String {
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
pub fn refuse_out_in_sessions(out: &Path, db: &Path) -> Result<(), UserError> {
    let sessions = files::workspace_root(db).join(files::SESSIONS_DIR);
    if resolved(out).starts_with(resolved(&sessions)) {
        return Err(UserError::new(
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

/// Creates the bundle directory (removed again on a refusal unless kept) and fails on
/// one that cannot be written, before the backup.
pub fn make_out_dir(out_dir: &Path) -> Result<MadeDirs, UserError> {
    let made = MadeDirs::create(out_dir)?;
    tempfile::NamedTempFile::new_in(out_dir).map_err(|e| io_err("write in", out_dir, &e))?;
    Ok(made)
}
