//! Re-used identities (calls, dispatches, responses, operations) and which occurrence
//! each projection keeps: the stored tool row, the transcript, the model context.

use super::{context, Kept, SessionRows, Supersession};
use crate::ledger::scanner::ToolLedgerScan;
use crate::scan::projection::supersession_groups;

pub(super) fn supersession(
    scan: &ToolLedgerScan,
    rows: &SessionRows,
    strict: &context::ContextPlan,
) -> Vec<Supersession> {
    supersession_groups(scan, &rows.operations)
        .into_iter()
        .map(|g| {
            let ids: Vec<String> = g.occurrences.iter().map(|o| o.event_id.clone()).collect();
            let model_context = match g.kind.as_str() {
                "call" => strict
                    .paired
                    .iter()
                    .map(|p| &p.call_event_id)
                    .chain(strict.calls_without_result.iter().map(|u| &u.event_id))
                    .find(|e| ids.contains(e))
                    .cloned(),
                "response" => strict
                    .paired
                    .iter()
                    .map(|p| &p.result_event_id)
                    .find(|e| ids.contains(e))
                    .cloned(),
                _ => None,
            };
            let transcript = match g.kind.as_str() {
                "call" | "response" => ids.clone(),
                _ => Vec::new(),
            };
            Supersession {
                kind: g.kind,
                run_id: g.run_id,
                invocation_id: g.invocation_id,
                tool_call_id: g.tool_call_id,
                operation_id: g.operation_id,
                event_ids: ids,
                kept: Kept {
                    tool_operations: g.projection_keeps,
                    transcript,
                    model_context,
                },
            }
        })
        .collect()
}
