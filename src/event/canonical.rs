//! Maka's canonical event encoding (`encodeCanonicalRuntimeEvent`) and `event_kind`.

use super::RuntimeEvent;
use crate::json::Json;

/// Why Maka's encoder refuses a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("invalid RuntimeEvent schema: {0}")]
    Schema(String),
    /// A `-0` or a non-finite number would not survive a round trip.
    #[error("RuntimeEvent is not losslessly serializable")]
    NotLossless,
}

/// The exact text Maka writes to `payload_json` for this event.
pub fn encode_canonical(_event: &RuntimeEvent) -> Result<String, EncodeError> {
    todo!("canonical encode")
}

/// The normalized event as a JSON value (key order unspecified).
pub fn event_to_json(_event: &RuntimeEvent) -> Json {
    todo!("event to json")
}

/// `runtime_events.event_kind` as Maka derives it: content kind, else status, else
/// `workspace_fact` / `tool_dispatch` / `invocation_end`, else `runtime_fact`.
pub fn event_kind(event: &RuntimeEvent) -> &'static str {
    if let Some(c) = &event.content {
        return c.kind();
    }
    if let Some(s) = event.status {
        return s.as_str();
    }
    if let Some(a) = &event.actions {
        if a.workspace_fact.is_some() {
            return "workspace_fact";
        }
        if a.tool_dispatch.is_some() {
            return "tool_dispatch";
        }
        if a.end_invocation == Some(true) {
            return "invocation_end";
        }
    }
    "runtime_fact"
}
