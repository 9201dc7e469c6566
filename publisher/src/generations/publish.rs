//! Publishing a generation ([`ListStore::publish`]) and refreshing the
//! served one ([`ListStore::refresh`]), then retention: the writing half of
//! [`super`]'s layout.

use blocksieve_format::{FullHash, SigningKey, TrustedKey};

use super::{
    Build, Latest, ListStore, MAX_MANIFEST_BYTES, Manifest, ObjectRef, Pointer, PublishOutcome, is_definitive,
};
use crate::error::Error;
use crate::storage::PutMode;
use crate::storage::spill::{Spill, SpilledHashes};

impl Spill for ListStore {
    /// Stages the `.hashes` object in the list's `builds/` (a temporary
    /// file there, removed when dropped or left by a crash): only where
    /// staging is on disk.
    fn spill(&self, hashes: &[FullHash]) -> Option<SpilledHashes> {
        let prefix = self.key("builds");
        let staged = match self.storage.stage(&prefix) {
            Ok(staged) if staged.is_file() => staged,
            Ok(_) => return None,
            Err(e) => {
                tracing::warn!(list = %self.name, error = %e, "cannot write the full hashes out of memory while the filter is built; the build keeps them");
                return None;
            }
        };
        let location = self.storage.location(&prefix).display().to_string();
        SpilledHashes::write(staged, hashes, location)
            .inspect_err(|e| tracing::warn!(list = %self.name, error = %e, "cannot write the full hashes out of memory while the filter is built; the build keeps them"))
            .ok()
    }
}

impl ListStore {
    /// Publishes a build of `version` (its signed `snapshot` and sorted
    /// `hashes`) as the generation after `base` (what [`ListStore::latest`]
    /// read before the build; `None` when there was none), signing its
    /// manifest with `key`, then applies retention. See the module docs.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] or [`Error::Store`] when a write fails (the
    /// latest generation stays), [`Error::Corrupt`] when `version` is not
    /// newer than `base`'s.
    pub fn publish(
        &self,
        version: u64,
        snapshot: &[u8],
        hashes: &[FullHash],
        base: Option<&Latest>,
        key: &SigningKey,
        now: u64,
    ) -> Result<PublishOutcome, Error> {
        let build = Build {
            version,
            snapshot,
            hashes,
            deltas: &[],
            freshness: None,
            replaces_untrusted: false,
        };
        self.publish_build(&build, base, key, now)
    }

    /// As [`ListStore::publish`], with the build's delta chain stored as
    /// one more object of the generation (none when it is empty) and its
    /// signed freshness record in the `latest` pointer.
    ///
    /// # Errors
    ///
    /// As [`ListStore::publish`].
    pub fn publish_build(
        &self,
        build: &Build<'_>,
        base: Option<&Latest>,
        key: &SigningKey,
        now: u64,
    ) -> Result<PublishOutcome, Error> {
        self.publish_spilled(build, None, base, key, now)
    }

    /// As [`ListStore::publish_build`], with the build's full hashes
    /// already written as `spilled` (by [`Spill::spill`], from this store):
    /// committed under the build's key rather than written again. They
    /// must be `build.hashes`, as [`SpilledHashes::read_back`] checked.
    ///
    /// # Errors
    ///
    /// As [`ListStore::publish`].
    pub fn publish_spilled(
        &self,
        build: &Build<'_>,
        spilled: Option<SpilledHashes>,
        base: Option<&Latest>,
        key: &SigningKey,
        now: u64,
    ) -> Result<PublishOutcome, Error> {
        let Build {
            version,
            snapshot,
            hashes,
            deltas,
            freshness,
            replaces_untrusted,
        } = *build;
        let trusted = self.trusted_with(key);
        if let Some(base) = base
            && version <= base.pointer.version
        {
            return Err(self.corrupt(
                &self.pointer_key(),
                format!(
                    "points to version {}, not older than the build's {version}",
                    base.pointer.version
                ),
            ));
        }
        let parent = base.map(|b| b.pointer.generation);
        // The pointer is not signed: a forged one may name the last
        // generation there is.
        let Some(generation) = parent.map_or(Some(1), |g| g.checked_add(1)) else {
            return Err(self.corrupt(
                &self.pointer_key(),
                format!("points to generation {}, after which there is none", u64::MAX),
            ));
        };
        let build = format!("{version:020}-{:016x}", rand::random::<u64>());
        let snapshot_ref = ObjectRef::of(format!("builds/{build}.snapshot"), snapshot);
        let hashes_key = format!("builds/{build}.hashes");
        let created = match spilled.filter(|s| s.len() == hashes.len()) {
            // Written while the filter was built: renamed into place (the
            // build id is new, so nothing is replaced).
            Some(spilled) => {
                let staged = spilled.into_staged();
                let hashes_ref = ObjectRef {
                    key: hashes_key,
                    size: staged.len(),
                    sha256: staged.sha256_hex(),
                };
                // A commit replaces; a build id is never reused, which
                // the write it stands for (create-only) checked.
                let key = self.key(&hashes_ref.key);
                let absent = self.storage.version(&key)?.is_none();
                if absent {
                    self.storage.commit(&key, staged)?;
                }
                (hashes_ref, absent)
            }
            None => {
                let hashes_ref = ObjectRef::of_chunks(hashes_key, hashes.iter().map(|h| &h.0[..]));
                // Streamed: a copy of the hashes in memory would add 32
                // bytes per entry to the build's peak.
                let mut chunks = hashes.iter().map(|h| &h.0[..]);
                let created =
                    (self.storage).put_chunks(&self.key(&hashes_ref.key), &mut chunks, PutMode::Create)?;
                let created = created.is_some() || self.holds(&hashes_ref)?;
                (hashes_ref, created)
            }
        };
        let (hashes_ref, created) = created;
        let created = created
            && ((self.storage)
                .put(&self.key(&snapshot_ref.key), snapshot, PutMode::Create)?
                .is_some()
                || self.holds(&snapshot_ref)?);
        let deltas_ref =
            (!deltas.is_empty()).then(|| ObjectRef::of(format!("builds/{build}.deltas"), deltas));
        let created = created
            && match &deltas_ref {
                Some(object) => {
                    (self.storage)
                        .put(&self.key(&object.key), deltas, PutMode::Create)?
                        .is_some()
                        || self.holds(object)?
                }
                None => true,
            };
        if !created {
            return Err(self.corrupt(&self.key(&snapshot_ref.key), "a never-reused build id exists"));
        }
        // A build that stalled (past its lease, or paused) may start from a
        // generation whose successor retention has since removed: creating
        // that number again would succeed, and its retention would count
        // from it. A pointer moved since, to a generation past the base
        // that verifies, says so.
        if let Ok(Some(now)) = self.latest()
            && base.is_none_or(|b| b.version != now.version)
            && now.pointer.generation >= generation
            && self.manifest(now.pointer.generation, &trusted).is_ok()
        {
            for object in [Some(&snapshot_ref), Some(&hashes_ref), deltas_ref.as_ref()]
                .into_iter()
                .flatten()
            {
                let _ = self.storage.delete(&self.key(&object.key));
            }
            return Ok(PublishOutcome::Superseded {
                generation: now.pointer.generation,
            });
        }
        let manifest = Manifest {
            list: self.name.clone(),
            generation,
            parent,
            version,
            created_at: now,
            build,
            snapshot: snapshot_ref,
            hashes: hashes_ref,
            deltas: deltas_ref,
        };
        let manifest_key = self.manifest_key(generation);
        let signed = manifest.sign(key);
        let created = (self.storage)
            .put(&manifest_key, &signed, PutMode::Create)?
            .is_some();
        // "Exists" may answer a retry of this very write (the client
        // retries a conditional PUT after a 5xx its first attempt
        // applied): then the manifest is this build's, and its objects
        // must stay. What is there may also be no manifest of this
        // generation at all (garbage, or written without the signing key):
        // that is replaced by compare-and-swap, or every later build would
        // be superseded by it. A manifest signed by a key this builder does
        // not trust (another key's, or damaged: they look alike) stands as
        // another builder's (a key rotation this one was left out of,
        // publishing while this build ran), unless the build
        // `replaces_untrusted` (forced, or alone on its data directory):
        // the next build's check of the store's keys refuses then, saying
        // why and what to do (`Error::OtherSigningKey`). Judged by no clock
        // and no unsigned pointer: two reviews found a window on either
        // let an old key's publish replace a rotation's manifest.
        let mut other_key = false;
        let mut holds_this_build = || {
            // The version judged below: a replacement swaps that object,
            // not one another builder put there meanwhile.
            let judged = self.storage.version(&manifest_key)?;
            match self.manifest(generation, &trusted) {
                Ok(existing) => Ok(existing.build == manifest.build),
                // Not known now: neither removed nor published.
                Err(e) if !is_definitive(&e) => Err(e),
                Err(_)
                    if self.signed_by_another_key(generation, &trusted)?
                        && (!replaces_untrusted || self.pointed_past(generation)?) =>
                {
                    other_key = true;
                    Ok(false)
                }
                Err(e) => {
                    tracing::warn!(list = %self.name, generation, error = %e, "replacing what is stored as this generation's manifest");
                    let mode = judged.map_or(PutMode::Create, PutMode::Update);
                    Ok(self.storage.put(&manifest_key, &signed, mode)?.is_some())
                }
            }
        };
        if !created && !holds_this_build()? {
            // Another builder published this generation first (and may have
            // stopped before moving the pointer): this build is garbage.
            for object in manifest.objects() {
                let _ = self.storage.delete(&self.key(&object.key));
            }
            if other_key {
                // Not this builder's to point at: the next build's check of
                // the store's keys says why (`Error::OtherSigningKey`).
                tracing::warn!(list = %self.name, generation, "another builder published this generation, signed with a key this builder does not trust");
            } else {
                self.roll_forward(generation, base, &trusted)?;
            }
            return Ok(PublishOutcome::Superseded { generation });
        }
        if let Some(latest) = self.move_pointer(&manifest, freshness, base, &trusted)? {
            // The pointer moved on past this generation (or without it:
            // another build now holds its number, pruned and created again
            // while this builder stalled). Either way `latest` does not
            // name this build: it must not be served as the latest, nor
            // its objects removed (a later generation may descend from it).
            return Ok(PublishOutcome::Superseded { generation: latest });
        }
        self.remember(
            version,
            generation,
            self.key(&manifest.snapshot.key),
            Some(manifest.snapshot.clone()),
        );
        self.prune(generation, &trusted);
        Ok(PublishOutcome::Published { generation })
    }

    /// Whether `latest` names generation `generation` or a later one whose
    /// manifest is a signed one (verified or not): another builder
    /// published it, and even a forced build does not replace it (it
    /// publishes past it next time, `head` taking that pointer). A pointer
    /// that is garbage, or names a generation holding none or garbage,
    /// reaches nothing; one that cannot be read now fails the publish.
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    fn pointed_past(&self, generation: u64) -> Result<bool, Error> {
        let latest = match self.latest() {
            Ok(Some(latest)) => latest,
            Ok(None) => return Ok(false),
            Err(e) if is_definitive(&e) => return Ok(false),
            Err(e) => return Err(e),
        };
        if latest.pointer.generation < generation {
            return Ok(false);
        }
        let key = self.manifest_key(latest.pointer.generation);
        let bytes = self.storage.get_range(&key, 0..MAX_MANIFEST_BYTES + 1)?;
        Ok(bytes.is_some_and(|bytes| Manifest::is_signed(&bytes)))
    }

    /// Puts `freshness` (a signed freshness record, as its header value)
    /// in the `latest` pointer, still at `base`'s generation, by
    /// compare-and-swap: how an unchanged build tells replicas that the
    /// served version is still the latest without publishing a generation.
    /// Returns whether the pointer was `base` still (otherwise another
    /// builder moved it, and its own record or generation stands).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] or [`Error::Store`] when the write fails.
    pub fn refresh(&self, base: &Latest, freshness: &str) -> Result<bool, Error> {
        let pointer = Pointer {
            freshness: Some(freshness.to_owned()),
            ..base.pointer.clone()
        };
        let mode = PutMode::Update(base.version.clone());
        Ok((self.storage)
            .put(&self.pointer_key(), &pointer.to_bytes(), mode)?
            .is_some())
    }

    /// Moves `latest` from `base` to `manifest`'s generation by
    /// compare-and-swap. A lost race is re-read: a pointer already at this
    /// generation means it was published, if the manifest of this
    /// generation is still this build's. Returns `None` when `latest`
    /// names this build, or the generation it names instead (past this
    /// one, or this number holding another build).
    fn move_pointer(
        &self,
        manifest: &Manifest,
        freshness: Option<&str>,
        base: Option<&Latest>,
        keys: &[TrustedKey],
    ) -> Result<Option<u64>, Error> {
        let pointer = Pointer {
            list: self.name.clone(),
            generation: manifest.generation,
            version: manifest.version,
            freshness: freshness.map(str::to_owned),
        };
        let mut expected = base.map(|b| b.version.clone());
        for _ in 0..8 {
            let mode = expected.clone().map_or(PutMode::Create, PutMode::Update);
            if (self.storage)
                .put(&self.pointer_key(), &pointer.to_bytes(), mode)?
                .is_some()
            {
                return Ok(None);
            }
            match self.latest()? {
                Some(now) if now.pointer.generation > manifest.generation => {
                    // Superseded, whether or not a later generation was
                    // built on this one: a builder that served this build
                    // now would serve an older list than the store's (and,
                    // its clock ahead, a version that keeps its follower
                    // from loading the newer one).
                    return Ok(Some(now.pointer.generation));
                }
                Some(now) if now.pointer.generation == manifest.generation => {
                    let held = self.manifest(manifest.generation, keys)?;
                    return Ok((held.build != manifest.build).then_some(now.pointer.generation));
                }
                now => expected = now.map(|n| n.version),
            }
        }
        Err(self.corrupt(
            &self.pointer_key(),
            format!(
                "kept changing while generation {} was published; it is complete, and the next publish rolls the pointer forward to it",
                manifest.generation
            ),
        ))
    }

    /// Points `latest` at `generation` (published by another builder) if it
    /// still points at `base` and the manifest verifies: the step a builder
    /// that stopped after creating it did not take.
    fn roll_forward(&self, generation: u64, base: Option<&Latest>, keys: &[TrustedKey]) -> Result<(), Error> {
        let manifest = self.manifest(generation, keys)?;
        for object in manifest.objects() {
            if self.storage.version(&self.key(&object.key))?.is_none() {
                return Err(self.missing(&self.key(&object.key)));
            }
        }
        let pointer = Pointer {
            list: self.name.clone(),
            generation,
            version: manifest.version,
            freshness: None,
        };
        let mode = base.map_or(PutMode::Create, |b| PutMode::Update(b.version.clone()));
        if (self.storage)
            .put(&self.pointer_key(), &pointer.to_bytes(), mode)?
            .is_some()
        {
            tracing::info!(list = %self.name, generation, "rolled the latest pointer forward to a generation another builder published");
        }
        Ok(())
    }

    /// Retention after publishing `generation`; failures are logged, never
    /// fatal (what is left is removed next time).
    fn prune(&self, generation: u64, keys: &[TrustedKey]) {
        if let Err(e) = self.try_prune(generation, keys) {
            tracing::warn!(list = %self.name, error = %e, "retention did not finish; it continues after the next publish");
        }
    }

    fn try_prune(&self, generation: u64, keys: &[TrustedKey]) -> Result<(), Error> {
        // Counted from the latest generation when another builder has
        // published past this one meanwhile: what it keeps stays.
        let latest = self.latest()?.map(|l| l.pointer.generation);
        let generation = latest.map_or(generation, |l| l.max(generation));
        let oldest_kept = generation.saturating_sub(self.keep as u64 - 1).max(1);
        let mut kept_builds = std::collections::BTreeSet::new();
        let mut oldest_version = u64::MAX;
        for g in oldest_kept..=generation {
            let manifest = self.manifest(g, keys)?;
            oldest_version = oldest_version.min(manifest.version);
            kept_builds.insert(manifest.build);
        }
        for manifest_key in self.storage.list(&self.key("generations"))? {
            let number = (manifest_key.rsplit('/').next())
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse::<u64>().ok());
            if number.is_some_and(|g| g < oldest_kept) {
                self.storage.delete(&manifest_key)?;
            }
        }
        // A build's snapshot (and deltas) before its full hashes: a
        // retention interrupted between the two leaves a build's full
        // hashes alone, never a snapshot without them.
        let mut objects = self.storage.list(&self.key("builds"))?;
        objects.sort_by_key(|key| key.ends_with(".hashes"));
        for object_key in objects {
            let Some(name) = object_key.rsplit('/').next() else {
                continue;
            };
            let build = name.rsplit_once('.').map_or(name, |(b, _)| b);
            let version = build.split('-').next().and_then(|v| v.parse::<u64>().ok());
            if !kept_builds.contains(build) && version.is_some_and(|v| v < oldest_version) {
                self.storage.delete(&object_key)?;
            }
        }
        // The older layout's versions, superseded by the first generation.
        let mut legacy_objects = self.storage.list(&self.prefix)?;
        legacy_objects.sort_by_key(|key| key.ends_with(".hashes"));
        for legacy in legacy_objects {
            if legacy.ends_with(".snapshot") || legacy.ends_with(".hashes") {
                self.storage.delete(&legacy)?;
            }
        }
        Ok(())
    }
}

impl ListStore {
    /// Whether `object` is stored as referenced: a create-only write of it
    /// answered "exists" may have applied itself (S3, when the client
    /// retries a conditional PUT after a 5xx the first attempt had
    /// applied), and a build id is never reused, so what is there with the
    /// same size and SHA-256 is this build's own.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] or [`Error::Store`] when it cannot be read.
    fn holds(&self, object: &ObjectRef) -> Result<bool, Error> {
        let stored = self.storage.get(&self.key(&object.key))?;
        Ok(stored.is_some_and(|bytes| object.mismatch(&bytes).is_none()))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::build::testing::build_feed_spilled;
    use crate::storage::{LocalStorage, Storage};

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn spilled_full_hashes_are_the_build_s_and_published_as_they_are_and_a_build_not_published_leaves_none() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let store = ListStore::open(storage, "phishing", 5).unwrap();
        let key = SigningKey::from_secret_bytes([9; 32]);
        let builds = dir.path().join("lists/phishing/builds");
        let feed: String = (0..5_000)
            .map(|i| format!("http://phish{i}.example/p/{i}\n"))
            .collect();
        let now = 1_800_000_000;

        let in_memory = build_feed_spilled(&feed, now, &key, None);
        assert!(in_memory.spilled.is_none());
        let mut built = build_feed_spilled(&feed, now, &key, Some(&store));
        // The same build, byte for byte, with one staged file the more.
        assert_eq!(built.hashes, in_memory.hashes);
        assert_eq!(built.hashes.len(), 5_000);
        assert_eq!(built.snapshot, in_memory.snapshot);
        let spilled = built.spilled.take().expect("a data directory stages on disk");
        assert_eq!(spilled.len(), built.hashes.len());
        let staged = names(&builds);
        assert!(staged.len() == 1 && staged[0].ends_with(".tmp"), "{staged:?}");

        let build = Build {
            version: built.version,
            snapshot: &built.snapshot,
            hashes: &built.hashes,
            deltas: &[],
            freshness: None,
            replaces_untrusted: false,
        };
        let outcome = store
            .publish_spilled(&build, Some(spilled), None, &key, now)
            .unwrap();
        assert_eq!(outcome, PublishOutcome::Published { generation: 1 });
        // Committed under the build's key, checked against the manifest
        // when read back.
        let stored = store
            .load_from(1, std::slice::from_ref(key.public_key()))
            .unwrap();
        assert_eq!(stored.hashes, in_memory.hashes);
        let published = names(&builds);
        assert_eq!(published.len(), 2, "{published:?}");
        assert!(
            published
                .iter()
                .all(|n| n.ends_with(".hashes") || n.ends_with(".snapshot"))
        );

        // A build that publishes nothing (unchanged, refused) drops its
        // staged hashes: nothing of it stays.
        let next = build_feed_spilled(&feed, now + 100, &key, Some(&store));
        assert!(next.spilled.is_some());
        assert_eq!(names(&builds).len(), 3);
        drop(next);
        assert_eq!(names(&builds), published);
    }
}
