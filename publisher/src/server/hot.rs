//! The protocol's busiest routes, dispatched without axum's router.
//!
//! Every agent polls its lists' snapshots (mostly `304`s), asks deltas, and
//! confirms its prefix hits; those four `GET` routes are nearly every
//! request a publisher serves. Through axum's router each request cost
//! about 1.4 µs of CPU more than the same handler called directly
//! (`bench/findings/4-http.md`: the route match, the matched path and URL
//! parameters stored in the request's extensions, the route's boxed
//! service cloned and its future boxed, the extractors): a sixth of the
//! CPU of a `304`. [`Api`] matches those routes itself and calls the same
//! handlers behind the same layers, in the same order — CORS (when
//! configured), gzip for JSON, then [`GuardLayer`] (body limit, body-read
//! timeout, concurrency slot, request timeout, metrics under the route's
//! pattern, JSON errors) — and hands every other request to the router.
//!
//! Only exact matches are taken: `GET`, every parameter one non-empty
//! segment with no `%` (so the segment is its own decoded value, as axum's
//! `Path` would give it). Anything else — `HEAD`, an escaped or empty
//! segment, a trailing slash — goes to the router, which answers it as it
//! always has; both paths run the same handler on the same request.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use blocksieve_format::api::routes;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt as _};
use tower_http::cors::CorsLayer;

use super::layer::GuardLayer;
use super::{compress_json, full_hashes, latest_snapshot, list_hashes, updates};
use crate::state::AppState;

/// One of the routes [`Api`] serves itself, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hot<'a> {
    /// [`routes::LATEST_SNAPSHOT`]: `name`.
    LatestSnapshot(&'a str),
    /// [`routes::UPDATES`]: `name`, `from`.
    Updates(&'a str, &'a str),
    /// [`routes::FULL_HASHES`]: `prefix`.
    FullHashes(&'a str),
    /// [`routes::LIST_HASHES`]: `name`, `version`, `prefix`.
    ListHashes(&'a str, &'a str, &'a str),
}

impl<'a> Hot<'a> {
    /// The route `method` and `path` name, if it is one of these exactly
    /// (see the module's documentation).
    fn of(method: &Method, path: &'a str) -> Option<Self> {
        if method != Method::GET {
            return None;
        }
        let rest = path.strip_prefix('/')?;
        if rest.as_bytes().contains(&b'%') {
            return None;
        }
        // Split on `/` a byte at a time (paths are short): `str::split`'s
        // searcher cost a twentieth of a `304`'s instructions.
        let mut parts: [&str; 6] = [""; 6];
        let mut count = 0;
        let mut start = 0;
        for bytes in rest.as_bytes().split(|&b| b == b'/') {
            let end = start + bytes.len();
            // `/` is ASCII: both ends are character boundaries.
            let segment = rest.get(start..end)?;
            if count == parts.len() || segment.is_empty() {
                return None;
            }
            parts[count] = segment;
            count += 1;
            start = end + 1;
        }
        match parts[..count] {
            ["v1", "lists", name, "snapshot"] => Some(Self::LatestSnapshot(name)),
            ["v1", "lists", name, "updates", from] => Some(Self::Updates(name, from)),
            ["v1", "hashes", prefix] => Some(Self::FullHashes(prefix)),
            ["v1", "lists", name, "hashes", version, prefix] => Some(Self::ListHashes(name, version, prefix)),
            _ => None,
        }
    }

    /// Index into [`Api`]'s services, and the route's pattern.
    fn route(self) -> (usize, &'static str) {
        match self {
            Self::LatestSnapshot(_) => (0, routes::LATEST_SNAPSHOT),
            Self::Updates(..) => (1, routes::UPDATES),
            Self::FullHashes(_) => (2, routes::FULL_HASHES),
            Self::ListHashes(..) => (3, routes::LIST_HASHES),
        }
    }
}

/// The patterns of [`Hot`], in the order of [`Hot::route`]'s indices.
const HOT_ROUTES: [&str; 4] = [
    routes::LATEST_SNAPSHOT,
    routes::UPDATES,
    routes::FULL_HASHES,
    routes::LIST_HASHES,
];

type Route = BoxCloneSyncService<Request, Response, Infallible>;

/// The publisher's HTTP service: the busiest routes served directly (see
/// the module's documentation), everything else by the router. Cloning it
/// is cheap (two reference counts), as a server does per request.
#[derive(Clone)]
pub struct Api {
    /// One service per hot route, with its layers; empty when the router
    /// serves no API route (a builder).
    hot: Arc<[Route]>,
    router: Router,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("hot_routes", &self.hot.len())
            .finish_non_exhaustive()
    }
}

impl Api {
    /// `router` (already layered) with the hot routes of `state` in front,
    /// behind the same layers: `cors` (`router`'s, when configured),
    /// [`compress_json`] and `guard` (one of `router`'s: the same slots and
    /// metrics).
    pub(super) fn new(
        router: Router,
        state: &Arc<AppState>,
        cors: Option<&CorsLayer>,
        guard: &GuardLayer,
    ) -> Self {
        let hot = HOT_ROUTES
            .iter()
            .map(|&pattern| {
                let handler = Handler { state: state.clone() };
                let service = ServiceBuilder::new()
                    .map_response(with_content_length)
                    .option_layer(cors.cloned())
                    .layer(compress_json())
                    .layer(guard.for_route(pattern))
                    .service(handler);
                BoxCloneSyncService::new(service)
            })
            .collect();
        Self { hot, router }
    }

    /// Every route through axum's router, the busiest ones included: what
    /// [`Api`] hands everything else to, e.g. to nest the publisher's
    /// routes in a larger axum application. Answers as [`Api`] does, at
    /// about 1.4 µs more CPU per request on the busiest routes.
    pub fn into_router(self) -> Router {
        self.router
    }

    /// Only `router`: no route is served outside it.
    pub(super) fn router_only(router: Router) -> Self {
        Self {
            hot: Arc::new([]),
            router,
        }
    }
}

impl<B> Service<axum::http::Request<B>> for Api
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Every route is always ready (the router's and the layers' are).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        let request = request.map(Body::new);
        let hot = Hot::of(request.method(), request.uri().path()).map(|h| h.route().0);
        match hot.and_then(|i| self.hot.get(i)) {
            Some(route) => {
                let answer = route.clone().oneshot(request);
                Box::pin(async move { answer.await.map(without_length_on_304) })
            }
            None => {
                let answer = self.router.clone().oneshot(request);
                Box::pin(async move { answer.await.map(without_length_on_304) })
            }
        }
    }
}

/// `response` with a `Content-Length` of its body's exact size, when it
/// has none and the size is known, as axum's router sets it on the
/// responses it answers (hyper would add it for a body of known size
/// anyway, and leaves it out of a `304`): the same headers from both paths.
fn with_content_length(response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    if response.status() != StatusCode::NOT_MODIFIED
        && !response.headers().contains_key(header::CONTENT_LENGTH)
        && let Some(len) = response.body().size_hint().exact()
    {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    response
}

/// `response` without a `Content-Length` when it is a `304`: RFC 9110
/// §8.6 allows one there only if it is the `200`'s length, and axum's
/// router sets `0` from the empty body, which hyper drops for a `GET` but
/// keeps for a `HEAD` (so the two differed).
fn without_length_on_304(mut response: Response) -> Response {
    if response.status() == StatusCode::NOT_MODIFIED {
        response.headers_mut().remove(header::CONTENT_LENGTH);
    }
    response
}

/// The handler of every hot route: matches the request's path again (a
/// few comparisons) and calls the route's handler with its parameters.
#[derive(Clone)]
struct Handler {
    state: Arc<AppState>,
}

impl Service<Request> for Handler {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let state = State(self.state.clone());
        Box::pin(async move {
            let owned = |s: &str| s.to_owned();
            let response = match Hot::of(request.method(), request.uri().path()) {
                Some(Hot::LatestSnapshot(name)) => {
                    let name = owned(name);
                    latest_snapshot(state, Path(name), request).await.into_response()
                }
                Some(Hot::Updates(name, from)) => {
                    let params = (owned(name), owned(from));
                    let (parts, _) = request.into_parts();
                    updates::updates(state, Path(params), parts.headers)
                        .await
                        .into_response()
                }
                Some(Hot::FullHashes(prefix)) => {
                    let prefix = owned(prefix);
                    full_hashes(state, Path(prefix), request).await.into_response()
                }
                Some(Hot::ListHashes(name, version, prefix)) => {
                    let params = (owned(name), owned(version), owned(prefix));
                    list_hashes(state, Path(params), request).await.into_response()
                }
                // `Api` sends only these routes here.
                None => super::not_found().await.into_response(),
            };
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_get_requests_of_the_four_routes_are_hot() {
        let get = Method::GET;
        assert_eq!(
            Hot::of(&get, "/v1/lists/phishing/snapshot"),
            Some(Hot::LatestSnapshot("phishing"))
        );
        assert_eq!(
            Hot::of(&get, "/v1/lists/phishing/updates/17"),
            Some(Hot::Updates("phishing", "17"))
        );
        assert_eq!(
            Hot::of(&get, "/v1/hashes/0a1b2c3d"),
            Some(Hot::FullHashes("0a1b2c3d"))
        );
        assert_eq!(
            Hot::of(&get, "/v1/lists/phishing/hashes/17/0a1b"),
            Some(Hot::ListHashes("phishing", "17", "0a1b"))
        );
        for (method, path) in [
            (Method::HEAD, "/v1/lists/phishing/snapshot"),
            (Method::POST, "/v1/hashes/0a1b2c3d"),
            (get.clone(), "/v1/lists/phishing/snapshot/"),
            (get.clone(), "/v1/lists//snapshot"),
            (get.clone(), "/v1/lists/phish%69ng/snapshot"),
            (get.clone(), "v1/hashes/0a1b2c3d"),
            (get.clone(), "//v1/hashes/0a1b2c3d"),
            (get.clone(), "/v1/hashes"),
            (get.clone(), "/v1/hashes/"),
            (get.clone(), "/v1/lists/phishing/snapshots/17"),
            (get.clone(), "/v1/lists/phishing/hashes/17/0a1b/extra"),
            (get.clone(), "/v1/lists/phishing/history"),
            (get.clone(), "/v2/hashes/0a1b2c3d"),
            (get.clone(), "/"),
        ] {
            assert_eq!(Hot::of(&method, path), None, "{method} {path}");
        }
    }

    #[test]
    fn every_hot_route_is_one_the_router_serves_and_is_counted() {
        for (i, pattern) in HOT_ROUTES.iter().enumerate() {
            assert!(super::super::ROUTES.contains(pattern), "{pattern}");
            // The index a route is served at is its pattern's.
            let path = pattern
                .replace("{name}", "l")
                .replace("{from}", "1")
                .replace("{version}", "1")
                .replace("{prefix}", "00");
            let hot = Hot::of(&Method::GET, &path).unwrap();
            assert_eq!(hot.route(), (i, *pattern));
        }
    }
}
