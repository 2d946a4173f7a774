//! Where the bench workspace is found: the workspace Maka's own code wrote
//! (`../shared/bench/runtime.sqlite.xz`, unpacked once, never committed). Shared by
//! `benches/scan.rs` (which unpacks it) and the tests that use it when present (as
//! `tests/common/maka_bench.rs`).

use std::path::{Path, PathBuf};

/// Names the unpacked `runtime.sqlite` when it is elsewhere.
pub const ENV: &str = "WSLEDGER_MAKA_BENCH";

/// `../shared/bench` beside the checkout: the packed workspace and Maka's verdict.
pub fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench")
}

/// `$WSLEDGER_MAKA_BENCH`, default `<target dir>/tmp/maka-bench/runtime.sqlite`.
pub fn unpacked() -> PathBuf {
    env_or_target_tmp(ENV, "maka-bench/runtime.sqlite")
}

/// `$<env>` when it is set, else `<target dir>/tmp/<default>`: where what is unpacked
/// at test or bench time is found.
pub fn env_or_target_tmp(env: &str, default: &str) -> PathBuf {
    match std::env::var_os(env) {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_TARGET_TMPDIR")).join(default),
    }
}

/// Maka's verdict on it.
pub fn verdict() -> PathBuf {
    shared_dir().join("verdict.json")
}

/// What to run to get it.
pub fn how_to_get() -> String {
    let file = unpacked();
    format!(
        "mkdir -p {} && xz -dkc {} > {} (or set {ENV} to an unpacked copy)",
        file.parent().unwrap_or(Path::new(".")).display(),
        shared_dir().join("runtime.sqlite.xz").display(),
        file.display()
    )
}

/// Says on stderr that a test needing the file is skipped, and how to run it.
#[allow(clippy::print_stderr)]
pub fn say_skipped() {
    eprintln!(
        "skipped: the bench workspace is not unpacked; to run this test: {}",
        how_to_get()
    );
}

/// The unpacked file when it is there, beside nothing that would change what a read
/// sees (a `-wal` means someone opened it writable: it is no longer Maka's file).
pub fn present() -> Option<PathBuf> {
    let file = unpacked();
    if !file.is_file() {
        return None;
    }
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut p = file.clone().into_os_string();
        p.push(suffix);
        assert!(
            !Path::new(&p).exists(),
            "{} exists: something opened the bench workspace for writing; remove it (and \
             check the file against {}) or unpack again",
            Path::new(&p).display(),
            shared_dir().join("runtime.sqlite.xz").display()
        );
    }
    Some(file)
}
