//! Counters of what the agent has done since it was built.

use std::sync::atomic::{AtomicU64, Ordering};

/// A point-in-time copy of the agent's counters; see
/// [`Agent::stats`](crate::Agent::stats).
///
/// The URL counters describe [`Agent::check_url`](crate::Agent::check_url)
/// only ([`Agent::lookup_local`](crate::Agent::lookup_local) is a diagnostic
/// and is not counted). Every URL check with a prefix hit that completes ends
/// as either confirmed unsafe or a false prefix hit, so
/// `confirmed_unsafe + false_prefix_hits <= prefix_hits`; the difference is
/// checks whose full-hash request failed.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Valid URLs checked against the local filters.
    pub lookups: u64,
    /// URL checks in which at least one expression's hash prefix hit a
    /// local filter.
    pub prefix_hits: u64,
    /// Full-hash requests sent (`GET /v1/hashes/{prefix}`), failed ones
    /// included.
    pub full_hash_requests: u64,
    /// URL checks whose prefix hit was confirmed by a matching full hash:
    /// verdict unsafe.
    pub confirmed_unsafe: u64,
    /// URL checks whose prefix hits were all refuted by the full hashes:
    /// filter false positives or prefix collisions, verdict safe.
    pub false_prefix_hits: u64,
    /// Snapshots verified and swapped in.
    pub snapshots_applied: u64,
    /// Per-list update attempts that failed (the filter was kept).
    pub update_failures: u64,
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) lookups: AtomicU64,
    pub(crate) prefix_hits: AtomicU64,
    pub(crate) full_hash_requests: AtomicU64,
    pub(crate) confirmed_unsafe: AtomicU64,
    pub(crate) false_prefix_hits: AtomicU64,
    pub(crate) snapshots_applied: AtomicU64,
    pub(crate) update_failures: AtomicU64,
}

impl Counters {
    /// Adds one to `counter`. Relaxed ordering: the counters are statistics,
    /// not synchronisation.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            lookups: get(&self.lookups),
            prefix_hits: get(&self.prefix_hits),
            full_hash_requests: get(&self.full_hash_requests),
            confirmed_unsafe: get(&self.confirmed_unsafe),
            false_prefix_hits: get(&self.false_prefix_hits),
            snapshots_applied: get(&self.snapshots_applied),
            update_failures: get(&self.update_failures),
        }
    }
}
