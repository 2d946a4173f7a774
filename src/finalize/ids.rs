//! Deterministic ids and JavaScript-order JSON text for the rows finalize writes.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::json::{js_number_to_string, stable_stringify, write_js_string, JsStr, Json};

/// Id prefixes: one per kind of row, so ids never collide across kinds.
pub const TERMINAL_EVENT: &str = "wsledger.terminal.v1";
pub const RUN_EVENT: &str = "wsledger.run_event.v1";
pub const TURN_STATE: &str = "wsledger.turn_state.v1";

/// UUIDv8 (RFC 9562) from the first 16 bytes of
/// SHA-256(`<prefix>\0<session>\0<run>`): version nibble 8, variant `10`.
pub fn derived_uuid(prefix: &str, session_id: &str, run_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(prefix.as_bytes());
    h.update([0]);
    h.update(session_id.as_bytes());
    h.update([0]);
    h.update(run_id.as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let x = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &x[0..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}

/// `JSON.stringify` of a value, keys in their insertion order (what Maka writes for
/// run headers, run events, transcript records and session headers).
pub fn js_stringify(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.is_finite() => out.push_str(&js_number_to_string(f)),
            _ => out.push_str("null"),
        },
        Value::String(s) => write_js_string(out, &JsStr::new(s)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_js_string(out, &JsStr::new(k));
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// Maka's partial-stream key: lower-case hex SHA-256 of
/// `JSON.stringify([identity, sessionId, invocationId, runId, turnId, branch ?? null,
/// role, author])`.
pub fn stream_key(identity: &str, ids: [&str; 4], role: &str, author: &str) -> String {
    let arr = Json::Array(vec![
        Json::String(JsStr::new(identity)),
        Json::String(JsStr::new(ids[0])),
        Json::String(JsStr::new(ids[1])),
        Json::String(JsStr::new(ids[2])),
        Json::String(JsStr::new(ids[3])),
        Json::Null,
        Json::String(JsStr::new(role)),
        Json::String(JsStr::new(author)),
    ]);
    // Arrays of strings have no keys to sort: stable output is plain JSON.stringify.
    let text = stable_stringify(&arr).unwrap_or_default();
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_is_v8_and_stable() {
        let a = derived_uuid(TERMINAL_EVENT, "s", "r");
        assert_eq!(a, derived_uuid(TERMINAL_EVENT, "s", "r"));
        assert_ne!(a, derived_uuid(RUN_EVENT, "s", "r"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "8");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
        // The separator keeps ("ab","c") and ("a","bc") apart.
        assert_ne!(
            derived_uuid(TERMINAL_EVENT, "ab", "c"),
            derived_uuid(TERMINAL_EVENT, "a", "bc")
        );
    }

    #[test]
    fn js_stringify_keeps_order_and_js_numbers() {
        let v: Value =
            serde_json::from_str(r#"{"b":1,"a":[1.5,"x\u0001"],"c":1e21,"d":null}"#).unwrap();
        assert_eq!(
            js_stringify(&v),
            r#"{"b":1,"a":[1.5,"x\u0001"],"c":1e+21,"d":null}"#
        );
    }
}
