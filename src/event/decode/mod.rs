//! Strict decode of a RuntimeEvent, mirroring Maka's `decodeRuntimeEvent`.
//!
//! Every closed record rejects keys it does not know, `null` never stands in for an
//! absent optional key, and the text content is normalized the way Maka rebuilds it.
//! The payload is taken by value: the decoder moves sub-values into the typed event
//! and never walks into open records (`stateDelta`, `args`, `result`, ...), so an
//! arbitrarily deep open value costs nothing here.
//!
//! Error details name the first offending path, e.g.
//! `actions.toolDispatch.recoveryMode: expected one of "replay_safe", ...`.
//!
//! This file is the room's face: the entry points and the error type. The decoding
//! itself is in parts named by the record they read (`envelope`, `content`,
//! `actions`, `permissions`, `tool_dispatch`, `workspace_fact`, `token_usage`), on
//! shared plumbing (`error_path`, `field_readers`, `field_table`).

mod actions;
mod content;
mod envelope;
mod error_path;
mod field_readers;
mod field_table;
mod permissions;
#[cfg(test)]
mod test_support;
mod token_usage;
mod tool_dispatch;
mod workspace_fact;

pub(super) use actions::{
    check_answer_accepted, check_continuation_start, check_runtime_protocol,
    check_user_question_request, decode_actions, ACTION_KEYS, RUNTIME_PROTOCOL_FIELDS,
    TOOL_BOUNDARY_PROTOCOL_V1,
};
pub(super) use content::decode_content;
pub(super) use envelope::{
    AUTHORS, ENVELOPE_KEYS, ORIGINS, RECOVERY_MODES, REF_KEYS, ROLES, STATUSES, VISIBILITIES,
};
pub(super) use field_readers::{is_safe_integer, is_sha256_digest};
#[cfg(test)]
pub(super) use field_table::check_ty;
pub(super) use field_table::{Fields, Ty, F};
pub(super) use permissions::{check_permission_decision, check_permission_request};
pub(super) use token_usage::{check_token_usage, TOKEN_USAGE_FIELDS};
pub(super) use tool_dispatch::decode_tool_recovery;
pub(super) use workspace_fact::check_workspace_fact;

use super::direct::Keep;
use super::{RowIdentity, RuntimeEvent};
use crate::json::Json;
use envelope::decode_envelope;
use error_path::finish;

/// Why a payload is not a RuntimeEvent Maka would read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The text is not JSON (`JSON.parse` throws).
    #[error("payload is not JSON: {0}")]
    Json(String),
    /// Maka's closed decoder rejects it ("Invalid RuntimeEvent schema"); the detail
    /// names the first offending path, e.g. `actions.toolDispatch.recoveryMode`.
    #[error("invalid RuntimeEvent schema: {0}")]
    Schema(String),
}

/// Decodes and normalizes a parsed payload.
pub fn decode_event(value: Json) -> Result<RuntimeEvent, DecodeError> {
    decode_envelope(value).map_err(|e| DecodeError::Schema(finish(e)))
}

/// Parses (JavaScript `JSON.parse` rules) and decodes a payload text.
pub fn decode_event_text(text: &str) -> Result<RuntimeEvent, DecodeError> {
    // Most payloads are plain enough to read in place (see `direct`); the rest, and
    // every error, take the exact path.
    if let Some(event) = super::direct::decode_plain(text, Keep::All) {
        return Ok(event);
    }
    decode_event_text_exact(text)
}

/// [`decode_event_text`] for the scan's walk: the same verdict, and the same event but
/// for the values the walk does not read, when it is read in place: a plain
/// `actions.tokenUsage`, and a function response's `result` and `providerOutput`, are
/// checked where they stand and kept as `null`. Boxed: the walk's events travel
/// through several calls and a batch, and a batch's decoded rows are a vector
/// (unboxed, a scan of the bench workspace took 72 M more instructions).
pub fn decode_event_text_for_walk(text: &str) -> Result<Box<RuntimeEvent>, DecodeError> {
    if let Some(event) = super::direct::decode_plain(text, Keep::ForWalk) {
        return Ok(Box::new(event));
    }
    decode_event_text_exact(text).map(Box::new)
}

/// [`decode_event_text_for_walk`] for the scan's batches, and the text of a
/// function call's arguments when it was left as `null` because that text is already
/// their identity form (the batch hashes it: `args_hash::hash_of_identity_form`).
pub fn decode_event_text_for_batch(
    text: &str,
) -> Result<(Box<RuntimeEvent>, Option<&str>), DecodeError> {
    if let Some((event, raw_args)) = super::direct::decode_plain_with_args(text, Keep::ForBatch) {
        return Ok((Box::new(event), raw_args));
    }
    decode_event_text_exact(text).map(|e| (Box::new(e), None))
}

/// [`decode_event_text`] through the whole `Json` tree, never in place.
pub fn decode_event_text_exact(text: &str) -> Result<RuntimeEvent, DecodeError> {
    let value = crate::json::parse(text).map_err(|e| DecodeError::Json(e.to_string()))?;
    decode_event(value)
}

/// Maka's store identity check on a parsed payload that may not decode: the payload
/// is an object whose `id`, `sessionId`, `invocationId`, `runId` and `turnId` are
/// strings equal to the row's columns.
pub fn payload_identity_matches(value: &Json, row: &RowIdentity) -> bool {
    let Json::Object(o) = value else { return false };
    let is = |key: &str, want: &str| matches!(o.get(key), Some(Json::String(s)) if *s == *want);
    is("id", &row.event_id)
        && is("sessionId", &row.session_id)
        && is("invocationId", &row.invocation_id)
        && is("runId", &row.run_id)
        && is("turnId", &row.turn_id)
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::json::parse;

    #[test]
    fn payload_identity_is_checked_on_undecodable_payloads() {
        let row = RowIdentity {
            event_id: "e1".into(),
            session_id: "s".into(),
            invocation_id: "inv".into(),
            run_id: "inv".into(),
            turn_id: "t".into(),
        };
        let mut v = base();
        set(&mut v, &["role"], r#""nobody""#);
        assert!(payload_identity_matches(&v, &row));
        assert!(decode_event(v).is_err());
        let mut v = base();
        set(&mut v, &["id"], r#""e\ud800""#);
        assert!(!payload_identity_matches(
            &v,
            &RowIdentity {
                event_id: "e\u{FFFD}".into(),
                ..row.clone()
            }
        ));
        assert!(!payload_identity_matches(&parse("[]").unwrap(), &row));
        let e = decode_event(base()).unwrap();
        assert!(crate::event::row_identity_matches(&e, &row));
    }
}
