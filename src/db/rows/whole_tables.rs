//! Reads of whole tables and the schema, for the reports and checks that are not the
//! scan's walk: schema facts, sessions, summaries, payloads, run events.

use std::collections::BTreeMap;

use rusqlite::types::ValueRef;

use super::columns::{int, lossy, text, text_ref, Columns};
use super::row_reading::{event_row, journal_row, operation_row, EVENTS_OF_SESSION};
use super::{
    EventRow, HeaderRow, JournalRow, OperationRow, RunEventVisitor, RunEventsSummary, SchemaFacts,
    SessionRow, SnapshotSummary,
};
use crate::db::schema::{schema_object, SchemaObject};
use crate::db::{DbError, Workspace};
impl Workspace {
    /// `PRAGMA user_version`, then every schema object (tables, indexes, triggers,
    /// views) ordered by type and name as Maka reads them, and the tables' names.
    pub(in crate::db) fn schema_objects(
        &self,
    ) -> Result<(i64, Vec<SchemaObject>, Vec<String>), DbError> {
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
        crate::db::facts::has_header_records(self.conn()).map_err(|e| self.err(&e))
    }

    /// Whether a table exists in a shape wsledger reads (see [`crate::db::shape`]).
    pub fn has_table(&self, name: &str) -> Result<bool, DbError> {
        crate::db::facts::has_table(self.conn(), name).map_err(|e| self.err(&e))
    }
}
