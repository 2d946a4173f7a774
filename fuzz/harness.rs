//! The bodies of the fuzz targets, shared by `fuzz/fuzz_targets/*.rs` and by
//! `tests/fuzz_regressions.rs`, which runs every committed seed and every saved crash
//! through them on each `cargo test`. Each function panics only on a bug: a panic in
//! the code under test, or a broken invariant asserted here.

#![allow(dead_code)]

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use wsledger::args_hash::{canonical_tool_args_hash, hash_as_written, identity_preimage};
use wsledger::bundle::Bundle;
use wsledger::db::{
    DbError, EventRow, EventRowRef, HeaderRow, JournalRow, OperationRow, SchemaFacts,
    StoredOperationKey,
};
use wsledger::event::{
    check_ordinary, decode_event_text, decode_event_text_exact, decode_event_text_for_batch,
    decode_event_text_for_walk, encode_canonical, event_kind, Content, RuntimeEvent,
};
use wsledger::json::{parse, JsStr, Json};
use wsledger::ledger::scanner::scan_tool_ledger;
use wsledger::ledger::terminal::{
    classify_terminal_ledger, terminal_verdict, RunHeaderView, RunStatus, TerminalKind,
};
use wsledger::replay::{replay as replay_rows, SessionRows};
use wsledger::report::replay::{render_replay, ReplayFormat};
use wsledger::report::scan::render_scan;
use wsledger::report::{Format, RenderOpts};
use wsledger::scan::{decode_row, ScanStore, Tables, Walker};

/// Bytes as the database layer reads a TEXT column (not UTF-8: replaced).
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// The scan's in-place check of an ordinary event (`check_ordinary`), given the
/// identity the text spells (or, when it spells none, a made-up one): it may give up
/// on anything, but what it passes must decode to a non-terminal event on the ordinary
/// lane with that identity and the `ts` and `partial` it reports.
fn ordinary_check_agrees(text: &str, decoded: Option<&RuntimeEvent>) {
    let spelled = parse(text).ok().and_then(|v| {
        let wsledger::json::Json::Object(o) = &v else {
            return None;
        };
        let id = |k: &str| match o.get(k) {
            Some(wsledger::json::Json::String(s)) => Some(s.to_string()),
            _ => None,
        };
        Some([
            id("id")?,
            id("invocationId")?,
            id("runId")?,
            id("sessionId")?,
            id("turnId")?,
        ])
    });
    let ids = spelled.unwrap_or_else(|| ["e", "i", "r", "s", "t"].map(String::from));
    let Some(o) = check_ordinary(text, ids.each_ref().map(String::as_str)) else {
        return;
    };
    // Any other identity is refused.
    for k in 0..5 {
        let mut other = ids.clone();
        other[k].push('x');
        assert!(
            check_ordinary(text, other.each_ref().map(String::as_str)).is_none(),
            "passed in place with identity {other:?}: {text}"
        );
    }
    let e = decoded.unwrap_or_else(|| panic!("passed in place, does not decode: {text}"));
    let identity = [
        &e.id,
        &e.invocation_id,
        &e.run_id,
        &e.session_id,
        &e.turn_id,
    ];
    assert!(
        identity.iter().zip(&ids).all(|(a, b)| **a == b.as_str()),
        "passed in place with another identity: {text}"
    );
    assert!(o.ts == e.ts && o.partial == e.partial, "{text}");
    assert!(!e.is_terminal(), "terminal, passed in place: {text}");
    assert_eq!(
        wsledger::ledger::scanner::tool_ledger_lane(e),
        Some(wsledger::ledger::scanner::Lane::Ordinary),
        "{text}"
    );
}

/// `decode_event_text` on any input (and the walk's and the batches' decodes, which
/// must agree with it); whatever decodes has a canonical encoding that decodes again
/// and is a fixed point.
pub fn decode(data: &[u8]) {
    let text = text(data);
    // Reading in place never changes the answer (the event, or the error's words).
    let decoded = decode_event_text(&text);
    assert_eq!(decoded, decode_event_text_exact(&text), "{text}");
    // The walk's decode gives the same answer, but for the values it leaves unread.
    assert_eq!(
        decode_event_text_for_walk(&text).map(|e| e.with_unread_emptied()),
        decoded.clone().map(RuntimeEvent::with_unread_emptied),
        "{text}"
    );
    // The batches' decode too, but for a call's arguments it leaves as their text,
    // which hash as the decoded arguments do.
    let batch = decode_event_text_for_batch(&text).map(|(mut e, raw)| {
        if let Some(raw) = raw {
            let Some(Content::FunctionCall { name, args, .. }) = &mut e.content else {
                panic!("arguments as text without a call: {text}");
            };
            assert_eq!(*args, Json::Null, "{text}");
            let Ok(RuntimeEvent {
                content: Some(Content::FunctionCall { args: want, .. }),
                ..
            }) = &decoded
            else {
                panic!("arguments as text, no call decoded: {text}");
            };
            assert_eq!(
                hash_as_written(name, raw),
                Some(canonical_tool_args_hash(name, want)),
                "{text}"
            );
            *args = want.clone();
        }
        e.with_unread_emptied()
    });
    assert_eq!(
        batch,
        decoded.clone().map(RuntimeEvent::with_unread_emptied),
        "{text}"
    );
    ordinary_check_agrees(&text, decoded.as_ref().ok());
    let Ok(event) = decoded else {
        return;
    };
    if let Ok(canonical) = encode_canonical(&event) {
        let again = decode_event_text(&canonical)
            .unwrap_or_else(|e| panic!("the canonical form does not decode: {e}\n{canonical}"));
        let twice = encode_canonical(&again).expect("the canonical form encodes");
        assert_eq!(twice, canonical, "the canonical form is not a fixed point");
    }
}

/// `canonical_tool_args_hash(name, args)`: the first line is the tool name, the rest
/// the JSON arguments. The preimage and the hash agree, the preimage is JSON, and
/// hashing the canonical arguments again gives the same hash; where the text is hashed
/// as written (`hash_as_written`), that is the hash of its parse.
pub fn args_hash(data: &[u8]) {
    let text = text(data);
    let (name, args_text) = text.split_once('\n').unwrap_or(("Read", &text));
    let Ok(args) = parse(args_text) else {
        assert!(
            hash_as_written(&JsStr::new(name), args_text).is_none(),
            "hashed as written, not JSON: {args_text}"
        );
        return;
    };
    let name = JsStr::new(name);
    // Hashing the text as written, where it may be, gives the hash of its parse.
    if let Some(written) = hash_as_written(&name, args_text) {
        assert_eq!(
            written,
            canonical_tool_args_hash(&name, &args),
            "hashed as written: {args_text}"
        );
    }
    match (
        identity_preimage(&name, &args),
        canonical_tool_args_hash(&name, &args),
    ) {
        (Ok(preimage), Ok(hash)) => {
            let wrapper = parse(&preimage)
                .unwrap_or_else(|e| panic!("the preimage is not JSON ({e}): {preimage}"));
            let canonical_args = wrapper
                .as_object()
                .and_then(|o| o.get("args"))
                .expect("the preimage has `args`");
            assert_eq!(
                canonical_tool_args_hash(&name, canonical_args).as_ref(),
                Ok(&hash),
                "hashing the canonical arguments again changes the hash: {preimage}"
            );
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("the preimage and the hash disagree: {a:?} / {b:?}"),
    }
}

/// The schema facts of a workspace at Maka's current schema (no schema findings: the
/// target is the ledger, not a hundred `schema_object_missing`).
fn current_schema() -> SchemaFacts {
    wsledger::release::generation_of("main")
        .expect("main is in the catalog")
        .facts(0)
}

/// A run header record as Maka writes it, with the given identity and status.
fn header_record(session: &str, run: &str, turn: &str, status: RunStatus) -> String {
    serde_json::json!({
        "runId": run,
        "invocationId": run,
        "sessionId": session,
        "turnId": turn,
        "status": status.as_str(),
        "backendKind": "ai-sdk",
        "llmConnectionSlug": "mock-main",
        "modelId": "default",
        "cwd": "/w",
        "permissionMode": "bypass",
        "collaborationMode": "agent",
        "orchestrationMode": "default",
        "orchestrationSource": "session",
        "agentSwarmAuthorization": "none",
        "toolMode": "direct",
        "createdAt": 1,
        "updatedAt": 2
    })
    .to_string()
}

/// The whole scan over a fuzzed event list, one payload per line:
/// - Maka's scanner in its exact mode (any order, repeated ids);
/// - terminal classification of every run under every header status;
/// - the rows as a store holds them (unique ids, store order, headers for most runs)
///   through the streaming [`Walker`], whose scanner issues must equal the exact
///   scanner's over the same rows, and every report format, whose table and GitHub
///   output must hold no raw ESC or U+202E.
pub fn scan(data: &[u8]) {
    let text = text(data);
    let lines: Vec<(&str, RuntimeEvent)> = text
        .lines()
        .filter_map(|l| decode_event_text(l).ok().map(|e| (l, e)))
        .collect();
    let events: Vec<RuntimeEvent> = lines.iter().map(|(_, e)| e.clone()).collect();

    // Maka's scanner, exactly as Maka runs it.
    let _ = scan_tool_ledger(&events);

    // Terminal classification of every run, under every header status.
    let mut spines: Vec<(JsStr, JsStr, JsStr)> = Vec::new();
    let mut seen_spines = HashSet::new();
    for e in &events {
        let k = (e.session_id.clone(), e.run_id.clone(), e.turn_id.clone());
        if seen_spines.insert(k.clone()) {
            spines.push(k);
        }
    }
    for (session, run, turn) in &spines {
        let run_events: Vec<RuntimeEvent> = events
            .iter()
            .filter(|e| e.session_id == *session && e.run_id == *run)
            .cloned()
            .collect();
        for status in RunStatus::ALL {
            let view = RunHeaderView {
                session_id: session.clone(),
                run_id: run.clone(),
                turn_id: turn.clone(),
                status,
                failure_class: None,
                abort_source: None,
            };
            let c = classify_terminal_ledger(&view, &run_events);
            assert_eq!(c.fact.is_some(), c.kind == TerminalKind::Fact);
            let _ = terminal_verdict(&view, &run_events);
        }
    }

    // The rows as the store holds them.
    let mut ids = HashSet::new();
    let mut next_seq: HashMap<String, i64> = HashMap::new();
    let mut rows = Vec::new();
    for (i, (line, e)) in lines.iter().enumerate() {
        let event_id = e.id.to_string_lossy();
        if !ids.insert(event_id.clone()) {
            continue;
        }
        let invocation_id = e.invocation_id.to_string_lossy();
        let seq = next_seq.entry(invocation_id.clone()).or_insert(0);
        *seq += 1;
        rows.push(EventRow {
            event_id,
            session_id: e.session_id.to_string_lossy(),
            invocation_id,
            run_id: e.run_id.to_string_lossy(),
            turn_id: e.turn_id.to_string_lossy(),
            event_seq: *seq,
            event_kind: event_kind(e).to_owned(),
            payload_json: (*line).to_owned(),
            committed_at: i as i64,
        });
    }
    rows.sort_by(|a, b| {
        (&a.invocation_id, a.event_seq, &a.event_id).cmp(&(
            &b.invocation_id,
            b.event_seq,
            &b.event_id,
        ))
    });
    let store_order: Vec<RuntimeEvent> = rows.iter().filter_map(|r| decode_row(r).ok()).collect();
    let exact = scan_tool_ledger(&store_order);

    let mut store = MemoryStore {
        rows: rows.clone(),
        headers: BTreeMap::new(),
    };
    for r in &rows {
        let key = (r.session_id.clone(), r.run_id.clone());
        if store.headers.contains_key(&key) {
            continue;
        }
        let k = store.headers.len() + data.len();
        let status = RunStatus::ALL[k % RunStatus::ALL.len()];
        let header = HeaderRow {
            session_id: r.session_id.clone(),
            run_id: r.run_id.clone(),
            created_at: store.headers.len() as i64,
            record_json: header_record(&r.session_id, &r.run_id, &r.turn_id, status),
        };
        // Some runs have no header; the map keeps them as `None`.
        store.headers.insert(key, (k % 5 != 4).then_some(header));
    }

    let mut walker = Walker::new().keep_all_runs(data.len().is_multiple_of(2));
    for row in &rows {
        let r = EventRowRef {
            event_id: Cow::Borrowed(&row.event_id),
            session_id: Cow::Borrowed(&row.session_id),
            invocation_id: Cow::Borrowed(&row.invocation_id),
            run_id: Cow::Borrowed(&row.run_id),
            turn_id: Cow::Borrowed(&row.turn_id),
            event_seq: row.event_seq,
            payload_json: Cow::Borrowed(&row.payload_json),
            committed_at: row.committed_at,
        };
        walker.push_row(&r, &mut store).expect("memory store");
    }
    let sessions: HashSet<&str> = rows.iter().map(|r| r.session_id.as_str()).collect();
    let header_rows = store.headers.values().filter(|h| h.is_some()).count();
    let report = walker
        .finish(
            &mut store,
            Tables {
                schema: current_schema(),
                sessions: sessions.len(),
                runs: header_rows,
                operations: 0,
                integrity: None,
            },
        )
        .expect("memory store");
    assert_eq!(
        report.issues, exact.issues,
        "the streaming scan and Maka's exact scan disagree"
    );

    let opts = RenderOpts {
        color: false,
        width: 100,
        verbose: false,
    };
    for format in [Format::Table, Format::Json, Format::Ndjson, Format::Github] {
        let mut out = Vec::new();
        render_scan(&mut out, &report, "ws", format, &opts).expect("render into memory");
        if matches!(format, Format::Table | Format::Github) {
            assert!(!out.contains(&0x1b), "raw ESC in {format:?} output");
            assert!(
                !out.windows(3).any(|w| w == "\u{202e}".as_bytes()),
                "raw U+202E in {format:?} output"
            );
        }
    }
}

/// The database of the whole-scan target: the fuzzed rows, a header for most runs,
/// no tool tables and no ordinals.
struct MemoryStore {
    rows: Vec<EventRow>,
    headers: BTreeMap<(String, String), Option<HeaderRow>>,
}

impl ScanStore for MemoryStore {
    fn header(&mut self, session_id: &str, run_id: &str) -> Result<Option<HeaderRow>, DbError> {
        Ok(self
            .headers
            .get(&(session_id.to_owned(), run_id.to_owned()))
            .cloned()
            .flatten())
    }
    fn operation(&mut self, _operation_id: &str) -> Result<Option<OperationRow>, DbError> {
        Ok(None)
    }
    fn operation_by_call(
        &mut self,
        _invocation_id: &str,
        _tool_call_id: &str,
    ) -> Result<Option<OperationRow>, DbError> {
        Ok(None)
    }
    fn journal(&mut self, _operation_id: &str) -> Result<Vec<JournalRow>, DbError> {
        Ok(Vec::new())
    }
    fn run_rows(&mut self, session_id: &str, run_id: &str) -> Result<Vec<EventRow>, DbError> {
        Ok(self
            .rows
            .iter()
            .filter(|r| r.session_id == session_id && r.run_id == run_id)
            .cloned()
            .collect())
    }
    fn header_count(&mut self) -> Result<u64, DbError> {
        Ok(self.headers.values().filter(|h| h.is_some()).count() as u64)
    }
    fn for_each_header_key(
        &mut self,
        f: &mut wsledger::scan::HeaderKeyVisit<'_>,
    ) -> Result<(), DbError> {
        // No walked marks here: the walk keeps its own set of closed runs.
        for ((s, r), h) in &self.headers {
            if h.is_some() {
                f(s, r, None)?;
            }
        }
        Ok(())
    }
    fn for_each_operation(
        &mut self,
        _f: &mut dyn FnMut(StoredOperationKey) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        Ok(())
    }
    fn session_of(&mut self, invocation_id: &str, run_id: &str) -> Result<Option<String>, DbError> {
        Ok(self
            .rows
            .iter()
            .find(|r| r.invocation_id == invocation_id && r.run_id == run_id)
            .map(|r| r.session_id.clone()))
    }
    fn for_each_ordinal(&mut self, _f: &mut dyn FnMut(&str, i64, &str)) -> Result<bool, DbError> {
        Ok(false)
    }
    fn events_without_ordinal(&mut self) -> Result<Vec<(String, String, String)>, DbError> {
        Ok(Vec::new())
    }
}

/// Replay's fold over a fuzzed session bundle (the `replay --bundle` input): parse,
/// rows, replay, keep each run, and every output format (text output holds no raw
/// ESC or U+202E).
pub fn replay(data: &[u8]) {
    let text = text(data);
    let Ok(bundle) = Bundle::from_json_text(&text) else {
        return;
    };
    let Ok(rows) = SessionRows::from_bundle(&bundle) else {
        return;
    };
    let r = replay_rows(&rows);
    let opts = RenderOpts {
        color: false,
        width: 100,
        verbose: false,
    };
    for format in [ReplayFormat::Text, ReplayFormat::Json, ReplayFormat::Ndjson] {
        let mut out = Vec::new();
        render_replay(&mut out, &r, "bundle", format, &opts).expect("render into memory");
        if format == ReplayFormat::Text {
            assert!(!out.contains(&0x1b), "raw ESC in text output");
            assert!(
                !out.windows(3).any(|w| w == "\u{202e}".as_bytes()),
                "raw U+202E in text output"
            );
        }
    }
    let run_ids: Vec<String> = r.runs.iter().map(|x| x.run_id.clone()).collect();
    for id in run_ids {
        let mut one = r.clone();
        assert!(one.keep_run(&id), "a run of the replay can be kept");
    }
}
