//! The one place that writes to a workspace database: applying a finalize plan.
//!
//! [`Writer::open`] opens the file read-write with Maka's connection settings
//! (`busy_timeout` 5000, `foreign_keys=ON`, `synchronous=FULL`; `journal_mode` is left
//! as it is). [`Writer::apply`] runs the whole write set in one `BEGIN IMMEDIATE`
//! transaction: it checks the schema, re-reads every planned run and session and
//! compares them with the rows the plan was made from, then inserts and updates
//! exactly the rows of the write set, and asks the kernel once more, just before the
//! commit, whether another process has opened the file. Any difference or failure
//! rolls everything back. No schema object, `user_version`, registry or capability
//! row is touched: the one exception, putting back a missing derived object exactly
//! (`doctor rederive`), is written by `super::derived`, on this writer.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, Transaction, TransactionBehavior};
use sha2::{Digest, Sha256};

use super::facts::{
    has_table, read_claims, read_invocation_users, read_ledger_fingerprint, read_runs_rows,
    read_session_rows_at, ClaimRow, InvocationUsers, LedgerFingerprint, RunRows, SessionRows,
    MESSAGE_CHUNK_BYTES, MESSAGE_CHUNK_MARKER,
};
use super::{DbError, SchemaFacts, Workspace, BUSY_TIMEOUT};
use crate::lock::OpenProbe;

/// A new `runtime_events` row and its session ordinal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    pub event_id: String,
    pub session_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
    pub event_seq: i64,
    pub event_kind: String,
    pub payload_json: String,
    pub committed_at: i64,
    pub ordinal: i64,
}

/// A T2 tool outcome (Maka's `commitToolOutcome`): the response event, its journal
/// row, the operation's move to `outcome_committed`, and the partial stream it
/// completes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutcomeWrite {
    pub event: NewEvent,
    pub operation_id: String,
    pub journal_event_id: String,
    /// Copied from the operation row into the journal row.
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
    pub canonical_args_hash: String,
    pub recovery_mode: String,
    /// `stream_key` of the `tool:call:<id>` partial stream this response completes.
    pub completed_stream_key: String,
}

/// The run header's new record (compare-and-set on the old record text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderWrite {
    pub created_at: i64,
    pub record_json: String,
    pub expected_record_json: String,
}

/// A new `core_agent_run_events` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunEventWrite {
    pub sequence: i64,
    pub event_id: String,
    pub event_type: String,
    pub event_ts: i64,
    pub record_json: String,
}

/// A new transcript record: a `session_messages` row (chunked when longer than 64
/// KiB), or, with `file`, one line appended to that session file after the commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageWrite {
    pub sequence: i64,
    pub message_id: String,
    pub message_type: String,
    pub message_ts: i64,
    pub record_json: String,
    /// The transcript file of a release that keeps transcripts in files (v0.1.2,
    /// v0.1.3).
    pub file: Option<PathBuf>,
}

/// The session header's new record (compare-and-set on `metadata_version`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionWrite {
    pub expected_version: i64,
    pub payload_json: String,
    pub committed_at: i64,
}

/// Everything written for one run, in the order it is written.
#[derive(Clone, Debug)]
pub struct RunWrite {
    pub session_id: String,
    pub run_id: String,
    /// The run's rows when the plan was made.
    pub expected: RunRows,
    /// The invocation id the new events use and who used it when planned.
    pub invocation: Option<(String, InvocationUsers)>,
    pub outcomes: Vec<OutcomeWrite>,
    pub terminal: Option<NewEvent>,
    pub header: Option<HeaderWrite>,
    pub run_event: Option<RunEventWrite>,
    pub message: Option<MessageWrite>,
    pub session: Option<SessionWrite>,
}

/// A whole plan's writes, with the session and claim rows it was made from.
#[derive(Clone, Debug, Default)]
pub struct WriteSet {
    pub runs: Vec<RunWrite>,
    pub sessions: Vec<(String, SessionRows)>,
    pub claims: Vec<ClaimRow>,
    /// Set when the plan writes T2 outcomes: it relied on Maka's gate accepting tool
    /// writes, which depends on every row of the ledger.
    pub ledger: Option<LedgerFingerprint>,
}

impl WriteSet {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// Why an apply wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("`{path}` cannot be repaired in its schema: {detail}")]
    SchemaNotCurrent { path: PathBuf, detail: String },
    #[error("`{path}`: {what} changed since the plan was made; nothing was written")]
    Changed { path: PathBuf, what: String },
    #[error("`{path}`: the disk or the database is full ({detail}); nothing was written")]
    Full { path: PathBuf, detail: String },
    #[error("`{path}`: {detail}; nothing was written")]
    Write { path: PathBuf, detail: String },
    #[error("`{path}`: another process opened this database during the write ({who}); the transaction was rolled back, nothing was written")]
    OpenedMeanwhile { path: PathBuf, who: String },
    #[error("`{path}`: the database transaction was committed, but appending to `{file}` failed: {detail}")]
    Transcript {
        path: PathBuf,
        file: PathBuf,
        detail: String,
    },
}

/// What to do about a file no repair may write (every repair says the same).
pub const SCHEMA_REFUSAL_HINT: &str = "wsledger writes only in the schema of a known Maka \
release, and changes a schema only to put back a missing object that release derives \
(`wsledger doctor rederive`); keep the file as it is (take a copy) and run `wsledger \
doctor scan` to see what differs";

impl WriteError {
    pub fn hint(&self) -> String {
        match self {
            WriteError::Db(e) => e.hint(),
            WriteError::SchemaNotCurrent { .. } => SCHEMA_REFUSAL_HINT.into(),
            WriteError::Changed { .. } => {
                "something wrote to the workspace meanwhile (is Maka running?); run \
                 `wsledger doctor finalize-runs` again to make a new plan"
                    .into()
            }
            WriteError::Full { .. } => "free some disk space and run the command again".into(),
            WriteError::Write { .. } => {
                "the transaction was rolled back; check the file and run the command again".into()
            }
            WriteError::OpenedMeanwhile { .. } => {
                "quit Maka (or the other program using the workspace; `wsledger info` shows its \
                 pid), then run the command again"
                    .into()
            }
            WriteError::Transcript { .. } => {
                "the runs are sealed in the database; the turn_state record the release would \
                 have appended is missing from the transcript (Maka shows that turn without its \
                 final state). The backup beside the database holds the file and the transcript \
                 as they were before; check the disk and the file's permissions"
                    .into()
            }
        }
    }
}

/// Whether a repair may write in a file of these schema facts, or why not: the rule
/// lives above `db` (`release::repair_basis::schema_gate`), and the writer is handed it
/// when it opens, so that this module never asks the release catalog itself.
pub type SchemaGate = fn(&SchemaFacts) -> Result<(), Vec<String>>;

/// Test hooks of an apply.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApplyOptions {
    /// `PRAGMA max_page_count` for this connection (simulates a full disk).
    pub max_page_count: Option<i64>,
}

/// What the name of the copy of a plan's transcript files ends with, beside the
/// database backup's (`<backup>.sessions`).
pub const TRANSCRIPT_BACKUP_SUFFIX: &str = ".sessions";

/// A read-write connection to a workspace database.
pub struct Writer {
    ws: Workspace,
    /// The backup this writer made, until one of its transactions commits: a write
    /// refused before any commit takes it along (nothing was written, and exit 2
    /// promises nothing was created).
    backup: RefCell<Option<PathBuf>>,
    /// Asked once more just before each commit (see [`Writer::refuse_if_opened_meanwhile`]).
    /// Declared after `ws` so that its files close after the connection: closing one
    /// drops every POSIX lock this process holds on the file, SQLite's included.
    probe: RefCell<OpenProbe>,
    /// Asked before and inside every transaction (see [`Writer::check_schema`]).
    gate: SchemaGate,
}

impl Writer {
    /// Opens `db` read-write with Maka's settings. Never creates the file.
    pub fn open(db: &Path, gate: SchemaGate) -> Result<Writer, DbError> {
        let conn = Connection::open_with_flags(
            db,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| DbError::from_sqlite(db, &e))?;
        let ws = Workspace {
            conn,
            path: db.to_path_buf(),
            twin: None,
            _copy_dir: None,
            stamp: None,
            live: false,
        };
        let e = |e: rusqlite::Error| DbError::from_sqlite(db, &e);
        ws.conn.busy_timeout(BUSY_TIMEOUT).map_err(e)?;
        ws.conn
            .pragma_update(None, "foreign_keys", true)
            .map_err(e)?;
        ws.conn
            .pragma_update(None, "synchronous", "FULL")
            .map_err(e)?;
        let _: i64 = ws
            .conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .map_err(e)?;
        Ok(Writer {
            ws,
            backup: RefCell::new(None),
            probe: RefCell::new(OpenProbe::new(db)),
            gate,
        })
    }

    /// The last check of every write, inside its transaction just before the commit:
    /// whether another process has opened the file since the command's own probes
    /// (Maka starting, another program). An error rolls the write back (the caller
    /// returns it, dropping the transaction); what is left open is the commit itself.
    pub(crate) fn refuse_if_opened_meanwhile(&self) -> Result<(), WriteError> {
        super::pause_point("write:commit");
        let path = self.ws.path().to_path_buf();
        let refusal = match self.probe.borrow_mut().held_by_other() {
            Ok(None) => return Ok(()),
            Ok(Some(by)) => WriteError::OpenedMeanwhile {
                path,
                who: by.describe(),
            },
            Err(e) => WriteError::Write {
                path,
                detail: format!("cannot tell whether another process has it open: {e}"),
            },
        };
        if let Some(b) = self.backup.borrow_mut().take() {
            let _ = std::fs::remove_file(&b);
            let mut sessions = b.into_os_string();
            sessions.push(TRANSCRIPT_BACKUP_SUFFIX);
            let _ = std::fs::remove_dir_all(sessions);
        }
        Err(refusal)
    }

    /// The underlying connection (for the backup).
    pub(crate) fn conn(&self) -> &Connection {
        &self.ws.conn
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        self.ws.path()
    }

    /// Copies the database with SQLite's online backup API (see [`super::backup`]).
    pub fn backup_to(&self, dest: &Path) -> Result<(), DbError> {
        super::backup::backup_connection(self.conn(), self.ws.path(), dest)?;
        *self.backup.borrow_mut() = Some(dest.to_path_buf());
        Ok(())
    }

    /// After a commit: the backup is now the only copy of the file as it was.
    pub(crate) fn committed(&self) {
        self.backup.borrow_mut().take();
    }

    /// Whether session transcripts live in `sessions/<id>/` beside the database.
    pub fn transcripts_in_files(&self) -> Result<bool, WriteError> {
        super::facts::transcripts_in_files(self.conn()).map_err(|e| classify(self.path(), e))
    }

    /// The refusal of a file no repair may write (asked of the writer's gate).
    pub fn check_schema(&self) -> Result<(), WriteError> {
        let facts = self.ws.schema_facts()?;
        (self.gate)(&facts).map_err(|problems| WriteError::SchemaNotCurrent {
            path: self.ws.path().to_path_buf(),
            detail: problems.join("; "),
        })
    }

    /// A `BEGIN IMMEDIATE` transaction, the schema checked before it and again inside
    /// the write lock.
    pub(super) fn begin_checked(&self) -> Result<Transaction<'_>, WriteError> {
        self.check_schema()?;
        let tx = Transaction::new_unchecked(self.conn(), TransactionBehavior::Immediate)
            .map_err(|e| classify(self.path(), e))?;
        // Inside the write lock, again.
        self.check_schema()?;
        Ok(tx)
    }

    /// The last check before a commit (see [`Writer::refuse_if_opened_meanwhile`]),
    /// then the commit; a failed constraint check at the commit (keys deferred) is
    /// `broken`.
    pub(super) fn commit_checked(
        &self,
        tx: Transaction<'_>,
        broken: impl FnOnce(&rusqlite::Error) -> String,
    ) -> Result<(), WriteError> {
        self.refuse_if_opened_meanwhile()?;
        tx.commit()
            .map_err(|e| constraint_or(self.path(), e, broken))?;
        self.committed();
        Ok(())
    }

    /// Applies `set` in one transaction; see the module docs.
    pub fn apply(&self, set: &WriteSet, opts: &ApplyOptions) -> Result<(), WriteError> {
        let path = self.ws.path().to_path_buf();
        if let Some(n) = opts.max_page_count {
            self.ws
                .conn
                .pragma_update(None, "max_page_count", n)
                .map_err(|e| DbError::from_sqlite(&path, &e))?;
        }
        self.check_schema()?;
        let werr = |e: rusqlite::Error| classify(&path, e);
        let tx = Transaction::new_unchecked(&self.ws.conn, TransactionBehavior::Immediate)
            .map_err(werr)?;
        // Inside the write lock: the schema and every planned row, again.
        self.check_schema()?;
        revalidate(&tx, self.ws.path(), set).map_err(|e| match e {
            Revalidation::Sql(e) => werr(e),
            Revalidation::Changed(what) => WriteError::Changed {
                path: path.clone(),
                what,
            },
        })?;
        for run in &set.runs {
            write_run(&tx, run).map_err(|e| match e {
                Revalidation::Sql(e) => werr(e),
                Revalidation::Changed(what) => WriteError::Changed {
                    path: path.clone(),
                    what,
                },
            })?;
        }
        self.refuse_if_opened_meanwhile()?;
        tx.commit().map_err(werr)?;
        self.committed();
        // Then the transcript files, as Maka appends after its transaction.
        append_transcripts(&path, set)
    }
}

/// Appends each session file's new records (in plan order, one write per file).
fn append_transcripts(db: &Path, set: &WriteSet) -> Result<(), WriteError> {
    let mut by_file: Vec<(&PathBuf, Vec<String>)> = Vec::new();
    for m in set.runs.iter().filter_map(|r| r.message.as_ref()) {
        let Some(f) = &m.file else { continue };
        match by_file.iter_mut().find(|(p, _)| *p == f) {
            Some((_, lines)) => lines.push(m.record_json.clone()),
            None => by_file.push((f, vec![m.record_json.clone()])),
        }
    }
    let root = super::files::workspace_root(db);
    for (path, lines) in by_file {
        let fail = |detail: String| WriteError::Transcript {
            path: db.to_path_buf(),
            file: path.clone(),
            detail,
        };
        let file = set
            .sessions
            .iter()
            .filter_map(|(_, rows)| rows.transcript_file.as_ref())
            .find(|t| t.path == *path)
            .ok_or_else(|| fail("the plan did not read it".into()))?;
        super::files::append_transcript(file, &lines, &root).map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}

/// `e` as `detail(e)` where it is a failed constraint (a row that collides, a key
/// that breaks), otherwise as [`classify`] says.
pub(super) fn constraint_or(
    path: &Path,
    e: rusqlite::Error,
    detail: impl FnOnce(&rusqlite::Error) -> String,
) -> WriteError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => WriteError::Write {
            path: path.to_path_buf(),
            detail: detail(&e),
        },
        _ => classify(path, e),
    }
}

/// A row of `table` from a bundle (`bundle`: its kind, in words) of `session` that
/// collides with a row in the workspace (a restore).
pub(super) fn collision(
    path: &Path,
    e: rusqlite::Error,
    table: &str,
    bundle: &str,
    session: &str,
) -> WriteError {
    constraint_or(path, e, |e| {
        format!(
            "a row of `{table}` from the {bundle} of session `{session}` collides with a row \
             in the workspace ({e})"
        )
    })
}

/// A restore whose rows break a foreign key (checked at the commit).
pub(super) fn restored_keys_broken(e: &rusqlite::Error) -> String {
    format!("the restored rows break a foreign key ({e})")
}

pub(crate) fn classify(path: &Path, e: rusqlite::Error) -> WriteError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => WriteError::Full {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
        Some(
            rusqlite::ErrorCode::DatabaseBusy
            | rusqlite::ErrorCode::DatabaseLocked
            | rusqlite::ErrorCode::DatabaseCorrupt
            | rusqlite::ErrorCode::NotADatabase,
        ) => WriteError::Db(DbError::from_sqlite(path, &e)),
        _ => WriteError::Write {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
    }
}

enum Revalidation {
    Sql(rusqlite::Error),
    Changed(String),
}

impl From<rusqlite::Error> for Revalidation {
    fn from(e: rusqlite::Error) -> Self {
        Revalidation::Sql(e)
    }
}

fn revalidate(c: &Connection, db: &Path, set: &WriteSet) -> Result<(), Revalidation> {
    let keys: Vec<(&str, &str)> = set
        .runs
        .iter()
        .map(|r| (r.session_id.as_str(), r.run_id.as_str()))
        .collect();
    // All runs at once: their tool operations are found in one pass.
    let rows = read_runs_rows(c, &keys)?;
    for (run, now) in set.runs.iter().zip(rows) {
        if now != run.expected {
            return Err(Revalidation::Changed(format!(
                "run `{}` of session `{}`",
                run.run_id, run.session_id
            )));
        }
        if let Some((invocation, users)) = &run.invocation {
            if read_invocation_users(c, invocation)? != *users {
                return Err(Revalidation::Changed(format!(
                    "the use of invocation id `{invocation}`"
                )));
            }
        }
    }
    for (session, rows) in &set.sessions {
        if read_session_rows_at(c, db, session)? != *rows {
            return Err(Revalidation::Changed(format!("session `{session}`")));
        }
    }
    if read_claims(c)? != set.claims {
        return Err(Revalidation::Changed("the continuation claims".into()));
    }
    if let Some(fp) = set.ledger {
        if read_ledger_fingerprint(c)? != fp {
            return Err(Revalidation::Changed(
                "the event ledger (the plan writes tool outcomes, which Maka's ledger gate \
                 judges on the whole file)"
                    .into(),
            ));
        }
    }
    Ok(())
}

fn insert_event(c: &Connection, e: &NewEvent) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO runtime_events(event_id, session_id, invocation_id, run_id, turn_id, \
         event_seq, event_kind, payload_json, committed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, \
         ?8, ?9)",
        params![
            e.event_id,
            e.session_id,
            e.invocation_id,
            e.run_id,
            e.turn_id,
            e.event_seq,
            e.event_kind,
            e.payload_json,
            e.committed_at
        ],
    )?;
    // Releases before v0.1.7 have no ordinal table and write no ordinal.
    if has_table(c, "runtime_session_event_ordinals")? {
        c.execute(
            "INSERT INTO runtime_session_event_ordinals(session_id, ordinal, event_id) \
             VALUES (?1, ?2, ?3)",
            params![e.session_id, e.ordinal, e.event_id],
        )?;
    }
    Ok(())
}

fn expect_one(changed: usize, what: &str) -> Result<(), Revalidation> {
    if changed == 1 {
        Ok(())
    } else {
        Err(Revalidation::Changed(what.to_owned()))
    }
}

fn write_run(c: &Connection, run: &RunWrite) -> Result<(), Revalidation> {
    for o in &run.outcomes {
        insert_event(c, &o.event)?;
        c.execute(
            "INSERT INTO tool_journal_events(journal_event_id, operation_id, invocation_id, \
             run_id, turn_id, state, runtime_event_id, canonical_args_hash, recovery_mode, \
             metadata_json, committed_at) VALUES (?1, ?2, ?3, ?4, ?5, 'outcome_committed', ?6, \
             ?7, ?8, NULL, ?9)",
            params![
                o.journal_event_id,
                o.operation_id,
                o.invocation_id,
                o.run_id,
                o.turn_id,
                o.event.event_id,
                o.canonical_args_hash,
                o.recovery_mode,
                o.event.committed_at
            ],
        )?;
        let n = c.execute(
            "UPDATE tool_operations SET current_state = 'outcome_committed', \
             result_event_id = ?1, version = version + 1 WHERE operation_id = ?2 \
             AND current_state = 'prepared' AND result_event_id IS NULL",
            params![o.event.event_id, o.operation_id],
        )?;
        expect_one(n, &format!("tool operation `{}`", o.operation_id))?;
        c.execute(
            "DELETE FROM runtime_partial_snapshots WHERE stream_key = ?1",
            [&o.completed_stream_key],
        )?;
    }
    if let Some(e) = &run.terminal {
        insert_event(c, e)?;
    }
    if let Some(h) = &run.header {
        let n = c.execute(
            "UPDATE core_agent_runs SET created_at = ?1, record_json = ?2 \
             WHERE session_id = ?3 AND run_id = ?4 AND record_json = ?5",
            params![
                h.created_at,
                h.record_json,
                run.session_id,
                run.run_id,
                h.expected_record_json
            ],
        )?;
        expect_one(n, &format!("run header `{}`", run.run_id))?;
    }
    if let Some(r) = &run.run_event {
        c.execute(
            "INSERT INTO core_agent_run_events(session_id, run_id, sequence, event_id, \
             event_type, event_ts, record_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                run.session_id,
                run.run_id,
                r.sequence,
                r.event_id,
                r.event_type,
                r.event_ts,
                r.record_json
            ],
        )?;
    }
    if let Some(m) = run.message.as_ref().filter(|m| m.file.is_none()) {
        insert_message(c, &run.session_id, m)?;
    }
    if let Some(s) = &run.session {
        let n = c.execute(
            "UPDATE session_metadata SET payload_json = ?1, metadata_version = ?2, \
             committed_at = ?3 WHERE session_id = ?4 AND metadata_version = ?5",
            params![
                s.payload_json,
                s.expected_version + 1,
                s.committed_at,
                run.session_id,
                s.expected_version
            ],
        )?;
        expect_one(n, &format!("session `{}`", run.session_id))?;
        // Until v0.1.10 the row also projects the header's status into columns; Maka's
        // store rewrites them with the header.
        if has_column(c, "session_metadata", "status")? {
            let header: serde_json::Value =
                serde_json::from_str(&s.payload_json).unwrap_or_default();
            c.execute(
                "UPDATE session_metadata SET status = ?1, status_updated_at = ?2 \
                 WHERE session_id = ?3",
                params![
                    header["status"].as_str().unwrap_or("active"),
                    header["statusUpdatedAt"].as_i64(),
                    run.session_id
                ],
            )?;
        }
    }
    Ok(())
}

/// Whether `table` has a column `column`.
fn has_column(c: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    let mut stmt = c.prepare_cached("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?;
    stmt.exists(params![table, column])
}

fn insert_message(c: &Connection, session: &str, m: &MessageWrite) -> rusqlite::Result<()> {
    let bytes = m.record_json.as_bytes();
    // Releases before v0.1.11 never chunk a message (they have no chunk tables).
    let chunked = bytes.len() > MESSAGE_CHUNK_BYTES && has_table(c, "session_message_payloads")?;
    c.execute(
        "INSERT INTO session_messages(session_id, sequence, message_id, message_type, \
         message_ts, record_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            session,
            m.sequence,
            m.message_id,
            m.message_type,
            m.message_ts,
            if chunked {
                MESSAGE_CHUNK_MARKER
            } else {
                m.record_json.as_str()
            }
        ],
    )?;
    if !chunked {
        return Ok(());
    }
    c.execute(
        "INSERT INTO session_message_payloads(session_id, sequence, record_bytes, sha256) \
         VALUES (?1, ?2, ?3, ?4)",
        params![
            session,
            m.sequence,
            bytes.len() as i64,
            hex::encode(Sha256::digest(bytes))
        ],
    )?;
    for (i, chunk) in bytes.chunks(MESSAGE_CHUNK_BYTES).enumerate() {
        c.execute(
            "INSERT INTO session_message_chunks(session_id, sequence, chunk_index, data, sha256) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                session,
                m.sequence,
                i as i64,
                chunk,
                hex::encode(Sha256::digest(chunk))
            ],
        )?;
    }
    Ok(())
}
