//! Strict decode of a RuntimeEvent, mirroring Maka's `decodeRuntimeEvent`.

use super::RuntimeEvent;
use crate::json::Json;

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
pub fn decode_event(_value: Json) -> Result<RuntimeEvent, DecodeError> {
    todo!("decoder")
}

/// Parses (JavaScript `JSON.parse` rules) and decodes a payload text.
pub fn decode_event_text(text: &str) -> Result<RuntimeEvent, DecodeError> {
    let value = crate::json::parse(text).map_err(|e| DecodeError::Json(e.to_string()))?;
    decode_event(value)
}
