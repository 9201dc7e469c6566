//! The Python exceptions: `BlocksieveError` and one subclass per
//! [`ErrorKind`], i.e. per thing the caller does next.

use blocksieve_agent::{Error, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    blocksieve,
    BlocksieveError,
    PyException,
    "Base class of every error the agent raises."
);
create_exception!(
    blocksieve,
    BadDataError,
    BlocksieveError,
    "The publisher sent malformed, forged, rolled-back or oversized data; the current filter was kept. Report it; a retry of the same download will not help."
);
create_exception!(
    blocksieve,
    TransportError,
    BlocksieveError,
    "A request to the publisher failed or got an HTTP error. Retry later."
);
create_exception!(
    blocksieve,
    NotReadyError,
    BlocksieveError,
    "A threat list has no snapshot yet, so a URL can be answered only if the other lists confirm it unsafe. Run update() first."
);
create_exception!(
    blocksieve,
    InvalidUrlError,
    BlocksieveError,
    "The URL cannot be canonicalized (it names no host, or is over 2 MiB whatever its host). It is neither safe nor unsafe."
);
create_exception!(
    blocksieve,
    StorageError,
    BlocksieveError,
    "The cache directory failed; the agent keeps working from memory."
);
create_exception!(
    blocksieve,
    MisconfiguredError,
    BlocksieveError,
    "The agent's settings are invalid (publisher URL, threat list names, key, limits), or its cache directory is in use by another agent. Fail at start."
);

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("BlocksieveError", py.get_type::<BlocksieveError>())?;
    m.add("BadDataError", py.get_type::<BadDataError>())?;
    m.add("TransportError", py.get_type::<TransportError>())?;
    m.add("NotReadyError", py.get_type::<NotReadyError>())?;
    m.add("InvalidUrlError", py.get_type::<InvalidUrlError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("MisconfiguredError", py.get_type::<MisconfiguredError>())?;
    Ok(())
}

/// The Python exception for an agent error: the class of its kind, with
/// the error's message.
pub(crate) fn to_py(err: &Error) -> PyErr {
    let message = err.to_string();
    match err.kind() {
        ErrorKind::BadData => BadDataError::new_err(message),
        ErrorKind::Transport => TransportError::new_err(message),
        ErrorKind::NotReady => NotReadyError::new_err(message),
        ErrorKind::InvalidInput => InvalidUrlError::new_err(message),
        ErrorKind::Storage => StorageError::new_err(message),
        ErrorKind::Misconfigured => MisconfiguredError::new_err(message),
        // A kind added later: still a blocksieve error, never a crash.
        _ => BlocksieveError::new_err(message),
    }
}

/// The Python exception for an agent error about `url`: an invalid URL's
/// message names it (up to 200 characters).
pub(crate) fn to_py_for_url(err: &Error, url: &str) -> PyErr {
    if err.kind() != ErrorKind::InvalidInput {
        return to_py(err);
    }
    InvalidUrlError::new_err(format!("{err}: {}", shown_url(url)))
}

/// `url` quoted for an error message, cut after 200 characters (a URL can
/// be megabytes long).
pub(crate) fn shown_url(url: &str) -> String {
    let shown: String = url.chars().take(200).collect();
    let more = if shown.len() < url.len() { "..." } else { "" };
    format!("{shown:?}{more}")
}

/// The lowercase name of an error's kind, as `ListUpdate.error_kind` gives
/// it.
pub(crate) fn kind_name(err: &Error) -> &'static str {
    match err.kind() {
        ErrorKind::BadData => "bad_data",
        ErrorKind::Transport => "transport",
        ErrorKind::NotReady => "not_ready",
        ErrorKind::InvalidInput => "invalid_input",
        ErrorKind::Storage => "storage",
        ErrorKind::Misconfigured => "misconfigured",
        _ => "other",
    }
}

/// A [`MisconfiguredError`] for a setting given from Python.
pub(crate) fn misconfigured(message: String) -> PyErr {
    MisconfiguredError::new_err(message)
}

/// The error of a call on a closed agent.
pub(crate) fn closed() -> PyErr {
    BlocksieveError::new_err("the agent is closed")
}
