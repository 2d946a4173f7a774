//! Maka 0.2, known from its published release notes only (apache/maka `CHANGELOG.md`,
//! "0.2.0 - Unreleased"): its start-up verdict is not verified against its code, so the
//! upgrade preview says "not known" for it; what its notes state, it says, counted from
//! the file:
//! - it retires the Task Ledger: its first open drops `workflow_task_ledger_events`,
//!   and the tasks that are not finished are not migrated: they are deleted for good;
//! - the sessions it writes do not open in 0.1.x releases (their decoders refuse its
//!   reshaped records), so going back needs a copy taken before.
//!
//! A task is unfinished when its latest snapshot in the ledger (the events of its
//! session in `sequence` order, as Maka's projection reads them: each event carries the
//! whole task) has a status other than `completed`, `failed` or `cancelled`. Pure.

use std::collections::BTreeMap;

use serde::Serialize;

/// The name the preview gives the build.
pub const RELEASE: &str = "v0.2.0";

/// What its release notes say opening the file does, in our words.
pub const CONSEQUENCES: &[&str] = &[
    "its first open drops the Task Ledger (`workflow_task_ledger_events`): tasks that are \
     not finished are not migrated and are deleted for good",
    "the sessions it writes no longer open in Maka 0.1.x: take a copy of the workspace \
     folder before opening it with 0.2, to be able to go back",
];

const TERMINAL: &[&str] = &["completed", "failed", "cancelled"];

/// `unfinished_tasks`: what the Task Ledger retirement deletes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UnfinishedTasks {
    pub total: usize,
    /// Per conversation, in session order.
    pub sessions: Vec<SessionTasks>,
    /// Events whose record does not read as a task event (their tasks are not counted).
    pub unreadable_events: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionTasks {
    pub session_id: String,
    pub tasks: usize,
}

/// Counts the unfinished tasks from the ledger's events (`(session, record)`, each
/// session's in `sequence` order).
#[derive(Default)]
pub struct TaskCount {
    /// session → task id → latest status.
    latest: BTreeMap<String, BTreeMap<String, String>>,
    unreadable: usize,
}

impl TaskCount {
    pub fn add(&mut self, session: &str, record: Option<&str>) {
        let parsed = record.and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok());
        let Some(event) = parsed.as_ref().and_then(|v| v.as_object()) else {
            self.unreadable += 1;
            return;
        };
        let id = event.get("taskId").and_then(|v| v.as_str());
        let status = event
            .get("task")
            .and_then(|t| t.get("status"))
            .or_else(|| event.get("nextStatus"))
            .and_then(|v| v.as_str());
        match (id, status) {
            (Some(id), Some(status)) => {
                self.latest
                    .entry(session.to_owned())
                    .or_default()
                    .insert(id.to_owned(), status.to_owned());
            }
            _ => self.unreadable += 1,
        }
    }

    pub fn finish(self) -> UnfinishedTasks {
        let sessions: Vec<SessionTasks> = self
            .latest
            .into_iter()
            .map(|(session_id, tasks)| SessionTasks {
                session_id,
                tasks: tasks
                    .values()
                    .filter(|s| !TERMINAL.contains(&s.as_str()))
                    .count(),
            })
            .filter(|s| s.tasks > 0)
            .collect();
        UnfinishedTasks {
            total: sessions.iter().map(|s| s.tasks).sum(),
            sessions,
            unreadable_events: self.unreadable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(task: &str, status: &str) -> String {
        format!(
            r#"{{"eventId":"e","type":"task_updated","taskId":"{task}","nextStatus":"{status}","task":{{"id":"{task}","status":"{status}"}}}}"#
        )
    }

    #[test]
    fn a_task_counts_by_its_latest_status_per_conversation() {
        let mut c = TaskCount::default();
        c.add("s1", Some(&event("a", "pending")));
        c.add("s1", Some(&event("a", "completed")));
        c.add("s1", Some(&event("b", "in_progress")));
        c.add("s2", Some(&event("c", "completed")));
        c.add("s2", Some(&event("c", "pending")));
        c.add("s2", Some(&event("d", "blocked")));
        c.add("s3", Some(&event("e", "cancelled")));
        c.add("s3", Some("{not json"));
        c.add("s3", None);
        let u = c.finish();
        assert_eq!(u.total, 3);
        assert_eq!(
            u.sessions,
            [
                SessionTasks {
                    session_id: "s1".into(),
                    tasks: 1
                },
                SessionTasks {
                    session_id: "s2".into(),
                    tasks: 2
                },
            ]
        );
        assert_eq!(u.unreadable_events, 2);
    }
}
