//! From findings to a diagnosis: why each stuck or unreadable run is stuck (its
//! `cause`), which conversations hold damage and what setting them aside costs, and
//! the ordered remedy (`plan`) with the state the workspace is left in (`after`).
//!
//! Pure: the scan report, the finalize plan and a few rows in, values out. The
//! evidence is what the file holds: a run header's `traceWriteError` (the append
//! error that latched Maka's store) and, without one, the run's last durable facts.

pub mod workspace;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::db::diagnosis::{NamedEventRow, PartialTextRow, SessionLabelRow};
use crate::finalize::{Plan, RunInput, SkipReason};
use crate::findings::Finding;
use crate::header::RunHeader;
use crate::quarantine::{damaged_sessions, startup_blockers, Reason};
use crate::scan::runs::RunState;
use crate::scan::ScanReport;

pub use workspace::{diagnose_workspace, diagnose_workspace_with};

/// Every cause code, in the order the diagnosis tries them.
pub const CAUSE_CODES: &[(&str, &str)] = &[
    (
        "latched_transient_write_failure",
        "an append failed with a transient storage error (disk I/O, full disk, busy); Maka latched its store and skipped the terminal write",
    ),
    (
        "latched_ledger_rejection",
        "Maka's tool-ledger gate refused one of this run's own appends (the refused event never landed); the store latched",
    ),
    (
        "latched_ledger_corruption",
        "damage elsewhere in the file made Maka's gate refuse this run's tool write; the store latched",
    ),
    (
        "latched_run_identity_conflict",
        "an append named a run identity that conflicts with the run's stored rows; the store latched",
    ),
    (
        "latched_row_payload_mismatch",
        "a row whose payload disagrees with its own columns made every read of the ledger fail; the store latched",
    ),
    (
        "latched_other",
        "an append failed with another error (its text is the evidence); the store latched",
    ),
    (
        "crashed_mid_tool",
        "Maka stopped while a tool was running: the call was committed (T1), its outcome never was",
    ),
    (
        "crashed_mid_stream",
        "Maka stopped while the answer was streaming: its text survives only in a partial snapshot",
    ),
    (
        "crashed_before_first_step",
        "Maka stopped after the user message, before the model's first step left anything durable",
    ),
    (
        "unknown",
        "nothing in the file says why the run stopped",
    ),
];

/// What to do about a run of each cause code (`wsledger explain CODE`), in the order
/// of [`CAUSE_CODES`]. The plan of `wsledger doctor repair` is the authority for one
/// run; this says what it will usually be, and why.
pub const CAUSE_ADVICE: &[(&str, &str)] = &[
    (
        "latched_transient_write_failure",
        "Make room on the disk, or stop whatever else writes the file, before Maka runs again: \
         the same error would latch its store again. SQLite rolled the failed write back, so \
         it left no damage; the run only lacks its end, which `wsledger doctor finalize-runs \
         --apply` writes (with Maka stopped).",
    ),
    (
        "latched_ledger_rejection",
        "The refused event never reached the file, so the file holds no damage from it; the \
         run only lacks its end, which `wsledger doctor finalize-runs --apply` writes (with \
         Maka stopped). `evidence.issue_code` names what Maka's gate objected to.",
    ),
    (
        "latched_ledger_corruption",
        "Set aside the damaged session (`evidence.damaged_session_id`) with `wsledger doctor \
         quarantine --session ID --apply`: that reopens Maka's gate. The run can then be \
         finalized (unless it is in that session: then it is set aside with it). `wsledger \
         doctor repair --apply` does both, in that order.",
    ),
    (
        "latched_run_identity_conflict",
        "Read the run and the run it conflicts with (`evidence.conflicting_run_id`) with \
         `wsledger replay --session ID`; the plan of `wsledger doctor repair` says whether the \
         run can be finalized or its session must be set aside.",
    ),
    (
        "latched_row_payload_mismatch",
        "Maka cannot read its ledger while that row is in the file. Set aside the session that \
         holds it (`evidence.damaged_session_id`) with `wsledger doctor quarantine --session ID \
         --apply`, or run `wsledger doctor repair --apply`, which plans it.",
    ),
    (
        "latched_other",
        "Read the error in `evidence.trace_write_error` and remove its cause first; then \
         `wsledger doctor repair` plans what closes the run.",
    ),
    (
        "crashed_mid_tool",
        "Find out whether the tool's side effects happened before anyone runs it again: \
         `evidence.rerun_safe` is true only for a tool that declares `replay_safe`. Finalizing \
         the run (`wsledger doctor finalize-runs --apply`) records it as interrupted; it never \
         runs the tool.",
    ),
    (
        "crashed_mid_stream",
        "Read what survives of the answer with the command in `evidence.read_with`, then \
         finalize the run (`wsledger doctor finalize-runs --apply`), which closes it as Maka's \
         own start-up recovery would.",
    ),
    (
        "crashed_before_first_step",
        "Nothing of the model's work was lost. Finalize the run (`wsledger doctor \
         finalize-runs --apply`) and send the message again.",
    ),
    (
        "unknown",
        "Read the run with `wsledger replay --session ID`; `wsledger doctor repair` plans what \
         closes it.",
    ),
];

/// Known producer fingerprints for damaged events (inferences, never certainties).
pub const PRODUCERS: &[(&str, &str)] = &[(
    "maka_2234_refusal_fallback",
    "the synthetic refusal result of Maka's pre-dispatch refusal bug (#2234): a generic-lane function_response with a fresh UUID id, no operationId, isError, for a tool call that was never recorded",
)];

/// What quarantining a session sets aside.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SetAside {
    /// `session_messages` rows (the transcript).
    pub messages: usize,
    /// `core_agent_runs` rows.
    pub runs: usize,
    /// `tool_operations` rows.
    pub tool_calls: usize,
    /// Every row per table that moves into the bundle.
    pub rows: BTreeMap<String, usize>,
}

impl SetAside {
    pub fn from_counts(counts: &[(String, usize)]) -> SetAside {
        let get = |t: &str| counts.iter().filter(|(n, _)| n == t).map(|(_, c)| *c).sum();
        SetAside {
            messages: get("session_messages"),
            runs: get("core_agent_runs"),
            tool_calls: get("tool_operations"),
            rows: counts
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(t, n)| (t.clone(), *n))
                .collect(),
        }
    }
}

/// An inferred producer of a damaged event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Producer {
    pub code: &'static str,
    /// Always true: a fingerprint match, not a proof.
    pub inference: bool,
    pub note: &'static str,
}

/// One reason a session is damaged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DamageReason {
    pub code: String,
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer: Option<Producer>,
}

/// `diagnosis.damaged_sessions[]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DamagedSession {
    pub session_id: String,
    pub name: Option<String>,
    pub last_activity_ms: Option<i64>,
    pub reasons: Vec<DamageReason>,
    pub set_aside: SetAside,
    /// The plan's choice for this session: `excise` (only the damaged events go; the
    /// conversation stays) or `quarantine` (the fallback: the whole session is set
    /// aside).
    pub remedy: &'static str,
    /// What excision costs, in the user's terms (`None`: not possible here).
    pub excise_cost: Option<String>,
    /// Why excision does not heal this session (`None` when it does).
    pub excise_fallback: Option<String>,
    /// What quarantine costs, in the user's terms.
    pub quarantine_cost: String,
}

/// `diagnosis.causes[]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cause {
    pub session_id: String,
    pub run_id: String,
    pub session_name: Option<String>,
    /// `ts` of the run's latest event (ms).
    pub last_activity_ms: Option<i64>,
    pub code: &'static str,
    pub evidence: Value,
    /// The cause in words.
    pub summary: String,
    /// The plan step that deals with this run: `quarantine`, `finalize_runs` or
    /// `none` (left as it is; see `after`).
    pub remedy: &'static str,
}

/// `diagnosis.plan.steps[]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// `rederive`, `excise`, `quarantine` or `finalize_runs`.
    pub action: &'static str,
    pub command: String,
    pub fixes: String,
    pub costs: String,
    pub reversible: bool,
    /// How to undo it, or what keeps the previous state (the backup).
    pub undo: String,
}

/// `diagnosis.plan`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RemedyPlan {
    pub steps: Vec<Step>,
    /// The whole plan as one command (`None` when there is nothing to do).
    pub all_in_one: Option<String>,
    /// Why the steps' `--apply` would be refused on this file as it is (`None`: they
    /// would run).
    pub refused: Option<String>,
    /// When Maka refuses to open the file (`startup_refused`): that no step changes
    /// that, and what to do instead (set by `doctor scan`; see `crate::startup`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_refused: Option<String>,
}

/// `diagnosis.after`: the workspace once every step ran.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct After {
    pub tool_writes_refused: bool,
    pub startup_blocked: bool,
    pub stuck_runs: usize,
    /// Whether Maka starts is not known (a file of a Maka newer than this wsledger):
    /// `startup_blocked` is then `null` in the JSON.
    pub startup_unknown: bool,
}

impl Serialize for After {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("After", 3)?;
        m.serialize_field("tool_writes_refused", &self.tool_writes_refused)?;
        let blocked = (!self.startup_unknown).then_some(self.startup_blocked);
        m.serialize_field("startup_blocked", &blocked)?;
        m.serialize_field("stuck_runs", &self.stuck_runs)?;
        m.end()
    }
}

/// The `diagnosis` object of the scan document.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The gate's reach in words (`None` while Maka accepts tool writes).
    pub blast_radius: Option<String>,
    pub causes: Vec<Cause>,
    pub damaged_sessions: Vec<DamagedSession>,
    pub plan: RemedyPlan,
    /// The state now, for comparison with `after`.
    pub before: After,
    pub after: After,
    /// Titles of the sessions findings name, for tables (not part of the JSON).
    #[serde(skip)]
    pub session_names: BTreeMap<String, String>,
}

/// Everything the diagnosis reads besides the scan report.
pub struct Input<'a> {
    /// The workspace as the commands of the plan name it.
    pub workspace: &'a str,
    pub report: &'a ScanReport,
    pub archived: &'a BTreeSet<String>,
    /// The finalize plan made on the same file (what finalize-runs would do now).
    pub finalize: &'a Plan,
    /// The rows finalize planned from, by `(session, run)`.
    pub runs: &'a HashMap<(String, String), RunInput>,
    pub partials: &'a HashMap<(String, String), Vec<PartialTextRow>>,
    pub labels: &'a BTreeMap<String, SessionLabelRow>,
    /// What a quarantine of each damaged session removes (table, rows).
    pub set_aside: &'a BTreeMap<String, Vec<(String, usize)>>,
    /// Rows of the events named by [`wanted_events`] (absent: not in the file).
    pub events: &'a HashMap<String, NamedEventRow>,
    /// `(session, tool call id)` of [`wanted_tool_calls`] whose session records a call.
    pub recorded_calls: &'a BTreeSet<(String, String)>,
    /// Why a repair must refuse to write this file (`release::repair_basis::write_basis`), if it
    /// must.
    pub apply_refusal: Option<String>,
    /// Per damaged session with events to excise: `Ok(cost)` when excising them heals
    /// it (judged on a scan of the excised file), `Err(why not)` otherwise.
    pub excise: &'a BTreeMap<String, Result<String, String>>,
}

/// What a `traceWriteError` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Latch {
    Transient,
    /// "Tool ledger transition rejected: `<code>` at `<id>`" (ambiguous before v0.1.6:
    /// decided by whether the event is in the file).
    Rejected {
        code: String,
        event_id: String,
    },
    /// "Corrupt tool RuntimeEvent ledger: …" / "Tool ledger is corrupt: …".
    Corrupt {
        code: String,
        event_id: String,
    },
    RunIdentity {
        run_id: String,
    },
    RowPayload {
        event_id: String,
    },
    Other,
}

fn code_at_id(rest: &str) -> Option<(String, String)> {
    let (code, id) = rest.trim().split_once(" at ")?;
    let id = id
        .split_whitespace()
        .next()?
        .trim_end_matches(['.', ',', ')']);
    Some((code.trim().to_owned(), id.to_owned()))
}

fn after_marker<'t>(text: &'t str, marker: &str) -> Option<&'t str> {
    text.find(marker).map(|i| &text[i + marker.len()..])
}

/// Reads a header's `traceWriteError`.
pub fn parse_trace_error(text: &str) -> Latch {
    if let Some(rest) = after_marker(text, "Tool ledger transition rejected:") {
        if let Some((code, event_id)) = code_at_id(rest) {
            return Latch::Rejected { code, event_id };
        }
    }
    for marker in [
        "Corrupt tool RuntimeEvent ledger:",
        "Tool ledger is corrupt:",
    ] {
        if let Some(rest) = after_marker(text, marker) {
            if let Some((code, event_id)) = code_at_id(rest) {
                return Latch::Corrupt { code, event_id };
            }
        }
    }
    if let Some(rest) = after_marker(text, "RuntimeEvent run identity conflict for ") {
        let run_id = rest.split_whitespace().next().unwrap_or("").to_owned();
        return Latch::RunIdentity { run_id };
    }
    if let Some(rest) = after_marker(text, "RuntimeEvent row/payload identity mismatch for ") {
        let event_id = rest.split_whitespace().next().unwrap_or("").to_owned();
        return Latch::RowPayload { event_id };
    }
    let lower = text.to_ascii_lowercase();
    let transient = [
        "disk i/o error",
        "sqlite_ioerr",
        "database or disk is full",
        "sqlite_full",
        "database is locked",
        "sqlite_busy",
        "database table is locked",
        "sqlite_locked",
        "disk is full",
        "no space left",
    ];
    if transient.iter().any(|t| lower.contains(t)) {
        return Latch::Transient;
    }
    Latch::Other
}

/// Stuck and unreadable runs: the runs that get a cause.
fn runs_to_explain(report: &ScanReport) -> impl Iterator<Item = &crate::scan::runs::RunReport> {
    report
        .runs
        .iter()
        .filter(|r| matches!(r.state, RunState::Stuck | RunState::Unreadable))
}

fn header_of<'r>(report: &'r ScanReport, s: &str, r: &str) -> Option<&'r RunHeader> {
    report
        .headers
        .iter()
        .find(|h| h.session_id == s && h.run_id == r)
}

/// Event ids the diagnosis needs rows for: those the stuck runs' `traceWriteError`s
/// name, and every event a scanner issue names (producer fingerprints).
pub fn wanted_events(report: &ScanReport) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for run in runs_to_explain(report) {
        let Some(t) = header_of(report, &run.session_id, &run.run_id)
            .and_then(|h| h.trace_write_error.as_deref())
        else {
            continue;
        };
        match parse_trace_error(t) {
            Latch::Rejected { event_id, .. }
            | Latch::Corrupt { event_id, .. }
            | Latch::RowPayload { event_id } => {
                out.insert(event_id);
            }
            _ => {}
        }
    }
    for i in &report.issues {
        out.insert(i.event_id.to_string());
    }
    out
}

/// `(session, tool call id)` of the orphaned responses whose recorded call the
/// producer fingerprint asks about.
pub fn wanted_tool_calls(report: &ScanReport) -> BTreeSet<(String, String)> {
    report
        .issues
        .iter()
        .filter(|i| i.code.as_str() == "orphan_response")
        .filter_map(|i| {
            i.tool_call_id
                .as_ref()
                .map(|t| (i.session_id.to_string(), t.to_string()))
        })
        .collect()
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The #2234 fingerprint on a damaged event's row.
fn producer_of(row: &NamedEventRow, recorded: &BTreeSet<(String, String)>) -> Option<Producer> {
    if row.event_kind != "function_response" {
        return None;
    }
    let v: Value = serde_json::from_str(&row.payload_json).ok()?;
    let id = v.get("id")?.as_str()?;
    let refs = v.get("refs").and_then(Value::as_object);
    let has_op = refs.is_some_and(|r| r.contains_key("operationId"));
    let content = v.get("content")?;
    let is_error = content.get("isError").and_then(Value::as_bool) == Some(true);
    let call = refs
        .and_then(|r| r.get("toolCallId"))
        .or_else(|| content.get("id"))
        .and_then(Value::as_str)?;
    let seen = recorded.contains(&(row.session_id.clone(), call.to_owned()));
    (is_uuid(id) && !has_op && is_error && !seen).then_some(Producer {
        code: PRODUCERS[0].0,
        inference: true,
        note: PRODUCERS[0].1,
    })
}

/// Quotes a path for a POSIX shell when it needs it.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@,=%".contains(&b));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn label(input: &Input<'_>, s: &str) -> Option<String> {
    input.labels.get(s).and_then(|l| l.name.clone())
}

/// Diagnoses one workspace.
pub fn diagnose(input: &Input<'_>) -> Diagnosis {
    let report = input.report;
    let ws = shell_quote(input.workspace);
    let all_damaged = damaged_sessions(report, input.archived);
    // Excision first; quarantine only where it does not heal the session.
    let excised: BTreeSet<String> = input
        .excise
        .iter()
        .filter(|(s, c)| c.is_ok() && all_damaged.contains_key(*s))
        .map(|(s, _)| s.clone())
        .collect();
    let damaged: BTreeMap<String, Vec<Reason>> = all_damaged
        .iter()
        .filter(|(s, _)| !excised.contains(*s))
        .map(|(s, r)| (s.clone(), r.clone()))
        .collect();

    // Damaged sessions, with producers and costs.
    let damaged_sessions: Vec<DamagedSession> = all_damaged
        .iter()
        .map(|(s, reasons)| {
            let set_aside = input
                .set_aside
                .get(s)
                .map(|c| SetAside::from_counts(c))
                .unwrap_or_default();
            let name = label(input, s);
            let choice = input.excise.get(s);
            DamagedSession {
                session_id: s.clone(),
                last_activity_ms: input.labels.get(s).and_then(|l| l.last_activity_ms),
                reasons: reasons.iter().map(|r| damage_reason(input, r)).collect(),
                remedy: if excised.contains(s) {
                    "excise"
                } else {
                    "quarantine"
                },
                excise_cost: choice.and_then(|c| c.as_ref().ok().cloned()),
                excise_fallback: match choice {
                    Some(Err(why)) => Some(why.clone()),
                    Some(Ok(_)) => None,
                    None => Some(
                        "no damaged event to remove: the damage is in the run or \
                                  session records"
                            .to_owned(),
                    ),
                },
                quarantine_cost: format!(
                    "hides {}: {} message(s), {} run(s), {} tool call(s), until it is restored",
                    crate::excise::conversation(s, name.as_deref()),
                    set_aside.messages,
                    set_aside.runs,
                    set_aside.tool_calls
                ),
                name,
                set_aside,
            }
        })
        .collect();

    // What finalize-runs does with the runs outside the damaged sessions. A
    // continuation-claim row that does not read keeps refusing every append: no step
    // rewrites it.
    let handled = |s: &str| damaged.contains_key(s) || excised.contains(s);
    let gate_after = report.maka_gate.claim_failure.is_some()
        || report
            .issues
            .iter()
            .any(|i| !handled(&i.session_id.to_string()))
        || report.findings.iter().any(|f| {
            f.code == "event_undecodable" && f.session_id.as_deref().is_none_or(|s| !handled(s))
        });
    let planned: BTreeSet<(&str, &str)> = input
        .finalize
        .plan
        .iter()
        .filter(|e| !damaged.contains_key(&e.session_id))
        .map(|e| (e.session_id.as_str(), e.run_id.as_str()))
        .collect();
    // Runs finalize skips only because the gate is shut now: open after the quarantine.
    let unblocked: BTreeSet<(&str, &str)> = input
        .finalize
        .skipped
        .iter()
        .filter(|k| {
            (k.reason == SkipReason::NeedsToolOutcome && !gate_after)
                // Every undecodable row of an excised session goes with the excision.
                || (k.reason == SkipReason::RowsUndecodable && excised.contains(&k.session_id))
        })
        .filter(|k| !damaged.contains_key(&k.session_id))
        .map(|k| (k.session_id.as_str(), k.run_id.as_str()))
        .collect();
    let finalized = |s: &str, r: &str| planned.contains(&(s, r)) || unblocked.contains(&(s, r));

    let causes: Vec<Cause> = runs_to_explain(report)
        .map(|run| {
            let remedy = if damaged.contains_key(&run.session_id) {
                "quarantine"
            } else if finalized(&run.session_id, &run.run_id) {
                "finalize_runs"
            } else if excised.contains(&run.session_id) {
                "excise"
            } else {
                "none"
            };
            cause_of(input, run, remedy)
        })
        .collect();

    let stuck_now = report
        .runs
        .iter()
        .filter(|r| r.state == RunState::Stuck)
        .count();
    let stuck_after = report
        .runs
        .iter()
        .filter(|r| r.state == RunState::Stuck)
        .filter(|r| !damaged.contains_key(&r.session_id))
        .filter(|r| !finalized(&r.session_id, &r.run_id))
        .count();
    let blockers = startup_blockers(report, input.archived);
    let before = After {
        tool_writes_refused: report.maka_gate.tool_writes_refused,
        startup_blocked: !blockers.is_empty(),
        stuck_runs: stuck_now,
        startup_unknown: false,
    };
    let after = After {
        tool_writes_refused: gate_after,
        startup_blocked: blockers.iter().any(|(s, _, _)| !handled(s)),
        stuck_runs: stuck_after,
        startup_unknown: false,
    };

    let mut steps = Vec::new();
    // Tool writes fail on a missing tool table until the `rederive` step puts it back
    // (`amend_for_rederive`), whatever the steps before it do to the ledger.
    let table_ok = report.maka_gate.missing_table.is_none();
    let gate_mid = report
        .issues
        .iter()
        .any(|i| !excised.contains(&i.session_id.to_string()))
        || report.findings.iter().any(|f| {
            f.code == "event_undecodable"
                && f.session_id.as_deref().is_none_or(|s| !excised.contains(s))
        });
    if !excised.is_empty() {
        let mut fixes = Vec::new();
        if before.tool_writes_refused && !gate_mid && table_ok {
            fixes.push("Maka's gate accepts tool writes again".to_owned());
        }
        if before.startup_blocked && !blockers.iter().any(|(s, _, _)| !excised.contains(s)) {
            fixes.push("Maka's start-up no longer stops on a run it cannot read".to_owned());
        }
        if fixes.is_empty() {
            fixes.push("the damaged events leave the ledger".to_owned());
        }
        let costs: Vec<String> = damaged_sessions
            .iter()
            .filter(|d| d.remedy == "excise")
            .filter_map(|d| d.excise_cost.clone())
            .collect();
        steps.push(Step {
            action: "excise",
            command: format!("wsledger doctor excise --workspace {ws} --apply"),
            fixes: fixes.join("; "),
            costs: costs.join("; "),
            reversible: true,
            undo: "`wsledger doctor restore <bundle>... --apply`, with the excision bundles \
                   from wsledger-quarantine beside the database"
                .to_owned(),
        });
    }
    let quarantined: Vec<&DamagedSession> = damaged_sessions
        .iter()
        .filter(|d| d.remedy == "quarantine")
        .collect();
    if !quarantined.is_empty() {
        let n = quarantined.len();
        let total = quarantined.iter().fold((0, 0, 0), |a, d| {
            (
                a.0 + d.set_aside.messages,
                a.1 + d.set_aside.runs,
                a.2 + d.set_aside.tool_calls,
            )
        });
        let mut fixes = Vec::new();
        if before.tool_writes_refused && !after.tool_writes_refused && table_ok {
            fixes.push("Maka's gate accepts tool writes again".to_owned());
        }
        if before.startup_blocked && !after.startup_blocked {
            fixes.push("Maka's start-up no longer stops on a run it cannot read".to_owned());
        }
        let held = causes.iter().filter(|c| c.remedy == "quarantine").count();
        if held > 0 {
            fixes.push(format!(
                "{held} stuck or unreadable run(s) in those sessions go with them"
            ));
        }
        if fixes.is_empty() {
            fixes.push("the damaged sessions leave the live workspace".to_owned());
        }
        // After an excision step only the sessions it does not heal are left.
        let only: String = if excised.is_empty() {
            String::new()
        } else {
            quarantined
                .iter()
                .map(|d| format!(" --session {}", shell_quote(&d.session_id)))
                .collect()
        };
        let hides: Vec<String> = quarantined
            .iter()
            .map(|d| d.quarantine_cost.clone())
            .collect();
        steps.push(Step {
            action: "quarantine",
            command: format!("wsledger doctor quarantine --workspace {ws}{only} --apply"),
            fixes: fixes.join("; "),
            costs: format!(
                "sets aside {n} session(s) ({} message(s), {} run(s), {} tool call(s)); Maka no \
                 longer lists them until they are restored: {}",
                total.0,
                total.1,
                total.2,
                hides.join("; ")
            ),
            reversible: true,
            undo: "`wsledger doctor restore <bundle>... --apply`, with the bundles from \
                   wsledger-quarantine beside the database"
                .to_owned(),
        });
    }
    let to_finalize = planned.len() + unblocked.len();
    if to_finalize > 0 {
        steps.push(Step {
            action: "finalize_runs",
            command: format!("wsledger doctor finalize-runs --workspace {ws} --apply"),
            fixes: format!(
                "{to_finalize} run(s) get the terminal event Maka's own start-up recovery writes; \
                 they stop showing as running"
            ),
            costs: "each run ends `failed` (app_restarted): its unfinished step is not resumed; \
                    re-send the request if it still matters"
                .to_owned(),
            reversible: false,
            undo: "the backup taken first is the way back".to_owned(),
        });
    }
    let all_in_one =
        (!steps.is_empty()).then(|| format!("wsledger doctor repair --workspace {ws} --apply"));

    let sessions = report.summary.sessions;
    let blast_radius = before.tool_writes_refused.then(|| {
        let n = all_damaged
            .values()
            .filter(|r| {
                r.iter().any(|x| {
                    x.code == "event_undecodable" || crate::findings::is_scanner_code(&x.code)
                })
            })
            .count();
        match (n, &report.maka_gate.missing_table) {
            (0, Some(t)) => format!(
                "the missing table {t} makes every tool write fail in all {sessions} \
                 session(s) of this workspace"
            ),
            _ => format!(
                "damage in {} session(s) makes Maka refuse tool writes in all {sessions} \
                 session(s) of this workspace",
                n.max(1)
            ),
        }
    });

    Diagnosis {
        blast_radius,
        causes,
        damaged_sessions,
        plan: RemedyPlan {
            refused: input
                .apply_refusal
                .as_ref()
                .filter(|_| !steps.is_empty())
                .map(|why| format!("every step's --apply refuses this file: {why}")),
            steps,
            all_in_one,
            startup_refused: None,
        },
        before,
        after,
        session_names: input
            .labels
            .iter()
            .filter_map(|(s, l)| l.name.clone().map(|n| (s.clone(), n)))
            .collect(),
    }
}

fn damage_reason(input: &Input<'_>, r: &Reason) -> DamageReason {
    let producer = match (&r.id, r.code.as_str()) {
        (Some(id), "orphan_response") => input
            .events
            .get(id)
            .and_then(|row| producer_of(row, input.recorded_calls)),
        _ => None,
    };
    DamageReason {
        code: r.code.clone(),
        id: r.id.clone(),
        producer,
    }
}

fn cause_of(input: &Input<'_>, run: &crate::scan::runs::RunReport, remedy: &'static str) -> Cause {
    let (s, r) = (run.session_id.as_str(), run.run_id.as_str());
    let header = header_of(input.report, s, r);
    let mut ev = Map::new();
    let (code, summary): (&'static str, String) =
        match header.and_then(|h| h.trace_write_error.as_deref()) {
            Some(text) => {
                ev.insert("trace_write_error".into(), json!(text));
                latched(input, text, &mut ev)
            }
            None => crashed(input, run, &mut ev),
        };
    if run.invocation_ids.len() > 1 {
        ev.insert("invocation_ids".into(), json!(run.invocation_ids));
    }
    ev.insert("header_status".into(), json!(run.header_status));
    ev.insert("events".into(), json!(run.events));
    Cause {
        session_id: s.to_owned(),
        run_id: r.to_owned(),
        session_name: label(input, s),
        last_activity_ms: run.last_event_ts.map(|t| t as i64),
        code,
        evidence: Value::Object(ev),
        summary,
        remedy,
    }
}

fn latched(input: &Input<'_>, text: &str, ev: &mut Map<String, Value>) -> (&'static str, String) {
    match parse_trace_error(text) {
        Latch::Transient => (
            "latched_transient_write_failure",
            "a write failed with a transient storage error; Maka latched and never wrote the \
             run's end"
                .into(),
        ),
        Latch::Rejected { code, event_id } => {
            ev.insert("issue_code".into(), json!(code));
            ev.insert("event_id".into(), json!(event_id));
            match input.events.get(&event_id) {
                // The same words name damage elsewhere in v0.1.5 and older.
                Some(row) => {
                    ev.insert("damaged_session_id".into(), json!(row.session_id));
                    (
                        "latched_ledger_corruption",
                        format!(
                            "damage elsewhere ({code} at event {event_id}) made Maka refuse \
                             this run's tool write"
                        ),
                    )
                }
                None => (
                    "latched_ledger_rejection",
                    format!(
                        "Maka refused this run's own append ({code}); event {event_id} never \
                         landed"
                    ),
                ),
            }
        }
        Latch::Corrupt { code, event_id } => {
            ev.insert("issue_code".into(), json!(code));
            ev.insert("event_id".into(), json!(event_id));
            let session = input.events.get(&event_id).map(|r| r.session_id.clone());
            ev.insert("damaged_session_id".into(), json!(session));
            (
                "latched_ledger_corruption",
                format!(
                    "damage elsewhere ({code} at event {event_id}) made Maka refuse this run's \
                     tool write"
                ),
            )
        }
        Latch::RunIdentity { run_id } => {
            ev.insert("conflicting_run_id".into(), json!(run_id));
            (
                "latched_run_identity_conflict",
                "an append conflicted with the run's stored identity".into(),
            )
        }
        Latch::RowPayload { event_id } => {
            ev.insert("event_id".into(), json!(event_id));
            let session = input.events.get(&event_id).map(|r| r.session_id.clone());
            ev.insert("damaged_session_id".into(), json!(session));
            (
                "latched_row_payload_mismatch",
                format!(
                    "event {event_id} does not match its own row, so Maka cannot read the ledger"
                ),
            )
        }
        Latch::Other => (
            "latched_other",
            "an append failed (see the error text); Maka latched".into(),
        ),
    }
}

fn crashed(
    input: &Input<'_>,
    run: &crate::scan::runs::RunReport,
    ev: &mut Map<String, Value>,
) -> (&'static str, String) {
    let key = (run.session_id.clone(), run.run_id.clone());
    let rows = input.runs.get(&key).map(|i| &i.rows);
    if let Some(last) = rows.and_then(|r| r.run_events.iter().max_by_key(|e| e.sequence)) {
        ev.insert("last_run_event".into(), json!(last.event_type));
    }
    // T1 committed and no outcome: the tool may have run.
    let unsettled: Vec<_> = rows
        .map(|r| {
            r.operations
                .iter()
                .filter(|o| o.dispatch_event_id.is_some() && o.result_event_id.is_none())
                .collect()
        })
        .unwrap_or_default();
    if let Some(op) = unsettled.first() {
        let safe = op.recovery_mode == "replay_safe";
        ev.insert("operation_id".into(), json!(op.operation_id));
        ev.insert("tool_name".into(), json!(op.tool_name));
        ev.insert("recovery_mode".into(), json!(op.recovery_mode));
        ev.insert("rerun_safe".into(), json!(safe));
        ev.insert("unsettled_operations".into(), json!(unsettled.len()));
        return (
            "crashed_mid_tool",
            format!(
                "Maka stopped while `{}` was running (call committed, no outcome); {}",
                op.tool_name,
                if safe {
                    "it declares replay_safe: running it again is safe"
                } else {
                    "its side effects may have happened: check before running it again"
                }
            ),
        );
    }
    let partials = input.partials.get(&key).cloned().unwrap_or_default();
    if let Some(p) = partials.iter().max_by_key(|p| p.chars) {
        ev.insert("partial_text_chars".into(), json!(p.chars));
        ev.insert("stream_key".into(), json!(p.stream_key));
        ev.insert(
            "read_with".into(),
            json!(format!(
                "wsledger replay --workspace {} --session {}",
                shell_quote(input.workspace),
                shell_quote(&run.session_id)
            )),
        );
        return (
            "crashed_mid_stream",
            format!(
                "Maka stopped while the answer was streaming; {} character(s) of it survive only \
                 in a partial snapshot",
                p.chars
            ),
        );
    }
    let only_user = rows.is_some_and(|r| {
        r.events.iter().all(|e| {
            serde_json::from_str::<Value>(&e.payload_json)
                .ok()
                .and_then(|v| v.get("author").and_then(Value::as_str).map(|a| a == "user"))
                .unwrap_or(false)
        })
    });
    if rows.is_some() && only_user && run.state == RunState::Stuck {
        return (
            "crashed_before_first_step",
            "Maka stopped after the user message, before the model's first step".into(),
        );
    }
    (
        "unknown",
        "nothing in the file says why the run stopped".into(),
    )
}

/// Makes the per-finding hints follow the plan: a finding in a session the plan
/// quarantines points at that step, a stuck run the plan finalizes at that one, a
/// stuck run the plan leaves alone says why.
pub fn align_hints(findings: &mut [Finding], d: &Diagnosis, skipped: &Plan) {
    let step_no = |action: &str| {
        d.plan
            .steps
            .iter()
            .position(|s| s.action == action)
            .map(|i| (i + 1, d.plan.steps[i].command.clone()))
    };
    let damaged: HashMap<&str, &str> = d
        .damaged_sessions
        .iter()
        .map(|s| (s.session_id.as_str(), s.remedy))
        .collect();
    let remedy: HashMap<(&str, &str), &str> = d
        .causes
        .iter()
        .map(|c| ((c.session_id.as_str(), c.run_id.as_str()), c.remedy))
        .collect();
    for f in findings.iter_mut() {
        // What is missing from the schema: the rederive step, or why there is none.
        if matches!(
            f.code,
            "startup_refused" | "schema_object_missing" | "schema_registry_mismatch"
        ) {
            if let Some((n, cmd)) = step_no("rederive") {
                f.hint = format!(
                    "Step {n} of the plan puts back what is missing exactly as the release \
                     writes it, and nothing is lost: `{cmd}` (reversible with `wsledger \
                     doctor restore`)."
                );
            } else if let Some(w) = d
                .plan
                .startup_refused
                .as_ref()
                .filter(|w| f.code == "startup_refused" && w.contains("cannot put back"))
            {
                f.hint = w.clone();
            }
            continue;
        }
        let Some(s) = f.session_id.as_deref() else {
            continue;
        };
        match damaged.get(s) {
            Some(&"excise") if f.event_id.is_some() && f.code != "run_stuck_running" => {
                if let Some((n, cmd)) = step_no("excise") {
                    f.hint = format!(
                        "Step {n} of the plan removes the damaged events and keeps the \
                         conversation: `{cmd}` (reversible with `wsledger doctor restore`)."
                    );
                }
                continue;
            }
            Some(&"quarantine") => {
                if let Some((n, cmd)) = step_no("quarantine") {
                    f.hint = format!(
                        "Step {n} of the plan sets this session aside: `{cmd}` (reversible with \
                         `wsledger doctor restore`)."
                    );
                }
                continue;
            }
            _ => {}
        }
        if f.code != "run_stuck_running" {
            continue;
        }
        let r = f.run_id.as_deref().unwrap_or("");
        match remedy.get(&(s, r)) {
            Some(&"finalize_runs") => {
                if let Some((n, cmd)) = step_no("finalize_runs") {
                    f.hint = format!(
                        "Step {n} of the plan writes the terminal event Maka would write: `{cmd}`."
                    );
                }
            }
            Some(&"none") => {
                if let Some(k) = skipped
                    .skipped
                    .iter()
                    .find(|k| k.session_id == s && k.run_id == r)
                {
                    f.hint = format!(
                        "finalize-runs leaves this run ({}: {}); the plan does not change it.",
                        k.reason.as_str(),
                        k.detail
                    );
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_trace_error, shell_quote, Latch};

    #[test]
    fn trace_errors_are_read_by_their_words() {
        assert_eq!(
            parse_trace_error("append runtime event: disk I/O error"),
            Latch::Transient
        );
        assert_eq!(
            parse_trace_error(
                "append runtime event: Tool ledger transition rejected: orphan_response at e1"
            ),
            Latch::Rejected {
                code: "orphan_response".into(),
                event_id: "e1".into()
            }
        );
        assert_eq!(
            parse_trace_error("append runtime event: Tool ledger is corrupt: duplicate_call at e2"),
            Latch::Corrupt {
                code: "duplicate_call".into(),
                event_id: "e2".into()
            }
        );
        assert_eq!(
            parse_trace_error("Corrupt tool RuntimeEvent ledger: orphan_response at e3"),
            Latch::Corrupt {
                code: "orphan_response".into(),
                event_id: "e3".into()
            }
        );
        assert_eq!(
            parse_trace_error("RuntimeEvent run identity conflict for r1"),
            Latch::RunIdentity {
                run_id: "r1".into()
            }
        );
        assert_eq!(
            parse_trace_error(
                "append runtime event: RuntimeEvent row/payload identity mismatch for e4"
            ),
            Latch::RowPayload {
                event_id: "e4".into()
            }
        );
        assert_eq!(
            parse_trace_error("append runtime event: boom"),
            Latch::Other
        );
    }

    #[test]
    fn paths_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("fixtures/healthy"), "fixtures/healthy");
        assert_eq!(shell_quote("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
