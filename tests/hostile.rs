//! Every command over every entry of the bad-input corpus (`tests/corpus`): the
//! documented outcome (exit 2 with one `error:` line naming the file and a `hint:`
//! line, or a report with its findings), never a panic, never a hang, never raw
//! control or bidi characters on a terminal, never a changed file.

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
fn run(args: &[&std::ffi::OsStr], as_nobody: bool, timeout: Duration) -> Run {
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

/// One read-only command over one entry.
struct Invocation {
    label: &'static str,
    args: Vec<&'static str>,
    format: Fmt,
    integrity: bool,
}

/// The read-only commands that exist, in every format that matters.
fn read_only_commands(heavy: bool) -> Vec<Invocation> {
    let mut v = vec![
        Invocation {
            label: "scan json",
            args: vec!["doctor", "scan", "--format", "json"],
            format: Fmt::Json,
            integrity: false,
        },
        Invocation {
            label: "scan json --integrity",
            args: vec!["doctor", "scan", "--format", "json", "--integrity"],
            format: Fmt::Json,
            integrity: true,
        },
        Invocation {
            label: "scan table",
            args: vec!["doctor", "scan", "--format", "table"],
            format: Fmt::Table,
            integrity: false,
        },
    ];
    if heavy {
        v.truncate(1);
    }
    v
}

fn check(name: &str, inv: &Invocation, want: &Outcome, r: &Run) {
    let ctx = format!(
        "{name} / {}: exit {}\n--- stdout\n{}\n--- stderr\n{}",
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
    match want {
        Outcome::Error { names, says, hint } => {
            assert_eq!(r.status, 2, "{ctx}");
            assert!(r.stdout.is_empty(), "stdout must be empty on exit 2: {ctx}");
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(lines.len(), 2, "one error line, one hint line: {ctx}");
            assert!(lines[0].starts_with("error: "), "{ctx}");
            assert!(lines[0].contains(names.as_str()), "names the file: {ctx}");
            assert!(lines[0].contains(says), "says `{says}`: {ctx}");
            assert!(lines[1].starts_with("hint: "), "{ctx}");
            assert!(lines[1].contains(hint), "hint says `{hint}`: {ctx}");
        }
        Outcome::Report {
            status,
            codes,
            event,
        } => {
            assert_eq!(r.status, *status, "{ctx}");
            assert!(!stderr.contains("error:"), "{ctx}");
            if inv.format == Fmt::Json {
                let doc: serde_json::Value = serde_json::from_slice(&r.stdout)
                    .unwrap_or_else(|e| panic!("not one JSON document ({e}): {ctx}"));
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
    }
}

fn run_entry(name: &str, build: fn() -> Built) {
    let b = build();
    for inv in read_only_commands(b.heavy) {
        let want = if inv.integrity { &b.integrity } else { &b.scan };
        let before = snapshot(&b);
        let mut args: Vec<&std::ffi::OsStr> = inv.args.iter().map(|a| a.as_ref()).collect();
        args.push("--workspace".as_ref());
        args.push(b.arg.as_os_str());
        let r = run(&args, b.as_nobody, b.timeout);
        check(name, &inv, want, &r);
        assert_eq!(
            before,
            snapshot(&b),
            "{name} / {}: a read-only command changed a file",
            inv.label
        );
        let _ = r.elapsed;
    }
    drop(b.guard);
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
    not_a_maka_workspace,
    missing_runtime_events,
    user_version_older,
    user_version_newer,
    missing_table,
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
    payload_50_mb_garbage,
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
    session_payload_not_json,
    escapes_in_ids_and_text,
    escapes_in_the_path,
    wal_without_shm,
    wal_with_shm,
    wal_is_a_directory,
    wal_is_a_fifo,
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
);
