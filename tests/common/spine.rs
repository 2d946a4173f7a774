//! Builders of workspaces in the shapes Maka writes after main f19eede03 (our own code,
//! from the facts in /work/notes/newer-maka-events.md): run metadata moved onto the
//! runtime event spine (runtime schema 16, core_execution 7: every run header becomes
//! an invocation-opening fact and `core_agent_runs.record_json` is dropped), runs
//! written the new way (an opening fact as their first event, no header), and events of
//! kinds only newer Maka writes.

#![allow(dead_code)]

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};

/// What [`migrate_runs_onto_spine`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SpineMigration {
    /// Runs with events: their opening fact went to `runtime_legacy_invocation_openings`.
    pub shelved: usize,
    /// Runs without events: an opening event was written as their event 1.
    pub opened: usize,
    /// Of those, runs whose header was terminal: a terminal event followed.
    pub terminals: usize,
}

fn sql_err(e: rusqlite::Error) -> String {
    e.to_string()
}

fn has_table(c: &Connection, name: &str) -> Result<bool, String> {
    c.query_row(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |_| Ok(()),
    )
    .optional()
    .map(|r| r.is_some())
    .map_err(sql_err)
}

fn has_column(c: &Connection, table: &str, column: &str) -> Result<bool, String> {
    let mut st = c
        .prepare(&format!("PRAGMA table_info({table})"))
        .map_err(sql_err)?;
    let names: Vec<String> = st
        .query_map([], |r| r.get::<_, String>(1))
        .map_err(sql_err)?
        .collect::<Result<_, _>>()
        .map_err(sql_err)?;
    Ok(names.iter().any(|n| n == column))
}

/// A JSON value with every object's keys sorted (Maka's canonical encoding orders keys).
pub fn canonical(v: Value) -> Value {
    match v {
        Value::Object(o) => {
            let mut pairs: Vec<(String, Value)> = o.into_iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(pairs.into_iter().map(|(k, v)| (k, canonical(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// The opening fact a run header projects to (what Maka's migration derives from each
/// legacy header): route, configuration, root authority, source, lineage.
pub fn opening_from_header(h: &Map<String, Value>) -> Value {
    let s = |k: &str| h.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut route = Map::new();
    match s("llmConnectionId") {
        Some(id) => {
            route.insert("provenance".into(), json!("runtime"));
            route.insert("llmConnectionId".into(), json!(id));
            if let Some(p) = s("providerStateIdentity") {
                route.insert("providerStateIdentity".into(), json!(p));
            }
        }
        None => {
            route.insert("provenance".into(), json!("unknown"));
        }
    }
    route.insert("backendKind".into(), json!(s("backendKind")));
    route.insert("llmConnectionSlug".into(), json!(s("llmConnectionSlug")));
    route.insert("modelId".into(), json!(s("modelId")));
    let mut configuration = json!({
        "cwd": s("cwd"),
        // A retired mode reads back as the one it folded into.
        "permissionMode": s("permissionMode").map(|m| if m == "execute" { "ask".to_owned() } else { m }),
        "collaborationMode": s("collaborationMode").unwrap_or_else(|| "agent".into()),
        "orchestrationMode": s("orchestrationMode").unwrap_or_else(|| "default".into()),
        "orchestrationSource": s("orchestrationSource").unwrap_or_else(|| "session".into()),
        "toolMode": s("toolMode").unwrap_or_else(|| "direct".into()),
    });
    for k in ["agentSwarmAuthorization", "workspaceIdentity"] {
        if let Some(v) = s(k) {
            configuration[k] = json!(v);
        }
    }
    let automation = s("legacyAutomationId").or_else(|| s("automationId"));
    let root = if let Some(id) = s("scheduledTaskId") {
        json!({"kind": "scheduled_task", "scheduledTaskId": id})
    } else if let Some(id) = s("goalId") {
        json!({"kind": "goal", "goalId": id})
    } else if let Some(id) = automation {
        json!({"kind": "legacy_automation", "legacyAutomationId": id})
    } else if let (Some(w), Some(a)) = (s("agentGraphWakeId"), s("agentGraphWakeAttemptId")) {
        json!({"kind": "agent_graph_supervisor_wake", "wakeId": w, "attemptId": a})
    } else if s("rootExecutionKind").as_deref() == Some("context_compact") {
        json!({"kind": "context_compact"})
    } else {
        json!({"kind": "user"})
    };
    let source = match h.get("continuationSource").and_then(Value::as_object) {
        None => json!({"kind": "fresh"}),
        Some(c) => {
            let mut src = json!({
                "kind": "continuation",
                "sourceInvocationId": c.get("sourceInvocationId"),
                "sourceRunId": c.get("sourceRunId"),
                "sourceTurnId": c.get("sourceTurnId"),
                "sourceRuntimeEventHighWater": c.get("sourceRuntimeEventHighWater"),
            });
            if let (Some(claim), Some(digest)) = (c.get("claimId"), c.get("boundaryDigest")) {
                src["claimId"] = claim.clone();
                src["boundaryDigest"] = digest.clone();
            }
            src
        }
    };
    let mut lineage = Map::new();
    for &k in wsledger::event::newer::LINEAGE_KEYS {
        if let Some(v) = s(k) {
            lineage.insert(k.into(), json!(v));
        }
    }
    let mut opening = json!({
        "kind": "invocation_opened",
        "protocol": "invocation_opened_v1",
        "route": Value::Object(route),
        "configuration": configuration,
        "root": root,
        "source": source,
    });
    if !lineage.is_empty() {
        opening["lineage"] = Value::Object(lineage);
    }
    canonical(opening)
}

/// The identity of one run's events.
#[derive(Debug, Clone, Copy)]
pub struct Ids<'a> {
    pub session: &'a str,
    pub invocation: &'a str,
    pub run: &'a str,
    pub turn: &'a str,
}

impl Ids<'_> {
    /// An event's envelope: its identity, `ts`, not partial.
    fn envelope(&self, id: &str, ts: i64) -> Value {
        json!({
            "id": id, "sessionId": self.session, "invocationId": self.invocation,
            "runId": self.run, "turnId": self.turn, "ts": ts, "partial": false,
        })
    }
}

/// The event that carries an opening fact (hidden from the model, system-authored).
pub fn opening_event(id: &str, ids: Ids<'_>, ts: i64, opening: Value) -> Value {
    let mut e = ids.envelope(id, ts);
    e["role"] = json!("system");
    e["author"] = json!("system");
    e["modelVisibility"] = json!("hidden");
    e["content"] = opening;
    canonical(e)
}

/// The terminal event a writer states for a run that did not state its own.
fn synthetic_terminal(
    id: &str,
    ids: Ids<'_>,
    status: &str,
    ts: i64,
    h: &Map<String, Value>,
) -> Value {
    let failure_class = h
        .get("failureClass")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let mut delta = Map::new();
    let mut event = ids.envelope(id, ts);
    event["role"] = json!("system");
    event["author"] = json!("system");
    event["status"] = json!(if status == "cancelled" {
        "aborted"
    } else {
        status
    });
    if status == "failed" {
        let message = h
            .get("failureMessage")
            .and_then(Value::as_str)
            .unwrap_or(failure_class);
        event["content"] = json!({
            "kind": "error", "code": failure_class, "reason": failure_class, "message": message,
        });
        delta.insert("failureClass".into(), json!(failure_class));
    }
    if status == "cancelled" {
        if let Some(a) = h.get("abortSource") {
            delta.insert("abortSource".into(), a.clone());
        }
    }
    event["actions"] = json!({"endInvocation": true, "stateDelta": Value::Object(delta)});
    canonical(event)
}

/// `runtime_events.event_kind` of a payload, as Maka derives it.
pub fn event_kind(e: &Value) -> String {
    if let Some(k) = e["content"]["kind"].as_str() {
        return k.to_owned();
    }
    if let Some(s) = e["status"].as_str() {
        return s.to_owned();
    }
    let a = &e["actions"];
    if !a["workspaceFact"].is_null() {
        "workspace_fact".into()
    } else if !a["toolDispatch"].is_null() {
        "tool_dispatch".into()
    } else if a["endInvocation"] == json!(true) {
        "invocation_end".into()
    } else {
        "runtime_fact".into()
    }
}

/// Appends one event row (and its session ordinal, when the file has ordinals) at
/// `event_seq` of its invocation.
pub fn insert_event(c: &Connection, e: &Value, seq: i64) -> Result<(), String> {
    let text = serde_json::to_string(e).map_err(|x| x.to_string())?;
    let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
    c.execute(
        "INSERT INTO runtime_events (event_id, session_id, invocation_id, run_id, turn_id, \
         event_seq, event_kind, payload_json, committed_at) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
        params![
            s("id"),
            s("sessionId"),
            s("invocationId"),
            s("runId"),
            s("turnId"),
            seq,
            event_kind(e),
            text,
            e["ts"].as_i64().unwrap_or(0)
        ],
    )
    .map_err(sql_err)?;
    if has_table(c, "runtime_session_event_ordinals")? {
        c.execute(
            "INSERT INTO runtime_session_event_ordinals(session_id, ordinal, event_id) \
             SELECT ?1, COALESCE(MAX(ordinal), 0) + 1, ?2 FROM runtime_session_event_ordinals \
             WHERE session_id = ?1",
            params![s("sessionId"), s("id")],
        )
        .map_err(sql_err)?;
    }
    Ok(())
}

/// The schema steps of runtime 13 to 16 (workspace versions of tool mutations,
/// managed mutation reservations, continuation claims with provider projection version
/// 2, then the opening-fact indexes, the legacy opening shelf and claims keyed by the
/// target's opening), each only where the table it changes exists.
fn runtime_schema_13_to_16(c: &Connection) -> Result<(), String> {
    if has_table(c, "runtime_workspace_versions")? && has_table(c, "runtime_workspace_heads")? {
        c.execute_batch(
            "ALTER TABLE runtime_workspace_heads RENAME TO old_heads;
             ALTER TABLE runtime_workspace_versions RENAME TO old_versions;
             CREATE TABLE runtime_workspace_versions (
               workspace_version_id TEXT PRIMARY KEY, repository_id TEXT NOT NULL,
               workspace_id TEXT NOT NULL, workspace_epoch_id TEXT NOT NULL,
               object_format TEXT NOT NULL CHECK (object_format IN ('sha1', 'sha256')),
               origin_kind TEXT NOT NULL CHECK (origin_kind IN ('baseline', 'tool_mutation')),
               origin_event_id TEXT NOT NULL, parents_json TEXT NOT NULL, operation_id TEXT,
               dispatch_event_id TEXT REFERENCES runtime_events(event_id),
               outcome_event_id TEXT REFERENCES runtime_events(event_id),
               base_head_revision INTEGER CHECK (base_head_revision IS NULL OR base_head_revision > 0),
               execution_profile_digest TEXT, commit_oid TEXT NOT NULL, tree_oid TEXT NOT NULL,
               policy_hash TEXT NOT NULL, tree_delta_digest TEXT NOT NULL,
               changed_file_count INTEGER NOT NULL CHECK (changed_file_count >= 0),
               deleted_file_count INTEGER NOT NULL CHECK (deleted_file_count >= 0),
               accepted_event_id TEXT NOT NULL UNIQUE REFERENCES runtime_events(event_id),
               protocol_version INTEGER NOT NULL CHECK (protocol_version = 1),
               committed_at INTEGER NOT NULL,
               changed_paths_json TEXT NOT NULL DEFAULT '[]',
               FOREIGN KEY (workspace_id, workspace_epoch_id)
                 REFERENCES runtime_workspace_epochs(workspace_id, workspace_epoch_id),
               UNIQUE (workspace_id, workspace_epoch_id, workspace_version_id, accepted_event_id));
             INSERT INTO runtime_workspace_versions (workspace_version_id, repository_id,
               workspace_id, workspace_epoch_id, object_format, origin_kind, origin_event_id,
               parents_json, commit_oid, tree_oid, policy_hash, tree_delta_digest,
               changed_file_count, deleted_file_count, accepted_event_id, protocol_version,
               committed_at)
             SELECT workspace_version_id, repository_id, workspace_id, workspace_epoch_id,
               object_format, origin_kind, origin_event_id, parents_json, commit_oid, tree_oid,
               policy_hash, tree_delta_digest, changed_file_count, deleted_file_count,
               accepted_event_id, protocol_version, committed_at FROM old_versions;
             CREATE TABLE runtime_workspace_heads (
               workspace_id TEXT NOT NULL, workspace_epoch_id TEXT NOT NULL,
               repository_id TEXT NOT NULL, workspace_version_id TEXT NOT NULL,
               accepted_event_id TEXT NOT NULL, commit_oid TEXT NOT NULL, tree_oid TEXT NOT NULL,
               revision INTEGER NOT NULL CHECK (revision > 0),
               PRIMARY KEY (workspace_id, workspace_epoch_id),
               FOREIGN KEY (workspace_id, workspace_epoch_id)
                 REFERENCES runtime_workspace_epochs(workspace_id, workspace_epoch_id),
               FOREIGN KEY (workspace_id, workspace_epoch_id, workspace_version_id, accepted_event_id)
                 REFERENCES runtime_workspace_versions(workspace_id, workspace_epoch_id,
                   workspace_version_id, accepted_event_id));
             INSERT INTO runtime_workspace_heads SELECT * FROM old_heads;
             DROP TABLE old_heads;
             DROP TABLE old_versions;
             CREATE TABLE runtime_managed_mutation_reservations (
               workspace_instance_id TEXT PRIMARY KEY, repository_id TEXT NOT NULL,
               workspace_id TEXT NOT NULL, workspace_epoch_id TEXT NOT NULL,
               operation_id TEXT NOT NULL UNIQUE REFERENCES tool_operations(operation_id),
               dispatch_event_id TEXT NOT NULL UNIQUE REFERENCES runtime_events(event_id),
               base_workspace_version_id TEXT NOT NULL, base_accepted_event_id TEXT NOT NULL,
               base_head_revision INTEGER NOT NULL CHECK (base_head_revision > 0),
               base_commit_oid TEXT NOT NULL, base_tree_oid TEXT NOT NULL,
               expected_paths_json TEXT NOT NULL, execution_profile_digest TEXT NOT NULL,
               protocol_version INTEGER NOT NULL CHECK (protocol_version = 1),
               reserved_at INTEGER NOT NULL,
               FOREIGN KEY (workspace_id, workspace_epoch_id)
                 REFERENCES runtime_workspace_epochs(workspace_id, workspace_epoch_id));",
        )
        .map_err(sql_err)?;
    }
    c.execute_batch(
        "CREATE INDEX runtime_events_by_session_kind
           ON runtime_events(session_id, event_kind, invocation_id);
         CREATE UNIQUE INDEX runtime_events_one_opening_per_invocation
           ON runtime_events(invocation_id) WHERE event_kind = 'invocation_opened';
         CREATE TABLE runtime_legacy_invocation_openings (
           invocation_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, run_id TEXT NOT NULL,
           turn_id TEXT NOT NULL, opened_at INTEGER NOT NULL, opening_json TEXT NOT NULL,
           anchor_event_id TEXT NOT NULL UNIQUE
             REFERENCES runtime_events(event_id) ON DELETE CASCADE) WITHOUT ROWID;
         CREATE INDEX runtime_legacy_invocation_openings_by_session
           ON runtime_legacy_invocation_openings(session_id, opened_at, invocation_id);",
    )
    .map_err(sql_err)?;
    if has_table(c, "runtime_continuation_claims")?
        && has_column(c, "runtime_continuation_claims", "target_run_header_json")?
    {
        c.execute_batch(
            "CREATE TABLE claims_v16 (
               claim_id TEXT PRIMARY KEY, source_session_id TEXT NOT NULL,
               source_invocation_id TEXT NOT NULL, source_run_id TEXT NOT NULL,
               source_turn_id TEXT NOT NULL,
               source_event_high_water INTEGER NOT NULL CHECK (source_event_high_water > 0),
               source_prefix_digest TEXT NOT NULL, boundary_digest TEXT NOT NULL UNIQUE,
               boundary_json TEXT NOT NULL,
               provider_projection_version INTEGER NOT NULL CHECK (provider_projection_version IN (1, 2)),
               provider_replay_digest TEXT NOT NULL, target_session_id TEXT NOT NULL,
               target_invocation_id TEXT NOT NULL UNIQUE, target_run_id TEXT NOT NULL UNIQUE,
               target_turn_id TEXT NOT NULL, target_opening_json TEXT NOT NULL,
               claimed_at INTEGER NOT NULL,
               start_event_id TEXT UNIQUE REFERENCES runtime_events(event_id) ON DELETE CASCADE,
               start_kind TEXT CHECK (start_kind IS NULL OR start_kind IN ('runtime_admission', 'claim_repair')),
               protocol_version INTEGER NOT NULL CHECK (protocol_version = 1),
               UNIQUE (source_session_id, source_run_id, source_event_high_water, source_prefix_digest),
               UNIQUE (target_session_id, target_turn_id));
             INSERT INTO claims_v16 SELECT * FROM runtime_continuation_claims;
             DROP TABLE runtime_continuation_claims;
             ALTER TABLE claims_v16 RENAME TO runtime_continuation_claims;",
        )
        .map_err(sql_err)?;
        // Each claim's target header becomes the opening it implies.
        let rows: Vec<(String, String)> = {
            let mut st = c
                .prepare("SELECT claim_id, target_opening_json FROM runtime_continuation_claims")
                .map_err(sql_err)?;
            let v = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(sql_err)?
                .collect::<Result<_, _>>()
                .map_err(sql_err)?;
            v
        };
        for (id, header) in rows {
            match serde_json::from_str::<Value>(&header) {
                Ok(Value::Object(h)) => {
                    let opening = serde_json::to_string(&opening_from_header(&h)).unwrap();
                    c.execute(
                        "UPDATE runtime_continuation_claims SET target_opening_json = ?1 \
                         WHERE claim_id = ?2",
                        params![opening, id],
                    )
                    .map_err(sql_err)?;
                }
                _ => {
                    c.execute(
                        "DELETE FROM runtime_continuation_claims WHERE claim_id = ?1",
                        [id],
                    )
                    .map_err(sql_err)?;
                }
            }
        }
    }
    Ok(())
}

/// A header row (session, run, record) with its run's first event (invocation, id).
type HeaderAndAnchor = (String, String, String, Option<String>, Option<String>);

/// Runtime migration 16's data step: every run header's opening fact, on the legacy
/// shelf for a run that has events (anchored to its first event), or as event 1 of a
/// run that has none (then its terminal event when the header was terminal).
fn backfill_openings(c: &Connection) -> Result<SpineMigration, String> {
    let mut done = SpineMigration::default();
    let rows: Vec<HeaderAndAnchor> = {
        let mut st = c
            .prepare(
                "SELECT r.session_id, r.run_id, r.record_json, \
                 (SELECT e.invocation_id FROM runtime_events e WHERE e.session_id = r.session_id \
                  AND e.run_id = r.run_id ORDER BY e.event_seq LIMIT 1), \
                 (SELECT e.event_id FROM runtime_events e WHERE e.session_id = r.session_id \
                  AND e.run_id = r.run_id ORDER BY e.event_seq LIMIT 1) \
                 FROM core_agent_runs r ORDER BY r.created_at, r.run_id",
            )
            .map_err(sql_err)?;
        let v = st
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .map_err(sql_err)?
            .collect::<Result<_, _>>()
            .map_err(sql_err)?;
        v
    };
    for (session, run, record, invocation, anchor) in rows {
        let h = match serde_json::from_str::<Value>(&record) {
            Ok(Value::Object(h)) => h,
            // Maka refuses the whole migration on a header it cannot read.
            _ => return Err(format!("cannot migrate the header of {session}/{run}")),
        };
        let opening = opening_from_header(&h);
        let turn = h["turnId"].as_str().unwrap_or_default().to_owned();
        let created = h["createdAt"].as_i64().unwrap_or(0);
        if let (Some(invocation), Some(anchor)) = (invocation, anchor) {
            c.execute(
                "INSERT OR IGNORE INTO runtime_legacy_invocation_openings (invocation_id, \
                 session_id, run_id, turn_id, opened_at, opening_json, anchor_event_id) \
                 VALUES (?1,?2,?3,?4,?5,?6,?7)",
                params![
                    invocation,
                    session,
                    run,
                    turn,
                    created,
                    serde_json::to_string(&opening).unwrap(),
                    anchor
                ],
            )
            .map_err(sql_err)?;
            done.shelved += 1;
            continue;
        }
        let invocation = h
            .get("invocationId")
            .and_then(Value::as_str)
            .unwrap_or(&run)
            .to_owned();
        let ids = Ids {
            session: &session,
            invocation: &invocation,
            run: &run,
            turn: &turn,
        };
        let open = opening_event(&format!("invocation_opened:{run}"), ids, created, opening);
        insert_event(c, &open, 1)?;
        done.opened += 1;
        let status = h["status"].as_str().unwrap_or_default();
        if matches!(status, "completed" | "failed" | "cancelled") {
            let ts = h["completedAt"]
                .as_i64()
                .or_else(|| h["updatedAt"].as_i64())
                .unwrap_or(created);
            let end =
                synthetic_terminal(&format!("invocation_terminal:{run}"), ids, status, ts, &h);
            insert_event(c, &end, 2)?;
            done.terminals += 1;
        }
    }
    Ok(done)
}

/// The core-execution step that follows: the header column goes, with the index and
/// the two retired message tables.
fn core_execution_7(c: &Connection) -> Result<(), String> {
    c.execute_batch(
        "DROP INDEX IF EXISTS core_agent_runs_identity;
         ALTER TABLE core_agent_runs DROP COLUMN record_json;
         DROP TABLE IF EXISTS core_message_receipts;
         DROP TABLE IF EXISTS core_message_host_epochs;
         CREATE TABLE IF NOT EXISTS core_client_capability_session_grants (
           session_id TEXT NOT NULL, provider_id TEXT NOT NULL, contract_id TEXT NOT NULL,
           server_id TEXT NOT NULL, tool_name TEXT NOT NULL, capability TEXT NOT NULL,
           scope_kind TEXT NOT NULL, scope_value TEXT NOT NULL, granted_at INTEGER NOT NULL,
           record_json TEXT NOT NULL,
           PRIMARY KEY (session_id, provider_id, contract_id, capability, scope_kind, scope_value));
         CREATE INDEX IF NOT EXISTS core_client_capability_session_grants_session
           ON core_client_capability_session_grants(session_id, granted_at);",
    )
    .map_err(sql_err)
}

/// Migrates `db` in place the way Maka's runtime migration 16 and the core-execution
/// migration after it do (in one transaction): registry `runtime` = 16 and
/// `core_execution` = 7, `user_version` 16, `core_agent_runs.record_json` gone.
pub fn migrate_runs_onto_spine(db: &Path) -> Result<SpineMigration, String> {
    migrate(db, true)
}

/// Runtime migration 16 alone (the runtime scope migrates independently): every run
/// gets its opening fact, the headers stay readable (`core_execution` unchanged).
pub fn migrate_runtime_16(db: &Path) -> Result<SpineMigration, String> {
    migrate(db, false)
}

fn migrate(db: &Path, drop_headers: bool) -> Result<SpineMigration, String> {
    let mut c = Connection::open(db).map_err(sql_err)?;
    c.execute_batch("PRAGMA foreign_keys = OFF")
        .map_err(sql_err)?;
    let tx = c.transaction().map_err(sql_err)?;
    runtime_schema_13_to_16(&tx)?;
    let done = if has_table(&tx, "core_agent_runs")?
        && has_column(&tx, "core_agent_runs", "record_json")?
    {
        backfill_openings(&tx)?
    } else {
        SpineMigration::default()
    };
    if drop_headers && has_column(&tx, "core_agent_runs", "record_json")? {
        core_execution_7(&tx)?;
    }
    if has_table(&tx, "operational_schema_migrations")? {
        tx.execute(
            "UPDATE operational_schema_migrations SET version = 16 WHERE scope = 'runtime'",
            [],
        )
        .map_err(sql_err)?;
        if drop_headers {
            tx.execute(
                "UPDATE operational_schema_migrations SET version = 7 \
                 WHERE scope = 'core_execution'",
                [],
            )
            .map_err(sql_err)?;
        }
    }
    tx.execute_batch("PRAGMA user_version = 16")
        .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    Ok(done)
}

/// One run written the new way (see [`add_spine_run`]).
#[derive(Debug, Clone)]
pub struct SpineRun {
    pub session: String,
    pub run: String,
    pub turn: String,
    /// Event ids in event_seq order.
    pub events: Vec<String>,
}

/// How a new-way run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A `completed` terminal event.
    Completed,
    /// No terminal event: the run is still open (stuck, once its host is gone).
    Open,
}

/// Appends a run written the new way to `session`: its first event an opening fact,
/// then a user message, a model reply carrying kinds only newer Maka writes (an event
/// with `actions.formAnswerAccepted`), and a terminal event unless `ending` is `Open`.
/// No `core_agent_runs` header is written; `with_row` adds the bare row a newer
/// agent-run store keeps (no `record_json`), only where that column is gone.
pub fn add_spine_run(
    db: &Path,
    session: &str,
    name: &str,
    ts: i64,
    ending: Ending,
    with_row: bool,
) -> Result<SpineRun, String> {
    let c = Connection::open(db).map_err(sql_err)?;
    let run = format!("{name}-run");
    let turn = format!("{name}-turn");

    let opening = canonical(json!({
        "kind": "invocation_opened",
        "protocol": "invocation_opened_v1",
        "route": {"provenance": "runtime", "backendKind": "ai-sdk",
                  "llmConnectionId": "connection-1", "llmConnectionSlug": "mock-main",
                  "modelId": "default"},
        "configuration": {"cwd": "/home/dev/project", "permissionMode": "ask",
                          "collaborationMode": "agent", "orchestrationMode": "default",
                          "orchestrationSource": "session", "toolMode": "direct"},
        "root": {"kind": "user"},
        "source": {"kind": "fresh"},
    }));
    let ids = Ids {
        session,
        invocation: &run,
        run: &run,
        turn: &turn,
    };
    let mut events = vec![opening_event(&format!("{name}-opened"), ids, ts, opening)];
    let mut user = ids.envelope(&format!("{name}-user"), ts + 1);
    user["role"] = json!("user");
    user["author"] = json!("user");
    user["content"] = json!({"kind": "text", "text": "hello from a newer Maka"});
    events.push(canonical(user));
    let mut form = ids.envelope(&format!("{name}-form"), ts + 2);
    form["role"] = json!("system");
    form["author"] = json!("system");
    form["actions"] = json!({"formAnswerAccepted": {"requestId": format!("{name}-form-request")}});
    events.push(canonical(form));
    let mut reply = ids.envelope(&format!("{name}-reply"), ts + 3);
    reply["role"] = json!("model");
    reply["author"] = json!("agent");
    reply["content"] = json!({"kind": "text", "text": "hello"});
    events.push(canonical(reply));
    if ending == Ending::Completed {
        let mut end = ids.envelope(&format!("{name}-end"), ts + 4);
        end["role"] = json!("system");
        end["author"] = json!("system");
        end["status"] = json!("completed");
        end["actions"] = json!({"endInvocation": true, "stateDelta": {"stopReason": "end_turn"}});
        events.push(canonical(end));
    }
    for (i, e) in events.iter().enumerate() {
        insert_event(&c, e, i as i64 + 1)?;
    }
    if with_row && !has_column(&c, "core_agent_runs", "record_json")? {
        c.execute(
            "INSERT INTO core_agent_runs (session_id, run_id, created_at) VALUES (?1, ?2, ?3)",
            params![session, run, ts],
        )
        .map_err(sql_err)?;
    }
    Ok(SpineRun {
        session: session.to_owned(),
        run,
        turn,
        events: events
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect(),
    })
}

/// The first session of a workspace (by id) that has `session_metadata`.
pub fn first_session(db: &Path) -> String {
    let c = Connection::open(db).unwrap();
    c.query_row(
        "SELECT session_id FROM session_metadata ORDER BY session_id LIMIT 1",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// A copy of `workspace`'s database alone, migrated onto the spine, with a completed
/// new-way run added to its first session: the directory and the database.
pub fn spine_copy(workspace: &Path) -> (tempfile::TempDir, std::path::PathBuf, SpineMigration) {
    let (dir, db) = super::copy_db(workspace);
    let done = migrate_runs_onto_spine(&db).unwrap_or_else(|e| panic!("{}: {e}", db.display()));
    (dir, db, done)
}
