//! What the newest Maka builds do with an older file when they open it: whether they
//! migrate it at all, and which rules they then judge it by. Pure.

use super::{release_rank, Generation, Rules};

/// The builds the upgrade findings speak for: the newest release (what users get) and
/// main (issue notes, 34). The preview itself lists every newer build.
pub const TARGETS: &[&str] = &["v0.1.11", "main"];

/// Objects that v0.1.2 and v0.1.3 leave behind and that a later release refuses to
/// migrate ("Incomplete operational SQLite schema: unexpected schema object …"),
/// measured on real files (`../shared/spec/releases/schemas/migrated/README.md`).
/// v0.1.11 refuses all of them; main retires the first three itself and refuses the
/// mailbox ones.
const LEGACY_OBJECTS: &[(&str, &[&str])] = &[
    (
        "v0.1.11",
        &[
            "index:workflow_agent_mailbox_scope",
            "table:workflow_agent_mailbox_messages",
            "table:cutover_journal",
            "table:runtime_import_sources",
            "table:session_metadata_import_sources",
        ],
    ),
    (
        "main",
        &[
            "index:workflow_agent_mailbox_scope",
            "table:workflow_agent_mailbox_messages",
        ],
    ),
];

/// Every catalogued build newer than generation `g`, oldest first (the upgrade
/// preview's targets).
pub fn targets_for(g: &Generation) -> Vec<&'static str> {
    super::RELEASES
        .iter()
        .copied()
        .filter(|t| release_rank(t).is_some_and(|r| r > g.rank()))
        .collect()
}

/// The rules a target applies to a file it migrated. Session-header statuses and
/// `archivedAt` that the target no longer accepts are rewritten by its own
/// session-metadata migrations, so they do not count against the file.
pub fn target_rules(target: &str) -> Rules {
    let mut rules = Rules::for_release(target);
    rules.header.legacy_session_statuses = true;
    rules
}

/// Why `target` refuses to migrate a file with these schema object keys, if it does.
/// `None` also for a file the target has not been measured on (v0.1.0 and v0.1.1's
/// opt-in files): see [`migration_measured`].
pub fn migration_refusal<'a>(
    target: &str,
    object_keys: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let legacy = LEGACY_OBJECTS
        .iter()
        .find(|(t, _)| *t == target)
        .map(|(_, o)| *o)?;
    let mut found: Vec<&str> = object_keys
        .into_iter()
        .filter(|k| legacy.contains(k))
        .collect();
    found.sort_unstable();
    found.first().map(|k| {
        format!(
            "Maka {target} refuses to migrate it (unexpected schema object {k}, left by \
             v0.1.2 or v0.1.3) and leaves the file as it is"
        )
    })
}

/// Whether the migration of generation `g` by the targets was measured on real files
/// (every release from v0.1.2; v0.1.0 and v0.1.1 keep an opt-in file that no later
/// release was measured migrating).
pub fn migration_measured(g: &Generation) -> bool {
    g.rules().ledger_gate
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::generation_of;

    #[test]
    fn targets_are_the_newer_builds() {
        assert_eq!(
            targets_for(generation_of("v0.1.5").unwrap()),
            ["v0.1.6", "v0.1.7", "v0.1.8", "v0.1.9", "v0.1.10", "v0.1.11", "main"]
        );
        assert_eq!(targets_for(generation_of("v0.1.11").unwrap()), ["main"]);
        assert!(targets_for(generation_of("main").unwrap()).is_empty());
    }

    #[test]
    fn v012_and_v013_files_are_refused_as_measured() {
        let keys = |tag: &str| -> Vec<String> {
            generation_of(tag)
                .unwrap()
                .fresh()
                .keys()
                .cloned()
                .collect()
        };
        let v012 = keys("v0.1.2");
        let v013 = keys("v0.1.3");
        let v015 = keys("v0.1.5");
        let refuses = |t: &str, k: &Vec<String>| migration_refusal(t, k.iter().map(String::as_str));
        assert!(refuses("v0.1.11", &v012).is_some());
        assert!(refuses("v0.1.11", &v013).is_some());
        assert!(refuses("main", &v012).is_some());
        assert!(
            refuses("main", &v013).is_none(),
            "main retires v0.1.3's leftovers"
        );
        assert!(refuses("v0.1.11", &v015).is_none());
        assert!(refuses("main", &v015).is_none());
    }
}
