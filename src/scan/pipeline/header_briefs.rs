//! Every decodable run header read once and reduced ([`HeaderBrief`]), sorted by a
//! key that follows the walk's lookup order.

use super::exclusion::Exclusion;
use crate::db::{DbError, Workspace};
use crate::scan::HeaderBrief;
/// Every decodable run header, reduced ([`HeaderBrief`]), sorted by a 128-bit key of
/// `(session, run)` ([`HeaderBriefs::key`]). Memory: 48 bytes per run header (and the
/// failure class and abort source where a header has one). A sorted vector, not a
/// hash map: at 500k runs the map's buckets were half empty (25 MB).
pub(super) struct HeaderBriefs {
    hasher: crate::hash128::Keyed128,
    pub(super) sorted: Vec<(u128, HeaderBrief)>,
}

impl HeaderBriefs {
    /// The run id's first eight bytes, then 64 bits of a keyed hash of the pair. A
    /// root run's id is its invocation's, and the walk closes runs in invocation order:
    /// sorted this way, the briefs are in about the order they are looked up, so that
    /// one lookup's binary search reads what the one before it brought into the
    /// cache. With keys sorted by the hash alone, each of 500k lookups missed the cache
    /// about twenty times (a second of a 5M-event scan, on the walk's thread). Two
    /// pairs share a key only if they share the prefix and the hash.
    fn key(&self, s: &str, r: &str) -> u128 {
        let mut prefix = [0u8; 8];
        let n = r.len().min(8);
        prefix[..n].copy_from_slice(&r.as_bytes()[..n]);
        let hash = self.hasher.hash(&(s, r)) as u64;
        u128::from(u64::from_be_bytes(prefix)) << 64 | u128::from(hash)
    }

    pub(super) fn get(&self, s: &str, r: &str) -> Option<&HeaderBrief> {
        Some(&self.sorted[self.position(s, r)?].1)
    }

    pub(super) fn position(&self, s: &str, r: &str) -> Option<usize> {
        let k = self.key(s, r);
        self.sorted.binary_search_by_key(&k, |e| e.0).ok()
    }

    /// Sorts what was pushed, in place (a stable sort would take half the vector
    /// again: 12 MB at 500k runs). A key pushed more than once (two header rows for one
    /// run: only in a damaged file) keeps no brief, so its run is looked up in the
    /// table like any run without one.
    fn seal(&mut self) {
        self.sorted.sort_unstable_by_key(|e| e.0);
        let mut kept = 0;
        let mut i = 0;
        while i < self.sorted.len() {
            let key = self.sorted[i].0;
            let mut end = i + 1;
            while end < self.sorted.len() && self.sorted[end].0 == key {
                end += 1;
            }
            if end == i + 1 {
                self.sorted.swap(kept, i);
                kept += 1;
            }
            i = end;
        }
        self.sorted.truncate(kept);
    }
}
/// Reads and decodes every run header once. Not for an after-scan (`None`). A header
/// that does not decode, or whose keys are not UTF-8 text, is left out (its run is then
/// looked up as before).
pub(super) fn read_briefs(
    ws: &Workspace,
    has_headers: bool,
    gone: &Exclusion,
    rules: &crate::release::rules::HeaderRules,
) -> Result<Option<HeaderBriefs>, DbError> {
    if !gone.sessions.is_empty() || !has_headers {
        return Ok(None);
    }
    let mut b = HeaderBriefs {
        hasher: crate::hash128::Keyed128::random(),
        // Sized once: no transient doubling while it fills.
        sorted: Vec::with_capacity(ws.count_rows("core_agent_runs")? as usize),
    };
    ws.for_each_header_row(|row, keys_ok| {
        if !keys_ok {
            return;
        }
        let (rec, s, r) = (&*row.record_json, &*row.session_id, &*row.run_id);
        let brief = match crate::header::header_facts_plainly(rec, s, r, rules) {
            Some(facts) => HeaderBrief::from_facts(facts),
            None => crate::header::decode_header_as(rec, s, r, rules)
                .ok()
                .and_then(|h| HeaderBrief::new(&h)),
        };
        if let Some(brief) = brief {
            b.sorted.push((b.key(s, r), brief));
        }
    })?;
    b.seal();
    Ok(Some(b))
}

#[cfg(test)]
mod tests {
    use super::HeaderBriefs;
    use crate::header::{HeaderStatus, RunHeader};
    use crate::scan::HeaderBrief;

    fn brief(turn: &str) -> HeaderBrief {
        HeaderBrief::new(&RunHeader {
            run_id: "r".into(),
            session_id: "s".into(),
            turn_id: turn.into(),
            invocation_id: None,
            status: HeaderStatus::Completed,
            created_at: 0.0,
            updated_at: 0.0,
            completed_at: None,
            failure_class: None,
            abort_source: None,
            tool_mode: None,
            trace_write_error: None,
            record: serde_json::Map::new(),
        })
        .unwrap()
    }

    #[test]
    fn sealed_briefs_are_sorted_and_a_repeated_run_keeps_none() {
        let mut b = HeaderBriefs {
            hasher: crate::hash128::Keyed128::random(),
            sorted: Vec::new(),
        };
        let runs: Vec<String> = (0..50).map(|i| format!("run-{i}")).collect();
        for (i, r) in runs.iter().enumerate() {
            let k = b.key("s", r);
            b.sorted.push((k, brief(&format!("turn-{i}"))));
            // Every seventh run has a second header row (a damaged file).
            if i % 7 == 3 {
                b.sorted.push((k, brief("other")));
            }
        }
        b.seal();
        assert!(b.sorted.windows(2).all(|w| w[0].0 < w[1].0));
        for (i, r) in runs.iter().enumerate() {
            match b.get("s", r) {
                Some(got) => {
                    assert_ne!(i % 7, 3, "{r}");
                    assert_eq!(got.turn_id(), format!("turn-{i}"));
                }
                None => assert_eq!(i % 7, 3, "{r}"),
            }
        }
        assert_eq!(b.sorted.len(), 50 - 7);
    }
}
