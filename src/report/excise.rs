//! The session lines of `doctor excise`'s table, and of a restore of excision bundles.

use std::io::Write;

use serde_json::Value;

use super::bundle::{rows_line, s, Table};
use super::sanitize::sanitize;

/// The table of `doctor excise` and of a restore of excision bundles (the rest of the
/// document is `report::bundle`'s).
pub(super) const TABLE: Table = Table {
    nothing: "nothing to excise: no event is damaged",
    done: "excised",
    session: session_lines,
};

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
