//! An update round over the base URLs (the publisher's, then each
//! mirror's), and whether one that answered "unchanged" looks behind, so
//! that the next is asked.
//!
//! A mirror that stopped following its publisher but still answers (a
//! replica whose object store is unreachable keeps serving what it has, by
//! design) answers every poll with `304` or an empty chain. Nothing in such
//! an answer is an error, and its signed freshness record names no newer
//! version, since the mirror has none: an agent asking it first would keep
//! that version for as long as the mirror answers, while the next mirror
//! holds the lists published since. What gives it away is time: the
//! freshness record the mirror serves said when the publisher's next build
//! was due, and a publisher that built since has signed a newer record. So
//! an unchanged answer looks behind when, after it, the state held
//! - has expired (no record vouches for it any more), or
//! - was last vouched for by a record whose `next_build_at` passed more
//!   than [`OVERDUE_GRACE`] ago.
//!
//! Then the next base URL is asked in the same round; if none answers
//! better, the unchanged answer stands (every mirror behind, or the
//! publisher's builds late: nothing newer exists to take).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{ListSlot, Lists, lock};
use crate::Error;
use crate::engine::update;
use crate::update::ListUpdate;

impl Lists {
    /// Tries each base URL in turn; the first error is reported if all fail.
    ///
    /// The newest version a signed freshness record named during the round
    /// ([`update::newer_vouched`]), on any base URL, is kept for the whole
    /// round: no answer may then leave the list unchanged at an older
    /// version (a mirror, or a cache in front of one, that is behind) —
    /// that base URL fails and the next is tried. An unchanged answer
    /// that leaves the list expired, or past its next build
    /// ([`looks_behind`]), does not end the round either: the next base URL is
    /// asked, and the answer stands only if none is ahead.
    pub(super) async fn fetch_and_apply(
        &self,
        slot: &ListSlot,
    ) -> Result<(ListUpdate, Option<Duration>), Error> {
        let mut first_error = None;
        let mut vouched = None;
        let mut behind_answer = None;
        let bases = &self.shared.base_urls;
        for (i, base) in bases.iter().enumerate() {
            let done = match self.fetch_and_apply_from(slot, base, &mut vouched).await {
                Ok((ListUpdate::Unchanged { version }, _)) if vouched.is_some_and(|v| v > version) => {
                    let newer = vouched.unwrap_or(version);
                    Err(update::behind(base, version, newer))
                }
                done => done,
            };
            match done {
                // Unchanged, where the list should have moved on: the next
                // base URL may be ahead; if none is, this answer stands.
                Ok(done @ (ListUpdate::Unchanged { .. }, _))
                    if i + 1 < bases.len() && looks_behind(slot, self.shared.now()) =>
                {
                    tracing::debug!(%base, list = %slot.name, "unchanged past its list's next build; asking the next base URL");
                    behind_answer.get_or_insert(done);
                }
                Ok(done) => return Ok(done),
                Err(error) => {
                    if self.shared.base_urls.len() > 1 {
                        tracing::debug!(%base, %error, "publisher failed");
                    }
                    first_error.get_or_insert(error);
                }
            }
        }
        if let Some(done) = behind_answer {
            return Ok(done);
        }
        let error = first_error.unwrap_or(Error::NotReady {
            list: slot.name.to_string(),
        });
        match self.deltas_after_failed_rebase(slot, &error, &mut vouched).await {
            Some(done) => Ok(done),
            None => Err(error),
        }
    }
}

/// How long past a record's `next_build_at` an unchanged answer is still
/// taken as current: agents poll at the next build plus the publisher's
/// build margin (30 s to 10 min) and jitter, so a publisher that built has
/// a newer record by then; the grace covers clocks a few minutes apart.
const OVERDUE_GRACE: Duration = Duration::from_secs(5 * 60);

/// Whether `slot`'s state, after an unchanged answer, looks behind at
/// `now` (the module docs).
fn looks_behind(slot: &ListSlot, now: SystemTime) -> bool {
    let Some(loaded) = slot.current.load_full() else {
        return false;
    };
    if loaded.state.is_stale(now) {
        return true;
    }
    let now_s = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    match lock(&slot.meta).next_build {
        Some((version, next_build_at)) if version == loaded.state.version() && next_build_at != 0 => {
            now_s > next_build_at.saturating_add(OVERDUE_GRACE.as_secs())
        }
        _ => false,
    }
}
