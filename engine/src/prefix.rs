//! Which hash prefixes a full-hash request carries, and what of the answer
//! to believe.
//!
//! Privacy rules (after Safe Browsing v4 "Full hashes" and v5
//! `hashes:search`):
//!
//! * A full hash that hit a local filter is sent as a [`RequestPrefix`] of
//!   the length the lists advertise in their signed headers
//!   (`request_prefix_bits`, 8..=32 bits: the longest whose bucket still
//!   holds the list's `min_anonymity` listed full hashes, so the publisher
//!   cannot tell which of them the client asks about; a list too small for
//!   that even at 8 bits is asked at 8 bits, its buckets smaller). With several
//!   subscribed lists, the longest of their lengths is sent, whichever list
//!   hit ([`LocalLookup::request_prefix_of`]): the answer must hold every
//!   list's bucket, and under a shorter prefix than it advertises a large
//!   list's bucket can exceed what the publisher serves at once.
//! * Every request also carries `noise` prefixes, with lengths drawn from
//!   the real ones so they look alike, and the whole set is shuffled: the
//!   publisher cannot tell which prefixes the client cares about. Each
//!   real prefix's noise is its own and the same every time the client
//!   asks it alone ([`NoiseKey`]): drawn anew for each request, a prefix
//!   asked twice (its cached answer expired, a retry, the page visited
//!   again) would be the one both requests share. Asked again at a longer
//!   length (the list grew), its noise extends the noise it had before:
//!   else it would be the one prefix extending one asked before. A request
//!   for several real prefixes (a batch check's) shares its `noise` among
//!   them, the first companions of each in turn: with more real prefixes
//!   than that, some carry none, and a later request for one of them alone
//!   shows it.
//! * Never the URL, never an expression, never a full hash.
//! * In the answer, a full hash that does not start with the requested
//!   prefix it is listed under is ignored: it cannot be about anything the
//!   agent asked.
//!
//! An answer comes in binary or JSON; both are read into one compact form,
//! a [`SearchAnswer`] (32 bytes and a list index per full hash, each list
//! named once), which [`sort_answers`] sorts into the cached
//! [`ListedHashes`].
//!
//! A request holds at most [`MAX_PREFIXES_PER_REQUEST`] prefixes (the
//! publisher's limit); [`plan_requests`] splits larger sets. A request may
//! also be answered by the immutable buckets of the snapshot versions held,
//! one per list and prefix, which [`merge_buckets`] puts together into the
//! answer a search would give.
//!
//! [`LocalLookup::request_prefix_of`]: crate::lookup::LocalLookup::request_prefix_of

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use blocksieve_format::FullHash;
pub use blocksieve_format::RequestPrefix;
use blocksieve_format::api::{
    AnswerError, FullHashSearchResponse, IndexedAnswer, IndexedFullHash, IndexedPrefixAnswer,
    MAX_ANSWER_LISTS, MAX_ANSWER_MATCHES,
};
use rand::Rng;
use rand::seq::SliceRandom;

use crate::cache::ListedHashes;

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

/// A client's secret for its noise prefixes: each real prefix's noise is
/// derived from it and the prefix (SHA-256, [`NoiseKey::companion`]), so a
/// prefix asked again carries the same noise, which the publisher cannot
/// tell from real prefixes without the key, and another client's noise
/// for the same prefix differs. Drawn once per agent or session, from its
/// random generator, and never stored: a restart draws another. The
/// trade-off (as in Firefox's gethash noise, kept the same for repeated
/// lookups so that it cannot be averaged out): within one key's life two
/// requests for a prefix are alike, so a publisher that sees them from
/// two addresses can tell they came from one client; across restarts
/// they are not linked by their noise, and a prefix asked before and after
/// one is again the one both requests share.
#[derive(Clone, PartialEq, Eq)]
pub struct NoiseKey([u8; 32]);

impl std::fmt::Debug for NoiseKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NoiseKey(..)")
    }
}

impl NoiseKey {
    /// A new key from `rng` (a cryptographically secure one: the noise is
    /// only as unpredictable as the key).
    pub fn new(rng: &mut impl Rng) -> Self {
        Self(rng.r#gen())
    }

    /// The `n`th noise prefix of `real` (its `attempt`th draw, for one
    /// that collided), built a length at a time: its first 8 bits are the
    /// first 8 of SHA-256 over a context string, the key, the length 8,
    /// `real`'s first 8 bits and `n`; each next 4 bits, up to
    /// `real.bits()`, are 4 bits of the same over that length and `real`'s
    /// bits up to it. Only the last ones drawn depend on `attempt`. So the
    /// companion's first `b` bits are the first companion of `real`'s first
    /// `b` bits: a prefix asked again at a longer length (its list's
    /// request prefix length grew; a check refused as `prefix_too_short`
    /// asks again at once) carries noise that extends the noise it was
    /// asked with before. Drawn anew at each length, the real prefix was
    /// the one of the second request that extended a prefix of the first.
    pub fn companion(&self, real: RequestPrefix, n: u32, attempt: u32) -> RequestPrefix {
        let value = real.range32().0;
        let mut noise = 0u32;
        let mut known = 0u32;
        let mut bits = blocksieve_format::api::MIN_REQUEST_PREFIX_BITS;
        while bits <= real.bits() {
            let mask = if bits >= 32 { u32::MAX } else { !(u32::MAX >> bits) };
            let mut input = [0u8; 24 + 32 + 1 + 4 + 4 + 4];
            input[..24].copy_from_slice(b"blocksieve noise prefix\0");
            input[24..56].copy_from_slice(&self.0);
            input[56] = bits;
            input[57..61].copy_from_slice(&(value & mask).to_be_bytes());
            input[61..65].copy_from_slice(&n.to_be_bytes());
            let last = bits == real.bits();
            input[65..].copy_from_slice(&(if last { attempt } else { 0 }).to_be_bytes());
            // The bits this length adds, drawn at this length.
            noise |= FullHash::of(&input).prefix().0 & mask & !known;
            known = mask;
            bits += 4;
        }
        let mut hash = [0u8; FullHash::LEN];
        hash[..4].copy_from_slice(&noise.to_be_bytes());
        // A real prefix's length is valid: so is the companion's.
        request_prefix(&FullHash(hash), real.bits()).unwrap_or(real)
    }
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

impl PlannedRequest {
    /// The request cut in two: the first and second half of its
    /// (shuffled) prefixes, each with the real prefixes it holds (maybe
    /// none). What a publisher answering `413 answer_too_large` is sent
    /// instead: the same prefixes, noise included, so that the two requests
    /// tell it nothing the refused one did not (new noise for each half would
    /// show, by intersection, which prefixes are real; a half left unsent
    /// would show its prefixes to be noise).
    pub fn halves(&self) -> [PlannedRequest; 2] {
        let (first, second) = self.prefixes.split_at(self.prefixes.len() / 2);
        [first, second].map(|half| PlannedRequest {
            prefixes: half.to_vec(),
            real: self.real.iter().copied().filter(|p| half.contains(p)).collect(),
        })
    }
}

/// The most full hashes a planned request's answer is expected to hold: a
/// quarter of what one answer may carry ([`MAX_ANSWER_MATCHES`], which is
/// also about the agent's read limit in bytes), so that buckets larger than
/// their average and padding still fit.
pub const PLANNED_ANSWER_MATCHES: f64 = (MAX_ANSWER_MATCHES / 4) as f64;

/// Plans the full-hash requests for the `real` prefixes (duplicates are
/// sent once): chunks of at most [`MAX_PREFIXES_PER_REQUEST`] prefixes,
/// each with `noise` noise prefixes added and shuffled. No request for no
/// real prefix. The noise is `key`'s companions of the chunk's real
/// prefixes, in turn (a chunk of one real prefix, a URL check's usual
/// request, carries its first `noise`; a chunk of several, the first few
/// of each, and none for those past the `noise`th): the same each time a
/// prefix is asked alone, so that two such requests for it share nothing
/// the first one did not already show. Noise never
/// repeats a real prefix or another noise prefix of the same request (a
/// colliding companion's last bits are drawn again, so that it still
/// extends what it was at shorter lengths: [`NoiseKey::companion`]); when the prefix
/// space is too small for that (many 8-bit prefixes), fewer noise
/// prefixes are sent.
///
/// `listed` is how many full hashes the subscribed lists hold together: a
/// `b`-bit prefix's answer holds about `listed / 2^b` of them, and a chunk
/// stops short of a thousand prefixes when its answer (noise included)
/// would hold more than [`PLANNED_ANSWER_MATCHES`]. Else a batch check of
/// many hits on lists whose buckets are large (up to `max_bucket_entries`,
/// 4,096 by default) asks for more than one answer can carry, and the
/// publisher refuses the whole request: every one of its URLs unverified.
/// A chunk holds one real prefix at least.
pub fn plan_requests(
    real: &[RequestPrefix],
    noise: usize,
    listed: u64,
    key: &NoiseKey,
    rng: &mut impl Rng,
) -> Vec<PlannedRequest> {
    let unique: Vec<RequestPrefix> = real
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let noise = noise.min(MAX_PREFIXES_PER_REQUEST - 1);
    let per_request = MAX_PREFIXES_PER_REQUEST - noise;
    let bucket = |p: &RequestPrefix| listed as f64 / 2f64.powi(i32::from(p.bits()));
    let mut chunks: Vec<&[RequestPrefix]> = Vec::new();
    let mut rest = &unique[..];
    while !rest.is_empty() {
        // The largest bucket so far sizes every prefix of the chunk: noise
        // takes its lengths from the real prefixes.
        let mut largest = 0f64;
        let mut len = 0;
        for p in rest.iter().take(per_request) {
            let with = largest.max(bucket(p));
            if len > 0 && (len + 1 + noise) as f64 * with > PLANNED_ANSWER_MATCHES {
                break;
            }
            largest = with;
            len += 1;
        }
        let (chunk, after) = rest.split_at(len);
        chunks.push(chunk);
        rest = after;
    }
    chunks
        .into_iter()
        .map(|chunk| {
            let mut taken: BTreeSet<RequestPrefix> = chunk.iter().copied().collect();
            let mut prefixes = chunk.to_vec();
            for slot in 0..noise {
                let (i, n) = (slot % chunk.len(), slot / chunk.len());
                // A few draws of its last bits per noise prefix: only a
                // crowded 8-bit space can make them all collide. The bits
                // before stay those of the same noise prefix at a shorter
                // length, itself or the one it collided with.
                for attempt in 0..16 {
                    let p = key.companion(chunk[i], u32::try_from(n).unwrap_or(u32::MAX), attempt);
                    if taken.insert(p) {
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

/// The answer to one full-hash request as the agent reads it, whichever
/// encoding it came in: an [`IndexedAnswer`], each full hash as its 32
/// bytes and a one-byte index into the answer's table of list names — a
/// binary answer as decoded ([`SearchAnswer::from_binary`]), a JSON one
/// converted ([`SearchAnswer::from_json`]), never the other way round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchAnswer {
    /// The answer: the cache duration, the list table, and per requested
    /// prefix its full hashes.
    pub answer: IndexedAnswer,
    /// For each full hash of a JSON answer that is not 64 hex digits, the
    /// prefix it was listed under: it is dropped, and if that prefix was
    /// asked [`sort_answers`] counts it as ignored and leaves the prefix
    /// unanswered ([`Answers::unreadable`]). Empty for a binary
    /// answer, which has no such full hash.
    pub unreadable: Vec<RequestPrefix>,
}

impl SearchAnswer {
    /// Reads a binary full-hash answer ([`IndexedAnswer::decode`]).
    ///
    /// # Errors
    ///
    /// The [`AnswerError`] of the first field that is wrong.
    pub fn from_binary(bytes: &[u8]) -> Result<Self, AnswerError> {
        IndexedAnswer::decode(bytes).map(|answer| Self {
            answer,
            unreadable: Vec::new(),
        })
    }

    /// Converts a JSON full-hash answer, as [`sort_answers`] reads it:
    /// results whose prefix is not a request prefix are dropped (they
    /// cannot answer a request), full hashes that are not 64 hex digits are
    /// dropped and noted in [`SearchAnswer::unreadable`] (their prefix, if
    /// asked, is then left unanswered: [`Answers::unreadable`]), list
    /// names are kept once each. A full hash that does not start with its prefix is
    /// kept: [`sort_answers`] ignores it.
    ///
    /// # Errors
    ///
    /// [`AnswerError::TooMany`] (`list_count`) when the matches name more
    /// than [`MAX_ANSWER_LISTS`] threat lists, the limit of a binary
    /// answer: a list index is one byte.
    pub fn from_json(json: FullHashSearchResponse) -> Result<Self, AnswerError> {
        let mut lists: Vec<String> = Vec::new();
        let mut unreadable = Vec::new();
        let mut results = Vec::with_capacity(json.results.len());
        for result in json.results {
            let Ok(prefix) = result.prefix.parse::<RequestPrefix>() else {
                continue;
            };
            let mut matches = Vec::with_capacity(result.matches.len());
            for m in result.matches {
                let Ok(full_hash) = FullHash::from_hex(&m.full_hash) else {
                    unreadable.push(prefix);
                    continue;
                };
                let list = match lists.iter().position(|l| *l == m.list) {
                    Some(index) => index,
                    None if lists.len() < MAX_ANSWER_LISTS => {
                        lists.push(m.list);
                        lists.len() - 1
                    }
                    None => {
                        return Err(AnswerError::TooMany {
                            field: "list_count",
                            count: lists.len() as u64 + 1,
                            max: MAX_ANSWER_LISTS as u64,
                        });
                    }
                };
                // Below MAX_ANSWER_LISTS (64): fits in a byte.
                let list = u8::try_from(list).unwrap_or(u8::MAX);
                matches.push(IndexedFullHash { list, full_hash });
            }
            results.push(IndexedPrefixAnswer { prefix, matches });
        }
        Ok(Self {
            answer: IndexedAnswer {
                cache_duration_s: json.cache_duration_s,
                lists,
                results,
            },
            unreadable,
        })
    }
}

/// Merges the immutable full-hash buckets of one planned request — for
/// each subscribed list (by its index in `subscribed`) and each of the
/// request's `prefixes`, the answer to
/// `GET /v1/lists/{name}/hashes/{version}/{prefix}` — into the one
/// [`SearchAnswer`] a `POST /v1/hashes:search` of `prefixes` would give:
/// per prefix, the full hashes of every subscribed list. A bucket's full
/// hashes on other lists are dropped (each list's own bucket answers for
/// it); the cache duration is the shortest of the buckets'.
///
/// # Errors
///
/// A description of the first gap when a list's bucket of a prefix is
/// missing or has no result for its prefix: the merged answer would then
/// lack that list's full hashes, and a cached "no match" made from it
/// would be a false negative. The caller asks by `POST` instead.
pub fn merge_buckets(
    prefixes: &[RequestPrefix],
    subscribed: &[Arc<str>],
    buckets: &HashMap<(usize, RequestPrefix), SearchAnswer>,
) -> Result<SearchAnswer, String> {
    if subscribed.len() > MAX_ANSWER_LISTS {
        return Err(format!("{} lists, more than one answer names", subscribed.len()));
    }
    let mut cache_duration_s = u64::MAX;
    let mut unreadable = Vec::new();
    let mut results = Vec::with_capacity(prefixes.len());
    for &prefix in prefixes {
        let mut matches = Vec::new();
        for (index, list) in subscribed.iter().enumerate() {
            let answer = buckets
                .get(&(index, prefix))
                .ok_or_else(|| format!("no bucket of list {list} for prefix {prefix}"))?;
            let result = answer
                .answer
                .results
                .iter()
                .find(|r| r.prefix == prefix)
                .ok_or_else(|| format!("the bucket of list {list} has no result for prefix {prefix}"))?;
            cache_duration_s = cache_duration_s.min(answer.answer.cache_duration_s);
            let own = answer.answer.lists.iter().position(|name| **name == **list);
            // Below MAX_ANSWER_LISTS (64): fits in a byte.
            let index = u8::try_from(index).unwrap_or(u8::MAX);
            matches.extend(
                result
                    .matches
                    .iter()
                    .filter(|m| own.is_some_and(|own| usize::from(m.list) == own))
                    .map(|m| IndexedFullHash {
                        list: index,
                        full_hash: m.full_hash,
                    }),
            );
            unreadable.extend(answer.unreadable.iter().filter(|p| **p == prefix));
        }
        results.push(IndexedPrefixAnswer { prefix, matches });
    }
    Ok(SearchAnswer {
        answer: IndexedAnswer {
            cache_duration_s: if results.is_empty() { 0 } else { cache_duration_s },
            lists: subscribed.iter().map(|l| l.to_string()).collect(),
            results,
        },
        unreadable,
    })
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
    /// Real prefixes under which the answer lists a full hash that is not
    /// 64 hex digits (a JSON answer only): a broken answer, which may have
    /// garbled the very full hash asked about, so they stay unverified and
    /// uncached rather than read as a miss. Sorted, each once.
    pub unreadable: Vec<RequestPrefix>,
    /// Full hashes ignored: not starting with the prefix they were listed
    /// under (they cannot be about it), or unreadable (above).
    pub ignored: usize,
}

/// The full hashes of one asked prefix, per subscribed list, while an
/// answer is sorted.
type Bucket = Vec<(Arc<str>, Vec<FullHash>)>;

/// Sorts a full-hash answer by the `real` prefixes of the request. Results
/// for prefixes that were not asked for (noise, or anything else) are
/// dropped; so are matches on lists other than the `subscribed` ones, and
/// full hashes that do not start with their result's prefix. The listed
/// full hashes share their list's name with `subscribed`: nothing is
/// allocated per name, and per full hash only its 32 bytes.
pub fn sort_answers(real: &[RequestPrefix], answer: &SearchAnswer, subscribed: &[Arc<str>]) -> Answers {
    let asked: BTreeSet<RequestPrefix> = real.iter().copied().collect();
    // The answer's list table, each name looked up once among the
    // subscribed lists.
    let lists: Vec<Option<&Arc<str>>> = answer
        .answer
        .lists
        .iter()
        .map(|name| subscribed.iter().find(|s| ***s == **name))
        .collect();
    let mut buckets: HashMap<RequestPrefix, Bucket> = HashMap::new();
    let mut ignored = answer.unreadable.iter().filter(|p| asked.contains(p)).count();
    for result in &answer.answer.results {
        let prefix = result.prefix;
        if !asked.contains(&prefix) {
            continue;
        }
        let bucket = buckets.entry(prefix).or_default();
        for m in &result.matches {
            if !prefix.matches(&m.full_hash) {
                ignored += 1;
                continue;
            }
            let Some(list) = lists.get(usize::from(m.list)).copied().flatten() else {
                continue;
            };
            match bucket.iter_mut().find(|(l, _)| Arc::ptr_eq(l, list)) {
                Some((_, hashes)) => hashes.push(m.full_hash),
                None => {
                    // Room for every full hash of the result on this list,
                    // so that the cached slice is this vector, not a copy.
                    let on_list = result.matches.iter().filter(|n| n.list == m.list).count();
                    let mut hashes = Vec::with_capacity(on_list);
                    hashes.push(m.full_hash);
                    bucket.push((Arc::clone(list), hashes));
                }
            }
        }
    }
    let unreadable: BTreeSet<RequestPrefix> = answer
        .unreadable
        .iter()
        .filter(|p| asked.contains(p))
        .copied()
        .collect();
    for p in &unreadable {
        buckets.remove(p);
    }
    let missing = asked
        .into_iter()
        .filter(|p| !buckets.contains_key(p) && !unreadable.contains(p))
        .collect();
    Answers {
        by_prefix: buckets
            .into_iter()
            .map(|(prefix, bucket)| (prefix, ListedHashes::from_lists(bucket)))
            .collect(),
        missing,
        unreadable: unreadable.into_iter().collect(),
        ignored,
    }
}

#[cfg(test)]
mod tests {
    use blocksieve_format::api::{FullHashAnswer, FullHashMatch, ListedFullHash, PrefixAnswer, PrefixResult};
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
            let plans = plan_requests(&real, 4, 0, &NoiseKey::new(&mut rng), &mut rng);
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
        assert!(plan_requests(&[], 4, 0, &NoiseKey::new(&mut rng), &mut rng).is_empty());
    }

    /// A prefix asked again (its answer expired, a retry, another visit)
    /// carries the same noise: with noise drawn anew, the real prefix was
    /// the one both requests shared. Another client's noise differs, and
    /// a request for several real prefixes carries the first companions
    /// of each.
    #[test]
    fn a_prefix_asked_again_carries_the_same_noise() {
        let mut rng = StdRng::seed_from_u64(6);
        let key = NoiseKey::new(&mut rng);
        let a = rp(&FullHash::of(b"a/"), 16);
        let b = rp(&FullHash::of(b"b/"), 16);
        let sent = |real: &[RequestPrefix], key: &NoiseKey, rng: &mut StdRng| -> BTreeSet<RequestPrefix> {
            let plans = plan_requests(real, 4, 0, key, rng);
            assert_eq!(plans.len(), 1);
            plans[0].prefixes.iter().copied().collect()
        };
        let first = sent(&[a], &key, &mut rng);
        assert_eq!(first.len(), 5);
        for _ in 0..20 {
            assert_eq!(sent(&[a], &key, &mut rng), first);
        }
        // Noise looks like the real prefix: its length.
        assert!(first.iter().all(|p| p.bits() == 16));
        let other = sent(&[a], &NoiseKey::new(&mut rng), &mut rng);
        assert_eq!(first.intersection(&other).collect::<Vec<_>>(), [&a]);
        // With b beside it, a brings its first two companions, which a
        // request for a alone also carried: the two requests share a and
        // those two, not a alone.
        let both = sent(&[a, b], &key, &mut rng);
        assert_eq!(both.len(), 6);
        let shared: Vec<_> = first.intersection(&both).collect();
        assert_eq!(shared.len(), 3, "{shared:?}");
        assert!(shared.contains(&&a));
        assert_eq!(format!("{key:?}"), "NoiseKey(..)");
    }

    /// A prefix asked at 8 bits, then at each longer length (its list's
    /// request prefix length grew; a check refused as `prefix_too_short`
    /// asks again at once): every prefix of the longer request extends one
    /// of the shorter request's, noise included, so the real one is not
    /// the one that does. Before, the noise was drawn anew at each length.
    #[test]
    fn a_prefix_asked_at_a_longer_length_carries_noise_extending_its_earlier_noise() {
        let mut rng = StdRng::seed_from_u64(7);
        for round in 0..500u32 {
            let key = NoiseKey::new(&mut rng);
            let hash = FullHash::of(&round.to_be_bytes());
            let mut sent = |bits| {
                plan_requests(&[rp(&hash, bits)], 4, 0, &key, &mut rng)
                    .remove(0)
                    .prefixes
            };
            let mut shorter = sent(8);
            for bits in [12, 16, 20, 24, 28, 32] {
                let longer = sent(bits);
                assert_eq!(longer.len(), 5);
                for p in &longer {
                    let mut h = [0u8; 32];
                    h[..4].copy_from_slice(&p.range32().0.to_be_bytes());
                    assert!(
                        shorter.iter().any(|s| s.matches(&FullHash(h))),
                        "round {round}: {p} extends none of {shorter:?}"
                    );
                }
                shorter = longer;
            }
        }
    }

    #[test]
    fn large_sets_are_split_into_chunks_of_at_most_a_thousand() {
        let mut rng = StdRng::seed_from_u64(2);
        let real: Vec<RequestPrefix> = (0..2_500u32)
            .map(|i| rp(&FullHash::of(&i.to_be_bytes()), 32))
            .collect();
        let plans = plan_requests(&real, 4, 0, &NoiseKey::new(&mut rng), &mut rng);
        assert_eq!(plans.len(), 3);
        assert!(plans.iter().all(|p| p.prefixes.len() <= MAX_PREFIXES_PER_REQUEST));
        assert_eq!(plans.iter().map(|p| p.real.len()).sum::<usize>(), 2_500);
        assert!(plans.iter().all(|p| p.prefixes.len() == p.real.len() + 4));
    }

    /// Lists holding 2^20 full hashes between them answer a 12-bit prefix
    /// with about 256 each: a thousand such prefixes (a batch check of many
    /// hits) would be 256,000 full hashes, about the planned quarter of an
    /// answer's limit; at 2^23 (2,048 a bucket, a length kept while a list
    /// grows) one request would be over the limit itself and refused.
    #[test]
    fn large_buckets_are_asked_for_in_smaller_requests() {
        let mut rng = StdRng::seed_from_u64(4);
        // A thousand distinct 12-bit prefixes.
        let real: Vec<RequestPrefix> = (0..1_000u16)
            .map(|i| {
                let mut h = [0u8; 32];
                h[..2].copy_from_slice(&(i << 4).to_be_bytes());
                rp(&FullHash(h), 12)
            })
            .collect();
        for (listed, requests) in [(0u64, 2), (1 << 16, 2), (1 << 23, 9)] {
            let plans = plan_requests(&real, 4, listed, &NoiseKey::new(&mut rng), &mut rng);
            assert_eq!(plans.len(), requests, "{listed}");
            assert_eq!(plans.iter().map(|p| p.real.len()).sum::<usize>(), 1_000);
            for plan in &plans {
                let expected = plan.prefixes.len() as f64 * listed as f64 / 4096.0;
                assert!(expected <= PLANNED_ANSWER_MATCHES, "{listed}: {expected}");
            }
        }
        // A bucket over the whole budget is still asked for, one real
        // prefix a request.
        let plans = plan_requests(&real[..3], 4, 1 << 40, &NoiseKey::new(&mut rng), &mut rng);
        assert_eq!(plans.len(), 3);
        assert!(plans.iter().all(|p| p.real.len() == 1));
    }

    #[test]
    fn a_request_cut_in_two_sends_the_same_prefixes_and_splits_the_real_ones() {
        let mut rng = StdRng::seed_from_u64(5);
        let real: Vec<RequestPrefix> = (0..10u32)
            .map(|i| rp(&FullHash::of(&i.to_be_bytes()), 32))
            .collect();
        let plan = plan_requests(&real, 4, 0, &NoiseKey::new(&mut rng), &mut rng).remove(0);
        let [a, b] = plan.halves();
        assert_eq!((a.prefixes.len(), b.prefixes.len()), (7, 7));
        assert_eq!([a.prefixes.clone(), b.prefixes.clone()].concat(), plan.prefixes);
        let mut reals = [a.real.clone(), b.real.clone()].concat();
        reals.sort();
        assert_eq!(reals, plan.real);
        for half in [&a, &b] {
            assert!(half.real.iter().all(|p| half.prefixes.contains(p)));
            assert!(half.real.is_sorted());
        }
        // Down to one prefix a half.
        let one = PlannedRequest {
            prefixes: vec![real[0]],
            real: vec![real[0]],
        };
        let [x, y] = one.halves();
        assert!(x.prefixes.is_empty() && y.prefixes == one.prefixes && y.real == one.real);
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
        let plans = plan_requests(&real, 4, 0, &NoiseKey::new(&mut rng), &mut rng);
        assert_eq!(plans[0].prefixes.len(), 256);
    }

    fn subscribed(names: &[&str]) -> Vec<Arc<str>> {
        names.iter().map(|n| Arc::from(*n)).collect()
    }

    /// The same answer in both encodings, as a publisher sends it.
    fn both_encodings(answer: &FullHashAnswer) -> [SearchAnswer; 2] {
        let binary = match SearchAnswer::from_binary(&answer.encode().unwrap()) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        let json = match SearchAnswer::from_json(FullHashSearchResponse::from(answer.clone())) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        [binary, json]
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
        let other = vec![
            m(&FullHash::of(b"other/"), "malware"),
            FullHashMatch {
                full_hash: "not a hash either".into(),
                list: "malware".into(),
            },
        ];
        let result = |prefix: &str, matches: &[FullHashMatch]| PrefixResult {
            prefix: prefix.to_owned(),
            matches: matches.to_vec(),
        };
        let json = FullHashSearchResponse {
            results: vec![
                result(&p.to_string(), &p_matches),
                result(&unasked.to_string(), &other),
                result("not hex", &other),
            ],
            cache_duration_s: 300,
        };
        let answer = match SearchAnswer::from_json(json) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        // Converted: the list names once, the unreadable full hashes noted
        // under their prefix, the result with no request prefix dropped.
        assert_eq!(answer.answer.lists, ["malware", "unsubscribed"]);
        assert_eq!(answer.unreadable, [p, unasked]);
        assert_eq!(answer.answer.results.len(), 2);
        let real = vec![rp(&FullHash::of(b"missing/"), 32), p];
        let lists = subscribed(&["phishing", "malware"]);
        let answers = sort_answers(&real, &answer, &lists);
        // `p` lists an unreadable full hash: the answer for it is broken
        // (the garbled one could be the one asked about), not a miss.
        assert!(!answers.by_prefix.contains_key(&p));
        assert_eq!(answers.unreadable, [p]);
        assert!(!answers.by_prefix.contains_key(&unasked));
        assert!(!answers.by_prefix.contains_key(&noise));
        assert_eq!(answers.missing, vec![rp(&FullHash::of(b"missing/"), 32)]);
        // The foreign full hash and the unreadable one under `p`; not the
        // unreadable one under the prefix nobody asked.
        assert_eq!(answers.ignored, 2);
        // Without the unreadable full hash, `p` is answered.
        let mut readable = answer.clone();
        readable.unreadable.clear();
        let answers = sort_answers(&real, &readable, &lists);
        assert_eq!(
            answers.by_prefix.get(&p),
            Some(&ListedHashes::new([("malware", listed)]))
        );
        assert!(answers.unreadable.is_empty());
    }

    #[test]
    fn both_encodings_sort_to_the_same_answers_sharing_the_subscribed_names() {
        let evil = FullHash::of(b"evil.example/");
        let p = rp(&evil, 12);
        let q = rp(&FullHash::of(b"quiet.example/"), 12);
        let noise = rp(&FullHash::of(b"noise/"), 12);
        // Padding: random full hashes under the prefix, on a real list.
        let pad = |i: u8| {
            let mut h = FullHash::of(&[i]).0;
            h[..2].copy_from_slice(&evil.0[..2]);
            FullHash(h)
        };
        let on = |list: &str, full_hash: FullHash| ListedFullHash {
            full_hash,
            list: list.to_owned(),
        };
        let answer = FullHashAnswer {
            cache_duration_s: 60,
            results: vec![
                PrefixAnswer {
                    prefix: noise,
                    matches: vec![on("malware", FullHash::of(b"noise/"))],
                },
                PrefixAnswer {
                    prefix: p,
                    matches: vec![
                        on("phishing", pad(1)),
                        on("malware", evil),
                        on("social", pad(2)),
                        on("phishing", evil),
                        on("phishing", pad(3)),
                    ],
                },
                PrefixAnswer {
                    prefix: q,
                    matches: vec![],
                },
            ],
        };
        let lists = subscribed(&["malware", "phishing"]);
        let [binary, json] = both_encodings(&answer);
        assert_eq!(binary, json);
        assert_eq!(binary.answer.lists, ["malware", "phishing", "social"]);
        for read in [&binary, &json] {
            let sorted = sort_answers(&[q, p], read, &lists);
            assert_eq!((sorted.missing.len(), sorted.ignored), (0, 0));
            assert_eq!(sorted.by_prefix.len(), 2);
            let listed = &sorted.by_prefix[&p];
            assert_eq!(listed.len(), 4);
            assert!(listed.contains(&evil, "malware") && listed.contains(&evil, "phishing"));
            assert!(!listed.contains(&pad(2), "social"));
            assert!(sorted.by_prefix[&q].is_empty());
            // The names are the subscribed ones, not copies.
            for (name, _) in listed.iter() {
                assert!(lists.iter().any(|l| std::ptr::eq(&**l, name)), "{name} copied");
            }
            // 32 bytes a full hash and two lists' table: nothing per name.
            assert_eq!(listed.heap_bytes(), 4 * 32 + 2 * 32 + 3 * 16);
        }
    }

    #[test]
    fn a_json_answer_naming_more_lists_than_a_binary_one_can_is_refused() {
        let h = FullHash::of(b"evil.example/");
        let answer = |lists: usize| FullHashSearchResponse {
            results: vec![PrefixResult {
                prefix: rp(&h, 16).to_string(),
                matches: (0..lists)
                    .map(|i| FullHashMatch {
                        full_hash: h.to_string(),
                        list: format!("list-{i}"),
                    })
                    .collect(),
            }],
            cache_duration_s: 60,
        };
        let read = SearchAnswer::from_json(answer(MAX_ANSWER_LISTS));
        assert!(read.is_ok_and(|a| {
            a.answer.lists.len() == MAX_ANSWER_LISTS
                && a.answer.results[0]
                    .matches
                    .last()
                    .is_some_and(|m| usize::from(m.list) == MAX_ANSWER_LISTS - 1)
        }));
        assert_eq!(
            SearchAnswer::from_json(answer(MAX_ANSWER_LISTS + 1)),
            Err(AnswerError::TooMany {
                field: "list_count",
                count: MAX_ANSWER_LISTS as u64 + 1,
                max: MAX_ANSWER_LISTS as u64,
            })
        );
    }

    /// A one-list bucket answer: `prefix` with `hashes` on `lists[i]`.
    fn bucket(
        prefix: RequestPrefix,
        lists: &[&str],
        hashes: &[(usize, FullHash)],
        cache: u64,
    ) -> SearchAnswer {
        SearchAnswer {
            answer: IndexedAnswer {
                cache_duration_s: cache,
                lists: lists.iter().map(|l| (*l).to_owned()).collect(),
                results: vec![IndexedPrefixAnswer {
                    prefix,
                    matches: hashes
                        .iter()
                        .map(|(list, h)| IndexedFullHash {
                            list: *list as u8,
                            full_hash: *h,
                        })
                        .collect(),
                }],
            },
            unreadable: Vec::new(),
        }
    }

    #[test]
    fn merged_buckets_hold_every_subscribed_lists_full_hashes_or_fail() {
        let on_a = FullHash::of(b"a.example/");
        let p = rp(&on_a, 8);
        let mut on_b = FullHash::of(b"b.example/");
        on_b.0[0] = on_a.0[0];
        let noise = rp(&FullHash::of(b"noise.example/"), 8);
        let subscribed: Vec<Arc<str>> = vec![Arc::from("alpha"), Arc::from("beta")];
        let mut buckets = HashMap::new();
        buckets.insert((0, p), bucket(p, &["alpha"], &[(0, on_a)], 300));
        // beta's bucket also names a full hash on alpha: not beta's to say.
        buckets.insert(
            (1, p),
            bucket(p, &["alpha", "beta"], &[(1, on_b), (0, FullHash([0; 32]))], 60),
        );
        buckets.insert((0, noise), bucket(noise, &["alpha"], &[], 300));
        buckets.insert((1, noise), bucket(noise, &["beta"], &[], 300));
        let merged = merge_buckets(&[noise, p], &subscribed, &buckets).unwrap();
        assert_eq!(merged.answer.cache_duration_s, 60);
        let sorted = sort_answers(&[p], &merged, &subscribed);
        let listed = &sorted.by_prefix[&p];
        assert!(listed.contains(&on_a, "alpha") && !listed.contains(&on_a, "beta"));
        assert!(listed.contains(&on_b, "beta") && !listed.contains(&on_b, "alpha"));
        assert_eq!(listed.len(), 2);
        assert!(sorted.missing.is_empty());

        // One list's bucket missing, or without its prefix: no answer at all.
        let mut gap = buckets.clone();
        gap.remove(&(1, noise));
        assert!(merge_buckets(&[noise, p], &subscribed, &gap).is_err());
        let mut wrong = buckets.clone();
        wrong.insert((1, p), bucket(noise, &["beta"], &[], 300));
        assert!(merge_buckets(&[noise, p], &subscribed, &wrong).is_err());
    }
}
