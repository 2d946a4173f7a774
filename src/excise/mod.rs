//! `doctor excise`: remove exactly the damaged facts of the ledger (each scanner
//! issue's offending event, each undecodable `runtime_events` row), with what Maka's
//! foreign keys cascade from them and the tool projection rows only they imply, so the
//! conversation stays listed and whole.
//!
//! The plan ([`plan_on`]) names the events, reads every row their removal takes
//! (`db::excise`), and judges the result by scanning a private copy of the file with
//! the excision applied: a session is excised only where that leaves no damage in it
//! and no projection finding that was not there before; elsewhere quarantine is still
//! needed (`fallback`). [`apply`] owns the order of the writing steps.

pub mod apply;
pub mod gaps;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::db::excise::Excision;
use crate::db::{DbError, Workspace};
use crate::findings::Finding;
use crate::quarantine::damaged_sessions;
use crate::scan::{scan_workspace, ScanOptions, ScanReport};

/// One event to excise, and why.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Target {
    pub event_id: String,
    /// The scanner issue code, or `event_undecodable`.
    pub code: String,
}

/// The events the scan names as damage, by session (`only`: limit to these sessions
/// when not empty). The first, valid member of a duplicate pair is never named: the
/// scanner names the later one.
pub fn targets(report: &ScanReport, only: &[String]) -> BTreeMap<String, Vec<Target>> {
    let mut out: BTreeMap<String, BTreeSet<Target>> = BTreeMap::new();
    for issue in &report.issues {
        out.entry(issue.session_id.to_string())
            .or_default()
            .insert(Target {
                event_id: issue.event_id.to_string(),
                code: issue.code.as_str().to_owned(),
            });
    }
    for f in &report.findings {
        if let (true, Some(s), Some(e)) =
            (f.code == "event_undecodable", &f.session_id, &f.event_id)
        {
            out.entry(s.clone()).or_default().insert(Target {
                event_id: e.clone(),
                code: f.code.to_owned(),
            });
        }
    }
    // An event named twice (two issues) is excised once, under its first code. The
    // workspace-authority session is never touched (as quarantine never touches it).
    out.into_iter()
        .filter(|(s, _)| s != crate::scan::WORKSPACE_AUTHORITY_SESSION)
        .filter(|(s, _)| only.is_empty() || only.contains(s))
        .map(|(s, set)| {
            let mut seen = BTreeSet::new();
            let list = set
                .into_iter()
                .filter(|t| seen.insert(t.event_id.clone()))
                .collect();
            (s, list)
        })
        .collect()
}

/// What an excised event is, in the user's terms.
pub fn noun(code: &str, event_kind: Option<&str>) -> &'static str {
    if code == "event_undecodable" {
        return "unreadable event";
    }
    match event_kind {
        Some("function_response") => "tool result",
        Some("function_call") => "tool call",
        Some("tool_dispatch") => "tool dispatch record",
        _ => "event",
    }
}

/// "1 tool result, 2 tool calls".
pub fn count_words(nouns: &[&str]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for n in nouns {
        *counts.entry(n).or_default() += 1;
    }
    counts
        .iter()
        .map(|(n, c)| {
            if *c == 1 {
                format!("1 {n}")
            } else {
                format!("{c} {n}s")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One session's part of the plan.
#[derive(Clone, Debug)]
pub struct SessionPlan {
    pub session_id: String,
    pub name: Option<String>,
    pub targets: Vec<Target>,
    pub excision: Excision,
    /// Why quarantine is still needed for this session (`None`: excision heals it).
    pub fallback: Option<String>,
}

impl SessionPlan {
    /// Whether this session is excised.
    pub fn excised(&self) -> bool {
        self.fallback.is_none()
    }

    /// `event_kind` of an excised event, from its row.
    pub fn event_kind(&self, event_id: &str) -> Option<String> {
        self.excision
            .rows("runtime_events")
            .iter()
            .find(|r| r.get("event_id").and_then(|c| c.text_lossy()).as_deref() == Some(event_id))
            .and_then(|r| r.get("event_kind").and_then(|c| c.text_lossy()))
    }

    /// The cost in words: "removes 1 tool result from conversation "X"".
    pub fn cost(&self) -> String {
        format!(
            "removes {} from {}; the conversation stays listed with its messages",
            self.removed_words(),
            conversation(&self.session_id, self.name.as_deref())
        )
    }

    /// What goes, counted in the user's terms: "1 tool result".
    pub fn removed_words(&self) -> String {
        let kinds: Vec<Option<String>> = self
            .targets
            .iter()
            .map(|t| self.event_kind(&t.event_id))
            .collect();
        let nouns: Vec<&str> = self
            .targets
            .iter()
            .zip(&kinds)
            .map(|(t, k)| noun(&t.code, k.as_deref()))
            .collect();
        count_words(&nouns)
    }
}

/// `conversation "Title" (id)` or `conversation id`.
pub fn conversation(session: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("conversation \"{n}\" ({session})"),
        None => format!("conversation {session}"),
    }
}

/// The whole plan.
pub struct ExcisePlan {
    pub sessions: Vec<SessionPlan>,
    /// The scan of the file with every excised session's excision applied (`None`:
    /// nothing is excised).
    pub predicted: Option<ScanReport>,
}

impl ExcisePlan {
    /// The sessions excised.
    pub fn excised(&self) -> impl Iterator<Item = &SessionPlan> {
        self.sessions.iter().filter(|s| s.excised())
    }
}

/// Per planned session: `Ok(cost)` when the excision heals it, `Err(why not)`.
pub fn choices(plan: &ExcisePlan) -> BTreeMap<String, Result<String, String>> {
    plan.sessions
        .iter()
        .map(|p| {
            let c = match &p.fallback {
                None => Ok(p.cost()),
                Some(why) => Err(why.clone()),
            };
            (p.session_id.clone(), c)
        })
        .collect()
}

/// Projection findings of `after` that `before` does not have (keyed without the
/// message).
pub fn new_projection_findings<'a>(before: &ScanReport, after: &'a ScanReport) -> Vec<&'a Finding> {
    let key = |f: &Finding| {
        (
            f.code,
            f.session_id.clone(),
            f.event_id.clone(),
            f.operation_id.clone(),
            f.tool_call_id.clone(),
        )
    };
    let had: BTreeSet<_> = before
        .findings
        .iter()
        .filter(|f| f.code.starts_with("projection_"))
        .map(key)
        .collect();
    after
        .findings
        .iter()
        .filter(|f| f.code.starts_with("projection_") && !had.contains(&key(f)))
        .collect()
}

/// The session a finding belongs to, or, for a tool row with no session, the one of
/// its operation's excised event.
fn finding_session(f: &Finding, plans: &[SessionPlan]) -> Option<String> {
    if let Some(s) = &f.session_id {
        return Some(s.clone());
    }
    let op = f.operation_id.as_deref()?;
    plans
        .iter()
        .find(|p| {
            p.excision.rows("tool_operations").iter().any(|r| {
                r.get("operation_id")
                    .and_then(|c| c.text_lossy())
                    .as_deref()
                    == Some(op)
            })
        })
        .map(|p| p.session_id.clone())
}

/// Judges the excision of the planned sessions on `predicted` and marks those it
/// does not heal. Returns whether any session was newly marked.
fn judge(
    before: &ScanReport,
    predicted: &ScanReport,
    archived: &BTreeSet<String>,
    plans: &mut [SessionPlan],
) -> bool {
    let left = damaged_sessions(predicted, archived);
    let new: Vec<(Option<String>, String)> = new_projection_findings(before, predicted)
        .into_iter()
        .map(|f| (finding_session(f, plans), f.code.to_owned()))
        .collect();
    let mut changed = false;
    for p in plans.iter_mut().filter(|p| p.fallback.is_none()) {
        let why = if let Some(reasons) = left.get(&p.session_id) {
            let codes: BTreeSet<&str> = reasons.iter().map(|r| r.code.as_str()).collect();
            Some(format!(
                "damage is left after the excision ({})",
                codes.into_iter().collect::<Vec<_>>().join(", ")
            ))
        } else if let Some((_, code)) = new
            .iter()
            .find(|(s, _)| s.as_deref().is_none_or(|s| s == p.session_id))
        {
            Some(format!(
                "the tool projections would then differ from Maka's rebuild ({code})"
            ))
        } else {
            None
        };
        if why.is_some() {
            p.fallback = why;
            changed = true;
        }
    }
    changed
}

/// The excision of the events `report` names (`only`: sessions to limit it to), as
/// `doctor scan`'s diagnosis shows it: the events themselves, read by key, and not yet
/// judged. The rows the excision takes and what blocks it (whole-table reads of the
/// tool projections) and its judgement on a scanned copy (about as much again as the
/// scan) are left to the commands that write it, `doctor excise` and `doctor repair`
/// ([`plan_on`]), before they write.
pub fn plan_named(
    ws: &Workspace,
    report: &ScanReport,
    only: &[String],
) -> Result<ExcisePlan, DbError> {
    plan_sessions(ws, report, only, false)
}

/// `plan_named`, with every row each excision takes and its blockers read when
/// `full`.
fn plan_sessions(
    ws: &Workspace,
    report: &ScanReport,
    only: &[String],
    full: bool,
) -> Result<ExcisePlan, DbError> {
    let named = targets(report, only);
    let labels = ws.session_labels(named.keys().map(String::as_str))?;
    let mut sessions = Vec::new();
    for (s, list) in named {
        let events: Vec<String> = list.iter().map(|t| t.event_id.clone()).collect();
        let excision = if full {
            ws.excision(&s, &events)?
        } else {
            ws.excision_events(&s, &events)?
        };
        let fallback = (!excision.blockers.is_empty()).then(|| {
            format!(
                "the excision cannot be written: {}",
                excision.blockers.join("; ")
            )
        });
        sessions.push(SessionPlan {
            name: labels.get(&s).and_then(|l| l.name.clone()),
            session_id: s,
            targets: list,
            excision,
            fallback,
        });
    }
    Ok(ExcisePlan {
        sessions,
        predicted: None,
    })
}

/// Plans the excision on `ws` from its scan `report` (`only`: sessions to limit it
/// to), judged on scans of private copies of the file (never the file itself) with
/// it applied: a session whose excision would leave damage or change the tool
/// projections falls back to quarantine.
pub fn plan_on(
    ws: &Workspace,
    report: &ScanReport,
    archived: &BTreeSet<String>,
    only: &[String],
) -> Result<ExcisePlan, DbError> {
    let ExcisePlan { mut sessions, .. } = plan_sessions(ws, report, only, true)?;
    let rules = crate::release::recognize(&ws.schema_facts()?).rules();
    // At most as many rounds as sessions: each round either settles or drops one.
    let mut predicted = None;
    for _ in 0..=sessions.len() {
        let chosen: Vec<Excision> = sessions
            .iter()
            .filter(|p| p.excised())
            .map(|p| p.excision.clone())
            .collect();
        if chosen.is_empty() {
            predicted = None;
            break;
        }
        let copy = ws.excised_copy(&chosen)?;
        // Judged under the rules of the release that wrote the file (naming them
        // skips the upgrade preview, which the judgement does not read).
        let opts = ScanOptions {
            no_total: true,
            rules: Some(rules),
            ..ScanOptions::default()
        };
        let after = scan_workspace(&copy, opts, &mut |_, _| {})?;
        let changed = judge(report, &after, archived, &mut sessions);
        predicted = Some(after);
        if !changed {
            break;
        }
    }
    Ok(ExcisePlan {
        sessions,
        predicted,
    })
}

/// The file name of an excision bundle: the session's, marked as an excision and
/// stamped, so later excisions of the same session never overwrite it.
pub fn bundle_file_name(session: &str, stamp: &str) -> String {
    let q = crate::quarantine::bundle_file_name(session);
    let stem = q.strip_suffix(".bundle.json").unwrap_or(&q);
    format!("{stem}.excise-{stamp}.bundle.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nouns_and_counts_read_as_the_user_would() {
        assert_eq!(
            noun("orphan_response", Some("function_response")),
            "tool result"
        );
        assert_eq!(noun("duplicate_call", Some("function_call")), "tool call");
        assert_eq!(
            noun("event_undecodable", Some("function_call")),
            "unreadable event"
        );
        assert_eq!(count_words(&["tool result"]), "1 tool result");
        assert_eq!(
            count_words(&["tool call", "tool result", "tool call"]),
            "2 tool calls, 1 tool result"
        );
    }

    #[test]
    fn bundle_names_are_stamped_and_safe() {
        assert_eq!(
            bundle_file_name("../a", "20261206T000000Z"),
            "%2E.%2Fa.excise-20261206T000000Z.bundle.json"
        );
    }
}
