//! `doctor rederive` from plan to rescan: the plan's document, the rows the projections
//! are refilled with, and the apply (through [`crate::apply`]) that writes and reads
//! back its bundle, then puts everything back in one transaction. `doctor repair` runs
//! the same write ([`RederiveWrite`]) as one of its steps.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::rebuild::{numbered, rebuild};
use super::{maka, missing_json, plan_on, registry_rows, step_words, Outcome, Plan};
use crate::apply::{apply, Step, Target, WriteOptions, WritingCommand};
use crate::bundle::{Bundle, Row, SchemaInfo};
use crate::db::derived::RederiveSet;
use crate::db::write::Writer;
use crate::db::{DbError, Workspace};
use crate::error::UserError;
use crate::notes::Notes;
use crate::quarantine::apply::default_out_dir;
use crate::quarantine::files::{check_out_dir, make_out_dir, write_bundle, WrittenFiles};
use crate::scan::{scan_workspace, ScanOptions};

/// What the registry holds, as `doctor rederive` names the table.
const REGISTRY: &str = "operational_schema_migrations";

/// The write of a plan, read at the plan's snapshot.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub set: RederiveSet,
    /// The schema the file has once everything is back (what the bundle records).
    pub schema: SchemaInfo,
    /// Registry scopes added to a registry table that stays.
    pub registry_scopes: Vec<String>,
}

impl Prepared {
    /// Rows written per table.
    pub fn counts(&self) -> Map<String, Value> {
        self.set
            .rows
            .iter()
            .map(|(t, r)| (t.clone(), Value::from(r.len())))
            .collect()
    }
}

/// Reads what the write of `plan` needs on `ws` (the plan's snapshot): the projections
/// rebuilt from the ledger and checked against a projection table that stays, the
/// registry rows stamped `now`. `Ok(Err(why))` when it cannot be exact.
pub fn prepare(ws: &Workspace, plan: &Plan, now: i64) -> Result<Result<Prepared, String>, DbError> {
    let g = plan.missing.generation;
    let mut set = RederiveSet {
        missing: plan.missing.objects.clone(),
        objects: plan.objects.clone(),
        ..RederiveSet::default()
    };
    let missing = plan.projections();
    if !missing.is_empty() {
        if let Some(d) = &plan.ledger_damage {
            return Ok(Err(format!(
                "the ledger holds damage Maka's rebuild of the tool projections stops on \
                 ({d}): excise it first (`wsledger doctor repair` does, in that order)"
            )));
        }
        let rebuilt = match rebuild(ws, &g.rules())? {
            Ok(r) => r,
            Err(why) => return Ok(Err(why)),
        };
        for (table, rows) in [
            ("tool_operations", &rebuilt.operations),
            ("tool_journal_events", &rebuilt.journal),
        ] {
            if missing.contains(&table) {
                let rows = if table == "tool_journal_events" {
                    let seq = ws.sequence_of(table)?;
                    set.sequences.push((table.to_owned(), seq));
                    numbered(rows, seq.unwrap_or(0))
                } else {
                    rows.clone()
                };
                set.rows.push((table.to_owned(), rows));
                continue;
            }
            // The projection that stays must be what the rebuild gives (the missing
            // one is filled to match it).
            let have = ws.table_rows(table)?;
            let strip = |r: &Row| {
                let mut c: Vec<_> = r
                    .columns
                    .iter()
                    .filter(|(n, _)| n != "journal_seq")
                    .cloned()
                    .collect();
                c.sort_by(|a, b| a.0.cmp(&b.0));
                format!("{c:?}")
            };
            let mut a: Vec<String> = have.iter().map(strip).collect();
            let mut b: Vec<String> = rows.iter().map(strip).collect();
            a.sort();
            b.sort();
            if a != b {
                return Ok(Err(format!(
                    "`{table}` holds rows that differ from what the runtime events give \
                     ({} stored, {} derived): the missing projection cannot be derived to \
                     match it",
                    have.len(),
                    rows.len()
                )));
            }
            set.kept.push((table.to_owned(), have));
        }
        set.ledger = Some(ws.ledger_fingerprint()?);
    }
    let mut registry_scopes = Vec::new();
    if !plan.registry_rows.is_empty() {
        if !plan.missing.registry_table() {
            set.kept
                .push((REGISTRY.to_owned(), ws.table_rows(REGISTRY)?));
            registry_scopes = plan.registry_rows.iter().map(|(s, _)| s.clone()).collect();
        }
        set.rows
            .push((REGISTRY.to_owned(), registry_rows(&plan.registry_rows, now)));
    }
    Ok(Ok(Prepared {
        set,
        schema: SchemaInfo {
            user_version: g.user_version,
            registry: g.registry.clone(),
            capabilities: g.capabilities.clone(),
        },
        registry_scopes,
    }))
}

/// A plan made on the file as it is now, and its write or why it cannot be exact.
pub type PlanOnFile = (Plan, Result<Prepared, String>);

/// Plans and prepares on the file as it is now (one snapshot): what `doctor repair`
/// does after its excision and quarantine.
pub fn prepare_path(db: &Path, now: i64) -> Result<Option<PlanOnFile>, UserError> {
    Ok(Workspace::read(db, |ws| {
        let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        match plan_on(ws, &report)? {
            Outcome::Planned(p) => {
                let prepared = prepare(ws, &p, now)?;
                Ok(Some((p, prepared)))
            }
            _ => Ok(None),
        }
    })?)
}

/// The bundle file of a rederive at `now`.
pub fn bundle_name(now: i64) -> String {
    format!("rederive-{}.bundle.json", crate::db::backup::utc_stamp(now))
}

/// Plans `doctor rederive` on `db` (named `shown`), and with `req.apply` carries it out;
/// returns the document it prints.
pub fn run(db: &Path, req: &WriteOptions, notes: &mut dyn Notes) -> Result<Value, UserError> {
    crate::apply::refuse_newer(db, req.apply, notes)?;
    let shown = db.display().to_string();
    let (startup, outcome, prepared, binding) = Workspace::read(db, |ws| {
        let report = scan_workspace(ws, ScanOptions::default(), &mut |_, _| {})?;
        let outcome = plan_on(ws, &report)?;
        let prepared = match &outcome {
            Outcome::Planned(p) => Some(prepare(ws, p, req.now)?),
            _ => None,
        };
        let startup = report.startup.as_ref().map(|s| s.line());
        Ok((startup, outcome, prepared, ws.root_binding()?))
    })?;
    let out_dir = req.out.clone().unwrap_or_else(|| default_out_dir(db));
    let bundle = out_dir.join(bundle_name(req.now));
    let mut doc = json!({
        "schema_version": 1,
        "command": "rederive",
        "workspace": shown,
        "applied": false,
        "backup": null,
        "bundle": null,
        "startup": startup,
        "release": null,
        "missing": [],
        "rows": {},
        "fixes": null,
        "costs": null,
        "apply_refusal": null,
        "after": null,
    });
    let plan = match &outcome {
        Outcome::Nothing => {
            notes.note("nothing Maka derives is missing: nothing to put back");
            return Ok(doc);
        }
        Outcome::Refused(r) => {
            doc["missing"] = json!(r
                .missing
                .iter()
                .map(|m| json!({"object": m, "what": m, "sql": null}))
                .collect::<Vec<_>>());
            let advice = refused_advice(r.primary);
            doc["apply_refusal"] = json!(format!("{}; {advice}", r.why));
            if req.apply {
                return Err(UserError::new(
                    format!("`{}`: nothing was put back: {}", db.display(), r.why),
                    advice,
                ));
            }
            notes.note(&format!(
                "dry run: nothing was written; --apply would refuse this file: {}",
                r.why
            ));
            return Ok(doc);
        }
        Outcome::Planned(p) => p,
    };
    let (fixes, costs, _) = step_words(plan);
    doc["release"] = json!(plan.release);
    doc["missing"] = json!(missing_json(plan));
    doc["fixes"] = json!(fixes);
    doc["costs"] = json!(costs);
    let prepared = match prepared.unwrap_or_else(|| Err("nothing was prepared".to_owned())) {
        Ok(p) => p,
        Err(why) => {
            doc["apply_refusal"] = json!(why);
            if req.apply {
                return Err(UserError::new(
                    format!("`{}`: nothing was put back: {why}", db.display()),
                    "run `wsledger doctor repair` to see the whole plan",
                ));
            }
            notes.note(&format!(
                "dry run: nothing was written; --apply would refuse this file: {why}"
            ));
            return Ok(doc);
        }
    };
    doc["rows"] = Value::Object(prepared.counts());
    if !req.apply {
        notes.note(&format!(
            "dry run: nothing was written; run again with --apply to put back what {} derives",
            maka(plan.release)
        ));
        return Ok(doc);
    }
    let target = Target::new(db, binding.as_deref(), None, req.backup, req.now);
    let mut write = RederiveWrite::new(plan.clone(), Some(prepared), &out_dir, bundle, req.now);
    let applied = apply(&target, &mut write, notes)?;
    doc["applied"] = json!(true);
    doc["backup"] = json!(applied.backup);
    doc["bundle"] = json!(write.bundle.display().to_string());
    let after = applied.after.startup.as_ref();
    doc["after"] = json!({
        "startup": after.map(|s| s.line()),
        "startup_opens": after.map(|s| s.opens),
    });
    if let Some(s) = after {
        notes.note(&s.line());
    }
    Ok(doc)
}

/// What to do when what is missing cannot be put back.
pub fn refused_advice(primary: bool) -> &'static str {
    if primary {
        "keep the file as it is (take a copy) and restore a backup made before the loss: no \
         tool can derive those rows again; report it with the output of `wsledger info`"
    } else {
        "keep the file as it is (take a copy), restore a backup made before the change if \
         there is one, and report it with the output of `wsledger info`"
    }
}

/// A rederive's part of an apply: the bundle directory checked (before the lock) and
/// made (under it), then the bundle written and read back, and everything put back in
/// one transaction. `prepared` is `None` when the write is prepared on the file as the
/// earlier steps of `doctor repair` left it.
pub struct RederiveWrite<'a> {
    pub plan: Plan,
    pub prepared: Option<Prepared>,
    pub out_dir: &'a Path,
    pub bundle: PathBuf,
    pub now: i64,
    /// Set once everything is back.
    pub done: bool,
}

impl<'a> RederiveWrite<'a> {
    pub fn new(
        plan: Plan,
        prepared: Option<Prepared>,
        out_dir: &'a Path,
        bundle: PathBuf,
        now: i64,
    ) -> RederiveWrite<'a> {
        RederiveWrite {
            plan,
            prepared,
            out_dir,
            bundle,
            now,
            done: false,
        }
    }

    /// Writes the bundle, then puts everything back (the bundle goes again if the
    /// transaction does not commit). Returns the words of what was put back.
    pub fn write_on(&mut self, writer: &Writer, notes: &mut dyn Notes) -> Result<(), UserError> {
        let (plan, prepared) = match self.prepared.take() {
            Some(p) => (self.plan.clone(), p),
            None => match prepare_path(writer.path(), self.now)? {
                Some((plan, Ok(p))) => (plan, p),
                Some((_, Err(why))) => {
                    return Err(UserError::new(
                        format!(
                            "`{}`: the missing derived objects cannot be put back: {why}",
                            writer.path().display()
                        ),
                        "run `wsledger doctor repair` again to see the plan",
                    ))
                }
                None => return Ok(()),
            },
        };
        let meta = json!({
            "release": plan.release,
            "objects": plan.objects.iter().map(|(k, sql)| json!({"object": k, "sql": sql})).collect::<Vec<_>>(),
            "registry_scopes": prepared.registry_scopes,
            "rederived_at_ms": self.now,
            "tool": "wsledger doctor rederive",
            "version": env!("CARGO_PKG_VERSION"),
        });
        let bundle = Bundle {
            session_id: String::new(),
            schema: prepared.schema.clone(),
            tables: prepared.set.rows.clone(),
            quarantine: None,
            kind: Some("rederive".into()),
            excise: None,
            rederive: Some(meta),
        };
        let mut written = WrittenFiles::default();
        write_bundle(
            &self.bundle,
            &bundle,
            &mut written,
            "nothing was put back",
            false,
        )?;
        if let Err(e) = writer.rederive(&prepared.set) {
            written.remove();
            return Err(UserError::new(e.to_string(), e.hint()));
        }
        self.plan = plan.clone();
        self.done = true;
        notes.note(&format!(
            "put back {} derived object(s){}; bundle: {}",
            plan.objects.len(),
            if plan.registry_rows.is_empty() {
                String::new()
            } else {
                format!(" and {} registry row(s)", plan.registry_rows.len())
            },
            self.bundle.display()
        ));
        Ok(())
    }
}

impl WritingCommand for RederiveWrite<'_> {
    type Staged = crate::quarantine::files::MadeDirs;
    type Written = ();

    fn check(&mut self) -> Result<(), UserError> {
        check_out_dir(self.out_dir)
    }

    fn stage(&mut self, _writer: &Writer) -> Result<Self::Staged, UserError> {
        make_out_dir(self.out_dir)
    }

    fn write(&mut self, step: Step<'_>, mut made: Self::Staged) -> Result<(), UserError> {
        self.write_on(step.writer, step.notes)?;
        made.keep();
        Ok(())
    }
}
