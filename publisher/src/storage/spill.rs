//! A build's full hashes out of memory while its filter is built
//! ([`Spill`], [`SpilledHashes`]): the binary fuse construction needs about
//! 25 bytes per key besides the keys, and with the hashes (32 bytes per
//! entry) still held the two made a build's peak (BENCHMARKS.md, row 3.2).
//! Written as the `.hashes` object the build then publishes, so the write
//! is the one publishing needed anyway; read back after the filter, checked
//! against what was written (its length and XXH3-64: a check against the
//! file changing on disk, not against an adversary, who could change the
//! data directory at will; SHA-256 there cost two more passes at its
//! speed over every full hash), and committed (renamed into place) if the
//! build publishes. Its SHA-256 (which the manifest names it by) and
//! XXH3-64 are computed on a thread beside the write, and the build syncs
//! the file from another thread while it makes the filter
//! ([`SpilledHashes::file_handle`]), so neither waits on the build's path.
//! A build that publishes nothing (a gate refused it: one whose hashes
//! equal the version served spills none, [`UnlessServed`]) removes it.
//!
//! Only a storage that stages on disk (the data directory) spills; with an
//! object store the hashes stay in memory as before, since a staged value
//! there is itself held in memory.

use std::hash::Hasher as _;
use std::io::{self, Read as _, Write as _};

use blocksieve_format::FullHash;
use sha2::Digest as _;
use twox_hash::XxHash3_64;

use super::Staged;
use crate::error::Error;

/// Spills of at least this many bytes (33.5 million full hashes) are
/// written and read back past the page cache where the file system allows
/// it ([`super::direct`]); smaller ones through it. Through the page cache,
/// a spill is read back from memory, but first costs as many bytes of
/// pages the kernel allocates for it, pushing out what the machine was
/// using. On the 2-core machine of `BENCHMARKS.md` (row 3.5, 50M URLs,
/// a 1.6 GB spill, five interleaved pairs) the build's `write` stage took
/// 4.4–5.6 s through the cache and 2.5–3.9 s past it, the whole build
/// 19.3–21.6 s against 17.1–19.3 s (the same bytes out); at 10M URLs (a
/// 320 MB spill) the cache was the faster in interleaved pairs, 0.42–0.47
/// s against 0.6–0.8 s (through the cache it also measured up to 1.0 s,
/// after another build's writeback).
const DIRECT_FROM: u64 = 1 << 30;

/// Whether a spill of `bytes` goes past the page cache: [`DIRECT_FROM`].
fn direct_for(bytes: u64) -> bool {
    bytes >= DIRECT_FROM
}

/// Where a build writes its full hashes while it builds the filter.
pub trait Spill: Sync + std::fmt::Debug {
    /// Writes `hashes` (sorted, unique) out of memory; `None` when they
    /// cannot be, and the build keeps them in memory (a storage that
    /// does not stage on disk, or a failed write, which is logged).
    fn spill(&self, hashes: &[FullHash]) -> Option<SpilledHashes>;
}

/// A [`Spill`] that leaves in memory full hashes equal to the served
/// version's: such a build most likely publishes nothing (its list is
/// unchanged), and writing them out would be a write of 32 bytes an entry
/// for nothing, every build, while a feed stands still.
#[derive(Debug)]
pub struct UnlessServed<'a, S> {
    /// Where the others go.
    pub spill: &'a S,
    /// The full hashes of the version served, if any.
    pub served: Option<&'a [FullHash]>,
}

impl<S: Spill> Spill for UnlessServed<'_, S> {
    fn spill(&self, hashes: &[FullHash]) -> Option<SpilledHashes> {
        if self.served == Some(hashes) {
            return None;
        }
        self.spill.spill(hashes)
    }
}

/// Full hashes written out of memory: see the module documentation.
#[derive(Debug)]
pub struct SpilledHashes {
    staged: Staged,
    count: usize,
    /// The XXH3-64 of the bytes written.
    xxh3: u64,
    /// Where they are, for errors.
    location: String,
}

impl SpilledHashes {
    /// Writes `hashes` into `staged`, a staged value on disk (see
    /// [`Staged::is_file`]) named `location` in errors.
    ///
    /// # Errors
    ///
    /// When writing fails: `staged` is dropped, and its file with it.
    pub fn write(staged: Staged, hashes: &[FullHash], location: String) -> io::Result<Self> {
        let direct = direct_for(hashes.len() as u64 * FullHash::LEN as u64);
        Self::write_as(staged, hashes, location, direct)
    }

    /// [`Self::write`], past the page cache (`direct`) or through it
    /// whatever the size.
    pub(crate) fn write_as(
        staged: Staged,
        hashes: &[FullHash],
        location: String,
        direct: bool,
    ) -> io::Result<Self> {
        // 1 MiB a write rather than one write per hash.
        const CHUNK: usize = 1 << 15;
        let bytes_of = |chunk: &[FullHash]| -> Vec<u8> { chunk.iter().flat_map(|h| h.0).collect() };
        let mut staged = staged.synced_at_commit(direct);
        // The digests on a thread of their own while this one writes: the
        // SHA-256 (which the manifest names the object by) took a third
        // of the spill's time on this thread (BENCHMARKS.md, row 3).
        let (sha256, xxh3) = std::thread::scope(|scope| -> io::Result<(sha2::Sha256, u64)> {
            let digests = std::thread::Builder::new()
                .name("spill-digest".to_owned())
                .spawn_scoped(scope, || {
                    let mut sha256 = sha2::Sha256::new();
                    let mut xxh3 = XxHash3_64::new();
                    for chunk in hashes.chunks(CHUNK) {
                        let bytes = bytes_of(chunk);
                        sha256.update(&bytes);
                        xxh3.write(&bytes);
                    }
                    (sha256, xxh3.finish())
                })?;
            for chunk in hashes.chunks(CHUNK) {
                staged.write_all_unhashed(&bytes_of(chunk))?;
            }
            staged.flush()?;
            digests
                .join()
                .map_err(|_| io::Error::other("the digest thread panicked"))
        })?;
        staged.set_sha256(sha256);
        Ok(Self {
            staged,
            count: hashes.len(),
            xxh3,
            location,
        })
    }

    /// Another handle on the file written, to sync it from another thread
    /// while the filter is built ([`Staged::file_handle`]); `None` when it
    /// is held in memory or the handle cannot be had (the commit syncs it
    /// all the same).
    pub fn file_handle(&mut self) -> Option<std::fs::File> {
        self.staged.file_handle().ok().flatten()
    }

    /// Whether they were written past the page cache (and are read back
    /// so): see [`DIRECT_FROM`].
    pub fn is_direct(&self) -> bool {
        self.staged.is_direct()
    }

    /// How many full hashes were written.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether none were.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The full hashes read back, checked to be exactly those written (as
    /// many bytes, and the XXH3-64 of the bytes given to the write). Read
    /// into the memory returned in one pass (through the direct reader's
    /// window when it was written past the page cache: [`Staged::read_back`]).
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when the file cannot be read, [`Error::Corrupt`]
    /// when it does not hold what was written.
    pub fn read_back(&mut self) -> Result<Vec<FullHash>, Error> {
        let expected_len = self.staged.len();
        let expected_xxh3 = self.xxh3;
        let io = Error::storage(&self.location);
        let mut reader = self.staged.read_back().map_err(&io)?;
        // Zeroed memory from the allocator is mapped lazily: each page is
        // first touched by the read into it.
        let mut raw = vec![[0u8; 32]; self.count];
        let bytes = raw.as_flattened_mut();
        let filled = super::read_full(&mut reader, bytes).map_err(&io)?;
        // A file longer than written: counted to say by how much.
        let beyond = io::copy(&mut reader, &mut io::sink()).map_err(&io)?;
        let total = filled as u64 + beyond;
        let xxh3 = twox_hash::XxHash3_64::oneshot(&bytes[..filled]);
        if total != expected_len || xxh3 != expected_xxh3 {
            drop(reader);
            return Err(self.not_as_written(total, xxh3));
        }
        Ok(raw.into_iter().map(FullHash).collect())
    }

    /// The error for a file read back as `total` bytes of XXH3-64 `xxh3`,
    /// not as written.
    fn not_as_written(&self, total: u64, xxh3: u64) -> Error {
        Error::Corrupt {
            path: self.location.clone().into(),
            reason: format!(
                "full hashes read back as {total} bytes (XXH3-64 {xxh3:016x}), written as {} bytes (XXH3-64 {:016x})",
                self.staged.len(),
                self.xxh3
            ),
        }
    }

    /// Reads the full hashes back a chunk at a time into `each`, checked
    /// to be exactly those written (as many bytes, and the XXH3-64 of the
    /// bytes given to the write) once all are read: a caller drops what it
    /// made of them on an error.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when the file cannot be read, [`Error::Corrupt`]
    /// when it does not hold what was written.
    pub fn read_chunks(&mut self, mut each: impl FnMut(&[FullHash])) -> Result<(), Error> {
        let expected_len = self.staged.len();
        let expected_xxh3 = self.xxh3;
        let io = Error::storage(&self.location);
        let mut reader = self.staged.read_back().map_err(&io)?;
        let mut chunk: Vec<FullHash> = Vec::with_capacity(1 << 15);
        let mut xxh3 = XxHash3_64::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut filled = 0;
        let mut total = 0u64;
        let mut count = 0usize;
        loop {
            let n = reader.read(&mut buf[filled..]).map_err(&io)?;
            if n == 0 {
                break;
            }
            xxh3.write(&buf[filled..filled + n]);
            total += n as u64;
            filled += n;
            let whole = filled - filled % 32;
            chunk.clear();
            chunk.extend(buf[..whole].chunks_exact(32).map(|c| {
                let mut h = [0u8; 32];
                h.copy_from_slice(c);
                FullHash(h)
            }));
            count += chunk.len();
            each(&chunk);
            buf.copy_within(whole..filled, 0);
            filled -= whole;
        }
        let xxh3 = xxh3.finish();
        if total != expected_len || xxh3 != expected_xxh3 || filled != 0 || count != self.count {
            drop(reader);
            return Err(self.not_as_written(total, xxh3));
        }
        Ok(())
    }

    /// The staged value, to commit under its key, with its size and
    /// SHA-256.
    pub fn into_staged(self) -> Staged {
        self.staged
    }
}

#[cfg(test)]
mod tests {
    use sha2::Digest as _;

    use super::*;

    fn hashes(n: u32) -> Vec<FullHash> {
        (0..n).map(|i| FullHash::of(&i.to_be_bytes())).collect()
    }

    #[test]
    fn spilled_hashes_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        // Through the page cache (as a small spill is) and past it.
        for (n, direct) in [0, 1, 32_767, 32_768, 100_001]
            .into_iter()
            .flat_map(|n| [(n, false), (n, true)])
        {
            let written = hashes(n);
            let staged = Staged::file(dir.path().join(format!("{n}.tmp"))).unwrap();
            let mut spilled = SpilledHashes::write_as(staged, &written, "x".into(), direct).unwrap();
            let takes_direct = Staged::file(dir.path().join("probe.tmp")).unwrap().is_direct();
            assert_eq!(spilled.is_direct(), direct && takes_direct);
            assert_eq!(spilled.len(), n as usize);
            // Keys the way the build reads them, then the whole set.
            let mut chunked = Vec::new();
            spilled
                .read_chunks(|chunk| chunked.extend_from_slice(chunk))
                .unwrap();
            assert_eq!(chunked, written);
            // Every byte is in the file for the handle that syncs it.
            let handle = spilled.file_handle().unwrap();
            assert_eq!(handle.metadata().unwrap().len(), 32 * u64::from(n));
            assert_eq!(spilled.read_back().unwrap(), written);
            let staged = spilled.into_staged();
            let bytes: Vec<u8> = written.iter().flat_map(|h| h.0).collect();
            assert_eq!(staged.len(), bytes.len() as u64);
            assert_eq!(staged.sha256_hex(), hex::encode(sha2::Sha256::digest(&bytes)));
        }
        // Dropped uncommitted: nothing left.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_spill_goes_past_the_page_cache_from_one_gibibyte() {
        assert!(!direct_for(0));
        assert!(!direct_for((1 << 30) - 32));
        assert!(direct_for(1 << 30));
        assert!(direct_for((1 << 30) + 32));
        // 33,554,432 full hashes of 32 bytes.
        assert!(direct_for(33_554_432 * FullHash::LEN as u64));
        assert!(!direct_for(33_554_431 * FullHash::LEN as u64));
    }

    #[test]
    fn hashes_equal_to_the_served_version_s_stay_in_memory() {
        #[derive(Debug)]
        struct ToDir(std::path::PathBuf);
        impl Spill for ToDir {
            fn spill(&self, hashes: &[FullHash]) -> Option<SpilledHashes> {
                let staged = Staged::file(self.0.join("s.tmp")).unwrap();
                SpilledHashes::write(staged, hashes, "s".into()).ok()
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let to_dir = ToDir(dir.path().to_owned());
        let served = hashes(10);
        let unless = |served| UnlessServed {
            spill: &to_dir,
            served,
        };
        assert!(unless(Some(&served)).spill(&served).is_none());
        assert!(unless(Some(&served[1..])).spill(&served).is_some());
        assert!(unless(None).spill(&served).is_some());
    }

    #[test]
    fn a_spilled_file_changed_on_disk_is_refused_not_read() {
        for direct in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("h.tmp");
            let written = hashes(1000);
            let staged = Staged::file(path.clone()).unwrap();
            let mut spilled = SpilledHashes::write_as(staged, &written, "h".into(), direct).unwrap();
            // One bit flipped, then the file cut short, then longer.
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[12_345] ^= 1;
            std::fs::write(&path, &bytes).unwrap();
            let e = spilled.read_back().unwrap_err();
            assert!(matches!(e, Error::Corrupt { .. }), "{e}");
            let e = spilled.read_chunks(|_| {}).unwrap_err();
            assert!(matches!(e, Error::Corrupt { .. }), "{e}");
            std::fs::write(&path, &bytes[..bytes.len() - 32]).unwrap();
            let e = spilled.read_back().unwrap_err();
            assert!(e.to_string().contains("read back as 31968 bytes"), "{e}");
            bytes[12_345] ^= 1;
            bytes.extend_from_slice(&[0; 33]);
            std::fs::write(&path, &bytes).unwrap();
            let e = spilled.read_back().unwrap_err();
            assert!(e.to_string().contains("read back as 32033 bytes"), "{e}");
            let e = spilled.read_chunks(|_| {}).unwrap_err();
            assert!(e.to_string().contains("read back as 32033 bytes"), "{e}");
        }
    }
}
