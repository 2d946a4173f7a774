//! `doctor rederive`: put back exactly what Maka derives when it is missing. An index
//! or a trigger with the SQL text the writing build writes, the tool projections
//! (`tool_operations`, `tool_journal_events`) created as that build creates them and
//! filled from the runtime events as its rebuild fills them, and the scope registry's
//! rows of that build. Only on a file that is a generation verified against a build
//! (`release::repair_basis::verified_against_build`) less derived objects only, whose
//! exact text the file lets us tell, and which the build then opens as it is; never a
//! table of primary data.
//!
//! This module plans ([`plan_on`], on one snapshot: pure but for the reads it asks of
//! `db`), [`rebuild`] re-derives the projection rows, and [`apply`] writes (through
//! [`crate::apply`]). `doctor restore` takes a rederive back (`quarantine::rederived`).

pub mod apply;
pub mod rebuild;

use crate::db::{DbError, Workspace};
use crate::findings::Finding;
use crate::release::derived::{self, Missing};
use crate::scan::ScanReport;

/// What `doctor rederive` would do with the file.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Nothing Maka derives is missing.
    Nothing,
    /// What is missing can be put back exactly.
    Planned(Plan),
    /// Something is missing and cannot be put back exactly: why, in the user's words.
    Refused(Refused),
}

impl Outcome {
    pub fn planned(&self) -> Option<&Plan> {
        match self {
            Outcome::Planned(p) => Some(p),
            _ => None,
        }
    }
}

/// What is put back, and from what.
#[derive(Clone, Debug)]
pub struct Plan {
    pub missing: Missing,
    /// The release whose schema is put back (the newest of its generation).
    pub release: &'static str,
    /// `(type:name, exact SQL)`, in the order they are created.
    pub objects: Vec<(String, String)>,
    /// Registry rows added: `(scope, version)`.
    pub registry_rows: Vec<(String, i64)>,
    /// When a tool projection table is missing and the ledger holds damage that Maka's
    /// rebuild stops on: that damage, in words. The projections can then be rebuilt
    /// only once the damage is excised (or its session quarantined).
    pub ledger_damage: Option<String>,
    /// Maka refuses to open the file now (its start-up verdict in words), if it does.
    pub refused_now: Option<String>,
}

/// Why what is missing is not put back.
#[derive(Clone, Debug)]
pub struct Refused {
    /// What is missing, in words.
    pub missing: Vec<String>,
    /// Why it is not put back.
    pub why: String,
    /// A table of primary data is missing: its loss is real.
    pub primary: bool,
}

/// The table a signature (`type:tbl_name:sql`) belongs to.
fn table_of(signature: &str) -> &str {
    signature.split(':').nth(1).unwrap_or("")
}

/// One missing object in the user's words.
pub fn object_words(key: &str, table: &str) -> String {
    let (kind, name) = key.split_once(':').unwrap_or(("", key));
    match (kind, name) {
        ("table", "tool_operations") => {
            "table `tool_operations` (Maka's list of tool calls, derived from the runtime \
             events)"
                .to_owned()
        }
        ("table", "tool_journal_events") => {
            "table `tool_journal_events` (the steps of each tool call, derived from the \
             runtime events)"
                .to_owned()
        }
        ("table", "operational_schema_migrations") => {
            "table `operational_schema_migrations` (the registry of the schema's versions)"
                .to_owned()
        }
        ("index", n) => format!("index `{n}` of table `{table}`"),
        ("trigger", n) => format!("trigger `{n}` on table `{table}`"),
        (k, n) => format!("{k} `{n}`"),
    }
}

impl Plan {
    /// Everything put back, in words, one entry each.
    pub fn words(&self) -> Vec<String> {
        let variant = self
            .missing
            .generation
            .variants
            .iter()
            .find(|v| v.label == self.missing.variant);
        let mut out: Vec<String> = self
            .objects
            .iter()
            .map(|(k, _)| {
                let table = variant
                    .and_then(|v| v.objects.get(k))
                    .map_or("", |s| table_of(s));
                object_words(k, table)
            })
            .collect();
        if !self.registry_rows.is_empty() && !self.missing.registry_table() {
            let rows: Vec<String> = self
                .registry_rows
                .iter()
                .map(|(s, v)| format!("{s} {v}"))
                .collect();
            out.push(format!(
                "the registry row(s) of scope(s) {}",
                rows.join(", ")
            ));
        }
        out
    }

    /// The tool projection tables the plan creates and fills from the log.
    pub fn projections(&self) -> Vec<&'static str> {
        self.missing.projections()
    }

    /// `Maka vX` (or `a Maka main-branch build`), for sentences.
    pub fn maka(&self) -> String {
        maka(self.release)
    }
}

/// `Maka vX`, or `a Maka main-branch build`.
pub fn maka(release: &str) -> String {
    if release == "main" {
        "a Maka main-branch build".to_owned()
    } else {
        format!("Maka {release}")
    }
}

/// The damage in the ledger that stops Maka's rebuild of the tool projections: a
/// scanner issue or an undecodable row (`None`: the ledger rebuilds).
pub fn ledger_damage(report: &ScanReport) -> Option<String> {
    if let Some(i) = report.issues.first() {
        return Some(format!("{} at event {}", i.code.as_str(), i.event_id));
    }
    report
        .findings
        .iter()
        .find(|f: &&Finding| f.code == "event_undecodable")
        .map(|f| {
            format!(
                "an undecodable runtime event ({})",
                f.event_id.as_deref().unwrap_or("?")
            )
        })
}

/// Plans `doctor rederive` on the workspace `ws`, scanned as `report` (one snapshot).
pub fn plan_on(ws: &Workspace, report: &ScanReport) -> Result<Outcome, DbError> {
    let facts = ws.schema_facts()?;
    let missing = match derived::missing(&facts) {
        Ok(None) => return Ok(Outcome::Nothing),
        Ok(Some(m)) => m,
        Err(e) => {
            let r = crate::release::recognize(&facts);
            let d = &r.differences;
            let lost: Vec<String> = d
                .objects
                .missing
                .iter()
                .map(|k| format!("`{k}`"))
                .chain(
                    d.registry
                        .iter()
                        .filter(|l| l.contains("is missing") || l.contains("not registered"))
                        .cloned(),
                )
                .collect();
            if lost.is_empty() {
                return Ok(Outcome::Nothing);
            }
            return Ok(Outcome::Refused(Refused {
                missing: lost,
                why: e.why.join("; "),
                primary: !e.primary.is_empty(),
            }));
        }
    };
    let g = missing.generation;
    let words_of = |m: &Missing| -> Vec<String> {
        m.objects
            .iter()
            .map(|k| format!("`{k}`"))
            .chain(
                m.registry_rows
                    .iter()
                    .map(|(s, _)| format!("registry row `{s}`")),
            )
            .collect()
    };
    let refuse = |why: String| {
        Ok(Outcome::Refused(Refused {
            missing: words_of(&missing),
            why,
            primary: false,
        }))
    };
    if let Err(why) = crate::release::repair_basis::rederive_basis(&facts) {
        return refuse(why.join("; "));
    }
    let texts = match derived::texts_for(g, &ws.schema_texts()?, &missing.objects) {
        Ok(t) => t,
        Err(why) => return refuse(why),
    };
    let objects: Vec<(String, String)> = missing
        .objects
        .iter()
        .map(|k| (k.clone(), texts[k].clone()))
        .collect();
    let release = crate::startup::writer_release(g.newest());
    // The release must open the file as it is once everything is back.
    let mut after = ws.startup_facts()?;
    let now = crate::startup::verdict(&after, release);
    for (key, sql) in &objects {
        let (kind, name) = key.split_once(':').unwrap_or(("", key));
        let table = g
            .variants
            .iter()
            .find(|v| v.label == missing.variant)
            .and_then(|v| v.objects.get(key))
            .map_or("", |s| table_of(s));
        after
            .objects
            .push(crate::db::schema::schema_object(kind, name, table, sql));
    }
    after.objects.sort_by(|a, b| a.key.cmp(&b.key));
    if !missing.registry_rows.is_empty() {
        use crate::db::startup::Cell;
        let mut rows = match after.registry.take() {
            Some(Ok(rows)) => rows,
            _ => Vec::new(),
        };
        for (s, v) in &missing.registry_rows {
            rows.push((Cell::Text(s.clone()), Cell::Integer(*v)));
        }
        after.registry = Some(Ok(rows));
    }
    match crate::startup::verdict(&after, release) {
        Some(v) if v.opens && v.migrations.is_empty() => {}
        Some(v) => {
            return refuse(format!(
                "{} would still not open it as it is once they are back: it {}",
                maka(release),
                v.describe()
            ))
        }
        None => return refuse(format!("{} has no start-up model", maka(release))),
    }
    let ledger_damage = if missing.projections().is_empty() {
        None
    } else {
        ledger_damage(report)
    };
    Ok(Outcome::Planned(Plan {
        registry_rows: missing.registry_rows.clone(),
        missing,
        release,
        objects,
        ledger_damage,
        refused_now: now.filter(|v| !v.opens).map(|v| v.describe()),
    }))
}

/// The plan step's words: what was missing, that Maka refused to start, what is put
/// back, that nothing is lost. `(fixes, costs, undo)`.
pub fn step_words(p: &Plan) -> (String, String, String) {
    let what = p.words();
    let fixes = match &p.refused_now {
        Some(_) => format!(
            "{} refused to start on this file because {} derived object(s) were missing; it \
             opens the file again once they are back: {}",
            p.maka(),
            what.len(),
            what.join("; ")
        ),
        None => format!(
            "the schema is {}'s again: {} put back",
            p.maka(),
            what.join("; ")
        ),
    };
    let mut costs = "nothing is lost: each object put back is one Maka derives (its exact text \
                     as the release writes it"
        .to_owned();
    if !p.projections().is_empty() {
        costs.push_str(
            "; the tool projections refilled from the runtime events as Maka's own rebuild \
             fills them",
        );
    }
    if !p.registry_rows.is_empty() {
        costs.push_str("; the registry rows of the release's own versions");
    }
    costs.push_str("); no event, session, message or run header is written or removed");
    if let Some(d) = &p.ledger_damage {
        costs.push_str(&format!(
            "; the projections are rebuilt only after the damage Maka's rebuild stops on \
             ({d}) is excised or set aside, so this step comes after those"
        ));
    }
    let undo = "`wsledger doctor restore <bundle> --apply`, with the rederive bundle from \
                wsledger-quarantine beside the database (it removes what was put back)"
        .to_owned();
    (fixes, costs, undo)
}

/// Registry rows as the registry table holds them: `scope`, `version`, `applied_at`.
pub fn registry_rows(rows: &[(String, i64)], applied_at: i64) -> Vec<crate::bundle::Row> {
    use crate::bundle::{Cell, Row};
    rows.iter()
        .map(|(s, v)| Row {
            columns: vec![
                ("scope".to_owned(), Cell::Text(s.as_bytes().to_vec())),
                ("version".to_owned(), Cell::Integer(*v)),
                ("applied_at".to_owned(), Cell::Integer(applied_at)),
            ],
        })
        .collect()
}

/// The missing objects by kind, for the JSON document: `type:name` → words.
pub fn missing_json(p: &Plan) -> Vec<serde_json::Value> {
    let words = p.words();
    let mut out: Vec<serde_json::Value> = p
        .objects
        .iter()
        .zip(&words)
        .map(|((k, sql), w)| serde_json::json!({"object": k, "what": w, "sql": sql}))
        .collect();
    if out.len() < words.len() {
        out.push(serde_json::json!({"object": null, "what": words[words.len() - 1], "sql": null}));
    }
    out
}
