//! Every line of `tests/vectors/canonical.jsonl`: `encode_canonical(decode(parse(input)))`
//! is Maka's `encodeCanonicalRuntimeEvent(...).json` byte for byte, or fails where Maka
//! throws; and every canonical text is a fixed point.

mod common;

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
    common::assert_no_failures(&failures, "failing vectors");
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

/// Every `runtime_events` row of the real fixture workspaces (written by Maka): the
/// rows the store refuses to read (decode failure or row/payload identity mismatch)
/// are exactly those of Maka's verdict (`wholeFile.decodeFailures`), and every other
/// row is stored exactly in its canonical encoding.
#[test]
fn fixture_rows_match_maka_verdicts_and_are_canonical() {
    use wsledger::event::{decode_event_text, row_identity_matches, RowIdentity};
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .expect("fixtures directory")
        .map(|d| d.expect("dir entry").path())
        .filter(|p| p.join("runtime.sqlite").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 10, "fixture workspaces missing");
    let mut failures = Vec::new();
    let mut rows = 0;
    for dir in &dirs {
        let scenario = dir.file_name().unwrap().to_string_lossy().to_string();
        let verdict: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("verdict.json")).unwrap())
                .expect("verdict.json");
        let mut want_refused: Vec<String> = verdict["wholeFile"]["decodeFailures"]
            .as_array()
            .expect("wholeFile.decodeFailures")
            .iter()
            .map(|d| d["eventId"].as_str().unwrap().to_string())
            .collect();
        want_refused.sort();
        // `immutable=1`: read the file as it is, without creating -wal/-shm beside it.
        let uri = format!("file:{}?immutable=1", dir.join("runtime.sqlite").display());
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let conn = rusqlite::Connection::open_with_flags(&uri, flags).expect("open fixture");
        let mut stmt = conn
            .prepare(
                "SELECT event_id, session_id, invocation_id, run_id, turn_id, payload_json \
                 FROM runtime_events",
            )
            .expect("query");
        let mut q = stmt.query([]).expect("rows");
        let mut refused = Vec::new();
        while let Some(r) = q.next().expect("row") {
            rows += 1;
            let get = |i| r.get::<_, String>(i).expect("text column");
            let row = RowIdentity {
                event_id: get(0),
                session_id: get(1),
                invocation_id: get(2),
                run_id: get(3),
                turn_id: get(4),
            };
            let payload = get(5);
            let event = match decode_event_text(&payload) {
                Ok(e) if row_identity_matches(&e, &row) => e,
                _ => {
                    refused.push(row.event_id.clone());
                    continue;
                }
            };
            match encode_canonical(&event) {
                Ok(text) if text == payload => {}
                other => failures.push(format!(
                    "{scenario}/{}: stored text is not its canonical encoding: {other:?}",
                    row.event_id
                )),
            }
        }
        refused.sort();
        if refused != want_refused {
            failures.push(format!(
                "{scenario}: refused rows {refused:?}, Maka {want_refused:?}"
            ));
        }
    }
    assert!(rows > 400, "only {rows} rows read");
    common::assert_no_failures(&failures, "failures");
}
