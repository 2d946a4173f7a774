//! The workspaces Maka's own test suite wrote (`../shared/maka-tests/shared.tar.xz`,
//! beside the checkout), unpacked at test time into the target directory as the bench
//! workspace is, never committed. Each is `<root>/<test file>/<n>/` with
//! `runtime.sqlite` and Maka's own word on it (`maka.json`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Names an unpacked copy (the folder holding `index.json`) when it is elsewhere.
pub const ENV: &str = "WSLEDGER_MAKA_TESTS";

/// The packed workspaces.
pub fn tarball() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/maka-tests/shared.tar.xz")
}

/// `$WSLEDGER_MAKA_TESTS`, default `<target dir>/tmp/maka-tests`.
pub fn unpacked() -> PathBuf {
    super::maka_bench::env_or_target_tmp(ENV, "maka-tests")
}

fn has_xz() -> bool {
    Command::new("xz")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The unpacked folder, unpacking it first when needed; `None` (said on stderr, with
/// what is missing) when neither a copy nor the tarball and `xz` are there.
#[allow(clippy::print_stderr)]
pub fn present() -> Option<PathBuf> {
    let root = unpacked();
    if root.join("index.json").is_file() {
        return Some(root);
    }
    if !tarball().is_file() || !has_xz() {
        eprintln!(
            "skipped: Maka's test workspaces are not here; they need {} and `xz` (or set {ENV} \
             to an unpacked copy)",
            tarball().display()
        );
        return None;
    }
    // Unpacked beside, then moved in one step: test binaries running at once never
    // see half a folder.
    let parent = root.parent().expect("a parent folder");
    std::fs::create_dir_all(parent).unwrap();
    let scratch = parent.join(format!("maka-tests.unpacking.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let mut xz = Command::new("xz")
        .arg("-dc")
        .arg(tarball())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run xz");
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&scratch)
        .stdin(xz.stdout.take().expect("xz's output"))
        .status()
        .expect("run tar");
    let xz_ok = xz.wait().is_ok_and(|s| s.success());
    assert!(
        tar.success() && xz_ok,
        "unpacking {} failed",
        tarball().display()
    );
    let inner = scratch.join("maka-tests");
    assert!(
        inner.join("index.json").is_file(),
        "{} holds no maka-tests/index.json",
        tarball().display()
    );
    if std::fs::rename(&inner, &root).is_err() && !root.join("index.json").is_file() {
        panic!(
            "could not move the unpacked workspaces to {}",
            root.display()
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Some(root)
}

/// Every workspace folder (holding `maka.json`), sorted by test file and number.
pub fn workspaces(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for file in std::fs::read_dir(root).unwrap() {
        let file = file.unwrap().path();
        if !file.is_dir() {
            continue;
        }
        for case in std::fs::read_dir(&file).unwrap() {
            let case = case.unwrap().path();
            if case.join("maka.json").is_file() {
                out.push(case);
            }
        }
    }
    let key = |p: &PathBuf| {
        let n = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        (p.parent().map(Path::to_path_buf), n)
    };
    out.sort_by_key(key);
    out
}
