//! The layout's rules, checked on the source so that they stay true: no import circle
//! between the top-level modules (rooms) of `src/`, tests included, and command files
//! in `src/cli/` that read in a screen or two.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Room → (room it names → first place it does), from every `crate::<room>` outside
/// comments.
fn room_imports() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut rooms: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir("src").unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_owned();
        let room = name.strip_suffix(".rs").unwrap_or(&name).to_owned();
        if room == "lib" || room == "main" {
            continue;
        }
        let mut files = Vec::new();
        if p.is_dir() {
            rust_files(&p, &mut files);
        } else if name.ends_with(".rs") {
            files.push(p);
        }
        rooms.entry(room).or_default().extend(files);
    }
    let names: BTreeSet<String> = rooms.keys().cloned().collect();
    let mut edges = BTreeMap::new();
    for (room, files) in &rooms {
        let mut to: BTreeMap<String, String> = BTreeMap::new();
        for f in files {
            let text = std::fs::read_to_string(f).unwrap();
            for (i, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for part in line.split("crate::").skip(1) {
                    // `crate::{a, b::c}` names each of its paths' first segments.
                    let paths: Vec<&str> = match part.strip_prefix('{') {
                        Some(group) => group.split(['}', ',']).map(str::trim).collect(),
                        None => vec![part],
                    };
                    for path in paths {
                        let target: String = path
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        if target != *room && names.contains(&target) {
                            to.entry(target)
                                .or_insert_with(|| format!("{}:{}", f.display(), i + 1));
                        }
                    }
                }
            }
        }
        edges.insert(room.clone(), to);
    }
    edges
}

/// A path from `from` back to `from` through `edges`, if there is one.
fn circle_through(
    edges: &BTreeMap<String, BTreeMap<String, String>>,
    from: &str,
) -> Option<Vec<String>> {
    let mut stack = vec![vec![from.to_owned()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap();
        for next in edges[last].keys() {
            if next == from {
                let mut p = path.clone();
                p.push(next.clone());
                return Some(p);
            }
            if seen.insert(next.clone()) {
                let mut p = path.clone();
                p.push(next.clone());
                stack.push(p);
            }
        }
    }
    None
}

#[test]
fn no_import_circle_between_rooms() {
    let edges = room_imports();
    assert!(edges.len() > 20, "rooms found: {:?}", edges.keys());
    // The walk must see the imports it judges: the scan imports the decoder.
    assert!(edges["scan"].contains_key("event"), "{:?}", edges["scan"]);
    let mut circles = Vec::new();
    for room in edges.keys() {
        if let Some(path) = circle_through(&edges, room) {
            let steps: Vec<String> = path
                .windows(2)
                .map(|w| format!("{} -> {} ({})", w[0], w[1], edges[&w[0]][&w[1]]))
                .collect();
            circles.push(steps.join("; "));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn command_files_read_in_a_screen_or_two() {
    let mut files = Vec::new();
    rust_files(Path::new("src/cli"), &mut files);
    assert!(files.len() > 5);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 300).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "command files over 300 lines: {long:?}");
}

#[test]
fn no_room_is_a_grab_bag() {
    let rooms = room_imports();
    for bag in ["doctor", "helpers", "util", "utils", "common", "misc"] {
        assert!(
            !rooms.contains_key(bag),
            "src/{bag}: name the room for what it holds"
        );
    }
}
