//! A staged file's writer ([`DirectWriter`]) and reader
//! ([`DirectReader`]): its bytes go to and from the disk without passing
//! through the page cache (`O_DIRECT`, Linux), a mebibyte at a time
//! written, four read.
//!
//! What a build stages is large, written once and, in the common case,
//! read rarely or never soon after: a source's last good copy (as large as
//! the source: 2.6 GB for a 50M-URL list) is read only when a later build
//! falls back to it. A build's full hashes, read back once its filter is
//! built, go through the page cache when they are small (under 1 GiB, where
//! reading them back from the cache is the faster:
//! [`DirectWriter::through_page_cache`], see `super::spill`), and are
//! written and read back direct when larger. Written through the page cache, each byte is first
//! copied into a page the kernel allocates for it (on a virtual machine
//! whose host reclaims free memory, a fresh page costs a fault in the
//! host too: 1.2–2 s of system time a gigabyte, measured with `dd`
//! against 0.1 s with `oflag=direct`), and those pages then push out of
//! the cache what the machine was using. The staged files were already
//! synced as they grew (every [`super::staged::SYNC_EVERY`] bytes), so the
//! disk's speed was paid either way; direct I/O drops only the copy into
//! the cache.
//!
//! Direct I/O needs every write's memory, length and file offset aligned
//! to the device's logical block size: the window written is aligned to
//! [`ALIGN`] (4096 bytes, a multiple of every common logical block size),
//! whole windows are written at aligned offsets, and a flush writes the
//! last partial block padded with zeros and then cuts the file to its
//! length (`ftruncate`), keeping that block to be written again whole (a
//! flush costs a direct write and a truncation: the staged files flush
//! once, at their end). A file system that refuses `O_DIRECT` at open, or
//! any direct write as invalid (`EINVAL`: tmpfs before Linux 6.6, some
//! network and FUSE file systems, a logical block size over [`ALIGN`]),
//! gets its writes through the page cache from then on, as before; so
//! does every other platform.

use std::fs;
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

/// The alignment of a direct write's memory, length and offset.
pub(crate) const ALIGN: usize = 4096;

/// Bytes written at a time: a whole window.
const WINDOW: usize = 1 << 20;

/// Bytes read at a time: one request to the disk each, read back to back.
const READ_WINDOW: usize = 4 << 20;

/// See the module documentation.
pub(crate) struct DirectWriter {
    file: fs::File,
    path: PathBuf,
    /// `WINDOW + ALIGN` bytes: the window is the aligned `WINDOW` bytes
    /// from `start`.
    buf: Vec<u8>,
    start: usize,
    /// Bytes of the window written by the caller.
    filled: usize,
    /// Bytes of the window already in the file (a flush with nothing
    /// after it writes nothing).
    flushed: usize,
    /// Where the window's first byte goes in the file (a multiple of
    /// `ALIGN`).
    offset: u64,
    /// Whether the file is open with `O_DIRECT`.
    direct: bool,
    /// Tests: direct writes fail as a file system without them fails them.
    #[cfg(test)]
    refuse_direct: bool,
}

impl DirectWriter {
    /// Creates (or truncates) the file at `path`, open for direct writes
    /// where the platform and the file system allow them.
    ///
    /// # Errors
    ///
    /// When the file cannot be created.
    pub(crate) fn create(path: PathBuf) -> io::Result<Self> {
        let (file, direct) = open_either(&path, open_direct, |p| fs::File::create(p))?;
        let (buf, start) = aligned_buffer(WINDOW);
        Ok(Self {
            file,
            path,
            buf,
            start,
            filled: 0,
            flushed: 0,
            offset: 0,
            direct,
            #[cfg(test)]
            refuse_direct: false,
        })
    }

    /// The same file written through the page cache from now on: for a
    /// value read back soon after it is written, which would otherwise be
    /// read from the disk (a build's full hashes, when small). Taken before anything
    /// is written; if the file cannot be opened again, it stays direct.
    pub(crate) fn through_page_cache(&mut self) {
        if self.direct
            && self.offset == 0
            && self.filled == 0
            && let Ok(file) = fs::OpenOptions::new().write(true).open(&self.path)
        {
            self.file = file;
            self.direct = false;
        }
    }

    /// Whether writes bypass the page cache (so far: a refused write
    /// turns them through it).
    pub(crate) fn is_direct(&self) -> bool {
        self.direct
    }

    /// The file (for a sync, or another handle on it). What is still in
    /// the window is not in it before [`Self::flush`].
    pub(crate) fn file(&self) -> &fs::File {
        &self.file
    }

    /// Takes what fits of `bytes` into the window, writing the window out
    /// first when it is full; returns how many bytes it took.
    ///
    /// # Errors
    ///
    /// When the full window cannot be written (nothing of `bytes` is
    /// taken then).
    pub(crate) fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if bytes.is_empty() {
            return Ok(0);
        }
        if self.filled == WINDOW {
            self.write_window(WINDOW)?;
            self.offset += WINDOW as u64;
            self.filled = 0;
            self.flushed = 0;
        }
        let n = bytes.len().min(WINDOW - self.filled);
        let at = self.start + self.filled;
        self.buf[at..at + n].copy_from_slice(&bytes[..n]);
        self.filled += n;
        Ok(n)
    }

    /// Writes everything taken so far to the file, which then holds
    /// exactly those bytes. The last partial block stays in the window, to
    /// be written again whole by the next write.
    ///
    /// # Errors
    ///
    /// When a write or the truncation fails.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if self.filled == self.flushed {
            return Ok(());
        }
        if !self.direct {
            // Through the page cache: the new bytes as they are.
            let (from, to) = (self.start + self.flushed, self.start + self.filled);
            write_at(
                &mut self.file,
                &self.buf[from..to],
                self.offset + self.flushed as u64,
            )?;
            self.flushed = self.filled;
            return Ok(());
        }
        let padded = self.filled.next_multiple_of(ALIGN);
        self.buf[self.start + self.filled..self.start + padded].fill(0);
        self.write_window(padded)?;
        if padded != self.filled {
            self.file.set_len(self.offset + self.filled as u64)?;
        }
        let whole = self.filled / ALIGN * ALIGN;
        let (start, filled) = (self.start, self.filled);
        self.buf.copy_within(start + whole..start + filled, start);
        self.offset += whole as u64;
        self.filled -= whole;
        self.flushed = self.filled;
        Ok(())
    }

    /// Writes the window's first `len` bytes at its offset (direct: all
    /// of them, `len` a multiple of `ALIGN`; through the page cache: those
    /// not flushed yet). A direct write refused as invalid (`EINVAL`: a
    /// file system without direct I/O, or a logical block size over
    /// `ALIGN`) is written through the page cache, and so is every later
    /// write.
    fn write_window(&mut self, len: usize) -> io::Result<()> {
        let skip = if self.direct { 0 } else { self.flushed };
        let written = if self.refused() {
            Err(io::ErrorKind::InvalidInput.into())
        } else {
            let window = &self.buf[self.start + skip..self.start + len];
            write_at(&mut self.file, window, self.offset + skip as u64)
        };
        match written {
            Err(e) if self.direct && e.kind() == io::ErrorKind::InvalidInput => {
                self.file = fs::OpenOptions::new().write(true).open(&self.path)?;
                self.direct = false;
                let window = &self.buf[self.start..self.start + len];
                write_at(&mut self.file, window, self.offset)
            }
            other => other,
        }
    }

    /// Whether a test makes the file system refuse this direct write.
    fn refused(&self) -> bool {
        #[cfg(test)]
        return self.direct && self.refuse_direct;
        #[cfg(not(test))]
        false
    }
}

/// A file read from its start past the page cache (`O_DIRECT`, Linux) a
/// window at a time: for a large file written direct and read once soon
/// after (a build's full hashes), whose pages would otherwise each be
/// allocated in the cache, a copy on the way, and push out what the
/// machine was using. A file system that refuses direct reads at open, or
/// any of them as invalid (`EINVAL`), is read through the page cache from
/// where it got to; so is every other platform.
pub(crate) struct DirectReader {
    file: fs::File,
    /// The same file opened through the page cache beside the direct
    /// handle, taken when a direct read is refused: opened with it, so that
    /// a file removed meanwhile is still read to its end. `Some` while
    /// reads are direct.
    plain: Option<fs::File>,
    /// `READ_WINDOW + ALIGN` bytes: the window is the aligned
    /// `READ_WINDOW` bytes from `start`.
    buf: Vec<u8>,
    start: usize,
    /// The window's bytes not yet given out: `pos..end` of the window.
    pos: usize,
    end: usize,
    /// Bytes of the file read into windows so far (where the next read
    /// starts: a multiple of `ALIGN` while reads are direct and whole).
    offset: u64,
    /// Tests: direct reads fail as a file system without them fails them.
    #[cfg(test)]
    refuse_direct: bool,
}

impl DirectReader {
    /// Opens the file at `path` for reading, direct where the platform and
    /// the file system allow it.
    ///
    /// # Errors
    ///
    /// When the file cannot be opened.
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let (file, direct) = open_either(path, open_direct_read, |p| fs::File::open(p))?;
        let plain = if direct { Some(fs::File::open(path)?) } else { None };
        let (buf, start) = aligned_buffer(READ_WINDOW);
        Ok(Self {
            file,
            plain,
            buf,
            start,
            pos: 0,
            end: 0,
            offset: 0,
            #[cfg(test)]
            refuse_direct: false,
        })
    }

    /// Whether reads bypass the page cache.
    fn is_direct(&self) -> bool {
        self.plain.is_some()
    }

    /// Reads the next window from `offset`; `0` at the end of the file. A
    /// direct read refused as invalid (or one that would start unaligned,
    /// after a short read) goes on through the page cache, on the handle
    /// opened beside the direct one, from the same offset.
    fn fill(&mut self) -> io::Result<usize> {
        loop {
            let refused = self.is_direct() && (self.refused() || !self.offset.is_multiple_of(ALIGN as u64));
            let read = if refused {
                Err(io::ErrorKind::InvalidInput.into())
            } else {
                self.file
                    .read(&mut self.buf[self.start..self.start + READ_WINDOW])
            };
            match read {
                Ok(n) => {
                    self.offset += n as u64;
                    self.pos = self.start;
                    self.end = self.start + n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::InvalidInput && self.is_direct() => {
                    if let Some(plain) = self.plain.take() {
                        self.file = plain;
                    }
                    self.file.seek(SeekFrom::Start(self.offset))?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether a test makes the file system refuse this direct read.
    fn refused(&self) -> bool {
        #[cfg(test)]
        return self.refuse_direct;
        #[cfg(not(test))]
        false
    }
}

impl io::Read for DirectReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if self.pos == self.end && self.fill()? == 0 {
            return Ok(0);
        }
        let n = out.len().min(self.end - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The file at `path` opened by `direct` where the platform and the file
/// system allow it, else by `fallback`; and whether it is direct.
fn open_either(
    path: &Path,
    direct: fn(&Path) -> io::Result<fs::File>,
    fallback: fn(&Path) -> io::Result<fs::File>,
) -> io::Result<(fs::File, bool)> {
    match direct(path) {
        Ok(file) => Ok((file, true)),
        Err(_) => Ok((fallback(path)?, false)),
    }
}

/// A buffer of `len + ALIGN` bytes, and where its `len` bytes aligned to
/// `ALIGN` start.
fn aligned_buffer(len: usize) -> (Vec<u8>, usize) {
    let buf = vec![0u8; len + ALIGN];
    let start = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
    (buf, start)
}

fn write_at(file: &mut fs::File, bytes: &[u8], offset: u64) -> io::Result<()> {
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(bytes)
}

#[cfg(target_os = "linux")]
pub(crate) fn open_direct(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn open_direct(_path: &Path) -> io::Result<fs::File> {
    Err(io::ErrorKind::Unsupported.into())
}

#[cfg(target_os = "linux")]
fn open_direct_read(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

#[cfg(not(target_os = "linux"))]
fn open_direct_read(_path: &Path) -> io::Result<fs::File> {
    Err(io::ErrorKind::Unsupported.into())
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    /// Every byte of `bytes` taken by `writer`, a window at a time.
    fn write_all(writer: &mut DirectWriter, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = writer.write(bytes).unwrap();
            bytes = &bytes[n..];
        }
    }

    #[test]
    fn the_file_holds_exactly_what_was_written_at_every_flush() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tmp");
        let mut writer = DirectWriter::create(path.clone()).unwrap();
        let whole = bytes(3 * WINDOW + 5_000);
        let mut written = 0;
        // Pieces of every size, a flush (an unaligned end) between some.
        for (i, size) in [1, 4095, 4096, 4097, 100, WINDOW, 3 * ALIGN + 1, 77_777]
            .into_iter()
            .cycle()
            .enumerate()
        {
            if written == whole.len() {
                break;
            }
            let end = (written + size).min(whole.len());
            write_all(&mut writer, &whole[written..end]);
            written = end;
            if i % 3 == 0 {
                writer.flush().unwrap();
                assert_eq!(
                    fs::read(&path).unwrap(),
                    whole[..written],
                    "after {written} bytes"
                );
            }
        }
        writer.flush().unwrap();
        writer.file().sync_data().unwrap();
        assert_eq!(fs::read(&path).unwrap(), whole);
        // Nothing written: an empty file.
        let mut empty = DirectWriter::create(dir.path().join("b.tmp")).unwrap();
        empty.flush().unwrap();
        assert_eq!(fs::read(dir.path().join("b.tmp")).unwrap(), b"");
    }

    #[test]
    fn a_direct_write_the_file_system_refuses_is_written_through_the_page_cache() {
        for at in [1, WINDOW - 1, WINDOW, WINDOW + ALIGN + 7] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("c.tmp");
            let mut writer = DirectWriter::create(path.clone()).unwrap();
            let whole = bytes(2 * WINDOW + 3);
            // Up to `at` written, flushed (direct where the file system
            // takes it), then every direct write refused.
            write_all(&mut writer, &whole[..at]);
            writer.flush().unwrap();
            writer.refuse_direct = true;
            write_all(&mut writer, &whole[at..]);
            writer.flush().unwrap();
            assert!(!writer.is_direct());
            assert_eq!(fs::read(&path).unwrap(), whole, "refused from byte {at}");
        }
    }

    /// Everything `reader` gives, taken in reads of `piece` bytes.
    fn read_all(reader: &mut DirectReader, piece: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; piece];
        loop {
            match reader.read(&mut buf).unwrap() {
                0 => return out,
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    #[test]
    fn a_direct_read_gives_the_file_s_bytes_at_every_length() {
        let dir = tempfile::tempdir().unwrap();
        for len in [
            0,
            1,
            ALIGN - 1,
            ALIGN,
            ALIGN + 1,
            READ_WINDOW - 1,
            READ_WINDOW,
            READ_WINDOW + 1,
            2 * READ_WINDOW + 3 * ALIGN + 5,
        ] {
            let path = dir.path().join(format!("r{len}.tmp"));
            let whole = bytes(len);
            // Written direct as a spill is (the reader is used on such files).
            let mut writer = DirectWriter::create(path.clone()).unwrap();
            write_all(&mut writer, &whole);
            writer.flush().unwrap();
            for piece in [1 << 20, 4097, 32] {
                if piece < 4097 && len > READ_WINDOW {
                    continue; // bytes at a time: slow, and nothing a larger piece misses
                }
                let mut reader = DirectReader::open(&path).unwrap();
                // Direct wherever the file system takes it.
                assert_eq!(reader.is_direct(), open_direct_read(&path).is_ok());
                assert_eq!(
                    read_all(&mut reader, piece),
                    whole,
                    "{len} bytes read {piece} at a time"
                );
            }
        }
    }

    #[test]
    fn a_direct_read_the_file_system_refuses_goes_on_through_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.tmp");
        let whole = bytes(2 * READ_WINDOW + 7);
        fs::write(&path, &whole).unwrap();
        // Refused from the first read, and after one or two windows.
        for windows in [0, 1, 2] {
            let mut reader = DirectReader::open(&path).unwrap();
            let mut out = Vec::new();
            let mut buf = vec![0u8; READ_WINDOW];
            for _ in 0..windows {
                let mut got = 0;
                while got < READ_WINDOW {
                    let n = reader.read(&mut buf[got..]).unwrap();
                    assert_ne!(n, 0);
                    got += n;
                }
                out.extend_from_slice(&buf);
            }
            reader.refuse_direct = true;
            out.extend(read_all(&mut reader, 100_000));
            assert!(!reader.is_direct());
            assert_eq!(out, whole, "refused after {windows} windows");
        }
    }

    #[test]
    fn a_direct_read_the_kernel_refuses_and_a_file_removed_meanwhile_are_read_to_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.tmp");
        // Not a multiple of the alignment: the last direct read is short,
        // and the next would start unaligned (the page cache takes it).
        let whole = bytes(READ_WINDOW + ALIGN + 1);
        fs::write(&path, &whole).unwrap();
        // The window's memory one byte off its alignment: the kernel itself
        // refuses the direct read (`EINVAL`), where it takes direct reads.
        let mut reader = DirectReader::open(&path).unwrap();
        reader.start += 1;
        assert!(reader.start + READ_WINDOW <= reader.buf.len());
        assert_eq!(read_all(&mut reader, 1 << 20), whole);
        assert!(!reader.is_direct());
        // Removed after the first window: the rest is still read.
        let mut reader = DirectReader::open(&path).unwrap();
        let mut first = vec![0u8; 1000];
        reader.read_exact(&mut first).unwrap();
        fs::remove_file(&path).unwrap();
        first.extend(read_all(&mut reader, 1 << 20));
        assert_eq!(first, whole);
    }

    #[test]
    fn a_file_read_back_soon_is_written_through_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.tmp");
        let mut writer = DirectWriter::create(path.clone()).unwrap();
        writer.through_page_cache();
        assert!(!writer.is_direct());
        let whole = bytes(2 * WINDOW + 1);
        let mut written = 0;
        for size in [10, WINDOW, 5, WINDOW] {
            let end = (written + size).min(whole.len());
            write_all(&mut writer, &whole[written..end]);
            written = end;
            writer.flush().unwrap();
            // Exactly the bytes written, no padding at any flush.
            assert_eq!(fs::read(&path).unwrap(), whole[..written]);
        }
        assert_eq!(written, whole.len());
    }
}
