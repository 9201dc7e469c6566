//! Whether a base URL that answered "unchanged" looks behind, so that an
//! agent with mirrors asks the next one ([`super::Lists::fetch_and_apply`]).
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

use super::{ListSlot, lock};

/// How long past a record's `next_build_at` an unchanged answer is still
/// taken as current: agents poll at the next build plus the publisher's
/// build margin (30 s to 10 min) and jitter, so a publisher that built has
/// a newer record by then; the grace covers clocks a few minutes apart.
pub(super) const OVERDUE_GRACE: Duration = Duration::from_secs(5 * 60);

/// Whether `slot`'s state, after an unchanged answer, looks behind at
/// `now` (the module docs).
pub(super) fn looks_behind(slot: &ListSlot, now: SystemTime) -> bool {
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
