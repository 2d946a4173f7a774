//! `wsledger doctor rederive`: put back exactly what Maka derives.

use super::write_args::{WriteArgs, REDERIVE};
use super::{CliError, ExitStatus, GlobalArgs, Printer};
use crate::report::rederive::render;

/// Put back exactly what Maka derives, when it is missing: the indexes and triggers
/// of the release that wrote the file, with the SQL text that release writes; the tool
/// projections (`tool_operations`, `tool_journal_events`), created as that release
/// creates them and filled from the runtime events as its own rebuild fills them; and
/// the scope registry's rows of that release. Maka (v0.1.11 and later) refuses to start
/// while one is missing; nothing they hold is lost, since Maka derives all of it.
///
/// Only where it is exact: the file is a release's schema less such objects only, the
/// file tells which text that release wrote, the release then opens the file as it
/// is, and (for the projections) the ledger holds no damage Maka's rebuild stops on
/// (`doctor repair` excises it first). A missing table of primary data (events,
/// sessions, messages, run headers) is never made up: the dry run says why, and that a
/// backup is the way back.
///
/// Without `--apply` it prints what is missing and what would be put back. With
/// `--apply` it takes Maka's owner lock, refuses while another process has the
/// database open, backs the database up, writes and reads back a bundle (`kind:
/// "rederive"`, which `doctor restore` takes back), puts everything back in one
/// transaction and rescans: the start-up line says whether Maka now opens the file.
pub type RederiveArgs = WriteArgs<REDERIVE>;

pub fn run(
    global: &GlobalArgs,
    args: &RederiveArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let (format, db, now) = super::plan_command(global)?;
    let doc = crate::rederive::apply::run(&db, &args.options(now), printer)?;
    super::output(render(printer.out(), &doc, format))?;
    Ok(ExitStatus::Success)
}
