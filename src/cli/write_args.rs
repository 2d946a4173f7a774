//! The flags of the commands that write. `--no-backup` reads the same everywhere
//! ([`NoBackup`]). `--session`, `--out` and `--apply` of `doctor excise`, `doctor
//! quarantine` and `doctor repair` are the same flags, each command wording their help
//! for itself: [`WriteArgs`] and [`BundleArgs`] take the command's row of [`HELP`].

use std::path::PathBuf;

use clap::Args;

use crate::apply::WriteOptions;
use crate::quarantine::apply::Request;

/// `doctor excise`'s row of [`HELP`].
pub const EXCISE: usize = 0;
/// `doctor quarantine`'s row of [`HELP`].
pub const QUARANTINE: usize = 1;
/// `doctor repair`'s row of [`HELP`] (it names no session).
pub const REPAIR: usize = 2;
/// `doctor rederive`'s row of [`HELP`] (it names no session).
pub const REDERIVE: usize = 3;

/// A command's help of `--session`, `--out` and `--apply`.
pub struct Help {
    pub session: &'static str,
    pub out: &'static str,
    pub apply: &'static str,
}

pub const HELP: [Help; 4] = [
    Help {
        session: "Excise only in this session (repeatable)",
        out: "Directory for the bundles [default: `wsledger-quarantine` beside the database]; \
              never inside the workspace's `sessions/`",
        apply: "Remove the events (default: dry run, nothing is written)",
    },
    Help {
        session: "Quarantine exactly this session (repeatable) instead of the damaged ones",
        out: "Directory for the bundles [default: `wsledger-quarantine` beside the database]; \
              never inside the workspace's `sessions/` (Maka v0.1.2 and v0.1.3 keep session \
              folders there, and a session's folder moves beside its bundle)",
        apply: "Move the sessions (default: dry run, nothing is written)",
    },
    Help {
        session: "",
        out: "Directory for the excision and quarantine bundles [default: \
              `wsledger-quarantine` beside the database]; never inside the workspace's \
              `sessions/`",
        apply: "Carry the plan out (default: dry run, nothing is written)",
    },
    Help {
        session: "",
        out: "Directory for the rederive bundle (what `doctor restore` takes back) \
              [default: `wsledger-quarantine` beside the database]",
        apply: "Put the missing objects back (default: dry run, nothing is written)",
    },
];

/// `--no-backup`.
#[derive(Debug, Args)]
pub struct NoBackup {
    /// With --apply: do not back the database up first
    #[arg(long)]
    pub no_backup: bool,
}

/// `--out`, `--apply` and `--no-backup`, worded as row `C` of [`HELP`] says.
#[derive(Debug, Args)]
pub struct WriteArgs<const C: usize> {
    #[arg(long, value_name = "DIR", help = HELP[C].out)]
    pub out: Option<PathBuf>,
    #[arg(long, help = HELP[C].apply)]
    pub apply: bool,
    #[command(flatten)]
    pub backup: NoBackup,
}

impl NoBackup {
    /// The options a command is run with, at `now`.
    pub fn options(&self, out: Option<PathBuf>, apply: bool, now: i64) -> WriteOptions {
        WriteOptions {
            out,
            apply,
            backup: !self.no_backup,
            now,
        }
    }
}

impl<const C: usize> WriteArgs<C> {
    /// The options the command is run with, at `now`.
    pub fn options(&self, now: i64) -> WriteOptions {
        self.backup.options(self.out.clone(), self.apply, now)
    }
}

/// `--session` (repeatable), then [`WriteArgs`]: the arguments of a command that
/// writes bundles of the sessions it finds damaged, or of those named.
#[derive(Debug, Args)]
pub struct BundleArgs<const C: usize> {
    #[arg(long = "session", value_name = "ID", help = HELP[C].session)]
    pub sessions: Vec<String>,
    #[command(flatten)]
    pub write: WriteArgs<C>,
}

impl<const C: usize> BundleArgs<C> {
    /// The request the command is run with, at `now`.
    pub fn request(&self, now: i64) -> Request {
        Request {
            sessions: self.sessions.clone(),
            write: self.write.options(now),
        }
    }
}
