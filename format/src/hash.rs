//! Full hashes and hash prefixes.
//!
//! A *full hash* is the SHA-256 digest of an expression string (v4 "URLs and
//! Hashing", section "Hash computations"). A *hash prefix* is its first four
//! bytes read as a big-endian `u32`, the order in which they are sent on the
//! wire: `a.b.c/` → `f9c142c4…` → prefix `0xf9c142c4`.

use std::fmt;
use std::str::FromStr;

use sha2::digest::generic_array::GenericArray;
use sha2::{Digest, Sha256};

/// SHA-256's block size in bytes.
const BLOCK: usize = 64;

/// SHA-256's initial hash value, H(0) (FIPS 180-4 §5.3.3).
const INITIAL_STATE: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// One block of SHA-256's compression function into `state`.
#[inline(always)]
fn compress(state: &mut [u32; 8], block: &[u8]) {
    sha2::compress256(state, std::slice::from_ref(GenericArray::from_slice(block)));
}

/// A 32-byte SHA-256 full hash of an expression. Ordered by its bytes, as
/// the snapshot's full-hash list is sorted.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FullHash(pub [u8; 32]);

impl Ord for FullHash {
    /// The bytes' order, compared as four big-endian words: the same order
    /// as the derived one (a `memcmp` call per comparison, the most of a
    /// build's sort), inlined.
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let word = |h: &Self, i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&h.0[i * 8..i * 8 + 8]);
            u64::from_be_bytes(w)
        };
        (0..4)
            .map(|i| word(self, i).cmp(&word(other, i)))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    }
}

impl PartialOrd for FullHash {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl FullHash {
    /// Length of a full hash in bytes.
    pub const LEN: usize = 32;

    /// The SHA-256 of `expression`.
    ///
    /// ```
    /// use blocksieve_format::FullHash;
    /// let h = FullHash::of(b"foo.com/");
    /// assert_eq!(h.to_string(), "af30010e4c011fc77e1ab03ef898ab2f8dec17c0bd178a875ad0cd9b7a6e5973");
    /// assert_eq!(h.prefix().to_string(), "af30010e");
    /// ```
    ///
    /// The message is padded here (FIPS 180-4 §5.1.1) and its blocks handed
    /// to `sha2`'s compression function (SHA-NI where the CPU has it), the
    /// full ones in place: no block buffer, no copy of the expression but
    /// its last partial block. On the expressions of real URLs (most are
    /// one block) that takes 8–17 % less time than `Sha256::digest`
    /// (`bench/`, row 1.6); the digest is the same (the tests compare the
    /// two at every length up to four blocks and beyond).
    #[inline]
    pub fn of(expression: &[u8]) -> Self {
        let mut state = INITIAL_STATE;
        let mut blocks = expression.chunks_exact(BLOCK);
        for block in &mut blocks {
            compress(&mut state, block);
        }
        let rest = blocks.remainder();
        // The rest, 0x80, zeros, and the length in bits as a big-endian
        // u64 (mod 2^64) at the end of the first block that has room for
        // it: one block if the rest leaves 9 bytes, else two.
        let mut tail = [0u8; 2 * BLOCK];
        tail[..rest.len()].copy_from_slice(rest);
        tail[rest.len()] = 0x80;
        let end = if rest.len() < BLOCK - 8 { BLOCK } else { 2 * BLOCK };
        let bits = (expression.len() as u64).wrapping_mul(8);
        tail[end - 8..end].copy_from_slice(&bits.to_be_bytes());
        for block in tail[..end].chunks_exact(BLOCK) {
            compress(&mut state, block);
        }
        let mut out = [0u8; 32];
        for (bytes, word) in out.chunks_exact_mut(4).zip(state) {
            bytes.copy_from_slice(&word.to_be_bytes());
        }
        Self(out)
    }

    /// The SHA-256 of `host` followed by `path`, without concatenating them.
    pub fn of_parts(host: &[u8], path: &[u8]) -> Self {
        let mut h = Sha256::new();
        h.update(host);
        h.update(path);
        Self(h.finalize().into())
    }

    /// The 32-bit hash prefix: the first four bytes, big-endian.
    #[inline]
    pub fn prefix(&self) -> HashPrefix {
        HashPrefix(u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]]))
    }

    /// The first eight bytes as a big-endian `u64`: the filter key of a
    /// snapshot with 64-bit keys.
    #[inline]
    pub fn prefix64(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[..8]);
        u64::from_be_bytes(b)
    }

    /// Parses 64 hex digits (either case).
    ///
    /// # Errors
    ///
    /// [`HexError`] when the text is not exactly 64 hex digits.
    pub fn from_hex(s: &str) -> Result<Self, HexError> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).map_err(|_| HexError {
            expected_len: 64,
            found_len: s.len(),
        })?;
        Ok(Self(out))
    }
}

impl fmt::Display for FullHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for FullHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FullHash({self})")
    }
}

/// A 32-bit hash prefix: the first four bytes of a full hash, big-endian.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HashPrefix(pub u32);

impl HashPrefix {
    /// The filter key of this prefix in a snapshot with 32-bit keys.
    #[inline]
    pub fn key(self) -> u64 {
        u64::from(self.0)
    }

    /// Whether `hash` starts with this prefix.
    pub fn matches(self, hash: &FullHash) -> bool {
        hash.prefix() == self
    }
}

impl fmt::Display for HashPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

impl fmt::Debug for HashPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HashPrefix({self})")
    }
}

impl FromStr for HashPrefix {
    type Err = HexError;

    /// Parses exactly eight lowercase hex digits, the form used in URLs
    /// (`/v1/hashes/af30010e`).
    fn from_str(s: &str) -> Result<Self, HexError> {
        let err = HexError {
            expected_len: 8,
            found_len: s.len(),
        };
        if s.len() != 8 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(err);
        }
        u32::from_str_radix(s, 16).map(HashPrefix).map_err(|_| err)
    }
}

/// Text that should have been a fixed number of hex digits was not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("expected up to {expected_len} lowercase hex digits, got {found_len} characters that are not")]
pub struct HexError {
    /// How many hex digits were expected.
    pub expected_len: usize,
    /// The length of the text that was given.
    pub found_len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-wise order is the bytes' order: on hashes that share
    /// leading bytes (up to all 32), differing in each word, and random.
    #[test]
    fn full_hashes_order_as_their_bytes() {
        use rand::{Rng as _, SeedableRng as _};
        let mut rng = rand::rngs::StdRng::seed_from_u64(18);
        let mut hashes: Vec<FullHash> = (0..2_000).map(|_| FullHash(rng.r#gen())).collect();
        for byte in 0..32 {
            for value in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut h = hashes[byte];
                h.0[byte] = value;
                hashes.push(h);
                hashes.push(FullHash([value; 32]));
            }
        }
        for a in hashes.iter().step_by(7) {
            for b in &hashes {
                assert_eq!(a.cmp(b), a.0.cmp(&b.0), "{a} vs {b}");
            }
        }
    }

    /// The same digest as `sha2`'s own padding, at every length up to four
    /// blocks (each boundary of one and two padding blocks) and beyond.
    #[test]
    fn the_hand_padded_digest_is_sha256_at_every_length() {
        use rand::{Rng as _, SeedableRng as _};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1804);
        let long: Vec<u8> = (0..2_000).map(|_| rng.r#gen()).collect();
        for len in (0..=4 * BLOCK + 1).chain([1_000, 2_000]) {
            let message = &long[..len];
            assert_eq!(
                FullHash::of(message).0,
                <[u8; 32]>::from(Sha256::digest(message)),
                "length {len}"
            );
        }
        // Known digests: the empty message, and FIPS 180-4's two-block
        // (448-bit) example (its one-block `abc` is in `published_vectors`).
        assert_eq!(
            FullHash::of(b"").to_string(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            FullHash::of(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq").to_string(),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }

    #[test]
    fn published_vectors() {
        // FIPS 180-2 B.1 and the v4 "Hash computations" examples.
        assert_eq!(FullHash::of(b"abc").prefix(), HashPrefix(0xba78_16bf));
        assert_eq!(FullHash::of(b"a.b.c/").prefix().to_string(), "f9c142c4");
        assert_eq!(FullHash::of_parts(b"a.b.c", b"/"), FullHash::of(b"a.b.c/"));
    }

    #[test]
    fn prefix_parsing() {
        assert_eq!("af30010e".parse::<HashPrefix>(), Ok(HashPrefix(0xaf30_010e)));
        assert!("AF30010E".parse::<HashPrefix>().is_err());
        assert!("af30010".parse::<HashPrefix>().is_err());
        assert!("+f30010e".parse::<HashPrefix>().is_err());
        assert!("af30010eaa".parse::<HashPrefix>().is_err());
    }
}
