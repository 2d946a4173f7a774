//! Every Maka build's word on the file, on top of one scan: whether its composition
//! opens the file (`crate::startup`), whether its desktop deletes it, and, where it
//! opens it, its strict recovery and its gate. `--maka`, `--maka all`, the upgrade
//! preview and the table's "other builds" line all come from here.
//!
//! The scan ran once, under the writer's rules. A build with other rules is judged
//! from it: the headers the writer reads are read again under every other rule set in
//! one pass (what a build cannot decode stops its strict recovery); the log is scanned
//! again only where the answer can differ: under an older, stricter decoder, or under a
//! newer, laxer one where the writer's gate refuses or its recovery stops.

use std::collections::BTreeSet;

use super::pipeline::{scan_workspace_without, ScanOptions};
use super::release::UpgradeHeader;
use super::startup::startup_blockers;
use super::{MakaGate, ScanReport};
use crate::db::startup::StartupFacts;
use crate::db::{DbError, Workspace};
use crate::release::{release_rank, upgrade, Rules};
use crate::startup::{builds, Blocker, Startup, Verdict};

/// A strict-recovery blocker as `startup_blockers` gives it: session, run, code.
type Stop = (String, String, &'static str);

/// One build's word on the file.
#[derive(Clone, Debug)]
pub struct Judged {
    pub build: &'static str,
    pub verdict: Verdict,
    pub desktop_deletes: bool,
    /// Headers the writer reads and this build cannot (only where it opens the file).
    pub undecodable_headers: Vec<UpgradeHeader>,
    /// This build's gate, where the log was scanned again under its rules.
    pub gate: Option<MakaGate>,
    pub tool_writes_refused: bool,
    /// What stops its strict recovery (only where it opens the file).
    pub blockers: Vec<Blocker>,
}

impl Judged {
    /// The `startup` object of this build.
    pub fn startup(&self) -> Startup {
        Startup::new(
            self.verdict.clone(),
            self.blockers.clone(),
            self.desktop_deletes,
        )
    }
}

/// The rules `build` judges a file of a generation at `writer_rank` by: a newer build
/// reads it after its own migrations (which rewrite the statuses it no longer keeps),
/// an older or equal one as it is.
pub fn rules_for(build: &str, writer_rank: usize) -> Rules {
    let release = builds::rules_of(build);
    if release_rank(release).is_some_and(|r| r > writer_rank) {
        upgrade::target_rules(release)
    } else {
        Rules::for_release(release)
    }
}

/// Whether two rule sets can disagree on what decodes in the log (as opposed to the
/// headers, which are read again for every rule set).
fn log_rules_differ(a: &Rules, b: &Rules) -> bool {
    a.decoder != b.decoder
        || a.dispatch_parent_refs != b.dispatch_parent_refs
        || a.header.run_event_types != b.header.run_event_types
}

/// Judges each of `wanted` on the file `report` scanned (`writer_rank`, `writer`: its
/// generation's place and rules). `facts` are the start-up facts of the same snapshot.
pub fn judge_builds(
    ws: &Workspace,
    opts: ScanOptions,
    report: &ScanReport,
    facts: &StartupFacts,
    wanted: &[&'static str],
    writer_rank: usize,
    writer: Rules,
) -> Result<Vec<Judged>, DbError> {
    let schema_tables = |t: &str| facts.has_table(t);
    // Archived sessions are read only when some run could block (rare).
    let mut archived: Option<BTreeSet<String>> = None;
    let mut archived_of = |ws: &Workspace| -> Result<BTreeSet<String>, DbError> {
        if archived.is_none() {
            archived = Some(ws.archived_sessions()?);
        }
        Ok(archived.clone().unwrap_or_default())
    };
    let mut base = startup_blockers(report, &BTreeSet::new());
    if !base.is_empty() {
        base = startup_blockers(report, &archived_of(ws)?);
    }
    let verdicts: Vec<(&'static str, Verdict, bool)> = wanted
        .iter()
        .filter_map(|b| {
            let v = crate::startup::verdict(facts, b)?;
            Some((*b, v, builds::desktop_deletes(facts, b)))
        })
        .collect();
    // Every other rule set of a build that opens the file, once.
    let mut others: Vec<Rules> = Vec::new();
    for (b, v, _) in &verdicts {
        let r = rules_for(b, writer_rank);
        if v.opens && r != writer && !others.contains(&r) {
            others.push(r);
        }
    }
    let headers = unreadable_headers(ws, &others, writer, &schema_tables)?;
    let writer_stops = report.maka_gate.tool_writes_refused || !base.is_empty();
    // The rule sets whose reading of the log can differ from the writer's: an older,
    // stricter one always; a newer, laxer one where the writer's gate refuses or its
    // recovery stops. Newer ones newest first: the rules only grew, so what the laxest
    // still refuses and stops on, every build between it and the writer does too, and
    // where the laxest says what the writer says, so does every build between them.
    let mut logs: Vec<(usize, Rules)> = Vec::new();
    for (b, v, _) in &verdicts {
        let rules = rules_for(b, writer_rank);
        let rank = release_rank(builds::rules_of(b)).unwrap_or(0);
        let older = rank < writer_rank;
        if v.opens
            && rules != writer
            && log_rules_differ(&rules, &writer)
            && (older || writer_stops)
            && !logs.iter().any(|(_, r)| *r == rules)
        {
            logs.push((rank, rules));
        }
    }
    logs.sort_by_key(|(rank, _)| std::cmp::Reverse(*rank));
    let mut read: Vec<(Rules, Option<MakaGate>, Vec<Stop>)> = Vec::new();
    let mut laxest_agrees = false;
    for (rank, rules) in logs {
        let newer = rank > writer_rank;
        if newer && laxest_agrees {
            read.push((rules, None, base.clone()));
            continue;
        }
        let again = ScanOptions {
            rules: Some(rules),
            maka: None,
            ..opts
        };
        let r = scan_workspace_without(ws, again, &BTreeSet::new(), &mut |_, _| {})?;
        let mut b = startup_blockers(&r, &BTreeSet::new());
        if !b.is_empty() {
            b = startup_blockers(&r, &archived_of(ws)?);
        }
        if newer && !read.iter().any(|(_, g, _)| g.is_some()) {
            laxest_agrees = r.maka_gate.tool_writes_refused == report.maka_gate.tool_writes_refused
                && b == base;
        }
        read.push((rules, Some(r.maka_gate), b));
    }
    let mut out = Vec::new();
    for (build, verdict, desktop_deletes) in verdicts {
        let rules = rules_for(build, writer_rank);
        let mut judged = Judged {
            build,
            verdict,
            desktop_deletes,
            undecodable_headers: Vec::new(),
            gate: None,
            tool_writes_refused: report.maka_gate.tool_writes_refused,
            blockers: Vec::new(),
        };
        if !judged.verdict.opens {
            out.push(judged);
            continue;
        }
        let mut stops = base.clone();
        if let Some((_, gate, b)) = read.iter().find(|(r, _, _)| *r == rules) {
            if let Some(gate) = gate {
                judged.tool_writes_refused = gate.tool_writes_refused;
                judged.gate = Some(gate.clone());
            }
            stops = b.clone();
        }
        if rules != writer {
            if let Some((_, bad)) = headers.iter().find(|(r, _)| *r == rules.header) {
                judged.undecodable_headers = bad.clone();
            }
        }
        let runs_there = judged
            .undecodable_headers
            .iter()
            .any(|h| h.run_id.is_some());
        let gone = if runs_there {
            archived_of(ws)?
        } else {
            BTreeSet::new()
        };
        for h in &judged.undecodable_headers {
            let key = match &h.run_id {
                Some(_) if gone.contains(&h.session_id) => continue,
                Some(r) => (h.session_id.clone(), r.clone(), "run_header_undecodable"),
                None => (
                    h.session_id.clone(),
                    String::new(),
                    "session_header_undecodable",
                ),
            };
            if !stops.contains(&key) {
                stops.push(key);
            }
        }
        judged.blockers = stops
            .into_iter()
            .map(|(session_id, run_id, code)| Blocker {
                session_id,
                run_id,
                code: code.to_owned(),
            })
            .collect();
        out.push(judged);
    }
    Ok(out)
}

/// The session and run headers that the writer's rules read and each of `others`'
/// header rules do not: one pass over each table for every rule set.
fn unreadable_headers(
    ws: &Workspace,
    others: &[Rules],
    writer: Rules,
    has: &dyn Fn(&str) -> bool,
) -> Result<Vec<(crate::release::rules::HeaderRules, Vec<UpgradeHeader>)>, DbError> {
    use crate::header::decode_header_as;
    use crate::session_header::check_session_header;
    let mut sets: Vec<(crate::release::rules::HeaderRules, Vec<UpgradeHeader>)> = Vec::new();
    for r in others {
        if !sets.iter().any(|(h, _)| *h == r.header) {
            sets.push((r.header, Vec::new()));
        }
    }
    if sets.is_empty() {
        return Ok(sets);
    }
    if has("session_metadata") {
        ws.for_each_session_header(|row| {
            if check_session_header(&row, &writer.header).is_err() {
                return;
            }
            for (rules, bad) in sets.iter_mut() {
                if let Err(why) = check_session_header(&row, rules) {
                    bad.push(UpgradeHeader {
                        session_id: row.session_id.clone(),
                        run_id: None,
                        message: why,
                    });
                }
            }
        })?;
    }
    if has("core_agent_runs") {
        ws.for_each_header_row(|row, keys_ok| {
            let (rec, s, r) = (&row.record_json, &row.session_id, &row.run_id);
            if !keys_ok || decode_header_as(rec, s, r, &writer.header).is_err() {
                return;
            }
            for (rules, bad) in sets.iter_mut() {
                if let Err(why) = decode_header_as(rec, s, r, rules) {
                    bad.push(UpgradeHeader {
                        session_id: s.clone(),
                        run_id: Some(r.clone()),
                        message: why,
                    });
                }
            }
        })?;
    }
    Ok(sets)
}
