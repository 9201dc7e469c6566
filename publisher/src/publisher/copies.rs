//! Fresh sources' copies, held until the build that read them is published
//! (or found unchanged): a copy that a gate refuses, or that a build which
//! fails or loses the store's race read, never becomes its source's last
//! good content, so a later failure of that source falls back to the
//! content last published.

use std::time::{Duration, Instant};

use crate::build::SourceUpdate;
use crate::fetch::ContentEncoding;
use crate::storage::{CacheMeta, SourceCache, Staged};

/// The copies of one build's fresh sources, by source index. Dropped
/// without [`PendingCopies::commit`], they leave nothing behind (the staged
/// files are removed) and each source's cache keeps its previous content
/// and validators: the next fetch asks for the new content again.
#[derive(Default)]
pub(super) struct PendingCopies(Vec<(usize, Staged, ContentEncoding, CacheMeta)>);

impl PendingCopies {
    /// Keeps `update` if it is a fresh copy; gives back a metadata update,
    /// which is committed at once.
    pub(super) fn hold(&mut self, index: usize, update: SourceUpdate) -> Option<CacheMeta> {
        match update {
            SourceUpdate::Store { copy, encoding, meta } => {
                self.0.push((index, copy, encoding, meta));
                None
            }
            SourceUpdate::Meta(meta) => Some(meta),
        }
    }

    /// Commits every copy as its source's last good content (a rename in
    /// the data directory); returns the time it took.
    pub(super) fn commit(self, caches: &[(SourceCache, String)]) -> Duration {
        let started = Instant::now();
        for (index, copy, encoding, meta) in self.0 {
            let Some((cache, label)) = caches.get(index) else {
                continue;
            };
            if let Err(e) = cache.store_staged(copy, encoding, &meta) {
                tracing::warn!(source = %label, error = %e, "could not cache source content");
            }
        }
        started.elapsed()
    }
}
