//! The cache directory: each list's last accepted snapshot and its
//! [`ListRecord`] (version floor and ETag), written atomically.
//!
//! Layout, per list `L`:
//!
//! | file | content |
//! |---|---|
//! | `L.snapshot` | the snapshot bytes exactly as downloaded and verified |
//! | `L.chain` | the deltas applied since that snapshot, as downloaded and verified, one after another (FORMAT.md "Delta chains"); absent or empty when none were |
//! | `L.record.json` | the [`ListRecord`]: floor (version, body SHA-256 of the version the snapshot and chain stand for), the snapshot's own, and its ETag |
//! | `*.quarantined` | a file that failed verification, renamed aside (the latest one per file) |
//! | `lock` | locked by the agent using the directory; holds its process id |
//!
//! One agent at a time uses a directory: two would overwrite each other's
//! files, remove each other's temporary files at start, and a restart
//! could come back on an older version than either held. The agent takes
//! an exclusive advisory lock on `lock` when it is built (the operating
//! system's: `flock` on Unix, `LockFileEx` on Windows, through
//! [`File::try_lock`]) and holds it until the last of its clones is
//! dropped and any update round or write it started has ended (a round
//! spawned by a check or the background updates holds the store, up to
//! the snapshot timeout); the lock goes with the process,
//! so a crash leaves none behind. A second agent — of this process or
//! another — is refused ([`Error::CacheDirInUse`], naming the holder's
//! process id). A child of `fork()` shares its parent's lock (the same
//! open file), and keeps it until it exits or execs, even after the parent
//! has dropped its agent. The lock is advisory: it binds agents, not other programs
//! writing there, and a `lock` file deleted while held no longer excludes
//! anyone. On a network file system it is only as good as the server's
//! locking (an NFS mount with `nolock` locks within one machine only).
//! A directory this process cannot write to is used as it always was — its
//! snapshots are loaded, every write fails and is reported — without a
//! lock, with a warning, whenever `lock` cannot be opened for writing
//! (permission denied, a read-only file system), whether it exists or
//! not: such an agent can create, rename or delete nothing there, so it
//! cannot overwrite another's files, and any number of them may read a
//! read-only cache (one baked into an image, its `lock` left by the run
//! that made it) together. A lock file it cannot open for writing in a
//! directory it can write to (one left by another user) is locked all the
//! same, opened for reading: such an agent is a writer. Where the platform has
//! no file locks ([`io::ErrorKind::Unsupported`]), the agent goes on
//! without one, with a warning.
//!
//! Every write goes to a temporary file in the same directory, is fsynced,
//! renamed over the target and the directory fsynced (on Unix), so a crash
//! leaves either the old file or the new one. The snapshot is written before
//! the record, so the persisted floor never names a snapshot that is not on
//! disk; a crash between the two leaves the floor one version behind, which
//! [`restore`](crate::engine::accept::restore) repairs from the snapshot.
//! A new snapshot removes the chain before its record is written; a chain
//! that does not lead from the snapshot to the record's floor is set aside
//! at start and the snapshot alone restored
//! ([`update::restore`](crate::engine::update::restore)), reported in the
//! list's status, with the snapshot's floor: the record is not signed, so
//! the floor is never more than the restored bytes prove. A
//! crash during a write leaves a temporary file (`L.snapshot.tmp-…`), which
//! the next start removes ([`Store::remove_temporaries`]).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::Error;
use crate::engine::accept::ListRecord;

/// Suffix of a quarantined file.
const QUARANTINE_SUFFIX: &str = "quarantined";

/// What follows a file's name in the name of its temporary copy:
/// `L.snapshot.tmp-<pid>-<n>`.
const TEMP_INFIX: &str = ".tmp-";

/// The lock file of a cache directory (see the module docs).
pub(crate) const LOCK_FILE: &str = "lock";

/// One agent's cache directory. Every clone holds the directory's lock
/// (if it has one): a write still running on a blocking thread when the
/// agent is dropped keeps it until it ends.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
    /// The locked file; `None` where no lock could be had and the agent
    /// cannot write (see the module docs).
    _lock: Option<Arc<File>>,
}

/// What [`Store::read`] found for one list.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// The snapshot bytes, if the file exists and is not over the limit.
    pub(crate) snapshot: Option<Vec<u8>>,
    /// The chain of deltas applied since the snapshot, if the file exists
    /// and is not over the limit.
    pub(crate) chain: Option<Vec<u8>>,
    /// The record, if the file exists and parses.
    pub(crate) record: Option<ListRecord>,
    /// Problems met: unreadable files (storage errors) and files that were
    /// quarantined (oversized snapshot, unparseable record).
    pub(crate) problems: Vec<Error>,
}

impl Store {
    /// The store of `dir`, which must exist, with its lock taken.
    ///
    /// # Errors
    ///
    /// [`Error::CacheDirInUse`] when another agent holds the lock;
    /// [`Error::InvalidCacheDir`] when the lock file can be neither
    /// opened nor locked.
    pub(crate) fn open(dir: PathBuf) -> Result<Self, Error> {
        let lock = lock_dir(&dir)?;
        Ok(Self {
            dir,
            _lock: lock.map(Arc::new),
        })
    }

    /// A store of `dir` without its lock (tests of the files alone).
    #[cfg(test)]
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir, _lock: None }
    }

    pub(crate) fn snapshot_path(&self, list: &str) -> PathBuf {
        self.dir.join(format!("{list}.snapshot"))
    }

    pub(crate) fn chain_path(&self, list: &str) -> PathBuf {
        self.dir.join(format!("{list}.chain"))
    }

    pub(crate) fn record_path(&self, list: &str) -> PathBuf {
        self.dir.join(format!("{list}.record.json"))
    }

    /// Removes the temporary files a crash during [`Store::save`] of `list`
    /// left behind (the directory is locked: no other agent's write is in
    /// progress while this one starts). Returns how many were removed.
    pub(crate) fn remove_temporaries(&self, list: &str) -> usize {
        let prefixes = [
            format!("{list}.snapshot{TEMP_INFIX}"),
            format!("{list}.chain{TEMP_INFIX}"),
            format!("{list}.record.json{TEMP_INFIX}"),
        ];
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if prefixes.iter().any(|p| name.starts_with(p.as_str())) && fs::remove_file(entry.path()).is_ok()
            {
                tracing::info!(file = %name, "removed a temporary file left by an interrupted write");
                removed += 1;
            }
        }
        removed
    }

    /// Reads `list`'s files: the snapshot and the chain each up to
    /// `max_snapshot_bytes`, the record up to [`ListRecord::MAX_BYTES`]. An
    /// oversized snapshot or chain or a record that does not parse is
    /// quarantined here; verifying the snapshot and chain is the caller's
    /// business.
    pub(crate) fn read(&self, list: &str, max_snapshot_bytes: u64) -> Found {
        let mut found = Found::default();
        let snapshot_path = self.snapshot_path(list);
        match read_limited(&snapshot_path, max_snapshot_bytes) {
            Ok(Some(Ok(bytes))) => found.snapshot = Some(bytes),
            Ok(Some(Err(size))) => {
                let reason =
                    format!("larger than the limit of {max_snapshot_bytes} bytes ({size} bytes or more)");
                found.problems.push(self.quarantine(&snapshot_path, reason));
            }
            Ok(None) => {}
            Err(e) => found.problems.push(storage(&snapshot_path, &e)),
        }
        // A chain is kept up to its own bound, not a snapshot's: it holds
        // the deltas of many rounds (`delta::MAX_KEPT_CHAIN_BYTES`, which
        // the agent never keeps more of).
        let chain_path = self.chain_path(list);
        let max_chain_bytes = crate::engine::delta::MAX_KEPT_CHAIN_BYTES;
        match read_limited(&chain_path, max_chain_bytes) {
            Ok(Some(Ok(bytes))) => found.chain = Some(bytes),
            Ok(Some(Err(size))) => {
                let reason =
                    format!("larger than the limit of {max_chain_bytes} bytes ({size} bytes or more)");
                found.problems.push(self.quarantine(&chain_path, reason));
            }
            Ok(None) => {}
            Err(e) => found.problems.push(storage(&chain_path, &e)),
        }
        let record_path = self.record_path(list);
        match read_limited(&record_path, ListRecord::MAX_BYTES as u64) {
            Ok(Some(Ok(bytes))) => match ListRecord::from_bytes(list, &bytes) {
                Ok(record) => found.record = Some(record),
                Err(reason) => found.problems.push(self.quarantine(&record_path, reason)),
            },
            Ok(Some(Err(size))) => {
                let reason = format!("{size} bytes or more, not a record");
                found.problems.push(self.quarantine(&record_path, reason));
            }
            Ok(None) => {}
            Err(e) => found.problems.push(storage(&record_path, &e)),
        }
        found
    }

    /// Renames `path` aside as `path.quarantined` (replacing an older
    /// quarantined copy) and returns the [`Error::CorruptCache`] to report;
    /// if even the rename fails, the file is removed, so that the next start
    /// does not trip over it again.
    pub(crate) fn quarantine(&self, path: &Path, reason: String) -> Error {
        let mut aside = path.as_os_str().to_owned();
        aside.push(".");
        aside.push(QUARANTINE_SUFFIX);
        if let Err(e) = fs::rename(path, &aside) {
            tracing::warn!(path = %path.display(), error = %e, "cannot quarantine cache file; removing it");
            let _ = fs::remove_file(path);
        }
        tracing::warn!(path = %path.display(), %reason, "cache file quarantined");
        Error::CorruptCache {
            path: path.to_owned(),
            reason,
        }
    }

    /// Persists an accepted snapshot of `list`, removes the chain of the
    /// snapshot it replaces, and then writes its record, each atomically.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] naming the file that could not be written.
    pub(crate) fn save(&self, list: &str, snapshot: &[u8], record: &ListRecord) -> Result<(), Error> {
        let path = self.snapshot_path(list);
        write_atomic(&path, snapshot).map_err(|e| storage(&path, &e))?;
        let path = self.chain_path(list);
        match fs::remove_file(&path) {
            Ok(()) => sync_dir(&self.dir).map_err(|e| storage(&path, &e))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(storage(&path, &e)),
        }
        let path = self.record_path(list);
        write_atomic(&path, &record.to_bytes()).map_err(|e| storage(&path, &e))
    }

    /// Persists the chain of deltas applied to `list`'s snapshot (all of
    /// them since the snapshot, one after another) and then the record
    /// naming the version it leads to, each atomically.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] naming the file that could not be written.
    pub(crate) fn save_chain(&self, list: &str, chain: &[u8], record: &ListRecord) -> Result<(), Error> {
        let path = self.chain_path(list);
        write_atomic(&path, chain).map_err(|e| storage(&path, &e))?;
        let path = self.record_path(list);
        write_atomic(&path, &record.to_bytes()).map_err(|e| storage(&path, &e))
    }
}

/// Takes the lock on `dir` without waiting: the locked file, or `None`
/// where there can be none (see the module docs).
fn lock_dir(dir: &Path) -> Result<Option<File>, Error> {
    let path = dir.join(LOCK_FILE);
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path);
    lock_opened(dir, &path, opened)
}

/// Whether this process can create files in `dir` (a probe file, created
/// and removed): an agent that can is a writer there, and must hold the
/// lock whatever the lock file's own permissions.
fn dir_writable(dir: &Path) -> bool {
    let probe = dir.join(format!("{LOCK_FILE}.probe-{}", std::process::id()));
    let created = OpenOptions::new().write(true).create_new(true).open(&probe);
    match created {
        Ok(file) => {
            drop(file);
            let _ = fs::remove_file(&probe);
            true
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => fs::remove_file(&probe).is_ok(),
        Err(e) => !is_read_only(&e),
    }
}

/// Locks the lock file `path` of `dir` as `opened` for writing: the
/// decision, apart from the opening (tests give it any error). A lock file
/// this process may not open for writing is not locked at all: a shared
/// lock would refuse no reader, and an exclusive one on a read-only
/// descriptor would refuse every reader but one (and fail outright on
/// NFS), where such an agent can create, rename or delete nothing there.
fn lock_opened(dir: &Path, path: &Path, opened: io::Result<File>) -> Result<Option<File>, Error> {
    lock_opened_in(dir, path, opened, || dir_writable(dir))
}

/// [`lock_opened`], with `writable` saying whether this process can create
/// files in `dir` (tests: a directory root could not be refused).
fn lock_opened_in(
    dir: &Path,
    path: &Path,
    opened: io::Result<File>,
    writable: impl FnOnce() -> bool,
) -> Result<Option<File>, Error> {
    let invalid = |e: io::Error| Error::InvalidCacheDir {
        path: dir.to_owned(),
        reason: format!("lock file {}: {e}", path.display()),
    };
    let mut file = match opened {
        Ok(file) => file,
        // A lock file not writable in a directory that is (one left by
        // another user): this agent can write there, so it takes the lock,
        // on the file opened for reading (`flock` needs no write access).
        Err(e) if is_read_only(&e) && writable() => File::open(path).map_err(|_| invalid(e))?,
        Err(e) if is_read_only(&e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot open the lock file for writing: cache directory used unlocked, as one this process cannot write to");
            return Ok(None);
        }
        Err(e) => return Err(invalid(e)),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            // The id the holder wrote, if it is one: whatever else holds the
            // lock may leave other content, and some systems refuse the read.
            let mut text = String::new();
            let holder = File::open(path)
                .and_then(|f| f.take(32).read_to_string(&mut text))
                .ok()
                .and_then(|_| text.trim().parse::<u32>().ok());
            return Err(Error::CacheDirInUse {
                path: dir.to_owned(),
                holder,
            });
        }
        Err(TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {
            tracing::warn!(dir = %dir.display(), error = %e, "no file locks on this platform: cache directory used unlocked (one agent per directory)");
            return Ok(None);
        }
        Err(TryLockError::Error(e)) => return Err(invalid(e)),
    }
    // The holder's id, for the error above; the lock is what counts.
    if let Err(e) = file
        .set_len(0)
        .and_then(|()| writeln!(file, "{}", std::process::id()))
    {
        tracing::debug!(path = %path.display(), error = %e, "cannot write the process id into the lock file");
    }
    Ok(Some(file))
}

/// Whether `e` says this process may not write there.
fn is_read_only(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
    )
}

fn storage(path: &Path, e: &io::Error) -> Error {
    Error::Storage {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// Reads `path` whole if it exists: `Ok(None)` when it does not,
/// `Ok(Some(Err(size)))` when it is longer than `limit` bytes (reading stops
/// there).
fn read_limited(path: &Path, limit: u64) -> io::Result<Option<Result<Vec<u8>, u64>>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Ok(Some(Err(bytes.len() as u64)));
    }
    Ok(Some(Ok(bytes)))
}

/// Writes `bytes` to `path` atomically: temporary file in the same
/// directory, fsync, rename, fsync of the directory.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // A bare file name's parent is "", which names no directory to sync.
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(
        "{TEMP_INFIX}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = dir.join(name);
    let result = (|| {
        let mut file = File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Makes a rename in `dir` durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Directories cannot be opened for fsync here; the rename is as durable as
/// the platform makes it.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// The order of one list's writes. A write keeps running on its blocking
/// thread when the round that started it is cancelled (a host's timeout
/// around `update()`), so a late one could land over a newer one: each
/// takes a ticket when it starts and writes only if no later ticket has
/// written yet, one at a time.
#[derive(Debug, Default)]
pub(crate) struct WriteOrder {
    next: AtomicU64,
    written: Mutex<u64>,
}

impl WriteOrder {
    /// A ticket for a write starting now.
    pub(crate) fn ticket(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Holds every write of the list until the guard is dropped (tests: a
    /// write whose outcome is not known yet).
    #[cfg(test)]
    pub(crate) fn hold(&self) -> std::sync::MutexGuard<'_, u64> {
        self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `write` unless a later ticket's write already ran (then `Ok`:
    /// the disk holds something newer).
    pub(crate) fn write(&self, ticket: u64, write: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        if ticket < *written {
            return Ok(());
        }
        write()?;
        *written = ticket;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// Where the lock file cannot be opened for writing (permission denied,
    /// a read-only file system), the agent takes no lock: not even when the
    /// file exists and another agent holds it (workers sharing a read-only
    /// cache baked into an image, `lock` left there by the run that made
    /// it), and not an error when it cannot be read either. Such an agent
    /// can create, rename or delete nothing there. Tested on the decision
    /// itself, which runs as root too (root writes to read-only
    /// directories; `cache_lock.rs` has the same through the file system).
    #[test]
    fn a_lock_file_not_writable_is_not_locked() {
        let dir = tempfile::tempdir().unwrap();
        let holder = Store::open(dir.path().to_owned()).unwrap();
        assert!(holder._lock.is_some());
        let path = dir.path().join(LOCK_FILE);
        for kind in [io::ErrorKind::PermissionDenied, io::ErrorKind::ReadOnlyFilesystem] {
            let lock = lock_opened_in(dir.path(), &path, Err(kind.into()), || false);
            assert!(matches!(lock, Ok(None)), "{kind:?}: {lock:?}");
        }
        // Nor when `lock` is not there (or not readable).
        let empty = tempfile::tempdir().unwrap();
        let path = empty.path().join(LOCK_FILE);
        let denied = Err(io::ErrorKind::PermissionDenied.into());
        let lock = lock_opened_in(empty.path(), &path, denied, || false);
        assert!(matches!(lock, Ok(None)), "{lock:?}");
        // Another error is the directory's.
        let lock = lock_opened(empty.path(), &path, Err(io::ErrorKind::InvalidInput.into()));
        assert!(matches!(lock, Err(Error::InvalidCacheDir { .. })), "{lock:?}");
        // A writable lock file held by another agent is refused.
        let path = dir.path().join(LOCK_FILE);
        let opened = OpenOptions::new().read(true).write(true).open(&path);
        let lock = lock_opened(dir.path(), &path, opened);
        assert!(matches!(lock, Err(Error::CacheDirInUse { .. })), "{lock:?}");
        drop(holder);
    }

    /// A lock file this process may not open for writing in a directory
    /// it may write to (a `lock` left by another user — an agent run once
    /// as root in a service's directory, a group-shared directory) used to
    /// leave the agent unlocked: it then wrote, renamed and removed files
    /// beside the agent holding the lock, two agents on one directory, and
    /// a restart could come back on the older one's snapshot. It must take
    /// the lock, here refused as held.
    #[test]
    fn regression_a_lock_file_not_writable_in_a_writable_directory_is_still_locked() {
        let dir = tempfile::tempdir().unwrap();
        let holder = Store::open(dir.path().to_owned()).unwrap();
        let path = dir.path().join(LOCK_FILE);
        let lock = lock_opened(dir.path(), &path, Err(io::ErrorKind::PermissionDenied.into()));
        assert!(matches!(lock, Err(Error::CacheDirInUse { .. })), "{lock:?}");
        drop(holder);
        // Once the holder is gone, it takes the lock itself.
        let lock = lock_opened(dir.path(), &path, Err(io::ErrorKind::PermissionDenied.into()));
        assert!(matches!(lock, Ok(Some(_))), "{lock:?}");
    }

    /// A write started before another but landing after it (its round
    /// cancelled, its blocking thread still running) does not overwrite it.
    #[test]
    fn a_late_write_does_not_land_over_a_newer_one() {
        let order = WriteOrder::default();
        let (first, second) = (order.ticket(), order.ticket());
        let mut disk = Vec::new();
        order
            .write(second, || {
                disk.push("second");
                Ok(())
            })
            .unwrap();
        order
            .write(first, || {
                disk.push("first");
                Ok(())
            })
            .unwrap();
        assert_eq!(disk, ["second"]);
        let third = order.ticket();
        order
            .write(third, || {
                disk.push("third");
                Ok(())
            })
            .unwrap();
        assert_eq!(disk, ["second", "third"]);
    }

    use blocksieve_format::FullHash;

    use super::*;
    use crate::engine::accept::VersionFloor;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("blocksieve-store-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        if let Err(e) = fs::create_dir_all(&dir) {
            panic!("{e}");
        }
        dir
    }

    fn record(version: u64) -> ListRecord {
        ListRecord {
            list: "malware".into(),
            floor: VersionFloor {
                version,
                body_sha256: FullHash::of(b"x").0,
            },
            base: None,
            etag: None,
        }
    }

    #[test]
    fn save_then_read_round_trips_without_temporary_files() {
        let dir = temp_dir("roundtrip");
        let store = Store::new(dir.clone());
        assert!(store.save("malware", b"snapshot v1", &record(1)).is_ok());
        assert!(store.save("malware", b"snapshot v2", &record(2)).is_ok());
        let found = store.read("malware", 1024);
        assert_eq!(found.snapshot.as_deref(), Some(&b"snapshot v2"[..]));
        assert_eq!(found.record, Some(record(2)));
        assert!(found.problems.is_empty());
        let names: Vec<String> = fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn temporaries_of_an_interrupted_write_are_removed_and_nothing_else() {
        let dir = temp_dir("temporaries");
        let store = Store::new(dir.clone());
        assert!(store.save("malware", b"snapshot v1", &record(1)).is_ok());
        for name in [
            "malware.snapshot.tmp-123-0",
            "malware.record.json.tmp-123-1",
            "phishing.snapshot.tmp-9-0",
            "notes.txt",
        ] {
            assert!(fs::write(dir.join(name), b"partial").is_ok());
        }
        assert_eq!(store.remove_temporaries("malware"), 2);
        let mut names: Vec<String> = fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "malware.record.json",
                "malware.snapshot",
                "notes.txt",
                "phishing.snapshot.tmp-9-0"
            ]
        );
        assert_eq!(
            store.read("malware", 1024).snapshot.as_deref(),
            Some(&b"snapshot v1"[..])
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn oversized_snapshot_and_garbage_record_are_quarantined() {
        let dir = temp_dir("quarantine");
        let store = Store::new(dir.clone());
        assert!(fs::write(store.snapshot_path("malware"), vec![0u8; 100]).is_ok());
        assert!(fs::write(store.record_path("malware"), b"not json").is_ok());
        let found = store.read("malware", 50);
        assert!(found.snapshot.is_none() && found.record.is_none());
        assert_eq!(found.problems.len(), 2);
        assert!(
            found
                .problems
                .iter()
                .all(|p| matches!(p, Error::CorruptCache { .. }))
        );
        assert!(!store.snapshot_path("malware").exists());
        assert!(dir.join("malware.snapshot.quarantined").exists());
        assert!(dir.join("malware.record.json.quarantined").exists());
        // Nothing left to trip over.
        assert!(store.read("malware", 50).problems.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
