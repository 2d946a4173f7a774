//! `wsledger info` output: the table.

use std::io::Write;

use super::sanitize::sanitize;
use crate::info::InfoReport;

/// Writes the table of `info`.
pub fn render_info_table(out: &mut dyn Write, info: &InfoReport) -> std::io::Result<()> {
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
            _ => match &info.maka_gate.missing_table {
                Some(t) => format!("tool writes REFUSED (table {t} is missing)"),
                None => "tool writes REFUSED".into(),
            },
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
        (
            "start-up",
            info.startup
                .as_ref()
                .map_or("not judged".into(), |s| sanitize(&s.verdict())),
        ),
        (
            "other builds",
            super::builds::other_builds_line(info.startup.as_ref(), &info.other_builds)
                .as_deref()
                .and_then(|l| l.strip_prefix("other builds: "))
                .map_or("agree".into(), sanitize),
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
    let warnings = crate::startup::desktop_warnings(
        info.startup.as_ref(),
        info.compatibility.as_deref(),
        &info.database,
    );
    // A desktop that deletes the file is said before anything else.
    for w in &warnings {
        writeln!(out, "WARNING: {}", sanitize(w))?;
    }
    writeln!(out, "{t}")?;
    if let Some(rows) = &info.compatibility {
        super::builds::render_compatibility(out, rows)?;
    }
    Ok(())
}
