//! The bad-input corpus (issue 6), built at test time.
//!
//! Every entry starts from nothing or from a copy of `fixtures/healthy` and breaks it
//! with a few bytes or a few SQL statements, so the corpus needs no committed binaries
//! (see `fixtures/hostile/README.md`). Each builder returns the path to name on the
//! command line, the files that must never change, and what every command must say.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

use crate::common::wal;
use crate::common::write_marker;
use crate::common::STUCK_SESSION;

/// A non-tool model text event of `fixtures/healthy` (run `23025bd1…`).
pub const TARGET: &str = "df55366f-acd6-4aa5-834f-ef842a20ec38";
/// The session and run of [`TARGET`].
pub const TARGET_SESSION: &str = "af74eb13-c1b4-4d12-aeb0-23d6c6ca73a3";
pub const TARGET_RUN: &str = "23025bd1-0e61-4fae-9447-a6d3307afc88";

/// An id holding what a hostile model or tool could write: an OSC title change, a
/// colour change, a right-to-left override and a line break.
pub const HOSTILE_ID: &str = "evt\u{1b}]0;owned\u{7}\u{1b}[31mred\u{202e}gnp.exe\nsecond line";

/// What a command must do with an entry.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Exit 2, empty stdout (JSON), one `error:` line containing `names` and `says`,
    /// then one `hint:` line containing `hint`.
    Error {
        names: String,
        says: &'static str,
        hint: &'static str,
    },
    /// The command did its job: exit `status`, and (JSON) at least these finding
    /// codes; with `event`, one finding of the first code names that event.
    Report {
        status: i32,
        codes: &'static [&'static str],
        event: Option<String>,
    },
    /// `doctor finalize-runs` did its job: exit 0 and (JSON) a plan of `runs` runs,
    /// written under `--apply` when not empty.
    Plan { runs: usize },
    /// `info` or a quarantine dry run did its job: exit 0 and (JSON) a document with
    /// this key.
    Done { key: &'static str },
    /// `replay` did its job: exit `status`, and (JSON) at least these divergence codes.
    Replay {
        status: i32,
        codes: &'static [&'static str],
    },
}

impl Outcome {
    pub fn error(names: impl Into<String>, says: &'static str, hint: &'static str) -> Outcome {
        Outcome::Error {
            names: names.into(),
            says,
            hint,
        }
    }

    pub fn report(status: i32, codes: &'static [&'static str]) -> Outcome {
        Outcome::Report {
            status,
            codes,
            event: None,
        }
    }

    /// `event_undecodable` for `event` (and the run it makes unreadable): exit 1.
    pub fn undecodable(event: &str) -> Outcome {
        Outcome::Report {
            status: 1,
            codes: &["event_undecodable", "run_unreadable"],
            event: Some(event.to_owned()),
        }
    }
}

/// One built corpus entry.
pub struct Built {
    /// Keeps every file of the entry alive.
    pub tmp: tempfile::TempDir,
    /// What to pass to `--workspace`.
    pub arg: PathBuf,
    /// Files whose bytes must not change (the database and its `-wal`, hashed even
    /// when absent).
    pub watch: Vec<PathBuf>,
    /// Directories whose list of names must not change (no `-shm`, `-journal`, …).
    pub dirs: Vec<PathBuf>,
    /// `doctor scan` without and with `--integrity`.
    pub scan: Outcome,
    pub integrity: Outcome,
    /// `doctor finalize-runs`, dry run and `--apply`. By default: the scan's error,
    /// or else an empty plan.
    pub finalize: Outcome,
    pub apply: Outcome,
    /// `replay --session` of [`Built::session`]. By default: the scan's error, or else
    /// a replay without divergence.
    pub replay: Outcome,
    pub session: String,
    /// Run the command as `nobody` when the tests run as root, so permission bits
    /// apply (root ignores them).
    pub as_nobody: bool,
    /// Something held while the commands run (a lock-holding process).
    pub guard: Option<Holder>,
    /// Maka's lock namespace for the commands (`WSLEDGER_MAKA_CONTROL_DIR`).
    pub control: PathBuf,
    /// Maka's owner lock, held while the commands run (Maka is "running").
    pub owner_lock: Option<wsledger::lock::OwnerLock>,
    /// The longest a command may take on this entry.
    pub timeout: Duration,
    /// A heavy entry: run each command once (JSON), not in every format.
    pub heavy: bool,
}

impl Built {
    fn new(tmp: tempfile::TempDir, arg: PathBuf, scan: Outcome) -> Built {
        let mut watch = Vec::new();
        let mut dirs = Vec::new();
        let db = if arg.is_dir() {
            arg.join("runtime.sqlite")
        } else {
            arg.clone()
        };
        if db.is_file() {
            watch.push(db.clone());
            watch.push(wal(&db));
            if let Some(d) = db.parent() {
                dirs.push(d.to_path_buf());
            }
        }
        let control = tmp.path().join("control");
        std::fs::create_dir_all(&control).unwrap();
        set_mode(&control, 0o777);
        let finalize = match &scan {
            Outcome::Error { .. } => scan.clone(),
            _ => Outcome::Plan { runs: 0 },
        };
        let replay = match &scan {
            Outcome::Error { .. } => scan.clone(),
            // A broken row of the replayed session: a divergence, the rest replays.
            Outcome::Report { event: Some(e), .. } if e == TARGET => Outcome::Replay {
                status: 1,
                codes: &["event_undecodable"],
            },
            _ => Outcome::Replay {
                status: 0,
                codes: &[],
            },
        };
        Built {
            tmp,
            arg,
            watch,
            dirs,
            replay,
            session: TARGET_SESSION.to_owned(),
            integrity: scan.clone(),
            apply: finalize.clone(),
            finalize,
            scan,
            as_nobody: false,
            guard: None,
            control,
            owner_lock: None,
            timeout: Duration::from_secs(60),
            heavy: false,
        }
    }

    fn integrity(mut self, o: Outcome) -> Built {
        self.integrity = o;
        self
    }

    fn finalize(mut self, dry_run: Outcome, apply: Outcome) -> Built {
        self.finalize = dry_run;
        self.apply = apply;
        self
    }

    /// Whether `--apply` may change the files (a plan to write).
    pub fn apply_writes(&self) -> bool {
        matches!(self.apply, Outcome::Plan { runs } if runs > 0)
    }

    fn replay(mut self, status: i32, codes: &'static [&'static str]) -> Built {
        self.replay = Outcome::Replay { status, codes };
        self
    }

    fn heavy(mut self) -> Built {
        self.heavy = true;
        self.timeout = Duration::from_secs(180);
        self
    }
}

pub fn shm(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-shm");
    PathBuf::from(s)
}

fn tmp() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    // Traversable by `nobody` for the permission entries.
    set_mode(t.path(), 0o755);
    t
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A copy of `fixtures/healthy/runtime.sqlite` as `<tmp>/ws/runtime.sqlite`.
fn healthy() -> (tempfile::TempDir, PathBuf) {
    fixture("healthy")
}

/// A copy of `fixtures/<name>/runtime.sqlite` as `<tmp>/ws/runtime.sqlite`.
pub fn fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    set_mode(&ws, 0o755);
    std::fs::copy(
        Path::new("fixtures").join(name).join("runtime.sqlite"),
        ws.join("runtime.sqlite"),
    )
    .unwrap();
    (t, ws)
}

/// Runs SQL on a database and closes it (the `-wal` is checkpointed away).
fn edit(db: &Path, sql: &str) {
    let c = Connection::open(db).unwrap();
    // Damage on purpose: no foreign key may stop it.
    c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    c.execute_batch(sql).unwrap();
    c.close().unwrap();
}

/// Stores `bytes` as the TEXT `payload_json` of `event` (any bytes: not UTF-8, NUL).
fn set_payload(db: &Path, event: &str, bytes: &[u8]) {
    let c = Connection::open(db).unwrap();
    c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    let n = c
        .execute(
            "UPDATE runtime_events SET payload_json = CAST(?1 AS TEXT) WHERE event_id = ?2",
            rusqlite::params![bytes, event],
        )
        .unwrap();
    assert_eq!(n, 1, "event {event} exists");
    c.close().unwrap();
}

fn payload(db: &Path, event: &str) -> serde_json::Value {
    let c = Connection::open(db).unwrap();
    let text: String = c
        .query_row(
            "SELECT payload_json FROM runtime_events WHERE event_id = ?1",
            [event],
            |r| r.get(0),
        )
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A healthy copy whose [`TARGET`] payload is `bytes`.
fn with_payload(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let (t, ws) = healthy();
    set_payload(&ws.join("runtime.sqlite"), TARGET, bytes);
    (t, ws)
}

/// A healthy copy whose [`TARGET`] payload is changed by `f`.
fn with_json(f: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> Built {
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    let mut v = payload(&db, TARGET);
    f(v.as_object_mut().unwrap());
    set_payload(&db, TARGET, serde_json::to_string(&v).unwrap().as_bytes());
    Built::new(t, ws, Outcome::undecodable(TARGET))
}

/// The database page numbers of a table or index (through `dbstat`).
fn pages_of(db: &Path, name: &str, kind: &str) -> Vec<i64> {
    let c = Connection::open(db).unwrap();
    let mut s = c
        .prepare("SELECT pageno FROM dbstat WHERE name = ?1 AND pagetype = ?2 ORDER BY pageno")
        .unwrap();
    let v = s
        .query_map([name, kind], |r| r.get(0))
        .unwrap()
        .collect::<Result<Vec<i64>, _>>()
        .unwrap();
    v
}

/// Overwrites the b-tree page header of page `pageno` (4096-byte pages).
fn smash_page(db: &Path, pageno: i64) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(db).unwrap();
    f.seek(SeekFrom::Start((pageno as u64 - 1) * 4096)).unwrap();
    f.write_all(&[0xff; 12]).unwrap();
}

/// Copies `db` and the `-wal` (and `-shm` with `keep_shm`) that exist while another
/// connection holds a committed but not yet checkpointed change made by `sql`: the
/// state a crash (or a copy taken while Maka runs) leaves behind.
fn with_committed_wal(sql: &str, keep_shm: bool) -> (tempfile::TempDir, PathBuf) {
    committed_wal_of("healthy", sql, keep_shm)
}

pub fn committed_wal_of(
    fixture_name: &str,
    sql: &str,
    keep_shm: bool,
) -> (tempfile::TempDir, PathBuf) {
    let (t, src) = fixture(fixture_name);
    let db = src.join("runtime.sqlite");
    let ws = t.path().join("wal-ws");
    std::fs::create_dir(&ws).unwrap();
    set_mode(&ws, 0o755);
    let c = Connection::open(&db).unwrap();
    c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    c.execute_batch(sql).unwrap();
    std::fs::copy(&db, ws.join("runtime.sqlite")).unwrap();
    std::fs::copy(wal(&db), wal(&ws.join("runtime.sqlite"))).unwrap();
    if keep_shm {
        std::fs::copy(shm(&db), shm(&ws.join("runtime.sqlite"))).unwrap();
    }
    c.close().unwrap();
    std::fs::remove_dir_all(&src).unwrap();
    (t, ws)
}

const BREAK_TARGET: &str =
    "UPDATE runtime_events SET payload_json = '{}' WHERE event_id = 'df55366f-acd6-4aa5-834f-ef842a20ec38'";

fn mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", p.display());
}

fn name_of(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

const NOT_SQLITE_HINT: &str = "point `--workspace` at the `runtime.sqlite`";
const CORRUPT_HINT: &str = "--integrity";

// ---- Not a database at all ---------------------------------------------------------

pub fn missing_path() -> Built {
    let t = tmp();
    let p = t.path().join("no-such-workspace");
    Built::new(
        t,
        p,
        Outcome::error("no-such-workspace", "does not exist", "--workspace"),
    )
}

pub fn dir_without_database() -> Built {
    let t = tmp();
    let p = t.path().join("empty-workspace");
    std::fs::create_dir(&p).unwrap();
    Built::new(
        t,
        p,
        Outcome::error(
            "empty-workspace",
            "directory without `runtime.sqlite`",
            "runtime.sqlite",
        ),
    )
}

pub fn database_is_a_directory() -> Built {
    let t = tmp();
    let p = t.path().join("ws");
    std::fs::create_dir_all(p.join("runtime.sqlite")).unwrap();
    Built::new(
        t,
        p,
        Outcome::error("runtime.sqlite", "is not a file", "database file"),
    )
}

pub fn not_a_file_fifo() -> Built {
    let t = tmp();
    let p = t.path().join("pipe.sqlite");
    mkfifo(&p);
    Built::new(
        t,
        p,
        Outcome::error("pipe.sqlite", "is not a file", "database file"),
    )
}

pub fn database_is_a_fifo() -> Built {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    mkfifo(&ws.join("runtime.sqlite"));
    Built::new(
        t,
        ws,
        Outcome::error("runtime.sqlite", "is not a file", "database file"),
    )
}

pub fn not_a_file_device() -> Built {
    Built::new(
        tmp(),
        PathBuf::from("/dev/null"),
        Outcome::error("/dev/null", "is not a file", "database file"),
    )
}

pub fn empty_file() -> Built {
    let t = tmp();
    let p = t.path().join("empty.sqlite");
    std::fs::write(&p, b"").unwrap();
    Built::new(
        t,
        p,
        Outcome::error("empty.sqlite", "the file is empty", NOT_SQLITE_HINT),
    )
}

pub fn random_bytes() -> Built {
    let t = tmp();
    let p = t.path().join("random.sqlite");
    // A fixed xorshift stream: "random", and the same on every run.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let bytes: Vec<u8> = (0..65536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&p, bytes).unwrap();
    Built::new(
        t,
        p,
        Outcome::error("random.sqlite", "not a SQLite database", NOT_SQLITE_HINT),
    )
}

pub fn sqlite_header_then_garbage() -> Built {
    let t = tmp();
    let p = t.path().join("header-only.sqlite");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend((0..8192u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    std::fs::write(&p, bytes).unwrap();
    Built::new(
        t,
        p,
        Outcome::error("header-only.sqlite", "", NOT_SQLITE_HINT),
    )
}

fn truncated(len: impl Fn(usize) -> usize, name: &'static str) -> Built {
    let t = tmp();
    let p = t.path().join(name);
    let bytes = std::fs::read("fixtures/healthy/runtime.sqlite").unwrap();
    std::fs::write(&p, &bytes[..len(bytes.len())]).unwrap();
    Built::new(t, p, Outcome::error(name, "", ""))
}

pub fn truncated_to_a_third() -> Built {
    truncated(|n| n / 3, "third.sqlite")
}

pub fn truncated_to_the_header() -> Built {
    truncated(|_| 100, "header100.sqlite")
}

pub fn truncated_to_the_first_page() -> Built {
    truncated(|_| 4096, "page1.sqlite")
}

pub fn corrupt_events_page() -> Built {
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    let leaf = pages_of(&db, "runtime_events", "leaf")[1];
    smash_page(&db, leaf);
    // `replay` reads only its session's rows, none of which is on that page.
    Built::new(
        t,
        ws,
        Outcome::error(
            "runtime.sqlite",
            "database disk image is malformed",
            CORRUPT_HINT,
        ),
    )
    .replay(0, &[])
}

pub fn corrupt_page_elsewhere() -> Built {
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    // A table the scan never reads; only a full-file check sees the damage.
    let root = pages_of(&db, "subagent_spawns", "leaf")[0];
    smash_page(&db, root);
    Built::new(t, ws, Outcome::report(0, &[])).integrity(Outcome::report(1, &["sqlite_corrupt"]))
}

pub fn corrupt_schema_page() -> Built {
    // The b-tree header of page 1 (after the 100-byte file header): sqlite_schema.
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
        f.seek(SeekFrom::Start(100)).unwrap();
        f.write_all(&[0xff; 12]).unwrap();
    }
    Built::new(
        t,
        ws,
        Outcome::error(
            "runtime.sqlite",
            "database disk image is malformed",
            CORRUPT_HINT,
        ),
    )
}

// ---- SQLite, but not (quite) a Maka workspace --------------------------------------

pub fn not_a_maka_workspace() -> Built {
    let t = tmp();
    let p = t.path().join("notes.sqlite");
    edit(&p, "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)");
    Built::new(
        t,
        p,
        Outcome::error(
            "notes.sqlite",
            "not a Maka workspace database",
            NOT_SQLITE_HINT,
        ),
    )
}

pub fn missing_runtime_events() -> Built {
    let (t, ws) = healthy();
    edit(&ws.join("runtime.sqlite"), "DROP TABLE runtime_events");
    Built::new(
        t,
        ws,
        Outcome::error(
            "runtime.sqlite",
            "not a Maka workspace database",
            NOT_SQLITE_HINT,
        ),
    )
}

fn schema_edit(sql: &str, status: i32, codes: &'static [&'static str]) -> Built {
    let (t, ws) = healthy();
    edit(&ws.join("runtime.sqlite"), sql);
    Built::new(t, ws, Outcome::report(status, codes))
}

pub fn user_version_older() -> Built {
    schema_edit("PRAGMA user_version = 11", 0, &["schema_version_mismatch"])
}

pub fn user_version_newer() -> Built {
    // A runtime schema newer than main's (issue notes, 41): a newer Maka wrote it, so
    // its start-up is not known and nothing says Maka refuses it; the healthy ledger
    // exits 0, and every --apply refuses the file.
    schema_edit("PRAGMA user_version = 13", 0, &["schema_newer_than_known"]).finalize(
        Outcome::Plan { runs: 0 },
        Outcome::error(
            "runtime.sqlite",
            "written by a Maka newer than this wsledger",
            "update wsledger",
        ),
    )
}

pub fn missing_table() -> Built {
    // A dropped table: Maka refuses to open the file (its index is the first object
    // its target check misses); that one finding says it.
    schema_edit("DROP TABLE tool_journal_events", 1, &["startup_refused"])
        .replay(1, &["tool_journal_missing"])
}

pub fn missing_operations_table() -> Built {
    // `tool_operations` is a runtime table: no migration creates it again, so Maka
    // refuses the file, and every check that reads the table stays quiet.
    schema_edit("DROP TABLE tool_operations", 1, &["startup_refused"])
        .replay(1, &["tool_operation_missing"])
}

pub fn missing_run_events_table() -> Built {
    // main's core-execution store creates `core_agent_run_events` again (empty) when
    // it opens the file (`CREATE TABLE IF NOT EXISTS`, before its target check):
    // Maka opens it, so the scan reports the missing table once and no refusal.
    schema_edit(
        "DROP TABLE core_agent_run_events",
        0,
        &["schema_object_missing"],
    )
    .replay(1, &["run_terminal_event_missing"])
}

pub fn missing_index() -> Built {
    // A dropped runtime index: the runtime store is at its version, so no migration
    // creates it again, and Maka refuses to open the file.
    schema_edit("DROP INDEX runtime_events_by_run", 1, &["startup_refused"])
}

pub fn missing_capabilities_table() -> Built {
    // main requires `runtime_capabilities`: Maka refuses the file, and the refusal is
    // the one finding (the capability check's own "is missing" would say it again).
    schema_edit("DROP TABLE runtime_capabilities", 1, &["startup_refused"])
}

pub fn missing_run_headers_table() -> Built {
    schema_edit("DROP TABLE core_agent_runs", 0, &["schema_object_missing"])
        .replay(1, &["header_missing"])
}

pub fn extra_column() -> Built {
    schema_edit(
        "ALTER TABLE runtime_events ADD COLUMN doctor_note TEXT",
        1,
        &["startup_refused"],
    )
}

pub fn extra_index() -> Built {
    schema_edit(
        "CREATE INDEX doctor_idx ON runtime_events(committed_at)",
        1,
        &["startup_refused"],
    )
}

pub fn extra_view() -> Built {
    schema_edit(
        "CREATE VIEW doctor_view AS SELECT event_id FROM runtime_events",
        1,
        &["startup_refused"],
    )
}

pub fn missing_registry_row() -> Built {
    schema_edit(
        "DELETE FROM operational_schema_migrations WHERE scope = 'workflow'",
        1,
        &["startup_refused", "schema_registry_mismatch"],
    )
}

pub fn missing_registry_table() -> Built {
    // Without the schema registry Maka refuses a nonempty file; the refusal is the one
    // finding (the registry check's own "is missing" would say it again).
    schema_edit(
        "DROP TABLE operational_schema_migrations",
        1,
        &["startup_refused"],
    )
}

pub fn missing_capability_row() -> Built {
    // Maka's runtime store refuses to open without its recovery capability; the
    // refusal is the one finding (the schema check's word on the row would say it again).
    schema_edit(
        "DELETE FROM runtime_capabilities WHERE capability = 'runtime_recovery_authority'",
        1,
        &["startup_refused"],
    )
}

// A file that matches no known generation gets its schema findings as warnings (the
// releases issue): the status follows the ledger, here healthy.

// ---- Payloads ----------------------------------------------------------------------

pub fn payload_not_json() -> Built {
    let (t, ws) = with_payload(br#"{"id": "df55366f-acd6-4aa5-834f-ef842a20ec38", "role": "#);
    Built::new(t, ws, Outcome::undecodable(TARGET))
}

pub fn payload_empty() -> Built {
    let (t, ws) = with_payload(b"");
    Built::new(t, ws, Outcome::undecodable(TARGET))
}

pub fn payload_array() -> Built {
    let (t, ws) = with_payload(b"[1,2,3]");
    Built::new(t, ws, Outcome::undecodable(TARGET))
}

pub fn payload_scalar() -> Built {
    let (t, ws) = with_payload(br#""just a string""#);
    Built::new(t, ws, Outcome::undecodable(TARGET))
}

pub fn payload_unknown_key() -> Built {
    with_json(|o| {
        o.insert("surprise".into(), serde_json::json!(true));
    })
}

pub fn payload_null_optional() -> Built {
    with_json(|o| {
        o.insert("refs".into(), serde_json::Value::Null);
    })
}

pub fn payload_wrong_enum() -> Built {
    with_json(|o| {
        o.insert("role".into(), serde_json::json!("robot"));
    })
}

pub fn payload_50_mb() -> Built {
    // A 50 MB text in an otherwise valid event.
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    let mut v = payload(&db, TARGET);
    v["content"]["text"] = serde_json::Value::String("x".repeat(50 << 20));
    set_payload(&db, TARGET, serde_json::to_string(&v).unwrap().as_bytes());
    Built::new(t, ws, Outcome::report(0, &[])).heavy()
}

pub fn payload_deeply_nested() -> Built {
    // Ten million `[` then ten million `]`: valid JSON, deeper than any stack.
    const DEPTH: usize = 10_000_000;
    let mut bytes = vec![b'['; DEPTH];
    bytes.extend(std::iter::repeat_n(b']', DEPTH));
    let (t, ws) = with_payload(&bytes);
    Built::new(t, ws, Outcome::undecodable(TARGET)).heavy()
}

pub fn payload_deeply_nested_unclosed() -> Built {
    let (t, ws) = with_payload(&vec![b'['; 10_000_000]);
    Built::new(t, ws, Outcome::undecodable(TARGET)).heavy()
}

pub fn payload_deep_inside_valid_event() -> Built {
    // A valid event whose open `stateDelta` record holds a million nested objects.
    const DEPTH: usize = 1_000_000;
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    let text = serde_json::to_string(&payload(&db, TARGET)).unwrap();
    let deep = format!("{}1{}", "{\"a\":".repeat(DEPTH), "}".repeat(DEPTH));
    let text = text.replacen(
        "{\"author\"",
        &format!("{{\"actions\":{{\"stateDelta\":{{\"deep\":{deep}}}}},\"author\""),
        1,
    );
    set_payload(&db, TARGET, text.as_bytes());
    Built::new(t, ws, Outcome::report(0, &[])).heavy()
}

pub fn payload_not_utf8_in_a_string() -> Built {
    // Bytes that are not UTF-8 inside a string: read as U+FFFD, as Node reads them.
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    let text = serde_json::to_string(&payload(&db, TARGET)).unwrap();
    let bytes = text
        .replacen("Let me read", "Let \u{1}\u{2} read", 1)
        .into_bytes()
        .into_iter()
        .map(|b| match b {
            1 => 0xff,
            2 => 0xc3,
            b => b,
        })
        .collect::<Vec<u8>>();
    set_payload(&db, TARGET, &bytes);
    Built::new(t, ws, Outcome::report(0, &[]))
}

pub fn payload_not_utf8_outside_strings() -> Built {
    let (t, ws) = with_payload(b"{\"id\":\xff\xfe}");
    Built::new(t, ws, Outcome::undecodable(TARGET))
}

pub fn payload_nul_bytes() -> Built {
    // A raw NUL inside a JSON string is a syntax error for JSON.parse.
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    let text = serde_json::to_string(&payload(&db, TARGET)).unwrap();
    let bytes = text
        .replacen("Let me read", "Let \u{1} read", 1)
        .replace('\u{1}', "\0");
    set_payload(&db, TARGET, bytes.as_bytes());
    Built::new(t, ws, Outcome::undecodable(TARGET))
}

pub fn payload_as_blob() -> Built {
    let (t, ws) = healthy();
    edit(
        &ws.join("runtime.sqlite"),
        &format!(
            "UPDATE runtime_events SET payload_json = CAST(payload_json AS BLOB) WHERE event_id = '{TARGET}'"
        ),
    );
    Built::new(t, ws, Outcome::report(0, &[]))
}

// ---- Odd column values -------------------------------------------------------------

pub fn event_seq_at_i64_max() -> Built {
    schema_edit(
        &format!(
            "UPDATE runtime_events SET event_seq = 9223372036854775807 WHERE event_id = '{TARGET}'"
        ),
        1,
        &["event_seq_gap", "run_terminal_not_tail"],
    )
    .replay(1, &["event_seq_gap", "terminal_not_tail"])
}

pub fn event_seq_real_huge() -> Built {
    schema_edit(
        &format!("UPDATE runtime_events SET event_seq = 1e300 WHERE event_id = '{TARGET}'"),
        1,
        &["event_seq_gap", "run_terminal_not_tail"],
    )
    .replay(1, &["event_seq_gap", "terminal_not_tail"])
}

pub fn event_seq_text() -> Built {
    schema_edit(
        &format!("UPDATE runtime_events SET event_seq = 'abc' WHERE event_id = '{TARGET}'"),
        0,
        &["event_seq_gap"],
    )
    .replay(1, &["event_seq_gap"])
}

pub fn event_id_null() -> Built {
    let (t, ws) = healthy();
    edit(
        &ws.join("runtime.sqlite"),
        &format!("UPDATE runtime_events SET event_id = NULL WHERE event_id = '{TARGET}'"),
    );
    Built::new(t, ws, Outcome::undecodable("")).replay(1, &["event_undecodable"])
}

pub fn run_header_not_json() -> Built {
    schema_edit(
        &format!(
            "UPDATE core_agent_runs SET record_json = 'not json' WHERE run_id = '{TARGET_RUN}'"
        ),
        1,
        &["run_header_undecodable"],
    )
    .replay(1, &["header_undecodable"])
}

pub fn tool_rows_of_wrong_types() -> Built {
    schema_edit(
        "UPDATE tool_operations SET version = 'abc', canonical_args_hash = X'00ff', \
         result_event_id = 42",
        0,
        &["projection_operation_mismatch"],
    )
    .replay(1, &["tool_operation_mismatch"])
}

/// A `tool_operations` row that no dispatch in the log explains (a copy of one from
/// another session than the replayed one, under a new operation id): the scan counts
/// dispatched rows against the operations it vouched for, so the count no longer adds
/// up and the table is read again to name the row.
pub fn tool_operation_without_events() -> Built {
    schema_edit(
        "INSERT INTO tool_operations SELECT 'toolop_0123456789abcdef0123456789abcdef', \
         o.invocation_id, o.run_id, o.turn_id, o.provider_tool_call_id || '_copy', o.tool_name, \
         o.canonical_args_hash, o.recovery_mode, o.current_state, o.call_event_id, \
         o.result_event_id, o.version, o.dispatch_event_id FROM tool_operations AS o \
         JOIN runtime_events AS e ON e.event_id = o.call_event_id \
         WHERE o.dispatch_event_id IS NOT NULL \
         AND e.session_id != 'af74eb13-c1b4-4d12-aeb0-23d6c6ca73a3' LIMIT 1",
        0,
        &["projection_operation_extra"],
    )
}

/// The scan reads only the archive flag of a session row: nothing to report.
pub fn session_payload_not_json() -> Built {
    // Maka's start-up cannot read that session header.
    schema_edit(
        "UPDATE session_metadata SET payload_json = '{'",
        1,
        &["session_header_undecodable"],
    )
}

// ---- Text that must never reach a terminal raw -------------------------------------

/// A row whose ids (columns) hold escape sequences, bidi controls and newlines, and
/// whose payload quotes more of them in a wrong enum value.
pub fn escapes_in_ids_and_text() -> Built {
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    let mut v = payload(&db, TARGET);
    v["role"] = serde_json::json!("\u{1b}[2J\u{1b}]8;;http://x\u{7}\u{202e}robot\r\nline");
    v["id"] = serde_json::json!(HOSTILE_ID);
    v["sessionId"] = serde_json::json!(HOSTILE_ID);
    v["runId"] = serde_json::json!(HOSTILE_ID);
    v["invocationId"] = serde_json::json!(HOSTILE_ID);
    let c = Connection::open(&db).unwrap();
    c.execute(
        "INSERT INTO runtime_events (event_id, session_id, invocation_id, run_id, turn_id, \
         event_seq, event_kind, payload_json, committed_at) \
         VALUES (?1, ?1, ?1, ?1, ?2, 1, ?1, ?3, 1)",
        rusqlite::params![HOSTILE_ID, "turn\u{1b}[1m\u{2066}", v.to_string()],
    )
    .unwrap();
    c.close().unwrap();
    let mut b =
        Built::new(t, ws, Outcome::undecodable(HOSTILE_ID)).replay(1, &["event_undecodable"]);
    b.session = HOSTILE_ID.to_owned();
    b
}

/// A workspace path holding an escape sequence, a bidi control and a newline.
pub fn escapes_in_the_path() -> Built {
    let t = tmp();
    let p = t.path().join("ws\u{1b}[31m\u{202e}\nx");
    std::fs::create_dir(&p).unwrap();
    Built::new(
        t,
        p,
        Outcome::error(
            "ws\\u{1b}[31m\\u{202e}\\nx",
            "directory without `runtime.sqlite`",
            "runtime.sqlite",
        ),
    )
}

/// A workspace path with the characters that mean something in an SQLite `file:` URI
/// (and a space, and a byte that is not UTF-8).
pub fn uri_characters_in_the_path() -> Built {
    use std::os::unix::ffi::OsStrExt;
    let t = tmp();
    let name = std::ffi::OsStr::from_bytes(b"w s?x=1#frag%41\xff");
    let ws = t.path().join(name);
    std::fs::create_dir(&ws).unwrap();
    set_mode(&ws, 0o755);
    std::fs::copy("fixtures/healthy/runtime.sqlite", ws.join("runtime.sqlite")).unwrap();
    Built::new(t, ws, Outcome::report(0, &[]))
}

// ---- -wal, permissions, locks, links -----------------------------------------------

pub fn wal_without_shm() -> Built {
    let (t, ws) = with_committed_wal(BREAK_TARGET, false);
    Built::new(t, ws, Outcome::undecodable(TARGET))
}

pub fn wal_with_shm() -> Built {
    let (t, ws) = with_committed_wal(BREAK_TARGET, true);
    Built::new(t, ws, Outcome::undecodable(TARGET))
}

pub fn wal_is_a_directory() -> Built {
    let (t, ws) = healthy();
    std::fs::create_dir(wal(&ws.join("runtime.sqlite"))).unwrap();
    Built::new(
        t,
        ws,
        Outcome::error(
            "runtime.sqlite-wal",
            "is not a file",
            "move it out of the way",
        ),
    )
}

pub fn wal_is_a_fifo() -> Built {
    let (t, ws) = healthy();
    mkfifo(&wal(&ws.join("runtime.sqlite")));
    Built::new(
        t,
        ws,
        Outcome::error(
            "runtime.sqlite-wal",
            "is not a file",
            "move it out of the way",
        ),
    )
}

pub fn shm_is_a_fifo() -> Built {
    let (t, ws) = with_committed_wal(BREAK_TARGET, false);
    mkfifo(&shm(&ws.join("runtime.sqlite")));
    Built::new(
        t,
        ws,
        Outcome::error(
            "runtime.sqlite-shm",
            "is not a file",
            "move it out of the way",
        ),
    )
}

/// Rollback-journal mode with a FIFO where SQLite looks for a hot journal: opening it
/// would block forever.
pub fn journal_is_a_fifo() -> Built {
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    edit(&db, "PRAGMA journal_mode = DELETE");
    mkfifo(&ws.join("runtime.sqlite-journal"));
    Built::new(
        t,
        ws,
        Outcome::error(
            "runtime.sqlite-journal",
            "is not a file",
            "move it out of the way",
        ),
    )
}

pub fn wal_of_garbage() -> Built {
    // Not a WAL at all: SQLite ignores a -wal whose header does not check out.
    let (t, ws) = healthy();
    std::fs::write(wal(&ws.join("runtime.sqlite")), vec![0x5a; 5000]).unwrap();
    Built::new(t, ws, Outcome::report(0, &[]))
}

pub fn read_only_file() -> Built {
    let (t, ws) = healthy();
    set_mode(&ws.join("runtime.sqlite"), 0o444);
    let mut b = Built::new(t, ws, Outcome::report(0, &[]));
    b.as_nobody = true;
    b
}

pub fn read_only_directory() -> Built {
    let (t, ws) = healthy();
    set_mode(&ws.join("runtime.sqlite"), 0o444);
    set_mode(&ws, 0o555);
    let mut b = Built::new(t, ws, Outcome::report(0, &[]));
    b.as_nobody = true;
    b
}

pub fn read_only_directory_with_wal() -> Built {
    let (t, ws) = with_committed_wal(BREAK_TARGET, false);
    for f in ["runtime.sqlite", "runtime.sqlite-wal"] {
        set_mode(&ws.join(f), 0o444);
    }
    set_mode(&ws, 0o555);
    let mut b = Built::new(t, ws, Outcome::undecodable(TARGET));
    b.as_nobody = true;
    b
}

pub fn read_only_directory_with_wal_and_shm() -> Built {
    let (t, ws) = with_committed_wal(BREAK_TARGET, true);
    for f in ["runtime.sqlite", "runtime.sqlite-wal", "runtime.sqlite-shm"] {
        set_mode(&ws.join(f), 0o444);
    }
    set_mode(&ws, 0o555);
    let mut b = Built::new(t, ws, Outcome::undecodable(TARGET));
    b.as_nobody = true;
    b
}

pub fn unreadable_file() -> Built {
    let (t, ws) = healthy();
    set_mode(&ws.join("runtime.sqlite"), 0o000);
    let mut b = Built::new(
        t,
        ws,
        Outcome::error("runtime.sqlite", "Permission denied", "permissions"),
    );
    b.as_nobody = true;
    b
}

/// Another process that runs `sql` on `db` and then holds its connection open.
///
/// A process, not a connection of the test process: POSIX locks are per process, and
/// any file handle the test closes on the database (hashing it, say) would drop them.
/// The holder is this same test binary running its `hold_lock_helper` test (which
/// does nothing unless `WSLEDGER_TEST_HOLD` is set).
pub struct Holder(std::process::Child);

impl Holder {
    /// The holding process's pid.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub const HOLDING: &str = "wsledger-test-holder:holding";

pub fn hold(db: &Path, sql: &str) -> Holder {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "hold_lock_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WSLEDGER_TEST_HOLD", db)
        .env("WSLEDGER_TEST_HOLD_SQL", sql)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "the lock holder stopped before holding its lock");
        if line.contains(HOLDING) {
            break;
        }
    }
    // Keep reading (and discarding) so the holder never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    Holder(child)
}

/// What `hold_lock_helper` does when `WSLEDGER_TEST_HOLD` is set: run the SQL, say
/// so, and keep the connection until stdin closes (or the process is killed).
pub fn hold_lock_helper() {
    use std::io::{Read, Write};
    let Some(db) = std::env::var_os("WSLEDGER_TEST_HOLD") else {
        return;
    };
    let sql = std::env::var("WSLEDGER_TEST_HOLD_SQL").unwrap();
    let c = Connection::open(db).unwrap();
    c.execute_batch(&sql).unwrap();
    let mut out = std::io::stdout();
    writeln!(out, "{HOLDING}").unwrap();
    out.flush().unwrap();
    let _ = std::io::stdin().read(&mut [0u8; 1]);
    drop(c);
}

/// Rollback-journal mode with another process holding an EXCLUSIVE lock.
pub fn locked_by_another_writer() -> Built {
    let (t, ws) = healthy();
    // Bounded: SQLite's busy wait (5 s) plus start-up, never a hang.
    locked_exclusively(t, ws, Duration::from_secs(20))
}

/// The workspace `ws` in rollback-journal mode, another process holding an EXCLUSIVE
/// lock on it: nothing can read, and every command says so within `timeout`.
fn locked_exclusively(t: tempfile::TempDir, ws: PathBuf, timeout: Duration) -> Built {
    let db = ws.join("runtime.sqlite");
    edit(&db, "PRAGMA journal_mode = DELETE");
    let c = hold(&db, "BEGIN EXCLUSIVE");
    let mut b = Built::new(
        t,
        ws,
        Outcome::error("runtime.sqlite", "locked", "another process"),
    );
    b.guard = Some(c);
    b.timeout = timeout;
    b
}

/// A WAL database whose writer holds `BEGIN EXCLUSIVE` with an uncommitted change:
/// WAL readers are never blocked, and see the last committed state.
pub fn wal_writer_holds_exclusive() -> Built {
    let (t, ws) = healthy();
    let db = ws.join("runtime.sqlite");
    let c = hold(&db, &format!("BEGIN EXCLUSIVE; {BREAK_TARGET}"));
    let mut b = Built::new(t, ws, Outcome::report(0, &[]));
    b.guard = Some(c);
    // The writer's -shm is SQLite's to change; the names in the directory are not.
    b.dirs.clear();
    b
}

/// Rollback-journal mode, copied while a writer had spilled uncommitted pages into
/// the file: a hot journal that only a writer may roll back.
pub fn hot_journal() -> Built {
    let (t, src) = healthy();
    let db = src.join("runtime.sqlite");
    edit(&db, "PRAGMA journal_mode = DELETE");
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "PRAGMA cache_size = 1; BEGIN; UPDATE runtime_events SET payload_json = payload_json || ' ';",
    )
    .unwrap();
    let ws = t.path().join("crashed");
    std::fs::create_dir(&ws).unwrap();
    std::fs::copy(&db, ws.join("runtime.sqlite")).unwrap();
    let mut journal = src.join("runtime.sqlite").into_os_string();
    journal.push("-journal");
    std::fs::copy(&journal, ws.join("runtime.sqlite-journal")).unwrap();
    drop(c);
    std::fs::remove_dir_all(&src).unwrap();
    Built::new(
        t,
        ws,
        Outcome::error("runtime.sqlite", "interrupted", "Maka"),
    )
}

fn symlinked(link_to_dir: bool) -> Built {
    let (t, real) = with_committed_wal(BREAK_TARGET, true);
    let other = t.path().join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    let (link, target) = if link_to_dir {
        (other.join("ws-link"), real.clone())
    } else {
        (other.join("db-link.sqlite"), real.join("runtime.sqlite"))
    };
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let mut b = Built::new(t, link, Outcome::undecodable(TARGET));
    let db = real.join("runtime.sqlite");
    b.watch = vec![db.clone(), wal(&db)];
    b.dirs = vec![real, other];
    b
}

pub fn symlink_to_the_database() -> Built {
    symlinked(false)
}

pub fn symlink_to_the_workspace() -> Built {
    symlinked(true)
}

pub fn symlink_loop() -> Built {
    let t = tmp();
    let p = t.path().join("loop.sqlite");
    std::os::unix::fs::symlink(&p, &p).unwrap();
    Built::new(t, p, Outcome::error("loop.sqlite", "", ""))
}

pub fn symlink_dangling() -> Built {
    let t = tmp();
    let p = t.path().join("dangling.sqlite");
    std::os::unix::fs::symlink(t.path().join("gone"), &p).unwrap();
    Built::new(
        t,
        p,
        Outcome::error("dangling.sqlite", "does not exist", ""),
    )
}

// ---- A run to finalize, next to broken things --------------------------------------

/// `fixtures/stuck-running` has one stuck run: finalize-runs plans it.
const STUCK: &[&str] = &["run_stuck_running"];

/// A committed change that changes nothing the doctor reads: it only puts frames in
/// the `-wal`.
const TOUCH: &str = "UPDATE session_metadata SET is_archived = is_archived";

fn stuck(t: tempfile::TempDir, arg: PathBuf) -> Built {
    let mut b = Built::new(t, arg, Outcome::report(1, STUCK))
        .finalize(Outcome::Plan { runs: 1 }, Outcome::Plan { runs: 1 });
    b.session = STUCK_SESSION.to_owned();
    b
}

pub fn stuck_run() -> Built {
    let (t, ws) = fixture("stuck-running");
    stuck(t, ws)
}

pub fn stuck_run_wal_without_shm() -> Built {
    let (t, ws) = committed_wal_of("stuck-running", TOUCH, false);
    stuck(t, ws)
}

pub fn stuck_run_wal_with_shm() -> Built {
    let (t, ws) = committed_wal_of("stuck-running", TOUCH, true);
    stuck(t, ws)
}

/// The database named through a link in another directory: `--apply` must write
/// (and check permissions) where the file really is.
pub fn stuck_run_through_a_symlink() -> Built {
    let (t, real) = committed_wal_of("stuck-running", TOUCH, true);
    let other = t.path().join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    let link = other.join("db-link.sqlite");
    std::os::unix::fs::symlink(real.join("runtime.sqlite"), &link).unwrap();
    let mut b = stuck(t, link);
    let db = real.join("runtime.sqlite");
    b.watch = vec![db.clone(), wal(&db)];
    b.dirs = vec![real, other];
    b
}

/// Another process holds a WAL write transaction: reading works, `--apply` sees the
/// process's locks and refuses at once (no marker needed), writing nothing.
pub fn stuck_run_while_another_writer_holds_the_file() -> Built {
    let (t, ws) = fixture("stuck-running");
    let db = ws.join("runtime.sqlite");
    let h = hold(&db, &format!("BEGIN IMMEDIATE; {TOUCH}"));
    let mut b = stuck(t, ws).finalize(
        Outcome::Plan { runs: 1 },
        Outcome::error(
            "runtime.sqlite",
            "another process has this database open (pid",
            "quit Maka",
        ),
    );
    b.guard = Some(h);
    b.timeout = Duration::from_secs(30);
    b
}

/// Another process holds an EXCLUSIVE lock (rollback-journal mode): nothing can read.
pub fn stuck_run_locked_exclusively() -> Built {
    let (t, ws) = fixture("stuck-running");
    locked_exclusively(t, ws, Duration::from_secs(30))
}

pub fn stuck_run_read_only_directory() -> Built {
    let (t, ws) = fixture("stuck-running");
    set_mode(&ws.join("runtime.sqlite"), 0o444);
    set_mode(&ws, 0o555);
    let mut b = stuck(t, ws).finalize(
        Outcome::Plan { runs: 1 },
        Outcome::error("runtime.sqlite", "read-only", "write permission"),
    );
    b.as_nobody = true;
    b
}

pub fn stuck_run_extra_index() -> Built {
    stuck_run_off_main_elsewhere(
        "CREATE INDEX doctor_idx ON runtime_events(committed_at)",
        &["startup_refused", "run_stuck_running"],
    )
}

pub fn stuck_run_newer_user_version() -> Built {
    // Written by a Maka newer than this wsledger: the stuck run is found and planned,
    // and --apply refuses the file before anything is created (issue notes, 41).
    let (t, ws) = fixture("stuck-running");
    edit(&ws.join("runtime.sqlite"), "PRAGMA user_version = 13");
    let mut b = Built::new(
        t,
        ws,
        Outcome::report(1, &["schema_newer_than_known", "run_stuck_running"]),
    )
    .finalize(
        Outcome::Plan { runs: 1 },
        Outcome::error(
            "runtime.sqlite",
            "written by a Maka newer than this wsledger",
            "update wsledger",
        ),
    );
    b.session = STUCK_SESSION.to_owned();
    b
}

/// stuck-running changed by `sql` outside the repair tables: the scan reports `codes`,
/// and finalize plans and applies the one run.
fn stuck_run_off_main_elsewhere(sql: &str, codes: &'static [&'static str]) -> Built {
    let (t, ws) = fixture("stuck-running");
    edit(&ws.join("runtime.sqlite"), sql);
    let mut b = Built::new(t, ws, Outcome::report(1, codes)).finalize(
        Outcome::Plan { runs: 1 },
        // Every repair table is exactly main's: the apply proceeds on that basis.
        Outcome::Plan { runs: 1 },
    );
    b.session = STUCK_SESSION.to_owned();
    b
}

/// A stuck run reached through a link whose real directory has no write bit:
/// `--apply` must refuse, as it refuses a read-only directory named directly.
pub fn stuck_run_symlink_into_a_read_only_directory() -> Built {
    let (t, real) = fixture("stuck-running");
    set_mode(&real, 0o555);
    let (other, link) = link_elsewhere(&t, &real);
    // The error names the real directory, which is what lacks the write bit.
    let mut b = stuck(t, link).finalize(
        Outcome::Plan { runs: 1 },
        Outcome::error("/ws` is read-only", "no write bit", "write permission"),
    );
    let db = real.join("runtime.sqlite");
    b.watch = vec![db.clone(), wal(&db)];
    b.dirs = vec![real, other];
    b
}

/// Maka runs on the workspace (it holds the owner lock named by the marker beside
/// the real file) while `--apply` is given a link to the database.
pub fn stuck_run_symlink_while_maka_holds_the_owner_lock() -> Built {
    let (t, real) = fixture("stuck-running");
    let root = "0123456789abcdef".repeat(4);
    write_marker(&real, &root);
    let (other, link) = link_elsewhere(&t, &real);
    let mut b = stuck(t, link).finalize(
        Outcome::Plan { runs: 1 },
        Outcome::error("owner.lock", "held by another process", "quit Maka"),
    );
    b.owner_lock = Some(wsledger::lock::acquire(&b.control, std::slice::from_ref(&root)).unwrap());
    let db = real.join("runtime.sqlite");
    b.watch = vec![db.clone(), wal(&db)];
    b.dirs = vec![real, other];
    b
}

/// `<t>/elsewhere/db-link.sqlite`, a link to the database of the workspace `real`:
/// the directory and the link.
fn link_elsewhere(t: &tempfile::TempDir, real: &Path) -> (PathBuf, PathBuf) {
    let other = t.path().join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    let link = other.join("db-link.sqlite");
    std::os::unix::fs::symlink(real.join("runtime.sqlite"), &link).unwrap();
    (other, link)
}

/// A corpus builder.
pub type Builder = fn() -> Built;

/// Every entry, by name.
pub const ENTRIES: &[(&str, Builder)] = &[
    ("missing_path", missing_path),
    ("dir_without_database", dir_without_database),
    ("database_is_a_directory", database_is_a_directory),
    ("not_a_file_fifo", not_a_file_fifo),
    ("database_is_a_fifo", database_is_a_fifo),
    ("not_a_file_device", not_a_file_device),
    ("empty_file", empty_file),
    ("random_bytes", random_bytes),
    ("sqlite_header_then_garbage", sqlite_header_then_garbage),
    ("truncated_to_a_third", truncated_to_a_third),
    ("truncated_to_the_header", truncated_to_the_header),
    ("truncated_to_the_first_page", truncated_to_the_first_page),
    ("corrupt_events_page", corrupt_events_page),
    ("corrupt_page_elsewhere", corrupt_page_elsewhere),
    ("corrupt_schema_page", corrupt_schema_page),
    ("not_a_maka_workspace", not_a_maka_workspace),
    ("missing_runtime_events", missing_runtime_events),
    ("user_version_older", user_version_older),
    ("user_version_newer", user_version_newer),
    ("missing_table", missing_table),
    ("missing_operations_table", missing_operations_table),
    ("missing_run_events_table", missing_run_events_table),
    ("missing_index", missing_index),
    ("missing_capabilities_table", missing_capabilities_table),
    ("missing_run_headers_table", missing_run_headers_table),
    ("extra_column", extra_column),
    ("extra_index", extra_index),
    ("extra_view", extra_view),
    ("missing_registry_row", missing_registry_row),
    ("missing_registry_table", missing_registry_table),
    ("missing_capability_row", missing_capability_row),
    ("payload_not_json", payload_not_json),
    ("payload_empty", payload_empty),
    ("payload_array", payload_array),
    ("payload_scalar", payload_scalar),
    ("payload_unknown_key", payload_unknown_key),
    ("payload_null_optional", payload_null_optional),
    ("payload_wrong_enum", payload_wrong_enum),
    ("payload_50_mb", payload_50_mb),
    ("payload_deeply_nested", payload_deeply_nested),
    (
        "payload_deeply_nested_unclosed",
        payload_deeply_nested_unclosed,
    ),
    (
        "payload_deep_inside_valid_event",
        payload_deep_inside_valid_event,
    ),
    ("payload_not_utf8_in_a_string", payload_not_utf8_in_a_string),
    (
        "payload_not_utf8_outside_strings",
        payload_not_utf8_outside_strings,
    ),
    ("payload_nul_bytes", payload_nul_bytes),
    ("payload_as_blob", payload_as_blob),
    ("event_seq_at_i64_max", event_seq_at_i64_max),
    ("event_seq_real_huge", event_seq_real_huge),
    ("event_seq_text", event_seq_text),
    ("event_id_null", event_id_null),
    ("run_header_not_json", run_header_not_json),
    ("tool_rows_of_wrong_types", tool_rows_of_wrong_types),
    (
        "tool_operation_without_events",
        tool_operation_without_events,
    ),
    ("session_payload_not_json", session_payload_not_json),
    ("escapes_in_ids_and_text", escapes_in_ids_and_text),
    ("escapes_in_the_path", escapes_in_the_path),
    ("uri_characters_in_the_path", uri_characters_in_the_path),
    ("wal_without_shm", wal_without_shm),
    ("wal_with_shm", wal_with_shm),
    ("wal_is_a_directory", wal_is_a_directory),
    ("wal_is_a_fifo", wal_is_a_fifo),
    ("shm_is_a_fifo", shm_is_a_fifo),
    ("journal_is_a_fifo", journal_is_a_fifo),
    ("wal_of_garbage", wal_of_garbage),
    ("read_only_file", read_only_file),
    ("read_only_directory", read_only_directory),
    ("read_only_directory_with_wal", read_only_directory_with_wal),
    (
        "read_only_directory_with_wal_and_shm",
        read_only_directory_with_wal_and_shm,
    ),
    ("unreadable_file", unreadable_file),
    ("locked_by_another_writer", locked_by_another_writer),
    ("wal_writer_holds_exclusive", wal_writer_holds_exclusive),
    ("hot_journal", hot_journal),
    ("symlink_to_the_database", symlink_to_the_database),
    ("symlink_to_the_workspace", symlink_to_the_workspace),
    ("symlink_loop", symlink_loop),
    ("symlink_dangling", symlink_dangling),
    ("stuck_run", stuck_run),
    ("stuck_run_wal_without_shm", stuck_run_wal_without_shm),
    ("stuck_run_wal_with_shm", stuck_run_wal_with_shm),
    ("stuck_run_through_a_symlink", stuck_run_through_a_symlink),
    (
        "stuck_run_while_another_writer_holds_the_file",
        stuck_run_while_another_writer_holds_the_file,
    ),
    ("stuck_run_locked_exclusively", stuck_run_locked_exclusively),
    (
        "stuck_run_read_only_directory",
        stuck_run_read_only_directory,
    ),
    ("stuck_run_extra_index", stuck_run_extra_index),
    ("stuck_run_newer_user_version", stuck_run_newer_user_version),
    (
        "stuck_run_symlink_into_a_read_only_directory",
        stuck_run_symlink_into_a_read_only_directory,
    ),
    (
        "stuck_run_symlink_while_maka_holds_the_owner_lock",
        stuck_run_symlink_while_maka_holds_the_owner_lock,
    ),
];
