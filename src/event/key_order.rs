//! The sorted order of a fixed key table, for the in-place decoder.
//!
//! Maka writes every payload object with its keys sorted (`JSON.stringify` of a value
//! whose keys were sorted). Finding each key by trying every name of its table cost
//! about a hundred instructions a key on the bench workspace (an envelope has sixteen
//! candidate names, a context budget ninety-one). Reading an object's keys in sorted
//! order instead, each key is looked for from just after the previous one: over a
//! whole object every name is tried about once. A key found nowhere after the previous
//! one (an object not in Maka's order, a repeated or unknown key) is looked for in the
//! whole table, so the order only saves time: it never changes what is found. Pure.

/// Largest table an order takes (the reader's `seen` bits are a `u128`).
pub(crate) const MAX_NAMES: usize = 128;

/// The indexes of a table's names, sorted by name (bytes, which for the ASCII names of
/// Maka's tables is JavaScript's code-unit order), and each index's place in it.
pub(crate) struct KeyOrder {
    sorted: [u8; MAX_NAMES],
    place: [u8; MAX_NAMES],
    len: usize,
}

impl KeyOrder {
    /// The order of `names`; more than [`MAX_NAMES`] fail to compile.
    pub(crate) const fn new(names: &[&str]) -> KeyOrder {
        assert!(names.len() <= MAX_NAMES, "too many names for a key order");
        let mut sorted = [0u8; MAX_NAMES];
        // Insertion sort: tables are small and this runs at compile time.
        let mut n = 0;
        while n < names.len() {
            let mut j = n;
            while j > 0
                && before(
                    names[n].as_bytes(),
                    names[sorted[j - 1] as usize].as_bytes(),
                )
            {
                sorted[j] = sorted[j - 1];
                j -= 1;
            }
            sorted[j] = n as u8;
            n += 1;
        }
        let mut place = [0u8; MAX_NAMES];
        let mut p = 0;
        while p < names.len() {
            place[sorted[p] as usize] = p as u8;
            p += 1;
        }
        KeyOrder {
            sorted,
            place,
            len: names.len(),
        }
    }

    /// The table index at sorted place `p`, if any.
    #[inline]
    pub(crate) fn at(&self, p: usize) -> Option<usize> {
        (p < self.len).then(|| usize::from(self.sorted[p]))
    }

    /// The sorted place of table index `k`.
    #[inline]
    pub(crate) fn place(&self, k: usize) -> usize {
        usize::from(self.place[k])
    }
}

/// Whether `a` sorts strictly before `b`, byte by byte.
const fn before(a: &[u8], b: &[u8]) -> bool {
    let mut i = 0;
    while i < a.len() && i < b.len() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
        i += 1;
    }
    a.len() < b.len()
}

#[cfg(test)]
mod tests {
    use super::{KeyOrder, MAX_NAMES};

    fn check(names: &[&str]) {
        let order = KeyOrder::new(names);
        let mut by_hand: Vec<usize> = (0..names.len()).collect();
        by_hand.sort_by_key(|&k| names[k]);
        let sorted: Vec<usize> = (0..).map_while(|p| order.at(p)).collect();
        assert_eq!(sorted, by_hand, "{names:?}");
        for (p, &k) in sorted.iter().enumerate() {
            assert_eq!(order.place(k), p);
        }
    }

    #[test]
    fn names_are_in_byte_order_and_each_knows_its_place() {
        check(&[]);
        check(&["b", "a"]);
        check(&["id", "invocationId", "i", "runId", "Z", "ab", "a"]);
        use crate::event::decode::{ACTION_KEYS, ENVELOPE_KEYS, REF_KEYS};
        check(&ENVELOPE_KEYS);
        check(&ACTION_KEYS);
        check(&REF_KEYS);
        let many: Vec<String> = (0..MAX_NAMES).rev().map(|i| format!("k{i}")).collect();
        check(&many.iter().map(String::as_str).collect::<Vec<_>>());
    }
}
