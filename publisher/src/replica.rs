//! A replica ([`Role::Replica`](crate::Role::Replica)): builds nothing and
//! holds no signing key; it follows what a builder publishes to the object
//! store and serves it from memory.
//!
//! Every `replica_poll_s` a [`Follower`] lists each list's keys once (one
//! LIST request per list: the cheap check), and [`decide`] compares the
//! versions found with the one served. Only a newer version is downloaded
//! (its snapshot and hashes), verified with the publisher's public key as
//! an agent would, and swapped into the list's slot, as a build swaps its
//! own. A version that does not verify is remembered and not downloaded
//! again. The served snapshot's bytes are the stored bytes, and its ETag
//! depends only on them, so every replica answers alike for a version.
//!
//! A store that cannot be reached is logged once, counted in the
//! `replica_store_reachable` metric, and tried again at the next check:
//! a replica keeps serving what it has loaded, and one that has loaded
//! nothing yet is not ready (`/readyz`) until the store answers.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use blocksieve_format::TrustedKey;

use crate::error::Error;
use crate::state::{AppState, ListSlot};

/// What one check of a list decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PollDecision {
    /// Nothing newer than the served version: download nothing.
    Keep,
    /// Download these versions, newest first, and serve the first that
    /// verifies.
    Load(Vec<u64>),
}

/// The decision for a list serving `served` whose store lists `listed`
/// (newest first), skipping the versions `rejected` before: only versions
/// newer than the served one are worth a download, so a replica never
/// goes back to an older version.
pub(crate) fn decide(served: Option<u64>, listed: &[u64], rejected: &BTreeSet<u64>) -> PollDecision {
    let newer: Vec<u64> = (listed.iter().copied())
        .filter(|v| served.is_none_or(|s| *v > s) && !rejected.contains(v))
        .collect();
    if newer.is_empty() {
        PollDecision::Keep
    } else {
        PollDecision::Load(newer)
    }
}

/// Follows the store for every list of a state.
#[derive(Debug)]
pub(crate) struct Follower {
    state: Arc<AppState>,
    /// The publisher's public key: what a stored snapshot must verify under.
    key: TrustedKey,
    /// Per list, the versions that did not verify: not downloaded again.
    rejected: Vec<BTreeSet<u64>>,
    /// Whether the last check reached the store (`None` before the first),
    /// so that a change is logged once, not at every check.
    reachable: Option<bool>,
}

impl Follower {
    /// A follower of `state`'s lists, verifying with `key`.
    pub(crate) fn new(state: Arc<AppState>, key: TrustedKey) -> Self {
        let rejected = vec![BTreeSet::new(); state.lists.len()];
        Self {
            state,
            key,
            rejected,
            reachable: None,
        }
    }

    /// Checks every list once and swaps in what is newer; blocks on the
    /// store. Returns whether every list's keys could be listed.
    pub(crate) fn poll(&mut self) -> bool {
        let state = Arc::clone(&self.state);
        let mut reachable = true;
        for (index, slot) in state.lists.iter().enumerate() {
            if let Err(e) = self.poll_list(index, slot) {
                reachable = false;
                if self.reachable != Some(false) {
                    tracing::warn!(list = %slot.name, error = %e, "store unreachable; serving what is loaded, trying again at the next check");
                }
            }
        }
        if self.reachable == Some(false) && reachable {
            tracing::info!("store reachable again");
        }
        self.reachable = Some(reachable);
        state.metrics.store_reachable(reachable);
        reachable
    }

    fn poll_list(&mut self, index: usize, slot: &ListSlot) -> Result<(), Error> {
        let listed = slot.store.try_versions()?;
        let served = slot.current.load().as_ref().map(|p| p.header.version);
        let PollDecision::Load(candidates) = decide(served, &listed, &self.rejected[index]) else {
            return Ok(());
        };
        for version in candidates {
            let stored = match slot.store.load(version, &self.key) {
                Ok(stored) => stored,
                Err(e @ Error::Corrupt { .. }) => {
                    tracing::warn!(list = %slot.name, version, error = %e, "stored version does not verify; skipped");
                    self.rejected[index].insert(version);
                    continue;
                }
                // Listed, but half of it is gone (its full hashes: a
                // builder writes them before the snapshot, so they were
                // pruned or lost): skipped for good, and an older version
                // may still serve.
                Err(e @ Error::Storage { .. }) if matches!(&e, Error::Storage { reason, .. } if reason.kind() == std::io::ErrorKind::NotFound) =>
                {
                    tracing::warn!(list = %slot.name, version, error = %e, "stored version is incomplete; skipped");
                    self.rejected[index].insert(version);
                    continue;
                }
                // Pruned since the listing, or the store went away: the
                // next check decides again.
                Err(e) => return Err(e),
            };
            let header =
                blocksieve_format::parse_header_unverified(&stored.snapshot).map_err(|e| Error::Corrupt {
                    path: version.to_string().into(),
                    reason: e.to_string(),
                })?;
            tracing::info!(list = %slot.name, version, "serving snapshot from the store");
            slot.serve(&self.state.metrics, header, stored.snapshot, stored.hashes);
            return Ok(());
        }
        Ok(())
    }

    /// Checks the store at once and then every `every`, on a thread of its
    /// own (the store's calls block), until the returned handle is dropped.
    pub(crate) fn spawn(mut self, every: Duration) -> FollowerHandle {
        let (stop, stopped) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("blocksieve-replica".to_owned())
            .spawn(move || {
                loop {
                    self.poll();
                    match stopped.recv_timeout(every) {
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
    use crate::build::{BuildRequest, LastGood, LoadedSource, PeakRssProbe, SourceRole, build_list};
    use crate::config::{ListConfig, SourceConfig, SourceFormat};
    use crate::fetch::{Fetched, Validators};
    use crate::storage::{ListStore, LocalStorage, PutMode, Storage};
    use blocksieve_format::SigningKey;

    /// A list `phishing` stored in a data directory, served by nobody yet.
    fn state_over(dir: &std::path::Path) -> (Arc<AppState>, Arc<dyn Storage>) {
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir).unwrap());
        let slot = ListSlot {
            name: "phishing".to_owned(),
            current: arc_swap::ArcSwapOption::empty(),
            last_build: std::sync::Mutex::new(None),
            store: ListStore::open(storage.clone(), "phishing").unwrap(),
        };
        let state = AppState {
            lists: vec![slot],
            cache_duration: Duration::from_secs(300),
            next_check: Duration::from_secs(300),
            padding: 0,
            max_bucket_entries: 4096,
            max_prefixes_per_request: 1000,
            metrics: crate::metrics::Metrics::new(),
        };
        (state.shared(), storage)
    }

    /// Builds a snapshot of `feed` at `now` and publishes it.
    fn publish(store: &ListStore, key: &SigningKey, feed: &str, now: u64) -> u64 {
        let list = ListConfig::new("phishing", vec![]);
        let request = BuildRequest {
            list: &list,
            previous: None,
            now,
            ttl: Duration::from_secs(3600),
            probe: PeakRssProbe::NONE,
            key,
        };
        let source = LoadedSource {
            config: SourceConfig::file("feed.txt", SourceFormat::Urls),
            role: SourceRole::Block,
            fetched: Fetched::Fresh {
                bytes: feed.as_bytes().to_vec(),
                validators: Validators::default(),
            },
            last_good: LastGood::none(),
            read_duration: Duration::ZERO,
        };
        let built = build_list(&request, vec![source]).unwrap();
        store
            .publish(built.version, &built.snapshot, &built.hashes, 5)
            .unwrap();
        built.version
    }

    fn served(state: &AppState) -> Option<u64> {
        state.lists[0].current.load().as_ref().map(|p| p.header.version)
    }

    #[test]
    fn a_follower_serves_the_newest_version_that_verifies_and_skips_a_forged_one_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let (state, storage) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let mut follower = Follower::new(state.clone(), key.public_key().clone());
        assert!(follower.poll(), "an empty store is a reachable one");
        assert_eq!(served(&state), None);

        let store = &state.lists[0].store;
        let first = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        // A newer version signed by another key, as a second, mistaken
        // builder or a forger would write it.
        let other = SigningKey::from_secret_bytes([8; 32]);
        let forged = publish(store, &other, "http://phish.example/b\n", 1_800_000_100);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(first));
        assert!(follower.rejected[0].contains(&forged));
        // Whatever its bytes become, the rejected version stays skipped
        // (`decide` leaves it out) and the served version stays.
        storage
            .put(
                &format!("lists/phishing/{forged:020}.snapshot"),
                b"junk",
                PutMode::Overwrite,
            )
            .unwrap();
        assert!(follower.poll());
        assert_eq!(served(&state), Some(first));
        assert_eq!(follower.rejected[0].len(), 1);

        let newer = publish(store, &key, "http://phish.example/c\n", 1_800_000_200);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(newer));
        assert!(
            state
                .metrics
                .render()
                .contains("blocksieve_replica_store_reachable 1")
        );
    }

    /// A signed snapshot copied under a newer version's key is refused (it
    /// would be a rollback), and so is a version whose full hashes are
    /// another build's with the same count (they would answer "no match" for
    /// URLs its filter lists): the served version stays.
    #[test]
    fn regression_a_snapshot_under_another_key_or_with_another_builds_hashes_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (state, storage) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let mut follower = Follower::new(state.clone(), key.public_key().clone());
        let store = &state.lists[0].store;
        let v1 = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        let v2 = publish(store, &key, "http://phish.example/b\n", 1_800_000_100);
        assert!(follower.poll());
        assert_eq!(served(&state), Some(v2));

        // Version 1's bytes under a version 3 key.
        let v3 = v2 + 1;
        let key_of = |v: u64, ext: &str| format!("lists/phishing/{v:020}.{ext}");
        for ext in ["hashes", "snapshot"] {
            let bytes = storage.get(&key_of(v1, ext)).unwrap().unwrap();
            storage.put(&key_of(v3, ext), &bytes, PutMode::Overwrite).unwrap();
        }
        assert!(matches!(
            store.load(v3, key.public_key()),
            Err(Error::Corrupt { .. })
        ));
        assert!(follower.poll());
        assert_eq!(served(&state), Some(v2));

        // Version 4: its own snapshot, version 1's hashes (one full hash each).
        let v4 = publish(store, &key, "http://phish.example/c\n", v3 + 1);
        let other = storage.get(&key_of(v1, "hashes")).unwrap().unwrap();
        storage
            .put(&key_of(v4, "hashes"), &other, PutMode::Overwrite)
            .unwrap();
        let refused = store.load(v4, key.public_key());
        assert!(
            matches!(&refused, Err(Error::Corrupt { reason, .. }) if reason.contains("another build")),
            "{refused:?}"
        );
        assert!(follower.poll());
        assert_eq!(served(&state), Some(v2));
    }

    /// A listed version whose full hashes are gone does not block an older
    /// complete one, and is not downloaded again.
    #[test]
    fn regression_an_incomplete_newest_version_does_not_block_an_older_one() {
        let dir = tempfile::tempdir().unwrap();
        let (state, storage) = state_over(dir.path());
        let key = SigningKey::from_secret_bytes([7; 32]);
        let mut follower = Follower::new(state.clone(), key.public_key().clone());
        let store = &state.lists[0].store;
        let v1 = publish(store, &key, "http://phish.example/a\n", 1_800_000_000);
        let v2 = publish(store, &key, "http://phish.example/b\n", 1_800_000_100);
        storage
            .delete(&format!("lists/phishing/{v2:020}.hashes"))
            .unwrap();
        assert!(follower.poll());
        assert_eq!(served(&state), Some(v1));
        assert!(follower.rejected[0].contains(&v2));
        assert_eq!(
            decide(served(&state), &[v2, v1], &follower.rejected[0]),
            PollDecision::Keep
        );
    }

    fn none() -> BTreeSet<u64> {
        BTreeSet::new()
    }

    #[test]
    fn an_empty_store_or_nothing_newer_downloads_nothing() {
        assert_eq!(decide(None, &[], &none()), PollDecision::Keep);
        assert_eq!(decide(Some(7), &[], &none()), PollDecision::Keep);
        assert_eq!(decide(Some(7), &[7, 6, 5], &none()), PollDecision::Keep);
    }

    #[test]
    fn a_replica_with_nothing_tries_every_version_newest_first() {
        assert_eq!(
            decide(None, &[9, 8, 3], &none()),
            PollDecision::Load(vec![9, 8, 3])
        );
    }

    #[test]
    fn only_versions_newer_than_the_served_one_are_downloaded() {
        assert_eq!(
            decide(Some(8), &[10, 9, 8, 7], &none()),
            PollDecision::Load(vec![10, 9])
        );
    }

    #[test]
    fn a_replica_never_goes_back_to_an_older_version() {
        // The store was reset or restored from an older backup.
        assert_eq!(decide(Some(8), &[5, 4], &none()), PollDecision::Keep);
    }

    #[test]
    fn a_version_that_did_not_verify_is_not_downloaded_again() {
        let rejected = BTreeSet::from([10]);
        assert_eq!(decide(Some(8), &[10], &rejected), PollDecision::Keep);
        assert_eq!(
            decide(Some(8), &[11, 10, 9], &rejected),
            PollDecision::Load(vec![11, 9])
        );
    }
}
