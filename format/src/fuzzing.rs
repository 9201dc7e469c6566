//! Bodies of the fuzz targets in `fuzz/` over what this crate reads from
//! untrusted input; each target is a one-line shim over a function here:
//!
//! - `canonicalize`: [`check_canonicalize`], the invariants of
//!   [`canonicalize`] and [`CanonicalUrl::expressions`] on any input, which
//!   the property tests (`tests/properties.rs`) and a unit test below also
//!   call;
//! - `snapshot_decode`: [`check_snapshot`], snapshot decoding as every reader
//!   runs it, which the unit tests below call on the seed corpus, the golden
//!   snapshots and snapshots cut or flipped anywhere;
//! - `full_hash_answer`: [`check_full_hash_answer`], the binary full-hash
//!   answer's decoder, which the unit tests below call on the seed corpus
//!   and on answers cut or flipped anywhere;
//! - `delta_decode`: [`check_delta`], deltas, delta chains and freshness
//!   records, which the unit tests below call on the golden delta and
//!   record and on them cut or flipped anywhere.
//!
//! A fuzz finding therefore reproduces with `cargo test`. Not a stable API.
//!
//! Every `check_*` function panics, with the input, when an invariant does
//! not hold: that is what the fuzzer looks for. Errors are expected and fine.

use crate::api::FullHashAnswer;
use crate::delta::{
    DELTA_CONTEXT, FreshnessRecord, decode_chain, decode_delta, encode_delta, parse_delta_header,
};
use crate::{
    CanonicalUrl, DecodeLimits, FullHash, HostKind, MAX_EXPRESSIONS, MAX_URL_BYTES, RawBody, SigningKey,
    SnapshotHeader, SnapshotParams, TrustedKey, VerifiedSnapshot, canonicalize, dangerous_encode_raw, decode,
    parse_header_unverified,
};

/// Canonicalizes `data` and, when it names a URL, checks every invariant of
/// [`check_invariants`].
///
/// # Panics
///
/// When an invariant does not hold, with the input and the broken rule: that
/// is what the fuzzer looks for.
pub fn check_canonicalize(data: &[u8]) {
    if let Err(broken) = check_invariants(data) {
        panic!("{broken}\ninput: {:?}", data.escape_ascii().to_string());
    }
}

/// Canonicalizes `data`, and gets the same result, URL or error, by the
/// steps of the module docs taken one by one (the one-pass common case must
/// never differ from them). An error is fine (nothing to look up); a URL
/// must satisfy:
///
/// 1. the canonical string is printable ASCII (`0x21..=0x7e`), `#` never
///    appears and `%` only starts an escape with two uppercase hex digits;
/// 2. it is `scheme://host` + path (starting with `/`) + optional `?query`,
///    and the accessors are slices of exactly that;
/// 3. it canonicalizes to itself (unless it grew past [`MAX_URL_BYTES`]:
///    escaping can triple an input's length);
/// 4. its expressions number at most [`MAX_EXPRESSIONS`], are distinct, the
///    first is the most specific one (exact host, path with non-empty query),
///    each host is the canonical host or a dot-suffix of it with at least two
///    labels (IP hosts: only the host itself), each path is a prefix of the
///    path with query, ending at `/`, at the end of the path, or at the end of
///    the query, and each full hash is the SHA-256 of host followed by path;
///    they are exactly the expressions of the v4 definition, in order, and
///    [`CanonicalUrl::full_hashes_into`] gives their full hashes;
/// 5. [`full_hashes`](crate::full_hashes) appends the same full hashes as
///    canonicalizing and then [`CanonicalUrl::full_hashes_into`], after what
///    `out` held, or fails with the same error and appends nothing;
/// 6. [`HashedUrl`](crate::HashedUrl) gives the same expression strings and
///    full hashes as the canonical URL's expressions, or the same error;
/// 7. [`canonicalize_form`](crate::canonicalize_form) gives the same host,
///    host kind, path, query and most specific expression, or the same
///    error.
///
/// # Errors
///
/// A description of the first invariant that does not hold.
pub fn check_invariants(data: &[u8]) -> Result<(), String> {
    let result = canonicalize(data);
    let by_steps = crate::canon::canonicalize_by_steps(data);
    if result != by_steps {
        return Err(format!(
            "canonicalize gives {result:?}, the steps one by one {by_steps:?}"
        ));
    }
    // The hashes without a CanonicalUrl: the same, or the same error.
    let mut hashes = vec![FullHash([0xa5; 32])];
    let direct = crate::full_hashes(data, &mut hashes);
    let hashed = crate::HashedUrl::of(data);
    check_form(data, &result)?;
    let Ok(url) = result else {
        if let Ok(h) = hashed {
            return Err(format!(
                "HashedUrl gives {h:?} where canonicalize gives {result:?}"
            ));
        }
        return match direct {
            Err(e) if result == Err(e) && hashes.len() == 1 => Ok(()),
            _ => Err(format!(
                "full_hashes gives {direct:?} with {} hashes where canonicalize gives {result:?}",
                hashes.len() - 1
            )),
        };
    };
    let mut expected = vec![FullHash([0xa5; 32])];
    url.full_hashes_into(&mut expected);
    if direct.is_err() || hashes != expected {
        return Err(format!(
            "full_hashes gives {direct:?} and {} hashes, canonicalize then full_hashes_into {}",
            hashes.len() - 1,
            expected.len() - 1
        ));
    }
    let by_expression: Vec<(String, FullHash)> = url
        .expressions()
        .map(|e| (e.as_str().to_owned(), e.full_hash()))
        .collect();
    match hashed {
        Ok(h)
            if h.iter()
                .map(|(e, f)| (e.to_owned(), *f))
                .eq(by_expression.iter().cloned()) => {}
        other => {
            return Err(format!(
                "HashedUrl gives {other:?}, the expressions {by_expression:?}"
            ));
        }
    }
    check_url(&url)
}

/// Invariant 7 of [`check_invariants`].
fn check_form(data: &[u8], canonicalized: &Result<CanonicalUrl, crate::CanonError>) -> Result<(), String> {
    let form = crate::canonicalize_form(data);
    let agrees = match (&form, canonicalized) {
        (Err(a), Err(b)) => a == b,
        (Ok(f), Ok(u)) => {
            f.host() == u.host().as_bytes()
                && f.host_kind() == u.host_kind()
                && f.path() == u.path().as_bytes()
                && f.query() == u.query().map(str::as_bytes)
                && f.most_specific_expression() == u.most_specific_expression().as_bytes()
        }
        _ => false,
    };
    if !agrees {
        return Err(format!(
            "canonicalize_form gives {form:?}, canonicalize {canonicalized:?}"
        ));
    }
    Ok(())
}

/// Checks invariants 1, 2 and 4 of [`check_invariants`] on one canonical URL.
fn check_url(url: &CanonicalUrl) -> Result<(), String> {
    let text = url.as_str();
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if !(0x21..=0x7e).contains(&b) || b == b'#' {
            return Err(format!("unescaped byte {b:#04x} at {i} in {text:?}"));
        }
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).unwrap_or_default();
            let upper_hex = |c: &u8| c.is_ascii_digit() || (b'A'..=b'F').contains(c);
            if hex.len() != 2 || !hex.iter().all(upper_hex) {
                return Err(format!(
                    "'%' at {i} does not start an uppercase escape in {text:?}"
                ));
            }
        }
    }
    let rebuilt = format!("{}://{}{}", url.scheme(), url.host(), url.path_and_query());
    if rebuilt != text || url.to_string() != text {
        return Err(format!("parts {rebuilt:?} do not make up {text:?}"));
    }
    let path = url.path();
    if !path.starts_with('/') || !url.path_and_query().starts_with(path) {
        return Err(format!("bad path {path:?} in {text:?}"));
    }
    match url.query() {
        None if url.path_and_query() != path => return Err(format!("lost query in {text:?}")),
        Some(q) if url.path_and_query() != format!("{path}?{q}") => {
            return Err(format!("bad query {q:?} in {text:?}"));
        }
        _ => {}
    }
    if bytes.len() <= MAX_URL_BYTES {
        match canonicalize(text) {
            Ok(again) if again == *url => {}
            again => return Err(format!("not idempotent: {text:?} -> {again:?}")),
        }
    }
    check_expressions(url)
}

fn check_expressions(url: &CanonicalUrl) -> Result<(), String> {
    let host = url.host();
    let pq = url.path_and_query();
    let path = url.path();
    let exprs: Vec<_> = url.expressions().collect();
    if exprs.is_empty() || exprs.len() > MAX_EXPRESSIONS || exprs.len() != url.expressions().len() {
        return Err(format!("{} expressions for {url}", exprs.len()));
    }
    let mut hashes = Vec::new();
    url.full_hashes_into(&mut hashes);
    if hashes != exprs.iter().map(|e| e.full_hash()).collect::<Vec<_>>() {
        return Err(format!(
            "full_hashes_into differs from the expressions' hashes for {url}"
        ));
    }
    let listed: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
    let expected = expressions_by_definition(url);
    if listed != expected {
        return Err(format!(
            "expressions {listed:?} of {url}, by definition {expected:?}"
        ));
    }
    let most_specific = if url.query().is_some_and(|q| !q.is_empty()) {
        pq
    } else {
        path
    };
    if exprs[0].host != host || exprs[0].path != most_specific {
        return Err(format!(
            "first expression {} of {url} is not the most specific",
            exprs[0]
        ));
    }
    for (i, e) in exprs.iter().enumerate() {
        let host_ok = e.host == host
            || (url.host_kind() == HostKind::Domain
                && e.host.contains('.')
                && host.strip_suffix(e.host).is_some_and(|head| head.ends_with('.')));
        let path_ok = pq.starts_with(e.path)
            && (e.path.len() == pq.len() || e.path.len() == path.len() || e.path.ends_with('/'));
        if !host_ok || !path_ok {
            return Err(format!(
                "expression {e} is not a host suffix/path prefix of {url}"
            ));
        }
        if exprs[..i].contains(e) {
            return Err(format!("duplicate expression {e} of {url}"));
        }
        let joined = format!("{}{}", e.host, e.path);
        if e.full_hash() != FullHash::of(joined.as_bytes()) || e.to_string() != joined {
            return Err(format!("full hash of {e} is not SHA-256 of its string"));
        }
    }
    Ok(())
}

/// Whether [`canonicalize`] takes its one-pass common case for `data`.
pub fn takes_common_case(data: &[u8]) -> bool {
    crate::canon::takes_common_case(data)
}

/// Whether [`full_hashes`](crate::full_hashes) hashes the expressions of
/// `data` as slices of it: canonical as written, no copy.
pub fn canonical_as_written(data: &[u8]) -> bool {
    crate::canon::canonical_as_written(data)
}

/// The expressions of `url` straight from the v4 "Suffix/Prefix
/// Expressions" text, string by string, in the iterator's order: the exact
/// host, then the suffixes of the last five labels from longest to
/// shortest (two labels at least, none for IP hosts); for each, the path
/// with a non-empty query, the path, then the prefixes up to each of the
/// first four slashes.
fn expressions_by_definition(url: &CanonicalUrl) -> Vec<String> {
    let host = url.host();
    let mut hosts = vec![host.to_owned()];
    if url.host_kind() == HostKind::Domain {
        let labels: Vec<&str> = host.split('.').collect();
        for k in (2..=labels.len().min(5)).rev() {
            let suffix = labels[labels.len() - k..].join(".");
            if suffix != host {
                hosts.push(suffix);
            }
        }
    }
    let path = url.path();
    let mut paths = Vec::new();
    if url.query().is_some_and(|q| !q.is_empty()) {
        paths.push(url.path_and_query().to_owned());
    }
    paths.push(path.to_owned());
    for (i, _) in path.match_indices('/').take(4) {
        if i + 1 != path.len() {
            paths.push(path[..=i].to_owned());
        }
    }
    hosts
        .iter()
        .flat_map(|h| paths.iter().map(move |p| format!("{h}{p}")))
        .collect()
}

/// The key of the golden snapshots in `tests/data/golden` (the
/// snapshot seed corpus): `SigningKey::from_secret_bytes([0x42; 32])`, a
/// test key never used for anything else.
pub fn fuzz_signing_key() -> SigningKey {
    SigningKey::from_secret_bytes([0x42; 32])
}

/// The trusted key matching [`fuzz_signing_key`].
pub fn fuzz_trusted_key() -> TrustedKey {
    fuzz_signing_key().public_key().clone()
}

/// "Now" for decoding: just after the golden snapshots' `created_at`
/// (1,800,000,000) and long before their `expires_at` (2100).
pub const FUZZ_NOW: u64 = 1_800_000_060;

/// Limits small enough that the fuzzer cannot spend its time in a 256 MiB
/// allocation, large enough for every seed.
pub const FUZZ_LIMITS: DecodeLimits = DecodeLimits {
    max_body_bytes: 1024 * 1024,
    max_decompressed_bytes: 4 * 1024 * 1024,
    max_entries: 1 << 20,
};

/// Snapshot decoding, as every reader runs it (agents on download, the
/// publisher on its own data directory at start): `data` is
///
/// 1. parsed with [`parse_header_unverified`] and decoded with [`decode`]
///    against the fixed trusted key; a decoded snapshot must have the header
///    the unverified parse saw and answer probes;
/// 2. if its header parses, re-signed as it stands (header fields from the
///    input, body = the input's bytes after the header) with that key and
///    decoded again, so that the fuzzer reaches the body checks — zstd frame,
///    lengths, filter layout — that a forged signature would otherwise hide.
///
/// # Panics
///
/// When a decoded snapshot contradicts its header or a probe panics.
pub fn check_snapshot(data: &[u8]) {
    let key = fuzz_signing_key();
    let trusted = [key.public_key().clone()];
    let header = parse_header_unverified(data);
    if let Ok(snapshot) = decode(data, &trusted, &FUZZ_LIMITS, FUZZ_NOW) {
        match &header {
            Ok(h) => assert_eq!(
                h,
                snapshot.header(),
                "decode and parse_header_unverified disagree"
            ),
            Err(e) => panic!("decoded, but the header does not parse: {e}"),
        }
        probe(&snapshot, data);
    }
    let Ok(header) = header else { return };
    // FORMAT.md "Header": header_len = 193 + n; the parse checked it.
    let body = data.get(193 + header.list_name.len()..).unwrap_or_default();
    let resigned = resign(&header, body, &key);
    if let Ok(snapshot) = decode(&resigned, &trusted, &FUZZ_LIMITS, FUZZ_NOW) {
        let h = snapshot.header();
        assert!(
            h.list_name == header.list_name
                && h.filter_kind == header.filter_kind
                && h.entry_count == header.entry_count
                && h.body_compressed_bytes == body.len() as u64,
            "re-signed snapshot decoded to another header: {h:?} from {header:?}"
        );
        assert_eq!(
            snapshot.filter().len() as u64,
            h.entry_count,
            "filter holds another number of keys than the header declares"
        );
        probe(&snapshot, data);
    }
}

/// Reads `data` as every delta reader does: one delta and a chain against
/// the fixed trusted key, a freshness record from bytes and as a header
/// value; then re-signs the delta header as it stands around the input's
/// body, so that the Rice decoder is reached (a forged signature would
/// otherwise stop every input at step 2). A decoded delta must hold
/// exactly `addition_count` strictly ascending additions starting at
/// `first_addition`, and re-encode to a delta that decodes to the same
/// additions.
///
/// # Panics
///
/// When a decoded delta breaks one of these rules.
pub fn check_delta(data: &[u8]) {
    let key = fuzz_signing_key();
    let trusted = [key.public_key().clone()];
    let _ = FreshnessRecord::verify(data, &trusted);
    let _ = FreshnessRecord::from_header_value(&String::from_utf8_lossy(data), &trusted);
    let Ok((header, len)) = parse_delta_header(data) else {
        let _ = decode_chain(data, "fuzz", &trusted);
        return;
    };
    let _ = decode_chain(data, &header.list_name, &trusted);
    if let Ok(delta) = decode_delta(data, &trusted) {
        check_decoded_delta(&delta, &key);
    }
    // Re-sign: the header up to the key id, this key's id, its signature.
    let header_len = len - header.body_len as usize;
    let mut resigned = data[..header_len - 72].to_vec();
    resigned.extend_from_slice(&key.public_key().id());
    let signature = key.sign_in_context(DELTA_CONTEXT, &resigned);
    resigned.extend_from_slice(&signature);
    let body = data.get(header_len..).unwrap_or_default();
    resigned.extend_from_slice(body);
    // The body hash is signed: put the body's own there too, so that a
    // body that is not a valid coding reaches the decoder.
    let hash_at = header_len - 72 - 32;
    let digest = <sha2::Sha256 as sha2::Digest>::digest(body);
    resigned[hash_at..hash_at + 32].copy_from_slice(&digest);
    let signature = key.sign_in_context(DELTA_CONTEXT, &resigned[..header_len - 64]);
    resigned[header_len - 64..header_len].copy_from_slice(&signature);
    if let Ok(delta) = decode_delta(&resigned, &trusted) {
        check_decoded_delta(&delta, &key);
    }
}

fn check_decoded_delta(delta: &crate::VerifiedDelta, key: &SigningKey) {
    let h = delta.header();
    let additions = delta.additions();
    assert_eq!(
        additions.len() as u64,
        u64::from(h.addition_count),
        "addition count"
    );
    assert!(
        additions.windows(2).all(|w| w[0] < w[1]),
        "additions not strictly ascending"
    );
    assert_eq!(
        additions.first().copied().unwrap_or(0),
        h.first_addition,
        "first addition"
    );
    let params = crate::DeltaParams {
        list_name: h.list_name.clone(),
        from: h.from,
        to: h.to,
        created_at: h.created_at,
        expires_at: h.expires_at,
    };
    let again = encode_delta(&params, additions, key).expect("a decoded delta re-encodes");
    let back = decode_delta(&again, &[key.public_key().clone()]).expect("a re-encoded delta decodes");
    assert_eq!(
        back.additions(),
        additions,
        "re-encoded delta decodes to other additions"
    );
}

/// Decodes `data` as a binary full-hash answer (what an agent reads from
/// an untrusted publisher). An error is fine; a decoded answer must hold
/// only full hashes under their prefix, and encode to bytes that decode to
/// the same answer.
///
/// # Panics
///
/// When a decoded answer breaks one of these rules.
pub fn check_full_hash_answer(data: &[u8]) {
    let Ok(answer) = FullHashAnswer::decode(data) else {
        return;
    };
    for result in &answer.results {
        for m in &result.matches {
            assert!(
                result.prefix.matches(&m.full_hash),
                "{} is not under {}",
                m.full_hash,
                result.prefix
            );
        }
    }
    let again = answer
        .encode()
        .unwrap_or_else(|e| panic!("a decoded answer does not encode: {e}"));
    assert_eq!(
        FullHashAnswer::decode(&again).as_ref(),
        Ok(&answer),
        "encode then decode changed the answer"
    );
    assert!(again.len() <= data.len(), "the encoding grew");
}

/// Signs `header`'s fields around `body` as it is.
fn resign(header: &SnapshotHeader, body: &[u8], key: &SigningKey) -> Vec<u8> {
    let params = SnapshotParams {
        list_name: header.list_name.clone(),
        version: header.version,
        created_at: header.created_at,
        expires_at: header.expires_at,
        key_bits: header.key_bits,
        request_prefix_bits: header.request_prefix_bits,
        full_hash_count: header.full_hash_count,
        measured_fpr: header.measured_fpr,
        zstd_level: 1,
    };
    let raw = RawBody {
        filter_kind: header.filter_kind,
        filter_param: header.filter_param,
        entry_count: header.entry_count,
        decompressed_bytes: header.body_decompressed_bytes,
        theoretical_fpr: header.theoretical_fpr,
        compressed: body,
    };
    dangerous_encode_raw(&params, &raw, key)
}

/// Probes `snapshot` with keys taken from `data` and a few fixed ones: a
/// layout that passed the checks must never index out of bounds.
fn probe(snapshot: &VerifiedSnapshot, data: &[u8]) {
    let filter = snapshot.filter();
    for chunk in data.chunks(8).take(64) {
        let mut key = [0u8; 8];
        key[..chunk.len()].copy_from_slice(chunk);
        let _ = filter.contains(u64::from_le_bytes(key));
    }
    for k in [0, 1, u64::from(u32::MAX), u64::MAX] {
        let _ = filter.contains(k);
    }
    let _ = snapshot.probably_contains(&FullHash::of(data));
}

/// Both zstd decoders' answers for a snapshot body declaring `expected`
/// content bytes: the C library's, then ruzstd's (the decoder of builds
/// without the `zstd` feature, such as wasm32).
#[cfg(feature = "zstd")]
pub fn decompress_both(body: &[u8], expected: u64) -> [Result<Vec<u8>, crate::DecodeError>; 2] {
    crate::zstd_frame::decompress_both(body, expected)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// The fuzz target's body on the conformance-style inputs it is seeded
    /// with, so a change that breaks an invariant fails `cargo test` too.
    #[test]
    fn fuzz_target_body_holds_on_seed_like_inputs() {
        for input in [
            &b"http://a.b.c/1/2.html?param=1"[..],
            b"HTTP://www.GOOgle.com:80/a/./b/../c?x#frag",
            b"http://\x01\x80.com/",
            b"http://host/%25%32%35",
            b"http://[::ffff:1.2.3.4]:80/",
            b"http://0x12.0x43.0x44.0x01",
            b"http://www.\xC3\xBCmlat.com/",
            b"mailto:someone@example.com",
            b"",
        ] {
            check_canonicalize(input);
        }
    }

    fn golden() -> Vec<Vec<u8>> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden");
        ["binary_fuse8", "binary_fuse16", "binary_fuse32", "bloom"]
            .iter()
            .map(|k| std::fs::read(dir.join(format!("{k}.snapshot"))).unwrap_or_default())
            .collect()
    }

    #[test]
    fn golden_snapshots_decode_under_the_fuzz_key_and_limits() {
        for bytes in golden() {
            assert!(decode(&bytes, &[fuzz_trusted_key()], &FUZZ_LIMITS, FUZZ_NOW).is_ok());
            check_snapshot(&bytes);
            // Re-signing a genuine snapshot gives a decodable one, so the
            // fuzzer's mutations of the body do reach the body checks.
            let header = parse_header_unverified(&bytes).ok();
            let resigned = header.map(|h| resign(&h, &bytes[193 + h.list_name.len()..], &fuzz_signing_key()));
            let decoded = resigned.map(|r| decode(&r, &[fuzz_trusted_key()], &FUZZ_LIMITS, FUZZ_NOW).is_ok());
            assert_eq!(decoded, Some(true));
        }
    }

    /// The committed seed corpus of fuzz target `target`.
    fn corpus(target: &str) -> Vec<Vec<u8>> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/corpus")
            .join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .map(|f| std::fs::read(f).unwrap_or_default())
            .collect()
    }

    #[test]
    fn snapshot_seed_corpus_passes_the_checks() {
        let snapshots = corpus("snapshot_decode");
        assert!(snapshots.len() >= 4, "snapshot seeds missing");
        for bytes in &snapshots {
            // Every seed is a genuine snapshot under the fuzz key and time.
            assert!(decode(bytes, &[fuzz_trusted_key()], &FUZZ_LIMITS, FUZZ_NOW).is_ok());
            check_snapshot(bytes);
        }
    }

    #[test]
    fn snapshots_cut_or_flipped_anywhere_pass_the_checks() {
        let bytes = golden().swap_remove(0);
        for len in 0..bytes.len() {
            check_snapshot(&bytes[..len]);
        }
        for i in (0..bytes.len()).step_by(7) {
            let mut flipped = bytes.clone();
            flipped[i] ^= 0x5a;
            check_snapshot(&flipped);
        }
    }

    #[test]
    fn delta_seed_corpus_passes_the_checks() {
        let seeds = corpus("delta_decode");
        assert!(seeds.len() >= 7, "delta seeds missing");
        let trusted = [fuzz_trusted_key()];
        let mut deltas = 0;
        for bytes in &seeds {
            // Every seed is a genuine delta, chain or freshness record.
            let genuine = decode_delta(bytes, &trusted).is_ok()
                || decode_chain(bytes, "phishing", &trusted).is_ok_and(|c| c.len() > 1)
                || FreshnessRecord::verify(bytes, &trusted).is_ok();
            assert!(genuine, "a seed is not genuine");
            deltas += usize::from(decode_delta(bytes, &trusted).is_ok());
            check_delta(bytes);
        }
        assert!(deltas >= 4);
    }

    #[test]
    fn deltas_and_records_cut_or_flipped_anywhere_pass_the_checks() {
        for bytes in corpus("delta_decode") {
            for len in 0..bytes.len() {
                check_delta(&bytes[..len]);
            }
            for i in 0..bytes.len() {
                let mut flipped = bytes.clone();
                flipped[i] ^= 0x5a;
                check_delta(&flipped);
            }
        }
    }

    #[test]
    fn full_hash_answer_seed_corpus_passes_the_checks() {
        let answers = corpus("full_hash_answer");
        assert!(answers.len() >= 3, "full-hash answer seeds missing");
        for bytes in &answers {
            // Every seed is a real answer.
            assert!(FullHashAnswer::decode(bytes).is_ok());
            check_full_hash_answer(bytes);
        }
    }

    #[test]
    fn full_hash_answers_cut_or_flipped_anywhere_pass_the_checks() {
        for bytes in corpus("full_hash_answer") {
            for len in 0..bytes.len() {
                check_full_hash_answer(&bytes[..len]);
            }
            for i in 0..bytes.len() {
                let mut flipped = bytes.clone();
                flipped[i] ^= 0x5a;
                check_full_hash_answer(&flipped);
            }
        }
    }
}
