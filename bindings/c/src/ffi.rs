//! The entry points: every `extern "C"` function, and the only unsafe code
//! of the crate — reading the caller's pointers and writing into the
//! caller's buffers. Each entry point checks its pointers, runs the safe
//! code of [`crate::sansio`] or [`crate::agent`] under `catch_unwind`, and
//! records the outcome for `blocksieve_last_error`.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::agent::{CheckAnswer, Handle, Settings};
use crate::failure::{self, Failure};
use crate::session::{Query, Request, Response, SessionSettings, Step};
use crate::types::{
    BLOCKSIEVE_SEED_BYTES, blocksieve_agent, blocksieve_config, blocksieve_header, blocksieve_list_status,
    blocksieve_query, blocksieve_request, blocksieve_saved, blocksieve_session, blocksieve_session_config,
    blocksieve_session_stats, blocksieve_snapshot_info, blocksieve_status, blocksieve_update_result,
    blocksieve_verdict,
};

/// Runs the body of an entry point: a panic is stopped here and becomes
/// `BLOCKSIEVE_PANIC`, and the outcome is recorded as this thread's last
/// error.
fn entry(body: impl FnOnce() -> Result<(), Failure>) -> blocksieve_status {
    let outcome = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(outcome) => outcome,
        Err(payload) => Err(Failure::new(
            blocksieve_status::BLOCKSIEVE_PANIC,
            failure::panic_message(&*payload),
        )),
    };
    failure::record(outcome)
}

/// Checks that an out-pointer is non-NULL and aligned for `T`.
fn out_ptr<T>(ptr: *mut T, what: &str) -> Result<*mut T, Failure> {
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    if !ptr.is_aligned() {
        return Err(Failure::argument(format!("{what} is not aligned")));
    }
    Ok(ptr)
}

/// The caller's `len` bytes at `ptr`.
///
/// # Safety
///
/// Unless NULL, `ptr` must point to `len` readable bytes that stay valid and
/// unchanged for `'a`.
unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    if isize::try_from(len).is_err() {
        return Err(Failure::argument(format!("{what} length {len} is too large")));
    }
    // SAFETY: non-NULL (checked), `u8` needs no alignment, `len` fits in
    // `isize` (checked), and the caller guarantees `len` readable bytes
    // valid for `'a`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The caller's URL, `len` bytes at `ptr`: UTF-8 as it is, else each byte
/// that is not part of valid UTF-8 percent-escaped
/// ([`blocksieve_format::url_text`]), as the canonicalizer escapes a raw
/// byte: a URL in Latin-1 bytes (as a proxy may see a request line) is
/// checked as a browser would send it, never refused.
///
/// # Safety
///
/// As for [`bytes`].
unsafe fn url_arg<'a>(ptr: *const c_char, len: usize) -> Result<std::borrow::Cow<'a, str>, Failure> {
    // SAFETY: the caller's guarantee, passed on.
    let raw = unsafe { bytes(ptr.cast::<u8>(), len, "url") }?;
    // Refused at its own length before any escaping: a byte that is not
    // UTF-8 is three once escaped, and the text is refused past the limit
    // anyway.
    if raw.len() > blocksieve_format::MAX_URL_BYTES {
        return Err(blocksieve_format::CanonError::TooLong {
            len: raw.len(),
            max: blocksieve_format::MAX_URL_BYTES,
        }
        .into());
    }
    Ok(blocksieve_format::url_text(raw))
}

/// The caller's NUL-terminated UTF-8 string at `ptr`.
///
/// # Safety
///
/// Unless NULL, `ptr` must point to a NUL-terminated string that stays
/// valid and unchanged for `'a`.
unsafe fn c_str<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL (checked); the caller guarantees a NUL-terminated
    // string valid for `'a`.
    let raw = unsafe { CStr::from_ptr(ptr) };
    raw.to_str().map_err(|e| {
        Failure::argument(format!(
            "{what} is not utf-8: invalid byte at offset {}",
            e.valid_up_to()
        ))
    })
}

/// The caller's NUL-terminated text at `ptr`, for a diagnostic such as a
/// failure's reason: UTF-8, any other byte read as U+FFFD (a host's
/// `strerror` in a locale's encoding is still a reason, and the failure it
/// reports is recorded).
///
/// # Safety
///
/// Unless NULL, `ptr` must be a NUL-terminated string, valid and
/// unchanged for `'a`.
unsafe fn c_text<'a>(ptr: *const c_char, what: &str) -> Result<std::borrow::Cow<'a, str>, Failure> {
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL (checked); the caller guarantees a NUL-terminated
    // string valid for `'a`.
    Ok(unsafe { CStr::from_ptr(ptr) }.to_string_lossy())
}

/// The caller's array of `len` NUL-terminated UTF-8 strings at `ptr`
/// (which may be NULL when `len` is 0).
///
/// # Safety
///
/// Unless NULL, `ptr` must point to `len` pointers, each of which is NULL
/// or a NUL-terminated string, all valid and unchanged for `'a`.
unsafe fn c_str_array<'a>(
    ptr: *const *const c_char,
    len: usize,
    what: &str,
) -> Result<Vec<&'a str>, Failure> {
    if len == 0 {
        return Ok(Vec::new());
    }
    if ptr.is_null() {
        return Err(Failure::argument(format!(
            "{what} is NULL but its length is {len}"
        )));
    }
    if !ptr.is_aligned() {
        return Err(Failure::argument(format!("{what} is not aligned")));
    }
    if len > isize::MAX as usize / size_of::<*const c_char>() {
        return Err(Failure::argument(format!("{what} length {len} is too large")));
    }
    // SAFETY: non-NULL and aligned (checked), `len` pointers fit in `isize`
    // bytes (checked), and the caller guarantees `len` readable pointers
    // valid for `'a`.
    let items = unsafe { std::slice::from_raw_parts(ptr, len) };
    items
        .iter()
        .enumerate()
        // SAFETY: the caller guarantees each pointer is NULL (rejected by
        // `c_str`) or a NUL-terminated string valid for `'a`.
        .map(|(i, &item)| unsafe { c_str(item, &format!("{what}[{i}]")) })
        .collect()
}

/// A checked `*const blocksieve_agent` as the handle it owns.
///
/// # Safety
///
/// Unless NULL, `agent` must come from `blocksieve_agent_new` and not have
/// been freed, and must not be freed while `'a` lasts.
unsafe fn handle<'a>(agent: *const blocksieve_agent) -> Result<&'a Handle, Failure> {
    if agent.is_null() {
        return Err(Failure::argument("agent is NULL"));
    }
    if !agent.is_aligned() {
        return Err(Failure::argument("agent is not aligned"));
    }
    // SAFETY: non-NULL and aligned (checked); the caller guarantees a live
    // handle from `blocksieve_agent_new` (a `Box<blocksieve_agent>`), which
    // only `blocksieve_agent_free` releases.
    Ok(unsafe { &(*agent).inner })
}

/// Where the text of an output goes: a buffer of `capacity` bytes (NULL
/// only with capacity 0) and the length out-parameter.
struct TextOut {
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
    what: &'static str,
}

impl TextOut {
    /// Checks the pointers before any work is done.
    fn new(buf: *mut c_char, capacity: usize, len: *mut usize, what: &'static str) -> Result<Self, Failure> {
        if buf.is_null() && capacity != 0 {
            return Err(Failure::argument(format!(
                "{what} buffer is NULL but its capacity is {capacity}"
            )));
        }
        out_ptr(len, "length out-parameter")?;
        Ok(Self {
            buf,
            capacity,
            len,
            what,
        })
    }

    /// Writes `text` and a NUL if they fit (else an empty string, if one
    /// fits), and the length of `text` to the length out-parameter.
    ///
    /// # Safety
    ///
    /// Unless NULL, `buf` must point to `capacity` writable bytes, and `len`
    /// (checked by [`TextOut::new`]) to a writable `size_t`.
    unsafe fn write(&self, text: &str) -> Result<(), Failure> {
        // SAFETY: non-NULL and aligned (checked in `new`), writable by the
        // caller's guarantee.
        unsafe { self.len.write(text.len()) };
        // SAFETY: the caller's guarantee, passed on.
        unsafe { write_text(self.buf, self.capacity, text, self.what) }
    }
}

/// Writes `text` and a NUL into the buffer if they fit.
///
/// # Safety
///
/// Unless NULL, `buf` must point to `capacity` writable bytes.
unsafe fn write_text(buf: *mut c_char, capacity: usize, text: &str, what: &str) -> Result<(), Failure> {
    let needed = text.len() + 1;
    if buf.is_null() || capacity < needed {
        if !buf.is_null() && capacity > 0 {
            // SAFETY: `capacity > 0` writable bytes at `buf`.
            unsafe { buf.write(0) };
        }
        return Err(Failure::too_small(what, capacity, needed));
    }
    // SAFETY: `needed <= capacity` writable bytes at `buf`, which cannot
    // overlap `text` (Rust-owned memory).
    unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len()) };
    // SAFETY: `text.len() < needed <= capacity`, within the buffer.
    unsafe { buf.wrapping_add(text.len()).write(0) };
    Ok(())
}

/// Where a verdict goes: the struct and the buffers of its two texts
/// (either NULL with capacity 0 when the caller does not want it).
struct VerdictOut {
    verdict: *mut blocksieve_verdict,
    list: *mut c_char,
    list_capacity: usize,
    expression: *mut c_char,
    expression_capacity: usize,
}

/// Writes the placeholder ([`blocksieve_verdict::PLACEHOLDER`]) to
/// `verdict` when it is a usable pointer: the first thing a check does,
/// before reading its other arguments, so that a check refusing any of them
/// (a NULL handle, URL, seed or query) leaves
/// "unverified, block" there, never the "safe" of a zeroed struct.
///
/// # Safety
///
/// `verdict`, unless NULL, must be writable.
unsafe fn placeholder(verdict: *mut blocksieve_verdict) {
    if let Ok(verdict) = out_ptr(verdict, "out_verdict") {
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { verdict.write(blocksieve_verdict::PLACEHOLDER) };
    }
}

impl VerdictOut {
    /// Checks the pointers before any work is done, then writes the
    /// placeholder ([`blocksieve_verdict::PLACEHOLDER`]: unverified, to
    /// block) that `*verdict` holds until a verdict replaces it: a caller
    /// that reads it after another status (a query to send, an error) never
    /// reads "safe" from a zeroed struct.
    ///
    /// # Safety
    ///
    /// `verdict`, unless NULL, must be writable.
    unsafe fn new(
        verdict: *mut blocksieve_verdict,
        list: *mut c_char,
        list_capacity: usize,
        expression: *mut c_char,
        expression_capacity: usize,
    ) -> Result<Self, Failure> {
        let verdict = out_ptr(verdict, "out_verdict")?;
        if list.is_null() && list_capacity != 0 {
            return Err(Failure::argument(format!(
                "list buffer is NULL but its capacity is {list_capacity}"
            )));
        }
        if expression.is_null() && expression_capacity != 0 {
            return Err(Failure::argument(format!(
                "expression buffer is NULL but its capacity is {expression_capacity}"
            )));
        }
        // SAFETY: non-NULL and aligned (checked above), writable by the
        // caller's guarantee.
        unsafe { verdict.write(blocksieve_verdict::PLACEHOLDER) };
        Ok(Self {
            verdict,
            list,
            list_capacity,
            expression,
            expression_capacity,
        })
    }

    /// Writes the verdict, then each wanted text, cut to its buffer as
    /// `snprintf` cuts (see [`write_cut`]). Cannot fail: a verdict written
    /// is `BLOCKSIEVE_OK`, so that a caller acting only on that status never
    /// passes over an unsafe verdict because its expression was long.
    ///
    /// # Safety
    ///
    /// `verdict` (checked by [`VerdictOut::new`]) must be writable, and the
    /// text buffers, unless NULL, writable for their capacities.
    unsafe fn write(&self, answer: &CheckAnswer) -> Result<(), Failure> {
        // SAFETY: non-NULL and aligned (checked in `new`), writable by the
        // caller's guarantee; `write` reads nothing of the old contents.
        unsafe { self.verdict.write(answer.verdict) };
        // SAFETY: unless NULL, `list_capacity` writable bytes by the
        // caller's guarantee.
        unsafe { write_cut(self.list, self.list_capacity, &answer.list) };
        // SAFETY: as above, for `expression`.
        unsafe { write_cut(self.expression, self.expression_capacity, &answer.expression) };
        Ok(())
    }
}

/// Writes as much of `text` as fits in `capacity - 1` bytes, cut at a
/// character boundary, and a NUL, as `snprintf` does: a verdict's texts,
/// whose full lengths the verdict reports (`list_len`, `expression_len`),
/// so a text was cut exactly when its length is at least the capacity.
/// Nothing is written to a NULL buffer or one of capacity 0.
///
/// # Safety
///
/// Unless NULL, `buf` must point to `capacity` writable bytes.
unsafe fn write_cut(buf: *mut c_char, capacity: usize, text: &str) {
    if buf.is_null() || capacity == 0 {
        return;
    }
    let mut len = text.len().min(capacity - 1);
    while !text.is_char_boundary(len) {
        len -= 1;
    }
    // SAFETY: `len < capacity` writable bytes at `buf`, which cannot overlap
    // `text` (Rust-owned memory).
    unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), len) };
    // SAFETY: `len < capacity`, within the buffer.
    unsafe { buf.wrapping_add(len).write(0) };
}

/// Writes a text result of a sans-I/O function.
///
/// # Safety
///
/// As for [`TextOut::write`].
unsafe fn text_result(
    url: *const c_char,
    url_len: usize,
    out: *mut c_char,
    out_capacity: usize,
    out_len: *mut usize,
    what: &'static str,
    f: fn(&str) -> Result<String, Failure>,
) -> Result<(), Failure> {
    // SAFETY: the caller's guarantee on `url`, passed on.
    let url = unsafe { url_arg(url, url_len) }?;
    let out = TextOut::new(out, out_capacity, out_len, what)?;
    let result = f(&url)?;
    // SAFETY: the caller's guarantee on the buffers, passed on.
    unsafe { out.write(&result) }
}

/// Writes the Safe Browsing canonical form of a URL (e.g.
/// `http://evil.example/login` for `HTTP://EVIL.example:80/a/../login#x`)
/// into `out` as NUL-terminated text.
///
/// `url`: `url_len` bytes, not NUL-terminated (a NUL byte is part of the
/// URL); UTF-8, or any bytes: one that is not UTF-8 is read as its
/// percent-escape, as the canonicalizer reads a raw byte (Latin-1 `caf\xe9`
/// is `caf%E9`). `out`: `out_capacity` bytes; NULL with capacity 0 only asks
/// for the length. `*out_len` receives the length of the canonical URL in
/// bytes, without the NUL, whenever the status is `BLOCKSIEVE_OK` or
/// `BLOCKSIEVE_BUFFER_TOO_SMALL`; the buffer needs `*out_len + 1` bytes.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_INVALID_URL` (no host, or over 2 MiB),
/// `BLOCKSIEVE_BUFFER_TOO_SMALL`, or `BLOCKSIEVE_INVALID_ARGUMENT` (NULL
/// `url` or `out_len`, NULL `out` with a capacity).
///
/// Thread-safety: any thread, concurrently; no I/O, no shared state.
///
/// # Safety
///
/// Pointers that are not NULL must be valid for the lengths given.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_canonicalize(
    url: *const c_char,
    url_len: usize,
    out: *mut c_char,
    out_capacity: usize,
    out_len: *mut usize,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee, passed on.
        unsafe {
            text_result(
                url,
                url_len,
                out,
                out_capacity,
                out_len,
                "canonical url",
                crate::sansio::canonical,
            )
        }
    })
}

/// Writes the host-suffix/path-prefix expressions of a URL (Safe Browsing
/// "Suffix/Prefix Expressions"; at most 30, exact URL first, e.g.
/// `a.b.c/1/2.html?param=1`, `a.b.c/1/2.html`, `a.b.c/`, `a.b.c/1/`,
/// `b.c/1/2.html?param=1`, ...) into `out`, each followed by `\n`, as one
/// NUL-terminated text.
///
/// Arguments, lengths and statuses as for `blocksieve_canonicalize`.
///
/// Thread-safety: any thread, concurrently; no I/O, no shared state.
///
/// # Safety
///
/// Pointers that are not NULL must be valid for the lengths given.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_expressions(
    url: *const c_char,
    url_len: usize,
    out: *mut c_char,
    out_capacity: usize,
    out_len: *mut usize,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee, passed on.
        unsafe {
            text_result(
                url,
                url_len,
                out,
                out_capacity,
                out_len,
                "expressions",
                crate::sansio::expressions,
            )
        }
    })
}

/// Writes the full hashes (SHA-256, 32 bytes each) of a URL's expressions,
/// in the order of `blocksieve_expressions`, one after another into `out`.
///
/// `url`: `url_len` bytes, read as by `blocksieve_canonicalize`. `out`:
/// `out_capacity` bytes; NULL with capacity 0 only asks for the length. `*out_len` receives the length of
/// the hashes in bytes (32 × the number of expressions, at most 960)
/// whenever the status is `BLOCKSIEVE_OK` or `BLOCKSIEVE_BUFFER_TOO_SMALL`.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_INVALID_URL`,
/// `BLOCKSIEVE_BUFFER_TOO_SMALL` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread, concurrently; no I/O, no shared state.
///
/// # Safety
///
/// Pointers that are not NULL must be valid for the lengths given.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_full_hashes(
    url: *const c_char,
    url_len: usize,
    out: *mut u8,
    out_capacity: usize,
    out_len: *mut usize,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee on `url`, passed on.
        let url = unsafe { url_arg(url, url_len) }?;
        if out.is_null() && out_capacity != 0 {
            return Err(Failure::argument(format!(
                "full hashes buffer is NULL but its capacity is {out_capacity}"
            )));
        }
        let out_len = out_ptr(out_len, "length out-parameter")?;
        let hashes = crate::sansio::full_hashes(&url)?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_len.write(hashes.len()) };
        if out_capacity < hashes.len() {
            return Err(Failure::too_small("full hashes", out_capacity, hashes.len()));
        }
        if !hashes.is_empty() {
            // SAFETY: `out` is non-NULL (a capacity > 0 requires it) with
            // `out_capacity >= hashes.len()` writable bytes by the caller's
            // guarantee, not overlapping Rust-owned `hashes`.
            unsafe { std::ptr::copy_nonoverlapping(hashes.as_ptr(), out, hashes.len()) };
        }
        Ok(())
    })
}

/// Verifies a snapshot the host downloaded itself (`GET
/// /v1/lists/{name}/snapshot`): its Ed25519 signature by one of the
/// trusted keys, body hash, layout, size limits (256 MiB), and expiry at
/// `now_unix_seconds` (Unix seconds: the library reads no clock). On
/// success `*out_info` receives the signed header's list name, version,
/// times and entry counts.
///
/// `snapshot`: `snapshot_len` bytes. `trusted_keys`: `trusted_keys_len`
/// NUL-terminated public keys, base64 or hex (at least one).
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_BAD_DATA` (the snapshot failed a
/// check, the last error names the first one: bad signature, unknown key,
/// expired, truncated...), `BLOCKSIEVE_MISCONFIGURED` (no key, or a key that
/// is not base64 or hex of a valid Ed25519 public key), or
/// `BLOCKSIEVE_INVALID_ARGUMENT` (a NULL or misaligned pointer, a key not
/// UTF-8).
///
/// Thread-safety: any thread, concurrently; no I/O, no shared state.
///
/// # Safety
///
/// Pointers that are not NULL must be valid for the lengths given; each
/// key a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_snapshot_verify(
    snapshot: *const u8,
    snapshot_len: usize,
    trusted_keys: *const *const c_char,
    trusted_keys_len: usize,
    now_unix_seconds: u64,
    out_info: *mut blocksieve_snapshot_info,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee on `snapshot`, passed on.
        let snapshot = unsafe { bytes(snapshot, snapshot_len, "snapshot") }?;
        // SAFETY: the caller's guarantee on `trusted_keys`, passed on.
        let keys = unsafe { c_str_array(trusted_keys, trusted_keys_len, "trusted_keys") }?;
        let out_info = out_ptr(out_info, "out_info")?;
        let info = crate::sansio::verify_snapshot(snapshot, &keys, now_unix_seconds)?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee; `write` reads nothing of the old contents.
        unsafe { out_info.write(info) };
        Ok(())
    })
}

/// Writes the message of the last call on this thread that failed, as
/// NUL-terminated text (lowercase, naming the offending value, e.g.
/// `invalid url: URL has an empty host`), or an empty string if the last
/// call succeeded. Every other function sets it (clears it on success);
/// this one leaves it as it is.
///
/// `out`: `out_capacity` bytes; NULL with capacity 0 only asks for the
/// length. `*out_len` receives the message length without the NUL.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_BUFFER_TOO_SMALL` or
/// `BLOCKSIEVE_INVALID_ARGUMENT` (NULL `out_len`, NULL `out` with a
/// capacity).
///
/// Thread-safety: any thread; each thread has its own last error.
///
/// # Safety
///
/// Pointers that are not NULL must be valid for the lengths given.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_last_error(
    out: *mut c_char,
    out_capacity: usize,
    out_len: *mut usize,
) -> blocksieve_status {
    let written = catch_unwind(AssertUnwindSafe(|| {
        let out = TextOut::new(out, out_capacity, out_len, "last error")?;
        // SAFETY: the caller's guarantee on the buffers, passed on.
        unsafe { out.write(&failure::last_error()) }
    }));
    match written {
        Ok(Ok(())) => blocksieve_status::BLOCKSIEVE_OK,
        Ok(Err(f)) => f.status,
        Err(_) => blocksieve_status::BLOCKSIEVE_PANIC,
    }
}

/// Creates an agent for the threat lists and publisher of `*config`, and
/// the runtime (one worker thread) that runs its requests. No request is
/// sent: call `blocksieve_agent_update` (or `blocksieve_agent_start_updates`)
/// to download the first snapshots. With a cache directory, the snapshots
/// cached there are read and verified here (blocking file I/O), so checks
/// answer at once.
///
/// On `BLOCKSIEVE_OK`, `*out_agent` receives the handle, owned by the
/// caller until `blocksieve_agent_free`; on any other status, NULL.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_MISCONFIGURED` (an invalid base URL,
/// list name, key, cache directory, failure policy or interval; no list or
/// no key; a cache directory another agent holds, of this process or
/// another), `BLOCKSIEVE_INVALID_ARGUMENT` (NULL `config`, `out_agent` or
/// required string, a string not UTF-8), `BLOCKSIEVE_STORAGE`, or
/// `BLOCKSIEVE_INTERNAL` (the runtime could not start).
///
/// Thread-safety: any thread. The strings of `config` are only read during
/// the call.
///
/// # Safety
///
/// `config` must be NULL or point to a `blocksieve_config` whose pointers
/// are NULL or valid for the lengths given; `out_agent` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_agent_new(
    config: *const blocksieve_config,
    out_agent: *mut *mut blocksieve_agent,
) -> blocksieve_status {
    entry(|| {
        let out_agent = out_ptr(out_agent, "out_agent")?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee. Written first so that every failure leaves NULL.
        unsafe { out_agent.write(std::ptr::null_mut()) };
        let config = out_ptr(config.cast_mut(), "config")?;
        // SAFETY: non-NULL and aligned (checked), readable by the caller's
        // guarantee; `blocksieve_config` is plain data (`Copy`).
        let config = unsafe { config.read() };
        // SAFETY: the caller's guarantee on the strings, passed on.
        let base_url = unsafe { c_str(config.base_url, "config.base_url") }?;
        // SAFETY: as above.
        let lists = unsafe { c_str_array(config.lists, config.lists_len, "config.lists") }?;
        // SAFETY: as above.
        let trusted_keys = unsafe {
            c_str_array(
                config.trusted_keys,
                config.trusted_keys_len,
                "config.trusted_keys",
            )
        }?;
        let cache_dir = if config.cache_dir.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { c_str(config.cache_dir, "config.cache_dir") }?)
        };
        let settings = Settings {
            base_url,
            lists,
            trusted_keys,
            cache_dir,
            failure_policy: config.failure_policy,
            update_interval_seconds: config.update_interval_seconds,
            request_timeout_ms: config.request_timeout_ms,
            snapshot_timeout_ms: config.snapshot_timeout_ms,
        };
        let handle = Box::new(blocksieve_agent {
            inner: Handle::new(&settings)?,
        });
        // SAFETY: as the first write.
        unsafe { out_agent.write(Box::into_raw(handle)) };
        Ok(())
    })
}

/// Stops the agent's background updates (waiting until they have), stops
/// its runtime and releases the handle and everything it owns. NULL is
/// accepted and does nothing.
///
/// Returns `BLOCKSIEVE_OK` (or `BLOCKSIEVE_PANIC`; the handle is gone
/// either way). In a child of `fork()`, a handle its parent made is
/// released without waiting for anything (its runtime's thread is not in
/// the child): the call returns, and the child's copy of its memory is left.
///
/// Thread-safety: any thread, but only once no other call on this handle
/// is running or will start; the handle is invalid afterwards.
///
/// # Safety
///
/// `agent` must be NULL or a handle from `blocksieve_agent_new` not yet
/// freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_agent_free(agent: *mut blocksieve_agent) -> blocksieve_status {
    entry(|| {
        if agent.is_null() {
            return Ok(());
        }
        if !agent.is_aligned() {
            return Err(Failure::argument("agent is not aligned"));
        }
        // SAFETY: the caller guarantees a live handle from
        // `blocksieve_agent_new`, i.e. `Box::into_raw` of a
        // `Box<blocksieve_agent>`, freed only here and only once.
        let agent = unsafe { Box::from_raw(agent) };
        if agent.inner.inherited() {
            // A child of fork() freeing its parent's handle: stopping the
            // runtime would wait forever for a thread that is not in this
            // process, and its sockets and I/O driver are the parent's
            // too. Its memory is left as it is.
            std::mem::forget(agent);
            return Ok(());
        }
        drop(agent);
        Ok(())
    })
}

/// Runs one update round of every threat list now and waits for it:
/// follows the signed deltas from the version held, or downloads and
/// verifies the whole snapshot, and swaps in what verified. Blocks for up
/// to the request timeouts (10 s per request, 5 minutes per snapshot).
///
/// Returns `BLOCKSIEVE_OK` when every list has a snapshot afterwards (some
/// updates may still have failed: see `blocksieve_agent_status`);
/// otherwise the status of the first list still without one:
/// `BLOCKSIEVE_TRANSPORT`, `BLOCKSIEVE_BAD_DATA`, `BLOCKSIEVE_STORAGE`;
/// `BLOCKSIEVE_INVALID_ARGUMENT` for a NULL handle; `BLOCKSIEVE_INTERNAL`
/// in a child of `fork()` calling a handle its parent made (the handle's
/// runtime thread is not in the child: create agents after forking).
///
/// Thread-safety: any thread, concurrently with the other calls on this
/// handle but `blocksieve_agent_free`; updates are serialised, checks do
/// not wait for them (but for a check refused as `prefix_too_short`, see
/// `blocksieve_agent_check`).
///
/// # Safety
///
/// `agent` must be NULL or a live handle from `blocksieve_agent_new`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_agent_update(agent: *const blocksieve_agent) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { handle(agent) }?;
        handle.update()
    })
}

/// Checks a URL against every subscribed threat list: its expressions'
/// hash prefixes are probed in the local filters, and a hit is confirmed
/// with the publisher's full hashes (`POST /v1/hashes:search`, cached for
/// the cache duration). A prefix hit alone is never `BLOCKSIEVE_UNSAFE`.
/// Blocks only when a hit needs a request (up to the request timeout, 10 s
/// by default); when the publisher refuses it as `prefix_too_short` (the
/// list grew past the request prefix length of the snapshot held), also
/// for an update round (waited for up to the request timeout) and the
/// request again.
///
/// `url`: `url_len` bytes, read as by `blocksieve_canonicalize` (a byte
/// that is not UTF-8 as its percent-escape). `*out_verdict` receives the verdict
/// (kind, stale, block, full hash, text lengths) whenever the status is
/// `BLOCKSIEVE_OK`, and otherwise (any other status, a refused argument
/// included) the placeholder (`BLOCKSIEVE_UNVERIFIED`, `block` true: see
/// `blocksieve_verdict`). `list` and `expression`: buffers of
/// `list_capacity` and `expression_capacity` bytes for the texts of
/// `blocksieve_verdict`, written NUL-terminated and, when longer, cut to
/// the buffer as `snprintf` cuts (at a character boundary): a text was cut
/// when its length in the verdict is at least its buffer's capacity. Either
/// may be NULL with capacity 0 when the caller does not want that text (its
/// length is still reported). A text that does not fit never changes the
/// status: the verdict stands.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_INVALID_URL` (the URL names no
/// host, or is over 2 MiB), `BLOCKSIEVE_NOT_READY` (a list has no snapshot yet, and the
/// lists that have one do not confirm the URL unsafe),
/// `BLOCKSIEVE_INVALID_ARGUMENT`, or `BLOCKSIEVE_INTERNAL` in a child of
/// `fork()` calling a handle its parent made (at once: create agents after
/// forking). A failed full-hash request is not an error but a
/// `BLOCKSIEVE_UNVERIFIED` verdict.
///
/// Thread-safety: any thread, concurrently with every other call on this
/// handle but `blocksieve_agent_free`.
///
/// # Safety
///
/// `agent` must be NULL or a live handle; other pointers that are not NULL
/// must be valid for the lengths given.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_agent_check(
    agent: *const blocksieve_agent,
    url: *const c_char,
    url_len: usize,
    out_verdict: *mut blocksieve_verdict,
    list: *mut c_char,
    list_capacity: usize,
    expression: *mut c_char,
    expression_capacity: usize,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee on `out_verdict`, passed on.
        unsafe { placeholder(out_verdict) };
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { handle(agent) }?;
        // SAFETY: the caller's guarantee on `url`, passed on.
        let url = unsafe { url_arg(url, url_len) }?;
        // SAFETY: the caller's guarantee on `out_verdict`, passed on.
        let out =
            unsafe { VerdictOut::new(out_verdict, list, list_capacity, expression, expression_capacity) }?;
        let answer = handle.check(&url)?;
        // SAFETY: the caller's guarantee on the buffers, passed on.
        unsafe { out.write(&answer) }
    })
}

/// Starts the background updates on the agent's worker thread: every list
/// is checked on the publisher's schedule (its next-check hint, else
/// `update_interval_seconds`), with exponential backoff after failures,
/// until `blocksieve_agent_stop_updates` or `blocksieve_agent_free`.
/// Returns at once.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_MISCONFIGURED` (already running),
/// `BLOCKSIEVE_INVALID_ARGUMENT`, or `BLOCKSIEVE_INTERNAL` in a child of
/// `fork()` calling a handle its parent made (no update would ever run).
///
/// Thread-safety: any thread, concurrently with every other call on this
/// handle but `blocksieve_agent_free`.
///
/// # Safety
///
/// `agent` must be NULL or a live handle from `blocksieve_agent_new`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_agent_start_updates(agent: *const blocksieve_agent) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { handle(agent) }?;
        handle.start_updates()
    })
}

/// Stops the background updates, if running, and waits until they have
/// (abandoning a download in progress). Checks keep answering from the
/// snapshots held; updates can be started again.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_INVALID_ARGUMENT`, or
/// `BLOCKSIEVE_INTERNAL` in a child of `fork()` calling a handle its parent
/// made.
///
/// Thread-safety: any thread, concurrently with every other call on this
/// handle but `blocksieve_agent_free`.
///
/// # Safety
///
/// `agent` must be NULL or a live handle from `blocksieve_agent_new`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_agent_stop_updates(agent: *const blocksieve_agent) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { handle(agent) }?;
        handle.stop_updates()
    })
}

/// Writes the state of every subscribed threat list, in subscription order,
/// into `out`: its version, times, staleness and update failures.
///
/// `out`: room for `capacity` entries; NULL with capacity 0 only asks for
/// the count. `*out_count` receives the number of lists whenever the
/// status is `BLOCKSIEVE_OK` or `BLOCKSIEVE_BUFFER_TOO_SMALL`.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_BUFFER_TOO_SMALL` or
/// `BLOCKSIEVE_INVALID_ARGUMENT`. Never blocks on an update.
///
/// Thread-safety: any thread, concurrently with every other call on this
/// handle but `blocksieve_agent_free`.
///
/// # Safety
///
/// `agent` must be NULL or a live handle; `out` NULL or valid for
/// `capacity` entries; `out_count` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_agent_status(
    agent: *const blocksieve_agent,
    out: *mut blocksieve_list_status,
    capacity: usize,
    out_count: *mut usize,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { handle(agent) }?;
        if out.is_null() && capacity != 0 {
            return Err(Failure::argument(format!(
                "status buffer is NULL but its capacity is {capacity}"
            )));
        }
        if !out.is_aligned() {
            return Err(Failure::argument("status buffer is not aligned"));
        }
        let out_count = out_ptr(out_count, "out_count")?;
        let lists = handle.status();
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_count.write(lists.len()) };
        if capacity < lists.len() {
            return Err(Failure::new(
                blocksieve_status::BLOCKSIEVE_BUFFER_TOO_SMALL,
                format!("status buffer holds {capacity} entries, {} needed", lists.len()),
            ));
        }
        for (i, list) in lists.into_iter().enumerate() {
            // SAFETY: `out` is non-NULL and aligned (a capacity > 0 requires
            // it, checked), and `i < lists.len() <= capacity` entries are
            // writable by the caller's guarantee.
            unsafe { out.wrapping_add(i).write(list) };
        }
        Ok(())
    })
}

// --- The sans-I/O session: handles the library hands out and takes back. ---

/// The kinds of handle of the session API, for [`LIVE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Session,
    /// A request the caller frees with `blocksieve_request_free`.
    Request,
    /// The request inside a query, lent by `blocksieve_query_request`.
    QueryRequest,
    Query,
    /// What `blocksieve_session_save` gives, freed with
    /// `blocksieve_saved_free`.
    Saved,
}

/// The session API's live handles. The caller never holds an address:
/// each handle is a token (a multiple of 16, never 0), drawn once and never
/// again, mapped here to its allocation's address by kind. A pointer is
/// dereferenced only through its entry, so a handle that was freed or
/// consumed, one of another kind, or a value the library never gave out is
/// refused with `BLOCKSIEVE_INVALID_ARGUMENT` instead of being read — also
/// once the allocator has given a freed handle's memory to a newer one,
/// whose token is another (by address, a stale pointer was the newer
/// handle, and freeing it freed that).
struct Live {
    /// The next token, over [`TOKEN_STEP`].
    next: usize,
    /// `(token, kind)` to the handle's address, exposed
    /// ([`std::ptr::with_exposed_provenance_mut`]), and for a query its
    /// lent request's token.
    handles: BTreeMap<(usize, Kind), (usize, usize)>,
}

/// Tokens are multiples of this, so that a token is as aligned as any
/// handle's type (checked by `is_aligned`, as an address was).
const TOKEN_STEP: usize = 16;

static LIVE: Mutex<Live> = Mutex::new(Live {
    next: 1,
    handles: BTreeMap::new(),
});

fn live_handles() -> std::sync::MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Live {
    /// Lists `ptr` as a handle of `kind` under a new token, which it
    /// returns (lending, for a query, the request token `lent`).
    fn insert<T>(&mut self, ptr: *mut T, kind: Kind, lent: usize) -> *mut T {
        let token = loop {
            // Past the last multiple of 16 (2^28 handles on a 32-bit
            // host), tokens start again, passing over those still live.
            let token = self.next.checked_mul(TOKEN_STEP);
            self.next = token.map_or(1, |_| self.next + 1);
            if let Some(token) = token
                && !self.handles.contains_key(&(token, kind))
            {
                break token;
            }
        };
        self.handles
            .insert((token, kind), (ptr.expose_provenance(), lent));
        std::ptr::without_provenance_mut(token)
    }

    /// The address of the live handle `token` of one of `kinds`.
    fn get<T>(&self, token: *const T, kinds: &[Kind]) -> Option<*mut T> {
        kinds.iter().find_map(|&kind| {
            let &(address, _) = self.handles.get(&(token.addr(), kind))?;
            Some(std::ptr::with_exposed_provenance_mut(address))
        })
    }

    /// Unlists the handle `token` of `kind`: its address and lent token.
    fn remove<T>(&mut self, token: *const T, kind: Kind) -> Option<(*mut T, usize)> {
        let (address, lent) = self.handles.remove(&(token.addr(), kind))?;
        Some((std::ptr::with_exposed_provenance_mut(address), lent))
    }
}

/// Hands `value` to the caller as a token listed in [`LIVE`].
fn give<T>(value: Box<T>, kind: Kind) -> *mut T {
    live_handles().insert(Box::into_raw(value), kind, 0)
}

/// Why `ptr` is refused before the registry is asked: NULL, or not a
/// token's alignment.
fn check_token<T>(ptr: *const T, what: &str) -> Result<(), Failure> {
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    if !ptr.addr().is_multiple_of(TOKEN_STEP) {
        return Err(Failure::argument(format!("{what} is not aligned")));
    }
    Ok(())
}

fn not_live(what: &str) -> Failure {
    Failure::argument(format!(
        "{what} is not a live handle (already freed or consumed, or not one of this kind)"
    ))
}

/// The address of the live handle `ptr` of one of `kinds`.
fn check_live<T>(ptr: *const T, kinds: &[Kind], what: &str) -> Result<*mut T, Failure> {
    check_token(ptr, what)?;
    live_handles().get(ptr, kinds).ok_or_else(|| not_live(what))
}

/// Unlists the live handle `ptr` of `kind`, and gives back its box.
///
/// # Safety
///
/// `T` must be the type `kind`'s handles were given out as, by [`give`].
unsafe fn take_back<T>(ptr: *const T, kind: Kind, what: &str) -> Result<Box<T>, Failure> {
    check_token(ptr, what)?;
    let (address, _) = live_handles().remove(ptr, kind).ok_or_else(|| not_live(what))?;
    // SAFETY: a `Box<T>` given out by `give`, unlisted just now under the
    // lock, so taken back only here, once.
    Ok(unsafe { Box::from_raw(address) })
}

/// A checked `*const blocksieve_session` as the handle it owns.
///
/// # Safety
///
/// Unless refused, `session` must not be freed while `'a` lasts.
unsafe fn session_handle<'a>(
    session: *const blocksieve_session,
) -> Result<&'a crate::session::Handle, Failure> {
    let session = check_live(session, &[Kind::Session], "session")?;
    // SAFETY: listed in `LIVE`, so a `Box<blocksieve_session>` given out by
    // `blocksieve_session_new` and not yet freed; the caller does not free
    // it during the call.
    Ok(unsafe { &(*session).inner })
}

/// A checked `*const blocksieve_request` as the request it holds.
///
/// # Safety
///
/// Unless refused, `request` (or the query lending it) must not be freed
/// while `'a` lasts.
unsafe fn request_handle<'a>(request: *const blocksieve_request) -> Result<&'a Request, Failure> {
    let request = check_live(request, &[Kind::Request, Kind::QueryRequest], "request")?;
    // SAFETY: listed in `LIVE`: a `Box<blocksieve_request>` not yet freed,
    // or the request field of a live `Box<blocksieve_query>`; the caller
    // frees neither during the call.
    Ok(unsafe { &(*request).inner })
}

/// Takes back a query handed out by `blocksieve_session_check`: it is no
/// longer live, nor its lent request, whatever the caller does next.
///
/// # Safety
///
/// Unless refused, no other call may be using `query`.
unsafe fn take_query(query: *mut blocksieve_query) -> Result<Box<blocksieve_query>, Failure> {
    check_token(query, "query")?;
    let address = {
        let mut live = live_handles();
        let (address, lent) = live.remove(query, Kind::Query).ok_or_else(|| not_live("query"))?;
        live.handles.remove(&(lent, Kind::QueryRequest));
        address
    };
    // SAFETY: a `Box<blocksieve_query>` listed by `blocksieve_session_check`,
    // unlisted above under the lock, so taken back only here, once.
    Ok(unsafe { Box::from_raw(address) })
}

/// The caller's `len` bytes at `ptr`, which may be NULL when `len` is 0.
///
/// # Safety
///
/// As for [`bytes`].
unsafe fn optional_bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: the caller's guarantee, passed on.
    unsafe { bytes(ptr, len, what) }
}

/// The caller's 32-byte seed.
///
/// # Safety
///
/// Unless NULL, `seed` must point to `BLOCKSIEVE_SEED_BYTES` readable bytes.
unsafe fn seed(seed: *const u8) -> Result<[u8; BLOCKSIEVE_SEED_BYTES], Failure> {
    // SAFETY: the caller's guarantee, passed on.
    let raw = unsafe { bytes(seed, BLOCKSIEVE_SEED_BYTES, "seed") }?;
    raw.try_into()
        .map_err(|_| Failure::argument("seed is not 32 bytes"))
}

/// The caller's response headers: `len` name and value pairs at `ptr`
/// (NULL when `len` is 0), read lossily (a server's bytes, not the
/// caller's).
///
/// # Safety
///
/// Unless NULL, `ptr` must point to `len` headers whose strings are NULL or
/// NUL-terminated.
unsafe fn headers(ptr: *const blocksieve_header, len: usize) -> Result<Vec<(String, String)>, Failure> {
    if len == 0 {
        return Ok(Vec::new());
    }
    if ptr.is_null() {
        return Err(Failure::argument(format!(
            "headers is NULL but its length is {len}"
        )));
    }
    if !ptr.is_aligned() {
        return Err(Failure::argument("headers is not aligned"));
    }
    if len > isize::MAX as usize / size_of::<blocksieve_header>() {
        return Err(Failure::argument(format!("headers length {len} is too large")));
    }
    // SAFETY: non-NULL and aligned (checked), `len` entries fit in `isize`
    // bytes (checked), readable by the caller's guarantee.
    let items = unsafe { std::slice::from_raw_parts(ptr, len) };
    let lossy = |p: *const c_char, what: String| {
        if p.is_null() {
            return Err(Failure::argument(format!("{what} is NULL")));
        }
        // SAFETY: non-NULL (checked); NUL-terminated by the caller's
        // guarantee.
        Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    items
        .iter()
        .enumerate()
        .map(|(i, h)| {
            Ok((
                lossy(h.name, format!("headers[{i}].name"))?,
                lossy(h.value, format!("headers[{i}].value"))?,
            ))
        })
        .collect()
}

/// The caller's response: status, headers and body.
///
/// # Safety
///
/// As for [`headers`] and [`body`].
unsafe fn response<'a>(
    status: u16,
    header_ptr: *const blocksieve_header,
    headers_len: usize,
    body_ptr: *const u8,
    body_len: usize,
) -> Result<Response<'a>, Failure> {
    Ok(Response {
        status,
        // SAFETY: the caller's guarantee, passed on.
        headers: unsafe { headers(header_ptr, headers_len) }?,
        // SAFETY: the caller's guarantee, passed on.
        body: unsafe { optional_bytes(body_ptr, body_len, "body") }?,
    })
}

/// Creates a session: the agent's state and decisions for a host that
/// sends the HTTP requests itself (`blocksieve_session_update_requests`,
/// `blocksieve_session_check`). No request is made and no thread started;
/// every list starts without a snapshot.
///
/// On `BLOCKSIEVE_OK`, `*out_session` receives the handle, owned by the
/// caller until `blocksieve_session_free`; on any other status, NULL.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_MISCONFIGURED` (an invalid base
/// URL, list name, key, failure policy or setting; no list, more than
/// `BLOCKSIEVE_MAX_LISTS`, or no key) or `BLOCKSIEVE_INVALID_ARGUMENT`
/// (NULL `config`, `out_session` or required string, a string not UTF-8).
///
/// Thread-safety: any thread. The strings of `config` are only read during
/// the call.
///
/// # Safety
///
/// `config` must be NULL or point to a `blocksieve_session_config` whose
/// pointers are NULL or valid for the lengths given; `out_session` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_new(
    config: *const blocksieve_session_config,
    out_session: *mut *mut blocksieve_session,
) -> blocksieve_status {
    entry(|| {
        let out_session = out_ptr(out_session, "out_session")?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee. Written first so that every failure leaves NULL.
        unsafe { out_session.write(std::ptr::null_mut()) };
        let config = out_ptr(config.cast_mut(), "config")?;
        // SAFETY: non-NULL and aligned (checked), readable by the caller's
        // guarantee; `blocksieve_session_config` is plain data (`Copy`).
        let config = unsafe { config.read() };
        // SAFETY: the caller's guarantee on the strings, passed on.
        let base_url = unsafe { c_str(config.base_url, "config.base_url") }?;
        // SAFETY: as above.
        let lists = unsafe { c_str_array(config.lists, config.lists_len, "config.lists") }?;
        // SAFETY: as above.
        let trusted_keys = unsafe {
            c_str_array(
                config.trusted_keys,
                config.trusted_keys_len,
                "config.trusted_keys",
            )
        }?;
        let settings = SessionSettings {
            base_url,
            lists,
            trusted_keys,
            failure_policy: config.failure_policy,
            noise_prefixes: config.noise_prefixes,
            full_hash_cache_bytes: config.full_hash_cache_bytes,
            max_snapshot_bytes: config.max_snapshot_bytes,
            dangerous_allow_plain_http: config.dangerous_allow_plain_http,
        };
        let handle = Box::new(blocksieve_session {
            inner: crate::session::Handle::new(&settings)?,
        });
        // SAFETY: as the first write.
        unsafe { out_session.write(give(handle, Kind::Session)) };
        Ok(())
    })
}

/// Releases a session and everything it holds (its filters, the full-hash
/// cache). Requests and queries it made stay valid until freed, but no
/// other session accepts them. NULL is accepted and does nothing.
///
/// Returns `BLOCKSIEVE_OK`, or `BLOCKSIEVE_INVALID_ARGUMENT` for a pointer
/// that is not a live session (freed already: nothing is done, also once
/// a newer session has the freed one's memory: a handle is never given
/// out twice).
///
/// Thread-safety: any thread, but only once no other call on this session
/// is running or will start; the handle is invalid afterwards.
///
/// # Safety
///
/// `session` must be NULL or a handle from `blocksieve_session_new`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_free(session: *mut blocksieve_session) -> blocksieve_status {
    entry(|| {
        if session.is_null() {
            return Ok(());
        }
        // SAFETY: `Kind::Session` handles are `Box<blocksieve_session>`s.
        drop(unsafe { take_back(session, Kind::Session, "session") }?);
        Ok(())
    })
}

/// One update round: writes one new request per subscribed threat list,
/// in subscription order, into `out` — the deltas since the version held
/// (`GET /v1/lists/{name}/updates/{from}`, `If-None-Match`) or the whole
/// snapshot (`GET /v1/lists/{name}/snapshot`). Send each (in any order, at
/// once or not) and hand its response to
/// `blocksieve_session_handle_update_response`, or the failure to send it
/// to `blocksieve_session_handle_update_failure`; then free it with
/// `blocksieve_request_free`. When to run a round is the host's choice
/// (e.g. every few minutes); nothing is read from a clock here.
///
/// `out`: room for `capacity` request pointers (`BLOCKSIEVE_MAX_LISTS` is
/// always enough); NULL with capacity 0 only asks for the count.
/// `*out_count` receives the number of lists whenever the status is
/// `BLOCKSIEVE_OK` or `BLOCKSIEVE_BUFFER_TOO_SMALL` (then no request is
/// made).
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_BUFFER_TOO_SMALL` or
/// `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread; calls on one session serialize.
///
/// # Safety
///
/// `session` must be NULL or a handle from `blocksieve_session_new`; `out`
/// NULL or writable for `capacity` pointers; `out_count` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_update_requests(
    session: *const blocksieve_session,
    out: *mut *mut blocksieve_request,
    capacity: usize,
    out_count: *mut usize,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { session_handle(session) }?;
        if out.is_null() && capacity != 0 {
            return Err(Failure::argument(format!(
                "requests buffer is NULL but its capacity is {capacity}"
            )));
        }
        if !out.is_aligned() {
            return Err(Failure::argument("requests buffer is not aligned"));
        }
        let out_count = out_ptr(out_count, "out_count")?;
        let requests = handle.update_requests()?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_count.write(requests.len()) };
        if capacity < requests.len() {
            return Err(Failure::new(
                blocksieve_status::BLOCKSIEVE_BUFFER_TOO_SMALL,
                format!(
                    "requests buffer holds {capacity} entries, {} needed",
                    requests.len()
                ),
            ));
        }
        for (i, request) in requests.into_iter().enumerate() {
            let ptr = give(Box::new(blocksieve_request { inner: request }), Kind::Request);
            // SAFETY: `out` is non-NULL and aligned (a capacity > 0 requires
            // it, checked), and `i < requests.len() <= capacity` entries are
            // writable by the caller's guarantee.
            unsafe { out.wrapping_add(i).write(ptr) };
        }
        Ok(())
    })
}

/// Verifies and applies the response to an update request of this session
/// (from `blocksieve_session_update_requests` or a previous
/// `BLOCKSIEVE_UPDATE_NEED_SNAPSHOT`): a newer snapshot or delta chain is
/// swapped in whole (Ed25519 signature, body hash, list name, rollback
/// floor, chain links all checked); anything else leaves the list as it
/// was. A snapshot already expired at `now_ms` is applied all the same
/// (verdicts based on it say `stale`). A `200` to a snapshot request whose
/// `ETag` is the one the list's snapshot came with (a server that ignores
/// `If-None-Match`) is `BLOCKSIEVE_UPDATE_UNCHANGED` without its body being
/// read: the list keeps the snapshot it verified, whatever that body holds.
/// The request is only read; the host still frees it.
///
/// `status`: the HTTP status (e.g. 200, 304). `headers`: `headers_len`
/// name and value pairs (NULL when 0), at least `ETag`; names in any case.
/// `body`: `body_len` bytes (NULL when 0), the whole body — the session
/// refuses one over `max_snapshot_bytes` (a host that can stop reading
/// early saves the memory). `now_ms`: the time, Unix milliseconds.
///
/// `*out_result` receives the list, the outcome and the versions whenever
/// the status is `BLOCKSIEVE_OK`, `BLOCKSIEVE_TRANSPORT` or
/// `BLOCKSIEVE_BAD_DATA` (kind `BLOCKSIEVE_UPDATE_FAILED` for the last
/// two). `*out_next` receives NULL, or for `BLOCKSIEVE_UPDATE_NEED_SNAPSHOT`
/// the whole-snapshot request to send in the same round (free it with
/// `blocksieve_request_free`).
///
/// Returns `BLOCKSIEVE_OK` (updated, unchanged or need snapshot),
/// `BLOCKSIEVE_TRANSPORT` (an HTTP error status such as 503: retry later),
/// `BLOCKSIEVE_BAD_DATA` (forged, corrupt, rolled back, oversized, or a
/// `304` with nothing to stand for), or `BLOCKSIEVE_INVALID_ARGUMENT` (a
/// NULL or dead handle, a request of another session or a full-hash
/// search, NULL outputs, a body NULL with a length, `now_ms` out of range).
///
/// Thread-safety: any thread; calls on one session serialize.
///
/// # Safety
///
/// `session` and `request` must be NULL or handles of this library; other
/// pointers NULL or valid for the lengths given.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_handle_update_response(
    session: *const blocksieve_session,
    request: *const blocksieve_request,
    status: u16,
    headers: *const blocksieve_header,
    headers_len: usize,
    body: *const u8,
    body_len: usize,
    now_ms: i64,
    out_result: *mut blocksieve_update_result,
    out_next: *mut *mut blocksieve_request,
) -> blocksieve_status {
    entry(|| {
        let out_next = out_ptr(out_next, "out_next")?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee. Written first so that every failure leaves NULL.
        unsafe { out_next.write(std::ptr::null_mut()) };
        let out_result = out_ptr(out_result, "out_result")?;
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { session_handle(session) }?;
        // SAFETY: the caller's guarantee, passed on.
        let request = unsafe { request_handle(request) }?;
        // SAFETY: the caller's guarantee, passed on.
        let response = unsafe { response(status, headers, headers_len, body, body_len) }?;
        let now = crate::session::time(now_ms)?;
        let outcome = handle.handle_update_response(request, &response, now)?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_result.write(outcome.result) };
        if let Some(next) = outcome.next {
            let ptr = give(Box::new(blocksieve_request { inner: next }), Kind::Request);
            // SAFETY: as the first write.
            unsafe { out_next.write(ptr) };
        }
        outcome.failure.map_or(Ok(()), Err)
    })
}

/// Records that the host could not send an update request of this session
/// or read its response (no connection, timeout, a cut body): counted in
/// `updates_failed`, the list kept as it is. Retry in a later round (after
/// a rebase that failed so, a snapshot past `max_additions_ratio`, the
/// next round asks for the deltas since the version held first).
///
/// `reason`: NUL-terminated text, e.g. curl's error text (UTF-8; any other
/// byte is shown as U+FFFD). `*out_result`
/// receives the list, `BLOCKSIEVE_UPDATE_FAILED` and the version held.
///
/// Returns `BLOCKSIEVE_TRANSPORT` (the failure recorded; the last error
/// names the URL and the reason) or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread; calls on one session serialize.
///
/// # Safety
///
/// `session` and `request` must be NULL or handles of this library;
/// `reason` NULL or NUL-terminated; `out_result` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_handle_update_failure(
    session: *const blocksieve_session,
    request: *const blocksieve_request,
    reason: *const c_char,
    out_result: *mut blocksieve_update_result,
) -> blocksieve_status {
    entry(|| {
        let out_result = out_ptr(out_result, "out_result")?;
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { session_handle(session) }?;
        // SAFETY: the caller's guarantee, passed on.
        let request = unsafe { request_handle(request) }?;
        // SAFETY: the caller's guarantee, passed on.
        let reason = unsafe { c_text(reason, "reason") }?;
        let (result, failure) = handle.handle_update_failure(request, &reason)?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_result.write(result) };
        Err(failure)
    })
}

/// Checks a URL against every subscribed threat list: canonicalized, its
/// expressions' hash prefixes probed in the local filters. With no hit, or
/// every hit answered from the full-hash cache, or full-hash requests
/// paused by the backoff after failures (then `BLOCKSIEVE_UNVERIFIED`),
/// the verdict is written now and `*out_query` is NULL: no request is
/// needed. Otherwise `*out_query` receives a query: send its request
/// (`blocksieve_query_request`: `POST /v1/hashes:search` carrying the real
/// request prefixes and `noise_prefixes` random ones, shuffled) and hand
/// the response to `blocksieve_session_complete_check` (or the failure to
/// `blocksieve_session_fail_check`); `*out_verdict` then holds only the
/// placeholder (`BLOCKSIEVE_UNVERIFIED`, `block` true: see
/// `blocksieve_verdict`). A
/// prefix hit alone is never `BLOCKSIEVE_UNSAFE`.
///
/// `url`: `url_len` bytes, read as by `blocksieve_canonicalize`. `now_ms`: the time, Unix
/// milliseconds. `seed`: `BLOCKSIEVE_SEED_BYTES` (32) bytes from a
/// cryptographically secure generator (`getrandom`, `arc4random_buf`,
/// `SecRandomCopyBytes`, `BCryptGenRandom`), fresh for every call: they
/// choose the noise prefixes and their order, which is all that hides the
/// real hash prefixes from the publisher (k-anonymity). Verdict texts as
/// for `blocksieve_agent_check`.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_INVALID_URL` (the URL names no
/// host, or is over 2 MiB), `BLOCKSIEVE_NOT_READY` (a list has no snapshot yet, and the
/// lists that have one do not confirm the URL unsafe without a request: run
/// an update round first) or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread; calls on one session serialize. Checks may
/// be in flight while update rounds run: every response is checked against
/// the state in place when it arrives.
///
/// # Safety
///
/// `session` must be NULL or a handle of this library; other pointers NULL
/// or valid for the lengths given (`seed` for 32 bytes).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_check(
    session: *const blocksieve_session,
    url: *const c_char,
    url_len: usize,
    now_ms: i64,
    seed: *const u8,
    out_verdict: *mut blocksieve_verdict,
    list: *mut c_char,
    list_capacity: usize,
    expression: *mut c_char,
    expression_capacity: usize,
    out_query: *mut *mut blocksieve_query,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee on `out_verdict`, passed on. First,
        // before any argument is refused (a NULL `out_query` included).
        unsafe { placeholder(out_verdict) };
        let out_query = out_ptr(out_query, "out_query")?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee. Written before the other arguments are read, so that
        // every failure leaves NULL.
        unsafe { out_query.write(std::ptr::null_mut()) };
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { session_handle(session) }?;
        // SAFETY: the caller's guarantee on `url`, passed on.
        let url = unsafe { url_arg(url, url_len) }?;
        // SAFETY: the caller's guarantee on `seed`, passed on.
        let seed = unsafe { self::seed(seed) }?;
        let now = crate::session::time(now_ms)?;
        // SAFETY: the caller's guarantee on `out_verdict`, passed on.
        let out =
            unsafe { VerdictOut::new(out_verdict, list, list_capacity, expression, expression_capacity) }?;
        match handle.check(&url, now, seed)? {
            // SAFETY: the caller's guarantee on the buffers, passed on.
            Step::Done(answer) => unsafe { out.write(&answer) },
            Step::Query(query) => {
                let ptr = Box::into_raw(Box::new(blocksieve_query { inner: *query }));
                // The lent request lives inside the query's allocation;
                // both are listed under one lock, as `take_query` unlists
                // them.
                // SAFETY: just made from a box, so valid; only the address
                // of its field is taken.
                let lent_at = unsafe { &raw mut (*ptr).inner.request };
                let mut live = live_handles();
                let lent = live.insert(lent_at, Kind::QueryRequest, 0);
                let token = live.insert(ptr, Kind::Query, lent.addr());
                drop(live);
                // SAFETY: as the first write.
                unsafe { out_query.write(token) };
                Ok(())
            }
        }
    })
}

/// Shared by `blocksieve_session_complete_check` and
/// `blocksieve_session_fail_check` once the query has been taken back (it
/// is consumed whatever follows) and the caller's arguments read: checks
/// them in order, completes the check and writes the verdict.
///
/// # Safety
///
/// `session` must be NULL or a handle of this library; `out`'s buffers as
/// for [`VerdictOut::write`].
unsafe fn complete(
    session: *const blocksieve_session,
    query: Box<blocksieve_query>,
    response: Result<Result<Response<'_>, &str>, Failure>,
    now_ms: i64,
    seed: Result<[u8; BLOCKSIEVE_SEED_BYTES], Failure>,
    out: Result<VerdictOut, Failure>,
) -> Result<(), Failure> {
    // SAFETY: the caller's guarantee, passed on.
    let handle = unsafe { session_handle(session) }?;
    let query: Query = query.inner;
    handle.owns(&query)?;
    let response = response?;
    let seed = seed?;
    let now = crate::session::time(now_ms)?;
    let out = out?;
    let answer = handle.complete_check(query, response, now, seed)?;
    // SAFETY: the caller's guarantee on the buffers, passed on.
    unsafe { out.write(&answer) }
}

/// Completes a check with the publisher's response to its query's request:
/// a good answer is cached for its cache duration (misses included) and
/// decides the verdict — `BLOCKSIEVE_UNSAFE` only when a returned full hash
/// is one of the URL's; an HTTP error, an answer that does not parse or is
/// over 34.2 MB (the largest binary answer) makes the verdict `BLOCKSIEVE_UNVERIFIED` (`block` by the
/// failure policy) and starts or extends the backoff (`Retry-After`
/// honoured), during which checks needing full hashes answer
/// `BLOCKSIEVE_UNVERIFIED` at once. A `400` whose error code is
/// `prefix_too_short` says the session's snapshot is behind the
/// publisher's (the list's request prefix length grew): it starts no
/// backoff until an update response leaves the versions held as they
/// were; `blocksieve_session_update_advised` then says true: run an update
/// round and, if it brings a newer version, check the URL again (the
/// agent functions do so by themselves).
///
/// `query` is consumed whatever the status (freed; the pointer, and the
/// request it lent, are invalid afterwards: a second use returns
/// `BLOCKSIEVE_INVALID_ARGUMENT`). `status`, `headers`, `body`, `now_ms`
/// as for `blocksieve_session_handle_update_response`; `seed` and the
/// verdict outputs as for `blocksieve_session_check` (the seed draws the
/// backoff's jitter).
///
/// Returns `BLOCKSIEVE_OK` (an unverified verdict included),
/// `BLOCKSIEVE_NOT_READY` (a list had no snapshot when the check began, and
/// the lists that had one do not confirm the URL unsafe) or
/// `BLOCKSIEVE_INVALID_ARGUMENT` (a NULL or dead handle, a query of
/// another session, a NULL output or seed, a body NULL with a length).
///
/// Thread-safety: any thread; calls on one session serialize. A query is
/// completed once, by one thread.
///
/// # Safety
///
/// `session` and `query` must be NULL or handles of this library; other
/// pointers NULL or valid for the lengths given.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_complete_check(
    session: *const blocksieve_session,
    query: *mut blocksieve_query,
    status: u16,
    headers: *const blocksieve_header,
    headers_len: usize,
    body: *const u8,
    body_len: usize,
    now_ms: i64,
    seed: *const u8,
    out_verdict: *mut blocksieve_verdict,
    list: *mut c_char,
    list_capacity: usize,
    expression: *mut c_char,
    expression_capacity: usize,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee on `out_verdict`, passed on.
        unsafe { placeholder(out_verdict) };
        // SAFETY: the caller's guarantee, passed on.
        let query = unsafe { take_query(query) }?;
        // SAFETY: the caller's guarantee, passed on.
        let response = unsafe { response(status, headers, headers_len, body, body_len) };
        // SAFETY: the caller's guarantee, passed on.
        let seed = unsafe { self::seed(seed) };
        // SAFETY: the caller's guarantee on `out_verdict`, passed on.
        let out =
            unsafe { VerdictOut::new(out_verdict, list, list_capacity, expression, expression_capacity) };
        // SAFETY: the caller's guarantee, passed on.
        unsafe { complete(session, query, response.map(Ok), now_ms, seed, out) }
    })
}

/// Completes a check whose query's request the host could not send or
/// whose response it could not read (no connection, timeout, a cut body):
/// the verdict is `BLOCKSIEVE_UNVERIFIED` (`block` by the failure policy),
/// never unsafe, and the backoff starts or extends.
///
/// `reason`: NUL-terminated text, e.g. curl's error text (UTF-8; any other
/// byte is shown as U+FFFD). Everything else
/// as for `blocksieve_session_complete_check`; `query` is consumed
/// whatever the status.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_NOT_READY` (a list had no snapshot
/// when the check began: an unverified hit is then no answer) or
/// `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: as for `blocksieve_session_complete_check`.
///
/// # Safety
///
/// `session` and `query` must be NULL or handles of this library; other
/// pointers NULL or valid for the lengths given.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_fail_check(
    session: *const blocksieve_session,
    query: *mut blocksieve_query,
    reason: *const c_char,
    now_ms: i64,
    seed: *const u8,
    out_verdict: *mut blocksieve_verdict,
    list: *mut c_char,
    list_capacity: usize,
    expression: *mut c_char,
    expression_capacity: usize,
) -> blocksieve_status {
    entry(|| {
        // SAFETY: the caller's guarantee on `out_verdict`, passed on.
        unsafe { placeholder(out_verdict) };
        // SAFETY: the caller's guarantee, passed on.
        let query = unsafe { take_query(query) }?;
        // SAFETY: the caller's guarantee, passed on.
        let reason = unsafe { c_text(reason, "reason") };
        // SAFETY: the caller's guarantee, passed on.
        let seed = unsafe { self::seed(seed) };
        // SAFETY: the caller's guarantee on `out_verdict`, passed on.
        let out =
            unsafe { VerdictOut::new(out_verdict, list, list_capacity, expression, expression_capacity) };
        // SAFETY: the caller's guarantee, passed on.
        unsafe {
            complete(
                session,
                query,
                reason.as_deref().map_err(Clone::clone).map(Err),
                now_ms,
                seed,
                out,
            )
        }
    })
}

/// Releases a query without completing it (the check is abandoned; no
/// failure is recorded). NULL is accepted and does nothing.
///
/// Returns `BLOCKSIEVE_OK`, or `BLOCKSIEVE_INVALID_ARGUMENT` for a pointer
/// that is not a live query (already consumed: nothing is done).
///
/// Thread-safety: any thread, once no other call uses the query.
///
/// # Safety
///
/// `query` must be NULL or a handle of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_query_free(query: *mut blocksieve_query) -> blocksieve_status {
    entry(|| {
        if query.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's guarantee, passed on.
        drop(unsafe { take_query(query) }?);
        Ok(())
    })
}

/// Lends the full-hash search request of a query: `*out_request` receives
/// a request valid until the query is completed or freed (do not free it
/// with `blocksieve_request_free`).
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread, concurrently with other reads of the query.
///
/// # Safety
///
/// `query` must be NULL or a handle of this library; `out_request` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_query_request(
    query: *const blocksieve_query,
    out_request: *mut *const blocksieve_request,
) -> blocksieve_status {
    entry(|| {
        let out_request = out_ptr(out_request, "out_request")?;
        check_token(query, "query")?;
        let lent = {
            let live = live_handles();
            let &(_, lent) =
                (live.handles.get(&(query.addr(), Kind::Query))).ok_or_else(|| not_live("query"))?;
            lent
        };
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_request.write(std::ptr::without_provenance(lent)) };
        Ok(())
    })
}

/// Releases an update request. NULL is accepted and does nothing.
///
/// Returns `BLOCKSIEVE_OK`, or `BLOCKSIEVE_INVALID_ARGUMENT` for a pointer
/// that is not a live update request (freed already, or a query's request:
/// nothing is done).
///
/// Thread-safety: any thread, once no other call uses the request.
///
/// # Safety
///
/// `request` must be NULL or a handle of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_request_free(request: *mut blocksieve_request) -> blocksieve_status {
    entry(|| {
        if request.is_null() {
            return Ok(());
        }
        // SAFETY: `Kind::Request` handles are `Box<blocksieve_request>`s.
        drop(unsafe { take_back(request, Kind::Request, "request") }?);
        Ok(())
    })
}

/// Writes a borrowed NUL-terminated text of a request to `*out`.
///
/// # Safety
///
/// `request` NULL or a handle of this library; `out` NULL or writable.
unsafe fn request_text(
    request: *const blocksieve_request,
    out: *mut *const c_char,
    field: fn(&Request) -> &CStr,
) -> Result<(), Failure> {
    let out = out_ptr(out, "out")?;
    // SAFETY: the caller's guarantee, passed on.
    let request = unsafe { request_handle(request) }?;
    // SAFETY: non-NULL and aligned (checked), writable by the caller's
    // guarantee. The text lives as long as the request.
    unsafe { out.write(field(request).as_ptr()) };
    Ok(())
}

/// The request's HTTP method: `*out_method` receives `"GET"` (updates) or
/// `"POST"` (full-hash searches), NUL-terminated, static.
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread, concurrently with other reads of the request.
///
/// # Safety
///
/// `request` must be NULL or a handle of this library; `out_method` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_request_method(
    request: *const blocksieve_request,
    out_method: *mut *const c_char,
) -> blocksieve_status {
    // SAFETY: the caller's guarantee, passed on.
    entry(|| unsafe { request_text(request, out_method, Request::method) })
}

/// The request's absolute URL (the session's base URL and a route), e.g.
/// `https://publisher.example/v1/lists/malware/snapshot`: `*out_url`
/// receives NUL-terminated text valid until the request is freed (or its
/// query consumed).
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread, concurrently with other reads of the request.
///
/// # Safety
///
/// `request` must be NULL or a handle of this library; `out_url` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_request_url(
    request: *const blocksieve_request,
    out_url: *mut *const c_char,
) -> blocksieve_status {
    // SAFETY: the caller's guarantee, passed on.
    entry(|| unsafe { request_text(request, out_url, Request::url) })
}

/// The number of headers to send with the request (lowercase names, e.g.
/// `if-none-match`, `content-type`, `accept`), into `*out_count`.
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread, concurrently with other reads of the request.
///
/// # Safety
///
/// `request` must be NULL or a handle of this library; `out_count` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_request_header_count(
    request: *const blocksieve_request,
    out_count: *mut usize,
) -> blocksieve_status {
    entry(|| {
        let out_count = out_ptr(out_count, "out_count")?;
        // SAFETY: the caller's guarantee, passed on.
        let request = unsafe { request_handle(request) }?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_count.write(request.headers().len()) };
        Ok(())
    })
}

/// The request's header number `index` (from 0): `*out_name` and
/// `*out_value` receive NUL-terminated texts valid until the request is
/// freed (or its query consumed).
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT` (also for an
/// index not below the header count).
///
/// Thread-safety: any thread, concurrently with other reads of the request.
///
/// # Safety
///
/// `request` must be NULL or a handle of this library; `out_name` and
/// `out_value` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_request_header(
    request: *const blocksieve_request,
    index: usize,
    out_name: *mut *const c_char,
    out_value: *mut *const c_char,
) -> blocksieve_status {
    entry(|| {
        let out_name = out_ptr(out_name, "out_name")?;
        let out_value = out_ptr(out_value, "out_value")?;
        // SAFETY: the caller's guarantee, passed on.
        let request = unsafe { request_handle(request) }?;
        let headers = request.headers();
        let (name, value) = headers.get(index).ok_or_else(|| {
            Failure::argument(format!(
                "header index {index} is out of range: the request has {}",
                headers.len()
            ))
        })?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee. The texts live as long as the request.
        unsafe { out_name.write(name.as_ptr()) };
        // SAFETY: as above.
        unsafe { out_value.write(value.as_ptr()) };
        Ok(())
    })
}

/// The request's body: `*out_body` receives a pointer to `*out_len` bytes
/// valid until the request is freed (or its query consumed); NULL and 0
/// for a `GET`. A full-hash search's body is JSON
/// (`{"prefixes":[...],"min_versions":{...},"snapshots":{...}}`).
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread, concurrently with other reads of the request.
///
/// # Safety
///
/// `request` must be NULL or a handle of this library; `out_body` and
/// `out_len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_request_body(
    request: *const blocksieve_request,
    out_body: *mut *const u8,
    out_len: *mut usize,
) -> blocksieve_status {
    entry(|| {
        let out_body = out_ptr(out_body, "out_body")?;
        let out_len = out_ptr(out_len, "out_len")?;
        // SAFETY: the caller's guarantee, passed on.
        let request = unsafe { request_handle(request) }?;
        let body = request.body();
        let ptr = if body.is_empty() {
            std::ptr::null()
        } else {
            body.as_ptr()
        };
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee. The bytes live as long as the request.
        unsafe { out_body.write(ptr) };
        // SAFETY: as above.
        unsafe { out_len.write(body.len()) };
        Ok(())
    })
}

/// Writes the session's counters (lookups, prefix hits, full-hash requests
/// and failures, cache hits, snapshots and deltas applied, failed updates,
/// lists restored) into `*out_stats`.
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread; calls on one session serialize.
///
/// # Safety
///
/// `session` must be NULL or a handle of this library; `out_stats` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_get_stats(
    session: *const blocksieve_session,
    out_stats: *mut blocksieve_session_stats,
) -> blocksieve_status {
    entry(|| {
        let out_stats = out_ptr(out_stats, "out_stats")?;
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { session_handle(session) }?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_stats.write(handle.stats()) };
        Ok(())
    })
}

/// The version a subscribed threat list's filter stands for (its
/// snapshot's, or that of the last delta applied), into `*out_version`.
///
/// `list`: a NUL-terminated list name.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_NOT_READY` (the list has no
/// snapshot yet) or `BLOCKSIEVE_INVALID_ARGUMENT` (also for a list not
/// subscribed).
///
/// Thread-safety: any thread; calls on one session serialize.
///
/// # Safety
///
/// `session` must be NULL or a handle of this library; `list` NULL or
/// NUL-terminated; `out_version` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_list_version(
    session: *const blocksieve_session,
    list: *const c_char,
    out_version: *mut u64,
) -> blocksieve_status {
    entry(|| {
        let out_version = out_ptr(out_version, "out_version")?;
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { session_handle(session) }?;
        // SAFETY: the caller's guarantee, passed on.
        let list = unsafe { c_str(list, "list") }?;
        let version = handle.version(list)?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_version.write(version) };
        Ok(())
    })
}

/// Whether to run an update round before checking again, into
/// `*out_advised`: true when a full-hash request was refused as `400
/// prefix_too_short` (its check answered `BLOCKSIEVE_UNVERIFIED`) at the
/// snapshot versions the session holds, and no update response has since
/// left them as they were — the publisher's request prefix length for a
/// list grew past the session's snapshot. Run an update round; if it
/// brings a newer version (`BLOCKSIEVE_UPDATE_UPDATED`), check the URL
/// again. False once a round has done so, once a round left the versions
/// as they were (the refusal then stands and backs off as any failure:
/// asking again would loop), and after any answered full-hash request. So
/// a host need not read the error code from the response body.
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT` (a NULL or
/// dead session, a NULL `out_advised`).
///
/// Thread-safety: any thread; calls on one session serialize.
///
/// # Safety
///
/// `session` must be NULL or a handle of this library; `out_advised` NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_update_advised(
    session: *const blocksieve_session,
    out_advised: *mut bool,
) -> blocksieve_status {
    entry(|| {
        let out_advised = out_ptr(out_advised, "out_advised")?;
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { session_handle(session) }?;
        let advised = handle.update_advised();
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_advised.write(advised) };
        Ok(())
    })
}

/// Takes what to keep of a threat list across restarts, after an update
/// that changed it (`BLOCKSIEVE_UPDATE_UPDATED`): `*out_saved` receives a
/// `blocksieve_saved` holding three byte strings — the base snapshot as
/// downloaded, the delta chain applied to it since (empty when none), and
/// the list's record (JSON: the rollback floor and the snapshot's ETag).
/// Store them as they are (three files, a database row); at the next start
/// hand them to `blocksieve_session_restore`, which verifies them again.
/// The three are taken together, so they belong to one version even while
/// other threads update the session; the snapshot is shared with the
/// session, not copied.
///
/// `list`: a NUL-terminated list name. On `BLOCKSIEVE_OK`, `*out_saved` is
/// the caller's until `blocksieve_saved_free`; on any other status, NULL.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_NOT_READY` (the list has no
/// snapshot yet: nothing to keep) or `BLOCKSIEVE_INVALID_ARGUMENT` (a NULL
/// or dead session, a NULL `list` or `out_saved`, a list not subscribed).
///
/// Thread-safety: any thread; calls on one session serialize.
///
/// # Safety
///
/// `session` must be NULL or a handle of this library; `list` NULL or
/// NUL-terminated; `out_saved` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_save(
    session: *const blocksieve_session,
    list: *const c_char,
    out_saved: *mut *mut blocksieve_saved,
) -> blocksieve_status {
    entry(|| {
        let out_saved = out_ptr(out_saved, "out_saved")?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee. Written first so that every failure leaves NULL.
        unsafe { out_saved.write(std::ptr::null_mut()) };
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { session_handle(session) }?;
        // SAFETY: the caller's guarantee, passed on.
        let list = unsafe { c_str(list, "list") }?;
        let saved = handle.save(list)?;
        let ptr = give(Box::new(blocksieve_saved { inner: saved }), Kind::Saved);
        // SAFETY: as the first write.
        unsafe { out_saved.write(ptr) };
        Ok(())
    })
}

/// Writes a borrowed byte string of a saved list to `*out` and `*out_len`
/// (NULL and 0 when empty).
///
/// # Safety
///
/// `saved` NULL or a handle of this library; `out` and `out_len` NULL or
/// writable.
unsafe fn saved_bytes(
    saved: *const blocksieve_saved,
    out: *mut *const u8,
    out_len: *mut usize,
    field: fn(&blocksieve_saved) -> &[u8],
) -> Result<(), Failure> {
    let out = out_ptr(out, "out")?;
    let out_len = out_ptr(out_len, "out_len")?;
    let saved = check_live(saved, &[Kind::Saved], "saved")?;
    // SAFETY: listed in `LIVE`, so a `Box<blocksieve_saved>` given out by
    // `blocksieve_session_save` and not yet freed; the caller does not
    // free it during the call.
    let bytes = field(unsafe { &*saved });
    let ptr = if bytes.is_empty() {
        std::ptr::null()
    } else {
        bytes.as_ptr()
    };
    // SAFETY: non-NULL and aligned (checked), writable by the caller's
    // guarantee. The bytes live as long as the saved list.
    unsafe { out.write(ptr) };
    // SAFETY: as above.
    unsafe { out_len.write(bytes.len()) };
    Ok(())
}

/// The base snapshot of a saved list, as downloaded (signed: it verifies
/// on its own): `*out_snapshot` receives a pointer to `*out_len` bytes
/// valid until `blocksieve_saved_free`.
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread, concurrently with other reads of the saved
/// list.
///
/// # Safety
///
/// `saved` must be NULL or a handle of this library; `out_snapshot` and
/// `out_len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_saved_snapshot(
    saved: *const blocksieve_saved,
    out_snapshot: *mut *const u8,
    out_len: *mut usize,
) -> blocksieve_status {
    // SAFETY: the caller's guarantee, passed on.
    entry(|| unsafe { saved_bytes(saved, out_snapshot, out_len, |s| &s.inner.snapshot) })
}

/// The delta chain applied to the saved list's base snapshot since it was
/// downloaded (each delta signed): `*out_chain` receives a pointer to
/// `*out_len` bytes valid until `blocksieve_saved_free`; NULL and 0 when no
/// delta was applied since (store that empty chain too, in place of an
/// older one).
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread, concurrently with other reads of the saved
/// list.
///
/// # Safety
///
/// `saved` must be NULL or a handle of this library; `out_chain` and
/// `out_len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_saved_chain(
    saved: *const blocksieve_saved,
    out_chain: *mut *const u8,
    out_len: *mut usize,
) -> blocksieve_status {
    // SAFETY: the caller's guarantee, passed on.
    entry(|| unsafe { saved_bytes(saved, out_chain, out_len, |s| &s.inner.chain) })
}

/// The record of the saved list: JSON (UTF-8, not NUL-terminated) holding
/// the version floor kept against rollback and the snapshot's ETag.
/// `*out_record` receives a pointer to `*out_len` bytes valid until
/// `blocksieve_saved_free`.
///
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
///
/// Thread-safety: any thread, concurrently with other reads of the saved
/// list.
///
/// # Safety
///
/// `saved` must be NULL or a handle of this library; `out_record` and
/// `out_len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_saved_record(
    saved: *const blocksieve_saved,
    out_record: *mut *const u8,
    out_len: *mut usize,
) -> blocksieve_status {
    // SAFETY: the caller's guarantee, passed on.
    entry(|| unsafe { saved_bytes(saved, out_record, out_len, |s| &s.inner.record) })
}

/// Releases a saved list and the bytes it lent. NULL is accepted and does
/// nothing.
///
/// Returns `BLOCKSIEVE_OK`, or `BLOCKSIEVE_INVALID_ARGUMENT` for a pointer
/// that is not a live saved list (freed already: nothing is done).
///
/// Thread-safety: any thread, once no other call uses the saved list.
///
/// # Safety
///
/// `saved` must be NULL or a handle of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_saved_free(saved: *mut blocksieve_saved) -> blocksieve_status {
    entry(|| {
        if saved.is_null() {
            return Ok(());
        }
        // SAFETY: `Kind::Saved` handles are `Box<blocksieve_saved>`s.
        drop(unsafe { take_back(saved, Kind::Saved, "saved") }?);
        Ok(())
    })
}

/// Restores a threat list at start from the three byte strings a host kept
/// of a `blocksieve_saved`, so that checks answer before any request and
/// the next update round asks for the deltas since the version kept
/// instead of the whole snapshot (and sends a snapshot request with the
/// kept ETag, so that a `304` keeps the list). Nothing is trusted
/// because it was stored: the snapshot is verified as a download is
/// (Ed25519 signature, body hash, limits, list name, and not older than the
/// record's floor), then the chain applied to it (every delta verified).
/// A snapshot expired at `now_ms` is restored all the same (its verdicts
/// say `stale`, counted in `restored_stale`). A chain that does not verify
/// is dropped: the base alone is restored, older than what was kept, so
/// entries the chain added are missing until the next round, which asks
/// for the deltas from the base's version — run it before relying on the
/// list. A record that cannot be read is ignored (the floor is then the
/// snapshot's own). A list that already holds a state (an
/// update came first) keeps it: a download is never replaced by a saved
/// copy, and its version is returned.
///
/// `list`: a NUL-terminated list name. `snapshot`, `chain`, `record`:
/// `*_len` bytes each (NULL when the length is 0: no chain, no record).
/// `now_ms`: the time, Unix milliseconds. On `BLOCKSIEVE_OK`,
/// `*out_version` receives the version now held, and `*out_chain_dropped`
/// (unless NULL: not wanted) whether the chain was dropped (it did not
/// verify, or it is missing where the record names a newer version);
/// otherwise neither is written.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_BAD_DATA` (the snapshot is corrupt,
/// forged, of another list, over `max_snapshot_bytes`, or older than the
/// record's floor: discard what was kept; the list stays without a
/// snapshot and the next round downloads one, not older than the record's
/// floor, which the session keeps) or
/// `BLOCKSIEVE_INVALID_ARGUMENT` (a NULL or dead session, a NULL `list` or
/// `out_version`, bytes NULL with a length, a list not subscribed: the
/// config changed since the bytes were kept; `now_ms` out of range).
///
/// Thread-safety: any thread; calls on one session serialize.
///
/// # Safety
///
/// `session` must be NULL or a handle of this library; `list` NULL or
/// NUL-terminated; the byte pointers NULL or valid for their lengths;
/// `out_version` and `out_chain_dropped` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn blocksieve_session_restore(
    session: *const blocksieve_session,
    list: *const c_char,
    snapshot: *const u8,
    snapshot_len: usize,
    chain: *const u8,
    chain_len: usize,
    record: *const u8,
    record_len: usize,
    now_ms: i64,
    out_version: *mut u64,
    out_chain_dropped: *mut bool,
) -> blocksieve_status {
    entry(|| {
        let out_version = out_ptr(out_version, "out_version")?;
        let out_chain_dropped = if out_chain_dropped.is_null() {
            None
        } else {
            Some(out_ptr(out_chain_dropped, "out_chain_dropped")?)
        };
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { session_handle(session) }?;
        // SAFETY: the caller's guarantee, passed on.
        let list = unsafe { c_str(list, "list") }?;
        // SAFETY: the caller's guarantee, passed on.
        let snapshot = unsafe { optional_bytes(snapshot, snapshot_len, "snapshot") }?;
        // SAFETY: the caller's guarantee, passed on.
        let chain = unsafe { optional_bytes(chain, chain_len, "chain") }?;
        // SAFETY: the caller's guarantee, passed on.
        let record = unsafe { optional_bytes(record, record_len, "record") }?;
        let now = crate::session::time(now_ms)?;
        let restored = handle.restore(list, snapshot, chain, record, now)?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee.
        unsafe { out_version.write(restored.version) };
        if let Some(out) = out_chain_dropped {
            // SAFETY: as above.
            unsafe { out.write(restored.chain_error.is_some()) };
        }
        Ok(())
    })
}
