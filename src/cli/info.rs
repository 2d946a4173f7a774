//! `wsledger info`.

use clap::Args;

use super::{workspace, CliError, ExitStatus, FormatArg, GlobalArgs, Printer};
use crate::info::workspace_info_as;

/// Show the workspace: database path, schema versions, counts, WAL size, whether
/// Maka's owner lock is held, whether another process has the database open, whether
/// the release that wrote it (or the build `--maka` names) would open it (`doctor scan`'s
/// start-up verdict), and
/// Maka's tool-ledger gate state
///
/// Read-only; the locks are probed, never taken, and nothing is created. For a file of a
/// Maka newer than this wsledger the start-up row says `not known`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub maka: super::maka_arg::MakaArg,
}

pub fn run(
    global: &GlobalArgs,
    args: &InfoArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let maka = args.maka.choice()?;
    let db = workspace::database_path(global.workspace()?)?;
    let info = workspace_info_as(&db, maka, &mut |_, _| {})?;
    for w in crate::startup::desktop_warnings(
        info.startup.as_ref(),
        info.compatibility.as_deref(),
        &info.database,
    ) {
        printer.warn(&w);
    }
    let io = |e: std::io::Error| {
        CliError::new(
            format!("writing output: {e}"),
            "check that stdout is writable",
        )
    };
    match global.format {
        Some(FormatArg::Json | FormatArg::Ndjson) => {
            let text = serde_json::to_string_pretty(&info).map_err(|e| io(e.into()))?;
            writeln!(printer.out(), "{text}").map_err(io)?;
        }
        Some(FormatArg::Github) => {
            return Err(CliError::new(
                "`--format github` is for `doctor scan`",
                "use table or json",
            ));
        }
        _ => {
            crate::report::info::render_info_table(printer.out(), &info).map_err(io)?;
        }
    }
    Ok(ExitStatus::Success)
}
