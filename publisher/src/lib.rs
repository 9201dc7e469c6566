//! The blocksieve publisher: turns blocklists into signed filter snapshots
//! and serves them, with a full-hash lookup endpoint.
//!
//! Principal types and how data flows between them:
//!
//! - [`Config`] names the threat lists and their sources.
//! - [`build::build_list`] reads a list's sources ([`sources`]), canonicalizes
//!   each entry into its expression, hashes it, builds a filter over the
//!   32-bit hash prefixes and signs a snapshot.
//! - [`store::ListStore`] publishes it atomically to the data directory and
//!   loads the newest one back on start.
//! - [`Publisher`] holds the [`state::AppState`] that [`server::router`]
//!   serves; builds swap a list's [`state::Published`] snapshot atomically.
//!
//! [`Publisher::run`] is the daemon: serve what is on disk immediately, build
//! every list, then rebuild on the cron schedule until shutdown.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use blocksieve_format::api::BuildStatus;
use blocksieve_format::{SigningKey, TrustedKey};
use tokio::net::TcpListener;

pub mod build;
pub mod config;
pub mod server;
pub mod sources;
pub mod state;
pub mod store;

pub use config::Config;

use state::{AppState, ListSlot, Published};
use store::ListStore;

/// Publisher errors, grouped by what the operator does next: fix the
/// configuration (`Config`), fix a source (`Source`), look at the list
/// (`Build`), or the machine (`Io`).
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid; the message names the field.
    #[error("configuration: {0}")]
    Config(String),
    /// A source could not be read.
    #[error("source: {0}")]
    Source(String),
    /// A list could not be built or was refused for publishing.
    #[error("build: {0}")]
    Build(String),
    /// Reading or writing the data directory failed.
    #[error("i/o: {0}")]
    Io(String),
}

/// Current time in Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A configured publisher: its signing key, its lists and what it serves.
#[derive(Debug, Clone)]
pub struct Publisher {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    key: SigningKey,
    stores: Vec<ListStore>,
    state: Arc<AppState>,
    /// Serializes builds: a scheduled build never overlaps a running one.
    build_lock: tokio::sync::Mutex<()>,
}

/// The outcome of building one list.
#[derive(Debug)]
pub struct ListBuildOutcome {
    /// The list name.
    pub list: String,
    /// The report on success, or why nothing was published.
    pub result: Result<build::BuildReport, Error>,
}

impl Publisher {
    /// Opens the data directory, loads or creates the signing key, and loads
    /// the newest valid snapshot of every list so it can be served at once.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid configuration, [`Error::Io`] when the
    /// data directory or key cannot be used.
    pub fn open(config: Config) -> Result<Self, Error> {
        config.validate()?;
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|e| Error::Io(format!("{}: {e}", config.data_dir.display())))?;
        let key = store::load_or_create_signing_key(&config.signing_key_path())?;
        let mut stores = Vec::new();
        let mut lists = Vec::new();
        for list in &config.lists {
            let store = ListStore::open(&config.data_dir, &list.name)?;
            let current = ArcSwapOption::empty();
            if let Some(stored) = store.load_latest(key.public_key()) {
                if let Ok(header) = blocksieve_format::parse_header_unverified(&stored.snapshot) {
                    tracing::info!(list = %list.name, version = header.version, "serving snapshot from disk");
                    current.store(Some(Arc::new(Published::new(
                        header,
                        stored.snapshot,
                        stored.hashes,
                    ))));
                }
            }
            stores.push(store);
            lists.push(ListSlot {
                name: list.name.clone(),
                current,
                last_build: Mutex::new(None),
            });
        }
        let state = AppState {
            lists,
            cache_duration: config.cache_duration(),
        }
        .shared();
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                key,
                stores,
                state,
                build_lock: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The public key agents must trust.
    pub fn public_key(&self) -> &TrustedKey {
        self.inner.key.public_key()
    }

    /// The shared state the router serves.
    pub fn state(&self) -> Arc<AppState> {
        self.inner.state.clone()
    }

    /// The HTTP router.
    pub fn router(&self) -> axum::Router {
        server::router(self.state())
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Builds every list once and publishes what succeeds. A list that fails
    /// keeps serving its previous snapshot; the failure is logged and shown
    /// in `/v1/lists`.
    pub async fn build_all(&self) -> Vec<ListBuildOutcome> {
        let _guard = self.inner.build_lock.lock().await;
        let mut outcomes = Vec::new();
        for i in 0..self.inner.config.lists.len() {
            let this = self.clone();
            let result = tokio::task::spawn_blocking(move || this.build_one(i))
                .await
                .unwrap_or_else(|e| Err(Error::Build(format!("build task failed: {e}"))));
            outcomes.push(ListBuildOutcome {
                list: self.inner.config.lists[i].name.clone(),
                result,
            });
        }
        outcomes
    }

    fn build_one(&self, index: usize) -> Result<build::BuildReport, Error> {
        let inner = &self.inner;
        let list = &inner.config.lists[index];
        let slot = &inner.state.lists[index];
        let previous = slot.current.load().as_ref().map(|p| p.header.version);
        let started = std::time::Instant::now();
        let result = build::build_list(
            list,
            previous,
            unix_now(),
            inner.config.snapshot_ttl_s,
            &inner.key,
        )
        .and_then(|built| {
            inner.stores[index].publish(built.version, &built.snapshot, &built.hashes)?;
            let header = blocksieve_format::parse_header_unverified(&built.snapshot)
                .map_err(|e| Error::Build(format!("list {}: re-reading own snapshot: {e}", list.name)))?;
            slot.current.store(Some(Arc::new(Published::new(
                header,
                built.snapshot,
                built.hashes,
            ))));
            Ok(built.report)
        });
        let status = match &result {
            Ok(r) => {
                tracing::info!(
                    list = %list.name,
                    entries = r.entries,
                    unique_prefixes = r.unique_keys,
                    snapshot_bytes = r.snapshot_bytes,
                    bits_per_key = format_args!("{:.2}", r.bits_per_key),
                    measured_fpr = r.measured_fpr,
                    lines = r.parse.lines,
                    rejected = r.parse.rejected_total(),
                    duration_ms = r.duration.as_millis() as u64,
                    "published snapshot"
                );
                for (reason, count) in &r.parse.rejected {
                    tracing::debug!(list = %list.name, reason, count, "rejected lines");
                }
                BuildStatus {
                    finished_at: unix_now(),
                    ok: true,
                    error: None,
                    lines: r.parse.lines,
                    rejected: r.parse.rejected_total(),
                    duration_ms: r.duration.as_millis() as u64,
                }
            }
            Err(e) => {
                tracing::error!(list = %list.name, error = %e, "build failed; previous snapshot keeps serving");
                BuildStatus {
                    finished_at: unix_now(),
                    ok: false,
                    error: Some(e.to_string()),
                    lines: 0,
                    rejected: 0,
                    duration_ms: started.elapsed().as_millis() as u64,
                }
            }
        };
        if let Ok(mut g) = slot.last_build.lock() {
            *g = Some(status);
        }
        result
    }

    /// Runs the daemon on `listener` until `shutdown` completes: serves what
    /// is on disk at once, builds every list in the background, then
    /// rebuilds on the configured cron schedule. In-flight requests are
    /// drained on shutdown.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when the schedule is invalid, [`Error::Io`] when
    /// serving fails.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), Error> {
        let mut scheduler = self.start_schedule().await?;
        let initial = self.clone();
        tokio::spawn(async move {
            initial.build_all().await;
        });
        let served = axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| Error::Io(format!("server: {e}")));
        let _ = scheduler.shutdown().await;
        served
    }

    async fn start_schedule(&self) -> Result<tokio_cron_scheduler::JobScheduler, Error> {
        use tokio_cron_scheduler::{Job, JobScheduler};
        let schedule = self.inner.config.schedule.clone();
        let bad =
            |e: tokio_cron_scheduler::JobSchedulerError| Error::Config(format!("schedule {schedule:?}: {e}"));
        let scheduler = JobScheduler::new().await.map_err(bad)?;
        let this = self.clone();
        let job = Job::new_async(schedule.as_str(), move |_id, _lock| {
            let this = this.clone();
            Box::pin(async move {
                this.build_all().await;
            })
        })
        .map_err(bad)?;
        scheduler.add(job).await.map_err(bad)?;
        scheduler.start().await.map_err(bad)?;
        Ok(scheduler)
    }
}

/// Waits until every list has a snapshot or `timeout` passes; for tests and
/// readiness checks.
pub async fn wait_until_ready(state: &AppState, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if state.lists.iter().all(|l| l.current.load().is_some()) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
