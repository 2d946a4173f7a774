//! [`EventBatch`]: `runtime_events` rows copied into one buffer and decoded on another
//! thread, with what that thread works out for the walk (hashes, lanes, carried checks).

use super::decode::decode_row_for_batch;
use super::judge_runs::plain_with_brief;
use super::{projection, Decoded, EventHasher, HeaderBrief, ProjectionCheck, RunCheck};
use crate::db::{lossy, EventRowRef, StoredEventRow};
use crate::event::{check_ordinary, Content, RuntimeEvent};
use crate::ledger::scanner::{tool_ledger_lane_as, Lane};
use crate::release::compat::older_decoder_rejects;
use crate::release::Rules;

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
    pub(super) text: String,
    pub(super) payloads: Vec<u8>,
    pub(super) rows: Vec<BatchRow>,
    pub(super) decoded: Vec<Decoded>,
    /// Per decoded function call, its canonical args hash, computed where it is decoded
    /// (the walk's thread is the busier one).
    pub(super) args_hashes: Vec<Option<Option<String>>>,
    /// Per row, the walk's hash of its event id, computed there too.
    pub(super) id_hashes: Vec<u128>,
    /// Per row, its decoded event's tool-ledger lane (`None` when it did not decode).
    pub(super) lanes: Vec<Option<Option<Lane>>>,
    /// Operations the walk closed before this batch was sent, to compare with the
    /// stored projection where it is decoded ([`Walker::defer_projection_checks`]),
    /// and the answers, in the same order.
    pub(super) checks: Vec<ProjectionCheck>,
    pub(super) verdicts: Vec<bool>,
    /// Runs the walk closed before this batch was sent, to judge against their header
    /// briefs where it is decoded ([`Walker::defer_run_checks`]); after
    /// [`EventBatch::check_runs`], only those not plainly terminal, and how many were.
    pub(super) runs: Vec<RunCheck>,
    pub(super) plain_runs: u64,
}

/// What the thread that decoded an event worked out for the walk beside it; `None`
/// (the default) is worked out by the walk.
#[derive(Default)]
pub(super) struct Prepared {
    /// See [`ToolLedgerScanner::push_with_args_hash`].
    pub(super) args_hash: Option<Option<String>>,
    /// The walk's hash of the event id.
    pub(super) id_hash: Option<u128>,
    /// See [`ToolLedgerScanner::push_prepared`].
    pub(super) lane: Option<Option<Lane>>,
}

/// One row of an [`EventBatch`]: where its fields end in the buffers.
pub(super) struct BatchRow {
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
pub(super) fn payload_of<'a>(rows: &[BatchRow], payloads: &'a [u8], i: usize) -> &'a [u8] {
    let from = if i == 0 { 0 } else { rows[i - 1].payload_end };
    &payloads[from..rows[i].payload_end]
}

/// Row `i` of a batch's `rows` over its `text` (apart from the batch, so that the walk
/// can take decoded events out of it while it reads the row).
pub(super) fn batch_row<'a>(rows: &[BatchRow], text: &'a str, i: usize) -> EventRowRef<'a> {
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
#[cfg(test)]
mod tests {
    use super::EventBatch;
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
}
