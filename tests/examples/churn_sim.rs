//! What following a threat list costs an agent under churn, by design: the
//! simulation behind incremental updates (BENCHMARKS.md, row 9).
//!
//! ```sh
//! cargo run --release -p blocksieve-tests --example churn_sim -- \
//!     ../shared/data/feeds/phishing-urls-union-2018-2020.txt.gz \
//!     --benign ../shared/data/benign/legit-urls.txt [--days 60] [--seed 1]
//! # a short run on the fixtures:
//! cargo run -p blocksieve-tests --example churn_sim -- tests/fixtures/phishing-urls.txt \
//!     --benign tests/fixtures/benign-urls.txt --days 6
//! ```
//!
//! The feed is read as the publisher reads a `urls` source (each accepted
//! line is one entry, published as the full hashes the build gives it) and
//! churned by [`blocksieve_tests::churn`] (2 % added and 2 % removed a day,
//! 48 builds a day, seeded). Every build's real 32-bit prefix set gives:
//!
//! - (a) today: a whole BinaryFuse8 snapshot every build (real filter,
//!   compressed and signed as the publisher does), agents polling every
//!   5 minutes;
//! - (b) the chosen design: a BinaryFuse8 base plus the exact sorted
//!   additions since, one signed delta per build (`encode_delta` over the
//!   build's real additions), a `304` with a freshness record for an
//!   unchanged build, polls at the schedule, a rebase (the whole latest
//!   snapshot) once the additions pass a ratio of the base's entries;
//!   also an agent polling once a day, and one offline for a week;
//! - (c) Safe Browsing v4/v5 style: the exact prefix set, Rice-coded
//!   additions and removal indices and a SHA-256 state checksum per build.
//!
//! False hits are probes of the benign URLs' expressions (all of a URL's
//! expressions, as the agent probes them) that hit the agent's structures
//! although their full hash is not listed; the agent's structures are the
//! real filters and sets. HTTP overhead is counted with the constants
//! below. Update CPU times are measured (decode + merge).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use blocksieve_format::{
    DeltaEnd, DeltaParams, FilterKind, FreshnessRecord, FullHash, KeyBits, PrefixFilter, SigningKey,
    SnapshotParams, compress_filter, decode_chain, decode_delta, decode_ignoring_expiry, encode_delta,
    full_hashes, merge_additions, sign_snapshot,
};
use blocksieve_publisher::SourceFormat;
use blocksieve_publisher::internal::sources::{EntryOutcome, feed_lines, read_line};
use blocksieve_tests::churn::{Churn, ChurnConfig};
use blocksieve_tests::feed_check::read_feed;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Bytes of a poll answered `304` on a resumed TLS connection: request
/// line and headers (~150 B) and the response's status line, `ETag`,
/// `Cache-Control`, `X-Blocksieve-Next-Check`, `X-Blocksieve-Hashes` and
/// TLS records (~150 B), without the freshness record, whose header line
/// is measured (a real signed record).
const POLL_304_BYTES_WITHOUT_FRESHNESS: usize = 300;
/// Bytes of the request and response headers of a `200` (snapshot, delta
/// chain or Safe Browsing update), on a resumed TLS connection.
const RESPONSE_200_HEADER_BYTES: usize = 450;
/// Builds a day (one every 30 minutes).
const BUILDS_PER_DAY: usize = 48;
/// Polls a day of today's agents (`next_check_s = 300`).
const TODAY_POLLS_PER_DAY: usize = 288;
/// The rebase ratio the agent uses by default, and the sweep around it.
const DEFAULT_RATIO: f64 = 0.3;
const RATIOS: [f64; 4] = [0.1, 0.2, 0.3, 0.5];
/// Builds an agent is offline for a week.
const WEEK_BUILDS: usize = 7 * BUILDS_PER_DAY;
/// Safe Browsing per-encoding framing: first value, Rice parameter and
/// entry count (protobuf fields).
const SB_ENCODING_FRAMING_BYTES: usize = 12;
/// Safe Browsing's state checksum (SHA-256).
const SB_CHECKSUM_BYTES: usize = 32;
/// The goals.
const GOAL_BYTES_PER_DAY: f64 = 200_000.0;
const GOAL_FALSE_HIT_RATIO: f64 = 1.1;
const GOAL_MEMORY_ALLOWANCE: usize = 8 * 1024 * 1024;
const LIST: &str = "phishing";

struct Args {
    feed: PathBuf,
    benign: PathBuf,
    days: usize,
    seed: u64,
}

fn parse_args() -> Result<Args, BoxError> {
    let mut feed = None;
    let mut benign = None;
    let mut days = 60;
    let mut seed = 1;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--benign" => benign = Some(PathBuf::from(value("--benign")?)),
            "--days" => days = value("--days")?.parse()?,
            "--seed" => seed = value("--seed")?.parse()?,
            _ if a.starts_with("--") => return Err(format!("unknown option {a}").into()),
            _ => feed = Some(PathBuf::from(a)),
        }
    }
    let usage = "usage: churn_sim FEED --benign URLS [--days N] [--seed S]";
    let days = if days >= 2 {
        days
    } else {
        return Err("--days must be at least 2".into());
    };
    Ok(Args {
        feed: feed.ok_or(usage)?,
        benign: benign.ok_or(usage)?,
        days,
        seed,
    })
}

/// The full hashes the build publishes for one entry (a `urls` line).
fn hashes_of(entry: &str) -> Vec<FullHash> {
    let mut out: Vec<FullHash> = read_line(SourceFormat::Urls, entry.as_bytes())
        .entries
        .into_iter()
        .flat_map(|e| match e {
            EntryOutcome::Accepted(readings) => readings.into_iter().flat_map(|r| r.full_hashes).collect(),
            EntryOutcome::Rejected { .. } => Vec::new(),
        })
        .collect();
    out.sort_unstable_by_key(|h| h.0);
    out.dedup();
    out
}

/// A whole snapshot of one version: the real filter the agent would hold.
struct Snapshot {
    filter: PrefixFilter,
    bytes: Vec<u8>,
}

fn snapshot_of(prefixes: &[u32], version: u64, key: &SigningKey) -> Result<Snapshot, BoxError> {
    let keys: Vec<u64> = prefixes.iter().map(|&p| u64::from(p)).collect();
    let filter = PrefixFilter::build(FilterKind::BinaryFuse8, &keys)?;
    let body = compress_filter(&filter, 3)?;
    let params = SnapshotParams {
        list_name: LIST.into(),
        version,
        created_at: 1_800_000_000,
        expires_at: 1_800_000_000 + 7 * 86_400,
        key_bits: KeyBits::Bits32,
        request_prefix_bits: 32,
        full_hash_count: prefixes.len() as u64,
        measured_fpr: filter.theoretical_fpr(),
        zstd_level: 3,
    };
    let bytes = sign_snapshot(&params, &body, key)?;
    Ok(Snapshot { filter, bytes })
}

/// One end of a delta. The simulation builds no snapshot per build, so the
/// body hash stands in as the hash of the version number (same size).
fn end(version: u64) -> DeltaEnd {
    DeltaEnd {
        version,
        body_sha256: FullHash::of(&version.to_le_bytes()).0,
    }
}

/// The benign URLs' probes: each expression's 32-bit prefix and full hash.
struct Probes {
    urls: usize,
    probes: Vec<(u32, FullHash)>,
}

impl Probes {
    fn false_hits(&self, listed: &HashMap<FullHash, u32>, hit: impl Fn(u32) -> bool) -> f64 {
        let n = self
            .probes
            .iter()
            .filter(|(p, h)| hit(*p) && listed.get(h).is_none_or(|&c| c == 0))
            .count();
        n as f64 / self.urls as f64
    }
}

/// A design (b) agent: a base snapshot's filter plus the exact additions
/// since.
struct Follower {
    ratio: f64,
    base: Rc<Snapshot>,
    held: Vec<u32>,
    /// The version it holds.
    version: u64,
    /// Bytes and requests so far, and at each build.
    bytes: u64,
    requests: u64,
    bytes_at: Vec<u64>,
    requests_at: Vec<u64>,
    /// Builds (1-based, the build whose poll did it) of each rebase.
    rebases: Vec<usize>,
    apply_times: Vec<Duration>,
    peak_memory: Vec<(usize, usize)>,
    false_hits: Vec<(usize, f64)>,
    /// A chain larger than the snapshot was answered by the snapshot.
    chains_replaced: u64,
}

impl Follower {
    fn new(ratio: f64, base: Rc<Snapshot>, version: u64) -> Self {
        Self {
            ratio,
            base,
            held: Vec::new(),
            version,
            bytes: 0,
            requests: 0,
            bytes_at: vec![0],
            requests_at: vec![0],
            rebases: Vec::new(),
            apply_times: Vec::new(),
            peak_memory: Vec::new(),
            false_hits: Vec::new(),
            chains_replaced: 0,
        }
    }

    fn memory(&self) -> usize {
        self.base.filter.body_len() + self.held.len() * 4
    }

    fn contains(&self, prefix: u32) -> bool {
        self.base.filter.contains(u64::from(prefix)) || self.held.binary_search(&prefix).is_ok()
    }

    /// Polls at build `build`: the chain from its version to `latest`, or a
    /// `304`; then a rebase when the additions pass the ratio.
    fn poll(&mut self, sim: &mut Sim, build: usize) -> Result<(), BoxError> {
        self.requests += 1;
        if self.version == sim.version {
            self.bytes += sim.poll_304_bytes as u64;
        } else {
            // Older than the deltas kept (a week) is `410 no_delta` too.
            let first = sim
                .deltas
                .len()
                .checked_sub((sim.version - self.version) as usize);
            let chain: Vec<u8> = first.map_or_else(Vec::new, |first| {
                sim.deltas.range(first..).flatten().copied().collect()
            });
            // The publisher compares the chain with its snapshot; the
            // simulation builds one only when it is downloaded, so it
            // compares with the last one built (sizes drift by < 0.1 % a day).
            if first.is_none() || chain.len() > sim.last_snapshot_len {
                // 410 no_delta, then the whole snapshot.
                let snapshot = sim.latest_snapshot()?;
                self.chains_replaced += 1;
                self.bytes += (sim.poll_304_bytes + RESPONSE_200_HEADER_BYTES + snapshot.bytes.len()) as u64;
                self.requests += 1;
                self.rebase(snapshot, sim.version, build);
            } else {
                self.bytes += (RESPONSE_200_HEADER_BYTES + chain.len()) as u64;
                let start = Instant::now();
                let deltas = decode_chain(&chain, LIST, &sim.trusted)?;
                let mut held = std::mem::take(&mut self.held);
                for d in &deltas {
                    held = merge_additions(&held, d.additions());
                }
                self.apply_times.push(start.elapsed());
                self.held = held;
                self.version = sim.version;
            }
        }
        if self.held.len() as f64 > self.ratio * self.base.filter.len() as f64 {
            self.peak_memory.push((build, self.memory()));
            let snapshot = sim.latest_snapshot()?;
            self.requests += 1;
            self.bytes += (RESPONSE_200_HEADER_BYTES + snapshot.bytes.len()) as u64;
            self.rebase(snapshot, sim.version, build);
        }
        self.peak_memory.push((build, self.memory()));
        Ok(())
    }

    fn rebase(&mut self, snapshot: Rc<Snapshot>, version: u64, build: usize) {
        self.base = snapshot;
        self.held = Vec::new();
        self.version = version;
        self.rebases.push(build);
    }

    fn record(&mut self) {
        self.bytes_at.push(self.bytes);
        self.requests_at.push(self.requests);
    }

    /// The build range it is averaged over: whole rebase cycles, from its
    /// first rebase to its last, or the run's second half with fewer than
    /// two rebases.
    fn window(&self, builds: usize) -> (usize, usize, &'static str) {
        match (self.rebases.first(), self.rebases.last()) {
            (Some(&a), Some(&b)) if b > a => (a - 1, b - 1, "whole rebase cycles"),
            _ => (builds / 2, builds, "second half (under two rebases)"),
        }
    }
}

/// The publisher's side as the simulation runs.
struct Sim {
    key: SigningKey,
    trusted: Vec<blocksieve_format::TrustedKey>,
    prefixes: Vec<u32>,
    version: u64,
    /// The deltas of the last week of versions, oldest first.
    deltas: VecDeque<Vec<u8>>,
    snapshots: HashMap<u64, Rc<Snapshot>>,
    poll_304_bytes: usize,
    snapshot_builds: u64,
    last_snapshot_len: usize,
}

impl Sim {
    fn latest_snapshot(&mut self) -> Result<Rc<Snapshot>, BoxError> {
        if let Some(s) = self.snapshots.get(&self.version) {
            return Ok(s.clone());
        }
        let s = Rc::new(snapshot_of(&self.prefixes, self.version, &self.key)?);
        self.snapshot_builds += 1;
        self.last_snapshot_len = s.bytes.len();
        self.snapshots.retain(|&v, _| v + 1 >= self.version);
        self.snapshots.insert(self.version, s.clone());
        Ok(s)
    }
}

fn median(mut v: Vec<Duration>) -> Option<Duration> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

fn mean(v: impl IntoIterator<Item = f64>) -> f64 {
    let (s, n) = v.into_iter().fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { s / n as f64 }
}

fn kb(bytes: f64) -> String {
    if bytes >= 1e6 {
        format!("{:.2} MB", bytes / 1e6)
    } else {
        format!("{:.1} KB", bytes / 1e3)
    }
}

fn us(d: Option<Duration>) -> String {
    let Some(d) = d else { return "–".into() };
    let us = d.as_secs_f64() * 1e6;
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn pass(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

#[allow(clippy::too_many_lines)]
fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let started = Instant::now();

    // The feed as the build reads it: one entry per accepted line.
    let bytes = read_feed(&args.feed)?;
    let mut entries = Vec::new();
    let mut counts: HashMap<u32, u32> = HashMap::new();
    let mut lines = 0usize;
    for line in feed_lines(&bytes) {
        lines += 1;
        let entry = String::from_utf8_lossy(line).into_owned();
        let hashes = hashes_of(&entry);
        if hashes.is_empty() {
            continue;
        }
        for h in &hashes {
            *counts.entry(h.prefix().0).or_default() += 1;
        }
        entries.push(entry);
    }
    drop(bytes);

    // The benign URLs' expressions, and which of their full hashes the list
    // holds (kept current through the churn).
    let benign_text = std::fs::read_to_string(&args.benign)?;
    let mut probes = Probes {
        urls: 0,
        probes: Vec::new(),
    };
    let mut listed: HashMap<FullHash, u32> = HashMap::new();
    let mut hashes = Vec::new();
    for url in benign_text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        hashes.clear();
        if full_hashes(url, &mut hashes).is_ok() {
            probes.urls += 1;
            for h in &hashes {
                probes.probes.push((h.prefix().0, *h));
                listed.insert(*h, 0);
            }
        }
    }
    for e in &entries {
        for h in hashes_of(e) {
            if let Some(c) = listed.get_mut(&h) {
                *c += 1;
            }
        }
    }

    let mut prefixes: Vec<u32> = counts.keys().copied().collect();
    prefixes.sort_unstable();
    let key = SigningKey::from_secret_bytes([7; 32]);
    let record = FreshnessRecord {
        list_name: LIST.into(),
        version: 1,
        body_sha256: end(1).body_sha256,
        issued_at: 1_800_000_000,
        expires_at: 1_800_000_000 + 7 * 86_400,
        next_build_at: 1_800_001_800,
    }
    .sign(&key)?;
    let freshness_line = format!(
        "X-Blocksieve-Freshness: {}\r\n",
        FreshnessRecord::to_header_value(&record)
    );
    let mut sim = Sim {
        trusted: vec![key.public_key().clone()],
        key,
        prefixes,
        version: 1,
        deltas: VecDeque::new(),
        snapshots: HashMap::new(),
        poll_304_bytes: POLL_304_BYTES_WITHOUT_FRESHNESS + freshness_line.len(),
        snapshot_builds: 0,
        last_snapshot_len: 0,
    };
    let first = sim.latest_snapshot()?;
    println!(
        "feed: {} lines, {} entries, {} distinct 32-bit prefixes; benign: {} URLs, {} expressions probed ({:.2} per URL)",
        lines,
        entries.len(),
        sim.prefixes.len(),
        probes.urls,
        probes.probes.len(),
        probes.probes.len() as f64 / probes.urls as f64
    );
    println!(
        "first snapshot (binary_fuse8, zstd 3, signed): {} B, filter in memory {} B; loaded in {:.1} s",
        first.bytes.len(),
        first.filter.body_len(),
        started.elapsed().as_secs_f64()
    );

    let config = ChurnConfig {
        seed: args.seed,
        ..ChurnConfig::default()
    };
    let mut churn = Churn::new(entries, config);
    let mut followers: Vec<Follower> = RATIOS
        .iter()
        .map(|&r| Follower::new(r, first.clone(), 1))
        .collect();
    let mut daily = Follower::new(DEFAULT_RATIO, first.clone(), 1);

    // Per build: today's snapshot bytes (whole snapshot each build), Safe
    // Browsing update bytes; per day: measurements on real structures.
    let builds = args.days * BUILDS_PER_DAY;
    let mut today_day_bytes = Vec::new();
    let mut today_false_hits = Vec::new();
    let mut today_memory = Vec::new();
    let mut today_decode = Vec::new();
    let mut snapshot_sizes = Vec::new();
    let mut sb_bytes_at = vec![0u64];
    let mut sb_bytes = 0u64;
    let mut sb_false_hits = Vec::new();
    let mut sb_times = Vec::new();
    let mut sb_first = 0usize;
    let mut unchanged_builds = 0usize;
    let mut added_per_build = Vec::new();
    let mut removed_per_build = Vec::new();
    let mut delta_sizes = Vec::new();

    for build in 1..=builds {
        let change = churn.next_build();
        let unchanged = change.is_unchanged();
        // The publisher's side: the new prefix set, its additions and
        // removals.
        let mut gone = Vec::new();
        let mut new = Vec::new();
        for e in &change.removed {
            for h in hashes_of(e) {
                let p = h.prefix().0;
                if let Some(c) = counts.get_mut(&p) {
                    *c -= 1;
                    if *c == 0 {
                        counts.remove(&p);
                        gone.push(p);
                    }
                }
                if let Some(c) = listed.get_mut(&h) {
                    *c = c.saturating_sub(1);
                }
            }
        }
        for e in &change.added {
            for h in hashes_of(e) {
                let c = counts.entry(h.prefix().0).or_default();
                *c += 1;
                if *c == 1 {
                    new.push(h.prefix().0);
                }
                if let Some(c) = listed.get_mut(&h) {
                    *c += 1;
                }
            }
        }
        let previous = std::mem::take(&mut sim.prefixes);
        // A prefix removed and added back in one build is neither.
        gone.retain(|p| !counts.contains_key(p));
        new.retain(|p| previous.binary_search(p).is_err());
        gone.sort_unstable();
        new.sort_unstable();
        new.dedup();
        let removal_indices: Vec<u32> = gone
            .iter()
            .filter_map(|p| previous.binary_search(p).ok().map(|i| i as u32))
            .collect();
        let mut g = gone.iter().peekable();
        let kept: Vec<u32> = previous
            .iter()
            .copied()
            .filter(|&p| {
                while g.next_if(|&&x| x < p).is_some() {}
                g.next_if(|&&x| x == p).is_none()
            })
            .collect();
        sim.prefixes = merge_additions(&kept, &new);
        let additions = blocksieve_format::additions_between(&previous, &sim.prefixes);
        debug_assert_eq!(additions, new);
        added_per_build.push(additions.len());
        removed_per_build.push(gone.len());

        if unchanged {
            unchanged_builds += 1;
            sb_bytes += sim.poll_304_bytes as u64;
        } else {
            sim.version += 1;
            let params = DeltaParams {
                list_name: LIST.into(),
                from: end(sim.version - 1),
                to: end(sim.version),
                created_at: 1_800_000_000,
                expires_at: 1_800_000_000 + 7 * 86_400,
            };
            let delta = encode_delta(&params, &additions, &sim.key)?;
            delta_sizes.push(delta.len());
            sim.deltas.push_back(delta);
            if sim.deltas.len() > WEEK_BUILDS {
                sim.deltas.pop_front();
            }
            // (c): Rice-coded additions and removal indices (the same
            // Rice coding as a delta body), framing and the checksum.
            let adds = encode_delta(&params, &additions, &sim.key)?;
            let removals = encode_delta(&params, &removal_indices, &sim.key)?;
            let header = adds.len() - decode_delta(&adds, &sim.trusted)?.header().body_len as usize;
            let rice = |d: &[u8]| d.len() - header;
            sb_bytes += (RESPONSE_200_HEADER_BYTES
                + rice(&adds)
                + rice(&removals)
                + 2 * SB_ENCODING_FRAMING_BYTES
                + SB_CHECKSUM_BYTES) as u64;
            if build.is_multiple_of(BUILDS_PER_DAY) {
                // Apply it as a Safe Browsing client does: decode both,
                // drop the removed indices, merge the additions, check
                // the SHA-256 of the whole set.
                let start = Instant::now();
                let adds = decode_delta(&adds, &sim.trusted)?;
                let removals = decode_delta(&removals, &sim.trusted)?;
                let mut r = removals.additions().iter().peekable();
                let kept: Vec<u32> = previous
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| r.next_if(|&&x| x as usize == *i).is_none())
                    .map(|(_, &p)| p)
                    .collect();
                let state = merge_additions(&kept, adds.additions());
                let bytes: Vec<u8> = state.iter().flat_map(|p| p.to_be_bytes()).collect();
                let checksum = FullHash::of(&bytes);
                sb_times.push(start.elapsed());
                assert_eq!(
                    state, sim.prefixes,
                    "the Safe Browsing update does not give the list"
                );
                std::hint::black_box(checksum);
            }
        }

        for f in &mut followers {
            f.poll(&mut sim, build)?;
        }
        if build.is_multiple_of(BUILDS_PER_DAY) {
            daily.poll(&mut sim, build)?;
        }
        for f in followers.iter_mut().chain([&mut daily]) {
            f.record();
        }
        sb_bytes_at.push(sb_bytes);

        if build.is_multiple_of(BUILDS_PER_DAY) {
            // Today's snapshot of the day's last build: its real size (the
            // day's snapshots are counted at it), its false hits, and the
            // time to load it.
            let snapshot = sim.latest_snapshot()?;
            let today_snapshot_len = snapshot.bytes.len();
            snapshot_sizes.push(today_snapshot_len);
            // Today a build publishes a new version even when nothing
            // changed: one download per build, the other polls 304s.
            let polls_304 = TODAY_POLLS_PER_DAY - BUILDS_PER_DAY;
            today_day_bytes.push(
                (BUILDS_PER_DAY * (RESPONSE_200_HEADER_BYTES + today_snapshot_len)
                    + polls_304 * POLL_304_BYTES_WITHOUT_FRESHNESS) as f64,
            );
            today_false_hits.push(probes.false_hits(&listed, |p| snapshot.filter.contains(u64::from(p))));
            today_memory.push(snapshot.filter.body_len());
            let start = Instant::now();
            let loaded = decode_ignoring_expiry(&snapshot.bytes, &sim.trusted, &Default::default())?;
            today_decode.push(start.elapsed());
            std::hint::black_box(loaded);
            let prefixes = &sim.prefixes;
            sb_false_hits.push(probes.false_hits(&listed, |p| prefixes.binary_search(&p).is_ok()));
            if sb_first == 0 {
                let all = encode_delta(
                    &DeltaParams {
                        list_name: LIST.into(),
                        from: end(0),
                        to: end(1),
                        created_at: 0,
                        expires_at: 0,
                    },
                    prefixes,
                    &sim.key,
                )?;
                sb_first = all.len() - 226 - LIST.len() + SB_ENCODING_FRAMING_BYTES + SB_CHECKSUM_BYTES;
            }
            for f in followers.iter_mut().chain([&mut daily]) {
                let fh = probes.false_hits(&listed, |p| f.contains(p));
                f.false_hits.push((build, fh));
            }
            let day = build / BUILDS_PER_DAY;
            if day.is_multiple_of(10) || day == args.days {
                eprintln!(
                    "day {day}/{} ({:.0} s)",
                    args.days,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }

    // ---- Report ----
    let n = sim.prefixes.len();
    let probes_per_url = probes.probes.len() as f64 / probes.urls as f64;
    let mean_snapshot = mean(snapshot_sizes.iter().map(|&s| s as f64));
    let sb_day_bytes = (sb_bytes_at[builds] - sb_bytes_at[0]) as f64 / args.days as f64;
    let today_bytes = mean(today_day_bytes.iter().copied());
    let today_fh = mean(today_false_hits.iter().copied());
    let fuse_fpr = 1.0 / 256.0;
    let prefix_rate = |k: f64| k / 4_294_967_296.0;
    let theory = |fpr: f64, exact: f64| probes_per_url * (1.0 - (1.0 - fpr) * (1.0 - prefix_rate(exact)));

    println!();
    println!(
        "churn: {:.2} % added, {:.2} % removed a day, {} builds a day, seed {}, {} days ({} builds); per build {:.0} prefixes added, {:.0} removed (mean); {} unchanged builds",
        config.add_per_day * 100.0,
        config.remove_per_day * 100.0,
        BUILDS_PER_DAY,
        args.seed,
        args.days,
        builds,
        mean(added_per_build.iter().map(|&x| x as f64)),
        mean(removed_per_build.iter().map(|&x| x as f64)),
        unchanged_builds
    );
    println!(
        "one delta: {:.0} B mean ({} – {} B), header {} B; snapshot {:.0} B mean; {} snapshots built",
        mean(delta_sizes.iter().map(|&x| x as f64)),
        delta_sizes.iter().min().copied().unwrap_or(0),
        delta_sizes.iter().max().copied().unwrap_or(0),
        226 + LIST.len(),
        mean_snapshot,
        sim.snapshot_builds
    );
    println!(
        "HTTP overhead: 304 = {} B ({} B + the freshness header line, {} B measured); 200 headers = {} B; Safe Browsing framing {} B an encoding + {} B checksum",
        sim.poll_304_bytes,
        POLL_304_BYTES_WITHOUT_FRESHNESS,
        freshness_line.len(),
        RESPONSE_200_HEADER_BYTES,
        SB_ENCODING_FRAMING_BYTES,
        SB_CHECKSUM_BYTES
    );
    println!(
        "averaging: (a) and (c) over all {} days; (b) per agent over whole rebase cycles (first rebase to last), else the second half; false hits and memory from end-of-day samples in the same window",
        args.days
    );
    println!();
    println!(
        "| design | bytes/agent-day (polls included) | requests/day | false hits per URL check (measured) | theory | agent memory | update CPU (decode + merge, median) | averaged over |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    println!(
        "| (a) whole BF8 snapshot every build, poll every 5 min | {} | {} | {:.4} | {:.4} | {} | {} (decode the snapshot) | {} days |",
        kb(today_bytes),
        TODAY_POLLS_PER_DAY,
        today_fh,
        theory(fuse_fpr, n as f64),
        kb(mean(today_memory.iter().map(|&m| m as f64))),
        us(median(today_decode.clone())),
        args.days
    );
    let mut chosen: Option<(f64, f64, usize)> = None;
    for f in followers.iter().chain([&daily]) {
        let (a, b, how) = f.window(builds);
        let days = (b - a) as f64 / BUILDS_PER_DAY as f64;
        let bytes = (f.bytes_at[b] - f.bytes_at[a]) as f64 / days;
        let requests = (f.requests_at[b] - f.requests_at[a]) as f64 / days;
        let in_window = |build: usize| build > a && build <= b;
        let fh = mean(
            f.false_hits
                .iter()
                .filter(|(x, _)| in_window(*x))
                .map(|&(_, v)| v),
        );
        let peak = f
            .peak_memory
            .iter()
            .filter(|(x, _)| in_window(*x))
            .map(|&(_, m)| m)
            .max()
            .unwrap_or(0);
        let label = if std::ptr::eq(f, &daily) {
            format!("(b) once a day, ratio {}", f.ratio)
        } else {
            format!("(b) BF8 base + exact additions, 48 polls, ratio {}", f.ratio)
        };
        let theory_b = theory(fuse_fpr, n as f64 + f.ratio * n as f64 / 2.0);
        println!(
            "| {label} | {} | {:.1} | {:.4} | {:.4} | {} peak | {} (max {}) | {how}, {:.1} days, {} rebases{} |",
            kb(bytes),
            requests,
            fh,
            theory_b,
            kb(peak as f64),
            us(median(f.apply_times.clone())),
            us(f.apply_times.iter().max().copied()),
            days,
            f.rebases.len(),
            if f.rebases.len() >= 2 && how.starts_with("whole") {
                format!(" (every {:.1} days)", days / (f.rebases.len() - 1) as f64)
            } else {
                String::new()
            }
        );
        if !std::ptr::eq(f, &daily) && (f.ratio - DEFAULT_RATIO).abs() < 1e-9 {
            chosen = Some((bytes, fh, peak));
        }
    }
    println!(
        "| (c) Safe Browsing v4/v5: exact prefix set, Rice adds + removal indices + SHA-256 | {} | {} | {:.4} | {:.4} | {} (`Vec<u32>`) | {} (+ SHA-256 of the set) | {} days; first download {} |",
        kb(sb_day_bytes),
        BUILDS_PER_DAY,
        mean(sb_false_hits.iter().copied()),
        theory(0.0, n as f64),
        kb((n * 4) as f64),
        us(median(sb_times.clone())),
        args.days,
        kb(sb_first as f64)
    );
    println!(
        "| unchanged list, (b): a 304 with a freshness record at each build | {} | {} | | | | | |",
        kb((BUILDS_PER_DAY * sim.poll_304_bytes) as f64),
        BUILDS_PER_DAY
    );

    // The week offline: the chain of the last week's deltas vs the snapshot.
    let chain: usize = sim.deltas.iter().map(Vec::len).sum();
    let week_additions = sim
        .deltas
        .iter()
        .map(|d| decode_delta(d, &sim.trusted).map(|d| d.into_additions()))
        .try_fold(Vec::new(), |held, adds| adds.map(|a| merge_additions(&held, &a)))?;
    let snapshot = sim.latest_snapshot()?;
    let answered = if chain > snapshot.bytes.len() {
        format!(
            "the snapshot ({} B after a 410 no_delta)",
            sim.poll_304_bytes + RESPONSE_200_HEADER_BYTES + snapshot.bytes.len()
        )
    } else {
        format!("the chain ({} B)", RESPONSE_200_HEADER_BYTES + chain)
    };
    println!();
    println!(
        "offline for a week: chain of {} deltas = {} B ({} distinct additions, {:.1} % of the list) vs snapshot {} B: the publisher answers {}",
        sim.deltas.len(),
        chain,
        week_additions.len(),
        week_additions.len() as f64 * 100.0 / n as f64,
        snapshot.bytes.len(),
        answered
    );
    println!(
        "rebase: one snapshot download ({} B) and a load ({}), instead of one delta",
        snapshot.bytes.len(),
        us(median(today_decode))
    );

    // The goals.
    if let Some((bytes, fh, peak)) = chosen {
        println!();
        println!(
            "goal (b) ≤ 200 KB per agent-day, polls included: {} {}",
            kb(bytes),
            pass(bytes <= GOAL_BYTES_PER_DAY)
        );
        println!(
            "goal false hits per URL check ≤ {} × (a): {:.4} vs {:.4} (× {:.3}) {}",
            GOAL_FALSE_HIT_RATIO,
            fh,
            today_fh,
            fh / today_fh,
            pass(fh <= GOAL_FALSE_HIT_RATIO * today_fh)
        );
        let (a, b) = (
            theory(fuse_fpr, n as f64),
            theory(fuse_fpr, n as f64 * (1.0 + DEFAULT_RATIO / 2.0)),
        );
        println!(
            "  in theory (base + mean additions, {} of the base): {:.4} vs {:.4} (× {:.3}) {}",
            DEFAULT_RATIO / 2.0,
            b,
            a,
            b / a,
            pass(b <= GOAL_FALSE_HIT_RATIO * a)
        );
        println!(
            "goal memory ≤ snapshot + 8 MiB: peak {} vs {} {}",
            kb(peak as f64),
            kb((snapshot.bytes.len() + GOAL_MEMORY_ALLOWANCE) as f64),
            pass(peak <= snapshot.bytes.len() + GOAL_MEMORY_ALLOWANCE)
        );
    }
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
