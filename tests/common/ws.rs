//! A workspace in a temporary directory: the database at `<tmp>/ws/runtime.sqlite`,
//! Maka's control namespace for the test at `<tmp>/control`. Fixtures are always
//! copied; nothing writes `fixtures/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::Connection;
use sha2::{Digest, Sha256};
use wsledger::bundle::Cell;
use wsledger::db::Workspace;

/// `WSLEDGER_NOW_MS` of the commands [`Ws::command`] runs.
pub const NOW: &str = "1800000000000";

pub struct Ws {
    pub dir: tempfile::TempDir,
}

impl Ws {
    /// A private copy of a fixture workspace (only `runtime.sqlite`).
    pub fn copy(name: &str) -> Ws {
        Ws::copy_db(&Path::new("fixtures").join(name).join("runtime.sqlite"))
    }

    /// A private, writable copy of the database file `from` (only it).
    pub fn copy_db(from: &Path) -> Ws {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let dest = ws.join("runtime.sqlite");
        std::fs::copy(from, &dest).unwrap();
        let mut p = std::fs::metadata(&dest).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        p.set_readonly(false);
        std::fs::set_permissions(&dest, p).unwrap();
        Ws { dir }
    }

    /// The workspace directory.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn db(&self) -> PathBuf {
        self.root().join("runtime.sqlite")
    }

    /// Maka's control namespace for this test.
    pub fn control(&self) -> PathBuf {
        self.dir.path().join("control")
    }

    /// Where `doctor quarantine` puts its bundles by default.
    pub fn bundles(&self) -> PathBuf {
        self.root().join("wsledger-quarantine")
    }

    /// A read-write connection for setting up a scenario.
    pub fn conn(&self) -> Connection {
        let c = Connection::open(self.db()).unwrap();
        c.pragma_update(None, "foreign_keys", true).unwrap();
        c
    }

    /// `wsledger --workspace <ws> <args>`, at [`NOW`], with this test's control namespace.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_naming(&self.root(), args)
    }

    /// [`Ws::command`] run in the temporary directory, naming the workspace `ws` (a
    /// relative path), so that what it prints does not depend on where that is.
    pub fn command_relative(&self, args: &[&str]) -> Command {
        let mut c = self.command_naming(Path::new("ws"), args);
        c.current_dir(self.dir.path());
        c
    }

    fn command_naming(&self, workspace: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_wsledger"));
        c.arg("--workspace")
            .arg(workspace)
            .args(args)
            .env_remove("WSLEDGER_WORKSPACE")
            .env_remove("WSLEDGER_BACKUP_DIR")
            .env("WSLEDGER_NOW_MS", NOW)
            .env("WSLEDGER_MAKA_CONTROL_DIR", self.control())
            .env("NO_COLOR", "1");
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Every table's rows, as the quarantine bundles them.
    pub fn tables(&self) -> BTreeMap<String, Vec<Vec<Cell>>> {
        Workspace::open_read_only(&self.db())
            .unwrap()
            .dump_tables()
            .unwrap()
    }

    /// SHA-256 of the database file alone.
    pub fn db_hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(std::fs::read(self.db()).unwrap());
        hex::encode(h.finalize())
    }

    /// SHA-256 of the database file and of its `-wal` if any.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(std::fs::read(self.db()).unwrap());
        if let Ok(w) = std::fs::read(super::wal(&self.db())) {
            h.update(b"wal");
            h.update(w);
        }
        hex::encode(h.finalize())
    }

    /// The names in the workspace directory, sorted.
    pub fn files(&self) -> Vec<String> {
        super::names(&self.root())
    }

    /// The bundles in [`Ws::bundles`], sorted (none if it does not exist).
    pub fn bundle_paths(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.bundles())
            .map(|d| d.map(|e| e.unwrap().path().display().to_string()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}
