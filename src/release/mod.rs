//! Which Maka release wrote a workspace, and the rules that release applies.
//!
//! Every Maka release since v0.1.0 leaves its own schema generation behind:
//! `PRAGMA user_version`, the scope registry (`operational_schema_migrations`), the
//! capability rows and the set of schema objects. The catalog (`catalog.txt`, data
//! generated from real files by `tests/release_catalog.rs`) holds each generation as the
//! release creates it fresh and, where they differ, as it leaves an older file it
//! migrated. Recognising a file is an exact comparison against that catalog; a file that
//! matches none is measured against the closest generation.
//!
//! The ledger rules changed little across releases; what changed is in [`rules`], as
//! named switches keyed by generation. Pure: no SQL, no I/O.

pub mod advice;
pub mod compat;
pub mod derived;
pub mod maka02;
pub mod repair_basis;
pub mod rules;
pub mod source;
pub mod upgrade;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::db::schema::SchemaDiff;
use crate::db::SchemaFacts;

pub use crate::db::KnownFrom;
pub use rules::Rules;

/// Every release tag the catalog knows, oldest first, then the main-branch build that
/// `../shared/maka-real/` was written by.
pub const RELEASES: &[&str] = &[
    "v0.1.0", "v0.1.1", "v0.1.2", "v0.1.3", "v0.1.4", "v0.1.5", "v0.1.6", "v0.1.7", "v0.1.8",
    "v0.1.9", "v0.1.10", "v0.1.11", "main",
];

/// The newest published release: what users get when they upgrade today.
pub const NEWEST_RELEASE: &str = "v0.1.11";

/// The name wsledger gives the Maka that wrote a file newer than every generation it
/// verified against a build (`workspace_release.rules`, `startup.release`).
pub const NEWER: &str = "newer";

const CATALOG: &str = include_str!("catalog.txt");
const SOURCE_CATALOG: &str = include_str!("catalog-source.txt");

/// One schema generation: what one or more consecutive releases write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generation {
    /// The release tags that write exactly this generation, oldest first.
    pub releases: Vec<String>,
    pub user_version: i64,
    /// Scope → version; `None` where the release has no registry table.
    pub registry: Option<BTreeMap<String, i64>>,
    /// Capability → version; `None` where the release has no capability table.
    pub capabilities: Option<BTreeMap<String, i64>>,
    /// The object sets this generation is found with: first as created fresh, then as
    /// left by migrating an older file (where that differs).
    pub variants: Vec<Variant>,
    /// `Build` for the catalog of real files, `Source` for a generation composed from
    /// the published steps (`source`).
    pub known_from: KnownFrom,
}

/// One object set of a generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    /// `fresh`, or `migrated from vX by vY` (comma-joined where several agree).
    pub label: String,
    /// `type:name` → normalized signature, as `db::schema::schema_object` builds it.
    pub objects: BTreeMap<String, String>,
}

impl Generation {
    /// The newest release of this generation (its rules apply: issue notes, 34).
    pub fn newest(&self) -> &str {
        self.releases
            .last()
            .map(String::as_str)
            .unwrap_or("unknown")
    }

    /// The oldest release of this generation.
    pub fn oldest(&self) -> &str {
        self.releases
            .first()
            .map(String::as_str)
            .unwrap_or("unknown")
    }

    /// Position in release order (later generations are larger; every generation
    /// known only from the sources comes after main).
    pub fn rank(&self) -> usize {
        match self.known_from {
            KnownFrom::Build => release_rank(self.newest()).unwrap_or(0),
            _ => RELEASES.len(),
        }
    }

    /// Whether this is the main-branch build rather than a published release.
    pub fn is_main(&self) -> bool {
        self.known_from == KnownFrom::Build && self.newest() == "main"
    }

    /// Whether the generation is older than the newest published release.
    pub fn is_older_than_newest_release(&self) -> bool {
        self.rank() < release_rank(NEWEST_RELEASE).unwrap_or(0)
    }

    /// `v0.1.7 to v0.1.10`-style name for people.
    pub fn display(&self) -> String {
        if self.known_from != KnownFrom::Build {
            return format!("{} (published sources)", self.newest());
        }
        match self.releases.len() {
            0 => "an unknown release".to_owned(),
            1 => self.releases[0].clone(),
            2 => format!("{} or {}", self.releases[0], self.releases[1]),
            _ => format!("{} to {}", self.oldest(), self.newest()),
        }
    }

    /// The rules of the release that wrote this generation.
    pub fn rules(&self) -> Rules {
        match self.known_from {
            KnownFrom::Build => Rules::for_release(self.newest()),
            _ => newer_file_rules(),
        }
    }

    /// The fresh object set.
    pub fn fresh(&self) -> &BTreeMap<String, String> {
        &self.variants[0].objects
    }

    /// The schema facts of a file that is exactly variant `v` of this generation (for
    /// tests and fuzzing, which need a file the catalog knows).
    pub fn facts(&self, v: usize) -> SchemaFacts {
        let objects: Vec<crate::db::schema::SchemaObject> = self.variants[v]
            .objects
            .iter()
            .map(|(key, signature)| crate::db::schema::SchemaObject {
                key: key.clone(),
                signature: signature.clone(),
            })
            .collect();
        SchemaFacts {
            user_version: self.user_version,
            tables: objects
                .iter()
                .filter_map(|o| o.key.strip_prefix("table:").map(str::to_owned))
                .collect(),
            objects,
            registry: self.registry.clone(),
            capabilities: self.capabilities.clone(),
        }
    }

    /// Whether the generation has a table of this name (in its fresh form).
    pub fn has_table(&self, name: &str) -> bool {
        self.fresh().contains_key(&format!("table:{name}"))
    }
}

/// Index of `tag` in [`RELEASES`].
pub fn release_rank(tag: &str) -> Option<usize> {
    RELEASES.iter().position(|r| *r == tag)
}

/// Every generation in the catalog, oldest first.
pub fn catalog() -> &'static [Generation] {
    static PARSED: OnceLock<Vec<Generation>> = OnceLock::new();
    PARSED.get_or_init(|| parse_catalog(CATALOG).expect("the bundled catalog parses (tested)"))
}

/// The published steps newer than main (`catalog-source.txt`).
pub fn source_steps() -> &'static [source::SourceStep] {
    static PARSED: OnceLock<Vec<source::SourceStep>> = OnceLock::new();
    PARSED.get_or_init(|| {
        source::parse_steps(SOURCE_CATALOG).expect("the bundled source catalog parses (tested)")
    })
}

/// Every generation known only from Maka's published sources (see `source`).
pub fn source_catalog() -> &'static [Generation] {
    static COMPOSED: OnceLock<Vec<Generation>> = OnceLock::new();
    COMPOSED.get_or_init(|| match catalog().last() {
        Some(main) => source::compose(main, source_steps()),
        None => Vec::new(),
    })
}

/// The rules wsledger applies to a file newer than every generation verified against
/// a build (`known_from` `source` or `none`). This is the one place that choice is
/// made: the newest rules Maka's published sources confirm ([`Rules::newer_than_known`]).
pub fn newer_file_rules() -> Rules {
    Rules::newer_than_known()
}

/// The generation a release tag wrote.
pub fn generation_of(tag: &str) -> Option<&'static Generation> {
    catalog()
        .iter()
        .find(|g| g.releases.iter().any(|r| r == tag))
}

/// The generation with exactly these versions (`user_version`, registry, capabilities),
/// e.g. of a bundle, which records no schema objects.
pub fn generation_by_versions(
    user_version: i64,
    registry: Option<&BTreeMap<String, i64>>,
    capabilities: Option<&BTreeMap<String, i64>>,
) -> Option<&'static Generation> {
    catalog().iter().find(|g| {
        g.user_version == user_version
            && g.registry.as_ref() == registry
            && g.capabilities.as_ref() == capabilities
    })
}

/// Parses the catalog's text form (see `catalog.txt`'s header).
pub fn parse_catalog(text: &str) -> Result<Vec<Generation>, String> {
    let mut out: Vec<Generation> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bad = || format!("catalog line {}: {line:?}", n + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        if word == "generation" {
            out.push(Generation {
                releases: Vec::new(),
                user_version: 0,
                registry: None,
                capabilities: None,
                variants: vec![Variant {
                    label: "fresh".to_owned(),
                    objects: BTreeMap::new(),
                }],
                known_from: KnownFrom::Build,
            });
            continue;
        }
        let g = out.last_mut().ok_or_else(bad)?;
        match word {
            "releases" => g.releases = rest.split(' ').map(str::to_owned).collect(),
            "user_version" => g.user_version = rest.parse().map_err(|_| bad())?,
            "registry" => g.registry = parse_pairs(rest).ok_or_else(bad)?,
            "capabilities" => g.capabilities = parse_pairs(rest).ok_or_else(bad)?,
            "variant" => {
                let objects = g.variants[0].objects.clone();
                g.variants.push(Variant {
                    label: rest.to_owned(),
                    objects,
                });
            }
            "=" | "+" => {
                let (key, sig) = rest.split_once('\t').ok_or_else(bad)?;
                let v = g.variants.last_mut().ok_or_else(bad)?;
                v.objects.insert(key.to_owned(), sig.to_owned());
            }
            "-" => {
                let v = g.variants.last_mut().ok_or_else(bad)?;
                v.objects.remove(rest).ok_or_else(bad)?;
            }
            _ => return Err(bad()),
        }
    }
    if out.iter().any(|g| g.releases.is_empty()) {
        return Err("a catalog generation names no release".to_owned());
    }
    Ok(out)
}

/// `-` (no table) or `a=1 b=2`.
fn parse_pairs(s: &str) -> Option<Option<BTreeMap<String, i64>>> {
    if s == "-" {
        return Some(None);
    }
    let mut map = BTreeMap::new();
    for pair in s.split(' ').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=')?;
        map.insert(k.to_owned(), v.parse().ok()?);
    }
    Some(Some(map))
}

/// Formats a registry or capability map as the catalog does.
pub fn format_pairs(map: Option<&BTreeMap<String, i64>>) -> String {
    match map {
        None => "-".to_owned(),
        Some(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// How a file differs from one generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Differences {
    pub objects: SchemaDiff,
    /// `(file, generation)` when `user_version` differs.
    pub user_version: Option<(i64, i64)>,
    /// One line per registry difference.
    pub registry: Vec<String>,
    /// One line per capability difference.
    pub capabilities: Vec<String>,
}

impl Differences {
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
            && self.user_version.is_none()
            && self.registry.is_empty()
            && self.capabilities.is_empty()
    }

    /// How far the file is from the generation (used to pick the closest).
    fn weight(&self) -> usize {
        self.objects.missing.len()
            + self.objects.changed.len()
            + self.objects.unexpected.len()
            + usize::from(self.user_version.is_some()) * 4
            + self.registry.len()
            + self.capabilities.len()
    }

    /// Every difference, one line each, for people.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((file, want)) = self.user_version {
            out.push(format!("user_version is {file}, not {want}"));
        }
        out.extend(self.registry.iter().cloned());
        out.extend(self.capabilities.iter().cloned());
        out.extend(
            self.objects
                .missing
                .iter()
                .map(|k| format!("`{k}` is missing")),
        );
        out.extend(
            self.objects
                .changed
                .iter()
                .map(|k| format!("`{k}` differs")),
        );
        out.extend(
            self.objects
                .unexpected
                .iter()
                .map(|k| format!("`{k}` is not in that release's schema")),
        );
        out
    }
}

/// What the catalog says about one file.
#[derive(Clone, Debug)]
pub struct Recognition {
    /// The generation the file equals, or the closest one.
    pub generation: &'static Generation,
    /// The variant compared against (the exact one, or the closest).
    pub variant: &'static str,
    /// Empty when the file equals the generation.
    pub differences: Differences,
    /// Where wsledger's knowledge of the file's generation comes from: `Build` unless
    /// the file is ahead of main in some scope; then `Source` when every scope ahead
    /// is at a version the sources state, else `None` (the newer scope decides).
    pub known_from: KnownFrom,
    /// The scopes in which the file is ahead of every generation verified against a
    /// build (empty for a `Build` file).
    pub newer_scopes: Vec<NewerScope>,
}

/// A scope in which a file is ahead of main, the newest generation verified against
/// a build.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NewerScope {
    /// `runtime` (the runtime schema, `user_version`) or a registry scope.
    pub scope: String,
    pub version: i64,
    /// main's version of it (`null`: main has no such scope).
    pub newest_verified: Option<i64>,
    /// The newest version Maka's published sources state (`null`: none).
    pub newest_stated: Option<i64>,
}

impl Recognition {
    pub fn exact(&self) -> bool {
        self.differences.is_empty()
    }

    /// The release tags that wrote exactly this file (empty when none did).
    pub fn matches(&self) -> Vec<&'static str> {
        if self.exact() {
            self.generation
                .releases
                .iter()
                .map(String::as_str)
                .collect()
        } else {
            Vec::new()
        }
    }

    /// The rules the scan applies: the writer's, or the closest generation's; for a
    /// file newer than every verified generation ([`newer_file_rules`]). The one place
    /// a file's rules are chosen.
    pub fn rules(&self) -> Rules {
        match self.known_from {
            KnownFrom::Build => self.generation.rules(),
            _ => newer_file_rules(),
        }
    }

    /// Whether the file was written by a Maka newer than every build wsledger was
    /// verified against (nothing may be written into it, and its start-up is not known).
    pub fn is_newer(&self) -> bool {
        self.known_from != KnownFrom::Build
    }

    /// The scopes ahead, for people: `runtime 15 where the newest known is 12, …`.
    pub fn newer_words(&self) -> String {
        self.newer_scopes
            .iter()
            .map(|n| match n.newest_verified {
                Some(v) => format!("{} {} where the newest known is {v}", n.scope, n.version),
                None => format!("{} {}, which no known build has", n.scope, n.version),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The scopes in which `facts` are ahead of main (the newest verified generation).
fn newer_scopes(facts: &SchemaFacts) -> Vec<NewerScope> {
    newer_scopes_of(facts.user_version, facts.registry.as_ref())
}

/// [`newer_scopes`] of a file's versions alone (a bundle records no schema objects).
fn newer_scopes_of(user_version: i64, registry: Option<&BTreeMap<String, i64>>) -> Vec<NewerScope> {
    let Some(main) = catalog().last() else {
        return Vec::new();
    };
    let stated = source::stated_versions(source_steps());
    let newest_stated = |scope: &str| stated.get(scope).and_then(|v| v.last()).copied();
    // A scope some older generation had (`automation`) is retired, not newer.
    let ever = |scope: &str| {
        catalog()
            .iter()
            .any(|g| g.registry.as_ref().is_some_and(|r| r.contains_key(scope)))
    };
    let mut out = Vec::new();
    if user_version > main.user_version {
        out.push(NewerScope {
            scope: "runtime".into(),
            version: user_version,
            newest_verified: Some(main.user_version),
            newest_stated: newest_stated("runtime"),
        });
    }
    let main_registry = main.registry.clone().unwrap_or_default();
    // A scope row that is not a scope name, or a version below zero, is damage (Maka
    // calls it invalid), never a newer Maka's.
    let valid = |scope: &str, v: i64| {
        v >= 0
            && scope.starts_with(|c: char| c.is_ascii_lowercase())
            && scope
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    for (scope, &v) in registry.into_iter().flatten() {
        if !valid(scope, v) {
            continue;
        }
        let known = main_registry.get(scope).copied();
        let ahead = match known {
            Some(k) => v > k,
            None => !ever(scope),
        };
        let dup = out.iter().any(|n| n.scope == *scope && n.version == v);
        if ahead && !dup {
            out.push(NewerScope {
                scope: scope.clone(),
                version: v,
                newest_verified: known,
                newest_stated: newest_stated(scope),
            });
        }
    }
    out
}

/// Compares a file's schema facts with one variant of a generation.
pub fn differences(facts: &SchemaFacts, g: &Generation, v: &Variant) -> Differences {
    let mut d = Differences {
        objects: diff_objects(&facts.objects, &v.objects),
        ..Differences::default()
    };
    if facts.user_version != g.user_version {
        d.user_version = Some((facts.user_version, g.user_version));
    }
    d.registry = diff_pairs(
        "operational_schema_migrations",
        "scope",
        facts.registry.as_ref(),
        g.registry.as_ref(),
    );
    d.capabilities = diff_pairs(
        "runtime_capabilities",
        "capability",
        facts.capabilities.as_ref(),
        g.capabilities.as_ref(),
    );
    d
}

fn diff_objects(
    actual: &[crate::db::schema::SchemaObject],
    want: &BTreeMap<String, String>,
) -> SchemaDiff {
    let actual: BTreeMap<&str, &str> = actual
        .iter()
        .map(|o| (o.key.as_str(), o.signature.as_str()))
        .collect();
    let mut diff = SchemaDiff::default();
    for (key, sig) in want {
        match actual.get(key.as_str()) {
            None => diff.missing.push(key.clone()),
            Some(s) if *s != sig => diff.changed.push(key.clone()),
            Some(_) => {}
        }
    }
    for key in actual.keys() {
        if !want.contains_key(*key) {
            diff.unexpected.push((*key).to_owned());
        }
    }
    diff
}

fn diff_pairs(
    table: &str,
    what: &str,
    file: Option<&BTreeMap<String, i64>>,
    want: Option<&BTreeMap<String, i64>>,
) -> Vec<String> {
    match (file, want) {
        (None, None) => Vec::new(),
        (Some(_), None) => vec![format!("`{table}` exists, the release has none")],
        (None, Some(_)) => vec![format!("`{table}` is missing")],
        (Some(file), Some(want)) => {
            let mut out = Vec::new();
            for (k, v) in want {
                match file.get(k) {
                    Some(f) if f == v => {}
                    Some(f) => out.push(format!("{what} `{k}` is at version {f}, not {v}")),
                    None => out.push(format!("{what} `{k}` is not registered")),
                }
            }
            for (k, f) in file {
                if !want.contains_key(k) {
                    out.push(format!("{what} `{k}` (version {f}) is not the release's"));
                }
            }
            out
        }
    }
}

/// Whether a file's versions are ahead of main, the newest generation verified against
/// a build, in some scope ([`Recognition::is_newer`] without the schema objects).
pub fn newer_than_every_generation(facts: &SchemaFacts) -> bool {
    !newer_scopes(facts).is_empty()
}

/// The rules for a file with these versions when they are newer than every
/// generation the catalog knows: [`Rules::newer_than_known`]. The one place such a
/// file's rules are chosen (the scan through [`Recognition::rules`], replay from a
/// bundle's versions).
pub fn rules_if_newer(
    user_version: i64,
    registry: Option<&BTreeMap<String, i64>>,
) -> Option<Rules> {
    (!newer_scopes_of(user_version, registry).is_empty()).then(newer_file_rules)
}

/// Recognises the generation that wrote a file: the exact match, else the closest
/// (fewest differences; the newer on a tie) among the generations whose runtime schema
/// is not older than the file's own `user_version`: a file that a newer runtime store
/// wrote holds events an older decoder would call undecodable, which that store reads.
/// A file newer than every known generation is measured against the newest schemas.
pub fn recognize(facts: &SchemaFacts) -> Recognition {
    let newer = newer_scopes(facts);
    let mut best: Option<Recognition> = None;
    let floor = facts
        .user_version
        .min(catalog().iter().map(|g| g.user_version).max().unwrap_or(0));
    // A file ahead of main in some scope is measured against the source generations
    // too; any other file against the verified ones only, as always.
    let sources: &[Generation] = if newer.is_empty() {
        &[]
    } else {
        source_catalog()
    };
    let candidates = catalog().iter().chain(sources);
    for g in candidates.filter(|g| g.user_version >= floor) {
        for v in &g.variants {
            let d = differences(facts, g, v);
            let better = match &best {
                None => true,
                Some(b) => {
                    let (w, bw) = (d.weight(), b.differences.weight());
                    w < bw || (w == bw && g.rank() >= b.generation.rank())
                }
            };
            if better {
                best = Some(Recognition {
                    generation: g,
                    variant: v.label.as_str(),
                    differences: d,
                    known_from: KnownFrom::Build,
                    newer_scopes: Vec::new(),
                });
            }
        }
    }
    let mut r = best.expect("the catalog is not empty");
    if !newer.is_empty() {
        let stated = source::stated_versions(source_steps());
        let all_stated = newer.iter().all(|n| {
            stated
                .get(n.scope.as_str())
                .is_some_and(|v| v.contains(&n.version))
        });
        r.known_from = if r.exact() || all_stated {
            KnownFrom::Source
        } else {
            KnownFrom::None
        };
        r.newer_scopes = newer;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::schema::SchemaObject;

    #[test]
    fn every_release_has_one_generation_in_order() {
        let mut seen = Vec::new();
        for g in catalog() {
            for r in &g.releases {
                seen.push(r.as_str());
            }
        }
        assert_eq!(
            seen, RELEASES,
            "the catalog lists every release once, in order"
        );
    }

    #[test]
    fn each_variant_is_recognised_as_its_generation() {
        for g in catalog() {
            for (i, v) in g.variants.iter().enumerate() {
                let r = recognize(&g.facts(i));
                assert!(
                    r.exact(),
                    "{} {}: {:?}",
                    g.display(),
                    v.label,
                    r.differences
                );
                assert_eq!(r.generation.releases, g.releases);
            }
        }
    }

    #[test]
    fn one_extra_index_is_closest_to_its_generation() {
        let g = generation_of("v0.1.7").unwrap();
        let mut facts = g.facts(0);
        facts.objects.push(SchemaObject {
            key: "index:doctor_extra".into(),
            signature: "index:runtime_events:CREATE INDEX DOCTOR_EXTRA ON RUNTIME_EVENTS(RUN_ID)"
                .into(),
        });
        let r = recognize(&facts);
        assert!(!r.exact());
        assert!(r.matches().is_empty());
        assert_eq!(r.generation.releases, g.releases);
        assert_eq!(
            r.differences.objects.unexpected,
            vec!["index:doctor_extra".to_owned()]
        );
        assert_eq!(r.differences.lines().len(), 1);
    }

    #[test]
    fn a_file_matching_nothing_is_never_judged_by_an_older_runtime_schema() {
        // Runtime tables of main only, no registry: fewer differences from v0.1.0's
        // nine objects than from main's whole schema, but its user_version is 12.
        let main = generation_of("main").unwrap();
        let mut facts = main.facts(0);
        facts.registry = None;
        facts.capabilities = None;
        facts.objects.retain(|o| o.key.contains("runtime_"));
        facts.tables.retain(|t| t.starts_with("runtime_"));
        let r = recognize(&facts);
        assert!(!r.exact());
        assert_eq!(r.generation.user_version, 12, "{:?}", r.generation.releases);
        assert!(r.rules().decoder.is_main());
        // A file newer than every release is measured against the newest schemas,
        // and judged with the newest rules the published sources confirm.
        assert!(!recognize(&facts).is_newer());
        facts.user_version = 99;
        let r = recognize(&facts);
        assert_eq!(r.generation.user_version, 12);
        assert!(r.is_newer());
        assert_eq!(r.rules(), Rules::newer_than_known());
    }

    #[test]
    fn one_scope_ahead_is_newer_than_known() {
        let main = generation_of("main").unwrap();
        let mut facts = main.facts(0);
        assert!(!newer_than_every_generation(&facts));
        let registry = facts.registry.as_mut().unwrap();
        *registry.get_mut("core_execution").unwrap() += 2;
        assert!(newer_than_every_generation(&facts));
        assert_eq!(recognize(&facts).rules(), Rules::newer_than_known());
        // An older file's scope behind main is not newer.
        let old = generation_of("v0.1.5").unwrap().facts(0);
        assert!(!newer_than_every_generation(&old));
    }

    #[test]
    fn newest_release_is_not_older_than_itself() {
        assert!(!generation_of("v0.1.11")
            .unwrap()
            .is_older_than_newest_release());
        assert!(generation_of("v0.1.5")
            .unwrap()
            .is_older_than_newest_release());
        assert!(generation_of("main").unwrap().is_main());
    }
}
