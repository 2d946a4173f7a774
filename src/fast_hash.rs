//! Hash maps and sets for the scan's hot lookups, with foldhash instead of the
//! standard SipHash: the walk hashes ids for every event, and foldhash takes about 2%
//! off the scan's instructions on the bench workspace. Its seed is random per process,
//! so a file cannot be written ahead of time to make its keys collide; foldhash
//! promises no more than that (SipHash stays where a collision would change a verdict:
//! the 128-bit digests of `hash128`).

pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
