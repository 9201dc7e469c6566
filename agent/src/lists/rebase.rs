//! A rebase whose snapshot cannot be had: the round takes the deltas since
//! the version held instead of nothing.

use std::time::Duration;

use blocksieve_format::api::routes;

use super::{ListSlot, Lists};
use crate::Error;
use crate::engine::delta::{self, UpdateRequest};
use crate::update::ListUpdate;

impl Lists {
    /// After every base URL failed a round's snapshot: when that snapshot
    /// was a rebase (the additions past `max_additions_ratio`), the deltas
    /// since the version held, from the first base URL that has them, so
    /// that what was listed since still arrives while the snapshot cannot
    /// be had (too large, timing out, refused as older than the version the
    /// deltas reached by a lagging cache, a failing route). The snapshot's
    /// `error` is counted and logged all the same; the next round asks for
    /// the snapshot again. `None` when this was no rebase or no base URL
    /// answered with deltas.
    pub(super) async fn deltas_after_failed_rebase(
        &self,
        slot: &ListSlot,
        error: &Error,
        vouched: &mut Option<u64>,
    ) -> Option<(ListUpdate, Option<Duration>)> {
        let loaded = slot.current.load_full()?;
        // Under a ratio of 0 every version that adds entries is taken whole:
        // the snapshot that failed followed a chain not taken.
        let ratio = self.max_additions_ratio;
        if !(ratio <= 0.0 || loaded.state.due_for_rebase(ratio)) {
            return None;
        }
        for base in &self.shared.base_urls {
            // Again for each base URL: a chain cut short at one is swapped in
            // before the next is asked ([`Lists::follow_deltas`]).
            let loaded = slot.current.load_full()?;
            let UpdateRequest::Deltas { from, if_none_match } = delta::deltas_request(&loaded.state) else {
                return None;
            };
            let url = format!("{base}{}", routes::updates(&slot.name, from));
            if let Ok(Some(done)) = self
                .follow_deltas(slot, &url, &loaded, &if_none_match, vouched, f64::INFINITY)
                .await
            {
                self.shared.counters.update_failed(error);
                tracing::warn!(list = %slot.name, %error, "the snapshot to rebase on failed; the deltas since the version held were taken meanwhile");
                return Some(done);
            }
        }
        None
    }
}
