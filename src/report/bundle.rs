//! The document of every command that writes or restores bundles (quarantine,
//! excise, restore): pretty JSON, NDJSON, or a table whose frame (the workspace, each
//! session's heading and rows, the gate and start-up state, the notes, the last line)
//! they share; each command writes its own lines of a session.

use std::io::{self, Write};

use serde_json::{json, Value};

use super::sanitize::sanitize;
use super::Format;

/// What a command's table says of its own: an empty plan, a write done (a restore
/// says "nothing to restore" and "restored" instead), and the lines under each
/// session's heading.
pub(super) struct Table {
    pub nothing: &'static str,
    pub done: &'static str,
    pub session: fn(&mut dyn Write, &Value) -> io::Result<()>,
}

/// The document of `doctor quarantine`, `doctor excise` or `doctor restore` in
/// `format`: pretty JSON; NDJSON, one `session` record per session and then a
/// `summary` of the rest; or the table (a restore of excision bundles prints as
/// `doctor excise` does).
pub fn render(out: &mut dyn Write, doc: &Value, format: Format) -> io::Result<()> {
    match format {
        Format::Ndjson => {
            let mut summary = doc.clone();
            let items = summary
                .as_object_mut()
                .and_then(|o| o.remove("sessions"))
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default();
            for s in items {
                serde_json::to_writer(&mut *out, &json!({"type": "session", "data": s}))?;
                writeln!(out)?;
            }
            serde_json::to_writer(&mut *out, &json!({"type": "summary", "data": summary}))?;
            writeln!(out)
        }
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, doc)?;
            writeln!(out)
        }
        _ if doc["kind"] == "rederive" => super::rederive::render_restore(out, doc),
        _ if doc["command"] == "excise" || doc["kind"] == "excise" => {
            table(out, doc, &super::excise::TABLE)
        }
        _ => table(out, doc, &super::quarantine::TABLE),
    }
}

/// A value of the document as table text (`-` for null), sanitized.
pub(super) fn s(v: &Value) -> String {
    match v {
        Value::String(s) => sanitize(s),
        Value::Null => "-".into(),
        other => sanitize(&other.to_string()),
    }
}

/// The `rows` line of a session: rows per table.
pub(super) fn rows_line(out: &mut dyn Write, sess: &Value) -> io::Result<()> {
    let rows: Vec<String> = sess["rows"]
        .as_object()
        .map(|m| m.iter().map(|(t, n)| format!("{t} {n}")).collect())
        .unwrap_or_default();
    writeln!(out, "  rows    {}", sanitize(&rows.join(", ")))
}

fn table(out: &mut dyn Write, doc: &Value, own: &Table) -> io::Result<()> {
    let restore = doc["command"] == "restore";
    writeln!(out, "workspace: {}", s(&doc["workspace"]))?;
    let sessions = doc["sessions"].as_array().cloned().unwrap_or_default();
    if sessions.is_empty() {
        let nothing = if restore {
            "nothing to restore"
        } else {
            own.nothing
        };
        writeln!(out, "{nothing}")?;
    }
    for sess in &sessions {
        match sess["name"].as_str() {
            Some(n) => writeln!(
                out,
                "session {} \"{}\"",
                s(&sess["session_id"]),
                sanitize(n)
            )?,
            None => writeln!(out, "session {}", s(&sess["session_id"]))?,
        }
        (own.session)(out, sess)?;
    }
    let yn = |v: &Value| {
        if v.as_bool() == Some(true) {
            "yes"
        } else {
            "no"
        }
    };
    for key in ["before", "after"] {
        if let Some(st) = doc.get(key).filter(|v| v.is_object()) {
            writeln!(
                out,
                "{key:<6}  tool writes refused: {}; start-up blocked: {}",
                yn(&st["tool_writes_refused"]),
                yn(&st["startup_blocked"])
            )?;
        }
    }
    for n in doc["notes"].as_array().into_iter().flatten() {
        writeln!(out, "note: {}", s(n))?;
    }
    let done = match (doc["applied"] == true, restore) {
        (false, _) => "nothing written",
        (true, true) => "restored",
        (true, false) => own.done,
    };
    writeln!(out, "{} session(s); {done}", sessions.len())?;
    if let Some(b) = doc["backup"].as_str() {
        writeln!(out, "backup: {}", sanitize(b))?;
    }
    Ok(())
}
