//! `cargo bench --bench scale`: `replay --session` and `doctor finalize-runs --apply` at
//! workspace scale.
//!
//! Workspaces are generated once with `examples/genws.rs` (cached under
//! `$WSLEDGER_BENCH_DIR`, default `<target dir>/tmp/wsledger-bench`, as `scale-*`), every
//! session a clone of one small clean session of `fixtures/stuck-running` (12 events,
//! 2 runs, one tool operation; about 53 KB of file per session), so that all sessions
//! have the same shape and 100,000 of them stay about 5 GB.
//!
//! - Replay: for each session count (default 10k and 100k), the same number of sessions
//!   spread over the file are replayed each round, as the `wsledger` binary
//!   (`replay --session ID --format json`, a child process) and in process (the
//!   session's rows read and replayed through the library, no process start or
//!   rendering). A round's time is the median over its sessions; the ratio is the
//!   larger workspace's time over the smallest one's (median of the per-round ratios).
//!   Reading through the session indexes, it should stay about 1.
//! - Finalize: a workspace of N sessions (default 1k and 10k) with `--stuck-runs K`
//!   (default 1,000) runs left stuck, each in its own session. Each round, on a fresh
//!   copy: the backup alone (`Writer::backup_to`, what the command's backup step runs)
//!   is timed, then `doctor finalize-runs --apply` as a child process; work beyond the
//!   backup is the difference. Then, on another fresh copy, the command's steps through
//!   the library with a clock around each (a plain scan first, for comparison; plan;
//!   backup; the write transaction; closing; rescan), and the commit frames the write
//!   left in the `-wal` are counted before the connection closes: one transaction
//!   leaves exactly one.
//!
//! It prints medians and ratios, and the same as JSON in `<bench dir>/scale-results.json`.
//! Options (after `--`): `--sessions 10k,100k`, `--replays N` (sessions per round,
//! default 20), `--stuck-runs K`, `--finalize-sessions 1k,10k`, `--rounds N` (default
//! 5), `--no-replay`, `--no-finalize`. Timing never decides a test: this is not part of
//! `cargo test`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod common;
use common::{bench_dir, genws, label, median, parse_size, WSLEDGER};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};

const TEMPLATE: &str = "fixtures/stuck-running/runtime.sqlite";
/// The template's clean session: 12 events, 2 runs, one tool operation.
const TEMPLATE_SESSION: &str = "8a821121-2889-4b96-b5f2-be9583c3a781";

/// The workspace of `sessions` clones of the template session, `stuck` of them with
/// a stuck run, made once. Returns the database path.
fn workspace(sessions: u64, stuck: usize, seed: u64) -> Result<PathBuf> {
    let name = if stuck == 0 {
        format!("scale-{}-s{seed}", label(sessions))
    } else {
        format!("scale-{}-stuck{stuck}-s{seed}", label(sessions))
    };
    let dir = bench_dir().join(name);
    let db = dir.join("runtime.sqlite");
    let side = dir.join("runtime.sqlite.gen.json");
    let fits = |v: &Value| {
        v["asked"]["sessions"].as_u64() == Some(sessions)
            && v["asked"]["stuck_runs"].as_u64() == Some(stuck as u64)
            && v["seed"].as_u64() == Some(seed)
            && v["template_session"].as_str() == Some(TEMPLATE_SESSION)
    };
    if let Ok(text) = std::fs::read_to_string(&side) {
        if fits(&serde_json::from_str(&text)?) && db.exists() {
            return Ok(db);
        }
    }
    eprintln!("bench: generating {} ...", dir.display());
    let t = Instant::now();
    let status = Command::new(std::env::current_exe()?)
        .args([
            "--generate-child",
            &sessions.to_string(),
            &stuck.to_string(),
        ])
        .arg(seed.to_string())
        .arg(&db)
        .status()?;
    ensure!(status.success(), "generating {} failed", db.display());
    eprintln!("bench: generated in {:.1} s", t.elapsed().as_secs_f64());
    Ok(db)
}

/// `doctor scan`'s summary; the workspace must hold exactly the stuck runs asked for
/// and no other finding.
fn check_scan(db: &Path, stuck: usize) -> Result<()> {
    let out = Command::new(WSLEDGER)
        .args(["doctor", "scan", "--no-progress", "--format", "json"])
        .arg(db)
        .stderr(Stdio::inherit())
        .output()?;
    let v: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("doctor scan {} printed no JSON", db.display()))?;
    let s = &v["summary"];
    let expect_code = if stuck == 0 { 0 } else { 1 };
    ensure!(
        out.status.code() == Some(expect_code)
            && s["findings"].as_u64() == Some(stuck as u64)
            && s["stuck_runs"].as_u64() == Some(stuck as u64),
        "{}: expected {stuck} stuck runs and nothing else, scan says {s}",
        db.display()
    );
    Ok(())
}

fn open_ro(db: &Path) -> Result<Connection> {
    Ok(Connection::open_with_flags(
        format!("file:{}?mode=ro&immutable=1", db.display()),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )?)
}

/// `n` session ids spread evenly over the file's sessions.
fn spread_sessions(db: &Path, n: usize) -> Result<Vec<String>> {
    let conn = open_ro(db)?;
    let all: Vec<String> = conn
        .prepare("SELECT session_id FROM session_metadata ORDER BY rowid")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    ensure!(!all.is_empty(), "{} has no sessions", db.display());
    let n = n.min(all.len());
    Ok((0..n)
        .map(|i| all[i * all.len() / n + all.len() / (2 * n)].clone())
        .collect())
}

/// `wsledger replay --session ID` as a child process; it must exit 0.
fn replay_command(db: &Path, session: &str) -> Result<f64> {
    let t = Instant::now();
    let status = Command::new(WSLEDGER)
        .args(["replay", "--format", "json", "--session", session, "-w"])
        .arg(db)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    let s = t.elapsed().as_secs_f64();
    ensure!(status.success(), "replay of {session} exited {status}");
    Ok(s)
}

/// What the command does before rendering, in process: open, read the session's rows
/// through its indexes, replay.
fn replay_in_process(db: &Path, session: &str) -> Result<f64> {
    use wsledger::replay::{operation_ids_named, replay, SessionRows};
    let t = Instant::now();
    let ws = wsledger::db::Workspace::open_read_only(db)?;
    let bundle = ws.export_session(session, &operation_ids_named)?;
    let rows = SessionRows::from_bundle(&bundle)?;
    let r = replay(&rows);
    let s = t.elapsed().as_secs_f64();
    ensure!(
        !rows.is_empty() && r.all_divergences().next().is_none(),
        "replay of {session}: no rows, or divergences"
    );
    Ok(s)
}

fn bench_replay(sizes: &[u64], per_round: usize, rounds: usize) -> Result<Value> {
    println!(
        "\nreplay --session: {per_round} sessions per workspace per round, {rounds} rounds \
         (per replay: median of the round; ratio: to the {} workspace, median of per-round ratios)",
        label(sizes[0])
    );
    let mut cases = Vec::new();
    for &n in sizes {
        let db = workspace(n, 0, 1)?;
        // Also warms the page cache.
        check_scan(&db, 0)?;
        let sessions = spread_sessions(&db, per_round)?;
        cases.push((n, db, sessions));
    }
    // [case][round] medians.
    let mut cmd = vec![Vec::new(); cases.len()];
    let mut inproc = vec![Vec::new(); cases.len()];
    for round in 0..rounds {
        // Alternate the order so that drift in the machine's load does not favour one.
        let order: Vec<usize> = if round % 2 == 0 {
            (0..cases.len()).collect()
        } else {
            (0..cases.len()).rev().collect()
        };
        for i in order {
            let (_, db, sessions) = &cases[i];
            let mut c = Vec::new();
            let mut p = Vec::new();
            for s in sessions {
                c.push(replay_command(db, s)?);
                p.push(replay_in_process(db, s)?);
            }
            cmd[i].push(median(&c));
            inproc[i].push(median(&p));
        }
    }
    println!(
        "{:>9} {:>9} {:>13} {:>7} {:>14} {:>7}",
        "sessions", "file MB", "command ms", "ratio", "in-process ms", "ratio"
    );
    let mut out = Vec::new();
    for (i, (n, db, _)) in cases.iter().enumerate() {
        let ratio = |v: &[Vec<f64>]| {
            let r: Vec<f64> = (0..rounds).map(|k| v[i][k] / v[0][k]).collect();
            (median(&r), r)
        };
        let (rc, rcs) = ratio(&cmd);
        let (rp, rps) = ratio(&inproc);
        let file_mb = std::fs::metadata(db)?.len() as f64 / 1e6;
        println!(
            "{:>9} {:>9.0} {:>13.2} {:>7.2} {:>14.2} {:>7.2}",
            label(*n),
            file_mb,
            median(&cmd[i]) * 1e3,
            rc,
            median(&inproc[i]) * 1e3,
            rp
        );
        out.push(json!({
            "sessions": n, "file_mb": file_mb,
            "command_s": cmd[i], "command_median_s": median(&cmd[i]),
            "command_ratio_median": rc, "command_ratios": rcs,
            "in_process_s": inproc[i], "in_process_median_s": median(&inproc[i]),
            "in_process_ratio_median": rp, "in_process_ratios": rps,
        }));
    }
    Ok(json!({"sessions_per_round": per_round, "rounds": rounds, "workspaces": out}))
}

/// A fresh copy of `src` as `<dir>/runtime.sqlite`, synced, so that writing it back
/// does not land in what is measured next.
fn fresh_copy(src: &Path, dir: &Path) -> Result<PathBuf> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let db = dir.join("runtime.sqlite");
    std::fs::copy(src, &db)?;
    std::fs::File::open(&db)?.sync_all()?;
    Ok(db)
}

/// Commit frames in the valid prefix of `<db>-wal` (frames whose salts match the
/// header's): one per transaction written since the WAL was last reset.
fn wal_commit_frames(db: &Path) -> Result<u64> {
    let mut p = db.as_os_str().to_owned();
    p.push("-wal");
    let b = std::fs::read(PathBuf::from(p))?;
    let be = |o: usize| u32::from_be_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    if b.len() < 32 {
        return Ok(0);
    }
    let page = match be(8) {
        1 => 65_536,
        n => n as usize,
    };
    let (salt1, salt2) = (be(16), be(20));
    let (mut off, mut commits) = (32, 0);
    while off + 24 + page <= b.len() && be(off + 8) == salt1 && be(off + 12) == salt2 {
        commits += u64::from(be(off + 4) != 0);
        off += 24 + page;
    }
    Ok(commits)
}

/// The steps of `doctor finalize-runs --apply` (`cli::finalize::run`) through the
/// library, each timed; the file has no storage-root marker or binding, so there is no
/// owner lock to take.
fn finalize_phases(db: &Path) -> Result<Value> {
    use wsledger::db::write::{ApplyOptions, Writer};
    use wsledger::finalize::plan_finalize;
    use wsledger::scan::{scan_path, ScanOptions};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let opts = wsledger::finalize::PlanOptions {
        now_ms: now,
        ..Default::default()
    };
    // The scan alone first, to tell it from the rest of the plan (run reads, planning).
    let t = Instant::now();
    scan_path(db, ScanOptions::default(), &mut |_, _| {})?;
    let scan_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let planning = plan_finalize(db, &opts)?;
    let plan_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let writer = Writer::open(db, wsledger::release::repair_basis::schema_gate)?;
    writer.check_schema()?;
    let open_s = t.elapsed().as_secs_f64();
    let dest = db.with_extension("sqlite.phases.bak");
    let t = Instant::now();
    writer.backup_to(&dest)?;
    let backup_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    writer.apply(&planning.plan.writes, &ApplyOptions::default())?;
    let transaction_s = t.elapsed().as_secs_f64();
    // Before the close checkpoints and removes the -wal.
    let commit_frames = wal_commit_frames(db)?;
    let t = Instant::now();
    drop(writer);
    let close_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let after = scan_path(
        db,
        ScanOptions {
            all_runs: true,
            ..ScanOptions::default()
        },
        &mut |_, _| {},
    )?;
    let rescan_s = t.elapsed().as_secs_f64();
    Ok(json!({
        "planned": planning.plan.plan.len(), "stuck_after": after.summary.stuck_runs,
        "scan_s": scan_s, "plan_s": plan_s, "open_s": open_s, "backup_s": backup_s,
        "transaction_s": transaction_s, "commit_frames": commit_frames,
        "close_s": close_s, "rescan_s": rescan_s,
    }))
}

fn child_json(args: &[&std::ffi::OsStr]) -> Result<Value> {
    let out = Command::new(std::env::current_exe()?)
        .args(args)
        .stderr(Stdio::inherit())
        .output()?;
    ensure!(out.status.success(), "bench child {args:?} failed");
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn bench_finalize(sessions: u64, stuck: usize, rounds: usize) -> Result<Value> {
    println!(
        "\nfinalize-runs --apply: {stuck} stuck runs in {} sessions, {rounds} rounds, each on a fresh copy",
        label(sessions)
    );
    let src = workspace(sessions, stuck, 1)?;
    check_scan(&src, stuck)?;
    let work = bench_dir().join("scale-finalize-work");
    let control = bench_dir().join("scale-maka-control");
    std::fs::create_dir_all(&control)?;
    let (mut total, mut backup, mut beyond) = (Vec::new(), Vec::new(), Vec::new());
    let mut phases = Vec::new();
    for _ in 0..rounds {
        let db = fresh_copy(&src, &work)?;
        // The backup step alone, on this very file.
        let dest = work.join("alone.bak");
        let b = child_json(&["--backup-child".as_ref(), db.as_ref(), dest.as_ref()])?;
        std::fs::remove_file(&dest)?;
        let b = b["backup_s"].as_f64().context("backup_s")?;
        let t = Instant::now();
        let out = Command::new(WSLEDGER)
            .args([
                "doctor",
                "finalize-runs",
                "--apply",
                "--format",
                "json",
                "-w",
            ])
            .arg(&db)
            .env("WSLEDGER_MAKA_CONTROL_DIR", &control)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()?;
        let s = t.elapsed().as_secs_f64();
        ensure!(
            out.status.success(),
            "finalize-runs --apply exited {}",
            out.status
        );
        let v: Value = serde_json::from_slice(&out.stdout)?;
        ensure!(
            v["applied"] == true && v["plan"].as_array().map(Vec::len) == Some(stuck),
            "finalize-runs --apply did not apply {stuck} runs"
        );
        total.push(s);
        backup.push(b);
        beyond.push(s - b);
        let db = fresh_copy(&src, &work)?;
        let p = child_json(&["--finalize-child".as_ref(), db.as_ref()])?;
        ensure!(
            p["planned"].as_u64() == Some(stuck as u64) && p["stuck_after"].as_u64() == Some(0),
            "library apply: {p}"
        );
        phases.push(p);
    }
    let _ = std::fs::remove_dir_all(&work);
    let med = |k: &str| {
        median(
            &phases
                .iter()
                .map(|p| p[k].as_f64().unwrap_or(0.0))
                .collect::<Vec<_>>(),
        )
    };
    let frames: Vec<u64> = phases
        .iter()
        .map(|p| p["commit_frames"].as_u64().unwrap_or(0))
        .collect();
    println!(
        "command: total {:.2} s, backup alone {:.2} s, work beyond the backup {:.2} s (medians)",
        median(&total),
        median(&backup),
        median(&beyond)
    );
    println!(
        "library steps: plan {:.2} s (of which the scan {:.2} s), open {:.3} s, backup {:.2} s, \
         transaction {:.3} s, close {:.3} s, rescan {:.2} s; commit frames in the -wal {frames:?}",
        med("plan_s"),
        med("scan_s"),
        med("open_s"),
        med("backup_s"),
        med("transaction_s"),
        med("close_s"),
        med("rescan_s"),
    );
    Ok(json!({
        "sessions": sessions, "stuck_runs": stuck, "rounds": rounds,
        "file_mb": std::fs::metadata(&src)?.len() as f64 / 1e6,
        "command_total_s": total, "backup_alone_s": backup, "beyond_backup_s": beyond,
        "command_total_median_s": median(&total), "backup_alone_median_s": median(&backup),
        "beyond_backup_median_s": median(&beyond),
        "library_steps": phases,
        "library_medians_s": {"scan": med("scan_s"), "plan": med("plan_s"), "open": med("open_s"), "backup": med("backup_s"),
                              "transaction": med("transaction_s"), "close": med("close_s"),
                              "rescan": med("rescan_s")},
        "commit_frames": frames,
    }))
}

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    match argv.get(1).map(String::as_str) {
        Some("--generate-child") => {
            let (sessions, stuck, seed) = (argv[2].parse()?, argv[3].parse()?, argv[4].parse()?);
            let template = Path::new(env!("CARGO_MANIFEST_DIR")).join(TEMPLATE);
            genws::run(
                &genws::Args::new(PathBuf::from(&argv[5]), None, Some(sessions), seed)
                    .template_session(template, TEMPLATE_SESSION)
                    .damage(0, 0, stuck),
            )?;
            return Ok(());
        }
        Some("--backup-child") => {
            let writer = wsledger::db::write::Writer::open(
                Path::new(&argv[2]),
                wsledger::release::repair_basis::schema_gate,
            )?;
            let t = Instant::now();
            writer.backup_to(Path::new(&argv[3]))?;
            println!("{}", json!({"backup_s": t.elapsed().as_secs_f64()}));
            return Ok(());
        }
        Some("--finalize-child") => {
            println!("{}", finalize_phases(Path::new(&argv[2]))?);
            return Ok(());
        }
        _ => {}
    }
    let mut sizes = vec![10_000, 100_000];
    let mut per_round = 20usize;
    let mut stuck = 1_000usize;
    let mut fin_sessions = vec![1_000, 10_000];
    let mut rounds = 5usize;
    let (mut do_replay, mut do_finalize) = (true, true);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--sessions" => sizes = val()?.split(',').map(parse_size).collect::<Result<_>>()?,
            "--replays" => per_round = val()?.parse()?,
            "--stuck-runs" => stuck = parse_size(&val()?)? as usize,
            "--finalize-sessions" => {
                fin_sessions = val()?.split(',').map(parse_size).collect::<Result<_>>()?
            }
            "--rounds" => rounds = val()?.parse()?,
            "--no-replay" => do_replay = false,
            "--no-finalize" => do_finalize = false,
            // `cargo bench` passes `--bench`.
            "--bench" => {}
            other => bail!("unknown argument {other}"),
        }
    }
    ensure!(
        !sizes.is_empty() && rounds > 0 && per_round > 0,
        "nothing to measure"
    );
    ensure!(
        fin_sessions.iter().all(|&n| stuck as u64 <= n),
        "--stuck-runs K needs at least K sessions"
    );
    println!(
        "wsledger scale benchmark: {} cores; every session a clone of {TEMPLATE_SESSION} of {TEMPLATE}",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let replay = if do_replay {
        bench_replay(&sizes, per_round, rounds)?
    } else {
        Value::Null
    };
    let finalize = if do_finalize {
        let mut v = Vec::new();
        for &n in &fin_sessions {
            v.push(bench_finalize(n, stuck, rounds)?);
        }
        Value::Array(v)
    } else {
        Value::Null
    };
    std::fs::create_dir_all(bench_dir())?;
    let out = bench_dir().join("scale-results.json");
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&json!({"replay": replay, "finalize": finalize}))? + "\n",
    )?;
    println!("results: {}", out.display());
    Ok(())
}
