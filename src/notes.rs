//! What a command says on stderr while it works: notes and warnings, in the order its
//! steps happen. `cli`'s printer is the one implementation outside tests.

/// A sink for a command's notes and warnings.
pub trait Notes {
    fn note(&mut self, msg: &str);
    fn warn(&mut self, msg: &str);
}
