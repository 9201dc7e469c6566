//! The entry points: every `extern "C"` function, and the only unsafe code
//! of the crate — reading the caller's pointers and writing into the
//! caller's buffers. Each entry point checks its pointers, runs the safe
//! code of [`crate::sansio`] or [`crate::agent`] under `catch_unwind`, and
//! records the outcome for `blocksieve_last_error`.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::agent::{Handle, Settings};
use crate::failure::{self, Failure};
use crate::types::{
    blocksieve_agent, blocksieve_config, blocksieve_list_status, blocksieve_snapshot_info, blocksieve_status,
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

/// The caller's `len` bytes at `ptr` as UTF-8 text.
///
/// # Safety
///
/// As for [`bytes`].
unsafe fn text<'a>(ptr: *const c_char, len: usize, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: the caller's guarantee, passed on.
    let raw = unsafe { bytes(ptr.cast::<u8>(), len, what) }?;
    std::str::from_utf8(raw).map_err(|e| {
        Failure::argument(format!(
            "{what} is not utf-8: invalid byte at offset {}",
            e.valid_up_to()
        ))
    })
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
    let url = unsafe { text(url, url_len, "url") }?;
    let out = TextOut::new(out, out_capacity, out_len, what)?;
    let result = f(url)?;
    // SAFETY: the caller's guarantee on the buffers, passed on.
    unsafe { out.write(&result) }
}

/// Writes the Safe Browsing canonical form of a URL (e.g.
/// `http://evil.example/login` for `HTTP://EVIL.example:80/a/../login#x`)
/// into `out` as NUL-terminated text.
///
/// `url`: `url_len` bytes of UTF-8, not NUL-terminated (a NUL byte is part
/// of the URL). `out`: `out_capacity` bytes; NULL with capacity 0 only asks
/// for the length. `*out_len` receives the length of the canonical URL in
/// bytes, without the NUL, whenever the status is `BLOCKSIEVE_OK` or
/// `BLOCKSIEVE_BUFFER_TOO_SMALL`; the buffer needs `*out_len + 1` bytes.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_INVALID_URL` (no host),
/// `BLOCKSIEVE_BUFFER_TOO_SMALL`, or `BLOCKSIEVE_INVALID_ARGUMENT` (NULL
/// `url` or `out_len`, NULL `out` with a capacity, `url` not UTF-8).
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
/// `url`: `url_len` bytes of UTF-8. `out`: `out_capacity` bytes; NULL with
/// capacity 0 only asks for the length. `*out_len` receives the length of
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
        let url = unsafe { text(url, url_len, "url") }?;
        if out.is_null() && out_capacity != 0 {
            return Err(Failure::argument(format!(
                "full hashes buffer is NULL but its capacity is {out_capacity}"
            )));
        }
        let out_len = out_ptr(out_len, "length out-parameter")?;
        let hashes = crate::sansio::full_hashes(url)?;
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
/// NUL-terminated base64 public keys (at least one).
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_BAD_DATA` (the snapshot failed a
/// check, the last error names the first one: bad signature, unknown key,
/// expired, truncated...), `BLOCKSIEVE_MISCONFIGURED` (no key, or a key that
/// is not base64 of a valid Ed25519 public key), or
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
/// no key), `BLOCKSIEVE_INVALID_ARGUMENT` (NULL `config`, `out_agent` or
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
/// either way).
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
        drop(unsafe { Box::from_raw(agent) });
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
/// `BLOCKSIEVE_INVALID_ARGUMENT` for a NULL handle.
///
/// Thread-safety: any thread, concurrently with the other calls on this
/// handle but `blocksieve_agent_free`; updates are serialised, checks never
/// wait for them.
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
/// Blocks only when a hit needs a request (up to 10 s).
///
/// `url`: `url_len` bytes of UTF-8. `*out_verdict` receives the verdict
/// (kind, stale, block, full hash, text lengths) whenever the status is
/// `BLOCKSIEVE_OK` or `BLOCKSIEVE_BUFFER_TOO_SMALL`. `list` and
/// `expression`: buffers of `list_capacity` and `expression_capacity`
/// bytes for the texts of `blocksieve_verdict`, written NUL-terminated;
/// either may be NULL with capacity 0 when the caller does not want that
/// text (its length is still reported).
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_INVALID_URL` (the URL names no
/// host), `BLOCKSIEVE_NOT_READY` (a list has no snapshot yet),
/// `BLOCKSIEVE_BUFFER_TOO_SMALL` (a text did not fit; the verdict is valid)
/// or `BLOCKSIEVE_INVALID_ARGUMENT`. A failed full-hash request is not an
/// error but a `BLOCKSIEVE_UNVERIFIED` verdict.
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
        // SAFETY: the caller's guarantee, passed on.
        let handle = unsafe { handle(agent) }?;
        // SAFETY: the caller's guarantee on `url`, passed on.
        let url = unsafe { text(url, url_len, "url") }?;
        let out_verdict = out_ptr(out_verdict, "out_verdict")?;
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
        let answer = handle.check(url)?;
        // SAFETY: non-NULL and aligned (checked), writable by the caller's
        // guarantee; `write` reads nothing of the old contents.
        unsafe { out_verdict.write(answer.verdict) };
        let mut outcome = Ok(());
        if !list.is_null() {
            // SAFETY: non-NULL, with `list_capacity` writable bytes by the
            // caller's guarantee.
            outcome = unsafe { write_text(list, list_capacity, &answer.list, "list") };
        }
        if !expression.is_null() {
            // SAFETY: as above, for `expression`.
            let written =
                unsafe { write_text(expression, expression_capacity, &answer.expression, "expression") };
            outcome = outcome.and(written);
        }
        outcome
    })
}

/// Starts the background updates on the agent's worker thread: every list
/// is checked on the publisher's schedule (its next-check hint, else
/// `update_interval_seconds`), with exponential backoff after failures,
/// until `blocksieve_agent_stop_updates` or `blocksieve_agent_free`.
/// Returns at once.
///
/// Returns `BLOCKSIEVE_OK`, `BLOCKSIEVE_MISCONFIGURED` (already running) or
/// `BLOCKSIEVE_INVALID_ARGUMENT`.
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
/// Returns `BLOCKSIEVE_OK` or `BLOCKSIEVE_INVALID_ARGUMENT`.
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
        handle.stop_updates();
        Ok(())
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
