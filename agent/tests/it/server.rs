//! A fake publisher on 127.0.0.1:0 that serves what a test tells it to,
//! records every request and injects faults; a raw TCP server for faults
//! axum cannot produce; and snapshot builders with fixed keys.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use blocksieve_agent::{Agent, AgentBuilder};
use blocksieve_format::api::{
    ErrorDetail, ErrorResponse, FullHashMatch, FullHashResponse, ListStatus, ListsResponse,
};
use blocksieve_format::{
    FilterKind, FullHash, HashPrefix, KeyBits, PrefixFilter, SigningKey, SnapshotParams, TrustedKey, encode,
};
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

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// How to build a test snapshot.
pub struct Snap<'a> {
    pub list: &'a str,
    pub version: u64,
    pub hashes: Vec<FullHash>,
    pub key_bits: KeyBits,
    pub key: SigningKey,
}

impl<'a> Snap<'a> {
    /// A snapshot of `list` at `version` listing `expressions`, signed by the
    /// publisher key.
    pub fn new(list: &'a str, version: u64, expressions: &[&str]) -> Self {
        Self {
            list,
            version,
            hashes: expressions.iter().map(|e| FullHash::of(e.as_bytes())).collect(),
            key_bits: KeyBits::Bits32,
            key: publisher_key(),
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

    pub fn encode(&self) -> Vec<u8> {
        let mut keys: Vec<u64> = self.hashes.iter().map(|h| self.key_bits.key_of(h)).collect();
        keys.sort_unstable();
        keys.dedup();
        let filter = PrefixFilter::build(FilterKind::BinaryFuse8, &keys).unwrap();
        let now = now();
        let params = SnapshotParams {
            list_name: self.list.to_owned(),
            version: self.version,
            created_at: now,
            expires_at: now + 24 * 60 * 60,
            key_bits: self.key_bits,
            request_prefix_bits: 32,
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
}

/// What the fake publisher answers on `/v1/hashes/{prefix}`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum HashMode {
    /// The bucket of the prefix from the configured full hashes.
    Normal,
    /// This status with a JSON error body.
    Status(StatusCode),
    /// 200 with a body that is not JSON.
    Garbage,
    /// 200 with an answer for a different prefix.
    WrongPrefix,
    /// No answer for a minute.
    Hang,
}

/// One request the fake publisher saw.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub if_none_match: Option<String>,
}

struct FakeState {
    snapshots: HashMap<String, Served>,
    full_hashes: Vec<(FullHash, String)>,
    hash_mode: HashMode,
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

impl FakePublisher {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(FakeState {
            snapshots: HashMap::new(),
            full_hashes: Vec::new(),
            hash_mode: HashMode::Normal,
            ignore_if_none_match: false,
            requests: Vec::new(),
        }));
        let app = Router::new()
            .route("/v1/lists", get(lists))
            .route("/v1/lists/{name}/snapshot", get(snapshot))
            .route("/v1/hashes/{prefix}", get(hashes))
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

    pub fn set_hash_mode(&self, mode: HashMode) {
        self.state().hash_mode = mode;
    }

    pub fn ignore_if_none_match(&self) {
        self.state().ignore_if_none_match = true;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state().requests.clone()
    }

    pub fn hash_requests(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.starts_with("/v1/hashes/"))
            .map(|r| r.path)
            .collect()
    }

    /// An agent builder for this publisher trusting the publisher key.
    pub fn agent_builder(&self, lists: &[&str]) -> AgentBuilder {
        Agent::builder(&self.base_url)
            .lists(lists.iter().copied())
            .trusted_key(publisher_key().public_key().clone())
    }

    pub fn agent(&self, lists: &[&str]) -> Agent {
        self.agent_builder(lists).build().unwrap()
    }
}

type Shared = State<Arc<Mutex<FakeState>>>;

fn record(state: &Mutex<FakeState>, path: String, headers: &HeaderMap) {
    let if_none_match = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    state
        .lock()
        .unwrap()
        .requests
        .push(Recorded { path, if_none_match });
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
    record(&state, format!("/v1/lists/{name}/snapshot"), &headers);
    let (served, ignore_inm) = {
        let s = state.lock().unwrap();
        (s.snapshots.get(&name).cloned(), s.ignore_if_none_match)
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
        Some(Served::Snapshot(bytes)) => {
            let etag = etag_of(&bytes);
            (bytes, etag)
        }
        Some(Served::WithEtag(bytes, etag)) => (bytes, etag),
    };
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes());
    if matches && !ignore_inm {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
    }
    (
        StatusCode::OK,
        [
            (header::ETAG, etag),
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
        ],
        bytes,
    )
        .into_response()
}

async fn hashes(State(state): Shared, Path(prefix): Path<String>, headers: HeaderMap) -> Response {
    record(&state, format!("/v1/hashes/{prefix}"), &headers);
    let Ok(parsed) = prefix.parse::<HashPrefix>() else {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_prefix",
            format!("bad prefix {prefix:?}"),
        );
    };
    let (mode, matches) = {
        let s = state.lock().unwrap();
        let matches: Vec<FullHashMatch> = s
            .full_hashes
            .iter()
            .filter(|(h, _)| parsed.matches(h))
            .map(|(h, l)| FullHashMatch {
                full_hash: h.to_string(),
                list: l.clone(),
            })
            .collect();
        (s.hash_mode, matches)
    };
    match mode {
        HashMode::Hang => {
            tokio::time::sleep(std::time::Duration::from_secs(60)).await;
            StatusCode::GATEWAY_TIMEOUT.into_response()
        }
        HashMode::Normal => Json(FullHashResponse {
            prefix,
            matches,
            cache_duration_s: 300,
        })
        .into_response(),
        HashMode::Status(status) => error(status, "injected", format!("injected {status}")),
        HashMode::Garbage => (StatusCode::OK, "<html>not json</html>").into_response(),
        HashMode::WrongPrefix => Json(FullHashResponse {
            prefix: HashPrefix(parsed.0 ^ 1).to_string(),
            matches,
            cache_duration_s: 300,
        })
        .into_response(),
    }
}

/// A server that answers each connection with the next canned raw HTTP
/// response and closes it: for bodies cut short and bodies without a length,
/// which a well-behaved framework will not produce.
pub struct RawServer {
    pub base_url: String,
}

impl RawServer {
    pub async fn start(responses: Vec<Vec<u8>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            for response in responses {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(&response).await;
                let _ = stream.shutdown().await;
            }
        });
        Self {
            base_url: format!("http://{addr}"),
        }
    }

    /// A complete `200` response with `Content-Length`.
    pub fn ok(body: &[u8]) -> Vec<u8> {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: {}\r\nConnection: close\r\n\r\n",
            body.len(),
            etag_of(body)
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    }

    /// A `200` response that declares the whole body but sends only the
    /// first `sent` bytes before closing.
    pub fn cut(body: &[u8], sent: usize) -> Vec<u8> {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(&body[..sent]);
        r
    }

    /// A `200` response with no `Content-Length`: the body runs until the
    /// connection closes, so only the bytes received can be limited.
    pub fn until_close(body: &[u8]) -> Vec<u8> {
        let mut r = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
        r.extend_from_slice(body);
        r
    }
}

/// The public key of the trusted publisher key.
pub fn trusted() -> TrustedKey {
    publisher_key().public_key().clone()
}
