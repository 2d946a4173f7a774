//! A keyed 128-bit hash (SipHash-1-3 with a per-process random key), for the scan's
//! fingerprints and digests: two values that differ collide with probability about
//! 2^-128, and nobody who cannot read the process's memory can aim for a collision.

use std::hash::{BuildHasher, Hash, Hasher};

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
        let mut h = Gathered {
            sip: SipHasher13::new_with_keys(self.k0, self.k1),
            buf: [0; GATHER],
            len: 0,
        };
        v.hash(&mut h);
        h.flush();
        h.sip.finish128().as_u128()
    }
}

/// Bytes gathered before they are given to SipHash.
const GATHER: usize = 256;

/// SipHash fed in large pieces. A value's `Hash` writes many small pieces (a string
/// and its terminator, each tuple field, each length), and SipHash's per-write cost
/// was a third of the scan's hashing; SipHash of a byte stream does not depend on how
/// the stream is split into writes, so gathering them changes no hash.
struct Gathered {
    sip: SipHasher13,
    buf: [u8; GATHER],
    len: usize,
}

impl Gathered {
    fn flush(&mut self) {
        self.sip.write(&self.buf[..self.len]);
        self.len = 0;
    }
}

impl Hasher for Gathered {
    fn write(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > GATHER {
            self.flush();
            if bytes.len() > GATHER {
                self.sip.write(bytes);
                return;
            }
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn finish(&self) -> u64 {
        let mut sip = self.sip;
        sip.write(&self.buf[..self.len]);
        sip.finish()
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

    #[test]
    fn gathering_writes_changes_no_hash() {
        let k = Keyed128::random();
        let sip = |bytes: &[u8]| {
            let mut h = SipHasher13::new_with_keys(k.k0, k.k1);
            h.write(bytes);
            h.finish128().as_u128()
        };
        // Pieces that fill the buffer exactly, overflow it, and exceed it alone.
        for sizes in [
            &[3usize, 5][..],
            &[GATHER],
            &[GATHER - 1, 2],
            &[10, GATHER + 7, 1],
        ] {
            let mut stream = Vec::new();
            let mut g = Gathered {
                sip: SipHasher13::new_with_keys(k.k0, k.k1),
                buf: [0; GATHER],
                len: 0,
            };
            for (i, &n) in sizes.iter().enumerate() {
                let piece: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8).collect();
                g.write(&piece);
                stream.extend_from_slice(&piece);
            }
            assert_eq!(g.finish(), {
                let mut h = SipHasher13::new_with_keys(k.k0, k.k1);
                h.write(&stream);
                h.finish()
            });
            g.flush();
            assert_eq!(g.sip.finish128().as_u128(), sip(&stream), "{sizes:?}");
        }
    }
}
