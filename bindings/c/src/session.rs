//! The sans-I/O agent: [`Session`] behind the opaque `blocksieve_session`
//! handle, its HTTP requests as `blocksieve_request` values the host sends
//! with its own HTTP stack, and a check waiting for full hashes as a
//! `blocksieve_query`. Time (`now_ms`, Unix milliseconds) and randomness
//! (a 32-byte seed for a [`StdRng`]) come from the host with each call. A
//! list's [`SavedList`] (base snapshot, delta chain, record) goes out as a
//! `blocksieve_saved` for the host to store, and comes back as three byte
//! strings to restore it after a restart.

use std::ffi::{CStr, CString};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use blocksieve_agent::FailurePolicy;
use blocksieve_agent::engine::Error;
use blocksieve_agent::engine::session::{
    CheckStep, FullHashQuery, HttpRequest, HttpResponse, ListRequest, ListUpdate, Restored, SavedList,
    Session, SessionConfig,
};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::agent::{CheckAnswer, answer, list_name};
use crate::failure::Failure;
use crate::types::{
    BLOCKSIEVE_FAIL_CLOSED, BLOCKSIEVE_FAIL_OPEN, BLOCKSIEVE_SEED_BYTES, blocksieve_request,
    blocksieve_session_stats, blocksieve_status, blocksieve_update_kind, blocksieve_update_result,
};

/// The settings of `blocksieve_session_config`, once its pointers have
/// been read.
#[derive(Debug, Clone)]
pub(crate) struct SessionSettings<'a> {
    pub(crate) base_url: &'a str,
    pub(crate) lists: Vec<&'a str>,
    pub(crate) trusted_keys: Vec<&'a str>,
    pub(crate) failure_policy: u32,
    pub(crate) noise_prefixes: u32,
    pub(crate) full_hash_cache_bytes: usize,
    pub(crate) max_snapshot_bytes: u64,
    pub(crate) dangerous_allow_plain_http: bool,
}

/// A response as the host hands it over, its texts already read.
#[derive(Debug, Clone)]
pub(crate) struct Response<'a> {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: &'a [u8],
}

impl Response<'_> {
    fn to_http(&self) -> HttpResponse {
        HttpResponse {
            status: self.status,
            headers: self.headers.clone(),
            body: self.body.to_vec(),
        }
    }
}

const _: () = assert!(crate::types::BLOCKSIEVE_MAX_LISTS == blocksieve_agent::engine::session::MAX_LISTS);

/// Tells the handles of one session from another's: a request or query
/// carries the id of the session that made it.
static NEXT_SESSION_ID: AtomicU64 = AtomicU64::new(1);

/// What a `blocksieve_session` handle owns.
pub(crate) struct Handle {
    id: u64,
    /// Every call locks it: calls on one session serialize.
    state: Mutex<State>,
}

struct State {
    session: Session,
    /// Update requests the host reported it could not send: the session
    /// counts only the responses it refused.
    unsent_updates: u64,
}

/// What a `blocksieve_request` holds: the request's texts NUL-terminated
/// for the host, and what the session needs back with its response.
pub(crate) struct Request {
    session: u64,
    /// The update request it is, or `None` for a full-hash search.
    update: Option<ListRequest>,
    method: &'static CStr,
    url: CString,
    headers: Vec<(CString, CString)>,
    body: Vec<u8>,
}

/// What a `blocksieve_query` holds. `repr(C)` with `session` first: the
/// lent request never shares the query's address, so neither handle can
/// pass for the other.
#[repr(C)]
pub(crate) struct Query {
    session: u64,
    /// The search to send, lent to the host by `blocksieve_query_request`.
    pub(crate) request: blocksieve_request,
    query: FullHashQuery,
}

/// What an update response did.
pub(crate) struct UpdateOutcome {
    pub(crate) result: blocksieve_update_result,
    /// The snapshot request of `BLOCKSIEVE_UPDATE_NEED_SNAPSHOT`.
    pub(crate) next: Option<Request>,
    /// Why the response was refused (`BLOCKSIEVE_UPDATE_FAILED`).
    pub(crate) failure: Option<Failure>,
}

/// What a check gives: a verdict now, or a query to send.
pub(crate) enum Step {
    Done(CheckAnswer),
    Query(Box<Query>),
}

fn internal(message: String) -> Failure {
    Failure::new(blocksieve_status::BLOCKSIEVE_INTERNAL, message)
}

fn c_string(text: &str, what: &str) -> Result<CString, Failure> {
    CString::new(text).map_err(|_| internal(format!("{what} {text:?} holds a NUL byte")))
}

impl Request {
    fn new(session: u64, http: &HttpRequest, update: Option<ListRequest>) -> Result<Self, Failure> {
        let method = match http.method.as_str() {
            "GET" => c"GET",
            _ => c"POST",
        };
        let headers = http
            .headers
            .iter()
            .map(|(n, v)| Ok((c_string(n, "header name")?, c_string(v, "header value")?)))
            .collect::<Result<_, Failure>>()?;
        Ok(Self {
            session,
            update,
            method,
            url: c_string(&http.url, "url")?,
            headers,
            body: http.body.clone(),
        })
    }

    pub(crate) fn method(&self) -> &CStr {
        self.method
    }

    pub(crate) fn url(&self) -> &CStr {
        &self.url
    }

    pub(crate) fn headers(&self) -> &[(CString, CString)] {
        &self.headers
    }

    pub(crate) fn body(&self) -> &[u8] {
        &self.body
    }
}

/// `now_ms` (Unix milliseconds, negative before 1970) as a time.
pub(crate) fn time(now_ms: i64) -> Result<SystemTime, Failure> {
    let offset = Duration::from_millis(now_ms.unsigned_abs());
    let time = if now_ms >= 0 {
        UNIX_EPOCH.checked_add(offset)
    } else {
        UNIX_EPOCH.checked_sub(offset)
    };
    time.ok_or_else(|| Failure::argument(format!("now_ms {now_ms} is out of range")))
}

fn rng(seed: [u8; BLOCKSIEVE_SEED_BYTES]) -> StdRng {
    StdRng::from_seed(seed)
}

impl Handle {
    /// Validates `settings` and makes the session; no request is made.
    pub(crate) fn new(settings: &SessionSettings<'_>) -> Result<Self, Failure> {
        let failure_policy = match settings.failure_policy {
            BLOCKSIEVE_FAIL_OPEN => FailurePolicy::FailOpen,
            BLOCKSIEVE_FAIL_CLOSED => FailurePolicy::FailClosed,
            other => {
                return Err(Failure::new(
                    blocksieve_status::BLOCKSIEVE_MISCONFIGURED,
                    format!("invalid failure policy {other}"),
                ));
            }
        };
        let defaults = SessionConfig::default();
        let config = SessionConfig {
            base_url: settings.base_url.to_owned(),
            lists: settings.lists.iter().map(|l| (*l).to_owned()).collect(),
            trusted_keys: crate::sansio::trusted_keys(&settings.trusted_keys)?,
            max_snapshot_bytes: match settings.max_snapshot_bytes {
                0 => defaults.max_snapshot_bytes,
                n => n,
            },
            full_hash_cache_bytes: match settings.full_hash_cache_bytes {
                0 => defaults.full_hash_cache_bytes,
                n => n,
            },
            noise_prefixes: match settings.noise_prefixes {
                0 => defaults.noise_prefixes,
                n => usize::try_from(n).unwrap_or(usize::MAX),
            },
            failure_policy,
            dangerous_allow_plain_http: settings.dangerous_allow_plain_http,
            ..defaults
        };
        Ok(Self {
            id: NEXT_SESSION_ID.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(State {
                session: Session::new(config)?,
                unsent_updates: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside a call is reported as BLOCKSIEVE_PANIC, after which
        // the handle should only be freed; a poisoned lock is not a second
        // failure.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One update round's requests, one per list in subscription order.
    pub(crate) fn update_requests(&self) -> Result<Vec<Request>, Failure> {
        let requests = self.lock().session.update_requests();
        requests
            .into_iter()
            .map(|r| {
                let http = r.request.clone();
                Request::new(self.id, &http, Some(r))
            })
            .collect()
    }

    /// The update request `request` is, if it is one of this session's.
    fn update_of<'r>(&self, request: &'r Request) -> Result<&'r ListRequest, Failure> {
        if request.session != self.id {
            return Err(Failure::argument("request was made by another session"));
        }
        request
            .update
            .as_ref()
            .ok_or_else(|| Failure::argument("request is a full-hash search, not an update request"))
    }

    /// Hands the response to `request` to the session: the outcome, or a
    /// failure for a caller bug.
    pub(crate) fn handle_update_response(
        &self,
        request: &Request,
        response: &Response<'_>,
        now: SystemTime,
    ) -> Result<UpdateOutcome, Failure> {
        let update = self.update_of(request)?;
        let mut state = self.lock();
        let previous = state.session.version(&update.list);
        let outcome = state
            .session
            .handle_update_response(update, response.to_http(), now);
        let held = state.session.version(&update.list);
        drop(state);
        let result = |kind| update_result(&update.list, kind, previous, held);
        Ok(match outcome {
            Ok(ListUpdate::Updated { .. }) => UpdateOutcome {
                result: result(blocksieve_update_kind::BLOCKSIEVE_UPDATE_UPDATED),
                next: None,
                failure: None,
            },
            Ok(ListUpdate::Unchanged { .. }) => UpdateOutcome {
                result: result(blocksieve_update_kind::BLOCKSIEVE_UPDATE_UNCHANGED),
                next: None,
                failure: None,
            },
            Ok(ListUpdate::NeedSnapshot { request: next, .. }) => {
                let http = next.request.clone();
                UpdateOutcome {
                    result: result(blocksieve_update_kind::BLOCKSIEVE_UPDATE_NEED_SNAPSHOT),
                    next: Some(Request::new(self.id, &http, Some(next))?),
                    failure: None,
                }
            }
            Err(error) => UpdateOutcome {
                result: result(blocksieve_update_kind::BLOCKSIEVE_UPDATE_FAILED),
                next: None,
                failure: Some(error.into()),
            },
        })
    }

    /// Records that the host could not send `request`: counted, the list
    /// kept as it is. Returns the `FAILED` result and the transport error.
    pub(crate) fn handle_update_failure(
        &self,
        request: &Request,
        reason: &str,
    ) -> Result<(blocksieve_update_result, Failure), Failure> {
        let update = self.update_of(request)?;
        let mut state = self.lock();
        state.unsent_updates += 1;
        state.session.update_not_sent(update);
        let held = state.session.version(&update.list);
        drop(state);
        let error = Error::Transport {
            url: update.request.url.clone(),
            reason: reason.to_owned(),
            timed_out: false,
        };
        Ok((
            update_result(
                &update.list,
                blocksieve_update_kind::BLOCKSIEVE_UPDATE_FAILED,
                held,
                held,
            ),
            error.into(),
        ))
    }

    /// Checks `url`: a verdict now, or the query to send.
    pub(crate) fn check(
        &self,
        url: &str,
        now: SystemTime,
        seed: [u8; BLOCKSIEVE_SEED_BYTES],
    ) -> Result<Step, Failure> {
        let step = self.lock().session.check(url, now, &mut rng(seed))?;
        match step {
            CheckStep::Done(verdict) => Ok(Step::Done(answer(verdict))),
            CheckStep::NeedFullHashes(query) => {
                let request = Request::new(self.id, &query.request, None)?;
                Ok(Step::Query(Box::new(Query {
                    session: self.id,
                    request: blocksieve_request { inner: request },
                    query,
                })))
            }
            // A step added to the engine after these bindings.
            #[allow(unreachable_patterns)]
            _ => Err(internal("unknown check step".to_owned())),
        }
    }

    /// Whether `query` was made by this session (else it must not be
    /// completed here: its hits were probed in another's filters).
    pub(crate) fn owns(&self, query: &Query) -> Result<(), Failure> {
        if query.session == self.id {
            Ok(())
        } else {
            Err(Failure::argument("query was made by another session"))
        }
    }

    /// The verdict once `query`'s response (or the host's transport error,
    /// `Err(reason)`) is in.
    pub(crate) fn complete_check(
        &self,
        query: Query,
        response: Result<Response<'_>, &str>,
        now: SystemTime,
        seed: [u8; BLOCKSIEVE_SEED_BYTES],
    ) -> Result<CheckAnswer, Failure> {
        self.owns(&query)?;
        let Query { query, .. } = query;
        let response = match response {
            Ok(response) => Ok(response.to_http()),
            Err(reason) => Err(Error::Transport {
                url: query.request.url.clone(),
                reason: reason.to_owned(),
                timed_out: false,
            }),
        };
        let verdict = self
            .lock()
            .session
            .complete_check(query, response, now, &mut rng(seed))?;
        Ok(answer(verdict))
    }

    /// The counters.
    pub(crate) fn stats(&self) -> blocksieve_session_stats {
        let state = self.lock();
        let s = state.session.stats();
        blocksieve_session_stats {
            lookups: s.lookups,
            prefix_hits: s.prefix_hits,
            full_hash_requests: s.full_hash_requests,
            full_hash_failures: s.full_hash_failures,
            cache_hits: s.cache_hits,
            confirmed_unsafe: s.confirmed_unsafe,
            false_prefix_hits: s.false_prefix_hits,
            unverified: s.unverified,
            snapshots_applied: s.snapshots_applied,
            deltas_applied: s.deltas_applied,
            delta_fallbacks: s.delta_fallbacks,
            updates_failed: s.updates_failed.saturating_add(state.unsent_updates),
            restored: s.restored,
            restored_stale: s.restored_stale,
        }
    }

    /// Whether an update round is advised before checking again
    /// ([`Session::update_advised`](blocksieve_agent::engine::session::Session::update_advised)).
    pub(crate) fn update_advised(&self) -> bool {
        self.lock().session.update_advised()
    }

    /// The version `list` stands for.
    pub(crate) fn version(&self, list: &str) -> Result<u64, Failure> {
        let state = self.lock();
        subscribed(&state.session, list)?;
        state.session.version(list).ok_or_else(|| not_ready(list))
    }

    /// What to keep of `list` now: its base snapshot (shared, not copied),
    /// the chain applied since and its record, taken together under the
    /// lock so that they belong to one state.
    pub(crate) fn save(&self, list: &str) -> Result<SavedList, Failure> {
        let state = self.lock();
        subscribed(&state.session, list)?;
        state.session.saved(list).ok_or_else(|| not_ready(list))
    }

    /// Restores `list` from the bytes a host kept of a [`SavedList`],
    /// verified again: the version now held, and why the chain was dropped
    /// if it was.
    pub(crate) fn restore(
        &self,
        list: &str,
        snapshot: &[u8],
        chain: &[u8],
        record: &[u8],
        now: SystemTime,
    ) -> Result<Restored, Failure> {
        let mut state = self.lock();
        // Checked here, as every call naming a list does: the engine's
        // error for it would read as a misconfiguration.
        subscribed(&state.session, list)?;
        let saved = SavedList {
            list: list.to_owned(),
            snapshot: Arc::from(snapshot),
            chain: chain.to_vec(),
            record: record.to_vec(),
        };
        Ok(state.session.restore(&saved, now)?)
    }
}

/// `BLOCKSIEVE_INVALID_ARGUMENT` unless `session` subscribes to `list`.
fn subscribed(session: &Session, list: &str) -> Result<(), Failure> {
    if session.lists().any(|l| l == list) {
        Ok(())
    } else {
        Err(Failure::argument(format!("list {list} is not subscribed")))
    }
}

fn not_ready(list: &str) -> Failure {
    Failure::new(
        blocksieve_status::BLOCKSIEVE_NOT_READY,
        format!("list {list} has no snapshot yet"),
    )
}

fn update_result(
    list: &str,
    kind: blocksieve_update_kind,
    previous: Option<u64>,
    held: Option<u64>,
) -> blocksieve_update_result {
    blocksieve_update_result {
        list: list_name(list),
        kind,
        has_previous: previous.is_some(),
        previous: previous.unwrap_or(0),
        has_version: held.is_some(),
        version: held.unwrap_or(0),
    }
}
