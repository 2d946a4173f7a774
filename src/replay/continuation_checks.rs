//! Continuation claims: the source prefix digest each claim stores (and each boundary
//! segment and continuation-start event pins) compared with the digest recomputed
//! from this session's rows.

use serde_json::{json, Value};

use super::fold::{lossy, RunRows};
use super::{digest, Divergence, Note, RunReplay, SessionRows};
use crate::event::RuntimeEvent;
use crate::json::Json;

pub(super) fn continuation_checks(
    rows: &SessionRows,
    runs: &[RunRows<'_>],
    out_runs: &mut [RunReplay],
    session_divergences: &mut Vec<Divergence>,
    session_notes: &mut Vec<Note>,
) {
    // Recomputes the prefix of (run, invocation) up to `high_water`.
    let recompute =
        |identity: &digest::PrefixIdentity, high_water: i64| -> Result<String, String> {
            let run = runs
                .iter()
                .find(|r| r.run_id == identity.run_id)
                .ok_or_else(|| format!("the session has no rows of run `{}`", identity.run_id))?;
            let mut prefix: Vec<(i64, &RuntimeEvent)> = Vec::new();
            for (seq, row, d) in &run.events {
                if row.invocation_id != identity.invocation_id || *seq > high_water {
                    continue;
                }
                match d {
                    Ok(e) => prefix.push((*seq, e)),
                    Err(m) => return Err(format!("row `{}` cannot be decoded: {m}", row.event_id)),
                }
            }
            if prefix.len() as i64 != high_water {
                return Err(format!(
                    "the claim pins {high_water} events but the run has {} up to that point",
                    prefix.len()
                ));
            }
            digest::prefix_digest(identity, &prefix)
        };
    let mut push = |d: Divergence| match d
        .run_id
        .as_ref()
        .and_then(|id| out_runs.iter_mut().find(|r| r.run_id == *id))
    {
        Some(run) => run.divergences.push(d),
        None => session_divergences.push(d),
    };
    for c in &rows.claims {
        let source_here = c.source_session_id == rows.session_id;
        if !source_here {
            if c.target_session_id == rows.session_id {
                let mut n = Note::new(
                    "continuation_source_elsewhere",
                    format!(
                        "claim `{}` continues run `{}` of session `{}`; its prefix is not replayed here",
                        c.claim_id, c.source_run_id, c.source_session_id
                    ),
                );
                n.run_id = Some(c.target_run_id.clone());
                n.detail = json!({"claim_id": c.claim_id});
                session_notes.push(n);
            }
            continue;
        }
        let identity = digest::PrefixIdentity {
            session_id: c.source_session_id.clone(),
            invocation_id: c.source_invocation_id.clone(),
            run_id: c.source_run_id.clone(),
            turn_id: c.source_turn_id.clone(),
        };
        let base = |code, msg: String| {
            let mut d = Divergence::new(code, msg).run(&c.source_run_id);
            d.detail = json!({"claim_id": c.claim_id});
            d
        };
        let recomputed = match recompute(&identity, c.source_event_high_water) {
            Ok(x) => x,
            Err(m) => {
                push(
                    base(
                        "continuation_prefix_unreadable",
                        format!("claim `{}`: {m}", c.claim_id),
                    )
                    .values(
                        "source_prefix_digest",
                        json!(c.source_prefix_digest),
                        Value::Null,
                    ),
                );
                continue;
            }
        };
        if recomputed != c.source_prefix_digest {
            push(
                base(
                    "continuation_digest_mismatch",
                    format!(
                        "claim `{}`: stored source prefix digest differs from the recomputed one",
                        c.claim_id
                    ),
                )
                .values(
                    "source_prefix_digest",
                    json!(c.source_prefix_digest),
                    json!(recomputed),
                ),
            );
        }
        // Every boundary segment of this session's runs.
        if let Ok(b) = serde_json::from_str::<Value>(&c.boundary_json) {
            let segs = b
                .get("segments")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (i, seg) in segs.iter().enumerate() {
                let ident = &seg["identity"];
                let g = |k: &str| {
                    ident
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                if g("sessionId") != rows.session_id {
                    continue;
                }
                let id = digest::PrefixIdentity {
                    session_id: g("sessionId"),
                    invocation_id: g("invocationId"),
                    run_id: g("runId"),
                    turn_id: g("turnId"),
                };
                let hw = seg["position"]["lastEventSeq"].as_i64().unwrap_or(0);
                let stored = seg.get("prefixDigest").cloned().unwrap_or(Value::Null);
                let field = format!("boundary_json.segments[{i}].prefixDigest");
                match recompute(&id, hw) {
                    Ok(d) if json!(d) != stored => {
                        let mut x = base(
                            "continuation_digest_mismatch",
                            format!(
                                "claim `{}`: boundary segment {i} digest differs",
                                c.claim_id
                            ),
                        )
                        .values(field, stored, json!(d));
                        x.run_id = Some(id.run_id.clone());
                        push(x);
                    }
                    Err(m) => {
                        let mut x = base(
                            "continuation_prefix_unreadable",
                            format!("claim `{}`: boundary segment {i}: {m}", c.claim_id),
                        )
                        .values(field, stored, Value::Null);
                        x.run_id = Some(id.run_id.clone());
                        push(x);
                    }
                    _ => {}
                }
            }
        }
        // The continuation-start event of the target run.
        if let Some(start) = &c.start_event_id {
            let event = runs
                .iter()
                .flat_map(|r| r.events.iter())
                .find(|(_, row, _)| row.event_id == *start)
                .and_then(|(_, _, d)| d.as_ref().ok());
            let digest = event
                .and_then(|e| e.actions.as_ref())
                .and_then(|a| a.continuation_start.as_ref())
                .and_then(Json::as_object)
                .and_then(|o| o.get("immediateSource"))
                .and_then(Json::as_object)
                .and_then(|o| o.get("prefixDigest"))
                .and_then(Json::as_js_str)
                .map(lossy);
            if let Some(d) = digest {
                if d != recomputed {
                    let mut x = base(
                        "continuation_digest_mismatch",
                        format!(
                            "claim `{}`: the continuation-start event pins another prefix digest",
                            c.claim_id
                        ),
                    )
                    .values(
                        "continuationStart.immediateSource.prefixDigest",
                        json!(d),
                        json!(recomputed),
                    );
                    x.event_id = Some(start.clone());
                    push(x);
                }
            }
        }
    }
}
