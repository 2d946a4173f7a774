//! The scan's word on which Maka wrote the file (`workspace_release`), the schema
//! findings that follow from it, and the upgrade preview (`upgrade`).

use serde::Serialize;

use crate::db::shape::{ReadableTables, Unread, LEDGER_TABLES};
use crate::db::{KnownFrom, SchemaFacts};
use crate::findings::Finding;
use crate::release::{self, advice, Generation, Recognition};

/// `workspace_release` in the scan's JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkspaceRelease {
    /// Every release that writes exactly this file (empty when none does).
    pub matches: Vec<String>,
    /// The file's `PRAGMA user_version`.
    pub runtime_schema: i64,
    /// Whether the file equals a known generation.
    pub exact: bool,
    /// The releases of the closest known generation, when not exact.
    pub closest: Option<Vec<String>>,
    /// How the file differs from the closest generation (empty when exact).
    pub differences: Vec<String>,
    /// `fresh`, or the migration that left this object set.
    pub variant: String,
    /// The release whose rules the scan applied.
    pub rules: String,
    /// `build` (a generation verified against that build's own code), `source`
    /// (learned only from Maka's published sources) or `none` (newer than every
    /// generation wsledger knows); issue notes, 41.
    pub known_from: KnownFrom,
}

impl WorkspaceRelease {
    pub fn of(r: &Recognition, user_version: i64) -> WorkspaceRelease {
        let exact = r.exact();
        WorkspaceRelease {
            matches: r.matches().into_iter().map(str::to_owned).collect(),
            runtime_schema: user_version,
            exact,
            closest: (!exact).then(|| r.generation.releases.clone()),
            differences: r.differences.lines(),
            variant: r.variant.to_owned(),
            rules: r.rules().release.to_owned(),
            known_from: r.known_from,
        }
    }

    /// One line for people: who wrote the file.
    pub fn describe(&self) -> String {
        let name = |v: &[String]| match v {
            [] => "an unknown release".to_owned(),
            [one] => one.clone(),
            [a, b] => format!("{a} or {b}"),
            [first, .., last] => format!("{first} to {last}"),
        };
        let with = |v: &[String]| {
            if v.len() == 1 && v[0] == "main" {
                "a Maka main-branch build".to_owned()
            } else {
                format!("Maka {}", name(v))
            }
        };
        match (self.known_from, self.exact) {
            (KnownFrom::Source, true) => {
                return format!(
                    "written by a Maka newer than this wsledger, {} (known from Maka's \
                     published sources; runtime schema {})",
                    name(&self.matches),
                    self.runtime_schema
                )
            }
            (KnownFrom::Source, false) => {
                return format!(
                    "written by a Maka newer than this wsledger (runtime schema {}); each newer \
                     scope is at a version Maka's published sources describe",
                    self.runtime_schema
                )
            }
            (KnownFrom::None, _) => {
                return format!(
                    "written by a Maka newer than every generation this wsledger knows (runtime \
                     schema {})",
                    self.runtime_schema
                )
            }
            (KnownFrom::Build, _) => {}
        }
        if self.exact {
            format!(
                "written by {} (runtime schema {})",
                with(&self.matches),
                self.runtime_schema
            )
        } else {
            let closest = self.closest.as_deref().unwrap_or_default();
            format!(
                "matches no known Maka release (runtime schema {}); closest: {}, {} difference(s)",
                self.runtime_schema,
                with(closest),
                self.differences.len()
            )
        }
    }
}

/// The schema findings for a recognised file: nothing for the newest releases, an
/// `info` for an older release, warnings against the closest generation otherwise.
pub fn schema_findings(r: &Recognition, facts: &SchemaFacts) -> Vec<Finding> {
    let g = r.generation;
    if r.is_newer() {
        // Differences from a generation the file is newer than say nothing useful: the
        // scopes ahead do (and the tables not read, see `unread_findings`).
        return vec![newer_than_known(r)];
    }
    if r.exact() {
        if g.is_older_than_newest_release() {
            return vec![older_release(g, facts.user_version)];
        }
        return Vec::new();
    }
    let closest = g.display();
    let mut out = Vec::new();
    let d = &r.differences;
    for key in &d.objects.missing {
        out.push(Finding::new(
            "schema_object_missing",
            format!("schema object `{key}` of Maka {closest} is missing"),
        ));
    }
    for key in &d.objects.changed {
        out.push(Finding::new(
            "schema_object_changed",
            format!("schema object `{key}` differs from Maka {closest}'s definition"),
        ));
    }
    for key in &d.objects.unexpected {
        out.push(Finding::new(
            "schema_object_unexpected",
            format!("schema object `{key}` is not part of Maka {closest}'s schema"),
        ));
    }
    if let Some((file, want)) = d.user_version {
        out.push(Finding::new(
            "schema_version_mismatch",
            format!("user_version is {file}; Maka {closest} writes {want}"),
        ));
    }
    for line in &d.registry {
        out.push(Finding::new(
            "schema_registry_mismatch",
            format!("{line} (closest release: {closest})"),
        ));
    }
    for line in &d.capabilities {
        out.push(Finding::new(
            "schema_capability_mismatch",
            format!("{line} (closest release: {closest})"),
        ));
    }
    out
}

/// `schema_newer_than_known` (warning): the file was written by a Maka newer than every
/// build wsledger was verified against; which scopes are ahead, and what that means.
fn newer_than_known(r: &Recognition) -> Finding {
    let from = match r.known_from {
        KnownFrom::Source if r.exact() => format!(
            "its schema is the one Maka's published sources describe for {}",
            r.generation.newest()
        ),
        KnownFrom::Source => {
            "each newer scope is at a version Maka's published sources describe".to_owned()
        }
        _ => "no generation wsledger knows describes it".to_owned(),
    };
    let scopes: Vec<serde_json::Value> = r
        .newer_scopes
        .iter()
        .map(|n| serde_json::to_value(n).unwrap_or_default())
        .collect();
    Finding::new(
        "schema_newer_than_known",
        format!(
            "written by a Maka newer than this wsledger: {} (verified against a build); {from}. \
             wsledger judges only what it can read: the ledger and the tables whose shape it \
             knows; whether Maka starts on the file is not known, and nothing is written into it",
            r.newer_words()
        ),
    )
    .with_detail(serde_json::json!({
        "known_from": r.known_from,
        "scopes": scopes,
    }))
    .hint(
        "Update wsledger to a version that knows this Maka. Until then let that Maka's own \
         start-up recovery repair the file (every --apply refuses it); `wsledger replay` still \
         reads it.",
    )
}

/// One finding per table wsledger reads that is there and is not read: `ledger_not_read`
/// (error) for `runtime_events` (no ledger check is made), `table_not_read` (warning)
/// for the others.
pub fn unread_findings(readable: &ReadableTables) -> Vec<Finding> {
    readable
        .unread
        .iter()
        .map(|(table, why)| {
            let what = match why {
                Unread::UnknownShape => {
                    "its definition is not one any Maka generation wsledger knows defines"
                        .to_owned()
                }
                Unread::ColumnsGone(cols) => format!(
                    "it has the shape Maka's published sources describe, without the column(s) \
                     {} that wsledger reads",
                    cols.iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let (code, then) = if table == "runtime_events" {
                ("ledger_not_read", "no ledger check was made")
            } else if table == "core_agent_runs" {
                (
                    "table_not_read",
                    "runs are judged off the runtime event spine instead (each run's opening \
                     fact and its terminal event), where they can be",
                )
            } else if LEDGER_TABLES.contains(&table.as_str()) {
                (
                    "table_not_read",
                    "the ledger was checked without comparing this projection",
                )
            } else {
                (
                    "table_not_read",
                    "what wsledger would read there is left out of the report",
                )
            };
            Finding::new(code, format!("table `{table}` is not read: {what}; {then}"))
                .with_detail(serde_json::json!({ "table": table }))
                .hint(
                    "Update wsledger to a version that knows this table's shape; nothing in the \
                 file is changed by reading around it.",
                )
        })
        .collect()
}

/// v0.1.2 and v0.1.3 keep transcripts as files in `sessions/` beside the database.
pub fn keeps_session_files(g: &Generation) -> bool {
    g.releases.iter().any(|r| r == "v0.1.2" || r == "v0.1.3")
}

fn older_release(g: &Generation, user_version: i64) -> Finding {
    let what = if !g.rules().ledger_gate {
        format!(
            "{} keeps runtime events in this file only in an opt-in mode, beside \
             `sessions.sqlite` and a `sessions/` folder; it has no run or session tables and \
             no tool-ledger gate. wsledger checks its events with v0.1.2's ledger rules, as \
             the upgrade preview",
            g.display()
        )
    } else if keeps_session_files(g) {
        format!(
            "wsledger judges it with {}'s own rules; that release keeps session transcripts \
             as files in `sessions/` beside the database",
            g.newest()
        )
    } else {
        format!("wsledger judges it with {}'s own rules", g.newest())
    };
    let mut f = Finding::new(
        "schema_older_release",
        format!(
            "written by Maka {} (runtime schema {user_version}), older than the newest \
             release {}; {what}",
            g.display(),
            release::NEWEST_RELEASE
        ),
    );
    f.hint = format!("Nothing is required. {}", advice::upgrade_caveat(Some(g)));
    f
}

/// `upgrade` in the scan's JSON: what each newer Maka build will say once it has
/// migrated the file. It does not affect the release that wrote the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpgradePreview {
    pub targets: Vec<UpgradeTarget>,
}

/// One newer build's verdict on the migrated file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpgradeTarget {
    /// A catalogued build newer than the file's generation (`v0.1.11` is as released).
    pub release: String,
    /// `migrates`, `refuses` (the build leaves the file untouched and does not start
    /// on it), `not_measured` (v0.1.0 and v0.1.1 opt-in files) or `not_known` (Maka
    /// 0.2, known from its release notes only).
    pub migration: String,
    pub refusal: Option<String>,
    /// Its start-up would stop (a header it cannot decode, or a run the writer's
    /// start-up already stops on); `null`: not known.
    pub startup_blocked: Option<bool>,
    /// Its tool-ledger gate would refuse every tool-bearing write; `null`: not known.
    pub tool_writes_refused: Option<bool>,
    /// Headers the writer reads and this build cannot.
    pub undecodable_headers: Vec<UpgradeHeader>,
    /// This build's desktop app deletes the file when it starts (v0.1.5 and v0.1.6);
    /// `null`: not known.
    pub desktop_deletes: Option<bool>,
    /// What this build's workspace composition does when it opens the file (see
    /// `crate::startup`); `null` where not known.
    pub composition: Option<crate::startup::Verdict>,
    /// Maka 0.2: what its release notes say opening the file does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consequences: Vec<String>,
    /// Maka 0.2: the unfinished tasks its Task Ledger retirement deletes, counted from
    /// the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unfinished_tasks: Option<crate::release::maka02::UnfinishedTasks>,
}

/// A run or session header a newer build cannot decode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpgradeHeader {
    pub session_id: String,
    /// `null` for a session header.
    pub run_id: Option<String>,
    pub message: String,
}

/// The findings of an upgrade preview: warnings, each naming the build. They speak for
/// the builds users upgrade to (`upgrade::TARGETS`: v0.1.11 as released, and main); the
/// other targets are in the preview itself.
pub fn upgrade_findings(p: &UpgradePreview, writer_refuses_tool_writes: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let tasks = p
        .targets
        .iter()
        .filter_map(|t| t.unfinished_tasks.as_ref().map(|u| (&t.release, u)))
        .find(|(_, u)| u.total > 0);
    if let Some((release, u)) = tasks {
        let mut f = Finding::new(
            "upgrade_deletes_tasks",
            format!(
                "Maka {release}, by its release notes, deletes {} unfinished task(s) in {} \
                 conversation(s) of this file when it first opens it (it retires the Task \
                 Ledger and does not migrate unfinished tasks)",
                u.total,
                u.sessions.len()
            ),
        )
        .with_detail(serde_json::json!({"release": release, "unfinished_tasks": u}));
        f.hint = format!(
            "Before opening the workspace with Maka {release}, finish or export those tasks \
             with the Maka you use now, or copy the workspace folder aside: only a copy made \
             before keeps them. {}",
            advice::ONE_WAY
        );
        out.push(f);
    }
    let headline =
        |t: &&UpgradeTarget| crate::release::upgrade::TARGETS.contains(&t.release.as_str());
    for t in p.targets.iter().filter(headline) {
        if let Some(why) = &t.refusal {
            let mut f = Finding::new("upgrade_migration_refused", why.clone());
            f.hint = format!(
                "Keep using the release that wrote the file; do not edit the schema to make \
                 Maka {} accept it.",
                t.release
            );
            out.push(f);
            continue;
        }
        for h in &t.undecodable_headers {
            let what = if h.run_id.is_some() { "run" } else { "session" };
            let mut f = Finding::new(
                "upgrade_blocks_startup",
                format!(
                    "after migrating, Maka {} cannot decode this {what} header ({}) and its \
                     start-up stops",
                    t.release, h.message
                ),
            )
            .session(&h.session_id);
            if let Some(r) = &h.run_id {
                f = f.run(r);
            }
            out.push(f);
        }
        if t.tool_writes_refused == Some(true) && !writer_refuses_tool_writes {
            out.push(Finding::new(
                "upgrade_refuses_tool_writes",
                format!(
                    "after migrating, Maka {}'s tool-ledger gate refuses every tool-bearing \
                     write in every session",
                    t.release
                ),
            ));
        }
    }
    out
}

/// What each newer Maka build will say of this file once it has migrated it, from the
/// builds' judgements (`super::builds`): its composition first; where that opens, the
/// measured refusals of v0.1.2 and v0.1.3 leftovers; then the headers it can no longer
/// decode, its strict recovery and its gate.
pub fn upgrade_preview(
    g: &Generation,
    schema: &SchemaFacts,
    judged: &[super::builds::Judged],
    tasks: crate::release::maka02::UnfinishedTasks,
) -> UpgradePreview {
    use crate::release::upgrade;
    let mut out = Vec::new();
    for target in upgrade::targets_for(g) {
        let Some(j) = judged.iter().find(|j| j.build == target) else {
            continue;
        };
        let composition = Some(j.verdict.clone());
        // The build's own composition refuses first; only then does it matter whether
        // its migration was measured and refuses.
        let refusal = crate::startup::upgrade_refusal(&j.verdict);
        let mut t = UpgradeTarget {
            release: target.to_owned(),
            migration: "migrates".into(),
            refusal: None,
            startup_blocked: Some(false),
            tool_writes_refused: Some(j.tool_writes_refused),
            undecodable_headers: Vec::new(),
            desktop_deletes: Some(j.desktop_deletes),
            composition,
            consequences: Vec::new(),
            unfinished_tasks: None,
        };
        if refusal.is_none() && !upgrade::migration_measured(g) {
            t.migration = "not_measured".into();
            out.push(t);
            continue;
        }
        let keys = schema.objects.iter().map(|o| o.key.as_str());
        if let Some(why) = refusal.or_else(|| upgrade::migration_refusal(target, keys)) {
            t.migration = "refuses".into();
            t.refusal = Some(why);
            t.startup_blocked = Some(true);
            t.tool_writes_refused = Some(false);
            out.push(t);
            continue;
        }
        t.startup_blocked = Some(!j.blockers.is_empty());
        t.undecodable_headers = j.undecodable_headers.clone();
        out.push(t);
    }
    out.push(maka02_target(tasks));
    UpgradePreview { targets: out }
}

/// Maka 0.2: newer than every catalogued build, known from its release notes only. Its
/// start-up, gate and desktop are not known; its consequences are the notes', counted
/// from the file.
fn maka02_target(tasks: crate::release::maka02::UnfinishedTasks) -> UpgradeTarget {
    use crate::release::maka02;
    UpgradeTarget {
        release: maka02::RELEASE.to_owned(),
        migration: "not_known".into(),
        refusal: None,
        startup_blocked: None,
        tool_writes_refused: None,
        undecodable_headers: Vec::new(),
        desktop_deletes: None,
        composition: None,
        consequences: maka02::CONSEQUENCES
            .iter()
            .map(|c| (*c).to_owned())
            .collect(),
        unfinished_tasks: Some(tasks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts_of(tag: &str) -> SchemaFacts {
        release::generation_of(tag).unwrap().facts(0)
    }

    #[test]
    fn newest_and_main_have_no_schema_finding() {
        for tag in ["v0.1.11", "main"] {
            let f = facts_of(tag);
            assert!(schema_findings(&release::recognize(&f), &f).is_empty());
        }
    }

    #[test]
    fn an_older_release_is_one_info_finding() {
        for tag in ["v0.1.2", "v0.1.5", "v0.1.7", "v0.1.10", "v0.1.0"] {
            let f = facts_of(tag);
            let r = release::recognize(&f);
            let found = schema_findings(&r, &f);
            assert_eq!(found.len(), 1, "{tag}");
            assert_eq!(found[0].code, "schema_older_release");
            assert_eq!(found[0].severity, crate::findings::Severity::Info);
            assert!(found[0].hint.contains("one way"), "{}", found[0].hint);
            // The deletion warning is worded for the file's own writer.
            let own = tag == "v0.1.5";
            assert_eq!(
                found[0].hint.contains("delete it at their next start"),
                own,
                "{tag}"
            );
            assert_eq!(
                found[0]
                    .hint
                    .contains("never open this workspace with them"),
                !own
            );
        }
    }

    #[test]
    fn an_unknown_file_gets_warnings_against_the_closest() {
        let mut f = facts_of("v0.1.5");
        f.objects
            .retain(|o| o.key != "index:tool_journal_events_by_operation");
        let r = release::recognize(&f);
        let found = schema_findings(&r, &f);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].code, "schema_object_missing");
        assert_eq!(found[0].severity, crate::findings::Severity::Warning);
        let wr = WorkspaceRelease::of(&r, f.user_version);
        assert!(!wr.exact);
        assert_eq!(wr.closest, Some(vec!["v0.1.5".to_owned()]));
        assert!(wr.matches.is_empty());
    }
}
