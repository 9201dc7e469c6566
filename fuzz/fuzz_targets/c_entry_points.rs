//! The C ABI's entry points that parse caller input — the URL functions,
//! snapshot verification and `blocksieve_agent_new`'s config — a
//! session's handling of the publisher's responses, and its restoring of a
//! list from stored bytes, called as a C host calls them, with arbitrary
//! bytes; panics when one returns `BLOCKSIEVE_PANIC` or breaks its buffer
//! contract. The body is a library function that `bindings/c`'s tests also
//! call.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| blocksieve::fuzzing::entry_points(data));
