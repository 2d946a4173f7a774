//! `wsledger completions`.

use clap::Args;
use clap_complete::Shell;

use super::{CliError, ExitStatus, Printer};

/// Print a shell completion script (bash, zsh, fish, powershell, elvish)
///
/// Example: `wsledger completions bash > /etc/bash_completion.d/wsledger`
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to generate completions for
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: &CompletionsArgs, printer: &mut Printer) -> Result<ExitStatus, CliError> {
    let mut cmd = super::command();
    clap_complete::generate(args.shell, &mut cmd, "wsledger", printer.out());
    Ok(ExitStatus::Success)
}
