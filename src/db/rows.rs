//! Rows exactly as stored, and the queries that read them. No interpretation here:
//! a column of an unexpected type is read as text so the core can judge it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use rusqlite::types::ValueRef;
use rusqlite::Row;

use super::schema::{schema_object, SchemaObject};
use super::{DbError, Workspace};

/// One `runtime_events` row.
#[derive(Clone, Debug)]
pub struct EventRow {
    pub event_id: String,
    pub session_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
    pub event_seq: i64,
    pub event_kind: String,
    /// The payload text; bytes that are not UTF-8 are replaced as Node replaces them.
    pub payload_json: String,
    pub committed_at: i64,
}

impl EventRow {
    /// The same row, borrowed (`event_kind` is not part of it).
    pub fn borrowed(&self) -> EventRowRef<'_> {
        EventRowRef {
            event_id: Cow::Borrowed(&self.event_id),
            session_id: Cow::Borrowed(&self.session_id),
            invocation_id: Cow::Borrowed(&self.invocation_id),
            run_id: Cow::Borrowed(&self.run_id),
            turn_id: Cow::Borrowed(&self.turn_id),
            event_seq: self.event_seq,
            payload_json: Cow::Borrowed(&self.payload_json),
            committed_at: self.committed_at,
        }
    }
}

/// One `core_agent_runs` row.
#[derive(Clone, Debug)]
pub struct HeaderRow {
    pub session_id: String,
    pub run_id: String,
    pub created_at: i64,
    pub record_json: String,
}

/// One `tool_operations` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRow {
    pub operation_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
    pub provider_tool_call_id: String,
    pub tool_name: String,
    pub canonical_args_hash: String,
    pub recovery_mode: String,
    pub current_state: String,
    pub call_event_id: String,
    pub result_event_id: Option<String>,
    pub version: i64,
    pub dispatch_event_id: Option<String>,
}

/// One `tool_journal_events` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalRow {
    pub journal_seq: i64,
    pub journal_event_id: String,
    pub operation_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
    pub state: String,
    pub runtime_event_id: Option<String>,
    pub canonical_args_hash: Option<String>,
    pub recovery_mode: Option<String>,
    pub metadata_json: Option<String>,
    pub committed_at: i64,
}

/// One `session_metadata` row, reduced to what the doctor reads.
#[derive(Clone, Debug)]
pub struct SessionRow {
    pub session_id: String,
    pub is_archived: bool,
    pub payload_json: String,
}

/// Per-run facts from `core_agent_run_events`.
#[derive(Clone, Debug, Default)]
pub struct RunEventsSummary {
    pub count: i64,
    pub max_sequence: Option<i64>,
    /// `event_type` of the run events in sequence order.
    pub types: Vec<String>,
    /// Raw record JSON of each run event, in sequence order.
    pub records: Vec<String>,
}

/// `(session_id, run_id) → (snapshot count, max updated_at)`.
pub type SnapshotSummary = BTreeMap<(String, String), (i64, i64)>;

/// Receives `(session, run, sequence, record_json, header turn id)`.
pub type RunEventVisitor<'a> = dyn FnMut(&str, &str, i64, &str, Option<&str>) + 'a;

/// Everything about the schema that the doctor checks.
#[derive(Clone, Debug, Default)]
pub struct SchemaFacts {
    pub user_version: i64,
    pub tables: Vec<String>,
    pub objects: Vec<SchemaObject>,
    /// `operational_schema_migrations` (scope → version); `None` if the table is absent.
    pub registry: Option<BTreeMap<String, i64>>,
    /// `runtime_capabilities` (capability → version); `None` if the table is absent.
    pub capabilities: Option<BTreeMap<String, i64>>,
}

impl SchemaFacts {
    /// The schema as a bundle records it (a bundle goes back only into it).
    pub fn bundle_schema(&self) -> crate::bundle::SchemaInfo {
        crate::bundle::SchemaInfo {
            user_version: self.user_version,
            registry: self.registry.clone(),
            capabilities: self.capabilities.clone(),
        }
    }
}

/// The columns of the row a statement is on, as rusqlite's [`Row`] gives them or as a
/// statement stepped through SQLite's C API does ([`super::raw::RawRows`], for the
/// passes over whole tables).
pub(super) trait Columns {
    fn value(&self, i: usize) -> rusqlite::Result<ValueRef<'_>>;
}

impl Columns for Row<'_> {
    fn value(&self, i: usize) -> rusqlite::Result<ValueRef<'_>> {
        self.get_ref(i)
    }
}

impl Columns for super::raw::RawRows<'_> {
    fn value(&self, i: usize) -> rusqlite::Result<ValueRef<'_>> {
        super::raw::RawRows::value(self, i)
    }
}

pub(super) fn text(row: &(impl Columns + ?Sized), i: usize) -> rusqlite::Result<String> {
    Ok(match row.value(i)? {
        ValueRef::Null => String::new(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(b) | ValueRef::Blob(b) => lossy(b).into_owned(),
    })
}

/// `String::from_utf8_lossy`, with the (much faster) strict check tried first: valid
/// UTF-8, the usual case, is borrowed as is; only other bytes go through the lossy
/// conversion. How every stored text is read (see [`Workspace::for_each_event_raw`]).
pub fn lossy(b: &[u8]) -> Cow<'_, str> {
    if let Some(s) = ascii(b) {
        return Cow::Borrowed(s);
    }
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

/// `b` as text when it is all ASCII. Nearly every stored text is (ids, and most
/// payloads), and the ASCII test is cheaper than the UTF-8 check, above all on the
/// short ids (a scan reads millions), where the check took about 80 instructions each.
#[allow(unsafe_code)]
fn ascii(b: &[u8]) -> Option<&str> {
    // SAFETY: ASCII bytes are valid UTF-8.
    b.is_ascii()
        .then(|| unsafe { std::str::from_utf8_unchecked(b) })
}

pub(super) fn opt_text(
    row: &(impl Columns + ?Sized),
    i: usize,
) -> rusqlite::Result<Option<String>> {
    Ok(match row.value(i)? {
        ValueRef::Null => None,
        _ => Some(text(row, i)?),
    })
}

pub(super) fn int(row: &(impl Columns + ?Sized), i: usize) -> rusqlite::Result<i64> {
    Ok(int_of(row.value(i)?))
}

/// A value as [`int`] reads it.
fn int_of(v: ValueRef<'_>) -> i64 {
    match v {
        ValueRef::Integer(n) => n,
        ValueRef::Real(f) => f as i64,
        ValueRef::Text(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// The order of Maka's health scan and projection rebuild, with the columns the scan
/// reads: `event_id, session_id, invocation_id, run_id, turn_id, event_seq,
/// payload_json, committed_at`.
pub const EVENTS_IN_SCAN_ORDER: &str = "SELECT event_id, session_id, invocation_id, run_id, \
     turn_id, event_seq, payload_json, committed_at FROM runtime_events \
     ORDER BY invocation_id, event_seq, event_id";

/// The benchmark's first floor (`benches/scan.rs`): what the `sqlite3` tool is timed
/// reading in issue #16, the scan's rows in its order.
pub const EVENTS_AS_SQLITE3_READS: &str = "select invocation_id,event_seq,event_id,session_id,\
     run_id,turn_id,payload_json from runtime_events order by invocation_id,event_seq,event_id";

/// The benchmark's second floor: every table the scan reads, once each, with every
/// column it reads (`runtime_events` in the scan's order, the others in table order).
pub const TABLES_THE_SCAN_READS: &[&str] = &[
    "SELECT type, name, tbl_name, sql FROM sqlite_schema",
    "SELECT scope, version FROM operational_schema_migrations",
    "SELECT capability, version FROM runtime_capabilities",
    "SELECT count(*) FROM session_metadata",
    EVENTS_IN_SCAN_ORDER,
    "SELECT session_id, run_id, created_at, record_json FROM core_agent_runs",
    "SELECT session_id, run_id, sequence, record_json FROM core_agent_run_events",
    "SELECT operation_id, invocation_id, run_id, turn_id, provider_tool_call_id, tool_name, \
     canonical_args_hash, recovery_mode, current_state, call_event_id, result_event_id, \
     version, dispatch_event_id FROM tool_operations",
    "SELECT journal_seq, journal_event_id, operation_id, invocation_id, run_id, turn_id, \
     state, runtime_event_id, canonical_args_hash, recovery_mode, metadata_json, \
     committed_at FROM tool_journal_events",
    "SELECT session_id, ordinal, event_id FROM runtime_session_event_ordinals",
];

const EVENTS_OF_SESSION: &str = "SELECT event_id, session_id, invocation_id, run_id, turn_id, \
     event_seq, event_kind, payload_json, committed_at FROM runtime_events \
     WHERE session_id = ?1 ORDER BY invocation_id, event_seq, event_id";

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

impl Workspace {
    /// `PRAGMA user_version`, then every schema object (tables, indexes, triggers,
    /// views) ordered by type and name as Maka reads them, and the tables' names.
    pub(super) fn schema_objects(&self) -> Result<(i64, Vec<SchemaObject>, Vec<String>), DbError> {
        let c = self.conn();
        let e = |e: rusqlite::Error| self.err(&e);
        let user_version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(e)?;
        let mut stmt = c
            .prepare(
                "SELECT type, name, tbl_name, sql FROM sqlite_schema \
                 WHERE name NOT LIKE 'sqlite_%' AND type IN ('table','index','trigger','view') \
                 AND sql IS NOT NULL ORDER BY type, name",
            )
            .map_err(e)?;
        let mut objects = Vec::new();
        let mut tables = Vec::new();
        let mut rows = stmt.query([]).map_err(e)?;
        while let Some(r) = rows.next().map_err(e)? {
            let (kind, name, tbl, sql) = (
                text(r, 0).map_err(e)?,
                text(r, 1).map_err(e)?,
                text(r, 2).map_err(e)?,
                text(r, 3).map_err(e)?,
            );
            if kind == "table" {
                tables.push(name.clone());
            }
            objects.push(schema_object(&kind, &name, &tbl, &sql));
        }
        Ok((user_version, objects, tables))
    }

    /// Reads `user_version`, the schema objects, the registry and the capabilities.
    pub fn schema_facts(&self) -> Result<SchemaFacts, DbError> {
        let c = self.conn();
        let e = |e: rusqlite::Error| self.err(&e);
        let (user_version, objects, tables) = self.schema_objects()?;
        let has = |t: &str| tables.iter().any(|x| x == t);
        let pairs = |sql: &str| -> Result<BTreeMap<String, i64>, DbError> {
            let mut stmt = c.prepare(sql).map_err(e)?;
            let mut rows = stmt.query([]).map_err(e)?;
            let mut out = BTreeMap::new();
            while let Some(r) = rows.next().map_err(e)? {
                out.insert(text(r, 0).map_err(e)?, int(r, 1).map_err(e)?);
            }
            Ok(out)
        };
        let registry = if has("operational_schema_migrations") {
            Some(pairs(
                "SELECT scope, version FROM operational_schema_migrations",
            )?)
        } else {
            None
        };
        let capabilities = if has("runtime_capabilities") {
            Some(pairs(
                "SELECT capability, version FROM runtime_capabilities",
            )?)
        } else {
            None
        };
        Ok(SchemaFacts {
            user_version,
            tables,
            objects,
            registry,
            capabilities,
        })
    }

    /// Streams every `runtime_events` row in Maka's health-scan order
    /// (`invocation_id, event_seq, event_id`).
    pub fn for_each_event(&self, mut f: impl FnMut(EventRow)) -> Result<(), DbError> {
        self.events_in_scan_order(|row, payload| {
            let [event_id, session_id, invocation_id, run_id, turn_id] = &row.ids;
            f(EventRow {
                event_id: lossy(event_id).into_owned(),
                session_id: lossy(session_id).into_owned(),
                invocation_id: lossy(invocation_id).into_owned(),
                run_id: lossy(run_id).into_owned(),
                turn_id: lossy(turn_id).into_owned(),
                event_seq: row.event_seq,
                event_kind: String::new(),
                payload_json: lossy(payload).into_owned(),
                committed_at: row.committed_at,
            });
            Ok(())
        })
    }

    /// Every `runtime_events` row of one session, in scan order (through the
    /// session index).
    pub fn session_events(&self, session_id: &str) -> Result<Vec<EventRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self.conn().prepare(EVENTS_OF_SESSION).map_err(e)?;
        let rows = stmt.query_map([session_id], event_row).map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Number of `runtime_events` rows (for progress).
    pub fn event_count(&self) -> Result<u64, DbError> {
        let n: i64 = self
            .conn()
            .query_row("SELECT count(*) FROM runtime_events", [], |r| r.get(0))
            .map_err(|e| self.err(&e))?;
        Ok(n.max(0) as u64)
    }

    /// Every run header, in Maka's session order.
    pub fn run_headers(&self) -> Result<Vec<HeaderRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT session_id, run_id, created_at, record_json FROM core_agent_runs \
                 ORDER BY session_id, created_at, run_id",
            )
            .map_err(e)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(HeaderRow {
                    session_id: text(r, 0)?,
                    run_id: text(r, 1)?,
                    created_at: int(r, 2)?,
                    record_json: text(r, 3)?,
                })
            })
            .map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Every `tool_operations` row.
    pub fn tool_operations(&self) -> Result<Vec<OperationRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT operation_id, invocation_id, run_id, turn_id, provider_tool_call_id, \
                 tool_name, canonical_args_hash, recovery_mode, current_state, call_event_id, \
                 result_event_id, version, dispatch_event_id FROM tool_operations \
                 ORDER BY operation_id",
            )
            .map_err(e)?;
        let rows = stmt.query_map([], operation_row).map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Every `tool_journal_events` row in journal order.
    pub fn tool_journal(&self) -> Result<Vec<JournalRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT journal_seq, journal_event_id, operation_id, invocation_id, run_id, \
                 turn_id, state, runtime_event_id, canonical_args_hash, recovery_mode, \
                 metadata_json, committed_at FROM tool_journal_events ORDER BY journal_seq",
            )
            .map_err(e)?;
        let rows = stmt.query_map([], journal_row).map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Archived sessions (Maka's recovery and finalize-runs leave them alone).
    pub fn archived_sessions(&self) -> Result<std::collections::BTreeSet<String>, DbError> {
        if !self.has_table("session_metadata")? {
            return Ok(std::collections::BTreeSet::new());
        }
        Ok(self
            .sessions()?
            .into_iter()
            .filter(|s| s.is_archived)
            .map(|s| s.session_id)
            .collect())
    }

    /// Every session's archive flag and header JSON.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare("SELECT session_id, is_archived, payload_json FROM session_metadata ORDER BY session_id")
            .map_err(e)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SessionRow {
                    session_id: text(r, 0)?,
                    is_archived: int(r, 1)? != 0,
                    payload_json: text(r, 2)?,
                })
            })
            .map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Events that have no ordinal row: `(event_id, session_id, run_id)`.
    pub fn events_without_ordinal(&self) -> Result<Vec<(String, String, String)>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT e.event_id, e.session_id, e.run_id FROM runtime_events e \
                 LEFT JOIN runtime_session_event_ordinals o ON o.event_id = e.event_id \
                 WHERE o.event_id IS NULL ORDER BY e.session_id, e.event_id",
            )
            .map_err(e)?;
        let rows = stmt
            .query_map([], |r| Ok((text(r, 0)?, text(r, 1)?, text(r, 2)?)))
            .map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Sessions whose ordinals are not exactly 1..n: `(session_id, count, max)`.
    pub fn ordinal_gaps(&self) -> Result<Vec<(String, i64, i64)>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT session_id, count(*), max(ordinal) FROM runtime_session_event_ordinals \
                 GROUP BY session_id HAVING count(*) <> max(ordinal) OR min(ordinal) <> 1 \
                 ORDER BY session_id",
            )
            .map_err(e)?;
        let rows = stmt
            .query_map([], |r| Ok((text(r, 0)?, int(r, 1)?, int(r, 2)?)))
            .map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Partial snapshots per run: `(session_id, run_id) → (count, max updated_at)`.
    pub fn partial_snapshot_summary(&self) -> Result<SnapshotSummary, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT session_id, run_id, count(*), max(updated_at) FROM runtime_partial_snapshots \
                 GROUP BY session_id, run_id",
            )
            .map_err(e)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(((text(r, 0)?, text(r, 1)?), (int(r, 2)?, int(r, 3)?)))
            })
            .map_err(e)?;
        rows.collect::<Result<BTreeMap<_, _>, _>>().map_err(e)
    }

    /// Operational run events per run, in sequence order.
    pub fn run_events(&self) -> Result<BTreeMap<(String, String), RunEventsSummary>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT session_id, run_id, sequence, event_type, record_json \
                 FROM core_agent_run_events ORDER BY session_id, run_id, sequence",
            )
            .map_err(e)?;
        let mut rows = stmt.query([]).map_err(e)?;
        let mut out: BTreeMap<(String, String), RunEventsSummary> = BTreeMap::new();
        while let Some(r) = rows.next().map_err(e)? {
            let key = (text(r, 0).map_err(e)?, text(r, 1).map_err(e)?);
            let s = out.entry(key).or_default();
            let seq = int(r, 2).map_err(e)?;
            s.count += 1;
            s.max_sequence = Some(s.max_sequence.map_or(seq, |m| m.max(seq)));
            s.types.push(text(r, 3).map_err(e)?);
            s.records.push(text(r, 4).map_err(e)?);
        }
        Ok(out)
    }

    /// Continuation claims: `(source_session, source_run, target_session, target_run,
    /// target_invocation, target_turn)`.
    pub fn continuation_claims(&self) -> Result<Vec<[String; 6]>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT source_session_id, source_run_id, target_session_id, target_run_id, \
                 target_invocation_id, target_turn_id FROM runtime_continuation_claims",
            )
            .map_err(e)?;
        let rows = stmt
            .query_map([], |r| {
                Ok([
                    text(r, 0)?,
                    text(r, 1)?,
                    text(r, 2)?,
                    text(r, 3)?,
                    text(r, 4)?,
                    text(r, 5)?,
                ])
            })
            .map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// `PRAGMA quick_check` over the whole file (slow on large files): its lines,
    /// `["ok"]` for a sound file. Damage that stops the check itself (SQLite returns
    /// its problems so far, then fails on the page it cannot read) is one more line,
    /// not an error: reporting damage is what the check is for.
    pub fn quick_check(&self) -> Result<Vec<String>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut lines = Vec::new();
        let stopped = |err: rusqlite::Error, lines: &mut Vec<String>| match err.sqlite_error_code()
        {
            Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
                lines.push(format!("the check stopped: {err}"));
                Ok(())
            }
            _ => Err(self.err(&err)),
        };
        let mut stmt = match self.conn().prepare("PRAGMA quick_check") {
            Ok(s) => s,
            Err(err) => {
                stopped(err, &mut lines)?;
                return Ok(lines);
            }
        };
        let mut rows = stmt.query([]).map_err(e)?;
        loop {
            match rows.next() {
                Ok(Some(r)) => lines.push(text(r, 0).map_err(e)?),
                Ok(None) => break,
                Err(err) => {
                    stopped(err, &mut lines)?;
                    break;
                }
            }
        }
        Ok(lines)
    }

    /// `payload_json` of the given events (those that exist).
    pub fn payloads_of(&self, ids: &[String]) -> Result<BTreeMap<String, String>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare("SELECT payload_json FROM runtime_events WHERE event_id = ?1")
            .map_err(e)?;
        let mut out = BTreeMap::new();
        for id in ids {
            let mut rows = stmt.query([id]).map_err(e)?;
            if let Some(r) = rows.next().map_err(e)? {
                out.insert(id.clone(), text(r, 0).map_err(e)?);
            }
        }
        Ok(out)
    }

    /// Streams every `core_agent_run_events` row with its run header's `turnId` (null
    /// when the header is missing or has none): `(session, run, sequence, record, turn)`.
    /// Rows are borrowed from SQLite, in table order; a run's header is looked up once
    /// per stretch of its rows, not joined per row. Without a `core_agent_runs` table (a damaged schema) every turn is null.
    ///
    /// `known_turn` answers for runs whose header the caller has already decoded (the
    /// turn as Maka reads it); the others are looked up here.
    pub fn for_each_run_event(
        &self,
        known_turn: &dyn Fn(&str, &str) -> Option<String>,
        f: &mut RunEventVisitor<'_>,
    ) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        // A run's turn is looked up when its rows begin (they are mostly together in
        // table order) and remembered for a while: memory stays bounded, unlike a map of
        // every header.
        const REMEMBERED: usize = 4096;
        let mut turns: std::collections::HashMap<(String, String), Option<String>> =
            std::collections::HashMap::new();
        let mut header = if self.has_header_records()? {
            Some(
                self.conn()
                    .prepare(
                        "SELECT CASE WHEN json_valid(record_json) \
                         THEN json_extract(record_json, '$.turnId') END FROM core_agent_runs \
                         WHERE session_id = ?1 AND run_id = ?2",
                    )
                    .map_err(e)?,
            )
        } else {
            None
        };
        let mut key = (String::new(), String::new());
        let mut turn: Option<String> = None;
        self.for_each_raw_row(
            "SELECT session_id, run_id, sequence, record_json FROM core_agent_run_events",
            |r| {
                let (s, run) = (text_ref(r, 0).map_err(e)?, text_ref(r, 1).map_err(e)?);
                if key.0 != *s || key.1 != *run {
                    // Only text keys can be the caller's (its keys are text).
                    let text_keys = matches!(
                        (r.value(0).map_err(e)?, r.value(1).map_err(e)?),
                        (ValueRef::Text(a), ValueRef::Text(b))
                            if std::str::from_utf8(a).is_ok() && std::str::from_utf8(b).is_ok()
                    );
                    key = (s.into_owned(), run.into_owned());
                    let known = if text_keys {
                        known_turn(&key.0, &key.1)
                    } else {
                        None
                    };
                    turn = match (known, turns.get(&key), header.as_mut()) {
                        (Some(t), _, _) => Some(t),
                        (None, Some(t), _) => t.clone(),
                        (None, None, None) => None,
                        (None, None, Some(h)) => {
                            // The row's own values, so that the lookup is the join's.
                            use rusqlite::types::ToSqlOutput::Borrowed;
                            let (sv, rv) = (r.value(0).map_err(e)?, r.value(1).map_err(e)?);
                            let mut found = h.query([Borrowed(sv), Borrowed(rv)]).map_err(e)?;
                            let t = match found.next().map_err(e)? {
                                Some(hr) => match hr.value(0).map_err(e)? {
                                    ValueRef::Text(b) => {
                                        Some(String::from_utf8_lossy(b).into_owned())
                                    }
                                    _ => None,
                                },
                                None => None,
                            };
                            if turns.len() >= REMEMBERED {
                                turns.clear();
                            }
                            turns.insert(key.clone(), t.clone());
                            t
                        }
                    };
                }
                let record = text_ref(r, 3).map_err(e)?;
                f(
                    &key.0,
                    &key.1,
                    int(r, 2).map_err(e)?,
                    &record,
                    turn.as_deref(),
                );
                Ok(())
            },
        )
    }

    /// Whether `session_metadata` has a row for the session.
    pub fn session_exists(&self, session_id: &str) -> Result<bool, DbError> {
        let n: i64 = self
            .conn()
            .query_row(
                "SELECT count(*) FROM session_metadata WHERE session_id = ?1",
                [session_id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(&e))?;
        Ok(n > 0)
    }

    /// Whether `core_agent_runs` holds run headers (see [`facts::has_header_records`]).
    pub fn has_header_records(&self) -> Result<bool, DbError> {
        super::facts::has_header_records(self.conn()).map_err(|e| self.err(&e))
    }

    /// Whether a table exists in a shape wsledger reads (see [`super::shape`]).
    pub fn has_table(&self, name: &str) -> Result<bool, DbError> {
        super::facts::has_table(self.conn(), name).map_err(|e| self.err(&e))
    }
}

/// One `runtime_events` row as SQLite hands it out (valid during the callback): text
/// is borrowed unless it had to be converted.
#[derive(Clone, Debug)]
pub struct EventRowRef<'a> {
    pub event_id: Cow<'a, str>,
    pub session_id: Cow<'a, str>,
    pub invocation_id: Cow<'a, str>,
    pub run_id: Cow<'a, str>,
    pub turn_id: Cow<'a, str>,
    pub event_seq: i64,
    pub payload_json: Cow<'a, str>,
    pub committed_at: i64,
}

/// A `runtime_events` row with its text columns as stored bytes ([`stored_bytes`]),
/// not yet read as text: [`lossy`] of each is the column as [`EventRowRef`] has it.
#[derive(Clone, Debug)]
pub struct StoredEventRow<'a> {
    /// `event_id`, `session_id`, `invocation_id`, `run_id`, `turn_id`, in that order.
    pub ids: [Cow<'a, [u8]>; 5],
    pub event_seq: i64,
    pub committed_at: i64,
}

/// A value's bytes as stored when it is text or a BLOB, else as [`text_of`] renders it
/// (ASCII, which [`lossy`] keeps): `lossy(&stored_bytes(v)) == text_of(v)`.
fn stored_bytes(v: ValueRef<'_>) -> Cow<'_, [u8]> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => Cow::Borrowed(b),
        v => match text_of(v) {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        },
    }
}

fn text_ref<'a, C: Columns + ?Sized>(row: &'a C, i: usize) -> rusqlite::Result<Cow<'a, str>> {
    Ok(text_of(row.value(i)?))
}

/// A value as [`text_ref`] reads it.
fn text_of(v: ValueRef<'_>) -> Cow<'_, str> {
    match v {
        ValueRef::Null => Cow::Borrowed(""),
        ValueRef::Integer(n) => Cow::Owned(n.to_string()),
        ValueRef::Real(f) => Cow::Owned(f.to_string()),
        ValueRef::Text(b) | ValueRef::Blob(b) => lossy(b),
    }
}

const HEADER_COLUMNS: &str = "session_id, run_id, created_at, record_json";
const OPERATION_COLUMNS: &str = "operation_id, invocation_id, run_id, turn_id, \
     provider_tool_call_id, tool_name, canonical_args_hash, recovery_mode, current_state, \
     call_event_id, result_event_id, version, dispatch_event_id";
const JOURNAL_COLUMNS: &str = "journal_seq, journal_event_id, operation_id, invocation_id, \
     run_id, turn_id, state, runtime_event_id, canonical_args_hash, recovery_mode, \
     metadata_json, committed_at";

fn header_row(r: &(impl Columns + ?Sized)) -> rusqlite::Result<HeaderRow> {
    Ok(HeaderRow {
        session_id: text(r, 0)?,
        run_id: text(r, 1)?,
        created_at: int(r, 2)?,
        record_json: text(r, 3)?,
    })
}

pub(super) fn operation_row(r: &Row<'_>) -> rusqlite::Result<OperationRow> {
    Ok(OperationRow {
        operation_id: text(r, 0)?,
        invocation_id: text(r, 1)?,
        run_id: text(r, 2)?,
        turn_id: text(r, 3)?,
        provider_tool_call_id: text(r, 4)?,
        tool_name: text(r, 5)?,
        canonical_args_hash: text(r, 6)?,
        recovery_mode: text(r, 7)?,
        current_state: text(r, 8)?,
        call_event_id: text(r, 9)?,
        result_event_id: opt_text(r, 10)?,
        version: int(r, 11)?,
        dispatch_event_id: opt_text(r, 12)?,
    })
}

fn journal_row(r: &Row<'_>) -> rusqlite::Result<JournalRow> {
    Ok(JournalRow {
        journal_seq: int(r, 0)?,
        journal_event_id: text(r, 1)?,
        operation_id: text(r, 2)?,
        invocation_id: text(r, 3)?,
        run_id: text(r, 4)?,
        turn_id: text(r, 5)?,
        state: text(r, 6)?,
        runtime_event_id: opt_text(r, 7)?,
        canonical_args_hash: opt_text(r, 8)?,
        recovery_mode: opt_text(r, 9)?,
        metadata_json: opt_text(r, 10)?,
        committed_at: int(r, 11)?,
    })
}

/// A stored `tool_operations` row reduced to what the extra-row check needs.
#[derive(Clone, Debug)]
pub struct StoredOperationKey {
    pub operation_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub provider_tool_call_id: String,
    pub tool_name: String,
    pub has_dispatch: bool,
}

impl Workspace {
    /// Streams every `runtime_events` row in Maka's health-scan order, borrowed.
    pub fn for_each_event_ref(
        &self,
        mut f: impl FnMut(&EventRowRef<'_>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        self.events_in_scan_order(|row, payload| {
            let [event_id, session_id, invocation_id, run_id, turn_id] = &row.ids;
            f(&EventRowRef {
                event_id: lossy(event_id),
                session_id: lossy(session_id),
                invocation_id: lossy(invocation_id),
                run_id: lossy(run_id),
                turn_id: lossy(turn_id),
                event_seq: row.event_seq,
                payload_json: lossy(payload),
                committed_at: row.committed_at,
            })
        })
    }

    /// [`Workspace::for_each_event_ref`] with the text columns as stored bytes, not
    /// yet read as text: [`lossy`] of each is what `for_each_event_ref` gives. The
    /// check for UTF-8, a pass over every byte, can then be made on the thread that
    /// decodes the payload.
    pub fn for_each_event_raw(
        &self,
        mut f: impl FnMut(&StoredEventRow<'_>, &[u8]) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        self.events_in_scan_order(|row, payload| f(&row, payload))
    }

    /// Steps `sql` (no parameters) through SQLite's C API ([`super::raw`]: the passes
    /// over whole tables), calling `f` on each row.
    fn for_each_raw_row(
        &self,
        sql: &str,
        mut f: impl FnMut(&super::raw::RawRows<'_>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut rows = super::raw::RawRows::prepare(self.conn(), sql).map_err(e)?;
        while rows.step().map_err(e)? {
            f(&rows)?;
        }
        Ok(())
    }

    /// What `for_each_event`, `for_each_event_ref` and `for_each_event_raw` read: each
    /// row as [`StoredEventRow`], and the payload's stored bytes (rendered likewise).
    fn events_in_scan_order(
        &self,
        mut f: impl for<'a> FnMut(StoredEventRow<'a>, &'a [u8]) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        // Through SQLite's C API: see `raw`.
        self.for_each_raw_row(EVENTS_IN_SCAN_ORDER, |r| {
            let row = StoredEventRow {
                ids: [
                    stored_bytes(r.value(0).map_err(e)?),
                    stored_bytes(r.value(1).map_err(e)?),
                    stored_bytes(r.value(2).map_err(e)?),
                    stored_bytes(r.value(3).map_err(e)?),
                    stored_bytes(r.value(4).map_err(e)?),
                ],
                event_seq: int_of(r.value(5).map_err(e)?),
                committed_at: int_of(r.value(7).map_err(e)?),
            };
            let payload = stored_bytes(r.value(6).map_err(e)?);
            f(row, &payload)
        })
    }

    /// Every row of one run (through `runtime_events_by_run`), in scan order.
    pub fn run_event_rows(&self, session_id: &str, run_id: &str) -> Result<Vec<EventRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT event_id, session_id, invocation_id, run_id, turn_id, event_seq, \
                 event_kind, payload_json, committed_at FROM runtime_events \
                 WHERE session_id = ?1 AND run_id = ?2 ORDER BY invocation_id, event_seq, event_id",
            )
            .map_err(e)?;
        let rows = stmt.query_map([session_id, run_id], event_row).map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// `count(*)` of a table.
    pub fn count_rows(&self, table: &str) -> Result<u64, DbError> {
        let n: i64 = self
            .conn()
            .query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |r| {
                r.get(0)
            })
            .map_err(|e| self.err(&e))?;
        Ok(n.max(0) as u64)
    }

    /// Distinct sessions of `runtime_events` (when `session_metadata` is missing).
    pub fn event_session_count(&self) -> Result<u64, DbError> {
        let n: i64 = self
            .conn()
            .query_row(
                "SELECT count(DISTINCT session_id) FROM runtime_events",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(&e))?;
        Ok(n.max(0) as u64)
    }

    /// The run header of `(session_id, run_id)`, through its primary key.
    pub fn header_of(&self, session_id: &str, run_id: &str) -> Result<Option<HeaderRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare_cached(&format!(
                "SELECT {HEADER_COLUMNS} FROM core_agent_runs WHERE session_id = ?1 AND run_id = ?2"
            ))
            .map_err(e)?;
        let mut rows = stmt.query([session_id, run_id]).map_err(e)?;
        match rows.next().map_err(e)? {
            Some(r) => Ok(Some(header_row(r).map_err(e)?)),
            None => Ok(None),
        }
    }

    /// Every `(session_id, run_id)` of `core_agent_runs` (from an index).
    pub fn for_each_header_key(
        &self,
        mut f: impl FnMut(&str, &str) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare("SELECT session_id, run_id FROM core_agent_runs")
            .map_err(e)?;
        let mut rows = stmt.query([]).map_err(e)?;
        while let Some(r) = rows.next().map_err(e)? {
            f(&text_ref(r, 0).map_err(e)?, &text_ref(r, 1).map_err(e)?)?;
        }
        Ok(())
    }

    /// The `tool_operations` row of an operation id (primary key).
    pub fn operation_of(&self, operation_id: &str) -> Result<Option<OperationRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare_cached(&format!(
                "SELECT {OPERATION_COLUMNS} FROM tool_operations WHERE operation_id = ?1"
            ))
            .map_err(e)?;
        let mut rows = stmt.query([operation_id]).map_err(e)?;
        match rows.next().map_err(e)? {
            Some(r) => Ok(Some(operation_row(r).map_err(e)?)),
            None => Ok(None),
        }
    }

    /// The `tool_operations` row of `(invocation_id, provider_tool_call_id)`.
    pub fn operation_by_call(
        &self,
        invocation_id: &str,
        provider_tool_call_id: &str,
    ) -> Result<Option<OperationRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare_cached(&format!(
                "SELECT {OPERATION_COLUMNS} FROM tool_operations \
                 WHERE invocation_id = ?1 AND provider_tool_call_id = ?2"
            ))
            .map_err(e)?;
        let mut rows = stmt
            .query([invocation_id, provider_tool_call_id])
            .map_err(e)?;
        match rows.next().map_err(e)? {
            Some(r) => Ok(Some(operation_row(r).map_err(e)?)),
            None => Ok(None),
        }
    }

    /// The journal rows of an operation, in journal order (through its index).
    pub fn journal_of(&self, operation_id: &str) -> Result<Vec<JournalRow>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare_cached(&format!(
                "SELECT {JOURNAL_COLUMNS} FROM tool_journal_events WHERE operation_id = ?1 \
                 ORDER BY journal_seq"
            ))
            .map_err(e)?;
        let rows = stmt.query_map([operation_id], journal_row).map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Every `tool_operations` row, reduced (table order).
    pub fn for_each_stored_operation(
        &self,
        mut f: impl FnMut(StoredOperationKey) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT operation_id, invocation_id, run_id, provider_tool_call_id, tool_name, \
                 dispatch_event_id IS NOT NULL FROM tool_operations",
            )
            .map_err(e)?;
        let mut rows = stmt.query([]).map_err(e)?;
        while let Some(r) = rows.next().map_err(e)? {
            f(StoredOperationKey {
                operation_id: text(r, 0).map_err(e)?,
                invocation_id: text(r, 1).map_err(e)?,
                run_id: text(r, 2).map_err(e)?,
                provider_tool_call_id: text(r, 3).map_err(e)?,
                tool_name: text(r, 4).map_err(e)?,
                has_dispatch: int(r, 5).map_err(e)? != 0,
            })?;
        }
        Ok(())
    }

    /// The session of the events of `(invocation_id, run_id)`, if any.
    pub fn session_of_run_events(
        &self,
        invocation_id: &str,
        run_id: &str,
    ) -> Result<Option<String>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT session_id FROM runtime_events WHERE invocation_id = ?1 AND run_id = ?2 \
                 LIMIT 1",
            )
            .map_err(e)?;
        let mut rows = stmt.query([invocation_id, run_id]).map_err(e)?;
        match rows.next().map_err(e)? {
            Some(r) => Ok(Some(text(r, 0).map_err(e)?)),
            None => Ok(None),
        }
    }

    /// Streams the ordinal rows in primary-key order: `(session_id, ordinal, event_id)`.
    pub fn for_each_ordinal(&self, mut f: impl FnMut(&str, i64, &str)) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        self.for_each_raw_row(
            "SELECT session_id, ordinal, event_id FROM runtime_session_event_ordinals",
            |r| {
                f(
                    &text_ref(r, 0).map_err(e)?,
                    int(r, 1).map_err(e)?,
                    &text_ref(r, 2).map_err(e)?,
                );
                Ok(())
            },
        )
    }
}

/// Whether column `i` is text that is valid UTF-8 (so that reading it as text and
/// comparing it with a bound text parameter agree).
fn is_utf8_text(row: &(impl Columns + ?Sized), i: usize) -> rusqlite::Result<bool> {
    Ok(matches!(row.value(i)?, ValueRef::Text(b) if std::str::from_utf8(b).is_ok()))
}

/// One `tool_operations` row as SQLite hands it out (valid during the callback),
/// converted as [`OperationRow`] converts it, borrowed where it can be.
pub struct OperationRowRef<'a> {
    pub operation_id: Cow<'a, str>,
    /// `invocation_id, run_id, turn_id, provider_tool_call_id, tool_name,
    /// canonical_args_hash, recovery_mode, current_state, call_event_id`.
    pub texts: [Cow<'a, str>; 9],
    pub result_event_id: Option<Cow<'a, str>>,
    pub version: i64,
    pub dispatch_event_id: Option<Cow<'a, str>>,
}

/// One `tool_journal_events` row as SQLite hands it out, converted as
/// [`JournalRow`] converts it (without `journal_seq`).
pub struct JournalRowRef<'a> {
    /// `journal_event_id, operation_id, invocation_id, run_id, turn_id, state`.
    pub texts: [Cow<'a, str>; 6],
    /// `runtime_event_id, canonical_args_hash, recovery_mode, metadata_json`.
    pub opts: [Option<Cow<'a, str>>; 4],
    pub committed_at: i64,
}

fn opt_text_ref<'a, C: Columns + ?Sized>(
    row: &'a C,
    i: usize,
) -> rusqlite::Result<Option<Cow<'a, str>>> {
    Ok(match row.value(i)? {
        ValueRef::Null => None,
        _ => Some(text_ref(row, i)?),
    })
}

impl Workspace {
    /// Streams every `tool_operations` row in table order, borrowed, with whether its
    /// `operation_id` is UTF-8 text.
    pub fn for_each_operation_row(
        &self,
        mut f: impl FnMut(&OperationRowRef<'_>, bool),
    ) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        self.for_each_raw_row(
            &format!("SELECT {OPERATION_COLUMNS} FROM tool_operations"),
            |r| {
                let t = |i| text_ref(r, i).map_err(e);
                let row = OperationRowRef {
                    operation_id: t(0)?,
                    texts: [
                        t(1)?,
                        t(2)?,
                        t(3)?,
                        t(4)?,
                        t(5)?,
                        t(6)?,
                        t(7)?,
                        t(8)?,
                        t(9)?,
                    ],
                    result_event_id: opt_text_ref(r, 10).map_err(e)?,
                    version: int(r, 11).map_err(e)?,
                    dispatch_event_id: opt_text_ref(r, 12).map_err(e)?,
                };
                f(&row, is_utf8_text(r, 0).map_err(e)?);
                Ok(())
            },
        )
    }

    /// Streams every `tool_journal_events` row in table order, borrowed, with whether
    /// its `operation_id` is UTF-8 text, and its `runtime_event_id` and `operation_id`
    /// as stored.
    pub fn for_each_journal_row(
        &self,
        mut f: impl FnMut(&JournalRowRef<'_>, bool, [ValueRef<'_>; 2]),
    ) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        self.for_each_raw_row(
            &format!("SELECT {JOURNAL_COLUMNS} FROM tool_journal_events"),
            |r| {
                let t = |i| text_ref(r, i).map_err(e);
                let o = |i| opt_text_ref(r, i).map_err(e);
                let row = JournalRowRef {
                    texts: [t(1)?, t(2)?, t(3)?, t(4)?, t(5)?, t(6)?],
                    opts: [o(7)?, o(8)?, o(9)?, o(10)?],
                    committed_at: int(r, 11).map_err(e)?,
                };
                let ids = [r.value(7).map_err(e)?, r.value(2).map_err(e)?];
                f(&row, is_utf8_text(r, 2).map_err(e)?, ids);
                Ok(())
            },
        )
    }
}

impl Workspace {
    /// Streams every `core_agent_runs` row in table order, with whether its
    /// `session_id` and `run_id` are UTF-8 text.
    pub fn for_each_header_row(&self, mut f: impl FnMut(&HeaderRow, bool)) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        self.for_each_raw_row(
            &format!("SELECT {HEADER_COLUMNS} FROM core_agent_runs"),
            |r| {
                let keys_ok = is_utf8_text(r, 0).map_err(e)? && is_utf8_text(r, 1).map_err(e)?;
                f(&header_row(r).map_err(e)?, keys_ok);
                Ok(())
            },
        )
    }

    /// Every `session_metadata` row as Maka's start-up reads it (its session-header
    /// check), in primary-key order.
    pub fn for_each_session_header(
        &self,
        mut f: impl FnMut(SessionHeaderRow),
    ) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT session_id, payload_json, metadata_version, committed_at \
                 FROM session_metadata ORDER BY session_id",
            )
            .map_err(e)?;
        let mut rows = stmt.query([]).map_err(e)?;
        let value = |v: ValueRef<'_>| match v {
            ValueRef::Integer(i) => serde_json::Value::from(i),
            ValueRef::Real(x) => serde_json::Value::from(x),
            ValueRef::Text(t) => serde_json::Value::from(String::from_utf8_lossy(t).into_owned()),
            _ => serde_json::Value::Null,
        };
        while let Some(r) = rows.next().map_err(e)? {
            f(SessionHeaderRow {
                session_id: text(r, 0).map_err(e)?,
                payload_json: text(r, 1).map_err(e)?,
                metadata_version: value(r.get_ref(2).map_err(e)?),
                committed_at: value(r.get_ref(3).map_err(e)?),
            });
        }
        Ok(())
    }
}

/// One `session_metadata` row as the session-header check (`session_header`) needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionHeaderRow {
    pub session_id: String,
    pub payload_json: String,
    /// `metadata_version`, as stored (SQLite may hold any type there).
    pub metadata_version: serde_json::Value,
    /// `committed_at`, as stored.
    pub committed_at: serde_json::Value,
}

#[cfg(test)]
mod lossy_tests {
    use super::*;

    #[test]
    fn lossy_is_from_utf8_lossy_and_borrows_valid_text() {
        let cases: [&[u8]; 7] = [
            b"",
            b"evt_0001-abc",
            "caf\u{e9} \u{1f600}".as_bytes(),
            b"ab\xffcd",
            b"\xe2\x82",
            // Non-ASCII only after the first word (the ASCII test reads by words).
            b"0123456789abcdef0123456789\xc3\xa9",
            b"0123456789abcdef0123456789\xc3",
        ];
        for b in cases {
            let got = lossy(b);
            assert_eq!(got, String::from_utf8_lossy(b), "{b:?}");
            assert_eq!(
                matches!(got, Cow::Borrowed(_)),
                std::str::from_utf8(b).is_ok(),
                "{b:?}"
            );
            assert_eq!(ascii(b).is_some(), b.is_ascii(), "{b:?}");
        }
    }
}
