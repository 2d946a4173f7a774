//! The legacy checks of v0.1.11 and main: released Automation and Plan Reminder
//! tables (`sqlite-legacy-scheduling.ts`) and the cutover/import metadata that main
//! retires (`operational-state-store.ts`, `operational-target-schema.ts`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::compose::table_of;
use super::Refusal;
use crate::db::startup::{Cell, LegacyRow, StartupFacts};

const AUTOMATION_TABLES: &[&str] = &[
    "automation_authority_state",
    "automation_definitions",
    "automation_pending_fires",
];

/// The last workflow schema that kept Plan Reminders in `workflow_plan_reminders`.
const LAST_PLAN_REMINDER_WORKFLOW: i64 = 5;

/// Maka refuses a scheduling catalog above this many records.
const CATALOG_MAX: usize = 256;

/// The validation evidence each released cutover writer recorded: store name → the
/// exact key set of its `validation_json` (fact of main's retirement check).
const CUTOVER_EVIDENCE: &[(&str, &[&str])] = &[
    (
        "agent_runs",
        &[
            "agent_runs",
            "agent_run_events",
            "agent_run_projections",
            "root_turn_admissions",
            "root_source_message_proofs",
        ],
    ),
    ("artifact_metadata", &["records"]),
    ("automations", &["automations"]),
    (
        "interactions",
        &["interaction_requests", "interaction_outcomes"],
    ),
    ("message_receipts", &["host_epochs", "message_receipts"]),
    (
        "session_metadata",
        &[
            "session_metadata",
            "session_metadata_labels",
            "session_metadata_import_sources",
            "session_metadata_tombstones",
            "subagent_spawns",
            "agent_graph_intent_claims",
            "agent_graph_schedule_updates",
            "agent_graph_operator_provisions",
            "agent_graph_client_projections",
            "agent_graph_client_operator_projections",
            "agent_graph_client_terminal_activity",
            "agent_graph_client_applied_records",
            "agent_graph_supervisor_wakes",
            "agent_graph_supervisor_wake_attempts",
            "sandbox_boundary_log",
        ],
    ),
    ("shell_runs", &["shell_runs"]),
    ("usage_pricing", &["llm", "tools", "pricing"]),
    ("workflow_deep_research", &["sessions", "events"]),
    ("workflow_plan", &["sessions", "events"]),
    ("workflow_plan_reminders", &["reminders"]),
    ("workflow_task_ledger", &["sessions", "events"]),
];

fn refuse(reason: &'static str, store: &str, object: Option<&str>, msg: String) -> Refusal {
    Refusal {
        reason,
        store: store.to_owned(),
        object: object.map(str::to_owned),
        maka_message: msg,
        version: None,
        supported_version: None,
    }
}

/// `assertLegacySchedulingSchema`: the released scheduling tables agree with the
/// registry versions (`versions` holds `automation` and `workflow` where registered).
pub fn scheduling_schema(f: &StartupFacts, versions: &BTreeMap<&str, i64>) -> Option<Refusal> {
    let automation = versions.get("automation").copied();
    let present = AUTOMATION_TABLES.iter().filter(|t| f.has_table(t)).count();
    let incomplete = "legacy_schema_incomplete";
    if present > 0 && automation.is_none() {
        return Some(refuse(
            incomplete,
            "automation",
            None,
            "Legacy Automation schema registry is missing".into(),
        ));
    }
    if let Some(v) = automation {
        if (v != 1 && v != 2) || present != AUTOMATION_TABLES.len() {
            return Some(refuse(
                incomplete,
                "automation",
                None,
                "Legacy Automation schema is incomplete".into(),
            ));
        }
    }
    if let Some(w) = versions.get("workflow").copied() {
        let reminders = f.has_table("workflow_plan_reminders");
        if w <= LAST_PLAN_REMINDER_WORKFLOW && !reminders {
            return Some(refuse(
                incomplete,
                "workflow",
                Some("table:workflow_plan_reminders"),
                "The released Workflow schema is missing workflow_plan_reminders".into(),
            ));
        }
        if w > LAST_PLAN_REMINDER_WORKFLOW && reminders {
            return Some(refuse(
                incomplete,
                "workflow",
                Some("table:workflow_plan_reminders"),
                "The current Workflow schema still contains released Plan Reminder state".into(),
            ));
        }
    }
    None
}

/// `planLegacyScheduledTasks`: every released Plan Reminder converts, and a released
/// Automation catalog is empty.
pub fn plan_scheduled_tasks(f: &StartupFacts, versions: &BTreeMap<&str, i64>) -> Option<Refusal> {
    let refused = |m: String| Some(refuse("migration_refused", "workflow", None, m));
    let mut tasks = 0;
    if let Some(rows) = &f.plan_reminders {
        match rows {
            Err(e) => return refused(e.clone()),
            Ok(rows) => {
                for row in rows {
                    if let Err(m) = reminder(row) {
                        return refused(m);
                    }
                }
                tasks = rows.len();
            }
        }
    }
    if versions.get("automation") == Some(&1) {
        let auto = |m: String| Some(refuse("migration_refused", "automation", None, m));
        if !f.automation_durable {
            return Some(refuse(
                "legacy_schema_incomplete",
                "automation",
                Some("table:automation_definitions"),
                "The released Automation schema is missing durable".into(),
            ));
        }
        if let Some(id) = &f.automation_first {
            return auto(format!(
                "Released Automation {} cannot be migrated without losing its configuration; \
                 reopen this workspace with the previous Maka release and remove or export \
                 Automation before upgrading",
                id.display()
            ));
        }
        if f.automation_pending_fire {
            return auto("Released Automation has an in-flight fire".into());
        }
    }
    if tasks > CATALOG_MAX {
        return refused(format!(
            "Released scheduling catalog has {tasks} records, exceeding the supported \
             {CATALOG_MAX}; reopen this workspace with the previous Maka release and reduce \
             the catalog before upgrading"
        ));
    }
    None
}

fn cell<'a>(row: &'a LegacyRow, name: &str) -> &'a Cell {
    static NULL: Cell = Cell::Null;
    row.iter()
        .find(|(n, _)| n == name)
        .map_or(&NULL, |(_, c)| c)
}

/// JavaScript's `Number.isSafeInteger` on a JSON value.
fn js_integer(v: &Value) -> Option<i64> {
    const MAX: f64 = 9_007_199_254_740_991.0;
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() <= MAX).then_some(f as i64)
}

/// The checks of `decodeLegacyReminder` that can refuse (the cron expression's own
/// canonicalization is not modelled).
fn reminder(row: &LegacyRow) -> Result<(), String> {
    let label = "legacy Plan Reminder";
    let invalid = |what: &str| format!("Invalid {what}");
    let json = cell(row, "record_json")
        .text()
        .ok_or_else(|| format!("Invalid {label} record JSON"))?;
    let source: Value =
        serde_json::from_str(json).map_err(|_| format!("Invalid {label} record JSON"))?;
    let source = source.as_object().ok_or_else(|| invalid(label))?;
    let get = |k: &str| source.get(k).unwrap_or(&Value::Null);
    let text = |k: &str, what: &str| -> Result<String, String> {
        get(k)
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid(what))
    };
    let integer = |k: &str, what: &str| js_integer(get(k)).ok_or_else(|| invalid(what));
    let id = text("id", "legacy Plan Reminder id")?;
    let created = integer("createdAt", "legacy Plan Reminder createdAt")?;
    let updated = integer("updatedAt", "legacy Plan Reminder updatedAt")?;
    if cell(row, "reminder_id").text() != Some(id.as_str())
        || cell(row, "created_at").safe_integer() != Some(created)
        || cell(row, "updated_at").safe_integer() != Some(updated)
    {
        return Err(format!(
            "Legacy Plan Reminder indexes contradict record JSON: {id}"
        ));
    }
    let status = get("status").as_str().unwrap_or("");
    if !["scheduled", "paused", "completed"].contains(&status) {
        return Err("Invalid enum value".into());
    }
    let enabled = get("enabled")
        .as_bool()
        .ok_or_else(|| invalid("legacy Plan Reminder enabled"))?;
    let mut runs = Vec::new();
    if let Some(v) = source.get("runs") {
        let list = v
            .as_array()
            .ok_or_else(|| invalid("legacy Plan Reminder runs"))?;
        for r in list {
            runs.push(run(r)?);
        }
    }
    let last = match source.get("lastRun") {
        None => runs.first().cloned(),
        Some(v) => Some(run(v)?),
    };
    if let (Some(first), Some(last)) = (runs.first(), &last) {
        if first != last {
            return Err(format!(
                "Legacy Plan Reminder lastRun contradicts runs: {id}"
            ));
        }
    }
    text("title", "legacy Plan Reminder title")?;
    text("note", "legacy Plan Reminder note")?;
    let schedule = get("schedule")
        .as_object()
        .ok_or_else(|| invalid("legacy Plan Reminder schedule"))?;
    let sget = |k: &str| schedule.get(k).unwrap_or(&Value::Null);
    let start =
        || js_integer(sget("startAt")).ok_or_else(|| invalid("legacy Plan Reminder startAt"));
    match sget("kind").as_str() {
        Some("once") => {
            js_integer(sget("runAt")).ok_or_else(|| invalid("legacy Plan Reminder runAt"))?;
        }
        Some("recurring") => {
            let r = sget("recurrence").as_str().unwrap_or("");
            if !["daily", "weekly", "monthly"].contains(&r) {
                return Err("Invalid enum value".into());
            }
            start()?;
        }
        Some("cron") => {
            sget("expression")
                .as_str()
                .ok_or_else(|| invalid("legacy Plan Reminder cron expression"))?;
            start()?;
        }
        _ => return Err(invalid("legacy Plan Reminder schedule")),
    }
    match source.get("delivery") {
        None | Some(Value::Null) => {}
        Some(d) => {
            let d = d
                .as_object()
                .ok_or_else(|| invalid("legacy Plan Reminder delivery"))?;
            let channel = d.get("channel").and_then(Value::as_str);
            if channel == Some("bot") && d.get("platform").and_then(Value::as_str).is_some() {
                d.get("chatId")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid("legacy Plan Reminder chat id"))?;
            } else if channel != Some("local") {
                return Err(invalid("legacy Plan Reminder delivery"));
            }
        }
    }
    if status == "scheduled" && enabled {
        let next = get("nextRunAt");
        if !next.is_null() && js_integer(next).is_none() {
            return Err(invalid("nextRunAt"));
        }
    }
    integer("runCount", "legacy Plan Reminder runCount")?;
    Ok(())
}

/// The fields of a released reminder run that `sameRun` compares.
#[derive(Clone, Debug, PartialEq)]
struct Run {
    id: String,
    at: i64,
    outcome: String,
    message: String,
}

fn run(v: &Value) -> Result<Run, String> {
    let o = v
        .as_object()
        .ok_or_else(|| "Invalid legacy Plan Reminder run".to_owned())?;
    if o.contains_key("blockReason") {
        return Err("Legacy Plan Reminder block reason cannot be preserved".into());
    }
    let text = |k: &str, what: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("Invalid {what}"))
    };
    let id = text("id", "legacy Plan Reminder run id")?;
    let at = o
        .get("at")
        .and_then(js_integer)
        .ok_or_else(|| "Invalid legacy Plan Reminder run at".to_owned())?;
    let outcome = match o.get("status").and_then(Value::as_str) {
        Some("triggered") => "ok".to_owned(),
        Some(s @ ("blocked" | "failed")) => s.to_owned(),
        _ => return Err("Invalid enum value".into()),
    };
    let message = text("message", "legacy Plan Reminder run message")?;
    Ok(Run {
        id,
        at,
        outcome,
        message,
    })
}

/// The released shapes of the legacy metadata tables, from the catalog (v0.1.3 writes
/// all three exactly as main recognizes them).
fn released_shape(table: &str) -> BTreeMap<String, String> {
    crate::release::generation_of("v0.1.3")
        .map(|g| {
            g.fresh()
                .iter()
                .filter(|(_, sig)| table_of(sig) == table)
                .map(|(k, s)| (k.clone(), s.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn shape(f: &StartupFacts, table: &str) -> Option<Refusal> {
    let canonical = released_shape(table);
    let observed: BTreeMap<&str, &str> = f
        .objects
        .iter()
        .filter(|o| table_of(&o.signature) == table)
        .map(|o| (o.key.as_str(), o.signature.as_str()))
        .collect();
    let r = |key: &str, msg: String| {
        Some(refuse(
            "legacy_metadata_unfamiliar",
            "legacy_metadata",
            Some(key),
            msg,
        ))
    };
    for (key, sig) in &canonical {
        match observed.get(key.as_str()) {
            None => {
                return r(
                    key,
                    format!(
                        "Legacy operational metadata object {key} is missing its released shape"
                    ),
                )
            }
            Some(s) if s != sig => {
                return r(
                    key,
                    format!(
                        "Legacy operational metadata object {key} has an unfamiliar released shape"
                    ),
                )
            }
            _ => {}
        }
    }
    if let Some(key) = observed.keys().find(|k| !canonical.contains_key(**k)) {
        return r(
            key,
            format!("Legacy operational metadata table {table} carries an unexpected object {key}"),
        );
    }
    None
}

/// `retireCompletedLegacyMigrationMetadata` (main): each legacy table present has its
/// released shape and only completed, valid rows.
pub fn retire_metadata(f: &StartupFacts) -> Option<Refusal> {
    let nonempty = |c: &Cell| c.text().is_some_and(|s| !s.is_empty());
    let bad = |reason: &'static str, table: &str, msg: &str| {
        Some(refuse(
            reason,
            "legacy_metadata",
            Some(&format!("table:{table}")),
            msg.to_owned(),
        ))
    };
    let unreadable = |table: &str, e: &str| {
        Some(refuse(
            "legacy_metadata_unfamiliar",
            "legacy_metadata",
            Some(&format!("table:{table}")),
            e.to_owned(),
        ))
    };
    if let Some(rows) = &f.cutover_journal {
        if let Some(x) = shape(f, "cutover_journal") {
            return Some(x);
        }
        let rows = match rows {
            Ok(r) => r,
            Err(e) => return unreadable("cutover_journal", e),
        };
        for row in rows {
            let incomplete = "Legacy operational cutover journal is incomplete or invalid";
            let evidence = "Legacy operational cutover journal has invalid validation evidence";
            let keys = cell(row, "store_name")
                .text()
                .and_then(|s| CUTOVER_EVIDENCE.iter().find(|(n, _)| *n == s))
                .map(|(_, k)| *k);
            let Some(keys) = keys else {
                return bad("legacy_cutover_invalid", "cutover_journal", incomplete);
            };
            if !nonempty(cell(row, "source_path"))
                || !nonempty(cell(row, "source_fingerprint"))
                || cell(row, "state").text() != Some("completed")
                || cell(row, "started_at").non_negative_integer().is_none()
                || cell(row, "completed_at").non_negative_integer().is_none()
            {
                return bad("legacy_cutover_invalid", "cutover_journal", incomplete);
            }
            let Some(json) = cell(row, "validation_json").text() else {
                return bad("legacy_cutover_invalid", "cutover_journal", incomplete);
            };
            let ok = serde_json::from_str::<Value>(json)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .is_some_and(|o| {
                    o.values().all(|v| js_integer(v).is_some_and(|n| n >= 0))
                        && o.len() == keys.len()
                        && o.keys().all(|k| keys.contains(&k.as_str()))
                });
            if !ok {
                return bad("legacy_cutover_invalid", "cutover_journal", evidence);
            }
        }
    }
    let import = |row: &LegacyRow| {
        nonempty(cell(row, "source_path"))
            && nonempty(cell(row, "fingerprint"))
            && cell(row, "imported_at").non_negative_integer().is_some()
    };
    if let Some(rows) = &f.runtime_import_sources {
        if let Some(x) = shape(f, "runtime_import_sources") {
            return Some(x);
        }
        let rows = match rows {
            Ok(r) => r,
            Err(e) => return unreadable("runtime_import_sources", e),
        };
        if !rows.iter().all(import) {
            return bad(
                "legacy_import_invalid",
                "runtime_import_sources",
                "Legacy operational import source is incomplete or invalid",
            );
        }
    }
    if let Some(rows) = &f.session_import_sources {
        if let Some(x) = shape(f, "session_metadata_import_sources") {
            return Some(x);
        }
        let rows = match rows {
            Ok(r) => r,
            Err(e) => return unreadable("session_metadata_import_sources", e),
        };
        for row in rows {
            if !import(row) {
                return bad(
                    "legacy_import_invalid",
                    "session_metadata_import_sources",
                    "Legacy operational import source is incomplete or invalid",
                );
            }
            if !nonempty(cell(row, "session_id"))
                || cell(row, "session_exists").safe_integer() != Some(1)
            {
                return bad(
                    "legacy_import_invalid",
                    "session_metadata_import_sources",
                    "Legacy session import source is incomplete or invalid",
                );
            }
        }
    }
    None
}
