//! `wsledger replay`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Value};

use super::{workspace, CliError, ExitStatus, FormatArg, GlobalArgs, Printer};
use crate::bundle::Bundle;
use crate::db::Workspace;
use crate::replay::{operation_ids_named, replay, Replay, SessionRows};
use crate::report::replay::{render_replay, replay_json, ReplayFormat};

/// Rebuild a session's runs from its event log, show them, and show every place the
/// stored projections (tool tables, run headers, operational terminal events,
/// continuation digests) disagree with the log.
///
/// Exit 0 when every projection agrees with the log, 1 when any divergence is found
/// (damage in the log included), 2 when the session cannot be read. Read-only: the
/// database and its `-wal` are never changed. Only the session's own rows are read,
/// through the session indexes, so a bundle replays exactly like the database.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The session to replay
    #[arg(long, value_name = "ID", required_unless_present = "bundle")]
    pub session: Option<String>,
    /// Show only this run of the session (the whole session is still replayed)
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Also write the session's rows to FILE as a portable session bundle
    #[arg(long, value_name = "FILE", conflicts_with = "bundle")]
    pub export: Option<PathBuf>,
    /// Replay session bundles (from `--export`) instead of a workspace; no database is
    /// opened. Several bundles give one result each.
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with = "session")]
    pub bundle: Vec<PathBuf>,
}

struct Outcome {
    path: String,
    result: Result<Replay, CliError>,
}

fn format_of(global: &GlobalArgs) -> Result<ReplayFormat, CliError> {
    match global.format {
        None | Some(FormatArg::Text) | Some(FormatArg::Table) => Ok(ReplayFormat::Text),
        Some(FormatArg::Json) => Ok(ReplayFormat::Json),
        Some(FormatArg::Ndjson) => Ok(ReplayFormat::Ndjson),
        Some(FormatArg::Github) => Err(CliError::new(
            "`--format github` is for `doctor scan`",
            "use `--format text`, `json` or `ndjson` with replay",
        )),
    }
}

fn status_of(r: &Replay) -> ExitStatus {
    if r.all_divergences().next().is_some() {
        ExitStatus::Findings
    } else {
        ExitStatus::Success
    }
}

fn io_err(e: std::io::Error) -> CliError {
    CliError::new(
        format!("writing output: {e}"),
        "check that stdout is writable",
    )
}

pub fn run(
    global: &GlobalArgs,
    args: &ReplayArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let format = format_of(global)?;
    if !args.bundle.is_empty() {
        let outcomes: Vec<Outcome> = args
            .bundle
            .iter()
            .map(|p| Outcome {
                path: p.display().to_string(),
                result: replay_bundle_file(p, args.run.as_deref()),
            })
            .collect();
        return render_outcomes(outcomes, format, printer);
    }
    let session = args.session.as_deref().unwrap_or_default();
    let db = workspace::database_path(global.workspace()?)?;
    let bundle = export_from_database(&db, session)?;
    if let Some(file) = &args.export {
        write_bundle(file, &bundle)?;
        printer.note(&format!(
            "wrote session bundle {} ({} tables)",
            file.display(),
            bundle.tables.len()
        ));
    }
    let r = replay_bundle(&bundle, args.run.as_deref())?;
    let status = status_of(&r);
    let opts = printer.render_opts();
    render_replay(printer.out(), &r, &db.display().to_string(), format, &opts).map_err(io_err)?;
    Ok(status)
}

/// Reads one session of a workspace database as a bundle. An unknown session is an
/// error whose hint lists the nearest session ids.
pub fn export_from_database(db: &Path, session: &str) -> Result<Bundle, CliError> {
    // Every table of the session at one snapshot: Maka commits a tool call's rows in
    // several tables at once, and a bundle must hold all of them or none.
    let (bundle, ids) = Workspace::read(db, |ws| {
        let bundle = ws.export_session(session, &operation_ids_named)?;
        let empty = SessionRows::from_bundle(&bundle).is_ok_and(|r| r.is_empty());
        let ids = if empty { Some(ws.session_ids()?) } else { None };
        Ok((bundle, ids))
    })?;
    let rows = SessionRows::from_bundle(&bundle)
        .map_err(|e| CliError::new(e.to_string(), "export the session again"))?;
    if rows.is_empty() {
        let ids = ids.unwrap_or_default();
        let near = nearest(session, &ids, 5);
        let hint = if near.is_empty() {
            "the workspace has no sessions".to_owned()
        } else {
            format!("nearest session ids: {}", near.join(", "))
        };
        return Err(CliError::new(
            format!(
                "session `{}` not found in {}",
                crate::report::sanitize::sanitize(session),
                db.display()
            ),
            hint,
        ));
    }
    Ok(bundle)
}

fn replay_bundle(bundle: &Bundle, run: Option<&str>) -> Result<Replay, CliError> {
    let rows = SessionRows::from_bundle(bundle).map_err(|e| {
        CliError::new(
            e.to_string(),
            "a session bundle is written by `wsledger replay --session ID --export FILE`",
        )
    })?;
    let mut r = replay(&rows);
    let s = &bundle.schema;
    let writer = crate::release::generation_by_versions(
        s.user_version,
        s.registry.as_ref(),
        s.capabilities.as_ref(),
    );
    if writer.is_some_and(crate::scan::release::keeps_session_files) {
        r.add_session_note(
            "transcript_in_files",
            format!(
                "Maka {} keeps this session's transcript in `sessions/{}/session.jsonl` beside \
                 the database; replay compares the log with the run headers only",
                writer.map(|g| g.display()).unwrap_or_default(),
                r.session_id
            ),
        );
    }
    if let Some(run) = run {
        if !r.keep_run(run) {
            let ids: Vec<String> = r.runs.iter().map(|x| x.run_id.clone()).collect();
            return Err(CliError::new(
                format!(
                    "session `{}` has no run `{}`",
                    r.session_id,
                    crate::report::sanitize::sanitize(run)
                ),
                format!("its runs: {}", nearest(run, &ids, ids.len()).join(", ")),
            ));
        }
    }
    Ok(r)
}

fn replay_bundle_file(path: &Path, run: Option<&str>) -> Result<Replay, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::new(
            format!("cannot read bundle {}: {e}", path.display()),
            "check the path",
        )
    })?;
    let bundle = Bundle::from_json_text(&text).map_err(|e| {
        CliError::new(
            format!("{}: {e}", path.display()),
            "a session bundle is written by `wsledger replay --session ID --export FILE`",
        )
    })?;
    replay_bundle(&bundle, run)
}

fn write_bundle(file: &Path, bundle: &Bundle) -> Result<(), CliError> {
    let err = |e: &dyn std::fmt::Display| {
        CliError::new(
            format!("cannot write bundle {}: {e}", file.display()),
            "check that the directory exists and is writable",
        )
    };
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| err(&e))?;
    tmp.write_all(bundle.to_json_text().as_bytes())
        .map_err(|e| err(&e))?;
    tmp.persist(file).map_err(|e| err(&e.error))?;
    Ok(())
}

/// Up to `n` candidates nearest to `target`: longest common prefix first, then
/// edit distance, then the id.
pub fn nearest(target: &str, candidates: &[String], n: usize) -> Vec<String> {
    let prefix = |c: &str| {
        c.chars()
            .zip(target.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    let mut scored: Vec<(std::cmp::Reverse<usize>, usize, &String)> = candidates
        .iter()
        .map(|c| (std::cmp::Reverse(prefix(c)), edit_distance(target, c), c))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(n)
        .map(|(_, _, c)| c.clone())
        .collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn render_outcomes(
    mut outcomes: Vec<Outcome>,
    format: ReplayFormat,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    if outcomes.len() == 1 {
        let o = outcomes.pop().expect("one outcome");
        let r = o.result?;
        let opts = printer.render_opts();
        render_replay(printer.out(), &r, &o.path, format, &opts).map_err(io_err)?;
        return Ok(status_of(&r));
    }
    let mut status = ExitStatus::Success;
    for o in &outcomes {
        match &o.result {
            Err(_) => status = ExitStatus::Error,
            Ok(r) if status == ExitStatus::Success && status_of(r) == ExitStatus::Findings => {
                status = ExitStatus::Findings
            }
            _ => {}
        }
    }
    let opts = printer.render_opts();
    match format {
        ReplayFormat::Json => {
            let results: Vec<Value> = outcomes
                .iter()
                .map(|o| match &o.result {
                    Ok(r) => {
                        let mut doc = replay_json(r, &o.path);
                        if let Value::Object(m) = &mut doc {
                            m.insert("path".into(), json!(o.path));
                            m.insert("status".into(), json!(status_of(r) as i32));
                            m.insert("error".into(), Value::Null);
                        }
                        doc
                    }
                    Err(e) => json!({
                        "path": o.path,
                        "status": 2,
                        "error": {"message": e.message, "hint": e.hint},
                    }),
                })
                .collect();
            let doc = json!({"schema_version": 1, "results": results});
            serde_json::to_writer_pretty(printer.out(), &doc).map_err(|e| io_err(e.into()))?;
            writeln!(printer.out()).map_err(io_err)?;
        }
        ReplayFormat::Ndjson | ReplayFormat::Text => {
            for o in &outcomes {
                match &o.result {
                    Ok(r) => {
                        if format == ReplayFormat::Text {
                            writeln!(
                                printer.out(),
                                "== {}",
                                crate::report::sanitize::sanitize(&o.path)
                            )
                            .map_err(io_err)?;
                        }
                        crate::report::replay::render_with_path(
                            printer.out(),
                            r,
                            &o.path,
                            format,
                            &opts,
                        )
                        .map_err(io_err)?;
                    }
                    Err(e) => {
                        if format == ReplayFormat::Ndjson {
                            let rec = json!({"type": "error", "path": o.path, "data": {"message": e.message, "hint": e.hint}});
                            serde_json::to_writer(printer.out(), &rec)
                                .map_err(|e| io_err(e.into()))?;
                            writeln!(printer.out()).map_err(io_err)?;
                        } else {
                            writeln!(
                                printer.out(),
                                "== {}",
                                crate::report::sanitize::sanitize(&o.path)
                            )
                            .map_err(io_err)?;
                        }
                        printer.error(&e.message, &e.hint);
                    }
                }
            }
        }
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::{edit_distance, nearest};

    #[test]
    fn nearest_prefers_common_prefix_then_edit_distance() {
        let ids: Vec<String> = ["abc-1", "abd-2", "xyz", "abc-9"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(nearest("abc-2", &ids, 2), ["abc-1", "abc-9"]);
        assert_eq!(nearest("xy", &ids, 1), ["xyz"]);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
