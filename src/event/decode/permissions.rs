//! `actions.permissionRequest` and `actions.permissionDecision`: the three request
//! kinds, and Maka's validation of an additional permission profile (normalized
//! absolute paths, entries covered by others compacted away, the serialized size limit).

use super::actions::INTERACTION_TOOL_NAME_MAX_BYTES;
use super::error_path::{at, expected, missing, V};
use super::field_table::{check_closed, check_ty, Ty, F};
use crate::json::{JsObject, JsStr, Json};

const APPROVALS_REVIEWERS: &[&str] = &["user", "auto_review"];
const APPROVAL_RISK_LEVELS: &[&str] = &["low", "medium", "high", "critical"];

pub(in crate::event) fn check_permission_decision(v: &Json) -> V<()> {
    let o = check_closed(
        v,
        &[
            F("requestId", true, Ty::Str),
            F("decision", true, Ty::Enum(&["allow", "deny"])),
            F("rememberForTurn", false, Ty::Bool),
            F("reviewer", false, Ty::Enum(APPROVALS_REVIEWERS)),
            F("rationale", false, Ty::Str),
            F("riskLevel", false, Ty::Enum(APPROVAL_RISK_LEVELS)),
            F("toolName", false, Ty::NonEmptyStr),
        ],
    )?;
    if let Some(Json::String(name)) = o.get("toolName") {
        if name.utf8_len() > INTERACTION_TOOL_NAME_MAX_BYTES {
            return Err(format!(
                "toolName: must be at most {INTERACTION_TOOL_NAME_MAX_BYTES} UTF-8 bytes, got {}",
                name.utf8_len()
            ));
        }
    }
    Ok(())
}

const TOOL_CATEGORIES: &[&str] = &[
    "read",
    "web_read",
    "file_write",
    "fs_destructive",
    "shell_safe",
    "shell_unsafe",
    "git_destructive",
    "network_send",
    "privileged",
    "browser",
    "computer_use",
    "client_capability",
    "custom_tool",
    "subagent",
];

const TOOL_PERMISSION_REASONS: &[&str] = &[
    "shell_dangerous",
    "file_write",
    "fs_destructive",
    "network",
    "git_destructive",
    "privileged",
    "browser",
    "computer_use",
    "custom",
];

fn check_allow_once_deny(v: &Json) -> V<()> {
    match v {
        Json::Array(items)
            if items.len() == 2
                && matches!(&items[0], Json::String(s) if *s == "allow_once")
                && matches!(&items[1], Json::String(s) if *s == "deny") =>
        {
            Ok(())
        }
        _ => Err(": expected exactly [\"allow_once\", \"deny\"]".into()),
    }
}

fn check_additional_permission_risk(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("outsideWorkspace", true, Ty::Bool),
            F("protectedMetadata", true, Ty::Bool),
            F("networkEnabled", true, Ty::Bool),
        ],
    )
    .map(|_| ())
}

fn check_sandbox_escalation_risk(v: &Json) -> V<()> {
    check_closed(
        v,
        &[
            F("unsandboxedExecution", true, Ty::True),
            F("unrestrictedFileSystem", true, Ty::True),
            F("unrestrictedNetwork", true, Ty::True),
            F("protectedMetadataExposed", true, Ty::True),
        ],
    )
    .map(|_| ())
}

pub(in crate::event) fn check_permission_request(v: &Json) -> V<()> {
    let Some(o) = v.as_object() else {
        return Err(expected("an object", v));
    };
    for (key, ty) in [
        ("requestId", Ty::Str),
        ("toolUseId", Ty::Str),
        ("toolName", Ty::Str),
        ("category", Ty::Enum(TOOL_CATEGORIES)),
    ] {
        match o.get(key) {
            None => return Err(missing(key)),
            Some(x) => check_ty(x, ty).map_err(|e| at(key, e))?,
        }
    }
    let kind = o.get("kind").and_then(Json::as_js_str);
    let common = [
        F("kind", true, Ty::Any),
        F("requestId", true, Ty::Any),
        F("toolUseId", true, Ty::Any),
        F("toolName", true, Ty::Any),
        F("category", true, Ty::Any),
    ];
    match kind {
        Some(k) if *k == "tool_permission" => {
            let mut fields = common.to_vec();
            fields.extend([
                F("reason", true, Ty::Enum(TOOL_PERMISSION_REASONS)),
                F("args", true, Ty::Any),
                F("rememberForTurnAllowed", true, Ty::Bool),
                F("hint", false, Ty::Str),
            ]);
            check_closed(v, &fields).map(|_| ())
        }
        Some(k) if *k == "additional_permissions" => {
            let mut fields = common.to_vec();
            fields.extend([
                F("reason", true, Ty::Enum(&["additional_permissions"])),
                F("additionalPermissions", true, Ty::Check(check_additional_permission_profile)),
                F("cwd", true, Ty::Str),
                F("justification", true, Ty::Str),
                F("intentHash", true, Ty::Str),
                F("permissionsHash", true, Ty::Str),
                F("risk", true, Ty::Check(check_additional_permission_risk)),
                F("alsoApprovesToolExecution", true, Ty::Bool),
                F("availableDecisions", true, Ty::Check(check_allow_once_deny)),
                F("hint", false, Ty::Str),
            ]);
            check_closed(v, &fields).map(|_| ())
        }
        Some(k) if *k == "sandbox_escalation" => {
            let mut fields = common.to_vec();
            fields[3] = F("toolName", true, Ty::Enum(&["Bash"]));
            fields.extend([
                F("reason", true, Ty::Enum(&["sandbox_escalation"])),
                F("command", true, Ty::Str),
                F("cwd", true, Ty::Str),
                F("justification", true, Ty::Str),
                F("intentHash", true, Ty::Str),
                F("commandHash", true, Ty::Str),
                F("trigger", true, Ty::Enum(&["proactive", "sandbox_denial"])),
                F("risk", true, Ty::Check(check_sandbox_escalation_risk)),
                F("alsoApprovesToolExecution", true, Ty::Bool),
                F("availableDecisions", true, Ty::Check(check_allow_once_deny)),
                F("hint", false, Ty::Str),
            ]);
            check_closed(v, &fields).map(|_| ())
        }
        _ => Err(
            "kind: expected one of \"tool_permission\", \"additional_permissions\", \"sandbox_escalation\""
                .into(),
        ),
    }
}

// ----- additional permission profile -----

const MAX_ADDITIONAL_FILESYSTEM_ENTRIES: usize = 32;
const MAX_ADDITIONAL_PERMISSION_PATH_UNITS: usize = 4096;
const MAX_ADDITIONAL_PERMISSION_SERIALIZED_BYTES: usize = 64 * 1024;

struct FsEntry<'a> {
    path: &'a JsStr,
    write: bool,
    subtree: bool,
}

fn has_only_keys(o: &JsObject, allowed: &[&str]) -> bool {
    o.keys().all(|k| allowed.iter().any(|a| *k == **a))
}

/// Maka's `validateAdditionalPermissionProfile(...).ok`.
fn check_additional_permission_profile(v: &Json) -> V<()> {
    let Some(o) = v.as_object() else {
        return Err(expected("an object", v));
    };
    if !has_only_keys(o, &["fileSystem", "network"]) {
        return Err(": unsupported key (allowed: fileSystem, network)".into());
    }
    let mut entries: Vec<FsEntry> = Vec::new();
    if let Some(fs) = o.get("fileSystem") {
        let items = match fs.as_object() {
            Some(f) if has_only_keys(f, &["entries"]) => match f.get("entries") {
                Some(Json::Array(items)) => items,
                _ => return Err("fileSystem: must contain an entries array".into()),
            },
            _ => return Err("fileSystem: must contain an entries array".into()),
        };
        if items.len() > MAX_ADDITIONAL_FILESYSTEM_ENTRIES {
            return Err(format!(
                "fileSystem.entries: at most {MAX_ADDITIONAL_FILESYSTEM_ENTRIES} entries"
            ));
        }
        for (i, c) in items.iter().enumerate() {
            let here = |m: &str| format!("fileSystem.entries[{i}]: {m}");
            let Some(c) = c
                .as_object()
                .filter(|c| has_only_keys(c, &["path", "access", "scope"]))
            else {
                return Err(here("unsupported fields"));
            };
            let path = c.get("path").and_then(Json::as_js_str);
            let access = c.get("access").and_then(Json::as_js_str);
            let scope = c.get("scope").and_then(Json::as_js_str);
            let (Some(path), Some(access), Some(scope)) = (path, access, scope) else {
                return Err(here("must contain path, access and scope"));
            };
            if !(*access == "read" || *access == "write")
                || !(*scope == "exact" || *scope == "subtree")
            {
                return Err(here("must contain path, access and scope"));
            }
            let units: Vec<u16> = path.utf16().collect();
            if !is_normalized_absolute_path(&units) {
                return Err(here("path must be a normalized absolute path"));
            }
            if units.len() > MAX_ADDITIONAL_PERMISSION_PATH_UNITS {
                return Err(here("path exceeds the length limit"));
            }
            // A normalized path has no trailing separators to trim.
            entries.push(FsEntry {
                path,
                write: *access == "write",
                subtree: *scope == "subtree",
            });
        }
    }
    let network = match o.get("network") {
        None => false,
        Some(n) => match n.as_object() {
            Some(n)
                if has_only_keys(n, &["enabled"])
                    && matches!(n.get("enabled"), Some(Json::Bool(true))) =>
            {
                true
            }
            _ => return Err("network: only supports enabled: true".into()),
        },
    };
    if entries.is_empty() && !network {
        return Err(": must contain at least one permission".into());
    }
    let compacted = compact_entries(entries);
    // {"fileSystem":{"entries":[{"path":…,"access":…,"scope":…},…]},"network":{"enabled":true}}
    let mut size = 2;
    if !compacted.is_empty() {
        size += "\"fileSystem\":{\"entries\":[]}".len();
        for (i, e) in compacted.iter().enumerate() {
            size += usize::from(i > 0);
            size += "{\"path\":,\"access\":,\"scope\":}".len() + json_string_bytes(e.path);
            size += if e.write { 7 } else { 6 };
            size += if e.subtree { 9 } else { 7 };
        }
    }
    if network {
        size += usize::from(!compacted.is_empty()) + "\"network\":{\"enabled\":true}".len();
    }
    if size > MAX_ADDITIONAL_PERMISSION_SERIALIZED_BYTES {
        return Err(": exceeds the serialized size limit".into());
    }
    Ok(())
}

/// Bytes of `JSON.stringify(s)` in UTF-8 (quotes included).
fn json_string_bytes(s: &JsStr) -> usize {
    2 + s
        .code_points()
        .map(|c| match c {
            0x22 | 0x5c | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2,
            0..=0x1f => 6,
            0xd800..=0xdfff => 6,
            0x20..=0x7f => 1,
            0x80..=0x7ff => 2,
            0x800..=0xffff => 3,
            _ => 4,
        })
        .sum::<usize>()
}

fn is_drive_path(p: &[u16]) -> bool {
    p.len() >= 3
        && (p[0] < 0x80 && (p[0] as u8).is_ascii_alphabetic())
        && p[1] == u16::from(b':')
        && p[2] == u16::from(b'\\')
}

/// Maka's `isNormalizedAbsolutePath`, on UTF-16 units.
fn is_normalized_absolute_path(p: &[u16]) -> bool {
    const SLASH: u16 = b'/' as u16;
    const BACKSLASH: u16 = b'\\' as u16;
    const COLON: u16 = b':' as u16;
    let bad_segment =
        |s: &[u16]| s.is_empty() || s == [b'.' as u16] || s == [b'.' as u16, b'.' as u16];
    if p.is_empty() || p.contains(&0) {
        return false;
    }
    if is_drive_path(p) {
        if p[2..].contains(&COLON) || p.contains(&SLASH) {
            return false;
        }
        if p.len() > 3 && p.last() == Some(&BACKSLASH) {
            return false;
        }
        if p.len() == 3 {
            return true;
        }
        return !p[3..].split(|c| *c == BACKSLASH).any(bad_segment);
    }
    if p[0] != SLASH || p.contains(&BACKSLASH) {
        return false;
    }
    if p.len() > 1 && p.last() == Some(&SLASH) {
        return false;
    }
    !p.split(|c| *c == SLASH).skip(1).any(bad_segment)
}

/// `comparablePath`: drive paths lower-cased (the paths here are already trimmed).
fn comparable_path(path: &JsStr) -> Vec<u16> {
    let units: Vec<u16> = path.utf16().collect();
    if !is_drive_path(&units) {
        return units;
    }
    match path.as_str() {
        Some(s) => s.to_lowercase().encode_utf16().collect(),
        None => path
            .code_points()
            .flat_map(|c| match char::from_u32(c) {
                Some(ch) => ch
                    .to_lowercase()
                    .flat_map(|l| {
                        let mut buf = [0u16; 2];
                        l.encode_utf16(&mut buf).to_vec()
                    })
                    .collect::<Vec<u16>>(),
                None => vec![c as u16],
            })
            .collect(),
    }
}

fn path_within_root(path: &JsStr, root: &JsStr) -> bool {
    let p = comparable_path(path);
    let r = comparable_path(root);
    let p_drive = is_drive_path(&path.utf16().collect::<Vec<_>>());
    let r_drive = is_drive_path(&root.utf16().collect::<Vec<_>>());
    if p.is_empty()
        || r.is_empty()
        || !is_normalized_absolute_path(&p)
        || !is_normalized_absolute_path(&r)
        || p_drive != r_drive
    {
        return false;
    }
    if r == [b'/' as u16] {
        return p.first() == Some(&(b'/' as u16));
    }
    let sep = if r_drive { b'\\' as u16 } else { b'/' as u16 };
    let mut prefix = r.clone();
    if prefix.last() != Some(&sep) {
        prefix.push(sep);
    }
    p == r || p.starts_with(&prefix)
}

fn same_path(a: &JsStr, b: &JsStr) -> bool {
    let da = is_drive_path(&a.utf16().collect::<Vec<_>>());
    let db = is_drive_path(&b.utf16().collect::<Vec<_>>());
    da == db && comparable_path(a) == comparable_path(b)
}

fn permission_covers(existing: &FsEntry, candidate: &FsEntry) -> bool {
    if candidate.write && !existing.write {
        return false;
    }
    if !existing.subtree {
        return !candidate.subtree && same_path(existing.path, candidate.path);
    }
    path_within_root(candidate.path, existing.path)
}

/// Maka's `compactAdditionalFileSystemPermissions`, for its size only: the entries
/// that no other entry covers. (Maka orders paths with `localeCompare`; this uses
/// UTF-16 order, which can only pick a different one of two entries that differ in
/// the letter case of a drive path.)
fn compact_entries(mut entries: Vec<FsEntry>) -> Vec<FsEntry> {
    entries.sort_by(|a, b| {
        a.path
            .cmp_utf16(b.path)
            .then(b.subtree.cmp(&a.subtree))
            .then(b.write.cmp(&a.write))
    });
    let mut compacted: Vec<FsEntry> = Vec::new();
    for entry in entries {
        if compacted.iter().any(|e| permission_covers(e, &entry)) {
            continue;
        }
        compacted.retain(|e| !permission_covers(&entry, e));
        compacted.push(entry);
    }
    compacted
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;

    fn permission(kind_fields: &str) -> String {
        format!(
            r#"{{"requestId":"r","toolUseId":"u","toolName":"Bash","category":"shell_unsafe",{kind_fields}}}"#
        )
    }

    fn additional(profile: &str) -> String {
        permission(&format!(
            r#""kind":"additional_permissions","reason":"additional_permissions","additionalPermissions":{profile},"cwd":"/","justification":"j","intentHash":"h","permissionsHash":"h","risk":{{"outsideWorkspace":true,"protectedMetadata":false,"networkEnabled":false}},"alsoApprovesToolExecution":false,"availableDecisions":["allow_once","deny"]"#
        ))
    }

    #[test]
    fn permission_requests() {
        let pr = ["actions", "permissionRequest"];
        ok(
            &pr,
            &permission(
                r#""kind":"tool_permission","reason":"custom","args":null,"rememberForTurnAllowed":true"#,
            ),
        );
        rejects(
            &pr,
            &permission(
                r#""kind":"tool_permission","reason":"custom","rememberForTurnAllowed":true"#,
            ),
            "actions.permissionRequest.args: missing",
        );
        rejects(
            &pr,
            &permission(r#""kind":"other""#),
            "actions.permissionRequest.kind",
        );
        let escalation = r#""kind":"sandbox_escalation","reason":"sandbox_escalation","command":"ls","cwd":"/","justification":"j","intentHash":"h","commandHash":"h","trigger":"proactive","risk":{"unsandboxedExecution":true,"unrestrictedFileSystem":true,"unrestrictedNetwork":true,"protectedMetadataExposed":true},"alsoApprovesToolExecution":true,"availableDecisions":["allow_once","deny"]"#;
        ok(&pr, &permission(escalation));
        rejects(
            &pr,
            &permission(escalation).replace(r#""toolName":"Bash""#, r#""toolName":"Sh""#),
            "actions.permissionRequest.toolName",
        );
        rejects(
            &pr,
            &permission(escalation).replace(r#"["allow_once","deny"]"#, r#"["deny","allow_once"]"#),
            "actions.permissionRequest.availableDecisions",
        );

        ok(&pr, &additional(r#"{"network":{"enabled":true}}"#));
        ok(
            &pr,
            &additional(
                r#"{"fileSystem":{"entries":[{"path":"/a/b","access":"read","scope":"exact"}]}}"#,
            ),
        );
        ok(
            &pr,
            &additional(
                r#"{"fileSystem":{"entries":[{"path":"C:\\a","access":"write","scope":"subtree"}]}}"#,
            ),
        );
        for bad_path in [
            "/",
            "/a/",
            "a/b",
            "/a/../b",
            "/a//b",
            "C:\\\\a\\\\",
            "C:\\\\a/b",
        ] {
            let profile = format!(
                r#"{{"fileSystem":{{"entries":[{{"path":"{bad_path}","access":"read","scope":"exact"}}]}}}}"#
            );
            rejects(
                &pr,
                &additional(&profile),
                "actions.permissionRequest.additionalPermissions.fileSystem.entries[0]",
            );
        }
        rejects(
            &pr,
            &additional("{}"),
            "actions.permissionRequest.additionalPermissions: must contain at least one",
        );
        rejects(
            &pr,
            &additional(r#"{"network":{"enabled":false}}"#),
            "actions.permissionRequest.additionalPermissions.network",
        );
    }

    #[test]
    fn additional_permission_size_counts_compacted_entries() {
        let pr = ["actions", "permissionRequest"];
        let long = "x".repeat(4000);
        let entries = |root_scope: &str| {
            let mut list = vec![format!(
                r#"{{"path":"/{long}","access":"write","scope":"{root_scope}"}}"#
            )];
            for i in 0..20 {
                list.push(format!(
                    r#"{{"path":"/{long}/{i}","access":"read","scope":"exact"}}"#
                ));
            }
            format!(r#"{{"fileSystem":{{"entries":[{}]}}}}"#, list.join(","))
        };
        // 21 paths of ~4 KB: over 64 KiB unless the subtree root covers the other 20.
        ok(&pr, &additional(&entries("subtree")));
        rejects(
            &pr,
            &additional(&entries("exact")),
            "actions.permissionRequest.additionalPermissions: exceeds the serialized size limit",
        );
    }
}
