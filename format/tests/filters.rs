//! Round trips over random key sets for every filter kind: no false
//! negatives, and a false-positive rate within the kind's documented bound,
//! measured on 100,000 keys absent by construction. Seeded: a failure
//! reproduces exactly.

#![allow(clippy::unwrap_used)]

use blocksieve_format::{
    DecodeLimits, FilterKind, KeyBits, PrefixFilter, SigningKey, SnapshotParams, decode, encode,
};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

const PROBES: u64 = 100_000;

fn random_keys(rng: &mut StdRng, n: usize, bits: KeyBits) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..n)
        .map(|_| match bits {
            KeyBits::Bits32 => u64::from(rng.r#gen::<u32>()),
            KeyBits::Bits64 => rng.r#gen(),
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Upper bound on false hits among `PROBES` probes: mean + 6 standard
/// deviations + 3, for a binomial with rate `fpr`.
fn max_false_hits(fpr: f64) -> u64 {
    let mean = PROBES as f64 * fpr;
    (mean + 6.0 * mean.sqrt() + 3.0) as u64
}

#[test]
fn every_kind_round_trips_with_no_false_negatives_and_bounded_fpr() {
    let key = SigningKey::from_secret_bytes([1u8; 32]);
    let trusted = [key.public_key().clone()];
    let mut rng = StdRng::seed_from_u64(0x5eed_f11e);
    for kind in FilterKind::ALL {
        for (n, bits) in [
            (1, KeyBits::Bits32),
            (97, KeyBits::Bits32),
            (5_000, KeyBits::Bits64),
            (120_000, KeyBits::Bits32),
        ] {
            let keys = random_keys(&mut rng, n, bits);
            let filter = PrefixFilter::build(kind, &keys).unwrap();
            let params = SnapshotParams {
                list_name: "random".to_owned(),
                version: 1,
                created_at: 0,
                expires_at: 1,
                key_bits: bits,
                request_prefix_bits: 32,
                full_hash_count: keys.len() as u64,
                measured_fpr: 0.0,
                zstd_level: 1,
            };
            let bytes = encode(&params, &filter, &key).unwrap();
            let decoded = decode(&bytes, &trusted, &DecodeLimits::default(), 0).unwrap();
            let f = decoded.filter();
            assert!(
                keys.iter().all(|&k| f.contains(k)),
                "{kind} n={n}: false negative"
            );

            let mut hits = 0;
            let mut probed = 0;
            while probed < PROBES {
                let k = match bits {
                    KeyBits::Bits32 => u64::from(rng.r#gen::<u32>()),
                    KeyBits::Bits64 => rng.r#gen(),
                };
                if keys.binary_search(&k).is_ok() {
                    continue;
                }
                probed += 1;
                hits += u64::from(f.contains(k));
            }
            let theory = decoded.header().theoretical_fpr;
            assert!(
                hits <= max_false_hits(theory),
                "{kind} n={n}: {hits} false hits in {PROBES} probes, theory {theory:e}"
            );
            // For the 8-bit kinds the rate must also not be implausibly low
            // (a filter answering "no" to everything would pass the bound).
            if theory > 1e-3 && n > 1000 {
                assert!(
                    hits as f64 >= PROBES as f64 * theory / 2.0,
                    "{kind} n={n}: only {hits} false hits"
                );
            }
        }
    }
}

#[test]
fn bloom_bits_per_key_sets_size_and_rate() {
    let mut rng = StdRng::seed_from_u64(42);
    let keys = random_keys(&mut rng, 50_000, KeyBits::Bits64);
    let small = PrefixFilter::build_with(FilterKind::Bloom, &keys, 8).unwrap();
    let large = PrefixFilter::build_with(FilterKind::Bloom, &keys, 16).unwrap();
    assert!(
        (small.bits_per_key() - 8.0).abs() < 0.1,
        "{}",
        small.bits_per_key()
    );
    assert!(
        (large.bits_per_key() - 16.0).abs() < 0.1,
        "{}",
        large.bits_per_key()
    );
    assert!(large.theoretical_fpr() < small.theoretical_fpr() / 10.0);
    assert!(PrefixFilter::build_with(FilterKind::Bloom, &keys, 0).is_err());
    assert!(PrefixFilter::build_with(FilterKind::Bloom, &keys, 65).is_err());
}
