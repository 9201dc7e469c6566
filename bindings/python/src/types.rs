//! The agent's answers as immutable Python objects: [`Verdict`],
//! [`UpdateReport`] with a [`ListUpdate`] per threat list, and [`Status`]
//! with a [`ListStatus`] per threat list. They hold copies, so they can be
//! kept and shared between threads.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use blocksieve_agent as agent;
use pyo3::prelude::*;

use crate::errors::kind_name;

/// The answer of a URL check.
///
/// `kind` is `"safe"` (no expression of the URL is on a subscribed threat
/// list), `"unsafe"` (the publisher confirmed a full hash of one of the
/// URL's expressions: `list`, `expression` and `full_hash` say which), or
/// `"unverified"` (a hash prefix hit could not be confirmed because the
/// full-hash request failed: `lists` and `reason` say which and why, and
/// `block` follows the failure policy). A hash prefix hit alone is never
/// `"unsafe"`.
#[pyclass(frozen, module = "blocksieve")]
#[derive(Clone, Debug)]
pub(crate) struct Verdict {
    /// `"safe"`, `"unsafe"` or `"unverified"`.
    #[pyo3(get)]
    kind: &'static str,
    /// The threat list of an unsafe URL (the first in subscription order
    /// if several), else `None`.
    #[pyo3(get)]
    list: Option<String>,
    /// The matching expression of an unsafe URL (the first in expression
    /// order), e.g. `"evil.example/"`, else `None`.
    #[pyo3(get)]
    expression: Option<String>,
    /// The full hash of that expression, 64 lowercase hex digits, else
    /// `None`.
    #[pyo3(get)]
    full_hash: Option<String>,
    /// The threat lists whose filters hit: the one list of an unsafe URL,
    /// those left unconfirmed of an unverified one, none for a safe one.
    #[pyo3(get)]
    lists: Vec<String>,
    /// Why an unverified URL could not be confirmed, else `None`.
    #[pyo3(get)]
    reason: Option<String>,
    /// Whether a snapshot used had expired: the answer holds as of that
    /// snapshot.
    #[pyo3(get)]
    stale: bool,
    /// Whether the caller should block the URL: unsafe, or unverified
    /// under `failure_policy="closed"`.
    #[pyo3(get)]
    block: bool,
}

impl Verdict {
    /// The Python verdict for the agent's.
    pub(crate) fn from_agent(verdict: &agent::Verdict) -> Self {
        let mut out = Self {
            kind: "safe",
            list: None,
            expression: None,
            full_hash: None,
            lists: Vec::new(),
            reason: None,
            stale: false,
            block: verdict.should_block(),
        };
        match verdict {
            agent::Verdict::Safe { stale } => out.stale = *stale,
            agent::Verdict::Unsafe {
                list,
                expression,
                full_hash,
                stale,
            } => {
                out.kind = "unsafe";
                out.list = Some(list.clone());
                out.expression = Some(expression.clone());
                out.full_hash = Some(full_hash.to_string());
                out.lists = vec![list.clone()];
                out.stale = *stale;
            }
            agent::Verdict::Unverified {
                reason, lists, stale, ..
            } => {
                out.kind = "unverified";
                out.lists = lists.clone();
                out.reason = Some(reason.to_string());
                out.stale = *stale;
            }
            // A verdict added later: not confirmed either way.
            _ => out.kind = "unverified",
        }
        out
    }
}

#[pymethods]
impl Verdict {
    /// Whether `kind == "unsafe"`.
    #[getter]
    fn is_unsafe(&self) -> bool {
        self.kind == "unsafe"
    }

    /// Whether `kind == "safe"`.
    #[getter]
    fn is_safe(&self) -> bool {
        self.kind == "safe"
    }

    /// Whether `kind == "unverified"`.
    #[getter]
    fn is_unverified(&self) -> bool {
        self.kind == "unverified"
    }

    fn __repr__(&self) -> String {
        match self.kind {
            "unsafe" => format!(
                "Verdict(kind='unsafe', list={:?}, expression={:?}, stale={})",
                self.list.as_deref().unwrap_or_default(),
                self.expression.as_deref().unwrap_or_default(),
                py_bool(self.stale),
            ),
            "unverified" => format!(
                "Verdict(kind='unverified', lists={:?}, block={}, stale={})",
                self.lists,
                py_bool(self.block),
                py_bool(self.stale),
            ),
            kind => format!("Verdict(kind='{kind}', stale={})", py_bool(self.stale)),
        }
    }
}

/// `True` or `False`, as Python writes them.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// What one update round did to one threat list.
#[pyclass(frozen, module = "blocksieve")]
#[derive(Clone, Debug)]
pub(crate) struct ListUpdate {
    /// The threat list.
    #[pyo3(get)]
    list: String,
    /// `"updated"` (a newer snapshot or deltas were verified and swapped
    /// in), `"unchanged"` (the publisher's latest is the one in use) or
    /// `"failed"` (the download or verification failed; the previous
    /// filter, if any, is still in use).
    #[pyo3(get)]
    outcome: &'static str,
    /// The snapshot version in use after the round, or `None` if the list
    /// still has none.
    #[pyo3(get)]
    version: Option<u64>,
    /// The version replaced by an update, or `None`.
    #[pyo3(get)]
    previous: Option<u64>,
    /// Why the update failed, or `None`.
    #[pyo3(get)]
    error: Option<String>,
    /// The kind of that error (`"bad_data"`, `"transport"`, `"storage"`,
    /// ...), or `None`.
    #[pyo3(get)]
    error_kind: Option<&'static str>,
}

#[pymethods]
impl ListUpdate {
    fn __repr__(&self) -> String {
        format!(
            "ListUpdate(list={:?}, outcome='{}', version={})",
            self.list,
            self.outcome,
            self.version.map_or("None".to_owned(), |v| v.to_string()),
        )
    }
}

/// What `Agent.update()` did: one `ListUpdate` per subscribed threat list,
/// in subscription order.
#[pyclass(frozen, module = "blocksieve")]
#[derive(Clone, Debug)]
pub(crate) struct UpdateReport {
    /// One entry per subscribed threat list, in subscription order.
    #[pyo3(get)]
    lists: Vec<ListUpdate>,
}

impl UpdateReport {
    /// The Python report for the agent's.
    pub(crate) fn from_agent(report: &agent::UpdateReport) -> Self {
        let lists = report
            .lists
            .iter()
            .map(|(name, update)| {
                let mut out = ListUpdate {
                    list: name.clone(),
                    outcome: "failed",
                    version: None,
                    previous: None,
                    error: None,
                    error_kind: None,
                };
                match update {
                    agent::ListUpdate::Updated { previous, version } => {
                        out.outcome = "updated";
                        out.version = Some(*version);
                        out.previous = *previous;
                    }
                    agent::ListUpdate::Unchanged { version } => {
                        out.outcome = "unchanged";
                        out.version = Some(*version);
                    }
                    agent::ListUpdate::Failed { error, kept_version } => {
                        out.version = *kept_version;
                        out.error = Some(error.to_string());
                        out.error_kind = Some(kind_name(error));
                    }
                    // An outcome added later: the version in use says the rest.
                    _ => out.outcome = "unknown",
                }
                out
            })
            .collect();
        Self { lists }
    }
}

#[pymethods]
impl UpdateReport {
    /// Whether every threat list is now on the publisher's current
    /// snapshot (no list failed).
    #[getter]
    fn complete(&self) -> bool {
        self.lists.iter().all(|l| l.outcome != "failed")
    }

    /// The entry of threat list `list`, or `None` if the agent does not
    /// subscribe to it.
    fn get(&self, list: &str) -> Option<ListUpdate> {
        self.lists.iter().find(|l| l.list == list).cloned()
    }

    fn __repr__(&self) -> String {
        let lists: Vec<String> = self.lists.iter().map(ListUpdate::__repr__).collect();
        format!("UpdateReport([{}])", lists.join(", "))
    }
}

/// The state of one subscribed threat list.
#[pyclass(frozen, module = "blocksieve")]
#[derive(Clone, Debug)]
pub(crate) struct ListStatus {
    /// The threat list.
    #[pyo3(get)]
    name: String,
    /// The snapshot version the list's state stands for (its base
    /// snapshot's or the last delta's), or `None` without a snapshot.
    #[pyo3(get)]
    version: Option<u64>,
    /// The version of the whole snapshot the state stands on, or `None`.
    #[pyo3(get)]
    base_version: Option<u64>,
    /// How many 32-bit hash prefixes the deltas applied since the base
    /// snapshot added.
    #[pyo3(get)]
    additions: usize,
    /// When the base snapshot was built (signed), a UTC `datetime`, or
    /// `None`.
    #[pyo3(get)]
    created_at: Option<SystemTime>,
    /// Until when the state is fresh (signed), a UTC `datetime`, or `None`.
    #[pyo3(get)]
    expires_at: Option<SystemTime>,
    /// How old the snapshot in use is, a `timedelta`, or `None`.
    #[pyo3(get)]
    age: Option<Duration>,
    /// Whether the snapshot in use has expired by this agent's clock, now.
    /// It is still used; verdicts based on it say `stale`.
    #[pyo3(get)]
    stale: bool,
    /// Where the state in use came from: `"network"`, `"cache"` (the cache
    /// directory, nothing downloaded since), or `None`.
    #[pyo3(get)]
    source: Option<&'static str>,
    /// The version floor: no older snapshot is accepted, or `None`.
    #[pyo3(get)]
    version_floor: Option<u64>,
    /// When an update of this list last succeeded, a UTC `datetime`, or
    /// `None`.
    #[pyo3(get)]
    last_success: Option<SystemTime>,
    /// The error of the last update attempt, if it failed, else `None`.
    #[pyo3(get)]
    last_error: Option<String>,
    /// Update attempts failed in a row; 0 after a success.
    #[pyo3(get)]
    consecutive_failures: u32,
    /// The last cache-directory problem for this list, or `None`.
    #[pyo3(get)]
    last_storage_error: Option<String>,
}

#[pymethods]
impl ListStatus {
    fn __repr__(&self) -> String {
        format!(
            "ListStatus(name={:?}, version={}, stale={})",
            self.name,
            self.version.map_or("None".to_owned(), |v| v.to_string()),
            py_bool(self.stale),
        )
    }
}

/// The agent's health, as of the call: every threat list's snapshot and
/// update state, and the counters.
#[pyclass(frozen, module = "blocksieve")]
#[derive(Clone, Debug)]
pub(crate) struct Status {
    /// One entry per subscribed threat list, in subscription order.
    #[pyo3(get)]
    lists: Vec<ListStatus>,
    /// Whether every threat list has a snapshot, so that checks can answer.
    #[pyo3(get)]
    ready: bool,
    /// Whether any snapshot in use has expired.
    #[pyo3(get)]
    stale: bool,
    /// Whether the background updates are running.
    #[pyo3(get)]
    updates_running: bool,
    /// How long full-hash requests are still paused after failures
    /// (backoff), a `timedelta`, or `None`.
    #[pyo3(get)]
    full_hash_paused_for: Option<Duration>,
    /// The counters since the agent started: `lookups`, `prefix_hits`,
    /// `full_hash_requests`, `full_hash_failures`, `cache_hits`,
    /// `confirmed_unsafe`, `false_prefix_hits`, `unverified`.
    #[pyo3(get)]
    stats: BTreeMap<&'static str, u64>,
}

impl Status {
    /// The Python status for the agent's.
    pub(crate) fn from_agent(status: &agent::Status) -> Self {
        let lists = status
            .lists
            .iter()
            .map(|l| ListStatus {
                name: l.name.clone(),
                version: l.version,
                base_version: l.base_version,
                additions: l.additions,
                created_at: l.created_at,
                expires_at: l.expires_at,
                age: l.age,
                stale: l.stale,
                source: l.source.map(|s| match s {
                    agent::SnapshotSource::Network => "network",
                    agent::SnapshotSource::Cache => "cache",
                }),
                version_floor: l.version_floor,
                last_success: l.last_success,
                last_error: l.last_error.as_ref().map(ToString::to_string),
                consecutive_failures: l.consecutive_failures,
                last_storage_error: l.last_storage_error.as_ref().map(ToString::to_string),
            })
            .collect();
        let s = &status.stats;
        let stats = BTreeMap::from([
            ("lookups", s.lookups),
            ("prefix_hits", s.prefix_hits),
            ("full_hash_requests", s.full_hash_requests),
            ("full_hash_failures", s.full_hash_failures),
            ("cache_hits", s.cache_hits),
            ("confirmed_unsafe", s.confirmed_unsafe),
            ("false_prefix_hits", s.false_prefix_hits),
            ("unverified", s.unverified),
        ]);
        Self {
            lists,
            ready: status.is_ready(),
            stale: status.is_stale(),
            updates_running: status.updates_running,
            full_hash_paused_for: status.full_hash_paused_for,
            stats,
        }
    }
}

#[pymethods]
impl Status {
    /// The status of threat list `name`, or `None` if the agent does not
    /// subscribe to it.
    fn list(&self, name: &str) -> Option<ListStatus> {
        self.lists.iter().find(|l| l.name == name).cloned()
    }

    fn __repr__(&self) -> String {
        let lists: Vec<String> = self.lists.iter().map(ListStatus::__repr__).collect();
        format!(
            "Status(ready={}, stale={}, lists=[{}])",
            py_bool(self.ready),
            py_bool(self.stale),
            lists.join(", ")
        )
    }
}
