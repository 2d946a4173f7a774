//! Measures what scans cost a running Maka: how large its `-wal` grows while a writer
//! commits in a loop, with and without `wsledger doctor scan` running back to back
//! beside it. Dev-only (not a `wsledger` command); it writes into the file it is
//! given, so give it a copy.
//!
//! ```text
//! xz -dc /work/shared/bench/runtime.sqlite.xz > target/bench/runtime.sqlite
//! cargo build --release && cargo run --release --example wal_growth -- \
//!     --db target/bench/runtime.sqlite --seconds 30 --wsledger target/release/wsledger
//! ```
//!
//! The writer is a connection with Maka's settings (WAL, `synchronous=FULL`,
//! `busy_timeout` 5000, SQLite's automatic checkpoint every 1,000 pages), appending one
//! runtime event of about 700 bytes (the bench's mean payload) per transaction to a
//! session of its own. SQLite resets the `-wal` (writes from its start again) only when
//! a checkpoint has copied every frame and no reader still uses one; a scan holds one
//! read snapshot for as long as it runs. Phase one runs the writer alone, phase two the
//! writer beside scans started one after the other; each prints the commits made, the
//! largest `-wal` seen (sampled every 50 ms) and, with scans, their count and times.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;

struct Phase {
    commits: u64,
    max_wal: u64,
    scans: Vec<Duration>,
}

fn wal(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

fn writer(db: PathBuf, stop: Arc<AtomicBool>, commits: Arc<AtomicU64>, offset: u64) {
    let c = Connection::open(&db).expect("open the writer");
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.pragma_update(None, "synchronous", "FULL").unwrap();
    c.pragma_update(None, "foreign_keys", true).unwrap();
    let pad = "x".repeat(560);
    let mut n = offset;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let id = format!("wal-growth-{n}");
        let payload = format!(
            r#"{{"author":"system","id":"{id}","invocationId":"wal-growth-run","partial":false,"role":"system","runId":"wal-growth-run","sessionId":"wal-growth-session","text":"{pad}","ts":{n},"turnId":"wal-growth-turn"}}"#
        );
        c.execute(
            "INSERT INTO runtime_events(event_id, session_id, invocation_id, run_id, turn_id, \
             event_seq, event_kind, payload_json, committed_at) VALUES (?1, 'wal-growth-session', \
             'wal-growth-run', 'wal-growth-run', 'wal-growth-turn', ?2, 'runtime_fact', ?3, ?2)",
            rusqlite::params![id, n as i64, payload],
        )
        .expect("commit");
        commits.fetch_add(1, Ordering::Relaxed);
    }
}

fn phase(db: &Path, seconds: u64, scanner: Option<&Path>, offset: u64) -> Phase {
    // Start from an empty -wal, as after Maka's own start.
    Connection::open(db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let w = {
        let (db, stop, commits) = (db.to_path_buf(), stop.clone(), commits.clone());
        std::thread::spawn(move || writer(db, stop, commits, offset))
    };
    let scans = scanner.map(|bin| {
        let (db, stop) = (db.to_path_buf(), stop.clone());
        let bin = bin.to_path_buf();
        std::thread::spawn(move || {
            let mut times = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let st = std::process::Command::new(&bin)
                    .args(["doctor", "scan", "--format", "json", "--no-progress", "-w"])
                    .arg(&db)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .expect("run wsledger");
                assert!(st.code().is_some_and(|c| c < 2), "scan failed: {st:?}");
                times.push(t.elapsed());
            }
            times
        })
    });
    let start = Instant::now();
    let mut max_wal = 0;
    while start.elapsed() < Duration::from_secs(seconds) {
        max_wal = max_wal.max(std::fs::metadata(wal(db)).map_or(0, |m| m.len()));
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    w.join().unwrap();
    let scans = scans.map(|h| h.join().unwrap()).unwrap_or_default();
    max_wal = max_wal.max(std::fs::metadata(wal(db)).map_or(0, |m| m.len()));
    Phase {
        commits: commits.load(Ordering::Relaxed),
        max_wal,
        scans,
    }
}

fn main() {
    let mut db = None;
    let mut seconds = 30;
    let mut bin = PathBuf::from("target/release/wsledger");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--db" => db = args.next().map(PathBuf::from),
            "--seconds" => seconds = args.next().and_then(|s| s.parse().ok()).unwrap_or(30),
            "--wsledger" => bin = args.next().map(PathBuf::from).unwrap(),
            _ => {
                eprintln!("usage: wal_growth --db FILE [--seconds N] [--wsledger BIN]");
                std::process::exit(2);
            }
        }
    }
    let db = db.expect("--db FILE (a copy: the writer appends to it)");
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let alone = phase(&db, seconds, None, 0);
    println!(
        "writer alone:        {} commits in {seconds} s, largest -wal {:.1} MiB",
        alone.commits,
        mib(alone.max_wal)
    );
    let beside = phase(&db, seconds, Some(&bin), alone.commits + 1);
    let mut t: Vec<f64> = beside.scans.iter().map(Duration::as_secs_f64).collect();
    t.sort_by(f64::total_cmp);
    println!(
        "writer beside scans: {} commits in {seconds} s, largest -wal {:.1} MiB; {} scans, {:.1}-{:.1} s each",
        beside.commits,
        mib(beside.max_wal),
        t.len(),
        t.first().copied().unwrap_or(0.0),
        t.last().copied().unwrap_or(0.0)
    );
}
