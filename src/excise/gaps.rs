//! After an excision, `event_seq` and ordinal gaps that an excision bundle explains are
//! `info` findings naming the bundle (`event_seq_gap_excised`, `ordinal_gap_excised`);
//! any other gap stays a warning.
//!
//! The bundles looked at are the excision bundles (`*.excise-*.bundle.json`) in
//! `wsledger-quarantine` beside the database, the directory `doctor excise` and
//! `doctor repair` write to by default. A gap is explained when every value missing
//! from it is a row one of those bundles holds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::bundle::{Bundle, Cell};
use crate::db::{DbError, Workspace};
use crate::findings::Finding;
use crate::scan::ScanReport;

/// What the excision bundles beside a database hold: (key, value) → bundle paths.
#[derive(Debug, Default)]
pub struct ExcisedRows {
    /// (invocation id, event_seq) of excised events.
    pub seqs: BTreeMap<(String, i64), BTreeSet<String>>,
    /// (session id, ordinal) of excised ordinal rows.
    pub ordinals: BTreeMap<(String, i64), BTreeSet<String>>,
}

fn text(c: Option<&Cell>) -> Option<String> {
    c.and_then(Cell::text_lossy)
}

fn int(c: Option<&Cell>) -> Option<i64> {
    match c {
        Some(Cell::Integer(n)) => Some(*n),
        _ => None,
    }
}

impl ExcisedRows {
    /// Adds what one bundle holds.
    pub fn add(&mut self, path: &str, b: &Bundle) {
        for r in b.rows("runtime_events") {
            if let (Some(inv), Some(seq)) = (text(r.get("invocation_id")), int(r.get("event_seq")))
            {
                self.seqs
                    .entry((inv, seq))
                    .or_default()
                    .insert(path.to_owned());
            }
        }
        for r in b.rows("runtime_session_event_ordinals") {
            if let (Some(s), Some(o)) = (text(r.get("session_id")), int(r.get("ordinal"))) {
                self.ordinals
                    .entry((s, o))
                    .or_default()
                    .insert(path.to_owned());
            }
        }
    }

    /// Reads the excision bundles in `dir` (unreadable ones are left out: they
    /// explain nothing).
    pub fn read_dir(dir: &Path) -> ExcisedRows {
        let mut out = ExcisedRows::default();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return out;
        };
        let mut paths: Vec<std::path::PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.contains(".excise-") && n.ends_with(".bundle.json"))
            })
            .collect();
        paths.sort();
        for p in paths {
            let Ok(t) = std::fs::read_to_string(&p) else {
                continue;
            };
            if let Ok(b) = Bundle::from_json_text(&t) {
                if b.kind.as_deref() == Some("excise") {
                    out.add(&p.display().to_string(), &b);
                }
            }
        }
        out
    }

    /// Reads the excision bundles in the default bundle directory beside `db`.
    pub fn beside(db: &Path) -> ExcisedRows {
        ExcisedRows::read_dir(&crate::quarantine::apply::default_out_dir(db))
    }

    fn is_empty(&self) -> bool {
        self.seqs.is_empty() && self.ordinals.is_empty()
    }
}

/// The bundles holding every one of `missing` under `key`, or `None` when one is not
/// in any bundle.
fn explaining(
    rows: &BTreeMap<(String, i64), BTreeSet<String>>,
    key: &str,
    missing: &[i64],
) -> Option<Vec<String>> {
    if missing.is_empty() {
        return None;
    }
    let mut paths = BTreeSet::new();
    for v in missing {
        paths.extend(rows.get(&(key.to_owned(), *v))?.iter().cloned());
    }
    Some(paths.into_iter().collect())
}

/// "was" or "were", for a list of values.
pub(crate) fn were(values: &[i64]) -> &'static str {
    if values.len() == 1 {
        "was"
    } else {
        "were"
    }
}

/// The values, comma-separated.
pub(crate) fn list(values: &[i64]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Turns the gap findings of `report` that the excision bundles beside the database
/// explain into their `info` codes. Reads only when the report has a gap finding.
pub fn explain(ws: &Workspace, report: &mut ScanReport) -> Result<(), DbError> {
    if !report
        .findings
        .iter()
        .any(|f| f.code == "event_seq_gap" || f.code == "ordinal_gap")
    {
        return Ok(());
    }
    let rows = ExcisedRows::beside(ws.path());
    if rows.is_empty() {
        return Ok(());
    }
    let mut changed = false;
    for f in report.findings.iter_mut() {
        let new = match (f.code, &f.event_id, &f.session_id) {
            ("event_seq_gap", Some(e), _) => match ws.missing_event_seqs(e)? {
                Some((inv, missing)) => explaining(&rows.seqs, &inv, &missing).map(|b| {
                    Finding::new(
                        "event_seq_gap_excised",
                        format!(
                            "invocation `{inv}`: event_seq {} {} excised into {}",
                            list(&missing),
                            were(&missing),
                            b.join(", ")
                        ),
                    )
                }),
                None => None,
            },
            ("ordinal_gap", _, Some(s)) => match ws.missing_ordinals(s)? {
                Some(missing) => explaining(&rows.ordinals, s, &missing).map(|b| {
                    Finding::new(
                        "ordinal_gap_excised",
                        format!(
                            "{} {} {} excised into {}",
                            if missing.len() == 1 {
                                "ordinal"
                            } else {
                                "ordinals"
                            },
                            list(&missing),
                            were(&missing),
                            b.join(", ")
                        ),
                    )
                }),
                None => None,
            },
            _ => None,
        };
        if let Some(mut n) = new {
            n.session_id = f.session_id.take();
            n.run_id = f.run_id.take();
            n.event_id = f.event_id.take();
            *f = n;
            changed = true;
        }
    }
    if changed {
        report.recount();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_explained_only_when_every_missing_value_is_in_a_bundle() {
        let mut rows = BTreeMap::new();
        rows.insert(("i".to_owned(), 2), BTreeSet::from(["b1".to_owned()]));
        rows.insert(("i".to_owned(), 3), BTreeSet::from(["b2".to_owned()]));
        assert_eq!(
            explaining(&rows, "i", &[2, 3]),
            Some(vec!["b1".to_owned(), "b2".to_owned()])
        );
        assert_eq!(explaining(&rows, "i", &[2, 4]), None);
        assert_eq!(explaining(&rows, "j", &[2]), None);
        assert_eq!(explaining(&rows, "i", &[]), None);
    }
}
