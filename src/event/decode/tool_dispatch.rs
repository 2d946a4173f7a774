//! `actions.toolDispatch` and `actions.toolRecovery`: the tool boundary's dispatch
//! record, and the reconcile-result and recovery-decision facts kept as JSON.

use super::actions::TOOL_BOUNDARY_PROTOCOL_V1;
use super::envelope::RECOVERY_MODES;
use super::error_path::{at, at_index, expected, missing, V};
use super::field_readers::{enum_value, req, req_str, take_fields, NULL};
use super::field_table::{check_closed, check_ty, Ty, F};
use crate::event::{ToolDispatch, ToolRecovery};
use crate::json::Json;

// ----- tool dispatch / recovery -----

pub(super) fn decode_tool_dispatch(value: Json) -> V<ToolDispatch> {
    let obj = value.into_object().map_err(|v| expected("an object", &v))?;
    let [protocol, operation_id, provider_tool_call_id, tool_name, canonical_args_hash, recovery_mode] =
        take_fields(
            obj,
            &[
                "protocol",
                "operationId",
                "providerToolCallId",
                "toolName",
                "canonicalArgsHash",
                "recoveryMode",
            ],
        )?;
    for (slot, key) in [
        (&protocol, "protocol"),
        (&operation_id, "operationId"),
        (&provider_tool_call_id, "providerToolCallId"),
        (&tool_name, "toolName"),
        (&canonical_args_hash, "canonicalArgsHash"),
        (&recovery_mode, "recoveryMode"),
    ] {
        if slot.is_none() {
            return Err(missing(key));
        }
    }
    enum_value(
        req(protocol, "protocol")?,
        "protocol",
        &[(TOOL_BOUNDARY_PROTOCOL_V1, ())],
    )?;
    Ok(ToolDispatch {
        operation_id: req_str(operation_id, "operationId")?,
        provider_tool_call_id: req_str(provider_tool_call_id, "providerToolCallId")?,
        tool_name: req_str(tool_name, "toolName")?,
        canonical_args_hash: req_str(canonical_args_hash, "canonicalArgsHash")?,
        recovery_mode: enum_value(
            req(recovery_mode, "recoveryMode")?,
            "recoveryMode",
            RECOVERY_MODES,
        )?,
        newer: Default::default(),
    })
}

const TOOL_RECONCILE_RESULT_FACT_KIND: &str = "maka.tool.reconcile_result";
const TOOL_RECOVERY_DECISION_FACT_KIND: &str = "maka.tool.recovery_decision";

fn check_distinct_nonempty_strings(v: &Json) -> V<()> {
    let Json::Array(items) = v else {
        return Err(expected("a non-empty array of strings", v));
    };
    if items.is_empty() {
        return Err(": must not be empty".into());
    }
    for (i, x) in items.iter().enumerate() {
        check_ty(x, Ty::NonEmptyStr).map_err(|e| at_index(i, e))?;
        if items[..i].iter().any(|y| y == x) {
            return Err(format!("[{i}]: duplicate id"));
        }
    }
    Ok(())
}

fn check_tool_recovery_envelope(v: &Json) -> V<()> {
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
        Some(k) if *k == TOOL_RECONCILE_RESULT_FACT_KIND => check_closed(
            payload,
            &[
                F("protocol", true, Ty::Enum(&["tool_reconcile_v1"])),
                F("operationId", true, Ty::NonEmptyStr),
                F(
                    "observation",
                    true,
                    Ty::Enum(&["matches_expected_state", "matches_prior_state", "diverged", "unreadable"]),
                ),
                F("observationSchema", true, Ty::Enum(&["state_identity_v1"])),
                F("observationDigest", true, Ty::Sha256),
            ],
        )
        .map(|_| ()),
        Some(k) if *k == TOOL_RECOVERY_DECISION_FACT_KIND => check_recovery_decision(payload),
        _ => {
            return Err(format!(
                "kind: expected one of {TOOL_RECONCILE_RESULT_FACT_KIND:?}, {TOOL_RECOVERY_DECISION_FACT_KIND:?}"
            ))
        }
    };
    r.map_err(|e| at("payload", e))
}

fn check_recovery_decision(v: &Json) -> V<()> {
    let Some(o) = v.as_object() else {
        return Err(expected("an object", v));
    };
    let base = [
        F("protocol", true, Ty::Enum(&["tool_recovery_v1"])),
        F("operationId", true, Ty::NonEmptyStr),
        F(
            "evidenceEventIds",
            true,
            Ty::Check(check_distinct_nonempty_strings),
        ),
        F("disposition", true, Ty::Enum(&["completed", "parked"])),
    ];
    let completed = matches!(o.get("disposition"), Some(Json::String(s)) if *s == "completed");
    let mut fields = base.to_vec();
    if completed {
        fields.push(F(
            "reasonCode",
            true,
            Ty::Enum(&["reconcile_matches_expected_state"]),
        ));
        fields.push(F("outcomeEventId", true, Ty::NonEmptyStr));
    } else {
        fields.push(F(
            "reasonCode",
            true,
            Ty::Enum(&[
                "reconcile_matches_prior_state",
                "reconcile_diverged",
                "reconcile_unreadable",
            ]),
        ));
    }
    check_closed(v, &fields).map(|_| ())
}

pub(in crate::event) fn decode_tool_recovery(value: Json) -> V<ToolRecovery> {
    check_tool_recovery_envelope(&value)?;
    let o = value
        .as_object()
        .ok_or_else(|| expected("an object", &value))?;
    let kind = o
        .get("kind")
        .and_then(Json::as_js_str)
        .cloned()
        .unwrap_or_default();
    let operation_id = o
        .get("payload")
        .and_then(Json::as_object)
        .and_then(|p| p.get("operationId"))
        .and_then(Json::as_js_str)
        .cloned()
        .unwrap_or_default();
    Ok(ToolRecovery {
        kind,
        operation_id,
        envelope: value,
    })
}
