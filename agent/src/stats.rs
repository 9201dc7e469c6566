//! Counters of what the agent has done since it was built.

use std::sync::atomic::{AtomicU64, Ordering};

use blocksieve_format::DecodeError;

use crate::Error;

/// A point-in-time copy of the agent's counters; see
/// [`Agent::stats`](crate::Agent::stats).
///
/// The URL counters describe [`Agent::check_url`](crate::Agent::check_url)
/// and [`Agent::check_urls`](crate::Agent::check_urls) only
/// ([`Agent::lookup_local`](crate::Agent::lookup_local) is a diagnostic
/// and is not counted). Every URL check with a prefix hit ends as exactly one
/// of confirmed unsafe, false prefix hit or unverified, so
/// `confirmed_unsafe + false_prefix_hits + unverified == prefix_hits`. A
/// URL checked again after an update (a check refused as
/// `prefix_too_short`, see [`Agent::check_urls`](crate::Agent::check_urls))
/// is counted in each pass.
/// While a list has no snapshot, URLs are probed against the others and
/// counted as such: their hits end as above, but only a confirmed one is
/// answered (unsafe); the others are [`Error::NotReady`](crate::Error::NotReady).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Valid URLs checked against the local filters (at least one list's).
    pub lookups: u64,
    /// URL checks in which at least one expression's hash prefix hit a
    /// local filter.
    pub prefix_hits: u64,
    /// Full-hash requests made, one per chunk of at most 1,000 prefixes
    /// (noise included), failed ones included: by `POST /v1/hashes:search`,
    /// or by GETs of the immutable full-hash buckets
    /// ([`Stats::immutable_bucket_requests`]).
    pub full_hash_requests: u64,
    /// Of [`Stats::full_hash_requests`], those answered by GETs of the
    /// immutable full-hash buckets of the snapshot versions held
    /// (`GET /v1/lists/{name}/hashes/{version}/{prefix}`, one per list and
    /// prefix), without a `POST`. The rest were sent by `POST`.
    pub immutable_bucket_requests: u64,
    /// Of [`Stats::full_hash_requests`], those whose bucket GETs did not
    /// all succeed (`404 version_gone`, `503 behind`, a transport or answer
    /// failure on every base URL) and that were then sent by `POST` with
    /// the versions held.
    pub immutable_bucket_fallbacks: u64,
    /// Full-hash requests that failed (transport, HTTP status, bad answer:
    /// one that does not parse, or leaves a prefix asked about without a
    /// readable result).
    pub full_hash_failures: u64,
    /// Request prefixes answered from the full-hash cache, without a
    /// request.
    pub cache_hits: u64,
    /// Request prefixes answered by another check's request already in
    /// flight (single flight), without a request of their own.
    pub coalesced: u64,
    /// URL checks whose prefix hit was confirmed by a matching full hash:
    /// verdict unsafe.
    pub confirmed_unsafe: u64,
    /// URL checks whose prefix hits were all refuted by the full hashes:
    /// filter false positives or prefix collisions, verdict safe (or
    /// `NotReady` while a list has no snapshot).
    pub false_prefix_hits: u64,
    /// URL checks with a prefix hit whose full hashes could not be obtained:
    /// verdict unverified (or `NotReady` while a list has no snapshot, or
    /// when one got its snapshot during the check).
    pub unverified: u64,
    /// Full hashes in answers that were ignored because they do not start
    /// with the prefix they were listed under (or are not hashes).
    pub ignored_full_hashes: u64,
    /// Snapshots verified and swapped in from the network.
    pub snapshots_applied: u64,
    /// Of [`Stats::snapshots_applied`], those that had already expired by
    /// this agent's clock when downloaded — a publisher whose builds have
    /// stopped, a frozen feed, or a clock running ahead (see
    /// [`Status::clock_skew`](crate::Status::clock_skew)). Newer than the
    /// snapshot they replaced, they are used, flagged stale.
    pub expired_snapshots_applied: u64,
    /// Snapshots loaded from the cache directory at start.
    pub snapshots_loaded_from_cache: u64,
    /// Of [`Stats::snapshots_loaded_from_cache`], those that had expired:
    /// used, flagged stale, until a newer one arrives.
    pub expired_snapshots_loaded_from_cache: u64,
    /// Per-list update attempts that failed (the filter was kept); by reason
    /// in [`Stats::update_failures_by`].
    pub update_failures: u64,
    /// [`Stats::update_failures`] by reason.
    pub update_failures_by: UpdateFailures,
    /// Cache files found corrupt (or rolled back) and quarantined.
    pub cache_files_quarantined: u64,
    /// Accepted snapshots that could not be written to the cache directory
    /// (they are in use all the same).
    pub persist_failures: u64,
    /// Deltas verified and applied (each delta of a chain counts).
    pub deltas_applied: u64,
    /// Bytes of the delta chains applied, as downloaded.
    pub delta_bytes: u64,
    /// Update rounds that asked for deltas and took the whole snapshot
    /// instead: `410 no_delta`, a `404` from a publisher without the
    /// update route, or a delta or chain that did not verify or link; and
    /// `304`s whose signed freshness record named a newer version than the
    /// one held, so the snapshot was asked for again without `If-None-Match`
    /// (the reason is in [`ListStatus::last_delta_error`](crate::ListStatus::last_delta_error)).
    pub delta_fallbacks: u64,
    /// Signed freshness records that named exactly the version held and
    /// extended its freshness.
    pub freshness_records_applied: u64,
    /// Whole snapshots swapped in over a state with deltas applied: the
    /// additions passed `max_additions_ratio`, or the deltas fell back.
    pub rebases: u64,
}

impl Stats {
    /// The empirical false-positive rate per URL check: false prefix hits
    /// divided by lookups (0 before the first lookup). With a BinaryFuse8
    /// filter (2^-8 per probe) and about ten expressions per URL, expect
    /// about 4 %; a much higher rate means the filter is not the one the
    /// header describes, or the lists and the full-hash buckets disagree.
    pub fn false_prefix_hit_rate(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.false_prefix_hits as f64 / self.lookups as f64
        }
    }
}

/// Failed update attempts by reason; each failure counts once, under the
/// reason of the error reported for it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateFailures {
    /// The request could not be sent or the connection failed.
    pub transport: u64,
    /// The request hit its timeout (including a body dripping too slowly).
    pub timeout: u64,
    /// The publisher answered an HTTP error status (e.g. 5xx, 429, 404).
    pub http_status: u64,
    /// The body was larger than the limit, or the header declares a body or
    /// filter larger than the limits.
    pub too_large: u64,
    /// The snapshot is malformed: truncated, trailing bytes, body hash or
    /// compression or layout wrong; or the response broke the protocol.
    pub malformed: u64,
    /// Signed by a key the agent does not trust.
    pub unknown_key: u64,
    /// The signature does not verify.
    pub bad_signature: u64,
    /// A snapshot of another list.
    pub wrong_list: u64,
    /// Older than the version floor, or the same version with another body.
    pub rollback: u64,
    /// Anything else.
    pub other: u64,
}

/// The live counters behind [`UpdateFailures`].
#[derive(Debug, Default)]
struct FailureCounters {
    transport: AtomicU64,
    timeout: AtomicU64,
    http_status: AtomicU64,
    too_large: AtomicU64,
    malformed: AtomicU64,
    unknown_key: AtomicU64,
    bad_signature: AtomicU64,
    wrong_list: AtomicU64,
    rollback: AtomicU64,
    other: AtomicU64,
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) lookups: AtomicU64,
    pub(crate) prefix_hits: AtomicU64,
    pub(crate) full_hash_requests: AtomicU64,
    pub(crate) immutable_bucket_requests: AtomicU64,
    pub(crate) immutable_bucket_fallbacks: AtomicU64,
    pub(crate) full_hash_failures: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
    pub(crate) coalesced: AtomicU64,
    pub(crate) confirmed_unsafe: AtomicU64,
    pub(crate) false_prefix_hits: AtomicU64,
    pub(crate) unverified: AtomicU64,
    pub(crate) ignored_full_hashes: AtomicU64,
    pub(crate) snapshots_applied: AtomicU64,
    pub(crate) expired_snapshots_applied: AtomicU64,
    pub(crate) snapshots_loaded_from_cache: AtomicU64,
    pub(crate) expired_snapshots_loaded_from_cache: AtomicU64,
    pub(crate) update_failures: AtomicU64,
    pub(crate) cache_files_quarantined: AtomicU64,
    pub(crate) persist_failures: AtomicU64,
    pub(crate) deltas_applied: AtomicU64,
    pub(crate) delta_bytes: AtomicU64,
    pub(crate) delta_fallbacks: AtomicU64,
    pub(crate) freshness_records_applied: AtomicU64,
    pub(crate) rebases: AtomicU64,
    failures: FailureCounters,
}

impl Counters {
    /// Adds one to `counter`. Relaxed ordering: the counters are statistics,
    /// not synchronisation.
    pub(crate) fn bump(counter: &AtomicU64) {
        Self::add(counter, 1);
    }

    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a failed update attempt under the reason of `error`.
    pub(crate) fn update_failed(&self, error: &Error) {
        Self::bump(&self.update_failures);
        let f = &self.failures;
        let counter = match error {
            Error::Transport { timed_out: true, .. } => &f.timeout,
            Error::Transport { .. } => &f.transport,
            Error::Status { .. } => &f.http_status,
            Error::ResponseTooLarge { .. } => &f.too_large,
            Error::UnexpectedResponse { .. } => &f.malformed,
            Error::WrongList { .. } => &f.wrong_list,
            Error::Rollback { .. } => &f.rollback,
            Error::Decode { reason, .. } => match reason {
                DecodeError::UnknownKey { .. } => &f.unknown_key,
                DecodeError::BadSignature => &f.bad_signature,
                // Not a rejection the agent makes: an expired snapshot is
                // accepted, stale (`engine::accept`).
                DecodeError::Expired { .. } => &f.other,
                DecodeError::BodyTooLarge { .. }
                | DecodeError::DecompressedTooLarge { .. }
                | DecodeError::TooManyEntries { .. } => &f.too_large,
                _ => &f.malformed,
            },
            _ => &f.other,
        };
        Self::bump(counter);
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let f = &self.failures;
        Stats {
            lookups: get(&self.lookups),
            prefix_hits: get(&self.prefix_hits),
            full_hash_requests: get(&self.full_hash_requests),
            immutable_bucket_requests: get(&self.immutable_bucket_requests),
            immutable_bucket_fallbacks: get(&self.immutable_bucket_fallbacks),
            full_hash_failures: get(&self.full_hash_failures),
            cache_hits: get(&self.cache_hits),
            coalesced: get(&self.coalesced),
            confirmed_unsafe: get(&self.confirmed_unsafe),
            false_prefix_hits: get(&self.false_prefix_hits),
            unverified: get(&self.unverified),
            ignored_full_hashes: get(&self.ignored_full_hashes),
            snapshots_applied: get(&self.snapshots_applied),
            expired_snapshots_applied: get(&self.expired_snapshots_applied),
            snapshots_loaded_from_cache: get(&self.snapshots_loaded_from_cache),
            expired_snapshots_loaded_from_cache: get(&self.expired_snapshots_loaded_from_cache),
            update_failures: get(&self.update_failures),
            update_failures_by: UpdateFailures {
                transport: get(&f.transport),
                timeout: get(&f.timeout),
                http_status: get(&f.http_status),
                too_large: get(&f.too_large),
                malformed: get(&f.malformed),
                unknown_key: get(&f.unknown_key),
                bad_signature: get(&f.bad_signature),
                wrong_list: get(&f.wrong_list),
                rollback: get(&f.rollback),
                other: get(&f.other),
            },
            cache_files_quarantined: get(&self.cache_files_quarantined),
            persist_failures: get(&self.persist_failures),
            deltas_applied: get(&self.deltas_applied),
            delta_bytes: get(&self.delta_bytes),
            delta_fallbacks: get(&self.delta_fallbacks),
            freshness_records_applied: get(&self.freshness_records_applied),
            rebases: get(&self.rebases),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_counted_by_reason() {
        let c = Counters::default();
        c.update_failed(&Error::Transport {
            url: "u".into(),
            reason: "r".into(),
            timed_out: true,
        });
        c.update_failed(&Error::Decode {
            list: "l".into(),
            reason: DecodeError::BodyLength {
                declared: 1,
                actual: 2,
            },
        });
        c.update_failed(&Error::Rollback {
            list: "l".into(),
            trusted_version: 2,
            new_version: 1,
        });
        let s = c.snapshot();
        assert_eq!(s.update_failures, 3);
        assert_eq!(
            (
                s.update_failures_by.timeout,
                s.update_failures_by.malformed,
                s.update_failures_by.rollback
            ),
            (1, 1, 1)
        );
        assert_eq!(s.update_failures_by.transport, 0);
    }

    #[test]
    fn false_prefix_hit_rate_is_per_lookup() {
        let s = Stats {
            lookups: 200,
            false_prefix_hits: 5,
            ..Stats::default()
        };
        assert!((s.false_prefix_hit_rate() - 0.025).abs() < 1e-12);
        assert!(Stats::default().false_prefix_hit_rate().abs() < f64::EPSILON);
    }
}
