//! Command-line interface: argument definitions (the help text is the documentation)
//! and the dispatch from commands to the core.

mod completions;
mod excise;
pub mod explain;
pub mod finalize;
mod info;
mod maka_arg;
mod printer;
mod quarantine;
mod rederive;
mod repair;
mod replay;
mod scan;
mod workspace;
mod write_args;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use printer::Printer;

/// Exit status of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// The command did its job and found nothing at or above the threshold.
    Success = 0,
    /// The command did its job and found something (findings, divergences, a plan under `--check`).
    Findings = 1,
    /// The command could not do its job.
    Error = 2,
}

/// An error the user can act on: one `error:` line and one `hint:` line.
pub use crate::error::UserError as CliError;

const AFTER_HELP: &str = "\
Exit status:
  0  the command did its job and found nothing at or above the threshold
  1  findings (scan), divergences (replay), or a non-empty plan under --check
  2  the tool could not do its job (bad path, not a Maka workspace, locked, ...)

Environment:
  WSLEDGER_WORKSPACE  default for --workspace
  WSLEDGER_MAKA       default for --maka (doctor scan, doctor repair, info)
  NO_COLOR            disables colour when set and not empty";

/// Doctor and replay tool for the workspace database of the Apache Maka agent runtime.
///
/// wsledger reads a Maka workspace database (`runtime.sqlite`) and reports what is wrong
/// with its runtime-event ledger, with Maka's own rules. It never changes the database
/// unless a repair command is given `--apply`, and never a file written by a Maka newer
/// than itself: there every `--apply` refuses, and whether Maka starts is not known.
#[derive(Debug, Parser)]
#[command(name = "wsledger", version, after_long_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Workspace root holding `runtime.sqlite`, or the database file itself
    /// [default: the platform's default Maka workspace]. `doctor scan` takes it more
    /// than once (the workspaces are scanned in parallel); other commands take one.
    #[arg(
        long = "workspace",
        short = 'w',
        global = true,
        env = "WSLEDGER_WORKSPACE",
        value_name = "PATH"
    )]
    pub workspaces: Vec<PathBuf>,
    /// Output format (`table` for doctor commands and `text` for replay by default)
    #[arg(long, global = true, value_enum)]
    pub format: Option<FormatArg>,
    /// When to use colour on stdout
    #[arg(long, global = true, value_enum, default_value_t = ColorArg::Auto)]
    pub color: ColorArg,
    /// Print nothing on stderr but errors
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    /// Never show a progress bar
    #[arg(long, global = true)]
    pub no_progress: bool,
}

impl GlobalArgs {
    /// The one workspace of a single-workspace command (`None`: the default one).
    pub fn workspace(&self) -> Result<Option<&std::path::Path>, CliError> {
        match self.workspaces.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one.as_path())),
            _ => Err(CliError::new(
                "this command works on one workspace, but `--workspace` was given more than once",
                "name one workspace (only `doctor scan` takes several)",
            )),
        }
    }
}

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// A table for people (doctor commands)
    Table,
    /// A readable transcript (replay)
    Text,
    /// One JSON document
    Json,
    /// One JSON object per line, summary last
    Ndjson,
    /// GitHub Actions annotations, one per finding (doctor scan)
    Github,
}

/// `--color`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check and repair a workspace's ledger
    #[command(subcommand)]
    Doctor(DoctorCommand),
    /// Explain a code (finding, replay, cause, producer): what it means, what to do
    Explain(explain::ExplainArgs),
    /// Print a shell completion script
    Completions(completions::CompletionsArgs),
    /// Show the workspace: schema, counts, WAL, Maka's owner lock, who else has it open,
    /// whether Maka would open it, and Maka's gate
    Info(info::InfoArgs),
    /// Replay a session from its event log and show where the projections diverge
    Replay(replay::ReplayArgs),
}

#[derive(Debug, Subcommand)]
pub enum DoctorCommand {
    /// Scan the whole ledger with Maka's rules, report every finding, and end with the
    /// diagnosis: why runs are stuck, what is damaged, and the ordered plan
    Scan(scan::ScanArgs),
    /// Finish runs stuck `running` by writing the terminal event Maka would write
    FinalizeRuns(finalize::FinalizeArgs),
    /// Set aside the sessions holding ledger damage, as Maka's conversation deletion
    /// removes them, each kept in a bundle
    Quarantine(quarantine::QuarantineArgs),
    /// Remove only the damaged events (and what hangs on them) from the ledger,
    /// keeping every conversation, each session's removed rows kept in a bundle
    Excise(excise::ExciseArgs),
    /// Put back exactly what Maka derives when it is missing (an index, a trigger, the
    /// tool projections rebuilt from the runtime events, the registry rows), each
    /// with the text the release that wrote the file writes
    Rederive(rederive::RederiveArgs),
    /// Put quarantined sessions, excised events, or a rederive's objects back from
    /// their bundles
    Restore(quarantine::RestoreArgs),
    /// Make the workspace work again: the scan's plan (put back what Maka derives,
    /// excise the damaged events, quarantine the sessions excision cannot heal, then
    /// finalize what is still stuck) as one command
    Repair(repair::RepairArgs),
}

/// Runs a parsed command line.
pub fn run(cli: Cli, printer: &mut Printer) -> Result<ExitStatus, CliError> {
    match cli.command {
        Command::Doctor(DoctorCommand::Scan(args)) => scan::run(&cli.global, &args, printer),
        Command::Doctor(DoctorCommand::FinalizeRuns(args)) => {
            finalize::run(&cli.global, &args, printer)
        }
        Command::Doctor(DoctorCommand::Quarantine(args)) => {
            quarantine::run_bundles(&cli.global, &args, printer, crate::quarantine::apply::run)
        }
        Command::Doctor(DoctorCommand::Excise(args)) => {
            quarantine::run_bundles(&cli.global, &args, printer, crate::excise::apply::run)
        }
        Command::Doctor(DoctorCommand::Rederive(args)) => {
            rederive::run(&cli.global, &args, printer)
        }
        Command::Doctor(DoctorCommand::Restore(args)) => {
            quarantine::run_restore(&cli.global, &args, printer)
        }
        Command::Doctor(DoctorCommand::Repair(args)) => repair::run(&cli.global, &args, printer),
        Command::Explain(args) => explain::run(&args, printer),
        Command::Completions(args) => completions::run(&args, printer),
        Command::Info(args) => info::run(&cli.global, &args, printer),
        Command::Replay(args) => replay::run(&cli.global, &args, printer),
    }
}

/// The clap command (for man pages, completions and tests).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// `--format` of the commands that print a plan (finalize-runs, quarantine, restore,
/// repair): table, json or ndjson.
pub(crate) fn plan_format(global: &GlobalArgs) -> Result<crate::report::Format, CliError> {
    use crate::report::Format;
    match global.format {
        None | Some(FormatArg::Table) | Some(FormatArg::Text) => Ok(Format::Table),
        Some(FormatArg::Json) => Ok(Format::Json),
        Some(FormatArg::Ndjson) => Ok(Format::Ndjson),
        Some(FormatArg::Github) => Err(CliError::new(
            "`--format github` is for `doctor scan`",
            "use --format table, json or ndjson",
        )),
    }
}

/// Pins "now" (ms since the epoch) for `--older-than` and the backup name (tests).
pub const NOW_ENV: &str = "WSLEDGER_NOW_MS";

/// "Now" in milliseconds since the epoch (pinned by `WSLEDGER_NOW_MS` in tests).
pub(crate) fn now_ms() -> Result<i64, CliError> {
    if let Some(v) = std::env::var(NOW_ENV).ok().filter(|v| !v.trim().is_empty()) {
        return v.trim().parse().map_err(|_| {
            CliError::new(
                format!("{NOW_ENV}=`{v}` is not a number of milliseconds"),
                format!("unset {NOW_ENV}"),
            )
        });
    }
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64))
}

/// What every command that prints a plan starts from: its `--format`, the database,
/// and "now" (in that order: the first that fails is the error).
pub(crate) fn plan_command(
    global: &GlobalArgs,
) -> Result<(crate::report::Format, PathBuf, i64), CliError> {
    let format = plan_format(global)?;
    let db = workspace::database_path(global.workspace()?)?;
    Ok((format, db, now_ms()?))
}

/// The end of a command's output: a closed pipe (`| head`) is not an error.
pub(crate) fn output(res: std::io::Result<()>) -> Result<(), CliError> {
    match res {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(
            format!("writing output: {e}"),
            "check that stdout is writable",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_definition_is_valid() {
        super::command().debug_assert();
    }
}
