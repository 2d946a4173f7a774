//! Will Maka open this file? The start-up model: what a release's workspace
//! composition (session store, agent-run store and runtime store on one root, as the
//! runtime host composes them) does when it opens the file: opens it as it is, migrates
//! it (and which migrations run), or refuses (which store, which check, Maka's message).
//!
//! The rules are those of each release's storage code (`operational-state-store.ts`,
//! `operational-target-schema.ts`, `sqlite-*-schema.ts`, `sqlite-legacy-scheduling.ts`),
//! ported, not copied: the differences between releases are the catalog's data (scope
//! versions, target objects) plus the named switches of [`Composition`]. Pure: the facts
//! come from `db::startup`.

pub mod builds;
mod compose;
mod legacy;
pub mod reasons;
mod runtime_steps;

use serde::Serialize;

use crate::db::startup::StartupFacts;
use crate::findings::Finding;

pub use compose::{composition_of, Composition, Family};

/// One migration Maka runs on opening the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Migration {
    /// The store or registry scope (`runtime`, `session_metadata`, `workflow`, …;
    /// `registry` for the scope registry, `legacy_metadata` for the retired tables).
    pub store: String,
    /// Its version before (`null`: none recorded).
    pub from: Option<i64>,
    /// Its version after (`null`: the store is removed).
    pub to: Option<i64>,
    /// Schema objects the migration creates again although the version stays (Maka's
    /// `CREATE … IF NOT EXISTS` stores).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recreates: Vec<String>,
}

/// Why Maka refuses to open the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The check, one of [`reasons::REASONS`].
    pub reason: &'static str,
    /// The store (scope) whose check refuses.
    pub store: String,
    /// The schema object, registry scope or table named, if any.
    pub object: Option<String>,
    /// Maka's own error message (quoted as a fact).
    pub maka_message: String,
    /// For `schema_newer`: the version found in the file, where the file records one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// For `schema_newer`: the newest version this release supports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported_version: Option<i64>,
}

/// What one release's composition does with the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub release: String,
    /// Maka opens the file (as it is, or after `migrations`).
    pub opens: bool,
    pub migrations: Vec<Migration>,
    pub refusal: Option<Refusal>,
    /// What the model leaves out for this release, if anything (e.g. the legacy files
    /// v0.1.2 and v0.1.3 import beside the database).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_modelled: Option<String>,
}

impl Verdict {
    fn opens(release: &str, migrations: Vec<Migration>) -> Verdict {
        Verdict {
            release: release.to_owned(),
            opens: true,
            migrations,
            refusal: None,
            not_modelled: None,
        }
    }

    fn refuses(release: &str, refusal: Refusal) -> Verdict {
        Verdict {
            release: release.to_owned(),
            opens: false,
            migrations: Vec::new(),
            refusal: Some(refusal),
            not_modelled: None,
        }
    }

    /// `opens as is`, `migrates (…)` or `refuses: …`, for people.
    pub fn describe(&self) -> String {
        match (&self.refusal, self.migrations.is_empty()) {
            (Some(r), _) => format!(
                "refuses to open it ({}, store {}): \"{}\"",
                r.reason, r.store, r.maka_message
            ),
            (None, true) => "opens it as it is".to_owned(),
            (None, false) => {
                let steps: Vec<String> = self
                    .migrations
                    .iter()
                    .map(|m| match (m.from, m.to) {
                        (_, None) => format!("{} removed", m.store),
                        (Some(a), Some(b)) if a == b => {
                            format!("{} recreates {} object(s)", m.store, m.recreates.len())
                        }
                        (Some(a), Some(b)) => format!("{} {a}→{b}", m.store),
                        (None, Some(b)) => format!("{} created at {b}", m.store),
                    })
                    .collect();
                format!("opens it after migrating ({})", steps.join(", "))
            }
        }
    }
}

/// A run that stops Maka's strict start-up recovery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blocker {
    pub session_id: String,
    /// Empty for a session header Maka cannot read.
    pub run_id: String,
    pub code: String,
}

/// `startup.strict_recovery`: what strict start-up recovery does on what Maka opens.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StrictRecovery {
    /// Whether it runs at all (not when the composition refuses the file).
    pub runs: bool,
    /// It throws, and the host stops.
    pub blocked: bool,
    pub blockers: Vec<Blocker>,
}

/// The scan's top-level `startup` object (and each row of `compatibility`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Startup {
    /// The build whose start-up this is: by default the release whose rules the scan
    /// applies (the writer), else the one `--maka` names.
    pub release: String,
    /// `null` when not known: the file was written by a Maka newer than every build
    /// wsledger was verified against (see `not_known`).
    pub opens: Option<bool>,
    pub migrations: Vec<Migration>,
    pub refusal: Option<Refusal>,
    /// That build's desktop app deletes the database when it starts (v0.1.5, v0.1.6 and
    /// cef8c44d8, on any file whose versions are not exactly theirs).
    pub desktop_deletes: bool,
    pub strict_recovery: StrictRecovery,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_modelled: Option<String>,
    /// Why whether Maka starts on the file is not known (issue notes, 41).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_known: Option<String>,
}

impl Startup {
    /// From a build's verdict, whether its desktop deletes the file, and what the scan
    /// found about its strict recovery.
    pub fn new(v: Verdict, blockers: Vec<Blocker>, desktop_deletes: bool) -> Startup {
        let runs = v.opens;
        Startup {
            release: v.release,
            opens: Some(v.opens),
            migrations: v.migrations,
            refusal: v.refusal,
            desktop_deletes,
            strict_recovery: StrictRecovery {
                runs,
                blocked: runs && !blockers.is_empty(),
                blockers,
            },
            not_modelled: v.not_modelled,
            not_known: None,
        }
    }

    /// The start-up of a file written by a Maka newer than this wsledger: not known
    /// (nothing is modelled, so nothing is said to refuse or block). `why` names the
    /// scopes ahead.
    pub fn not_known(why: String) -> Startup {
        Startup::not_known_for(crate::release::NEWER, why, false)
    }

    /// [`Startup::not_known`] for a catalogued `build` judging such a file (`--maka`)
    /// where its own checks of the versions do not decide. Whether its desktop deletes
    /// the file is known all the same: it compares versions only.
    pub fn not_known_for(build: &str, why: String, desktop_deletes: bool) -> Startup {
        Startup {
            release: build.to_owned(),
            opens: None,
            migrations: Vec::new(),
            refusal: None,
            desktop_deletes,
            strict_recovery: StrictRecovery::default(),
            not_modelled: None,
            not_known: Some(why),
        }
    }

    /// The writing build's composition refuses the file.
    pub fn refused(&self) -> bool {
        self.opens == Some(false)
    }

    /// Whether wsledger knows what Maka's start-up does with the file.
    pub fn known(&self) -> bool {
        self.opens.is_some()
    }

    /// "Maka would not start" (issue notes, 38); `false` when not known.
    pub fn blocked(&self) -> bool {
        self.refused() || self.strict_recovery.blocked
    }

    /// The one line the table output prints before the findings.
    pub fn line(&self) -> String {
        format!("start-up: {}", self.verdict())
    }

    /// The verdict in words: `ok: …`, `BLOCKED: …` or `REFUSED: …`.
    pub fn verdict(&self) -> String {
        match &self.not_modelled {
            Some(n) => format!("{} (not modelled: {n})", self.verdict_words()),
            None => self.verdict_words(),
        }
    }

    fn verdict_words(&self) -> String {
        let who = who(&self.release);
        let mut words = match &self.not_known {
            Some(why) => format!("not known: written by a Maka newer than this wsledger ({why})"),
            None => self.composition_words(&who),
        };
        if self.desktop_deletes {
            words.push_str(&format!(
                "; its DESKTOP app DELETES this file when it starts ({})",
                desktop_why(&self.release)
            ));
        }
        words
    }

    fn composition_words(&self, who: &str) -> String {
        if let Some(r) = &self.refusal {
            return format!(
                "REFUSED: {who} does not open this file ({}, store {}): \"{}\"",
                r.reason, r.store, r.maka_message
            );
        }
        let how = if self.migrations.is_empty() {
            "opens it as it is".to_owned()
        } else {
            format!("opens it after {} migration(s)", self.migrations.len())
        };
        if self.strict_recovery.blocked {
            format!(
                "BLOCKED: {who} {how}, then its strict start-up recovery stops on {} \
                 run(s) or session(s)",
                self.strict_recovery.blockers.len()
            )
        } else {
            format!("ok: {who} {how} and its strict start-up recovery completes")
        }
    }
}

/// What `release` does when it opens a file with these facts (`None` for a release the
/// catalog does not know). `cef8c44d8` is judged as v0.1.5, under its own name.
pub fn verdict(facts: &StartupFacts, release: &str) -> Option<Verdict> {
    let build = builds::build(release)?;
    let mut v = composition_of(builds::rules_of(build))?.judge(facts);
    v.release = build.to_owned();
    Some(v)
}

/// A build named for people: `Maka v0.1.5`, `a Maka main-branch build`, `Maka build
/// cef8c44d8`.
pub fn who(build: &str) -> String {
    match build {
        "main" => "a Maka main-branch build".to_owned(),
        crate::release::NEWER => "a Maka newer than this wsledger".to_owned(),
        builds::DEV_BUILD => format!("Maka build {build} (a 0.1.5 development build)"),
        _ => format!("Maka {build}"),
    }
}

/// The loud warnings of the builds judged (`startup`, or every row of `--maka all`)
/// whose desktop deletes the file at start.
pub fn desktop_warnings(
    startup: Option<&Startup>,
    compatibility: Option<&[Startup]>,
    database: &str,
) -> Vec<String> {
    let rows: Vec<&Startup> = match compatibility {
        Some(rows) => rows.iter().collect(),
        None => startup.into_iter().collect(),
    };
    rows.into_iter()
        .filter(|s| s.desktop_deletes)
        .map(|s| desktop_warning(&s.release, database))
        .collect()
}

/// A build as the object of "open it with …": `Maka v0.1.11`, `a Maka main-branch
/// build`.
pub fn who_short(build: &str) -> String {
    match build {
        "main" => "a Maka main-branch build".to_owned(),
        crate::release::NEWER => "that Maka".to_owned(),
        _ => format!("Maka {build}"),
    }
}

/// Why a resetting desktop deletes the file, in a few words.
fn desktop_why(build: &str) -> String {
    format!(
        "it keeps only a database whose schema versions are exactly {}'s",
        builds::rules_of(build)
    )
}

/// The loud warning printed first when the judged build's desktop deletes the file:
/// what happens and how to keep a copy.
pub fn desktop_warning(build: &str, database: &str) -> String {
    format!(
        "{}'s DESKTOP APP DELETES this database ({database}) WHEN IT STARTS, and then starts \
         empty: {}. Before starting that app, copy the whole workspace folder (the database \
         with its -wal and -shm files) somewhere safe; the copy is what survives. Its CLI and \
         runtime host do not delete it.",
        who(build),
        desktop_why(build)
    )
}

/// The `startup_refused` finding of a refusal (error), with advice for a file `writer`
/// wrote.
pub fn refusal_finding(v: &Verdict, writer: &str) -> Option<Finding> {
    let r = v.refusal.as_ref()?;
    let what = reasons::advice_for(r.reason, &r.maka_message, &v.release, writer);
    let who = who(&v.release);
    let mut detail = serde_json::json!({
        "reason": r.reason,
        "store": r.store,
        "object": r.object,
        "maka_message": r.maka_message,
        "release": v.release,
    });
    if r.reason == "schema_newer" {
        detail["version"] = r.version.into();
        detail["supported_version"] = r.supported_version.into();
    }
    Some(
        Finding::new(
            "startup_refused",
            format!(
                "{who} refuses to open this file ({}): \"{}\"",
                r.reason, r.maka_message
            ),
        )
        .with_detail(detail)
        .hint(what),
    )
}

/// The release whose start-up the scan reports: the one whose rules it applies. The
/// choice has one rule, `release::recognize`'s: never a release whose runtime schema is
/// older than the file's `user_version` (a file newer than every release is measured
/// against the newest, whose composition then refuses it as newer than itself).
pub fn writer_release(rules_release: &str) -> &'static str {
    crate::release::RELEASES
        .iter()
        .copied()
        .find(|r| *r == rules_release)
        .unwrap_or("main")
}

/// Drops the findings that only restate one cause: the schema warnings about the
/// refused object (and every object of its table, when that is missing), the
/// projection findings about a tool table that is not there to hold the rows, and the
/// "run has no header" findings when the header table is missing (the missing table is
/// already one finding). Returns how many were dropped.
pub fn drop_restated(findings: &mut Vec<Finding>, facts: &StartupFacts, v: &Verdict) -> usize {
    let no_refusal = Refusal {
        reason: "",
        store: String::new(),
        object: None,
        maka_message: String::new(),
        version: None,
        supported_version: None,
    };
    let r = v.refusal.as_ref().unwrap_or(&no_refusal);
    let missing_journal = !facts.has_table("tool_journal_events");
    let missing_operations = !facts.has_table("tool_operations");
    let missing_headers = !facts.has_table("core_agent_runs");
    // The table the refused object belongs to: every warning about one of its
    // objects restates the refusal.
    let target = composition_of(&v.release).and_then(|c| c.target);
    // Releases that check versions only have no target: their fresh schema names
    // the table of an object just as well.
    let fresh = crate::release::generation_of(&v.release).map(|g| g.fresh());
    let table_of_key = |key: &str| -> Option<String> {
        target
            .and_then(|t| t.get(key))
            .or_else(|| fresh.and_then(|f| f.get(key)))
            .map(|sig| compose::table_of(sig).to_owned())
    };
    let refused_table = r
        .object
        .as_deref()
        .filter(|_| r.reason == "schema_object_missing")
        .and_then(table_of_key);
    // Tables reported missing: a warning about one of their indexes or triggers says
    // the same thing again.
    let missing_tables: Vec<String> = findings
        .iter()
        .filter(|f| f.code == "schema_object_missing")
        .filter_map(|f| f.message.split('`').nth(1))
        .filter_map(|key| key.strip_prefix("table:"))
        .map(str::to_owned)
        .collect();
    let before = findings.len();
    findings.retain(|f| {
        let schema_warning = matches!(
            f.code,
            "schema_object_missing" | "schema_object_changed" | "schema_object_unexpected"
        );
        if schema_warning {
            if let Some(key) = &r.object {
                if f.message.contains(&format!("`{key}`")) {
                    return false;
                }
            }
            let key = f.message.split('`').nth(1).unwrap_or("");
            if f.code == "schema_object_missing"
                && refused_table.is_some()
                && table_of_key(key) == refused_table
            {
                return false;
            }
            if f.code == "schema_object_missing"
                && !key.starts_with("table:")
                && table_of_key(key).is_some_and(|t| missing_tables.contains(&t))
            {
                return false;
            }
        }
        // The registry or capability table whose absence is the refusal: the schema
        // check's "`<table>` is missing" says it again.
        if matches!(
            f.code,
            "schema_registry_mismatch" | "schema_capability_mismatch"
        ) && r
            .object
            .as_deref()
            .and_then(|o| o.strip_prefix("table:"))
            .is_some_and(|t| f.message.starts_with(&format!("`{t}` is missing")))
        {
            return false;
        }
        // So does the schema check's word on the capability row the runtime store
        // refuses without.
        if f.code == "schema_capability_mismatch"
            && r.object
                .as_deref()
                .and_then(|o| o.strip_prefix("capability:"))
                .is_some_and(|c| f.message.starts_with(&format!("capability `{c}`")))
        {
            return false;
        }
        // A newer build refusing for the same check and object says it again.
        if f.code == "upgrade_migration_refused"
            && !r.reason.is_empty()
            && f.message
                .contains(&format!("({}, store {}", r.reason, r.store))
            && r.object
                .as_ref()
                .is_none_or(|o| f.message.contains(o.as_str()))
        {
            return false;
        }
        // Without the sessions table every run lies outside a listed session: one
        // warning per run would only say again that the table is missing.
        let sessions_gone = refused_table.as_deref() == Some("session_metadata")
            || missing_tables.iter().any(|t| t == "session_metadata");
        if sessions_gone && f.code == "run_outside_sessions" {
            return false;
        }
        let about_journal = f.code.starts_with("projection_journal_");
        let about_operations = f.code.starts_with("projection_operation_");
        // Without the header table every run lacks its header: that is the table.
        let about_headers = f.code == "run_header_missing";
        !(missing_journal && about_journal
            || missing_operations && about_operations
            || missing_headers && about_headers)
    });
    before - findings.len()
}

/// The upgrade preview's `refusal` words for a build whose composition refuses.
pub fn upgrade_refusal(v: &Verdict) -> Option<String> {
    let r = v.refusal.as_ref()?;
    Some(format!(
        "Maka {} refuses to open it ({}, store {}: \"{}\") and leaves the file as it is",
        v.release, r.reason, r.store, r.maka_message
    ))
}

/// One command's note while Maka refuses to open the file: `command` does not change
/// that, and what to do instead (which may be another wsledger step, such as
/// `doctor rederive`).
pub fn command_words(s: &Startup, writer: &str, command: &str) -> Option<String> {
    let r = s.refusal.as_ref()?;
    Some(format!(
        "{} refuses to open this file ({}); {command} does not change that. What to do: {}",
        who(&s.release),
        r.reason,
        reasons::advice_for(r.reason, &r.maka_message, &s.release, writer)
    ))
}

/// `diagnosis.plan.startup_refused`: no step of wsledger's makes Maka open the file,
/// and what to do instead; with `cannot` (why, advice), why `doctor rederive` does not
/// put back what is missing, when something is and it does not.
pub fn plan_words_with(s: &Startup, writer: &str, cannot: Option<(&str, &str)>) -> Option<String> {
    let r = s.refusal.as_ref()?;
    let (why, advice) = match cannot {
        Some((c, advice)) => (
            format!("wsledger cannot put back what is missing: {c}"),
            advice.to_owned(),
        ),
        None => (
            "no wsledger repair changes that: wsledger changes a schema only to put back \
             exactly an object Maka derives"
                .to_owned(),
            reasons::advice_for(r.reason, &r.maka_message, &s.release, writer),
        ),
    };
    Some(format!(
        "{} refuses to open this file ({}); {why}. What to do: {advice}",
        who(&s.release),
        r.reason
    ))
}

/// Appended to each planned step's `fixes` while Maka refuses to open the file.
pub const STAYS_REFUSED: &str =
    "start-up stays refused after this step (see `startup_refused`): Maka still does not open the file";
