//! `doctor rederive` output: what is missing, what is put back and from what, whether
//! it may be written, and the start-up after; or the JSON document.

use std::io::{self, Write};

use serde_json::{json, Value};

use super::bundle::s;
use super::sanitize::sanitize;
use super::Format;

/// Writes the document of `doctor rederive` in `format`.
pub fn render(out: &mut dyn Write, doc: &Value, format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, doc)?;
            return writeln!(out);
        }
        Format::Ndjson => {
            serde_json::to_writer(&mut *out, &json!({"type": "summary", "data": doc}))?;
            return writeln!(out);
        }
        _ => {}
    }
    writeln!(out, "workspace: {}", s(&doc["workspace"]))?;
    if let Some(line) = doc["startup"].as_str() {
        writeln!(out, "{}", sanitize(line))?;
    }
    let missing = doc["missing"].as_array().cloned().unwrap_or_default();
    if missing.is_empty() {
        return writeln!(out, "nothing Maka derives is missing");
    }
    writeln!(out, "missing:")?;
    for m in &missing {
        writeln!(out, "  {}", s(&m["what"]))?;
    }
    if let Some(f) = doc["fixes"].as_str() {
        writeln!(out, "put back: {}", sanitize(f))?;
    }
    if let Some(rows) = doc["rows"].as_object().filter(|r| !r.is_empty()) {
        let r: Vec<String> = rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
        writeln!(out, "rows written: {}", sanitize(&r.join(", ")))?;
    }
    if let Some(c) = doc["costs"].as_str() {
        writeln!(out, "costs: {}", sanitize(c))?;
    }
    if let Some(why) = doc["apply_refusal"].as_str() {
        writeln!(out, "not put back: {}", sanitize(why))?;
    }
    if doc["applied"] == true {
        writeln!(out, "carried out:")?;
        if let Some(b) = doc["backup"].as_str() {
            writeln!(out, "  backup: {}", sanitize(b))?;
        }
        writeln!(out, "  bundle: {}", s(&doc["bundle"]))?;
        if let Some(line) = doc["after"]["startup"].as_str() {
            writeln!(out, "rescan: {}", sanitize(line))?;
        }
    }
    Ok(())
}

/// The table of `doctor restore` taking a rederive back.
pub fn render_restore(out: &mut dyn Write, doc: &Value) -> io::Result<()> {
    writeln!(out, "workspace: {}", s(&doc["workspace"]))?;
    for item in doc["sessions"].as_array().into_iter().flatten() {
        writeln!(out, "rederive bundle {}", s(&item["bundle"]))?;
        for k in item["removes"].as_array().into_iter().flatten() {
            writeln!(out, "  removes {}", s(k))?;
        }
        for scope in item["registry_scopes"].as_array().into_iter().flatten() {
            writeln!(out, "  removes the registry row of scope {}", s(scope))?;
        }
    }
    let state = if doc["applied"] == true {
        ("after", &doc["after"])
    } else {
        ("now", &doc["before"])
    };
    writeln!(
        out,
        "{}: start-up {}",
        state.0,
        if state.1["startup_blocked"] == true {
            "BLOCKED (Maka refuses the file without what the rederive put back)"
        } else {
            "not blocked"
        }
    )
}
