//! Helpers for blocksieve's tests: a real publisher on 127.0.0.1:0 over
//! real files ([`RunningPublisher`]), and paths to the fixtures; a fault
//! proxy to put in front of it ([`fault`]); a fake publisher whose every
//! answer the test sets, recording the requests it sees, and a raw TCP
//! server for answers no HTTP framework gives ([`fake`]); signed test
//! snapshots and the fixed keys ([`snapshot`]); clocks for agents
//! ([`clock`]) and agents for the fakes ([`agents`]); a real S3 API server
//! for the object-store tests ([`moto`]), and the contract every storage
//! backend of the publisher keeps ([`storage_contract`]); a seeded
//! churn generator for threat lists ([`churn`]); a child process killed
//! when the test lets go of it ([`KillOnDrop`]); a `serve` process, its
//! log, signals and a source that holds a build open ([`process`], Unix).
//!
//! The fake publisher and the test snapshots use only the wire format
//! (`blocksieve-format`): they stand in for the publisher.

pub mod agents;
pub mod browser_forms;
mod child;
pub mod churn;
pub mod clock;
pub mod fake;
pub mod fault;
pub mod feed;
pub mod feed_check;
mod fixtures;
mod machine;
pub mod moto;
#[cfg(unix)]
pub mod process;
pub mod raw;
mod running;
pub mod snapshot;
pub mod storage_contract;

pub use child::KillOnDrop;
pub use fixtures::{append_line, fixture_feed, fixture_lines, fixture_source, fixtures};
pub use machine::{heavy_test_lock, open_files_limit, vm_rss_bytes};
pub use running::{RunningPublisher, config, reopen, until};
