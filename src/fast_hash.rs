//! Hash maps and sets for the scan's hot lookups, with foldhash instead of the
//! standard SipHash: the walk hashes ids for every event, and foldhash takes about 2%
//! off the scan's instructions on the bench workspace. Its seed is random per process,
//! so a file cannot be written ahead of time to make its keys collide; foldhash
//! promises no more than that. Where a collision would change a verdict, the scan
//! compares 128-bit digests (`hash128`), not these maps' keys.

pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
