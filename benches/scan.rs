//! `cargo bench --bench scan`: `doctor scan` against floors measured in the same run.
//!
//! Workspaces:
//! - `maka-bench`: the workspace Maka's own code wrote (`../shared/bench`), unpacked
//!   once with `xz` into the target directory (see `common/maka_bench.rs`; skipped,
//!   with a message, when neither it nor `xz` is there);
//! - real-shape sizes (default 1M and 5M events): generated once with
//!   `examples/genws.rs` from the clean sessions of that workspace, so they have its
//!   shape (many short sessions and runs, its payloads and tool density);
//! - `--sizes`: workspaces cloned from `fixtures/healthy` (the earlier bench).
//!
//! Generated workspaces are cached under `$WSLEDGER_BENCH_DIR` (default `<target
//! dir>/tmp/wsledger-bench`). Each round runs, each in a child process, back to back:
//!
//! - read: the `sqlite3`-style read of issue #16 (`db::EVENTS_AS_SQLITE3_READS`):
//!   every row and column of `runtime_events` in the scan's order, nothing else;
//! - tables: the full read of every table the scan reads (`db::TABLES_THE_SCAN_READS`),
//!   one after the other on one thread;
//! - decode: the scan's own query with every payload decoded by our typed decoder
//!   (the earlier bench's floor);
//! - scan: `wsledger doctor scan PATH`, whose peak RSS and CPU time (user and system,
//!   all threads) are read with `wait4`.
//!
//! Every floor opens the file as the scan does (`immutable=1`) with the scan's
//! connection settings and allocator. It prints medians, the ratios scan / read and
//! scan / tables (medians of the per-round ratios, so that drift from other load on
//! the machine cancels), time and CPU time per event (the second is the work done,
//! whatever the two cores' schedule) and peak RSS; the same goes to
//! `<bench dir>/results.json`. With `--sizes`, then one call scanning two workspaces
//! against two sequential calls (the parallel scan).
//!
//! With `WSLEDGER_BENCH_BASELINE=PATH` (another `wsledger` binary, e.g. a build of an
//! earlier commit) each round also scans with it: "before" and "after" under the same
//! load.
//!
//! Options (after `--`): `--real-sizes 1M,5M` (`none` for none), `--sizes 10k,100k`,
//! `--rounds N` (default 3), `--no-maka-bench`, `--no-parallel`. Timing never decides
//! a test: this is not part of `cargo test`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod common;
use common::{bench_dir, genws, label, maka_bench, median, parse_size, WSLEDGER};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

/// Template sessions cloned for the real shape: enough variety (about 11k events),
/// little memory while generating.
const REAL_TEMPLATE_SESSIONS: usize = 200;

/// Which workspace to generate.
#[derive(Clone, Copy)]
enum Shape {
    /// Sessions of `fixtures/healthy`.
    Healthy,
    /// The clean sessions of the bench workspace.
    Real,
}

/// The bench workspace, unpacked into the target directory if it is not there yet.
fn maka_bench_workspace() -> Result<Option<PathBuf>> {
    if let Some(p) = maka_bench::present() {
        return Ok(Some(p));
    }
    let xz = maka_bench::shared_dir().join("runtime.sqlite.xz");
    let dest = maka_bench::unpacked();
    if !xz.is_file() || Command::new("xz").arg("--version").output().is_err() {
        eprintln!(
            "bench: no bench workspace (and no {} or no `xz`); to get it: {}",
            xz.display(),
            maka_bench::how_to_get()
        );
        return Ok(None);
    }
    eprintln!("bench: unpacking {} to {}...", xz.display(), dest.display());
    std::fs::create_dir_all(dest.parent().context("no parent")?)?;
    let tmp = dest.with_extension("unpacking");
    let status = Command::new("xz")
        .arg("-dkc")
        .arg(&xz)
        .stdout(std::fs::File::create(&tmp)?)
        .status()?;
    if !status.success() {
        bail!("xz -dkc {} failed", xz.display());
    }
    let size: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        maka_bench::shared_dir().join("size.json"),
    )?)?;
    let got = std::fs::metadata(&tmp)?.len();
    if size["rawBytes"].as_u64() != Some(got) {
        bail!(
            "{} unpacked to {got} bytes, size.json says {}",
            xz.display(),
            size["rawBytes"]
        );
    }
    std::fs::rename(&tmp, &dest)?;
    Ok(Some(dest))
}

/// The sessions Maka flags in the bench workspace (damaged, stuck): never cloned.
fn flagged_sessions() -> Result<Vec<String>> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(maka_bench::verdict())?)?;
    Ok(v["sessions"]
        .as_array()
        .context("verdict without sessions")?
        .iter()
        .filter_map(|s| s["sessionId"].as_str().map(str::to_owned))
        .collect())
}

/// The generated workspace of `events` events (seed `seed`), made once.
fn workspace(shape: Shape, events: u64, seed: u64) -> Result<(PathBuf, u64)> {
    let name = match shape {
        Shape::Healthy => format!("ws-{}-s{seed}", label(events)),
        Shape::Real => format!("real-{}-s{seed}", label(events)),
    };
    let dir = bench_dir().join(name);
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
    let mut child = Command::new(std::env::current_exe()?);
    child
        .args(["--generate-child", &events.to_string(), &seed.to_string()])
        .arg(&db);
    if let Shape::Real = shape {
        let bench =
            maka_bench_workspace()?.context("the real shape is cloned from the bench workspace")?;
        child.arg(bench);
    }
    if !child.status()?.success() {
        bail!("generating {} failed", db.display());
    }
    eprintln!("bench: generated in {:.1} s", t.elapsed().as_secs_f64());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&side)?)?;
    Ok((dir, v["events"].as_u64().unwrap_or(events)))
}

/// A connection as the scan opens the file, with the scan's settings.
fn open_like_the_scan(db: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        format!("file:{}?mode=ro&immutable=1", db.display()),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "query_only", true)?;
    conn.pragma_update(None, "cache_size", wsledger::db::READ_CACHE_KIB)?;
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(conn)
}

/// Steps through every row of `sql` and touches every column as `sqlite3` does when
/// it prints one (text as bytes, no UTF-8 check). Returns rows read.
fn read_all(conn: &Connection, sql: &str, sink: &mut u64) -> Result<u64> {
    let mut stmt = conn.prepare(sql)?;
    let columns = stmt.column_count();
    let mut rows = stmt.query([])?;
    let mut n = 0u64;
    while let Some(r) = rows.next()? {
        for i in 0..columns {
            *sink = sink.wrapping_add(match r.get_ref(i)? {
                ValueRef::Null => 0,
                ValueRef::Integer(v) => v as u64,
                ValueRef::Real(v) => v as u64,
                ValueRef::Text(b) | ValueRef::Blob(b) => b.len() as u64,
            });
        }
        n += 1;
    }
    Ok(n)
}

/// The read floor: `runtime_events` as `sqlite3` reads it. Returns rows read.
fn floor_read(db: &Path) -> Result<u64> {
    let conn = open_like_the_scan(db)?;
    let mut sink = 0u64;
    let n = read_all(&conn, wsledger::db::EVENTS_AS_SQLITE3_READS, &mut sink)?;
    std::hint::black_box(sink);
    Ok(n)
}

/// The tables floor: every table the scan reads, in full. Returns `runtime_events`
/// rows read.
fn floor_tables(db: &Path) -> Result<u64> {
    let conn = open_like_the_scan(db)?;
    let mut sink = 0u64;
    let mut events = 0;
    for sql in wsledger::db::TABLES_THE_SCAN_READS {
        let n = read_all(&conn, sql, &mut sink)?;
        if *sql == wsledger::db::EVENTS_IN_SCAN_ORDER {
            events = n;
        }
    }
    std::hint::black_box(sink);
    Ok(events)
}

/// The decode floor: the scan's query and columns, each payload decoded. Returns rows
/// read.
fn floor_decode(db: &Path) -> Result<u64> {
    let conn = open_like_the_scan(db)?;
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
    /// User and system time of all its threads.
    cpu_seconds: f64,
    max_rss_kb: i64,
    status: i32,
}

/// Runs `wsledger doctor scan ARGS...` and reads its peak RSS with `wait4`.
fn scan(args: &[&Path]) -> Result<ChildRun> {
    scan_with(Path::new(WSLEDGER), args)
}

/// [`scan`] with another `wsledger` binary (`$WSLEDGER_BENCH_BASELINE`: an earlier
/// build, for a before/after under the same load).
#[allow(unsafe_code)]
fn scan_with(binary: &Path, args: &[&Path]) -> Result<ChildRun> {
    let t = Instant::now();
    let child = Command::new(binary)
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
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(ChildRun {
        seconds,
        cpu_seconds: secs(usage.ru_utime) + secs(usage.ru_stime),
        max_rss_kb: usage.ru_maxrss,
        status: code,
    })
}

/// A floor in a child process (same footing as the scan): seconds and rows.
fn floor_child(kind: &str, db: &Path) -> Result<(f64, u64)> {
    let t = Instant::now();
    let out = Command::new(std::env::current_exe()?)
        .args(["--floor-child", kind])
        .arg(db)
        .stderr(Stdio::inherit())
        .output()?;
    let seconds = t.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("floor {kind} failed on {}", db.display());
    }
    let n: u64 = String::from_utf8_lossy(&out.stdout).trim().parse()?;
    Ok((seconds, n))
}

/// One workspace to measure: its name, directory, events, and the exit status its
/// scan must have (the bench workspace has findings).
struct Case {
    name: String,
    dir: PathBuf,
    events: u64,
    status: i32,
}

fn main() -> Result<()> {
    // The floors read with SQLite set up as the scan's binary sets it up.
    let _ = wsledger::db::tune_sqlite_for_this_process();
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--floor-child") {
        let db = Path::new(&argv[3]);
        let n = match argv[2].as_str() {
            "read" => floor_read(db)?,
            "tables" => floor_tables(db)?,
            "decode" => floor_decode(db)?,
            other => bail!("no floor {other}"),
        };
        println!("{n}");
        return Ok(());
    }
    if argv.get(1).map(String::as_str) == Some("--generate-child") {
        let (events, seed) = (argv[2].parse()?, argv[3].parse()?);
        let mut args = genws::Args::new(PathBuf::from(&argv[4]), Some(events), None, seed);
        if let Some(bench) = argv.get(5) {
            args = args.real_shape(
                PathBuf::from(bench),
                flagged_sessions()?,
                REAL_TEMPLATE_SESSIONS,
            );
        }
        genws::run(&args)?;
        return Ok(());
    }
    let mut sizes: Vec<u64> = Vec::new();
    let mut real_sizes = vec![1_000_000, 5_000_000];
    let mut rounds = 3usize;
    let mut parallel = true;
    let mut with_bench = true;
    let list = |v: Option<String>, what: &str| -> Result<Vec<u64>> {
        let v = v.with_context(|| format!("{what} needs a value"))?;
        if v == "none" {
            return Ok(Vec::new());
        }
        v.split(',').map(parse_size).collect()
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--sizes" => sizes = list(it.next(), "--sizes")?,
            "--real-sizes" => real_sizes = list(it.next(), "--real-sizes")?,
            "--rounds" => rounds = it.next().context("--rounds needs a value")?.parse()?,
            "--no-parallel" => parallel = false,
            "--no-maka-bench" => with_bench = false,
            // `cargo bench` passes `--bench`.
            "--bench" => {}
            other => bail!("unknown argument {other}"),
        }
    }
    // The ratios are medians of the rounds: none would have none.
    if rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let mut cases = Vec::new();
    let bench = if with_bench || !real_sizes.is_empty() {
        maka_bench_workspace()?
    } else {
        None
    };
    if let (true, Some(b)) = (with_bench, &bench) {
        cases.push(Case {
            name: "maka-bench".into(),
            dir: b.clone(),
            events: 0,
            status: 1,
        });
    }
    if bench.is_some() {
        for &size in &real_sizes {
            let (dir, events) = workspace(Shape::Real, size, 1)?;
            cases.push(Case {
                name: format!("real-{}", label(size)),
                dir,
                events,
                status: 0,
            });
        }
    }
    for &size in &sizes {
        let (dir, events) = workspace(Shape::Healthy, size, 1)?;
        cases.push(Case {
            name: format!("healthy-{}", label(size)),
            dir,
            events,
            status: 0,
        });
    }
    // The machine may be shared: say how busy it was.
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load_before = load();
    println!(
        "wsledger scan benchmark: {rounds} rounds, {} cores; read = runtime_events as sqlite3 reads it, \
         tables = every table the scan reads, decode = scan query + typed decode",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:>12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>8} {:>9} {:>10} {:>12} {:>7} {:>7}",
        "workspace",
        "events",
        "read s",
        "tables",
        "decode",
        "scan s",
        "us/event",
        "cpu us/ev",
        "scan/read",
        "scan/tables",
        "rss MB",
        "file MB"
    );
    let baseline = std::env::var_os("WSLEDGER_BENCH_BASELINE").map(PathBuf::from);
    let mut results = Vec::new();
    for case in &cases {
        let db = if case.dir.is_dir() {
            case.dir.join("runtime.sqlite")
        } else {
            case.dir.clone()
        };
        // Warm the page cache and check the scan's status.
        let (_, events) = floor_child("read", &db)?;
        if case.events != 0 && events != case.events {
            bail!(
                "{}: read {events} rows, expected {}",
                case.name,
                case.events
            );
        }
        let warm = scan(&[&db])?;
        if warm.status != case.status {
            bail!(
                "doctor scan {} exited {}, expected {}",
                db.display(),
                warm.status,
                case.status
            );
        }
        let (mut rd, mut tb, mut dc, mut s) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut r_read, mut r_tables, mut rss) = (Vec::new(), Vec::new(), Vec::new());
        let (mut base_s, mut base_r, mut base_rss) = (Vec::new(), Vec::new(), Vec::new());
        let (mut cpu, mut base_cpu) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (read_s, n) = floor_child("read", &db)?;
            let (tables_s, m) = floor_child("tables", &db)?;
            let (decode_s, k) = floor_child("decode", &db)?;
            if n != events || m != events || k != events {
                bail!(
                    "{}: floors read {n}, {m}, {k} rows, expected {events}",
                    case.name
                );
            }
            let run = scan(&[&db])?;
            if run.status != case.status {
                bail!("doctor scan exited {}", run.status);
            }
            if let Some(b) = &baseline {
                let before = scan_with(b, &[&db])?;
                base_s.push(before.seconds);
                base_cpu.push(before.cpu_seconds);
                base_r.push(before.seconds / read_s);
                base_rss.push(before.max_rss_kb as f64 / 1024.0);
            }
            rd.push(read_s);
            tb.push(tables_s);
            dc.push(decode_s);
            s.push(run.seconds);
            cpu.push(run.cpu_seconds);
            r_read.push(run.seconds / read_s);
            r_tables.push(run.seconds / tables_s);
            rss.push(run.max_rss_kb as f64 / 1024.0);
        }
        let sm = median(&s);
        let cpu_per_event = median(&cpu) / events as f64 * 1e6;
        let rss_max = rss.iter().copied().fold(0.0, f64::max);
        let file_mb = std::fs::metadata(&db)?.len() as f64 / 1e6;
        println!(
            "{:>12} {:>8} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>8.2} {:>9.2} {:>10.2} {:>12.2} {:>7.1} {:>7.0}",
            case.name,
            events,
            median(&rd),
            median(&tb),
            median(&dc),
            sm,
            sm / events as f64 * 1e6,
            cpu_per_event,
            median(&r_read),
            median(&r_tables),
            rss_max,
            file_mb
        );
        if baseline.is_some() {
            println!(
                "{:>12} baseline: scan {:.3} s, cpu {:.2} s, scan/read {:.2}, rss {:.1} MB",
                case.name,
                median(&base_s),
                median(&base_cpu),
                median(&base_r),
                base_rss.iter().copied().fold(0.0, f64::max)
            );
        }
        results.push(serde_json::json!({
            "baseline_scan_s": base_s, "baseline_scan_over_read": base_r,
            "baseline_peak_rss_mb": base_rss, "baseline_scan_cpu_s": base_cpu,
            "scan_cpu_s": cpu, "scan_cpu_us_per_event": cpu_per_event,
            "workspace": case.name, "events": events, "read_s": rd, "tables_s": tb,
            "decode_s": dc, "scan_s": s, "scan_median_s": sm,
            "scan_us_per_event": sm / events as f64 * 1e6,
            "scan_over_read_median": median(&r_read), "scan_over_tables_median": median(&r_tables),
            "peak_rss_mb": rss_max, "file_mb": file_mb,
        }));
    }
    let mut par = serde_json::Value::Null;
    if parallel && !sizes.is_empty() {
        // Two workspaces of the same size: one call against two calls in a row.
        let size = sizes
            .iter()
            .copied()
            .filter(|&s| s <= 200_000)
            .max()
            .unwrap_or(sizes[0]);
        let (a, _) = workspace(Shape::Healthy, size, 1)?;
        let (b, _) = workspace(Shape::Healthy, size, 2)?;
        floor_child("read", &b.join("runtime.sqlite"))?;
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
    let load_after = load();
    println!(
        "load average (1, 5, 15 min): before {}, after {}",
        load_before.trim(),
        load_after.trim()
    );
    let out = bench_dir().join("results.json");
    std::fs::create_dir_all(bench_dir())?;
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&serde_json::json!({
            "rounds": rounds, "workspaces": results, "parallel": par,
            "loadavg_before": load_before.trim(), "loadavg_after": load_after.trim(),
        }))? + "\n",
    )?;
    println!("results: {}", out.display());
    Ok(())
}
