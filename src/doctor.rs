//! Commands' building blocks that combine the database with the pure core: open,
//! read, compute. Rendering and argument handling stay in `cli`.

use std::path::Path;

use crate::db::{
    DbError, EventRow, HeaderRow, JournalRow, OperationRow, StoredOperationKey, Workspace,
};
use crate::scan::{ScanReport, ScanStore, Tables, Walker};

/// Options of a scan.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanOptions {
    /// Also run SQLite's `PRAGMA quick_check` over the whole file.
    pub integrity: bool,
    /// Keep a report for every run in [`ScanReport::runs`] (by default only runs that
    /// are not plainly terminal are kept, so memory does not grow with the file).
    pub all_runs: bool,
}

/// The scan's point lookups, on the workspace's connection.
struct Store<'a> {
    ws: &'a Workspace,
    has_headers: bool,
    has_operations: bool,
    has_journal: bool,
    has_ordinals: bool,
}

impl ScanStore for Store<'_> {
    fn header(&mut self, session_id: &str, run_id: &str) -> Result<Option<HeaderRow>, DbError> {
        if !self.has_headers {
            return Ok(None);
        }
        self.ws.header_of(session_id, run_id)
    }
    fn operation(&mut self, operation_id: &str) -> Result<Option<OperationRow>, DbError> {
        if !self.has_operations {
            return Ok(None);
        }
        self.ws.operation_of(operation_id)
    }
    fn operation_by_call(
        &mut self,
        invocation_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<OperationRow>, DbError> {
        if !self.has_operations {
            return Ok(None);
        }
        self.ws.operation_by_call(invocation_id, tool_call_id)
    }
    fn journal(&mut self, operation_id: &str) -> Result<Vec<JournalRow>, DbError> {
        if !self.has_journal {
            return Ok(Vec::new());
        }
        self.ws.journal_of(operation_id)
    }
    fn run_rows(&mut self, session_id: &str, run_id: &str) -> Result<Vec<EventRow>, DbError> {
        self.ws.run_event_rows(session_id, run_id)
    }
    fn header_count(&mut self) -> Result<u64, DbError> {
        if !self.has_headers {
            return Ok(0);
        }
        self.ws.count_rows("core_agent_runs")
    }
    fn for_each_header_key(
        &mut self,
        f: &mut dyn FnMut(&str, &str) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        if !self.has_headers {
            return Ok(());
        }
        self.ws.for_each_header_key(f)
    }
    fn for_each_operation(
        &mut self,
        f: &mut dyn FnMut(StoredOperationKey) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        if !self.has_operations {
            return Ok(());
        }
        self.ws.for_each_stored_operation(f)
    }
    fn session_of(&mut self, invocation_id: &str, run_id: &str) -> Result<Option<String>, DbError> {
        self.ws.session_of_run_events(invocation_id, run_id)
    }
    fn for_each_ordinal(&mut self, f: &mut dyn FnMut(&str, i64, &str)) -> Result<bool, DbError> {
        if !self.has_ordinals {
            return Ok(false);
        }
        self.ws.for_each_ordinal(f)?;
        Ok(true)
    }
    fn events_without_ordinal(&mut self) -> Result<Vec<(String, String, String)>, DbError> {
        if !self.has_ordinals {
            return Ok(Vec::new());
        }
        self.ws.events_without_ordinal()
    }
}

/// Reads every table the scan needs and computes the report. `progress` is called
/// with (rows read, total rows) now and then.
pub fn scan_workspace(
    ws: &Workspace,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    let schema = ws.schema_facts()?;
    let has = |t: &str| schema.tables.iter().any(|x| x == t);
    if !has("runtime_events") {
        return Err(DbError::NotAWorkspace {
            path: ws.path().to_path_buf(),
        });
    }
    let total = ws.event_count()?;
    let mut store = Store {
        ws,
        has_headers: has("core_agent_runs"),
        has_operations: has("tool_operations"),
        has_journal: has("tool_journal_events"),
        has_ordinals: has("runtime_session_event_ordinals"),
    };
    let mut walker = Walker::new().keep_all_runs(opts.all_runs);
    let mut n = 0u64;
    ws.for_each_event_ref(|row| {
        walker.push_row(row, &mut store)?;
        n += 1;
        if n.is_multiple_of(4096) {
            progress(n, total);
        }
        Ok(())
    })?;
    progress(n, total);
    let count = |t: &str| -> Result<usize, DbError> {
        Ok(if has(t) {
            ws.count_rows(t)? as usize
        } else {
            0
        })
    };
    let tables = Tables {
        sessions: if has("session_metadata") {
            count("session_metadata")?
        } else {
            ws.event_session_count()? as usize
        },
        runs: count("core_agent_runs")?,
        operations: count("tool_operations")?,
        integrity: if opts.integrity {
            Some(ws.quick_check()?)
        } else {
            None
        },
        schema,
    };
    walker.finish(&mut store, tables)
}

/// Opens `db` read-only and scans it.
pub fn scan_path(
    db: &Path,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    let ws = Workspace::open_read_only(db)?;
    scan_workspace(&ws, opts, progress)
}
