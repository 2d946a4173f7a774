//! `wsledger::db::tune_sqlite_for_this_process`, as the binary calls it first thing.
//! The only test in this file: it must be the first to touch SQLite in its process.

#[test]
fn memory_statistics_are_off_when_tuned_first_and_the_second_call_is_refused() {
    assert!(
        wsledger::db::tune_sqlite_for_this_process(),
        "before any connection, SQLite takes the setting"
    );
    let c = rusqlite::Connection::open_in_memory().unwrap();
    c.execute_batch(
        "CREATE TABLE t(x); \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) \
         INSERT INTO t SELECT hex(randomblob(200)) FROM n;",
    )
    .unwrap();
    // With the statistics on, this counts every byte SQLite holds for `c`.
    #[allow(unsafe_code)]
    // SAFETY: takes no arguments and only reads a counter.
    let used = unsafe { rusqlite::ffi::sqlite3_memory_used() };
    assert_eq!(used, 0, "SQLite still counts its memory");
    assert!(
        !wsledger::db::tune_sqlite_for_this_process(),
        "once SQLite is initialized the call changes nothing"
    );
    drop(c);
}
