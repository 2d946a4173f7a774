//! The whole scan over a fuzzed event list (one payload per line).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::scan(data));
