//! `wsledger info`.

use clap::Args;

use super::{workspace, CliError, ExitStatus, FormatArg, GlobalArgs, Printer};
use crate::doctor::workspace_info;
use crate::report::sanitize::sanitize;

/// Show the workspace: database path, schema versions, counts, WAL size, whether
/// Maka's owner lock is held, whether another process has the database open, and
/// Maka's tool-ledger gate state
///
/// Read-only; the locks are probed, never taken, and nothing is created.
#[derive(Debug, Args)]
pub struct InfoArgs {}

pub fn run(
    global: &GlobalArgs,
    _args: &InfoArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let db = workspace::database_path(global.workspace()?)?;
    let info = workspace_info(&db, &mut |_, _| {})?;
    let io = |e: std::io::Error| {
        CliError::new(
            format!("writing output: {e}"),
            "check that stdout is writable",
        )
    };
    match global.format {
        Some(FormatArg::Json | FormatArg::Ndjson) => {
            let text = serde_json::to_string_pretty(&info).map_err(|e| io(e.into()))?;
            writeln!(printer.out(), "{text}").map_err(io)?;
        }
        Some(FormatArg::Github) => {
            return Err(CliError::new(
                "`--format github` is for `doctor scan`",
                "use table or json",
            ));
        }
        _ => {
            let mut t = comfy_table::Table::new();
            t.load_style(comfy_table::presets::UTF8_FULL_CONDENSED);
            t.force_no_tty();
            let gate = if info.maka_gate.tool_writes_refused {
                match (&info.maka_gate.decode_failure, &info.maka_gate.first_issue) {
                    (Some(d), _) => format!(
                        "tool writes REFUSED (decode failure at {})",
                        sanitize(&d.event_id)
                    ),
                    (None, Some(i)) => format!(
                        "tool writes REFUSED ({} at {})",
                        i.code,
                        sanitize(&i.event_id)
                    ),
                    _ => "tool writes REFUSED".into(),
                }
            } else {
                "tool writes accepted".into()
            };
            let registry = info
                .registry
                .as_ref()
                .map(|r| {
                    r.iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_else(|| "missing".into());
            let lock = if info.owner_lock_paths.is_empty() {
                info.owner_lock.clone()
            } else {
                format!("{} ({})", info.owner_lock, info.owner_lock_paths.join(", "))
            };
            let rows: Vec<(&str, String)> = vec![
                ("database", sanitize(&info.database)),
                ("size", format!("{} bytes", info.database_bytes)),
                (
                    "wal",
                    info.wal_bytes
                        .map_or("none".into(), |b| format!("{b} bytes")),
                ),
                ("user_version", info.user_version.to_string()),
                ("registry", registry),
                ("release", info.workspace_release.describe()),
                ("sessions", info.sessions.to_string()),
                ("runs", info.runs.to_string()),
                ("events", info.events.to_string()),
                ("tool operations", info.operations.to_string()),
                ("owner lock", lock),
                (
                    "open",
                    match (info.open_by_other_process.as_str(), info.open_by_pid) {
                        ("yes", Some(pid)) => format!("open by pid {pid}"),
                        ("yes", None) => "open by another process (pid unknown)".into(),
                        ("no", _) => "not open in another process".into(),
                        _ => format!(
                            "unknown ({})",
                            sanitize(info.open_error.as_deref().unwrap_or(""))
                        ),
                    },
                ),
                ("maka gate", gate),
                (
                    "findings",
                    format!("{} (run `wsledger doctor scan`)", info.findings),
                ),
            ];
            for (k, v) in rows {
                t.add_row(vec![k.to_owned(), v]);
            }
            writeln!(printer.out(), "{t}").map_err(io)?;
        }
    }
    Ok(ExitStatus::Success)
}
