//! A whole agent without I/O: the protocol as request and response values.
//!
//! A [`Session`] holds what the Rust agent holds between requests — each
//! subscribed threat list's state (swapped whole), its ETag and rollback
//! floor, the trusted keys and limits, the full-hash cache and the
//! full-hash backoff — and says which HTTP request to make next; the host
//! makes it with whatever it has (`fetch` in a browser, a C caller's HTTP
//! client) and hands the response back. Nothing here reads a clock, draws
//! randomness of its own or touches the network: `now` and an RNG come in
//! with each call, as in the rest of the engine.
//!
//! The two halves, in the order the Rust agent runs them:
//!
//! * **Updates.** [`Session::update_requests`] gives one [`ListRequest`]
//!   per list: the deltas since the version held
//!   (`GET /v1/lists/{name}/updates/{from}` with `If-None-Match`) while
//!   [`delta::next_request`] says so, else the whole snapshot
//!   (`GET /v1/lists/{name}/snapshot`, with the base's ETag as
//!   `If-None-Match` while no delta has been applied to it). The response
//!   goes to [`Session::handle_update_response`]: verified
//!   ([`update::take_snapshot`](crate::update::take_snapshot),
//!   [`update::take_chain`](crate::update::take_chain)) and swapped in whole, or
//!   refused with the list kept as it was. When no usable chain can be had
//!   (`410`, `404`, a chain that does not verify or link) the answer is
//!   [`ListUpdate::NeedSnapshot`] with the snapshot request to make in the
//!   same round.
//! * **Checks.** [`Session::check`] canonicalizes a URL, probes every list
//!   that has a snapshot (while one has none, only a URL the others
//!   confirm unsafe is answered; the rest are [`Error::NotReady`])
//!   and answers from the full-hash cache where it can
//!   ([`CheckStep::Done`]); otherwise it returns a [`FullHashQuery`] carrying
//!   one `POST /v1/hashes:search` (the real request prefixes plus noise,
//!   shuffled, [`prefix::plan_requests`]). Its response, or the transport
//!   error, goes to [`Session::complete_check`], which caches the answers
//!   (misses included), records success or failure in the backoff, and
//!   decides the [`Verdict`] — [`Verdict::Unverified`] under the failure
//!   policy when the full hashes cannot be had.
//!
//! Across restarts the host keeps what [`Session::saved`] gives (the
//! snapshot and chain as downloaded, and the list's record) wherever it
//! can, and hands it to [`Session::restore`] at start, which verifies it
//! again, as the Rust agent does with its cache directory.
//!
//! Differences from the Rust agent: the session writes nothing itself
//! (see above), there is one base URL and no background
//! schedule (the host calls an update round when it likes, e.g. from an
//! alarm), full hashes are always asked by `POST` (never from the immutable
//! buckets), and two checks needing the same prefix at once each make a
//! request (no single flight): the second sends the prefixes of the first,
//! its noise included, so that the publisher cannot single out the real
//! prefix as the one both share. Verdicts are the same.
//!
//! A session is plain data: `Send` and `Sync`, mutated through `&mut self`.
//! A host that runs update rounds and checks concurrently (interleaved
//! `await`s in JavaScript) may hand responses back in any order: every
//! response is checked against the state in place when it arrives (the
//! rollback floor, the chain's starting point), never against the state
//! its request was made for.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use blocksieve_format::api::{FULL_HASHES_ACCEPT, MAX_PREFIXES_PER_REQUEST, routes};
use blocksieve_format::{DecodeLimits, TrustedKey, is_valid_list_name};
use rand::Rng;

mod apply;
mod http;
mod in_flight;
mod saved;

use http::read_answer;
pub use http::{HttpRequest, HttpResponse, MAX_SEARCH_RESPONSE_BYTES, Method};
use in_flight::InFlightRequests;
pub use saved::{Restored, SavedList};

use crate::Error;
use crate::accept::VersionFloor;
use crate::confirm::{AnswerCache, Versions};
use crate::delta::{self, ListState, UpdateRequest};
use crate::lookup::{self, Answer, FailurePolicy, LocalLookup, UrlHashes, Verdict};
use crate::prefix::{self, PlannedRequest, RequestPrefix};
use crate::schedule::FullHashBackoff;

/// The most threat lists one session subscribes to
/// ([`blocksieve_format::api::MAX_SESSION_LISTS`], 32): every check's
/// prefixes fit within one request ([`MAX_PREFIXES_PER_REQUEST`]).
pub const MAX_LISTS: usize = blocksieve_format::api::MAX_SESSION_LISTS;

/// What a [`ListRequest`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// The latest whole snapshot.
    Snapshot {
        /// Whether it went with `If-None-Match` (the base's ETag): only then
        /// is a `304` an answer.
        conditional: bool,
    },
    /// The deltas since version `from`.
    Deltas {
        /// The version held when the request was made.
        from: u64,
    },
}

/// One list's update request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// The threat list.
    pub list: String,
    /// What is asked.
    pub kind: RequestKind,
    /// The request to send.
    pub request: HttpRequest,
}

/// The outcome of one list's update response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListUpdate {
    /// The publisher has nothing newer than `version`, the version held.
    Unchanged {
        /// The version held.
        version: u64,
    },
    /// A newer state was verified and swapped in.
    Updated {
        /// The version held before, if any.
        previous: Option<u64>,
        /// The version now held.
        version: u64,
    },
    /// No usable delta chain (also an empty one while a signed freshness
    /// record names a newer version than the one held), or a `304` to a
    /// conditional snapshot request while a signed freshness record — its
    /// own, or the updates answer's that led to it — names a newer version
    /// ([`update::stale_validator`](crate::update::stale_validator),
    /// [`update::newer_vouched`](crate::update::newer_vouched)): take the
    /// whole snapshot now, with `request` (unconditional in the second
    /// case; the list keeps its state meanwhile).
    NeedSnapshot {
        /// Why the deltas or the `304` were not used: the error of the
        /// updates request, chain or `304`; `None` when the chain verified
        /// but adds entries while `max_additions_ratio` is 0.
        reason: Option<Error>,
        /// The snapshot request to send in the same round.
        request: ListRequest,
    },
}

/// A check's next step.
#[derive(Debug)]
pub enum CheckStep {
    /// The verdict, with no request needed (no prefix hit, every needed
    /// answer cached, or requests paused by the backoff).
    Done(Verdict),
    /// Full hashes are needed: send [`FullHashQuery::request`] and hand
    /// the response to [`Session::complete_check`].
    NeedFullHashes(FullHashQuery),
}

/// A check waiting for the publisher's full hashes.
#[derive(Debug)]
pub struct FullHashQuery {
    /// The `POST /v1/hashes:search` to send: the real request prefixes and
    /// the noise, shuffled, and the snapshot versions probed as the
    /// versions the answer must be at least as new as.
    pub request: HttpRequest,
    /// The probe's hits.
    local: LocalLookup,
    /// The first list with no snapshot, not probed: then only an unsafe
    /// verdict is an answer.
    unready: Option<Arc<str>>,
    /// The answers the cache already had.
    answers: HashMap<RequestPrefix, Answer>,
    /// The planned request: which prefixes are real.
    plan: PlannedRequest,
    /// The versions probed, by list: answers are cached only while they
    /// are still the ones held.
    versions: Versions,
    /// Its entry among the session's requests in flight.
    id: u64,
    /// When the check handed it out: its failure counts as another
    /// consecutive one only if it was sent after the backoff's pause was
    /// set ([`FullHashBackoff::on_failure`]).
    sent: SystemTime,
}

/// A session's settings. Checked by [`Session::new`].
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The publisher, e.g. `https://publisher.example` (`http` only to a
    /// loopback host unless `dangerous_allow_plain_http`). No default.
    pub base_url: String,
    /// The threat lists to subscribe to, 1 to [`MAX_LISTS`]. No default.
    pub lists: Vec<String>,
    /// The publisher's signing keys. No default: at least one.
    pub trusted_keys: Vec<TrustedKey>,
    /// The most bytes of a snapshot or delta chain accepted. By default,
    /// 256 MiB, as the Rust agent.
    pub max_snapshot_bytes: u64,
    /// Additions since the base, as a share of its entries, past which an
    /// update takes the whole snapshot. By default,
    /// [`delta::DEFAULT_MAX_ADDITIONS_RATIO`].
    pub max_additions_ratio: f64,
    /// The full-hash cache's budget in bytes. By default, 4 MiB.
    pub full_hash_cache_bytes: usize,
    /// Random hash prefixes added to each full-hash request. By default, 4.
    pub noise_prefixes: usize,
    /// The verdict's `block` flag when full hashes cannot be had. By
    /// default, [`FailurePolicy::FailOpen`].
    pub failure_policy: FailurePolicy,
    /// Accept `http://` to hosts other than the loopback: full-hash
    /// answers can then be tampered with on the way. By default, `false`.
    pub dangerous_allow_plain_http: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            base_url: String::new(),
            lists: Vec::new(),
            trusted_keys: Vec::new(),
            max_snapshot_bytes: 256 * 1024 * 1024,
            max_additions_ratio: delta::DEFAULT_MAX_ADDITIONS_RATIO,
            full_hash_cache_bytes: 4 * 1024 * 1024,
            noise_prefixes: 4,
            failure_policy: FailurePolicy::FailOpen,
            dangerous_allow_plain_http: false,
        }
    }
}

/// Counters of a session, since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Valid URLs probed against at least one list's filter (while a list
    /// has no snapshot, against the others: the outcome counters below
    /// then describe those lists' hits, and the check answers
    /// [`Error::NotReady`] unless one is confirmed).
    pub lookups: u64,
    /// Checks with at least one local prefix hit.
    pub prefix_hits: u64,
    /// Full-hash requests handed to the host.
    pub full_hash_requests: u64,
    /// Full-hash requests that failed (transport, status, bad answer: one
    /// that does not parse, or leaves a prefix asked about without a
    /// readable result).
    pub full_hash_failures: u64,
    /// Request prefixes answered from the full-hash cache.
    pub cache_hits: u64,
    /// Prefix hits the publisher confirmed.
    pub confirmed_unsafe: u64,
    /// Prefix hits the publisher's full hashes refuted.
    pub false_prefix_hits: u64,
    /// Prefix hits left unverified.
    pub unverified: u64,
    /// Whole snapshots verified and swapped in.
    pub snapshots_applied: u64,
    /// Deltas verified and applied.
    pub deltas_applied: u64,
    /// Rounds that asked for deltas and took the whole snapshot, or whose
    /// conditional snapshot request got a `304` showing its validator stale
    /// ([`ListUpdate::NeedSnapshot`]).
    pub delta_fallbacks: u64,
    /// Update responses refused (the list kept its state).
    pub updates_failed: u64,
    /// Lists restored from saved bytes ([`Session::restore`]).
    pub restored: u64,
    /// Of those, lists whose snapshot had already expired (restored stale).
    pub restored_stale: u64,
}

/// One subscribed list.
#[derive(Debug)]
struct Slot {
    name: Arc<str>,
    /// Swapped whole: a check sees the old state or the new one.
    state: Option<Arc<ListState>>,
    /// The base snapshot's ETag, for `If-None-Match` while no delta has
    /// been applied.
    etag: Option<String>,
    /// The last accepted (version, body hash): nothing older is accepted.
    floor: Option<VersionFloor>,
    /// The base snapshot as downloaded, and the chain applied to it since:
    /// what [`Session::saved`] hands the host to keep.
    snapshot: Option<Arc<[u8]>>,
    chain: Vec<u8>,
    /// The newest version a signed freshness record named, newer than the
    /// version held, in an answer to the updates route that did not
    /// advance the list
    /// ([`update::newer_vouched`](crate::update::newer_vouched): a `304` with a stale
    /// validator, a chain that is not used): the snapshot response that
    /// follows must not leave the list at an older version.
    vouched: Option<u64>,
    /// The last rebase (a snapshot asked for past `max_additions_ratio`)
    /// failed: the next round asks for the deltas since the version held
    /// instead, so what was listed since still arrives while the snapshot
    /// cannot be had, and the round after asks for the snapshot again.
    rebase_failed: bool,
    /// The last update response when it was `404 unknown_list`: the
    /// publisher serves no such list (retired, or not configured on the
    /// server answering). Its state stays and is probed, but it is left out
    /// of full-hash requests (a publisher refuses a search naming a list it
    /// does not serve, which would leave every other list's hits
    /// unverified); its own hits are unverified.
    not_served: Option<Error>,
}

/// The agent's state and decisions, driven by the host's I/O; see the
/// module docs.
#[derive(Debug)]
pub struct Session {
    base_url: String,
    slots: Vec<Slot>,
    /// The subscribed lists' names, shared by every cached answer.
    names: Vec<Arc<str>>,
    trusted_keys: Vec<TrustedKey>,
    limits: DecodeLimits,
    max_additions_ratio: f64,
    noise_prefixes: usize,
    failure_policy: FailurePolicy,
    /// Answers by request prefix, misses included, for their cache
    /// duration while the snapshot versions they were asked for are held.
    cache: AnswerCache,
    backoff: FullHashBackoff,
    stats: SessionStats,
    /// Full-hash requests handed out and not completed.
    in_flight: InFlightRequests,
}

fn invalid(name: &'static str, value: impl ToString) -> Error {
    Error::InvalidSetting {
        setting: name,
        value: value.to_string(),
    }
}

/// `url` without a trailing `/`, if it is `https`, or `http` to a loopback
/// host (or any host with `allow_http`), with no credentials.
fn base_url(url: &str, allow_http: bool) -> Result<String, Error> {
    let fail = |reason: &str| Error::InvalidBaseUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| fail("not an absolute URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || rest.contains(['?', '#']) {
        return Err(fail("needs a host and no query or fragment"));
    }
    if authority.contains('@') {
        // What precedes `@` is user info, not the host.
        return Err(fail("must not contain credentials"));
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    match scheme {
        "https" => {}
        "http" if loopback || allow_http => {}
        "http" => return Err(fail("plain http is only accepted to a loopback host")),
        _ => return Err(fail("the scheme must be https")),
    }
    Ok(url.trim_end_matches('/').to_owned())
}

impl Session {
    /// A session with no list loaded yet.
    ///
    /// # Errors
    ///
    /// [`Error::NoLists`], [`Error::NoTrustedKeys`],
    /// [`Error::InvalidListName`], [`Error::InvalidBaseUrl`], and
    /// [`Error::InvalidSetting`] for the setting at fault.
    pub fn new(config: SessionConfig) -> Result<Self, Error> {
        if config.lists.is_empty() {
            return Err(Error::NoLists);
        }
        if config.lists.len() > MAX_LISTS {
            return Err(invalid("lists", config.lists.len()));
        }
        if config.trusted_keys.is_empty() {
            return Err(Error::NoTrustedKeys);
        }
        let mut names: Vec<String> = Vec::with_capacity(config.lists.len());
        for name in config.lists {
            if !is_valid_list_name(&name) {
                return Err(Error::InvalidListName { name });
            }
            if !names.contains(&name) {
                names.push(name);
            }
        }
        if !(0.0..=4.0).contains(&config.max_additions_ratio) {
            return Err(invalid("max_additions_ratio", config.max_additions_ratio));
        }
        if config.noise_prefixes > 64 {
            return Err(invalid("noise_prefixes", config.noise_prefixes));
        }
        if config.max_snapshot_bytes == 0 || config.max_snapshot_bytes > 4 * 1024 * 1024 * 1024 {
            return Err(invalid("max_snapshot_bytes", config.max_snapshot_bytes));
        }
        Ok(Self {
            base_url: base_url(&config.base_url, config.dangerous_allow_plain_http)?,
            names: names.iter().map(|n| Arc::from(n.as_str())).collect(),
            slots: names
                .into_iter()
                .map(|name| Slot {
                    name: name.into(),
                    state: None,
                    etag: None,
                    floor: None,
                    snapshot: None,
                    chain: Vec::new(),
                    vouched: None,
                    rebase_failed: false,
                    not_served: None,
                })
                .collect(),
            trusted_keys: config.trusted_keys,
            limits: DecodeLimits {
                max_body_bytes: config.max_snapshot_bytes,
                max_decompressed_bytes: config.max_snapshot_bytes,
                ..DecodeLimits::default()
            },
            max_additions_ratio: config.max_additions_ratio,
            noise_prefixes: config.noise_prefixes,
            failure_policy: config.failure_policy,
            cache: AnswerCache::new(config.full_hash_cache_bytes),
            backoff: FullHashBackoff::default(),
            stats: SessionStats::default(),
            in_flight: InFlightRequests::default(),
        })
    }

    /// The subscribed lists, in subscription order.
    pub fn lists(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|s| &*s.name)
    }

    /// The version `list`'s state stands for, if one is loaded.
    pub fn version(&self, list: &str) -> Option<u64> {
        self.slot(list)?.state.as_ref().map(|s| s.version())
    }

    /// The state of `list` in use, if one is loaded.
    pub fn state(&self, list: &str) -> Option<Arc<ListState>> {
        self.slot(list)?.state.clone()
    }

    /// The counters.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// How much longer full-hash requests for the snapshots held stay
    /// paused after failures at `now`, or `None` if they are not.
    pub fn full_hash_paused_for(&self, now: SystemTime) -> Option<Duration> {
        match self.backoff.check_for(now, &self.held_versions()) {
            Err(Error::BackingOff { remaining, .. }) => Some(remaining),
            _ => None,
        }
    }

    /// Whether the session should run an update round before checking
    /// again: a full-hash request was refused as `400 prefix_too_short` at
    /// the snapshot versions held (the list's request prefix length grew
    /// past them), and no update response has since left them as they
    /// were. A URL whose verdict was unverified for that reason is checked
    /// again once the round brought a newer version. False once it has, or
    /// once a round ended with the versions as they were (the refusal then
    /// stands and backs off as any failure: no update loop), and after any
    /// answered request ([`FullHashBackoff::awaits_update`]).
    pub fn update_advised(&self) -> bool {
        self.backoff.awaits_update(&self.held_versions())
    }

    /// The version of each list that has a snapshot, as a check's query
    /// names them.
    /// The versions full-hash requests name: every list with a state but
    /// those the publisher said it does not serve ([`Slot::not_served`]).
    fn held_versions(&self) -> Versions {
        self.slots
            .iter()
            .filter(|slot| slot.not_served.is_none())
            .filter_map(|slot| Some((slot.name.to_string(), slot.state.as_ref()?.floor())))
            .collect()
    }

    fn slot(&self, list: &str) -> Option<&Slot> {
        self.slots.iter().find(|s| &*s.name == list)
    }

    fn get(&self, path: String, if_none_match: Option<String>) -> HttpRequest {
        HttpRequest {
            method: Method::Get,
            url: format!("{}{path}", self.base_url),
            headers: if_none_match
                .map(|e| ("if-none-match".to_owned(), e))
                .into_iter()
                .collect(),
            body: Vec::new(),
        }
    }

    /// The whole-snapshot request for `slot`: conditional while its state
    /// is a base with no delta applied.
    fn snapshot_request(&self, slot: &Slot) -> ListRequest {
        let plain_base = slot.state.as_ref().is_some_and(|s| !s.has_deltas());
        let etag = slot.etag.clone().filter(|_| plain_base);
        ListRequest {
            list: slot.name.to_string(),
            kind: RequestKind::Snapshot {
                conditional: etag.is_some(),
            },
            request: self.get(routes::latest_snapshot(&slot.name), etag),
        }
    }

    /// One update round's requests, one per list in subscription order:
    /// the deltas since the version held while [`delta::next_request`] says
    /// so, else the whole snapshot; after a rebase whose snapshot failed,
    /// the deltas once more (what was listed since still arrives), then the
    /// snapshot again. Send each and hand its response to
    /// [`Session::handle_update_response`].
    pub fn update_requests(&self) -> Vec<ListRequest> {
        self.slots
            .iter()
            .map(|slot| {
                let request = match slot.state.as_deref() {
                    Some(state) if slot.rebase_failed => delta::deltas_request(state),
                    state => delta::next_request(state, self.max_additions_ratio),
                };
                match request {
                    UpdateRequest::Deltas { from, if_none_match } => ListRequest {
                        list: slot.name.to_string(),
                        kind: RequestKind::Deltas { from },
                        request: self.get(routes::updates(&slot.name, from), Some(if_none_match)),
                    },
                    UpdateRequest::Snapshot => self.snapshot_request(slot),
                }
            })
            .collect()
    }

    /// Verifies and applies the response to `request` (one of
    /// [`Session::update_requests`] or of a [`ListUpdate::NeedSnapshot`]).
    /// A new state is swapped in whole; on any error the list keeps its
    /// state. A snapshot that has already expired at `now` is applied all
    /// the same (it can only add protection) and its verdicts say `stale`.
    ///
    /// # Errors
    ///
    /// [`Error::Status`] for an HTTP error (with `Retry-After` on a `429`
    /// or `503`), [`Error::ResponseTooLarge`], [`Error::UnexpectedResponse`]
    /// (a `304` to an unconditional request, an unknown list), and the
    /// verification errors of
    /// [`update::take_snapshot`](crate::update::take_snapshot) ([`Error::Decode`],
    /// [`Error::WrongList`], [`Error::Rollback`]).
    pub fn handle_update_response(
        &mut self,
        request: &ListRequest,
        response: HttpResponse,
        now: SystemTime,
    ) -> Result<ListUpdate, Error> {
        // Whether a rebase failed decides the next round's request.
        let rebase = self.is_rebase(request);
        let result = self.apply_update(request, response, now);
        self.note_rebase(request, rebase && result.is_err());
        // Whether the publisher serves the list: known from any answer but
        // another error.
        if let Some(slot) = self.slots.iter_mut().find(|s| *s.name == request.list) {
            match &result {
                // The round goes on: what its snapshot request gets says.
                Ok(ListUpdate::NeedSnapshot { .. }) => {}
                Ok(_) => slot.not_served = None,
                Err(e) if e.is_unknown_list() => slot.not_served = Some(e.clone()),
                Err(_) => {}
            }
        }
        // A `prefix_too_short` refusal at the versions still held stands
        // (unless the round goes on to the whole snapshot).
        if !matches!(result, Ok(ListUpdate::NeedSnapshot { .. })) {
            self.backoff.on_update_without_change(&self.held_versions());
        }
        match &result {
            Ok(ListUpdate::NeedSnapshot { .. }) => self.stats.delta_fallbacks += 1,
            Ok(_) => {}
            Err(_) => self.stats.updates_failed += 1,
        }
        result
    }

    /// Records that the host could not send `request` or read its answer
    /// (a transport failure, a timeout): the list keeps its state, and a
    /// failed rebase is followed by the deltas next round, as after an
    /// error answer ([`Session::update_requests`]).
    pub fn update_not_sent(&mut self, request: &ListRequest) {
        let rebase = self.is_rebase(request);
        self.note_rebase(request, rebase);
        self.backoff.on_update_without_change(&self.held_versions());
    }

    /// Whether `request` is a rebase: a snapshot asked for while the list
    /// holds a state past `max_additions_ratio`, or holds any state under a
    /// ratio of 0 (which takes every version that adds entries whole: the
    /// snapshot follows a chain not taken).
    fn is_rebase(&self, request: &ListRequest) -> bool {
        let ratio = self.max_additions_ratio;
        matches!(request.kind, RequestKind::Snapshot { .. })
            && self
                .slots
                .iter()
                .find(|s| *s.name == *request.list)
                .and_then(|s| s.state.as_ref())
                .is_some_and(|s| ratio <= 0.0 || s.due_for_rebase(ratio))
    }

    /// Sets whether the list of `request` follows a failed rebase.
    fn note_rebase(&mut self, request: &ListRequest, failed: bool) {
        if let Some(slot) = self.slots.iter_mut().find(|s| *s.name == *request.list) {
            slot.rebase_failed = failed;
        }
    }

    fn apply_update(
        &mut self,
        request: &ListRequest,
        response: HttpResponse,
        now: SystemTime,
    ) -> Result<ListUpdate, Error> {
        let url = request.request.url.as_str();
        let index = self
            .slots
            .iter()
            .position(|s| *s.name == *request.list)
            .ok_or_else(|| Error::UnexpectedResponse {
                url: url.to_owned(),
                reason: format!("list {} is not subscribed", request.list),
            })?;
        let limit = self.limits.max_body_bytes;
        if response.body.len() as u64 > limit {
            return Err(Error::ResponseTooLarge {
                url: url.to_owned(),
                limit_bytes: limit,
            });
        }
        match request.kind {
            RequestKind::Deltas { .. } => self.apply_deltas(index, url, response, now),
            RequestKind::Snapshot { conditional } => {
                self.apply_snapshot(index, url, conditional, response, now)
            }
        }
    }

    /// Probes every list that has a snapshot with `url`'s hashes at `now`,
    /// and names the first list that has none (not probed): its check can
    /// end only in [`Verdict::Unsafe`] or [`Error::NotReady`]
    /// ([`lookup::unless_unready`]).
    fn probe(&self, hashes: &UrlHashes<'_>, now: SystemTime) -> (LocalLookup, Option<Arc<str>>) {
        let unready = self
            .slots
            .iter()
            .find(|slot| slot.state.is_none())
            .map(|slot| Arc::clone(&slot.name));
        // Walked, not collected: no allocation on the path of every check.
        let states = self
            .slots
            .iter()
            .filter_map(|slot| Some((&slot.name, &**slot.state.as_ref()?)));
        (lookup::probe(hashes, states, now), unready)
    }

    /// Checks `url` against every subscribed list at `now`: canonicalized,
    /// its expressions hashed and probed; no hit is [`Verdict::Safe`] with
    /// no request; hits are confirmed from the cache, or else by the
    /// [`FullHashQuery`] returned (`rng` draws the noise prefixes and their
    /// order). While requests are paused after failures the hits are
    /// [`Verdict::Unverified`] with no request.
    ///
    /// While a list has no snapshot yet, the lists that have one are still
    /// probed: a URL they confirm unsafe is [`Verdict::Unsafe`] (so a newly
    /// subscribed list that cannot be fetched does not switch the others
    /// off); any other outcome is [`Error::NotReady`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host;
    /// [`Error::NotReady`] when a list has no snapshot yet and the others
    /// do not confirm the URL unsafe (here, or from
    /// [`Session::complete_check`]).
    pub fn check(&mut self, url: &str, now: SystemTime, rng: &mut impl Rng) -> Result<CheckStep, Error> {
        let mut hashes = UrlHashes::default();
        // With one list, each hash's filter slots start loading while the
        // next expressions are hashed (`UrlHashes::set_then`; x86 only).
        if let [slot] = self.slots.as_slice()
            && let Some(state) = slot.state.as_deref()
        {
            hashes.set_then(url, |hash| state.prefetch(hash))?;
        } else {
            hashes.set(url)?;
        }
        let (local, unready) = self.probe(&hashes, now);
        if !local.snapshot_versions.is_empty() {
            // Probed against at least one filter.
            self.stats.lookups += 1;
        }
        if local.is_empty() {
            // No hit on the lists probed: safe only if every list was.
            let verdict = lookup::unless_unready(Verdict::Safe { stale: local.stale }, unready.as_ref())?;
            return Ok(CheckStep::Done(verdict));
        }
        self.stats.prefix_hits += 1;
        // The snapshots of the lists probed (a list with no snapshot has
        // none, and was not probed).
        let versions = self.held_versions();
        let mut answers = HashMap::new();
        let prefixes = local.request_prefixes();
        let asked = prefixes.len();
        let misses = self.cache.lookup(&versions, prefixes, now, &mut answers);
        self.stats.cache_hits += (asked - misses.len()) as u64;
        if misses.is_empty() {
            return self
                .decide(&local, &answers, &versions, unready.as_ref())
                .map(CheckStep::Done);
        }
        if let Err(paused) = self.backoff.check_for(now, &versions) {
            for p in misses {
                answers.insert(p, Err(paused.clone()));
            }
            return self
                .decide(&local, &answers, &versions, unready.as_ref())
                .map(CheckStep::Done);
        }
        let (plan, extra) = self.in_flight.plan(&misses, &versions, self.noise_prefixes, rng);
        let Some(plan) = plan else {
            return self
                .decide(&local, &answers, &versions, unready.as_ref())
                .map(CheckStep::Done);
        };
        for extra in extra {
            answers.insert(
                extra,
                Err(Error::UnexpectedResponse {
                    url: String::new(),
                    reason: format!("more than {MAX_PREFIXES_PER_REQUEST} prefixes for one URL"),
                }),
            );
        }
        let body = crate::confirm::search_request(
            plan.prefixes.iter().map(ToString::to_string).collect(),
            &versions,
        );
        let body = serde_json::to_vec(&body).map_err(|e| Error::UnexpectedResponse {
            url: String::new(),
            reason: format!("cannot encode request: {e}"),
        })?;
        self.stats.full_hash_requests += 1;
        let id = self.in_flight.add(&versions, &plan.prefixes);
        Ok(CheckStep::NeedFullHashes(FullHashQuery {
            request: HttpRequest {
                method: Method::Post,
                url: format!("{}{}", self.base_url, routes::SEARCH),
                headers: vec![
                    ("content-type".to_owned(), "application/json".to_owned()),
                    ("accept".to_owned(), FULL_HASHES_ACCEPT.to_owned()),
                ],
                body,
            },
            local,
            unready,
            answers,
            plan,
            versions,
            id,
            sent: now,
        }))
    }

    /// The verdict of a check once its [`FullHashQuery`] is answered:
    /// `response` is the publisher's response, or the error the host met
    /// sending it (build an [`Error::Transport`]). A good answer is cached
    /// (misses included, for its cache duration, while the snapshot
    /// versions probed are held) and resets the backoff; a failure starts
    /// or extends the backoff (`rng` draws its jitter; `Retry-After` is
    /// honoured) and the verdict is [`Verdict::Unverified`], with `block`
    /// by the failure policy. A prefix hit alone is never reported unsafe.
    ///
    /// An unverified verdict whose reason is the publisher's `400
    /// prefix_too_short` ([`Error::is_prefix_too_short`]) says the
    /// session's snapshot is behind the publisher's (the list's request
    /// prefix length grew): run an update round, and if it brought a new
    /// version, check the URL again (the JavaScript agent does). Such
    /// refusals pause nothing until an update response leaves the versions
    /// refused as they were; from then on each backs off as any failure,
    /// for those versions only ([`FullHashBackoff::on_prefix_too_short`]).
    /// So does a `404 unknown_list` ([`Error::is_unknown_list`]): the
    /// request named a list the publisher no longer serves; the update
    /// round that finds it so leaves that list out of later requests (its
    /// own hits are then unverified), and the URL checked again is
    /// answered for the others.
    ///
    /// # Errors
    ///
    /// [`Error::NotReady`] when a subscribed list had no snapshot at
    /// [`Session::check`] (it was not probed) and the lists that were
    /// probed do not confirm the URL unsafe. A failed request is not an
    /// error but a [`Verdict::Unverified`].
    pub fn complete_check(
        &mut self,
        query: FullHashQuery,
        response: Result<HttpResponse, Error>,
        now: SystemTime,
        rng: &mut impl Rng,
    ) -> Result<Verdict, Error> {
        let FullHashQuery {
            request,
            local,
            unready,
            mut answers,
            plan,
            versions,
            id,
            sent,
        } = query;
        self.in_flight.complete(id);
        match response.and_then(|r| read_answer(&r, &request.url, now)) {
            Ok(answer) => {
                let sorted = prefix::sort_answers(&plan.real, &answer, &self.names);
                if !sorted.missing.is_empty() || !sorted.unreadable.is_empty() {
                    // A bad answer: a prefix asked about is left unverified,
                    // as after a body that does not parse, and requests
                    // pause as after one.
                    self.stats.full_hash_failures += 1;
                    self.backoff.on_failure(None, sent, now, rng);
                } else {
                    self.backoff.on_success();
                }
                let duration = Duration::from_secs(answer.answer.cache_duration_s);
                self.cache
                    .store(sorted, duration, &versions, now, &request.url, &mut answers);
            }
            Err(error) => {
                self.stats.full_hash_failures += 1;
                // What an update round cures (snapshots behind the
                // publisher's, or a list named that it no longer serves):
                // requests for other versions are not held back.
                if error.is_prefix_too_short() || error.is_unknown_list() {
                    self.backoff.on_prefix_too_short(&versions, now, rng);
                } else {
                    self.backoff.on_failure(error.retry_after(), sent, now, rng);
                }
                for p in &plan.real {
                    answers.insert(*p, Err(error.clone()));
                }
            }
        }
        self.decide(&local, &answers, &versions, unready.as_ref())
    }

    /// The verdict from `answers`, counted; [`Error::NotReady`] unless
    /// unsafe when the list `unready` was not probed.
    fn decide(
        &mut self,
        local: &LocalLookup,
        answers: &HashMap<RequestPrefix, Answer>,
        versions: &Versions,
        unready: Option<&Arc<str>>,
    ) -> Result<Verdict, Error> {
        let lists: Vec<&str> = self.slots.iter().map(|s| &*s.name).collect();
        let verdict = lookup::decide(local, answers, &lists, self.failure_policy);
        // A hit on a list the request left out (not served when the check
        // began) was asked of no one: no answer refuted it.
        let verdict = lookup::unless_unasked(
            verdict,
            local,
            |list| versions.contains_key(list),
            |list| {
                (self.slot(list).and_then(|s| s.not_served.clone()))
                    .unwrap_or_else(|| lookup::not_asked(list))
            },
            self.failure_policy,
        );
        if !local.is_empty() {
            match &verdict {
                Verdict::Unsafe { .. } => self.stats.confirmed_unsafe += 1,
                Verdict::Safe { .. } => self.stats.false_prefix_hits += 1,
                _ => self.stats.unverified += 1,
            }
        }
        lookup::unless_unready(verdict, unready)
    }
}

#[cfg(test)]
mod tests;
