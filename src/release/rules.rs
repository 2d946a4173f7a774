//! The ledger rules that differ between Maka releases, as named switches.
//!
//! The scanner, decoder and header checks are one implementation (main's). The strict
//! RuntimeEvent decoder only grew across releases, so an older release's decoder is
//! main's plus a check that the payload uses nothing that release did not know yet
//! (`compat`). Each switch names the release that introduced the rule; the facts are
//! from the upstream source at each tag (see `../shared/spec/releases/README.md`).

use super::{release_rank, RELEASES};

/// The rule switches of one release. `true` means "as main".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The release these rules are those of (`main` for the main branch).
    pub release: &'static str,
    /// The file has Maka's tool-ledger tables and gate (v0.1.2 and later; v0.1.0 and
    /// v0.1.1 keep runtime events in an opt-in file with no gate).
    pub ledger_gate: bool,
    /// A dispatch's `refs` may carry `parentToolCallId` and `parentOperationId`
    /// (scanner lane envelope, v0.1.6).
    pub dispatch_parent_refs: bool,
    /// The scanner's tool-dependency rules, newer than main: a dispatch naming a parent
    /// operation that no dispatch bound, or whose tool call is another, and a cycle of
    /// parents, are issues (`parent_operation_missing`, `parent_identity_conflict`,
    /// `parent_dependency_cycle`); a call whose refs disagree with its dispatch is an
    /// `identity_conflict`; a tool result may carry `actions.managedMutationTerminal`.
    pub scanner_tool_dependencies: bool,
    /// A run exists by its invocation-opening fact and its state is read off the event
    /// spine alone, with no header status (Maka after main, PR #4631): a run whose
    /// first event is an opening fact needs no `core_agent_runs` header.
    pub runs_on_spine: bool,
    pub decoder: DecoderRules,
    pub header: HeaderRules,
}

/// What the strict RuntimeEvent decoder accepts beyond v0.1.2's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderRules {
    /// `actions.continuationStart` and `actions.workspaceFact`; turn origin `goal` (v0.1.3).
    pub v013_actions_and_goal_origin: bool,
    /// Text content `inlineReferences` (v0.1.4).
    pub text_inline_references: bool,
    /// Text `providerOptions`, call `providerExecuted`, response `providerExecuted` and
    /// `providerOutput` (v0.1.5).
    pub provider_content_keys: bool,
    /// Envelope `origin`, `modelVisibility`; refs `parentToolCallId`,
    /// `parentOperationId` (v0.1.6).
    pub v016_envelope_and_parent_refs: bool,
    /// Refs `sourceMessageDigest`; `tokenUsage.providerRequestTraceId` (v0.1.7).
    pub v017_digest_and_trace_id: bool,
    /// Turn origins `scheduled_task` and `legacy_automation` (`automation` read as the
    /// latter); `contextBudget.activeSupersededToolResults` and
    /// `activeDuplicateToolResults`; Windows drive paths in additional permissions
    /// (v0.1.11).
    pub v0111_origins_budget_and_paths: bool,
    /// Content kind `invocation_opened`, the run's opening fact (newer than main, PR
    /// #4631).
    pub invocation_opening: bool,
    /// `actions.managedMutationTerminal`, `actions.formAnswerAccepted`,
    /// `toolDispatch.managedMutation` and `resultProjectionVersion`, and
    /// `continuationStart.providerProjectionVersion` 2 (newer than main).
    pub managed_mutation_facts: bool,
}

/// What the run-header decoder accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderRules {
    /// Backend kinds a run or session header may name (`pi-agent` until v0.1.10).
    pub backend_kinds: &'static [&'static str],
    /// `goalId` (v0.1.3).
    pub goal_id: bool,
    /// `rootExecutionKind` (v0.1.4).
    pub root_execution_kind: bool,
    /// `toolMode` (v0.1.6).
    pub tool_mode: bool,
    /// `runComposition` (v0.1.10).
    pub run_composition: bool,
    /// `scheduledTaskId` and `legacyAutomationId`, `automationId` read as the latter,
    /// and at most one trigger id (v0.1.11). Before: `automationId` is a plain field and
    /// only `automationId` with `goalId` conflict.
    pub v0111_trigger_ids: bool,
    /// Session headers: statuses `review`, `done` and `archived`, and `archivedAt`, are
    /// still accepted (until v0.1.10).
    pub legacy_session_statuses: bool,
    /// Session headers: `transcriptLedgerVersion` is 0 or 1 when present (v0.1.9).
    pub session_transcript_ledger_version: bool,
    /// Session headers: `toolProfile` is `headless-coding-v1` when present (v0.1.11).
    pub session_tool_profile: bool,
    /// Session headers: `externalOrigin` is checked (main, after v0.1.11).
    pub session_external_origin: bool,
    /// Session headers: `conversationCopy` is checked, with its lineage (v0.1.3).
    pub session_conversation_copy: bool,
    /// Session headers: a `subagentWorkspace` needs a `subagentParent` (v0.1.2).
    pub session_subagent_workspace: bool,
    /// Run events: a closed list of types (v0.1.2 and v0.1.3); `None`: any type that is
    /// not blank (v0.1.4 and later).
    pub run_event_types: Option<&'static [&'static str]>,
}

impl DecoderRules {
    /// Main's decoder (and v0.1.11's: rule for rule the same).
    pub const MAIN: DecoderRules = DecoderRules {
        v013_actions_and_goal_origin: true,
        text_inline_references: true,
        provider_content_keys: true,
        v016_envelope_and_parent_refs: true,
        v017_digest_and_trace_id: true,
        v0111_origins_budget_and_paths: true,
        invocation_opening: false,
        managed_mutation_facts: false,
    };

    /// What Maka's published sources after main accept: main's, and what newer
    /// generations add.
    pub const NEWER_THAN_MAIN: DecoderRules = DecoderRules {
        invocation_opening: true,
        managed_mutation_facts: true,
        ..DecoderRules::MAIN
    };

    /// Whether these rules accept everything main's decoder accepts (main's, or newer):
    /// no older release's restriction applies.
    #[inline]
    pub fn is_main(&self) -> bool {
        // Asked of every row of the walk: the switches themselves, not a copy compared.
        self.v013_actions_and_goal_origin
            && self.text_inline_references
            && self.provider_content_keys
            && self.v016_envelope_and_parent_refs
            && self.v017_digest_and_trace_id
            && self.v0111_origins_budget_and_paths
    }

    /// Whether these rules accept something main's decoder rejects.
    pub fn is_newer_than_main(&self) -> bool {
        self.invocation_opening || self.managed_mutation_facts
    }
}

impl Default for DecoderRules {
    fn default() -> Self {
        DecoderRules::MAIN
    }
}

/// The run-event types v0.1.2 accepts (`AGENT_RUN_EVENT_TYPES` at that tag).
const RUN_EVENT_TYPES_V012: &[&str] = &[
    "run_created",
    "run_started",
    "turn_started",
    "sandbox_context_resolved",
    "plan_context_resolved",
    "plan_submitted",
    "plan_execution_started",
    "plan_progress_updated",
    "plan_execution_completed",
    "plan_execution_cancelled",
    "plan_execution_interrupted",
    "plan_execution_resumed",
    "plan_transition_failed",
    "run_status_changed",
    "model_resolved",
    "model_resolve_failed",
    "model_stream_started",
    "model_stream_completed",
    "model_stream_failed",
    "tool_started",
    "tool_completed",
    "tool_failed",
    "skill_catalog_built",
    "skill_searched",
    "skill_loaded",
    "skill_load_failed",
    "permission_requested",
    "permission_decided",
    "permission_failed",
    "approval_routed",
    "auto_review_started",
    "auto_review_decided",
    "auto_review_failed",
    "sandbox_escalation_requested",
    "sandbox_escalation_granted",
    "sandbox_escalation_denied",
    "sandbox_escalation_applied",
    "sandbox_escalation_failed",
    "sandbox_denial_detected",
    "usage_recorded",
    "provider_request_captured",
    "provider_request_attempt_recorded",
    "model_call_attempt_recorded",
    "history_compact_checkpoint_recorded",
    "active_full_compact_block_recorded",
    "semantic_compact_block_recorded",
    "task_gate_decided",
    "abort_requested",
    "run_completed",
    "run_failed",
    "run_cancelled",
    "trace_write_failed",
    "event_corrupt",
];

/// v0.1.3's list: v0.1.2's with `graph_supervisor_yielded` and
/// `send_diagnostics_recorded`, without `usage_recorded`.
const RUN_EVENT_TYPES_V013: &[&str] = &[
    "run_created",
    "run_started",
    "turn_started",
    "sandbox_context_resolved",
    "plan_context_resolved",
    "plan_submitted",
    "plan_execution_started",
    "plan_progress_updated",
    "plan_execution_completed",
    "plan_execution_cancelled",
    "plan_execution_interrupted",
    "plan_execution_resumed",
    "plan_transition_failed",
    "graph_supervisor_yielded",
    "run_status_changed",
    "model_resolved",
    "model_resolve_failed",
    "model_stream_started",
    "model_stream_completed",
    "model_stream_failed",
    "send_diagnostics_recorded",
    "tool_started",
    "tool_completed",
    "tool_failed",
    "skill_catalog_built",
    "skill_searched",
    "skill_loaded",
    "skill_load_failed",
    "permission_requested",
    "permission_decided",
    "permission_failed",
    "approval_routed",
    "auto_review_started",
    "auto_review_decided",
    "auto_review_failed",
    "sandbox_escalation_requested",
    "sandbox_escalation_granted",
    "sandbox_escalation_denied",
    "sandbox_escalation_applied",
    "sandbox_escalation_failed",
    "sandbox_denial_detected",
    "provider_request_captured",
    "provider_request_attempt_recorded",
    "model_call_attempt_recorded",
    "history_compact_checkpoint_recorded",
    "active_full_compact_block_recorded",
    "semantic_compact_block_recorded",
    "task_gate_decided",
    "abort_requested",
    "run_completed",
    "run_failed",
    "run_cancelled",
    "trace_write_failed",
    "event_corrupt",
];

const BACKENDS_WITH_PI_AGENT: &[&str] = &["ai-sdk", "fake", "pi-agent"];
const BACKENDS: &[&str] = &["ai-sdk", "fake"];

impl HeaderRules {
    pub const MAIN: HeaderRules = HeaderRules {
        backend_kinds: BACKENDS,
        goal_id: true,
        root_execution_kind: true,
        tool_mode: true,
        run_composition: true,
        v0111_trigger_ids: true,
        legacy_session_statuses: false,
        session_transcript_ledger_version: true,
        session_tool_profile: true,
        session_external_origin: true,
        session_conversation_copy: true,
        session_subagent_workspace: true,
        run_event_types: None,
    };
}

impl Default for HeaderRules {
    fn default() -> Self {
        HeaderRules::MAIN
    }
}

impl Rules {
    /// Main's rules (what `../shared/maka-real/` was written and judged by).
    pub const MAIN: Rules = Rules {
        release: "main",
        ledger_gate: true,
        dispatch_parent_refs: true,
        scanner_tool_dependencies: false,
        runs_on_spine: false,
        decoder: DecoderRules::MAIN,
        header: HeaderRules::MAIN,
    };

    /// The rules for a file newer than every generation wsledger knows: main's, and
    /// every change Maka's published sources after main confirm (the event decoder,
    /// the scanner's tool dependencies, runs read off the event spine; see
    /// docs/scan.md, "Files newer than wsledger"). Run headers are still read where
    /// their columns are there, with main's header rules.
    pub const fn newer_than_known() -> Rules {
        Rules {
            release: super::NEWER,
            scanner_tool_dependencies: true,
            runs_on_spine: true,
            decoder: DecoderRules::NEWER_THAN_MAIN,
            ..Rules::MAIN
        }
    }

    /// The rules of a release tag; unknown tags get main's. v0.1.0 and v0.1.1 have no
    /// ledger of their own: their events are checked with v0.1.2's rules.
    pub fn for_release(tag: &str) -> Rules {
        let Some(rank) = release_rank(tag) else {
            return Rules::MAIN;
        };
        let since = |t: &str| rank >= release_rank(t).unwrap_or(usize::MAX);
        Rules {
            release: RELEASES[rank],
            ledger_gate: since("v0.1.2"),
            dispatch_parent_refs: since("v0.1.6"),
            scanner_tool_dependencies: false,
            runs_on_spine: false,
            decoder: DecoderRules {
                v013_actions_and_goal_origin: since("v0.1.3"),
                text_inline_references: since("v0.1.4"),
                provider_content_keys: since("v0.1.5"),
                v016_envelope_and_parent_refs: since("v0.1.6"),
                v017_digest_and_trace_id: since("v0.1.7"),
                v0111_origins_budget_and_paths: since("v0.1.11"),
                invocation_opening: false,
                managed_mutation_facts: false,
            },
            header: HeaderRules {
                backend_kinds: if since("v0.1.11") {
                    BACKENDS
                } else {
                    BACKENDS_WITH_PI_AGENT
                },
                goal_id: since("v0.1.3"),
                root_execution_kind: since("v0.1.4"),
                tool_mode: since("v0.1.6"),
                run_composition: since("v0.1.10"),
                v0111_trigger_ids: since("v0.1.11"),
                legacy_session_statuses: !since("v0.1.11"),
                session_transcript_ledger_version: since("v0.1.9"),
                session_tool_profile: since("v0.1.11"),
                session_external_origin: since("main"),
                session_conversation_copy: since("v0.1.3"),
                session_subagent_workspace: since("v0.1.2"),
                run_event_types: if since("v0.1.4") {
                    None
                } else if since("v0.1.3") {
                    Some(RUN_EVENT_TYPES_V013)
                } else {
                    Some(RUN_EVENT_TYPES_V012)
                },
            },
        }
    }
}

impl Default for Rules {
    fn default() -> Self {
        Rules::MAIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v0111_decodes_as_main_and_main_is_main() {
        assert_eq!(Rules::for_release("v0.1.11").decoder, DecoderRules::MAIN);
        assert_eq!(Rules::for_release("main"), Rules::MAIN);
        let v0111 = Rules::for_release("v0.1.11").header;
        assert_eq!(
            HeaderRules {
                session_external_origin: true,
                ..v0111
            },
            HeaderRules::MAIN
        );
    }

    #[test]
    fn switches_flip_at_their_release() {
        let r = |t| Rules::for_release(t);
        assert!(!r("v0.1.5").dispatch_parent_refs && r("v0.1.6").dispatch_parent_refs);
        assert!(
            !r("v0.1.5").decoder.v016_envelope_and_parent_refs
                && r("v0.1.6").decoder.v016_envelope_and_parent_refs
        );
        assert!(
            !r("v0.1.6").decoder.v017_digest_and_trace_id
                && r("v0.1.7").decoder.v017_digest_and_trace_id
        );
        assert!(r("v0.1.10").header.backend_kinds.contains(&"pi-agent"));
        assert!(!r("v0.1.11").header.backend_kinds.contains(&"pi-agent"));
        assert!(!r("v0.1.1").ledger_gate && r("v0.1.2").ledger_gate);
        assert!(!r("v0.1.9").header.run_composition && r("v0.1.10").header.run_composition);
    }

    #[test]
    fn newer_rules_are_mains_plus_every_newer_switch() {
        let newer = Rules::newer_than_known();
        assert_eq!(newer.header, HeaderRules::MAIN);
        assert!(newer.decoder.is_main() && newer.decoder.is_newer_than_main());
        assert!(!DecoderRules::MAIN.is_newer_than_main());
        assert!(newer.scanner_tool_dependencies && newer.runs_on_spine);
        assert_eq!(
            Rules {
                release: "main",
                scanner_tool_dependencies: false,
                runs_on_spine: false,
                decoder: DecoderRules::MAIN,
                ..newer
            },
            Rules::MAIN
        );
        for tag in crate::release::RELEASES {
            let r = Rules::for_release(tag);
            // `is_main` reads the switches one by one: it must say what equality says.
            assert_eq!(
                r.decoder.is_main(),
                r.decoder == DecoderRules::MAIN,
                "{tag}"
            );
            assert!(!r.runs_on_spine && !r.scanner_tool_dependencies, "{tag}");
            assert!(!r.decoder.is_newer_than_main(), "{tag}");
        }
    }
}
