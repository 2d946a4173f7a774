//! Which tables wsledger reads: judged by shape, not by name (issue notes, 42).
//!
//! A table's shape is its definition as Maka's own schema check compares it (the
//! normalized `CREATE TABLE`, see [`super::schema`]). wsledger reads a table only where
//! that shape is one a generation it knows defines: one verified against a build's own
//! code (`release/catalog.txt`), or one learned from Maka's published sources
//! (`release/catalog-source.txt`) that keeps every column of main's definition, which
//! is what wsledger's readers were written for. Any other table is left unread, and
//! [`TableRead`] says why. Both catalogs are read here for their table definitions
//! only (`crate::release` reads them whole). The judgement is pure; the two readers of
//! a live file ([`table_read`] and [`Workspace::readable_tables`]) ask SQLite for the
//! table's definition.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use rusqlite::Connection;
use serde::Serialize;

use super::schema::schema_object;
use super::{DbError, Workspace};

/// Where wsledger's knowledge of a schema generation comes from
/// (`workspace_release.known_from`, issue notes 41).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KnownFrom {
    /// Verified against that build's own code.
    Build,
    /// Learned only from Maka's published sources.
    Source,
    /// Newer than every generation wsledger knows.
    None,
}

impl KnownFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            KnownFrom::Build => "build",
            KnownFrom::Source => "source",
            KnownFrom::None => "none",
        }
    }
}

/// The tables wsledger's scan, replay, info and diagnosis read rows of (the startup
/// model's registry and legacy tables, and what only a write touches, are not here:
/// those run on verified generations only).
pub const READ_TABLES: &[&str] = &[
    "runtime_events",
    "tool_operations",
    "tool_journal_events",
    "core_agent_runs",
    "core_agent_run_events",
    "session_metadata",
    "session_metadata_tombstones",
    "session_messages",
    "session_message_chunks",
    "session_message_payloads",
    "runtime_session_event_ordinals",
    "runtime_partial_snapshots",
    "runtime_partial_segments",
    "runtime_continuation_claims",
    "runtime_storage_root_binding",
    "sandbox_boundary_log",
];

/// The three tables of the ledger: without them in a known shape there is no ledger
/// scan.
pub const LEDGER_TABLES: &[&str] = &["runtime_events", "tool_operations", "tool_journal_events"];

/// Why a table that is there is not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unread {
    /// No generation wsledger knows defines the table this way.
    UnknownShape,
    /// A shape Maka's published sources define, without these columns of main's
    /// definition (the ones wsledger's readers select).
    ColumnsGone(Vec<String>),
}

/// What wsledger does with one table of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableRead {
    /// It is there, in a shape wsledger reads.
    Read,
    /// It is not there.
    Absent,
    /// It is there and is not read.
    NotRead(Unread),
}

const BUILD_CATALOG: &str = include_str!("../release/catalog.txt");
const SOURCE_CATALOG: &str = include_str!("../release/catalog-source.txt");

/// Table name → every definition a known generation gives it, with where it is known
/// from (a build wins over the sources).
fn known_shapes() -> &'static BTreeMap<String, BTreeMap<String, KnownFrom>> {
    static SHAPES: OnceLock<BTreeMap<String, BTreeMap<String, KnownFrom>>> = OnceLock::new();
    SHAPES.get_or_init(|| {
        let mut out: BTreeMap<String, BTreeMap<String, KnownFrom>> = BTreeMap::new();
        for (text, from) in [
            (BUILD_CATALOG, KnownFrom::Build),
            (SOURCE_CATALOG, KnownFrom::Source),
        ] {
            for line in text.lines() {
                // `= table:NAME<TAB>signature` or `+ table:NAME<TAB>signature`.
                let Some(rest) = line.strip_prefix("= ").or_else(|| line.strip_prefix("+ ")) else {
                    continue;
                };
                let Some((key, sig)) = rest.split_once('\t') else {
                    continue;
                };
                if let Some(name) = key.strip_prefix("table:") {
                    let known = out.entry(name.to_owned()).or_default();
                    known.entry(sig.to_owned()).or_insert(from);
                }
            }
        }
        out
    })
}

/// Where the definition `signature` of table `name` is known from, if it is.
pub fn known_from(name: &str, signature: &str) -> Option<KnownFrom> {
    known_shapes()
        .get(name)
        .and_then(|s| s.get(signature))
        .copied()
}

/// The column names of a normalized `CREATE TABLE` signature, lower-cased (quotes
/// removed), in order.
pub fn columns_of(signature: &str) -> Vec<String> {
    let body = match (signature.find('('), signature.rfind(')')) {
        (Some(a), Some(b)) if a < b => &signature[a + 1..b],
        _ => return Vec::new(),
    };
    let mut items = Vec::new();
    let (mut depth, mut start, mut quote) = (0usize, 0usize, None::<char>);
    for (i, ch) in body.char_indices() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(ch),
            (None, '[') => quote = Some(']'),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, ',') if depth == 0 => {
                items.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&body[start..]);
    const CONSTRAINTS: &[&str] = &[
        "PRIMARY KEY",
        "UNIQUE(",
        "UNIQUE ",
        "CHECK(",
        "CHECK ",
        "FOREIGN KEY",
        "CONSTRAINT ",
    ];
    items
        .into_iter()
        .map(str::trim)
        .filter(|item| !item.is_empty() && !CONSTRAINTS.iter().any(|c| item.starts_with(c)))
        .map(|item| {
            let name = match item.chars().next() {
                Some(q @ ('"' | '`')) => item[1..].split(q).next().unwrap_or(""),
                Some('[') => item[1..].split(']').next().unwrap_or(""),
                _ => item.split([' ', '(']).next().unwrap_or(""),
            };
            name.to_lowercase()
        })
        .collect()
}

/// main's columns of table `name` (the newest definition verified against a build,
/// the one wsledger's readers were written for); empty when main has no such table.
fn main_columns(name: &str) -> &'static [String] {
    static MAIN: OnceLock<BTreeMap<String, Vec<String>>> = OnceLock::new();
    let main = MAIN.get_or_init(|| {
        // The build catalog lists generations oldest first; main's is the last.
        let last = BUILD_CATALOG
            .rfind("\ngeneration\n")
            .map_or(BUILD_CATALOG, |i| &BUILD_CATALOG[i..]);
        let fresh = last.split("\nvariant ").next().unwrap_or(last);
        let mut out = BTreeMap::new();
        for line in fresh.lines() {
            let Some((key, sig)) = line.strip_prefix("= ").and_then(|r| r.split_once('\t')) else {
                continue;
            };
            if let Some(name) = key.strip_prefix("table:") {
                out.insert(name.to_owned(), columns_of(sig));
            }
        }
        out
    });
    main.get(name).map_or(&[], Vec::as_slice)
}

/// What wsledger does with table `name` whose definition is `signature` (normalized).
pub fn judge(name: &str, signature: &str) -> TableRead {
    match known_from(name, signature) {
        Some(KnownFrom::Build) => TableRead::Read,
        Some(_) => {
            let have: BTreeSet<String> = columns_of(signature).into_iter().collect();
            let gone: Vec<String> = main_columns(name)
                .iter()
                .filter(|c| !have.contains(*c))
                .cloned()
                .collect();
            if gone.is_empty() {
                TableRead::Read
            } else {
                TableRead::NotRead(Unread::ColumnsGone(gone))
            }
        }
        None => TableRead::NotRead(Unread::UnknownShape),
    }
}

/// The definition of table `name` in the main database (`None`: no such table).
fn definition(c: &Connection, name: &str) -> rusqlite::Result<Option<(String, String)>> {
    let mut stmt = c.prepare_cached(
        "SELECT name, sql FROM main.sqlite_schema WHERE type = 'table' AND name = ?1 \
         COLLATE NOCASE",
    )?;
    let mut rows = stmt.query([name])?;
    match rows.next()? {
        Some(r) => Ok(Some((
            r.get(0)?,
            r.get::<_, Option<String>>(1)?.unwrap_or_default(),
        ))),
        None => Ok(None),
    }
}

/// What wsledger does with table `name` of the file behind `c`. Tables outside
/// [`READ_TABLES`] are only asked whether they are there.
pub fn table_read(c: &Connection, name: &str) -> rusqlite::Result<TableRead> {
    if !c.table_exists(Some("main"), name)? {
        return Ok(TableRead::Absent);
    }
    let lower = name.to_lowercase();
    if !READ_TABLES.contains(&lower.as_str()) {
        return Ok(TableRead::Read);
    }
    let Some((stored, sql)) = definition(c, name)? else {
        return Ok(TableRead::Absent);
    };
    let object = schema_object("table", &stored, &stored, &sql);
    Ok(judge(&lower, &object.signature))
}

/// The tables of [`READ_TABLES`] a file has, each with what wsledger does with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadableTables {
    /// Tables there and read.
    pub read: BTreeSet<String>,
    /// Tables there and not read, with why, in [`READ_TABLES`] order.
    pub unread: Vec<(String, Unread)>,
}

impl ReadableTables {
    /// Whether table `name` is there and read.
    pub fn reads(&self, name: &str) -> bool {
        self.read.contains(name)
    }

    /// Whether the ledger (events and both tool projections) is read.
    pub fn ledger(&self) -> bool {
        !self
            .unread
            .iter()
            .any(|(t, _)| LEDGER_TABLES.contains(&t.as_str()))
    }

    /// From the objects of a file (as `Workspace::schema_facts` reads them).
    pub fn of(objects: &[super::schema::SchemaObject]) -> ReadableTables {
        let mut out = ReadableTables::default();
        for name in READ_TABLES {
            let key = format!("table:{name}");
            let Some(o) = objects.iter().find(|o| o.key == key) else {
                continue;
            };
            match judge(name, &o.signature) {
                TableRead::NotRead(why) => out.unread.push(((*name).to_owned(), why)),
                _ => {
                    out.read.insert((*name).to_owned());
                }
            }
        }
        out
    }
}

impl Workspace {
    /// What wsledger reads of this file's tables (see the module's documentation).
    pub fn readable_tables(&self) -> Result<ReadableTables, DbError> {
        let (_, objects, _) = self.schema_objects()?;
        Ok(ReadableTables::of(&objects))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_come_from_the_definition_not_its_constraints() {
        let sig =
            "CREATE TABLE \"T\"(A TEXT PRIMARY KEY,\"Mixed\" INTEGER CHECK(X IN('a,b', 'c')),\
                   B TEXT REFERENCES U(V),PRIMARY KEY(A,B),UNIQUE(A),CHECK(A <> ','),\
                   FOREIGN KEY(B) REFERENCES U(V))";
        assert_eq!(columns_of(sig), ["a", "mixed", "b"]);
        assert_eq!(
            columns_of("CREATE TABLE X(CHECKED TEXT,UNIQUELY INT) WITHOUT ROWID"),
            ["checked", "uniquely"]
        );
    }

    #[test]
    fn every_table_of_every_build_generation_is_read() {
        for (name, shapes) in known_shapes() {
            for (sig, from) in shapes {
                if *from == KnownFrom::Build {
                    assert_eq!(judge(name, sig), TableRead::Read, "{name}");
                }
            }
        }
    }

    #[test]
    fn an_unknown_definition_is_not_read() {
        let main = main_columns("runtime_events");
        assert!(main.contains(&"payload_json".to_owned()));
        assert_eq!(
            judge(
                "runtime_events",
                "CREATE TABLE RUNTIME_EVENTS(EVENT_ID TEXT PRIMARY KEY,DOCTOR_NOTE TEXT)"
            ),
            TableRead::NotRead(Unread::UnknownShape)
        );
    }

    #[test]
    fn a_table_is_asked_of_the_main_schema_only_and_by_shape() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE tool_operations(x); CREATE VIEW core_agent_runs AS SELECT 1; \
             CREATE TEMP TABLE session_metadata(x); CREATE TABLE notes(x);",
        )
        .unwrap();
        // There, but in no shape wsledger knows: not read.
        assert_eq!(
            table_read(&c, "tool_operations").unwrap(),
            TableRead::NotRead(Unread::UnknownShape)
        );
        assert_eq!(
            table_read(&c, "TOOL_OPERATIONS").unwrap(),
            TableRead::NotRead(Unread::UnknownShape)
        );
        assert_eq!(
            table_read(&c, "core_agent_runs").unwrap(),
            TableRead::Absent
        );
        assert_eq!(
            table_read(&c, "session_metadata").unwrap(),
            TableRead::Absent
        );
        // A table wsledger never reads rows of is only asked whether it is there.
        assert_eq!(table_read(&c, "notes").unwrap(), TableRead::Read);
    }
}
