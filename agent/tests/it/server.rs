//! A fake publisher on 127.0.0.1:0 that serves what a test tells it to,
//! records every request (full-hash prefixes included) and injects faults;
//! a raw TCP server for faults axum cannot produce (hang, drip, cut);
//! snapshot builders with fixed keys; a manual clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use blocksieve_agent::{Agent, AgentBuilder, TimeProvider};
use blocksieve_format::api::{ErrorDetail, ErrorResponse, FullHashMatch, ListStatus, ListsResponse};
use blocksieve_format::{
    FilterKind, FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotParams, TrustedKey, encode,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The publisher's key in every test.
pub fn publisher_key() -> SigningKey {
    SigningKey::from_secret_bytes([7u8; 32])
}

/// A key the agents do not trust.
pub fn stranger_key() -> SigningKey {
    SigningKey::from_secret_bytes([8u8; 32])
}

/// The public key of the trusted publisher key.
pub fn trusted() -> TrustedKey {
    publisher_key().public_key().clone()
}

pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// A clock the test moves by hand.
#[derive(Debug)]
pub struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    pub fn new(at: SystemTime) -> Arc<Self> {
        Arc::new(Self(Mutex::new(at)))
    }

    pub fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }

    pub fn set(&self, at: SystemTime) {
        *self.0.lock().unwrap() = at;
    }
}

impl TimeProvider for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
}

/// How to build a test snapshot.
pub struct Snap<'a> {
    pub list: &'a str,
    pub version: u64,
    pub hashes: Vec<FullHash>,
    pub key_bits: KeyBits,
    pub key: SigningKey,
    pub created_at: u64,
    pub expires_at: u64,
    pub request_prefix_bits: u8,
    pub filter: FilterKind,
}

impl<'a> Snap<'a> {
    /// A snapshot of `list` at `version` listing `expressions`, signed by the
    /// publisher key, valid for a day, 32-bit request prefixes.
    pub fn new(list: &'a str, version: u64, expressions: &[&str]) -> Self {
        let now = unix_now();
        Self {
            list,
            version,
            hashes: expressions.iter().map(|e| FullHash::of(e.as_bytes())).collect(),
            key_bits: KeyBits::Bits32,
            key: publisher_key(),
            created_at: now,
            expires_at: now + 24 * 60 * 60,
            request_prefix_bits: 32,
            filter: FilterKind::BinaryFuse8,
        }
    }

    pub fn hashes(mut self, hashes: impl IntoIterator<Item = FullHash>) -> Self {
        self.hashes.extend(hashes);
        self
    }

    pub fn key_bits(mut self, key_bits: KeyBits) -> Self {
        self.key_bits = key_bits;
        self
    }

    pub fn signed_by(mut self, key: SigningKey) -> Self {
        self.key = key;
        self
    }

    /// Valid from `created_at` to `expires_at` (Unix seconds).
    pub fn valid(mut self, created_at: u64, expires_at: u64) -> Self {
        self.created_at = created_at;
        self.expires_at = expires_at;
        self
    }

    pub fn request_prefix_bits(mut self, bits: u8) -> Self {
        self.request_prefix_bits = bits;
        self
    }

    pub fn filter(mut self, kind: FilterKind) -> Self {
        self.filter = kind;
        self
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut keys: Vec<u64> = self.hashes.iter().map(|h| self.key_bits.key_of(h)).collect();
        keys.sort_unstable();
        keys.dedup();
        let filter = PrefixFilter::build(self.filter, &keys).unwrap();
        let params = SnapshotParams {
            list_name: self.list.to_owned(),
            version: self.version,
            created_at: self.created_at,
            expires_at: self.expires_at,
            key_bits: self.key_bits,
            request_prefix_bits: self.request_prefix_bits,
            full_hash_count: self.hashes.len() as u64,
            measured_fpr: 0.004,
            zstd_level: 3,
        };
        encode(&params, &filter, &self.key).unwrap()
    }
}

/// What the fake publisher answers for one list's snapshot.
#[derive(Clone)]
pub enum Served {
    /// 200 with these bytes and a strong ETag derived from them; 304 to a
    /// matching `If-None-Match`.
    Snapshot(Vec<u8>),
    /// 200 with these bytes and this ETag.
    WithEtag(Vec<u8>, String),
    /// An error status with a JSON error body.
    Status(StatusCode),
    /// An error status with a `Retry-After` header.
    RetryAfter(StatusCode, String),
}

/// What the fake publisher answers on `POST /v1/hashes:search`.
#[derive(Clone, PartialEq, Eq)]
pub enum SearchMode {
    /// The buckets of the requested prefixes from the configured full hashes.
    Normal,
    /// This status with a JSON error body.
    Status(StatusCode),
    /// This status with a `Retry-After` header.
    RetryAfter(StatusCode, String),
    /// 200 with a body that is not JSON.
    Garbage,
    /// 200 with no result for any prefix.
    NoResults,
    /// 200 with, under each prefix, a listed full hash of this expression
    /// that does not start with it.
    Foreign(String),
    /// No answer for a minute.
    Hang,
}

/// One request the fake publisher saw.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: &'static str,
    pub path: String,
    pub if_none_match: Option<String>,
    /// The prefixes of a full-hash search, in the order sent.
    pub prefixes: Vec<String>,
    /// The raw body of a full-hash search.
    pub body: String,
}

struct FakeState {
    snapshots: HashMap<String, Served>,
    full_hashes: Vec<(FullHash, String)>,
    search_mode: SearchMode,
    search_delay: Duration,
    cache_duration_s: u64,
    next_check_s: Option<u64>,
    ignore_if_none_match: bool,
    requests: Vec<Recorded>,
}

/// A publisher on a real socket whose answers the test controls.
pub struct FakePublisher {
    pub base_url: String,
    state: Arc<Mutex<FakeState>>,
}

pub fn etag_of(bytes: &[u8]) -> String {
    format!("\"{}\"", &FullHash::of(bytes).to_string()[..16])
}

/// The JSON of `POST /v1/hashes:search` (issue 5), as the fake sees it.
#[derive(Deserialize)]
struct SearchRequest {
    prefixes: Vec<String>,
}

#[derive(Serialize)]
struct SearchResponse {
    results: Vec<PrefixResult>,
    cache_duration_s: u64,
}

#[derive(Serialize)]
struct PrefixResult {
    prefix: String,
    matches: Vec<FullHashMatch>,
}

impl FakePublisher {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(FakeState {
            snapshots: HashMap::new(),
            full_hashes: Vec::new(),
            search_mode: SearchMode::Normal,
            search_delay: Duration::ZERO,
            cache_duration_s: 300,
            next_check_s: None,
            ignore_if_none_match: false,
            requests: Vec::new(),
        }));
        let app = Router::new()
            .route("/v1/lists", get(lists))
            .route("/v1/lists/{name}/snapshot", get(snapshot))
            .route("/v1/hashes:search", post(search))
            .with_state(Arc::clone(&state));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            base_url: format!("http://{addr}"),
            state,
        }
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap()
    }

    pub fn serve(&self, list: &str, served: Served) {
        self.state().snapshots.insert(list.to_owned(), served);
    }

    pub fn serve_snapshot(&self, snap: &Snap<'_>) {
        self.serve(snap.list, Served::Snapshot(snap.encode()));
    }

    /// Puts each (full hash, list) into the full-hash buckets.
    pub fn list_full_hashes<'a>(&self, entries: impl IntoIterator<Item = (FullHash, &'a str)>) {
        self.state()
            .full_hashes
            .extend(entries.into_iter().map(|(h, l)| (h, l.to_owned())));
    }

    /// Lists the full hash of each expression on `list`.
    pub fn list_expressions(&self, list: &str, expressions: &[&str]) {
        self.list_full_hashes(expressions.iter().map(|e| (FullHash::of(e.as_bytes()), list)));
    }

    pub fn set_search_mode(&self, mode: SearchMode) {
        self.state().search_mode = mode;
    }

    /// Every full-hash answer waits this long first.
    pub fn set_search_delay(&self, delay: Duration) {
        self.state().search_delay = delay;
    }

    pub fn set_cache_duration_s(&self, seconds: u64) {
        self.state().cache_duration_s = seconds;
    }

    /// Sends `X-Blocksieve-Next-Check` on snapshot answers.
    pub fn set_next_check_s(&self, seconds: u64) {
        self.state().next_check_s = Some(seconds);
    }

    pub fn ignore_if_none_match(&self) {
        self.state().ignore_if_none_match = true;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state().requests.clone()
    }

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
            .filter(|r| r.path == "/v1/hashes:search")
            .collect()
    }

    /// An agent builder for this publisher trusting the publisher key.
    pub fn agent_builder(&self, lists: &[&str]) -> AgentBuilder {
        Agent::builder(&self.base_url)
            .lists(lists.iter().copied())
            .trusted_key(trusted())
    }

    pub fn agent(&self, lists: &[&str]) -> Agent {
        self.agent_builder(lists).build().unwrap()
    }
}

type Shared = State<Arc<Mutex<FakeState>>>;

fn record(state: &Mutex<FakeState>, method: &'static str, path: String, headers: &HeaderMap) {
    let if_none_match = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    state.lock().unwrap().requests.push(Recorded {
        method,
        path,
        if_none_match,
        prefixes: Vec::new(),
        body: String::new(),
    });
}

fn error(status: StatusCode, code: &str, message: String) -> Response {
    let body = ErrorResponse {
        error: ErrorDetail {
            code: code.to_owned(),
            message,
        },
    };
    (status, Json(body)).into_response()
}

fn with_retry_after(status: StatusCode, retry_after: &str) -> Response {
    let mut response = error(status, "injected", format!("injected {status}"));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_str(retry_after).unwrap());
    response
}

async fn lists(State(state): Shared) -> Json<ListsResponse> {
    let mut names: Vec<String> = state.lock().unwrap().snapshots.keys().cloned().collect();
    names.sort();
    Json(ListsResponse {
        lists: names
            .into_iter()
            .map(|name| ListStatus {
                name,
                snapshot: None,
                last_build: None,
            })
            .collect(),
    })
}

async fn snapshot(State(state): Shared, Path(name): Path<String>, headers: HeaderMap) -> Response {
    record(&state, "GET", format!("/v1/lists/{name}/snapshot"), &headers);
    let (served, ignore_inm, next_check) = {
        let s = state.lock().unwrap();
        (
            s.snapshots.get(&name).cloned(),
            s.ignore_if_none_match,
            s.next_check_s,
        )
    };
    let (bytes, etag) = match served {
        None => {
            return error(
                StatusCode::NOT_FOUND,
                "unknown_list",
                format!("unknown list {name}"),
            );
        }
        Some(Served::Status(status)) => return error(status, "injected", format!("injected {status}")),
        Some(Served::RetryAfter(status, after)) => return with_retry_after(status, &after),
        Some(Served::Snapshot(bytes)) => {
            let etag = etag_of(&bytes);
            (bytes, etag)
        }
        Some(Served::WithEtag(bytes, etag)) => (bytes, etag),
    };
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
    if let Some(seconds) = next_check {
        response
            .headers_mut()
            .insert("x-blocksieve-next-check", HeaderValue::from(seconds));
    }
    response
}

async fn search(State(state): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body).into_owned();
    let request: Result<SearchRequest, _> = serde_json::from_slice(&body);
    {
        let mut s = state.lock().unwrap();
        s.requests.push(Recorded {
            method: "POST",
            path: "/v1/hashes:search".into(),
            if_none_match: None,
            prefixes: request.as_ref().map(|r| r.prefixes.clone()).unwrap_or_default(),
            body: text,
        });
    }
    let _ = headers;
    let Ok(request) = request else {
        return error(StatusCode::BAD_REQUEST, "bad_request", "not json".into());
    };
    let (mode, delay, cache_duration_s, full_hashes) = {
        let s = state.lock().unwrap();
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
    let results = |foreign: Option<&str>| SearchResponse {
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
    match mode {
        SearchMode::Normal => Json(results(None)).into_response(),
        SearchMode::Foreign(e) => Json(results(Some(&e))).into_response(),
        SearchMode::NoResults => Json(SearchResponse {
            results: vec![],
            cache_duration_s,
        })
        .into_response(),
        SearchMode::Status(status) => error(status, "injected", format!("injected {status}")),
        SearchMode::RetryAfter(status, after) => with_retry_after(status, &after),
        SearchMode::Garbage => (StatusCode::OK, "<html>not json</html>").into_response(),
        SearchMode::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            StatusCode::GATEWAY_TIMEOUT.into_response()
        }
    }
}

/// What the raw server does with one connection.
#[derive(Clone)]
pub enum Raw {
    /// Writes these bytes and closes.
    Respond(Vec<u8>),
    /// Reads the request and never answers (until the test ends).
    Hang,
    /// Writes `head`, then the body one byte every `every`.
    Drip {
        head: Vec<u8>,
        body: Vec<u8>,
        every: Duration,
    },
}

/// A server that answers each connection with the next scripted action:
/// for bodies cut short, bodies without a length, hangs and drips, which a
/// well-behaved framework will not produce.
pub struct RawServer {
    pub base_url: String,
    served: Arc<Mutex<usize>>,
}

impl RawServer {
    pub async fn start(script: Vec<Raw>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(Mutex::new(0));
        let count = Arc::clone(&served);
        tokio::spawn(async move {
            for action in script {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                *count.lock().unwrap() += 1;
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                match action {
                    Raw::Respond(bytes) => {
                        let _ = stream.write_all(&bytes).await;
                        let _ = stream.shutdown().await;
                    }
                    Raw::Hang => {
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            drop(stream);
                        });
                    }
                    Raw::Drip { head, body, every } => {
                        tokio::spawn(async move {
                            if stream.write_all(&head).await.is_err() {
                                return;
                            }
                            for byte in body {
                                if stream.write_all(&[byte]).await.is_err() {
                                    return;
                                }
                                tokio::time::sleep(every).await;
                            }
                        });
                    }
                }
            }
        });
        Self {
            base_url: format!("http://{addr}"),
            served,
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        *self.served.lock().unwrap()
    }

    /// A complete `200` response with `Content-Length`.
    pub fn ok(body: &[u8]) -> Raw {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: {}\r\nConnection: close\r\n\r\n",
            body.len(),
            etag_of(body)
        )
        .into_bytes();
        r.extend_from_slice(body);
        Raw::Respond(r)
    }

    /// A `200` response that declares the whole body but sends only the
    /// first `sent` bytes before closing.
    pub fn cut(body: &[u8], sent: usize) -> Raw {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(&body[..sent]);
        Raw::Respond(r)
    }

    /// A `200` response with no `Content-Length`: the body runs until the
    /// connection closes, so only the bytes received can be limited.
    pub fn until_close(body: &[u8]) -> Raw {
        let mut r = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
        r.extend_from_slice(body);
        Raw::Respond(r)
    }

    /// A `200` response whose body comes one byte every `every`.
    pub fn drip(body: &[u8], every: Duration) -> Raw {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        Raw::Drip {
            head,
            body: body.to_vec(),
            every,
        }
    }

    /// An agent for this server, trusting the publisher key.
    pub fn agent_builder(&self) -> AgentBuilder {
        Agent::builder(&self.base_url)
            .list("malware")
            .trusted_key(trusted())
    }
}

/// A port on 127.0.0.1 nobody listens on.
pub fn unreachable_url() -> String {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    format!("http://{addr}")
}
