//! Payload decoding: `decode_event_text` on any bytes (read as the database layer
//! reads them), and the canonical encoding of whatever decodes.
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::decode(data));
