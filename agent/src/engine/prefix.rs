//! Which hash prefixes a full-hash request carries, and what of the answer
//! to believe.
//!
//! Privacy rules (after Safe Browsing v4 "Full hashes" and v5
//! `hashes:search`):
//!
//! * A full hash that hit a local filter is sent as a [`RequestPrefix`] of
//!   the length the list advertises in its signed header
//!   (`request_prefix_bits`, 8..=32 bits): a shorter prefix is shared by more
//!   expressions, so the publisher learns less. When several lists hit the
//!   same full hash, the shortest of their lengths is sent.
//! * Every request also carries `noise` random prefixes, with lengths drawn
//!   from the real ones so they look alike, and the whole set is shuffled:
//!   the publisher cannot tell which prefixes the client cares about.
//! * Never the URL, never an expression, never a full hash.
//! * In the answer, a full hash that does not start with the requested
//!   prefix it is listed under is ignored: it cannot be about anything the
//!   agent asked.
//!
//! A request holds at most [`MAX_PREFIXES_PER_REQUEST`] prefixes (the
//! publisher's limit); [`plan_requests`] splits larger sets.

use std::collections::{BTreeSet, HashMap};

use blocksieve_format::FullHash;
pub use blocksieve_format::RequestPrefix;
use blocksieve_format::api::FullHashMatch;
use rand::Rng;
use rand::seq::SliceRandom;

use crate::engine::cache::ListedHashes;

pub use blocksieve_format::api::MAX_PREFIXES_PER_REQUEST;

/// The first `bits` bits of `hash`; `None` unless `bits` is 8..=32 and a
/// multiple of 4 ([`RequestPrefix::new`], the protocol's one rule).
pub fn request_prefix(hash: &FullHash, bits: u8) -> Option<RequestPrefix> {
    RequestPrefix::new(hash, bits)
}

/// A uniformly random prefix of `bits` bits (a noise prefix); `None` for
/// an invalid length. Draws one `u32` from `rng`.
pub fn random_prefix(bits: u8, rng: &mut impl Rng) -> Option<RequestPrefix> {
    if !blocksieve_format::api::is_valid_request_prefix_bits(bits) {
        return None;
    }
    let mut hash = [0u8; FullHash::LEN];
    hash[..4].copy_from_slice(&rng.r#gen::<u32>().to_be_bytes());
    request_prefix(&FullHash(hash), bits)
}

/// One planned full-hash request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRequest {
    /// The prefixes to send, in this (shuffled) order: real and noise.
    pub prefixes: Vec<RequestPrefix>,
    /// The real prefixes among them, sorted: the ones to read from the
    /// answer and cache.
    pub real: Vec<RequestPrefix>,
}

/// Plans the full-hash requests for the `real` prefixes (duplicates are
/// sent once): chunks of at most [`MAX_PREFIXES_PER_REQUEST`] prefixes,
/// each with `noise` random prefixes added and shuffled. No request for no
/// real prefix. Noise never repeats a real prefix or another noise prefix
/// of the same request; when the prefix space is too small for that (many
/// 8-bit prefixes), fewer noise prefixes are sent.
pub fn plan_requests(real: &[RequestPrefix], noise: usize, rng: &mut impl Rng) -> Vec<PlannedRequest> {
    let unique: Vec<RequestPrefix> = real
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let noise = noise.min(MAX_PREFIXES_PER_REQUEST - 1);
    let per_request = MAX_PREFIXES_PER_REQUEST - noise;
    unique
        .chunks(per_request)
        .map(|chunk| {
            let mut taken: BTreeSet<RequestPrefix> = chunk.iter().copied().collect();
            let mut prefixes = chunk.to_vec();
            for _ in 0..noise {
                // A few tries per noise prefix: only a crowded 8-bit space
                // can make them all collide.
                for _ in 0..16 {
                    let bits = chunk
                        .choose(rng)
                        .map_or(blocksieve_format::api::MAX_REQUEST_PREFIX_BITS, |p| p.bits());
                    if let Some(p) = random_prefix(bits, rng)
                        && taken.insert(p)
                    {
                        prefixes.push(p);
                        break;
                    }
                }
            }
            prefixes.shuffle(rng);
            PlannedRequest {
                prefixes,
                real: chunk.to_vec(),
            }
        })
        .collect()
}

/// The useful part of a full-hash answer for the real prefixes of one
/// request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answers {
    /// For each real prefix the publisher answered: the full hashes listed
    /// under it on subscribed lists (empty for a miss), deduplicated.
    pub by_prefix: HashMap<RequestPrefix, ListedHashes>,
    /// Real prefixes the answer says nothing about: they stay unverified
    /// and uncached.
    pub missing: Vec<RequestPrefix>,
    /// Full hashes ignored: not 64 hex digits, or not starting with the
    /// prefix they were listed under.
    pub ignored: usize,
}

/// Sorts a full-hash answer (`(prefix, matches)` per result, as in
/// `{"results": [{"prefix", "matches"}]}`) by the `real` prefixes of the
/// request. Results for prefixes that were not asked for (noise, or
/// anything else) are dropped; so are matches on lists `subscribed`
/// rejects, and full hashes that do not start with their result's prefix.
pub fn sort_answers<'a>(
    real: &[RequestPrefix],
    results: impl IntoIterator<Item = (&'a str, &'a [FullHashMatch])>,
    subscribed: impl Fn(&str) -> bool,
) -> Answers {
    let asked: BTreeSet<RequestPrefix> = real.iter().copied().collect();
    let mut buckets: HashMap<RequestPrefix, Vec<(&str, FullHash)>> = HashMap::new();
    let mut ignored = 0;
    for (text, matches) in results {
        let Ok(prefix) = text.parse::<RequestPrefix>() else {
            continue;
        };
        if !asked.contains(&prefix) {
            continue;
        }
        let bucket = buckets.entry(prefix).or_default();
        for m in matches {
            match FullHash::from_hex(&m.full_hash) {
                Ok(hash) if prefix.matches(&hash) => {
                    if subscribed(&m.list) {
                        bucket.push((m.list.as_str(), hash));
                    }
                }
                _ => ignored += 1,
            }
        }
    }
    let missing = asked.into_iter().filter(|p| !buckets.contains_key(p)).collect();
    Answers {
        by_prefix: buckets
            .into_iter()
            .map(|(prefix, bucket)| (prefix, ListedHashes::new(bucket)))
            .collect(),
        missing,
        ignored,
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn rp(hash: &FullHash, bits: u8) -> RequestPrefix {
        match request_prefix(hash, bits) {
            Some(p) => p,
            None => panic!("bits {bits}"),
        }
    }

    #[test]
    fn prefixes_print_and_parse_as_bits_over_four_hex_digits() {
        let h = FullHash::of(b"foo.com/"); // af30010e...
        assert_eq!(rp(&h, 32).to_string(), "af30010e");
        assert_eq!(rp(&h, 16).to_string(), "af30");
        assert_eq!(rp(&h, 8).to_string(), "af");
        assert_eq!(rp(&h, 12).to_string(), "af3");
        for bits in [8, 12, 16, 20, 24, 28, 32] {
            let p = rp(&h, bits);
            assert_eq!(p.to_string().parse::<RequestPrefix>(), Ok(p));
            assert!(p.matches(&h));
        }
        assert!(!rp(&FullHash::of(b"bar.com/"), 16).matches(&h));
        for bad in ["", "a", "AF30", "af30010e0", "zz", "af 3"] {
            assert!(bad.parse::<RequestPrefix>().is_err(), "{bad:?}");
        }
        for bits in [0, 4, 6, 33, 36] {
            assert_eq!(request_prefix(&h, bits), None);
        }
    }

    #[test]
    fn prefixes_are_the_ones_the_publisher_parses() {
        let h = FullHash::of(b"foo.com/");
        for bits in [8, 12, 16, 20, 24, 28, 32] {
            let sent = rp(&h, bits);
            let parsed: blocksieve_format::RequestPrefix = match sent.to_string().parse() {
                Ok(p) => p,
                Err(e) => panic!("{sent}: {e}"),
            };
            assert_eq!(parsed, sent);
            assert_eq!(blocksieve_format::RequestPrefix::of(&h, bits), sent);
        }
    }

    #[test]
    fn noise_prefixes_take_one_u32_from_the_rng() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut same = StdRng::seed_from_u64(4);
        for bits in [8, 12, 16, 20, 24, 28, 32] {
            let p = random_prefix(bits, &mut rng);
            let mut h = [0u8; 32];
            h[..4].copy_from_slice(&same.r#gen::<u32>().to_be_bytes());
            assert_eq!(p, Some(rp(&FullHash(h), bits)));
        }
        for bits in [0, 4, 6, 33, 36] {
            assert_eq!(random_prefix(bits, &mut rng), None);
        }
    }

    #[test]
    fn requests_carry_real_and_distinct_noise_shuffled() {
        let mut rng = StdRng::seed_from_u64(1);
        let real = [
            rp(&FullHash::of(b"a/"), 32),
            rp(&FullHash::of(b"b/"), 16),
            rp(&FullHash::of(b"a/"), 32),
        ];
        let mut first_positions = BTreeSet::new();
        for _ in 0..50 {
            let plans = plan_requests(&real, 4, &mut rng);
            assert_eq!(plans.len(), 1);
            let plan = &plans[0];
            assert_eq!(plan.real.len(), 2);
            assert_eq!(plan.prefixes.len(), 6);
            let distinct: BTreeSet<_> = plan.prefixes.iter().collect();
            assert_eq!(distinct.len(), 6);
            for r in &plan.real {
                assert!(plan.prefixes.contains(r));
            }
            // Noise looks like the real prefixes: 16 or 32 bits.
            assert!(plan.prefixes.iter().all(|p| p.bits() == 16 || p.bits() == 32));
            let position = plan.prefixes.iter().position(|p| *p == real[0]);
            first_positions.insert(position);
        }
        assert!(
            first_positions.len() > 3,
            "real prefixes are shuffled: {first_positions:?}"
        );
        assert!(plan_requests(&[], 4, &mut rng).is_empty());
    }

    #[test]
    fn large_sets_are_split_into_chunks_of_at_most_a_thousand() {
        let mut rng = StdRng::seed_from_u64(2);
        let real: Vec<RequestPrefix> = (0..2_500u32)
            .map(|i| rp(&FullHash::of(&i.to_be_bytes()), 32))
            .collect();
        let plans = plan_requests(&real, 4, &mut rng);
        assert_eq!(plans.len(), 3);
        assert!(plans.iter().all(|p| p.prefixes.len() <= MAX_PREFIXES_PER_REQUEST));
        assert_eq!(plans.iter().map(|p| p.real.len()).sum::<usize>(), 2_500);
        assert!(plans.iter().all(|p| p.prefixes.len() == p.real.len() + 4));
    }

    #[test]
    fn crowded_eight_bit_space_sends_fewer_noise_prefixes() {
        let mut rng = StdRng::seed_from_u64(3);
        let real: Vec<RequestPrefix> = (0..=255u8)
            .map(|b| {
                let mut h = [0u8; 32];
                h[0] = b;
                rp(&FullHash(h), 8)
            })
            .collect();
        let plans = plan_requests(&real, 4, &mut rng);
        assert_eq!(plans[0].prefixes.len(), 256);
    }

    #[test]
    fn answers_keep_only_asked_prefixes_matching_hashes_and_subscribed_lists() {
        let listed = FullHash::of(b"evil.example/");
        let p = rp(&listed, 16);
        let noise = rp(&FullHash::of(b"noise/"), 16);
        let unasked = rp(&FullHash::of(b"other/"), 16);
        let foreign = FullHash::of(b"elsewhere/");
        let m = |h: &FullHash, list: &str| FullHashMatch {
            full_hash: h.to_string(),
            list: list.into(),
        };
        let p_matches = vec![
            m(&listed, "malware"),
            m(&listed, "malware"),
            m(&listed, "unsubscribed"),
            m(&foreign, "malware"),
            FullHashMatch {
                full_hash: "zz".into(),
                list: "malware".into(),
            },
        ];
        let other = vec![m(&FullHash::of(b"other/"), "malware")];
        let p_text = p.to_string();
        let unasked_text = unasked.to_string();
        let real = vec![rp(&FullHash::of(b"missing/"), 32), p];
        let answers = sort_answers(
            &real,
            [
                (p_text.as_str(), p_matches.as_slice()),
                (unasked_text.as_str(), other.as_slice()),
                ("not hex", other.as_slice()),
            ],
            |l| l == "malware",
        );
        assert_eq!(
            answers.by_prefix.get(&p),
            Some(&ListedHashes::new([("malware", listed)]))
        );
        assert!(!answers.by_prefix.contains_key(&unasked));
        assert!(!answers.by_prefix.contains_key(&noise));
        assert_eq!(answers.missing, vec![rp(&FullHash::of(b"missing/"), 32)]);
        assert_eq!(answers.ignored, 2);
    }
}
