//! Rendering of computed values. No computation of findings here, no I/O beyond the
//! writer it is handed.

pub mod builds;
pub mod bundle;
pub mod diagnosis;
pub mod excise;
pub mod finalize;
pub mod fold;
pub mod info;
pub mod quarantine;
pub mod rederive;
pub mod repair;
pub mod replay;
pub use crate::sanitize;
pub mod scan;

/// Output format of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Ndjson,
    Github,
    Text,
}

/// How to render for people.
#[derive(Clone, Copy, Debug)]
pub struct RenderOpts {
    pub color: bool,
    pub width: u16,
    /// List every finding (`doctor scan --verbose`); otherwise a code with many
    /// findings shows a few and a count (`report::fold`; JSON always lists them all).
    pub verbose: bool,
}
