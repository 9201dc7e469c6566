//! One list's published generations in [`Storage`]: how a builder
//! publishes one, and how a reader (a restart, a replica, another builder)
//! finds and verifies the latest.
//!
//! ```text
//! lists/<name>/builds/<build>.snapshot     one build's signed snapshot
//! lists/<name>/builds/<build>.hashes       its sorted full hashes, 32 raw bytes each
//! lists/<name>/builds/<build>.deltas       its delta chain (none when empty)
//! lists/<name>/generations/<g>.json        generation g's signed manifest
//! lists/<name>/latest                      the pointer to the latest generation
//! lists/<name>/lease                       which builder builds now (object stores)
//! ```
//!
//! `<build>` is the snapshot's version in 20 decimal digits, `-`, and 64
//! random bits in hex: never reused, so a build's objects are written once
//! and never replaced. `<g>` is the generation in 20 decimal digits.
//!
//! **Publishing** writes immutable data first and one commit point last
//! ([`ListStore::publish`]):
//!
//! 1. the build's snapshot, full hashes and delta chain (when it has one),
//!    create-only;
//! 2. the [`Manifest`] of generation g + 1 (g is the generation the build
//!    started from), naming those objects with their size and SHA-256,
//!    signed, create-only (`If-None-Match: *`): when it exists, or the
//!    pointer has moved past g already (a stalled build, whose g + 1
//!    retention may have removed), another builder published first, and
//!    this build is garbage (what exists there but does not verify as
//!    generation g + 1 is replaced by compare-and-swap instead);
//! 3. the `latest` [`Pointer`], moved from g to g + 1 by compare-and-swap
//!    (`If-Match` on the ETag read in step 0), with the new version's
//!    signed freshness record.
//!
//! A build that finds its list unchanged publishes no generation: it
//! replaces the pointer's freshness record, at the same generation, by
//! compare-and-swap ([`ListStore::refresh`]). Readers verify the record
//! and use it only for the version and body hash it names.
//!
//! A crash before step 2 leaves garbage only; after step 2, the next
//! builder that tries to create g + 1 finds it and rolls the pointer
//! forward to it. Readers follow pointer → manifest → objects and check
//! every signature, size and hash, so none sees a half-written publish.
//!
//! **Retention**: after publishing generation g, the manifests of all but
//! the newest `keep` generations (counted from the latest, should another
//! builder have published past g meanwhile) are removed, and so are the build objects
//! no kept manifest names that are older than the oldest kept generation
//! (an unfinished build of another builder is newer, so it is left alone).
//!
//! Data directories written before generations existed hold
//! `lists/<name>/<version>.snapshot` and `.hashes`; they are still read
//! (the newest that verifies) until the first generation is published, and
//! removed by its retention.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use blocksieve_format::{DecodeLimits, FullHash, SigningKey, TrustedKey, decode};

pub mod deltas;
mod manifest;
mod publish;

use crate::error::Error;
use crate::storage::{Conditional, PutMode, Storage, Version};
use deltas::Chain;
pub use manifest::{Lease, MANIFEST_CONTEXT, Manifest, ObjectRef, Pointer};

/// A kept snapshot the versioned route may serve: its generation (0: the
/// older layout), its key, and what its manifest says it is (size and
/// SHA-256; none for the older layout), checked before it is served.
#[derive(Debug, Clone)]
struct Known {
    generation: u64,
    key: String,
    object: Option<ObjectRef>,
}

/// One list's published generations (clones share their index).
#[derive(Debug, Clone)]
pub struct ListStore {
    storage: Arc<dyn Storage>,
    /// The list's name.
    name: String,
    /// `lists/<name>`.
    prefix: String,
    /// Generations kept by retention.
    keep: usize,
    /// Generation and snapshot key by version, of the generations read or
    /// published lately or, before the first, of the older layout's newest
    /// versions (generation 0), at most `keep`: what the versioned snapshot
    /// route serves.
    known: Arc<Mutex<BTreeMap<u64, Known>>>,
    /// Public keys of signing keys this list's builders used before their
    /// current one (a key rotation, `previous_public_keys`): generations
    /// they signed verify when a publish reads what it follows, moves the
    /// pointer past or removes by retention.
    previous_keys: Arc<[TrustedKey]>,
}

/// A published version read back from storage.
#[derive(Debug)]
pub struct StoredVersion {
    /// The snapshot's bytes.
    pub snapshot: Vec<u8>,
    /// The sorted full hashes.
    pub hashes: Vec<FullHash>,
    /// The delta chain ending at this version (empty for a generation
    /// stored without one, and for the older layout).
    pub deltas: Chain,
    /// Its generation (`None` for a version of the older layout).
    pub generation: Option<u64>,
}

/// What one build publishes ([`ListStore::publish_build`]).
#[derive(Debug, Clone, Copy)]
pub struct Build<'a> {
    /// The snapshot's version.
    pub version: u64,
    /// The signed snapshot.
    pub snapshot: &'a [u8],
    /// Its sorted full hashes.
    pub hashes: &'a [FullHash],
    /// The delta chain ending at this version (empty: none is stored).
    pub deltas: &'a [u8],
    /// The version's signed freshness record, as its header value, for the
    /// `latest` pointer.
    pub freshness: Option<&'a str>,
    /// Whether a manifest signed by no key the builder trusts (another
    /// key's, or damaged), at the generation this build takes, is replaced
    /// as garbage is: a forced build (a deliberate key change), or a
    /// builder alone on its data directory. Otherwise it stands as another
    /// builder's and the publish is superseded.
    pub replaces_untrusted: bool,
}

/// The `latest` pointer as read, with the version a compare-and-swap
/// replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latest {
    /// What it points to.
    pub pointer: Pointer,
    /// Its version (ETag).
    pub version: Version,
}

/// What [`ListStore::publish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishOutcome {
    /// This build is generation `generation`, and `latest` points to it.
    Published {
        /// Its generation.
        generation: u64,
    },
    /// `latest` names `generation`, another builder's: it published first
    /// from the same generation (or, this build having stalled, a later
    /// one; this build's objects were then removed), or moved the pointer
    /// past this build's generation before this builder could point to it
    /// (its objects then stay: a later generation may descend from it).
    Superseded {
        /// The generation the other builder published.
        generation: u64,
    },
}

/// What [`ListStore::acquire_lease`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseOutcome {
    /// Held by the caller until the time it asked for; the version
    /// releases it.
    Acquired(Version),
    /// Held by another builder.
    HeldBy(Lease),
}

/// How many generations below a broken latest one a reader tries.
const WALK_BACK: u64 = 16;

/// The most bytes a stored manifest may hold: its fields are a list name,
/// two object keys and numbers (a few hundred bytes).
const MAX_MANIFEST_BYTES: u64 = 64 * 1024;

impl ListStore {
    /// The generations of list `name` in `storage`, keeping `keep`, whose
    /// place is made ready (see [`Storage::prepare`]).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when it cannot be.
    pub fn open(storage: Arc<dyn Storage>, name: &str, keep: usize) -> Result<Self, Error> {
        let prefix = format!("lists/{name}");
        for dir in ["", "/builds", "/generations"] {
            storage.prepare(&format!("{prefix}{dir}"))?;
        }
        Ok(Self {
            storage,
            name: name.to_owned(),
            prefix,
            keep: keep.max(1),
            known: Arc::new(Mutex::new(BTreeMap::new())),
            previous_keys: Arc::new([]),
        })
    }

    /// This store, whose publishes also take generations signed by
    /// `keys` as this list's ([`ListStore::previous_keys`]).
    #[must_use]
    pub fn with_previous_keys(mut self, keys: &[TrustedKey]) -> Self {
        self.previous_keys = keys.into();
        self
    }

    /// The keys a publish signed with `key` verifies generations under:
    /// its own, then the previous ones.
    pub(crate) fn trusted_with(&self, key: &SigningKey) -> Vec<TrustedKey> {
        std::iter::once(key.public_key().clone())
            .chain(self.previous_keys.iter().cloned())
            .collect()
    }

    fn key(&self, under: &str) -> String {
        format!("{}/{under}", self.prefix)
    }

    fn pointer_key(&self) -> String {
        self.key("latest")
    }

    fn manifest_key(&self, generation: u64) -> String {
        self.key(&format!("generations/{generation:020}.json"))
    }

    fn corrupt(&self, key: &str, reason: impl Into<String>) -> Error {
        Error::Corrupt {
            path: self.storage.location(key),
            reason: reason.into(),
        }
    }

    fn missing(&self, key: &str) -> Error {
        Error::storage(self.storage.location(key))(std::io::ErrorKind::NotFound.into())
    }

    /// The `latest` pointer, `None` before the first generation.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] or [`Error::Store`] when it cannot be read,
    /// [`Error::Corrupt`] when it is not a pointer of this list.
    pub fn latest(&self) -> Result<Option<Latest>, Error> {
        match self.latest_if_changed(None)? {
            Conditional::Value { bytes, version } => Ok(Some(Latest {
                pointer: self.parse_pointer(&bytes)?,
                version,
            })),
            Conditional::Missing | Conditional::NotModified => Ok(None),
        }
    }

    /// What a build starts from: the newest generation that verifies under
    /// `key`, with the version of the `latest` pointer that a publish
    /// replaces. The pointer is not signed, so it is only where the search
    /// starts: a pointer that is not one, names a generation that does not
    /// verify, or names another version than that generation's is
    /// corrected from the signed manifests, and one left behind (a newer
    /// generation verifies) is followed forward. `None` before the first
    /// generation.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] or [`Error::Store`] when the store cannot be read.
    pub fn head(&self, keys: &[TrustedKey]) -> Result<Option<Latest>, Error> {
        let (pointed, version) = match self.latest_if_changed(None)? {
            Conditional::Missing | Conditional::NotModified => (None, None),
            Conditional::Value { bytes, version } => (self.parse_pointer(&bytes).ok(), Some(version)),
        };
        let verified = |g: u64| match self.manifest(g, keys) {
            Ok(manifest) => Ok(Some(manifest)),
            Err(e) if is_definitive(&e) => Ok(None),
            Err(e) => Err(e),
        };
        let mut found = match &pointed {
            Some(p) => verified(p.generation)?,
            None => None,
        };
        if found.is_none()
            && let Some((pointer, version)) = pointed.as_ref().zip(version.as_ref())
            && self.signed_by_another_key(pointer.generation, keys)?
        {
            // Signed, by a key not among `keys`: another builder's (a key
            // rotation this one was left out of), not garbage to pass
            // over. The pointer is the head as it stands: a build on an
            // older generation of this builder's would hold the ETag of a
            // pointer naming this one, and move it back by compare-and-swap.
            return Ok(Some(Latest {
                pointer: pointer.clone(),
                version: version.clone(),
            }));
        }
        if found.is_none() {
            // The newest stored manifest that verifies, of the last few.
            let mut numbers: Vec<u64> = (self.storage.list(&self.key("generations"))?.iter())
                .filter_map(|k| k.rsplit('/').next()?.strip_suffix(".json")?.parse().ok())
                .collect();
            numbers.sort_unstable_by(|a, b| b.cmp(a));
            for g in numbers.into_iter().take(WALK_BACK as usize) {
                if let Some(manifest) = verified(g)? {
                    found = Some(manifest);
                    break;
                }
            }
        }
        let Some(mut head) = found else {
            // Nothing verifies: whatever the pointer says, or nothing.
            return Ok(pointed
                .zip(version)
                .map(|(pointer, version)| Latest { pointer, version }));
        };
        // Left behind (a builder stopped before moving it, or an older
        // pointer written back): what was published after it.
        while let Some(next) = head.generation.checked_add(1)
            && let Some(manifest) = verified(next)?
        {
            head = manifest;
        }
        // The record stays with the generation it was written for.
        let freshness = (pointed.as_ref())
            .filter(|p| p.generation == head.generation && p.version == head.version)
            .and_then(|p| p.freshness.clone());
        let pointer = Pointer {
            list: self.name.clone(),
            generation: head.generation,
            version: head.version,
            freshness,
        };
        let version = match version {
            Some(version) => version,
            // Generations but no pointer (removed, or its first write
            // failed): it is created, pointing at the newest.
            None => match (self.storage).put(&self.pointer_key(), &pointer.to_bytes(), PutMode::Create)? {
                Some(version) => version,
                // Created by another builder meanwhile.
                None => return self.head(keys),
            },
        };
        Ok(Some(Latest { pointer, version }))
    }

    /// The `latest` pointer's bytes unless its version is still `known`:
    /// one conditional GET, what a follower polls.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] or [`Error::Store`] when it cannot be read.
    pub fn latest_if_changed(&self, known: Option<&Version>) -> Result<Conditional, Error> {
        self.storage.get_if_changed(&self.pointer_key(), known)
    }

    /// `bytes` as a pointer of this list.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when they are not one.
    pub fn parse_pointer(&self, bytes: &[u8]) -> Result<Pointer, Error> {
        let key = self.pointer_key();
        let pointer = Pointer::parse(bytes).map_err(|reason| self.corrupt(&key, reason))?;
        if pointer.list != self.name {
            return Err(self.corrupt(&key, format!("points into list {:?}", pointer.list)));
        }
        Ok(pointer)
    }

    /// Generation `generation`'s manifest, verified under `key`.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] or [`Error::Store`] when it cannot be read (a
    /// missing one is `NotFound`), [`Error::Corrupt`] when it does not
    /// verify or is not that generation of this list.
    pub fn manifest(&self, generation: u64, keys: &[TrustedKey]) -> Result<Manifest, Error> {
        let manifest_key = self.manifest_key(generation);
        // Anyone who can write the store can put any size there: a reader
        // takes no more than a manifest can be.
        let bytes = (self.storage)
            .get_range(&manifest_key, 0..MAX_MANIFEST_BYTES + 1)?
            .ok_or_else(|| self.missing(&manifest_key))?;
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(self.corrupt(
                &manifest_key,
                format!("is larger than a manifest can be ({MAX_MANIFEST_BYTES} bytes)"),
            ));
        }
        let manifest =
            Manifest::verify(&bytes, keys).map_err(|reason| self.corrupt(&manifest_key, reason))?;
        if manifest.list != self.name || manifest.generation != generation {
            return Err(self.corrupt(
                &manifest_key,
                format!(
                    "is generation {} of list {:?}",
                    manifest.generation, manifest.list
                ),
            ));
        }
        Ok(manifest)
    }

    /// The highest generation number among the stored manifests, whoever
    /// signed them: what a build whose head lies below it (no pointer, or
    /// garbage, and only older generations verifying) would publish under.
    ///
    /// # Errors
    ///
    /// When the store cannot be listed.
    pub fn newest_stored_generation(&self) -> Result<Option<u64>, Error> {
        Ok((self.storage.list(&self.key("generations"))?.iter())
            .filter_map(|k| k.rsplit('/').next()?.strip_suffix(".json")?.parse().ok())
            .max())
    }

    /// Whether generation `generation`'s manifest is well formed and
    /// signed, but does not verify under `key`: another builder's, with
    /// another signing key (or its body damaged; the two look alike).
    ///
    /// # Errors
    ///
    /// When the store cannot be read.
    pub fn signed_by_another_key(&self, generation: u64, keys: &[TrustedKey]) -> Result<bool, Error> {
        let manifest_key = self.manifest_key(generation);
        let bytes = (self.storage).get_range(&manifest_key, 0..MAX_MANIFEST_BYTES + 1)?;
        Ok(bytes.is_some_and(|bytes| Manifest::signed_by_another_key(&bytes, keys)))
    }

    /// Generation `generation`, verified under `key` as an agent would
    /// (expiry aside), every object checked against its manifest.
    ///
    /// # Errors
    ///
    /// As [`ListStore::manifest`]; an object that is missing is `NotFound`,
    /// one that does not match its manifest or verify is [`Error::Corrupt`].
    pub fn load_generation(&self, generation: u64, keys: &[TrustedKey]) -> Result<StoredVersion, Error> {
        let manifest = self.manifest(generation, keys)?;
        let snapshot_key = self.key(&manifest.snapshot.key);
        let hashes_key = self.key(&manifest.hashes.key);
        // At most one byte more than the manifest says: an oversized
        // object costs no more memory than the right one.
        let snapshot = (self.storage)
            .get_range(&snapshot_key, 0..manifest.snapshot.size.saturating_add(1))?
            .ok_or_else(|| self.missing(&snapshot_key))?;
        if let Some(reason) = manifest.snapshot.mismatch(&snapshot) {
            return Err(self.corrupt(&snapshot_key, reason));
        }
        let raw = (self.storage)
            .get_range(&hashes_key, 0..manifest.hashes.size.saturating_add(1))?
            .ok_or_else(|| self.missing(&hashes_key))?;
        if let Some(reason) = manifest.hashes.mismatch(&raw) {
            return Err(self.corrupt(&hashes_key, reason));
        }
        let hashes = self.verify(
            &snapshot,
            &snapshot_key,
            &raw,
            &hashes_key,
            manifest.version,
            keys,
        )?;
        let deltas = match &manifest.deltas {
            Some(object) => self.load_chain(object, &snapshot, keys)?,
            None => Chain::default(),
        };
        self.remember(
            manifest.version,
            generation,
            snapshot_key,
            Some(manifest.snapshot.clone()),
        );
        Ok(StoredVersion {
            snapshot,
            hashes,
            deltas,
            generation: Some(generation),
        })
    }

    /// The delta chain `object` names, checked against it, every delta
    /// verified under `key` and the chain ending at `snapshot` (verified).
    fn load_chain(&self, object: &ObjectRef, snapshot: &[u8], keys: &[TrustedKey]) -> Result<Chain, Error> {
        let deltas_key = self.key(&object.key);
        let bytes = (self.storage)
            .get_range(&deltas_key, 0..object.size.saturating_add(1))?
            .ok_or_else(|| self.missing(&deltas_key))?;
        if let Some(reason) = object.mismatch(&bytes) {
            return Err(self.corrupt(&deltas_key, reason));
        }
        let header = blocksieve_format::parse_header_unverified(snapshot)
            .map_err(|e| self.corrupt(&deltas_key, e.to_string()))?;
        let end = blocksieve_format::DeltaEnd {
            version: header.version,
            body_sha256: header.body_sha256,
        };
        let chain = Chain::parse(bytes.into()).map_err(|reason| self.corrupt(&deltas_key, reason))?;
        chain
            .verify(&self.name, keys, end)
            .map_err(|reason| self.corrupt(&deltas_key, reason))?;
        Ok(chain)
    }

    /// Checks a snapshot and its full hashes as an agent and the full-hash
    /// endpoint rely on them: the snapshot verifies under `key` and holds
    /// `version`, and the hashes are sorted, as many as it declares, and
    /// every one in its filter. Returns the hashes.
    fn verify(
        &self,
        snapshot: &[u8],
        snapshot_key: &str,
        raw: &[u8],
        hashes_key: &str,
        version: u64,
        keys: &[TrustedKey],
    ) -> Result<Vec<FullHash>, Error> {
        // An expired snapshot is still served (agents flag it stale), so
        // check expiry against its own creation time.
        let header = blocksieve_format::parse_header_unverified(snapshot)
            .map_err(|e| self.corrupt(snapshot_key, e.to_string()))?;
        let verified = decode(snapshot, keys, &DecodeLimits::default(), header.created_at)
            .map_err(|e| self.corrupt(snapshot_key, e.to_string()))?;
        // A signed snapshot stored as another version would be served as
        // that version: a rollback anyone who can write the store could
        // cause without the signing key.
        if verified.header().version != version {
            return Err(self.corrupt(
                snapshot_key,
                format!(
                    "holds version {} where version {version} was published",
                    verified.header().version
                ),
            ));
        }
        let declared = verified.header().full_hash_count;
        if !raw.len().is_multiple_of(FullHash::LEN) || (raw.len() / FullHash::LEN) as u64 != declared {
            return Err(self.corrupt(
                hashes_key,
                format!(
                    "{} bytes does not hold the {declared} full hashes the snapshot declares",
                    raw.len()
                ),
            ));
        }
        let hashes: Vec<FullHash> = raw
            .chunks_exact(FullHash::LEN)
            .map(|c| {
                let mut h = [0u8; 32];
                h.copy_from_slice(c);
                FullHash(h)
            })
            .collect();
        if hashes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(self.corrupt(hashes_key, "hashes are not sorted"));
        }
        // The full hashes must be the snapshot's: another build's would
        // answer "no match" for URLs the filter lists. Every listed hash is
        // in the filter; another build's are not (each passes with the
        // false-positive rate).
        if let Some(stranger) = hashes.iter().find(|h| !verified.probably_contains(h)) {
            return Err(self.corrupt(
                hashes_key,
                format!(
                    "full hash {stranger} is not in the snapshot's filter: the hashes belong to another build"
                ),
            ));
        }
        Ok(hashes)
    }

    /// The newest generation that verifies under `key`, from `generation`
    /// down (a broken one is skipped with a warning, at most 16).
    pub fn load_from(&self, generation: u64, keys: &[TrustedKey]) -> Option<StoredVersion> {
        let oldest = generation.saturating_sub(WALK_BACK).max(1);
        for g in (oldest..=generation).rev() {
            match self.load_generation(g, keys) {
                Ok(stored) => return Some(stored),
                Err(e) => {
                    tracing::warn!(list = %self.name, generation = g, error = %e, "skipping a generation that cannot be loaded")
                }
            }
        }
        None
    }

    /// As [`ListStore::load_from`], but a generation the store could not be
    /// asked for now is not walked past: serving an older one instead
    /// would skip its additions although it may load a moment later. Only
    /// generations of a version above `floor` (what is served) are
    /// downloaded. The generations skipped because their manifest or an
    /// object it names was missing are added to `missing` (a store may show
    /// the pointer before the objects: a caller can try them again). The
    /// error of `generation` itself, when it does not load, is put in
    /// `refused`.
    ///
    /// # Errors
    ///
    /// The first error that does not say a generation is bad
    /// ([`is_definitive`]).
    pub fn load_newest_from(
        &self,
        generation: u64,
        floor: Option<u64>,
        keys: &[TrustedKey],
        missing: &mut Vec<u64>,
        refused: &mut Option<String>,
    ) -> Result<Option<StoredVersion>, Error> {
        let oldest = generation.saturating_sub(WALK_BACK).max(1);
        for g in (oldest..=generation).rev() {
            // The pointed generation is newer by its pointer (one GET
            // fewer); those walked back to are checked first.
            if let Some(floor) = floor
                && g < generation
            {
                match self.manifest(g, keys) {
                    Ok(manifest) if manifest.version <= floor => return Ok(None),
                    Ok(_) => {}
                    Err(e) if !is_definitive(&e) => return Err(e),
                    Err(_) => {}
                }
            }
            match self.load_generation(g, keys) {
                Ok(stored) => return Ok(Some(stored)),
                Err(e) if !is_definitive(&e) => return Err(e),
                Err(e) => {
                    if is_missing(&e) {
                        missing.push(g);
                    }
                    if g == generation {
                        *refused = Some(format!("generation {g}: {e}"));
                    }
                    tracing::warn!(list = %self.name, generation = g, error = %e, "skipping a generation that cannot be loaded");
                }
            }
        }
        Ok(None)
    }

    /// What to serve on start: the newest generation that verifies under
    /// `key`, else the newest version of the older layout, and the older
    /// kept generations' versions for the versioned route.
    pub fn load_latest(&self, keys: &[TrustedKey]) -> Option<StoredVersion> {
        // The newest generation whose manifest verifies, whatever the
        // pointer says (see `head`; it may write a missing pointer: a
        // builder's start only).
        let latest = match self.head(keys) {
            Ok(latest) => latest,
            Err(e) => {
                tracing::warn!(list = %self.name, error = %e, "cannot read the latest generation");
                None
            }
        };
        let Some(latest) = latest else {
            return self.load_latest_legacy(keys);
        };
        let stored = self.load_from(latest.pointer.generation, keys)?;
        if let Some(generation) = stored.generation {
            self.remember_older(generation, keys);
        }
        Some(stored)
    }

    /// Fills the versioned route's index from the manifests of the kept
    /// generations below `generation` it does not hold yet.
    pub fn remember_older(&self, generation: u64, keys: &[TrustedKey]) {
        let oldest = generation.saturating_sub(self.keep as u64 - 1).max(1);
        let held: std::collections::BTreeSet<u64> = (self.known.lock())
            .map(|k| k.values().map(|known| known.generation).collect())
            .unwrap_or_default();
        for g in (oldest..generation).filter(|g| !held.contains(g)) {
            if let Ok(manifest) = self.manifest(g, keys) {
                let snapshot = manifest.snapshot.clone();
                self.remember(manifest.version, g, self.key(&snapshot.key), Some(snapshot));
            }
        }
    }

    fn remember(&self, version: u64, generation: u64, key: String, object: Option<ObjectRef>) {
        if let Ok(mut known) = self.known.lock() {
            known.insert(
                version,
                Known {
                    generation,
                    key,
                    object,
                },
            );
            while known.len() > self.keep {
                known.pop_first();
            }
        }
    }

    /// The snapshot bytes of `version`, if it is a kept generation's (or,
    /// before the first generation, a version of the older layout still
    /// stored). A version no kept generation has costs no store request,
    /// even before anything is loaded: asking for made-up versions cannot
    /// make a replica call its store. The bytes are checked against the
    /// generation's manifest first: the route serves them as immutable for
    /// a year, so what a cache keeps must be what was signed.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when the stored bytes are not what the manifest
    /// says; [`Error::Storage`] or [`Error::Store`] when they cannot be
    /// read.
    pub fn read_snapshot(&self, version: u64) -> Result<Option<Vec<u8>>, Error> {
        let Some(known) = self.known.lock().ok().and_then(|k| k.get(&version).cloned()) else {
            return Ok(None);
        };
        let Some(bytes) = self.storage.get(&known.key)? else {
            return Ok(None);
        };
        if let Some(reason) = known.object.as_ref().and_then(|object| object.mismatch(&bytes)) {
            return Err(self.corrupt(&known.key, reason));
        }
        Ok(Some(bytes))
    }

    /// Takes the lease for `holder` until `until` (Unix seconds) if it is
    /// free, expired at `now`, unreadable or already `holder`'s, or if it
    /// expires later than twice the lease asked for from `now`: no builder
    /// takes such a lease (anyone who can write the store, or a clock far
    /// ahead, could otherwise stop every build; the lease only saves
    /// duplicate work).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] or [`Error::Store`] when the store cannot be
    /// read or written.
    pub fn acquire_lease(&self, holder: &str, until: u64, now: u64) -> Result<LeaseOutcome, Error> {
        let key = self.key("lease");
        let ours = Lease {
            holder: holder.to_owned(),
            expires_at: until,
        };
        let mode = match self.storage.get_if_changed(&key, None)? {
            Conditional::Missing | Conditional::NotModified => PutMode::Create,
            Conditional::Value { bytes, version } => match Lease::parse(&bytes) {
                Some(lease)
                    if lease.holder != holder
                        && lease.expires_at > now
                        && lease.expires_at <= until.saturating_add(until.saturating_sub(now)) =>
                {
                    return Ok(LeaseOutcome::HeldBy(lease));
                }
                _ => PutMode::Update(version),
            },
        };
        match self.storage.put(&key, &ours.to_bytes(), mode)? {
            Some(version) => Ok(LeaseOutcome::Acquired(version)),
            // Another builder took it between the read and the write, or
            // this write applied and was answered "exists" (S3 after a
            // conditional PUT the client retried on a 5xx the first
            // attempt had applied): the lease as stored says which.
            None => {
                let stored = match self.storage.get_if_changed(&key, None)? {
                    Conditional::Value { bytes, version } => {
                        Lease::parse(&bytes).map(|lease| (lease, version))
                    }
                    Conditional::Missing | Conditional::NotModified => None,
                };
                match stored {
                    Some((lease, version)) if lease == ours => Ok(LeaseOutcome::Acquired(version)),
                    Some((lease, _)) => Ok(LeaseOutcome::HeldBy(lease)),
                    None => Ok(LeaseOutcome::HeldBy(Lease {
                        holder: "another builder".to_owned(),
                        expires_at: until,
                    })),
                }
            }
        }
    }

    /// The lease as stored, `None` when there is none or it is not one.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] or [`Error::Store`] when it cannot be read.
    pub fn lease(&self) -> Result<Option<Lease>, Error> {
        Ok(self
            .storage
            .get(&self.key("lease"))?
            .and_then(|b| Lease::parse(&b)))
    }

    /// Gives the lease up (if it is still at `version`), so the next
    /// builder need not wait for it to expire.
    pub fn release_lease(&self, holder: &str, version: Version) {
        let released = Lease {
            holder: holder.to_owned(),
            expires_at: 0,
        };
        let _ = self
            .storage
            .put(&self.key("lease"), &released.to_bytes(), PutMode::Update(version));
    }

    /// The newest version of the older layout that verifies under `key`.
    fn load_latest_legacy(&self, keys: &[TrustedKey]) -> Option<StoredVersion> {
        let listed = self.storage.list(&self.prefix).ok()?;
        let mut versions: Vec<u64> = (listed.iter())
            .filter_map(|k| k.rsplit('/').next()?.strip_suffix(".snapshot")?.parse().ok())
            .collect();
        versions.sort_unstable_by(|a, b| b.cmp(a));
        // The newest `keep`, for the versioned route (generation 0: none).
        for &version in versions.iter().take(self.keep) {
            self.remember(version, 0, self.key(&format!("{version:020}.snapshot")), None);
        }
        for version in versions {
            let snapshot_key = self.key(&format!("{version:020}.snapshot"));
            let hashes_key = self.key(&format!("{version:020}.hashes"));
            let loaded = (|| {
                let snapshot =
                    (self.storage.get(&snapshot_key)?).ok_or_else(|| self.missing(&snapshot_key))?;
                let raw = (self.storage.get(&hashes_key)?).ok_or_else(|| self.missing(&hashes_key))?;
                let hashes = self.verify(&snapshot, &snapshot_key, &raw, &hashes_key, version, keys)?;
                Ok::<_, Error>(StoredVersion {
                    snapshot,
                    hashes,
                    deltas: Chain::default(),
                    generation: None,
                })
            })();
            match loaded {
                Ok(stored) => return Some(stored),
                Err(e) => {
                    tracing::warn!(list = %self.name, version, error = %e, "skipping unreadable snapshot")
                }
            }
        }
        None
    }
}

/// Whether `e` says a generation itself is bad (it does not verify, or an
/// object it names is gone), not that the store could not answer now.
pub(crate) fn is_definitive(e: &Error) -> bool {
    match e {
        Error::Corrupt { .. } => true,
        Error::Storage { .. } => is_missing(e),
        _ => false,
    }
}

/// Whether `e` says an object (a manifest, or one it names) is not there.
pub(crate) fn is_missing(e: &Error) -> bool {
    matches!(e, Error::Storage { reason, .. } if reason.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests;
