//! `wsledger doctor quarantine` and `wsledger doctor restore`.

use std::path::{Path, PathBuf};

use clap::Args;

use super::{CliError, ExitStatus, GlobalArgs, Printer};
use crate::quarantine::{apply, restore};
use crate::report::excise::render as render_excise;
use crate::report::quarantine::render_quarantine;

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
#[derive(Debug, Args)]
pub struct QuarantineArgs {
    /// Quarantine exactly this session (repeatable) instead of the damaged ones
    #[arg(long = "session", value_name = "ID")]
    pub sessions: Vec<String>,
    /// Directory for the bundles [default: `wsledger-quarantine` beside the database];
    /// never inside the workspace's `sessions/` (Maka v0.1.2 and v0.1.3 keep session
    /// folders there, and a session's folder moves beside its bundle)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Move the sessions (default: dry run, nothing is written)
    #[arg(long)]
    pub apply: bool,
    /// With --apply: do not back the database up first
    #[arg(long)]
    pub no_backup: bool,
}

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
    /// With --apply: do not back the database up first
    #[arg(long)]
    pub no_backup: bool,
}

pub fn run_quarantine(
    global: &GlobalArgs,
    args: &QuarantineArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    print_document(global, printer, |db, now, printer| {
        let req = apply::Request {
            sessions: args.sessions.clone(),
            out: args.out.clone(),
            apply: args.apply,
            backup: !args.no_backup,
            now,
        };
        apply::run(db, &req, printer)
    })
}

pub fn run_restore(
    global: &GlobalArgs,
    args: &RestoreArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    print_document(global, printer, |db, now, printer| {
        let bundles = args.bundles.clone();
        let (apply, backup) = (args.apply, !args.no_backup);
        restore::run(
            db,
            &restore::Request {
                bundles,
                apply,
                backup,
                now,
            },
            printer,
        )
    })
}

/// Runs quarantine or restore on the workspace and prints the document it returns.
fn print_document(
    global: &GlobalArgs,
    printer: &mut Printer,
    run: impl FnOnce(&Path, i64, &mut Printer) -> Result<serde_json::Value, CliError>,
) -> Result<ExitStatus, CliError> {
    let (format, db, now) = super::plan_command(global)?;
    let doc = run(&db, now, printer)?;
    // The restore of excision bundles prints as `doctor excise` does.
    let rendered = if doc["kind"] == "excise" {
        render_excise(printer.out(), &doc, format)
    } else {
        render_quarantine(printer.out(), &doc, format)
    };
    super::output(rendered)?;
    Ok(ExitStatus::Success)
}
