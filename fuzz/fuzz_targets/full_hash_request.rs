//! The full-hash API's request parsing: the input as a `POST
//! /v1/hashes:search` body and as a `GET /v1/hashes/{prefix}` prefix;
//! panics when an invariant breaks. The body is a library function that the
//! publisher's handler and unit tests also call.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| blocksieve_publisher::internal::fuzzing::check_search_request(data));
