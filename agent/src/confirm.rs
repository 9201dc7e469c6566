//! The confirmation component: turns the request prefixes of local hits
//! into the publisher's full hashes — from the full-hash cache, from a
//! request already in flight for the same prefix (single flight), or from
//! new requests with noise prefixes, paused while the full-hash backoff
//! says so. A request is answered by the immutable buckets of the snapshot
//! versions held (`GET /v1/lists/{name}/hashes/{version}/{prefix}`, which
//! CDNs can cache) when every subscribed list advertised them, else — or
//! when one of those GETs fails — by `POST /v1/hashes:search` with the
//! versions held. The answer comes in binary or JSON
//! ([`http::search_full_hashes`] reads either); both arrive here in one
//! compact form, a [`SearchAnswer`] (32 bytes and a list index per full
//! hash), sorted into the cached [`ListedHashes`] whose list names are the
//! confirmer's own.
//!
//! [`ListedHashes`]: crate::engine::cache::ListedHashes
//!
//! The get-hash half of the protocol, as Chromium's
//! `V4GetHashProtocolManager` is: it owns the cache, the in-flight map, the
//! backoff and the requests themselves (each on a task of its own, which a
//! check the host gives up on does not cancel); the clock, the RNG, the
//! HTTP client and the counters are handed in ([`Shared`]). The rules are
//! the engine's ([`crate::engine::cache`], [`crate::engine::prefix`],
//! [`crate::engine::schedule::FullHashBackoff`]: the failures of requests
//! in flight together count once).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use blocksieve_format::api::{routes, snapshot_id};
use tokio::sync::{Semaphore, watch};

use crate::Error;
use crate::engine::confirm::AnswerCache;
use crate::engine::lookup::Answer;
use crate::engine::prefix::{self, PlannedRequest, RequestPrefix, SearchAnswer};
use crate::engine::schedule::FullHashBackoff;
use crate::http;
use crate::shared::{Shared, lock};
use crate::stats::Counters;

/// The most bucket GETs (lists × prefixes, noise included) one planned
/// request may take; a larger one is sent as one `POST`, cheaper than that
/// many GETs. Together they read at most 32 MiB, under what one search
/// answer may.
const MAX_BUCKET_REQUESTS: usize = 64;
const _: () =
    assert!(MAX_BUCKET_REQUESTS as u64 * http::MAX_BUCKET_RESPONSE_BYTES <= http::MAX_SEARCH_RESPONSE_BYTES);
// A request to the buckets takes a slot per `GET`: never more than there are.
const _: () = assert!(MAX_BUCKET_REQUESTS <= MAX_REQUESTS_IN_FLIGHT);

/// Sends one answer to every check waiting on the same request prefix.
type AnswerSender = watch::Sender<Option<Answer>>;

/// Request prefixes with a full-hash request in flight, each with the
/// snapshot versions it was asked for and the receiver its answer will
/// arrive on.
type InFlight = Mutex<HashMap<RequestPrefix, (Versions, watch::Receiver<Option<Answer>>)>>;

pub(crate) use crate::engine::confirm::Versions;

/// The full-hash side of an agent: cache, single flight and backoff.
#[derive(Debug)]
pub(crate) struct Confirmer {
    /// The subscribed lists: full hashes listed on others are dropped. The
    /// one copy of each name, shared by every cached answer.
    lists: Vec<Arc<str>>,
    /// Noise prefixes added to each request.
    noise_prefixes: usize,
    /// This agent's noise key: each real prefix's noise the same every
    /// time it is asked ([`prefix::NoiseKey`]).
    noise_key: prefix::NoiseKey,
    /// Answers by request prefix, misses included, for their cache
    /// duration, while the snapshot versions stay the same.
    cache: Mutex<AnswerCache>,
    /// Request prefixes with a full-hash request in flight, for single
    /// flight: a second check for the same prefix waits for the first.
    in_flight: InFlight,
    /// Pauses requests after failures, for every check at once.
    backoff: Mutex<FullHashBackoff>,
    /// One permit per request sent and not yet answered
    /// ([`MAX_REQUESTS_IN_FLIGHT`]).
    slots: Semaphore,
    /// The client, clock, RNG and counters, shared with the lists.
    shared: Arc<Shared>,
}

/// The most full-hash HTTP requests an agent has sent and not yet had
/// answered (a request to the immutable buckets is one per `GET`);
/// further ones wait for one of them to end. A request outlives the check
/// that started it, so without a bound a host checking many URLs against a
/// publisher that hangs (each check given up on after its own deadline)
/// would hold filter hits per second × the request timeout of them at
/// once. Those waiting are sent only when one ends, after the backoff it
/// may have started: when the publisher fails, they end `BackingOff` at
/// once instead of each waiting for a timeout of its own.
pub(crate) const MAX_REQUESTS_IN_FLIGHT: usize = 64;

impl Confirmer {
    /// A confirmer for `lists`, with an empty cache of at most
    /// `cache_bytes` and `noise_prefixes` per request.
    pub(crate) fn new(
        lists: Vec<String>,
        cache_bytes: usize,
        noise_prefixes: usize,
        shared: Arc<Shared>,
    ) -> Self {
        Self {
            lists: lists.iter().map(|l| Arc::from(l.as_str())).collect(),
            noise_prefixes,
            noise_key: shared.with_rng(prefix::NoiseKey::new),
            cache: Mutex::new(AnswerCache::new(cache_bytes)),
            in_flight: Mutex::new(HashMap::new()),
            backoff: Mutex::new(FullHashBackoff::default()),
            slots: Semaphore::new(MAX_REQUESTS_IN_FLIGHT),
            shared,
        }
    }

    /// How much longer full-hash requests for snapshot `versions` stay
    /// paused after failures at `now`, or `None` if they are not.
    pub(crate) fn paused_for(&self, now: SystemTime, versions: &Versions) -> Option<Duration> {
        match lock(&self.backoff).check_for(now, versions) {
            Err(Error::BackingOff { remaining, .. }) => Some(remaining),
            _ => None,
        }
    }

    /// Records that an update round ended with the lists at `versions`: a
    /// `prefix_too_short` refusal at them stands
    /// ([`FullHashBackoff::on_update_without_change`]).
    pub(crate) fn on_update_without_change(&self, versions: &Versions) {
        lock(&self.backoff).on_update_without_change(versions);
    }

    /// An answer for each of `needed`, as new as the snapshot `versions` the
    /// check probed: from the cache (emptied when the versions changed), from
    /// a request in flight for the same versions (single flight), or from new
    /// requests, which ask for answers at least that new. With `buckets`
    /// (every subscribed list advertised the immutable buckets of exactly
    /// these versions) new requests go to those buckets first. `listed`,
    /// the full hashes the lists hold together, sizes the requests
    /// ([`prefix::plan_requests`]).
    pub(crate) async fn resolve(
        self: &Arc<Self>,
        needed: Vec<RequestPrefix>,
        versions: &Versions,
        buckets: bool,
        listed: u64,
    ) -> HashMap<RequestPrefix, Answer> {
        let mut answers = HashMap::with_capacity(needed.len());
        let mut pending = needed;
        // A waiter whose leader was cancelled retries; two retries bound the
        // loop even if that keeps happening.
        for _ in 0..3 {
            if pending.is_empty() {
                break;
            }
            let now = self.shared.now();
            let asked = pending.len();
            let misses = lock(&self.cache).lookup(versions, pending.drain(..), now, &mut answers);
            Counters::add(&self.shared.counters.cache_hits, (asked - misses.len()) as u64);
            let mut claim = Claim {
                confirmer: Arc::clone(self),
                senders: Vec::new(),
            };
            let mut joined = Vec::new();
            // In flight for other versions: asked again, not claimed.
            let mut unclaimed = Vec::new();
            {
                let mut in_flight = lock(&self.in_flight);
                for p in misses {
                    match in_flight.get(&p) {
                        Some((for_versions, rx)) if for_versions == versions => joined.push((p, rx.clone())),
                        Some(_) => unclaimed.push(p),
                        None => {
                            let (tx, rx) = watch::channel(None);
                            in_flight.insert(p, (versions.clone(), rx));
                            claim.senders.push((p, tx));
                        }
                    }
                }
            }
            if !claim.senders.is_empty() || !unclaimed.is_empty() {
                // The request is the agent's, not this check's: it runs to
                // its answer or its timeout on a task of its own, so that a
                // host giving up on the check first (a navigation's own
                // deadline, shorter than the request timeout) neither
                // strands the checks joined to it nor loses its outcome: an
                // answer is cached, a failure starts the backoff. Before, a
                // publisher that hung was asked again at every filter hit
                // of a host that cancelled each check before the request
                // timed out, and no failure was ever recorded.
                let asked: Vec<RequestPrefix> = claim
                    .senders
                    .iter()
                    .map(|(p, _)| *p)
                    .chain(unclaimed.iter().copied())
                    .collect();
                let request = Arc::clone(self).request(
                    claim,
                    unclaimed,
                    asked.clone(),
                    versions.clone(),
                    buckets,
                    listed,
                );
                match tokio::spawn(request).await {
                    Ok(fetched) => answers.extend(fetched),
                    // A panic is the check's, as when the request ran in it.
                    Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                    // The runtime is shutting down: the claimed prefixes left
                    // the in-flight map with the claim, and are asked again
                    // (at most twice more).
                    Err(_) => pending.extend(asked),
                }
            }
            for (p, mut rx) in joined {
                let shared = rx.wait_for(Option::is_some).await.ok().and_then(|v| v.clone());
                match shared {
                    Some(answer) => {
                        Counters::bump(&self.shared.counters.coalesced);
                        answers.insert(p, answer);
                    }
                    None => pending.push(p),
                }
            }
        }
        for p in pending {
            answers.insert(
                p,
                Err(Error::Transport {
                    url: self.publisher(),
                    reason: "the shared full-hash request was cancelled".to_owned(),
                    timed_out: false,
                }),
            );
        }
        answers
    }

    /// The full-hash request of `prefixes`, `claim`'s and `unclaimed` (in
    /// flight for other versions), for snapshot `versions`: every claimed
    /// prefix's answer is sent to the checks joined to it, and all are
    /// returned.
    async fn request(
        self: Arc<Self>,
        claim: Claim,
        unclaimed: Vec<RequestPrefix>,
        prefixes: Vec<RequestPrefix>,
        versions: Versions,
        buckets: bool,
        listed: u64,
    ) -> HashMap<RequestPrefix, Answer> {
        let mut fetched = self.fetch_full_hashes(prefixes, &versions, buckets, listed).await;
        let mut answers = HashMap::with_capacity(fetched.len());
        for (p, tx) in &claim.senders {
            let answer = fetched.remove(p).unwrap_or_else(|| self.unanswered(*p));
            tx.send_replace(Some(answer.clone()));
            answers.insert(*p, answer);
        }
        for p in unclaimed {
            let answer = fetched.remove(&p).unwrap_or_else(|| self.unanswered(p));
            answers.insert(p, answer);
        }
        answers
    }

    /// The answer for a prefix the request left unanswered.
    fn unanswered(&self, p: RequestPrefix) -> Answer {
        Err(Error::UnexpectedResponse {
            url: self.publisher(),
            reason: format!("no answer for prefix {p}"),
        })
    }

    /// The first publisher base URL, for an error that concerns no one
    /// request.
    fn publisher(&self) -> String {
        self.shared.base_urls.first().cloned().unwrap_or_default()
    }

    /// Sends full-hash requests for `prefixes` (none cached, none in
    /// flight): planned by [`prefix::plan_requests`], each answer read by
    /// [`prefix::sort_answers`] and cached if the snapshot `versions` they
    /// were asked for are still those of the cache. With `buckets`, each
    /// request is first asked of the immutable buckets
    /// ([`Confirmer::fetch_buckets`]), then by `POST` if that fails.
    async fn fetch_full_hashes(
        &self,
        prefixes: Vec<RequestPrefix>,
        versions: &Versions,
        buckets: bool,
        listed: u64,
    ) -> HashMap<RequestPrefix, Answer> {
        let mut plans: VecDeque<PlannedRequest> = self
            .shared
            .with_rng(|rng| {
                prefix::plan_requests(&prefixes, self.noise_prefixes, listed, &self.noise_key, rng)
            })
            .into();
        let mut answers = HashMap::with_capacity(prefixes.len());
        while let Some(plan) = plans.pop_front() {
            let to_buckets = buckets && plan.prefixes.len() * self.lists.len() <= MAX_BUCKET_REQUESTS;
            // One slot per HTTP request out at once: from the buckets, a
            // `GET` per prefix and list, all together. Held until this
            // request is answered or fails (the semaphore is never closed).
            let slots = if to_buckets {
                plan.prefixes.len() * self.lists.len()
            } else {
                1
            };
            let _slots = self.slots.acquire_many(slots as u32).await;
            let sent = self.shared.now();
            if let Err(paused) = lock(&self.backoff).check_for(sent, versions) {
                for p in &plan.real {
                    answers.insert(*p, Err(paused.clone()));
                }
                continue;
            }
            Counters::bump(&self.shared.counters.full_hash_requests);
            // The answer and the URL it came from (the first bucket's).
            let from_buckets = if to_buckets {
                match self.fetch_buckets(&plan, versions).await {
                    Ok(answer) => {
                        Counters::bump(&self.shared.counters.immutable_bucket_requests);
                        Some(answer)
                    }
                    Err(error) => {
                        Counters::bump(&self.shared.counters.immutable_bucket_fallbacks);
                        tracing::debug!(%error, "immutable full-hash buckets failed; searching by POST");
                        None
                    }
                }
            } else {
                None
            };
            let result = match from_buckets {
                Some(answer) => Ok(answer),
                None => self.search(&plan, versions).await,
            };
            match result {
                Ok((answer, url)) => {
                    let sorted = prefix::sort_answers(&plan.real, &answer, &self.lists);
                    let duration = Duration::from_secs(answer.answer.cache_duration_s);
                    // The answer as read, noise results and unsubscribed
                    // lists included, goes before the cache is touched.
                    drop(answer);
                    Counters::add(&self.shared.counters.ignored_full_hashes, sorted.ignored as u64);
                    let now = self.shared.now();
                    if !sorted.missing.is_empty() || !sorted.unreadable.is_empty() {
                        // A bad answer: some prefix asked about is left
                        // unverified, as after a body that does not parse,
                        // and requests pause as after one (a publisher or
                        // proxy answering every request so is not asked at
                        // every hit).
                        Counters::bump(&self.shared.counters.full_hash_failures);
                        self.shared
                            .with_rng(|rng| lock(&self.backoff).on_failure(None, sent, now, rng));
                    } else {
                        lock(&self.backoff).on_success();
                    }
                    lock(&self.cache).store(sorted, duration, versions, now, &url, &mut answers);
                }
                // An answer too large for one response (`413
                // answer_too_large`: buckets larger than planned, or the
                // publisher's padding; or an answer over the read limit,
                // from a publisher without that check): the same prefixes, noise included,
                // asked for half at a time, at once; nothing failed, so no
                // backoff.
                Err(Error::Status { status: 413, .. } | Error::ResponseTooLarge { .. })
                    if plan.prefixes.len() > 1 =>
                {
                    let [first, second] = plan.halves();
                    plans.push_front(second);
                    plans.push_front(first);
                }
                Err(error) => {
                    Counters::bump(&self.shared.counters.full_hash_failures);
                    tracing::warn!(%error, "full-hash request failed");
                    let now = self.shared.now();
                    let retry_after = error.retry_after();
                    self.shared.with_rng(|rng| {
                        let mut backoff = lock(&self.backoff);
                        if error.is_prefix_too_short() || error.is_unknown_list() {
                            // The snapshots are behind, or a list named is
                            // no longer served: the check updates and asks
                            // again (`Agent::check_urls`), and requests for
                            // other versions are not held back.
                            backoff.on_prefix_too_short(versions, now, rng);
                        } else {
                            backoff.on_failure(retry_after, sent, now, rng);
                        }
                    });
                    for p in &plan.real {
                        answers.insert(*p, Err(error.clone()));
                    }
                }
            }
        }
        answers
    }

    /// The answer to `plan` from the immutable full-hash buckets of the
    /// snapshot `versions`: one GET per subscribed list and prefix of the
    /// plan (noise included, so the publisher and a CDN see the same
    /// prefixes as a `POST` would carry), all at once, each from the base
    /// URLs in turn, merged ([`prefix::merge_buckets`]) so that the answer
    /// for a prefix holds every subscribed list's full hashes.
    ///
    /// # Errors
    ///
    /// The first failure: a bucket no base URL answered (`404
    /// version_gone`, `503 behind`, transport, a bad answer) or one
    /// without its prefix's result. The caller then asks by `POST`.
    async fn fetch_buckets(
        &self,
        plan: &PlannedRequest,
        versions: &Versions,
    ) -> Result<(SearchAnswer, String), Error> {
        let mut tasks = tokio::task::JoinSet::new();
        // Where the buckets are, for errors that concern no one of them.
        let mut at = String::new();
        for (index, list) in self.lists.iter().enumerate() {
            let Some(floor) = versions.get(&**list) else {
                return Err(Error::NotReady {
                    list: list.to_string(),
                });
            };
            // The snapshot's content, not its version alone: another
            // publisher's build of the same version is not asked.
            let snapshot = snapshot_id(floor.version, &floor.body_sha256);
            if at.is_empty()
                && let Some(base) = self.shared.base_urls.first()
            {
                at = format!("{base}{}", routes::list_hashes_base(list, &snapshot));
            }
            for &prefix in &plan.prefixes {
                let path = routes::list_hashes(list, &snapshot, prefix);
                let shared = Arc::clone(&self.shared);
                tasks.spawn(async move { (index, prefix, fetch_bucket(&shared, &path).await) });
            }
        }
        let mut buckets = HashMap::with_capacity(tasks.len());
        // Dropping the set on the first failure aborts the other GETs.
        while let Some(joined) = tasks.join_next().await {
            let (index, prefix, answer) = joined.map_err(|join| Error::UnexpectedResponse {
                url: at.clone(),
                reason: format!("a full-hash bucket request did not finish: {join}"),
            })?;
            buckets.insert((index, prefix), answer?);
        }
        let merged = prefix::merge_buckets(&plan.prefixes, &self.lists, &buckets).map_err(|reason| {
            Error::UnexpectedResponse {
                url: at.clone(),
                reason,
            }
        })?;
        Ok((merged, at))
    }

    /// One `POST /v1/hashes:search`, each base URL in turn, asking for
    /// answers at least as new as `versions` (a server behind answers `503`
    /// and the next one is asked).
    async fn search(
        &self,
        plan: &PlannedRequest,
        versions: &Versions,
    ) -> Result<(SearchAnswer, String), Error> {
        let request = crate::engine::confirm::search_request(
            plan.prefixes.iter().map(ToString::to_string).collect(),
            versions,
        );
        let mut first_error = None;
        let mut too_large = None;
        let mut refused = None;
        for base in &self.shared.base_urls {
            let url = format!("{base}{}", routes::SEARCH);
            let mut date = None;
            let result =
                http::search_full_hashes(&self.shared.client, &url, &request, self.shared.now(), &mut date)
                    .await;
            self.shared.observe_publisher_time(date);
            match result {
                Ok(response) => return Ok((response, url)),
                Err(error @ (Error::Status { status: 413, .. } | Error::ResponseTooLarge { .. })) => {
                    too_large.get_or_insert(error);
                }
                Err(error) if error.is_prefix_too_short() => {
                    refused.get_or_insert(error);
                }
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        // Too large where it was answered at all: the caller asks in parts,
        // whatever the other base URLs' failures were. Refused as too short
        // by one: the snapshots are behind, which an update cures (a base
        // URL that failed otherwise says nothing of that).
        // Unreachable without any: `build` guarantees at least one base URL.
        Err(too_large.or(refused).or(first_error).unwrap_or(Error::NoLists))
    }
}

/// `GET` of the immutable full-hash bucket at `path`, each base URL in
/// turn; the first error if none answers.
async fn fetch_bucket(shared: &Shared, path: &str) -> Result<SearchAnswer, Error> {
    let mut first_error = None;
    for base in &shared.base_urls {
        let url = format!("{base}{path}");
        let mut date = None;
        let result = http::fetch_bucket(&shared.client, &url, shared.now(), &mut date).await;
        shared.observe_publisher_time(date);
        match result {
            Ok(answer) => return Ok(answer),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    // Unreachable: `build` guarantees at least one base URL.
    Err(first_error.unwrap_or(Error::NoLists))
}

/// The request prefixes a check has claimed for a full-hash request.
/// Dropped when the answers are out (or the request's task is cancelled,
/// as at the runtime's shutdown): the prefixes leave the in-flight map, and
/// waiters of a cancelled request see the sender gone and retry.
struct Claim {
    confirmer: Arc<Confirmer>,
    senders: Vec<(RequestPrefix, AnswerSender)>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.senders.is_empty() {
            return;
        }
        let mut in_flight = lock(&self.confirmer.in_flight);
        for (p, _) in &self.senders {
            in_flight.remove(p);
        }
    }
}
