//! The read path of [`Lists`]: a URL's hashes probed against every list's
//! current state, with no lock and no allocation for one list. The update
//! path (downloads, verification, the swap) is the parent module.

use std::sync::Arc;
use std::time::SystemTime;

use super::{Lists, Probed};
use crate::Error;
use crate::engine::lookup::{self, LocalLookup, UrlHashes};

impl Lists {
    /// Hashes `url`'s expressions and probes every list's current state
    /// with them ([`Agent::lookup_local`](crate::Agent::lookup_local)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host, then
    /// [`Error::NotReady`] when a list has no snapshot yet.
    pub(crate) fn lookup_local(&self, url: &str, now: SystemTime) -> Result<LocalLookup, Error> {
        let mut hashes = UrlHashes::default();
        if let Some(local) = self.lookup_one(url, now, &mut hashes) {
            return local;
        }
        hashes.set(url)?;
        match self.probe(&hashes, now) {
            (local, None) => Ok(local),
            (_, Some(list)) => Err(Error::NotReady {
                list: list.to_string(),
            }),
        }
    }

    /// The check of one list that has a snapshot (the usual case), its
    /// hashes' filter slots prefetched as they are computed; `None` with
    /// several lists or none loaded (`hashes` untouched).
    #[inline(always)]
    fn lookup_one<'u>(
        &self,
        url: &'u str,
        now: SystemTime,
        hashes: &mut UrlHashes<'u>,
    ) -> Option<Result<LocalLookup, Error>> {
        let [slot] = self.slots.as_slice() else {
            return None;
        };
        let current = slot.current.load();
        let loaded = current.as_ref()?;
        if let Err(e) = hashes.set_then(url, |hash| loaded.state.prefetch(hash)) {
            return Some(Err(e));
        }
        let snapshot = std::iter::once((&slot.name, &loaded.state));
        Some(Ok(lookup::probe(hashes, snapshot, now)))
    }

    /// Hashes `url`'s expressions and probes the current state of every
    /// list that has one; names the first list that has none (not probed:
    /// the check can then end only in an unsafe verdict or
    /// [`Error::NotReady`], [`lookup::unless_unready`]).
    /// With one list (the usual case), on x86/x86_64, each hash's filter
    /// slots start loading as soon as it is computed
    /// ([`PrefixFilter::prefetch`](blocksieve_format::PrefixFilter::prefetch)),
    /// so those reads (cache misses, once a filter outgrows the caches)
    /// overlap the hashing of the next expressions instead of all waiting
    /// after the last one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host.
    pub(crate) fn lookup_loaded(&self, url: &str, now: SystemTime) -> Result<Probed, Error> {
        let mut hashes = UrlHashes::default();
        if let Some(local) = self.lookup_one(url, now, &mut hashes) {
            return local.map(|local| (local, None));
        }
        hashes.set(url)?;
        Ok(self.probe(&hashes, now))
    }

    /// Probes the current state (base filter and additions) of every list
    /// that has one, and names the first list that has none.
    fn probe(&self, hashes: &UrlHashes<'_>, now: SystemTime) -> Probed {
        // Guards, not `load_full`: cloning the `Arc` writes its shared
        // reference count on every check, a cache line that concurrent
        // checkers on other cores then fight over (`bench/`, row 5).
        if let [slot] = self.slots.as_slice() {
            // One list, the usual case: no allocation for the guards.
            let current = slot.current.load();
            let Some(loaded) = current.as_ref() else {
                return (
                    lookup::probe(hashes, std::iter::empty(), now),
                    Some(Arc::clone(&slot.name)),
                );
            };
            let snapshot = std::iter::once((&slot.name, &loaded.state));
            return (lookup::probe(hashes, snapshot, now), None);
        }
        let mut unready = None;
        let mut loaded = Vec::with_capacity(self.slots.len());
        for slot in &self.slots {
            let current = slot.current.load();
            if current.is_none() {
                unready.get_or_insert_with(|| Arc::clone(&slot.name));
                continue;
            }
            loaded.push((&slot.name, current));
        }
        let local = lookup::probe(
            hashes,
            loaded
                .iter()
                .filter_map(|(name, l)| l.as_ref().map(|l| (*name, &l.state))),
            now,
        );
        (local, unready)
    }
}
