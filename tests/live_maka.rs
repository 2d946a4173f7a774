//! Beside a running Maka (issue 14): a read that takes no locks never reports what a
//! change under it caused; `replay --export` reads one committed state; a refused
//! `--apply` creates nothing; `--apply` refuses while another process has the database
//! open, marker or not, and `info` says who.
//!
//! The commands run as child processes. The "Maka" that writes meanwhile is a rusqlite
//! connection of this test (or a child process, where a lock must belong to another
//! process). A command is paused at a named point through FIFOs
//! (`WSLEDGER_TEST_PAUSE_DIR`, see `wsledger::db::pause_point`): no test waits on a
//! clock.

mod common;

use common::STUCK_SESSION;
mod corpus;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{names, wal, write_marker};
use rusqlite::Connection;
use serde_json::Value;
use wsledger::db::write::{ApplyOptions, Writer};
use wsledger::finalize::plan_finalize;
use wsledger::finalize::PlanOptions;

/// Not a check: the lock-holding process some tests spawn (see `corpus::hold`).
#[test]
fn hold_lock_helper() {
    corpus::hold_lock_helper();
}

struct Out {
    status: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn doc(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }
}

fn command(args: &[&str], env: &[(&str, &Path)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wsledger"));
    c.args(args)
        .env_remove("WSLEDGER_WORKSPACE")
        .env_remove("WSLEDGER_BACKUP_DIR")
        .env_remove(wsledger::db::PAUSE_DIR_ENV)
        .env("WSLEDGER_NOW_MS", "1800000000000")
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn run(args: &[&str], env: &[(&str, &Path)]) -> Out {
    let o = command(args, env).output().unwrap();
    Out {
        status: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A command paused at named points: the test learns that it got there, does what it
/// does, and lets it go on. A command that ends before reaching its point fails the
/// test instead of hanging it.
struct Paused {
    dir: tempfile::TempDir,
    child: std::thread::JoinHandle<Out>,
    ended: Arc<AtomicBool>,
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo")
        .arg(p)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {}", p.display());
}

impl Paused {
    fn start(args: &[&str], env: &[(&str, &Path)], points: &[&str]) -> Paused {
        let dir = tempfile::tempdir().unwrap();
        for p in points {
            mkfifo(&dir.path().join(format!("{p}.paused")));
            mkfifo(&dir.path().join(format!("{p}.resume")));
        }
        let mut c = command(args, env);
        c.env(wsledger::db::PAUSE_DIR_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = c.spawn().unwrap();
        let ended = Arc::new(AtomicBool::new(false));
        let flag = ended.clone();
        let fifos: Vec<PathBuf> = points
            .iter()
            .map(|p| dir.path().join(format!("{p}.paused")))
            .collect();
        let child = std::thread::spawn(move || {
            let o = child.wait_with_output().unwrap();
            flag.store(true, Ordering::SeqCst);
            // Unblock a test still waiting at a point the command never reached.
            for f in fifos {
                let _ = std::fs::OpenOptions::new().read(true).write(true).open(f);
            }
            Out {
                status: o.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            }
        });
        Paused { dir, child, ended }
    }

    /// Waits until the command is at `point`. Later passes there do not stop.
    fn wait(&self, point: &str) {
        let paused = self.dir.path().join(format!("{point}.paused"));
        let mut f = std::fs::File::open(&paused).unwrap();
        let mut sink = Vec::new();
        f.read_to_end(&mut sink).unwrap();
        std::fs::remove_file(&paused).unwrap();
        assert!(
            !self.ended.load(Ordering::SeqCst),
            "the command ended before reaching `{point}`"
        );
    }

    fn resume(&self, point: &str) {
        let resume = self.dir.path().join(format!("{point}.resume"));
        drop(
            std::fs::OpenOptions::new()
                .write(true)
                .open(resume)
                .unwrap(),
        );
    }

    fn finish(self) -> Out {
        self.child.join().unwrap()
    }
}

/// What Maka's start-up would do to the stuck run, written as one transaction by a
/// connection of this process: finalize it.
fn finalize_stuck_run(db: &Path) -> Writer {
    let opts = PlanOptions {
        project_header: true,
        ..PlanOptions::default()
    };
    let planning = plan_finalize(db, &opts).unwrap();
    assert_eq!(planning.plan.plan.len(), 1);
    let writer = Writer::open(db, wsledger::release::repair_basis::schema_gate).unwrap();
    writer
        .apply(&planning.plan.writes, &ApplyOptions::default())
        .unwrap();
    writer
}

/// Maka starts a conversation: a session row and its first event, one transaction.
/// With `vacuum`, the file is rewritten afterwards: every page moves.
fn new_conversation(db: &Path, vacuum: bool) {
    let maka = Connection::open(db).unwrap();
    maka.execute_batch(&format!(
        "BEGIN IMMEDIATE;
         CREATE TEMP TABLE s AS SELECT * FROM session_metadata WHERE session_id = '{STUCK_SESSION}';
         UPDATE temp.s SET session_id = 'maka-new-session', name = 'new';
         INSERT INTO session_metadata SELECT * FROM temp.s;
         INSERT INTO runtime_events
           SELECT event_id || '-new', session_id, invocation_id, run_id, turn_id,
                  event_seq + 1000, event_kind, payload_json, committed_at + 1
           FROM runtime_events WHERE session_id = '{STUCK_SESSION}'
           ORDER BY event_seq DESC LIMIT 1;
         COMMIT;
         DROP TABLE temp.s;"
    ))
    .unwrap();
    if vacuum {
        maka.execute_batch("VACUUM").unwrap();
    }
}

fn scan(ws: &Path) -> Out {
    run(&common::scan_json_args(ws), &[])
}

/// Maka starts while a scan reads a WAL file without `-wal` (`immutable=1`): it starts
/// a conversation and finalizes the stuck run, its checkpoint puts the pages into the
/// file, and it quits (the `-wal` is gone again). The scan must notice and read again:
/// it reports the state after the writes, never a mixture of the two (the old read
/// counted the events from before and the sessions from after) or "damaged".
#[test]
fn a_scan_the_file_changed_under_reads_it_again() {
    let (_t, ws) = common::copy_fixture("stuck-running");
    let db = ws.join("runtime.sqlite");
    assert!(!wal(&db).exists());
    let before = scan(&ws);
    assert_eq!(before.status, 1, "{}", before.stderr);

    let wsarg = ws.to_str().unwrap();
    let p = Paused::start(
        &["doctor", "scan", "--format", "json", "-w", wsarg],
        &[],
        &["scan:walked"],
    );
    p.wait("scan:walked");
    new_conversation(&db, false);
    let writer = finalize_stuck_run(&db);
    // Maka quits: its last connection checkpoints into the file and removes the -wal.
    drop(writer);
    assert!(!wal(&db).exists());
    p.resume("scan:walked");
    let during = p.finish();

    let after = scan(&ws);
    assert_ne!(after.status, 2, "{}", after.stderr);
    assert_ne!(before.doc(), after.doc());
    assert_eq!(during.status, after.status, "{}", during.stderr);
    assert_eq!(during.doc(), after.doc(), "{}", during.stderr);
    assert_eq!(during.doc()["summary"]["live_snapshot"], false);
}

/// The same, but Maka stays open after its checkpoint, and the file was rewritten
/// meanwhile (`VACUUM`: every page moved; the old read then counted 0 sessions and 0
/// runs): the second read goes through the `-wal` with SQLite's locking, and says it
/// read one snapshot of a live workspace.
#[test]
fn a_scan_the_file_changed_under_reads_it_again_through_the_wal() {
    let (_t, ws) = common::copy_fixture("stuck-running");
    let db = ws.join("runtime.sqlite");
    let wsarg = ws.to_str().unwrap();
    let p = Paused::start(
        &["doctor", "scan", "--format", "json", "-w", wsarg],
        &[],
        &["scan:walked"],
    );
    p.wait("scan:walked");
    let maka = Connection::open(&db).unwrap();
    maka.execute_batch("SELECT count(*) FROM runtime_events")
        .unwrap();
    new_conversation(&db, true);
    let writer = finalize_stuck_run(&db);
    drop(writer);
    maka.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    assert!(wal(&db).exists(), "Maka's connection keeps its -wal");
    p.resume("scan:walked");
    let during = p.finish();

    let after = scan(&ws);
    assert_ne!(after.status, 2, "{}", after.stderr);
    assert_eq!(during.status, after.status, "{}", during.stderr);
    assert_eq!(during.doc(), after.doc(), "{}", during.stderr);
    assert_eq!(during.doc()["summary"]["live_snapshot"], true);
    let table = run(&["doctor", "scan", "-w", wsarg], &[]);
    assert!(
        table
            .stdout
            .contains("read one snapshot of a live workspace"),
        "{}",
        table.stdout
    );
    drop(maka);
}

fn export(ws: &Path, file: &Path) -> Out {
    run(
        &[
            "replay",
            "--format",
            "json",
            "-w",
            ws.to_str().unwrap(),
            "--session",
            STUCK_SESSION,
            "--export",
            file.to_str().unwrap(),
        ],
        &[],
    )
}

/// One tool commit as Maka makes it: the event and the tool rows in one transaction.
fn commit_tool_step(maka: &Connection) {
    maka.execute_batch(&format!(
        "BEGIN IMMEDIATE;
         INSERT INTO runtime_events
           SELECT event_id || '-again', session_id, invocation_id, run_id, turn_id,
                  event_seq + 1000, event_kind, payload_json, committed_at + 1
           FROM runtime_events WHERE session_id = '{STUCK_SESSION}'
           ORDER BY event_seq DESC LIMIT 1;
         UPDATE tool_operations SET version = version + 1
           WHERE invocation_id IN
             (SELECT run_id FROM core_agent_runs WHERE session_id = '{STUCK_SESSION}');
         COMMIT;"
    ))
    .unwrap();
}

/// `replay --export` while Maka commits between its queries (after the events are
/// read, before the tool rows are): the bundle is the state before that commit or the
/// one after, never events of one and tool rows of the other.
#[test]
fn an_export_reads_one_committed_state_while_maka_commits() {
    let (t, ws) = common::copy_fixture("stuck-running");
    let db = ws.join("runtime.sqlite");
    // Maka is running: its connection keeps the -wal and -shm.
    let maka = Connection::open(&db).unwrap();
    maka.query_row("SELECT count(*) FROM runtime_events", [], |r| {
        r.get::<_, i64>(0)
    })
    .unwrap();
    let bundle = |name: &str| t.path().join(name);
    let pre = export(&ws, &bundle("pre.json"));
    assert_ne!(pre.status, 2, "{}", pre.stderr);

    let wsarg = ws.to_str().unwrap();
    let live = bundle("live.json");
    let p = Paused::start(
        &[
            "replay",
            "--format",
            "json",
            "-w",
            wsarg,
            "--session",
            STUCK_SESSION,
            "--export",
            live.to_str().unwrap(),
        ],
        &[],
        &["export:tool_operations"],
    );
    p.wait("export:tool_operations");
    commit_tool_step(&maka);
    p.resume("export:tool_operations");
    let during = p.finish();
    assert_ne!(during.status, 2, "{}", during.stderr);

    let post = export(&ws, &bundle("post.json"));
    assert_ne!(post.status, 2, "{}", post.stderr);
    let read = |name: &str| std::fs::read_to_string(bundle(name)).unwrap();
    assert_ne!(read("pre.json"), read("post.json"));
    let got = read("live.json");
    assert!(
        got == read("pre.json") || got == read("post.json"),
        "the live bundle is neither committed state"
    );
    // And its replay is the replay of that state.
    let same = if got == read("pre.json") { &pre } else { &post };
    assert_eq!(during.status, same.status);
    assert_eq!(
        during.doc()["summary"],
        same.doc()["summary"],
        "{}",
        during.stderr
    );
    drop(maka);
}

/// A refused `quarantine --apply --out a/b/c` creates neither `a/b/c` nor `a`, nor a
/// backup: whether the owner lock, another process or the backup refuses.
#[test]
fn a_refused_quarantine_creates_no_directory() {
    let (_ws_dir, ws) = common::copy_fixture("orphan-response");
    // Lock namespace, bundles and backups outside the workspace.
    let t = tempfile::tempdir().unwrap();
    let db = ws.join("runtime.sqlite");
    let control = t.path().join("control");
    let out = t.path().join("a/b/c");
    let wsarg = ws.to_str().unwrap();
    let args = [
        "doctor",
        "quarantine",
        "--apply",
        "-w",
        wsarg,
        "--out",
        out.to_str().unwrap(),
    ];
    let hash = || common::file_hash(&db);
    let before = (hash(), names(&ws));

    // Maka holds its owner lock.
    let root = "0123456789abcdef".repeat(4);
    write_marker(&ws, &root);
    let before_marker = (hash(), names(&ws));
    let held = wsledger::lock::acquire(&control, std::slice::from_ref(&root)).unwrap();
    let o = run(&args, &[("WSLEDGER_MAKA_CONTROL_DIR", &control)]);
    assert_eq!(o.status, 2, "{}", o.stderr);
    assert!(o.stderr.contains("owner.lock"), "{}", o.stderr);
    assert!(!t.path().join("a").exists(), "created on a refusal");
    assert_eq!((hash(), names(&ws)), before_marker);
    drop(held);
    std::fs::remove_file(ws.join(".maka-storage-root.json")).unwrap();

    // Another process has the database open (no marker).
    let holder = corpus::hold(&db, "SELECT count(*) FROM runtime_events");
    let o = run(&args, &[("WSLEDGER_MAKA_CONTROL_DIR", &control)]);
    assert_eq!(o.status, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("another process has this database open"),
        "{}",
        o.stderr
    );
    assert!(!t.path().join("a").exists(), "created on a refusal");
    drop(holder);
    // The holder was killed: its -wal and -shm stay, with no lock on them.
    for f in ["runtime.sqlite-wal", "runtime.sqlite-shm"] {
        let _ = std::fs::remove_file(ws.join(f));
    }
    assert_eq!((hash(), names(&ws)), before);

    // The backup cannot be made (its directory does not exist).
    let missing = t.path().join("no-such-dir");
    let o = run(
        &args,
        &[
            ("WSLEDGER_MAKA_CONTROL_DIR", &control),
            ("WSLEDGER_BACKUP_DIR", &missing),
        ],
    );
    assert_eq!(o.status, 2, "{}", o.stderr);
    assert!(o.stderr.contains("backup failed"), "{}", o.stderr);
    assert!(!t.path().join("a").exists(), "left behind after a refusal");
    assert_eq!((hash(), names(&ws)), before);

    // And when nothing refuses, the directory is made.
    let o = run(&args, &[("WSLEDGER_MAKA_CONTROL_DIR", &control)]);
    assert_eq!(o.status, 0, "{}", o.stderr);
    assert!(out.is_dir());
}

/// `--apply` of every repair command refuses while another process has the database
/// open, with no storage-root marker (so no owner lock to ask), naming its pid; once it
/// is gone, the same command (whose own connection does not count) goes through.
#[test]
fn apply_refuses_while_another_process_has_the_database_open() {
    for (fixture, cmd) in [
        ("stuck-running", "finalize-runs"),
        ("orphan-response", "quarantine"),
        ("corrupt-ledger", "repair"),
    ] {
        let (_ws_dir, ws) = common::copy_fixture(fixture);
        // Lock namespace, bundles and backups outside the workspace.
        let t = tempfile::tempdir().unwrap();
        let db = ws.join("runtime.sqlite");
        let control = t.path().join("control");
        let backups = t.path().join("backups");
        std::fs::create_dir(&backups).unwrap();
        let env = [
            ("WSLEDGER_MAKA_CONTROL_DIR", control.as_path()),
            ("WSLEDGER_BACKUP_DIR", backups.as_path()),
        ];
        let wsarg = ws.to_str().unwrap();
        let args = ["doctor", cmd, "--apply", "-w", wsarg];
        assert!(!ws.join(".maka-storage-root.json").exists());
        let holder = corpus::hold(&db, "SELECT count(*) FROM runtime_events");
        let before = (common::file_hash(&db), common::file_hash(&wal(&db)));
        let o = run(&args, &env);
        assert_eq!(o.status, 2, "{cmd}: {}", o.stderr);
        assert!(o.stdout.is_empty());
        let want = format!(
            "another process has this database open (pid {}",
            holder.pid()
        );
        assert!(o.stderr.contains(&want), "{cmd}: {}", o.stderr);
        assert!(o.stderr.contains("hint: quit Maka"), "{cmd}: {}", o.stderr);
        assert_eq!(
            (common::file_hash(&db), common::file_hash(&wal(&db))),
            before,
            "{cmd}: written while another process had the file open"
        );
        assert!(names(&backups).is_empty(), "{cmd}: a backup was left");

        // `info` says who.
        let info = run(&["info", "--format", "json", "-w", wsarg], &env);
        assert_eq!(info.status, 0, "{}", info.stderr);
        assert_eq!(info.doc()["open_by_other_process"], "yes");
        assert_eq!(info.doc()["open_by_pid"], holder.pid());
        let table = run(&["info", "-w", wsarg], &env);
        assert!(
            table
                .stdout
                .contains(&format!("open by pid {}", holder.pid())),
            "{}",
            table.stdout
        );
        drop(holder);

        let info = run(&["info", "--format", "json", "-w", wsarg], &env);
        assert_eq!(info.doc()["open_by_other_process"], "no");
        let o = run(&args, &env);
        assert_eq!(o.status, 0, "{cmd}: {}", o.stderr);
    }
}

/// `doctor restore --apply` refuses the same way.
#[test]
fn restore_refuses_while_another_process_has_the_database_open() {
    let (_ws_dir, ws) = common::copy_fixture("orphan-response");
    // Lock namespace, bundles and backups outside the workspace.
    let t = tempfile::tempdir().unwrap();
    let db = ws.join("runtime.sqlite");
    let control = t.path().join("control");
    let out = t.path().join("bundles");
    let env = [("WSLEDGER_MAKA_CONTROL_DIR", control.as_path())];
    let wsarg = ws.to_str().unwrap();
    let o = run(
        &[
            "doctor",
            "quarantine",
            "--apply",
            "--no-backup",
            "-w",
            wsarg,
            "--out",
            out.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(o.status, 0, "{}", o.stderr);
    let bundles: Vec<String> = names(&out)
        .into_iter()
        .map(|n| out.join(n).display().to_string())
        .collect();
    assert!(!bundles.is_empty());
    let mut args = vec!["doctor", "restore", "--apply", "--no-backup", "-w", wsarg];
    args.extend(bundles.iter().map(String::as_str));

    let holder = corpus::hold(&db, "SELECT count(*) FROM runtime_events");
    let before = common::file_hash(&db);
    let o = run(&args, &env);
    assert_eq!(o.status, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "another process has this database open (pid {}",
            holder.pid()
        )),
        "{}",
        o.stderr
    );
    assert_eq!(common::file_hash(&db), before);
    drop(holder);
    let o = run(&args, &env);
    assert_eq!(o.status, 0, "{}", o.stderr);
}

/// The last probe runs inside the write transaction, just before its commit: a process
/// that opens the file after the command's earlier probes (here, while the command is
/// held at that point) is seen there, and the write rolls back. Each of the three
/// writes (finalize-runs, quarantine, then restore of its bundles); with the process
/// gone, the same command goes through.
#[test]
fn a_process_that_opens_the_file_during_the_write_rolls_it_back() {
    let dump = |db: &Path| {
        wsledger::db::Workspace::open_read_only(db)
            .unwrap()
            .dump_tables()
            .unwrap()
    };
    let (_stuck_dir, stuck) = common::copy_fixture("stuck-running");
    let (_ws_dir, ws) = common::copy_fixture("orphan-response");
    let t = tempfile::tempdir().unwrap();
    let control = t.path().join("control");
    let out = t.path().join("bundles");
    let backups = t.path().join("backups");
    std::fs::create_dir(&backups).unwrap();
    let env = [
        ("WSLEDGER_MAKA_CONTROL_DIR", control.as_path()),
        ("WSLEDGER_BACKUP_DIR", backups.as_path()),
    ];
    let apply = |cmd: &str, ws: &Path| -> Vec<String> {
        ["doctor", cmd, "--apply", "-w", ws.to_str().unwrap()]
            .map(String::from)
            .to_vec()
    };
    for name in ["finalize-runs", "quarantine", "restore"] {
        let (db, args) = match name {
            "finalize-runs" => (stuck.join("runtime.sqlite"), apply(name, &stuck)),
            "quarantine" => {
                let mut args = apply(name, &ws);
                args.extend(["--out".into(), out.display().to_string()]);
                (ws.join("runtime.sqlite"), args)
            }
            _ => {
                // The bundles the quarantine above wrote.
                let mut args = apply(name, &ws);
                let bundles = names(&out);
                assert!(!bundles.is_empty());
                args.extend(bundles.iter().map(|n| out.join(n).display().to_string()));
                (ws.join("runtime.sqlite"), args)
            }
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let before = dump(&db);
        let p = Paused::start(&args, &env, &["write:commit"]);
        p.wait("write:commit");
        let holder = corpus::hold(&db, "SELECT count(*) FROM runtime_events");
        p.resume("write:commit");
        let o = p.finish();
        assert_eq!(o.status, 2, "{name}: {}", o.stderr);
        let want = format!(
            "another process opened this database during the write (pid {}",
            holder.pid()
        );
        assert!(o.stderr.contains(&want), "{name}: {}", o.stderr);
        assert!(
            o.stderr.contains("rolled back, nothing was written"),
            "{name}: {}",
            o.stderr
        );
        assert!(o.stderr.contains("hint: quit Maka"), "{name}: {}", o.stderr);
        drop(holder);
        assert_eq!(dump(&db), before, "{name}: written with the file open");
        // Nothing was written, so the backup made for the write went with it.
        assert!(names(&backups).is_empty(), "{name}: a backup was left");
        let o = run(&args, &env);
        assert_eq!(o.status, 0, "{name}: {}", o.stderr);
        assert_ne!(dump(&db), before, "{name}: the write did not go through");
        assert_eq!(names(&backups).len(), 1, "{name}: {:?}", names(&backups));
        for b in names(&backups) {
            std::fs::remove_file(backups.join(b)).unwrap();
        }
    }
}

/// The backup of a write refused at the last probe goes only while nothing of the
/// command has committed: after one transaction of the same writer committed (as
/// `doctor repair` quarantines, then finalizes), the backup is the only copy of the
/// file as it was, and stays.
#[test]
fn a_refused_write_keeps_the_backup_once_an_earlier_one_committed() {
    let (_ws_dir, ws) = common::copy_fixture("stuck-running");
    let t = tempfile::tempdir().unwrap();
    let db = ws.join("runtime.sqlite");
    let planning = plan_finalize(&db, &PlanOptions::default()).unwrap();
    assert_eq!(planning.plan.plan.len(), 1);
    let stuck = &planning.plan.plan[0].session_id;
    let other = "4196517f-cc78-4eb2-8909-dfffe42e4292";
    assert_ne!(stuck, other);

    // The finalize write, refused while a child process has the file open.
    let refused_while_held = |writer: &Writer| {
        let holder = corpus::hold(&db, "SELECT count(*) FROM runtime_events");
        let e = writer
            .apply(&planning.plan.writes, &ApplyOptions::default())
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("another process opened this database"),
            "{e}"
        );
        drop(holder);
    };

    // Nothing committed: the refusal takes the backup along.
    let writer = Writer::open(&db, wsledger::release::repair_basis::schema_gate).unwrap();
    let first = t.path().join("first.bak");
    writer.backup_to(&first).unwrap();
    refused_while_held(&writer);
    assert!(
        !first.exists(),
        "the backup of a write that never happened stayed"
    );

    // One transaction commits (another session set aside), then the next is refused.
    let second = t.path().join("second.bak");
    writer.backup_to(&second).unwrap();
    let d = writer.read_deletion(other).unwrap();
    let generation = writer.catalog_generation().unwrap();
    writer
        .quarantine(&[d], generation, 1_800_000_000_000)
        .unwrap();
    refused_while_held(&writer);
    assert!(
        second.exists(),
        "the only copy from before the quarantine was removed"
    );
    drop(writer);
}
