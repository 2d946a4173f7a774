//! `doctor scan` output: table, JSON, NDJSON, GitHub annotations.

use std::io::{self, Write};

use comfy_table::{presets, Cell, Color, ContentArrangement, Table};
use serde_json::{json, Value};

use super::fold::Row;
use super::sanitize::sanitize;
use super::{Format, RenderOpts};
use crate::checkup::Checkup;
use crate::diagnosis::Diagnosis;
use crate::expect::ExpectationsReport;
use crate::findings::{Finding, Severity};
use crate::scan::ScanReport;

/// What one workspace's output is made of: the scan, and what `doctor scan` adds.
#[derive(Clone, Copy)]
struct Parts<'a> {
    report: &'a ScanReport,
    diagnosis: Option<&'a Diagnosis>,
    expectations: Option<&'a ExpectationsReport>,
}

impl<'a> Parts<'a> {
    fn of(c: &'a Checkup) -> Parts<'a> {
        Parts {
            report: &c.report,
            diagnosis: c.diagnosis.as_ref(),
            expectations: c.expectations.as_ref(),
        }
    }
}

/// The JSON document of a scan (findings included).
pub fn scan_json(report: &ScanReport) -> Value {
    serde_json::to_value(report).unwrap_or(Value::Null)
}

/// The JSON document of `doctor scan`: the scan's, then the diagnosis and the
/// expectations.
pub fn checkup_json(c: &Checkup) -> Value {
    parts_json(Parts::of(c))
}

fn parts_json(p: Parts<'_>) -> Value {
    let mut doc = scan_json(p.report);
    if let Value::Object(m) = &mut doc {
        if let Some(d) = p.diagnosis {
            m.insert(
                "diagnosis".into(),
                serde_json::to_value(d).unwrap_or(Value::Null),
            );
        }
        if let Some(e) = p.expectations {
            m.insert(
                "expectations".into(),
                serde_json::to_value(e).unwrap_or(Value::Null),
            );
        }
    }
    doc
}

/// Writes one workspace's scan.
pub fn render_scan(
    out: &mut dyn Write,
    report: &ScanReport,
    path: &str,
    format: Format,
    opts: &RenderOpts,
) -> io::Result<()> {
    let parts = Parts {
        report,
        diagnosis: None,
        expectations: None,
    };
    render_parts(out, parts, path, format, opts)
}

/// Writes one workspace's `doctor scan` output.
pub fn render_checkup(
    out: &mut dyn Write,
    c: &Checkup,
    path: &str,
    format: Format,
    opts: &RenderOpts,
) -> io::Result<()> {
    render_parts(out, Parts::of(c), path, format, opts)
}

fn render_parts(
    out: &mut dyn Write,
    parts: Parts<'_>,
    path: &str,
    format: Format,
    opts: &RenderOpts,
) -> io::Result<()> {
    let report = parts.report;
    match format {
        Format::Json => {
            let mut doc = parts_json(parts);
            if let Value::Object(m) = &mut doc {
                m.insert("workspace".into(), json!(path));
            }
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)
        }
        Format::Ndjson => {
            for f in &report.findings {
                serde_json::to_writer(&mut *out, &json!({"type": "finding", "data": f}))?;
                writeln!(out)?;
            }
            let mut doc = parts_json(parts);
            if let Value::Object(m) = &mut doc {
                m.remove("findings");
                m.insert("workspace".into(), json!(path));
            }
            serde_json::to_writer(&mut *out, &json!({"type": "summary", "data": doc}))?;
            writeln!(out)
        }
        Format::Github => {
            for f in &report.findings {
                writeln!(out, "{}", github_annotation(f, path))?;
            }
            Ok(())
        }
        Format::Table | Format::Text => render_table(out, parts, path, opts),
    }
}

/// GitHub's workflow-command escaping, after [`sanitize`]: the log viewer renders
/// colour escapes, so database text is escaped as on a terminal.
fn github_escape(s: &str, property: bool) -> String {
    let mut o = sanitize(s)
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    if property {
        o = o.replace(':', "%3A").replace(',', "%2C");
    }
    o
}

/// One GitHub Actions workflow command for a finding.
pub fn github_annotation(f: &Finding, path: &str) -> String {
    let level = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "notice",
    };
    let mut scope = Vec::new();
    if let Some(s) = &f.session_id {
        scope.push(format!("session {s}"));
    }
    if let Some(r) = &f.run_id {
        scope.push(format!("run {r}"));
    }
    if let Some(e) = &f.event_id {
        scope.push(format!("event {e}"));
    }
    let msg = if scope.is_empty() {
        format!("{} — hint: {}", f.message, f.hint)
    } else {
        format!("{} ({}) — hint: {}", f.message, scope.join(", "), f.hint)
    };
    format!(
        "::{level} file={},title={}::{}",
        github_escape(path, true),
        github_escape(&format!("wsledger {}", f.code), true),
        github_escape(&msg, false)
    )
}

fn severity_cell(s: Severity, color: bool) -> Cell {
    let cell = Cell::new(s.as_str());
    if !color {
        return cell;
    }
    match s {
        Severity::Error => cell.fg(Color::Red),
        Severity::Warning => cell.fg(Color::Yellow),
        Severity::Info => cell.fg(Color::Blue),
    }
}

fn render_table(
    out: &mut dyn Write,
    parts: Parts<'_>,
    path: &str,
    opts: &RenderOpts,
) -> io::Result<()> {
    let report = parts.report;
    // A desktop that deletes the file is said before anything else.
    for w in super::builds::desktop_warnings(report, path) {
        writeln!(out, "WARNING: {}", sanitize(&w))?;
    }
    writeln!(out, "workspace: {}", sanitize(path))?;
    writeln!(out, "release: {}", report.workspace_release.describe())?;
    if let Some(s) = &report.startup {
        writeln!(out, "{}", sanitize(&s.line()))?;
    }
    if let Some(line) =
        super::builds::other_builds_line(report.startup.as_ref(), &report.other_builds)
    {
        writeln!(out, "{}", sanitize(&line))?;
    }
    if let Some(rows) = &report.compatibility {
        super::builds::render_compatibility(out, rows)?;
    }
    if !report.findings.is_empty() {
        let mut table = Table::new();
        table
            .load_style(presets::UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(opts.width)
            .set_header(vec!["severity", "code", "where", "message"]);
        if !opts.color {
            table.force_no_tty();
        }
        // Many findings of one code (one cause, usually) show as the first few and a
        // count, unless every one is asked for (`report::fold`).
        for row in super::fold::fold_findings(&report.findings, opts.verbose) {
            let f = match row {
                Row::Finding(f) => f,
                Row::Folded(g) => {
                    table.add_row(vec![
                        severity_cell(g.severity, opts.color),
                        Cell::new(g.code),
                        Cell::new(format!("{} more", g.count)),
                        Cell::new(sanitize(&g.line())),
                    ]);
                    continue;
                }
            };
            let mut place = Vec::new();
            for (label, value) in [
                ("session", &f.session_id),
                ("run", &f.run_id),
                ("event", &f.event_id),
                ("op", &f.operation_id),
                ("call", &f.tool_call_id),
            ] {
                if let Some(v) = value {
                    place.push(format!("{label} {}", sanitize(v)));
                    let title = parts
                        .diagnosis
                        .and_then(|d| d.session_names.get(v.as_str()))
                        .filter(|_| label == "session" && !v.is_empty());
                    if let Some(t) = title {
                        // This column never wraps (ids are copied from it): keep titles short.
                        let t = sanitize(t);
                        let short: String = t.chars().take(44).collect();
                        let more = if short.len() < t.len() { "…" } else { "" };
                        place.push(format!("  \"{short}{more}\""));
                    }
                }
            }
            table.add_row(vec![
                severity_cell(f.severity, opts.color),
                Cell::new(f.code),
                Cell::new(place.join("\n")),
                Cell::new(format!(
                    "{}\nhint: {}",
                    sanitize(&f.message),
                    sanitize(&f.hint)
                )),
            ]);
        }
        // Ids are what users copy into the next command: never wrap them.
        if let Some(col) = table.column_mut(2) {
            col.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
        }
        writeln!(out, "{table}")?;
    }
    let s = &report.summary;
    writeln!(
        out,
        "{} finding(s): {} error(s), {} warning(s), {} info; {} event(s), {} session(s), {} run(s), {} tool operation(s)",
        s.findings, s.errors, s.warnings, s.infos, s.events, s.sessions, s.runs, s.operations
    )?;
    if s.live_snapshot {
        writeln!(
            out,
            "read one snapshot of a live workspace (a `-wal` is present): commits made during the scan are not in this report"
        )?;
    }
    if let Some(e) = parts.expectations {
        let verdict = if e.matched { "match" } else { "MISMATCH" };
        writeln!(
            out,
            "expectations ({}, {}): {verdict}",
            e.mode,
            sanitize(&e.file)
        )?;
        for (sign, list) in [("-", &e.missing), ("+", &e.new)] {
            for x in list {
                let ids = [
                    &x.session_id,
                    &x.run_id,
                    &x.event_id,
                    &x.operation_id,
                    &x.tool_call_id,
                ]
                .iter()
                .filter_map(|v| v.as_deref())
                .map(sanitize)
                .collect::<Vec<_>>()
                .join(" ");
                let what = if sign == "-" { "missing" } else { "new" };
                writeln!(out, "  {sign} {what}: {} {ids}", x.code)?;
            }
        }
    }
    let g = &report.maka_gate;
    if let (true, Some(c)) = (g.plain_appends_refused, &g.claim_failure) {
        writeln!(
            out,
            "maka gate: EVERY append REFUSED in every session, plain ones included \
             (continuation claim {} does not read)",
            sanitize(&c.claim_id)
        )?;
    } else if g.tool_writes_refused {
        let ledger = match (&g.decode_failure, &g.first_issue) {
            (Some(d), _) => Some(format!("decode failure at event {}", sanitize(&d.event_id))),
            (None, Some(i)) => Some(format!(
                "first issue {} at event {}",
                i.code,
                sanitize(&i.event_id)
            )),
            (None, None) => None,
        };
        // A missing tool table fails each tool write on its own (`no such table`).
        let table = g
            .missing_table
            .as_ref()
            .map(|t| format!("table {t} is missing: each tool write fails"));
        let why = match (ledger, table) {
            (Some(l), Some(t)) => format!("{l}; {t}"),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => "unknown".into(),
        };
        writeln!(
            out,
            "maka gate: tool writes REFUSED in every session ({why})"
        )?;
    } else {
        writeln!(out, "maka gate: tool writes accepted")?;
    }
    if let Some(p) = &report.upgrade {
        for line in super::builds::upgrade_lines(p) {
            writeln!(out, "{}", sanitize(&line))?;
        }
    }
    if let Some(d) = parts.diagnosis {
        super::diagnosis::render_diagnosis(out, d)?;
    }
    Ok(())
}

/// One workspace's result among several: its path as given, and its checkup with
/// the exit status, or its error (message, hint).
pub type Outcome<'a> = (&'a str, Result<(&'a Checkup, i32), (&'a str, &'a str)>);

/// The JSON document of several workspaces' results.
pub fn many_json(outcomes: &[Outcome<'_>]) -> Value {
    let results: Vec<_> = outcomes
        .iter()
        .map(|(path, result)| match result {
            Ok((c, st)) => {
                let mut doc = checkup_json(c);
                if let Value::Object(m) = &mut doc {
                    m.insert("path".into(), json!(path));
                    m.insert("status".into(), json!(*st));
                    m.insert("error".into(), Value::Null);
                }
                doc
            }
            Err((message, hint)) => {
                json!({"path": path, "status": 2, "error": {"message": message, "hint": hint}})
            }
        })
        .collect();
    json!({"schema_version": 1, "results": results})
}

/// The table after several workspaces' tables: one row each (path, status, errors,
/// warnings, error message).
pub fn render_many_summary(
    out: &mut dyn Write,
    rows: Vec<(String, i32, usize, usize, String)>,
) -> io::Result<()> {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_header(vec!["workspace", "status", "errors", "warnings", "error"]);
    t.force_no_tty();
    for (p, st, e, w, msg) in rows {
        t.add_row(vec![
            sanitize(&p),
            st.to_string(),
            e.to_string(),
            w.to_string(),
            sanitize(&msg),
        ]);
    }
    writeln!(out, "{t}")
}
