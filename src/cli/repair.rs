//! `wsledger doctor repair`: the scan's plan as one command.

use super::write_args::{WriteArgs, REPAIR};
use super::{CliError, ExitStatus, GlobalArgs, Printer};
use crate::report::repair::render_repair;

/// Make the workspace work again: the plan `doctor scan` ends with, as one command.
///
/// Without `--apply` it prints the plan (why each run is stuck, which sessions are
/// damaged and what excising their damaged events or setting them aside costs, each
/// step and the state afterwards) and changes nothing.
///
/// With `--apply` it takes Maka's owner lock once, backs the database up once,
/// removes the damaged events exactly as `doctor excise --apply` does wherever that
/// heals the session (the conversation stays), sets the other damaged sessions aside
/// exactly as `doctor quarantine --apply` does (each in a bundle that `doctor
/// restore` puts back), then finalizes what is still stuck as `doctor finalize-runs
/// --apply` does, then rescans and reports what it removed from which conversation,
/// the gate, start-up and stuck runs. It refuses what those commands refuse, with the
/// same exit status. Run again, it finds nothing to do.
#[derive(Debug, clap::Args)]
pub struct RepairArgs {
    #[command(flatten)]
    pub write: WriteArgs<REPAIR>,
    #[command(flatten)]
    pub maka: super::maka_arg::MakaArg,
}

pub fn run(
    global: &GlobalArgs,
    args: &RepairArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let (format, db, now) = super::plan_command(global)?;
    let maka = args.maka.choice()?;
    let shown = global
        .workspace()?
        .map_or_else(|| db.display().to_string(), |p| p.display().to_string());
    let repaired = crate::repair::run_as(&db, &shown, &args.write.options(now), maka, printer)?;
    super::output(render_repair(printer.out(), &repaired, format))?;
    Ok(ExitStatus::Success)
}
