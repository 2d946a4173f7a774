//! Per-session counters while planning several runs of one session, and what the
//! session's messages and transcript file say about a run's `turn_state` record.

use serde_json::{Map, Value};

use super::{records, recovery};
use crate::db::facts::SessionRows;
use crate::db::write::RunWrite;
use crate::header::RunHeader;

/// Per-session counters while planning several runs of one session.
pub(super) struct SessionCursor {
    pub(super) next_ordinal: i64,
    pub(super) next_message: i64,
    /// Session header as it will be after the writes planned so far.
    pub(super) payload: Option<Map<String, Value>>,
    pub(super) version: i64,
    pub(super) status_written: bool,
    pub(super) messages: Vec<Map<String, Value>>,
    pub(super) archived: bool,
    pub(super) boundary_requests: Vec<crate::db::facts::BoundaryRequestRow>,
    /// The session's transcript file (releases that keep transcripts in files).
    pub(super) transcript_file: Option<crate::db::files::TranscriptFile>,
}

impl SessionCursor {
    pub(super) fn new(rows: Option<&SessionRows>) -> SessionCursor {
        let meta = rows.and_then(|r| r.meta.as_ref());
        SessionCursor {
            next_ordinal: rows.map_or(0, |r| r.max_ordinal) + 1,
            next_message: rows
                .and_then(|r| r.messages.iter().map(|m| m.sequence).max())
                .map_or(0, |m| m + 1),
            payload: meta.and_then(|m| match serde_json::from_str(&m.payload_json) {
                Ok(Value::Object(o)) => Some(o),
                _ => None,
            }),
            version: meta.map_or(0, |m| m.metadata_version),
            status_written: false,
            messages: rows.map_or_else(Vec::new, |r| recovery::decoded_messages(&r.messages)),
            archived: meta.is_some_and(|m| m.is_archived),
            boundary_requests: rows.map_or_else(Vec::new, |r| r.boundary_requests.clone()),
            transcript_file: rows.and_then(|r| r.transcript_file.clone()),
        }
    }
}

/// The transcript status of a turn whose run ends with `run_status`.
pub(super) fn turn_status_of(run_status: &str) -> &str {
    match run_status {
        "cancelled" => "aborted",
        s => s,
    }
}

/// Whether Maka's recovery writes a `turn_state` record for the run: a session-inline
/// run of a session with a header, whose turn's latest turn_state has another status.
pub(super) fn turn_state_needed(h: &RunHeader, turn_status: &str, cursor: &SessionCursor) -> bool {
    records::is_session_inline(h)
        && cursor.payload.is_some()
        && recovery::latest_turn_state(&cursor.messages, &h.turn_id)
            .and_then(recovery::turn_state_status)
            != Some(turn_status)
}

/// Why the `turn_state` record the run needs cannot be appended to the session's
/// transcript file (v0.1.2, v0.1.3), if it cannot. Checked before anything else of
/// the run is planned, so a skipped run leaves the session's counters alone.
pub(super) fn transcript_refusal(
    h: &RunHeader,
    run_status: &str,
    cursor: &SessionCursor,
) -> Option<String> {
    let file = cursor.transcript_file.as_ref()?;
    let crate::db::files::TranscriptState::Refused(why) = &file.state else {
        return None;
    };
    turn_state_needed(h, turn_status_of(run_status), cursor).then(|| {
        format!(
            "the session's transcript `{}` {why}: the release's recovery appends this run's \
             turn_state record to that file, so the run is left alone",
            file.path.display()
        )
    })
}

/// The session file a run's write appends to, for the plan entry.
pub(super) fn appended_file(write: &RunWrite) -> Option<String> {
    write
        .message
        .as_ref()
        .and_then(|m| m.file.as_ref())
        .map(|p| p.display().to_string())
}

pub(super) fn trusted(h: &RunHeader, cursor: &SessionCursor) -> Option<&'static str> {
    recovery::trusted_transcript_terminal(h, &cursor.messages)
}
