//! The types of the C ABI, laid out as C lays them out (`#[repr(C)]`).
//! Their names are the C names, so that the generated header and this code
//! read the same.

#![allow(non_camel_case_types)]

use std::ffi::c_char;

/// The bytes a list name buffer of the ABI holds: the longest list name
/// (64 bytes of `a-z0-9_-`) and its terminating NUL.
pub const BLOCKSIEVE_LIST_NAME_CAPACITY: usize = 65;

/// The bytes a verdict's list text may need: an unverified verdict names
/// every list it could not confirm, comma-separated — at most
/// `BLOCKSIEVE_MAX_LISTS` names of 64 bytes, the commas and the NUL (2080).
/// An unsafe verdict names one list, which `BLOCKSIEVE_LIST_NAME_CAPACITY`
/// holds.
pub const BLOCKSIEVE_LIST_TEXT_CAPACITY: usize = 2080;

/// The length of a full hash (SHA-256 of an expression), in bytes.
pub const BLOCKSIEVE_FULL_HASH_BYTES: usize = 32;

/// `blocksieve_config.failure_policy`: a prefix hit whose full hashes cannot
/// be had is `BLOCKSIEVE_UNVERIFIED` with `block = false` (what browsers
/// do: most prefix hits are false positives).
pub const BLOCKSIEVE_FAIL_OPEN: u32 = 0;

/// `blocksieve_config.failure_policy`: a prefix hit whose full hashes cannot
/// be had is `BLOCKSIEVE_UNVERIFIED` with `block = true`, for settings that
/// prefer an occasional false block to any chance of a miss.
pub const BLOCKSIEVE_FAIL_CLOSED: u32 = 1;

/// What every function returns. `BLOCKSIEVE_OK` is 0; on any other value
/// `blocksieve_last_error` says what went wrong, and out-parameters hold
/// nothing usable unless the function says otherwise
/// (`BLOCKSIEVE_BUFFER_TOO_SMALL` reports the size needed). The values are
/// stable; later versions may add values, so treat an unknown one as a
/// failure.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum blocksieve_status {
    /// Success.
    BLOCKSIEVE_OK = 0,
    /// A required pointer was NULL, a pointer was misaligned, a string was
    /// not UTF-8, or a value was out of range: a bug in the caller.
    BLOCKSIEVE_INVALID_ARGUMENT = 1,
    /// The URL cannot be canonicalized: it names no host (or an invalid
    /// one), or it is longer than 2 MiB (2,097,152 bytes, each byte that is
    /// not UTF-8 counted as the three of its percent-escape), whatever its
    /// host.
    /// It is neither safe nor unsafe (never treat it as safe); report it to
    /// whoever supplied it.
    BLOCKSIEVE_INVALID_URL = 2,
    /// A threat list has no snapshot yet, and the lists that have one do
    /// not confirm the URL unsafe, so the agent cannot answer: run
    /// `blocksieve_agent_update` first.
    BLOCKSIEVE_NOT_READY = 3,
    /// The publisher (or the caller, for `blocksieve_snapshot_verify`) gave
    /// malformed, forged, rolled-back, expired or oversized data. The agent
    /// keeps the filter it has; retrying the same download will not help.
    BLOCKSIEVE_BAD_DATA = 4,
    /// A request failed, timed out or got an HTTP error: retry later.
    BLOCKSIEVE_TRANSPORT = 5,
    /// The cache directory could not be written or held a corrupt file; the
    /// agent keeps working from memory. Fix the disk.
    BLOCKSIEVE_STORAGE = 6,
    /// The configuration is invalid (base URL, list name, trusted key, cache
    /// directory, a setting out of range), the cache directory is in use by
    /// another agent, or background updates are already running. Fail at
    /// start.
    BLOCKSIEVE_MISCONFIGURED = 7,
    /// An output buffer is too small; nothing was written to it (a text
    /// buffer of at least one byte holds an empty string). The length
    /// out-parameter holds the size needed. Never returned by a check: a
    /// verdict's texts are cut to their buffers and the status is
    /// `BLOCKSIEVE_OK` (see `blocksieve_verdict`).
    BLOCKSIEVE_BUFFER_TOO_SMALL = 8,
    /// The library panicked (a bug in it). The panic was stopped at the
    /// boundary; the handle involved should be freed and not used again.
    BLOCKSIEVE_PANIC = 9,
    /// A failure outside the groups above, such as the system refusing a
    /// thread for the agent's runtime; the last error says what.
    BLOCKSIEVE_INTERNAL = 10,
}

/// How an agent was able to answer a URL check.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum blocksieve_verdict_kind {
    /// No expression of the URL is on a subscribed threat list (no prefix
    /// hit, or every hit was refuted by the publisher's full hashes).
    BLOCKSIEVE_SAFE = 0,
    /// The publisher confirmed that the full hash of one of the URL's
    /// expressions is on a subscribed threat list.
    BLOCKSIEVE_UNSAFE = 1,
    /// A hash prefix hit but its full hashes could not be had (the
    /// publisher is unreachable or paused by backoff): neither safe nor
    /// unsafe. `block` carries the failure policy's advice.
    BLOCKSIEVE_UNVERIFIED = 2,
}

/// The answer of `blocksieve_agent_check` and of a session's checks
/// (`blocksieve_session_check`, `_complete_check`, `_fail_check`), written
/// whole by the library (the caller need not initialize it). A check
/// writes a placeholder first, before reading its other arguments, and
/// leaves it when it returns no verdict (a query to send, an error, a
/// refused argument such as a NULL URL):
/// `BLOCKSIEVE_UNVERIFIED` with `block` true and no texts, so that a caller
/// that skips the status never reads "safe".
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct blocksieve_verdict {
    /// Safe, unsafe or unverified.
    pub kind: blocksieve_verdict_kind,
    /// Whether a snapshot used had expired: the answer is only as recent as
    /// that snapshot.
    pub stale: bool,
    /// Whether the caller should block the URL: it is unsafe, or unverified
    /// under `BLOCKSIEVE_FAIL_CLOSED`.
    pub block: bool,
    /// `BLOCKSIEVE_UNSAFE`: the matching full hash (SHA-256 of the
    /// expression), as the publisher returned it. Zeros otherwise.
    pub full_hash: [u8; BLOCKSIEVE_FULL_HASH_BYTES],
    /// Length in bytes, without the terminating NUL, of the list text:
    /// `BLOCKSIEVE_UNSAFE`: the threat list (the first in subscription
    /// order if several); `BLOCKSIEVE_UNVERIFIED`: the lists whose filters
    /// hit, joined by `,`; `BLOCKSIEVE_SAFE`: 0. The whole text needs
    /// `list_len + 1` bytes; a smaller buffer holds its beginning (cut as
    /// `snprintf` cuts), the status still `BLOCKSIEVE_OK`.
    pub list_len: usize,
    /// Length in bytes, without the terminating NUL, of the matching
    /// expression (`BLOCKSIEVE_UNSAFE`, e.g. `evil.example/login`; the
    /// first in expression order); 0 otherwise. The whole text needs
    /// `expression_len + 1` bytes; a smaller buffer holds its beginning.
    pub expression_len: usize,
}

impl blocksieve_verdict {
    /// What a check writes to `*out_verdict` before anything else, and
    /// leaves there when it returns no verdict (a query to send, an error):
    /// `BLOCKSIEVE_UNVERIFIED` with `block` set, no texts. Not a verdict to
    /// act on, but never read as safe by a caller that skips the status.
    pub const PLACEHOLDER: Self = Self {
        kind: blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED,
        stale: false,
        block: true,
        full_hash: [0; BLOCKSIEVE_FULL_HASH_BYTES],
        list_len: 0,
        expression_len: 0,
    };
}

/// The signed header fields of a verified snapshot, from
/// `blocksieve_snapshot_verify`. Times are Unix seconds.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct blocksieve_snapshot_info {
    /// The threat list the snapshot describes, NUL-terminated.
    pub list_name: [c_char; BLOCKSIEVE_LIST_NAME_CAPACITY],
    /// The snapshot version, strictly increasing per list.
    pub version: u64,
    /// When the snapshot was built, Unix seconds.
    pub created_at: u64,
    /// When the snapshot stops being current, Unix seconds.
    pub expires_at: u64,
    /// The number of distinct keys (hash prefixes) in the filter.
    pub entry_count: u64,
    /// The number of distinct full hashes on the list.
    pub full_hash_count: u64,
    /// The length of the hash prefix, in bits, this list advertises for
    /// the full-hash endpoint (an agent subscribed to several lists sends
    /// the longest of theirs).
    pub request_prefix_bits: u8,
    /// The id (first 8 bytes of SHA-256 of the public key) of the key that
    /// signed the snapshot.
    pub key_id: [u8; 8],
}

/// The state of one subscribed threat list, from `blocksieve_agent_status`.
/// Times are Unix seconds, durations seconds.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct blocksieve_list_status {
    /// The list name, NUL-terminated.
    pub name: [c_char; BLOCKSIEVE_LIST_NAME_CAPACITY],
    /// Whether the list has a snapshot; when false, `version`, `created_at`,
    /// `expires_at` and `age_seconds` are 0 and checks answer
    /// `BLOCKSIEVE_NOT_READY` (unless another list confirms the URL unsafe).
    pub has_snapshot: bool,
    /// The version the list's filter stands for (its snapshot's, or that of
    /// the last delta applied to it).
    pub version: u64,
    /// When the snapshot in use was built, Unix seconds.
    pub created_at: u64,
    /// Until when the filter is fresh, Unix seconds.
    pub expires_at: u64,
    /// How old the snapshot in use is, in seconds.
    pub age_seconds: u64,
    /// Whether the snapshot in use has expired by this agent's clock: it is
    /// still used, and every verdict based on it is marked stale.
    pub stale: bool,
    /// Update attempts of this list failed in a row; 0 after a success.
    pub consecutive_failures: u32,
    /// Whether the last update attempt failed.
    pub last_update_failed: bool,
}

/// The settings of `blocksieve_agent_new`. Strings are NUL-terminated UTF-8
/// and only read during the call (the caller keeps ownership).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct blocksieve_config {
    /// The publisher base URL, e.g. `https://publisher.example` (plain
    /// `http://` only to the loopback interface). Required.
    pub base_url: *const c_char,
    /// The threat lists to subscribe to: `lists_len` names of 1-64 bytes of
    /// `a-z0-9_-`. At least one is required.
    pub lists: *const *const c_char,
    /// The number of entries of `lists`, 1 to `BLOCKSIEVE_MAX_LISTS`.
    pub lists_len: usize,
    /// The publisher keys trusted to sign snapshots, base64 of 32 bytes (as
    /// `blocksieve-publisher keygen` prints them) or 64 hex digits. At least
    /// one is required.
    pub trusted_keys: *const *const c_char,
    /// The number of entries of `trusted_keys`.
    pub trusted_keys_len: usize,
    /// A directory where verified snapshots are kept across restarts, so
    /// that a new agent answers before reaching the network; created if
    /// missing. One agent per directory: the agent locks it (an advisory
    /// lock on the file `lock` there) until it is freed or its process
    /// ends, crashed or not, and a second agent on it, of this process or
    /// another, is refused (`BLOCKSIEVE_MISCONFIGURED`, the last error
    /// naming the directory and the holder's process id). NULL: none (the
    /// agent starts empty and must update first). An empty string is
    /// refused (`BLOCKSIEVE_MISCONFIGURED`).
    pub cache_dir: *const c_char,
    /// `BLOCKSIEVE_FAIL_OPEN` (0) or `BLOCKSIEVE_FAIL_CLOSED` (1).
    pub failure_policy: u32,
    /// The wait between background update checks when the publisher gives
    /// no hint, in seconds; 0 for the default (10 minutes).
    pub update_interval_seconds: u64,
    /// The longest a full-hash request or list query may take from
    /// connecting to the end of its body (and a snapshot download to
    /// connect), in milliseconds, at most one day; 0 for the default (10
    /// seconds). A check whose confirmation times out answers unverified.
    pub request_timeout_ms: u64,
    /// The longest one snapshot or delta download may take in total, in
    /// milliseconds, at most one day; 0 for the default (5 minutes): what
    /// `blocksieve_agent_update` waits at most, per list and mirror, for a
    /// publisher that accepts the connection and never answers.
    pub snapshot_timeout_ms: u64,
}

/// An agent: the verified filters of its threat lists, their updates, the
/// full-hash cache, and the threads that run its requests. Created by
/// `blocksieve_agent_new`, released by `blocksieve_agent_free`; opaque.
pub struct blocksieve_agent {
    pub(crate) inner: crate::agent::Handle,
}

/// The most threat lists one `blocksieve_session` subscribes to, and so the
/// most requests of one update round: 32.
pub const BLOCKSIEVE_MAX_LISTS: usize = 32;

/// The length of the random seed that `blocksieve_session_check` and the
/// functions completing a check take, in bytes.
pub const BLOCKSIEVE_SEED_BYTES: usize = 32;

/// The settings of `blocksieve_session_new`. Strings are NUL-terminated
/// UTF-8 and only read during the call (the caller keeps ownership).
/// Numbers left 0 take their default.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct blocksieve_session_config {
    /// The publisher base URL, e.g. `https://publisher.example` (plain
    /// `http://` only to the loopback interface, unless
    /// `dangerous_allow_plain_http`). Required.
    pub base_url: *const c_char,
    /// The threat lists to subscribe to: `lists_len` names of 1-64 bytes of
    /// `a-z0-9_-`, 1 to `BLOCKSIEVE_MAX_LISTS`.
    pub lists: *const *const c_char,
    /// The number of entries of `lists`.
    pub lists_len: usize,
    /// The publisher keys trusted to sign snapshots and deltas, base64 of 32
    /// bytes (as `blocksieve-publisher keygen` prints them) or 64 hex
    /// digits. At least one.
    pub trusted_keys: *const *const c_char,
    /// The number of entries of `trusted_keys`.
    pub trusted_keys_len: usize,
    /// `BLOCKSIEVE_FAIL_OPEN` (0) or `BLOCKSIEVE_FAIL_CLOSED` (1).
    pub failure_policy: u32,
    /// Random hash prefixes added to each full-hash request, at most 64;
    /// 0 for the default, 4.
    pub noise_prefixes: u32,
    /// The full-hash cache's budget in bytes; 0 for the default, 4 MiB.
    pub full_hash_cache_bytes: usize,
    /// The most bytes of a snapshot or delta chain response accepted, at
    /// most 4 GiB; 0 for the default, 256 MiB. A larger response is refused
    /// with `BLOCKSIEVE_BAD_DATA`.
    pub max_snapshot_bytes: u64,
    /// Accept `http://` to hosts other than the loopback: full-hash answers
    /// can then be tampered with on the way. By default (false), refused.
    pub dangerous_allow_plain_http: bool,
}

/// One response header, as the host received it: NUL-terminated name (any
/// case) and value. Bytes that are not UTF-8 are replaced by U+FFFD.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct blocksieve_header {
    /// The header name, e.g. `ETag`.
    pub name: *const c_char,
    /// The header value, without the line's `\r\n`.
    pub value: *const c_char,
}

/// What an update response did to its threat list.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum blocksieve_update_kind {
    /// A newer snapshot or delta chain verified and was swapped in.
    BLOCKSIEVE_UPDATE_UPDATED = 0,
    /// The publisher has nothing newer than the version held (`304`, an
    /// empty chain, the same snapshot).
    BLOCKSIEVE_UPDATE_UNCHANGED = 1,
    /// No usable delta chain, or an answer that would keep the version held
    /// (a `304`, an empty chain) while a signed freshness record of this round
    /// names a newer one (the ETag sent was stale, or a cache is behind): send
    /// the whole-snapshot request returned beside the result in the same
    /// round. The list keeps its state.
    BLOCKSIEVE_UPDATE_NEED_SNAPSHOT = 2,
    /// The response was refused (HTTP error, forged, rolled back, oversized)
    /// or the host could not send the request. The list keeps its state;
    /// the status and last error say why.
    BLOCKSIEVE_UPDATE_FAILED = 3,
}

/// The outcome of one update response, written whole by the library.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct blocksieve_update_result {
    /// The threat list, NUL-terminated.
    pub list: [c_char; BLOCKSIEVE_LIST_NAME_CAPACITY],
    /// What happened.
    pub kind: blocksieve_update_kind,
    /// Whether a version was held before the response (`previous` is 0
    /// otherwise).
    pub has_previous: bool,
    /// The version held before the response.
    pub previous: u64,
    /// Whether a version is held now (`version` is 0 otherwise).
    pub has_version: bool,
    /// The version held now.
    pub version: u64,
}

/// The counters of a `blocksieve_session` since it was made.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct blocksieve_session_stats {
    /// URLs checked (valid ones, with every list loaded).
    pub lookups: u64,
    /// Checks with at least one local hash prefix hit.
    pub prefix_hits: u64,
    /// Full-hash requests handed to the host.
    pub full_hash_requests: u64,
    /// Full-hash requests that failed (transport, status, bad answer: one
    /// that does not parse, or leaves a prefix asked about without a
    /// readable result).
    pub full_hash_failures: u64,
    /// Request prefixes answered from the full-hash cache.
    pub cache_hits: u64,
    /// Prefix hits the publisher's full hashes confirmed.
    pub confirmed_unsafe: u64,
    /// Prefix hits the publisher's full hashes refuted.
    pub false_prefix_hits: u64,
    /// Prefix hits left unverified.
    pub unverified: u64,
    /// Whole snapshots verified and swapped in.
    pub snapshots_applied: u64,
    /// Deltas verified and applied.
    pub deltas_applied: u64,
    /// Update requests for deltas that ended in a whole-snapshot request.
    pub delta_fallbacks: u64,
    /// Update responses refused, and update requests the host reported it
    /// could not send (the list kept its state either way).
    pub updates_failed: u64,
    /// Lists restored from saved bytes (`blocksieve_session_restore`).
    pub restored: u64,
    /// Of those, lists whose snapshot had already expired when restored:
    /// their verdicts say `stale` until an update brings a newer one.
    pub restored_stale: u64,
}

/// A session: the agent's state and decisions — each threat list's
/// verified filter, ETag and rollback floor, the full-hash cache and
/// backoff — driven by the host's own HTTP stack. Created by
/// `blocksieve_session_new`, released by `blocksieve_session_free`; opaque.
pub struct blocksieve_session {
    pub(crate) inner: crate::session::Handle,
}

/// An HTTP request for the host to send as it is (method, URL, headers,
/// body): an update request from `blocksieve_session_update_requests` or
/// `blocksieve_session_handle_update_response` (freed by
/// `blocksieve_request_free`), or a full-hash search borrowed from its
/// `blocksieve_query`. Opaque.
pub struct blocksieve_request {
    pub(crate) inner: crate::session::Request,
}

/// What to keep of one threat list across restarts, from
/// `blocksieve_session_save`: three byte strings, read with
/// `blocksieve_saved_snapshot`, `_chain` and `_record`, valid until
/// `blocksieve_saved_free`. Independent of the session once made. Opaque.
pub struct blocksieve_saved {
    pub(crate) inner: ::blocksieve_agent::engine::session::SavedList,
}

/// A check waiting for the publisher's full hashes: send its request
/// (`blocksieve_query_request`) and hand the response to
/// `blocksieve_session_complete_check`, which consumes the query. Opaque.
pub struct blocksieve_query {
    pub(crate) inner: crate::session::Query,
}
