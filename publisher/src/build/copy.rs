//! The copy of a fresh source kept as its last good content, written while
//! the source is read: the reading thread hands each piece as read (gzip as
//! received, or plain content) to a writer thread of its own, which writes
//! the copy to the storage's staged value ([`Staged`]: a temporary file in
//! the data directory, synced as it grows) as it was received, so that
//! neither the read nor the parse waits for the disk, and the build holds
//! no copy in memory. A copy held in memory (a `store`'s, put after the
//! build) is of plain content compressed with zstd instead ([`Encode`]). The
//! build then commits it under its SHA-256 if the content parsed
//! ([`crate::storage::SourceCache::store_staged`]), or drops it.
//!
//! A copy that cannot be written (a full disk) never fails the read: the
//! build goes on without it and says why.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::error::Error;
use crate::storage::Staged;

/// Pieces in flight to the writer thread (each up to a read block of
/// 256 KiB): 1 MiB, more than the parse uses while the writer syncs 4 MiB
/// (about 7 ms here); a slower disk holds the read back
/// rather than growing the build's memory (16 pieces added up to 4 MiB to
/// the peak when the disk lagged).
const PIECES_IN_FLIGHT: usize = 4;

/// How a copy is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encode {
    /// As read (gzip as received).
    AsRead,
    /// Compressed with zstd at this level (plain content).
    Zstd(i32),
    /// Plain content: as read when the copy goes to a file, compressed
    /// with zstd at this level when it is held in memory. On disk the copy
    /// costs the disk the content's size and no CPU, where zstd took a
    /// core-second per 300–500 MB of URLs from the parse on a 2-core
    /// machine (BENCHMARKS.md, row 3); in memory (a `store`'s copy, held
    /// until it is put) its size is the build's memory.
    PlainUnlessInMemory(i32),
}

/// A copy's bytes on their way into its staged value.
pub(crate) enum Sink {
    AsRead(Staged),
    Zstd(zstd::stream::write::Encoder<'static, Staged>),
}

impl Sink {
    /// The sink into `staged`, and how it stores the copy: `encode`
    /// resolved to [`Encode::AsRead`] or [`Encode::Zstd`] by where
    /// `staged` is (a file, or memory).
    fn new(staged: Staged, encode: Encode) -> io::Result<(Self, Encode)> {
        let encode = match encode {
            Encode::PlainUnlessInMemory(_) if staged.is_file() => Encode::AsRead,
            Encode::PlainUnlessInMemory(level) => Encode::Zstd(level),
            other => other,
        };
        let sink = match encode {
            Encode::Zstd(level) => Self::Zstd(zstd::stream::write::Encoder::new(staged, level)?),
            _ => Self::AsRead(staged),
        };
        Ok((sink, encode))
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Self::AsRead(staged) => staged.write_all(bytes),
            Self::Zstd(encoder) => encoder.write_all(bytes),
        }
    }

    /// The staged value, every byte written into it (its file not yet
    /// synced).
    fn finish(self) -> io::Result<Staged> {
        match self {
            Self::AsRead(staged) => Ok(staged),
            Self::Zstd(encoder) => encoder.finish(),
        }
    }
}

/// Where a fresh source's copy goes as it is read.
pub struct KeepTo(Option<Box<dyn FnOnce() -> Result<Staged, Error> + Send>>);

impl std::fmt::Debug for KeepTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "KeepTo(storage)"
        } else {
            "KeepTo(memory)"
        })
    }
}

impl KeepTo {
    /// Kept in memory (a build with no storage, and tests).
    pub fn memory() -> Self {
        Self(None)
    }

    /// Written to what `stage` gives ([`crate::storage::SourceCache::stage`]),
    /// called only if the source is fresh.
    pub fn deferred(stage: impl FnOnce() -> Result<Staged, Error> + Send + 'static) -> Self {
        Self(Some(Box::new(stage)))
    }

    /// The writer of the copy, stored as `encode` says, and how it stores
    /// it (`encode` resolved by [`Sink::new`]: [`Encode::AsRead`] or
    /// [`Encode::Zstd`]; `encode` as given when no copy could be made:
    /// nothing is written then, and [`CopyWriter::finish`] says why).
    pub(crate) fn open(self, encode: Encode) -> (CopyWriter, Encode) {
        let staged = match self.0 {
            None => Ok(Staged::memory()),
            Some(stage) => stage().map_err(|e| e.to_string()),
        };
        let sink = staged.and_then(|staged| {
            let file = staged.is_file();
            Sink::new(staged, encode)
                .map(|sink| (sink, file))
                .map_err(|e| format!("zstd: {e}"))
        });
        let (sink, encode) = match sink {
            Ok(((sink, encode), true)) => (sink, encode),
            Ok(((sink, encode), false)) => return (CopyWriter::Direct(Box::new(sink)), encode),
            Err(reason) => return (CopyWriter::Broken(reason), encode),
        };
        let (tx, rx) = sync_channel::<Piece>(PIECES_IN_FLIGHT);
        let abandoned = Arc::new(AtomicBool::new(false));
        let abandon = Arc::clone(&abandoned);
        let spawned = std::thread::Builder::new()
            .name("source-copy".to_owned())
            .spawn(move || {
                let mut sink = sink;
                loop {
                    // A closed channel without its end, or a read given up:
                    // the copy is dropped (and its file with it) unsynced.
                    match rx.recv() {
                        _ if abandon.load(Ordering::Relaxed) => break,
                        Ok(Piece::Bytes(piece)) => sink.write_all(&piece)?,
                        Ok(Piece::End) => {
                            let mut staged = sink.finish()?;
                            staged.finish()?;
                            return Ok(staged);
                        }
                        Err(_) => break,
                    }
                }
                Err(io::Error::other("the read was given up"))
            });
        let writer = match spawned {
            Ok(handle) => CopyWriter::Thread(Writer {
                tx: Some(tx),
                handle: Some(handle),
                abandoned,
            }),
            Err(e) => CopyWriter::Broken(format!("starting its writer: {e}")),
        };
        (writer, encode)
    }
}

/// What the reading thread sends the writer thread.
enum Piece {
    /// The next bytes of the copy.
    Bytes(Vec<u8>),
    /// The copy is whole: finish it.
    End,
}

/// Writes a copy: into a staged value in memory, or through a writer
/// thread to one in a file. Its writes never fail; a copy that could not
/// be written says why at [`CopyWriter::finish`].
pub(crate) enum CopyWriter {
    Direct(Box<Sink>),
    Thread(Writer),
    Broken(String),
}

/// The writer thread of a copy in a file. Dropped unfinished (a read that
/// failed), it tells the thread to give up and waits for it, so the staged
/// file is gone when the read returns.
pub(crate) struct Writer {
    tx: Option<SyncSender<Piece>>,
    handle: Option<JoinHandle<io::Result<Staged>>>,
    abandoned: Arc<AtomicBool>,
}

impl Writer {
    /// The copy, its last pieces written and its file synced, or why there
    /// is none.
    fn finish(mut self) -> Result<Staged, String> {
        let ended = self.tx.take().is_some_and(|tx| tx.send(Piece::End).is_ok());
        let joined = joined(self.handle.take());
        match joined {
            Ok(staged) if ended => Ok(staged),
            Ok(_) => Err("its writer stopped".to_owned()),
            Err(reason) => Err(reason),
        }
    }

    /// Sends `piece`; `Err` with the writer's reason when it has ended.
    fn send(&mut self, piece: &[u8]) -> Result<(), String> {
        if self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.send(Piece::Bytes(piece.to_vec())).is_ok())
        {
            return Ok(());
        }
        // The writer thread ended early: its error.
        drop(self.tx.take());
        Err(match joined(self.handle.take()) {
            Ok(_) => "its writer stopped".to_owned(),
            Err(reason) => reason,
        })
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.abandoned.store(true, Ordering::Relaxed);
            drop(self.tx.take());
            let _ = handle.join();
        }
    }
}

impl CopyWriter {
    /// The copy, all written (and a file synced), or why there is none.
    pub(crate) fn finish(self) -> Result<Staged, String> {
        match self {
            Self::Direct(sink) => (*sink).finish().map_err(|e| e.to_string()),
            Self::Thread(writer) => writer.finish(),
            Self::Broken(reason) => Err(reason),
        }
    }
}

/// The writer thread's copy, or why there is none.
fn joined(handle: Option<JoinHandle<io::Result<Staged>>>) -> Result<Staged, String> {
    match handle.map(JoinHandle::join) {
        Some(Ok(Ok(staged))) => Ok(staged),
        Some(Ok(Err(e))) => Err(e.to_string()),
        Some(Err(_)) | None => Err("its writer stopped".to_owned()),
    }
}

impl Write for CopyWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let broken = match self {
            Self::Direct(sink) => sink.write_all(buf).err().map(|e| e.to_string()),
            Self::Thread(writer) => writer.send(buf).err(),
            Self::Broken(_) => None,
        };
        if let Some(reason) = broken {
            *self = Self::Broken(reason);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::storage::{LocalStorage, Storage};

    #[test]
    fn a_copy_through_its_thread_is_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let stage = Arc::clone(&storage);
        let mut copy = KeepTo::deferred(move || stage.stage("sources/x"))
            .open(Encode::AsRead)
            .0;
        assert!(matches!(copy, CopyWriter::Thread(_)));
        let piece: Vec<u8> = (0..=255).collect();
        for _ in 0..1000 {
            copy.write_all(&piece).unwrap();
        }
        let mut staged = copy.finish().unwrap();
        assert_eq!(staged.contents().unwrap(), piece.repeat(1000));
        storage.commit("sources/x/kept.data", staged).unwrap();
        assert_eq!(
            storage.get("sources/x/kept.data").unwrap().unwrap(),
            piece.repeat(1000)
        );
        // Nothing else left in the directory: the staged file was renamed.
        assert_eq!(storage.list("sources/x").unwrap(), ["sources/x/kept.data"]);
    }

    #[test]
    fn a_compressed_copy_is_compressed_by_its_thread_and_decodes_to_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let stage = Arc::clone(&storage);
        let mut copy = KeepTo::deferred(move || stage.stage("sources/x"))
            .open(Encode::Zstd(1))
            .0;
        assert!(matches!(copy, CopyWriter::Thread(_)));
        let text = b"http://example.com/a/b?c=d\n".repeat(20_000);
        for piece in text.chunks(100_003) {
            copy.write_all(piece).unwrap();
        }
        let mut staged = copy.finish().unwrap();
        let stored = staged.contents().unwrap();
        assert!(stored.len() * 20 < text.len(), "{} bytes", stored.len());
        assert_eq!(zstd::stream::decode_all(stored.as_slice()).unwrap(), text);
        // The same through a copy held in memory.
        let mut memory = KeepTo::memory().open(Encode::Zstd(1)).0;
        memory.write_all(&text).unwrap();
        let stored = memory.finish().unwrap().contents().unwrap();
        assert_eq!(zstd::stream::decode_all(stored.as_slice()).unwrap(), text);
    }

    /// Plain content is kept as received in a file (no CPU for the copy
    /// beside the parse) and compressed only when held in memory.
    #[test]
    fn plain_content_is_kept_plain_in_a_file_and_compressed_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let stage = Arc::clone(&storage);
        let text = b"http://example.com/a/b?c=d\n".repeat(20_000);
        let (mut copy, encode) =
            KeepTo::deferred(move || stage.stage("sources/x")).open(Encode::PlainUnlessInMemory(1));
        assert_eq!(encode, Encode::AsRead);
        assert!(matches!(copy, CopyWriter::Thread(_)));
        copy.write_all(&text).unwrap();
        assert_eq!(copy.finish().unwrap().contents().unwrap(), text);
        let (mut memory, encode) = KeepTo::memory().open(Encode::PlainUnlessInMemory(1));
        assert_eq!(encode, Encode::Zstd(1));
        memory.write_all(&text).unwrap();
        let stored = memory.finish().unwrap().contents().unwrap();
        assert!(stored.len() * 20 < text.len(), "{} bytes", stored.len());
        assert_eq!(zstd::stream::decode_all(stored.as_slice()).unwrap(), text);
    }

    #[test]
    fn a_copy_that_cannot_be_made_says_why_and_takes_every_write() {
        let mut copy = KeepTo::deferred(|| {
            Err(Error::Storage {
                path: "sources/x".into(),
                reason: io::Error::other("disk full"),
            })
        })
        .open(Encode::AsRead)
        .0;
        copy.write_all(b"abc").unwrap();
        let reason = copy.finish().unwrap_err();
        assert!(reason.contains("disk full"), "{reason}");
        let mut memory = KeepTo::memory().open(Encode::AsRead).0;
        memory.write_all(b"abc").unwrap();
        assert_eq!(memory.finish().unwrap().contents().unwrap(), b"abc");
    }

    #[test]
    fn a_copy_given_up_leaves_no_file_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir.path()).unwrap());
        let stage = Arc::clone(&storage);
        let mut copy = KeepTo::deferred(move || stage.stage("sources/x"))
            .open(Encode::AsRead)
            .0;
        for _ in 0..100 {
            copy.write_all(&[1u8; 64 * 1024]).unwrap();
        }
        // A read that failed drops its copy unfinished.
        drop(copy);
        assert!(storage.list("sources/x").unwrap().is_empty());
    }
}
