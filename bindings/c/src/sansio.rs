//! The sans-I/O layer: what a host that fetches bytes itself needs —
//! canonicalization, expressions and full hashes of a URL, and snapshot
//! verification — over [`blocksieve_format`], with no thread, clock or
//! network.

use blocksieve_format::{DecodeLimits, TrustedKey, canonicalize};

use crate::failure::Failure;
use crate::types::{BLOCKSIEVE_FULL_HASH_BYTES, blocksieve_snapshot_info, blocksieve_status};

/// The Safe Browsing canonical form of `url`.
pub(crate) fn canonical(url: &str) -> Result<String, Failure> {
    Ok(canonicalize(url)?.as_str().to_owned())
}

/// The host-suffix/path-prefix expressions of `url`, in expression order,
/// each followed by `\n` (expressions never hold one: they are
/// canonical).
pub(crate) fn expressions(url: &str) -> Result<String, Failure> {
    let url = canonicalize(url)?;
    let mut out = String::new();
    for e in url.expressions() {
        out.push_str(e.as_str());
        out.push('\n');
    }
    Ok(out)
}

/// The full hashes of `url`'s expressions, in expression order, 32 bytes
/// each.
pub(crate) fn full_hashes(url: &str) -> Result<Vec<u8>, Failure> {
    let mut hashes = Vec::new();
    blocksieve_format::full_hashes(url, &mut hashes)?;
    let mut out = Vec::with_capacity(hashes.len() * BLOCKSIEVE_FULL_HASH_BYTES);
    for h in &hashes {
        out.extend_from_slice(&h.0);
    }
    Ok(out)
}

/// Parses trusted keys given as base64 or hex text.
pub(crate) fn trusted_keys(keys: &[&str]) -> Result<Vec<TrustedKey>, Failure> {
    if keys.is_empty() {
        return Err(Failure::new(
            blocksieve_status::BLOCKSIEVE_MISCONFIGURED,
            "no trusted publisher key configured",
        ));
    }
    keys.iter()
        .enumerate()
        .map(|(i, k)| {
            TrustedKey::from_base64_or_hex(k).map_err(|e| {
                Failure::new(
                    blocksieve_status::BLOCKSIEVE_MISCONFIGURED,
                    format!("trusted key {i}: {e}"),
                )
            })
        })
        .collect()
}

/// Verifies a snapshot's signature (by one of `keys`), body hash, layout,
/// limits (the defaults of [`DecodeLimits`]) and expiry at `now` (Unix
/// seconds): [`blocksieve_format::decode`].
pub(crate) fn verify_snapshot(
    bytes: &[u8],
    keys: &[&str],
    now: u64,
) -> Result<blocksieve_snapshot_info, Failure> {
    let keys = trusted_keys(keys)?;
    let snapshot = blocksieve_format::decode(bytes, &keys, &DecodeLimits::default(), now).map_err(|e| {
        Failure::new(
            blocksieve_status::BLOCKSIEVE_BAD_DATA,
            format!("snapshot rejected: {e}"),
        )
    })?;
    let h = snapshot.header();
    Ok(blocksieve_snapshot_info {
        list_name: crate::agent::list_name(&h.list_name),
        version: h.version,
        created_at: h.created_at,
        expires_at: h.expires_at,
        entry_count: h.entry_count,
        full_hash_count: h.full_hash_count,
        request_prefix_bits: h.request_prefix_bits,
        key_id: h.key_id,
    })
}
