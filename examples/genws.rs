//! Builds a large Maka workspace database by cloning the sessions of real fixture
//! workspaces with fresh, consistent identities. Dev-only (not a `wsledger` command).
//!
//! ```text
//! cargo run --release --example genws -- --events 1000000 --out /tmp/ws1m/runtime.sqlite
//! cargo run --release --example genws -- --sessions 500 --seed 7 \
//!     --orphan-responses 2 --duplicate-calls 3 --stuck-runs 4 --out /tmp/ws/runtime.sqlite
//! cargo run --release --example genws -- --sessions 100k \
//!     --template fixtures/stuck-running/runtime.sqlite \
//!     --template-session 8a821121-2889-4b96-b5f2-be9583c3a781 --out /tmp/ws/runtime.sqlite
//! ```
//!
//! `--template-session ID` clones only that session of the templates (e.g. a small
//! clean one, so that a workspace of many sessions stays a few GB and every session
//! has the same shape).
//!
//! The real shape (many short sessions and runs, Maka's payloads and tool density):
//! the template is the workspace Maka wrote (`../shared/bench`), without the sessions
//! Maka flags, and only its first sessions are loaded (`benches/scan.rs` does this):
//!
//! ```text
//! genws --template target/tmp/maka-bench/runtime.sqlite --template-limit 200 \
//!     --exclude-session ID... --events 5m --out /tmp/ws5m/runtime.sqlite
//! ```
//!
//! How: the template file (default `fixtures/healthy/runtime.sqlite`) is copied, its
//! session-scoped rows are deleted, and each template session is cloned again and
//! again through SQL into that copy, so the schema, triggers and catalog tables stay
//! exactly Maka's. Every text value of every cloned row is cut once into literal
//! pieces and identity tokens (UUIDs, provider tool-call ids `call_…`/`toolu_…`,
//! operation ids `toolop_<32 hex>`); each clone renders the pieces with fresh tokens.
//! Operation ids are recomputed (`"toolop_" + first 32 hex of
//! sha256(JSON.stringify([invocationId, providerToolCallId]))`), and with them the
//! derived ids (`<op>_call`, `<op>_dispatch`, `<op>_response`, `<op>_prepared`,
//! `<op>_outcome`). Arguments carry no identities, so argument hashes stay valid.
//! Partial-snapshot stream keys are recomputed from the rendered snapshot.
//!
//! Damage on request (each in its own cloned session, ids printed and written to
//! `<out>.gen.json`): `--orphan-responses K` drops the call and dispatch of a
//! completed operation (and its `tool_operations`/journal rows), `--duplicate-calls K`
//! appends a second copy of a function call with a fresh id, `--stuck-runs K` drops a
//! run's terminal event and sets its header back to `running`. `event_seq` and
//! ordinals are renumbered so that nothing else is reported.
//!
//! The copy is built with `synchronous=OFF` and no rollback journal in one
//! transaction, then switched to WAL like Maka's files, closed (which checkpoints and
//! removes the `-wal`) and renamed into place.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, OpenFlags};
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------

pub struct Args {
    templates: Vec<PathBuf>,
    out: PathBuf,
    events: Option<u64>,
    sessions: Option<u64>,
    seed: u64,
    orphan_responses: usize,
    duplicate_calls: usize,
    stuck_runs: usize,
    template_session: Option<String>,
    /// Template sessions never cloned (e.g. the damaged ones of a real workspace).
    exclude_sessions: Vec<String>,
    /// Clone only the first N template sessions (in `session_metadata` order, after
    /// exclusions): a large real workspace as template without loading all of it.
    template_limit: Option<usize>,
    quiet: bool,
}

const USAGE: &str = "usage: genws --out FILE (--events N | --sessions N) [--seed S] \
[--template FILE]... [--template-session ID] [--exclude-session ID]... [--template-limit N] \
[--orphan-responses K] [--duplicate-calls K] [--stuck-runs K] [--quiet]";

impl Args {
    /// Arguments for `events` (or `sessions`) events cloned from the default template.
    pub fn new(out: PathBuf, events: Option<u64>, sessions: Option<u64>, seed: u64) -> Args {
        Args {
            templates: vec![default_template()],
            out,
            events,
            sessions,
            seed,
            orphan_responses: 0,
            duplicate_calls: 0,
            stuck_runs: 0,
            template_session: None,
            exclude_sessions: Vec::new(),
            template_limit: None,
            quiet: true,
        }
    }

    /// Clone the sessions of `template` instead of the default one.
    pub fn template(mut self, template: PathBuf) -> Args {
        self.templates = vec![template];
        self
    }

    /// Inject this damage (see `--orphan-responses`, `--duplicate-calls`, `--stuck-runs`).
    pub fn damage(mut self, orphan_responses: usize, duplicate_calls: usize, stuck: usize) -> Args {
        self.orphan_responses = orphan_responses;
        self.duplicate_calls = duplicate_calls;
        self.stuck_runs = stuck;
        self
    }

    /// Clones the sessions of a workspace Maka wrote (the scan bench's real shape):
    /// the first `limit` of them, leaving out `exclude` (its damaged sessions).
    pub fn real_shape(mut self, template: PathBuf, exclude: Vec<String>, limit: usize) -> Args {
        self.templates = vec![template];
        self.exclude_sessions = exclude;
        self.template_limit = Some(limit);
        self
    }

    /// Clones only session `session` of `template` (for the scale bench).
    pub fn template_session(mut self, template: PathBuf, session: &str) -> Args {
        self.templates = vec![template];
        self.template_session = Some(session.to_owned());
        self
    }
}

fn default_template() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/healthy/runtime.sqlite")
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        templates: Vec::new(),
        out: PathBuf::new(),
        events: None,
        sessions: None,
        seed: 1,
        orphan_responses: 0,
        duplicate_calls: 0,
        stuck_runs: 0,
        template_session: None,
        exclude_sessions: Vec::new(),
        template_limit: None,
        quiet: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || {
            it.next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--template" => a.templates.push(PathBuf::from(val()?)),
            "--out" => a.out = PathBuf::from(val()?),
            "--events" => a.events = Some(parse_count(&val()?)?),
            "--sessions" => a.sessions = Some(parse_count(&val()?)?),
            "--seed" => a.seed = val()?.parse()?,
            "--orphan-responses" => a.orphan_responses = val()?.parse()?,
            "--duplicate-calls" => a.duplicate_calls = val()?.parse()?,
            "--stuck-runs" => a.stuck_runs = val()?.parse()?,
            "--template-session" => a.template_session = Some(val()?),
            "--exclude-session" => a.exclude_sessions.push(val()?),
            "--template-limit" => a.template_limit = Some(val()?.parse()?),
            "--quiet" => a.quiet = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    if a.out.as_os_str().is_empty() {
        bail!("--out is required\n{USAGE}");
    }
    if a.events.is_some() == a.sessions.is_some() {
        bail!("give exactly one of --events and --sessions\n{USAGE}");
    }
    if a.templates.is_empty() {
        a.templates.push(default_template());
    }
    Ok(a)
}

/// `1000000`, `1_000_000`, `200k`, `1m`.
fn parse_count(s: &str) -> Result<u64> {
    let s = s.replace('_', "").to_ascii_lowercase();
    let (num, mul) = match s.strip_suffix('k') {
        Some(n) => (n.to_owned(), 1_000),
        None => match s.strip_suffix('m') {
            Some(n) => (n.to_owned(), 1_000_000),
            None => (s.clone(), 1),
        },
    };
    Ok(num
        .parse::<u64>()
        .with_context(|| format!("not a count: {s}"))?
        * mul)
}

// ---------------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn uuid(&mut self) -> String {
        let a = self.next();
        let b = self.next();
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&a.to_le_bytes());
        bytes[8..].copy_from_slice(&b.to_le_bytes());
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let h = hex::encode(bytes);
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }

    /// Random characters of the same classes as `like` (hex stays hex).
    fn alnum_like(&mut self, like: &str) -> String {
        const HEX: &[u8] = b"0123456789abcdef";
        const ALNUM: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let all_hex = like.bytes().all(|b| HEX.contains(&b));
        like.bytes()
            .map(|_| {
                let set = if all_hex { HEX } else { ALNUM };
                set[self.below(set.len())] as char
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------
// Identity tokens inside text
// ---------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum TokKind {
    Uuid,
    /// A provider tool-call id: prefix (`call_`, `toolu_`) kept, the rest fresh.
    CallId {
        prefix: String,
    },
    /// `toolop_<32 hex>`: recomputed from the clone's invocation and call ids.
    ToolOp,
    /// A partial-snapshot stream key (64 hex), recomputed from the snapshot row.
    StreamKey,
}

#[derive(Clone, Debug)]
enum Seg {
    Lit(String),
    Tok(usize),
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

fn is_uuid_at(b: &[u8], i: usize) -> bool {
    if i + 36 > b.len() {
        return false;
    }
    (0..36).all(|k| match k {
        8 | 13 | 18 | 23 => b[i + k] == b'-',
        _ => is_hex(b[i + k]),
    })
}

fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// Finds identity tokens in `text`: `(start, end, kind)`.
fn find_tokens(text: &str, stream_keys: &HashSet<String>) -> Vec<(usize, usize, TokKind)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !word_byte(b[i - 1]);
        if boundary && is_hex(b[i]) && is_uuid_at(b, i) && (i + 36 == b.len() || !is_hex(b[i + 36]))
        {
            out.push((i, i + 36, TokKind::Uuid));
            i += 36;
            continue;
        }
        if boundary && b[i..].starts_with(b"toolop_") {
            let h = i + 7;
            if h + 32 <= b.len() && b[h..h + 32].iter().all(|&c| is_hex(c)) {
                out.push((i, h + 32, TokKind::ToolOp));
                i = h + 32;
                continue;
            }
        }
        if boundary {
            for prefix in ["call_", "toolu_"] {
                if b[i..].starts_with(prefix.as_bytes()) {
                    let s = i + prefix.len();
                    let mut e = s;
                    while e < b.len() && b[e].is_ascii_alphanumeric() {
                        e += 1;
                    }
                    if e - s >= 12 {
                        out.push((
                            i,
                            e,
                            TokKind::CallId {
                                prefix: prefix.to_owned(),
                            },
                        ));
                        i = e;
                        break;
                    }
                }
            }
            if out.last().is_some_and(|t| t.1 == i) {
                continue;
            }
        }
        if boundary && i + 64 <= b.len() && b[i..i + 64].iter().all(|&c| is_hex(c)) {
            let cand = &text[i..i + 64];
            if stream_keys.contains(cand) {
                out.push((i, i + 64, TokKind::StreamKey));
                i += 64;
                continue;
            }
        }
        i += 1;
    }
    out
}

// ---------------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Blob(Vec<u8>),
    Text(Vec<Seg>),
}

struct TableInfo {
    name: String,
    /// Columns inserted (the AUTOINCREMENT key is left to SQLite).
    columns: Vec<String>,
    insert_sql: String,
}

struct SessionTpl {
    /// The template's session id.
    id: String,
    /// Tokens of this session (old text, kind).
    tokens: Vec<(String, TokKind)>,
    /// Rows per table index, in template order.
    rows: Vec<Vec<Vec<Cell>>>,
    events: u64,
    /// toolop token index -> (invocation token index, call token index).
    ops: HashMap<usize, (usize, usize)>,
    /// stream-key token index -> snapshot row index in `runtime_partial_snapshots`.
    stream_keys: HashMap<usize, usize>,
}

struct Template {
    tables: Vec<TableInfo>,
    sessions: Vec<SessionTpl>,
}

/// Tables whose rows are workspace-wide, never cloned.
const GLOBAL_TABLES: &[&str] = &[
    "sqlite_sequence",
    "runtime_capabilities",
    "operational_schema_migrations",
    "session_metadata_schema",
    "session_catalog_state",
    "usage_pricing_authority",
    "runtime_storage_root_binding",
    "runtime_workspace_epochs",
    "runtime_workspace_versions",
    "runtime_workspace_heads",
];

/// Insert order (parents first); other session tables follow in name order.
const ORDER: &[&str] = &[
    "session_metadata",
    "session_catalog_projection",
    "core_agent_runs",
    "core_agent_run_events",
    "core_agent_run_projections",
    "runtime_events",
    "runtime_session_event_ordinals",
    "tool_operations",
    "tool_journal_events",
    "runtime_partial_snapshots",
    "runtime_partial_segments",
    "session_messages",
];

fn q(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Which template sessions are loaded (see `Args::exclude_sessions`, `template_limit`).
struct Pick<'a> {
    exclude: &'a [String],
    limit: Option<usize>,
}

fn load_template(path: &Path, pick: &Pick<'_>) -> Result<(Template, Vec<String>)> {
    let conn = Connection::open_with_flags(
        format!("file:{}?mode=ro&immutable=1", path.display()),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .with_context(|| format!("opening template {}", path.display()))?;
    let mut names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type='table' ORDER BY name")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    names.retain(|n| !n.starts_with("sqlite_") || n == "sqlite_sequence");
    // Which session owns each invocation and snapshot.
    let mut inv_session: HashMap<String, String> = HashMap::new();
    {
        let mut st =
            conn.prepare("SELECT DISTINCT invocation_id, session_id FROM runtime_events")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            inv_session.insert(r.get(0)?, r.get(1)?);
        }
    }
    let mut stream_session: HashMap<String, String> = HashMap::new();
    let mut stream_keys: HashSet<String> = HashSet::new();
    if names.iter().any(|n| n == "runtime_partial_snapshots") {
        let mut st =
            conn.prepare("SELECT stream_key, session_id FROM runtime_partial_snapshots")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let k: String = r.get(0)?;
            stream_keys.insert(k.clone());
            stream_session.insert(k, r.get(1)?);
        }
    }
    let mut session_ids: Vec<String> = conn
        .prepare("SELECT session_id FROM session_metadata ORDER BY rowid")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let known: HashSet<String> = session_ids.iter().cloned().collect();
    for s in inv_session.values() {
        if !known.contains(s) && !session_ids.contains(s) {
            session_ids.push(s.clone());
        }
    }
    // Rows of the sessions left out are skipped (not an error, unlike unknown ones).
    let all: HashSet<String> = session_ids.iter().cloned().collect();
    session_ids.retain(|s| !pick.exclude.contains(s));
    if let Some(n) = pick.limit {
        session_ids.truncate(n);
    }
    let session_index: HashMap<String, usize> = session_ids
        .iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), i))
        .collect();

    let mut tables = Vec::new();
    let mut ignored = Vec::new();
    let mut per_session: Vec<Vec<Vec<Vec<Value>>>> = vec![Vec::new(); session_ids.len()];
    let mut ordered: Vec<String> = ORDER
        .iter()
        .filter(|t| names.iter().any(|n| n == *t))
        .map(|t| (*t).to_owned())
        .collect();
    for n in &names {
        if !ordered.contains(n) {
            ordered.push(n.clone());
        }
    }
    for name in ordered {
        let count: i64 =
            conn.query_row(&format!("SELECT count(*) FROM {}", q(&name)), [], |r| {
                r.get(0)
            })?;
        if count == 0 {
            continue;
        }
        if GLOBAL_TABLES.contains(&name.as_str()) {
            continue;
        }
        let cols: Vec<(String, String, i64)> = conn
            .prepare(&format!("PRAGMA table_info({})", q(&name)))?
            .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(5)?)))?
            .collect::<Result<_, _>>()?;
        let owner_col = if cols.iter().any(|c| c.0 == "session_id") {
            "session_id"
        } else if cols.iter().any(|c| c.0 == "invocation_id") {
            "invocation_id"
        } else if name == "runtime_partial_segments" {
            "stream_key"
        } else {
            ignored.push(name.clone());
            continue;
        };
        // An INTEGER PRIMARY KEY that SQLite assigns (journal_seq) is left out.
        let autoinc = |c: &(String, String, i64)| {
            c.2 == 1 && c.1.eq_ignore_ascii_case("INTEGER") && name == "tool_journal_events"
        };
        let columns: Vec<String> = cols
            .iter()
            .filter(|c| !autoinc(c))
            .map(|c| c.0.clone())
            .collect();
        let or_replace = if name == "session_catalog_projection" {
            " OR REPLACE"
        } else {
            ""
        };
        let insert_sql = format!(
            "INSERT{or_replace} INTO {}({}) VALUES ({})",
            q(&name),
            columns.iter().map(|c| q(c)).collect::<Vec<_>>().join(","),
            vec!["?"; columns.len()].join(",")
        );
        let order_by = if cols.iter().any(|c| c.0 == "journal_seq") {
            "journal_seq"
        } else if name == "runtime_session_event_ordinals" {
            "session_id, ordinal"
        } else {
            "rowid"
        };
        let order_by = if order_by == "rowid" && is_without_rowid(&conn, &name)? {
            "1"
        } else {
            order_by
        };
        let sql = format!(
            "SELECT {}, {} FROM {} ORDER BY {order_by}",
            columns.iter().map(|c| q(c)).collect::<Vec<_>>().join(","),
            q(owner_col),
            q(&name)
        );
        let t = tables.len();
        tables.push(TableInfo {
            name: name.clone(),
            columns: columns.clone(),
            insert_sql,
        });
        for s in per_session.iter_mut() {
            s.push(Vec::new());
        }
        let mut st = conn.prepare(&sql)?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let mut vals = Vec::with_capacity(columns.len());
            for i in 0..columns.len() {
                vals.push(r.get::<_, Value>(i)?);
            }
            let owner: String = r.get(columns.len())?;
            let session = match owner_col {
                "session_id" => owner,
                "invocation_id" => inv_session
                    .get(&owner)
                    .cloned()
                    .with_context(|| format!("{name}: invocation {owner} has no events"))?,
                _ => stream_session
                    .get(&owner)
                    .cloned()
                    .with_context(|| format!("{name}: stream {owner} has no snapshot"))?,
            };
            let Some(&si) = session_index.get(&session) else {
                if all.contains(&session) {
                    continue;
                }
                bail!("{name}: row of unknown session {session}");
            };
            per_session[si][t].push(vals);
        }
    }

    // Cut text into literal pieces and tokens, per session.
    let mut sessions = Vec::new();
    let ev_t = tables.iter().position(|t| t.name == "runtime_events");
    let snap_t = tables
        .iter()
        .position(|t| t.name == "runtime_partial_snapshots");
    for (rows_by_table, id) in per_session.into_iter().zip(&session_ids) {
        let mut tokens: Vec<(String, TokKind)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut rows: Vec<Vec<Vec<Cell>>> = Vec::new();
        for table_rows in rows_by_table {
            let mut out_rows = Vec::new();
            for vals in table_rows {
                let mut cells = Vec::new();
                for v in vals {
                    cells.push(match v {
                        Value::Null => Cell::Null,
                        Value::Integer(n) => Cell::Int(n),
                        Value::Real(f) => Cell::Real(f),
                        Value::Blob(b) => Cell::Blob(b),
                        Value::Text(s) => {
                            let mut segs = Vec::new();
                            let mut at = 0;
                            for (a, e, kind) in find_tokens(&s, &stream_keys) {
                                if a > at {
                                    segs.push(Seg::Lit(s[at..a].to_owned()));
                                }
                                let tok = &s[a..e];
                                let ti = *index.entry(tok.to_owned()).or_insert_with(|| {
                                    tokens.push((tok.to_owned(), kind));
                                    tokens.len() - 1
                                });
                                segs.push(Seg::Tok(ti));
                                at = e;
                            }
                            if at < s.len() {
                                segs.push(Seg::Lit(s[at..].to_owned()));
                            }
                            Cell::Text(segs)
                        }
                    });
                }
                out_rows.push(cells);
            }
            rows.push(out_rows);
        }
        let events = ev_t.map_or(0, |t| rows[t].len() as u64);
        // Operation ids: find (invocation, call id) pairs whose hash is a toolop token.
        let mut ops = HashMap::new();
        let mut inv_tokens = Vec::new();
        let mut call_tokens = Vec::new();
        for (i, (_, k)) in tokens.iter().enumerate() {
            match k {
                TokKind::Uuid => inv_tokens.push(i),
                TokKind::CallId { .. } => call_tokens.push(i),
                _ => {}
            }
        }
        if let Some(t) = ev_t {
            let inv_col = tables[t].columns.iter().position(|c| c == "invocation_id");
            let invs: HashSet<usize> = rows[t]
                .iter()
                .filter_map(|r| match inv_col.map(|c| &r[c]) {
                    Some(Cell::Text(segs)) if segs.len() == 1 => match segs[0] {
                        Seg::Tok(i) => Some(i),
                        Seg::Lit(_) => None,
                    },
                    _ => None,
                })
                .collect();
            inv_tokens.retain(|i| invs.contains(i));
        }
        let mut by_hash: HashMap<String, (usize, usize)> = HashMap::new();
        for &inv in &inv_tokens {
            for &call in &call_tokens {
                by_hash.insert(toolop_id(&tokens[inv].0, &tokens[call].0), (inv, call));
            }
        }
        for (i, (old, k)) in tokens.iter().enumerate() {
            if *k == TokKind::ToolOp {
                match by_hash.get(old) {
                    Some(&pair) => {
                        ops.insert(i, pair);
                    }
                    None => eprintln!(
                        "genws: warning: {old} is not the hash of any (invocation, call id) of its session; it gets a random id"
                    ),
                }
            }
        }
        let mut stream_keys_map = HashMap::new();
        if let Some(t) = snap_t {
            for (ri, r) in rows[t].iter().enumerate() {
                if let Some(Cell::Text(segs)) = r.first() {
                    if let [Seg::Tok(ti)] = segs.as_slice() {
                        stream_keys_map.insert(*ti, ri);
                    }
                }
            }
        }
        sessions.push(SessionTpl {
            id: id.clone(),
            tokens,
            rows,
            events,
            ops,
            stream_keys: stream_keys_map,
        });
    }
    Ok((Template { tables, sessions }, ignored))
}

fn is_without_rowid(conn: &Connection, table: &str) -> Result<bool> {
    let sql: String = conn.query_row(
        "SELECT sql FROM sqlite_schema WHERE type='table' AND name=?1",
        [table],
        |r| r.get(0),
    )?;
    Ok(sql.to_ascii_uppercase().contains("WITHOUT ROWID"))
}

fn toolop_id(invocation: &str, call: &str) -> String {
    let preimage = serde_json::to_string(&[invocation, call]).expect("strings serialize");
    let digest = Sha256::digest(preimage.as_bytes());
    format!("toolop_{}", &hex::encode(digest)[..32])
}

/// Maka's stream key: sha256 hex of JSON.stringify([identity, sessionId, invocationId,
/// runId, turnId, branch ?? null, role, author]).
fn stream_key_of(payload: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    let refs = v.get("refs");
    let identity = match (
        v.get("content")
            .and_then(|c| c.get("kind"))
            .and_then(|k| k.as_str()),
        refs.and_then(|r| r.get("providerEventId"))
            .and_then(|x| x.as_str()),
        refs.and_then(|r| r.get("toolCallId"))
            .and_then(|x| x.as_str()),
    ) {
        (Some(kind), Some(p), _) => format!("{kind}:provider:{p}"),
        (None, _, Some(t)) => format!("tool:call:{t}"),
        _ => return None,
    };
    let arr = serde_json::json!([
        identity,
        v.get("sessionId")?,
        v.get("invocationId")?,
        v.get("runId")?,
        v.get("turnId")?,
        v.get("branch").cloned().unwrap_or(serde_json::Value::Null),
        v.get("role")?,
        v.get("author")?,
    ]);
    Some(hex::encode(Sha256::digest(arr.to_string().as_bytes())))
}

// ---------------------------------------------------------------------------------
// Cloning
// ---------------------------------------------------------------------------------

/// One rendered clone: rows per table.
struct Clone {
    rows: Vec<Vec<Vec<Value>>>,
}

fn render(tpl: &Template, s: &SessionTpl, rng: &mut Rng) -> Clone {
    let mut fresh: Vec<String> = Vec::with_capacity(s.tokens.len());
    for (old, kind) in &s.tokens {
        fresh.push(match kind {
            TokKind::Uuid => rng.uuid(),
            TokKind::CallId { prefix } => {
                format!("{prefix}{}", rng.alnum_like(&old[prefix.len()..]))
            }
            // Filled in below, once invocation and call ids are known.
            TokKind::ToolOp => format!("toolop_{}", rng.alnum_like(&old[7..])),
            TokKind::StreamKey => rng.alnum_like(old),
        });
    }
    for (&op, &(inv, call)) in &s.ops {
        fresh[op] = toolop_id(&fresh[inv], &fresh[call]);
    }
    let text = |segs: &[Seg], fresh: &[String]| -> String {
        let mut out = String::new();
        for seg in segs {
            match seg {
                Seg::Lit(l) => out.push_str(l),
                Seg::Tok(i) => out.push_str(&fresh[*i]),
            }
        }
        out
    };
    // Stream keys depend on the rendered snapshot payload.
    if !s.stream_keys.is_empty() {
        let t = tpl
            .tables
            .iter()
            .position(|t| t.name == "runtime_partial_snapshots")
            .expect("snapshot table");
        let pcol = tpl.tables[t]
            .columns
            .iter()
            .position(|c| c == "payload_json")
            .expect("payload column");
        for (&tok, &ri) in &s.stream_keys {
            if let Cell::Text(segs) = &s.rows[t][ri][pcol] {
                if let Some(k) = stream_key_of(&text(segs, &fresh)) {
                    fresh[tok] = k;
                }
            }
        }
    }
    let rows = s
        .rows
        .iter()
        .map(|table_rows| {
            table_rows
                .iter()
                .map(|cells| {
                    cells
                        .iter()
                        .map(|c| match c {
                            Cell::Null => Value::Null,
                            Cell::Int(n) => Value::Integer(*n),
                            Cell::Real(f) => Value::Real(*f),
                            Cell::Blob(b) => Value::Blob(b.clone()),
                            Cell::Text(segs) => Value::Text(text(segs, &fresh)),
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    Clone { rows }
}

/// Column access by name for the damage helpers.
struct Cols<'a> {
    tpl: &'a Template,
}

impl Cols<'_> {
    fn table(&self, name: &str) -> Option<usize> {
        self.tpl.tables.iter().position(|t| t.name == name)
    }
    fn col(&self, t: usize, name: &str) -> usize {
        self.tpl.tables[t]
            .columns
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("{}.{name} is missing", self.tpl.tables[t].name))
    }
}

fn text_of(v: &Value) -> &str {
    match v {
        Value::Text(s) => s,
        _ => "",
    }
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Integer(n) => *n,
        _ => 0,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Damage {
    OrphanResponse,
    DuplicateCall,
    StuckRun,
}

impl Damage {
    fn as_str(self) -> &'static str {
        match self {
            Damage::OrphanResponse => "orphan_response",
            Damage::DuplicateCall => "duplicate_call",
            Damage::StuckRun => "stuck_run",
        }
    }
}

/// Renumbers `event_seq` per invocation (in current seq order) and ordinals per
/// session (in current ordinal order), after rows were removed or inserted.
fn renumber(c: &mut Clone, cols: &Cols<'_>) {
    let ev = cols.table("runtime_events").expect("runtime_events");
    let (inv, seq) = (cols.col(ev, "invocation_id"), cols.col(ev, "event_seq"));
    let mut order: Vec<usize> = (0..c.rows[ev].len()).collect();
    // Stable: inserted rows carry the seq of the row they follow plus a half step.
    order.sort_by(|&a, &b| {
        let ra = &c.rows[ev][a];
        let rb = &c.rows[ev][b];
        (text_of(&ra[inv]), int_of(&ra[seq])).cmp(&(text_of(&rb[inv]), int_of(&rb[seq])))
    });
    let mut last_inv = String::new();
    let mut n = 0;
    for i in order {
        let row = &mut c.rows[ev][i];
        if text_of(&row[inv]) != last_inv {
            last_inv = text_of(&row[inv]).to_owned();
            n = 0;
        }
        n += 1;
        row[seq] = Value::Integer(n);
    }
    if let Some(o) = cols.table("runtime_session_event_ordinals") {
        let ord = cols.col(o, "ordinal");
        c.rows[o].sort_by_key(|r| int_of(&r[ord]));
        for (i, r) in c.rows[o].iter_mut().enumerate() {
            r[ord] = Value::Integer(i as i64 + 1);
        }
    }
}

/// Applies one damage to a clone; returns a description (ids), or None when the clone
/// has nothing to damage that way.
fn apply_damage(c: &mut Clone, cols: &Cols<'_>, d: Damage, rng: &mut Rng) -> Option<String> {
    let ev = cols.table("runtime_events")?;
    let (eid, run, seq, kind, payload) = (
        cols.col(ev, "event_id"),
        cols.col(ev, "run_id"),
        cols.col(ev, "event_seq"),
        cols.col(ev, "event_kind"),
        cols.col(ev, "payload_json"),
    );
    let ord_t = cols.table("runtime_session_event_ordinals");
    match d {
        Damage::StuckRun => {
            // Runs whose last event is terminal.
            let mut last: BTreeMap<String, (i64, usize)> = BTreeMap::new();
            for (i, r) in c.rows[ev].iter().enumerate() {
                let e = last.entry(text_of(&r[run]).to_owned()).or_insert((0, i));
                if int_of(&r[seq]) >= e.0 {
                    *e = (int_of(&r[seq]), i);
                }
            }
            let candidates: Vec<(String, usize)> = last
                .into_iter()
                .filter(|(_, (_, i))| {
                    let p = text_of(&c.rows[ev][*i][payload]);
                    matches!(
                        text_of(&c.rows[ev][*i][kind]),
                        "completed" | "failed" | "aborted" | "cancelled" | "error"
                    ) || p.contains("\"endInvocation\":true")
                })
                .map(|(r, (_, i))| (r, i))
                .collect();
            if candidates.is_empty() {
                return None;
            }
            let (run_id, i) = candidates[rng.below(candidates.len())].clone();
            let event_id = text_of(&c.rows[ev][i][eid]).to_owned();
            c.rows[ev].remove(i);
            if let Some(o) = ord_t {
                let oe = cols.col(o, "event_id");
                c.rows[o].retain(|r| text_of(&r[oe]) != event_id);
            }
            // Header back to running, as a crash leaves it.
            let h = cols.table("core_agent_runs")?;
            let (hr, hj) = (cols.col(h, "run_id"), cols.col(h, "record_json"));
            for r in c.rows[h].iter_mut().filter(|r| text_of(&r[hr]) == run_id) {
                let mut v: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(text_of(&r[hj])).ok()?;
                v.insert("status".into(), "running".into());
                for k in [
                    "completedAt",
                    "failureClass",
                    "abortSource",
                    "failureMessage",
                ] {
                    v.remove(k);
                }
                r[hj] = Value::Text(serde_json::to_string(&v).ok()?);
            }
            // The run's operational terminal event goes too (it is the last one).
            if let Some(re) = cols.table("core_agent_run_events") {
                let (rr, rs, rt) = (
                    cols.col(re, "run_id"),
                    cols.col(re, "sequence"),
                    cols.col(re, "event_type"),
                );
                let max = c.rows[re]
                    .iter()
                    .filter(|r| text_of(&r[rr]) == run_id)
                    .map(|r| int_of(&r[rs]))
                    .max();
                c.rows[re].retain(|r| {
                    !(text_of(&r[rr]) == run_id
                        && Some(int_of(&r[rs])) == max
                        && matches!(
                            text_of(&r[rt]),
                            "run_completed" | "run_failed" | "run_aborted" | "run_cancelled"
                        ))
                });
            }
            renumber(c, cols);
            Some(format!("run {run_id} (terminal event {event_id} dropped)"))
        }
        Damage::OrphanResponse | Damage::DuplicateCall => {
            let ops_t = cols.table("tool_operations")?;
            let (oid, ocall, oresp) = (
                cols.col(ops_t, "operation_id"),
                cols.col(ops_t, "call_event_id"),
                cols.col(ops_t, "result_event_id"),
            );
            let candidates: Vec<usize> = (0..c.rows[ops_t].len())
                .filter(|&i| !matches!(c.rows[ops_t][i][oresp], Value::Null))
                .collect();
            if candidates.is_empty() {
                return None;
            }
            let oi = candidates[rng.below(candidates.len())];
            let op_id = text_of(&c.rows[ops_t][oi][oid]).to_owned();
            let call_event = text_of(&c.rows[ops_t][oi][ocall]).to_owned();
            let call_row = c.rows[ev]
                .iter()
                .position(|r| text_of(&r[eid]) == call_event)?;
            if d == Damage::DuplicateCall {
                let mut dup = c.rows[ev][call_row].clone();
                let new_id = rng.uuid();
                let p = text_of(&dup[payload]).replace(
                    &format!("\"id\":\"{call_event}\""),
                    &format!("\"id\":\"{new_id}\""),
                );
                dup[eid] = Value::Text(new_id.clone());
                dup[payload] = Value::Text(p);
                // Placed right after the original call: shift later seqs of its
                // invocation up by one first.
                let inv = cols.col(ev, "invocation_id");
                let (inv_id, s0) = (
                    text_of(&c.rows[ev][call_row][inv]).to_owned(),
                    int_of(&c.rows[ev][call_row][seq]),
                );
                for r in c.rows[ev].iter_mut() {
                    if text_of(&r[inv]) == inv_id && int_of(&r[seq]) > s0 {
                        r[seq] = Value::Integer(int_of(&r[seq]) + 1);
                    }
                }
                dup[seq] = Value::Integer(s0 + 1);
                c.rows[ev].insert(call_row + 1, dup);
                if let Some(o) = ord_t {
                    let (oe, on) = (cols.col(o, "event_id"), cols.col(o, "ordinal"));
                    let pos = c.rows[o]
                        .iter()
                        .position(|r| text_of(&r[oe]) == call_event)?;
                    let base = int_of(&c.rows[o][pos][on]);
                    for r in c.rows[o].iter_mut() {
                        if int_of(&r[on]) > base {
                            r[on] = Value::Integer(int_of(&r[on]) + 1);
                        }
                    }
                    let mut row = c.rows[o][pos].clone();
                    row[oe] = Value::Text(new_id.clone());
                    row[on] = Value::Integer(base + 1);
                    c.rows[o].insert(pos + 1, row);
                }
                renumber(c, cols);
                return Some(format!(
                    "operation {op_id}: second call {new_id} after {call_event}"
                ));
            }
            // Orphan response: the call and the dispatch are gone, and with them the
            // operation's projection rows.
            let dispatch_col = cols.col(ops_t, "dispatch_event_id");
            let dispatch_event = text_of(&c.rows[ops_t][oi][dispatch_col]).to_owned();
            let gone = [call_event.clone(), dispatch_event.clone()];
            c.rows[ev].retain(|r| !gone.iter().any(|g| g == text_of(&r[eid])));
            if let Some(o) = ord_t {
                let oe = cols.col(o, "event_id");
                c.rows[o].retain(|r| !gone.iter().any(|g| g == text_of(&r[oe])));
            }
            c.rows[ops_t].remove(oi);
            if let Some(j) = cols.table("tool_journal_events") {
                let jo = cols.col(j, "operation_id");
                c.rows[j].retain(|r| text_of(&r[jo]) != op_id);
            }
            renumber(c, cols);
            Some(format!(
                "operation {op_id}: call {call_event} and dispatch {dispatch_event} dropped"
            ))
        }
    }
}

// ---------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------

fn main() -> Result<()> {
    run(&parse_args()?).map(|_| ())
}

/// Generates the workspace; returns the summary also written to `<out>.gen.json`.
pub fn run(args: &Args) -> Result<serde_json::Value> {
    let started = Instant::now();
    let mut templates = Vec::new();
    for path in &args.templates {
        let pick = Pick {
            exclude: &args.exclude_sessions,
            limit: args.template_limit,
        };
        let (t, ignored) = load_template(path, &pick)?;
        if !ignored.is_empty() && !args.quiet {
            eprintln!(
                "genws: {}: rows of {} kept as they are (not session-scoped)",
                path.display(),
                ignored.join(", ")
            );
        }
        if t.sessions.is_empty() {
            bail!("{} has no sessions", path.display());
        }
        templates.push(t);
    }
    // All templates must share one schema (they are Maka files of one version).
    let base = &templates[0];
    for t in &templates[1..] {
        let a: Vec<&str> = base.tables.iter().map(|x| x.insert_sql.as_str()).collect();
        let b: Vec<&str> = t.tables.iter().map(|x| x.insert_sql.as_str()).collect();
        if a != b {
            bail!("templates differ in the tables they fill; use one template at a time");
        }
    }
    let sources: Vec<(usize, usize)> = templates
        .iter()
        .enumerate()
        .flat_map(|(ti, t)| (0..t.sessions.len()).map(move |si| (ti, si)))
        .filter(|&(ti, si)| {
            args.template_session
                .as_ref()
                .is_none_or(|id| templates[ti].sessions[si].id == *id)
        })
        .collect();
    if sources.is_empty() {
        bail!(
            "no template has session {}",
            args.template_session.as_deref().unwrap_or_default()
        );
    }

    // How many clones.
    let mut plan: Vec<(usize, usize)> = Vec::new();
    let mut planned_events = 0u64;
    loop {
        let done = match (args.events, args.sessions) {
            (Some(n), _) => planned_events >= n,
            (_, Some(n)) => plan.len() as u64 >= n,
            _ => unreachable!(),
        };
        if done {
            break;
        }
        let src = sources[plan.len() % sources.len()];
        planned_events += templates[src.0].sessions[src.1].events;
        plan.push(src);
    }
    let damages: Vec<Damage> = std::iter::repeat_n(Damage::OrphanResponse, args.orphan_responses)
        .chain(std::iter::repeat_n(
            Damage::DuplicateCall,
            args.duplicate_calls,
        ))
        .chain(std::iter::repeat_n(Damage::StuckRun, args.stuck_runs))
        .collect();
    if damages.len() > plan.len() {
        bail!(
            "{} damages asked but only {} sessions generated",
            damages.len(),
            plan.len()
        );
    }
    let mut rng = Rng(args.seed ^ 0x05EE_D0FC_10E5);
    // Distinct clones for the damages, chosen by the seed.
    let mut targets: HashMap<usize, Damage> = HashMap::new();
    for d in &damages {
        loop {
            let k = rng.below(plan.len());
            if let std::collections::hash_map::Entry::Vacant(e) = targets.entry(k) {
                e.insert(*d);
                break;
            }
        }
    }

    // Build in a temporary copy beside the output.
    if let Some(dir) = args.out.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    let tmp = args.out.with_extension("genws-tmp");
    let _ = std::fs::remove_file(&tmp);
    std::fs::copy(&args.templates[0], &tmp)
        .with_context(|| format!("copying template to {}", tmp.display()))?;
    let mut conn = Connection::open(&tmp)?;
    conn.execute_batch(
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-1048576; \
         PRAGMA temp_store=MEMORY; PRAGMA foreign_keys=OFF;",
    )?;
    let tx = conn.transaction()?;
    // The template's own sessions go: every clone is fresh.
    for t in base.tables.iter().rev() {
        tx.execute(&format!("DELETE FROM {}", q(&t.name)), [])?;
    }
    let mut report: Vec<(Damage, String)> = Vec::new();
    let mut events = 0u64;
    let mut runs = 0u64;
    {
        let mut stmts = Vec::new();
        for t in &base.tables {
            stmts.push(tx.prepare(&t.insert_sql)?);
        }
        let cols = Cols { tpl: base };
        let ev_t = cols.table("runtime_events");
        let run_t = cols.table("core_agent_runs");
        let mut last_print = Instant::now();
        for (k, &(ti, si)) in plan.iter().enumerate() {
            let tpl = &templates[ti];
            let mut c = render(tpl, &tpl.sessions[si], &mut rng);
            if let Some(&d) = targets.get(&k) {
                let cols = Cols { tpl };
                match apply_damage(&mut c, &cols, d, &mut rng) {
                    Some(what) => report.push((d, what)),
                    None => bail!(
                        "clone {k} (template session {si}) has nothing to damage as {}; try another --seed",
                        d.as_str()
                    ),
                }
            }
            for (t, rows) in c.rows.iter().enumerate() {
                for r in rows {
                    stmts[t].execute(params_from_iter(r.iter()))?;
                }
            }
            events += ev_t.map_or(0, |t| c.rows[t].len() as u64);
            runs += run_t.map_or(0, |t| c.rows[t].len() as u64);
            if !args.quiet && last_print.elapsed().as_secs() >= 5 {
                eprintln!(
                    "genws: {} sessions, {events} events, {:.0} s",
                    k + 1,
                    started.elapsed().as_secs_f64()
                );
                last_print = Instant::now();
            }
        }
    }
    tx.commit()?;
    // Finalize like Maka's files: WAL, checkpointed and closed.
    conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;")?;
    conn.close().map_err(|(_, e)| e)?;
    for suffix in ["-wal", "-shm"] {
        let mut p = args.out.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    std::fs::rename(&tmp, &args.out)?;
    let size = std::fs::metadata(&args.out)?.len();
    let secs = started.elapsed().as_secs_f64();
    let summary = serde_json::json!({
        "generator": "genws",
        "templates": args.templates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "seed": args.seed,
        "template_session": args.template_session,
        "exclude_sessions": args.exclude_sessions,
        "template_limit": args.template_limit,
        "asked": {"events": args.events, "sessions": args.sessions,
                  "orphan_responses": args.orphan_responses,
                  "duplicate_calls": args.duplicate_calls, "stuck_runs": args.stuck_runs},
        "sessions": plan.len(),
        "runs": runs,
        "events": events,
        "bytes": size,
        "seconds": secs,
        "damage": report.iter().map(|(d, w)| serde_json::json!({"kind": d.as_str(), "what": w})).collect::<Vec<_>>(),
    });
    let mut side = args.out.clone().into_os_string();
    side.push(".gen.json");
    std::fs::write(
        PathBuf::from(side),
        serde_json::to_string_pretty(&summary)? + "\n",
    )?;
    if !args.quiet {
        for (d, w) in &report {
            eprintln!("genws: damage {}: {w}", d.as_str());
        }
        eprintln!(
            "genws: wrote {}: {} sessions, {runs} runs, {events} events, {:.1} MB in {secs:.1} s",
            args.out.display(),
            plan.len(),
            size as f64 / 1e6
        );
    }
    Ok(summary)
}
