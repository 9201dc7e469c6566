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
use crate::state::{AppState, ListSlot, Published};

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
            self.state.metrics.snapshot_served(
                &slot.name,
                version,
                header.full_hash_count,
                stored.snapshot.len() as u64,
            );
            slot.current.store(Some(Arc::new(Published::new(
                header,
                stored.snapshot,
                stored.hashes,
            ))));
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
