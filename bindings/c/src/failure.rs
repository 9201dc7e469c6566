//! A failed call: its status and message, and the per-thread last error
//! that `blocksieve_last_error` reads.

use std::cell::RefCell;

use blocksieve_agent::ErrorKind;

use crate::types::blocksieve_status;

/// Why a call failed: the status it returns and the message
/// `blocksieve_last_error` gives for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// What the function returns.
    pub(crate) status: blocksieve_status,
    /// Lowercase, no trailing period, naming the offending value.
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: blocksieve_status, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// `BLOCKSIEVE_INVALID_ARGUMENT`: a caller bug.
    pub(crate) fn argument(message: impl Into<String>) -> Self {
        Self::new(blocksieve_status::BLOCKSIEVE_INVALID_ARGUMENT, message)
    }

    /// `BLOCKSIEVE_BUFFER_TOO_SMALL` for an output of `what`.
    pub(crate) fn too_small(what: &str, capacity: usize, needed: usize) -> Self {
        Self::new(
            blocksieve_status::BLOCKSIEVE_BUFFER_TOO_SMALL,
            format!("{what} buffer holds {capacity} bytes, {needed} needed"),
        )
    }
}

impl From<blocksieve_agent::Error> for Failure {
    fn from(e: blocksieve_agent::Error) -> Self {
        use blocksieve_status::*;
        let status = match e.kind() {
            ErrorKind::BadData => BLOCKSIEVE_BAD_DATA,
            ErrorKind::Transport => BLOCKSIEVE_TRANSPORT,
            ErrorKind::NotReady => BLOCKSIEVE_NOT_READY,
            ErrorKind::InvalidInput => BLOCKSIEVE_INVALID_URL,
            ErrorKind::Storage => BLOCKSIEVE_STORAGE,
            ErrorKind::Misconfigured => BLOCKSIEVE_MISCONFIGURED,
            // A group added to the agent after these bindings.
            _ => BLOCKSIEVE_INTERNAL,
        };
        Self::new(status, e.to_string())
    }
}

impl From<blocksieve_format::CanonError> for Failure {
    fn from(e: blocksieve_format::CanonError) -> Self {
        Self::new(
            blocksieve_status::BLOCKSIEVE_INVALID_URL,
            format!("invalid url: {e}"),
        )
    }
}

thread_local! {
    /// The message of the last failed call on this thread; empty after a
    /// call that succeeded.
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Records the outcome of a call for `blocksieve_last_error` and returns
/// its status.
pub(crate) fn record(outcome: Result<(), Failure>) -> blocksieve_status {
    let (status, message) = match outcome {
        Ok(()) => (blocksieve_status::BLOCKSIEVE_OK, String::new()),
        Err(f) => (f.status, f.message),
    };
    // `try_with`: during thread teardown the slot may be gone; the status
    // still reaches the caller.
    let _ = LAST_ERROR.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            *slot = message;
        }
    });
    status
}

/// A copy of this thread's last error message.
pub(crate) fn last_error() -> String {
    LAST_ERROR
        .try_with(|slot| slot.try_borrow().map(|s| s.clone()).unwrap_or_default())
        .unwrap_or_default()
}

/// The message of a caught panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    format!("panic in blocksieve: {text}")
}
