//! A statement stepped through SQLite's C API, for the scan's passes over whole tables
//! (`runtime_events` in scan order above all).
//!
//! rusqlite reads a column with three calls into SQLite (its type, then its text and
//! its length), each of which looks the column up again; for `runtime_events` on the
//! bench workspace that was about a tenth of the instructions of the thread that reads
//! and walks it, the thread the others wait for. Here a column is looked up once
//! (`sqlite3_column_value`) and read from that value. The values and the errors are
//! rusqlite's: the same [`ValueRef`] for each storage class, and a failed step gives
//! the same `Error::SqliteFailure` (code and message) and resets the statement, as
//! `Rows::next` does.
#![allow(unsafe_code)]

use std::ffi::{c_int, CStr, CString};
use std::marker::PhantomData;
use std::ptr;

use rusqlite::types::ValueRef;
use rusqlite::{ffi, Connection};

/// A prepared statement of `conn`, stepped row by row.
pub(super) struct RawRows<'c> {
    db: *mut ffi::sqlite3,
    stmt: *mut ffi::sqlite3_stmt,
    columns: usize,
    /// Borrows the connection: the statement must be finalized before it closes.
    _conn: PhantomData<&'c Connection>,
}

impl<'c> RawRows<'c> {
    pub(super) fn prepare(conn: &'c Connection, sql: &str) -> rusqlite::Result<RawRows<'c>> {
        // rusqlite prepares it first, so that a statement that does not prepare fails
        // with rusqlite's own error (and its offset into the text).
        let columns = conn.prepare(sql)?.column_count();
        let text = CString::new(sql)?;
        // SAFETY: `conn` is open for `'c`, and this thread has it (`Connection` is not
        // `Sync`); rusqlite hands out its handle for calls like this one.
        let db = unsafe { conn.handle() };
        let mut stmt = ptr::null_mut();
        // SAFETY: a valid handle, a NUL-terminated text, and out-pointers to locals.
        let rc =
            unsafe { ffi::sqlite3_prepare_v2(db, text.as_ptr(), -1, &mut stmt, ptr::null_mut()) };
        if rc != ffi::SQLITE_OK {
            // SAFETY: `db` is valid; a failed prepare leaves `stmt` null.
            return Err(unsafe { error_from_handle(db, rc) });
        }
        Ok(RawRows {
            db,
            stmt,
            columns,
            _conn: PhantomData,
        })
    }

    /// The next row: `Ok(true)` when there is one.
    pub(super) fn step(&mut self) -> rusqlite::Result<bool> {
        // SAFETY: `stmt` is a live statement of `db`, used on one thread.
        match unsafe { ffi::sqlite3_step(self.stmt) } {
            ffi::SQLITE_ROW => Ok(true),
            ffi::SQLITE_DONE => Ok(false),
            rc => {
                // SAFETY: as above; the message is read before the reset clears it.
                let e = unsafe { error_from_handle(self.db, rc) };
                // SAFETY: as above.
                unsafe { ffi::sqlite3_reset(self.stmt) };
                Err(e)
            }
        }
    }

    /// Column `i` of the current row (valid until the next step), as rusqlite's
    /// `Row::get_ref` gives it.
    pub(super) fn value(&self, i: usize) -> rusqlite::Result<ValueRef<'_>> {
        if i >= self.columns {
            return Err(rusqlite::Error::InvalidColumnIndex(i));
        }
        let col = i as c_int;
        // SAFETY: `i` is a column of the statement, which is on a row (callers read
        // columns only after `step` gave `true`). The value and the bytes it points to
        // stay valid until the next step or reset, which need `&mut self`, while the
        // slice returned borrows `self`.
        unsafe {
            let v = ffi::sqlite3_column_value(self.stmt, col);
            Ok(match ffi::sqlite3_value_type(v) {
                ffi::SQLITE_NULL => ValueRef::Null,
                ffi::SQLITE_INTEGER => ValueRef::Integer(ffi::sqlite3_value_int64(v)),
                ffi::SQLITE_FLOAT => ValueRef::Real(ffi::sqlite3_value_double(v)),
                ffi::SQLITE_TEXT => {
                    // The text first, then its length in those bytes (SQLite's rule).
                    let text = ffi::sqlite3_value_text(v);
                    let len = ffi::sqlite3_value_bytes(v);
                    if text.is_null() {
                        // Out of memory converting it: as rusqlite, no text.
                        return Err(rusqlite::Error::SqliteFailure(
                            ffi::Error::new(ffi::SQLITE_NOMEM),
                            None,
                        ));
                    }
                    ValueRef::Text(std::slice::from_raw_parts(text, len.max(0) as usize))
                }
                _ => {
                    let blob = ffi::sqlite3_value_blob(v);
                    let len = ffi::sqlite3_value_bytes(v);
                    if len > 0 && !blob.is_null() {
                        ValueRef::Blob(std::slice::from_raw_parts(blob.cast::<u8>(), len as usize))
                    } else {
                        // A zero-length BLOB has a null pointer.
                        ValueRef::Blob(&[])
                    }
                }
            })
        }
    }
}

impl Drop for RawRows<'_> {
    fn drop(&mut self) {
        // SAFETY: the statement is live and finalized once, before the connection
        // closes (`_conn` borrows it).
        unsafe { ffi::sqlite3_finalize(self.stmt) };
    }
}

/// rusqlite's error for a failed call on `db` (its `error_from_handle`, which it does
/// not export): the code, and SQLite's message when it is about that code.
///
/// # Safety
/// `db` must be a valid connection handle.
unsafe fn error_from_handle(db: *mut ffi::sqlite3, code: c_int) -> rusqlite::Error {
    let text = |p: *const std::ffi::c_char| {
        // SAFETY: SQLite's messages are NUL-terminated and live until the next call.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    // SAFETY: `db` is valid (the caller's promise).
    let message = unsafe {
        if ffi::sqlite3_errcode(db) == code {
            text(ffi::sqlite3_errmsg(db))
        } else {
            text(ffi::sqlite3_errstr(code))
        }
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE t(v);
             INSERT INTO t VALUES (NULL), (0), (-7), (9223372036854775807), (1.5), (-0.0),
               (''), ('text'), ('caf' || char(233)), (CAST(x'ff00fe' AS TEXT)), (x''),
               (x'00ff'), (zeroblob(3));",
        )
        .unwrap();
        c
    }

    #[test]
    fn every_value_reads_as_rusqlite_reads_it() {
        let c = conn();
        for sql in ["SELECT v FROM t", "SELECT v, typeof(v), v FROM t"] {
            let mut want = Vec::new();
            let mut stmt = c.prepare(sql).unwrap();
            let n = stmt.column_count();
            let mut rows = stmt.query([]).unwrap();
            while let Some(r) = rows.next().unwrap() {
                want.push(
                    (0..n)
                        .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                        .collect::<Vec<String>>(),
                );
            }
            let mut got = Vec::new();
            let mut raw = RawRows::prepare(&c, sql).unwrap();
            while raw.step().unwrap() {
                got.push(
                    (0..n)
                        .map(|i| format!("{:?}", raw.value(i).unwrap()))
                        .collect::<Vec<String>>(),
                );
            }
            assert_eq!(got, want, "{sql}");
            assert_eq!(got.len(), 13);
            assert!(matches!(raw.value(n), Err(rusqlite::Error::InvalidColumnIndex(k)) if k == n));
        }
    }

    #[test]
    fn errors_are_rusqlite_errors() {
        let c = conn();
        // A statement that does not prepare.
        let want = c.prepare("SELECT nope FROM t").unwrap_err();
        let got = RawRows::prepare(&c, "SELECT nope FROM t").err().unwrap();
        assert_eq!(got.to_string(), want.to_string());
        // A step that fails (integer overflow in abs()), then the statement again.
        let sql = "SELECT abs(-9223372036854775807 - 1)";
        let mut stmt = c.prepare(sql).unwrap();
        let want = stmt.query([]).unwrap().next().err().unwrap();
        let mut raw = RawRows::prepare(&c, sql).unwrap();
        let got = raw.step().unwrap_err();
        assert_eq!(got.sqlite_error_code(), want.sqlite_error_code());
        assert_eq!(got.to_string(), want.to_string());
        // Reset after the failure: it steps (and fails) again rather than misusing.
        assert_eq!(raw.step().unwrap_err().to_string(), want.to_string());
    }
}
