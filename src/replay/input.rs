//! The rows replay reads, typed: [`SessionRows`], built from a [`Bundle`] (which is
//! also what the database export produces, so a bundle replays exactly like the
//! database it came from).

use crate::bundle::{Bundle, Cell, Row, SchemaInfo};
use crate::db::{EventRow, HeaderRow, JournalRow, OperationRow};
use crate::release::rules::DecoderRules;
use crate::scan::decode_row_with;

/// The session's `session_metadata` row.
#[derive(Clone, Debug)]
pub struct SessionMeta {
    pub name: String,
    pub is_archived: bool,
    pub payload_json: String,
}

/// One `core_agent_run_events` row.
#[derive(Clone, Debug)]
pub struct RunEventRow {
    pub run_id: String,
    pub sequence: i64,
    pub event_id: String,
    pub event_type: String,
    pub event_ts: i64,
    pub record_json: String,
}

/// One `runtime_partial_snapshots` row with its segments' text appended.
#[derive(Clone, Debug)]
pub struct SnapshotRow {
    pub stream_key: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
    pub after_event_id: Option<String>,
    pub payload_json: String,
    /// `text_content` followed by every segment in `segment_seq` order.
    pub text: String,
    pub updated_at: i64,
}

/// One `runtime_continuation_claims` row (the columns replay checks).
#[derive(Clone, Debug)]
pub struct ClaimRow {
    pub claim_id: String,
    pub source_session_id: String,
    pub source_invocation_id: String,
    pub source_run_id: String,
    pub source_turn_id: String,
    pub source_event_high_water: i64,
    pub source_prefix_digest: String,
    pub boundary_json: String,
    pub target_session_id: String,
    pub target_run_id: String,
    pub start_event_id: Option<String>,
}

/// One `session_messages` row; `record_json` is the reassembled record when the row
/// holds Maka's chunk marker, or why it could not be reassembled.
#[derive(Clone, Debug)]
pub struct MessageRow {
    pub sequence: i64,
    pub message_id: String,
    pub message_type: String,
    pub record_json: Result<String, String>,
}

/// Everything replay reads about one session.
#[derive(Clone, Debug, Default)]
pub struct SessionRows {
    pub session_id: String,
    pub schema: SchemaInfo,
    pub session: Option<SessionMeta>,
    /// `runtime_events` rows in Maka's scan order (`invocation_id, event_seq, event_id`).
    pub events: Vec<EventRow>,
    /// `core_agent_runs` rows in Maka's session order (`created_at, run_id`).
    pub headers: Vec<HeaderRow>,
    /// `core_agent_run_events` rows by run and sequence.
    pub run_events: Vec<RunEventRow>,
    pub snapshots: Vec<SnapshotRow>,
    pub claims: Vec<ClaimRow>,
    /// `session_messages` rows by sequence.
    pub messages: Vec<MessageRow>,
    /// `tool_operations` rows of the session's invocations.
    pub operations: Vec<OperationRow>,
    /// `tool_journal_events` rows of those operations, by `journal_seq`.
    pub journal: Vec<JournalRow>,
    /// (invocation id, event_seq) of events an excision removed → the bundle holding
    /// each: read from the excision bundles beside the database, so that the gaps they
    /// leave are notes, not divergences. Empty for a bundle file.
    pub excised_seqs: std::collections::BTreeMap<(String, i64), String>,
    /// Run → turn of the opening facts a newer Maka's migration shelved
    /// (`runtime_legacy_invocation_openings`) for this session.
    pub shelved: std::collections::HashMap<String, String>,
    /// Whether the source's `core_agent_runs` holds headers (a newer Maka drops its
    /// `record_json`: then the runs are read off the event spine).
    pub headers_readable: bool,
}

/// Why a bundle cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("the bundle has no `runtime_events` table")]
    NoEvents,
}

fn text(c: Option<&Cell>) -> String {
    match c {
        None | Some(Cell::Null) => String::new(),
        Some(Cell::Integer(n)) => n.to_string(),
        Some(Cell::Real(f)) => f.to_string(),
        Some(Cell::Text(b) | Cell::Blob(b)) => String::from_utf8_lossy(b).into_owned(),
    }
}

fn opt_text(c: Option<&Cell>) -> Option<String> {
    match c {
        None | Some(Cell::Null) => None,
        other => Some(text(other)),
    }
}

fn int(c: Option<&Cell>) -> i64 {
    match c {
        Some(Cell::Integer(n)) => *n,
        Some(Cell::Real(f)) => *f as i64,
        Some(Cell::Text(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// Maka's marker for a transcript record stored in chunks.
const CHUNK_MARKER: &str = r#"{"$maka":"session-message-chunks-v1"}"#;

fn event_row(r: &Row) -> EventRow {
    EventRow {
        event_id: text(r.get("event_id")),
        session_id: text(r.get("session_id")),
        invocation_id: text(r.get("invocation_id")),
        run_id: text(r.get("run_id")),
        turn_id: text(r.get("turn_id")),
        event_seq: int(r.get("event_seq")),
        event_kind: text(r.get("event_kind")),
        payload_json: text(r.get("payload_json")),
        committed_at: int(r.get("committed_at")),
    }
}

/// The tool operation ids `runtime_events` rows name (`refs.operationId`,
/// `toolDispatch.operationId`, recovery facts), for reading their tool rows.
pub fn operation_ids_named(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        let Ok(e) = decode_row_with(&event_row(r), &DecoderRules::NEWER_THAN_MAIN) else {
            continue;
        };
        let refs = e.refs.as_ref().and_then(|r| r.operation_id.clone());
        let actions = e.actions.as_ref();
        let dispatch =
            actions.and_then(|a| a.tool_dispatch.as_ref().map(|d| d.operation_id.clone()));
        let recovery =
            actions.and_then(|a| a.tool_recovery.as_ref().map(|d| d.operation_id.clone()));
        for id in [refs, dispatch, recovery].into_iter().flatten() {
            out.push(id.to_string_lossy());
        }
    }
    out.sort();
    out.dedup();
    out
}

impl SessionRows {
    /// Types the rows of a bundle, keeping only rows of the bundle's session, in the
    /// orders Maka reads them.
    pub fn from_bundle(b: &Bundle) -> Result<SessionRows, InputError> {
        if !b.has_table("runtime_events") {
            return Err(InputError::NoEvents);
        }
        let sid = b.session_id.clone();
        let mine = |r: &Row, col: &str| text(r.get(col)) == sid;
        let session = b
            .rows("session_metadata")
            .iter()
            .find(|r| mine(r, "session_id"))
            .map(|r| SessionMeta {
                name: text(r.get("name")),
                is_archived: int(r.get("is_archived")) != 0,
                payload_json: text(r.get("payload_json")),
            });
        let mut events: Vec<EventRow> = b
            .rows("runtime_events")
            .iter()
            .filter(|r| mine(r, "session_id"))
            .map(event_row)
            .collect();
        events.sort_by(|a, b| {
            (&a.invocation_id, a.event_seq, &a.event_id).cmp(&(
                &b.invocation_id,
                b.event_seq,
                &b.event_id,
            ))
        });
        // A row without `record_json` (a newer Maka's) is not a header.
        let header_rows = b.rows("core_agent_runs");
        let headers_readable = header_rows.iter().all(|r| r.get("record_json").is_some())
            && !(header_rows.is_empty()
                && crate::release::rules_if_newer(
                    b.schema.user_version,
                    b.schema.registry.as_ref(),
                )
                .is_some_and(|r| r.runs_on_spine));
        let mut headers: Vec<HeaderRow> = header_rows
            .iter()
            .filter(|r| mine(r, "session_id") && r.get("record_json").is_some())
            .map(|r| HeaderRow {
                session_id: text(r.get("session_id")),
                run_id: text(r.get("run_id")),
                created_at: int(r.get("created_at")),
                record_json: text(r.get("record_json")),
            })
            .collect();
        headers.sort_by(|a, b| (a.created_at, &a.run_id).cmp(&(b.created_at, &b.run_id)));
        let mut run_events: Vec<RunEventRow> = b
            .rows("core_agent_run_events")
            .iter()
            .filter(|r| mine(r, "session_id"))
            .map(|r| RunEventRow {
                run_id: text(r.get("run_id")),
                sequence: int(r.get("sequence")),
                event_id: text(r.get("event_id")),
                event_type: text(r.get("event_type")),
                event_ts: int(r.get("event_ts")),
                record_json: text(r.get("record_json")),
            })
            .collect();
        run_events.sort_by(|a, b| (&a.run_id, a.sequence).cmp(&(&b.run_id, b.sequence)));
        let segments = b.rows("runtime_partial_segments");
        let mut snapshots: Vec<SnapshotRow> = b
            .rows("runtime_partial_snapshots")
            .iter()
            .filter(|r| mine(r, "session_id"))
            .map(|r| {
                let key = text(r.get("stream_key"));
                let mut segs: Vec<(i64, String)> = segments
                    .iter()
                    .filter(|s| text(s.get("stream_key")) == key)
                    .map(|s| (int(s.get("segment_seq")), text(s.get("text_content"))))
                    .collect();
                segs.sort();
                let mut body = text(r.get("text_content"));
                for (_, t) in segs {
                    body.push_str(&t);
                }
                SnapshotRow {
                    stream_key: key,
                    invocation_id: text(r.get("invocation_id")),
                    run_id: text(r.get("run_id")),
                    turn_id: text(r.get("turn_id")),
                    after_event_id: opt_text(r.get("after_event_id")),
                    payload_json: text(r.get("payload_json")),
                    text: body,
                    updated_at: int(r.get("updated_at")),
                }
            })
            .collect();
        snapshots.sort_by(|a, b| {
            (&a.run_id, a.updated_at, &a.stream_key).cmp(&(&b.run_id, b.updated_at, &b.stream_key))
        });
        let mut claims: Vec<ClaimRow> = b
            .rows("runtime_continuation_claims")
            .iter()
            .filter(|r| mine(r, "source_session_id") || mine(r, "target_session_id"))
            .map(|r| ClaimRow {
                claim_id: text(r.get("claim_id")),
                source_session_id: text(r.get("source_session_id")),
                source_invocation_id: text(r.get("source_invocation_id")),
                source_run_id: text(r.get("source_run_id")),
                source_turn_id: text(r.get("source_turn_id")),
                source_event_high_water: int(r.get("source_event_high_water")),
                source_prefix_digest: text(r.get("source_prefix_digest")),
                boundary_json: text(r.get("boundary_json")),
                target_session_id: text(r.get("target_session_id")),
                target_run_id: text(r.get("target_run_id")),
                start_event_id: opt_text(r.get("start_event_id")),
            })
            .collect();
        claims.sort_by(|a, b| a.claim_id.cmp(&b.claim_id));
        let chunks = b.rows("session_message_chunks");
        let mut messages: Vec<MessageRow> = b
            .rows("session_messages")
            .iter()
            .filter(|r| mine(r, "session_id"))
            .map(|r| {
                let sequence = int(r.get("sequence"));
                let record = text(r.get("record_json"));
                let record_json = if record == CHUNK_MARKER {
                    reassemble(chunks, &sid, sequence)
                } else {
                    Ok(record)
                };
                MessageRow {
                    sequence,
                    message_id: text(r.get("message_id")),
                    message_type: text(r.get("message_type")),
                    record_json,
                }
            })
            .collect();
        messages.sort_by_key(|m| m.sequence);
        let mut operations: Vec<OperationRow> = b
            .rows("tool_operations")
            .iter()
            .map(|r| OperationRow {
                operation_id: text(r.get("operation_id")),
                invocation_id: text(r.get("invocation_id")),
                run_id: text(r.get("run_id")),
                turn_id: text(r.get("turn_id")),
                provider_tool_call_id: text(r.get("provider_tool_call_id")),
                tool_name: text(r.get("tool_name")),
                canonical_args_hash: text(r.get("canonical_args_hash")),
                recovery_mode: text(r.get("recovery_mode")),
                current_state: text(r.get("current_state")),
                call_event_id: text(r.get("call_event_id")),
                result_event_id: opt_text(r.get("result_event_id")),
                version: int(r.get("version")),
                dispatch_event_id: opt_text(r.get("dispatch_event_id")),
            })
            .collect();
        operations.sort_by(|a, b| a.operation_id.cmp(&b.operation_id));
        let mut journal: Vec<JournalRow> = b
            .rows("tool_journal_events")
            .iter()
            .map(|r| JournalRow {
                journal_seq: int(r.get("journal_seq")),
                journal_event_id: text(r.get("journal_event_id")),
                operation_id: text(r.get("operation_id")),
                invocation_id: text(r.get("invocation_id")),
                run_id: text(r.get("run_id")),
                turn_id: text(r.get("turn_id")),
                state: text(r.get("state")),
                runtime_event_id: opt_text(r.get("runtime_event_id")),
                canonical_args_hash: opt_text(r.get("canonical_args_hash")),
                recovery_mode: opt_text(r.get("recovery_mode")),
                metadata_json: opt_text(r.get("metadata_json")),
                committed_at: int(r.get("committed_at")),
            })
            .collect();
        journal.sort_by_key(|j| j.journal_seq);
        let shelved = b
            .rows("runtime_legacy_invocation_openings")
            .iter()
            .filter(|r| mine(r, "session_id"))
            .map(|r| (text(r.get("run_id")), text(r.get("turn_id"))))
            .collect();
        Ok(SessionRows {
            session_id: sid,
            schema: b.schema.clone(),
            session,
            events,
            headers,
            run_events,
            snapshots,
            claims,
            messages,
            operations,
            journal,
            excised_seqs: Default::default(),
            shelved,
            headers_readable,
        })
    }

    /// The rules the session's rows are read with: main's (every release's events
    /// decode under it), or for a file newer than every known generation, the newer
    /// rules ([`crate::release::rules_if_newer`]).
    pub fn rules(&self) -> crate::release::Rules {
        crate::release::rules_if_newer(self.schema.user_version, self.schema.registry.as_ref())
            .unwrap_or(crate::release::Rules::MAIN)
    }

    /// True when the session has no row at all (an unknown session id).
    pub fn is_empty(&self) -> bool {
        self.session.is_none()
            && self.events.is_empty()
            && self.headers.is_empty()
            && self.messages.is_empty()
            && self.claims.is_empty()
    }
}

/// A chunked transcript record: its chunks' bytes concatenated in `chunk_index` order.
fn reassemble(chunks: &[Row], session_id: &str, sequence: i64) -> Result<String, String> {
    let mut parts: Vec<(i64, Vec<u8>)> = chunks
        .iter()
        .filter(|c| text(c.get("session_id")) == session_id && int(c.get("sequence")) == sequence)
        .map(|c| {
            let bytes = match c.get("data") {
                Some(Cell::Blob(b) | Cell::Text(b)) => b.clone(),
                _ => Vec::new(),
            };
            (int(c.get("chunk_index")), bytes)
        })
        .collect();
    if parts.is_empty() {
        return Err(format!(
            "transcript record {sequence} is stored in chunks but has none"
        ));
    }
    parts.sort_by_key(|(i, _)| *i);
    let bytes: Vec<u8> = parts.into_iter().flat_map(|(_, b)| b).collect();
    String::from_utf8(bytes)
        .map_err(|_| format!("transcript record {sequence}: chunks are not UTF-8"))
}
