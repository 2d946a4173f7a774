//! The session header (`session_metadata` row), checked as Maka's store reads it at
//! start-up: the row's version columns, then the header JSON's fields. Unknown keys are
//! ignored (the header is an open shape); only the fields Maka checks are checked. Maka's
//! start-up lists every session header, archived ones too, and stops on one it cannot
//! read ("Invalid session header for session …: malformed fields"). Pure.
//!
//! Not checked (they can only hide a failure, never invent one): the conversation-copy,
//! revision and subagent lineage rules.

use serde_json::{Map, Value};

use crate::release::rules::HeaderRules;

/// One `session_metadata` row as the check needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionHeaderRow {
    pub session_id: String,
    pub payload_json: String,
    /// `metadata_version`, as stored (SQLite may hold any type there).
    pub metadata_version: Value,
    /// `committed_at`, as stored.
    pub committed_at: Value,
}

const STATUSES: &[&str] = &[
    "active",
    "running",
    "waiting_for_user",
    "blocked",
    "aborted",
];
const LEGACY_STATUSES: &[&str] = &["review", "done", "archived"];
const BLOCKED_REASONS: &[&str] = &[
    "NO_REAL_CONNECTION",
    "auth",
    "permission_required",
    "tool_failed",
    "unknown",
];
const PERMISSION_MODES: &[&str] = &["explore", "ask", "execute", "bypass"];

/// Why Maka of `rules`' release cannot read this session header, if it cannot.
pub fn check_session_header(row: &SessionHeaderRow, rules: &HeaderRules) -> Result<(), String> {
    let safe_int = |v: &Value| v.as_i64().is_some_and(|n| (1..(1i64 << 53)).contains(&n));
    if !safe_int(&row.metadata_version) || !row.committed_at.is_number() {
        return Err("invalid session metadata record (metadata_version or committed_at)".into());
    }
    let value: Value = serde_json::from_str(&row.payload_json)
        .map_err(|e| format!("payload_json is not JSON: {e}"))?;
    let Value::Object(h) = value else {
        return Err("payload_json is not a JSON object".into());
    };
    match first_bad_field(&h, &row.session_id, rules) {
        None => Ok(()),
        Some(field) => Err(format!("malformed fields (first: `{field}`)")),
    }
}

fn first_bad_field(
    h: &Map<String, Value>,
    session_id: &str,
    rules: &HeaderRules,
) -> Option<String> {
    let is_str = |k: &str| h.get(k).is_some_and(Value::is_string);
    let is_bool = |k: &str| h.get(k).is_some_and(Value::is_boolean);
    let is_num = |k: &str| h.get(k).is_some_and(Value::is_number);
    let opt = |k: &str, ok: &dyn Fn(&Value) -> bool| h.get(k).is_none_or(ok);
    let one_of = |k: &str, domain: &[&str]| {
        h.get(k)
            .and_then(Value::as_str)
            .is_some_and(|s| domain.contains(&s))
    };
    let status_ok = one_of("status", STATUSES)
        || (rules.legacy_session_statuses && one_of("status", LEGACY_STATUSES));
    let archived_at_ok = if rules.legacy_session_statuses {
        opt("archivedAt", &Value::is_number)
    } else {
        !h.contains_key("archivedAt")
    };
    let checks: [(&str, bool); 27] = [
        (
            "id",
            h.get("id").and_then(Value::as_str) == Some(session_id),
        ),
        ("workspaceRoot", is_str("workspaceRoot")),
        ("cwd", is_str("cwd")),
        (
            "projectId",
            opt("projectId", &|v| {
                v.is_null() || v.as_str().is_some_and(|s| !s.is_empty())
            }),
        ),
        ("createdAt", is_num("createdAt")),
        ("lastUsedAt", is_num("lastUsedAt")),
        ("lastMessageAt", opt("lastMessageAt", &Value::is_number)),
        ("name", is_str("name")),
        ("titleIsManual", is_bool("titleIsManual")),
        ("isFlagged", is_bool("isFlagged")),
        (
            "labels",
            h.get("labels")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().all(Value::is_string)),
        ),
        ("isArchived", is_bool("isArchived")),
        ("archivedAt", archived_at_ok),
        ("status", status_ok),
        (
            "blockedReason",
            opt("blockedReason", &|v| {
                v.as_str().is_some_and(|s| BLOCKED_REASONS.contains(&s))
            }),
        ),
        ("statusUpdatedAt", opt("statusUpdatedAt", &Value::is_number)),
        ("parentSessionId", opt("parentSessionId", &Value::is_string)),
        ("branchOfTurnId", opt("branchOfTurnId", &Value::is_string)),
        (
            "lastReadMessageId",
            opt("lastReadMessageId", &Value::is_string),
        ),
        ("hasUnread", is_bool("hasUnread")),
        ("backend", one_of("backend", rules.backend_kinds)),
        ("llmConnectionSlug", is_str("llmConnectionSlug")),
        ("connectionLocked", is_bool("connectionLocked")),
        ("model", is_str("model")),
        ("permissionMode", one_of("permissionMode", PERMISSION_MODES)),
        (
            "collaborationMode",
            one_of("collaborationMode", &["agent", "plan"]),
        ),
        (
            "orchestrationMode",
            one_of("orchestrationMode", &["default", "swarm", "graph"]),
        ),
    ];
    if let Some((k, _)) = checks.iter().find(|(_, ok)| !ok) {
        return Some((*k).to_owned());
    }
    let later: [(&str, bool, bool); 4] = [
        (
            "transcriptLedgerVersion",
            rules.session_transcript_ledger_version,
            opt("transcriptLedgerVersion", &|v| {
                v.as_f64().is_some_and(|n| n == 0.0 || n == 1.0)
            }),
        ),
        (
            "toolProfile",
            rules.session_tool_profile,
            opt("toolProfile", &|v| v.as_str() == Some("headless-coding-v1")),
        ),
        (
            "externalOrigin",
            rules.session_external_origin,
            opt("externalOrigin", &|v| {
                let non_empty = |k: &str| {
                    v.get(k)
                        .and_then(Value::as_str)
                        .is_some_and(|s| !s.is_empty())
                };
                v.is_object() && non_empty("adapterId") && non_empty("sourceSessionId")
            }),
        ),
        (
            "schemaVersion",
            true,
            h.get("schemaVersion").and_then(Value::as_f64) == Some(1.0),
        ),
    ];
    later
        .iter()
        .find(|(_, applies, ok)| *applies && !ok)
        .map(|(k, _, _)| (*k).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::Rules;

    fn row(payload: &str) -> SessionHeaderRow {
        SessionHeaderRow {
            session_id: "s1".into(),
            payload_json: payload.into(),
            metadata_version: Value::from(3),
            committed_at: Value::from(10),
        }
    }

    const OK: &str = r#"{"id":"s1","workspaceRoot":"/w","cwd":"/w","createdAt":1,"lastUsedAt":2,"name":"n","titleIsManual":false,"isFlagged":false,"labels":[],"isArchived":false,"status":"active","hasUnread":false,"backend":"ai-sdk","llmConnectionSlug":"c","connectionLocked":true,"model":"m","permissionMode":"ask","collaborationMode":"agent","orchestrationMode":"default","schemaVersion":1,"someNewerKey":true}"#;

    fn with(key: &str, value: &str) -> String {
        let mut v: Value = serde_json::from_str(OK).unwrap();
        v[key] = serde_json::from_str(value).unwrap();
        v.to_string()
    }

    fn rules(tag: &str) -> HeaderRules {
        Rules::for_release(tag).header
    }

    #[test]
    fn a_well_formed_header_passes_in_every_release() {
        for tag in crate::release::RELEASES {
            assert_eq!(check_session_header(&row(OK), &rules(tag)), Ok(()), "{tag}");
        }
    }

    #[test]
    fn pi_agent_is_readable_until_v0110() {
        let p = with("backend", r#""pi-agent""#);
        assert_eq!(check_session_header(&row(&p), &rules("v0.1.10")), Ok(()));
        assert!(check_session_header(&row(&p), &rules("v0.1.11"))
            .unwrap_err()
            .contains("backend"));
    }

    #[test]
    fn legacy_statuses_and_archived_at_until_v0110() {
        for p in [with("status", r#""done""#), with("archivedAt", "5")] {
            assert_eq!(check_session_header(&row(&p), &rules("v0.1.7")), Ok(()));
            assert!(check_session_header(&row(&p), &rules("main")).is_err());
        }
    }

    #[test]
    fn later_fields_are_checked_from_their_release() {
        let p = with("toolProfile", r#""other""#);
        assert_eq!(check_session_header(&row(&p), &rules("v0.1.10")), Ok(()));
        assert!(check_session_header(&row(&p), &rules("v0.1.11")).is_err());
        let p = with("transcriptLedgerVersion", "2");
        assert_eq!(check_session_header(&row(&p), &rules("v0.1.8")), Ok(()));
        assert!(check_session_header(&row(&p), &rules("v0.1.9")).is_err());
        let p = with("externalOrigin", r#"{"adapterId":""}"#);
        assert_eq!(check_session_header(&row(&p), &rules("v0.1.11")), Ok(()));
        assert!(check_session_header(&row(&p), &rules("main")).is_err());
    }

    #[test]
    fn identity_json_and_row_columns() {
        assert!(check_session_header(&row(&with("id", r#""s2""#)), &rules("main")).is_err());
        assert!(check_session_header(&row("{"), &rules("main"))
            .unwrap_err()
            .contains("not JSON"));
        let mut r = row(OK);
        r.metadata_version = Value::from(0);
        assert!(check_session_header(&r, &rules("main")).is_err());
    }
}
