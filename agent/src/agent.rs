//! [`Agent`]: the runtime around [`crate::engine`] — per-list filter slots,
//! the update round, persistence, URL checks with cache and single flight.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use blocksieve_format::api::{FullHashSearchRequest, FullHashSearchResponse, routes};
use blocksieve_format::{SnapshotHeader, TrustedKey};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::watch;

use crate::Error;
use crate::config::{AgentBuilder, Settings};
use crate::engine::accept::{self, AcceptedSnapshot, ListRecord, Restored, VersionFloor};
use crate::engine::cache::FullHashCache;
use crate::engine::clock::SkewSample;
use crate::engine::lookup::{self, Answer, LocalLookup, UrlHashes, Verdict};
use crate::engine::prefix::{self, PlannedRequest, RequestPrefix};
use crate::engine::schedule::FullHashBackoff;
use crate::http::{self, SnapshotFetch};
use crate::stats::{Counters, Stats};
use crate::status::{ListStatus, SnapshotSource, Status};
use crate::store::Store;
use crate::update::{ListUpdate, UpdateReport};
use crate::updater::Running;

/// Locks `mutex`, ignoring poisoning: every critical section here leaves the
/// data consistent, and a panic elsewhere must not take lookups down.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A snapshot in use. The only way in is an [`AcceptedSnapshot`]: nothing
/// unverified can be swapped into a [`ListSlot`].
#[derive(Debug)]
struct Loaded {
    accepted: AcceptedSnapshot,
    /// Where it came from, for [`Agent::status`].
    source: SnapshotSource,
}

/// The bookkeeping of one list, touched by updates and status only — never
/// by lookups.
#[derive(Debug, Default)]
struct ListMeta {
    /// Sent back as `If-None-Match` so an unchanged snapshot costs a 304.
    etag: Option<String>,
    /// The last accepted (version, body hash): nothing older is accepted.
    floor: Option<VersionFloor>,
    /// For [`ListStatus::last_success`]: when an update last succeeded.
    last_success: Option<SystemTime>,
    /// For [`ListStatus::last_error`]: why the last update failed.
    last_error: Option<Error>,
    /// For [`ListStatus::consecutive_failures`].
    consecutive_failures: u32,
    /// For [`ListStatus::last_storage_error`]: a failed write or a
    /// quarantined file.
    last_storage_error: Option<Error>,
}

/// One subscribed list and its current snapshot.
#[derive(Debug)]
struct ListSlot {
    name: String,
    /// Swapped whole by updates; readers take an `Arc` and never block, so a
    /// check sees either the old filter or the new one, never a mix.
    current: ArcSwapOption<Loaded>,
    meta: Mutex<ListMeta>,
}

impl ListSlot {
    fn version(&self) -> Option<u64> {
        self.current.load().as_ref().map(|l| l.accepted.header().version)
    }
}

/// The monotonic clock for [`SkewSample`]: tokio's, so that it agrees with
/// the update timetable (and with a paused clock in tests).
fn monotonic_now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// Sends one answer to every check waiting on the same request prefix.
type AnswerSender = watch::Sender<Option<Answer>>;

/// The state shared by every clone of an [`Agent`] and its update task.
pub(crate) struct Inner {
    settings: Settings,
    /// Shared with decoding tasks on the blocking pool.
    trusted_keys: Arc<[TrustedKey]>,
    slots: Vec<ListSlot>,
    /// The one HTTP client: it pools connections across requests.
    client: reqwest::Client,
    counters: Counters,
    /// One update in flight at a time: serialises manual rounds and the
    /// background task, so that two updates cannot race a floor check
    /// against each other's swap (and roll a list back).
    update_lock: tokio::sync::Mutex<()>,
    store: Option<Store>,
    cache: Mutex<FullHashCache>,
    /// Request prefixes with a full-hash request in flight, for single
    /// flight: a second check for the same prefix waits for the first.
    in_flight: Mutex<HashMap<RequestPrefix, watch::Receiver<Option<Answer>>>>,
    backoff: Mutex<FullHashBackoff>,
    /// The publisher's clock from the `Date` of its latest response, for
    /// [`Status::clock_skew`]: only reported, never used to decide freshness.
    publisher_clock: Mutex<Option<SkewSample>>,
    /// Noise prefixes, shuffling, jitter. Seeded from the OS.
    rng: Mutex<StdRng>,
    /// The background update task, if started.
    pub(crate) updater: Mutex<Option<Running>>,
    /// Dropped with the agent: the update task notices and exits.
    pub(crate) alive: watch::Sender<()>,
}

/// A blocksieve agent: keeps a verified filter snapshot of each subscribed
/// threat list and checks URLs against them, confirming prefix hits with the
/// publisher's full hashes.
///
/// Cloning is cheap and every clone shares the same filters, caches,
/// counters and HTTP connection pool; the agent is `Send + Sync` and meant
/// to be shared by all tasks of a process. URL checks never wait for an
/// update.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use blocksieve_agent::{Agent, Verdict};
/// use blocksieve_format::TrustedKey;
///
/// // The publisher writes its public key here on first start.
/// let key = TrustedKey::from_base64(&std::fs::read_to_string("blocksieve-data/public.key")?)?;
/// let agent = Agent::builder("http://127.0.0.1:8080")
///     .list("malware")
///     .trusted_key(key)
///     .cache_dir("agent-cache")
///     .build()?;
/// let updates = agent.start_updates()?;
/// # agent.update().await?;
/// match agent.check_url("http://evil.example/login").await? {
///     Verdict::Unsafe { list, expression, .. } => println!("unsafe: {expression} is on {list}"),
///     v if v.should_block() => println!("cannot verify, blocking: {v:?}"),
///     _ => println!("safe"),
/// }
/// // A URL without a host is an error, never a verdict.
/// assert!(agent.check_url("mailto:someone@example.com").await.is_err());
/// updates.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let versions: Vec<(&str, Option<u64>)> = self
            .inner
            .slots
            .iter()
            .map(|s| (s.name.as_str(), s.version()))
            .collect();
        f.debug_struct("Agent")
            .field("base_urls", &self.inner.settings.base_urls)
            .field("lists", &versions)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts configuring an agent for the publisher at `base_url` (e.g.
    /// `https://publisher.example`; routes are appended as `/v1/...`).
    pub fn builder(base_url: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(base_url.into())
    }

    pub(crate) fn new(settings: Settings, client: reqwest::Client) -> Self {
        let slots = settings
            .lists
            .iter()
            .map(|name| ListSlot {
                name: name.clone(),
                current: ArcSwapOption::empty(),
                meta: Mutex::new(ListMeta::default()),
            })
            .collect();
        let store = settings.cache_dir.clone().map(Store::new);
        let inner = Inner {
            trusted_keys: settings.trusted_keys.clone().into(),
            cache: Mutex::new(FullHashCache::new(settings.full_hash_cache_bytes)),
            settings,
            slots,
            client,
            counters: Counters::default(),
            update_lock: tokio::sync::Mutex::new(()),
            store,
            in_flight: Mutex::new(HashMap::new()),
            backoff: Mutex::new(FullHashBackoff::default()),
            publisher_clock: Mutex::new(None),
            rng: Mutex::new(StdRng::from_entropy()),
            updater: Mutex::new(None),
            alive: watch::channel(()).0,
        };
        inner.restore_from_cache();
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The subscribed threat lists, in subscription order.
    pub fn lists(&self) -> impl Iterator<Item = &str> {
        self.inner.slots.iter().map(|s| s.name.as_str())
    }

    /// The first publisher base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        self.inner.settings.base_urls.first().map_or("", String::as_str)
    }

    /// Every publisher base URL, in the order they are tried.
    pub fn base_urls(&self) -> impl Iterator<Item = &str> {
        self.inner.settings.base_urls.iter().map(String::as_str)
    }

    /// The version of `list`'s snapshot in use, or `None` if none is loaded
    /// yet or the agent does not subscribe to `list`.
    pub fn snapshot_version(&self, list: &str) -> Option<u64> {
        self.inner.slot(list).and_then(ListSlot::version)
    }

    /// The verified header of `list`'s snapshot in use (version, creation
    /// and expiry times, entry counts, false-positive rates), or `None` if
    /// none is loaded yet or the agent does not subscribe to `list`.
    pub fn snapshot_header(&self, list: &str) -> Option<SnapshotHeader> {
        let slot = self.inner.slot(list)?;
        slot.current.load().as_ref().map(|l| l.accepted.header().clone())
    }

    /// A copy of the counters.
    pub fn stats(&self) -> Stats {
        self.inner.counters.snapshot()
    }

    /// Every list's snapshot (version, age, expiry, stale flag, source,
    /// floor) and update state (last success, last error, consecutive
    /// failures), the clock skew, and the counters. Staleness and skew are
    /// computed against the clock now, at every call.
    pub fn status(&self) -> Status {
        let inner = &self.inner;
        let now = inner.now();
        let lists = inner
            .slots
            .iter()
            .map(|slot| {
                let current = slot.current.load_full();
                let meta = lock(&slot.meta);
                let accepted = current.as_ref().map(|l| &l.accepted);
                ListStatus {
                    name: slot.name.clone(),
                    version: accepted.map(|a| a.header().version),
                    created_at: accepted.map(AcceptedSnapshot::created_at),
                    expires_at: accepted.map(AcceptedSnapshot::expires_at),
                    age: accepted.map(|a| now.duration_since(a.created_at()).unwrap_or(Duration::ZERO)),
                    stale: accepted.is_some_and(|a| a.is_stale(now)),
                    source: current.as_ref().map(|l| l.source),
                    version_floor: meta.floor.map(|f| f.version),
                    last_success: meta.last_success,
                    last_error: meta.last_error.clone(),
                    consecutive_failures: meta.consecutive_failures,
                    last_storage_error: meta.last_storage_error.clone(),
                }
            })
            .collect();
        let full_hash_paused_for = match lock(&inner.backoff).check(now) {
            Err(Error::BackingOff { remaining, .. }) => Some(remaining),
            _ => None,
        };
        let sample = *lock(&inner.publisher_clock);
        let clock_skew = sample.and_then(|sample| sample.skew(now, monotonic_now()));
        Status {
            lists,
            stats: self.stats(),
            updates_running: self.updates_running(),
            full_hash_paused_for,
            clock_skew,
        }
    }

    /// Brings every list up to date with the publisher now, one list after
    /// the other: a conditional `GET /v1/lists/{list}/snapshot` with the
    /// stored ETag (each base URL in turn until one succeeds), then, for a
    /// new body, [`crate::engine::accept::accept`] (signature, limits, list
    /// name, version floor), persistence to the cache directory, and an
    /// atomic swap. A snapshot that has already expired by this agent's
    /// clock (a frozen feed, or a clock running ahead) is accepted on the
    /// same terms and used flagged stale, counted in
    /// [`Stats::expired_snapshots_applied`]. A list whose download or
    /// verification fails keeps its current filter; the report says why.
    ///
    /// [`Agent::start_updates`] runs this on a schedule; calling it by hand
    /// as well is fine. Updates are serialised; URL checks are never blocked.
    ///
    /// # Errors
    ///
    /// Only when some list still has no snapshot at all after this round,
    /// so that [`Agent::check_url`] cannot answer yet: the error is that
    /// list's failure (the first such list's, if several). Lists that did
    /// update in the same round keep their new snapshot. When every list has
    /// a filter the result is `Ok`, even if some updates failed: check
    /// [`UpdateReport::is_complete`] or [`UpdateReport::failures`].
    pub async fn update(&self) -> Result<UpdateReport, Error> {
        let _round = self.inner.update_lock.lock().await;
        let mut lists = Vec::with_capacity(self.inner.slots.len());
        for slot in &self.inner.slots {
            let (outcome, _) = self.inner.update_list_locked(slot).await;
            lists.push((slot.name.clone(), outcome));
        }
        let unready = lists.iter().position(|(_, u)| {
            matches!(
                u,
                ListUpdate::Failed {
                    kept_version: None,
                    ..
                }
            )
        });
        if let Some(index) = unready
            && let (_, ListUpdate::Failed { error, .. }) = lists.swap_remove(index)
        {
            return Err(error);
        }
        Ok(UpdateReport { lists })
    }

    /// Checks `url` against every subscribed list; see
    /// [`Agent::check_urls`], of which this is the one-URL case.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host;
    /// [`Error::NotReady`] when a list has no snapshot yet. A failed
    /// full-hash request is not an error but a [`Verdict::Unverified`].
    pub async fn check_url(&self, url: &str) -> Result<Verdict, Error> {
        self.check_urls([url])
            .await
            .pop()
            .unwrap_or(Err(Error::NotReady { list: String::new() }))
    }

    /// Checks each of `urls` against every subscribed list, answering in the
    /// same order.
    ///
    /// Each URL is canonicalized and its host-suffix/path-prefix expressions
    /// hashed once. A URL whose expressions hit no local filter is
    /// [`Verdict::Safe`] without any request. The full hashes that did hit
    /// are confirmed together: their [`RequestPrefix`]es (of the length each
    /// list advertises) are answered from the full-hash cache where
    /// possible, joined to a request already in flight for the same prefix
    /// (single flight), and the rest sent in one `POST /v1/hashes:search`
    /// per 1,000 prefixes, with noise prefixes, shuffled. A URL is
    /// [`Verdict::Unsafe`] only if the publisher returns a full hash, on a
    /// subscribed list, equal to one of its hit expressions'; a prefix hit
    /// alone never is. When the full hashes cannot be had the verdict is
    /// [`Verdict::Unverified`], flagged to block under
    /// [`FailurePolicy::FailClosed`](crate::FailurePolicy::FailClosed).
    /// Verdicts based on an expired snapshot say so (`stale`), computed
    /// against the clock at each check: a miss is [`Verdict::Safe`] with
    /// `stale: true`, a hit is confirmed (or unverified) as always.
    ///
    /// # Errors
    ///
    /// Per URL: [`Error::InvalidUrl`] when it names no host;
    /// [`Error::NotReady`] when a list has no snapshot yet.
    pub async fn check_urls<I, S>(&self, urls: I) -> Vec<Result<Verdict, Error>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let inner = &self.inner;
        let counters = &inner.counters;
        let now = inner.now();
        let locals: Vec<Result<LocalLookup, Error>> = urls
            .into_iter()
            .map(|url| {
                let hashes = UrlHashes::of(url.as_ref())?;
                let local = inner.probe(&hashes, now)?;
                Counters::bump(&counters.lookups);
                if !local.is_empty() {
                    Counters::bump(&counters.prefix_hits);
                }
                Ok(local)
            })
            .collect();
        let needed: BTreeSet<RequestPrefix> = locals
            .iter()
            .flatten()
            .flat_map(LocalLookup::request_prefixes)
            .collect();
        let answers = if needed.is_empty() {
            HashMap::new()
        } else {
            inner.resolve(needed.into_iter().collect()).await
        };
        let lists: Vec<&str> = inner.slots.iter().map(|s| s.name.as_str()).collect();
        locals
            .into_iter()
            .map(|local| {
                let local = local?;
                let verdict = lookup::decide(&local, &answers, &lists, inner.settings.failure_policy);
                if !local.is_empty() {
                    Counters::bump(match &verdict {
                        Verdict::Unsafe { .. } => &counters.confirmed_unsafe,
                        Verdict::Safe { .. } => &counters.false_prefix_hits,
                        Verdict::Unverified { .. } => &counters.unverified,
                    });
                }
                Ok(verdict)
            })
            .collect()
    }

    /// Probes the local filters with `url`'s expressions without any
    /// request, for hot paths: which expressions' hash prefixes hit, per
    /// list, and which snapshot versions answered. A hit is only a candidate
    /// (see [`Agent::check_urls`]); no hit means the URL is on none of the
    /// lists as of those snapshots. Never blocks on an update. Not counted in
    /// [`Agent::stats`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host;
    /// [`Error::NotReady`] when a list has no snapshot yet.
    pub fn lookup_local(&self, url: &str) -> Result<LocalLookup, Error> {
        let hashes = UrlHashes::of(url)?;
        self.inner.probe(&hashes, self.inner.now())
    }
}

impl Inner {
    fn slot(&self, list: &str) -> Option<&ListSlot> {
        self.slots.iter().find(|s| s.name == list)
    }

    pub(crate) fn now(&self) -> SystemTime {
        self.settings.time.now()
    }

    /// Keeps the publisher's clock from the latest response that had a
    /// `Date`, for [`Status::clock_skew`].
    fn observe_publisher_time(&self, server: Option<SystemTime>) {
        if let Some(server) = server {
            let sample = SkewSample::new(server, self.now(), monotonic_now());
            *lock(&self.publisher_clock) = Some(sample);
        }
    }

    pub(crate) fn list_count(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn update_interval(&self) -> Duration {
        self.settings.update_interval
    }

    pub(crate) fn initial_jitter(&self) -> Duration {
        self.settings.initial_jitter
    }

    pub(crate) fn with_rng<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        f(&mut lock(&self.rng))
    }

    /// How long list `index`'s snapshot stays fresh, or `None` without a
    /// fresh one (none, or expired): the input of the initial jitter.
    pub(crate) fn time_to_expiry(&self, index: usize) -> Option<Duration> {
        let slot = self.slots.get(index)?;
        let current = slot.current.load();
        let loaded = current.as_ref()?;
        loaded.accepted.expires_at().duration_since(self.now()).ok()
    }

    /// Loads each list's cached snapshot and floor (see
    /// [`crate::engine::accept::restore`]) — an expired snapshot too, which
    /// then answers flagged stale; quarantines what fails verification.
    fn restore_from_cache(&self) {
        let Some(store) = &self.store else {
            return;
        };
        let now = self.now();
        for slot in &self.slots {
            store.remove_temporaries(&slot.name);
            let found = store.read(&slot.name, self.settings.max_snapshot_bytes);
            let mut meta = lock(&slot.meta);
            for problem in found.problems {
                if matches!(problem, Error::CorruptCache { .. }) {
                    Counters::bump(&self.counters.cache_files_quarantined);
                }
                meta.last_storage_error = Some(problem);
            }
            let restored = accept::restore(
                &slot.name,
                found.snapshot.as_deref(),
                found.record.as_ref(),
                &self.trusted_keys,
                &self.settings.limits,
            );
            meta.floor = restored.floor;
            meta.etag = restored.etag;
            match restored.snapshot {
                Restored::Loaded(accepted) => {
                    let version = accepted.header().version;
                    if accepted.is_stale(now) {
                        tracing::warn!(list = %slot.name, version, "snapshot loaded from cache has expired; using it, stale, until a newer one arrives");
                        Counters::bump(&self.counters.expired_snapshots_loaded_from_cache);
                    } else {
                        tracing::info!(list = %slot.name, version, "snapshot loaded from cache");
                    }
                    Counters::bump(&self.counters.snapshots_loaded_from_cache);
                    slot.current.store(Some(Arc::new(Loaded {
                        accepted,
                        source: SnapshotSource::Cache,
                    })));
                }
                Restored::Rejected(error) => {
                    Counters::bump(&self.counters.cache_files_quarantined);
                    let path = store.snapshot_path(&slot.name);
                    meta.last_storage_error = Some(store.quarantine(&path, error.to_string()));
                }
                Restored::Missing => {}
            }
        }
    }

    /// Updates list `index` with the update lock held; for the background
    /// task. Returns the outcome and the publisher's next-check hint.
    pub(crate) async fn update_one(&self, index: usize) -> Option<(ListUpdate, Option<Duration>)> {
        let slot = self.slots.get(index)?;
        let _round = self.update_lock.lock().await;
        Some(self.update_list_locked(slot).await)
    }

    /// One list's update, with the update lock held by the caller: the
    /// outcome (counted and recorded in the list's status) and the
    /// publisher's next-check hint.
    async fn update_list_locked(&self, slot: &ListSlot) -> (ListUpdate, Option<Duration>) {
        match self.fetch_and_apply(slot).await {
            Ok((outcome, hint)) => {
                let mut meta = lock(&slot.meta);
                meta.last_success = Some(self.now());
                meta.last_error = None;
                meta.consecutive_failures = 0;
                (outcome, hint)
            }
            Err(error) => {
                self.counters.update_failed(&error);
                let kept_version = slot.version();
                tracing::warn!(list = %slot.name, ?kept_version, %error, "snapshot update failed");
                let mut meta = lock(&slot.meta);
                meta.last_error = Some(error.clone());
                meta.consecutive_failures = meta.consecutive_failures.saturating_add(1);
                (ListUpdate::Failed { error, kept_version }, None)
            }
        }
    }

    /// Tries each base URL in turn; the first error is reported if all fail.
    async fn fetch_and_apply(&self, slot: &ListSlot) -> Result<(ListUpdate, Option<Duration>), Error> {
        let mut first_error = None;
        for base in &self.settings.base_urls {
            let url = format!("{base}{}", routes::latest_snapshot(&slot.name));
            match self.fetch_and_apply_from(slot, &url).await {
                Ok(done) => return Ok(done),
                Err(error) => {
                    if self.settings.base_urls.len() > 1 {
                        tracing::debug!(%url, %error, "snapshot source failed");
                    }
                    first_error.get_or_insert(error);
                }
            }
        }
        Err(first_error.unwrap_or(Error::NotReady {
            list: slot.name.clone(),
        }))
    }

    async fn fetch_and_apply_from(
        &self,
        slot: &ListSlot,
        url: &str,
    ) -> Result<(ListUpdate, Option<Duration>), Error> {
        let current = slot.current.load_full();
        let previous = current.as_ref().map(|l| l.accepted.header().version);
        let (etag, floor) = {
            let meta = lock(&slot.meta);
            (current.as_ref().and(meta.etag.clone()), meta.floor)
        };
        let mut date = None;
        let fetched = http::fetch_snapshot(
            &self.client,
            url,
            etag.as_deref(),
            self.settings.max_snapshot_bytes,
            self.settings.snapshot_timeout,
            self.now(),
            &mut date,
        )
        .await;
        self.observe_publisher_time(date);
        let fetched = fetched?;
        let (bytes, new_etag, hint) = match (fetched, previous) {
            (SnapshotFetch::NotModified { hint }, Some(version)) => {
                return Ok((ListUpdate::Unchanged { version }, hint));
            }
            (SnapshotFetch::NotModified { .. }, None) => {
                // Not reachable: If-None-Match is only sent with a snapshot loaded.
                return Err(Error::UnexpectedResponse {
                    url: url.to_owned(),
                    reason: "304 Not Modified without a snapshot loaded".to_owned(),
                });
            }
            (
                SnapshotFetch::Body {
                    etag: Some(e), hint, ..
                },
                Some(version),
            ) if Some(e.as_str()) == etag.as_deref() => {
                // The publisher ignored If-None-Match but serves the same
                // representation: nothing to verify.
                return Ok((ListUpdate::Unchanged { version }, hint));
            }
            (SnapshotFetch::Body { bytes, etag, hint }, _) => (bytes, etag, hint),
        };
        let (accepted, bytes) = self.accept_blocking(&slot.name, url, bytes, floor).await?;
        let version = accepted.header().version;
        let new_floor = accepted.floor();
        if current.as_ref().is_some_and(|l| l.accepted.floor() == new_floor) {
            // The very snapshot in use, under a new ETag: remember the ETag
            // so the next request can be a 304.
            lock(&slot.meta).etag = new_etag;
            return Ok((ListUpdate::Unchanged { version }, hint));
        }
        let expired = accepted.is_stale(self.now());
        self.persist(slot, bytes, new_floor, new_etag.clone()).await;
        slot.current.store(Some(Arc::new(Loaded {
            accepted,
            source: SnapshotSource::Network,
        })));
        {
            let mut meta = lock(&slot.meta);
            meta.floor = Some(new_floor);
            meta.etag = new_etag;
        }
        Counters::bump(&self.counters.snapshots_applied);
        if expired {
            // Newer than the one in use (the floor saw to that), so it can
            // only add protection; stale, so the host sees the freeze or
            // the clock.
            Counters::bump(&self.counters.expired_snapshots_applied);
            let sample = *lock(&self.publisher_clock);
            let clock_skew = sample
                .and_then(|sample| sample.skew(self.now(), monotonic_now()))
                .map(|skew| skew.to_string());
            tracing::warn!(list = %slot.name, ?previous, version, ?clock_skew, "snapshot updated, but it has already expired: using it, stale");
        } else {
            tracing::info!(list = %slot.name, ?previous, version, "snapshot updated");
        }
        Ok((ListUpdate::Updated { previous, version }, hint))
    }

    /// [`crate::engine::accept::accept`] on the blocking pool: hashing and
    /// decompressing up to the snapshot limit would stall an async worker.
    /// Hands the bytes back for persistence.
    async fn accept_blocking(
        &self,
        list: &str,
        url: &str,
        bytes: Vec<u8>,
        floor: Option<VersionFloor>,
    ) -> Result<(AcceptedSnapshot, Vec<u8>), Error> {
        let keys = Arc::clone(&self.trusted_keys);
        let limits = self.settings.limits;
        let owned_list = list.to_owned();
        let task = tokio::task::spawn_blocking(move || {
            let result = accept::accept(&owned_list, &bytes, &keys, &limits, floor.as_ref());
            result.map(|accepted| (accepted, bytes))
        });
        match task.await {
            Ok(result) => result,
            // A panic in verification is a bug; report it instead of taking
            // the host down. Cancellation means the runtime is shutting down.
            Err(join) => Err(Error::UnexpectedResponse {
                url: url.to_owned(),
                reason: format!("snapshot verification did not finish: {join}"),
            }),
        }
    }

    /// Writes an accepted snapshot and its floor to the cache directory, if
    /// any. A failure is counted and reported in the list's status; the
    /// snapshot is used all the same (protection now beats persistence).
    async fn persist(&self, slot: &ListSlot, bytes: Vec<u8>, floor: VersionFloor, etag: Option<String>) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let record = ListRecord {
            list: slot.name.clone(),
            floor,
            etag,
        };
        let list = slot.name.clone();
        let result = tokio::task::spawn_blocking(move || store.save(&list, &bytes, &record)).await;
        let error = match result {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e,
            Err(join) => Error::Storage {
                path: self.settings.cache_dir.clone().unwrap_or_default(),
                reason: format!("write did not finish: {join}"),
            },
        };
        tracing::warn!(list = %slot.name, %error, "cannot persist snapshot");
        Counters::bump(&self.counters.persist_failures);
        lock(&slot.meta).last_storage_error = Some(error);
    }

    /// Probes every list's current snapshot.
    fn probe(&self, hashes: &UrlHashes<'_>, now: SystemTime) -> Result<LocalLookup, Error> {
        // Guards, not `load_full`: cloning the `Arc` writes its shared
        // reference count on every check, a cache line that concurrent
        // checkers on other cores then fight over (`bench/`, row 5).
        if let [slot] = self.slots.as_slice() {
            // One list, the usual case: no allocation for the guards.
            let current = slot.current.load();
            let Some(loaded) = current.as_ref() else {
                return Err(Error::NotReady {
                    list: slot.name.clone(),
                });
            };
            let snapshot = std::iter::once((slot.name.as_str(), &loaded.accepted));
            return Ok(lookup::probe(hashes, snapshot, now));
        }
        let mut loaded = Vec::with_capacity(self.slots.len());
        for slot in &self.slots {
            let current = slot.current.load();
            if current.is_none() {
                return Err(Error::NotReady {
                    list: slot.name.clone(),
                });
            }
            loaded.push((slot.name.as_str(), current));
        }
        Ok(lookup::probe(
            hashes,
            loaded
                .iter()
                .filter_map(|(name, l)| l.as_ref().map(|l| (*name, &l.accepted))),
            now,
        ))
    }

    /// An answer for each of `needed`: from the cache, from a request in
    /// flight (single flight), or from new requests.
    async fn resolve(&self, needed: Vec<RequestPrefix>) -> HashMap<RequestPrefix, Answer> {
        let mut answers = HashMap::with_capacity(needed.len());
        let mut pending = needed;
        // A waiter whose leader was cancelled retries; two retries bound the
        // loop even if that keeps happening.
        for _ in 0..3 {
            if pending.is_empty() {
                break;
            }
            let now = self.now();
            let mut misses = Vec::new();
            {
                let mut cache = lock(&self.cache);
                for p in pending.drain(..) {
                    match cache.get(p, now) {
                        Some(hashes) => {
                            Counters::bump(&self.counters.cache_hits);
                            answers.insert(p, Ok(hashes));
                        }
                        None => misses.push(p),
                    }
                }
            }
            let mut claim = Claim {
                inner: self,
                senders: Vec::new(),
            };
            let mut joined = Vec::new();
            {
                let mut in_flight = lock(&self.in_flight);
                for p in misses {
                    match in_flight.get(&p) {
                        Some(rx) => joined.push((p, rx.clone())),
                        None => {
                            let (tx, rx) = watch::channel(None);
                            in_flight.insert(p, rx);
                            claim.senders.push((p, tx));
                        }
                    }
                }
            }
            if !claim.senders.is_empty() {
                let prefixes: Vec<RequestPrefix> = claim.senders.iter().map(|(p, _)| *p).collect();
                let mut fetched = self.fetch_full_hashes(prefixes).await;
                for (p, tx) in &claim.senders {
                    let answer = fetched.remove(p).unwrap_or_else(|| {
                        Err(Error::UnexpectedResponse {
                            url: String::new(),
                            reason: format!("no answer for prefix {p}"),
                        })
                    });
                    tx.send_replace(Some(answer.clone()));
                    answers.insert(*p, answer);
                }
            }
            drop(claim);
            for (p, mut rx) in joined {
                let shared = rx.wait_for(Option::is_some).await.ok().and_then(|v| v.clone());
                match shared {
                    Some(answer) => {
                        Counters::bump(&self.counters.coalesced);
                        answers.insert(p, answer);
                    }
                    None => pending.push(p),
                }
            }
        }
        for p in pending {
            answers.insert(
                p,
                Err(Error::Transport {
                    url: String::new(),
                    reason: "the shared full-hash request was cancelled".to_owned(),
                    timed_out: false,
                }),
            );
        }
        answers
    }

    /// Sends full-hash requests for `prefixes` (none cached, none in
    /// flight): planned by [`prefix::plan_requests`], each answer read by
    /// [`prefix::sort_answers`] and cached.
    async fn fetch_full_hashes(&self, prefixes: Vec<RequestPrefix>) -> HashMap<RequestPrefix, Answer> {
        let plans = self.with_rng(|rng| prefix::plan_requests(&prefixes, self.settings.noise_prefixes, rng));
        let mut answers = HashMap::with_capacity(prefixes.len());
        for plan in plans {
            if let Err(paused) = lock(&self.backoff).check(self.now()) {
                for p in &plan.real {
                    answers.insert(*p, Err(paused.clone()));
                }
                continue;
            }
            Counters::bump(&self.counters.full_hash_requests);
            match self.search(&plan).await {
                Ok(response) => {
                    lock(&self.backoff).on_success();
                    let sorted = prefix::sort_answers(
                        &plan.real,
                        response
                            .results
                            .iter()
                            .map(|r| (r.prefix.as_str(), r.matches.as_slice())),
                        |list| self.slot(list).is_some(),
                    );
                    Counters::add(&self.counters.ignored_full_hashes, sorted.ignored as u64);
                    let duration = Duration::from_secs(response.cache_duration_s);
                    let now = self.now();
                    let mut cache = lock(&self.cache);
                    for (p, hashes) in sorted.by_prefix {
                        let hashes = Arc::new(hashes);
                        cache.insert(p, Arc::clone(&hashes), duration, now);
                        answers.insert(p, Ok(hashes));
                    }
                    for p in sorted.missing {
                        answers.insert(
                            p,
                            Err(Error::UnexpectedResponse {
                                url: String::new(),
                                reason: format!("the answer has no result for requested prefix {p}"),
                            }),
                        );
                    }
                }
                Err(error) => {
                    Counters::bump(&self.counters.full_hash_failures);
                    tracing::warn!(%error, "full-hash request failed");
                    let now = self.now();
                    let retry_after = error.retry_after();
                    self.with_rng(|rng| lock(&self.backoff).on_failure(retry_after, now, rng));
                    for p in &plan.real {
                        answers.insert(*p, Err(error.clone()));
                    }
                }
            }
        }
        answers
    }

    /// One `POST /v1/hashes:search`, each base URL in turn.
    async fn search(&self, plan: &PlannedRequest) -> Result<FullHashSearchResponse, Error> {
        let request = FullHashSearchRequest {
            prefixes: plan.prefixes.iter().map(ToString::to_string).collect(),
        };
        let mut first_error = None;
        for base in &self.settings.base_urls {
            let url = format!("{base}{}", routes::SEARCH);
            let mut date = None;
            let result = http::search_full_hashes(&self.client, &url, &request, self.now(), &mut date).await;
            self.observe_publisher_time(date);
            match result {
                Ok(response) => return Ok(response),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        // Unreachable: `build` guarantees at least one base URL.
        Err(first_error.unwrap_or(Error::NoLists))
    }
}

/// The request prefixes a check has claimed for its own full-hash request.
/// Dropped when the answers are out (or the check is cancelled): the
/// prefixes leave the in-flight map, and waiters of a cancelled request see
/// the sender gone and retry.
struct Claim<'a> {
    inner: &'a Inner,
    senders: Vec<(RequestPrefix, AnswerSender)>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.senders.is_empty() {
            return;
        }
        let mut in_flight = lock(&self.inner.in_flight);
        for (p, _) in &self.senders {
            in_flight.remove(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_is_shareable() {
        fn assert_shareable<T: Clone + Send + Sync + 'static>() {}
        assert_shareable::<Agent>();
        // Errors travel across tasks and into `anyhow`.
        fn assert_error<T: std::error::Error + Send + Sync + 'static>() {}
        assert_error::<Error>();
    }
}
