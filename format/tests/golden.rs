//! Golden snapshots: one checked-in snapshot per filter kind, built from a
//! fixed real list slice with a fixed test key. Decoding them checks every
//! header field and that every listed prefix hits; rebuilding the filters
//! must give the same body bytes. A format change or a filter-library upgrade that changes
//! a byte fails here.
//!
//! Regenerate (only for a deliberate format change):
//! `BLOCKSIEVE_REGENERATE_GOLDEN=1 cargo test -p blocksieve-format --test golden`

#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::PathBuf;

use blocksieve_format::{
    DecodeLimits, FilterKind, FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotHeader, SnapshotParams,
    canonicalize, decode, encode,
};

const CREATED_AT: u64 = 1_800_000_000;
const EXPIRES_AT: u64 = 4_102_444_800; // 2100-01-01

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden")
}

fn test_key() -> SigningKey {
    SigningKey::from_secret_bytes([0x42; 32])
}

fn list_hashes() -> Vec<FullHash> {
    let text = std::fs::read_to_string(dir().join("list.txt")).unwrap();
    let mut hashes: Vec<FullHash> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| canonicalize(l).unwrap().expressions().next().unwrap().full_hash())
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    hashes
}

fn filter(kind: FilterKind, hashes: &[FullHash]) -> PrefixFilter {
    let mut keys: Vec<u64> = hashes.iter().map(|h| h.prefix().key()).collect();
    keys.dedup();
    PrefixFilter::build(kind, &keys).unwrap()
}

fn build(kind: FilterKind, hashes: &[FullHash]) -> Vec<u8> {
    let filter = filter(kind, hashes);
    let params = SnapshotParams {
        list_name: "golden".to_owned(),
        version: 7,
        created_at: CREATED_AT,
        expires_at: EXPIRES_AT,
        key_bits: KeyBits::Bits32,
        request_prefix_bits: 32,
        full_hash_count: hashes.len() as u64,
        measured_fpr: 0.00390625,
        zstd_level: 19,
    };
    encode(&params, &filter, &test_key()).unwrap()
}

fn describe(kind: FilterKind, h: &SnapshotHeader, file_len: usize) -> String {
    let mut s = String::new();
    writeln!(s, "[{kind}]").unwrap();
    writeln!(s, "file_bytes = {file_len}").unwrap();
    writeln!(s, "list_name = {}", h.list_name).unwrap();
    writeln!(s, "version = {}", h.version).unwrap();
    writeln!(s, "created_at = {}", h.created_at).unwrap();
    writeln!(s, "expires_at = {}", h.expires_at).unwrap();
    writeln!(s, "key_bits = {}", h.key_bits.bits()).unwrap();
    writeln!(s, "request_prefix_bits = {}", h.request_prefix_bits).unwrap();
    writeln!(s, "filter_kind = {}", h.filter_kind).unwrap();
    writeln!(s, "filter_param = {}", h.filter_param).unwrap();
    writeln!(s, "entry_count = {}", h.entry_count).unwrap();
    writeln!(s, "full_hash_count = {}", h.full_hash_count).unwrap();
    writeln!(s, "body_compressed_bytes = {}", h.body_compressed_bytes).unwrap();
    writeln!(s, "body_decompressed_bytes = {}", h.body_decompressed_bytes).unwrap();
    writeln!(s, "body_sha256 = {}", hex(&h.body_sha256)).unwrap();
    writeln!(s, "theoretical_fpr = {:e}", h.theoretical_fpr).unwrap();
    writeln!(s, "measured_fpr = {:e}", h.measured_fpr).unwrap();
    writeln!(s, "key_id = {}", hex(&h.key_id)).unwrap();
    s
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn golden_snapshots_decode_and_rebuild_identically() {
    let hashes = list_hashes();
    assert_eq!(hashes.len(), 200, "the golden list has 200 distinct URLs");
    let regenerate = std::env::var_os("BLOCKSIEVE_REGENERATE_GOLDEN").is_some();
    let mut manifest = String::new();
    for kind in FilterKind::ALL {
        let path = dir().join(format!("{kind}.snapshot"));
        if regenerate {
            std::fs::write(&path, build(kind, &hashes)).unwrap();
        }
        let golden = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let s = decode(
            &golden,
            &[test_key().public_key().clone()],
            &DecodeLimits::default(),
            CREATED_AT,
        )
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
        let h = s.header();
        assert_eq!(h.list_name, "golden");
        assert_eq!(h.version, 7);
        assert_eq!((h.created_at, h.expires_at), (CREATED_AT, EXPIRES_AT));
        assert_eq!(h.filter_kind, kind);
        assert_eq!(h.entry_count, 200);
        assert_eq!(h.full_hash_count, 200);
        assert_eq!(h.key_id, test_key().public_key().id());
        assert!(
            hashes.iter().all(|x| s.probably_contains(x)),
            "{kind}: a listed prefix misses"
        );
        // The filter bytes must rebuild identically (compressed bytes may
        // legitimately differ across zstd releases, so compare the body).
        assert_eq!(
            filter(kind, &hashes).to_body_bytes(),
            s.filter().to_body_bytes(),
            "{kind}: rebuilding the filter gives different bytes"
        );
        // The body decodes to the same bytes with ruzstd, the decoder of
        // builds without C (wasm32), as with the C library.
        let body = &golden[golden.len() - h.body_compressed_bytes as usize..];
        let [c, pure] = blocksieve_format::fuzzing::decompress_both(body, h.body_decompressed_bytes);
        assert_eq!(
            c.as_deref().ok(),
            Some(&s.filter().to_body_bytes()[..]),
            "{kind}: C"
        );
        assert!(c == pure, "{kind}: ruzstd decodes the body differently");
        manifest.push_str(&describe(kind, h, golden.len()));
        manifest.push('\n');
    }
    let manifest_path = dir().join("headers.txt");
    if regenerate {
        std::fs::write(&manifest_path, &manifest).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&manifest_path).unwrap(),
        manifest,
        "header fields changed"
    );
}

/// The golden delta: from version 6 (an arbitrary body hash, SHA-256 of
/// `golden version 6`) to the golden binary fuse 8 snapshot (version 7),
/// adding the 32-bit prefixes of the list's last 50 URLs; and the golden
/// freshness record vouching for version 7. Both are deterministic
/// (Ed25519 signatures are), so re-encoding must give the same bytes.
#[test]
fn golden_delta_and_freshness_record_decode_and_reencode_identically() {
    use blocksieve_format::{
        DeltaEnd, DeltaParams, FreshnessRecord, decode_chain, decode_delta, encode_delta,
    };
    use sha2::{Digest, Sha256};

    let regenerate = std::env::var_os("BLOCKSIEVE_REGENERATE_GOLDEN").is_some();
    let trusted = [test_key().public_key().clone()];
    let to_snapshot = std::fs::read(dir().join("binary_fuse8.snapshot")).unwrap();
    let to_hash = decode(&to_snapshot, &trusted, &DecodeLimits::default(), CREATED_AT)
        .unwrap()
        .header()
        .body_sha256;
    let text = std::fs::read_to_string(dir().join("list.txt")).unwrap();
    let urls: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut added: Vec<u32> = urls[urls.len() - 50..]
        .iter()
        .map(|l| {
            canonicalize(l)
                .unwrap()
                .expressions()
                .next()
                .unwrap()
                .full_hash()
                .prefix()
                .0
        })
        .collect();
    added.sort_unstable();
    added.dedup();
    let from = DeltaEnd {
        version: 6,
        body_sha256: Sha256::digest(b"golden version 6").into(),
    };
    let to = DeltaEnd {
        version: 7,
        body_sha256: to_hash,
    };
    let params = DeltaParams {
        list_name: "golden".to_owned(),
        from,
        to,
        created_at: CREATED_AT,
        expires_at: EXPIRES_AT,
    };
    let delta_path = dir().join("golden_6_7.delta");
    let record = FreshnessRecord {
        list_name: "golden".to_owned(),
        version: 7,
        body_sha256: to_hash,
        issued_at: CREATED_AT + 1_800,
        expires_at: CREATED_AT + 9_000,
        next_build_at: CREATED_AT + 3_600,
    };
    let record_path = dir().join("golden_7.freshness");
    if regenerate {
        std::fs::write(&delta_path, encode_delta(&params, &added, &test_key()).unwrap()).unwrap();
        std::fs::write(&record_path, record.sign(&test_key()).unwrap()).unwrap();
    }
    let golden = std::fs::read(&delta_path).unwrap();
    let delta = decode_delta(&golden, &trusted).unwrap();
    let h = delta.header();
    assert_eq!((h.list_name.as_str(), h.from, h.to), ("golden", from, to));
    assert_eq!((h.created_at, h.expires_at), (CREATED_AT, EXPIRES_AT));
    assert_eq!(h.addition_count, 50);
    // 50 random prefixes: gaps average 2^32/51 ≈ 2^26.3.
    assert_eq!(h.rice_k, 26);
    assert_eq!(golden.len(), 232 + h.body_len as usize, "header_len = 226 + 6");
    assert_eq!(delta.additions(), added.as_slice());
    assert_eq!(
        encode_delta(&params, &added, &test_key()).unwrap(),
        golden,
        "re-encoding differs"
    );
    assert_eq!(decode_chain(&golden, "golden", &trusted).unwrap(), vec![delta]);
    let golden_record = std::fs::read(&record_path).unwrap();
    assert_eq!(golden_record.len(), 147 + 6);
    assert_eq!(FreshnessRecord::verify(&golden_record, &trusted).unwrap(), record);
    assert_eq!(
        record.sign(&test_key()).unwrap(),
        golden_record,
        "re-signing differs"
    );
}
