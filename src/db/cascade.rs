//! What a `DELETE` reaches through the file's foreign keys: each direct statement's
//! `WHERE` clause expanded through every `ON DELETE CASCADE` key the file declares
//! (read with `PRAGMA foreign_key_list`, so a cascade of any release is never missed),
//! and the rows that keep referencing a removed row through a key without one (they
//! make the delete fail, foreign keys being on). Conversation deletion (`quarantine`)
//! and excision (`excise`) both read what they remove through it.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{params, Connection};

use super::quote;

/// One foreign key (child columns → parent columns).
#[derive(Clone, Debug)]
pub(super) struct ForeignKey {
    pub(super) child: String,
    pub(super) from: Vec<String>,
    pub(super) parent: String,
    pub(super) to: Vec<String>,
    pub(super) cascade: bool,
}

fn primary_key(c: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = c.prepare(&format!("PRAGMA table_info({})", quote(table)))?;
    let mut pk: Vec<(i64, String)> = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(5)?, r.get::<_, String>(1)?)))?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .collect();
    pk.sort();
    Ok(pk.into_iter().map(|(_, n)| n).collect())
}

/// Every foreign key of `tables` (a key without parent columns names the parent's
/// primary key).
pub(super) fn foreign_keys(
    c: &Connection,
    tables: &BTreeSet<String>,
) -> rusqlite::Result<Vec<ForeignKey>> {
    let mut out = Vec::new();
    for child in tables {
        let mut stmt = c.prepare(&format!("PRAGMA foreign_key_list({})", quote(child)))?;
        // id, seq, table, from, to, on_update, on_delete, match
        let rows: Vec<(i64, String, String, Option<String>, String)> = stmt
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(6)?))
            })?
            .collect::<Result<_, _>>()?;
        let mut by_id: BTreeMap<i64, ForeignKey> = BTreeMap::new();
        for (id, parent, from, to, on_delete) in rows {
            let fk = by_id.entry(id).or_insert_with(|| ForeignKey {
                child: child.clone(),
                from: Vec::new(),
                parent: parent.clone(),
                to: Vec::new(),
                cascade: on_delete.eq_ignore_ascii_case("CASCADE"),
            });
            fk.from.push(from);
            if let Some(to) = to {
                fk.to.push(to);
            }
        }
        for mut fk in by_id.into_values() {
            if fk.to.is_empty() {
                fk.to = primary_key(c, &fk.parent)?;
            }
            out.push(fk);
        }
    }
    Ok(out)
}

/// Columns as one SQL operand: `"a"`, or the row value `("a", "b")`.
pub(super) fn cols(names: &[String]) -> String {
    let q: Vec<String> = names.iter().map(|n| quote(n)).collect();
    if q.len() == 1 {
        q[0].clone()
    } else {
        format!("({})", q.join(", "))
    }
}

/// `key`'s parent columns selected from `table` where `clause` holds: the rows of
/// the key's child that reference them are `cols(&key.from) IN (...)`.
fn parents(key: &ForeignKey, table: &str, clause: &str) -> String {
    let to: Vec<String> = key.to.iter().map(|n| quote(n)).collect();
    format!(
        "{} IN (SELECT {} FROM {} WHERE {})",
        cols(&key.from),
        to.join(", "),
        quote(table),
        clause
    )
}

/// The direct statements (table, `WHERE` clause), each followed by what its cascades
/// reach, in the order the delete reaches the tables.
pub(super) fn reached(direct: &[(String, String)], fks: &[ForeignKey]) -> Vec<(String, String)> {
    fn expand(
        fks: &[ForeignKey],
        table: &str,
        clause: &str,
        depth: usize,
        out: &mut Vec<(String, String)>,
    ) {
        out.push((table.to_owned(), clause.to_owned()));
        if depth > 16 {
            return;
        }
        for fk in fks.iter().filter(|f| f.cascade && f.parent == table) {
            expand(fks, &fk.child, &parents(fk, table, clause), depth + 1, out);
        }
    }
    let mut out = Vec::new();
    for (table, clause) in direct {
        expand(fks, table, clause, 0, &mut out);
    }
    out
}

/// For each key without a cascade whose parent the delete reaches (`sel`, with `?1`
/// bound to `arg`): how many rows, not removed themselves, still reference a removed
/// row through it (keys without such rows left out).
pub(super) fn dangling<'a>(
    c: &Connection,
    fks: &'a [ForeignKey],
    sel: &[(String, String)],
    arg: &str,
) -> rusqlite::Result<Vec<(i64, &'a ForeignKey)>> {
    let mut clauses: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (t, cl) in sel {
        clauses.entry(t.as_str()).or_default().push(cl.as_str());
    }
    let mut out = Vec::new();
    for fk in fks.iter().filter(|f| !f.cascade) {
        let Some(parent) = clauses.get(fk.parent.as_str()) else {
            continue;
        };
        let mut sql = format!(
            "SELECT count(*) FROM {} WHERE {}",
            quote(&fk.child),
            parents(fk, &fk.parent, &parent.join(" OR "))
        );
        if let Some(own) = clauses.get(fk.child.as_str()) {
            sql.push_str(&format!(" AND NOT COALESCE(({}), 0)", own.join(" OR ")));
        }
        let n: i64 = c.query_row(&sql, params![arg], |r| r.get(0))?;
        if n > 0 {
            out.push((n, fk));
        }
    }
    Ok(out)
}
