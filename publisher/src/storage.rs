//! Every artifact the publisher stores, and its layout: one module owns
//! them all behind a small key-value interface, [`Storage`], whose keys are
//! `/`-separated paths and whose values are bytes. [`LocalStorage`], the
//! data directory, is its one implementation:
//!
//! ```text
//! <data_dir>/signing.key                             Ed25519 secret key, base64, mode 0600
//! <data_dir>/public.key                              its public key, base64 (for agent configuration)
//! <data_dir>/lists/<name>/...                        its generations (see `generations`)
//! <data_dir>/sources/<list>/<label>-<reading>.<hash>.data  a source's last good content
//! <data_dir>/sources/<list>/<label>-<reading>.meta.json    its validators, fetch time, entry count and content key
//! <data_dir>/sources/<list>.allow/...                the same for the list's allowlists
//! <data_dir>/history/<list>.jsonl                    the list's last builds, a JSON line each (`history`)
//! <data_dir>/lock                                    held by the publisher using the directory
//! <data_dir>/builder-id                              a builder's id, for its lease on a store
//! ```
//!
//! `<label>` is the first
//! 8 bytes of the SHA-256 of the source's label (its path or URL), in hex,
//! and `<reading>` the first 4 of its format, CSV column and JSON keys', so
//! a reconfigured source never reads another's content and a source moved
//! in its list keeps its own (copies an earlier version kept as
//! `<i>-<label>`, by position, are read once and replaced); `<hash>` is the
//! first 16 hex digits of the content's SHA-256 ([`SourceCache`]). The signing key
//! may be configured elsewhere ([`load_or_create_signing_key`] takes its
//! path).
//!
//! One publisher at a time uses a data directory: two would race on
//! version numbers and remove each other's temporary files. It holds an
//! advisory lock on `lock` (the operating system's: `flock` on Unix,
//! `LockFileEx` on Windows) for as long as it is open; the lock goes with
//! the process, so a crash leaves no stale lock behind. The file holds the
//! holder's process id, for the error a second publisher gets (where the
//! system lets it read a locked file; the lock alone decides).
//!
//! Every file is written to a temporary file that is fsynced and renamed
//! into place (linked, for a create-only write), then the directory is
//! fsynced, so a crash leaves the old value or the new one whole;
//! temporary files left by a crash are removed on start. How a list's
//! generations are committed on top of that is
//! [`generations`](crate::generations)'s.
//!
//! [`Storage`] is shaped like an object store (put, get, list, delete,
//! create-if-absent and compare-and-swap on a version), and one stands in
//! for the data directory when the configuration names a `store`
//! ([`ObjectStorage`](crate::object_storage::ObjectStorage)): the same keys
//! under the store's prefix. The signing key and the lock stay in the data
//! directory.

use std::fs;
use std::io::{Read as _, Seek as _, Write as _};
use std::ops::Range;
use std::path::{Path, PathBuf};

use blocksieve_format::{SigningKey, TrustedKey};

use crate::error::Error;

mod direct;
pub mod history;
mod source_cache;
pub mod spill;
pub mod staged;

pub use source_cache::{CacheMeta, CacheReader, SourceCache, StoredCopyError};
pub use staged::Staged;

pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// Fills `buf` from `reader` as far as it goes (to its end or `buf`'s);
/// the bytes read. Interrupted reads are retried.
pub(crate) fn read_full(reader: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A stored value's version, for compare-and-swap ([`PutMode::Update`]): an
/// entity tag, as an object store gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(String);

impl Version {
    /// The version whose entity tag is `tag`.
    pub(crate) fn new(tag: String) -> Self {
        Self(tag)
    }

    /// Its entity tag.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// What [`Storage::put`] does when the key exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutMode {
    /// Replace the value.
    Overwrite,
    /// Store only if the key does not exist.
    Create,
    /// Store only if the value is still at this version.
    Update(Version),
}

/// What [`Storage::get_if_changed`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional {
    /// There is no value under the key.
    Missing,
    /// The value is still at the version the caller knows.
    NotModified,
    /// The value, and the version of exactly these bytes.
    Value {
        /// The value.
        bytes: Vec<u8>,
        /// Its version, for the next conditional read or a compare-and-swap.
        version: Version,
    },
}

/// Where the publisher keeps its artifacts: bytes under `/`-separated keys.
///
/// Every write is atomic: a reader sees the old value or the new one,
/// whole. Calls block: the publisher makes the large ones (a build's
/// writes, the served old versions) from its blocking pool. An object
/// store's client runs its requests to completion there (`put` with
/// [`PutMode::Create`] and [`PutMode::Update`] are `object_store`'s
/// `PutMode`s of the same names).
///
/// Conditional writes decide between concurrent writers: of several
/// writers creating one key ([`PutMode::Create`]) exactly one succeeds, on
/// every implementation. Of several writers updating one key from the same
/// version ([`PutMode::Update`]) exactly one succeeds on an object store,
/// which decides; the data directory compares and then renames, which is
/// safe only because one publisher at a time holds it ([`LocalStorage`]).
///
/// The errors below are those of the data directory; an object store
/// ([`ObjectStorage`](crate::object_storage::ObjectStorage)) answers
/// [`Error::Store`] instead.
pub trait Storage: std::fmt::Debug + Send + Sync {
    /// Makes keys under `prefix` ready to store and removes what an
    /// interrupted write left there (for a directory: creates it and
    /// removes its temporary files).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when that fails.
    fn prepare(&self, prefix: &str) -> Result<(), Error>;

    /// The value of `key`, `None` when there is none.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when it exists but cannot be read.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error>;

    /// The bytes `range` of `key`'s value (fewer at its end), `None` when
    /// there is none.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when it exists but cannot be read.
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Option<Vec<u8>>, Error>;

    /// The current version of `key`, `None` when there is none.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when it cannot be read.
    fn version(&self, key: &str) -> Result<Option<Version>, Error>;

    /// The value of `key` with its version, read together (a compare-and-swap
    /// on that version replaces exactly these bytes), unless its version is
    /// still `known`: a conditional GET (`If-None-Match`), so an unchanged
    /// value costs no transfer.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when it exists but cannot be read.
    fn get_if_changed(&self, key: &str, known: Option<&Version>) -> Result<Conditional, Error>;

    /// Stores the concatenation of `chunks` under `key` (streamed: the value
    /// need not be in memory as one slice). Returns the new version, or
    /// `None` when `mode`'s condition does not hold (the key exists, for
    /// [`PutMode::Create`]; its version changed, for [`PutMode::Update`]).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`]; a failed write leaves the previous value.
    fn put_chunks(
        &self,
        key: &str,
        chunks: &mut dyn Iterator<Item = &[u8]>,
        mode: PutMode,
    ) -> Result<Option<Version>, Error>;

    /// Stores `value` under `key`; see [`Storage::put_chunks`].
    ///
    /// # Errors
    ///
    /// [`Error::Storage`]; a failed write leaves the previous value.
    fn put(&self, key: &str, value: &[u8], mode: PutMode) -> Result<Option<Version>, Error> {
        self.put_chunks(key, &mut std::iter::once(value), mode)
    }

    /// The keys directly under `prefix` (one level, like a directory
    /// listing), in no particular order. Names that are no key of this
    /// storage (a file name that is not UTF-8, an object key with an empty
    /// segment) are left out.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when the listing fails.
    fn list(&self, prefix: &str) -> Result<Vec<String>, Error>;

    /// Removes `key`; nothing when it does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when it cannot be removed.
    fn delete(&self, key: &str) -> Result<(), Error>;

    /// Where `key` is, for messages (a file path, an object's URL).
    fn location(&self, key: &str) -> PathBuf;

    /// A value to be written a piece at a time under `prefix`, then stored
    /// by [`Storage::commit`] under a key chosen at the end ([`Staged`]):
    /// in memory, unless the storage has somewhere better (the data
    /// directory: a temporary file beside the key).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when that place cannot be made.
    fn stage(&self, prefix: &str) -> Result<Staged, Error> {
        let _ = prefix;
        Ok(Staged::memory())
    }

    /// Stores `staged` under `key`, replacing its value; see
    /// [`Storage::put_chunks`].
    ///
    /// # Errors
    ///
    /// [`Error::Storage`]; a failed commit leaves the previous value and
    /// nothing of `staged`.
    fn commit(&self, key: &str, staged: Staged) -> Result<(), Error> {
        let bytes = match staged.into_parts().map_err(Error::storage(&self.location(key)))? {
            staged::Parts::Memory(bytes) => bytes,
            staged::Parts::File(tmp) => {
                let read = fs::read(&tmp);
                let _ = fs::remove_file(&tmp);
                read.map_err(Error::storage(&tmp))?
            }
        };
        self.put(key, &bytes, PutMode::Overwrite).map(drop)
    }
}

/// The data directory: each key a file under it.
///
/// Compare-and-swap compares the file's version (size, modification time
/// and inode) and then renames the new file into place; it needs no more
/// because one publisher at a time holds the directory ([`lock_data_dir`]),
/// but two writers updating one key at once could both succeed. Create is
/// atomic without the lock: the new file is hard-linked into place, which
/// fails when the key exists.
#[derive(Debug, Clone)]
pub struct LocalStorage {
    root: PathBuf,
}

impl LocalStorage {
    /// The data directory `root` (created if missing).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when it cannot be created.
    pub fn open(root: &Path) -> Result<Self, Error> {
        fs::create_dir_all(root).map_err(Error::storage(root))?;
        Ok(Self {
            root: root.to_owned(),
        })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }
}

/// A file's version: its size, modification time and (on Unix) inode. Every
/// write renames a new file into place, so the inode tells two writes apart
/// within the file system's timestamp granularity.
fn file_version(metadata: &fs::Metadata) -> Version {
    let modified = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(metadata);
    #[cfg(not(unix))]
    let inode = 0u64;
    Version(format!("{:x}-{modified:x}-{inode:x}", metadata.len()))
}

fn not_found_is_none<T>(result: std::io::Result<T>) -> std::io::Result<Option<T>> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Storage for LocalStorage {
    fn prepare(&self, prefix: &str) -> Result<(), Error> {
        let dir = self.path(prefix);
        fs::create_dir_all(&dir).map_err(Error::storage(&dir))?;
        if let Ok(entries) = fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().ends_with(TMP_SUFFIX) {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        Ok(())
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let path = self.path(key);
        not_found_is_none(fs::read(&path)).map_err(Error::storage(&path))
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Option<Vec<u8>>, Error> {
        let path = self.path(key);
        let Some(mut file) = not_found_is_none(fs::File::open(&path)).map_err(Error::storage(&path))? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        file.seek(std::io::SeekFrom::Start(range.start))
            .and_then(|_| {
                file.take(range.end.saturating_sub(range.start))
                    .read_to_end(&mut out)
            })
            .map_err(Error::storage(&path))?;
        Ok(Some(out))
    }

    fn version(&self, key: &str) -> Result<Option<Version>, Error> {
        let path = self.path(key);
        let metadata = not_found_is_none(fs::metadata(&path)).map_err(Error::storage(&path))?;
        Ok(metadata.as_ref().map(file_version))
    }

    fn get_if_changed(&self, key: &str, known: Option<&Version>) -> Result<Conditional, Error> {
        let path = self.path(key);
        let io = Error::storage(&path);
        // The open file's own metadata: a write renames another file into
        // place, so this version is that of the bytes read below.
        let Some(mut file) = not_found_is_none(fs::File::open(&path)).map_err(&io)? else {
            return Ok(Conditional::Missing);
        };
        let version = file_version(&file.metadata().map_err(&io)?);
        if known == Some(&version) {
            return Ok(Conditional::NotModified);
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(&io)?;
        Ok(Conditional::Value { bytes, version })
    }

    fn put_chunks(
        &self,
        key: &str,
        chunks: &mut dyn Iterator<Item = &[u8]>,
        mode: PutMode,
    ) -> Result<Option<Version>, Error> {
        let path = self.path(key);
        if let Some(dir) = path.parent()
            && !dir.is_dir()
        {
            fs::create_dir_all(dir).map_err(Error::storage(dir))?;
        }
        let mut chunks = chunks;
        let write = |w: &mut std::io::BufWriter<fs::File>| (&mut chunks).try_for_each(|c| w.write_all(c));
        match mode {
            PutMode::Overwrite => write_atomic_with(&path, write)?,
            PutMode::Update(expected) => {
                if self.version(key)?.as_ref() != Some(&expected) {
                    return Ok(None);
                }
                write_atomic_with(&path, write)?;
            }
            PutMode::Create => {
                if !create_atomic_with(&path, write)? {
                    return Ok(None);
                }
            }
        }
        self.version(key)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, Error> {
        let dir = self.path(prefix);
        let Some(entries) = not_found_is_none(fs::read_dir(&dir)).map_err(Error::storage(&dir))? else {
            return Ok(Vec::new());
        };
        Ok(entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .map(|name| format!("{}/{name}", prefix.trim_end_matches('/')))
            .collect())
    }

    fn delete(&self, key: &str) -> Result<(), Error> {
        let path = self.path(key);
        not_found_is_none(fs::remove_file(&path))
            .map(drop)
            .map_err(Error::storage(&path))
    }

    fn location(&self, key: &str) -> PathBuf {
        self.path(key)
    }

    fn stage(&self, prefix: &str) -> Result<Staged, Error> {
        // A name of this writer's own: builds of several lists stage at
        // once; a temporary file's suffix, so a crash's is removed on start.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self
            .path(prefix)
            .join(format!(".staged-{}-{n}{TMP_SUFFIX}", std::process::id()));
        Staged::file(tmp.clone()).map_err(Error::storage(&tmp))
    }

    fn commit(&self, key: &str, staged: Staged) -> Result<(), Error> {
        let path = self.path(key);
        let io = Error::storage(&path);
        let tmp = match staged.into_parts().map_err(&io)? {
            staged::Parts::Memory(bytes) => return self.put(key, &bytes, PutMode::Overwrite).map(drop),
            staged::Parts::File(tmp) => tmp,
        };
        if let Err(e) = fs::rename(&tmp, &path) {
            let _ = fs::remove_file(&tmp);
            return Err(io(e));
        }
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(&io)
    }
}

/// The lock on a data directory, held until dropped; see the module docs.
#[derive(Debug)]
pub struct DataDirLock {
    _file: fs::File,
}

/// Takes the lock on `dir` (which must exist) without waiting.
///
/// # Errors
///
/// [`Error::InUse`] when another process holds it, naming that process;
/// [`Error::Storage`] when the lock file cannot be opened or locked.
pub fn lock_data_dir(dir: &Path) -> Result<DataDirLock, Error> {
    let path = dir.join("lock");
    let io = Error::storage(&path);
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(&io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            // The id the holder wrote, if it is one: whatever else holds
            // the lock (an operator's `flock`) may leave other content, or
            // an old publisher's id, and some systems refuse the read.
            let holder = fs::read_to_string(&path)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok());
            return Err(Error::InUse {
                data_dir: dir.to_owned(),
                holder,
            });
        }
        Err(fs::TryLockError::Error(e)) => return Err(io(e)),
    }
    // The holder's id, for the error above; the lock is what counts.
    file.set_len(0)
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .map_err(&io)?;
    Ok(DataDirLock { _file: file })
}

/// Writes `bytes` to `path` atomically: temporary file, fsync, rename, fsync
/// of the directory.
///
/// # Errors
///
/// The I/O error, with the path.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] of what `write` writes, through a buffer: for content
/// that need not be in memory as one slice.
///
/// # Errors
///
/// The I/O error, with the path.
fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<fs::File>) -> std::io::Result<()>,
) -> Result<(), Error> {
    let io = Error::storage(path);
    // A bare file name has the parent "": its directory is the current one.
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(TMP_SUFFIX);
    let tmp = dir.join(tmp_name);
    let written = fs::File::create(&tmp).and_then(|f| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        write(&mut w)?;
        let f = w.into_inner().map_err(std::io::IntoInnerError::into_error)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| fs::rename(&tmp, path)) {
        // A full disk or an I/O error: leave nothing half-written behind.
        let _ = fs::remove_file(&tmp);
        return Err(io(e));
    }
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(&io)?;
    Ok(())
}

/// Like [`write_atomic_with`], but never replaces a file: the temporary file
/// is linked to `path`, which fails when `path` exists. Returns whether it
/// was written.
///
/// # Errors
///
/// The I/O error, with the path.
fn create_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<fs::File>) -> std::io::Result<()>,
) -> Result<bool, Error> {
    // A temporary name of this writer's own: writers racing to create one
    // key must not write, rename or remove each other's temporary file.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let writer = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let io = Error::storage(path);
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(format!(".create-{}-{writer}", std::process::id()));
    tmp_name.push(TMP_SUFFIX);
    let tmp = path.with_file_name(tmp_name);
    write_atomic_with(&tmp, write)?;
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(io(e)),
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(&io)?;
    Ok(true)
}

/// This builder's id: the one in `<data_dir>/builder-id`, created (random)
/// when there is none; a random one when it cannot be read or written.
pub(crate) fn builder_id(data_dir: &Path) -> String {
    let path = data_dir.join("builder-id");
    if let Ok(id) = std::fs::read_to_string(&path)
        && !id.trim().is_empty()
    {
        return id.trim().to_owned();
    }
    let id = format!("{:016x}", rand::random::<u64>());
    if let Err(e) = std::fs::write(&path, format!("{id}\n")) {
        tracing::warn!(path = %path.display(), error = %e, "cannot keep the builder id; a restart will be another builder");
    }
    id
}

/// Where the signing key lives when the configuration names no other
/// path: `<data_dir>/signing.key`.
pub fn default_signing_key_path(data_dir: &Path) -> PathBuf {
    data_dir.join("signing.key")
}

/// Loads the signing key at `path`; `None` when there is no file there.
/// Never creates a key.
///
/// # Errors
///
/// [`Error::Storage`] when the key cannot be read, [`Error::SigningKey`]
/// when the file holds no key, [`Error::Config`] when `path` is named as a
/// public key file.
pub fn load_signing_key(path: &Path) -> Result<Option<SigningKey>, Error> {
    // A public key file holds base64 of 32 bytes too, which reads as a
    // secret key: signing with it signs with a key whose secret every
    // agent's configuration holds, under a key id nobody trusts. The names
    // public keys are written under are refused before anything is read or
    // created.
    if is_public_key_file_name(path) {
        return Err(Error::config(
            "signing_key",
            format!(
                "{} is named as a public key file (`public.key`, `<file>.pub`: where keygen and the publisher write public keys); the signing key is the private key file beside it (`signing.key`, or the name without `.pub`)",
                path.display()
            ),
        ));
    }
    match fs::read_to_string(path) {
        Ok(text) => SigningKey::from_base64(&text)
            .map(Some)
            .map_err(|reason| Error::SigningKey {
                path: path.to_owned(),
                reason,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::storage(path)(e)),
    }
}

/// Why the signing key file at `path` is exposed to other users than its
/// owner, if it is: group or others have any access to it (mode 0644, a
/// copy made without care), so anyone who can read it can sign snapshots
/// every agent trusts, or replace it. `None` when only the owner has
/// access, when the file cannot be examined (reading it reports that),
/// and on platforms without Unix modes. A warning, not a refusal (as
/// OpenSSH refuses such a key): secret stores mount key files 0644 by
/// default, and refusing would stop a serving publisher at its next start.
pub fn signing_key_exposure(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then(|| {
            format!(
                "mode {mode:04o} gives other users than its owner access to the signing key: anyone \
                 who reads it can sign snapshots every agent trusts; `chmod 600 {}`",
                path.display()
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Loads the signing key at `path`, or creates one (mode 0600) with its
/// `public.key` beside it when there is none.
///
/// # Errors
///
/// [`Error::Storage`] when the key cannot be read or written,
/// [`Error::SigningKey`] when the file holds no key.
pub fn load_or_create_signing_key(path: &Path) -> Result<SigningKey, Error> {
    if let Some(key) = load_signing_key(path)? {
        return Ok(key);
    }
    let key = generate_signing_key();
    write_key_pair(&key, path)?;
    tracing::info!(path = %path.display(), public_key = %key.public_key().to_base64(), key_id = %hex::encode(key.public_key().id()), "created a new signing key");
    Ok(key)
}

/// Keeps the public key file beside the signing key file `path`
/// ([`public_key_path`]) holding `key`'s public key: rewritten when it
/// holds another (the signing key was replaced, as in a key rotation) or
/// is missing. Agents and replicas are given that file; one left on the
/// previous key would have them refuse every snapshot. A file that cannot
/// be written is logged, not fatal: it is not what the publisher serves.
pub fn keep_public_key_in_step(path: &Path, key: &SigningKey) {
    let public = public_key_path(path);
    let expected = key.public_key().to_base64();
    let now = hex::encode(key.public_key().id());
    match fs::read_to_string(&public) {
        Ok(text) if text.trim() == expected => return,
        Ok(text) => {
            let was = TrustedKey::from_base64(text.trim()).map_or_else(
                |_| "no key".to_owned(),
                |k| format!("key id {}", hex::encode(k.id())),
            );
            tracing::warn!(path = %public.display(), was, now, "the public key file held another key than the signing key's; rewritten: give agents and replicas this one");
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(path = %public.display(), now, "wrote the signing key's public key");
        }
        Err(e) => {
            tracing::error!(path = %public.display(), error = %e, "cannot read the public key file; it is left as it is");
            return;
        }
    }
    if let Err(e) = write_atomic(&public, format!("{expected}\n").as_bytes()) {
        tracing::error!(path = %public.display(), error = %e, now, "cannot write the signing key's public key; the file may name another key");
    }
}

/// Loads the public key file at `path` (base64, as [`write_key_pair`]
/// writes it beside the signing key): what a replica verifies snapshots
/// with. Never creates a key.
///
/// # Errors
///
/// [`Error::Storage`] when the file cannot be read, [`Error::SigningKey`]
/// when it holds no key.
pub fn load_public_key(path: &Path) -> Result<TrustedKey, Error> {
    let text = fs::read_to_string(path).map_err(Error::storage(path))?;
    TrustedKey::from_base64(text.trim()).map_err(|reason| Error::SigningKey {
        path: path.to_owned(),
        reason,
    })
}

/// A new signing key from the operating system's random source.
pub fn generate_signing_key() -> SigningKey {
    use rand::RngCore as _;
    let mut secret = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    SigningKey::from_secret_bytes(secret)
}

/// Writes the private key (mode 0600, never replacing an existing file) and
/// its public key next to it ([`public_key_path`]).
///
/// # Errors
///
/// [`Error::Storage`] when a file cannot be written or the key file exists.
pub fn write_key_pair(key: &SigningKey, path: &Path) -> Result<(), Error> {
    let io = Error::storage(path);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(&io)?;
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = options.open(path).map_err(&io)?;
    writeln!(f, "{}", key.to_base64()).map_err(&io)?;
    f.sync_all().map_err(&io)?;
    write_atomic(
        &public_key_path(path),
        format!("{}\n", key.public_key().to_base64()).as_bytes(),
    )
}

/// Whether `path` has a name [`public_key_path`] gives a public key file:
/// `public.key`, or one ending in `.pub`.
pub fn is_public_key_file_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "public.key" || n.ends_with(".pub"))
}

/// Where the public key of the private key file `path` is written:
/// `public.key` beside the default `signing.key`, else `<file>.pub`, so a
/// second key pair never overwrites the first one's public key.
pub fn public_key_path(path: &Path) -> PathBuf {
    if path.file_name().is_some_and(|n| n == "signing.key") {
        path.with_file_name("public.key")
    } else {
        let mut name = path.file_name().unwrap_or_default().to_owned();
        name.push(".pub");
        path.with_file_name(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_lock_per_data_directory_until_it_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_data_dir(dir.path()).unwrap();
        let pid = std::process::id().to_string();
        match lock_data_dir(dir.path()) {
            Err(e @ Error::InUse { .. }) => {
                let message = e.to_string();
                assert!(message.contains(&format!("(process {pid})")), "{message}");
                assert!(message.contains(&dir.path().display().to_string()), "{message}");
            }
            other => panic!("a second lock: {other:?}"),
        }
        drop(first);
        let again = lock_data_dir(dir.path()).unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("lock")).unwrap().trim(), pid);
        // Content that is not a process id is not shown as one.
        fs::write(dir.path().join("lock"), "not\na pid\n").unwrap();
        match lock_data_dir(dir.path()) {
            Err(e @ Error::InUse { .. }) => {
                let message = e.to_string();
                assert!(message.contains("is locked by another process;"), "{message}");
                assert!(!message.contains('\n'), "{message}");
            }
            other => panic!("a second lock: {other:?}"),
        }
        drop(again);
    }

    #[test]
    fn a_second_key_pair_never_overwrites_the_first_public_key() {
        let dir = tempfile::tempdir().unwrap();
        let first = generate_signing_key();
        write_key_pair(&first, &dir.path().join("signing.key")).unwrap();
        let second = generate_signing_key();
        write_key_pair(&second, &dir.path().join("other.key")).unwrap();
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("public.key").trim(), first.public_key().to_base64());
        assert_eq!(read("other.key.pub").trim(), second.public_key().to_base64());
        // The private key file is never replaced.
        assert!(write_key_pair(&second, &dir.path().join("signing.key")).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join("other.key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_public_key_file_is_refused_as_the_signing_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = generate_signing_key();
        let private = dir.path().join("next.key");
        write_key_pair(&key, &private).unwrap();
        write_key_pair(&generate_signing_key(), &dir.path().join("signing.key")).unwrap();
        // Given its public key file by mistake (`signing_key = "next.key.pub"`,
        // `BLOCKSIEVE_SIGNING_KEY` naming `public.key`): it held base64 of
        // 32 bytes, and was taken as a secret key, signing under a key id
        // nobody trusts with a secret the agents' configuration holds.
        for name in ["next.key.pub", "public.key", "missing.pub"] {
            let path = dir.path().join(name);
            let before = fs::read_dir(dir.path()).unwrap().count();
            for result in [
                load_signing_key(&path).map(|k| k.map(|k| k.public_key().to_base64())),
                load_or_create_signing_key(&path).map(|k| Some(k.public_key().to_base64())),
            ] {
                let Err(e @ Error::Config { .. }) = result else {
                    panic!("{name}: {result:?}");
                };
                let message = e.to_string();
                assert!(
                    message.contains("signing_key") && message.contains("public key file"),
                    "{message}"
                );
            }
            // Nothing created beside it (no `missing.pub`, no `.pub.pub`).
            assert_eq!(fs::read_dir(dir.path()).unwrap().count(), before, "{name}");
        }
        // The private key files load.
        let loaded = load_signing_key(&private).unwrap().unwrap();
        assert_eq!(loaded.public_key(), key.public_key());
        assert!(
            load_signing_key(&dir.path().join("signing.key"))
                .unwrap()
                .is_some()
        );
    }

    // The calls themselves are checked by the storage contract (the tests
    // crate's `storage_contract`), on a data directory and on object stores.

    #[test]
    fn a_key_is_a_file_under_the_data_directory_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::open(dir.path()).unwrap();
        storage
            .put("lists/a/1.snapshot", b"one", PutMode::Overwrite)
            .unwrap()
            .unwrap();
        assert!(
            storage
                .put("lists/a/2.snapshot", b"two", PutMode::Create)
                .unwrap()
                .is_some()
        );
        assert_eq!(
            storage
                .put("lists/a/2.snapshot", b"other", PutMode::Create)
                .unwrap(),
            None
        );
        // A key is a file under the data directory, byte for byte.
        assert_eq!(fs::read(dir.path().join("lists/a/1.snapshot")).unwrap(), b"one");
        assert_eq!(fs::read(dir.path().join("lists/a/2.snapshot")).unwrap(), b"two");
        // No temporary file is left behind.
        let mut names: Vec<_> = fs::read_dir(dir.path().join("lists/a"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["1.snapshot", "2.snapshot"]);
    }
}

/// A [`Storage`] wrapper for tests that injects what a real store can do:
/// a call failing for now, a write applied but answered as refused, a
/// store ignoring conditions, another writer's step in between, reads
/// watched.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use super::*;

    /// A call through [`Intercepted`], as its hooks see it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Op {
        /// `get`, `get_range` or `get_if_changed`.
        Read,
        /// `version`.
        Version,
        /// `put` or `put_chunks`.
        Put,
        /// `list`.
        List,
        /// `delete`.
        Delete,
    }

    type Before = Box<dyn Fn(Op, &str) -> Result<(), Error> + Send + Sync>;
    type PutModeHook = Box<dyn Fn(&str, PutMode) -> PutMode + Send + Sync>;
    type PutAnswer = Box<dyn Fn(&str, &PutMode, Option<Version>) -> Option<Version> + Send + Sync>;
    type AfterRead = Box<dyn Fn(Option<usize>) + Send + Sync>;

    /// `inner`, with hooks: each is "pass it on" until set.
    pub(crate) struct Intercepted {
        inner: Arc<dyn Storage>,
        before: Before,
        put_mode: PutModeHook,
        put_answer: PutAnswer,
        after_read: AfterRead,
    }

    impl std::fmt::Debug for Intercepted {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Intercepted")
                .field("inner", &self.inner)
                .finish_non_exhaustive()
        }
    }

    impl Intercepted {
        /// `inner`, passing every call on.
        pub(crate) fn over(inner: impl Storage + 'static) -> Self {
            Self {
                inner: Arc::new(inner),
                before: Box::new(|_, _| Ok(())),
                put_mode: Box::new(|_, mode| mode),
                put_answer: Box::new(|_, _, answer| answer),
                after_read: Box::new(|_| {}),
            }
        }

        /// Runs `hook` before every call with its key; an error fails the call.
        pub(crate) fn before(
            mut self,
            hook: impl Fn(Op, &str) -> Result<(), Error> + Send + Sync + 'static,
        ) -> Self {
            self.before = Box::new(hook);
            self
        }

        /// Runs `step` once, before the first write of a key `matches` accepts.
        pub(crate) fn once_before_put(
            self,
            matches: impl Fn(&str) -> bool + Send + Sync + 'static,
            step: impl FnOnce() + Send + 'static,
        ) -> Self {
            let step: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>> =
                std::sync::Mutex::new(Some(Box::new(step)));
            self.before(move |op, key| {
                if op == Op::Put
                    && matches(key)
                    && let Some(step) = step.lock().ok().and_then(|mut s| s.take())
                {
                    step();
                }
                Ok(())
            })
        }

        /// Writes with the mode `hook` gives instead of the one asked for.
        pub(crate) fn put_mode(
            mut self,
            hook: impl Fn(&str, PutMode) -> PutMode + Send + Sync + 'static,
        ) -> Self {
            self.put_mode = Box::new(hook);
            self
        }

        /// Answers a write (applied or not) with what `hook` gives.
        pub(crate) fn put_answer(
            mut self,
            hook: impl Fn(&str, &PutMode, Option<Version>) -> Option<Version> + Send + Sync + 'static,
        ) -> Self {
            self.put_answer = Box::new(hook);
            self
        }

        /// Shows `hook` every `get` and `get_range`: the size of the value
        /// read (`None`: none there, or the read failed).
        pub(crate) fn after_read(mut self, hook: impl Fn(Option<usize>) + Send + Sync + 'static) -> Self {
            self.after_read = Box::new(hook);
            self
        }

        fn read(&self, read: Result<Option<Vec<u8>>, Error>) -> Result<Option<Vec<u8>>, Error> {
            (self.after_read)(read.as_ref().ok().and_then(|v| v.as_ref().map(Vec::len)));
            read
        }
    }

    impl Storage for Intercepted {
        fn prepare(&self, prefix: &str) -> Result<(), Error> {
            self.inner.prepare(prefix)
        }
        fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
            (self.before)(Op::Read, key)?;
            self.read(self.inner.get(key))
        }
        fn get_range(&self, key: &str, range: Range<u64>) -> Result<Option<Vec<u8>>, Error> {
            (self.before)(Op::Read, key)?;
            self.read(self.inner.get_range(key, range))
        }
        fn get_if_changed(&self, key: &str, known: Option<&Version>) -> Result<Conditional, Error> {
            (self.before)(Op::Read, key)?;
            self.inner.get_if_changed(key, known)
        }
        fn version(&self, key: &str) -> Result<Option<Version>, Error> {
            (self.before)(Op::Version, key)?;
            self.inner.version(key)
        }
        fn put_chunks(
            &self,
            key: &str,
            chunks: &mut dyn Iterator<Item = &[u8]>,
            mode: PutMode,
        ) -> Result<Option<Version>, Error> {
            (self.before)(Op::Put, key)?;
            let mode = (self.put_mode)(key, mode);
            let answer = self.inner.put_chunks(key, chunks, mode.clone())?;
            Ok((self.put_answer)(key, &mode, answer))
        }
        fn list(&self, prefix: &str) -> Result<Vec<String>, Error> {
            (self.before)(Op::List, prefix)?;
            self.inner.list(prefix)
        }
        fn delete(&self, key: &str) -> Result<(), Error> {
            (self.before)(Op::Delete, key)?;
            self.inner.delete(key)
        }
        fn location(&self, key: &str) -> PathBuf {
            self.inner.location(key)
        }
        fn stage(&self, prefix: &str) -> Result<Staged, Error> {
            self.inner.stage(prefix)
        }
        fn commit(&self, key: &str, staged: Staged) -> Result<(), Error> {
            (self.before)(Op::Put, key)?;
            self.inner.commit(key, staged)
        }
    }
}
