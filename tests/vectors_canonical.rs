//! Every line of `tests/vectors/canonical.jsonl`: `encode_canonical(decode(parse(input)))`
//! is Maka's `encodeCanonicalRuntimeEvent(...).json` byte for byte, or fails where Maka
//! throws; and every canonical text is a fixed point.

use wsledger::event::{decode_event, encode_canonical, EncodeError};
use wsledger::json::parse;

/// Maka's encoder: decode (schema errors are rejections too), then encode.
fn encode_text(text: &str) -> Result<String, String> {
    let value = parse(text).map_err(|e| format!("parse: {e}"))?;
    let event = decode_event(value).map_err(|e| format!("decode: {e}"))?;
    encode_canonical(&event).map_err(|e| format!("encode: {e}"))
}

#[test]
fn canonical_vectors() {
    let text = include_str!("vectors/canonical.jsonl");
    let mut failures = Vec::new();
    let mut count = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("vector line is JSON");
        count += 1;
        let name = v["name"].as_str().expect("name");
        let input = v["input_json"].as_str().expect("input_json");
        let got = encode_text(input);
        match (v.get("canonical").and_then(|c| c.as_str()), v.get("throws")) {
            (Some(want), None) => {
                match &got {
                    Ok(g) if g == want => {}
                    Ok(g) => failures.push(format!("{name}:\n  got  {g}\n  want {want}")),
                    Err(e) => failures.push(format!("{name}: failed ({e}), want {want}")),
                }
                match encode_text(want) {
                    Ok(again) if again == want => {}
                    other => {
                        failures.push(format!("{name}: canonical is not a fixed point: {other:?}"))
                    }
                }
            }
            (None, Some(throws)) => {
                let throws = throws.as_str().unwrap_or_default();
                match &got {
                    Ok(g) => failures.push(format!("{name}: encoded {g}, want throw {throws:?}")),
                    Err(e) => {
                        // Maka's two messages map onto our two failure kinds.
                        let lossless = throws.contains("not losslessly serializable");
                        if lossless != e.starts_with("encode:") {
                            failures.push(format!("{name}: failed with {e}, Maka: {throws}"));
                        }
                    }
                }
            }
            _ => failures.push(format!("{name}: vector has neither canonical nor throws")),
        }
    }
    assert_eq!(count, 28, "canonical.jsonl line count");
    assert!(
        failures.is_empty(),
        "{} failing vectors:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn not_lossless_is_the_encoder_error() {
    let line = include_str!("vectors/canonical.jsonl")
        .lines()
        .find(|l| l.contains("\"num/negative-zero-state-delta\""))
        .expect("vector present");
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let event = decode_event(parse(v["input_json"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(encode_canonical(&event), Err(EncodeError::NotLossless));
}
