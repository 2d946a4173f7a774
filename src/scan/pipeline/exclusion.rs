//! What Maka's conversation deletion of some sessions removes, for the scan of a
//! workspace as it would be afterwards.

use std::collections::{BTreeSet, HashSet};

use crate::db::{DbError, OperationRow, Workspace};

/// What Maka's conversation deletion of some sessions removes, for a scan of the
/// workspace as it would be afterwards (`doctor quarantine`'s "after"). Empty for an
/// ordinary scan.
#[derive(Default)]
pub(super) struct Exclusion {
    pub(super) sessions: BTreeSet<String>,
    /// Event ids of those sessions.
    pub(super) events: HashSet<String>,
    /// Operation ids whose call, dispatch or result event is theirs (Maka's purge
    /// deletes those rows and their journal).
    pub(super) operations: HashSet<String>,
}

impl Exclusion {
    pub(super) fn read(
        ws: &Workspace,
        sessions: &BTreeSet<String>,
        has_ops: bool,
    ) -> Result<Exclusion, DbError> {
        let mut gone = Exclusion {
            sessions: sessions.clone(),
            ..Exclusion::default()
        };
        if sessions.is_empty() {
            return Ok(gone);
        }
        for s in sessions {
            gone.events
                .extend(ws.session_events(s)?.into_iter().map(|r| r.event_id));
        }
        if has_ops {
            for o in ws.tool_operations()? {
                let touched = [
                    Some(&o.call_event_id),
                    o.dispatch_event_id.as_ref(),
                    o.result_event_id.as_ref(),
                ]
                .into_iter()
                .flatten()
                .any(|id| gone.events.contains(id));
                if touched {
                    gone.operations.insert(o.operation_id);
                }
            }
        }
        Ok(gone)
    }

    pub(super) fn session(&self, s: &str) -> bool {
        self.sessions.contains(s)
    }

    /// [`Exclusion::session`] of a column's stored bytes (read as text only when
    /// sessions are excluded: most scans exclude none).
    pub(super) fn stored_session(&self, s: &[u8]) -> bool {
        !self.sessions.is_empty() && self.session(&crate::db::lossy(s))
    }

    pub(super) fn operation(&self, row: &Option<OperationRow>) -> bool {
        row.as_ref()
            .is_some_and(|r| self.operations.contains(&r.operation_id))
    }
}
