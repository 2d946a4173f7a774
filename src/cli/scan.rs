//! `wsledger doctor scan`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{workspace, CliError, ExitStatus, FormatArg, GlobalArgs, Printer};
use crate::checkup::{self, Checkup, Input, Request};
use crate::findings::Severity;
use crate::report::scan::{many_json, render_checkup, render_many_summary};
use crate::report::Format;

/// `--min-severity` / `--fail-on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SeverityArg {
    Info,
    Warning,
    Error,
}

impl From<SeverityArg> for Severity {
    fn from(s: SeverityArg) -> Severity {
        match s {
            SeverityArg::Info => Severity::Info,
            SeverityArg::Warning => Severity::Warning,
            SeverityArg::Error => Severity::Error,
        }
    }
}

/// Rescan the whole tool ledger with Maka's rules, check every run's terminal state,
/// and report every finding, scoped to session and run; then the diagnosis: why each
/// stuck run is stuck, which sessions are damaged and what setting them aside costs,
/// and the ordered plan that `doctor repair` carries out.
///
/// Read-only: the database and its `-wal` are never changed. The `maka_gate` part of
/// the report covers the whole file whatever the filters.
///
/// Start-up is judged for the Maka build that wrote the file, or the one `--maka` names;
/// the table says in one line under it where the other builds disagree (`other builds:
/// …`), and a build whose desktop app deletes the file at start is warned of first.
///
/// A file written by a Maka newer than this wsledger gets one warning,
/// `schema_newer_than_known`, naming the scopes ahead; its start-up is not known, and
/// a table in a shape wsledger does not know is not read (`table_not_read`).
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Workspaces to scan (directories or database files); default: `--workspace`
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Only report findings of this session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only report findings of this run
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Hide findings below this severity (does not change the exit status)
    #[arg(long, value_enum, default_value_t = SeverityArg::Info)]
    pub min_severity: SeverityArg,
    /// Exit 1 when a finding at or above this severity remains after filters
    #[arg(long, value_enum, default_value_t = SeverityArg::Error)]
    pub fail_on: SeverityArg,
    /// Also run SQLite's full-file `PRAGMA quick_check` (as slow as the scan itself)
    #[arg(long)]
    pub integrity: bool,
    /// Compare the findings with an expectations file; exit 0 only on an exact match
    #[arg(long, value_name = "FILE", conflicts_with_all = ["baseline", "expect_beside"])]
    pub expect: Option<PathBuf>,
    /// Use `<workspace>/wsledger-expect.json` beside each workspace as its expectations
    #[arg(long, conflicts_with = "baseline")]
    pub expect_beside: bool,
    /// Write the current findings as an expectations file and exit 0
    #[arg(long, value_name = "FILE", conflicts_with_all = ["expect", "baseline", "expect_beside"])]
    pub write_expect: Option<PathBuf>,
    /// Accept the findings listed in FILE (expectations format); only new ones fail
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// List every finding in the table (by default many findings of one code show as a
    /// few and a count)
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[command(flatten)]
    pub maka: super::maka_arg::MakaArg,
}

struct Outcome {
    path: String,
    result: Result<(Checkup, bool), CliError>,
}

/// A progress bar on stderr.
struct Bar(indicatif::ProgressBar);

impl checkup::Progress for Bar {
    fn show(&self, done: u64, total: u64) {
        self.0.set_length(total);
        self.0.set_position(done);
    }

    fn finish(self) {
        self.0.finish_and_clear();
    }
}

fn status_of(found: bool) -> ExitStatus {
    if found {
        ExitStatus::Findings
    } else {
        ExitStatus::Success
    }
}

pub fn run(
    global: &GlobalArgs,
    args: &ScanArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let format = match global.format {
        None | Some(FormatArg::Table) | Some(FormatArg::Text) => Format::Table,
        Some(FormatArg::Json) => Format::Json,
        Some(FormatArg::Ndjson) => Format::Ndjson,
        Some(FormatArg::Github) => Format::Github,
    };
    // `--workspace` (repeatable) first, then paths given as arguments. A workspace that
    // only came from WSLEDGER_WORKSPACE is a default: paths on the command line win.
    let from_env = std::env::var_os("WSLEDGER_WORKSPACE")
        .is_some_and(|v| global.workspaces.len() == 1 && global.workspaces[0].as_os_str() == v);
    let mut inputs: Vec<Option<PathBuf>> = if from_env && !args.paths.is_empty() {
        Vec::new()
    } else {
        global.workspaces.iter().cloned().map(Some).collect()
    };
    inputs.extend(args.paths.iter().cloned().map(Some));
    if inputs.is_empty() {
        inputs.push(None);
    }
    let req = Request {
        session: args.session.clone(),
        run: args.run.clone(),
        min_severity: args.min_severity.into(),
        fail_on: args.fail_on.into(),
        expect: args.expect.clone(),
        expect_beside: args.expect_beside,
        write_expect: args.write_expect.clone(),
        baseline: args.baseline.clone(),
    };
    let mut opts = checkup::scan_options(inputs.len(), args.integrity, printer.progress);
    opts.maka = args.maka.choice()?;
    let multi = (printer.progress && inputs.len() > 1).then(indicatif::MultiProgress::new);
    let bar = |_: usize| -> Option<indicatif::ProgressBar> {
        if !printer.progress {
            return None;
        }
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} scanning {pos}/{len} events {wide_bar} {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        match &multi {
            Some(m) => Some(m.add(b)),
            None => {
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                Some(b)
            }
        }
    };
    let bars: Vec<Option<Bar>> = (0..inputs.len()).map(|i| bar(i).map(Bar)).collect();
    let resolved: Vec<Input> = inputs
        .iter()
        .map(|i| (i.clone(), workspace::database_path(i.as_deref())))
        .collect();
    let results = checkup::check_all(&resolved, opts, &req, bars);
    let mut outcomes = Vec::new();
    for ((input, (_, db)), (result, notes)) in inputs.iter().zip(&resolved).zip(results) {
        if let (Ok((c, _)), Ok(db)) = (&result, db) {
            let db = db.display().to_string();
            for w in crate::report::builds::desktop_warnings(&c.report, &db) {
                printer.warn(&w);
            }
        }
        for n in notes {
            printer.note(&n);
        }
        let shown = input.as_ref().map_or_else(
            || {
                workspace::default_workspace()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            },
            |p| p.display().to_string(),
        );
        outcomes.push(Outcome {
            path: shown,
            result,
        });
    }
    if outcomes.len() == 1 {
        let o = outcomes.pop().expect("one outcome");
        let (c, found) = o.result?;
        let mut opts = printer.render_opts();
        opts.verbose = args.verbose;
        render_checkup(printer.out(), &c, &o.path, format, &opts).map_err(io_err)?;
        return Ok(status_of(found));
    }
    render_many(outcomes, format, printer, args.verbose)
}

fn io_err(e: std::io::Error) -> CliError {
    CliError::new(
        format!("writing output: {e}"),
        "check that stdout is writable",
    )
}

fn render_many(
    outcomes: Vec<Outcome>,
    format: Format,
    printer: &mut Printer,
    verbose: bool,
) -> Result<ExitStatus, CliError> {
    let mut status = ExitStatus::Success;
    for o in &outcomes {
        match &o.result {
            Err(_) => status = ExitStatus::Error,
            Ok((_, true)) if status == ExitStatus::Success => status = ExitStatus::Findings,
            _ => {}
        }
    }
    let mut opts = printer.render_opts();
    opts.verbose = verbose;
    if format == Format::Json {
        let results: Vec<_> = outcomes
            .iter()
            .map(|o| {
                let r = match &o.result {
                    Ok((c, found)) => Ok((c, status_of(*found) as i32)),
                    Err(e) => Err((e.message.as_str(), e.hint.as_str())),
                };
                (o.path.as_str(), r)
            })
            .collect();
        let doc = many_json(&results);
        serde_json::to_writer_pretty(printer.out(), &doc).map_err(|e| io_err(e.into()))?;
        writeln!(printer.out()).map_err(io_err)?;
        return Ok(status);
    }
    let mut rows = Vec::new();
    for o in &outcomes {
        match &o.result {
            Ok((c, found)) => {
                render_checkup(printer.out(), c, &o.path, format, &opts).map_err(io_err)?;
                let s = &c.report.summary;
                let st = status_of(*found) as i32;
                rows.push((o.path.clone(), st, s.errors, s.warnings, String::new()));
            }
            Err(e) => {
                printer.error(&format!("{}: {}", o.path, e.message), &e.hint);
                rows.push((o.path.clone(), 2, 0, 0, e.message.clone()));
            }
        }
    }
    if format == Format::Table {
        render_many_summary(printer.out(), rows).map_err(io_err)?;
    }
    Ok(status)
}
