//! When a list's next build is due, and how long agents should wait before
//! they ask again: until that build has had time to finish, so that an
//! agent polls about once per build instead of every few minutes.

use std::time::Duration;

use croner::parser::{CronParser, Seconds};

/// The least time, past the next scheduled build, an agent is told to wait
/// for the build to finish.
pub const MIN_BUILD_MARGIN: Duration = Duration::from_secs(30);

/// The most time, past the next scheduled build, an agent is told to wait
/// (a slow build must not keep agents away long after it is done).
pub const MAX_BUILD_MARGIN: Duration = Duration::from_secs(10 * 60);

/// A parsed cron schedule (6 fields, seconds first, in UTC, as the
/// scheduler reads it), parsed once: the status page asks each list's
/// schedule for its next firings on every request.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule(croner::Cron);

impl Schedule {
    /// `schedule` parsed; `None` when it does not parse.
    pub fn parse(schedule: &str) -> Option<Self> {
        CronParser::builder()
            .seconds(Seconds::Required)
            .dom_and_dow(true)
            .build()
            .parse(schedule)
            .ok()
            .map(Self)
    }

    /// The Unix second of the first firing after `now`; `None` when it
    /// never fires again.
    pub fn next_firing(&self, now: u64) -> Option<u64> {
        let start = chrono::DateTime::from_timestamp(i64::try_from(now).ok()?, 0)?;
        let next = self.0.find_next_occurrence(&start, false).ok()?;
        u64::try_from(next.timestamp()).ok()
    }
}

/// The Unix second of the first firing of `schedule` (a 6-field cron
/// expression, seconds first, in UTC, as the scheduler reads it) after
/// `now`; `None` when it does not parse or never fires again.
pub fn next_firing(schedule: &str, now: u64) -> Option<u64> {
    Schedule::parse(schedule)?.next_firing(now)
}

/// How long past its scheduled start a build is given to finish: twice
/// the last build's duration (unknown on a replica: none), within
/// [`MIN_BUILD_MARGIN`] and [`MAX_BUILD_MARGIN`].
pub fn build_margin(last_build: Option<Duration>) -> Duration {
    (last_build.unwrap_or_default() * 2).clamp(MIN_BUILD_MARGIN, MAX_BUILD_MARGIN)
}

/// The longest next-check hint sent for a scheduled build (unless the
/// configured fallback is longer): agents wait at most an hour whatever a
/// server says (`agent::engine::schedule::MAX_SERVER_DELAY`), and a CDN
/// should not keep an answer longer than agents would.
pub const MAX_NEXT_CHECK: Duration = Duration::from_secs(60 * 60);

/// The next-check hint at `now`: until `next_build_at` (Unix seconds, 0
/// when unknown) plus `margin`, at most [`MAX_NEXT_CHECK`] or `fallback`,
/// whichever is longer; `fallback` when the build is unknown or already
/// overdue.
pub fn next_check(next_build_at: u64, margin: Duration, now: u64, fallback: Duration) -> Duration {
    if next_build_at <= now {
        return fallback;
    }
    (Duration::from_secs(next_build_at - now) + margin).min(MAX_NEXT_CHECK.max(fallback))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2027-01-15T10:07:00Z.
    const NOW: u64 = 1_800_007_620;

    #[test]
    fn the_next_firing_follows_the_schedule_in_utc() {
        let next = next_firing("0 */30 * * * *", NOW).unwrap();
        assert_eq!(next % 1800, 0);
        assert!(next > NOW && next - NOW <= 1800, "{next}");
        // Exactly at a firing: the one after it.
        assert_eq!(next_firing("0 */30 * * * *", next), Some(next + 1800));
        assert_eq!(next_firing("* * * * * *", NOW), Some(NOW + 1));
        assert_eq!(next_firing("not cron", NOW), None);
        // Five fields (no seconds) are not what the scheduler accepts.
        assert_eq!(next_firing("*/30 * * * *", NOW), None);
    }

    #[test]
    fn agents_wait_for_the_next_build_to_finish_or_fall_back() {
        let fallback = Duration::from_secs(300);
        let margin = build_margin(Some(Duration::from_secs(40)));
        assert_eq!(margin, Duration::from_secs(80));
        assert_eq!(build_margin(None), MIN_BUILD_MARGIN);
        assert_eq!(build_margin(Some(Duration::from_secs(3600))), MAX_BUILD_MARGIN);
        assert_eq!(
            next_check(NOW + 1000, margin, NOW, fallback),
            Duration::from_secs(1080)
        );
        // A build far off: at most an hour, or the fallback when longer.
        assert_eq!(next_check(NOW + 86_400, margin, NOW, fallback), MAX_NEXT_CHECK);
        let long = Duration::from_secs(7200);
        assert_eq!(next_check(NOW + 86_400, margin, NOW, long), long);
        // Overdue, or no schedule known.
        assert_eq!(next_check(NOW, margin, NOW, fallback), fallback);
        assert_eq!(next_check(0, margin, NOW, fallback), fallback);
    }
}
