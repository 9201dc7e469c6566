//! The fake publisher's update route (`GET /v1/lists/{name}/updates/{from}`,
//! FORMAT.md "Delta chains") and freshness header, from deltas the test
//! made with `blocksieve_format::encode_delta`.

use axum::http::StatusCode;

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
    /// `{from}` (empty when `{from}` is `latest_version`) and `latest_etag`
    /// as its `ETag`; `410 no_delta` for any other `{from}`.
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

/// How the update route answers one request.
#[derive(Debug)]
pub(super) enum Answer {
    /// `404` with no body: no route.
    NoRoute,
    /// An error status with a JSON error body of this code (`None`: the
    /// injected fault's own).
    Error(StatusCode, Option<&'static str>),
    /// `304 Not Modified`.
    NotModified,
    /// `200` with this chain and, from [`Updates::Deltas`], the latest
    /// snapshot's `ETag`, as the publisher sends it.
    Chain(Vec<u8>, Option<String>),
}

/// What `updates` answers a request for the deltas from `from` with this
/// `If-None-Match`.
pub(super) fn answer(updates: &Updates, from: u64, if_none_match: Option<&str>) -> Answer {
    match updates {
        Updates::NoRoute => Answer::NoRoute,
        Updates::Status(StatusCode::GONE) => Answer::Error(StatusCode::GONE, Some("no_delta")),
        Updates::Status(status) => Answer::Error(*status, None),
        Updates::Fixed(bytes) => Answer::Chain(bytes.clone(), None),
        Updates::Deltas {
            deltas,
            latest_version,
            latest_etag,
        } => {
            if if_none_match == Some(latest_etag.as_str()) {
                Answer::NotModified
            } else if from == *latest_version {
                Answer::Chain(Vec::new(), Some(latest_etag.clone()))
            } else if let Some(start) = deltas.iter().position(|(f, _)| *f == from) {
                let chain = deltas[start..].iter().flat_map(|(_, d)| d.clone()).collect();
                Answer::Chain(chain, Some(latest_etag.clone()))
            } else {
                Answer::Error(StatusCode::GONE, Some("no_delta"))
            }
        }
    }
}
