//! The lists component: one slot per subscribed threat list with the
//! state in use (a base snapshot and the additions of the deltas applied
//! since, [`crate::engine::delta`]), the update round that replaces it (the
//! deltas since the version held, or a conditional download of the whole
//! snapshot; verification on the blocking pool, persistence to the cache
//! directory, an atomic swap), the restore from that directory at start,
//! and the probe of every list's state with a URL's full hashes.
//!
//! The update half of the protocol, as Chromium's `V4UpdateProtocolManager`
//! is: it owns its slots and their bookkeeping; the clock, the HTTP client
//! and the counters are handed in ([`Shared`]). The background task
//! ([`crate::updater`]) goes through its methods ([`Lists::update_one`],
//! [`Lists::time_to_expiry`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use blocksieve_format::api::{routes, snapshot_id};
use blocksieve_format::{DecodeLimits, SnapshotHeader, TrustedKey};

use crate::Error;
use crate::config::Settings;
use crate::engine::accept::{AcceptedSnapshot, VersionFloor};
use crate::engine::confirm::Versions;
use crate::engine::delta::{self, ListState, UpdateRequest};
use crate::engine::lookup::LocalLookup;
use crate::engine::update::{self, PlainBase, SnapshotStep};
use crate::http::{self, SnapshotFetch};
use crate::shared::{Shared, lock};
use crate::stats::Counters;
use crate::status::{ListStatus, SnapshotSource};
use crate::store::{Store, WriteOrder};
use crate::update::ListUpdate;

mod bases;
mod chain;
mod persist;
mod probe;
mod rebase;

/// A URL's probe of the lists that have a snapshot, and the first list
/// that has none (not probed): [`Lists::lookup_loaded`].
pub(crate) type Probed = (LocalLookup, Option<Arc<str>>);

/// A list's state in use. The only way in is a [`ListState`], built on an
/// [`AcceptedSnapshot`] and verified deltas: nothing unverified can be
/// swapped into a [`ListSlot`].
#[derive(Debug)]
struct Loaded {
    state: ListState,
    /// Where its base came from, for [`Agent::status`](crate::Agent::status).
    source: SnapshotSource,
}

/// The bookkeeping of one list, touched by updates and status only — never
/// by local lookups (a confirmation reads `buckets_advertised`).
#[derive(Debug, Default)]
struct ListMeta {
    /// The ETag of the base snapshot, sent back as `If-None-Match` on a
    /// snapshot download while no delta has been applied to it, so an
    /// unchanged snapshot costs a 304.
    etag: Option<String>,
    /// The last accepted (version, body hash): nothing older is accepted.
    floor: Option<VersionFloor>,
    /// The signed deltas applied since the base, as downloaded, one after
    /// another: persisted beside the base so a restart restores the state.
    chain: Vec<u8>,
    /// For [`ListStatus::last_delta_error`].
    last_delta_error: Option<Error>,
    /// For [`ListStatus::last_success`]: when an update last succeeded.
    last_success: Option<SystemTime>,
    /// For [`ListStatus::next_check`]: when the background updates check
    /// this list next.
    next_check: Option<SystemTime>,
    /// For [`ListStatus::last_error`]: why the last update failed.
    last_error: Option<Error>,
    /// The last update's answer when it was `404 unknown_list`: the
    /// publisher serves no such list (retired, or not yet configured on the
    /// server answering). Its snapshot stays and is probed, but it is left
    /// out of full-hash requests, which a server refuses whole for a list
    /// it does not know, so that the other lists' hits are still confirmed;
    /// its own hits cannot be, and are unverified ([`Lists::not_served`]).
    not_served: Option<Error>,
    /// For [`ListStatus::consecutive_failures`].
    consecutive_failures: u32,
    /// For [`ListStatus::last_storage_error`]: a failed write or a
    /// quarantined file.
    last_storage_error: Option<Error>,
    /// The snapshot in use when its write to the cache directory failed:
    /// written again before a chain of deltas on it is, since a chain and
    /// record naming it as their base, beside the older snapshot still on
    /// disk, would make the next start refuse that one as a rollback.
    unsaved: Option<UnsavedSnapshot>,
    /// Whether `chain` is not known to be on disk (its write failed, or its
    /// round was cancelled mid-write): written again at the next round.
    chain_unsaved: bool,
    /// The snapshot whose immutable full-hash buckets the latest snapshot
    /// response advertised (`X-Blocksieve-Hashes` naming exactly the list
    /// and the snapshot in use, by its id: version and body hash), if it
    /// did: only then may full hashes be fetched there. `None` for a
    /// snapshot restored from the cache directory until a download or
    /// `304` says so.
    buckets_advertised: Option<VersionFloor>,
    /// The last signed freshness record applied to the state in use: its
    /// version and `next_build_at` ([`behind`]).
    next_build: Option<(u64, u64)>,
}

/// A snapshot whose write to the cache directory failed, or whose round
/// was cancelled before the write's outcome was known, kept to write it
/// again ([`ListMeta::unsaved`]).
#[derive(Debug)]
struct UnsavedSnapshot {
    /// Shared with the write's task, which a cancelled round does not stop:
    /// the bytes outlive both.
    bytes: Arc<Vec<u8>>,
    floor: VersionFloor,
    etag: Option<String>,
}

/// One subscribed list and its current snapshot.
#[derive(Debug)]
struct ListSlot {
    name: Arc<str>,
    /// Swapped whole by updates; readers take an `Arc` and never block, so a
    /// check sees either the old filter or the new one, never a mix.
    current: ArcSwapOption<Loaded>,
    meta: Mutex<ListMeta>,
    /// Orders the list's cache-directory writes (`lists/persist`).
    writes: Arc<WriteOrder>,
}

impl ListSlot {
    fn version(&self) -> Option<u64> {
        self.current.load().as_ref().map(|l| l.state.version())
    }

    /// The version and body hash of the snapshot its state stands for.
    fn floor(&self) -> Option<VersionFloor> {
        self.current.load().as_ref().map(|l| l.state.floor())
    }
}

/// Every subscribed list's snapshot and update state.
#[derive(Debug)]
pub(crate) struct Lists {
    /// One per subscribed list, in subscription order.
    slots: Vec<ListSlot>,
    /// Shared with decoding tasks on the blocking pool.
    trusted_keys: Arc<[TrustedKey]>,
    /// Decode limits; the body limits equal `max_snapshot_bytes`.
    limits: DecodeLimits,
    /// The most snapshot bytes downloaded or read from the cache.
    max_snapshot_bytes: u64,
    /// Total time allowed for one snapshot download.
    snapshot_timeout: Duration,
    /// Additions since the base, as a share of its entries, past which an
    /// update takes the whole snapshot instead of deltas.
    max_additions_ratio: f64,
    /// The cache directory, for the path of a storage error.
    cache_dir: Option<PathBuf>,
    /// Where accepted snapshots and floors are persisted, if anywhere.
    store: Option<Store>,
    /// One update in flight at a time: serialises manual rounds and the
    /// background task, so that two updates cannot race a floor check
    /// against each other's swap (and roll a list back).
    update_lock: tokio::sync::Mutex<()>,
    /// How many times an update swapped a list's state in: a check reads
    /// it before probing, and knows afterwards whether any list moved on.
    swaps: AtomicU64,
    /// Whole update rounds (every list) started, each numbered as it takes
    /// the update lock, and the number of the last one that ended: a check
    /// refused as `prefix_too_short` needs one round that started after the
    /// refusal, and no more ([`Lists::update_all_unless_swapped`]).
    rounds_started: AtomicU64,
    rounds_ended: AtomicU64,
    /// The client, clock and counters, shared with the confirmation.
    shared: Arc<Shared>,
}

impl Lists {
    /// A slot per list of `settings`, each loaded from the cache directory
    /// if a verified snapshot is found there.
    pub(crate) fn new(settings: &Settings, shared: Arc<Shared>) -> Self {
        let slots = settings
            .lists
            .iter()
            .map(|name| ListSlot {
                name: name.as_str().into(),
                current: ArcSwapOption::empty(),
                meta: Mutex::new(ListMeta::default()),
                writes: Arc::default(),
            })
            .collect();
        let lists = Self {
            slots,
            trusted_keys: settings.trusted_keys.clone().into(),
            limits: settings.limits,
            max_snapshot_bytes: settings.max_snapshot_bytes,
            snapshot_timeout: settings.snapshot_timeout,
            max_additions_ratio: settings.max_additions_ratio,
            cache_dir: settings.cache_dir.clone(),
            store: settings.store.clone(),
            update_lock: tokio::sync::Mutex::new(()),
            swaps: AtomicU64::new(0),
            rounds_started: AtomicU64::new(0),
            rounds_ended: AtomicU64::new(0),
            shared,
        };
        lists.restore_from_cache();
        lists
    }

    /// The subscribed lists' names, in subscription order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|s| &*s.name)
    }

    /// How many lists are subscribed.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    fn slot(&self, list: &str) -> Option<&ListSlot> {
        self.slots.iter().find(|s| &*s.name == list)
    }

    /// The version `list`'s state stands for, if it has one.
    pub(crate) fn version(&self, list: &str) -> Option<u64> {
        self.slot(list).and_then(ListSlot::version)
    }

    /// How many times an update swapped a list's state in so far: read
    /// before a probe, a different count afterwards means some list moved
    /// on meanwhile (the probe may have seen either state).
    pub(crate) fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Acquire)
    }

    /// The version of each list that has a state and that the publisher
    /// serves, as far as the last update of each knows: the versions a
    /// full-hash request names (a list the publisher said it does not
    /// serve would make it refuse the request whole, leaving every other
    /// list's hits unverified).
    pub(crate) fn versions(&self) -> Versions {
        self.slots
            .iter()
            .filter(|slot| lock(&slot.meta).not_served.is_none())
            .filter_map(|slot| Some((slot.name.to_string(), slot.floor()?)))
            .collect()
    }

    /// How many lists have a state (are probed by a check).
    pub(crate) fn loaded(&self) -> usize {
        self.slots
            .iter()
            .filter(|slot| slot.current.load().is_some())
            .count()
    }

    /// The publisher's answer that it does not serve `list`, if that is
    /// what its last update got: why a hit on it is not confirmed.
    pub(crate) fn not_served(&self, list: &str) -> Option<Error> {
        self.slot(list)
            .and_then(|slot| lock(&slot.meta).not_served.clone())
    }

    /// Whether every subscribed list's latest snapshot response advertised
    /// the immutable full-hash buckets of exactly the snapshot `versions`
    /// names for it (the snapshots a check probed): then its full hashes
    /// may be fetched there, one bucket per list.
    pub(crate) fn buckets_advertised(&self, versions: &Versions) -> bool {
        versions.len() == self.slots.len()
            && self.slots.iter().all(|slot| {
                let advertised = lock(&slot.meta).buckets_advertised;
                advertised.is_some() && advertised == versions.get(&*slot.name).copied()
            })
    }

    /// How many full hashes the lists' base snapshots hold together: what
    /// sizes a batch's full-hash requests ([`prefix::plan_requests`](crate::engine::prefix::plan_requests)).
    pub(crate) fn full_hashes_held(&self) -> u64 {
        self.slots
            .iter()
            .filter_map(|slot| {
                let current = slot.current.load();
                current.as_ref().map(|l| l.state.base().header().full_hash_count)
            })
            .fold(0u64, u64::saturating_add)
    }

    /// The verified header of `list`'s base snapshot, if any.
    pub(crate) fn header(&self, list: &str) -> Option<SnapshotHeader> {
        let slot = self.slot(list)?;
        slot.current
            .load()
            .as_ref()
            .map(|l| l.state.base().header().clone())
    }

    /// Each list's status at `now`, in subscription order.
    pub(crate) fn statuses(&self, now: SystemTime) -> Vec<ListStatus> {
        self.slots
            .iter()
            .map(|slot| {
                let current = slot.current.load_full();
                let meta = lock(&slot.meta);
                let state = current.as_ref().map(|l| &l.state);
                let base = state.map(ListState::base);
                ListStatus {
                    name: slot.name.to_string(),
                    version: state.map(ListState::version),
                    base_version: base.map(|b| b.header().version),
                    additions: state.map_or(0, |s| s.additions().len()),
                    created_at: base.map(AcceptedSnapshot::created_at),
                    expires_at: state.map(ListState::expires_at),
                    age: base.map(|a| now.duration_since(a.created_at()).unwrap_or(Duration::ZERO)),
                    stale: state.is_some_and(|s| s.is_stale(now)),
                    source: current.as_ref().map(|l| l.source),
                    version_floor: meta.floor.map(|f| f.version),
                    last_success: meta.last_success,
                    next_check: meta.next_check,
                    last_error: meta.last_error.clone(),
                    consecutive_failures: meta.consecutive_failures,
                    last_storage_error: meta.last_storage_error.clone(),
                    last_delta_error: meta.last_delta_error.clone(),
                }
            })
            .collect()
    }

    /// Records when the background updates check list `index` next
    /// (`None`: not known), for [`ListStatus::next_check`].
    pub(crate) fn set_next_check(&self, index: usize, at: Option<SystemTime>) {
        if let Some(slot) = self.slots.get(index) {
            lock(&slot.meta).next_check = at;
        }
    }

    /// How long list `index`'s snapshot stays fresh, or `None` without a
    /// fresh one (none, or expired), or when the cache directory failed it
    /// (a chain quarantined or missing at start leaves the list behind the
    /// version it held: it is updated as soon as a cold start is, not
    /// after the warm start's jitter): the input of the initial jitter.
    pub(crate) fn time_to_expiry(&self, index: usize) -> Option<Duration> {
        let slot = self.slots.get(index)?;
        if lock(&slot.meta).last_storage_error.is_some() {
            return None;
        }
        let current = slot.current.load();
        let loaded = current.as_ref()?;
        loaded.state.expires_at().duration_since(self.shared.now()).ok()
    }

    /// One update round: every list, one after the other, with the update
    /// lock held throughout. Each list's name and outcome, in subscription
    /// order.
    pub(crate) async fn update_all(&self) -> Vec<(String, ListUpdate)> {
        let _round = self.update_lock.lock().await;
        let round = self.rounds_started.fetch_add(1, Ordering::AcqRel) + 1;
        let mut lists = Vec::with_capacity(self.slots.len());
        for slot in &self.slots {
            let (outcome, _) = self.update_list_locked(slot).await;
            lists.push((slot.name.to_string(), outcome));
        }
        self.rounds_ended.store(round, Ordering::Release);
        lists
    }

    /// How many whole update rounds have started (taken the update lock):
    /// for [`Lists::update_all_unless_swapped`].
    pub(crate) fn rounds_started(&self) -> u64 {
        self.rounds_started.load(Ordering::Acquire)
    }

    /// An update round ([`Lists::update_all`]) unless, once the update lock
    /// is had, a list's state was swapped since [`Lists::swaps`] counted
    /// `swaps` (a round that ran meanwhile moved them on) or a whole round
    /// that started after [`Lists::rounds_started`] counted `rounds` has
    /// ended (it asked the publisher after the refusal, and what it found
    /// stands): for checks refused as `prefix_too_short`, which all wait
    /// for one round rather than each run their own. Without the second
    /// condition a round that changed nothing (the publisher refuses at the
    /// version it serves, or the snapshot cannot be had) was run again for
    /// every check refused meanwhile, one after another: as many rounds
    /// queued as hits, without end while each round outlasts a check's wait.
    pub(crate) async fn update_all_unless_swapped(&self, swaps: u64, rounds: u64) {
        let _round = self.update_lock.lock().await;
        if self.swaps() != swaps || self.rounds_ended.load(Ordering::Acquire) > rounds {
            return;
        }
        let round = self.rounds_started.fetch_add(1, Ordering::AcqRel) + 1;
        for slot in &self.slots {
            self.update_list_locked(slot).await;
        }
        self.rounds_ended.store(round, Ordering::Release);
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
        self.persist_unsaved(slot).await;
        match self.fetch_and_apply(slot).await {
            Ok((outcome, hint)) => {
                let mut meta = lock(&slot.meta);
                meta.last_success = Some(self.shared.now());
                meta.last_error = None;
                if meta.not_served.take().is_some() {
                    // What a check asks for changed: counted as a swap.
                    self.swaps.fetch_add(1, Ordering::Release);
                }
                meta.consecutive_failures = 0;
                (outcome, hint)
            }
            Err(error) => {
                self.shared.counters.update_failed(&error);
                let kept_version = slot.version();
                tracing::warn!(list = %slot.name, ?kept_version, %error, "snapshot update failed");
                let mut meta = lock(&slot.meta);
                meta.last_error = Some(error.clone());
                // Another failure says nothing of whether it is served: as
                // it was.
                if error.is_unknown_list() && meta.not_served.replace(error.clone()).is_none() {
                    // What a check asks for changed (this list left out):
                    // counted as a swap, so that checks refused for naming
                    // it are asked again ([`Lists::swaps`]).
                    self.swaps.fetch_add(1, Ordering::Release);
                }
                meta.consecutive_failures = meta.consecutive_failures.saturating_add(1);
                (ListUpdate::Failed { error, kept_version }, None)
            }
        }
    }

    /// One list's update from the publisher at `base`: the deltas since the
    /// version held while [`delta::next_request`] says so, and the whole
    /// snapshot otherwise — also, in the same round, when no chain can be
    /// had or the one sent does not verify.
    ///
    /// `vouched` is the round's newest version named by a signed freshness
    /// record ([`Self::fetch_and_apply`]), raised by what this base URL
    /// answers.
    async fn fetch_and_apply_from(
        &self,
        slot: &ListSlot,
        base: &str,
        vouched: &mut Option<u64>,
    ) -> Result<(ListUpdate, Option<Duration>), Error> {
        let current = slot.current.load_full();
        let request = delta::next_request(current.as_ref().map(|l| &l.state), self.max_additions_ratio);
        if let (UpdateRequest::Deltas { from, if_none_match }, Some(loaded)) = (request, &current) {
            let url = format!("{base}{}", routes::updates(&slot.name, from));
            if let Some(done) = self
                .follow_deltas(
                    slot,
                    &url,
                    loaded,
                    &if_none_match,
                    vouched,
                    self.max_additions_ratio,
                )
                .await?
            {
                return Ok(done);
            }
        }
        let url = format!("{base}{}", routes::latest_snapshot(&slot.name));
        self.download_snapshot(slot, &url, vouched).await
    }

    /// Counts a round that asked for deltas and takes the whole snapshot
    /// instead, and keeps why in the list's status.
    fn delta_fallback(&self, slot: &ListSlot, error: Error) {
        tracing::info!(list = %slot.name, %error, "no usable deltas; taking the whole snapshot");
        Counters::bump(&self.shared.counters.delta_fallbacks);
        lock(&slot.meta).last_delta_error = Some(error);
    }

    /// Reads a response's freshness record (`X-Blocksieve-Freshness`), if
    /// any, and extends `state`'s freshness with it if it verifies and names
    /// the list and exactly the state's version and body hash. Anything
    /// else is ignored: a record can never make another version look
    /// fresh.
    fn note_freshness(&self, slot: &ListSlot, state: &ListState, header: Option<&str>) {
        let Some(value) = header else {
            return;
        };
        match delta::read_freshness(&slot.name, value, &self.trusted_keys) {
            Ok(record) if state.apply_freshness(&slot.name, &record) => {
                Counters::bump(&self.shared.counters.freshness_records_applied);
                lock(&slot.meta).next_build = Some((record.version, record.next_build_at));
            }
            Ok(record) => {
                tracing::debug!(list = %slot.name, held = state.version(), vouched = record.version, "freshness record for another version ignored");
            }
            Err(error) => tracing::debug!(list = %slot.name, %error, "freshness record ignored"),
        }
    }

    /// Downloads the latest whole snapshot from `url` (conditionally while
    /// the state is its base alone) and swaps it in as the new base, with no
    /// additions. A `304` that leaves the list at an older version than the
    /// round's `vouched` is asked again without the validator, and a
    /// snapshot still older fails the round ([`update::check_not_behind`]).
    async fn download_snapshot(
        &self,
        slot: &ListSlot,
        url: &str,
        vouched: &mut Option<u64>,
    ) -> Result<(ListUpdate, Option<Duration>), Error> {
        let current = slot.current.load_full();
        let previous = current.as_ref().map(|l| l.state.version());
        // Deltas applied: the base's ETag no longer names the version held.
        let plain_base = current.as_ref().filter(|l| !l.state.has_deltas());
        let (mut etag, floor) = {
            let meta = lock(&slot.meta);
            (plain_base.and(meta.etag.clone()), meta.floor)
        };
        // At most twice: a 304 that shows the ETag sent stale is asked again
        // without it, and an unconditional request gets no 304.
        let (fetched, etag) = loop {
            let mut date = None;
            let fetched = http::fetch_snapshot(
                &self.shared.client,
                url,
                etag.as_deref(),
                self.max_snapshot_bytes,
                self.snapshot_timeout,
                self.shared.now(),
                &mut date,
            )
            .await;
            self.shared.observe_publisher_time(date);
            let fetched = fetched?;
            if let (SnapshotFetch::NotModified { freshness, .. }, Some(loaded), Some(_)) =
                (&fetched, plain_base, &etag)
                && let Some((newer, error)) = update::stale_validator(
                    &slot.name,
                    url,
                    &loaded.state,
                    freshness.as_deref(),
                    &self.trusted_keys,
                )
                .or_else(|| {
                    let held = loaded.state.version();
                    vouched
                        .filter(|&v| v > held)
                        .map(|v| (v, update::behind(url, held, v)))
                })
            {
                tracing::warn!(list = %slot.name, %error, "asking for the snapshot again without If-None-Match");
                Counters::bump(&self.shared.counters.delta_fallbacks);
                {
                    let mut meta = lock(&slot.meta);
                    meta.etag = None;
                    meta.last_delta_error = Some(error);
                }
                etag = None;
                *vouched = (*vouched).max(Some(newer));
                continue;
            }
            break (fetched, etag);
        };
        let (bytes, new_etag, hint, buckets, freshness) = match (fetched, plain_base) {
            (SnapshotFetch::NotModified { .. }, Some(_)) if etag.is_none() => {
                return Err(Error::UnexpectedResponse {
                    url: url.to_owned(),
                    reason: "304 Not Modified to a request that sent no If-None-Match".to_owned(),
                });
            }
            (
                SnapshotFetch::NotModified {
                    hint,
                    buckets,
                    freshness,
                },
                Some(loaded),
            ) => {
                let version = loaded.state.version();
                self.note_freshness(slot, &loaded.state, freshness.as_deref());
                self.note_buckets(slot, version, buckets.as_deref());
                return Ok((ListUpdate::Unchanged { version }, hint));
            }
            (SnapshotFetch::NotModified { .. }, None) => {
                // Not reachable: If-None-Match is only sent with a base alone loaded.
                return Err(Error::UnexpectedResponse {
                    url: url.to_owned(),
                    reason: "304 Not Modified without a snapshot loaded".to_owned(),
                });
            }
            (
                SnapshotFetch::Body {
                    bytes,
                    etag,
                    hint,
                    buckets,
                    freshness,
                },
                _,
            ) => (bytes, etag, hint, buckets, freshness),
        };
        let base = plain_base.map(|loaded| (Arc::clone(loaded), etag));
        let (step, bytes) = self
            .take_snapshot_blocking(&slot.name, url, bytes, new_etag.clone(), base, floor)
            .await?;
        update::check_not_behind(
            &slot.name,
            url,
            &step,
            previous,
            *vouched,
            freshness.as_deref(),
            &self.trusted_keys,
        )?;
        let state = match step {
            SnapshotStep::Held {
                version,
                new_etag: renamed,
            } => {
                if renamed {
                    // The very snapshot in use, under a new ETag: remember
                    // it so the next request can be a 304.
                    lock(&slot.meta).etag = new_etag;
                }
                if let Some(loaded) = plain_base {
                    self.note_freshness(slot, &loaded.state, freshness.as_deref());
                }
                self.note_buckets(slot, version, buckets.as_deref());
                return Ok((ListUpdate::Unchanged { version }, hint));
            }
            SnapshotStep::New(state) => *state,
        };
        let version = state.version();
        let new_floor = state.floor();
        let rebase = current.as_ref().is_some_and(|l| l.state.has_deltas());
        self.note_freshness(slot, &state, freshness.as_deref());
        let expired = state.is_stale(self.shared.now());
        // In use first, then written: protection does not wait for the
        // disk, and a round cancelled during the write leaves the snapshot
        // in use marked unsaved (`ListMeta::unsaved`), to be written again
        // before a chain over it.
        slot.current.store(Some(Arc::new(Loaded {
            state,
            source: SnapshotSource::Network,
        })));
        self.swaps.fetch_add(1, Ordering::Release);
        {
            let mut meta = lock(&slot.meta);
            meta.floor = Some(new_floor);
            meta.etag.clone_from(&new_etag);
            meta.chain = Vec::new();
            meta.chain_unsaved = false;
        }
        self.note_buckets(slot, version, buckets.as_deref());
        Counters::bump(&self.shared.counters.snapshots_applied);
        if rebase {
            Counters::bump(&self.shared.counters.rebases);
        }
        self.persist(slot, Arc::new(bytes), new_floor, new_etag).await;
        if expired {
            // Newer than the one in use (the floor saw to that), so it can
            // only add protection; stale, so the host sees the freeze or
            // the clock.
            Counters::bump(&self.shared.counters.expired_snapshots_applied);
            let clock_skew = self
                .shared
                .clock_skew(|| self.shared.now())
                .map(|skew| skew.to_string());
            tracing::warn!(list = %slot.name, ?previous, version, ?clock_skew, "snapshot updated, but it has already expired: using it, stale");
        } else {
            tracing::info!(list = %slot.name, ?previous, version, rebase, "snapshot updated");
        }
        if previous == Some(version) {
            // A rebase on the very version the deltas led to.
            return Ok((ListUpdate::Unchanged { version }, hint));
        }
        Ok((ListUpdate::Updated { previous, version }, hint))
    }

    /// Remembers whether a response about version `version` of `slot`'s
    /// snapshot advertised the immutable full-hash buckets of the snapshot
    /// in use: its `advertised` path must be exactly
    /// [`routes::list_hashes_base`] of the list and the snapshot's id
    /// ([`snapshot_id`]: version and body hash; anything else — a version
    /// alone, another snapshot, nothing — and full hashes are asked by
    /// `POST`). Called after the swap, so an advertisement never names a
    /// snapshot not yet in use.
    fn note_buckets(&self, slot: &ListSlot, version: u64, advertised: Option<&str>) {
        let floor = slot
            .current
            .load()
            .as_ref()
            .map(|l| l.state.floor())
            .filter(|f| f.version == version);
        let advertised = floor.filter(|f| {
            let expected = routes::list_hashes_base(&slot.name, snapshot_id(f.version, &f.body_sha256));
            advertised.is_some_and(|path| path == expected)
        });
        lock(&slot.meta).buckets_advertised = advertised;
    }

    /// [`update::take_snapshot`] on the blocking pool: hashing and
    /// decompressing up to the snapshot limit would stall an async worker.
    /// `base` is the state in use while it is a base alone, with its ETag.
    /// Hands the bytes back for persistence.
    async fn take_snapshot_blocking(
        &self,
        list: &str,
        url: &str,
        bytes: Vec<u8>,
        new_etag: Option<String>,
        base: Option<(Arc<Loaded>, Option<String>)>,
        floor: Option<VersionFloor>,
    ) -> Result<(SnapshotStep, Vec<u8>), Error> {
        let keys = Arc::clone(&self.trusted_keys);
        let limits = self.limits;
        let owned_list = list.to_owned();
        let task = tokio::task::spawn_blocking(move || {
            let plain_base = base.as_ref().map(|(loaded, etag)| PlainBase {
                state: &loaded.state,
                etag: etag.as_deref(),
            });
            let result = update::take_snapshot(
                &owned_list,
                &bytes,
                new_etag.as_deref(),
                plain_base,
                &keys,
                &limits,
                floor.as_ref(),
            );
            result.map(|step| (step, bytes))
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
}
