//! The background update task: one per agent, started explicitly, stopped
//! by [`Agent::shutdown`](crate::Agent::shutdown),
//! [`UpdateHandle::shutdown`], or dropping the handle or the agent.
//!
//! The task only sleeps and calls the lists component's update of one list
//! ([`Lists::update_one`]); every decision about *when* is
//! [`UpdateSchedule`]'s. The loop itself ([`run_schedule`]) takes the update
//! step and the wall clock as closures, so tests drive it with a scripted
//! publisher under `tokio::time::pause()`, and move the wall clock alone
//! to play a suspended machine.
//!
//! # Suspend
//!
//! Tokio's timers run on the monotonic clock, which on Linux and macOS does
//! not advance while the machine is suspended: a laptop that sleeps 90
//! minutes in the middle of a 30-minute wait would, on waking, still wait
//! the rest of it in awake time, while the snapshot it holds looks fresh
//! by a clock that did not see the night pass either. So each list's next
//! check is due at a wall-clock time (the agent's
//! [`TimeProvider`](crate::TimeProvider)), and the task never sleeps
//! longer than [`WAKE_SLICE`] before reading that clock again: a check
//! that came due during a suspend runs within one slice of waking. A wall
//! clock set backwards must not hold updates off for as long as it was set
//! back, so a check is also due once its delay has passed on the monotonic
//! clock; a clock set forwards brings checks forward, once.

use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::Error;
use crate::engine::schedule::UpdateSchedule;
use crate::lists::Lists;
use crate::shared::{Shared, lock};
use crate::update::ListUpdate;

/// The longest the update task sleeps before it reads the wall clock again
/// (see the module docs, "Suspend"): 30 seconds. Half the shortest wait
/// the schedule ever sets ([`MIN_CHECK_INTERVAL`](crate::engine::schedule::MIN_CHECK_INTERVAL)),
/// so even that wait is read against the wall clock; after a suspend, the
/// checks that came due meanwhile run within 30 s of waking, far inside a
/// snapshot's lifetime (two hours by default) and the promise of one build
/// interval plus the next-check hint. Two wake-ups a minute, without I/O,
/// cost nothing measurable.
pub(crate) const WAKE_SLICE: Duration = Duration::from_secs(30);

/// The running task, as the agent holds it.
#[derive(Debug)]
struct Running {
    /// Set to `true` to stop the task.
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Where the agent keeps its running task, if any.
type TaskSlot = Mutex<Option<Running>>;

/// The background updates of an agent, from
/// [`Agent::start_updates`](crate::Agent::start_updates).
///
/// Dropping the handle stops the updates (the task ends at its next await
/// point, abandoning a download in progress); keep it for as long as the
/// agent should stay up to date. [`UpdateHandle::shutdown`] stops them and
/// waits until the task has ended.
#[must_use = "dropping the UpdateHandle stops the background updates"]
pub struct UpdateHandle {
    stop: watch::Sender<bool>,
    /// The agent's task slot: gone with the agent.
    updates: Weak<TaskSlot>,
}

impl std::fmt::Debug for UpdateHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateHandle")
            .field("stop", &self.stop)
            .field("agent", &self.updates)
            .finish()
    }
}

impl UpdateHandle {
    /// Whether the task is still running.
    pub fn is_running(&self) -> bool {
        !*self.stop.borrow()
            && self
                .updates
                .upgrade()
                .is_some_and(|slot| running(&slot, &self.stop))
    }

    /// Stops the updates and waits until the task has ended. The agent keeps
    /// answering lookups from the snapshots it has.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let task = self
            .updates
            .upgrade()
            .and_then(|slot| take_task(&slot, Some(&self.stop)));
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for UpdateHandle {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// Whether `stop` belongs to the task the agent holds and it has not ended.
fn running(slot: &TaskSlot, stop: &watch::Sender<bool>) -> bool {
    lock(slot)
        .as_ref()
        .is_some_and(|r| r.stop.same_channel(stop) && !r.task.is_finished())
}

/// Takes the agent's task out if it is the one of `stop` (or any, for
/// `None`), after signalling it to stop.
fn take_task(slot: &TaskSlot, stop: Option<&watch::Sender<bool>>) -> Option<JoinHandle<()>> {
    let mut updater = lock(slot);
    if stop.is_some_and(|s| updater.as_ref().is_some_and(|r| !r.stop.same_channel(s))) {
        return None;
    }
    let running = updater.take()?;
    running.stop.send_replace(true);
    Some(running.task)
}

/// An agent's background updates: the timetable and the task, if started.
#[derive(Debug)]
pub(crate) struct Updates {
    /// The timetable every list starts from.
    schedule: UpdateSchedule,
    /// The background update task, if started. Only the agent holds it
    /// strongly: an [`UpdateHandle`] outliving the agent finds it gone.
    task: Arc<TaskSlot>,
    /// Dropped with the agent: the update task notices and exits.
    alive: watch::Sender<()>,
}

impl Updates {
    /// No task yet; `schedule` is the timetable each list will start from.
    pub(crate) fn new(schedule: UpdateSchedule) -> Self {
        Self {
            schedule,
            task: Arc::new(Mutex::new(None)),
            alive: watch::channel(()).0,
        }
    }

    /// Starts the task over `lists`, drawing its RNG from `shared`'s; see
    /// [`Agent::start_updates`](crate::Agent::start_updates).
    ///
    /// # Errors
    ///
    /// [`Error::NoRuntime`] outside a tokio runtime;
    /// [`Error::UpdatesAlreadyRunning`] if they are already running.
    pub(crate) fn start(&self, lists: &Arc<Lists>, shared: &Arc<Shared>) -> Result<UpdateHandle, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let mut updater = lock(&self.task);
        if updater
            .as_ref()
            .is_some_and(|r| !r.task.is_finished() && !*r.stop.borrow())
        {
            return Err(Error::UpdatesAlreadyRunning);
        }
        let (stop, stop_rx) = watch::channel(false);
        let alive = self.alive.subscribe();
        let task = runtime.spawn(run(
            Arc::downgrade(&self.task),
            Arc::downgrade(lists),
            Arc::downgrade(shared),
            self.schedule.clone(),
            stop_rx,
            alive,
        ));
        *updater = Some(Running {
            stop: stop.clone(),
            task,
        });
        Ok(UpdateHandle {
            stop,
            updates: Arc::downgrade(&self.task),
        })
    }

    /// Stops the task, if running, and waits until it has ended.
    pub(crate) async fn shutdown(&self) {
        if let Some(task) = take_task(&self.task, None) {
            let _ = task.await;
        }
    }

    /// Whether the task is running.
    pub(crate) fn is_running(&self) -> bool {
        lock(&self.task)
            .as_ref()
            .is_some_and(|r| !r.task.is_finished() && !*r.stop.borrow())
    }
}

/// The outcome of one list check, as the schedule needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    /// A new snapshot or none needed, with the publisher's next-check hint.
    Success {
        /// The hint, if any.
        hint: Option<Duration>,
    },
    /// The check failed, with the publisher's `Retry-After`, if any.
    Failure {
        /// The `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
}

impl Checked {
    fn of(update: &ListUpdate, hint: Option<Duration>) -> Self {
        match update {
            ListUpdate::Failed { error, .. } => Self::Failure {
                retry_after: error.retry_after(),
            },
            _ => Self::Success { hint },
        }
    }
}

/// The task body: [`run_schedule`] over the lists, each step upgrading the
/// weak references (so a dropped agent ends the task). A step holds the
/// agent's task slot as well as the lists: an agent dropped during a step
/// keeps its slot until the step ends, so [`UpdateHandle::is_running`] stays
/// true and [`UpdateHandle::shutdown`] still waits for the task.
async fn run(
    slot: Weak<TaskSlot>,
    lists: Weak<Lists>,
    shared: Weak<Shared>,
    schedule: UpdateSchedule,
    stop: watch::Receiver<bool>,
    alive: watch::Receiver<()>,
) {
    let Some(current) = lists.upgrade() else {
        return;
    };
    let fresh_for: Vec<Option<Duration>> = (0..current.len()).map(|i| current.time_to_expiry(i)).collect();
    drop(current);
    let rng = shared
        .upgrade()
        .and_then(|shared| shared.with_rng(|r| rand::rngs::StdRng::from_rng(r).ok()));
    let Some(rng) = rng else {
        return;
    };
    let Some(clock) = shared.upgrade().map(|shared| shared.clock()) else {
        return;
    };
    let wall = move || clock.now();
    let scheduled = {
        let lists = lists.clone();
        move |index: usize, at: Option<SystemTime>| {
            if let Some(lists) = lists.upgrade() {
                lists.set_next_check(index, at);
            }
        }
    };
    let step = move |index: usize| {
        let lists = lists.clone();
        let slot = slot.clone();
        async move {
            let _slot = slot.upgrade()?;
            let lists = lists.upgrade()?;
            let (update, hint) = lists.update_one(index).await?;
            Some(Checked::of(&update, hint))
        }
    };
    let task = Task {
        wall,
        step,
        scheduled,
    };
    run_schedule(fresh_for, schedule, rng, stop, alive, task).await;
}

/// What [`run_schedule`] runs with, as closures.
pub(crate) struct Task<W, F, S> {
    /// The wall clock (the agent's [`TimeProvider`](crate::TimeProvider)).
    pub(crate) wall: W,
    /// The update of list `i`: the outcome, or `None` when the agent is
    /// gone.
    pub(crate) step: F,
    /// Told each list's next check when it is set: the wall-clock time it
    /// is due (`None` when that clock cannot say it).
    pub(crate) scheduled: S,
}

/// When a list's next check is due: at a wall-clock time, or once its delay
/// has passed on the monotonic clock, whichever comes first (see the module
/// docs, "Suspend").
#[derive(Debug, Clone, Copy)]
struct Due {
    /// The wall-clock time; `None` past what the clock can say.
    wall: Option<SystemTime>,
    /// The same delay on the monotonic clock: a bound for a wall clock set
    /// backwards.
    monotonic: Instant,
}

impl Due {
    /// Due `delay` after `wall_now` and `monotonic_now`.
    fn after(delay: Duration, wall_now: SystemTime, monotonic_now: Instant) -> Self {
        Self {
            wall: wall_now.checked_add(delay),
            monotonic: monotonic_now + delay,
        }
    }

    /// The time left until it is due at `wall_now` / `monotonic_now`: the
    /// shorter of the two clocks' (zero once either has reached it).
    fn left(&self, wall_now: SystemTime, monotonic_now: Instant) -> Duration {
        let monotonic = self.monotonic.saturating_duration_since(monotonic_now);
        self.wall.map_or(monotonic, |wall| {
            wall.duration_since(wall_now)
                .unwrap_or(Duration::ZERO)
                .min(monotonic)
        })
    }
}

/// Runs the update schedule of `fresh_for.len()` lists until stopped:
/// sleeps until the earliest list is due — by `task.wall`, or by tokio's
/// clock once its delay has passed there, reading the wall clock again at
/// least every [`WAKE_SLICE`] (see the module docs, "Suspend") — runs
/// `task.step` for it, and asks its [`UpdateSchedule`] (a copy of
/// `schedule` per list) for the next delay, which `task.scheduled` is told
/// as a wall-clock time. `fresh_for[i]` is how long list `i`'s snapshot
/// stays fresh, for the initial jitter. Ends when `stop` turns `true` or
/// closes, when `alive` closes, or when `task.step` returns `None` (the
/// agent is gone).
pub(crate) async fn run_schedule<W, F, Fut, S>(
    fresh_for: Vec<Option<Duration>>,
    schedule: UpdateSchedule,
    mut rng: impl Rng,
    mut stop: watch::Receiver<bool>,
    mut alive: watch::Receiver<()>,
    task: Task<W, F, S>,
) where
    W: Fn() -> SystemTime,
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Option<Checked>>,
    S: FnMut(usize, Option<SystemTime>),
{
    let Task {
        wall,
        mut step,
        mut scheduled,
    } = task;
    let (wall_start, start) = (wall(), Instant::now());
    let mut schedules: Vec<UpdateSchedule> = fresh_for.iter().map(|_| schedule.clone()).collect();
    let mut due: Vec<Due> = schedules
        .iter()
        .zip(&fresh_for)
        .map(|(s, fresh)| Due::after(s.initial_delay(*fresh, &mut rng), wall_start, start))
        .collect();
    for (index, at) in due.iter().enumerate() {
        scheduled(index, at.wall);
    }
    loop {
        let (wall_now, now) = (wall(), Instant::now());
        let Some((index, left)) = due
            .iter()
            .map(|d| d.left(wall_now, now))
            .enumerate()
            .min_by_key(|(_, left)| *left)
        else {
            return;
        };
        if !left.is_zero() {
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return,
                _ = alive.changed() => return,
                () = tokio::time::sleep(left.min(WAKE_SLICE)) => {}
            }
            continue;
        }
        let checked = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            checked = step(index) => checked,
        };
        let Some(checked) = checked else {
            return;
        };
        let (Some(schedule), Some(slot)) = (schedules.get_mut(index), due.get_mut(index)) else {
            return;
        };
        let delay = match checked {
            Checked::Success { hint } => schedule.on_success(hint, &mut rng),
            Checked::Failure { retry_after } => schedule.on_failure(retry_after, &mut rng),
        };
        tracing::debug!(list = index, ?checked, ?delay, "next update check scheduled");
        *slot = Due::after(delay, wall(), Instant::now());
        scheduled(index, slot.wall);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use rand::rngs::StdRng;

    use super::*;
    use crate::engine::schedule::{COLD_START_JITTER, MIN_CHECK_INTERVAL, UPDATE_BACKOFF};

    type StepFuture = std::pin::Pin<Box<dyn Future<Output = Option<Checked>> + Send>>;

    /// [`Task`] as the tests run it.
    type TestTask = Task<
        Box<dyn Fn() -> SystemTime + Send>,
        Box<dyn FnMut(usize) -> StepFuture + Send>,
        Box<dyn FnMut(usize, Option<SystemTime>) + Send>,
    >;

    /// Records when each step ran (tokio's paused clock, since the start)
    /// and answers from a script.
    struct Script {
        start: Instant,
        calls: Mutex<Vec<(usize, Duration)>>,
        answers: Mutex<Vec<Checked>>,
        scheduled: Mutex<Vec<(usize, Option<SystemTime>)>>,
    }

    impl Script {
        fn new(answers: Vec<Checked>) -> Arc<Self> {
            Arc::new(Self {
                start: Instant::now(),
                calls: Mutex::new(Vec::new()),
                answers: Mutex::new(answers.into_iter().rev().collect()),
                scheduled: Mutex::new(Vec::new()),
            })
        }

        fn step(self: &Arc<Self>) -> impl FnMut(usize) -> StepFuture + Send + use<> {
            let script = Arc::clone(self);
            move |index| {
                let script = Arc::clone(&script);
                Box::pin(async move {
                    lock(&script.calls).push((index, script.start.elapsed()));
                    Some(
                        lock(&script.answers)
                            .pop()
                            .unwrap_or(Checked::Success { hint: None }),
                    )
                })
            }
        }

        fn calls(&self) -> Vec<(usize, Duration)> {
            lock(&self.calls).clone()
        }

        /// The task: this script's steps, `wall` for the wall clock, and
        /// the due times recorded in `self.scheduled`.
        fn task(self: &Arc<Self>, wall: &Arc<Wall>) -> TestTask {
            let clock = Arc::clone(wall);
            let script = Arc::clone(self);
            Task {
                wall: Box::new(move || clock.now()),
                step: Box::new(self.step()),
                scheduled: Box::new(move |index, at| lock(&script.scheduled).push((index, at))),
            }
        }
    }

    /// A wall clock that runs with tokio's (paused) clock, plus an offset
    /// the test moves alone: a suspended machine (forward) or a clock set
    /// back.
    struct Wall {
        start: Instant,
        at_start: SystemTime,
        offset: Mutex<(Duration, bool)>,
    }

    impl Wall {
        fn new() -> Arc<Self> {
            Arc::new(Self {
                start: Instant::now(),
                at_start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
                offset: Mutex::new((Duration::ZERO, true)),
            })
        }

        fn now(&self) -> SystemTime {
            let (offset, forward) = *lock(&self.offset);
            let t = self.at_start + self.start.elapsed();
            if forward { t + offset } else { t - offset }
        }

        /// The machine sleeps `by`: the wall clock moves, tokio's does not.
        fn suspend(&self, by: Duration) {
            let mut offset = lock(&self.offset);
            assert!(offset.1);
            offset.0 += by;
        }

        /// The clock is set back by `by`.
        fn set_back(&self, by: Duration) {
            *lock(&self.offset) = (by, false);
        }
    }

    const MIN: Duration = Duration::from_secs(60);

    /// `run_schedule` spawned for lists whose snapshots are fresh for
    /// `fresh_for`, every 10 minutes by default, its RNG seeded with `seed`,
    /// its checks `script`'s on `wall`: the task, its stop switch, and the
    /// agent's liveness handle (the task ends once that is dropped).
    fn spawn_schedule(
        script: &Arc<Script>,
        wall: &Arc<Wall>,
        fresh_for: Vec<Option<Duration>>,
        seed: u64,
    ) -> (
        tokio::task::JoinHandle<()>,
        watch::Sender<bool>,
        watch::Sender<()>,
    ) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let (alive_tx, alive_rx) = watch::channel(());
        let task = tokio::spawn(run_schedule(
            fresh_for,
            UpdateSchedule::new(10 * MIN),
            StdRng::seed_from_u64(seed),
            stop_rx,
            alive_rx,
            script.task(wall),
        ));
        (task, stop_tx, alive_tx)
    }

    #[tokio::test(start_paused = true)]
    async fn success_follows_the_hint_failures_back_off_and_retry_after_is_honoured() {
        let script = Script::new(vec![
            Checked::Success { hint: Some(30 * MIN) },
            Checked::Failure { retry_after: None },
            Checked::Failure { retry_after: None },
            Checked::Failure {
                retry_after: Some(20 * MIN),
            },
            Checked::Success { hint: None },
        ]);
        let (task, stop_tx, _alive_tx) = spawn_schedule(&script, &Wall::new(), vec![None], 1);
        tokio::time::sleep(4 * 60 * MIN).await;
        stop_tx.send_replace(true);
        task.await.unwrap_or_default();

        let at: Vec<Duration> = script.calls().iter().map(|(_, t)| *t).collect();
        assert!(at.len() >= 6, "{at:?}");
        // Initial jitter: a cold list is checked within 5 s.
        assert!(at[0] <= COLD_START_JITTER);
        let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
        // The 30-minute hint, plus at most 10 %.
        assert!(gaps[0] >= 30 * MIN && gaps[0] <= 33 * MIN, "{gaps:?}");
        // First and second failure: full jitter under 1 and 2 minutes.
        assert!(gaps[1] <= UPDATE_BACKOFF.ceiling(1), "{gaps:?}");
        assert!(gaps[2] <= UPDATE_BACKOFF.ceiling(2), "{gaps:?}");
        // Retry-After: at least 20 minutes.
        assert!(gaps[3] >= 20 * MIN, "{gaps:?}");
        // Success resets: back to the 10-minute interval without a hint.
        assert!(gaps[4] >= 10 * MIN && gaps[4] <= 11 * MIN, "{gaps:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_warm_list_waits_longer_than_a_cold_one_and_lists_are_scheduled_apart() {
        let script = Script::new(vec![]);
        let (task, stop_tx, _alive_tx) =
            spawn_schedule(&script, &Wall::new(), vec![None, Some(2 * 60 * MIN)], 9);
        tokio::time::sleep(6 * MIN).await;
        stop_tx.send_replace(true);
        task.await.unwrap_or_default();
        let calls = script.calls();
        let first_of = |list| calls.iter().find(|(i, _)| *i == list).map(|(_, t)| *t);
        assert!(first_of(0).is_some_and(|t| t <= COLD_START_JITTER), "{calls:?}");
        assert!(first_of(1).is_some_and(|t| t <= 5 * MIN), "{calls:?}");
        // Each list once at start; the next checks are 10 minutes away.
        assert_eq!(calls.len(), 2, "{calls:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_agent_side_ends_the_task_at_once() {
        let script = Script::new(vec![]);
        let (task, _stop_tx, alive_tx) = spawn_schedule(&script, &Wall::new(), vec![Some(2 * 60 * MIN)], 3);
        tokio::task::yield_now().await;
        drop(alive_tx);
        let ended = tokio::time::timeout(Duration::from_millis(1), task).await;
        assert!(ended.is_ok(), "the task waited for its timer");
        assert!(script.calls().is_empty());
    }

    /// A machine suspended for 90 minutes, 10 minutes into a 30-minute
    /// wait: tokio's clock did not move, the wall clock did, and the check
    /// runs within one slice of waking rather than 20 awake minutes later.
    #[tokio::test(start_paused = true)]
    async fn a_check_that_came_due_during_a_suspend_runs_within_a_slice_of_waking() {
        let script = Script::new(vec![Checked::Success { hint: Some(30 * MIN) }]);
        let wall = Wall::new();
        let (task, stop_tx, _alive_tx) = spawn_schedule(&script, &wall, vec![None], 5);
        tokio::time::sleep(COLD_START_JITTER + 10 * MIN).await;
        assert_eq!(script.calls().len(), 1, "{:?}", script.calls());
        // The check is due 30 to 33 minutes after the first, on the wall
        // clock.
        let first = script.calls()[0].1;
        let due = lock(&script.scheduled).last().and_then(|(_, at)| *at).unwrap();
        let after_first = due.duration_since(wall.at_start + first).unwrap();
        assert!(
            after_first >= 30 * MIN && after_first <= 33 * MIN,
            "{after_first:?}"
        );

        let woke = script.start.elapsed();
        wall.suspend(90 * MIN);
        tokio::time::sleep(WAKE_SLICE + Duration::from_secs(1)).await;
        stop_tx.send_replace(true);
        task.await.unwrap_or_default();
        let calls = script.calls();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(calls[1].1 - woke <= WAKE_SLICE, "{calls:?} woke at {woke:?}");
    }

    /// A wall clock set back a day does not hold the checks off for a day:
    /// they come after their delay on the monotonic clock.
    #[tokio::test(start_paused = true)]
    async fn a_clock_set_back_does_not_stall_the_updates() {
        let script = Script::new(vec![Checked::Success { hint: Some(30 * MIN) }]);
        let wall = Wall::new();
        let (task, stop_tx, _alive_tx) = spawn_schedule(&script, &wall, vec![None], 6);
        tokio::time::sleep(COLD_START_JITTER + MIN).await;
        wall.set_back(24 * 60 * MIN);
        tokio::time::sleep(40 * MIN).await;
        stop_tx.send_replace(true);
        task.await.unwrap_or_default();
        let at: Vec<Duration> = script.calls().iter().map(|(_, t)| *t).collect();
        assert!(at.len() >= 2, "{at:?}");
        assert!(at[1] - at[0] >= 30 * MIN && at[1] - at[0] <= 33 * MIN, "{at:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_tiny_hint_is_raised_to_the_minimum_interval() {
        let script = Script::new(vec![
            Checked::Success {
                hint: Some(Duration::from_secs(1)),
            },
            Checked::Success {
                hint: Some(Duration::from_secs(1)),
            },
        ]);
        let (task, stop_tx, _alive_tx) = spawn_schedule(&script, &Wall::new(), vec![None], 4);
        tokio::time::sleep(3 * MIN).await;
        stop_tx.send_replace(true);
        task.await.unwrap_or_default();
        let at: Vec<Duration> = script.calls().iter().map(|(_, t)| *t).collect();
        assert!(at.windows(2).all(|w| w[1] - w[0] >= MIN_CHECK_INTERVAL), "{at:?}");
    }
}
