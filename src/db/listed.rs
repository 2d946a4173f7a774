//! What Maka's strict start-up reads besides the log: which run headers belong to a
//! session it lists, and the stored session messages of every listed session.

use rusqlite::types::ValueRef;

use super::facts::{MESSAGE_CHUNK_BYTES, MESSAGE_CHUNK_MARKER};
use super::{DbError, Workspace};

/// One `session_messages` row of a listed session, as Maka's recovery read gets it:
/// its record text (reassembled from its chunks when it is stored in chunks), or why
/// the row itself cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMessageRow {
    pub session_id: String,
    /// The `sequence` column (`-1` when it is not an integer).
    pub sequence: i64,
    pub record: Result<String, String>,
}

impl Workspace {
    /// `(session, run) → turn` of every opening fact a newer Maka's migration kept off
    /// the event spine (`runtime_legacy_invocation_openings`: the runs that already had
    /// events when their header became an opening fact); empty without the table.
    pub fn shelved_openings(
        &self,
    ) -> Result<std::collections::HashMap<(String, String), String>, DbError> {
        let mut out = std::collections::HashMap::new();
        if !self.has_table("runtime_legacy_invocation_openings")? {
            return Ok(out);
        }
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare("SELECT session_id, run_id, turn_id FROM runtime_legacy_invocation_openings")
            .map_err(e)?;
        let mut rows = stmt.query([]).map_err(e)?;
        let text = |v: ValueRef<'_>| match v {
            ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
            _ => String::new(),
        };
        while let Some(r) = rows.next().map_err(e)? {
            let g = |i: usize| r.get_ref(i).map(text).map_err(e);
            out.insert((g(0)?, g(1)?), g(2)?);
        }
        Ok(out)
    }

    /// `(session, run)` of every `core_agent_runs` row whose session has no
    /// `session_metadata` row (every row when that table is missing), by key.
    pub fn runs_outside_sessions(&self) -> Result<Vec<(String, String)>, DbError> {
        if !self.has_table("core_agent_runs")? {
            return Ok(Vec::new());
        }
        let sql = if self.has_table("session_metadata")? {
            "SELECT r.session_id, r.run_id FROM core_agent_runs r WHERE NOT EXISTS \
             (SELECT 1 FROM session_metadata m WHERE m.session_id = r.session_id) \
             ORDER BY r.session_id, r.run_id"
        } else {
            "SELECT session_id, run_id FROM core_agent_runs ORDER BY session_id, run_id"
        };
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self.conn().prepare(sql).map_err(e)?;
        let mut rows = stmt.query([]).map_err(e)?;
        let mut out = Vec::new();
        let text = |v: ValueRef<'_>| match v {
            ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
            ValueRef::Integer(i) => i.to_string(),
            ValueRef::Real(x) => x.to_string(),
            ValueRef::Null => String::new(),
        };
        while let Some(r) = rows.next().map_err(e)? {
            out.push((
                text(r.get_ref(0).map_err(e)?),
                text(r.get_ref(1).map_err(e)?),
            ));
        }
        Ok(out)
    }

    /// The stored messages of listed sessions that may not read as Maka's recovery
    /// reads them, by session and sequence: rows whose record is not an object with
    /// one of `types` as its `type`, a string `id`, a numeric `ts` and (but for
    /// `system_note`) a string `turnId` (tested in SQL,
    /// so that the rows that are plainly fine never leave SQLite), and every row
    /// stored in chunks (checked here). Nothing without `session_messages`.
    pub fn suspect_session_messages(
        &self,
        types: &[&str],
    ) -> Result<Vec<StoredMessageRow>, DbError> {
        if !self.has_table("session_messages")? || !self.has_table("session_metadata")? {
            return Ok(Vec::new());
        }
        let payloads = self.has_table("session_message_payloads")?;
        let chunks = self.has_table("session_message_chunks")?;
        let quoted: Vec<String> = types
            .iter()
            .map(|t| format!("'{}'", t.replace('\'', "''")))
            .collect();
        let plain = format!(
            "typeof(m.record_json) = 'text' AND CASE WHEN json_valid(m.record_json) THEN \
             json_type(m.record_json) IS 'object' \
             AND json_type(m.record_json, '$.type') IS 'text' \
             AND json_extract(m.record_json, '$.type') IN ({}) \
             AND json_type(m.record_json, '$.id') IS 'text' \
             AND (json_extract(m.record_json, '$.type') = 'system_note' \
                  OR json_type(m.record_json, '$.turnId') IS 'text') \
             AND json_type(m.record_json, '$.ts') IN ('integer', 'real') ELSE 0 END",
            quoted.join(", ")
        );
        let (bytes, sha, join) = if payloads {
            (
                "p.record_bytes",
                "p.sha256",
                "LEFT JOIN session_message_payloads p ON p.session_id = m.session_id \
                 AND p.sequence = m.sequence",
            )
        } else {
            ("NULL", "NULL", "")
        };
        let sql = format!(
            "SELECT m.session_id, m.sequence, m.record_json, {bytes}, {sha} \
             FROM session_messages m JOIN session_metadata s ON s.session_id = m.session_id \
             {join} \
             WHERE {bytes} IS NOT NULL OR typeof(m.sequence) != 'integer' OR m.sequence < 0 \
             OR NOT coalesce(({plain}), 0) \
             ORDER BY m.session_id, m.sequence"
        );
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self.conn().prepare(&sql).map_err(e)?;
        let mut rows = stmt.query([]).map_err(e)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(e)? {
            let session_id = match r.get_ref(0).map_err(e)? {
                ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                _ => continue, // a session id Maka's list would not give
            };
            let sequence = match r.get_ref(1).map_err(e)? {
                ValueRef::Integer(i) if i >= 0 => Some(i),
                _ => None,
            };
            let record_json = match r.get_ref(2).map_err(e)? {
                ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
                _ => None,
            };
            let record_bytes = r.get_ref(3).map_err(e)?;
            let digest = match r.get_ref(4).map_err(e)? {
                ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
                _ => None,
            };
            let record = match (sequence, record_bytes) {
                (None, _) => Err("its sequence is not a non-negative integer".to_owned()),
                (Some(_), ValueRef::Null) => match record_json {
                    None => Err("its record is not text".to_owned()),
                    Some(j) if j == MESSAGE_CHUNK_MARKER => {
                        Err("it is marked as stored in chunks but has no payload row".to_owned())
                    }
                    Some(j) => Ok(j),
                },
                (Some(seq), bytes) => self.chunked_record(
                    &session_id,
                    seq,
                    record_json.as_deref(),
                    bytes,
                    digest.as_deref(),
                    chunks,
                )?,
            };
            out.push(StoredMessageRow {
                session_id,
                sequence: sequence.unwrap_or(-1),
                record,
            });
        }
        Ok(out)
    }

    /// A record stored in chunks, reassembled and checked as Maka's read checks it
    /// (marker, byte count, chunk count and order, digests).
    fn chunked_record(
        &self,
        session_id: &str,
        sequence: i64,
        record_json: Option<&str>,
        bytes: ValueRef<'_>,
        digest: Option<&str>,
        has_chunks: bool,
    ) -> Result<Result<String, String>, DbError> {
        use sha2::{Digest, Sha256};
        let bytes = match bytes {
            ValueRef::Integer(n) if n >= 1 => n as u64,
            _ => return Ok(Err("its payload row has no valid byte count".to_owned())),
        };
        if record_json != Some(MESSAGE_CHUNK_MARKER)
            || bytes <= MESSAGE_CHUNK_BYTES as u64
            || digest.is_none()
            || !has_chunks
        {
            return Ok(Err(
                "its payload row does not match its record (marker, size or digest)".to_owned(),
            ));
        }
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT chunk_index, data, sha256 FROM session_message_chunks \
                 WHERE session_id = ?1 AND sequence = ?2 ORDER BY chunk_index",
            )
            .map_err(e)?;
        let mut rows = stmt
            .query(rusqlite::params![session_id, sequence])
            .map_err(e)?;
        let expected = bytes.div_ceil(MESSAGE_CHUNK_BYTES as u64);
        let mut data = Vec::new();
        let mut n = 0u64;
        while let Some(r) = rows.next().map_err(e)? {
            let index_ok =
                matches!(r.get_ref(0).map_err(e)?, ValueRef::Integer(i) if i as u64 == n && i >= 0);
            let chunk = match r.get_ref(1).map_err(e)? {
                ValueRef::Blob(b) => b,
                _ => return Ok(Err(format!("chunk {n} is not a blob"))),
            };
            let sha_ok = match r.get_ref(2).map_err(e)? {
                ValueRef::Text(t) => hex::encode(Sha256::digest(chunk)).as_bytes() == t,
                _ => false,
            };
            if !index_ok || !sha_ok {
                return Ok(Err(format!(
                    "chunk {n} is out of order or its digest differs"
                )));
            }
            data.extend_from_slice(chunk);
            n += 1;
        }
        if n != expected || data.len() as u64 != bytes {
            return Ok(Err(format!(
                "{n} chunk(s) of {} byte(s) where {expected} chunk(s) of {bytes} were recorded",
                data.len()
            )));
        }
        if Some(hex::encode(Sha256::digest(&data)).as_str()) != digest {
            return Ok(Err("the record's digest differs from its chunks".to_owned()));
        }
        Ok(Ok(String::from_utf8_lossy(&data).into_owned()))
    }
}

/// One `runtime_continuation_claims` row, reduced to what Maka's store checks of it
/// before every append (its columns against its own payload).
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRow {
    pub claim_id: String,
    /// `protocol_version`, when a number.
    pub protocol_version: Option<f64>,
    pub boundary_json: Option<String>,
    /// `source_session_id`, `source_invocation_id`, `source_run_id`, `source_turn_id`
    /// (`None` when not text).
    pub source: [Option<String>; 4],
    /// `source_event_high_water`, when a number.
    pub source_event_high_water: Option<f64>,
    pub source_prefix_digest: Option<String>,
    pub target_session_id: String,
    /// The claim's target, as JSON: its run header (`target_run_header_json`), or in a
    /// newer Maka its opening fact (`target_opening_json`, see `target_column`).
    pub target_run_header_json: Option<String>,
    /// The column `target_run_header_json` was read from.
    pub target_column: &'static str,
}

impl Workspace {
    /// Every continuation-claim row in Maka's order (`claimed_at, claim_id`); none
    /// without the table (releases before v0.1.3).
    pub fn claim_rows(&self) -> Result<Vec<ClaimRow>, DbError> {
        if !self.has_table("runtime_continuation_claims")? {
            return Ok(Vec::new());
        }
        let e = |e: rusqlite::Error| self.err(&e);
        // A newer Maka keeps the target's opening fact instead of its header.
        let target_column = if self
            .conn()
            .column_exists(
                Some("main"),
                "runtime_continuation_claims",
                "target_run_header_json",
            )
            .map_err(e)?
        {
            "target_run_header_json"
        } else {
            "target_opening_json"
        };
        let mut stmt = self
            .conn()
            .prepare(&format!(
                "SELECT claim_id, protocol_version, boundary_json, source_session_id, \
                 source_invocation_id, source_run_id, source_turn_id, source_event_high_water, \
                 source_prefix_digest, target_session_id, {target_column} \
                 FROM runtime_continuation_claims ORDER BY claimed_at ASC, claim_id ASC"
            ))
            .map_err(e)?;
        let mut rows = stmt.query([]).map_err(e)?;
        let text = |v: ValueRef<'_>| match v {
            ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
            _ => None,
        };
        let number = |v: ValueRef<'_>| match v {
            ValueRef::Integer(i) => Some(i as f64),
            ValueRef::Real(x) => Some(x),
            _ => None,
        };
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(e)? {
            let g = |i: usize| r.get_ref(i).map_err(e);
            out.push(ClaimRow {
                claim_id: text(g(0)?).unwrap_or_default(),
                protocol_version: number(g(1)?),
                boundary_json: text(g(2)?),
                source: [text(g(3)?), text(g(4)?), text(g(5)?), text(g(6)?)],
                source_event_high_water: number(g(7)?),
                source_prefix_digest: text(g(8)?),
                target_session_id: text(g(9)?).unwrap_or_default(),
                target_run_header_json: text(g(10)?),
                target_column,
            });
        }
        Ok(out)
    }
}
