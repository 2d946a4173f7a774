//! A keyed 128-bit hash (SipHash-1-3 with a per-process random key), for the scan's
//! fingerprints and digests: two values that differ collide with probability about
//! 2^-128, and nobody who cannot read the process's memory can aim for a collision.

use std::hash::{BuildHasher, Hash};

use siphasher::sip128::{Hasher128, SipHasher13};

#[derive(Clone, Debug)]
pub struct Keyed128 {
    k0: u64,
    k1: u64,
}

impl Keyed128 {
    /// A fresh random key (from the standard library's per-process random state).
    pub fn random() -> Keyed128 {
        let s = std::collections::hash_map::RandomState::new();
        Keyed128 {
            k0: s.hash_one(0u8),
            k1: s.hash_one(1u8),
        }
    }

    pub fn hash<T: Hash + ?Sized>(&self, v: &T) -> u128 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        v.hash(&mut h);
        h.finish128().as_u128()
    }
}

impl Default for Keyed128 {
    fn default() -> Self {
        Keyed128::random()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_key_same_hash_and_keys_differ() {
        let a = Keyed128::random();
        let b = Keyed128::random();
        assert_eq!(a.hash("x"), a.hash("x"));
        assert_ne!(a.hash("x"), a.hash("y"));
        assert_ne!(a.hash("x"), b.hash("x"));
        // Tuples hash their parts with lengths: no ambiguity between splits.
        assert_ne!(a.hash(&("ab", "c")), a.hash(&("a", "bc")));
    }
}
