//! Writing a list's snapshot, chain and record to the cache directory:
//! a failed write is reported and never stops the list from being used;
//! a snapshot that could not be written is written again before a chain on
//! it.

use std::sync::Arc;

use super::{ListSlot, Lists, UnsavedSnapshot};
use crate::Error;
use crate::engine::accept::{ListRecord, VersionFloor};
use crate::shared::lock;
use crate::stats::Counters;

/// Marks a list's snapshot as not on disk if the round writing it is
/// cancelled before the write's outcome is known: no chain is written over
/// it until a later snapshot is.
struct MarkIfCancelled<'a> {
    slot: &'a ListSlot,
    floor: VersionFloor,
    etag: Option<String>,
    armed: bool,
}

impl Drop for MarkIfCancelled<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(&self.slot.meta).unsaved = Some(UnsavedSnapshot {
                bytes: None,
                floor: self.floor,
                etag: self.etag.take(),
            });
        }
    }
}

impl Lists {
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
            .map(|u| (u.bytes.clone(), u.floor, u.etag.clone()));
        if let Some((bytes, floor, etag)) = unsaved {
            let Some(bytes) = bytes else {
                return;
            };
            if !self.persist(slot, bytes, floor, etag).await {
                return;
            }
        }
        let Some(store) = self.store.clone() else {
            return;
        };
        let list = slot.name.clone();
        let (order, ticket) = (Arc::clone(&slot.writes), slot.writes.ticket());
        let result = tokio::task::spawn_blocking(move || {
            order.write(ticket, || store.save_chain(&list, &chain, &record))
        })
        .await;
        self.persisted(slot, result);
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
        bytes: Vec<u8>,
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
        let mut cancelled = MarkIfCancelled {
            slot,
            floor,
            etag: etag.clone(),
            armed: true,
        };
        let result = tokio::task::spawn_blocking(move || {
            let saved = order.write(ticket, || store.save(&list, &bytes, &record));
            (saved, bytes)
        })
        .await;
        cancelled.armed = false;
        let (result, bytes) = match result {
            Ok((saved, bytes)) => (Ok(saved), Some(bytes)),
            Err(join) => (Err(join), None),
        };
        let saved = matches!(result, Ok(Ok(())));
        self.persisted(slot, result);
        lock(&slot.meta).unsaved = (!saved).then_some(UnsavedSnapshot { bytes, floor, etag });
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
