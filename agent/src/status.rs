//! What [`Agent::status`](crate::Agent::status) reports.

use std::time::{Duration, SystemTime};

use crate::Error;
use crate::engine::clock::ClockSkew;
use crate::stats::Stats;

/// The agent's health: every list's snapshot and update state, and the
/// counters.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Status {
    /// One entry per subscribed list, in subscription order.
    pub lists: Vec<ListStatus>,
    /// The counters, as [`Agent::stats`](crate::Agent::stats) returns them.
    pub stats: Stats,
    /// Whether the background update task is running.
    pub updates_running: bool,
    /// How long full-hash requests are still paused after failures (see
    /// [`engine::schedule`](crate::engine::schedule)), if they are.
    pub full_hash_paused_for: Option<Duration>,
    /// How far this agent's clock is from the publisher's, from the `Date`
    /// header of the latest snapshot or full-hash response; `None` within
    /// [`CLOCK_SKEW_THRESHOLD`](crate::engine::clock::CLOCK_SKEW_THRESHOLD)
    /// (one minute), before any response, or when the clock has been set
    /// since that response (see [`engine::clock`](crate::engine::clock)). A
    /// clock ahead makes fresh snapshots look expired — they are used,
    /// [`stale`](ListStatus::stale) — and a clock behind makes expired ones
    /// look fresh. Reported only: `Date` is not signed, so it never decides
    /// freshness.
    pub clock_skew: Option<ClockSkew>,
}

impl Status {
    /// The status of `list`, if the agent subscribes to it.
    pub fn list(&self, name: &str) -> Option<&ListStatus> {
        self.lists.iter().find(|l| l.name == name)
    }

    /// Whether every list has a snapshot, so that every URL check can
    /// answer (until then only a URL the lists loaded confirm unsafe is).
    pub fn is_ready(&self) -> bool {
        self.lists.iter().all(|l| l.version.is_some())
    }

    /// Whether any list's snapshot in use has expired (by this agent's
    /// clock, now).
    pub fn is_stale(&self) -> bool {
        self.lists.iter().any(|l| l.stale)
    }
}

/// Where the list's state in use came from: its last change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotSource {
    /// Downloaded from the publisher by this agent: a snapshot, or deltas
    /// over a base from either source.
    Network,
    /// Loaded from the cache directory at start (a snapshot and the deltas
    /// saved with it), with nothing downloaded since.
    Cache,
}

/// The state of one subscribed list.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct ListStatus {
    /// The list name.
    pub name: String,
    /// The version the list's state stands for — its base snapshot's, or
    /// that of the last delta applied to it — or `None` without one.
    pub version: Option<u64>,
    /// The version of the whole snapshot the state stands on (the base):
    /// equal to [`ListStatus::version`] until deltas are applied.
    pub base_version: Option<u64>,
    /// How many 32-bit hash prefixes the deltas applied since the base
    /// have added (held exactly, 4 bytes each, until the next rebase).
    pub additions: usize,
    /// When the base snapshot was built (signed `created_at`).
    pub created_at: Option<SystemTime>,
    /// Until when the state is fresh: the latest signed `expires_at` of the
    /// base snapshot, the deltas applied and the freshness records naming
    /// exactly the version held.
    pub expires_at: Option<SystemTime>,
    /// How old the snapshot in use is: now − `created_at` (zero if the
    /// clock is behind the publisher's).
    pub age: Option<Duration>,
    /// Whether the snapshot in use has expired by this agent's clock, now:
    /// it expired while in use, was loaded expired from the cache directory,
    /// or had already expired when downloaded (see
    /// [`Status::clock_skew`] for a clock running ahead). It is still used —
    /// an old list still blocks old threats, no list blocks nothing — but
    /// every verdict based on it is marked stale as well. A newer snapshot,
    /// or the clock put right, makes it fresh again.
    pub stale: bool,
    /// Where the snapshot in use came from.
    pub source: Option<SnapshotSource>,
    /// The version floor: no snapshot older than this is accepted, even
    /// after a restart if a cache directory is configured.
    pub version_floor: Option<u64>,
    /// When an update of this list last succeeded (new snapshot or
    /// unchanged).
    pub last_success: Option<SystemTime>,
    /// When the background updates ([`Agent::start_updates`](crate::Agent::start_updates))
    /// check this list next, by this agent's clock: the publisher's
    /// next-check hint, a backoff after a failure, or the initial jitter
    /// ([`engine::schedule`](crate::engine::schedule)). As last scheduled:
    /// `None` before the updates first ran, and no longer meant once they
    /// stop ([`Status::updates_running`]).
    pub next_check: Option<SystemTime>,
    /// The error of the last update attempt, if it failed.
    pub last_error: Option<Error>,
    /// Update attempts failed in a row; 0 after a success.
    pub consecutive_failures: u32,
    /// The last cache-directory problem for this list: a write that failed,
    /// or a file quarantined at start.
    pub last_storage_error: Option<Error>,
    /// Why the last update round that asked for deltas took the whole
    /// snapshot instead (`410`, `404`, or a delta that did not verify or
    /// link), or asked for it again without `If-None-Match` (a `304` whose
    /// signed freshness record named a newer version), if one did.
    pub last_delta_error: Option<Error>,
}
