//! Byte-level damage for the tests that check a fast path against an exact one: each
//! call deletes, inserts or replaces one byte of a text (the inserted and replacing
//! bytes are JSON's structural ones, digits and a few letters), from a fixed seed so a
//! failure comes back the same.

/// A seeded source of one-byte mutations (xorshift64).
pub(crate) struct Mutator {
    seed: u64,
}

impl Mutator {
    const BYTES: &'static [u8] = b"{}[]\",:\\ 0123456789eE+-.tfnul\t\nabz";

    pub(crate) fn new(seed: u64) -> Mutator {
        Mutator { seed: seed.max(1) }
    }

    fn next(&mut self) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed
    }

    /// `text` with one byte deleted, inserted or replaced; `None` when the result is
    /// not UTF-8 (or `text` is empty and the draw was not an insertion).
    pub(crate) fn mutate(&mut self, text: &str) -> Option<String> {
        let mut b = text.as_bytes().to_vec();
        let at = (self.next() as usize) % b.len().max(1);
        let byte = Self::BYTES[(self.next() as usize) % Self::BYTES.len()];
        match self.next() % 3 {
            0 if !b.is_empty() => {
                b.remove(at);
            }
            1 => b.insert(at.min(b.len()), byte),
            _ if !b.is_empty() => b[at] = byte,
            _ => return None,
        }
        String::from_utf8(b).ok()
    }
}
