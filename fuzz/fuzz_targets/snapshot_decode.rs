//! Snapshot files: `parse_header_unverified` and `decode` against a fixed
//! trusted key, then the same header re-signed around the input's body so
//! the body checks are reached; panics when an invariant breaks. The body is
//! a library function that `format`'s unit tests also call.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| blocksieve_format::fuzzing::check_snapshot(data));
