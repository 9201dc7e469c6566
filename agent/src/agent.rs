//! [`Agent`]: the runtime around [`crate::engine`]. It composes the two
//! protocol components — the lists ([`Lists`]: snapshots and their update
//! round) and the confirmation ([`Confirmer`]: full hashes) — over one
//! [`Shared`] runtime, and the background updates ([`Updates`]); a URL
//! check is a probe of the former and, for a hit, a question to the latter.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use blocksieve_format::SnapshotHeader;

use crate::Error;
use crate::config::{AgentBuilder, Settings};
use crate::confirm::{Confirmer, Versions};
use crate::engine::lookup::{self, FailurePolicy, LocalLookup, Verdict};
use crate::engine::prefix::RequestPrefix;
use crate::engine::schedule::UpdateSchedule;
use crate::lists::{Lists, Probed};
use crate::shared::Shared;
use crate::stats::{Counters, Stats};
use crate::status::Status;
use crate::update::{ListUpdate, UpdateReport};
use crate::updater::{UpdateHandle, Updates};

/// The state shared by every clone of an [`Agent`].
struct Inner {
    /// The client, clock, RNG and counters both components use.
    shared: Arc<Shared>,
    /// Snapshots and their updates. Behind its own `Arc` so that the
    /// update task can hold it weakly.
    lists: Arc<Lists>,
    /// Full hashes: cache, single flight, backoff.
    confirmer: Arc<Confirmer>,
    /// What an unverifiable prefix hit advises.
    failure_policy: FailurePolicy,
    /// How long a check refused as `prefix_too_short` waits for the update
    /// it starts (the request timeout).
    refusal_update_wait: Duration,
    /// The background update task.
    updates: Updates,
}

/// A blocksieve agent: keeps a verified filter snapshot of each subscribed
/// threat list and checks URLs against them, confirming prefix hits with the
/// publisher's full hashes.
///
/// Cloning is cheap and every clone shares the same filters, caches,
/// counters and HTTP connection pool; the agent is `Send + Sync` and meant
/// to be shared by all tasks of a process. URL checks do not wait for
/// updates (but for one the publisher refused as `prefix_too_short`:
/// [`Agent::check_urls`]).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use blocksieve_agent::{Agent, Verdict};
/// use blocksieve_format::TrustedKey;
///
/// // The publisher writes its public key here on first start.
/// let key = TrustedKey::from_base64(&std::fs::read_to_string("blocksieve-data/public.key")?)?;
/// let agent = Agent::builder("http://127.0.0.1:8080")
///     .list("malware")
///     .trusted_key(key)
///     .cache_dir("agent-cache")
///     .build()?;
/// let updates = agent.start_updates()?;
/// # agent.update().await?;
/// match agent.check_url("http://evil.example/login").await? {
///     Verdict::Unsafe { list, expression, .. } => println!("unsafe: {expression} is on {list}"),
///     v if v.should_block() => println!("cannot verify, blocking: {v:?}"),
///     _ => println!("safe"),
/// }
/// // A URL without a host is an error, never a verdict.
/// assert!(agent.check_url("mailto:someone@example.com").await.is_err());
/// updates.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lists = &self.inner.lists;
        let versions: Vec<(&str, Option<u64>)> = lists.names().map(|n| (n, lists.version(n))).collect();
        f.debug_struct("Agent")
            .field("base_urls", &self.inner.shared.base_urls)
            .field("lists", &versions)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts configuring an agent for the publisher at `base_url` (e.g.
    /// `https://publisher.example`; routes are appended as `/v1/...`).
    pub fn builder(base_url: impl Into<String>) -> AgentBuilder {
        AgentBuilder::new(base_url.into())
    }

    /// The agent for validated `settings`: the lists component (restored
    /// from the cache directory here) and the confirmation component, over
    /// one [`Shared`] runtime.
    fn new(settings: Settings, client: reqwest::Client) -> Self {
        let shared = Arc::new(Shared::new(
            client,
            settings.base_urls.clone(),
            Arc::clone(&settings.time),
        ));
        let lists = Arc::new(Lists::new(&settings, Arc::clone(&shared)));
        let confirmer = Arc::new(Confirmer::new(
            settings.lists.clone(),
            settings.full_hash_cache_bytes,
            settings.noise_prefixes,
            Arc::clone(&shared),
        ));
        let schedule =
            UpdateSchedule::new(settings.update_interval).with_cold_start_jitter(settings.initial_jitter);
        let inner = Inner {
            shared,
            lists,
            confirmer,
            failure_policy: settings.failure_policy,
            refusal_update_wait: settings.request_timeout,
            updates: Updates::new(schedule),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The subscribed threat lists, in subscription order.
    pub fn lists(&self) -> impl Iterator<Item = &str> {
        self.inner.lists.names()
    }

    /// The first publisher base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        self.inner.shared.base_urls.first().map_or("", String::as_str)
    }

    /// Every publisher base URL, in the order they are tried.
    pub fn base_urls(&self) -> impl Iterator<Item = &str> {
        self.inner.shared.base_urls.iter().map(String::as_str)
    }

    /// The snapshot version `list`'s state stands for — its base
    /// snapshot's, or that of the last delta applied to it — or `None` if
    /// none is loaded yet or the agent does not subscribe to `list`.
    pub fn snapshot_version(&self, list: &str) -> Option<u64> {
        self.inner.lists.version(list)
    }

    /// The verified header of `list`'s base snapshot, the last whole one
    /// taken (version, creation and expiry times, entry counts,
    /// false-positive rates), or `None` if none is loaded yet or the agent
    /// does not subscribe to `list`. Deltas applied since are in
    /// [`Agent::status`] ([`ListStatus::additions`](crate::ListStatus::additions)).
    pub fn snapshot_header(&self, list: &str) -> Option<SnapshotHeader> {
        self.inner.lists.header(list)
    }

    /// A copy of the counters.
    pub fn stats(&self) -> Stats {
        self.inner.shared.counters.snapshot()
    }

    /// Every list's snapshot (version, age, expiry, stale flag, source,
    /// floor) and update state (last success, last error, consecutive
    /// failures), the clock skew, and the counters. Staleness and skew are
    /// computed against the clock now, at every call.
    pub fn status(&self) -> Status {
        let inner = &self.inner;
        let now = inner.shared.now();
        let lists = inner.lists.statuses(now);
        let full_hash_paused_for = inner.confirmer.paused_for(now, &inner.lists.versions());
        let clock_skew = inner.shared.clock_skew(|| now);
        Status {
            lists,
            stats: self.stats(),
            updates_running: self.updates_running(),
            full_hash_paused_for,
            clock_skew,
        }
    }

    /// Brings every list up to date with the publisher now, one list after
    /// the other: a conditional `GET /v1/lists/{list}/snapshot` with the
    /// stored ETag (each base URL in turn until one succeeds), then, for a
    /// new body, [`crate::engine::accept::accept`] (signature, limits, list
    /// name, version floor), persistence to the cache directory, and an
    /// atomic swap. A snapshot that has already expired by this agent's
    /// clock (a frozen feed, or a clock running ahead) is accepted on the
    /// same terms and used flagged stale, counted in
    /// [`Stats::expired_snapshots_applied`]. A list whose download or
    /// verification fails keeps its current filter; the report says why.
    ///
    /// [`Agent::start_updates`] runs this on a schedule; calling it by hand
    /// as well is fine. Updates are serialised; URL checks never wait for
    /// one, except a check refused as `prefix_too_short`
    /// ([`Agent::check_urls`]), for at most the request timeout.
    ///
    /// # Errors
    ///
    /// Only when some list still has no snapshot at all after this round,
    /// so that [`Agent::check_url`] answers only confirmed unsafe URLs yet
    /// (the rest are [`Error::NotReady`]): the error is that
    /// list's failure (the first such list's, if several). Lists that did
    /// update in the same round keep their new snapshot. When every list has
    /// a filter the result is `Ok`, even if some updates failed: check
    /// [`UpdateReport::is_complete`] or [`UpdateReport::failures`].
    pub async fn update(&self) -> Result<UpdateReport, Error> {
        let mut lists = self.inner.lists.update_all().await;
        let unready = lists.iter().position(|(_, u)| {
            matches!(
                u,
                ListUpdate::Failed {
                    kept_version: None,
                    ..
                }
            )
        });
        if let Some(index) = unready
            && let (_, ListUpdate::Failed { error, .. }) = lists.swap_remove(index)
        {
            return Err(error);
        }
        Ok(UpdateReport { lists })
    }

    /// Checks `url` against every subscribed list; see
    /// [`Agent::check_urls`], of which this is the one-URL case.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host;
    /// [`Error::NotReady`] when a list has no snapshot yet and the lists
    /// that have one do not confirm the URL unsafe. A failed full-hash
    /// request is not an error but a [`Verdict::Unverified`].
    pub async fn check_url(&self, url: &str) -> Result<Verdict, Error> {
        self.check_urls([url])
            .await
            .pop()
            .unwrap_or(Err(Error::NotReady { list: String::new() }))
    }

    /// Checks each of `urls` against every subscribed list, answering in the
    /// same order.
    ///
    /// Each URL is canonicalized and its host-suffix/path-prefix expressions
    /// hashed once. A URL whose expressions hit no local filter is
    /// [`Verdict::Safe`] without any request. The full hashes that did hit
    /// are confirmed together: their [`RequestPrefix`]es (of the longest
    /// length the subscribed lists advertise,
    /// [`LocalLookup::request_prefix_of`]) are answered from the full-hash
    /// cache where
    /// possible, joined to a request already in flight for the same prefix
    /// (single flight), and the rest sent in one `POST /v1/hashes:search`
    /// per 1,000 prefixes, with noise prefixes, shuffled. A URL is
    /// [`Verdict::Unsafe`] only if the publisher returns a full hash, on a
    /// subscribed list, equal to one of its hit expressions'; a prefix hit
    /// alone never is. When the full hashes cannot be had the verdict is
    /// [`Verdict::Unverified`], flagged to block under
    /// [`FailurePolicy::FailClosed`].
    /// Verdicts based on an expired snapshot say so (`stale`), computed
    /// against the clock at each check: a miss is [`Verdict::Safe`] with
    /// `stale: true`, a hit is confirmed (or unverified) as always.
    ///
    /// When the publisher refuses a request prefix as too short for the
    /// list it now serves (`400 prefix_too_short`: the list's request
    /// prefix length grew past what it still answers at the old length,
    /// and the snapshots held are behind), the check waits, up to the
    /// request timeout, for an update round (one for every check refused
    /// at the same versions, after any round in progress) and, if that
    /// brought a new version, checks the URLs left unverified once more;
    /// each pass is counted in [`Stats`] (a URL checked again counts twice
    /// in `lookups` and `prefix_hits`, once `unverified` and once by its
    /// final outcome). Such refusals start no backoff until an update
    /// leaves the versions as they were
    /// ([`FullHashBackoff::on_prefix_too_short`](crate::engine::schedule::FullHashBackoff::on_prefix_too_short)).
    ///
    /// While a list has no snapshot yet (newly subscribed and not fetched,
    /// or its saved snapshot refused at start), the lists that have one
    /// are still probed and confirmed: a URL they confirm unsafe is
    /// [`Verdict::Unsafe`], so one unreachable list does not switch the
    /// others off for hosts that let errors through. Any other outcome is
    /// [`Error::NotReady`]: the list not probed may hold the URL (an
    /// unverified hit too, so a host under [`FailurePolicy::FailClosed`]
    /// should block on `NotReady` as well).
    ///
    /// # Errors
    ///
    /// Per URL: [`Error::InvalidUrl`] when it names no host;
    /// [`Error::NotReady`] when a list has no snapshot yet and the others do
    /// not confirm the URL unsafe.
    pub async fn check_urls<I, S>(&self, urls: I) -> Vec<Result<Verdict, Error>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let urls: Vec<S> = urls.into_iter().collect();
        let (mut verdicts, refused_at) = self.check_once(urls.iter().map(AsRef::as_ref)).await;
        let Some(swaps) = refused_at else {
            return verdicts;
        };
        // The snapshots probed are behind the publisher's (or name a list
        // it no longer serves, which the round finds): one update round
        // (shared by the checks refused meanwhile, none if one has already
        // moved a list on), waited for up to the request timeout and
        // otherwise left to finish by itself; then what was left
        // unverified is checked again if a list moved on.
        let lists = &self.inner.lists;
        // Read after the refusal: a whole round started later asked the
        // publisher after it, and is the one this check needs.
        let rounds = lists.rounds_started();
        let round = tokio::spawn({
            let lists = Arc::clone(lists);
            async move { lists.update_all_unless_swapped(swaps, rounds).await }
        });
        let finished = tokio::time::timeout(self.inner.refusal_update_wait, round)
            .await
            .is_ok();
        if lists.swaps() == swaps {
            if finished {
                self.inner.confirmer.on_update_without_change(&lists.versions());
            }
            return verdicts;
        }
        let again: Vec<usize> = verdicts
            .iter()
            .enumerate()
            .filter(|(_, verdict)| matches!(verdict, Ok(Verdict::Unverified { .. })))
            .map(|(index, _)| index)
            .collect();
        let (rechecked, _) = self.check_once(again.iter().map(|&i| urls[i].as_ref())).await;
        for (index, verdict) in again.into_iter().zip(rechecked) {
            verdicts[index] = verdict;
        }
        verdicts
    }

    /// One pass of [`Agent::check_urls`]: the verdicts, and, when a
    /// full-hash request was refused as `prefix_too_short`, the lists'
    /// swap count ([`Lists::swaps`]) read before the URLs were probed: an
    /// update landing after it makes the count differ, and the URLs are
    /// checked again.
    async fn check_once<'a>(
        &self,
        urls: impl Iterator<Item = &'a str>,
    ) -> (Vec<Result<Verdict, Error>>, Option<u64>) {
        let inner = &self.inner;
        let swaps_before = inner.lists.swaps();
        let counters = &inner.shared.counters;
        let now = inner.shared.now();
        // Each URL's hits on the lists that have a snapshot, and the first
        // list that has none: its URLs are answered only if unsafe.
        let locals: Vec<Result<Probed, Error>> = urls
            .into_iter()
            .map(|url| {
                let (local, unready) = inner.lists.lookup_loaded(url, now)?;
                if !local.snapshot_versions.is_empty() {
                    // Probed against at least one filter.
                    Counters::bump(&counters.lookups);
                }
                if local.is_empty() {
                    if let Some(list) = unready {
                        return Err(Error::NotReady {
                            list: list.to_string(),
                        });
                    }
                } else {
                    Counters::bump(&counters.prefix_hits);
                }
                Ok((local, unready))
            })
            .collect();
        // The versions probed (or newer): answers must be at least as new,
        // or a listed URL the older data lacks would pass as safe. Read
        // after every probe: a list gets a snapshot, never loses it, so each
        // list any URL probed is named.
        let (versions, loaded) = if locals.iter().flatten().any(|(local, _)| !local.is_empty()) {
            (inner.lists.versions(), inner.lists.loaded())
        } else {
            (Versions::new(), 0)
        };
        // A URL probed while a list had no snapshot that has one now (any
        // such list: more lists have one than it probed): its
        // request prefixes were sized without that list, which the request
        // names now (the publisher counts that list's bucket under them and
        // could refuse the whole request). It was not probed against that
        // list either: not ready, and not asked.
        let locals: Vec<Result<Probed, Error>> = locals
            .into_iter()
            .map(|probed| match probed {
                Ok((local, Some(list))) if local.snapshot_versions.len() < loaded => {
                    Counters::bump(&counters.unverified);
                    Err(Error::NotReady {
                        list: list.to_string(),
                    })
                }
                other => other,
            })
            .collect();
        let needed: BTreeSet<RequestPrefix> = locals
            .iter()
            .flatten()
            .flat_map(|(local, _)| local.request_prefixes())
            .collect();
        let answers = if needed.is_empty() {
            HashMap::new()
        } else {
            // Immutable buckets only for exactly these versions, of every list.
            let buckets = inner.lists.buckets_advertised(&versions);
            let listed = inner.lists.full_hashes_held();
            inner
                .confirmer
                .resolve(needed.into_iter().collect(), &versions, buckets, listed)
                .await
        };
        // Refused for snapshots behind the publisher's, or for naming a
        // list it does not serve: what an update round cures.
        let refused = answers.values().any(|answer| {
            answer
                .as_ref()
                .is_err_and(|e| e.is_prefix_too_short() || e.is_unknown_list())
        });
        let lists: Vec<&str> = inner.lists.names().collect();
        let verdicts = locals
            .into_iter()
            .map(|local| {
                let (local, unready) = local?;
                let verdict = lookup::decide(&local, &answers, &lists, inner.failure_policy);
                // A hit on a list the request left out (not served when the
                // check began) was asked of no one: no answer refuted it.
                let verdict = lookup::unless_unasked(
                    verdict,
                    &local,
                    |list| versions.contains_key(list),
                    |list| (inner.lists.not_served(list)).unwrap_or_else(|| lookup::not_asked(list)),
                    inner.failure_policy,
                );
                if !local.is_empty() {
                    Counters::bump(match &verdict {
                        Verdict::Unsafe { .. } => &counters.confirmed_unsafe,
                        Verdict::Safe { .. } => &counters.false_prefix_hits,
                        // `Unverified`, and any later kind of non-answer.
                        _ => &counters.unverified,
                    });
                }
                lookup::unless_unready(verdict, unready.as_ref())
            })
            .collect();
        (verdicts, refused.then_some(swaps_before))
    }

    /// Probes the local filters with `url`'s expressions without any
    /// request, for hot paths: which expressions' hash prefixes hit, per
    /// list, and which snapshot versions answered. A hit is only a candidate
    /// (see [`Agent::check_urls`]); no hit means the URL is on none of the
    /// lists as of those snapshots. Never blocks on an update. Not counted in
    /// [`Agent::stats`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host;
    /// [`Error::NotReady`] when a list has no snapshot yet.
    pub fn lookup_local(&self, url: &str) -> Result<LocalLookup, Error> {
        self.inner.lists.lookup_local(url, self.inner.shared.now_coarse())
    }

    /// Starts the background updates: one task that checks every list for a
    /// new snapshot on the schedule of [`engine::schedule`](crate::engine::schedule)
    /// — initial jitter, the publisher's next-check hint (or
    /// [`AgentBuilder::update_interval`](crate::AgentBuilder::update_interval)),
    /// exponential backoff with full jitter after failures, `Retry-After` —
    /// one list update at a time, serialised with [`Agent::update`].
    ///
    /// The updates run until [`Agent::shutdown`] or
    /// [`UpdateHandle::shutdown`], or until the handle or every clone of the
    /// agent is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::NoRuntime`] outside a tokio runtime;
    /// [`Error::UpdatesAlreadyRunning`] if they are already running.
    pub fn start_updates(&self) -> Result<UpdateHandle, Error> {
        self.inner.updates.start(&self.inner.lists, &self.inner.shared)
    }

    /// Stops the background updates, if running, and waits until the task
    /// has ended. Lookups keep working from the snapshots in use; updates
    /// can be started again.
    pub async fn shutdown(&self) {
        self.inner.updates.shutdown().await;
    }

    /// Whether the background updates are running.
    pub fn updates_running(&self) -> bool {
        self.inner.updates.is_running()
    }
}

impl AgentBuilder {
    /// Validates the settings and creates the agent. No request is sent.
    /// With a [`cache_dir`](AgentBuilder::cache_dir), the cached snapshots
    /// are read and verified here (blocking file I/O and, for large lists,
    /// some CPU), so lookups answer right away; otherwise call
    /// [`Agent::update`] or [`Agent::start_updates`] to load the first
    /// snapshots.
    ///
    /// # Errors
    ///
    /// [`Error::NoLists`], [`Error::NoTrustedKeys`],
    /// [`Error::InvalidListName`], [`Error::InvalidBaseUrl`],
    /// [`Error::InvalidSetting`] for the setting at fault,
    /// [`Error::InvalidCacheDir`] when the cache directory cannot be created
    /// or its lock file cannot be opened or locked,
    /// [`Error::CacheDirInUse`] when another agent holds the cache
    /// directory ([`AgentBuilder::cache_dir`]), and [`Error::HttpClient`]
    /// if the HTTP client cannot be created. A
    /// corrupt cached file is not an error: it is quarantined and reported in
    /// [`Agent::status`].
    ///
    /// ```
    /// use blocksieve_agent::{Agent, Error};
    /// use blocksieve_format::SigningKey;
    ///
    /// let key = SigningKey::from_secret_bytes([7; 32]).public_key().clone();
    /// let agent = Agent::builder("https://publisher.example")
    ///     .list("malware")
    ///     .trusted_key(key.clone())
    ///     .build()?;
    /// assert_eq!(agent.snapshot_version("malware"), None);
    ///
    /// // Upper case is not a valid list name.
    /// let err = Agent::builder("https://publisher.example").list("Malware").trusted_key(key.clone()).build();
    /// assert!(matches!(err, Err(Error::InvalidListName { .. })));
    ///
    /// // Plain HTTP leaves full-hash answers open to tampering.
    /// let err = Agent::builder("http://publisher.example").list("malware").trusted_key(key).build();
    /// assert!(matches!(err, Err(Error::InvalidBaseUrl { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn build(self) -> Result<Agent, Error> {
        let (settings, client) = self.validate()?;
        Ok(Agent::new(settings, client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_is_shareable() {
        fn assert_shareable<T: Clone + Send + Sync + 'static>() {}
        assert_shareable::<Agent>();
        // Errors travel across tasks and into `anyhow`.
        fn assert_error<T: std::error::Error + Send + Sync + 'static>() {}
        assert_error::<Error>();
    }
}
