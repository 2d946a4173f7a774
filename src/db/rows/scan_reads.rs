//! The scan's reads: rows streamed as SQLite hands them out (events, operations, journal,
//! headers, session headers) and its point lookups through indexes.

use rusqlite::types::ValueRef;

use super::columns::{
    int, int_of, is_utf8_text, lossy, opt_text_ref, stored_bytes, text, text_ref,
};
use super::row_reading::{
    event_row, header_row, journal_row, operation_row, HEADER_COLUMNS, JOURNAL_COLUMNS,
    OPERATION_COLUMNS,
};
use super::{
    EventRow, EventRowRef, HeaderRow, JournalRow, JournalRowRef, OperationRow, OperationRowRef,
    SessionHeaderRow, StoredEventRow, StoredOperationKey, EVENTS_IN_SCAN_ORDER,
};
use crate::db::{DbError, Workspace};
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

    /// Steps `sql` (no parameters) through SQLite's C API ([`crate::db::raw`]: the passes
    /// over whole tables), calling `f` on each row.
    pub(super) fn for_each_raw_row(
        &self,
        sql: &str,
        mut f: impl FnMut(&crate::db::raw::RawRows<'_>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut rows = crate::db::raw::RawRows::prepare(self.conn(), sql).map_err(e)?;
        while rows.step().map_err(e)? {
            f(&rows)?;
        }
        Ok(())
    }

    /// What `for_each_event`, `for_each_event_ref` and `for_each_event_raw` read: each
    /// row as [`StoredEventRow`], and the payload's stored bytes (rendered likewise).
    pub(super) fn events_in_scan_order(
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
