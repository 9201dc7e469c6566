//! One build of one threat list: sources → expressions → full hashes →
//! filter → canary → signed snapshot, and the gates that decide whether it
//! may be published.

use std::time::Instant;

use blocksieve_format::api::{Sizing, SourceStatus};
use blocksieve_format::{
    FilterKind, FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotHeader, SnapshotParams, encode,
};
use rand::{Rng as _, SeedableRng as _};

use crate::Error;
use crate::config::{FilterChoice, ListConfig, SourceConfig};
use crate::fetch::{CacheMeta, Fetched, SourceCache};
use crate::sources::{FormatOptions, ParseReport, parse_source};

/// How many keys absent by construction are probed to measure a filter's
/// false-positive rate (the canary).
pub const CANARY_PROBES: u32 = 100_000;

/// Mean number of expressions per URL check, measured with this
/// canonicalizer on the 5,715 URLs of `legit-urls.txt` (Hannousse &
/// Yahiouche's legitimate URLs): 26,327 expressions / 5,715 URLs.
pub const MEAN_EXPRESSIONS_PER_URL: f64 = 4.607;

/// Approximate JSON bytes per full hash in a full-hash response
/// (`{"full_hash":"<64 hex>","list":"<name>"},`), excluding the name.
const RESPONSE_BYTES_PER_MATCH: f64 = 35.0 + 64.0;

/// A source's content after fetching: fresh bytes, or the reason it failed.
#[derive(Debug)]
pub struct LoadedSource {
    /// The source's configuration.
    pub config: SourceConfig,
    /// What fetching produced.
    pub fetched: Fetched,
    /// Where its last good content is kept, if anywhere.
    pub cache: Option<SourceCache>,
}

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
    /// Lines read and rejected, over all sources.
    pub parse: ParseReport,
    /// Per source: where its content came from.
    pub sources: Vec<SourceStatus>,
    /// Sizing of the filter and the full-hash protocol.
    pub sizing: Sizing,
    /// Wall time of the build.
    pub duration: std::time::Duration,
}

/// What a build needs besides its sources.
#[derive(Debug)]
pub struct BuildRequest<'a> {
    /// The list.
    pub list: &'a ListConfig,
    /// Header of the snapshot currently served, if any.
    pub previous: Option<&'a SnapshotHeader>,
    /// Build time, Unix seconds.
    pub now: u64,
    /// Snapshot lifetime in seconds.
    pub ttl_s: u64,
    /// The signing key.
    pub key: &'a SigningKey,
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

/// Probability that probing one expression that is not listed hits: a
/// filter false positive, or (32-bit keys) a listed prefix shared by chance.
pub fn false_hit_per_probe(fpr: f64, unique_keys: u64, key_bits: KeyBits) -> f64 {
    let collision = match key_bits {
        KeyBits::Bits32 => unique_keys as f64 / 4_294_967_296.0,
        KeyBits::Bits64 => 0.0,
    };
    collision + (1.0 - collision) * fpr
}

/// Expected full-hash requests per 1,000 checks of unlisted URLs: a check
/// probes [`MEAN_EXPRESSIONS_PER_URL`] expressions and needs a request when
/// any of them hits.
pub fn expected_requests_per_1000(per_probe: f64) -> f64 {
    1000.0 * (1.0 - (1.0 - per_probe).powf(MEAN_EXPRESSIONS_PER_URL))
}

/// The request prefix length to advertise: the longest of 8, 12, …, 32 bits
/// whose expected bucket still holds `min_anonymity` listed full hashes (8
/// when even that is too few).
pub fn request_prefix_bits(full_hashes: u64, min_anonymity: u64) -> u8 {
    (8..=32u8)
        .rev()
        .step_by(4)
        .find(|&bits| full_hashes as f64 / 2f64.powi(i32::from(bits)) >= min_anonymity as f64)
        .unwrap_or(8)
}

fn filter_kind_for(list: &ListConfig, unique_keys: u64) -> FilterKind {
    match list.filter {
        FilterChoice::Kind(k) => k,
        FilterChoice::Auto(_) => [
            FilterKind::BinaryFuse8,
            FilterKind::BinaryFuse16,
            FilterKind::BinaryFuse32,
        ]
        .into_iter()
        .find(|k| {
            let fpr = match k {
                FilterKind::BinaryFuse8 => 1.0 / 256.0,
                FilterKind::BinaryFuse16 => 1.0 / 65_536.0,
                _ => 1.0 / 4_294_967_296.0,
            };
            expected_requests_per_1000(false_hit_per_probe(fpr, unique_keys, list.key_width()))
                <= list.target_full_hash_requests_per_1000
        })
        .unwrap_or(FilterKind::BinaryFuse32),
    }
}

/// Parses every source, falling back to a source's last good content when
/// it failed or its parse collapsed; returns sorted, unique full hashes.
///
/// # Errors
///
/// [`Error::Source`] when a source failed and has no last good content.
pub fn collect_hashes(
    sources: Vec<LoadedSource>,
    now: u64,
    report: &mut ParseReport,
    statuses: &mut Vec<SourceStatus>,
) -> Result<Vec<FullHash>, Error> {
    let mut hashes = Vec::new();
    for source in sources {
        let options = FormatOptions {
            column: source.config.column.clone(),
            json_key: source.config.json_key.clone(),
        };
        let parse = |bytes: &[u8], out: &mut Vec<FullHash>| {
            let mut r = ParseReport::default();
            parse_source(bytes, source.config.format, &options, &mut r, |h| out.push(h));
            r
        };
        let label = source.config.label();
        let failure: String = match source.fetched {
            Fetched::Fresh { bytes, validators } => {
                let mut fresh = Vec::new();
                let r = parse(&bytes, &mut fresh);
                let entry_lines = r.accepted + r.rejected_total();
                // The content no longer reads as this format (a changed
                // layout, an error page in another markup): most lines are
                // rejected. A list that merely shrank is the gates' business.
                if entry_lines >= 10 && r.rejected_total() * 2 > entry_lines {
                    format!(
                        "parse collapsed: {} of {} entry lines rejected",
                        r.rejected_total(),
                        entry_lines
                    )
                } else {
                    if let Some(cache) = &source.cache {
                        let meta = CacheMeta {
                            validators,
                            fetched_at: now,
                            accepted: r.accepted,
                        };
                        if let Err(e) = cache.store(&bytes, &meta) {
                            tracing::warn!(source = %label, error = %e, "could not cache source content");
                        }
                    }
                    statuses.push(SourceStatus {
                        source: label,
                        state: "fresh".to_owned(),
                        error: None,
                        content_fetched_at: Some(now),
                        lines: r.lines,
                        accepted: r.accepted,
                        rejected: r.rejected_total(),
                    });
                    report.merge(&r);
                    hashes.extend(fresh);
                    continue;
                }
            }
            Fetched::NotModified => String::new(),
            Fetched::Failed(reason) => reason,
        };
        // Not modified, failed, or collapsed: use the last good content.
        let Some((bytes, meta)) = source.cache.as_ref().and_then(SourceCache::load) else {
            return Err(Error::Source(if failure.is_empty() {
                format!("{label}: server said not modified but no cached content exists")
            } else {
                format!("{label}: {failure}; no last good content to fall back to")
            }));
        };
        let r = parse(&bytes, &mut hashes);
        if failure.is_empty() {
            if let Some(cache) = &source.cache {
                let _ = cache.store_meta(&CacheMeta {
                    fetched_at: now,
                    ..meta.clone()
                });
            }
        } else {
            tracing::warn!(source = %label, reason = %failure, fetched_at = meta.fetched_at, "source failed; using its last good content");
        }
        statuses.push(SourceStatus {
            source: label,
            state: if failure.is_empty() {
                "not_modified"
            } else {
                "last_good"
            }
            .to_owned(),
            error: (!failure.is_empty()).then_some(failure),
            content_fetched_at: Some(meta.fetched_at),
            lines: r.lines,
            accepted: r.accepted,
            rejected: r.rejected_total(),
        });
        report.merge(&r);
    }
    hashes.sort_unstable();
    hashes.dedup();
    Ok(hashes)
}

/// Builds and signs a snapshot of `req.list` from its loaded sources.
///
/// The new version is `max(previous + 1, now)`, so versions keep increasing
/// even if the data directory is lost.
///
/// # Errors
///
/// [`Error::Source`] when a failed source has no fallback, [`Error::Build`]
/// when the filter cannot be built or encoded.
pub fn build_list(req: &BuildRequest<'_>, sources: Vec<LoadedSource>) -> Result<BuiltList, Error> {
    let started = Instant::now();
    let list = req.list;
    let mut parse = ParseReport::default();
    let mut statuses = Vec::new();
    let hashes = collect_hashes(sources, req.now, &mut parse, &mut statuses)?;
    let key_bits = list.key_width();
    let mut keys: Vec<u64> = hashes.iter().map(|h| key_bits.key_of(h)).collect();
    keys.sort_unstable(); // 32-bit keys come sorted already; 64-bit keys too, but be sure
    keys.dedup();
    let kind = filter_kind_for(list, keys.len() as u64);
    let filter = PrefixFilter::build_with(kind, &keys, list.bloom_bits_per_key)
        .map_err(|e| Error::Build(format!("list {}: {e}", list.name)))?;
    let version = req.previous.map_or(req.now, |p| req.now.max(p.version + 1));
    let measured_fpr = measure_fpr(&filter, &keys, key_bits, CANARY_PROBES, version);
    let request_bits = list
        .request_prefix_bits
        .unwrap_or_else(|| request_prefix_bits(hashes.len() as u64, list.min_anonymity));
    let params = SnapshotParams {
        list_name: list.name.clone(),
        version,
        created_at: req.now,
        expires_at: req.now + req.ttl_s,
        key_bits,
        request_prefix_bits: request_bits,
        full_hash_count: hashes.len() as u64,
        measured_fpr,
        zstd_level: 19,
    };
    let snapshot =
        encode(&params, &filter, req.key).map_err(|e| Error::Build(format!("list {}: {e}", list.name)))?;
    let n = keys.len() as u64;
    let theoretical_fpr = filter.theoretical_fpr();
    let anonymity_set = hashes.len() as f64 / 2f64.powi(i32::from(request_bits));
    let sizing = Sizing {
        entries: hashes.len() as u64,
        unique_keys: n,
        filter_kind: kind.to_string(),
        key_bits: key_bits.bits(),
        bits_per_key: if n == 0 {
            0.0
        } else {
            snapshot.len() as f64 * 8.0 / n as f64
        },
        snapshot_bytes: snapshot.len() as u64,
        theoretical_fpr,
        measured_fpr,
        prefix_collision_rate: n as f64 / 4_294_967_296.0,
        expected_full_hash_requests_per_1000: expected_requests_per_1000(false_hit_per_probe(
            theoretical_fpr,
            n,
            key_bits,
        )),
        request_prefix_bits: request_bits,
        anonymity_set,
        expected_response_bytes: anonymity_set * (RESPONSE_BYTES_PER_MATCH + list.name.len() as f64) + 60.0,
    };
    Ok(BuiltList {
        version,
        snapshot,
        hashes,
        report: BuildReport {
            parse,
            sources: statuses,
            sizing,
            duration: started.elapsed(),
        },
    })
}

/// Checks the publishing gates of `list` against a build. Returns the
/// refusal, naming the gate and the values, or `None` to publish.
pub fn check_gates(
    list: &ListConfig,
    previous: Option<&SnapshotHeader>,
    report: &BuildReport,
) -> Option<String> {
    let g = &list.gates;
    let s = &report.sizing;
    if s.entries < g.min_entries {
        return Some(format!(
            "gate min_entries: {} entries, fewer than {} ({} lines read, {} rejected)",
            s.entries,
            g.min_entries,
            report.parse.lines,
            report.parse.rejected_total()
        ));
    }
    if let Some(prev) = previous {
        let floor = prev.full_hash_count as f64 * (1.0 - g.max_shrink);
        if (s.entries as f64) < floor {
            return Some(format!(
                "gate max_shrink: {} entries, down from {} in version {} (more than {:.0}% smaller)",
                s.entries,
                prev.full_hash_count,
                prev.version,
                g.max_shrink * 100.0
            ));
        }
    }
    if s.theoretical_fpr > 0.0 && s.measured_fpr > g.max_fpr_ratio * s.theoretical_fpr {
        return Some(format!(
            "gate max_fpr_ratio: measured false-positive rate {:.3e} is over {} x the theoretical {:.3e}",
            s.measured_fpr, g.max_fpr_ratio, s.theoretical_fpr
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_prefix_length_keeps_the_anonymity_set() {
        assert_eq!(request_prefix_bits(813_641, 64), 12); // 813641/4096 = 198 ≥ 64; /65536 = 12
        assert_eq!(request_prefix_bits(90_000, 64), 8);
        assert_eq!(request_prefix_bits(500, 64), 8);
        assert_eq!(request_prefix_bits(1 << 30, 64), 24);
        assert_eq!(request_prefix_bits(1 << 40, 64), 32);
    }

    #[test]
    fn auto_picks_the_smallest_kind_under_target() {
        let mut list = ListConfig::new("x", vec![]);
        list.filter = FilterChoice::Auto(crate::config::AutoFilter::Auto);
        // BinaryFuse8: ~18 requests per 1,000 checks; over a target of 10.
        assert_eq!(filter_kind_for(&list, 100_000), FilterKind::BinaryFuse16);
        list.target_full_hash_requests_per_1000 = 20.0;
        assert_eq!(filter_kind_for(&list, 100_000), FilterKind::BinaryFuse8);
        let r8 = expected_requests_per_1000(false_hit_per_probe(1.0 / 256.0, 100_000, KeyBits::Bits32));
        assert!((17.0..19.0).contains(&r8), "{r8}");
    }
}
