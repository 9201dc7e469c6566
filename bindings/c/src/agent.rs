//! The batteries-included layer: an [`Agent`] and the tokio
//! runtime that runs its requests and background updates, behind the
//! opaque `blocksieve_agent` handle.

use std::ffi::c_char;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use blocksieve_agent::{Agent, FailurePolicy, UpdateHandle, Verdict};
use tokio::runtime::Runtime;

use crate::failure::Failure;
use crate::types::{
    BLOCKSIEVE_FAIL_CLOSED, BLOCKSIEVE_FAIL_OPEN, BLOCKSIEVE_LIST_NAME_CAPACITY, BLOCKSIEVE_MAX_LISTS,
    blocksieve_list_status, blocksieve_status, blocksieve_verdict, blocksieve_verdict_kind,
};

/// The settings of `blocksieve_config`, once its pointers have been read.
#[derive(Debug, Clone)]
pub(crate) struct Settings<'a> {
    pub(crate) base_url: &'a str,
    pub(crate) lists: Vec<&'a str>,
    pub(crate) trusted_keys: Vec<&'a str>,
    pub(crate) cache_dir: Option<&'a str>,
    pub(crate) failure_policy: u32,
    pub(crate) update_interval_seconds: u64,
    pub(crate) request_timeout_ms: u64,
    pub(crate) snapshot_timeout_ms: u64,
}

/// What a `blocksieve_agent` handle owns.
pub(crate) struct Handle {
    /// Runs the agent's futures ([`Handle::wait`]) and the background
    /// updates on its one worker thread. `None` only while the handle is
    /// dropped.
    runtime: Option<Runtime>,
    agent: Agent,
    /// The running background updates, stopped when the handle is freed.
    updates: Mutex<Option<UpdateHandle>>,
    /// The process that made the handle: the runtime's worker thread
    /// exists only there (a `fork()` copies the handle, not the thread).
    process: u32,
}

/// A verdict as the ABI returns it: the struct and its two texts.
pub(crate) struct CheckAnswer {
    pub(crate) verdict: blocksieve_verdict,
    pub(crate) list: String,
    pub(crate) expression: String,
}

fn misconfigured(message: String) -> Failure {
    Failure::new(blocksieve_status::BLOCKSIEVE_MISCONFIGURED, message)
}

impl Handle {
    /// Validates `settings` and builds the agent and its runtime. No request
    /// is sent; with a cache directory, the cached snapshots are loaded.
    pub(crate) fn new(settings: &Settings<'_>) -> Result<Self, Failure> {
        let failure_policy = match settings.failure_policy {
            BLOCKSIEVE_FAIL_OPEN => FailurePolicy::FailOpen,
            BLOCKSIEVE_FAIL_CLOSED => FailurePolicy::FailClosed,
            other => return Err(misconfigured(format!("invalid failure policy {other}"))),
        };
        if settings.lists.len() > BLOCKSIEVE_MAX_LISTS {
            // As the session: every verdict's list text then fits in
            // `BLOCKSIEVE_LIST_TEXT_CAPACITY`.
            return Err(misconfigured(format!(
                "{} lists, more than {BLOCKSIEVE_MAX_LISTS}",
                settings.lists.len()
            )));
        }
        let keys = crate::sansio::trusted_keys(&settings.trusted_keys)?;
        let mut builder = Agent::builder(settings.base_url)
            .lists(settings.lists.iter().copied())
            .trusted_keys(keys)
            .failure_policy(failure_policy);
        if let Some(dir) = settings.cache_dir {
            builder = builder.cache_dir(dir);
        }
        if settings.update_interval_seconds != 0 {
            builder = builder.update_interval(Duration::from_secs(settings.update_interval_seconds));
        }
        if settings.request_timeout_ms != 0 {
            builder = builder.request_timeout(Duration::from_millis(settings.request_timeout_ms));
        }
        if settings.snapshot_timeout_ms != 0 {
            builder = builder.snapshot_timeout(Duration::from_millis(settings.snapshot_timeout_ms));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("blocksieve-agent")
            .enable_all()
            .build()
            .map_err(|e| {
                Failure::new(
                    blocksieve_status::BLOCKSIEVE_INTERNAL,
                    format!("cannot start runtime: {e}"),
                )
            })?;
        let agent = {
            let _context = runtime.enter();
            builder.build()?
        };
        Ok(Self {
            runtime: Some(runtime),
            agent,
            updates: Mutex::new(None),
            process: std::process::id(),
        })
    }

    /// Whether this is a copy of a handle made before `fork()`, in the
    /// child: its runtime has no worker thread here, so nothing that waits
    /// on the runtime would ever return (the timeouts are that thread's
    /// timers too).
    pub(crate) fn inherited(&self) -> bool {
        self.process != std::process::id()
    }

    /// `BLOCKSIEVE_INTERNAL` in a child of `fork()` that uses its parent's
    /// handle, instead of waiting forever.
    fn same_process(&self) -> Result<(), Failure> {
        if self.inherited() {
            return Err(Failure::new(
                blocksieve_status::BLOCKSIEVE_INTERNAL,
                format!(
                    "the agent was created in process {} before fork(); its runtime's thread is not in \
                     this process: create agents after forking (blocksieve_agent_free still releases it)",
                    self.process
                ),
            ));
        }
        Ok(())
    }

    /// Runs `future` on the agent's runtime and waits for its output, from
    /// any thread: driven by the calling thread (`block_on`) as a rule, or
    /// by the runtime's worker when the calling thread runs a tokio runtime
    /// of its own, where `block_on` would panic.
    fn wait<F>(&self, future: F) -> Result<F::Output, Failure>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.same_process()?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        if let Some(runtime) = &self.runtime {
            if tokio::runtime::Handle::try_current().is_err() {
                return Ok(runtime.block_on(future));
            }
            runtime.spawn(async move {
                let _ = tx.send(future.await);
            });
        }
        rx.recv().map_err(|_| {
            Failure::new(
                blocksieve_status::BLOCKSIEVE_PANIC,
                "panic in blocksieve: the agent's task ended without an answer",
            )
        })
    }

    /// One update round of every list; fails only when some list still has
    /// no snapshot.
    pub(crate) fn update(&self) -> Result<(), Failure> {
        let agent = self.agent.clone();
        self.wait(async move { agent.update().await })??;
        Ok(())
    }

    /// Checks `url` against every subscribed list.
    pub(crate) fn check(&self, url: &str) -> Result<CheckAnswer, Failure> {
        let (agent, url) = (self.agent.clone(), url.to_owned());
        let verdict = self.wait(async move { agent.check_url(&url).await })??;
        Ok(answer(verdict))
    }

    /// Starts the background updates on the runtime's worker thread.
    pub(crate) fn start_updates(&self) -> Result<(), Failure> {
        // Else the task would be spawned on a runtime with no thread here:
        // reported started, it would never run.
        self.same_process()?;
        let mut slot = self.updates.lock().unwrap_or_else(PoisonError::into_inner);
        let runtime = self.runtime.as_ref().ok_or_else(|| {
            Failure::new(
                blocksieve_status::BLOCKSIEVE_INTERNAL,
                "the agent's runtime is stopped",
            )
        })?;
        let _context = runtime.enter();
        *slot = Some(self.agent.start_updates()?);
        Ok(())
    }

    /// Stops the background updates, if running, and waits until they have.
    pub(crate) fn stop_updates(&self) -> Result<(), Failure> {
        self.same_process()?;
        let running = self.updates.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(handle) = running {
            // Only a panic of the task is lost: the updates are gone either way.
            let _ = self.wait(handle.shutdown());
        }
        Ok(())
    }

    /// Every subscribed list's state, in subscription order.
    pub(crate) fn status(&self) -> Vec<blocksieve_list_status> {
        let status = self.agent.status();
        status
            .lists
            .iter()
            .map(|l| blocksieve_list_status {
                name: list_name(&l.name),
                has_snapshot: l.version.is_some(),
                version: l.version.unwrap_or(0),
                created_at: l.created_at.map_or(0, unix_seconds),
                expires_at: l.expires_at.map_or(0, unix_seconds),
                age_seconds: l.age.map_or(0, |a| a.as_secs()),
                stale: l.stale,
                consecutive_failures: l.consecutive_failures,
                last_update_failed: l.last_error.is_some(),
            })
            .collect()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // An inherited handle is not dropped but leaked (`blocksieve_agent_free`).
        let _ = self.stop_updates();
        let agent = self.agent.clone();
        let _ = self.wait(async move { agent.shutdown().await });
        if let Some(runtime) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Dropping waits for the worker threads, which a thread
                // inside a runtime may not do; nothing runs on them now.
                runtime.shutdown_background();
            } else {
                drop(runtime);
            }
        }
    }
}

/// A verdict as the ABI returns it: the struct and its two texts.
pub(crate) fn answer(verdict: Verdict) -> CheckAnswer {
    let mut out = blocksieve_verdict {
        kind: blocksieve_verdict_kind::BLOCKSIEVE_SAFE,
        stale: false,
        block: verdict.should_block(),
        full_hash: [0; 32],
        list_len: 0,
        expression_len: 0,
    };
    let (list, expression) = match verdict {
        Verdict::Safe { stale } => {
            out.stale = stale;
            (String::new(), String::new())
        }
        Verdict::Unsafe {
            list,
            expression,
            full_hash,
            stale,
        } => {
            out.kind = blocksieve_verdict_kind::BLOCKSIEVE_UNSAFE;
            out.stale = stale;
            out.full_hash = full_hash.0;
            (list, expression)
        }
        Verdict::Unverified { lists, stale, .. } => {
            out.kind = blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED;
            out.stale = stale;
            (lists.join(","), String::new())
        }
        // A kind of verdict added to the agent after these bindings:
        // neither safe nor unsafe.
        _ => {
            out.kind = blocksieve_verdict_kind::BLOCKSIEVE_UNVERIFIED;
            (String::new(), String::new())
        }
    };
    out.list_len = list.len();
    out.expression_len = expression.len();
    CheckAnswer {
        verdict: out,
        list,
        expression,
    }
}

fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A list name as a NUL-terminated fixed buffer. List names are at most 64
/// bytes (checked by the agent and the snapshot decoder); a longer one
/// would be cut, never overflow.
pub(crate) fn list_name(name: &str) -> [c_char; BLOCKSIEVE_LIST_NAME_CAPACITY] {
    const { assert!(BLOCKSIEVE_LIST_NAME_CAPACITY == blocksieve_format::MAX_LIST_NAME_BYTES + 1) };
    let mut out = [0 as c_char; BLOCKSIEVE_LIST_NAME_CAPACITY];
    for (slot, &b) in out[..BLOCKSIEVE_LIST_NAME_CAPACITY - 1]
        .iter_mut()
        .zip(name.as_bytes())
    {
        *slot = b as c_char;
    }
    out
}
