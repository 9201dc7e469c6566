//! The C ABI of the blocksieve agent, for hosts written in C or C++ (and
//! Swift or Go through C). The header `include/blocksieve.h` is generated
//! from this crate by cbindgen; `README.md` beside it describes ownership,
//! buffers, statuses and threads.
//!
//! Three layers, over the same conventions:
//!
//! 1. **Sans-I/O** ([`blocksieve_canonicalize`], [`blocksieve_expressions`],
//!    [`blocksieve_full_hashes`], [`blocksieve_snapshot_verify`]): pure
//!    functions of the bytes the host passes in, over
//!    [`blocksieve_format`]; no thread, clock or network.
//! 2. **Batteries included** ([`blocksieve_agent_new`] ...
//!    [`blocksieve_agent_free`]): an opaque [`blocksieve_agent`] handle that
//!    owns a [`Agent`](::blocksieve_agent::Agent) and the tokio runtime running its
//!    requests; every call blocks the calling thread until it is done.
//! 3. **The agent without I/O** ([`blocksieve_session_new`] ...
//!    [`blocksieve_session_free`]): an opaque [`blocksieve_session`] over
//!    the engine's [`Session`](::blocksieve_agent::engine::session::Session)
//!    for hosts with their own HTTP stack. It hands out each HTTP request
//!    as a [`blocksieve_request`] (update rounds) or inside a
//!    [`blocksieve_query`] (full-hash confirmations), takes the responses
//!    back, and answers with the same verdicts as the Rust agent; the host
//!    passes the time (Unix milliseconds) and a random seed in. A list
//!    outlives a restart through [`blocksieve_session_save`] (a
//!    [`blocksieve_saved`]: the byte strings to store) and
//!    [`blocksieve_session_restore`] (the same bytes, verified again).
//!
//! Every function returns a [`blocksieve_status`] and never unwinds into
//! the caller (a panic becomes `BLOCKSIEVE_PANIC`); outputs go into
//! caller-owned buffers (pointer and capacity in, length out); the message
//! of the last failure is kept per thread ([`blocksieve_last_error`]).
//! The unsafe code — reading the caller's pointers, writing its buffers —
//! is all in one module; [`blocksieve_status`] and the structs are in
//! another, the safe logic of each layer in its own.

mod agent;
mod failure;
mod ffi;
#[doc(hidden)]
pub mod fuzzing;
mod sansio;
mod session;
mod types;

pub use ffi::{
    blocksieve_agent_check, blocksieve_agent_free, blocksieve_agent_new, blocksieve_agent_start_updates,
    blocksieve_agent_status, blocksieve_agent_stop_updates, blocksieve_agent_update, blocksieve_canonicalize,
    blocksieve_expressions, blocksieve_full_hashes, blocksieve_last_error, blocksieve_query_free,
    blocksieve_query_request, blocksieve_request_body, blocksieve_request_free, blocksieve_request_header,
    blocksieve_request_header_count, blocksieve_request_method, blocksieve_request_url,
    blocksieve_saved_chain, blocksieve_saved_free, blocksieve_saved_record, blocksieve_saved_snapshot,
    blocksieve_session_check, blocksieve_session_complete_check, blocksieve_session_fail_check,
    blocksieve_session_free, blocksieve_session_get_stats, blocksieve_session_handle_update_failure,
    blocksieve_session_handle_update_response, blocksieve_session_list_version, blocksieve_session_new,
    blocksieve_session_restore, blocksieve_session_save, blocksieve_session_update_advised,
    blocksieve_session_update_requests, blocksieve_snapshot_verify,
};
pub use types::{
    BLOCKSIEVE_FAIL_CLOSED, BLOCKSIEVE_FAIL_OPEN, BLOCKSIEVE_FULL_HASH_BYTES, BLOCKSIEVE_LIST_NAME_CAPACITY,
    BLOCKSIEVE_LIST_TEXT_CAPACITY, BLOCKSIEVE_MAX_LISTS, BLOCKSIEVE_SEED_BYTES, blocksieve_agent,
    blocksieve_config, blocksieve_header, blocksieve_list_status, blocksieve_query, blocksieve_request,
    blocksieve_saved, blocksieve_session, blocksieve_session_config, blocksieve_session_stats,
    blocksieve_snapshot_info, blocksieve_status, blocksieve_update_kind, blocksieve_update_result,
    blocksieve_verdict, blocksieve_verdict_kind,
};
