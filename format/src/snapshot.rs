//! The signed snapshot file: header, signature and compressed filter body.
//!
//! See `FORMAT.md` for the byte layout. [`encode`] writes a snapshot;
//! [`decode`] and [`decode_ignoring_expiry`] are the only ways to obtain a
//! [`VerifiedSnapshot`], and they check, in this order: bounded header parse
//! → known format version → signature by a trusted key → limits → body
//! length and hash → bounded decompression of exactly one zstd frame →
//! filter layout → expiry (only [`decode`]; the other leaves expiry to the
//! caller, who keeps an expired snapshot flagged stale).
//! [`check_unverified`] runs every check that needs no key, for tools.

use sha2::{Digest, Sha256};

use crate::error::DecodeError;
use crate::filter::{FilterKind, PrefixFilter};
use crate::hash::FullHash;
use crate::keys::{KeyId, SigningKey, TrustedKey};
use crate::reader::Reader;

/// The eight magic bytes every snapshot starts with.
pub const MAGIC: [u8; 8] = *b"BLKSIEVE";

/// The snapshot format version this crate reads and writes.
pub const FORMAT_VERSION: u16 = 1;

/// The longest list name, in bytes.
pub const MAX_LIST_NAME_BYTES: usize = 64;

/// Length of the Ed25519 signature that ends the header.
const SIGNATURE_LEN: usize = 64;

/// Header bytes that do not depend on the list name: magic (8), version (2),
/// header length (2), name length (1), then the fixed fields (116), then the
/// signature (64).
const FIXED_FIELDS_LEN: usize = 8 + 8 + 8 + 1 + 1 + 1 + 1 + 8 + 8 + 8 + 8 + 32 + 8 + 8 + 8;

/// Whether `name` is a valid threat list name: 1 to 64 bytes of `a-z`,
/// `0-9`, `-` and `_`. The name is used in URLs and file names, so nothing
/// else is allowed.
pub fn is_valid_list_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LIST_NAME_BYTES
        && name
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_'))
}

/// Width of the filter keys: how many leading bits of each full hash the
/// filter is probed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum KeyBits {
    /// The 32-bit hash prefix (Safe Browsing's usual prefix length).
    #[serde(rename = "32")]
    Bits32,
    /// The first 64 bits of the full hash: fewer false prefix hits from
    /// prefix collisions on very large lists.
    #[serde(rename = "64")]
    Bits64,
}

impl KeyBits {
    /// The number of bits.
    pub fn bits(self) -> u8 {
        match self {
            Self::Bits32 => 32,
            Self::Bits64 => 64,
        }
    }

    /// The filter key of `hash` at this width.
    #[inline]
    pub fn key_of(self, hash: &FullHash) -> u64 {
        match self {
            Self::Bits32 => hash.prefix().key(),
            Self::Bits64 => hash.prefix64(),
        }
    }

    fn from_bits(bits: u8) -> Option<Self> {
        match bits {
            32 => Some(Self::Bits32),
            64 => Some(Self::Bits64),
            _ => None,
        }
    }
}

/// Every header field of a snapshot except the signature.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotHeader {
    /// The threat list this snapshot describes, e.g. `phishing`.
    pub list_name: String,
    /// Snapshot version, strictly increasing per list.
    pub version: u64,
    /// When the snapshot was built, Unix seconds.
    pub created_at: u64,
    /// When the snapshot stops being current, Unix seconds; agents keep using
    /// an expired snapshot but report it stale.
    pub expires_at: u64,
    /// Width of the filter keys.
    pub key_bits: KeyBits,
    /// Length of the hash prefix, in bits (8 to 32, a multiple of 4), that
    /// agents should send to the full-hash endpoint for this list.
    pub request_prefix_bits: u8,
    /// The filter kind of the body.
    pub filter_kind: FilterKind,
    /// The kind's parameter: the Bloom hash count k, 0 for binary fuse.
    pub filter_param: u8,
    /// Number of distinct keys in the filter.
    pub entry_count: u64,
    /// Number of distinct full hashes on the list (≥ `entry_count` when
    /// several full hashes share a key).
    pub full_hash_count: u64,
    /// Length of the compressed body in bytes.
    pub body_compressed_bytes: u64,
    /// Length of the decompressed body in bytes.
    pub body_decompressed_bytes: u64,
    /// SHA-256 of the compressed body.
    pub body_sha256: [u8; 32],
    /// The filter kind's false-positive rate per probe, in theory.
    pub theoretical_fpr: f64,
    /// The false-positive rate per probe measured by the publisher on keys
    /// absent by construction.
    pub measured_fpr: f64,
    /// Id of the key that signed the header.
    pub key_id: KeyId,
}

/// What the publisher decides about a snapshot before encoding it.
#[derive(Debug, Clone)]
pub struct SnapshotParams {
    /// The threat list name.
    pub list_name: String,
    /// Snapshot version, strictly increasing per list.
    pub version: u64,
    /// Build time, Unix seconds.
    pub created_at: u64,
    /// Expiry time, Unix seconds.
    pub expires_at: u64,
    /// Width of the filter keys.
    pub key_bits: KeyBits,
    /// Request prefix length in bits advertised to agents.
    pub request_prefix_bits: u8,
    /// Number of distinct full hashes on the list.
    pub full_hash_count: u64,
    /// Measured false-positive rate per probe.
    pub measured_fpr: f64,
    /// zstd compression level (1–22).
    pub zstd_level: i32,
}

/// Why a snapshot could not be encoded.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The list name is not 1–64 bytes of `a-z0-9_-`.
    #[error("invalid list name {0:?}")]
    InvalidListName(String),
    /// A parameter is outside what the format allows.
    #[error("invalid snapshot parameter {field}: {value}")]
    InvalidParam {
        /// The parameter.
        field: &'static str,
        /// Its value, as text.
        value: String,
    },
    /// zstd failed.
    #[error("zstd compression failed: {0}")]
    Compression(std::io::Error),
    /// Built without the `zstd` feature (the C library), as for wasm32:
    /// snapshots can be decoded but not encoded.
    #[error("snapshot encoding needs the zstd feature")]
    NoEncoder,
}

/// Limits a reader enforces before allocating for a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Maximum compressed body, in bytes. By default, 256 MiB.
    pub max_body_bytes: u64,
    /// Maximum decompressed body, in bytes. By default, 256 MiB.
    pub max_decompressed_bytes: u64,
    /// Maximum number of filter keys. By default, 2²⁸ (268 million).
    pub max_entries: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 256 * 1024 * 1024,
            max_decompressed_bytes: 256 * 1024 * 1024,
            max_entries: 1 << 28,
        }
    }
}

/// A snapshot whose signature, hash, limits and layout have been checked.
/// Only [`decode`] and [`decode_ignoring_expiry`] create one; it is what an
/// agent swaps in.
#[derive(Debug, Clone)]
pub struct VerifiedSnapshot {
    header: SnapshotHeader,
    filter: PrefixFilter,
}

impl VerifiedSnapshot {
    /// The verified header.
    pub fn header(&self) -> &SnapshotHeader {
        &self.header
    }

    /// The filter.
    pub fn filter(&self) -> &PrefixFilter {
        &self.filter
    }

    /// Whether the snapshot has expired at `now` (Unix seconds): `now` is
    /// past its signed `expires_at`. A reader may keep using an expired
    /// snapshot, but must report it stale (FORMAT.md, `expires_at`).
    pub fn is_expired(&self, now: u64) -> bool {
        now > self.header.expires_at
    }

    /// Whether `hash` probably belongs to the list: probes the filter with
    /// the key of the snapshot's key width. `false` is certain.
    // Always inlined, as `PrefixFilter::contains` is: see there.
    #[inline(always)]
    pub fn probably_contains(&self, hash: &FullHash) -> bool {
        self.filter.contains(self.header.key_bits.key_of(hash))
    }

    /// Starts loading what [`Self::probably_contains`] will read for
    /// `hash` ([`PrefixFilter::prefetch`]).
    #[inline(always)]
    pub fn prefetch(&self, hash: &FullHash) {
        self.filter.prefetch(self.header.key_bits.key_of(hash));
    }
}

fn header_len_for(name_len: usize) -> usize {
    8 + 2 + 2 + 1 + name_len + FIXED_FIELDS_LEN + SIGNATURE_LEN
}

/// Encodes and signs a snapshot of `filter`: [`compress_filter`], then
/// [`sign_snapshot`].
///
/// # Errors
///
/// [`EncodeError`] when a parameter is outside the format or zstd fails.
pub fn encode(
    params: &SnapshotParams,
    filter: &PrefixFilter,
    key: &SigningKey,
) -> Result<Vec<u8>, EncodeError> {
    check_params(params)?;
    let body = compress_filter(filter, params.zstd_level)?;
    sign_snapshot(params, &body, key)
}

fn check_params(params: &SnapshotParams) -> Result<(), EncodeError> {
    if !is_valid_list_name(&params.list_name) {
        return Err(EncodeError::InvalidListName(params.list_name.clone()));
    }
    if !crate::api::is_valid_request_prefix_bits(params.request_prefix_bits) {
        return Err(EncodeError::InvalidParam {
            field: "request_prefix_bits",
            value: params.request_prefix_bits.to_string(),
        });
    }
    if !(0.0..=1.0).contains(&params.measured_fpr) {
        return Err(EncodeError::InvalidParam {
            field: "measured_fpr",
            value: params.measured_fpr.to_string(),
        });
    }
    Ok(())
}

/// A filter's body, zstd-compressed for a snapshot: the first half of
/// [`encode`], kept apart so a publisher can time compression and signing
/// separately. Only [`compress_filter`] makes one, so a signed body is
/// always a well-formed one.
#[derive(Debug, Clone)]
pub struct CompressedFilter {
    filter_kind: FilterKind,
    filter_param: u8,
    entry_count: u64,
    decompressed_bytes: u64,
    theoretical_fpr: f64,
    compressed: Vec<u8>,
}

impl CompressedFilter {
    /// The compressed body length, in bytes.
    pub fn compressed_bytes(&self) -> usize {
        self.compressed.len()
    }
}

/// Serializes `filter`'s body and compresses it as one zstd frame at
/// `zstd_level` (1–22), with its content size in the frame header and no
/// checksum (the header's SHA-256 covers the body).
///
/// # Errors
///
/// [`EncodeError::Compression`] when zstd fails (e.g. an invalid level),
/// [`EncodeError::NoEncoder`] without the `zstd` feature.
pub fn compress_filter(filter: &PrefixFilter, zstd_level: i32) -> Result<CompressedFilter, EncodeError> {
    let mut body = Vec::new();
    filter.write_body(&mut body);
    let compressed = compress_body(&body, zstd_level)?;
    Ok(CompressedFilter {
        filter_kind: filter.kind(),
        filter_param: filter.param(),
        entry_count: filter.len() as u64,
        decompressed_bytes: body.len() as u64,
        theoretical_fpr: filter.theoretical_fpr(),
        compressed,
    })
}

/// One zstd frame of `body` at `level`, its content size in the frame
/// header (readers require it) and no checksum.
#[cfg(feature = "zstd")]
fn compress_body(body: &[u8], level: i32) -> Result<Vec<u8>, EncodeError> {
    use zstd::zstd_safe::CParameter;
    let mut compressor = zstd::bulk::Compressor::new(level).map_err(EncodeError::Compression)?;
    (compressor.set_parameter(CParameter::ContentSizeFlag(true))).map_err(EncodeError::Compression)?;
    (compressor.set_parameter(CParameter::ChecksumFlag(false))).map_err(EncodeError::Compression)?;
    compressor.compress(body).map_err(EncodeError::Compression)
}

#[cfg(not(feature = "zstd"))]
fn compress_body(_body: &[u8], _level: i32) -> Result<Vec<u8>, EncodeError> {
    Err(EncodeError::NoEncoder)
}

/// Writes the header of a snapshot holding `body`, signs it with `key`
/// (Ed25519 over the header, which holds the body's SHA-256) and appends
/// the body: the second half of [`encode`].
///
/// # Errors
///
/// [`EncodeError`] when a parameter is outside the format.
pub fn sign_snapshot(
    params: &SnapshotParams,
    body: &CompressedFilter,
    key: &SigningKey,
) -> Result<Vec<u8>, EncodeError> {
    check_params(params)?;
    Ok(dangerous_encode_raw(
        params,
        &RawBody {
            filter_kind: body.filter_kind,
            filter_param: body.filter_param,
            entry_count: body.entry_count,
            decompressed_bytes: body.decompressed_bytes,
            theoretical_fpr: body.theoretical_fpr,
            compressed: &body.compressed,
        },
        key,
    ))
}

/// A compressed filter body and what the header says about it, for
/// [`dangerous_encode_raw`].
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct RawBody<'a> {
    /// Header `filter_kind`.
    pub filter_kind: FilterKind,
    /// Header `filter_param`.
    pub filter_param: u8,
    /// Header `entry_count`.
    pub entry_count: u64,
    /// Header `body_decompressed_len`.
    pub decompressed_bytes: u64,
    /// Header `theoretical_fpr`.
    pub theoretical_fpr: f64,
    /// The body bytes, written as they are.
    pub compressed: &'a [u8],
}

/// Signs a header describing `raw` and appends `raw.compressed` unchecked.
/// For tests that need a correctly signed snapshot around a malformed body
/// (zstd bombs, two frames, lying lengths); never use it to publish.
#[doc(hidden)]
pub fn dangerous_encode_raw(params: &SnapshotParams, raw: &RawBody<'_>, key: &SigningKey) -> Vec<u8> {
    let header_len = header_len_for(params.list_name.len());
    let mut out = Vec::with_capacity(header_len + raw.compressed.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(header_len as u16).to_le_bytes());
    out.push(params.list_name.len() as u8);
    out.extend_from_slice(params.list_name.as_bytes());
    out.extend_from_slice(&params.version.to_le_bytes());
    out.extend_from_slice(&params.created_at.to_le_bytes());
    out.extend_from_slice(&params.expires_at.to_le_bytes());
    out.push(params.key_bits.bits());
    out.push(params.request_prefix_bits);
    out.push(raw.filter_kind.code());
    out.push(raw.filter_param);
    out.extend_from_slice(&raw.entry_count.to_le_bytes());
    out.extend_from_slice(&params.full_hash_count.to_le_bytes());
    out.extend_from_slice(&(raw.compressed.len() as u64).to_le_bytes());
    out.extend_from_slice(&raw.decompressed_bytes.to_le_bytes());
    out.extend_from_slice(&Sha256::digest(raw.compressed));
    out.extend_from_slice(&raw.theoretical_fpr.to_le_bytes());
    out.extend_from_slice(&params.measured_fpr.to_le_bytes());
    out.extend_from_slice(&key.public_key().id());
    let signature = key.sign(&out);
    out.extend_from_slice(&signature);
    debug_assert_eq!(out.len(), header_len);
    out.extend_from_slice(raw.compressed);
    out
}

/// Parses the header without verifying anything: for `inspect` and for
/// reporting what a rejected file claimed. Never trust its result.
///
/// # Errors
///
/// [`DecodeError`] when the header is malformed.
pub fn parse_header_unverified(bytes: &[u8]) -> Result<SnapshotHeader, DecodeError> {
    parse_header(bytes).map(|(h, _)| h)
}

/// Parses the header and returns it with the header length.
fn parse_header(bytes: &[u8]) -> Result<(SnapshotHeader, usize), DecodeError> {
    let t = |field| DecodeError::Truncated { field };
    let invalid = |field, value: u64| DecodeError::InvalidField { field, value };
    let mut r = Reader::new(bytes);
    let magic: [u8; 8] = r.array().ok_or(t("magic"))?;
    if magic != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let version = r.u16().ok_or(t("format_version"))?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let header_len = usize::from(r.u16().ok_or(t("header_len"))?);
    let name_len = usize::from(r.u8().ok_or(t("list_name_len"))?);
    if name_len == 0 || name_len > MAX_LIST_NAME_BYTES {
        return Err(invalid("list_name_len", name_len as u64));
    }
    if header_len != header_len_for(name_len) {
        return Err(invalid("header_len", header_len as u64));
    }
    let name = r.take(name_len).ok_or(t("list_name"))?;
    let list_name = std::str::from_utf8(name)
        .ok()
        .filter(|n| is_valid_list_name(n))
        .ok_or(invalid("list_name", name_len as u64))?
        .to_owned();
    let snapshot_version = r.u64().ok_or(t("snapshot_version"))?;
    let created_at = r.u64().ok_or(t("created_at"))?;
    let expires_at = r.u64().ok_or(t("expires_at"))?;
    let key_bits_raw = r.u8().ok_or(t("key_bits"))?;
    let key_bits = KeyBits::from_bits(key_bits_raw).ok_or(invalid("key_bits", key_bits_raw.into()))?;
    let request_prefix_bits = r.u8().ok_or(t("request_prefix_bits"))?;
    if !crate::api::is_valid_request_prefix_bits(request_prefix_bits) {
        return Err(invalid("request_prefix_bits", request_prefix_bits.into()));
    }
    let kind_raw = r.u8().ok_or(t("filter_kind"))?;
    let filter_kind = FilterKind::from_code(kind_raw).ok_or(invalid("filter_kind", kind_raw.into()))?;
    let filter_param = r.u8().ok_or(t("filter_param"))?;
    let entry_count = r.u64().ok_or(t("entry_count"))?;
    let full_hash_count = r.u64().ok_or(t("full_hash_count"))?;
    let body_compressed_bytes = r.u64().ok_or(t("body_compressed_len"))?;
    let body_decompressed_bytes = r.u64().ok_or(t("body_decompressed_len"))?;
    let body_sha256: [u8; 32] = r.array().ok_or(t("body_sha256"))?;
    let theoretical_fpr = f64::from_le_bytes(r.array().ok_or(t("theoretical_fpr"))?);
    let measured_fpr = f64::from_le_bytes(r.array().ok_or(t("measured_fpr"))?);
    for (field, v) in [
        ("theoretical_fpr", theoretical_fpr),
        ("measured_fpr", measured_fpr),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(invalid(field, v.to_bits()));
        }
    }
    let key_id: [u8; 8] = r.array().ok_or(t("key_id"))?;
    if created_at > expires_at {
        return Err(invalid("expires_at", expires_at));
    }
    if full_hash_count < entry_count {
        return Err(invalid("full_hash_count", full_hash_count));
    }
    let _signature = r.take(SIGNATURE_LEN).ok_or(t("signature"))?;
    debug_assert_eq!(r.position(), header_len);
    Ok((
        SnapshotHeader {
            list_name,
            version: snapshot_version,
            created_at,
            expires_at,
            key_bits,
            request_prefix_bits,
            filter_kind,
            filter_param,
            entry_count,
            full_hash_count,
            body_compressed_bytes,
            body_decompressed_bytes,
            body_sha256,
            theoretical_fpr,
            measured_fpr,
            key_id,
        },
        header_len,
    ))
}

/// Decodes and verifies a snapshot: [`decode_ignoring_expiry`], then the
/// expiry check (`now ≤ expires_at`, FORMAT.md "Reading", step 7).
///
/// `now` is the current time in Unix seconds (this crate reads no clock).
///
/// # Errors
///
/// [`DecodeError`] naming the first check that failed; see the module docs
/// for the order. An expired snapshot is [`DecodeError::Expired`].
pub fn decode(
    bytes: &[u8],
    trusted_keys: &[TrustedKey],
    limits: &DecodeLimits,
    now: u64,
) -> Result<VerifiedSnapshot, DecodeError> {
    let snapshot = decode_ignoring_expiry(bytes, trusted_keys, limits)?;
    if snapshot.is_expired(now) {
        return Err(DecodeError::Expired {
            expires_at: snapshot.header.expires_at,
            now,
        });
    }
    Ok(snapshot)
}

/// Decodes and verifies a snapshot, every check of FORMAT.md "Reading" but
/// the last (expiry): for a reader that keeps an expired snapshot, flagged
/// stale, rather than none. An agent starting from its cache, or whose
/// clock runs ahead of the publisher's, uses this and asks
/// [`VerifiedSnapshot::is_expired`] itself.
///
/// # Errors
///
/// [`DecodeError`] naming the first check that failed, in the order of the
/// module docs; never [`DecodeError::Expired`].
pub fn decode_ignoring_expiry(
    bytes: &[u8],
    trusted_keys: &[TrustedKey],
    limits: &DecodeLimits,
) -> Result<VerifiedSnapshot, DecodeError> {
    let (header, header_len) = parse_header(bytes)?;

    // Signature before anything else is believed.
    let signed = &bytes[..header_len - SIGNATURE_LEN];
    let mut signature = [0u8; SIGNATURE_LEN];
    signature.copy_from_slice(&bytes[header_len - SIGNATURE_LEN..header_len]);
    let key = trusted_keys
        .iter()
        .find(|k| k.id() == header.key_id)
        .ok_or(DecodeError::UnknownKey {
            key_id: header.key_id,
            trusted: trusted_keys.first().map(TrustedKey::id),
            // Keys given twice (the same key in two places of a
            // configuration) are one key to the reader of the error.
            trusted_count: u8::try_from(
                trusted_keys
                    .iter()
                    .enumerate()
                    .filter(|(i, k)| trusted_keys[..*i].iter().all(|o| o.id() != k.id()))
                    .count(),
            )
            .unwrap_or(u8::MAX),
        })?;
    if !key.verify(signed, &signature) {
        return Err(DecodeError::BadSignature);
    }
    let filter = check_body(&header, &bytes[header_len..], limits)?;
    Ok(VerifiedSnapshot { header, filter })
}

/// Checks everything in a snapshot that needs no key — the header, the
/// limits, the body's length and SHA-256 against the header, the zstd frame
/// and the filter layout (FORMAT.md "Reading", steps 1 and 3–6) — and
/// returns the header and the filter. The signature is **not** checked, so
/// nothing here may be trusted: this is for `inspect` without a key, to
/// tell a damaged file (a flipped bit in the body) from a good one.
///
/// # Errors
///
/// [`DecodeError`] naming the first check that failed.
pub fn check_unverified(
    bytes: &[u8],
    limits: &DecodeLimits,
) -> Result<(SnapshotHeader, PrefixFilter), DecodeError> {
    let (header, header_len) = parse_header(bytes)?;
    let filter = check_body(&header, &bytes[header_len..], limits)?;
    Ok((header, filter))
}

/// Steps 3–6 of FORMAT.md "Reading": limits, body length and hash, one
/// bounded zstd frame, filter layout.
fn check_body(
    header: &SnapshotHeader,
    body: &[u8],
    limits: &DecodeLimits,
) -> Result<PrefixFilter, DecodeError> {
    if header.body_compressed_bytes > limits.max_body_bytes {
        return Err(DecodeError::BodyTooLarge {
            declared: header.body_compressed_bytes,
            max: limits.max_body_bytes,
        });
    }
    if header.body_decompressed_bytes > limits.max_decompressed_bytes {
        return Err(DecodeError::DecompressedTooLarge {
            declared: header.body_decompressed_bytes,
            max: limits.max_decompressed_bytes,
        });
    }
    if header.entry_count > limits.max_entries {
        return Err(DecodeError::TooManyEntries {
            declared: header.entry_count,
            max: limits.max_entries,
        });
    }
    if body.len() as u64 != header.body_compressed_bytes {
        return Err(DecodeError::BodyLength {
            declared: header.body_compressed_bytes,
            actual: body.len() as u64,
        });
    }
    if Sha256::digest(body).as_slice() != header.body_sha256 {
        return Err(DecodeError::BodyHashMismatch);
    }
    let decompressed = crate::zstd_frame::decompress_one_frame(body, header.body_decompressed_bytes)?;
    PrefixFilter::read_body(
        header.filter_kind,
        header.filter_param,
        header.entry_count,
        &decompressed,
    )
}
