//! `actions.workspaceFact`: the epoch-opened and baseline-accepted facts, with their
//! identifiers, git object ids and the baseline's origin event id.

use super::error_path::{at, missing, V};
use super::field_readers::{is_lower_hex, NULL};
use super::field_table::{check_closed, Ty, F};
use crate::json::{JsObject, JsStr, Json};

// ----- workspace fact -----

/// `/^<prefix>[a-f0-9]{32}$/u`.
fn identifier(prefix: &'static str) -> impl Fn(&Json) -> bool {
    move |v| {
        matches!(v, Json::String(s) if {
            let b = s.as_wtf8();
            b.starts_with(prefix.as_bytes()) && is_lower_hex(&b[prefix.len()..], 32)
        })
    }
}

fn check_identifier(v: &Json, key: &str, prefix: &'static str) -> V<()> {
    if identifier(prefix)(v) {
        Ok(())
    } else {
        Err(format!("{key}: expected {prefix}<32 lowercase hex>"))
    }
}

fn check_git_oid(o: &JsObject, key: &str, format: &JsStr) -> V<()> {
    let len = if *format == "sha1" { 40 } else { 64 };
    match o.get(key) {
        Some(Json::String(s)) if is_lower_hex(s.as_wtf8(), len) => Ok(()),
        _ => Err(format!(
            "{key}: expected a {len}-digit lowercase hex object id"
        )),
    }
}

const WORKSPACE_MATERIALIZATION_SEMANTICS_V1: &str = "git_tree_materialized_with_fixed_config_v1";

pub(in crate::event) fn check_workspace_fact(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("kind", true, Ty::Any),
            F("version", true, Ty::One),
            F("payload", true, Ty::Any),
        ],
    )?;
    let kind = o.get("kind").and_then(Json::as_js_str);
    let payload = o.get("payload").unwrap_or(&NULL);
    let r = match kind {
        Some(k) if *k == "maka.workspace.epoch_opened" => check_workspace_epoch_opened(payload),
        Some(k) if *k == "maka.workspace.baseline_accepted" => {
            check_workspace_baseline_accepted(payload)
        }
        _ => {
            return Err(
                "kind: expected one of \"maka.workspace.epoch_opened\", \"maka.workspace.baseline_accepted\""
                    .into(),
            )
        }
    };
    r.map_err(|e| at("payload", e))
}

fn check_workspace_epoch_opened(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("protocol", true, Ty::Enum(&["workspace_epoch_opened_v1"])),
            F("repositoryId", true, Ty::Any),
            F("workspaceId", true, Ty::Any),
            F("workspaceEpochId", true, Ty::Any),
            F("workspaceInstanceId", true, Ty::Any),
            F("initialWorkspaceVersionId", true, Ty::Any),
            F("mode", true, Ty::Enum(&["managed_worktree"])),
            F("objectFormat", true, Ty::Enum(&["sha1", "sha256"])),
            F("sourceCommitOid", true, Ty::Any),
            F("sourceTreeOid", true, Ty::Any),
            F("materializationProfileDigest", true, Ty::Sha256),
            F(
                "materializationSemantics",
                true,
                Ty::Enum(&[WORKSPACE_MATERIALIZATION_SEMANTICS_V1]),
            ),
            F("policyHash", true, Ty::Sha256),
        ],
    )?;
    let get = |k: &str| o.get(k).unwrap_or(&NULL);
    check_identifier(get("repositoryId"), "repositoryId", "repository_")?;
    check_identifier(get("workspaceId"), "workspaceId", "workspace_")?;
    check_identifier(get("workspaceEpochId"), "workspaceEpochId", "epoch_")?;
    check_identifier(
        get("workspaceInstanceId"),
        "workspaceInstanceId",
        "instance_",
    )?;
    check_identifier(
        get("initialWorkspaceVersionId"),
        "initialWorkspaceVersionId",
        "version_",
    )?;
    let format = o
        .get("objectFormat")
        .and_then(Json::as_js_str)
        .ok_or_else(|| missing("objectFormat"))?;
    check_git_oid(o, "sourceCommitOid", format)?;
    check_git_oid(o, "sourceTreeOid", format)
}

fn check_workspace_baseline_accepted(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F(
                "protocol",
                true,
                Ty::Enum(&["workspace_baseline_accepted_v1"]),
            ),
            F("repositoryId", true, Ty::Any),
            F("workspaceId", true, Ty::Any),
            F("workspaceEpochId", true, Ty::Any),
            F("workspaceVersionId", true, Ty::Any),
            F("objectFormat", true, Ty::Enum(&["sha1", "sha256"])),
            F("parents", true, Ty::Check(check_empty_array)),
            F("origin", true, Ty::Check(check_baseline_origin)),
            F("commitOid", true, Ty::Any),
            F("treeOid", true, Ty::Any),
            F("policyHash", true, Ty::Sha256),
            F("treeDeltaDigest", true, Ty::Sha256),
            F("changedFileCount", true, Ty::SafeIntNonNeg),
            F("deletedFileCount", true, Ty::Zero),
        ],
    )?;
    let get = |k: &str| o.get(k).unwrap_or(&NULL);
    check_identifier(get("repositoryId"), "repositoryId", "repository_")?;
    check_identifier(get("workspaceId"), "workspaceId", "workspace_")?;
    check_identifier(get("workspaceEpochId"), "workspaceEpochId", "epoch_")?;
    check_identifier(get("workspaceVersionId"), "workspaceVersionId", "version_")?;
    let format = o
        .get("objectFormat")
        .and_then(Json::as_js_str)
        .ok_or_else(|| missing("objectFormat"))?;
    check_git_oid(o, "commitOid", format)?;
    check_git_oid(o, "treeOid", format)
}

fn check_empty_array(v: &Json) -> V<()> {
    match v {
        Json::Array(items) if items.is_empty() => Ok(()),
        _ => Err(": expected an empty array".into()),
    }
}

fn check_baseline_origin(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("kind", true, Ty::Enum(&["baseline"])),
            F("epochOpenedEventId", true, Ty::Any),
        ],
    )?;
    let id = o.get("epochOpenedEventId").unwrap_or(&NULL);
    if js_to_string_is_event_id(id) {
        Ok(())
    } else {
        Err("epochOpenedEventId: String(value) must match [A-Za-z0-9_-]{1,128}".into())
    }
}

/// `/^[A-Za-z0-9_-]{1,128}$/u.test(String(value))`. `String()` of an array joins its
/// elements with commas (never allowed here), so only a chain of one-element arrays
/// can reach a scalar; `null` inside an array prints as the empty string.
fn js_to_string_is_event_id(v: &Json) -> bool {
    let ok = |b: &[u8]| {
        (1..=128).contains(&b.len())
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
    };
    let mut cur = v;
    let mut in_array = false;
    loop {
        match cur {
            Json::Array(items) if items.len() == 1 => {
                cur = &items[0];
                in_array = true;
            }
            Json::Array(_) => return false,
            Json::Null => return !in_array && ok(b"null"),
            Json::Bool(b) => return ok(if *b { b"true" } else { b"false" }),
            Json::Number(n) => {
                let s = if n.is_nan() {
                    "NaN".to_string()
                } else if n.is_infinite() {
                    if *n > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
                } else {
                    crate::json::js_number_to_string(*n)
                };
                return ok(s.as_bytes());
            }
            Json::String(s) => return ok(s.as_wtf8()),
            Json::Object(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;

    #[test]
    fn reserved_facts() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let decision = |extra: &str, ids: &str| {
            format!(
                r#"{{"kind":"maka.tool.recovery_decision","version":1,"payload":{{"protocol":"tool_recovery_v1","operationId":"op","evidenceEventIds":{ids}{extra}}}}}"#
            )
        };
        let completed = r#","disposition":"completed","reasonCode":"reconcile_matches_expected_state","outcomeEventId":"o""#;
        let e = ok(
            &["actions", "toolRecovery"],
            &decision(completed, r#"["a","b"]"#),
        );
        let r = e.actions.unwrap().tool_recovery.unwrap();
        assert_eq!(
            (r.kind.as_str(), r.operation_id.as_str()),
            (Some("maka.tool.recovery_decision"), Some("op"))
        );
        rejects(
            &["actions", "toolRecovery"],
            &decision(completed, r#"["a","a"]"#),
            "actions.toolRecovery.payload.evidenceEventIds[1]: duplicate",
        );
        rejects(
            &["actions", "toolRecovery"],
            &decision(completed, "[]"),
            "actions.toolRecovery.payload.evidenceEventIds",
        );
        let parked = r#","disposition":"parked","reasonCode":"reconcile_diverged""#;
        ok(&["actions", "toolRecovery"], &decision(parked, r#"["a"]"#));
        rejects(
            &["actions", "toolRecovery"],
            &decision(&format!(r#"{parked},"outcomeEventId":"o""#), r#"["a"]"#),
            "actions.toolRecovery.payload: unknown key",
        );

        let cont = |hw: &str| {
            format!(
                r#"{{"protocol":"continuation_start_v2","provenance":"claim_repair","claimId":"c","boundaryDigest":"{digest}","immediateSource":{{"sessionId":"s","invocationId":"i","runId":"r","turnId":"t","highWater":{hw},"prefixDigest":"{digest}"}},"replayManifestDigest":"{digest}","providerProjectionVersion":1,"providerReplayDigest":"{digest}"}}"#
            )
        };
        ok(&["actions", "continuationStart"], &cont("2"));
        rejects(
            &["actions", "continuationStart"],
            &cont("0"),
            "actions.continuationStart.immediateSource.highWater",
        );

        let hex = |n: usize| "0".repeat(n);
        let baseline = |epoch_event: &str| {
            format!(
                r#"{{"kind":"maka.workspace.baseline_accepted","version":1,"payload":{{"protocol":"workspace_baseline_accepted_v1","repositoryId":"repository_{h32}","workspaceId":"workspace_{h32}","workspaceEpochId":"epoch_{h32}","workspaceVersionId":"version_{h32}","objectFormat":"sha1","parents":[],"origin":{{"kind":"baseline","epochOpenedEventId":{epoch_event}}},"commitOid":"{h40}","treeOid":"{h40}","policyHash":"{digest}","treeDeltaDigest":"{digest}","changedFileCount":0,"deletedFileCount":0}}}}"#,
                h32 = hex(32),
                h40 = hex(40),
            )
        };
        // `String(value)` is what the pattern sees.
        for good in [
            r#""ev_1""#,
            "123",
            "-5",
            "true",
            "null",
            r#"["x"]"#,
            r#"[["x"]]"#,
            "1e-7",
        ] {
            ok(&["actions", "workspaceFact"], &baseline(good));
        }
        for bad in [
            r#""a.b""#,
            "{}",
            "[]",
            "[null]",
            r#"["a","b"]"#,
            "1.5",
            "1e21",
            r#""""#,
        ] {
            rejects(
                &["actions", "workspaceFact"],
                &baseline(bad),
                "actions.workspaceFact.payload.origin.epochOpenedEventId",
            );
        }
        let epoch = format!(
            r#"{{"kind":"maka.workspace.epoch_opened","version":1,"payload":{{"protocol":"workspace_epoch_opened_v1","repositoryId":"repository_{h32}","workspaceId":"workspace_{h32}","workspaceEpochId":"epoch_{h32}","workspaceInstanceId":"instance_{h32}","initialWorkspaceVersionId":"version_{h32}","mode":"managed_worktree","objectFormat":"sha256","sourceCommitOid":"{h64}","sourceTreeOid":"{h64}","materializationProfileDigest":"{digest}","materializationSemantics":"git_tree_materialized_with_fixed_config_v1","policyHash":"{digest}"}}}}"#,
            h32 = hex(32),
            h64 = hex(64),
        );
        ok(&["actions", "workspaceFact"], &epoch);
        rejects(
            &["actions", "workspaceFact"],
            &epoch.replace(&hex(64), &hex(40)),
            "actions.workspaceFact.payload.sourceCommitOid",
        );
    }
}
