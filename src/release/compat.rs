//! An older release's strict decoder, as main's plus what it did not know yet.
//!
//! Every key or value the decoder learned after v0.1.2 is listed here with the release
//! that learned it. A payload that main's decoder accepts is rejected under an older
//! release's rules when it uses one of them; the message has the form main's decoder
//! uses (`<path>: unknown key "<key>"`). Pure.

use super::rules::DecoderRules;
use crate::json::Json;

/// Names that can only appear in a payload that uses a newer feature; a payload
/// without any of them (and without escapes, which could spell one) needs no parse.
const MARKERS: &[&str] = &[
    "origin",
    "modelVisibility",
    "parentToolCallId",
    "parentOperationId",
    "sourceMessageDigest",
    "continuationStart",
    "workspaceFact",
    "providerRequestTraceId",
    "activeSupersededToolResults",
    "activeDuplicateToolResults",
    "inlineReferences",
    "providerOptions",
    "providerExecuted",
    "providerOutput",
    "additionalPermissions",
];

/// Why `rules`' decoder rejects a payload that main's decoder accepted, if it does.
pub fn older_decoder_rejects(payload: &str, rules: &DecoderRules) -> Option<String> {
    if rules.is_main() {
        return None;
    }
    if !payload.contains('\\') && !MARKERS.iter().any(|m| payload.contains(m)) {
        return None;
    }
    let value = crate::json::parse(payload).ok()?;
    check(&value, rules).map(|e| format!("invalid RuntimeEvent schema: {e}"))
}

fn unknown(path: &str, key: &str) -> String {
    format!("{path}: unknown key \"{key}\"")
}

fn check(v: &Json, r: &DecoderRules) -> Option<String> {
    let Json::Object(o) = v else { return None };
    if !r.v016_envelope_and_parent_refs {
        for key in ["origin", "modelVisibility"] {
            if o.contains_key(key) {
                return Some(unknown("payload", key));
            }
        }
    }
    if let Some(Json::Object(refs)) = o.get("refs") {
        let mut newer: Vec<&str> = Vec::new();
        if !r.v016_envelope_and_parent_refs {
            newer.extend(["parentToolCallId", "parentOperationId"]);
        }
        if !r.v017_digest_and_trace_id {
            newer.push("sourceMessageDigest");
        }
        if let Some(k) = newer.into_iter().find(|k| refs.contains_key(k)) {
            return Some(unknown("refs", k));
        }
    }
    if let Some(Json::Object(content)) = o.get("content") {
        if let Some(e) = check_content(content, r) {
            return Some(e);
        }
    }
    if let Some(Json::Object(actions)) = o.get("actions") {
        if let Some(e) = check_actions(actions, r) {
            return Some(e);
        }
    }
    None
}

fn check_content(c: &crate::json::JsObject, r: &DecoderRules) -> Option<String> {
    let kind = c.get("kind").and_then(Json::as_str).unwrap_or_default();
    let mut newer: Vec<&str> = Vec::new();
    match kind {
        "text" => {
            if !r.text_inline_references {
                newer.push("inlineReferences");
            }
            if !r.provider_content_keys {
                newer.push("providerOptions");
            }
        }
        "function_call" if !r.provider_content_keys => newer.push("providerExecuted"),
        "function_response" if !r.provider_content_keys => {
            newer.extend(["providerExecuted", "providerOutput"])
        }
        _ => {}
    }
    if let Some(k) = newer.into_iter().find(|k| c.contains_key(k)) {
        return Some(unknown("content", k));
    }
    if kind == "text" {
        if let Some(Json::Object(origin)) = c.get("origin") {
            let okind = origin
                .get("kind")
                .and_then(Json::as_str)
                .unwrap_or_default();
            let known = match okind {
                "automation" | "agent_graph" => true,
                "goal" => r.v013_actions_and_goal_origin,
                "scheduled_task" | "legacy_automation" => r.v0111_origins_budget_and_paths,
                _ => true, // main's decoder already judged it
            };
            if !known {
                return Some(format!(
                    "content.origin.kind: \"{okind}\" is not a turn origin of this release"
                ));
            }
        }
    }
    None
}

fn field<'a>(v: Option<&'a Json>, k: &str) -> Option<&'a Json> {
    v.and_then(Json::as_object).and_then(|o| o.get(k))
}

fn check_actions(a: &crate::json::JsObject, r: &DecoderRules) -> Option<String> {
    if !r.v013_actions_and_goal_origin {
        for key in ["continuationStart", "workspaceFact"] {
            if a.contains_key(key) {
                return Some(unknown("actions", key));
            }
        }
    }
    if let Some(Json::Object(usage)) = a.get("tokenUsage") {
        if !r.v017_digest_and_trace_id && usage.contains_key("providerRequestTraceId") {
            return Some(unknown("actions.tokenUsage", "providerRequestTraceId"));
        }
        if !r.v0111_origins_budget_and_paths {
            if let Some(Json::Object(budget)) = usage.get("contextBudget") {
                for key in ["activeSupersededToolResults", "activeDuplicateToolResults"] {
                    if budget.contains_key(key) {
                        return Some(unknown("actions.tokenUsage.contextBudget", key));
                    }
                }
            }
        }
    }
    if !r.v0111_origins_budget_and_paths {
        // Main accepts normalized POSIX and Windows drive paths here; older releases
        // only POSIX ones.
        let entries = field(
            field(
                field(a.get("permissionRequest"), "additionalPermissions"),
                "fileSystem",
            ),
            "entries",
        )
        .and_then(Json::as_array);
        for (i, e) in entries.unwrap_or_default().iter().enumerate() {
            if let Some(path) = field(Some(e), "path").and_then(Json::as_str) {
                if !path.starts_with('/') {
                    return Some(format!(
                        "actions.permissionRequest.additionalPermissions.fileSystem.entries[{i}].path: not an absolute POSIX path"
                    ));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::Rules;

    fn rules(tag: &str) -> DecoderRules {
        Rules::for_release(tag).decoder
    }

    const BASE: &str = r#""id":"e","invocationId":"i","runId":"r","sessionId":"s","turnId":"t","ts":1,"partial":false"#;

    fn payload(extra: &str) -> String {
        format!("{{{BASE},{extra}}}")
    }

    #[test]
    fn main_and_v0111_never_reject() {
        let p = payload(r#""role":"model","author":"agent","origin":"provider""#);
        assert_eq!(older_decoder_rejects(&p, &rules("main")), None);
        assert_eq!(older_decoder_rejects(&p, &rules("v0.1.11")), None);
    }

    #[test]
    fn envelope_origin_is_unknown_before_v016() {
        let p = payload(r#""role":"model","author":"agent","modelVisibility":"hidden""#);
        assert!(older_decoder_rejects(&p, &rules("v0.1.5"))
            .unwrap()
            .contains("unknown key \"modelVisibility\""));
        assert_eq!(older_decoder_rejects(&p, &rules("v0.1.6")), None);
    }

    #[test]
    fn parent_refs_from_v016_and_digest_from_v017() {
        let parent = payload(r#""refs":{"operationId":"o","parentToolCallId":"c"}"#);
        assert!(older_decoder_rejects(&parent, &rules("v0.1.5")).is_some());
        assert_eq!(older_decoder_rejects(&parent, &rules("v0.1.6")), None);
        let digest = payload(r#""refs":{"sourceMessageDigest":"sha256:00"}"#);
        assert!(older_decoder_rejects(&digest, &rules("v0.1.6")).is_some());
        assert_eq!(older_decoder_rejects(&digest, &rules("v0.1.7")), None);
    }

    #[test]
    fn token_usage_and_budget_keys() {
        let trace = payload(
            r#""actions":{"tokenUsage":{"input":1,"output":1,"providerRequestTraceId":"x"}}"#,
        );
        assert!(older_decoder_rejects(&trace, &rules("v0.1.6")).is_some());
        assert_eq!(older_decoder_rejects(&trace, &rules("v0.1.7")), None);
        let budget = payload(
            r#""actions":{"tokenUsage":{"input":1,"output":1,"contextBudget":{"activeDuplicateToolResults":1}}}"#,
        );
        assert!(older_decoder_rejects(&budget, &rules("v0.1.10")).is_some());
        assert_eq!(older_decoder_rejects(&budget, &rules("v0.1.11")), None);
    }

    #[test]
    fn turn_origins_per_release() {
        let origin = |k: &str| {
            payload(&format!(
                r#""content":{{"kind":"text","text":"x","origin":{{"kind":"{k}"}}}}"#
            ))
        };
        assert!(older_decoder_rejects(&origin("goal"), &rules("v0.1.2")).is_some());
        assert_eq!(
            older_decoder_rejects(&origin("goal"), &rules("v0.1.3")),
            None
        );
        for k in ["scheduled_task", "legacy_automation"] {
            assert!(older_decoder_rejects(&origin(k), &rules("v0.1.10")).is_some());
            assert_eq!(older_decoder_rejects(&origin(k), &rules("v0.1.11")), None);
        }
        assert_eq!(
            older_decoder_rejects(&origin("automation"), &rules("v0.1.2")),
            None
        );
    }

    #[test]
    fn content_keys_per_release() {
        let inline = payload(r#""content":{"kind":"text","text":"x","inlineReferences":[]}"#);
        assert!(older_decoder_rejects(&inline, &rules("v0.1.3")).is_some());
        assert_eq!(older_decoder_rejects(&inline, &rules("v0.1.4")), None);
        let exec = payload(
            r#""content":{"kind":"function_response","id":"c","name":"n","result":1,"providerOutput":2}"#,
        );
        assert!(older_decoder_rejects(&exec, &rules("v0.1.4")).is_some());
        assert_eq!(older_decoder_rejects(&exec, &rules("v0.1.5")), None);
        let cont = payload(r#""actions":{"continuationStart":{}}"#);
        assert!(older_decoder_rejects(&cont, &rules("v0.1.2")).is_some());
        assert_eq!(older_decoder_rejects(&cont, &rules("v0.1.3")), None);
    }

    #[test]
    fn an_escaped_key_is_still_seen() {
        let p = payload(r#""role":"model","author":"agent","\u006frigin":"provider""#);
        assert!(older_decoder_rejects(&p, &rules("v0.1.5")).is_some());
    }

    #[test]
    fn windows_paths_only_from_v0111() {
        let p = payload(
            r#""actions":{"permissionRequest":{"additionalPermissions":{"fileSystem":{"entries":[{"path":"C:\\work"}]}}}}"#,
        );
        assert!(older_decoder_rejects(&p, &rules("v0.1.10")).is_some());
        assert_eq!(older_decoder_rejects(&p, &rules("v0.1.11")), None);
    }
}
