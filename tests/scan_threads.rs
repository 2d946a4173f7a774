//! A scan spreads its work over threads (a second connection for run headers and run
//! events, a decoder thread fed in batches, batches decoded on the reading thread when
//! the decoder is behind). Every way must give the report the one-thread walk gives,
//! on generated workspaces large enough for many batches, with damage of many kinds.

#[allow(dead_code)]
#[path = "../examples/genws.rs"]
mod genws;

mod common;

use std::path::{Path, PathBuf};

use common::maka_bench;
use wsledger::scan::{scan_path, ScanOptions, Threads};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .join("runtime.sqlite")
}

/// The report as JSON, and all of it (runs, headers, ledger issues included) as text.
fn scan(db: &Path, threads: Threads) -> (serde_json::Value, String) {
    scan_as(db, threads, true)
}

/// [`scan`] with or without every run kept: without, plainly terminal runs are
/// judged (on the decoder thread when there is one) and dropped.
fn scan_as(db: &Path, threads: Threads, all_runs: bool) -> (serde_json::Value, String) {
    let opts = ScanOptions {
        all_runs,
        threads,
        ..ScanOptions::default()
    };
    let mut report = scan_path(db, opts, &mut |_, _| {}).unwrap();
    // Handed on to the diagnosis, not something the scan found: gathered only where the
    // journal is read on a thread of its own.
    report.journal_refs = None;
    (
        serde_json::to_value(&report).unwrap(),
        format!("{report:?}"),
    )
}

fn codes(report: &serde_json::Value) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for f in report["findings"].as_array().unwrap() {
        *out.entry(f["code"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    out
}

/// Generates `events` events cloned from `template` with injected damage, and breaks
/// a few run events (spread over the table; some no longer JSON, some naming another
/// turn than their run header's) so that the run-event check finds some.
fn generate(dir: &Path, template: &str, events: u64) -> PathBuf {
    let db = dir.join(format!("{template}.sqlite"));
    let args = genws::Args::new(db.clone(), Some(events), None, 11)
        .template(fixture(template))
        .damage(2, 2, 2);
    genws::run(&args).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n = conn
        .execute(
            "UPDATE core_agent_run_events SET record_json = '{\"type\":' \
             WHERE rowid % 997 = 5",
            [],
        )
        .unwrap();
    assert!(n >= 3, "only {n} run events broken");
    let n = conn
        .execute(
            "UPDATE core_agent_run_events \
             SET record_json = json_set(record_json, '$.turnId', 'not-the-run-turn') \
             WHERE rowid % 1009 = 7",
            [],
        )
        .unwrap();
    assert!(n >= 3, "only {n} run events given another turn");
    close_without_wal(conn);
    assert!(!wsledger::db::wal_path(&db).exists());
    db
}

/// Closes a connection that changed a generated workspace, leaving no `-wal` behind:
/// the scan then opens the file immutable and uses the twin.
fn close_without_wal(conn: rusqlite::Connection) {
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    drop(conn);
}

/// Every way of spreading the scan of `db` gives `one`, the one-thread report.
fn same_in_every_spread(db: &Path, one: &(serde_json::Value, String)) {
    for threads in SPREAD {
        let other = scan(db, threads);
        assert!(other == *one, "{threads:?} differs from one thread");
    }
}

/// Every spread gives the one-thread report: `one` with every run kept, `one_default`
/// without.
fn same_both_ways_in_every_spread(
    db: &Path,
    name: &str,
    one: &(serde_json::Value, String),
    one_default: &(serde_json::Value, String),
) {
    for threads in SPREAD {
        let other = scan(db, threads);
        assert!(other == *one, "{name}: {threads:?} differs from one thread");
        let other = scan_as(db, threads, false);
        assert!(
            other == *one_default,
            "{name}: {threads:?} without every run differs from one thread"
        );
    }
}

/// The ways of spreading the work that must equal [`Threads::One`].
const SPREAD: [Threads; 7] = [
    Threads::Auto,
    Threads::RowReader(0),
    Threads::RowReader(2),
    Threads::RowReader(usize::MAX),
    Threads::AtDecoder(0),
    Threads::AtDecoder(1),
    Threads::AtDecoder(4),
];

#[test]
fn every_way_of_spreading_a_scan_gives_the_one_thread_report() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "healthy",
            vec!["duplicate_call", "orphan_response", "run_stuck_running"],
        ),
        (
            "damage-undecodable-row",
            vec!["event_undecodable", "run_unreadable"],
        ),
        (
            "damage-semantic-lane-conflict",
            vec!["semantic_lane_conflict"],
        ),
        ("crash-mid-tool", vec!["operation_unsettled"]),
    ];
    for (template, expected) in cases {
        let db = generate(dir.path(), template, 3000);
        let one = scan(&db, Threads::One);
        let found = codes(&one.0);
        for code in expected.iter().chain(&["run_event_undecodable"]) {
            assert!(
                found.contains_key(*code),
                "{template}: no {code} in {found:?}"
            );
        }
        let turns = one.0["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                f["message"]
                    .as_str()
                    .unwrap()
                    .contains("turnId differs from the run header's")
            })
            .count();
        assert!(turns >= 3, "{template}: {turns} run events of another turn");
        let events = one.0["summary"]["events"].as_u64().unwrap();
        // Many batches (injected damage drops a few events).
        assert!(events > 2900, "{template}: {events} events");
        let one_default = scan_as(&db, Threads::One, false);
        assert_eq!(one_default.0["findings"], one.0["findings"], "{template}");
        same_both_ways_in_every_spread(&db, template, &one, &one_default);
    }
}

/// Operations whose stored projection rows differ from the log, spread over the file:
/// their comparison with the digests may happen on the decoder thread, after the walk
/// has moved on, and must still give the one-thread report (findings in its order).
#[test]
fn projection_damage_spread_over_many_batches_gives_the_one_thread_report() {
    let dir = tempfile::tempdir().unwrap();
    let db = generate(dir.path(), "healthy", 3000);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let renamed = conn
        .execute(
            "UPDATE tool_operations SET tool_name = tool_name || '_renamed' \
             WHERE rowid % 13 = 3",
            [],
        )
        .unwrap();
    let dropped = conn
        .execute(
            "DELETE FROM tool_journal_events WHERE journal_seq % 17 = 5",
            [],
        )
        .unwrap();
    assert!(
        renamed >= 10 && dropped >= 10,
        "{renamed} renamed, {dropped} dropped"
    );
    close_without_wal(conn);
    let one = scan(&db, Threads::One);
    let found = codes(&one.0);
    for code in [
        "projection_operation_mismatch",
        "projection_journal_missing",
    ] {
        let n = found.get(code).copied().unwrap_or(0);
        assert!(n >= 5, "{n} {code} in {found:?}");
    }
    same_in_every_spread(&db, &one);
}

/// Ordinary events (text, no tool fact) that carry another turn than the first event
/// of their invocation, row and payload alike: the threaded walks check such events
/// in place without decoding them, and must still see the conflict with the
/// invocation's spine that the one-thread walk reports from the decoded event.
#[test]
fn an_ordinary_event_off_its_invocation_spine_gives_the_one_thread_report() {
    let dir = tempfile::tempdir().unwrap();
    let db = generate(dir.path(), "healthy", 3000);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let moved = conn
        .execute(
            "UPDATE runtime_events SET turn_id = 'another-turn', \
             payload_json = json_set(payload_json, '$.turnId', 'another-turn') \
             WHERE event_kind = 'text' AND event_seq > 1 AND rowid % 5 = 2",
            [],
        )
        .unwrap();
    assert!(moved >= 10, "{moved} moved");
    close_without_wal(conn);
    let one = scan(&db, Threads::One);
    let issues = one.1.matches("InvocationIdentityConflict").count();
    assert!(issues >= 10, "{issues} conflicts in {}", one.1);
    same_in_every_spread(&db, &one);
}

/// The same on the workspace Maka wrote (when unpacked): its shape (2,000 sessions,
/// 22k runs, 37k operations) with Maka's own damage; `tests/maka_bench.rs` checks the
/// one-thread report against Maka's verdict.
#[test]
fn every_way_of_spreading_the_bench_workspace_scan_gives_the_one_thread_report() {
    let Some(db) = maka_bench::present() else {
        maka_bench::say_skipped();
        return;
    };
    let one = scan(&db, Threads::One);
    assert_eq!(one.0["summary"]["scanner_issues"], 4);
    let one_default = scan_as(&db, Threads::One, false);
    same_both_ways_in_every_spread(&db, "bench workspace", &one, &one_default);
}

/// The diagnosis counts what quarantine would set aside from each damaged session on
/// another connection while it reads the rest, all sessions in one pass over each
/// tool table: each count must be the rows quarantine reads for that session.
#[test]
fn the_diagnosis_counts_each_damaged_session_as_quarantine_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = generate(dir.path(), "healthy", 3000);
    let (sessions, checked) = wsledger::db::Workspace::read(&db, |ws| {
        let report = wsledger::scan::scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        // The journal's rows reached through an event are counted from the scan's hashes.
        assert!(
            report.journal_refs.is_some(),
            "the scan gathered no journal hashes"
        );
        let (d, _) = wsledger::diagnosis::diagnose_workspace(ws, &report, "generated")?;
        let mut checked = 0;
        for s in &d.damaged_sessions {
            let want = common::rows_set_aside(ws, &s.session_id)?;
            assert_eq!(s.set_aside.rows, want, "{}", s.session_id);
            checked += usize::from(want.get("runtime_events").is_some_and(|n| *n > 0));
        }
        Ok((d.damaged_sessions.len(), checked))
    })
    .unwrap();
    // Several sessions, counted together.
    assert!(sessions >= 3, "{sessions} damaged sessions");
    assert_eq!(checked, sessions);
}
