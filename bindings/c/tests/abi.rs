//! The ABI called from Rust as a C host calls it: the sans-I/O functions on
//! the repository's vectors and golden snapshot, every pointer and buffer
//! rule, and the fuzz target's body on its seeds. The agent against a real
//! publisher is tested from C (`tests/agent_test.c`, run by
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
fn null_and_non_utf8_inputs_are_invalid_arguments() {
    let mut buf = [0 as c_char; 64];
    let mut len = 0;
    // SAFETY: NULL is what is tested; the rest is valid.
    let status = unsafe { blocksieve_canonicalize(std::ptr::null(), 3, buf.as_mut_ptr(), 64, &mut len) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert_eq!(last_error(), "url is NULL");
    let url = b"http://a.example/\xff";
    // SAFETY: valid pointers; the bytes are not UTF-8.
    let status =
        unsafe { blocksieve_expressions(url.as_ptr().cast(), url.len(), buf.as_mut_ptr(), 64, &mut len) };
    assert_eq!(status, BLOCKSIEVE_INVALID_ARGUMENT);
    assert_eq!(last_error(), "url is not utf-8: invalid byte at offset 17");
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
    let bytes = std::fs::read(repo().join("format/tests/data/golden/binary_fuse8.snapshot")).unwrap();
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
