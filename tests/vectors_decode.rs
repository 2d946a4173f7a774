//! Every line of `tests/vectors/decode.jsonl` (expected values produced by Maka's own
//! code): the decoder accepts/rejects as Maka's `decodeRuntimeEvent`, the payload
//! identity check agrees with `row_identity`, and a row reader (decode + identity)
//! agrees with the store.

mod common;

use wsledger::event::{
    decode_event, decode_event_text, payload_identity_matches, row_identity_matches, RowIdentity,
};
use wsledger::json::parse;

fn row_of(v: &serde_json::Value) -> RowIdentity {
    let s = |k: &str| {
        v["row"][k]
            .as_str()
            .unwrap_or_else(|| panic!("row.{k}"))
            .to_string()
    };
    RowIdentity {
        event_id: s("event_id"),
        session_id: s("session_id"),
        invocation_id: s("invocation_id"),
        run_id: s("run_id"),
        turn_id: s("turn_id"),
    }
}

#[test]
fn decode_vectors() {
    let text = include_str!("vectors/decode.jsonl");
    let mut failures = Vec::new();
    let mut count = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("vector line is JSON");
        count += 1;
        let name = v["name"].as_str().expect("name").to_string();
        let payload = v["payload_json"].as_str().expect("payload_json");
        let row = row_of(&v);
        let want_decode = v["maka_decode"] == "accept";
        let want_identity = v["row_identity"] == "match";
        let want_store = v["store_read"] == "accept";

        let decoded = decode_event_text(payload);
        if decoded.is_ok() != want_decode {
            failures.push(format!(
                "{name}: decode {} but Maka {} ({:?})",
                if decoded.is_ok() {
                    "accepts"
                } else {
                    "rejects"
                },
                v["maka_decode"],
                decoded.as_ref().err()
            ));
        }

        // Identity of the parsed payload, whether or not it decodes.
        let identity = parse(payload).is_ok_and(|j| payload_identity_matches(&j, &row));
        if identity != want_identity {
            failures.push(format!(
                "{name}: payload identity {identity} but Maka {}",
                v["row_identity"]
            ));
        }

        let store = decoded
            .as_ref()
            .is_ok_and(|e| row_identity_matches(e, &row));
        if store != want_store {
            failures.push(format!(
                "{name}: row read {store} but store {}",
                v["store_read"]
            ));
        }

        // Decoding the parsed value directly agrees with decoding the text.
        if let Ok(j) = parse(payload) {
            if decode_event(j).is_ok() != decoded.is_ok() {
                failures.push(format!(
                    "{name}: decode_event and decode_event_text disagree"
                ));
            }
        }
    }
    assert_eq!(count, 166, "decode.jsonl line count");
    common::assert_no_failures(&failures, "failing vectors");
}
