//! The orchestrator: a [`Publisher`] fetches each threat list's sources,
//! builds a snapshot from them, stores it and swaps it into what the
//! router serves; [`Publisher::run`] is the daemon around that.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use blocksieve_format::api::{AllowStatus, SourceStatus};
use blocksieve_format::{SigningKey, SnapshotHeader, TrustedKey};

use crate::build::{self, BuildRequest, LoadedSource};
use crate::config::schedule;
use crate::config::{Config, Role, Settings};
use crate::error::Error;
use crate::generations::deltas::NextDelta;
use crate::generations::{self, LeaseOutcome, ListStore, PublishOutcome};
use crate::state::{AppState, Freshness, ListSlot};
use crate::storage::spill::UnlessServed;
use crate::storage::{self, LocalStorage, SourceCache, Storage};
use crate::{fetch, listener, metrics, object_storage, server, status};

use copies::PendingCopies;

mod copies;
mod cron;
mod daemon;
mod fetching;
mod keys;
mod lease;
mod watch;

/// Current time in Unix seconds.
fn unix_now() -> u64 {
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
    /// The validated configuration, times as `Duration`s.
    config: Settings,
    /// The signing key; none on a replica, which builds nothing.
    key: Option<SigningKey>,
    /// The key snapshots verify under (the signing key's, or a replica's
    /// configured one).
    public_key: TrustedKey,
    /// `public_key`, then `previous_public_keys`: what stored generations
    /// verify under.
    trusted: Arc<[TrustedKey]>,
    state: Arc<AppState>,
    /// Where snapshots and the sources' last good content are kept.
    storage: Arc<dyn Storage>,
    /// The client of `url` sources; `None` when there is none (each client
    /// loads the system's root certificates: a few milliseconds of start).
    http: Option<reqwest::Client>,
    /// The client of `url` sources with `headers`: it follows no redirect
    /// to another host ([`fetch::same_origin_redirects`]); `None` when no
    /// source has headers.
    http_with_headers: Option<reqwest::Client>,
    /// One lock per list: a scheduled build never overlaps a running build
    /// of the same list, and lists never wait for each other.
    build_locks: Vec<tokio::sync::Mutex<()>>,
    /// Per list: a build waits to start (`Publisher::next_build`).
    build_waiting: Vec<AtomicBool>,
    /// `--force`: skip the gates on the next build of each list, once.
    force_once: Vec<AtomicBool>,
    /// `build --now`: the time builds record instead of the clock's, Unix
    /// seconds (0: the clock).
    build_time: AtomicU64,
    /// Held while any clone of the publisher lives (not by a replica,
    /// which keeps nothing in the data directory).
    _data_dir_lock: Option<storage::DataDirLock>,
    /// This builder's id in the lists' leases: kept in the data directory
    /// (`builder-id`), so a restarted builder takes its own lease back at
    /// once, and two builders (two data directories) never share one.
    holder: String,
}

/// The outcome of building one list.
#[derive(Debug)]
pub struct ListBuildOutcome {
    /// The list name.
    pub list: String,
    /// The report when a snapshot was built (published or refused).
    pub report: Option<build::BuildReport>,
    /// `Ok(version)` when published (or, `unchanged`, still served);
    /// otherwise why not.
    pub result: Result<u64, Error>,
    /// Whether the build found the list unchanged (the same snapshot body
    /// and full hashes as the version served): it published nothing new,
    /// only a new freshness record for the served version.
    pub unchanged: bool,
    /// What a build that failed while reading its sources (a block source
    /// failed with no usable last good content) found of each; a build
    /// that got further has them in its `report`.
    pub sources_read: Option<build::SourcesRead>,
}

impl ListBuildOutcome {
    /// The outcome of a build of `list` that failed with `error` before it
    /// read any source.
    fn failed(list: &str, error: Error) -> Self {
        Self {
            sources_read: None,
            unchanged: false,
            list: list.to_owned(),
            report: None,
            result: Err(error),
        }
    }

    /// Every source's status in this build and its allowlists', from the
    /// report or, for a build that failed reading them, from what it read;
    /// `None` for a build that read no source.
    pub fn source_statuses(&self) -> Option<(&[SourceStatus], AllowStatus)> {
        match (&self.report, &self.sources_read) {
            (Some(r), _) => Some((&r.sources, r.allow.status())),
            (None, Some(read)) => Some((&read.sources, read.allow.clone())),
            (None, None) => None,
        }
    }
}

impl Publisher {
    /// Opens the data directory and locks it for as long as this publisher
    /// (any clone of it) lives, opens the object store when one is
    /// configured (and checks that it enforces conditional writes), loads
    /// or creates the signing key, and loads the newest valid snapshot of
    /// every list so it can be served at once.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid configuration, or a `public_key`
    /// that is not the signing key's (refused before anything is created:
    /// a builder with no signing key yet creates none), [`Error::SigningKey`]
    /// for a key file that holds no key, [`Error::InUse`] when another
    /// publisher has the data directory open, [`Error::Storage`] when the
    /// data directory or key cannot be read or written, [`Error::Store`]
    /// when the object store cannot be reached,
    /// [`Error::StoreIgnoresConditions`] when it does not enforce
    /// conditional writes.
    ///
    /// A [`Role::Replica`] instead opens the object store without a request
    /// (it may be unreachable), neither locks the data directory nor reads
    /// or creates a signing key (its public key is `public_key`, else the
    /// public key file beside the signing key), and loads nothing: its
    /// follower does, once [`Publisher::run`] starts it.
    pub fn open(config: Config) -> Result<Self, Error> {
        let config = config.resolve()?;
        if config.role == Role::Replica {
            return Self::open_replica(config);
        }
        // Another public key (`serve --key`, meant for a replica) is
        // refused before anything is created: a signing key not created
        // yet is no key it was given.
        let key_path = config.signing_key_path();
        let existing = storage::load_signing_key(&key_path)?;
        if existing.is_some()
            && let Some(exposure) = storage::signing_key_exposure(&key_path)
        {
            tracing::warn!(path = %key_path.display(), "{exposure}");
        }
        if let Some(given) = &config.public_key {
            Self::check_given_key(&config, given, existing.as_ref())?;
        }
        if existing.is_none() {
            Self::check_key_may_be_created(&config)?;
        }
        let local = LocalStorage::open(&config.data_dir)?;
        let data_dir_lock = storage::lock_data_dir(&config.data_dir)?;
        let storage: Arc<dyn Storage> = match &config.store {
            None => Arc::new(local),
            Some(url) => object_storage::open_store(
                url,
                &config.store_options,
                config.dangerous_store_ignores_conditions,
            )?,
        };
        let key = match existing {
            Some(key) => key,
            None => storage::load_or_create_signing_key(&key_path)?,
        };
        storage::keep_public_key_in_step(&key_path, &key);
        let public_key = key.public_key().clone();
        Self::assemble(config, storage, Some(key), public_key, Some(data_dir_lock))
    }

    /// The publisher over opened storage: every list's slot, with its
    /// newest valid stored version unless this is a replica.
    fn assemble(
        config: Settings,
        storage: Arc<dyn Storage>,
        key: Option<SigningKey>,
        public_key: TrustedKey,
        data_dir_lock: Option<storage::DataDirLock>,
    ) -> Result<Self, Error> {
        // What generations, snapshots and freshness records verify under:
        // this key, then those it replaces while it is rotated.
        let trusted: Arc<[TrustedKey]> = std::iter::once(public_key.clone())
            .chain(
                config
                    .previous_public_keys
                    .iter()
                    .filter(|k| **k != public_key)
                    .cloned(),
            )
            .collect();
        let metrics = metrics::Metrics::new();
        let mut lists = Vec::new();
        let now = unix_now();
        for (index, list) in config.lists.iter().enumerate() {
            let profile = status::ListProfile::new(
                config.schedule_of(index),
                list.gates.max_fpr_ratio,
                list.target_full_hash_requests_per_1000,
                config.fleet_checks_per_second,
                config.max_bucket_entries,
                list.min_anonymity,
                now,
            );
            if let Some(interval) = profile.build_interval {
                metrics.build_interval(&list.name, interval.as_secs());
            }
            if config.role.builds() {
                metrics.list_known(&list.name);
                // What a build killed mid-read left of its sources' copies
                // (their staged files): no build runs yet, and the data
                // directory's lock keeps other publishers out.
                storage.prepare(&format!("sources/{}", list.name))?;
                if !list.allow.is_empty() {
                    storage.prepare(&format!("sources/{}.allow", list.name))?;
                }
            }
            // A replica writes nothing to its data directory: its history
            // (it builds nothing) stays empty.
            let history_dir = config.role.builds().then_some(config.data_dir.as_path());
            let watch = status::ListWatch::open(profile, history_dir, &list.name);
            if watch.with_history(|h| !h.is_empty()) {
                let (refused, on_last_good) = watch.standing();
                metrics.build_health(&list.name, Some(refused), Some(on_last_good), None);
            }
            let slot = ListSlot {
                watch,
                name: list.name.clone(),
                current: ArcSwapOption::empty(),
                last_build: Mutex::new(None),
                store_status: Mutex::new(None),
                store: ListStore::open(storage.clone(), &list.name, config.keep_versions)?
                    .with_previous_keys(&config.previous_public_keys),
                freshness: ArcSwapOption::empty(),
            };
            if config.role.builds()
                && let Some(stored) = slot.store.load_latest(&trusted)
                && let Ok(header) = blocksieve_format::parse_header_unverified(&stored.snapshot)
            {
                tracing::info!(
                    list = %list.name,
                    version = header.version,
                    from = if config.store.is_some() { "the object store" } else { "the data directory" },
                    "serving the snapshot stored before this start"
                );
                if config.store.is_some()
                    && let Some(generation) = stored.generation
                {
                    slot.loaded_generation(generation);
                }
                slot.serve(&metrics, header, stored.snapshot, stored.hashes, stored.deltas);
                if let Ok(Some(latest)) = slot.store.latest() {
                    slot.adopt_freshness(&latest.pointer, &trusted);
                }
            }
            lists.push(slot);
        }
        let state = AppState {
            lists,
            cache_duration: config.cache_duration,
            next_check: config.next_check,
            padding: config.padding,
            max_bucket_entries: config.max_bucket_entries,
            max_prefixes_per_request: config.max_prefixes_per_request,
            metrics,
            role: config.role,
            answers_in_flight: crate::state::AnswersInFlight::default(),
        }
        .shared();
        let client = |redirects| {
            fetch::client_builder(redirects)
                .build()
                .map_err(|e| Error::Config {
                    field: "HTTP client".to_owned(),
                    reason: e.to_string(),
                })
        };
        let url_sources = || {
            (config.lists.iter())
                .flat_map(|l| l.sources.iter().chain(&l.allow))
                .filter(|s| s.url.is_some())
        };
        let http = (url_sources().any(|s| s.headers.is_empty()))
            .then(|| client(reqwest::redirect::Policy::default()))
            .transpose()?;
        let http_with_headers = (url_sources().any(|s| !s.headers.is_empty()))
            .then(|| client(fetch::same_origin_redirects()))
            .transpose()?;
        let n = config.lists.len();
        Ok(Self {
            inner: Arc::new(Inner {
                build_locks: (0..n).map(|_| tokio::sync::Mutex::new(())).collect(),
                build_waiting: (0..n).map(|_| AtomicBool::new(false)).collect(),
                force_once: (0..n).map(|_| AtomicBool::new(false)).collect(),
                build_time: AtomicU64::new(0),
                _data_dir_lock: data_dir_lock,
                // A replica takes no lease, and writes nothing.
                holder: if config.role.builds() {
                    crate::storage::builder_id(&config.data_dir)
                } else {
                    String::new()
                },
                storage,
                config,
                key,
                public_key,
                trusted,
                state,
                http,
                http_with_headers,
            }),
        })
    }

    /// Skip the publishing gates on the next build of every list (once).
    pub fn force_next_build(&self) {
        for f in &self.inner.force_once {
            f.store(true, Ordering::SeqCst);
        }
    }

    /// Build as of `unix_seconds` instead of the clock: the snapshot's
    /// version, created and expiry times, and the seed of its canary
    /// false-positive measurement. With the same sources, signing key and
    /// time, and no snapshot before it, a build writes byte-identical
    /// snapshots (Ed25519 signatures are deterministic). For reproducible
    /// builds (`blocksieve-publisher build --now`); a serving publisher keeps
    /// the clock.
    pub fn set_build_time(&self, unix_seconds: u64) {
        self.inner.build_time.store(unix_seconds, Ordering::SeqCst);
    }

    /// The time a build records: [`Self::set_build_time`]'s, else the clock's.
    fn build_now(&self) -> u64 {
        match self.inner.build_time.load(Ordering::SeqCst) {
            0 => unix_now(),
            fixed => fixed,
        }
    }

    /// The public key agents must trust.
    pub fn public_key(&self) -> &TrustedKey {
        &self.inner.public_key
    }

    /// The shared state the router serves.
    pub fn state(&self) -> Arc<AppState> {
        self.inner.state.clone()
    }

    /// The HTTP service, with the configured limits as layers: the whole
    /// API, or only the operational routes for a [`Role::Builder`].
    pub fn router(&self) -> server::Api {
        let c = &self.inner.config;
        let limits = server::Limits {
            request_timeout: c.request_timeout,
            body_read_timeout: c.body_read_timeout,
            max_concurrency: c.max_concurrency,
            cors_allowed_origins: c.cors_allowed_origins.clone(),
        };
        if c.role.serves_api() {
            server::router(self.state(), limits)
        } else {
            server::operational_router(self.state(), limits)
        }
    }

    /// The per-connection limits [`Publisher::run`] serves with.
    pub fn connection_limits(&self) -> listener::ConnectionLimits {
        let c = &self.inner.config;
        listener::ConnectionLimits {
            header_read_timeout: c.header_read_timeout,
            write_stall_timeout: c.write_stall_timeout,
            max_head_bytes: server::MAX_REQUEST_HEAD_BYTES,
            max_connections: c.max_connections,
        }
    }

    /// The configuration, validated ([`Config::resolve`]).
    pub fn config(&self) -> &Settings {
        &self.inner.config
    }

    /// Builds every list once (one after another) and publishes what passes
    /// its gates. A list that fails or is refused keeps serving its previous
    /// snapshot; the outcome is logged, counted and shown in `/v1/lists`.
    pub async fn build_all(&self) -> Vec<ListBuildOutcome> {
        let mut outcomes = Vec::new();
        for i in 0..self.inner.config.lists.len() {
            outcomes.push(self.build_list(i).await);
        }
        outcomes
    }

    /// Times SHA-256 alone over every expression list `index`'s last build
    /// hashed from its sources' entries, allowlists aside
    /// ([`build::hash_reference_encoded`]), reading each source's last
    /// good content from the data directory: the part of a build no
    /// implementation can skip, to compare the build's stages with. The
    /// content is read in ranges and decoded as it is read, line formats in
    /// blocks of whole lines, so this adds little to the process's peak
    /// memory. `None` when
    /// a source has no stored content.
    pub fn hash_reference(&self, index: usize) -> Option<build::HashReference> {
        let list = &self.inner.config.lists[index];
        let mut total = build::HashReference::default();
        for (i, source) in list.sources.iter().enumerate() {
            let cache = SourceCache::source(self.inner.storage.clone(), &list.name, i, source);
            let encoding = cache.encoding()?;
            let stored = std::io::BufReader::with_capacity(1 << 20, storage::CacheReader::new(&cache));
            total += build::hash_reference_encoded(stored, encoding, source).ok()?;
        }
        Some(total)
    }

    /// Builds list `index` (serialized with other builds of the same list).
    /// A replica builds nothing: its outcome is an [`Error::Config`].
    pub async fn build_list(&self, index: usize) -> ListBuildOutcome {
        let inner = &self.inner;
        let list = &inner.config.lists[index];
        if inner.key.is_none() {
            return builds_nothing(&list.name);
        }
        let _guard = inner.build_locks[index].lock().await;
        // Set when this task is dropped (cancelled at shutdown): the
        // blocking work below then stops at its next check instead of
        // running on, holding the data directory, and publishing.
        let cancel = build::Cancel::default();
        let _cancel_on_drop = cancel.on_drop();
        let started = std::time::Instant::now();
        let lease = match self.acquire_lease(index, &cancel).await {
            Ok(lease) => lease,
            Err(e) => {
                let outcome = ListBuildOutcome::failed(&list.name, e);
                self.record(index, &outcome, false, started.elapsed());
                return outcome;
            }
        };
        // On a store that ignores conditional writes the lease is kept: it
        // is how a second builder is seen. Else it is released when the
        // build ends, or when this task is dropped before the blocking
        // build below takes it on.
        let releasable = lease.filter(|_| !inner.config.dangerous_store_ignores_conditions);
        let mut held = self.hold_lease(index, releasable.clone());
        // The generation the store points to before the sources are
        // fetched: a build whose fetch outlasts its lease must not publish
        // content older than what another builder published meanwhile.
        // Not knowing it, a build cannot tell whether its content is older
        // than what another builder publishes while it fetches: with
        // several builders on a store (another one may take the lease
        // should this fetch outlast it), such a build fetches nothing.
        let this = self.clone();
        let started_from = match tokio::task::spawn_blocking(move || this.head_generation(index)).await {
            Ok(Ok(generation)) => Ok(Some(generation)),
            Ok(Err(e)) if inner.config.store.is_some() => Err(e),
            Ok(Err(_)) => Ok(None),
            Err(e) => Err(Error::BuildTask {
                list: list.name.clone(),
                reason: e.to_string(),
            }),
        };
        let outcome = match started_from {
            Err(e) => {
                let mut outcome = ListBuildOutcome::failed(&list.name, e);
                self.finish_build(index, &mut outcome, false, started);
                outcome
            }
            Ok(started_from) => {
                let (loaded, caches) = self.fetch_sources(index).await;
                let force = inner.force_once[index].swap(false, Ordering::SeqCst);
                let this = self.clone();
                // From here a cancelled build may still be publishing: the
                // lease is the blocking work's to release, once it stops.
                let handed_on = held.hand_on();
                tokio::task::spawn_blocking(move || {
                    let mut outcome =
                        this.build_and_publish(index, loaded, &caches, force, started_from, &cancel);
                    // Recorded here, not by the task awaiting this one: a
                    // build whose task was dropped (at shutdown) while it
                    // published still leaves its history line, metrics and
                    // log line. One cancelled that published nothing leaves
                    // none, as one cancelled while it fetched.
                    if !cancel.is_cancelled() || outcome.result.is_ok() {
                        this.finish_build(index, &mut outcome, force, started);
                    }
                    // Cancelled, the task that releases the lease below is
                    // gone: released here, so that another builder need not
                    // wait out `lease_s` after a build that published nothing.
                    if cancel.is_cancelled()
                        && let Some(version) = handed_on
                    {
                        let slot = &this.inner.state.lists[index];
                        slot.store.release_lease(&this.inner.holder, version);
                    }
                    outcome
                })
                .await
                .unwrap_or_else(|e| {
                    let reason = e.to_string();
                    let mut outcome = ListBuildOutcome::failed(
                        &list.name,
                        Error::BuildTask {
                            list: list.name.clone(),
                            reason,
                        },
                    );
                    self.finish_build(index, &mut outcome, force, started);
                    outcome
                })
            }
        };
        held.hand_on();
        if let Some(version) = releasable {
            let this = self.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let slot = &this.inner.state.lists[index];
                slot.store.release_lease(&this.inner.holder, version);
            })
            .await;
        }
        outcome
    }

    /// A build's end: its timings' total and what no stage covers
    /// (sizing, gates, the blocking-pool hop), then its metrics, history
    /// line, status and log line ([`Self::record`]).
    fn finish_build(
        &self,
        index: usize,
        outcome: &mut ListBuildOutcome,
        force: bool,
        started: std::time::Instant,
    ) {
        if let Some(timings) = outcome.report.as_mut().map(|r| &mut r.timings) {
            timings.total = started.elapsed();
            let other = timings.total.saturating_sub(timings.sum());
            timings.add("other", other);
        }
        self.record(index, outcome, force, started.elapsed());
    }

    /// Build (pure) and store: reads the sources, keeps what the build
    /// asks to keep of them in `caches` (one per source, with its label),
    /// builds the snapshot, checks the gates and publishes. `started_from`
    /// is the generation the store pointed to before the sources were
    /// fetched ([`Self::head_generation`]): if another builder has
    /// published since (its lease taken after this one's ran out while this
    /// fetch went on), this build's content may be older than what is
    /// published, and the build is discarded — neither published nor kept
    /// as the sources' last good content — as one that loses the store's
    /// conditional write is. Once `cancel` is set, the build stops at its
    /// next check (a block of a source's content, or the next stage) and
    /// ends as [`Error::Cancelled`], publishing and keeping nothing; a
    /// publish already under way finishes.
    fn build_and_publish(
        &self,
        index: usize,
        loaded: Vec<LoadedSource>,
        caches: &[(SourceCache, String)],
        force: bool,
        started_from: Option<Option<u64>>,
        cancel: &build::Cancel,
    ) -> ListBuildOutcome {
        let inner = &self.inner;
        let list = &inner.config.lists[index];
        let slot = &inner.state.lists[index];
        let Some(key) = inner.key.as_ref() else {
            return builds_nothing(&list.name);
        };
        let failed = |e| ListBuildOutcome {
            sources_read: None,
            unchanged: false,
            list: list.name.clone(),
            report: None,
            result: Err(e),
        };
        let cancelled = || {
            tracing::info!(list = %list.name, "build cancelled: the publisher is stopping; nothing published");
            failed(Error::Cancelled {
                list: list.name.clone(),
            })
        };
        // The generation this build follows; newer than what is served
        // when another builder published it: served first, so that the
        // build's version and gates follow it.
        let base = match slot.store.head(&inner.trusted) {
            Ok(base) => base,
            Err(e) => return failed(e),
        };
        if let Some(base) = &base {
            let served = slot.current.load().as_ref().map(|p| p.header.version);
            if served.is_none_or(|v| v < base.pointer.version)
                && let Some(stored) = slot.store.load_from(base.pointer.generation, &inner.trusted)
                && let Ok(header) = blocksieve_format::parse_header_unverified(&stored.snapshot)
            {
                if inner.config.store.is_some()
                    && let Some(generation) = stored.generation
                {
                    slot.loaded_generation(generation);
                }
                slot.serve(
                    &inner.state.metrics,
                    header,
                    stored.snapshot,
                    stored.hashes,
                    stored.deltas,
                );
            }
            slot.adopt_freshness(&base.pointer, &inner.trusted);
        }
        // Checked once the newer generation serves here.
        let now_at = base.as_ref().map(|b| b.pointer.generation);
        if let Some(started) = started_from
            && started != now_at
            && let Some(generation) = now_at
        {
            tracing::warn!(list = %list.name, generation, "another builder published while this build fetched its sources: discarded");
            return failed(Error::Superseded {
                list: list.name.clone(),
                generation,
            });
        }
        let previous = slot.current.load_full();
        let spill = UnlessServed {
            spill: &slot.store,
            served: previous.as_ref().map(|p| p.hashes.as_slice()),
        };
        let request = BuildRequest {
            list,
            previous: previous.as_ref().map(|p| &p.header),
            after_version: base.as_ref().map_or(0, |b| b.pointer.version),
            now: self.build_now(),
            ttl: inner.config.snapshot_ttl,
            key,
            probe: build::PeakRssProbe::new(metrics::peak_rss_bytes),
            spill: Some(&spill),
            cancel: Some(cancel),
        };
        let mut updates = Vec::new();
        let read = build::read_sources(
            &list.name,
            loaded,
            request.now,
            request.probe,
            &mut updates,
            cancel,
        );
        // Cancelled: what was read is dropped (staged copies with it).
        if cancel.is_cancelled() {
            return cancelled();
        }
        // Sources fetched but whose content was not taken fell back (or
        // failed the build) as a failed fetch does, and count as one.
        let content_failures = match &read {
            Ok(read) => read.content_failures,
            Err(failure) => failure.read.content_failures,
        };
        inner.state.metrics.source_failed(&list.name, content_failures);
        // Each fresh source's copy, written while it was read, is committed
        // as its last good content once this build is published or found
        // unchanged (`copies`); metadata alone at once.
        let copies = PendingCopies::sort(updates, caches, &slot.watch.sources);
        // Block sources (of several) whose fresh content fell past
        // `max_shrink` of their last good content: the gate below refuses
        // the build; their copies are kept on no other path either.
        let mut shrunk = copies.shrunk(caches, list.sources.len(), list.gates.max_shrink);
        let read = match read {
            Ok(read) => read,
            Err(failure) => {
                // Failed for another source: the sources that answered keep
                // their content.
                self.keep_unless_published_past(index, base.as_ref(), copies.forget(&shrunk), caches);
                let build::ReadFailed { error, read } = *failure;
                return ListBuildOutcome {
                    sources_read: Some(read),
                    ..failed(error)
                };
            }
        };
        let built = match build::build_snapshot(&request, read) {
            _ if cancel.is_cancelled() => return cancelled(),
            Ok(b) => b,
            Err(e) => {
                self.keep_unless_published_past(index, base.as_ref(), copies.forget(&shrunk), caches);
                return failed(e);
            }
        };
        let reread = |reason| Error::Reread {
            list: list.name.clone(),
            reason,
        };
        let new_header = match blocksieve_format::parse_header_unverified(&built.snapshot) {
            Ok(header) => header,
            Err(reason) => return failed(reread(reason)),
        };
        let next_build_at = schedule::next_firing(inner.config.schedule_of(index), request.now).unwrap_or(0);
        let sign_freshness = |header: &SnapshotHeader| {
            let ttl = inner.config.snapshot_ttl;
            Freshness::sign(header, request.now, ttl, next_build_at, key)
        };
        // Unchanged: nothing new to publish (no version, generation or
        // delta); a new freshness record says the served version is still
        // the latest, here and, through the pointer, on replicas.
        // Not while the store's newest generation is not the one served
        // (its objects did not load): a new one is published past it. Nor
        // when the store holds no generation (it lost the list, or the data
        // directory is of the older layout): the served version is
        // published again as a new one, so the store has the list. Nor
        // when the served version was signed with a previous key (a key
        // rotation): it is published again under this one.
        if let Some(prev) = &previous
            && prev.header.key_id == key.public_key().id()
            && base
                .as_ref()
                .is_some_and(|b| b.pointer.version == prev.header.version)
            && prev.unchanged_by(&new_header, &built.hashes, request.now, request.ttl)
        {
            if let Some(freshness) = sign_freshness(&prev.header) {
                if let Some(base) = base.as_ref().filter(|b| b.pointer.version == prev.header.version) {
                    match slot.store.refresh(base, &freshness.header_value) {
                        Ok(true) => {}
                        Ok(false) => {
                            if let Some(superseded) = self.published_past(index, Some(base)) {
                                return failed(superseded);
                            }
                        }
                        Err(e) => {
                            tracing::warn!(list = %list.name, error = %e, "cannot store the freshness record; replicas keep the previous one")
                        }
                    }
                }
                slot.offer_freshness(freshness);
            }
            // Nothing left the list (a shrunk source's entries are also
            // another's): served on, but a shrunk copy is not kept.
            let mut report = built.report;
            report
                .timings
                .add("source_cache", copies.forget(&shrunk).commit(caches));
            return ListBuildOutcome {
                sources_read: None,
                unchanged: true,
                list: list.name.clone(),
                report: Some(report),
                result: Ok(prev.header.version),
            };
        }
        let source_shrunk = (!shrunk.is_empty()).then(|| shrunk.swap_remove(0).1);
        if let Some(refusal) = build::check_gates(list, request.previous, &built.report).or(source_shrunk) {
            if force {
                tracing::warn!(list = %list.name, %refusal, "gate overridden by --force");
            } else {
                return ListBuildOutcome {
                    sources_read: None,
                    unchanged: false,
                    list: list.name.clone(),
                    report: Some(built.report),
                    result: Err(Error::Refused { gate: refusal }),
                };
            }
        }
        let mut built = built;
        // The delta from the version served (the one this build follows)
        // appended to its chain.
        let deltas_started = std::time::Instant::now();
        let chain = NextDelta {
            from: previous
                .as_ref()
                .map(|p| (&p.header, p.hashes.as_slice(), &p.deltas)),
            to: (&new_header, &built.hashes),
            window: inner.config.delta_window,
            snapshot_bytes: built.snapshot.len(),
        }
        .chain(key);
        built.report.timings.add("deltas", deltas_started.elapsed());
        if cancel.is_cancelled() {
            return cancelled();
        }
        let freshness = sign_freshness(&new_header);
        let write_started = std::time::Instant::now();
        let build = generations::Build {
            version: built.version,
            snapshot: &built.snapshot,
            hashes: &built.hashes,
            deltas: chain.bytes(),
            freshness: freshness.as_ref().map(|f| f.header_value.as_str()),
            // Without a shared store no other builder exists (the data
            // directory is locked by one process).
            replaces_untrusted: force || inner.config.store.is_none(),
        };
        // The copies are stored after publishing (one that lost the
        // store's race is not kept): until then, the copies stored are
        // marked as older than what is published.
        built
            .report
            .timings
            .add("source_cache", copies.mark_behind(caches, built.version));
        let written =
            (slot.store).publish_spilled(&build, built.spilled.take(), base.as_ref(), key, request.now);
        let write_took = write_started.elapsed();
        built.report.timings.add("write", write_took);
        let published = written.and_then(|outcome| match outcome {
            PublishOutcome::Published { generation } => {
                // What `/v1/lists` and the status page show as the store's
                // generation served here (a replica's follower records its
                // own; a builder's sees its own publish as nothing new).
                if inner.config.store.is_some() {
                    slot.loaded_generation(generation);
                }
                Ok(())
            }
            PublishOutcome::Superseded { generation } => Err(Error::Superseded {
                list: list.name.clone(),
                generation,
            }),
        });
        let result = match published.map(|()| new_header) {
            Ok(header) => {
                let version = header.version;
                slot.serve(&inner.state.metrics, header, built.snapshot, built.hashes, chain);
                if let Some(freshness) = freshness {
                    slot.offer_freshness(freshness);
                }
                built.report.timings.add("source_cache", copies.commit(caches));
                Ok(version)
            }
            Err(e) => {
                // Another builder's generation won: this content is not
                // kept. Any other failure may have left this generation's
                // manifest in the store (the pointer write failed), which
                // the next build follows: its content is kept.
                if !matches!(e, Error::Superseded { .. }) {
                    built.report.timings.add("source_cache", copies.commit(caches));
                }
                Err(e)
            }
        };
        ListBuildOutcome {
            sources_read: None,
            unchanged: false,
            list: list.name.clone(),
            report: Some(built.report),
            result,
        }
    }
}

/// The outcome of asking a replica, which has no signing key, to build.
fn builds_nothing(list: &str) -> ListBuildOutcome {
    let reason = "a replica builds nothing".to_owned();
    ListBuildOutcome::failed(
        list,
        Error::Config {
            field: "role".to_owned(),
            reason,
        },
    )
}

/// Waits until every list has a snapshot or `timeout` passes; for tests and
/// readiness checks.
pub async fn wait_until_ready(state: &AppState, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if state.ready() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod races;
