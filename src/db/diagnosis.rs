//! The few extra facts the diagnosis reads beside the scan: session titles, the
//! events a run header's `traceWriteError` names, whether a tool call was ever
//! recorded, and how much streamed text a partial snapshot holds.

use rusqlite::OptionalExtension;

use super::rows::{int, opt_text, text};
use super::{DbError, Workspace};

/// `session_metadata.name` and the latest of `last_message_at` / `last_used_at`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionLabelRow {
    pub name: Option<String>,
    pub last_activity_ms: Option<i64>,
}

/// A `runtime_events` row named by id: where it lives and what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedEventRow {
    pub session_id: String,
    pub run_id: String,
    pub event_kind: String,
    pub payload_json: String,
}

/// One partial snapshot of a run with the length of its streamed text (characters,
/// the snapshot's own text and its segments together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartialTextRow {
    pub stream_key: String,
    pub chars: i64,
}

impl Workspace {
    fn has_column(&self, table: &str, column: &str) -> Result<bool, DbError> {
        let n: i64 = self
            .conn()
            .query_row(
                "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
                [table, column],
                |r| r.get(0),
            )
            .map_err(|e| self.err(&e))?;
        Ok(n > 0)
    }

    /// The title and last activity of each session that has a metadata row. Older
    /// generations may lack a column; what is missing reads as `None`.
    pub fn session_labels<'s>(
        &self,
        ids: impl IntoIterator<Item = &'s str>,
    ) -> Result<std::collections::BTreeMap<String, SessionLabelRow>, DbError> {
        let mut out = std::collections::BTreeMap::new();
        if !self.has_table("session_metadata")? {
            return Ok(out);
        }
        let col = |c: &'static str| -> Result<&'static str, DbError> {
            Ok(if self.has_column("session_metadata", c)? {
                c
            } else {
                "NULL"
            })
        };
        let sql = format!(
            "SELECT {}, {}, {} FROM session_metadata WHERE session_id = ?1",
            col("name")?,
            col("last_message_at")?,
            col("last_used_at")?
        );
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self.conn().prepare(&sql).map_err(e)?;
        for id in ids {
            let row = stmt
                .query_row([id], |r| {
                    let ms = |i: usize| -> rusqlite::Result<Option<i64>> {
                        Ok(match r.get_ref(i)? {
                            rusqlite::types::ValueRef::Null => None,
                            _ => Some(int(r, i)?),
                        })
                    };
                    Ok(SessionLabelRow {
                        name: opt_text(r, 0)?,
                        last_activity_ms: ms(1)?.max(ms(2)?),
                    })
                })
                .optional()
                .map_err(e)?;
            if let Some(row) = row {
                out.insert(id.to_owned(), row);
            }
        }
        Ok(out)
    }

    /// The `runtime_events` row with this id, if the file holds one.
    pub fn named_event(&self, event_id: &str) -> Result<Option<NamedEventRow>, DbError> {
        self.conn()
            .prepare_cached(
                "SELECT session_id, run_id, event_kind, payload_json FROM runtime_events \
                 WHERE event_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([event_id], |r| {
                    Ok(NamedEventRow {
                        session_id: text(r, 0)?,
                        run_id: text(r, 1)?,
                        event_kind: text(r, 2)?,
                        payload_json: text(r, 3)?,
                    })
                })
                .optional()
            })
            .map_err(|e| self.err(&e))
    }

    /// Whether a `function_call` event of the session records this provider tool
    /// call id (through the session index: asked only for a few damaged events).
    pub fn tool_call_recorded(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<bool, DbError> {
        let n: i64 = self
            .conn()
            .query_row(
                "SELECT count(*) FROM runtime_events WHERE session_id = ?1 \
                 AND event_kind = 'function_call' AND json_valid(payload_json) \
                 AND (json_extract(payload_json, '$.refs.toolCallId') = ?2 \
                 OR json_extract(payload_json, '$.content.id') = ?2)",
                [session_id, tool_call_id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(&e))?;
        Ok(n > 0)
    }

    /// The partial snapshots of a run with the length of their text.
    pub fn partial_texts(
        &self,
        session_id: &str,
        run_id: &str,
    ) -> Result<Vec<PartialTextRow>, DbError> {
        if !self.has_table("runtime_partial_snapshots")? {
            return Ok(Vec::new());
        }
        let segments = self.has_table("runtime_partial_segments")?;
        let sql = if segments {
            "SELECT p.stream_key, length(p.text_content) + coalesce((SELECT sum(length(s.text_content)) \
             FROM runtime_partial_segments s WHERE s.stream_key = p.stream_key), 0) \
             FROM runtime_partial_snapshots p WHERE p.session_id = ?1 AND p.run_id = ?2 \
             ORDER BY p.updated_at, p.stream_key"
        } else {
            "SELECT p.stream_key, length(p.text_content) FROM runtime_partial_snapshots p \
             WHERE p.session_id = ?1 AND p.run_id = ?2 ORDER BY p.updated_at, p.stream_key"
        };
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self.conn().prepare(sql).map_err(e)?;
        let rows = stmt
            .query_map([session_id, run_id], |r| {
                Ok(PartialTextRow {
                    stream_key: text(r, 0)?,
                    chars: int(r, 1)?,
                })
            })
            .map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }
}
