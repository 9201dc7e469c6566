use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn key() -> SigningKey {
    SigningKey::from_secret_bytes([0x42; 32])
}

fn end(version: u64) -> DeltaEnd {
    DeltaEnd {
        version,
        body_sha256: [version as u8; 32],
    }
}

fn params(from: u64, to: u64) -> DeltaParams {
    DeltaParams {
        list_name: "phishing".to_owned(),
        from: end(from),
        to: end(to),
        created_at: 1_800_000_000,
        expires_at: 1_800_007_200,
    }
}

#[test]
fn deltas_round_trip_with_zero_one_and_many_additions() {
    let trusted = [key().public_key().clone()];
    let mut rng = StdRng::seed_from_u64(16);
    let many: Vec<u32> = (0..339).map(|_| rng.r#gen()).collect();
    for additions in [vec![], vec![7u32], vec![u32::MAX, 0, 5, 5], many] {
        let bytes = encode_delta(&params(10, 11), &additions, &key()).unwrap();
        let delta = decode_delta(&bytes, &trusted).unwrap();
        let mut expected = additions.clone();
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(delta.additions(), expected);
        assert_eq!(delta.header().from, end(10));
        assert_eq!(delta.header().to, end(11));
        assert_eq!(delta.header().list_name, "phishing");
    }
}

#[test]
fn forged_truncated_or_extended_deltas_are_refused() {
    let trusted = [key().public_key().clone()];
    let bytes = encode_delta(&params(10, 11), &[1, 2, 3, 1_000_000], &key()).unwrap();
    let other = SigningKey::from_secret_bytes([7; 32]);
    assert!(matches!(
        decode_delta(&bytes, &[other.public_key().clone()]),
        Err(DeltaError::UnknownKey { .. })
    ));
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x01;
        assert!(decode_delta(&bad, &trusted).is_err(), "flip at {i} accepted");
        assert!(
            decode_delta(&bytes[..i], &trusted).is_err(),
            "truncation at {i} accepted"
        );
    }
    let mut long = bytes.clone();
    long.push(0);
    assert!(matches!(
        decode_delta(&long, &trusted),
        Err(DeltaError::BodyLength { .. })
    ));
    // A delta signature is not a snapshot's or a record's.
    let record = FreshnessRecord {
        list_name: "phishing".to_owned(),
        version: 11,
        body_sha256: [11; 32],
        issued_at: 5,
        expires_at: 6,
        next_build_at: 0,
    };
    let signed = record.sign(&key()).unwrap();
    assert_eq!(FreshnessRecord::verify(&signed, &trusted).unwrap(), record);
    assert!(decode_delta(&signed, &trusted).is_err());
}

#[test]
fn chains_must_be_contiguous_and_of_one_list() {
    let trusted = [key().public_key().clone()];
    let a = encode_delta(&params(1, 2), &[1], &key()).unwrap();
    let b = encode_delta(&params(2, 3), &[2, 9], &key()).unwrap();
    let c = encode_delta(&params(3, 5), &[], &key()).unwrap();
    let chain = [a.clone(), b.clone(), c.clone()].concat();
    let deltas = decode_chain(&chain, "phishing", &trusted).unwrap();
    assert_eq!(deltas.len(), 3);
    assert!(decode_chain(&[], "phishing", &trusted).unwrap().is_empty());
    // Dropped, reordered, replayed.
    for broken in [
        [a.clone(), c.clone()].concat(),
        [b.clone(), a.clone()].concat(),
        [a.clone(), a.clone()].concat(),
    ] {
        assert!(matches!(
            decode_chain(&broken, "phishing", &trusted),
            Err(DeltaError::BrokenChain { index: 1 })
        ));
    }
    assert!(decode_chain(&chain, "malware", &trusted).is_err());
    assert!(decode_chain(&chain[..chain.len() - 1], "phishing", &trusted).is_err());
    // Same versions, another body hash: not the snapshot the agent holds.
    let mut other = params(2, 3);
    other.from.body_sha256 = [0xee; 32];
    let forked = [a, encode_delta(&other, &[4], &key()).unwrap()].concat();
    assert!(decode_chain(&forked, "phishing", &trusted).is_err());
}

#[test]
fn merges_and_differences_of_sorted_sets() {
    assert_eq!(merge_additions(&[1, 3, 5], &[2, 3, 6]), vec![1, 2, 3, 5, 6]);
    assert_eq!(merge_additions(&[], &[4]), vec![4]);
    assert_eq!(additions_between(&[1, 3, 5], &[0, 3, 3, 4, 9]), vec![0, 4, 9]);
    assert_eq!(additions_between(&[], &[2, 2]), vec![2]);
}

#[test]
fn freshness_records_travel_as_header_values() {
    let trusted = [key().public_key().clone()];
    let record = FreshnessRecord {
        list_name: "a".repeat(64),
        version: u64::MAX,
        body_sha256: [3; 32],
        issued_at: 1,
        expires_at: u64::MAX,
        next_build_at: 9,
    };
    let value = FreshnessRecord::to_header_value(&record.sign(&key()).unwrap());
    assert!(value.len() < 300, "{} bytes", value.len());
    assert_eq!(
        FreshnessRecord::from_header_value(&value, &trusted).unwrap(),
        record
    );
    assert!(FreshnessRecord::from_header_value(&format!("{value}AAAA"), &trusted).is_err());
    assert!(FreshnessRecord::from_header_value("not base64!", &trusted).is_err());
    let bad = FreshnessRecord {
        expires_at: 0,
        ..record
    };
    assert!(bad.sign(&key()).is_err());
}

#[test]
fn a_body_length_past_the_address_space_is_refused_not_wrapped() {
    // `body_len` near `u32::MAX`: on a 32-bit target (WASM) the delta's
    // whole length does not fit a `usize`; everywhere it is more bytes
    // than there are.
    let bytes = encode_delta(&params(10, 11), &[1, 2, 3, 1_000_000], &key()).unwrap();
    let header_len = header_len_for("phishing".len());
    let body_len = u32::try_from(bytes.len() - header_len).unwrap();
    let at = bytes[..header_len]
        .windows(4)
        .position(|w| w == body_len.to_le_bytes())
        .unwrap();
    let mut bad = bytes.clone();
    bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    match parse_delta_header(&bad) {
        Ok((_, len)) => assert_eq!(len as u64, header_len as u64 + u64::from(u32::MAX)),
        Err(e) => assert!(
            matches!(
                e,
                DeltaError::InvalidField {
                    field: "body_len",
                    ..
                }
            ),
            "{e}"
        ),
    }
    let trusted = [key().public_key().clone()];
    assert!(decode_delta(&bad, &trusted).is_err());
    assert!(decode_chain(&bad, "phishing", &trusted).is_err());
}
