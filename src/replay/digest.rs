//! Maka's continuation prefix digest (`maka.runtime-prefix.v1`): SHA-256 over
//! length-prefixed parts, each length a u64 big-endian: the domain string, the
//! identity `{invocationId, runId, sessionId, turnId}` as stable JSON, then for
//! each row its `event_seq` as u64 big-endian followed by the length-prefixed
//! canonical event JSON (a legacy-automation text origin is written in its released
//! `{"kind":"automation"}` form).

use sha2::{Digest, Sha256};

use crate::event::{event_to_json, Content, RuntimeEvent};
use crate::json::{stable_stringify, JsObject, JsStr, Json};

/// The identity a prefix is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixIdentity {
    pub session_id: String,
    pub invocation_id: String,
    pub run_id: String,
    pub turn_id: String,
}

fn update_len_prefixed(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_be_bytes());
    h.update(bytes);
}

/// The canonical JSON Maka hashes for one prefix row.
fn prefix_event_json(event: &RuntimeEvent) -> Result<String, String> {
    let mut json = event_to_json(event);
    let legacy = matches!(&event.content, Some(Content::Text { fields, .. })
        if fields.get("origin").and_then(Json::as_object)
            .and_then(|o| o.get("kind")).and_then(Json::as_str) == Some("legacy_automation"));
    if legacy {
        if let Json::Object(root) = &mut json {
            if let Some(Json::Object(content)) = root.get_mut("content") {
                let id = content
                    .get("origin")
                    .and_then(Json::as_object)
                    .and_then(|o| o.get("automationId"))
                    .and_then(Json::as_js_str)
                    .cloned()
                    .unwrap_or_default();
                let mut origin = JsObject::new();
                origin.insert(JsStr::new("kind"), Json::String(JsStr::new("automation")));
                origin.insert(JsStr::new("automationId"), Json::String(id));
                content.insert(JsStr::new("origin"), Json::Object(origin));
            }
        }
    }
    // `encode_canonical` validates the event; the JSON we hash is the same value.
    crate::event::encode_canonical(event).map_err(|e| e.to_string())?;
    stable_stringify(&json).map_err(|e| format!("{e:?}"))
}

/// Recomputes `prefixDigest` for rows `(event_seq, event)` of one invocation, in
/// order. Errors are Maka's reasons for refusing the prefix (a gap, a partial
/// event, an identity mismatch, an event that does not encode).
pub fn prefix_digest(
    identity: &PrefixIdentity,
    rows: &[(i64, &RuntimeEvent)],
) -> Result<String, String> {
    let mut h = Sha256::new();
    update_len_prefixed(&mut h, b"maka.runtime-prefix.v1");
    let mut ident = JsObject::new();
    for (k, v) in [
        ("sessionId", &identity.session_id),
        ("invocationId", &identity.invocation_id),
        ("runId", &identity.run_id),
        ("turnId", &identity.turn_id),
    ] {
        ident.insert(JsStr::new(k), Json::String(JsStr::new(v)));
    }
    let ident = stable_stringify(&Json::Object(ident)).map_err(|e| format!("{e:?}"))?;
    update_len_prefixed(&mut h, ident.as_bytes());
    for (i, (seq, event)) in rows.iter().enumerate() {
        let expected = i as i64 + 1;
        if *seq != expected {
            return Err(format!(
                "immutable RuntimeEvent event_seq gap: expected {expected}, received {seq}"
            ));
        }
        if event.partial {
            return Err(format!(
                "immutable RuntimeEvent prefix contains partial snapshot {}",
                event.id.to_string_lossy()
            ));
        }
        if event.session_id != *identity.session_id.as_str()
            || event.invocation_id != *identity.invocation_id.as_str()
            || event.run_id != *identity.run_id.as_str()
            || event.turn_id != *identity.turn_id.as_str()
        {
            return Err(format!(
                "immutable RuntimeEvent identity mismatch for {}",
                event.id.to_string_lossy()
            ));
        }
        let text = prefix_event_json(event)?;
        h.update((*seq as u64).to_be_bytes());
        // Node's Buffer.from(text, 'utf8') writes U+FFFD for a lone surrogate; the
        // stringifier escapes those, so the text is plain UTF-8 here.
        update_len_prefixed(&mut h, text.as_bytes());
    }
    Ok(format!("sha256:{}", hex::encode(h.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::decode_event_text;

    fn identity(run: &str) -> PrefixIdentity {
        PrefixIdentity {
            session_id: "session-1".into(),
            invocation_id: format!("invocation-{run}"),
            run_id: run.into(),
            turn_id: format!("turn-{run}"),
        }
    }

    fn event(id: &str, run: &str, content: &str) -> RuntimeEvent {
        decode_event_text(&format!(
            r#"{{"id":"{id}","sessionId":"session-1","invocationId":"invocation-{run}","runId":"{run}","turnId":"turn-{run}","ts":1,"partial":false,"role":"user","author":"user","content":{content}}}"#
        ))
        .unwrap()
    }

    /// Maka's frozen vector (`runtime-boundary.test.ts`, "preserves the released
    /// Automation prefix identity after semantic decoding").
    #[test]
    fn matches_makas_frozen_automation_vector() {
        let e = event(
            "event-legacy",
            "run-legacy",
            r#"{"kind":"text","text":"automated prompt","origin":{"kind":"automation","automationId":"automation-1"}}"#,
        );
        assert_eq!(
            prefix_digest(&identity("run-legacy"), &[(1, &e)]).unwrap(),
            "sha256:d4c8211024788a3fd7554a644f6983f6af088eeb050404f507c76a519080d7ca"
        );
    }

    #[test]
    fn canonical_equivalents_agree_and_bad_prefixes_are_refused() {
        let a = event(
            "event-1",
            "run-1",
            r#"{"kind":"text","text":"hello","displayText":"hello"}"#,
        );
        let b = event(
            "event-1",
            "run-1",
            r#"{"displayText":"hello","text":"hello","kind":"text"}"#,
        );
        let c = event("event-2", "run-1", r#"{"kind":"text","text":"world"}"#);
        let id = identity("run-1");
        let d1 = prefix_digest(&id, &[(1, &a), (2, &c)]).unwrap();
        assert_eq!(d1, prefix_digest(&id, &[(1, &b), (2, &c)]).unwrap());
        assert_ne!(d1, prefix_digest(&id, &[(1, &a)]).unwrap());
        assert!(prefix_digest(&id, &[(1, &a), (3, &c)])
            .unwrap_err()
            .contains("event_seq gap"));
        assert!(prefix_digest(&identity("run-2"), &[(1, &a)])
            .unwrap_err()
            .contains("identity mismatch"));
    }
}
