//! What RuntimeEvents written by a Maka newer than main carry, checked as strictly as
//! the newer sources check it (facts and references: `docs/scan.md`, "Files newer than
//! wsledger"), for a file judged with [`crate::release::Rules::newer_than_known`].
//!
//! Main's decoder stays the only decoder: a payload it accepts never comes here. A
//! payload it rejects is read again here when the rules allow newer facts; when the
//! payload uses one, that part is checked on its own, taken out, the rest decoded by
//! main's decoder, and the part put back in the event (`Content::InvocationOpened`,
//! `Actions::newer`, `ToolDispatch::newer`). Damage that no newer generation explains
//! is still refused, with main's message, or the newer part's own.
//!
//! Not read: `function_response.modelProjection`, `actions.formRequest` and
//! `actions.tokenUsage.lastRequestAnchor` (their newer decoders are not in the sources
//! wsledger read); a payload carrying them stays undecodable. Pure.

use super::decode::{check_answer_accepted, decode_event, is_safe_integer, is_sha256_digest};
use super::{Content, RuntimeEvent};
use crate::json::{JsObject, JsStr, Json};
use crate::release::rules::DecoderRules;

/// The name the scan counts an `invocation_opened` event under.
pub const INVOCATION_OPENED: &str = "invocation_opened";

/// Reads a payload main's decoder rejected, with what `rules` add beyond main. `None`
/// when the payload uses nothing newer (main's verdict stands); else the event, or why
/// it is still not one (the message names the first offending path).
pub fn decode_newer(text: &str, rules: &DecoderRules) -> Option<Result<RuntimeEvent, String>> {
    if !rules.is_newer_than_main() || !mentions_newer(text, rules) {
        return None;
    }
    let mut o = crate::json::parse(text).ok()?.into_object().ok()?;
    let mut parts = Parts::default();
    match take_newer(&mut o, rules, &mut parts) {
        Ok(()) if parts.is_empty() => None,
        Ok(()) => Some(
            decode_event(Json::Object(o))
                .map_err(|e| e.to_string())
                .map(|event| parts.put_back(event)),
        ),
        Err(e) => Some(Err(format!("invalid RuntimeEvent schema: {e}"))),
    }
}

/// The names under which the scan counts an event's newer parts (empty for an event
/// main's decoder reads).
pub fn newer_parts(event: &RuntimeEvent) -> Vec<&'static str> {
    let mut out = Vec::new();
    if matches!(event.content, Some(Content::InvocationOpened { .. })) {
        out.push(INVOCATION_OPENED);
    }
    if let Some(a) = &event.actions {
        for (k, _) in a.newer.iter() {
            out.push(match *k {
                "managedMutationTerminal" => "actions.managedMutationTerminal",
                "formAnswerAccepted" => "actions.formAnswerAccepted",
                _ => "actions",
            });
        }
        if let Some(d) = &a.tool_dispatch {
            for (k, _) in d.newer.iter() {
                out.push(match *k {
                    "managedMutation" => "actions.toolDispatch.managedMutation",
                    _ => "actions.toolDispatch.resultProjectionVersion",
                });
            }
        }
        let version = a
            .continuation_start
            .as_ref()
            .and_then(|c| c.as_object()?.get("providerProjectionVersion")?.as_f64());
        if version == Some(2.0) {
            out.push("actions.continuationStart.providerProjectionVersion 2");
        }
    }
    out
}

/// Whether the text may use a newer part at all (a payload with escapes may spell a
/// name otherwise): the parse is skipped for the rest.
fn mentions_newer(text: &str, rules: &DecoderRules) -> bool {
    text.contains('\\')
        || (rules.invocation_opening && text.contains(INVOCATION_OPENED))
        || (rules.managed_mutation_facts
            && [
                "managedMutation",
                "formAnswerAccepted",
                "resultProjectionVersion",
                "providerProjectionVersion",
            ]
            .iter()
            .any(|m| text.contains(m)))
}

/// The newer parts taken out of a payload, to put back once main's decoder has read
/// the rest.
#[derive(Default)]
struct Parts {
    opening: Option<JsObject>,
    actions: Vec<(&'static str, Json)>,
    dispatch: Vec<(&'static str, Json)>,
    projection_v2: bool,
}

impl Parts {
    fn is_empty(&self) -> bool {
        self.opening.is_none()
            && self.actions.is_empty()
            && self.dispatch.is_empty()
            && !self.projection_v2
    }

    fn put_back(self, mut event: RuntimeEvent) -> RuntimeEvent {
        if let Some(fields) = self.opening {
            event.content = Some(Content::InvocationOpened { fields });
        }
        if let Some(a) = event.actions.as_mut() {
            a.newer = super::NewerKeys::new(self.actions);
            if let Some(d) = a.tool_dispatch.as_mut() {
                d.newer = super::NewerKeys::new(self.dispatch);
            }
            if self.projection_v2 {
                if let Some(Json::Object(c)) = a.continuation_start.as_mut() {
                    c.insert(JsStr::new("providerProjectionVersion"), Json::Number(2.0));
                }
            }
        }
        event
    }
}

type V = Result<(), String>;

fn at(path: &str, e: String) -> String {
    format!("{path}.{e}")
}

/// Checks and takes the newer parts out of the payload object.
fn take_newer(o: &mut JsObject, rules: &DecoderRules, parts: &mut Parts) -> V {
    if rules.invocation_opening {
        let opened = matches!(
            o.get("content").and_then(|c| c.as_object()?.get("kind")),
            Some(Json::String(k)) if *k == *INVOCATION_OPENED
        );
        if opened {
            let c = o
                .remove("content")
                .unwrap_or_default()
                .into_object()
                .unwrap_or_default();
            check_opening(&c).map_err(|e| at("content", e))?;
            parts.opening = Some(c);
        }
    }
    if !rules.managed_mutation_facts {
        return Ok(());
    }
    let Some(Json::Object(actions)) = o.get_mut("actions") else {
        return Ok(());
    };
    for key in ["managedMutationTerminal", "formAnswerAccepted"] {
        if let Some(v) = actions.remove(key) {
            let checked = if key == "formAnswerAccepted" {
                check_answer_accepted(&v)
            } else {
                check_managed_mutation_terminal(&v)
            };
            checked.map_err(|e| at(&format!("actions.{key}"), e))?;
            parts.actions.push((key, v));
        }
    }
    // Maka: a closure acceptance is the only action of its event.
    if !parts.actions.is_empty() && actions.contains_key("permissionClosureAccepted") {
        return Err("actions.permissionClosureAccepted: must be the only action".into());
    }
    if let Some(Json::Object(d)) = actions.get_mut("toolDispatch") {
        if let Some(v) = d.remove("resultProjectionVersion") {
            if v.as_f64() != Some(1.0) {
                return Err("actions.toolDispatch.resultProjectionVersion: expected 1".into());
            }
            parts.dispatch.push(("resultProjectionVersion", v));
        }
        if let Some(v) = d.remove("managedMutation") {
            check_managed_mutation(&v)
                .map_err(|e| at("actions.toolDispatch.managedMutation", e))?;
            parts.dispatch.push(("managedMutation", v));
        }
    }
    if let Some(Json::Object(c)) = actions.get_mut("continuationStart") {
        if let Some(v) = c.get_mut("providerProjectionVersion") {
            if v.as_f64() == Some(2.0) {
                // Main's check, with the one value it does not know yet.
                *v = Json::Number(1.0);
                parts.projection_v2 = true;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Closed shapes
// ---------------------------------------------------------------------------------

/// Checks that `o` has every key of `required`, and no key outside `required` and
/// `optional` (Maka's `hasExactShape`).
fn exact(o: &JsObject, required: &[&str], optional: &[&str]) -> V {
    for k in required {
        if !o.contains_key(k) {
            return Err(format!("{k}: missing required key"));
        }
    }
    for k in o.keys() {
        let known = k
            .as_str()
            .is_some_and(|k| required.contains(&k) || optional.contains(&k));
        if !known {
            return Err(format!("{}: unknown key", k.to_string_lossy()));
        }
    }
    Ok(())
}

fn object<'a>(v: &'a Json, path: &str) -> Result<&'a JsObject, String> {
    v.as_object()
        .ok_or_else(|| format!("{path}: expected an object"))
}

fn string<'a>(o: &'a JsObject, key: &str) -> Result<&'a JsStr, String> {
    o.get(key)
        .and_then(Json::as_js_str)
        .ok_or_else(|| format!("{key}: expected a string"))
}

fn non_empty(o: &JsObject, key: &str) -> V {
    if string(o, key)?.is_empty() {
        return Err(format!("{key}: expected a non-empty string"));
    }
    Ok(())
}

fn optional_non_empty(o: &JsObject, key: &str) -> V {
    match o.get(key) {
        None => Ok(()),
        Some(_) => non_empty(o, key),
    }
}

fn member(o: &JsObject, key: &str, domain: &[&str]) -> V {
    let ok = o
        .get(key)
        .and_then(Json::as_str)
        .is_some_and(|v| domain.contains(&v));
    if !ok {
        let list: Vec<String> = domain.iter().map(|d| format!("{d:?}")).collect();
        return Err(format!("{key}: expected one of {}", list.join(", ")));
    }
    Ok(())
}

fn optional_member(o: &JsObject, key: &str, domain: &[&str]) -> V {
    match o.get(key) {
        None => Ok(()),
        Some(_) => member(o, key, domain),
    }
}

fn digest(o: &JsObject, key: &str) -> V {
    match o.get(key) {
        Some(Json::String(s)) if is_sha256_digest(s) => Ok(()),
        _ => Err(format!("{key}: expected a sha256 digest")),
    }
}

/// `/^<prefix><32 lowercase hex>$/` and the like.
fn patterned(o: &JsObject, key: &str, prefix: &str, hex: usize) -> V {
    let ok = o.get(key).and_then(Json::as_str).is_some_and(|s| {
        s.strip_prefix(prefix).is_some_and(|rest| {
            rest.len() == hex && rest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    });
    if !ok {
        return Err(format!(
            "{key}: expected {prefix}<{hex} lowercase hex digits>"
        ));
    }
    Ok(())
}

// The domains the opening's configuration is checked against (Maka's core modules:
// permission, collaboration, orchestration, tool-mode).
const BACKEND_KINDS: &[&str] = &["ai-sdk", "fake"];
const PERMISSION_MODES: &[&str] = &["explore", "ask", "bypass"];
const COLLABORATION_MODES: &[&str] = &["agent", "plan"];
const ORCHESTRATION_MODES: &[&str] = &["default", "swarm", "graph"];
const ORCHESTRATION_SOURCES: &[&str] = &["session", "turn_override"];
const SWARM_AUTHORIZATIONS: &[&str] = &["none", "session_mode", "turn_override"];
const TOOL_MODES: &[&str] = &["direct", "code_mode"];
/// The keys an opening fact's lineage may carry.
pub const LINEAGE_KEYS: &[&str] = &[
    "parentRunId",
    "resumedFromRunId",
    "retriedFromRunId",
    "parentTurnId",
    "parentSessionId",
    "retriedFromTurnId",
    "regeneratedFromTurnId",
    "branchOfTurnId",
    "agentId",
    "agentName",
];

/// The opening fact: closed, with a route, configuration, root and source, and an
/// optional non-empty lineage.
pub fn check_opening(c: &JsObject) -> V {
    exact(
        c,
        &[
            "kind",
            "protocol",
            "route",
            "configuration",
            "root",
            "source",
        ],
        &["lineage"],
    )?;
    member(c, "protocol", &["invocation_opened_v1"])?;
    // Each is present (checked above).
    let part = |k: &str| {
        c.get(k)
            .map_or_else(|| Err(format!("{k}: missing")), |v| object(v, k))
    };
    check_route(part("route")?).map_err(|e| at("route", e))?;
    check_configuration(part("configuration")?).map_err(|e| at("configuration", e))?;
    check_root(part("root")?).map_err(|e| at("root", e))?;
    check_source(part("source")?).map_err(|e| at("source", e))?;
    if let Some(l) = c.get("lineage") {
        let l = object(l, "lineage")?;
        exact(l, &[], LINEAGE_KEYS).map_err(|e| at("lineage", e))?;
        if l.is_empty() {
            return Err("lineage: expected at least one key".into());
        }
        for k in l.keys() {
            if l.get_js(k).and_then(Json::as_js_str).is_none() {
                return Err(format!(
                    "lineage.{}: expected a string",
                    k.to_string_lossy()
                ));
            }
        }
    }
    Ok(())
}

fn check_route(r: &JsObject) -> V {
    member(r, "backendKind", BACKEND_KINDS)?;
    non_empty(r, "llmConnectionSlug")?;
    non_empty(r, "modelId")?;
    match r.get("provenance").and_then(Json::as_str) {
        Some("runtime") => {
            exact(
                r,
                &[
                    "provenance",
                    "backendKind",
                    "llmConnectionId",
                    "llmConnectionSlug",
                    "modelId",
                ],
                &["providerStateIdentity"],
            )?;
            non_empty(r, "llmConnectionId")?;
            if r.contains_key("providerStateIdentity") {
                digest(r, "providerStateIdentity")?;
            }
            Ok(())
        }
        Some("unknown") => exact(
            r,
            &["provenance", "backendKind", "llmConnectionSlug", "modelId"],
            &[],
        ),
        _ => Err("provenance: expected one of \"runtime\", \"unknown\"".into()),
    }
}

fn check_configuration(c: &JsObject) -> V {
    exact(
        c,
        &[
            "cwd",
            "permissionMode",
            "collaborationMode",
            "orchestrationMode",
            "orchestrationSource",
            "toolMode",
        ],
        &["agentSwarmAuthorization", "workspaceIdentity"],
    )?;
    string(c, "cwd")?;
    member(c, "permissionMode", PERMISSION_MODES)?;
    member(c, "collaborationMode", COLLABORATION_MODES)?;
    member(c, "orchestrationMode", ORCHESTRATION_MODES)?;
    member(c, "orchestrationSource", ORCHESTRATION_SOURCES)?;
    member(c, "toolMode", TOOL_MODES)?;
    optional_member(c, "agentSwarmAuthorization", SWARM_AUTHORIZATIONS)?;
    optional_non_empty(c, "workspaceIdentity")
}

fn check_root(r: &JsObject) -> V {
    let ids: &[&str] = match r.get("kind").and_then(Json::as_str) {
        Some("user" | "context_compact") => &[],
        Some("scheduled_task") => &["scheduledTaskId"],
        Some("goal") => &["goalId"],
        Some("agent_graph_supervisor_wake") => &["wakeId", "attemptId"],
        Some("legacy_automation") => &["legacyAutomationId"],
        _ => {
            return Err(
                "kind: expected one of \"user\", \"context_compact\", \"scheduled_task\", \
                 \"goal\", \"agent_graph_supervisor_wake\", \"legacy_automation\""
                    .into(),
            )
        }
    };
    let mut required = vec!["kind"];
    required.extend_from_slice(ids);
    exact(r, &required, &[])?;
    ids.iter().try_for_each(|k| non_empty(r, k))
}

fn check_source(s: &JsObject) -> V {
    match s.get("kind").and_then(Json::as_str) {
        Some("fresh") => exact(s, &["kind"], &[]),
        Some("continuation") => {
            exact(
                s,
                &[
                    "kind",
                    "sourceInvocationId",
                    "sourceRunId",
                    "sourceTurnId",
                    "sourceRuntimeEventHighWater",
                ],
                &["claimId", "boundaryDigest"],
            )?;
            for k in ["sourceInvocationId", "sourceRunId", "sourceTurnId"] {
                non_empty(s, k)?;
            }
            let high = s.get("sourceRuntimeEventHighWater").and_then(Json::as_f64);
            if !high.is_some_and(|n| is_safe_integer(n) && n >= 0.0) {
                return Err("sourceRuntimeEventHighWater: expected a safe integer >= 0".into());
            }
            optional_non_empty(s, "claimId")?;
            if s.contains_key("boundaryDigest") {
                digest(s, "boundaryDigest")?;
            }
            Ok(())
        }
        _ => Err("kind: expected one of \"fresh\", \"continuation\"".into()),
    }
}

fn check_managed_mutation_terminal(v: &Json) -> V {
    let t = object(v, "managedMutationTerminal")?;
    exact(
        t,
        &[
            "protocol",
            "operationId",
            "dispatchEventId",
            "workspaceInstanceId",
            "terminalKind",
        ],
        &[],
    )?;
    member(t, "protocol", &["managed_mutation_terminal_v1"])?;
    string(t, "operationId")?;
    string(t, "dispatchEventId")?;
    patterned(t, "workspaceInstanceId", "instance_", 32)?;
    member(
        t,
        "terminalKind",
        &["no_workspace_change", "operation_failed_no_effect"],
    )
}

/// The fixed digest of the managed mutation execution profile (v1).
const EXECUTION_PROFILE_DIGEST: &str =
    "sha256:ffdfdda9cf38f382e0c4db81dac7319cd33586a6c65051a97a15e6c41b88f825";

fn check_managed_mutation(v: &Json) -> V {
    let m = object(v, "managedMutation")?;
    exact(
        m,
        &[
            "protocol",
            "repositoryId",
            "workspaceId",
            "workspaceEpochId",
            "workspaceInstanceId",
            "objectFormat",
            "baseWorkspaceVersionId",
            "baseAcceptedEventId",
            "baseHeadRevision",
            "baseCommitOid",
            "baseTreeOid",
            "expectedPath",
            "pathPolicyVersion",
            "executionProfileDigest",
        ],
        &[],
    )?;
    member(m, "protocol", &["managed_mutation_v2"])?;
    patterned(m, "repositoryId", "repository_", 32)?;
    patterned(m, "workspaceId", "workspace_", 32)?;
    patterned(m, "workspaceEpochId", "epoch_", 32)?;
    patterned(m, "workspaceInstanceId", "instance_", 32)?;
    member(m, "objectFormat", &["sha1"])?;
    patterned(m, "baseWorkspaceVersionId", "version_", 32)?;
    let event_id_ok = m
        .get("baseAcceptedEventId")
        .and_then(Json::as_str)
        .is_some_and(|s| {
            (1..=128).contains(&s.len())
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    if !event_id_ok {
        return Err("baseAcceptedEventId: expected 1 to 128 of [A-Za-z0-9_-]".into());
    }
    let revision = m.get("baseHeadRevision").and_then(Json::as_f64);
    if !revision.is_some_and(|n| is_safe_integer(n) && n >= 1.0) {
        return Err("baseHeadRevision: expected a safe integer >= 1".into());
    }
    patterned(m, "baseCommitOid", "", 40)?;
    patterned(m, "baseTreeOid", "", 40)?;
    if m.get("pathPolicyVersion").and_then(Json::as_f64) != Some(3.0) {
        return Err("pathPolicyVersion: expected 3".into());
    }
    member(m, "executionProfileDigest", &[EXECUTION_PROFILE_DIGEST])?;
    let path_ok = m
        .get("expectedPath")
        .and_then(Json::as_js_str)
        .is_some_and(is_canonical_mutation_path);
    if !path_ok {
        return Err("expectedPath: expected a canonical relative path".into());
    }
    Ok(())
}

/// Maka's canonical Git path of a managed mutation: relative, `/`-separated, no empty,
/// `.` or `..` segment, no `\`, NUL or `:`, at most 4096 UTF-16 units, not under
/// `.git` or `node_modules` (first segment, any case).
fn is_canonical_mutation_path(p: &JsStr) -> bool {
    let Some(s) = p.as_str() else {
        return false;
    };
    if s.is_empty()
        || p.utf16_len() > 4096
        || s.contains(['\\', '\0', ':'])
        || s.starts_with('/')
        || s.ends_with('/')
    {
        return false;
    }
    let segments: Vec<&str> = s.split('/').collect();
    if segments
        .iter()
        .any(|x| x.is_empty() || *x == "." || *x == "..")
    {
        return false;
    }
    let first = segments[0].to_lowercase();
    first != ".git" && first != "node_modules"
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#""id":"e","invocationId":"i","runId":"i","sessionId":"s","turnId":"t","ts":1,"partial":false"#;

    fn opening(extra: &str) -> String {
        format!(
            r#"{{{BASE},"role":"system","author":"system","modelVisibility":"hidden","content":{{"kind":"invocation_opened","protocol":"invocation_opened_v1","route":{{"provenance":"runtime","backendKind":"ai-sdk","llmConnectionId":"c","llmConnectionSlug":"slug","modelId":"m"}},"configuration":{{"cwd":"/w","permissionMode":"ask","collaborationMode":"agent","orchestrationMode":"default","orchestrationSource":"session","toolMode":"direct"}},"root":{{"kind":"user"}},"source":{{"kind":"fresh"}}{extra}}}}}"#
        )
    }

    fn newer(text: &str) -> Option<Result<RuntimeEvent, String>> {
        decode_newer(text, &DecoderRules::NEWER_THAN_MAIN)
    }

    #[test]
    fn an_opening_fact_decodes_only_under_newer_rules() {
        let text = opening("");
        assert!(super::super::decode_event_text(&text).is_err());
        assert!(decode_newer(&text, &DecoderRules::MAIN).is_none());
        let event = newer(&text).unwrap().unwrap();
        assert_eq!(event.content_kind(), Some("invocation_opened"));
        assert_eq!(newer_parts(&event), vec![INVOCATION_OPENED]);
        assert_eq!(super::super::event_kind(&event), "invocation_opened");
        assert!(!event.is_terminal());
        let lineage = opening(r#","lineage":{"parentRunId":"p"}"#);
        assert!(newer(&lineage).unwrap().is_ok());
    }

    #[test]
    fn a_damaged_opening_fact_is_still_refused() {
        for (extra, detail) in [
            (
                r#","lineage":{}"#,
                "content.lineage: expected at least one key",
            ),
            (
                r#","runComposition":{}"#,
                "content.runComposition: unknown key",
            ),
            (
                r#","lineage":{"sessionMode":"x"}"#,
                "content.lineage.sessionMode: unknown key",
            ),
            (r#","lineage":null"#, "content.lineage: expected an object"),
        ] {
            let err = newer(&opening(extra)).unwrap().unwrap_err();
            assert!(err.contains(detail), "{extra}: {err}");
        }
        let no_route = opening("").replace(
            r#""route":{"provenance":"runtime","backendKind":"ai-sdk","llmConnectionId":"c","llmConnectionSlug":"slug","modelId":"m"},"#,
            "",
        );
        let err = newer(&no_route).unwrap().unwrap_err();
        assert!(err.contains("content.route: missing required key"), "{err}");
        let unknown_with_id = opening("").replace("\"runtime\"", "\"unknown\"");
        assert!(newer(&unknown_with_id).unwrap().is_err());
        let bad_mode = opening("").replace("\"ask\"", "\"execute\"");
        assert!(newer(&bad_mode).unwrap().is_err());
        // Damage elsewhere in the event is main's verdict on the rest.
        let bad_role = opening("").replace("\"role\":\"system\"", "\"role\":\"robot\"");
        let err = newer(&bad_role).unwrap().unwrap_err();
        assert!(err.contains("role: expected one of"), "{err}");
    }

    #[test]
    fn damage_no_newer_generation_explains_keeps_mains_verdict() {
        let text =
            format!(r#"{{{BASE},"role":"system","author":"system","content":{{"kind":"shout"}}}}"#);
        assert!(newer(&text).is_none());
        let text =
            format!(r#"{{{BASE},"role":"system","author":"system","actions":{{"frobnicate":1}}}}"#);
        assert!(newer(&text).is_none());
    }

    #[test]
    fn newer_action_facts_are_checked_and_kept() {
        let text = format!(
            r#"{{{BASE},"role":"system","author":"system","actions":{{"formAnswerAccepted":{{"requestId":"r"}}}}}}"#
        );
        let event = newer(&text).unwrap().unwrap();
        assert_eq!(newer_parts(&event), vec!["actions.formAnswerAccepted"]);
        assert_eq!(
            event.actions.as_ref().unwrap().present_keys(),
            ["formAnswerAccepted"]
        );
        let json = crate::json::stable_stringify(&super::super::event_to_json(&event)).unwrap();
        assert!(
            json.contains(r#""formAnswerAccepted":{"requestId":"r"}"#),
            "{json}"
        );
        let empty = text.replace(r#""r""#, r#""""#);
        assert!(newer(&empty).unwrap().is_err());
        let terminal = format!(
            r#"{{{BASE},"role":"tool","author":"tool","actions":{{"managedMutationTerminal":{{"protocol":"managed_mutation_terminal_v1","operationId":"o","dispatchEventId":"d","workspaceInstanceId":"instance_{}","terminalKind":"no_workspace_change"}}}}}}"#,
            "a".repeat(32)
        );
        assert!(newer(&terminal).unwrap().is_ok());
        assert!(newer(&terminal.replace("instance_", "inst_"))
            .unwrap()
            .is_err());
    }

    #[test]
    fn mutation_paths_are_canonical() {
        for ok in ["a", "src/lib.rs", "a/.gitignore"] {
            assert!(is_canonical_mutation_path(&JsStr::new(ok)), "{ok}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a//b",
            "./a",
            "a/../b",
            "C:/a",
            ".GIT/x",
            "node_modules/x",
            "a\\b",
        ] {
            assert!(!is_canonical_mutation_path(&JsStr::new(bad)), "{bad}");
        }
    }
}
