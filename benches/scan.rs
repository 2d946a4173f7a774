//! `cargo bench --bench scan`: `doctor scan` against the floor, at workspace scale.
//!
//! For each size (default 10k, 100k, 200k and 1M events) a workspace is generated
//! once with `examples/genws.rs` (cached under `$WSLEDGER_BENCH_DIR`, default
//! `<target dir>/tmp/wsledger-bench`) and then, round after round, the floor and `doctor
//! scan` run back to back:
//!
//! - floor: the cheapest honest read of the same data, in a child process: the
//!   `runtime_events` columns the scan needs, in the scan's order
//!   (`invocation_id, event_seq, event_id`), each payload parsed and decoded by our
//!   typed decoder, nothing else;
//! - scan: the `wsledger` binary as a child process (`doctor scan PATH`), whose peak
//!   RSS is read with `wait4`.
//!
//! It prints medians, events/s, the ratio floor time / scan time (median of the
//! per-round ratios, so that drift from other load on the machine cancels), and peak
//! RSS; and the same as JSON in `<bench dir>/results.json`. Then one call scanning two
//! workspaces against two sequential calls (the parallel scan).
//!
//! Options (after `--`): `--sizes 10k,100k,200k,1m`, `--rounds N` (default 5),
//! `--no-parallel`. Timing never decides a test: this is not part of `cargo test`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod common;
use common::{bench_dir, label, median, parse_size};

#[allow(dead_code)]
#[path = "../examples/genws.rs"]
mod genws;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

const WSLEDGER: &str = env!("CARGO_BIN_EXE_wsledger");

// The floor runs in this process: it gets the allocator the `wsledger` binary has.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The generated workspace of `events` events (seed `seed`), made once.
fn workspace(events: u64, seed: u64) -> Result<(PathBuf, u64)> {
    let dir = bench_dir().join(format!("ws-{}-s{seed}", label(events)));
    let db = dir.join("runtime.sqlite");
    let side = dir.join("runtime.sqlite.gen.json");
    if let Ok(text) = std::fs::read_to_string(&side) {
        let v: serde_json::Value = serde_json::from_str(&text)?;
        if v["asked"]["events"].as_u64() == Some(events)
            && v["seed"].as_u64() == Some(seed)
            && db.exists()
        {
            return Ok((dir, v["events"].as_u64().unwrap_or(events)));
        }
    }
    eprintln!("bench: generating {} ({events} events)...", dir.display());
    let t = Instant::now();
    // In a child process: this process must stay small, since a child's peak RSS
    // (`ru_maxrss`) starts from the parent's at spawn.
    let status = Command::new(std::env::current_exe()?)
        .args(["--generate-child", &events.to_string(), &seed.to_string()])
        .arg(&db)
        .status()?;
    if !status.success() {
        bail!("generating {} failed", db.display());
    }
    eprintln!("bench: generated in {:.1} s", t.elapsed().as_secs_f64());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&side)?)?;
    Ok((dir, v["events"].as_u64().unwrap_or(events)))
}

/// The floor: the scan's query and columns, each payload decoded. Returns rows read.
fn floor(db: &Path) -> Result<u64> {
    let conn = Connection::open_with_flags(
        format!("file:{}?mode=ro&immutable=1", db.display()),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // The same connection settings as the scan's.
    conn.pragma_update(None, "cache_size", wsledger::db::READ_CACHE_KIB)?;
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    let mut stmt = conn.prepare(wsledger::db::EVENTS_IN_SCAN_ORDER)?;
    let mut rows = stmt.query([])?;
    let mut n = 0u64;
    let mut ok = 0u64;
    while let Some(r) = rows.next()? {
        let text = |i: usize| -> Result<&str> {
            match r.get_ref(i)? {
                ValueRef::Text(b) => Ok(std::str::from_utf8(b)?),
                _ => bail!("column {i} is not text"),
            }
        };
        let id = text(0)?;
        let payload = text(6)?;
        let seq = r.get_ref(5)?.as_i64()?;
        let committed = r.get_ref(7)?.as_i64()?;
        if let Ok(event) = wsledger::event::decode_event_text(payload) {
            ok += u64::from(event.id == *id) + u64::from(seq > 0 && committed > 0);
        }
        n += 1;
    }
    std::hint::black_box(ok);
    Ok(n)
}

struct ChildRun {
    seconds: f64,
    max_rss_kb: i64,
    status: i32,
}

/// Runs `wsledger doctor scan ARGS...` and reads its peak RSS with `wait4`.
#[allow(unsafe_code)]
fn scan(args: &[&Path]) -> Result<ChildRun> {
    let t = Instant::now();
    let child = Command::new(WSLEDGER)
        .args(["doctor", "scan", "--no-progress"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: plain FFI; `rusage` is a C struct for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, with valid pointers to locals.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = t.elapsed().as_secs_f64();
    if got != pid {
        bail!("wait4 failed: {}", std::io::Error::last_os_error());
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    std::mem::forget(child);
    Ok(ChildRun {
        seconds,
        max_rss_kb: usage.ru_maxrss,
        status: code,
    })
}

/// The floor in a child process (same footing as the scan): seconds and rows.
fn floor_child(db: &Path) -> Result<(f64, u64)> {
    let t = Instant::now();
    let out = Command::new(std::env::current_exe()?)
        .arg("--floor-child")
        .arg(db)
        .stderr(Stdio::inherit())
        .output()?;
    let seconds = t.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("floor failed on {}", db.display());
    }
    let n: u64 = String::from_utf8_lossy(&out.stdout).trim().parse()?;
    Ok((seconds, n))
}

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--floor-child") {
        println!("{}", floor(Path::new(&argv[2]))?);
        return Ok(());
    }
    if argv.get(1).map(String::as_str) == Some("--generate-child") {
        let (events, seed) = (argv[2].parse()?, argv[3].parse()?);
        genws::run(&genws::Args::new(
            PathBuf::from(&argv[4]),
            Some(events),
            None,
            seed,
        ))?;
        return Ok(());
    }
    let mut sizes = vec![10_000, 100_000, 200_000, 1_000_000];
    let mut rounds = 5usize;
    let mut parallel = true;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--sizes" => {
                sizes = it
                    .next()
                    .context("--sizes needs a value")?
                    .split(',')
                    .map(parse_size)
                    .collect::<Result<_>>()?
            }
            "--rounds" => rounds = it.next().context("--rounds needs a value")?.parse()?,
            "--no-parallel" => parallel = false,
            // `cargo bench` passes `--bench`.
            "--bench" => {}
            other => bail!("unknown argument {other}"),
        }
    }
    println!(
        "wsledger scan benchmark: {rounds} rounds per size, {} cores; floor = SELECT in scan order + typed decode",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:>6} {:>9} {:>9} {:>9} {:>11} {:>7} {:>9} {:>9}",
        "size", "events", "floor s", "scan s", "scan ev/s", "ratio", "rss MB", "file MB"
    );
    let mut results = Vec::new();
    for &size in &sizes {
        let (dir, events) = workspace(size, 1)?;
        let db = dir.join("runtime.sqlite");
        // Warm the page cache and check the workspace scans clean.
        floor_child(&db)?;
        let warm = scan(&[&dir])?;
        if warm.status != 0 {
            bail!("doctor scan {} exited {}", dir.display(), warm.status);
        }
        let (mut f, mut s, mut r, mut rss) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (ft, n) = floor_child(&db)?;
            if n != events {
                bail!("floor read {n} rows, expected {events}");
            }
            let run = scan(&[&dir])?;
            if run.status != 0 {
                bail!("doctor scan exited {}", run.status);
            }
            f.push(ft);
            s.push(run.seconds);
            r.push(ft / run.seconds);
            rss.push(run.max_rss_kb as f64 / 1024.0);
        }
        let (fm, sm, rm) = (median(&f), median(&s), median(&r));
        let rss_max = rss.iter().copied().fold(0.0, f64::max);
        let file_mb = std::fs::metadata(&db)?.len() as f64 / 1e6;
        println!(
            "{:>6} {:>9} {:>9.3} {:>9.3} {:>11.0} {:>7.3} {:>9.1} {:>9.0}",
            label(size),
            events,
            fm,
            sm,
            events as f64 / sm,
            rm,
            rss_max,
            file_mb
        );
        results.push(serde_json::json!({
            "size": label(size), "events": events, "floor_s": f, "scan_s": s,
            "floor_median_s": fm, "scan_median_s": sm, "ratio_median": rm,
            "scan_events_per_s": events as f64 / sm, "peak_rss_mb": rss_max, "file_mb": file_mb,
        }));
    }
    let mut par = serde_json::Value::Null;
    if parallel {
        // Two workspaces of the same size: one call against two calls in a row.
        let size = sizes
            .iter()
            .copied()
            .filter(|&s| s <= 200_000)
            .max()
            .unwrap_or(sizes[0]);
        let (a, _) = workspace(size, 1)?;
        let (b, _) = workspace(size, 2)?;
        floor_child(&b.join("runtime.sqlite"))?;
        let (mut one, mut two) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t = Instant::now();
            scan(&[&a])?;
            scan(&[&b])?;
            two.push(t.elapsed().as_secs_f64());
            let run = scan(&[&a, &b])?;
            one.push(run.seconds);
        }
        let (om, tm) = (median(&one), median(&two));
        println!(
            "parallel: `doctor scan A B` ({} each) {om:.3} s, two calls in a row {tm:.3} s, speed-up {:.2}x",
            label(size),
            tm / om
        );
        par = serde_json::json!({"size": label(size), "one_call_s": one, "two_calls_s": two,
                                 "one_call_median_s": om, "two_calls_median_s": tm, "speedup": tm / om});
    }
    let out = bench_dir().join("results.json");
    std::fs::create_dir_all(bench_dir())?;
    std::fs::write(
        &out,
        serde_json::to_string_pretty(
            &serde_json::json!({"rounds": rounds, "sizes": results, "parallel": par}),
        )? + "\n",
    )?;
    println!("results: {}", out.display());
    Ok(())
}
