//! The HTTP API (axum). Every error is mapped to a JSON body in one place,
//! [`ApiError`].

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use blocksieve_format::HashPrefix;
use blocksieve_format::api::{
    ErrorDetail, ErrorResponse, FullHashMatch, FullHashResponse, ListStatus, ListsResponse, SnapshotStatus,
};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::state::{AppState, Published};

/// Longest a request may take before the server answers 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest request body accepted, in bytes (the API takes no large bodies).
pub const MAX_REQUEST_BODY_BYTES: usize = 64 * 1024;

/// An API error: a status and a JSON [`ErrorResponse`].
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorResponse {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

/// The API router over `state`; tests can call it without a socket.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/v1/lists", get(lists))
        .route("/v1/lists/{name}/snapshot", get(snapshot))
        .route("/v1/hashes/{prefix}", get(full_hashes))
        .fallback(not_found)
        .with_state(state)
        .layer(RequestBodyLimitLayer::new(MAX_REQUEST_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
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
    }
}

async fn lists(State(state): State<Arc<AppState>>) -> Json<ListsResponse> {
    let lists = state
        .lists
        .iter()
        .map(|slot| ListStatus {
            name: slot.name.clone(),
            snapshot: slot.current.load().as_deref().map(snapshot_status),
            last_build: slot.last_build.lock().map(|g| g.clone()).unwrap_or(None),
        })
        .collect();
    Json(ListsResponse { lists })
}

/// Whether an `If-None-Match` header matches `etag` (RFC 9110 §13.1.2: a
/// list of entity tags or `*`; weak comparison).
fn if_none_match_matches(headers: &HeaderMap, etag: &str) -> bool {
    headers.get_all(header::IF_NONE_MATCH).iter().any(|v| {
        v.to_str().is_ok_and(|s| {
            s.split(',')
                .map(str::trim)
                .any(|t| t == "*" || t.trim_start_matches("W/") == etag)
        })
    })
}

async fn snapshot(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let slot = state.list(&name).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_list",
            format!("no list named {name:?}"),
        )
    })?;
    let current = slot.current.load_full().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "no_snapshot",
            format!("list {name:?} has no snapshot yet; its first build has not finished"),
        )
    })?;
    let etag = HeaderValue::from_str(&current.etag)
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "bad etag"))?;
    if if_none_match_matches(&headers, &current.etag) {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
    }
    Ok((
        StatusCode::OK,
        [
            (header::ETAG, etag),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=60"),
            ),
        ],
        Body::from(current.snapshot.clone()),
    )
        .into_response())
}

async fn full_hashes(
    State(state): State<Arc<AppState>>,
    Path(prefix_text): Path<String>,
) -> Result<Json<FullHashResponse>, ApiError> {
    let prefix: HashPrefix = prefix_text.parse().map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_prefix",
            format!(
                "hash prefix {:?}: {e}",
                prefix_text.chars().take(80).collect::<String>()
            ),
        )
    })?;
    let mut matches = Vec::new();
    for slot in &state.lists {
        if let Some(current) = slot.current.load().as_deref() {
            for h in current.bucket(prefix) {
                matches.push(FullHashMatch {
                    full_hash: h.to_string(),
                    list: slot.name.clone(),
                });
            }
        }
    }
    Ok(Json(FullHashResponse {
        prefix: prefix.to_string(),
        matches,
        cache_duration_s: state.cache_duration.as_secs(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_matching() {
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"a\", W/\"b\""));
        assert!(if_none_match_matches(&h, "\"a\""));
        assert!(if_none_match_matches(&h, "\"b\""));
        assert!(!if_none_match_matches(&h, "\"c\""));
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(if_none_match_matches(&h, "\"c\""));
    }
}
