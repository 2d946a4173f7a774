//! What the other Maka builds do with the file, for people: the loud warning when the
//! build judged deletes the file at desktop start, the one line under `start-up:` that
//! says where the other builds disagree, the `--maka all` table, and the upgrade
//! preview's lines.

use std::io::{self, Write};

use crate::scan::release::UpgradePreview;
use crate::scan::ScanReport;
use crate::startup::Startup;

/// The warnings printed before anything else: one per build judged (`startup`, or
/// every row of `--maka all`) whose desktop deletes the file at start.
pub fn desktop_warnings(report: &ScanReport, database: &str) -> Vec<String> {
    crate::startup::desktop_warnings(
        report.startup.as_ref(),
        report.compatibility.as_deref(),
        database,
    )
}

/// Names of consecutive catalogued builds: `a`, `a, b`, `a-c`.
fn span(builds: &[&str]) -> String {
    match builds {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [a, b] => format!("{a}, {b}"),
        [first, .., last] => format!("{first}-{last}"),
    }
}

/// What a build's composition does, in the words the summary groups by: refusals by
/// reason, migrations by their first step (the runtime's, where it migrates); `full`
/// lists every step.
fn outcome(s: &Startup, plural: bool, full: bool) -> String {
    let verb = |one: &str, many: &str| if plural { many } else { one }.to_owned();
    if let Some(r) = &s.refusal {
        return format!(
            "{} ({})",
            verb("refuses", "refuse"),
            r.reason.replace('_', " ")
        );
    }
    if !s.known() {
        return "not known".to_owned();
    }
    if s.migrations.is_empty() {
        return format!("{} it as it is", verb("opens", "open"));
    }
    let steps: Vec<String> = s
        .migrations
        .iter()
        .take(if full { usize::MAX } else { 1 })
        .map(|m| match (m.from, m.to) {
            (_, None) => format!("{} removed", m.store),
            (Some(a), Some(b)) if a == b => format!("{} recreated", m.store),
            (Some(a), Some(b)) => format!("{} {a}->{b}", m.store),
            (None, Some(b)) => format!("{} created at {b}", m.store),
        })
        .collect();
    format!("{} {}", verb("migrates", "migrate"), steps.join(", "))
}

/// `other builds: …`: where the other catalogued builds' compositions differ from the
/// build judged, in runs of builds that agree, and which desktops delete the file.
/// `None` when they all agree.
pub fn other_builds_line(judged: Option<&Startup>, builds: &[Startup]) -> Option<String> {
    let judged = judged?;
    let mine = outcome(judged, false, false);
    let others: Vec<&Startup> = builds
        .iter()
        .filter(|s| s.release != judged.release)
        .collect();
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for s in &others {
        let key = outcome(s, false, false);
        match groups.last_mut() {
            Some((k, builds)) if *k == key => builds.push(&s.release),
            _ => groups.push((key, vec![&s.release])),
        }
    }
    let deleting: Vec<&str> = others
        .iter()
        .filter(|s| s.desktop_deletes)
        .map(|s| s.release.as_str())
        .collect();
    if groups.iter().all(|(k, _)| *k == mine) && deleting.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = Vec::new();
    for (_, builds) in &groups {
        let s = others
            .iter()
            .find(|s| s.release == builds[0])
            .expect("a build of the group");
        parts.push(format!(
            "{} {}",
            span(builds),
            outcome(s, builds.len() > 1, false)
        ));
    }
    if !deleting.is_empty() {
        let (apps, verb) = if deleting.len() > 1 {
            ("desktop apps", "delete")
        } else {
            ("desktop app", "deletes")
        };
        parts.push(format!(
            "{} {apps} {verb} this file at start",
            deleting.join(", ")
        ));
    }
    Some(format!("other builds: {}", parts.join(" · ")))
}

/// The `--maka all` table: one row per catalogued build.
pub fn render_compatibility(out: &mut dyn Write, rows: &[Startup]) -> io::Result<()> {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_header(vec!["maka", "opens", "start-up", "desktop", "why"]);
    t.force_no_tty();
    for s in rows {
        let (opens, why) = match (&s.refusal, &s.not_known) {
            (Some(r), _) => ("REFUSES", format!("{}: \"{}\"", r.reason, r.maka_message)),
            (None, Some(newer)) => ("not known", format!("a Maka newer than wsledger ({newer})")),
            (None, None) => ("yes", outcome(s, false, true)),
        };
        let strict = if s.opens != Some(true) {
            "-".to_owned()
        } else if s.strict_recovery.blocked {
            format!("BLOCKED ({} blocker(s))", s.strict_recovery.blockers.len())
        } else {
            "ok".to_owned()
        };
        let desktop = if s.desktop_deletes {
            "DELETES"
        } else {
            "keeps"
        };
        t.add_row(vec![
            s.release.clone(),
            opens.to_owned(),
            strict,
            desktop.to_owned(),
            crate::sanitize::sanitize(&why),
        ]);
    }
    writeln!(out, "{t}")
}

/// One line per run of upgrade targets that say the same: `after upgrading to v0.1.7-
/// v0.1.10 (migrates one way): start-up ok, tool writes accepted`.
pub fn upgrade_lines(p: &UpgradePreview) -> Vec<String> {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for t in &p.targets {
        let mut verdict = match t.migration.as_str() {
            "refuses" => match t.composition.as_ref().and_then(|c| c.refusal.as_ref()) {
                Some(r) => format!(
                    "refuses to open this file ({}, store {}), leaving it as it is",
                    r.reason, r.store
                ),
                None => "refuses to migrate this file".to_owned(),
            },
            "not_measured" => "migration not measured for this release's file".to_owned(),
            "not_known" => {
                let tasks = t.unfinished_tasks.as_ref().map_or(0, |u| u.total);
                let deleted = match tasks {
                    0 => "no unfinished task to delete".to_owned(),
                    n => format!("DELETES {n} unfinished task(s)"),
                };
                format!(
                    "start-up not known (from its release notes, not its code); {deleted}; \
                     the sessions it writes no longer open in 0.1.x: copy the workspace first"
                )
            }
            _ => format!(
                "start-up {}, tool writes {}",
                if t.startup_blocked == Some(true) {
                    "BLOCKED"
                } else {
                    "ok"
                },
                if t.tool_writes_refused == Some(true) {
                    "REFUSED"
                } else {
                    "accepted"
                }
            ),
        };
        if t.desktop_deletes == Some(true) {
            verdict.push_str("; its desktop app DELETES the file at start");
        }
        match groups.last_mut() {
            Some((v, builds)) if *v == verdict => builds.push(&t.release),
            _ => groups.push((verdict, vec![&t.release])),
        }
    }
    groups
        .into_iter()
        .map(|(verdict, builds)| {
            format!(
                "after upgrading to {} (migrates one way): {verdict}",
                span(&builds)
            )
        })
        .collect()
}
