//! `replay` output: a readable transcript (text), one JSON document, or NDJSON
//! records (`step`, `divergence`, then `summary`).

use std::collections::HashSet;
use std::io::{self, Write};

use serde_json::{json, Value};

use super::sanitize::sanitize;
use super::RenderOpts;
use crate::replay::{Divergence, Note, Replay, RunReplay, Step, StepBody, Supersession};

/// Output format of `replay`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayFormat {
    Text,
    Json,
    Ndjson,
}

/// The JSON document: the replay plus `source` (the database or bundle read).
pub fn replay_json(r: &Replay, source: &str) -> Value {
    let mut doc = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut doc {
        m.insert("source".into(), json!(source));
    }
    doc
}

/// Writes one replay.
pub fn render_replay(
    out: &mut dyn Write,
    r: &Replay,
    source: &str,
    format: ReplayFormat,
    opts: &RenderOpts,
) -> io::Result<()> {
    match format {
        ReplayFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &replay_json(r, source))?;
            writeln!(out)
        }
        ReplayFormat::Ndjson => ndjson(out, r, source, None),
        ReplayFormat::Text => text(out, r, opts),
    }
}

/// Writes one replay of several: NDJSON records carry `path`.
pub fn render_with_path(
    out: &mut dyn Write,
    r: &Replay,
    path: &str,
    format: ReplayFormat,
    opts: &RenderOpts,
) -> io::Result<()> {
    match format {
        ReplayFormat::Ndjson => ndjson(out, r, path, Some(path)),
        _ => render_replay(out, r, path, format, opts),
    }
}

fn ndjson(out: &mut dyn Write, r: &Replay, source: &str, path: Option<&str>) -> io::Result<()> {
    let mut line = |mut rec: Value| -> io::Result<()> {
        if let (Some(p), Value::Object(m)) = (path, &mut rec) {
            m.insert("path".into(), json!(p));
        }
        serde_json::to_writer(&mut *out, &rec)?;
        writeln!(out)
    };
    for run in &r.runs {
        for s in &run.steps {
            line(json!({"type": "step", "session_id": r.session_id, "data": s}))?;
        }
        for d in &run.divergences {
            line(json!({"type": "divergence", "session_id": r.session_id, "data": d}))?;
        }
    }
    for d in &r.divergences {
        line(json!({"type": "divergence", "session_id": r.session_id, "data": d}))?;
    }
    let mut doc = replay_json(r, source);
    if let Some(runs) = doc.get_mut("runs").and_then(Value::as_array_mut) {
        for run in runs {
            if let Value::Object(m) = run {
                m.remove("steps");
                m.remove("divergences");
            }
        }
    }
    if let Value::Object(m) = &mut doc {
        m.remove("divergences");
    }
    line(json!({"type": "summary", "session_id": r.session_id, "data": doc}))
}

struct Paint {
    on: bool,
}

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
    fn red(&self, s: &str) -> String {
        self.wrap("31", s)
    }
    fn green(&self, s: &str) -> String {
        self.wrap("32", s)
    }
    fn yellow(&self, s: &str) -> String {
        self.wrap("33", s)
    }
    fn cyan(&self, s: &str) -> String {
        self.wrap("36", s)
    }
}

/// Database text for a terminal: escaped, and cut to `max` characters.
fn clip(s: &str, max: usize) -> String {
    let clean = sanitize(s);
    if clean.chars().count() <= max {
        return clean;
    }
    let mut t: String = clean.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn values(d: &Divergence) -> String {
    if d.field.is_none() && d.stored.is_null() && d.implied.is_null() {
        return String::new();
    }
    let field = d
        .field
        .as_deref()
        .map_or(String::new(), |f| format!("{} ", sanitize(f)));
    format!(
        " [{field}stored {}, log implies {}]",
        clip(&compact(&d.stored), 120),
        clip(&compact(&d.implied), 120)
    )
}

fn divergence_line(p: &Paint, indent: &str, d: &Divergence) -> String {
    format!(
        "{indent}{} {}: {}{}",
        p.red("!"),
        p.red(d.code),
        sanitize(&d.message),
        values(d)
    )
}

fn note_line(p: &Paint, indent: &str, n: &Note) -> String {
    format!(
        "{indent}{} {}: {}",
        p.yellow("~"),
        p.yellow(n.code),
        sanitize(&n.message)
    )
}

fn text(out: &mut dyn Write, r: &Replay, opts: &RenderOpts) -> io::Result<()> {
    let p = Paint { on: opts.color };
    let width = usize::from(opts.width).max(60);
    let s = &r.summary;
    let name = r
        .session
        .name
        .as_deref()
        .map_or(String::new(), |n| format!(" \"{}\"", clip(n, 60)));
    writeln!(
        out,
        "{}{} · status {} · {} runs · {} events · {} tool calls ({} paired)",
        p.bold(&format!("session {}", sanitize(&r.session_id))),
        name,
        sanitize(r.session.status.as_deref().unwrap_or("unknown")),
        s.runs,
        s.events,
        s.tool_calls,
        s.paired
    )?;
    for run in &r.runs {
        writeln!(out)?;
        let groups: Vec<&Supersession> = r
            .supersession
            .iter()
            .filter(|g| g.run_id == run.run_id)
            .collect();
        run_block(out, &p, run, &groups, width)?;
    }
    let stray: Vec<&Supersession> = r
        .supersession
        .iter()
        .filter(|g| !r.runs.iter().any(|run| run.run_id == g.run_id))
        .collect();
    if !r.divergences.is_empty() || !r.notes.is_empty() || !stray.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", p.bold("session"))?;
        for d in &r.divergences {
            writeln!(out, "{}", divergence_line(&p, "  ", d))?;
        }
        for g in stray {
            writeln!(out, "{}", supersession_line(&p, "  ", g))?;
        }
        for n in &r.notes {
            writeln!(out, "{}", note_line(&p, "  ", n))?;
        }
    }
    writeln!(out)?;
    if s.divergences == 0 {
        writeln!(
            out,
            "{} the projections agree with the log ({} notes)",
            p.green("ok:"),
            s.notes
        )
    } else {
        let codes: Vec<String> = s
            .divergence_codes
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        writeln!(
            out,
            "{} {} divergences ({}), {} notes",
            p.red("diverged:"),
            s.divergences,
            codes.join(", "),
            s.notes
        )
    }
}

/// Which occurrence of a re-used id each projection kept.
fn supersession_line(p: &Paint, indent: &str, g: &Supersession) -> String {
    let kept = |x: Option<&str>| sanitize(x.unwrap_or("none"));
    format!(
        "{indent}{} {} `{}` occurs as {}; tool_operations keeps {}, transcript shows {}, model context keeps {}",
        p.cyan("re-used"),
        sanitize(&g.kind),
        sanitize(
            g.tool_call_id
                .as_deref()
                .or(g.operation_id.as_deref())
                .unwrap_or("?")
        ),
        sanitize(&g.event_ids.join(", ")),
        kept(g.kept.tool_operations.as_deref()),
        if g.kept.transcript.is_empty() {
            "none".to_owned()
        } else {
            sanitize(&g.kept.transcript.join(", "))
        },
        kept(g.kept.model_context.as_deref())
    )
}

fn run_block(
    out: &mut dyn Write,
    p: &Paint,
    run: &RunReplay,
    groups: &[&Supersession],
    width: usize,
) -> io::Result<()> {
    let max = width.saturating_sub(12).max(40);
    let status = run.status.as_deref().unwrap_or("unknown");
    let class = run.classification.as_deref().unwrap_or("unreadable");
    let header = run
        .header_status
        .as_deref()
        .map_or("no header".to_owned(), |h| format!("header {h}"));
    let op = run
        .operational_terminal
        .as_ref()
        .map_or("no run terminal event".to_owned(), |o| o.event_type.clone());
    let mut extra = String::new();
    if let Some(f) = &run.failure_class {
        extra.push_str(&format!(" · failure {}", sanitize(f)));
    }
    if let Some(a) = &run.abort_source {
        extra.push_str(&format!(" · abort {}", sanitize(a)));
    }
    writeln!(
        out,
        "{} {} · {} ({}) · {} · {}{}",
        p.bold(&format!("run {}", sanitize(&run.run_id))),
        p.dim(&format!(
            "turn {}",
            sanitize(run.turn_id.as_deref().unwrap_or("?"))
        )),
        status,
        class,
        header,
        op,
        extra
    )?;
    // Divergences shown next to a step; the rest go at the end of the block.
    let step_events: HashSet<&str> = run
        .steps
        .iter()
        .filter_map(|s| s.event_id.as_deref())
        .chain(run.steps.iter().filter_map(|s| match &s.body {
            StepBody::ToolCall {
                dispatch_event_id, ..
            } => dispatch_event_id.as_deref(),
            _ => None,
        }))
        .collect();
    let inline = |ids: &[&str]| -> Vec<&Divergence> {
        run.divergences
            .iter()
            .filter(|d| d.event_id.as_deref().is_some_and(|e| ids.contains(&e)))
            .collect()
    };
    let by_event = |id: &str| run.steps.iter().find(|s| s.event_id.as_deref() == Some(id));
    // A re-used id is shown after its last occurrence that has a step.
    let anchor_of = |g: &Supersession| -> Option<String> {
        g.event_ids
            .iter()
            .rev()
            .find(|e| step_events.contains(e.as_str()))
            .cloned()
    };
    let reused_at = |ids: &[&str]| -> Vec<&Supersession> {
        groups
            .iter()
            .copied()
            .filter(|g| anchor_of(g).is_some_and(|a| ids.contains(&a.as_str())))
            .collect()
    };
    let nested_results: HashSet<&str> = run
        .steps
        .iter()
        .filter_map(|s| match &s.body {
            StepBody::ToolCall {
                result_event_id: Some(r),
                ..
            } if by_event(r).is_some() => Some(r.as_str()),
            _ => None,
        })
        .collect();
    let assistant_ids: HashSet<&str> = run
        .steps
        .iter()
        .filter_map(|s| match &s.body {
            StepBody::Assistant { message_id, .. } => Some(message_id.as_str()),
            _ => None,
        })
        .collect();
    let mut open_step: Option<String> = None;
    for s in &run.steps {
        let id = s.event_id.as_deref().unwrap_or_default();
        if nested_results.contains(id) {
            continue;
        }
        let seq = s.event_seq.map_or("  ~".to_owned(), |q| format!("{q:>3}"));
        let lead = format!("  {} ", p.dim(&seq));
        match &s.body {
            StepBody::ToolCall {
                tool_call_id,
                tool_name,
                step_id,
                args,
                lane,
                operation_id,
                dispatch_event_id,
                result_event_id,
            } => {
                // Calls sit under the model step that made them.
                let step_key = step_id.clone().unwrap_or_default();
                if open_step.as_deref() != Some(step_key.as_str()) {
                    if !assistant_ids.contains(step_key.as_str()) {
                        writeln!(
                            out,
                            "{lead}{}",
                            p.dim(&format!(
                                "model step {}",
                                sanitize(step_id.as_deref().unwrap_or("(no step id)"))
                            ))
                        )?;
                    }
                    open_step = Some(step_key);
                }
                let lane = match lane {
                    crate::replay::Lane::T1 => {
                        format!("t1 {}", sanitize(operation_id.as_deref().unwrap_or("?")))
                    }
                    crate::replay::Lane::Generic => "generic".to_owned(),
                };
                writeln!(
                    out,
                    "{lead}    {} {} {} {}",
                    p.cyan(&format!("↳ {}", sanitize(tool_name))),
                    clip(&compact(args), max.saturating_sub(40)),
                    p.dim(&format!("[{}]", sanitize(tool_call_id))),
                    p.dim(&format!("({lane})"))
                )?;
                let mut ids = vec![id];
                if let Some(d) = dispatch_event_id {
                    ids.push(d);
                }
                for d in inline(&ids) {
                    writeln!(out, "{}", divergence_line(p, "          ", d))?;
                }
                for g in reused_at(&ids) {
                    writeln!(out, "{}", supersession_line(p, "          ", g))?;
                }
                match result_event_id.as_deref().and_then(by_event) {
                    Some(res) => {
                        result_line(out, p, "          ", res, max)?;
                        let rid = [res.event_id.as_deref().unwrap_or_default()];
                        for d in inline(&rid) {
                            writeln!(out, "{}", divergence_line(p, "            ", d))?;
                        }
                        for g in reused_at(&rid) {
                            writeln!(out, "{}", supersession_line(p, "            ", g))?;
                        }
                    }
                    None => writeln!(out, "          {}", p.red("→ no result"))?,
                }
                continue;
            }
            StepBody::ToolResult { .. } => {
                open_step = None;
                result_line(out, p, &format!("{lead}      "), s, max)?;
            }
            body => {
                if let StepBody::Assistant { message_id, .. } = body {
                    open_step = Some(message_id.clone());
                } else {
                    open_step = None;
                }
                step_line(out, p, &lead, s, max)?;
            }
        }
        for d in inline(&[id]) {
            writeln!(out, "{}", divergence_line(p, "        ", d))?;
        }
        for g in reused_at(&[id]) {
            writeln!(out, "{}", supersession_line(p, "        ", g))?;
        }
    }
    for g in groups.iter().filter(|g| anchor_of(g).is_none()) {
        writeln!(out, "{}", supersession_line(p, "  ", g))?;
    }
    for d in run.divergences.iter().filter(|d| {
        d.event_id
            .as_deref()
            .is_none_or(|e| !step_events.contains(e))
    }) {
        writeln!(out, "{}", divergence_line(p, "  ", d))?;
    }
    for n in &run.notes {
        writeln!(out, "{}", note_line(p, "  ", n))?;
    }
    Ok(())
}

fn result_line(
    out: &mut dyn Write,
    p: &Paint,
    indent: &str,
    s: &Step,
    max: usize,
) -> io::Result<()> {
    let StepBody::ToolResult {
        tool_call_id,
        tool_name,
        is_error,
        result,
        duration_ms,
        call_event_id,
        ..
    } = &s.body
    else {
        return Ok(());
    };
    let took = duration_ms.map_or(String::new(), |d| format!(" {d}ms"));
    let mark = if *is_error {
        p.red(&format!("→ error{took}"))
    } else {
        p.green(&format!("→ ok{took}"))
    };
    let orphan = if call_event_id.is_none() {
        format!(
            " {}",
            p.red(&format!(
                "result of {} [{}] without a call",
                sanitize(tool_name),
                sanitize(tool_call_id)
            ))
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "{indent}{mark}{orphan} {}",
        clip(&compact(result), max.saturating_sub(30))
    )
}

fn step_line(out: &mut dyn Write, p: &Paint, lead: &str, s: &Step, max: usize) -> io::Result<()> {
    let line = match &s.body {
        StepBody::User { text, steering, .. } => format!(
            "{} {}",
            p.bold(if *steering {
                "user (steering):"
            } else {
                "user:"
            }),
            clip(text, max)
        ),
        StepBody::Assistant { text, thinking, .. } => {
            let shown = if text.is_empty() {
                p.dim("(no text)")
            } else {
                clip(text, max)
            };
            let mut l = format!("{} {}", p.bold("assistant:"), shown);
            if let Some(t) = thinking {
                l.push_str(&format!(
                    "\n        {} {}",
                    p.dim("thinking:"),
                    p.dim(&clip(t, max))
                ));
            }
            l
        }
        StepBody::Thinking { text, .. } => {
            format!("{} {}", p.dim("thinking:"), p.dim(&clip(text, max)))
        }
        StepBody::Text { role, text } => format!("{}: {}", sanitize(role), clip(text, max)),
        StepBody::PermissionRequest {
            tool_name,
            tool_call_id,
            ..
        } => format!(
            "permission requested for {} [{}]",
            sanitize(tool_name.as_deref().unwrap_or("?")),
            sanitize(tool_call_id.as_deref().unwrap_or("?"))
        ),
        StepBody::PermissionDecision {
            decision,
            tool_call_id,
            ..
        } => format!(
            "permission {} [{}]",
            clip(&compact(decision), 60),
            sanitize(tool_call_id.as_deref().unwrap_or("?"))
        ),
        StepBody::TokenUsage {
            input,
            output,
            total,
        } => p.dim(&format!(
            "tokens: in {} out {} total {}",
            compact(input),
            compact(output),
            compact(total)
        )),
        StepBody::Error { message, code } => p.red(&format!(
            "error{}: {}",
            code.as_deref()
                .map_or(String::new(), |c| format!(" {}", sanitize(c))),
            clip(message, max)
        )),
        StepBody::TurnState {
            status,
            error_class,
            abort_source,
            error_message,
        } => {
            let st = status.as_deref().unwrap_or("unmapped");
            let mut l = format!("turn {}", st);
            if let Some(c) = error_class {
                l.push_str(&format!(" ({})", sanitize(c)));
            }
            if let Some(a) = abort_source {
                l.push_str(&format!(" (abort: {})", sanitize(a)));
            }
            if let Some(m) = error_message {
                l.push_str(&format!(": {}", clip(m, max)));
            }
            match st {
                "completed" => p.green(&l),
                _ => p.red(&l),
            }
        }
        StepBody::Partial { text, .. } => {
            p.yellow(&format!("partial (never completed): {}", clip(text, max)))
        }
        StepBody::Undecodable { message } => {
            p.red(&format!("undecodable row: {}", clip(message, max)))
        }
        StepBody::ToolCall { .. } | StepBody::ToolResult { .. } => String::new(),
    };
    writeln!(out, "{lead}{line}")
}

/// One bundle's result among several: its path as given, and its replay with the
/// exit status, or its error (message, hint).
pub type Outcome<'a> = (&'a str, Result<(&'a Replay, i32), (&'a str, &'a str)>);

/// The JSON document of several bundles' replays.
pub fn many_json(outcomes: &[Outcome<'_>]) -> Value {
    let results: Vec<Value> = outcomes
        .iter()
        .map(|(path, result)| match result {
            Ok((r, status)) => {
                let mut doc = replay_json(r, path);
                if let Value::Object(m) = &mut doc {
                    m.insert("path".into(), json!(path));
                    m.insert("status".into(), json!(*status));
                    m.insert("error".into(), Value::Null);
                }
                doc
            }
            Err((message, hint)) => json!({
                "path": path,
                "status": 2,
                "error": {"message": message, "hint": hint},
            }),
        })
        .collect();
    json!({"schema_version": 1, "results": results})
}
