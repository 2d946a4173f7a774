//! Files in the shapes of Maka generations newer than main f19eede03, built from a copy
//! of a fixture by applying, in our own SQL, the schema changes that the published
//! migrations make (the facts, with their upstream references, are in
//! `docs/releases.md`, "Maka newer than this wsledger"). Nothing here is Maka's code:
//! each step states the end state a migration leaves, table by table, and the
//! bookkeeping Maka does with it (`PRAGMA user_version`, the scope registry).
//!
//! The steps keep `runtime_events`, `tool_operations` and `tool_journal_events` as they
//! are: none of the modelled migrations rewrites them (runtime 16 inserts events only
//! for run headers that have none; [`migrate`] refuses such a file instead of guessing
//! what Maka would write).

#![allow(dead_code)]

use std::path::Path;

use rusqlite::Connection;

/// One published schema step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Runtime 13: workspace versions of tool mutations.
    Runtime13,
    /// Runtime 14: managed mutation reservations.
    Runtime14,
    /// Runtime 15: continuation claims accept provider projection version 2.
    Runtime15,
    /// Runtime 16: invocation openings on the event spine (with [`Step::CoreExecution7`]).
    Runtime16,
    /// core_execution 6: capability grants, two retired message tables.
    CoreExecution6,
    /// core_execution 7: `core_agent_runs.record_json` dropped.
    CoreExecution7,
    /// workflow 12 (0.2.0): the task ledger retired, SessionTodo documents.
    Workflow12,
    /// workflow 12 as a later main left it: the documents table renamed.
    Workflow12TaskDocuments,
}

impl Step {
    /// The registry scope and the version the step leaves.
    pub fn scope(self) -> (&'static str, i64) {
        match self {
            Step::Runtime13 => ("runtime", 13),
            Step::Runtime14 => ("runtime", 14),
            Step::Runtime15 => ("runtime", 15),
            Step::Runtime16 => ("runtime", 16),
            Step::CoreExecution6 => ("core_execution", 6),
            Step::CoreExecution7 => ("core_execution", 7),
            Step::Workflow12 | Step::Workflow12TaskDocuments => ("workflow", 12),
        }
    }

    /// Whether the step is about a scope this fixture has at main's version (the
    /// runtime steps need only main's runtime schema).
    fn needs_main_scope(self) -> Option<(&'static str, i64)> {
        match self {
            Step::CoreExecution6 => Some(("core_execution", 4)),
            Step::Workflow12 | Step::Workflow12TaskDocuments => Some(("workflow", 9)),
            _ => None,
        }
    }
}

/// A newer shape: a name and the steps that lead to it from main's schema.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub name: &'static str,
    pub steps: &'static [Step],
}

use Step::*;

/// The shapes, in the order upstream main went through them.
pub const SHAPES: &[Shape] = &[
    Shape {
        name: "runtime-13",
        steps: &[Runtime13],
    },
    Shape {
        name: "runtime-14",
        steps: &[Runtime13, Runtime14],
    },
    Shape {
        name: "runtime-15",
        steps: &[Runtime13, Runtime14, Runtime15],
    },
    Shape {
        name: "core-execution-6",
        steps: &[Runtime13, Runtime14, Runtime15, CoreExecution6],
    },
    Shape {
        name: "task-ledger-retired",
        steps: &[Runtime13, Runtime14, Runtime15, CoreExecution6, Workflow12],
    },
    Shape {
        name: "run-headers-on-the-spine",
        steps: &[
            Runtime13,
            Runtime14,
            Runtime15,
            Runtime16,
            CoreExecution6,
            CoreExecution7,
            Workflow12,
        ],
    },
];

/// The shape named `name`.
pub fn shape(name: &str) -> Shape {
    *SHAPES
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no newer shape {name}"))
}

/// The steps that apply to a file of an older release (its other scopes are older
/// than main's): the runtime ones.
pub fn runtime_steps(steps: &[Step]) -> Vec<Step> {
    steps
        .iter()
        .copied()
        .filter(|s| s.scope().0 == "runtime")
        .collect()
}

/// Applies `steps` to the database at `db`, in one transaction per step, as Maka
/// would on its first open; the file is left checkpointed, without `-wal`/`-shm`.
pub fn migrate(db: &Path, steps: &[Step]) -> Result<(), String> {
    let c = Connection::open(db).map_err(|e| e.to_string())?;
    c.pragma_update(None, "foreign_keys", false)
        .map_err(|e| e.to_string())?;
    for step in steps {
        if let Some((scope, v)) = step.needs_main_scope() {
            let have = registry_version(&c, scope)?;
            if have != Some(v) {
                return Err(format!(
                    "{step:?} starts from {scope} {v}; the file has {have:?}"
                ));
            }
        }
        c.execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| e.to_string())?;
        let r = apply(&c, *step).and_then(|()| {
            let (scope, version) = step.scope();
            if scope == "runtime" {
                c.pragma_update(None, "user_version", version)
                    .map_err(|e| e.to_string())?;
            }
            register(&c, scope, version)
        });
        match r {
            Ok(()) => c.execute_batch("COMMIT").map_err(|e| e.to_string())?,
            Err(e) => {
                let _ = c.execute_batch("ROLLBACK");
                return Err(format!("{step:?}: {e}"));
            }
        }
    }
    // Leave one file, as the fixtures are (the copy may have been in WAL mode).
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .map_err(|e| e.to_string())?;
    c.close().map_err(|(_, e)| e.to_string())
}

fn registry_version(c: &Connection, scope: &str) -> Result<Option<i64>, String> {
    let mut stmt = c
        .prepare("SELECT version FROM operational_schema_migrations WHERE scope = ?1")
        .map_err(|e| e.to_string())?;
    let mut rows = stmt.query([scope]).map_err(|e| e.to_string())?;
    match rows.next().map_err(|e| e.to_string())? {
        Some(r) => Ok(Some(r.get(0).map_err(|e| e.to_string())?)),
        None => Ok(None),
    }
}

/// Maka's registry bookkeeping: the scope's row carries the version it now has.
fn register(c: &Connection, scope: &str, version: i64) -> Result<(), String> {
    c.execute(
        "UPDATE operational_schema_migrations SET version = ?2, applied_at = applied_at + 1 \
         WHERE scope = ?1",
        rusqlite::params![scope, version],
    )
    .map(|_| ())
    .map_err(|e| e.to_string())
}

fn run(c: &Connection, sql: &str) -> Result<(), String> {
    c.execute_batch(sql).map_err(|e| e.to_string())
}

fn has_column(c: &Connection, table: &str, column: &str) -> Result<bool, String> {
    c.query_row(
        "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .map_err(|e| e.to_string())
}

fn apply(c: &Connection, step: Step) -> Result<(), String> {
    match step {
        Runtime13 => run(c, RUNTIME_13),
        Runtime14 => run(c, RUNTIME_14),
        Runtime15 => rebuild_claims(c, "runtime_continuation_claims_v15", &claims_table(false)),
        Runtime16 => {
            run(c, RUNTIME_16)?;
            rebuild_claims(c, "runtime_continuation_claims_v16", &claims_table(true))?;
            shelve_openings(c)
        }
        CoreExecution6 => run(c, CORE_EXECUTION_6),
        CoreExecution7 => {
            if has_column(c, "core_agent_runs", "record_json")? {
                run(c, "ALTER TABLE core_agent_runs DROP COLUMN record_json")?;
            }
            Ok(())
        }
        Workflow12 => run(c, &workflow_12("workflow_session_todo_documents")),
        Workflow12TaskDocuments => run(c, &workflow_12("workflow_session_task_documents")),
    }
}

/// Runtime 13: the versions table gains the tool-mutation columns and loses the
/// baseline-only checks; the heads table is defined again unchanged so that its
/// foreign key names the new versions table.
const RUNTIME_13: &str = "
ALTER TABLE runtime_workspace_heads RENAME TO runtime_workspace_heads_old;
ALTER TABLE runtime_workspace_versions RENAME TO runtime_workspace_versions_old;
CREATE TABLE runtime_workspace_versions (
  workspace_version_id TEXT PRIMARY KEY,
  repository_id TEXT NOT NULL,
  workspace_id TEXT NOT NULL,
  workspace_epoch_id TEXT NOT NULL,
  object_format TEXT NOT NULL CHECK (object_format IN ('sha1', 'sha256')),
  origin_kind TEXT NOT NULL CHECK (origin_kind IN ('baseline', 'tool_mutation')),
  origin_event_id TEXT NOT NULL,
  parents_json TEXT NOT NULL,
  operation_id TEXT,
  dispatch_event_id TEXT REFERENCES runtime_events(event_id),
  outcome_event_id TEXT REFERENCES runtime_events(event_id),
  base_head_revision INTEGER CHECK (base_head_revision IS NULL OR base_head_revision > 0),
  execution_profile_digest TEXT,
  commit_oid TEXT NOT NULL,
  tree_oid TEXT NOT NULL,
  policy_hash TEXT NOT NULL,
  tree_delta_digest TEXT NOT NULL,
  changed_file_count INTEGER NOT NULL CHECK (changed_file_count >= 0),
  deleted_file_count INTEGER NOT NULL CHECK (deleted_file_count >= 0),
  accepted_event_id TEXT NOT NULL UNIQUE REFERENCES runtime_events(event_id),
  protocol_version INTEGER NOT NULL CHECK (protocol_version = 1),
  committed_at INTEGER NOT NULL,
  FOREIGN KEY (workspace_id, workspace_epoch_id)
    REFERENCES runtime_workspace_epochs(workspace_id, workspace_epoch_id),
  UNIQUE (workspace_id, workspace_epoch_id, workspace_version_id, accepted_event_id),
  CHECK (
    (origin_kind = 'baseline' AND parents_json = '[]' AND operation_id IS NULL
      AND dispatch_event_id IS NULL AND outcome_event_id IS NULL
      AND base_head_revision IS NULL AND execution_profile_digest IS NULL)
    OR
    (origin_kind = 'tool_mutation' AND parents_json <> '[]' AND operation_id IS NOT NULL
      AND dispatch_event_id IS NOT NULL AND outcome_event_id IS NOT NULL
      AND base_head_revision IS NOT NULL AND execution_profile_digest IS NOT NULL)
  )
);
INSERT INTO runtime_workspace_versions (
  workspace_version_id, repository_id, workspace_id, workspace_epoch_id, object_format,
  origin_kind, origin_event_id, parents_json, commit_oid, tree_oid, policy_hash,
  tree_delta_digest, changed_file_count, deleted_file_count, accepted_event_id,
  protocol_version, committed_at)
SELECT workspace_version_id, repository_id, workspace_id, workspace_epoch_id, object_format,
  origin_kind, origin_event_id, parents_json, commit_oid, tree_oid, policy_hash,
  tree_delta_digest, changed_file_count, deleted_file_count, accepted_event_id,
  protocol_version, committed_at
FROM runtime_workspace_versions_old;
CREATE TABLE runtime_workspace_heads (
  workspace_id TEXT NOT NULL,
  workspace_epoch_id TEXT NOT NULL,
  repository_id TEXT NOT NULL,
  workspace_version_id TEXT NOT NULL,
  accepted_event_id TEXT NOT NULL,
  commit_oid TEXT NOT NULL,
  tree_oid TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision > 0),
  PRIMARY KEY (workspace_id, workspace_epoch_id),
  FOREIGN KEY (workspace_id, workspace_epoch_id)
    REFERENCES runtime_workspace_epochs(workspace_id, workspace_epoch_id),
  FOREIGN KEY (workspace_id, workspace_epoch_id, workspace_version_id, accepted_event_id)
    REFERENCES runtime_workspace_versions(
      workspace_id, workspace_epoch_id, workspace_version_id, accepted_event_id)
);
INSERT INTO runtime_workspace_heads SELECT * FROM runtime_workspace_heads_old;
DROP TABLE runtime_workspace_heads_old;
DROP TABLE runtime_workspace_versions_old;
";

/// Runtime 14: the paths a version changed, and the reservation a managed mutation
/// holds while it runs.
const RUNTIME_14: &str = "
ALTER TABLE runtime_workspace_versions
  ADD COLUMN changed_paths_json TEXT NOT NULL DEFAULT '[]';
CREATE TABLE runtime_managed_mutation_reservations (
  workspace_instance_id TEXT PRIMARY KEY,
  repository_id TEXT NOT NULL,
  workspace_id TEXT NOT NULL,
  workspace_epoch_id TEXT NOT NULL,
  operation_id TEXT NOT NULL UNIQUE REFERENCES tool_operations(operation_id),
  dispatch_event_id TEXT NOT NULL UNIQUE REFERENCES runtime_events(event_id),
  base_workspace_version_id TEXT NOT NULL,
  base_accepted_event_id TEXT NOT NULL,
  base_head_revision INTEGER NOT NULL CHECK (base_head_revision > 0),
  base_commit_oid TEXT NOT NULL,
  base_tree_oid TEXT NOT NULL,
  expected_paths_json TEXT NOT NULL,
  execution_profile_digest TEXT NOT NULL,
  protocol_version INTEGER NOT NULL CHECK (protocol_version = 1),
  reserved_at INTEGER NOT NULL,
  FOREIGN KEY (workspace_id, workspace_epoch_id)
    REFERENCES runtime_workspace_epochs(workspace_id, workspace_epoch_id)
);
";

/// The continuation-claims table as runtime 15 (`spine`: false) and runtime 16 leave
/// it, under `name` (renamed afterwards).
fn claims_table(spine: bool) -> String {
    let (header, start) = if spine {
        (
            "target_opening_json",
            "start_event_id TEXT UNIQUE REFERENCES runtime_events(event_id) ON DELETE CASCADE",
        )
    } else {
        (
            "target_run_header_json",
            "start_event_id TEXT UNIQUE REFERENCES runtime_events(event_id)",
        )
    };
    format!(
        "(
  claim_id TEXT PRIMARY KEY,
  source_session_id TEXT NOT NULL,
  source_invocation_id TEXT NOT NULL,
  source_run_id TEXT NOT NULL,
  source_turn_id TEXT NOT NULL,
  source_event_high_water INTEGER NOT NULL CHECK (source_event_high_water > 0),
  source_prefix_digest TEXT NOT NULL,
  boundary_digest TEXT NOT NULL UNIQUE,
  boundary_json TEXT NOT NULL,
  provider_projection_version INTEGER NOT NULL CHECK (provider_projection_version IN (1, 2)),
  provider_replay_digest TEXT NOT NULL,
  target_session_id TEXT NOT NULL,
  target_invocation_id TEXT NOT NULL UNIQUE,
  target_run_id TEXT NOT NULL UNIQUE,
  target_turn_id TEXT NOT NULL,
  {header} TEXT NOT NULL,
  claimed_at INTEGER NOT NULL,
  {start},
  start_kind TEXT CHECK (start_kind IS NULL OR start_kind IN ('runtime_admission', 'claim_repair')),
  protocol_version INTEGER NOT NULL CHECK (protocol_version = 1),
  UNIQUE (source_session_id, source_run_id, source_event_high_water, source_prefix_digest),
  UNIQUE (target_session_id, target_turn_id)
)"
    )
}

/// Builds `name` with `columns`, copies every claim (same column order), drops the
/// old table and gives the new one its name: SQLite then stores the statement with
/// the name quoted, as on a file Maka migrated.
fn rebuild_claims(c: &Connection, name: &str, columns: &str) -> Result<(), String> {
    run(
        c,
        &format!(
            "CREATE TABLE {name} {columns};
             INSERT INTO {name} SELECT * FROM runtime_continuation_claims;
             DROP TABLE runtime_continuation_claims;
             ALTER TABLE {name} RENAME TO runtime_continuation_claims;"
        ),
    )
}

/// Runtime 16's new objects: the opening index and uniqueness on the event spine, and
/// the shelf for the openings of runs that already had events.
const RUNTIME_16: &str = "
CREATE INDEX runtime_events_by_session_kind
  ON runtime_events(session_id, event_kind, invocation_id);
CREATE UNIQUE INDEX runtime_events_one_opening_per_invocation
  ON runtime_events(invocation_id)
  WHERE event_kind = 'invocation_opened';
CREATE TABLE runtime_legacy_invocation_openings (
  invocation_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  opened_at INTEGER NOT NULL,
  opening_json TEXT NOT NULL,
  anchor_event_id TEXT NOT NULL UNIQUE
    REFERENCES runtime_events(event_id) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX runtime_legacy_invocation_openings_by_session
  ON runtime_legacy_invocation_openings(session_id, opened_at, invocation_id);
";

/// Runtime 16's data step for runs that already have events: the opening each header
/// implied goes on the shelf, keyed by the invocation of the run's first event and
/// anchored to it. The opening's content is ours (the route and turn the header
/// names): only its place matters to these files. A header without any event is
/// where Maka writes new runtime events instead; that is not modelled, so such a file
/// is refused.
fn shelve_openings(c: &Connection) -> Result<(), String> {
    let orphans: i64 = c
        .query_row(
            "SELECT count(*) FROM core_agent_runs r WHERE NOT EXISTS (
               SELECT 1 FROM runtime_events e
               WHERE e.session_id = r.session_id AND e.run_id = r.run_id)",
            [],
            |r| r.get(0),
        )
        .map_err(|e| e.to_string())?;
    if orphans > 0 {
        return Err(format!(
            "{orphans} run header(s) without events: runtime 16 writes events for them, \
             which this builder does not model"
        ));
    }
    run(
        c,
        "INSERT OR IGNORE INTO runtime_legacy_invocation_openings
           (invocation_id, session_id, run_id, turn_id, opened_at, opening_json, anchor_event_id)
         SELECT f.invocation_id, r.session_id, r.run_id,
                COALESCE(json_extract(r.record_json, '$.turnId'), f.turn_id),
                r.created_at,
                json_object('kind', 'invocation_opened', 'protocol', 'invocation_opened_v1',
                            'route', json_object('provenance', 'legacy_header')),
                f.event_id
         FROM core_agent_runs r
         JOIN runtime_events f ON f.event_id = (
           SELECT e.event_id FROM runtime_events e
           WHERE e.session_id = r.session_id AND e.run_id = r.run_id
           ORDER BY e.event_seq ASC LIMIT 1)",
    )
}

/// core_execution 6: session grants of client capabilities; the run-identity index
/// and the two message-receipt tables retired.
const CORE_EXECUTION_6: &str = "
CREATE TABLE core_client_capability_session_grants (
  session_id TEXT NOT NULL,
  provider_id TEXT NOT NULL,
  contract_id TEXT NOT NULL,
  server_id TEXT NOT NULL,
  tool_name TEXT NOT NULL,
  capability TEXT NOT NULL,
  scope_kind TEXT NOT NULL,
  scope_value TEXT NOT NULL,
  granted_at INTEGER NOT NULL,
  record_json TEXT NOT NULL,
  PRIMARY KEY (session_id, provider_id, contract_id, capability, scope_kind, scope_value)
);
CREATE INDEX core_client_capability_session_grants_session
  ON core_client_capability_session_grants(session_id, granted_at);
DROP INDEX IF EXISTS core_agent_runs_identity;
DROP TABLE IF EXISTS core_message_receipts;
DROP TABLE IF EXISTS core_message_host_epochs;
";

/// workflow 12: the task ledger and the two write-only projections gone, Todo
/// documents kept in `documents`.
fn workflow_12(documents: &str) -> String {
    format!(
        "DROP TABLE IF EXISTS workflow_task_ledger_projections;
         DROP TABLE IF EXISTS workflow_plan_projections;
         DROP TABLE IF EXISTS workflow_task_ledger_events;
         CREATE TABLE {documents} (
           session_id TEXT PRIMARY KEY,
           record_json TEXT NOT NULL
         );"
    )
}
