//! The workspaces Maka's own storage and runtime test suite wrote
//! (`../shared/maka-tests/shared.tar.xz`, 250 of them, each with Maka's verdict in
//! `maka.json`): unpacked at test time into the target directory, never committed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The packed workspaces beside the checkout.
pub fn tarball() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/maka-tests/shared.tar.xz")
}

/// Where they are unpacked: `<target dir>/tmp/maka-tests`.
pub fn unpacked() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("maka-tests")
}

/// Unpacks the workspaces once (a marker file says it finished) and lists every
/// workspace folder (`<test file>/<n>/`, with `runtime.sqlite` and `maka.json`), sorted.
/// `None`, saying why on stderr, when the tarball or `xz` is absent.
#[allow(clippy::print_stderr)]
pub fn workspaces() -> Option<Vec<PathBuf>> {
    let root = unpacked();
    let done = root.join(".unpacked");
    if !done.is_file() {
        let tar = tarball();
        if !tar.is_file() {
            eprintln!("skipped: {} is absent", tar.display());
            return None;
        }
        let xz = Command::new("xz")
            .arg("--version")
            .stdout(Stdio::null())
            .status();
        if !xz.is_ok_and(|s| s.success()) {
            eprintln!(
                "skipped: `xz` is not installed (needed to unpack {})",
                tar.display()
            );
            return None;
        }
        let parent = root.parent().expect("target tmp dir");
        std::fs::create_dir_all(parent).expect("create the target tmp dir");
        let script = format!(
            "xz -dc '{}' | tar -x -C '{}'",
            tar.display(),
            parent.display()
        );
        let status = Command::new("sh")
            .args(["-c", &script])
            .status()
            .expect("run xz and tar");
        assert!(status.success(), "unpacking {} failed", tar.display());
        std::fs::write(&done, b"").expect("write the marker");
    }
    let mut out = Vec::new();
    for file in std::fs::read_dir(&root).expect("read the unpacked folder") {
        let file = file.expect("dir entry").path();
        if !file.is_dir() {
            continue;
        }
        for case in std::fs::read_dir(&file).expect("read a test folder") {
            let case = case.expect("dir entry").path();
            if case.join("maka.json").is_file() {
                out.push(case);
            }
        }
    }
    out.sort();
    Some(out)
}
