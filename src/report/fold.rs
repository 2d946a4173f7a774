//! Readable tables when one cause produces many findings: past a few rows of one
//! code, the rest are folded into one line that counts them (`--verbose` and the JSON
//! list them all).

use crate::findings::{Finding, Severity};

/// Rows of one code shown before the rest are folded.
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
            "{} more `{}` finding(s){across}, not listed here; see them all with \
             `--verbose` or `--format json`",
            self.count, self.code
        )
    }
}

/// The findings to list, in order, and the folded rest by code (in order of first
/// appearance). Nothing is folded with `verbose`.
pub fn fold_findings(findings: &[Finding], verbose: bool) -> (Vec<&Finding>, Vec<Folded>) {
    if verbose {
        return (findings.iter().collect(), Vec::new());
    }
    let mut seen: Vec<(&'static str, usize)> = Vec::new();
    let mut shown = Vec::new();
    let mut folded: Vec<(Folded, std::collections::BTreeSet<&str>)> = Vec::new();
    for f in findings {
        let n = match seen.iter_mut().find(|(c, _)| *c == f.code) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                seen.push((f.code, 1));
                1
            }
        };
        if n <= SHOWN_PER_CODE {
            shown.push(f);
            continue;
        }
        let i = match folded.iter().position(|(g, _)| g.code == f.code) {
            Some(i) => i,
            None => {
                folded.push((
                    Folded {
                        code: f.code,
                        severity: f.severity,
                        count: 0,
                        sessions: 0,
                    },
                    Default::default(),
                ));
                folded.len() - 1
            }
        };
        let (g, sessions) = &mut folded[i];
        g.count += 1;
        if let Some(s) = &f.session_id {
            sessions.insert(s.as_str());
        }
        g.sessions = sessions.len();
    }
    (shown, folded.into_iter().map(|(g, _)| g).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_past_five_of_one_code_unless_verbose() {
        let mut v: Vec<Finding> = (0..8)
            .map(|i| {
                Finding::new("ordinal_missing", format!("e{i}")).session(format!("s{}", i % 3))
            })
            .collect();
        v.push(Finding::new("ordinal_gap", "g"));
        let (shown, folded) = fold_findings(&v, false);
        assert_eq!(shown.len(), 6);
        assert_eq!(folded.len(), 1);
        assert_eq!((folded[0].count, folded[0].sessions), (3, 3));
        let (shown, folded) = fold_findings(&v, true);
        assert_eq!((shown.len(), folded.len()), (9, 0));
    }
}
