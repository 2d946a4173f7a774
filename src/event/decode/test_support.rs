//! The harness shared by the decoder's unit tests: a base event, and helpers that set
//! or remove one path of it and decode the result.

use super::{decode_event, DecodeError};
use crate::event::{Content, RuntimeEvent};
use crate::json::{parse, JsObject, JsStr, Json};

const BASE: &str = r#"{"id":"e1","invocationId":"inv","runId":"inv","sessionId":"s","turnId":"t",
        "ts":1,"partial":false,"role":"user","author":"user",
        "content":{"kind":"text","text":"hi /skill:demo @src/a.rs"}}"#;

pub(super) fn base() -> Json {
    parse(BASE).expect("base parses")
}

/// Sets `path` (object keys, created as needed) to the JSON `value`.
pub(super) fn set(v: &mut Json, path: &[&str], value: &str) {
    let mut cur = v;
    for (i, key) in path.iter().enumerate() {
        let Json::Object(o) = cur else {
            panic!("not an object at {key}")
        };
        if i + 1 == path.len() {
            o.insert(JsStr::new(key), parse(value).expect("value parses"));
            return;
        }
        if o.get(key).is_none() {
            o.insert(JsStr::new(key), Json::Object(JsObject::new()));
        }
        cur = o.get_mut(key).expect("just inserted");
    }
}

pub(super) fn remove(v: &mut Json, path: &[&str]) {
    let mut cur = v;
    for key in &path[..path.len() - 1] {
        cur = cur.as_object_mut_for_test(key);
    }
    if let Json::Object(o) = cur {
        o.remove(path[path.len() - 1]);
    }
}

trait Nav {
    fn as_object_mut_for_test(&mut self, key: &str) -> &mut Json;
}
impl Nav for Json {
    fn as_object_mut_for_test(&mut self, key: &str) -> &mut Json {
        match self {
            Json::Object(o) => o.get_mut(key).expect("key present"),
            _ => panic!("not an object"),
        }
    }
}

pub(super) fn with(path: &[&str], value: &str) -> Result<RuntimeEvent, DecodeError> {
    let mut v = base();
    set(&mut v, path, value);
    decode_event(v)
}

pub(super) fn ok(path: &[&str], value: &str) -> RuntimeEvent {
    with(path, value).unwrap_or_else(|e| panic!("{path:?} = {value}: {e}"))
}

/// Rejected, and the detail starts with `detail`.
pub(super) fn rejects(path: &[&str], value: &str, detail: &str) {
    match with(path, value) {
        Ok(_) => panic!("{path:?} = {value} was accepted"),
        Err(DecodeError::Schema(d)) => {
            assert!(
                d.starts_with(detail),
                "{path:?} = {value}: detail {d:?}, want {detail:?}"
            )
        }
        Err(e) => panic!("{path:?} = {value}: {e}"),
    }
}

pub(super) fn text_fields(e: &RuntimeEvent) -> &JsObject {
    match &e.content {
        Some(Content::Text { fields, .. }) => fields,
        other => panic!("not text: {other:?}"),
    }
}
