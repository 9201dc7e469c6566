//! A session's lists kept across restarts: what the host stores (the Rust
//! agent's cache directory, in values) and how it comes back.

use std::sync::Arc;
use std::time::SystemTime;

use super::Session;
use crate::Error;
use crate::accept::ListRecord;
use crate::update;

/// What a host keeps of one list to restore it after a restart (an
/// extension's service worker that is stopped when idle, an app that
/// quits), so that the next update asks for the deltas since that version
/// instead of the whole snapshot, and checks work before any request.
/// Store the three byte strings as they are; [`Session::restore`] verifies
/// them again, as the Rust agent verifies its cache directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedList {
    /// The threat list.
    pub list: String,
    /// The base snapshot, as downloaded (signed: it verifies on its own).
    pub snapshot: Arc<[u8]>,
    /// The delta chain applied to it since, as downloaded (each delta
    /// signed); empty when none.
    pub chain: Vec<u8>,
    /// The [`ListRecord`]: the version floor held against rollback and the
    /// base's ETag, as JSON.
    pub record: Vec<u8>,
}

/// What [`Session::restore`] brought back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The version now held.
    pub version: u64,
    /// Why the kept chain was dropped, if it was: the base alone was
    /// restored, older than what was kept, so entries the chain added are
    /// missing until the next update. A host should update before relying
    /// on the list, and use it meanwhile only as better than nothing.
    pub chain_error: Option<Error>,
}

impl Session {
    /// What to keep of `list` now, or `None` before its first snapshot or
    /// for a list not subscribed. Save it after an update that changed the
    /// list (its [`ListUpdate::Updated`](super::ListUpdate::Updated)); the
    /// snapshot is shared, not copied.
    pub fn saved(&self, list: &str) -> Option<SavedList> {
        let slot = self.slot(list)?;
        let state = slot.state.as_ref()?;
        let snapshot = slot.snapshot.clone()?;
        let floor = slot.floor.unwrap_or_else(|| state.floor());
        let base = state.base().floor();
        let record = ListRecord {
            list: slot.name.to_string(),
            floor,
            // The snapshot's own floor whenever it is not the floor held
            // (deltas applied).
            base: (base != floor).then_some(base),
            etag: slot.etag.clone(),
        };
        Some(SavedList {
            list: slot.name.to_string(),
            snapshot,
            chain: if state.has_deltas() {
                slot.chain.clone()
            } else {
                Vec::new()
            },
            record: record.to_bytes(),
        })
    }

    /// Restores a list from what [`Session::saved`] gave, at start: the
    /// snapshot verified as a download is (signature, limits, list name,
    /// and not older than the record's floor), then the chain applied to it
    /// (every delta verified, ending at or above that floor), as the Rust
    /// agent loads its cache directory ([`update::restore`]). An expired
    /// snapshot is restored all the same, and its verdicts say `stale` until
    /// an update brings a newer one. A chain that does not verify is
    /// dropped: the base alone is restored, and the next update asks for
    /// the deltas from its version; so is a chain missing where the
    /// record names a newer version. The record is not signed: the
    /// rollback floor kept is what the restored bytes prove, never more (a
    /// record edited or corrupt to name a far newer version would
    /// otherwise refuse every later snapshot). A record that cannot be
    /// read is ignored.
    ///
    /// A list that already holds a state (an update came first) keeps it,
    /// and its version is returned: a download is never replaced by a saved
    /// copy.
    ///
    /// Returns the version now held and, when the chain was dropped, why
    /// ([`Restored::chain_error`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSetting`] for a list not subscribed; the snapshot's
    /// errors ([`Error::Decode`], [`Error::WrongList`], [`Error::Rollback`]):
    /// discard what was kept, the list stays without a state, and the next
    /// update downloads the snapshot, which must not be older than the
    /// record's floor (kept, as the Rust agent keeps it: the snapshot
    /// refused may be an older one put in the newer one's place).
    pub fn restore(&mut self, saved: &SavedList, now: SystemTime) -> Result<Restored, Error> {
        let Some(index) = self.slots.iter().position(|s| *s.name == *saved.list) else {
            return Err(Error::InvalidSetting {
                setting: "list",
                value: format!("{:?} is not subscribed", saved.list),
            });
        };
        if let Some(state) = &self.slots[index].state {
            return Ok(Restored {
                version: state.version(),
                chain_error: None,
            });
        }
        let record = ListRecord::from_bytes(&saved.list, &saved.record).ok();
        let restored = update::restore(
            &saved.list,
            Some(&saved.snapshot),
            Some(&saved.chain),
            record.as_ref(),
            &self.trusted_keys,
            &self.limits,
        );
        if let Some(error) = restored.snapshot_error {
            // The record's floor is kept, as the Rust agent keeps it when
            // it sets a cached snapshot aside: a saved snapshot replaced by
            // an older signed one (refused as a rollback), or one that no
            // longer verifies, must not open the way for the network to
            // serve that older snapshot at the next update.
            // A second refused restore (a record unreadable or older this
            // time) never lowers or clears the floor already kept.
            let slot = &mut self.slots[index];
            if let Some(floor) = restored.floor
                && slot.floor.is_none_or(|held| held.version < floor.version)
            {
                slot.floor = Some(floor);
            }
            return Err(error);
        }
        let Some(state) = restored.state else {
            // Not reachable: a snapshot was given and not refused.
            return Err(Error::NotReady {
                list: saved.list.clone(),
            });
        };
        let version = state.version();
        let stale = state.is_stale(now);
        let slot = &mut self.slots[index];
        slot.floor = restored.floor;
        slot.etag = restored.etag;
        slot.snapshot = Some(Arc::clone(&saved.snapshot));
        slot.chain = if restored.chain_applied {
            saved.chain.clone()
        } else {
            Vec::new()
        };
        slot.state = Some(Arc::new(state));
        self.stats.restored += 1;
        if stale {
            self.stats.restored_stale += 1;
        }
        Ok(Restored {
            version,
            chain_error: restored.chain_error,
        })
    }
}
