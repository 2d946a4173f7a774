//! `wsledger explain`.

use clap::Args;

use super::{CliError, ExitStatus, Printer};
use crate::findings::{code_info, explain_text, CODES};

/// Explain a finding code: what it means, why it matters to Maka, how it usually
/// happens and what to do.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The finding code, e.g. `orphan_response`
    #[arg(value_name = "CODE", required_unless_present = "list")]
    pub code: Option<String>,
    /// List every code with its severity and one-line meaning
    #[arg(long)]
    pub list: bool,
}

pub fn run(args: &ExplainArgs, printer: &mut Printer) -> Result<ExitStatus, CliError> {
    let io = |e: std::io::Error| CliError::new(format!("writing output: {e}"), "");
    if args.list {
        for c in CODES {
            writeln!(
                printer.out(),
                "{:<36} {:<8} {}",
                c.code,
                c.severity.as_str(),
                c.title
            )
            .map_err(io)?;
        }
        return Ok(ExitStatus::Success);
    }
    let code = args.code.as_deref().unwrap_or_default();
    match code_info(code) {
        Some(info) => {
            write!(printer.out(), "{}", explain_text(info)).map_err(io)?;
            Ok(ExitStatus::Success)
        }
        None => Err(CliError::new(
            format!("unknown finding code `{code}`"),
            "run `wsledger explain --list` to see every code",
        )),
    }
}
