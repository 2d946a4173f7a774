//! A keyed 128-bit hash (XXH3-128 with a per-process random secret), for the scan's
//! fingerprints and digests.
//!
//! Two values that differ collide by chance with probability about 2^-128, XXH3-128's
//! design figure. The secret is drawn at random for each process, so a file cannot be
//! written ahead of time to collide. XXH3 is not a cryptographic MAC, so that rests on
//! the secret staying unknown, not on a proof; a collision could only hide a
//! difference (a projection row that looks right), never invent one. It replaced
//! SipHash-1-3, whose hashing was about a twelfth of a scan's instructions on the
//! bench workspace.

use std::hash::{BuildHasher, Hash, Hasher};

use std::cell::RefCell;

use xxhash_rust::xxh3::xxh3_128_with_secret;

/// XXH3's secret size (its default secret's, which the streaming form needs).
const SECRET: usize = 192;

#[derive(Clone, Debug)]
pub struct Keyed128 {
    secret: [u8; SECRET],
}

impl Keyed128 {
    /// A fresh random secret (from the standard library's per-process random state).
    pub fn random() -> Keyed128 {
        let s = std::collections::hash_map::RandomState::new();
        let mut secret = [0u8; SECRET];
        for (i, chunk) in secret.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&s.hash_one(i).to_le_bytes());
        }
        Keyed128 { secret }
    }

    pub fn hash<T: Hash + ?Sized>(&self, v: &T) -> u128 {
        let one = |buf: &mut Vec<u8>| {
            buf.clear();
            v.hash(&mut Gather(buf));
            let h = xxh3_128_with_secret(buf, &self.secret);
            // A rare long value (a large `metadata_json`) is not kept for the thread's life.
            if buf.capacity() > KEEP {
                *buf = Vec::new();
            }
            h
        };
        // A hash taken while another is being gathered on this thread (no `Hash`
        // here does that) gets a buffer of its own.
        GATHERED.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => one(&mut buf),
            Err(_) => one(&mut Vec::new()),
        })
    }
}

/// The most of the gathering buffer kept between hashes (ids and projection rows are
/// well under it).
const KEEP: usize = 64 << 10;

thread_local! {
    /// The bytes of the value being hashed, reused from one hash to the next.
    static GATHERED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Gathers the bytes a value's `Hash` writes, in however many pieces, for one call
/// of XXH3. A value writes many small pieces (a string and its terminator, each tuple
/// field, each length), and XXH3 of a byte stream does not depend on how it was
/// split, so gathering them changes no hash.
struct Gather<'b>(&'b mut Vec<u8>);

impl Hasher for Gather<'_> {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        // Not what `Keyed128` returns (it hashes the bytes with its secret); a `Hash`
        // impl never asks, but a `Hasher` must answer.
        xxhash_rust::xxh3::xxh3_64(self.0)
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
    fn a_value_hashes_as_the_bytes_it_writes() {
        let k = Keyed128::random();
        // A tuple writes each string's bytes then 0xff, and an integer its
        // native-endian bytes: the hash is XXH3 of that stream, whatever its length
        // (XXH3 has separate paths up to 16, 128 and 240 bytes, and beyond).
        for n in [
            0usize, 1, 15, 16, 17, 127, 128, 129, 239, 240, 241, 1000, 5000,
        ] {
            let s: String = (0..n).map(|j| char::from(b'a' + (j % 26) as u8)).collect();
            let mut stream = s.as_bytes().to_vec();
            stream.push(0xff);
            stream.extend_from_slice(&7u64.to_ne_bytes());
            assert_eq!(
                k.hash(&(s.as_str(), 7u64)),
                xxh3_128_with_secret(&stream, &k.secret),
                "{n}"
            );
        }
    }

    #[test]
    fn reusing_the_buffer_leaves_no_bytes_behind() {
        let k = Keyed128::random();
        let long = "a value long enough to leave bytes in the buffer, were it not cleared";
        let first = k.hash(long);
        assert_eq!(k.hash("x"), xxh3_128_with_secret(b"x\xff", &k.secret));
        assert_eq!(k.hash(long), first);
    }

    #[test]
    fn a_huge_value_hashes_the_same_and_its_buffer_is_not_kept() {
        let k = Keyed128::random();
        let huge = vec![3u8; 4 * KEEP];
        let mut stream = huge.clone();
        // A slice writes its length first (native-endian `usize`), then its bytes.
        let mut with_len = huge.len().to_ne_bytes().to_vec();
        with_len.append(&mut stream);
        assert_eq!(
            k.hash(&huge[..]),
            xxh3_128_with_secret(&with_len, &k.secret)
        );
        GATHERED.with(|cell| assert!(cell.borrow().capacity() <= KEEP));
        assert_eq!(k.hash(&huge[..]), k.hash(&huge[..]));
    }

    #[test]
    fn long_values_depend_on_the_secret_and_on_every_byte() {
        let a = Keyed128::random();
        let b = Keyed128::random();
        let long = vec![7u8; 3000];
        let mut other = long.clone();
        other[2005] = 8;
        assert_ne!(a.hash(&long), b.hash(&long));
        assert_ne!(a.hash(&long), a.hash(&other));
        assert_eq!(a.hash(&long), a.hash(&long.clone()));
    }
}
