//! Rice-Golomb coding of a strictly ascending set of 32-bit hash prefixes,
//! the encoding Safe Browsing v4 uses for its additions
//! (`RiceDeltaEncoding`), with one change: a gap is stored minus one, so a
//! repeated value cannot be written at all.
//!
//! The first value travels outside the bit stream (in the delta header).
//! Each later value `a[i]` is the gap `g = a[i] - a[i-1] - 1`, written as
//! its quotient `g >> k` in unary (that many 1 bits, then a 0 bit) followed
//! by its `k` low bits, least significant first. Bits fill each byte from
//! its least significant bit up; the last byte is padded with 0 bits.

/// The most bits a Rice parameter may have: a gap is below 2^32.
pub const MAX_RICE_K: u8 = 31;

/// Why a Rice-coded body did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RiceError {
    /// The bits ran out before the declared count of values was read.
    Truncated,
    /// A value would pass `u32::MAX`.
    Overflow,
    /// Bits or bytes are left after the last value (padding must be zero and
    /// shorter than a byte).
    TrailingBits,
}

/// The Rice parameter that gives the shortest body for `values` (strictly
/// ascending), the smallest one on a tie; 0 for fewer than two values.
pub(crate) fn best_k(values: &[u32]) -> u8 {
    if values.len() < 2 {
        return 0;
    }
    let gaps: Vec<u32> = values.windows(2).map(|w| w[1] - w[0] - 1).collect();
    let mut best = (u64::MAX, 0u8);
    for k in 0..=MAX_RICE_K {
        let bits: u64 = gaps.iter().map(|&g| u64::from(g >> k) + 1 + u64::from(k)).sum();
        if bits < best.0 {
            best = (bits, k);
        }
    }
    best.1
}

/// Encodes the gaps of `values` (strictly ascending; the first value is
/// not written) with parameter `k` (at most [`MAX_RICE_K`]).
pub(crate) fn encode(values: &[u32], k: u8) -> Vec<u8> {
    let mut out = BitWriter::default();
    for w in values.windows(2) {
        let gap = w[1] - w[0] - 1;
        let quotient = gap >> k;
        for _ in 0..quotient {
            out.push(true);
        }
        out.push(false);
        for bit in 0..k {
            out.push((gap >> bit) & 1 == 1);
        }
    }
    out.bytes
}

/// Decodes `count` values (the first one given) from `body` with parameter
/// `k`: the inverse of [`encode`]. `count` must be at least 1.
pub(crate) fn decode(first: u32, count: usize, k: u8, body: &[u8]) -> Result<Vec<u32>, RiceError> {
    // Every value after the first takes at least k + 1 bits: the caller's
    // count is checked against the body's length before anything is
    // allocated for it.
    let min_bits = (count.saturating_sub(1)).saturating_mul(usize::from(k) + 1);
    if min_bits > body.len().saturating_mul(8) {
        return Err(RiceError::Truncated);
    }
    let mut values = Vec::with_capacity(count);
    values.push(first);
    let mut bits = BitReader { bytes: body, pos: 0 };
    let mut last = u64::from(first);
    for _ in 1..count {
        let mut quotient: u64 = 0;
        while bits.next().ok_or(RiceError::Truncated)? {
            quotient += 1;
            if quotient > u64::from(u32::MAX) >> k {
                return Err(RiceError::Overflow);
            }
        }
        let mut remainder: u64 = 0;
        for bit in 0..k {
            if bits.next().ok_or(RiceError::Truncated)? {
                remainder |= 1 << bit;
            }
        }
        let gap = (quotient << k) | remainder;
        last = last + gap + 1;
        let value = u32::try_from(last).map_err(|_| RiceError::Overflow)?;
        values.push(value);
    }
    // What is left must be the zero padding of the last byte.
    if body.len() != bits.pos.div_ceil(8) {
        return Err(RiceError::TrailingBits);
    }
    while !bits.pos.is_multiple_of(8) {
        if bits.next() == Some(true) {
            return Err(RiceError::TrailingBits);
        }
    }
    Ok(values)
}

#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    bits: usize,
}

impl BitWriter {
    fn push(&mut self, bit: bool) {
        if self.bits.is_multiple_of(8) {
            self.bytes.push(0);
        }
        if bit && let Some(last) = self.bytes.last_mut() {
            *last |= 1 << (self.bits % 8);
        }
        self.bits += 1;
    }
}

struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    fn next(&mut self) -> Option<bool> {
        let byte = self.bytes.get(self.pos / 8)?;
        let bit = (byte >> (self.pos % 8)) & 1 == 1;
        self.pos += 1;
        Some(bit)
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn round_trip(values: &[u32]) -> (u8, usize) {
        let k = best_k(values);
        let body = encode(values, k);
        let back = decode(values[0], values.len(), k, &body).unwrap();
        assert_eq!(back, values);
        (k, body.len())
    }

    #[test]
    fn round_trips_edges_and_random_sets() {
        round_trip(&[0]);
        round_trip(&[u32::MAX]);
        round_trip(&[0, 1, 2, 3]);
        round_trip(&[0, u32::MAX]);
        round_trip(&[5, 6, u32::MAX - 1, u32::MAX]);
        let mut rng = StdRng::seed_from_u64(7);
        for n in [2usize, 10, 339, 5_000] {
            let mut values: Vec<u32> = (0..n).map(|_| rng.r#gen()).collect();
            values.sort_unstable();
            values.dedup();
            let (k, bytes) = round_trip(&values);
            if n == 339 {
                // Random 32-bit values, 339 of them: gaps average 2^32/340
                // ≈ 2^23.6, so k = 23 and about 25.5 bits per value
                // (the ~1,063 B per build of the distribution notes).
                assert!((22..=24).contains(&k), "k = {k}");
                assert!((1_000..=1_150).contains(&bytes), "{bytes} bytes");
            }
        }
    }

    #[test]
    fn malformed_bodies_are_refused() {
        let values = [10u32, 20, 30_000, 40_000];
        let k = best_k(&values);
        let body = encode(&values, k);
        assert_eq!(decode(10, 5, k, &body), Err(RiceError::Truncated));
        assert_eq!(decode(10, 3, k, &body), Err(RiceError::TrailingBits));
        let mut padded = body.clone();
        padded.push(0);
        assert_eq!(decode(10, 4, k, &padded), Err(RiceError::TrailingBits));
        // All ones: a quotient that never ends or overflows.
        assert!(decode(10, 2, 0, &[0xff; 600]).is_err());
        // A gap past u32::MAX.
        let high = encode(&[0, 4_000_000_000], 31);
        assert_eq!(decode(u32::MAX - 5, 2, 31, &high), Err(RiceError::Overflow));
        // A count the body cannot hold is refused before allocating.
        assert_eq!(decode(0, usize::MAX, 31, &[0; 4]), Err(RiceError::Truncated));
    }
}
