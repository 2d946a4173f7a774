//! The one place that writes: data on stdout, everything else on stderr.

use std::io::{self, IsTerminal, Write};

use super::{ColorArg, GlobalArgs};
use crate::report::sanitize::sanitize;
use crate::report::RenderOpts;

/// Where output goes, and how it looks.
pub struct Printer {
    out: Box<dyn Write>,
    err: Box<dyn Write>,
    pub quiet: bool,
    pub color: bool,
    pub progress: bool,
    pub width: u16,
}

impl Printer {
    /// The process's stdout and stderr, with colour and progress decided from the
    /// terminal, `--color`, `NO_COLOR`, `-q` and `--no-progress`.
    pub fn stdio(global: &GlobalArgs) -> Printer {
        let stdout_tty = io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match global.color {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => stdout_tty && !no_color,
        };
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse().ok())
            .or_else(|| comfy_table::Table::new().width())
            .unwrap_or(120);
        Printer {
            out: Box::new(io::stdout().lock()),
            err: Box::new(io::stderr()),
            quiet: global.quiet,
            color,
            progress: !global.quiet && !global.no_progress && io::stderr().is_terminal(),
            width,
        }
    }

    /// A printer writing into the given sinks (tests).
    pub fn with_writers(out: Box<dyn Write>, err: Box<dyn Write>) -> Printer {
        Printer {
            out,
            err,
            quiet: false,
            color: false,
            progress: false,
            width: 120,
        }
    }

    /// The data stream.
    pub fn out(&mut self) -> &mut dyn Write {
        &mut *self.out
    }

    /// A note on stderr (silenced by `-q`). Like everything on stderr it is
    /// sanitized: paths and database text may hold escape sequences or newlines.
    pub fn note(&mut self, msg: &str) {
        // Keep stdout and stderr in order on a shared terminal.
        let _ = self.out.flush();
        if !self.quiet {
            let _ = writeln!(self.err, "{}", sanitize(msg));
        }
    }

    /// A warning on stderr (silenced by `-q`).
    pub fn warn(&mut self, msg: &str) {
        let _ = self.out.flush();
        if !self.quiet {
            let _ = writeln!(self.err, "warning: {}", sanitize(msg));
        }
    }

    /// An error and its hint on stderr (never silenced): one line each.
    pub fn error(&mut self, msg: &str, hint: &str) {
        let _ = self.out.flush();
        let _ = writeln!(self.err, "error: {}", sanitize(msg));
        if !hint.is_empty() {
            let _ = writeln!(self.err, "hint: {}", sanitize(hint));
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()?;
        self.err.flush()
    }

    pub fn render_opts(&self) -> RenderOpts {
        RenderOpts {
            color: self.color,
            width: self.width,
            verbose: false,
        }
    }
}

impl crate::notes::Notes for Printer {
    fn note(&mut self, msg: &str) {
        Printer::note(self, msg)
    }

    fn warn(&mut self, msg: &str) {
        Printer::warn(self, msg)
    }
}
