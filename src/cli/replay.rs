//! `wsledger replay`.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{workspace, CliError, ExitStatus, FormatArg, GlobalArgs, Printer};
use crate::replay::source::{
    export_from_database, replay_bundle_file, replay_exported, write_bundle,
};
use crate::replay::Replay;
use crate::report::replay::{render_replay, ReplayFormat};

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
    let r = replay_exported(&db, &bundle, args.run.as_deref())?;
    let status = status_of(&r);
    let opts = printer.render_opts();
    render_replay(printer.out(), &r, &db.display().to_string(), format, &opts).map_err(io_err)?;
    Ok(status)
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
            let results: Vec<_> = outcomes
                .iter()
                .map(|o| {
                    let r = match &o.result {
                        Ok(r) => Ok((r, status_of(r) as i32)),
                        Err(e) => Err((e.message.as_str(), e.hint.as_str())),
                    };
                    (o.path.as_str(), r)
                })
                .collect();
            let doc = crate::report::replay::many_json(&results);
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
