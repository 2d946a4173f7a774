//! The AgentRun header (`core_agent_runs.record_json`), decoded as strictly as Maka's
//! `decodeAgentRunHeader` reads it. Pure.

use crate::release::rules::HeaderRules;
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

const PERMISSION_MODES: &[&str] = &["explore", "ask", "bypass", "execute"];

/// Optional keys whose value, when present, is one of a closed list of strings.
const ENUMS: [(&str, &[&str]); 6] = [
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

/// What started a run; from v0.1.11 at most one of them is set.
const ORIGINS: [&str; 4] = [
    "scheduledTaskId",
    "legacyAutomationId",
    "goalId",
    "agentGraphWakeId",
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

/// Decodes `record_json` of the row `(session_id, run_id)` with main's rules.
pub fn decode_header(
    record_json: &str,
    session_id: &str,
    run_id: &str,
) -> Result<RunHeader, String> {
    decode_header_as(record_json, session_id, run_id, &HeaderRules::MAIN)
}

/// Whether `key` is a header key the release of `rules` knows.
fn known_key(key: &str, rules: &HeaderRules) -> bool {
    match key {
        "scheduledTaskId" | "legacyAutomationId" => rules.v0111_trigger_ids,
        // Read as `legacyAutomationId` from v0.1.11 on (renamed before this check).
        "automationId" => !rules.v0111_trigger_ids,
        "goalId" => rules.goal_id,
        "rootExecutionKind" => rules.root_execution_kind,
        "toolMode" => rules.tool_mode,
        "runComposition" => rules.run_composition,
        _ => key_index(key).is_some(),
    }
}

/// Keys a header may have: `REQUIRED`, then `OPTIONAL`.
const KEYS: usize = REQUIRED.len() + OPTIONAL.len();

const fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The index of a key among [`KEYS`], found when compiling (a key not there does not
/// compile).
const fn key_at(key: &str) -> usize {
    let mut i = 0;
    while i < REQUIRED.len() {
        if same_text(REQUIRED[i], key) {
            return i;
        }
        i += 1;
    }
    let mut j = 0;
    while j < OPTIONAL.len() {
        if same_text(OPTIONAL[j], key) {
            return REQUIRED.len() + j;
        }
        j += 1;
    }
    panic!("not a header key")
}

/// The index of a key read from a header among [`KEYS`]: one lookup, not a pass over
/// both lists (the scan reads every header's keys).
fn key_index(key: &str) -> Option<usize> {
    static INDEX: std::sync::LazyLock<crate::fast_hash::HashMap<&'static str, usize>> =
        std::sync::LazyLock::new(|| {
            REQUIRED
                .iter()
                .chain(OPTIONAL)
                .enumerate()
                .map(|(i, k)| (*k, i))
                .collect()
        });
    INDEX.get(key).copied()
}

/// The keys in the order Maka writes a header's (its record's fields, as in every
/// header of the bench workspace); optional keys it did not write there are absent.
const WRITTEN_ORDER: [&str; 18] = [
    "runId",
    "invocationId",
    "sessionId",
    "turnId",
    "status",
    "backendKind",
    "llmConnectionSlug",
    "modelId",
    "cwd",
    "permissionMode",
    "collaborationMode",
    "orchestrationMode",
    "orchestrationSource",
    "agentSwarmAuthorization",
    "toolMode",
    "createdAt",
    "updatedAt",
    "completedAt",
];

/// Not a key's index (no guess).
const NO_KEY: u8 = u8::MAX;
const _: () = assert!(KEYS < NO_KEY as usize);

/// For each key's index, the index of the key written after it in [`WRITTEN_ORDER`]
/// (at `KEYS`: the first key); [`NO_KEY`] where there is none.
const FOLLOWS: [u8; KEYS + 1] = {
    let mut out = [NO_KEY; KEYS + 1];
    out[KEYS] = key_at(WRITTEN_ORDER[0]) as u8;
    let mut i = 1;
    while i < WRITTEN_ORDER.len() {
        out[key_at(WRITTEN_ORDER[i - 1])] = key_at(WRITTEN_ORDER[i]) as u8;
        i += 1;
    }
    out
};

/// The key at index `at` of [`KEYS`].
fn key_name(at: usize) -> &'static str {
    match at.checked_sub(REQUIRED.len()) {
        None => REQUIRED[at],
        Some(j) => OPTIONAL[j],
    }
}

/// [`key_index`], trying first the key Maka writes after `prev` (the index of the
/// key read before; `None` at the first): a comparison instead of a hash lookup for
/// nearly every key of the headers Maka writes. The guess only saves time: a key
/// it does not spell is looked up.
fn key_index_after(prev: Option<usize>, key: &str) -> Option<usize> {
    let guess = usize::from(FOLLOWS[prev.unwrap_or(KEYS)]);
    if guess != usize::from(NO_KEY) && key_name(guess) == key {
        return Some(guess);
    }
    key_index(key)
}

/// The index of a key [`header_facts_plainly`] reads, as [`known_key`] judges it under
/// `rules` (one lookup, then the release switches by index); `None` for a key left to
/// the exact decode: unknown, renamed on read (`automationId`, in no list), or an
/// object (`continuationSource`, `runComposition`). `prev`: as for
/// [`key_index_after`].
fn plain_key_index(prev: Option<usize>, key: &str, rules: &HeaderRules) -> Option<usize> {
    const SCHEDULED_TASK: usize = key_at("scheduledTaskId");
    const LEGACY_AUTOMATION: usize = key_at("legacyAutomationId");
    const GOAL: usize = key_at("goalId");
    const ROOT_EXECUTION: usize = key_at("rootExecutionKind");
    const TOOL_MODE: usize = key_at("toolMode");
    const CONTINUATION: usize = key_at("continuationSource");
    const COMPOSITION: usize = key_at("runComposition");
    let at = key_index_after(prev, key)?;
    let known = match at {
        SCHEDULED_TASK | LEGACY_AUTOMATION => rules.v0111_trigger_ids,
        GOAL => rules.goal_id,
        ROOT_EXECUTION => rules.root_execution_kind,
        TOOL_MODE => rules.tool_mode,
        CONTINUATION | COMPOSITION => false,
        _ => true,
    };
    known.then_some(at)
}

/// [`ENUMS`]' and [`ORIGINS`]' keys as indexes among [`KEYS`].
const ENUM_AT: [usize; ENUMS.len()] = {
    let mut out = [0; ENUMS.len()];
    let mut i = 0;
    while i < ENUMS.len() {
        out[i] = key_at(ENUMS[i].0);
        i += 1;
    }
    out
};
const ORIGIN_AT: [usize; ORIGINS.len()] = {
    let mut out = [0; ORIGINS.len()];
    let mut i = 0;
    while i < ORIGINS.len() {
        out[i] = key_at(ORIGINS[i]);
        i += 1;
    }
    out
};

/// [`decode_header`] with the rules of the release that wrote the file.
pub fn decode_header_as(
    record_json: &str,
    session_id: &str,
    run_id: &str,
    rules: &HeaderRules,
) -> Result<RunHeader, String> {
    let value: Value =
        serde_json::from_str(record_json).map_err(|e| format!("record is not JSON: {e}"))?;
    let Value::Object(mut record) = value else {
        return Err("record is not a JSON object".into());
    };
    // Legacy spelling Maka renames on read (from v0.1.11; before, it is the field).
    if rules.v0111_trigger_ids
        && record.contains_key("automationId")
        && !record.contains_key("legacyAutomationId")
    {
        if let Some(v) = record.remove("automationId") {
            record.insert("legacyAutomationId".into(), v);
        }
    }
    for key in record.keys() {
        if !known_key(key, rules) {
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
    for key in OPTIONAL_STRINGS.iter().chain(&["automationId"]) {
        if record.get(*key).is_some_and(|v| !v.is_string()) {
            return Err(format!("`{key}` is not a string"));
        }
    }
    let status = s("status")
        .and_then(|v| parse_status(&v))
        .ok_or_else(|| "`status` is not a run status".to_owned())?;
    if !enum_ok(record.get("backendKind"), rules.backend_kinds) {
        return Err("`backendKind` is not a backend kind".into());
    }
    if !enum_ok(record.get("permissionMode"), PERMISSION_MODES) {
        return Err("`permissionMode` is not a permission mode".into());
    }
    for (key, allowed) in ENUMS {
        if !enum_ok(record.get(key), allowed) {
            return Err(format!("`{key}` has an unknown value"));
        }
    }
    if rules.v0111_trigger_ids {
        if ORIGINS.iter().filter(|k| record.contains_key(**k)).count() > 1 {
            return Err(
                "more than one of scheduledTaskId, legacyAutomationId, goalId, agentGraphWakeId"
                    .into(),
            );
        }
    } else if record.contains_key("automationId") && record.contains_key("goalId") {
        // Before v0.1.11 only these two exclude each other.
        return Err("both automationId and goalId".into());
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

/// What the scan keeps of a run header (see `scan::HeaderBrief`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderFacts<'a> {
    pub status: HeaderStatus,
    pub turn_id: &'a str,
    pub failure_class: Option<&'a str>,
    pub abort_source: Option<&'a str>,
}

impl RunHeader {
    pub fn facts(&self) -> HeaderFacts<'_> {
        HeaderFacts {
            status: self.status,
            turn_id: &self.turn_id,
            failure_class: self.failure_class.as_deref(),
            abort_source: self.abort_source.as_deref(),
        }
    }
}

/// The fast path of [`decode_header_as`] for the scan, which reads every header of the
/// file and keeps four fields (building the whole `serde_json` map cost about 6 µs a
/// header, most of the header read): `Some` only for a record the exact decode
/// certainly accepts, with the fields it would give, judged from its raw members. A
/// value that is not a string without escapes or a plain number (an object, `null`, a
/// boolean, an exponent), a repeated or unknown key, `automationId` (renamed on read)
/// and anything the checks refuse are left to the exact decode, which also gives the
/// reason.
pub fn header_facts_plainly<'a>(
    record_json: &'a str,
    session_id: &str,
    run_id: &str,
    rules: &HeaderRules,
) -> Option<HeaderFacts<'a>> {
    use crate::json::validate::{each_member, RawValue};
    // Every key is one of `KEYS`, once; a string value is kept under its key's index.
    let mut seen = [false; KEYS];
    let mut strings: [Option<&str>; KEYS] = [None; KEYS];
    let mut prev = None;
    each_member(record_json, |k, v| {
        let at = plain_key_index(prev, k, rules)?;
        prev = Some(at);
        if std::mem::replace(&mut seen[at], true) {
            return None;
        }
        match v {
            RawValue::Str(s, false) => strings[at] = Some(s),
            // Plain numbers only (no exponent: `serde_json` refuses what overflows).
            RawValue::Num(_, true) if matches!(k, "createdAt" | "updatedAt" | "completedAt") => {}
            _ => return None,
        }
        Some(())
    })?;
    if !seen[..REQUIRED.len()].iter().all(|&x| x) {
        return None;
    }
    let get = |at: usize| strings[at];
    // The keys read as numbers must not be strings, and the string keys not numbers.
    for k in [
        const { key_at("createdAt") },
        const { key_at("updatedAt") },
        const { key_at("completedAt") },
    ] {
        if get(k).is_some() {
            return None;
        }
    }
    // So every required key but the two times is a string: all are there, and only
    // the times may be numbers.
    let in_list = |k: usize, allowed: &[&str]| get(k).is_none_or(|v| allowed.contains(&v));
    if !in_list(const { key_at("backendKind") }, rules.backend_kinds)
        || !in_list(const { key_at("permissionMode") }, PERMISSION_MODES)
        || ENUM_AT
            .iter()
            .zip(ENUMS)
            .any(|(&k, (_, allowed))| !in_list(k, allowed))
    {
        return None;
    }
    if rules.v0111_trigger_ids && ORIGIN_AT.iter().filter(|&&k| get(k).is_some()).count() > 1 {
        return None;
    }
    let status = parse_status(get(const { key_at("status") })?)?;
    if get(const { key_at("runId") })? != run_id
        || get(const { key_at("sessionId") })? != session_id
    {
        return None;
    }
    if !is_safe_id(run_id) || !is_safe_id(session_id) {
        return None;
    }
    Some(HeaderFacts {
        status,
        turn_id: get(const { key_at("turnId") })?,
        failure_class: get(const { key_at("failureClass") }),
        abort_source: get(const { key_at("abortSource") }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"runId":"r1","invocationId":"r1","sessionId":"s1","turnId":"t1","status":"running","backendKind":"ai-sdk","llmConnectionSlug":"x","modelId":"m","cwd":"/","permissionMode":"ask","createdAt":1,"updatedAt":2}"#;

    fn with(key: &str, value: &str) -> String {
        let mut v: serde_json::Value = serde_json::from_str(OK).unwrap();
        v[key] = serde_json::from_str(value).unwrap();
        v.to_string()
    }

    fn rules(tag: &str) -> HeaderRules {
        crate::release::Rules::for_release(tag).header
    }

    /// The guess of the key written next never changes which key is found: every
    /// key after every other (and first) is found at its own index, an unknown one
    /// nowhere.
    #[test]
    fn a_key_is_found_at_its_index_whatever_came_before() {
        let prevs = std::iter::once(None).chain((0..KEYS).map(Some));
        let mut guessed = 0;
        for prev in prevs {
            for at in 0..KEYS {
                assert_eq!(
                    key_index_after(prev, key_name(at)),
                    Some(at),
                    "{prev:?} {at}"
                );
                guessed += usize::from(usize::from(FOLLOWS[prev.unwrap_or(KEYS)]) == at);
            }
            for other in ["", "runid", "automationId", "runIdx"] {
                assert_eq!(key_index_after(prev, other), None, "{prev:?} {other}");
            }
        }
        assert_eq!(guessed, WRITTEN_ORDER.len());
        assert_eq!(key_name(key_at("toolMode")), "toolMode");
    }

    #[test]
    fn header_fields_are_known_from_their_release() {
        for (key, value, since, before) in [
            ("goalId", r#""g""#, "v0.1.3", "v0.1.2"),
            (
                "rootExecutionKind",
                r#""context_compact""#,
                "v0.1.4",
                "v0.1.3",
            ),
            ("toolMode", r#""direct""#, "v0.1.6", "v0.1.5"),
            ("runComposition", "{}", "v0.1.10", "v0.1.9"),
            ("scheduledTaskId", r#""t""#, "v0.1.11", "v0.1.10"),
            ("legacyAutomationId", r#""a""#, "v0.1.11", "v0.1.10"),
        ] {
            let rec = with(key, value);
            assert!(
                decode_header_as(&rec, "s1", "r1", &rules(since)).is_ok(),
                "{key}"
            );
            assert!(
                decode_header_as(&rec, "s1", "r1", &rules(before)).is_err(),
                "{key} before {since}"
            );
        }
    }

    #[test]
    fn run_event_types_are_a_closed_list_before_v014() {
        let ev = |ty: &str| {
            format!(
                r#"{{"type":"{ty}","id":"e","runId":"r1","sessionId":"s1","turnId":"t1","ts":1}}"#
            )
        };
        let ok = |ty: &str, tag: &str| {
            check_run_event_as(&ev(ty), "s1", "r1", Some("t1"), &rules(tag)).is_ok()
        };
        assert!(ok("usage_recorded", "v0.1.2") && !ok("usage_recorded", "v0.1.3"));
        assert!(
            !ok("graph_supervisor_yielded", "v0.1.2") && ok("graph_supervisor_yielded", "v0.1.3")
        );
        assert!(!ok("anything_new", "v0.1.3") && ok("anything_new", "v0.1.4"));
    }

    #[test]
    fn pi_agent_and_automation_id_by_release() {
        let pi = with("backendKind", r#""pi-agent""#);
        assert!(decode_header_as(&pi, "s1", "r1", &rules("v0.1.10")).is_ok());
        assert!(decode_header_as(&pi, "s1", "r1", &rules("v0.1.11")).is_err());
        // `automationId` decodes everywhere; from v0.1.11 it is read as
        // `legacyAutomationId` and excludes every other trigger id.
        let auto = with("automationId", r#""a""#);
        let old = decode_header_as(&auto, "s1", "r1", &rules("v0.1.5")).unwrap();
        assert!(old.record.contains_key("automationId"));
        let new = decode_header_as(&auto, "s1", "r1", &rules("v0.1.11")).unwrap();
        assert!(new.record.contains_key("legacyAutomationId"));
        let mut both: serde_json::Value = serde_json::from_str(&auto).unwrap();
        both["agentGraphWakeId"] = serde_json::json!("w");
        let both = both.to_string();
        assert!(decode_header_as(&both, "s1", "r1", &rules("v0.1.5")).is_ok());
        assert!(decode_header_as(&both, "s1", "r1", &rules("main")).is_err());
        let mut goal: serde_json::Value = serde_json::from_str(&auto).unwrap();
        goal["goalId"] = serde_json::json!("g");
        assert!(decode_header_as(&goal.to_string(), "s1", "r1", &rules("v0.1.5")).is_err());
    }

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

    /// Every header Maka wrote in the fixtures (all releases).
    fn fixture_headers() -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for (_, conn) in crate::fixture_dbs::fixture_databases() {
            let Ok(mut stmt) =
                conn.prepare("SELECT session_id, run_id, record_json FROM core_agent_runs")
            else {
                continue;
            };
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            out.extend(rows.map(Result::unwrap));
        }
        out
    }

    /// `Some` from the fast path means the exact decode accepts, with the same facts.
    fn agrees(record: &str, s: &str, r: &str, rules: &HeaderRules) -> bool {
        let fast = header_facts_plainly(record, s, r, rules);
        if let Some(f) = fast {
            let exact = decode_header_as(record, s, r, rules);
            assert_eq!(exact.as_ref().map(RunHeader::facts), Ok(f), "{record}");
        }
        fast.is_some()
    }

    #[test]
    fn the_header_fast_path_gives_the_exact_facts_or_nothing() {
        let headers = fixture_headers();
        assert!(headers.len() > 50, "{} headers", headers.len());
        let all: Vec<HeaderRules> = crate::release::RELEASES
            .iter()
            .map(|t| rules(t))
            .chain([HeaderRules::MAIN])
            .collect();
        let (mut fast, mut decoded, mut damaged) = (0, 0, 0);
        let mut damage = crate::mutate::Mutator::new(0x2545_f491_4f6c_dd1d);
        for (s, r, record) in &headers {
            for rules in &all {
                decoded += usize::from(decode_header_as(record, s, r, rules).is_ok());
                fast += usize::from(agrees(record, s, r, rules));
            }
            for _ in 0..40 {
                if let Some(m) = damage.mutate(record) {
                    let rules = &all[damaged % all.len()];
                    agrees(&m, s, r, rules);
                    damaged += 1;
                }
            }
        }
        // The fast path is the usual one where the exact decode accepts.
        assert!(fast * 10 >= decoded * 9, "{fast} of {decoded}");
        assert!(damaged > headers.len() * 30, "{damaged}");
    }

    #[test]
    fn the_header_fast_path_leaves_the_unusual_to_the_exact_decode() {
        let main = HeaderRules::MAIN;
        assert!(agrees(OK, "s1", "r1", &main));
        let plain = |rec: &str| agrees(rec, "s1", "r1", &main);
        // OK with `key` set to the text `value`, as written (no re-serializing).
        let raw = |key: &str, value: &str| {
            let mut v: serde_json::Value = serde_json::from_str(OK).unwrap();
            v[key] = serde_json::json!("@@");
            v.to_string().replace(r#""@@""#, value)
        };
        // Each is one the exact decode reads differently, refuses, or words an error for.
        for (key, value) in [
            ("status", r#""paused""#),
            ("status", r#""waiting_permission""#),
            ("createdAt", "1e3"),
            ("createdAt", r#""1""#),
            ("completedAt", "null"),
            ("invocationId", "7"),
            ("agentId", "null"),
            ("continuationSource", "{}"),
            ("continuationSource", r#""x""#),
            ("toolMode", r#""other""#),
            ("automationId", r#""a""#),
            ("permissionMode", "true"),
        ] {
            let rec = raw(key, value);
            let exact = decode_header_as(&rec, "s1", "r1", &main);
            let fast = header_facts_plainly(&rec, "s1", "r1", &main);
            assert!(fast.is_none() || exact.is_ok(), "{rec}");
            if key == "status" && value.contains("waiting") {
                // Folded on read, and plain enough to take the fast path.
                assert_eq!(fast.map(|f| f.status), Some(HeaderStatus::WaitingForUser));
            } else {
                assert!(!plain(&rec), "{rec}");
            }
        }
        // An escape (the exact decode reads `t1`), a repeated key (serde keeps the last
        // value), an unknown key, another row.
        let escaped = OK.replace(r#""t1""#, r#""t\u0031""#);
        assert_eq!(decode_header(&escaped, "s1", "r1").unwrap().turn_id, "t1");
        assert!(!plain(&escaped));
        assert!(!plain(
            &OK.replace(r#""cwd":"/""#, r#""cwd":"/","cwd":"/""#)
        ));
        assert!(!plain(&OK.replace("\"cwd\"", "\"cwdx\"")));
        assert!(header_facts_plainly(OK, "s1", "r2", &main).is_none());
        // Two origins from v0.1.11 on.
        let two =
            with("goalId", r#""g""#).replace(r#""goalId""#, r#""agentGraphWakeId":"w","goalId""#);
        assert!(decode_header_as(&two, "s1", "r1", &main).is_err());
        assert!(!plain(&two));
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
    if run_event_plainly_ok(record_json, session_id, run_id, turn_id) {
        return Ok(());
    }
    check_run_event_exact(record_json, session_id, run_id, turn_id)
}

/// [`check_run_event`] under the rules of the release that wrote the file: v0.1.2 and
/// v0.1.3 accept only the run-event types they list.
pub fn check_run_event_as(
    record_json: &str,
    session_id: &str,
    run_id: &str,
    turn_id: Option<&str>,
    rules: &HeaderRules,
) -> Result<(), String> {
    check_run_event(record_json, session_id, run_id, turn_id)?;
    let Some(types) = rules.run_event_types else {
        return Ok(());
    };
    let value = crate::json::parse(record_json).map_err(|e| e.to_string())?;
    let ty = value
        .as_object()
        .and_then(|o| o.get("type"))
        .and_then(crate::json::Json::as_str)
        .unwrap_or_default();
    if types.contains(&ty) {
        Ok(())
    } else {
        Err(format!(
            "`type` {ty:?} is not a run-event type of this release"
        ))
    }
}

/// The fast path (it runs on every run event of the workspace, and `data` can be
/// large): `true` only for a record the exact check certainly accepts, judged from its
/// raw members without building any value. A repeated key (which `JSON.parse` takes
/// with its last value), an escape in a compared string or a `ts` that might not be
/// finite is left to the exact check, which also gives the reason.
fn run_event_plainly_ok(
    record_json: &str,
    session_id: &str,
    run_id: &str,
    turn_id: Option<&str>,
) -> bool {
    use crate::json::validate::{each_member, RawValue};
    // The string without escapes, when the value is one.
    fn plain<'a>(v: RawValue<'a>) -> Option<&'a str> {
        match v {
            RawValue::Str(s, false) => Some(s),
            _ => None,
        }
    }
    const REQUIRED: u8 = 0b0011_1111;
    let mut seen = 0u8;
    let read = each_member(record_json, |k, v| {
        let (bit, ok) = match k {
            // Some printable ASCII: non-blank under any definition of white space.
            "type" => (
                1,
                plain(v).is_some_and(|t| t.bytes().any(|c| c.is_ascii_graphic())),
            ),
            "id" => (2, matches!(v, RawValue::Str(..))),
            "runId" => (4, plain(v) == Some(run_id)),
            "sessionId" => (8, plain(v) == Some(session_id)),
            "turnId" => (16, plain(v).is_some_and(|t| turn_id.is_none_or(|x| x == t))),
            "ts" => (32, matches!(v, RawValue::Num(_, true))),
            "message" => (64, matches!(v, RawValue::Str(..))),
            "data" => (128, matches!(v, RawValue::Other(o) if o.starts_with('{'))),
            _ => return None,
        };
        if !ok || seen & bit != 0 {
            return None;
        }
        seen |= bit;
        Some(())
    });
    if read.is_none() {
        return false;
    }
    seen & REQUIRED == REQUIRED
}

/// The exact check, with a reason, on the record parsed as `JSON.parse` parses it (a
/// repeated key keeps its last value; lone surrogates are strings like any other).
fn check_run_event_exact(
    record_json: &str,
    session_id: &str,
    run_id: &str,
    turn_id: Option<&str>,
) -> Result<(), String> {
    use crate::json::Json;
    let value = crate::json::parse(record_json)
        .map_err(|e| format!("record is not JSON: {}", e.message))?;
    let Json::Object(ref map) = value else {
        return Err("record is not a JSON object".into());
    };
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
    let mut unknown: Vec<String> = map
        .iter()
        .map(|(k, _)| k)
        .filter(|k| !KEYS.iter().any(|x| **k == **x))
        .map(|k| k.to_string_lossy())
        .collect();
    unknown.sort();
    if let Some(k) = unknown.first() {
        return Err(format!("unknown key `{k}`"));
    }
    let string = |k: &str| match map.get(k) {
        Some(Json::String(s)) => Some(s),
        _ => None,
    };
    if string("type").is_none_or(|t| t.code_points().all(is_js_trimmed)) {
        return Err("`type` is not a non-blank string".into());
    }
    for k in ["id", "runId", "sessionId", "turnId"] {
        if string(k).is_none() {
            return Err(format!("`{k}` is not a string"));
        }
    }
    if !matches!(map.get("ts"), Some(Json::Number(n)) if n.is_finite()) {
        return Err("`ts` is not a finite number".into());
    }
    if map.get("message").is_some() && string("message").is_none() {
        return Err("`message` is not a string".into());
    }
    if map
        .get("data")
        .is_some_and(|d| !matches!(d, Json::Object(_)))
    {
        return Err("`data` is not an object".into());
    }
    if string("sessionId").is_none_or(|s| *s != *session_id)
        || string("runId").is_none_or(|r| *r != *run_id)
    {
        return Err("its sessionId/runId differ from the run's".into());
    }
    if let Some(t) = turn_id {
        if string("turnId").is_none_or(|x| *x != *t) {
            return Err("its turnId differs from the run header's".into());
        }
    }
    Ok(())
}

/// What `String.prototype.trim` removes: WhiteSpace and LineTerminator code points.
fn is_js_trimmed(c: u32) -> bool {
    matches!(
        c,
        0x09 | 0x0A | 0x0B | 0x0C | 0x0D | 0x20 | 0xA0 | 0x1680 | 0x2000
            ..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000 | 0xFEFF
    )
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

#[cfg(test)]
mod run_event_fast_path_tests {
    use super::*;

    const OK: &str = r#"{"type":"run_started","id":"e1","runId":"r1","sessionId":"s1","turnId":"t1","ts":17,"message":"hi","data":{"a":[1,{"b":null}]}}"#;

    fn check(record: &str) -> Result<(), String> {
        check_run_event(record, "s1", "r1", Some("t1"))
    }

    #[test]
    fn accepts_and_refuses_as_maka_does() {
        assert_eq!(check(OK), Ok(()));
        assert!(run_event_plainly_ok(OK, "s1", "r1", Some("t1")));
        let bad = [
            (
                OK.replace("\"ts\":17", "\"ts\":1e400"),
                "`ts` is not a finite number",
            ),
            (
                OK.replace("\"ts\":17", "\"ts\":\"17\""),
                "`ts` is not a finite number",
            ),
            (
                OK.replace("run_started", " \\u00a0\\ufeff"),
                "`type` is not a non-blank string",
            ),
            (OK.replace("\"hi\"", "null"), "`message` is not a string"),
            (
                OK.replace("{\"a\":[1,{\"b\":null}]}", "[]"),
                "`data` is not an object",
            ),
            (
                OK.replace("\"s1\"", "\"s2\""),
                "its sessionId/runId differ from the run's",
            ),
            (
                OK.replace("\"t1\"", "\"t2\""),
                "its turnId differs from the run header's",
            ),
            (OK.replace("\"id\"", "\"idx\""), "unknown key `idx`"),
            (OK.replace(",\"id\":\"e1\"", ""), "`id` is not a string"),
        ];
        for (record, why) in bad {
            assert_eq!(check(&record), Err(why.to_owned()), "{record}");
        }
        assert!(check("{\"type\":")
            .unwrap_err()
            .starts_with("record is not JSON"));
        assert_eq!(check("[]"), Err("record is not a JSON object".into()));
    }

    #[test]
    fn the_exact_path_follows_json_parse() {
        // Escapes, lone surrogates, a repeated key (the last value counts) and deep
        // `data` are all fine for JSON.parse; the fast path leaves them to the exact one.
        let escaped = OK.replace("\"s1\"", "\"\\u0073\\u0031\"");
        assert!(!run_event_plainly_ok(&escaped, "s1", "r1", Some("t1")));
        assert_eq!(check(&escaped), Ok(()));
        let lone = OK.replace("\"e1\"", "\"\\ud800\"");
        assert_eq!(check(&lone), Ok(()));
        let repeated = OK.replace("\"ts\":17", "\"ts\":\"x\",\"ts\":17");
        assert!(!run_event_plainly_ok(&repeated, "s1", "r1", Some("t1")));
        assert_eq!(check(&repeated), Ok(()));
        let deep = OK.replace(
            "{\"a\":[1,{\"b\":null}]}",
            &format!("{{\"a\":{}{}}}", "[".repeat(5000), "]".repeat(5000)),
        );
        assert!(run_event_plainly_ok(&deep, "s1", "r1", Some("t1")));
        assert_eq!(check(&deep), Ok(()));
        // Without a header turn, any turn is the run's.
        assert_eq!(
            check_run_event(&OK.replace("t1", "t9"), "s1", "r1", None),
            Ok(())
        );
    }

    #[test]
    fn the_fast_path_never_accepts_what_the_exact_path_refuses() {
        // Every run event Maka wrote in the fixtures, and byte-level damage of each.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        let mut records = Vec::new();
        for dir in std::fs::read_dir(&root).unwrap() {
            let db = dir.unwrap().path().join("runtime.sqlite");
            if !db.exists() {
                continue;
            }
            let uri = format!("file:{}?immutable=1", db.display());
            let flags =
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
            let conn = rusqlite::Connection::open_with_flags(uri, flags).unwrap();
            let mut stmt = conn
                .prepare(
                    "SELECT e.session_id, e.run_id, e.record_json, \
                     json_extract(h.record_json, '$.turnId') FROM core_agent_run_events e \
                     JOIN core_agent_runs h USING (session_id, run_id)",
                )
                .unwrap();
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                })
                .unwrap();
            records.extend(rows.map(Result::unwrap));
        }
        assert!(records.len() > 100, "{} run events", records.len());
        let mut accepted = 0;
        let mut damaged = 0;
        let mut damage = crate::mutate::Mutator::new(0x9e37_79b9_7f4a_7c15);
        for (s, r, record, turn) in &records {
            assert_eq!(check_run_event(record, s, r, turn.as_deref()), Ok(()));
            accepted += usize::from(run_event_plainly_ok(record, s, r, turn.as_deref()));
            for _ in 0..40 {
                let Some(m) = damage.mutate(record) else {
                    continue;
                };
                if run_event_plainly_ok(&m, s, r, turn.as_deref()) {
                    assert_eq!(
                        check_run_event_exact(&m, s, r, turn.as_deref()),
                        Ok(()),
                        "the fast path accepted {m}"
                    );
                } else {
                    damaged += 1;
                }
            }
        }
        // The fast path is the usual one, and the damage was mostly caught.
        assert!(
            accepted * 10 >= records.len() * 9,
            "{accepted} of {}",
            records.len()
        );
        assert!(damaged > records.len() * 10, "{damaged}");
    }
}
