//! Feed parsing: the first byte picks the source format (urls, hosts,
//! domains, adblock-hosts, csv, json, sha256), the rest is the feed given to
//! `parse_source`; panics when an invariant breaks. The body is a library
//! function that the publisher's unit tests also call.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| blocksieve_publisher::internal::fuzzing::check_feed(data));
