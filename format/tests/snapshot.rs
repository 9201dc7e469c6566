//! Snapshot encode/decode: round trips and rejection of every kind of bad input.

#![allow(clippy::unwrap_used)]

use blocksieve_format::{
    DecodeError, DecodeLimits, FilterKind, FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotParams,
    TrustedKey, check_unverified, decode, decode_ignoring_expiry, encode,
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
    let error = decode(
        &bytes,
        std::slice::from_ref(&other),
        &DecodeLimits::default(),
        NOW,
    )
    .unwrap_err();
    assert!(matches!(error, DecodeError::UnknownKey { .. }));
    // The message names the signer's key and the one trusted, so that a
    // key of another publisher is told from a forged snapshot.
    let signer = hex::encode(trusted()[0].id());
    assert_eq!(
        error.to_string(),
        format!(
            "snapshot is signed by unknown key {signer} (the key trusted is {})",
            hex::encode(other.id())
        )
    );
    // The same key given twice is one key trusted; two keys are two.
    let twice = decode(
        &bytes,
        &[other.clone(), other.clone()],
        &DecodeLimits::default(),
        NOW,
    )
    .unwrap_err();
    assert_eq!(twice, error);
    let third = SigningKey::from_secret_bytes([8u8; 32]).public_key().clone();
    assert_eq!(
        decode(
            &bytes,
            &[other.clone(), third.clone(), other.clone(), third],
            &DecodeLimits::default(),
            NOW,
        )
        .unwrap_err()
        .to_string(),
        format!(
            "snapshot is signed by unknown key {signer} (the keys trusted are {} and 1 more)",
            hex::encode(other.id())
        )
    );
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

#[test]
fn decode_ignoring_expiry_keeps_an_expired_snapshot_and_checks_the_rest() {
    let (bytes, hs) = snapshot(FilterKind::BinaryFuse8, 1000);
    let later = NOW + 3601;
    let s = decode_ignoring_expiry(&bytes, &trusted(), &DecodeLimits::default()).unwrap();
    assert!(s.is_expired(later));
    assert!(!s.is_expired(NOW + 3600), "expires_at itself is still current");
    assert!(hs.iter().all(|h| s.probably_contains(h)));
    // Everything but the expiry is still checked.
    let other = SigningKey::from_secret_bytes([9u8; 32]).public_key().clone();
    assert!(matches!(
        decode_ignoring_expiry(&bytes, &[other], &DecodeLimits::default()),
        Err(DecodeError::UnknownKey { .. })
    ));
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert_eq!(
        decode_ignoring_expiry(&flipped, &trusted(), &DecodeLimits::default()).unwrap_err(),
        DecodeError::BodyHashMismatch
    );
}

#[test]
fn check_unverified_finds_every_body_bit_flip_without_a_key() {
    let (bytes, hs) = snapshot(FilterKind::BinaryFuse8, 30);
    let (header, filter) = check_unverified(&bytes, &DecodeLimits::default()).unwrap();
    assert_eq!(header.entry_count, 30);
    assert!(hs.iter().all(|h| filter.contains(h.prefix().key())));
    let header_len = usize::from(u16::from_le_bytes([bytes[10], bytes[11]]));
    for i in header_len * 8..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[i / 8] ^= 1 << (i % 8);
        assert!(
            check_unverified(&b, &DecodeLimits::default()).is_err(),
            "flip of body bit {i} passed"
        );
    }
    // A flip in the signature is only found with the key.
    let mut sig = bytes.clone();
    sig[header_len - 1] ^= 1;
    assert!(check_unverified(&sig, &DecodeLimits::default()).is_ok());
    // Truncation at every length is an error, never a panic.
    for len in 0..bytes.len() {
        assert!(check_unverified(&bytes[..len], &DecodeLimits::default()).is_err());
    }
}

/// A correctly signed snapshot around `compressed`, whose header claims
/// `decompressed` bytes and `entries` keys of BinaryFuse8.
fn signed_raw(compressed: &[u8], decompressed: u64, entries: u64) -> Vec<u8> {
    blocksieve_format::dangerous_encode_raw(
        &params("phishing", 1, entries),
        &blocksieve_format::RawBody {
            filter_kind: FilterKind::BinaryFuse8,
            filter_param: 0,
            entry_count: entries,
            decompressed_bytes: decompressed,
            theoretical_fpr: 1.0 / 256.0,
            compressed,
        },
        &key(),
    )
}

fn decode_err(bytes: &[u8]) -> DecodeError {
    decode(bytes, &trusted(), &DecodeLimits::default(), NOW).unwrap_err()
}

/// 1 GiB of zeros as one zstd frame (about 33 KB), streamed so the test never
/// holds the gigabyte; `pledge` writes the content size into the frame.
fn zstd_bomb(pledge: bool) -> Vec<u8> {
    use std::io::Write as _;
    let total: u64 = 1 << 30;
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    if pledge {
        enc.set_pledged_src_size(Some(total)).unwrap();
        enc.include_contentsize(true).unwrap();
    } else {
        enc.include_contentsize(false).unwrap();
    }
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..(total >> 20) {
        enc.write_all(&chunk).unwrap();
    }
    enc.finish().unwrap()
}

#[test]
fn zstd_bomb_declared_small_is_rejected_before_decompression() {
    let bomb = zstd_bomb(true);
    assert!(bomb.len() < 100_000, "bomb is {} bytes", bomb.len());
    // The header claims 1 MiB; the frame says 1 GiB.
    assert_eq!(
        decode_err(&signed_raw(&bomb, 1 << 20, 100)),
        DecodeError::Compression {
            reason: "frame content size differs from the header"
        }
    );
    // A frame that hides its content size is refused outright.
    assert_eq!(
        decode_err(&signed_raw(&zstd_bomb(false), 1 << 20, 100)),
        DecodeError::Compression {
            reason: "frame does not declare its content size"
        }
    );
    // Declared honestly, 1 GiB is over the decompressed limit.
    assert_eq!(
        decode_err(&signed_raw(&bomb, 1 << 30, 100)),
        DecodeError::DecompressedTooLarge {
            declared: 1 << 30,
            max: 256 * 1024 * 1024
        }
    );
}

#[test]
fn frame_declaring_a_huge_content_size_is_rejected() {
    // A complete zstd frame (RFC 8878 §3.1.1) declaring 2^40 content bytes
    // but holding one empty raw block: magic, descriptor 0xE0 (8-byte content
    // size, single segment), the size, then a last raw block of length 0.
    let mut frame = 0xFD2F_B528u32.to_le_bytes().to_vec();
    frame.push(0xE0);
    frame.extend_from_slice(&(1u64 << 40).to_le_bytes());
    frame.extend_from_slice(&[1, 0, 0]);
    // Declared honestly: over the decompressed limit, before any allocation.
    assert_eq!(
        decode_err(&signed_raw(&frame, 1 << 40, 1)),
        DecodeError::DecompressedTooLarge {
            declared: 1 << 40,
            max: 256 * 1024 * 1024
        }
    );
    // Declared small: the frame contradicts the signed header.
    assert_eq!(
        decode_err(&signed_raw(&frame, 24, 1)),
        DecodeError::Compression {
            reason: "frame content size differs from the header"
        }
    );
    // A frame cut short is not a frame.
    assert!(matches!(
        decode_err(&signed_raw(&frame[..frame.len() - 1], 24, 1)),
        DecodeError::Compression { .. }
    ));
}

#[test]
fn two_frames_are_rejected() {
    let (bytes, _) = snapshot(FilterKind::BinaryFuse8, 30);
    let s = decode(&bytes, &trusted(), &DecodeLimits::default(), NOW).unwrap();
    let header_len = usize::from(u16::from_le_bytes([bytes[10], bytes[11]]));
    let frame = &bytes[header_len..];
    let mut two = frame.to_vec();
    two.extend_from_slice(frame);
    assert_eq!(
        decode_err(&signed_raw(&two, s.header().body_decompressed_bytes, 30)),
        DecodeError::Compression {
            reason: "body is not exactly one zstd frame"
        }
    );
}

#[test]
fn empty_filter_where_header_says_non_empty() {
    let empty_body = zstd::bulk::compress(&[0u8; 24], 3).unwrap();
    assert_eq!(
        decode_err(&signed_raw(&empty_body, 24, 500)),
        DecodeError::EmptyFilter { entry_count: 500 }
    );
}

#[test]
fn decompressed_length_over_the_limit() {
    let (bytes, _) = snapshot(FilterKind::BinaryFuse8, 1000);
    let limits = DecodeLimits {
        max_decompressed_bytes: 100,
        ..DecodeLimits::default()
    };
    assert!(matches!(
        decode(&bytes, &trusted(), &limits, NOW),
        Err(DecodeError::DecompressedTooLarge { max: 100, .. })
    ));
}

#[test]
fn garbage_filter_layouts_are_rejected_not_panicking() {
    // Signed bodies whose descriptors would index out of bounds in xorf.
    let mut body = Vec::new();
    body.extend_from_slice(&7u64.to_le_bytes()); // seed
    body.extend_from_slice(&1024u32.to_le_bytes()); // segment_length
    body.extend_from_slice(&1023u32.to_le_bytes()); // mask
    body.extend_from_slice(&(1u32 << 20).to_le_bytes()); // segment_count_length, far past the array
    body.extend_from_slice(&4096u32.to_le_bytes()); // fingerprint count
    body.extend(std::iter::repeat_n(0u8, 4096));
    let compressed = zstd::bulk::compress(&body, 3).unwrap();
    assert!(matches!(
        decode_err(&signed_raw(&compressed, body.len() as u64, 100)),
        DecodeError::FilterLayout {
            field: "fingerprint count",
            ..
        }
    ));
}
