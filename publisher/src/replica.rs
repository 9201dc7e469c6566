//! A replica ([`Role::Replica`](crate::Role::Replica)): builds nothing and
//! holds no signing key; it follows what builders publish to the object
//! store and serves it from memory. Builders on a store follow it the same
//! way, for the generations other builders publish.
//!
//! Every `replica_poll_s` a [`Follower`] asks for each list's `latest`
//! pointer with a conditional GET (`If-None-Match` on the ETag it last
//! saw: an unchanged pointer costs no transfer), and [`decide`] compares
//! the generation it names with the version served. Only a newer one is
//! downloaded — its signed manifest, then the snapshot and full hashes it
//! names, each checked against the manifest's size and SHA-256 and
//! verified with the publisher's public key as an agent would — and swapped
//! into the list's slot, as a build swaps its own. A generation that does
//! not verify is remembered and not downloaded again while the pointer
//! names it at the same version (a build that replaces it at that number
//! names its own version, and is loaded; one skipped because
//! its manifest or an object it names was missing is tried again after 2,
//! 4, … up to 64 checks: a store whose replication shows the pointer before
//! the objects must not keep a replica a generation behind until the next
//! publish), and the replica
//! walks back from it to the newest generation that verifies, if that is
//! newer than what it serves (but not past one the store could not be
//! asked for now: that is tried again at the next check, as an
//! unreachable store is). A pointer that names the version served but
//! carries a newer freshness record (an unchanged build) changes only the
//! record served, once it verifies. The
//! served snapshot's bytes are the stored bytes, and its ETag depends only
//! on them, so every replica answers alike for a generation.
//!
//! A store that cannot be reached is logged once, counted in the
//! `replica_store_reachable` metric, and tried again with backoff (the
//! interval doubles per failed check, up to 12 times it or a minute,
//! whichever is longer): a replica keeps serving what it has loaded, and
//! one that has loaded nothing yet is not ready (`/readyz`) until the
//! store answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use blocksieve_format::TrustedKey;

use crate::error::Error;
use crate::generations::Pointer;
use crate::state::{AppState, ListSlot};
use crate::storage::{Conditional, Version};

/// What one check of a list decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PollDecision {
    /// Nothing newer than the served version: download nothing.
    Keep,
    /// Download this generation (and, with nothing served, walk back from
    /// it to the newest that verifies).
    Load(u64),
}

/// The decision for a list serving version `served` whose `latest`
/// pointer is `pointer`, skipping the generations `rejected` before: only a
/// newer version is worth a download, so a replica never goes back to an
/// older version.
pub(crate) fn decide(served: Option<u64>, pointer: &Pointer, rejected: &BTreeSet<u64>) -> PollDecision {
    if served.is_some_and(|s| s >= pointer.version) || rejected.contains(&pointer.generation) {
        PollDecision::Keep
    } else {
        PollDecision::Load(pointer.generation)
    }
}

/// What a follower knows of one list.
#[derive(Debug, Default)]
struct Followed {
    /// The ETag of the pointer last handled: asked for conditionally.
    seen: Option<Version>,
    /// The generations that did not verify, each with the version the
    /// pointer named for it then: not downloaded again while the pointer
    /// names that generation at that version. A build that replaces what
    /// did not verify at that number (a manifest signed with another key,
    /// garbage: see `ListStore::publish`) names its own version, and is
    /// loaded.
    rejected: BTreeMap<u64, u64>,
    /// The generations skipped because their manifest or an object it
    /// names was missing: checks left before the next try, and the wait
    /// after a failed one.
    missing: BTreeMap<u64, Retry>,
}

/// When a generation skipped as missing is tried again.
#[derive(Debug, Clone, Copy)]
struct Retry {
    left: u32,
    wait: u32,
}

/// Checks between tries of a generation skipped as missing: the first
/// wait, doubled after each failed try up to the last.
const MISSING_RETRY: (u32, u32) = (2, 64);

impl Followed {
    /// Counts one check down for every generation skipped as missing;
    /// whether one is due (its pointer must then be read again, not
    /// asked for conditionally).
    fn tick(&mut self) -> bool {
        let mut due = false;
        for retry in self.missing.values_mut() {
            retry.left = retry.left.saturating_sub(1);
            due |= retry.left == 0;
        }
        due
    }

    /// The generations not to download at this check, whose pointer is
    /// `pointer`.
    fn skipped(&self, pointer: &Pointer) -> BTreeSet<u64> {
        let waiting = self.missing.iter().filter(|(_, r)| r.left > 0).map(|(&g, _)| g);
        let rejected = (self.rejected.get(&pointer.generation))
            .filter(|&&version| version == pointer.version)
            .map(|_| pointer.generation);
        rejected.into_iter().chain(waiting).collect()
    }

    /// `generation`, which `pointer` named, did not load: skipped for good
    /// (while the pointer names it at the same version), or (`missing`)
    /// until its next try.
    fn skip(&mut self, generation: u64, pointer: &Pointer, missing: bool) {
        if !missing {
            self.missing.remove(&generation);
            self.rejected.insert(generation, pointer.version);
            return;
        }
        let (first, last) = MISSING_RETRY;
        let retry = self
            .missing
            .entry(generation)
            .or_insert(Retry { left: 0, wait: 0 });
        retry.wait = if retry.wait == 0 {
            first
        } else {
            (retry.wait * 2).min(last)
        };
        retry.left = retry.wait;
    }
}

/// Follows the store for every list of a state.
#[derive(Debug)]
pub(crate) struct Follower {
    state: Arc<AppState>,
    /// The publisher's public keys (its current one, then any it replaces
    /// while it is rotated): what a stored generation must verify under.
    keys: Arc<[TrustedKey]>,
    lists: Vec<Followed>,
    /// Whether the last check reached the store (`None` before the first),
    /// so that a change is logged once, not at every check.
    reachable: Option<bool>,
    /// Checks in a row that did not reach the store, for the backoff.
    failures: u32,
}

impl Follower {
    /// A follower of `state`'s lists, verifying with `keys`.
    pub(crate) fn new(state: Arc<AppState>, keys: Arc<[TrustedKey]>) -> Self {
        let lists = state.lists.iter().map(|_| Followed::default()).collect();
        Self {
            state,
            keys,
            lists,
            reachable: None,
            failures: 0,
        }
    }

    /// Checks every list once and swaps in what is newer; blocks on the
    /// store. Returns whether every list's pointer could be read.
    pub(crate) fn poll(&mut self) -> bool {
        let state = Arc::clone(&self.state);
        let mut reachable = true;
        for (index, slot) in state.lists.iter().enumerate() {
            let checked = self.poll_list(index, slot);
            slot.checked(checked.as_ref().err().map(ToString::to_string));
            if let Err(e) = checked {
                reachable = false;
                if self.reachable != Some(false) {
                    tracing::warn!(list = %slot.name, error = %e, "store unreachable; serving what is loaded, trying again with backoff");
                }
            }
        }
        if self.reachable == Some(false) && reachable {
            tracing::info!("store reachable again");
        }
        self.reachable = Some(reachable);
        self.failures = if reachable {
            0
        } else {
            self.failures.saturating_add(1)
        };
        state.metrics.store_reachable(reachable);
        reachable
    }

    fn poll_list(&mut self, index: usize, slot: &ListSlot) -> Result<(), Error> {
        let followed = &mut self.lists[index];
        // A generation skipped as missing, due for another try: the pointer
        // read whole, as if it had changed.
        let due = followed.tick();
        let seen = if due { None } else { followed.seen.as_ref() };
        let (bytes, seen) = match slot.store.latest_if_changed(seen)? {
            // No generation yet (a new store), or nothing new.
            Conditional::Missing | Conditional::NotModified => return Ok(()),
            Conditional::Value { bytes, version } => (bytes, version),
        };
        let pointer = match slot.store.parse_pointer(&bytes) {
            Ok(pointer) => pointer,
            Err(e) => {
                tracing::warn!(list = %slot.name, error = %e, "the latest pointer is not one; waiting for the next");
                followed.seen = Some(seen);
                return Ok(());
            }
        };
        let served = slot.current.load().as_ref().map(|p| p.header.version);
        let PollDecision::Load(generation) = decide(served, &pointer, &followed.skipped(&pointer)) else {
            // The same version, perhaps with a new freshness record.
            slot.adopt_freshness(&pointer, &self.keys);
            if served.is_some_and(|s| s >= pointer.version) {
                // Served (by a build of this process, or a later pointer):
                // nothing at or below it is worth another try, nor left
                // refused.
                followed.missing.retain(|&g, _| g > pointer.generation);
                slot.refused_generation(None);
            }
            followed.seen = Some(seen);
            return Ok(());
        };
        // The newest generation that verifies, newer than what is served.
        let mut missing = Vec::new();
        let mut refused = None;
        let loaded = slot
            .store
            .load_newest_from(generation, served, &self.keys, &mut missing, &mut refused);
        if loaded.is_ok() {
            slot.refused_generation(refused);
        }
        let stored = match loaded {
            Ok(Some(stored)) => stored,
            Err(e) => return Err(e),
            Ok(None) => {
                tracing::warn!(list = %slot.name, generation, "no generation newer than the one served verifies; skipped");
                followed.skip(generation, &pointer, missing.contains(&generation));
                followed.seen = Some(seen);
                return Ok(());
            }
        };
        let header =
            blocksieve_format::parse_header_unverified(&stored.snapshot).map_err(|e| Error::Corrupt {
                path: generation.to_string().into(),
                reason: e.to_string(),
            })?;
        if let Some(loaded) = stored.generation {
            slot.loaded_generation(loaded);
            if loaded < generation {
                // Walked back past it: the pointed generation did not load.
                followed.skip(generation, &pointer, missing.contains(&generation));
            } else {
                followed.missing.retain(|&g, _| g > loaded);
            }
            tracing::info!(list = %slot.name, generation = loaded, version = header.version, "serving a generation from the store");
            slot.store.remember_older(loaded, &self.keys);
        }
        slot.serve(
            &self.state.metrics,
            header,
            stored.snapshot,
            stored.hashes,
            stored.deltas,
        );
        slot.adopt_freshness(&pointer, &self.keys);
        followed.seen = Some(seen);
        Ok(())
    }

    /// How long to wait before the next check: `every`, doubled per check
    /// in a row that failed, up to 12 times `every` or a minute.
    fn next_wait(&self, every: Duration) -> Duration {
        let cap = (every * 12).max(Duration::from_secs(60)).max(every);
        every.saturating_mul(1 << self.failures.min(10)).min(cap)
    }

    /// Checks the store at once and then every `every` (with backoff while
    /// it cannot be reached), on a thread of its own (the store's calls
    /// block), until the returned handle is dropped.
    pub(crate) fn spawn(mut self, every: Duration) -> FollowerHandle {
        let (stop, stopped) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("blocksieve-replica".to_owned())
            .spawn(move || {
                loop {
                    self.poll();
                    match stopped.recv_timeout(self.next_wait(every)) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "could not start following the store");
        }
        FollowerHandle { _stop: stop }
    }
}

/// Stops its [`Follower`]'s thread when dropped (after a check under way).
#[derive(Debug)]
pub(crate) struct FollowerHandle {
    _stop: mpsc::Sender<()>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::testing::build_feed;
    use crate::generations::{ListStore, PublishOutcome};
    use crate::storage::testing::{Intercepted, Op};
    use crate::storage::{LocalStorage, PutMode, Storage};
    use blocksieve_format::SigningKey;

    /// What a replica of builders signing with `key` trusts.
    fn trusted(key: &SigningKey) -> Arc<[TrustedKey]> {
        Arc::new([key.public_key().clone()])
    }

    /// A list `phishing` stored in a data directory, served by nobody yet.
    fn state_over(dir: &std::path::Path) -> (Arc<AppState>, Arc<dyn Storage>) {
        state_with_buckets_of(dir, 4096)
    }

    /// [`state_over`] with `max_bucket_entries` set to `cap`.
    fn state_with_buckets_of(dir: &std::path::Path, cap: u64) -> (Arc<AppState>, Arc<dyn Storage>) {
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir).unwrap());
        let slot = ListSlot {
            name: "phishing".to_owned(),
            current: arc_swap::ArcSwapOption::empty(),
            last_build: std::sync::Mutex::new(None),
            store_status: std::sync::Mutex::new(None),
            store: ListStore::open(storage.clone(), "phishing", 5).unwrap(),
            freshness: arc_swap::ArcSwapOption::empty(),
            watch: crate::status::ListWatch::open(
                crate::status::ListProfile::new("0 0 0 1 1 *", 2.0, 10.0, 1000.0, cap, 64, 0),
                None,
                "phishing",
            ),
        };
        let state = AppState {
            lists: vec![slot],
            cache_duration: Duration::from_secs(300),
            next_check: Duration::from_secs(300),
            padding: 0,
            max_bucket_entries: cap,
            max_prefixes_per_request: 1000,
            metrics: crate::metrics::Metrics::new(),
            role: crate::config::Role::Replica,
            answers_in_flight: crate::state::AnswersInFlight::default(),
        };
        (state.shared(), storage)
    }

    /// Builds a snapshot of `feed` at `now` and publishes it as the next
    /// generation; returns (generation, version).
    fn publish(store: &ListStore, key: &SigningKey, feed: &str, now: u64) -> (u64, u64) {
        let built = build_feed(feed, now, key);
        let base = store.latest().unwrap();
        let outcome = store
            .publish(
                built.version,
                &built.snapshot,
                &built.hashes,
                base.as_ref(),
                key,
                now,
            )
            .unwrap();
        let PublishOutcome::Published { generation } = outcome else {
            panic!("{outcome:?}")
        };
        (generation, built.version)
    }

    fn served(state: &AppState) -> Option<u64> {
        state.lists[0].current.load().as_ref().map(|p| p.header.version)
    }

    fn manifest_key(generation: u64) -> String {
        format!("lists/phishing/generations/{generation:020}.json")
    }

    #[test]
    fn a_follower_serves_the_newest_generation_that_verifies_and_skips_a_forged_one_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let (state, storage) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let mut follower = Follower::new(state.clone(), trusted(&key));
        assert!(follower.poll(), "an empty store is a reachable one");
        assert_eq!(served(&state), None);

        let store = &state.lists[0].store;
        let (_, first) = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(first));
        // A newer generation signed by another key, as a mistaken builder
        // or a forger would write it.
        let other = SigningKey::from_secret_bytes([8; 32]);
        let (forged, _) = publish(store, &other, "http://phish.example/b\n", 1_800_000_100);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(first));
        assert!(follower.lists[0].rejected.contains_key(&forged));
        // Whatever its manifest becomes, the rejected generation stays
        // skipped and the served version stays.
        storage
            .put(&manifest_key(forged), b"junk", PutMode::Overwrite)
            .unwrap();
        assert!(follower.poll());
        assert_eq!(served(&state), Some(first));
        assert_eq!(follower.lists[0].rejected.len(), 1);

        let (_, newer) = publish(store, &key, "http://phish.example/c\n", 1_800_000_200);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(newer));
        assert!(
            state
                .metrics
                .render()
                .contains("blocksieve_replica_store_reachable 1")
        );
    }

    /// The series of `/metrics` (after the scrape's refresh) named `name`
    /// for list `phishing`, as its text.
    fn gauge(state: &AppState, name: &str) -> Option<String> {
        state.refresh_gauges();
        let prefix = format!("{name}{{list=\"phishing\"}} ");
        (state.metrics.render().lines()).find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
    }

    /// A replica that refuses the store's newest generation (signed with a
    /// key it does not trust: the builders rotated their key and this
    /// replica was not given it) keeps serving the generation before: agents
    /// that updated from another server hold the newer version and are
    /// answered `503 behind` here (unverified), and agents that update here
    /// miss its additions. The served version stays "fresh" by its own
    /// dates for up to two build intervals (two days under a daily
    /// schedule), so the stale alert cannot say it meanwhile: its health
    /// was green and `/metrics` said nothing of it. Now red "behind the
    /// store", and `blocksieve_store_generation_refused` 1 (the
    /// `BlocksieveBehindStore` alert).
    #[test]
    fn regression_a_replica_refusing_the_newest_generation_is_not_green_and_says_so_in_its_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let mut follower = Follower::new(state.clone(), trusted(&key));
        let store = &state.lists[0].store;
        let refused = |state: &AppState| gauge(state, "blocksieve_store_generation_refused");
        let (_, first) = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        assert!(follower.poll());
        let now = 1_800_000_200;
        let health = crate::server::page::health_of(&state.lists[0], now);
        assert_eq!(health.state, crate::status::health::State::Green, "{health:?}");
        assert_eq!(refused(&state).as_deref(), Some("0"));
        let rotated = SigningKey::from_secret_bytes([8; 32]);
        publish(store, &rotated, "http://phish.example/b\n", 1_800_000_100);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(first));
        let health = crate::server::page::health_of(&state.lists[0], now);
        assert_ne!(
            health.state,
            crate::status::health::State::Green,
            "green while the newest generation is refused: {health:?}"
        );
        assert_eq!(
            refused(&state).as_deref(),
            Some("1"),
            "the status page is red (behind the store), /metrics says nothing of it:\n{}",
            state.metrics.render()
        );
        // A later generation it trusts is served, and the reason goes.
        publish(store, &key, "http://phish.example/c\n", 1_800_000_150);
        assert!(follower.poll());
        let health = crate::server::page::health_of(&state.lists[0], now);
        assert_eq!(health.state, crate::status::health::State::Green, "{health:?}");
        assert_eq!(refused(&state).as_deref(), Some("0"));
    }

    /// A replica that cannot reach its store serves what it loaded, its
    /// version "fresh" by its own dates for up to two build intervals
    /// while the builders publish newer ones; the status page's only trace
    /// is the word "unreachable", and `blocksieve_replica_store_reachable`
    /// is 0 on every publisher without a store too, so no shipped rule can
    /// use it. `/metrics` must say, per list, when the store was last
    /// reached (`BlocksieveStoreUnreachable`).
    #[test]
    fn regression_a_replica_that_cannot_reach_its_store_says_since_when() {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let mut follower = Follower::new(state.clone(), trusted(&key));
        publish(
            &state.lists[0].store,
            &key,
            "http://phish.example/a\n",
            1_800_000_000,
        );
        assert!(follower.poll());
        let reached = gauge(&state, "blocksieve_store_last_reached_timestamp_seconds");
        let reached: u64 = reached
            .as_deref()
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("no store_last_reached gauge:\n{}", state.metrics.render()));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(reached + 60 >= now, "{reached}");
        // The checks that follow fail (as the follower records them).
        state.lists[0].checked(Some("connection refused".to_owned()));
        let after: u64 = gauge(&state, "blocksieve_store_last_reached_timestamp_seconds")
            .and_then(|r| r.parse().ok())
            .unwrap();
        assert_eq!(after, reached);
        // Ten minutes on, its status page is no longer green.
        let health = crate::server::page::health_of(&state.lists[0], reached + 3600);
        assert_eq!(health.state, crate::status::health::State::Amber, "{health:?}");
    }

    /// A served snapshot whose advertised request prefix selects buckets
    /// over `max_bucket_entries` (a `request_prefix_bits` fixed by hand for
    /// a list that then grew): every full-hash request for it is refused,
    /// no hit is confirmed (unverified: let through under fail-open), and
    /// the status page is red "hits cannot be confirmed" while the list is
    /// fresh, built and in bounds by every other gauge. `/metrics` must say
    /// it, for an alert (`BlocksieveHitsUnconfirmable`).
    #[test]
    fn regression_hits_that_cannot_be_confirmed_show_in_the_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = state_with_buckets_of(dir.path(), 1);
        let key = SigningKey::from_secret_bytes([7; 32]);
        let mut follower = Follower::new(state.clone(), trusted(&key));
        let feed: String = (0..600).map(|i| format!("http://phish{i}.example/\n")).collect();
        publish(&state.lists[0].store, &key, &feed, 1_800_000_000);
        assert!(follower.poll());
        let health = crate::server::page::health_of(&state.lists[0], 1_800_000_100);
        assert_eq!(health.state, crate::status::health::State::Red, "{health:?}");
        assert!(
            health.reasons[0].1.starts_with("hits cannot be confirmed"),
            "{health:?}"
        );
        let ratio = gauge(&state, "blocksieve_request_bucket_fill_ratio");
        assert!(
            ratio
                .as_deref()
                .and_then(|r| r.parse::<f64>().ok())
                .is_some_and(|r| r > 1.0),
            "the status page is red (hits cannot be confirmed), /metrics says nothing of it: {ratio:?}\n{}",
            state.metrics.render()
        );
    }

    /// A generation whose manifest did not verify (written by a builder
    /// with another signing key: a key rotated on one builder only, then
    /// rolled back) is followed by the builder with the right key's next
    /// build (a forced one: unforced, a builder refuses a store whose head
    /// is signed by another key): the replica serves that build, not the
    /// generation before the one it rejected until some later publish
    /// (which an unchanged list may not make for hours: the pointer's
    /// freshness records name the new version, so the replica's goes stale
    /// too, and the new build's additions are answered "no match"
    /// meanwhile). Found by an adversarial review. (The right key's build
    /// once replaced the rejected generation's manifest; a manifest signed
    /// by another key is now published past, never replaced: it may be a
    /// rotation's that this builder was left out of.)
    #[test]
    fn regression_a_valid_generation_past_a_number_rejected_before_is_served() {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let other = SigningKey::from_secret_bytes([8; 32]);
        let mut follower = Follower::new(state.clone(), trusted(&key));
        let store = &state.lists[0].store;
        let (_, first) = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(first));
        let (forged, _) = publish(store, &other, "http://phish.example/b\n", 1_800_000_100);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(first));
        assert!(follower.lists[0].rejected.contains_key(&forged));

        // The builder with the right key starts from the pointer to the
        // generation signed by the other key, and publishes past it.
        let built = build_feed("http://phish.example/c\n", 1_800_000_200, &key);
        let base = store.head(&trusted(&key)).unwrap();
        let outcome = store
            .publish(
                built.version,
                &built.snapshot,
                &built.hashes,
                base.as_ref(),
                &key,
                1_800_000_200,
            )
            .unwrap();
        assert_eq!(
            outcome,
            PublishOutcome::Published {
                generation: forged + 1
            }
        );
        assert!(follower.poll());
        assert_eq!(
            served(&state),
            Some(built.version),
            "the replica stays on the generation before the one it rejected"
        );
    }

    /// Objects that do not match their manifest are refused: a snapshot of
    /// another version, or full hashes of another build (they would answer
    /// "no match" for URLs its filter lists). The served version stays.
    #[test]
    fn regression_objects_that_are_not_their_manifests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (state, storage) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let mut follower = Follower::new(state.clone(), trusted(&key));
        let store = &state.lists[0].store;
        let (g1, _) = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        let (g2, v2) = publish(store, &key, "http://phish.example/b\n", 1_800_000_100);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(v2));
        let m1 = store.manifest(g1, &trusted(&key)).unwrap();
        let (g3, _) = publish(store, &key, "http://phish.example/c\n", 1_800_000_200);
        let m3 = store.manifest(g3, &trusted(&key)).unwrap();
        // Generation 3's hashes replaced by generation 1's (one full hash each).
        let object = |m: &crate::generations::Manifest| format!("lists/phishing/{}", m.hashes.key);
        let other = storage.get(&object(&m1)).unwrap().unwrap();
        storage.put(&object(&m3), &other, PutMode::Overwrite).unwrap();
        let refused = store.load_generation(g3, &trusted(&key));
        assert!(
            matches!(&refused, Err(Error::Corrupt { reason, .. }) if reason.contains("SHA-256")),
            "{refused:?}"
        );
        assert!(follower.poll());
        assert_eq!(served(&state), Some(v2));
        assert!(follower.lists[0].rejected.contains_key(&g3));
        let _ = g2;
    }

    /// A generation whose full hashes are gone is skipped (until its next
    /// try) and a replica with nothing serves the newest complete one.
    #[test]
    fn regression_an_incomplete_newest_generation_does_not_block_an_older_one() {
        let dir = tempfile::tempdir().unwrap();
        let (state, storage) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let store = &state.lists[0].store;
        let (_, v1) = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        let (g2, _) = publish(store, &key, "http://phish.example/b\n", 1_800_000_100);
        let m2 = store.manifest(g2, &trusted(&key)).unwrap();
        storage
            .delete(&format!("lists/phishing/{}", m2.hashes.key))
            .unwrap();
        let mut follower = Follower::new(state.clone(), trusted(&key));
        assert!(follower.poll());
        assert_eq!(served(&state), Some(v1));
        assert!(follower.lists[0].missing.contains_key(&g2));
        assert!(!follower.lists[0].rejected.contains_key(&g2));
        // The pointer is asked for conditionally: nothing is downloaded
        // again until the next try, which finds it still missing.
        for _ in 0..4 {
            assert!(follower.poll());
            assert_eq!(served(&state), Some(v1));
        }
        assert_eq!(follower.lists[0].missing[&g2].wait, 4);
    }

    /// A store that shows the pointer before an object it names (replicated
    /// buckets, multi-site object stores): the generation is missing at
    /// first, then there. The replica serves it at its next try, not only
    /// after the next publish (agents holding its filter were answered
    /// `503 behind` meanwhile: unverified, let through by default).
    #[test]
    fn a_generation_missing_an_object_at_first_is_served_once_it_appears() {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let store = &state.lists[0].store;
        let (_, v1) = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        let (g2, v2) = publish(store, &key, "http://phish.example/b\n", 1_800_000_100);
        let hashes = format!(
            "lists/phishing/{}",
            store.manifest(g2, &trusted(&key)).unwrap().hashes.key
        );
        let path = dir.path().join(&hashes);
        let replica = replica_failing_once_with(dir.path(), &hashes, move |_| {
            Error::storage(path.clone())(std::io::ErrorKind::NotFound.into())
        });
        let mut follower = Follower::new(replica.clone(), trusted(&key));
        assert!(follower.poll());
        assert_eq!(served(&replica), Some(v1));
        for _ in 0..2 {
            assert!(follower.poll());
        }
        assert_eq!(served(&replica), Some(v2), "still a generation behind");
        assert!(follower.lists[0].missing.is_empty());
    }

    fn pointer(generation: u64, version: u64) -> Pointer {
        Pointer {
            list: "phishing".to_owned(),
            generation,
            version,
            freshness: None,
        }
    }

    #[test]
    fn only_a_newer_version_is_downloaded_and_never_an_older_one() {
        let none = BTreeSet::new();
        assert_eq!(decide(None, &pointer(3, 30), &none), PollDecision::Load(3));
        assert_eq!(decide(Some(20), &pointer(3, 30), &none), PollDecision::Load(3));
        assert_eq!(decide(Some(30), &pointer(3, 30), &none), PollDecision::Keep);
        // The store was reset or restored from an older backup.
        assert_eq!(decide(Some(40), &pointer(3, 30), &none), PollDecision::Keep);
    }

    #[test]
    fn a_generation_that_did_not_verify_is_not_downloaded_again() {
        let rejected = BTreeSet::from([3]);
        assert_eq!(decide(Some(20), &pointer(3, 30), &rejected), PollDecision::Keep);
        assert_eq!(
            decide(Some(20), &pointer(4, 40), &rejected),
            PollDecision::Load(4)
        );
    }

    /// A replica of list `phishing` in `dir`, whose first read of `key`
    /// fails as a store that cannot answer for now does.
    fn replica_failing_once(dir: &std::path::Path, key: &str) -> Arc<AppState> {
        replica_failing_once_with(dir, key, |read| Error::Store {
            store: "s3://bucket".to_owned(),
            key: read.to_owned(),
            kind: crate::StoreFailure::Transient,
            answer: "503 Slow Down".to_owned(),
        })
    }

    /// A replica of list `phishing` in `dir`, whose first read of `key`
    /// fails with `error(key)`.
    fn replica_failing_once_with(
        dir: &std::path::Path,
        key: &str,
        error: impl Fn(&str) -> Error + Send + Sync + 'static,
    ) -> Arc<AppState> {
        let (state, _) = state_over(dir);
        let (key, failed) = (key.to_owned(), std::sync::atomic::AtomicBool::new(false));
        let failing = Intercepted::over(LocalStorage::open(dir).unwrap()).before(move |op, read| {
            if op == Op::Read && read == key && !failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err(error(read));
            }
            Ok(())
        });
        let failing: Arc<dyn Storage> = Arc::new(failing);
        let state = Arc::into_inner(state).unwrap();
        let mut lists = state.lists;
        lists[0].store = ListStore::open(failing, "phishing", 5).unwrap();
        AppState { lists, ..state }.shared()
    }

    /// A replica starting while the store fails one read of the latest
    /// generation's manifest walks back to the generation before it; the
    /// latest must not then be skipped until the next publish (its
    /// additions would be answered "no match" meanwhile).
    #[test]
    fn regression_a_store_error_on_start_does_not_skip_the_latest_generation_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let store = &state.lists[0].store;
        publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        let (g2, v2) = publish(store, &key, "http://phish.example/b\n", 1_800_000_100);
        let replica = replica_failing_once(dir.path(), &manifest_key(g2));
        let mut follower = Follower::new(replica.clone(), trusted(&key));
        follower.poll();
        follower.poll();
        assert_eq!(served(&replica), Some(v2), "the latest generation is skipped");
    }

    /// A replica started while the store fails one read of the only
    /// generation's manifest becomes ready by itself once the store
    /// answers, not only after the next publish.
    #[test]
    fn regression_a_replica_started_during_a_store_error_becomes_ready_by_itself() {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let (g1, v1) = publish(
            &state.lists[0].store,
            &key,
            "http://phish.example/a\n",
            1_800_000_000,
        );
        let replica = replica_failing_once(dir.path(), &manifest_key(g1));
        let mut follower = Follower::new(replica.clone(), trusted(&key));
        follower.poll();
        follower.poll();
        assert_eq!(served(&replica), Some(v1), "not ready until the next publish");
    }

    /// A replica serving an old generation whose latest generation does not
    /// load serves the newest one below it that does, as a replica with
    /// nothing does, not the old one until the next publish.
    #[test]
    fn regression_a_replica_behind_a_broken_latest_serves_the_newest_generation_that_loads() {
        let dir = tempfile::tempdir().unwrap();
        let (state, storage) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let mut follower = Follower::new(state.clone(), trusted(&key));
        let store = &state.lists[0].store;
        let (_, v1) = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(v1));
        let (_, v2) = publish(store, &key, "http://phish.example/b\n", 1_800_000_100);
        let (g3, _) = publish(store, &key, "http://phish.example/c\n", 1_800_000_200);
        let m3 = store.manifest(g3, &trusted(&key)).unwrap();
        storage
            .delete(&format!("lists/phishing/{}", m3.hashes.key))
            .unwrap();
        assert!(follower.poll());
        assert_eq!(served(&state), Some(v2));
    }

    #[test]
    fn checks_back_off_while_the_store_is_unreachable_and_not_past_their_cap() {
        let dir = tempfile::tempdir().unwrap();
        let (state, _) = state_over(dir.path());
        let mut follower = Follower::new(state, trusted(&SigningKey::from_secret_bytes([7; 32])));
        let every = Duration::from_secs(5);
        assert_eq!(follower.next_wait(every), every);
        follower.failures = 1;
        assert_eq!(follower.next_wait(every), every * 2);
        follower.failures = 3;
        assert_eq!(follower.next_wait(every), every * 8);
        follower.failures = 30;
        assert_eq!(follower.next_wait(every), Duration::from_secs(60));
    }
}
