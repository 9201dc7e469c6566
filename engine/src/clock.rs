//! Clock skew: how far this agent's wall clock is from the publisher's,
//! estimated from the `Date` header (RFC 9110 §6.6.1) of the publisher's
//! snapshot and full-hash responses, and reported in
//! `blocksieve_agent::Status::clock_skew`.
//!
//! Why it matters: freshness is the snapshot's signed `expires_at` against
//! this agent's clock. A clock two days ahead makes every fresh snapshot
//! look expired (the agent uses it all the same, flagged stale: see
//! [`accept`](super::accept)); a clock behind makes an expired snapshot look
//! fresh. The stale flag alone cannot tell a frozen feed from a wrong
//! clock; the skew can.
//!
//! Why it is only reported: `Date` is not signed. Anyone on the path can
//! set it, so it never decides freshness — correcting the clock with it
//! would let a network attacker make a frozen snapshot look fresh, the very
//! attack expiry is there to expose.
//!
//! Precision and robustness:
//!
//! * `Date` has a resolution of one second and is set when the response is
//!   generated, so a sample is off by up to a second plus the time the
//!   response headers took to arrive. A response served from an HTTP cache
//!   carries the origin's `Date` and its `Age` (RFC 9111 §5.1), which is
//!   added back ([`server_time`]).
//! * The latest response wins: each one replaces the previous sample.
//! * Skews within [`CLOCK_SKEW_THRESHOLD`] (one minute) are not reported:
//!   well above the sample's own error, and below anything that moves a
//!   snapshot's freshness noticeably (snapshots live at least a minute, two
//!   hours by default).
//! * The skew is computed again at every status ([`SkewSample::skew`]),
//!   against the current clock: when the wall clock has moved differently
//!   from the monotonic clock since the sample (the clock was set, or the
//!   machine slept), the sample no longer describes the clock, and nothing
//!   is reported until the next response. So a clock that is put right
//!   stops being reported at once, without a restart.

use std::time::{Duration, Instant, SystemTime};

/// The smallest clock skew reported: one minute. See the module docs for
/// why.
pub const CLOCK_SKEW_THRESHOLD: Duration = Duration::from_secs(60);

/// The largest `Age` added to a `Date`, in seconds: a day. A cached answer
/// older than that says little about the publisher's clock, and a bigger
/// value is not one a sane cache sends.
const MAX_AGE_SECONDS: u64 = 24 * 60 * 60;

/// How far this agent's wall clock is from the publisher's, as far as the
/// publisher's `Date` headers tell (see [`engine::clock`](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockSkew {
    /// This agent's clock is ahead of the publisher's by this much: fresh
    /// snapshots can look expired, and are then used flagged stale.
    Ahead(Duration),
    /// This agent's clock is behind the publisher's by this much: expired
    /// snapshots can look fresh.
    Behind(Duration),
}

impl ClockSkew {
    /// How far apart the clocks are, in either direction.
    pub fn magnitude(&self) -> Duration {
        match *self {
            Self::Ahead(d) | Self::Behind(d) => d,
        }
    }
}

impl std::fmt::Display for ClockSkew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (secs, way) = match *self {
            Self::Ahead(d) => (d.as_secs(), "ahead of"),
            Self::Behind(d) => (d.as_secs(), "behind"),
        };
        write!(f, "this clock is {secs} s {way} the publisher's")
    }
}

/// The publisher's clock when it generated a response, from the response's
/// `Date` header and, for an answer served from an HTTP cache, its `Age`
/// header (whole seconds, at most a day). `None` without a valid `Date`.
pub fn server_time(date: Option<&str>, age: Option<&str>) -> Option<SystemTime> {
    let date = httpdate::parse_http_date(date?.trim()).ok()?;
    let age = age
        .and_then(|a| a.trim().parse::<u64>().ok())
        .unwrap_or(0)
        .min(MAX_AGE_SECONDS);
    date.checked_add(Duration::from_secs(age))
}

/// One measurement: the publisher's clock and this agent's, wall and
/// monotonic, when a response arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkewSample {
    /// The publisher's clock, from [`server_time`].
    server: SystemTime,
    /// This agent's wall clock when the response arrived.
    local: SystemTime,
    /// This agent's monotonic clock then: tells a clock that was set (or a
    /// machine that slept) from time passing.
    monotonic: Instant,
}

impl SkewSample {
    /// A sample of the publisher's clock `server` taken at `local` (wall)
    /// and `monotonic`.
    pub fn new(server: SystemTime, local: SystemTime, monotonic: Instant) -> Self {
        Self {
            server,
            local,
            monotonic,
        }
    }

    /// The skew at `local_now` / `monotonic_now`, or `None` when it is
    /// within [`CLOCK_SKEW_THRESHOLD`], or when the wall clock has moved
    /// more than that threshold differently from the monotonic clock since
    /// the sample (the sample no longer describes the clock).
    pub fn skew(&self, local_now: SystemTime, monotonic_now: Instant) -> Option<ClockSkew> {
        let wall = signed_seconds(local_now, self.local);
        let monotonic = i128::from(monotonic_now.saturating_duration_since(self.monotonic).as_secs());
        let threshold = i128::from(CLOCK_SKEW_THRESHOLD.as_secs());
        if (wall - monotonic).abs() > threshold {
            return None;
        }
        let offset = signed_seconds(self.local, self.server);
        let magnitude = Duration::from_secs(u64::try_from(offset.unsigned_abs()).unwrap_or(u64::MAX));
        if offset.abs() <= threshold {
            None
        } else if offset > 0 {
            Some(ClockSkew::Ahead(magnitude))
        } else {
            Some(ClockSkew::Behind(magnitude))
        }
    }
}

/// `a - b` in whole seconds, negative when `a` is earlier.
fn signed_seconds(a: SystemTime, b: SystemTime) -> i128 {
    match a.duration_since(b) {
        Ok(d) => i128::from(d.as_secs()),
        Err(e) => -i128::from(e.duration().as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    fn at(unix: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(unix)
    }

    #[test]
    fn date_and_age_give_the_publishers_clock() {
        // RFC 9110's example date: 1994-11-06 08:49:37 UTC.
        let date = Some("Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(server_time(date, None), Some(at(784_111_777)));
        assert_eq!(server_time(date, Some("60")), Some(at(784_111_837)));
        // A bogus Age is ignored, a huge one capped at a day.
        assert_eq!(server_time(date, Some("-5")), Some(at(784_111_777)));
        assert_eq!(
            server_time(date, Some("99999999999")),
            Some(at(784_111_777) + DAY)
        );
        assert_eq!(server_time(Some("yesterday"), None), None);
        assert_eq!(server_time(None, Some("60")), None);
    }

    /// A clock two days ahead is reported as such.
    #[test]
    fn clock_two_days_ahead_is_reported() {
        let t0 = Instant::now();
        let server = at(1_700_000_000);
        let sample = SkewSample::new(server, server + 2 * DAY, t0);
        assert_eq!(sample.skew(server + 2 * DAY, t0), Some(ClockSkew::Ahead(2 * DAY)));
        // Still true ten minutes later, on both clocks.
        let later = Duration::from_secs(600);
        assert_eq!(
            sample.skew(server + 2 * DAY + later, t0 + later),
            Some(ClockSkew::Ahead(2 * DAY))
        );
        let behind = SkewSample::new(server, server - DAY, t0);
        assert_eq!(behind.skew(server - DAY, t0), Some(ClockSkew::Behind(DAY)));
        assert_eq!(behind.skew(server - DAY, t0).map(|s| s.magnitude()), Some(DAY));
    }

    #[test]
    fn small_skews_are_not_reported() {
        let t0 = Instant::now();
        let server = at(1_700_000_000);
        for offset in [0, 1, 59, 60] {
            let d = Duration::from_secs(offset);
            assert_eq!(SkewSample::new(server, server + d, t0).skew(server + d, t0), None);
            assert_eq!(SkewSample::new(server, server - d, t0).skew(server - d, t0), None);
        }
        assert!(
            SkewSample::new(server, server + Duration::from_secs(61), t0)
                .skew(server + Duration::from_secs(61), t0)
                .is_some()
        );
    }

    /// The clock put right stops the report at once, and
    /// a machine that slept does not report its sleep as skew.
    #[test]
    fn a_clock_set_or_a_sleep_since_the_sample_ends_the_report() {
        let t0 = Instant::now();
        let server = at(1_700_000_000);
        let sample = SkewSample::new(server, server + 2 * DAY, t0);
        let a_minute = Duration::from_secs(60);
        // Corrected: the wall clock jumped back two days, the monotonic
        // clock moved a minute.
        assert_eq!(sample.skew(server + a_minute, t0 + a_minute), None);

        let right = SkewSample::new(server, server, t0);
        // Eight hours of sleep: the wall clock moved, the monotonic one did
        // not.
        assert_eq!(right.skew(server + Duration::from_secs(8 * 3600), t0), None);
    }
}
