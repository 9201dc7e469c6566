//! Approximate-membership filters over hash-prefix keys.
//!
//! A [`PrefixFilter`] answers "is this key *probably* in the threat list?":
//! a "no" is always right (no false negatives), a "yes" is wrong with the
//! kind's false-positive rate and must be confirmed with full hashes.
//!
//! Binary fuse filters are from Graf & Lemire, "Binary Fuse Filters: Fast
//! and Smaller Than Xor Filters" (ACM JEA 2022), as implemented by the
//! `xorf` crate, which builds them; the lookup is done here with `xorf`'s
//! arithmetic (`fuse_contains`), so that it inlines into the caller's loop.
//! The body layout is pinned in `FORMAT.md` and checked here before a filter
//! is made of it, so every index a lookup computes is in bounds.

use xorf::{BinaryFuse8, BinaryFuse16, BinaryFuse32, Descriptor};

use crate::error::DecodeError;
use crate::reader::Reader;

/// Which filter a snapshot carries. The numeric value is the byte stored in
/// the snapshot header.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterKind {
    /// Binary fuse filter with 8-bit fingerprints: ≈ 9.0 bits per key,
    /// false-positive rate 2⁻⁸ ≈ 0.39 % per probe.
    BinaryFuse8,
    /// Binary fuse filter with 16-bit fingerprints: ≈ 18 bits per key,
    /// false-positive rate 2⁻¹⁶ ≈ 0.0015 % per probe.
    BinaryFuse16,
    /// Binary fuse filter with 32-bit fingerprints: ≈ 36 bits per key,
    /// false-positive rate 2⁻³² per probe.
    BinaryFuse32,
    /// Bloom filter (Bloom 1970) with double hashing (Kirsch & Mitzenmacher,
    /// "Less Hashing, Same Performance", ESA 2006): configurable bits per
    /// key, false-positive rate (1 − e^(−kn/m))^k; with 12 bits per key and
    /// k = 8 about 0.31 %. Layout in `FORMAT.md`.
    Bloom,
}

impl FilterKind {
    /// Every kind, smallest first.
    pub const ALL: [FilterKind; 4] = [
        Self::BinaryFuse8,
        Self::BinaryFuse16,
        Self::BinaryFuse32,
        Self::Bloom,
    ];

    /// The byte that identifies this kind in the snapshot header.
    pub fn code(self) -> u8 {
        match self {
            Self::BinaryFuse8 => 1,
            Self::BinaryFuse16 => 2,
            Self::BinaryFuse32 => 3,
            Self::Bloom => 4,
        }
    }

    /// The kind with header byte `code`, if any.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The name used in configuration and JSON, e.g. `binary_fuse8`.
    pub fn name(self) -> &'static str {
        match self {
            Self::BinaryFuse8 => "binary_fuse8",
            Self::BinaryFuse16 => "binary_fuse16",
            Self::BinaryFuse32 => "binary_fuse32",
            Self::Bloom => "bloom",
        }
    }

    /// Bytes per fingerprint (binary fuse) or per storage word (Bloom: 8).
    fn fingerprint_bytes(self) -> usize {
        match self {
            Self::BinaryFuse8 => 1,
            Self::BinaryFuse16 => 2,
            Self::BinaryFuse32 => 4,
            Self::Bloom => 8,
        }
    }
}

impl std::fmt::Display for FilterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for FilterKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
            format!("unknown filter kind {s:?} (expected one of {})", names.join(", "))
        })
    }
}

/// Why a filter could not be built.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Keys must be strictly increasing (sorted, no duplicates).
    #[error("filter keys are not sorted and unique at index {index}")]
    KeysNotSortedUnique {
        /// The first index whose key is not greater than the one before.
        index: usize,
    },
    /// More keys than a binary fuse filter can index (its positions are `u32`).
    #[error("{count} keys is more than the filter maximum of {max}")]
    TooManyKeys {
        /// Number of keys given.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// Bloom bits per key outside 1..=64.
    #[error("bloom bits per key {bits_per_key} is outside 1..=64")]
    BloomBitsPerKey {
        /// The requested bits per key.
        bits_per_key: u32,
    },
    /// The construction did not converge (practically never for distinct keys).
    #[error("binary fuse construction failed for {count} keys")]
    ConstructionFailed {
        /// Number of keys given.
        count: usize,
    },
}

/// The most keys one filter may hold: 2³⁰, far above any real threat list and
/// well inside the `u32` index space of binary fuse filters.
pub const MAX_FILTER_KEYS: usize = 1 << 30;

#[derive(Debug, Clone)]
enum Inner {
    /// A filter over no keys: every probe is "no".
    Empty,
    Fuse8(BinaryFuse8),
    Fuse16(BinaryFuse16),
    Fuse32(BinaryFuse32),
    Bloom(Bloom),
}

/// Default Bloom filter size: 12 bits per key (k = 8, false-positive rate
/// ≈ 0.31 %, close to BinaryFuse8's 0.39 % at 9 bits per key).
pub const DEFAULT_BLOOM_BITS_PER_KEY: u32 = 12;

/// The seed every Bloom filter is built with. Fixed, so the same keys always
/// give the same bytes; stored in the body so readers never assume it.
pub const BLOOM_SEED: u64 = 0x626c_6f63_6b73_6965; // "blocksie"

/// Most Bloom hash functions a reader accepts.
const MAX_BLOOM_HASHES: u8 = 32;

/// murmur3's 64-bit finalizer (`fmix64`), the mixing step of every binary
/// fuse and Bloom probe; pinned here and in `FORMAT.md`.
#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// The binary fuse lookup of `FORMAT.md` ("Binary fuse"): the arithmetic of
/// `xorf` 0.13's `contains`, written out here so that it inlines into
/// [`PrefixFilter::contains`] and its callers; `xorf`'s is an out-of-line
/// call per probe, which made a probe through a snapshot cost 30 % more
/// instructions than the bare filter (`benches/probe.rs`, callgrind).
/// `truncate` cuts the 64-bit fingerprint to the slot width. An index
/// outside `fingerprints` (impossible for a layout `read_fuse` accepted or
/// `xorf` built) answers "no" instead of panicking.
#[inline]
fn fuse_contains<T>(d: &Descriptor, fingerprints: &[T], key: u64, truncate: impl Fn(u64) -> T) -> bool
where
    T: Copy + PartialEq + Default + std::ops::BitXor<Output = T>,
{
    let (hash, [h0, h1, h2]) = fuse_slots(d, key);
    match (
        fingerprints.get(h0 as usize),
        fingerprints.get(h1 as usize),
        fingerprints.get(h2 as usize),
    ) {
        (Some(&a), Some(&b), Some(&c)) => truncate(hash ^ (hash >> 32)) ^ a ^ b ^ c == T::default(),
        _ => false,
    }
}

/// `key`'s hash and its three slots in a binary fuse filter (the layout of
/// [`fuse_contains`]).
#[inline(always)]
fn fuse_slots(d: &Descriptor, key: u64) -> (u64, [u32; 3]) {
    let hash = fmix64(key.wrapping_add(d.seed));
    let h0 = ((u128::from(hash) * u128::from(d.segment_count_length)) >> 64) as u32;
    let h1 = h0.wrapping_add(d.segment_length) ^ ((hash >> 18) as u32 & d.segment_length_mask);
    let h2 = h0.wrapping_add(d.segment_length).wrapping_add(d.segment_length)
        ^ (hash as u32 & d.segment_length_mask);
    (hash, [h0, h1, h2])
}

/// Starts loading the cache lines holding `key`'s three slots.
#[inline(always)]
fn fuse_prefetch<T>(d: &Descriptor, fingerprints: &[T], key: u64) {
    for slot in fuse_slots(d, key).1 {
        if let Some(fingerprint) = fingerprints.get(slot as usize) {
            prefetch(fingerprint);
        }
    }
}

/// A hint to the CPU to start loading the cache line holding `value`,
/// without waiting for it: no effect on any answer, and nothing on targets
/// without SSE's prefetch instruction. Through `safe_arch`, which wraps the
/// intrinsic safely (a prefetch never faults).
#[inline(always)]
fn prefetch<T>(value: &T) {
    #[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), target_feature = "sse"))]
    safe_arch::prefetch_t0(value);
    #[cfg(not(all(any(target_arch = "x86", target_arch = "x86_64"), target_feature = "sse")))]
    let _ = value;
}

/// A Bloom filter over u64 keys with `hash_count` probes by double hashing:
/// `h1 = fmix64(key + seed)`, `h2 = fmix64(h1 ^ 0x9e3779b97f4a7c15) | 1`,
/// probe `i` sets bit `(fmix64(h1 + i·h2) × bit_count) >> 64` (all arithmetic
/// mod 2⁶⁴, the product taken in 128 bits).
#[derive(Debug, Clone)]
struct Bloom {
    seed: u64,
    bit_count: u64,
    hash_count: u8,
    /// Bit `b` is bit `b % 64` of word `b / 64`.
    words: Box<[u64]>,
}

impl Bloom {
    /// The bit positions probed for `key`, all `< bit_count`.
    fn positions(seed: u64, bit_count: u64, hash_count: u8, key: u64) -> impl Iterator<Item = u64> {
        let h1 = fmix64(key.wrapping_add(seed));
        let h2 = fmix64(h1 ^ 0x9e37_79b9_7f4a_7c15) | 1;
        (0..u64::from(hash_count)).map(move |i| {
            // Finalizing each double-hashing step keeps the k positions
            // independent even for tiny filters, where a bare arithmetic
            // progression repeats across keys far more often than 2^-k.
            let h = fmix64(h1.wrapping_add(i.wrapping_mul(h2)));
            ((u128::from(h) * u128::from(bit_count)) >> 64) as u64
        })
    }

    fn build(keys: &[u64], bits_per_key: u32) -> Self {
        let bits = (keys.len() as u64)
            .saturating_mul(u64::from(bits_per_key))
            .max(64);
        let bit_count = bits.div_ceil(64) * 64;
        // k = bits per key × ln 2 minimises the false-positive rate.
        let hash_count =
            ((f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u8).clamp(1, MAX_BLOOM_HASHES);
        let mut bloom = Self {
            seed: BLOOM_SEED,
            bit_count,
            hash_count,
            words: vec![0u64; (bit_count / 64) as usize].into_boxed_slice(),
        };
        for &key in keys {
            for b in Self::positions(bloom.seed, bit_count, hash_count, key) {
                bloom.words[(b / 64) as usize] |= 1 << (b % 64);
            }
        }
        bloom
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        // Every position is < bit_count = 64 × words.len(): proven at decode.
        Self::positions(self.seed, self.bit_count, self.hash_count, key).all(|b| {
            self.words
                .get((b / 64) as usize)
                .is_some_and(|w| w & (1 << (b % 64)) != 0)
        })
    }

    /// The false-positive rate of these bits: a key not in the set hits
    /// when each of its k positions, independent and uniform, lands on a
    /// set bit, (set bits / m)^k. The textbook (1 − e^(−kn/m))^k is the
    /// rate of the mean filter, and a small filter strays far from it: at
    /// 64 bits and k = 8, five keys' 40 positions set 30 bits on average
    /// but 35 or more in one key set in eighty, (35/64)^8 = 3.7 times the
    /// textbook rate, which the canary would take for a broken filter.
    ///
    /// The bits counted are at most [`Bloom::most_bits_set`] of `n` keys:
    /// more than n keys set but once in a billion key sets is no chance but
    /// a broken build (bits set beyond the keys' positions, or every bit),
    /// and a rate taken from those bits would hide it from the canary,
    /// which measures the same rate.
    fn theoretical_fpr(&self, n: usize) -> f64 {
        let set: u64 = self.words.iter().map(|w| u64::from(w.count_ones())).sum();
        let set = (set as f64).min(self.most_bits_set(n));
        (set / self.bit_count as f64).powi(i32::from(self.hash_count))
    }

    /// The most bits `n` distinct keys set but once in a billion key sets:
    /// their kn positions, independent and uniform over m bits, leave
    /// m·q₁ bits clear on average, q₁ = (1 − 1/m)^(kn), with variance
    /// m·q₁ + m(m − 1)·q₂ − (m·q₁)², q₂ = (1 − 2/m)^(kn); the mean bits set
    /// plus six standard deviations (and one, for a count's steps).
    fn most_bits_set(&self, n: usize) -> f64 {
        let m = self.bit_count as f64;
        let throws = f64::from(self.hash_count) * n as f64;
        let q1 = (throws * (-1.0 / m).ln_1p()).exp();
        let q2 = (throws * (-2.0 / m).ln_1p()).exp();
        let clear = m * q1;
        let variance = (clear + m * (m - 1.0) * q2 - clear * clear).max(0.0);
        (m - clear + 6.0 * variance.sqrt() + 1.0).min(m)
    }
}

/// An immutable approximate-membership filter over 32- or 64-bit hash-prefix
/// keys.
#[derive(Debug, Clone)]
pub struct PrefixFilter {
    kind: FilterKind,
    len: usize,
    inner: Inner,
}

impl PrefixFilter {
    /// Builds a filter of `kind` over `keys`, which must be sorted and unique
    /// (a Bloom filter gets [`DEFAULT_BLOOM_BITS_PER_KEY`]). Deterministic:
    /// the same keys always give the same filter bytes.
    ///
    /// # Errors
    ///
    /// [`BuildError`] when keys are not strictly increasing, too many, or the
    /// construction fails.
    pub fn build(kind: FilterKind, keys: &[u64]) -> Result<Self, BuildError> {
        Self::build_with(kind, keys, DEFAULT_BLOOM_BITS_PER_KEY)
    }

    /// Like [`Self::build`], with the Bloom filter's bits per key (ignored by
    /// binary fuse kinds).
    ///
    /// # Errors
    ///
    /// As [`Self::build`], and [`BuildError::BloomBitsPerKey`] outside 1..=64.
    pub fn build_with(kind: FilterKind, keys: &[u64], bloom_bits_per_key: u32) -> Result<Self, BuildError> {
        if let Some(i) = keys.windows(2).position(|w| w[0] >= w[1]) {
            return Err(BuildError::KeysNotSortedUnique { index: i + 1 });
        }
        if keys.len() > MAX_FILTER_KEYS {
            return Err(BuildError::TooManyKeys {
                count: keys.len(),
                max: MAX_FILTER_KEYS,
            });
        }
        if kind == FilterKind::Bloom && !(1..=64).contains(&bloom_bits_per_key) {
            return Err(BuildError::BloomBitsPerKey {
                bits_per_key: bloom_bits_per_key,
            });
        }
        let failed = |_| BuildError::ConstructionFailed { count: keys.len() };
        let inner = if keys.is_empty() {
            Inner::Empty
        } else {
            match kind {
                FilterKind::BinaryFuse8 => Inner::Fuse8(BinaryFuse8::try_from(keys).map_err(failed)?),
                FilterKind::BinaryFuse16 => Inner::Fuse16(BinaryFuse16::try_from(keys).map_err(failed)?),
                FilterKind::BinaryFuse32 => Inner::Fuse32(BinaryFuse32::try_from(keys).map_err(failed)?),
                FilterKind::Bloom => Inner::Bloom(Bloom::build(keys, bloom_bits_per_key)),
            }
        };
        Ok(Self {
            kind,
            len: keys.len(),
            inner,
        })
    }

    /// Whether `key` is probably in the set (`false` is certain).
    // Always inlined, with the binary fuse lookups in it: a probe is ~50
    // instructions and a call per probe added half as many again
    // (`benches/probe.rs`).
    #[inline(always)]
    pub fn contains(&self, key: u64) -> bool {
        match &self.inner {
            Inner::Empty => false,
            Inner::Fuse8(f) => fuse_contains(&f.descriptor, &f.fingerprints, key, |h| h as u8),
            Inner::Fuse16(f) => fuse_contains(&f.descriptor, &f.fingerprints, key, |h| h as u16),
            Inner::Fuse32(f) => fuse_contains(&f.descriptor, &f.fingerprints, key, |h| h as u32),
            Inner::Bloom(b) => b.contains(key),
        }
    }

    /// Starts loading memory [`Self::contains`] will read for `key`: a
    /// binary fuse filter's three slots; a Bloom filter's first two words
    /// (a key not listed, most of them, usually stops there: loading all k
    /// would cost more than it saves). A caller with other work to do
    /// before it probes (hashing a URL's next expressions) overlaps those
    /// reads with it: each is usually a cache miss once a filter outgrows
    /// the caches. Changes no answer. On x86/x86_64 only (`prefetcht0`);
    /// elsewhere it does nothing.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        match &self.inner {
            Inner::Empty => {}
            Inner::Fuse8(f) => fuse_prefetch(&f.descriptor, &f.fingerprints, key),
            Inner::Fuse16(f) => fuse_prefetch(&f.descriptor, &f.fingerprints, key),
            Inner::Fuse32(f) => fuse_prefetch(&f.descriptor, &f.fingerprints, key),
            Inner::Bloom(b) => {
                for bit in Bloom::positions(b.seed, b.bit_count, b.hash_count, key).take(2) {
                    if let Some(word) = b.words.get((bit / 64) as usize) {
                        prefetch(word);
                    }
                }
            }
        }
    }

    /// The filter kind.
    pub fn kind(&self) -> FilterKind {
        self.kind
    }

    /// Number of keys the filter was built over.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the filter was built over no keys.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The kind's parameter byte in the snapshot header: the Bloom hash
    /// count k, 0 for binary fuse filters.
    pub fn param(&self) -> u8 {
        match &self.inner {
            Inner::Bloom(b) => b.hash_count,
            _ => 0,
        }
    }

    /// The false-positive rate per probe of a key not in the set, in theory:
    /// 2⁻ᶠ for an f-bit binary fuse fingerprint, (s/m)^k for a Bloom filter
    /// with s of its m bits set and k hashes (close to (1 − e^(−kn/m))^k
    /// over n keys, once m is large; s no more than n keys set but once in
    /// a billion key sets); 0 for an empty filter.
    pub fn theoretical_fpr(&self) -> f64 {
        match &self.inner {
            Inner::Empty => 0.0,
            Inner::Fuse8(_) => 1.0 / 256.0,
            Inner::Fuse16(_) => 1.0 / 65_536.0,
            Inner::Fuse32(_) => 1.0 / 4_294_967_296.0,
            Inner::Bloom(b) => b.theoretical_fpr(self.len),
        }
    }

    /// Size of the serialized (uncompressed) body in bytes.
    pub fn body_len(&self) -> usize {
        let slots = match &self.inner {
            Inner::Empty => 0,
            Inner::Fuse8(f) => f.fingerprints.len(),
            Inner::Fuse16(f) => f.fingerprints.len(),
            Inner::Fuse32(f) => f.fingerprints.len(),
            Inner::Bloom(b) => b.words.len(),
        };
        BODY_HEADER_LEN + slots * self.kind.fingerprint_bytes()
    }

    /// Uncompressed bits per key (`body_len × 8 / len`); 0 for an empty filter.
    pub fn bits_per_key(&self) -> f64 {
        if self.len == 0 {
            0.0
        } else {
            self.body_len() as f64 * 8.0 / self.len as f64
        }
    }

    /// The uncompressed body bytes, as laid out in `FORMAT.md` ("Filter body").
    pub fn to_body_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_body(&mut out);
        out
    }

    /// Appends the body layout of `FORMAT.md` ("Filter body") to `out`.
    pub(crate) fn write_body(&self, out: &mut Vec<u8>) {
        fn descriptor(out: &mut Vec<u8>, d: &Descriptor, count: usize) {
            out.extend_from_slice(&d.seed.to_le_bytes());
            out.extend_from_slice(&d.segment_length.to_le_bytes());
            out.extend_from_slice(&d.segment_length_mask.to_le_bytes());
            out.extend_from_slice(&d.segment_count_length.to_le_bytes());
            // Fits: the array length of a filter over <= 2^30 keys is < 2^32.
            out.extend_from_slice(&u32::try_from(count).unwrap_or(u32::MAX).to_le_bytes());
        }
        out.reserve(self.body_len());
        match &self.inner {
            Inner::Empty => out.extend_from_slice(&[0u8; BODY_HEADER_LEN]),
            Inner::Fuse8(f) => {
                descriptor(out, &f.descriptor, f.fingerprints.len());
                out.extend_from_slice(&f.fingerprints);
            }
            Inner::Fuse16(f) => {
                descriptor(out, &f.descriptor, f.fingerprints.len());
                out.extend(f.fingerprints.iter().flat_map(|x| x.to_le_bytes()));
            }
            Inner::Fuse32(f) => {
                descriptor(out, &f.descriptor, f.fingerprints.len());
                out.extend(f.fingerprints.iter().flat_map(|x| x.to_le_bytes()));
            }
            Inner::Bloom(b) => {
                out.extend_from_slice(&b.seed.to_le_bytes());
                out.extend_from_slice(&b.bit_count.to_le_bytes());
                out.push(b.hash_count);
                out.extend_from_slice(&[0u8; 7]);
                out.extend(b.words.iter().flat_map(|w| w.to_le_bytes()));
            }
        }
    }

    /// Parses and validates a body written by [`Self::write_body`]. Every
    /// index the lookup can compute is proven in bounds before the filter is
    /// built, so `contains` cannot panic on a body that passes.
    pub(crate) fn read_body(
        kind: FilterKind,
        param: u8,
        entry_count: u64,
        body: &[u8],
    ) -> Result<Self, DecodeError> {
        let len = usize::try_from(entry_count).map_err(|_| DecodeError::FilterLayout {
            field: "entry count",
            value: entry_count,
        })?;
        let head = body.get(..BODY_HEADER_LEN).ok_or(DecodeError::Truncated {
            field: "filter body header",
        })?;
        if entry_count == 0 {
            if body.len() != BODY_HEADER_LEN || head.iter().any(|&b| b != 0) || param != 0 {
                return Err(DecodeError::FilterLayout {
                    field: "empty filter body",
                    value: body.len() as u64,
                });
            }
            return Ok(Self {
                kind,
                len: 0,
                inner: Inner::Empty,
            });
        }
        if body.len() == BODY_HEADER_LEN {
            return Err(DecodeError::EmptyFilter { entry_count });
        }
        let inner = if kind == FilterKind::Bloom {
            Inner::Bloom(read_bloom(param, entry_count, body)?)
        } else {
            if param != 0 {
                return Err(DecodeError::InvalidField {
                    field: "filter_param",
                    value: param.into(),
                });
            }
            read_fuse(kind, entry_count, body)?
        };
        Ok(Self { kind, len, inner })
    }
}

fn read_bloom(param: u8, entry_count: u64, body: &[u8]) -> Result<Bloom, DecodeError> {
    let t = |field| DecodeError::Truncated { field };
    let layout = |field, value: u64| DecodeError::FilterLayout { field, value };
    let mut r = Reader::new(body);
    let seed = r.u64().ok_or(t("bloom seed"))?;
    let bit_count = r.u64().ok_or(t("bloom bit_count"))?;
    let hash_count = r.u8().ok_or(t("bloom hash_count"))?;
    let reserved = r.take(7).ok_or(t("bloom reserved"))?;
    if reserved.iter().any(|&b| b != 0) {
        return Err(layout("bloom reserved", 0));
    }
    if hash_count == 0 || hash_count > MAX_BLOOM_HASHES || hash_count != param {
        return Err(layout("bloom hash_count", hash_count.into()));
    }
    if bit_count == 0
        || bit_count % 64 != 0
        || bit_count / 64 != (r.remaining() / 8) as u64
        || !r.remaining().is_multiple_of(8)
    {
        return Err(layout("bloom bit_count", bit_count));
    }
    if entry_count > bit_count {
        return Err(layout("entry count", entry_count));
    }
    let words: Box<[u64]> = r
        .take(r.remaining())
        .ok_or(t("bloom bits"))?
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect();
    Ok(Bloom {
        seed,
        bit_count,
        hash_count,
        words,
    })
}

fn read_fuse(kind: FilterKind, entry_count: u64, body: &[u8]) -> Result<Inner, DecodeError> {
    let truncated = |field| DecodeError::Truncated { field };
    let mut r = Reader::new(body);
    let seed = r.u64().ok_or(truncated("filter seed"))?;
    let segment_length = r.u32().ok_or(truncated("filter segment_length"))?;
    let segment_length_mask = r.u32().ok_or(truncated("filter segment_length_mask"))?;
    let segment_count_length = r.u32().ok_or(truncated("filter segment_count_length"))?;
    let count = r.u32().ok_or(truncated("filter fingerprint count"))?;
    let width = kind.fingerprint_bytes();
    let layout = |field, value: u32| DecodeError::FilterLayout {
        field,
        value: u64::from(value),
    };
    let expected = (count as usize)
        .checked_mul(width)
        .ok_or(layout("fingerprint count", count))?;
    if r.remaining() != expected {
        return Err(DecodeError::FilterLayout {
            field: "fingerprint bytes",
            value: r.remaining() as u64,
        });
    }
    // segment_length: a power of two, at most 2^18 (xorf's cap).
    if !segment_length.is_power_of_two() || segment_length > 1 << 18 {
        return Err(layout("segment_length", segment_length));
    }
    if segment_length_mask != segment_length - 1 {
        return Err(layout("segment_length_mask", segment_length_mask));
    }
    if segment_count_length == 0 || segment_count_length % segment_length != 0 {
        return Err(layout("segment_count_length", segment_count_length));
    }
    // Lookup reads h0 < segment_count_length and h1, h2 within the next two
    // segments: every index is < segment_count_length + 2 * segment_length.
    let needed = u64::from(segment_count_length) + 2 * u64::from(segment_length);
    if needed > u64::from(count) {
        return Err(layout("fingerprint count", count));
    }
    // The filter cannot hold more keys than it has slots.
    if entry_count > u64::from(count) {
        return Err(DecodeError::FilterLayout {
            field: "entry count",
            value: entry_count,
        });
    }
    let descriptor = Descriptor {
        seed,
        segment_length,
        segment_length_mask,
        segment_count_length,
    };
    let bytes = r.take(expected).ok_or(truncated("fingerprints"))?;
    Ok(match kind {
        FilterKind::BinaryFuse8 => Inner::Fuse8(BinaryFuse8 {
            descriptor,
            fingerprints: bytes.into(),
        }),
        FilterKind::BinaryFuse16 => Inner::Fuse16(BinaryFuse16 {
            descriptor,
            fingerprints: bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect(),
        }),
        FilterKind::BinaryFuse32 => Inner::Fuse32(BinaryFuse32 {
            descriptor,
            fingerprints: bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        }),
        FilterKind::Bloom => return Err(layout("binary fuse body for filter kind", u32::from(kind.code()))),
    })
}

/// Bytes before the slots of a filter body: for binary fuse, seed (8),
/// segment_length (4), segment_length_mask (4), segment_count_length (4),
/// fingerprint count (4); for Bloom, seed (8), bit_count (8), hash_count
/// (1), reserved (7).
pub(crate) const BODY_HEADER_LEN: usize = 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_kinds_parse_by_name_and_a_bad_name_lists_them_all() {
        for kind in FilterKind::ALL {
            assert_eq!(kind.name().parse::<FilterKind>(), Ok(kind));
        }
        let err = "cuckoo".parse::<FilterKind>().unwrap_err();
        for kind in FilterKind::ALL {
            assert!(err.contains(kind.name()), "{err}");
        }
    }

    fn keys(n: u64, step: u64) -> Vec<u64> {
        (0..n).map(|i| i * step + 7).collect()
    }

    /// Regression: the theoretical rate followed every bit set, so a Bloom
    /// filter with more bits set than its keys explain (a build that sets
    /// extra bits, or every bit: a filter that answers "maybe" for every
    /// URL) had the very rate the canary measures, and the `max_fpr_ratio`
    /// gate, which compares the two, published it. The bits counted stop at
    /// what the keys set but once in a billion key sets.
    #[test]
    fn a_bloom_filter_with_more_bits_set_than_its_keys_explain_keeps_their_rate() {
        let n = 20_000u64;
        let filter = PrefixFilter::build(FilterKind::Bloom, &keys(n, 0x9e37_79b9)).unwrap();
        let healthy = filter.theoretical_fpr();
        let Inner::Bloom(bloom) = &filter.inner else {
            unreachable!("a Bloom filter");
        };
        let k = f64::from(bloom.hash_count);
        let textbook = (1.0 - (-k * n as f64 / bloom.bit_count as f64).exp()).powf(k);
        assert!((healthy / textbook - 1.0).abs() < 0.05, "{healthy} vs {textbook}");
        let mut saturated = filter.clone();
        let Inner::Bloom(bloom) = &mut saturated.inner else {
            unreachable!("a Bloom filter");
        };
        bloom.words.iter_mut().for_each(|w| *w = u64::MAX);
        assert!(saturated.contains(u64::MAX), "every key hits");
        let rate = saturated.theoretical_fpr();
        assert!(rate < 1.2 * textbook, "{rate} vs {textbook}");
    }

    #[test]
    fn round_trip_every_kind_and_small_sizes() {
        for kind in FilterKind::ALL {
            for n in [0u64, 1, 2, 3, 5, 17, 100, 1000] {
                let k = keys(n, 0x9e37_79b9);
                let f = PrefixFilter::build(kind, &k).unwrap();
                let mut body = Vec::new();
                f.write_body(&mut body);
                assert_eq!(body.len(), f.body_len());
                let g = PrefixFilter::read_body(kind, f.param(), n, &body).unwrap();
                assert!(k.iter().all(|&x| g.contains(x)), "{kind} n={n}");
                // A prefetch of any key, listed or not, never panics (and,
                // taking `&self`, cannot change an answer).
                let probes: Vec<u64> = (0..64)
                    .map(|i: u64| i.wrapping_mul(0x5851_f42d_4c95_7f2d))
                    .chain(k.iter().copied())
                    .collect();
                let before: Vec<bool> = probes.iter().map(|&x| g.contains(x)).collect();
                probes.iter().for_each(|&x| g.prefetch(x));
                let after: Vec<bool> = probes.iter().map(|&x| g.contains(x)).collect();
                assert_eq!(before, after, "{kind} n={n}");
            }
        }
    }

    #[test]
    fn fuse_lookup_answers_exactly_as_xorf() {
        use rand::{Rng as _, SeedableRng as _};
        use xorf::Filter as _;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for n in [1usize, 2, 100, 20_000] {
            let mut k: Vec<u64> = (0..n).map(|_| u64::from(rng.r#gen::<u32>())).collect();
            k.sort_unstable();
            k.dedup();
            let mut probes = k.clone();
            probes.extend((0..50_000).map(|_| u64::from(rng.r#gen::<u32>())));
            probes.extend((0..50_000).map(|_| rng.r#gen::<u64>()));
            for kind in [
                FilterKind::BinaryFuse8,
                FilterKind::BinaryFuse16,
                FilterKind::BinaryFuse32,
            ] {
                let ours = PrefixFilter::build(kind, &k).unwrap();
                let xorf_says = |key: u64| match &ours.inner {
                    Inner::Fuse8(f) => f.contains(&key),
                    Inner::Fuse16(f) => f.contains(&key),
                    Inner::Fuse32(f) => f.contains(&key),
                    _ => unreachable!(),
                };
                for &p in &probes {
                    assert_eq!(ours.contains(p), xorf_says(p), "{kind} n={n} key={p:#x}");
                }
            }
        }
    }

    #[test]
    fn rejects_unsorted_keys() {
        assert_eq!(
            PrefixFilter::build(FilterKind::BinaryFuse8, &[3, 2]).unwrap_err(),
            BuildError::KeysNotSortedUnique { index: 1 }
        );
        assert!(PrefixFilter::build(FilterKind::BinaryFuse8, &[3, 3]).is_err());
    }
}
