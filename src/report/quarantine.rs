//! `doctor quarantine` and `doctor restore` output: the JSON document as a table,
//! JSON or NDJSON.

use std::io::Write;

use serde_json::{json, Value};

use super::sanitize::sanitize;
use super::Format;

/// Writes the document in `format`.
pub fn render_quarantine(out: &mut dyn Write, doc: &Value, format: Format) -> std::io::Result<()> {
    render_document(out, doc, format, render_table)
}

/// A bundle command's document (quarantine, excise, restore) in `format`: pretty JSON;
/// NDJSON, one `session` record per session and then a `summary` of the rest; or
/// `table`.
pub(super) fn render_document(
    out: &mut dyn Write,
    doc: &Value,
    format: Format,
    table: fn(&mut dyn Write, &Value) -> std::io::Result<()>,
) -> std::io::Result<()> {
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
        _ => table(out, doc),
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

fn render_table(out: &mut dyn Write, doc: &Value) -> std::io::Result<()> {
    let restore = doc.get("command").and_then(Value::as_str) == Some("restore");
    writeln!(out, "workspace: {}", s(&doc["workspace"]))?;
    let sessions = doc["sessions"].as_array().cloned().unwrap_or_default();
    if sessions.is_empty() {
        writeln!(
            out,
            "{}",
            if restore {
                "nothing to restore"
            } else {
                "nothing to quarantine: no session holds ledger damage"
            }
        )?;
    }
    for sess in &sessions {
        match sess.get("name").and_then(Value::as_str) {
            Some(n) => writeln!(
                out,
                "session {} \"{}\"",
                s(&sess["session_id"]),
                sanitize(n)
            )?,
            None => writeln!(out, "session {}", s(&sess["session_id"]))?,
        }
        if let Some(reasons) = sess.get("reasons").and_then(Value::as_array) {
            for r in reasons {
                match r.get("id") {
                    Some(Value::String(id)) => {
                        writeln!(out, "  reason  {} ({})", s(&r["code"]), sanitize(id))?
                    }
                    _ => writeln!(out, "  reason  {}", s(&r["code"]))?,
                }
            }
        }
        if let Some(b) = sess.get("blockers").and_then(Value::as_array) {
            for x in b {
                writeln!(out, "  blocked {}", s(x))?;
            }
        }
        let rows: Vec<String> = sess["rows"]
            .as_object()
            .map(|m| m.iter().map(|(t, n)| format!("{t} {n}")).collect())
            .unwrap_or_default();
        writeln!(out, "  rows    {}", sanitize(&rows.join(", ")))?;
        writeln!(out, "  bundle  {}", s(&sess["bundle"]))?;
        if let Some(f) = sess.get("session_files").filter(|f| f.is_object()) {
            let (arrow, other) = match f.get("moved_to") {
                Some(m) => ("->", m),
                None => ("<-", &f["from"]),
            };
            writeln!(
                out,
                "  files   {} {arrow} {} ({} file(s))",
                s(&f["folder"]),
                s(other),
                f["files"].as_array().map_or(0, Vec::len)
            )?;
        }
    }
    let yn = |v: &Value| {
        if v.as_bool() == Some(true) {
            "yes"
        } else {
            "no"
        }
    };
    for key in ["before", "after"] {
        if let Some(st) = doc.get(key) {
            writeln!(
                out,
                "{key:<6}  tool writes refused: {}; start-up blocked: {}",
                yn(&st["tool_writes_refused"]),
                yn(&st["startup_blocked"])
            )?;
        }
    }
    for n in doc["notes"].as_array().cloned().unwrap_or_default() {
        writeln!(out, "note: {}", s(&n))?;
    }
    writeln!(
        out,
        "{} session(s); {}",
        sessions.len(),
        if doc["applied"].as_bool() == Some(true) {
            if restore {
                "restored"
            } else {
                "quarantined"
            }
        } else {
            "nothing written"
        }
    )?;
    if let Some(b) = doc["backup"].as_str() {
        writeln!(out, "backup: {}", sanitize(b))?;
    }
    Ok(())
}
