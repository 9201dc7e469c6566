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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
/// with the GIL held (every caller of [`get`] is a Python call that has not
/// released it; the runtime's own threads find their runtime without it:
/// [`spawner`]), so no thread holds the lock while another forks: a child
/// forked while a thread held it would wait for it forever at its first
/// agent.
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
        // pyo3-async-runtimes attaches to the interpreter here, to hand an
        // awaitable its result. Once the interpreter exits ([`at_exit`])
        // that is not done: a thread attaching while it finalizes is ended
        // by CPython inside Rust frames (SIGSEGV, or "Fatal Python error:
        // PyGILState_Release"). Counted before the check, so that
        // `at_exit` waits for every one that saw the interpreter running.
        spawner().spawn_blocking(move || {
            let _in_flight = InFlight::enter();
            if !EXITING.load(Ordering::SeqCst) {
                f();
            }
        })
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

/// Whether the interpreter is exiting: set by [`at_exit`].
static EXITING: AtomicBool = AtomicBool::new(false);

/// The closures [`BindingRuntime::spawn_blocking`] runs now.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// One closure of [`BindingRuntime::spawn_blocking`] running, until dropped.
struct InFlight;

impl InFlight {
    fn enter() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The error of an asyncio call made once the interpreter exits (from a
/// daemon thread's event loop): making its awaitable calls into Python,
/// where a thread that waits for the GIL while the interpreter finalizes
/// is ended inside Rust frames.
///
/// # Errors
///
/// `BlocksieveError` once [`at_exit`] has run.
pub(crate) fn not_exiting() -> PyResult<()> {
    if EXITING.load(Ordering::SeqCst) {
        return Err(BlocksieveError::new_err("the interpreter is exiting"));
    }
    Ok(())
}

/// Registered with `atexit` when the module is imported: from now on no
/// awaitable is completed from the runtime's threads, and those being
/// completed finish first (the GIL released meanwhile, for at most 2 s),
/// before the interpreter finalizes.
#[pyo3::pyfunction]
pub(crate) fn at_exit(py: pyo3::Python<'_>) {
    EXITING.store(true, Ordering::SeqCst);
    py.detach(|| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while IN_FLIGHT.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
}

/// Where [`BindingRuntime`] spawns: this process's runtime. Every asyncio
/// method calls [`get`] (and returns its error) before it makes an
/// awaitable, so this finds the runtime started. On one of the runtime's
/// threads (where pyo3-async-runtimes hands an awaitable its result), the
/// runtime it runs on, without [`RUNTIME`]'s lock (see there).
fn spawner() -> tokio::runtime::Handle {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        return handle;
    }
    match get() {
        Ok(runtime) => runtime.handle().clone(),
        // pyo3 raises it as a `PanicException`; not reached (see above).
        Err(e) => panic!("the agent's runtime is not running: {e}"),
    }
}
