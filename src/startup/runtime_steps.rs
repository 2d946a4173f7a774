//! The runtime store's own migration steps and its capability check, as every release
//! runs them: each step from the file's `user_version` up executes plain `CREATE TABLE`,
//! `CREATE INDEX`, `ALTER TABLE … ADD COLUMN` and capability `INSERT`s (no `IF NOT
//! EXISTS`), so a step meeting what it would create fails with SQLite's own error; once
//! the composition is open, the runtime store asserts its capability rows
//! (`sqlite-runtime-store.ts`, `assert*Capability`). Facts of each release's
//! `sqlite-runtime-schema.ts`, as data: which objects each step makes. Pure.

use super::compose::store_of_table;
use super::Refusal;
use crate::db::startup::{Cell, StartupFacts};
use crate::release::release_rank;

/// What one migration step does that can fail.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// `CREATE TABLE name`.
    Table(&'static str),
    /// `CREATE INDEX name ON table`.
    Index(&'static str, &'static str),
    /// `ALTER TABLE table ADD COLUMN column`.
    Column(&'static str, &'static str),
    /// `INSERT INTO runtime_capabilities` of this capability.
    Capability(&'static str),
    /// Step 11's back-fill of the session ordinals from `runtime_events`.
    FillOrdinals,
}

const RECOVERY: &str = "runtime_recovery_authority";
const CONTINUATION: &str = "runtime_continuation_authority";
const WORKSPACE: &str = "runtime_workspace_version_authority";

/// The operations of step `version` in `release`'s runtime migrations. Steps 3 and 8
/// changed: 3 made `runtime_import_sources` until v0.1.3 and does nothing from v0.1.4;
/// 8 made `headless_task_run_events` from v0.1.4 to v0.1.10 and does nothing from
/// v0.1.11. Step 12 only drops a table if it exists.
fn ops(release: &str, version: i64) -> Vec<Op> {
    let rank = release_rank(release).unwrap_or(usize::MAX);
    let from = |tag: &str| rank >= release_rank(tag).unwrap_or(0);
    match version {
        1 => vec![
            Op::Table("runtime_events"),
            Op::Index("runtime_events_by_run", "runtime_events"),
            Op::Index("runtime_events_by_session", "runtime_events"),
            Op::Table("tool_journal_events"),
            Op::Index("tool_journal_events_by_operation", "tool_journal_events"),
            Op::Table("tool_operations"),
        ],
        2 => vec![
            Op::Table("runtime_partial_snapshots"),
            Op::Index(
                "runtime_partial_snapshots_by_run",
                "runtime_partial_snapshots",
            ),
        ],
        3 if !from("v0.1.4") => vec![Op::Table("runtime_import_sources")],
        4 => vec![Op::Column("tool_operations", "dispatch_event_id")],
        5 => vec![Op::Table("runtime_capabilities"), Op::Capability(RECOVERY)],
        6 => vec![
            Op::Table("runtime_continuation_claims"),
            Op::Capability(CONTINUATION),
        ],
        7 => vec![
            Op::Table("runtime_workspace_epochs"),
            Op::Table("runtime_workspace_versions"),
            Op::Table("runtime_workspace_heads"),
            Op::Capability(WORKSPACE),
        ],
        8 if !from("v0.1.11") => vec![Op::Table("headless_task_run_events")],
        9 => vec![Op::Table("runtime_storage_root_binding")],
        10 => vec![Op::Table("runtime_partial_segments")],
        11 => vec![
            Op::Table("runtime_session_event_ordinals"),
            Op::FillOrdinals,
        ],
        _ => Vec::new(),
    }
}

/// What the steps see: the names in `sqlite_schema` by kind, the columns of
/// `tool_operations`, and the capability rows, as the steps change them.
struct Schema {
    tables: Vec<String>,
    indexes: Vec<String>,
    dispatch_column: bool,
    capabilities: Vec<String>,
}

impl Schema {
    fn of(f: &StartupFacts) -> Schema {
        let names = |kind: &str| -> Vec<String> {
            f.objects
                .iter()
                .filter_map(|o| o.key.strip_prefix(kind).map(str::to_owned))
                .collect()
        };
        let mut tables = names("table:");
        // A view's name is taken just as a table's.
        tables.extend(names("view:"));
        let dispatch_column = f
            .objects
            .iter()
            .any(|o| o.key == "table:tool_operations" && o.signature.contains("DISPATCH_EVENT_ID"));
        let capabilities = match &f.capabilities {
            Some(Ok(rows)) => rows
                .iter()
                .filter_map(|(c, _)| c.text().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        Schema {
            tables,
            indexes: names("index:"),
            dispatch_column,
            capabilities,
        }
    }

    fn has_table(&self, t: &str) -> bool {
        self.tables.iter().any(|x| x == t)
    }

    fn has_index(&self, i: &str) -> bool {
        self.indexes.iter().any(|x| x == i)
    }

    /// SQLite's error for `op`, or the schema after it.
    fn run(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Table(t) => {
                if self.has_table(t) {
                    return Err(format!("table {t} already exists"));
                }
                if self.has_index(t) {
                    return Err(format!("there is already an index named {t}"));
                }
                self.tables.push(t.to_owned());
            }
            Op::Index(i, t) => {
                if self.has_index(i) {
                    return Err(format!("index {i} already exists"));
                }
                if self.has_table(i) {
                    return Err(format!("there is already a table named {i}"));
                }
                if !self.has_table(t) {
                    return Err(format!("no such table: main.{t}"));
                }
                self.indexes.push(i.to_owned());
            }
            Op::Column(t, c) => {
                if !self.has_table(t) {
                    return Err(format!("no such table: {t}"));
                }
                if self.dispatch_column {
                    return Err(format!("duplicate column name: {c}"));
                }
                self.dispatch_column = true;
            }
            Op::Capability(c) => {
                if !self.has_table("runtime_capabilities") {
                    return Err("no such table: runtime_capabilities".to_owned());
                }
                if self.capabilities.iter().any(|x| x == c) {
                    return Err(
                        "UNIQUE constraint failed: runtime_capabilities.capability".to_owned()
                    );
                }
                self.capabilities.push(c.to_owned());
            }
            Op::FillOrdinals => {
                if !self.has_table("runtime_events") {
                    return Err("no such table: runtime_events".to_owned());
                }
            }
        }
        Ok(())
    }
}

fn failed(store: &str, object: Option<String>, message: String) -> Refusal {
    Refusal {
        reason: "migration_failed",
        store: store.to_owned(),
        object,
        maka_message: message,
        version: None,
        supported_version: None,
    }
}

/// The first runtime migration step of `release` that fails on this file, migrating
/// it from its `user_version` to `to`, with SQLite's error.
pub fn migration_failure(f: &StartupFacts, release: &str, to: i64) -> Option<Refusal> {
    let mut schema = Schema::of(f);
    for version in (f.user_version.max(0) + 1)..=to {
        for op in ops(release, version) {
            if let Err(message) = schema.run(op) {
                let object = match op {
                    Op::Table(t) => Some(format!("table:{t}")),
                    Op::Index(i, _) => Some(format!("index:{i}")),
                    Op::Column(t, _) => Some(format!("table:{t}")),
                    Op::Capability(_) | Op::FillOrdinals => None,
                };
                if let Op::Capability(_) = op {
                    if !schema.has_table("runtime_capabilities") {
                        // The capability table itself is gone: the same cause as the
                        // capability check's own refusal.
                        return Some(unavailable(
                            Some("table:runtime_capabilities".to_owned()),
                            message,
                        ));
                    }
                }
                return Some(failed("runtime", object, message));
            }
        }
    }
    None
}

/// The capabilities `release`'s runtime store requires, in the order it asserts them
/// (v0.1.0 and v0.1.1 keep no runtime store of that kind).
fn required(release: &str) -> &'static [&'static str] {
    let rank = release_rank(release).unwrap_or(usize::MAX);
    if rank < release_rank("v0.1.2").unwrap_or(0) {
        &[]
    } else if rank < release_rank("v0.1.3").unwrap_or(0) {
        &[RECOVERY]
    } else {
        &[RECOVERY, CONTINUATION, WORKSPACE]
    }
}

/// The runtime store's capability check once the composition has opened (and migrated
/// from `user_version` up to `to`) the file: every capability it requires is registered
/// at version 1, or it refuses with its own message.
pub fn capability_refusal(f: &StartupFacts, release: &str, to: i64) -> Option<Refusal> {
    let required = required(release);
    if required.is_empty() {
        return None;
    }
    // The steps register their capabilities at version 1.
    let inserted: Vec<&str> = ((f.user_version.max(0) + 1)..=to)
        .flat_map(|v| ops(release, v))
        .filter_map(|op| match op {
            Op::Capability(c) => Some(c),
            _ => None,
        })
        .collect();
    let created_table = f.user_version < 5;
    let rows: &[(Cell, Cell)] = match &f.capabilities {
        Some(Ok(rows)) => rows,
        Some(Err(e)) => return Some(unavailable(None, e.clone())),
        None if created_table => &[],
        None => {
            return Some(unavailable(
                Some("table:runtime_capabilities".to_owned()),
                "no such table: runtime_capabilities".to_owned(),
            ))
        }
    };
    for c in required {
        let stored = rows
            .iter()
            .find(|(name, _)| name.text() == Some(*c))
            .map(|(_, v)| v);
        let ok = match stored {
            Some(v) => matches!(v, Cell::Integer(1)) || matches!(v, Cell::Real(x) if *x == 1.0),
            None => inserted.contains(c),
        };
        if !ok {
            let kind = match *c {
                RECOVERY => "recovery",
                CONTINUATION => "continuation",
                _ => "workspace",
            };
            return Some(unavailable(
                Some(format!("capability:{c}")),
                format!("SQLite runtime {kind} capability {c}@1 is unavailable"),
            ));
        }
    }
    None
}

fn unavailable(object: Option<String>, message: String) -> Refusal {
    Refusal {
        reason: "capability_unavailable",
        store: store_of_table("runtime_capabilities").to_owned(),
        object,
        maka_message: message,
        version: None,
        supported_version: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::generation_of;

    fn fresh(tag: &str) -> StartupFacts {
        StartupFacts::of_schema(&generation_of(tag).unwrap().facts(0))
    }

    #[test]
    fn a_step_meeting_its_own_table_fails_with_sqlites_words() {
        let mut f = fresh("v0.1.5");
        f.user_version = 8;
        let r = migration_failure(&f, "v0.1.5", 9).unwrap();
        assert_eq!(r.reason, "migration_failed");
        assert_eq!(
            r.maka_message,
            "table runtime_storage_root_binding already exists"
        );
        // Dropped as a test of v0.1.5's did, the steps run again cleanly.
        let mut g = fresh("v0.1.5");
        g.user_version = 6;
        g.objects.retain(|o| {
            ![
                "table:runtime_storage_root_binding",
                "table:runtime_workspace_heads",
                "table:runtime_workspace_versions",
                "table:runtime_workspace_epochs",
                "table:headless_task_run_events",
            ]
            .contains(&o.key.as_str())
        });
        if let Some(Ok(rows)) = &mut g.capabilities {
            rows.retain(|(c, _)| c.text() != Some(WORKSPACE));
        }
        assert_eq!(migration_failure(&g, "v0.1.5", 9), None);
        assert_eq!(capability_refusal(&g, "v0.1.5", 9), None);
    }

    #[test]
    fn a_column_or_capability_already_there_fails_too() {
        let mut f = fresh("v0.1.5");
        f.user_version = 3;
        let r = migration_failure(&f, "v0.1.5", 9).unwrap();
        assert_eq!(r.maka_message, "duplicate column name: dispatch_event_id");
        f.user_version = 4;
        let r = migration_failure(&f, "v0.1.5", 9).unwrap();
        assert_eq!(r.maka_message, "table runtime_capabilities already exists");
    }

    #[test]
    fn every_release_opens_its_own_capabilities_and_refuses_missing_ones_in_order() {
        for tag in crate::release::RELEASES {
            assert_eq!(capability_refusal(&fresh(tag), tag, 12), None, "{tag}");
        }
        let mut f = fresh("v0.1.5");
        if let Some(Ok(rows)) = &mut f.capabilities {
            rows.clear();
            rows.push((Cell::Text("tool_recovery_bundle".into()), Cell::Integer(1)));
        }
        let r = capability_refusal(&f, "v0.1.5", 9).unwrap();
        assert_eq!(
            r.maka_message,
            "SQLite runtime recovery capability runtime_recovery_authority@1 is unavailable"
        );
        let mut f = fresh("v0.1.5");
        if let Some(Ok(rows)) = &mut f.capabilities {
            for (c, v) in rows.iter_mut() {
                if c.text() == Some(WORKSPACE) {
                    *v = Cell::Integer(2);
                }
            }
        }
        let r = capability_refusal(&f, "v0.1.5", 9).unwrap();
        assert_eq!(
            r.maka_message,
            "SQLite runtime workspace capability runtime_workspace_version_authority@1 is unavailable"
        );
        // v0.1.2 requires only the first.
        assert_eq!(capability_refusal(&f, "v0.1.2", 5), None);
    }
}
