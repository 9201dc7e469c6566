//! A value written a piece at a time, then stored under a key chosen at
//! the end ([`Staged`], `Storage::stage` and `Storage::commit` in the
//! parent module): a source's last good
//! copy, written while the source is read and named by its SHA-256, which
//! is known only once it is all written.
//!
//! A build's full hashes are staged the same way, as the `.hashes` object
//! it will publish, while its filter is built ([`super::spill`]).
//!
//! In the data directory a staged value is a temporary file beside its
//! key, synced every [`SYNC_EVERY`] bytes as it grows (so the commit's
//! fsync waits only for the last of it; a build's full hashes, see
//! [`Staged::synced_at_commit`], only at the commit) and renamed into place
//! by the commit; one dropped uncommitted is removed, and one left by a
//! crash is removed when the publisher next starts (it prepares each list's
//! `sources/` and `lists/<name>/builds/` directories, removing their
//! temporary files).
//! Elsewhere (an object store) it is held in memory and put whole.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use sha2::Digest as _;

use super::direct::{DirectReader, DirectWriter};

/// How many bytes a staged file takes between syncs.
pub const SYNC_EVERY: u64 = 4 << 20;

/// A value being written; see the module documentation.
pub struct Staged {
    target: Target,
    sha256: sha2::Sha256,
    len: u64,
}

enum Target {
    Memory(Vec<u8>),
    File {
        /// The temporary file's path; `None` once committed.
        tmp: Option<PathBuf>,
        /// Written to the disk past the page cache where it can be.
        file: Box<DirectWriter>,
        unsynced: u64,
        /// Bytes between syncs ([`SYNC_EVERY`], or none: [`Staged::synced_at_commit`]).
        sync_every: u64,
    },
}

/// Where a [`Staged`] value's bytes are, for a commit.
pub(crate) enum Parts {
    /// In memory.
    Memory(Vec<u8>),
    /// In this temporary file, written and synced: the committer renames
    /// it into place or removes it.
    File(PathBuf),
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = match &self.target {
            Target::Memory(_) => "memory".to_owned(),
            Target::File { tmp, .. } => format!("{tmp:?}"),
        };
        f.debug_struct("Staged")
            .field("target", &target)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl Staged {
    /// An empty value held in memory.
    pub fn memory() -> Self {
        Self {
            target: Target::Memory(Vec::new()),
            sha256: sha2::Sha256::new(),
            len: 0,
        }
    }

    /// The value `bytes`, held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self {
            sha256: sha2::Sha256::new_with_prefix(&bytes),
            len: bytes.len() as u64,
            target: Target::Memory(bytes),
        }
    }

    /// An empty value in a new temporary file at `tmp` (its directory
    /// created if missing): a name no other writer uses.
    ///
    /// # Errors
    ///
    /// When the directory or the file cannot be created.
    pub(crate) fn file(tmp: PathBuf) -> io::Result<Self> {
        if let Some(dir) = tmp.parent() {
            fs::create_dir_all(dir)?;
        }
        let file = Box::new(DirectWriter::create(tmp.clone())?);
        Ok(Self {
            target: Target::File {
                tmp: Some(tmp),
                file,
                unsynced: 0,
                sync_every: SYNC_EVERY,
            },
            sha256: sha2::Sha256::new(),
            len: 0,
        })
    }

    /// This value synced only when finished or committed, not every
    /// [`SYNC_EVERY`] bytes: for a value written all at once and read back
    /// soon (a build's full hashes, out of memory while its filter is
    /// built, which the build syncs from another thread meanwhile:
    /// [`Self::file_handle`]). Written and read back through the page cache
    /// unless `direct` (other staged files bypass it where they can,
    /// [`super::direct`]): the caller decides by the value's size
    /// ([`super::spill`]).
    #[must_use]
    pub fn synced_at_commit(mut self, direct: bool) -> Self {
        if let Target::File { file, sync_every, .. } = &mut self.target {
            if !direct {
                file.through_page_cache();
            }
            *sync_every = u64::MAX;
        }
        self
    }

    /// Writes `bytes` without hashing them: for a writer that computes
    /// their SHA-256 on another thread, alongside the write, and hands it
    /// over with [`Self::set_sha256`] before anything reads it.
    pub(crate) fn write_all_unhashed(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.write_target(bytes)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => bytes = &bytes[n..],
            }
        }
        Ok(())
    }

    /// Writes what it can of `buf` to the target (and counts it), syncing
    /// a file every `sync_every` bytes: every write but the SHA-256.
    fn write_target(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = match &mut self.target {
            Target::Memory(bytes) => {
                bytes.extend_from_slice(buf);
                buf.len()
            }
            Target::File {
                file,
                unsynced,
                sync_every,
                ..
            } => {
                let n = file.write(buf)?;
                *unsynced += n as u64;
                if *unsynced >= *sync_every {
                    // On the disk now, not all at the commit (what the
                    // window holds goes with the next sync).
                    file.file().sync_data()?;
                    *unsynced = 0;
                }
                n
            }
        };
        self.len += n as u64;
        Ok(n)
    }

    /// The SHA-256 of every byte written, computed by the caller of
    /// [`Self::write_all_unhashed`] (over all of them: it replaces the
    /// digest so far).
    pub(crate) fn set_sha256(&mut self, sha256: sha2::Sha256) {
        self.sha256 = sha256;
    }

    /// Another handle on the file written (its buffer flushed first), to
    /// sync what is written from another thread while this one goes on
    /// (the commit then finds little left to write to disk); `None` in
    /// memory.
    ///
    /// # Errors
    ///
    /// When the buffer cannot be flushed or the handle duplicated.
    pub(crate) fn file_handle(&mut self) -> io::Result<Option<fs::File>> {
        match &mut self.target {
            Target::Memory(_) => Ok(None),
            Target::File { file, .. } => {
                file.flush()?;
                file.file().try_clone().map(Some)
            }
        }
    }

    /// What was written so far, read from the start (flushed first): past
    /// the page cache when it was written so ([`DirectReader`]). The
    /// caller checks it against [`Self::len`] and [`Self::sha256_hex`].
    ///
    /// # Errors
    ///
    /// When the written bytes cannot be flushed or the file reopened.
    pub fn read_back(&mut self) -> io::Result<Box<dyn io::Read + Send + '_>> {
        match &mut self.target {
            Target::Memory(bytes) => Ok(Box::new(io::Cursor::new(bytes.as_slice()))),
            Target::File { tmp, file, .. } => {
                file.flush()?;
                let path = tmp
                    .as_deref()
                    .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
                if file.is_direct() {
                    Ok(Box::new(DirectReader::open(path)?))
                } else {
                    Ok(Box::new(fs::File::open(path)?))
                }
            }
        }
    }

    /// Whether it is written to a file past the page cache.
    pub fn is_direct(&self) -> bool {
        matches!(&self.target, Target::File { file, .. } if file.is_direct())
    }

    /// Whether it is written to a file (worth a thread of its own: its
    /// writes wait for the disk).
    pub fn is_file(&self) -> bool {
        matches!(self.target, Target::File { .. })
    }

    /// Its length so far, in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The SHA-256 of what was written, in hex.
    pub fn sha256_hex(&self) -> String {
        hex::encode(self.sha256.clone().finalize())
    }

    /// Writes what is buffered and syncs a file: after this, a commit only
    /// renames.
    ///
    /// # Errors
    ///
    /// When the write or the sync fails.
    pub fn finish(&mut self) -> io::Result<()> {
        if let Target::File { file, unsynced, .. } = &mut self.target {
            file.flush()?;
            file.file().sync_data()?;
            *unsynced = 0;
        }
        Ok(())
    }

    /// What was written, read back (for tests and small values).
    ///
    /// # Errors
    ///
    /// When a file cannot be flushed or read.
    pub fn contents(&mut self) -> io::Result<Vec<u8>> {
        match &mut self.target {
            Target::Memory(bytes) => Ok(bytes.clone()),
            Target::File { tmp, file, .. } => {
                file.flush()?;
                fs::read(tmp.as_deref().unwrap_or(Path::new("")))
            }
        }
    }

    /// Its bytes for a commit, a file finished first ([`Staged::finish`]).
    ///
    /// # Errors
    ///
    /// When finishing the file fails (it is then removed).
    pub(crate) fn into_parts(mut self) -> io::Result<Parts> {
        self.finish()?;
        match &mut self.target {
            Target::Memory(bytes) => Ok(Parts::Memory(std::mem::take(bytes))),
            Target::File { tmp, .. } => Ok(Parts::File(tmp.take().unwrap_or_default())),
        }
    }
}

impl Write for Staged {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.write_target(buf)?;
        self.sha256.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.target {
            Target::Memory(_) => Ok(()),
            Target::File { file, .. } => file.flush(),
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // Not committed: nothing of it stays.
        if let Target::File { tmp: Some(tmp), .. } = &self.target {
            let _ = fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    #[test]
    fn a_staged_file_hashes_what_it_holds_and_leaves_nothing_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut staged = Staged::file(dir.path().join("a.tmp")).unwrap();
        assert!(staged.is_file() && staged.is_empty());
        let piece = vec![7u8; (SYNC_EVERY / 3) as usize];
        for _ in 0..4 {
            staged.write_all(&piece).unwrap();
        }
        let whole = piece.repeat(4);
        assert_eq!(staged.len(), whole.len() as u64);
        assert_eq!(staged.sha256_hex(), hex::encode(sha2::Sha256::digest(&whole)));
        assert_eq!(staged.contents().unwrap(), whole);
        assert_eq!(
            Staged::from_bytes(whole.clone()).sha256_hex(),
            staged.sha256_hex()
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        drop(staged);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_staged_file_reads_back_what_was_written_before_it_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let mut staged = Staged::file(dir.path().join("c.tmp"))
            .unwrap()
            .synced_at_commit(false);
        let whole: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        staged.write_all(&whole).unwrap();
        let mut back = Vec::new();
        staged.read_back().unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(back, whole);
        let mut memory = Staged::memory().synced_at_commit(false);
        memory.write_all(b"xyz").unwrap();
        let mut back = Vec::new();
        memory.read_back().unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(back, b"xyz");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_staged_copy_bypasses_the_page_cache_and_small_full_hashes_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let copy = Staged::file(dir.path().join("copy.tmp")).unwrap();
        // Where the test's directory takes O_DIRECT (tmpfs before Linux
        // 6.6 does not).
        let takes_direct = super::super::direct::open_direct(&dir.path().join("probe")).is_ok();
        assert!(copy.is_file());
        assert_eq!(copy.is_direct(), takes_direct);
        let hashes = Staged::file(dir.path().join("hashes.tmp"))
            .unwrap()
            .synced_at_commit(false);
        assert!(hashes.is_file() && !hashes.is_direct());
        // Large ones (the caller decides) stay direct, and read back so.
        let mut large = Staged::file(dir.path().join("large.tmp"))
            .unwrap()
            .synced_at_commit(true);
        assert_eq!(large.is_direct(), takes_direct);
        large.write_all(&[7; 5000]).unwrap();
        let mut back = Vec::new();
        large.read_back().unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(back, [7; 5000]);
    }

    #[test]
    fn committed_parts_are_the_caller_s() {
        let dir = tempfile::tempdir().unwrap();
        let mut staged = Staged::file(dir.path().join("new/b.tmp")).unwrap();
        staged.write_all(b"abc").unwrap();
        let Parts::File(tmp) = staged.into_parts().unwrap() else {
            panic!("a file")
        };
        assert_eq!(fs::read(&tmp).unwrap(), b"abc");
        let mut memory = Staged::memory();
        memory.write_all(b"xyz").unwrap();
        assert!(!memory.is_file());
        assert!(matches!(memory.into_parts().unwrap(), Parts::Memory(b) if b == b"xyz"));
    }
}
