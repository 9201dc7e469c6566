//! Row 1 for callgrind: each URL-check workload exactly once over the same
//! URLs, each in its own function, so that instruction counts (which,
//! unlike times, do not drift on a shared machine) can be compared:
//!
//! ```sh
//! valgrind --tool=callgrind --callgrind-out-file=url.out \
//!     --toggle-collect='blocksieve_bench::profile::pass_*' \
//!     target/release/blocksieve-bench profile-url --snapshot S --signing-key K
//! callgrind_annotate --inclusive=yes url.out | grep pass_
//! ```
//!
//! Under valgrind the CPU has no SHA-NI, so SHA-256 runs in software and
//! weighs far more than on the real machine: compare the passes' counts
//! minus their `sha2::sha256::compress256` share.

use std::hint::black_box;
use std::path::PathBuf;

use blocksieve_agent::Agent;
use blocksieve_format::{FullHash, canonicalize, full_hashes};
use sha2::{Digest as _, Sha256};

use crate::workload::{Published, data_dir, urls};

/// `blocksieve-bench profile-url`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The published snapshot of the 854k list.
    #[arg(long)]
    snapshot: PathBuf,
    /// The publisher's `signing.key` (only its public half is used).
    #[arg(long)]
    signing_key: PathBuf,
    /// A scratch cache directory for the agent.
    #[arg(long, default_value = "target/bench/profile-cache")]
    cache_dir: PathBuf,
    /// Run each pass this many times (for a sampling profiler such as
    /// `perf record`, which needs seconds of work, not one pass).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
}

#[inline(never)]
fn pass_lookup_local(agent: &Agent, urls: &[String]) -> usize {
    urls.iter()
        .filter_map(|u| agent.lookup_local(black_box(u)).ok())
        .map(|l| l.hits.len())
        .sum()
}

/// Canonicalization and hashing as the agent does them (`UrlHashes::of`:
/// `full_hashes`).
#[inline(never)]
fn pass_canonicalize_sha256(urls: &[String]) -> u8 {
    let mut acc = 0u8;
    let mut hashes = Vec::new();
    for url in urls {
        hashes.clear();
        if full_hashes(black_box(url), &mut hashes).is_ok() {
            acc ^= hashes.iter().fold(0, |a, h| a ^ h.0[0]);
        }
    }
    acc
}

/// The rows' reference: the `sha2` crate's `Sha256::digest`.
#[inline(never)]
fn pass_sha256_only(expressions: &[String]) -> u8 {
    let mut acc = 0u8;
    for e in expressions {
        acc ^= Sha256::digest(black_box(e.as_bytes()))[0];
    }
    acc
}

/// blocksieve's own SHA-256 (`FullHash::of`) of the same strings.
#[inline(never)]
fn pass_sha256_blocksieve(expressions: &[String]) -> u8 {
    let mut acc = 0u8;
    for e in expressions {
        acc ^= FullHash::of(black_box(e.as_bytes())).0[0];
    }
    acc
}

/// Runs each pass once and prints what it covered.
///
/// # Errors
///
/// When the inputs are missing or the agent cannot load the snapshot.
pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let urls = urls(&data_dir())?;
    let published = Published::read(&args.snapshot, &args.signing_key)?;
    std::fs::create_dir_all(&args.cache_dir)?;
    let list = &published.header.list_name;
    std::fs::write(args.cache_dir.join(format!("{list}.snapshot")), &published.bytes)?;
    let agent = Agent::builder("http://127.0.0.1:9")
        .list(list.clone())
        .trusted_key(published.key.public_key().clone())
        .cache_dir(&args.cache_dir)
        .build()?;
    anyhow::ensure!(agent.snapshot_version(list).is_some(), "snapshot not loaded");
    let expressions: Vec<String> = urls
        .iter()
        .filter_map(|u| canonicalize(u).ok())
        .flat_map(|u| u.expressions().map(|e| e.as_str().to_owned()).collect::<Vec<_>>())
        .collect();
    let (mut hits, mut canon, mut sha, mut ours) = (0, 0, 0, 0);
    // Wall time of each pass, per URL, in every round: the passes alternate,
    // so a slower stretch of the machine weighs on all four alike.
    let mut times: [Vec<f64>; 4] = Default::default();
    let per_url = |t: std::time::Instant| t.elapsed().as_nanos() as f64 / urls.len() as f64;
    for _ in 0..args.repeat.max(1) {
        let t = std::time::Instant::now();
        hits = pass_lookup_local(&agent, &urls);
        times[0].push(per_url(t));
        let t = std::time::Instant::now();
        canon = pass_canonicalize_sha256(&urls);
        times[1].push(per_url(t));
        let t = std::time::Instant::now();
        sha = pass_sha256_only(&expressions);
        times[2].push(per_url(t));
        let t = std::time::Instant::now();
        ours = pass_sha256_blocksieve(&expressions);
        times[3].push(per_url(t));
    }
    if args.repeat > 1 {
        let [lookup, canonical, hashing, own] = times.map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        });
        println!(
            "median per URL over {} rounds: lookup_local {lookup:.0} ns ({:.3}), canonicalize + SHA-256 {canonical:.0} ns ({:.3}), SHA-256 alone {hashing:.0} ns (`sha2`'s digest; blocksieve's `FullHash::of` {own:.0} ns, {:.3})",
            args.repeat,
            lookup / hashing,
            canonical / hashing,
            own / hashing
        );
    }
    println!(
        "{} URLs, {} expressions, {hits} prefix hits (checksums {canon} {sha} {ours})",
        urls.len(),
        expressions.len()
    );
    Ok(())
}
