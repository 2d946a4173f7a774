//! The reasons of `startup_refused`: one per check of Maka's workspace composition,
//! what each means, what to do, and how Maka's own error message maps to it.

/// One refusal reason.
pub struct Reason {
    pub code: &'static str,
    /// What Maka checked, in our words.
    pub check: &'static str,
    /// The beginnings (or fixed parts) of Maka's messages that this reason stands for.
    pub messages: &'static [&'static str],
    /// What the user can do. Never schema surgery, never an older Maka.
    pub advice: Advice,
}

/// The kinds of advice a refusal gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    /// The file was written by a newer Maka: open it with that build or a newer one.
    NewerMaka,
    /// The schema was damaged or changed by hand: keep the file, restore a backup.
    RestoreBackup,
    /// Something is missing: what Maka derives is put back (`doctor rederive`); a
    /// missing table of primary data needs a backup.
    PutBackDerived,
    /// Data the migration cannot carry over: keep using the release that wrote it.
    KeepWritingRelease,
}

pub const REASONS: &[Reason] = &[
    Reason {
        code: "schema_newer",
        check: "a store's schema version (runtime `user_version`, the session-metadata schema \
                row or a registry scope) is newer than this Maka supports",
        messages: &[
            "Operational schema <scope> is newer than supported version <n>",
            "SQLite runtime schema <n> is newer than supported version <n>",
            "SQLite session metadata schema <n> is newer than supported version <n>",
        ],
        advice: Advice::NewerMaka,
    },
    Reason {
        code: "schema_scope_unknown",
        check: "the registry names a scope this Maka does not know (a newer build wrote it)",
        messages: &["Operational schema <scope> is unknown to this Maka build"],
        advice: Advice::NewerMaka,
    },
    Reason {
        code: "schema_registry_missing",
        check: "the file has schema objects but no scope registry \
                (`operational_schema_migrations`)",
        messages: &["Operational schema registry is missing from a nonempty database"],
        advice: Advice::PutBackDerived,
    },
    Reason {
        code: "schema_registry_scope_missing",
        check: "the registry lacks a scope this Maka requires",
        messages: &["Operational schema registry is missing scope <scope>"],
        advice: Advice::PutBackDerived,
    },
    Reason {
        code: "schema_registry_invalid",
        check: "a registry row or a store's version is not what Maka can read (a scope that \
                is not text, a version that is not a non-negative integer, a registry table \
                of another shape)",
        messages: &[
            "Operational schema registry has an invalid scope",
            "Operational schema <scope> has invalid version <v>",
            "Invalid SQLite runtime schema version",
            "Invalid SQLite session metadata schema version",
        ],
        advice: Advice::RestoreBackup,
    },
    Reason {
        code: "schema_object_missing",
        check: "after its migrations, a table, index or trigger of Maka's target schema is \
                missing",
        messages: &["Incomplete operational SQLite schema: missing required schema object <key>"],
        advice: Advice::PutBackDerived,
    },
    Reason {
        code: "schema_object_unfamiliar",
        check: "after its migrations, a schema object's definition differs from Maka's",
        messages: &[
            "Incomplete operational SQLite schema: schema object <key> has an incompatible \
             definition",
        ],
        advice: Advice::RestoreBackup,
    },
    Reason {
        code: "schema_object_unexpected",
        check: "after its migrations, the file has a schema object Maka's schema does not \
                have (hand-made, or left by v0.1.2/v0.1.3)",
        messages: &["Incomplete operational SQLite schema: unexpected schema object <key>"],
        advice: Advice::RestoreBackup,
    },
    Reason {
        code: "legacy_metadata_unfamiliar",
        check: "a legacy metadata table (`cutover_journal`, `runtime_import_sources`, \
                `session_metadata_import_sources`) that Maka would retire has a shape no \
                release wrote",
        messages: &[
            "Legacy operational metadata object <key> is missing its released shape",
            "Legacy operational metadata object <key> has an unfamiliar released shape",
            "Legacy operational metadata table <table> carries an unexpected object <key>",
        ],
        advice: Advice::RestoreBackup,
    },
    Reason {
        code: "legacy_cutover_invalid",
        check: "a row of the legacy cutover journal is not a completed cutover with the \
                validation evidence a release wrote",
        messages: &[
            "Legacy operational cutover journal is incomplete or invalid",
            "Legacy operational cutover journal has invalid validation evidence",
        ],
        advice: Advice::RestoreBackup,
    },
    Reason {
        code: "legacy_import_invalid",
        check: "a row of a legacy import-source table is incomplete, or names a session the \
                file does not have",
        messages: &[
            "Legacy operational import source is incomplete or invalid",
            "Legacy session import source is incomplete or invalid",
        ],
        advice: Advice::RestoreBackup,
    },
    Reason {
        code: "legacy_schema_incomplete",
        check: "the released Automation or Plan Reminder tables are not as their registry \
                versions say",
        messages: &[
            "Legacy Automation schema registry is missing",
            "Legacy Automation schema is incomplete",
            "The released Workflow schema is missing workflow_plan_reminders",
            "The current Workflow schema still contains released Plan Reminder state",
            "The released Automation schema is missing durable",
        ],
        advice: Advice::RestoreBackup,
    },
    Reason {
        code: "migration_failed",
        check: "a step of the runtime store's own migration fails on what the file already \
                has (a table, index, column or capability row that step creates): SQLite's \
                error, e.g. after `user_version` was set back by hand or by a tool",
        messages: &[
            "table <name> already exists",
            "index <name> already exists",
            "there is already a table named <name>",
            "there is already an index named <name>",
            "duplicate column name: <name>",
            "UNIQUE constraint failed: runtime_capabilities.capability",
            "no such table: <table>",
        ],
        advice: Advice::RestoreBackup,
    },
    Reason {
        code: "capability_unavailable",
        check: "once the stores are open, the runtime store does not find one of its \
                capability rows (`runtime_capabilities`) at the version it requires",
        messages: &[
            "SQLite runtime <kind> capability <name>@1 is unavailable",
            "no such table: runtime_capabilities",
        ],
        advice: Advice::RestoreBackup,
    },
    Reason {
        code: "migration_refused",
        check: "the migration would lose data it cannot carry over (a released Automation, \
                an in-flight fire, a Plan Reminder it cannot convert, a catalog above 256)",
        messages: &[
            "Released Automation <id> cannot be migrated without losing its configuration",
            "Released Automation has an in-flight fire",
            "Released scheduling catalog has <n> records",
            "Legacy Plan Reminder <...>",
            "Invalid legacy Plan Reminder <...>",
            "Invalid <label> record JSON",
        ],
        advice: Advice::KeepWritingRelease,
    },
];

/// The reason entry of a code.
pub fn reason(code: &str) -> Option<&'static Reason> {
    REASONS.iter().find(|r| r.code == code)
}

/// The reason Maka's message stands for (the documented mapping; `None` for a message
/// that is none of Maka's composition refusals).
pub fn reason_for_message(message: &str) -> Option<&'static str> {
    let m = message;
    let has = |s: &str| m.contains(s);
    let starts = |s: &str| m.starts_with(s);
    Some(
        if starts("Operational schema registry is missing from a nonempty database") {
            "schema_registry_missing"
        } else if starts("Operational schema registry is missing scope") {
            "schema_registry_scope_missing"
        } else if starts("Operational schema registry has an invalid scope")
            || (starts("Operational schema ") && has(" has invalid version "))
            || starts("Invalid SQLite runtime schema version")
            || starts("Invalid SQLite session metadata schema version")
        {
            "schema_registry_invalid"
        } else if (starts("Operational schema ")
            || starts("SQLite runtime schema ")
            || starts("SQLite session metadata schema "))
            && has(" is newer than supported version ")
        {
            "schema_newer"
        } else if starts("Operational schema ") && has(" is unknown to this Maka build") {
            "schema_scope_unknown"
        } else if starts("Incomplete operational SQLite schema: missing required schema object ") {
            "schema_object_missing"
        } else if starts("Incomplete operational SQLite schema: schema object ")
            && has(" has an incompatible definition")
        {
            "schema_object_unfamiliar"
        } else if starts("Incomplete operational SQLite schema: unexpected schema object ") {
            "schema_object_unexpected"
        } else if starts("Legacy operational metadata ") {
            "legacy_metadata_unfamiliar"
        } else if starts("Legacy operational cutover journal ") {
            "legacy_cutover_invalid"
        } else if starts("Legacy operational import source ")
            || starts("Legacy session import source ")
        {
            "legacy_import_invalid"
        } else if starts("Legacy Automation schema ")
            || starts("The released Workflow schema is missing workflow_plan_reminders")
            || starts("The current Workflow schema still contains released Plan Reminder state")
            || starts("The released Automation schema is missing durable")
        {
            "legacy_schema_incomplete"
        } else if (starts("table ") || starts("index ")) && has(" already exists")
            || starts("there is already a table named ")
            || starts("there is already an index named ")
            || starts("duplicate column name: ")
            || starts("UNIQUE constraint failed: runtime_capabilities.")
            || (starts("no such table: ") && !starts("no such table: runtime_capabilities"))
        {
            "migration_failed"
        } else if starts("SQLite runtime ") && has(" capability ") && has(" is unavailable")
            || starts("no such table: runtime_capabilities")
        {
            "capability_unavailable"
        } else if starts("Released Automation ")
            || starts("Released scheduling catalog ")
            || starts("Legacy Plan Reminder ")
            || starts("Invalid legacy Plan Reminder ")
            || (starts("Invalid ") && has(" record JSON"))
        {
            "migration_refused"
        } else {
            return None;
        },
    )
}

/// `wsledger explain startup_refused`'s list of reasons (also in docs/finding-codes.md).
pub fn explain_text() -> String {
    let mut out = String::from(
        "`detail.reason` names the check of Maka's workspace composition that refuses the \
         file; `detail.maka_message` quotes Maka's error. A refusing Maka leaves the file as it \
         is; one that opens it migrates it in place, one way. Reasons, and the Maka messages \
         each stands for:\n",
    );
    for r in REASONS {
        out.push_str(&format!("\n  {}: {}.\n", r.code, r.check));
        for m in r.messages {
            out.push_str(&format!("      \"{m}…\"\n"));
        }
        out.push_str(&format!("      what to do: {}\n", advice_words(r.advice)));
    }
    out
}

/// The advice in words, for the explanation and the plan.
pub fn advice_words(a: Advice) -> &'static str {
    match a {
        Advice::NewerMaka => {
            "the file was written by a newer Maka: open it with that build or a newer one \
             (Maka did not change it; wsledger cannot make it readable to this one)"
        }
        Advice::RestoreBackup => {
            "keep the file as it is (Maka did not change it), restore a backup made before the \
             change, and report it with the output of `wsledger info`; wsledger changes a \
             schema only to put back a missing object Maka derives, never one that differs \
             or is extra"
        }
        Advice::PutBackDerived => {
            "Maka did not change the file. What is missing may be derived: an index, a \
             trigger, the tool projections (`tool_operations`, `tool_journal_events`, rebuilt \
             from the runtime events) or the registry's rows; `wsledger doctor rederive \
             --apply` puts those back exactly as the release writes them, and nothing is lost \
             (`wsledger doctor repair` plans it with the rest). A missing table of primary \
             data (events, sessions, messages, run headers) cannot be derived: that loss is \
             real; keep the file as it is and restore a backup made before it"
        }
        Advice::KeepWritingRelease => {
            "keep using the Maka release that wrote the file until the data named is exported \
             or removed there; the newer Maka that refuses leaves the file unchanged"
        }
    }
}

/// What the user of `judged` can do about its refusal, for a file `writer` wrote: the
/// reason's advice, worded for the two builds. A file newer than `judged`: open it with
/// `writer` or newer; a migration Maka refuses: Maka's own instruction, in our words.
pub fn advice_for(reason: &str, message: &str, judged: &str, writer: &str) -> String {
    let Some(kind) = self::reason(reason).map(|x| x.advice) else {
        return String::new();
    };
    let (judged_who, writer_who) = (super::who(judged), super::who(writer));
    match kind {
        Advice::NewerMaka if writer == crate::release::NEWER => format!(
            "this file was written by a Maka newer than every build wsledger knows: open it \
             with that Maka or a newer one; do not edit the schema (Maka did not change the \
             file, and wsledger cannot make it readable to {judged_who})"
        ),
        Advice::NewerMaka if judged != writer => format!(
            "this file was written by a newer Maka ({writer_who}): open it with {} or newer; \
             do not edit the schema (Maka did not change the file, and wsledger cannot make \
             it readable to {judged_who})",
            super::who_short(writer)
        ),
        Advice::KeepWritingRelease => {
            let what = if message.contains("in-flight fire") {
                "let the Automation's pending fire finish"
            } else if message.starts_with("Released Automation ") {
                "remove or export the Automation it names"
            } else if message.starts_with("Released scheduling catalog ") {
                "bring the scheduling catalog (Automations and Plan Reminders) down to 256 \
                 records or fewer"
            } else {
                "remove or edit the Plan Reminder it names, which the newer Maka cannot convert"
            };
            format!(
                "{judged_who} left the file unchanged; in {writer_who}, which wrote it and \
                 still opens it, {what}, then open the workspace with {judged_who} again (do \
                 not edit the schema)"
            )
        }
        other => advice_words(other).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_message_maps_to_its_reason() {
        for r in REASONS {
            for m in r.messages {
                let concrete = m
                    .replace("<scope>", "runtime")
                    .replace("<n>", "12")
                    .replace("<v>", "x")
                    .replace("<key>", "table:t")
                    .replace("<table>", "t")
                    .replace("<id>", "a1")
                    .replace("<label>", "legacy Plan Reminder")
                    .replace("<name>", "runtime_storage_root_binding")
                    .replace("<kind>", "recovery")
                    .replace("<...>", "lastRun contradicts runs: r1");
                assert_eq!(reason_for_message(&concrete), Some(r.code), "{concrete}");
            }
        }
        assert_eq!(reason_for_message("database is locked"), None);
    }

    #[test]
    fn advice_names_the_newer_writer_or_the_writers_own_instruction() {
        let a = advice_for("schema_newer", "", "v0.1.5", "main");
        assert!(
            a.contains("open it with a Maka main-branch build or newer"),
            "{a}"
        );
        assert!(a.contains("do not edit the schema"), "{a}");
        let a = advice_for(
            "migration_refused",
            "Released Automation a1 cannot be migrated without losing its configuration",
            "v0.1.11",
            "v0.1.6",
        );
        assert!(a.contains("in Maka v0.1.6, which wrote it"), "{a}");
        assert!(a.contains("remove or export the Automation"), "{a}");
        for a in [
            advice_for("schema_newer", "", "main", "main"),
            advice_for("schema_object_missing", "", "v0.1.5", "v0.1.5"),
        ] {
            assert!(!a.is_empty());
            assert!(!crate::release::advice::advises_schema_surgery(&a), "{a}");
        }
    }
}
