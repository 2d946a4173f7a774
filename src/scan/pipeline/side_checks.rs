//! Checks read beside the walk (on the second connection when there is one): session
//! headers and stored messages, and `core_agent_run_events` records.

use super::exclusion::Exclusion;
use super::header_briefs::HeaderBriefs;
use crate::db::{DbError, Workspace};
use crate::scan::HeaderBrief;

/// Every session header Maka's start-up cannot read, under the writer's rules, then
/// every stored message of a listed session that its strict start-up cannot read.
pub(super) fn session_header_findings(
    ws: &Workspace,
    gone: &Exclusion,
    rules: &crate::release::Rules,
) -> Result<Vec<crate::findings::Finding>, DbError> {
    let mut out = Vec::new();
    ws.for_each_session_header(|row| {
        if gone.session(&row.session_id) {
            return;
        }
        if let Err(why) = crate::session_header::check_session_header(&row, &rules.header) {
            out.push(
                crate::findings::Finding::new(
                    "session_header_undecodable",
                    format!("session header cannot be read: {why}"),
                )
                .session(&row.session_id),
            );
        }
    })?;
    // Strict start-up reads the stored messages of every listed session too.
    let mut messages = ws.suspect_session_messages(crate::scan::listed::STORED_MESSAGE_TYPES)?;
    messages.retain(|m| !gone.session(&m.session_id));
    out.extend(crate::scan::listed::session_message_findings(&messages));
    Ok(out)
}

/// Every `core_agent_run_events` record that Maka's strict start-up recovery would
/// refuse, in `(session, run, sequence)` order. Read in table order (the primary key's
/// order would visit the table at random) and sorted here: there are few.
pub(super) fn run_event_findings(
    ws: &Workspace,
    gone: &Exclusion,
    briefs: Option<&HeaderBriefs>,
    rules: &crate::release::rules::HeaderRules,
) -> Result<Vec<crate::findings::Finding>, DbError> {
    let mut bad = Vec::new();
    // The turn of a decoded header, as Maka reads it; other runs are looked up.
    let known =
        |s: &str, r: &str| -> Option<String> { briefs?.get(s, r).map(HeaderBrief::turn_id) };
    ws.for_each_run_event(&known, &mut |s, r, seq, record, turn| {
        if gone.session(s) {
            return;
        }
        if let Err(why) = crate::header::check_run_event_as(record, s, r, turn, rules) {
            bad.push((
                (s.to_owned(), r.to_owned(), seq),
                crate::findings::Finding::new(
                    "run_event_undecodable",
                    format!("core_agent_run_events sequence {seq}: {why}"),
                )
                .session(s)
                .run(r),
            ));
        }
    })?;
    bad.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(bad.into_iter().map(|(_, f)| f).collect())
}
