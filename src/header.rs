//! The AgentRun header (`core_agent_runs.record_json`), decoded as strictly as Maka's
//! `decodeAgentRunHeader` reads it. Pure.

use serde_json::{Map, Value};

/// Header status (Maka's six AgentRun statuses).
pub use crate::ledger::terminal::RunStatus as HeaderStatus;

/// Parses a stored status, folding the legacy `waiting_permission` as Maka does on read.
pub fn parse_status(s: &str) -> Option<HeaderStatus> {
    if s == "waiting_permission" {
        return Some(HeaderStatus::WaitingForUser);
    }
    HeaderStatus::from_maka(s)
}

/// A decoded run header: the fields the doctor reads, plus the whole object (in its
/// stored key order) for patching.
#[derive(Clone, Debug, PartialEq)]
pub struct RunHeader {
    pub run_id: String,
    pub session_id: String,
    pub turn_id: String,
    pub invocation_id: Option<String>,
    pub status: HeaderStatus,
    pub created_at: f64,
    pub updated_at: f64,
    pub completed_at: Option<f64>,
    pub failure_class: Option<String>,
    pub abort_source: Option<String>,
    pub tool_mode: Option<String>,
    pub trace_write_error: Option<String>,
    pub record: Map<String, Value>,
}

const REQUIRED: &[&str] = &[
    "runId",
    "sessionId",
    "turnId",
    "status",
    "backendKind",
    "llmConnectionSlug",
    "modelId",
    "cwd",
    "permissionMode",
    "createdAt",
    "updatedAt",
];

const OPTIONAL: &[&str] = &[
    "invocationId",
    "completedAt",
    "parentRunId",
    "resumedFromRunId",
    "retriedFromRunId",
    "agentId",
    "agentName",
    "parentTurnId",
    "retriedFromTurnId",
    "regeneratedFromTurnId",
    "branchOfTurnId",
    "parentSessionId",
    "workspaceIdentity",
    "continuationSource",
    "scheduledTaskId",
    "legacyAutomationId",
    "goalId",
    "agentGraphWakeId",
    "agentGraphWakeAttemptId",
    "rootExecutionKind",
    "failureClass",
    "failureMessage",
    "abortSource",
    "traceWriteError",
    "collaborationMode",
    "orchestrationMode",
    "orchestrationSource",
    "agentSwarmAuthorization",
    "toolMode",
    "runComposition",
];

const OPTIONAL_STRINGS: &[&str] = &[
    "invocationId",
    "parentRunId",
    "resumedFromRunId",
    "retriedFromRunId",
    "agentId",
    "agentName",
    "parentTurnId",
    "retriedFromTurnId",
    "regeneratedFromTurnId",
    "branchOfTurnId",
    "parentSessionId",
    "workspaceIdentity",
    "scheduledTaskId",
    "legacyAutomationId",
    "goalId",
    "agentGraphWakeId",
    "agentGraphWakeAttemptId",
    "failureClass",
    "failureMessage",
    "abortSource",
    "traceWriteError",
];

fn enum_ok(v: Option<&Value>, allowed: &[&str]) -> bool {
    match v {
        None => true,
        Some(Value::String(s)) => allowed.contains(&s.as_str()),
        Some(_) => false,
    }
}

/// Maka's safe id pattern for run and session ids: `^[A-Za-z0-9_-]{1,128}$`.
pub fn is_safe_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Decodes `record_json` of the row `(session_id, run_id)`.
pub fn decode_header(
    record_json: &str,
    session_id: &str,
    run_id: &str,
) -> Result<RunHeader, String> {
    let value: Value =
        serde_json::from_str(record_json).map_err(|e| format!("record is not JSON: {e}"))?;
    let Value::Object(mut record) = value else {
        return Err("record is not a JSON object".into());
    };
    // Legacy spelling Maka renames on read.
    if record.contains_key("automationId") && !record.contains_key("legacyAutomationId") {
        if let Some(v) = record.remove("automationId") {
            record.insert("legacyAutomationId".into(), v);
        }
    }
    for key in record.keys() {
        if !REQUIRED.contains(&key.as_str()) && !OPTIONAL.contains(&key.as_str()) {
            return Err(format!("unknown key `{key}`"));
        }
    }
    for key in REQUIRED {
        if !record.contains_key(*key) {
            return Err(format!("missing key `{key}`"));
        }
    }
    let s = |k: &str| record.get(k).and_then(Value::as_str).map(str::to_owned);
    let num = |k: &str| record.get(k).and_then(Value::as_f64);
    for key in [
        "runId",
        "sessionId",
        "turnId",
        "llmConnectionSlug",
        "modelId",
        "cwd",
    ] {
        if s(key).is_none() {
            return Err(format!("`{key}` is not a string"));
        }
    }
    for key in OPTIONAL_STRINGS {
        if record.get(*key).is_some_and(|v| !v.is_string()) {
            return Err(format!("`{key}` is not a string"));
        }
    }
    let status = s("status")
        .and_then(|v| parse_status(&v))
        .ok_or_else(|| "`status` is not a run status".to_owned())?;
    if !enum_ok(record.get("backendKind"), &["ai-sdk", "fake"]) {
        return Err("`backendKind` is not a backend kind".into());
    }
    if !enum_ok(
        record.get("permissionMode"),
        &["explore", "ask", "bypass", "execute"],
    ) {
        return Err("`permissionMode` is not a permission mode".into());
    }
    let enums: [(&str, &[&str]); 6] = [
        ("collaborationMode", &["agent", "plan"]),
        ("orchestrationMode", &["default", "swarm", "graph"]),
        ("orchestrationSource", &["session", "turn_override"]),
        (
            "agentSwarmAuthorization",
            &["none", "session_mode", "turn_override"],
        ),
        ("rootExecutionKind", &["context_compact"]),
        ("toolMode", &["direct", "code_mode"]),
    ];
    for (key, allowed) in enums {
        if !enum_ok(record.get(key), allowed) {
            return Err(format!("`{key}` has an unknown value"));
        }
    }
    let origins = [
        "scheduledTaskId",
        "legacyAutomationId",
        "goalId",
        "agentGraphWakeId",
    ];
    if origins.iter().filter(|k| record.contains_key(**k)).count() > 1 {
        return Err(
            "more than one of scheduledTaskId, legacyAutomationId, goalId, agentGraphWakeId".into(),
        );
    }
    let created_at = num("createdAt").ok_or("`createdAt` is not a number")?;
    let updated_at = num("updatedAt").ok_or("`updatedAt` is not a number")?;
    let completed_at = match record.get("completedAt") {
        None => None,
        Some(v) => Some(v.as_f64().ok_or("`completedAt` is not a number")?),
    };
    for key in ["continuationSource", "runComposition"] {
        if record.get(key).is_some_and(|v| !v.is_object()) {
            return Err(format!("`{key}` is not an object"));
        }
    }
    let header = RunHeader {
        run_id: s("runId").unwrap_or_default(),
        session_id: s("sessionId").unwrap_or_default(),
        turn_id: s("turnId").unwrap_or_default(),
        invocation_id: s("invocationId"),
        status,
        created_at,
        updated_at,
        completed_at,
        failure_class: s("failureClass"),
        abort_source: s("abortSource"),
        tool_mode: s("toolMode"),
        trace_write_error: s("traceWriteError"),
        record,
    };
    if header.run_id != run_id || header.session_id != session_id {
        return Err("the record's runId/sessionId differ from the row".into());
    }
    if !is_safe_id(run_id) || !is_safe_id(session_id) {
        return Err("run or session id is not a safe id (A-Z a-z 0-9 _ -, 1..128)".into());
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"runId":"r1","invocationId":"r1","sessionId":"s1","turnId":"t1","status":"running","backendKind":"ai-sdk","llmConnectionSlug":"x","modelId":"m","cwd":"/","permissionMode":"ask","createdAt":1,"updatedAt":2}"#;

    #[test]
    fn decodes_a_running_header() {
        let h = decode_header(OK, "s1", "r1").unwrap();
        assert_eq!(h.status, HeaderStatus::Running);
        assert_eq!(h.invocation_id.as_deref(), Some("r1"));
        assert_eq!(h.record.keys().next().map(String::as_str), Some("runId"));
    }

    #[test]
    fn rejects_unknown_keys_bad_enums_and_row_mismatch() {
        assert!(decode_header(&OK.replace("\"cwd\"", "\"cwdx\""), "s1", "r1").is_err());
        assert!(decode_header(&OK.replace("running", "paused"), "s1", "r1").is_err());
        assert!(decode_header(OK, "s1", "r2").is_err());
        assert!(decode_header("[]", "s1", "r1").is_err());
    }

    #[test]
    fn folds_legacy_status() {
        let h = decode_header(&OK.replace("running", "waiting_permission"), "s1", "r1").unwrap();
        assert_eq!(h.status, HeaderStatus::WaitingForUser);
    }
}

/// Maka's strict read of one `core_agent_run_events` record (`decodeAgentRunEvent`
/// plus the identity check against its run): exactly `type, id, runId, sessionId,
/// turnId, ts` and optionally `message`, `data`; a non-blank `type`; a finite `ts`;
/// `data` an object; ids equal to the run's. Maka's strict start-up recovery throws on
/// the first record that fails, so Maka does not start.
pub fn check_run_event(
    record_json: &str,
    session_id: &str,
    run_id: &str,
    turn_id: Option<&str>,
) -> Result<(), String> {
    // The fast path: one borrowed pass. Anything it refuses (including a repeated key,
    // which JSON.parse accepts with its last value) is judged again by the exact path.
    if let Ok(r) = serde_json::from_str::<RunEventRecord<'_>>(record_json) {
        let ok = !r.ty.trim().is_empty()
            && r.ts.is_finite()
            && r.message.is_none_or(|m| m.get().starts_with('"'))
            && r.data.is_none_or(|d| d.get().starts_with('{'))
            && r.session_id == session_id
            && r.run_id == run_id
            && turn_id.is_none_or(|t| r.turn_id == t);
        if ok {
            return Ok(());
        }
    }
    check_run_event_exact(record_json, session_id, run_id, turn_id)
}

/// A run event record's top level, borrowed. `message` and `data` stay raw so that a
/// `null` (which Maka refuses) is seen as present.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RunEventRecord<'a> {
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    #[allow(dead_code)]
    id: std::borrow::Cow<'a, str>,
    #[serde(rename = "runId", borrow)]
    run_id: std::borrow::Cow<'a, str>,
    #[serde(rename = "sessionId", borrow)]
    session_id: std::borrow::Cow<'a, str>,
    #[serde(rename = "turnId", borrow)]
    turn_id: std::borrow::Cow<'a, str>,
    ts: f64,
    #[serde(default, borrow, deserialize_with = "raw_present")]
    message: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow, deserialize_with = "raw_present")]
    data: Option<&'a serde_json::value::RawValue>,
}

/// A present key, whatever its value (`null` included).
fn raw_present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<&'de serde_json::value::RawValue>, D::Error> {
    <&serde_json::value::RawValue as serde::Deserialize>::deserialize(d).map(Some)
}

/// The exact check, with a reason: top-level keys only, values left unparsed.
fn check_run_event_exact(
    record_json: &str,
    session_id: &str,
    run_id: &str,
    turn_id: Option<&str>,
) -> Result<(), String> {
    use serde_json::value::RawValue;
    // Top-level keys only, values left unparsed: this runs on every run event of the
    // workspace, and `data` can be large. A repeated key keeps its last value, as in
    // `JSON.parse`.
    let map: std::collections::HashMap<String, &RawValue> = serde_json::from_str(record_json)
        .map_err(|e| format!("record is not a JSON object: {e}"))?;
    const KEYS: &[&str] = &[
        "type",
        "id",
        "runId",
        "sessionId",
        "turnId",
        "ts",
        "message",
        "data",
    ];
    let mut unknown: Vec<&String> = map.keys().filter(|k| !KEYS.contains(&k.as_str())).collect();
    unknown.sort();
    if let Some(k) = unknown.first() {
        return Err(format!("unknown key `{k}`"));
    }
    let string = |k: &str| -> Option<String> {
        map.get(k)
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
    };
    if string("type").is_none_or(|t| t.trim().is_empty()) {
        return Err("`type` is not a non-blank string".into());
    }
    for k in ["id", "runId", "sessionId", "turnId"] {
        if string(k).is_none() {
            return Err(format!("`{k}` is not a string"));
        }
    }
    let ts = map
        .get("ts")
        .and_then(|raw| serde_json::from_str::<f64>(raw.get()).ok());
    if !ts.is_some_and(f64::is_finite) {
        return Err("`ts` is not a finite number".into());
    }
    if map.contains_key("message") && string("message").is_none() {
        return Err("`message` is not a string".into());
    }
    if map
        .get("data")
        .is_some_and(|raw| !raw.get().trim_start().starts_with('{'))
    {
        return Err("`data` is not an object".into());
    }
    if string("sessionId").as_deref() != Some(session_id)
        || string("runId").as_deref() != Some(run_id)
    {
        return Err("its sessionId/runId differ from the run's".into());
    }
    if let Some(t) = turn_id {
        if string("turnId").as_deref() != Some(t) {
            return Err("its turnId differs from the run header's".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod run_event_tests {
    use super::check_run_event;

    #[test]
    fn strict_run_event_shape_and_identity() {
        let ok =
            r#"{"type":"run_started","id":"e","runId":"r","sessionId":"s","turnId":"t","ts":1}"#;
        assert!(check_run_event(ok, "s", "r", Some("t")).is_ok());
        assert!(check_run_event(ok, "s", "r", Some("other")).is_err());
        assert!(
            check_run_event(&ok.replace("\"ts\":1", "\"ts\":1,\"x\":2"), "s", "r", None).is_err()
        );
        assert!(check_run_event(&ok.replace("run_started", " "), "s", "r", None).is_err());
        assert!(check_run_event(
            &ok.replace("\"ts\":1", "\"ts\":1,\"data\":[]"),
            "s",
            "r",
            None
        )
        .is_err());
        assert!(check_run_event("{", "s", "r", None).is_err());
        // Present but null is not absent.
        assert!(check_run_event(
            &ok.replace("\"ts\":1", "\"ts\":1,\"message\":null"),
            "s",
            "r",
            None
        )
        .is_err());
        assert!(check_run_event(
            &ok.replace("\"ts\":1", "\"ts\":1,\"data\":null"),
            "s",
            "r",
            None
        )
        .is_err());
        assert!(check_run_event(&ok.replace("\"ts\":1", "\"ts\":\"1\""), "s", "r", None).is_err());
        // A repeated key takes its last value, as JSON.parse does.
        let dup = ok.replace("\"ts\":1", "\"ts\":1,\"type\":\"run_failed\"");
        assert!(check_run_event(&dup, "s", "r", Some("t")).is_ok());
        let ok_data = ok.replace(
            "\"ts\":1",
            "\"ts\":1.5,\"message\":\"m\",\"data\":{\"a\":[1]}",
        );
        assert!(check_run_event(&ok_data, "s", "r", Some("t")).is_ok());
    }
}
