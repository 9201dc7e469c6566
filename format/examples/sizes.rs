//! Filter sizes on a real URL feed, against the information-theoretic
//! minimum and the Rice-coded exact prefix set.
//!
//! Run: `cargo run --release -p blocksieve-format --example sizes -- FEED.txt[.gz]`
//! (one URL per line; `.gz` is decompressed). Prints a Markdown table.

use std::io::Read as _;

use blocksieve_format::{
    DecodeLimits, FilterKind, FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotParams, canonicalize,
    decode, encode,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: sizes FEED.txt[.gz]")?;
    let raw = std::fs::read(&path)?;
    let text = if path.ends_with(".gz") {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(raw.as_slice()).read_to_end(&mut out)?;
        out
    } else {
        raw
    };
    let mut lines = 0u64;
    let mut hashes: Vec<FullHash> = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line).trim_ascii();
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        lines += 1;
        if let Some(e) = canonicalize(line)
            .ok()
            .and_then(|u| u.expressions().next().map(|e| e.full_hash()))
        {
            hashes.push(e);
        }
    }
    hashes.sort_unstable();
    hashes.dedup();
    let mut keys: Vec<u64> = hashes.iter().map(|h| h.prefix().key()).collect();
    keys.dedup();
    let n = keys.len() as f64;
    println!("feed: {path}");
    println!(
        "lines: {lines}, distinct full hashes: {}, distinct 32-bit prefixes: {}",
        hashes.len(),
        keys.len()
    );
    println!();
    println!(
        "| filter | FPR ε (theory) | measured FPR | uncompressed bits/key | compressed bits/key | minimum log2(1/ε) | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    let key = SigningKey::from_secret_bytes([1; 32]);
    for kind in FilterKind::ALL {
        let filter = PrefixFilter::build(kind, &keys)?;
        let measured = measure(&filter, &keys);
        let params = SnapshotParams {
            list_name: "sizes".into(),
            version: 1,
            created_at: 0,
            expires_at: 1,
            key_bits: KeyBits::Bits32,
            request_prefix_bits: 32,
            full_hash_count: hashes.len() as u64,
            measured_fpr: measured,
            zstd_level: 19,
        };
        let bytes = encode(&params, &filter, &key)?;
        let header = decode(&bytes, &[key.public_key().clone()], &DecodeLimits::default(), 0)?;
        let compressed_bits = header.header().body_compressed_bytes as f64 * 8.0 / n;
        let eps = filter.theoretical_fpr();
        let min = (1.0 / eps).log2();
        println!(
            "| {kind} | {eps:.3e} | {measured:.3e} | {:.3} | {compressed_bits:.3} | {min:.3} | {:.3} |",
            filter.bits_per_key(),
            compressed_bits / min
        );
    }
    let rice = rice_bits(&keys);
    let min = (4_294_967_296.0 / n).log2();
    println!(
        "| exact 32-bit prefix set, Rice-coded (Safe Browsing v4) | {:.3e} (n/2^32) | - | - | {:.3} | {min:.3} = log2(2^32/n) | {:.3} |",
        n / 4_294_967_296.0,
        rice / n,
        rice / n / min
    );
    Ok(())
}

/// Fraction of 1,000,000 pseudo-random 32-bit keys absent from `keys` that hit.
fn measure(filter: &PrefixFilter, keys: &[u64]) -> f64 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let (mut hits, mut probes) = (0u64, 0u64);
    while probes < 1_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = x >> 32;
        if keys.binary_search(&k).is_ok() {
            continue;
        }
        probes += 1;
        hits += u64::from(filter.contains(k));
    }
    hits as f64 / probes as f64
}

/// Exact size in bits of the sorted prefixes Golomb-Rice coded (first value
/// raw, then deltas with the best Rice parameter), as Safe Browsing v4
/// ships prefix sets.
fn rice_bits(keys: &[u64]) -> f64 {
    let deltas: Vec<u64> = keys.windows(2).map(|w| w[1] - w[0]).collect();
    (0..32u32)
        .map(|k| 32 + deltas.iter().map(|&d| 1 + (d >> k) + u64::from(k)).sum::<u64>())
        .min()
        .unwrap_or(32) as f64
}
