//! `wsledger doctor quarantine` and `wsledger doctor restore`, and the run of every
//! command that prints a bundle document (`doctor excise` too).

use std::path::{Path, PathBuf};

use clap::Args;

use serde_json::Value;

use super::write_args::{BundleArgs, NoBackup, QUARANTINE};
use super::{CliError, ExitStatus, GlobalArgs, Printer};
use crate::error::UserError;
use crate::notes::Notes;
use crate::quarantine::apply::Request;
use crate::quarantine::restore;
use crate::report::bundle::render;

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
pub type QuarantineArgs = BundleArgs<QUARANTINE>;

/// Put quarantined sessions (or excised events) back from their bundles, every row and
/// column as it was. Excision bundles (`kind: "excise"`) and quarantine bundles are
/// restored in separate runs; a bundle without `kind` is a quarantine bundle.
///
/// Without `--apply` it checks the bundles against the workspace and prints what it
/// would restore. With `--apply` it takes Maka's owner lock, refuses while another
/// process has the database open, backs the database up and
/// inserts every row in one transaction. It refuses, changing nothing, when a bundle's
/// schema differs from the workspace's or any of its rows collides with one in the
/// workspace.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// Bundles written by `doctor quarantine --apply` or `doctor excise --apply`
    #[arg(value_name = "BUNDLE", required = true)]
    pub bundles: Vec<PathBuf>,
    /// Write (default: dry run, nothing is written)
    #[arg(long)]
    pub apply: bool,
    #[command(flatten)]
    pub backup: NoBackup,
}

/// What `doctor quarantine` and `doctor excise` run.
pub type BundleRun = fn(&Path, &Request, &mut dyn Notes) -> Result<Value, UserError>;

/// `doctor quarantine` or `doctor excise` (`run`), as `C` is.
pub fn run_bundles<const C: usize>(
    global: &GlobalArgs,
    args: &BundleArgs<C>,
    printer: &mut Printer,
    run: BundleRun,
) -> Result<ExitStatus, CliError> {
    print_document(global, printer, |db, now, printer| {
        run(db, &args.request(now), printer)
    })
}

pub fn run_restore(
    global: &GlobalArgs,
    args: &RestoreArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    print_document(global, printer, |db, now, printer| {
        let req = restore::Request {
            bundles: args.bundles.clone(),
            write: args.backup.options(None, args.apply, now),
        };
        restore::run(db, &req, printer)
    })
}

/// Runs quarantine, excise or restore on the workspace and prints the document it
/// returns.
fn print_document(
    global: &GlobalArgs,
    printer: &mut Printer,
    run: impl FnOnce(&Path, i64, &mut Printer) -> Result<Value, CliError>,
) -> Result<ExitStatus, CliError> {
    let (format, db, now) = super::plan_command(global)?;
    let doc = run(&db, now, printer)?;
    super::output(render(printer.out(), &doc, format))?;
    Ok(ExitStatus::Success)
}
