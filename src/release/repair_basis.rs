//! The schema basis of a repair: which release's schema a repair writes in, or why a
//! repair must refuse the file. Pure (schema facts in, a verdict out); `db::write` is
//! handed [`schema_gate`] and asks it before and inside every transaction.

use crate::db::SchemaFacts;

/// The tables a repair reads or writes (finalize-runs, quarantine, restore, and what
/// their foreign keys cascade to in every release).
pub const REPAIR_TABLES: &[&str] = &[
    "runtime_events",
    "runtime_session_event_ordinals",
    "runtime_partial_snapshots",
    "runtime_partial_segments",
    "tool_operations",
    "tool_journal_events",
    "core_agent_runs",
    "core_agent_run_events",
    "core_agent_run_projections",
    "core_root_turn_admissions",
    "core_root_turn_start_rejections",
    "workflow_goal_authority",
    "session_metadata",
    "session_messages",
    "session_message_payloads",
    "session_message_chunks",
    "session_catalog_state",
    "session_catalog_projection",
    "session_catalog_label_projection",
    "session_metadata_labels",
    "session_metadata_tombstones",
    "runtime_continuation_claims",
];

/// The release schema a repair writes in: the file's own release, or, for a file that
/// matches no known release, the closest one whose repair tables the file has exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteBasis {
    /// The releases of the generation relied on.
    pub releases: Vec<String>,
    /// The file is exactly that generation.
    pub exact: bool,
    /// How the file differs from it (none in the repair tables).
    pub differences: Vec<String>,
}

impl WriteBasis {
    /// `schema_basis` in the repairs' JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "releases": self.releases,
            "exact": self.exact,
            "differences": self.differences,
        })
    }
}

/// How the refusal of a file written by a Maka newer than this wsledger begins (the
/// writing commands give it its own hint, see `crate::apply::schema_refusal`).
pub const NEWER_PREFIX: &str = "it was written by a Maka newer than this wsledger";

/// What every writing command says instead of writing into a file whose schema
/// wsledger knows only from Maka's published sources, or not at all.
pub const NEWER_HINT: &str = "update wsledger to a version that knows this Maka, or let that \
Maka's own start-up recovery run (it finalizes the runs it finds stuck); `wsledger replay` and \
`wsledger doctor scan` still read the file";

/// Why nothing may be written into this file because a Maka newer than every build
/// wsledger was verified against wrote it (issue notes, 41), if so.
pub fn newer_refusal(facts: &SchemaFacts) -> Option<String> {
    let r = super::recognize(facts);
    if !r.is_newer() {
        return None;
    }
    Some(format!(
        "{NEWER_PREFIX} ({}): its schema is {}, so wsledger writes nothing into it",
        r.newer_words(),
        match r.known_from {
            crate::db::KnownFrom::Source => "known only from Maka's published sources",
            _ => "newer than every generation wsledger knows",
        }
    ))
}

/// The schema basis of a repair on this file, or why a repair must refuse it.
pub fn write_basis(facts: &SchemaFacts) -> Result<WriteBasis, Vec<String>> {
    if let Some(why) = newer_refusal(facts) {
        return Err(vec![why]);
    }
    let r = super::recognize(facts);
    let g = r.generation;
    let releases = g.releases.clone();
    if !g.rules().ledger_gate {
        return Err(vec![format!(
            "it was written by Maka {} in its opt-in mode, which keeps run headers and \
             sessions in files beside it: there is nothing wsledger can repair in it",
            g.display()
        )]);
    }
    if r.exact() {
        return Ok(WriteBasis {
            releases,
            exact: true,
            differences: Vec::new(),
        });
    }
    let variant = g
        .variants
        .iter()
        .find(|v| v.label == r.variant)
        .unwrap_or(&g.variants[0]);
    let actual: std::collections::BTreeMap<&str, &str> = facts
        .objects
        .iter()
        .map(|o| (o.key.as_str(), o.signature.as_str()))
        .collect();
    let mut problems = Vec::new();
    for t in REPAIR_TABLES {
        let key = format!("table:{t}");
        match (variant.objects.get(&key), actual.get(key.as_str())) {
            (Some(want), Some(have)) if want == have => {}
            (Some(_), Some(_)) => problems.push(format!("table `{t}` differs")),
            (Some(_), None) => problems.push(format!("table `{t}` is missing")),
            (None, Some(_)) => problems.push(format!("table `{t}` is not Maka {}'s", g.display())),
            (None, None) => {}
        }
    }
    if problems.is_empty() {
        Ok(WriteBasis {
            releases,
            exact: false,
            differences: r.differences.lines(),
        })
    } else {
        let mut out = vec![format!(
            "it matches no known Maka release, and differs from the closest, {}, in the \
             tables a repair writes",
            g.display()
        )];
        out.extend(problems);
        Err(out)
    }
}

/// The gate `db::write::Writer` asks: [`write_basis`] without the basis.
pub fn schema_gate(facts: &SchemaFacts) -> Result<(), Vec<String>> {
    write_basis(facts).map(|_| ())
}
