//! Fresh sources' copies, held until the build that read them ends: kept
//! as their sources' last good content unless a gate refuses the build or
//! it loses the store's race (a copy a gate refused, kept, would be what a
//! later failure of that source falls back to), and never that of a source
//! the per-source `max_shrink` refuses.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::build::SourceUpdate;
use crate::error::GateRefusal;
use crate::fetch::ContentEncoding;
use crate::status::SourceView;
use crate::storage::{CacheMeta, SourceCache, Staged};

/// The copies of one build's fresh sources, by source index, with their
/// metadata (`None`: fresh content whose copy could not be made, measured
/// by the gates all the same; its content is never stored, its count is,
/// as the next baseline). Dropped without
/// [`PendingCopies::commit`], they leave nothing behind (the staged files
/// are removed) and each source's cache keeps its previous content and
/// validators: the next fetch asks for the new content again.
#[derive(Default)]
pub(super) struct PendingCopies(Vec<(usize, Option<StagedCopy>, CacheMeta)>);

/// A staged copy and its encoding.
type StagedCopy = (Staged, ContentEncoding);

impl PendingCopies {
    /// A build's source updates, by source index: each fresh copy held,
    /// each metadata update committed at once, and the validators `views`
    /// (the status page's) show updated: none once a refused copy's are
    /// dropped (a fresh copy's new ones are shown as fetched, though kept
    /// only once its build is published).
    pub(super) fn sort(
        updates: Vec<(usize, SourceUpdate)>,
        caches: &[(SourceCache, String)],
        views: &Mutex<Vec<SourceView>>,
    ) -> Self {
        let mut held = Self::default();
        for (index, update) in updates {
            let meta = match update {
                SourceUpdate::Store { copy, encoding, meta } => {
                    held.0.push((index, Some((copy, encoding)), meta));
                    continue;
                }
                SourceUpdate::Unkept(meta) => {
                    held.0.push((index, None, meta));
                    continue;
                }
                SourceUpdate::Meta(meta) => meta,
            };
            let Some((cache, label)) = caches.get(index) else {
                continue;
            };
            match cache.store_meta(&meta) {
                Ok(()) => {
                    if let Ok(mut views) = views.lock()
                        && let Some(view) = views.get_mut(index)
                    {
                        view.validators = meta.validators;
                    }
                }
                Err(e) => {
                    tracing::warn!(source = %label, error = %e, "could not store the source's metadata");
                }
            }
        }
        held
    }

    /// The `max_shrink` gate per block source, in a list of several (of one,
    /// the list's own gate sees the same): each source (below `blocks`,
    /// the block sources' count) whose fresh content (its copy kept or not)
    /// gave fewer entries, by more than `max_shrink`, than its baseline:
    /// the count its last good content gave, or, when that content's copy
    /// could not be stored, the count recorded in its place
    /// ([`Self::commit`]). A feed emptied or cut short where no error
    /// shows (a `200` with an empty body) beside larger sources would
    /// otherwise leave the list within its own gate. An allow source that
    /// shrinks can only block more, and is not checked.
    pub(super) fn shrunk(
        &self,
        caches: &[(SourceCache, String)],
        blocks: usize,
        max_shrink: f64,
    ) -> Vec<(usize, GateRefusal)> {
        if blocks < 2 {
            return Vec::new();
        }
        (self.0.iter())
            .filter(|(index, ..)| *index < blocks)
            .filter_map(|(index, _, meta)| {
                let (cache, label) = caches.get(*index)?;
                let previous = cache.baseline()?;
                let refused = (meta.accepted as f64) < previous as f64 * (1.0 - max_shrink);
                refused.then(|| {
                    let gate = GateRefusal::SourceShrink {
                        label: label.clone(),
                        accepted: meta.accepted,
                        previous_accepted: previous,
                        max_shrink,
                    };
                    (*index, gate)
                })
            })
            .collect()
    }

    /// Without the copies of `sources` (from [`PendingCopies::shrunk`]):
    /// kept no longer.
    pub(super) fn forget(mut self, sources: &[(usize, GateRefusal)]) -> Self {
        self.0
            .retain(|(index, ..)| !sources.iter().any(|(s, _)| s == index));
        self
    }

    /// Marks the stored copy of every source whose fresh content this build
    /// read as older than what build `version` is about to publish
    /// ([`SourceCache::mark_behind`]), before it publishes: a build killed
    /// between publishing and [`Self::commit`], or a copy that cannot be
    /// stored, leaves no fallback that would drop the entries published.
    /// Returns the time it took.
    pub(super) fn mark_behind(&self, caches: &[(SourceCache, String)], version: u64) -> Duration {
        let started = Instant::now();
        for (index, ..) in &self.0 {
            let Some((cache, label)) = caches.get(*index) else {
                continue;
            };
            if let Err(e) = cache.mark_behind(version) {
                tracing::warn!(source = %label, error = %e, "could not mark the source's last good content as older than the content being published");
            }
        }
        started.elapsed()
    }

    /// Commits every copy as its source's last good content (a rename in
    /// the data directory); returns the time it took. A source whose copy
    /// could not be made keeps its content and validators, but the count
    /// of entries its fresh content gave becomes its gate's baseline, as a
    /// stored copy's would ([`SourceCache::store_accepted`]): measured
    /// against the last copy written instead, a source that grew while
    /// copies failed could shrink back unseen by up to that growth.
    pub(super) fn commit(self, caches: &[(SourceCache, String)]) -> Duration {
        let started = Instant::now();
        for (index, copy, meta) in self.0 {
            let Some((cache, label)) = caches.get(index) else {
                continue;
            };
            let Some((copy, encoding)) = copy else {
                if let Err(e) = cache.store_accepted(meta.accepted) {
                    tracing::warn!(source = %label, error = %e, "could not record the entries the source's content gave");
                }
                continue;
            };
            if let Err(e) = cache.store_staged(copy, encoding, &meta) {
                tracing::warn!(source = %label, error = %e, "could not cache source content");
            }
        }
        started.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::{SourceConfig, SourceFormat};
    use crate::fetch::Validators;
    use crate::storage::{LocalStorage, Storage};

    /// The caches of a list's two `urls` sources, `a.txt` and `b.txt`, in
    /// a data directory at `dir`.
    fn two_sources(dir: &std::path::Path) -> Vec<(SourceCache, String)> {
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir).unwrap());
        ["a.txt", "b.txt"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let config = SourceConfig::file(*name, SourceFormat::Urls);
                (
                    SourceCache::source(Arc::clone(&storage), "l", i, &config),
                    (*name).to_owned(),
                )
            })
            .collect()
    }

    fn meta(accepted: u64) -> CacheMeta {
        CacheMeta {
            accepted,
            ..CacheMeta::default()
        }
    }

    /// Fresh content whose copy could not be made (a full disk) is still
    /// measured by the per-source `max_shrink` gate, and stores nothing: an
    /// emptied source beside another was published when its copy failed.
    #[test]
    fn a_fresh_source_without_its_copy_is_still_measured_and_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let caches = two_sources(dir.path());
        let with_etag = |accepted| CacheMeta {
            validators: Validators {
                etag: Some("\"old\"".to_owned()),
                last_modified: None,
                date: None,
            },
            ..meta(accepted)
        };
        caches[0]
            .0
            .store(b"http://a.example/\n", &with_etag(300))
            .unwrap();
        caches[1].0.store(b"http://b.example/\n", &meta(60)).unwrap();
        assert!(caches[0].0.meta().unwrap().validators.etag.is_some());
        let views = Mutex::new(Vec::new());
        let fresh = |accepted| CacheMeta {
            fetched_at: 99,
            ..meta(accepted)
        };
        let updates = vec![
            (0, SourceUpdate::Unkept(fresh(350))),
            (1, SourceUpdate::Unkept(fresh(0))),
        ];
        let held = PendingCopies::sort(updates, &caches, &views);
        let shrunk = held.shrunk(&caches, 2, 0.5);
        assert!(
            matches!(
                shrunk.as_slice(),
                [(
                    1,
                    GateRefusal::SourceShrink {
                        accepted: 0,
                        previous_accepted: 60,
                        ..
                    }
                )]
            ),
            "{shrunk:?}"
        );
        // Committed as a forced build commits (without `forget`): each
        // source keeps its last good content and validators; what it
        // gave the build published is its baseline from now on.
        held.commit(&caches);
        assert_eq!(caches[0].0.meta().unwrap().fetched_at, 0);
        assert_eq!(caches[0].0.meta().unwrap().accepted, 350);
        // Its validators are dropped: the feed back at the stored content
        // sends it whole (measured) rather than a 304 (taken unmeasured).
        assert_eq!(caches[0].0.meta().unwrap().validators, Validators::default());
        assert_eq!(caches[1].0.meta().unwrap().accepted, 0);
        assert_eq!(caches[1].0.load().unwrap().0, b"http://b.example/\n");
    }

    /// `refused` is b.txt's (source 1) refusal, 0 entries against 60.
    fn assert_b_refused_from_60(refused: &[(usize, GateRefusal)]) {
        assert!(
            matches!(
                refused,
                [(
                    1,
                    GateRefusal::SourceShrink {
                        accepted: 0,
                        previous_accepted: 60,
                        ..
                    }
                )]
            ),
            "{refused:?}"
        );
    }

    /// A source whose first fresh content could not be kept (a full disk
    /// when the source was added) had no baseline: its count was not
    /// recorded ("no baseline without content"), so the next build's empty
    /// `200` beside a larger source passed the per-source gate and was
    /// published without the source's entries (the list's own gate does
    /// not see a small source's loss).
    #[test]
    fn regression_a_source_whose_first_copy_failed_is_still_measured_next_build() {
        let dir = tempfile::tempdir().unwrap();
        let caches = two_sources(dir.path());
        caches[0].0.store(b"http://a.example/\n", &meta(1_000)).unwrap();
        let views = Mutex::new(Vec::new());
        let build = |accepted| {
            let updates = vec![(1, SourceUpdate::Unkept(meta(accepted)))];
            PendingCopies::sort(updates, &caches, &views)
        };
        // Published with b.txt's 60 entries; its copy could not be kept.
        let first = build(60);
        assert!(first.shrunk(&caches, 2, 0.5).is_empty());
        first.commit(&caches);
        // Nothing to fall back to, and no validators: the next fetch is
        // unconditional.
        assert!(caches[1].0.meta().is_none());
        // b.txt then answers an empty `200`.
        let emptied = build(0);
        let refused = emptied.shrunk(&caches, 2, 0.5);
        assert_b_refused_from_60(&refused);
    }

    /// A source whose stored copy is gone (removed from the data directory
    /// or the store: "metadata whose content is gone counts as none") lost
    /// its `max_shrink` baseline with it: its emptied content passed.
    #[test]
    fn regression_a_source_whose_copy_is_gone_keeps_its_baseline() {
        let dir = tempfile::tempdir().unwrap();
        let caches = two_sources(dir.path());
        caches[0].0.store(b"http://a.example/\n", &meta(1_000)).unwrap();
        caches[1].0.store(b"http://b.example/\n", &meta(60)).unwrap();
        let storage = LocalStorage::open(dir.path()).unwrap();
        let mut removed = 0;
        for key in storage.list("sources/l").unwrap() {
            let b_stem = caches[1].0.meta_stem_for_test();
            if key.ends_with(".data") && key.contains(&b_stem) {
                storage.delete(&key).unwrap();
                removed += 1;
            }
        }
        assert_eq!(removed, 1);
        assert!(caches[1].0.meta().is_none());
        let views = Mutex::new(Vec::new());
        let updates = vec![(1, SourceUpdate::Unkept(meta(0)))];
        let held = PendingCopies::sort(updates, &caches, &views);
        let refused = held.shrunk(&caches, 2, 0.5);
        assert_b_refused_from_60(&refused);
    }

    /// While copies cannot be written, a source that grew and then shrank
    /// back is measured against what its last accepted content gave, not
    /// against its last copy: against the copy's 100 entries, 600 passed
    /// the gate after 2,000 were published.
    #[test]
    fn a_source_that_grew_while_its_copies_failed_cannot_shrink_back_unseen() {
        let dir = tempfile::tempdir().unwrap();
        let caches = two_sources(dir.path());
        caches[0].0.store(b"http://a.example/\n", &meta(100)).unwrap();
        caches[1].0.store(b"http://b.example/\n", &meta(50)).unwrap();
        let views = Mutex::new(Vec::new());
        let build = |accepted| {
            let updates = vec![(0, SourceUpdate::Unkept(meta(accepted)))];
            PendingCopies::sort(updates, &caches, &views)
        };
        let grown = build(2_000);
        assert!(grown.shrunk(&caches, 2, 0.5).is_empty());
        grown.commit(&caches);
        let shrunk_back = build(600);
        let refused = shrunk_back.shrunk(&caches, 2, 0.5);
        assert!(
            matches!(
                refused.as_slice(),
                [(
                    0,
                    GateRefusal::SourceShrink {
                        accepted: 600,
                        previous_accepted: 2_000,
                        ..
                    }
                )]
            ),
            "{refused:?}"
        );
        // Refused: nothing committed, the baseline stays.
        drop(shrunk_back);
        assert_eq!(caches[0].0.meta().unwrap().accepted, 2_000);
        assert_eq!(caches[0].0.load().unwrap().0, b"http://a.example/\n");
    }
}
