//! The binary full-hash answer's decoder on arbitrary bytes (what an agent
//! reads from an untrusted publisher); panics when an invariant breaks. The
//! body is a library function that `format`'s unit tests also call.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| blocksieve_format::fuzzing::check_full_hash_answer(data));
