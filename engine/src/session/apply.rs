//! What an update response does to its list in a [`Session`]: a delta
//! chain applied or a fallback to the whole snapshot, a snapshot taken or
//! held, a `304` kept or asked again — and, through the round, the newest
//! version a signed freshness record named ([`update::newer_vouched`]),
//! which no later answer of the round may leave the list behind.

use std::sync::Arc;
use std::time::SystemTime;

use blocksieve_format::api::FRESHNESS_HEADER;

use super::http::status_error;
use super::{HttpResponse, ListUpdate, Session};
use crate::Error;
use crate::delta::{self, ListState};
use crate::update::{self, ChainStep, PlainBase, SnapshotStep};

impl Session {
    /// Reads a response's freshness record, if any, into `state` when it
    /// verifies and names exactly the state's version; anything else is
    /// ignored.
    fn note_freshness(&self, list: &str, state: &ListState, response: &HttpResponse) {
        if let Some(value) = response.header(FRESHNESS_HEADER)
            && let Ok(record) = delta::read_freshness(list, value, &self.trusted_keys)
        {
            state.apply_freshness(list, &record);
        }
    }

    pub(super) fn apply_deltas(
        &mut self,
        index: usize,
        url: &str,
        response: HttpResponse,
        now: SystemTime,
    ) -> Result<ListUpdate, Error> {
        let slot = &self.slots[index];
        let Some(current) = slot.state.clone() else {
            // The state is gone (not possible today): ask for the snapshot.
            let request = self.snapshot_request(slot);
            return Ok(ListUpdate::NeedSnapshot {
                reason: Some(Error::NotReady {
                    list: slot.name.to_string(),
                }),
                request,
            });
        };
        let list = slot.name.clone();
        let version = current.version();
        let fallback = |session: &Self, reason: Option<Error>| ListUpdate::NeedSnapshot {
            reason,
            request: session.snapshot_request(&session.slots[index]),
        };
        let bytes = match response.status {
            304 => {
                let freshness = response.header(FRESHNESS_HEADER);
                if let Some((vouched, error)) =
                    update::stale_validator(&list, url, &current, freshness, &self.trusted_keys)
                {
                    self.slots[index].vouched = Some(vouched);
                    return Ok(fallback(self, Some(error)));
                }
                self.slots[index].vouched = None;
                self.note_freshness(&list, &current, &response);
                return Ok(ListUpdate::Unchanged { version });
            }
            404 | 410 => return Ok(fallback(self, Some(status_error(&response, url, now)))),
            200 => &response.body,
            _ => return Err(status_error(&response, url, now)),
        };
        let etag = response.header("etag");
        // Kept for the snapshot request even when this chain is not used
        // (it does not verify, or `max_additions_ratio` sends the round to
        // the snapshot).
        let vouched = update::newer_vouched(
            &list,
            version,
            response.header(FRESHNESS_HEADER),
            &self.trusted_keys,
        );
        self.slots[index].vouched = vouched;
        let slot = &self.slots[index];
        let (state, deltas) = match update::take_chain(
            &list,
            &current,
            bytes,
            etag,
            &self.trusted_keys,
            slot.floor.as_ref(),
            // After a failed rebase the chain is taken whatever it adds
            // (the snapshot cannot be had; a ratio of 0 would send the round
            // back to it, and what was listed since would never arrive).
            if slot.rebase_failed {
                f64::INFINITY
            } else {
                self.max_additions_ratio
            },
        ) {
            // No delta since the version held, where a signed record names
            // a newer one: the snapshot says which is right.
            ChainStep::Unchanged if let Some(newer) = vouched => {
                return Ok(fallback(self, Some(update::behind(url, version, newer))));
            }
            ChainStep::Unchanged => {
                self.note_freshness(&list, &current, &response);
                return Ok(ListUpdate::Unchanged { version });
            }
            ChainStep::Fallback(reason) => return Ok(fallback(self, reason)),
            ChainStep::Advanced { state, deltas } => (state, deltas),
            // What the chain adds is in use before the snapshot is asked
            // for: should it fail, the list holds the chain's version.
            ChainStep::Short { state, deltas, error } => {
                self.note_freshness(&list, &state, &response);
                self.take_chain_state(index, state, deltas, bytes);
                return Ok(fallback(self, Some(error)));
            }
        };
        self.note_freshness(&list, &state, &response);
        let new_version = state.version();
        self.take_chain_state(index, state, deltas, bytes);
        Ok(ListUpdate::Updated {
            previous: Some(version),
            version: new_version,
        })
    }

    /// Swaps in `state`, which `deltas` deltas (`chain`, their bytes) led
    /// to from the state held, and keeps the chain for the host to save.
    fn take_chain_state(&mut self, index: usize, state: ListState, deltas: usize, chain: &[u8]) {
        let slot = &mut self.slots[index];
        slot.floor = Some(state.floor());
        slot.state = Some(Arc::new(state));
        slot.chain.extend_from_slice(chain);
        self.stats.deltas_applied += deltas as u64;
    }

    pub(super) fn apply_snapshot(
        &mut self,
        index: usize,
        url: &str,
        conditional: bool,
        response: HttpResponse,
        now: SystemTime,
    ) -> Result<ListUpdate, Error> {
        // Set by the updates route's answer that sent the round here.
        let vouched = self.slots[index].vouched.take();
        let slot = &self.slots[index];
        let list = slot.name.clone();
        let current = slot.state.clone();
        let previous = current.as_ref().map(|s| s.version());
        let plain_base = current.clone().filter(|s| !s.has_deltas());
        let etag = slot.etag.clone().filter(|_| plain_base.is_some());
        match (response.status, &plain_base) {
            (304, Some(base)) if conditional => {
                let freshness = response.header(FRESHNESS_HEADER);
                let held = base.version();
                if let Some((newer, error)) =
                    update::stale_validator(&list, url, base, freshness, &self.trusted_keys).or_else(|| {
                        vouched
                            .filter(|&v| v > held)
                            .map(|v| (v, update::behind(url, held, v)))
                    })
                {
                    // Forget the validator: the snapshot again, unconditionally.
                    self.slots[index].etag = None;
                    self.slots[index].vouched = vouched.max(Some(newer));
                    let request = self.snapshot_request(&self.slots[index]);
                    return Ok(ListUpdate::NeedSnapshot {
                        reason: Some(error),
                        request,
                    });
                }
                self.note_freshness(&list, base, &response);
                return Ok(ListUpdate::Unchanged {
                    version: base.version(),
                });
            }
            (304, _) => {
                // Unconditional, or the state changed since the request.
                return Err(Error::UnexpectedResponse {
                    url: url.to_owned(),
                    reason: "304 Not Modified without the snapshot it names loaded".to_owned(),
                });
            }
            (200, _) => {}
            _ => return Err(status_error(&response, url, now)),
        }
        let new_etag = response.header("etag");
        let step = update::take_snapshot(
            &list,
            &response.body,
            new_etag,
            plain_base.as_deref().map(|state| PlainBase {
                state,
                etag: etag.as_deref(),
            }),
            &self.trusted_keys,
            &self.limits,
            slot.floor.as_ref(),
        )?;
        update::check_not_behind(
            &list,
            url,
            &step,
            previous,
            vouched,
            response.header(FRESHNESS_HEADER),
            &self.trusted_keys,
        )?;
        let state = match step {
            SnapshotStep::Held {
                version,
                new_etag: renamed,
            } => {
                if let Some(base) = &plain_base {
                    self.note_freshness(&list, base, &response);
                }
                if renamed {
                    self.slots[index].etag = new_etag.map(str::to_owned);
                }
                return Ok(ListUpdate::Unchanged { version });
            }
            SnapshotStep::New(state) => *state,
        };
        let version = state.version();
        let new_floor = state.floor();
        let new_etag = new_etag.map(str::to_owned);
        self.note_freshness(&list, &state, &response);
        let slot = &mut self.slots[index];
        slot.state = Some(Arc::new(state));
        slot.floor = Some(new_floor);
        slot.etag = new_etag;
        slot.snapshot = Some(Arc::from(response.body));
        slot.chain.clear();
        self.stats.snapshots_applied += 1;
        if previous == Some(version) {
            // A rebase on the very version the deltas led to.
            return Ok(ListUpdate::Unchanged { version });
        }
        Ok(ListUpdate::Updated { previous, version })
    }
}
