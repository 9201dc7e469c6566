//! `canonicalize` + `expressions` + `full_hash` on arbitrary bytes; panics
//! when an invariant breaks. The body is a library function that
//! `format`'s unit and property tests also call.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| blocksieve_format::fuzzing::check_canonicalize(data));
