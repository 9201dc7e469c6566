//! What the server shares between requests and builds: one slot per list,
//! each holding the published snapshot (with its delta chain) and the
//! latest freshness record behind atomic pointers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use axum::body::Bytes;
use axum::http::HeaderValue;
use blocksieve_format::api::{BuildStatus, StoreStatus};
use blocksieve_format::{FreshnessRecord, FullHash, RequestPrefix, SigningKey, SnapshotHeader, TrustedKey};

use crate::config::Role;
use crate::generations::deltas::Chain;
use crate::generations::{ListStore, Pointer};
use crate::metrics::Metrics;
use crate::status::ListWatch;

/// A published snapshot and the full hashes behind it.
#[derive(Debug)]
pub struct Published {
    /// The verified header of `snapshot`.
    pub header: SnapshotHeader,
    /// The snapshot file bytes, served as they are.
    pub snapshot: Bytes,
    /// Strong entity tag: version and body hash, quoted.
    pub etag: String,
    /// Its response header values, made once.
    pub headers: SnapshotHeaders,
    /// The list's full hashes, sorted: the full-hash endpoints answer from it.
    pub hashes: Vec<FullHash>,
    /// The deltas from earlier versions up to this one: the updates route
    /// serves a suffix of it.
    pub deltas: Chain,
    /// Where the hashes of each 16-bit prefix start in `hashes` (and, last,
    /// `hashes.len()`): a bucket is searched for among a few neighbours
    /// rather than over every hash (a search over megabytes of hashes
    /// misses the cache at almost every step).
    starts: Box<[usize]>,
}

/// [`Published::starts`] of sorted `hashes`: entry `top` is the number of
/// hashes whose 16-bit prefix is below `top`. One pass in order (a binary
/// search per 16-bit prefix, 65,536 of them over megabytes of hashes, took
/// ~50 ms on the 854k list: most of a build's unaccounted time).
fn bucket_starts(hashes: &[FullHash]) -> Box<[usize]> {
    let mut starts = vec![hashes.len(); (1 << 16) + 1];
    let mut next = 0;
    for (i, h) in hashes.iter().enumerate() {
        let top = (h.prefix().0 >> 16) as usize;
        if top >= next {
            starts[next..=top].fill(i);
            next = top + 1;
        }
    }
    starts.into_boxed_slice()
}

impl Published {
    /// Wraps a snapshot, its sorted hashes and the delta chain ending at it.
    pub fn new(header: SnapshotHeader, snapshot: Vec<u8>, hashes: Vec<FullHash>, deltas: Chain) -> Self {
        let etag = blocksieve_format::api::snapshot_etag(header.version, &header.body_sha256);
        let headers = SnapshotHeaders::new(&header.list_name, header.version, &header.body_sha256, &etag);
        let starts = bucket_starts(&hashes);
        Self {
            header,
            snapshot: crate::sendfile::sendable(snapshot),
            etag,
            headers,
            hashes,
            deltas,
            starts,
        }
    }

    /// Whether a build of snapshot `header` with sorted full `hashes` at
    /// `now` leaves this served version as it is: the same snapshot body,
    /// full hashes and request prefix length (a length changed in the
    /// configuration is published at once, as a new version that agents
    /// take whole: see `generations/deltas.rs`), and this snapshot still fresh for at least half of
    /// `ttl` (the snapshot expiry). A build after that publishes the same
    /// content as a new version (an empty delta to agents that follow
    /// deltas), so that agents that read only snapshots, not freshness
    /// records, never see the list go stale while the publisher runs.
    pub fn unchanged_by(
        &self,
        header: &SnapshotHeader,
        hashes: &[FullHash],
        now: u64,
        ttl: Duration,
    ) -> bool {
        self.header.body_sha256 == header.body_sha256
            && self.header.request_prefix_bits == header.request_prefix_bits
            && self.header.expires_at >= now.saturating_add(ttl.as_secs() / 2)
            && self.hashes == hashes
    }

    /// Whether `record` vouches for this snapshot: its list, version and
    /// body hash.
    pub fn vouched_by(&self, record: &FreshnessRecord) -> bool {
        record.list_name == self.header.list_name
            && record.version == self.header.version
            && record.body_sha256 == self.header.body_sha256
    }

    /// The full hashes starting with `prefix` (binary search over the sorted
    /// hashes of its 16-bit prefixes).
    pub fn bucket(&self, prefix: RequestPrefix) -> &[FullHash] {
        let (lo, hi) = prefix.range32();
        // Every hash under the prefix has its top 16 bits in `lo >> 16 ..=
        // hi >> 16`, so it is in `within`.
        let first = self.starts.get((lo >> 16) as usize).copied().unwrap_or(0);
        let last = (self.starts.get((hi >> 16) as usize + 1).copied())
            .unwrap_or(self.hashes.len())
            .min(self.hashes.len());
        let within = self.hashes.get(first..last).unwrap_or(&self.hashes);
        let start = within.partition_point(|h| h.prefix().0 < lo);
        let end = start + within[start..].partition_point(|h| h.prefix().0 <= hi);
        &within[start..end]
    }
}

/// The header values of every response about one snapshot, made when it
/// is put in service rather than on every request (cloning one shares its
/// bytes).
#[derive(Debug, Clone)]
pub struct SnapshotHeaders {
    /// The list the values name (the snapshot's list name).
    pub list: String,
    /// `ETag`: the snapshot's entity tag; `None` if it is not a valid
    /// header value.
    pub etag: Option<HeaderValue>,
    /// `Content-Location` of the latest snapshot: its versioned URL.
    pub version_url: HeaderValue,
    /// [`blocksieve_format::api::HASHES_HEADER`]: where the version's
    /// immutable full-hash buckets are.
    pub hashes: HeaderValue,
}

impl SnapshotHeaders {
    /// The values for version `version` of list `list` whose body hashes
    /// to `body_sha256`, entity tag `etag`. Its buckets are advertised
    /// under its [`snapshot_id`](blocksieve_format::api::snapshot_id),
    /// which names its content, not the version alone.
    pub fn new(list: &str, version: u64, body_sha256: &[u8; 32], etag: &str) -> Self {
        use blocksieve_format::api::{routes, snapshot_id};
        Self {
            list: list.to_owned(),
            etag: HeaderValue::from_str(etag).ok(),
            version_url: HeaderValue::from_str(&routes::versioned_snapshot(list, version))
                .unwrap_or(HeaderValue::from_static("/")),
            hashes: HeaderValue::from_str(&routes::list_hashes_base(list, snapshot_id(version, body_sha256)))
                .unwrap_or(HeaderValue::from_static("/")),
        }
    }
}

/// A signed freshness record as served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freshness {
    /// What it says.
    pub record: FreshnessRecord,
    /// Its [`blocksieve_format::api::FRESHNESS_HEADER`] value.
    pub header_value: String,
    /// `header_value` as a header value, made once (`None` if it is not
    /// one).
    pub header: Option<HeaderValue>,
}

impl Freshness {
    /// A record that snapshot `header` is the latest as of `now`, fresh for
    /// `ttl`, the next build due at `next_build_at` (0: none scheduled),
    /// signed with `key`; `None` (logged) when it cannot be signed.
    pub fn sign(
        header: &SnapshotHeader,
        now: u64,
        ttl: Duration,
        next_build_at: u64,
        key: &SigningKey,
    ) -> Option<Self> {
        let record = FreshnessRecord {
            list_name: header.list_name.clone(),
            version: header.version,
            body_sha256: header.body_sha256,
            issued_at: now,
            expires_at: now.saturating_add(ttl.as_secs()),
            next_build_at,
        };
        match record.sign(key) {
            Ok(signed) => {
                let header_value = FreshnessRecord::to_header_value(&signed);
                Some(Self {
                    header: HeaderValue::from_str(&header_value).ok(),
                    header_value,
                    record,
                })
            }
            Err(e) => {
                tracing::warn!(list = %header.list_name, error = %e, "cannot sign a freshness record");
                None
            }
        }
    }

    /// The record sent as `header_value`, if it verifies under `key`.
    ///
    /// # Errors
    ///
    /// Why it does not, in words.
    pub fn verify(header_value: &str, keys: &[TrustedKey]) -> Result<Self, String> {
        let record = FreshnessRecord::from_header_value(header_value, keys).map_err(|e| e.to_string())?;
        Ok(Self {
            record,
            header: HeaderValue::from_str(header_value).ok(),
            header_value: header_value.to_owned(),
        })
    }
}

/// One threat list as the server sees it.
#[derive(Debug)]
pub struct ListSlot {
    /// The list name.
    pub name: String,
    /// The snapshot being served; swapped whole by a build, never mutated.
    pub current: ArcSwapOption<Published>,
    /// The latest freshness record: swapped by every build, changed or
    /// not, without touching `current`. Served only with the version it
    /// names.
    pub freshness: ArcSwapOption<Freshness>,
    /// The outcome of the last build attempt.
    pub last_build: Mutex<Option<BuildStatus>>,
    /// Where its generations are stored (for the immutable version URLs).
    pub store: ListStore,
    /// How following the object store goes (`None` when nothing follows
    /// it: a publisher on a data directory).
    pub store_status: Mutex<Option<StoreStatus>>,
    /// Its build history, sources and health inputs, for operators.
    pub watch: ListWatch,
}

impl ListSlot {
    /// Serves `snapshot` (its verified `header`) with its sorted full
    /// `hashes` and the delta chain ending at it, swapped in whole, and records it in `metrics`: how a build,
    /// a restart and a replica all put a version in service. A version not
    /// newer than the one served is not swapped in (a builder's own publish
    /// and its follower may both offer one), so what agents see never goes
    /// back. Returns whether it was.
    pub fn serve(
        &self,
        metrics: &Metrics,
        header: SnapshotHeader,
        snapshot: Vec<u8>,
        hashes: Vec<FullHash>,
        deltas: Chain,
    ) -> bool {
        let (version, count, bytes) = (header.version, header.full_hash_count, snapshot.len() as u64);
        let offered = Arc::new(Published::new(header, snapshot, hashes, deltas));
        let mut swapped = false;
        self.current.rcu(|current| match current {
            Some(c) if c.header.version >= version => {
                swapped = false;
                current.clone()
            }
            _ => {
                swapped = true;
                Some(offered.clone())
            }
        });
        if swapped {
            metrics.snapshot_served(&self.name, version, count, bytes);
            let h = &offered.header;
            let capacity =
                crate::build::capacity(h.theoretical_fpr, h.key_bits, self.watch.profile.target_per_1000);
            metrics.capacity_fill(&self.name, crate::build::fill_ratio(h.entry_count, capacity));
            let bound = crate::build::fpr_gate_bound(h.theoretical_fpr, self.watch.profile.max_fpr_ratio);
            metrics.served_fpr(&self.name, h.measured_fpr, bound);
            if let Some(at) = self.fresh_at() {
                metrics.fresh_at(&self.name, at, self.watch.profile.overdue_at(at));
            }
        }
        swapped
    }

    /// Unix seconds of the served version's latest freshness: its build
    /// (the snapshot's creation), or the latest freshness record for it
    /// (a later build that found the list unchanged); `None` when nothing
    /// is served.
    pub fn fresh_at(&self) -> Option<u64> {
        let served = self.current.load_full()?;
        let renewed = self.freshness_of(&served).map_or(0, |f| f.record.issued_at);
        Some(served.header.created_at.max(renewed))
    }
}

impl ListSlot {
    /// Keeps `offered` as the list's latest freshness record unless the
    /// one held is newer (issued later). Returns whether it was kept.
    pub fn offer_freshness(&self, offered: Freshness) -> bool {
        let offered = Arc::new(offered);
        let mut kept = false;
        self.freshness.rcu(|held| match held {
            Some(h)
                if (h.record.version, h.record.issued_at)
                    > (offered.record.version, offered.record.issued_at) =>
            {
                kept = false;
                held.clone()
            }
            _ => {
                kept = true;
                Some(offered.clone())
            }
        });
        kept
    }

    /// Keeps the freshness record a `latest` pointer carries, if it
    /// verifies under `key` and vouches for the version served. Returns
    /// whether it was kept.
    pub fn adopt_freshness(&self, pointer: &Pointer, keys: &[TrustedKey]) -> bool {
        let Some(value) = pointer.freshness.as_deref() else {
            return false;
        };
        let freshness = match Freshness::verify(value, keys) {
            Ok(freshness) => freshness,
            Err(reason) => {
                tracing::warn!(list = %self.name, %reason, "ignoring a freshness record that does not verify");
                return false;
            }
        };
        let served = self.current.load();
        if !served.as_ref().is_some_and(|p| p.vouched_by(&freshness.record)) {
            return false;
        }
        self.offer_freshness(freshness)
    }

    /// The freshness record to send with a response about `published`:
    /// the latest, if it names that version.
    pub fn freshness_of(&self, published: &Published) -> Option<Arc<Freshness>> {
        self.freshness
            .load_full()
            .filter(|f| published.vouched_by(&f.record))
    }

    /// Records a check of the store (for `/v1/lists`): whether it was
    /// reached, and when, or why not (`error`).
    pub fn checked(&self, error: Option<String>) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let reachable = error.is_none();
        if let Ok(mut status) = self.store_status.lock() {
            let status = status.get_or_insert_with(unchecked_store);
            status.reachable = reachable;
            if reachable {
                status.last_checked_at = Some(now);
            }
            status.last_error = error;
        }
    }

    /// Records the generation loaded from the store (for `/v1/lists`).
    pub fn loaded_generation(&self, generation: u64) {
        if let Ok(mut status) = self.store_status.lock() {
            let status = status.get_or_insert_with(unchecked_store);
            status.generation = Some(status.generation.map_or(generation, |g| g.max(generation)));
        }
    }

    /// Records why the newest generation the store names was not loaded
    /// (`None`: it was), for `/v1/lists`, `no_snapshot` and the status page.
    pub fn refused_generation(&self, reason: Option<String>) {
        if let Ok(mut status) = self.store_status.lock() {
            let status = status.get_or_insert_with(unchecked_store);
            status.refused = reason;
        }
    }
}

/// A list's store status before anything is recorded: reached, never
/// checked, nothing loaded or refused (each record then sets its fields).
fn unchecked_store() -> StoreStatus {
    StoreStatus {
        reachable: true,
        last_checked_at: None,
        generation: None,
        last_error: None,
        refused: None,
    }
}

/// State shared by all handlers.
#[derive(Debug)]
pub struct AppState {
    /// Lists in configuration order.
    pub lists: Vec<ListSlot>,
    /// Cache duration advertised with full-hash answers.
    pub cache_duration: Duration,
    /// Next-check hint for agents polling the latest snapshot.
    pub next_check: Duration,
    /// Pad each bucket in responses to this many entries (0: off).
    pub padding: usize,
    /// Refuse prefixes whose expected bucket exceeds this many hashes.
    pub max_bucket_entries: u64,
    /// Most prefixes per search request.
    pub max_prefixes_per_request: usize,
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// What this publisher does (the status page says).
    pub role: Role,
    /// The bytes of full-hash search answers held while they are sent
    /// ([`AnswersInFlight`]).
    pub answers_in_flight: AnswersInFlight,
}

/// The memory full-hash search answers may hold while they are sent, in
/// KiB: an answer takes its size from it when built and gives it back once
/// sent or dropped (its connection closed); a search that finds too little
/// left is `503 busy`. Without it, a few kilobytes of request (1,000 short
/// prefixes) made an answer of tens of megabytes, and clients that read
/// slowly (a byte now and then resets the write-stall timer) held one each:
/// 40 connections held 1.1 GB.
#[derive(Debug, Clone)]
pub struct AnswersInFlight {
    permits: Arc<tokio::sync::Semaphore>,
    kib: usize,
}

impl AnswersInFlight {
    /// The default budget: 256 MiB.
    pub const DEFAULT_KIB: usize = 256 * 1024;

    /// A budget of `kib` KiB.
    pub fn new(kib: usize) -> Self {
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(kib)),
            kib,
        }
    }

    /// A share of `bytes` (rounded up to KiB, at most the whole budget),
    /// given back when dropped; `None` when too little is left.
    pub fn take(&self, bytes: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let kib = u32::try_from(bytes.div_ceil(1024).clamp(1, self.kib.max(1))).ok()?;
        self.permits.clone().try_acquire_many_owned(kib).ok()
    }

    /// What answers being sent hold now, in KiB.
    pub fn held_kib(&self) -> usize {
        self.kib.saturating_sub(self.permits.available_permits())
    }
}

impl Default for AnswersInFlight {
    fn default() -> Self {
        Self::new(Self::DEFAULT_KIB)
    }
}

impl AppState {
    /// The slot of list `name`.
    pub fn list(&self, name: &str) -> Option<&ListSlot> {
        self.lists.iter().find(|l| l.name == name)
    }

    /// Whether every list has a snapshot to serve.
    pub fn ready(&self) -> bool {
        self.lists.iter().all(|l| l.current.load().is_some())
    }

    /// Each list `among` accepts (by name) that is served: its name, the
    /// full hashes its bucket under a `bits`-bit prefix holds on average,
    /// and the request prefix length its snapshot advertises.
    pub fn buckets(&self, bits: u8, among: impl Fn(&str) -> bool) -> Vec<(&str, f64, u8)> {
        self.lists
            .iter()
            .filter(|l| among(&l.name))
            .filter_map(|l| {
                l.current.load().as_ref().map(|p| {
                    (
                        l.name.as_str(),
                        p.hashes.len() as f64 / 2f64.powi(i32::from(bits)),
                        p.header.request_prefix_bits,
                    )
                })
            })
            .collect()
    }

    /// The full hashes a `bits`-bit prefix's bucket holds on average over
    /// the lists `among` accepts (by name), summed: what one prefix adds to
    /// an answer before padding.
    pub fn expected_bucket(&self, bits: u8, among: impl Fn(&str) -> bool) -> f64 {
        self.buckets(bits, among)
            .iter()
            .map(|&(_, expected, _)| expected)
            .sum()
    }

    /// Sets each list's freshness gauge from what it serves now: a
    /// freshness record may come from a build, a restart or the store.
    pub fn refresh_gauges(&self) {
        for l in &self.lists {
            if let Some(at) = l.fresh_at() {
                self.metrics.fresh_at(&l.name, at, l.watch.profile.overdue_at(at));
            }
            // The status page's other red states: hits that cannot be
            // confirmed, and a store whose newest generation is refused.
            if let Some(p) = l.current.load().as_ref() {
                let expected = p.hashes.len() as f64 / 2f64.powi(i32::from(p.header.request_prefix_bits));
                let cap = l.watch.profile.max_bucket_entries.max(1) as f64;
                self.metrics.request_bucket_fill(&l.name, expected / cap);
            }
            if let Ok(status) = l.store_status.lock()
                && let Some(status) = status.as_ref()
            {
                self.metrics
                    .store_generation_refused(&l.name, status.refused.is_some());
                self.metrics
                    .store_reached_at(&l.name, status.last_checked_at.unwrap_or(0));
            }
        }
    }

    /// Shared handle.
    pub fn shared(self) -> Arc<Self> {
        Arc::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::testing::build_feed;
    use blocksieve_format::SigningKey;

    fn published(feed: &str, now: u64) -> (Published, crate::build::BuiltList) {
        let built = build_feed(feed, now, &SigningKey::from_secret_bytes([4; 32]));
        let header = blocksieve_format::parse_header_unverified(&built.snapshot).unwrap();
        let served = Published::new(
            header,
            built.snapshot.clone(),
            built.hashes.clone(),
            Chain::default(),
        );
        (served, built)
    }

    #[test]
    fn a_bucket_is_every_hash_under_its_prefix() {
        let mut hashes: Vec<FullHash> = (0..5_000u32).map(|i| FullHash::of(&i.to_le_bytes())).collect();
        // Neighbours across a 16-bit boundary, and the ends of the range.
        hashes.extend(
            [[0x12, 0x34, 0xff, 0xff], [0x12, 0x35, 0, 0], [0; 4], [0xff; 4]].map(|p| {
                let mut h = [7u8; 32];
                h[..4].copy_from_slice(&p);
                FullHash(h)
            }),
        );
        hashes.sort_unstable();
        let header = blocksieve_format::parse_header_unverified(
            &published("http://phish.example/a\n", 1_800_000_000).1.snapshot,
        )
        .unwrap();
        let served = Published::new(header, Vec::new(), hashes.clone(), Chain::default());
        for h in hashes.iter().step_by(97).chain(&hashes[hashes.len() - 4..]) {
            for bits in [2, 7, 12, 15, 16, 17, 20, 24, 31, 32] {
                let prefix = RequestPrefix::of(h, bits);
                let expected: Vec<FullHash> = hashes.iter().filter(|x| prefix.matches(x)).copied().collect();
                assert_eq!(
                    served.bucket(prefix),
                    expected.as_slice(),
                    "{prefix} ({bits} bits)"
                );
            }
        }
        let empty = Published::new(served.header.clone(), Vec::new(), Vec::new(), Chain::default());
        assert!(empty.bucket(RequestPrefix::of(&hashes[0], 8)).is_empty());
    }

    #[test]
    fn a_build_is_unchanged_only_with_the_same_content_while_the_snapshot_is_fresh() {
        let now = 1_800_000_000;
        let (served, _) = published("http://phish.example/a\n", now);
        let ttl = Duration::from_secs(served.header.expires_at - now);
        let (same, built) = published("http://phish.example/a\n", now + 60);
        assert!(served.unchanged_by(&same.header, &built.hashes, now + 60, ttl));
        // Half the snapshot's lifetime left: still unchanged; less: a new
        // version, so that agents reading only snapshots stay fresh.
        let half = ttl.as_secs() / 2;
        assert!(served.unchanged_by(&same.header, &built.hashes, now + half, ttl));
        assert!(!served.unchanged_by(&same.header, &built.hashes, now + half + 1, ttl));
        let (other, built) = published("http://phish.example/b\n", now + 60);
        assert!(!served.unchanged_by(&other.header, &built.hashes, now + 60, ttl));
        // The same content under another request prefix length (the
        // operator changed `request_prefix_bits`): a new version, which
        // agents take whole, not the old header served on.
        let (same, built) = published("http://phish.example/a\n", now + 60);
        let mut lengthened = same.header.clone();
        lengthened.request_prefix_bits = served.header.request_prefix_bits + 4;
        assert!(!served.unchanged_by(&lengthened, &built.hashes, now + 60, ttl));
    }
}
