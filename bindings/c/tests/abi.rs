//! The ABI called from Rust as a C host calls it: the sans-I/O functions on
//! the repository's vectors and golden snapshot, every pointer and buffer
//! rule, the sans-I/O session on the golden snapshot (answers, mangled
//! responses, a list saved and restored, misuse of its handles), and the
//! fuzz target's body on its seeds. The agent and the session against a real publisher are tested
//! from C (`tests/agent_test.c`, `tests/session_test.c`, run by
//! `.ci/bindings-c.sh`).

#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char};
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

use blocksieve::*;
use blocksieve_status::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_key() -> CString {
    let key = blocksieve_format::SigningKey::from_secret_bytes([0x42; 32]);
    CString::new(key.public_key().to_base64()).expect("base64 has no NUL")
}

fn last_error() -> String {
    let mut buf = [0 as c_char; 512];
    let mut len = 0;
    // SAFETY: a 512-byte buffer and a writable length.
    let status = unsafe { blocksieve_last_error(buf.as_mut_ptr(), buf.len(), &mut len) };
    assert_eq!(status, BLOCKSIEVE_OK);
    // SAFETY: NUL-terminated by the call.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn canonical(url: &[u8], capacity: usize) -> (blocksieve_status, usize, String) {
    let mut buf = vec![0x7f as c_char; capacity];
    let mut len = usize::MAX;
    let ptr = if capacity == 0 {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr()
    };
    // SAFETY: `url` and `buf` valid for the lengths passed.
    let status = unsafe { blocksieve_canonicalize(url.as_ptr().cast(), url.len(), ptr, capacity, &mut len) };
    let text = if status == BLOCKSIEVE_OK {
        // SAFETY: NUL-terminated by the call.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        String::new()
    };
    (status, len, text)
}

#[test]
fn canonicalize_matches_the_conformance_vectors() {
    let vectors = std::fs::read_to_string(repo().join("format/tests/data/canonicalization.tsv")).unwrap();
    let mut checked = 0;
    for line in vectors.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let mut fields = line.split('\t');
        let (Some(input), Some(expected)) = (fields.next(), fields.next()) else {
            continue;
        };
        // Vectors with escapes are covered by the format crate's tests.
        if input.contains('\\') || expected.contains('\\') {
            continue;
        }
        let (status, _, text) = canonical(input.as_bytes(), 4096);
        if expected == "<INVALID>" {
            assert_eq!(status, BLOCKSIEVE_INVALID_URL, "{input}");
            assert!(last_error().starts_with("invalid url: "), "{}", last_error());
        } else {
            assert_eq!((status, text.as_str()), (BLOCKSIEVE_OK, expected), "{input}");
            assert_eq!(last_error(), "");
        }
        checked += 1;
    }
    assert!(checked > 50, "only {checked} vectors");
}

#[test]
fn buffer_too_small_reports_the_length_and_writes_an_empty_string() {
    let url = b"http://evil.example/login";
    let (status, len, _) = canonical(url, 0);
    assert_eq!((status, len), (BLOCKSIEVE_BUFFER_TOO_SMALL, url.len()));
    let mut buf = [0x7f as c_char; 25];
    let mut len = 0;
    // SAFETY: a 25-byte buffer, one byte short.
    let status =
        unsafe { blocksieve_canonicalize(url.as_ptr().cast(), url.len(), buf.as_mut_ptr(), 25, &mut len) };
    assert_eq!((status, len, buf[0]), (BLOCKSIEVE_BUFFER_TOO_SMALL, 25, 0));
    assert_eq!(last_error(), "canonical url buffer holds 25 bytes, 26 needed");
    let (status, len, text) = canonical(url, 26);
    assert_eq!(
        (status, len, text.as_str()),
        (BLOCKSIEVE_OK, 25, "http://evil.example/login")
    );
}

#[test]
fn null_inputs_are_invalid_arguments() {
    let mut buf = [0 as c_char; 64];
    let mut len = 0;
    // SAFETY: NULL is what is tested; the rest is valid.
    let status = unsafe { blocksieve_canonicalize(std::ptr::null(), 3, buf.as_mut_ptr(), 64, &mut len) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert_eq!(last_error(), "url is NULL");
    let url = b"http://a.example/x";
    // SAFETY: a NULL length out-parameter is what is tested.
    let status = unsafe {
        blocksieve_full_hashes(
            url.as_ptr().cast(),
            5,
            buf.as_mut_ptr().cast(),
            64,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: a NULL buffer with a capacity is what is tested.
    let status =
        unsafe { blocksieve_canonicalize(url.as_ptr().cast(), 5, std::ptr::null_mut(), 8, &mut len) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: NULL handles are what is tested.
    unsafe {
        assert_eq!(
            blocksieve_agent_update(std::ptr::null()),
            BLOCKSIEVE_INVALID_ARGUMENT
        );
    }
    // SAFETY: freeing NULL does nothing.
    let status = unsafe { blocksieve_agent_free(std::ptr::null_mut()) };
    assert_eq!(status, BLOCKSIEVE_OK);
}

/// A URL that is not UTF-8 (Latin-1 bytes, as a proxy may see a request
/// line) is read with each such byte percent-escaped, as the
/// canonicalizer reads a raw byte: it was refused (`INVALID_ARGUMENT`),
/// and a host that lets an error through let a listed URL through.
#[test]
fn a_url_that_is_not_utf8_is_read_with_its_bytes_escaped() {
    let canonical = |url: &[u8]| {
        let mut buf = [0 as c_char; 64];
        let mut len = 0;
        // SAFETY: valid pointers and lengths.
        let status = unsafe {
            blocksieve_canonicalize(url.as_ptr().cast(), url.len(), buf.as_mut_ptr(), 64, &mut len)
        };
        assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
        // SAFETY: NUL-terminated by the call.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        canonical(b"http://a.example/caf\xe9?\xff"),
        "http://a.example/caf%E9?%FF"
    );
    assert_eq!(
        canonical(b"http://a.example/caf\xe9"),
        canonical(b"http://a.example/caf%E9")
    );
    let hashes = |url: &[u8]| {
        let mut out = [0u8; 960];
        let mut len = 0;
        // SAFETY: valid pointers and lengths.
        let status = unsafe {
            blocksieve_full_hashes(url.as_ptr().cast(), url.len(), out.as_mut_ptr(), 960, &mut len)
        };
        assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
        out[..len].to_vec()
    };
    assert_eq!(
        hashes(b"http://a.example/caf\xe9"),
        hashes(b"http://a.example/caf%E9")
    );
    // Bytes over the 2 MiB limit are refused at their own length, before
    // any is escaped (each escape is three bytes: 256 MiB took 1 GiB).
    let mut long = b"http://a.example/".to_vec();
    long.resize(64 << 20, 0xff);
    let (status, _, _) = crate::canonical(&long, 64);
    assert_eq!(status, BLOCKSIEVE_INVALID_URL);
    assert_eq!(
        last_error(),
        "invalid url: URL is 67108864 bytes long, the maximum is 2097152"
    );
}

#[test]
fn full_hashes_follow_the_expressions() {
    let url = b"http://a.b.c/1/2.html?param=1";
    let mut text = [0 as c_char; 1024];
    let mut len = 0;
    // SAFETY: valid buffers.
    let status =
        unsafe { blocksieve_expressions(url.as_ptr().cast(), url.len(), text.as_mut_ptr(), 1024, &mut len) };
    assert_eq!(status, BLOCKSIEVE_OK);
    // SAFETY: NUL-terminated by the call.
    let text = unsafe { CStr::from_ptr(text.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned();
    let expressions: Vec<&str> = text.lines().collect();
    assert_eq!(expressions.len(), 8);
    assert_eq!(expressions[0], "a.b.c/1/2.html?param=1");
    let mut hashes = [0u8; 30 * 32];
    // SAFETY: valid buffers.
    let status = unsafe {
        blocksieve_full_hashes(
            url.as_ptr().cast(),
            url.len(),
            hashes.as_mut_ptr(),
            hashes.len(),
            &mut len,
        )
    };
    assert_eq!((status, len), (BLOCKSIEVE_OK, 8 * 32));
    for (e, h) in expressions.iter().zip(hashes.chunks(32)) {
        assert_eq!(blocksieve_format::FullHash::of(e.as_bytes()).0, h);
    }
}

fn verify(bytes: &[u8], key: &CStr, now: u64) -> (blocksieve_status, Option<blocksieve_snapshot_info>) {
    let keys = [key.as_ptr()];
    let mut info = MaybeUninit::uninit();
    // SAFETY: valid buffers and a NUL-terminated key.
    let status = unsafe {
        blocksieve_snapshot_verify(
            bytes.as_ptr(),
            bytes.len(),
            keys.as_ptr(),
            1,
            now,
            info.as_mut_ptr(),
        )
    };
    // SAFETY: written on success.
    (
        status,
        (status == BLOCKSIEVE_OK).then(|| unsafe { info.assume_init() }),
    )
}

#[test]
fn snapshot_verify_accepts_the_golden_snapshot_and_rejects_every_cut() {
    let bytes = std::fs::read(repo().join("format/tests/data/golden/binary_fuse8.snapshot"))
        .expect("golden snapshot");
    let (status, info) = verify(&bytes, &golden_key(), 1_800_000_000);
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    let info = info.unwrap();
    // SAFETY: NUL-terminated by the call.
    let name = unsafe { CStr::from_ptr(info.list_name.as_ptr()) };
    assert_eq!(name.to_str().unwrap(), "golden");
    assert_eq!(
        (info.version, info.entry_count, info.created_at),
        (7, 200, 1_800_000_000)
    );
    for len in 0..bytes.len() {
        assert_eq!(
            verify(&bytes[..len], &golden_key(), 1_800_000_000).0,
            BLOCKSIEVE_BAD_DATA,
            "cut at {len}"
        );
    }
    let (status, _) = verify(&bytes, &golden_key(), 4_102_444_801);
    assert_eq!(status, BLOCKSIEVE_BAD_DATA);
    assert!(last_error().contains("expired"), "{}", last_error());
    let other = blocksieve_format::SigningKey::from_secret_bytes([7; 32]);
    let other = CString::new(other.public_key().to_base64()).unwrap();
    assert_eq!(verify(&bytes, &other, 1_800_000_000).0, BLOCKSIEVE_BAD_DATA);
    let (status, _) = verify(&bytes, c"not base64", 1_800_000_000);
    assert_eq!(status, BLOCKSIEVE_MISCONFIGURED);
    assert!(
        last_error().starts_with("trusted key 0: invalid key"),
        "{}",
        last_error()
    );
}

#[test]
fn agent_new_rejects_bad_configs_with_a_status() {
    let key = golden_key();
    let keys = [key.as_ptr()];
    let lists = [c"phishing".as_ptr()];
    let good = blocksieve_config {
        base_url: c"http://127.0.0.1:9".as_ptr(),
        lists: lists.as_ptr(),
        lists_len: 1,
        trusted_keys: keys.as_ptr(),
        trusted_keys_len: 1,
        cache_dir: std::ptr::null(),
        failure_policy: BLOCKSIEVE_FAIL_OPEN,
        update_interval_seconds: 0,
        request_timeout_ms: 0,
        snapshot_timeout_ms: 0,
    };
    let new = |config: &blocksieve_config| {
        let mut agent = std::ptr::dangling_mut();
        // SAFETY: `config` holds valid (or NULL) strings.
        let status = unsafe { blocksieve_agent_new(config, &mut agent) };
        assert_eq!(status == BLOCKSIEVE_OK, !agent.is_null());
        // SAFETY: NULL or the handle just created.
        assert_eq!(unsafe { blocksieve_agent_free(agent) }, BLOCKSIEVE_OK);
        status
    };
    assert_eq!(new(&good), BLOCKSIEVE_OK);
    let bad_list = [c"Not A List".as_ptr()];
    // More lists than a verdict's list text holds (`BLOCKSIEVE_LIST_TEXT_CAPACITY`).
    assert_eq!(
        BLOCKSIEVE_LIST_TEXT_CAPACITY,
        BLOCKSIEVE_MAX_LISTS * BLOCKSIEVE_LIST_NAME_CAPACITY
    );
    let names: Vec<CString> = (0..=BLOCKSIEVE_MAX_LISTS)
        .map(|i| CString::new(format!("list-{i}")).unwrap())
        .collect();
    let too_many: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let cases = [
        (
            blocksieve_config {
                base_url: std::ptr::null(),
                ..good
            },
            BLOCKSIEVE_INVALID_ARGUMENT,
        ),
        (
            blocksieve_config {
                base_url: c"ftp://x".as_ptr(),
                ..good
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_config { lists_len: 0, ..good },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_config {
                lists: std::ptr::null(),
                ..good
            },
            BLOCKSIEVE_INVALID_ARGUMENT,
        ),
        (
            blocksieve_config {
                lists: bad_list.as_ptr(),
                ..good
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_config {
                trusted_keys_len: 0,
                ..good
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_config {
                failure_policy: 2,
                ..good
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_config {
                snapshot_timeout_ms: 86_400_001,
                ..good
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_config {
                request_timeout_ms: u64::MAX,
                ..good
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_config {
                lists: too_many.as_ptr(),
                lists_len: too_many.len(),
                ..good
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
    ];
    for (config, expected) in cases {
        assert_eq!(new(&config), expected, "{config:?}: {}", last_error());
    }
    // SAFETY: a NULL config with a valid out-pointer.
    let status = unsafe { blocksieve_agent_new(std::ptr::null(), &mut std::ptr::null_mut()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
}

#[test]
fn the_fuzz_target_body_runs_on_its_seeds() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/c_entry_points");
    let mut seeds = 0;
    for entry in std::fs::read_dir(corpus).unwrap() {
        blocksieve::fuzzing::entry_points(&std::fs::read(entry.unwrap().path()).unwrap());
        seeds += 1;
    }
    assert!(seeds > 0);
    blocksieve::fuzzing::entry_points(b"");
}

/// A host whose own thread runs a tokio runtime (a Rust program, or a
/// library's callback thread) calls the agent: the calls answer with their
/// documented statuses ("any thread"), never `BLOCKSIEVE_PANIC`, and the
/// handle is freed.
#[test]
fn the_agent_answers_and_is_freed_on_a_thread_running_a_tokio_runtime() {
    let key = golden_key();
    let keys = [key.as_ptr()];
    let lists = [c"phishing".as_ptr()];
    let config = blocksieve_config {
        base_url: c"http://127.0.0.1:9".as_ptr(),
        lists: lists.as_ptr(),
        lists_len: 1,
        trusted_keys: keys.as_ptr(),
        trusted_keys_len: 1,
        cache_dir: std::ptr::null(),
        failure_policy: BLOCKSIEVE_FAIL_OPEN,
        update_interval_seconds: 0,
        request_timeout_ms: 0,
        snapshot_timeout_ms: 0,
    };
    let host = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    host.block_on(async {
        let mut agent = std::ptr::null_mut();
        // SAFETY: `config` holds valid strings; `agent` is writable.
        let status = unsafe { blocksieve_agent_new(&config, &mut agent) };
        assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
        // Nothing listens on port 9: the update fails to connect.
        // SAFETY: the live handle just created.
        let status = unsafe { blocksieve_agent_update(agent) };
        assert_eq!(status, BLOCKSIEVE_TRANSPORT, "{}", last_error());
        // SAFETY: the live handle, freed once.
        let status = unsafe { blocksieve_agent_free(agent) };
        assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    });
}

// --- The sans-I/O session, on the golden snapshot. ---

const GOLDEN_LISTED: &str = "http://allegrolokalnie.oferta-lokalana989714.lol";
const NOW_MS: i64 = 1_800_000_000_000;
const SEED: [u8; BLOCKSIEVE_SEED_BYTES] = [9; BLOCKSIEVE_SEED_BYTES];

fn golden_snapshot() -> Vec<u8> {
    std::fs::read(repo().join("format/tests/data/golden/binary_fuse8.snapshot")).expect("golden snapshot")
}

fn session_config(lists: &[*const c_char; 1], keys: &[*const c_char; 1]) -> blocksieve_session_config {
    blocksieve_session_config {
        base_url: c"https://publisher.example".as_ptr(),
        lists: lists.as_ptr(),
        lists_len: 1,
        trusted_keys: keys.as_ptr(),
        trusted_keys_len: 1,
        failure_policy: BLOCKSIEVE_FAIL_CLOSED,
        noise_prefixes: 0,
        full_hash_cache_bytes: 0,
        max_snapshot_bytes: 0,
        dangerous_allow_plain_http: false,
    }
}

fn new_session(config: &blocksieve_session_config) -> *mut blocksieve_session {
    let mut session = std::ptr::null_mut();
    // SAFETY: `config` holds valid strings; `session` is writable.
    let status = unsafe { blocksieve_session_new(config, &mut session) };
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    session
}

fn round(session: *mut blocksieve_session) -> *mut blocksieve_request {
    let mut request = std::ptr::null_mut();
    let mut count = 0;
    // SAFETY: a live session, room for one request.
    let status = unsafe { blocksieve_session_update_requests(session, &mut request, 1, &mut count) };
    assert_eq!((status, count), (BLOCKSIEVE_OK, 1), "{}", last_error());
    request
}

fn respond(
    session: *mut blocksieve_session,
    request: *const blocksieve_request,
    status: u16,
    body: &[u8],
) -> (
    blocksieve_status,
    blocksieve_update_result,
    *mut blocksieve_request,
) {
    let mut result = MaybeUninit::<blocksieve_update_result>::zeroed();
    let mut next = std::ptr::null_mut();
    // SAFETY: live handles, `body` valid for its length, writable outputs.
    let outcome = unsafe {
        blocksieve_session_handle_update_response(
            session,
            request,
            status,
            std::ptr::null(),
            0,
            body.as_ptr(),
            body.len(),
            NOW_MS,
            result.as_mut_ptr(),
            &mut next,
        )
    };
    // SAFETY: zeroed, and written whole on the statuses of interest.
    (outcome, unsafe { result.assume_init() }, next)
}

fn text_of(ptr: *const c_char) -> String {
    // SAFETY: a NUL-terminated text lent by the library.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}

/// A session of list `golden` holding the golden snapshot (version 7).
fn golden_session() -> *mut blocksieve_session {
    let (key, list) = (golden_key(), c"golden");
    let (lists, keys) = ([list.as_ptr()], [key.as_ptr()]);
    let session = new_session(&session_config(&lists, &keys));
    let request = round(session);
    respond(session, request, 200, &golden_snapshot());
    free_request(request);
    session
}

/// `(status, verdict, query)` of a check of `url`.
fn session_check(
    session: *mut blocksieve_session,
    url: &str,
) -> (blocksieve_status, blocksieve_verdict, *mut blocksieve_query) {
    let mut query = std::ptr::null_mut();
    let (status, verdict) = session_check_into(session, url, &mut query);
    (status, verdict, query)
}

/// `(status, verdict)` of a check of `url`, its query written to
/// `out_query` (which the call may refuse: NULL, misaligned).
fn session_check_into(
    session: *mut blocksieve_session,
    url: &str,
    out_query: *mut *mut blocksieve_query,
) -> (blocksieve_status, blocksieve_verdict) {
    let mut verdict = MaybeUninit::<blocksieve_verdict>::zeroed();
    // SAFETY: a live session, the URL's bytes, a 32-byte seed, a writable
    // verdict; `out_query` writable, or refused before it is written.
    let status = unsafe {
        blocksieve_session_check(
            session,
            url.as_ptr().cast(),
            url.len(),
            NOW_MS,
            SEED.as_ptr(),
            verdict.as_mut_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            0,
            out_query,
        )
    };
    // SAFETY: zeroed, or written whole.
    (status, unsafe { verdict.assume_init() })
}

fn complete(
    session: *mut blocksieve_session,
    query: *mut blocksieve_query,
    status: u16,
    headers: &[blocksieve_header],
    body: &[u8],
) -> (blocksieve_status, blocksieve_verdict, String, String) {
    let mut verdict = MaybeUninit::<blocksieve_verdict>::zeroed();
    let mut list = [0 as c_char; 128];
    let mut expression = [0 as c_char; 256];
    // SAFETY: live handles; `headers` and `body` valid for their lengths;
    // writable outputs of the capacities given.
    let outcome = unsafe {
        blocksieve_session_complete_check(
            session,
            query,
            status,
            headers.as_ptr(),
            headers.len(),
            body.as_ptr(),
            body.len(),
            NOW_MS,
            SEED.as_ptr(),
            verdict.as_mut_ptr(),
            list.as_mut_ptr(),
            list.len(),
            expression.as_mut_ptr(),
            expression.len(),
        )
    };
    // SAFETY: zeroed, or written whole.
    let verdict = unsafe { verdict.assume_init() };
    (
        outcome,
        verdict,
        text_of(list.as_ptr()),
        text_of(expression.as_ptr()),
    )
}

fn free_session(session: *mut blocksieve_session) {
    // SAFETY: a live session, freed once.
    assert_eq!(unsafe { blocksieve_session_free(session) }, BLOCKSIEVE_OK);
}

fn free_request(request: *mut blocksieve_request) {
    // SAFETY: NULL or a live request, freed once.
    assert_eq!(unsafe { blocksieve_request_free(request) }, BLOCKSIEVE_OK);
}

#[test]
fn a_session_confirms_a_golden_url_with_a_json_answer_then_from_its_cache() {
    let (key, list) = (golden_key(), c"golden");
    let (lists, keys) = ([list.as_ptr()], [key.as_ptr()]);
    let session = new_session(&session_config(&lists, &keys));
    let request = round(session);
    let mut url = std::ptr::null();
    // SAFETY: a live request, a writable out-pointer.
    let status = unsafe { blocksieve_request_url(request, &mut url) };
    assert_eq!(status, BLOCKSIEVE_OK);
    assert_eq!(text_of(url), "https://publisher.example/v1/lists/golden/snapshot");
    let (status, result, next) = respond(session, request, 200, &golden_snapshot());
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    assert_eq!(result.kind, blocksieve_update_kind::BLOCKSIEVE_UPDATE_UPDATED);
    assert!(next.is_null() && result.has_version && !result.has_previous);
    assert_eq!(result.version, 7);
    free_request(request);

    let (status, _, query) = session_check(session, GOLDEN_LISTED);
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    assert!(!query.is_null(), "a listed URL needs its full hashes");
    let mut search = std::ptr::null();
    // SAFETY: the live query, a writable out-pointer.
    let status = unsafe { blocksieve_query_request(query, &mut search) };
    assert_eq!(status, BLOCKSIEVE_OK);
    let (mut body, mut len) = (std::ptr::null(), 0);
    // SAFETY: the lent request, writable out-pointers.
    let status = unsafe { blocksieve_request_body(search, &mut body, &mut len) };
    assert_eq!(status, BLOCKSIEVE_OK);
    // SAFETY: `len` bytes lent by the request.
    let json = String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(body, len) }).into_owned();
    let mut hashes = Vec::new();
    blocksieve_format::full_hashes(GOLDEN_LISTED, &mut hashes).unwrap();
    let hash = hashes[0].to_string();
    assert!(json.contains(&format!("\"{}\"", &hash[..8])), "{json}");
    assert!(json.matches(",").count() >= 4, "4 noise prefixes: {json}");

    let answer = format!(
        r#"{{"results":[{{"prefix":"{}","matches":[{{"full_hash":"{hash}","list":"golden"}}]}}],"cache_duration_s":300}}"#,
        &hash[..8]
    );
    let headers = [blocksieve_header {
        name: c"Content-Type".as_ptr(),
        value: c"application/json".as_ptr(),
    }];
    let (status, verdict, list_text, expression) = complete(session, query, 200, &headers, answer.as_bytes());
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    assert_eq!(verdict.kind, blocksieve_verdict_kind::BLOCKSIEVE_UNSAFE);
    assert!(verdict.block);
    assert_eq!((list_text.as_str(), verdict.full_hash), ("golden", hashes[0].0));
    assert_eq!(expression, "allegrolokalnie.oferta-lokalana989714.lol/");
    // Consumed: refused, never read.
    let (status, ..) = complete(session, query, 200, &headers, answer.as_bytes());
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert!(last_error().contains("not a live handle"), "{}", last_error());

    let (status, verdict, query) = session_check(session, GOLDEN_LISTED);
    assert_eq!(status, BLOCKSIEVE_OK);
    assert!(query.is_null(), "answered from the cache");
    assert_eq!(verdict.kind, blocksieve_verdict_kind::BLOCKSIEVE_UNSAFE);
    let mut stats = MaybeUninit::<blocksieve_session_stats>::zeroed();
    // SAFETY: a live session, a writable struct.
    let status = unsafe { blocksieve_session_get_stats(session, stats.as_mut_ptr()) };
    assert_eq!(status, BLOCKSIEVE_OK);
    // SAFETY: written whole.
    let stats = unsafe { stats.assume_init() };
    assert_eq!((stats.full_hash_requests, stats.confirmed_unsafe), (1, 2));
    assert_eq!((stats.snapshots_applied, stats.cache_hits), (1, 1));
    let mut version = 0;
    // SAFETY: a live session, a NUL-terminated name, a writable version.
    let status = unsafe { blocksieve_session_list_version(session, c"golden".as_ptr(), &mut version) };
    assert_eq!((status, version), (BLOCKSIEVE_OK, 7));
    free_session(session);
}

#[test]
fn a_session_keeps_its_list_and_never_reports_a_prefix_hit_alone_as_unsafe() {
    let session = golden_session();
    let (key, list) = (golden_key(), c"golden");
    let (lists, keys) = ([list.as_ptr()], [key.as_ptr()]);

    // Updates: a 503, garbage for the deltas, garbage for the snapshot, a
    // cut snapshot; each leaves version 7 in place.
    let deltas = round(session);
    let (status, result, _) = respond(session, deltas, 503, b"");
    assert_eq!(status, BLOCKSIEVE_TRANSPORT);
    assert_eq!(result.kind, blocksieve_update_kind::BLOCKSIEVE_UPDATE_FAILED);
    assert_eq!((result.has_version, result.version), (true, 7));
    let (status, result, next) = respond(session, deltas, 200, b"\x00garbage");
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    assert_eq!(
        result.kind,
        blocksieve_update_kind::BLOCKSIEVE_UPDATE_NEED_SNAPSHOT
    );
    assert!(!next.is_null());
    let snapshot = golden_snapshot();
    let (status, result, after) = respond(session, next, 200, &snapshot[..snapshot.len() / 2]);
    assert_eq!(status, BLOCKSIEVE_BAD_DATA);
    assert_eq!(
        (result.kind, result.version),
        (blocksieve_update_kind::BLOCKSIEVE_UPDATE_FAILED, 7)
    );
    assert!(after.is_null());
    let mut result = MaybeUninit::<blocksieve_update_result>::zeroed();
    // SAFETY: live handles, a NUL-terminated reason, a writable result.
    let status = unsafe {
        blocksieve_session_handle_update_failure(
            session,
            next,
            c"connection reset".as_ptr(),
            result.as_mut_ptr(),
        )
    };
    assert_eq!(status, BLOCKSIEVE_TRANSPORT);
    assert!(last_error().contains("connection reset"), "{}", last_error());
    free_request(next);
    free_request(deltas);

    // A full-hash request that fails: unverified, blocked (fail closed).
    let (_, _, query) = session_check(session, GOLDEN_LISTED);
    assert!(!query.is_null());
    let (status, verdict, list_text, _) = complete(session, query, 200, &[], b"{\"results\":");
    assert_eq!(status, BLOCKSIEVE_OK);
    assert_eq!(verdict.kind, blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED);
    assert!(verdict.block);
    assert_eq!(list_text, "golden");
    // Then paused by the backoff: unverified at once.
    let (status, verdict, query) = session_check(session, GOLDEN_LISTED);
    assert_eq!(status, BLOCKSIEVE_OK);
    assert!(query.is_null());
    assert_eq!(verdict.kind, blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED);
    free_session(session);

    // A snapshot over the session's limit: refused with the limit named.
    let config = blocksieve_session_config {
        max_snapshot_bytes: 100,
        ..session_config(&lists, &keys)
    };
    let session = new_session(&config);
    let request = round(session);
    let (status, result, _) = respond(session, request, 200, &golden_snapshot());
    assert_eq!(status, BLOCKSIEVE_BAD_DATA);
    assert!(!result.has_version);
    assert!(
        last_error().contains("larger than the limit of 100 bytes"),
        "{}",
        last_error()
    );
    free_request(request);
    free_session(session);
}

fn update_advised(session: *const blocksieve_session) -> bool {
    let mut advised = true;
    // SAFETY: a live session, a writable output.
    let status = unsafe { blocksieve_session_update_advised(session, &mut advised) };
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    advised
}

/// A trusted key is read as base64 (as `keygen` prints it) or as 64 hex
/// digits, as the publisher's and the `check` tool's options take it: the
/// session loads the golden snapshot either way; anything else is
/// misconfigured, and the error says which forms are read.
#[test]
fn a_trusted_key_is_read_as_base64_or_hex() {
    let key = blocksieve_format::SigningKey::from_secret_bytes([0x42; 32]);
    let bytes = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        key.public_key().to_base64(),
    )
    .unwrap();
    let hex_key = CString::new(hex::encode(bytes)).unwrap();
    let list = c"golden";
    let (lists, keys) = ([list.as_ptr()], [hex_key.as_ptr()]);
    let session = new_session(&session_config(&lists, &keys));
    let request = round(session);
    let (status, result, _) = respond(session, request, 200, &golden_snapshot());
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    assert_eq!((result.has_version, result.version), (true, 7));
    free_request(request);
    free_session(session);

    let garbage = c"/etc/blocksieve/public.key";
    let keys = [garbage.as_ptr()];
    let mut session = std::ptr::null_mut();
    // SAFETY: `config` holds valid strings; `session` is writable.
    let status = unsafe { blocksieve_session_new(&session_config(&lists, &keys), &mut session) };
    assert_eq!(status, BLOCKSIEVE_MISCONFIGURED);
    assert!(session.is_null());
    let error = last_error();
    assert!(error.contains("base64") && error.contains("hex"), "{error}");
}

/// A check refused as `400 prefix_too_short` (the list grew past the
/// request prefix length of the snapshot held) is unverified, and the
/// session says to update before checking again, without the host reading
/// the body; once an update round left the version as it was, it no
/// longer does (no loop). NULL handles and outputs are refused.
#[test]
fn a_prefix_too_short_refusal_advises_an_update_round() {
    let session = golden_session();
    let (key, list) = (golden_key(), c"golden");
    let (lists, keys) = ([list.as_ptr()], [key.as_ptr()]);
    assert!(!update_advised(session));

    let (_, _, query) = session_check(session, GOLDEN_LISTED);
    assert!(!query.is_null());
    let body = br#"{"error":{"code":"prefix_too_short","message":"a 8-bit prefix selects about 78 full hashes of list golden, more than the limit of 64; send a longer prefix"}}"#;
    let (status, verdict, _, _) = complete(session, query, 400, &[], body);
    assert_eq!(status, BLOCKSIEVE_OK);
    assert_eq!(verdict.kind, blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED);
    assert!(update_advised(session));
    // Any other refusal advises nothing.
    let other = new_session(&session_config(&lists, &keys));
    let request = round(other);
    respond(other, request, 200, &golden_snapshot());
    free_request(request);
    let (_, _, query) = session_check(other, GOLDEN_LISTED);
    let (_, verdict, _, _) = complete(
        other,
        query,
        400,
        &[],
        br#"{"error":{"code":"bad_prefix","message":"x"}}"#,
    );
    assert_eq!(verdict.kind, blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED);
    assert!(!update_advised(other));
    free_session(other);

    // The round finds nothing newer: the refusal stands, no update advised.
    let deltas = round(session);
    let (status, result, _) = respond(session, deltas, 304, b"");
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    assert_eq!(result.kind, blocksieve_update_kind::BLOCKSIEVE_UPDATE_UNCHANGED);
    free_request(deltas);
    assert!(!update_advised(session));

    let mut advised = false;
    // SAFETY: a NULL session, refused before any read.
    let status = unsafe { blocksieve_session_update_advised(std::ptr::null(), &mut advised) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: a live session, a NULL output, refused before any write.
    let status = unsafe { blocksieve_session_update_advised(session, std::ptr::null_mut()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    free_session(session);
}

#[test]
fn the_session_api_refuses_misuse_without_reading_it() {
    let (key, list) = (golden_key(), c"golden");
    let (lists, keys) = ([list.as_ptr()], [key.as_ptr()]);
    let config = session_config(&lists, &keys);
    let session = new_session(&config);
    let other = new_session(&config);
    let null = std::ptr::null_mut::<blocksieve_session>();

    // Configs.
    for (bad, expected) in [
        (
            blocksieve_session_config {
                base_url: c"http://publisher.example".as_ptr(),
                ..config
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_session_config {
                base_url: std::ptr::null(),
                ..config
            },
            BLOCKSIEVE_INVALID_ARGUMENT,
        ),
        (
            blocksieve_session_config {
                noise_prefixes: 65,
                ..config
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_session_config {
                lists_len: 0,
                ..config
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
        (
            blocksieve_session_config {
                failure_policy: 9,
                ..config
            },
            BLOCKSIEVE_MISCONFIGURED,
        ),
    ] {
        let mut out = std::ptr::dangling_mut::<blocksieve_session>();
        // SAFETY: `bad` holds valid or NULL strings; `out` is writable.
        let status = unsafe { blocksieve_session_new(&bad, &mut out) };
        assert_eq!(status, expected, "{}", last_error());
        assert!(out.is_null());
    }

    // Requests: too small a buffer, then dead and foreign handles.
    let mut count = 0;
    // SAFETY: NULL with capacity 0, a writable count.
    let status = unsafe { blocksieve_session_update_requests(session, std::ptr::null_mut(), 0, &mut count) };
    assert_eq!((status, count), (BLOCKSIEVE_BUFFER_TOO_SMALL, 1));
    // SAFETY: NULL with a capacity is refused before any write.
    let status = unsafe { blocksieve_session_update_requests(session, std::ptr::null_mut(), 3, &mut count) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    let request = round(session);
    let (status, ..) = respond(other, request, 200, &golden_snapshot());
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert!(last_error().contains("another session"), "{}", last_error());
    let (status, ..) = respond(null, request, 200, b"");
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    let (mut name, mut value) = (std::ptr::null(), std::ptr::null());
    // SAFETY: a live request, writable out-pointers.
    let status = unsafe { blocksieve_request_header(request, 5, &mut name, &mut value) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    let headers = [blocksieve_header {
        name: std::ptr::null(),
        value: c"x".as_ptr(),
    }];
    let mut result = MaybeUninit::<blocksieve_update_result>::zeroed();
    let mut next = std::ptr::null_mut();
    // SAFETY: live handles; a header with a NULL name (refused); a NULL body
    // with a length (refused); writable outputs.
    let status = unsafe {
        blocksieve_session_handle_update_response(
            session,
            request,
            200,
            headers.as_ptr(),
            1,
            std::ptr::null(),
            0,
            NOW_MS,
            result.as_mut_ptr(),
            &mut next,
        )
    };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert_eq!(last_error(), "headers[0].name is NULL");
    // SAFETY: as above, with no header and a NULL body of 5 bytes.
    let status = unsafe {
        blocksieve_session_handle_update_response(
            session,
            request,
            200,
            std::ptr::null(),
            0,
            std::ptr::null(),
            5,
            NOW_MS,
            result.as_mut_ptr(),
            &mut next,
        )
    };
    assert_eq!(
        (status, last_error().as_str()),
        (BLOCKSIEVE_INVALID_ARGUMENT, "body is NULL")
    );
    // SAFETY: a NULL header array with a length is refused.
    let status = unsafe {
        blocksieve_session_handle_update_response(
            session,
            request,
            200,
            std::ptr::null(),
            2,
            std::ptr::null(),
            0,
            NOW_MS,
            result.as_mut_ptr(),
            &mut next,
        )
    };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: a NULL reason is refused.
    let status = unsafe {
        blocksieve_session_handle_update_failure(session, request, std::ptr::null(), result.as_mut_ptr())
    };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // A request is not a query, nor a session.
    // SAFETY: the library checks the address against its live handles.
    let status = unsafe { blocksieve_query_free(request.cast()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: as above.
    let status = unsafe { blocksieve_session_free(request.cast()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    free_request(request);
    // SAFETY: freed: refused, not read.
    let status = unsafe { blocksieve_request_free(request) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    let mut url = std::ptr::null();
    // SAFETY: as above.
    let status = unsafe { blocksieve_request_url(request, &mut url) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);

    // Checks before any snapshot, of a NULL URL, with no seed.
    let (status, verdict, query) = session_check(session, GOLDEN_LISTED);
    assert_eq!(status, BLOCKSIEVE_NOT_READY);
    assert!(query.is_null());
    // No verdict, so the placeholder: a caller that skips the status reads
    // "unverified, block", never the zeroed struct's "safe".
    assert_eq!(
        (verdict.kind, verdict.block),
        (blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED, true)
    );
    let mut verdict = MaybeUninit::<blocksieve_verdict>::zeroed();
    let mut query = std::ptr::dangling_mut::<blocksieve_query>();
    // SAFETY: valid pointers and lengths throughout, but a NULL URL.
    let status = unsafe {
        blocksieve_session_check(
            session,
            std::ptr::null(),
            GOLDEN_LISTED.len(),
            NOW_MS,
            SEED.as_ptr(),
            verdict.as_mut_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            0,
            &mut query,
        )
    };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert!(query.is_null(), "every failure leaves NULL");
    // SAFETY: as above, with a NULL seed (refused).
    let status = unsafe {
        blocksieve_session_check(
            session,
            GOLDEN_LISTED.as_ptr().cast(),
            GOLDEN_LISTED.len(),
            NOW_MS,
            std::ptr::null(),
            verdict.as_mut_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            0,
            &mut query,
        )
    };
    assert_eq!(
        (status, last_error().as_str()),
        (BLOCKSIEVE_INVALID_ARGUMENT, "seed is NULL")
    );

    // A query completed on another session is consumed and refused.
    let request = round(other);
    respond(other, request, 200, &golden_snapshot());
    free_request(request);
    let (_, verdict, query) = session_check(other, GOLDEN_LISTED);
    assert!(!query.is_null());
    // A query to send: the verdict is the placeholder until it is answered.
    assert_eq!(
        (verdict.kind, verdict.block),
        (blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED, true)
    );
    let (status, ..) = complete(session, query, 200, &[], b"");
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert!(last_error().contains("another session"), "{}", last_error());
    // SAFETY: consumed: refused, not read.
    let status = unsafe { blocksieve_query_free(query) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // An abandoned query is freed without a verdict.
    let (_, _, query) = session_check(other, GOLDEN_LISTED);
    // SAFETY: the live query, freed once.
    assert_eq!(unsafe { blocksieve_query_free(query) }, BLOCKSIEVE_OK);

    // NULL everywhere else.
    let mut stats = MaybeUninit::<blocksieve_session_stats>::zeroed();
    // SAFETY: a NULL session is refused.
    let status = unsafe { blocksieve_session_get_stats(null, stats.as_mut_ptr()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: a NULL output is refused.
    let status = unsafe { blocksieve_session_get_stats(session, std::ptr::null_mut()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: a live session, a NUL-terminated name, a writable version.
    let status = unsafe { blocksieve_session_list_version(session, c"nope".as_ptr(), &mut 0) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: a NULL query is refused.
    let status = unsafe { blocksieve_query_request(std::ptr::null(), &mut url.cast()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: NULL is accepted.
    let status = unsafe { blocksieve_request_free(std::ptr::null_mut()) };
    assert_eq!(status, BLOCKSIEVE_OK);
    // SAFETY: NULL is accepted.
    let status = unsafe { blocksieve_query_free(std::ptr::null_mut()) };
    assert_eq!(status, BLOCKSIEVE_OK);
    // SAFETY: NULL is accepted.
    let status = unsafe { blocksieve_session_free(null) };
    assert_eq!(status, BLOCKSIEVE_OK);
    free_session(other);
    free_session(session);
    // SAFETY: freed: refused, not read.
    let status = unsafe { blocksieve_session_free(session) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
}

/// A freed handle stays refused after the allocator gives its memory to a
/// newer handle: handles are tokens, never reused. By address, the stale
/// pointer was the newer handle, and freeing it again freed that one (a
/// use after free for a thread still using it).
#[test]
fn a_freed_handle_is_refused_after_its_memory_is_reused() {
    let (key, list) = (golden_key(), c"golden");
    let (lists, keys) = ([list.as_ptr()], [key.as_ptr()]);
    let config = session_config(&lists, &keys);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..50 {
        let stale = new_session(&config);
        assert!(seen.insert(stale.addr()), "a handle given twice");
        free_session(stale);
        let newer = new_session(&config);
        assert_ne!(newer, stale);
        // SAFETY: freed: refused, not read, and `newer` untouched.
        let status = unsafe { blocksieve_session_free(stale) };
        assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
        let _ = stats(newer);
        // A stale query, likewise.
        let request = round(newer);
        let (status, ..) = respond(newer, request, 200, &golden_snapshot());
        assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
        free_request(request);
        // SAFETY: freed: refused, not read.
        let status = unsafe { blocksieve_request_free(request) };
        assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
        let (_, _, query) = session_check(newer, GOLDEN_LISTED);
        assert!(!query.is_null());
        // SAFETY: the live query, freed once.
        assert_eq!(unsafe { blocksieve_query_free(query) }, BLOCKSIEVE_OK);
        let (_, _, again) = session_check(newer, GOLDEN_LISTED);
        assert_ne!(again, query);
        // SAFETY: consumed: refused, not read.
        let status = unsafe { blocksieve_query_free(query) };
        assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
        // SAFETY: the live query, freed once.
        assert_eq!(unsafe { blocksieve_query_free(again) }, BLOCKSIEVE_OK);
        free_session(newer);
    }
}

/// Every check that returns no verdict leaves the placeholder (unverified,
/// block) in `*out_verdict`, whichever argument it refused: a NULL handle,
/// URL, seed or query. A zeroed struct reads "safe, do not
/// block" to a caller that skips the status.
#[test]
fn a_check_refusing_an_argument_leaves_the_placeholder_never_a_zeroed_safe() {
    let placeholder = |verdict: &MaybeUninit<blocksieve_verdict>, what: &str| {
        // SAFETY: zeroed, or written whole.
        let verdict = unsafe { verdict.assume_init_read() };
        assert_eq!(
            (verdict.kind, verdict.block),
            (blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED, true),
            "{what}"
        );
    };
    let good = b"http://evil.example/caf";

    // The agent handle: a NULL URL, and a NULL handle.
    let key = golden_key();
    let keys = [key.as_ptr()];
    let lists = [c"phishing".as_ptr()];
    let config = blocksieve_config {
        base_url: c"http://127.0.0.1:9".as_ptr(),
        lists: lists.as_ptr(),
        lists_len: 1,
        trusted_keys: keys.as_ptr(),
        trusted_keys_len: 1,
        cache_dir: std::ptr::null(),
        failure_policy: BLOCKSIEVE_FAIL_OPEN,
        update_interval_seconds: 0,
        request_timeout_ms: 0,
        snapshot_timeout_ms: 0,
    };
    let mut agent = std::ptr::null_mut();
    // SAFETY: `config` holds valid strings; `agent` is writable.
    let status = unsafe { blocksieve_agent_new(&config, &mut agent) };
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    for (handle, url, what) in [
        (agent.cast_const(), std::ptr::null(), "agent, NULL url"),
        (std::ptr::null(), good.as_ptr(), "NULL agent"),
    ] {
        let mut verdict = MaybeUninit::<blocksieve_verdict>::zeroed();
        // SAFETY: a live handle or NULL, the URL's bytes or NULL, a
        // writable verdict.
        let status = unsafe {
            blocksieve_agent_check(
                handle,
                url.cast(),
                good.len(),
                verdict.as_mut_ptr(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT, "{what}");
        placeholder(&verdict, what);
    }
    // SAFETY: the live handle, freed once.
    assert_eq!(unsafe { blocksieve_agent_free(agent) }, BLOCKSIEVE_OK);

    // The session: a NULL URL, then a NULL seed.
    let key = golden_key();
    let keys = [key.as_ptr()];
    let lists = [c"phishing".as_ptr()];
    let session = new_session(&session_config(&lists, &keys));
    let request = round(session);
    respond(session, request, 200, &golden_snapshot());
    free_request(request);
    for (url, seed, what) in [
        (std::ptr::null(), SEED.as_ptr(), "session, NULL url"),
        (GOLDEN_LISTED.as_ptr(), std::ptr::null(), "session, NULL seed"),
    ] {
        let mut verdict = MaybeUninit::<blocksieve_verdict>::zeroed();
        let mut query = std::ptr::null_mut();
        // SAFETY: a live session, the URL's bytes or NULL, writable outputs.
        let status = unsafe {
            blocksieve_session_check(
                session,
                url.cast(),
                GOLDEN_LISTED.len(),
                NOW_MS,
                seed,
                verdict.as_mut_ptr(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                0,
                &mut query,
            )
        };
        assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT, "{what}");
        placeholder(&verdict, what);
    }
    // Completing a NULL query, by a response or a failure.
    let mut verdict = MaybeUninit::<blocksieve_verdict>::zeroed();
    // SAFETY: a live session, a NULL query (refused), writable outputs.
    let status = unsafe {
        blocksieve_session_complete_check(
            session,
            std::ptr::null_mut(),
            200,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            NOW_MS,
            SEED.as_ptr(),
            verdict.as_mut_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    placeholder(&verdict, "complete_check, NULL query");
    let mut verdict = MaybeUninit::<blocksieve_verdict>::zeroed();
    // SAFETY: as above.
    let status = unsafe {
        blocksieve_session_fail_check(
            session,
            std::ptr::null_mut(),
            c"timeout".as_ptr(),
            NOW_MS,
            SEED.as_ptr(),
            verdict.as_mut_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    placeholder(&verdict, "fail_check, NULL query");
    free_session(session);
}

/// A failure's reason that is not UTF-8 (a host's `strerror` in a
/// locale's encoding) is still a reason: the update failure is recorded
/// (`BLOCKSIEVE_TRANSPORT`, the bytes shown as U+FFFD), where it was
/// refused as an invalid argument and not recorded at all.
#[test]
fn a_failure_reason_in_another_encoding_is_recorded() {
    let session = golden_session();
    let request = round(session);
    let mut result = MaybeUninit::<blocksieve_update_result>::zeroed();
    // SAFETY: live handles, a NUL-terminated reason, a writable result.
    let status = unsafe {
        blocksieve_session_handle_update_failure(
            session,
            request,
            c"d\xe9lai d\xe9pass\xe9".as_ptr(),
            result.as_mut_ptr(),
        )
    };
    assert_eq!(status, BLOCKSIEVE_TRANSPORT, "{}", last_error());
    assert!(
        last_error().contains("d\u{fffd}lai d\u{fffd}pass\u{fffd}"),
        "{}",
        last_error()
    );
    // SAFETY: written whole (the failure recorded).
    let result = unsafe { result.assume_init() };
    assert_eq!(
        (result.kind, result.version),
        (blocksieve_update_kind::BLOCKSIEVE_UPDATE_FAILED, 7)
    );
    free_request(request);
    free_session(session);
}

/// A session check refusing a NULL (or misaligned) `out_query` still
/// leaves the placeholder: the verdict a caller that skips the status reads
/// for a listed URL is "unverified, block", never the "safe" of a zeroed
/// struct.
#[test]
fn a_session_check_refusing_its_query_out_parameter_leaves_the_placeholder() {
    let session = golden_session();
    let misaligned = std::ptr::without_provenance_mut::<*mut blocksieve_query>(1);
    for (out_query, what) in [(std::ptr::null_mut(), "NULL"), (misaligned, "misaligned")] {
        let (status, verdict) = session_check_into(session, GOLDEN_LISTED, out_query);
        assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT, "{what} out_query");
        assert_eq!(
            (verdict.kind, verdict.block),
            (blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED, true),
            "{what} out_query: a listed URL read as {:?}",
            verdict.kind
        );
    }
    free_session(session);
}

/// `(status, version)` of restoring `golden` on `session` at `now_ms`; an
/// empty chain is never reported dropped.
fn restore(
    session: *mut blocksieve_session,
    snapshot: &[u8],
    chain: &[u8],
    record: &[u8],
    now_ms: i64,
) -> (blocksieve_status, u64) {
    let (status, version, dropped) = restore_flagged(session, snapshot, chain, record, now_ms);
    assert!(!(dropped && chain.is_empty()), "an empty chain was dropped");
    (status, version)
}

/// `(status, version, chain dropped)` of restoring `golden`.
fn restore_flagged(
    session: *mut blocksieve_session,
    snapshot: &[u8],
    chain: &[u8],
    record: &[u8],
    now_ms: i64,
) -> (blocksieve_status, u64, bool) {
    let (mut version, mut dropped) = (u64::MAX, false);
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
            now_ms,
            &mut version,
            &mut dropped,
        )
    };
    (status, version, dropped)
}

fn stats(session: *mut blocksieve_session) -> blocksieve_session_stats {
    let mut stats = MaybeUninit::<blocksieve_session_stats>::zeroed();
    // SAFETY: a live session, a writable struct.
    let status = unsafe { blocksieve_session_get_stats(session, stats.as_mut_ptr()) };
    assert_eq!(status, BLOCKSIEVE_OK);
    // SAFETY: written whole.
    unsafe { stats.assume_init() }
}

/// The bytes one accessor of a saved list lends.
fn lent(
    saved: *const blocksieve_saved,
    accessor: unsafe extern "C" fn(*const blocksieve_saved, *mut *const u8, *mut usize) -> blocksieve_status,
) -> (blocksieve_status, Vec<u8>) {
    let (mut ptr, mut len) = (std::ptr::dangling::<u8>(), usize::MAX);
    // SAFETY: a live (or refused) saved list, writable outputs.
    let status = unsafe { accessor(saved, &mut ptr, &mut len) };
    if status != BLOCKSIEVE_OK {
        return (status, Vec::new());
    }
    if len == 0 {
        assert!(ptr.is_null(), "empty bytes are NULL and 0");
        return (status, Vec::new());
    }
    // SAFETY: `len` bytes lent until the saved list is freed.
    (status, unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec())
}

#[test]
fn a_saved_list_comes_back_in_a_new_session_verified_again() {
    let (key, list) = (golden_key(), c"golden");
    let (lists, keys) = ([list.as_ptr()], [key.as_ptr()]);
    let config = session_config(&lists, &keys);
    let session = new_session(&config);

    // Nothing to keep before the first snapshot.
    let mut saved = std::ptr::dangling_mut::<blocksieve_saved>();
    // SAFETY: a live session, a NUL-terminated name, a writable output.
    let status = unsafe { blocksieve_session_save(session, list.as_ptr(), &mut saved) };
    assert_eq!(status, BLOCKSIEVE_NOT_READY, "{}", last_error());
    assert!(saved.is_null(), "every failure leaves NULL");

    let request = round(session);
    let (status, ..) = respond(session, request, 200, &golden_snapshot());
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    free_request(request);
    // SAFETY: as above.
    let status = unsafe { blocksieve_session_save(session, list.as_ptr(), &mut saved) };
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    let (status, snapshot) = lent(saved, blocksieve_saved_snapshot);
    assert_eq!(status, BLOCKSIEVE_OK);
    assert_eq!(snapshot, golden_snapshot(), "the snapshot as downloaded");
    let (status, chain) = lent(saved, blocksieve_saved_chain);
    assert_eq!((status, chain.len()), (BLOCKSIEVE_OK, 0), "no delta applied");
    let (status, record) = lent(saved, blocksieve_saved_record);
    assert_eq!(status, BLOCKSIEVE_OK);
    let record_text = String::from_utf8(record.clone()).expect("the record is JSON");
    assert!(
        record_text.starts_with('{') && record_text.contains("golden"),
        "{record_text}"
    );
    // The saved list outlives its session.
    free_session(session);
    assert_eq!(lent(saved, blocksieve_saved_snapshot).1, snapshot);
    // SAFETY: the live saved list, freed once.
    assert_eq!(unsafe { blocksieve_saved_free(saved) }, BLOCKSIEVE_OK);

    // A new session answers at once: a prefix hit asks for full hashes.
    let restarted = new_session(&config);
    assert_eq!(
        restore_flagged(restarted, &snapshot, &chain, &record, NOW_MS),
        (BLOCKSIEVE_OK, 7, false),
        "{}",
        last_error()
    );
    let (status, _, query) = session_check(restarted, GOLDEN_LISTED);
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    assert!(!query.is_null(), "a prefix hit alone is never unsafe");
    // SAFETY: the live query, freed once.
    assert_eq!(unsafe { blocksieve_query_free(query) }, BLOCKSIEVE_OK);
    // The next round asks for the deltas since version 7.
    let request = round(restarted);
    let mut url = std::ptr::null();
    // SAFETY: a live request, a writable out-pointer.
    let status = unsafe { blocksieve_request_url(request, &mut url) };
    assert_eq!(status, BLOCKSIEVE_OK);
    assert_eq!(
        text_of(url),
        "https://publisher.example/v1/lists/golden/updates/7"
    );
    free_request(request);
    // A list holding a state keeps it; the counters say what happened.
    assert_eq!(
        restore(restarted, &snapshot, &[], &[], NOW_MS),
        (BLOCKSIEVE_OK, 7)
    );
    let counted = stats(restarted);
    assert_eq!(
        (
            counted.restored,
            counted.restored_stale,
            counted.snapshots_applied
        ),
        (1, 0, 0)
    );
    free_session(restarted);

    // Expired by the time it is restored (the golden snapshot expires at
    // Unix time 4,102,444,800): restored all the same, stale.
    let late = new_session(&config);
    assert_eq!(
        restore(late, &snapshot, &chain, &record, 4_102_444_801_000),
        (BLOCKSIEVE_OK, 7)
    );
    assert_eq!((stats(late).restored, stats(late).restored_stale), (1, 1));
    free_session(late);

    // A record whose floor is above the snapshot: rolled back, refused.
    let rolled_back = record_text.replace("\"version\": 7,", "\"version\": 9,");
    assert_ne!(rolled_back, record_text, "{record_text}");
    let floor = new_session(&config);
    let (status, _) = restore(floor, &snapshot, &chain, rolled_back.as_bytes(), NOW_MS);
    assert_eq!(status, BLOCKSIEVE_BAD_DATA);
    assert!(last_error().contains('9'), "{}", last_error());
    free_session(floor);

    // The fuzz seed's record (after its NUL) reads: restored with it, and
    // refused once its floor is raised.
    let seed = std::fs::read(repo().join("fuzz/corpus/c_entry_points/restore-record")).unwrap();
    let seed_record = String::from_utf8(seed[1..].to_vec()).unwrap();
    let seeded = new_session(&config);
    let raised = seed_record.replace("\"version\": 7,", "\"version\": 9,");
    assert_ne!(raised, seed_record);
    assert_eq!(
        restore(seeded, &snapshot, &[], raised.as_bytes(), NOW_MS).0,
        BLOCKSIEVE_BAD_DATA
    );
    assert_eq!(
        restore(seeded, &snapshot, &[], seed_record.as_bytes(), NOW_MS),
        (BLOCKSIEVE_OK, 7)
    );
    free_session(seeded);

    // A chain or a record that does not read: the base alone, and the
    // chain reported dropped.
    let bad = new_session(&config);
    assert_eq!(
        restore_flagged(bad, &snapshot, b"not a chain", b"{", NOW_MS),
        (BLOCKSIEVE_OK, 7, true)
    );
    free_session(bad);
    // The flag is optional.
    let unflagged = new_session(&config);
    let mut version = 0;
    // SAFETY: a live session, a NUL-terminated name, the bytes valid for
    // their lengths, a writable version, no flag wanted.
    let status = unsafe {
        blocksieve_session_restore(
            unflagged,
            list.as_ptr(),
            snapshot.as_ptr(),
            snapshot.len(),
            b"x".as_ptr(),
            1,
            std::ptr::null(),
            0,
            NOW_MS,
            &mut version,
            std::ptr::null_mut(),
        )
    };
    assert_eq!((status, version), (BLOCKSIEVE_OK, 7), "{}", last_error());
    free_session(unflagged);
}

#[test]
fn a_restore_refuses_bytes_that_do_not_verify_and_misuse() {
    let (key, list) = (golden_key(), c"golden");
    let (lists, keys) = ([list.as_ptr()], [key.as_ptr()]);
    let config = session_config(&lists, &keys);
    let session = new_session(&config);
    let golden = golden_snapshot();
    let mut version = 0;

    // Every cut and a flipped byte: bad data, the list left without one.
    let mut tampered = golden.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 1;
    for bytes in [&tampered[..], &golden[..golden.len() - 1], &golden[..10], b""] {
        let (status, _) = restore(session, bytes, &[], &[], NOW_MS);
        assert_eq!(status, BLOCKSIEVE_BAD_DATA, "{} bytes", bytes.len());
        // SAFETY: a live session, a NUL-terminated name, a writable version.
        let status = unsafe { blocksieve_session_list_version(session, list.as_ptr(), &mut version) };
        assert_eq!(status, BLOCKSIEVE_NOT_READY);
    }
    // Of another list (a session subscribed to `other` restoring `golden`
    // bytes under its own name).
    let other_lists = [c"other".as_ptr()];
    let other = new_session(&session_config(&other_lists, &keys));
    // SAFETY: a live session, a NUL-terminated name, the bytes valid for
    // their lengths, a writable version.
    let status = unsafe {
        blocksieve_session_restore(
            other,
            c"other".as_ptr(),
            golden.as_ptr(),
            golden.len(),
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            NOW_MS,
            &mut version,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(status, BLOCKSIEVE_BAD_DATA, "{}", last_error());
    // Signed by a key the session does not trust.
    let untrusted = CString::new(
        blocksieve_format::SigningKey::from_secret_bytes([7; 32])
            .public_key()
            .to_base64(),
    )
    .unwrap();
    let untrusted_keys = [untrusted.as_ptr()];
    let distrustful = new_session(&session_config(&lists, &untrusted_keys));
    assert_eq!(
        restore(distrustful, &golden, &[], &[], NOW_MS).0,
        BLOCKSIEVE_BAD_DATA
    );
    free_session(distrustful);
    free_session(other);
    let session = {
        free_session(session);
        new_session(&config)
    };

    // A list not subscribed, NULL and out-of-range arguments.
    let null = std::ptr::null_mut::<blocksieve_session>();
    let call = |session: *mut blocksieve_session,
                list: *const c_char,
                snapshot: *const u8,
                snapshot_len: usize,
                chain_len: usize,
                now_ms: i64,
                out: *mut u64| {
        // SAFETY: every pointer is NULL, or valid for the length given.
        unsafe {
            blocksieve_session_restore(
                session,
                list,
                snapshot,
                snapshot_len,
                std::ptr::null(),
                chain_len,
                std::ptr::null(),
                0,
                now_ms,
                out,
                std::ptr::null_mut(),
            )
        }
    };
    let (g, n, v) = (golden.as_ptr(), golden.len(), &raw mut version);
    let cases = [
        (
            (session, c"nope".as_ptr(), g, n, 0, NOW_MS, v),
            "list nope is not subscribed",
        ),
        ((null, list.as_ptr(), g, n, 0, NOW_MS, v), "session is NULL"),
        ((session, std::ptr::null(), g, n, 0, NOW_MS, v), "list is NULL"),
        (
            (session, list.as_ptr(), std::ptr::null(), n, 0, NOW_MS, v),
            "snapshot is NULL",
        ),
        ((session, list.as_ptr(), g, n, 3, NOW_MS, v), "chain is NULL"),
        (
            (session, list.as_ptr(), g, n, 0, NOW_MS, std::ptr::null_mut()),
            "out_version is NULL",
        ),
    ];
    for ((s, l, snapshot, len, chain_len, now_ms, out), expected_error) in cases {
        assert_eq!(
            (
                call(s, l, snapshot, len, chain_len, now_ms, out),
                last_error().as_str()
            ),
            (BLOCKSIEVE_INVALID_ARGUMENT, expected_error)
        );
    }
    // SAFETY: a live session, a writable version.
    let status = unsafe { blocksieve_session_list_version(session, list.as_ptr(), &mut version) };
    assert_eq!(status, BLOCKSIEVE_NOT_READY, "nothing was restored");

    // Saves: a list not subscribed, NULLs; saved handles are checked.
    let mut saved = std::ptr::dangling_mut::<blocksieve_saved>();
    // SAFETY: the library checks every pointer before reading it.
    let status = unsafe { blocksieve_session_save(session, c"nope".as_ptr(), &mut saved) };
    assert_eq!((status, saved.is_null()), (BLOCKSIEVE_INVALID_ARGUMENT, true));
    // SAFETY: as above.
    let status = unsafe { blocksieve_session_save(null, list.as_ptr(), &mut saved) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: as above.
    let status = unsafe { blocksieve_session_save(session, std::ptr::null(), &mut saved) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: as above.
    let status = unsafe { blocksieve_session_save(session, list.as_ptr(), std::ptr::null_mut()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert_eq!(restore(session, &golden, &[], &[], NOW_MS), (BLOCKSIEVE_OK, 7));
    // SAFETY: as above.
    let status = unsafe { blocksieve_session_save(session, list.as_ptr(), &mut saved) };
    assert_eq!(status, BLOCKSIEVE_OK);
    // A session or a request is not a saved list, nor the reverse.
    assert_eq!(
        lent(session.cast(), blocksieve_saved_snapshot).0,
        BLOCKSIEVE_INVALID_ARGUMENT
    );
    // SAFETY: the library checks the address against its live handles.
    let status = unsafe { blocksieve_session_free(saved.cast()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: as above.
    let status = unsafe { blocksieve_request_free(saved.cast()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    let mut len = 0;
    // SAFETY: NULL outputs are refused.
    let status = unsafe { blocksieve_saved_chain(saved, std::ptr::null_mut(), &mut len) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: as above.
    let status = unsafe { blocksieve_saved_record(saved, &mut std::ptr::null(), std::ptr::null_mut()) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    // SAFETY: the live saved list, freed once.
    assert_eq!(unsafe { blocksieve_saved_free(saved) }, BLOCKSIEVE_OK);
    // SAFETY: freed: refused, not read.
    let status = unsafe { blocksieve_saved_free(saved) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert_eq!(
        lent(saved, blocksieve_saved_record).0,
        BLOCKSIEVE_INVALID_ARGUMENT
    );
    assert!(last_error().contains("not a live handle"), "{}", last_error());
    // SAFETY: NULL is accepted.
    let status = unsafe { blocksieve_saved_free(std::ptr::null_mut()) };
    assert_eq!(status, BLOCKSIEVE_OK);
    free_session(session);
}

#[test]
fn an_update_from_a_publisher_that_never_answers_ends_at_the_snapshot_timeout() {
    // Accepts connections and never answers: only the timeout ends a request.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = CString::new(format!("http://{}", listener.local_addr().unwrap())).unwrap();
    let held = std::thread::spawn(move || {
        let mut connections = Vec::new();
        listener.set_nonblocking(true).unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < until && connections.len() < 8 {
            match listener.accept() {
                Ok((stream, _)) => connections.push(stream),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        connections
    });
    let key = golden_key();
    let keys = [key.as_ptr()];
    let lists = [c"phishing".as_ptr()];
    let config = blocksieve_config {
        base_url: base_url.as_ptr(),
        lists: lists.as_ptr(),
        lists_len: 1,
        trusted_keys: keys.as_ptr(),
        trusted_keys_len: 1,
        cache_dir: std::ptr::null(),
        failure_policy: BLOCKSIEVE_FAIL_OPEN,
        update_interval_seconds: 0,
        request_timeout_ms: 300,
        snapshot_timeout_ms: 400,
    };
    let mut agent = std::ptr::null_mut();
    // SAFETY: `config` holds valid strings; `agent` is writable.
    let status = unsafe { blocksieve_agent_new(&config, &mut agent) };
    assert_eq!(status, BLOCKSIEVE_OK, "{}", last_error());
    let started = std::time::Instant::now();
    // SAFETY: the live handle just created.
    let status = unsafe { blocksieve_agent_update(agent) };
    let took = started.elapsed();
    assert_eq!(status, BLOCKSIEVE_TRANSPORT, "{}", last_error());
    assert!(last_error().contains("timed out"), "{}", last_error());
    // The default would be 5 minutes; 400 ms per list, a little slack.
    assert!(
        took >= std::time::Duration::from_millis(400) && took < std::time::Duration::from_secs(5),
        "{took:?}"
    );
    // SAFETY: the live handle, freed once.
    assert_eq!(unsafe { blocksieve_agent_free(agent) }, BLOCKSIEVE_OK);
    drop(held);
}
