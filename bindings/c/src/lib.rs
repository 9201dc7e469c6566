//! The C ABI of the blocksieve agent, for hosts written in C or C++ (and
//! Swift or Go through C). The header `include/blocksieve.h` is generated
//! from this crate by cbindgen; `README.md` beside it describes ownership,
//! buffers, statuses and threads.
//!
//! Two layers, over the same conventions:
//!
//! 1. **Sans-I/O** ([`blocksieve_canonicalize`], [`blocksieve_expressions`],
//!    [`blocksieve_full_hashes`], [`blocksieve_snapshot_verify`]): pure
//!    functions of the bytes the host passes in, over
//!    [`blocksieve_format`]; no thread, clock or network.
//! 2. **Batteries included** ([`blocksieve_agent_new`] ...
//!    [`blocksieve_agent_free`]): an opaque [`blocksieve_agent`] handle that
//!    owns a [`Agent`](::blocksieve_agent::Agent) and the tokio runtime running its
//!    requests; every call blocks the calling thread until it is done.
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
mod types;

pub use ffi::{
    blocksieve_agent_check, blocksieve_agent_free, blocksieve_agent_new, blocksieve_agent_start_updates,
    blocksieve_agent_status, blocksieve_agent_stop_updates, blocksieve_agent_update, blocksieve_canonicalize,
    blocksieve_expressions, blocksieve_full_hashes, blocksieve_last_error, blocksieve_snapshot_verify,
};
pub use types::{
    BLOCKSIEVE_FAIL_CLOSED, BLOCKSIEVE_FAIL_OPEN, BLOCKSIEVE_FULL_HASH_BYTES, BLOCKSIEVE_LIST_NAME_CAPACITY,
    blocksieve_agent, blocksieve_config, blocksieve_list_status, blocksieve_snapshot_info, blocksieve_status,
    blocksieve_verdict, blocksieve_verdict_kind,
};
