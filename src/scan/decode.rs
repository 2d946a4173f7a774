//! Decoding a `runtime_events` row as Maka's store reads it (payload decode, then the
//! row/payload identity check), under the rules of the release that wrote the file.

use std::borrow::Borrow;

use crate::db::{EventRow, EventRowRef};
use crate::event::{
    decode_event_text, decode_event_text_for_batch, decode_event_text_for_walk, DecodeError,
    Ordinary, RuntimeEvent,
};
use crate::release::compat::older_decoder_rejects;
use crate::release::rules::DecoderRules;

/// Decodes a row as Maka's store reads it: strict decode, then the row/payload
/// identity check.
pub fn decode_row(row: &EventRow) -> Result<RuntimeEvent, String> {
    decode_row_ref(&row.borrowed())
}

/// [`decode_row`] under the decoder rules of the release that wrote the file, for the
/// walk (which does not read every value: see [`decode_event_text_for_walk`]).
pub fn decode_row_as(
    row: &EventRowRef<'_>,
    rules: &DecoderRules,
) -> Result<Box<RuntimeEvent>, String> {
    let event = match decode_parts_with(decode_event_text_for_walk, row) {
        Ok(event) => event,
        Err(e) => return decode_newer_row(row, rules, e).map(Box::new),
    };
    match older_decoder_rejects(&row.payload_json, rules) {
        None => Ok(event),
        Some(e) => Err(e),
    }
}

/// [`decode_row`] under the decoder rules of the file: main's decoder, then, for a
/// file newer than every known generation, what newer Maka writes
/// ([`crate::event::newer`]). Older releases' restrictions are the walk's
/// ([`decode_row_as`]); replay reads their files with main's decoder.
pub fn decode_row_with(row: &EventRow, rules: &DecoderRules) -> Result<RuntimeEvent, String> {
    let row = row.borrowed();
    decode_row_ref(&row).or_else(|e| decode_newer_row(&row, rules, e))
}

/// After main's decoder refused a row with `main_error`: the row read with what newer
/// generations add, when the rules allow it and the payload uses it, identity checked
/// as Maka's store checks it; else `main_error`.
fn decode_newer_row(
    row: &EventRowRef<'_>,
    rules: &DecoderRules,
    main_error: String,
) -> Result<RuntimeEvent, String> {
    match crate::event::newer::decode_newer(&row.payload_json, rules) {
        None => Err(main_error),
        Some(Err(e)) => Err(e),
        Some(Ok(event)) => identity_matches(&event, row).map(|()| event),
    }
}

/// [`decode_row`] on borrowed columns.
fn decode_row_ref(row: &EventRowRef<'_>) -> Result<RuntimeEvent, String> {
    decode_parts_with(decode_event_text, row)
}

/// [`decode_row_as`] for [`EventBatch::decode`], with the text of a function call's
/// arguments when the decoder left them as `null` (see
/// [`crate::event::decode_event_text_for_batch`]).
pub(super) fn decode_row_for_batch<'r>(
    row: &'r EventRowRef<'_>,
    rules: &DecoderRules,
) -> (Result<Box<RuntimeEvent>, String>, Option<&'r str>) {
    let (event, raw_args) = match decode_event_text_for_batch(&row.payload_json) {
        Ok((event, raw_args)) => (Ok(event), raw_args),
        Err(e) => (
            decode_newer_row(row, rules, e.to_string()).map(Box::new),
            None,
        ),
    };
    let event = event.and_then(|e| identity_matches(&e, row).map(|()| e));
    match (event, older_decoder_rejects(&row.payload_json, rules)) {
        (Ok(event), None) => (Ok(event), raw_args),
        (Err(e), _) | (Ok(_), Some(e)) => (Err(e), None),
    }
}

fn decode_parts_with<E: Borrow<RuntimeEvent>>(
    decode: fn(&str) -> Result<E, DecodeError>,
    row: &EventRowRef<'_>,
) -> Result<E, String> {
    let decoded = decode(&row.payload_json).map_err(|e| e.to_string())?;
    identity_matches(decoded.borrow(), row)?;
    Ok(decoded)
}

/// The payload's ids are the row's (Maka's store check), or the error the walk gives.
fn identity_matches(event: &RuntimeEvent, row: &EventRowRef<'_>) -> Result<(), String> {
    let matches = event.id == *row.event_id
        && event.session_id == *row.session_id
        && event.invocation_id == *row.invocation_id
        && event.run_id == *row.run_id
        && event.turn_id == *row.turn_id;
    if !matches {
        return Err(format!(
            "RuntimeEvent row/payload identity mismatch for {}",
            row.event_id
        ));
    }
    Ok(())
}

/// A row's payload as the walk takes it.
pub enum Decoded {
    /// Decoded whole ([`decode_row_as`]).
    Event(Box<RuntimeEvent>),
    /// Checked in place as an ordinary, non-terminal event with the row's identity
    /// ([`crate::event::check_ordinary`]): all the walk reads of it but the row.
    Ordinary(Ordinary),
    /// Did not decode: why.
    Failed(String),
}

impl From<Result<Box<RuntimeEvent>, String>> for Decoded {
    fn from(r: Result<Box<RuntimeEvent>, String>) -> Decoded {
        match r {
            Ok(event) => Decoded::Event(event),
            Err(message) => Decoded::Failed(message),
        }
    }
}
