//! What Maka derives, and the exact text each release writes it with: the data of
//! `doctor rederive`.
//!
//! An index or a trigger is wholly defined by the build that wrote the file; the tool
//! projections (`tool_operations`, `tool_journal_events`) are rebuilt from the runtime
//! events by that build's own rebuild; the scope registry's rows are the build's
//! versions. Everything else (events, sessions, messages, run headers, ...) is primary
//! data: no build can derive it again.
//!
//! `derived.txt` (generated from the real schema dumps by `tests/release_catalog.rs`)
//! holds, per generation, the SQL text of every derived object as each dump of it has
//! it (a file a later release migrated can hold another spelling than a fresh one), and
//! the text of the other objects whose spelling tells two dumps apart. Pure: no SQL, no
//! I/O.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::{catalog, recognize, Generation};
use crate::db::SchemaFacts;

const DERIVED: &str = include_str!("derived.txt");

/// The tables Maka derives: the two tool projections and the scope registry.
pub const DERIVED_TABLES: &[&str] = &[
    "operational_schema_migrations",
    "tool_operations",
    "tool_journal_events",
];

/// The tool projection tables, rebuilt from the runtime events.
pub const PROJECTION_TABLES: &[&str] = &["tool_operations", "tool_journal_events"];

/// Whether the schema object `type:name` is one Maka derives (an index, a trigger, a
/// tool projection table or the scope registry).
pub fn is_derived_key(key: &str) -> bool {
    key.starts_with("index:")
        || key.starts_with("trigger:")
        || key
            .strip_prefix("table:")
            .is_some_and(|t| DERIVED_TABLES.contains(&t))
}

/// One dump's text of the objects `derived.txt` records for its generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextVariant {
    /// `fresh vX`, `vA by vB`, comma-joined where several dumps agree.
    pub dumps: String,
    /// `type:name` → SQL text exactly as stored.
    pub texts: BTreeMap<String, String>,
}

/// `\`, newline, tab and carriage return escaped, so that one text is one line.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            '\\' => '\\',
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            _ => return None,
        });
    }
    Some(out)
}

/// Each generation's release list and its text variants.
type Parsed = Vec<(Vec<String>, Vec<TextVariant>)>;

/// Parses `derived.txt`: release list → its text variants.
fn parse(text: &str) -> Result<Parsed, String> {
    let mut out: Parsed = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bad = || format!("derived.txt line {}: {line:?}", n + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        if word == "generation" {
            out.push((rest.split(' ').map(str::to_owned).collect(), Vec::new()));
            continue;
        }
        let (_, variants) = out.last_mut().ok_or_else(bad)?;
        match word {
            "dumps" => variants.push(TextVariant {
                dumps: rest.to_owned(),
                texts: BTreeMap::new(),
            }),
            "variant" => {
                let texts = variants.first().ok_or_else(bad)?.texts.clone();
                variants.push(TextVariant {
                    dumps: rest.to_owned(),
                    texts,
                });
            }
            "=" | "+" => {
                let (key, sql) = rest.split_once('\t').ok_or_else(bad)?;
                let sql = unescape(sql).ok_or_else(bad)?;
                let v = variants.last_mut().ok_or_else(bad)?;
                v.texts.insert(key.to_owned(), sql);
            }
            "-" => {
                let v = variants.last_mut().ok_or_else(bad)?;
                v.texts.remove(rest).ok_or_else(bad)?;
            }
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

/// The text variants of a generation (empty for one `derived.txt` does not know).
pub fn texts_of(g: &Generation) -> &'static [TextVariant] {
    static PARSED: OnceLock<Parsed> = OnceLock::new();
    let all =
        PARSED.get_or_init(|| parse(DERIVED).expect("the bundled derived.txt parses (tested)"));
    all.iter()
        .find(|(releases, _)| *releases == g.releases)
        .map_or(&[], |(_, v)| v.as_slice())
}

/// What is missing from a file whose schema is a known generation's less derived
/// objects only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    pub generation: &'static Generation,
    /// The catalog variant (`fresh`, or the migration that left its object set).
    pub variant: &'static str,
    /// The missing objects (`type:name`), tables first, then indexes, then triggers.
    pub objects: Vec<String>,
    /// The registry scopes without a row, with the versions the build registers.
    pub registry_rows: Vec<(String, i64)>,
}

impl Missing {
    /// Whether the scope registry table itself is missing.
    pub fn registry_table(&self) -> bool {
        self.objects
            .iter()
            .any(|k| k == "table:operational_schema_migrations")
    }

    /// The tool projection tables that are missing.
    pub fn projections(&self) -> Vec<&'static str> {
        PROJECTION_TABLES
            .iter()
            .copied()
            .filter(|t| self.objects.iter().any(|k| *k == format!("table:{t}")))
            .collect()
    }
}

/// Why what is missing cannot be derived again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotDerived {
    /// Why, one line each, in the user's words.
    pub why: Vec<String>,
    /// Missing tables of primary data (their loss is real).
    pub primary: Vec<String>,
}

fn not_derived(why: String) -> NotDerived {
    NotDerived {
        why: vec![why],
        primary: Vec::new(),
    }
}

/// One generation's object set that the file is, less some objects.
struct Fit {
    generation: &'static Generation,
    variant: &'static str,
    missing: Vec<String>,
    rows: Vec<(String, i64)>,
}

/// What a file of these facts is missing, when it is a known generation less missing
/// objects and registry rows only: `Ok(None)` for a file that is exactly a known
/// generation, `Err` when anything else differs (or what is missing is not derived).
pub fn missing(facts: &SchemaFacts) -> Result<Option<Missing>, NotDerived> {
    let r = recognize(facts);
    if r.exact() {
        return Ok(None);
    }
    let actual: BTreeMap<&str, &str> = facts
        .objects
        .iter()
        .map(|o| (o.key.as_str(), o.signature.as_str()))
        .collect();
    let mut fits: Vec<Fit> = Vec::new();
    for g in catalog() {
        if g.user_version != facts.user_version || g.capabilities != facts.capabilities {
            continue;
        }
        let rows: Vec<(String, i64)> = match (&facts.registry, &g.registry) {
            (None, None) => Vec::new(),
            (Some(_), None) => continue,
            (None, Some(want)) => want.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            (Some(have), Some(want)) => {
                if have.iter().any(|(k, v)| want.get(k) != Some(v)) {
                    continue;
                }
                want.iter()
                    .filter(|(k, _)| !have.contains_key(*k))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect()
            }
        };
        for v in &g.variants {
            let subset = actual
                .iter()
                .all(|(k, s)| v.objects.get(*k).is_some_and(|w| w == s));
            if !subset {
                continue;
            }
            let missing: Vec<String> = v
                .objects
                .keys()
                .filter(|k| !actual.contains_key(k.as_str()))
                .cloned()
                .collect();
            fits.push(Fit {
                generation: g,
                variant: v.label.as_str(),
                missing,
                rows: rows.clone(),
            });
        }
    }
    let closest = r.generation.display();
    let Some(least) = fits.iter().map(|f| f.missing.len() + f.rows.len()).min() else {
        let mut why = vec![format!(
            "its schema differs from Maka {closest}'s in more than missing objects"
        )];
        why.extend(r.differences.lines());
        return Err(NotDerived {
            why,
            primary: Vec::new(),
        });
    };
    let best: Vec<&Fit> = fits
        .iter()
        .filter(|f| f.missing.len() + f.rows.len() == least)
        .collect();
    let first = best[0];
    if best
        .iter()
        .any(|f| f.generation.releases != first.generation.releases || f.missing != first.missing)
    {
        let names: Vec<String> = best.iter().map(|f| f.generation.display()).collect();
        return Err(not_derived(format!(
            "what it is missing fits more than one Maka schema ({}): wsledger cannot tell which \
             one to put back",
            names.join("; ")
        )));
    }
    let primary: Vec<String> = first
        .missing
        .iter()
        .filter(|k| !is_derived_key(k))
        .cloned()
        .collect();
    if !primary.is_empty() {
        let tables: Vec<String> = primary
            .iter()
            .map(|k| format!("`{}`", k.strip_prefix("table:").unwrap_or(k)))
            .collect();
        return Err(NotDerived {
            why: vec![format!(
                "{} {} missing, and {} primary data, which Maka derives from nothing else in \
                 the file: that loss is real",
                tables.join(", "),
                if tables.len() == 1 { "is" } else { "are" },
                if tables.len() == 1 {
                    "it holds"
                } else {
                    "they hold"
                },
            )],
            primary,
        });
    }
    let rank = |k: &str| match k.split(':').next() {
        Some("table") => 0,
        Some("index") => 1,
        _ => 2,
    };
    let mut objects = first.missing.clone();
    objects.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    Ok(Some(Missing {
        generation: first.generation,
        variant: first.variant,
        objects,
        registry_rows: first.rows.clone(),
    }))
}

/// The exact text of each of `keys` as generation `g` writes it, told by the file's own
/// texts (`file`: `type:name` → SQL as stored): the dumps whose recorded texts the file
/// has are the ways the file may have come to be; each key must have one text in all
/// of them (where the file matches no dump, in every dump). Errors say which key has
/// several.
pub fn texts_for(
    g: &Generation,
    file: &BTreeMap<String, String>,
    keys: &[String],
) -> Result<BTreeMap<String, String>, String> {
    let variants = texts_of(g);
    let fits: Vec<&TextVariant> = variants
        .iter()
        .filter(|v| {
            v.texts
                .iter()
                .all(|(k, sql)| file.get(k).is_none_or(|have| have == sql))
        })
        .collect();
    let candidates: Vec<&TextVariant> = if fits.is_empty() {
        variants.iter().collect()
    } else {
        fits
    };
    let mut out = BTreeMap::new();
    for key in keys {
        let mut seen: Vec<&str> = candidates
            .iter()
            .filter_map(|v| v.texts.get(key).map(String::as_str))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        match seen.as_slice() {
            [one] => {
                out.insert(key.clone(), (*one).to_owned());
            }
            [] => {
                return Err(format!(
                    "no schema of Maka {} that wsledger holds has the text of `{key}`",
                    g.display()
                ))
            }
            _ => {
                return Err(format!(
                    "Maka {} writes `{key}` in {} spellings, depending on whether the file was \
                     created by it or migrated from an older release, and nothing left in the \
                     file tells which: wsledger puts back only the exact text",
                    g.display(),
                    seen.len()
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::generation_of;

    #[test]
    fn escaping_round_trips() {
        let s = "CREATE INDEX a\n  ON t(x)\t-- \\ note\r";
        assert_eq!(unescape(&escape(s)).as_deref(), Some(s));
        assert!(!escape(s).contains('\n'));
        assert_eq!(unescape("bad \\q"), None);
    }

    #[test]
    fn every_generation_has_the_text_of_each_derived_object_it_defines() {
        for g in catalog() {
            let variants = texts_of(g);
            assert!(!variants.is_empty(), "{}", g.display());
            for v in &g.variants {
                for key in v.objects.keys().filter(|k| is_derived_key(k)) {
                    assert!(
                        variants.iter().any(|t| t.texts.contains_key(key)),
                        "{} {}: {key}",
                        g.display(),
                        v.label
                    );
                }
            }
        }
    }

    #[test]
    fn a_dropped_index_is_missing_and_a_dropped_primary_table_is_not_derived() {
        let g = generation_of("main").unwrap();
        let mut f = g.facts(0);
        f.objects
            .retain(|o| o.key != "index:tool_journal_events_by_operation");
        let m = missing(&f).unwrap().unwrap();
        assert_eq!(m.generation.releases, g.releases);
        assert_eq!(m.objects, ["index:tool_journal_events_by_operation"]);
        assert!(m.registry_rows.is_empty());
        // A table of primary data: not derived, whatever else is missing.
        f.objects.retain(|o| o.key != "table:session_messages");
        let e = missing(&f).unwrap_err();
        assert_eq!(e.primary, ["table:session_messages"]);
        // The exact file: nothing is missing.
        assert_eq!(missing(&g.facts(0)), Ok(None));
    }

    #[test]
    fn a_missing_registry_is_its_table_and_every_row() {
        let g = generation_of("v0.1.7").unwrap();
        let mut f = g.facts(0);
        f.registry = None;
        f.objects
            .retain(|o| o.key != "table:operational_schema_migrations");
        let m = missing(&f).unwrap().unwrap();
        assert!(m.registry_table());
        assert_eq!(m.registry_rows.len(), g.registry.as_ref().unwrap().len());
        // One row missing: that row only.
        let mut f = g.facts(0);
        f.registry.as_mut().unwrap().remove("workflow");
        let m = missing(&f).unwrap().unwrap();
        assert!(m.objects.is_empty());
        assert_eq!(m.registry_rows, [("workflow".to_owned(), 3)]);
        // A row at another version is not a missing row.
        let mut f = g.facts(0);
        f.registry.as_mut().unwrap().insert("workflow".into(), 1);
        assert!(missing(&f).is_err());
    }

    #[test]
    fn a_changed_object_is_not_a_missing_one() {
        let g = generation_of("v0.1.11").unwrap();
        let mut f = g.facts(0);
        f.objects.retain(|o| o.key != "index:runtime_events_by_run");
        f.objects[0].signature.push('x');
        assert!(missing(&f).is_err());
    }

    #[test]
    fn the_registry_table_of_v0111_has_two_spellings_that_the_file_alone_does_not_tell_apart() {
        let g = generation_of("v0.1.11").unwrap();
        let key = "table:operational_schema_migrations".to_owned();
        let err = texts_for(g, &BTreeMap::new(), std::slice::from_ref(&key)).unwrap_err();
        assert!(err.contains("2 spellings"), "{err}");
        // An index has one text in every dump.
        let idx = "index:runtime_events_by_run".to_owned();
        let t = texts_for(g, &BTreeMap::new(), std::slice::from_ref(&idx)).unwrap();
        assert!(t[&idx].starts_with("CREATE INDEX runtime_events_by_run"));
    }
}
