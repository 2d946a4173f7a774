//! The rows `doctor finalize-runs` plans from, read per run and per session.
//!
//! The same readers run twice: once on the read-only connection to plan, and once
//! inside the write transaction to check that nothing changed since. Equal rows mean
//! the plan still holds; so these structs compare by value.
//!
//! They run once per planned run or session (a plan may hold thousands), so their
//! statements come from the connection's statement cache.

use std::collections::HashMap;

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{DbError, EventRow, HeaderRow, OperationRow, Workspace};

/// `{"$maka":"session-message-chunks-v1"}`: the `record_json` of a transcript record
/// whose bytes live in `session_message_chunks`.
pub const MESSAGE_CHUNK_MARKER: &str = "{\"$maka\":\"session-message-chunks-v1\"}";

/// Largest `record_json` stored inline; longer records are chunked.
pub const MESSAGE_CHUNK_BYTES: usize = 64 * 1024;

/// One `core_agent_run_events` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunEventRow {
    pub sequence: i64,
    pub event_id: String,
    pub event_type: String,
    pub event_ts: i64,
    pub record_json: String,
}

/// One `runtime_partial_snapshots` row, reduced to what planning reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRow {
    pub stream_key: String,
    pub invocation_id: String,
    pub turn_id: String,
    pub updated_at: i64,
}

/// Everything stored about one run.
#[derive(Clone, Debug, Default)]
pub struct RunRows {
    pub header: Option<HeaderRow>,
    /// `runtime_events` of the run in `event_seq, event_id` order.
    pub events: Vec<EventRow>,
    pub run_events: Vec<RunEventRow>,
    pub snapshots: Vec<SnapshotRow>,
    /// `tool_operations` whose call event belongs to the run.
    pub operations: Vec<OperationRow>,
}

fn same_header(a: &HeaderRow, b: &HeaderRow) -> bool {
    a.session_id == b.session_id
        && a.run_id == b.run_id
        && a.created_at == b.created_at
        && a.record_json == b.record_json
}

fn same_event(a: &EventRow, b: &EventRow) -> bool {
    a.event_id == b.event_id
        && a.session_id == b.session_id
        && a.invocation_id == b.invocation_id
        && a.run_id == b.run_id
        && a.turn_id == b.turn_id
        && a.event_seq == b.event_seq
        && a.event_kind == b.event_kind
        && a.payload_json == b.payload_json
        && a.committed_at == b.committed_at
}

impl PartialEq for RunRows {
    fn eq(&self, o: &Self) -> bool {
        let headers = match (&self.header, &o.header) {
            (None, None) => true,
            (Some(a), Some(b)) => same_header(a, b),
            _ => false,
        };
        headers
            && self.events.len() == o.events.len()
            && self
                .events
                .iter()
                .zip(&o.events)
                .all(|(a, b)| same_event(a, b))
            && self.run_events == o.run_events
            && self.snapshots == o.snapshots
            && self.operations == o.operations
    }
}

/// The `session_metadata` row fields a finalize may update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionMetaRow {
    pub is_archived: bool,
    pub metadata_version: i64,
    pub payload_json: String,
}

/// One transcript record (read from the table or, v0.1.2 and v0.1.3, from the
/// session's file: `files` owns the type, this module reads it from rows).
pub use super::files::MessageRow;

/// A sandbox boundary expansion request of the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundaryRequestRow {
    pub request_id: Option<String>,
    pub status: String,
    pub outcome_reason: Option<String>,
    pub turn_id: Option<String>,
    pub run_id: Option<String>,
}

/// Everything stored about one session that a finalize reads or writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionRows {
    pub meta: Option<SessionMetaRow>,
    pub messages: Vec<MessageRow>,
    /// `MAX(ordinal)` of the session, 0 without ordinals.
    pub max_ordinal: i64,
    pub boundary_requests: Vec<BoundaryRequestRow>,
    /// Set where the transcript lives in `sessions/<id>/session.jsonl` (v0.1.2,
    /// v0.1.3): `messages` were read from it, and a new record is appended to it.
    pub transcript_file: Option<super::files::TranscriptFile>,
}

/// One continuation claim, as far as finalize needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRow {
    pub claim_id: String,
    pub source_session_id: String,
    pub source_run_id: String,
    pub boundary_json: String,
    pub target_session_id: String,
    pub target_invocation_id: String,
    pub target_run_id: String,
    pub target_turn_id: String,
}

/// `(session_id, run_id, turn_id)` that use one invocation id, from events and
/// partial snapshots.
pub type InvocationUsers = Vec<(String, String, String)>;

// Lenient column readers shared with `rows.rs`.
use super::rows::{int, operation_row, opt_text, text};

fn event_row(r: &Row<'_>) -> rusqlite::Result<EventRow> {
    Ok(EventRow {
        event_id: text(r, 0)?,
        session_id: text(r, 1)?,
        invocation_id: text(r, 2)?,
        run_id: text(r, 3)?,
        turn_id: text(r, 4)?,
        event_seq: int(r, 5)?,
        event_kind: text(r, 6)?,
        payload_json: text(r, 7)?,
        committed_at: int(r, 8)?,
    })
}

/// Whether the main database has table `name` in a shape wsledger reads (see
/// [`super::shape`]; a table of another shape is read as if it were not there). Asked
/// several times per planned run: SQLite's in-memory schema answers whether it is
/// there, one cached point query its definition.
pub(crate) fn has_table(c: &Connection, name: &str) -> rusqlite::Result<bool> {
    Ok(super::shape::table_read(c, name)? == super::shape::TableRead::Read)
}

/// Whether `core_agent_runs` holds run headers: the table with its `record_json`
/// column. A Maka newer than main drops the column (its runs open on the runtime event
/// spine, see docs/scan.md); such a table is not read as headers.
pub(crate) fn has_header_records(c: &Connection) -> rusqlite::Result<bool> {
    Ok(has_table(c, "core_agent_runs")?
        && c.column_exists(Some("main"), "core_agent_runs", "record_json")?)
}

/// `tool_operations` whose call event is one of `?1` (a JSON array of event ids).
/// `call_event_id` has no index: one pass over the table, each row checked against
/// the list (SQLite builds it once). An automatic index would read the table too,
/// and sort it besides. `NOT INDEXED`: left free, the planner reads the table through
/// its unique index, in `invocation_id` order, to spare sorting the few rows that
/// match, and pays a seek per row for it (3x slower on the bench workspace, 2026-12-02).
pub const OPERATIONS_OF_RUNS: &str = "SELECT o.operation_id, o.invocation_id, o.run_id, \
     o.turn_id, o.provider_tool_call_id, o.tool_name, o.canonical_args_hash, o.recovery_mode, \
     o.current_state, o.call_event_id, o.result_event_id, o.version, o.dispatch_event_id \
     FROM tool_operations AS o NOT INDEXED \
     WHERE o.call_event_id IN (SELECT value FROM json_each(?1)) \
     ORDER BY o.invocation_id, o.operation_id";

/// Every row of each run of `runs` (see [`RunRows`]), in the order given.
pub(crate) fn read_runs_rows(
    c: &Connection,
    runs: &[(&str, &str)],
) -> rusqlite::Result<Vec<RunRows>> {
    let mut out = runs
        .iter()
        .map(|(session, run)| read_run_rows_but_operations(c, session, run))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let current = has_header_records(c)?
        && has_table(c, "core_agent_run_events")?
        && has_table(c, "tool_operations")?;
    if runs.is_empty() || !current {
        return Ok(out);
    }
    // Event ids are unique, so each names one run.
    let owner: HashMap<&str, usize> = out
        .iter()
        .enumerate()
        .flat_map(|(k, run)| run.events.iter().map(move |e| (e.event_id.as_str(), k)))
        .collect();
    let ids: Vec<&str> = owner.keys().copied().collect();
    let ids = serde_json::to_string(&ids)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let mut found = Vec::new();
    let mut stmt = c.prepare_cached(OPERATIONS_OF_RUNS)?;
    let mut rows = stmt.query([ids])?;
    while let Some(r) = rows.next()? {
        let op = operation_row(r)?;
        if let Some(&k) = owner.get(op.call_event_id.as_str()) {
            found.push((k, op));
        }
    }
    for (k, op) in found {
        out[k].operations.push(op);
    }
    Ok(out)
}

/// [`RunRows`] without `operations` (see [`read_runs_rows`]).
fn read_run_rows_but_operations(
    c: &Connection,
    session: &str,
    run: &str,
) -> rusqlite::Result<RunRows> {
    if !has_header_records(c)? || !has_table(c, "core_agent_run_events")? {
        // Not a current workspace: only the events can be read.
        let mut rows = RunRows::default();
        let mut stmt = c.prepare_cached(
            "SELECT event_id, session_id, invocation_id, run_id, turn_id, event_seq, event_kind, \
             payload_json, committed_at FROM runtime_events WHERE session_id = ?1 AND run_id = ?2 \
             ORDER BY event_seq, event_id",
        )?;
        rows.events = stmt
            .query_map(params![session, run], event_row)?
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(rows);
    }
    let header = c
        .prepare_cached(
            "SELECT session_id, run_id, created_at, record_json FROM core_agent_runs \
             WHERE session_id = ?1 AND run_id = ?2",
        )?
        .query_row(params![session, run], |r| {
            Ok(HeaderRow {
                session_id: text(r, 0)?,
                run_id: text(r, 1)?,
                created_at: int(r, 2)?,
                record_json: text(r, 3)?,
            })
        })
        .optional()?;
    let mut stmt = c.prepare_cached(
        "SELECT event_id, session_id, invocation_id, run_id, turn_id, event_seq, event_kind, \
         payload_json, committed_at FROM runtime_events WHERE session_id = ?1 AND run_id = ?2 \
         ORDER BY event_seq, event_id",
    )?;
    let events = stmt
        .query_map(params![session, run], event_row)?
        .collect::<Result<Vec<_>, _>>()?;
    let mut stmt = c.prepare_cached(
        "SELECT sequence, event_id, event_type, event_ts, record_json FROM core_agent_run_events \
         WHERE session_id = ?1 AND run_id = ?2 ORDER BY sequence",
    )?;
    let run_events = stmt
        .query_map(params![session, run], |r| {
            Ok(RunEventRow {
                sequence: int(r, 0)?,
                event_id: text(r, 1)?,
                event_type: text(r, 2)?,
                event_ts: int(r, 3)?,
                record_json: text(r, 4)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let snapshots = if has_table(c, "runtime_partial_snapshots")? {
        let mut stmt = c.prepare_cached(
            "SELECT stream_key, invocation_id, turn_id, updated_at FROM runtime_partial_snapshots \
             WHERE session_id = ?1 AND run_id = ?2 ORDER BY stream_key",
        )?;
        let rows = stmt
            .query_map(params![session, run], |r| {
                Ok(SnapshotRow {
                    stream_key: text(r, 0)?,
                    invocation_id: text(r, 1)?,
                    turn_id: text(r, 2)?,
                    updated_at: int(r, 3)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows
    } else {
        Vec::new()
    };
    Ok(RunRows {
        header,
        events,
        run_events,
        snapshots,
        operations: Vec::new(),
    })
}

/// Whether transcripts live in session files beside the database: a session store
/// without a `session_messages` table (v0.1.2 and v0.1.3).
pub(crate) fn transcripts_in_files(c: &Connection) -> rusqlite::Result<bool> {
    Ok(has_table(c, "session_metadata")? && !has_table(c, "session_messages")?)
}

/// [`read_session_rows`] of the database `db`, with the transcript read from its
/// session file where the release keeps it there.
pub(crate) fn read_session_rows_at(
    c: &Connection,
    db: &std::path::Path,
    session: &str,
) -> rusqlite::Result<SessionRows> {
    let mut rows = read_session_rows(c, session)?;
    if transcripts_in_files(c)? {
        let (messages, file) =
            super::files::read_transcript(&super::files::transcript_path(db, session));
        rows.messages = messages;
        rows.transcript_file = Some(file);
    }
    Ok(rows)
}

pub(crate) fn read_session_rows(c: &Connection, session: &str) -> rusqlite::Result<SessionRows> {
    if !has_table(c, "session_metadata")? {
        return Ok(SessionRows::default());
    }
    let meta = c
        .prepare_cached(
            "SELECT is_archived, metadata_version, payload_json FROM session_metadata \
             WHERE session_id = ?1",
        )?
        .query_row([session], |r| {
            Ok(SessionMetaRow {
                is_archived: int(r, 0)? != 0,
                metadata_version: int(r, 1)?,
                payload_json: text(r, 2)?,
            })
        })
        .optional()?;
    let mut messages = if has_table(c, "session_messages")? {
        let mut stmt = c.prepare_cached(
            "SELECT sequence, message_type, record_json FROM session_messages \
             WHERE session_id = ?1 ORDER BY sequence",
        )?;
        let rows = stmt
            .query_map([session], |r| {
                Ok(MessageRow {
                    sequence: int(r, 0)?,
                    message_type: text(r, 1)?,
                    record_json: text(r, 2)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows
    } else {
        Vec::new()
    };
    if messages
        .iter()
        .any(|m| m.record_json == MESSAGE_CHUNK_MARKER)
        && has_table(c, "session_message_chunks")?
    {
        let mut chunks = c.prepare_cached(
            "SELECT data FROM session_message_chunks WHERE session_id = ?1 AND sequence = ?2 \
             ORDER BY chunk_index",
        )?;
        for m in messages
            .iter_mut()
            .filter(|m| m.record_json == MESSAGE_CHUNK_MARKER)
        {
            let mut bytes = Vec::new();
            let mut rows = chunks.query(params![session, m.sequence])?;
            while let Some(r) = rows.next()? {
                match r.get_ref(0)? {
                    ValueRef::Blob(b) | ValueRef::Text(b) => bytes.extend_from_slice(b),
                    _ => {}
                }
            }
            m.record_json = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    let max_ordinal = if has_table(c, "runtime_session_event_ordinals")? {
        c.prepare_cached(
            "SELECT COALESCE(MAX(ordinal), 0) FROM runtime_session_event_ordinals \
             WHERE session_id = ?1",
        )?
        .query_row([session], |r| int(r, 0))?
    } else {
        0
    };
    let boundary_requests = if has_table(c, "sandbox_boundary_log")? {
        let mut stmt = c.prepare_cached(
            "SELECT request_id, status, outcome_reason, turn_id, run_id FROM sandbox_boundary_log \
             WHERE session_id = ?1 AND entry_kind = 'expansion_request' \
             ORDER BY created_at, entry_id",
        )?;
        let rows = stmt
            .query_map([session], |r| {
                Ok(BoundaryRequestRow {
                    request_id: opt_text(r, 0)?,
                    status: text(r, 1)?,
                    outcome_reason: opt_text(r, 2)?,
                    turn_id: opt_text(r, 3)?,
                    run_id: opt_text(r, 4)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows
    } else {
        Vec::new()
    };
    Ok(SessionRows {
        meta,
        messages,
        max_ordinal,
        boundary_requests,
        transcript_file: None,
    })
}

pub(crate) fn read_invocation_users(
    c: &Connection,
    invocation: &str,
) -> rusqlite::Result<InvocationUsers> {
    let snapshots = has_table(c, "runtime_partial_snapshots")?;
    let sql = if snapshots {
        "SELECT session_id, run_id, turn_id FROM runtime_events WHERE invocation_id = ?1 \
         UNION SELECT session_id, run_id, turn_id FROM runtime_partial_snapshots \
         WHERE invocation_id = ?1 ORDER BY 1, 2, 3"
    } else {
        "SELECT DISTINCT session_id, run_id, turn_id FROM runtime_events WHERE invocation_id = ?1 \
         ORDER BY 1, 2, 3"
    };
    let mut stmt = c.prepare_cached(sql)?;
    let rows = stmt
        .query_map([invocation], |r| {
            Ok((text(r, 0)?, text(r, 1)?, text(r, 2)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub(crate) fn read_claims(c: &Connection) -> rusqlite::Result<Vec<ClaimRow>> {
    if !has_table(c, "runtime_continuation_claims")? {
        return Ok(Vec::new());
    }
    let mut stmt = c.prepare_cached(
        "SELECT claim_id, source_session_id, source_run_id, boundary_json, target_session_id, \
         target_invocation_id, target_run_id, target_turn_id FROM runtime_continuation_claims \
         ORDER BY claim_id",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(ClaimRow {
                claim_id: text(r, 0)?,
                source_session_id: text(r, 1)?,
                source_run_id: text(r, 2)?,
                boundary_json: text(r, 3)?,
                target_session_id: text(r, 4)?,
                target_invocation_id: text(r, 5)?,
                target_run_id: text(r, 6)?,
                target_turn_id: text(r, 7)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// `(count, max rowid, total payload length)` of `runtime_events`: changes whenever
/// a row is added, removed or rewritten to another length.
pub type LedgerFingerprint = (i64, i64, i64);

pub(crate) fn read_ledger_fingerprint(c: &Connection) -> rusqlite::Result<LedgerFingerprint> {
    c.query_row(
        "SELECT count(*), COALESCE(max(rowid), 0), CAST(total(length(payload_json)) AS INTEGER) \
         FROM runtime_events",
        [],
        |r| Ok((int(r, 0)?, int(r, 1)?, int(r, 2)?)),
    )
}

pub(crate) fn read_root_binding(c: &Connection) -> rusqlite::Result<Option<String>> {
    if !has_table(c, "runtime_storage_root_binding")? {
        return Ok(None);
    }
    c.query_row(
        "SELECT root_id FROM runtime_storage_root_binding WHERE singleton = 1",
        [],
        |r| text(r, 0),
    )
    .optional()
}

impl Workspace {
    /// Every row of one run (see [`RunRows`]).
    pub fn run_rows(&self, session_id: &str, run_id: &str) -> Result<RunRows, DbError> {
        let mut rows = self.runs_rows(&[(session_id, run_id)])?;
        Ok(rows.pop().unwrap_or_default())
    }

    /// Every row of each run of `runs` `(session_id, run_id)`, in that order; reads
    /// `tool_operations` once for all of them.
    pub fn runs_rows(&self, runs: &[(&str, &str)]) -> Result<Vec<RunRows>, DbError> {
        read_runs_rows(self.conn(), runs).map_err(|e| self.err(&e))
    }

    /// The session's metadata, transcript, ordinal high-water and boundary requests.
    pub fn session_rows(&self, session_id: &str) -> Result<SessionRows, DbError> {
        read_session_rows_at(self.conn(), self.path(), session_id).map_err(|e| self.err(&e))
    }

    /// Which `(session, run, turn)` use an invocation id.
    pub fn invocation_users(&self, invocation_id: &str) -> Result<InvocationUsers, DbError> {
        read_invocation_users(self.conn(), invocation_id).map_err(|e| self.err(&e))
    }

    /// Every continuation claim.
    pub fn claims(&self) -> Result<Vec<ClaimRow>, DbError> {
        read_claims(self.conn()).map_err(|e| self.err(&e))
    }

    /// A cheap fingerprint of the whole event ledger (see [`LedgerFingerprint`]).
    pub fn ledger_fingerprint(&self) -> Result<LedgerFingerprint, DbError> {
        read_ledger_fingerprint(self.conn()).map_err(|e| self.err(&e))
    }

    /// Whether session transcripts live in `sessions/<id>/` beside the database
    /// (v0.1.2, v0.1.3): quarantine and restore move those folders with the rows.
    pub fn transcripts_in_files(&self) -> Result<bool, DbError> {
        transcripts_in_files(self.conn()).map_err(|e| self.err(&e))
    }

    /// `runtime_storage_root_binding.root_id`, if bound.
    pub fn root_binding(&self) -> Result<Option<String>, DbError> {
        read_root_binding(self.conn()).map_err(|e| self.err(&e))
    }
}
