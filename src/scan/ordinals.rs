//! `runtime_session_event_ordinals` reduced for the ordinal check: the sum of the
//! event ids' hashes and the sessions with gaps, and what the ordinal findings read.

use super::EventHasher;
use crate::db::DbError;

/// `runtime_session_event_ordinals`, reduced: the sum of its event ids' hashes, and the
/// sessions whose ordinals are not exactly `1..=count` (`(session, count, max)`).
#[derive(Debug, Default)]
pub struct OrdinalSummary {
    /// Whether the table exists.
    pub present: bool,
    pub sum: u128,
    pub gaps: Vec<(String, i64, i64)>,
}

impl OrdinalSummary {
    /// Folds the rows `each` gives (in primary-key order; it returns whether the table
    /// exists).
    pub fn read(
        hasher: &EventHasher,
        each: impl FnOnce(&mut dyn FnMut(&str, i64, &str)) -> Result<bool, DbError>,
    ) -> Result<OrdinalSummary, DbError> {
        let mut out = OrdinalSummary::default();
        let mut cur: Option<(String, i64, i64, i64)> = None;
        let flush = |c: Option<(String, i64, i64, i64)>, gaps: &mut Vec<(String, i64, i64)>| {
            if let Some((s, count, min, max)) = c {
                if count != max || min != 1 {
                    gaps.push((s, count, max));
                }
            }
        };
        let (sum, gaps) = (&mut out.sum, &mut out.gaps);
        out.present = each(&mut |s, ordinal, event_id| {
            *sum = sum.wrapping_add(hasher.hash(event_id));
            match &mut cur {
                Some((cs, count, min, max)) if cs == s => {
                    *count += 1;
                    *min = (*min).min(ordinal);
                    *max = (*max).max(ordinal);
                }
                _ => {
                    flush(cur.take(), gaps);
                    cur = Some((s.to_owned(), 1, ordinal, ordinal));
                }
            }
        })?;
        flush(cur.take(), &mut out.gaps);
        Ok(out)
    }
}

/// The ordinal findings' inputs.
#[derive(Default)]
pub struct Ordinals {
    pub events_without_ordinal: Vec<(String, String, String)>,
    pub ordinal_gaps: Vec<(String, i64, i64)>,
}
