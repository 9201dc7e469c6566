//! The fake publisher's update route (`GET /v1/lists/{name}/updates/{from}`,
//! FORMAT.md "Delta chains") and freshness header, from deltas the test
//! made with `blocksieve_format::encode_delta`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use blocksieve_format::api::{DELTAS_CONTENT_TYPE, FRESHNESS_HEADER, NEXT_CHECK_HEADER};

use super::{FakePublisher, Recorded, Shared, error, injected, lock};

/// What the fake publisher answers on one list's update route.
#[derive(Debug, Clone)]
pub enum Updates {
    /// `404` with no JSON error, as a publisher that predates deltas (the
    /// default).
    NoRoute,
    /// The deltas of consecutive versions, oldest first, each with the
    /// version it applies to, and the `ETag` of the latest snapshot
    /// (`blocksieve_format::api::snapshot_etag`): `304` to a matching
    /// `If-None-Match`; `200` with every delta from the one applying to
    /// `{from}` (empty when `{from}` is `latest_version`); `410 no_delta`
    /// for any other `{from}`.
    Deltas {
        /// `(from version, signed delta)`, oldest first.
        deltas: Vec<(u64, Vec<u8>)>,
        /// The latest version.
        latest_version: u64,
        /// The latest snapshot's `ETag`.
        latest_etag: String,
    },
    /// `200` with exactly these bytes as the chain, whatever `{from}`: a
    /// dropped, corrupt, replayed or reordered delta.
    Fixed(Vec<u8>),
    /// This status with a JSON error body (`410 no_delta`, `503 behind`).
    Status(StatusCode),
}

impl FakePublisher {
    /// Answers `list`'s update route with `updates`.
    pub fn serve_updates(&self, list: &str, updates: Updates) {
        lock(&self.state).updates.insert(list.to_owned(), updates);
    }

    /// Sends `X-Blocksieve-Freshness: value` on `list`'s snapshot and update
    /// answers (`200` and `304`), or nothing for `None`.
    pub fn set_freshness(&self, list: &str, value: Option<String>) {
        let mut state = lock(&self.state);
        match value {
            Some(v) => state.freshness.insert(list.to_owned(), v),
            None => state.freshness.remove(list),
        };
    }

    /// The requests on the update route seen, oldest first (not among
    /// [`FakePublisher::requests`]).
    pub fn update_requests(&self) -> Vec<Recorded> {
        lock(&self.state).update_requests.clone()
    }
}

/// The update route.
pub(super) async fn updates(
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
    let (status, body) = match served {
        Updates::NoRoute => return StatusCode::NOT_FOUND.into_response(),
        Updates::Status(StatusCode::GONE) => {
            return error(StatusCode::GONE, "no_delta", format!("no delta from {from}"));
        }
        Updates::Status(status) => return injected(status),
        Updates::Fixed(bytes) => (StatusCode::OK, bytes),
        Updates::Deltas {
            deltas,
            latest_version,
            latest_etag,
        } => {
            if if_none_match.as_deref() == Some(latest_etag.as_str()) {
                (StatusCode::NOT_MODIFIED, Vec::new())
            } else if from == latest_version {
                (StatusCode::OK, Vec::new())
            } else if let Some(start) = deltas.iter().position(|(f, _)| *f == from) {
                (
                    StatusCode::OK,
                    deltas[start..].iter().flat_map(|(_, d)| d.clone()).collect(),
                )
            } else {
                return error(StatusCode::GONE, "no_delta", format!("no delta from {from}"));
            }
        }
    };
    let mut response = if status == StatusCode::NOT_MODIFIED {
        status.into_response()
    } else {
        (status, [(header::CONTENT_TYPE, DELTAS_CONTENT_TYPE)], body).into_response()
    };
    if let Some(value) = freshness.and_then(|v| HeaderValue::from_str(&v).ok()) {
        response.headers_mut().insert(FRESHNESS_HEADER, value);
    }
    if let Some(seconds) = next_check {
        response
            .headers_mut()
            .insert(NEXT_CHECK_HEADER, HeaderValue::from(seconds));
    }
    response
}
