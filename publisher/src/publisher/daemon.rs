//! The daemon: [`Publisher::run`] serves, builds on the schedule and
//! follows the store until told to stop, then lets go of the data
//! directory.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

#[cfg(unix)]
use futures_util::FutureExt as _;
use tokio::net::TcpListener;

use super::{Publisher, cron};
use crate::config::schedule::Schedule;
use crate::error::Error;
use crate::{listener, replica};

/// The lists' schedule loops; dropping it stops them.
struct Schedules(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Schedules {
    fn drop(&mut self) {
        for schedule in &self.0 {
            schedule.abort();
        }
    }
}

/// What a replica logs for SIGUSR1.
const IGNORED: &str = "SIGUSR1 ignored: a replica builds nothing; send it to a builder";

impl Publisher {
    /// Runs the daemon on `listener` until `shutdown` completes: serves what
    /// is on disk at once, builds every list in the background, then
    /// rebuilds each on its cron schedule (by the wall clock, or by the
    /// monotonic clock when the wall clock was set back: [`cron`]). A
    /// replica instead checks the store at once and then every
    /// `replica_poll_s` ([`replica`]). After
    /// `shutdown`, in-flight requests get `drain_timeout_s` to finish.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when a schedule is invalid, or the serving threads
    /// cannot be started (their listeners on the listen address).
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), Error> {
        let drain = self.inner.config.drain_timeout;
        // SIGUSR1 caught before the first builds are spawned: a signal
        // meanwhile is followed by them, one after by a requested build.
        let (stop_requests, requests_stopped) = tokio::sync::oneshot::channel();
        let requested_builds = self.build_on_request(requests_stopped, drain);
        let mut schedules = None;
        let mut _follower = None;
        // Builders on an object store follow it too: another builder may
        // publish the next generation.
        if !self.inner.config.role.builds() || self.inner.config.store.is_some() {
            let follower = replica::Follower::new(self.state(), self.inner.trusted.clone());
            _follower = Some(follower.spawn(self.inner.config.replica_poll));
        }
        let mut initial_builds = Vec::new();
        if self.inner.config.role.builds() {
            schedules = Some(self.start_schedules()?);
            // Every list's first build at once: a slow source of one list
            // must not delay the others (each list has its own build lock).
            for index in 0..self.inner.config.lists.len() {
                let initial = self.clone();
                initial_builds.push(tokio::spawn(async move {
                    initial.build_list(index).await;
                }));
            }
        }
        // Not `axum::serve`: it sets no header-read or write-stall timeout,
        // and serves on this runtime (see `listener`). `serve` returns once
        // every connection has finished after the signal, or the drain
        // deadline has passed and the rest were closed.
        let served =
            listener::serve(listener, self.router(), self.connection_limits(), shutdown, drain).await;
        // Failing to start the serving threads (a listener per thread on
        // the listen address) is reported as the address's problem.
        let served = match served {
            Ok(in_time) => {
                if !in_time {
                    tracing::warn!(
                        drain_s = drain.as_secs(),
                        "drain deadline passed; closing remaining connections"
                    );
                }
                Ok(())
            }
            Err(e) => Err(Error::Config {
                field: "listen".into(),
                reason: format!("serving threads: {e}"),
            }),
        };
        // No scheduled build starts from here.
        drop(schedules);
        // Builds still running (a first one, or one SIGUSR1 asked for) hold
        // the publisher, and with it the lock on the data directory: they
        // get the drain deadline to finish, then are cancelled. A cancelled
        // build's blocking work stops at its next check (`build::Cancel`,
        // set as its task is dropped), publishing nothing; a publish under
        // way finishes (its writes are crash-safe either way).
        let deadline = tokio::time::Instant::now() + drain;
        let _ = stop_requests.send(deadline);
        for mut build in initial_builds {
            if tokio::time::timeout_at(deadline, &mut build).await.is_err() {
                tracing::warn!(
                    drain_s = drain.as_secs(),
                    "a first build did not finish by the drain deadline; cancelled"
                );
                build.abort();
                // Dropped at its next await point; its blocking work stops
                // at its next check and drops the publisher.
                let _ = build.await;
            }
        }
        let _ = requested_builds.await;
        served
    }

    /// A build of list `index` that starts once the list's running build,
    /// if any, has ended; `None` when such a build already waits to start.
    /// A request (a scheduled firing, SIGUSR1) made while one waits is
    /// merged into it: that build starts after the request, so it reads
    /// what the request wanted read. Without this, firings that come
    /// faster than the list's builds end would queue a build each, without
    /// bound, and the list would build back to back ever after.
    fn next_build(&self, index: usize) -> Option<impl Future<Output = ()> + Send + 'static> {
        if self.inner.build_waiting[index].swap(true, Ordering::SeqCst) {
            return None;
        }
        let publisher = self.clone();
        Some(async move {
            // Started once the list's running build, if any, has ended: a
            // later request asks for one more.
            drop(publisher.inner.build_locks[index].lock().await);
            publisher.inner.build_waiting[index].store(false, Ordering::SeqCst);
            publisher.build_list(index).await;
        })
    }

    /// Starts each list's schedule ([`cron::run_schedule`]): each firing
    /// spawns a build of the list ([`Self::next_build`]: it waits for the
    /// list's running build, if any, to end, and a firing while one waits
    /// is merged into it). The loops stop when what this returns is
    /// dropped; builds they started are not waited for (the process's exit
    /// cancels them).
    fn start_schedules(&self) -> Result<Schedules, Error> {
        let lists = &self.inner.config.lists;
        let mut schedules = Vec::with_capacity(lists.len());
        for (index, list) in lists.iter().enumerate() {
            let cron = self.inner.config.schedule_of(index);
            let schedule = Schedule::parse(cron).ok_or_else(|| Error::Config {
                field: format!("lists.{}.schedule {cron:?}", list.name),
                reason: "not a valid 6-field cron expression (sec min hour day month weekday)".into(),
            })?;
            schedules.push(schedule);
        }
        let loops = schedules.into_iter().enumerate().map(|(index, schedule)| {
            let name = lists[index].name.clone();
            // A weak reference: a loop must not keep the publisher (and the
            // lock on its data directory) alive after its last handle is
            // dropped.
            let publisher = Arc::downgrade(&self.inner);
            tokio::spawn(async move {
                let fire = move || {
                    let Some(inner) = publisher.upgrade() else {
                        return false;
                    };
                    let publisher = Self { inner };
                    match publisher.next_build(index) {
                        Some(build) => drop(tokio::spawn(build)),
                        None => tracing::warn!(
                            list = %publisher.inner.config.lists[index].name,
                            "scheduled build merged into the one waiting for the list's running build: \
                             its builds take longer than its schedule's interval"
                        ),
                    }
                    true
                };
                cron::run_schedule(&name, &schedule, SystemTime::now, fire).await;
            })
        });
        Ok(Schedules(loops.collect()))
    }

    /// Builds every list when the process gets SIGUSR1 ("build now", as
    /// at start: after an allowlist or a local source was edited), until
    /// `stop` fires with the drain deadline; then gives the builds it
    /// started until that deadline to finish and cancels the rest (they
    /// stop at their next check, publishing nothing). Each
    /// signal is followed by a build of every list that starts after it: a
    /// list whose build is running gets one more once it ends, and signals
    /// while that one still waits to start are merged into it. A replica,
    /// which builds nothing, logs the signal as ignored (by default it
    /// would end the process).
    fn build_on_request(
        &self,
        mut stop: tokio::sync::oneshot::Receiver<tokio::time::Instant>,
        drain: std::time::Duration,
    ) -> tokio::task::JoinHandle<()> {
        #[cfg(unix)]
        let mut requests = match listener::build_requests() {
            Ok(requests) => Some(requests),
            Err(e) => {
                tracing::warn!(error = %e, "cannot catch SIGUSR1; builds run on the schedule only");
                None
            }
        };
        // A signal caught before `run` (`listener::catch_build_requests`):
        // the first builds, spawned after this, follow it.
        #[cfg(unix)]
        let early = (requests.as_mut()).is_some_and(|r| r.recv().now_or_never().is_some());
        #[cfg(not(unix))]
        let early = false;
        let this = self.clone();
        tokio::spawn(async move {
            let n = this.inner.config.lists.len();
            if early && !this.inner.config.role.builds() {
                tracing::warn!("{IGNORED}");
            }
            let mut builds = tokio::task::JoinSet::new();
            let deadline = loop {
                #[cfg(unix)]
                let requested = async {
                    match requests.as_mut() {
                        Some(requests) => requests.recv().await,
                        None => std::future::pending().await,
                    }
                };
                #[cfg(not(unix))]
                let requested = std::future::pending::<Option<()>>();
                tokio::select! {
                    deadline = &mut stop => break deadline.unwrap_or_else(|_| tokio::time::Instant::now()),
                    Some(()) = requested => {}
                    Some(_) = builds.join_next(), if !builds.is_empty() => continue,
                }
                if !this.inner.config.role.builds() {
                    tracing::warn!("{IGNORED}");
                    continue;
                }
                tracing::info!(lists = n, "SIGUSR1: building every list now");
                for index in 0..n {
                    if let Some(build) = this.next_build(index) {
                        builds.spawn(build);
                    }
                }
            };
            while !builds.is_empty() {
                if tokio::time::timeout_at(deadline, builds.join_next())
                    .await
                    .is_err()
                {
                    tracing::warn!(
                        drain_s = drain.as_secs(),
                        "a requested build did not finish by the drain deadline; cancelled"
                    );
                    builds.shutdown().await;
                }
            }
        })
    }
}
