//! What the fuzz target `c_entry_points` runs: the entry points that parse
//! caller input, a publisher's responses or a host's stored bytes, called
//! as a C host would call them, with arbitrary bytes.
//! Not part of the ABI. It plays the caller, so it holds unsafe calls.

#![allow(unsafe_code)]

use std::ffi::{CString, c_char};

use crate::types::{
    BLOCKSIEVE_FAIL_OPEN, BLOCKSIEVE_LIST_NAME_CAPACITY, BLOCKSIEVE_SEED_BYTES, blocksieve_config,
    blocksieve_header, blocksieve_request, blocksieve_session, blocksieve_session_config,
    blocksieve_snapshot_info, blocksieve_status, blocksieve_update_kind, blocksieve_update_result,
    blocksieve_verdict, blocksieve_verdict_kind,
};
use crate::{
    BLOCKSIEVE_FULL_HASH_BYTES, blocksieve_agent_free, blocksieve_agent_new, blocksieve_canonicalize,
    blocksieve_expressions, blocksieve_full_hashes, blocksieve_query_free, blocksieve_request_free,
    blocksieve_saved_free, blocksieve_saved_snapshot, blocksieve_session_check,
    blocksieve_session_complete_check, blocksieve_session_free, blocksieve_session_handle_update_response,
    blocksieve_session_list_version, blocksieve_session_new, blocksieve_session_restore,
    blocksieve_session_save, blocksieve_session_update_requests, blocksieve_snapshot_verify,
};

use blocksieve_status::{
    BLOCKSIEVE_BAD_DATA, BLOCKSIEVE_BUFFER_TOO_SMALL, BLOCKSIEVE_INVALID_ARGUMENT, BLOCKSIEVE_NOT_READY,
    BLOCKSIEVE_OK, BLOCKSIEVE_PANIC, BLOCKSIEVE_TRANSPORT,
};

/// Runs every input-parsing entry point on `data` and panics when one
/// panicked (`BLOCKSIEVE_PANIC`) or broke its buffer contract:
///
/// * `data` as the URL of `blocksieve_canonicalize`,
///   `blocksieve_expressions` and `blocksieve_full_hashes`, with an output
///   buffer of `data[0]` bytes;
/// * `data` as the snapshot of `blocksieve_snapshot_verify`;
/// * `data` split at NUL bytes as the strings of a `blocksieve_config`
///   (base URL, list, trusted key, a second list), with a failure policy of
///   `data.len() % 3` (2 is invalid), for `blocksieve_agent_new`; an agent
///   that builds is freed. The cache directory stays NULL: a fuzzed path
///   would create directories anywhere;
/// * `data` as an HTTP response to each request of a session
///   ([`session_responses`]);
/// * `data` as the stored bytes of a saved list ([`restore_saved`]).
pub fn entry_points(data: &[u8]) {
    let capacity = data.first().map_or(0, |&b| usize::from(b));
    let url = data.as_ptr().cast::<c_char>();
    for f in [blocksieve_canonicalize, blocksieve_expressions] {
        let mut buf = vec![0 as c_char; capacity];
        let mut len = usize::MAX;
        // SAFETY: `data` and `buf` are valid for the lengths passed.
        let status = unsafe { f(url, data.len(), buf.as_mut_ptr(), capacity, &mut len) };
        assert_ne!(status, BLOCKSIEVE_PANIC);
        if status == BLOCKSIEVE_OK {
            assert!(
                len < capacity && buf[len] == 0,
                "text of {len} bytes in a buffer of {capacity}"
            );
        } else if status == BLOCKSIEVE_BUFFER_TOO_SMALL {
            assert!(len >= capacity, "{len} bytes reported too long for {capacity}");
        }
    }
    let mut hashes = vec![0u8; capacity];
    let mut len = usize::MAX;
    // SAFETY: `data` and `hashes` are valid for the lengths passed.
    let status = unsafe { blocksieve_full_hashes(url, data.len(), hashes.as_mut_ptr(), capacity, &mut len) };
    assert_ne!(status, BLOCKSIEVE_PANIC);
    if status == BLOCKSIEVE_OK || status == BLOCKSIEVE_BUFFER_TOO_SMALL {
        assert!(len % BLOCKSIEVE_FULL_HASH_BYTES == 0 && len <= 30 * BLOCKSIEVE_FULL_HASH_BYTES);
        assert_eq!(status == BLOCKSIEVE_OK, len <= capacity);
    }

    let key = golden_key();
    let keys = [key.as_ptr()];
    let mut info = std::mem::MaybeUninit::<blocksieve_snapshot_info>::uninit();
    // SAFETY: `data`, `keys` (NUL-terminated) and `info` are valid.
    let status = unsafe {
        blocksieve_snapshot_verify(data.as_ptr(), data.len(), keys.as_ptr(), 1, 0, info.as_mut_ptr())
    };
    assert_ne!(status, BLOCKSIEVE_PANIC);

    let fields: Vec<CString> = data
        .split(|&b| b == 0)
        .take(4)
        .map(|f| CString::new(f).unwrap_or_default())
        .collect();
    let field = |i: usize| fields.get(i).map_or(std::ptr::null(), |f| f.as_ptr());
    let lists = [field(1), field(3)];
    let trusted_keys = [field(2)];
    let config = blocksieve_config {
        base_url: field(0),
        lists: lists.as_ptr(),
        lists_len: if fields.len() > 3 { 2 } else { 1 },
        trusted_keys: trusted_keys.as_ptr(),
        trusted_keys_len: 1,
        cache_dir: std::ptr::null(),
        failure_policy: (data.len() % 3) as u32,
        update_interval_seconds: 0,
        // 0 (the defaults), or past the one-day limit.
        request_timeout_ms: if data.len().is_multiple_of(5) { u64::MAX } else { 0 },
        snapshot_timeout_ms: 0,
    };
    let mut agent = std::ptr::null_mut();
    // SAFETY: `config` points to valid (possibly NULL) strings; `agent` is
    // writable.
    let status = unsafe { blocksieve_agent_new(&config, &mut agent) };
    assert_ne!(status, BLOCKSIEVE_PANIC);
    assert_eq!(status == BLOCKSIEVE_OK, !agent.is_null());
    // SAFETY: NULL or the handle just created, freed once.
    let status = unsafe { blocksieve_agent_free(agent) };
    assert_eq!(status, BLOCKSIEVE_OK);
    session_responses(data);
    restore_saved(data);
}

/// The golden snapshot (`format/tests/data/golden`): list `golden`,
/// version 7, signed by the key of [`golden_key`], built at Unix time
/// 1,800,000,000.
const GOLDEN_SNAPSHOT: &[u8] = include_bytes!("../../../format/tests/data/golden/binary_fuse8.snapshot");

/// A URL on the golden list (`format/tests/data/golden/list.txt`).
const GOLDEN_LISTED: &str = "http://allegrolokalnie.oferta-lokalana989714.lol";

/// The time the session calls run at: when the golden snapshot was built.
const NOW_MS: i64 = 1_800_000_000_000;

fn golden_key() -> CString {
    CString::new(
        blocksieve_format::SigningKey::from_secret_bytes([0x42; 32])
            .public_key()
            .to_base64(),
    )
    .unwrap_or_default()
}

/// `data` as an HTTP response: the status from its first two bytes (big
/// endian), then header lines `name:value` up to an empty line, then the
/// body. Without an empty line, all after the status is the body.
fn response_of(data: &[u8]) -> (u16, Vec<(CString, CString)>, &[u8]) {
    let (status, rest) = match data {
        [hi, lo, rest @ ..] => (u16::from_be_bytes([*hi, *lo]), rest),
        _ => (200, data),
    };
    let split = rest.windows(2).position(|w| w == b"\n\n");
    let Some(at) = split else {
        return (status, Vec::new(), rest);
    };
    let headers = rest[..at]
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let colon = line.iter().position(|&b| b == b':')?;
            let name = CString::new(&line[..colon]).ok()?;
            let value = CString::new(&line[colon + 1..]).ok()?;
            Some((name, value))
        })
        .collect();
    (status, headers, &rest[at + 2..])
}

/// A session subscribed to `golden` at `https://publisher.example`.
fn golden_session(key: &CString) -> *mut blocksieve_session {
    let list = c"golden";
    let lists = [list.as_ptr()];
    let keys = [key.as_ptr()];
    let config = blocksieve_session_config {
        base_url: c"https://publisher.example".as_ptr(),
        lists: lists.as_ptr(),
        lists_len: 1,
        trusted_keys: keys.as_ptr(),
        trusted_keys_len: 1,
        failure_policy: BLOCKSIEVE_FAIL_OPEN,
        noise_prefixes: 0,
        full_hash_cache_bytes: 0,
        max_snapshot_bytes: 0,
        dangerous_allow_plain_http: false,
    };
    let mut session = std::ptr::null_mut();
    // SAFETY: `config` points to valid strings; `session` is writable.
    let status = unsafe { blocksieve_session_new(&config, &mut session) };
    assert_eq!(status, BLOCKSIEVE_OK);
    session
}

/// The first request of an update round of `session`.
fn first_request(session: *mut blocksieve_session) -> *mut blocksieve_request {
    let mut request = std::ptr::null_mut();
    let mut count = 0;
    // SAFETY: a live session, room for one request, a writable count.
    let status = unsafe { blocksieve_session_update_requests(session, &mut request, 1, &mut count) };
    assert_eq!((status, count), (BLOCKSIEVE_OK, 1));
    request
}

/// Hands the response to `request` to `session` and checks the result's
/// contract; returns the status and the snapshot request of a
/// `NEED_SNAPSHOT` (NULL otherwise).
fn respond(
    session: *mut blocksieve_session,
    request: *const blocksieve_request,
    status: u16,
    headers: &[blocksieve_header],
    body: &[u8],
) -> (blocksieve_status, *mut blocksieve_request) {
    let mut result = std::mem::MaybeUninit::<blocksieve_update_result>::uninit();
    let mut next = std::ptr::null_mut();
    // SAFETY: live handles; `headers` and `body` valid for their lengths;
    // the outputs writable.
    let outcome = unsafe {
        blocksieve_session_handle_update_response(
            session,
            request,
            status,
            headers.as_ptr(),
            headers.len(),
            body.as_ptr(),
            body.len(),
            NOW_MS,
            result.as_mut_ptr(),
            &mut next,
        )
    };
    assert_ne!(outcome, BLOCKSIEVE_PANIC);
    assert!(
        matches!(
            outcome,
            BLOCKSIEVE_OK | BLOCKSIEVE_TRANSPORT | BLOCKSIEVE_BAD_DATA
        ),
        "update response: {outcome:?}"
    );
    // SAFETY: written whenever the status is one of those three.
    let result = unsafe { result.assume_init() };
    assert_eq!(
        outcome == BLOCKSIEVE_OK,
        result.kind != blocksieve_update_kind::BLOCKSIEVE_UPDATE_FAILED
    );
    assert_eq!(
        !next.is_null(),
        result.kind == blocksieve_update_kind::BLOCKSIEVE_UPDATE_NEED_SNAPSHOT
    );
    (outcome, next)
}

fn free_request(request: *mut blocksieve_request) {
    // SAFETY: NULL or a live request, freed once.
    let status = unsafe { blocksieve_request_free(request) };
    assert_eq!(status, BLOCKSIEVE_OK);
}

/// Feeds `data`, read by [`response_of`], to a session as the response to
/// each kind of request it makes, and panics when a call panicked
/// (`BLOCKSIEVE_PANIC`) or broke its contract — above all, when a verdict
/// is `BLOCKSIEVE_UNSAFE` for a full hash that is not one of the URL's:
///
/// * to the first round's snapshot request of a new session;
/// * to the deltas request of a session holding the golden snapshot, and
///   to the snapshot request of a `NEED_SNAPSHOT`;
/// * to the full-hash search of a check of a URL on the golden list.
pub fn session_responses(data: &[u8]) {
    let (status, owned, body) = response_of(data);
    let headers: Vec<blocksieve_header> = owned
        .iter()
        .map(|(n, v)| blocksieve_header {
            name: n.as_ptr(),
            value: v.as_ptr(),
        })
        .collect();
    let key = golden_key();

    let fresh = golden_session(&key);
    let request = first_request(fresh);
    let (_, next) = respond(fresh, request, status, &headers, body);
    free_request(next);
    free_request(request);
    // SAFETY: the live session, freed once.
    assert_eq!(unsafe { blocksieve_session_free(fresh) }, BLOCKSIEVE_OK);

    let session = golden_session(&key);
    let request = first_request(session);
    let etag = [blocksieve_header {
        name: c"etag".as_ptr(),
        value: c"\"golden-7\"".as_ptr(),
    }];
    let (outcome, next) = respond(session, request, 200, &etag, GOLDEN_SNAPSHOT);
    assert_eq!(outcome, BLOCKSIEVE_OK, "the golden snapshot is refused");
    free_request(next);
    free_request(request);
    let request = first_request(session);
    let (_, next) = respond(session, request, status, &headers, body);
    if !next.is_null() {
        let (_, after) = respond(session, next, status, &headers, body);
        free_request(after);
    }
    free_request(next);
    free_request(request);

    let seed = [7u8; BLOCKSIEVE_SEED_BYTES];
    let mut verdict = std::mem::MaybeUninit::<blocksieve_verdict>::uninit();
    let mut query = std::ptr::null_mut();
    // SAFETY: a live session, the URL's bytes, a 32-byte seed, writable
    // outputs, no text buffers.
    let checked = unsafe {
        blocksieve_session_check(
            session,
            GOLDEN_LISTED.as_ptr().cast(),
            GOLDEN_LISTED.len(),
            NOW_MS,
            seed.as_ptr(),
            verdict.as_mut_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            0,
            &mut query,
        )
    };
    assert_ne!(checked, BLOCKSIEVE_PANIC);
    if checked == BLOCKSIEVE_OK && !query.is_null() {
        let mut list = [0 as c_char; 64 * BLOCKSIEVE_LIST_NAME_CAPACITY];
        let mut expression = [0 as c_char; 1024];
        // SAFETY: live handles; `headers` and `body` valid for their
        // lengths; a 32-byte seed; the outputs writable for their
        // capacities. Consumes the query.
        let completed = unsafe {
            blocksieve_session_complete_check(
                session,
                query,
                status,
                headers.as_ptr(),
                headers.len(),
                body.as_ptr(),
                body.len(),
                NOW_MS,
                seed.as_ptr(),
                verdict.as_mut_ptr(),
                list.as_mut_ptr(),
                list.len(),
                expression.as_mut_ptr(),
                expression.len(),
            )
        };
        assert_eq!(completed, BLOCKSIEVE_OK, "complete check");
        // SAFETY: written whenever the status is `BLOCKSIEVE_OK`.
        let verdict = unsafe { verdict.assume_init() };
        for (text, len) in [
            (&list[..], verdict.list_len),
            (&expression[..], verdict.expression_len),
        ] {
            let nul = text
                .iter()
                .position(|&c| c == 0)
                .expect("a text is NUL-terminated");
            assert_eq!(
                nul,
                len.min(text.len() - 1),
                "a text of {len} bytes in {}",
                text.len()
            );
        }
        if verdict.kind == blocksieve_verdict_kind::BLOCKSIEVE_UNSAFE {
            let mut hashes = Vec::new();
            let _ = blocksieve_format::full_hashes(GOLDEN_LISTED, &mut hashes);
            assert!(
                hashes.iter().any(|h| h.0 == verdict.full_hash),
                "unsafe for a full hash that is not the URL's"
            );
        }
        // The query is consumed: a second use is refused.
        // SAFETY: the pointer is not dereferenced once consumed.
        let status = unsafe { blocksieve_query_free(query) };
        assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    }
    // SAFETY: the live session, freed once.
    assert_eq!(unsafe { blocksieve_session_free(session) }, BLOCKSIEVE_OK);
}

/// Restores `list` of `session` from the three byte strings and checks the
/// contract: `BLOCKSIEVE_OK` with a version, or `BLOCKSIEVE_BAD_DATA` and
/// the list left without a snapshot. Returns the status.
fn restore(
    session: *mut blocksieve_session,
    snapshot: &[u8],
    chain: &[u8],
    record: &[u8],
) -> blocksieve_status {
    let mut version = u64::MAX;
    let mut dropped = false;
    // SAFETY: a live session, a NUL-terminated name, the bytes valid for
    // their lengths, a writable version and flag.
    let status = unsafe {
        blocksieve_session_restore(
            session,
            c"golden".as_ptr(),
            snapshot.as_ptr(),
            snapshot.len(),
            chain.as_ptr(),
            chain.len(),
            record.as_ptr(),
            record.len(),
            NOW_MS,
            &mut version,
            &mut dropped,
        )
    };
    assert!(
        matches!(status, BLOCKSIEVE_OK | BLOCKSIEVE_BAD_DATA),
        "restore: {status:?}"
    );
    assert!(!(dropped && chain.is_empty()), "an empty chain was dropped");
    let mut held = u64::MAX;
    // SAFETY: a live session, a NUL-terminated name, a writable version.
    let listed = unsafe { blocksieve_session_list_version(session, c"golden".as_ptr(), &mut held) };
    if status == BLOCKSIEVE_OK {
        assert_eq!((listed, held), (BLOCKSIEVE_OK, version));
    } else {
        assert_eq!(listed, BLOCKSIEVE_NOT_READY, "a refused restore left a state");
    }
    status
}

/// Feeds `data`, as a host's stored bytes (a file it wrote, then found
/// changed), to `blocksieve_session_restore`, and panics when a call
/// panicked or broke its contract:
///
/// * `data` as the snapshot, with no chain and no record;
/// * the golden snapshot with `data` split at its first NUL byte into the
///   chain and the record: a chain that does not verify is dropped and a
///   record that cannot be read ignored, so only a record holding a floor
///   above version 7 may refuse it; what is restored saves back the
///   golden snapshot unchanged.
pub fn restore_saved(data: &[u8]) {
    let key = golden_key();

    let session = golden_session(&key);
    restore(session, data, &[], &[]);
    // SAFETY: the live session, freed once.
    assert_eq!(unsafe { blocksieve_session_free(session) }, BLOCKSIEVE_OK);

    let (chain, record) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let session = golden_session(&key);
    if restore(session, GOLDEN_SNAPSHOT, chain, record) == BLOCKSIEVE_OK {
        let mut saved = std::ptr::null_mut();
        // SAFETY: a live session, a NUL-terminated name, a writable output.
        let status = unsafe { blocksieve_session_save(session, c"golden".as_ptr(), &mut saved) };
        assert_eq!(status, BLOCKSIEVE_OK);
        let (mut ptr, mut len) = (std::ptr::null(), 0);
        // SAFETY: the live saved list, writable outputs.
        let status = unsafe { blocksieve_saved_snapshot(saved, &mut ptr, &mut len) };
        assert_eq!(status, BLOCKSIEVE_OK);
        // SAFETY: `len` bytes at `ptr`, lent until the saved list is freed.
        let snapshot = unsafe { std::slice::from_raw_parts(ptr, len) };
        assert_eq!(snapshot, GOLDEN_SNAPSHOT, "the base changed on its way back");
        // SAFETY: the live saved list, freed once.
        assert_eq!(unsafe { blocksieve_saved_free(saved) }, BLOCKSIEVE_OK);
    }
    // SAFETY: the live session, freed once.
    assert_eq!(unsafe { blocksieve_session_free(session) }, BLOCKSIEVE_OK);
}
