//! `POST /v1/hashes:search`: reading the request, and the refusals of a
//! server that does not hold what the client's snapshots need (an older
//! version, or another build of the same version).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use blocksieve_format::RequestPrefix;
use blocksieve_format::api::{FullHashAnswer, FullHashSearchRequest, FullHashSearchResponse, PrefixAnswer};

use super::error::{ApiError, body_error, shown, unknown_list};
use super::{
    MAX_REQUEST_BODY_BYTES, buckets, check_answer_size, check_bucket_size, check_ready, full_hash_answer,
    parse_request_prefix,
};
use crate::state::AppState;

/// Parses the body of `POST /v1/hashes:search`: a JSON
/// [`FullHashSearchRequest`] of 1 to `max_prefixes` valid hash prefixes, in
/// at most [`MAX_REQUEST_BODY_BYTES`]. Pure, so that the handler, unit tests
/// and the `full_hash_request` fuzz target run the same code.
///
/// # Errors
///
/// `413 payload_too_large` for a longer body, `400 bad_request` for bad
/// JSON or no prefixes, `400 too_many_prefixes`, `400 bad_prefix`.
pub fn parse_search_request(body: &[u8], max_prefixes: usize) -> Result<Vec<RequestPrefix>, ApiError> {
    parse_search(body, max_prefixes).map(|search| search.prefixes)
}

/// A `POST /v1/hashes:search` request as read.
#[derive(Debug)]
pub struct Search {
    /// The request prefixes.
    pub prefixes: Vec<RequestPrefix>,
    /// The snapshot versions the client holds, by list.
    pub min_versions: BTreeMap<String, u64>,
    /// The snapshots the client holds, by list: version and the first 8
    /// bytes of the body's SHA-256 ([`snapshot_id`](blocksieve_format::api::snapshot_id)).
    pub snapshots: BTreeMap<String, (u64, [u8; 8])>,
}

/// [`parse_search_request`], with the request's `min_versions` and
/// `snapshots`.
///
/// # Errors
///
/// As [`parse_search_request`]; `400 bad_request` for a `snapshots` value
/// that is not a snapshot id (`<version>-<16 lowercase hex digits>`).
pub fn parse_search(body: &[u8], max_prefixes: usize) -> Result<Search, ApiError> {
    if body.len() > MAX_REQUEST_BODY_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "request body of {} bytes, the limit is {MAX_REQUEST_BODY_BYTES}",
                body.len()
            ),
        ));
    }
    let request: FullHashSearchRequest = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("request body: {}", shown(&e.to_string())),
        )
    })?;
    if request.prefixes.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "no prefixes given",
        ));
    }
    if request.prefixes.len() > max_prefixes {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "too_many_prefixes",
            format!(
                "{} prefixes in one request, the limit is {max_prefixes}",
                request.prefixes.len(),
            ),
        ));
    }
    // One result per prefix given, in order, a prefix given twice too
    // (clients pair results with their requests); what that may cost is
    // held to the budget of answers in flight.
    let prefixes = request
        .prefixes
        .iter()
        .map(|p| parse_request_prefix(p))
        .collect::<Result<_, _>>()?;
    let snapshots = request
        .snapshots
        .iter()
        .map(|(list, id)| match blocksieve_format::api::parse_snapshot_id(id) {
            Some((version, Some(hash))) => Ok((list.clone(), (version, hash))),
            _ => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!(
                    "snapshots: list {}: {:?} is not a snapshot id (<version>-<16 lowercase hex digits>)",
                    shown(list),
                    shown(id)
                ),
            )),
        })
        .collect::<Result<_, _>>()?;
    Ok(Search {
        prefixes,
        min_versions: request.min_versions,
        snapshots,
    })
}

/// Refuses to answer from another snapshot than the client's of the same
/// version: `503 other_snapshot` when this server serves a list of
/// `snapshots` at exactly the client's version but with another body (two
/// publishers signing with one key, whose builds started in the same
/// second, each with what it fetched: this server's answer would say "not
/// listed" for what the client's snapshot lists). At another version the
/// `min_versions` rule applies ([`check_not_behind`]), to the versions
/// `snapshots` names too.
fn check_same_snapshots(
    state: &AppState,
    snapshots: &BTreeMap<String, (u64, [u8; 8])>,
) -> Result<(), ApiError> {
    for (name, (version, hash)) in snapshots {
        let slot = state.list(name).ok_or_else(|| unknown_list(name))?;
        let current = slot.current.load();
        let Some(served) = current.as_deref() else {
            continue;
        };
        if served.header.version == *version && served.header.body_sha256[..8] != hash[..] {
            return Err(other_snapshot(name, &served.header, hash));
        }
    }
    // A snapshot named is a version the client holds: an older one served
    // would answer "not listed" from older data (a client that names its
    // snapshot without `min_versions` got a 200 from it).
    let held: BTreeMap<String, u64> = (snapshots.iter())
        .map(|(name, &(version, _))| (name.clone(), version))
        .collect();
    check_not_behind(state, &held)
}

/// The refusal of a request for another snapshot of the version `served`
/// is (`hash`: the client's body hash, its first 8 bytes).
pub(super) fn other_snapshot(
    name: &str,
    served: &blocksieve_format::SnapshotHeader,
    hash: &[u8; 8],
) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "other_snapshot",
        format!(
            "list {}: this server's version {} is snapshot {}, the request is for snapshot {}-{} \
             (another build of the same version); ask another server",
            shown(name),
            served.version,
            blocksieve_format::api::snapshot_id(served.version, &served.body_sha256),
            served.version,
            hex::encode(hash)
        ),
    )
}

/// Refuses to answer from older data than the client holds: `503 behind`
/// when this server serves an older version of a list in `min_versions`
/// than the client has, or none yet (a replica that has not loaded the
/// newest build), with `Retry-After: 1` so the client asks again or asks
/// another server; `404 unknown_list` for a list this server does not serve.
fn check_not_behind(state: &AppState, min_versions: &BTreeMap<String, u64>) -> Result<(), ApiError> {
    for (name, &needed) in min_versions {
        let slot = state.list(name).ok_or_else(|| unknown_list(name))?;
        let served = slot.current.load().as_deref().map(|p| p.header.version);
        if served.is_none_or(|v| v < needed) {
            state.metrics.answered_behind(&slot.name);
            let served = served.map_or_else(|| "no snapshot".to_owned(), |v| format!("version {v}"));
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "behind",
                format!(
                    "list {}: this server has {served}, the request needs at least version {needed}; \
                     ask again or ask another server",
                    shown(name)
                ),
            )
            .retry_after(1));
        }
    }
    Ok(())
}

/// `POST /v1/hashes:search`: the buckets of the prefixes asked, for the
/// lists the request names (`min_versions`) or every list, from the
/// snapshots the client holds or newer (`503 behind`, `503
/// other_snapshot`).
pub(super) async fn search(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or("").trim();
            essence.eq_ignore_ascii_case("application/json") || essence.ends_with("+json")
        });
    if !is_json {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "expected a body with Content-Type: application/json",
        ));
    }
    let body = body.map_err(|e| body_error(&e, MAX_REQUEST_BODY_BYTES))?;
    let Search {
        prefixes,
        min_versions,
        snapshots,
    } = parse_search(&body, state.max_prefixes_per_request)?;
    check_not_behind(&state, &min_versions)?;
    check_same_snapshots(&state, &snapshots)?;
    // A request that names the lists it holds (`min_versions`) is answered
    // for those lists only, and only their buckets count against the cap:
    // a list the client does not subscribe to, larger than its lists, must
    // not get its prefixes refused (and is of no use to it).
    let among = |name: &str| min_versions.is_empty() || min_versions.contains_key(name);
    let prefixes = prefixes
        .into_iter()
        .map(|p| check_bucket_size(&state, p, among))
        .collect::<Result<Vec<_>, _>>()?;
    if min_versions.is_empty() {
        check_ready(&state)?;
    }
    check_answer_size(&state, &prefixes, among)?;
    let results = prefixes
        .into_iter()
        .map(|prefix| PrefixAnswer {
            prefix,
            matches: buckets::bucket(&state, prefix, among),
        })
        .collect();
    let answer = FullHashAnswer {
        results,
        cache_duration_s: state.cache_duration.as_secs(),
    };
    let response = full_hash_answer(&headers, answer, |a| {
        Json(FullHashSearchResponse::from(a)).into_response()
    })?;
    held_while_sent(&state, response).await
}

/// Bytes of an answer handed to the connection at a time: the next piece
/// is taken only once the connection has room for it.
const ANSWER_PIECE_BYTES: usize = 64 * 1024;

/// `response` (a built answer, whole in memory) sent from the budget of
/// answers in flight ([`AnswersInFlight`](crate::state::AnswersInFlight)):
/// its size taken from it, given back when the body is sent or dropped;
/// `503 busy` with `Retry-After` when too little is left.
async fn held_while_sent(state: &AppState, response: Response) -> Result<Response, ApiError> {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    let budget = &state.answers_in_flight;
    let permit = budget.take(bytes.len()).ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!(
                "{} KiB of full-hash answers are being sent to other clients; ask again",
                budget.held_kib()
            ),
        )
        .retry_after(1)
    })?;
    Ok(Response::from_parts(
        parts,
        axum::body::Body::new(HeldAnswer {
            bytes,
            permit: Some(permit),
        }),
    ))
}

/// An answer's body, sent a piece at a time, holding its share of the
/// budget until its last piece is taken or it is dropped.
struct HeldAnswer {
    bytes: Bytes,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl hyper::body::Body for HeldAnswer {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        if self.bytes.is_empty() {
            self.permit = None;
            return std::task::Poll::Ready(None);
        }
        let piece = self.bytes.len().min(ANSWER_PIECE_BYTES);
        let piece = self.bytes.split_to(piece);
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.bytes.len() as u64)
    }
}
