//! The scan's in-place check of an ordinary event (`check_ordinary`) against the
//! exact decoder and the ledger's lane rules: what it passes is on the ordinary lane,
//! carries no tool fact and is not terminal. (It lives here, not beside the decoder,
//! so that `event` imports neither `ledger` nor `scan`.)

#[path = "../src/fixture_dbs.rs"]
mod fixture_dbs;
#[path = "../src/mutate.rs"]
mod mutate;

use wsledger::event::{check_ordinary, decode_event_text_exact, reads_in_place_for_walk};
use wsledger::ledger::scanner::{tool_ledger_lane_as, Lane};
use wsledger::scan::is_tool_bearing;

/// Whether `check_ordinary` accepted `text` for `ids`; when it did, the exact
/// decoder gives an event with those ids, on the ordinary lane, not terminal, with
/// the same `ts` and `partial`.
fn ordinary_agrees(text: &str, ids: [&str; 5]) -> bool {
    let Some(o) = check_ordinary(text, ids) else {
        return false;
    };
    let e = decode_event_text_exact(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let got = [
        &e.id,
        &e.invocation_id,
        &e.run_id,
        &e.session_id,
        &e.turn_id,
    ];
    assert!(got.iter().zip(ids).all(|(g, want)| **g == *want), "{text}");
    for parent_refs in [false, true] {
        assert_eq!(
            tool_ledger_lane_as(&e, parent_refs),
            Some(Lane::Ordinary),
            "{text}"
        );
    }
    assert!(!is_tool_bearing(&e) && !e.is_terminal(), "{text}");
    assert_eq!(
        (o.ts.to_bits(), o.partial),
        (e.ts.to_bits(), e.partial),
        "{text}"
    );
    true
}

#[test]
fn an_ordinary_event_is_checked_in_place_as_the_exact_decoder_reads_it() {
    let payloads = fixture_dbs::payloads();
    let (mut accepted, mut ordinary, mut damaged) = (0, 0, 0);
    let mut damage = mutate::Mutator::new(0x3c6e_f372_fe94_f82b);
    for p in &payloads {
        let Ok(e) = decode_event_text_exact(p) else {
            continue;
        };
        let ids = [
            &e.id,
            &e.invocation_id,
            &e.run_id,
            &e.session_id,
            &e.turn_id,
        ];
        let ids: Vec<String> = ids.iter().map(|s| s.to_string_lossy()).collect();
        let ids: [&str; 5] = std::array::from_fn(|k| ids[k].as_str());
        let plainly_ordinary = tool_ledger_lane_as(&e, true) == Some(Lane::Ordinary)
            && !e.is_terminal()
            && reads_in_place_for_walk(p);
        ordinary += usize::from(plainly_ordinary);
        accepted += usize::from(ordinary_agrees(p, ids));
        // Another row's identity is never taken for this one.
        let mut other = ids;
        other[4] = "another-turn";
        assert!(check_ordinary(p, other).is_none(), "{p}");
        for _ in 0..30 {
            if let Some(m) = damage.mutate(p) {
                damaged += usize::from(ordinary_agrees(&m, ids));
            }
        }
    }
    // Most ordinary events the fixtures hold are read this way.
    assert!(accepted * 10 >= ordinary * 7, "{accepted} of {ordinary}");
    assert!(accepted > 100 && damaged > 100, "{accepted} {damaged}");
}

#[test]
fn what_could_be_a_tool_fact_or_terminal_is_not_ordinary() {
    const TEXT: &str = r#"{"id":"e1","invocationId":"i1","runId":"i1","sessionId":"s1",
        "turnId":"t1","ts":17,"partial":false,"role":"model","author":"agent",
        "refs":{"stepId":"p1"},"actions":{"stateDelta":{"a":[1]},"endInvocation":false,
        "runtimeProtocol":{"toolBoundary":"t1_after_preflight_v1"}},
        "content":{"kind":"text","text":"a\nb","providerOptions":{"x":{}}}}"#;
    const IDS: [&str; 5] = ["e1", "i1", "i1", "s1", "t1"];
    assert!(ordinary_agrees(TEXT, IDS));
    let thinking = TEXT.replace(r#""kind":"text","#, r#""kind":"thinking","signature":"s","#);
    assert!(ordinary_agrees(&thinking, IDS));
    for (from, to) in [
        // Terminal, or a tool fact, or left to the exact decoder.
        (r#""endInvocation":false"#, r#""endInvocation":true"#),
        (
            r#""partial":false,"#,
            r#""partial":false,"status":"running","#,
        ),
        (r#""kind":"text","#, r#""kind":"function_call","#),
        (r#""stateDelta":{"a":[1]}"#, r#""toolDispatch":{}"#),
        (r#""stateDelta":{"a":[1]}"#, r#""toolRecovery":{}"#),
        (r#""stateDelta":{"a":[1]}"#, r#""artifactDelta":{}"#),
        (r#""kind":"text","#, r#""kind":"text","signature":"s","#),
        (r#""text":"a\nb""#, r#""text":"a\nb","displayText":"x""#),
        // Refused by Maka.
        (r#""providerOptions":{"x":{}}"#, r#""providerOptions":[]"#),
        (r#""stateDelta":{"a":[1]}"#, r#""stateDelta":1"#),
        (r#""t1_after_preflight_v1""#, r#""t2""#),
        (r#""ts":17"#, r#""ts":1e400"#),
        (r#""stepId":"p1""#, r#""sourceMessageDigest":"sha256:0""#),
    ] {
        assert_eq!(TEXT.matches(from).count(), 1, "{from}");
        let v = TEXT.replace(from, to);
        assert!(check_ordinary(&v, IDS).is_none(), "{v}");
    }
}
