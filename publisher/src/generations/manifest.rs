//! The small JSON objects that commit a publish in storage: a signed
//! [`Manifest`] per generation, the [`Pointer`] to the latest one and the
//! builders' [`Lease`]. Pure: bytes in, bytes out ([`super`] stores
//! them).
//!
//! A manifest is stored as `{"manifest": {...}, "signature": "<base64>"}`;
//! the Ed25519 signature covers the bytes of the `manifest` value exactly as
//! stored (no re-serialization), in the context [`MANIFEST_CONTEXT`]
//! ([`SigningKey::sign_in_context`]), so it never verifies as a snapshot's.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use blocksieve_format::{SigningKey, TrustedKey};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// The signature context of manifests.
pub const MANIFEST_CONTEXT: &str = "blocksieve manifest v1";

/// One object of a generation: its key (under the list's prefix), size and
/// SHA-256, which a reader checks before using its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// The key under the list's prefix, e.g. `builds/<build>.snapshot`.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
}

impl ObjectRef {
    /// The reference to `bytes` stored under `key`.
    pub fn of(key: String, bytes: &[u8]) -> Self {
        Self {
            key,
            size: bytes.len() as u64,
            sha256: hex::encode(sha2::Sha256::digest(bytes)),
        }
    }

    /// The reference to the concatenation of `chunks` stored under `key`.
    pub fn of_chunks<'a>(key: String, chunks: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut hasher = sha2::Sha256::new();
        let mut size = 0u64;
        for chunk in chunks {
            hasher.update(chunk);
            size += chunk.len() as u64;
        }
        Self {
            key,
            size,
            sha256: hex::encode(hasher.finalize()),
        }
    }

    /// Why `bytes` are not this object, if they are not.
    pub fn mismatch(&self, bytes: &[u8]) -> Option<String> {
        if bytes.len() as u64 != self.size {
            return Some(format!(
                "{} is {} bytes, its manifest says {}",
                self.key,
                bytes.len(),
                self.size
            ));
        }
        let sha256 = hex::encode(sha2::Sha256::digest(bytes));
        (sha256 != self.sha256).then(|| {
            format!(
                "{} has SHA-256 {sha256}, its manifest says {}",
                self.key, self.sha256
            )
        })
    }
}

/// What one generation of a list is: written once, never replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The list's name.
    pub list: String,
    /// Its generation: the parent's plus one, from 1.
    pub generation: u64,
    /// The generation it replaces (`None` for the first).
    pub parent: Option<u64>,
    /// The snapshot's version.
    pub version: u64,
    /// When it was published, Unix seconds.
    pub created_at: u64,
    /// The build that made its objects (a never-reused id).
    pub build: String,
    /// The signed snapshot.
    pub snapshot: ObjectRef,
    /// The sorted full hashes, 32 raw bytes each.
    pub hashes: ObjectRef,
    /// The delta chain ending at this version (FORMAT.md "Delta chains");
    /// absent when it is empty, and in manifests written before deltas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deltas: Option<ObjectRef>,
}

impl Manifest {
    /// Every object the generation is made of.
    pub fn objects(&self) -> impl Iterator<Item = &ObjectRef> {
        [Some(&self.snapshot), Some(&self.hashes), self.deltas.as_ref()]
            .into_iter()
            .flatten()
    }
}

#[derive(Serialize)]
struct SignedOut<'a> {
    manifest: &'a serde_json::value::RawValue,
    signature: String,
}

#[derive(Deserialize)]
struct SignedIn<'a> {
    #[serde(borrow)]
    manifest: &'a serde_json::value::RawValue,
    signature: String,
}

impl Manifest {
    /// The stored form, signed with `key`.
    pub fn sign(&self, key: &SigningKey) -> Vec<u8> {
        // Serializing plain data with string keys cannot fail.
        let body = serde_json::to_string(self).unwrap_or_default();
        let signature = key.sign_in_context(MANIFEST_CONTEXT, body.as_bytes());
        let raw = serde_json::value::RawValue::from_string(body).unwrap_or_else(|_| {
            serde_json::value::RawValue::from_string("null".to_owned()).unwrap_or_default()
        });
        let signed = SignedOut {
            manifest: &raw,
            signature: STANDARD.encode(signature),
        };
        let mut out = serde_json::to_vec(&signed).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// The manifest stored as `bytes`, if its signature verifies under
    /// `key`.
    ///
    /// # Errors
    ///
    /// Why not, in words.
    pub fn verify(bytes: &[u8], keys: &[TrustedKey]) -> Result<Self, String> {
        let signed: SignedIn<'_> =
            serde_json::from_slice(bytes).map_err(|e| format!("not a signed manifest: {e}"))?;
        let signature: [u8; 64] = STANDARD
            .decode(&signed.signature)
            .ok()
            .and_then(|s| s.try_into().ok())
            .ok_or("its signature is not base64 of 64 bytes")?;
        let body = signed.manifest.get();
        if !(keys.iter()).any(|key| key.verify_in_context(MANIFEST_CONTEXT, body.as_bytes(), &signature)) {
            return Err(not_verified(keys));
        }
        serde_json::from_str(body).map_err(|e| format!("signed, but not a manifest: {e}"))
    }

    /// Whether `bytes` are a well-formed signed manifest: its body and a
    /// 64-byte signature, whoever signed it.
    pub fn is_signed(bytes: &[u8]) -> bool {
        serde_json::from_slice::<SignedIn<'_>>(bytes)
            .is_ok_and(|signed| STANDARD.decode(&signed.signature).is_ok_and(|s| s.len() == 64))
    }

    /// Whether `bytes` are a well-formed signed manifest whose signature
    /// does not verify under `key`: signed with another key (or forged),
    /// where any other failure is damage.
    pub fn signed_by_another_key(bytes: &[u8], keys: &[TrustedKey]) -> bool {
        let Ok(signed) = serde_json::from_slice::<SignedIn<'_>>(bytes) else {
            return false;
        };
        let signature: Option<[u8; 64]> = STANDARD
            .decode(&signed.signature)
            .ok()
            .and_then(|s| s.try_into().ok());
        signature.is_some_and(|signature| {
            !(keys.iter()).any(|key| {
                key.verify_in_context(MANIFEST_CONTEXT, signed.manifest.get().as_bytes(), &signature)
            })
        })
    }
}

/// Why a signature verified under none of `keys`: the publisher's public
/// key, or (a key rotation) any of its keys.
fn not_verified(keys: &[TrustedKey]) -> String {
    match keys {
        [_] => "its signature does not verify under the publisher's public key".to_owned(),
        _ => format!(
            "its signature does not verify under any of the publisher's {} public keys",
            keys.len()
        ),
    }
}

/// The `latest` pointer: which generation readers follow. Its body names
/// the generation, so two pointers never have equal bytes (an S3 ETag is
/// the body's MD5, and a compare-and-swap must tell them apart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    /// The list's name.
    pub list: String,
    /// The latest generation.
    pub generation: u64,
    /// Its snapshot's version (a reader serving it need read no more).
    pub version: u64,
    /// The latest signed freshness record of that version (FORMAT.md
    /// "Freshness records"), as its header value: an unchanged build
    /// replaces it, so that replicas serve it too. Not trusted: a reader
    /// verifies it and that it names the generation's version and body
    /// hash. Absent in pointers written before freshness records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness: Option<String>,
}

impl Pointer {
    /// The stored form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// The pointer stored as `bytes`.
    ///
    /// # Errors
    ///
    /// Why it is not one, in words.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("not a pointer: {e}"))
    }
}

/// Which builder builds a list now. It saves duplicate work only: the
/// create-only manifest and the pointer's compare-and-swap decide which
/// build is published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The holder (a builder's id for its process's life).
    pub holder: String,
    /// Until when, Unix seconds.
    pub expires_at: u64,
}

impl Lease {
    /// The stored form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// The lease stored as `bytes`; `None` for bytes that are not one
    /// (which any builder may then replace).
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            list: "phishing".to_owned(),
            generation: 7,
            parent: Some(6),
            version: 1_800_000_000,
            created_at: 1_800_000_001,
            build: "00000000001800000000-0123456789abcdef".to_owned(),
            snapshot: ObjectRef::of("builds/b.snapshot".to_owned(), b"snapshot"),
            hashes: ObjectRef::of_chunks("builds/b.hashes".to_owned(), [&b"ab"[..], b"cd"].into_iter()),
            deltas: None,
        }
    }

    #[test]
    fn a_signed_manifest_verifies_and_reads_back() {
        let key = SigningKey::from_secret_bytes([5; 32]);
        let stored = manifest().sign(&key);
        assert_eq!(
            Manifest::verify(&stored, std::slice::from_ref(key.public_key())),
            Ok(manifest())
        );
        assert_eq!(
            manifest().hashes,
            ObjectRef::of("builds/b.hashes".to_owned(), b"abcd")
        );
    }

    #[test]
    fn a_manifest_changed_or_signed_by_another_key_is_refused() {
        let key = SigningKey::from_secret_bytes([5; 32]);
        let stored = String::from_utf8(manifest().sign(&key)).unwrap();
        let other = SigningKey::from_secret_bytes([6; 32]);
        let refused =
            Manifest::verify(stored.as_bytes(), std::slice::from_ref(other.public_key())).unwrap_err();
        assert!(refused.contains("does not verify"), "{refused}");
        // Pointing generation 7 at other objects, or renumbering it.
        for (from, to) in [
            ("builds/b.snapshot", "builds/c.snapshot"),
            ("\"generation\":7", "\"generation\":8"),
        ] {
            let changed = stored.replace(from, to);
            assert_ne!(changed, stored);
            assert!(Manifest::verify(changed.as_bytes(), std::slice::from_ref(key.public_key())).is_err());
        }
        // Whitespace added inside the signed value changes its bytes too.
        let spaced = stored.replacen("{\"list\"", "{ \"list\"", 1);
        assert!(Manifest::verify(spaced.as_bytes(), std::slice::from_ref(key.public_key())).is_err());
        assert!(Manifest::verify(b"garbage", std::slice::from_ref(key.public_key())).is_err());
    }

    #[test]
    fn an_object_reference_names_what_does_not_match() {
        let object = ObjectRef::of("builds/b.hashes".to_owned(), b"abcd");
        assert_eq!(object.mismatch(b"abcd"), None);
        assert!(object.mismatch(b"abc").unwrap().contains("3 bytes"));
        assert!(object.mismatch(b"abce").unwrap().contains("SHA-256"));
    }

    #[test]
    fn pointers_of_two_generations_never_have_equal_bytes() {
        let pointer = |generation| Pointer {
            list: "phishing".to_owned(),
            generation,
            version: 1_800_000_000,
            freshness: None,
        };
        assert_ne!(pointer(1).to_bytes(), pointer(2).to_bytes());
        assert_eq!(Pointer::parse(&pointer(2).to_bytes()), Ok(pointer(2)));
        assert!(Pointer::parse(b"{}").is_err());
        assert_eq!(Lease::parse(b"nonsense"), None);
    }
}
