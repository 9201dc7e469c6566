//! Errors of snapshot decoding.

/// Why a snapshot was rejected. Whatever the variant, the caller keeps the
/// filter it already has: the bytes came from an untrusted server or cache.
///
/// Variants are grouped by what they mean: the bytes are malformed
/// (`Truncated` … `FilterLayout`), forged or not ours (`UnknownKey`,
/// `BadSignature`, `BodyHashMismatch`), too big for this reader
/// (`*TooLarge`, `TooManyEntries`), or no longer valid (`Expired`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended while reading `field`.
    #[error("snapshot truncated while reading {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// The first eight bytes are not `BLKSIEVE`.
    #[error("not a blocksieve snapshot (bad magic)")]
    BadMagic,
    /// The format version is not one this reader knows.
    #[error("snapshot format version {found} is not supported (this reader knows version {supported})")]
    UnsupportedVersion {
        /// The version in the file.
        found: u16,
        /// The version this reader implements.
        supported: u16,
    },
    /// A header field has a value the format does not allow.
    #[error("invalid snapshot header field {field}: {value}")]
    InvalidField {
        /// The field name as in `FORMAT.md`.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// The signing key id is not among the trusted keys.
    #[error("snapshot is signed by unknown key {}{}", hex::encode(key_id), trusted_note(*trusted, *trusted_count))]
    UnknownKey {
        /// The key id from the header.
        key_id: [u8; 8],
        /// The id of the first trusted key, for the message: a reader can
        /// tell a key of another publisher (or a file that is not the
        /// publisher's `public.key`) from a forged snapshot.
        trusted: Option<[u8; 8]>,
        /// How many keys are trusted (at most 255 counted).
        trusted_count: u8,
    },
    /// The Ed25519 signature over the header does not verify.
    #[error("snapshot signature does not verify")]
    BadSignature,
    /// The compressed body is larger than the configured maximum.
    #[error("snapshot body is {declared} bytes, the maximum is {max}")]
    BodyTooLarge {
        /// Compressed body length from the header.
        declared: u64,
        /// The configured limit.
        max: u64,
    },
    /// The decompressed body would be larger than the configured maximum.
    #[error("snapshot body decompresses to {declared} bytes, the maximum is {max}")]
    DecompressedTooLarge {
        /// Decompressed body length from the header.
        declared: u64,
        /// The configured limit.
        max: u64,
    },
    /// The filter holds more keys than the configured maximum.
    #[error("snapshot has {declared} entries, the maximum is {max}")]
    TooManyEntries {
        /// Entry count from the header.
        declared: u64,
        /// The configured limit.
        max: u64,
    },
    /// The bytes after the header are not exactly the declared body.
    #[error("snapshot body is {actual} bytes, the header declares {declared}")]
    BodyLength {
        /// Compressed body length from the header.
        declared: u64,
        /// Bytes actually present after the header.
        actual: u64,
    },
    /// The SHA-256 of the body differs from the signed header's.
    #[error("snapshot body does not match the SHA-256 in its signed header")]
    BodyHashMismatch,
    /// The body is not exactly one zstd frame of the declared size.
    #[error("snapshot body is not valid zstd: {reason}")]
    Compression {
        /// What was wrong.
        reason: &'static str,
    },
    /// The filter body is inconsistent with the format.
    #[error("invalid filter layout: {field} = {value}")]
    FilterLayout {
        /// The body field.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// The header declares entries but the filter body is empty.
    #[error("filter body is empty but the header declares {entry_count} entries")]
    EmptyFilter {
        /// Entry count from the header.
        entry_count: u64,
    },
    /// The snapshot's expiry time has passed.
    #[error("snapshot expired at {expires_at} (now {now}, Unix seconds)")]
    Expired {
        /// Expiry time from the header, Unix seconds.
        expires_at: u64,
        /// The time given to the decoder, Unix seconds.
        now: u64,
    },
}

/// What [`DecodeError::UnknownKey`] says of the keys trusted: the first
/// one's id (the one a publisher's `public.key` gives, FORMAT.md "Keys"),
/// and how many more.
fn trusted_note(trusted: Option<[u8; 8]>, count: u8) -> String {
    match (trusted, count) {
        (None, _) => " (no key is trusted)".to_owned(),
        (Some(id), 0 | 1) => format!(" (the key trusted is {})", hex::encode(id)),
        (Some(id), n) => format!(" (the keys trusted are {} and {} more)", hex::encode(id), n - 1),
    }
}
