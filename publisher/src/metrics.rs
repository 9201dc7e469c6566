//! Prometheus metrics, served at `GET /metrics` in the text exposition
//! format. One registry per publisher (no global state), so several
//! publishers can live in one process (tests do). Also the process's peak
//! memory, which builds sample for their stage timings.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

#[derive(Clone)]
struct LatencyBuckets;

impl MetricConstructor<Histogram> for LatencyBuckets {
    fn new_metric(&self) -> Histogram {
        // 50 µs to ~1.6 s.
        Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
    }
}

/// The outcomes of [`Metrics::build_finished`].
pub const BUILD_OUTCOMES: [&str; 6] = [
    "published",
    "unchanged",
    "refused",
    "failed",
    "superseded",
    "skipped",
];

/// Every metric the publisher exports.
pub struct Metrics {
    registry: Registry,
    build_duration: Family<Labels, Gauge<f64, AtomicU64>>,
    entries: Family<Labels, Gauge>,
    snapshot_bytes: Family<Labels, Gauge>,
    snapshot_version: Family<Labels, Gauge>,
    measured_fpr: Family<Labels, Gauge<f64, AtomicU64>>,
    builds: Family<Labels, Counter>,
    gate_refusals: Family<Labels, Counter>,
    source_failures: Family<Labels, Counter>,
    source_retries: Family<Labels, Counter>,
    behind: Family<Labels, Counter>,
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, LatencyBuckets>,
    store_reachable: Gauge,
    fresh_timestamp: Family<Labels, Gauge>,
    overdue_timestamp: Family<Labels, Gauge>,
    build_interval: Family<Labels, Gauge>,
    last_build_refused: Family<Labels, Gauge>,
    sources_on_last_good: Family<Labels, Gauge>,
    fpr_bound: Family<Labels, Gauge<f64, AtomicU64>>,
    capacity_fill: Family<Labels, Gauge<f64, AtomicU64>>,
    request_bucket_fill: Family<Labels, Gauge<f64, AtomicU64>>,
    store_generation_refused: Family<Labels, Gauge>,
    store_reached: Family<Labels, Gauge>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn list(name: &str) -> Labels {
    vec![("list", name.to_owned())]
}

impl Metrics {
    /// A registry with every metric registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("blocksieve");
        let m = Self {
            build_duration: Family::default(),
            entries: Family::default(),
            snapshot_bytes: Family::default(),
            snapshot_version: Family::default(),
            measured_fpr: Family::default(),
            builds: Family::default(),
            gate_refusals: Family::default(),
            source_failures: Family::default(),
            source_retries: Family::default(),
            behind: Family::default(),
            requests: Family::default(),
            latency: Family::new_with_constructor(LatencyBuckets),
            store_reachable: Gauge::default(),
            fresh_timestamp: Family::default(),
            overdue_timestamp: Family::default(),
            build_interval: Family::default(),
            last_build_refused: Family::default(),
            sources_on_last_good: Family::default(),
            fpr_bound: Family::default(),
            capacity_fill: Family::default(),
            request_bucket_fill: Family::default(),
            store_generation_refused: Family::default(),
            store_reached: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "build_duration_seconds",
            "Wall time of the last build",
            m.build_duration.clone(),
        );
        registry.register(
            "list_entries",
            "Distinct full hashes in the served snapshot",
            m.entries.clone(),
        );
        registry.register(
            "snapshot_bytes",
            "Size of the served snapshot",
            m.snapshot_bytes.clone(),
        );
        registry.register(
            "snapshot_version",
            "Version of the served snapshot",
            m.snapshot_version.clone(),
        );
        registry.register(
            "measured_fpr",
            "False-positive rate per probe the canary measured for the served snapshot's filter (a refused build's is in its refusal)",
            m.measured_fpr.clone(),
        );
        registry.register("builds", "Build attempts by outcome", m.builds.clone());
        registry.register(
            "gate_refusals",
            "Builds refused by a publishing gate",
            m.gate_refusals.clone(),
        );
        registry.register(
            "source_failures",
            "Sources that failed and fell back to their last good content (or failed the build)",
            m.source_failures.clone(),
        );
        registry.register(
            "source_fetch_retries",
            "HTTP source fetches tried again within a build after a failure that may pass (no connection, a timeout, a body cut off, 408, 429, 500, 502, 503, 504)",
            m.source_retries.clone(),
        );
        registry.register(
            "behind_answers",
            "Requests answered 503 behind: the client holds a newer version of the list than this server serves (a replica catching up, or a publisher whose data lost versions its agents hold)",
            m.behind.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests by route and status",
            m.requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency by route",
            m.latency.clone(),
        );
        registry.register(
            "replica_store_reachable",
            "1 when the last check of the object store (by a replica, or a builder following its store) succeeded, else 0 (always 0 on a publisher without a store)",
            m.store_reachable.clone(),
        );
        registry.register(
            "snapshot_fresh_timestamp_seconds",
            "Unix seconds of the served version's latest freshness: the build that published it, or the latest build that found the list unchanged",
            m.fresh_timestamp.clone(),
        );
        registry.register(
            "build_overdue_timestamp_seconds",
            "Unix seconds at which the served version goes stale: the second scheduled build after its latest freshness (both missed)",
            m.overdue_timestamp.clone(),
        );
        registry.register(
            "build_interval_seconds",
            "Seconds between the list's schedule's next two firings",
            m.build_interval.clone(),
        );
        registry.register(
            "last_build_refused",
            "1 while the latest build attempt was refused by a gate (until a build publishes or finds the list unchanged, or another builder builds it: it published first, or holds the lease), else 0",
            m.last_build_refused.clone(),
        );
        registry.register(
            "sources_on_last_good",
            "Sources (block and allow) the latest build read from their last good content instead of a fresh fetch",
            m.sources_on_last_good.clone(),
        );
        registry.register(
            "fpr_bound",
            "Largest measured false-positive rate per probe the gate accepts: the filter's theoretical rate times gates.max_fpr_ratio, beyond chance (one build in a million)",
            m.fpr_bound.clone(),
        );
        registry.register(
            "capacity_fill_ratio",
            "Unique hash prefixes served over the capacity at which the filter would exceed its target full-hash requests per 1,000 checks",
            m.capacity_fill.clone(),
        );
        registry.register(
            "request_bucket_fill_ratio",
            "Full hashes a bucket of the served snapshot's advertised request prefix holds on average, over max_bucket_entries: over 1, every full-hash request for the list is refused and no hit is confirmed",
            m.request_bucket_fill.clone(),
        );
        registry.register(
            "store_generation_refused",
            "1 while the newest generation the store's latest pointer names is refused (not verified, not served) by this replica or builder following its store, else 0",
            m.store_generation_refused.clone(),
        );
        registry.register(
            "store_last_reached_timestamp_seconds",
            "Unix seconds at which a check of the store for the list (by a replica, or a builder following its store) last succeeded; 0: never since the start (only publishers that follow a store export it)",
            m.store_reached.clone(),
        );
        Self { registry, ..m }
    }

    /// Records the served version's latest freshness, Unix seconds, and
    /// when it goes stale ([`crate::status::overdue_at`]; `None`: a
    /// schedule that never fires again).
    pub fn fresh_at(&self, name: &str, unix_seconds: u64, overdue_at: Option<u64>) {
        (self.fresh_timestamp.get_or_create(&list(name)))
            .set(i64::try_from(unix_seconds).unwrap_or(i64::MAX));
        if let Some(at) = overdue_at {
            (self.overdue_timestamp.get_or_create(&list(name))).set(i64::try_from(at).unwrap_or(i64::MAX));
        }
    }

    /// Records the time between the list's next two scheduled builds.
    pub fn build_interval(&self, name: &str, seconds: u64) {
        (self.build_interval.get_or_create(&list(name))).set(i64::try_from(seconds).unwrap_or(i64::MAX));
    }

    /// Records what the latest build attempt says of the list's health:
    /// whether a gate refused it (`None`: leave as it was, for a build
    /// that neither published nor was refused), how many sources it read
    /// from their last good content (`None`: it read none, leave as it
    /// was), and the gate's false-positive bound.
    pub fn build_health(
        &self,
        name: &str,
        refused: Option<bool>,
        on_last_good: Option<usize>,
        fpr_bound: Option<f64>,
    ) {
        let l = list(name);
        if let Some(refused) = refused {
            self.last_build_refused.get_or_create(&l).set(i64::from(refused));
        }
        if let Some(n) = on_last_good {
            (self.sources_on_last_good.get_or_create(&l)).set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        if let Some(bound) = fpr_bound {
            self.fpr_bound.get_or_create(&l).set(bound);
        }
    }

    /// Records the served snapshot's canary-measured false-positive rate
    /// and the gate's bound for its filter: what the FPR alert compares
    /// (on every role; a replica builds nothing).
    pub fn served_fpr(&self, name: &str, measured: f64, bound: f64) {
        self.measured_fpr.get_or_create(&list(name)).set(measured);
        self.fpr_bound.get_or_create(&list(name)).set(bound);
    }

    /// Records the full hashes the served snapshot's advertised request
    /// prefix selects on average over `max_bucket_entries`.
    pub fn request_bucket_fill(&self, name: &str, ratio: f64) {
        self.request_bucket_fill.get_or_create(&list(name)).set(ratio);
    }

    /// Records whether the store's newest generation of list `name` is
    /// refused (a replica, or a builder following its store).
    pub fn store_generation_refused(&self, name: &str, refused: bool) {
        (self.store_generation_refused.get_or_create(&list(name))).set(i64::from(refused));
    }

    /// Records when a check of the store for list `name` last succeeded
    /// (Unix seconds, 0: never).
    pub fn store_reached_at(&self, name: &str, unix_seconds: u64) {
        (self.store_reached.get_or_create(&list(name))).set(i64::try_from(unix_seconds).unwrap_or(i64::MAX));
    }

    /// Records the served snapshot's unique prefixes over its capacity.
    pub fn capacity_fill(&self, name: &str, ratio: f64) {
        self.capacity_fill.get_or_create(&list(name)).set(ratio);
    }

    /// Records a served snapshot.
    pub fn snapshot_served(&self, name: &str, version: u64, entries: u64, bytes: u64) {
        let l = list(name);
        self.snapshot_version
            .get_or_create(&l)
            .set(i64::try_from(version).unwrap_or(i64::MAX));
        self.entries
            .get_or_create(&l)
            .set(i64::try_from(entries).unwrap_or(i64::MAX));
        self.snapshot_bytes
            .get_or_create(&l)
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// Records whether the last check of the store (a replica's, or a
    /// builder's on a store) succeeded.
    pub fn store_reachable(&self, reachable: bool) {
        self.store_reachable.set(i64::from(reachable));
    }

    /// Records a build attempt: `outcome` is `published`, `unchanged` (the
    /// list is as served: nothing published, its freshness renewed),
    /// `refused`, `failed`, `superseded` (another builder published first) or
    /// `skipped` (another builder held the lease: no build, so the last
    /// build's duration stays).
    pub fn build_finished(&self, name: &str, outcome: &'static str, seconds: f64, measured_fpr: Option<f64>) {
        let mut l = list(name);
        if outcome != "skipped" {
            self.build_duration.get_or_create(&l).set(seconds);
        }
        if let Some(f) = measured_fpr {
            self.measured_fpr.get_or_create(&l).set(f);
        }
        l.push(("outcome", outcome.to_owned()));
        self.builds.get_or_create(&l).inc();
    }

    /// Every build outcome of list `name` counted from 0, so that the
    /// first failure after a start is an increase a rule sees
    /// (`increase(blocksieve_builds_total{outcome="failed"}[1h])`), not a
    /// series that appears already at 1.
    pub fn list_known(&self, name: &str) {
        for outcome in BUILD_OUTCOMES {
            let mut l = list(name);
            l.push(("outcome", outcome.to_owned()));
            let _ = self.builds.get_or_create(&l);
        }
        let _ = self.source_failures.get_or_create(&list(name));
        let _ = self.source_retries.get_or_create(&list(name));
        let _ = self.behind.get_or_create(&list(name));
    }

    /// Records a request for list `name` answered `503 behind`.
    pub fn answered_behind(&self, name: &str) {
        self.behind.get_or_create(&list(name)).inc();
    }

    /// Records a gate refusal.
    pub fn gate_refused(&self, name: &str, gate: &str) {
        let mut l = list(name);
        l.push(("gate", gate.to_owned()));
        self.gate_refusals.get_or_create(&l).inc();
    }

    /// Records `n` failed sources of list `name`: a failed fetch, or
    /// content that came but was not taken (unreadable, or its parse
    /// collapsed).
    pub fn source_failed(&self, name: &str, n: u64) {
        if n > 0 {
            self.source_failures.get_or_create(&list(name)).inc_by(n);
        }
    }

    /// Records `retries` retries of a fetch of one of list `name`'s
    /// sources.
    pub fn source_retried(&self, name: &str, retries: u32) {
        if retries > 0 {
            self.source_retries
                .get_or_create(&list(name))
                .inc_by(u64::from(retries));
        }
    }

    /// The request metrics of `routes` (matched route patterns), resolved
    /// once so that recording a request on one of them hashes no label set
    /// ([`HttpMetrics`]).
    pub fn http(&self, routes: &[&str]) -> HttpMetrics {
        HttpMetrics {
            routes: routes
                .iter()
                .map(|route| RouteMetrics {
                    route: (*route).to_owned(),
                    latency: OnceLock::new(),
                    statuses: (0..STATUSES).map(|_| OnceLock::new()).collect(),
                })
                .collect(),
            requests: self.requests.clone(),
            latency: self.latency.clone(),
        }
    }

    /// Records one HTTP request.
    pub fn request(&self, route: &str, status: u16, seconds: f64) {
        let route = vec![("route", route.to_owned())];
        self.latency.get_or_create(&route).observe(seconds);
        let mut l = route;
        l.push(("status", status.to_string()));
        self.requests.get_or_create(&l).inc();
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Status codes with a counter slot per route: 100 to 599.
const STATUSES: usize = 500;

/// The request metrics of a router, as [`Metrics::request`] records them
/// (the same series, names and labels), with the handles of known routes
/// kept once created: a route's latency histogram and its counter per
/// status are looked up in the metric families the first time they are
/// used, as before, and then taken from here.
#[derive(Clone)]
pub struct HttpMetrics {
    routes: Arc<[RouteMetrics]>,
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, LatencyBuckets>,
}

/// The handles of one route.
struct RouteMetrics {
    route: String,
    latency: OnceLock<Histogram>,
    statuses: Box<[OnceLock<Counter>]>,
}

/// A request's route for [`HttpMetrics::record`].
#[derive(Debug)]
pub enum HttpRoute {
    /// One of the routes the handles were resolved for (its index).
    Known(usize),
    /// Another route, recorded through the families.
    Other(String),
}

impl std::fmt::Debug for HttpMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpMetrics").finish_non_exhaustive()
    }
}

impl HttpMetrics {
    /// The route `matched` (a matched route pattern, or "unmatched").
    pub fn route(&self, matched: &str) -> HttpRoute {
        self.routes
            .iter()
            .position(|r| r.route == matched)
            .map_or_else(|| HttpRoute::Other(matched.to_owned()), HttpRoute::Known)
    }

    /// Records one request on `route`: as [`Metrics::request`].
    pub fn record(&self, route: &HttpRoute, status: u16, seconds: f64) {
        let r = match route {
            HttpRoute::Known(i) => &self.routes[*i],
            HttpRoute::Other(route) => {
                let labels = vec![("route", route.clone())];
                self.latency.get_or_create(&labels).observe(seconds);
                self.count(labels, status);
                return;
            }
        };
        let labels = || vec![("route", r.route.clone())];
        r.latency
            .get_or_init(|| self.latency.get_or_create_owned(&labels()))
            .observe(seconds);
        match r.statuses.get(usize::from(status).wrapping_sub(100)) {
            Some(slot) => {
                slot.get_or_init(|| {
                    let mut l = labels();
                    l.push(("status", status.to_string()));
                    self.requests.get_or_create_owned(&l)
                })
                .inc();
            }
            None => self.count(labels(), status),
        }
    }

    fn count(&self, mut labels: Labels, status: u16) {
        labels.push(("status", status.to_string()));
        self.requests.get_or_create(&labels).inc();
    }
}

/// The process's peak resident set size (`VmHWM` of `/proc/self/status`),
/// in bytes; `None` where that file does not exist.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}
