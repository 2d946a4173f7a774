//! The Task Ledger's events (`workflow_task_ledger_events`), for the upgrade preview's
//! Maka 0.2 target, whose first open drops the table (`release::maka02`).

use super::{DbError, Workspace};

impl Workspace {
    /// Every task-ledger event as `(session_id, record_json)`, per session in
    /// `sequence` order (as Maka projects them). A value that is not text is passed as
    /// `None`. Nothing without the table.
    pub fn for_each_task_event(
        &self,
        mut f: impl FnMut(&str, Option<&str>),
    ) -> Result<(), DbError> {
        if !self.has_table("workflow_task_ledger_events")? {
            return Ok(());
        }
        let e = |e: rusqlite::Error| self.err(&e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT CAST(session_id AS TEXT), record_json FROM workflow_task_ledger_events \
                 ORDER BY session_id, sequence",
            )
            .map_err(e)?;
        let mut rows = stmt.query([]).map_err(e)?;
        while let Some(r) = rows.next().map_err(e)? {
            let session: String = r
                .get::<_, Option<String>>(0)
                .map_err(e)?
                .unwrap_or_default();
            let record = match r.get_ref(1).map_err(e)? {
                rusqlite::types::ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
                _ => None,
            };
            f(&session, record.as_deref());
        }
        Ok(())
    }
}
