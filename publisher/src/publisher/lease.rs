//! A build's place among the builders that share an object store: the
//! list's lease, taken for one build, and the generation the store points
//! to before the build fetches (what a build that outlasts its lease must
//! not publish older content over).

use super::copies::PendingCopies;
use super::{Error, LeaseOutcome, Publisher, build, storage, unix_now};
use crate::generations::Latest;
use crate::storage::SourceCache;

/// A list's lease taken for one build, given up when dropped before the
/// build hands it on ([`Self::hand_on`]): a build cancelled while it
/// fetches (its task dropped at the drain deadline) releases it, so that
/// other builders need not wait out `lease_s` after a build that
/// published nothing. Released on the blocking pool, as the store's calls
/// block; when the runtime is already shutting down nothing can run, and
/// the lease runs out.
pub(super) struct HeldLease {
    publisher: Publisher,
    index: usize,
    version: Option<storage::Version>,
}

impl HeldLease {
    /// The lease's version, for whoever releases it from now on: this
    /// guard no longer does.
    pub(super) fn hand_on(&mut self) -> Option<storage::Version> {
        self.version.take()
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        let Some(version) = self.version.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let this = self.publisher.clone();
            let index = self.index;
            runtime.spawn_blocking(move || {
                let slot = &this.inner.state.lists[index];
                slot.store.release_lease(&this.inner.holder, version);
            });
        }
    }
}

impl Publisher {
    /// `version` of list `index`'s lease, held for one build (`None`: no
    /// lease to release).
    pub(super) fn hold_lease(&self, index: usize, version: Option<storage::Version>) -> HeldLease {
        HeldLease {
            publisher: self.clone(),
            index,
            version,
        }
    }

    /// Takes list `index`'s lease for one build when the publisher writes
    /// to an object store (another builder may share it; a data directory
    /// has one writer, its lock's holder). `Ok(None)` when there is no
    /// lease to take.
    ///
    /// A lease taken once `cancel` is set (the build's task dropped while
    /// it waited for the store) is given back at once: nobody is left to.
    pub(super) async fn acquire_lease(
        &self,
        index: usize,
        cancel: &build::Cancel,
    ) -> Result<Option<storage::Version>, Error> {
        if self.inner.config.store.is_none() {
            return Ok(None);
        }
        let this = self.clone();
        let cancel = cancel.clone();
        let acquired = tokio::task::spawn_blocking(move || {
            let inner = &this.inner;
            let now = unix_now();
            let until = now.saturating_add(inner.config.lease.as_secs());
            let store = &inner.state.lists[index].store;
            let acquired = store.acquire_lease(&inner.holder, until, now);
            if let Ok(LeaseOutcome::Acquired(version)) = &acquired
                && cancel.is_cancelled()
                && !inner.config.dangerous_store_ignores_conditions
            {
                store.release_lease(&inner.holder, version.clone());
            }
            acquired
        })
        .await
        .map_err(|e| Error::BuildTask {
            list: self.inner.config.lists[index].name.clone(),
            reason: e.to_string(),
        })??;
        let config = &self.inner.config;
        let list = config.lists[index].name.clone();
        let second_builder = |holder: String| Error::SecondBuilder {
            store: config.store.clone().unwrap_or_default(),
            list: list.clone(),
            holder,
        };
        match acquired {
            // A store that ignores conditional writes lets two builders
            // both "acquire": read the lease back to see whose it is.
            LeaseOutcome::Acquired(version) if config.dangerous_store_ignores_conditions => {
                let this = self.clone();
                let holder = tokio::task::spawn_blocking(move || this.inner.state.lists[index].store.lease())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .flatten()
                    .map(|lease| lease.holder);
                match holder {
                    Some(holder) if holder != self.inner.holder => Err(second_builder(holder)),
                    _ => Ok(Some(version)),
                }
            }
            LeaseOutcome::Acquired(version) => Ok(Some(version)),
            LeaseOutcome::HeldBy(lease) if config.dangerous_store_ignores_conditions => {
                Err(second_builder(lease.holder))
            }
            LeaseOutcome::HeldBy(lease) => Err(Error::LeaseHeld {
                list,
                holder: lease.holder,
                expires_at: lease.expires_at,
            }),
        }
    }

    /// [`Error::Superseded`] naming the generation `latest` names now, when
    /// it is no longer `base`'s (or cannot be read): another builder published while this build
    /// read its sources, whose content may then be older than what was
    /// published. Kept as the sources' last good content, it would
    /// replace the newer copies that builder kept, and a later build with
    /// a source down would fall back to it and publish the list without
    /// entries already published. Such a build is superseded: it keeps
    /// nothing.
    pub(super) fn published_past(&self, index: usize, base: Option<&Latest>) -> Option<Error> {
        let store = &self.inner.state.lists[index].store;
        let now = match store.latest() {
            Ok(latest) => latest.map(|l| l.pointer.generation),
            // Unknown: taken as moved, so that nothing is kept.
            Err(_) => Some(u64::MAX),
        };
        let base = base.map(|b| b.pointer.generation);
        let list = &self.inner.config.lists[index].name;
        (now != base).then(|| {
            tracing::warn!(%list, "another builder published while this build read its sources: discarded");
            Error::Superseded {
                list: list.clone(),
                generation: now.or(base).unwrap_or_default(),
            }
        })
    }

    /// Keeps `copies` as their sources' last good content after a build
    /// that failed (the sources that answered keep theirs, so that a list
    /// of flaky sources builds once each has answered once), unless another
    /// builder published past `base` meanwhile ([`Self::published_past`]):
    /// their content may be older than what it published and kept.
    pub(super) fn keep_unless_published_past(
        &self,
        index: usize,
        base: Option<&Latest>,
        copies: PendingCopies,
        caches: &[(SourceCache, String)],
    ) {
        if self.published_past(index, base).is_none() {
            copies.commit(caches);
        }
    }

    /// The generation list `index`'s store points to now (`None`: none
    /// yet).
    ///
    /// # Errors
    ///
    /// As [`ListStore::head`](crate::generations::ListStore::head), when it
    /// cannot be read.
    pub(super) fn head_generation(&self, index: usize) -> Result<Option<u64>, Error> {
        let inner = &self.inner;
        let slot = &inner.state.lists[index];
        let forced = inner.force_once[index].load(std::sync::atomic::Ordering::SeqCst);
        let other_key = |g: u64| -> Result<Option<Error>, Error> {
            Ok(match &inner.config.store {
                Some(store) if !forced && slot.store.signed_by_another_key(g, &inner.trusted)? => {
                    Some(Error::OtherSigningKey {
                        store: store.clone(),
                        list: inner.config.lists[index].name.clone(),
                        generation: g,
                        key_id: hex::encode(inner.public_key.id()),
                    })
                }
                _ => None,
            })
        };
        // The newest generation stored, whoever signed it: with no pointer,
        // or garbage, the head is only what this builder's key verifies (or
        // nothing), below generations another key published past it; its
        // build would take a number under theirs (generation 1 again, once
        // retention removed the first), point `latest` back at it, and its
        // retention remove their objects. Found by a review.
        let newest = slot.store.newest_stored_generation()?;
        let Some(latest) = slot.store.head(&inner.trusted)? else {
            // No head: the build takes generation 1, which may be another
            // key's; it would be superseded by it at every build, without a
            // word.
            for g in std::iter::once(1).chain(newest) {
                if let Some(refused) = other_key(g)? {
                    return Err(refused);
                }
            }
            return Ok(None);
        };
        // The head names a generation signed with our keys whenever one of
        // the last few verifies; one that does not verify although signed
        // means this builder was given the wrong key (or the manifest is
        // damaged): what it published, replicas would refuse while the
        // list goes stale. So does the generation after the head, signed
        // by another key: builders on a new key publish past this one's
        // (a rotation it was left out of), and its build would move
        // `latest` back or replace their generation. Refused unless
        // forced (a deliberate key change).
        let generation = latest.pointer.generation;
        let newest = newest.filter(|&n| n > generation.saturating_add(1));
        for g in std::iter::once(generation)
            .chain(generation.checked_add(1))
            .chain(newest)
        {
            if let Some(refused) = other_key(g)? {
                return Err(refused);
            }
        }
        Ok(Some(generation))
    }
}
