//! The session lines of `doctor quarantine`'s table, and of a restore of quarantine
//! bundles.

use std::io::Write;

use serde_json::Value;

use super::bundle::{rows_line, s, Table};
use super::sanitize::sanitize;

/// The table of `doctor quarantine` and of a restore of quarantine bundles (the rest
/// of the document is `report::bundle`'s).
pub(super) const TABLE: Table = Table {
    nothing: "nothing to quarantine: no session holds ledger damage",
    done: "quarantined",
    session: session_lines,
};

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
