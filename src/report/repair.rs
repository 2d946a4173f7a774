//! `doctor repair` output: the diagnosis, what was carried out and the rescan, or the
//! JSON document.

use std::io::Write;

use serde_json::{json, Value};

use super::diagnosis::render_diagnosis;
use super::sanitize::sanitize;
use super::Format;
use crate::repair::Repaired;

/// The JSON document (`--format json`), or one `summary` record (`ndjson`).
fn write_doc(out: &mut dyn Write, doc: &Value, format: Format) -> std::io::Result<()> {
    {
        if format == Format::Json {
            serde_json::to_writer_pretty(&mut *out, doc)?;
        } else {
            serde_json::to_writer(&mut *out, &json!({"type": "summary", "data": doc}))?;
        }
        writeln!(out)
    }
}

/// Writes what `doctor repair` did in `format`.
pub fn render_repair(
    out: &mut dyn Write,
    repaired: &Repaired,
    format: Format,
) -> std::io::Result<()> {
    let (doc, diagnosis, after) = (&repaired.doc, &repaired.diagnosis, repaired.after.as_ref());
    if format != Format::Table {
        return write_doc(out, doc, format);
    }
    {
        let workspace = doc["workspace"].as_str().unwrap_or("");
        // Under `--maka`: a desktop that deletes the file is said before anything else.
        let judged = match doc["compatibility"].as_array() {
            Some(rows) => rows.iter().collect::<Vec<_>>(),
            None => vec![&doc["startup"]],
        };
        for s in judged.into_iter().filter(|s| s["desktop_deletes"] == true) {
            let build = s["release"].as_str().unwrap_or("");
            let w = crate::startup::desktop_warning(build, workspace);
            writeln!(out, "WARNING: {}", sanitize(&w))?;
        }
        writeln!(out, "workspace: {}", sanitize(workspace))?;
        render_diagnosis(out, diagnosis)?;
        if doc["applied"] == true {
            writeln!(out, "carried out:")?;
            if let Some(b) = doc["backup"].as_str() {
                writeln!(out, "  backup: {}", sanitize(b))?;
            }
            if let Some(r) = doc["rederived"].as_object() {
                let objects: Vec<&str> = r["objects"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let mut what = objects.join(", ");
                if r["registry_rows"].as_u64().unwrap_or(0) > 0 {
                    let rows = format!("{} registry row(s)", r["registry_rows"]);
                    what = if what.is_empty() {
                        rows
                    } else {
                        format!("{what}, {rows}")
                    };
                }
                writeln!(
                    out,
                    "  put back {}; bundle: {}",
                    sanitize(&what),
                    sanitize(r["bundle"].as_str().unwrap_or(""))
                )?;
            }
            for x in doc["excised"].as_array().into_iter().flatten() {
                let from = crate::excise::conversation(
                    x["session_id"].as_str().unwrap_or(""),
                    x["name"].as_str(),
                );
                writeln!(
                    out,
                    "  removed {} from {}; bundle: {}",
                    sanitize(x["removed"].as_str().unwrap_or("")),
                    sanitize(&from),
                    sanitize(x["bundle"].as_str().unwrap_or(""))
                )?;
            }
            for b in doc["bundles"].as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "  quarantined into {}",
                    sanitize(b.as_str().unwrap_or(""))
                )?;
            }
            writeln!(out, "  finalized {} run(s)", doc["finalized_runs"])?;
        }
        if let Some(a) = after {
            writeln!(out, "rescan: {}", super::diagnosis::state_line(a))?;
        }
        Ok(())
    }
}
