//! The canonical tool-arguments hash on parsed arguments, and on their text where it is
//! hashed as written.
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::args_hash(data));
