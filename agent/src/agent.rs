//! [`Agent`]: the per-list filter slots, the update round and URL checks.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use blocksieve_format::{SnapshotHeader, TrustedKey, VerifiedSnapshot, decode};

use crate::Error;
use crate::config::{AgentBuilder, Settings};
use crate::http::{self, SnapshotFetch};
use crate::lookup::{self, LocalLookup, UrlHashes, Verdict};
use crate::stats::{Counters, Stats};
use crate::update::{self, Decision, ListUpdate, UpdateReport};

/// A snapshot in use, with the ETag it was served under. The only way in is
/// [`Loaded::new`], which takes a [`VerifiedSnapshot`]: nothing unverified
/// can be swapped into a [`ListSlot`].
#[derive(Debug)]
struct Loaded {
    snapshot: VerifiedSnapshot,
    /// Sent back as `If-None-Match` so an unchanged snapshot costs a 304.
    etag: Option<String>,
}

impl Loaded {
    fn new(snapshot: VerifiedSnapshot, etag: Option<String>) -> Self {
        Self { snapshot, etag }
    }
}

/// One subscribed list and its current snapshot.
#[derive(Debug)]
struct ListSlot {
    name: String,
    /// Swapped whole by updates; readers take an `Arc` and never block, so a
    /// check sees either the old filter or the new one, never a mix.
    current: ArcSwapOption<Loaded>,
}

impl ListSlot {
    fn version(&self) -> Option<u64> {
        self.current.load().as_ref().map(|l| l.snapshot.header().version)
    }
}

struct Inner {
    settings: Settings,
    /// Shared with decoding tasks on the blocking pool.
    trusted_keys: Arc<[TrustedKey]>,
    slots: Vec<ListSlot>,
    /// The one HTTP client: it pools connections across requests.
    client: reqwest::Client,
    counters: Counters,
    /// Serialises update rounds so that two concurrent rounds cannot race a
    /// version check against each other's swap (and roll a list back).
    update_lock: tokio::sync::Mutex<()>,
}

/// A blocksieve agent: keeps a verified filter snapshot of each subscribed
/// threat list and checks URLs against them, confirming prefix hits with the
/// publisher's full hashes.
///
/// Cloning is cheap and every clone shares the same filters, counters and
/// HTTP connection pool; the agent is `Send + Sync` and meant to be shared
/// by all tasks of a process.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use blocksieve_agent::{Agent, Verdict};
/// use blocksieve_format::TrustedKey;
///
/// // The publisher writes its public key here on first start.
/// let key = TrustedKey::from_base64(&std::fs::read_to_string("blocksieve-data/public.key")?)?;
/// let agent = Agent::builder("http://127.0.0.1:8080").list("malware").trusted_key(key).build()?;
/// agent.update().await?;
/// match agent.check_url("http://evil.example/login").await? {
///     Verdict::Unsafe { list, expression, .. } => println!("unsafe: {expression} is on {list}"),
///     _ => println!("safe"),
/// }
/// // A URL without a host is an error, never a verdict.
/// assert!(agent.check_url("mailto:someone@example.com").await.is_err());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let versions: Vec<(&str, Option<u64>)> = self
            .inner
            .slots
            .iter()
            .map(|s| (s.name.as_str(), s.version()))
            .collect();
        f.debug_struct("Agent")
            .field("base_url", &self.inner.settings.base_url)
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

    pub(crate) fn new(settings: Settings, client: reqwest::Client) -> Self {
        let slots = settings
            .lists
            .iter()
            .map(|name| ListSlot {
                name: name.clone(),
                current: ArcSwapOption::empty(),
            })
            .collect();
        Self {
            inner: Arc::new(Inner {
                trusted_keys: settings.trusted_keys.clone().into(),
                settings,
                slots,
                client,
                counters: Counters::default(),
                update_lock: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// The subscribed threat lists, in subscription order.
    pub fn lists(&self) -> impl Iterator<Item = &str> {
        self.inner.slots.iter().map(|s| s.name.as_str())
    }

    /// The publisher base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.inner.settings.base_url
    }

    /// The version of `list`'s snapshot in use, or `None` if none is loaded
    /// yet or the agent does not subscribe to `list`.
    pub fn snapshot_version(&self, list: &str) -> Option<u64> {
        self.slot(list).and_then(ListSlot::version)
    }

    /// The verified header of `list`'s snapshot in use (version, creation
    /// and expiry times, entry counts, false-positive rates), or `None` if
    /// none is loaded yet or the agent does not subscribe to `list`.
    pub fn snapshot_header(&self, list: &str) -> Option<SnapshotHeader> {
        let slot = self.slot(list)?;
        slot.current.load().as_ref().map(|l| l.snapshot.header().clone())
    }

    /// A copy of the counters.
    pub fn stats(&self) -> Stats {
        self.inner.counters.snapshot()
    }

    /// Brings every list up to date with the publisher, one list after the
    /// other: a conditional `GET /v1/lists/{list}/snapshot` with the stored
    /// ETag, then, for a new body, verification ([`decode`] against the
    /// trusted keys and limits, at the current time), a check that the
    /// signed header names the requested list and a strictly newer version,
    /// and an atomic swap. A list whose download or verification fails
    /// keeps its current filter; the report says why.
    ///
    /// Concurrent calls are serialised; URL checks are never blocked.
    ///
    /// # Errors
    ///
    /// Only when some list still has no snapshot at all after this round,
    /// so that [`Agent::check_url`] cannot answer yet: the error is that
    /// list's failure (the first such list's, if several). Lists that did
    /// update in the same round keep their new snapshot. When every list has
    /// a filter the result is `Ok`, even if some updates failed: check
    /// [`UpdateReport::is_complete`] or [`UpdateReport::failures`].
    pub async fn update(&self) -> Result<UpdateReport, Error> {
        let _round = self.inner.update_lock.lock().await;
        let mut lists = Vec::with_capacity(self.inner.slots.len());
        for slot in &self.inner.slots {
            let outcome = match self.update_list(slot).await {
                Ok(outcome) => outcome,
                Err(error) => {
                    Counters::bump(&self.inner.counters.update_failures);
                    let kept_version = slot.version();
                    tracing::warn!(list = %slot.name, ?kept_version, %error, "snapshot update failed");
                    ListUpdate::Failed { error, kept_version }
                }
            };
            lists.push((slot.name.clone(), outcome));
        }
        let unready = lists.iter().position(|(_, u)| {
            matches!(
                u,
                ListUpdate::Failed {
                    kept_version: None,
                    ..
                }
            )
        });
        if let Some(index) = unready {
            if let (_, ListUpdate::Failed { error, .. }) = lists.swap_remove(index) {
                return Err(error);
            }
        }
        Ok(UpdateReport { lists })
    }

    async fn update_list(&self, slot: &ListSlot) -> Result<ListUpdate, Error> {
        let settings = &self.inner.settings;
        let current = slot.current.load_full();
        let previous = current.as_ref().map(|l| l.snapshot.header().version);
        let url = format!("{}/v1/lists/{}/snapshot", settings.base_url, slot.name);
        let etag = current.as_ref().and_then(|l| l.etag.as_deref());
        let fetched = http::fetch_snapshot(
            &self.inner.client,
            &url,
            etag,
            settings.max_snapshot_bytes,
            settings.snapshot_timeout,
        )
        .await?;
        let (bytes, new_etag) = match (fetched, previous) {
            (SnapshotFetch::NotModified, Some(version)) => return Ok(ListUpdate::Unchanged { version }),
            (SnapshotFetch::NotModified, None) => {
                // Not reachable: If-None-Match is only sent with a snapshot loaded.
                return Err(Error::UnexpectedResponse {
                    url,
                    reason: "304 Not Modified without a snapshot loaded".to_owned(),
                });
            }
            (SnapshotFetch::Body { etag: Some(e), .. }, Some(version)) if Some(e.as_str()) == etag => {
                // The publisher ignored If-None-Match but serves the same
                // representation: nothing to verify.
                return Ok(ListUpdate::Unchanged { version });
            }
            (SnapshotFetch::Body { bytes, etag }, _) => (bytes, etag),
        };
        let snapshot = self.decode(&slot.name, &url, bytes).await?;
        let version = snapshot.header().version;
        match update::decide(&slot.name, current.as_ref().map(|l| &l.snapshot), &snapshot)? {
            Decision::Same => {
                // Remember the new ETag so the next request can be a 304.
                slot.current
                    .store(Some(Arc::new(Loaded::new(snapshot, new_etag))));
                Ok(ListUpdate::Unchanged { version })
            }
            Decision::Replace => {
                slot.current
                    .store(Some(Arc::new(Loaded::new(snapshot, new_etag))));
                Counters::bump(&self.inner.counters.snapshots_applied);
                tracing::info!(list = %slot.name, ?previous, version, "snapshot updated");
                Ok(ListUpdate::Updated { previous, version })
            }
        }
    }

    /// Verifies `bytes` on the blocking pool: hashing and decompressing up
    /// to [`AgentBuilder::max_snapshot_bytes`] would stall an async worker.
    async fn decode(&self, list: &str, url: &str, bytes: Vec<u8>) -> Result<VerifiedSnapshot, Error> {
        let keys = Arc::clone(&self.inner.trusted_keys);
        let limits = self.inner.settings.limits;
        // Before 1970 the clock is wrong; 0 still rejects nothing extra.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        match tokio::task::spawn_blocking(move || decode(&bytes, &keys, &limits, now)).await {
            Ok(Ok(snapshot)) => Ok(snapshot),
            Ok(Err(reason)) => Err(Error::Decode {
                list: list.to_owned(),
                reason,
            }),
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            // Cancelled: the runtime is shutting down.
            Err(join) => Err(Error::Transport {
                url: url.to_owned(),
                reason: format!("snapshot verification did not finish: {join}"),
                timed_out: false,
            }),
        }
    }

    /// Checks `url` against every subscribed list.
    ///
    /// The URL is canonicalized and each of its host-suffix/path-prefix
    /// expressions hashed once. If no expression's hash prefix is in any
    /// local filter, the URL is [`Verdict::Safe`] without any request.
    /// Otherwise the agent sends one `GET /v1/hashes/{prefix}` per distinct
    /// 32-bit prefix that hit (in expression order, the exact URL first,
    /// stopping at the first confirmation) and answers [`Verdict::Unsafe`] only if the
    /// publisher returns a full hash, on a subscribed list, equal to one of
    /// the URL's. A prefix hit alone is never unsafe.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host;
    /// [`Error::NotReady`] when a list has no snapshot yet; a transport or
    /// bad-data error when a full-hash request fails — never a guess of
    /// safe or unsafe.
    pub async fn check_url(&self, url: &str) -> Result<Verdict, Error> {
        let hashes = UrlHashes::of(url)?;
        let local = self.probe(&hashes)?;
        let counters = &self.inner.counters;
        Counters::bump(&counters.lookups);
        if local.is_empty() {
            return Ok(Verdict::Safe);
        }
        Counters::bump(&counters.prefix_hits);
        for prefix in local.prefixes() {
            let request_url = format!("{}/v1/hashes/{prefix}", self.inner.settings.base_url);
            Counters::bump(&counters.full_hash_requests);
            let response = http::fetch_full_hashes(&self.inner.client, &request_url).await?;
            let confirmed = lookup::confirm(&request_url, &hashes, prefix, &response, |list| {
                self.slot(list).is_some()
            })?;
            if let Some(verdict) = confirmed {
                Counters::bump(&counters.confirmed_unsafe);
                return Ok(verdict);
            }
        }
        Counters::bump(&counters.false_prefix_hits);
        Ok(Verdict::Safe)
    }

    /// Probes the local filters with `url`'s expressions without any
    /// request: which expressions' hash prefixes hit, per list. A hit is
    /// only a candidate (see [`Agent::check_url`]); no hit means the URL is
    /// on none of the lists as of the loaded snapshots. Not counted in
    /// [`Agent::stats`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host;
    /// [`Error::NotReady`] when a list has no snapshot yet.
    pub fn lookup_local(&self, url: &str) -> Result<LocalLookup, Error> {
        let hashes = UrlHashes::of(url)?;
        self.probe(&hashes)
    }

    fn probe(&self, hashes: &UrlHashes) -> Result<LocalLookup, Error> {
        let mut loaded = Vec::with_capacity(self.inner.slots.len());
        for slot in &self.inner.slots {
            let Some(current) = slot.current.load_full() else {
                return Err(Error::NotReady {
                    list: slot.name.clone(),
                });
            };
            loaded.push((slot.name.as_str(), current));
        }
        Ok(lookup::probe(
            hashes,
            loaded.iter().map(|(name, l)| (*name, &l.snapshot)),
        ))
    }

    fn slot(&self, list: &str) -> Option<&ListSlot> {
        self.inner.slots.iter().find(|s| s.name == list)
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
