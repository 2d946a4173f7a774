//! `wsledger doctor scan`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde_json::json;

use super::{workspace, CliError, ExitStatus, FormatArg, GlobalArgs, Printer};
use crate::diagnosis::align_hints;
use crate::doctor::{diagnose_workspace, scan_workspace, ScanOptions, Threads};
use crate::expect::{compare, ExpectFile, ExpectationsReport};
use crate::findings::Severity;
use crate::report::scan::{render_scan, scan_json};
use crate::report::Format;
use crate::scan::ScanReport;

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
}

struct Outcome {
    path: String,
    result: Result<(ScanReport, ExitStatus), CliError>,
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
    let opts = ScanOptions {
        integrity: args.integrity,
        all_runs: false,
        no_total: !printer.progress,
        // Several workspaces are scanned in parallel, one per core (results keep the
        // argument order); a scan keeps two threads busy, so when the workspaces
        // already take the cores each is scanned on one.
        threads: if inputs.len() > 1 && inputs.len() * 2 > cores() {
            Threads::One
        } else {
            Threads::Auto
        },
        rules: None,
    };
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
    let bars: Vec<Option<indicatif::ProgressBar>> = (0..inputs.len()).map(bar).collect();
    let results = scan_all(&inputs, opts, args, bars);
    let mut outcomes = Vec::new();
    for (input, (result, notes)) in inputs.iter().zip(results) {
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
        let (report, status) = o.result?;
        let mut opts = printer.render_opts();
        opts.verbose = args.verbose;
        render_scan(printer.out(), &report, &o.path, format, &opts).map_err(io_err)?;
        return Ok(status);
    }
    render_many(outcomes, format, printer, args.verbose)
}

type ScanResult = (Result<(ScanReport, ExitStatus), CliError>, Vec<String>);

/// Scans every input, on up to one thread per core; results in input order, each with
/// the notes to print.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn scan_all(
    inputs: &[Option<PathBuf>],
    opts: ScanOptions,
    args: &ScanArgs,
    bars: Vec<Option<indicatif::ProgressBar>>,
) -> Vec<ScanResult> {
    let run = |i: usize, bar: Option<indicatif::ProgressBar>| -> ScanResult {
        let mut notes = Vec::new();
        let r = scan_one(inputs[i].as_deref(), opts, args, bar, &mut notes);
        (r, notes)
    };
    let threads = cores().min(inputs.len());
    if threads <= 1 {
        return bars
            .into_iter()
            .enumerate()
            .map(|(i, b)| run(i, b))
            .collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let bars: Vec<std::sync::Mutex<Option<indicatif::ProgressBar>>> =
        bars.into_iter().map(std::sync::Mutex::new).collect();
    let slots: Vec<std::sync::Mutex<Option<ScanResult>>> =
        inputs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= inputs.len() {
                    break;
                }
                let bar = bars[i].lock().map(|mut b| b.take()).unwrap_or(None);
                let r = run(i, bar);
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner().ok().flatten().unwrap_or_else(|| {
                (
                    Err(CliError::new(
                        "the scan of this workspace stopped unexpectedly",
                        "run it again on its own",
                    )),
                    Vec::new(),
                )
            })
        })
        .collect()
}

fn scan_one(
    input: Option<&std::path::Path>,
    opts: ScanOptions,
    args: &ScanArgs,
    bar: Option<indicatif::ProgressBar>,
    notes: &mut Vec<String>,
) -> Result<(ScanReport, ExitStatus), CliError> {
    let db = workspace::database_path(input)?;
    let mut progress = |done: u64, total: u64| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    };
    let shown = input.map_or_else(|| db.display().to_string(), |p| p.display().to_string());
    // The scan and the diagnosis's reads at one snapshot.
    let result = crate::db::Workspace::read(&db, |ws| {
        let mut report = scan_workspace(ws, opts, &mut progress)?;
        // The diagnosis covers the whole file, as the gate does, whatever the filters.
        let (d, finalize) = diagnose_workspace(ws, &report, &shown)?;
        align_hints(&mut report.findings, &d, &finalize);
        report.diagnosis = Some(d);
        Ok(report)
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut report = result?;
    filter(&mut report, args);
    let fail_on: Severity = args.fail_on.into();
    let mut status = if report.findings.iter().any(|f| f.severity >= fail_on) {
        ExitStatus::Findings
    } else {
        ExitStatus::Success
    };
    if let Some(path) = &args.write_expect {
        let text = ExpectFile::from_findings(&report.findings).to_text();
        std::fs::write(path, text).map_err(|e| {
            CliError::new(
                format!("cannot write expectations file `{}`: {e}", path.display()),
                "check that the directory exists and is writable",
            )
        })?;
        notes.push(format!(
            "wrote {} expected finding(s) to {}",
            report.findings.len(),
            path.display()
        ));
        status = ExitStatus::Success;
    }
    let source = match (&args.expect, args.expect_beside, &args.baseline) {
        (Some(f), _, _) => Some((f.clone(), "expect")),
        (None, true, _) => Some((beside(input, &db), "expect")),
        (None, false, Some(f)) => Some((f.clone(), "baseline")),
        _ => None,
    };
    if let Some((file, mode)) = source {
        let text = std::fs::read_to_string(&file).map_err(|e| {
            CliError::new(
                format!("cannot read expectations file `{}`: {e}", file.display()),
                "create it with `wsledger doctor scan --write-expect FILE`",
            )
        })?;
        let expected = ExpectFile::parse(&text).map_err(|e| {
            CliError::new(
                format!(
                    "`{}` is not a wsledger expectations file: {e}",
                    file.display()
                ),
                "regenerate it with `wsledger doctor scan --write-expect FILE`",
            )
        })?;
        let cmp = compare(&report.findings, &expected.findings);
        // With expectations the comparison alone decides the status.
        let matched = if mode == "baseline" {
            cmp.new.is_empty()
        } else {
            cmp.matches()
        };
        status = if matched {
            ExitStatus::Success
        } else {
            ExitStatus::Findings
        };
        report.expectations = Some(ExpectationsReport {
            file: file.display().to_string(),
            mode,
            matched,
            missing: if mode == "baseline" {
                Vec::new()
            } else {
                cmp.missing
            },
            new: cmp.new,
        });
    }
    let min: Severity = args.min_severity.into();
    report.findings.retain(|f| f.severity >= min);
    report.recount();
    Ok((report, status))
}

/// `<workspace>/wsledger-expect.json`: beside the database when a file was named.
fn beside(input: Option<&std::path::Path>, db: &std::path::Path) -> PathBuf {
    let dir = match input {
        Some(p) if p.is_dir() => p.to_path_buf(),
        _ => db
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default(),
    };
    dir.join("wsledger-expect.json")
}

/// Keeps the findings of `--session` / `--run` (the gate stays workspace-wide).
fn filter(report: &mut ScanReport, args: &ScanArgs) {
    if let Some(s) = &args.session {
        report
            .findings
            .retain(|f| f.session_id.as_deref() == Some(s.as_str()));
        report.supersession.retain(|g| g.session_id == *s);
    }
    if let Some(r) = &args.run {
        report
            .findings
            .retain(|f| f.run_id.as_deref() == Some(r.as_str()));
        report.supersession.retain(|g| g.run_id == *r);
    }
    report.recount();
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
            Ok((_, ExitStatus::Findings)) if status == ExitStatus::Success => {
                status = ExitStatus::Findings
            }
            _ => {}
        }
    }
    let mut opts = printer.render_opts();
    opts.verbose = verbose;
    match format {
        Format::Json => {
            let results: Vec<_> = outcomes
                .iter()
                .map(|o| match &o.result {
                    Ok((report, st)) => {
                        let mut doc = scan_json(report);
                        if let serde_json::Value::Object(m) = &mut doc {
                            m.insert("path".into(), json!(o.path));
                            m.insert("status".into(), json!(*st as i32));
                            m.insert("error".into(), serde_json::Value::Null);
                        }
                        doc
                    }
                    Err(e) => json!({"path": o.path, "status": 2, "error": {"message": e.message, "hint": e.hint}}),
                })
                .collect();
            let doc = json!({"schema_version": 1, "results": results});
            serde_json::to_writer_pretty(printer.out(), &doc).map_err(|e| io_err(e.into()))?;
            writeln!(printer.out()).map_err(io_err)?;
        }
        _ => {
            let mut rows = Vec::new();
            for o in &outcomes {
                match &o.result {
                    Ok((report, st)) => {
                        render_scan(printer.out(), report, &o.path, format, &opts)
                            .map_err(io_err)?;
                        rows.push((
                            o.path.clone(),
                            *st as i32,
                            report.summary.errors,
                            report.summary.warnings,
                            String::new(),
                        ));
                    }
                    Err(e) => {
                        printer.error(&format!("{}: {}", o.path, e.message), &e.hint);
                        rows.push((o.path.clone(), 2, 0, 0, e.message.clone()));
                    }
                }
            }
            if format == Format::Table {
                let mut t = comfy_table::Table::new();
                t.load_style(comfy_table::presets::UTF8_FULL_CONDENSED)
                    .set_header(vec!["workspace", "status", "errors", "warnings", "error"]);
                t.force_no_tty();
                for (p, st, e, w, msg) in rows {
                    t.add_row(vec![
                        crate::report::sanitize::sanitize(&p),
                        st.to_string(),
                        e.to_string(),
                        w.to_string(),
                        crate::report::sanitize::sanitize(&msg),
                    ]);
                }
                writeln!(printer.out(), "{t}").map_err(io_err)?;
            }
        }
    }
    Ok(status)
}
