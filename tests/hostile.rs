//! Every command over every entry of the bad-input corpus (`tests/corpus`): the
//! documented outcome (exit 2 with one `error:` line naming the file and a `hint:`
//! line, or a report with its findings, or a finalize plan), never a panic, never a
//! hang, never raw control or bidi characters on a terminal, never a changed file
//! unless `--apply` was asked and wrote (then the file is sound, backed up and has
//! no stuck run left).

mod common;
mod corpus;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corpus::{Built, Outcome};

/// What one command printed.
struct Run {
    status: i32,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    elapsed: Duration,
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    let f = tempfile::NamedTempFile::new().unwrap();
    f.as_file().metadata().unwrap().uid() == 0
}

const NOBODY: u32 = 65534;

/// The binary, reachable by `nobody` (the build directory may not be).
fn binary_for_nobody(dir: &Path) -> PathBuf {
    let exe = dir.join("wsledger");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_wsledger"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_wsledger"), &exe).unwrap();
    }
    exe
}

/// Runs the binary with a deadline; a child still running then is killed and the
/// test fails: no command may hang.
fn run(
    args: &[&std::ffi::OsStr],
    env: &[(&str, PathBuf)],
    as_nobody: bool,
    timeout: Duration,
) -> Run {
    let io = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(io.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let drop_root = as_nobody && is_root();
    let exe = if drop_root {
        binary_for_nobody(io.path())
    } else {
        PathBuf::from(env!("CARGO_BIN_EXE_wsledger"))
    };
    let out_path = io.path().join("stdout");
    let err_path = io.path().join("stderr");
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env_remove("WSLEDGER_WORKSPACE")
        .env("NO_COLOR", "1")
        .env("COLUMNS", "120")
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    if drop_root {
        use std::os::unix::process::CommandExt;
        cmd.uid(NOBODY).gid(NOBODY).env("HOME", "/nonexistent");
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn wsledger");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("wsledger {args:?} still running after {timeout:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    let stdout = std::fs::read(&out_path).unwrap();
    let stderr = std::fs::read(&err_path).unwrap();
    let status = status.code().unwrap_or_else(|| {
        panic!(
            "wsledger {args:?} died by a signal: {status:?}\n{}",
            String::from_utf8_lossy(&stderr)
        )
    });
    Run {
        status,
        stdout,
        stderr,
        elapsed,
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// SHA-256 of a regular file's bytes, or what else is there (a FIFO is never read).
fn hash_if_file(p: &Path) -> String {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_file() => common::file_hash(p),
        Ok(m) => format!("{:?}", m.file_type()),
        Err(_) => "absent".into(),
    }
}

/// A snapshot of what must not change: watched files' hashes and directory listings.
fn snapshot(b: &Built) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for f in &b.watch {
        v.push((f.display().to_string(), hash_if_file(f)));
    }
    for d in &b.dirs {
        let mut names: Vec<String> = std::fs::read_dir(d)
            .map(|rd| {
                rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        v.push((d.display().to_string(), names.join("/")));
    }
    v
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fmt {
    Json,
    Table,
}

/// Which expectation of an entry a command is held to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Scan,
    ScanIntegrity,
    Finalize,
    Apply,
    Info,
    Replay,
    Quarantine,
    QuarantineApply,
}

/// One command over one entry.
struct Invocation {
    label: &'static str,
    args: &'static [&'static str],
    format: Fmt,
    kind: Kind,
}

/// Every command that exists, in the formats that matter: the read-only ones first,
/// `--apply` last. A heavy entry (seconds per run in a debug build) runs the scan and
/// the replay once each, as JSON: `info` and finalize-runs read the events through
/// exactly the scan's code (`scan_workspace`), and the heavy entries have nothing to
/// finalize.
fn commands(b: &Built) -> Vec<Invocation> {
    let all = vec![
        Invocation {
            label: "scan json",
            args: &["doctor", "scan", "--format", "json"],
            format: Fmt::Json,
            kind: Kind::Scan,
        },
        Invocation {
            label: "scan json --integrity",
            args: &["doctor", "scan", "--format", "json", "--integrity"],
            format: Fmt::Json,
            kind: Kind::ScanIntegrity,
        },
        Invocation {
            label: "scan table",
            args: &["doctor", "scan", "--format", "table"],
            format: Fmt::Table,
            kind: Kind::Scan,
        },
        Invocation {
            label: "info json",
            args: &["info", "--format", "json"],
            format: Fmt::Json,
            kind: Kind::Info,
        },
        Invocation {
            label: "info table",
            args: &["info"],
            format: Fmt::Table,
            kind: Kind::Info,
        },
        Invocation {
            label: "replay json",
            args: &["replay", "--format", "json"],
            format: Fmt::Json,
            kind: Kind::Replay,
        },
        Invocation {
            label: "replay text",
            args: &["replay"],
            format: Fmt::Table,
            kind: Kind::Replay,
        },
        Invocation {
            label: "quarantine json (dry run)",
            args: &["doctor", "quarantine", "--format", "json"],
            format: Fmt::Json,
            kind: Kind::Quarantine,
        },
        Invocation {
            label: "finalize-runs json (dry run)",
            args: &["doctor", "finalize-runs", "--format", "json"],
            format: Fmt::Json,
            kind: Kind::Finalize,
        },
        Invocation {
            label: "finalize-runs table (dry run)",
            args: &["doctor", "finalize-runs", "--format", "table"],
            format: Fmt::Table,
            kind: Kind::Finalize,
        },
        Invocation {
            label: "finalize-runs json --apply",
            args: &["doctor", "finalize-runs", "--format", "json", "--apply"],
            format: Fmt::Json,
            kind: Kind::Apply,
        },
        Invocation {
            label: "quarantine json --apply",
            args: &["doctor", "quarantine", "--format", "json", "--apply"],
            format: Fmt::Json,
            kind: Kind::QuarantineApply,
        },
    ];
    // An error stops a command before it renders anything: one format is enough.
    let fails = matches!(b.scan, Outcome::Error { .. });
    all.into_iter()
        .filter(|i| !(fails && i.format == Fmt::Table))
        .filter(|i| {
            !b.heavy || (i.format == Fmt::Json && matches!(i.kind, Kind::Scan | Kind::Replay))
        })
        .collect()
}

fn check(name: &str, inv: &Invocation, want: &Outcome, r: &Run) {
    // The summary of a JSON document (at its end) says most about a surprise.
    let summary = serde_json::from_slice::<serde_json::Value>(&r.stdout)
        .ok()
        .map(|d| d["summary"].to_string())
        .unwrap_or_default();
    let ctx = format!(
        "{name} / {}: exit {}\n--- summary\n{summary}\n--- stdout\n{}\n--- stderr\n{}",
        inv.label,
        r.status,
        String::from_utf8_lossy(&r.stdout[..r.stdout.len().min(4000)]),
        String::from_utf8_lossy(&r.stderr)
    );
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(!stderr.contains("panicked"), "panic: {ctx}");
    // Nothing from the database (or a path) reaches a terminal raw.
    for (what, bytes) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        assert!(!bytes.contains(&0x1b), "raw ESC on {what}: {ctx}");
        if inv.format == Fmt::Table || what == "stderr" {
            assert!(
                !contains(bytes, "\u{202e}".as_bytes()),
                "raw U+202E on {what}: {ctx}"
            );
        }
    }
    let doc = || -> serde_json::Value {
        serde_json::from_slice(&r.stdout)
            .unwrap_or_else(|e| panic!("not one JSON document ({e}): {ctx}"))
    };
    match want {
        Outcome::Error { names, says, hint } => {
            assert_eq!(r.status, 2, "{ctx}");
            assert!(r.stdout.is_empty(), "stdout must be empty on exit 2: {ctx}");
            // Notes may come first (`--apply` says what it locked and backed up); the
            // error is one `error:` line and one `hint:` line, last.
            let all: Vec<&str> = stderr.lines().collect();
            let errors = all.iter().filter(|l| l.starts_with("error:")).count();
            assert_eq!(errors, 1, "one error line: {ctx}");
            assert!(all.len() >= 2, "{ctx}");
            let lines = &all[all.len() - 2..];
            assert!(lines[0].starts_with("error: "), "{ctx}");
            assert!(lines[0].contains(names.as_str()), "names the file: {ctx}");
            assert!(lines[0].contains(says), "says `{says}`: {ctx}");
            assert!(lines[1].starts_with("hint: "), "{ctx}");
            assert!(lines[1].contains(hint), "hint says `{hint}`: {ctx}");
            if says.contains("locked") {
                // Busy waits are bounded: SQLite's 5 s, said in the message.
                assert!(r.elapsed < Duration::from_secs(15), "{ctx}");
                assert!(lines[0].contains("gave up after 5 s"), "{ctx}");
            }
        }
        Outcome::Report {
            status,
            codes,
            event,
        } => {
            assert_eq!(r.status, *status, "{ctx}");
            assert!(!stderr.contains("error:"), "{ctx}");
            if inv.format == Fmt::Json {
                let doc = doc();
                let findings = doc["findings"].as_array().expect("findings");
                let found: Vec<&str> = findings
                    .iter()
                    .map(|f| f["code"].as_str().unwrap())
                    .collect();
                for code in *codes {
                    assert!(found.contains(code), "finding {code} expected: {ctx}");
                }
                if let (Some(ev), Some(code)) = (event, codes.first()) {
                    assert!(
                        findings
                            .iter()
                            .any(|f| f["code"] == *code && f["event_id"] == ev.as_str()),
                        "{code} names event {ev:?}: {ctx}"
                    );
                }
            }
        }
        Outcome::Done { key } => {
            assert_eq!(r.status, 0, "{ctx}");
            assert!(!stderr.contains("error:"), "{ctx}");
            if inv.format == Fmt::Json {
                assert!(doc().get(key).is_some(), "`{key}` expected: {ctx}");
            }
        }
        Outcome::Replay { status, codes } => {
            assert_eq!(r.status, *status, "{ctx}");
            assert!(!stderr.contains("error:"), "{ctx}");
            if inv.format == Fmt::Json {
                let doc = doc();
                let found = doc["summary"]["divergence_codes"]
                    .as_object()
                    .expect("summary.divergence_codes");
                for code in *codes {
                    assert!(
                        found.contains_key(*code),
                        "divergence {code} expected: {ctx}"
                    );
                }
            }
        }
        Outcome::Plan { runs } => {
            assert_eq!(r.status, 0, "{ctx}");
            assert!(!stderr.contains("error:"), "{ctx}");
            if inv.format == Fmt::Json {
                let doc = doc();
                let plan = doc["plan"].as_array().expect("plan");
                assert_eq!(plan.len(), *runs, "planned runs: {ctx}");
                let applied = inv.kind == Kind::Apply && *runs > 0;
                assert_eq!(doc["applied"], applied, "applied: {ctx}");
            }
        }
    }
}

/// Environment of every command: backups and Maka's lock namespace in directories
/// of the test (writable by `nobody` too), never beside the user's files or home.
fn test_env(dir: &Path, b: &Built) -> Vec<(&'static str, PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    let backups = dir.join("backups");
    std::fs::create_dir_all(&backups).unwrap();
    std::fs::set_permissions(&backups, std::fs::Permissions::from_mode(0o777)).unwrap();
    vec![
        ("WSLEDGER_BACKUP_DIR", backups),
        ("WSLEDGER_MAKA_CONTROL_DIR", b.control.clone()),
    ]
}

fn run_entry(name: &str, build: fn() -> Built) {
    let b = build();
    let side = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(side.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let env = test_env(side.path(), &b);
    let quarantine_out = side.path().join("quarantine");
    // `info` opens and scans like `doctor scan`, and reports without judging.
    let info = match &b.scan {
        Outcome::Error { .. } => b.scan.clone(),
        _ => Outcome::Done { key: "database" },
    };
    // A quarantine dry run scans too, then plans (whichever sessions it picks).
    let quarantine = match &b.scan {
        Outcome::Error { .. } => b.scan.clone(),
        _ => Outcome::Done { key: "sessions" },
    };
    let want = |kind: Kind| match kind {
        Kind::Scan => &b.scan,
        Kind::ScanIntegrity => &b.integrity,
        Kind::Finalize => &b.finalize,
        Kind::Apply => &b.apply,
        Kind::Info => &info,
        Kind::Replay => &b.replay,
        Kind::Quarantine => &quarantine,
        // Whatever it decides to move: checked by `quarantined_safely`.
        Kind::QuarantineApply => &quarantine,
    };
    let args_of = |inv: &Invocation| -> Vec<&std::ffi::OsStr> {
        let mut args: Vec<&std::ffi::OsStr> = inv.args.iter().map(|a| a.as_ref()).collect();
        if inv.kind == Kind::Replay {
            args.push("--session".as_ref());
            args.push(b.session.as_ref());
        }
        if inv.kind == Kind::QuarantineApply {
            // Bundles go to the test's directory, not beside the database.
            args.push("--out".as_ref());
            args.push(quarantine_out.as_os_str());
        }
        args.push("--workspace".as_ref());
        args.push(b.arg.as_os_str());
        args
    };
    let (read_only, writing): (Vec<Invocation>, Vec<Invocation>) = commands(&b)
        .into_iter()
        .partition(|i| !matches!(i.kind, Kind::Apply | Kind::QuarantineApply));
    // The read-only commands run side by side (a busy wait of one does not hold up the
    // others); none of them may change anything.
    let before = snapshot(&b);
    let runs: Vec<Run> = std::thread::scope(|scope| {
        let handles: Vec<_> = read_only
            .iter()
            .map(|inv| {
                let args = args_of(inv);
                let env = &env;
                let b = &b;
                scope.spawn(move || run(&args, env, b.as_nobody, b.timeout))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (inv, r) in read_only.iter().zip(&runs) {
        check(name, inv, want(inv.kind), r);
    }
    let labels: Vec<&str> = read_only.iter().map(|i| i.label).collect();
    assert_eq!(
        before,
        snapshot(&b),
        "{name}: a read-only command ({labels:?}) changed a file"
    );
    for inv in &writing {
        let before = snapshot(&b);
        let args = args_of(inv);
        let r = run(&args, &env, b.as_nobody, b.timeout);
        if inv.kind == Kind::QuarantineApply {
            quarantined_safely(name, inv, &b, &r, &before);
            continue;
        }
        check(name, inv, want(inv.kind), &r);
        if b.apply_writes() {
            applied_cleanly(name, &b, &args, &env);
        } else {
            assert_eq!(
                before,
                snapshot(&b),
                "{name} / {}: a command that wrote nothing changed a file",
                inv.label
            );
        }
    }
    drop(b.guard);
    drop(b.owner_lock);
}

/// `doctor quarantine --apply` on a corpus entry: whatever it decides, the documented
/// shape (exit 2 with one `error:` and a `hint:` line, or a JSON document), no panic,
/// and either nothing changed or it applied and the file passes `integrity_check`.
fn quarantined_safely(
    name: &str,
    inv: &Invocation,
    b: &Built,
    r: &Run,
    before: &[(String, String)],
) {
    let stderr = String::from_utf8_lossy(&r.stderr);
    let ctx = format!("{name} / {}: exit {}\n{stderr}", inv.label, r.status);
    assert!(!stderr.contains("panicked"), "{ctx}");
    assert!(!r.stderr.contains(&0x1b), "raw ESC on stderr: {ctx}");
    let applied = match r.status {
        2 => {
            assert!(r.stdout.is_empty(), "{ctx}");
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(
                lines.iter().filter(|l| l.starts_with("error:")).count(),
                1,
                "{ctx}"
            );
            assert!(
                lines.last().is_some_and(|l| l.starts_with("hint: ")),
                "{ctx}"
            );
            false
        }
        0 | 1 => {
            let doc: serde_json::Value = serde_json::from_slice(&r.stdout)
                .unwrap_or_else(|e| panic!("not one JSON document ({e}): {ctx}"));
            doc["applied"] == true
        }
        other => panic!("exit {other}: {ctx}"),
    };
    if applied {
        let c = rusqlite::Connection::open_with_flags(
            &b.watch[0],
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "{ctx}");
    } else {
        assert_eq!(before, snapshot(b), "{ctx}: wrote nothing, changed a file");
    }
}

/// After an `--apply` that wrote: the file passes `integrity_check`, a backup was
/// made, and the rescan has no stuck run left.
fn applied_cleanly(name: &str, b: &Built, args: &[&std::ffi::OsStr], env: &[(&str, PathBuf)]) {
    let db = &b.watch[0];
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok", "{name}: integrity_check after --apply");
    drop(c);
    let backups = std::fs::read_dir(&env[0].1).unwrap().count();
    assert_eq!(backups, 1, "{name}: one backup");
    let ws = args.last().unwrap();
    let r = run(
        &[
            "doctor".as_ref(),
            "scan".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            "--workspace".as_ref(),
            ws,
        ],
        env,
        b.as_nobody,
        b.timeout,
    );
    let doc: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert!(
        !doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "run_stuck_running"),
        "{name}: a stuck run is left after --apply"
    );
}

/// Not a check: the lock-holding process some entries spawn (see `corpus::hold`).
#[test]
fn hold_lock_helper() {
    corpus::hold_lock_helper();
}

macro_rules! corpus_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_entry(stringify!($name), corpus::$name);
            }
        )*

        /// The list above covers the whole corpus.
        #[test]
        fn every_corpus_entry_is_tested() {
            let tested = [$(stringify!($name)),*];
            for (name, _) in corpus::ENTRIES {
                assert!(tested.contains(name), "corpus entry {name} has no test");
            }
            assert_eq!(tested.len(), corpus::ENTRIES.len());
        }
    };
}

corpus_tests!(
    missing_path,
    dir_without_database,
    database_is_a_directory,
    not_a_file_fifo,
    database_is_a_fifo,
    not_a_file_device,
    empty_file,
    random_bytes,
    sqlite_header_then_garbage,
    truncated_to_a_third,
    truncated_to_the_header,
    truncated_to_the_first_page,
    corrupt_events_page,
    corrupt_page_elsewhere,
    corrupt_schema_page,
    not_a_maka_workspace,
    missing_runtime_events,
    user_version_older,
    user_version_newer,
    missing_table,
    missing_operations_table,
    missing_run_events_table,
    missing_index,
    missing_capabilities_table,
    missing_run_headers_table,
    extra_column,
    extra_index,
    extra_view,
    missing_registry_row,
    missing_registry_table,
    missing_capability_row,
    payload_not_json,
    payload_empty,
    payload_array,
    payload_scalar,
    payload_unknown_key,
    payload_null_optional,
    payload_wrong_enum,
    payload_50_mb,
    payload_deeply_nested,
    payload_deeply_nested_unclosed,
    payload_deep_inside_valid_event,
    payload_not_utf8_in_a_string,
    payload_not_utf8_outside_strings,
    payload_nul_bytes,
    payload_as_blob,
    event_seq_at_i64_max,
    event_seq_real_huge,
    event_seq_text,
    event_id_null,
    run_header_not_json,
    tool_rows_of_wrong_types,
    tool_operation_without_events,
    session_payload_not_json,
    escapes_in_ids_and_text,
    escapes_in_the_path,
    uri_characters_in_the_path,
    wal_without_shm,
    wal_with_shm,
    wal_is_a_directory,
    wal_is_a_fifo,
    shm_is_a_fifo,
    journal_is_a_fifo,
    wal_of_garbage,
    read_only_file,
    read_only_directory,
    read_only_directory_with_wal,
    read_only_directory_with_wal_and_shm,
    unreadable_file,
    locked_by_another_writer,
    wal_writer_holds_exclusive,
    hot_journal,
    symlink_to_the_database,
    symlink_to_the_workspace,
    symlink_loop,
    symlink_dangling,
    stuck_run,
    stuck_run_wal_without_shm,
    stuck_run_wal_with_shm,
    stuck_run_through_a_symlink,
    stuck_run_while_another_writer_holds_the_file,
    stuck_run_locked_exclusively,
    stuck_run_read_only_directory,
    stuck_run_extra_index,
    stuck_run_newer_user_version,
    stuck_run_symlink_into_a_read_only_directory,
    stuck_run_symlink_while_maka_holds_the_owner_lock,
);

/// A dropped table is one finding: the scan of each dropped-table entry reports
/// exactly the finding that names it (a refusal, or the missing table Maka creates
/// again), never a finding per row the table would hold, and never an error.
#[test]
fn a_dropped_table_is_exactly_one_finding() {
    // (entry, builder, exit status, the one finding's code, the object it names)
    type Case = (&'static str, fn() -> Built, i32, &'static str, &'static str);
    let cases: [Case; 4] = [
        (
            "missing_table",
            corpus::missing_table,
            1,
            "startup_refused",
            "index:tool_journal_events_by_operation",
        ),
        (
            "missing_operations_table",
            corpus::missing_operations_table,
            1,
            "startup_refused",
            "table:tool_operations",
        ),
        (
            "missing_run_events_table",
            corpus::missing_run_events_table,
            0,
            "schema_object_missing",
            "table:core_agent_run_events",
        ),
        (
            "missing_index",
            corpus::missing_index,
            1,
            "startup_refused",
            "index:runtime_events_by_run",
        ),
    ];
    for (name, build, status, code, object) in cases {
        let b = build();
        let side = tempfile::tempdir().unwrap();
        let env = test_env(side.path(), &b);
        let args: Vec<&std::ffi::OsStr> = ["doctor", "scan", "--format", "json", "--workspace"]
            .iter()
            .map(|a| a.as_ref())
            .chain([b.arg.as_os_str()])
            .collect();
        let r = run(&args, &env, false, b.timeout);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert_eq!(r.status, status, "{name}: {stderr}");
        let doc: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
        let findings = doc["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 1, "{name}: {findings:?}");
        let f = &findings[0];
        assert_eq!(f["code"], code, "{name}: {f}");
        if code == "startup_refused" {
            assert_eq!(
                f["detail"]["reason"], "schema_object_missing",
                "{name}: {f}"
            );
            assert_eq!(f["detail"]["object"], object, "{name}: {f}");
            assert_eq!(doc["startup"]["opens"], false, "{name}");
            assert_eq!(doc["startup"]["refusal"]["object"], object, "{name}");
        } else {
            let message = f["message"].as_str().unwrap();
            assert!(message.contains(&format!("`{object}`")), "{name}: {f}");
            assert_eq!(doc["startup"]["opens"], true, "{name}");
            let recreated = doc["startup"]["migrations"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|m| m["recreates"].as_array().unwrap())
                .any(|k| k == object);
            assert!(recreated, "{name}: {}", doc["startup"]);
        }
    }
}

/// `replay --bundle` reads a file, not a workspace: hostile bundles get the same
/// treatment (exit 2 with `error:`/`hint:` naming the file, or a replay), and a
/// bundle exported from a broken workspace replays like the workspace.
#[test]
fn hostile_session_bundles() {
    let side = tempfile::tempdir().unwrap();
    let dir = side.path();
    let no_env: Vec<(&str, PathBuf)> = Vec::new();
    let t = Duration::from_secs(60);
    let replay = |args: &[&std::ffi::OsStr]| run(args, &no_env, false, t);
    let os = |s: &str| std::ffi::OsString::from(s);

    // Bundles that are not bundles.
    let deep = "[".repeat(200_000);
    let cases: Vec<(&str, Option<&[u8]>, &str)> = vec![
        ("not-json.bundle", Some(b"{\"tables\": ["), "bundle"),
        ("empty.bundle", Some(b""), "bundle"),
        ("deep.bundle", Some(deep.as_bytes()), "bundle"),
        ("wrong-shape.bundle", Some(b"{\"tables\": 42}"), "bundle"),
        ("escape\u{1b}[31m\u{202e}.bundle", Some(b"nope"), "bundle"),
        ("missing.bundle", None, "check the path"),
    ];
    for (name, bytes, hint) in cases {
        let p = dir.join(name);
        if let Some(b) = bytes {
            std::fs::write(&p, b).unwrap();
        }
        let r = replay(&[
            "replay".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            "--bundle".as_ref(),
            p.as_os_str(),
        ]);
        let inv = Invocation {
            label: "replay --bundle json",
            args: &[],
            format: Fmt::Json,
            kind: Kind::Replay,
        };
        let shown = name
            .replace('\u{1b}', "\\u{1b}")
            .replace('\u{202e}', "\\u{202e}");
        check(name, &inv, &Outcome::error(shown, "", hint), &r);
    }

    // Bundles exported from broken workspaces replay as the workspace does.
    for (build, session, ev) in [
        (
            corpus::payload_wrong_enum as corpus::Builder,
            corpus::TARGET_SESSION,
            corpus::TARGET,
        ),
        (
            corpus::escapes_in_ids_and_text,
            corpus::HOSTILE_ID,
            corpus::HOSTILE_ID,
        ),
    ] {
        let b = build();
        let bundle = dir.join("exported.bundle");
        let r = replay(&[
            "replay".as_ref(),
            "--session".as_ref(),
            session.as_ref(),
            "--export".as_ref(),
            bundle.as_os_str(),
            "--workspace".as_ref(),
            b.arg.as_os_str(),
        ]);
        assert_eq!(r.status, 1, "{}", String::from_utf8_lossy(&r.stderr));
        for (format, fmt) in [("json", Fmt::Json), ("text", Fmt::Table)] {
            let r = replay(&[
                os("replay").as_os_str(),
                "--format".as_ref(),
                format.as_ref(),
                "--bundle".as_ref(),
                bundle.as_os_str(),
            ]);
            let inv = Invocation {
                label: "replay --bundle",
                args: &[],
                format: fmt,
                kind: Kind::Replay,
            };
            check(
                ev,
                &inv,
                &Outcome::Replay {
                    status: 1,
                    codes: &["event_undecodable"],
                },
                &r,
            );
        }
    }
}

/// Builds every entry and leaves it on disk, printing where: to look at an entry by
/// hand (`cargo test --test hostile -- --ignored keep_the_corpus --nocapture`).
/// Lock holders are released, so the locked entries are then plain files.
#[test]
#[ignore = "leaves the corpus in the temporary directory; run by hand"]
fn keep_the_corpus() {
    use std::io::Write;
    let mut out = std::io::stdout();
    for (name, build) in corpus::ENTRIES {
        let b = build();
        let arg = b.arg.clone();
        let dir = b.tmp.keep();
        writeln!(
            out,
            "{name}: --workspace {} (in {})",
            arg.display(),
            dir.display()
        )
        .unwrap();
    }
}
