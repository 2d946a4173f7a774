//! `actions`: the closed record of an event's actions, decoded key by key, with the
//! checks for accepted answers and closures, user questions, the runtime protocol and
//! continuation starts. The larger kept records have rooms of their own: permissions,
//! tool dispatch and recovery, workspace facts, token usage.

use super::error_path::{at, at_index, describe, expected, missing, quote, V};
use super::field_readers::{opt_bool, opt_object, opt_str, take_fields};
use super::field_table::{check_closed, Fields, Ty, F};
use super::permissions::{check_permission_decision, check_permission_request};
use super::token_usage::check_token_usage;
use super::tool_dispatch::{decode_tool_dispatch, decode_tool_recovery};
use super::workspace_fact::check_workspace_fact;
use crate::event::Actions;
use crate::json::{JsObject, Json};

// ---------------------------------------------------------------------------------
// Actions
// ---------------------------------------------------------------------------------

pub(in crate::event) const ACTION_KEYS: [&str; 16] = [
    "stateDelta",
    "artifactDelta",
    "permissionRequest",
    "permissionDecision",
    "permissionAnswerAccepted",
    "permissionClosureAccepted",
    "userQuestionRequest",
    "userQuestionAnswerAccepted",
    "transferToAgent",
    "endInvocation",
    "tokenUsage",
    "toolDispatch",
    "toolRecovery",
    "runtimeProtocol",
    "continuationStart",
    "workspaceFact",
];

/// `INTERACTION_ID_MAX_BYTES` and `INTERACTION_TOOL_NAME_MAX_BYTES`.
const INTERACTION_ID_MAX_BYTES: usize = 256;
pub(super) const INTERACTION_TOOL_NAME_MAX_BYTES: usize = 256;

pub(in crate::event) const TOOL_BOUNDARY_PROTOCOL_V1: &str = "t1_after_preflight_v1";

/// Runs a by-reference check on a kept value and keeps it.
fn kept(slot: Option<Json>, key: &str, check: fn(&Json) -> V<()>) -> V<Option<Json>> {
    match slot {
        None => Ok(None),
        Some(v) => {
            check(&v).map_err(|e| at(key, e))?;
            Ok(Some(v))
        }
    }
}

pub(in crate::event) fn decode_actions(value: Json) -> V<Actions> {
    let obj = value.into_object().map_err(|v| expected("an object", &v))?;
    let key_count = obj.len();
    let [state_delta, artifact_delta, permission_request, permission_decision, permission_answer_accepted, permission_closure_accepted, user_question_request, user_question_answer_accepted, transfer_to_agent, end_invocation, token_usage, tool_dispatch, tool_recovery, runtime_protocol, continuation_start, workspace_fact] =
        take_fields(obj, &ACTION_KEYS)?;
    if permission_closure_accepted.is_some() && key_count != 1 {
        return Err(": permissionClosureAccepted must be the only key of actions".into());
    }
    let state_delta = opt_object(state_delta, "stateDelta")?;
    let artifact_delta = match artifact_delta.map(Json::into_object) {
        None => None,
        Some(Ok(o)) => {
            for (k, x) in o.iter() {
                let ok = match x {
                    Json::String(_) | Json::Bool(_) => true,
                    Json::Number(n) => n.is_finite(),
                    _ => false,
                };
                if !ok {
                    return Err(format!(
                        "artifactDelta.{}: expected a string, boolean or finite number, got {}",
                        quote(k),
                        describe(x)
                    ));
                }
            }
            Some(o)
        }
        Some(Err(other)) => return Err(at("artifactDelta", expected("an object", &other))),
    };
    let transfer_to_agent = opt_str(transfer_to_agent, "transferToAgent")?;
    let end_invocation = opt_bool(end_invocation, "endInvocation")?;
    Ok(Actions {
        state_delta,
        artifact_delta,
        permission_request: kept(
            permission_request,
            "permissionRequest",
            check_permission_request,
        )?,
        permission_decision: kept(
            permission_decision,
            "permissionDecision",
            check_permission_decision,
        )?,
        permission_answer_accepted: kept(
            permission_answer_accepted,
            "permissionAnswerAccepted",
            check_answer_accepted,
        )?,
        permission_closure_accepted: kept(
            permission_closure_accepted,
            "permissionClosureAccepted",
            check_closure_accepted,
        )?,
        user_question_request: kept(
            user_question_request,
            "userQuestionRequest",
            check_user_question_request,
        )?,
        user_question_answer_accepted: kept(
            user_question_answer_accepted,
            "userQuestionAnswerAccepted",
            check_answer_accepted,
        )?,
        transfer_to_agent,
        end_invocation,
        token_usage: kept(token_usage, "tokenUsage", check_token_usage)?,
        tool_dispatch: tool_dispatch
            .map(|v| decode_tool_dispatch(v).map_err(|e| at("toolDispatch", e)))
            .transpose()?,
        tool_recovery: tool_recovery
            .map(|v| decode_tool_recovery(v).map_err(|e| at("toolRecovery", e)))
            .transpose()?,
        runtime_protocol: kept(runtime_protocol, "runtimeProtocol", check_runtime_protocol)?,
        continuation_start: kept(
            continuation_start,
            "continuationStart",
            check_continuation_start,
        )?,
        workspace_fact: kept(workspace_fact, "workspaceFact", check_workspace_fact)?,
        newer: Default::default(),
    })
}

fn check_request_id_bytes(o: &JsObject) -> V<()> {
    let id = o
        .get("requestId")
        .and_then(Json::as_js_str)
        .ok_or_else(|| missing("requestId"))?;
    if id.is_empty() || id.utf8_len() > INTERACTION_ID_MAX_BYTES {
        return Err(format!(
            "requestId: must be 1..={INTERACTION_ID_MAX_BYTES} UTF-8 bytes, got {}",
            id.utf8_len()
        ));
    }
    Ok(())
}

pub(in crate::event) fn check_answer_accepted(v: &Json) -> V<()> {
    let o = check_closed(v, &[F("requestId", true, Ty::Str)])?;
    check_request_id_bytes(o)
}

fn check_closure_accepted(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("requestId", true, Ty::Str),
            F("reason", true, Ty::Enum(&["timed_out"])),
        ],
    )?;
    check_request_id_bytes(o)
}

fn check_user_question_option(v: &Json) -> V<()> {
    check_closed(
        v,
        &[F("label", true, Ty::Str), F("description", false, Ty::Str)],
    )
    .map(|_| ())
}

pub(super) fn check_array_of(v: &Json, each: fn(&Json) -> V<()>) -> V<()> {
    let Json::Array(items) = v else {
        return Err(expected("an array", v));
    };
    for (i, x) in items.iter().enumerate() {
        each(x).map_err(|e| at_index(i, e))?;
    }
    Ok(())
}

fn check_user_question(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("question", true, Ty::Str),
            F(
                "options",
                true,
                Ty::Check(|x| check_array_of(x, check_user_question_option)),
            ),
        ],
    )
    .map(|_| ())
}

pub(in crate::event) fn check_user_question_request(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("requestId", true, Ty::Str),
            F("toolUseId", true, Ty::Str),
            F(
                "questions",
                true,
                Ty::Check(|x| check_array_of(x, check_user_question)),
            ),
        ],
    )
    .map(|_| ())
}

/// `actions.runtimeProtocol` (also checked in place for the scan's walk).
pub(in crate::event) const RUNTIME_PROTOCOL_FIELDS: Fields = Fields::new(&[F(
    "toolBoundary",
    true,
    Ty::Enum(&[TOOL_BOUNDARY_PROTOCOL_V1]),
)]);

pub(in crate::event) fn check_runtime_protocol(v: &Json) -> V<()> {
    check_closed(v, RUNTIME_PROTOCOL_FIELDS.list).map(|_| ())
}

fn check_continuation_source(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("sessionId", true, Ty::NonEmptyStr),
            F("invocationId", true, Ty::NonEmptyStr),
            F("runId", true, Ty::NonEmptyStr),
            F("turnId", true, Ty::NonEmptyStr),
            F("highWater", true, Ty::SafeIntPos),
            F("prefixDigest", true, Ty::Sha256),
        ],
    )
    .map(|_| ())
}

pub(in crate::event) fn check_continuation_start(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("protocol", true, Ty::Enum(&["continuation_start_v2"])),
            F(
                "provenance",
                true,
                Ty::Enum(&["runtime_admission", "claim_repair"]),
            ),
            F("claimId", true, Ty::NonEmptyStr),
            F("boundaryDigest", true, Ty::Sha256),
            F(
                "immediateSource",
                true,
                Ty::Check(check_continuation_source),
            ),
            F("replayManifestDigest", true, Ty::Sha256),
            F("providerProjectionVersion", true, Ty::One),
            F("providerReplayDigest", true, Ty::Sha256),
        ],
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{decode_event, DecodeError};

    #[test]
    fn utf8_byte_limits() {
        let accepted = |id: String| format!(r#"{{"requestId":"{id}"}}"#);
        for key in ["permissionAnswerAccepted", "userQuestionAnswerAccepted"] {
            ok(&["actions", key], &accepted("x".repeat(256)));
            rejects(
                &["actions", key],
                &accepted("x".repeat(257)),
                &format!("actions.{key}.requestId"),
            );
            ok(&["actions", key], &accepted("€".repeat(85)));
            rejects(
                &["actions", key],
                &accepted("€".repeat(86)),
                &format!("actions.{key}.requestId"),
            );
            // A lone surrogate counts as U+FFFD: three bytes.
            ok(&["actions", key], &accepted("\\ud800".repeat(85)));
            rejects(
                &["actions", key],
                &accepted("\\ud800".repeat(86)),
                &format!("actions.{key}.requestId"),
            );
            // A surrogate pair is one four-byte character.
            ok(&["actions", key], &accepted("\\ud83d\\ude00".repeat(64)));
            rejects(
                &["actions", key],
                &accepted(format!("{}x", "\\ud83d\\ude00".repeat(64))),
                "actions",
            );
            rejects(
                &["actions", key],
                &accepted(String::new()),
                &format!("actions.{key}.requestId"),
            );
        }
        let decision =
            |name: String| format!(r#"{{"requestId":"","decision":"allow","toolName":"{name}"}}"#);
        ok(
            &["actions", "permissionDecision"],
            &decision("é".repeat(128)),
        );
        rejects(
            &["actions", "permissionDecision"],
            &decision(format!("{}a", "é".repeat(128))),
            "actions.permissionDecision.toolName",
        );
        rejects(
            &["actions", "permissionDecision"],
            &decision(String::new()),
            "actions.permissionDecision.toolName",
        );
    }

    #[test]
    fn permission_closure_must_be_alone() {
        let closure = r#"{"requestId":"r","reason":"timed_out"}"#;
        let e = ok(&["actions", "permissionClosureAccepted"], closure);
        assert_eq!(
            e.actions.unwrap().present_keys(),
            vec!["permissionClosureAccepted"]
        );
        let mut v = base();
        set(&mut v, &["actions", "permissionClosureAccepted"], closure);
        set(&mut v, &["actions", "stateDelta"], "{}");
        assert_eq!(
            decode_event(v).unwrap_err(),
            DecodeError::Schema(
                "actions: permissionClosureAccepted must be the only key of actions".into()
            )
        );
        rejects(
            &["actions", "permissionClosureAccepted"],
            r#"{"requestId":"r","reason":"other"}"#,
            "actions.permissionClosureAccepted.reason",
        );
    }
}
