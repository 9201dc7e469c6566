//! The data directory: signing key and published snapshots.
//!
//! ```text
//! <data_dir>/signing.key                       Ed25519 secret key, base64, mode 0600
//! <data_dir>/public.key                        its public key, base64 (for agent configuration)
//! <data_dir>/lists/<name>/<version>.hashes     sorted full hashes, 32 raw bytes each
//! <data_dir>/lists/<name>/<version>.snapshot   the signed snapshot
//! <data_dir>/lock                              held by the publisher using the directory
//! ```
//!
//! One publisher at a time uses a data directory: two would race on
//! version numbers and remove each other's temporary files. It holds an
//! advisory lock on `lock` (the operating system's: `flock` on Unix,
//! `LockFileEx` on Windows) for as long as it is open; the lock goes with
//! the process, so a crash leaves no stale lock behind. The file holds the
//! holder's process id, for the error a second publisher gets (where the
//! system lets it read a locked file; the lock alone decides).
//!
//! A version is published by writing its `.hashes` file and then its
//! `.snapshot` file, each to a temporary file that is fsynced and renamed into
//! place, then fsyncing the directory. A version counts only once its
//! snapshot exists, so a crash at any point leaves either the old or the new
//! version complete; temporary files left by a crash are removed on start.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use blocksieve_format::{DecodeLimits, FullHash, SigningKey, TrustedKey, decode};

use crate::Error;

const TMP_SUFFIX: &str = ".tmp";

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
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] of what `write` writes, through a buffer: for content
/// that need not be in memory as one slice.
///
/// # Errors
///
/// The I/O error, with the path.
pub fn write_atomic_with(
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

/// Loads the signing key at `path`, or creates one (mode 0600) with its
/// `public.key` beside it when there is none.
///
/// # Errors
///
/// [`Error::Storage`] when the key cannot be read or written,
/// [`Error::SigningKey`] when the file holds no key.
pub fn load_or_create_signing_key(path: &Path) -> Result<SigningKey, Error> {
    match fs::read_to_string(path) {
        Ok(text) => SigningKey::from_base64(&text).map_err(|reason| Error::SigningKey {
            path: path.to_owned(),
            reason,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = generate_signing_key();
            write_key_pair(&key, path)?;
            tracing::info!(path = %path.display(), public_key = %key.public_key().to_base64(), "created a new signing key");
            Ok(key)
        }
        Err(e) => Err(Error::storage(path)(e)),
    }
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

/// One list's directory.
#[derive(Debug, Clone)]
pub struct ListStore {
    dir: PathBuf,
}

/// A published version read back from disk.
#[derive(Debug)]
pub struct StoredVersion {
    /// The snapshot file's bytes.
    pub snapshot: Vec<u8>,
    /// The sorted full hashes.
    pub hashes: Vec<FullHash>,
}

impl ListStore {
    /// The store of list `name` under `data_dir` (created if missing).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when the directory cannot be created.
    pub fn open(data_dir: &Path, name: &str) -> Result<Self, Error> {
        let dir = data_dir.join("lists").join(name);
        fs::create_dir_all(&dir).map_err(Error::storage(&dir))?;
        let store = Self { dir };
        store.remove_temporaries();
        Ok(store)
    }

    fn path(&self, version: u64, ext: &str) -> PathBuf {
        self.dir.join(format!("{version:020}.{ext}"))
    }

    fn remove_temporaries(&self) {
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().ends_with(TMP_SUFFIX) {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
    }

    /// Published versions on disk (those with a snapshot file), newest first.
    pub fn versions(&self) -> Vec<u64> {
        let mut versions: Vec<u64> = fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".snapshot")?.parse().ok()
            })
            .collect();
        versions.sort_unstable_by(|a, b| b.cmp(a));
        versions
    }

    /// The snapshot bytes of `version`, if it is still on disk.
    pub fn read_snapshot(&self, version: u64) -> Option<Vec<u8>> {
        fs::read(self.path(version, "snapshot")).ok()
    }

    /// Publishes a version: hashes first, then the snapshot, then prunes all
    /// but the newest `keep` versions.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`]; a failed write leaves the previous version in place.
    pub fn publish(
        &self,
        version: u64,
        snapshot: &[u8],
        hashes: &[FullHash],
        keep: usize,
    ) -> Result<(), Error> {
        // Streamed: a copy of the hashes in memory would add 32 bytes per
        // entry to the build's peak.
        write_atomic_with(&self.path(version, "hashes"), |w| {
            hashes.iter().try_for_each(|h| w.write_all(&h.0))
        })?;
        write_atomic(&self.path(version, "snapshot"), snapshot)?;
        for old in self.versions().into_iter().skip(keep.max(1)) {
            let _ = fs::remove_file(self.path(old, "snapshot"));
            let _ = fs::remove_file(self.path(old, "hashes"));
        }
        Ok(())
    }

    /// The newest version whose snapshot verifies under `key` and whose
    /// hashes file matches it; corrupt versions are skipped with a warning.
    pub fn load_latest(&self, key: &TrustedKey) -> Option<StoredVersion> {
        for version in self.versions() {
            match self.load(version, key) {
                Ok(v) => return Some(v),
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), version, error = %e, "skipping unreadable snapshot")
                }
            }
        }
        None
    }

    fn load(&self, version: u64, key: &TrustedKey) -> Result<StoredVersion, Error> {
        let snapshot_path = self.path(version, "snapshot");
        let snapshot = fs::read(&snapshot_path).map_err(Error::storage(&snapshot_path))?;
        // Verify as an agent would; an expired snapshot is still served (agents
        // flag it stale), so check expiry against its own creation time.
        let header = blocksieve_format::parse_header_unverified(&snapshot).map_err(|e| Error::Corrupt {
            path: snapshot_path.clone(),
            reason: e.to_string(),
        })?;
        let verified = decode(
            &snapshot,
            std::slice::from_ref(key),
            &DecodeLimits::default(),
            header.created_at,
        )
        .map_err(|e| Error::Corrupt {
            path: snapshot_path.clone(),
            reason: e.to_string(),
        })?;
        let hashes_path = self.path(version, "hashes");
        let raw = fs::read(&hashes_path).map_err(Error::storage(&hashes_path))?;
        if raw.len() % FullHash::LEN != 0
            || (raw.len() / FullHash::LEN) as u64 != verified.header().full_hash_count
        {
            return Err(Error::Corrupt {
                path: hashes_path,
                reason: format!(
                    "{} bytes does not hold the {} full hashes the snapshot declares",
                    raw.len(),
                    verified.header().full_hash_count
                ),
            });
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
            return Err(Error::Corrupt {
                path: hashes_path,
                reason: "hashes are not sorted".to_owned(),
            });
        }
        Ok(StoredVersion { snapshot, hashes })
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
}
