//! The scan's pipeline: which connections and threads read, decode and walk the
//! ledger, how deep their queues are, and the reads before and after the walk.

mod exclusion;
mod header_briefs;
mod report_assembly;
mod side_checks;
mod store;
mod walk_threads;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use crate::db::{DbError, Workspace};
use crate::scan::{OrdinalSummary, ScanReport, Walker};

use exclusion::Exclusion;
use header_briefs::read_briefs;
use report_assembly::{finish_scan, unread_ledger};
use side_checks::{run_event_findings, session_header_findings};
use store::{ordinals_of, Store};
use walk_threads::{walk_beside_reader, walk_events};

/// Options of a scan.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanOptions {
    /// Also run SQLite's `PRAGMA quick_check` over the whole file.
    pub integrity: bool,
    /// Keep a report for every run in [`ScanReport::runs`] (by default only runs that
    /// are not plainly terminal are kept, so memory does not grow with the file).
    pub all_runs: bool,
    /// The progress callback does not use the total (no bar is shown): skip counting
    /// `runtime_events` before the walk (the callback then gets 0 as the total).
    pub no_total: bool,
    /// How the work is spread over threads. Every way gives the same report; tests
    /// compare them.
    pub threads: Threads,
    /// Judge the file with these release rules instead of those of the release that
    /// wrote it (the upgrade preview).
    pub rules: Option<crate::release::Rules>,
    /// `--maka`: whose start-up `startup` speaks for (default: the writer's), or every
    /// catalogued build's as well (`compatibility`).
    pub maka: Option<crate::startup::builds::Maka>,
}

/// Batches at the decoder at once by default. The reading thread is the busier one
/// (it also walks, and shares the cores with the second connection), so it decodes a
/// batch itself only when the decoder is well behind: on the bench workspace 4 took
/// about 0.86 of the time 2 took, for 2 to 5 MB more memory.
const AUTO_AT_DECODER: usize = 4;

/// See [`walk_beside_reader`]: by default the reading thread decodes a batch itself
/// while this many are waiting to be walked (on the bench workspace 1 to 5 were
/// within noise of each other, never decoding there 10% slower), and stops reading
/// while [`ROWS_QUEUED`] are (8 was no faster than 4, for about 3 MB more at 1M events).
const DECODE_BEHIND: usize = 2;
const ROWS_QUEUED: usize = 4;

/// See [`ScanOptions::threads`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// Headers and run events on a second connection when one sees the same data, and
    /// the rows read on a third while this thread decodes and walks them
    /// (`RowReader(2)`); without such connections, payloads decoded on a second thread
    /// while the next rows are read (`AtDecoder(4)`).
    #[default]
    Auto,
    /// Everything on the calling thread, row by row.
    One,
    /// Rows read on a thread and connection of their own, which also decodes a batch
    /// while at least this many wait to be walked (`0`: every batch), while this thread
    /// decodes the rest and walks; when no other connection is certain to see the same
    /// data, as `AtDecoder(4)`. What `Auto` does, with [`DECODE_BEHIND`].
    RowReader(usize),
    /// Rows read, and walked, here, with at most this many batches at a decoder thread
    /// at once (`0`: every batch decoded on the reading thread).
    AtDecoder(usize),
}

/// Reads every table the scan needs and computes the report. `progress` is called
/// with (rows read, total rows) now and then.
pub fn scan_workspace(
    ws: &Workspace,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    // The preview reads the same snapshot as the scan.
    let _snapshot = ws.read_snapshot()?;
    let mut report = scan_workspace_without(ws, opts, &BTreeSet::new(), progress)?;
    if report.workspace_release.known_from != crate::db::KnownFrom::Build {
        // A Maka newer than this wsledger: its own start-up and any upgrade are not known;
        // an older build named by `--maka` is judged by its checks of the versions alone.
        super::startup::attach_not_known(ws, opts, &mut report)?;
        return Ok(report);
    }
    let facts = ws.startup_facts()?;
    if opts.rules.is_none() {
        super::startup::attach_builds(ws, opts, &mut report, &facts)?;
    } else {
        super::startup::attach_startup(ws, &mut report, &facts)?;
    }
    Ok(report)
}

/// Scans the workspace as it would be after Maka's conversation deletion of the
/// `excluded` sessions (`doctor quarantine`'s "after"): their events, run headers and
/// session rows are left out, and so are the tool operations whose call, dispatch or
/// result event is theirs and the journal rows Maka's purge deletes with them.
pub fn scan_workspace_without(
    ws: &Workspace,
    opts: ScanOptions,
    excluded: &BTreeSet<String>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    // One snapshot for every read on this connection (a second one is used only
    // where nothing can change, see `reader_twin`).
    let _snapshot = ws.read_snapshot()?;
    let schema = ws.schema_facts()?;
    let rules = opts
        .rules
        .unwrap_or_else(|| crate::release::recognize(&schema).rules());
    // Tables are read by shape (`db::shape`): one of a shape wsledger does not read
    // is treated as absent, and the report names it.
    let readable = crate::db::shape::ReadableTables::of(&schema.objects);
    let has = |t: &str| readable.reads(t);
    let has_sessions = has("session_metadata");
    // A newer Maka's `core_agent_runs` holds no headers (no `record_json`).
    let (has_headers, has_operations, has_journal, has_ordinals, has_run_events) = (
        has("core_agent_runs") && ws.has_header_records()?,
        has("tool_operations"),
        has("tool_journal_events"),
        has("runtime_session_event_ordinals"),
        has("core_agent_run_events"),
    );
    if !schema.tables.iter().any(|t| t == "runtime_events") {
        return Err(DbError::NotAWorkspace {
            path: ws.path().to_path_buf(),
        });
    }
    if !has("runtime_events") {
        return unread_ledger(ws, opts, schema);
    }
    let total = if opts.no_total { 0 } else { ws.event_count()? };
    let gone = Exclusion::read(ws, excluded, has_operations)?;
    // A second connection, when one sees exactly what this one does (see below).
    let twin = if opts.threads != Threads::One && (has_run_events || has_headers) {
        ws.sequential_reader()?
    } else {
        None
    };
    std::thread::scope(|scope| {
        let mut walker = Walker::new().keep_all_runs(opts.all_runs).with_rules(rules);
        // The twin reads the run headers (which the walk needs first) while this thread
        // and a third read the tool projections; then it checks the run events, reduces
        // the ordinal rows and checks the session headers (needed only at the walk's
        // end) at background priority. Should it not start, all of it happens here.
        let (briefs_tx, briefs_rx) = std::sync::mpsc::channel();
        // Never sent on: dropped when this closure returns, early on an error, which
        // tells the twin that nothing it would still do is wanted.
        let (_stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let hasher = walker.event_hasher();
        let beside = twin.and_then(|t| {
            let gone = &gone;
            std::thread::Builder::new()
                .name("headers-run-events".into())
                .spawn_scoped(scope, move || {
                    let briefs =
                        read_briefs(&t, has_headers, gone, &rules.header).map(|b| b.map(Arc::new));
                    let mine = briefs.as_ref().ok().cloned().flatten();
                    let _ = briefs_tx.send(briefs);
                    // What is left here is needed only when the walk ends. It starts at
                    // once, at background priority: while the tool projections are still
                    // hashed, a core would otherwise wait. Between steps it stops if the
                    // scan has stopped (an error drops the sender).
                    crate::background::lower_this_thread();
                    let stopped = || {
                        matches!(
                            stop_rx.try_recv(),
                            Err(std::sync::mpsc::TryRecvError::Disconnected)
                        )
                        .then(|| DbError::Io {
                            path: t.path().to_path_buf(),
                            source: std::io::Error::other("the scan stopped"),
                        })
                    };
                    if let Some(e) = stopped() {
                        return Err(e);
                    }
                    let bad = if has_run_events {
                        run_event_findings(&t, gone, mine.as_deref(), &rules.header)?
                    } else {
                        Vec::new()
                    };
                    if let Some(e) = stopped() {
                        return Err(e);
                    }
                    let ordinals =
                        OrdinalSummary::read(&hasher, |f| ordinals_of(&t, has_ordinals, gone, f))?;
                    if let Some(e) = stopped() {
                        return Err(e);
                    }
                    let sessions = if has_sessions {
                        session_header_findings(&t, gone, &rules)?
                    } else {
                        Vec::new()
                    };
                    Ok((bad, ordinals, sessions))
                })
                .ok()
        });
        let mut store = Store {
            ws,
            has_headers,
            has_operations,
            has_journal,
            has_ordinals,
            gone: &gone,
            digests: None,
            dispatched_rows: 0,
            briefs: None,
            walked: Vec::new(),
            ordinals: None,
            journal_refs: None,
            shelved: if rules.runs_on_spine {
                ws.shelved_openings()?
            } else {
                Default::default()
            },
        };
        let operation_rows = if has_operations {
            usize::try_from(ws.count_rows("tool_operations")?).unwrap_or(0)
        } else {
            0
        };
        // Operations are bound by dispatch events: never more than the events.
        let events = usize::try_from(total).unwrap_or(usize::MAX);
        walker.expect_operations(if total > 0 {
            operation_rows.min(events)
        } else {
            operation_rows
        });
        let journal_reader = if opts.threads == Threads::One {
            None
        } else {
            ws.sequential_reader()?
        };
        store.read_digests(operation_rows, journal_reader, scope)?;
        store.briefs = match briefs_rx.recv() {
            Ok(briefs) => briefs?,
            Err(_) => read_briefs(ws, has_headers, &gone, &rules.header)?.map(Arc::new),
        };
        let at_decoder = match opts.threads {
            Threads::Auto | Threads::RowReader(_) => Some(AUTO_AT_DECODER),
            Threads::One => None,
            Threads::AtDecoder(k) => Some(k),
        };
        let (row_reader, decode_behind) = match opts.threads {
            Threads::Auto => (ws.rows_reader()?, DECODE_BEHIND),
            Threads::RowReader(k) => (ws.rows_reader()?, k),
            Threads::One | Threads::AtDecoder(_) => (None, 0),
        };
        let mut progress = |n| progress(n, total);
        let walked = match row_reader {
            Some(reader) => walk_beside_reader(
                reader,
                decode_behind,
                &mut walker,
                &mut store,
                scope,
                &mut progress,
            )?,
            None => false,
        };
        if !walked {
            walk_events(
                ws,
                &mut walker,
                &mut store,
                scope,
                at_decoder,
                &mut progress,
            )?;
        }
        let bad = match beside {
            Some(h) => {
                let (mut bad, ordinals, sessions) =
                    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
                store.ordinals = Some(ordinals);
                bad.extend(sessions);
                bad
            }
            None => {
                let mut bad = if has_run_events {
                    run_event_findings(ws, &gone, store.briefs.as_deref(), &rules.header)?
                } else {
                    Vec::new()
                };
                if has_sessions {
                    bad.extend(session_header_findings(ws, &gone, &rules)?);
                }
                bad
            }
        };
        // Tests change the file here, under a read that is half done.
        crate::db::pause_point("scan:walked");
        let mut report = finish_scan(ws, opts, schema, excluded, walker, &mut store)?;
        if !bad.is_empty() {
            report.findings.extend(bad);
            report.recount();
        }
        // Runs of sessions Maka does not list are not judged (issue notes, 37).
        let mut outside = ws.runs_outside_sessions()?;
        outside.retain(|(s, _)| !gone.session(s));
        crate::scan::listed::set_aside_unlisted_runs(&mut report, &outside);
        // The store's own check before any append: every continuation-claim row.
        let claims: Vec<_> = ws
            .claim_rows()?
            .into_iter()
            .filter(|c| !gone.session(&c.target_session_id))
            .filter_map(|c| crate::scan::listed::claim_row_problem(&c).map(|why| (c, why)))
            .collect();
        let mut listed = BTreeSet::new();
        if !claims.is_empty() && has_sessions {
            for (c, _) in &claims {
                if ws.session_exists(&c.target_session_id)? {
                    listed.insert(c.target_session_id.clone());
                }
            }
        }
        crate::scan::listed::refuse_appends_on_claims(&mut report, &claims, &listed);
        report.summary.live_snapshot = ws.is_live();
        Ok(report)
    })
}

/// Opens `db` read-only and scans it (at one snapshot, see [`Workspace::read`]).
pub fn scan_path(
    db: &Path,
    opts: ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScanReport, DbError> {
    Workspace::read(db, |ws| scan_workspace(ws, opts, progress))
}
