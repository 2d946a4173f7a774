//! The fuzz targets' bodies (`fuzz/harness.rs`) over every committed seed
//! (`fuzz/seeds/<target>/`) and every input that once crashed a target
//! (`fuzz/regressions/<target>/`), so a crash found by fuzzing stays fixed.
//!
//! `cargo test --test fuzz_regressions -- --ignored write_seed_corpus` rebuilds the
//! seed corpus from the real fixtures and the conformance vectors.

#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};

fn files(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    v.retain(|p| p.is_file() && p.file_name().is_some_and(|n| n != "README.md"));
    v.sort();
    v
}

/// Runs `f` over the seeds and regressions of `target`, naming the input that fails.
fn run_all(target: &str, f: fn(&[u8])) {
    let seeds = files(&format!("fuzz/seeds/{target}"));
    assert!(
        seeds.len() >= 20,
        "fuzz/seeds/{target} lost its seed corpus"
    );
    let regressions = files(&format!("fuzz/regressions/{target}"));
    for p in seeds.iter().chain(&regressions) {
        let data = std::fs::read(p).unwrap();
        let r = std::panic::catch_unwind(|| f(&data));
        assert!(r.is_ok(), "{target}: {} fails", p.display());
    }
}

#[test]
fn decode_seeds_and_regressions() {
    run_all("decode", harness::decode);
}

#[test]
fn args_hash_seeds_and_regressions() {
    run_all("args_hash", harness::args_hash);
}

#[test]
fn scan_seeds_and_regressions() {
    run_all("scan", harness::scan);
}

#[test]
fn replay_seeds_and_regressions() {
    run_all("replay", harness::replay);
}

/// Rebuilds `fuzz/seeds/` (run by hand; see `docs/safety.md`).
#[test]
#[ignore = "writes fuzz/seeds/; run by hand"]
fn write_seed_corpus() {
    use sha2::{Digest, Sha256};
    use std::collections::BTreeMap;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seeds: BTreeMap<&str, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    let mut add = |target: &'static str, bytes: Vec<u8>| {
        let name = hex::encode(&Sha256::digest(&bytes)[..8]);
        seeds.entry(target).or_default().insert(name, bytes);
    };
    // Every payload of the real fixtures, one file each (the decoder's seeds), and each
    // run's payloads in store order (the scan's seeds); the arguments of every call.
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("runtime.sqlite").is_file())
        .collect();
    dirs.sort();
    let mut shapes = std::collections::HashSet::new();
    for dir in dirs {
        let c = rusqlite::Connection::open_with_flags(
            format!("file:{}?immutable=1", dir.join("runtime.sqlite").display()),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap();
        let mut s = c
            .prepare(
                "SELECT session_id, run_id, event_kind, payload_json FROM runtime_events \
                 ORDER BY invocation_id, event_seq, event_id",
            )
            .unwrap();
        let rows: Vec<(String, String, String, String)> = s
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut runs: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (session, run, kind, payload) in rows {
            // One payload per event kind and key set: the fixtures repeat shapes.
            let v: serde_json::Value = serde_json::from_str(&payload).unwrap_or_default();
            let keys = v
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(","))
                .unwrap_or_default();
            let content_keys = v["content"]
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(","))
                .unwrap_or_default();
            if shapes.insert((kind, keys, content_keys)) {
                add("decode", payload.clone().into_bytes());
            }
            if v["content"]["kind"] == "function_call" {
                let name = v["content"]["name"].as_str().unwrap_or("Read");
                add(
                    "args_hash",
                    format!("{name}\n{}", v["content"]["args"]).into_bytes(),
                );
            }
            runs.entry((session, run)).or_default().push(payload);
        }
        for (_, payloads) in runs {
            add("scan", (payloads.join("\n") + "\n").into_bytes());
        }
        // Every session as the bundle `replay --export` writes (replay's seeds).
        let ws = wsledger::db::Workspace::open_read_only(&dir.join("runtime.sqlite")).unwrap();
        for session in ws.session_ids().unwrap() {
            let bundle = ws
                .export_session(&session, &wsledger::replay::operation_ids_named)
                .unwrap();
            add("replay", bundle.to_json_text().into_bytes());
        }
    }
    // The conformance vectors.
    let vectors = |f: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(root.join("tests/vectors").join(f))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    for v in vectors("decode.jsonl") {
        add(
            "decode",
            v["payload_json"].as_str().unwrap().as_bytes().to_vec(),
        );
    }
    for v in vectors("canonical.jsonl") {
        add(
            "decode",
            v["input_json"].as_str().unwrap().as_bytes().to_vec(),
        );
    }
    for v in vectors("args-hash.jsonl") {
        let name = v["tool_name"].as_str().unwrap_or("");
        let args = v["args_json"].as_str().unwrap_or("null");
        add("args_hash", format!("{name}\n{args}").into_bytes());
    }
    for f in ["scanner.jsonl", "terminal.jsonl"] {
        for v in vectors(f) {
            let lines: Vec<String> = v["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.to_string())
                .collect();
            add("scan", (lines.join("\n") + "\n").into_bytes());
        }
    }
    for (target, files) in seeds {
        let dir = root.join("fuzz/seeds").join(target);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}
