//! What the header and the rest of the projection say once a run is sealed: the
//! header patch, the run event, the `turn_state` record and the session status.

use serde_json::{Map, Value};

use super::session_cursor::{turn_state_needed, turn_status_of, SessionCursor};
use super::{ids, records, recovery};
use crate::db::facts::RunRows;
use crate::db::write::{HeaderWrite, MessageWrite, RunEventWrite, RunWrite, SessionWrite};
use crate::header::RunHeader;
/// What the header and the rest of the projection say.
pub(super) struct Projection<'a> {
    pub(super) run_status: &'a str,
    pub(super) ts: i64,
    pub(super) failure_class: Option<&'a str>,
    pub(super) abort_source: Option<&'a str>,
    pub(super) run_data: Map<String, Value>,
}

pub(super) fn header_write(h: &RunHeader, p: &Projection<'_>, rows: &RunRows) -> HeaderWrite {
    let rec = records::patched_header(h, p.run_status, p.ts, p.failure_class, p.abort_source);
    HeaderWrite {
        created_at: h.created_at as i64,
        record_json: ids::js_stringify(&Value::Object(rec)),
        expected_record_json: rows
            .header
            .as_ref()
            .map(|r| r.record_json.clone())
            .unwrap_or_default(),
    }
}

/// The run event, the `turn_state` record and the session status (recipe B).
pub(super) fn project_rest(
    h: &RunHeader,
    rows: &RunRows,
    p: &Projection<'_>,
    cursor: &mut SessionCursor,
    write: &mut RunWrite,
) {
    let session_id = h.session_id.as_str();
    let run_id = h.run_id.as_str();
    if !recovery::has_terminal_run_event(&rows.run_events) {
        let id = ids::derived_uuid(ids::RUN_EVENT, session_id, run_id);
        let (kind, rec) =
            records::terminal_run_event(&id, h, p.run_status, p.ts, p.run_data.clone());
        write.run_event = Some(RunEventWrite {
            sequence: rows
                .run_events
                .iter()
                .map(|e| e.sequence)
                .max()
                .map_or(0, |m| m + 1),
            event_id: id,
            event_type: kind,
            event_ts: p.ts,
            record_json: ids::js_stringify(&rec),
        });
    }
    let turn_status = turn_status_of(p.run_status);
    if turn_state_needed(h, turn_status, cursor) {
        let id = ids::derived_uuid(ids::TURN_STATE, session_id, run_id);
        let retained = recovery::turn_has_retained_output(&cursor.messages, &h.turn_id);
        let rec = records::turn_state(
            &id,
            h,
            p.ts,
            turn_status,
            p.failure_class,
            p.abort_source,
            retained,
        );
        if let Value::Object(o) = &rec {
            cursor.messages.push(o.clone());
        }
        write.message = Some(MessageWrite {
            sequence: cursor.next_message,
            message_id: id,
            message_type: "turn_state".into(),
            message_ts: p.ts,
            record_json: ids::js_stringify(&rec),
            file: cursor.transcript_file.as_ref().map(|f| f.path.clone()),
        });
        cursor.next_message += 1;
    }
    if !cursor.status_written {
        if let Some(payload) = &cursor.payload {
            let status = payload.get("status").and_then(Value::as_str);
            // Maka's recovery sets a session with a recovered run `active`
            // (`session-manager.ts`, the same in every release; measured on v0.1.5,
            // v0.1.7 and v0.1.11 files, where a latched store had left it `blocked`). A
            // session that already is active keeps its row (issue notes, 25).
            if status.is_some_and(|s| s != "active") {
                let next = records::active_session(payload, p.ts);
                write.session = Some(SessionWrite {
                    expected_version: cursor.version,
                    payload_json: ids::js_stringify(&Value::Object(next.clone())),
                    committed_at: p.ts,
                });
                cursor.payload = Some(next);
                cursor.version += 1;
                cursor.status_written = true;
            }
        }
    }
}
