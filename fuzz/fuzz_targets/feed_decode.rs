//! Feed content as received: decompressed by its magic number (gzip,
//! bzip2, xz, zstd), then an archive's one file (tar, zip) or the content
//! itself, as a build reads it; panics when an invariant breaks. The body
//! is a library function that the publisher's unit tests also call.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| blocksieve_publisher::internal::fuzzing::check_content_decode(data));
