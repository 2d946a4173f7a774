//! The generations newer than main that wsledger knows only from Maka's published
//! sources (`known_from: "source"`, issue notes 41).
//!
//! They are kept apart from the build catalog, in `catalog-source.txt`: per registry
//! scope, each published step (a version, and the schema objects it changes against
//! that scope's previous version), derived by our own builder from the facts (see that
//! file's header). A generation is main's schema with each scope moved to one of its
//! stated versions; since the steps of different scopes change different objects, every
//! combination is one generation. Which combinations upstream main went through is not
//! stated, so all of them are known. Pure.

use std::collections::BTreeMap;

use super::{Generation, Variant};
use crate::db::KnownFrom;

/// One published step of one scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceStep {
    /// Registry scope (`runtime` also moves `user_version`).
    pub scope: String,
    pub version: i64,
    /// Tells apart two object sets stated for the same version.
    pub label: Option<String>,
    /// Where the sources state it.
    pub source: String,
    /// `(key, Some(signature))` adds or replaces, `(key, None)` removes.
    pub changes: Vec<(String, Option<String>)>,
}

/// Parses `catalog-source.txt` (see its header).
pub fn parse_steps(text: &str) -> Result<Vec<SourceStep>, String> {
    let mut out: Vec<SourceStep> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bad = || format!("source catalog line {}: {line:?}", n + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        if word == "step" {
            let mut parts = rest.split(' ');
            let scope = parts.next().filter(|s| !s.is_empty()).ok_or_else(bad)?;
            let version = parts.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
            out.push(SourceStep {
                scope: scope.to_owned(),
                version,
                label: parts.next().map(str::to_owned),
                source: String::new(),
                changes: Vec::new(),
            });
            continue;
        }
        let step = out.last_mut().ok_or_else(bad)?;
        match word {
            "source" => step.source = rest.to_owned(),
            "+" => {
                let (key, sig) = rest.split_once('\t').ok_or_else(bad)?;
                step.changes.push((key.to_owned(), Some(sig.to_owned())));
            }
            "-" => step.changes.push((rest.to_owned(), None)),
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

/// One way a scope can be: at main's version (no step), or moved to a stated version
/// through the steps that lead there.
#[derive(Clone, Debug)]
struct ScopeState<'a> {
    version: i64,
    label: Option<&'a str>,
    steps: Vec<&'a SourceStep>,
}

/// The states each scope with steps can be in: main's, then each stated version (with
/// each of its object sets; earlier versions are passed through their first one).
fn scope_states<'a>(
    steps: &'a [SourceStep],
    main_version: i64,
    scope: &str,
) -> Vec<ScopeState<'a>> {
    let mut own: Vec<&SourceStep> = steps.iter().filter(|s| s.scope == scope).collect();
    own.sort_by_key(|s| s.version);
    let mut out = vec![ScopeState {
        version: main_version,
        label: None,
        steps: Vec::new(),
    }];
    let mut path: Vec<&SourceStep> = Vec::new();
    let mut i = 0;
    while i < own.len() {
        let v = own[i].version;
        let same: Vec<&SourceStep> = own[i..]
            .iter()
            .copied()
            .take_while(|s| s.version == v)
            .collect();
        for alt in &same {
            let mut steps = path.clone();
            steps.push(alt);
            out.push(ScopeState {
                version: v,
                label: alt.label.as_deref(),
                steps,
            });
        }
        path.push(same[0]);
        i += same.len();
    }
    out
}

/// The name of a source generation: main and the scopes moved on
/// (`main+runtime-15+core_execution-6`).
fn name_of(moved: &[(String, i64)]) -> String {
    let mut name = String::from("main");
    for (scope, v) in moved {
        name.push_str(&format!("+{scope}-{v}"));
    }
    name
}

/// Every generation the steps compose on `main` (every combination of scope states
/// but main's own), each with main's variants (fresh, and as main leaves files it
/// migrated) carried over.
pub fn compose(main: &Generation, steps: &[SourceStep]) -> Vec<Generation> {
    let registry = main.registry.clone().unwrap_or_default();
    let mut scopes: Vec<&str> = steps.iter().map(|s| s.scope.as_str()).collect();
    scopes.sort_unstable();
    scopes.dedup();
    let states: Vec<Vec<ScopeState<'_>>> = scopes
        .iter()
        .map(|s| {
            let main_version = if *s == "runtime" {
                main.user_version
            } else {
                registry.get(*s).copied().unwrap_or(0)
            };
            scope_states(steps, main_version, s)
        })
        .collect();
    // Generations keyed by their versions; alternatives of one version are variants.
    let mut gens: BTreeMap<Vec<i64>, Generation> = BTreeMap::new();
    let mut pick = vec![0usize; states.len()];
    loop {
        if pick.iter().any(|&p| p > 0) {
            let chosen: Vec<&ScopeState<'_>> =
                pick.iter().zip(&states).map(|(&p, s)| &s[p]).collect();
            let key: Vec<i64> = chosen.iter().map(|s| s.version).collect();
            let moved: Vec<(String, i64)> = scopes
                .iter()
                .zip(&chosen)
                .filter(|(_, s)| !s.steps.is_empty())
                .map(|(scope, s)| ((*scope).to_owned(), s.version))
                .collect();
            let labels: Vec<&str> = chosen.iter().filter_map(|s| s.label).collect();
            let g = gens.entry(key).or_insert_with(|| {
                let mut reg = registry.clone();
                let mut user_version = main.user_version;
                for (scope, v) in &moved {
                    if scope == "runtime" {
                        user_version = *v;
                    }
                    reg.insert(scope.clone(), *v);
                }
                Generation {
                    releases: vec![name_of(&moved)],
                    user_version,
                    registry: main.registry.as_ref().map(|_| reg),
                    capabilities: main.capabilities.clone(),
                    variants: Vec::new(),
                    known_from: KnownFrom::Source,
                }
            });
            for base in &main.variants {
                let mut objects = base.objects.clone();
                for step in chosen.iter().flat_map(|s| s.steps.iter()) {
                    for (key, sig) in &step.changes {
                        match sig {
                            Some(sig) => {
                                objects.insert(key.clone(), sig.clone());
                            }
                            None => {
                                objects.remove(key);
                            }
                        }
                    }
                }
                let mut label = if base.label == "fresh" {
                    "main's fresh schema".to_owned()
                } else {
                    format!("main's schema {}", base.label)
                };
                for l in &labels {
                    label.push_str(&format!(", {l}"));
                }
                g.variants.push(Variant { label, objects });
            }
        }
        // The next combination.
        let mut i = 0;
        loop {
            if i == pick.len() {
                return gens.into_values().collect();
            }
            pick[i] += 1;
            if pick[i] < states[i].len() {
                break;
            }
            pick[i] = 0;
            i += 1;
        }
    }
}

/// The versions the sources state for each scope (`runtime` included), newest last.
pub fn stated_versions(steps: &[SourceStep]) -> BTreeMap<&str, Vec<i64>> {
    let mut out: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for s in steps {
        let v = out.entry(s.scope.as_str()).or_default();
        if !v.contains(&s.version) {
            v.push(s.version);
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(scope: &str, version: i64, label: Option<&str>, key: &str) -> SourceStep {
        SourceStep {
            scope: scope.into(),
            version,
            label: label.map(Into::into),
            source: "here".into(),
            changes: vec![(key.into(), Some(format!("sig of {key}")))],
        }
    }

    fn main() -> Generation {
        Generation {
            releases: vec!["main".into()],
            user_version: 12,
            registry: Some([("runtime".into(), 12), ("workflow".into(), 9)].into()),
            capabilities: None,
            variants: vec![Variant {
                label: "fresh".into(),
                objects: [("table:a".to_owned(), "a".to_owned())].into(),
            }],
            known_from: KnownFrom::Build,
        }
    }

    #[test]
    fn the_text_form_parses() {
        let steps = parse_steps(
            "# x\n\nstep runtime 13\nsource s\n+ table:t\tSIG\n- index:i\n\
             step workflow 12 docs\nsource w\n",
        )
        .unwrap();
        assert_eq!(steps.len(), 2);
        assert_eq!(
            steps[0].changes,
            [
                ("table:t".to_owned(), Some("SIG".to_owned())),
                ("index:i".to_owned(), None)
            ]
        );
        assert_eq!(steps[1].label.as_deref(), Some("docs"));
        assert!(parse_steps("+ table:t\tSIG\n").is_err());
        assert!(parse_steps("step runtime x\n").is_err());
    }

    #[test]
    fn every_combination_of_stated_versions_is_one_generation() {
        let steps = vec![
            step("runtime", 13, None, "table:r13"),
            step("runtime", 14, None, "table:r14"),
            step("workflow", 12, Some("todo"), "table:todo"),
            step("workflow", 12, Some("task"), "table:task"),
        ];
        let gens = compose(&main(), &steps);
        // runtime {12, 13, 14} × workflow {9, 12}, main's own left out.
        assert_eq!(gens.len(), 5);
        let g = gens
            .iter()
            .find(|g| g.user_version == 14 && g.registry.as_ref().unwrap()["workflow"] == 12)
            .unwrap();
        assert_eq!(g.releases, ["main+runtime-14+workflow-12"]);
        assert_eq!(g.registry.as_ref().unwrap()["runtime"], 14);
        // The two object sets of workflow 12 are two variants of one generation.
        assert_eq!(g.variants.len(), 2);
        for v in &g.variants {
            assert!(v.objects.contains_key("table:r13") && v.objects.contains_key("table:r14"));
            assert!(v.objects.contains_key("table:a"));
        }
        assert!(g.variants[0].objects.contains_key("table:todo"));
        assert!(g.variants[1].objects.contains_key("table:task"));
        assert_eq!(
            stated_versions(&steps),
            BTreeMap::from([("runtime", vec![13, 14]), ("workflow", vec![12])])
        );
    }
}
