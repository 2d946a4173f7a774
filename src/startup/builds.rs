//! The Maka builds `--maka` names, and what each build's desktop boot does with a file
//! that is not exactly its own.
//!
//! Every catalogued release (and main) is a build. One more is accepted by name:
//! `cef8c44d8`, the 0.1.5 development build of the #2234 field report; its storage code
//! (every `sqlite-*-schema.ts`, `operational-state-store.ts`, `sqlite-runtime-store.ts`),
//! its session manager's strict recovery and its desktop boot are v0.1.5's, so it is
//! judged by v0.1.5's rules under its own name. Pure.

use crate::db::startup::{Cell, StartupFacts};
use crate::release::{generation_of, RELEASES};

/// `--maka`: the build whose start-up the scan speaks for, or every catalogued one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maka {
    Build(&'static str),
    All,
}

/// `--maka`'s value (`None`: not a build name nor `all`).
pub fn parse(value: &str) -> Option<Maka> {
    if value == "all" {
        return Some(Maka::All);
    }
    build(value).map(Maka::Build)
}

/// The development build `--maka` accepts besides the catalog's names.
pub const DEV_BUILD: &str = "cef8c44d8";

/// Every name `--maka` accepts for one build, oldest first (then `cef8c44d8`).
pub fn names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = RELEASES.to_vec();
    v.push(DEV_BUILD);
    v
}

/// The build a name stands for, as a `'static` name (`None`: not a build).
pub fn build(name: &str) -> Option<&'static str> {
    names().into_iter().find(|b| *b == name)
}

/// The catalogued release whose rules judge `build` (itself, or v0.1.5 for
/// `cef8c44d8`).
pub fn rules_of(build: &str) -> &'static str {
    if build == DEV_BUILD {
        return "v0.1.5";
    }
    RELEASES
        .iter()
        .copied()
        .find(|r| *r == build)
        .unwrap_or("main")
}

/// Whether `build`'s desktop boot resets the database (`resetIncompatibleOperational
/// StateDatabase`, in the 0.1.5 and 0.1.6 desktops only).
pub fn desktop_resets(build: &str) -> bool {
    matches!(rules_of(build), "v0.1.5" | "v0.1.6")
}

/// Whether `build`'s desktop boot deletes this file at start: it keeps the file only
/// when `user_version` is exactly its runtime schema and the registry holds exactly its
/// scopes, each at exactly its version (older or newer alike are deleted). A file it
/// cannot read that far (a negative `user_version`, a registry it cannot query) makes
/// the boot throw instead, which deletes nothing.
pub fn desktop_deletes(facts: &StartupFacts, build: &str) -> bool {
    if !desktop_resets(build) {
        return false;
    }
    let Some(g) = generation_of(rules_of(build)) else {
        return false;
    };
    if facts.user_version < 0 {
        return false;
    }
    if facts.user_version != g.user_version {
        return true;
    }
    let own = g.registry.clone().unwrap_or_default();
    match &facts.registry {
        None => true,
        Some(Err(_)) => false,
        Some(Ok(rows)) => {
            rows.len() != own.len()
                || !rows.iter().all(|(scope, version)| {
                    let want = scope.text().and_then(|s| own.get(s));
                    want.is_some_and(|w| number_equals(version, *w))
                })
        }
    }
}

/// JavaScript's `===` between a stored value and an integer.
fn number_equals(c: &Cell, n: i64) -> bool {
    match c {
        Cell::Integer(v) => *v == n,
        Cell::Real(f) => *f == n as f64,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(tag: &str) -> StartupFacts {
        StartupFacts::of_schema(&generation_of(tag).unwrap().facts(0))
    }

    #[test]
    fn only_the_015_and_016_desktops_delete_and_never_their_own_file() {
        for b in names() {
            let own = fresh(rules_of(b));
            assert!(!desktop_deletes(&own, b), "{b} deletes its own file");
        }
        for (file, builds) in [
            ("v0.1.4", vec!["v0.1.5", "v0.1.6", DEV_BUILD]),
            ("v0.1.5", vec!["v0.1.6"]),
            ("v0.1.6", vec!["v0.1.5", DEV_BUILD]),
            ("main", vec!["v0.1.5", "v0.1.6", DEV_BUILD]),
        ] {
            let f = fresh(file);
            let got: Vec<&str> = names()
                .into_iter()
                .filter(|b| desktop_deletes(&f, b))
                .collect();
            assert_eq!(got, builds, "a {file} file");
        }
    }

    #[test]
    fn a_registry_row_that_differs_or_is_extra_is_deleted_one_that_reads_equal_is_kept() {
        let f0 = fresh("v0.1.5");
        let with = |at: &str, v: Cell, extra: bool| {
            let mut f = f0.clone();
            if let Some(Ok(rows)) = &mut f.registry {
                for (s, x) in rows.iter_mut() {
                    if s.text() == Some(at) {
                        *x = v.clone();
                    }
                }
                if extra {
                    rows.push((Cell::Text("future".into()), Cell::Integer(1)));
                }
            }
            f
        };
        // A REAL with the same value is `===` in JavaScript.
        assert!(!desktop_deletes(
            &with("usage", Cell::Real(3.0), false),
            "v0.1.5"
        ));
        assert!(desktop_deletes(
            &with("usage", Cell::Text("3".into()), false),
            "v0.1.5"
        ));
        assert!(desktop_deletes(
            &with("usage", Cell::Integer(3), true),
            "v0.1.5"
        ));
        let mut f = f0.clone();
        f.registry = None;
        assert!(desktop_deletes(&f, "v0.1.5"));
        f.registry = Some(Err("no such column: scope".into()));
        assert!(!desktop_deletes(&f, "v0.1.5"), "the boot throws instead");
    }

    #[test]
    fn names_are_the_catalog_and_the_dev_build() {
        assert_eq!(build("v0.1.5"), Some("v0.1.5"));
        assert_eq!(build(DEV_BUILD), Some(DEV_BUILD));
        assert_eq!(build("0.1.5"), None);
        assert_eq!(rules_of(DEV_BUILD), "v0.1.5");
        assert_eq!(rules_of("main"), "main");
    }
}
