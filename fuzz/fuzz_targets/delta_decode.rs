//! Deltas, delta chains and freshness records: decoding against a fixed
//! trusted key, then the input's delta header re-signed around its body so
//! the Rice decoder is reached; panics when an invariant breaks. The body
//! is a library function that `format`'s unit tests also call.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| blocksieve_format::fuzzing::check_delta(data));
