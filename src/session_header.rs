//! The session header (`session_metadata` row), checked as Maka's store reads it at
//! start-up: the row's version columns, then the header JSON's fields. Unknown keys are
//! ignored (the header is an open shape); only the fields Maka checks are checked. Maka's
//! start-up lists every session header, archived ones too, and stops on one it cannot
//! read ("Invalid session header for session …: malformed fields"). Pure.
//!
//! The lineage rules are checked as every release checks them (revision, conversation
//! copy, and which subagent keys need a `subagentParent`), except the shapes of a
//! subagent's own records (`subagentParent`, `subagentRuntime`, `subagentSpawn`,
//! `subagentWorkspace`), which differ from release to release: of those, only what
//! every release requires is checked, so a header reported here is one every release
//! refuses, and a subagent record that only its release would refuse is not reported.

use serde_json::{Map, Value};

pub use crate::db::SessionHeaderRow;
use crate::release::rules::HeaderRules;

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
    let value = crate::json::parse_for_checks(&row.payload_json)
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
    let checks: [(&str, bool); 30] = [
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
            "conversationCopy",
            !rules.session_conversation_copy || conversation_copy_fits(h),
        ),
        ("revision lineage", revision_lineage_fits(h)),
        ("subagent lineage", subagent_lineage_may_fit(h, rules)),
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

/// The revision lineage keys: all absent, or all present and well formed.
const REVISION_KEYS: [&str; 5] = [
    "revisionRootSessionId",
    "revisionParentSessionId",
    "revisionOfTurnId",
    "revisionIndex",
    "revisionState",
];

/// Maka's `isSafeSessionId`: 1 to 128 of `A-Z a-z 0-9 _ -`.
fn is_safe_session_id(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Maka's `isSessionLineageId`: a string of 1 to 512 UTF-16 code units without a
/// control character (U+0000 to U+001F, U+007F).
fn is_lineage_id(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str).is_some_and(|s| {
        (1..=512).contains(&s.encode_utf16().count())
            && !s.chars().any(|c| c <= '\u{1f}' || c == '\u{7f}')
    })
}

/// Maka's `isValidRevisionLineage` (the same in every release).
fn revision_lineage_fits(h: &Map<String, Value>) -> bool {
    if REVISION_KEYS.iter().all(|k| !h.contains_key(*k)) {
        return true;
    }
    let safe = |k: &str| {
        h.get(k)
            .and_then(Value::as_str)
            .is_some_and(is_safe_session_id)
    };
    let turn = h
        .get("revisionOfTurnId")
        .and_then(Value::as_str)
        .is_some_and(|s| (1..=128).contains(&s.encode_utf16().count()));
    // `Number.isSafeInteger` of the number JavaScript reads, at least 2.
    let index = h
        .get("revisionIndex")
        .and_then(Value::as_f64)
        .is_some_and(|n| n.fract() == 0.0 && (2.0..=9_007_199_254_740_991.0).contains(&n));
    let state = matches!(
        h.get("revisionState").and_then(Value::as_str),
        Some("preparing" | "committed")
    );
    safe("revisionRootSessionId") && safe("revisionParentSessionId") && turn && index && state
}

/// Maka's `isValidConversationCopyLineage` with `isSessionConversationCopy` (v0.1.3 and
/// later, the same in each).
fn conversation_copy_fits(h: &Map<String, Value>) -> bool {
    const KEYS: [&str; 5] = [
        "kind",
        "sourceSessionId",
        "sourceTurnId",
        "requestFingerprint",
        "state",
    ];
    let Some(copy) = h.get("conversationCopy") else {
        return true;
    };
    let Some(c) = copy.as_object() else {
        return false;
    };
    let exact =
        KEYS.iter().all(|k| c.contains_key(*k)) && c.keys().all(|k| KEYS.contains(&k.as_str()));
    let kind = c.get("kind").and_then(Value::as_str);
    let fingerprint = c
        .get("requestFingerprint")
        .and_then(Value::as_str)
        .and_then(|s| s.strip_prefix("sha256:"))
        .is_some_and(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
    let state = matches!(
        c.get("state").and_then(Value::as_str),
        Some("preparing" | "committed")
    );
    let well_formed = exact
        && matches!(kind, Some("branch" | "revision"))
        && is_lineage_id(c.get("sourceSessionId"))
        && is_lineage_id(c.get("sourceTurnId"))
        && fingerprint
        && state;
    if !well_formed {
        return false;
    }
    let (source, turn) = (&c["sourceSessionId"], &c["sourceTurnId"]);
    if !source.as_str().is_some_and(is_safe_session_id)
        || h.get("id") == Some(source)
        || h.contains_key("subagentParent")
    {
        return false;
    }
    if kind == Some("branch") {
        h.get("parentSessionId") == Some(source)
            && h.get("branchOfTurnId") == Some(turn)
            && REVISION_KEYS.iter().all(|k| !h.contains_key(*k))
    } else {
        h.get("revisionParentSessionId") == Some(source) && h.get("revisionOfTurnId") == Some(turn)
    }
}

/// What every release's `isValidSubagentSessionLineage` requires: without a
/// `subagentParent`, none of the keys that need one; with one, a parent record whose
/// leading members are right and no branch or revision lineage. `true` does not mean
/// the release accepts it (the records' full shapes are its own).
fn subagent_lineage_may_fit(h: &Map<String, Value>, rules: &HeaderRules) -> bool {
    let Some(parent) = h.get("subagentParent") else {
        let workspace = rules.session_subagent_workspace && h.contains_key("subagentWorkspace");
        return !(h.contains_key("subagentRuntime")
            || h.contains_key("subagentSpawn")
            || workspace);
    };
    let Some(p) = parent.as_object() else {
        return false;
    };
    let spawned_by = p.get("spawnedBy").and_then(Value::as_object);
    p.get("kind").and_then(Value::as_str) == Some("subagent")
        && is_lineage_id(p.get("parentSessionId"))
        && p.get("parentSessionId")
            .and_then(Value::as_str)
            .is_some_and(is_safe_session_id)
        && p.get("lifecycle").and_then(Value::as_str) == Some("foreground")
        && spawned_by.is_some_and(|b| {
            ["parentRunId", "parentTurnId", "toolCallId"]
                .iter()
                .all(|k| is_lineage_id(b.get(*k)))
        })
        && ["parentSessionId", "branchOfTurnId"]
            .iter()
            .chain(REVISION_KEYS.iter())
            .all(|k| !h.contains_key(*k))
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
    fn what_json_parse_reads_and_serde_json_does_not_is_read() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for (k, v) in [
            ("name", r#""cut \ud83d""#),
            ("labels", r#"["\udc00"]"#),
            ("someNewerKey", deep.as_str()),
        ] {
            // Appended: a repeated key's last value is the one read, by both.
            let p = OK.replacen('}', &format!(r#","{k}":{v}}}"#), 1);
            assert!(serde_json::from_str::<Value>(&p).is_err(), "{p}");
            for tag in crate::release::RELEASES {
                assert_eq!(
                    check_session_header(&row(&p), &rules(tag)),
                    Ok(()),
                    "{tag}: {p}"
                );
            }
        }
        // An infinite number is not read that way (null in its place would pass as
        // a null `projectId`), nor nesting beyond 1,000: serde_json's refusal stands.
        let deeper = format!("{}{}", "[".repeat(1001), "]".repeat(1001));
        let p = OK.replacen('}', &format!(r#","someNewerKey":{deeper}}}"#), 1);
        assert!(check_session_header(&row(&p), &rules("main"))
            .unwrap_err()
            .contains("not JSON"));
        let p = OK.replace(r#""createdAt":1"#, r#""createdAt":1e400"#);
        assert!(check_session_header(&row(&p), &rules("main"))
            .unwrap_err()
            .contains("not JSON"));
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

    /// `OK` with several members set (JSON texts) or removed (`None`).
    fn with_all(members: &[(&str, Option<&str>)]) -> String {
        let mut v: Value = serde_json::from_str(OK).unwrap();
        let o = v.as_object_mut().unwrap();
        for (k, value) in members {
            match value {
                Some(t) => o.insert((*k).to_owned(), serde_json::from_str(t).unwrap()),
                None => o.remove(*k),
            };
        }
        v.to_string()
    }

    /// The error's field in every release at or after `from` (`None`: in none), and
    /// `Ok` before it.
    fn refused_from(payload: &str, from: Option<&str>, field: &str) {
        let mut refused = false;
        for tag in crate::release::RELEASES {
            refused |= Some(*tag) == from;
            let got = check_session_header(&row(payload), &rules(tag));
            if refused {
                let e = got.expect_err(tag);
                assert!(e.contains(&format!("`{field}`")), "{tag}: {e}");
            } else {
                assert_eq!(got, Ok(()), "{tag}: {payload}");
            }
        }
    }

    const REVISION: [(&str, Option<&str>); 5] = [
        ("revisionRootSessionId", Some(r#""root-1""#)),
        ("revisionParentSessionId", Some(r#""parent_2""#)),
        ("revisionOfTurnId", Some(r#""turn 7""#)),
        ("revisionIndex", Some("2")),
        ("revisionState", Some(r#""committed""#)),
    ];

    #[test]
    fn revision_lineage_is_all_or_nothing_in_every_release() {
        refused_from(&with_all(&REVISION), None, "");
        let first = Some("v0.1.0");
        for (i, (k, _)) in REVISION.iter().enumerate() {
            // One member missing, or null (present, so not "absent").
            for v in [None, Some("null")] {
                let mut m = REVISION.to_vec();
                m[i] = (k, v);
                refused_from(&with_all(&m), first, "revision lineage");
            }
        }
        for (k, bad) in [
            ("revisionRootSessionId", r#""a/b""#),
            ("revisionParentSessionId", r#""""#),
            ("revisionOfTurnId", &format!("\"{}\"", "x".repeat(129))),
            ("revisionIndex", "1"),
            ("revisionIndex", "2.5"),
            ("revisionIndex", "9007199254740992"),
            ("revisionState", r#""done""#),
        ] {
            let mut m = REVISION.to_vec();
            m.push((k, Some(bad)));
            refused_from(&with_all(&m), first, "revision lineage");
        }
        // 128 UTF-16 units, some of them one character of two units: fine.
        let mut m = REVISION.to_vec();
        let turn = format!("\"{}\"", "😀".repeat(64));
        m.push(("revisionOfTurnId", Some(&turn)));
        refused_from(&with_all(&m), None, "");
    }

    const FINGERPRINT: &str =
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn copy(kind: &str, source: &str, turn: &str) -> String {
        format!(
            r#"{{"kind":"{kind}","sourceSessionId":"{source}","sourceTurnId":"{turn}","requestFingerprint":"{FINGERPRINT}","state":"preparing"}}"#
        )
    }

    #[test]
    fn conversation_copy_lineage_from_v013() {
        let branch = copy("branch", "src", "t1");
        let ok = with_all(&[
            ("conversationCopy", Some(&branch)),
            ("parentSessionId", Some(r#""src""#)),
            ("branchOfTurnId", Some(r#""t1""#)),
        ]);
        refused_from(&ok, None, "");
        let revision = copy("revision", "src", "t1");
        let mut m = REVISION.to_vec();
        m[1] = ("revisionParentSessionId", Some(r#""src""#));
        m[2] = ("revisionOfTurnId", Some(r#""t1""#));
        m.push(("conversationCopy", Some(&revision)));
        refused_from(&with_all(&m), None, "");

        let v013 = Some("v0.1.3");
        for bad in [
            // The branch's lineage is not the copy's.
            with_all(&[("conversationCopy", Some(&branch))]),
            with_all(&[
                ("conversationCopy", Some(&branch)),
                ("parentSessionId", Some(r#""src""#)),
                ("branchOfTurnId", Some(r#""t2""#)),
            ]),
            // A copy of itself, or of an unsafe id.
            with_all(&[("conversationCopy", Some(&copy("branch", "s1", "t1")))]),
            with_all(&[("conversationCopy", Some(&copy("revision", "a b", "t1")))]),
            // Not the record: another kind, a short fingerprint, one member more.
            with_all(&[("conversationCopy", Some(&copy("fork", "src", "t1")))]),
            with_all(&[("conversationCopy", Some(&branch.replace("cdef\"", "cde\"")))]),
            with_all(&[("conversationCopy", Some(&branch.replace('}', r#","x":1}"#)))]),
            with_all(&[("conversationCopy", Some("null"))]),
        ] {
            refused_from(&bad, v013, "conversationCopy");
        }
    }

    const PARENT: &str = r#"{"kind":"subagent","parentSessionId":"p1","lifecycle":"foreground","spawnedBy":{"parentRunId":"r","parentTurnId":"t","toolCallId":"c"}}"#;

    #[test]
    fn subagent_keys_need_a_parent_and_a_parent_no_other_lineage() {
        refused_from(&with_all(&[("subagentParent", Some(PARENT))]), None, "");
        let first = Some("v0.1.0");
        refused_from(
            &with_all(&[("subagentRuntime", Some("{}"))]),
            first,
            "subagent lineage",
        );
        refused_from(
            &with_all(&[("subagentSpawn", Some("{}"))]),
            first,
            "subagent lineage",
        );
        refused_from(
            &with_all(&[("subagentWorkspace", Some("{}"))]),
            Some("v0.1.2"),
            "subagent lineage",
        );
        for (k, v) in [
            ("parentSessionId", r#""p1""#),
            ("revisionIndex", "2"),
            ("subagentParent", r#""p1""#),
            (
                "subagentParent",
                &PARENT.replace("foreground", "background"),
            ),
            ("subagentParent", &PARENT.replace(r#""p1""#, r#""p/1""#)),
            ("subagentParent", &PARENT.replace(r#""c""#, r#""""#)),
        ] {
            let mut m = vec![("subagentParent", Some(PARENT))];
            m.push((k, Some(v)));
            let field = if k == "revisionIndex" {
                // The revision lineage is incomplete too, and comes first.
                "revision lineage"
            } else {
                "subagent lineage"
            };
            refused_from(&with_all(&m), first, field);
        }
    }
}
