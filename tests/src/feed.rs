//! A fake feed server on 127.0.0.1:0 for injecting source faults: it serves
//! whatever body, status and content type a test sets, honours `ETag` /
//! `If-None-Match` and `Last-Modified` / `If-Modified-Since`, and records
//! every request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// What the fake feed answers.
#[derive(Debug, Clone)]
pub struct FeedResponse {
    /// Status code.
    pub status: u16,
    /// Body bytes.
    pub body: Vec<u8>,
    /// `Content-Type`.
    pub content_type: String,
    /// `ETag`, if any; a matching `If-None-Match` gets a 304.
    pub etag: Option<String>,
    /// `Last-Modified` and the response's `Date`, if any: the time of a
    /// file's last change (the HTTP date of its second) as a file server
    /// whose clock reads `date` sends it. An `If-Modified-Since` at or
    /// after it gets a 304, as such servers compare it with the file's
    /// time (Python's `http.server`, for one).
    pub last_modified: Option<(std::time::SystemTime, std::time::SystemTime)>,
}

/// A fault the fake feed answers one request with, before its
/// [`FeedResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedFault {
    /// This status, with this `Retry-After` if any, and a short body.
    Status(u16, Option<String>),
    /// Status 200 and the response's whole `Content-Length`, but the
    /// connection is closed after half of its body.
    CutBody,
    /// No answer for this long, then the response.
    Stall(std::time::Duration),
}

/// One request the fake feed saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// The `If-None-Match` header, if sent.
    pub if_none_match: Option<String>,
    /// The `If-Modified-Since` header, if sent.
    pub if_modified_since: Option<String>,
}

#[derive(Debug)]
struct Shared {
    response: FeedResponse,
    seen: Vec<SeenRequest>,
    faults: std::collections::VecDeque<FeedFault>,
}

/// A running fake feed.
#[derive(Debug, Clone)]
pub struct FakeFeed {
    /// Where it listens.
    pub addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
}

impl FakeFeed {
    /// Starts serving `body` as `text/plain` with status 200 at `/feed.txt`.
    ///
    /// # Panics
    ///
    /// When no port can be bound.
    pub async fn start(body: &[u8]) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            response: FeedResponse {
                status: 200,
                body: body.to_vec(),
                content_type: "text/plain".into(),
                etag: None,
                last_modified: None,
            },
            seen: Vec::new(),
            faults: std::collections::VecDeque::new(),
        }));
        let app = Router::new()
            .route("/feed.txt", get(serve))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, shared }
    }

    /// The feed URL.
    pub fn url(&self) -> String {
        format!("http://{}/feed.txt", self.addr)
    }

    /// Changes what the feed answers.
    pub fn set(&self, f: impl FnOnce(&mut FeedResponse)) {
        if let Ok(mut s) = self.shared.lock() {
            f(&mut s.response);
        }
    }

    /// Answers the next requests with `faults`, one each, in order, then
    /// with the response again.
    pub fn fail_next(&self, faults: impl IntoIterator<Item = FeedFault>) {
        if let Ok(mut s) = self.shared.lock() {
            s.faults.extend(faults);
        }
    }

    /// Requests seen so far.
    pub fn seen(&self) -> Vec<SeenRequest> {
        self.shared.lock().map(|s| s.seen.clone()).unwrap_or_default()
    }
}

async fn serve(State(shared): State<Arc<Mutex<Shared>>>, headers: HeaderMap) -> Response {
    let inm = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let ims = headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // The lock is not held across the stall's wait.
    let (r, fault) = {
        let Ok(mut s) = shared.lock() else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        s.seen.push(SeenRequest {
            if_none_match: inm.clone(),
            if_modified_since: ims.clone(),
        });
        (s.response.clone(), s.faults.pop_front())
    };
    match fault {
        Some(FeedFault::Status(status, retry_after)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = (status, "fault\n").into_response();
            if let Some(value) = retry_after.and_then(|v| v.parse().ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        Some(FeedFault::Stall(pause)) => {
            tokio::time::sleep(pause).await;
            return (StatusCode::OK, r.body).into_response();
        }
        Some(FeedFault::CutBody) => {
            let half = r.body[..r.body.len() / 2].to_vec();
            let chunks: [Result<Vec<u8>, std::io::Error>; 2] = [
                Ok(half),
                Err(std::io::Error::other("the fake feed cuts the body")),
            ];
            let mut response =
                axum::body::Body::from_stream(futures_util::stream::iter(chunks)).into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_LENGTH, r.body.len().into());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain"),
            );
            return response;
        }
        None => {}
    }
    if r.status == 200 && r.etag.is_some() && inm == r.etag {
        return StatusCode::NOT_MODIFIED.into_response();
    }
    // Compared at the resolution of HTTP dates, one second: a change later
    // in the second `Last-Modified` names is not seen.
    let seconds =
        |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let unchanged_since = |(modified, _): (std::time::SystemTime, std::time::SystemTime)| {
        ims.as_deref()
            .and_then(|v| httpdate::parse_http_date(v).ok())
            .is_some_and(|since| seconds(modified) <= seconds(since))
    };
    if r.status == 200 && inm.is_none() && r.last_modified.is_some_and(unchanged_since) {
        return StatusCode::NOT_MODIFIED.into_response();
    }
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, [(header::CONTENT_TYPE, r.content_type)], r.body).into_response();
    if let Some(etag) = r.etag.and_then(|e| e.parse().ok()) {
        response.headers_mut().insert(header::ETAG, etag);
    }
    if let Some((modified, date)) = r.last_modified {
        for (name, at) in [(header::LAST_MODIFIED, modified), (header::DATE, date)] {
            if let Ok(value) = httpdate::fmt_http_date(at).parse() {
                response.headers_mut().insert(name, value);
            }
        }
    }
    response
}
