//! Terminal classification of one run: Maka's `classifyTerminalRuntimeLedger` and
//! `classifyRuntimeEventTerminalFact`, plus the workspace verdict's flags and the
//! "immutable tail" rule Maka applies before adopting a terminal event.
//!
//! Pure: no I/O.

use std::borrow::Borrow;
use std::fmt;

use crate::event::{Content, EventStatus, RuntimeEvent};
use crate::json::{JsStr, Json};

/// The six AgentRun header statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunStatus {
    Created,
    Running,
    WaitingForUser,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Created,
        RunStatus::Running,
        RunStatus::WaitingForUser,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Created => "created",
            RunStatus::Running => "running",
            RunStatus::WaitingForUser => "waiting_for_user",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// The status Maka spells `s`, if any.
    pub fn from_maka(s: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// completed, failed or cancelled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// created, running or waiting_for_user.
    pub fn is_open(self) -> bool {
        !self.is_terminal()
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What classification reads of an AgentRun header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunHeaderView {
    pub session_id: JsStr,
    pub run_id: JsStr,
    pub turn_id: JsStr,
    pub status: RunStatus,
    /// `failureClass`, when the header has a string there.
    pub failure_class: Option<JsStr>,
    /// `abortSource`, when the header has a string there.
    pub abort_source: Option<JsStr>,
}

/// `runStatus` of a terminal fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TerminalRunStatus {
    Completed,
    Failed,
    Cancelled,
}

impl TerminalRunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TerminalRunStatus::Completed => "completed",
            TerminalRunStatus::Failed => "failed",
            TerminalRunStatus::Cancelled => "cancelled",
        }
    }

    /// The header status this fact closes a run with.
    pub fn run_status(self) -> RunStatus {
        match self {
            TerminalRunStatus::Completed => RunStatus::Completed,
            TerminalRunStatus::Failed => RunStatus::Failed,
            TerminalRunStatus::Cancelled => RunStatus::Cancelled,
        }
    }
}

/// `turnStatus` of a terminal fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TerminalTurnStatus {
    Completed,
    Failed,
    Aborted,
}

impl TerminalTurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TerminalTurnStatus::Completed => "completed",
            TerminalTurnStatus::Failed => "failed",
            TerminalTurnStatus::Aborted => "aborted",
        }
    }
}

/// Maka's `RuntimeEventTerminalFact`: a complete terminal fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalFact {
    pub run_status: TerminalRunStatus,
    pub turn_status: TerminalTurnStatus,
    pub terminal_event_id: JsStr,
    /// Non-empty; set exactly when `run_status` is failed.
    pub failure_class: Option<JsStr>,
    /// Non-empty; set exactly when `run_status` is cancelled.
    pub abort_source: Option<JsStr>,
}

/// `kind` of a classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TerminalKind {
    /// Exactly one matching terminal event, and it is a complete fact.
    Fact,
    /// No matching terminal event.
    None,
    /// Exactly one matching terminal event, but no complete fact (no terminal status,
    /// failed without failure class, aborted/cancelled without abort source).
    IncompleteSingleTerminal,
    /// More than one matching terminal event.
    Ambiguous,
}

impl TerminalKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TerminalKind::Fact => "fact",
            TerminalKind::None => "none",
            TerminalKind::IncompleteSingleTerminal => "incomplete_single_terminal",
            TerminalKind::Ambiguous => "ambiguous",
        }
    }
}

impl fmt::Display for TerminalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `code` of a read-model diagnostic. Terminal classification only produces one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiagnosticCode {
    IncompleteEvent,
}

impl DiagnosticCode {
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticCode::IncompleteEvent => "incomplete_event",
        }
    }
}

/// One diagnostic of `classifyRuntimeEventTerminalFact`. Maka's diagnostic names either
/// an event (`event_id`, with that event's run and turn) or carries a `detail` of the
/// header's run and turn (plus `eventIds` when several terminals match).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalDiagnostic {
    pub code: DiagnosticCode,
    /// Maka's exact message.
    pub message: &'static str,
    /// The event named, for event diagnostics.
    pub event_id: Option<JsStr>,
    pub run_id: JsStr,
    pub turn_id: JsStr,
    /// `detail.eventIds`, for the "multiple matching" diagnostic.
    pub detail_event_ids: Option<Vec<JsStr>>,
}

impl TerminalDiagnostic {
    /// True when Maka reports this diagnostic with a `detail` object rather than an
    /// `eventId`.
    pub fn has_detail(&self) -> bool {
        self.event_id.is_none()
    }
}

/// The result of [`classify_terminal_ledger`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalClassification {
    pub kind: TerminalKind,
    /// The matching terminal events, in list order.
    pub terminal_event_ids: Vec<JsStr>,
    /// Set exactly when `kind` is [`TerminalKind::Fact`].
    pub fact: Option<TerminalFact>,
    /// Diagnostics of `classifyRuntimeEventTerminalFact` (empty for a fact).
    pub diagnostics: Vec<TerminalDiagnostic>,
}

impl TerminalClassification {
    /// The single matching terminal event (for `fact` and `incomplete_single_terminal`).
    pub fn single_terminal_event_id(&self) -> Option<&JsStr> {
        match self.terminal_event_ids.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }
}

/// Maka's `matchingTerminalRuntimeEvents`: non-partial events with the header's
/// session, run and turn that are terminal (a terminal status or `endInvocation`).
pub fn matching_terminal_events<'a, E: Borrow<RuntimeEvent>>(
    header: &RunHeaderView,
    events: &'a [E],
) -> Vec<&'a RuntimeEvent> {
    events
        .iter()
        .map(Borrow::borrow)
        .filter(|e| {
            !e.partial
                && e.session_id == header.session_id
                && e.run_id == header.run_id
                && e.turn_id == header.turn_id
                && e.is_terminal()
        })
        .collect()
}

/// Maka's `classifyTerminalRuntimeLedger(header, events)`, with the diagnostics of
/// `classifyRuntimeEventTerminalFact(header, events)`. `events` are the run's events
/// as Maka reads them (immutable rows in `event_seq` order, partial snapshots merged).
/// Generic over how the events are held, so that the scan can pass the terminal
/// events it keeps by reference rather than clone them.
pub fn classify_terminal_ledger<E: Borrow<RuntimeEvent>>(
    header: &RunHeaderView,
    events: &[E],
) -> TerminalClassification {
    let matching = matching_terminal_events(header, events);
    let terminal_event_ids: Vec<JsStr> = matching.iter().map(|e| e.id.clone()).collect();
    let header_diagnostic = |message: &'static str, ids: Option<Vec<JsStr>>| TerminalDiagnostic {
        code: DiagnosticCode::IncompleteEvent,
        message,
        event_id: None,
        run_id: header.run_id.clone(),
        turn_id: header.turn_id.clone(),
        detail_event_ids: ids,
    };
    let classification = |kind, fact, diagnostics| TerminalClassification {
        kind,
        terminal_event_ids: terminal_event_ids.clone(),
        fact,
        diagnostics,
    };

    if events.is_empty() {
        let d = header_diagnostic("runtime ledger has no readable RuntimeEvents", None);
        return classification(TerminalKind::None, None, vec![d]);
    }
    let terminal = match matching.as_slice() {
        [] => {
            let d = header_diagnostic("runtime ledger has no matching terminal RuntimeEvent", None);
            return classification(TerminalKind::None, None, vec![d]);
        }
        [only] => *only,
        _ => {
            let d = header_diagnostic(
                "runtime ledger has multiple matching terminal RuntimeEvents",
                Some(terminal_event_ids.clone()),
            );
            return classification(TerminalKind::Ambiguous, None, vec![d]);
        }
    };

    match single_terminal_fact(header, terminal) {
        Ok(fact) => classification(TerminalKind::Fact, Some(fact), Vec::new()),
        Err(message) => {
            let d = TerminalDiagnostic {
                code: DiagnosticCode::IncompleteEvent,
                message,
                event_id: Some(terminal.id.clone()),
                run_id: terminal.run_id.clone(),
                turn_id: terminal.turn_id.clone(),
                detail_event_ids: None,
            };
            classification(TerminalKind::IncompleteSingleTerminal, None, vec![d])
        }
    }
}

/// The fact of the single matching terminal event, or Maka's message for why it is
/// incomplete.
fn single_terminal_fact(
    header: &RunHeaderView,
    terminal: &RuntimeEvent,
) -> Result<TerminalFact, &'static str> {
    let fact = |run_status, turn_status, failure_class, abort_source| TerminalFact {
        run_status,
        turn_status,
        terminal_event_id: terminal.id.clone(),
        failure_class,
        abort_source,
    };
    match terminal.status {
        Some(EventStatus::Completed) => Ok(fact(
            TerminalRunStatus::Completed,
            TerminalTurnStatus::Completed,
            None,
            None,
        )),
        Some(EventStatus::Failed) => match failure_class(terminal, header) {
            Some(class) => Ok(fact(
                TerminalRunStatus::Failed,
                TerminalTurnStatus::Failed,
                Some(class),
                None,
            )),
            None => Err("failed terminal RuntimeEvent requires a stable failure class"),
        },
        Some(EventStatus::Aborted | EventStatus::Cancelled) => match abort_source(terminal, header)
        {
            Some(source) => Ok(fact(
                TerminalRunStatus::Cancelled,
                TerminalTurnStatus::Aborted,
                None,
                Some(source),
            )),
            None => Err("aborted terminal RuntimeEvent requires an abort source"),
        },
        Some(EventStatus::Streaming) | None => {
            Err("terminal RuntimeEvent requires a terminal status for recovery")
        }
    }
}

/// `stateDelta[key]` when it is a string (an empty string counts: it ends Maka's search).
fn state_delta_string<'a>(event: &'a RuntimeEvent, key: &str) -> Option<&'a JsStr> {
    let delta = event.actions.as_ref()?.state_delta.as_ref()?;
    match delta.get(key) {
        Some(Json::String(s)) => Some(s),
        _ => None,
    }
}

fn non_empty(s: Option<&JsStr>) -> Option<&JsStr> {
    s.filter(|s| !s.is_empty())
}

/// Maka's failure-class search: the first string among stateDelta `failureClass`,
/// `errorClass`, `reason`, `code`; else error content `reason`, then `code` (non-empty);
/// else the header's. An empty result is no class.
fn failure_class(event: &RuntimeEvent, header: &RunHeaderView) -> Option<JsStr> {
    let (reason, code) = match &event.content {
        Some(Content::Error { reason, code, .. }) => (reason.as_ref(), code.as_ref()),
        _ => (None, None),
    };
    ["failureClass", "errorClass", "reason", "code"]
        .iter()
        .find_map(|key| state_delta_string(event, key))
        .or_else(|| non_empty(reason))
        .or_else(|| non_empty(code))
        .or(header.failure_class.as_ref())
        .filter(|s| !s.is_empty())
        .cloned()
}

/// Maka's abort-source search: stateDelta `abortSource`, then `source` (strings), else
/// the header's non-empty `abortSource`. An empty result is no source. (Maka also looks
/// in `refs`, which can hold neither key.)
fn abort_source(event: &RuntimeEvent, header: &RunHeaderView) -> Option<JsStr> {
    state_delta_string(event, "abortSource")
        .or_else(|| state_delta_string(event, "source"))
        .or_else(|| non_empty(header.abort_source.as_ref()))
        .filter(|s| !s.is_empty())
        .cloned()
}

/// Any event (partial or not, any turn) is terminal.
pub fn has_terminal_runtime_event(events: &[RuntimeEvent]) -> bool {
    events.iter().any(RuntimeEvent::is_terminal)
}

/// The workspace verdict's run flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TerminalVerdict {
    /// Some event of the run (partial or not, any turn) is terminal.
    pub has_terminal_runtime_event: bool,
    /// Header open and no terminal event.
    pub stuck_running: bool,
    /// Header terminal and no terminal event.
    pub header_terminal_without_event: bool,
    /// Header open but a terminal event exists.
    pub event_terminal_but_header_open: bool,
}

/// The verdict flags of a run from its header and events.
pub fn terminal_verdict(header: &RunHeaderView, events: &[RuntimeEvent]) -> TerminalVerdict {
    let has = has_terminal_runtime_event(events);
    let open = header.status.is_open();
    TerminalVerdict {
        has_terminal_runtime_event: has,
        stuck_running: open && !has,
        header_terminal_without_event: !open && !has,
        event_terminal_but_header_open: open && has,
    }
}

/// Maka's tail rule (`ensureTerminalRuntimeEventDurable` on an existing event): among
/// the run's immutable events (its `runtime_events` rows in `event_seq` order, partial
/// rows included, partial snapshots excluded) the given event is the only one that is
/// terminal, appears once, and is the last. Maka adopts a terminal only then.
pub fn terminal_is_immutable_tail(
    terminal_event_id: &JsStr,
    immutable_events: &[RuntimeEvent],
) -> bool {
    let occurrences = immutable_events
        .iter()
        .filter(|e| e.id == *terminal_event_id)
        .count();
    let mut terminals = immutable_events.iter().filter(|e| e.is_terminal());
    let only_terminal =
        terminals.next().is_some_and(|t| t.id == *terminal_event_id) && terminals.next().is_none();
    occurrences == 1
        && only_terminal
        && immutable_events
            .last()
            .is_some_and(|e| e.id == *terminal_event_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Actions, Author, Role};
    use crate::json::JsObject;
    use crate::ledger::scanner::test_events::{base, s, text};

    fn header(status: RunStatus) -> RunHeaderView {
        RunHeaderView {
            session_id: s("S"),
            run_id: s("R"),
            turn_id: s("T"),
            status,
            failure_class: None,
            abort_source: None,
        }
    }

    fn delta(pairs: &[(&str, Json)]) -> Option<Actions> {
        let mut d = JsObject::new();
        for (k, v) in pairs {
            d.insert(s(k), v.clone());
        }
        Some(Actions {
            state_delta: Some(d),
            end_invocation: Some(true),
            ..Actions::default()
        })
    }

    fn terminal(id: &str, status: Option<EventStatus>, actions: Option<Actions>) -> RuntimeEvent {
        let mut e = base(id, Role::System, Author::System);
        e.status = status;
        e.actions = Some(Box::new(actions.unwrap_or(Actions {
            end_invocation: Some(true),
            ..Actions::default()
        })));
        e
    }

    fn error_content(reason: Option<&str>, code: Option<&str>) -> Option<Content> {
        Some(Content::Error {
            message: s("boom"),
            code: code.map(s),
            reason: reason.map(s),
            details: None,
        })
    }

    fn kind(h: &RunHeaderView, events: &[RuntimeEvent]) -> TerminalKind {
        classify_terminal_ledger(h, events).kind
    }

    fn fact(h: &RunHeaderView, events: &[RuntimeEvent]) -> TerminalFact {
        classify_terminal_ledger(h, events).fact.expect("a fact")
    }

    fn message(h: &RunHeaderView, events: &[RuntimeEvent]) -> &'static str {
        let c = classify_terminal_ledger(h, events);
        assert_eq!(c.diagnostics.len(), 1);
        c.diagnostics[0].message
    }

    #[test]
    fn header_statuses() {
        for status in RunStatus::ALL {
            assert_eq!(RunStatus::from_maka(status.as_str()), Some(status));
        }
        let open: Vec<_> = RunStatus::ALL.into_iter().filter(|s| s.is_open()).collect();
        assert_eq!(
            open,
            vec![
                RunStatus::Created,
                RunStatus::Running,
                RunStatus::WaitingForUser
            ]
        );
    }

    #[test]
    fn none_without_events_or_without_a_matching_terminal() {
        let h = header(RunStatus::Running);
        let c = classify_terminal_ledger::<RuntimeEvent>(&h, &[]);
        assert_eq!(c.kind, TerminalKind::None);
        assert_eq!(
            c.diagnostics[0].message,
            "runtime ledger has no readable RuntimeEvents"
        );
        assert!(c.diagnostics[0].has_detail());
        assert_eq!(c.diagnostics[0].code.as_str(), "incomplete_event");

        // Partial, other-turn and non-terminal events do not match.
        let mut partial = terminal("p", Some(EventStatus::Completed), None);
        partial.partial = true;
        let mut other_turn = terminal("o", Some(EventStatus::Completed), None);
        other_turn.turn_id = s("T2");
        let events = vec![text("t"), partial, other_turn];
        let c = classify_terminal_ledger(&h, &events);
        assert_eq!(c.kind, TerminalKind::None);
        assert!(c.terminal_event_ids.is_empty());
        assert_eq!(
            c.diagnostics[0].message,
            "runtime ledger has no matching terminal RuntimeEvent"
        );
        assert_eq!(
            (&c.diagnostics[0].run_id, &c.diagnostics[0].turn_id),
            (&s("R"), &s("T"))
        );
        let v = terminal_verdict(&h, &events);
        assert!(v.has_terminal_runtime_event && v.event_terminal_but_header_open);
        assert!(!v.stuck_running && !v.header_terminal_without_event);
    }

    #[test]
    fn ambiguous_with_several_terminals() {
        let h = header(RunStatus::Running);
        let events = vec![
            terminal("a", Some(EventStatus::Completed), None),
            text("t"),
            terminal("b", None, None),
        ];
        let c = classify_terminal_ledger(&h, &events);
        assert_eq!(c.kind, TerminalKind::Ambiguous);
        assert_eq!(c.terminal_event_ids, vec![s("a"), s("b")]);
        assert_eq!(
            c.diagnostics[0].detail_event_ids,
            Some(vec![s("a"), s("b")])
        );
        assert!(c.fact.is_none());
        assert_eq!(c.single_terminal_event_id(), None);
    }

    #[test]
    fn completed_is_always_a_fact() {
        let h = header(RunStatus::Running);
        let mut on_text = text("m");
        on_text.status = Some(EventStatus::Completed);
        let f = fact(&h, &[text("u"), on_text]);
        assert_eq!(f.run_status, TerminalRunStatus::Completed);
        assert_eq!(f.turn_status, TerminalTurnStatus::Completed);
        assert_eq!(f.terminal_event_id, s("m"));
        assert_eq!((f.failure_class, f.abort_source), (None, None));
    }

    #[test]
    fn failed_needs_a_failure_class() {
        let mut h = header(RunStatus::Running);
        let failed = |actions, content| {
            let mut e = terminal("f", Some(EventStatus::Failed), actions);
            e.content = content;
            vec![e]
        };
        let sd = |k: &str, v: Json| delta(&[(k, v)]);
        let class = |h: &RunHeaderView, e: &[RuntimeEvent]| fact(h, e).failure_class.unwrap();
        assert_eq!(
            class(&h, &failed(sd("errorClass", Json::String(s("net"))), None)),
            s("net")
        );
        assert_eq!(
            class(&h, &failed(sd("code", Json::String(s("E42"))), None)),
            s("E42")
        );
        // Non-strings are skipped, then error content reason, then code.
        let both = error_content(Some("why"), Some("http_500"));
        assert_eq!(
            class(&h, &failed(sd("reason", Json::Number(1.0)), both)),
            s("why")
        );
        assert_eq!(
            class(&h, &failed(None, error_content(Some(""), Some("c")))),
            s("c")
        );
        // An empty string in stateDelta ends the search: incomplete.
        let events = failed(
            sd("failureClass", Json::String(s(""))),
            error_content(Some("why"), None),
        );
        assert_eq!(kind(&h, &events), TerminalKind::IncompleteSingleTerminal);
        assert_eq!(
            message(&h, &events),
            "failed terminal RuntimeEvent requires a stable failure class"
        );
        let c = classify_terminal_ledger(&h, &events);
        assert_eq!(c.diagnostics[0].event_id, Some(s("f")));
        assert_eq!(c.single_terminal_event_id(), Some(&s("f")));
        // The header's class completes a bare failed event; an empty one does not.
        let bare = failed(None, None);
        assert_eq!(kind(&h, &bare), TerminalKind::IncompleteSingleTerminal);
        h.failure_class = Some(s("tool_error"));
        assert_eq!(class(&h, &bare), s("tool_error"));
        let f = fact(&h, &bare);
        assert_eq!(
            (f.run_status, f.turn_status),
            (TerminalRunStatus::Failed, TerminalTurnStatus::Failed)
        );
        h.failure_class = Some(s(""));
        assert_eq!(kind(&h, &bare), TerminalKind::IncompleteSingleTerminal);
    }

    #[test]
    fn aborted_and_cancelled_need_an_abort_source() {
        let mut h = header(RunStatus::Running);
        for status in [EventStatus::Aborted, EventStatus::Cancelled] {
            let with = vec![terminal(
                "a",
                Some(status),
                delta(&[("source", Json::String(s("user")))]),
            )];
            let f = fact(&h, &with);
            assert_eq!(f.run_status, TerminalRunStatus::Cancelled);
            assert_eq!(f.turn_status, TerminalTurnStatus::Aborted);
            assert_eq!(f.abort_source, Some(s("user")));
            let bare = vec![terminal("a", Some(status), None)];
            assert_eq!(
                message(&h, &bare),
                "aborted terminal RuntimeEvent requires an abort source"
            );
            let empty = vec![terminal(
                "a",
                Some(status),
                delta(&[("abortSource", Json::String(s("")))]),
            )];
            h.abort_source = Some(s("host"));
            assert_eq!(fact(&h, &bare).abort_source, Some(s("host")));
            assert_eq!(kind(&h, &empty), TerminalKind::IncompleteSingleTerminal);
            h.abort_source = None;
        }
    }

    #[test]
    fn end_invocation_without_terminal_status_is_incomplete() {
        let h = header(RunStatus::Completed);
        for status in [None, Some(EventStatus::Streaming)] {
            let events = vec![text("t"), terminal("e", status, None)];
            assert_eq!(kind(&h, &events), TerminalKind::IncompleteSingleTerminal);
            assert_eq!(
                message(&h, &events),
                "terminal RuntimeEvent requires a terminal status for recovery"
            );
        }
    }

    #[test]
    fn verdict_flags() {
        let open = header(RunStatus::WaitingForUser);
        let closed = header(RunStatus::Cancelled);
        let none = vec![text("t")];
        let some = vec![text("t"), terminal("e", Some(EventStatus::Completed), None)];
        let v = terminal_verdict(&open, &none);
        assert!(v.stuck_running && !v.has_terminal_runtime_event);
        assert!(!v.header_terminal_without_event && !v.event_terminal_but_header_open);
        let v = terminal_verdict(&closed, &none);
        assert!(v.header_terminal_without_event && !v.stuck_running);
        let v = terminal_verdict(&closed, &some);
        assert_eq!(
            v,
            TerminalVerdict {
                has_terminal_runtime_event: true,
                ..TerminalVerdict::default()
            }
        );
        assert!(has_terminal_runtime_event(&some));
    }

    #[test]
    fn immutable_tail_rule() {
        let t = terminal("e", Some(EventStatus::Completed), None);
        let id = s("e");
        assert!(terminal_is_immutable_tail(&id, &[text("a"), t.clone()]));
        assert!(!terminal_is_immutable_tail(&id, &[t.clone(), text("b")]));
        assert!(!terminal_is_immutable_tail(&id, &[]));
        let other = terminal("o", Some(EventStatus::Failed), None);
        assert!(!terminal_is_immutable_tail(&id, &[other, t.clone()]));
        assert!(!terminal_is_immutable_tail(&id, &[t.clone(), t.clone()]));
        // A partial terminal row counts as a terminal.
        let mut partial = terminal("p", Some(EventStatus::Completed), None);
        partial.partial = true;
        assert!(!terminal_is_immutable_tail(&id, &[partial, t]));
    }
}
