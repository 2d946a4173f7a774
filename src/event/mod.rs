//! Maka's `RuntimeEvent`: the typed form of one `runtime_events.payload_json`.
//!
//! The decoder is closed exactly where Maka's `decodeRuntimeEvent` is closed; open
//! records (`stateDelta`, `args`, `result`, `providerOptions`, ...) stay `Json`.
//! Pure: no I/O.

mod canonical;
mod decode;
mod direct;
mod key_order;
pub mod newer;

pub use canonical::{encode_canonical, event_kind, event_to_json, EncodeError};
pub use decode::{
    decode_event, decode_event_text, decode_event_text_exact, decode_event_text_for_batch,
    decode_event_text_for_walk, payload_identity_matches, DecodeError,
};
pub use direct::{check_ordinary, reads_in_place_for_walk, Ordinary};

use crate::json::{JsObject, JsStr, Json};

/// `role` of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    User,
    Model,
    Tool,
    System,
}

/// `author` of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Author {
    User,
    Host,
    Agent,
    Tool,
    System,
}

/// `origin` of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    Provider,
    CodeMode,
}

/// `modelVisibility` of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelVisibility {
    Visible,
    Hidden,
}

/// `status` of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventStatus {
    Streaming,
    Completed,
    Failed,
    Aborted,
    Cancelled,
}

impl EventStatus {
    /// completed, failed, aborted or cancelled.
    pub fn is_terminal(self) -> bool {
        !matches!(self, EventStatus::Streaming)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Streaming => "streaming",
            EventStatus::Completed => "completed",
            EventStatus::Failed => "failed",
            EventStatus::Aborted => "aborted",
            EventStatus::Cancelled => "cancelled",
        }
    }
}

/// `toolDispatch.recoveryMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecoveryMode {
    ReplaySafe,
    Idempotent,
    Reconcile,
    Reattach,
    OutcomeUnknown,
    NeverAutoRetry,
}

impl RecoveryMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryMode::ReplaySafe => "replay_safe",
            RecoveryMode::Idempotent => "idempotent",
            RecoveryMode::Reconcile => "reconcile",
            RecoveryMode::Reattach => "reattach",
            RecoveryMode::OutcomeUnknown => "outcome_unknown",
            RecoveryMode::NeverAutoRetry => "never_auto_retry",
        }
    }
}

/// A decoded, normalized RuntimeEvent.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeEvent {
    pub id: JsStr,
    pub invocation_id: JsStr,
    pub run_id: JsStr,
    pub session_id: JsStr,
    pub turn_id: JsStr,
    pub ts: f64,
    pub partial: bool,
    pub role: Role,
    pub author: Author,
    pub branch: Option<JsStr>,
    pub origin: Option<Origin>,
    pub model_visibility: Option<ModelVisibility>,
    pub status: Option<EventStatus>,
    pub content: Option<Content>,
    /// Boxed, as `refs`: 584 and 352 bytes, mostly empty, which every move of an event
    /// copied and every drop walked (an event is 296 bytes instead of 1,216).
    pub actions: Option<Box<Actions>>,
    pub refs: Option<Box<Refs>>,
}

impl RuntimeEvent {
    /// Maka's `isTerminalRuntimeEvent`: a terminal `status` or `actions.endInvocation === true`.
    pub fn is_terminal(&self) -> bool {
        self.status.is_some_and(EventStatus::is_terminal)
            || self
                .actions
                .as_ref()
                .is_some_and(|a| a.end_invocation == Some(true))
    }

    /// `content.kind`, if there is content.
    pub fn content_kind(&self) -> Option<&'static str> {
        self.content.as_ref().map(Content::kind)
    }
}

/// `content`, discriminated by `kind`.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Text content after Maka's normalization (`displayText` equal to `text` dropped,
    /// empty `attachments`/`quotes` dropped, `providerOptions` dropped, legacy origin
    /// rewritten). `fields` is the whole normalized object, `kind` included.
    Text {
        text: JsStr,
        steering: bool,
        fields: JsObject,
    },
    Thinking {
        text: JsStr,
        signature: Option<JsStr>,
        provider_options: Option<JsObject>,
    },
    FunctionCall {
        id: JsStr,
        name: JsStr,
        args: Json,
        provider_options: Option<JsObject>,
        provider_executed: Option<bool>,
    },
    /// `result` and `provider_output` are `null` in an event decoded for the scan's
    /// walk when they were checked in place ([`decode_event_text_for_walk`]).
    FunctionResponse {
        id: JsStr,
        name: JsStr,
        result: Json,
        is_error: Option<bool>,
        provider_executed: Option<bool>,
        provider_output: Option<Json>,
    },
    Error {
        message: JsStr,
        code: Option<JsStr>,
        reason: Option<JsStr>,
        details: Option<Json>,
    },
    /// A run's invocation-opening fact (`invocation_opened`), which only a Maka newer
    /// than main writes ([`newer`]): the whole validated object, `kind` included.
    InvocationOpened { fields: JsObject },
}

impl Content {
    pub fn kind(&self) -> &'static str {
        match self {
            Content::Text { .. } => "text",
            Content::Thinking { .. } => "thinking",
            Content::FunctionCall { .. } => "function_call",
            Content::FunctionResponse { .. } => "function_response",
            Content::Error { .. } => "error",
            Content::InvocationOpened { .. } => "invocation_opened",
        }
    }
}

/// `actions`. Sub-objects that Maka validates but the doctor never interprets are
/// kept as their (validated) JSON.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Actions {
    pub state_delta: Option<JsObject>,
    pub artifact_delta: Option<JsObject>,
    pub permission_request: Option<Json>,
    pub permission_decision: Option<Json>,
    pub permission_answer_accepted: Option<Json>,
    pub permission_closure_accepted: Option<Json>,
    pub user_question_request: Option<Json>,
    pub user_question_answer_accepted: Option<Json>,
    pub transfer_to_agent: Option<JsStr>,
    pub end_invocation: Option<bool>,
    /// `null` in an event decoded for the scan's walk when it was checked in place
    /// ([`decode_event_text_for_walk`]): there, only its presence is read.
    pub token_usage: Option<Json>,
    pub tool_dispatch: Option<ToolDispatch>,
    pub tool_recovery: Option<ToolRecovery>,
    pub runtime_protocol: Option<Json>,
    pub continuation_start: Option<Json>,
    pub workspace_fact: Option<Json>,
    /// Keys only a Maka newer than main writes (`managedMutationTerminal`,
    /// `formAnswerAccepted`), each with its validated value ([`newer`]).
    pub newer: NewerKeys,
}

impl Actions {
    /// Names of the keys present, in a fixed order (for lane checks and messages).
    pub fn present_keys(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        self.each_present(|k| keys.push(k));
        keys
    }

    /// Whether `stateDelta` is the only key present (`present_keys() == ["stateDelta"]`,
    /// without building the list: asked of every tool call and response).
    #[inline]
    pub fn only_state_delta(&self) -> bool {
        // Straight-line: counting the keys through `each_present` cost more.
        self.state_delta.is_some()
            && self.artifact_delta.is_none()
            && self.permission_request.is_none()
            && self.permission_decision.is_none()
            && self.permission_answer_accepted.is_none()
            && self.permission_closure_accepted.is_none()
            && self.user_question_request.is_none()
            && self.user_question_answer_accepted.is_none()
            && self.transfer_to_agent.is_none()
            && self.end_invocation.is_none()
            && self.token_usage.is_none()
            && self.tool_dispatch.is_none()
            && self.tool_recovery.is_none()
            && self.runtime_protocol.is_none()
            && self.continuation_start.is_none()
            && self.workspace_fact.is_none()
            && self.newer.is_empty()
    }

    fn each_present(&self, mut key: impl FnMut(&'static str)) {
        macro_rules! k {
            ($f:ident, $name:literal) => {
                if self.$f.is_some() {
                    key($name);
                }
            };
        }
        k!(state_delta, "stateDelta");
        k!(artifact_delta, "artifactDelta");
        k!(permission_request, "permissionRequest");
        k!(permission_decision, "permissionDecision");
        k!(permission_answer_accepted, "permissionAnswerAccepted");
        k!(permission_closure_accepted, "permissionClosureAccepted");
        k!(user_question_request, "userQuestionRequest");
        k!(user_question_answer_accepted, "userQuestionAnswerAccepted");
        k!(transfer_to_agent, "transferToAgent");
        k!(end_invocation, "endInvocation");
        k!(token_usage, "tokenUsage");
        k!(tool_dispatch, "toolDispatch");
        k!(tool_recovery, "toolRecovery");
        k!(runtime_protocol, "runtimeProtocol");
        k!(continuation_start, "continuationStart");
        k!(workspace_fact, "workspaceFact");
        for (name, _) in self.newer.iter() {
            key(name);
        }
    }
}

/// `actions.toolDispatch` (the T1 fact).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDispatch {
    pub operation_id: JsStr,
    pub provider_tool_call_id: JsStr,
    pub tool_name: JsStr,
    pub canonical_args_hash: JsStr,
    pub recovery_mode: RecoveryMode,
    /// Keys only a Maka newer than main writes (`managedMutation`,
    /// `resultProjectionVersion`), each with its validated value ([`newer`]).
    pub newer: NewerKeys,
}

/// Keys of a record that only a Maka newer than main writes, each with its validated
/// value, in payload order ([`newer`]). One pointer, empty in every event main's decoder
/// reads (the walk moves and drops many records).
#[derive(Clone, Debug, Default, PartialEq)]
// A boxed vector, not a vector: one word in every record instead of three.
#[allow(clippy::box_collection)]
pub struct NewerKeys(Option<Box<Vec<(&'static str, Json)>>>);

impl NewerKeys {
    pub fn new(keys: Vec<(&'static str, Json)>) -> NewerKeys {
        NewerKeys((!keys.is_empty()).then(|| Box::new(keys)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub fn iter(&self) -> impl Iterator<Item = &(&'static str, Json)> {
        self.0.iter().flat_map(|v| v.iter())
    }

    pub fn into_vec(self) -> Vec<(&'static str, Json)> {
        self.0.map(|v| *v).unwrap_or_default()
    }
}

/// `actions.toolRecovery` (a recovery-bundle fact): `{kind, version: 1, payload}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolRecovery {
    /// `maka.tool.reconcile_result` or `maka.tool.recovery_decision`.
    pub kind: JsStr,
    /// `payload.operationId`.
    pub operation_id: JsStr,
    /// The whole validated envelope.
    pub envelope: Json,
}

/// `refs`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Refs {
    pub stored_message_id: Option<JsStr>,
    pub trace_event_id: Option<JsStr>,
    pub tool_call_id: Option<JsStr>,
    pub provider_event_id: Option<JsStr>,
    pub source_message_digest: Option<JsStr>,
    pub provider_request_trace_id: Option<JsStr>,
    pub artifact_id: Option<JsStr>,
    pub operation_id: Option<JsStr>,
    pub parent_tool_call_id: Option<JsStr>,
    pub parent_operation_id: Option<JsStr>,
    pub step_id: Option<JsStr>,
    pub source_invocation_id: Option<JsStr>,
    pub source_run_id: Option<JsStr>,
    pub source_turn_id: Option<JsStr>,
    pub source_runtime_event_high_water: Option<f64>,
}

impl Refs {
    /// Names of the keys present, in a fixed order (for lane checks).
    pub fn present_keys(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        macro_rules! k {
            ($f:ident, $name:literal) => {
                if self.$f.is_some() {
                    keys.push($name);
                }
            };
        }
        k!(stored_message_id, "storedMessageId");
        k!(trace_event_id, "traceEventId");
        k!(tool_call_id, "toolCallId");
        k!(provider_event_id, "providerEventId");
        k!(source_message_digest, "sourceMessageDigest");
        k!(provider_request_trace_id, "providerRequestTraceId");
        k!(artifact_id, "artifactId");
        k!(operation_id, "operationId");
        k!(parent_tool_call_id, "parentToolCallId");
        k!(parent_operation_id, "parentOperationId");
        k!(step_id, "stepId");
        k!(source_invocation_id, "sourceInvocationId");
        k!(source_run_id, "sourceRunId");
        k!(source_turn_id, "sourceTurnId");
        k!(
            source_runtime_event_high_water,
            "sourceRuntimeEventHighWater"
        );
        keys
    }
}

/// The five identity columns of a `runtime_events` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowIdentity {
    pub event_id: String,
    pub session_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
}

/// Maka's store check: the payload's five ids equal the row's columns.
pub fn row_identity_matches(event: &RuntimeEvent, row: &RowIdentity) -> bool {
    event.id == *row.event_id.as_str()
        && event.session_id == *row.session_id.as_str()
        && event.invocation_id == *row.invocation_id.as_str()
        && event.run_id == *row.run_id.as_str()
        && event.turn_id == *row.turn_id.as_str()
}

impl RuntimeEvent {
    /// This event with the values the scan's walk does not read set to `null`, as
    /// [`decode_event_text_for_walk`] may leave them: what its answer is compared with.
    pub fn with_unread_emptied(mut self) -> RuntimeEvent {
        if let Some(usage) = self.actions.as_mut().and_then(|a| a.token_usage.as_mut()) {
            *usage = Json::Null;
        }
        if let Some(Content::FunctionResponse {
            result,
            provider_output,
            ..
        }) = self.content.as_mut()
        {
            *result = Json::Null;
            if let Some(output) = provider_output {
                *output = Json::Null;
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::Actions;
    use crate::json::{JsObject, JsStr, Json};

    #[test]
    fn only_state_delta_is_the_key_list_being_state_delta() {
        let delta = || Some(JsObject::new());
        let cases = [
            Actions::default(),
            Actions {
                state_delta: delta(),
                ..Actions::default()
            },
            Actions {
                state_delta: delta(),
                end_invocation: Some(true),
                ..Actions::default()
            },
            Actions {
                state_delta: delta(),
                workspace_fact: Some(Json::Null),
                ..Actions::default()
            },
            Actions {
                artifact_delta: delta(),
                ..Actions::default()
            },
            Actions {
                transfer_to_agent: Some(JsStr::new("a")),
                ..Actions::default()
            },
        ];
        let mut only = 0;
        for a in &cases {
            assert_eq!(
                a.only_state_delta(),
                a.present_keys() == ["stateDelta"],
                "{a:?}"
            );
            only += usize::from(a.only_state_delta());
        }
        assert_eq!(only, 1);
    }
}
