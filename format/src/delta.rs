//! Deltas and freshness records: how an agent follows a list without
//! downloading the whole snapshot at every build (FORMAT.md "Deltas").
//!
//! A **delta** carries the 32-bit hash prefixes that snapshot version `to`
//! has and version `from` has not, Rice-coded ([`rice`]), signed. It is
//! additions only: an agent that holds the filter of some earlier snapshot
//! plus every addition since holds a superset of the list's prefixes, so no
//! listed entry is missed; entries removed since linger until the agent
//! takes a whole snapshot again, at the cost of a full-hash request, never
//! of a wrong verdict (full hashes are always current). A delta names both
//! ends by snapshot version *and* the SHA-256 of that snapshot's body, the
//! pair an agent's version floor holds, so a chain that does not start at
//! exactly what the agent has is refused.
//!
//! A **freshness record** says, signed, "version `v` (body SHA-256 `h`) is
//! still the latest as of `issued_at`; treat it as fresh until
//! `expires_at`; the next build is due at `next_build_at`". An unchanged
//! list costs an agent a `304` carrying one, the way TUF's timestamp
//! metadata keeps a client non-stale without a download.

mod freshness;
mod rice;

pub use freshness::{FRESHNESS_MAGIC, FreshnessRecord};
pub use rice::MAX_RICE_K;

use sha2::{Digest, Sha256};

use crate::keys::{KeyId, SigningKey, TrustedKey};
use crate::reader::Reader;
use crate::snapshot::{MAX_LIST_NAME_BYTES, is_valid_list_name};

/// The first eight bytes of every delta file.
pub const DELTA_MAGIC: [u8; 8] = *b"BLKDELTA";
/// The delta format version this crate reads and writes.
pub const DELTA_VERSION: u16 = 1;
/// The signing context of deltas ([`SigningKey::sign_in_context`]): a delta
/// signature never verifies as a snapshot's, manifest's or record's.
pub const DELTA_CONTEXT: &str = "blocksieve delta v1";
/// The most additions one delta may carry.
pub const MAX_DELTA_ADDITIONS: u32 = 1 << 24;
/// The most deltas one chain may hold.
pub const MAX_CHAIN_DELTAS: usize = 4_096;

/// Bytes of the fields after the list name, the signature included.
const FIXED_LEN: usize = 8 + 32 + 8 + 32 + 8 + 8 + 4 + 4 + 1 + 4 + 32 + 8 + 64;

/// The header length of a delta of a list whose name has `name_len` bytes.
fn header_len_for(name_len: usize) -> usize {
    8 + 2 + 2 + 1 + name_len + FIXED_LEN
}

/// One end of a delta: a snapshot version and the SHA-256 of that
/// snapshot's compressed body (the agent's version floor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeltaEnd {
    /// The snapshot version.
    pub version: u64,
    /// `body_sha256` of that version's snapshot header.
    pub body_sha256: [u8; 32],
}

/// The signed header of a delta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaHeader {
    /// The threat list.
    pub list_name: String,
    /// The snapshot the additions apply to.
    pub from: DeltaEnd,
    /// The snapshot the result stands for; `to.version > from.version`.
    pub to: DeltaEnd,
    /// Unix seconds.
    pub created_at: u64,
    /// Unix seconds, ≥ `created_at`: the result is fresh until then.
    pub expires_at: u64,
    /// Prefixes added, ≤ [`MAX_DELTA_ADDITIONS`].
    pub addition_count: u32,
    /// The smallest added prefix (0 when none are).
    pub first_addition: u32,
    /// The Rice parameter, ≤ [`MAX_RICE_K`].
    pub rice_k: u8,
    /// Bytes of the Rice-coded body.
    pub body_len: u32,
    /// SHA-256 of the body.
    pub body_sha256: [u8; 32],
    /// The signer's key id.
    pub key_id: KeyId,
}

/// A delta whose signature, hash and encoding have been checked; only
/// [`decode_delta`] and [`decode_chain`] make one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedDelta {
    header: DeltaHeader,
    additions: Vec<u32>,
}

impl VerifiedDelta {
    /// The verified header.
    pub fn header(&self) -> &DeltaHeader {
        &self.header
    }

    /// The added 32-bit prefixes, strictly ascending.
    pub fn additions(&self) -> &[u32] {
        &self.additions
    }

    /// The added prefixes, strictly ascending.
    pub fn into_additions(self) -> Vec<u32> {
        self.additions
    }
}

/// What a delta is made of, before signing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaParams {
    /// The threat list (a valid list name).
    pub list_name: String,
    /// The snapshot the additions apply to.
    pub from: DeltaEnd,
    /// The snapshot the result stands for.
    pub to: DeltaEnd,
    /// Unix seconds.
    pub created_at: u64,
    /// Unix seconds.
    pub expires_at: u64,
}

/// Why a delta, chain or freshness record was refused. The reader keeps
/// what it had.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeltaError {
    /// The input ended while reading `field`.
    #[error("delta truncated while reading {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// Not a delta or record (bad magic).
    #[error("not a blocksieve {what} (bad magic)")]
    BadMagic {
        /// `delta` or `freshness record`.
        what: &'static str,
    },
    /// A format version this reader does not know.
    #[error("{what} format version {found} is not supported (this reader knows version 1)")]
    UnsupportedVersion {
        /// `delta` or `freshness record`.
        what: &'static str,
        /// The version in the file.
        found: u16,
    },
    /// A field has a value the format does not allow.
    #[error("invalid {field}: {value}")]
    InvalidField {
        /// The field name as in FORMAT.md.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// The signing key is not trusted.
    #[error("signed by unknown key {}", hex::encode(key_id))]
    UnknownKey {
        /// The key id in the header.
        key_id: KeyId,
    },
    /// The signature does not verify.
    #[error("signature does not verify")]
    BadSignature,
    /// The body is not exactly as long as declared.
    #[error("delta body is {actual} bytes, the header declares {declared}")]
    BodyLength {
        /// Declared.
        declared: u64,
        /// Present.
        actual: u64,
    },
    /// The body's SHA-256 differs from the signed header's.
    #[error("delta body does not match the SHA-256 in its signed header")]
    BodyHashMismatch,
    /// The Rice-coded body does not hold `addition_count` ascending prefixes.
    #[error("delta body is not a valid Rice coding of its additions: {reason}")]
    BadEncoding {
        /// What is wrong.
        reason: &'static str,
    },
    /// In a chain, delta `index` does not start where the previous one ends.
    #[error("delta {index} of the chain does not start at the version the previous one ends at")]
    BrokenChain {
        /// The delta's position in the chain.
        index: usize,
    },
    /// A chain of more deltas than read at once: [`MAX_CHAIN_DELTAS`] in
    /// one response ([`decode_chain`]), or the reader's own bound
    /// ([`decode_chain_up_to`]).
    #[error("chain holds more than {max} deltas")]
    ChainTooLong {
        /// The most deltas read.
        max: usize,
    },
}

/// Encodes and signs a delta carrying `additions` (any order; duplicates
/// are dropped).
///
/// # Errors
///
/// [`DeltaError::InvalidField`] for an invalid list name, `to` not after
/// `from`, `expires_at` before `created_at`, or too many additions.
pub fn encode_delta(
    params: &DeltaParams,
    additions: &[u32],
    key: &SigningKey,
) -> Result<Vec<u8>, DeltaError> {
    let invalid = |field, value| DeltaError::InvalidField { field, value };
    if !is_valid_list_name(&params.list_name) {
        return Err(invalid("list_name_len", params.list_name.len() as u64));
    }
    if params.to.version <= params.from.version {
        return Err(invalid("to_version", params.to.version));
    }
    if params.expires_at < params.created_at {
        return Err(invalid("expires_at", params.expires_at));
    }
    let mut sorted = additions.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let count = u32::try_from(sorted.len())
        .ok()
        .filter(|&c| c <= MAX_DELTA_ADDITIONS)
        .ok_or(invalid("addition_count", sorted.len() as u64))?;
    let k = rice::best_k(&sorted);
    let body = if sorted.is_empty() {
        Vec::new()
    } else {
        rice::encode(&sorted, k)
    };
    let body_len = u32::try_from(body.len()).map_err(|_| invalid("body_len", body.len() as u64))?;
    let name = params.list_name.as_bytes();
    let header_len = header_len_for(name.len());
    let mut out = Vec::with_capacity(header_len + body.len());
    out.extend_from_slice(&DELTA_MAGIC);
    out.extend_from_slice(&DELTA_VERSION.to_le_bytes());
    out.extend_from_slice(&(header_len as u16).to_le_bytes());
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    for end in [params.from, params.to] {
        out.extend_from_slice(&end.version.to_le_bytes());
        out.extend_from_slice(&end.body_sha256);
    }
    out.extend_from_slice(&params.created_at.to_le_bytes());
    out.extend_from_slice(&params.expires_at.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&sorted.first().copied().unwrap_or(0).to_le_bytes());
    out.push(k);
    out.extend_from_slice(&body_len.to_le_bytes());
    out.extend_from_slice(&Sha256::digest(&body));
    out.extend_from_slice(&key.public_key().id());
    let signature = key.sign_in_context(DELTA_CONTEXT, &out);
    out.extend_from_slice(&signature);
    out.extend_from_slice(&body);
    Ok(out)
}

/// Parses a delta's header without checking its signature (steps 1 of
/// FORMAT.md "Reading a delta"): for tools and for splitting a chain.
/// Returns the header and the delta's total length.
///
/// # Errors
///
/// The first malformed field.
pub fn parse_delta_header(bytes: &[u8]) -> Result<(DeltaHeader, usize), DeltaError> {
    let t = |field| DeltaError::Truncated { field };
    let invalid = |field, value| DeltaError::InvalidField { field, value };
    let mut r = Reader::new(bytes);
    if r.array::<8>().ok_or(t("magic"))? != DELTA_MAGIC {
        return Err(DeltaError::BadMagic { what: "delta" });
    }
    let version = r.u16().ok_or(t("format_version"))?;
    if version != DELTA_VERSION {
        return Err(DeltaError::UnsupportedVersion {
            what: "delta",
            found: version,
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
    let mut end = |which: (&'static str, &'static str)| -> Result<DeltaEnd, DeltaError> {
        Ok(DeltaEnd {
            version: r.u64().ok_or(t(which.0))?,
            body_sha256: r.array().ok_or(t(which.1))?,
        })
    };
    let from = end(("from_version", "from_body_sha256"))?;
    let to = end(("to_version", "to_body_sha256"))?;
    if to.version <= from.version {
        return Err(invalid("to_version", to.version));
    }
    let created_at = r.u64().ok_or(t("created_at"))?;
    let expires_at = r.u64().ok_or(t("expires_at"))?;
    if expires_at < created_at {
        return Err(invalid("expires_at", expires_at));
    }
    let addition_count = r.u32().ok_or(t("addition_count"))?;
    if addition_count > MAX_DELTA_ADDITIONS {
        return Err(invalid("addition_count", u64::from(addition_count)));
    }
    let first_addition = r.u32().ok_or(t("first_addition"))?;
    if addition_count == 0 && first_addition != 0 {
        return Err(invalid("first_addition", u64::from(first_addition)));
    }
    let rice_k = r.u8().ok_or(t("rice_k"))?;
    if rice_k > MAX_RICE_K || (addition_count < 2 && rice_k != 0) {
        return Err(invalid("rice_k", u64::from(rice_k)));
    }
    let body_len = r.u32().ok_or(t("body_len"))?;
    if addition_count < 2 && body_len != 0 {
        return Err(invalid("body_len", u64::from(body_len)));
    }
    let body_sha256 = r.array().ok_or(t("body_sha256"))?;
    let key_id = r.array().ok_or(t("key_id"))?;
    r.take(64).ok_or(t("signature"))?;
    let header = DeltaHeader {
        list_name,
        from,
        to,
        created_at,
        expires_at,
        addition_count,
        first_addition,
        rice_k,
        body_len,
        body_sha256,
        key_id,
    };
    // The whole delta's length, which on a 32-bit target (WASM) may not
    // fit a `usize` for a hostile `body_len`: refused, not wrapped.
    let len = usize::try_from(body_len)
        .ok()
        .and_then(|body| header_len.checked_add(body))
        .ok_or(invalid("body_len", u64::from(body_len)))?;
    Ok((header, len))
}

/// Verifies and decodes one delta, which must be all of `bytes` (FORMAT.md
/// "Reading a delta", steps 1–5).
///
/// # Errors
///
/// The first check that fails.
pub fn decode_delta(bytes: &[u8], trusted: &[TrustedKey]) -> Result<VerifiedDelta, DeltaError> {
    let (header, len) = parse_delta_header(bytes)?;
    let header_len = header_len_for(header.list_name.len());
    let key = trusted
        .iter()
        .find(|k| k.id() == header.key_id)
        .ok_or(DeltaError::UnknownKey {
            key_id: header.key_id,
        })?;
    let signature: [u8; 64] = bytes[header_len - 64..header_len]
        .try_into()
        .map_err(|_| DeltaError::Truncated { field: "signature" })?;
    if !key.verify_in_context(DELTA_CONTEXT, &bytes[..header_len - 64], &signature) {
        return Err(DeltaError::BadSignature);
    }
    if bytes.len() != len {
        return Err(DeltaError::BodyLength {
            declared: u64::from(header.body_len),
            actual: (bytes.len() - header_len) as u64,
        });
    }
    let body = &bytes[header_len..];
    if Sha256::digest(body).as_slice() != header.body_sha256 {
        return Err(DeltaError::BodyHashMismatch);
    }
    let additions = match header.addition_count {
        0 => Vec::new(),
        n => rice::decode(header.first_addition, n as usize, header.rice_k, body).map_err(|e| {
            DeltaError::BadEncoding {
                reason: match e {
                    rice::RiceError::Truncated => "the bits end before the last addition",
                    rice::RiceError::Overflow => "an addition passes 2^32 - 1",
                    rice::RiceError::TrailingBits => "bits are left after the last addition",
                },
            }
        })?,
    };
    Ok(VerifiedDelta { header, additions })
}

/// Splits a chain (deltas one after another, FORMAT.md "Delta chains")
/// into its deltas and verifies each: every one of `list`, each starting
/// exactly where the previous one ends. The chain may be empty.
///
/// # Errors
///
/// The first delta that fails, or [`DeltaError::BrokenChain`] /
/// [`DeltaError::ChainTooLong`] (more than [`MAX_CHAIN_DELTAS`], the most
/// one response may hold).
pub fn decode_chain(
    bytes: &[u8],
    list: &str,
    trusted: &[TrustedKey],
) -> Result<Vec<VerifiedDelta>, DeltaError> {
    decode_chain_up_to(bytes, list, trusted, MAX_CHAIN_DELTAS)
}

/// [`decode_chain`] of at most `max_deltas` deltas: for a chain kept
/// across many responses (an agent's since its base snapshot), which may
/// be longer than one response's.
///
/// # Errors
///
/// As [`decode_chain`], [`DeltaError::ChainTooLong`] past `max_deltas`.
pub fn decode_chain_up_to(
    bytes: &[u8],
    list: &str,
    trusted: &[TrustedKey],
    max_deltas: usize,
) -> Result<Vec<VerifiedDelta>, DeltaError> {
    let mut deltas: Vec<VerifiedDelta> = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        if deltas.len() == max_deltas {
            return Err(DeltaError::ChainTooLong { max: max_deltas });
        }
        let (_, len) = parse_delta_header(rest)?;
        let Some((one, tail)) = rest.split_at_checked(len) else {
            return Err(DeltaError::BodyLength {
                declared: len as u64,
                actual: rest.len() as u64,
            });
        };
        let delta = decode_delta(one, trusted)?;
        if delta.header.list_name != list {
            return Err(DeltaError::InvalidField {
                field: "list_name",
                value: deltas.len() as u64,
            });
        }
        if deltas
            .last()
            .is_some_and(|prev| prev.header.to != delta.header.from)
        {
            return Err(DeltaError::BrokenChain { index: deltas.len() });
        }
        deltas.push(delta);
        rest = tail;
    }
    Ok(deltas)
}

/// The sorted union of two strictly ascending prefix sets: how an agent
/// adds a delta's prefixes to those it holds, off to the side.
pub fn merge_additions(held: &[u32], added: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(held.len() + added.len());
    let (mut i, mut j) = (0, 0);
    while i < held.len() && j < added.len() {
        match held[i].cmp(&added[j]) {
            std::cmp::Ordering::Less => {
                out.push(held[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(added[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(held[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&held[i..]);
    out.extend_from_slice(&added[j..]);
    out
}

/// The 32-bit prefixes of `to` that `from` lacks: a delta's additions.
/// Both sorted ascending (duplicates allowed).
pub fn additions_between(from: &[u32], to: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut i = 0;
    for &p in to {
        while i < from.len() && from[i] < p {
            i += 1;
        }
        if (i >= from.len() || from[i] != p) && out.last() != Some(&p) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests;
