//! What the benches share: the binary they time, the allocator, the workspace
//! generator, where workspaces are cached, size arguments, medians.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

#[allow(dead_code)]
#[path = "../../examples/genws.rs"]
pub mod genws;
#[allow(dead_code)]
pub mod maka_bench;

/// The `wsledger` binary the benches time.
pub const WSLEDGER: &str = env!("CARGO_BIN_EXE_wsledger");

// What runs in the bench's own process (generating, the floors) gets the allocator
// the `wsledger` binary has.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `$WSLEDGER_BENCH_DIR`, default `<target dir>/tmp/wsledger-bench`.
pub fn bench_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WSLEDGER_BENCH_DIR") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("wsledger-bench")
}

/// `10k`, `1M`, `2_000`: a count.
pub fn parse_size(s: &str) -> Result<u64> {
    let s = s.trim().to_ascii_lowercase().replace('_', "");
    let (n, m) = if let Some(n) = s.strip_suffix('k') {
        (n, 1_000)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 1_000_000)
    } else {
        (s.as_str(), 1)
    };
    Ok(n.parse::<u64>().with_context(|| format!("bad size {s}"))? * m)
}

/// A count as `parse_size` reads it back (`10k`, `1M`).
pub fn label(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}
