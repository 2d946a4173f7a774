//! The composition checks of each release, in the order the release runs them.

use std::collections::{BTreeMap, BTreeSet};

use super::legacy;
use super::runtime_steps;
use super::{Migration, Refusal, Verdict};
use crate::db::startup::{Cell, StartupFacts};
use crate::release::{catalog, generation_of, release_rank};

/// How a release opens the operational database (the named rule switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// v0.1.0, v0.1.1: only the runtime store lives in the file (opt-in mode); it
    /// migrates an older `user_version` and refuses a newer one.
    RuntimeOnly,
    /// v0.1.2 to v0.1.6: each store migrates in turn and refuses a newer version of
    /// itself; the registry is written last and only the scopes the release knows are
    /// looked at. No registry is fine (it is created).
    PerStore,
    /// v0.1.7 to v0.1.10: the same, after a pre-check of every version (unknown and
    /// invalid registry scopes refuse too) so that nothing is half-migrated.
    Prechecked,
    /// v0.1.11 and main: the registry must exist in a nonempty file, every scope must
    /// be known, the legacy scheduling tables must agree with their versions, and after
    /// the migrations the schema must equal the release's target object for object.
    TargetSchema,
}

/// One release's composition: its family and its data.
#[derive(Clone, Debug)]
pub struct Composition {
    pub release: &'static str,
    pub family: Family,
    /// The runtime schema (`user_version`) the release writes.
    pub runtime: i64,
    /// Registry scopes and their versions, in the order the release registers them.
    pub scopes: Vec<(String, i64)>,
    /// Scopes the release no longer keeps but still reads to migrate them away.
    pub removed_scopes: &'static [(&'static str, i64)],
    /// main: completed legacy cutover and import metadata is checked and dropped
    /// during the migration (`retireCompletedLegacyMigrationMetadata`); v0.1.11 keeps it,
    /// so its target check then meets it as unexpected.
    pub retires_legacy_metadata: bool,
    /// The target schema (key → signature) of a `TargetSchema` release.
    pub target: Option<&'static BTreeMap<String, String>>,
}

/// The order in which releases list their scopes (`OPERATIONAL_SCHEMA_VERSIONS`).
const SCOPE_ORDER: &[&str] = &[
    "runtime",
    "session_metadata",
    "core_execution",
    "workflow",
    "usage",
    "artifact",
    "automation",
    "operational",
];

/// Released objects that later migrations leave in place (measured:
/// `../shared/spec/releases/schemas/migrated/`): v0.1.2's agent mailbox.
const KEPT_BY_MIGRATIONS: &[&str] = &[
    "index:workflow_agent_mailbox_scope",
    "table:workflow_agent_mailbox_messages",
];

const UPGRADE: &str =
    "; Maka did not migrate or delete the database. Upgrade Maka to open this workspace.";
const RESTORE: &str = "; Maka did not migrate or delete the database. Restore or repair this \
                       workspace before opening it.";

/// The composition of a release the catalog knows.
pub fn composition_of(release: &str) -> Option<Composition> {
    let g = generation_of(release)?;
    let tag: &'static str = crate::release::RELEASES
        .iter()
        .copied()
        .find(|r| *r == release)?;
    let rank = release_rank(tag)?;
    let at = |t: &str| release_rank(t).unwrap_or(usize::MAX);
    let family = if g.registry.is_none() {
        Family::RuntimeOnly
    } else if rank < at("v0.1.7") {
        Family::PerStore
    } else if rank < at("v0.1.11") {
        Family::Prechecked
    } else {
        Family::TargetSchema
    };
    let registry = g.registry.clone().unwrap_or_default();
    let scopes = SCOPE_ORDER
        .iter()
        .filter_map(|s| registry.get(*s).map(|v| ((*s).to_owned(), *v)))
        .collect();
    let target_schema = family == Family::TargetSchema;
    Some(Composition {
        release: tag,
        family,
        runtime: g.user_version,
        scopes,
        removed_scopes: if target_schema {
            &[("automation", 2)]
        } else {
            &[]
        },
        retires_legacy_metadata: target_schema && rank >= at("main"),
        target: target_schema.then(|| g.fresh()),
    })
}

/// The store (registry scope) a table belongs to, by Maka's table names.
pub fn store_of_table(table: &str) -> &'static str {
    match table {
        "operational_schema_migrations" => "operational",
        "cutover_journal" | "runtime_import_sources" | "session_metadata_import_sources" => {
            "legacy_metadata"
        }
        t if t.starts_with("automation_") => "automation",
        t if t.starts_with("core_") => "core_execution",
        t if t.starts_with("workflow_") => "workflow",
        t if t.starts_with("usage_") => "usage",
        t if t.starts_with("artifact_") => "artifact",
        t if t.starts_with("runtime_") || t.starts_with("tool_") || t.starts_with("headless_") => {
            "runtime"
        }
        _ => "session_metadata",
    }
}

/// The table a signature (`type:tbl_name:sql`) is attached to.
pub fn table_of(signature: &str) -> &str {
    signature.split(':').nth(1).unwrap_or("")
}

fn refusal(reason: &'static str, store: &str, object: Option<String>, msg: String) -> Refusal {
    Refusal {
        reason,
        store: store.to_owned(),
        object,
        maka_message: msg,
        version: None,
        supported_version: None,
    }
}

/// `Some(version)` of the session-metadata schema row, as the release reads it:
/// `Ok(0)` without a row (or without the table), `Err` when the value is invalid.
fn session_metadata_version(f: &StartupFacts) -> Result<i64, ()> {
    match &f.session_metadata_version {
        None | Some(None) => Ok(0),
        Some(Some(c)) => c.non_negative_integer().ok_or(()),
    }
}

impl Composition {
    fn supported(&self, scope: &str) -> Option<i64> {
        self.scopes
            .iter()
            .find(|(s, _)| s == scope)
            .map(|(_, v)| *v)
    }

    /// What this release does with a file of these facts.
    pub fn judge(&self, f: &StartupFacts) -> Verdict {
        let mut v = match self.family {
            Family::RuntimeOnly => self.runtime_only(f),
            Family::PerStore | Family::Prechecked => self.per_store(f),
            Family::TargetSchema => self.target_schema(f),
        };
        // Open, the composition's runtime store checks its capabilities last.
        if v.opens {
            if let Some(x) = runtime_steps::capability_refusal(f, self.release, self.runtime) {
                v = Verdict::refuses(self.release, x);
            }
        }
        v.not_modelled = match self.release {
            "v0.1.0" | "v0.1.1" => Some(
                "this release reads the file only in its opt-in SQLite mode, beside \
                 `sessions.sqlite` and `sessions/`; those are not read"
                    .to_owned(),
            ),
            "v0.1.2" | "v0.1.3" => Some(
                "the cutover of the legacy session files beside the database that this \
                 release runs at start-up is not modelled"
                    .to_owned(),
            ),
            _ => None,
        };
        v
    }

    fn runtime_only(&self, f: &StartupFacts) -> Verdict {
        let uv = f.user_version;
        if uv < 0 {
            return invalid_runtime(self.release);
        }
        if uv > self.runtime {
            return newer_with(
                self.release,
                "runtime",
                uv,
                self.runtime,
                format!(
                    "SQLite runtime schema {uv} is newer than supported version {}",
                    self.runtime
                ),
            );
        }
        let mut m = Vec::new();
        if uv < self.runtime {
            if let Some(x) = runtime_steps::migration_failure(f, self.release, self.runtime) {
                return Verdict::refuses(self.release, x);
            }
            m.push(step("runtime", Some(uv), Some(self.runtime)));
        }
        Verdict::opens(self.release, m)
    }

    /// v0.1.2 to v0.1.10.
    fn per_store(&self, f: &StartupFacts) -> Verdict {
        let r = self.release;
        let pre = self.family == Family::Prechecked;
        let uv = f.user_version;
        let sm_sup = self.supported("session_metadata").unwrap_or(0);
        let rows = match &f.registry {
            Some(Err(e)) => {
                return Verdict::refuses(
                    r,
                    refusal("schema_registry_invalid", "operational", None, e.clone()),
                )
            }
            Some(Ok(rows)) => Some(rows),
            None => None,
        };
        if pre {
            // assertOperationalSchemaCanMigrate
            if uv < 0 {
                return invalid_runtime(r);
            }
            if uv > self.runtime {
                return newer(r, "runtime", uv, self.runtime, true);
            }
            if f.session_metadata_version.is_some() {
                match session_metadata_version(f) {
                    Err(()) => return invalid_session_metadata(r),
                    Ok(v) if v > sm_sup => return newer(r, "session_metadata", v, sm_sup, true),
                    _ => {}
                }
            }
            for (scope, version) in rows.into_iter().flatten() {
                let Some(scope) = scope.text() else { continue };
                let Some(sup) = self.supported(scope) else {
                    return unknown_scope(r, scope);
                };
                match version.non_negative_integer() {
                    None => return invalid_version(r, scope, version),
                    Some(n) if n > sup => return newer(r, scope, n, sup, true),
                    _ => {}
                }
            }
        }
        // The stores migrate one after the other.
        let mut m = Vec::new();
        if uv < 0 {
            return invalid_runtime(r);
        }
        if uv > self.runtime {
            return newer_with(
                r,
                "runtime",
                uv,
                self.runtime,
                format!(
                    "SQLite runtime schema {uv} is newer than supported version {}",
                    self.runtime
                ),
            );
        }
        if uv < self.runtime {
            if let Some(x) = runtime_steps::migration_failure(f, r, self.runtime) {
                return Verdict::refuses(r, x);
            }
            m.push(step("runtime", Some(uv), Some(self.runtime)));
        }
        match session_metadata_version(f) {
            Err(()) => return invalid_session_metadata(r),
            Ok(v) if v > sm_sup => {
                return newer_with(
                    r,
                    "session_metadata",
                    v,
                    sm_sup,
                    format!(
                    "SQLite session metadata schema {v} is newer than supported version {sm_sup}"
                ),
                )
            }
            Ok(v) if v < sm_sup => m.push(step(
                "session_metadata",
                f.session_metadata_version.is_some().then_some(v),
                Some(sm_sup),
            )),
            _ => {}
        }
        // Then the registry, scope by scope (registerSchema).
        for (scope, sup) in &self.scopes {
            let existing = rows
                .into_iter()
                .flatten()
                .find(|(s, _)| s.text() == Some(scope.as_str()))
                .map(|(_, v)| v);
            match existing {
                Some(version) => match version.non_negative_integer() {
                    None if pre => return invalid_version(r, scope, version),
                    Some(n) if n <= *sup => {
                        if n < *sup && !matches!(scope.as_str(), "runtime" | "session_metadata") {
                            m.push(step(scope, Some(n), Some(*sup)));
                        }
                    }
                    // Before v0.1.7 any unreadable or larger version reads as "newer".
                    other => {
                        return newer(r, scope, other.unwrap_or(-1), *sup, pre);
                    }
                },
                None => {
                    if !matches!(scope.as_str(), "runtime" | "session_metadata") {
                        m.push(step(scope, None, Some(*sup)));
                    }
                }
            }
        }
        Verdict::opens(r, m)
    }

    /// v0.1.11 and main.
    fn target_schema(&self, f: &StartupFacts) -> Verdict {
        let r = self.release;
        let uv = f.user_version;
        let sm_sup = self.supported("session_metadata").unwrap_or(0);
        if uv < 0 {
            return invalid_runtime(r);
        }
        if uv > self.runtime {
            return newer(r, "runtime", uv, self.runtime, true);
        }
        let mut needs = uv < self.runtime;
        let mut versions: BTreeMap<&str, i64> = BTreeMap::new();
        let mut sm = None;
        if f.session_metadata_version.is_some() {
            match session_metadata_version(f) {
                Err(()) => return invalid_session_metadata(r),
                Ok(v) if v > sm_sup => return newer(r, "session_metadata", v, sm_sup, true),
                Ok(v) => {
                    needs |= v < sm_sup;
                    sm = Some(v);
                }
            }
        } else {
            needs = true;
        }
        let rows = match &f.registry {
            None => {
                if uv == 0 && f.objects.is_empty() {
                    // A new, empty file: every store is created.
                    let mut m = vec![step("runtime", Some(0), Some(self.runtime))];
                    m.extend(
                        self.scopes
                            .iter()
                            .filter(|(s, _)| s != "runtime")
                            .map(|(s, v)| step(s, None, Some(*v))),
                    );
                    return Verdict::opens(r, m);
                }
                return Verdict::refuses(
                    r,
                    refusal(
                        "schema_registry_missing",
                        "operational",
                        Some("table:operational_schema_migrations".into()),
                        format!(
                            "Operational schema registry is missing from a nonempty database{RESTORE}"
                        ),
                    ),
                );
            }
            Some(Err(e)) => {
                return Verdict::refuses(
                    r,
                    refusal("schema_registry_invalid", "operational", None, e.clone()),
                )
            }
            Some(Ok(rows)) => rows,
        };
        let mut registered: BTreeMap<&str, i64> = BTreeMap::new();
        let mut removed: Vec<(&str, i64)> = Vec::new();
        for (scope, version) in rows {
            let Some(scope) = scope.text() else {
                return Verdict::refuses(
                    r,
                    refusal(
                        "schema_registry_invalid",
                        "operational",
                        None,
                        format!("Operational schema registry has an invalid scope{RESTORE}"),
                    ),
                );
            };
            let Some(sup) = self.supported(scope) else {
                if let Some((name, rv)) = self.removed_scopes.iter().find(|(s, _)| *s == scope) {
                    let Some(n) = version.non_negative_integer() else {
                        return Verdict::refuses(
                            r,
                            refusal(
                                "schema_registry_invalid",
                                scope,
                                Some(scope.to_owned()),
                                format!(
                                    "Operational schema {scope} has invalid version {}",
                                    version.display()
                                ),
                            ),
                        );
                    };
                    if n > *rv {
                        return newer(r, scope, n, *rv, true);
                    }
                    versions.insert(name, n);
                    removed.push((name, n));
                    needs = true;
                    continue;
                }
                return unknown_scope(r, scope);
            };
            let Some(n) = version.non_negative_integer() else {
                return invalid_version(r, scope, version);
            };
            if n > sup {
                return newer(r, scope, n, sup, true);
            }
            let scope: &str = self
                .scopes
                .iter()
                .find(|(s, _)| s == scope)
                .map(|(s, _)| s.as_str())
                .unwrap_or("");
            registered.insert(scope, n);
            if scope == "workflow" {
                versions.insert("workflow", n);
            }
        }
        if let Some(x) = legacy::scheduling_schema(f, &versions) {
            return Verdict::refuses(r, x);
        }
        for (scope, sup) in &self.scopes {
            match registered.get(scope.as_str()) {
                None => {
                    return Verdict::refuses(
                        r,
                        refusal(
                            "schema_registry_scope_missing",
                            "operational",
                            Some(scope.clone()),
                            format!(
                                "Operational schema registry is missing scope {scope}{RESTORE}"
                            ),
                        ),
                    )
                }
                Some(n) => needs |= n < sup,
            }
        }
        let target = self.target.cloned().unwrap_or_default();
        let actual: BTreeMap<&str, &str> = f
            .objects
            .iter()
            .map(|o| (o.key.as_str(), o.signature.as_str()))
            .collect();
        let exact = actual.len() == target.len()
            && target
                .iter()
                .all(|(k, s)| actual.get(k.as_str()) == Some(&s.as_str()));
        if !needs && exact {
            return Verdict::opens(r, Vec::new());
        }

        // The migration, in the release's order.
        if let Some(x) = legacy::plan_scheduled_tasks(f, &versions) {
            return Verdict::refuses(r, x);
        }
        if uv < self.runtime {
            if let Some(x) = runtime_steps::migration_failure(f, r, self.runtime) {
                return Verdict::refuses(r, x);
            }
        }
        let migrating = |store: &str| -> bool {
            match store {
                "runtime" => uv < self.runtime,
                "session_metadata" => sm.is_none_or(|v| v < sm_sup),
                s => match (registered.get(s), self.supported(s)) {
                    (Some(n), Some(sup)) => *n < sup,
                    _ => false,
                },
            }
        };
        let recreated_anyway = |store: &str, key: &str| {
            matches!(
                store,
                "core_execution" | "workflow" | "usage" | "artifact" | "operational"
            ) || key == "table:session_metadata_schema"
        };
        let mut m = Vec::new();
        if uv < self.runtime {
            m.push(step("runtime", Some(uv), Some(self.runtime)));
        }
        if migrating("session_metadata") {
            m.push(step("session_metadata", sm, Some(sm_sup)));
        }
        for (scope, sup) in &self.scopes {
            if matches!(scope.as_str(), "runtime" | "session_metadata") {
                continue;
            }
            if let Some(n) = registered.get(scope.as_str()) {
                if n < sup {
                    m.push(step(scope, Some(*n), Some(*sup)));
                }
            }
        }
        // The schema after the migrations (predicted).
        let mut after: BTreeMap<String, String> = actual
            .iter()
            .map(|(k, s)| ((*k).to_owned(), (*s).to_owned()))
            .collect();
        // A store's migration steps run from its version on: what already existed at
        // that version and no later step changes (same definition in the target) is not
        // created again (measured generations say what existed; without one, the steps
        // are assumed to produce the target).
        let from = |store: &str| -> Option<i64> {
            match store {
                "runtime" => Some(uv),
                "session_metadata" => sm,
                s => registered.get(s).copied(),
            }
        };
        let untouched = |store: &str, key: &str, sig: &str| -> bool {
            from(store)
                .and_then(|v| objects_at(store, v))
                .is_some_and(|base| base.get(key).is_some_and(|s| s == sig))
        };
        let mut recreates: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (key, sig) in &target {
            let store = store_of_table(table_of(sig));
            let migrated = migrating(store) && !untouched(store, key, sig);
            match after.get(key) {
                None if migrated => {
                    after.insert(key.clone(), sig.clone());
                }
                None if recreated_anyway(store, key) => {
                    after.insert(key.clone(), sig.clone());
                    recreates.entry(store).or_default().push(key.clone());
                }
                Some(s) if s != sig && migrated => {
                    after.insert(key.clone(), sig.clone());
                }
                _ => {}
            }
        }
        for (store, keys) in recreates {
            let n = registered.get(store).copied();
            let mut s = step(store, n, n);
            s.recreates = keys;
            m.push(s);
        }
        let released = released_before(self.release);
        after.retain(|key, sig| {
            if target.contains_key(key) {
                return true;
            }
            let store = store_of_table(table_of(sig));
            if store == "automation" {
                return false;
            }
            if store == "legacy_metadata" {
                return true;
            }
            !(migrating(store)
                && released.contains(key.as_str())
                && !KEPT_BY_MIGRATIONS.contains(&key.as_str()))
        });
        for (name, n) in &removed {
            m.push(step(name, Some(*n), None));
        }
        if self.retires_legacy_metadata {
            if let Some(x) = legacy::retire_metadata(f) {
                return Verdict::refuses(r, x);
            }
            let before = after.len();
            after.retain(|_, sig| store_of_table(table_of(sig)) != "legacy_metadata");
            if after.len() != before {
                m.push(step("legacy_metadata", None, None));
            }
        }
        // assertCurrentOperationalTargetSchema
        for (key, sig) in &target {
            let store = store_of_table(table_of(sig));
            match after.get(key) {
                None => {
                    return Verdict::refuses(
                        r,
                        refusal(
                            "schema_object_missing",
                            store,
                            Some(key.clone()),
                            format!(
                                "Incomplete operational SQLite schema: missing required schema object {key}"
                            ),
                        ),
                    )
                }
                Some(s) if s != sig => {
                    return Verdict::refuses(
                        r,
                        refusal(
                            "schema_object_unfamiliar",
                            store,
                            Some(key.clone()),
                            format!(
                                "Incomplete operational SQLite schema: schema object {key} has an incompatible definition"
                            ),
                        ),
                    )
                }
                _ => {}
            }
        }
        if let Some((key, sig)) = after.iter().find(|(k, _)| !target.contains_key(*k)) {
            return Verdict::refuses(
                r,
                refusal(
                    "schema_object_unexpected",
                    store_of_table(table_of(sig)),
                    Some(key.clone()),
                    format!("Incomplete operational SQLite schema: unexpected schema object {key}"),
                ),
            );
        }
        Verdict::opens(r, m)
    }
}

/// The objects of the newest generation whose `store` is at `version` (runtime: its
/// `user_version`), as that release creates them.
fn objects_at(store: &str, version: i64) -> Option<&'static BTreeMap<String, String>> {
    catalog()
        .iter()
        .rev()
        .find(|g| match store {
            "runtime" => g.user_version == version,
            s => g
                .registry
                .as_ref()
                .is_some_and(|r| r.get(s) == Some(&version)),
        })
        .map(|g| g.fresh())
}

/// Every object key some release before `release` writes (fresh or migrated): the
/// objects Maka's own migrations know how to replace or drop.
fn released_before(release: &str) -> BTreeSet<&'static str> {
    let rank = release_rank(release).unwrap_or(0);
    catalog()
        .iter()
        .filter(|g| g.rank() < rank)
        .flat_map(|g| g.variants.iter())
        .flat_map(|v| v.objects.keys().map(String::as_str))
        .collect()
}

fn step(store: &str, from: Option<i64>, to: Option<i64>) -> Migration {
    Migration {
        store: store.to_owned(),
        from,
        to,
        recreates: Vec::new(),
    }
}

fn newer(r: &str, scope: &str, found: i64, sup: i64, suffix: bool) -> Verdict {
    newer_with(
        r,
        scope,
        found,
        sup,
        format!(
            "Operational schema {scope} is newer than supported version {sup}{}",
            if suffix { UPGRADE } else { "" }
        ),
    )
}

/// A `schema_newer` refusal with the versions named (`found` < 0: none recorded).
fn newer_with(r: &str, scope: &str, found: i64, sup: i64, msg: String) -> Verdict {
    let mut x = refusal("schema_newer", scope, Some(scope.to_owned()), msg);
    x.version = (found >= 0).then_some(found);
    x.supported_version = Some(sup);
    Verdict::refuses(r, x)
}

fn invalid_version(r: &str, scope: &str, version: &Cell) -> Verdict {
    Verdict::refuses(
        r,
        refusal(
            "schema_registry_invalid",
            scope,
            Some(scope.to_owned()),
            format!(
                "Operational schema {scope} has invalid version {}{RESTORE}",
                version.display()
            ),
        ),
    )
}

fn unknown_scope(r: &str, scope: &str) -> Verdict {
    Verdict::refuses(
        r,
        refusal(
            "schema_scope_unknown",
            scope,
            Some(scope.to_owned()),
            format!("Operational schema {scope} is unknown to this Maka build{UPGRADE}"),
        ),
    )
}

fn invalid_runtime(r: &str) -> Verdict {
    Verdict::refuses(
        r,
        refusal(
            "schema_registry_invalid",
            "runtime",
            None,
            "Invalid SQLite runtime schema version".into(),
        ),
    )
}

fn invalid_session_metadata(r: &str) -> Verdict {
    Verdict::refuses(
        r,
        refusal(
            "schema_registry_invalid",
            "session_metadata",
            Some("table:session_metadata_schema".into()),
            "Invalid SQLite session metadata schema version".into(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(tag: &str) -> StartupFacts {
        StartupFacts::of_schema(&generation_of(tag).unwrap().facts(0))
    }

    fn judge(release: &str, f: &StartupFacts) -> Verdict {
        composition_of(release).unwrap().judge(f)
    }

    fn reason(v: &Verdict) -> Option<&'static str> {
        v.refusal.as_ref().map(|r| r.reason)
    }

    #[test]
    fn families_follow_the_release_order() {
        let fam = |t: &str| composition_of(t).unwrap().family;
        assert_eq!(fam("v0.1.1"), Family::RuntimeOnly);
        assert_eq!(fam("v0.1.2"), Family::PerStore);
        assert_eq!(fam("v0.1.6"), Family::PerStore);
        assert_eq!(fam("v0.1.7"), Family::Prechecked);
        assert_eq!(fam("v0.1.10"), Family::Prechecked);
        assert_eq!(fam("v0.1.11"), Family::TargetSchema);
        assert!(!composition_of("v0.1.11").unwrap().retires_legacy_metadata);
        assert!(composition_of("main").unwrap().retires_legacy_metadata);
    }

    #[test]
    fn every_release_opens_its_own_fresh_file_as_it_is() {
        for tag in crate::release::RELEASES {
            let v = judge(tag, &fresh(tag));
            assert!(v.opens, "{tag}: {v:?}");
            assert!(v.migrations.is_empty(), "{tag}: {v:?}");
        }
    }

    #[test]
    fn v015_migrates_a_runtime_only_file_that_v0111_and_main_refuse() {
        let f = fresh("v0.1.0");
        let v = judge("v0.1.5", &f);
        assert!(v.opens, "{v:?}");
        assert_eq!(v.migrations[0], step("runtime", Some(4), Some(9)));
        assert!(v
            .migrations
            .iter()
            .any(|m| m.store == "workflow" && m.from.is_none()));
        for t in ["v0.1.11", "main"] {
            assert_eq!(
                reason(&judge(t, &f)),
                Some("schema_registry_missing"),
                "{t}"
            );
        }
    }

    #[test]
    fn a_newer_runtime_schema_is_refused_in_each_releases_words() {
        let mut f = fresh("main");
        f.user_version = 13;
        let v = judge("v0.1.5", &f);
        let r = v.refusal.unwrap();
        assert_eq!(r.reason, "schema_newer");
        assert_eq!(
            r.maka_message,
            "SQLite runtime schema 13 is newer than supported version 9"
        );
        assert_eq!((r.version, r.supported_version), (Some(13), Some(9)));
        let r = judge("v0.1.7", &f).refusal.unwrap();
        assert!(r
            .maka_message
            .starts_with("Operational schema runtime is newer than supported version 11;"));
        let r = judge("main", &f).refusal.unwrap();
        assert_eq!(r.store, "runtime");
        assert!(r
            .maka_message
            .ends_with("Upgrade Maka to open this workspace."));
    }

    #[test]
    fn an_unknown_scope_is_ignored_before_v017_and_refused_after() {
        let mut f = fresh("v0.1.5");
        if let Some(Ok(rows)) = &mut f.registry {
            rows.push((Cell::Text("future_scope".into()), Cell::Integer(1)));
        }
        assert!(judge("v0.1.5", &f).opens);
        assert_eq!(reason(&judge("v0.1.7", &f)), Some("schema_scope_unknown"));
        assert_eq!(reason(&judge("main", &f)), Some("schema_scope_unknown"));
    }

    #[test]
    fn a_dropped_runtime_index_refuses_from_v0111_and_a_core_index_is_recreated() {
        let drop = |tag: &str, key: &str| {
            let mut f = fresh(tag);
            f.objects.retain(|o| o.key != key);
            f
        };
        let f = drop("main", "index:runtime_events_by_run");
        let v = judge("main", &f);
        assert_eq!(reason(&v), Some("schema_object_missing"));
        assert_eq!(
            v.refusal.unwrap().object.as_deref(),
            Some("index:runtime_events_by_run")
        );
        // v0.1.5 checks versions only: it opens the file as it is.
        let f = drop("v0.1.5", "index:runtime_events_by_run");
        assert!(judge("v0.1.5", &f).opens);
        // The runtime migrations 10 to 12 do not create it again.
        let v = judge("main", &f);
        assert_eq!(reason(&v), Some("schema_object_missing"), "{v:?}");
        let f = drop("main", "index:core_agent_runs_session_order");
        let v = judge("main", &f);
        assert!(v.opens, "{v:?}");
        assert_eq!(
            v.migrations[0].recreates,
            ["index:core_agent_runs_session_order"]
        );
    }

    #[test]
    fn main_retires_legacy_metadata_only_when_its_rows_are_complete() {
        let mut f = fresh("v0.1.3");
        assert!(judge("main", &f).opens);
        assert_eq!(
            reason(&judge("v0.1.11", &f)),
            Some("schema_object_unexpected")
        );
        let row = |state: &str| {
            vec![
                ("store_name".to_owned(), Cell::Text("shell_runs".into())),
                ("source_path".to_owned(), Cell::Text("/x".into())),
                ("source_fingerprint".to_owned(), Cell::Text("f".into())),
                ("state".to_owned(), Cell::Text(state.into())),
                ("started_at".to_owned(), Cell::Integer(1)),
                ("completed_at".to_owned(), Cell::Integer(2)),
                (
                    "validation_json".to_owned(),
                    Cell::Text("{\"shell_runs\":3}".into()),
                ),
            ]
        };
        f.cutover_journal = Some(Ok(vec![row("completed")]));
        assert!(judge("main", &f).opens);
        f.cutover_journal = Some(Ok(vec![row("started")]));
        assert_eq!(reason(&judge("main", &f)), Some("legacy_cutover_invalid"));
    }
}
