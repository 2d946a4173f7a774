//! `doctor scan` as a whole, over one workspace or several: the scan, the gaps an
//! excision explains, its diagnosis (composed here: the scan knows neither), the
//! `--session`/`--run`
//! filters, and the expectations (`--expect`, `--baseline`, `--write-expect`).

use std::path::PathBuf;

use crate::diagnosis::{align_hints, diagnose_workspace, Diagnosis};
use crate::error::UserError;
use crate::expect::{compare, ExpectFile, ExpectationsReport};
use crate::findings::Severity;
use crate::scan::{scan_workspace, ScanOptions, ScanReport, Threads};

/// One workspace's scan with what `doctor scan` adds to it.
#[derive(Clone, Debug)]
pub struct Checkup {
    pub report: ScanReport,
    /// Why each stuck run is stuck, what is damaged, and the ordered remedy.
    pub diagnosis: Option<Diagnosis>,
    /// Set by `--expect`, `--expect-beside` or `--baseline`.
    pub expectations: Option<ExpectationsReport>,
}

/// What `doctor scan` is asked to do besides scanning.
#[derive(Clone, Debug)]
pub struct Request {
    pub session: Option<String>,
    pub run: Option<String>,
    /// Findings below this are not reported (the status is decided before).
    pub min_severity: Severity,
    /// A finding at or above this is a finding for the exit status.
    pub fail_on: Severity,
    pub expect: Option<PathBuf>,
    pub expect_beside: bool,
    pub write_expect: Option<PathBuf>,
    pub baseline: Option<PathBuf>,
}

/// A progress display of one workspace's scan.
pub trait Progress: Send {
    /// `done` of `total` rows read.
    fn show(&self, done: u64, total: u64);
    /// The scan's reading is over.
    fn finish(self);
}

/// A workspace as given (`None`: the default one) and its database, or why there is
/// none.
pub type Input = (Option<PathBuf>, Result<PathBuf, UserError>);

/// One workspace's result (the checkup, and whether it has findings for the exit
/// status), with the notes to print.
pub type CheckResult = (Result<(Checkup, bool), UserError>, Vec<String>);

/// The machine's cores.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The scan's options for `workspaces` workspaces, with `--integrity`, and with a
/// progress bar (`shown`) or without.
pub fn scan_options(workspaces: usize, integrity: bool, shown: bool) -> ScanOptions {
    ScanOptions {
        integrity,
        all_runs: false,
        no_total: !shown,
        // Several workspaces are scanned in parallel, one per core (results keep the
        // argument order); a scan keeps two threads busy, so when the workspaces
        // already take the cores each is scanned on one.
        threads: if workspaces > 1 && workspaces * 2 > cores() {
            Threads::One
        } else {
            Threads::Auto
        },
        rules: None,
        maka: None,
    }
}

/// Scans every input, on up to one thread per core; results in input order, each with
/// the notes to print.
pub fn check_all<B: Progress>(
    inputs: &[Input],
    opts: ScanOptions,
    req: &Request,
    bars: Vec<Option<B>>,
) -> Vec<CheckResult> {
    let run = |i: usize, bar: Option<B>| -> CheckResult {
        let mut notes = Vec::new();
        let r = check_one(&inputs[i], opts, req, bar, &mut notes);
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
    let bars: Vec<std::sync::Mutex<Option<B>>> =
        bars.into_iter().map(std::sync::Mutex::new).collect();
    let slots: Vec<std::sync::Mutex<Option<CheckResult>>> =
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
                    Err(UserError::new(
                        "the scan of this workspace stopped unexpectedly",
                        "run it again on its own",
                    )),
                    Vec::new(),
                )
            })
        })
        .collect()
}

fn check_one<B: Progress>(
    input: &Input,
    opts: ScanOptions,
    args: &Request,
    bar: Option<B>,
    notes: &mut Vec<String>,
) -> Result<(Checkup, bool), UserError> {
    let (input, db) = match input {
        (path, Ok(db)) => (path.as_deref(), db.clone()),
        (_, Err(e)) => return Err(UserError::new(e.message.clone(), e.hint.clone())),
    };
    let mut progress = |done: u64, total: u64| {
        if let Some(b) = &bar {
            b.show(done, total);
        }
    };
    let shown = input.map_or_else(|| db.display().to_string(), |p| p.display().to_string());
    // The scan and the diagnosis's reads at one snapshot.
    let result = crate::db::Workspace::read(&db, |ws| {
        let mut report = scan_workspace(ws, opts, &mut progress)?;
        // Gaps left by `doctor excise` are told apart from other gaps.
        crate::excise::gaps::explain(ws, &mut report)?;
        // The diagnosis covers the whole file, as the gate does, whatever the filters.
        let (d, finalize) = diagnose_workspace(ws, &report, &shown)?;
        align_hints(&mut report.findings, &d, &finalize);
        Ok(Checkup {
            report,
            diagnosis: Some(d),
            expectations: None,
        })
    });
    if let Some(b) = bar {
        b.finish();
    }
    let mut checkup = result?;
    let report = &mut checkup.report;
    filter(report, args);
    let fail_on: Severity = args.fail_on;
    let mut found = report.findings.iter().any(|f| f.severity >= fail_on);
    if let Some(path) = &args.write_expect {
        let text = ExpectFile::from_findings(&report.findings).to_text();
        std::fs::write(path, text).map_err(|e| {
            UserError::new(
                format!("cannot write expectations file `{}`: {e}", path.display()),
                "check that the directory exists and is writable",
            )
        })?;
        notes.push(format!(
            "wrote {} expected finding(s) to {}",
            report.findings.len(),
            path.display()
        ));
        found = false;
    }
    let source = match (&args.expect, args.expect_beside, &args.baseline) {
        (Some(f), _, _) => Some((f.clone(), "expect")),
        (None, true, _) => Some((beside(input, &db), "expect")),
        (None, false, Some(f)) => Some((f.clone(), "baseline")),
        _ => None,
    };
    if let Some((file, mode)) = source {
        let text = std::fs::read_to_string(&file).map_err(|e| {
            UserError::new(
                format!("cannot read expectations file `{}`: {e}", file.display()),
                "create it with `wsledger doctor scan --write-expect FILE`",
            )
        })?;
        let expected = ExpectFile::parse(&text).map_err(|e| {
            UserError::new(
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
        found = !matched;
        checkup.expectations = Some(ExpectationsReport {
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
    let min: Severity = args.min_severity;
    report.findings.retain(|f| f.severity >= min);
    report.recount();
    Ok((checkup, found))
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
fn filter(report: &mut ScanReport, args: &Request) {
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
