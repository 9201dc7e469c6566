//! The limits and the bookkeeping around every route, in one tower layer
//! ([`GuardLayer`]), in this order for a request:
//!
//! 1. the body limit: a declared length over the server's `MAX_REQUEST_BODY_BYTES` is
//!    answered `413 payload_too_large` before anything is read; a body that
//!    turns out longer is cut there;
//! 2. the body read: a request with a body is read whole, within
//!    the body-read timeout, before it takes a concurrency slot (a
//!    slot is for work: a client that declares a body and sends it slowly,
//!    or never, would otherwise hold one until the request timeout — 1,100
//!    such connections starved every healthy request for 30 s); a body not
//!    complete in time is answered `408 request_timeout`;
//! 3. the concurrency limit: at most the configured `max_concurrency` requests
//!    are served at once, over every route;
//! 4. the request timeout: a request not answered within
//!    the request timeout of taking its slot is answered
//!    `408 request_timeout`;
//! 5. the request metrics, by matched route and status
//!    ([`HttpMetrics`]), of requests the router answered, or that timed
//!    out (`408`) once in their slot (the
//!    route axum matched, or the one a [`GuardLayer::for_route`] stands
//!    in front of: the routes `hot` dispatches without the router);
//! 6. JSON errors: the error responses that axum's extractors and
//!    fallbacks write themselves (plain-text path and body rejections) get
//!    the JSON body of every other error, keeping their status and text.
//!
//! One layer rather than a stack of them because a request passes every
//! step: the per-request cost (cloning each layer's service, boxing each
//! step's future) is paid once.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::{FromRequest as _, MatchedPath, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;
use tower::{Layer, Service};

use super::error::{ApiError, body_error, shown};
use crate::metrics::{HttpMetrics, HttpRoute};

/// The layer: [`Guard`] around each route of a router (`Router::layer`).
#[derive(Debug, Clone)]
pub(super) struct GuardLayer {
    shared: Arc<Shared>,
    /// The route pattern every request through this layer is recorded
    /// under; `None`: the one axum matched ([`MatchedPath`]).
    route: Option<&'static str>,
}

/// What every request of a router shares.
#[derive(Debug)]
struct Shared {
    request_timeout: Duration,
    body_read_timeout: Duration,
    body_limit: usize,
    slots: Semaphore,
    metrics: HttpMetrics,
}

impl GuardLayer {
    /// The layer for the given timeouts, `max_concurrency` requests at
    /// once, a body limit of `body_limit` bytes, and requests recorded in
    /// `metrics`.
    pub(super) fn new(
        request_timeout: Duration,
        body_read_timeout: Duration,
        max_concurrency: usize,
        body_limit: usize,
        metrics: HttpMetrics,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                request_timeout,
                body_read_timeout,
                body_limit,
                slots: Semaphore::new(max_concurrency.min(Semaphore::MAX_PERMITS)),
                metrics,
            }),
            route: None,
        }
    }

    /// The same layer (the same concurrency slots, limits and metrics) in
    /// front of one route served without axum's router, whose requests
    /// carry no [`MatchedPath`]: they are recorded under `pattern`.
    pub(super) fn for_route(&self, pattern: &'static str) -> Self {
        Self {
            shared: self.shared.clone(),
            route: Some(pattern),
        }
    }
}

impl<S> Layer<S> for GuardLayer {
    type Service = Guard<S>;

    fn layer(&self, inner: S) -> Guard<S> {
        Guard {
            inner,
            shared: self.shared.clone(),
            route: self.route,
        }
    }
}

/// The service of [`GuardLayer`] around one route.
#[derive(Debug, Clone)]
pub(super) struct Guard<S> {
    inner: S,
    shared: Arc<Shared>,
    route: Option<&'static str>,
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<S> Service<Request> for Guard<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> BoxFuture {
        let shared = self.shared.clone();
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        let limit = match declared {
            Some(len) if len > shared.body_limit => {
                let error = ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("request body of {len} bytes, the limit is {}", shared.body_limit),
                );
                return Box::pin(std::future::ready(Ok(error.into_response())));
            }
            Some(len) => len.min(shared.body_limit),
            None => shared.body_limit,
        };
        let route = shared.metrics.route(self.route.unwrap_or_else(|| {
            request
                .extensions()
                .get::<MatchedPath>()
                .map_or("unmatched", MatchedPath::as_str)
        }));
        if request.body().size_hint().exact() == Some(0) {
            // Nothing to read: the route's future now (a route's future
            // does nothing until polled), the slot when it is polled.
            let future = self.inner.call(request);
            return Box::pin(async move { Ok(json_errors(shared.serve(&route, future).await).await) });
        }
        // `inner` was ready; the clone left in its place is not yet.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = Body::new(http_body_util::Limited::new(body, limit));
            let read = Bytes::from_request(Request::new(body), &());
            let response = match tokio::time::timeout(shared.body_read_timeout, read).await {
                Ok(Ok(bytes)) => {
                    let future = inner.call(Request::from_parts(parts, Body::from(bytes)));
                    shared.serve(&route, future).await
                }
                Ok(Err(rejection)) => body_error(&rejection, shared.body_limit).into_response(),
                Err(_) => ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "request_timeout",
                    format!(
                        "request body not received within {} s",
                        shared.body_read_timeout.as_secs_f64()
                    ),
                )
                .into_response(),
            };
            Ok(json_errors(response).await)
        })
    }
}

impl Shared {
    /// Runs `future` (the route) in a concurrency slot, within the request
    /// timeout, and records what it answered.
    async fn serve(
        &self,
        route: &HttpRoute,
        future: impl Future<Output = Result<Response, Infallible>>,
    ) -> Response {
        // The semaphore is never closed.
        let Ok(_slot) = self.slots.acquire().await else {
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        };
        let started = Instant::now();
        match tokio::time::timeout(self.request_timeout, future).await {
            Ok(Ok(response)) => {
                self.metrics
                    .record(route, response.status().as_u16(), started.elapsed().as_secs_f64());
                response
            }
            Ok(Err(never)) => match never {},
            Err(_) => {
                // Counted too: a route that stalls (every full-hash answer
                // timing out, its hits unverified) must show in the
                // request metrics, not vanish from them.
                self.metrics.record(
                    route,
                    StatusCode::REQUEST_TIMEOUT.as_u16(),
                    started.elapsed().as_secs_f64(),
                );
                ApiError::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", "request timeout")
                    .into_response()
            }
        }
    }
}

/// `response`, or, for an error response without a JSON body, the JSON
/// error of its status and text.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json {
        return response;
    }
    // Rejection texts are one short line; read at most 1 KiB of it.
    let text = axum::body::to_bytes(response.into_body(), 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_lowercase()
    } else {
        shown(&text)
    };
    ApiError::new(status, code, message).into_response()
}
