//! Test snapshots: fixed signing keys (the publisher's and a stranger's),
//! [`Snap`], a builder for a signed snapshot of chosen expressions, and the
//! signed deltas ([`delta`]) and freshness records ([`freshness`]) between
//! them.

use std::time::{SystemTime, UNIX_EPOCH};

use blocksieve_format::{
    DeltaEnd, DeltaParams, FilterKind, FreshnessRecord, FullHash, KeyBits, PrefixFilter, SigningKey,
    SnapshotParams, TrustedKey, encode, encode_delta, parse_header_unverified,
};

/// The publisher's signing key in every test.
pub fn publisher_key() -> SigningKey {
    SigningKey::from_secret_bytes([7u8; 32])
}

/// A signing key the agents do not trust.
pub fn stranger_key() -> SigningKey {
    SigningKey::from_secret_bytes([8u8; 32])
}

/// The public half of [`publisher_key`], the key agents trust.
pub fn trusted() -> TrustedKey {
    publisher_key().public_key().clone()
}

/// The system clock in Unix seconds.
///
/// # Panics
///
/// When the system clock is before 1970.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("system clock after 1970")
        .as_secs()
}

/// How to build a test snapshot of one threat list.
#[derive(Debug)]
pub struct Snap<'a> {
    /// The threat list the snapshot describes.
    pub list: &'a str,
    /// The snapshot version.
    pub version: u64,
    /// The full hashes on the list (one filter key each, duplicates merged).
    pub hashes: Vec<FullHash>,
    /// The width of the filter keys.
    pub key_bits: KeyBits,
    /// The key that signs the header.
    pub key: SigningKey,
    /// Build time, Unix seconds.
    pub created_at: u64,
    /// Expiry time, Unix seconds.
    pub expires_at: u64,
    /// The hash prefix length, in bits, agents send to the full-hash
    /// endpoint.
    pub request_prefix_bits: u8,
    /// The filter kind of the body.
    pub filter: FilterKind,
}

impl<'a> Snap<'a> {
    /// A snapshot of `list` at `version` listing `expressions`, signed by
    /// [`publisher_key`], valid for a day from now, with 32-bit filter keys,
    /// 32-bit request prefixes and a binary fuse filter.
    pub fn new(list: &'a str, version: u64, expressions: &[&str]) -> Self {
        let now = unix_now();
        Self {
            list,
            version,
            hashes: expressions.iter().map(|e| FullHash::of(e.as_bytes())).collect(),
            key_bits: KeyBits::Bits32,
            key: publisher_key(),
            created_at: now,
            expires_at: now + 24 * 60 * 60,
            request_prefix_bits: 32,
            filter: FilterKind::BinaryFuse8,
        }
    }

    /// Adds these full hashes to the list.
    pub fn hashes(mut self, hashes: impl IntoIterator<Item = FullHash>) -> Self {
        self.hashes.extend(hashes);
        self
    }

    /// Uses filter keys of this width.
    pub fn key_bits(mut self, key_bits: KeyBits) -> Self {
        self.key_bits = key_bits;
        self
    }

    /// Signs with `key` instead of [`publisher_key`].
    pub fn signed_by(mut self, key: SigningKey) -> Self {
        self.key = key;
        self
    }

    /// Valid from `created_at` to `expires_at` (Unix seconds).
    pub fn valid(mut self, created_at: u64, expires_at: u64) -> Self {
        self.created_at = created_at;
        self.expires_at = expires_at;
        self
    }

    /// Asks agents for request prefixes of `bits` bits.
    pub fn request_prefix_bits(mut self, bits: u8) -> Self {
        self.request_prefix_bits = bits;
        self
    }

    /// Builds a filter of this kind.
    pub fn filter(mut self, kind: FilterKind) -> Self {
        self.filter = kind;
        self
    }

    /// The signed snapshot's bytes, as a publisher serves them.
    ///
    /// # Panics
    ///
    /// When the filter cannot be built or the snapshot encoded (e.g. an
    /// invalid list name or request prefix length).
    pub fn encode(&self) -> Vec<u8> {
        let mut keys: Vec<u64> = self.hashes.iter().map(|h| self.key_bits.key_of(h)).collect();
        keys.sort_unstable();
        keys.dedup();
        let filter = PrefixFilter::build(self.filter, &keys).expect("filter builds");
        let params = SnapshotParams {
            list_name: self.list.to_owned(),
            version: self.version,
            created_at: self.created_at,
            expires_at: self.expires_at,
            key_bits: self.key_bits,
            request_prefix_bits: self.request_prefix_bits,
            full_hash_count: self.hashes.len() as u64,
            measured_fpr: 0.004,
            zstd_level: 3,
        };
        encode(&params, &filter, &self.key).expect("snapshot encodes")
    }
}

/// The delta end (version, body SHA-256) of a snapshot's bytes.
///
/// # Panics
///
/// When the bytes do not start with a snapshot header.
pub fn end_of(snapshot: &[u8]) -> DeltaEnd {
    let header = parse_header_unverified(snapshot).expect("a snapshot header");
    DeltaEnd {
        version: header.version,
        body_sha256: header.body_sha256,
    }
}

/// A delta of `list` from `from` to `to` adding the 32-bit hash prefixes of
/// `expressions`, fresh for a day from now, signed by [`publisher_key`].
///
/// # Panics
///
/// When the delta cannot be encoded (e.g. `to` not after `from`).
pub fn delta(list: &str, from: DeltaEnd, to: DeltaEnd, expressions: &[&str]) -> Vec<u8> {
    let now = unix_now();
    let params = DeltaParams {
        list_name: list.to_owned(),
        from,
        to,
        created_at: now,
        expires_at: now + 24 * 60 * 60,
    };
    let additions: Vec<u32> = expressions
        .iter()
        .map(|e| FullHash::of(e.as_bytes()).prefix().0)
        .collect();
    encode_delta(&params, &additions, &publisher_key()).expect("delta encodes")
}

/// The `X-Blocksieve-Freshness` value of a record saying `end` is `list`'s
/// latest version until `expires_at` (Unix seconds), signed by `key`.
///
/// # Panics
///
/// When the record cannot be signed (e.g. an invalid list name).
pub fn freshness(list: &str, end: DeltaEnd, expires_at: u64, key: &SigningKey) -> String {
    let record = FreshnessRecord {
        list_name: list.to_owned(),
        version: end.version,
        body_sha256: end.body_sha256,
        issued_at: expires_at.min(unix_now()),
        expires_at,
        next_build_at: 0,
    };
    FreshnessRecord::to_header_value(&record.sign(key).expect("record signs"))
}
