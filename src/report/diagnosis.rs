//! The diagnosis for people: why runs are stuck, which conversations are damaged and
//! what setting them aside costs, the ordered plan and the state it leaves.

use std::io::{self, Write};

use super::sanitize::sanitize;
use crate::diagnosis::{After, Diagnosis};

/// `YYYY-MM-DD HH:MM UTC` of a millisecond timestamp (days to civil date after
/// Howard Hinnant's algorithm; no time-zone database needed).
pub fn utc_minute(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

fn session_label(name: Option<&str>, id: &str) -> String {
    match name {
        Some(n) if !n.is_empty() => format!("\"{}\" (session {})", sanitize(n), sanitize(id)),
        _ => format!("session {}", sanitize(id)),
    }
}

/// The gate, start-up and stuck runs of a state, in one line.
pub(super) fn state_line(a: &After) -> String {
    format!(
        "tool writes {}; start-up {}; {} stuck run(s)",
        if a.tool_writes_refused {
            "REFUSED"
        } else {
            "accepted"
        },
        if a.startup_unknown {
            "not known"
        } else if a.startup_blocked {
            "BLOCKED"
        } else {
            "not blocked"
        },
        a.stuck_runs
    )
}

/// Writes the diagnosis after a scan's table (or as `doctor repair`'s plan).
pub fn render_diagnosis(out: &mut dyn Write, d: &Diagnosis) -> io::Result<()> {
    if let Some(b) = &d.blast_radius {
        writeln!(out, "blast radius: {}", sanitize(b))?;
    }
    if !d.causes.is_empty() {
        writeln!(out, "why runs are stuck:")?;
        for c in &d.causes {
            let when = c
                .last_activity_ms
                .map(|ms| format!(", last event {}", utc_minute(ms)))
                .unwrap_or_default();
            writeln!(
                out,
                "  run {} in {}{when}: {}",
                sanitize(&c.run_id),
                session_label(c.session_name.as_deref(), &c.session_id),
                c.code
            )?;
            writeln!(out, "    {}", sanitize(&c.summary))?;
            if let Some(t) = c.evidence.get("trace_write_error").and_then(|v| v.as_str()) {
                writeln!(out, "    the run header's traceWriteError: {}", sanitize(t))?;
            }
            if let Some(cmd) = c.evidence.get("read_with").and_then(|v| v.as_str()) {
                writeln!(out, "    read the partial text: {}", sanitize(cmd))?;
            }
            if let Some(op) = c.evidence.get("operation_id").and_then(|v| v.as_str()) {
                writeln!(out, "    operation {}", sanitize(op))?;
            }
        }
    }
    if !d.damaged_sessions.is_empty() {
        writeln!(out, "damaged sessions:")?;
        for s in &d.damaged_sessions {
            let when = s
                .last_activity_ms
                .map(|ms| format!(", last active {}", utc_minute(ms)))
                .unwrap_or_default();
            writeln!(
                out,
                "  {}{when}",
                session_label(s.name.as_deref(), &s.session_id)
            )?;
            for r in &s.reasons {
                let at =
                    r.id.as_deref()
                        .map(|i| format!(" at {}", sanitize(i)))
                        .unwrap_or_default();
                writeln!(out, "    {}{at}", sanitize(&r.code))?;
                if let Some(p) = &r.producer {
                    writeln!(
                        out,
                        "      probably {} (an inference from the event's shape)",
                        p.code
                    )?;
                }
            }
            match (&s.excise_cost, &s.excise_fallback) {
                (Some(cost), None) => {
                    writeln!(out, "    excise (the plan's choice): {}", sanitize(cost))?;
                    writeln!(
                        out,
                        "    quarantine (not needed): {}",
                        sanitize(&s.quarantine_cost)
                    )?;
                }
                (_, why) => {
                    if let Some(why) = why {
                        writeln!(out, "    excise: not enough here: {}", sanitize(why))?;
                    }
                    writeln!(
                        out,
                        "    quarantine (the plan's choice): {}",
                        sanitize(&s.quarantine_cost)
                    )?;
                }
            }
        }
    }
    if d.plan.steps.is_empty() {
        writeln!(out, "plan: nothing to do")?;
    } else {
        writeln!(out, "plan:")?;
        for (i, s) in d.plan.steps.iter().enumerate() {
            writeln!(out, "  {}. {}", i + 1, sanitize(&s.command))?;
            writeln!(out, "     fixes: {}", sanitize(&s.fixes))?;
            writeln!(out, "     costs: {}", sanitize(&s.costs))?;
            writeln!(
                out,
                "     reversible: {} ({})",
                if s.reversible { "yes" } else { "no" },
                sanitize(&s.undo)
            )?;
        }
        if let Some(all) = &d.plan.all_in_one {
            writeln!(out, "  all steps at once: {}", sanitize(all))?;
        }
        if let Some(why) = &d.plan.refused {
            writeln!(out, "  not yet: {}", sanitize(why))?;
        }
    }
    if let Some(why) = &d.plan.startup_refused {
        writeln!(out, "start-up: {}", sanitize(why))?;
    }
    writeln!(out, "now:   {}", state_line(&d.before))?;
    writeln!(out, "after: {}", state_line(&d.after))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_minutes() {
        assert_eq!(super::utc_minute(0), "1970-01-01 00:00 UTC");
        assert_eq!(super::utc_minute(1_764_579_603_963), "2025-12-01 09:00 UTC");
        assert_eq!(super::utc_minute(951_782_400_000), "2000-02-29 00:00 UTC");
    }
}
