//! The freshness record (FORMAT.md "Freshness records"): a small signed
//! statement that a snapshot version is still the latest.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::DeltaError;
use crate::keys::{KeyId, SigningKey, TrustedKey};
use crate::reader::Reader;
use crate::snapshot::{MAX_LIST_NAME_BYTES, is_valid_list_name};

/// The first eight bytes of every freshness record.
pub const FRESHNESS_MAGIC: [u8; 8] = *b"BLKFRESH";
/// The signing context of freshness records.
const CONTEXT: &str = "blocksieve freshness v1";
/// Bytes after the list name, the signature included.
const FIXED_LEN: usize = 8 + 32 + 8 + 8 + 8 + 8 + 64;
/// The longest record: the longest name.
const MAX_LEN: usize = 8 + 2 + 1 + MAX_LIST_NAME_BYTES + FIXED_LEN;

/// "Snapshot `version` of `list_name` (body SHA-256 `body_sha256`) is the
/// latest as of `issued_at`; it stays fresh until `expires_at`; the next
/// build is due at `next_build_at`."
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreshnessRecord {
    /// The threat list.
    pub list_name: String,
    /// The snapshot version it vouches for.
    pub version: u64,
    /// `body_sha256` of that version's snapshot.
    pub body_sha256: [u8; 32],
    /// Unix seconds: when the publisher found the list unchanged.
    pub issued_at: u64,
    /// Unix seconds, ≥ `issued_at`: fresh until then.
    pub expires_at: u64,
    /// Unix seconds: when the publisher's next build of the list is due
    /// (0 when none is scheduled). Agents poll then, plus jitter.
    pub next_build_at: u64,
}

impl FreshnessRecord {
    /// The signed record's bytes.
    ///
    /// # Errors
    ///
    /// [`DeltaError::InvalidField`] for an invalid list name or an expiry
    /// before the issue time.
    pub fn sign(&self, key: &SigningKey) -> Result<Vec<u8>, DeltaError> {
        if !is_valid_list_name(&self.list_name) {
            return Err(DeltaError::InvalidField {
                field: "list_name_len",
                value: self.list_name.len() as u64,
            });
        }
        if self.expires_at < self.issued_at {
            return Err(DeltaError::InvalidField {
                field: "expires_at",
                value: self.expires_at,
            });
        }
        let mut out = Vec::with_capacity(MAX_LEN);
        out.extend_from_slice(&FRESHNESS_MAGIC);
        out.extend_from_slice(&1u16.to_le_bytes());
        out.push(self.list_name.len() as u8);
        out.extend_from_slice(self.list_name.as_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.body_sha256);
        out.extend_from_slice(&self.issued_at.to_le_bytes());
        out.extend_from_slice(&self.expires_at.to_le_bytes());
        out.extend_from_slice(&self.next_build_at.to_le_bytes());
        out.extend_from_slice(&key.public_key().id());
        let signature = key.sign_in_context(CONTEXT, &out);
        out.extend_from_slice(&signature);
        Ok(out)
    }

    /// Verifies a signed record, which must be all of `bytes`.
    ///
    /// # Errors
    ///
    /// The first check that fails.
    pub fn verify(bytes: &[u8], trusted: &[TrustedKey]) -> Result<Self, DeltaError> {
        let t = |field| DeltaError::Truncated { field };
        let invalid = |field, value| DeltaError::InvalidField { field, value };
        let mut r = Reader::new(bytes);
        if r.array::<8>().ok_or(t("magic"))? != FRESHNESS_MAGIC {
            return Err(DeltaError::BadMagic {
                what: "freshness record",
            });
        }
        let version = r.u16().ok_or(t("format_version"))?;
        if version != 1 {
            return Err(DeltaError::UnsupportedVersion {
                what: "freshness record",
                found: version,
            });
        }
        let name_len = usize::from(r.u8().ok_or(t("list_name_len"))?);
        if name_len == 0 || name_len > MAX_LIST_NAME_BYTES {
            return Err(invalid("list_name_len", name_len as u64));
        }
        let list_name = std::str::from_utf8(r.take(name_len).ok_or(t("list_name"))?)
            .ok()
            .filter(|n| is_valid_list_name(n))
            .ok_or(invalid("list_name", name_len as u64))?
            .to_owned();
        let record = Self {
            list_name,
            version: r.u64().ok_or(t("version"))?,
            body_sha256: r.array().ok_or(t("body_sha256"))?,
            issued_at: r.u64().ok_or(t("issued_at"))?,
            expires_at: r.u64().ok_or(t("expires_at"))?,
            next_build_at: r.u64().ok_or(t("next_build_at"))?,
        };
        if record.expires_at < record.issued_at {
            return Err(invalid("expires_at", record.expires_at));
        }
        let key_id: KeyId = r.array().ok_or(t("key_id"))?;
        let signed_len = r.position();
        let signature: [u8; 64] = r.array().ok_or(t("signature"))?;
        if r.remaining() != 0 {
            return Err(invalid("length", bytes.len() as u64));
        }
        let key = trusted
            .iter()
            .find(|k| k.id() == key_id)
            .ok_or(DeltaError::UnknownKey { key_id })?;
        if !key.verify_in_context(CONTEXT, &bytes[..signed_len], &signature) {
            return Err(DeltaError::BadSignature);
        }
        Ok(record)
    }

    /// A signed record as an HTTP header value: unpadded base64url
    /// (RFC 4648 §5) of its bytes.
    pub fn to_header_value(signed: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(signed)
    }

    /// Verifies a record sent as an HTTP header value.
    ///
    /// # Errors
    ///
    /// [`DeltaError::InvalidField`] (`header`) for text that is not
    /// base64url of at most the longest record, else as [`Self::verify`].
    pub fn from_header_value(value: &str, trusted: &[TrustedKey]) -> Result<Self, DeltaError> {
        if value.len() > MAX_LEN.div_ceil(3) * 4 {
            return Err(DeltaError::InvalidField {
                field: "header",
                value: value.len() as u64,
            });
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(value.trim())
            .map_err(|_| DeltaError::InvalidField {
                field: "header",
                value: value.len() as u64,
            })?;
        Self::verify(&bytes, trusted)
    }
}
