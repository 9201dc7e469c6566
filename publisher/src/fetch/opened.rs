//! A local source file as the build reads it: the start read when it was
//! opened, then the rest, checked at its end against the size and
//! modification time it had when opened ([`OpenedFile`]).

use std::io::Read as _;
use std::time::{Duration, SystemTime};

/// A file's size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp {
    size: u64,
    modified: Option<SystemTime>,
}

impl FileStamp {
    pub(super) fn of(metadata: &std::fs::Metadata) -> Self {
        Self {
            size: metadata.len(),
            modified: metadata.modified().ok(),
        }
    }
}

impl std::fmt::Display for FileStamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes, modified ", self.size)?;
        match self.modified.map(|t| t.duration_since(SystemTime::UNIX_EPOCH)) {
            Some(Ok(t)) => write!(f, "at {}.{:09} (Unix time)", t.as_secs(), t.subsec_nanos()),
            _ => f.write_str("at an unknown time"),
        }
    }
}

/// Why the read of a local file failed at its end: the file's size or
/// modification time is no longer what it was when it was opened (it was
/// written while the build read it: a cron `curl -o` or a `>` truncates it
/// and writes the new content as it arrives, so what was read may be any
/// mix of the two, cut mid-line). The build takes it as it takes a failed
/// fetch. Carried in the [`std::io::Error`] of the read, as
/// [`crate::storage::StoredCopyError`] is.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FileChanged(String);

/// A local file's content: the start read when it was opened, then the
/// rest, read from the same open file. At its end a regular file's
/// metadata is read again (`fstat` of the open file) and compared with
/// the size and modification time it had when opened; a difference fails
/// the read ([`FileChanged`]), at every read from then on. A file replaced
/// by a rename is not this one: the file opened is read whole as it was.
/// A named pipe or a device has no such end to check (`opened` is `None`).
pub(super) struct OpenedFile {
    pub(super) head: std::io::Cursor<Vec<u8>>,
    pub(super) file: std::fs::File,
    /// The file's size and time when it was opened, until its end checked
    /// them unchanged.
    pub(super) opened: Option<FileStamp>,
    /// A named pipe's: how long a read waits for its writer to send
    /// something (the pipe is read non-blocking). A writer that opened the
    /// pipe and then stalls would otherwise hold the build, and its list's
    /// build lock, forever; after this long without a byte the read fails
    /// ([`PipeStalled`]) and the build takes it as a failed fetch. `None`:
    /// a regular file or a device, read as it comes.
    pub(super) idle: Option<Duration>,
}

impl std::io::Read for OpenedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.head.read(buf)?;
        if n > 0 || buf.is_empty() {
            return Ok(n);
        }
        let n = match self.idle {
            Some(idle) => read_within(&mut self.file, buf, idle)?,
            None => self.file.read(buf)?,
        };
        if n == 0
            && let Some(opened) = self.opened
        {
            let now = FileStamp::of(&self.file.metadata()?);
            if now != opened {
                let reason = format!(
                    "file changed while it was read: {opened} when opened, {now} at the end of its read \
                     (written in place, by `curl -o` or `>`? write a new file and rename it over this one)"
                );
                return Err(std::io::Error::other(FileChanged(reason)));
            }
            self.opened = None;
        }
        Ok(n)
    }
}

/// Why the read of a named pipe failed: its writer sent nothing for the
/// source's wait ([`OpenedFile::idle`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PipeStalled(String);

/// A read of `file` (a named pipe opened non-blocking) that waits at most
/// `idle` for data: `poll(2)` while the pipe is empty and its writer still
/// holds it open; the end of the content when the writer closed it.
#[cfg(target_os = "linux")]
fn read_within(file: &mut std::fs::File, buf: &mut [u8], idle: Duration) -> std::io::Result<usize> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let timeout = Timespec {
        tv_sec: i64::try_from(idle.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: idle.subsec_nanos().into(),
    };
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut fds = [PollFd::new(&*file, PollFlags::IN)];
                match poll(&mut fds, Some(&timeout)) {
                    Ok(0) => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            PipeStalled(format!(
                                "named pipe stalled: its writer sent nothing for {} s",
                                idle.as_secs()
                            )),
                        ));
                    }
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn read_within(file: &mut std::fs::File, buf: &mut [u8], _idle: Duration) -> std::io::Result<usize> {
    file.read(buf)
}
