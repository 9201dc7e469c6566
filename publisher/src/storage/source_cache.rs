//! A source's last good content and its metadata ([`SourceCache`]): the
//! content as stored (as received, compressed or plain, or zstd), under a key
//! named by its SHA-256, and a metadata file naming it; read back a range at
//! a time ([`CacheReader`]).

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Conditional, PutMode, Staged, Storage, Version};
use crate::config::SourceConfig;
use crate::error::Error;
use crate::fetch::{ContentEncoding, Validators};

/// Metadata stored next to a source's last good content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheMeta {
    /// Validators for the next conditional GET.
    pub validators: Validators,
    /// When the content was fetched, Unix seconds.
    pub fetched_at: u64,
    /// Entries the content yielded when it was accepted; after fresh
    /// content that could not be stored, the entries that content gave
    /// ([`SourceCache::store_accepted`]): the per-source `max_shrink`
    /// gate's baseline.
    pub accepted: u64,
}

/// What is stored as a source's metadata: [`CacheMeta`] and which content
/// object it describes.
///
/// Plain content is named by `data` and `sha256`, as every version writes
/// and reads it. Compressed content is named by `encoded_data` and
/// `encoded_sha256` instead, fields that versions before compressed copies
/// do not know: such a version finds no content (its `data` is absent, and
/// the fixed `.data` key of older metadata is removed) and fetches anew,
/// rather than read gzip or zstd bytes as feed lines. Nor can it then
/// rewrite this metadata after a `304`, dropping `encoding`: without
/// content it sends no validators.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredMeta {
    #[serde(flatten)]
    meta: CacheMeta,
    /// The key of plain content (`None`: compressed content, named by
    /// `encoded_data`; or metadata written before content keys named their
    /// hash, at the source's fixed `.data` key).
    #[serde(default)]
    data: Option<String>,
    /// The plain content's SHA-256, hex (`None` as for `data`).
    #[serde(default)]
    sha256: Option<String>,
    /// The key of compressed content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    encoded_data: Option<String>,
    /// The compressed content's SHA-256, hex (of the bytes as stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    encoded_sha256: Option<String>,
    /// How the content named by `encoded_data` is encoded (plain content
    /// is `identity`, left out).
    #[serde(default, skip_serializing_if = "is_identity")]
    encoding: ContentEncoding,
    /// The version of a build about to publish (or published) from newer
    /// content of this source than the content stored, when that content
    /// is not (yet) stored ([`SourceCache::mark_behind`]): the stored copy
    /// is then no fallback, since it lacks entries a published snapshot
    /// holds. Cleared when newer content is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    behind: Option<u64>,
    /// Metadata of no content: only the count of entries a source's fresh
    /// content gave when its first copy could not be stored
    /// ([`SourceCache::store_accepted`]), the per-source `max_shrink`
    /// gate's baseline ([`SourceCache::baseline`]); no fallback, no
    /// validators. (An earlier version reads it as metadata whose content
    /// is gone: none.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    no_content: bool,
}

impl StoredMeta {
    /// The content's key, expected SHA-256 and encoding.
    fn content(&self, legacy_key: impl FnOnce() -> String) -> (String, Option<&String>, ContentEncoding) {
        match &self.encoded_data {
            Some(key) => (key.clone(), self.encoded_sha256.as_ref(), self.encoding),
            None => (
                self.data.clone().unwrap_or_else(legacy_key),
                self.sha256.as_ref(),
                ContentEncoding::Identity,
            ),
        }
    }
}

fn is_identity(encoding: &ContentEncoding) -> bool {
    *encoding == ContentEncoding::Identity
}

/// One source's last good content and its metadata.
///
/// A source is known by what it reads, not by its place in the list: its
/// label (path or URL) and how it is read (format, CSV column and
/// delimiter, JSON keys),
/// so that sources inserted, removed or reordered keep their last good
/// content (keyed by position, a source that shifted lost it, and with it
/// its fallback and its `max_shrink` baseline). Copies kept under the
/// position-based keys of earlier versions (`<i>-<label>`) are read when a
/// source has none of its own: the one at the source's index, else the
/// only one of its label; the first copy stored under the new key removes
/// it.
///
/// The content is stored under a key named by its SHA-256
/// (`<label>-<reading>.<first 16 hex digits>.data`), then the metadata, which
/// names that key and carries the fetch's validators. Metadata and content
/// therefore always agree, even when two builders store the same source at
/// once: whichever metadata is written last names its own content. Content
/// objects no metadata names are removed after each store. Metadata whose
/// content is gone counts as none, so the next fetch is unconditional: a
/// `304 Not Modified` is never answered to validators whose content is not
/// the one kept.
#[derive(Debug, Clone)]
pub struct SourceCache {
    storage: Arc<dyn Storage>,
    /// `sources/<dir>`.
    dir: String,
    /// `<label>-<reading>`: the start of every key of this source.
    stem: String,
    /// The source's place in its list, and its label's hash: what keys of
    /// earlier versions started with (`<i>-<label>`).
    index: usize,
    label: String,
}

impl SourceCache {
    /// The last good content of source `index` of list `list`.
    pub fn source(storage: Arc<dyn Storage>, list: &str, index: usize, source: &SourceConfig) -> Self {
        Self::new(storage, list, index, source)
    }

    /// The last good content of allowlist `index` of list `list`: in a
    /// directory of its own, `sources/<list>.allow/`.
    pub fn allow(storage: Arc<dyn Storage>, list: &str, index: usize, source: &SourceConfig) -> Self {
        Self::new(storage, &format!("{list}.allow"), index, source)
    }

    /// Keyed by the source's label and reading, so a reconfigured source
    /// never reads another's content, and a source keeps its own wherever
    /// it moves in the list.
    fn new(storage: Arc<dyn Storage>, dir: &str, index: usize, source: &SourceConfig) -> Self {
        use sha2::Digest as _;
        let label = hex::encode(&sha2::Sha256::digest(source.label().as_bytes())[..8]);
        let mut reading = format!(
            "{}\n{}\n{}\n{}",
            source.format.name(),
            source.column.as_deref().unwrap_or(""),
            source.json_key.as_deref().unwrap_or(""),
            source.json_allow_key.as_deref().unwrap_or("")
        );
        // A CSV delimiter other than the default, added only when set: the
        // keys of sources read with commas stay what they were.
        if let Some(d) = source.delimiter_byte().filter(|&d| d != b',') {
            reading.push_str(&format!("\n{d}"));
        }
        let reading = hex::encode(&sha2::Sha256::digest(reading.as_bytes())[..4]);
        Self {
            storage,
            dir: format!("sources/{dir}"),
            stem: format!("{label}-{reading}"),
            index,
            label,
        }
    }

    /// The stem of this source's keys (tests).
    #[cfg(test)]
    pub(crate) fn meta_stem_for_test(&self) -> String {
        self.stem.clone()
    }

    fn meta_key(&self) -> String {
        format!("{}/{}.meta.json", self.dir, self.stem)
    }

    /// The stored metadata, the stem of the keys it was read under (this
    /// source's own, else a copy an earlier version kept by position,
    /// [`SourceCache::legacy_stem`]), and the version of this source's own
    /// metadata as read (`None` when there is none): a change of it is
    /// written only over that version ([`SourceCache::update_meta`]).
    fn stored_meta(&self) -> Option<(StoredMeta, String, Option<Version>)> {
        let key = self.meta_key();
        // Unreadable metadata is no last good content and no `max_shrink`
        // baseline for the source: said in the log, not passed over.
        let read = self.storage.get_if_changed(&key, None).inspect_err(|e| {
            tracing::warn!(key = %key, error = %e, "could not read a source's last good metadata; the source has no fallback and no max_shrink baseline this build");
        });
        match read.ok()? {
            Conditional::Value { bytes, version } => {
                let stored = serde_json::from_slice(&bytes).inspect_err(|e| {
                    tracing::warn!(key = %key, error = %e, "a source's last good metadata is not valid; the source has no fallback and no max_shrink baseline until a build stores new content (remove the file to silence this)");
                });
                return Some((stored.ok()?, self.stem.clone(), Some(version)));
            }
            Conditional::Missing | Conditional::NotModified => {}
        }
        let legacy = self.legacy_stem(&self.storage.list(&self.dir).ok()?)?;
        let key = format!("{}/{legacy}.meta.json", self.dir);
        let stored = serde_json::from_slice(&self.storage.get(&key).ok()??).ok()?;
        Some((stored, legacy, None))
    }

    /// Among `keys` (this directory's), the stem of the position-based
    /// metadata an earlier version kept for this source (`<i>-<label>`):
    /// the one at this source's index, else the only one of its label
    /// (several, at other places, cannot be told apart: none).
    fn legacy_stem(&self, keys: &[String]) -> Option<String> {
        let prefix = format!("{}/", self.dir);
        let label = format!("-{}", self.label);
        let found: Vec<&str> = keys
            .iter()
            .filter_map(|key| key.strip_prefix(&prefix)?.strip_suffix(".meta.json"))
            .filter(|stem| {
                stem.strip_suffix(&label)
                    .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect();
        let own = format!("{}{label}", self.index);
        if found.contains(&own.as_str()) {
            return Some(own);
        }
        match found.as_slice() {
            [only] => Some((*only).to_owned()),
            _ => None,
        }
    }

    /// The stored metadata and the key of the content it names, if that
    /// content is still stored.
    fn described(&self) -> Option<(StoredMeta, String)> {
        self.described_at().map(|(stored, data, _)| (stored, data))
    }

    /// [`SourceCache::described`], with the version of the metadata read.
    fn described_at(&self) -> Option<(StoredMeta, String, Option<Version>)> {
        let (stored, stem, version) = self.stored_meta()?;
        if stored.no_content {
            return None;
        }
        let (data, _, _) = stored.content(|| format!("{}/{stem}.data", self.dir));
        self.storage.version(&data).ok()??;
        Some((stored, data, version))
    }

    /// The cached content, decoded, and its metadata, if any (and if the
    /// content is the one the metadata describes). The build reads
    /// [`SourceCache::open_encoded`] instead, decoding as it parses.
    pub fn load(&self) -> Option<(Vec<u8>, CacheMeta)> {
        use std::io::Read as _;
        let (bytes, encoding, meta) = self.load_encoded()?;
        let mut decoded = Vec::new();
        crate::fetch::decoder(bytes.as_slice(), encoding)
            .and_then(|mut reader| reader.read_to_end(&mut decoded))
            .ok()
            .map(|_| (decoded, meta))
    }

    /// The cached content as stored, read as it is parsed, 4 MiB at a time
    /// (never whole in memory), how it is encoded,
    /// and its metadata, if any. The reader checks the content against the
    /// SHA-256 its metadata names when it reaches the end: content that
    /// does not match fails the read there, with
    /// [`std::io::ErrorKind::InvalidData`], and the build drops what it
    /// parsed of it. A build that falls back to its last good content (a
    /// `304 Not Modified` every build while a feed stands still) so holds
    /// no more of it than the parse's blocks.
    pub fn open_encoded(&self) -> Option<(Box<dyn std::io::Read + Send>, ContentEncoding, CacheMeta)> {
        let (stored, data) = self.described()?;
        let (_, expected, encoding) = stored.content(String::new);
        if let Some(version) = stored.behind {
            // Read, it fails: the build reports the copy unusable.
            let reason = format!(
                "older than the content version {version} was built from (that content's copy was not kept): \
                 a fallback to it would drop published entries"
            );
            let reader: Box<dyn std::io::Read + Send> = Box::new(Unusable(Some(reason)));
            return Some((reader, encoding, stored.meta));
        }
        let reader = RangeReader {
            storage: self.storage.clone(),
            key: data.clone(),
            offset: 0,
            range: Vec::new(),
            at: 0,
            ended: false,
        };
        let reader: Box<dyn std::io::Read + Send> = match expected {
            Some(expected) => Box::new(Checked {
                inner: reader,
                sha256: <sha2::Sha256 as sha2::Digest>::new(),
                expected: expected.clone(),
                key: data,
                mismatch: None,
            }),
            None => Box::new(reader),
        };
        Some((reader, encoding, stored.meta))
    }

    /// The cached content as stored, how it is encoded, and its metadata,
    /// if any (and if the content is the one the metadata describes).
    pub fn load_encoded(&self) -> Option<(Vec<u8>, ContentEncoding, CacheMeta)> {
        use sha2::Digest as _;
        let (stored, data) = self.described()?;
        let bytes = self.storage.get(&data).ok()??;
        let (_, expected, encoding) = stored.content(String::new);
        if let Some(expected) = expected
            && hex::encode(sha2::Sha256::digest(&bytes)) != *expected
        {
            tracing::warn!(key = %data, "cached source content does not match its metadata; ignored");
            return None;
        }
        Some((bytes, encoding, stored.meta))
    }

    /// Only the metadata (cheap: for validators and the collapse check),
    /// if the content it describes is stored.
    pub fn meta(&self) -> Option<CacheMeta> {
        self.described().map(|(stored, _)| stored.meta)
    }

    /// The per-source `max_shrink` gate's baseline: the entries the
    /// source's last accepted content gave, as its metadata records them,
    /// also when that content is not stored (its copy could not be, or is
    /// gone): a source's baseline is not lost with its copy.
    pub fn baseline(&self) -> Option<u64> {
        self.stored_meta().map(|(stored, ..)| stored.meta.accepted)
    }

    /// How the cached content is stored, if there is content.
    pub fn encoding(&self) -> Option<ContentEncoding> {
        self.described().map(|(stored, _)| stored.content(String::new).2)
    }

    /// Bytes `range` of the cached content as stored (fewer at its end), if
    /// any.
    pub fn read_range(&self, range: Range<u64>) -> Option<Vec<u8>> {
        let (_, data) = self.described()?;
        self.storage.get_range(&data, range).ok()?
    }

    /// Stores good plain content; see [`SourceCache::store_encoded`].
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when writing fails.
    pub fn store(&self, bytes: &[u8], meta: &CacheMeta) -> Result<(), Error> {
        self.store_encoded(bytes, ContentEncoding::Identity, meta)
    }

    /// Stores good content, `bytes` encoded as `encoding`: the content,
    /// then metadata naming it (and its encoding), then removes this
    /// source's content objects the metadata does not name.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when writing fails.
    pub fn store_encoded(
        &self,
        bytes: &[u8],
        encoding: ContentEncoding,
        meta: &CacheMeta,
    ) -> Result<(), Error> {
        use sha2::Digest as _;
        let sha256 = hex::encode(sha2::Sha256::digest(bytes));
        let data = self.data_key(&sha256);
        self.storage.put(&data, bytes, PutMode::Overwrite)?;
        self.stored(data, sha256, encoding, meta)
    }

    /// A copy of this source's content to be written as it is read and
    /// kept by [`SourceCache::store_staged`] ([`Storage::stage`]).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when the storage cannot stage a value.
    pub fn stage(&self) -> Result<Staged, Error> {
        self.storage.stage(&self.dir)
    }

    /// Stores good content written into `staged` (from
    /// [`SourceCache::stage`]), encoded as `encoding`; see
    /// [`SourceCache::store_encoded`].
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when committing or writing fails.
    pub fn store_staged(
        &self,
        staged: Staged,
        encoding: ContentEncoding,
        meta: &CacheMeta,
    ) -> Result<(), Error> {
        let sha256 = staged.sha256_hex();
        let data = self.data_key(&sha256);
        self.storage.commit(&data, staged)?;
        self.stored(data, sha256, encoding, meta)
    }

    /// The key of content whose SHA-256 is `sha256` (hex).
    fn data_key(&self, sha256: &str) -> String {
        format!("{}/{}.{}.data", self.dir, self.stem, &sha256[..16])
    }

    /// Content stored under `data`: the metadata naming it, then this
    /// source's other content objects removed.
    fn stored(
        &self,
        data: String,
        sha256: String,
        encoding: ContentEncoding,
        meta: &CacheMeta,
    ) -> Result<(), Error> {
        let plain = encoding == ContentEncoding::Identity;
        // The newest copy stored wins, whatever was there.
        self.write_meta(
            &StoredMeta {
                meta: meta.clone(),
                data: plain.then(|| data.clone()),
                sha256: plain.then(|| sha256.clone()),
                encoded_data: (!plain).then(|| data.clone()),
                encoded_sha256: (!plain).then_some(sha256),
                encoding,
                behind: None,
                no_content: false,
            },
            PutMode::Overwrite,
        )?;
        let own = format!("{}/{}.", self.dir, self.stem);
        if let Ok(keys) = self.storage.list(&self.dir) {
            // A copy an earlier version kept by position, now replaced.
            let legacy = self
                .legacy_stem(&keys)
                .map(|stem| format!("{}/{stem}.", self.dir));
            for key in &keys {
                let replaced = key.starts_with(&own) && key.ends_with(".data") && *key != data;
                let legacy = legacy.as_ref().is_some_and(|l| key.starts_with(l));
                if replaced || legacy {
                    let _ = self.storage.delete(key);
                }
            }
        }
        Ok(())
    }

    /// Updates only the metadata (after a 304), still naming the content
    /// stored.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when writing fails.
    pub fn store_meta(&self, meta: &CacheMeta) -> Result<(), Error> {
        let Some((stored, _, version)) = self.described_at() else {
            // Nothing to describe: without content, validators would only
            // bring another 304.
            return Ok(());
        };
        let stored = StoredMeta {
            meta: meta.clone(),
            ..stored
        };
        self.update_meta(&stored, version, "the metadata of a 304")
    }

    /// Marks the stored copy as older than the content build `version` is
    /// about to publish from this source: written before that build
    /// publishes, cleared when the newer content is stored after it
    /// ([`SourceCache::store_staged`]). A build killed in between, or whose
    /// copy cannot be stored, so leaves a copy that is no fallback: a later
    /// build with the source down fails (the published snapshot serves on)
    /// rather than publish without the entries the newer content held. The
    /// validators are dropped as well: the next fetch asks for the content
    /// whole.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when writing fails.
    pub fn mark_behind(&self, version: u64) -> Result<(), Error> {
        let Some((stored, _, read_at)) = self.described_at() else {
            // No copy, no fallback to guard.
            return Ok(());
        };
        let meta = CacheMeta {
            validators: crate::fetch::Validators::default(),
            ..stored.meta.clone()
        };
        let stored = StoredMeta {
            meta,
            behind: Some(version),
            ..stored
        };
        self.update_meta(&stored, read_at, "the mark of an older copy")
    }

    /// Records `accepted` as the entries the source's fresh content gave
    /// (the per-source `max_shrink` gate's baseline, as a stored copy's
    /// count is) when that content could not be stored. The content stored
    /// and when it was fetched stay; its validators are dropped: the
    /// content last used is no longer the one stored, so a feed back at
    /// the stored content must not answer `304` (which would take the
    /// stored content, unmeasured, with this count as its baseline), but
    /// send it whole, to be measured against this count.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when writing fails.
    pub fn store_accepted(&self, accepted: u64) -> Result<(), Error> {
        // Without content (its first copy could not be stored, or the copy
        // is gone) the count is recorded all the same: it is the gate's
        // baseline, which a source without one would not have, and its
        // next emptied content would pass unmeasured.
        let (stored, version) = match self.described_at() {
            Some((stored, _, version)) => (stored, version),
            None => match self.stored_meta() {
                Some((stored, _, version)) => (stored, version),
                None => (
                    StoredMeta {
                        meta: CacheMeta::default(),
                        data: None,
                        sha256: None,
                        encoded_data: None,
                        encoded_sha256: None,
                        encoding: ContentEncoding::Identity,
                        behind: None,
                        no_content: true,
                    },
                    None,
                ),
            },
        };
        let meta = CacheMeta {
            accepted,
            validators: crate::fetch::Validators::default(),
            ..stored.meta.clone()
        };
        self.update_meta(&StoredMeta { meta, ..stored }, version, "the count of entries")
    }

    /// Writes `stored`, a change of the metadata read at `version` (`None`:
    /// there was none under this source's own key), only if it is still
    /// there: on an object store several builders share, another one may
    /// have stored a newer copy meanwhile, and the metadata naming it (its
    /// content, its validators) is kept, not replaced by a change of what it
    /// replaced (which would name content that copy's store removed, and
    /// lose the last good content a later outage falls back to). `what`
    /// names the change for the log when it is dropped so.
    fn update_meta(&self, stored: &StoredMeta, version: Option<Version>, what: &str) -> Result<(), Error> {
        let mode = version.map_or(PutMode::Create, PutMode::Update);
        if !self.write_meta(stored, mode)? {
            tracing::info!(
                key = %self.meta_key(),
                "{what} not written: the source's metadata changed since it was read (another builder stored a copy)"
            );
        }
        Ok(())
    }

    /// Writes the metadata in `mode`; whether `mode`'s condition held.
    fn write_meta(&self, stored: &StoredMeta, mode: PutMode) -> Result<bool, Error> {
        let json = serde_json::to_vec_pretty(stored).map_err(|e| Error::Storage {
            path: self.storage.location(&self.meta_key()),
            reason: std::io::Error::other(e),
        })?;
        Ok(self.storage.put(&self.meta_key(), &json, mode)?.is_some())
    }
}

/// Reads a source's cached content as stored, a range at a time (never
/// whole in memory). A read after the content is gone or replaced fails.
pub struct CacheReader<'a> {
    cache: &'a SourceCache,
    offset: u64,
}

impl<'a> CacheReader<'a> {
    /// From the start of `cache`'s content.
    pub fn new(cache: &'a SourceCache) -> Self {
        Self { cache, offset: 0 }
    }
}

impl std::io::Read for CacheReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        const RANGE_BYTES: u64 = 1 << 20;
        let want = (buf.len() as u64).min(RANGE_BYTES);
        let range = self.cache.read_range(self.offset..self.offset + want);
        let bytes = range.ok_or_else(|| std::io::Error::other("cached source content is gone"))?;
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        self.offset += n as u64;
        Ok(n)
    }
}

/// Why a stored copy could not be read as it streamed: it is gone, it
/// could not be read, or it does not match its metadata (the error inside
/// the [`std::io::Error`] that [`SourceCache::open_encoded`]'s reader
/// returns, for callers to tell it from a decoder's).
#[derive(Debug)]
pub struct StoredCopyError(pub String);

impl std::fmt::Display for StoredCopyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoredCopyError {}

impl StoredCopyError {
    fn io(kind: std::io::ErrorKind, reason: String) -> std::io::Error {
        std::io::Error::new(kind, Self(reason))
    }
}

/// Reads one stored content object [`RangeReader::RANGE_BYTES`] at a
/// time. Content is stored under a key named by its SHA-256, so content
/// replaced while it is read is gone: the read fails.
struct RangeReader {
    storage: Arc<dyn Storage>,
    key: String,
    /// Where the next range starts.
    offset: u64,
    /// The last range read, and how much of it was given.
    range: Vec<u8>,
    at: usize,
    /// Whether the end was read (an empty range): no request after it.
    ended: bool,
}

impl RangeReader {
    /// Bytes per request: few requests to an object store, little memory.
    const RANGE_BYTES: u64 = 4 << 20;
}

impl std::io::Read for RangeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.range.len() && !buf.is_empty() && !self.ended {
            let range = self.offset..self.offset + Self::RANGE_BYTES;
            self.range = match self.storage.get_range(&self.key, range) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => {
                    let reason = format!("cached source content {} is gone", self.key);
                    return Err(StoredCopyError::io(std::io::ErrorKind::NotFound, reason));
                }
                Err(e) => return Err(StoredCopyError::io(std::io::ErrorKind::Other, e.to_string())),
            };
            self.at = 0;
            self.offset += self.range.len() as u64;
            self.ended = self.range.is_empty();
        }
        let rest = self.range.get(self.at..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        Ok(n)
    }
}

/// A reader of cached content that checks it against the SHA-256 its
/// metadata names once it has read it all ([`SourceCache::open_encoded`]).
struct Checked<R> {
    inner: R,
    sha256: sha2::Sha256,
    /// The SHA-256 the metadata names, in hex.
    expected: String,
    /// The content's key, for the error.
    key: String,
    /// Why the content was refused, once it was.
    mismatch: Option<String>,
}

impl<R: std::io::Read> std::io::Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use sha2::Digest as _;
        if let Some(reason) = &self.mismatch {
            return Err(StoredCopyError::io(
                std::io::ErrorKind::InvalidData,
                reason.clone(),
            ));
        }
        let n = self.inner.read(buf)?;
        if n > 0 || buf.is_empty() {
            self.sha256.update(&buf[..n]);
            return Ok(n);
        }
        let actual = hex::encode(self.sha256.clone().finalize());
        if actual != self.expected {
            let reason = format!(
                "cached source content {} does not match its metadata: SHA-256 {actual}, the metadata names {}",
                self.key, self.expected
            );
            tracing::warn!(key = %self.key, %reason, "cached source content refused");
            self.mismatch = Some(reason.clone());
            return Err(StoredCopyError::io(std::io::ErrorKind::InvalidData, reason));
        }
        Ok(0)
    }
}

/// A reader that fails with its reason at the first read: a stored copy
/// that is there but is no fallback ([`SourceCache::mark_behind`]).
struct Unusable(Option<String>);

impl std::io::Read for Unusable {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(std::io::Error::other(
            self.0.take().unwrap_or_else(|| "not usable".to_owned()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{LocalStorage, testing};

    fn meta_with(etag: &str) -> CacheMeta {
        CacheMeta {
            validators: crate::fetch::Validators {
                etag: Some(etag.to_owned()),
                last_modified: None,
                date: None,
            },
            fetched_at: 1,
            accepted: 1,
        }
    }

    /// A source read with another CSV delimiter is another reading (its
    /// last good content was good under the old one); the default written
    /// out, or none, keeps the key sources read with commas always had.
    #[test]
    fn a_csv_delimiter_other_than_a_comma_is_part_of_the_reading() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let with = |delimiter: Option<&str>| {
            let source = SourceConfig {
                delimiter: delimiter.map(str::to_owned),
                ..SourceConfig::file("feed.csv", crate::config::SourceFormat::Csv)
            };
            SourceCache::source(storage.clone(), "phishing", 0, &source).stem
        };
        assert_eq!(with(None), with(Some(",")));
        assert_ne!(with(None), with(Some(";")));
        assert_ne!(with(Some("\t")), with(Some(";")));
        // Sources read with commas keep the keys of earlier versions:
        // the reading is the format, column and JSON keys alone.
        use sha2::Digest as _;
        let reading = hex::encode(&sha2::Sha256::digest(b"csv\n\n\n")[..4]);
        assert!(with(None).ends_with(&format!("-{reading}")), "{}", with(None));
    }

    /// A source's request headers are not what it reads: a rotated API
    /// key (another value, or another variable) keeps the source's last
    /// good content, as does adding or removing a header.
    #[test]
    fn a_sources_headers_are_not_part_of_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let with = |headers: &[(&str, crate::HeaderValueConfig)]| {
            let mut source =
                SourceConfig::http("https://feed.example/u.txt", crate::config::SourceFormat::Urls);
            for (name, value) in headers {
                source.headers.insert((*name).to_owned(), value.clone());
            }
            SourceCache::source(storage.clone(), "phishing", 0, &source)
        };
        let first = with(&[("Auth-Key", crate::HeaderValueConfig::literal("old-key"))]);
        first.store(b"http://a.example/\n", &meta_with("\"v1\"")).unwrap();
        for headers in [
            vec![("Auth-Key", crate::HeaderValueConfig::literal("rotated-key"))],
            vec![("Auth-Key", crate::HeaderValueConfig::env("NEW_KEY_VARIABLE"))],
            vec![],
        ] {
            let rotated = with(&headers);
            assert_eq!(rotated.stem, first.stem);
            let (bytes, meta) = rotated.load().expect("the last good content is kept");
            assert_eq!(bytes, b"http://a.example/\n");
            assert_eq!(meta.validators.etag.as_deref(), Some("\"v1\""));
        }
    }

    /// Two builders store one source at once: the content kept and the
    /// validators kept always belong together. Content of one fetch under
    /// the other's validators would let a `304` keep old content as new, and
    /// additions in between would never be listed.
    #[test]
    fn regression_two_builders_storing_one_source_never_pair_content_with_the_others_validators() {
        let dir = tempfile::tempdir().unwrap();
        let source = SourceConfig::file("feed.txt", crate::config::SourceFormat::Urls);
        let local = LocalStorage::open(dir.path()).unwrap();
        let other = SourceCache::source(Arc::new(local.clone()), "phishing", 0, &source);
        // A second builder stores the same source just before this one's
        // metadata write.
        let racing = Arc::new(testing::Intercepted::over(local).once_before_put(
            |key| key.ends_with(".meta.json"),
            move || {
                other.store(b"newer content\n", &meta_with("\"new\"")).unwrap();
            },
        ));
        let cache = SourceCache::source(racing, "phishing", 0, &source);
        cache.store(b"older content\n", &meta_with("\"old\"")).unwrap();
        match cache.load() {
            None => {}
            Some((bytes, meta)) => {
                let etag = meta.validators.etag.unwrap();
                let pair = (bytes.as_slice(), etag.as_str());
                assert!(
                    pair == (b"older content\n", "\"old\"") || pair == (b"newer content\n", "\"new\""),
                    "content {:?} kept with validators {etag}",
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
        // Validators are offered only with the content they describe.
        assert_eq!(cache.meta().is_some(), cache.load().is_some());
    }

    #[test]
    fn a_streamed_copy_reads_whole_across_its_ranges_and_fails_once_gone() {
        use std::io::Read as _;
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let source = SourceConfig::file("feed.txt", crate::config::SourceFormat::Urls);
        let cache = SourceCache::source(storage.clone(), "phishing", 0, &source);
        // Two whole ranges and part of a third, in reads that straddle them.
        let content: Vec<u8> = (0..(2 * RangeReader::RANGE_BYTES + 12_345))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        cache.store(&content, &meta_with("a")).unwrap();
        let (mut reader, _, _) = cache.open_encoded().unwrap();
        let mut out = Vec::new();
        let mut buf = vec![0u8; 100_003];
        loop {
            match reader.read(&mut buf).unwrap() {
                0 => break,
                n => out.extend_from_slice(&buf[..n]),
            }
        }
        assert!(out == content, "{} bytes read of {}", out.len(), content.len());
        // Removed while read: the next range fails, it does not end early.
        let (mut reader, _, _) = cache.open_encoded().unwrap();
        reader.read_exact(&mut buf).unwrap();
        let data: Vec<String> = (storage.list("sources/phishing").unwrap().into_iter())
            .filter(|k| k.ends_with(".data"))
            .collect();
        storage.delete(&data[0]).unwrap();
        let e = reader.read_to_end(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("is gone"), "{e}");
    }

    #[test]
    fn a_source_cache_keeps_content_with_its_metadata_and_refuses_what_does_not_match() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let source = SourceConfig::file("feed.txt", crate::config::SourceFormat::Urls);
        let cache = SourceCache::source(storage.clone(), "phishing", 0, &source);
        assert!(cache.meta().is_none() && cache.load().is_none());
        cache.store(b"one\n", &meta_with("a")).unwrap();
        cache.store(b"two\n", &meta_with("b")).unwrap();
        let (bytes, meta) = cache.load().unwrap();
        assert_eq!(
            (bytes.as_slice(), meta.validators.etag.as_deref()),
            (&b"two\n"[..], Some("b"))
        );
        assert_eq!(cache.read_range(1..3).unwrap(), b"wo");
        // One content object: the older one was removed.
        let data: Vec<String> = (storage.list("sources/phishing").unwrap().into_iter())
            .filter(|k| k.ends_with(".data"))
            .collect();
        assert_eq!(data.len(), 1, "{data:?}");
        // A 304 updates the metadata and keeps the content.
        cache.store_meta(&meta_with("c")).unwrap();
        let (bytes, meta) = cache.load().unwrap();
        assert_eq!(
            (bytes.as_slice(), meta.validators.etag.as_deref()),
            (&b"two\n"[..], Some("c"))
        );
        // Read as it streams, the same content.
        let streamed = |cache: &SourceCache| {
            let (mut reader, encoding, _) = cache.open_encoded().unwrap();
            assert_eq!(encoding, ContentEncoding::Identity);
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut reader, &mut out).map(|_| out)
        };
        assert_eq!(streamed(&cache).unwrap(), b"two\n");
        // Changed content is refused (streamed: at its end, the bytes read
        // so far given, and the build drops them); gone content takes its
        // validators along.
        storage.put(&data[0], b"tampered\n", PutMode::Overwrite).unwrap();
        assert!(cache.load().is_none());
        let e = streamed(&cache).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("does not match its metadata"), "{e}");
        storage.delete(&data[0]).unwrap();
        assert!(cache.meta().is_none(), "validators without content");
        // Metadata of the older form (no content key) still reads its `.data`.
        let meta_key = cache.meta_key();
        let legacy = format!("{}/{}.data", cache.dir, cache.stem);
        storage.put(&legacy, b"legacy\n", PutMode::Overwrite).unwrap();
        let old = serde_json::to_vec(&meta_with("d")).unwrap();
        storage.put(&meta_key, &old, PutMode::Overwrite).unwrap();
        assert_eq!(cache.load().unwrap().0, b"legacy\n");
    }

    #[test]
    fn a_compressed_copy_says_its_encoding_and_a_plain_copy_of_an_earlier_version_reads_as_plain() {
        use std::io::Read as _;
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let source = SourceConfig::file("feed.txt", crate::config::SourceFormat::Urls);
        let cache = SourceCache::source(storage.clone(), "phishing", 0, &source);
        let text: Vec<u8> = (0..300_000)
            .flat_map(|i| format!("http://a.example/{i}\n").into_bytes())
            .collect();
        let zstd = zstd::stream::encode_all(text.as_slice(), 1).unwrap();
        cache
            .store_encoded(&zstd, ContentEncoding::Zstd, &meta_with("z"))
            .unwrap();
        assert_eq!(cache.encoding(), Some(ContentEncoding::Zstd));
        let (stored, encoding, meta) = cache.load_encoded().unwrap();
        assert_eq!(
            (stored == zstd, encoding, meta.validators.etag.as_deref()),
            (true, ContentEncoding::Zstd, Some("z"))
        );
        // Decoded for callers of `load`; read range by range as stored.
        assert!(cache.load().unwrap().0 == text);
        let mut read = Vec::new();
        CacheReader::new(&cache).read_to_end(&mut read).unwrap();
        assert!(read == zstd);
        // A 304 keeps the encoding with the content.
        cache.store_meta(&meta_with("y")).unwrap();
        assert_eq!(cache.encoding(), Some(ContentEncoding::Zstd));
        // A version before compressed copies reads `data` (else the fixed
        // `.data` key) and `sha256`: it must find no content, never read the
        // zstd bytes as lines (and publish the list without this source).
        let json: serde_json::Value =
            serde_json::from_slice(&storage.get(&cache.meta_key()).unwrap().unwrap()).unwrap();
        assert!(json["data"].is_null() && json["sha256"].is_null(), "{json}");
        let legacy = format!("{}/{}.data", cache.dir, cache.stem);
        assert!(storage.version(&legacy).unwrap().is_none());

        // Metadata as earlier versions wrote it: no `encoding`, plain text.
        cache.store(b"plain\n", &meta_with("p")).unwrap();
        let json = String::from_utf8(storage.get(&cache.meta_key()).unwrap().unwrap()).unwrap();
        assert!(!json.contains("encoding"), "{json}");
        assert_eq!(cache.encoding(), Some(ContentEncoding::Identity));
        assert_eq!(cache.load_encoded().unwrap().0, b"plain\n");
    }
}
