//! Runs the example binaries against the fake publisher of
//! `blocksieve_tests::fake` on 127.0.0.1:0: one binary, one module per
//! example.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub, dead_code)]

mod check;
mod embed;
mod support;
