//! What the fuzz target `c_entry_points` runs: the entry points that parse
//! caller input, called as a C host would call them, with arbitrary bytes.
//! Not part of the ABI. It plays the caller, so it holds unsafe calls.

#![allow(unsafe_code)]

use std::ffi::{CString, c_char};

use crate::types::{blocksieve_config, blocksieve_snapshot_info, blocksieve_status};
use crate::{
    BLOCKSIEVE_FULL_HASH_BYTES, blocksieve_agent_free, blocksieve_agent_new, blocksieve_canonicalize,
    blocksieve_expressions, blocksieve_full_hashes, blocksieve_snapshot_verify,
};

use blocksieve_status::{BLOCKSIEVE_BUFFER_TOO_SMALL, BLOCKSIEVE_OK, BLOCKSIEVE_PANIC};

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
///   would create directories anywhere.
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

    let key = CString::new(
        blocksieve_format::SigningKey::from_secret_bytes([0x42; 32])
            .public_key()
            .to_base64(),
    )
    .unwrap_or_default();
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
}
