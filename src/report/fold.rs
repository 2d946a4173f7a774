//! Readable tables when one cause produces many findings: a code with many findings
//! shows its first few and, right below them, one row that counts the rest
//! (`--verbose` and the JSON formats list them all).

use std::collections::{BTreeSet, HashMap};

use crate::findings::{Finding, Severity};

/// A code with more findings than this is folded (fewer are listed in full: folding
/// them would hide rows and save next to none).
pub const FOLD_OVER: usize = 10;
/// Rows of a folded code listed before the row that counts the rest.
pub const SHOWN_PER_CODE: usize = 5;

/// The findings of one code that were folded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Folded {
    pub code: &'static str,
    pub severity: Severity,
    pub count: usize,
    /// How many sessions they name.
    pub sessions: usize,
}

impl Folded {
    pub fn line(&self) -> String {
        let across = if self.sessions > 1 {
            format!(" across {} sessions", self.sessions)
        } else {
            String::new()
        };
        format!(
            "{} more `{}` finding(s){across} like the ones above; `--verbose` or \
             `--format json` lists every one",
            self.count, self.code
        )
    }
}

/// One row of the findings table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row<'a> {
    Finding(&'a Finding),
    /// Stands right after the last listed finding of its code.
    Folded(Folded),
}

/// The table's rows, in the findings' order, each folded code's count right after its
/// listed findings. Nothing is folded with `verbose`.
pub fn fold_findings(findings: &[Finding], verbose: bool) -> Vec<Row<'_>> {
    let mut total: HashMap<&str, usize> = HashMap::new();
    if !verbose {
        for f in findings {
            *total.entry(f.code).or_default() += 1;
        }
    }
    let folds = |code: &str| total.get(code).is_some_and(|&n| n > FOLD_OVER);
    // The sessions each folded code's rest names.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut rest_sessions: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for f in findings.iter().filter(|f| folds(f.code)) {
        let n = seen.entry(f.code).or_default();
        *n += 1;
        if *n > SHOWN_PER_CODE {
            let set = rest_sessions.entry(f.code).or_default();
            set.extend(f.session_id.as_deref());
        }
    }
    let mut rows = Vec::new();
    let mut listed: HashMap<&str, usize> = HashMap::new();
    for f in findings {
        if !folds(f.code) {
            rows.push(Row::Finding(f));
            continue;
        }
        let n = listed.entry(f.code).or_default();
        *n += 1;
        if *n > SHOWN_PER_CODE {
            continue;
        }
        rows.push(Row::Finding(f));
        if *n == SHOWN_PER_CODE {
            rows.push(Row::Folded(Folded {
                code: f.code,
                severity: f.severity,
                count: total[f.code] - SHOWN_PER_CODE,
                sessions: rest_sessions.get(f.code).map_or(0, BTreeSet::len),
            }));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(rows: &[Row<'_>]) -> Vec<String> {
        rows.iter()
            .map(|r| match r {
                Row::Finding(f) => f.code.to_owned(),
                Row::Folded(g) => format!("+{}", g.count),
            })
            .collect()
    }

    #[test]
    fn folds_a_code_past_ten_findings_unless_verbose() {
        let mut v: Vec<Finding> = (0..13)
            .map(|i| {
                Finding::new("ordinal_missing", format!("e{i}")).session(format!("s{}", i % 3))
            })
            .collect();
        v.insert(2, Finding::new("ordinal_gap", "g"));
        let rows = fold_findings(&v, false);
        let mut want = vec!["ordinal_missing"; 2];
        want.push("ordinal_gap");
        want.extend(["ordinal_missing"; 3]);
        let mut want: Vec<String> = want.into_iter().map(str::to_owned).collect();
        want.push("+8".into());
        assert_eq!(codes(&rows), want);
        match &rows[6] {
            Row::Folded(g) => assert_eq!((g.code, g.sessions), ("ordinal_missing", 3)),
            other => panic!("{other:?}"),
        }
        assert_eq!(fold_findings(&v, true).len(), 14);
    }

    #[test]
    fn ten_findings_of_one_code_are_all_listed() {
        let v: Vec<Finding> = (0..FOLD_OVER)
            .map(|i| Finding::new("ordinal_missing", format!("e{i}")))
            .collect();
        let rows = fold_findings(&v, false);
        assert_eq!(rows.len(), FOLD_OVER);
        assert!(rows.iter().all(|r| matches!(r, Row::Finding(_))));
    }
}
