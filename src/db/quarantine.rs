//! Setting one conversation aside exactly as Maka deletes it, and putting it back.
//!
//! Maka's only sanctioned removal of `runtime_events` rows is deleting a whole
//! conversation: the operational purge (`conversation-operational-state.ts`, nine
//! `DELETE`s in a fixed order) followed by the session store's `remove(sessionId)`
//! (`DELETE FROM session_metadata` plus a `session_metadata_tombstones` row). With
//! `foreign_keys=ON` the deletes cascade (ordinals, partial segments, run events,
//! usage checkpoints, source-message proofs, the transcript, the catalog projection,
//! the sandbox log) and the `session_catalog_after_delete` trigger bumps
//! `session_catalog_state.generation`.
//!
//! [`read_deletion`] computes, without writing, every row those statements remove:
//! the direct statements' `WHERE` clauses, expanded through every `ON DELETE CASCADE`
//! foreign key the file declares (`super::cascade`, which excision reads through too). It also finds what would make Maka's own deletion fail (a row that
//! still references a deleted row through a non-cascading key, or Maka's graph-operator
//! guard). [`delete_session`] runs Maka's statements; [`insert_rows`] puts rows back.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, OptionalExtension, ToSql};

use super::cascade::{dangling, foreign_keys, reached, ForeignKey};
use super::quote;
use crate::bundle::{Cell, Row};

/// Maka's purge, in its order: (table, `WHERE` clause with `?1` = the session id).
pub const PURGE: &[(&str, &str)] = &[
    (
        "tool_journal_events",
        "runtime_event_id IN (SELECT event_id FROM runtime_events WHERE session_id = ?1) \
         OR operation_id IN (SELECT operation_id FROM tool_operations \
         WHERE call_event_id IN (SELECT event_id FROM runtime_events WHERE session_id = ?1) \
         OR dispatch_event_id IN (SELECT event_id FROM runtime_events WHERE session_id = ?1) \
         OR result_event_id IN (SELECT event_id FROM runtime_events WHERE session_id = ?1))",
    ),
    (
        "tool_operations",
        "call_event_id IN (SELECT event_id FROM runtime_events WHERE session_id = ?1) \
         OR dispatch_event_id IN (SELECT event_id FROM runtime_events WHERE session_id = ?1) \
         OR result_event_id IN (SELECT event_id FROM runtime_events WHERE session_id = ?1)",
    ),
    ("runtime_partial_snapshots", "session_id = ?1"),
    ("runtime_events", "session_id = ?1"),
    ("core_agent_run_projections", "session_id = ?1"),
    ("core_root_turn_admissions", "session_id = ?1"),
    ("core_root_turn_start_rejections", "session_id = ?1"),
    ("core_agent_runs", "session_id = ?1"),
    ("workflow_goal_authority", "session_id = ?1"),
    // The session store's remove(sessionId), after the purge.
    ("session_metadata", "session_id = ?1"),
];

/// What a table looks like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableShape {
    pub columns: Vec<String>,
    /// The table has a rowid (not `WITHOUT ROWID`).
    pub has_rowid: bool,
    /// The rowid is a column (`INTEGER PRIMARY KEY`).
    pub rowid_is_column: bool,
}

impl TableShape {
    /// The columns, quoted, as a `SELECT` list.
    pub fn select_list(&self) -> String {
        self.columns
            .iter()
            .map(|n| quote(n))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every row one conversation deletion removes, and what would stop it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Deletion {
    pub session_id: String,
    /// Tables in the order the deletion first reaches them (each direct statement
    /// followed by its cascades), every touched table even when it has no row.
    pub tables: Vec<(String, Vec<Row>)>,
    /// For tables with a rowid that is not a column: each row's rowid (parallel to
    /// `tables`), so a restore can keep it.
    pub rowids: BTreeMap<String, Vec<i64>>,
    /// Why Maka's deletion would fail here (empty: it succeeds).
    pub blockers: Vec<String>,
    /// The tombstone row the session already has, if any.
    pub tombstone: Option<Row>,
}

impl Deletion {
    /// Rows per table (tables without rows included).
    pub fn counts(&self) -> Vec<(String, usize)> {
        self.tables
            .iter()
            .map(|(t, r)| (t.clone(), r.len()))
            .collect()
    }

    /// Whether there is anything to delete.
    pub fn is_empty(&self) -> bool {
        self.tables.iter().all(|(_, r)| r.is_empty())
    }

    /// Whether the session store has a `session_metadata` row (its removal bumps the
    /// catalog generation).
    pub fn has_metadata(&self) -> bool {
        self.tables
            .iter()
            .any(|(t, r)| t == "session_metadata" && !r.is_empty())
    }
}

pub(super) fn cell(v: ValueRef<'_>) -> Cell {
    match v {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(n) => Cell::Integer(n),
        ValueRef::Real(f) => Cell::Real(f),
        ValueRef::Text(b) => Cell::Text(b.to_vec()),
        ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
    }
}

/// Binds a cell with its storage class, bytes exactly as stored.
pub struct CellParam<'a>(pub &'a Cell);

impl ToSql for CellParam<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            Cell::Null => ValueRef::Null,
            Cell::Integer(n) => ValueRef::Integer(*n),
            Cell::Real(f) => ValueRef::Real(*f),
            Cell::Text(b) => ValueRef::Text(b),
            Cell::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// Tables of the main schema.
pub fn table_names(c: &Connection) -> rusqlite::Result<BTreeSet<String>> {
    let mut stmt = c.prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    )?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.collect()
}

/// Columns and rowid facts of a table.
pub fn table_shape(c: &Connection, table: &str) -> rusqlite::Result<TableShape> {
    let mut stmt = c.prepare(&format!("PRAGMA table_info({})", quote(table)))?;
    let info: Vec<(String, String, i64)> = stmt
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(5)?)))?
        .collect::<Result<_, _>>()?;
    let without_rowid: bool = c
        .query_row(
            "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
            [table],
            |r| r.get::<_, i64>(0),
        )
        .optional()?
        .is_some_and(|w| w != 0);
    let pks: Vec<&(String, String, i64)> = info.iter().filter(|(_, _, pk)| *pk > 0).collect();
    let rowid_is_column =
        !without_rowid && pks.len() == 1 && pks[0].1.eq_ignore_ascii_case("INTEGER");
    Ok(TableShape {
        columns: info.into_iter().map(|(n, _, _)| n).collect(),
        has_rowid: !without_rowid,
        rowid_is_column,
    })
}

/// Every row of `table` that `clause` (with `?1` bound to `arg`) selects, in rowid
/// order, with its rowid where the table has one.
pub(super) fn select_rows(
    c: &Connection,
    table: &str,
    shape: &TableShape,
    clause: &str,
    arg: &str,
) -> rusqlite::Result<Vec<(Option<i64>, Row)>> {
    let list = shape.select_list();
    let sql = if shape.has_rowid {
        format!(
            "SELECT _rowid_, {list} FROM {} WHERE {clause} ORDER BY _rowid_",
            quote(table)
        )
    } else {
        format!("SELECT NULL, {list} FROM {} WHERE {clause}", quote(table))
    };
    let mut stmt = c.prepare(&sql)?;
    let mut rows = stmt.query(params![arg])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let rowid: Option<i64> = r.get(0)?;
        let mut columns = Vec::with_capacity(shape.columns.len());
        for (i, name) in shape.columns.iter().enumerate() {
            columns.push((name.clone(), cell(r.get_ref(i + 1)?)));
        }
        out.push((rowid, Row { columns }));
    }
    Ok(out)
}

/// `WHERE` clauses per table, in the order the deletion reaches the tables.
fn selectors(fks: &[ForeignKey], tables: &BTreeSet<String>) -> Vec<(String, String)> {
    let mut direct = Vec::new();
    for (table, clause) in PURGE {
        if tables.contains(*table) {
            // Without `tool_operations` (a schema Maka refuses to open) only the
            // journal's event clause can be read: its operation clause names that table.
            let clause = if *table == "tool_journal_events" && !tables.contains("tool_operations") {
                JOURNAL_BY_EVENT
            } else {
                clause
            };
            direct.push((table.to_string(), format!("({clause})")));
        }
    }
    reached(&direct, fks)
}

/// The part of Maka's journal purge clause that reaches rows through their event.
const JOURNAL_BY_EVENT: &str =
    "runtime_event_id IN (SELECT event_id FROM runtime_events WHERE session_id = ?1)";

/// How many rows of each table the deletion of `session` removes: the counts of
/// [`read_deletion`] (same tables, same order), without reading the rows or looking
/// for what would stop it. See [`read_deletion_counts_of`].
pub fn read_deletion_counts(
    c: &Connection,
    session: &str,
) -> rusqlite::Result<Vec<(String, usize)>> {
    Ok(read_deletion_counts_of(c, &[session.to_owned()], None)?
        .pop()
        .unwrap_or_default())
}

/// [`read_deletion_counts`] of each of `sessions`. Each table is counted once per
/// session, over all the clauses that reach it. The two tool tables, whose event
/// columns have no index (so SQLite reads them whole for every session), are counted
/// for all the sessions in one pass each when Maka's purge clause is the only one that
/// reaches them (`ToolTableCounts`).
///
/// `by_event`, when given, hands over the journal rows reached through an event of
/// each session ([`read_journal_counts_by_event`], read on another connection): then
/// only the rows reached through an operation alone are counted here, through the
/// journal's index on `operation_id`, and the journal is not read whole here.
pub fn read_deletion_counts_of(
    c: &Connection,
    sessions: &[String],
    by_event: Option<JournalByEvent<'_>>,
) -> rusqlite::Result<Vec<Vec<(String, usize)>>> {
    let tables = table_names(c)?;
    let fks = foreign_keys(c, &tables)?;
    let mut clauses: Vec<(String, Vec<String>)> = Vec::new();
    for (table, clause) in selectors(&fks, &tables) {
        match clauses.iter_mut().find(|(t, _)| *t == table) {
            Some((_, list)) => list.push(clause),
            None => clauses.push((table, vec![clause])),
        }
    }
    let only_purge = |table: &str, list: &[String]| {
        list.len() == 1
            && PURGE
                .iter()
                .any(|(t, clause)| *t == table && list[0] == format!("({clause})"))
    };
    let tool_clauses_only = clauses.iter().all(|(t, list)| {
        !matches!(t.as_str(), "tool_operations" | "tool_journal_events") || only_purge(t, list)
    });
    let tool_tables = ["tool_operations", "tool_journal_events"]
        .iter()
        .all(|t| tables.contains(*t));
    let passes = if tool_tables && tool_clauses_only && !sessions.is_empty() {
        ToolTableCounts::read(c, sessions, by_event)?
    } else {
        None
    };
    let mut out = vec![Vec::with_capacity(clauses.len()); sessions.len()];
    for (table, list) in clauses {
        let counted = passes.as_ref().and_then(|p| match table.as_str() {
            "tool_operations" => Some(&p.operations),
            "tool_journal_events" => Some(&p.journal),
            _ => None,
        });
        if let Some(counts) = counted {
            for (o, n) in out.iter_mut().zip(counts) {
                o.push((table.clone(), *n));
            }
            continue;
        }
        let sql = format!(
            "SELECT count(*) FROM {} WHERE {}",
            quote(&table),
            list.join(" OR ")
        );
        let mut stmt = c.prepare(&sql)?;
        for (o, s) in out.iter_mut().zip(sessions) {
            let n: i64 = stmt.query_row(params![s], |r| r.get(0))?;
            o.push((table.clone(), usize::try_from(n).unwrap_or(0)));
        }
    }
    Ok(out)
}

/// The rows of `tool_operations` and `tool_journal_events` Maka's purge clauses reach
/// for each of several sessions, found in one pass over each table: an operation whose
/// call, dispatch or result event is one of the session's, and a journal row whose
/// event is one of them or whose operation is one of those operations. Values are
/// compared as SQLite compares them in those columns (TEXT affinity, binary collation):
/// a text equals a text of the same bytes, a blob a blob, NULL nothing. `None` when
/// that might not hold (a column declares a collation, or holds a number): then
/// SQLite counts each session.
struct ToolTableCounts {
    operations: Vec<usize>,
    journal: Vec<usize>,
}

/// The sessions each stored value belongs to, texts and blobs apart (a text never
/// equals a blob).
#[derive(Default)]
struct Owners {
    text: crate::fast_hash::HashMap<Box<[u8]>, Vec<usize>>,
    blob: crate::fast_hash::HashMap<Box<[u8]>, Vec<usize>>,
}

/// Not a value the pass compares as SQLite would (a number in a TEXT column).
struct Unlike;

impl Owners {
    fn add(&mut self, v: ValueRef<'_>, sessions: &[usize]) -> Result<(), Unlike> {
        let (map, b) = match v {
            ValueRef::Null => return Ok(()),
            ValueRef::Text(b) => (&mut self.text, b),
            ValueRef::Blob(b) => (&mut self.blob, b),
            ValueRef::Integer(_) | ValueRef::Real(_) => return Err(Unlike),
        };
        let owners = map.entry(b.into()).or_default();
        for &i in sessions {
            if !owners.contains(&i) {
                owners.push(i);
            }
        }
        Ok(())
    }

    /// Adds the sessions `v` belongs to to `into` (each once).
    fn of(&self, v: ValueRef<'_>, into: &mut Vec<usize>) -> Result<(), Unlike> {
        let found = match v {
            ValueRef::Null => None,
            ValueRef::Text(b) => self.text.get(b),
            ValueRef::Blob(b) => self.blob.get(b),
            ValueRef::Integer(_) | ValueRef::Real(_) => return Err(Unlike),
        };
        for &i in found.into_iter().flatten() {
            if !into.contains(&i) {
                into.push(i);
            }
        }
        Ok(())
    }
}

/// The journal rows reached through an event of each session, in their order, or
/// `None` when they are to be counted where the operations are (see
/// [`read_deletion_counts_of`]). Called once the operations are counted.
pub type JournalByEvent<'a> = Box<dyn FnOnce() -> Option<Vec<usize>> + 'a>;

/// Each session's event ids (the purge clauses' `SELECT event_id FROM runtime_events
/// WHERE session_id = ?1`), through the index on `session_id`.
fn session_events(c: &Connection, sessions: &[String]) -> rusqlite::Result<Result<Owners, Unlike>> {
    let mut events = Owners::default();
    let mut stmt = c.prepare("SELECT event_id FROM runtime_events WHERE session_id = ?1")?;
    for (i, s) in sessions.iter().enumerate() {
        let mut rows = stmt.query(params![s])?;
        while let Some(r) = rows.next()? {
            if let Err(u) = events.add(r.get_ref(0)?, &[i]) {
                return Ok(Err(u));
            }
        }
    }
    Ok(Ok(events))
}

/// The rows of `tool_journal_events` whose `runtime_event_id` is one of each session's
/// events, in one pass over the table: the half of the journal's count that needs no
/// operation, so that it can be read on another connection while the operations are.
/// `None` when a value would not be compared as SQLite compares it (as in
/// [`ToolTableCounts`]: a number in either id column).
pub fn read_journal_counts_by_event(
    c: &Connection,
    sessions: &[String],
) -> rusqlite::Result<Option<Vec<usize>>> {
    let Ok(events) = session_events(c, sessions)? else {
        return Ok(None);
    };
    let mut counts = vec![0; sessions.len()];
    let mut rows = super::raw::RawRows::prepare(
        c,
        "SELECT runtime_event_id, operation_id FROM tool_journal_events",
    )?;
    let mut hit = Vec::new();
    while rows.step()? {
        hit.clear();
        let numeric = matches!(rows.value(1)?, ValueRef::Integer(_) | ValueRef::Real(_));
        if numeric || events.of(rows.value(0)?, &mut hit).is_err() {
            return Ok(None);
        }
        for &i in &hit {
            counts[i] += 1;
        }
    }
    Ok(Some(counts))
}

/// The most journal rows whose [`JournalEventRefs`] the scan keeps (2 MiB of hashes):
/// above it the preview reads the journal again, as it did before, so that a large
/// workspace's peak memory does not grow.
pub const JOURNAL_REFS_MAX_ROWS: usize = 1 << 17;

/// The `runtime_event_id` of every `tool_journal_events` row, as a keyed 128-bit hash
/// (see `crate::hash128`; a text and a blob of the same bytes apart, NULL left out),
/// taken while the scan reads the journal for its digests. With it the quarantine
/// preview counts the journal rows reached through a session's events without a
/// second pass over the table (the last of the diagnosis's passes to finish).
pub struct JournalEventRefs {
    key: crate::hash128::Keyed128,
    hashes: Vec<u128>,
}

impl std::fmt::Debug for JournalEventRefs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalEventRefs")
            .field("rows", &self.hashes.len())
            .finish()
    }
}

impl JournalEventRefs {
    /// As SQLite compares the column (TEXT affinity, binary collation): a text equals
    /// a text of the same bytes, a blob a blob, NULL nothing.
    fn hash_of(&self, v: ValueRef<'_>) -> Option<u128> {
        match v {
            ValueRef::Text(b) => Some(self.key.hash(&(0u8, b))),
            ValueRef::Blob(b) => Some(self.key.hash(&(1u8, b))),
            _ => None,
        }
    }
}

/// Gathers [`JournalEventRefs`] row by row; gives up (`finish` is `None`) on a number
/// in either id column (see [`read_journal_counts_by_event`]) or past
/// [`JOURNAL_REFS_MAX_ROWS`] rows.
pub struct JournalRefsBuilder {
    refs: Option<JournalEventRefs>,
}

impl Default for JournalRefsBuilder {
    fn default() -> Self {
        JournalRefsBuilder {
            refs: Some(JournalEventRefs {
                key: crate::hash128::Keyed128::random(),
                hashes: Vec::new(),
            }),
        }
    }
}

impl JournalRefsBuilder {
    /// One that gives up at once (gathers nothing) when a journal of `operations`
    /// operations is likely past the cap anyway (Maka writes two or more journal rows
    /// per operation): its hashes would only be held for a while and dropped.
    pub fn for_operations(operations: usize) -> JournalRefsBuilder {
        if operations > JOURNAL_REFS_MAX_ROWS / 2 {
            JournalRefsBuilder { refs: None }
        } else {
            JournalRefsBuilder::default()
        }
    }

    /// One journal row's `runtime_event_id` and `operation_id`, as stored.
    pub fn add(&mut self, runtime_event_id: ValueRef<'_>, operation_id: ValueRef<'_>) {
        let Some(refs) = &mut self.refs else {
            return;
        };
        let numeric = |v: ValueRef<'_>| matches!(v, ValueRef::Integer(_) | ValueRef::Real(_));
        if numeric(runtime_event_id)
            || numeric(operation_id)
            || refs.hashes.len() >= JOURNAL_REFS_MAX_ROWS
        {
            self.refs = None;
            return;
        }
        if let Some(h) = refs.hash_of(runtime_event_id) {
            refs.hashes.push(h);
        }
    }

    /// The refs, once every row of the table has been added.
    pub fn finish(self) -> Option<JournalEventRefs> {
        self.refs
    }
}

/// [`read_journal_counts_by_event`] from `refs` (the same table's rows, at the same
/// snapshot) instead of a pass over the journal: only the sessions' events are read.
pub fn journal_counts_from_refs(
    c: &Connection,
    sessions: &[String],
    refs: &JournalEventRefs,
) -> rusqlite::Result<Option<Vec<usize>>> {
    let Ok(events) = session_events(c, sessions)? else {
        return Ok(None);
    };
    let mut owners: crate::fast_hash::HashMap<u128, &[usize]> = Default::default();
    for (map, blob) in [(&events.text, false), (&events.blob, true)] {
        for (k, s) in map {
            let v = if blob {
                ValueRef::Blob(k)
            } else {
                ValueRef::Text(k)
            };
            if let Some(h) = refs.hash_of(v) {
                owners.insert(h, s);
            }
        }
    }
    let mut counts = vec![0; sessions.len()];
    for h in &refs.hashes {
        for &i in owners.get(h).copied().unwrap_or_default() {
            counts[i] += 1;
        }
    }
    Ok(Some(counts))
}

/// [`JournalEventRefs`] of the whole journal, read on `c` (what the scan gathers
/// beside its digests); `None` where the builder gives up.
pub fn read_journal_event_refs(c: &Connection) -> rusqlite::Result<Option<JournalEventRefs>> {
    let mut refs = JournalRefsBuilder::default();
    let mut rows = super::raw::RawRows::prepare(
        c,
        "SELECT runtime_event_id, operation_id FROM tool_journal_events",
    )?;
    while rows.step()? {
        refs.add(rows.value(0)?, rows.value(1)?);
    }
    Ok(refs.finish())
}

/// Whether `tool_journal_events` has an index that finds rows by `operation_id` (every
/// release's schema does); without one, a lookup per operation reads the table whole.
fn journal_indexed_by_operation(c: &Connection) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT count(*) FROM pragma_index_list('tool_journal_events') AS l, \
         pragma_index_info(l.name) AS i \
         WHERE l.partial = 0 AND i.seqno = 0 AND i.name = 'operation_id'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

impl ToolTableCounts {
    fn read(
        c: &Connection,
        sessions: &[String],
        by_event: Option<JournalByEvent<'_>>,
    ) -> rusqlite::Result<Option<ToolTableCounts>> {
        let collation: i64 = c.query_row(
            "SELECT count(*) FROM sqlite_schema WHERE tbl_name IN \
             ('runtime_events', 'tool_operations', 'tool_journal_events') \
             AND sql LIKE '%collate%'",
            [],
            |r| r.get(0),
        )?;
        if collation > 0 {
            return Ok(None);
        }
        match Self::passes(c, sessions, by_event)? {
            Ok(counts) => Ok(Some(counts)),
            Err(Unlike) => Ok(None),
        }
    }

    fn passes(
        c: &Connection,
        sessions: &[String],
        by_event: Option<JournalByEvent<'_>>,
    ) -> rusqlite::Result<Result<ToolTableCounts, Unlike>> {
        let events = match session_events(c, sessions)? {
            Ok(events) => events,
            Err(u) => return Ok(Err(u)),
        };
        let mut operations = vec![0; sessions.len()];
        // The ids of the operations counted, with their sessions.
        let mut ops = Owners::default();
        // Both tables whole, through SQLite's C API (see `raw`): this pass is most of
        // what a diagnosis waits for after the scan.
        let mut rows = super::raw::RawRows::prepare(
            c,
            "SELECT operation_id, call_event_id, dispatch_event_id, result_event_id \
             FROM tool_operations",
        )?;
        let mut hit = Vec::new();
        while rows.step()? {
            hit.clear();
            for col in 1..=3 {
                if let Err(u) = events.of(rows.value(col)?, &mut hit) {
                    return Ok(Err(u));
                }
            }
            if hit.is_empty() {
                continue;
            }
            for &i in &hit {
                operations[i] += 1;
            }
            if let Err(u) = ops.add(rows.value(0)?, &hit) {
                return Ok(Err(u));
            }
        }
        drop(rows);
        let by_event = match by_event {
            Some(f) if journal_indexed_by_operation(c)? => Some(f),
            _ => None,
        };
        if let Some(by_event) = by_event {
            let mut journal =
                match Self::journal_by_operation_alone(c, sessions.len(), &events, &ops)? {
                    Ok(counts) => counts,
                    Err(u) => return Ok(Err(u)),
                };
            if let Some(other) = by_event() {
                for (n, m) in journal.iter_mut().zip(other) {
                    *n += m;
                }
                return Ok(Ok(ToolTableCounts {
                    operations,
                    journal,
                }));
            }
        }
        let mut journal = vec![0; sessions.len()];
        let mut rows = super::raw::RawRows::prepare(
            c,
            "SELECT runtime_event_id, operation_id FROM tool_journal_events",
        )?;
        while rows.step()? {
            hit.clear();
            let (event, operation) = (rows.value(0)?, rows.value(1)?);
            if let Err(u) = events
                .of(event, &mut hit)
                .and_then(|()| ops.of(operation, &mut hit))
            {
                return Ok(Err(u));
            }
            for &i in &hit {
                journal[i] += 1;
            }
        }
        Ok(Ok(ToolTableCounts {
            operations,
            journal,
        }))
    }

    /// For each session, the journal rows of one of its operations whose event is not
    /// one of its own: with [`read_journal_counts_by_event`], each row the purge
    /// reaches is counted once. Found through the index on `operation_id`; a row has
    /// one operation, and each stored id is looked up once, so no row is met twice.
    fn journal_by_operation_alone(
        c: &Connection,
        sessions: usize,
        events: &Owners,
        ops: &Owners,
    ) -> rusqlite::Result<Result<Vec<usize>, Unlike>> {
        let mut counts = vec![0; sessions];
        let mut stmt =
            c.prepare("SELECT runtime_event_id FROM tool_journal_events WHERE operation_id = ?1")?;
        let mut hit = Vec::new();
        let keys = ops.text.iter().map(|(k, o)| (ValueRef::Text(k), o));
        let keys = keys.chain(ops.blob.iter().map(|(k, o)| (ValueRef::Blob(k), o)));
        for (key, owners) in keys {
            let mut rows = stmt.query([ToSqlOutput::Borrowed(key)])?;
            while let Some(r) = rows.next()? {
                hit.clear();
                if let Err(u) = events.of(r.get_ref(0)?, &mut hit) {
                    return Ok(Err(u));
                }
                for &i in owners {
                    if !hit.contains(&i) {
                        counts[i] += 1;
                    }
                }
            }
        }
        Ok(Ok(counts))
    }
}

/// The rows `sel`'s clauses (with `?1` bound to `arg`) select: per table, in the
/// order the clauses first reach it (every table, even without rows), each row once;
/// and the rowids of the rows of tables whose rowid is not a column, so that a
/// restore can keep them.
#[allow(clippy::type_complexity)]
pub(super) fn read_reached(
    c: &Connection,
    sel: &[(String, String)],
    arg: &str,
) -> rusqlite::Result<(Vec<(String, Vec<Row>)>, BTreeMap<String, Vec<i64>>)> {
    let mut tables: Vec<(String, Vec<Row>)> = Vec::new();
    let mut rowids: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    // Per table: the keys of rows already taken (rowid, or the whole row).
    let mut seen: BTreeMap<String, BTreeSet<Vec<u8>>> = BTreeMap::new();
    let mut shapes: BTreeMap<String, TableShape> = BTreeMap::new();
    for (table, clause) in sel {
        if !shapes.contains_key(table) {
            shapes.insert(table.clone(), table_shape(c, table)?);
        }
        let shape = &shapes[table];
        let keep_rowid = shape.has_rowid && !shape.rowid_is_column;
        if !tables.iter().any(|(t, _)| t == table) {
            tables.push((table.clone(), Vec::new()));
            if keep_rowid {
                rowids.insert(table.clone(), Vec::new());
            }
        }
        let idx = tables.iter().position(|(t, _)| t == table).unwrap_or(0);
        for (rowid, row) in select_rows(c, table, shape, clause, arg)? {
            let key = match rowid {
                Some(n) => n.to_be_bytes().to_vec(),
                None => format!("{row:?}").into_bytes(),
            };
            if !seen.entry(table.clone()).or_default().insert(key) {
                continue;
            }
            tables[idx].1.push(row);
            if let (true, Some(v), Some(n)) = (keep_rowid, rowids.get_mut(table), rowid) {
                v.push(n);
            }
        }
    }
    Ok((tables, rowids))
}

/// Reads every row the conversation deletion of `session` removes (see module docs).
pub fn read_deletion(c: &Connection, session: &str) -> rusqlite::Result<Deletion> {
    let tables = table_names(c)?;
    let fks = foreign_keys(c, &tables)?;
    let sel = selectors(&fks, &tables);
    let (tables_read, rowids) = read_reached(c, &sel, session)?;
    let mut d = Deletion {
        session_id: session.to_owned(),
        tables: tables_read,
        rowids,
        ..Deletion::default()
    };
    // Rows that keep referencing a deleted row through a key without ON DELETE
    // CASCADE make Maka's own DELETE fail (foreign keys are on).
    for (n, fk) in dangling(c, &fks, &sel, session)? {
        d.blockers.push(format!(
            "{n} row(s) of `{}` reference rows of `{}` the deletion removes ({} → {}); \
             Maka's own deletion of this conversation fails on them",
            fk.child,
            fk.parent,
            fk.from.join(", "),
            fk.to.join(", ")
        ));
    }
    // Maka's session store refuses to remove a graph operator session or one that
    // owns graph operators (assertSessionCanBeRemoved).
    if tables.contains("agent_graph_operator_provisions") && tables.contains("session_metadata") {
        let owned: i64 = c.query_row(
            "SELECT (SELECT count(*) FROM agent_graph_operator_provisions \
             WHERE target_session_id = ?1) + (SELECT count(*) FROM \
             agent_graph_operator_provisions p JOIN session_metadata s \
             ON s.session_id = p.target_session_id WHERE s.subagent_parent_session_id = ?1)",
            params![session],
            |r| r.get(0),
        )?;
        if owned > 0 {
            d.blockers.push(
                "the session is, or owns, an agent-graph operator; Maka's session store \
                 refuses to remove it"
                    .into(),
            );
        }
    }
    if tables.contains("session_metadata_tombstones") {
        d.tombstone = read_tombstone(c, session)?;
    }
    Ok(d)
}

/// The session's tombstone row, if any.
pub fn read_tombstone(c: &Connection, session: &str) -> rusqlite::Result<Option<Row>> {
    let table = "session_metadata_tombstones";
    let shape = table_shape(c, table)?;
    let rows = select_rows(c, table, &shape, "session_id = ?1", session)?;
    Ok(rows.into_iter().next().map(|(_, row)| row))
}

/// `session_catalog_state.generation` of the `catalog` scope.
pub fn catalog_generation(c: &Connection) -> rusqlite::Result<Option<i64>> {
    if !table_names(c)?.contains("session_catalog_state") {
        return Ok(None);
    }
    c.query_row(
        "SELECT generation FROM session_catalog_state WHERE scope = 'catalog'",
        [],
        |r| r.get(0),
    )
    .optional()
}

/// Sets the catalog generation (restore, when nothing else changed it since).
pub fn set_catalog_generation(c: &Connection, generation: i64) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE session_catalog_state SET generation = ?1 WHERE scope = 'catalog'",
        params![generation],
    )
}

/// Runs Maka's conversation deletion for `session`: the purge's statements in its
/// order, then the session store's removal with its tombstone (`deleted_at` =
/// `now_ms`, `retirement_unit_id` = the session, `cleanup_pending` = 1).
pub fn delete_session(c: &Connection, session: &str, now_ms: i64) -> rusqlite::Result<()> {
    let tables = table_names(c)?;
    // An older release's purge has only the statements whose tables it has.
    for (table, clause) in PURGE {
        if tables.contains(*table) {
            c.execute(
                &format!("DELETE FROM {table} WHERE {clause}"),
                params![session],
            )?;
        }
    }
    let shape = table_shape(c, "session_metadata_tombstones")?;
    if shape.columns.iter().any(|c| c == "cleanup_pending") {
        c.execute(
            "INSERT INTO session_metadata_tombstones(session_id, deleted_at, retirement_unit_id, \
             cleanup_pending) VALUES (?1, ?2, ?1, 1) ON CONFLICT(session_id) DO NOTHING",
            params![session, now_ms],
        )?;
    } else {
        // v0.1.2's tombstone is (session_id, deleted_at).
        c.execute(
            "INSERT INTO session_metadata_tombstones(session_id, deleted_at) VALUES (?1, ?2) \
             ON CONFLICT(session_id) DO NOTHING",
            params![session, now_ms],
        )?;
    }
    Ok(())
}

/// Deletes the session's tombstone (restore).
pub fn delete_tombstone(c: &Connection, session: &str) -> rusqlite::Result<usize> {
    c.execute(
        "DELETE FROM session_metadata_tombstones WHERE session_id = ?1",
        params![session],
    )
}

/// Inserts rows into `table` exactly (every column named, storage classes kept); with
/// `rowids`, each row keeps its rowid unless another row took it since (then SQLite
/// picks one; the count of such rows is returned).
pub fn insert_rows(
    c: &Connection,
    table: &str,
    rows: &[Row],
    rowids: Option<&[i64]>,
) -> rusqlite::Result<usize> {
    let mut moved = 0;
    for (i, row) in rows.iter().enumerate() {
        let rowid = rowids.and_then(|r| r.get(i)).copied();
        let free = match rowid {
            Some(n) => c
                .query_row(
                    &format!("SELECT 1 FROM {} WHERE _rowid_ = ?1", quote(table)),
                    params![n],
                    |_| Ok(()),
                )
                .optional()?
                .is_none(),
            None => false,
        };
        if rowid.is_some() && !free {
            moved += 1;
        }
        let mut names: Vec<String> = row.columns.iter().map(|(n, _)| quote(n)).collect();
        let mut values: Vec<CellParam<'_>> =
            row.columns.iter().map(|(_, v)| CellParam(v)).collect();
        let rowid_cell = rowid.filter(|_| free).map(Cell::Integer);
        if let Some(rc) = &rowid_cell {
            names.insert(0, "_rowid_".into());
            values.insert(0, CellParam(rc));
        }
        let marks: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "INSERT INTO {}({}) VALUES ({})",
            quote(table),
            names.join(", "),
            marks.join(", ")
        );
        let params: Vec<&dyn ToSql> = values.iter().map(|v| v as &dyn ToSql).collect();
        c.execute(&sql, params.as_slice())?;
    }
    Ok(moved)
}

/// Deletes the row of `table` whose columns `key` equal `row`'s (restore replaces
/// what a trigger computed with the stored row).
pub fn delete_matching(
    c: &Connection,
    table: &str,
    key: &[&str],
    row: &Row,
) -> rusqlite::Result<usize> {
    let mut clauses = Vec::new();
    let mut values = Vec::new();
    for (i, k) in key.iter().enumerate() {
        clauses.push(format!("{} = ?{}", quote(k), i + 1));
        values.push(CellParam(row.get(k).unwrap_or(&Cell::Null)));
    }
    let params: Vec<&dyn ToSql> = values.iter().map(|v| v as &dyn ToSql).collect();
    c.execute(
        &format!(
            "DELETE FROM {} WHERE {}",
            quote(table),
            clauses.join(" AND ")
        ),
        params.as_slice(),
    )
}

/// Every row of every table (for tests comparing whole databases), keyed by table,
/// rows in rowid (or primary-key) order.
pub fn dump_tables(c: &Connection) -> rusqlite::Result<BTreeMap<String, Vec<Vec<Cell>>>> {
    let mut out = BTreeMap::new();
    for t in table_names(c)? {
        let mut stmt = c.prepare(&format!("SELECT * FROM {}", quote(&t)))?;
        let n = stmt.column_count();
        let mut rows = stmt.query([])?;
        let mut v = Vec::new();
        while let Some(r) = rows.next()? {
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                row.push(cell(r.get_ref(i)?));
            }
            v.push(row);
        }
        out.insert(t, v);
    }
    Ok(out)
}

/// One session to put back.
#[derive(Clone, Debug, Default)]
pub struct RestoreItem {
    pub session_id: String,
    /// Tables in the bundle's order.
    pub tables: Vec<(String, Vec<Row>)>,
    pub rowids: BTreeMap<String, Vec<i64>>,
    /// Delete the tombstone the quarantine added.
    pub remove_tombstone: bool,
}

/// What a restore could not make identical.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreOutcome {
    /// The catalog generation was set back to its value before the quarantine.
    pub generation_restored: bool,
    /// Rows whose old rowid was taken in the meantime (they got a new one).
    pub rowids_moved: usize,
}

use super::write::{classify, collision, restored_keys_broken, WriteError, Writer};

impl Writer {
    /// Reads a session's deletion set on the writer's connection (outside any
    /// transaction: the plan the bundles are written from).
    pub fn read_deletion(&self, session: &str) -> Result<Deletion, WriteError> {
        read_deletion(self.conn(), session).map_err(|e| classify(self.path(), e))
    }

    /// `session_catalog_state.generation` now.
    pub fn catalog_generation(&self) -> Result<Option<i64>, WriteError> {
        catalog_generation(self.conn()).map_err(|e| classify(self.path(), e))
    }

    /// Deletes every session of `expected` as Maka's conversation deletion does, in
    /// one `BEGIN IMMEDIATE` transaction, after checking inside it that each
    /// session's rows (and the catalog generation) still equal what the bundles
    /// hold. Any difference or failure rolls everything back.
    pub fn quarantine(
        &self,
        expected: &[Deletion],
        generation: Option<i64>,
        now_ms: i64,
    ) -> Result<(), WriteError> {
        let path = self.path().to_path_buf();
        let tx = self.begin_checked()?;
        let werr = |e: rusqlite::Error| classify(&path, e);
        for d in expected {
            let now = read_deletion(&tx, &d.session_id).map_err(werr)?;
            if now != *d {
                return Err(WriteError::Changed {
                    path: path.clone(),
                    what: format!("session `{}`", d.session_id),
                });
            }
        }
        if catalog_generation(&tx).map_err(werr)? != generation {
            return Err(WriteError::Changed {
                path: path.clone(),
                what: "the session catalog generation".into(),
            });
        }
        for d in expected {
            delete_session(&tx, &d.session_id, now_ms).map_err(werr)?;
        }
        self.commit_checked(tx, ToString::to_string)
    }

    /// Puts sessions back in one transaction (foreign keys checked at commit). A row
    /// that collides with one in the workspace fails the whole restore. With
    /// `generation` = (value expected now, value to set), the catalog generation is
    /// set back when it still has the expected value.
    pub fn restore(
        &self,
        items: &[RestoreItem],
        generation: Option<(i64, i64)>,
    ) -> Result<RestoreOutcome, WriteError> {
        let path = self.path().to_path_buf();
        let tx = self.begin_checked()?;
        let werr = |e: rusqlite::Error| classify(&path, e);
        tx.pragma_update(None, "defer_foreign_keys", true)
            .map_err(werr)?;
        let tables = table_names(&tx).map_err(werr)?;
        let before = catalog_generation(&tx).map_err(werr)?;
        let mut outcome = RestoreOutcome::default();
        for item in items {
            let now = read_deletion(&tx, &item.session_id).map_err(werr)?;
            if !now.is_empty() {
                return Err(WriteError::Write {
                    path: path.clone(),
                    detail: format!(
                        "session `{}` has rows in the workspace again",
                        item.session_id
                    ),
                });
            }
            let order = item
                .tables
                .iter()
                .filter(|(t, _)| t == "session_metadata")
                .chain(item.tables.iter().filter(|(t, _)| t != "session_metadata"));
            for (table, rows) in order {
                let moved =
                    insert_rows(&tx, table, rows, item.rowids.get(table).map(Vec::as_slice))
                        .map_err(|e| collision(&path, e, table, "bundle", &item.session_id))?;
                outcome.rowids_moved += moved;
                if table == "session_metadata" && tables.contains("session_catalog_projection") {
                    // The insert trigger computed a projection row; the bundle holds
                    // the stored one.
                    tx.execute(
                        "DELETE FROM session_catalog_projection WHERE session_id = ?1",
                        params![item.session_id],
                    )
                    .map_err(werr)?;
                }
            }
            if item.remove_tombstone && tables.contains("session_metadata_tombstones") {
                delete_tombstone(&tx, &item.session_id).map_err(werr)?;
            }
        }
        if let (Some((expected, target)), Some(now)) = (generation, before) {
            if now == expected {
                set_catalog_generation(&tx, target).map_err(werr)?;
                outcome.generation_restored = true;
            }
        }
        self.commit_checked(tx, restored_keys_broken)?;
        Ok(outcome)
    }
}

impl super::Workspace {
    /// Every row Maka's conversation deletion of `session` would remove (read-only).
    pub fn deletion(&self, session: &str) -> Result<Deletion, super::DbError> {
        read_deletion(self.conn(), session).map_err(|e| self.err(&e))
    }

    /// Rows per table Maka's conversation deletion of `session` would remove
    /// (read-only; equal to `deletion(session)?.counts()`, and cheaper).
    pub fn deletion_counts(&self, session: &str) -> Result<Vec<(String, usize)>, super::DbError> {
        read_deletion_counts(self.conn(), session).map_err(|e| self.err(&e))
    }

    /// [`Self::deletion_counts`] of each of `sessions`, in their order (cheaper
    /// than one call each: the tool tables are read once for all of them).
    /// `by_event`: see [`read_deletion_counts_of`].
    pub fn deletion_counts_of(
        &self,
        sessions: &[String],
        by_event: Option<JournalByEvent<'_>>,
    ) -> Result<Vec<Vec<(String, usize)>>, super::DbError> {
        read_deletion_counts_of(self.conn(), sessions, by_event).map_err(|e| self.err(&e))
    }

    /// [`read_journal_counts_by_event`] on this connection.
    pub fn journal_counts_by_event(
        &self,
        sessions: &[String],
    ) -> Result<Option<Vec<usize>>, super::DbError> {
        read_journal_counts_by_event(self.conn(), sessions).map_err(|e| self.err(&e))
    }

    /// [`journal_counts_from_refs`] on this connection.
    pub fn journal_counts_from_refs(
        &self,
        sessions: &[String],
        refs: &JournalEventRefs,
    ) -> Result<Option<Vec<usize>>, super::DbError> {
        journal_counts_from_refs(self.conn(), sessions, refs).map_err(|e| self.err(&e))
    }

    /// [`read_journal_event_refs`] on this connection.
    pub fn journal_event_refs(&self) -> Result<Option<JournalEventRefs>, super::DbError> {
        read_journal_event_refs(self.conn()).map_err(|e| self.err(&e))
    }

    /// Columns and rowid facts of a table.
    pub fn table_shape(&self, table: &str) -> Result<TableShape, super::DbError> {
        table_shape(self.conn(), table).map_err(|e| self.err(&e))
    }

    /// Every row of every table (tests compare whole databases with it).
    pub fn dump_tables(&self) -> Result<BTreeMap<String, Vec<Vec<Cell>>>, super::DbError> {
        dump_tables(self.conn()).map_err(|e| self.err(&e))
    }
}
