//! The cached transcript (`session_messages`) compared with the projection of the log,
//! the soft way Maka compares them.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use super::fold::RunRows;
use super::{transcript, Note, RunReplay, SessionRows};

/// Maka's soft comparison of the projection with `session_messages`, over the turns
/// Maka projects (runs that are session-inline and not in flight).
pub(super) fn cache_comparison(
    rows: &SessionRows,
    runs: &[RunRows<'_>],
    out_runs: &[RunReplay],
    projection: &transcript::Projection,
    notes: &mut Vec<Note>,
) {
    // Maka projects inline runs with a terminal fact; an open inline run without one
    // is in flight (its cached messages stand for it on both sides).
    let excluded_runs: HashSet<&str> = out_runs
        .iter()
        .filter(|r| !r.session_inline || r.classification.as_deref() != Some("fact"))
        .map(|r| r.run_id.as_str())
        .collect();
    let in_flight_turns: HashSet<String> = out_runs
        .iter()
        .filter(|r| {
            r.session_inline
                && r.classification.as_deref() != Some("fact")
                && r.header_status
                    .as_deref()
                    .is_some_and(|s| matches!(s, "created" | "running" | "waiting_for_user"))
        })
        .filter_map(|r| r.turn_id.clone())
        .collect();
    let event_run: HashMap<&str, &str> = runs
        .iter()
        .flat_map(|r| {
            r.events
                .iter()
                .map(move |(_, row, _)| (row.event_id.as_str(), r.run_id.as_str()))
        })
        .collect();
    let projected: Vec<Value> = projection
        .messages
        .iter()
        .filter(|(ev, _)| {
            event_run
                .get(ev.as_str())
                .is_none_or(|r| !excluded_runs.contains(r))
        })
        .map(|(_, m)| m.clone())
        .collect();
    let mut cached = Vec::new();
    for m in &rows.messages {
        match m
            .record_json
            .as_ref()
            .map(|t| serde_json::from_str::<Value>(t))
        {
            Ok(Ok(v)) => {
                let turn = v.get("turnId").and_then(Value::as_str).unwrap_or_default();
                if !in_flight_turns.contains(turn) {
                    cached.push(v);
                }
            }
            Ok(Err(e)) => {
                let mut n = Note::new(
                    "session_messages_unreadable",
                    format!("session_messages {} is not JSON: {e}", m.sequence),
                );
                n.detail = json!({"sequence": m.sequence, "message_id": m.message_id});
                notes.push(n);
            }
            Err(e) => {
                let mut n = Note::new("session_messages_unreadable", e.clone());
                n.detail = json!({"sequence": m.sequence, "message_id": m.message_id});
                notes.push(n);
            }
        }
    }
    if rows.messages.is_empty() && projected.is_empty() {
        return;
    }
    let (missing, unexpected) = transcript::compare_with_cache(&projected, &cached);
    if missing.is_empty() && unexpected.is_empty() {
        return;
    }
    let mut n = Note::new(
        "session_messages_differ",
        format!(
            "cached transcript: {} semantic messages the projection lacks, {} projected messages the cache lacks (soft in Maka)",
            missing.len(),
            unexpected.len()
        ),
    );
    n.detail =
        json!({"missing_legacy_message": missing, "unexpected_projected_message": unexpected});
    notes.push(n);
}
