//! `replay --session` after `doctor excise --apply`: the `event_seq` gap an excision
//! leaves is a note naming the bundle (`event_seq_gap_excised`), not a divergence, as
//! long as that bundle is beside the database; without it the gap is damage again.

mod common;

use common::{copy_fixture, wsledger};
use serde_json::Value;

fn codes(doc: &Value, what: &str) -> Vec<String> {
    let runs = doc["runs"].as_array().unwrap();
    runs.iter()
        .flat_map(|r| r[what].as_array().unwrap().iter())
        .chain(doc[what].as_array().unwrap())
        .map(|x| x["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_excised_event_leaves_a_note_while_its_bundle_is_beside_the_database() {
    let (_dir, ws) = copy_fixture("corrupt-ledger");
    let w = ws.to_str().unwrap();
    let excised = wsledger(&["doctor", "excise", "-w", w, "--apply", "--format", "json"]);
    assert_eq!(excised.status, 0, "{}", excised.stderr);
    let doc: Value = serde_json::from_str(&excised.stdout).unwrap();
    let session = doc["sessions"][0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let bundle = doc["sessions"][0]["bundle"].as_str().unwrap().to_owned();

    let replay = || {
        let o = wsledger(&["replay", "-w", w, "--session", &session, "--format", "json"]);
        let doc: Value = serde_json::from_str(&o.stdout).unwrap();
        (o.status, doc)
    };

    let (status, doc) = replay();
    assert_eq!(status, 0, "{doc}");
    assert_eq!(codes(&doc, "divergences"), Vec::<String>::new());
    let notes: Vec<&Value> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["notes"].as_array().unwrap())
        .filter(|n| n["code"] == "event_seq_gap_excised")
        .collect();
    assert_eq!(notes.len(), 1, "{doc}");
    let message = notes[0]["message"].as_str().unwrap();
    assert!(message.contains(&bundle), "{message}");
    assert!(message.contains("event_seq 2 was excised"), "{message}");

    // Without the bundle nothing explains the gap.
    let dir = std::path::Path::new(&bundle).parent().unwrap().to_owned();
    std::fs::rename(&dir, ws.join("elsewhere")).unwrap();
    let (status, doc) = replay();
    assert_eq!(status, 1, "{doc}");
    assert_eq!(codes(&doc, "divergences"), vec!["event_seq_gap".to_owned()]);
    assert!(!codes(&doc, "notes").contains(&"event_seq_gap_excised".to_owned()));
}
