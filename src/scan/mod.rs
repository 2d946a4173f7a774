//! `doctor scan`: every finding about one workspace, computed from its rows.
//!
//! The caller streams `runtime_events` rows in Maka's health-scan order
//! (`invocation_id, event_seq, event_id`) into a [`Walker`], then calls
//! [`Walker::finish`]. The walk is bounded by what is open, not by the file: when an
//! invocation ends, its runs are assessed against their headers and its operations
//! against their stored projection rows (point lookups through a [`ScanStore`]), and
//! both are dropped. What stays for the whole walk is small per item: a 128-bit
//! fingerprint per run seen, Maka's operation-id index (about 50 bytes per bound
//! operation), a 128-bit sum over event ids (for the ordinal check), and findings. A
//! store may also answer from what it read once up front (a [`HeaderBrief`] per run
//! header, a projection digest per operation id) so that plainly terminal runs and
//! operations whose stored projection matches need no lookup.
//!
//! Exactness does not depend on the usual shapes: a run whose rows come back in a
//! later invocation is re-read from the store and assessed again; an operation
//! reached after its invocation ended (a re-used operation id, a recovery fact) is
//! reconciled at the end; headers without events are found by count, then by key, and
//! stored operations no dispatch explains likewise (see `dispatched_rows_explained`).

pub mod builds;
pub mod listed;
pub mod pipeline;
pub mod projection;
pub mod release;
mod report;
pub mod runs;
pub mod startup;

pub use pipeline::{scan_path, scan_workspace, scan_workspace_without, ScanOptions, Threads};
pub use report::*;

use std::borrow::Borrow;
use std::collections::BTreeSet;

use crate::fast_hash::{HashMap, HashSet};

use crate::db::{
    lossy, DbError, EventRow, EventRowRef, HeaderRow, JournalRow, OperationRow, SchemaFacts,
    StoredEventRow, StoredOperationKey,
};
use crate::event::{
    check_ordinary, decode_event_text, decode_event_text_for_batch, decode_event_text_for_walk,
    Content, DecodeError, Ordinary, RuntimeEvent,
};
use crate::findings::Finding;
use crate::header::{decode_header_as, HeaderFacts, RunHeader};
use crate::json::JsStr;
use crate::ledger::scanner::{
    tool_ledger_lane_as, IssueCode, Lane, LateTouch, Operation, ScanOptions as ScannerOptions,
    ToolLedgerScanner,
};
use crate::release::compat::older_decoder_rejects;
use crate::release::rules::{DecoderRules, HeaderRules};
use crate::release::Rules;
use runs::RunReport;

/// The reserved session of Maka's workspace-version authority: events without run
/// headers, never written by anyone else.
pub const WORKSPACE_AUTHORITY_SESSION: &str = "maka_workspace_authority";

/// A row that does not decode, in scan order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeFailure {
    pub event_id: String,
    pub session_id: String,
    pub run_id: String,
    pub message: String,
}

/// What the walk keeps about one run (keyed by the row's session and run columns)
/// while its invocation is current.
#[derive(Clone, Debug, Default)]
pub struct RunAcc {
    pub rows: u64,
    pub undecodable: u64,
    pub max_seq: i64,
    /// Largest event `ts` of the run's decodable rows.
    pub last_ts: Option<f64>,
    /// `invocation_id` columns seen (normally exactly one).
    pub invocations: Vec<String>,
    /// Terminal-looking events (any partial flag, any turn) with their `event_seq`.
    pub terminals: Vec<(i64, RuntimeEvent)>,
    /// Last decodable row by `event_seq`: (seq, event id).
    pub tail: Option<(i64, String)>,
    /// The turn of the run's invocation-opening fact, when one of its rows is one
    /// (newer Maka: see `runs::assess_spine_run`).
    pub opened: Option<String>,
}

impl RunAcc {
    pub(crate) fn add(
        &mut self,
        invocation_id: &str,
        event_seq: i64,
        event_id: &str,
        decoded: Option<&RuntimeEvent>,
    ) {
        self.add_row(invocation_id, event_seq, event_id, decoded.map(|e| e.ts));
        if let Some(event) = decoded {
            self.note_opening(event);
        }
        if let Some(event) = decoded.filter(|e| e.is_terminal()) {
            self.terminals.push((event_seq, event.clone()));
        }
    }

    /// Keeps the turn of an invocation-opening fact (not a partial one).
    fn note_opening(&mut self, event: &RuntimeEvent) {
        if !event.partial && matches!(event.content, Some(Content::InvocationOpened { .. })) {
            self.opened = Some(event.turn_id.to_string_lossy());
        }
    }

    /// [`RunAcc::add`] but for keeping a terminal event, which the caller does; `ts`
    /// is the event's when it decoded.
    fn add_row(&mut self, invocation_id: &str, event_seq: i64, event_id: &str, ts: Option<f64>) {
        self.rows += 1;
        self.max_seq = self.max_seq.max(event_seq);
        if !self.invocations.iter().any(|i| i == invocation_id) {
            self.invocations.push(invocation_id.to_owned());
        }
        match ts {
            None => self.undecodable += 1,
            Some(ts) => {
                self.last_ts = Some(self.last_ts.map_or(ts, |t| t.max(ts)));
                if self.tail.as_ref().is_none_or(|(s, _)| event_seq >= *s) {
                    match &mut self.tail {
                        Some((s, id)) => {
                            *s = event_seq;
                            id.clear();
                            id.push_str(event_id);
                        }
                        None => self.tail = Some((event_seq, event_id.to_owned())),
                    }
                }
            }
        }
    }
}

/// What [`ScanStore::for_each_header_key`] calls for each header: session, run, and
/// the run's [`ScanStore::mark_walked`] mark when the store keeps one.
pub type HeaderKeyVisit<'a> = dyn FnMut(&str, &str, Option<bool>) -> Result<(), DbError> + 'a;

/// The lookups the walk needs from the database (point queries through indexes).
pub trait ScanStore {
    /// The `core_agent_runs` row of `(session, run)`, if the table exists and has it.
    fn header(&mut self, session_id: &str, run_id: &str) -> Result<Option<HeaderRow>, DbError>;
    /// The `tool_operations` row of an operation id.
    fn operation(&mut self, operation_id: &str) -> Result<Option<OperationRow>, DbError>;
    /// The `tool_operations` row of `(invocation, provider tool call id)`.
    fn operation_by_call(
        &mut self,
        invocation_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<OperationRow>, DbError>;
    /// Whether the stored projection rows of `op`'s operation id are known to be
    /// exactly the rows Maka's rebuild writes (see [`projection::StoredDigests`]), so
    /// that [`ScanStore::operation`] and [`ScanStore::journal`] need not be asked.
    /// `false` when unknown.
    fn projection_matches(&mut self, _op: &Operation, _commits: &HashMap<String, i64>) -> bool {
        false
    }
    /// The number of stored `tool_operations` rows with a `dispatch_event_id`, when the
    /// store counted them beside the digests [`ScanStore::projection_matches`] answers
    /// from; `None` otherwise.
    fn dispatched_rows(&self) -> Option<u64> {
        None
    }
    /// The decoded header of `(session, run)` reduced to what classifying its run
    /// needs, when known without a lookup (see [`HeaderBrief`]); `None` when unknown.
    fn header_brief(&mut self, _session_id: &str, _run_id: &str) -> Option<&HeaderBrief> {
        None
    }
    /// Marks `(session, run)` as walked. `Some(was)` when the store keeps such marks
    /// for this run (one bit per run header it read up front, see [`HeaderBrief`]),
    /// `was` telling whether it was marked before; `None` when it keeps none for it
    /// (the walk then remembers the run itself).
    fn mark_walked(&mut self, _session_id: &str, _run_id: &str) -> Option<bool> {
        None
    }
    /// The journal rows of an operation id, in journal order.
    fn journal(&mut self, operation_id: &str) -> Result<Vec<JournalRow>, DbError>;
    /// Every row of one run, in scan order.
    fn run_rows(&mut self, session_id: &str, run_id: &str) -> Result<Vec<EventRow>, DbError>;
    /// The turn of the opening fact a migration shelved for `(session, run)` (newer
    /// Maka's `runtime_legacy_invocation_openings`), when the store read them.
    fn shelved_opening(&mut self, _session_id: &str, _run_id: &str) -> Option<String> {
        None
    }
    /// Whether the file's run headers can be read at all (a newer Maka drops
    /// `core_agent_runs.record_json`): when not, a run without an opening fact cannot
    /// be judged.
    fn headers_readable(&self) -> bool {
        true
    }
    /// Number of `core_agent_runs` rows (0 without the table).
    fn header_count(&mut self) -> Result<u64, DbError>;
    /// Every `(session, run)` of `core_agent_runs`, with its [`ScanStore::mark_walked`]
    /// mark when the store keeps one for it.
    fn for_each_header_key(&mut self, f: &mut HeaderKeyVisit<'_>) -> Result<(), DbError>;
    /// Every stored `tool_operations` row, reduced (nothing without the table).
    fn for_each_operation(
        &mut self,
        f: &mut dyn FnMut(StoredOperationKey) -> Result<(), DbError>,
    ) -> Result<(), DbError>;
    /// The session of the events of `(invocation, run)`.
    fn session_of(&mut self, invocation_id: &str, run_id: &str) -> Result<Option<String>, DbError>;
    /// Every ordinal row `(session, ordinal, event id)` in primary-key order; `false`
    /// without the table.
    fn for_each_ordinal(&mut self, f: &mut dyn FnMut(&str, i64, &str)) -> Result<bool, DbError>;
    /// The ordinal rows reduced with the walk's event hasher (a store may have it
    /// ready, read beside the walk).
    fn ordinal_summary(&mut self, hasher: &EventHasher) -> Result<OrdinalSummary, DbError> {
        OrdinalSummary::read(hasher, |f| self.for_each_ordinal(f))
    }
    /// Events without an ordinal row `(event_id, session_id, run_id)` (the exact, slow
    /// query; only run when the fast check fails).
    fn events_without_ordinal(&mut self) -> Result<Vec<(String, String, String)>, DbError>;
}

/// The keyed hash summed over event ids, for the ordinal check.
pub type EventHasher = crate::hash128::Keyed128;

/// `runtime_session_event_ordinals`, reduced: the sum of its event ids' hashes, and the
/// sessions whose ordinals are not exactly `1..=count` (`(session, count, max)`).
#[derive(Debug, Default)]
pub struct OrdinalSummary {
    /// Whether the table exists.
    pub present: bool,
    pub sum: u128,
    pub gaps: Vec<(String, i64, i64)>,
}

impl OrdinalSummary {
    /// Folds the rows `each` gives (in primary-key order; it returns whether the table
    /// exists).
    pub fn read(
        hasher: &EventHasher,
        each: impl FnOnce(&mut dyn FnMut(&str, i64, &str)) -> Result<bool, DbError>,
    ) -> Result<OrdinalSummary, DbError> {
        let mut out = OrdinalSummary::default();
        let mut cur: Option<(String, i64, i64, i64)> = None;
        let flush = |c: Option<(String, i64, i64, i64)>, gaps: &mut Vec<(String, i64, i64)>| {
            if let Some((s, count, min, max)) = c {
                if count != max || min != 1 {
                    gaps.push((s, count, max));
                }
            }
        };
        let (sum, gaps) = (&mut out.sum, &mut out.gaps);
        out.present = each(&mut |s, ordinal, event_id| {
            *sum = sum.wrapping_add(hasher.hash(event_id));
            match &mut cur {
                Some((cs, count, min, max)) if cs == s => {
                    *count += 1;
                    *min = (*min).min(ordinal);
                    *max = (*max).max(ordinal);
                }
                _ => {
                    flush(cur.take(), gaps);
                    cur = Some((s.to_owned(), 1, ordinal, ordinal));
                }
            }
        })?;
        flush(cur.take(), &mut out.gaps);
        Ok(out)
    }
}

/// A run header that decodes, reduced to the fields the run classification reads
/// (the row's session and run are its key). Kept per run for the whole walk by a
/// store that reads `core_agent_runs` once, so that a plainly terminal run needs no
/// header lookup; any other run is assessed again from the looked-up row.
///
/// Stored compactly, since one is kept per run for the whole scan: a turn id that is
/// a lowercase hyphenated UUID (Maka's) as its 16 bytes, any other in `text`; `text`
/// also holds the failure class and the abort source (usually absent, so usually
/// nothing is allocated); `lens` their byte lengths, `u32::MAX` for absent.
#[derive(Clone, Debug)]
pub struct HeaderBrief {
    /// The turn id's 16 bytes, when `extra` does not hold the turn id.
    uuid: [u8; 16],
    /// Text that does not fit the fixed fields (absent for most runs: 8 bytes then).
    extra: Option<Box<BriefText>>,
    status: crate::header::HeaderStatus,
}

/// The text of a [`HeaderBrief`]: `text` holds, one after the other, a turn id that is
/// not a lowercase UUID, the failure class and the abort source; `lens` are their byte
/// lengths, `u32::MAX` for absent.
#[derive(Clone, Debug)]
struct BriefText {
    text: Box<str>,
    lens: [u32; 3],
}

/// A lowercase hyphenated UUID's 16 bytes.
fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let mut out = [0u8; 16];
    let mut digits = b.iter().filter(|&&c| c != b'-');
    for byte in &mut out {
        let mut v = 0u8;
        for _ in 0..2 {
            let c = *digits.next()?;
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => return None,
            };
            v = (v << 4) | d;
        }
        *byte = v;
    }
    Some(out)
}

fn uuid_text(bytes: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 15)]));
    }
    s
}

impl HeaderBrief {
    /// `None` for a header whose fields do not fit (longer than 4 GiB).
    pub fn new(h: &RunHeader) -> Option<HeaderBrief> {
        HeaderBrief::from_facts(h.facts())
    }

    /// The brief of a header with these facts (see [`crate::header::header_facts_plainly`]).
    pub fn from_facts(h: HeaderFacts<'_>) -> Option<HeaderBrief> {
        let uuid = uuid_bytes(h.turn_id);
        let parts = [
            uuid.is_none().then_some(h.turn_id),
            h.failure_class,
            h.abort_source,
        ];
        let extra = if parts.iter().all(Option::is_none) {
            None
        } else {
            let mut text = String::new();
            let mut lens = [u32::MAX; 3];
            for (len, part) in lens.iter_mut().zip(parts) {
                if let Some(p) = part {
                    *len = u32::try_from(p.len()).ok().filter(|&n| n != u32::MAX)?;
                    text.push_str(p);
                }
            }
            Some(Box::new(BriefText {
                text: text.into_boxed_str(),
                lens,
            }))
        };
        Some(HeaderBrief {
            uuid: uuid.unwrap_or_default(),
            extra,
            status: h.status,
        })
    }

    /// The header's `turnId`.
    pub fn turn_id(&self) -> String {
        match self.parts()[0] {
            Some(text) => text.to_owned(),
            None => uuid_text(&self.uuid),
        }
    }

    fn parts(&self) -> [Option<&str>; 3] {
        let Some(extra) = &self.extra else {
            return [None; 3];
        };
        let mut at = 0usize;
        extra.lens.map(|len| {
            (len != u32::MAX).then(|| {
                let p = &extra.text[at..at + len as usize];
                at += len as usize;
                p
            })
        })
    }

    /// A header with these fields and nothing else (enough for
    /// [`runs::assess_header_run`]).
    fn header(&self, session_id: &str, run_id: &str) -> RunHeader {
        let [_, failure_class, abort_source] = self.parts();
        RunHeader {
            run_id: run_id.to_owned(),
            session_id: session_id.to_owned(),
            turn_id: self.turn_id(),
            invocation_id: None,
            status: self.status,
            created_at: 0.0,
            updated_at: 0.0,
            completed_at: None,
            failure_class: failure_class.map(str::to_owned),
            abort_source: abort_source.map(str::to_owned),
            tool_mode: None,
            trace_write_error: None,
            record: serde_json::Map::new(),
        }
    }
}

/// Where a run's result sorts among the run findings: headers in Maka's session order
/// (session, created_at, run), then runs without a header by key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum RunOrder {
    Header(String, i64, String),
    Orphan(String, String),
    HeaderFailed(String, String),
}

/// One assessed run.
struct RunResult {
    key: (String, String),
    order: RunOrder,
    /// The header row was found (decodable or not).
    had_header: bool,
    findings: Vec<Finding>,
    /// `run_header_undecodable` (reported before the run findings).
    header_failure: Option<Finding>,
    report: Option<RunReport>,
    header: Option<RunHeader>,
    state: runs::RunState,
}

impl RunResult {
    /// A run without a header row that is not assessed (no report, no finding).
    fn unassessed(s: String, r: String, state: runs::RunState) -> Self {
        RunResult {
            order: RunOrder::Orphan(s.clone(), r.clone()),
            key: (s, r),
            had_header: false,
            findings: Vec::new(),
            header_failure: None,
            report: None,
            header: None,
            state,
        }
    }

    /// A run judged without a header row.
    fn without_header(s: String, r: String, report: RunReport, findings: Vec<Finding>) -> Self {
        RunResult {
            order: RunOrder::Orphan(s.clone(), r.clone()),
            key: (s, r),
            had_header: false,
            findings,
            header_failure: None,
            state: report.state,
            report: Some(report),
            header: None,
        }
    }
}

/// Streams rows; see the module docs.
pub struct Walker {
    /// The rules of the release that wrote the file.
    rules: Rules,
    scanner: ToolLedgerScanner,
    keep_all_runs: bool,
    // The current invocation.
    current_invocation: Option<String>,
    expected_seq: i64,
    inv_runs: Vec<((String, String), RunAcc)>,
    /// `committed_at` of the invocation's tool-bearing rows, for the projection rebuild.
    inv_commits: HashMap<String, i64>,
    // Small, global.
    run_hasher: crate::hash128::Keyed128,
    closed_runs: HashSet<u128>,
    split_runs: BTreeSet<(String, String)>,
    headers_found: u64,
    event_hasher: EventHasher,
    event_sum: u128,
    events: u64,
    // Results (as many as findings, or runs that are not plainly terminal).
    decode_failures: Vec<DecodeFailure>,
    seq_findings: Vec<Finding>,
    run_results: Vec<RunResult>,
    /// `(operation id, finding)`.
    unsettled: Vec<(JsStr, Finding)>,
    projection: Vec<(JsStr, Finding)>,
    supersession: Vec<SupersessionGroup>,
    /// One bit per bound operation (by its index in the scanner) whose stored
    /// projection the store vouched for ([`ScanStore::projection_matches`]), and how
    /// many bits are set; see `dispatched_rows_explained`.
    vouched_bits: Vec<u64>,
    vouched: u64,
    /// Expected operations closed but not yet compared with the stored projection,
    /// in closing order, while the comparisons happen elsewhere (see
    /// [`Walker::defer_projection_checks`]); `None` when they happen as each closes.
    deferred: Option<Vec<ProjectionCheck>>,
    /// Runs closed but not yet judged against their header brief, in closing order,
    /// while that happens elsewhere (see [`Walker::defer_run_checks`]).
    deferred_runs: Option<Vec<RunCheck>>,
    /// The rules read what only a Maka newer than main writes.
    newer: bool,
    /// Events that only a Maka newer than main writes, by what they use
    /// ([`crate::event::newer::newer_parts`]), and how many events.
    newer_parts: std::collections::BTreeMap<&'static str, u64>,
    newer_events: u64,
    /// Runs judged off the event spine (their opening fact), by fingerprint.
    spine_runs: HashSet<u128>,
    /// Runs with events that neither a header nor an opening fact describes, where
    /// headers cannot be read: by fingerprint, and the first few.
    unjudged_runs: HashSet<u128>,
    unjudged_sample: Vec<(String, String)>,
}

/// A closed run whose judgement (plainly terminal or not, from its header brief) is
/// made away from the walk: see [`Walker::defer_run_checks`].
pub struct RunCheck {
    session_id: String,
    run_id: String,
    acc: RunAcc,
}

/// An expected operation whose stored projection rows are compared away from the
/// walk: what [`Walker`] needs to finish with it once the answer is known.
pub struct ProjectionCheck {
    op: Operation,
    /// Its index among the scanner's bound operations, when it closed.
    bound: Option<usize>,
    commits: projection::OperationCommits,
}

impl Default for Walker {
    fn default() -> Self {
        Walker::new()
    }
}

impl Walker {
    pub fn new() -> Walker {
        Walker {
            rules: Rules::MAIN,
            // Rows come from a table whose primary key is event_id, in store order.
            scanner: ToolLedgerScanner::new(ScannerOptions::store_rows()),
            keep_all_runs: false,
            current_invocation: None,
            expected_seq: 1,
            inv_runs: Vec::new(),
            inv_commits: HashMap::default(),
            run_hasher: crate::hash128::Keyed128::random(),
            closed_runs: HashSet::default(),
            split_runs: BTreeSet::new(),
            headers_found: 0,
            event_hasher: crate::hash128::Keyed128::random(),
            event_sum: 0,
            events: 0,
            decode_failures: Vec::new(),
            seq_findings: Vec::new(),
            run_results: Vec::new(),
            unsettled: Vec::new(),
            projection: Vec::new(),
            supersession: Vec::new(),
            vouched_bits: Vec::new(),
            vouched: 0,
            deferred: None,
            deferred_runs: None,
            newer: false,
            newer_parts: std::collections::BTreeMap::new(),
            newer_events: 0,
            spine_runs: HashSet::default(),
            unjudged_runs: HashSet::default(),
            unjudged_sample: Vec::new(),
        }
    }

    /// From now on, an expected operation is not compared with the stored projection
    /// when it closes: it waits in [`Walker::take_projection_checks`] until a batch
    /// carries it to where the digests are ([`EventBatch::check_projections`]), and is
    /// finished when that batch is walked. Lets another thread do the hashing; the
    /// findings come out in the same order. [`Walker::finish`] settles what is left.
    pub fn defer_projection_checks(&mut self) {
        self.deferred.get_or_insert_with(Vec::new);
    }

    /// From now on, a closed run is not judged against its header brief when it
    /// closes (unless every run is kept): it waits in [`Walker::take_run_checks`]
    /// until a batch carries it to where the briefs are ([`EventBatch::check_runs`]),
    /// and is finished when that batch is walked. The report is the same: run results
    /// are sorted by key. [`Walker::finish`] settles what is left.
    pub fn defer_run_checks(&mut self) {
        if !self.keep_all_runs {
            self.deferred_runs.get_or_insert_with(Vec::new);
        }
    }

    /// The runs waiting to be judged, oldest first.
    pub fn take_run_checks(&mut self) -> Vec<RunCheck> {
        self.deferred_runs
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The operations waiting to be compared, oldest first.
    pub fn take_projection_checks(&mut self) -> Vec<ProjectionCheck> {
        self.deferred
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Keep a [`RunReport`] (and header) for every run, not only for runs that are not
    /// plainly terminal. Memory then grows with the number of runs.
    pub fn keep_all_runs(mut self, yes: bool) -> Walker {
        self.keep_all_runs = yes;
        self
    }

    /// Judge the file with these release rules (main's by default). Call before the
    /// first row.
    pub fn with_rules(mut self, rules: Rules) -> Walker {
        self.rules = rules;
        self.newer = rules.decoder.is_newer_than_main();
        self.scanner = ToolLedgerScanner::new(ScannerOptions {
            dispatch_parent_refs: rules.dispatch_parent_refs,
            tool_dependencies: rules.scanner_tool_dependencies,
            ..ScannerOptions::store_rows()
        });
        self
    }

    /// Expect about `n` dispatched operations (the `tool_operations` rows): the
    /// operation index is sized once instead of doubling as it fills.
    pub fn expect_operations(&mut self, n: usize) {
        self.scanner.reserve_operations(n);
    }

    /// The rules the walk applies.
    pub fn rules(&self) -> Rules {
        self.rules
    }

    /// Number of rows seen.
    pub fn events(&self) -> u64 {
        self.events
    }

    fn run_fingerprint(&self, s: &str, r: &str) -> u128 {
        self.run_hasher.hash(&(s, r))
    }

    /// The keys of its event-id hash, for a store that reduces the ordinal rows
    /// elsewhere ([`ScanStore::ordinal_summary`]).
    pub fn event_hasher(&self) -> EventHasher {
        self.event_hasher.clone()
    }

    /// Feeds the next row in `invocation_id, event_seq, event_id` order.
    pub fn push_row(
        &mut self,
        row: &EventRowRef<'_>,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        let mut decoded = Decoded::from(decode_row_as(row, &self.rules.decoder));
        self.push_decoded(row, &[], &mut decoded, Prepared::default(), store)
    }

    /// Feeds a batch whose rows were decoded with [`EventBatch::decode`] (possibly on
    /// another thread), as [`Walker::push_row`] would each row. Leaves it without rows;
    /// the decoded events stay until the next [`EventBatch::decode`], so that they are
    /// freed by the thread that made them (memory moving between threads' allocator
    /// arenas costs more than the decoding saved). Only terminal events are taken out,
    /// by their run, which is judged and mostly dropped on that thread too.
    pub fn push_batch(
        &mut self,
        batch: &mut EventBatch,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        debug_assert_eq!(batch.decoded.len(), batch.rows.len());
        for (i, d) in batch.decoded.iter_mut().enumerate() {
            let prepared = Prepared {
                args_hash: batch.args_hashes[i].take(),
                id_hash: Some(batch.id_hashes[i]),
                lane: batch.lanes[i],
            };
            let row = batch_row(&batch.rows, &batch.text, i);
            let payload = payload_of(&batch.rows, &batch.payloads, i);
            self.push_decoded(&row, payload, d, prepared, store)?;
        }
        batch.text.clear();
        batch.payloads.clear();
        batch.rows.clear();
        // Walked events are dropped now, not when the batch is next decoded: spare
        // batches would otherwise hold them (about 3 MB at 1M events).
        batch.decoded.clear();
        Ok(())
    }

    /// Whether every stored `tool_operations` row with a `dispatch_event_id` belongs to
    /// a bound operation or to one a scanner issue names (then none is "extra"),
    /// shown by counting: the bound operations the store vouched for each have such a
    /// row (their digest covers `dispatch_event_id`) under their own operation id, and
    /// so has each issue's operation that is not among them and has one (looked up:
    /// issues are few). Distinct ids, so distinct rows: when there are as many as the
    /// store counted, those are all the rows. `false` when the store did not count.
    fn dispatched_rows_explained(
        &self,
        issue_ops: &HashSet<JsStr>,
        store: &mut dyn ScanStore,
    ) -> Result<bool, DbError> {
        let Some(rows) = store.dispatched_rows() else {
            return Ok(false);
        };
        let mut explained = self.vouched;
        for id in issue_ops {
            // The pass compares ids as stored text: a lone surrogate has no such text.
            let Some(text) = id.as_str() else {
                return Ok(false);
            };
            let vouched = self.scanner.bound_index(id).is_some_and(|ix| {
                self.vouched_bits
                    .get(ix / 64)
                    .is_some_and(|w| w & (1 << (ix % 64)) != 0)
            });
            if !vouched
                && store
                    .operation(text)?
                    .is_some_and(|r| r.dispatch_event_id.is_some())
            {
                explained += 1;
            }
        }
        Ok(explained == rows)
    }

    /// Feeds one decoded row; `payload` is its payload as stored when `decoded` is an
    /// ordinary event checked in place (decoded here in the rare case that the
    /// scanner must see it).
    fn push_decoded(
        &mut self,
        row: &EventRowRef<'_>,
        payload: &[u8],
        decoded: &mut Decoded,
        prepared: Prepared,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        let Prepared {
            args_hash,
            id_hash,
            lane,
        } = prepared;
        self.events += 1;
        if self.current_invocation.as_deref() != Some(&*row.invocation_id) {
            self.close_invocation(store)?;
            self.current_invocation = Some(row.invocation_id.to_string());
            self.expected_seq = 1;
        }
        self.check_seq(row);
        let id = &*row.event_id;
        let id_hash = id_hash.unwrap_or_else(|| self.event_hasher.hash(id));
        self.event_sum = self.event_sum.wrapping_add(id_hash);
        let pos = match self
            .inv_runs
            .iter()
            .position(|((s, r), _)| *s == *row.session_id && *r == *row.run_id)
        {
            Some(p) => p,
            None => {
                self.inv_runs.push((
                    (row.session_id.to_string(), row.run_id.to_string()),
                    RunAcc::default(),
                ));
                self.inv_runs.len() - 1
            }
        };
        let acc = &mut self.inv_runs[pos].1;
        if let Decoded::Ordinary(o) = decoded {
            let ids = [
                id,
                &*row.invocation_id,
                &*row.run_id,
                &*row.session_id,
                &*row.turn_id,
            ];
            if self.scanner.push_ordinary(ids) {
                acc.add_row(&row.invocation_id, row.event_seq, id, Some(o.ts));
                return Ok(());
            }
            // The scanner reports something about it, for which it needs the event
            // (which the check in place showed decodes, ordinary and not terminal).
            let row = EventRowRef {
                payload_json: lossy(payload),
                ..row.clone()
            };
            *decoded = Decoded::from(decode_row_as(&row, &self.rules.decoder));
        }
        let terminal = match &*decoded {
            Decoded::Failed(message) => {
                acc.add_row(&row.invocation_id, row.event_seq, id, None);
                self.decode_failures.push(DecodeFailure {
                    event_id: id.to_owned(),
                    session_id: row.session_id.to_string(),
                    run_id: row.run_id.to_string(),
                    message: message.to_owned(),
                });
                false
            }
            Decoded::Event(event) => {
                acc.add_row(&row.invocation_id, row.event_seq, id, Some(event.ts));
                if self.newer {
                    acc.note_opening(event);
                    let parts = crate::event::newer::newer_parts(event);
                    self.newer_events += u64::from(!parts.is_empty());
                    for p in parts {
                        *self.newer_parts.entry(p).or_default() += 1;
                    }
                }
                if is_tool_bearing(event) {
                    self.inv_commits.insert(id.to_owned(), row.committed_at);
                }
                // Rows arrive in store order, so the scanner's order check cannot fail.
                let pushed = self.scanner.push_prepared(event, args_hash, lane);
                debug_assert!(pushed.is_ok());
                event.is_terminal()
            }
            Decoded::Ordinary(_) => unreachable!("replaced above"),
        };
        if terminal {
            // The run keeps it: taken, not copied (nothing reads it here again).
            if let Decoded::Event(event) =
                std::mem::replace(decoded, Decoded::Failed(String::new()))
            {
                self.inv_runs[pos].1.terminals.push((row.event_seq, *event));
            }
        }
        Ok(())
    }

    fn check_seq(&mut self, row: &EventRowRef<'_>) {
        if row.event_seq != self.expected_seq {
            self.seq_findings.push(
                Finding::new(
                    "event_seq_gap",
                    format!(
                        "invocation `{}`: event_seq {} where {} was expected",
                        row.invocation_id, row.event_seq, self.expected_seq
                    ),
                )
                .session(&*row.session_id)
                .run(&*row.run_id)
                .event(&*row.event_id),
            );
        }
        // A hostile `event_seq` (i64::MAX, or a huge REAL read as i64::MAX) must not
        // overflow.
        self.expected_seq = row.event_seq.saturating_add(1);
    }

    /// Assesses and drops the current invocation's runs and operations.
    fn close_invocation(&mut self, store: &mut dyn ScanStore) -> Result<(), DbError> {
        let ops = self.scanner.close_invocation();
        for op in ops {
            self.close_operation(op, store)?;
        }
        let runs = std::mem::take(&mut self.inv_runs);
        for ((s, r), acc) in runs {
            // The store's mark when it keeps one (one bit per run), else our own set.
            let again = match store.mark_walked(&s, &r) {
                Some(was) => was,
                None => !self.closed_runs.insert(self.run_fingerprint(&s, &r)),
            };
            if again {
                // The run came back in another invocation: assessed again at the end
                // from all its rows.
                self.split_runs.insert((s, r));
                continue;
            }
            if let Some(waiting) = &mut self.deferred_runs {
                waiting.push(RunCheck {
                    session_id: s,
                    run_id: r,
                    acc,
                });
                continue;
            }
            if !self.keep_all_runs && plainly_terminal(&s, &r, &acc, store) {
                // What `assess_run` would find, and `keep` drop.
                self.headers_found += 1;
                continue;
            }
            let result = self.assess_run(s, r, &acc, store)?;
            self.keep(result);
        }
        self.inv_commits.clear();
        Ok(())
    }

    /// Finishes a run found not plainly terminal away from the walk.
    fn settle_run(&mut self, check: RunCheck, store: &mut dyn ScanStore) -> Result<(), DbError> {
        let RunCheck {
            session_id,
            run_id,
            acc,
        } = check;
        let result = self.assess_run(session_id, run_id, &acc, store)?;
        self.keep(result);
        Ok(())
    }

    fn close_operation(&mut self, op: Operation, store: &mut dyn ScanStore) -> Result<(), DbError> {
        if let Some(f) = projection::unsettled_finding(&op) {
            self.unsettled
                .push((op.operation_id.clone().unwrap_or_default(), f));
        }
        if projection::has_duplicates(&op, self.scanner.issues()) {
            let stored = store
                .operation_by_call(&op.invocation_id.to_string(), &op.tool_call_id.to_string())?;
            self.supersession.extend(projection::operation_groups(
                &op,
                self.scanner.issues(),
                stored.as_ref(),
            ));
        }
        if !projection::is_expected(&op) {
            return Ok(());
        }
        let bound = self
            .scanner
            .bound_index(&op.operation_id.clone().unwrap_or_default());
        let commits = projection::commits_of(&op, &self.inv_commits);
        match &mut self.deferred {
            Some(waiting) => waiting.push(ProjectionCheck { op, bound, commits }),
            None => {
                let matches = store.projection_matches(&op, &self.inv_commits);
                // The invocation's own commits here (the reduced map only elsewhere).
                let all = std::mem::take(&mut self.inv_commits);
                let check = ProjectionCheck { op, bound, commits };
                let settled = self.settle_check(check, matches, Some(&all), store);
                self.inv_commits = all;
                settled?;
            }
        }
        Ok(())
    }

    /// Finishes an expected operation once it is known whether the store vouched for
    /// its projection rows: counted if so, else looked up and compared row by row, with
    /// `commits_seen` (the invocation's commits) when given, else the two it carries.
    fn settle_check(
        &mut self,
        check: ProjectionCheck,
        matches: bool,
        commits_seen: Option<&HashMap<String, i64>>,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        let ProjectionCheck { op, bound, commits } = check;
        if matches {
            if let Some(ix) = bound {
                let (word, bit) = (ix / 64, 1u64 << (ix % 64));
                if self.vouched_bits.len() <= word {
                    self.vouched_bits.resize(word + 1, 0);
                }
                if self.vouched_bits[word] & bit == 0 {
                    self.vouched_bits[word] |= bit;
                    self.vouched += 1;
                }
            }
            return Ok(());
        }
        let op_id = op.operation_id.clone().unwrap_or_default();
        let id = op_id.to_string();
        let stored = store.operation(&id)?;
        let journal = store.journal(&id)?;
        let carried;
        let commits = match commits_seen {
            Some(all) => all,
            None => {
                carried = projection::commit_map(&op, commits);
                &carried
            }
        };
        for f in projection::operation_projection_findings(&op, stored.as_ref(), &journal, commits)
        {
            self.projection.push((op_id.clone(), f));
        }
        Ok(())
    }

    /// Finishes the operations `batch` carried, with the answers found where it was
    /// decoded ([`EventBatch::check_projections`]). Call before walking its rows.
    pub fn settle_batch_checks(
        &mut self,
        batch: &mut EventBatch,
        store: &mut dyn ScanStore,
    ) -> Result<(), DbError> {
        let checks = std::mem::take(&mut batch.checks);
        debug_assert_eq!(checks.len(), batch.verdicts.len());
        for (i, c) in checks.into_iter().enumerate() {
            // One without an answer (none should be) is compared here.
            let matches = match batch.verdicts.get(i) {
                Some(&v) => v,
                None => store.projection_matches(&c.op, &projection::commit_map(&c.op, c.commits)),
            };
            self.settle_check(c, matches, None, store)?;
        }
        batch.verdicts.clear();
        // Runs not found plainly terminal where the batch was decoded (had it not been
        // asked, `keep` would still drop the plain ones: only slower).
        self.headers_found += std::mem::take(&mut batch.plain_runs);
        for c in std::mem::take(&mut batch.runs) {
            self.settle_run(c, store)?;
        }
        Ok(())
    }

    /// Stops deferring: compares and finishes every operation still waiting, here.
    fn settle_deferred(&mut self, store: &mut dyn ScanStore) -> Result<(), DbError> {
        for c in self.deferred_runs.take().unwrap_or_default() {
            if plainly_terminal(&c.session_id, &c.run_id, &c.acc, store) {
                self.headers_found += 1;
            } else {
                self.settle_run(c, store)?;
            }
        }
        for c in self.deferred.take().unwrap_or_default() {
            let matches =
                store.projection_matches(&c.op, &projection::commit_map(&c.op, c.commits));
            self.settle_check(c, matches, None, store)?;
        }
        Ok(())
    }

    fn assess_run(
        &mut self,
        s: String,
        r: String,
        acc: &RunAcc,
        store: &mut dyn ScanStore,
    ) -> Result<RunResult, DbError> {
        let header = store.header(&s, &r)?;
        Ok(match header {
            Some(row) => {
                self.headers_found += 1;
                assess_with_header(&row, acc, &self.rules.header)
            }
            None if s == WORKSPACE_AUTHORITY_SESSION => {
                RunResult::unassessed(s, r, runs::RunState::NoHeader)
            }
            None if self.rules.runs_on_spine => {
                let opened = acc.opened.clone().or_else(|| store.shelved_opening(&s, &r));
                let fingerprint = self.run_fingerprint(&s, &r);
                let (report, findings) = match opened {
                    Some(turn) => {
                        self.spine_runs.insert(fingerprint);
                        runs::assess_spine_run(&s, &r, &turn, acc)
                    }
                    None => {
                        match runs::assess_unopened_run(&s, &r, acc, store.headers_readable()) {
                            Some(judged) => judged,
                            None => {
                                // Neither a header nor an opening fact says what the run is.
                                if self.unjudged_runs.insert(fingerprint)
                                    && self.unjudged_sample.len() < 3
                                {
                                    self.unjudged_sample.push((s.clone(), r.clone()));
                                }
                                return Ok(RunResult::unassessed(s, r, runs::RunState::NotJudged));
                            }
                        }
                    }
                };
                RunResult::without_header(s, r, report, findings)
            }
            None => {
                let (report, findings) = runs::assess_orphan_run(&s, &r, acc);
                RunResult::without_header(s, r, report, findings)
            }
        })
    }

    fn keep(&mut self, mut result: RunResult) {
        let plain = result.state == runs::RunState::Terminal
            && result.findings.is_empty()
            && result.header_failure.is_none();
        if plain && !self.keep_all_runs {
            return;
        }
        if result.report.is_none() && result.findings.is_empty() && result.header_failure.is_none()
        {
            return;
        }
        if !self.keep_all_runs && plain {
            result.header = None;
        }
        self.run_results.push(result);
    }

    /// Completes the scan: the last invocation, re-assessed runs, headers without
    /// events, late changes to closed operations, extra stored operations and the
    /// ordinal checks; then the report.
    pub fn finish(
        mut self,
        store: &mut dyn ScanStore,
        tables: Tables,
    ) -> Result<ScanReport, DbError> {
        self.settle_deferred(store)?;
        self.close_invocation(store)?;
        // Issues Maka's newer scanner finds once every event is scanned.
        self.scanner.settle_dependencies();
        // Runs whose rows came back in a later invocation: from all their rows.
        for (s, r) in std::mem::take(&mut self.split_runs) {
            let had = self
                .run_results
                .iter()
                .any(|x| x.key.0 == s && x.key.1 == r && x.had_header);
            let found_before = had || store.header(&s, &r)?.is_some();
            if found_before {
                self.headers_found -= 1;
            }
            self.run_results.retain(|x| !(x.key.0 == s && x.key.1 == r));
            let mut acc = RunAcc::default();
            for row in store.run_rows(&s, &r)? {
                let decoded = decode_row_with(&row, &self.rules.decoder).ok();
                acc.add(
                    &row.invocation_id,
                    row.event_seq,
                    &row.event_id,
                    decoded.as_ref(),
                );
            }
            let result = self.assess_run(s, r, &acc, store)?;
            self.keep(result);
        }
        // Headers without events.
        if self.headers_found < store.header_count()? {
            let mut missing = Vec::new();
            let closed = &self.closed_runs;
            let hasher = &self.run_hasher;
            store.for_each_header_key(&mut |s, r, walked| {
                let walked = walked.unwrap_or_else(|| closed.contains(&hasher.hash(&(s, r))));
                if !walked {
                    missing.push((s.to_owned(), r.to_owned()));
                }
                Ok(())
            })?;
            for (s, r) in missing {
                if let Some(row) = store.header(&s, &r)? {
                    let result = assess_with_header(&row, &RunAcc::default(), &self.rules.header);
                    self.keep(result);
                }
            }
        }
        // Operations reached after their invocation ended.
        let late = self.scanner.take_late_touches();
        let mut not_expected: HashSet<JsStr> = HashSet::default();
        let mut not_unsettled: HashSet<JsStr> = HashSet::default();
        for t in &late {
            match t {
                LateTouch::Issue { operation_id, .. } => {
                    not_expected.insert(operation_id.clone());
                    not_unsettled.insert(operation_id.clone());
                }
                LateTouch::Reconcile { operation_id, .. } => {
                    not_expected.insert(operation_id.clone());
                }
                LateTouch::Decision { operation_id, .. } => {
                    not_expected.insert(operation_id.clone());
                    not_unsettled.insert(operation_id.clone());
                }
            }
        }
        let issue_ops: HashSet<JsStr> = self
            .scanner
            .issues()
            .iter()
            .filter_map(|i| i.operation_id.clone())
            .collect();
        self.unsettled.retain(|(op, _)| !not_unsettled.contains(op));
        self.projection
            .retain(|(op, _)| !not_expected.contains(op) && !issue_ops.contains(op));
        // Stored operations no dispatched operation explains: found by a second pass
        // over `tool_operations` (a tenth of the scan at 5M events), unless counting
        // shows there are none.
        let explained = late.is_empty() && self.dispatched_rows_explained(&issue_ops, store)?;
        let mut extras = Vec::new();
        if !explained {
            let scanner = &self.scanner;
            let issue_ops = &issue_ops;
            store.for_each_operation(&mut |row| {
                if row.has_dispatch {
                    let id = JsStr::new(&row.operation_id);
                    if !scanner.is_bound(&id) && !issue_ops.contains(&id) {
                        extras.push(row);
                    }
                }
                Ok(())
            })?;
        }
        extras.sort_by(|a, b| a.operation_id.cmp(&b.operation_id));
        let mut extra_findings = Vec::new();
        for row in &extras {
            let session = store.session_of(&row.invocation_id, &row.run_id)?;
            extra_findings.push(projection::extra_operation_finding(row, session));
        }
        // Re-used operation ids.
        let dup_ops: Vec<_> = self
            .scanner
            .issues()
            .iter()
            .filter(|i| i.code == IssueCode::DuplicateOperation)
            .cloned()
            .collect();
        for issue in &dup_ops {
            let Some(op_id) = &issue.operation_id else {
                continue;
            };
            let owner = self.scanner.binding_dispatch(op_id).map(|d| d.to_string());
            let stored = store.operation(&op_id.to_string())?;
            if let Some(g) = projection::duplicate_operation_group(issue, owner, stored.as_ref()) {
                self.supersession.push(g);
            }
        }
        // Ordinals: gaps per session, and every event has one (sum of id hashes; the
        // exact query runs only if the sums differ).
        let ordinals = store.ordinal_summary(&self.event_hasher)?;
        let (has_ordinals, ord_sum, ordinal_gaps) = (ordinals.present, ordinals.sum, ordinals.gaps);
        let events_without_ordinal = if has_ordinals && ord_sum != self.event_sum {
            store.events_without_ordinal()?
        } else {
            Vec::new()
        };
        Ok(report::build(
            self,
            tables,
            Ordinals {
                events_without_ordinal,
                ordinal_gaps,
            },
            extra_findings,
        ))
    }
}

/// Whether the run has a decodable header known to the store and is plainly
/// terminal: no findings, state `Terminal`.
fn plainly_terminal(s: &str, r: &str, acc: &RunAcc, store: &mut dyn ScanStore) -> bool {
    plain_with_brief(store.header_brief(s, r), s, r, acc)
}

/// [`plainly_terminal`] given the run's brief, wherever it is judged.
fn plain_with_brief(brief: Option<&HeaderBrief>, s: &str, r: &str, acc: &RunAcc) -> bool {
    // `Terminal` has no findings (see `header_run_state`).
    brief.is_some_and(|b| runs::header_run_state(&b.header(s, r), acc) == runs::RunState::Terminal)
}

fn assess_with_header(row: &HeaderRow, acc: &RunAcc, rules: &HeaderRules) -> RunResult {
    let (s, r) = (row.session_id.clone(), row.run_id.clone());
    match decode_header_as(&row.record_json, &row.session_id, &row.run_id, rules) {
        Ok(h) => {
            let (report, findings) = runs::assess_header_run(&h, acc);
            RunResult {
                order: RunOrder::Header(s.clone(), row.created_at, r.clone()),
                key: (s, r),
                had_header: true,
                findings,
                header_failure: None,
                state: report.state,
                report: Some(report),
                header: Some(h),
            }
        }
        Err(e) => RunResult {
            order: RunOrder::HeaderFailed(s.clone(), r.clone()),
            header_failure: Some(
                Finding::new(
                    "run_header_undecodable",
                    format!("run header cannot be decoded: {e}"),
                )
                .session(&s)
                .run(&r),
            ),
            report: Some(runs::header_undecodable_report(&s, &r, acc)),
            key: (s, r),
            had_header: true,
            findings: Vec::new(),
            header: None,
            state: runs::RunState::HeaderUndecodable,
        },
    }
}

/// The ordinal findings' inputs.
#[derive(Default)]
pub struct Ordinals {
    pub events_without_ordinal: Vec<(String, String, String)>,
    pub ordinal_gaps: Vec<(String, i64, i64)>,
}

/// Tool-bearing as Maka's gate defines it: a call or response, or a dispatch or
/// recovery fact.
pub fn is_tool_bearing(event: &RuntimeEvent) -> bool {
    matches!(
        event.content_kind(),
        Some("function_call" | "function_response")
    ) || event
        .actions
        .as_ref()
        .is_some_and(|a| a.tool_dispatch.is_some() || a.tool_recovery.is_some())
}

/// Decodes a row as Maka's store reads it: strict decode, then the row/payload
/// identity check.
pub fn decode_row(row: &EventRow) -> Result<RuntimeEvent, String> {
    decode_row_ref(&row.borrowed())
}

/// [`decode_row`] under the decoder rules of the release that wrote the file, for the
/// walk (which does not read every value: see [`decode_event_text_for_walk`]).
pub fn decode_row_as(
    row: &EventRowRef<'_>,
    rules: &DecoderRules,
) -> Result<Box<RuntimeEvent>, String> {
    let event = match decode_parts_with(decode_event_text_for_walk, row) {
        Ok(event) => event,
        Err(e) => return decode_newer_row(row, rules, e).map(Box::new),
    };
    match older_decoder_rejects(&row.payload_json, rules) {
        None => Ok(event),
        Some(e) => Err(e),
    }
}

/// [`decode_row`] under the decoder rules of the file: main's decoder, then, for a
/// file newer than every known generation, what newer Maka writes
/// ([`crate::event::newer`]). Older releases' restrictions are the walk's
/// ([`decode_row_as`]); replay reads their files with main's decoder.
pub fn decode_row_with(row: &EventRow, rules: &DecoderRules) -> Result<RuntimeEvent, String> {
    let row = row.borrowed();
    decode_row_ref(&row).or_else(|e| decode_newer_row(&row, rules, e))
}

/// After main's decoder refused a row with `main_error`: the row read with what newer
/// generations add, when the rules allow it and the payload uses it, identity checked
/// as Maka's store checks it; else `main_error`.
fn decode_newer_row(
    row: &EventRowRef<'_>,
    rules: &DecoderRules,
    main_error: String,
) -> Result<RuntimeEvent, String> {
    match crate::event::newer::decode_newer(&row.payload_json, rules) {
        None => Err(main_error),
        Some(Err(e)) => Err(e),
        Some(Ok(event)) => identity_matches(&event, row).map(|()| event),
    }
}

/// [`decode_row`] on borrowed columns.
fn decode_row_ref(row: &EventRowRef<'_>) -> Result<RuntimeEvent, String> {
    decode_parts_with(decode_event_text, row)
}

/// [`decode_row_as`] for [`EventBatch::decode`], with the text of a function call's
/// arguments when the decoder left them as `null` (see
/// [`crate::event::decode_event_text_for_batch`]).
fn decode_row_for_batch<'r>(
    row: &'r EventRowRef<'_>,
    rules: &DecoderRules,
) -> (Result<Box<RuntimeEvent>, String>, Option<&'r str>) {
    let (event, raw_args) = match decode_event_text_for_batch(&row.payload_json) {
        Ok((event, raw_args)) => (Ok(event), raw_args),
        Err(e) => (
            decode_newer_row(row, rules, e.to_string()).map(Box::new),
            None,
        ),
    };
    let event = event.and_then(|e| identity_matches(&e, row).map(|()| e));
    match (event, older_decoder_rejects(&row.payload_json, rules)) {
        (Ok(event), None) => (Ok(event), raw_args),
        (Err(e), _) | (Ok(_), Some(e)) => (Err(e), None),
    }
}

fn decode_parts_with<E: Borrow<RuntimeEvent>>(
    decode: fn(&str) -> Result<E, DecodeError>,
    row: &EventRowRef<'_>,
) -> Result<E, String> {
    let decoded = decode(&row.payload_json).map_err(|e| e.to_string())?;
    identity_matches(decoded.borrow(), row)?;
    Ok(decoded)
}

/// The payload's ids are the row's (Maka's store check), or the error the walk gives.
fn identity_matches(event: &RuntimeEvent, row: &EventRowRef<'_>) -> Result<(), String> {
    let matches = event.id == *row.event_id
        && event.session_id == *row.session_id
        && event.invocation_id == *row.invocation_id
        && event.run_id == *row.run_id
        && event.turn_id == *row.turn_id;
    if !matches {
        return Err(format!(
            "RuntimeEvent row/payload identity mismatch for {}",
            row.event_id
        ));
    }
    Ok(())
}

/// A row's payload as the walk takes it.
pub enum Decoded {
    /// Decoded whole ([`decode_row_as`]).
    Event(Box<RuntimeEvent>),
    /// Checked in place as an ordinary, non-terminal event with the row's identity
    /// ([`crate::event::check_ordinary`]): all the walk reads of it but the row.
    Ordinary(Ordinary),
    /// Did not decode: why.
    Failed(String),
}

impl From<Result<Box<RuntimeEvent>, String>> for Decoded {
    fn from(r: Result<Box<RuntimeEvent>, String>) -> Decoded {
        match r {
            Ok(event) => Decoded::Event(event),
            Err(message) => Decoded::Failed(message),
        }
    }
}

/// `runtime_events` rows copied out of SQLite into one buffer, so that their payloads
/// can be decoded on another thread while the next rows are read (decoding is most of
/// a scan's work). Every text column is kept as stored bytes and read as text
/// ([`lossy`], a pass over every byte) where it is decoded: the reading thread is the
/// busier one. Reused: clearing keeps the allocations.
#[derive(Default)]
pub struct EventBatch {
    /// The text columns other than the payload, as stored, until [`EventBatch::decode`]
    /// reads them into `text`.
    stored: Vec<u8>,
    /// The same columns as text, once decoded (with the same ends as in `stored`
    /// unless a column was not UTF-8).
    text: String,
    payloads: Vec<u8>,
    rows: Vec<BatchRow>,
    decoded: Vec<Decoded>,
    /// Per decoded function call, its canonical args hash, computed where it is decoded
    /// (the walk's thread is the busier one).
    args_hashes: Vec<Option<Option<String>>>,
    /// Per row, the walk's hash of its event id, computed there too.
    id_hashes: Vec<u128>,
    /// Per row, its decoded event's tool-ledger lane (`None` when it did not decode).
    lanes: Vec<Option<Option<Lane>>>,
    /// Operations the walk closed before this batch was sent, to compare with the
    /// stored projection where it is decoded ([`Walker::defer_projection_checks`]),
    /// and the answers, in the same order.
    checks: Vec<ProjectionCheck>,
    verdicts: Vec<bool>,
    /// Runs the walk closed before this batch was sent, to judge against their header
    /// briefs where it is decoded ([`Walker::defer_run_checks`]); after
    /// [`EventBatch::check_runs`], only those not plainly terminal, and how many were.
    runs: Vec<RunCheck>,
    plain_runs: u64,
}

/// What the thread that decoded an event worked out for the walk beside it; `None`
/// (the default) is worked out by the walk.
#[derive(Default)]
struct Prepared {
    /// See [`ToolLedgerScanner::push_with_args_hash`].
    args_hash: Option<Option<String>>,
    /// The walk's hash of the event id.
    id_hash: Option<u128>,
    /// See [`ToolLedgerScanner::push_prepared`].
    lane: Option<Option<Lane>>,
}

/// One row of an [`EventBatch`]: where its fields end in the buffers.
struct BatchRow {
    /// Ends of event id, session, invocation, run and turn in `stored`, then in
    /// `text`, in that order.
    ends: [usize; 5],
    /// End of the payload in `payloads`.
    payload_end: usize,
    event_seq: i64,
    committed_at: i64,
}

impl EventBatch {
    /// A batch is sent on when it holds this many rows or this much text.
    const ROWS: usize = 128;
    const TEXT: usize = 256 << 10;

    /// Adds a row whose payload is `payload`, as stored (its `payload_json` is not
    /// read).
    pub fn push(&mut self, row: &StoredEventRow<'_>, payload: &[u8]) {
        debug_assert!(
            self.text.is_empty(),
            "a batch is pushed to only when walked"
        );
        let mut ends = [0; 5];
        for (end, field) in ends.iter_mut().zip(&row.ids) {
            self.stored.extend_from_slice(field);
            *end = self.stored.len();
        }
        self.payloads.extend_from_slice(payload);
        self.rows.push(BatchRow {
            ends,
            payload_end: self.payloads.len(),
            event_seq: row.event_seq,
            committed_at: row.committed_at,
        });
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Full enough to be sent on.
    pub fn is_full(&self) -> bool {
        self.rows.len() >= Self::ROWS || self.stored.len() + self.payloads.len() >= Self::TEXT
    }

    /// Decodes every row, as [`Walker::push_row`] would under the same rules, and
    /// hashes its event id with `ids` (the walk's [`Walker::event_hasher`]).
    pub fn decode(&mut self, rules: &Rules, ids: &EventHasher) {
        self.read_text();
        self.decoded.clear();
        self.args_hashes.clear();
        self.id_hashes.clear();
        self.lanes.clear();
        for i in 0..self.rows.len() {
            let payload = lossy(payload_of(&self.rows, &self.payloads, i));
            let mut row = batch_row(&self.rows, &self.text, i);
            let id_hash = ids.hash(&*row.event_id);
            self.id_hashes.push(id_hash);
            let identity = [
                &*row.event_id,
                &*row.invocation_id,
                &*row.run_id,
                &*row.session_id,
                &*row.turn_id,
            ];
            if let Some(o) = may_be_ordinary(&payload)
                .then(|| check_ordinary(&payload, identity))
                .flatten()
            {
                if older_decoder_rejects(&payload, &rules.decoder).is_none() {
                    self.lanes.push(Some(Some(Lane::Ordinary)));
                    self.args_hashes.push(None);
                    self.decoded.push(Decoded::Ordinary(o));
                    continue;
                }
            }
            row.payload_json = payload;
            let (d, raw_args) = decode_row_for_batch(&row, &rules.decoder);
            self.lanes.push(
                d.as_deref()
                    .ok()
                    .map(|e| tool_ledger_lane_as(e, rules.dispatch_parent_refs)),
            );
            // A call's arguments are hashed here, and only here when the decoder
            // left them as their text (the walk then has `null` for them).
            self.args_hashes.push(match d.as_deref() {
                Ok(RuntimeEvent {
                    content: Some(Content::FunctionCall { name, args, .. }),
                    ..
                }) => Some(
                    match raw_args {
                        Some(text) => crate::args_hash::hash_of_identity_form(name, text),
                        None => crate::args_hash::canonical_tool_args_hash(name, args),
                    }
                    .ok(),
                ),
                _ => None,
            });
            self.decoded.push(Decoded::from(d));
        }
    }

    /// Reads the stored text columns as text, each as [`lossy`] reads it: in one pass
    /// when they are all UTF-8 and no column ends inside a character (then each column
    /// is UTF-8 on its own), else column by column.
    fn read_text(&mut self) {
        let stored = std::mem::take(&mut self.stored);
        let mut spare = std::mem::take(&mut self.text).into_bytes();
        spare.clear();
        let whole = String::from_utf8(stored).map_err(|e| e.into_bytes());
        match whole {
            Ok(text)
                if self
                    .rows
                    .iter()
                    .all(|r| r.ends.iter().all(|&e| text.is_char_boundary(e))) =>
            {
                self.text = text;
                self.stored = spare;
            }
            Ok(text) => self.read_text_by_column(text.into_bytes()),
            Err(stored) => self.read_text_by_column(stored),
        }
    }

    fn read_text_by_column(&mut self, stored: Vec<u8>) {
        let mut text = String::with_capacity(stored.len());
        let mut from = 0;
        for r in &mut self.rows {
            for end in &mut r.ends {
                text.push_str(&lossy(&stored[from..*end]));
                from = *end;
                *end = text.len();
            }
        }
        self.text = text;
        self.stored = stored;
        self.stored.clear();
    }

    /// Carries `runs` ([`Walker::take_run_checks`]) to where it is decoded.
    pub fn carry_runs(&mut self, runs: Vec<RunCheck>) {
        debug_assert!(self.runs.is_empty() && self.plain_runs == 0);
        self.runs = runs;
    }

    /// Judges each run carried against its header brief (`brief`: the store's
    /// [`ScanStore::header_brief`]); drops those plainly terminal, counting them. The
    /// others go back to the walk, which looks their header up.
    pub fn check_runs<'b>(&mut self, brief: impl Fn(&str, &str) -> Option<&'b HeaderBrief>) {
        let before = self.runs.len();
        self.runs.retain(|c| {
            let (s, r) = (&c.session_id, &c.run_id);
            !plain_with_brief(brief(s, r), s, r, &c.acc)
        });
        self.plain_runs += (before - self.runs.len()) as u64;
    }

    /// Carries `checks` ([`Walker::take_projection_checks`]) to where it is decoded.
    pub fn carry_checks(&mut self, checks: Vec<ProjectionCheck>) {
        debug_assert!(self.checks.is_empty());
        self.checks = checks;
    }

    /// Compares each operation carried with the stored projection's digests.
    pub fn check_projections(&mut self, digests: &projection::StoredDigests) {
        self.verdicts.clear();
        self.verdicts.extend(
            self.checks
                .iter()
                .map(|c| digests.matches_at(&c.op, c.commits)),
        );
    }
}

#[cfg(test)]
impl EventBatch {
    /// Row `i` without its payload.
    fn row(&self, i: usize) -> EventRowRef<'_> {
        batch_row(&self.rows, &self.text, i)
    }
}

/// Whether `payload` is worth checking in place as an ordinary event: not when it
/// spells a function call's or response's content kind. A call or response is only
/// found out at its content, a third into its payload, and checking that far cost
/// more than this search; a false alarm (the words inside some other value) only
/// sends the event to be decoded whole.
fn may_be_ordinary(payload: &str) -> bool {
    static FUNCTION: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(br#""kind":"function_"#));
    FUNCTION.find(payload.as_bytes()).is_none()
}

/// Row `i`'s payload among a batch's `payloads`, as stored.
fn payload_of<'a>(rows: &[BatchRow], payloads: &'a [u8], i: usize) -> &'a [u8] {
    let from = if i == 0 { 0 } else { rows[i - 1].payload_end };
    &payloads[from..rows[i].payload_end]
}

/// Row `i` of a batch's `rows` over its `text` (apart from the batch, so that the walk
/// can take decoded events out of it while it reads the row).
fn batch_row<'a>(rows: &[BatchRow], text: &'a str, i: usize) -> EventRowRef<'a> {
    {
        let r = &rows[i];
        let start = if i == 0 { 0 } else { rows[i - 1].ends[4] };
        let mut from = start;
        let mut field = |k: usize| {
            let s = std::borrow::Cow::Borrowed(&text[from..r.ends[k]]);
            from = r.ends[k];
            s
        };
        EventRowRef {
            event_id: field(0),
            session_id: field(1),
            invocation_id: field(2),
            run_id: field(3),
            turn_id: field(4),
            payload_json: std::borrow::Cow::Borrowed(""),
            event_seq: r.event_seq,
            committed_at: r.committed_at,
        }
    }
}

/// What the scan reads from the other tables up front.
#[derive(Default)]
pub struct Tables {
    pub schema: SchemaFacts,
    /// Number of `session_metadata` rows (of sessions seen in events without it).
    pub sessions: usize,
    /// Number of `core_agent_runs` rows.
    pub runs: usize,
    /// Number of `tool_operations` rows.
    pub operations: usize,
    pub integrity: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::{uuid_bytes, uuid_text, EventBatch, HeaderBrief};
    use crate::header::{HeaderStatus, RunHeader};

    #[test]
    fn a_brief_gives_back_the_fields_it_keeps_in_32_bytes() {
        // One is kept per run for the whole scan.
        assert!(std::mem::size_of::<HeaderBrief>() <= 32);
        let header = |turn: &str, failure: Option<&str>, abort: Option<&str>| RunHeader {
            run_id: "r".into(),
            session_id: "s".into(),
            turn_id: turn.into(),
            invocation_id: None,
            status: HeaderStatus::Failed,
            created_at: 1.0,
            updated_at: 2.0,
            completed_at: None,
            failure_class: failure.map(Into::into),
            abort_source: abort.map(Into::into),
            tool_mode: None,
            trace_write_error: None,
            record: serde_json::Map::new(),
        };
        let uuid = "08790f99-7301-4f31-8f22-9f6a34e8a5fc";
        for (turn, failure, abort) in [
            (uuid, None, None),
            (uuid, Some("provider_error"), None),
            (uuid, None, Some("user")),
            ("turn-1", None, None),
            ("turn-1", Some("x"), Some("")),
            ("", Some(""), None),
        ] {
            let b = HeaderBrief::new(&header(turn, failure, abort)).unwrap();
            assert_eq!(
                b.extra.is_none(),
                turn == uuid && failure.is_none() && abort.is_none()
            );
            assert_eq!(b.turn_id(), turn);
            let back = b.header("s", "r");
            assert_eq!(back.turn_id, turn);
            assert_eq!(back.failure_class.as_deref(), failure);
            assert_eq!(back.abort_source.as_deref(), abort);
            assert_eq!(back.status, HeaderStatus::Failed);
        }
    }

    #[test]
    fn a_batch_reads_each_stored_column_as_lossy_reads_it() {
        use crate::db::{lossy, StoredEventRow};
        use std::borrow::Cow;
        // "é" is C3 A9: split between two columns, the whole buffer is UTF-8 but
        // neither column is.
        let rows: Vec<[&[u8]; 5]> = vec![
            [b"e1", b"s", b"i", b"r", b"t"],
            [b"e2", "s\u{e9}".as_bytes(), b"i", b"r", b"t"],
            [b"e3\xff", b"s", b"i\xc3", b"\xa9r", b"t"],
            [b"e4", b"", b"i", b"r", b"t"],
        ];
        let build = |rows: &[[&[u8]; 5]]| {
            let mut batch = EventBatch::default();
            for ids in rows {
                let row = StoredEventRow {
                    ids: ids.map(Cow::Borrowed),
                    event_seq: 1,
                    committed_at: 0,
                };
                batch.push(&row, b"{}");
            }
            batch.read_text();
            batch
        };
        for n in 1..=rows.len() {
            // Every prefix: all-ASCII, valid, and the two ways of failing.
            for shown in [&rows[..n], &rows[n - 1..n]] {
                let batch = build(shown);
                for (i, ids) in shown.iter().enumerate() {
                    let row = batch.row(i);
                    let got = [
                        &row.event_id,
                        &row.session_id,
                        &row.invocation_id,
                        &row.run_id,
                        &row.turn_id,
                    ];
                    for (g, want) in got.iter().zip(ids) {
                        assert_eq!(***g, *lossy(want), "row {i} of {shown:?}");
                    }
                }
            }
        }
        // The split character is read as two replacements, as each column alone is.
        let batch = build(&rows[2..3]);
        assert_eq!(batch.row(0).invocation_id, "i\u{fffd}");
        assert_eq!(batch.row(0).run_id, "\u{fffd}r");
        let batch = build(&[[b"a", b"b\xc3", b"\xa9", b"c", b"d"]]);
        assert_eq!(batch.row(0).session_id, "b\u{fffd}");
    }

    #[test]
    fn a_uuid_turn_id_is_kept_as_bytes_and_comes_back_the_same() {
        let id = "08790f99-7301-4f31-8f22-9f6a34e8a5fc";
        let b = uuid_bytes(id).unwrap();
        assert_eq!(b[0], 0x08);
        assert_eq!(b[15], 0xfc);
        assert_eq!(uuid_text(&b), id);
        // Anything that would not come back byte for byte stays text.
        for other in [
            "08790F99-7301-4f31-8f22-9f6a34e8a5fc",
            "08790f99a7301-4f31-8f22-9f6a34e8a5fc",
            "08790f99-7301-4f31-8f22-9f6a34e8a5f",
            "08790f99-7301-4f31-8f22-9f6a34e8a5fcd",
            "08790f99-7301-4f31-8f22-9f6a34e8a5fg",
            "{8790f99-7301-4f31-8f22-9f6a34e8a5f}",
            "",
        ] {
            assert_eq!(uuid_bytes(other), None, "{other}");
        }
    }
}
