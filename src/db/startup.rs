//! What Maka's workspace composition reads when it opens the file: `PRAGMA
//! user_version`, every schema object, the scope registry, the session-metadata schema
//! row and the few rows of the legacy tables that a migration checks (cutover journal,
//! import sources, released automation and plan reminders). Never the log: every table
//! read here holds a handful of rows in a real workspace, and the reads that could be
//! larger are capped. The model that judges these facts is `crate::startup`.

use rusqlite::types::ValueRef;

use super::schema::SchemaObject;
use super::{DbError, Workspace};

/// A stored value as Maka's JavaScript sees it (`node:sqlite` gives numbers, strings
/// and null; the model only asks "is it a non-negative safe integer", "is it a string").
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob,
}

impl Cell {
    fn of(v: ValueRef<'_>) -> Cell {
        match v {
            ValueRef::Null => Cell::Null,
            ValueRef::Integer(n) => Cell::Integer(n),
            ValueRef::Real(f) => Cell::Real(f),
            ValueRef::Text(b) => Cell::Text(String::from_utf8_lossy(b).into_owned()),
            ValueRef::Blob(_) => Cell::Blob,
        }
    }

    /// The value when it is a number that is a safe integer (JavaScript's
    /// `Number.isSafeInteger`: a REAL with no fraction counts).
    pub fn safe_integer(&self) -> Option<i64> {
        const MAX: i64 = (1 << 53) - 1;
        match self {
            Cell::Integer(n) if n.abs() <= MAX => Some(*n),
            Cell::Real(f) if f.fract() == 0.0 && f.abs() <= MAX as f64 => Some(*f as i64),
            _ => None,
        }
    }

    /// `Number.isSafeInteger(v) && v >= 0`.
    pub fn non_negative_integer(&self) -> Option<i64> {
        self.safe_integer().filter(|n| *n >= 0)
    }

    pub fn text(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }

    /// `String(v)` as Maka's messages print it.
    pub fn display(&self) -> String {
        match self {
            Cell::Null => "null".to_owned(),
            Cell::Integer(n) => n.to_string(),
            Cell::Real(f) => f.to_string(),
            Cell::Text(s) => s.clone(),
            Cell::Blob => "[object Uint8Array]".to_owned(),
        }
    }
}

/// One row of a legacy table, by column name (in the order selected).
pub type LegacyRow = Vec<(String, Cell)>;

/// A legacy table's rows, or why they could not be read.
pub type LegacyRows = Result<Vec<LegacyRow>, String>;

/// Everything the start-up model (`crate::startup`) needs from the file.
#[derive(Clone, Debug, Default)]
pub struct StartupFacts {
    pub user_version: i64,
    /// Every schema object, ordered by type and name as Maka reads them.
    pub objects: Vec<SchemaObject>,
    /// `operational_schema_migrations` as `(scope, version)`; `None`: no such table;
    /// `Some(Err)`: the table exists but Maka's query fails on it.
    pub registry: Option<Result<Vec<(Cell, Cell)>, String>>,
    /// `runtime_capabilities` as `(capability, version)`, as `registry`.
    pub capabilities: Option<Result<Vec<(Cell, Cell)>, String>>,
    /// `session_metadata_schema`'s `session_metadata` row: `None` without the table,
    /// `Some(None)` without the row.
    pub session_metadata_version: Option<Option<Cell>>,
    pub cutover_journal: Option<LegacyRows>,
    pub runtime_import_sources: Option<LegacyRows>,
    /// With a `session_exists` column (1 or 0): whether `session_metadata` has the row.
    pub session_import_sources: Option<LegacyRows>,
    /// Whether `automation_definitions` has a `durable` column.
    pub automation_durable: bool,
    /// The first `automation_definitions.automation_id`, if any row exists.
    pub automation_first: Option<Cell>,
    pub automation_pending_fire: bool,
    /// `workflow_plan_reminders` in Maka's order (a user's catalog: a few rows).
    pub plan_reminders: Option<LegacyRows>,
}

impl StartupFacts {
    pub fn has_table(&self, name: &str) -> bool {
        let key = format!("table:{name}");
        self.objects.iter().any(|o| o.key == key)
    }
}

impl Workspace {
    /// Reads the start-up facts (schema and a few rows; see the module comment).
    pub fn startup_facts(&self) -> Result<StartupFacts, DbError> {
        let c = self.conn();
        let (user_version, objects, _) = self.schema_objects()?;
        let mut facts = StartupFacts {
            user_version,
            objects,
            ..StartupFacts::default()
        };
        // Maka's queries; one that fails on a hand-made table is a refusal, not ours.
        let read = |sql: &str| -> Result<Vec<LegacyRow>, String> {
            let mut stmt = c.prepare(sql).map_err(|x| x.to_string())?;
            let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
            let mut rows = stmt.query([]).map_err(|x| x.to_string())?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(|x| x.to_string())? {
                let mut row = Vec::with_capacity(names.len());
                for (i, n) in names.iter().enumerate() {
                    row.push((
                        n.clone(),
                        Cell::of(r.get_ref(i).map_err(|x| x.to_string())?),
                    ));
                }
                out.push(row);
            }
            Ok(out)
        };
        if facts.has_table("operational_schema_migrations") {
            facts.registry =
                Some(read("SELECT scope, version FROM operational_schema_migrations").map(pairs));
        }
        if facts.has_table("runtime_capabilities") {
            facts.capabilities =
                Some(read("SELECT capability, version FROM runtime_capabilities").map(pairs));
        }
        if facts.has_table("session_metadata_schema") {
            let row = read(
                "SELECT version FROM session_metadata_schema WHERE scope = 'session_metadata'",
            )
            .unwrap_or_default();
            facts.session_metadata_version = Some(
                row.into_iter()
                    .next()
                    .and_then(|mut r| r.pop())
                    .map(|x| x.1),
            );
        }
        if facts.has_table("cutover_journal") {
            facts.cutover_journal = Some(read(
                "SELECT store_name, source_path, source_fingerprint, state, started_at, \
                 completed_at, validation_json FROM cutover_journal ORDER BY store_name",
            ));
        }
        if facts.has_table("runtime_import_sources") {
            facts.runtime_import_sources = Some(read(
                "SELECT source_path, fingerprint, imported_at FROM runtime_import_sources \
                 ORDER BY source_path",
            ));
        }
        if facts.has_table("session_metadata_import_sources") {
            let exists = if facts.has_table("session_metadata") {
                "EXISTS(SELECT 1 FROM session_metadata m WHERE m.session_id = s.session_id)"
            } else {
                "0"
            };
            facts.session_import_sources = Some(read(&format!(
                "SELECT source_path, fingerprint, session_id, imported_at, {exists} AS session_exists \
                 FROM session_metadata_import_sources s ORDER BY source_path"
            )));
        }
        if facts.has_table("automation_definitions") {
            facts.automation_durable = read("PRAGMA table_info(automation_definitions)")
                .unwrap_or_default()
                .iter()
                .any(|r| {
                    r.iter()
                        .any(|(n, v)| n == "name" && v.text() == Some("durable"))
                });
            facts.automation_first =
                read("SELECT automation_id FROM automation_definitions LIMIT 1")
                    .ok()
                    .and_then(|rows| rows.into_iter().next())
                    .and_then(|mut r| r.pop())
                    .map(|x| x.1);
        }
        if facts.has_table("automation_pending_fires") {
            facts.automation_pending_fire = read("SELECT 1 FROM automation_pending_fires LIMIT 1")
                .map(|r| !r.is_empty())
                .unwrap_or(false);
        }
        if facts.has_table("workflow_plan_reminders") {
            facts.plan_reminders = Some(read(
                "SELECT reminder_id, created_at, updated_at, record_json FROM \
                 workflow_plan_reminders ORDER BY created_at, reminder_id",
            ));
        }
        Ok(facts)
    }
}

/// Two-column rows as pairs.
fn pairs(rows: Vec<LegacyRow>) -> Vec<(Cell, Cell)> {
    rows.into_iter()
        .map(|mut r| {
            let v = r.pop().map(|x| x.1).unwrap_or(Cell::Null);
            let s = r.pop().map(|x| x.1).unwrap_or(Cell::Null);
            (s, v)
        })
        .collect()
}

impl StartupFacts {
    /// The facts of a file with exactly these schema facts, its session-metadata schema
    /// row at the registry's `session_metadata` version and every legacy table empty:
    /// how a catalog generation (fresh or migrated) opens, for the upgrade preview's
    /// tests and for files known only by their schema.
    pub fn of_schema(schema: &super::SchemaFacts) -> StartupFacts {
        let mut f = StartupFacts {
            user_version: schema.user_version,
            objects: schema.objects.clone(),
            ..StartupFacts::default()
        };
        let empty = || Some(Ok(Vec::new()));
        if let Some(reg) = &schema.registry {
            f.registry = Some(Ok(reg
                .iter()
                .map(|(s, v)| (Cell::Text(s.clone()), Cell::Integer(*v)))
                .collect()));
        }
        if let Some(caps) = &schema.capabilities {
            f.capabilities = Some(Ok(caps
                .iter()
                .map(|(c, v)| (Cell::Text(c.clone()), Cell::Integer(*v)))
                .collect()));
        }
        if f.has_table("session_metadata_schema") {
            f.session_metadata_version = Some(
                schema
                    .registry
                    .as_ref()
                    .and_then(|r| r.get("session_metadata"))
                    .map(|v| Cell::Integer(*v)),
            );
        }
        if f.has_table("cutover_journal") {
            f.cutover_journal = empty();
        }
        if f.has_table("runtime_import_sources") {
            f.runtime_import_sources = empty();
        }
        if f.has_table("session_metadata_import_sources") {
            f.session_import_sources = empty();
        }
        if f.has_table("workflow_plan_reminders") {
            f.plan_reminders = empty();
        }
        f.automation_durable = f
            .objects
            .iter()
            .any(|o| o.key == "table:automation_definitions" && o.signature.contains("DURABLE"));
        f
    }
}
