//! The blocksieve agent: keeps a verified copy of each subscribed threat
//! list's filter and checks URLs against it, Safe Browsing style — locally
//! first, and with the publisher only for the rare prefix hit.
//!
//! Principal types and how data flows between them:
//!
//! 1. [`AgentBuilder`] (from [`Agent::builder`]) validates the publisher URL,
//!    the subscribed lists, the trusted Ed25519 keys and the limits, and
//!    builds an [`Agent`].
//! 2. [`Agent::update`] downloads each list's snapshot with a conditional
//!    `GET /v1/lists/{list}/snapshot` (stopping at
//!    [`AgentBuilder::max_snapshot_bytes`]), verifies it with
//!    [`blocksieve_format::decode`] into a
//!    [`VerifiedSnapshot`](blocksieve_format::VerifiedSnapshot), rejects a
//!    snapshot of another list or one not newer than the current one, and
//!    swaps it in atomically. Anything bad leaves the current filter in
//!    place; the [`UpdateReport`] says, per list, what happened
//!    ([`ListUpdate`]).
//! 3. [`Agent::check_url`] canonicalizes the URL, hashes its expressions,
//!    probes the filters ([`Agent::lookup_local`] gives this
//!    [`LocalLookup`] without the network), asks `GET /v1/hashes/{prefix}`
//!    once per distinct prefix that hit, and returns a [`Verdict`]: unsafe
//!    only when a returned full hash equals one of the URL's.
//! 4. [`Agent::stats`] reports counters ([`Stats`]); every failure is one
//!    [`Error`], whose [`ErrorKind`] says what to do next.
//!
//! Readers never block: filters live behind `arc_swap`, so a check sees
//! either the old snapshot or the new one, never a half-updated filter.

mod agent;
mod config;
mod error;
mod http;
mod lookup;
mod stats;
mod update;

pub use agent::Agent;
pub use config::{
    AgentBuilder, DEFAULT_MAX_SNAPSHOT_BYTES, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SNAPSHOT_TIMEOUT,
    MAX_SNAPSHOT_BYTES_LIMIT,
};
pub use error::{Error, ErrorKind};
pub use lookup::{LocalLookup, PrefixHit, Verdict};
pub use stats::Stats;
pub use update::{ListUpdate, UpdateReport};
