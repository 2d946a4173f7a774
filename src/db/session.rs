//! One session's rows, read through the session indexes (never a whole-table scan),
//! exactly as stored: every column, SQLite storage class kept. The result is a
//! [`Bundle`], the same value `replay --bundle` reads from a file.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::types::ValueRef;
use rusqlite::ToSql;

use super::{DbError, Workspace};
use crate::bundle::{Bundle, Cell, Row, SchemaInfo};

/// Every query this module runs, with `?1` the session id (or the key named). Each one
/// reaches its rows through a primary key or an index; `tests/replay_db.rs` checks
/// the query plans.
pub const SESSION_QUERIES: &[(&str, &str)] = &[
    (
        "session_metadata",
        "SELECT * FROM session_metadata WHERE session_id = ?1",
    ),
    (
        "session_messages",
        "SELECT * FROM session_messages WHERE session_id = ?1 ORDER BY sequence",
    ),
    (
        "session_message_payloads",
        "SELECT * FROM session_message_payloads WHERE session_id = ?1 ORDER BY sequence",
    ),
    (
        "session_message_chunks",
        "SELECT * FROM session_message_chunks WHERE session_id = ?1 \
         ORDER BY sequence, chunk_index",
    ),
    (
        "core_agent_runs",
        "SELECT * FROM core_agent_runs WHERE session_id = ?1 ORDER BY created_at, run_id",
    ),
    (
        "core_agent_run_events",
        "SELECT * FROM core_agent_run_events WHERE session_id = ?1 ORDER BY run_id, sequence",
    ),
    (
        "runtime_events",
        "SELECT * FROM runtime_events WHERE session_id = ?1 \
         ORDER BY invocation_id, event_seq, event_id",
    ),
    (
        "runtime_partial_snapshots",
        "SELECT * FROM runtime_partial_snapshots WHERE session_id = ?1 \
         ORDER BY run_id, updated_at, stream_key",
    ),
    (
        "runtime_partial_segments",
        "SELECT * FROM runtime_partial_segments WHERE stream_key = ?1 ORDER BY segment_seq",
    ),
    (
        "runtime_continuation_claims",
        "SELECT * FROM runtime_continuation_claims WHERE source_session_id = ?1 \
         UNION SELECT * FROM runtime_continuation_claims WHERE target_session_id = ?1 \
         ORDER BY claim_id",
    ),
    (
        "tool_operations",
        "SELECT * FROM tool_operations WHERE invocation_id = ?1 ORDER BY operation_id",
    ),
    (
        "tool_operations",
        "SELECT * FROM tool_operations WHERE operation_id = ?1",
    ),
    (
        "tool_journal_events",
        "SELECT * FROM tool_journal_events WHERE operation_id = ?1 ORDER BY journal_seq",
    ),
];

/// A session's opening facts that a newer Maka's migration shelved, through that
/// table's session index.
pub const SHELVED_OPENINGS_OF_SESSION: &str = "SELECT * FROM runtime_legacy_invocation_openings \
     WHERE session_id = ?1 ORDER BY opened_at, invocation_id";

fn query(table: &str, nth: usize) -> &'static str {
    SESSION_QUERIES
        .iter()
        .filter(|(t, _)| *t == table)
        .nth(nth)
        .map(|(_, q)| *q)
        .expect("query defined")
}

fn cell(v: ValueRef<'_>) -> Cell {
    match v {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(n) => Cell::Integer(n),
        ValueRef::Real(f) => Cell::Real(f),
        ValueRef::Text(b) => Cell::Text(b.to_vec()),
        ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
    }
}

impl Workspace {
    /// Rows of one query, all columns, storage classes kept.
    fn rows(&self, sql: &str, key: &dyn ToSql) -> Result<Vec<Row>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self.conn().prepare(sql).map_err(e)?;
        let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
        let mut rows = stmt.query([key]).map_err(e)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(e)? {
            let mut columns = Vec::with_capacity(names.len());
            for (i, name) in names.iter().enumerate() {
                columns.push((name.clone(), cell(r.get_ref(i).map_err(e)?)));
            }
            out.push(Row { columns });
        }
        Ok(out)
    }

    /// SQLite's plan for a query (the `detail` column of `EXPLAIN QUERY PLAN`).
    pub fn query_plan(&self, sql: &str) -> Result<Vec<String>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .map_err(e)?;
        let rows = stmt.query_map([""], |r| r.get::<_, String>(3)).map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    /// Every session id with metadata or run headers, for "did you mean" hints
    /// (both tables are small; `runtime_events` is not scanned for this).
    pub fn session_ids(&self) -> Result<Vec<String>, DbError> {
        let schema = self.schema_facts()?;
        let has = |t: &str| schema.tables.iter().any(|x| x == t);
        let parts: Vec<String> = ["session_metadata", "core_agent_runs"]
            .into_iter()
            .filter(|t| has(t))
            .map(|t| format!("SELECT session_id FROM {t}"))
            .collect();
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        let sql = parts.join(" UNION ");
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self.conn().prepare(&sql).map_err(e)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(cell(r.get_ref(0)?).text_lossy().unwrap_or_default())
            })
            .map_err(e)?;
        let mut ids: Vec<String> = rows.collect::<Result<Vec<_>, _>>().map_err(e)?;
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// Reads every row of one session from the tables replay reads, through the
    /// session indexes. `operation_ids_named` returns the tool operation ids the
    /// session's `runtime_events` rows name (the caller decodes them; this module
    /// does not interpret rows). Tables the workspace lacks are left out.
    pub fn export_session(
        &self,
        session_id: &str,
        operation_ids_named: &dyn Fn(&[Row]) -> Vec<String>,
    ) -> Result<Bundle, DbError> {
        // Every query below sees one committed state (nothing new when the caller
        // already holds a snapshot).
        let _snapshot = self.read_snapshot()?;
        let facts = self.schema_facts()?;
        let has = |t: &str| facts.tables.iter().any(|x| x == t);
        if !has("runtime_events") {
            return Err(DbError::NotAWorkspace {
                path: self.path().to_path_buf(),
            });
        }
        let mut tables: Vec<(String, Vec<Row>)> = Vec::new();
        let key: &dyn ToSql = &session_id;
        for table in [
            "session_metadata",
            "session_messages",
            "session_message_payloads",
            "session_message_chunks",
            "core_agent_runs",
            "core_agent_run_events",
            "runtime_events",
            "runtime_partial_snapshots",
        ] {
            if has(table) {
                super::pause_point(&format!("export:{table}"));
                tables.push((table.to_owned(), self.rows(query(table, 0), key)?));
            }
        }
        let get = |tables: &[(String, Vec<Row>)], t: &str| -> Vec<Row> {
            tables
                .iter()
                .find(|(n, _)| n == t)
                .map(|(_, r)| r.clone())
                .unwrap_or_default()
        };
        let text_col = |r: &Row, c: &str| r.get(c).and_then(Cell::text_lossy);
        if has("runtime_partial_segments") {
            let mut segs = Vec::new();
            for snap in get(&tables, "runtime_partial_snapshots") {
                if let Some(k) = snap.get("stream_key") {
                    let k = cell_key(k);
                    segs.extend(self.rows(query("runtime_partial_segments", 0), &k)?);
                }
            }
            tables.push(("runtime_partial_segments".into(), segs));
        }
        if has("runtime_legacy_invocation_openings") {
            // A newer Maka's shelved opening facts (not in `SESSION_QUERIES`, whose
            // plans are checked on a main-generation file without this table).
            tables.push((
                "runtime_legacy_invocation_openings".into(),
                self.rows(SHELVED_OPENINGS_OF_SESSION, key)?,
            ));
        }
        if has("runtime_continuation_claims") {
            tables.push((
                "runtime_continuation_claims".into(),
                self.rows(query("runtime_continuation_claims", 0), key)?,
            ));
        }
        let events = get(&tables, "runtime_events");
        let mut named: BTreeSet<String> = operation_ids_named(&events).into_iter().collect();
        if has("tool_operations") {
            super::pause_point("export:tool_operations");
            let mut invocations: BTreeSet<String> = events
                .iter()
                .filter_map(|r| text_col(r, "invocation_id"))
                .collect();
            // A run's invocation is normally its run id: also look there, so rows of
            // runs whose events are gone are still found.
            invocations.extend(
                get(&tables, "core_agent_runs")
                    .iter()
                    .filter_map(|r| text_col(r, "run_id")),
            );
            let mut ops: BTreeMap<String, Row> = BTreeMap::new();
            for inv in &invocations {
                for r in self.rows(query("tool_operations", 0), inv)? {
                    if let Some(id) = text_col(&r, "operation_id") {
                        ops.insert(id, r);
                    }
                }
            }
            for op in &named {
                if !ops.contains_key(op) {
                    for r in self.rows(query("tool_operations", 1), op)? {
                        ops.insert(op.clone(), r);
                    }
                }
            }
            named.extend(ops.keys().cloned());
            tables.push(("tool_operations".into(), ops.into_values().collect()));
        }
        if has("tool_journal_events") {
            let mut journal = Vec::new();
            for op in &named {
                journal.extend(self.rows(query("tool_journal_events", 0), op)?);
            }
            journal.sort_by_key(|r| match r.get("journal_seq") {
                Some(Cell::Integer(n)) => *n,
                _ => i64::MAX,
            });
            tables.push(("tool_journal_events".into(), journal));
        }
        Ok(Bundle {
            session_id: session_id.to_owned(),
            schema: SchemaInfo {
                user_version: facts.user_version,
                registry: facts.registry,
                capabilities: facts.capabilities,
            },
            tables,
            quarantine: None,
            kind: None,
            excise: None,
            rederive: None,
        })
    }
}

/// A key value for a follow-up query, bound with the storage class it was read with.
fn cell_key(c: &Cell) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    match c {
        Cell::Null => Value::Null,
        Cell::Integer(n) => Value::Integer(*n),
        Cell::Real(f) => Value::Real(*f),
        Cell::Text(b) => Value::Text(String::from_utf8_lossy(b).into_owned()),
        Cell::Blob(b) => Value::Blob(b.clone()),
    }
}
