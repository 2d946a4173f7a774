//! What the walk keeps about one run while its invocation is current: rows, the
//! last sequence number and time, terminal events and the opening fact's turn.

use crate::event::{Content, RuntimeEvent};

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
    pub(super) fn note_opening(&mut self, event: &RuntimeEvent) {
        if !event.partial && matches!(event.content, Some(Content::InvocationOpened { .. })) {
            self.opened = Some(event.turn_id.to_string_lossy());
        }
    }

    /// [`RunAcc::add`] but for keeping a terminal event, which the caller does; `ts`
    /// is the event's when it decoded.
    pub(super) fn add_row(
        &mut self,
        invocation_id: &str,
        event_seq: i64,
        event_id: &str,
        ts: Option<f64>,
    ) {
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
