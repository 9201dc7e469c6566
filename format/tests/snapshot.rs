//! Snapshot encode/decode: round trips and rejection of every kind of bad input.

#![allow(clippy::unwrap_used)]

use blocksieve_format::{
    DecodeError, DecodeLimits, FilterKind, FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotParams,
    TrustedKey, decode, encode,
};

const NOW: u64 = 1_800_000_000;

fn key() -> SigningKey {
    SigningKey::from_secret_bytes([7u8; 32])
}

fn hashes(n: usize) -> Vec<FullHash> {
    let mut v: Vec<FullHash> = (0..n)
        .map(|i| FullHash::of(format!("host{i}.example/").as_bytes()))
        .collect();
    v.sort_unstable();
    v
}

fn params(name: &str, version: u64, count: u64) -> SnapshotParams {
    SnapshotParams {
        list_name: name.to_owned(),
        version,
        created_at: NOW,
        expires_at: NOW + 3600,
        key_bits: KeyBits::Bits32,
        request_prefix_bits: 32,
        full_hash_count: count,
        measured_fpr: 0.004,
        zstd_level: 3,
    }
}

fn snapshot(kind: FilterKind, n: usize) -> (Vec<u8>, Vec<FullHash>) {
    let hs = hashes(n);
    let mut keys: Vec<u64> = hs.iter().map(|h| h.prefix().key()).collect();
    keys.dedup();
    let filter = PrefixFilter::build(kind, &keys).unwrap();
    (
        encode(&params("phishing", 42, hs.len() as u64), &filter, &key()).unwrap(),
        hs,
    )
}

fn trusted() -> Vec<TrustedKey> {
    vec![key().public_key().clone()]
}

#[test]
fn round_trip_every_kind() {
    for kind in FilterKind::ALL {
        let (bytes, hs) = snapshot(kind, 2_000);
        let s = decode(&bytes, &trusted(), &DecodeLimits::default(), NOW).unwrap();
        let h = s.header();
        assert_eq!(h.list_name, "phishing");
        assert_eq!(h.version, 42);
        assert_eq!(h.created_at, NOW);
        assert_eq!(h.expires_at, NOW + 3600);
        assert_eq!(h.filter_kind, kind);
        assert_eq!(h.entry_count, 2_000);
        assert_eq!(h.full_hash_count, 2_000);
        assert_eq!(h.key_id, key().public_key().id());
        assert!(
            hs.iter().all(|x| s.probably_contains(x)),
            "no false negatives for {kind}"
        );
    }
}

#[test]
fn same_input_gives_identical_bytes() {
    let (a, _) = snapshot(FilterKind::BinaryFuse8, 500);
    let (b, _) = snapshot(FilterKind::BinaryFuse8, 500);
    assert_eq!(a, b);
}

#[test]
fn empty_list_round_trips_and_matches_nothing() {
    let filter = PrefixFilter::build(FilterKind::BinaryFuse8, &[]).unwrap();
    let bytes = encode(&params("empty", 1, 0), &filter, &key()).unwrap();
    let s = decode(&bytes, &trusted(), &DecodeLimits::default(), NOW).unwrap();
    assert!(!s.probably_contains(&FullHash::of(b"a.example/")));
}

#[test]
fn truncation_at_every_length_is_rejected_without_panic() {
    let (bytes, _) = snapshot(FilterKind::BinaryFuse8, 100);
    for len in 0..bytes.len() {
        let err = decode(&bytes[..len], &trusted(), &DecodeLimits::default(), NOW).unwrap_err();
        // Cut inside the header: truncated; inside the body: body length.
        assert!(
            matches!(
                err,
                DecodeError::Truncated { .. } | DecodeError::BodyLength { .. }
            ),
            "len {len}: {err:?}"
        );
    }
}

#[test]
fn every_single_bit_flip_is_rejected() {
    let (bytes, _) = snapshot(FilterKind::BinaryFuse8, 30);
    for i in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[i / 8] ^= 1 << (i % 8);
        assert!(
            decode(&b, &trusted(), &DecodeLimits::default(), NOW).is_err(),
            "flip of bit {i} accepted"
        );
    }
}

#[test]
fn trailing_bytes_are_rejected() {
    let (mut bytes, _) = snapshot(FilterKind::BinaryFuse8, 30);
    bytes.push(0);
    assert!(matches!(
        decode(&bytes, &trusted(), &DecodeLimits::default(), NOW),
        Err(DecodeError::BodyLength { .. })
    ));
}

#[test]
fn unknown_key_and_forged_signature_are_rejected() {
    let (bytes, _) = snapshot(FilterKind::BinaryFuse8, 30);
    let other = SigningKey::from_secret_bytes([9u8; 32]).public_key().clone();
    assert!(matches!(
        decode(&bytes, &[other], &DecodeLimits::default(), NOW),
        Err(DecodeError::UnknownKey { .. })
    ));
    // Same key id, different signature bytes.
    let mut forged = bytes.clone();
    // The header ends with the 64-byte signature; header_len is at offset 10.
    let header_len = usize::from(u16::from_le_bytes([bytes[10], bytes[11]]));
    forged[header_len - 1] ^= 0x40;
    assert_eq!(
        decode(&forged, &trusted(), &DecodeLimits::default(), NOW).unwrap_err(),
        DecodeError::BadSignature
    );
}

#[test]
fn unknown_version_and_bad_magic() {
    let (bytes, _) = snapshot(FilterKind::BinaryFuse8, 30);
    let mut v2 = bytes.clone();
    v2[8] = 2;
    assert_eq!(
        decode(&v2, &trusted(), &DecodeLimits::default(), NOW).unwrap_err(),
        DecodeError::UnsupportedVersion {
            found: 2,
            supported: 1
        }
    );
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(
        decode(&magic, &trusted(), &DecodeLimits::default(), NOW).unwrap_err(),
        DecodeError::BadMagic
    );
}

#[test]
fn limits_and_expiry() {
    let (bytes, _) = snapshot(FilterKind::BinaryFuse8, 1000);
    let small = DecodeLimits {
        max_entries: 999,
        ..DecodeLimits::default()
    };
    assert_eq!(
        decode(&bytes, &trusted(), &small, NOW).unwrap_err(),
        DecodeError::TooManyEntries {
            declared: 1000,
            max: 999
        }
    );
    let tiny = DecodeLimits {
        max_body_bytes: 10,
        ..DecodeLimits::default()
    };
    assert!(matches!(
        decode(&bytes, &trusted(), &tiny, NOW),
        Err(DecodeError::BodyTooLarge { max: 10, .. })
    ));
    assert_eq!(
        decode(&bytes, &trusted(), &DecodeLimits::default(), NOW + 3601).unwrap_err(),
        DecodeError::Expired {
            expires_at: NOW + 3600,
            now: NOW + 3601
        }
    );
}
