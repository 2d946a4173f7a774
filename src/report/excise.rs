//! Rendering of `doctor excise` and of the restore of excision bundles.

use std::io::Write;

use serde_json::Value;

use super::bundle::{render_document, rows_line, s, Words};
use super::sanitize::sanitize;
use super::Format;

/// Writes the document in `format` (table, json, or ndjson: one `session` record per
/// session, then a `summary`).
pub fn render(out: &mut dyn Write, doc: &Value, format: Format) -> std::io::Result<()> {
    let words = Words {
        nothing: "nothing to excise: no event is damaged",
        done: "excised",
    };
    render_document(out, doc, format, &words, session_lines)
}

fn session_lines(out: &mut dyn Write, sess: &Value) -> std::io::Result<()> {
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
    rows_line(out, sess)?;
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
    Ok(())
}
