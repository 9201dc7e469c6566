//! A fault-injecting proxy on 127.0.0.1:0 in front of a real publisher:
//! agents keep its one URL while the test makes the publisher answer an
//! error status, go down (the proxy then answers `502 Bad Gateway`, as a
//! reverse proxy in front of a dead publisher does) or come back on another
//! port. Snapshot downloads and full-hash searches fail independently;
//! delta chains (`GET /v1/lists/{name}/updates/{from}`) can be mangled
//! ([`ChainFault`]: a delta dropped, corrupted, reordered, or an old chain
//! replayed).
//! [`ignoring_conditions`] is a proxy in front of an S3 API server that
//! makes it ignore conditional writes; [`HeldWrites`] one that holds some
//! writes until the test lets them through.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

/// What the proxy does with one kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forwards it to the upstream publisher and relays the answer.
    Forward,
    /// Answers this status itself, with a JSON error body.
    Status(u16),
}

/// What the proxy does to the next delta chain it relays (then it forwards
/// chains unchanged again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainFault {
    /// Relays it as the publisher sent it.
    Forward,
    /// Leaves out delta `i` (0 = the first); out of range, the last.
    Drop(usize),
    /// Flips one bit of byte `i` of the body (modulo its length).
    Corrupt(usize),
    /// Swaps the first two deltas.
    Reorder,
    /// Sends the chain relayed before this one instead.
    Replay,
}

#[derive(Debug)]
struct Shared {
    /// The publisher's base URL, `http://127.0.0.1:<port>`.
    upstream: String,
    /// For `GET /v1/lists/{name}/snapshot`.
    snapshots: Fault,
    /// For `POST /v1/hashes:search`.
    searches: Fault,
    /// The full-hash search answers relayed: `Content-Type` and body bytes.
    search_answers: Vec<(String, usize)>,
    /// Whether the advertisement of immutable full-hash buckets
    /// (`X-Blocksieve-Hashes`) is relayed: off by default, so that agents
    /// behind the proxy confirm by `POST /v1/hashes:search`, whose faults
    /// it injects.
    relay_buckets: bool,
    /// For the next `GET /v1/lists/{name}/updates/{from}` with a body.
    chain_fault: ChainFault,
    /// The last delta chain relayed (for [`ChainFault::Replay`]).
    last_chain: Option<Bytes>,
    /// Delta chains relayed with a fault applied.
    chain_faults_applied: usize,
}

/// A running proxy.
#[derive(Debug, Clone)]
pub struct FaultProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
}

/// Request headers an agent sends that the publisher reads.
const REQUEST_HEADERS: [HeaderName; 4] = [
    header::IF_NONE_MATCH,
    header::CONTENT_TYPE,
    header::USER_AGENT,
    header::ACCEPT,
];

/// Response headers the agent reads, relayed as the publisher sent them
/// (`Date` included, so that the agent sees the publisher's clock).
const RESPONSE_HEADERS: [&str; 10] = [
    blocksieve_format::api::FRESHNESS_HEADER,
    "etag",
    "date",
    "age",
    "cache-control",
    "content-type",
    "retry-after",
    blocksieve_format::api::NEXT_CHECK_HEADER,
    blocksieve_format::api::NEXT_CHECK_AT_HEADER,
    "last-modified",
];

impl FaultProxy {
    /// Starts forwarding everything to `upstream` (a base URL).
    ///
    /// # Panics
    ///
    /// When no port can be bound.
    pub async fn start(upstream: &str) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            upstream: upstream.to_owned(),
            snapshots: Fault::Forward,
            searches: Fault::Forward,
            search_answers: Vec::new(),
            relay_buckets: false,
            chain_fault: ChainFault::Forward,
            last_chain: None,
            chain_faults_applied: 0,
        }));
        let client = reqwest::Client::new();
        let app = Router::new()
            .fallback(forward)
            .with_state((Arc::clone(&shared), client));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, shared }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forwards to `upstream` from now on (a publisher restarted elsewhere).
    pub fn set_upstream(&self, upstream: &str) {
        upstream.clone_into(&mut self.shared().upstream);
    }

    /// What snapshot downloads get.
    pub fn set_snapshots(&self, fault: Fault) {
        self.shared().snapshots = fault;
    }

    /// Relays the advertisement of immutable full-hash buckets on snapshot
    /// responses from now on: agents behind the proxy then fetch full
    /// hashes there (forwarded as they are).
    pub fn relay_bucket_advertisement(&self) {
        self.shared().relay_buckets = true;
    }

    /// What the next delta chain relayed gets.
    pub fn set_chain_fault(&self, fault: ChainFault) {
        self.shared().chain_fault = fault;
    }

    /// How many delta chains were relayed with a fault applied.
    pub fn chain_faults_applied(&self) -> usize {
        self.shared().chain_faults_applied
    }

    /// What full-hash searches get.
    pub fn set_searches(&self, fault: Fault) {
        self.shared().searches = fault;
    }

    /// The full-hash search answers relayed so far, oldest first: each
    /// one's `Content-Type` and body size in bytes.
    pub fn search_answers(&self) -> Vec<(String, usize)> {
        self.shared().search_answers.clone()
    }
}

type ProxyState = State<(Arc<Mutex<Shared>>, reqwest::Client)>;

fn error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": { "code": "injected", "message": message } });
    (status, axum::Json(body)).into_response()
}

async fn forward(
    State((shared, client)): ProxyState,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let (upstream, fault, relay_buckets) = {
        let s = shared.lock().unwrap_or_else(PoisonError::into_inner);
        let fault = if path.ends_with("/snapshot") {
            s.snapshots
        } else if path.starts_with("/v1/hashes:search") {
            s.searches
        } else {
            Fault::Forward
        };
        (s.upstream.clone(), fault, s.relay_buckets)
    };
    if let Fault::Status(code) = fault {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
        return error(status, &format!("injected {code}"));
    }
    let Ok(method) = reqwest::Method::from_bytes(method.as_str().as_bytes()) else {
        return error(StatusCode::METHOD_NOT_ALLOWED, "unknown method");
    };
    let mut request = client.request(method, format!("{upstream}{path}")).body(body);
    for name in REQUEST_HEADERS {
        if let Some(value) = headers.get(&name).and_then(|v| v.to_str().ok()) {
            request = request.header(name.as_str(), value);
        }
    }
    let Ok(answer) = request.send().await else {
        return error(StatusCode::BAD_GATEWAY, "the publisher is down");
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let buckets = relay_buckets.then_some(blocksieve_format::api::HASHES_HEADER);
    let relayed: Vec<(String, String)> = RESPONSE_HEADERS
        .iter()
        .chain(buckets.iter())
        .filter_map(|name| {
            let value = answer.headers().get(*name)?.to_str().ok()?;
            Some(((*name).to_owned(), value.to_owned()))
        })
        .collect();
    let Ok(bytes) = answer.bytes().await else {
        return error(StatusCode::BAD_GATEWAY, "the publisher's answer was cut");
    };
    if path.starts_with("/v1/hashes:search") {
        let content_type = relayed
            .iter()
            .find(|(name, _)| name == "content-type")
            .map(|(_, value)| value.clone())
            .unwrap_or_default();
        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
        s.search_answers.push((content_type, bytes.len()));
    }
    let bytes = if path.contains("/updates/") && status == StatusCode::OK && !bytes.is_empty() {
        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
        let fault = std::mem::replace(&mut s.chain_fault, ChainFault::Forward);
        let replayed = s.last_chain.replace(bytes.clone());
        let mangled = mangle(fault, &bytes, replayed);
        if mangled != bytes {
            s.chain_faults_applied += 1;
        }
        mangled
    } else {
        bytes
    };
    let mut response = (status, bytes).into_response();
    for (name, value) in relayed {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            axum::http::HeaderValue::from_str(&value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// `chain` with `fault` applied; `previous` is the chain relayed before.
fn mangle(fault: ChainFault, chain: &Bytes, previous: Option<Bytes>) -> Bytes {
    let mut deltas = Vec::new();
    let mut rest = &chain[..];
    while let Ok((_, len)) = blocksieve_format::parse_delta_header(rest) {
        let Some((one, tail)) = rest.split_at_checked(len) else {
            break;
        };
        deltas.push(one.to_vec());
        rest = tail;
    }
    match fault {
        ChainFault::Forward => chain.clone(),
        ChainFault::Drop(i) if !deltas.is_empty() => {
            deltas.remove(i.min(deltas.len() - 1));
            Bytes::from(deltas.concat())
        }
        ChainFault::Corrupt(i) => {
            let mut bytes = chain.to_vec();
            let at = i % bytes.len();
            bytes[at] ^= 0x10;
            Bytes::from(bytes)
        }
        ChainFault::Reorder if deltas.len() >= 2 => {
            deltas.swap(0, 1);
            Bytes::from(deltas.concat())
        }
        ChainFault::Replay => previous.unwrap_or_else(|| chain.clone()),
        ChainFault::Drop(_) | ChainFault::Reorder => chain.clone(),
    }
}

/// Starts a proxy in front of the S3 API server at `upstream` (a base URL)
/// that drops `If-None-Match` and `If-Match` from every request and
/// forwards the rest as sent: a store that ignores conditional writes, as
/// some S3-compatible servers do. Returns where it listens.
///
/// # Panics
///
/// When no port can be bound.
pub async fn ignoring_conditions(upstream: &str) -> SocketAddr {
    let upstream = upstream.to_owned();
    let client = reqwest::Client::new();
    let app = Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let (upstream, client) = (upstream.clone(), client.clone());
        async move {
            let dropped = [header::IF_NONE_MATCH, header::IF_MATCH];
            relay(&client, &upstream, (method, uri, headers, body), &dropped).await
        }
    });
    serve_proxy(app).await
}

/// A proxy in front of the S3 API server at `upstream` that holds every
/// `PUT` whose path contains `held` until [`HeldWrites::release`]: a store
/// slow to take some object, so that a test can act while a write is under
/// way (a build cancelled mid-publish). Every other request, and the held
/// ones once released, is forwarded as sent.
pub struct HeldWrites {
    addr: SocketAddr,
    arrived: tokio::sync::watch::Receiver<usize>,
    release: tokio::sync::watch::Sender<bool>,
}

impl HeldWrites {
    /// Starts the proxy.
    ///
    /// # Panics
    ///
    /// When no port can be bound.
    pub async fn start(upstream: &str, held: &str) -> Self {
        let (arrivals, arrived) = tokio::sync::watch::channel(0usize);
        let (release, released) = tokio::sync::watch::channel(false);
        let (upstream, held) = (upstream.to_owned(), held.to_owned());
        let client = reqwest::Client::new();
        let arrivals = Arc::new(arrivals);
        let app = Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (upstream, client, arrivals) = (upstream.clone(), client.clone(), arrivals.clone());
            let mut released = released.clone();
            let hold = method == Method::PUT && uri.path().contains(held.as_str());
            async move {
                if hold {
                    arrivals.send_modify(|n| *n += 1);
                    let _ = released.wait_for(|&go| go).await;
                }
                relay(&client, &upstream, (method, uri, headers, body), &[]).await
            }
        });
        Self {
            addr: serve_proxy(app).await,
            arrived,
            release,
        }
    }

    /// Where the proxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits up to `within` for a write to be held: `false` if none came.
    pub async fn arrived(&self, within: std::time::Duration) -> bool {
        let mut arrived = self.arrived.clone();
        tokio::time::timeout(within, arrived.wait_for(|&n| n > 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Lets every held write through, and every later one.
    pub fn release(&self) {
        let _ = self.release.send(true);
    }
}

/// Forwards one request to the S3 API server at `upstream` as sent (but
/// for the `dropped` headers and `Host`), and its answer back: the part
/// every store proxy of the tests shares.
pub async fn relay(
    client: &reqwest::Client,
    upstream: &str,
    (method, uri, mut headers, body): (Method, Uri, HeaderMap, Bytes),
    dropped: &[HeaderName],
) -> Response {
    for name in dropped.iter().chain([&header::HOST]) {
        headers.remove(name);
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = client
        .request(method, format!("{upstream}{path}"))
        .headers(headers)
        .body(body);
    let Ok(answer) = request.send().await else {
        return error(StatusCode::BAD_GATEWAY, "the store is down");
    };
    let (status, mut headers) = (answer.status(), answer.headers().clone());
    let Ok(bytes) = answer.bytes().await else {
        return error(StatusCode::BAD_GATEWAY, "the store's answer was cut");
    };
    headers.remove(header::TRANSFER_ENCODING);
    let mut response = (status, bytes).into_response();
    response.headers_mut().extend(headers);
    response
}

/// Serves `app` on 127.0.0.1:0: where it listens.
///
/// # Panics
///
/// When no port can be bound.
pub async fn serve_proxy(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}
