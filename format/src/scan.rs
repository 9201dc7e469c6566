//! Byte classification sixteen bytes at a time, for the canonicalizer's
//! common case and the expression iterator.
//!
//! A URL is read in blocks of 64 bytes; each block becomes one 64-bit mask
//! per byte class, bit `i` standing for byte `i` of the block. The questions
//! the canonicalizer asks ("is there a byte to escape?", "where does the
//! authority end?", "is a `/` followed by `.` or `/`?") then become a few
//! integer operations per block instead of a branch per byte.
//!
//! The vector work is done by the `wide` crate (portable SIMD: SSE2 on
//! x86-64, NEON on AArch64, simd128 on WebAssembly, plain code elsewhere), so
//! this module holds no `unsafe` and no per-architecture code.

use wide::u8x16;

/// Bytes per block: one bit of a `u64` mask each.
pub(crate) const BLOCK: usize = 64;

/// The byte that pads a block shorter than [`BLOCK`]: it belongs to no
/// class, so padding never sets a bit.
const PAD: u8 = b'a';

/// The class masks of one block of at most [`BLOCK`] bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Masks {
    /// Bytes the common case cannot copy as they are: `<= 0x20` and `>= 0x7f`
    /// (step 9 escapes them; they include tab, CR and LF of step 1), `#`
    /// (step 3), `%` (steps 4 and 9) and `\` (a path separator in step 8).
    pub(crate) special: u64,
    /// `/`.
    pub(crate) slash: u64,
    /// `.`.
    pub(crate) dot: u64,
    /// `?`.
    pub(crate) query: u64,
    /// Bytes an authority keeps only after work: uppercase ASCII letters
    /// (step 7 lowercases them), `@` (userinfo), `[` (an IPv6 literal) and
    /// `:` (a port), i.e. the range `@` ..= `[` and `:`.
    pub(crate) host_work: u64,
}

/// The 16 lanes of `bytes[at..]` and how many of them belong to it: a
/// chunk that runs past the end is loaded as the last 16 bytes of `bytes`
/// (overlapping the chunk before) and shifted down by the returned amount,
/// so no copy is needed; only an input shorter than 16 bytes is padded
/// with [`PAD`]. Returns the lanes and the shift to apply to their mask.
#[inline]
fn load(bytes: &[u8], at: usize) -> (u8x16, u32) {
    if let Some(chunk) = bytes.get(at..at + 16) {
        let lanes: [u8; 16] = chunk.try_into().unwrap_or([PAD; 16]);
        return (u8x16::new(lanes), 0);
    }
    if let Some(last) = bytes.len().checked_sub(16).and_then(|start| bytes.get(start..)) {
        let lanes: [u8; 16] = last.try_into().unwrap_or([PAD; 16]);
        // Lane j is byte len - 16 + j; the chunk starts at lane at - (len - 16).
        return (u8x16::new(lanes), (at + 16 - bytes.len()) as u32);
    }
    let mut lanes = [PAD; 16];
    for (lane, &b) in lanes.iter_mut().zip(bytes.get(at..).unwrap_or_default()) {
        *lane = b;
    }
    (u8x16::new(lanes), 0)
}

/// One bit per lane of a comparison result (`0xff` or `0x00` lanes), lane
/// `shift` and up moved down to bit 0.
#[inline]
fn bits(lanes: u8x16, shift: u32) -> u64 {
    // move_mask returns the 16 lane sign bits in the low bits of an i32.
    u64::from(lanes.move_mask() as u16) >> shift
}

/// Adds the masks of the 16 lanes `v` to `masks`, lane `shift` at bit `to`.
#[inline(always)]
fn classify16(v: u8x16, shift: u32, to: usize, masks: &mut Masks) {
    let eq = |b: u8| v.cmp_eq(u8x16::splat(b));
    // Bytes outside 0x21..=0x7e: after subtracting 0x21 (wrapping) they are
    // the lanes above 0x5d, i.e. where min(x, 0x5d) != x.
    let shifted = v - u8x16::splat(0x21);
    let printable = shifted.min(u8x16::splat(0x7e - 0x21)).cmp_eq(shifted);
    let special = !printable | eq(b'#') | eq(b'%') | eq(b'\\');
    // '@' ..= '[' is 0x40 ..= 0x5b: '@', 'A'..='Z', '['.
    let from_at = v - u8x16::splat(b'@');
    let at_to_bracket = from_at.min(u8x16::splat(b'[' - b'@')).cmp_eq(from_at);
    masks.special |= bits(special, shift) << to;
    masks.slash |= bits(eq(b'/'), shift) << to;
    masks.dot |= bits(eq(b'.'), shift) << to;
    masks.query |= bits(eq(b'?'), shift) << to;
    masks.host_work |= bits(at_to_bracket | eq(b':'), shift) << to;
}

/// The masks of the block `bytes[base..base + 64]` (shorter at the end of
/// `bytes`): bit `i` is byte `base + i`.
#[inline]
pub(crate) fn classify(bytes: &[u8], base: usize) -> Masks {
    let mut masks = Masks::default();
    let block = bytes.get(base..).unwrap_or_default();
    let block = block.get(..BLOCK).unwrap_or(block);
    let mut chunks = block.chunks_exact(16);
    for (k, chunk) in (&mut chunks).enumerate() {
        let lanes: [u8; 16] = chunk.try_into().unwrap_or([PAD; 16]);
        classify16(u8x16::new(lanes), 0, 16 * k, &mut masks);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let at = base + block.len() - tail.len();
        let (v, shift) = load(bytes, at);
        classify16(v, shift, at - base, &mut masks);
    }
    masks
}

/// The positions of `byte` in the block `bytes[base..base + 64]` (shorter
/// at the end of `bytes`), as a mask: bit `i` is byte `base + i`.
#[inline]
pub(crate) fn find(bytes: &[u8], base: usize, byte: u8) -> u64 {
    let mut mask = 0;
    let end = bytes.len().min(base + BLOCK);
    let mut at = base;
    while at < end {
        let (v, shift) = load(bytes, at);
        mask |= bits(v.cmp_eq(u8x16::splat(byte)), shift) << (at - base);
        at += 16;
    }
    // `byte` may be the padding byte of a short input.
    mask & below(base, bytes.len())
}

/// The bits `i` of the block starting at `base` with `base + i < end`.
#[inline]
pub(crate) fn below(base: usize, end: usize) -> u64 {
    let n = end.saturating_sub(base).min(BLOCK) as u32;
    u64::MAX.checked_shr(BLOCK as u32 - n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The masks by a byte loop, the definition `classify` must match.
    fn classify_bytewise(block: &[u8]) -> Masks {
        let mut m = Masks::default();
        for (i, &b) in block.iter().enumerate() {
            let bit = 1u64 << i;
            if b <= 0x20 || b >= 0x7f || matches!(b, b'#' | b'%' | b'\\') {
                m.special |= bit;
            }
            if b == b'/' {
                m.slash |= bit;
            }
            if b == b'.' {
                m.dot |= bit;
            }
            if b == b'?' {
                m.query |= bit;
            }
            if b.is_ascii_uppercase() || matches!(b, b'@' | b'[' | b':') {
                m.host_work |= bit;
            }
        }
        m
    }

    #[test]
    fn classify_and_find_match_the_byte_loop_for_every_byte_at_every_position() {
        for len in [0usize, 1, 15, 16, 17, 33, 63, 64, 65, 100, 130] {
            for b in 0..=255u8 {
                for pos in [0, len / 2, len.saturating_sub(1)] {
                    let mut bytes = vec![b'x'; len];
                    if let Some(slot) = bytes.get_mut(pos) {
                        *slot = b;
                    }
                    for base in (0..len.max(1)).step_by(BLOCK) {
                        let block = &bytes[base..len.min(base + BLOCK)];
                        let what = format!("byte {b:#04x} at {pos} of {len}, block at {base}");
                        assert_eq!(classify(&bytes, base), classify_bytewise(block), "{what}");
                        let expected = block
                            .iter()
                            .enumerate()
                            .filter(|&(_, &c)| c == b)
                            .fold(0u64, |m, (i, _)| m | 1 << i);
                        assert_eq!(find(&bytes, base, b), expected, "find {what}");
                    }
                }
            }
        }
    }

    #[test]
    fn below_selects_the_bits_before_an_end() {
        assert_eq!(below(0, 64), u64::MAX);
        assert_eq!(below(0, 500), u64::MAX);
        assert_eq!(below(0, 0), 0);
        assert_eq!(below(0, 5), 0b11111);
        assert_eq!(below(64, 70), 0b111111);
        assert_eq!(below(64, 10), 0);
        assert_eq!(below(128, usize::MAX), u64::MAX);
    }
}
