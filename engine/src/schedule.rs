//! When to ask the publisher again: update scheduling, backoff and
//! server-given delays.
//!
//! # Snapshot updates
//!
//! The publisher rebuilds every list on a 30-minute cadence and signs each
//! snapshot with a 2-hour expiry (its defaults). [`UpdateSchedule`] decides,
//! per list:
//!
//! * **Start**: a uniform random delay ("initial jitter") so that a fleet
//!   restarted together does not stampede: up to [`COLD_START_JITTER`]
//!   (5 s, configurable) when the list has no fresh snapshot (none, and
//!   the agent cannot answer yet, or an expired one loaded from the cache,
//!   from which it answers stale), up to [`WARM_START_JITTER`] (5 minutes,
//!   and at most half the time left before it expires) when a fresh cached
//!   snapshot already answers.
//! * **After a success** (`200` or `304`): the publisher's next-check hint
//!   ([`NextCheckHeaders::delay`]), clamped to
//!   [`MIN_CHECK_INTERVAL`]..=[`MAX_SERVER_DELAY`], or the configured
//!   update interval without a hint; plus up to 10 % more, so that agents
//!   drift apart instead of polling in lockstep. A success resets the
//!   backoff.
//!
//! # The next-check hint through a shared cache
//!
//! The hint is the time the publisher expects its next build to be out.
//! Said in seconds (`X-Blocksieve-Next-Check`, and `Cache-Control:
//! max-age`), it is relative to when the response was generated, and a
//! shared cache in front of the publisher (a CDN, an nginx `proxy_cache`)
//! serves that response, unchanged, for as long as its `max-age`: taken
//! from when it arrives, a copy cached 29 minutes ago still says "30
//! minutes", and an agent behind the cache would ask 29 minutes after the
//! build it waits for — every time. So the publisher also says the instant
//! (`X-Blocksieve-Next-Check-At: <Unix seconds>`), which a copy keeps
//! right, and the agent prefers it:
//!
//! * **Absolute**: the delay is that instant less the publisher's clock
//!   now, estimated as the response's `Date` plus its age; without a
//!   `Date`, this agent's clock.
//! * **Relative only** (a publisher that predates the absolute header):
//!   the hint less the response's age.
//!
//! The age is RFC 9111 §4.2.3's: the larger of the `Age` header (which
//! caches add, RFC 9111 §5.1) and how far the `Date` is behind this
//! agent's clock (a cache that keeps the origin's `Date` and adds no
//! `Age`). Either way an agent behind a cache asks when the publisher
//! meant, not up to a whole hint later. Taking the larger errs early,
//! never late: an agent whose clock runs ahead of the publisher's asks
//! sooner than it needs (at most every [`MIN_CHECK_INTERVAL`]), one whose
//! clock is behind asks on time, from the `Date`. An instant already past
//! is the [`MIN_CHECK_INTERVAL`]. The headers are not signed: as with any
//! hint, whoever can change them can delay checks by at most
//! [`MAX_SERVER_DELAY`].
//! * **After a failure**: exponential backoff with *full jitter* (Brooker,
//!   "Exponential Backoff And Jitter", AWS Architecture Blog, 2015):
//!   after the N-th consecutive failure wait a uniform random time in
//!   `[1 s, min(2^(N-1) × 1 min, 30 min)]` ([`UPDATE_BACKOFF`]). If the
//!   answer was `429` or `503` with `Retry-After`, wait at least that long
//!   (capped at [`MAX_SERVER_DELAY`], one hour).
//!
//! Safe Browsing v4 backs off update failures with
//! `min(2^(N-1) × 15 min × (1 + rand), 24 h)`: a first retry after 15–30
//! minutes and a cap of a day, which suits lists that change over hours and
//! a client that may use them for days. Our lists change every 30 minutes
//! and expire after 2 hours, so those values would leave an agent on an
//! expired list for most of a day after a short outage. We start at one
//! minute (a transient error is retried quickly) and cap the ceiling at one
//! publish cadence, 30 minutes: an agent notices a recovery within about one
//! cadence (mean wait 15 minutes at the cap) and gets at least four more
//! attempts before a fresh snapshot expires. Full jitter instead of
//! Safe Browsing's `(1 + rand)` spreads a fleet that failed at the same moment
//! evenly over the whole window, which is what protects a recovering
//! publisher; the 1-second floor prevents hot loops.
//!
//! # Full-hash requests
//!
//! Full-hash requests are driven by URL checks, not by a timer, but a failing
//! publisher must not be hammered by every check either: after the N-th
//! consecutive failure no request is sent for a uniform random time in
//! `[0, min(2^(N-1) × 1 s, 2 min)]` ([`FULL_HASH_BACKOFF`]), or until
//! `Retry-After` has passed if that is later; checks meanwhile end as
//! [`Verdict::Unverified`](crate::lookup::Verdict::Unverified) with
//! [`Error::BackingOff`]. One success resets it ([`FullHashBackoff`]).
//! Requests in flight together fail in one outage: a failure of a request
//! sent before the pause was set does not count again. (Chromium's
//! `V4GetHashProtocolManager` counts each failed request, so the hits of
//! one outage escalate its backoff once per request in flight.)
//!
//! A `400 prefix_too_short` ([`Error::is_prefix_too_short`]) is not the
//! publisher failing but the snapshot held being behind it: it pauses
//! nothing (the check that met it updates the lists and asks again at the
//! new snapshot's length) until an update leaves the versions refused as
//! they were; from then on each refusal at them pauses as any failure
//! does, but only requests for those versions.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::Rng;

use crate::Error;
use crate::confirm::Versions;

/// An exponential backoff with full jitter: after `n` consecutive failures
/// the delay is uniform in `[min, min(base × 2^(n-1), cap)]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// The shortest delay, so that a draw near zero cannot spin.
    pub min: Duration,
    /// The ceiling after the first failure.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
}

/// Snapshot update backoff: 1 s floor, 1-minute base, 30-minute cap (one
/// publish cadence). See the module docs for why.
pub const UPDATE_BACKOFF: BackoffPolicy = BackoffPolicy {
    min: Duration::from_secs(1),
    base: Duration::from_secs(60),
    cap: Duration::from_secs(30 * 60),
};

/// Full-hash request backoff: no floor, 1-second base, 2-minute cap.
pub const FULL_HASH_BACKOFF: BackoffPolicy = BackoffPolicy {
    min: Duration::ZERO,
    base: Duration::from_secs(1),
    cap: Duration::from_secs(2 * 60),
};

/// The longest server-given delay honoured (`Retry-After`, next-check
/// hint): one hour, so that a misconfigured proxy cannot stop updates for
/// longer than half a snapshot's lifetime.
pub const MAX_SERVER_DELAY: Duration = Duration::from_secs(60 * 60);

/// The shortest next-check hint honoured: one minute. A publisher asking for
/// more frequent checks than that is mistaken; a conditional request that
/// often would only load it.
pub const MIN_CHECK_INTERVAL: Duration = Duration::from_secs(60);

/// The longest initial jitter for a list without a fresh snapshot: 5 s.
/// The agent cannot answer for that list until it has one, or answers
/// stale, so do not wait long.
pub const COLD_START_JITTER: Duration = Duration::from_secs(5);

/// The longest initial jitter for a list that a fresh cached snapshot
/// already covers: 5 minutes.
pub const WARM_START_JITTER: Duration = Duration::from_secs(5 * 60);

/// A uniform random duration in `[low, high]` (in milliseconds); `low` when
/// the range is empty.
fn uniform(rng: &mut impl Rng, low: Duration, high: Duration) -> Duration {
    let low_ms = u64::try_from(low.as_millis()).unwrap_or(u64::MAX);
    let high_ms = u64::try_from(high.as_millis()).unwrap_or(u64::MAX);
    if high_ms <= low_ms {
        return low;
    }
    Duration::from_millis(rng.gen_range(low_ms..=high_ms))
}

impl BackoffPolicy {
    /// The ceiling after `failures` consecutive failures:
    /// `min(base × 2^(failures-1), cap)`, and zero for no failure.
    pub fn ceiling(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A delay after `failures` consecutive failures: uniform in
    /// `[min, ceiling(failures)]` (full jitter).
    pub fn delay(&self, failures: u32, rng: &mut impl Rng) -> Duration {
        uniform(rng, self.min, self.ceiling(failures).max(self.min))
    }
}

/// Parses a `Retry-After` value (RFC 9110 §10.2.3): delay-seconds or an
/// HTTP-date, relative to `now`. A date in the past is zero; the result is
/// capped at [`MAX_SERVER_DELAY`]. `None` when the value is neither.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let delay = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Anything longer than u64 seconds is "very long": cap it below.
        Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(delay.min(MAX_SERVER_DELAY))
}

/// The publisher's next-check hint of a snapshot response: the
/// `X-Blocksieve-Next-Check` header (seconds), or else the `max-age`
/// directive of `Cache-Control`. Unclamped; [`UpdateSchedule::on_success`]
/// clamps it. `None` when neither is present and valid.
///
/// Relative to when the response was generated: see
/// [`NextCheckHeaders::delay`] for the delay from when it arrived.
pub fn parse_next_check(next_check: Option<&str>, cache_control: Option<&str>) -> Option<Duration> {
    let seconds = |v: &str| digits(v, 10).map(Duration::from_secs);
    if let Some(hint) = next_check.and_then(seconds) {
        return Some(hint);
    }
    cache_control?.split(',').find_map(|directive| {
        let (name, value) = directive.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("max-age")
            .then(|| seconds(value.trim_matches('"')))
            .flatten()
    })
}

/// The headers of a snapshot or updates response that say when to ask
/// again, as they came (see the module docs, "The next-check hint through
/// a shared cache").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NextCheckHeaders<'a> {
    /// `X-Blocksieve-Next-Check-At`: the Unix second of the next check.
    pub next_check_at: Option<&'a str>,
    /// `X-Blocksieve-Next-Check`: seconds until the next check, when the
    /// response was generated.
    pub next_check: Option<&'a str>,
    /// `Cache-Control`, for its `max-age` when there is no
    /// `X-Blocksieve-Next-Check`.
    pub cache_control: Option<&'a str>,
    /// `Date`: when the response was generated (by the publisher, or by a
    /// cache that stamps its copies with its own).
    pub date: Option<&'a str>,
    /// `Age`: how long a cache has held the response (RFC 9111 §5.1).
    pub age: Option<&'a str>,
}

impl NextCheckHeaders<'_> {
    /// The delay from `now` (this agent's clock, when the response arrived)
    /// until the next check the publisher asked for: until
    /// `X-Blocksieve-Next-Check-At` on the publisher's clock (the `Date`
    /// plus [`response_age`]; `now` without a `Date`), else the relative
    /// hint ([`parse_next_check`]) less [`response_age`]. Zero for an
    /// instant already past. Unclamped; [`UpdateSchedule::on_success`]
    /// clamps it. `None` without a valid hint.
    pub fn delay(&self, now: SystemTime) -> Option<Duration> {
        let date = self.date.and_then(|d| httpdate::parse_http_date(d.trim()).ok());
        let age = response_age(date, self.age, now);
        if let Some(at) = self.next_check_at.and_then(|v| digits(v, 12)) {
            let at = UNIX_EPOCH.checked_add(Duration::from_secs(at))?;
            return Some(match date {
                Some(date) => at
                    .duration_since(date)
                    .unwrap_or(Duration::ZERO)
                    .saturating_sub(age),
                None => at.duration_since(now).unwrap_or(Duration::ZERO),
            });
        }
        parse_next_check(self.next_check, self.cache_control).map(|hint| hint.saturating_sub(age))
    }
}

/// How old a response is when it arrives at `now` (RFC 9111 §4.2.3): the
/// larger of its `Age` header (whole seconds) and how far its `date` is
/// behind `now`; zero when neither says more.
pub fn response_age(date: Option<SystemTime>, age: Option<&str>, now: SystemTime) -> Duration {
    let header = age
        .and_then(|a| digits(a, 19))
        .map_or(Duration::ZERO, Duration::from_secs);
    let apparent = date
        .and_then(|d| now.duration_since(d).ok())
        .unwrap_or(Duration::ZERO);
    header.max(apparent)
}

/// A header value of 1 to `max_len` ASCII digits (and optional
/// surrounding whitespace), as a number.
fn digits(value: &str, max_len: usize) -> Option<u64> {
    let value = value.trim();
    (!value.is_empty() && value.len() <= max_len && value.bytes().all(|b| b.is_ascii_digit()))
        .then(|| value.parse().ok())
        .flatten()
}

/// The update schedule of one list: when to check next after each outcome.
/// See the module docs for the rules.
#[derive(Debug, Clone)]
pub struct UpdateSchedule {
    /// The wait after a success without a next-check hint.
    interval: Duration,
    /// The longest initial jitter without a fresh snapshot.
    cold_start_jitter: Duration,
    /// Consecutive failed updates; reset by a success.
    failures: u32,
}

impl UpdateSchedule {
    /// A schedule that checks every `interval` when the publisher gives no
    /// next-check hint, with a [`COLD_START_JITTER`] initial jitter.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            cold_start_jitter: COLD_START_JITTER,
            failures: 0,
        }
    }

    /// Sets the longest initial jitter for a list without a fresh snapshot
    /// (by default, [`COLD_START_JITTER`]).
    pub fn with_cold_start_jitter(mut self, jitter: Duration) -> Self {
        self.cold_start_jitter = jitter;
        self
    }

    /// Consecutive failed updates so far.
    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }

    /// The delay before the first check. `time_to_expiry` is how long the
    /// list's cached snapshot stays fresh, or `None` without a fresh one
    /// (none, or an expired one).
    pub fn initial_delay(&self, time_to_expiry: Option<Duration>, rng: &mut impl Rng) -> Duration {
        match time_to_expiry {
            Some(left) if !left.is_zero() => uniform(rng, Duration::ZERO, WARM_START_JITTER.min(left / 2)),
            _ => uniform(rng, Duration::ZERO, self.cold_start_jitter),
        }
    }

    /// Records a successful check (`200` accepted or unchanged, `304`) and
    /// returns the delay before the next one.
    pub fn on_success(&mut self, hint: Option<Duration>, rng: &mut impl Rng) -> Duration {
        self.failures = 0;
        let base = hint.map_or(self.interval, |h| h.clamp(MIN_CHECK_INTERVAL, MAX_SERVER_DELAY));
        base + uniform(rng, Duration::ZERO, base / 10)
    }

    /// Records a failed check and returns the delay before the next one:
    /// [`UPDATE_BACKOFF`], and at least `retry_after` (capped at
    /// [`MAX_SERVER_DELAY`]) when the publisher sent one.
    pub fn on_failure(&mut self, retry_after: Option<Duration>, rng: &mut impl Rng) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let backoff = UPDATE_BACKOFF.delay(self.failures, rng);
        match retry_after {
            Some(r) => backoff.max(r.min(MAX_SERVER_DELAY)),
            None => backoff,
        }
    }
}

/// Whether full-hash requests may be sent now; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct FullHashBackoff {
    /// Consecutive failed full-hash requests.
    failures: u32,
    /// When the pause was set and when it ends (wall clock, so that it
    /// survives a suspended process; a clock running backwards ends it).
    paused: Option<(SystemTime, SystemTime)>,
    /// The last `400 prefix_too_short` refusal, if none succeeded since.
    refused: Option<Refusal>,
}

/// A `400 prefix_too_short` refusal as the backoff keeps it.
#[derive(Debug, Clone)]
struct Refusal {
    /// The snapshot versions the refused request was made for.
    versions: Versions,
    /// Whether an update since left the versions as they were: the
    /// refusal stands, and another one pauses.
    stands: bool,
    /// Whether the pause is for these versions alone (set by refusals, not
    /// by a failure of the publisher).
    alone: bool,
}

impl FullHashBackoff {
    /// Consecutive failed full-hash requests so far.
    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }

    /// Whether a request may be sent at `now`.
    ///
    /// # Errors
    ///
    /// [`Error::BackingOff`] with the time left while paused.
    pub fn check(&self, now: SystemTime) -> Result<(), Error> {
        match self.paused {
            Some((set_at, until)) if now >= set_at && now < until => Err(Error::BackingOff {
                remaining: until.duration_since(now).unwrap_or(Duration::ZERO),
                failures: self.failures,
            }),
            _ => Ok(()),
        }
    }

    /// Whether a request for snapshot `versions` may be sent at `now`: as
    /// [`FullHashBackoff::check`], except that a pause set by
    /// `prefix_too_short` refusals holds only for the versions refused (a
    /// newer snapshot sizes its requests anew).
    ///
    /// # Errors
    ///
    /// [`Error::BackingOff`] with the time left while paused.
    pub fn check_for(&self, now: SystemTime, versions: &Versions) -> Result<(), Error> {
        match &self.refused {
            Some(r) if r.alone && r.versions != *versions => Ok(()),
            _ => self.check(now),
        }
    }

    /// Records a successful request: the backoff is reset.
    pub fn on_success(&mut self) {
        self.failures = 0;
        self.paused = None;
        self.refused = None;
    }

    /// Records a `400 prefix_too_short` ([`Error::is_prefix_too_short`]) to
    /// a request made for snapshot `versions` at `now`. It pauses nothing
    /// while no update has shown it to stand: the cure is a newer snapshot,
    /// not waiting (and a pause that refusals set for other versions ends).
    /// Once an update left the versions as they were
    /// ([`FullHashBackoff::on_update_without_change`]), each further refusal
    /// at them counts as [`FullHashBackoff::on_failure`] does, for requests
    /// at those versions only ([`FullHashBackoff::check_for`]), so a
    /// publisher that keeps refusing is not asked at every hit.
    pub fn on_prefix_too_short(&mut self, versions: &Versions, now: SystemTime, rng: &mut impl Rng) {
        match &self.refused {
            Some(r) if r.versions == *versions => {
                if r.stands {
                    // A pause for every request (a failure of the
                    // publisher) is left as it is.
                    let everything = !r.alone && self.check(now).is_err();
                    if !everything {
                        self.escalate(None, now, rng);
                    }
                    if let Some(r) = &mut self.refused {
                        r.alone = !everything;
                    }
                }
            }
            other => {
                if other.as_ref().is_some_and(|r| r.alone) {
                    self.paused = None;
                }
                self.refused = Some(Refusal {
                    versions: versions.clone(),
                    stands: false,
                    alone: false,
                });
            }
        }
    }

    /// Whether the last `400 prefix_too_short` refusal was for `versions`
    /// and no update has yet left them as they were: the snapshots held
    /// are behind the publisher's request prefix length, and an update
    /// round is the cure ([`FullHashBackoff::on_prefix_too_short`]). False
    /// once an update brought other versions (they size their requests
    /// anew), or left these as they were (the refusal stands: asking for
    /// updates again would loop), and after any successful request.
    pub fn awaits_update(&self, versions: &Versions) -> bool {
        self.refused
            .as_ref()
            .is_some_and(|r| !r.stands && r.versions == *versions)
    }

    /// Records that an update ended with the lists at `versions`: a refusal
    /// at those versions now stands ([`FullHashBackoff::on_prefix_too_short`]).
    pub fn on_update_without_change(&mut self, versions: &Versions) {
        if let Some(r) = &mut self.refused
            && r.versions == *versions
        {
            r.stands = true;
        }
    }

    /// Records the failure at `now` of a request sent at `sent`, and pauses
    /// requests for [`FULL_HASH_BACKOFF`], or for `retry_after` if that is
    /// longer.
    ///
    /// A request sent before the pause in force was set failed in the
    /// outage that set it: it does not count as another consecutive
    /// failure (it only lengthens the pause to its own `retry_after`).
    /// Otherwise twenty requests in flight when a publisher hangs would
    /// escalate the backoff twenty steps at once, to a pause of up to the
    /// 2-minute cap after a one-second outage.
    pub fn on_failure(
        &mut self,
        retry_after: Option<Duration>,
        sent: SystemTime,
        now: SystemTime,
        rng: &mut impl Rng,
    ) {
        let server_delay = retry_after.map(|r| r.min(MAX_SERVER_DELAY));
        // A pause for every request (not one that refusals set for some
        // versions alone), set after this request was sent and no later
        // than now (a clock that ran backwards counts the failure anew).
        let in_force = self.refused.as_ref().is_none_or(|r| !r.alone);
        if let Some((set_at, until)) = self.paused
            && in_force
            && sent < set_at
            && set_at <= now
        {
            if let Some(until) = server_delay
                .and_then(|d| now.checked_add(d))
                .filter(|u| *u > until)
            {
                self.paused = Some((set_at, until));
            }
            return;
        }
        // A failure of the publisher pauses every request.
        if let Some(r) = &mut self.refused {
            r.alone = false;
        }
        self.escalate(server_delay, now, rng);
    }

    /// Counts one more consecutive failure and pauses from `now` for its
    /// draw, or for `server_delay` if that is longer.
    fn escalate(&mut self, server_delay: Option<Duration>, now: SystemTime, rng: &mut impl Rng) {
        self.failures = self.failures.saturating_add(1);
        let mut delay = FULL_HASH_BACKOFF.delay(self.failures, rng);
        if let Some(d) = server_delay {
            delay = delay.max(d);
        }
        self.paused = now.checked_add(delay).map(|until| (now, until));
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn rng() -> StdRng {
        StdRng::seed_from_u64(6)
    }

    const MIN: Duration = Duration::from_secs(60);

    /// The snapshot versions of a check with `malware` at `version`.
    fn malware_at(version: u64) -> Versions {
        let floor = crate::accept::VersionFloor {
            version,
            body_sha256: [7; 32],
        };
        Versions::from([("malware".to_owned(), floor)])
    }

    #[test]
    fn ceilings_double_from_one_minute_to_thirty() {
        let ceilings: Vec<u64> = (0..9).map(|n| UPDATE_BACKOFF.ceiling(n).as_secs()).collect();
        assert_eq!(ceilings, [0, 60, 120, 240, 480, 960, 1800, 1800, 1800]);
        assert_eq!(UPDATE_BACKOFF.ceiling(u32::MAX), Duration::from_secs(1800));
        assert_eq!(FULL_HASH_BACKOFF.ceiling(1), Duration::from_secs(1));
        assert_eq!(FULL_HASH_BACKOFF.ceiling(40), Duration::from_secs(120));
    }

    #[test]
    fn full_jitter_covers_the_whole_window() {
        let mut r = rng();
        for n in 1..12 {
            let ceiling = UPDATE_BACKOFF.ceiling(n);
            let draws: Vec<Duration> = (0..500).map(|_| UPDATE_BACKOFF.delay(n, &mut r)).collect();
            assert!(
                draws
                    .iter()
                    .all(|d| *d >= Duration::from_secs(1) && *d <= ceiling)
            );
            // Full jitter: draws land in the lowest and the highest quarter.
            assert!(draws.iter().any(|d| *d < ceiling / 4), "n = {n}");
            assert!(draws.iter().any(|d| *d > ceiling * 3 / 4), "n = {n}");
        }
    }

    #[test]
    fn failures_back_off_and_a_success_resets() {
        let mut r = rng();
        let mut s = UpdateSchedule::new(10 * MIN);
        for n in 1..=8u32 {
            let d = s.on_failure(None, &mut r);
            assert!(d <= UPDATE_BACKOFF.ceiling(n), "{n}: {d:?}");
            assert_eq!(s.consecutive_failures(), n);
        }
        let d = s.on_success(None, &mut r);
        assert_eq!(s.consecutive_failures(), 0);
        assert!(d >= 10 * MIN && d <= 11 * MIN, "{d:?}");
        let d = s.on_failure(None, &mut r);
        assert!(d <= MIN, "backoff restarted from the base: {d:?}");
    }

    /// `prefix_too_short` refusals (`FullHashBackoff::on_prefix_too_short`):
    /// none pauses until an update left the versions refused as they were
    /// (two checks refused at once, while the update runs, pause nothing);
    /// then each pauses those versions' requests only; a refusal at other
    /// versions ends that pause; a failure of the publisher pauses every
    /// request, and a refusal neither narrows nor shortens that pause.
    #[test]
    fn a_prefix_too_short_refusal_pauses_only_the_versions_it_stands_for() {
        let mut r = rng();
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let (v1, v2) = (malware_at(1), malware_at(2));
        let mut b = FullHashBackoff::default();
        b.on_prefix_too_short(&v1, now, &mut r);
        b.on_prefix_too_short(&v1, now, &mut r);
        assert!(b.check_for(now, &v1).is_ok());
        assert_eq!(b.consecutive_failures(), 0);
        // An update that ended at another version shows nothing.
        b.on_update_without_change(&v2);
        b.on_prefix_too_short(&v1, now, &mut r);
        assert!(b.check_for(now, &v1).is_ok());
        b.on_update_without_change(&v1);
        assert!(b.check_for(now, &v1).is_ok());
        b.on_prefix_too_short(&v1, now, &mut r);
        assert!(b.check_for(now, &v1).is_err());
        assert!(b.check_for(now, &v2).is_ok());
        assert_eq!(b.consecutive_failures(), 1);
        b.on_prefix_too_short(&v2, now, &mut r);
        assert!(b.check_for(now, &v1).is_ok() && b.check_for(now, &v2).is_ok());
        b.on_success();
        assert!(b.check(now).is_ok());

        // A failure of the publisher (Retry-After 600 s), then refusals that
        // stand: every request paused, and for the whole 600 s.
        let mut b = FullHashBackoff::default();
        b.on_failure(Some(Duration::from_secs(600)), now, now, &mut r);
        b.on_prefix_too_short(&v1, now, &mut r);
        b.on_update_without_change(&v1);
        b.on_prefix_too_short(&v1, now, &mut r);
        let later = now + Duration::from_secs(599);
        assert!(b.check_for(later, &v1).is_err() && b.check_for(later, &v2).is_err());
        // Refusals that stand, then a failure: every request paused too.
        let mut b = FullHashBackoff::default();
        b.on_prefix_too_short(&v1, now, &mut r);
        b.on_update_without_change(&v1);
        b.on_prefix_too_short(&v1, now, &mut r);
        b.on_failure(Some(Duration::from_secs(600)), now, now, &mut r);
        assert!(b.check_for(now, &v2).is_err());
    }

    #[test]
    fn retry_after_is_a_lower_bound_capped_at_an_hour() {
        let mut r = rng();
        let mut s = UpdateSchedule::new(10 * MIN);
        for _ in 0..50 {
            let d = s.on_failure(Some(Duration::from_secs(600)), &mut r);
            assert!(d >= Duration::from_secs(600), "{d:?}");
        }
        let d = s.on_failure(Some(Duration::from_secs(86_400)), &mut r);
        assert_eq!(d, MAX_SERVER_DELAY);
    }

    #[test]
    fn next_check_hint_is_honoured_within_bounds() {
        let mut r = rng();
        let mut s = UpdateSchedule::new(10 * MIN);
        let d = s.on_success(Some(30 * MIN), &mut r);
        assert!(d >= 30 * MIN && d <= 33 * MIN, "{d:?}");
        let d = s.on_success(Some(Duration::from_secs(1)), &mut r);
        assert!(
            d >= MIN_CHECK_INTERVAL && d <= MIN_CHECK_INTERVAL * 11 / 10,
            "{d:?}"
        );
        let d = s.on_success(Some(Duration::from_secs(1_000_000)), &mut r);
        assert!(d >= MAX_SERVER_DELAY && d <= MAX_SERVER_DELAY * 11 / 10, "{d:?}");
    }

    #[test]
    fn initial_jitter_is_short_when_cold_and_spread_when_warm() {
        let mut r = rng();
        let s = UpdateSchedule::new(10 * MIN);
        let cold: Vec<Duration> = (0..200).map(|_| s.initial_delay(None, &mut r)).collect();
        assert!(cold.iter().all(|d| *d <= COLD_START_JITTER));
        assert!(cold.iter().any(|d| *d > COLD_START_JITTER / 2));
        let warm: Vec<Duration> = (0..200)
            .map(|_| s.initial_delay(Some(2 * 60 * MIN), &mut r))
            .collect();
        assert!(warm.iter().all(|d| *d <= WARM_START_JITTER));
        assert!(warm.iter().any(|d| *d > WARM_START_JITTER / 2));
        // Never past half the remaining freshness.
        let soon: Vec<Duration> = (0..200)
            .map(|_| s.initial_delay(Some(Duration::from_secs(20)), &mut r))
            .collect();
        assert!(soon.iter().all(|d| *d <= Duration::from_secs(10)));
        assert!(s.initial_delay(Some(Duration::ZERO), &mut r) <= COLD_START_JITTER);
    }

    #[test]
    fn retry_after_parses_seconds_and_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(MAX_SERVER_DELAY)
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(parse_retry_after(&date, now), Some(Duration::from_secs(90)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }

    #[test]
    fn next_check_prefers_the_blocksieve_header_then_max_age() {
        let s = Duration::from_secs;
        assert_eq!(parse_next_check(Some("1800"), Some("max-age=60")), Some(s(1800)));
        assert_eq!(
            parse_next_check(Some("bad"), Some("public, Max-Age=60")),
            Some(s(60))
        );
        assert_eq!(parse_next_check(None, Some("no-cache")), None);
        assert_eq!(parse_next_check(None, Some("max-age=\"30\"")), Some(s(30)));
        assert_eq!(parse_next_check(Some("99999999999"), None), None);
        assert_eq!(parse_next_check(None, None), None);
    }

    /// The delay a response asks for, counted from when it arrives: a copy
    /// that a shared cache serves 20 minutes after the publisher made it
    /// (with a one-hour hint) asks for 40 minutes, however the cache dates
    /// it.
    #[test]
    fn the_next_check_delay_counts_from_the_publishers_instant_through_a_cache() {
        let s = Duration::from_secs;
        let made = UNIX_EPOCH + s(1_800_000_000);
        let served = made + 20 * MIN;
        let date = |t: SystemTime| httpdate::fmt_http_date(t);
        let (made_date, served_date) = (date(made), date(served));
        let at = "1800003600";
        let fresh = NextCheckHeaders {
            next_check_at: Some(at),
            next_check: Some("3600"),
            cache_control: Some("public, max-age=3600"),
            date: Some(&made_date),
            age: None,
        };
        // Straight from the publisher.
        assert_eq!(fresh.delay(made), Some(60 * MIN));
        // A CDN: the origin's Date and an Age.
        let cdn = NextCheckHeaders {
            age: Some("1200"),
            ..fresh
        };
        assert_eq!(cdn.delay(served), Some(40 * MIN));
        // nginx's proxy_cache: its own Date, no Age.
        let nginx = NextCheckHeaders {
            date: Some(&served_date),
            ..fresh
        };
        assert_eq!(nginx.delay(served), Some(40 * MIN));
        // A cache that keeps the origin's Date and adds no Age: its age is
        // how far the Date is behind this agent's clock.
        assert_eq!(fresh.delay(served), Some(40 * MIN));
        // No Date: this agent's clock.
        let undated = NextCheckHeaders { date: None, ..fresh };
        assert_eq!(undated.delay(served), Some(40 * MIN));
        // An instant already past is no delay (the schedule raises it to
        // the minimum interval).
        assert_eq!(fresh.delay(made + 2 * 60 * MIN), Some(Duration::ZERO));
        // This agent's clock behind the publisher's by 10 minutes: the
        // Date, not the clock, says how long is left.
        assert_eq!(nginx.delay(served - 10 * MIN), Some(40 * MIN));

        // A publisher without the absolute header: the relative hint less
        // the response's age, from Age or from the Date.
        let relative = NextCheckHeaders {
            next_check_at: None,
            ..fresh
        };
        assert_eq!(relative.delay(made), Some(60 * MIN));
        let relative_cdn = NextCheckHeaders {
            age: Some("1200"),
            ..relative
        };
        assert_eq!(relative_cdn.delay(served), Some(40 * MIN));
        assert_eq!(relative.delay(served), Some(40 * MIN));
        let max_age_only = NextCheckHeaders {
            next_check: None,
            age: Some("1200"),
            ..relative
        };
        assert_eq!(max_age_only.delay(served), Some(40 * MIN));
        assert_eq!(
            NextCheckHeaders {
                age: Some("99999999999999999999999"),
                ..relative
            }
            .delay(made),
            Some(60 * MIN),
            "an Age that is no number is ignored"
        );
        // A bad absolute value falls back to the relative hint.
        let bad = NextCheckHeaders {
            next_check_at: Some("soon"),
            age: Some("60"),
            ..fresh
        };
        assert_eq!(bad.delay(made + s(60)), Some(59 * MIN));
        assert_eq!(NextCheckHeaders::default().delay(made), None);

        // Through the schedule: a past instant is the minimum interval.
        let mut r = rng();
        let d = UpdateSchedule::new(10 * MIN).on_success(fresh.delay(made + 2 * 60 * MIN), &mut r);
        assert!(
            d >= MIN_CHECK_INTERVAL && d <= MIN_CHECK_INTERVAL * 11 / 10,
            "{d:?}"
        );
    }

    #[test]
    fn response_age_is_the_larger_of_age_and_the_dates_lag() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let s = Duration::from_secs;
        assert_eq!(response_age(None, None, now), Duration::ZERO);
        assert_eq!(response_age(None, Some(" 30 "), now), s(30));
        assert_eq!(response_age(Some(now - s(50)), Some("30"), now), s(50));
        assert_eq!(response_age(Some(now - s(10)), Some("30"), now), s(30));
        // A Date ahead of this clock is no negative age.
        assert_eq!(response_age(Some(now + s(99)), None, now), Duration::ZERO);
        assert_eq!(response_age(None, Some("-5"), now), Duration::ZERO);
    }

    #[test]
    fn full_hash_backoff_pauses_and_resets() {
        let mut r = rng();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut b = FullHashBackoff::default();
        assert!(b.check(t0).is_ok());
        b.on_failure(Some(Duration::from_secs(30)), t0, t0, &mut r);
        assert!(matches!(
            b.check(t0 + Duration::from_secs(29)),
            Err(Error::BackingOff { failures: 1, .. })
        ));
        assert!(b.check(t0 + Duration::from_secs(31)).is_ok());
        // A clock that ran backwards ends the pause rather than extending it.
        assert!(b.check(t0 - Duration::from_secs(1)).is_ok());
        for _ in 0..20 {
            b.on_failure(None, t0, t0, &mut r);
        }
        assert!(
            b.check(t0 + FULL_HASH_BACKOFF.cap + Duration::from_secs(1))
                .is_ok()
        );
        b.on_success();
        assert_eq!(b.consecutive_failures(), 0);
        assert!(b.check(t0).is_ok());
    }

    /// Requests in flight together when the publisher hangs fail one after
    /// another: the outage counts once, not once per request (before,
    /// twenty such failures paused for a draw up to the 2-minute cap).
    #[test]
    fn requests_that_fail_in_one_outage_count_once() {
        let mut r = rng();
        let s = Duration::from_secs;
        let t0 = UNIX_EPOCH + s(1_700_000_000);
        let mut b = FullHashBackoff::default();
        // Twenty requests sent at t0, timed out from t0 + 10 s on.
        for i in 0..20 {
            b.on_failure(None, t0, t0 + s(10) + Duration::from_millis(i), &mut r);
        }
        assert_eq!(b.consecutive_failures(), 1);
        assert!(
            b.check(t0 + s(11)).is_ok(),
            "the first failure's pause: at most 1 s"
        );
        // One of them carried a Retry-After: the pause lasts that long, but
        // the failures are not counted again.
        b.on_failure(Some(s(30)), t0, t0 + s(10), &mut r);
        assert_eq!(b.consecutive_failures(), 1);
        assert!(b.check(t0 + s(39)).is_err() && b.check(t0 + s(41)).is_ok());
        // A request sent after the pause was set fails: the next step.
        b.on_failure(None, t0 + s(41), t0 + s(51), &mut r);
        assert_eq!(b.consecutive_failures(), 2);
        // A clock that ran backwards between sending and failing counts.
        b.on_failure(None, t0, t0 + s(1), &mut r);
        assert_eq!(b.consecutive_failures(), 3);
        // A failure of the publisher after refusals that pause some
        // versions alone counts, whenever its request was sent, and
        // pauses every request.
        let (v1, v2) = (malware_at(1), malware_at(2));
        let mut b = FullHashBackoff::default();
        b.on_prefix_too_short(&v1, t0 + s(1), &mut r);
        b.on_update_without_change(&v1);
        b.on_prefix_too_short(&v1, t0 + s(2), &mut r);
        assert!(b.check_for(t0 + s(2), &v2).is_ok());
        b.on_failure(Some(s(30)), t0, t0 + s(3), &mut r);
        assert_eq!(b.consecutive_failures(), 2);
        assert!(b.check_for(t0 + s(4), &v2).is_err());
    }
}
