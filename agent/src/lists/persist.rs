//! Writing a list's snapshot, chain and record to the cache directory:
//! a failed write is reported and never stops the list from being used;
//! a snapshot that could not be written is written again before a chain on
//! it. And reading them back at start.

use std::sync::Arc;

use super::{ListSlot, Lists, Loaded, UnsavedSnapshot};
use crate::Error;
use crate::engine::accept::{ListRecord, VersionFloor};
use crate::engine::update;
use crate::shared::lock;
use crate::stats::Counters;
use crate::status::SnapshotSource;

/// Marks a list's snapshot as not on disk if the round writing it is
/// cancelled before the write's outcome is known: it is written again
/// (after that write, in the list's write order) before a chain over it.
struct MarkIfCancelled<'a> {
    slot: &'a ListSlot,
    unsaved: Option<UnsavedSnapshot>,
}

impl Drop for MarkIfCancelled<'_> {
    fn drop(&mut self) {
        if let Some(unsaved) = self.unsaved.take() {
            lock(&self.slot.meta).unsaved = Some(unsaved);
        }
    }
}

impl Lists {
    /// Loads each list's cached snapshot, chain and floor (see
    /// [`update::restore`]) — an expired snapshot too, which
    /// then answers flagged stale; quarantines what fails verification.
    pub(super) fn restore_from_cache(&self) {
        let Some(store) = &self.store else {
            return;
        };
        let now = self.shared.now();
        for slot in &self.slots {
            store.remove_temporaries(&slot.name);
            let found = store.read(&slot.name, self.max_snapshot_bytes);
            let mut meta = lock(&slot.meta);
            for problem in found.problems {
                if matches!(problem, Error::CorruptCache { .. }) {
                    Counters::bump(&self.shared.counters.cache_files_quarantined);
                }
                meta.last_storage_error = Some(problem);
            }
            let restored = update::restore(
                &slot.name,
                found.snapshot.as_deref(),
                found.chain.as_deref(),
                found.record.as_ref(),
                &self.trusted_keys,
                &self.limits,
            );
            meta.floor = restored.floor;
            meta.etag = restored.etag;
            if let Some(error) = restored.snapshot_error {
                Counters::bump(&self.shared.counters.cache_files_quarantined);
                let path = store.snapshot_path(&slot.name);
                meta.last_storage_error = Some(store.quarantine(&path, error.to_string()));
            }
            if let Some(error) = restored.chain_error {
                // The base alone, with its own floor: the next update asks
                // for the deltas from the base's version and catches up.
                if found.chain.is_some() {
                    Counters::bump(&self.shared.counters.cache_files_quarantined);
                    let path = store.chain_path(&slot.name);
                    meta.last_storage_error = Some(store.quarantine(&path, error.to_string()));
                } else {
                    meta.last_storage_error = Some(error);
                }
            }
            if restored.chain_applied {
                meta.chain = found.chain.unwrap_or_default();
            }
            if let Some(state) = restored.state {
                let version = state.version();
                if state.is_stale(now) {
                    tracing::warn!(list = %slot.name, version, "snapshot loaded from cache has expired; using it, stale, until a newer one arrives");
                    Counters::bump(&self.shared.counters.expired_snapshots_loaded_from_cache);
                } else {
                    tracing::info!(list = %slot.name, version, "snapshot loaded from cache");
                }
                Counters::bump(&self.shared.counters.snapshots_loaded_from_cache);
                slot.current.store(Some(Arc::new(Loaded {
                    state,
                    source: SnapshotSource::Cache,
                })));
            }
        }
    }

    /// Writes the chain applied since the base and the record naming the
    /// version it leads to, if a cache directory is set. A failure is
    /// counted and reported as for a snapshot. A base whose own write failed
    /// is written first; while it cannot be, the chain is not (a chain and a
    /// record naming a base not on disk, beside the older snapshot that is,
    /// would make the next start refuse that one as a rollback).
    pub(super) async fn persist_chain(&self, slot: &ListSlot, chain: Vec<u8>, record: ListRecord) {
        // The base first, if its own write failed: a chain is written only
        // over the base it applies to. Copied, not taken: a round cancelled
        // while it writes leaves it to the next.
        let unsaved = lock(&slot.meta)
            .unsaved
            .as_ref()
            .map(|u| (Arc::clone(&u.bytes), u.floor, u.etag.clone()));
        if let Some((bytes, floor, etag)) = unsaved {
            if record.base.is_some_and(|base| base != floor) {
                // Not the chain's base (not possible today: a snapshot is
                // in use before it is written): write nothing over it, and
                // say so.
                let error = Error::Storage {
                    path: self.cache_dir.clone().unwrap_or_default(),
                    reason: format!(
                        "the snapshot not yet written (version {}) is not the base of the chain (version {}): chain not written",
                        floor.version,
                        record.base.map_or(0, |b| b.version)
                    ),
                };
                tracing::warn!(list = %slot.name, %error, "cannot persist chain");
                let mut meta = lock(&slot.meta);
                meta.last_storage_error = Some(error);
                meta.chain_unsaved = true;
                return;
            }
            if !self.persist(slot, bytes, floor, etag).await {
                lock(&slot.meta).chain_unsaved = true;
                return;
            }
        }
        let Some(store) = self.store.clone() else {
            return;
        };
        // Unsaved until the write is known to have landed: a round
        // cancelled meanwhile leaves it so, for the next round to write.
        lock(&slot.meta).chain_unsaved = true;
        let list = slot.name.clone();
        let (order, ticket) = (Arc::clone(&slot.writes), slot.writes.ticket());
        let result = tokio::task::spawn_blocking(move || {
            order.write(ticket, || store.save_chain(&list, &chain, &record))
        })
        .await;
        let saved = matches!(result, Ok(Ok(())));
        self.persisted(slot, result);
        lock(&slot.meta).chain_unsaved = !saved;
    }

    /// Writes again what of the list in use is not on disk (a write that
    /// failed, or whose round was cancelled mid-write): the snapshot, and
    /// the chain applied since, if any. At the start of every round, so
    /// that a list whose next rounds bring nothing new (`304`, an empty
    /// chain) is still saved.
    pub(super) async fn persist_unsaved(&self, slot: &ListSlot) {
        let (unsaved, chain_unsaved, chain, etag) = {
            let meta = lock(&slot.meta);
            if meta.unsaved.is_none() && !meta.chain_unsaved {
                return;
            }
            let unsaved = meta
                .unsaved
                .as_ref()
                .map(|u| (Arc::clone(&u.bytes), u.floor, u.etag.clone()));
            (unsaved, meta.chain_unsaved, meta.chain.clone(), meta.etag.clone())
        };
        let record = slot.current.load().as_ref().and_then(|loaded| {
            (loaded.state.has_deltas() && !chain.is_empty()).then(|| ListRecord {
                list: slot.name.to_string(),
                floor: loaded.state.floor(),
                base: Some(loaded.state.base().floor()),
                etag,
            })
        });
        match (record, unsaved) {
            (Some(record), _) => self.persist_chain(slot, chain, record).await,
            (None, Some((bytes, floor, snapshot_etag))) => {
                self.persist(slot, bytes, floor, snapshot_etag).await;
            }
            (None, None) => {
                // No chain in use any more (a snapshot since), or none kept.
                if chain_unsaved {
                    lock(&slot.meta).chain_unsaved = false;
                }
            }
        }
    }

    /// Writes an accepted snapshot and its floor to the cache directory, if
    /// any. A failure is counted and reported in the list's status; the
    /// snapshot is used all the same (protection now beats persistence) and
    /// kept to be written again before the deltas on it
    /// (`ListMeta::unsaved`). Returns whether it is on disk (or there is
    /// no cache directory).
    pub(super) async fn persist(
        &self,
        slot: &ListSlot,
        bytes: Arc<Vec<u8>>,
        floor: VersionFloor,
        etag: Option<String>,
    ) -> bool {
        let Some(store) = self.store.clone() else {
            return true;
        };
        let record = ListRecord {
            list: slot.name.to_string(),
            floor,
            base: None,
            etag: etag.clone(),
        };
        let list = slot.name.clone();
        let (order, ticket) = (Arc::clone(&slot.writes), slot.writes.ticket());
        let unsaved = UnsavedSnapshot {
            bytes: Arc::clone(&bytes),
            floor,
            etag,
        };
        let mut cancelled = MarkIfCancelled {
            slot,
            unsaved: Some(unsaved),
        };
        let result =
            tokio::task::spawn_blocking(move || order.write(ticket, || store.save(&list, &bytes, &record)))
                .await;
        let unsaved = cancelled.unsaved.take();
        let saved = matches!(result, Ok(Ok(())));
        self.persisted(slot, result);
        lock(&slot.meta).unsaved = if saved { None } else { unsaved };
        saved
    }

    /// Counts and reports a failed write of `slot`'s files, if it failed.
    fn persisted(&self, slot: &ListSlot, result: Result<Result<(), Error>, tokio::task::JoinError>) {
        let error = match result {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e,
            Err(join) => Error::Storage {
                path: self.cache_dir.clone().unwrap_or_default(),
                reason: format!("write did not finish: {join}"),
            },
        };
        tracing::warn!(list = %slot.name, %error, "cannot persist snapshot");
        Counters::bump(&self.shared.counters.persist_failures);
        lock(&slot.meta).last_storage_error = Some(error);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Waker};

    use blocksieve_format::SigningKey;

    use super::*;
    use crate::config::AgentBuilder;
    use crate::shared::Shared;

    fn floor(version: u64) -> VersionFloor {
        VersionFloor {
            version,
            body_sha256: [version as u8; 32],
        }
    }

    /// A snapshot write whose round is cancelled before its outcome is
    /// known (a host's timeout around `update()`) used to leave a marker
    /// without the bytes, and no chain was written until the next whole
    /// snapshot: up to 2,048 deltas never reached the disk, and a restart
    /// came back on the old base. The bytes are now kept: the snapshot is
    /// written again, then the chain over it.
    #[tokio::test]
    async fn a_snapshot_whose_round_was_cancelled_is_written_again_before_a_chain() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = SigningKey::from_secret_bytes([7; 32]).public_key().clone();
        let (settings, client) = AgentBuilder::new("http://127.0.0.1:9".into())
            .list("malware")
            .trusted_key(key)
            .cache_dir(dir.path())
            .validate()
            .expect("settings");
        let shared = Arc::new(Shared::new(
            client,
            settings.base_urls.clone(),
            Arc::clone(&settings.time),
        ));
        let lists = Lists::new(&settings, shared);
        let slot = lists.slot("malware").expect("slot");
        let store = lists.store.as_ref().expect("store");

        // The write cannot finish while the list's writes are held: polled
        // once, then dropped, as a cancelled round is.
        let held = slot.writes.hold();
        {
            let write = pin!(lists.persist(slot, Arc::new(b"base 2".to_vec()), floor(2), None));
            let pending = write.poll(&mut Context::from_waker(Waker::noop()));
            assert!(pending.is_pending());
        }
        let unsaved = lock(&slot.meta)
            .unsaved
            .as_ref()
            .map(|u| (u.bytes.to_vec(), u.floor));
        assert_eq!(unsaved, Some((b"base 2".to_vec(), floor(2))));
        drop(held);

        // The next chain writes the base again (after the late write, in
        // the list's order), then the chain and its record.
        let record = |end: u64, base: u64| ListRecord {
            list: "malware".into(),
            floor: floor(end),
            base: Some(floor(base)),
            etag: None,
        };
        // What the snapshot and chain files hold.
        let on_disk = || {
            let read = |path| std::fs::read(path).unwrap_or_default();
            (
                read(store.snapshot_path("malware")),
                read(store.chain_path("malware")),
            )
        };
        let base_2_chain_3 = (b"base 2".to_vec(), b"chain 3".to_vec());
        lists.persist_chain(slot, b"chain 3".to_vec(), record(3, 2)).await;
        assert_eq!(on_disk(), base_2_chain_3);
        assert!(lock(&slot.meta).unsaved.is_none());

        // An unsaved snapshot that is not the chain's base: nothing is
        // written over it.
        lock(&slot.meta).unsaved = Some(UnsavedSnapshot {
            bytes: Arc::new(b"base 5".to_vec()),
            floor: floor(5),
            etag: None,
        });
        lists.persist_chain(slot, b"chain 4".to_vec(), record(4, 2)).await;
        assert_eq!(on_disk(), base_2_chain_3);
        assert!(matches!(
            lock(&slot.meta).last_storage_error.take(),
            Some(Error::Storage { reason, .. }) if reason.contains("not the base of the chain")
        ));
        lock(&slot.meta).unsaved = None;

        // A write that fails (a directory where the file goes) is written
        // again at the start of the next round, whatever that round brings.
        let snapshot = store.snapshot_path("malware");
        std::fs::remove_file(&snapshot).expect("remove");
        std::fs::create_dir_all(snapshot.join("blocker")).expect("blocker");
        assert!(
            !lists
                .persist(slot, Arc::new(b"base 7".to_vec()), floor(7), None)
                .await
        );
        lists.persist_unsaved(slot).await;
        assert!(lock(&slot.meta).unsaved.is_some(), "the disk still refuses it");
        std::fs::remove_dir_all(&snapshot).expect("unblock");
        lists.persist_unsaved(slot).await;
        assert_eq!(std::fs::read(&snapshot).ok(), Some(b"base 7".to_vec()));
        assert!(lock(&slot.meta).unsaved.is_none());
    }
}
