//! Following a threat list by deltas, without I/O: the state a list is
//! probed with, which request an update round makes, how a delta chain is
//! applied, when to rebase on a whole snapshot, and which freshness record
//! to believe (FORMAT.md "Deltas, version 1", "Delta chains", "Freshness
//! records, version 1").
//!
//! A list's [`ListState`] is the **base** — the whole snapshot it last
//! accepted — plus the sorted 32-bit hash prefixes the deltas applied since
//! have added. Deltas carry additions only, so the state holds a superset
//! of the prefixes of the version it stands for (its [`VersionFloor`], the
//! last delta's `to`): nothing listed there is missed. Prefixes removed
//! since the base linger until the next whole snapshot; a hit on one costs
//! a full-hash request, never a wrong verdict.
//!
//! An update round asks [`next_request`] what to do: the deltas since the
//! state's version, or — with no state, or once the additions have passed
//! `max_additions_ratio` of the base's entries — the whole snapshot (a
//! *rebase*). A chain is verified whole, linked to the state's floor and
//! checked against the rollback floor before any of it is applied
//! ([`apply_chain`]): all of it or none. Whatever fails, the caller takes
//! the whole snapshot in the same round.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use blocksieve_format::api::snapshot_etag;
use blocksieve_format::{
    DeltaEnd, FreshnessRecord, FullHash, MAX_CHAIN_DELTAS, TrustedKey, VerifiedDelta, decode_chain_up_to,
    merge_additions,
};

use crate::Error;
use crate::accept::{AcceptedSnapshot, VersionFloor};

/// The default for `max_additions_ratio`: rebase once the additions since
/// the base pass 30 % of its entries.
pub const DEFAULT_MAX_ADDITIONS_RATIO: f64 = 0.3;

/// Deltas applied since the base after which the whole snapshot is taken
/// again, whatever the additions: half of [`MAX_CHAIN_DELTAS`]. A list that
/// changes little still gets a delta per build (an empty one at least once
/// its snapshot is half-way to expiry, FORMAT.md "Delta chains"), so its
/// chain grows without its additions ever passing the ratio: at 48 builds a
/// day, 2,048 deltas are about 43 days. While the snapshot cannot be had,
/// deltas are still taken, up to [`MAX_KEPT_CHAIN_DELTAS`] (what a restart
/// restores).
pub const REBASE_AFTER_DELTAS: usize = MAX_CHAIN_DELTAS / 2;

/// The most deltas a list's state may stand on since its base snapshot,
/// and so the most a saved chain holds and a restart restores: 16,384,
/// four times one response's [`MAX_CHAIN_DELTAS`] (341 days of builds
/// every 30 minutes; about a second of signature checks at start). A rebase
/// falls due at [`REBASE_AFTER_DELTAS`]; while its snapshot cannot be had
/// (too large, timing out, a failing route), the deltas keep coming, up to
/// this bound. Past it a chain is refused ([`Error::ChainPastRestoreLimit`]):
/// applied, it would be lost at the next start and the list would come
/// back on its base, that many versions older.
pub const MAX_KEPT_CHAIN_DELTAS: usize = 4 * MAX_CHAIN_DELTAS;

/// The most bytes of deltas a list's state may stand on since its base
/// snapshot, kept to be saved (and read back at start): 256 MiB. Past it a
/// chain is refused as past [`MAX_KEPT_CHAIN_DELTAS`] is.
pub const MAX_KEPT_CHAIN_BYTES: u64 = 256 * 1024 * 1024;

/// What one list is probed with: a whole snapshot (the base) and the hash
/// prefixes the deltas applied since have added. Only [`ListState::of_base`],
/// [`apply_chain`] and [`restore_chain`] build one, so every state in use
/// stands on a verified snapshot and verified deltas.
#[derive(Debug)]
pub struct ListState {
    /// The whole snapshot the additions apply to; shared by the states
    /// built on it, so applying a delta never copies the filter.
    base: Arc<AcceptedSnapshot>,
    /// The 32-bit hash prefixes added since the base, strictly ascending.
    additions: Arc<[u32]>,
    /// How many deltas were applied since the base (the saved chain's
    /// length).
    deltas: usize,
    /// The version and body hash of the snapshot this state stands for.
    floor: VersionFloor,
    /// Unix seconds: the latest signed `expires_at` of the base and the
    /// deltas applied to it.
    signed_until: u64,
    /// Unix seconds: `signed_until`, or later when a freshness record
    /// naming exactly this state's floor said so. Atomic so that a record
    /// arriving on a `304` extends it without rebuilding the state.
    fresh_until: AtomicU64,
}

impl ListState {
    /// The state of a whole snapshot with nothing added.
    pub fn of_base(base: AcceptedSnapshot) -> Self {
        let floor = base.floor();
        let signed_until = base.header().expires_at;
        Self {
            base: Arc::new(base),
            additions: Arc::from(Vec::new()),
            deltas: 0,
            floor,
            signed_until,
            fresh_until: AtomicU64::new(signed_until),
        }
    }

    /// The whole snapshot this state stands on.
    pub fn base(&self) -> &AcceptedSnapshot {
        &self.base
    }

    /// The 32-bit hash prefixes added since the base, strictly ascending.
    pub fn additions(&self) -> &[u32] {
        &self.additions
    }

    /// The version and body hash of the snapshot this state stands for.
    pub fn floor(&self) -> VersionFloor {
        self.floor
    }

    /// The snapshot version this state stands for.
    pub fn version(&self) -> u64 {
        self.floor.version
    }

    /// Whether deltas have been applied to the base (the state stands for
    /// a later version than its base).
    pub fn has_deltas(&self) -> bool {
        self.floor != self.base.floor()
    }

    /// The entity tag of the snapshot this state stands for, sent as
    /// `If-None-Match` on the update route.
    pub fn etag(&self) -> String {
        snapshot_etag(self.floor.version, &self.floor.body_sha256)
    }

    /// Until when the state is fresh: the latest `expires_at` among the
    /// base, the deltas applied and the freshness records accepted for it.
    pub fn expires_at(&self) -> SystemTime {
        from_unix_seconds(self.fresh_until.load(Ordering::Relaxed))
    }

    /// Whether the state has expired at `now`: it is still used, flagged
    /// stale, as an expired snapshot is ([`crate::accept`]).
    pub fn is_stale(&self, now: SystemTime) -> bool {
        crate::accept::is_past(now, self.fresh_until.load(Ordering::Relaxed))
    }

    /// How many leading bits of a full hash to send for this list.
    pub fn request_prefix_bits(&self) -> u8 {
        self.base.request_prefix_bits()
    }

    /// Whether `hash` probably belongs to the list: its key is in the base's
    /// filter, or its 32-bit hash prefix is among the additions. `false` is
    /// certain for every entry of the version the state stands for. No
    /// allocation.
    #[inline]
    pub fn probably_contains(&self, hash: &FullHash) -> bool {
        // `|`, not `||`: no branch on the filter's answer, so that the
        // probes of a URL's expressions overlap (see `lookup::probe`).
        self.base.snapshot().probably_contains(hash)
            | (!self.additions.is_empty() && self.additions.binary_search(&hash.prefix().0).is_ok())
    }

    /// Starts loading the base filter's memory that
    /// [`Self::probably_contains`] will read for `hash`
    /// ([`PrefixFilter::prefetch`](blocksieve_format::PrefixFilter::prefetch)).
    #[inline(always)]
    pub fn prefetch(&self, hash: &FullHash) {
        self.base.snapshot().prefetch(hash);
    }

    /// Whether it is time to take the whole snapshot again (a rebase): the
    /// additions have passed `max_additions_ratio` of the base's entries
    /// (32-bit prefixes), or [`REBASE_AFTER_DELTAS`] deltas were applied
    /// since the base.
    pub fn due_for_rebase(&self, max_additions_ratio: f64) -> bool {
        let entries = self.base.header().entry_count as f64;
        self.additions.len() as f64 > max_additions_ratio * entries || self.deltas >= REBASE_AFTER_DELTAS
    }

    /// How many deltas were applied since the base.
    pub fn deltas_applied(&self) -> usize {
        self.deltas
    }

    /// Extends the state's freshness to `record.expires_at` if the record
    /// names `list` and exactly the state's version and body hash (it has
    /// been verified by the caller). Returns whether it applied; a record
    /// for anything else changes nothing.
    pub fn apply_freshness(&self, list: &str, record: &FreshnessRecord) -> bool {
        if record.list_name != list
            || record.version != self.floor.version
            || record.body_sha256 != self.floor.body_sha256
        {
            return false;
        }
        self.fresh_until.fetch_max(record.expires_at, Ordering::Relaxed);
        true
    }
}

/// What an update round asks the publisher for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateRequest {
    /// The latest whole snapshot (no state yet, or time to rebase).
    Snapshot,
    /// The deltas from version `from` (`GET /v1/lists/{name}/updates/{from}`)
    /// with `If-None-Match: if_none_match`.
    Deltas {
        /// The version the state stands for.
        from: u64,
        /// [`ListState::etag`].
        if_none_match: String,
    },
}

/// Which request an update round makes: the deltas since the state's
/// version until it is [due for a rebase](ListState::due_for_rebase), the
/// whole snapshot then.
pub fn next_request(state: Option<&ListState>, max_additions_ratio: f64) -> UpdateRequest {
    match state {
        Some(state) if !state.due_for_rebase(max_additions_ratio) => deltas_request(state),
        _ => UpdateRequest::Snapshot,
    }
}

/// The deltas since the state's version, rebase due or not: what follows
/// a rebase whose snapshot failed, so that what was listed since arrives.
pub fn deltas_request(state: &ListState) -> UpdateRequest {
    UpdateRequest::Deltas {
        from: state.version(),
        if_none_match: state.etag(),
    }
}

/// What a chain did to a state.
#[derive(Debug)]
pub enum ChainOutcome {
    /// An empty chain: the state is the latest.
    Unchanged,
    /// The state after the chain, to swap in whole.
    Advanced {
        /// The new state.
        state: ListState,
        /// How many deltas the chain held.
        deltas: usize,
    },
}

fn end_floor(end: &DeltaEnd) -> VersionFloor {
    VersionFloor {
        version: end.version,
        body_sha256: end.body_sha256,
    }
}

/// Verifies `chain` (FORMAT.md "Delta chains") for `list` and applies it to
/// `state`, off to the side: every delta's signature and encoding, the
/// links, the first delta starting exactly at the state's floor, and the
/// last one's `to` admitted by the rollback `floor`. Nothing is applied
/// unless all of it holds.
///
/// # Errors
///
/// [`Error::Delta`] for a delta or link that does not verify,
/// [`Error::DeltaMismatch`] for a chain that does not start at the state's
/// floor, [`Error::Rollback`] for one ending below `floor`.
pub fn apply_chain(
    list: &str,
    state: &ListState,
    chain: &[u8],
    trusted_keys: &[TrustedKey],
    floor: Option<&VersionFloor>,
) -> Result<ChainOutcome, Error> {
    apply_chain_up_to(list, state, chain, trusted_keys, floor, MAX_CHAIN_DELTAS)
}

/// [`apply_chain`] of a chain of up to `max_deltas` deltas (one response's
/// [`MAX_CHAIN_DELTAS`], or a saved chain's [`MAX_KEPT_CHAIN_DELTAS`]).
fn apply_chain_up_to(
    list: &str,
    state: &ListState,
    chain: &[u8],
    trusted_keys: &[TrustedKey],
    floor: Option<&VersionFloor>,
    max_deltas: usize,
) -> Result<ChainOutcome, Error> {
    let deltas =
        decode_chain_up_to(chain, list, trusted_keys, max_deltas).map_err(|reason| Error::Delta {
            list: list.to_owned(),
            reason,
        })?;
    let Some(first) = deltas.first() else {
        return Ok(ChainOutcome::Unchanged);
    };
    if end_floor(&first.header().from) != state.floor {
        return Err(Error::DeltaMismatch {
            list: list.to_owned(),
            held_version: state.floor.version,
            from_version: first.header().from.version,
        });
    }
    let count = deltas.len();
    // What a restart restores is bounded (`restore_chain`): a state further
    // from its base than that would be lost at the next start, the list
    // back on its base (rebases that keep failing would otherwise take
    // deltas without end).
    let since_base = state.deltas.saturating_add(count);
    if since_base > MAX_KEPT_CHAIN_DELTAS {
        return Err(Error::ChainPastRestoreLimit {
            list: list.to_owned(),
            deltas: since_base,
            bytes: 0,
            limit: format!("{MAX_KEPT_CHAIN_DELTAS} deltas"),
        });
    }
    advance(list, state, &deltas, floor).map(|state| ChainOutcome::Advanced { state, deltas: count })
}

/// Refuses a state whose chain kept since its base, `kept_bytes` long,
/// is longer than [`MAX_KEPT_CHAIN_BYTES`]: saved, it would not be read
/// back at the next start (the list would come back on its base). The
/// caller takes the whole snapshot instead. (The count of deltas is
/// bounded by [`apply_chain`].)
///
/// # Errors
///
/// [`Error::ChainPastRestoreLimit`].
pub fn check_kept_bytes(list: &str, state: &ListState, kept_bytes: usize) -> Result<(), Error> {
    let kept = kept_bytes as u64;
    if kept <= MAX_KEPT_CHAIN_BYTES {
        return Ok(());
    }
    Err(Error::ChainPastRestoreLimit {
        list: list.to_owned(),
        deltas: state.deltas_applied(),
        bytes: kept,
        limit: format!("{MAX_KEPT_CHAIN_BYTES} bytes"),
    })
}

/// Whether a chain that led to `floor` (the held floor for an empty one)
/// reached the version its response names: `latest_etag` is the
/// response's `ETag`, [`snapshot_etag`] of the latest snapshot. A chain cut
/// short at a delta boundary verifies and links, and the state it leads to
/// misses nothing of *its* version, but the agent would believe itself
/// current; refusing it sends the agent to the whole snapshot instead.
/// Without an `ETag` (a proxy that strips it) there is nothing to check.
///
/// # Errors
///
/// [`Error::DeltaChainShort`] when the tags differ.
pub fn check_chain_end(list: &str, floor: &VersionFloor, latest_etag: Option<&str>) -> Result<(), Error> {
    let Some(latest) = latest_etag else {
        return Ok(());
    };
    let reached = snapshot_etag(floor.version, &floor.body_sha256);
    if latest.trim().trim_start_matches("W/") == reached {
        return Ok(());
    }
    Err(Error::DeltaChainShort {
        list: list.to_owned(),
        ends_at: floor.version,
        latest: latest.to_owned(),
    })
}

/// The state after `deltas` (verified and linked, starting at `state`'s
/// floor), if the end passes the rollback `floor`.
fn advance(
    list: &str,
    state: &ListState,
    deltas: &[VerifiedDelta],
    floor: Option<&VersionFloor>,
) -> Result<ListState, Error> {
    let Some(last) = deltas.last() else {
        return Err(Error::DeltaMismatch {
            list: list.to_owned(),
            held_version: state.floor.version,
            from_version: state.floor.version,
        });
    };
    let to = end_floor(&last.header().to);
    if let Some(floor) = floor {
        floor.admit_end(list, to)?;
    }
    // The chain's additions sorted once, then merged once with those held:
    // a long chain costs one pass over the held additions, not one per delta.
    let mut added: Vec<u32> = Vec::with_capacity(deltas.iter().map(|d| d.additions().len()).sum());
    let mut signed_until = state.signed_until;
    for delta in deltas {
        added.extend_from_slice(delta.additions());
        signed_until = signed_until.max(delta.header().expires_at);
    }
    added.sort_unstable();
    added.dedup();
    let additions = merge_additions(&state.additions, &added);
    Ok(ListState {
        base: Arc::clone(&state.base),
        additions: Arc::from(additions),
        deltas: state.deltas.saturating_add(deltas.len()),
        floor: to,
        signed_until,
        fresh_until: AtomicU64::new(signed_until),
    })
}

/// Rebuilds a list's state at start from its verified base and the chain
/// saved since (FORMAT.md "Delta chains"): the chain must verify, start at
/// the base's floor and end at or above `record_floor`. Returns the state
/// and, when the chain was there but could not be used, why: the base
/// alone is then the state (the next update asks for the deltas from the
/// base's version and catches up), and the caller keeps `record_floor`
/// against rollback.
pub fn restore_chain(
    list: &str,
    base: AcceptedSnapshot,
    chain: Option<&[u8]>,
    record_floor: Option<&VersionFloor>,
    trusted_keys: &[TrustedKey],
) -> (ListState, Option<Error>) {
    let state = ListState::of_base(base);
    let Some(chain) = chain.filter(|c| !c.is_empty()) else {
        return (state, None);
    };
    match apply_chain_up_to(
        list,
        &state,
        chain,
        trusted_keys,
        record_floor,
        MAX_KEPT_CHAIN_DELTAS,
    ) {
        Ok(ChainOutcome::Advanced { state, .. }) => (state, None),
        Ok(ChainOutcome::Unchanged) => (state, None),
        Err(error) => (state, Some(error)),
    }
}

/// Reads an `X-Blocksieve-Freshness` header value for `list`: verified
/// against the trusted keys, naming the list. Whether it names the state
/// is [`ListState::apply_freshness`]'s call.
///
/// # Errors
///
/// [`Error::Delta`] when the record does not verify or names another list.
pub fn read_freshness(
    list: &str,
    value: &str,
    trusted_keys: &[TrustedKey],
) -> Result<FreshnessRecord, Error> {
    let delta = |reason| Error::Delta {
        list: list.to_owned(),
        reason,
    };
    let record = FreshnessRecord::from_header_value(value, trusted_keys).map_err(delta)?;
    if record.list_name != list {
        return Err(delta(blocksieve_format::DeltaError::InvalidField {
            field: "list_name",
            value: record.list_name.len() as u64,
        }));
    }
    Ok(record)
}

/// Unix seconds as a [`SystemTime`], saturating at a far future the
/// platform can represent: a signed `expires_at` may be any `u64`.
fn from_unix_seconds(seconds: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(std::time::Duration::from_secs(seconds))
        .or_else(|| UNIX_EPOCH.checked_add(std::time::Duration::from_secs(1 << 32)))
        .unwrap_or(UNIX_EPOCH)
}

#[cfg(test)]
pub(crate) mod tests;
