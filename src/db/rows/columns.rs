//! Reading a column as stored: text (lossy where not UTF-8), optional text and integers,
//! from rusqlite's rows or rows stepped through SQLite's C API.

use std::borrow::Cow;

use rusqlite::types::ValueRef;
use rusqlite::Row;

/// The columns of the row a statement is on, as rusqlite's [`Row`] gives them or as a
/// statement stepped through SQLite's C API does ([`crate::db::raw::RawRows`], for the
/// passes over whole tables).
pub(in crate::db) trait Columns {
    fn value(&self, i: usize) -> rusqlite::Result<ValueRef<'_>>;
}

impl Columns for Row<'_> {
    fn value(&self, i: usize) -> rusqlite::Result<ValueRef<'_>> {
        self.get_ref(i)
    }
}

impl Columns for crate::db::raw::RawRows<'_> {
    fn value(&self, i: usize) -> rusqlite::Result<ValueRef<'_>> {
        crate::db::raw::RawRows::value(self, i)
    }
}

pub(in crate::db) fn text(row: &(impl Columns + ?Sized), i: usize) -> rusqlite::Result<String> {
    Ok(match row.value(i)? {
        ValueRef::Null => String::new(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(b) | ValueRef::Blob(b) => lossy(b).into_owned(),
    })
}

/// `String::from_utf8_lossy`, with the (much faster) strict check tried first: valid
/// UTF-8, the usual case, is borrowed as is; only other bytes go through the lossy
/// conversion. How every stored text is read (see [`Workspace::for_each_event_raw`]).
pub fn lossy(b: &[u8]) -> Cow<'_, str> {
    if let Some(s) = ascii(b) {
        return Cow::Borrowed(s);
    }
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

/// `b` as text when it is all ASCII. Nearly every stored text is (ids, and most
/// payloads), and the ASCII test is cheaper than the UTF-8 check, above all on the
/// short ids (a scan reads millions), where the check took about 80 instructions each.
#[allow(unsafe_code)]
fn ascii(b: &[u8]) -> Option<&str> {
    // SAFETY: ASCII bytes are valid UTF-8.
    b.is_ascii()
        .then(|| unsafe { std::str::from_utf8_unchecked(b) })
}

pub(in crate::db) fn opt_text(
    row: &(impl Columns + ?Sized),
    i: usize,
) -> rusqlite::Result<Option<String>> {
    Ok(match row.value(i)? {
        ValueRef::Null => None,
        _ => Some(text(row, i)?),
    })
}

pub(in crate::db) fn int(row: &(impl Columns + ?Sized), i: usize) -> rusqlite::Result<i64> {
    Ok(int_of(row.value(i)?))
}

/// A value as [`int`] reads it.
pub(super) fn int_of(v: ValueRef<'_>) -> i64 {
    match v {
        ValueRef::Integer(n) => n,
        ValueRef::Real(f) => f as i64,
        ValueRef::Text(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// A value's bytes as stored when it is text or a BLOB, else as [`text_of`] renders it
/// (ASCII, which [`lossy`] keeps): `lossy(&stored_bytes(v)) == text_of(v)`.
pub(super) fn stored_bytes(v: ValueRef<'_>) -> Cow<'_, [u8]> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => Cow::Borrowed(b),
        v => match text_of(v) {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        },
    }
}

pub(super) fn text_ref<'a, C: Columns + ?Sized>(
    row: &'a C,
    i: usize,
) -> rusqlite::Result<Cow<'a, str>> {
    Ok(text_of(row.value(i)?))
}

/// A value as [`text_ref`] reads it.
fn text_of(v: ValueRef<'_>) -> Cow<'_, str> {
    match v {
        ValueRef::Null => Cow::Borrowed(""),
        ValueRef::Integer(n) => Cow::Owned(n.to_string()),
        ValueRef::Real(f) => Cow::Owned(f.to_string()),
        ValueRef::Text(b) | ValueRef::Blob(b) => lossy(b),
    }
}

/// Whether column `i` is text that is valid UTF-8 (so that reading it as text and
/// comparing it with a bound text parameter agree).
pub(super) fn is_utf8_text(row: &(impl Columns + ?Sized), i: usize) -> rusqlite::Result<bool> {
    Ok(matches!(row.value(i)?, ValueRef::Text(b) if std::str::from_utf8(b).is_ok()))
}

pub(super) fn opt_text_ref<'a, C: Columns + ?Sized>(
    row: &'a C,
    i: usize,
) -> rusqlite::Result<Option<Cow<'a, str>>> {
    Ok(match row.value(i)? {
        ValueRef::Null => None,
        _ => Some(text_ref(row, i)?),
    })
}

#[cfg(test)]
mod lossy_tests {
    use super::*;

    #[test]
    fn lossy_is_from_utf8_lossy_and_borrows_valid_text() {
        let cases: [&[u8]; 7] = [
            b"",
            b"evt_0001-abc",
            "caf\u{e9} \u{1f600}".as_bytes(),
            b"ab\xffcd",
            b"\xe2\x82",
            // Non-ASCII only after the first word (the ASCII test reads by words).
            b"0123456789abcdef0123456789\xc3\xa9",
            b"0123456789abcdef0123456789\xc3",
        ];
        for b in cases {
            let got = lossy(b);
            assert_eq!(got, String::from_utf8_lossy(b), "{b:?}");
            assert_eq!(
                matches!(got, Cow::Borrowed(_)),
                std::str::from_utf8(b).is_ok(),
                "{b:?}"
            );
            assert_eq!(ascii(b).is_some(), b.is_ascii(), "{b:?}");
        }
    }
}
