//! The updates route: the chain of deltas since the version held, fetched,
//! verified on the blocking pool ([`update::take_chain`]) and swapped in
//! with its additions, or left for the whole snapshot.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{ListSlot, Lists, Loaded, lock};
use crate::Error;
use crate::engine::accept::ListRecord;
use crate::engine::delta::{self, ListState};
use crate::engine::update::{self, ChainStep};
use crate::http::{self, UpdatesFetch};
use crate::stats::Counters;
use crate::status::SnapshotSource;
use crate::update::ListUpdate;

impl Lists {
    /// Asks `url` (the update route) for the deltas since `loaded`'s
    /// version and applies them. `None` when the whole snapshot must be
    /// taken instead (`410`, `404`, or a chain that does not verify or
    /// link: counted and kept in the list's status; or an answer that the
    /// version held is current while the round's `vouched` names a newer
    /// one, or a chain that adds entries under a `max_additions_ratio` of
    /// 0: the ratio given, the agent's own or, after a failed rebase, none);
    /// an error when the round fails (transport, `503 behind`, other
    /// statuses).
    pub(super) async fn follow_deltas(
        &self,
        slot: &ListSlot,
        url: &str,
        loaded: &Arc<Loaded>,
        if_none_match: &str,
        vouched: &mut Option<u64>,
        max_additions_ratio: f64,
    ) -> Result<Option<(ListUpdate, Option<Duration>)>, Error> {
        let mut date = None;
        let fetched = http::fetch_updates(
            &self.shared.client,
            url,
            if_none_match,
            self.max_snapshot_bytes,
            self.snapshot_timeout,
            self.shared.now(),
            &mut date,
        )
        .await;
        self.shared.observe_publisher_time(date);
        let version = loaded.state.version();
        let (bytes, latest_etag, hint, buckets, freshness) = match fetched? {
            UpdatesFetch::NotModified {
                hint,
                buckets,
                freshness,
            } => {
                let stale = update::stale_validator(
                    &slot.name,
                    url,
                    &loaded.state,
                    freshness.as_deref(),
                    &self.trusted_keys,
                )
                .or_else(|| {
                    vouched
                        .filter(|&v| v > version)
                        .map(|v| (v, update::behind(url, version, v)))
                });
                if let Some((newer, error)) = stale {
                    *vouched = (*vouched).max(Some(newer));
                    self.delta_fallback(slot, error);
                    return Ok(None);
                }
                self.note_freshness(slot, &loaded.state, freshness.as_deref());
                self.note_buckets(slot, version, buckets.as_deref());
                return Ok(Some((ListUpdate::Unchanged { version }, hint)));
            }
            UpdatesFetch::Unavailable { error } => {
                self.delta_fallback(slot, error);
                return Ok(None);
            }
            UpdatesFetch::Chain {
                bytes,
                etag,
                hint,
                buckets,
                freshness,
            } => (bytes, etag, hint, buckets, freshness),
        };
        // Kept for the round even when this chain is not used (it does not
        // verify, or `max_additions_ratio` sends the round to the snapshot).
        let newer = update::newer_vouched(&slot.name, version, freshness.as_deref(), &self.trusted_keys);
        *vouched = (*vouched).max(newer);
        let (step, bytes) = self
            .take_chain_blocking(slot, url, loaded, bytes, latest_etag, max_additions_ratio)
            .await;
        let (state, deltas, short) = match step {
            // No delta since the version held, where a signed record names
            // a newer one: the snapshot says which is right.
            ChainStep::Unchanged if vouched.is_some_and(|v| v > version) => {
                let newer = vouched.unwrap_or(version);
                self.delta_fallback(slot, update::behind(url, version, newer));
                return Ok(None);
            }
            ChainStep::Unchanged => {
                self.note_freshness(slot, &loaded.state, freshness.as_deref());
                self.note_buckets(slot, version, buckets.as_deref());
                return Ok(Some((ListUpdate::Unchanged { version }, hint)));
            }
            ChainStep::Fallback(Some(error)) => {
                self.delta_fallback(slot, error);
                return Ok(None);
            }
            // A ratio of 0 holds no additions: a version that adds any is
            // taken whole, in this round (`max_additions_ratio`).
            ChainStep::Fallback(None) => return Ok(None),
            ChainStep::Advanced { state, deltas } => (state, deltas, None),
            // What the chain adds is in use before the snapshot is asked
            // for: should it fail, the list holds the chain's version.
            ChainStep::Short { state, deltas, error } => (state, deltas, Some(error)),
        };
        let swapped = self
            .swap_in_chain(
                slot,
                state,
                deltas,
                bytes,
                freshness.as_deref(),
                buckets.as_deref(),
            )
            .await;
        let Some(new_version) = swapped else {
            return Ok(None);
        };
        if let Some(error) = short {
            self.delta_fallback(slot, error);
            return Ok(None);
        }
        Ok(Some((
            ListUpdate::Updated {
                previous: Some(version),
                version: new_version,
            },
            hint,
        )))
    }

    /// Swaps in `state`, which `deltas` deltas (`bytes`) led to from the
    /// state in use, with the response's `freshness` record and `buckets`,
    /// and saves the chain beside its base. `None`, the state in use kept
    /// and the fallback counted, when the chain kept since the base would
    /// grow past what a restart reads back.
    async fn swap_in_chain(
        &self,
        slot: &ListSlot,
        state: ListState,
        deltas: usize,
        bytes: Vec<u8>,
        freshness: Option<&str>,
        buckets: Option<&str>,
    ) -> Option<u64> {
        // The chain kept since the base must stay restorable (`Store::read`).
        let kept = lock(&slot.meta).chain.len() + bytes.len();
        if let Err(error) = delta::check_kept_bytes(&slot.name, &state, kept) {
            self.delta_fallback(slot, error);
            return None;
        }
        let version = slot.version();
        // The record can name the version the chain leads to: read it
        // before the swap, so the state goes in with its freshness.
        self.note_freshness(slot, &state, freshness);
        let new_floor = state.floor();
        let new_version = state.version();
        let additions = state.additions().len();
        let stale = state.is_stale(self.shared.now());
        let (chain, etag) = {
            let meta = lock(&slot.meta);
            let mut chain = Vec::with_capacity(meta.chain.len() + bytes.len());
            chain.extend_from_slice(&meta.chain);
            chain.extend_from_slice(&bytes);
            (chain, meta.etag.clone())
        };
        let record = ListRecord {
            list: slot.name.to_string(),
            floor: new_floor,
            base: Some(state.base().floor()),
            etag,
        };
        // The state is now the newest the publisher signed for this agent,
        // whatever its base came from. In use first, then written, as a snapshot is: a round
        // cancelled during the write leaves the whole chain in `meta`, to be
        // written with the next one.
        slot.current.store(Some(Arc::new(Loaded {
            state,
            source: SnapshotSource::Network,
        })));
        self.swaps.fetch_add(1, Ordering::Release);
        {
            let mut meta = lock(&slot.meta);
            meta.floor = Some(new_floor);
            meta.chain.clone_from(&chain);
            meta.last_delta_error = None;
        }
        self.note_buckets(slot, new_version, buckets);
        let counters = &self.shared.counters;
        Counters::add(&counters.deltas_applied, deltas as u64);
        Counters::add(&counters.delta_bytes, bytes.len() as u64);
        self.persist_chain(slot, chain, record).await;
        tracing::info!(list = %slot.name, previous = ?version, version = new_version, deltas, additions, stale, "deltas applied");
        Some(new_version)
    }

    /// [`update::take_chain`] on the blocking pool, with `ratio` as its
    /// `max_additions_ratio`: verifying and merging up to the snapshot
    /// limit of deltas would stall an async worker. Hands the bytes back
    /// for persistence.
    async fn take_chain_blocking(
        &self,
        slot: &ListSlot,
        url: &str,
        loaded: &Arc<Loaded>,
        bytes: Vec<u8>,
        latest_etag: Option<String>,
        ratio: f64,
    ) -> (ChainStep, Vec<u8>) {
        let keys = Arc::clone(&self.trusted_keys);
        let owned_list = slot.name.to_string();
        let floor = lock(&slot.meta).floor;
        let loaded = Arc::clone(loaded);
        let task = tokio::task::spawn_blocking(move || {
            let step = update::take_chain(
                &owned_list,
                &loaded.state,
                &bytes,
                latest_etag.as_deref(),
                &keys,
                floor.as_ref(),
                ratio,
            );
            (step, bytes)
        });
        match task.await {
            Ok(done) => done,
            Err(join) => (
                ChainStep::Fallback(Some(Error::UnexpectedResponse {
                    url: url.to_owned(),
                    reason: format!("delta verification did not finish: {join}"),
                })),
                Vec::new(),
            ),
        }
    }
}
