//! The agent's decisions, without I/O: the sans-I/O core.
//!
//! Everything here takes bytes, the current time (`now`, a [`SystemTime`]
//! the caller reads from its clock) and, where randomness is involved, an RNG
//! the caller passes in — and returns a value that says what to do next. No
//! function here opens a socket, reads a file, reads a clock or sleeps, so the
//! tokio/reqwest/filesystem layer of [`Agent`](crate::Agent) stays thin, later
//! C and WASM bindings can reuse the same rules, and tests drive every
//! decision with fixed times and seeded RNGs.
//!
//! | module | decides |
//! |---|---|
//! | [`accept`] | whether downloaded or cached snapshot bytes may replace the filter in use: [`blocksieve_format::decode_ignoring_expiry`] (signature, limits, layout), list name, and the persisted [`VersionFloor`](accept::VersionFloor) against rollback — expiry only marks a snapshot stale; how the floor is persisted ([`ListRecord`](accept::ListRecord)) |
//! | [`clock`] | how far this agent's clock is from the publisher's ([`ClockSkew`](clock::ClockSkew)), from the `Date` of its responses, for the status only |
//! | [`schedule`] | when to check for the next snapshot: initial jitter, the publisher's next-check hint, exponential backoff with full jitter after failures, `Retry-After` |
//! | [`prefix`] | which hash prefixes a full-hash request carries: the shortened [`RequestPrefix`](prefix::RequestPrefix)es of the real hits plus shuffled noise, in chunks |
//! | [`cache`] | how long a full-hash answer may be reused ([`FullHashCache`](cache::FullHashCache), Safe Browsing v5 semantics: per requested prefix, misses included) and which answers to keep within the cache's byte budget ([`ListedHashes`](cache::ListedHashes), least recently used evicted first) |
//! | [`lookup`] | which expressions of a URL hit the local filters ([`LocalLookup`](lookup::LocalLookup)) and the [`Verdict`](lookup::Verdict) once the full hashes are known |
//!
//! Two clocks appear: wall-clock `now` ([`SystemTime`]) for everything
//! compared with signed Unix times (snapshot expiry) or server-given
//! durations that must survive a process pause (cache and backoff
//! deadlines); plain [`Duration`](std::time::Duration)s for "wait this long",
//! which the runtime sleeps on its monotonic clock ([`clock`] also takes a
//! monotonic `Instant`, to tell a clock that was set from time passing).
//! Wall-clock values that run backwards are treated as "the deadline has
//! passed", never as "wait longer".
//!
//! [`SystemTime`]: std::time::SystemTime

pub mod accept;
pub mod cache;
pub mod clock;
pub mod lookup;
pub mod prefix;
pub mod schedule;

use std::time::{SystemTime, UNIX_EPOCH};

/// `now` as Unix seconds, the unit of snapshot headers. A clock before 1970
/// is wrong; it reads as 0, which rejects nothing extra.
pub(crate) fn unix_seconds(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Unix seconds as a [`SystemTime`], saturating at a far future the
/// platform can represent.
pub(crate) fn from_unix_seconds(seconds: u64) -> SystemTime {
    use std::time::Duration;
    UNIX_EPOCH
        .checked_add(Duration::from_secs(seconds))
        .or_else(|| UNIX_EPOCH.checked_add(Duration::from_secs(1 << 32)))
        .unwrap_or(UNIX_EPOCH)
}
