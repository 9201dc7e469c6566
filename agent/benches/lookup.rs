//! What a local URL check costs next to the SHA-256 it cannot avoid (BENCHMARKS.md
//! row 1), on real URLs against a snapshot of the real 854k-URL list:
//!
//! ```sh
//! cargo bench -p blocksieve-agent --bench lookup
//! ```
//!
//! Needs the shared data (`../shared/data` next to the repository, or
//! `BLOCKSIEVE_DATA=DIR`); without it the bench prints why and does nothing.
//!
//! Setup: every line of `feeds/phishing-urls-union-2018-2020.txt.gz` becomes
//! its most specific expression (the publisher's rule for URL entries,
//! without its `&amp;` and shared-host refinements), whose 32-bit hash
//! prefixes go into a BinaryFuse8 snapshot — the publisher's default —
//! signed, written to a cache directory and loaded by a real [`Agent`] from
//! there. The URLs checked: all of `benign/legit-urls.txt` (5,715) and
//! 5,777 phishing URLs (`feeds/phishunt-urls.txt` whole, and 2,500 evenly
//! spaced lines from each of `phishing-links-{active,inactive}-2020.txt`).
//!
//! For each set (`all`, `benign`, `phishing`), group `url-check-<set>`:
//!
//! - `lookup_local`: [`Agent::lookup_local`] on every URL — canonicalize,
//!   expressions, SHA-256 of each, probe of the snapshot, the answer built;
//! - `canonicalize+sha256+probe`: the same without the agent: canonicalize,
//!   hash every expression ([`full_hashes`](blocksieve_format::full_hashes),
//!   as the agent does) and probe the decoded snapshot
//!   ([`VerifiedSnapshot::probably_contains`](blocksieve_format::VerifiedSnapshot::probably_contains));
//! - `canonicalize+sha256`: without the probe either; with the previous
//!   one, splits the cost between canonicalization, the filter probe and
//!   the agent's bookkeeping;
//! - `sha256-only`: SHA-256 of the same expression strings, computed
//!   beforehand: the lower bound. It is the `sha2` crate's
//!   `Sha256::digest`, as in every table so far, not blocksieve's own
//!   [`FullHash::of`](blocksieve_format::FullHash::of), which pads the
//!   message itself and is faster (`bench/`, row 1.6): a yardstick that
//!   does not move with the code it measures.
//!
//! Criterion writes each median (nanoseconds per iteration over the whole
//! set) to `target/criterion/url-check-<set>/<function>/new/estimates.json`.
//!
//! Criterion measures one function after the other; on a shared machine the
//! load shifts in between and back-to-back medians drift apart. So each
//! comparison is then also timed *interleaved*: 41 rounds of one pass of
//! each side over the whole set, each timed after an untimed warm-up pass
//! of its own, the order swapped every round, the ratio being the median of
//! the per-round ratios. That ratio is the table's (the
//! issue's target for `lookup_local` / `sha256-only`: at most 1.5); with
//! `BLOCKSIEVE_BENCH_OUT=DIR` it is written to
//! `DIR/interleaved/url-check-<set>.<name>.json`, and `bench/run.sh url`
//! turns it into table rows.

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use sha2::{Digest as _, Sha256};
use std::io::Read as _;
use std::path::PathBuf;
use std::time::Duration;

#[path = "../../format/benches/support/interleave.rs"]
mod interleave;
use interleave::interleaved;

use blocksieve_agent::Agent;
use blocksieve_format::{
    DecodeLimits, FilterKind, KeyBits, PrefixFilter, SigningKey, SnapshotParams, canonicalize, decode,
    encode, full_hashes,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{RngCore as _, SeedableRng as _};

/// The shared data directory: `BLOCKSIEVE_DATA`, else `../shared/data`
/// beside the repository.
fn data_dir() -> PathBuf {
    std::env::var_os("BLOCKSIEVE_DATA").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"),
        PathBuf::from,
    )
}

/// Lines of a text file, trimmed, without blanks and `#` comments; invalid
/// UTF-8 is replaced, as a browser would show it.
fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// `count` lines spread evenly over `all`.
fn spread(all: Vec<String>, count: usize) -> Vec<String> {
    let step = (all.len() / count).max(1);
    all.into_iter().step_by(step).take(count).collect()
}

/// A signed BinaryFuse8 snapshot of the 854k-URL feed, with `extra`
/// random keys (seeded) besides, and its key.
fn feed_snapshot(data: &std::path::Path, extra: usize) -> (Vec<u8>, SigningKey) {
    let gz = std::fs::read(data.join("feeds/phishing-urls-union-2018-2020.txt.gz")).unwrap();
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut text)
        .unwrap();
    let mut keys: Vec<u64> = text
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let url = canonicalize(line.trim_ascii()).ok()?;
            let first = url.expressions().next()?;
            Some(KeyBits::Bits32.key_of(&first.full_hash()))
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(10);
    keys.extend((0..extra).map(|_| u64::from(rng.next_u32())));
    keys.sort_unstable();
    keys.dedup();
    let filter = PrefixFilter::build(FilterKind::BinaryFuse8, &keys).unwrap();
    let key = SigningKey::from_secret_bytes([7u8; 32]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let params = SnapshotParams {
        list_name: "phishing".to_owned(),
        version: now,
        created_at: now,
        expires_at: now + 24 * 60 * 60,
        key_bits: KeyBits::Bits32,
        request_prefix_bits: 16,
        full_hash_count: keys.len() as u64,
        measured_fpr: filter.theoretical_fpr(),
        zstd_level: 3,
    };
    (encode(&params, &filter, &key).unwrap(), key)
}

/// The expression strings of `urls`, for the SHA-256 lower bound.
fn expressions(urls: &[String]) -> Vec<String> {
    urls.iter()
        .filter_map(|u| canonicalize(u).ok())
        .flat_map(|u| u.expressions().map(|e| e.to_string()).collect::<Vec<_>>())
        .collect()
}

/// An agent that holds `snapshot` from its cache directory (kept while the
/// agent is used).
fn agent_with(snapshot: &[u8], key: &SigningKey) -> (Agent, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    std::fs::write(cache.path().join("phishing.snapshot"), snapshot).unwrap();
    // The publisher is never contacted: the snapshot comes from the cache.
    let agent = Agent::builder("http://127.0.0.1:9")
        .list("phishing")
        .trusted_key(key.public_key().clone())
        .cache_dir(cache.path())
        .build()
        .unwrap();
    assert!(
        agent.snapshot_version("phishing").is_some(),
        "snapshot not loaded"
    );
    (agent, cache)
}

fn bench(c: &mut Criterion) {
    let data = data_dir();
    if !data.join("feeds/phishing-urls-union-2018-2020.txt.gz").is_file() {
        eprintln!(
            "skipping the lookup bench: no shared data at {} (set BLOCKSIEVE_DATA)",
            data.display()
        );
        return;
    }
    let read = |name: &str| lines(&std::fs::read(data.join(name)).unwrap());
    let benign = read("benign/legit-urls.txt");
    let mut phishing = read("feeds/phishunt-urls.txt");
    phishing.extend(spread(read("feeds/phishing-links-active-2020.txt"), 2_500));
    phishing.extend(spread(read("feeds/phishing-links-inactive-2020.txt"), 2_500));
    let all: Vec<String> = benign.iter().chain(&phishing).cloned().collect();

    let (snapshot, key) = feed_snapshot(&data, 0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let decoded = decode(
        &snapshot,
        &[key.public_key().clone()],
        &DecodeLimits::default(),
        now,
    )
    .unwrap();
    let (agent, _cache) = agent_with(&snapshot, &key);

    for (set, urls) in [("all", &all), ("benign", &benign), ("phishing", &phishing)] {
        let exprs = expressions(urls);
        let hits = urls
            .iter()
            .filter(|u| agent.lookup_local(u).is_ok_and(|l| !l.is_empty()))
            .count();
        eprintln!(
            "url-check-{set}: {} URLs, {} expressions, {hits} with a prefix hit ({} entries, snapshot {} bytes)",
            urls.len(),
            exprs.len(),
            agent.snapshot_header("phishing").map_or(0, |h| h.entry_count),
            snapshot.len(),
        );
        let mut group = c.benchmark_group(format!("url-check-{set}"));
        group.throughput(Throughput::Elements(urls.len() as u64));
        group.sample_size(30);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(4));
        let lookup_local = || {
            let mut hits = 0usize;
            for url in urls {
                if let Ok(local) = agent.lookup_local(black_box(url)) {
                    hits += local.hits.len();
                }
            }
            hits
        };
        // The agent's steps (`UrlHashes::of`: `full_hashes`), one buffer
        // per pass.
        let canonicalize_sha256_probe = || {
            let mut hits = 0usize;
            let mut hashes = Vec::new();
            for url in urls {
                hashes.clear();
                if full_hashes(black_box(url), &mut hashes).is_ok() {
                    hits += hashes.iter().filter(|h| decoded.probably_contains(h)).count();
                }
            }
            hits
        };
        let canonicalize_sha256 = || {
            let mut acc = 0u8;
            let mut hashes = Vec::new();
            for url in urls {
                hashes.clear();
                if full_hashes(black_box(url), &mut hashes).is_ok() {
                    acc ^= hashes.iter().fold(0, |a, h| a ^ h.0[0]);
                }
            }
            acc as usize
        };
        let sha256_only = || {
            let mut acc = 0u8;
            for e in &exprs {
                acc ^= Sha256::digest(black_box(e.as_bytes()))[0];
            }
            acc as usize
        };
        group.bench_function("lookup_local", |b| b.iter(lookup_local));
        group.bench_function("canonicalize+sha256+probe", |b| b.iter(canonicalize_sha256_probe));
        group.bench_function("canonicalize+sha256", |b| b.iter(canonicalize_sha256));
        group.bench_function("sha256-only", |b| b.iter(sha256_only));
        group.finish();
        let group = format!("url-check-{set}");
        interleaved(&group, "lookup_local", urls.len(), lookup_local, sha256_only);
        interleaved(
            &group,
            "canonicalize+sha256+probe",
            urls.len(),
            canonicalize_sha256_probe,
            sha256_only,
        );
        interleaved(
            &group,
            "canonicalize+sha256",
            urls.len(),
            canonicalize_sha256,
            sha256_only,
        );
    }

    // The same URLs against a list twelve times as large: the 854k list's
    // keys and 9.2 million random ones (10 million entries, an 11 MB
    // filter), where each probe misses the caches.
    let (snapshot, key) = feed_snapshot(&data, 9_200_000);
    let (agent, _cache) = agent_with(&snapshot, &key);
    let exprs = expressions(&all);
    eprintln!(
        "url-check-all-10m: {} URLs, {} entries, snapshot {} bytes",
        all.len(),
        agent.snapshot_header("phishing").map_or(0, |h| h.entry_count),
        snapshot.len(),
    );
    let lookup_local = || {
        let mut hits = 0usize;
        for url in &all {
            if let Ok(local) = agent.lookup_local(black_box(url)) {
                hits += local.hits.len();
            }
        }
        hits
    };
    let sha256_only = || {
        let mut acc = 0u8;
        for e in &exprs {
            acc ^= Sha256::digest(black_box(e.as_bytes()))[0];
        }
        acc as usize
    };
    interleaved(
        "url-check-all-10m",
        "lookup_local",
        all.len(),
        lookup_local,
        sha256_only,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
