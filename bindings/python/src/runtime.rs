//! The binding's tokio runtime: one multi-threaded runtime per process,
//! started by the first agent, on which every agent's HTTP, updates and
//! full-hash requests run. Blocking calls wait on it with the GIL released;
//! asyncio calls are completed from it (pyo3-async-runtimes is handed the
//! same runtime).

use std::sync::OnceLock;

use pyo3::PyResult;
use tokio::runtime::Runtime;

use crate::errors::BlocksieveError;

/// Worker threads: the agent's work is I/O and short hashing, so two are
/// enough for any number of agents, and few threads are kind to the host.
const WORKER_THREADS: usize = 2;

/// The runtime, or why it could not be started, and the process that
/// started it.
static RUNTIME: OnceLock<(Result<Runtime, String>, u32)> = OnceLock::new();

/// The runtime, started on first use.
///
/// # Errors
///
/// `BlocksieveError` when the operating system refuses the runtime's
/// threads or I/O driver, or in a child of `fork()` after the parent
/// started the runtime: the child has none of its threads, so every call
/// would wait forever (create agents after forking, e.g. in a pre-fork
/// server's worker start hook).
pub(crate) fn get() -> PyResult<&'static Runtime> {
    let (runtime, started_by) = RUNTIME.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name("blocksieve")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the agent's runtime: {e}"));
        (runtime, std::process::id())
    });
    if *started_by != std::process::id() {
        return Err(BlocksieveError::new_err(format!(
            "the agent's runtime was started in process {started_by} before fork(); \
             agents cannot be used in a forked child: create them after forking"
        )));
    }
    match runtime {
        Ok(runtime) => {
            // Already set when an earlier call did it; the same runtime.
            let _ = pyo3_async_runtimes::tokio::init_with_runtime(runtime);
            Ok(runtime)
        }
        Err(message) => Err(BlocksieveError::new_err(message.clone())),
    }
}
