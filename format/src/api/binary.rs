//! The binary encoding of full-hash answers ([`FULL_HASHES_CONTENT_TYPE`],
//! FORMAT.md "Full-hash answers"): the same content as the JSON
//! [`FullHashResponse`] and [`FullHashSearchResponse`], about a third of the
//! bytes (a 12-bit bucket of ~205 full hashes: ~6.6 KB against ~20 KB).
//!
//! A listed full hash is sent as a list index (one byte into a table of the
//! answer's threat list names) and the full hash's bytes after the request
//! prefix's whole bytes: the agent knows those bytes, it asked for them.
//! Decoding goes through the crate's one bounded reader; every count is
//! checked against its maximum and the bytes left before anything is
//! allocated.
//!
//! [`IndexedAnswer::decode`] reads the encoding as it is laid out — the
//! list names once, each full hash with its list's index: 33 bytes a full
//! hash, what a client keeps of an answer. [`FullHashAnswer::decode`] is the
//! same reading, each full hash then given its list's name.

use crate::hash::FullHash;
use crate::reader::Reader;
use crate::snapshot::{MAX_LIST_NAME_BYTES, is_valid_list_name};

use super::{
    FullHashMatch, FullHashResponse, FullHashSearchResponse, MAX_PREFIXES_PER_REQUEST, PrefixResult,
    RequestPrefix, is_valid_request_prefix_bits,
};

/// The media type of a binary full-hash answer, sent in `Accept` to ask for
/// one and in `Content-Type` with one.
pub const FULL_HASHES_CONTENT_TYPE: &str = "application/vnd.blocksieve.full-hashes";

/// The `Accept` header of an agent's full-hash request: the binary answer
/// preferred, JSON accepted (a publisher older than the binary answer sends
/// JSON).
pub const FULL_HASHES_ACCEPT: &str = "application/vnd.blocksieve.full-hashes, application/json;q=0.5";

/// The first four bytes of a binary full-hash answer.
pub const FULL_HASHES_MAGIC: [u8; 4] = *b"BSFH";

/// The version of the binary full-hash answer this crate writes and reads.
pub const FULL_HASHES_VERSION: u8 = 1;

/// The most threat lists named in one binary answer: a list index is one
/// byte, and a publisher serves a handful of lists.
pub const MAX_ANSWER_LISTS: usize = 64;

/// The most full hashes in one binary answer, over all its prefixes:
/// 2^20 (about 33.5 MB at 32 bytes each).
pub const MAX_ANSWER_MATCHES: usize = 1 << 20;

/// The most bytes a binary answer within [`MAX_ANSWER_MATCHES`] and
/// [`MAX_ANSWER_LISTS`] can take: its fixed fields, [`MAX_ANSWER_LISTS`]
/// names of up to 255 bytes, up to 65,535 prefix results of at most 9 bytes
/// each, and each full hash in at most 32 bytes (a list index and the bytes
/// after the prefix's first). About 34.2 MB: what an agent reading a search
/// answer must accept, so that every answer a publisher sends is read.
pub const MAX_ANSWER_BYTES: usize =
    16 + MAX_ANSWER_LISTS * 256 + u16::MAX as usize * 9 + MAX_ANSWER_MATCHES * 32;

/// A full-hash answer as both encodings carry it: for each requested hash
/// prefix, every listed full hash that starts with it, and how long the
/// whole may be cached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullHashAnswer {
    /// How long, in seconds, the agent may cache every result, hits and
    /// misses alike.
    pub cache_duration_s: u64,
    /// One result per requested prefix, in request order.
    pub results: Vec<PrefixAnswer>,
}

/// The bucket of one requested hash prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixAnswer {
    /// The requested prefix.
    pub prefix: RequestPrefix,
    /// Every listed full hash that starts with it.
    pub matches: Vec<ListedFullHash>,
}

/// One listed full hash and the threat list it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFullHash {
    /// The full hash.
    pub full_hash: FullHash,
    /// The threat list it is on.
    pub list: String,
}

/// A full-hash answer as the binary encoding lays it out: the names of its
/// threat lists once, in a table, and each listed full hash with the index
/// of its list there. In memory a full hash takes 33 bytes (the full hash
/// and a one-byte index), against a name of its own in a
/// [`FullHashAnswer`]; a client reads answers this way
/// ([`IndexedAnswer::decode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedAnswer {
    /// How long, in seconds, the agent may cache every result, hits and
    /// misses alike.
    pub cache_duration_s: u64,
    /// The threat lists the matches are on, each named once; a decoded
    /// answer holds at most [`MAX_ANSWER_LISTS`] valid names
    /// ([`crate::is_valid_list_name`]).
    pub lists: Vec<String>,
    /// One result per requested prefix, in request order.
    pub results: Vec<IndexedPrefixAnswer>,
}

/// The bucket of one requested hash prefix in an [`IndexedAnswer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedPrefixAnswer {
    /// The requested prefix.
    pub prefix: RequestPrefix,
    /// Every listed full hash that starts with it.
    pub matches: Vec<IndexedFullHash>,
}

/// One listed full hash and the index of its threat list in
/// [`IndexedAnswer::lists`]: 33 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedFullHash {
    /// The index of the threat list it is on; below the length of the
    /// answer's list table in a decoded answer.
    pub list: u8,
    /// The full hash.
    pub full_hash: FullHash,
}

/// Why a binary full-hash answer could not be read (or written: the
/// encoder refuses what the decoder would). Whatever the variant, the
/// answer is unusable: the agent treats it as a failed request.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The input ended while reading `field`.
    #[error("full-hash answer truncated while reading {field}")]
    Truncated {
        /// The field being read, as in FORMAT.md.
        field: &'static str,
    },
    /// The first four bytes are not `BSFH`.
    #[error("not a binary full-hash answer (bad magic)")]
    BadMagic,
    /// The version is not one this reader knows.
    #[error(
        "full-hash answer version {found} is not supported (this reader knows version {FULL_HASHES_VERSION})"
    )]
    UnsupportedVersion {
        /// The version in the answer.
        found: u8,
    },
    /// A count is over its maximum.
    #[error("full-hash answer field {field} is {count}, the maximum is {max}")]
    TooMany {
        /// The count field, as in FORMAT.md.
        field: &'static str,
        /// The count.
        count: u64,
        /// Its maximum here.
        max: u64,
    },
    /// A field has a value the format does not allow.
    #[error("invalid full-hash answer field {field}: {value}")]
    InvalidField {
        /// The field name, as in FORMAT.md.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// A full hash does not start with the prefix it is listed under.
    #[error("a full hash does not start with its prefix {prefix}")]
    MatchOutsidePrefix {
        /// The prefix it is listed under.
        prefix: RequestPrefix,
    },
    /// Bytes follow the last prefix's matches.
    #[error("{count} bytes after the end of the full-hash answer")]
    TrailingBytes {
        /// How many.
        count: u64,
    },
}

/// Whether a `Content-Type` names the binary full-hash answer (parameters
/// and case ignored).
pub fn is_full_hashes_content_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case(FULL_HASHES_CONTENT_TYPE)
}

/// Whether an `Accept` header asks for the binary full-hash answer: one of
/// its media ranges is [`FULL_HASHES_CONTENT_TYPE`] with a `q` other than
/// zero (RFC 9110 §12.5.1). Wildcards do not count: a client that has not
/// named the binary type gets JSON.
pub fn accepts_full_hashes_binary(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let named = parts
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case(FULL_HASHES_CONTENT_TYPE));
        let refused = parts.any(|p| {
            p.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("q") && v.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)
            })
        });
        named && !refused
    })
}

/// The whole bytes of a `bits`-bit prefix, as the full hash starts with them.
fn prefix_bytes(bits: u8) -> usize {
    usize::from(bits).div_ceil(8)
}

/// The bytes of a full hash sent per match under a `bits`-bit prefix: those
/// after the prefix's whole bytes.
fn tail_bytes(bits: u8) -> usize {
    32 - usize::from(bits) / 8
}

impl FullHashAnswer {
    /// The binary encoding (FORMAT.md "Full-hash answers"). The list table
    /// names each threat list of the matches once, in order of first use.
    ///
    /// # Errors
    ///
    /// [`AnswerError::TooMany`] over [`MAX_ANSWER_LISTS`],
    /// [`MAX_PREFIXES_PER_REQUEST`] or [`MAX_ANSWER_MATCHES`];
    /// [`AnswerError::InvalidField`] for a list name that is not a valid one
    /// ([`crate::is_valid_list_name`]); [`AnswerError::MatchOutsidePrefix`]
    /// for a full hash that does not start with its prefix.
    pub fn encode(&self) -> Result<Vec<u8>, AnswerError> {
        let too_many = |field, count: usize, max: usize| AnswerError::TooMany {
            field,
            count: count as u64,
            max: max as u64,
        };
        if self.results.len() > MAX_PREFIXES_PER_REQUEST {
            return Err(too_many(
                "prefix_count",
                self.results.len(),
                MAX_PREFIXES_PER_REQUEST,
            ));
        }
        let mut lists: Vec<&str> = Vec::new();
        let mut total = 0usize;
        for m in self.results.iter().flat_map(|r| &r.matches) {
            total += 1;
            if !lists.contains(&m.list.as_str()) {
                if !is_valid_list_name(&m.list) {
                    return Err(AnswerError::InvalidField {
                        field: "list_name",
                        value: m.list.len() as u64,
                    });
                }
                lists.push(&m.list);
            }
        }
        if lists.len() > MAX_ANSWER_LISTS {
            return Err(too_many("list_count", lists.len(), MAX_ANSWER_LISTS));
        }
        if total > MAX_ANSWER_MATCHES {
            return Err(too_many("match_count", total, MAX_ANSWER_MATCHES));
        }
        let mut out = Vec::with_capacity(16 + lists.len() * 16 + self.results.len() * 9 + total * 32);
        out.extend_from_slice(&FULL_HASHES_MAGIC);
        out.push(FULL_HASHES_VERSION);
        out.extend_from_slice(&self.cache_duration_s.to_le_bytes());
        out.push(lists.len() as u8);
        for name in &lists {
            out.push(name.len() as u8);
            out.extend_from_slice(name.as_bytes());
        }
        out.extend_from_slice(&(self.results.len() as u16).to_le_bytes());
        for result in &self.results {
            let bits = result.prefix.bits();
            out.push(bits);
            let (start, _) = result.prefix.range32();
            out.extend_from_slice(&start.to_be_bytes()[..prefix_bytes(bits)]);
            out.extend_from_slice(&(result.matches.len() as u32).to_le_bytes());
            let skip = 32 - tail_bytes(bits);
            for m in &result.matches {
                if !result.prefix.matches(&m.full_hash) {
                    return Err(AnswerError::MatchOutsidePrefix {
                        prefix: result.prefix,
                    });
                }
                let index = lists.iter().position(|l| *l == m.list).unwrap_or(0);
                out.push(index as u8);
                out.extend_from_slice(&m.full_hash.0[skip..]);
            }
        }
        Ok(out)
    }

    /// Reads a binary answer ([`IndexedAnswer::decode`]), each full hash
    /// given its list's name.
    ///
    /// # Errors
    ///
    /// An [`AnswerError`] naming the first field that is wrong; never
    /// panics, whatever the input.
    pub fn decode(bytes: &[u8]) -> Result<Self, AnswerError> {
        IndexedAnswer::decode(bytes).map(Self::from)
    }

    /// The JSON answer of `GET /v1/hashes/{prefix}`: the first result (an
    /// empty bucket of `prefix` if there is none).
    pub fn into_single(self, prefix: RequestPrefix) -> FullHashResponse {
        let result = self.results.into_iter().next().unwrap_or(PrefixAnswer {
            prefix,
            matches: Vec::new(),
        });
        FullHashResponse {
            prefix: result.prefix.to_string(),
            matches: result.matches.into_iter().map(FullHashMatch::from).collect(),
            cache_duration_s: self.cache_duration_s,
        }
    }
}

impl IndexedAnswer {
    /// Reads a binary answer, checking every count against its maximum and
    /// the bytes left before allocating. The list table is read as it is,
    /// each list index checked against it: nothing is allocated per full
    /// hash but its 33 bytes.
    ///
    /// # Errors
    ///
    /// An [`AnswerError`] naming the first field that is wrong; never
    /// panics, whatever the input.
    pub fn decode(bytes: &[u8]) -> Result<Self, AnswerError> {
        let mut r = Reader::new(bytes);
        let t = |field| AnswerError::Truncated { field };
        if r.array::<4>().ok_or(t("magic"))? != FULL_HASHES_MAGIC {
            return Err(AnswerError::BadMagic);
        }
        let version = r.u8().ok_or(t("version"))?;
        if version != FULL_HASHES_VERSION {
            return Err(AnswerError::UnsupportedVersion { found: version });
        }
        let cache_duration_s = r.u64().ok_or(t("cache_duration_s"))?;
        let list_count = usize::from(r.u8().ok_or(t("list_count"))?);
        check_count(("list_count", "list_name"), list_count, MAX_ANSWER_LISTS, 2, &r)?;
        let mut lists: Vec<String> = Vec::with_capacity(list_count);
        for _ in 0..list_count {
            let len = usize::from(r.u8().ok_or(t("list_name_len"))?);
            if len == 0 || len > MAX_LIST_NAME_BYTES {
                return Err(AnswerError::InvalidField {
                    field: "list_name_len",
                    value: len as u64,
                });
            }
            let name = r.take(len).ok_or(t("list_name"))?;
            let name = std::str::from_utf8(name)
                .ok()
                .filter(|n| is_valid_list_name(n) && !lists.iter().any(|l| l == n))
                .ok_or(AnswerError::InvalidField {
                    field: "list_name",
                    value: lists.len() as u64,
                })?;
            lists.push(name.to_owned());
        }
        let prefix_count = usize::from(r.u16().ok_or(t("prefix_count"))?);
        // A prefix takes at least 6 bytes: bits, 1 prefix byte, a count.
        check_count(
            ("prefix_count", "prefix"),
            prefix_count,
            MAX_PREFIXES_PER_REQUEST,
            6,
            &r,
        )?;
        let mut results = Vec::with_capacity(prefix_count);
        let mut total = 0usize;
        for _ in 0..prefix_count {
            let bits = r.u8().ok_or(t("prefix_bits"))?;
            if !is_valid_request_prefix_bits(bits) {
                return Err(AnswerError::InvalidField {
                    field: "prefix_bits",
                    value: u64::from(bits),
                });
            }
            let mut first = [0u8; 32];
            let head = r.take(prefix_bytes(bits)).ok_or(t("prefix"))?;
            first[..head.len()].copy_from_slice(head);
            let prefix = RequestPrefix::of(&FullHash(first), bits);
            if prefix.range32().0.to_be_bytes()[..head.len()] != *head {
                return Err(AnswerError::InvalidField {
                    field: "prefix",
                    value: u64::from(u32::from_be_bytes([first[0], first[1], first[2], first[3]])),
                });
            }
            let count = r.u32().ok_or(t("match_count"))?;
            let count = usize::try_from(count).unwrap_or(usize::MAX);
            let tail = tail_bytes(bits);
            check_count(
                ("match_count", "full_hash"),
                count,
                MAX_ANSWER_MATCHES - total,
                1 + tail,
                &r,
            )?;
            total += count;
            let skip = 32 - tail;
            let mut matches = Vec::with_capacity(count);
            for _ in 0..count {
                let list = r.u8().ok_or(t("list_index"))?;
                if usize::from(list) >= lists.len() {
                    return Err(AnswerError::InvalidField {
                        field: "list_index",
                        value: u64::from(list),
                    });
                }
                let mut full_hash = first;
                full_hash[skip..].copy_from_slice(r.take(tail).ok_or(t("full_hash"))?);
                let full_hash = FullHash(full_hash);
                if !prefix.matches(&full_hash) {
                    return Err(AnswerError::MatchOutsidePrefix { prefix });
                }
                matches.push(IndexedFullHash { list, full_hash });
            }
            results.push(IndexedPrefixAnswer { prefix, matches });
        }
        if r.remaining() > 0 {
            return Err(AnswerError::TrailingBytes {
                count: r.remaining() as u64,
            });
        }
        Ok(Self {
            cache_duration_s,
            lists,
            results,
        })
    }
}

/// Refuses, before anything is allocated for them, `count` items over
/// `max` ([`AnswerError::TooMany`] naming `field`) or over what the bytes
/// left can hold at `min_bytes` each ([`AnswerError::Truncated`] naming the
/// `item`).
fn check_count(
    (field, item): (&'static str, &'static str),
    count: usize,
    max: usize,
    min_bytes: usize,
    r: &Reader<'_>,
) -> Result<(), AnswerError> {
    if count > max {
        return Err(AnswerError::TooMany {
            field,
            count: count as u64,
            max: max as u64,
        });
    }
    if count > r.remaining() / min_bytes {
        return Err(AnswerError::Truncated { field: item });
    }
    Ok(())
}

/// Each full hash given its list's name; a list index outside the table
/// (possible only in an answer built by hand) names no list: `""`.
impl From<IndexedAnswer> for FullHashAnswer {
    fn from(a: IndexedAnswer) -> Self {
        let name = |list: u8| a.lists.get(usize::from(list)).cloned().unwrap_or_default();
        Self {
            cache_duration_s: a.cache_duration_s,
            results: a
                .results
                .into_iter()
                .map(|r| PrefixAnswer {
                    prefix: r.prefix,
                    matches: r
                        .matches
                        .into_iter()
                        .map(|m| ListedFullHash {
                            full_hash: m.full_hash,
                            list: name(m.list),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

impl From<ListedFullHash> for FullHashMatch {
    fn from(m: ListedFullHash) -> Self {
        Self {
            full_hash: m.full_hash.to_string(),
            list: m.list,
        }
    }
}

impl From<PrefixAnswer> for PrefixResult {
    fn from(r: PrefixAnswer) -> Self {
        Self {
            prefix: r.prefix.to_string(),
            matches: r.matches.into_iter().map(FullHashMatch::from).collect(),
        }
    }
}

/// The JSON answer of `POST /v1/hashes:search`, as the agent reads either
/// encoding.
impl From<FullHashAnswer> for FullHashSearchResponse {
    fn from(a: FullHashAnswer) -> Self {
        Self {
            results: a.results.into_iter().map(PrefixResult::from).collect(),
            cache_duration_s: a.cache_duration_s,
        }
    }
}

#[cfg(test)]
mod tests {
    /// The fullest answer the limits allow, at the shortest prefixes (the
    /// most bytes a full hash), fits [`super::MAX_ANSWER_BYTES`].
    #[test]
    fn the_largest_answer_fits_max_answer_bytes() {
        use super::{FullHashAnswer, MAX_ANSWER_BYTES, MAX_ANSWER_MATCHES, PrefixAnswer};
        use crate::api::ListedFullHash;
        use crate::{FullHash, RequestPrefix};
        let per = MAX_ANSWER_MATCHES / 256;
        let list = "l".repeat(crate::MAX_LIST_NAME_BYTES);
        let results = (0..=255u8)
            .map(|b| {
                let mut h = [0u8; 32];
                h[0] = b;
                let prefix = RequestPrefix::of(&FullHash(h), 8);
                let matches = (0..per)
                    .map(|i| {
                        let mut m = h;
                        m[1..5].copy_from_slice(&(i as u32).to_be_bytes());
                        ListedFullHash {
                            full_hash: FullHash(m),
                            list: list.clone(),
                        }
                    })
                    .collect();
                PrefixAnswer { prefix, matches }
            })
            .collect();
        let answer = FullHashAnswer {
            cache_duration_s: 300,
            results,
        };
        let bytes = answer.encode().unwrap();
        assert!(
            bytes.len() <= MAX_ANSWER_BYTES,
            "{} > {MAX_ANSWER_BYTES}",
            bytes.len()
        );
        assert!(bytes.len() > 32 * MAX_ANSWER_MATCHES);
    }

    use proptest::prelude::*;

    use super::*;

    /// FORMAT.md "Full-hash answers", the golden example: one 12-bit
    /// prefix, `f9c`, with the full hash of `a.b.c/` on `malware`, and one
    /// 32-bit prefix with none; cached 300 s.
    const GOLDEN_HEX: &str = concat!(
        "4253464801",       // magic, version
        "2c01000000000000", // cache_duration_s = 300
        "01",
        "076d616c77617265", // 1 list: "malware"
        "0200",             // 2 prefixes
        "0c",
        "f9c0",
        "01000000", // f9c, 1 match
        "00",
        "c142c4", // list 0, full hash bytes 1..
    );

    fn golden() -> FullHashAnswer {
        let h = FullHash::of(b"a.b.c/");
        FullHashAnswer {
            cache_duration_s: 300,
            results: vec![
                PrefixAnswer {
                    prefix: RequestPrefix::of(&h, 12),
                    matches: vec![ListedFullHash {
                        full_hash: h,
                        list: "malware".to_owned(),
                    }],
                },
                PrefixAnswer {
                    prefix: "0123abcd".parse().unwrap(),
                    matches: vec![],
                },
            ],
        }
    }

    fn golden_bytes() -> Vec<u8> {
        let h = FullHash::of(b"a.b.c/");
        let mut hex = GOLDEN_HEX.to_owned();
        // The rest of the full hash, then the empty 32-bit prefix.
        hex.push_str(&h.to_string()[8..]);
        hex.push_str("20" /* 32 bits */);
        hex.push_str("0123abcd00000000");
        hex::decode(hex).unwrap()
    }

    #[test]
    fn golden_answer() {
        let bytes = golden().encode().unwrap();
        assert_eq!(hex::encode(&bytes), hex::encode(golden_bytes()));
        assert_eq!(
            bytes.len(),
            4 + 1 + 8 + 1 + 8 + 2 + (1 + 2 + 4 + 32) + (1 + 4 + 4)
        );
        assert_eq!(FullHashAnswer::decode(&bytes), Ok(golden()));
    }

    /// The indexed reading is the encoding's own layout: the list table
    /// once, an index per full hash.
    #[test]
    fn golden_answer_indexed() {
        let h = FullHash::of(b"a.b.c/");
        let indexed = IndexedAnswer::decode(&golden_bytes()).unwrap();
        assert_eq!(indexed.cache_duration_s, 300);
        assert_eq!(indexed.lists, ["malware"]);
        assert_eq!(indexed.results.len(), 2);
        assert_eq!(indexed.results[0].prefix, RequestPrefix::of(&h, 12));
        assert_eq!(
            indexed.results[0].matches,
            [IndexedFullHash {
                list: 0,
                full_hash: h
            }]
        );
        assert!(indexed.results[1].matches.is_empty());
        assert_eq!(std::mem::size_of::<IndexedFullHash>(), 33);
        assert_eq!(FullHashAnswer::from(indexed.clone()), golden());
        // An index outside the table, only possible by hand, names no list.
        let mut by_hand = indexed;
        by_hand.results[0].matches[0].list = 1;
        assert_eq!(FullHashAnswer::from(by_hand).results[0].matches[0].list, "");
    }

    #[test]
    fn every_cut_is_an_error_not_a_panic() {
        let bytes = golden().encode().unwrap();
        for len in 0..bytes.len() {
            let err = FullHashAnswer::decode(&bytes[..len]);
            assert!(err.is_err(), "decoded a cut at {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            FullHashAnswer::decode(&longer),
            Err(AnswerError::TrailingBytes { count: 1 })
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let good = golden().encode().unwrap();
        let with = |at: usize, byte: u8| {
            let mut b = good.clone();
            b[at] = byte;
            FullHashAnswer::decode(&b)
        };
        assert_eq!(with(0, b'X'), Err(AnswerError::BadMagic));
        assert_eq!(with(4, 2), Err(AnswerError::UnsupportedVersion { found: 2 }));
        assert!(matches!(
            with(13, 65),
            Err(AnswerError::TooMany {
                field: "list_count",
                ..
            })
        ));
        assert!(matches!(
            with(15, b'M'),
            Err(AnswerError::InvalidField {
                field: "list_name",
                ..
            })
        ));
        assert!(matches!(
            with(22, 0xff),
            Err(AnswerError::Truncated { field: "prefix" })
        ));
        assert!(matches!(
            with(24, 13),
            Err(AnswerError::InvalidField {
                field: "prefix_bits",
                ..
            })
        ));
        // Bits under a 12-bit prefix's last digit are not zero.
        assert!(matches!(
            with(26, 0xc1),
            Err(AnswerError::InvalidField { field: "prefix", .. })
        ));
        assert!(matches!(
            with(27, 2),
            Err(AnswerError::Truncated { field: "full_hash" })
        ));
        assert!(matches!(
            with(31, 1),
            Err(AnswerError::InvalidField {
                field: "list_index",
                ..
            })
        ));
        // The first sent byte of the full hash leaves the prefix's last digit.
        assert_eq!(
            with(32, 0xd1),
            Err(AnswerError::MatchOutsidePrefix {
                prefix: "f9c".parse().unwrap()
            })
        );
        // A count over the maximum is refused before any allocation.
        let mut huge = good[..27].to_vec();
        huge[22] = 1;
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            FullHashAnswer::decode(&huge),
            Err(AnswerError::TooMany {
                field: "match_count",
                ..
            })
        ));
    }

    #[test]
    fn the_encoder_refuses_what_the_decoder_would() {
        let mut a = golden();
        a.results[0].matches[0].list = "Bad Name".to_owned();
        assert!(matches!(
            a.encode(),
            Err(AnswerError::InvalidField {
                field: "list_name",
                ..
            })
        ));
        let mut a = golden();
        a.results[1].matches.push(ListedFullHash {
            full_hash: FullHash::of(b"a.b.c/"),
            list: "malware".to_owned(),
        });
        assert!(matches!(a.encode(), Err(AnswerError::MatchOutsidePrefix { .. })));
    }

    #[test]
    fn json_carries_the_same_answer() {
        let json = FullHashSearchResponse::from(golden());
        assert_eq!(json.cache_duration_s, 300);
        assert_eq!(json.results[0].prefix, "f9c");
        assert_eq!(
            json.results[0].matches[0].full_hash,
            FullHash::of(b"a.b.c/").to_string()
        );
        assert_eq!(json.results[1].prefix, "0123abcd");
        let single = golden().into_single("f9c".parse().unwrap());
        assert_eq!(single.prefix, "f9c");
        assert_eq!(single.matches.len(), 1);
    }

    #[test]
    fn negotiation() {
        assert!(accepts_full_hashes_binary(FULL_HASHES_ACCEPT));
        assert!(accepts_full_hashes_binary(
            "Application/Vnd.Blocksieve.Full-Hashes"
        ));
        assert!(accepts_full_hashes_binary(
            "text/html, application/vnd.blocksieve.full-hashes;q=0.1"
        ));
        assert!(!accepts_full_hashes_binary(
            "application/vnd.blocksieve.full-hashes;q=0"
        ));
        assert!(!accepts_full_hashes_binary("*/*"));
        assert!(!accepts_full_hashes_binary("application/json"));
        assert!(!accepts_full_hashes_binary(""));
        assert!(is_full_hashes_content_type(
            "application/vnd.blocksieve.full-hashes"
        ));
        assert!(is_full_hashes_content_type(
            "application/vnd.blocksieve.full-hashes; v=1"
        ));
        assert!(!is_full_hashes_content_type("application/json"));
    }

    /// A 12-bit bucket of 205 full hashes (the union list's) fits in 7 KB:
    /// 32 bytes a full hash.
    #[test]
    fn a_12_bit_bucket_is_32_bytes_a_full_hash() {
        let prefix: RequestPrefix = "abc".parse().unwrap();
        let matches = (0..205u32)
            .map(|i| {
                let mut h = FullHash::of(&i.to_le_bytes()).0;
                h[0] = 0xab;
                h[1] = 0xc0 | (h[1] & 0x0f);
                ListedFullHash {
                    full_hash: FullHash(h),
                    list: if i % 2 == 0 { "malware" } else { "phishing" }.to_owned(),
                }
            })
            .collect();
        let answer = FullHashAnswer {
            cache_duration_s: 300,
            results: vec![PrefixAnswer { prefix, matches }],
        };
        let bytes = answer.encode().unwrap();
        assert!(bytes.len() <= 40 + 205 * 32, "{} bytes", bytes.len());
        assert!(bytes.len() <= 7_000);
        assert_eq!(FullHashAnswer::decode(&bytes), Ok(answer));
    }

    fn arb_answer() -> impl Strategy<Value = FullHashAnswer> {
        let names = ["malware", "phishing", "social-engineering", "x"];
        let result = (
            0u8..7,
            any::<[u8; 32]>(),
            prop::collection::vec((0usize..4, any::<[u8; 32]>()), 0..6),
        )
            .prop_map(move |(step, seed, hashes)| {
                let bits = 8 + step * 4;
                let prefix = RequestPrefix::of(&FullHash(seed), bits);
                let (start, _) = prefix.range32();
                let matches = hashes
                    .into_iter()
                    .map(|(list, mut h)| {
                        // Keep the prefix's bits, the rest random.
                        let mask = RequestPrefix::of(&FullHash([0xff; 32]), bits).range32().0;
                        let p = start | (u32::from_be_bytes([h[0], h[1], h[2], h[3]]) & !mask);
                        h[..4].copy_from_slice(&p.to_be_bytes());
                        ListedFullHash {
                            full_hash: FullHash(h),
                            list: names[list].to_owned(),
                        }
                    })
                    .collect();
                PrefixAnswer { prefix, matches }
            });
        (any::<u64>(), prop::collection::vec(result, 0..8)).prop_map(|(cache_duration_s, results)| {
            FullHashAnswer {
                cache_duration_s,
                results,
            }
        })
    }

    proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 512,
            failure_persistence: None,
            rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0xf011_4a54),
            ..proptest::test_runner::Config::default()
        })]

        #[test]
        fn encode_then_decode_is_the_same_answer(answer in arb_answer()) {
            let bytes = answer.encode().unwrap();
            prop_assert_eq!(FullHashAnswer::decode(&bytes), Ok(answer));
        }

        #[test]
        fn any_bytes_decode_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = FullHashAnswer::decode(&bytes);
        }
    }
}
