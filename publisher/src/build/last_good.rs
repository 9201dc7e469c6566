//! A source's last good content, read only when a build falls back to it.

use std::io::Read;

use crate::fetch::ContentEncoding;
use crate::storage::CacheMeta;

/// A source's last good content and its metadata, handed to the build by
/// its caller and read only when the build falls back to it: most builds
/// never need it, and it is as large as the source.
pub struct LastGood(Option<Box<ReadLastGood>>);

/// Reads a source's last good content (as stored, with its encoding) and
/// its metadata.
type ReadLastGood = dyn FnOnce() -> Option<(Box<dyn Read + Send>, ContentEncoding, CacheMeta)> + Send;

impl LastGood {
    /// No last good content.
    pub fn none() -> Self {
        Self(None)
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
        Self(Some(Box::new(open)))
    }

    pub(super) fn take(self) -> Option<(Box<dyn Read + Send>, ContentEncoding, CacheMeta)> {
        self.0.and_then(|read| read())
    }
}

impl std::fmt::Debug for LastGood {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "LastGood(..)"
        } else {
            "LastGood(None)"
        })
    }
}
