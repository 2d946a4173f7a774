//! The schema basis of a repair: which release's schema a repair writes in, or why a
//! repair must refuse the file. Pure (schema facts in, a verdict out); `db::write` is
//! handed [`schema_gate`] and asks it before and inside every transaction.

use super::Generation;
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

/// Whether wsledger may write into a file of generation `g`: its rules were checked
/// against that build's own code (`known_from` `"build"`; the generations learned from
/// Maka's published sources are not). The one place to ask.
pub fn verified_against_build(g: &Generation) -> bool {
    g.known_from == super::KnownFrom::Build
}

/// The basis of a write into a file that is a known generation less derived objects
/// that `doctor rederive` puts back (`derived::missing`): that generation's schema, not
/// exact. `Err` when the file is not such a file.
pub fn rederive_basis(facts: &SchemaFacts) -> Result<WriteBasis, Vec<String>> {
    match super::derived::missing(facts) {
        Ok(Some(m)) if !m.generation.rules().ledger_gate => Err(vec![format!(
            "it was written by Maka {} in its opt-in mode, which keeps run headers and \
             sessions in files beside it: there is nothing wsledger can repair in it",
            m.generation.display()
        )]),
        Ok(Some(m)) if !verified_against_build(m.generation) => Err(vec![format!(
            "Maka {}'s schema was not checked against that build's own code",
            m.generation.display()
        )]),
        Ok(Some(m)) => Ok(WriteBasis {
            releases: m.generation.releases.clone(),
            exact: false,
            differences: super::recognize(facts).differences.lines(),
        }),
        Ok(None) => write_basis(facts),
        Err(e) => Err(e.why),
    }
}

/// The basis of a repair that may run before `doctor rederive` in one plan (excise,
/// quarantine, `doctor repair`): [`write_basis`], or, for a file that is a known
/// generation less derived objects only, [`rederive_basis`] (their statements find
/// a missing tool projection table and leave it alone).
pub fn write_basis_before_rederive(facts: &SchemaFacts) -> Result<WriteBasis, Vec<String>> {
    write_basis(facts).or_else(|why| rederive_basis(facts).map_err(|_| why))
}

/// The gate `db::write::Writer` asks: [`write_basis_before_rederive`] without the
/// basis (every command's own refusal comes first: finalize-runs' is [`write_basis`]).
pub fn schema_gate(facts: &SchemaFacts) -> Result<(), Vec<String>> {
    write_basis_before_rederive(facts).map(|_| ())
}

/// The schema a bundle written into this file records (a bundle goes back only into
/// it): the file's, or, for a file that is a known generation less derived objects,
/// that generation's, the schema the file has once `doctor rederive` (the plan's step
/// before or after the one writing the bundle) has put them back.
pub fn bundle_schema(facts: &SchemaFacts) -> crate::bundle::SchemaInfo {
    match super::derived::missing(facts) {
        Ok(Some(m)) => crate::bundle::SchemaInfo {
            user_version: m.generation.user_version,
            registry: m.generation.registry.clone(),
            capabilities: m.generation.capabilities.clone(),
        },
        _ => facts.bundle_schema(),
    }
}
