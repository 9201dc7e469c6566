//! What one list's update response changes: the decisions an update round
//! makes once the bytes are in, whoever fetched them.
//!
//! The Rust agent (over reqwest, verifying on its blocking pool, persisting
//! what it takes) and the [`Session`](crate::session::Session) (over the
//! host's I/O) both call these two functions, so a response leads to the
//! same state on every path:
//!
//! * [`take_chain`]: a `200` answer to the updates route — the chain
//!   verified and applied ([`delta::apply_chain`]), its end checked against
//!   the response's `ETag` ([`delta::check_chain_end`]), and
//!   `max_additions_ratio` applied — or the whole snapshot to take instead,
//!   with the reason;
//! * [`take_snapshot`]: a `200` answer to the snapshot route — the snapshot
//!   in use under its own or a new `ETag` (nothing swapped), or a newer one
//!   verified ([`accept::accept`]: signature, limits, list name, rollback
//!   floor) as the new base;
//! * [`stale_validator`]: whether a `304` cannot mean "what you hold is
//!   current", its signed freshness record naming a newer version, and
//!   [`check_not_behind`]: whether a snapshot answer is older than such a
//!   record says is current.
//!
//! And at start, [`restore`]: what the bytes a host kept (the snapshot, the
//! chain applied since, the [`ListRecord`]) give back — the agent's cache
//! directory and a session's saved lists alike.
//!
//! Statuses (`304`, `404`/`410`, errors), applying freshness records, counting,
//! persistence and the swap itself stay with the caller: each transport
//! sees its responses in its own shape.

use blocksieve_format::{DecodeLimits, TrustedKey};

use crate::Error;
use crate::accept::{self, ListRecord, Restored, VersionFloor};
use crate::delta::{self, ChainOutcome, ListState};

/// What a delta chain response leads to; see [`take_chain`].
#[derive(Debug)]
pub enum ChainStep {
    /// An empty chain, at the version the response names: the state held
    /// is the latest.
    Unchanged,
    /// The state the chain leads to, verified: swap it in whole.
    Advanced {
        /// The new state (the held base plus the chain's additions).
        state: ListState,
        /// How many deltas the chain held.
        deltas: usize,
    },
    /// A chain that verifies and links but stops short of the version its
    /// response names (`error`, [`Error::DeltaChainShort`]): swap `state`
    /// in as for [`ChainStep::Advanced`] (its deltas are signed versions
    /// of the list, and only add entries), then take the whole snapshot in
    /// the same round. Should the snapshot fail too, the list holds what
    /// the chain added rather than the version before it.
    Short {
        /// The state the chain leads to.
        state: ListState,
        /// How many deltas the chain held.
        deltas: usize,
        /// Why the snapshot is still needed.
        error: Error,
    },
    /// No usable chain: take the whole snapshot, in the same round. The
    /// reason is `None` when the chain was good but a
    /// `max_additions_ratio` of 0 holds no additions.
    Fallback(Option<Error>),
}

/// Reads the body of a `200` answer to the updates route for `list`: the
/// chain from `current` (the state held) is verified and applied, all or
/// nothing, against the rollback `floor`; its end must be the version the
/// response's `ETag` (`latest_etag`) names, so a chain cut short at a delta
/// boundary is never taken for the latest: it is [`ChainStep::Short`], to
/// swap in before the whole snapshot is asked for in the same round. The
/// chain not verifying or linking, or a ratio of 0 with additions, is
/// [`ChainStep::Fallback`]: the caller then downloads the whole snapshot,
/// and keeps `current` until it verifies.
pub fn take_chain(
    list: &str,
    current: &ListState,
    body: &[u8],
    latest_etag: Option<&str>,
    trusted_keys: &[TrustedKey],
    floor: Option<&VersionFloor>,
    max_additions_ratio: f64,
) -> ChainStep {
    let outcome = match delta::apply_chain(list, current, body, trusted_keys, floor) {
        Ok(outcome) => outcome,
        Err(error) => return ChainStep::Fallback(Some(error)),
    };
    let reached = match &outcome {
        ChainOutcome::Unchanged => current.floor(),
        ChainOutcome::Advanced { state, .. } => state.floor(),
    };
    let end = delta::check_chain_end(list, &reached, latest_etag);
    match (outcome, end) {
        (ChainOutcome::Unchanged, Ok(())) => ChainStep::Unchanged,
        (ChainOutcome::Unchanged, Err(error)) => ChainStep::Fallback(Some(error)),
        // A ratio of 0 holds no additions: the version is taken whole.
        (ChainOutcome::Advanced { state, .. }, end)
            if max_additions_ratio <= 0.0 && !state.additions().is_empty() =>
        {
            ChainStep::Fallback(end.err())
        }
        (ChainOutcome::Advanced { state, deltas }, Ok(())) => ChainStep::Advanced { state, deltas },
        (ChainOutcome::Advanced { state, deltas }, Err(error)) => ChainStep::Short { state, deltas, error },
    }
}

/// What a snapshot response leads to; see [`take_snapshot`].
#[derive(Debug)]
pub enum SnapshotStep {
    /// The snapshot in use, nothing to swap: the representation held (its
    /// `ETag` again, `If-None-Match` ignored), or the same version and
    /// body under a new `ETag`, which the caller keeps for its next
    /// conditional request (`new_etag`).
    Held {
        /// The version in use.
        version: u64,
        /// Whether the response's `ETag` replaces the one held.
        new_etag: bool,
    },
    /// A snapshot newer than the one in use, verified: the new base, with
    /// no additions, to swap in whole.
    New(Box<ListState>),
}

/// The base a snapshot response is compared with: the state in use while
/// it is a base with no delta applied, and the `ETag` it came with.
#[derive(Debug, Clone, Copy)]
pub struct PlainBase<'a> {
    /// The state in use.
    pub state: &'a ListState,
    /// The `ETag` of its snapshot response, if it had one.
    pub etag: Option<&'a str>,
}

/// Reads the body of a `200` answer to the snapshot route for `list`.
/// With `plain_base` (the state in use is a base alone), the same `ETag`
/// (`new_etag`) or the same version and body hash mean the snapshot in use:
/// [`SnapshotStep::Held`]. Otherwise the body must verify
/// ([`accept::accept`] against `trusted_keys`, `limits` and the rollback
/// `floor`); a snapshot that has already expired is taken all the same (it
/// can only add protection) and its verdicts say `stale`.
///
/// # Errors
///
/// Those of [`accept::accept`]: [`Error::Decode`], [`Error::WrongList`],
/// [`Error::Rollback`]. The caller keeps its state.
pub fn take_snapshot(
    list: &str,
    body: &[u8],
    new_etag: Option<&str>,
    plain_base: Option<PlainBase<'_>>,
    trusted_keys: &[TrustedKey],
    limits: &DecodeLimits,
    floor: Option<&VersionFloor>,
) -> Result<SnapshotStep, Error> {
    if let Some(base) = plain_base
        && new_etag.is_some()
        && new_etag == base.etag
    {
        // The same representation: nothing to verify.
        return Ok(SnapshotStep::Held {
            version: base.state.version(),
            new_etag: false,
        });
    }
    let accepted = accept::accept(list, body, trusted_keys, limits, floor)?;
    let version = accepted.header().version;
    if plain_base.is_some_and(|base| base.state.floor() == accepted.floor()) {
        // The very snapshot in use, under a new ETag.
        return Ok(SnapshotStep::Held {
            version,
            new_etag: true,
        });
    }
    Ok(SnapshotStep::New(Box::new(ListState::of_base(accepted))))
}

/// Whether a `304 Not Modified` answer for `list` contradicts itself: its
/// freshness record (`X-Blocksieve-Freshness`, the header's value in
/// `freshness`) verifies against `trusted_keys`, names `list` and a
/// version newer than the state `held`. The publisher then vouches for a
/// newer snapshot while answering that the validator sent is current: that
/// validator names another snapshot than the one held (an `ETag` taken for
/// the same body from a mirror or a bad response, a cache keyed wrongly).
/// Taking the `304` would keep the list on the older version, missing what
/// the newer one adds, until the `ETag` changed again. Returns the version
/// vouched for and the error to report; the caller forgets the validator
/// and asks again without it, in the same round (and if that answer is
/// still the snapshot held, [`check_not_behind`] fails the round). A record that does
/// not verify, names another list, or names the held or an older version
/// changes nothing.
pub fn stale_validator(
    list: &str,
    url: &str,
    held: &ListState,
    freshness: Option<&str>,
    trusted_keys: &[TrustedKey],
) -> Option<(u64, Error)> {
    let vouched = vouched_version(list, freshness, trusted_keys)?;
    (vouched > held.version()).then(|| {
        let error = Error::UnexpectedResponse {
            url: url.to_owned(),
            reason: format!(
                "304 Not Modified while its signed freshness record names version {}, newer than version {} in use: \
                 the validator sent names another snapshot",
                vouched,
                held.version()
            ),
        };
        (vouched, error)
    })
}

/// The version a response's freshness record (`freshness`, the
/// `X-Blocksieve-Freshness` value) vouches is `list`'s current one, when
/// the record verifies against `trusted_keys`, names `list`, and that
/// version is newer than `held`: evidence, for the rest of the update
/// round, that the publisher has published past the version in use. A
/// record that does not verify, names another list, or names the held or
/// an older version is none.
pub fn newer_vouched(
    list: &str,
    held: u64,
    freshness: Option<&str>,
    trusted_keys: &[TrustedKey],
) -> Option<u64> {
    vouched_version(list, freshness, trusted_keys).filter(|&vouched| vouched > held)
}

/// Why an answer that leaves a list at the version in use (`held`: a
/// `304`, an empty chain) cannot end an update round in which a signed
/// freshness record named `vouched`, a newer version ([`newer_vouched`]):
/// the server that answered, or a cache in front of it, is behind. The
/// agent then asks for the whole snapshot, without a validator, and fails
/// the round if that is behind too ([`check_not_behind`]), rather than
/// report the list unchanged.
pub fn behind(url: &str, held: u64, vouched: u64) -> Error {
    Error::UnexpectedResponse {
        url: url.to_owned(),
        reason: format!(
            "answers that version {held} (the version in use) is unchanged while a signed freshness record in \
             this round names version {vouched}: the server or a cache in front of it is behind"
        ),
    }
}

/// The version a response's freshness record (the `X-Blocksieve-Freshness`
/// value in `freshness`) vouches is `list`'s current one, if the record
/// verifies against `trusted_keys` and names `list`.
fn vouched_version(list: &str, freshness: Option<&str>, trusted_keys: &[TrustedKey]) -> Option<u64> {
    delta::read_freshness(list, freshness?, trusted_keys)
        .ok()
        .map(|record| record.version)
}

/// Checks that a `200` answer to the snapshot route, read into `step`, is
/// not behind: still the version in use (`previous`) while a signed
/// freshness record — the answer's own (`freshness`), or that of the
/// `304` it was asked again after ([`stale_validator`]'s version,
/// `vouched`) — names a newer one. The publisher, or a cache in front of
/// it, then serves an older snapshot than the one it says is current: the
/// round fails with the list kept (its status shows the list behind),
/// rather than reporting it unchanged. A newer snapshot that is still
/// older than the record is progress, and passes.
///
/// # Errors
///
/// [`Error::UnexpectedResponse`] naming both versions.
pub fn check_not_behind(
    list: &str,
    url: &str,
    step: &SnapshotStep,
    previous: Option<u64>,
    vouched: Option<u64>,
    freshness: Option<&str>,
    trusted_keys: &[TrustedKey],
) -> Result<(), Error> {
    let answered = match step {
        SnapshotStep::Held { version, .. } => *version,
        SnapshotStep::New(state) => state.version(),
    };
    let vouched = vouched.max(vouched_version(list, freshness, trusted_keys));
    match vouched {
        Some(newer) if newer > answered && previous == Some(answered) => Err(Error::UnexpectedResponse {
            url: url.to_owned(),
            reason: format!(
                "serves version {answered} (the snapshot in use) while its signed freshness record names version \
                 {newer}: the publisher or a cache in front of it is behind"
            ),
        }),
        _ => Ok(()),
    }
}

/// A list as [`restore`] finds it in the bytes kept for it.
#[derive(Debug, Default)]
pub struct RestoredState {
    /// The state to probe with: the kept snapshot (expired too: it then
    /// answers stale) and, if it verified, the chain kept since. `None` when
    /// no snapshot was kept or it was refused.
    pub state: Option<ListState>,
    /// The rollback floor from now on. With a state, the state's own:
    /// what the signed bytes restored prove (a record one step behind, as a
    /// crash between writing the chain and the record leaves it, is
    /// overtaken; a record naming more than they prove is reported in
    /// `chain_error` and not trusted, as it is not signed). Without one,
    /// the record's, against a rollback by the next download.
    pub floor: Option<VersionFloor>,
    /// The ETag for the first conditional snapshot request, if the record
    /// names it for the restored base.
    pub etag: Option<String>,
    /// Whether `state` includes the kept chain (keep its bytes for the
    /// next save); `false` with `chain_error` when it was refused.
    pub chain_applied: bool,
    /// Why the kept snapshot was refused (signature, limits, list name,
    /// older than the record's floor): discard it.
    pub snapshot_error: Option<Error>,
    /// Why the kept chain was refused, or that it was missing while the
    /// record names a newer version than the snapshot: discard it. The
    /// base alone is the state, older than what was kept, and the next
    /// update asks for the deltas from its version.
    pub chain_error: Option<Error>,
}

/// What the bytes kept for `list` give back at start: `snapshot` verified
/// as a download is ([`accept::restore`]: against the `record`'s floor, if
/// a record was kept), then `chain` applied to it
/// ([`delta::restore_chain`]: every delta verified, ending at or above the
/// record's floor). Expiry plays no part: the last verified snapshot is
/// used, stale, rather than none.
pub fn restore(
    list: &str,
    snapshot: Option<&[u8]>,
    chain: Option<&[u8]>,
    record: Option<&ListRecord>,
    trusted_keys: &[TrustedKey],
    limits: &DecodeLimits,
) -> RestoredState {
    let restored = accept::restore(list, snapshot, record, trusted_keys, limits);
    let mut out = RestoredState {
        floor: restored.floor,
        etag: restored.etag,
        ..RestoredState::default()
    };
    match restored.snapshot {
        Restored::Missing => {}
        Restored::Rejected(error) => out.snapshot_error = Some(error),
        Restored::Loaded(accepted) => {
            let (state, mut chain_error) =
                delta::restore_chain(list, accepted, chain, out.floor.as_ref(), trusted_keys);
            out.chain_applied = chain_error.is_none() && state.has_deltas();
            if chain_error.is_none()
                && let Some(kept) = out.floor
                && kept.admit_end(list, state.floor()).is_err()
            {
                // No chain, or an empty one, where the record says the
                // list had reached a newer version: as a chain dropped.
                chain_error = Some(Error::KeptChainMissing {
                    list: list.to_owned(),
                    restored_version: state.version(),
                    kept_version: kept.version,
                });
            }
            // The record is not signed: a floor beyond what the restored
            // bytes prove (a chain dropped or lost, or an edited or
            // corrupt record) would refuse every later snapshot as a
            // rollback and freeze the list. The floor is what they prove.
            out.floor = Some(state.floor());
            out.chain_error = chain_error;
            out.state = Some(state);
        }
    }
    out
}

#[cfg(test)]
mod tests;
