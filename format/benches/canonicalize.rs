//! What canonicalization costs next to the hashing it feeds, on 10,000 real
//! URLs (`benches/data/urls-10k.txt`, see the README there):
//!
//! ```sh
//! cargo bench -p blocksieve-format --bench canonicalize
//! ```
//!
//! - `canonicalize+expressions+sha256`: per URL, [`full_hashes`]: the
//!   canonical URL, its expressions and the full hash of each — what the
//!   agent does for each URL it checks (`UrlHashes::of`). A URL that is
//!   canonical as written (95 % of these) is hashed in place, with no copy;
//! - `canonicalize+expressions+sha256-via-canonical-url`: the same through
//!   a [`CanonicalUrl`] (one `String` per URL), [`canonicalize`] then
//!   [`CanonicalUrl::full_hashes_into`], for callers that keep the URL;
//! - `canonicalize+expressions+sha256-per-expression`: [`canonicalize`],
//!   then hashing each [`Expression`] while iterating
//!   [`CanonicalUrl::expressions`] (the hashes no longer run back to back);
//! - `sha256-only`: the SHA-256 of the same expression strings, computed
//!   beforehand: the lower bound, since every expression must be hashed:
//!   the `sha2` crate's `Sha256::digest`, as in every table so far (not
//!   [`FullHash::of`](blocksieve_format::FullHash::of), which pads the
//!   message itself and is faster: a yardstick that does not move with the
//!   code it measures);
//! - `sha256-blocksieve`: the same strings through blocksieve's
//!   [`FullHash::of`](blocksieve_format::FullHash::of) (row 1.6).
//!
//! The ratio of the first and `sha256-only`'s medians is the cost of
//! canonicalization; the target is at most 1.5. Criterion writes the medians
//! to `target/criterion/urls-10k/*/new/estimates.json` (`median.point_estimate`,
//! in nanoseconds per iteration over all 10,000 URLs). The first two and
//! `sha256-blocksieve` are then each timed interleaved with `sha256-only`
//! (41 rounds of one pass each, side by side; the median of the per-round
//! ratios), which holds on a noisy machine where criterion medians, measured
//! one after the other, need not.
//!
//! [`CanonicalUrl`]: blocksieve_format::CanonicalUrl
//! [`CanonicalUrl::expressions`]: blocksieve_format::CanonicalUrl::expressions
//! [`CanonicalUrl::full_hashes_into`]: blocksieve_format::CanonicalUrl::full_hashes_into
//! [`Expression`]: blocksieve_format::Expression

#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

#[path = "support/interleave.rs"]
mod interleave;
use interleave::interleaved;
use sha2::{Digest as _, Sha256};

use blocksieve_format::{FullHash, canonicalize, full_hashes};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const URLS: &str = include_str!("data/urls-10k.txt");

fn bench(c: &mut Criterion) {
    let urls: Vec<&str> = URLS.lines().collect();
    // The expression strings of every URL, for the hashing-only lower bound.
    let expressions: Vec<String> = urls
        .iter()
        .filter_map(|u| canonicalize(u).ok())
        .flat_map(|u| u.expressions().map(|e| e.to_string()).collect::<Vec<_>>())
        .collect();

    let mut group = c.benchmark_group("urls-10k");
    group.throughput(Throughput::Elements(urls.len() as u64));
    group.measurement_time(Duration::from_secs(10));
    let ours = || {
        let mut acc = 0u8;
        let mut hashes = Vec::new();
        for url in &urls {
            hashes.clear();
            if full_hashes(black_box(url), &mut hashes).is_ok() {
                acc ^= hashes.iter().fold(0, |a, h| a ^ h.0[0]);
            }
        }
        acc
    };
    let via_canonical_url = || {
        let mut acc = 0u8;
        let mut hashes = Vec::new();
        for url in &urls {
            if let Ok(canonical) = canonicalize(black_box(url)) {
                hashes.clear();
                canonical.full_hashes_into(&mut hashes);
                acc ^= hashes.iter().fold(0, |a, h| a ^ h.0[0]);
            }
        }
        acc
    };
    group.bench_function("canonicalize+expressions+sha256", |b| b.iter(ours));
    group.bench_function("canonicalize+expressions+sha256-via-canonical-url", |b| {
        b.iter(via_canonical_url)
    });
    group.bench_function("canonicalize+expressions+sha256-per-expression", |b| {
        b.iter(|| {
            let mut acc = 0u8;
            for url in &urls {
                if let Ok(canonical) = canonicalize(black_box(url)) {
                    for e in canonical.expressions() {
                        acc ^= e.full_hash().0[0];
                    }
                }
            }
            acc
        });
    });
    let sha256_only = || {
        let mut acc = 0u8;
        for e in &expressions {
            acc ^= Sha256::digest(black_box(e.as_bytes()))[0];
        }
        acc
    };
    // blocksieve's own SHA-256 of the same strings (its own padding, `sha2`'s
    // compression function): how much of a check's margin is the hash.
    let sha256_blocksieve = || {
        let mut acc = 0u8;
        for e in &expressions {
            acc ^= FullHash::of(black_box(e.as_bytes())).0[0];
        }
        acc
    };
    group.bench_function("sha256-only", |b| b.iter(sha256_only));
    group.bench_function("sha256-blocksieve", |b| b.iter(sha256_blocksieve));
    group.finish();
    interleaved(
        "urls-10k",
        "sha256-blocksieve",
        urls.len(),
        sha256_blocksieve,
        sha256_only,
    );
    interleaved(
        "urls-10k",
        "canonicalize+expressions+sha256",
        urls.len(),
        ours,
        sha256_only,
    );
    interleaved(
        "urls-10k",
        "canonicalize+expressions+sha256-via-canonical-url",
        urls.len(),
        via_canonical_url,
        sha256_only,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
