//! A list's cron schedule, run: when its next scheduled build fires.
//!
//! The loop ([`run_schedule`]) takes the wall clock and the firing as
//! closures, so tests drive it under `tokio::time::pause()` and move the
//! wall clock alone, as the agent's update task is tested.
//!
//! # Clocks
//!
//! A firing is a wall-clock time, the schedule's next after the wall
//! clock's now ([`Schedule::next_firing`], in UTC: the instant a build's
//! freshness record names as the next build, which agents' next-check hint
//! follows). A wall clock set back (NTP correcting a clock that ran ahead,
//! an operator's `date -s`) must not hold builds off for as long as it was
//! set back — new listings unpublished, agents' snapshots expiring — so a
//! firing is also due once the time to it, as the wall clock said when it
//! was scheduled, has passed on the monotonic clock (tokio's). The loop
//! never sleeps longer than [`WAKE_SLICE`] before reading the wall clock
//! again: a firing that came due during a suspend (the monotonic clock
//! does not advance then) or that a clock set forward has reached fires
//! within a slice, once (not once per firing passed). After each firing,
//! the next is the schedule's first after the wall clock's now.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::config::schedule::Schedule;

/// The longest the loop sleeps before it reads the wall clock again: a
/// firing that came due during a suspend, or that a clock set forward
/// has reached, fires within 30 s.
const WAKE_SLICE: Duration = Duration::from_secs(30);

/// A firing the wall clock is less than this short of, when the monotonic
/// clock has fired it, is the one just fired (a schedule's resolution is a
/// second; the two clocks part by a few milliseconds as NTP slews the wall
/// clock): it is not fired again as the wall clock reaches it.
const SAME_FIRING: Duration = Duration::from_secs(1);

/// When a firing is due: at its wall-clock time, or once the time to it
/// has passed on the monotonic clock, whichever comes first.
#[derive(Debug, Clone, Copy)]
struct Due {
    /// The firing, on the wall clock.
    wall: SystemTime,
    /// The same wait on the monotonic clock: a bound for a wall clock set
    /// back. `None` past what that clock can say.
    monotonic: Option<Instant>,
}

impl Due {
    /// The schedule's first firing after `from` (whole seconds), waited for
    /// from `wall_now` and `monotonic_now`; `None` when it never fires
    /// again.
    fn first_after(
        schedule: &Schedule,
        from: SystemTime,
        wall_now: SystemTime,
        monotonic_now: Instant,
    ) -> Option<Self> {
        let from = from.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let wall = UNIX_EPOCH.checked_add(Duration::from_secs(schedule.next_firing(from)?))?;
        let wait = wall.duration_since(wall_now).unwrap_or(Duration::ZERO);
        Some(Self {
            wall,
            monotonic: monotonic_now.checked_add(wait),
        })
    }

    /// The time left until it is due at `wall_now` / `monotonic_now`: the
    /// shorter of the two clocks' (zero once either has reached it).
    fn left(&self, wall_now: SystemTime, monotonic_now: Instant) -> Duration {
        let wall = self.wall.duration_since(wall_now).unwrap_or(Duration::ZERO);
        self.monotonic
            .map_or(wall, |m| wall.min(m.saturating_duration_since(monotonic_now)))
    }
}

/// Runs `list`'s `schedule` until `fire` returns `false` (the publisher is gone), the
/// schedule never fires again, or the task is dropped: sleeps until the next
/// firing is due — by `wall`, or by tokio's clock once the wait to it has
/// passed there, reading `wall` again at least every [`WAKE_SLICE`] (see
/// the module docs) — calls `fire`, and schedules the next firing after
/// `wall`'s now.
pub(crate) async fn run_schedule<W, F>(list: &str, schedule: &Schedule, wall: W, mut fire: F)
where
    W: Fn() -> SystemTime,
    F: FnMut() -> bool,
{
    let wall_now = wall();
    let Some(mut due) = Due::first_after(schedule, wall_now, wall_now, Instant::now()) else {
        return;
    };
    loop {
        let left = due.left(wall(), Instant::now());
        if !left.is_zero() {
            tokio::time::sleep(left.min(WAKE_SLICE)).await;
            continue;
        }
        let (wall_now, now) = (wall(), Instant::now());
        // Fired by the monotonic clock before the wall clock reached it.
        let behind = due.wall.duration_since(wall_now).unwrap_or(Duration::ZERO);
        if behind >= SAME_FIRING {
            tracing::warn!(
                list,
                behind_s = behind.as_secs(),
                "the wall clock was set back since this build was scheduled; building on time by the \
                 monotonic clock, then on the schedule by the wall clock"
            );
        }
        if !fire() {
            return;
        }
        let mut next = Due::first_after(schedule, wall_now, wall_now, now);
        if let Some(n) = next
            && !behind.is_zero()
            && n.wall < wall_now + SAME_FIRING
        {
            next = Due::first_after(schedule, n.wall, wall_now, now);
        }
        let Some(next) = next else {
            return;
        };
        tracing::debug!(list, next = ?next.wall, "next scheduled build");
        due = next;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A wall clock that runs with tokio's (paused) clock, plus an offset
    /// the test moves alone: a clock set back, or set forward (a suspend
    /// looks the same).
    struct Wall {
        start: Instant,
        at_start: SystemTime,
        offset: Mutex<(Duration, bool)>,
    }

    impl Wall {
        /// Starts at 2027-01-15T08:00:00Z, on the hour.
        fn new() -> Arc<Self> {
            Arc::new(Self {
                start: Instant::now(),
                at_start: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
                offset: Mutex::new((Duration::ZERO, true)),
            })
        }

        fn now(&self) -> SystemTime {
            let (offset, forward) = *self.offset.lock().unwrap();
            let t = self.at_start + self.start.elapsed();
            if forward { t + offset } else { t - offset }
        }

        /// The clock is set back by `by`.
        fn set_back(&self, by: Duration) {
            *self.offset.lock().unwrap() = (by, false);
        }

        /// The clock is set forward by `by`.
        fn set_forward(&self, by: Duration) {
            *self.offset.lock().unwrap() = (by, true);
        }
    }

    /// When each firing came: tokio's clock since the start, and the wall
    /// clock then.
    type Fired = Arc<Mutex<Vec<(Duration, SystemTime)>>>;

    /// `schedule` run on `wall`: the task, and when it fired.
    fn spawn(schedule: &str, wall: &Arc<Wall>) -> (tokio::task::JoinHandle<()>, Fired) {
        let schedule = Schedule::parse(schedule).unwrap();
        let fired = Arc::new(Mutex::new(Vec::new()));
        let (clock, record, start) = (Arc::clone(wall), Arc::clone(&fired), Instant::now());
        let task = tokio::spawn(async move {
            let at = Arc::clone(&clock);
            run_schedule(
                "test",
                &schedule,
                move || clock.now(),
                move || {
                    record.lock().unwrap().push((start.elapsed(), at.now()));
                    true
                },
            )
            .await;
        });
        (task, fired)
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// When it fired, on tokio's clock.
    fn times(fired: &Mutex<Vec<(Duration, SystemTime)>>) -> Vec<Duration> {
        fired.lock().unwrap().iter().map(|(t, _)| *t).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn it_fires_on_the_schedule_by_the_wall_clock() {
        let wall = Wall::new();
        let (task, fired) = spawn("*/5 * * * * *", &wall);
        tokio::time::sleep(secs(17)).await;
        task.abort();
        assert_eq!(times(&fired), [secs(5), secs(10), secs(15)]);
    }

    /// The publisher's clock ran an hour ahead and NTP set it back between
    /// two firings: the next firing was an hour away by the wall clock, and
    /// with the wall clock alone (`tokio-cron-scheduler`'s rule: due once
    /// the wall clock reaches the stored firing) nothing was built for that
    /// hour. It fires when its wait has passed on the monotonic clock, then
    /// on the schedule by the corrected clock.
    #[tokio::test(start_paused = true)]
    async fn a_clock_set_back_an_hour_does_not_stall_the_builds() {
        let wall = Wall::new();
        let (task, fired) = spawn("*/5 * * * * *", &wall);
        tokio::time::sleep(secs(12)).await;
        wall.set_back(secs(3600));
        tokio::time::sleep(secs(60)).await;
        task.abort();
        let at = times(&fired);
        // Every 5 s from 5 to 70 s, through the clock's step back at 12 s.
        assert_eq!(at.len(), 14, "{at:?}");
        assert_eq!(at[..4], [secs(5), secs(10), secs(15), secs(20)], "{at:?}");
        assert!(at.windows(2).all(|w| w[1] - w[0] == secs(5)), "{at:?}");
        // After the first firing by the monotonic clock, on the corrected
        // wall clock's firings.
        let walls: Vec<SystemTime> = fired.lock().unwrap().iter().map(|(_, w)| *w).collect();
        assert_eq!(walls[3], wall.at_start + secs(15) - secs(3600) + secs(5));
        assert!(
            walls[4..]
                .iter()
                .all(|w| w.duration_since(UNIX_EPOCH).unwrap().as_secs() % 5 == 0),
            "{walls:?}"
        );
    }

    /// An hourly schedule, its clock set back 10 minutes half an hour
    /// before a firing: it fires on time by the monotonic clock, and again
    /// when the corrected wall clock reaches the firing (10 minutes later),
    /// as the next-check hint of the first build says.
    #[tokio::test(start_paused = true)]
    async fn an_hourly_firing_comes_on_time_after_a_clock_set_back() {
        let wall = Wall::new();
        let (task, fired) = spawn("0 0 * * * *", &wall);
        tokio::time::sleep(secs(30 * 60)).await;
        wall.set_back(secs(10 * 60));
        tokio::time::sleep(secs(60 * 60)).await;
        task.abort();
        assert_eq!(times(&fired), [secs(3600), secs(3600 + 600)]);
    }

    /// A clock set forward past the next firing (an hourly schedule, the
    /// clock set 2 hours forward 10 minutes in): it fires within a slice,
    /// once, then on the hour of the new clock.
    #[tokio::test(start_paused = true)]
    async fn a_clock_set_forward_fires_at_once_and_once() {
        let wall = Wall::new();
        let (task, fired) = spawn("0 0 * * * *", &wall);
        tokio::time::sleep(secs(10 * 60)).await;
        wall.set_forward(secs(2 * 3600));
        tokio::time::sleep(secs(60 * 60)).await;
        task.abort();
        let at = times(&fired);
        assert_eq!(at.len(), 2, "{at:?}");
        assert!(
            at[0] >= secs(10 * 60) && at[0] <= secs(10 * 60) + WAKE_SLICE,
            "{at:?}"
        );
        // The new clock read 10:10 then: the next firing is 11:00.
        assert_eq!(at[1], secs(60 * 60));
    }

    /// A wall clock a little behind the monotonic one at a firing (set back
    /// half a second, as NTP may step it): the monotonic clock fires it, and
    /// the wall clock reaching it half a second later does not fire it again.
    #[tokio::test(start_paused = true)]
    async fn a_firing_is_not_fired_twice_by_the_two_clocks() {
        let wall = Wall::new();
        let (task, fired) = spawn("*/5 * * * * *", &wall);
        tokio::time::sleep(secs(2)).await;
        wall.set_back(Duration::from_millis(500));
        tokio::time::sleep(secs(13)).await;
        task.abort();
        let at = times(&fired);
        assert_eq!(at[0], secs(5), "{at:?}");
        assert_eq!(at.len(), 2, "{at:?}");
        assert!(at[1] >= secs(10), "{at:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn it_ends_when_the_publisher_is_gone_or_the_schedule_never_fires() {
        let wall = Wall::new();
        let schedule = Schedule::parse("*/5 * * * * *").unwrap();
        let clock = Arc::clone(&wall);
        let mut calls = 0;
        run_schedule(
            "test",
            &schedule,
            move || clock.now(),
            || {
                calls += 1;
                false
            },
        )
        .await;
        assert_eq!(calls, 1);
        // February 30th.
        let never = Schedule::parse("0 0 0 30 2 *").unwrap();
        let clock = Arc::clone(&wall);
        run_schedule("test", &never, move || clock.now(), || unreachable!()).await;
    }
}
