//! Every line of `tests/vectors/args-hash.jsonl` (expected values produced by Maka's
//! own code under Node.js): `canonical_tool_args_hash` and `stable_stringify` of the
//! exact `args_json` text, parsed with our `JSON.parse`.

mod common;

use wsledger::args_hash::{canonical_tool_args_hash, identity_preimage};
use wsledger::json::{parse, stable_stringify, JsStr, Json};

struct Vector {
    name: String,
    tool_name: String,
    args_json: String,
    hash: Option<String>,
    /// The text Maka fed to SHA-256, when it hashed.
    identity_preimage: Option<String>,
    stable_json: Option<String>,
}

fn vectors() -> Vec<Vector> {
    let text = include_str!("vectors/args-hash.jsonl");
    let out: Vec<Vector> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("vector line is JSON");
            let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
            let name = s("name").expect("name");
            assert!(
                s("hash").is_some() != v.get("throws").is_some(),
                "{name}: exactly one of hash/throws"
            );
            assert!(
                s("stable_json").is_some() != v.get("stable_json_throws").is_some(),
                "{name}: exactly one of stable_json/stable_json_throws"
            );
            Vector {
                tool_name: s("tool_name").expect("tool_name"),
                args_json: s("args_json").expect("args_json"),
                hash: s("hash"),
                identity_preimage: s("identity_preimage"),
                stable_json: s("stable_json"),
                name,
            }
        })
        .collect();
    assert_eq!(out.len(), 44, "the vector file has 44 lines");
    out
}

/// Every vector with its `args_json` parsed; a parse error is a failure.
fn parsed_vectors(failures: &mut Vec<String>) -> Vec<(Vector, Json)> {
    let mut out = Vec::new();
    for v in vectors() {
        match parse(&v.args_json) {
            Ok(a) => out.push((v, a)),
            Err(e) => failures.push(format!("{}: parse error {e}", v.name)),
        }
    }
    out
}

#[test]
fn stable_json_matches_every_vector() {
    let mut failures = Vec::new();
    for (v, args) in parsed_vectors(&mut failures) {
        let got = stable_stringify(&args).ok();
        if got != v.stable_json {
            failures.push(format!(
                "{}: expected {:?}, got {:?}",
                v.name, v.stable_json, got
            ));
        }
    }
    common::assert_no_failures(&failures, "failing vectors");
}

#[test]
fn args_hash_matches_every_vector() {
    let mut failures = Vec::new();
    for (v, args) in parsed_vectors(&mut failures) {
        let got = canonical_tool_args_hash(&JsStr::new(&v.tool_name), &args);
        match (&v.hash, &got) {
            (Some(expected), Ok(hash)) if expected == hash => {
                let ours = identity_preimage(&JsStr::new(&v.tool_name), &args).ok();
                if v.identity_preimage.is_some() && ours != v.identity_preimage {
                    failures.push(format!("{}: preimage differs, hash agrees", v.name));
                }
            }
            (None, Err(_)) => {}
            _ => {
                let preimage = identity_preimage(&JsStr::new(&v.tool_name), &args);
                failures.push(format!(
                    "{}: expected {:?}, got {:?} (our preimage {:?})",
                    v.name, v.hash, got, preimage
                ));
            }
        }
    }
    common::assert_no_failures(&failures, "failing vectors");
}
