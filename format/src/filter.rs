//! Approximate-membership filters over hash-prefix keys.
//!
//! A [`PrefixFilter`] answers "is this key *probably* in the threat list?":
//! a "no" is always right (no false negatives), a "yes" is wrong with the
//! kind's false-positive rate and must be confirmed with full hashes.
//!
//! Binary fuse filters are from Graf & Lemire, "Binary Fuse Filters: Fast
//! and Smaller Than Xor Filters" (ACM JEA 2022), as implemented by the
//! `xorf` crate. The body layout is pinned in `FORMAT.md` and checked here
//! before any byte reaches `xorf`, whose lookup indexes without bounds checks
//! of its own.

use xorf::{BinaryFuse8, BinaryFuse16, BinaryFuse32, Descriptor, Filter as _};

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
}

impl FilterKind {
    /// Every kind, smallest first.
    pub const ALL: [FilterKind; 3] = [Self::BinaryFuse8, Self::BinaryFuse16, Self::BinaryFuse32];

    /// The byte that identifies this kind in the snapshot header.
    pub fn code(self) -> u8 {
        match self {
            Self::BinaryFuse8 => 1,
            Self::BinaryFuse16 => 2,
            Self::BinaryFuse32 => 3,
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
        }
    }

    /// The false-positive rate per probe of a key that is not in the set:
    /// 2⁻ᶠ for an f-bit fingerprint.
    pub fn theoretical_fpr(self) -> f64 {
        match self {
            Self::BinaryFuse8 => 1.0 / 256.0,
            Self::BinaryFuse16 => 1.0 / 65_536.0,
            Self::BinaryFuse32 => 1.0 / 4_294_967_296.0,
        }
    }

    fn fingerprint_bytes(self) -> usize {
        match self {
            Self::BinaryFuse8 => 1,
            Self::BinaryFuse16 => 2,
            Self::BinaryFuse32 => 4,
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
            format!("unknown filter kind {s:?} (expected one of binary_fuse8, binary_fuse16, binary_fuse32)")
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
    /// Builds a filter of `kind` over `keys`, which must be sorted and unique.
    /// Deterministic: the same keys always give the same filter bytes.
    ///
    /// # Errors
    ///
    /// [`BuildError`] when keys are not strictly increasing, too many, or the
    /// construction fails.
    pub fn build(kind: FilterKind, keys: &[u64]) -> Result<Self, BuildError> {
        if let Some(i) = keys.windows(2).position(|w| w[0] >= w[1]) {
            return Err(BuildError::KeysNotSortedUnique { index: i + 1 });
        }
        if keys.len() > MAX_FILTER_KEYS {
            return Err(BuildError::TooManyKeys {
                count: keys.len(),
                max: MAX_FILTER_KEYS,
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
            }
        };
        Ok(Self {
            kind,
            len: keys.len(),
            inner,
        })
    }

    /// Whether `key` is probably in the set (`false` is certain).
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        match &self.inner {
            Inner::Empty => false,
            Inner::Fuse8(f) => f.contains(&key),
            Inner::Fuse16(f) => f.contains(&key),
            Inner::Fuse32(f) => f.contains(&key),
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

    /// Size of the serialized (uncompressed) body in bytes.
    pub fn body_len(&self) -> usize {
        let fingerprints = match &self.inner {
            Inner::Empty => 0,
            Inner::Fuse8(f) => f.fingerprints.len(),
            Inner::Fuse16(f) => f.fingerprints.len(),
            Inner::Fuse32(f) => f.fingerprints.len(),
        };
        FUSE_HEADER_LEN + fingerprints * self.kind.fingerprint_bytes()
    }

    /// Uncompressed bits per key (`body_len × 8 / len`); 0 for an empty filter.
    pub fn bits_per_key(&self) -> f64 {
        if self.len == 0 {
            0.0
        } else {
            self.body_len() as f64 * 8.0 / self.len as f64
        }
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
            Inner::Empty => out.extend_from_slice(&[0u8; FUSE_HEADER_LEN]),
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
        }
    }

    /// Parses and validates a body written by [`Self::write_body`]. Every
    /// index the lookup can compute is proven in bounds before the filter is
    /// built, so `contains` cannot panic on a body that passes.
    pub(crate) fn read_body(kind: FilterKind, entry_count: u64, body: &[u8]) -> Result<Self, DecodeError> {
        let truncated = |field| DecodeError::Truncated { field };
        let mut r = Reader::new(body);
        let seed = r.u64().ok_or(truncated("filter seed"))?;
        let segment_length = r.u32().ok_or(truncated("filter segment_length"))?;
        let segment_length_mask = r.u32().ok_or(truncated("filter segment_length_mask"))?;
        let segment_count_length = r.u32().ok_or(truncated("filter segment_count_length"))?;
        let count = r.u32().ok_or(truncated("filter fingerprint count"))?;
        let width = kind.fingerprint_bytes();
        let expected = (count as usize)
            .checked_mul(width)
            .ok_or(DecodeError::FilterLayout {
                field: "fingerprint count",
                value: u64::from(count),
            })?;
        if r.remaining() != expected {
            return Err(DecodeError::FilterLayout {
                field: "fingerprint bytes",
                value: r.remaining() as u64,
            });
        }
        let len = usize::try_from(entry_count).map_err(|_| DecodeError::FilterLayout {
            field: "entry count",
            value: entry_count,
        })?;
        if entry_count == 0 {
            if count != 0
                || seed != 0
                || segment_length != 0
                || segment_length_mask != 0
                || segment_count_length != 0
            {
                return Err(DecodeError::FilterLayout {
                    field: "empty filter descriptor",
                    value: u64::from(count),
                });
            }
            return Ok(Self {
                kind,
                len: 0,
                inner: Inner::Empty,
            });
        }
        let layout = |field, value: u32| DecodeError::FilterLayout {
            field,
            value: u64::from(value),
        };
        if count == 0 {
            return Err(DecodeError::EmptyFilter { entry_count });
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
        let inner = match kind {
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
        };
        Ok(Self { kind, len, inner })
    }
}

/// Bytes before the fingerprints in a binary fuse body: seed (8),
/// segment_length (4), segment_length_mask (4), segment_count_length (4),
/// fingerprint count (4).
pub(crate) const FUSE_HEADER_LEN: usize = 24;

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: u64, step: u64) -> Vec<u64> {
        (0..n).map(|i| i * step + 7).collect()
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
                let g = PrefixFilter::read_body(kind, n, &body).unwrap();
                assert!(k.iter().all(|&x| g.contains(x)), "{kind} n={n}");
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
