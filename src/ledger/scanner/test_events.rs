//! Small event builders for the ledger unit tests.

use crate::event::{
    Actions, Author, Content, RecoveryMode, Refs, Role, RuntimeEvent, ToolDispatch, ToolRecovery,
};
use crate::json::{JsObject, JsStr, Json};

pub(crate) fn s(v: &str) -> JsStr {
    JsStr::new(v)
}

/// An event of session `S`, invocation `I`, run `R`, turn `T` with no content.
pub(crate) fn base(id: &str, role: Role, author: Author) -> RuntimeEvent {
    RuntimeEvent {
        id: s(id),
        invocation_id: s("I"),
        run_id: s("R"),
        session_id: s("S"),
        turn_id: s("T"),
        ts: 1.0,
        partial: false,
        role,
        author,
        branch: None,
        origin: None,
        model_visibility: None,
        status: None,
        content: None,
        actions: None,
        refs: None,
    }
}

pub(crate) fn text(id: &str) -> RuntimeEvent {
    let mut fields = JsObject::new();
    fields.insert(s("kind"), Json::String(s("text")));
    fields.insert(s("text"), Json::String(s("hi")));
    let mut e = base(id, Role::Model, Author::Agent);
    e.content = Some(Content::Text {
        text: s("hi"),
        steering: false,
        fields,
    });
    e
}

pub(crate) fn args(pairs: &[(&str, &str)]) -> Json {
    Json::Object(
        pairs
            .iter()
            .map(|(k, v)| (s(k), Json::String(s(v))))
            .collect(),
    )
}

pub(crate) fn call(id: &str, tc: &str, name: &str, args: Json) -> RuntimeEvent {
    let mut e = base(id, Role::Model, Author::Agent);
    e.content = Some(Content::FunctionCall {
        id: s(tc),
        name: s(name),
        args,
        provider_options: None,
        provider_executed: None,
    });
    e
}

pub(crate) fn disp(id: &str, op: &str, tc: &str, name: &str, hash: &str) -> RuntimeEvent {
    let mut e = base(id, Role::System, Author::System);
    e.actions = Some(Box::new(Actions {
        tool_dispatch: Some(ToolDispatch {
            operation_id: s(op),
            provider_tool_call_id: s(tc),
            tool_name: s(name),
            canonical_args_hash: s(hash),
            recovery_mode: RecoveryMode::ReplaySafe,
            newer: Default::default(),
        }),
        ..Actions::default()
    }));
    e.refs = Some(Box::new(refs(Some(op), Some(tc))));
    e
}

/// A dispatch whose hash is the real hash of `name` and `args`.
pub(crate) fn disp_for(id: &str, op: &str, tc: &str, name: &str, args: &Json) -> RuntimeEvent {
    let hash =
        crate::args_hash::canonical_tool_args_hash(&s(name), args).expect("test arguments hash");
    disp(id, op, tc, name, &hash)
}

pub(crate) fn refs(op: Option<&str>, tc: Option<&str>) -> Refs {
    Refs {
        operation_id: op.map(s),
        tool_call_id: tc.map(s),
        ..Refs::default()
    }
}

pub(crate) fn resp(id: &str, tc: &str, name: &str, r: Option<Refs>) -> RuntimeEvent {
    let mut e = base(id, Role::Tool, Author::Tool);
    e.content = Some(Content::FunctionResponse {
        id: s(tc),
        name: s(name),
        result: Json::Null,
        is_error: None,
        provider_executed: None,
        provider_output: None,
    });
    e.refs = r.map(Box::new);
    e
}

pub(crate) fn recovery(id: &str, kind: &str, op: &str, tc: &str) -> RuntimeEvent {
    let mut e = base(id, Role::System, Author::System);
    e.actions = Some(Box::new(Actions {
        tool_recovery: Some(ToolRecovery {
            kind: s(kind),
            operation_id: s(op),
            envelope: Json::Null,
        }),
        ..Actions::default()
    }));
    e.refs = Some(Box::new(refs(Some(op), Some(tc))));
    e
}

/// The same event in another invocation / run / turn / session.
pub(crate) fn moved(mut e: RuntimeEvent, inv: &str, run: &str, turn: &str) -> RuntimeEvent {
    e.invocation_id = s(inv);
    e.run_id = s(run);
    e.turn_id = s(turn);
    e
}
