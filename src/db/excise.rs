//! Excision: removing single damaged facts from the ledger, with what Maka's foreign
//! keys cascade from them and the tool projection rows only they imply, and putting
//! them back.
//!
//! For one session and a set of event ids `X` (passed as one JSON array, so no
//! temporary object is ever created), the rows removed are, in this order:
//! - `tool_journal_events` whose `runtime_event_id` is in `X`, or whose operation is
//!   one of the operations below;
//! - `tool_operations` whose call, dispatch or result event is in `X` (their keys have
//!   no `ON DELETE` action: left in place they would make the delete fail);
//! - `runtime_events` whose `event_id` is in `X`, and everything an `ON DELETE
//!   CASCADE` key takes with them (the `runtime_session_event_ordinals` row), read with
//!   `PRAGMA foreign_key_list` so a cascade of any release is never missed.
//!
//! Nothing else: no session, transcript, header or catalog row is touched. A row of
//! another table that still references a removed row through a key without a cascade
//! (a continuation claim's start event, a workspace epoch) is a blocker: the delete
//! would fail, so the excision is refused for that session.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{params, Connection, OpenFlags};

use super::cascade::{dangling, foreign_keys, reached};
use super::quarantine::{insert_rows, read_reached, select_rows, table_names, table_shape};
use super::quote;
use super::write::{classify, collision, restored_keys_broken, WriteError, Writer};
use super::{DbError, Workspace};
use crate::bundle::Row;

/// Every row the excision of some events of one session removes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Excision {
    pub session_id: String,
    /// The excised event ids, sorted.
    pub events: Vec<String>,
    /// Tables in the order the excision reaches them (each direct statement followed
    /// by its cascades), every touched table even when it has no row.
    pub tables: Vec<(String, Vec<Row>)>,
    /// Rowids of rows of tables whose rowid is not a column (parallel to `tables`).
    pub rowids: BTreeMap<String, Vec<i64>>,
    /// Why the delete would fail (empty: it succeeds).
    pub blockers: Vec<String>,
}

impl Excision {
    /// Rows per table (tables without rows left out).
    pub fn counts(&self) -> Vec<(String, usize)> {
        self.tables
            .iter()
            .filter(|(_, r)| !r.is_empty())
            .map(|(t, r)| (t.clone(), r.len()))
            .collect()
    }

    /// The rows of one table.
    pub fn rows(&self, table: &str) -> &[Row] {
        self.tables
            .iter()
            .find(|(t, _)| t == table)
            .map_or(&[], |(_, r)| r.as_slice())
    }
}

/// The JSON array of `events` bound as `?1`.
fn id_list(events: &[String]) -> String {
    serde_json::to_string(events).unwrap_or_else(|_| "[]".into())
}

const IDS: &str = "(SELECT value FROM json_each(?1))";

/// The direct statements: (table, `WHERE` clause with `?1` = the id list), in order.
fn direct(c: &Connection, tables: &BTreeSet<String>) -> rusqlite::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut op_refs = Vec::new();
    if tables.contains("tool_operations") {
        let shape = table_shape(c, "tool_operations")?;
        for col in ["call_event_id", "dispatch_event_id", "result_event_id"] {
            if shape.columns.iter().any(|c| c == col) {
                op_refs.push(format!("{col} IN {IDS}"));
            }
        }
    }
    let ops = (!op_refs.is_empty()).then(|| op_refs.join(" OR "));
    if tables.contains("tool_journal_events") {
        let mut clause = format!("runtime_event_id IN {IDS}");
        if let Some(ops) = &ops {
            clause.push_str(&format!(
                " OR operation_id IN (SELECT operation_id FROM tool_operations WHERE {ops})"
            ));
        }
        out.push(("tool_journal_events".to_owned(), format!("({clause})")));
    }
    if let Some(ops) = ops {
        out.push(("tool_operations".to_owned(), format!("({ops})")));
    }
    out.push(("runtime_events".to_owned(), format!("(event_id IN {IDS})")));
    Ok(out)
}

/// Reads every row the excision of `events` (of `session`) removes, and what would
/// make the delete fail. Reads only.
pub fn read_excision(
    c: &Connection,
    session: &str,
    events: &[String],
) -> rusqlite::Result<Excision> {
    let mut events: Vec<String> = events.to_vec();
    events.sort();
    events.dedup();
    let ids = id_list(&events);
    let tables = table_names(c)?;
    let fks = foreign_keys(c, &tables)?;
    let sel = reached(&direct(c, &tables)?, &fks);
    let (tables_read, rowids) = read_reached(c, &sel, &ids)?;
    let mut x = Excision {
        session_id: session.to_owned(),
        events,
        tables: tables_read,
        rowids,
        ..Excision::default()
    };
    // An event of another session would leave this one's bundle incomplete.
    let foreign: i64 = c.query_row(
        &format!(
            "SELECT count(*) FROM runtime_events WHERE event_id IN {IDS} AND session_id IS NOT ?2"
        ),
        params![ids, session],
        |r| r.get(0),
    )?;
    if foreign > 0 {
        x.blockers
            .push(format!("{foreign} of the events belong to another session"));
    }
    // Rows that keep referencing a removed row through a key without a cascade.
    for (n, fk) in dangling(c, &fks, &sel, &ids)? {
        x.blockers.push(format!(
            "{n} row(s) of `{}` reference rows the excision removes from `{}` ({} → {})",
            fk.child,
            fk.parent,
            fk.from.join(", "),
            fk.to.join(", ")
        ));
    }
    Ok(x)
}

/// Deletes what [`read_excision`] read (the direct statements; foreign keys must be
/// on, so the cascades follow).
pub fn delete_excision(c: &Connection, events: &[String]) -> rusqlite::Result<()> {
    let ids = id_list(events);
    let tables = table_names(c)?;
    for (table, clause) in direct(c, &tables)? {
        c.execute(
            &format!("DELETE FROM {} WHERE {clause}", quote(&table)),
            params![ids],
        )?;
    }
    Ok(())
}

/// One excision bundle to put back.
#[derive(Clone, Debug, Default)]
pub struct ExcisionRestore {
    pub session_id: String,
    pub events: Vec<String>,
    /// Tables in the bundle's order (the order they were removed in).
    pub tables: Vec<(String, Vec<Row>)>,
    pub rowids: BTreeMap<String, Vec<i64>>,
}

impl Writer {
    /// Reads an excision on the writer's connection (the plan the bundles hold).
    pub fn read_excision(&self, session: &str, events: &[String]) -> Result<Excision, WriteError> {
        read_excision(self.conn(), session, events).map_err(|e| classify(self.path(), e))
    }

    /// Removes every excision of `expected` in one `BEGIN IMMEDIATE` transaction, after
    /// checking inside it that each still reads exactly as the bundles hold it. Any
    /// difference or failure rolls everything back.
    pub fn excise(&self, expected: &[Excision]) -> Result<(), WriteError> {
        let path = self.path().to_path_buf();
        let tx = self.begin_checked()?;
        let werr = |e: rusqlite::Error| classify(&path, e);
        for x in expected {
            let now = read_excision(&tx, &x.session_id, &x.events).map_err(werr)?;
            if now != *x {
                return Err(WriteError::Changed {
                    path: path.clone(),
                    what: format!("the excised rows of session `{}`", x.session_id),
                });
            }
        }
        for x in expected {
            delete_excision(&tx, &x.events).map_err(werr)?;
        }
        self.commit_checked(tx, ToString::to_string)
    }

    /// Puts excised rows back in one transaction (foreign keys checked at commit),
    /// each row with its rowid where it is free. Refuses when an excised event is in
    /// the file again. Returns how many rows got a new rowid.
    pub fn restore_excised(&self, items: &[ExcisionRestore]) -> Result<usize, WriteError> {
        let path = self.path().to_path_buf();
        let tx = self.begin_checked()?;
        let werr = |e: rusqlite::Error| classify(&path, e);
        tx.pragma_update(None, "defer_foreign_keys", true)
            .map_err(werr)?;
        let mut moved = 0;
        for item in items {
            let back: i64 = tx
                .query_row(
                    &format!("SELECT count(*) FROM runtime_events WHERE event_id IN {IDS}"),
                    params![id_list(&item.events)],
                    |r| r.get(0),
                )
                .map_err(werr)?;
            if back > 0 {
                return Err(WriteError::Write {
                    path: path.clone(),
                    detail: format!(
                        "{back} excised event(s) of session `{}` are in the workspace again",
                        item.session_id
                    ),
                });
            }
            // Parents first (the log, then what hangs on it).
            for (table, rows) in item.tables.iter().rev() {
                let rowids = item.rowids.get(table).map(Vec::as_slice);
                moved += insert_rows(&tx, table, rows, rowids)
                    .map_err(|e| collision(&path, e, table, "excision bundle", &item.session_id))?;
            }
        }
        self.commit_checked(tx, restored_keys_broken)?;
        Ok(moved)
    }
}

impl Workspace {
    /// Every row the excision of `events` of `session` would remove (read-only).
    pub fn excision(&self, session: &str, events: &[String]) -> Result<Excision, DbError> {
        read_excision(self.conn(), session, events).map_err(|e| self.err(&e))
    }

    /// Only the `runtime_events` rows of `events` (by primary key): what `doctor scan`'s
    /// diagnosis names and counts, without the whole-table reads of the projections and
    /// key checks that [`Workspace::excision`] makes (and no blockers).
    pub fn excision_events(&self, session: &str, events: &[String]) -> Result<Excision, DbError> {
        let read = || -> rusqlite::Result<Excision> {
            let c = self.conn();
            let mut events: Vec<String> = events.to_vec();
            events.sort();
            events.dedup();
            let ids = id_list(&events);
            let shape = table_shape(c, "runtime_events")?;
            let rows = select_rows(
                c,
                "runtime_events",
                &shape,
                &format!("(event_id IN {IDS})"),
                &ids,
            )?;
            Ok(Excision {
                session_id: session.to_owned(),
                events,
                tables: vec![(
                    "runtime_events".to_owned(),
                    rows.into_iter().map(|(_, r)| r).collect(),
                )],
                ..Excision::default()
            })
        };
        read().map_err(|e| self.err(&e))
    }

    /// Whether each of `events` is still in `runtime_events` (restore's dry run).
    pub fn events_present(&self, events: &[String]) -> Result<usize, DbError> {
        let n: i64 = self
            .conn()
            .query_row(
                &format!("SELECT count(*) FROM runtime_events WHERE event_id IN {IDS}"),
                params![id_list(events)],
                |r| r.get(0),
            )
            .map_err(|e| self.err(&e))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// A private copy of this snapshot (SQLite's backup API: every page as it is, so
    /// rowids are kept) in a temporary directory, with `excisions` applied: the file as
    /// an apply would leave it, to be scanned ("rescanned in memory"; the original is
    /// never written). The copy goes when the returned workspace is dropped.
    pub fn excised_copy(&self, excisions: &[Excision]) -> Result<Workspace, DbError> {
        let io = |e: std::io::Error| DbError::Io {
            path: self.path().to_path_buf(),
            source: e,
        };
        let dir = tempfile::tempdir().map_err(io)?;
        let copy = dir.path().join("runtime.sqlite");
        let cerr = |e: rusqlite::Error| DbError::from_sqlite(self.path(), &e);
        {
            let mut dst = Connection::open(&copy).map_err(cerr)?;
            {
                let b = rusqlite::backup::Backup::new(self.conn(), &mut dst).map_err(cerr)?;
                b.run_to_completion(1 << 14, std::time::Duration::ZERO, None)
                    .map_err(cerr)?;
            }
            dst.pragma_update(None, "foreign_keys", true)
                .map_err(cerr)?;
            let tx = dst.transaction().map_err(cerr)?;
            for x in excisions {
                delete_excision(&tx, &x.events).map_err(cerr)?;
            }
            tx.commit().map_err(cerr)?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let uri = super::file_uri(&copy, "mode=rw");
        let conn = Connection::open_with_flags(&uri, flags).map_err(cerr)?;
        let ws = Workspace {
            conn,
            path: self.path().to_path_buf(),
            twin: Some((uri, flags)),
            _copy_dir: Some(dir),
            stamp: None,
            live: false,
        };
        ws.prepare_read()?;
        Ok(ws)
    }
}

/// The values of `1..=max(values)` missing from sorted, distinct `values`; `None` when
/// there are implausibly many (a hostile value far past the rest).
fn missing(values: &[i64]) -> Option<Vec<i64>> {
    let max = *values.last()?;
    let n = i64::try_from(values.len()).ok()?;
    if max.saturating_sub(n) > 100_000 {
        return None;
    }
    let have: BTreeSet<i64> = values.iter().copied().collect();
    Some((1..=max).filter(|v| !have.contains(v)).collect())
}

/// The integers `sql` (one column, `?1` = `arg`) selects.
fn integers(c: &Connection, sql: &str, arg: &str) -> rusqlite::Result<Vec<i64>> {
    let mut stmt = c.prepare(sql)?;
    let rows = stmt.query_map(params![arg], |r| r.get(0))?;
    rows.collect()
}

impl Workspace {
    /// The invocation of `event_id` and the `event_seq` values missing from it.
    pub fn missing_event_seqs(
        &self,
        event_id: &str,
    ) -> Result<Option<(String, Vec<i64>)>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let inv: Option<String> = self
            .conn()
            .query_row(
                "SELECT invocation_id FROM runtime_events WHERE event_id = ?1",
                params![event_id],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows
                | rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::InvalidColumnType(..) => Ok(None),
                other => Err(other),
            })
            .map_err(e)?;
        let Some(inv) = inv else { return Ok(None) };
        let seqs = integers(
            self.conn(),
            "SELECT DISTINCT event_seq FROM runtime_events WHERE invocation_id = ?1 \
             AND typeof(event_seq) = 'integer' ORDER BY event_seq",
            &inv,
        )
        .map_err(e)?;
        Ok(missing(&seqs).map(|m| (inv, m)))
    }

    /// The ordinals missing from `session`'s `1..=max`.
    pub fn missing_ordinals(&self, session: &str) -> Result<Option<Vec<i64>>, DbError> {
        let ords = integers(
            self.conn(),
            "SELECT ordinal FROM runtime_session_event_ordinals WHERE session_id = ?1 \
             AND typeof(ordinal) = 'integer' ORDER BY ordinal",
            session,
        )
        .map_err(|e| self.err(&e))?;
        Ok(missing(&ords))
    }
}
