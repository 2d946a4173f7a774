//! The session as stored (`session_metadata`), with notes where it is missing, archived,
//! or its status disagrees with its runs.

use serde_json::{json, Value};

use super::{Note, RunReplay, SessionInfo, SessionRows};

pub(super) fn session_info(
    rows: &SessionRows,
    runs: &[RunReplay],
    notes: &mut Vec<Note>,
) -> SessionInfo {
    let status = rows.session.as_ref().and_then(|s| {
        serde_json::from_str::<Value>(&s.payload_json)
            .ok()
            .and_then(|v| v.get("status").and_then(Value::as_str).map(str::to_owned))
    });
    match &rows.session {
        None => notes.push(Note::new(
            "session_missing",
            "the session has no session_metadata row",
        )),
        Some(s) if s.is_archived => notes.push(Note::new(
            "session_archived",
            "the session is archived: Maka's start-up recovery skips it",
        )),
        _ => {}
    }
    let open: Vec<&str> = runs
        .iter()
        .filter(|r| {
            r.header_status.is_some()
                && r.status
                    .as_deref()
                    .is_some_and(|s| matches!(s, "created" | "running" | "waiting_for_user"))
        })
        .map(|r| r.run_id.as_str())
        .collect();
    if let Some(st) = &status {
        let busy = matches!(st.as_str(), "running" | "waiting_for_user");
        if busy && open.is_empty() {
            let mut n = Note::new(
                "session_status",
                format!("session status is `{st}` but no run of the session is open"),
            );
            n.detail = json!({"status": st});
            notes.push(n);
        } else if !busy && !open.is_empty() {
            let mut n = Note::new(
                "session_status",
                format!(
                    "session status is `{st}` while run(s) {} are open in the log",
                    open.join(", ")
                ),
            );
            n.detail = json!({"status": st, "open_runs": open});
            notes.push(n);
        }
    }
    SessionInfo {
        exists: rows.session.is_some(),
        name: rows.session.as_ref().map(|s| s.name.clone()),
        status,
        is_archived: rows.session.as_ref().is_some_and(|s| s.is_archived),
        user_version: rows.schema.user_version,
    }
}
