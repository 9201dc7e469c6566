//! `blocksieve.Agent` (blocking) and `blocksieve.AsyncAgent` (asyncio):
//! both hold a [`Core`], the Rust agent and its background updates.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use blocksieve_agent::{FailurePolicy, UpdateHandle};
use blocksieve_format::TrustedKey;
use pyo3::prelude::*;

use crate::errors::{BlocksieveError, closed, misconfigured, to_py, to_py_for_url};
use crate::runtime::{self, BindingRuntime};
use crate::types::{Status, UpdateReport, Verdict};
use crate::url::UrlArg;

/// The trusted publisher key or keys, as given from Python: one base64
/// Ed25519 public key, or several during a key rotation.
#[derive(FromPyObject)]
enum Keys {
    /// One key.
    One(String),
    /// Several keys; a snapshot signed by any of them is trusted.
    Many(Vec<String>),
}

/// The constructor's arguments, shared by both agent classes.
struct Options {
    /// The publisher's base URL.
    publisher: String,
    /// The subscribed threat lists.
    lists: Vec<String>,
    /// The trusted keys.
    keys: Keys,
    /// Where snapshots are kept across restarts.
    cache_dir: Option<PathBuf>,
    /// `"open"` or `"closed"`.
    failure_policy: String,
    /// Further publisher base URLs, tried in order.
    mirrors: Vec<String>,
    /// The timeout of each request, in seconds.
    request_timeout: Option<f64>,
    /// The timeout of a whole snapshot download, in seconds.
    snapshot_timeout: Option<f64>,
    /// The background update interval without a publisher hint, in seconds.
    update_interval: Option<f64>,
    /// The full-hash cache size, in bytes.
    full_hash_cache_bytes: Option<usize>,
    /// The `User-Agent` header.
    user_agent: Option<String>,
}

/// `seconds` as a duration, for setting `name`.
fn seconds(name: &str, seconds: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        // Negative or NaN, else too large (infinite, or past 2^64 s).
        let (must, shown) = if seconds.is_nan() || seconds < 0.0 {
            ("a non-negative number of seconds", format!("{seconds}"))
        } else {
            ("a finite number of seconds under 2^64", format!("{seconds:e}"))
        };
        misconfigured(format!("{name} must be {must}, got {shown}"))
    })
}

impl Options {
    /// Validates the options and builds the agent (reading a cache
    /// directory's snapshots, if any, with the GIL released).
    fn build(self, py: Python<'_>) -> PyResult<Core> {
        // Started now, so that a runtime failure shows at construction.
        runtime::not_exiting()?;
        runtime::get()?;
        let keys = match self.keys {
            Keys::One(key) => vec![key],
            Keys::Many(keys) => keys,
        };
        let keys = keys
            .iter()
            .map(|k| {
                TrustedKey::from_base64_or_hex(k)
                    .map_err(|e| misconfigured(format!("invalid publisher key {k:?}: {e}")))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let policy = match self.failure_policy.as_str() {
            "open" => FailurePolicy::FailOpen,
            "closed" => FailurePolicy::FailClosed,
            other => {
                return Err(misconfigured(format!(
                    "failure_policy must be \"open\" or \"closed\", got {other:?}"
                )));
            }
        };
        let mut builder = blocksieve_agent::Agent::builder(self.publisher)
            .lists(self.lists)
            .trusted_keys(keys)
            .failure_policy(policy);
        for mirror in self.mirrors {
            builder = builder.mirror(mirror);
        }
        if let Some(dir) = self.cache_dir {
            builder = builder.cache_dir(dir);
        }
        if let Some(timeout) = self.request_timeout {
            builder = builder.request_timeout(seconds("request_timeout", timeout)?);
        }
        if let Some(timeout) = self.snapshot_timeout {
            builder = builder.snapshot_timeout(seconds("snapshot_timeout", timeout)?);
        }
        if let Some(interval) = self.update_interval {
            builder = builder.update_interval(seconds("update_interval", interval)?);
        }
        if let Some(limit) = self.full_hash_cache_bytes {
            builder = builder.full_hash_cache_bytes(limit);
        }
        if let Some(user_agent) = self.user_agent {
            builder = builder.user_agent(user_agent);
        }
        let agent = py.detach(|| builder.build()).map_err(|e| to_py(&e))?;
        Ok(Core {
            state: Mutex::new(Some(State { agent, updates: None })),
            process: std::process::id(),
        })
    }
}

/// A live agent: the Rust agent and, once started, its background updates.
struct State {
    /// The agent (a cheap handle; clones share it).
    agent: blocksieve_agent::Agent,
    /// The background updates, while running: dropping it stops them.
    updates: Option<UpdateHandle>,
}

/// What both agent classes hold: the state, or `None` once closed. The
/// lock is held only to copy the agent handle or to start or take the
/// updates, never across a request.
struct Core {
    /// The agent, until `close()`.
    state: Mutex<Option<State>>,
    /// The process that made it: its connections, timers and background
    /// task are on that process's runtime, whose threads a child of
    /// `fork()` does not have.
    process: u32,
}

impl Core {
    /// The lock, also after a panic elsewhere (the state stays consistent:
    /// every change is a single assignment).
    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The error of an agent used in a child of `fork()` made by its
    /// parent: every call would wait forever on the parent's runtime.
    fn same_process(&self) -> PyResult<()> {
        if self.process == std::process::id() {
            return Ok(());
        }
        Err(BlocksieveError::new_err(format!(
            "the agent was created in process {} before fork(); agents cannot be used in a forked \
             child: create them after forking (the child's own agents work)",
            self.process
        )))
    }

    /// A handle to the agent, or the error of a closed agent (or of one
    /// made before `fork()`, in the child).
    fn agent(&self) -> PyResult<blocksieve_agent::Agent> {
        self.same_process()?;
        self.lock().as_ref().map(|s| s.agent.clone()).ok_or_else(closed)
    }

    /// Starts the background updates on the binding's runtime.
    fn start_updates(&self) -> PyResult<()> {
        self.same_process()?;
        let runtime = runtime::get()?;
        let mut state = self.lock();
        let state = state.as_mut().ok_or_else(closed)?;
        let _context = runtime.enter();
        let handle = state.agent.start_updates().map_err(|e| to_py(&e))?;
        state.updates = Some(handle);
        Ok(())
    }

    /// Marks the agent closed and hands back its background updates, if
    /// running, to be shut down. In a child of `fork()`, an agent of the
    /// parent is marked closed and left as it is: its task is on the
    /// parent's runtime, and waiting for it would never end.
    fn take_updates(&self) -> Option<UpdateHandle> {
        let state = self.lock().take();
        if self.same_process().is_err() {
            std::mem::forget(state);
            return None;
        }
        state.and_then(|s| s.updates)
    }

    /// The status, or the error of a closed agent.
    fn status(&self) -> PyResult<Status> {
        Ok(Status::from_agent(&self.agent()?.status()))
    }

    /// The threat lists, in subscription order.
    fn lists(&self) -> PyResult<Vec<String>> {
        Ok(self.agent()?.lists().map(str::to_owned).collect())
    }
}

impl Drop for Core {
    /// An agent of the parent, collected in a child of `fork()`: left as it
    /// is, as `close()` leaves it (its parts belong to the parent's runtime).
    fn drop(&mut self) {
        if self.same_process().is_err() {
            let state = self.lock().take();
            std::mem::forget(state);
        }
    }
}

/// The URLs of a Python iterable of `str` or `bytes` ([`UrlArg`]).
fn collect_urls(urls: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    // A string is iterable too: its characters are not URLs.
    if urls.is_instance_of::<pyo3::types::PyString>() || urls.is_instance_of::<pyo3::types::PyBytes>() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "check_many takes an iterable of URLs, not one URL (use check)",
        ));
    }
    urls.try_iter()?
        .map(|url| Ok(url?.extract::<UrlArg>()?.0))
        .collect()
}

/// One URL's answer in `check_many(..., return_exceptions=True)`: its
/// verdict, or its error as an exception object in the list (as
/// `asyncio.gather(..., return_exceptions=True)` gives them).
pub(crate) enum Checked {
    Verdict(Verdict),
    Error(PyErr),
}

impl<'py> IntoPyObject<'py> for Checked {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Self::Verdict(verdict) => Ok(Bound::new(py, verdict)?.into_any()),
            Self::Error(error) => Ok(error.into_value(py).into_bound(py).into_any()),
        }
    }
}

/// The answers to `urls` from the agent's `results`, in order: with
/// `return_exceptions`, each URL's verdict or error; otherwise the
/// verdicts, or the first URL's error.
fn verdicts(
    urls: &[String],
    results: Vec<Result<blocksieve_agent::Verdict, blocksieve_agent::Error>>,
    return_exceptions: bool,
) -> PyResult<Vec<Checked>> {
    urls.iter()
        .zip(&results)
        .map(|(url, r)| {
            let checked = r
                .as_ref()
                .map(Verdict::from_agent)
                .map_err(|e| to_py_for_url(e, url));
            match checked {
                Ok(verdict) => Ok(Checked::Verdict(verdict)),
                Err(error) if return_exceptions => Ok(Checked::Error(error)),
                Err(error) => Err(error),
            }
        })
        .collect()
}

/// An agent that keeps verified snapshots of threat lists from a
/// blocksieve publisher and checks URLs against them, confirming every
/// hash prefix hit with the publisher's full hashes. Blocking: each call
/// releases the GIL while it waits for the network, so other Python
/// threads run meanwhile. Safe to share between threads.
#[pyclass(frozen, module = "blocksieve")]
pub(crate) struct Agent {
    /// The agent and its updates.
    core: Core,
}

#[pymethods]
impl Agent {
    /// Configures an agent; no request is sent. With `cache_dir`, the
    /// snapshots cached there are verified and loaded now, so checks answer
    /// before the first update.
    #[new]
    #[pyo3(signature = (
        publisher, lists, key, *, cache_dir=None, failure_policy="open".to_owned(), mirrors=Vec::new(),
        request_timeout=None, snapshot_timeout=None, update_interval=None, full_hash_cache_bytes=None, user_agent=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        publisher: String,
        lists: Vec<String>,
        key: Keys,
        cache_dir: Option<PathBuf>,
        failure_policy: String,
        mirrors: Vec<String>,
        request_timeout: Option<f64>,
        snapshot_timeout: Option<f64>,
        update_interval: Option<f64>,
        full_hash_cache_bytes: Option<usize>,
        user_agent: Option<String>,
    ) -> PyResult<Self> {
        let options = Options {
            publisher,
            lists,
            keys: key,
            cache_dir,
            failure_policy,
            mirrors,
            request_timeout,
            snapshot_timeout,
            update_interval,
            full_hash_cache_bytes,
            user_agent,
        };
        Ok(Self {
            core: options.build(py)?,
        })
    }

    /// Brings every threat list up to date with the publisher now.
    fn update(&self, py: Python<'_>) -> PyResult<UpdateReport> {
        let agent = self.core.agent()?;
        let runtime = runtime::get()?;
        let report = py.detach(|| runtime.block_on(agent.update()));
        report
            .map(|r| UpdateReport::from_agent(&r))
            .map_err(|e| to_py(&e))
    }

    /// Checks one URL against every subscribed threat list.
    fn check(&self, py: Python<'_>, url: UrlArg) -> PyResult<Verdict> {
        let url = url.0;
        let agent = self.core.agent()?;
        let runtime = runtime::get()?;
        let verdict = py.detach(|| runtime.block_on(agent.check_url(&url)));
        verdict
            .map(|v| Verdict::from_agent(&v))
            .map_err(|e| to_py_for_url(&e, &url))
    }

    /// Checks several URLs at once (one full-hash request for all their
    /// hits), answering in the same order: the first URL's error is
    /// raised, or with `return_exceptions=True` each URL's error is its
    /// item in the list (a URL confirmed unsafe is answered while another
    /// URL's answer is an error, e.g. `NotReadyError` while a list has no
    /// snapshot).
    #[pyo3(signature = (urls, return_exceptions = false))]
    fn check_many(
        &self,
        py: Python<'_>,
        urls: &Bound<'_, PyAny>,
        return_exceptions: bool,
    ) -> PyResult<Vec<Checked>> {
        let urls = collect_urls(urls)?;
        let agent = self.core.agent()?;
        let runtime = runtime::get()?;
        let results = py.detach(|| runtime.block_on(agent.check_urls(&urls)));
        verdicts(&urls, results, return_exceptions)
    }

    /// Every threat list's snapshot and update state, and the counters.
    fn status(&self) -> PyResult<Status> {
        self.core.status()
    }

    /// Starts the background updates.
    fn start_updates(&self) -> PyResult<()> {
        self.core.start_updates()
    }

    /// Stops the background updates and closes the agent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(updates) = self.core.take_updates() {
            let runtime = runtime::get()?;
            py.detach(|| runtime.block_on(updates.shutdown()));
        }
        Ok(())
    }

    /// The subscribed threat lists, in subscription order.
    #[getter]
    fn lists(&self) -> PyResult<Vec<String>> {
        self.core.lists()
    }

    /// Whether `close()` has been called.
    #[getter]
    fn closed(&self) -> bool {
        self.core.lock().is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.core.agent() {
            Ok(agent) => format!(
                "Agent(publisher={:?}, lists={:?})",
                agent.base_url(),
                agent.lists().collect::<Vec<_>>()
            ),
            Err(_) => "Agent(closed)".to_owned(),
        }
    }
}

/// The asyncio agent: the same agent as `Agent`, whose network calls are
/// awaitables completed from the binding's runtime, so the event loop is
/// never blocked. Safe to share between threads and event loops.
#[pyclass(frozen, module = "blocksieve")]
pub(crate) struct AsyncAgent {
    /// The agent and its updates.
    core: Core,
}

#[pymethods]
impl AsyncAgent {
    /// Configures an agent, as `Agent(...)` does; no request is sent.
    #[new]
    #[pyo3(signature = (
        publisher, lists, key, *, cache_dir=None, failure_policy="open".to_owned(), mirrors=Vec::new(),
        request_timeout=None, snapshot_timeout=None, update_interval=None, full_hash_cache_bytes=None, user_agent=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        publisher: String,
        lists: Vec<String>,
        key: Keys,
        cache_dir: Option<PathBuf>,
        failure_policy: String,
        mirrors: Vec<String>,
        request_timeout: Option<f64>,
        snapshot_timeout: Option<f64>,
        update_interval: Option<f64>,
        full_hash_cache_bytes: Option<usize>,
        user_agent: Option<String>,
    ) -> PyResult<Self> {
        let options = Options {
            publisher,
            lists,
            keys: key,
            cache_dir,
            failure_policy,
            mirrors,
            request_timeout,
            snapshot_timeout,
            update_interval,
            full_hash_cache_bytes,
            user_agent,
        };
        Ok(Self {
            core: options.build(py)?,
        })
    }

    /// Brings every threat list up to date with the publisher now.
    fn update<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let agent = self.core.agent()?;
        runtime::not_exiting()?;
        runtime::get()?;
        pyo3_async_runtimes::generic::future_into_py::<BindingRuntime, _, _>(py, async move {
            let report = agent.update().await.map_err(|e| to_py(&e))?;
            Ok(UpdateReport::from_agent(&report))
        })
    }

    /// Checks one URL against every subscribed threat list.
    fn check<'py>(&self, py: Python<'py>, url: UrlArg) -> PyResult<Bound<'py, PyAny>> {
        let url = url.0;
        let agent = self.core.agent()?;
        runtime::not_exiting()?;
        runtime::get()?;
        pyo3_async_runtimes::generic::future_into_py::<BindingRuntime, _, _>(py, async move {
            let verdict = agent.check_url(&url).await.map_err(|e| to_py_for_url(&e, &url))?;
            Ok(Verdict::from_agent(&verdict))
        })
    }

    /// Checks several URLs at once, answering in the same order (see
    /// `Agent.check_many`, `return_exceptions` included).
    #[pyo3(signature = (urls, return_exceptions = false))]
    fn check_many<'py>(
        &self,
        py: Python<'py>,
        urls: &Bound<'py, PyAny>,
        return_exceptions: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let urls = collect_urls(urls)?;
        let agent = self.core.agent()?;
        runtime::not_exiting()?;
        runtime::get()?;
        pyo3_async_runtimes::generic::future_into_py::<BindingRuntime, _, _>(py, async move {
            let results = agent.check_urls(&urls).await;
            verdicts(&urls, results, return_exceptions)
        })
    }

    /// Every threat list's snapshot and update state, and the counters.
    fn status(&self) -> PyResult<Status> {
        self.core.status()
    }

    /// Starts the background updates.
    fn start_updates(&self) -> PyResult<()> {
        self.core.start_updates()
    }

    /// Stops the background updates and closes the agent.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let updates = self.core.take_updates();
        runtime::not_exiting()?;
        runtime::get()?;
        pyo3_async_runtimes::generic::future_into_py::<BindingRuntime, _, _>(py, async move {
            if let Some(updates) = updates {
                updates.shutdown().await;
            }
            Ok(())
        })
    }

    /// The subscribed threat lists, in subscription order.
    #[getter]
    fn lists(&self) -> PyResult<Vec<String>> {
        self.core.lists()
    }

    /// Whether `close()` has been called.
    #[getter]
    fn closed(&self) -> bool {
        self.core.lock().is_none()
    }

    fn __aenter__<'py>(slf: Py<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        runtime::not_exiting()?;
        runtime::get()?;
        pyo3_async_runtimes::generic::future_into_py::<BindingRuntime, _, _>(py, async move { Ok(slf) })
    }

    #[pyo3(signature = (*_exc))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc: &Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let updates = self.core.take_updates();
        runtime::not_exiting()?;
        runtime::get()?;
        pyo3_async_runtimes::generic::future_into_py::<BindingRuntime, _, _>(py, async move {
            if let Some(updates) = updates {
                updates.shutdown().await;
            }
            Ok(false)
        })
    }

    fn __repr__(&self) -> String {
        match self.core.agent() {
            Ok(agent) => format!(
                "AsyncAgent(publisher={:?}, lists={:?})",
                agent.base_url(),
                agent.lists().collect::<Vec<_>>()
            ),
            Err(_) => "AsyncAgent(closed)".to_owned(),
        }
    }
}
