//! Findings: what the doctor reports, with stable codes.
//!
//! Every code's explanation lives here, next to its definition, so `--help`, the man
//! pages, `wsledger explain` and `docs/finding-codes.md` all read one source. Scanner codes are
//! Maka's own strings, verbatim.

use serde::Serialize;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// The definition of one finding code.
#[derive(Debug)]
pub struct CodeInfo {
    pub code: &'static str,
    pub severity: Severity,
    /// One line: what the finding says.
    pub title: &'static str,
    /// Why it matters to Maka: what Maka refuses or does because of it.
    pub impact: &'static str,
    /// How it usually happens.
    pub cause: &'static str,
    /// What to do (also the default hint).
    pub action: &'static str,
}

macro_rules! codes {
    ($( $code:literal, $sev:ident, $title:literal, $impact:literal, $cause:literal, $action:literal; )*) => {
        /// Every code the tool can emit.
        pub const CODES: &[CodeInfo] = &[
            $( CodeInfo { code: $code, severity: Severity::$sev, title: $title, impact: $impact, cause: $cause, action: $action }, )*
        ];
    };
}

const GATE: &str = "Maka's workspace health gate reads every runtime event of the file: while \
any scanner issue exists, Maka refuses every tool-bearing write (tool calls, dispatches, tool \
results) in every session of this workspace, naming only the first issue.";

const QUARANTINE: &str = "Maka cannot repair this. Find the session with `wsledger doctor scan`, \
read it with `wsledger replay --session ID`, then set the session aside with \
`wsledger doctor quarantine --session ID --apply` (reversible with `wsledger doctor restore`).";

codes! {
    "duplicate_event_id", Error, "two scanned events share one event id",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace.",
    "Cannot persist in SQLite (event_id is the primary key); seen only in event lists.",
    "Remove one copy; see `wsledger doctor quarantine`.";
    "semantic_lane_conflict", Error, "a tool event does not fit its lane's envelope, or claims two lanes",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace; the rejected event never registers, so its partner may also be reported.",
    "A writer that bypassed Maka's tool boundary, e.g. a tool result whose stateDelta carries more than durationMs.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "duplicate_call", Error, "a second function_call for the same (invocation, tool call id)",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace.",
    "A provider that re-used a tool-call id inside one invocation, or a retried write with a fresh event id.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "duplicate_operation", Error, "a dispatch re-uses an operation id bound to another call",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace.",
    "Operation ids are derived from (invocation, tool call id); a copy of events between invocations or workspaces produces this.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "duplicate_dispatch", Error, "a second dispatch for the same (invocation, tool call id)",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace.",
    "A T1 dispatch written twice outside Maka's atomic tool boundary writer.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "duplicate_response", Error, "a second function_response for the same (invocation, tool call id)",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace.",
    "A tool result written twice, e.g. a synthetic refusal after the real outcome was committed.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "orphan_dispatch", Error, "a dispatch without a call (declared by Maka, never emitted)",
    "Tool-ledger corruption.",
    "Maka's scanner reports a dispatch without its call as event_order_conflict instead.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "orphan_response", Error, "a function_response with no earlier call, dispatch or response for its tool call id",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace (Maka bug #2234 shape).",
    "A refused tool call whose synthetic error result went to the generic lane while the call itself was never written (Maka <= v0.1.6), or a result copied into another invocation.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "canonical_args_hash_conflict", Error, "a dispatch's canonicalArgsHash differs from the hash of its call's arguments",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace.",
    "The call's arguments were edited after dispatch, or the dispatch was written by another hashing rule.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "invocation_identity_conflict", Error, "an event shares an invocation id with another (session, run, turn)",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write, and Maka's next append to that run throws an identity conflict.",
    "Rows written by hand or imported with re-used invocation ids.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "identity_conflict", Error, "a call, dispatch or response disagrees with its partner's identity",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace.",
    "A dispatch naming another tool, a response with wrong refs for a dispatched operation, or a generic-lane result for a T1 call (Maka bug #2253 shape).",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "event_order_conflict", Error, "a tool fact arrived before the fact it depends on",
    "Tool-ledger corruption: the health gate refuses every tool-bearing write in the workspace.",
    "A dispatch without its call, a dispatch after its response, or a recovery fact before any dispatch bound its operation.",
    "Quarantine the session that holds it (`wsledger doctor quarantine`).";
    "parent_operation_missing", Error, "a dispatch names a parent operation that no dispatch bound",
    "Tool-ledger corruption under the rules of a Maka newer than main (its scanner checks each dispatch's parent operation): the health gate refuses every tool-bearing write in the workspace.",
    "A code-mode child dispatch whose enclosing exec operation was never dispatched, or was removed.",
    "Quarantine the session that holds it with the Maka that wrote the file; wsledger does not write into a newer schema.";
    "parent_identity_conflict", Error, "a dispatch's parent operation belongs to another tool call than the one it names",
    "Tool-ledger corruption under the rules of a Maka newer than main: the health gate refuses every tool-bearing write in the workspace.",
    "A child dispatch whose parentToolCallId does not match the parent operation's tool call.",
    "Quarantine the session that holds it with the Maka that wrote the file; wsledger does not write into a newer schema.";
    "parent_dependency_cycle", Error, "dispatches whose parent operations form a cycle",
    "Tool-ledger corruption under the rules of a Maka newer than main: the health gate refuses every tool-bearing write in the workspace. One finding per operation on the cycle.",
    "Parent refs written outside Maka's tool boundary.",
    "Quarantine the session that holds it with the Maka that wrote the file; wsledger does not write into a newer schema.";
    "event_undecodable", Error, "a runtime_events row Maka cannot decode",
    "Maka's gate throws the decode error for every tool-bearing write in the workspace, the session view of that session fails, and the Runtime Host's strict start-up recovery throws on the run, so Maka does not start.",
    "A payload with an unknown key, a null optional field, a bad enum value, invalid JSON, or a payload whose ids differ from the row's columns (written outside Maka).",
    "Quarantine the session that holds it (`wsledger doctor quarantine`); Maka cannot read or repair it.";
    "run_stuck_running", Error, "a run header is open (created, running, waiting_for_user) and its log has no terminal event",
    "The run shows as running forever; Maka's next start recovers it unless it is excluded (archived session, continuation target, corrupt ledger).",
    "A crash, or a latched store that skipped the terminal write (`traceWriteError` on the header).",
    "Run `wsledger doctor finalize-runs` to see the plan, then `--apply` to write the terminal event Maka would write.";
    "run_unreadable", Error, "a run has a row Maka cannot decode",
    "Maka cannot read the run's events; its Runtime Host start-up recovery stops on it, so Maka does not start.",
    "A damaged or hand-written runtime_events row in the run.",
    "Quarantine the session (`wsledger doctor quarantine`); finalize-runs skips such runs.";
    "run_header_undecodable", Error, "a core_agent_runs record Maka cannot decode",
    "Maka's strict start-up recovery reads every header and throws on this one, so Maka does not start.",
    "A header written by another tool, with an unknown key, a bad enum or an unsafe id.",
    "Quarantine the session (`wsledger doctor quarantine`).";
    "run_event_undecodable", Error, "a core_agent_run_events record Maka cannot decode",
    "Maka's strict start-up recovery reads every run's operational events and throws on this one, so Maka does not start.",
    "A run event written by another tool: an unknown key, a blank type, non-object data, or ids that differ from its run.",
    "Quarantine the session (`wsledger doctor quarantine`).";
    "run_outside_sessions", Warning, "a run header whose session Maka does not list (no session_metadata row)",
    "Maka lists runs session by session, from the session store: it never shows, recovers or stops its start-up on this run, and finalize-runs and quarantine leave it alone. Its events still count for the tool-ledger gate.",
    "A test or tool that wrote the run without its session, or a session row deleted without its runs.",
    "Nothing is required for Maka to start. Keep the file as it is; the run is reported once so that it is not mistaken for a stuck or unreadable run.";
    "continuation_claim_unreadable", Error, "a continuation-claim row whose columns disagree with its own payload",
    "Maka's store reads every continuation-claim row before any append (v0.1.3 and later): while this row does not read, it refuses every append in every session, plain ones included (\"Continuation claim row/payload identity mismatch\"), and strict start-up throws when it recovers the claim's target session.",
    "A claim row edited or written by another tool, or a damaged file.",
    "Keep the file as it is and take a copy; restore a backup from before the change if there is one, or report the file with `wsledger info` output. wsledger does not rewrite claim rows.";
    "session_message_unreadable", Error, "a stored session message Maka's strict start-up cannot read",
    "Maka's strict start-up recovery reads every stored message of every listed session (archived ones too) and throws on one it cannot read (\"Stored Session message N for ... is incompatible\"), so Maka does not start.",
    "A transcript record whose chunks or payload row are missing or do not match, or whose record is not a message Maka knows.",
    "Quarantine the session (`wsledger doctor quarantine --session ID --apply`); read it first with `wsledger replay --session ID`.";
    "run_terminal_ambiguous", Error, "a run has two or more terminal events",
    "Maka refuses the session view and its strict start-up recovery throws (\"ambiguous terminal facts\"), so Maka does not start.",
    "A second terminal appended outside Maka (Maka refuses any append after a terminal).",
    "Quarantine the session (`wsledger doctor quarantine`); finalize-runs never touches it.";
    "run_terminal_without_status", Error, "a run's only terminal event has endInvocation but no terminal status",
    "Maka's start-up recovery throws (\"terminal RuntimeEvent must carry a terminal status\"), so Maka does not start.",
    "A terminal written by a tool that set only actions.endInvocation.",
    "Quarantine the session (`wsledger doctor quarantine`).";
    "run_terminal_not_tail", Error, "a run's terminal event is not its last immutable event",
    "Maka's start-up recovery throws (\"Terminal RuntimeEvent must be the immutable ledger tail\") when it tries to adopt it.",
    "An event appended after the terminal, bypassing Maka's seal check.",
    "Quarantine the session (`wsledger doctor quarantine`).";
    "run_terminal_unusable", Error, "a run's only terminal-looking event is partial or names another turn",
    "The run is sealed (no more appends) yet has no usable terminal fact: Maka can neither close nor continue it, and strict recovery throws.",
    "A partial event carrying a terminal status, or a terminal written with a wrong turn id.",
    "Quarantine the session (`wsledger doctor quarantine`).";
    "run_header_terminal_without_event", Error, "a run header is terminal but its log has no valid terminal event",
    "Maka's session view throws until its repair writes a failed/missing_terminal_event terminal, rewriting the header to failed.",
    "A header updated outside Maka, or a terminal event lost.",
    "Run `wsledger doctor finalize-runs --apply`: it writes what Maka's ledger repair writes.";
    "run_header_contradicts_terminal", Error, "a terminal run header disagrees with its terminal event",
    "The terminal event is the authority; Maka's read path rewrites the header from it.",
    "The header was patched after the terminal event was written.",
    "Open the session in Maka (its read path rewrites the header), or leave it: the event decides.";
    "run_header_missing", Warning, "runtime events belong to a run that has no header",
    "Maka's run views and recovery do not see the run; its events still count for the tool-ledger gate.",
    "A header deleted or never written (imports, crashes before the header).",
    "Read the session with `wsledger replay --session ID`; quarantine it if it is not needed.";
    "newer_event_kinds", Info, "runtime events of kinds, or with facts, that only a Maka newer than main writes",
    "None: the Maka that wrote the file reads them. wsledger reads each with the newer rules Maka's published sources state (`invocation_opened`, the run's opening fact, and the newer action facts), so they are not damage: they never count as `event_undecodable`, never close the tool-ledger gate, and no plan offers to remove them. `detail.kinds` counts each kind.",
    "A Maka newer than this wsledger wrote the file (after main f19eede03: runs opened on the runtime event spine, managed workspace mutations, structured forms).",
    "Nothing is required. Update wsledger to judge the file with that Maka's own rules; damage that no newer generation explains is still reported as `event_undecodable`.";
    "runs_not_judged", Info, "runs that neither a header nor an invocation-opening fact describes, in a file whose headers cannot be read",
    "wsledger does not judge these runs (stuck or not): the file's `core_agent_runs` has no `record_json` (a Maka newer than main moved run metadata onto the runtime event spine) and no opening fact names them. Newer Maka treats events whose invocation never opened as control-plane streams, not runs.",
    "Events written without an opening fact (imports, or runs a migration could not project), in a file written by a Maka newer than this wsledger.",
    "Nothing is required. Read the session with `wsledger replay --session ID`; update wsledger to judge the file with its Maka's own rules.";
    "operation_unsettled", Warning, "a dispatched tool operation has no outcome",
    "Maka never retries it. outcome_unknown operations get a synthetic outcome at Maka's next start, which fails if the run was sealed first.",
    "The process died while the tool ran (crash mid-tool).",
    "Nothing is required; finalize-runs settles what Maka settles before sealing the run.";
    "event_seq_gap", Warning, "an invocation's event_seq values are not 1..n",
    "Continuation-prefix reads fail on a gap (\"event_seq gap\").",
    "Rows deleted by hand.",
    "Replay the session; quarantine it if a continuation depends on it.";
    "ordinal_missing", Warning, "a runtime event has no session ordinal row",
    "The event is invisible to ordinal readers (memory extraction cursors).",
    "A row inserted outside Maka's writer.",
    "Nothing urgent; quarantine and restore do not change ordinals.";
    "ordinal_gap", Warning, "a session's ordinals are not 1..n",
    "Memory-extraction cursors may skip or repeat events.",
    "Rows deleted by hand.",
    "Nothing urgent.";
    "event_seq_gap_excised", Info, "an invocation's event_seq gap is the events `doctor excise` removed",
    "None for the gate: the excised events were damaged facts Maka refused to build on. A continuation-prefix read of that invocation still sees the gap.",
    "`wsledger doctor excise --apply` removed the events; the excision bundle named in the message holds them.",
    "Nothing is required. `wsledger doctor restore BUNDLE --apply` puts the events back (and the damage with them).";
    "ordinal_gap_excised", Info, "a session's ordinal gap is the ordinal rows `doctor excise` removed",
    "Memory-extraction cursors pass over the missing ordinals; nothing else reads them.",
    "`wsledger doctor excise --apply` removed the events, and their ordinal rows cascaded; the excision bundle named in the message holds them.",
    "Nothing is required. `wsledger doctor restore BUNDLE --apply` puts them back.";
    "projection_operation_missing", Warning, "a dispatched operation in the log has no tool_operations row",
    "Maka's recovery lists unsettled operations from the projection and would miss this one.",
    "A projection write lost, or rows deleted by hand.",
    "The log is the authority; replay the session to see the operation.";
    "projection_operation_extra", Warning, "a tool_operations row has no dispatched operation in the log",
    "The projection claims an operation the log never dispatched.",
    "Rows written or left behind outside Maka.",
    "The log is the authority; replay the session to compare.";
    "projection_operation_mismatch", Warning, "a tool_operations row differs from the rebuild from the log",
    "Maka's recovery reads the projection; it would act on the stored value.",
    "A projection edited by hand or a partial write.",
    "The log is the authority; replay the session to see the field.";
    "projection_journal_missing", Warning, "a journal row the log implies is missing from tool_journal_events",
    "The per-operation transition history is incomplete.",
    "A projection write lost, or rows deleted by hand.",
    "The log is the authority.";
    "projection_journal_extra", Warning, "a tool_journal_events row the log does not imply",
    "The journal claims a transition the log does not hold.",
    "Rows written outside Maka.",
    "The log is the authority.";
    "projection_journal_mismatch", Warning, "a tool_journal_events row differs from the rebuild from the log",
    "The journal disagrees with the log.",
    "A projection edited by hand.",
    "The log is the authority.";
    "schema_older_release", Info, "the workspace was written by a Maka release older than the newest",
    "None for the release that wrote it: wsledger judges the file with that release's own rules. A newer Maka migrates it in place when it opens it, one way.",
    "The workspace was last opened by an older Maka release.",
    "Nothing is required. Before upgrading Maka, take a copy of the workspace folder: the migration is one way, and the Maka 0.1.5 and 0.1.6 desktop apps delete at start any workspace database whose schema is not exactly their own.";
    "schema_newer_than_known", Warning, "the workspace was written by a Maka newer than every build this wsledger was verified against",
    "wsledger judges only what it can read: the ledger (runtime_events and the two tool projections) and every table whose shape a generation it knows defines, with the rules of the newest verified build. Whether that Maka starts on the file is not known (`startup.opens` is null), so nothing says it refuses it; the exit status comes from the ledger findings alone. Every `--apply` refuses the file and changes nothing. `detail.scopes` lists each scope ahead (its version, the newest verified, the newest Maka's published sources state); `detail.known_from` is `source` when each is at a version those sources describe, else `none`.",
    "The workspace was opened by a Maka build released (or built from main) after this wsledger; Maka migrates a workspace forward, one way, when it opens it.",
    "Update wsledger to a version that knows this Maka. Until then let that Maka's own start-up recovery repair the file; `wsledger replay` still reads it. Never edit the schema to make an older tool accept it.";
    "ledger_not_read", Error, "runtime_events has a shape no Maka generation wsledger knows defines: the ledger was not checked",
    "wsledger reads a table only where its definition is one a known generation defines; without runtime_events it makes no ledger check at all, so nothing in the report speaks for the ledger.",
    "A Maka newer than this wsledger changed the table, or a tool altered it.",
    "Update wsledger to a version that knows this Maka; keep the file as it is (take a copy). Do not edit the schema by hand.";
    "table_not_read", Warning, "a table wsledger reads has a shape it does not read, and was left out",
    "wsledger reads a table only where its definition is one a known generation defines (verified against a build, or described by Maka's published sources with every column wsledger reads); any other is treated as absent and named once here. A tool projection left out is not compared with the log; run headers left out are not judged.",
    "A Maka newer than this wsledger changed or replaced the table (e.g. run headers without `record_json`), or a tool altered it.",
    "Update wsledger to a version that knows this table's shape; keep the file as it is. Reading around the table changes nothing in the file.";
    "startup_refused", Error, "Maka refuses to open this workspace: its workspace composition stops at a check",
    "Maka does not start on this file: the runtime host (and the desktop, which boots through it) throws while composing the session, agent-run and runtime stores, before any session is listed. `detail.reason` names the check, `detail.store` the store, `detail.maka_message` quotes Maka's error; `wsledger explain startup_refused` lists every reason.",
    "A file written by a newer Maka, a schema changed by hand or by another tool (a dropped table or index), legacy migration state a release left incomplete, or released data an upgrade cannot carry over.",
    "Follow the hint for the reason: a newer schema needs the Maka that wrote it or a newer one (never an older one); a missing index, trigger, tool projection table or registry row is put back exactly as the release writes it by `wsledger doctor rederive` (the plan's first step, or its step after excision when the projections must be rebuilt from a ledger that holds damage); a missing table of primary data, or an object that differs or is extra, needs the file kept as it is and a backup restored, reported with `wsledger info`. Finalize, quarantine and excise leave start-up refused.";
    "schema_object_missing", Warning, "a table, index or trigger of the closest known Maka schema is missing",
    "The file matches no known Maka release. v0.1.11 and later compare every object with their target and refuse to open or migrate a file with one missing; older releases check only the versions and fail when they reach the missing object (the 0.1.5 and 0.1.6 desktop apps delete a file that is not exactly theirs).",
    "A damaged file, a tool that removed an object, or a Maka build wsledger does not know.",
    "If the missing object is one Maka derives (an index, a trigger, `tool_operations`, `tool_journal_events`, the registry), `wsledger doctor rederive --apply` puts it back exactly as the release writes it. Otherwise keep the file as it is and take a copy; if a backup from before the change exists, restore it, else report the file with `wsledger info` output to the Maka project. wsledger still scans what it can read.";
    "schema_object_changed", Warning, "a schema object's definition differs from the closest known Maka schema",
    "The file matches no known Maka release. v0.1.11 and later refuse to open or migrate a file whose objects differ from their target; older releases check only the versions.",
    "A tool that altered a table, or a Maka build wsledger does not know.",
    "Keep the file as it is and take a copy; restore a backup from before the change if there is one. wsledger still scans what it can read.";
    "schema_object_unexpected", Warning, "a schema object the closest known Maka schema does not have (e.g. an extra index)",
    "The file matches no known Maka release. v0.1.11 and later refuse to open or migrate a file with an object they do not know (\"unexpected schema object\"); older releases ignore extra objects.",
    "A tool (or person) added an index, table, trigger or view, or a Maka build wsledger does not know.",
    "Keep the file as it is and take a copy. Do not edit the schema by hand: Maka's migrations check the objects they expect, and a file changed by hand may no longer migrate. Restore a backup from before the change if there is one.";
    "schema_version_mismatch", Warning, "PRAGMA user_version is not that of the closest known Maka release",
    "Each release migrates an older runtime schema in place, one way, and refuses a newer one (the 0.1.5 and 0.1.6 desktop apps delete a file that is not exactly theirs).",
    "A workspace written by a Maka build wsledger does not know, or a damaged header.",
    "Keep the file as it is and take a copy; wsledger scans what it can read.";
    "schema_registry_mismatch", Warning, "operational_schema_migrations differs from the closest known Maka release",
    "Each release migrates older scopes and refuses newer or unknown ones.",
    "A workspace written by a Maka build wsledger does not know, or a damaged registry.",
    "Keep the file as it is and take a copy; wsledger scans what it can read.";
    "schema_capability_mismatch", Warning, "runtime_capabilities rows are missing or have another version",
    "Maka's runtime store refuses to open without the capability rows its release writes.",
    "A damaged file, or rows removed by hand.",
    "Restore from a backup taken before the change.";
    "upgrade_migration_refused", Warning, "a newer Maka release will refuse to migrate this file",
    "Does not affect the release that wrote the file. The newer release leaves the file untouched and does not start on it.",
    "v0.1.2 and v0.1.3 leave legacy objects that v0.1.11 (and, for v0.1.2, main) refuse to migrate.",
    "Keep using the Maka release that wrote the file; do not edit the schema to make the migration pass.";
    "upgrade_blocks_startup", Warning, "a newer Maka release will not start on this file once it has migrated it",
    "Does not affect the release that wrote the file. After the one-way migration, the newer release's start-up reads every session and run header and stops on one it cannot decode.",
    "A header written with a value the newer release no longer accepts (e.g. the `pi-agent` backend kind, dropped in v0.1.11).",
    "Do not upgrade yet (the migration is one way): quarantine the named session first, with the release that wrote the file still installed (`wsledger doctor quarantine --session ID --apply`), or keep using that release.";
    "upgrade_deletes_tasks", Warning, "Maka 0.2 deletes this file's unfinished tasks when it first opens it",
    "Does not affect the Maka you use now. Maka 0.2's release notes say its first open drops the Task Ledger and does not migrate the tasks that are not finished; `detail.unfinished_tasks` counts them per conversation. Its start-up verdict is not known (not verified against its code).",
    "Tasks still pending, in progress or blocked in the Task Ledger (`workflow_task_ledger_events`).",
    "Before opening the workspace with Maka 0.2, finish or export the tasks you need, or copy the workspace folder aside: 0.2 migrates the file one way, and the sessions it writes no longer open in 0.1.x.";
    "upgrade_refuses_tool_writes", Warning, "a newer Maka release's tool-ledger gate will refuse tool writes in this file",
    "Does not affect the release that wrote the file. After the one-way migration, the newer release's gate refuses every tool-bearing write in every session.",
    "An event the newer release's rules reject, or damage the writer's rules also reject.",
    "Quarantine the named session before upgrading, which migrates the file one way (`wsledger doctor quarantine --session ID --apply`).";
    "session_header_undecodable", Error, "a session_metadata row Maka cannot decode",
    "Maka's start-up reads every session header and refuses to start on one it cannot read (\"Invalid session header ... malformed fields\").",
    "A header written by another tool or another Maka release, with a value this release does not accept.",
    "Quarantine the session (`wsledger doctor quarantine --session ID --apply`).";
    "sqlite_corrupt", Error, "SQLite's quick_check reports damage",
    "Maka may fail on any read of the damaged pages.",
    "Disk or file-system damage, or a copy taken without its -wal.",
    "Keep a copy, restore from a backup, or recover with the sqlite3 `.recover` command.";
}

/// The definition of `code`, if the tool can emit it.
pub fn code_info(code: &str) -> Option<&'static CodeInfo> {
    CODES.iter().find(|c| c.code == code)
}

/// One thing the doctor found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub severity: Severity,
    pub session_id: Option<String>,
    pub run_id: Option<String>,
    pub event_id: Option<String>,
    pub operation_id: Option<String>,
    pub tool_call_id: Option<String>,
    pub message: String,
    pub hint: String,
    /// Structured facts of the finding, where its code defines them (e.g.
    /// `startup_refused`'s `reason`); absent from the JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
}

impl Finding {
    /// A finding of `code` with its registered severity and default hint.
    ///
    /// Panics only on a code missing from `CODES`, which a test rules out.
    pub fn new(code: &'static str, message: impl Into<String>) -> Finding {
        let info = code_info(code).unwrap_or_else(|| panic!("unregistered finding code {code}"));
        Finding {
            code: info.code,
            severity: info.severity,
            session_id: None,
            run_id: None,
            event_id: None,
            operation_id: None,
            tool_call_id: None,
            message: message.into(),
            hint: info.action.to_owned(),
            detail: None,
        }
    }

    pub fn session(mut self, s: impl Into<String>) -> Self {
        self.session_id = Some(s.into());
        self
    }
    pub fn run(mut self, r: impl Into<String>) -> Self {
        self.run_id = Some(r.into());
        self
    }
    pub fn event(mut self, e: impl Into<String>) -> Self {
        self.event_id = Some(e.into());
        self
    }
    pub fn operation(mut self, o: impl Into<String>) -> Self {
        self.operation_id = Some(o.into());
        self
    }
    pub fn tool_call(mut self, t: impl Into<String>) -> Self {
        self.tool_call_id = Some(t.into());
        self
    }
    pub fn hint(mut self, h: impl Into<String>) -> Self {
        self.hint = h.into();
        self
    }
    pub fn with_detail(mut self, d: serde_json::Value) -> Self {
        self.detail = Some(d);
        self
    }
}

/// Extra text shared by explanations.
pub fn explain_text(info: &CodeInfo) -> String {
    let mut out = format!(
        "{code} ({sev})\n  {title}\n\nWhy it matters\n  {impact}\n\nHow it happens\n  {cause}\n\nWhat to do\n  {action}\n",
        code = info.code,
        sev = info.severity.as_str(),
        title = info.title,
        impact = info.impact,
        cause = info.cause,
        action = info.action,
    );
    if SCANNER_CODES.contains(&info.code) {
        out.push_str(&format!(
            "\nMaka's tool-ledger scanner code.\n  {GATE}\n  {QUARANTINE}\n"
        ));
    }
    out
}

/// The twelve codes of Maka's tool-ledger scanner.
pub const SCANNER_CODES: &[&str] = &[
    "duplicate_event_id",
    "semantic_lane_conflict",
    "duplicate_call",
    "duplicate_operation",
    "duplicate_dispatch",
    "duplicate_response",
    "orphan_dispatch",
    "orphan_response",
    "canonical_args_hash_conflict",
    "invocation_identity_conflict",
    "identity_conflict",
    "event_order_conflict",
];

/// The codes the scanner of a Maka newer than main adds (its tool-dependency rules;
/// reported only for files newer than wsledger).
pub const NEWER_SCANNER_CODES: &[&str] = &[
    "parent_operation_missing",
    "parent_identity_conflict",
    "parent_dependency_cycle",
];

/// Whether `code` is a tool-ledger scanner issue (main's, or a newer scanner's).
pub fn is_scanner_code(code: &str) -> bool {
    SCANNER_CODES.contains(&code) || NEWER_SCANNER_CODES.contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_complete() {
        let mut seen = std::collections::HashSet::new();
        for c in CODES {
            assert!(seen.insert(c.code), "duplicate {}", c.code);
            assert!(!c.title.is_empty() && !c.impact.is_empty() && !c.action.is_empty());
        }
        for s in SCANNER_CODES {
            assert_eq!(code_info(s).unwrap().severity, Severity::Error);
        }
    }
}
