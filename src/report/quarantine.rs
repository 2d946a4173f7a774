//! `doctor quarantine` and `doctor restore` output: the JSON document as a table,
//! JSON or NDJSON.

use std::io::Write;

use serde_json::Value;

use super::bundle::{render_document, rows_line, s, Words};
use super::sanitize::sanitize;
use super::Format;

/// Writes the document in `format`.
pub fn render_quarantine(out: &mut dyn Write, doc: &Value, format: Format) -> std::io::Result<()> {
    let words = Words {
        nothing: "nothing to quarantine: no session holds ledger damage",
        done: "quarantined",
    };
    render_document(out, doc, format, &words, session_lines)
}

fn session_lines(out: &mut dyn Write, sess: &Value) -> std::io::Result<()> {
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
    rows_line(out, sess)?;
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
    Ok(())
}
