//! One build of one threat list: sources → expressions → full hashes →
//! filter → signed snapshot.

use std::time::Instant;

use blocksieve_format::{FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotParams, encode};
use rand::{Rng as _, SeedableRng as _};

use crate::Error;
use crate::config::{BUILTIN_LIST, ListConfig};
use crate::sources::{ParseReport, parse_source};

/// How many keys absent by construction are probed to measure a filter's
/// false-positive rate.
pub const CANARY_PROBES: u32 = 100_000;

/// zstd level for snapshot bodies: fingerprints are near-random, so higher
/// levels buy almost nothing.
const ZSTD_LEVEL: i32 = 9;

/// A built, signed, not yet published snapshot of one list.
#[derive(Debug)]
pub struct BuiltList {
    /// The snapshot version.
    pub version: u64,
    /// The signed snapshot bytes.
    pub snapshot: Vec<u8>,
    /// The list's full hashes, sorted and unique.
    pub hashes: Vec<FullHash>,
    /// What the build saw and produced.
    pub report: BuildReport,
}

/// What one build saw and produced.
#[derive(Debug, Clone)]
pub struct BuildReport {
    /// Lines read and rejected.
    pub parse: ParseReport,
    /// Distinct full hashes.
    pub entries: u64,
    /// Distinct filter keys (32-bit prefixes).
    pub unique_keys: u64,
    /// Snapshot size in bytes.
    pub snapshot_bytes: u64,
    /// Snapshot bits per filter key (whole file, compressed).
    pub bits_per_key: f64,
    /// The filter kind's false-positive rate per probe, in theory.
    pub theoretical_fpr: f64,
    /// The false-positive rate per probe measured on [`CANARY_PROBES`]
    /// absent keys.
    pub measured_fpr: f64,
    /// Wall time of the build.
    pub duration: std::time::Duration,
}

/// Reads every source of `list` and returns its sorted, unique full hashes.
///
/// # Errors
///
/// [`Error::Source`] when a source cannot be read. Bad lines are counted in
/// the report, never an error.
pub fn collect_hashes(list: &ListConfig, report: &mut ParseReport) -> Result<Vec<FullHash>, Error> {
    let mut hashes = Vec::new();
    for source in &list.sources {
        let owned;
        let bytes: &[u8] = match &source.path {
            Some(path) => {
                owned = read_source(path)?;
                &owned
            }
            None => BUILTIN_LIST,
        };
        parse_source(bytes, source.format, report, |expr| {
            hashes.push(FullHash::of(expr.as_bytes()));
        });
    }
    hashes.sort_unstable();
    hashes.dedup();
    Ok(hashes)
}

fn read_source(path: &std::path::Path) -> Result<Vec<u8>, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::Source(format!("{}: {e}", path.display())))?;
    if path.extension().is_some_and(|e| e == "gz") {
        use std::io::Read as _;
        let mut out = Vec::with_capacity(bytes.len() * 4);
        flate2::read::MultiGzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| Error::Source(format!("{}: gzip: {e}", path.display())))?;
        return Ok(out);
    }
    Ok(bytes)
}

/// The fraction of `probes` random keys, absent from `keys` by construction,
/// that `filter` reports present. Seeded: the same inputs give the same rate.
pub fn measure_fpr(filter: &PrefixFilter, keys: &[u64], key_bits: KeyBits, probes: u32, seed: u64) -> f64 {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut hits = 0u64;
    let mut done = 0u32;
    while done < probes {
        let key = match key_bits {
            KeyBits::Bits32 => u64::from(rng.r#gen::<u32>()),
            KeyBits::Bits64 => rng.r#gen::<u64>(),
        };
        if keys.binary_search(&key).is_ok() {
            continue;
        }
        done += 1;
        hits += u64::from(filter.contains(key));
    }
    hits as f64 / f64::from(probes)
}

/// Builds and signs a snapshot of `list`.
///
/// `previous_version` is the version currently served; the new version is
/// `max(previous + 1, now)`, so versions keep increasing even if the data
/// directory is lost.
///
/// # Errors
///
/// [`Error::Source`] when a source cannot be read, [`Error::Build`] when the
/// list is empty or the filter cannot be built.
pub fn build_list(
    list: &ListConfig,
    previous_version: Option<u64>,
    now: u64,
    ttl_s: u64,
    key: &SigningKey,
) -> Result<BuiltList, Error> {
    let started = Instant::now();
    let mut parse = ParseReport::default();
    let hashes = collect_hashes(list, &mut parse)?;
    if hashes.is_empty() {
        return Err(Error::Build(format!(
            "list {}: no valid entries in {} lines ({} rejected); refusing to publish an empty list",
            list.name,
            parse.lines,
            parse.rejected_total()
        )));
    }
    let key_bits = KeyBits::Bits32;
    let mut keys: Vec<u64> = hashes.iter().map(|h| key_bits.key_of(h)).collect();
    keys.dedup(); // sorted hashes give sorted prefixes
    let filter = PrefixFilter::build(list.filter, &keys)
        .map_err(|e| Error::Build(format!("list {}: {e}", list.name)))?;
    let version = previous_version.map_or(now, |p| now.max(p + 1));
    let measured_fpr = measure_fpr(&filter, &keys, key_bits, CANARY_PROBES, version);
    let params = SnapshotParams {
        list_name: list.name.clone(),
        version,
        created_at: now,
        expires_at: now + ttl_s,
        key_bits,
        request_prefix_bits: 32,
        full_hash_count: hashes.len() as u64,
        measured_fpr,
        zstd_level: ZSTD_LEVEL,
    };
    let snapshot =
        encode(&params, &filter, key).map_err(|e| Error::Build(format!("list {}: {e}", list.name)))?;
    let report = BuildReport {
        parse,
        entries: hashes.len() as u64,
        unique_keys: keys.len() as u64,
        snapshot_bytes: snapshot.len() as u64,
        bits_per_key: snapshot.len() as f64 * 8.0 / keys.len() as f64,
        theoretical_fpr: filter.theoretical_fpr(),
        measured_fpr,
        duration: started.elapsed(),
    };
    Ok(BuiltList {
        version,
        snapshot,
        hashes,
        report,
    })
}
