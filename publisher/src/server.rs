//! The HTTP API (axum; its four busiest `GET` routes matched in front of
//! the router, `hot`). Every error is mapped to a JSON body in one place,
//! [`ApiError`] (`error`); limits (body size, body-read time, timeout, concurrency)
//! and the request metrics are one layer (`layer`), which also gives
//! the errors axum's extractors answer themselves (a path that is not
//! UTF-8) the same JSON body. Requests hyper refuses before routing (a malformed
//! request line, a head over [`MAX_REQUEST_HEAD_BYTES`]) get hyper's bare
//! 400 or 431 and the connection is closed.
//!
//! The full-hash routes answer in JSON or, to an `Accept` naming
//! [`FULL_HASHES_CONTENT_TYPE`], in the binary encoding of FORMAT.md
//! "Full-hash answers"; both say `Vary: Accept`. JSON answers are
//! gzip-compressed for a client that accepts it ([`compress_json`]); the
//! binary answers and snapshots are not (full hashes and zstd bodies do not
//! compress). Caching by CDNs: errors `no-store`; the latest snapshot
//! `public, max-age=<next check>, stale-if-error=`[`STALE_IF_ERROR_S`]
//! and the deltas from a version (`updates`) `public, max-age=<next
//! check>`, the next check being when the list's next scheduled build
//! should have finished;
//! versioned snapshots and the buckets of one snapshot version
//! (`GET /v1/lists/{name}/hashes/{version}/{prefix}`, advertised by
//! [`HASHES_HEADER`](blocksieve_format::api::HASHES_HEADER) on snapshot responses) `public, max-age=31536000,
//! immutable`; `GET /v1/hashes/{prefix}` `public, max-age=<cache_duration_s>`.
//! The status page `/` (`page`, HTML for operators) is `no-store`, with
//! its own `Content-Security-Policy`, as are `GET /v1/lists` and a list's
//! build history (live state, not the protocol's).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use blocksieve_format::RequestPrefix;
use blocksieve_format::api::{
    AnswerError, FULL_HASHES_CONTENT_TYPE, FullHashAnswer, ListStatus, ListsResponse, MAX_ANSWER_MATCHES,
    NEXT_CHECK_AT_HEADER, NEXT_CHECK_HEADER, PrefixAnswer, SnapshotStatus, accepts_full_hashes_binary,
    routes,
};
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{Predicate as _, SizeAbove};

use crate::state::{AppState, ListSlot, Published};

mod buckets;
pub mod cors;
mod error;
mod history;
mod hot;
mod layer;
pub mod page;
mod search;
mod updates;

pub use error::ApiError;
use error::{parse_snapshot, parse_version, shown, unknown_list};
pub use hot::Api;
use layer::GuardLayer;
use updates::{hashes_header, if_none_match_matches};

pub use search::{Search, parse_search, parse_search_request};
use search::{other_snapshot, search};

/// Largest request body accepted, in bytes: 1,000 prefixes of 8 hex digits
/// in JSON are about 12 KiB.
pub const MAX_REQUEST_BODY_BYTES: usize = 64 * 1024;

/// Largest request head (request line and headers), in bytes: agents send
/// a few hundred; the rest is room for proxies' headers.
pub const MAX_REQUEST_HEAD_BYTES: usize = 32 * 1024;

/// How long, in seconds, a CDN may keep serving the latest snapshot it
/// holds when the publisher answers with an error or not at all
/// (`stale-if-error`, RFC 5861): one day. A snapshot stays valid until its
/// own expiry, which the agent checks, so a stale copy is safe to serve.
pub const STALE_IF_ERROR_S: u64 = 24 * 60 * 60;

/// Smallest response body, in bytes, worth gzip-compressing.
const MIN_COMPRESSED_BYTES: u16 = 256;

/// Limits, and the CORS policy, applied as layers.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Longest a request may take, once its body is read, before a 408.
    pub request_timeout: Duration,
    /// Longest a client may take to send a request's body, counted from
    /// when its headers were read, before a 408. Bodies are read before a
    /// request takes one of the `max_concurrency` slots, so a client slow
    /// to send its body holds no slot, only the bytes it sent (at most
    /// [`MAX_REQUEST_BODY_BYTES`]).
    pub body_read_timeout: Duration,
    /// Requests served at once.
    pub max_concurrency: usize,
    /// Origins whose pages may call the API ([`cors`]); empty: none.
    pub cors_allowed_origins: Vec<String>,
}

/// The API over `state`: the router, with its busiest routes served in
/// front of it ([`Api`], `hot`); tests can call it without a socket.
pub fn router(state: Arc<AppState>, limits: Limits) -> Api {
    let api = operational_routes()
        .route(routes::LISTS, get(lists))
        .route(routes::LATEST_SNAPSHOT, get(latest_snapshot))
        .route(routes::VERSIONED_SNAPSHOT, get(versioned_snapshot))
        .route(routes::UPDATES, get(updates::updates))
        .route(routes::FULL_HASHES, get(full_hashes))
        .route(routes::LIST_HASHES, get(list_hashes))
        .route(routes::SEARCH, post(search));
    let guard = guard_layer(&state, &limits);
    let cors = cors::layer(&limits.cors_allowed_origins);
    let router = with_layers(api, state.clone(), guard.clone());
    let router = match &cors {
        // Outermost: a preflight is answered before any limit or route.
        Some(cors) => router.layer(cors.clone()),
        None => router,
    };
    Api::new(router, &state, cors.as_ref(), &guard)
}

/// A builder's router: only the status page `/`, the build history
/// `/v1/lists/{name}/history`, `/healthz`, `/readyz` and `/metrics`, with
/// the same limits; every other `/v1` route is 404, as any unknown route.
/// (The page and the history are there because a builder is where builds,
/// sources and history are: replicas build nothing.)
pub fn operational_router(state: Arc<AppState>, limits: Limits) -> Api {
    let guard = guard_layer(&state, &limits);
    Api::router_only(with_layers(operational_routes(), state, guard))
}

fn operational_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(STATUS_PAGE, get(page::page))
        .route(routes::LIST_HISTORY, get(history::history))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

/// Every route pattern of the routers, and `unmatched` (the fallbacks):
/// the request metrics of these are resolved once per router.
const ROUTES: [&str; 13] = [
    STATUS_PAGE,
    "/healthz",
    "/readyz",
    "/metrics",
    routes::LISTS,
    routes::LATEST_SNAPSHOT,
    routes::VERSIONED_SNAPSHOT,
    routes::UPDATES,
    routes::FULL_HASHES,
    routes::LIST_HASHES,
    routes::SEARCH,
    routes::LIST_HISTORY,
    "unmatched",
];

/// The status page for operators (HTML, [`page`]): the publisher's
/// own route, like `/metrics`, not the protocol's.
pub const STATUS_PAGE: &str = "/";

/// The limits and the request metrics of one router ([`layer`]), shared
/// by its routes and the ones [`Api`] serves in front of it.
fn guard_layer(state: &AppState, limits: &Limits) -> GuardLayer {
    GuardLayer::new(
        limits.request_timeout,
        limits.body_read_timeout,
        limits.max_concurrency,
        MAX_REQUEST_BODY_BYTES,
        state.metrics.http(&ROUTES),
    )
}

/// `routes` with the fallbacks, `guard` (the limits and the request
/// metrics, [`layer`]), and gzip for JSON answers.
fn with_layers(routes: Router<Arc<AppState>>, state: Arc<AppState>, guard: GuardLayer) -> Router {
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
        .layer(guard)
        .layer(compress_json())
}

/// gzip for JSON answers over [`MIN_COMPRESSED_BYTES`] to clients that
/// send `Accept-Encoding: gzip` (full-hash answers in hex shrink to about
/// half); nothing else is compressed: binary full hashes and zstd snapshots
/// do not compress, and the metrics are scraped nearby.
fn compress_json() -> CompressionLayer<impl tower_http::compression::Predicate> {
    let is_json = |_: StatusCode, _: axum::http::Version, headers: &HeaderMap, _: &axum::http::Extensions| {
        headers
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
    };
    CompressionLayer::new()
        .no_br()
        .no_deflate()
        .no_zstd()
        .compress_when(SizeAbove::new(MIN_COMPRESSED_BYTES).and(is_json))
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<Arc<AppState>>) -> Result<&'static str, ApiError> {
    check_ready(&state)?;
    Ok("ready\n")
}

/// Seconds a client is asked to wait (`Retry-After`) when this server has
/// no snapshot yet for some list.
const NOT_READY_RETRY_S: u64 = 5;

/// `503 not_ready` (with `Retry-After`) while some list has no snapshot in
/// service: its first build (or a replica's first load) has not succeeded.
/// A full-hash answer covers every list, so one given then could leave out
/// a listed hash, and an agent would take that "no match" as safe.
fn check_ready(state: &AppState) -> Result<(), ApiError> {
    if state.ready() {
        return Ok(());
    }
    let missing: Vec<&str> = state
        .lists
        .iter()
        .filter(|l| l.current.load().is_none())
        .map(|l| l.name.as_str())
        .collect();
    // A builder serves no `/v1/lists`: its status page says why.
    let why = if state.role == crate::config::Role::Builder {
        "the status page / says why"
    } else {
        "GET /v1/lists says why"
    };
    Err(ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "not_ready",
        format!(
            "no snapshot yet for: {} ({why}); ask again or ask another server",
            missing.join(", ")
        ),
    )
    .retry_after(NOT_READY_RETRY_S))
}

async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    state.refresh_gauges();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    )
}

fn snapshot_status(p: &Published) -> SnapshotStatus {
    let h = &p.header;
    SnapshotStatus {
        version: h.version,
        created_at: h.created_at,
        expires_at: h.expires_at,
        entries: h.full_hash_count,
        unique_prefixes: h.entry_count,
        snapshot_bytes: p.snapshot.len() as u64,
        filter_kind: h.filter_kind.to_string(),
        bits_per_key: if h.entry_count == 0 {
            0.0
        } else {
            p.snapshot.len() as f64 * 8.0 / h.entry_count as f64
        },
        request_prefix_bits: h.request_prefix_bits,
        etag: p.etag.clone(),
        key_id: hex::encode(h.key_id),
    }
}

/// `GET /v1/lists`: what each list serves and how its last build went,
/// as of now: `no-store`, as the status page (a CDN's copy would show
/// operators a list's state from before its last build).
async fn lists(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let lists = state
        .lists
        .iter()
        .map(|slot| ListStatus {
            name: slot.name.clone(),
            snapshot: slot.current.load().as_deref().map(snapshot_status),
            last_build: slot.last_build.lock().map(|g| g.clone()).unwrap_or(None),
            store: slot.store_status.lock().map(|g| g.clone()).unwrap_or(None),
        })
        .collect();
    (
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        Json(ListsResponse { lists }),
    )
}

async fn latest_snapshot(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let slot = state.list(&name).ok_or_else(|| unknown_list(&name))?;
    let current = slot.current.load_full().ok_or_else(|| no_snapshot(&name, slot))?;
    let etag = current
        .headers
        .etag
        .clone()
        .ok_or_else(|| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "bad etag"))?;
    let [cache_control, next_check, next_check_at] =
        updates::snapshot_polled_values(updates::next_check(&state, slot), STALE_IF_ERROR_S);
    let hashes = updates::published_hashes_header(&name, &current);
    let freshness = updates::freshness_header(slot, &current);
    // A 304 carries what the 200 would among ETag, Cache-Control and
    // Content-Location (RFC 9110 §15.4.5), and the headers that guide the
    // agent's next poll: its freshness record, the next-check hint and
    // where this version's buckets are.
    // Made with room for every header (the 304 is most of what agents
    // ask): no growth of the map as they go in.
    if if_none_match_matches(request.headers(), &current.etag) {
        let mut headers = HeaderMap::with_capacity(8);
        headers.insert(header::ETAG, etag);
        headers.insert(header::CACHE_CONTROL, cache_control);
        headers.insert(
            const { header::HeaderName::from_static(NEXT_CHECK_HEADER) },
            next_check,
        );
        headers.insert(
            const { header::HeaderName::from_static(NEXT_CHECK_AT_HEADER) },
            next_check_at,
        );
        headers.insert(header::CONTENT_LOCATION, version_url(&name, &current));
        headers.insert(hashes.0, hashes.1);
        if let Some((name, value)) = freshness {
            headers.append(name, value);
        }
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        *response.headers_mut() = headers;
        return Ok(response);
    }
    Ok((
        StatusCode::OK,
        [
            (header::ETAG, etag),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (header::CACHE_CONTROL, cache_control),
            (
                const { header::HeaderName::from_static(NEXT_CHECK_HEADER) },
                next_check,
            ),
            (
                const { header::HeaderName::from_static(NEXT_CHECK_AT_HEADER) },
                next_check_at,
            ),
            (header::CONTENT_LOCATION, version_url(&name, &current)),
            hashes,
        ],
        freshness_parts(freshness),
        Body::from(current.snapshot.clone()),
    )
        .into_response())
}

async fn versioned_snapshot(
    State(state): State<Arc<AppState>>,
    Path((name, version)): Path<(String, String)>,
    request: Request,
) -> Result<Response, ApiError> {
    let slot = state.list(&name).ok_or_else(|| unknown_list(&name))?;
    let version = parse_version(&version)?;
    // Serve the current snapshot from memory; older kept ones from disk.
    let mut freshness = None;
    let mut hashes = None;
    let bytes = match slot.current.load_full() {
        Some(p) if p.header.version == version => {
            freshness = updates::freshness_header(slot, &p);
            hashes = Some(updates::published_hashes_header(&name, &p));
            p.snapshot.clone()
        }
        _ => {
            let store = slot.store.clone();
            let read = tokio::task::spawn_blocking(move || store.read_snapshot(version)).await;
            read.unwrap_or(Ok(None))
                .map_err(|e| {
                    // Served as immutable for a year: never bytes that are
                    // not what the manifest signed for.
                    tracing::error!(list = %name, version, error = %e, "a kept snapshot is not what its manifest says");
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "internal",
                        format!("list {name:?}'s stored snapshot version {version} does not match its manifest"),
                    )
                })?
                .map(axum::body::Bytes::from)
                .ok_or_else(|| {
                    ApiError::new(
                        StatusCode::NOT_FOUND,
                        "unknown_version",
                        format!("list {name:?} has no snapshot version {version} (only the newest are kept)"),
                    )
                })?
        }
    };
    let etag = format!("\"{version}\"");
    let immutable = HeaderValue::from_static("public, max-age=31536000, immutable");
    let etag_value = HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"0\""));
    let hashes = hashes.unwrap_or_else(|| hashes_header(&name, version));
    if if_none_match_matches(request.headers(), &etag) {
        return Ok((
            StatusCode::NOT_MODIFIED,
            [
                (header::ETAG, etag_value),
                (header::CACHE_CONTROL, immutable),
                hashes,
            ],
            freshness_parts(freshness),
        )
            .into_response());
    }
    Ok((
        StatusCode::OK,
        [
            (header::ETAG, etag_value),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (header::CACHE_CONTROL, immutable),
            hashes,
        ],
        freshness_parts(freshness),
        Body::from(bytes),
    )
        .into_response())
}

/// `404 no_snapshot` for list `name`, which has no snapshot in service:
/// why, as far as this server knows (no build has finished yet, or the
/// last one failed or was refused, and its reason).
fn no_snapshot(name: &str, slot: &ListSlot) -> ApiError {
    let last = slot.last_build.lock().ok().and_then(|b| b.clone());
    let refused = (slot.store_status.lock().ok()).and_then(|s| s.as_ref().and_then(|s| s.refused.clone()));
    let why = match (last, refused) {
        (None, Some(refused)) => format!(
            "the newest generation in the store is not loaded: {refused} (GET /v1/lists has the details)"
        ),
        (None, None) => "no build (or, on a replica, load from the store) of it has finished yet".to_owned(),
        (Some(b), _) if b.ok => "its build finished but nothing is served yet".to_owned(),
        (Some(b), _) => format!(
            "its last build did not publish: {} (GET /v1/lists has the details)",
            b.error.as_deref().unwrap_or("no reason recorded")
        ),
    };
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_snapshot",
        format!("list {name:?} has no snapshot yet; {why}"),
    )
}

/// `Content-Location` of the latest snapshot, `published`, of list `name`.
fn version_url(name: &str, published: &Published) -> HeaderValue {
    if published.headers.list == name {
        published.headers.version_url.clone()
    } else {
        HeaderValue::from_str(&routes::versioned_snapshot(name, published.header.version))
            .unwrap_or(HeaderValue::from_static("/"))
    }
}

/// The freshness header, when there is one, as response parts.
fn freshness_parts(
    freshness: Option<(header::HeaderName, HeaderValue)>,
) -> axum::response::AppendHeaders<Option<(header::HeaderName, HeaderValue)>> {
    axum::response::AppendHeaders(freshness)
}

/// Parses a hash prefix sent by a client: 2 to 8 lowercase hex digits.
///
/// # Errors
///
/// `400 bad_prefix` otherwise.
pub fn parse_request_prefix(text: &str) -> Result<RequestPrefix, ApiError> {
    text.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_prefix",
            format!(
                "hash prefix {:?}: expected 2 to 8 lowercase hex digits",
                shown(text)
            ),
        )
    })
}

/// Refuses a prefix under which some list's expected bucket is larger than
/// the configured cap (it would reveal too much of that list at once), for
/// the routes that answer for every list. Each list's bucket is capped, as
/// on its immutable buckets, not their sum: a list's bucket is served
/// there whatever other lists the publisher serves, and agents size their
/// prefixes by their lists' own advertised lengths.
fn check_bucket_size(
    state: &AppState,
    prefix: RequestPrefix,
    among: impl Fn(&str) -> bool,
) -> Result<RequestPrefix, ApiError> {
    for (list, expected, advertised) in state.buckets(prefix.bits(), among) {
        check_expected_bucket(state, prefix, list, expected, advertised)?;
    }
    Ok(prefix)
}

/// Refuses `prefix` when the bucket it selects of `list` (whose snapshot
/// advertises `advertised`-bit request prefixes) holds about `expected`
/// full hashes, more than the configured cap. A prefix shorter than the
/// list advertises may select twice the cap: agents still on the version
/// before the list's length grew ask at the old length until they take the
/// new snapshot (a length is kept while its bucket stays under 32 ×
/// `min_anonymity`, which may be the cap itself: `build/sizing.rs`), and
/// are answered while the list at most doubled in the build that
/// lengthened.
fn check_expected_bucket(
    state: &AppState,
    prefix: RequestPrefix,
    list: &str,
    expected: f64,
    advertised: u8,
) -> Result<RequestPrefix, ApiError> {
    let limit = if prefix.bits() < advertised {
        state.max_bucket_entries.saturating_mul(2)
    } else {
        state.max_bucket_entries
    };
    if expected > limit as f64 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "prefix_too_short",
            format!(
                "a {}-bit prefix selects about {expected:.0} full hashes of list {list}, more than the limit of {limit}; send a longer prefix",
                prefix.bits(),
            ),
        ));
    }
    Ok(prefix)
}

async fn full_hashes(
    State(state): State<Arc<AppState>>,
    Path(prefix_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let prefix = check_bucket_size(&state, parse_request_prefix(&prefix_text)?, |_| true)?;
    check_ready(&state)?;
    let cache_duration_s = state.cache_duration.as_secs();
    let answer = FullHashAnswer {
        cache_duration_s,
        results: vec![PrefixAnswer {
            prefix,
            matches: buckets::bucket(&state, prefix, |_| true),
        }],
    };
    let mut response = full_hash_answer(request.headers(), answer, |a| single_json(&a, prefix))?;
    // A GET answer is the same for everyone, and CDNs may keep it for the
    // cache duration it names. It names no version, so a cached answer (or
    // one from a replica still loading a newer build) can be older than a
    // client's filter: clients that hold a snapshot confirm at the
    // versioned buckets or by POST with `min_versions` (README, API).
    if let Some(value) = max_age(cache_duration_s) {
        response.headers_mut().insert(header::CACHE_CONTROL, value);
    }
    Ok(response)
}

/// The JSON answer of a single-prefix `GET` (`FullHashAnswer::single_json`:
/// the bytes `Json(answer.into_single(prefix))` sends, without building its
/// strings).
fn single_json(answer: &FullHashAnswer, prefix: RequestPrefix) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        answer.single_json(prefix),
    )
        .into_response()
}

/// `public, max-age=<seconds>`, formatted once per value and thread.
fn max_age(seconds: u64) -> Option<HeaderValue> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(u64, HeaderValue)>> = const { std::cell::RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((s, value)) if *s == seconds => Some(value.clone()),
        _ => {
            let value = HeaderValue::from_str(&format!("public, max-age={seconds}")).ok()?;
            *last = Some((seconds, value.clone()));
            Some(value)
        }
    })
}

/// `GET /v1/lists/{name}/hashes/{snapshot}/{prefix}`: the full hashes of
/// list `name`'s snapshot under `prefix`, padded as [`list_bucket`] does.
/// `snapshot` is the snapshot's id, `<version>-<16 hex digits of its body
/// hash>` (as advertised), or a version alone. The URL names the data
/// exactly, so the answer is `immutable` and every server that serves that
/// snapshot gives the same bytes for the same `Accept`. A server that
/// serves another snapshot refuses rather than answer from other data:
/// `503 behind` (with `Retry-After`) when it serves an older version or
/// none, `404 version_gone` when it serves a newer one, `404
/// other_snapshot` when its snapshot of that version has another body
/// (another publisher's build of the same second); the client then asks
/// another server, or `POST /v1/hashes:search` with `min_versions`.
async fn list_hashes(
    State(state): State<Arc<AppState>>,
    Path((name, version, prefix_text)): Path<(String, String, String)>,
    request: Request,
) -> Result<Response, ApiError> {
    let slot = state.list(&name).ok_or_else(|| unknown_list(&name))?;
    let (version, hash) = parse_snapshot(&version)?;
    let prefix = parse_request_prefix(&prefix_text)?;
    let current = slot.current.load_full();
    let served = current.as_deref().map(|p| p.header.version);
    let published = match current {
        Some(p) if p.header.version == version => {
            if let Some(hash) = hash
                && p.header.body_sha256[..8] != hash[..]
            {
                return Err(other_snapshot(&name, &p.header, &hash).with_status(StatusCode::NOT_FOUND));
            }
            p
        }
        Some(p) if p.header.version > version => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "version_gone",
                format!(
                    "list {}: this server serves version {}, not version {version}; \
                     ask POST {} with min_versions",
                    shown(&name),
                    p.header.version,
                    routes::SEARCH
                ),
            ));
        }
        _ => {
            state.metrics.answered_behind(&slot.name);
            let served = served.map_or_else(|| "no snapshot".to_owned(), |v| format!("version {v}"));
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "behind",
                format!(
                    "list {}: this server has {served}, the request is for version {version}; \
                     ask again or ask another server",
                    shown(&name)
                ),
            )
            .retry_after(1));
        }
    };
    // Only this list's full hashes are answered: its own bucket is what the
    // cap bounds. (Over every list, a small list's short request prefix,
    // sized by its own entries, would be refused beside a large list, and
    // its hits left unconfirmed.)
    let expected = published.hashes.len() as f64 / 2f64.powi(i32::from(prefix.bits()));
    let prefix = check_expected_bucket(
        &state,
        prefix,
        &name,
        expected,
        published.header.request_prefix_bits,
    )?;
    let answer = FullHashAnswer {
        cache_duration_s: state.cache_duration.as_secs(),
        results: vec![PrefixAnswer {
            prefix,
            matches: buckets::list_bucket(
                &slot.name,
                version,
                published.bucket(prefix),
                prefix,
                state.padding,
            ),
        }],
    };
    let mut response = full_hash_answer(request.headers(), answer, |a| single_json(&a, prefix))?;
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    Ok(response)
}

/// `answer` in the encoding the request's `Accept` asks for: binary when it
/// names [`FULL_HASHES_CONTENT_TYPE`] and the answer fits that encoding (at
/// most `MAX_PREFIXES_PER_REQUEST` prefixes and `MAX_ANSWER_LISTS` lists),
/// else `json(answer)`; `Vary: Accept` either way.
///
/// # Errors
///
/// `413 answer_too_large` when the answer holds more full hashes than one
/// binary answer carries; `500 internal` when it cannot be encoded
/// otherwise (a list name the binary encoding refuses; configuration
/// validates them).
fn full_hash_answer(
    headers: &HeaderMap,
    answer: FullHashAnswer,
    json: impl FnOnce(FullHashAnswer) -> Response,
) -> Result<Response, ApiError> {
    let binary = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(accepts_full_hashes_binary);
    let encoded = if binary {
        match answer.encode() {
            Ok(bytes) => Some(bytes),
            // More prefixes than one binary answer carries (a search under
            // a `max_prefixes_per_request` above the protocol's), or more
            // lists (a bucket of a publisher serving more than
            // `MAX_ANSWER_LISTS`): JSON, which the agent reads as well,
            // has no such limit.
            Err(AnswerError::TooMany {
                field: "prefix_count" | "list_count",
                ..
            }) => None,
            // Buckets larger than their averages: as the search's check.
            Err(AnswerError::TooMany {
                field: "match_count",
                count,
                ..
            }) => return Err(answer_too_large(answer.results.len(), count)),
            Err(e) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    format!("cannot encode the full-hash answer: {e}"),
                ));
            }
        }
    } else {
        None
    };
    let mut response = match encoded {
        Some(bytes) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(FULL_HASHES_CONTENT_TYPE),
            )],
            bytes,
        )
            .into_response(),
        None => json(answer),
    };
    response
        .headers_mut()
        .append(header::VARY, HeaderValue::from_static("accept"));
    Ok(response)
}

/// Refuses a search whose answer would hold more full hashes than one
/// answer may carry ([`MAX_ANSWER_MATCHES`], about the agent's read limit in
/// bytes), its buckets' averages and padding counted, before it is built:
/// `413 answer_too_large`, which the agent answers by asking for half the
/// prefixes at a time. Many prefixes over large buckets (a batch check of
/// many hits, or `padding` in the thousands) would otherwise fail to
/// encode, or be built at hundreds of megabytes to be refused. One URL's
/// check (a few dozen prefixes and up to 64 noise prefixes) fits at the
/// largest padding (10,000).
fn check_answer_size(
    state: &AppState,
    prefixes: &[RequestPrefix],
    among: impl Fn(&str) -> bool,
) -> Result<(), ApiError> {
    let expected: f64 = prefixes
        .iter()
        .map(|p| state.expected_bucket(p.bits(), &among).max(state.padding as f64))
        .sum();
    if expected > MAX_ANSWER_MATCHES as f64 {
        return Err(answer_too_large(prefixes.len(), expected as u64));
    }
    Ok(())
}

/// `413 answer_too_large` for `count` prefixes whose answer holds about
/// `matches` full hashes.
fn answer_too_large(count: usize, matches: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "answer_too_large",
        format!(
            "the answer to {count} prefixes would hold about {matches} full hashes, more than the {MAX_ANSWER_MATCHES} of one answer; send fewer prefixes per request"
        ),
    )
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;
    use blocksieve_format::FullHash;
    use blocksieve_format::api::{ErrorResponse, FullHashSearchResponse, ListedFullHash};

    use super::*;

    #[tokio::test]
    async fn full_hash_answers_are_negotiated_by_accept() {
        let h = FullHash::of(b"a.b.c/");
        let prefix = RequestPrefix::of(&h, 12);
        let answer = FullHashAnswer {
            cache_duration_s: 300,
            results: vec![PrefixAnswer {
                prefix,
                matches: vec![ListedFullHash {
                    full_hash: h,
                    list: "malware".to_owned(),
                }],
            }],
        };
        let json = |a: FullHashAnswer| Json(FullHashSearchResponse::from(a)).into_response();
        for (accept, binary) in [
            (None, false),
            (Some("application/json"), false),
            (Some("*/*"), false),
            (Some("application/vnd.blocksieve.full-hashes;q=0"), false),
            (Some(blocksieve_format::api::FULL_HASHES_ACCEPT), true),
            (Some("application/vnd.blocksieve.full-hashes"), true),
        ] {
            let mut headers = HeaderMap::new();
            if let Some(accept) = accept {
                headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
            }
            let response = full_hash_answer(&headers, answer.clone(), json).unwrap();
            assert_eq!(response.headers()[header::VARY], "accept", "{accept:?}");
            let content_type = response.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .to_owned();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
            if binary {
                assert_eq!(content_type, FULL_HASHES_CONTENT_TYPE);
                assert_eq!(FullHashAnswer::decode(&bytes), Ok(answer.clone()));
            } else {
                assert_eq!(content_type, "application/json", "{accept:?}");
                let parsed: FullHashSearchResponse = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(parsed, FullHashSearchResponse::from(answer.clone()));
            }
        }
    }

    #[test]
    fn error_responses_are_not_stored_by_caches() {
        let response = unknown_list("x").into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
    }

    #[test]
    fn etag_matching() {
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"a\", W/\"b\""));
        assert!(if_none_match_matches(&h, "\"a\""));
        assert!(if_none_match_matches(&h, "\"b\""));
        assert!(!if_none_match_matches(&h, "\"c\""));
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(if_none_match_matches(&h, "\"c\""));
        // Tags may hold obs-text (RFC 9110 §8.8.3: `etagc`); another tag's
        // does not hide this one. Tabs and spaces around a tag, and
        // several header lines, as a list.
        let other = HeaderValue::from_bytes(b"\"\xff\",\t\"a\" ").unwrap();
        h.insert(header::IF_NONE_MATCH, other);
        assert!(if_none_match_matches(&h, "\"a\""));
        h.append(header::IF_NONE_MATCH, HeaderValue::from_static("\"d\""));
        assert!(if_none_match_matches(&h, "\"d\""));
        assert!(!if_none_match_matches(&h, "\"a"));
    }

    #[test]
    fn versions_parse_only_in_canonical_decimal_form() {
        assert_eq!(parse_version("0").ok(), Some(0));
        assert_eq!(parse_version("1796000811").ok(), Some(1_796_000_811));
        assert_eq!(parse_version("18446744073709551615").ok(), Some(u64::MAX));
        for bad in [
            "",
            "01",
            "00",
            "0001796000811",
            "+1796000811",
            "-1",
            " 1",
            "1 ",
            "1_000",
            "0x10",
            "１",
            "18446744073709551616",
        ] {
            let err = parse_version(bad).map_err(|e| (e.status().as_u16(), e.code()));
            assert_eq!(err, Err((400, "bad_version")), "{bad:?}");
        }
    }

    fn search_error(body: &[u8], max: usize) -> (u16, &'static str) {
        match parse_search_request(body, max) {
            Ok(p) => panic!("accepted {p:?}"),
            Err(e) => (e.status().as_u16(), e.code()),
        }
    }

    #[test]
    fn search_request_parsing() {
        let ok = parse_search_request(br#"{"prefixes": ["ab", "abc", "abcdef01"]}"#, 3);
        assert_eq!(
            ok.ok()
                .map(|p| p.iter().map(ToString::to_string).collect::<Vec<_>>()),
            Some(vec!["ab".to_owned(), "abc".to_owned(), "abcdef01".to_owned()])
        );
        assert_eq!(
            search_error(br#"{"prefixes": ["ab", "cd"]}"#, 1),
            (400, "too_many_prefixes")
        );
        assert_eq!(search_error(br#"{"prefixes": []}"#, 1), (400, "bad_request"));
        assert_eq!(search_error(br#"{"prefixes": ["AB"]}"#, 1), (400, "bad_prefix"));
        assert_eq!(search_error(br#"{"prefixes": ["a"]}"#, 1), (400, "bad_prefix"));
        assert_eq!(
            search_error(br#"{"prefixes": ["abcdef012"]}"#, 1),
            (400, "bad_prefix")
        );
        assert_eq!(
            search_error(br#"{"prefixes": ["../../x"]}"#, 1),
            (400, "bad_prefix")
        );
        assert_eq!(search_error(br#"{"prefixes": [1]}"#, 1), (400, "bad_request"));
        assert_eq!(search_error(b"{not json", 1), (400, "bad_request"));
        assert_eq!(search_error(&[b'['; 10_000], 1), (400, "bad_request"));
        let huge = vec![b' '; MAX_REQUEST_BODY_BYTES + 1];
        assert_eq!(search_error(&huge, 1), (413, "payload_too_large"));
    }

    /// The layer with a body limit of 16 bytes.
    fn test_guard(
        request_timeout: Duration,
        body_read_timeout: Duration,
        max_concurrency: usize,
    ) -> GuardLayer {
        GuardLayer::new(
            request_timeout,
            body_read_timeout,
            max_concurrency,
            16,
            crate::metrics::Metrics::new().http(&[]),
        )
    }

    /// A request body whose first bytes come and the rest never does (it
    /// waits forever for trailers).
    fn never_finished() -> impl axum::body::HttpBody<Data = Bytes, Error = std::convert::Infallible> + Send {
        use http_body_util::BodyExt as _;
        http_body_util::Full::new(Bytes::from_static(b"{\"prefixes\":")).with_trailers(std::future::pending())
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_not_sent_in_time_gets_408_before_taking_a_concurrency_slot() {
        use tower::ServiceExt as _;
        // One slot, held by a request that never finishes: a body read
        // inside the slot would wait for it forever.
        let app = Router::new()
            .route("/hold", get(std::future::pending::<()>))
            .route("/echo", post(|body: Bytes| async move { body.len().to_string() }))
            .layer(test_guard(Duration::from_secs(60), Duration::from_secs(2), 1));
        let hold = Request::builder()
            .uri("/hold")
            .body(Body::empty())
            .unwrap_or_default();
        let holding = tokio::spawn(app.clone().oneshot(hold));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let started = tokio::time::Instant::now();
        let request = Request::builder()
            .method("POST")
            .uri("/echo")
            .body(Body::new(never_finished()))
            .unwrap_or_default();
        let response = app.clone().oneshot(request).await.unwrap_or_else(|e| match e {});
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        let bytes = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .unwrap_or_default();
        let body: Result<ErrorResponse, _> = serde_json::from_slice(&bytes);
        assert_eq!(
            body.ok().map(|b| b.error.code),
            Some("request_timeout".to_owned())
        );
        // A body over the limit is refused before the slot, too.
        let response = app
            .clone()
            .oneshot(
                Request::builder()
                    .method("POST")
                    .uri("/echo")
                    .body(Body::from("0123456789abcdef0"))
                    .unwrap_or_default(),
            )
            .await
            .unwrap_or_else(|e| match e {});
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        holding.abort();
    }

    /// A route that does not answer within the request timeout (a
    /// full-hash search stalled behind a saturated pool: agents' hits go
    /// unverified) is answered `408`; the request metrics must count it,
    /// or the route's error rate and latency show nothing while it fails.
    #[tokio::test]
    async fn regression_a_request_that_times_out_is_counted_in_the_metrics() {
        use tower::ServiceExt as _;
        let metrics = crate::metrics::Metrics::new();
        let app = Router::new()
            .route(
                "/slow",
                get(|| async { tokio::time::sleep(Duration::from_secs(60)).await }),
            )
            .layer(GuardLayer::new(
                Duration::from_millis(10),
                Duration::from_secs(2),
                64,
                16,
                metrics.http(&["/slow"]),
            ));
        let request = Request::builder()
            .uri("/slow")
            .body(Body::empty())
            .unwrap_or_default();
        let response = app.oneshot(request).await.unwrap_or_else(|e| match e {});
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        let text = metrics.render();
        assert!(
            text.contains("blocksieve_http_requests_total{route=\"/slow\",status=\"408\"} 1"),
            "the 408 is not in the request metrics:\n{text}"
        );
        assert!(
            text.contains("blocksieve_http_request_duration_seconds_count{route=\"/slow\"} 1"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn layer_errors_get_a_json_body() {
        use tower::ServiceExt as _;
        let app = Router::new()
            .route(
                "/slow",
                get(|| async { tokio::time::sleep(Duration::from_secs(60)).await }),
            )
            .route("/echo", post(|body: Bytes| async move { body.len().to_string() }))
            .layer(test_guard(Duration::from_millis(10), Duration::from_secs(2), 64));
        let request = |method: &str, uri: &str, body: &'static str| {
            Request::builder()
                .method(method)
                .uri(uri)
                .header(header::CONTENT_LENGTH, body.len())
                .body(Body::from(body))
                .unwrap_or_default()
        };
        for (req, status, code) in [
            (request("GET", "/slow", ""), 408, "request_timeout"),
            (
                request("POST", "/echo", "0123456789abcdef0"),
                413,
                "payload_too_large",
            ),
        ] {
            let response = app.clone().oneshot(req).await.unwrap_or_else(|e| match e {});
            assert_eq!(response.status().as_u16(), status);
            let bytes = axum::body::to_bytes(response.into_body(), 4096)
                .await
                .unwrap_or_default();
            let body: Result<ErrorResponse, _> = serde_json::from_slice(&bytes);
            assert_eq!(body.ok().map(|b| b.error.code), Some(code.to_owned()));
        }
        let ok = app
            .clone()
            .oneshot(request("POST", "/echo", "0123"))
            .await
            .unwrap_or_else(|e| match e {});
        assert_eq!(ok.status(), StatusCode::OK);
    }
}
