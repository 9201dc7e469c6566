//! The Python binding of the blocksieve agent: the `blocksieve` module.
//!
//! Principal types and how data flows between them:
//!
//! 1. [`agent::Agent`] (blocking) and [`agent::AsyncAgent`] (asyncio) wrap
//!    one [`blocksieve_agent::Agent`] each: Python hands in the publisher,
//!    the threat lists and the trusted key, and the wrapper builds the agent
//!    and runs its futures on the binding's own tokio runtime
//!    ([`runtime`]) — blocking calls with the GIL released, asyncio calls as
//!    awaitables completed from that runtime.
//! 2. The agent's answers become plain, immutable Python objects
//!    ([`types`]): a [`types::Verdict`] per URL, an [`types::UpdateReport`]
//!    per update round and a [`types::Status`].
//! 3. Every [`blocksieve_agent::Error`] becomes a `BlocksieveError`
//!    subclass named for its [`blocksieve_agent::ErrorKind`] ([`errors`]).
//! 4. [`url`] gives the sans-I/O functions: canonicalization, expressions
//!    and full hashes, as the agent computes them.
//!
//! No panic is expected on any input; pyo3 would turn one into a Python
//! `PanicException` rather than unwind into the interpreter.

mod agent;
mod errors;
mod runtime;
mod types;
mod url;

use pyo3::prelude::*;

/// The `blocksieve` module: registers the classes, functions and errors.
#[pymodule]
#[pyo3(name = "blocksieve")]
fn blocksieve_python(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<agent::Agent>()?;
    m.add_class::<agent::AsyncAgent>()?;
    m.add_class::<types::Verdict>()?;
    m.add_class::<types::UpdateReport>()?;
    m.add_class::<types::ListUpdate>()?;
    m.add_class::<types::Status>()?;
    m.add_class::<types::ListStatus>()?;
    m.add_function(wrap_pyfunction!(url::canonicalize, m)?)?;
    m.add_function(wrap_pyfunction!(url::expressions, m)?)?;
    m.add_function(wrap_pyfunction!(url::full_hashes, m)?)?;
    errors::register(m)?;
    // Before the interpreter finalizes: see `runtime::at_exit`.
    let at_exit = wrap_pyfunction!(runtime::at_exit, m)?;
    m.py().import("atexit")?.call_method1("register", (at_exit,))?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
