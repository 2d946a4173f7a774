//! `doctor finalize-runs` output: the plan as a table, one JSON document, or NDJSON.

use std::io::{self, Write};

use comfy_table::{presets, Cell, ContentArrangement, Table};
use serde_json::{json, Value};

use super::sanitize::sanitize;
use super::{Format, RenderOpts};
use crate::finalize::Plan;

/// The NDJSON summary record's `data`: the document without `plan` and `skipped`.
pub fn summary_json(plan: &Plan) -> Value {
    json!({
        "schema_version": plan.schema_version,
        "applied": plan.applied,
        "backup": plan.backup,
        "planned": plan.plan.len(),
        "skipped": plan.skipped.len(),
    })
}

/// Writes the plan. `footer` lines follow the table (table format only).
pub fn render_plan(
    out: &mut dyn Write,
    plan: &Plan,
    path: &str,
    format: Format,
    opts: &RenderOpts,
    footer: &[String],
) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, plan)?;
            writeln!(out)
        }
        Format::Ndjson => {
            for e in &plan.plan {
                serde_json::to_writer(&mut *out, &json!({"type": "plan", "data": e}))?;
                writeln!(out)?;
            }
            for s in &plan.skipped {
                serde_json::to_writer(&mut *out, &json!({"type": "skipped", "data": s}))?;
                writeln!(out)?;
            }
            serde_json::to_writer(
                &mut *out,
                &json!({"type": "summary", "data": summary_json(plan)}),
            )?;
            writeln!(out)
        }
        _ => render_table(out, plan, path, opts, footer),
    }
}

/// The "session / run" cell: the session over the run.
fn run_cell(session: &str, run: &str) -> Cell {
    Cell::new(format!("{}\n{}", sanitize(session), sanitize(run)))
}

fn table(opts: &RenderOpts, header: Vec<&str>) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(opts.width)
        .set_header(header);
    if !opts.color {
        t.force_no_tty();
    }
    t
}

/// Ids are what users copy into the next command: never wrap those columns.
fn keep_ids_whole(t: &mut Table, columns: &[usize]) {
    for &c in columns {
        if let Some(col) = t.column_mut(c) {
            col.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
        }
    }
}

fn render_table(
    out: &mut dyn Write,
    plan: &Plan,
    path: &str,
    opts: &RenderOpts,
    footer: &[String],
) -> io::Result<()> {
    writeln!(out, "workspace: {}", sanitize(path))?;
    if plan.plan.is_empty() {
        writeln!(out, "nothing to finalize")?;
    } else {
        let mut t = table(
            opts,
            vec![
                "session / run",
                "action",
                "status",
                "event (seq, ordinal)",
                "reason",
                "ts",
            ],
        );
        for e in &plan.plan {
            let mut status = e.status.clone();
            if let Some(f) = &e.failure_class {
                status.push_str(&format!("\n{}", sanitize(f)));
            }
            let mut event = format!(
                "{}\nseq {}, ordinal {}",
                sanitize(&e.event_id),
                e.event_seq,
                e.ordinal.map_or_else(|| "-".to_owned(), |o| o.to_string())
            );
            for op in &e.settles {
                event.push_str(&format!("\nsettles {}", sanitize(op)));
            }
            t.add_row(vec![
                run_cell(&e.session_id, &e.run_id),
                Cell::new(e.action.as_str()),
                Cell::new(status),
                Cell::new(event),
                Cell::new(sanitize(&e.recovery_reason)),
                Cell::new(e.ts.to_string()),
            ]);
        }
        // Every cell is an id or a short code: better a wide table than broken words.
        t.set_content_arrangement(ContentArrangement::Disabled);
        writeln!(out, "{t}")?;
        for e in &plan.plan {
            if let Some(f) = &e.transcript_file {
                writeln!(
                    out,
                    "run {} appends one turn_state line to {}",
                    sanitize(&e.run_id),
                    sanitize(f)
                )?;
            }
        }
    }
    if !plan.skipped.is_empty() {
        writeln!(out, "left alone:")?;
        let mut t = table(opts, vec!["session / run", "reason", "detail"]);
        for s in &plan.skipped {
            t.add_row(vec![
                run_cell(&s.session_id, &s.run_id),
                Cell::new(s.reason.as_str()),
                Cell::new(sanitize(&s.detail)),
            ]);
        }
        keep_ids_whole(&mut t, &[0]);
        writeln!(out, "{t}")?;
    }
    writeln!(
        out,
        "{} run(s) planned, {} left alone; {}",
        plan.plan.len(),
        plan.skipped.len(),
        if plan.applied {
            "applied"
        } else {
            "nothing written"
        }
    )?;
    if let Some(b) = &plan.backup {
        writeln!(out, "backup: {}", sanitize(b))?;
    }
    if let Some(b) = &plan.transcript_backup {
        writeln!(out, "transcript backup: {}", sanitize(b))?;
    }
    for line in footer {
        writeln!(out, "{line}")?;
    }
    Ok(())
}
