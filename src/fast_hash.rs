//! Hash maps and sets for the scan's hot lookups, with foldhash instead of the
//! standard SipHash: the walk hashes ids for every event, and foldhash takes about 2%
//! off the scan's instructions on the bench workspace. The seed is random per process
//! (foldhash's `RandomState`), so a workspace cannot be written to make its keys
//! collide.

pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
