//! Agent tests against a fake publisher on a real socket: one binary, one
//! module per area.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub, dead_code)]

mod check;
mod config;
mod server;
mod update;
