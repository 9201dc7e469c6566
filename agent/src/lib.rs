//! The blocksieve agent: keeps a verified copy of each subscribed threat
//! list's filter and checks URLs against it, Safe Browsing style — locally
//! first, and with the publisher only for the rare prefix hit. Built to be
//! embedded: it never blocks its host's lookups, never trusts a download it
//! has not verified, keeps protecting from its last good (or cached)
//! snapshot when the network or the publisher fails, and sends the
//! publisher as little as possible about what the user visits.
//!
//! Principal types and how data flows between them:
//!
//! 1. [`AgentBuilder`] (from [`Agent::builder`]) validates the settings —
//!    base URLs, lists, trusted Ed25519 keys, cache directory, limits,
//!    privacy and [`FailurePolicy`] — and builds an [`Agent`]. The agent
//!    composes two components: the **lists** (each list's snapshot and its
//!    update round: download, [`engine::accept`], persistence, swap) and the
//!    **confirmation** (full hashes: cache, single flight, backoff, the
//!    immutable buckets of the versions held or `POST /v1/hashes:search`). The lists load any snapshots cached in the
//!    cache directory, so that the agent answers before the network is
//!    reached.
//! 2. [`Agent::start_updates`] runs one background task ([`UpdateHandle`])
//!    that, on the [`engine::schedule`] timetable, has the lists follow
//!    each list by signed additions-only deltas since the version held
//!    ([`engine::delta`]: a `304` and a signed freshness record when nothing
//!    changed), and take the whole snapshot with a conditional GET at
//!    first, when the deltas are refused or unavailable, and once the
//!    additions pass [`AgentBuilder::max_additions_ratio`]; only an
//!    [`AcceptedSnapshot`](engine::accept::AcceptedSnapshot) — signature,
//!    limits, list name, version floor checked — and verified deltas over
//!    it are persisted and swapped in; an expired one is used, flagged
//!    stale, rather than an older one or none. [`Agent::update`] does one
//!    round by hand ([`UpdateReport`]).
//! 3. [`Agent::check_urls`] (and [`Agent::check_url`]) probes the lists'
//!    filters ([`Agent::lookup_local`] gives this [`LocalLookup`] without
//!    the network), has the confirmation answer the hits' request prefixes
//!    ([`engine::prefix`], [`engine::cache`]) and returns a [`Verdict`]:
//!    unsafe only when a returned full hash equals one of the URL's,
//!    unverified when the full hashes cannot be had.
//! 4. [`Agent::status`] reports each list's version, age, expiry, staleness
//!    and errors ([`Status`]), the [`ClockSkew`] to the publisher, and the
//!    counters ([`Stats`]); every failure is one [`Error`], whose
//!    [`ErrorKind`] says what to do next.
//!
//! The decisions live in [`engine`], a sans-I/O module that takes bytes, the
//! time and an RNG and returns what to do; the components are a thin tokio,
//! reqwest and file-system layer around it. Readers never block: filters
//! live behind `arc_swap`, so a check sees either the old snapshot or the
//! new one, never a half-updated filter.

mod agent;
mod config;
mod confirm;
mod http;
mod lists;
mod shared;
mod stats;
mod status;
mod store;
mod update;
mod updater;

pub use agent::Agent;
/// The agent's decisions without I/O: the `blocksieve-engine` crate, which
/// the C, Python and WASM bindings wrap too.
pub use blocksieve_engine as engine;
pub use blocksieve_engine::{Error, ErrorKind};
pub use config::{
    AgentBuilder, DEFAULT_FULL_HASH_CACHE_BYTES, DEFAULT_MAX_ADDITIONS_RATIO, DEFAULT_MAX_SNAPSHOT_BYTES,
    DEFAULT_NOISE_PREFIXES, DEFAULT_POOL_IDLE_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_SNAPSHOT_TIMEOUT,
    DEFAULT_UPDATE_INTERVAL, MAX_ADDITIONS_RATIO_LIMIT, MAX_BASE_URLS, MAX_FULL_HASH_CACHE_BYTES,
    MAX_NOISE_PREFIXES, MAX_SNAPSHOT_BYTES_LIMIT, SystemClock, TimeProvider,
};
pub use engine::clock::ClockSkew;
pub use engine::lookup::{FailurePolicy, LocalLookup, PrefixHit, SnapshotVersions, Verdict};
pub use stats::{Stats, UpdateFailures};
pub use status::{ListStatus, SnapshotSource, Status};
pub use update::{ListUpdate, UpdateReport};
pub use updater::UpdateHandle;
