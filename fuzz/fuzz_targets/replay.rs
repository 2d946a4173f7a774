//! Replay's fold over a fuzzed session bundle (what `replay --bundle` reads).
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::replay(data));
