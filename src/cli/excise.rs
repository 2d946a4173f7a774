//! `wsledger doctor excise`.

use std::path::PathBuf;

use clap::Args;

use super::{CliError, ExitStatus, GlobalArgs, Printer};
use crate::excise::apply::{self as excise, Request};
use crate::report::excise::render;

/// Remove exactly the damaged facts from the ledger, keeping the conversation: each
/// event a scanner issue names (never the first, valid member of a duplicate pair)
/// and each undecodable `runtime_events` row, with what Maka's foreign keys cascade
/// from them (the session ordinal row) and the tool projection rows only they imply.
///
/// Without `--apply` it prints the plan: the events of each damaged session, every
/// row that would move, what it costs, and what Maka's gate and start-up would do
/// afterwards, judged by scanning a private copy of the file with the excision
/// applied. A session where excision would not heal the file, or would leave the
/// tool projections differing from Maka's rebuild, is left out (quarantine is still
/// needed there).
///
/// With `--apply` it takes Maka's owner lock, refuses while another process has the
/// database open, backs the database up, writes and checks a bundle per session
/// (`kind: "excise"`, which `doctor restore` puts back and `replay --bundle` shows),
/// deletes in one transaction and rescans. Session metadata, transcripts and session
/// files are never touched.
#[derive(Debug, Args)]
pub struct ExciseArgs {
    /// Excise only in this session (repeatable)
    #[arg(long = "session", value_name = "ID")]
    pub sessions: Vec<String>,
    /// Directory for the bundles [default: `wsledger-quarantine` beside the database];
    /// never inside the workspace's `sessions/`
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Remove the events (default: dry run, nothing is written)
    #[arg(long)]
    pub apply: bool,
    /// With --apply: do not back the database up first
    #[arg(long)]
    pub no_backup: bool,
}

pub fn run(
    global: &GlobalArgs,
    args: &ExciseArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let (format, db, now) = super::plan_command(global)?;
    let req = Request {
        sessions: args.sessions.clone(),
        out: args.out.clone(),
        apply: args.apply,
        backup: !args.no_backup,
        now,
    };
    let doc = excise::run(&db, &req, printer)?;
    super::output(render(printer.out(), &doc, format))?;
    Ok(ExitStatus::Success)
}
