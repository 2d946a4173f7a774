//! `--maka BUILD` (and `WSLEDGER_MAKA`): the Maka build whose start-up `doctor scan`,
//! `doctor repair` and `info` speak for, declared once.

use clap::Args;

use super::CliError;
use crate::startup::builds::{self, Maka};

/// `--maka`.
#[derive(Debug, Args)]
pub struct MakaArg {
    /// Judge start-up for this Maka build instead of the one that wrote the file: a
    /// release (v0.1.0 … v0.1.11), `main`, `cef8c44d8` (a 0.1.5 build, judged by v0.1.5's
    /// rules), or `all` for one row per catalogued build
    #[arg(long, env = "WSLEDGER_MAKA", value_name = "BUILD")]
    pub maka: Option<String>,
}

impl MakaArg {
    /// The build chosen (`None`: the writer's), or an error naming the value.
    pub fn choice(&self) -> Result<Option<Maka>, CliError> {
        let Some(v) = self.maka.as_deref() else {
            return Ok(None);
        };
        builds::parse(v).map(Some).ok_or_else(|| {
            CliError::new(
                format!("--maka `{v}` is not a Maka build wsledger knows"),
                format!(
                    "use one of {}, or `all` (from --maka or WSLEDGER_MAKA)",
                    builds::names().join(", ")
                ),
            )
        })
    }
}
