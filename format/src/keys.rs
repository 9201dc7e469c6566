//! Ed25519 keys that sign and verify snapshots.
//!
//! A publisher signs every snapshot header with its [`SigningKey`]; an agent
//! accepts a snapshot only if its header verifies under one of its
//! [`TrustedKey`]s. Keys travel as base64 (standard alphabet, padded) of
//! their 32 raw bytes; a public key is also read as 64 hex digits. A key's
//! [`KeyId`] — the first eight bytes of the SHA-256 of the public key — is
//! written in the header so the reader knows which trusted key to try.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::Signer as _;
use sha2::{Digest, Sha256};

/// Eight bytes naming a public key: SHA-256(public key)[..8].
pub type KeyId = [u8; 8];

/// A key could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid key: {reason}")]
pub struct KeyError {
    reason: String,
}

impl KeyError {
    fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

fn decode_32(text: &str) -> Result<[u8; 32], KeyError> {
    let text = text.trim();
    let bytes = STANDARD.decode(text).map_err(|e| {
        KeyError::new(format!(
            "not base64 (a key is base64 of 32 bytes, 44 characters, as keygen writes it): {e}"
        ))
    })?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
        // 64 hex digits are valid base64 too (of 48 bytes): say which form
        // was read, so a key written as hex is not a mystery.
        let hex = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            "; that is 64 hex digits: give the key as base64, as keygen writes it"
        } else {
            ""
        };
        KeyError::new(format!(
            "expected base64 of 32 bytes (44 characters), got {} characters, {} bytes{hex}",
            text.chars().count(),
            bytes.len()
        ))
    })
}

/// A public key an agent trusts to sign snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedKey {
    key: ed25519_dalek::VerifyingKey,
    id: KeyId,
}

impl TrustedKey {
    /// Parses the base64 form printed by `blocksieve-publisher keygen`.
    ///
    /// # Errors
    ///
    /// [`KeyError`] when the text is not base64 of 32 bytes or not a valid
    /// Ed25519 point.
    pub fn from_base64(text: &str) -> Result<Self, KeyError> {
        Self::from_public_bytes(&decode_32(text)?)
    }

    /// Parses a public key given either as base64 (44 characters, as
    /// `blocksieve-publisher keygen` prints it) or as 64 hex digits (either
    /// case); surrounding whitespace is ignored. Text of 64 hex digits is
    /// read as hex, anything else as base64.
    ///
    /// # Errors
    ///
    /// [`KeyError`] when the text is neither form of 32 bytes, or not a
    /// valid Ed25519 point.
    pub fn from_base64_or_hex(text: &str) -> Result<Self, KeyError> {
        let text = text.trim();
        if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            let mut bytes = [0u8; 32];
            hex::decode_to_slice(text, &mut bytes).map_err(|e| KeyError::new(format!("not hex: {e}")))?;
            return Self::from_public_bytes(&bytes);
        }
        let bytes = STANDARD.decode(text).map_err(|_| {
            KeyError::new(format!(
                "expected base64 of 32 bytes (44 characters) or 64 hex digits, got {} characters that are neither",
                text.chars().count()
            ))
        })?;
        let bytes = <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
            KeyError::new(format!(
                "expected 32 bytes (44 base64 characters or 64 hex digits), got {} bytes of base64",
                bytes.len()
            ))
        })?;
        Self::from_public_bytes(&bytes)
    }

    fn from_public_bytes(bytes: &[u8; 32]) -> Result<Self, KeyError> {
        let key = ed25519_dalek::VerifyingKey::from_bytes(bytes)
            .map_err(|_| KeyError::new("not a valid Ed25519 public key"))?;
        if key.is_weak() {
            return Err(KeyError::new("weak (small-order) Ed25519 public key"));
        }
        Ok(Self::from_verifying_key(key))
    }

    fn from_verifying_key(key: ed25519_dalek::VerifyingKey) -> Self {
        let digest = Sha256::digest(key.as_bytes());
        let mut id = [0u8; 8];
        id.copy_from_slice(&digest[..8]);
        Self { key, id }
    }

    /// The key id written in snapshot headers.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// The base64 form of the public key.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.key.as_bytes())
    }

    /// Verifies `signature` over `message` with strict Ed25519 rules
    /// (`verify_strict`: rejects non-canonical and small-order components).
    pub(crate) fn verify(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        let sig = ed25519_dalek::Signature::from_bytes(signature);
        self.key.verify_strict(message, &sig).is_ok()
    }

    /// Verifies a signature made by [`SigningKey::sign_in_context`] over
    /// `message` in `context`.
    pub fn verify_in_context(&self, context: &str, message: &[u8], signature: &[u8; 64]) -> bool {
        self.verify(&in_context(context, message), signature)
    }
}

/// What a signature in `context` covers: a prefix no snapshot header
/// starts with, the context, a zero byte, then the message, so a signature
/// made for one kind of object never verifies as another's.
fn in_context(context: &str, message: &[u8]) -> Vec<u8> {
    let mut signed = Vec::with_capacity(CONTEXT_PREFIX.len() + context.len() + 1 + message.len());
    signed.extend_from_slice(CONTEXT_PREFIX);
    signed.extend_from_slice(context.as_bytes());
    signed.push(0);
    signed.extend_from_slice(message);
    signed
}

/// The first bytes of every message signed in a context.
const CONTEXT_PREFIX: &[u8] = b"blocksieve signed object\0";

/// A publisher's private signing key.
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
    public: TrustedKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("key_id", &hex::encode(self.public.id))
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A signing key from 32 secret bytes (which the caller draws from a
    /// cryptographically secure random source).
    pub fn from_secret_bytes(secret: [u8; 32]) -> Self {
        let key = ed25519_dalek::SigningKey::from_bytes(&secret);
        let public = TrustedKey::from_verifying_key(key.verifying_key());
        Self { key, public }
    }

    /// Parses the base64 secret key file contents.
    ///
    /// # Errors
    ///
    /// [`KeyError`] when the text is not base64 of 32 bytes.
    pub fn from_base64(text: &str) -> Result<Self, KeyError> {
        decode_32(text).map(Self::from_secret_bytes)
    }

    /// The base64 form of the secret key, for the private key file.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.key.to_bytes())
    }

    /// The matching public key.
    pub fn public_key(&self) -> &TrustedKey {
        &self.public
    }

    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }

    /// Signs `message` for use in `context` (e.g. `"manifest v1"`): the
    /// signature verifies with [`TrustedKey::verify_in_context`] in that
    /// context only, never as a snapshot's or another context's.
    pub fn sign_in_context(&self, context: &str, message: &[u8]) -> [u8; 64] {
        self.sign(&in_context(context, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_in_a_context_verifies_in_that_context_only() {
        let key = SigningKey::from_secret_bytes([3; 32]);
        let signature = key.sign_in_context("manifest v1", b"body");
        let public = key.public_key();
        assert!(public.verify_in_context("manifest v1", b"body", &signature));
        assert!(!public.verify_in_context("manifest v2", b"body", &signature));
        assert!(!public.verify_in_context("manifest v1", b"body!", &signature));
        assert!(!public.verify(b"body", &signature));
        let other = SigningKey::from_secret_bytes([4; 32]);
        assert!(
            !other
                .public_key()
                .verify_in_context("manifest v1", b"body", &signature)
        );
    }

    #[test]
    fn a_key_of_the_wrong_form_is_told_what_was_read() {
        let key = SigningKey::from_secret_bytes([7; 32]);
        let hex = hex::encode([7u8; 32]);
        let error = SigningKey::from_base64(&format!("{hex}\n"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "invalid key: expected base64 of 32 bytes (44 characters), got 64 characters, 48 bytes; \
             that is 64 hex digits: give the key as base64, as keygen writes it"
        );
        let cut = &key.to_base64()[..40];
        assert_eq!(
            SigningKey::from_base64(cut).unwrap_err().to_string(),
            "invalid key: expected base64 of 32 bytes (44 characters), got 40 characters, 30 bytes"
        );
        assert!(
            SigningKey::from_base64("no key here!")
                .unwrap_err()
                .to_string()
                .starts_with("invalid key: not base64 (a key is base64 of 32 bytes")
        );
    }

    #[test]
    fn public_keys_parse_from_base64_or_hex() {
        let key = SigningKey::from_secret_bytes([7; 32]);
        let public = key.public_key();
        let base64 = public.to_base64();
        let hex = hex::encode(public.key.as_bytes());
        assert_eq!(hex.len(), 64);
        for text in [
            base64.clone(),
            format!(" {base64}\n"),
            hex.clone(),
            hex.to_uppercase(),
            format!("{hex}\n"),
        ] {
            assert_eq!(
                TrustedKey::from_base64_or_hex(&text).as_ref(),
                Ok(public),
                "{text:?}"
            );
        }
        for bad in [
            "",
            "not a key",
            &hex[..62],
            &format!("{hex}00"),
            &hex.replacen(|c: char| c.is_ascii_digit(), "g", 1),
            &base64[..40],
        ] {
            let err = TrustedKey::from_base64_or_hex(bad).map(|k| k.to_base64());
            let Err(err) = err else {
                panic!("{bad:?} parsed as {err:?}");
            };
            let text = err.to_string();
            assert!(text.contains("base64") && text.contains("hex"), "{bad:?}: {text}");
        }
        // The base64 reader stays as strict as before.
        assert!(TrustedKey::from_base64(&hex).is_err());
    }
}
