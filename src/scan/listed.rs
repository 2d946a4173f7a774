//! Only what Maka lists counts (issue notes, 37): Maka's start-up lists sessions from
//! the session store (every `session_metadata` row, archived ones too) and, for each,
//! its runs and stored messages. A run header outside every listed session is never
//! read by Maka: it is reported once (`run_outside_sessions`) and judged no further.
//! Stored messages of listed sessions are read by strict start-up (v0.1.4 and later
//! keep them in `session_messages`), which throws on one it cannot read. Pure.

use std::collections::BTreeSet;

use super::runs::RunState;
use super::ScanReport;
use crate::db::listed::{ClaimRow, StoredMessageRow};
use crate::findings::Finding;
use crate::json::Json;

/// The stored message types Maka's decoder knows (`decodeStoredMessage`, the same
/// eight from v0.1.4 to main).
pub const STORED_MESSAGE_TYPES: &[&str] = &[
    "user",
    "assistant",
    "tool_call",
    "tool_result",
    "permission_decision",
    "token_usage",
    "turn_state",
    "system_note",
];

/// Run-finding codes that judge a run Maka reads: dropped for runs outside sessions.
const RUN_CODES: &[&str] = &[
    "run_stuck_running",
    "run_unreadable",
    "run_header_undecodable",
    "run_event_undecodable",
    "run_terminal_ambiguous",
    "run_terminal_without_status",
    "run_terminal_not_tail",
    "run_terminal_unusable",
    "run_header_terminal_without_event",
    "run_header_contradicts_terminal",
];

/// Leaves out of `report` every judgement of a run whose header lies outside the
/// listed sessions (`outside`, by key), and reports each such run once instead.
pub fn set_aside_unlisted_runs(report: &mut ScanReport, outside: &[(String, String)]) {
    if outside.is_empty() {
        return;
    }
    let keys: BTreeSet<(&str, &str)> = outside
        .iter()
        .map(|(s, r)| (s.as_str(), r.as_str()))
        .collect();
    let out = |s: &Option<String>, r: &Option<String>| match (s, r) {
        (Some(s), Some(r)) => keys.contains(&(s.as_str(), r.as_str())),
        _ => false,
    };
    report
        .findings
        .retain(|f| !(RUN_CODES.contains(&f.code) && out(&f.session_id, &f.run_id)));
    report
        .runs
        .retain(|r| !keys.contains(&(r.session_id.as_str(), r.run_id.as_str())));
    report
        .headers
        .retain(|h| !keys.contains(&(h.session_id.as_str(), h.run_id.as_str())));
    for (s, r) in outside {
        report.findings.push(
            Finding::new(
                "run_outside_sessions",
                format!(
                    "run `{r}` has a header but its session `{s}` has no session_metadata row: \
                     Maka never lists, recovers or stops its start-up on it"
                ),
            )
            .session(s)
            .run(r),
        );
    }
    let count = |state: RunState| report.runs.iter().filter(|r| r.state == state).count();
    report.summary.stuck_runs = count(RunState::Stuck);
    report.summary.unreadable_runs = count(RunState::Unreadable);
    report.summary.runs_awaiting_adoption = count(RunState::AwaitingAdoption);
    report.recount();
}

/// Why Maka's stored-message decoder refuses this record, if it does. Checks what
/// every message shares (an object of a known `type` with a string `id`, a finite
/// `ts` and, but for `system_note`, a string `turnId`); the per-type shapes are not
/// modelled.
pub fn stored_message_problem(record: &str) -> Option<String> {
    let value = match crate::json::parse(record) {
        Ok(v) => v,
        Err(e) => return Some(format!("not JSON: {e}")),
    };
    let Json::Object(o) = &value else {
        return Some("not a JSON object".to_owned());
    };
    let kind = match o.get("type") {
        Some(Json::String(t)) => t.to_string(),
        _ => return Some("no message type".to_owned()),
    };
    if !STORED_MESSAGE_TYPES.contains(&kind.as_str()) {
        return Some(format!("unknown message type {kind:?}"));
    }
    if !matches!(o.get("id"), Some(Json::String(_))) {
        return Some(format!("{kind} message without a string id"));
    }
    if !matches!(o.get("ts"), Some(Json::Number(n)) if n.is_finite()) {
        return Some(format!("{kind} message without a finite ts"));
    }
    if kind != "system_note" && !matches!(o.get("turnId"), Some(Json::String(_))) {
        return Some(format!("{kind} message without a string turnId"));
    }
    None
}

/// `session_message_unreadable` for each row Maka's recovery read refuses, in
/// session and sequence order (`rows` are the suspects the store found).
pub fn session_message_findings(rows: &[StoredMessageRow]) -> Vec<Finding> {
    rows.iter()
        .filter_map(|row| {
            let why = match &row.record {
                Err(why) => why.clone(),
                Ok(record) => stored_message_problem(record)?,
            };
            Some(
                Finding::new(
                    "session_message_unreadable",
                    format!(
                        "stored session message {} cannot be read: {why}",
                        row.sequence
                    ),
                )
                .session(&row.session_id),
            )
        })
        .collect()
}

/// Why Maka's store cannot read a continuation-claim row, if it cannot, in the words
/// of its own error: the protocol, the payload JSON, and the row's source columns
/// against the last boundary segment of its payload (`decodeContinuationClaimRow`,
/// the same from v0.1.3 to main). The claim payload's own shape is not modelled.
pub fn claim_row_problem(row: &ClaimRow) -> Option<String> {
    if row.protocol_version != Some(1.0) {
        let v = row
            .protocol_version
            .map_or_else(|| "null".to_owned(), |v| v.to_string());
        return Some(format!("Unsupported continuation claim protocol {v}"));
    }
    let parse = |text: &Option<String>| text.as_deref().and_then(|t| crate::json::parse(t).ok());
    let Some(boundary) = parse(&row.boundary_json) else {
        return Some(format!(
            "Continuation claim {} boundary_json is not JSON",
            row.claim_id
        ));
    };
    if parse(&row.target_run_header_json).is_none() {
        return Some(format!(
            "Continuation claim {} {} is not JSON",
            row.claim_id, row.target_column
        ));
    }
    let get = |v: &Json, k: &str| -> Option<Json> {
        match v {
            Json::Object(o) => o.get(k).cloned(),
            _ => None,
        }
    };
    let last = match &get(&boundary, "segments") {
        Some(Json::Array(a)) => a.last().cloned(),
        _ => None,
    };
    let Some(last) = last else {
        return Some(format!(
            "Continuation claim {} has no boundary segment",
            row.claim_id
        ));
    };
    let identity = get(&last, "identity").unwrap_or(Json::Null);
    let text_of = |v: Option<Json>| match &v {
        Some(Json::String(s)) => s.as_str().map(str::to_owned),
        _ => None,
    };
    let same_ids = ["sessionId", "invocationId", "runId", "turnId"]
        .iter()
        .zip(&row.source)
        .all(|(k, col)| col.is_some() && text_of(get(&identity, k)) == *col);
    let high_water = match get(&last, "position").and_then(|p| get(&p, "lastEventSeq")) {
        Some(Json::Number(n)) => Some(n),
        _ => None,
    };
    let same = same_ids
        && high_water.is_some()
        && high_water == row.source_event_high_water
        && row.source_prefix_digest.is_some()
        && text_of(get(&last, "prefixDigest")) == row.source_prefix_digest;
    (!same).then(|| {
        format!(
            "Continuation claim row/payload identity mismatch for {}",
            row.claim_id
        )
    })
}

/// Maka's store reads every continuation-claim row before any append: one it cannot
/// read refuses every append, plain ones included. Sets `maka_gate` so and reports
/// each such row (`continuation_claim_unreadable`). Strict start-up reads the claims
/// of the sessions it recovers: a row whose target session is listed (`listed`)
/// names that session, which makes it a start-up blocker.
pub fn refuse_appends_on_claims(
    report: &mut ScanReport,
    claims: &[(ClaimRow, String)],
    listed: &BTreeSet<String>,
) {
    let Some((first, why)) = claims.first() else {
        return;
    };
    report.maka_gate.tool_writes_refused = true;
    report.maka_gate.plain_appends_refused = true;
    report.maka_gate.claim_failure = Some(super::GateClaimFailure {
        claim_id: first.claim_id.clone(),
        message: why.clone(),
    });
    for (row, why) in claims {
        let mut f = Finding::new(
            "continuation_claim_unreadable",
            format!(
                "continuation claim `{}` (target session `{}`): {why}",
                row.claim_id, row.target_session_id
            ),
        );
        if listed.contains(&row.target_session_id) {
            f = f.session(&row.target_session_id);
        }
        report.findings.push(f);
    }
    report.recount();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_only_as_a_known_object() {
        assert_eq!(
            stored_message_problem(r#"{"type":"user","id":"m1","ts":1,"turnId":"t","text":"x"}"#),
            None
        );
        for bad in [
            r#"{"$maka":"session-message-chunks-v1"}"#,
            r#"{"type":"note","id":"m1","ts":1}"#,
            r#"{"type":"user","ts":1}"#,
            r#"{"type":"user","id":"m1","ts":"1"}"#,
            r#"{"type":"assistant","id":"m1","ts":1}"#,
            "[1]",
            "{",
        ] {
            assert!(stored_message_problem(bad).is_some(), "{bad}");
        }
    }

    fn claim(source_run: &str, high_water: f64) -> ClaimRow {
        ClaimRow {
            claim_id: "claim-1".into(),
            protocol_version: Some(1.0),
            boundary_json: Some(
                r#"{"segments":[{"identity":{"invocationId":"i","runId":"r","sessionId":"s","turnId":"t"},"position":{"lastEventSeq":2},"prefixDigest":"sha256:ab"}]}"#
                    .into(),
            ),
            source: [
                Some("s".into()),
                Some("i".into()),
                Some(source_run.into()),
                Some("t".into()),
            ],
            source_event_high_water: Some(high_water),
            source_prefix_digest: Some("sha256:ab".into()),
            target_session_id: "target".into(),
            target_run_header_json: Some("{}".into()),
            target_column: "target_run_header_json",
        }
    }

    #[test]
    fn a_claim_row_reads_only_when_its_columns_are_its_payloads() {
        assert_eq!(claim_row_problem(&claim("r", 2.0)), None);
        for bad in [claim("forged", 2.0), claim("r", 3.0)] {
            assert_eq!(
                claim_row_problem(&bad).as_deref(),
                Some("Continuation claim row/payload identity mismatch for claim-1")
            );
        }
        let mut v2 = claim("r", 2.0);
        v2.protocol_version = Some(2.0);
        assert!(claim_row_problem(&v2).unwrap().contains("protocol 2"));
        let mut broken = claim("r", 2.0);
        broken.boundary_json = Some("{".into());
        assert!(claim_row_problem(&broken).is_some());
    }

    #[test]
    fn only_refused_rows_become_findings() {
        let row = |seq: i64, record: Result<&str, &str>| StoredMessageRow {
            session_id: "s".into(),
            sequence: seq,
            record: record.map(str::to_owned).map_err(str::to_owned),
        };
        let f = session_message_findings(&[
            row(
                0,
                Ok(r#"{"type":"system_note","id":"a","ts":2,"kind":"abort"}"#),
            ),
            row(1, Err("no payload row")),
            row(2, Ok("{}")),
        ]);
        assert_eq!(f.len(), 2);
        assert!(f[0].message.contains("message 1"));
        assert!(f[1].message.contains("message 2"));
        assert_eq!(f[0].session_id.as_deref(), Some("s"));
    }
}
