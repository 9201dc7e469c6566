//! A local source file as the build reads it: the start read when it was
//! opened, then the rest, checked at its end against the size and
//! modification time it had when opened ([`OpenedFile`]).

use std::time::SystemTime;

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
#[derive(Debug)]
pub struct FileChanged(String);

impl std::fmt::Display for FileChanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FileChanged {}

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
}

impl std::io::Read for OpenedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.head.read(buf)?;
        if n > 0 || buf.is_empty() {
            return Ok(n);
        }
        let n = self.file.read(buf)?;
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
