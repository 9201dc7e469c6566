//! The agent's settings and their validating builder.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use blocksieve_format::api::ListsResponse;
use blocksieve_format::{DecodeLimits, TrustedKey, is_valid_list_name};
use reqwest::header::HeaderValue;

use crate::engine::lookup::FailurePolicy;
use crate::engine::schedule::{COLD_START_JITTER, MAX_SERVER_DELAY};
use crate::store::Store;
use crate::{Error, http};

/// The default for [`AgentBuilder::request_timeout`]: 10 seconds.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The default for [`AgentBuilder::snapshot_timeout`]: 5 minutes.
pub const DEFAULT_SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The default for [`AgentBuilder::pool_idle_timeout`]: 5 seconds, half the
/// publisher's default idle cut (`header_read_timeout_s`, 10 s), so the
/// agent drops an idle connection before the publisher can close it under
/// a request (see [`AgentBuilder::pool_idle_timeout`]).
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// The default for [`AgentBuilder::max_snapshot_bytes`]: 256 MiB, the
/// format's default decode limit.
pub const DEFAULT_MAX_SNAPSHOT_BYTES: u64 = 256 * 1024 * 1024;

/// The hard upper bound of [`AgentBuilder::max_snapshot_bytes`]: 4 GiB. A
/// snapshot is held in memory whole, twice while it is decompressed.
pub const MAX_SNAPSHOT_BYTES_LIMIT: u64 = 4 * 1024 * 1024 * 1024;

/// The default for [`AgentBuilder::max_additions_ratio`]: 0.3, a rebase
/// once the hash prefixes added by deltas pass 30 % of the base snapshot's.
pub use crate::engine::delta::DEFAULT_MAX_ADDITIONS_RATIO;

/// The hard upper bound of [`AgentBuilder::max_additions_ratio`]: 4, the
/// additions four times the base (16 bytes of memory per base entry).
pub const MAX_ADDITIONS_RATIO_LIMIT: f64 = 4.0;

/// The default for [`AgentBuilder::full_hash_cache_bytes`]: 4 MiB. An
/// answer costs 32 bytes per full hash listed under its request prefix,
/// 48 bytes per list among them (list names are shared, not copied per
/// answer), 16 bytes for its table of lists and 168 bytes of bookkeeping:
/// the budget holds some 600 answers under 12-bit request prefixes of an
/// 840,000-entry list (about 205 full hashes, 6.8 KB each), or about 25,000
/// misses. A URL check whose answer was evicted costs one more full-hash
/// request.
pub const DEFAULT_FULL_HASH_CACHE_BYTES: usize = 4 * 1024 * 1024;

/// The hard upper bound of [`AgentBuilder::full_hash_cache_bytes`]: 1 GiB,
/// room for the full hashes of a 30-million-entry list. Larger values are
/// almost certainly unit mistakes.
pub const MAX_FULL_HASH_CACHE_BYTES: usize = 1024 * 1024 * 1024;

/// The default for [`AgentBuilder::noise_prefixes`]: 4 random prefixes per
/// full-hash request, so the real one is one of at least five.
pub const DEFAULT_NOISE_PREFIXES: usize = 4;

/// The hard upper bound of [`AgentBuilder::noise_prefixes`]: 64.
pub const MAX_NOISE_PREFIXES: usize = 64;

/// The default for [`AgentBuilder::update_interval`]: 10 minutes, a third
/// of the publisher's default 30-minute build cadence. A check is a
/// conditional request, so an unchanged snapshot costs a `304`.
pub const DEFAULT_UPDATE_INTERVAL: Duration = Duration::from_secs(10 * 60);

/// The hard upper bound of [`AgentBuilder::mirror`]: eight base URLs in all.
pub const MAX_BASE_URLS: usize = 8;

/// The longest timeout or interval accepted: one day. Longer values are
/// almost certainly unit mistakes (milliseconds given as seconds).
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// Where the agent reads the wall-clock time: snapshot expiry, staleness,
/// full-hash cache and backoff deadlines. (Waiting between updates uses
/// tokio's monotonic clock.) The model is rustls's `TimeProvider`: tests and
/// platforms without a system clock supply their own.
pub trait TimeProvider: fmt::Debug + Send + Sync {
    /// The current time.
    fn now(&self) -> SystemTime;

    /// The current time for [`Agent::lookup_local`](crate::Agent::lookup_local),
    /// which reads it on every check only to tell whether a snapshot has
    /// expired — an instant given in whole seconds. A clock a few
    /// milliseconds old will do, if it is cheaper to read. By default,
    /// [`TimeProvider::now`].
    fn now_coarse(&self) -> SystemTime {
        self.now()
    }
}

/// The system clock, [`SystemTime::now`]; the default [`TimeProvider`].
///
/// Its [`now_coarse`](TimeProvider::now_coarse) on Linux is the kernel's
/// coarse wall clock (`CLOCK_REALTIME_COARSE`, the same time as of the last
/// timer tick: at most a few milliseconds behind, and read without the
/// clock source, which costs as much as the rest of a check's bookkeeping
/// on virtual machines); elsewhere, [`SystemTime::now`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl TimeProvider for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn now_coarse(&self) -> SystemTime {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        match (u64::try_from(t.tv_sec), u32::try_from(t.tv_nsec)) {
            (Ok(secs), Ok(nanos)) if nanos < 1_000_000_000 => {
                SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
            }
            // Before 1970: not a clock this agent can use coarsely.
            _ => SystemTime::now(),
        }
    }
}

/// Validated settings shared by every request of an agent.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The publisher base URLs without a trailing `/`, tried in order, so
    /// that routes can be appended as `{base}/v1/...`.
    pub(crate) base_urls: Vec<String>,
    /// Subscribed list names, deduplicated, in the order given.
    pub(crate) lists: Vec<String>,
    /// Keys a snapshot header may be signed with.
    pub(crate) trusted_keys: Vec<TrustedKey>,
    /// Decode limits; the body limits equal `max_snapshot_bytes`.
    pub(crate) limits: DecodeLimits,
    /// The most snapshot bytes downloaded (or read from the cache) before
    /// giving up.
    pub(crate) max_snapshot_bytes: u64,
    /// Total time allowed for one snapshot download.
    pub(crate) snapshot_timeout: Duration,
    /// Total time allowed for one other request; also how long a check
    /// refused as `prefix_too_short` waits for the update it starts.
    pub(crate) request_timeout: Duration,
    /// Additions since the base, as a share of its entries, past which an
    /// update takes the whole snapshot instead of deltas.
    pub(crate) max_additions_ratio: f64,
    /// Where accepted snapshots and floors are persisted, if anywhere.
    pub(crate) cache_dir: Option<PathBuf>,
    /// The cache directory's files, its lock taken.
    pub(crate) store: Option<Store>,
    /// The most bytes the cached full-hash answers may take.
    pub(crate) full_hash_cache_bytes: usize,
    /// Random prefixes added to each full-hash request.
    pub(crate) noise_prefixes: usize,
    /// What an unverifiable prefix hit advises.
    pub(crate) failure_policy: FailurePolicy,
    /// The wait between background checks without a next-check hint.
    pub(crate) update_interval: Duration,
    /// The longest initial jitter of a list without a usable snapshot.
    pub(crate) initial_jitter: Duration,
    /// The wall clock.
    pub(crate) time: Arc<dyn TimeProvider>,
}

/// Builds an [`Agent`](crate::Agent); see
/// [`Agent::builder`](crate::Agent::builder). Every setting is checked by
/// [`AgentBuilder::build`], so a misconfiguration fails at start rather than
/// at the first update. Settings that weaken security or privacy are named
/// `dangerous_*`.
#[derive(Debug, Clone)]
#[must_use = "an AgentBuilder does nothing until .build() is called"]
pub struct AgentBuilder {
    base_urls: Vec<String>,
    lists: Vec<String>,
    trusted_keys: Vec<TrustedKey>,
    request_timeout: Duration,
    snapshot_timeout: Duration,
    pool_idle_timeout: Duration,
    max_snapshot_bytes: u64,
    max_additions_ratio: f64,
    user_agent: String,
    cache_dir: Option<PathBuf>,
    full_hash_cache_bytes: usize,
    noise_prefixes: usize,
    noise_disabled: bool,
    failure_policy: FailurePolicy,
    update_interval: Duration,
    initial_jitter: Duration,
    allow_plain_http: bool,
    time: Arc<dyn TimeProvider>,
}

impl AgentBuilder {
    pub(crate) fn new(base_url: String) -> Self {
        Self {
            base_urls: vec![base_url],
            lists: Vec::new(),
            trusted_keys: Vec::new(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            snapshot_timeout: DEFAULT_SNAPSHOT_TIMEOUT,
            pool_idle_timeout: DEFAULT_POOL_IDLE_TIMEOUT,
            max_snapshot_bytes: DEFAULT_MAX_SNAPSHOT_BYTES,
            max_additions_ratio: DEFAULT_MAX_ADDITIONS_RATIO,
            user_agent: concat!("blocksieve-agent/", env!("CARGO_PKG_VERSION")).to_owned(),
            cache_dir: None,
            full_hash_cache_bytes: DEFAULT_FULL_HASH_CACHE_BYTES,
            noise_prefixes: DEFAULT_NOISE_PREFIXES,
            noise_disabled: false,
            failure_policy: FailurePolicy::FailOpen,
            update_interval: DEFAULT_UPDATE_INTERVAL,
            initial_jitter: COLD_START_JITTER,
            allow_plain_http: false,
            time: Arc::new(SystemClock),
        }
    }

    /// Adds a further publisher base URL (a mirror serving the same signed
    /// snapshots). Every request tries the base URLs in the order given —
    /// the one passed to [`Agent::builder`](crate::Agent::builder) first —
    /// and moves to the next when one fails, or answers "unchanged" past
    /// the list's next build (a mirror that stopped following its
    /// publisher; the answer stands if no other is ahead). At most [`MAX_BASE_URLS`] in
    /// all. By default, only the base URL given to
    /// [`Agent::builder`](crate::Agent::builder) is used.
    pub fn mirror(mut self, base_url: impl Into<String>) -> Self {
        self.base_urls.push(base_url.into());
        self
    }

    /// Subscribes to the threat list `name` (1–64 bytes of `a-z0-9_-`).
    /// Subscribing twice to the same list is the same as once; at most 64
    /// lists (what one full-hash answer names). By default,
    /// the agent subscribes to no list, and [`AgentBuilder::build`] fails
    /// until one is added.
    pub fn list(mut self, name: impl Into<String>) -> Self {
        self.lists.push(name.into());
        self
    }

    /// Subscribes to each of `names`; see [`AgentBuilder::list`]. By
    /// default, the agent subscribes to no list.
    pub fn lists<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.lists.extend(names.into_iter().map(Into::into));
        self
    }

    /// Trusts `key` to sign snapshots: a snapshot is accepted only if its
    /// header verifies under one of the trusted keys. Add the next key
    /// alongside the current one to rotate keys without downtime. By
    /// default, no key is trusted, and [`AgentBuilder::build`] fails until
    /// one is added.
    pub fn trusted_key(mut self, key: TrustedKey) -> Self {
        self.trusted_keys.push(key);
        self
    }

    /// Trusts each of `keys`; see [`AgentBuilder::trusted_key`]. By default,
    /// no key is trusted.
    pub fn trusted_keys(mut self, keys: impl IntoIterator<Item = TrustedKey>) -> Self {
        self.trusted_keys.extend(keys);
        self
    }

    /// Persists every accepted snapshot, and the version floor that protects
    /// against rollback, in `dir` (created if missing). One agent per
    /// directory: the agent locks it (the file `lock` there, an advisory
    /// lock of the operating system) from its build until the last of its
    /// clones is dropped and any update round or write it started has
    /// ended (a round a check or the background updates spawned goes on
    /// up to [`AgentBuilder::snapshot_timeout`] after the drop), or its
    /// process ends, crashed or not; a second
    /// agent on it, of this process or another, fails to build with
    /// [`Error::CacheDirInUse`], which says when the holder is this process.
    /// A host replacing its agent on the same directory retries the build
    /// on that error until the old agent's round has ended. Keep it on a local disk: on a network file
    /// system the lock is only as good as the server's locking. A
    /// directory this process cannot write to is still read (its snapshots
    /// loaded, every write failing, reported in [`Agent::status`](crate::Agent::status)),
    /// unlocked, by any number of agents: one that cannot open `lock` for
    /// writing takes no lock (with a warning), as it can change nothing there
    /// (one that can write to the directory takes the lock all the same).
    /// [`AgentBuilder::build`] loads the snapshots found there
    /// that verify (signature, limits, list name) and pass the persisted
    /// version floor, so the agent answers before it reaches the network —
    /// an expired snapshot too: it answers flagged stale (misses
    /// [`Verdict::Safe`](crate::Verdict::Safe) with `stale: true`, hits
    /// confirmed with full hashes or unverified), as it would had it expired
    /// while in use, until an update brings a newer one; an old list still
    /// blocks old threats (FORMAT.md, "Expired snapshots"). A file that fails
    /// verification is renamed aside (`.quarantined`) and never loaded
    /// again. By default, nothing is persisted: every start waits for the
    /// network, and the floor starts empty.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// The longest a request may take from connecting to the end of its
    /// body: full-hash requests and list queries in total, snapshot
    /// downloads for connecting. Must be between 1 ms and one day. By
    /// default, [`DEFAULT_REQUEST_TIMEOUT`] (10 seconds).
    ///
    /// A full-hash request runs to its answer or this timeout even when
    /// the check that started it is given up on (its answer is cached, its
    /// failure pauses requests). At most 64 HTTP requests for full hashes
    /// are out at once (a request to the immutable buckets is one per
    /// `GET`); a check whose request would pass that waits for one to end.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The longest one snapshot download may take in total, which is longer
    /// than [`AgentBuilder::request_timeout`] because snapshots can be large;
    /// it also bounds a server that drips the body. Must be between 1 ms and
    /// one day. By default, [`DEFAULT_SNAPSHOT_TIMEOUT`] (5 minutes).
    pub fn snapshot_timeout(mut self, timeout: Duration) -> Self {
        self.snapshot_timeout = timeout;
        self
    }

    /// How long an idle connection stays in the agent's pool for reuse. It
    /// must be shorter than the time after which the publisher closes idle
    /// connections (its `header_read_timeout_s`, 10 s by default, or a
    /// proxy's idle timeout): otherwise a request can be sent on a pooled
    /// connection at the moment the server closes it, and fails. Must be
    /// between 1 ms and one day. By default, [`DEFAULT_POOL_IDLE_TIMEOUT`]
    /// (5 seconds).
    pub fn pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = timeout;
        self
    }

    /// The largest snapshot accepted, in bytes. It is enforced on the bytes
    /// received, not on `Content-Length`: the download stops as soon as the
    /// body grows past it. The same limit applies to the decompressed
    /// filter body and to cached files. Must be between 1 and
    /// [`MAX_SNAPSHOT_BYTES_LIMIT`]. By default, [`DEFAULT_MAX_SNAPSHOT_BYTES`]
    /// (256 MiB).
    pub fn max_snapshot_bytes(mut self, limit_bytes: u64) -> Self {
        self.max_snapshot_bytes = limit_bytes;
        self
    }

    /// When to take the whole snapshot again instead of following deltas
    /// (a *rebase*): once the 32-bit hash prefixes the deltas added since
    /// the last whole snapshot pass this share of that snapshot's entries.
    /// The additions are held exactly, 4 bytes each, beside the snapshot's
    /// filter, so the ratio bounds the memory they take (0.3 of an
    /// 814,000-entry list is about 1 MB) and the false prefix hits they add,
    /// `additions / 2^32` per probe; entries removed since the base linger
    /// among them until the rebase, each costing at most a full-hash
    /// request. 0 takes the whole snapshot at every new version (deltas
    /// are still asked for, but only to learn that nothing changed). Must
    /// be between 0 and [`MAX_ADDITIONS_RATIO_LIMIT`]. By default,
    /// [`DEFAULT_MAX_ADDITIONS_RATIO`] (0.3).
    pub fn max_additions_ratio(mut self, ratio: f64) -> Self {
        self.max_additions_ratio = ratio;
        self
    }

    /// The most memory the full-hash cache may take, in bytes: the answers
    /// to full-hash requests, each kept for its cache duration and reused
    /// for every check whose request prefix it covers. Each answer is
    /// accounted at its real size — about 32 bytes per full hash listed
    /// under its request prefix, plus its bookkeeping
    /// ([`FullHashCache::bytes`](crate::engine::cache::FullHashCache::bytes))
    /// — and the least recently used answers are evicted past the budget; 0
    /// disables the cache (every prefix hit then sends a request). At most
    /// [`MAX_FULL_HASH_CACHE_BYTES`]. By default,
    /// [`DEFAULT_FULL_HASH_CACHE_BYTES`] (4 MiB).
    pub fn full_hash_cache_bytes(mut self, limit_bytes: usize) -> Self {
        self.full_hash_cache_bytes = limit_bytes;
        self
    }

    /// How many random prefixes each full-hash request carries besides the
    /// real ones, shuffled among them, so that the publisher cannot tell
    /// which prefix the client cares about. Must be between 1 and
    /// [`MAX_NOISE_PREFIXES`] (use [`AgentBuilder::dangerous_disable_noise`]
    /// for none). By default, [`DEFAULT_NOISE_PREFIXES`] (4).
    pub fn noise_prefixes(mut self, count: usize) -> Self {
        self.noise_prefixes = count;
        self.noise_disabled = false;
        self
    }

    /// Sends full-hash requests without noise prefixes: the publisher then
    /// sees exactly the prefixes of the URLs that hit a filter. Only for
    /// tests and measurements. By default, [`DEFAULT_NOISE_PREFIXES`] noise
    /// prefixes are sent.
    pub fn dangerous_disable_noise(mut self) -> Self {
        self.noise_disabled = true;
        self
    }

    /// What a URL check advises when a prefix hit cannot be verified
    /// because the full-hash request failed: see [`FailurePolicy`]. The
    /// verdict is [`Verdict::Unverified`](crate::Verdict::Unverified) either
    /// way. By default, [`FailurePolicy::FailOpen`].
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// The wait between background update checks when the publisher sends
    /// no next-check hint (`X-Blocksieve-Next-Check` or `Cache-Control:
    /// max-age`); see [`engine::schedule`](crate::engine::schedule). Must be
    /// between 1 s and one day. By default, [`DEFAULT_UPDATE_INTERVAL`]
    /// (10 minutes).
    pub fn update_interval(mut self, interval: Duration) -> Self {
        self.update_interval = interval;
        self
    }

    /// The longest random delay before the background task first checks a
    /// list that has no fresh snapshot — none, or an expired one from the
    /// cache directory (so a fleet started together does not stampede, yet
    /// an agent that cannot answer, or answers stale, does not wait long).
    /// Lists a fresh cached snapshot already covers wait up to
    /// [`WARM_START_JITTER`](crate::engine::schedule::WARM_START_JITTER) (5
    /// minutes) instead. At most one hour. By default,
    /// [`COLD_START_JITTER`] (5
    /// seconds).
    pub fn initial_jitter(mut self, max: Duration) -> Self {
        self.initial_jitter = max;
        self
    }

    /// The `User-Agent` header of every request. By default,
    /// `blocksieve-agent/` followed by this crate's version.
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// Where the agent reads the wall-clock time; see [`TimeProvider`]. By
    /// default, [`SystemClock`].
    pub fn time_provider(mut self, time: Arc<dyn TimeProvider>) -> Self {
        self.time = time;
        self
    }

    /// Allows `http://` base URLs to hosts other than the loopback
    /// interface. Snapshots stay safe (they are signed), but full-hash
    /// answers are not: anyone on the path can read the requested prefixes
    /// and answer "not listed". By default, plain HTTP is accepted only to
    /// `localhost`, `127.0.0.0/8` and `::1`; the same rule holds for
    /// redirects (at most 10 are followed): one to a URL refused here fails
    /// the request (an `unverified` hit, a failed update).
    pub fn dangerous_allow_plain_http(mut self) -> Self {
        self.allow_plain_http = true;
        self
    }

    /// Validates the settings and creates the agent's HTTP client and
    /// cache directory: the checks of [`AgentBuilder::build`], which hands
    /// the result to the agent.
    pub(crate) fn validate(self) -> Result<(Settings, reqwest::Client), Error> {
        let mut lists: Vec<String> = Vec::with_capacity(self.lists.len());
        for name in &self.lists {
            if !is_valid_list_name(name) {
                return Err(Error::InvalidListName { name: name.clone() });
            }
            if !lists.contains(name) {
                lists.push(name.clone());
            }
        }
        if lists.is_empty() {
            return Err(Error::NoLists);
        }
        // A full-hash answer names at most this many lists (a binary
        // answer's list index is one byte; the JSON reader refuses more):
        // past it, a URL listed on more lists than that got an answer the
        // agent refused whole, never confirmed.
        if lists.len() > blocksieve_format::api::MAX_ANSWER_LISTS {
            return Err(invalid(
                "lists",
                format!(
                    "{} lists (expected at most {})",
                    lists.len(),
                    blocksieve_format::api::MAX_ANSWER_LISTS
                ),
            ));
        }
        if self.trusted_keys.is_empty() {
            return Err(Error::NoTrustedKeys);
        }
        if !(1..=MAX_SNAPSHOT_BYTES_LIMIT).contains(&self.max_snapshot_bytes) {
            return Err(invalid(
                "max_snapshot_bytes",
                format!(
                    "{} (expected 1 to {MAX_SNAPSHOT_BYTES_LIMIT})",
                    self.max_snapshot_bytes
                ),
            ));
        }
        if !(0.0..=MAX_ADDITIONS_RATIO_LIMIT).contains(&self.max_additions_ratio) {
            return Err(invalid(
                "max_additions_ratio",
                format!(
                    "{} (expected 0 to {MAX_ADDITIONS_RATIO_LIMIT})",
                    self.max_additions_ratio
                ),
            ));
        }
        if self.full_hash_cache_bytes > MAX_FULL_HASH_CACHE_BYTES {
            return Err(invalid(
                "full_hash_cache_bytes",
                format!(
                    "{} (expected at most {MAX_FULL_HASH_CACHE_BYTES})",
                    self.full_hash_cache_bytes
                ),
            ));
        }
        let noise_prefixes = if self.noise_disabled {
            0
        } else if (1..=MAX_NOISE_PREFIXES).contains(&self.noise_prefixes) {
            self.noise_prefixes
        } else {
            return Err(invalid(
                "noise_prefixes",
                format!(
                    "{} (expected 1 to {MAX_NOISE_PREFIXES}; dangerous_disable_noise() sends none)",
                    self.noise_prefixes
                ),
            ));
        };
        if self.base_urls.len() > MAX_BASE_URLS {
            return Err(invalid(
                "mirror",
                format!(
                    "{} base URLs (expected at most {MAX_BASE_URLS})",
                    self.base_urls.len()
                ),
            ));
        }
        check_timeout("snapshot_timeout", self.snapshot_timeout)?;
        if self.update_interval < Duration::from_secs(1) || self.update_interval > MAX_TIMEOUT {
            return Err(invalid(
                "update_interval",
                format!("{:?} (expected 1 s to {MAX_TIMEOUT:?})", self.update_interval),
            ));
        }
        if self.initial_jitter > MAX_SERVER_DELAY {
            return Err(invalid(
                "initial_jitter",
                format!(
                    "{:?} (expected at most {MAX_SERVER_DELAY:?})",
                    self.initial_jitter
                ),
            ));
        }
        let mut base_urls = Vec::with_capacity(self.base_urls.len());
        for url in &self.base_urls {
            let url = validate_base_url(url, self.allow_plain_http)?;
            if !base_urls.contains(&url) {
                base_urls.push(url);
            }
        }
        let client = self.client()?;
        let limits = DecodeLimits {
            max_body_bytes: self.max_snapshot_bytes,
            max_decompressed_bytes: self.max_snapshot_bytes,
            ..DecodeLimits::default()
        };
        if let Some(dir) = &self.cache_dir {
            if dir.as_os_str().is_empty() {
                // `create_dir_all("")` succeeds, and files named relative
                // to "" land in the working directory while its fsync fails.
                return Err(Error::InvalidCacheDir {
                    path: dir.clone(),
                    reason: "the path is empty (\".\" names the working directory)".to_owned(),
                });
            }
            std::fs::create_dir_all(dir).map_err(|e| Error::InvalidCacheDir {
                path: dir.clone(),
                reason: e.to_string(),
            })?;
        }
        // Last: every other setting is valid, so an agent refused for
        // another reason never held the lock.
        let store = self.cache_dir.clone().map(Store::open).transpose()?;
        let settings = Settings {
            base_urls,
            lists,
            trusted_keys: self.trusted_keys,
            limits,
            max_snapshot_bytes: self.max_snapshot_bytes,
            snapshot_timeout: self.snapshot_timeout,
            request_timeout: self.request_timeout,
            max_additions_ratio: self.max_additions_ratio,
            cache_dir: self.cache_dir,
            store,
            full_hash_cache_bytes: self.full_hash_cache_bytes,
            noise_prefixes,
            failure_policy: self.failure_policy,
            update_interval: self.update_interval,
            initial_jitter: self.initial_jitter,
            time: self.time,
        };
        Ok((settings, client))
    }

    /// Asks the publisher which threat lists it serves (`GET /v1/lists`), to
    /// subscribe to all of them: the base URLs are tried in order, the
    /// publisher's then each mirror's, until one answers. Uses this
    /// builder's timeout and user agent; lists and keys are not needed yet.
    ///
    /// # Errors
    ///
    /// A misconfiguration error as from [`AgentBuilder::build`], or, when
    /// no base URL answers, the transport or bad-data error of the first.
    pub async fn fetch_publisher_lists(&self) -> Result<ListsResponse, Error> {
        let bases = self
            .base_urls
            .iter()
            .map(|u| validate_base_url(u, self.allow_plain_http))
            .collect::<Result<Vec<_>, _>>()?;
        let client = self.client()?;
        let mut first_error = None;
        for base in &bases {
            match http::fetch_lists(
                &client,
                &format!("{base}{}", blocksieve_format::api::routes::LISTS),
            )
            .await
            {
                Ok(lists) => return Ok(lists),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| invalid("base_url", "none")))
    }

    /// The one HTTP client of the agent, with the validated user agent,
    /// request timeout and pool idle timeout.
    fn client(&self) -> Result<reqwest::Client, Error> {
        check_timeout("request_timeout", self.request_timeout)?;
        check_timeout("pool_idle_timeout", self.pool_idle_timeout)?;
        let user_agent = HeaderValue::from_str(&self.user_agent).map_err(|_| Error::InvalidSetting {
            setting: "user_agent",
            value: format!("{:?}", self.user_agent),
        })?;
        http::client(
            user_agent,
            self.request_timeout,
            self.pool_idle_timeout,
            self.allow_plain_http,
        )
    }
}

fn invalid(setting: &'static str, value: impl ToString) -> Error {
    Error::InvalidSetting {
        setting,
        value: value.to_string(),
    }
}

fn check_timeout(setting: &'static str, timeout: Duration) -> Result<(), Error> {
    if timeout < Duration::from_millis(1) || timeout > MAX_TIMEOUT {
        return Err(Error::InvalidSetting {
            setting,
            value: format!("{timeout:?} (expected 1 ms to {MAX_TIMEOUT:?})"),
        });
    }
    Ok(())
}

/// Checks that `url` is an absolute `https` URL (or `http` to a loopback
/// host, or anywhere if `allow_plain_http`) with a host and no query,
/// fragment or credentials, and returns it without a trailing `/`.
fn validate_base_url(url: &str, allow_plain_http: bool) -> Result<String, Error> {
    let invalid = |reason: &str| Error::InvalidBaseUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    // `127.0.0.1:8080` or `localhost:8080` read as a relative URL or as
    // the scheme `localhost`, which says less than what to write.
    let written = url.contains("://");
    let no_scheme = || {
        invalid(&format!(
            "no scheme: write it https://{url} (or http:// to a loopback host)"
        ))
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        if written {
            invalid(&e.to_string())
        } else {
            no_scheme()
        }
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(if written {
            invalid("scheme must be http or https")
        } else {
            no_scheme()
        });
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid("must not have a query or fragment"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid("must not contain credentials"));
    }
    if parsed.scheme() == "http" && !allow_plain_http && !http::is_loopback(parsed.host_str().unwrap_or("")) {
        return Err(invalid(
            "plain http is only accepted to a loopback host: use https",
        ));
    }
    Ok(parsed.as_str().trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coarse clock is the wall clock as of the last tick: never ahead
    /// of it, and behind by a tick (milliseconds), never by a second.
    #[test]
    fn the_system_clocks_coarse_time_is_the_wall_clock_within_a_tick() {
        for _ in 0..1000 {
            let coarse = SystemClock.now_coarse();
            let precise = SystemClock.now();
            let behind = precise
                .duration_since(coarse)
                .expect("coarse time ahead of the clock");
            assert!(behind < Duration::from_millis(100), "{behind:?} behind");
        }
    }

    #[test]
    fn base_url_is_normalised_without_trailing_slash() {
        assert_eq!(
            validate_base_url("http://127.0.0.1:8080/", false).ok().as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            validate_base_url("https://p.example/blocksieve/", false)
                .ok()
                .as_deref(),
            Some("https://p.example/blocksieve")
        );
    }

    #[test]
    fn base_url_rejections() {
        for bad in [
            "",
            "127.0.0.1:8080",
            "ftp://p.example",
            "http://p.example/?x=1",
            "http://u:p@p.example",
        ] {
            assert!(
                matches!(validate_base_url(bad, true), Err(Error::InvalidBaseUrl { .. })),
                "{bad:?} should be rejected"
            );
        }
        // Without a scheme, the error says to write one.
        for bare in ["127.0.0.1:8080", "localhost:8080"] {
            let e = validate_base_url(bare, true).unwrap_err().to_string();
            assert!(e.contains(&format!("no scheme: write it https://{bare}")), "{e}");
        }
        // A URL the URL Standard reads with its scheme still passes.
        assert_eq!(
            validate_base_url("http:localhost:8080", false).ok().as_deref(),
            Some("http://localhost:8080")
        );
    }

    #[test]
    fn plain_http_only_to_loopback_unless_dangerous() {
        for ok in [
            "http://127.0.0.1:1",
            "http://127.9.9.9/",
            "http://localhost:8080",
            "http://[::1]:80",
        ] {
            assert!(validate_base_url(ok, false).is_ok(), "{ok}");
        }
        for remote in ["http://p.example", "http://10.0.0.1", "http://[2001:db8::1]/"] {
            assert!(validate_base_url(remote, false).is_err(), "{remote}");
            assert!(validate_base_url(remote, true).is_ok(), "{remote}");
        }
    }
}
