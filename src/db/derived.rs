//! `doctor rederive`'s reads and its two writes: the schema objects' text as stored, the
//! rows of a derived table, and the rowids of the events the tool projections are
//! rebuilt from; then the one transaction that puts missing derived objects back and
//! the one (`doctor restore` of a rederive bundle) that takes them out again.
//!
//! These are the only statements wsledger runs that change the schema. What they create
//! is the exact text of an object the writing build defines, handed in by the plan
//! (`crate::release::derived`); what they drop is exactly what a rederive bundle says
//! was created, after checking it is still as it was made.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{params, Connection, OptionalExtension};

use super::facts::{read_ledger_fingerprint, LedgerFingerprint};
use super::quarantine::{cell, insert_rows, table_names, table_shape};
use super::quote;
use super::write::{classify, WriteError, Writer};
use super::{DbError, Workspace};
use crate::bundle::Row;

/// What putting derived objects back writes, and what the plan relied on.
#[derive(Clone, Debug, Default)]
pub struct RederiveSet {
    /// `type:name` of every object the plan found missing (each must still be).
    pub missing: Vec<String>,
    /// `(type:name, exact SQL)`, in the order they are created.
    pub objects: Vec<(String, String)>,
    /// Rows inserted, per table, in order (every column named).
    pub rows: Vec<(String, Vec<Row>)>,
    /// Derived tables left in place whose rows the plan relied on (a tool projection
    /// that is not missing, the registry rows present): each must hold exactly these.
    pub kept: Vec<(String, Vec<Row>)>,
    /// The ledger the projections were rebuilt from, when rows are rebuilt.
    pub ledger: Option<LedgerFingerprint>,
    /// `sqlite_sequence` of each table whose rows were numbered from it.
    pub sequences: Vec<(String, Option<i64>)>,
}

/// What taking a rederive back removes: the objects it created (each must still have
/// its text) with the rows it inserted (each table must still hold exactly them), and
/// the registry rows it added to a registry table it did not create.
#[derive(Clone, Debug, Default)]
pub struct UnderiveSet {
    /// `(type:name, exact SQL)`, in the order they were created.
    pub objects: Vec<(String, String)>,
    /// Rows per table as the rederive left them.
    pub rows: Vec<(String, Vec<Row>)>,
    /// Registry scopes whose rows the rederive inserted into a table it did not create.
    pub registry_scopes: Vec<String>,
}

/// `(type, name)` of a `type:name` key.
fn split_key(key: &str) -> (&str, &str) {
    key.split_once(':').unwrap_or(("", key))
}

fn object_sql(c: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    let (kind, name) = split_key(key);
    c.query_row(
        "SELECT sql FROM sqlite_schema WHERE type = ?1 AND name = ?2",
        params![kind, name],
        |r| r.get(0),
    )
    .optional()
}

/// Every row of `table` in rowid order (columns in table order).
fn table_rows(c: &Connection, table: &str) -> rusqlite::Result<Vec<Row>> {
    if !table_names(c)?.contains(table) {
        return Ok(Vec::new());
    }
    let shape = table_shape(c, table)?;
    let list = shape.select_list();
    let mut stmt = c.prepare(&format!(
        "SELECT {list} FROM {} ORDER BY _rowid_",
        quote(table)
    ))?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut columns = Vec::with_capacity(shape.columns.len());
        for (i, name) in shape.columns.iter().enumerate() {
            columns.push((name.clone(), cell(r.get_ref(i)?)));
        }
        out.push(Row { columns });
    }
    Ok(out)
}

/// Rows compared column by column whatever their column order.
fn same_rows(a: &[Row], b: &[Row]) -> bool {
    let sorted = |r: &Row| {
        let mut c = r.columns.clone();
        c.sort_by(|x, y| x.0.cmp(&y.0));
        c
    };
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| sorted(x) == sorted(y))
}

fn sequence(c: &Connection, table: &str) -> rusqlite::Result<Option<i64>> {
    let exists: i64 = c.query_row(
        "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_sequence'",
        [],
        |r| r.get(0),
    )?;
    if exists == 0 {
        return Ok(None);
    }
    c.query_row(
        "SELECT seq FROM sqlite_sequence WHERE name = ?1",
        [table],
        |r| r.get(0),
    )
    .optional()
}

impl Workspace {
    /// `type:name` → the SQL text exactly as stored, of every table, index, trigger and
    /// view (SQLite's own objects and auto-indexes left out, as the schema facts do).
    pub fn schema_texts(&self) -> Result<BTreeMap<String, String>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' \
                 AND type IN ('table','index','trigger','view') AND sql IS NOT NULL",
            )
            .map_err(e)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    format!("{}:{}", r.get::<_, String>(0)?, r.get::<_, String>(1)?),
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(e)?;
        rows.collect::<Result<BTreeMap<_, _>, _>>().map_err(e)
    }

    /// Every row of a table in rowid order (none when the table is missing).
    pub fn table_rows(&self, table: &str) -> Result<Vec<Row>, DbError> {
        table_rows(self.conn(), table).map_err(|e| self.err(&e))
    }

    /// `sqlite_sequence.seq` of `table` (`None`: no row).
    pub fn sequence_of(&self, table: &str) -> Result<Option<i64>, DbError> {
        sequence(self.conn(), table).map_err(|e| self.err(&e))
    }

    /// The rowid of each event in `ids` that the file has.
    pub fn event_rowids<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<HashMap<String, i64>, DbError> {
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT rowid FROM runtime_events WHERE event_id = ?1")
            .map_err(e)?;
        let mut out = HashMap::new();
        for id in ids {
            if let Some(n) = stmt
                .query_row([id], |r| r.get::<_, i64>(0))
                .optional()
                .map_err(e)?
            {
                out.insert(id.to_owned(), n);
            }
        }
        Ok(out)
    }
}

fn changed(path: &std::path::Path, what: String) -> WriteError {
    WriteError::Changed {
        path: path.to_path_buf(),
        what,
    }
}

impl Writer {
    /// Puts back missing derived objects in one `BEGIN IMMEDIATE` transaction: checks
    /// inside it that everything the plan relied on is as it was (the objects still
    /// missing, the rows kept, the ledger, the sequences), creates each object with its
    /// exact text and checks SQLite stored that text, inserts the rows, and commits.
    /// Any difference or failure rolls everything back.
    pub fn rederive(&self, set: &RederiveSet) -> Result<(), WriteError> {
        let path = self.path().to_path_buf();
        let tx = self.begin_checked()?;
        let werr = |e: rusqlite::Error| classify(&path, e);
        for key in &set.missing {
            if object_sql(&tx, key).map_err(werr)?.is_some() {
                return Err(changed(&path, format!("`{key}` (it exists again)")));
            }
        }
        for (table, rows) in &set.kept {
            if !same_rows(&table_rows(&tx, table).map_err(werr)?, rows) {
                return Err(changed(&path, format!("the rows of `{table}`")));
            }
        }
        if let Some(fp) = set.ledger {
            if read_ledger_fingerprint(&tx).map_err(werr)? != fp {
                return Err(changed(
                    &path,
                    "the event ledger the projections were rebuilt from".into(),
                ));
            }
        }
        for (table, seq) in &set.sequences {
            if sequence(&tx, table).map_err(werr)? != *seq {
                return Err(changed(&path, format!("the sequence of `{table}`")));
            }
        }
        for (key, sql) in &set.objects {
            tx.execute(sql, []).map_err(werr)?;
            if object_sql(&tx, key).map_err(werr)?.as_deref() != Some(sql.as_str()) {
                return Err(WriteError::Write {
                    path: path.clone(),
                    detail: format!("SQLite did not store `{key}` with the text planned"),
                });
            }
        }
        for (table, rows) in &set.rows {
            insert_rows(&tx, table, rows, None).map_err(werr)?;
        }
        self.commit_checked(tx, ToString::to_string)
    }

    /// Takes a rederive back in one `BEGIN IMMEDIATE` transaction: checks that each
    /// object it created still has its text and each table it filled still holds
    /// exactly its rows, then deletes the registry rows it added and drops the objects
    /// it created (triggers, indexes, then tables). Any difference rolls back.
    pub fn underive(&self, set: &UnderiveSet) -> Result<(), WriteError> {
        let path = self.path().to_path_buf();
        let tx = self.begin_checked()?;
        let werr = |e: rusqlite::Error| classify(&path, e);
        for (key, sql) in &set.objects {
            if object_sql(&tx, key).map_err(werr)?.as_deref() != Some(sql.as_str()) {
                return Err(changed(&path, format!("`{key}`")));
            }
        }
        for (table, rows) in &set.rows {
            let now = table_rows(&tx, table).map_err(werr)?;
            let kept: Vec<Row> = if table == "operational_schema_migrations" {
                // Only the rows the rederive added are its to check.
                now.into_iter()
                    .filter(|r| rows.iter().any(|x| x.get("scope") == r.get("scope")))
                    .collect()
            } else {
                now
            };
            if !same_rows(&kept, rows) {
                return Err(changed(&path, format!("the rows of `{table}`")));
            }
        }
        for scope in &set.registry_scopes {
            tx.execute(
                "DELETE FROM operational_schema_migrations WHERE scope = ?1",
                [scope],
            )
            .map_err(werr)?;
        }
        for (key, _) in set.objects.iter().rev() {
            let (kind, name) = split_key(key);
            let verb = match kind {
                "index" => "INDEX",
                "trigger" => "TRIGGER",
                _ => "TABLE",
            };
            tx.execute(&format!("DROP {verb} {}", quote(name)), [])
                .map_err(werr)?;
        }
        self.commit_checked(tx, ToString::to_string)
    }
}
