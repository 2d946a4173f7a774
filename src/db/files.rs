//! The session folders Maka v0.1.2 and v0.1.3 keep beside the database:
//! `<root>/sessions/<session id>/session.jsonl` holds the transcript (a marker or
//! legacy header on line 1, then one JSON record a line); those releases have no
//! `session_messages` table.
//!
//! Reading a transcript for the finalize planner, appending to it as Maka's
//! `appendJsonl` does, and listing, copying and removing a whole session folder for
//! quarantine and restore. Every write is durable (file and directory fsync) before
//! it returns.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// One transcript record, its chunks already joined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageRow {
    pub sequence: i64,
    pub message_type: String,
    /// The record text (reassembled when stored in chunks).
    pub record_json: String,
}

/// The folder of session folders, beside the database.
pub const SESSIONS_DIR: &str = "sessions";
/// A session's transcript inside its folder.
pub const TRANSCRIPT_FILE: &str = "session.jsonl";

/// The directory holding the database (the workspace root).
pub fn workspace_root(db: &Path) -> PathBuf {
    match db.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `<root>/sessions/<session>`.
pub fn session_dir(db: &Path, session: &str) -> PathBuf {
    workspace_root(db).join(SESSIONS_DIR).join(session)
}

/// `<root>/sessions/<session>/session.jsonl`.
pub fn transcript_path(db: &Path, session: &str) -> PathBuf {
    session_dir(db, session).join(TRANSCRIPT_FILE)
}

/// A transcript file and whether a record can be appended to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranscriptFile {
    pub path: PathBuf,
    pub state: TranscriptState,
}

/// What Maka's append would find in a transcript file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TranscriptState {
    /// Appendable. `len` and `sha256` are checked again inside the write transaction
    /// and before the append; `separator`: the last record is complete but has no
    /// newline, so the append starts with one (as Maka's does).
    Ready {
        len: u64,
        sha256: String,
        separator: bool,
    },
    /// Why no record is appended (the file is missing, empty, unreadable, or ends in
    /// a record that Maka's append would truncate or refuse).
    Refused(String),
}

/// Reads a transcript: its records (line 1, the marker or legacy header, and blank
/// lines left out, as Maka reads it) and whether it can be appended to.
pub fn read_transcript(path: &Path) -> (Vec<MessageRow>, TranscriptFile) {
    let file = |state| TranscriptFile {
        path: path.to_path_buf(),
        state,
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return (
                Vec::new(),
                file(TranscriptState::Refused("is missing".into())),
            )
        }
        Err(e) => {
            return (
                Vec::new(),
                file(TranscriptState::Refused(format!("cannot be read ({e})"))),
            )
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text
        .split('\n')
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let first = lines.next();
    let messages: Vec<MessageRow> = lines
        .map(|(i, l)| MessageRow {
            sequence: i as i64,
            message_type: serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
                .unwrap_or_default(),
            record_json: l.to_owned(),
        })
        .collect();
    let state = match first {
        None => TranscriptState::Refused("is empty".into()),
        Some((_, l)) if !is_json_object(l) => TranscriptState::Refused(
            "has no transcript marker or session header on its first line".into(),
        ),
        Some(_) => {
            let tail_start = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            let tail = String::from_utf8_lossy(&bytes[tail_start..]);
            if bytes.ends_with(b"\n") {
                ready(&bytes, false)
            } else if serde_json::from_str::<serde_json::Value>(&tail).is_ok() {
                ready(&bytes, true)
            } else {
                // Maka's append would cut a torn last record off first (or refuse an
                // invalid one): left for Maka, which owns that decision.
                TranscriptState::Refused(
                    "ends in an incomplete last record (Maka's next append cuts it off)".into(),
                )
            }
        }
    };
    (messages, file(state))
}

fn is_json_object(line: &str) -> bool {
    matches!(
        serde_json::from_str::<serde_json::Value>(line),
        Ok(serde_json::Value::Object(_))
    )
}

fn ready(bytes: &[u8], separator: bool) -> TranscriptState {
    TranscriptState::Ready {
        len: bytes.len() as u64,
        sha256: hex::encode(Sha256::digest(bytes)),
        separator,
    }
}

fn invalid(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// Appends `records` (one JSON text each) as lines, as Maka's `appendJsonl` does:
/// the file must exist (never created) and still be exactly as planned; then one
/// write, fsync of the file and of its directories up to the workspace root.
pub fn append_transcript(
    file: &TranscriptFile,
    records: &[String],
    root: &Path,
) -> std::io::Result<()> {
    let TranscriptState::Ready {
        len,
        sha256,
        separator,
    } = &file.state
    else {
        return Err(invalid("the transcript cannot be appended to".into()));
    };
    let now = std::fs::read(&file.path)?;
    if now.len() as u64 != *len || hex::encode(Sha256::digest(&now)) != *sha256 {
        return Err(invalid(
            "the transcript changed since the plan was made".into(),
        ));
    }
    let mut payload = String::new();
    if *separator {
        payload.push('\n');
    }
    for r in records {
        payload.push_str(r);
        payload.push('\n');
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(&file.path)?;
    f.write_all(payload.as_bytes())?;
    f.sync_all()?;
    sync_dirs(file.path.parent().unwrap_or(Path::new(".")), root)
}

/// fsync of `dir` and each parent up to and including `root`.
fn sync_dirs(dir: &Path, root: &Path) -> std::io::Result<()> {
    let mut d = dir;
    loop {
        sync_dir(d)?;
        if d == root {
            return Ok(());
        }
        match d.parent() {
            Some(p) if !p.as_os_str().is_empty() && d.starts_with(root) => d = p,
            _ => return Ok(()),
        }
    }
}

/// fsync of one directory (makes a create, rename or remove in it durable).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// One file of a session folder: its path inside the folder, size and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileRecord {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// Every regular file under `dir` (paths relative to it, `/`-separated, sorted).
/// Anything else (a symbolic link, a device, a name that is not UTF-8) is an error:
/// it could not be put back byte for byte.
pub fn list_tree(dir: &Path) -> std::io::Result<Vec<FileRecord>> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, prefix)) = todo.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let name = e.file_name().into_string().map_err(|n| {
                invalid(format!(
                    "`{}` has a name that is not UTF-8",
                    n.to_string_lossy()
                ))
            })?;
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let kind = e.file_type()?;
            if kind.is_dir() {
                todo.push((e.path(), rel));
            } else if kind.is_file() {
                let bytes = std::fs::read(e.path())?;
                out.push(FileRecord {
                    path: rel,
                    size: bytes.len() as u64,
                    sha256: hex::encode(Sha256::digest(&bytes)),
                });
            } else {
                return Err(invalid(format!(
                    "`{}` is neither a file nor a directory",
                    e.path().display()
                )));
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Whether `dir` holds exactly the files `records` list, byte for byte.
pub fn tree_matches(dir: &Path, records: &[FileRecord]) -> std::io::Result<bool> {
    Ok(list_tree(dir)? == records)
}

/// Copies the files `records` lists from `src` to a new directory `dest`, durably:
/// each file is written and fsynced in `stage` (a fresh directory on `dest`'s file
/// system, removed first if a crashed run left it), the copy is checked against
/// `records`, then `stage` is renamed to `dest` and `dest`'s parent fsynced. `dest`
/// must not exist.
pub fn copy_tree(
    src: &Path,
    records: &[FileRecord],
    stage: &Path,
    dest: &Path,
) -> std::io::Result<()> {
    if stage.exists() {
        std::fs::remove_dir_all(stage)?;
    }
    let result = (|| {
        std::fs::create_dir(stage)?;
        for r in records {
            let to = stage.join(&r.path);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let bytes = std::fs::read(src.join(&r.path))?;
            let mut f = std::fs::File::create(&to)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        let mut dirs: Vec<PathBuf> = records
            .iter()
            .filter_map(|r| stage.join(&r.path).parent().map(Path::to_path_buf))
            .collect();
        dirs.push(stage.to_path_buf());
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            sync_dir(&d)?;
        }
        if !tree_matches(stage, records)? {
            return Err(invalid(format!(
                "the copy in `{}` does not match its source",
                stage.display()
            )));
        }
        std::fs::rename(stage, dest)?;
        sync_dir(dest.parent().unwrap_or(Path::new(".")))
    })();
    if result.is_err() && stage.exists() {
        let _ = std::fs::remove_dir_all(stage);
    }
    result
}

/// Removes a whole folder and makes the removal durable.
pub fn remove_tree(dir: &Path) -> std::io::Result<()> {
    std::fs::remove_dir_all(dir)?;
    sync_dir(dir.parent().unwrap_or(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_states() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("session.jsonl");
        let (_, f) = read_transcript(&p);
        assert_eq!(f.state, TranscriptState::Refused("is missing".into()));
        std::fs::write(&p, "").unwrap();
        assert_eq!(
            read_transcript(&p).1.state,
            TranscriptState::Refused("is empty".into())
        );
        std::fs::write(&p, "{\"type\":\"session_transcript\"}\n{\"type\":\"user\"}").unwrap();
        let (m, f) = read_transcript(&p);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].message_type, "user");
        assert!(matches!(
            f.state,
            TranscriptState::Ready {
                separator: true,
                ..
            }
        ));
        append_transcript(&f, &["{\"a\":1}".into()], d.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"type\":\"session_transcript\"}\n{\"type\":\"user\"}\n{\"a\":1}\n"
        );
        // The plan's view is stale now: a second append with it is refused.
        assert!(append_transcript(&f, &["{}".into()], d.path()).is_err());
        std::fs::write(&p, "{\"type\":\"session_transcript\"}\n{\"type\":\"us").unwrap();
        assert!(matches!(
            read_transcript(&p).1.state,
            TranscriptState::Refused(_)
        ));
    }

    #[test]
    fn trees_copy_exactly() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("a/b")).unwrap();
        std::fs::write(src.join("x"), b"1").unwrap();
        std::fs::write(src.join("a/b/y"), b"22").unwrap();
        let recs = list_tree(&src).unwrap();
        assert_eq!(
            recs.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
            ["a/b/y", "x"]
        );
        let dest = d.path().join("dest");
        copy_tree(&src, &recs, &d.path().join(".stage"), &dest).unwrap();
        assert!(tree_matches(&dest, &recs).unwrap());
        assert!(!d.path().join(".stage").exists());
        remove_tree(&src).unwrap();
        assert!(!src.exists());
    }
}
