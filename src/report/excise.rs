//! Rendering of `doctor excise` and of the restore of excision bundles.

use std::io::Write;

use serde_json::Value;

use super::quarantine::s;
use super::sanitize::sanitize;
use super::Format;

/// Writes the document in `format` (table, json, or ndjson: one `session` record per
/// session, then a `summary`).
pub fn render(out: &mut dyn Write, doc: &Value, format: Format) -> std::io::Result<()> {
    super::quarantine::render_document(out, doc, format, table)
}

fn table(out: &mut dyn Write, doc: &Value) -> std::io::Result<()> {
    let restore = doc["command"] == "restore";
    writeln!(out, "workspace: {}", s(&doc["workspace"]))?;
    let sessions = doc["sessions"].as_array().cloned().unwrap_or_default();
    if sessions.is_empty() {
        writeln!(
            out,
            "{}",
            if restore {
                "nothing to restore"
            } else {
                "nothing to excise: no event is damaged"
            }
        )?;
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
        for e in sess["events"].as_array().into_iter().flatten() {
            match e {
                Value::String(id) => writeln!(out, "  event   {}", sanitize(id))?,
                _ => writeln!(
                    out,
                    "  event   {} {} ({})",
                    s(&e["event_id"]),
                    s(&e["event_kind"]),
                    s(&e["code"])
                )?,
            }
        }
        let rows: Vec<String> = sess["rows"]
            .as_object()
            .map(|m| m.iter().map(|(t, n)| format!("{t} {n}")).collect())
            .unwrap_or_default();
        writeln!(out, "  rows    {}", sanitize(&rows.join(", ")))?;
        if let Some(c) = sess["cost"].as_str() {
            writeln!(out, "  cost    {}", sanitize(c))?;
        }
        if let Some(f) = sess["fallback"].as_str() {
            writeln!(
                out,
                "  not excised: {}; quarantine is still needed",
                sanitize(f)
            )?;
        }
        if !sess["bundle"].is_null() {
            writeln!(out, "  bundle  {}", s(&sess["bundle"]))?;
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
    let applied = doc["applied"] == true;
    let done = match (applied, restore) {
        (false, _) => "nothing written",
        (true, true) => "restored",
        (true, false) => "excised",
    };
    writeln!(out, "{} session(s); {done}", sessions.len())?;
    if let Some(b) = doc["backup"].as_str() {
        writeln!(out, "backup: {}", sanitize(b))?;
    }
    Ok(())
}
