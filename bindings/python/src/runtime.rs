//! The binding's tokio runtime: one multi-threaded runtime per process,
//! started by the first agent, on which every agent's HTTP, updates and
//! full-hash requests run. Blocking calls wait on it with the GIL released;
//! asyncio calls are completed from it ([`BindingRuntime`], which hands
//! pyo3-async-runtimes this process's runtime).
//!
//! A child of `fork()` has none of its parent's threads: the parent's
//! runtime is useless there (left, never dropped: dropping it would wait
//! for those threads), and the first agent the child makes starts the
//! child's own. The parent's agents stay refused in the child
//! ([`crate::agent`]): their connections and timers belong to the parent's
//! runtime.

use std::cell::OnceCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

use pyo3::PyResult;
use pyo3_async_runtimes::TaskLocals;
use pyo3_async_runtimes::generic::{ContextExt, Runtime as GenericRuntime};
use tokio::runtime::Runtime;

use crate::errors::BlocksieveError;

/// Worker threads: the agent's work is I/O and short hashing, so two are
/// enough for any number of agents, and few threads are kind to the host.
const WORKER_THREADS: usize = 2;

/// This process's runtime and the process that started it. Locked only
/// with the GIL held (every caller is a Python call that has not released
/// it), so no thread holds the lock while another forks.
static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

/// This process's runtime, started on first use (in a child of `fork()`,
/// on the child's first use).
///
/// # Errors
///
/// `BlocksieveError` when the operating system refuses the runtime's
/// threads or I/O driver.
pub(crate) fn get() -> PyResult<&'static Runtime> {
    let process = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((started_by, runtime)) = *slot
        && started_by == process
    {
        return Ok(runtime);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .thread_name("blocksieve")
        .enable_all()
        .build()
        .map_err(|e| BlocksieveError::new_err(format!("cannot start the agent's runtime: {e}")))?;
    // Lives as long as the process (a parent's, in a child, is left as it is).
    let runtime: &'static Runtime = Box::leak(Box::new(runtime));
    *slot = Some((process, runtime));
    Ok(runtime)
}

tokio::task_local! {
    /// The asyncio event loop and context of the awaitable a task completes.
    static TASK_LOCALS: OnceCell<TaskLocals>;
}

/// The runtime pyo3-async-runtimes spawns the asyncio calls' futures on:
/// this process's ([`get`]). Not pyo3-async-runtimes' own tokio runtime,
/// which is set once per address space and so, in a child of `fork()`,
/// would be the parent's, without its threads: every awaitable would wait
/// forever.
pub(crate) struct BindingRuntime;

impl GenericRuntime for BindingRuntime {
    type JoinError = tokio::task::JoinError;
    type JoinHandle = tokio::task::JoinHandle<()>;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        spawner().spawn(fut)
    }

    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        spawner().spawn_blocking(f)
    }
}

impl ContextExt for BindingRuntime {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(TASK_LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS.try_with(|c| c.get().cloned()).unwrap_or_default()
    }
}

/// Where [`BindingRuntime`] spawns: this process's runtime. Every asyncio
/// method calls [`get`] (and returns its error) before it makes an
/// awaitable, so this finds the runtime started.
fn spawner() -> tokio::runtime::Handle {
    match get() {
        Ok(runtime) => runtime.handle().clone(),
        // pyo3 raises it as a `PanicException`; not reached (see above).
        Err(e) => panic!("the agent's runtime is not running: {e}"),
    }
}
