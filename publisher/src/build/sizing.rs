//! Sizing a list's filter and its full-hash protocol: the canary's measured
//! false-positive rate, the filter kind, the request prefix length.

use blocksieve_format::{FilterKind, KeyBits, PrefixFilter};
use rand::{Rng as _, SeedableRng as _};
use rayon::prelude::*;

use crate::config::{FilterChoice, ListConfig};

/// How many keys absent by construction are probed to measure a filter's
/// false-positive rate (the canary).
pub const CANARY_PROBES: u32 = 100_000;

/// Mean number of expressions per URL check, measured with this
/// canonicalizer on the 5,715 URLs of `legit-urls.txt` (Hannousse &
/// Yahiouche's legitimate URLs): 26,327 expressions / 5,715 URLs.
pub const MEAN_EXPRESSIONS_PER_URL: f64 = 4.607;

/// Approximate JSON bytes per full hash in a full-hash response
/// (`{"full_hash":"<64 hex>","list":"<name>"},`), excluding the name.
pub(super) const RESPONSE_BYTES_PER_MATCH: f64 = 35.0 + 64.0;

/// The fraction of `probes` random keys, absent from `keys` by construction,
/// that `filter` reports present. Seeded: the same inputs give the same rate.
pub fn measure_fpr(filter: &PrefixFilter, keys: &[u64], key_bits: KeyBits, probes: u32, seed: u64) -> f64 {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut hits = 0u64;
    let mut done = 0u32;
    // The keys are drawn in order on this thread; whether each is absent
    // and a hit is checked on every core, and the first `probes` absent
    // ones counted: the same probes and rate as one loop.
    let mut candidates = Vec::new();
    while done < probes {
        candidates.clear();
        candidates.extend((done..probes).map(|_| match key_bits {
            KeyBits::Bits32 => u64::from(rng.r#gen::<u32>()),
            KeyBits::Bits64 => rng.r#gen::<u64>(),
        }));
        let probed: Vec<Option<bool>> = candidates
            .par_iter()
            .map(|&key| keys.binary_search(&key).is_err().then(|| filter.contains(key)))
            .collect();
        for hit in probed.into_iter().flatten() {
            done += 1;
            hits += u64::from(hit);
        }
    }
    hits as f64 / f64::from(probes)
}

/// How unlikely, for a filter that works as its theory says, the canary's
/// count of false positives must be before the `max_fpr_ratio` gate calls
/// the filter broken: one build in a million refused by chance.
pub(super) const CANARY_SIGNIFICANCE: f64 = 1e-6;

/// Whether a canary that measured `measured` over [`CANARY_PROBES`] probes
/// shows a false-positive rate over `ratio` × `theoretical`, beyond what
/// chance explains: the count is over the bound, and a filter at its
/// theoretical rate would count as many or more with probability under
/// [`CANARY_SIGNIFICANCE`] (Poisson tail).
///
/// The count alone is not enough. For a `binary_fuse16` filter the canary
/// expects 1.5 false positives (100,000 / 65,536), and counts 4 or more,
/// "over 2×", in 7 % of builds of a perfectly good filter; a
/// `binary_fuse8` filter expects 391, where twice as many is never chance.
pub(super) fn fpr_over_bound(measured: f64, theoretical: f64, ratio: f64) -> bool {
    let probes = f64::from(CANARY_PROBES);
    let hits = (measured * probes).round();
    let expected = theoretical * probes;
    measured > ratio * theoretical && poisson_tail(expected, hits) < CANARY_SIGNIFICANCE
}

/// The largest false-positive rate the canary may measure for a filter
/// of theoretical rate `theoretical` without the gate refusing it (at
/// [`fpr_over_bound`]'s `ratio`): what the status page and the alert rules
/// compare the measured rate with.
pub(crate) fn fpr_gate_bound(theoretical: f64, ratio: f64) -> f64 {
    // Outside a probability's range no count is "beyond chance": the loop
    // below counts hits one at a time from `ratio × theoretical` and must
    // start in [0, probes].
    if !(0.0..=1.0).contains(&theoretical) || !ratio.is_finite() || ratio < 0.0 {
        return f64::NAN;
    }
    let probes = f64::from(CANARY_PROBES);
    let per = |hits: f64| hits / probes;
    let mut hits = (ratio * theoretical * probes).floor().min(probes);
    while hits < probes && !fpr_over_bound(per(hits + 1.0), theoretical, ratio) {
        hits += 1.0;
    }
    per(hits)
}

/// P(X ≥ `k`) for X ~ Poisson(`lambda`), summed in log space (no
/// overflow for counts up to the canary's 100,000 probes).
pub(super) fn poisson_tail(lambda: f64, k: f64) -> f64 {
    if k <= 0.0 {
        return 1.0;
    }
    if lambda <= 0.0 {
        return 0.0;
    }
    let k = k as u64;
    // ln P(X = k) = -λ + k ln λ - ln k!
    let ln_factorial: f64 = (2..=k).map(|i| (i as f64).ln()).sum();
    let mut ln_term = -lambda + k as f64 * lambda.ln() - ln_factorial;
    let mut tail = 0.0;
    for j in k.. {
        let term = ln_term.exp();
        tail += term;
        // Past the mode the terms fall; stop once they no longer count.
        if j as f64 > lambda && term <= tail * 1e-17 {
            break;
        }
        ln_term += lambda.ln() - ((j + 1) as f64).ln();
        if j > k + 10_000_000 {
            break;
        }
    }
    tail.min(1.0)
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

/// The request prefix length a list of `full_hashes` advertises after a
/// version that advertised `previous`: `previous` while its expected bucket
/// stays between `min_anonymity` and 32 × that (the most the configuration
/// lets `max_bucket_entries` fall to, so the full-hash routes still answer
/// it; agents still on the version before a lengthening ask at the old
/// length, which the routes answer up to twice `max_bucket_entries`), else
/// [`request_prefix_bits`]. A change of length ends the delta
/// chain and sends every agent a whole snapshot (`generations/deltas.rs`),
/// so a list hovering around a length's threshold must not change length at
/// each crossing: a length taken at a threshold is kept until the list
/// doubles past it (then 4 bits longer) or falls back under it.
pub fn request_prefix_bits_after(previous: Option<u8>, full_hashes: u64, min_anonymity: u64) -> u8 {
    if let Some(bits) = previous.filter(|&b| blocksieve_format::api::is_valid_request_prefix_bits(b)) {
        let bucket = full_hashes as f64 / 2f64.powi(i32::from(bits));
        let anonymity = min_anonymity as f64;
        if bucket >= anonymity && bucket <= 32.0 * anonymity {
            return bits;
        }
    }
    request_prefix_bits(full_hashes, min_anonymity)
}

/// The request prefix length to advertise: the longest of 8, 12, …, 32 bits
/// whose expected bucket still holds `min_anonymity` listed full hashes (8
/// when even that is too few).
pub fn request_prefix_bits(full_hashes: u64, min_anonymity: u64) -> u8 {
    use blocksieve_format::api::{MAX_REQUEST_PREFIX_BITS, MIN_REQUEST_PREFIX_BITS};
    (MIN_REQUEST_PREFIX_BITS..=MAX_REQUEST_PREFIX_BITS)
        .rev()
        .step_by(4)
        .find(|&bits| full_hashes as f64 / 2f64.powi(i32::from(bits)) >= min_anonymity as f64)
        .unwrap_or(MIN_REQUEST_PREFIX_BITS)
}

pub(super) fn filter_kind_for(list: &ListConfig, unique_keys: u64) -> FilterKind {
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

/// What a list's sizing means for agents and the server, in the terms the
/// configuration uses: per URL check, not per probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Advice {
    /// Expected false hits per check of an unlisted URL: each of its
    /// [`MEAN_EXPRESSIONS_PER_URL`] expressions hits by chance with the
    /// per-probe rate ([`false_hit_per_probe`]).
    pub false_hits_per_check: f64,
    /// Expected full-hash requests per 1,000 checks of unlisted URLs.
    pub requests_per_1000: f64,
    /// Expected full-hash requests per second from the fleet.
    pub requests_per_second: f64,
    /// The URL checks per second the fleet makes (the assumption behind
    /// `requests_per_second`).
    pub fleet_checks_per_second: f64,
    /// The unique hash prefixes at which the filter, at its theoretical
    /// rate, would exceed the target full-hash requests per 1,000 checks
    /// ([`capacity`]; `None`: never).
    pub capacity: Option<u64>,
    /// The unique prefixes now ÷ `capacity` (0 when unbounded).
    pub fill_ratio: f64,
}

/// The advice for a filter of `unique_keys` keys of width `key_bits` with
/// false-positive rate `fpr` per probe, a list whose target is
/// `target_per_1000` full-hash requests per 1,000 checks, and a fleet that
/// checks `fleet_checks_per_second` URLs a second.
pub fn advice(
    fpr: f64,
    unique_keys: u64,
    key_bits: KeyBits,
    target_per_1000: f64,
    fleet_checks_per_second: f64,
) -> Advice {
    let per_probe = false_hit_per_probe(fpr, unique_keys, key_bits);
    let requests_per_1000 = expected_requests_per_1000(per_probe);
    let capacity = capacity(fpr, key_bits, target_per_1000);
    Advice {
        false_hits_per_check: MEAN_EXPRESSIONS_PER_URL * per_probe,
        requests_per_1000,
        requests_per_second: requests_per_1000 * fleet_checks_per_second / 1000.0,
        fleet_checks_per_second,
        capacity,
        fill_ratio: fill_ratio(unique_keys, capacity),
    }
}

/// `unique_keys` ÷ `capacity`: 0 when unbounded, infinite over a capacity
/// of 0 (a filter that answers "yes" to everything).
pub fn fill_ratio(unique_keys: u64, capacity: Option<u64>) -> f64 {
    match capacity {
        None => 0.0,
        Some(0) => f64::INFINITY,
        Some(c) => unique_keys as f64 / c as f64,
    }
}

/// The most unique hash prefixes a filter with false-positive rate `fpr`
/// per probe over `key_bits` keys holds while the expected full-hash
/// requests per 1,000 checks ([`expected_requests_per_1000`]) stay at or
/// under `target_per_1000`: the inverse of [`false_hit_per_probe`] at the
/// per-probe rate the target allows. `None` when the size never matters
/// (64-bit keys share no prefix by chance).
///
/// A filter that exceeds the target at any size (a `binary_fuse8` chosen
/// by name, 17.9 requests per 1,000 checks against the default 10: the
/// target steers only `filter = "auto"`) is sized against its own rate
/// instead: its capacity is where chance 32-bit prefix collisions add as
/// many false hits as the filter, doubling them (16.8M for
/// `binary_fuse8`). Beyond it the false hits grow with the list, not the
/// filter.
pub fn capacity(fpr: f64, key_bits: KeyBits, target_per_1000: f64) -> Option<u64> {
    let allowed = (target_per_1000 / 1000.0).clamp(0.0, 1.0);
    // 1 − (1 − p)^m = allowed  ⇔  p = 1 − (1 − allowed)^(1/m).
    let per_probe = 1.0 - (1.0 - allowed).powf(1.0 / MEAN_EXPRESSIONS_PER_URL);
    // collision + (1 − collision) × fpr = p, collision = n / 2^32; past
    // the target, p = 2 × fpr.
    let per_probe = if fpr >= per_probe {
        (2.0 * fpr).min(1.0)
    } else {
        per_probe
    };
    match key_bits {
        KeyBits::Bits64 => None,
        KeyBits::Bits32 if fpr >= 1.0 => Some(0),
        KeyBits::Bits32 => Some(((per_probe - fpr) / (1.0 - fpr) * 4_294_967_296.0).floor() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_where_the_target_is_reached() {
        // Target 10 per 1,000 checks: p = 1 − 0.99^(1/4.607) = 0.00217916
        // per probe. binary_fuse8 (1/256) misses it at any size, so it
        // is sized against twice its own rate: 2^32 × (1/256) / (255/256)
        // = 2^32 / 255 = 16,843,009;
        // binary_fuse16: 2^32 × (p − 2^-16) / (1 − 2^-16) = 9,294,018;
        // binary_fuse32: 9,359,411; 64-bit keys: unbounded.
        assert_eq!(capacity(1.0 / 256.0, KeyBits::Bits32, 10.0), Some(16_843_009));
        let doubled = false_hit_per_probe(1.0 / 256.0, 16_843_009, KeyBits::Bits32);
        assert!((doubled * 256.0 - 2.0).abs() < 1e-6, "{doubled}");
        assert_eq!(capacity(1.0 / 65_536.0, KeyBits::Bits32, 10.0), Some(9_294_018));
        assert_eq!(
            capacity(1.0 / 4_294_967_296.0, KeyBits::Bits32, 10.0),
            Some(9_359_411)
        );
        assert_eq!(capacity(1.0 / 65_536.0, KeyBits::Bits64, 10.0), None);
        assert_eq!(capacity(1.0 / 256.0, KeyBits::Bits64, 10.0), None);
        assert_eq!(capacity(1.0, KeyBits::Bits32, 10.0), Some(0));
        // At the capacity the requests are the target, just under.
        let at = expected_requests_per_1000(false_hit_per_probe(1.0 / 65_536.0, 9_294_018, KeyBits::Bits32));
        assert!((9.999..=10.0).contains(&at), "{at}");
    }

    #[test]
    fn advice_is_per_check_and_per_second() {
        // 1,000,000 keys in binary_fuse16: per probe 1e6/2^32 + (1 −
        // 1e6/2^32)/65,536 = 2.48086e-4; per check 4.607 × that = 1.14293e-3;
        // 1,000 × (1 − (1 − 2.48086e-4)^4.607) = 1.14242 requests per 1,000
        // checks, so 11.4242 a second at 10,000 checks a second.
        let a = advice(1.0 / 65_536.0, 1_000_000, KeyBits::Bits32, 10.0, 10_000.0);
        assert!((a.false_hits_per_check - 1.142_93e-3).abs() < 1e-8, "{a:?}");
        assert!((a.requests_per_1000 - 1.142_42).abs() < 1e-5, "{a:?}");
        assert!((a.requests_per_second - 11.424_2).abs() < 1e-4, "{a:?}");
        assert_eq!(a.capacity, Some(9_294_018));
        assert!((a.fill_ratio - 1_000_000.0 / 9_294_018.0).abs() < 1e-12);
        assert_eq!(fill_ratio(5, None), 0.0);
        assert_eq!(fill_ratio(5, Some(0)), f64::INFINITY);
    }
}
