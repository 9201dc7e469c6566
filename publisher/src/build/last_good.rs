//! A source's last good content, read only when a build falls back to it.

use std::io::Read;

use crate::fetch::ContentEncoding;
use crate::storage::CacheMeta;

/// A source's last good content and its metadata, handed to the build by
/// its caller and read only when the build falls back to it: most builds
/// never need it, and it is as large as the source.
pub struct LastGood {
    read: Option<Box<ReadLastGood>>,
    /// Fewer entries than this in fresh content, and the last good content
    /// is used instead ([`LastGood::requiring`]).
    min_accepted: u64,
}

/// Reads a source's last good content (as stored, with its encoding) and
/// its metadata.
type ReadLastGood = dyn FnOnce() -> Option<(Box<dyn Read + Send>, ContentEncoding, CacheMeta)> + Send;

impl LastGood {
    /// No last good content.
    pub fn none() -> Self {
        Self {
            read: None,
            min_accepted: 0,
        }
    }

    /// Plain content already in memory.
    pub fn in_memory(bytes: Vec<u8>, meta: CacheMeta) -> Self {
        Self::deferred(move || {
            Some((
                Box::new(std::io::Cursor::new(bytes)) as Box<dyn Read + Send>,
                ContentEncoding::Identity,
                meta,
            ))
        })
    }

    /// Content that `open` gets when (and only if) the build needs it: a
    /// reader of the stored bytes (read as they are parsed, e.g.
    /// [`SourceCache::open_encoded`](crate::storage::SourceCache::open_encoded))
    /// and how they are encoded. A read error, a failed check of the
    /// content included, makes the build drop what it parsed of it.
    pub fn deferred(
        open: impl FnOnce() -> Option<(Box<dyn Read + Send>, ContentEncoding, CacheMeta)> + Send + 'static,
    ) -> Self {
        Self {
            read: Some(Box::new(open)),
            min_accepted: 0,
        }
    }

    /// The same content, used instead of fresh content that gives fewer
    /// than `min_accepted` entries: a block source whose feed was emptied
    /// or cut short where no error shows (a `200` with an empty body, a
    /// close-delimited body cut), beside other sources that keep the list's
    /// own count within its gates. The caller sets it from `max_shrink` and
    /// the last good content's entries (0 under `--force`).
    pub fn requiring(self, min_accepted: u64) -> Self {
        Self { min_accepted, ..self }
    }

    pub(super) fn min_accepted(&self) -> u64 {
        self.min_accepted
    }

    pub(super) fn take(self) -> Option<(Box<dyn Read + Send>, ContentEncoding, CacheMeta)> {
        self.read.and_then(|read| read())
    }
}

impl std::fmt::Debug for LastGood {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.read.is_some() {
            "LastGood(..)"
        } else {
            "LastGood(None)"
        })
    }
}
