//! `GET /v1/lists/{name}/updates/{from}` ([`routes::UPDATES`]): the
//! deltas from snapshot version `from` to the latest (FORMAT.md "Delta
//! chains"), a suffix of the chain the latest version was published with,
//! and the headers every snapshot and update response shares: the
//! next-check hint (relative and absolute) and the list's freshness
//! record.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use blocksieve_format::api::{
    DELTAS_CONTENT_TYPE, FRESHNESS_HEADER, HASHES_HEADER, NEXT_CHECK_AT_HEADER, NEXT_CHECK_HEADER, routes,
};

use super::error::{ApiError, parse_version, unknown_list};
use crate::config::schedule;
use crate::state::{AppState, ListSlot, Published};

/// Whether an `If-None-Match` header matches `etag` (RFC 9110 §13.1.2: a
/// list of entity tags or `*`; weak comparison).
pub(super) fn if_none_match_matches(headers: &HeaderMap, etag: &str) -> bool {
    // On the value's bytes (every poll of an agent holding the snapshot
    // asks it): an ETag is visible ASCII, which no other byte matches.
    headers.get_all(header::IF_NONE_MATCH).iter().any(|v| {
        v.as_bytes().split(|&b| b == b',').any(|t| {
            let t = t.trim_ascii();
            t == b"*" || strip_weak(t) == etag.as_bytes()
        })
    })
}

/// An entity tag without its weak indicators (`W/`, as many as given).
fn strip_weak(mut tag: &[u8]) -> &[u8] {
    while let Some(rest) = tag.strip_prefix(b"W/") {
        tag = rest;
    }
    tag
}

/// The [`HASHES_HEADER`] of a response carrying (or confirming) list
/// `name`'s snapshot `snapshot` (its [`snapshot_id`](blocksieve_format::api::snapshot_id),
/// or a version number for a snapshot this server no longer holds in
/// memory, whose buckets it does not answer): where its immutable
/// full-hash buckets are. List names are validated lowercase ASCII, so
/// the value is always a valid header.
pub(super) fn hashes_header(name: &str, snapshot: impl std::fmt::Display) -> (HeaderName, HeaderValue) {
    (
        const { HeaderName::from_static(HASHES_HEADER) },
        HeaderValue::from_str(&routes::list_hashes_base(name, snapshot))
            .unwrap_or(HeaderValue::from_static("/")),
    )
}

/// When an agent should ask about `slot` again: until its next scheduled
/// build (the latest freshness record's `next_build_at`) has had time to
/// finish ([`schedule::build_margin`] of the last build's duration), or
/// the configured next check when that is unknown or past.
pub(super) fn next_check(state: &AppState, slot: &ListSlot) -> NextCheck {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let next_build_at = slot
        .freshness
        .load()
        .as_ref()
        .map_or(0, |f| f.record.next_build_at);
    let last_build =
        (slot.last_build.lock().ok()).and_then(|b| b.as_ref().map(|s| Duration::from_millis(s.duration_ms)));
    let seconds = schedule::next_check(
        next_build_at,
        schedule::build_margin(last_build),
        now,
        state.next_check,
    )
    .as_secs();
    NextCheck {
        seconds,
        at: now.saturating_add(seconds),
    }
}

/// When an agent should ask again, as the next-check headers say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NextCheck {
    /// Seconds from now: [`NEXT_CHECK_HEADER`] and `Cache-Control: max-age`.
    pub(super) seconds: u64,
    /// The same instant as a Unix time: [`NEXT_CHECK_AT_HEADER`], which a
    /// cached copy of the response still says right.
    pub(super) at: u64,
}

/// The [`FRESHNESS_HEADER`] of a response about `published`, when the
/// list's latest record names that version.
pub(super) fn freshness_header(slot: &ListSlot, published: &Published) -> Option<(HeaderName, HeaderValue)> {
    let freshness = slot.freshness_of(published)?;
    let value = freshness.header.clone()?;
    Some((const { HeaderName::from_static(FRESHNESS_HEADER) }, value))
}

/// [`hashes_header`] of `published`, as list `name`: the value made when
/// it was put in service.
pub(super) fn published_hashes_header(name: &str, published: &Published) -> (HeaderName, HeaderValue) {
    if published.headers.list == name {
        (
            const { HeaderName::from_static(HASHES_HEADER) },
            published.headers.hashes.clone(),
        )
    } else {
        let header = &published.header;
        hashes_header(
            name,
            blocksieve_format::api::snapshot_id(header.version, &header.body_sha256),
        )
    }
}

/// [`snapshot_polled_values`] for their `(next, stale_if_error_s)`.
type PolledValues = ((NextCheck, u64), [HeaderValue; 3]);

/// The `Cache-Control` of the latest snapshot, the next-check header and
/// the absolute one for `next` (and `stale_if_error_s`, a constant):
/// formatted once per value and thread (the values change about once a
/// second), then cloned.
pub(super) fn snapshot_polled_values(next: NextCheck, stale_if_error_s: u64) -> [HeaderValue; 3] {
    thread_local! {
        static LAST: std::cell::RefCell<Option<PolledValues>> =
            const { std::cell::RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((key, values)) if *key == (next, stale_if_error_s) => values.clone(),
        _ => {
            let cache_control = HeaderValue::from_str(&format!(
                "public, max-age={}, stale-if-error={stale_if_error_s}",
                next.seconds
            ))
            .unwrap_or(HeaderValue::from_static("no-cache"));
            let values = [
                cache_control,
                HeaderValue::from(next.seconds),
                HeaderValue::from(next.at),
            ];
            *last = Some(((next, stale_if_error_s), values.clone()));
            values
        }
    })
}

/// The next-check headers and `Cache-Control` of a response that says what
/// the latest version is: it may be cached until the agent should ask again.
fn polled_headers(next: NextCheck) -> [(HeaderName, HeaderValue); 3] {
    [
        (
            header::CACHE_CONTROL,
            HeaderValue::from_str(&format!("public, max-age={}", next.seconds))
                .unwrap_or(HeaderValue::from_static("no-cache")),
        ),
        (
            const { HeaderName::from_static(NEXT_CHECK_HEADER) },
            HeaderValue::from(next.seconds),
        ),
        (
            const { HeaderName::from_static(NEXT_CHECK_AT_HEADER) },
            HeaderValue::from(next.at),
        ),
    ]
}

/// The handler of [`routes::UPDATES`].
pub(super) async fn updates(
    State(state): State<Arc<AppState>>,
    Path((name, from)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let slot = state.list(&name).ok_or_else(|| unknown_list(&name))?;
    let from = parse_version(&from)?;
    let current = slot.current.load_full();
    let Some(current) = current.filter(|c| c.header.version >= from) else {
        state.metrics.answered_behind(&slot.name);
        let served = (slot.current.load().as_ref()).map_or_else(
            || "no snapshot".to_owned(),
            |c| format!("version {}", c.header.version),
        );
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "behind",
            format!(
                "list {name:?}: this server has {served}, older than version {from}; ask again or ask another server"
            ),
        )
        .retry_after(1));
    };
    let etag = HeaderValue::from_str(&current.etag)
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "bad etag"))?;
    // The chain first: `If-None-Match` is a precondition on the answer
    // that would be 200 (RFC 9110 §13.2.1), so a `from` the publisher keeps
    // no chain from is `410` whatever the client's tag (a `304` told it to
    // keep a chain that does not exist).
    let chain = if from == current.header.version {
        Some(axum::body::Bytes::new())
    } else {
        current.deltas.suffix(from)
    };
    let chain = chain.ok_or_else(|| {
        ApiError::new(
            StatusCode::GONE,
            "no_delta",
            format!(
                "list {name:?} has no deltas from version {from} to version {}; download the snapshot at {}",
                current.header.version,
                routes::latest_snapshot(&name)
            ),
        )
    })?;
    let mut response = if if_none_match_matches(&headers, &current.etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(DELTAS_CONTENT_TYPE),
            )],
            Body::from(chain),
        )
            .into_response()
    };
    let out = response.headers_mut();
    out.insert(header::ETAG, etag);
    out.extend(polled_headers(next_check(&state, slot)));
    let (hashes_name, hashes_value) = published_hashes_header(&name, &current);
    out.insert(hashes_name, hashes_value);
    if let Some((freshness_name, value)) = freshness_header(slot, &current) {
        out.insert(freshness_name, value);
    }
    Ok(response)
}
