//! Agent tests against fake publishers on real sockets (127.0.0.1:0), from
//! `blocksieve_tests::fake`: one binary, one module per area.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub, dead_code)]

mod background;
mod behind;
mod cache_lock;
mod chain_end;
mod check;
mod clock;
mod config;
mod crash;
mod deltas;
mod faults;
mod kept_chain;
mod not_served;
mod persistence;
mod privacy;
mod readers;
mod redirects;
mod trust;
mod update;
