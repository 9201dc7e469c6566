//! A fake publisher on 127.0.0.1:0 whose answers the test sets.
//!
//! [`FakePublisher`] speaks the publisher's HTTP API (the list of threat
//! lists, snapshot downloads with ETags, full-hash searches), records every
//! snapshot download and full-hash search ([`Recorded`]), and injects the
//! faults a test asks for: an error status or `Retry-After` per list
//! ([`Served`]), and garbage, foreign full hashes, slow or missing answers
//! on the full-hash endpoint ([`SearchMode`]). [`RawServer`] answers at the
//! TCP level, for what an HTTP framework will not produce: bodies cut short,
//! bodies without a length, drips and stalls.
//!
//! The fakes know only the wire format (`blocksieve-format`); the agent
//! builders for them are in [`crate::agents`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use blocksieve_format::api::{
    ErrorDetail, ErrorResponse, FULL_HASHES_CONTENT_TYPE, FullHashAnswer, FullHashMatch,
    FullHashSearchRequest, FullHashSearchResponse, ListStatus, ListedFullHash, ListsResponse, PrefixAnswer,
    PrefixResult, SnapshotStatus, accepts_full_hashes_binary, routes,
};
use blocksieve_format::{FullHash, parse_header_unverified};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::snapshot::Snap;

mod raw;
mod updates;

pub use raw::{Raw, RawServer, unreachable_url};
pub use updates::Updates;

/// What the fake publisher answers for one threat list's snapshot.
#[derive(Debug, Clone)]
pub enum Served {
    /// 200 with these bytes and a strong ETag derived from them
    /// ([`etag_of`]); 304 to a matching `If-None-Match`.
    Snapshot(Vec<u8>),
    /// 200 with these bytes and this ETag; 304 to a matching
    /// `If-None-Match`.
    WithEtag(Vec<u8>, String),
    /// An error status with a JSON error body.
    Status(StatusCode),
    /// An error status with a JSON error body and this `Retry-After`
    /// header.
    RetryAfter(StatusCode, String),
    /// A list the publisher knows but has not built a snapshot of yet:
    /// listed without a snapshot status, `404` to downloads.
    NotBuilt,
}

/// What the fake publisher answers on `POST /v1/hashes:search`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchMode {
    /// The full hashes listed (see [`FakePublisher::list_full_hashes`])
    /// under each requested hash prefix.
    Normal,
    /// This status with a JSON error body.
    Status(StatusCode),
    /// This status with a JSON error body and this `Retry-After` header.
    RetryAfter(StatusCode, String),
    /// 200 with a body that is not JSON.
    Garbage,
    /// 200 with no result for any hash prefix.
    NoResults,
    /// 200 with, under each hash prefix, the listed full hashes plus the full
    /// hash of this expression (on `malware`), which does not start with
    /// the prefix.
    Foreign(String),
    /// No answer for a minute, then `504`.
    Hang,
    /// 200 JSON with, under each hash prefix, the listed full hashes
    /// garbled: their last hex digit replaced by `x` (not a full hash).
    Garbled,
    /// This status with a JSON error body of this code (`400
    /// prefix_too_short`, as a publisher refuses a request prefix shorter
    /// than its list's).
    Refused(StatusCode, &'static str),
}

/// One request the fake publisher saw: a snapshot download or a full-hash
/// search.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// The request path, e.g. `/v1/lists/malware/snapshot`.
    pub path: String,
    /// The `If-None-Match` header of a snapshot download.
    pub if_none_match: Option<String>,
    /// The hash prefixes of a full-hash search, in the order sent (none when
    /// the body was not a search request).
    pub prefixes: Vec<String>,
    /// The raw body of a full-hash search.
    pub body: String,
    /// The `Accept` header of a full-hash search.
    pub accept: Option<String>,
}

/// The answers the test has set, and the requests seen.
#[derive(Debug)]
struct FakeState {
    /// Per threat list, the answer to its snapshot download.
    snapshots: HashMap<String, Served>,
    /// The full hashes the full-hash endpoint knows, with their list.
    full_hashes: Vec<(FullHash, String)>,
    search_mode: SearchMode,
    /// How long every full-hash answer waits first.
    search_delay: Duration,
    /// The `cache_duration_s` of full-hash answers.
    cache_duration_s: u64,
    /// The `X-Blocksieve-Next-Check` header of snapshot answers, if any.
    next_check_s: Option<u64>,
    /// Answers 200 even to a matching `If-None-Match`.
    ignore_if_none_match: bool,
    /// How long every snapshot answer waits first.
    snapshot_delay: Duration,
    /// Answers full-hash searches in binary to an `Accept` naming it.
    binary_answers: bool,
    requests: Vec<Recorded>,
    /// Per threat list, the answer of its update route
    /// ([`Updates::NoRoute`] when absent).
    updates: HashMap<String, Updates>,
    /// Per threat list, the `X-Blocksieve-Freshness` value of its snapshot
    /// and update answers.
    freshness: HashMap<String, String>,
    /// The update-route requests seen.
    update_requests: Vec<Recorded>,
    /// Whether snapshot answers advertise immutable full-hash buckets,
    /// whose `GET`s are counted and never answered.
    hanging_buckets: bool,
    /// The bucket `GET`s received.
    bucket_requests: usize,
}

/// A publisher on a real socket whose answers the test controls.
///
/// It starts with no threat list, full-hash answers computed from the
/// listed full hashes ([`SearchMode::Normal`]) with a `cache_duration_s` of
/// 300 and no `X-Blocksieve-Next-Check` header; every setter takes effect
/// on the next request.
#[derive(Debug)]
pub struct FakePublisher {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    state: Arc<Mutex<FakeState>>,
    /// The runtime of a fake started with [`FakePublisher::start_blocking`],
    /// stopped when the fake is dropped.
    _own_runtime: Option<OwnRuntime>,
}

/// The strong ETag the fake publisher sends for a snapshot of these bytes.
pub fn etag_of(bytes: &[u8]) -> String {
    format!("\"{}\"", &FullHash::of(bytes).to_string()[..16])
}

impl FakePublisher {
    /// Starts serving on the current tokio runtime, which it shares with the
    /// test (a paused clock applies to its delays too); it serves until that
    /// runtime shuts down.
    ///
    /// # Panics
    ///
    /// When no port can be bound, or outside a tokio runtime.
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(FakeState {
            snapshots: HashMap::new(),
            full_hashes: Vec::new(),
            search_mode: SearchMode::Normal,
            search_delay: Duration::ZERO,
            cache_duration_s: 300,
            next_check_s: None,
            ignore_if_none_match: false,
            snapshot_delay: Duration::ZERO,
            binary_answers: false,
            requests: Vec::new(),
            updates: HashMap::new(),
            freshness: HashMap::new(),
            update_requests: Vec::new(),
            hanging_buckets: false,
            bucket_requests: 0,
        }));
        let app = Router::new()
            .route(routes::LISTS, get(lists))
            .route(routes::LATEST_SNAPSHOT, get(snapshot))
            .route(routes::UPDATES, get(updates_route))
            .route(routes::SEARCH, post(search))
            .route("/v1/lists/{name}/hashes/{snapshot}/{prefix}", get(hanging_bucket))
            .with_state(Arc::clone(&state));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base_url: format!("http://{addr}"),
            state,
            _own_runtime: None,
        }
    }

    /// [`FakePublisher::start`] on a runtime of its own, for tests that are
    /// not async (e.g. they run an example binary and wait for it); it
    /// serves until dropped.
    ///
    /// # Panics
    ///
    /// When no port can be bound or no runtime built.
    pub fn start_blocking() -> Self {
        let (mut fake, runtime) = on_own_runtime(Self::start);
        fake._own_runtime = Some(runtime);
        fake
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        lock(&self.state)
    }

    /// Answers downloads of `list`'s snapshot with `served`, and lists
    /// `list` in `GET /v1/lists`.
    pub fn serve(&self, list: &str, served: Served) {
        self.state().snapshots.insert(list.to_owned(), served);
    }

    /// Serves `snap`, encoded, as its list's snapshot.
    pub fn serve_snapshot(&self, snap: &Snap<'_>) {
        self.serve(snap.list, Served::Snapshot(snap.encode()));
    }

    /// Lists each full hash on its threat list, for the full-hash endpoint.
    pub fn list_full_hashes<'a>(&self, entries: impl IntoIterator<Item = (FullHash, &'a str)>) {
        self.state()
            .full_hashes
            .extend(entries.into_iter().map(|(h, l)| (h, l.to_owned())));
    }

    /// Lists the full hash of each expression on `list`, for the full-hash
    /// endpoint.
    pub fn list_expressions(&self, list: &str, expressions: &[&str]) {
        self.list_full_hashes(expressions.iter().map(|e| (FullHash::of(e.as_bytes()), list)));
    }

    /// Snapshot answers advertise immutable full-hash buckets, whose
    /// `GET`s are counted ([`FakePublisher::bucket_requests`]) and never
    /// answered.
    pub fn hang_buckets(&self) {
        self.state().hanging_buckets = true;
    }

    /// How many bucket `GET`s were received.
    pub fn bucket_requests(&self) -> usize {
        self.state().bucket_requests
    }

    /// How the full-hash endpoint answers from now on.
    pub fn set_search_mode(&self, mode: SearchMode) {
        self.state().search_mode = mode;
    }

    /// Every full-hash answer waits this long first.
    pub fn set_search_delay(&self, delay: Duration) {
        self.state().search_delay = delay;
    }

    /// Answers full-hash searches whose `Accept` names the binary answer in
    /// the binary encoding, as the real publisher does (the answers of
    /// [`SearchMode::Normal`] and [`SearchMode::NoResults`]; the others stay
    /// as they are). By default every answer is JSON, as from a publisher
    /// older than the binary answer.
    pub fn set_binary_answers(&self, on: bool) {
        self.state().binary_answers = on;
    }

    /// The `cache_duration_s` of full-hash answers.
    pub fn set_cache_duration_s(&self, seconds: u64) {
        self.state().cache_duration_s = seconds;
    }

    /// Sends `X-Blocksieve-Next-Check` with this many seconds on snapshot
    /// answers.
    pub fn set_next_check_s(&self, seconds: u64) {
        self.state().next_check_s = Some(seconds);
    }

    /// Every snapshot answer (`200`, `304` or an error) waits this long
    /// first.
    pub fn set_snapshot_delay(&self, delay: Duration) {
        self.state().snapshot_delay = delay;
    }

    /// Answers 200 with the whole snapshot even to a matching
    /// `If-None-Match` (a publisher that ignores conditional requests).
    pub fn ignore_if_none_match(&self) {
        self.state().ignore_if_none_match = true;
    }

    /// Answers `list`'s update route with `updates`.
    pub fn serve_updates(&self, list: &str, updates: Updates) {
        self.state().updates.insert(list.to_owned(), updates);
    }

    /// Sends `X-Blocksieve-Freshness: value` on `list`'s snapshot and update
    /// answers (`200` and `304`), or nothing for `None`.
    pub fn set_freshness(&self, list: &str, value: Option<String>) {
        let mut state = self.state();
        match value {
            Some(v) => state.freshness.insert(list.to_owned(), v),
            None => state.freshness.remove(list),
        };
    }

    /// The requests on the update route seen, oldest first (not among
    /// [`FakePublisher::requests`]).
    pub fn update_requests(&self) -> Vec<Recorded> {
        self.state().update_requests.clone()
    }

    /// Every snapshot download and full-hash search seen, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state().requests.clone()
    }

    /// The snapshot downloads seen, oldest first.
    pub fn snapshot_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/snapshot"))
            .collect()
    }

    /// The full-hash searches seen, oldest first.
    pub fn searches(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == routes::SEARCH)
            .collect()
    }
}

/// Locks the fake's state; a test that panicked while holding it leaves it
/// usable.
fn lock(state: &Mutex<FakeState>) -> MutexGuard<'_, FakeState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Keeps a runtime started by [`on_own_runtime`] running; dropping it
/// stops the runtime and every task and connection on it.
#[derive(Debug)]
struct OwnRuntime {
    _stop: oneshot::Sender<()>,
}

/// Runs `start` on a current-thread runtime on a thread of its own and
/// returns its output; the runtime keeps running its tasks until the
/// returned [`OwnRuntime`] is dropped.
fn on_own_runtime<T, F, Fut>(start: F) -> (T, OwnRuntime)
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
{
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let _ = started_tx.send(start().await);
            // Resolves when the sender is dropped.
            let _ = stop_rx.await;
        });
    });
    let started = started_rx.recv().expect("server started");
    (started, OwnRuntime { _stop: stop_tx })
}

type Shared = State<Arc<Mutex<FakeState>>>;

fn error(status: StatusCode, code: &str, message: String) -> Response {
    let body = ErrorResponse {
        error: ErrorDetail {
            code: code.to_owned(),
            message,
        },
    };
    (status, Json(body)).into_response()
}

fn injected(status: StatusCode) -> Response {
    error(status, "injected", format!("injected {status}"))
}

fn with_retry_after(status: StatusCode, retry_after: &str) -> Response {
    let mut response = injected(status);
    if let Ok(value) = HeaderValue::from_str(retry_after) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// The status the publisher would list for a snapshot of these bytes;
/// `None` when they do not start with a snapshot header.
fn snapshot_status(bytes: &[u8], etag: String) -> Option<SnapshotStatus> {
    let h = parse_header_unverified(bytes).ok()?;
    Some(SnapshotStatus {
        version: h.version,
        created_at: h.created_at,
        expires_at: h.expires_at,
        entries: h.full_hash_count,
        unique_prefixes: h.entry_count,
        snapshot_bytes: bytes.len() as u64,
        filter_kind: h.filter_kind.to_string(),
        bits_per_key: if h.entry_count == 0 {
            0.0
        } else {
            bytes.len() as f64 * 8.0 / h.entry_count as f64
        },
        request_prefix_bits: h.request_prefix_bits,
        etag,
        key_id: hex::encode(h.key_id),
    })
}

async fn lists(State(state): Shared) -> Json<ListsResponse> {
    let mut served: Vec<(String, Served)> = lock(&state)
        .snapshots
        .iter()
        .map(|(name, served)| (name.clone(), served.clone()))
        .collect();
    served.sort_by(|a, b| a.0.cmp(&b.0));
    Json(ListsResponse {
        lists: served
            .into_iter()
            .map(|(name, served)| ListStatus {
                name,
                snapshot: match served {
                    Served::Snapshot(bytes) => {
                        let etag = etag_of(&bytes);
                        snapshot_status(&bytes, etag)
                    }
                    Served::WithEtag(bytes, etag) => snapshot_status(&bytes, etag),
                    Served::Status(_) | Served::RetryAfter(..) | Served::NotBuilt => None,
                },
                last_build: None,
                store: None,
            })
            .collect(),
    })
}

async fn snapshot(State(state): Shared, Path(name): Path<String>, headers: HeaderMap) -> Response {
    let if_none_match = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let hanging_buckets = lock(&state).hanging_buckets;
    let (served, ignore_inm, next_check, freshness, delay) = {
        let mut s = lock(&state);
        s.requests.push(Recorded {
            method: "GET",
            path: routes::latest_snapshot(&name),
            if_none_match,
            prefixes: Vec::new(),
            body: String::new(),
            accept: None,
        });
        (
            s.snapshots.get(&name).cloned(),
            s.ignore_if_none_match,
            s.next_check_s,
            s.freshness.get(&name).cloned(),
            s.snapshot_delay,
        )
    };
    tokio::time::sleep(delay).await;
    let (bytes, etag) = match served {
        None | Some(Served::NotBuilt) => {
            return error(
                StatusCode::NOT_FOUND,
                "unknown_list",
                format!("unknown list {name}"),
            );
        }
        Some(Served::Status(status)) => return injected(status),
        Some(Served::RetryAfter(status, after)) => return with_retry_after(status, &after),
        Some(Served::Snapshot(bytes)) => {
            let etag = etag_of(&bytes);
            (bytes, etag)
        }
        Some(Served::WithEtag(bytes, etag)) => (bytes, etag),
    };
    let hashes_base = parse_header_unverified(&bytes)
        .ok()
        .filter(|_| hanging_buckets)
        .map(|h| {
            routes::list_hashes_base(
                &name,
                blocksieve_format::api::snapshot_id(h.version, &h.body_sha256),
            )
        });
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes());
    let mut response = if matches && !ignore_inm {
        (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response()
    } else {
        (
            StatusCode::OK,
            [
                (header::ETAG, etag),
                (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            ],
            bytes,
        )
            .into_response()
    };
    if let Some(base) = hashes_base {
        response.headers_mut().insert(
            blocksieve_format::api::HASHES_HEADER,
            HeaderValue::from_str(&base).expect("a route is a header value"),
        );
    }
    if let Some(seconds) = next_check {
        response.headers_mut().insert(
            blocksieve_format::api::NEXT_CHECK_HEADER,
            HeaderValue::from(seconds),
        );
    }
    if let Some(value) = freshness.and_then(|v| HeaderValue::from_str(&v).ok()) {
        response
            .headers_mut()
            .insert(blocksieve_format::api::FRESHNESS_HEADER, value);
    }
    response
}

/// An immutable full-hash bucket: counted, never answered.
async fn hanging_bucket(State(state): Shared) -> Response {
    lock(&state).bucket_requests += 1;
    std::future::pending::<Response>().await
}

/// The update route (FORMAT.md "Delta chains"), as [`Updates`] says.
async fn updates_route(
    State(state): Shared,
    Path((name, from)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let if_none_match = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (served, freshness, next_check) = {
        let mut s = lock(&state);
        s.update_requests.push(Recorded {
            method: "GET",
            path: format!("/v1/lists/{name}/updates/{from}"),
            if_none_match: if_none_match.clone(),
            prefixes: Vec::new(),
            body: String::new(),
            accept: None,
        });
        (
            s.updates.get(&name).cloned().unwrap_or(Updates::NoRoute),
            s.freshness.get(&name).cloned(),
            s.next_check_s,
        )
    };
    let Ok(from) = from.parse::<u64>() else {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_version",
            format!("bad version {from}"),
        );
    };
    let mut response = match updates::answer(&served, from, if_none_match.as_deref()) {
        updates::Answer::NoRoute => return StatusCode::NOT_FOUND.into_response(),
        updates::Answer::Error(status, Some(code)) => {
            return error(status, code, format!("no chain from {from}"));
        }
        updates::Answer::Error(status, None) => return injected(status),
        updates::Answer::NotModified => StatusCode::NOT_MODIFIED.into_response(),
        updates::Answer::Chain(bytes, etag) => {
            let mut response = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, blocksieve_format::api::DELTAS_CONTENT_TYPE)],
                bytes,
            )
                .into_response();
            if let Some(value) = etag.and_then(|v| HeaderValue::from_str(&v).ok()) {
                response.headers_mut().insert(header::ETAG, value);
            }
            response
        }
    };
    if let Some(value) = freshness.and_then(|v| HeaderValue::from_str(&v).ok()) {
        response
            .headers_mut()
            .insert(blocksieve_format::api::FRESHNESS_HEADER, value);
    }
    if let Some(seconds) = next_check {
        response.headers_mut().insert(
            blocksieve_format::api::NEXT_CHECK_HEADER,
            HeaderValue::from(seconds),
        );
    }
    response
}

async fn search(State(state): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let request: Result<FullHashSearchRequest, _> = serde_json::from_slice(&body);
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let binary = lock(&state).binary_answers && accept.as_deref().is_some_and(accepts_full_hashes_binary);
    lock(&state).requests.push(Recorded {
        method: "POST",
        path: routes::SEARCH.to_owned(),
        if_none_match: None,
        prefixes: request.as_ref().map(|r| r.prefixes.clone()).unwrap_or_default(),
        body: String::from_utf8_lossy(&body).into_owned(),
        accept,
    });
    let Ok(request) = request else {
        return error(StatusCode::BAD_REQUEST, "bad_request", "not json".into());
    };
    let (mode, delay, cache_duration_s, full_hashes) = {
        let s = lock(&state);
        (
            s.search_mode.clone(),
            s.search_delay,
            s.cache_duration_s,
            s.full_hashes.clone(),
        )
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    for p in &request.prefixes {
        let valid = (2..=8).contains(&p.len()) && p.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !valid {
            return error(StatusCode::BAD_REQUEST, "bad_prefix", format!("bad prefix {p:?}"));
        }
    }
    let results = |foreign: Option<&str>| FullHashSearchResponse {
        results: request
            .prefixes
            .iter()
            .map(|p| {
                let mut matches: Vec<FullHashMatch> = full_hashes
                    .iter()
                    .filter(|(h, _)| h.to_string().starts_with(p.as_str()))
                    .map(|(h, l)| FullHashMatch {
                        full_hash: h.to_string(),
                        list: l.clone(),
                    })
                    .collect();
                if let Some(e) = foreign {
                    matches.push(FullHashMatch {
                        full_hash: FullHash::of(e.as_bytes()).to_string(),
                        list: "malware".into(),
                    });
                }
                PrefixResult {
                    prefix: p.clone(),
                    matches,
                }
            })
            .collect(),
        cache_duration_s,
    };
    let answer = |json: FullHashSearchResponse| match binary.then(|| encode_binary(&json)).flatten() {
        Some(bytes) => ([(header::CONTENT_TYPE, FULL_HASHES_CONTENT_TYPE)], bytes).into_response(),
        None => Json(json).into_response(),
    };
    match mode {
        SearchMode::Normal => answer(results(None)),
        SearchMode::Foreign(e) => Json(results(Some(&e))).into_response(),
        SearchMode::NoResults => answer(FullHashSearchResponse {
            results: vec![],
            cache_duration_s,
        }),
        SearchMode::Status(status) => injected(status),
        SearchMode::Refused(status, code) => error(status, code, format!("refused: {code}")),
        SearchMode::RetryAfter(status, after) => with_retry_after(status, &after),
        SearchMode::Garbage => (StatusCode::OK, "<html>not json</html>").into_response(),
        SearchMode::Garbled => {
            let mut json = results(None);
            for m in json.results.iter_mut().flat_map(|r| r.matches.iter_mut()) {
                m.full_hash.pop();
                m.full_hash.push('x');
            }
            Json(json).into_response()
        }
        SearchMode::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            StatusCode::GATEWAY_TIMEOUT.into_response()
        }
    }
}

/// The binary encoding of a JSON answer.
fn encode_binary(json: &FullHashSearchResponse) -> Option<Vec<u8>> {
    let results = json
        .results
        .iter()
        .map(|r| {
            let matches = r
                .matches
                .iter()
                .map(|m| {
                    Some(ListedFullHash {
                        full_hash: FullHash::from_hex(&m.full_hash).ok()?,
                        list: m.list.clone(),
                    })
                })
                .collect::<Option<Vec<_>>>()?;
            Some(PrefixAnswer {
                prefix: r.prefix.parse().ok()?,
                matches,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    FullHashAnswer {
        cache_duration_s: json.cache_duration_s,
        results,
    }
    .encode()
    .ok()
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};

    use super::*;

    async fn get(url: &str, if_none_match: Option<&str>) -> reqwest::Response {
        let mut request = reqwest::Client::new().get(url);
        if let Some(etag) = if_none_match {
            request = request.header("if-none-match", etag);
        }
        request.send().await.expect("answer")
    }

    #[tokio::test]
    async fn lists_give_a_snapshot_status_only_for_lists_served_a_snapshot() {
        let fake = FakePublisher::start().await;
        let snap = Snap::new("malware", 3, &["evil.example/"]);
        fake.serve_snapshot(&snap);
        fake.serve("empty", Served::NotBuilt);
        fake.serve("broken", Served::Status(StatusCode::SERVICE_UNAVAILABLE));

        let lists: ListsResponse = get(&format!("{}/v1/lists", fake.base_url), None)
            .await
            .json()
            .await
            .expect("lists JSON");

        let names: Vec<&str> = lists.lists.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["broken", "empty", "malware"]);
        assert!(lists.lists[0].snapshot.is_none());
        assert!(lists.lists[1].snapshot.is_none());
        let status = lists.lists[2].snapshot.as_ref().expect("malware has a snapshot");
        let bytes = snap.encode();
        assert_eq!(status.version, 3);
        assert_eq!(status.entries, 1);
        assert_eq!(status.snapshot_bytes, bytes.len() as u64);
        assert_eq!(status.etag, etag_of(&bytes));
        assert_eq!(status.request_prefix_bits, 32);
    }

    #[tokio::test]
    async fn snapshot_downloads_are_conditional_and_recorded() {
        let fake = FakePublisher::start().await;
        let bytes = Snap::new("malware", 1, &[]).encode();
        fake.serve("malware", Served::Snapshot(bytes.clone()));
        fake.serve("empty", Served::NotBuilt);
        let url = format!("{}/v1/lists/malware/snapshot", fake.base_url);

        let first = get(&url, None).await;
        assert_eq!(first.status(), reqwest::StatusCode::OK);
        assert_eq!(first.bytes().await.expect("body"), bytes);
        let again = get(&url, Some(&etag_of(&bytes))).await;
        assert_eq!(again.status(), reqwest::StatusCode::NOT_MODIFIED);
        let empty = get(&format!("{}/v1/lists/empty/snapshot", fake.base_url), None).await;
        assert_eq!(empty.status(), reqwest::StatusCode::NOT_FOUND);

        let seen = fake.snapshot_requests();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0].if_none_match, None);
        assert_eq!(seen[1].if_none_match, Some(etag_of(&bytes)));
        assert_eq!(seen[2].path, "/v1/lists/empty/snapshot");
        assert!(fake.searches().is_empty());
    }

    #[tokio::test]
    async fn searches_answer_the_listed_full_hashes_and_injected_faults() {
        let fake = FakePublisher::start().await;
        let listed = FullHash::of(b"evil.example/");
        fake.list_expressions("malware", &["evil.example/"]);
        let prefix = listed.to_string()[..8].to_owned();
        let url = format!("{}{}", fake.base_url, routes::SEARCH);
        let search = || {
            reqwest::Client::new()
                .post(&url)
                .json(&FullHashSearchRequest {
                    prefixes: vec![prefix.clone()],
                    ..FullHashSearchRequest::default()
                })
                .send()
        };

        let answer: FullHashSearchResponse = search().await.expect("answer").json().await.expect("JSON");
        assert_eq!(answer.cache_duration_s, 300);
        assert_eq!(answer.results[0].matches[0].full_hash, listed.to_string());
        fake.set_search_mode(SearchMode::Status(StatusCode::INTERNAL_SERVER_ERROR));
        let failed = search().await.expect("answer");
        assert_eq!(failed.status(), reqwest::StatusCode::INTERNAL_SERVER_ERROR);

        let seen = fake.searches();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].prefixes, [prefix]);
    }

    /// One HTTP/1.1 `GET` on a fresh connection; the status line.
    fn status_line(base_url: &str, path: &str) -> std::io::Result<String> {
        let addr = base_url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(addr)?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer)?;
        let answer = String::from_utf8_lossy(&answer);
        Ok(answer.lines().next().unwrap_or_default().to_owned())
    }

    #[test]
    fn a_blocking_fake_serves_until_dropped() {
        let fake = FakePublisher::start_blocking();
        fake.serve_snapshot(&Snap::new("malware", 1, &[]));
        let base_url = fake.base_url.clone();
        assert_eq!(
            status_line(&base_url, "/v1/lists/malware/snapshot").expect("answer"),
            "HTTP/1.1 200 OK"
        );
        drop(fake);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while status_line(&base_url, "/v1/lists").is_ok() {
            assert!(std::time::Instant::now() < deadline, "still serving");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_repeating_raw_server_answers_every_connection_and_a_stall_never_ends_the_body() {
        let mut body = b"BSNP".to_vec();
        body.resize(1_000, 0);
        let server = RawServer::repeat_blocking(RawServer::stall(&body, 4));
        for connection in 1..=2 {
            let addr = server.base_url.trim_start_matches("http://");
            let mut stream = std::net::TcpStream::connect(addr).expect("connect");
            stream
                .set_read_timeout(Some(Duration::from_millis(300)))
                .expect("timeout");
            write!(stream, "GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("request");
            let mut answer = Vec::new();
            let error = stream.read_to_end(&mut answer).expect_err("no end of body");
            assert!(
                matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{error}"
            );
            let text = String::from_utf8_lossy(&answer);
            assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
            assert!(text.contains("Content-Length: 1000\r\n"), "{text}");
            assert!(text.ends_with("\r\n\r\nBSNP"), "{text}");
            assert_eq!(server.connections(), connection);
        }
    }
}
