//! What the two protocol components — the lists ([`crate::lists`]) and the
//! confirmation ([`crate::confirm`]) — share, handed to each when the agent
//! is built: the HTTP client and base URLs, the wall clock, the RNG, the
//! counters, and the publisher's clock as its responses tell it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime};

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::TimeProvider;
use crate::engine::clock::{ClockSkew, SkewSample};
use crate::stats::Counters;

/// Locks `mutex`, ignoring poisoning: every critical section here leaves the
/// data consistent, and a panic elsewhere must not take lookups down.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The monotonic clock for [`SkewSample`]: tokio's, so that it agrees with
/// the update timetable (and with a paused clock in tests).
fn monotonic_now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The runtime both components use; one per agent, behind an `Arc`.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The one HTTP client: it pools connections across requests.
    pub(crate) client: reqwest::Client,
    /// The publisher's base URLs, in the order they are tried; never empty.
    pub(crate) base_urls: Vec<String>,
    /// Every counter of [`Agent::stats`](crate::Agent::stats).
    pub(crate) counters: Counters,
    /// Where the wall-clock time is read: snapshot expiry, staleness, cache
    /// and backoff deadlines.
    time: Arc<dyn TimeProvider>,
    /// The publisher's clock from the `Date` of its latest response, for
    /// [`Status::clock_skew`](crate::Status::clock_skew): only reported,
    /// never used to decide freshness.
    publisher_clock: Mutex<Option<SkewSample>>,
    /// Noise prefixes, shuffling, jitter. Seeded from the OS.
    rng: Mutex<StdRng>,
}

impl Shared {
    pub(crate) fn new(client: reqwest::Client, base_urls: Vec<String>, time: Arc<dyn TimeProvider>) -> Self {
        Self {
            client,
            base_urls,
            counters: Counters::default(),
            time,
            publisher_clock: Mutex::new(None),
            rng: Mutex::new(StdRng::from_entropy()),
        }
    }

    /// The wall-clock time now, from the configured [`TimeProvider`].
    pub(crate) fn now(&self) -> SystemTime {
        self.time.now()
    }

    /// The configured [`TimeProvider`]: for the update task, which keeps
    /// its due times on the wall clock.
    pub(crate) fn clock(&self) -> Arc<dyn TimeProvider> {
        Arc::clone(&self.time)
    }

    /// [`TimeProvider::now_coarse`]: for a check's staleness test.
    pub(crate) fn now_coarse(&self) -> SystemTime {
        self.time.now_coarse()
    }

    /// Runs `f` with the agent's RNG, locked: every draw of the agent goes
    /// through here, one at a time.
    pub(crate) fn with_rng<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        f(&mut lock(&self.rng))
    }

    /// Keeps the publisher's clock from the latest response that had a
    /// `Date`, for [`Status::clock_skew`](crate::Status::clock_skew).
    pub(crate) fn observe_publisher_time(&self, server: Option<SystemTime>) {
        if let Some(server) = server {
            let sample = SkewSample::new(server, self.now(), monotonic_now());
            *lock(&self.publisher_clock) = Some(sample);
        }
    }

    /// How far this agent's clock is from the publisher's at the time `now`
    /// returns, if a response has told (the clock is read only then).
    pub(crate) fn clock_skew(&self, now: impl FnOnce() -> SystemTime) -> Option<ClockSkew> {
        let sample = *lock(&self.publisher_clock);
        sample.and_then(|sample| sample.skew(now(), monotonic_now()))
    }
}
