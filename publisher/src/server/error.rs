//! The API's errors: an [`ApiError`] is a status and a JSON
//! [`ErrorResponse`], the one place an error becomes HTTP; and the checks
//! of path parameters every route shares.

use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use blocksieve_format::api::{ErrorDetail, ErrorResponse};

/// An API error: a status and a JSON [`ErrorResponse`].
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// `Retry-After` in seconds, for an error the client should retry.
    retry_after_s: Option<u64>,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after_s: None,
        }
    }

    /// The same error with `Retry-After: seconds`.
    pub(super) fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_s = Some(seconds);
        self
    }

    /// The same error under another status.
    pub(super) fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// The HTTP status, always 4xx or 5xx.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The machine-readable error code, e.g. `bad_prefix`.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
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
        let mut response = (
            self.status,
            [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
            Json(body),
        )
            .into_response();
        if let Some(seconds) = self.retry_after_s {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Shows at most 200 characters of client-supplied text in an error, marking a cut with `…`.
pub(super) fn shown(text: &str) -> String {
    const MAX_CHARS: usize = 200;
    let mut out: String = text.chars().take(MAX_CHARS).collect();
    if text.chars().nth(MAX_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// `404 unknown_list` for list `name`.
pub(super) fn unknown_list(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_list",
        format!("no list named {:?}", shown(name)),
    )
}

/// Parses a snapshot version sent by a client in its canonical decimal
/// form only: ASCII digits, no sign, no leading zero (except `0` itself),
/// at most `u64::MAX`. Each version thus has exactly one URL.
///
/// # Errors
///
/// `400 bad_version` otherwise.
pub(super) fn parse_version(text: &str) -> Result<u64, ApiError> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten().ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_version",
            format!(
                "snapshot version {:?}: expected a decimal number from 0 to 18446744073709551615, without sign or leading zeros",
                shown(text)
            ),
        )
    })
}

/// Reads a snapshot named on the full-hash bucket route: its
/// [`snapshot_id`](blocksieve_format::api::snapshot_id)
/// (`1800000000-0123456789abcdef`), or a version number alone; `400
/// bad_version` otherwise.
pub(super) fn parse_snapshot(text: &str) -> Result<(u64, Option<[u8; 8]>), ApiError> {
    blocksieve_format::api::parse_snapshot_id(text).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_version",
            format!(
                "snapshot {:?}: expected a version (a decimal number from 0 to 18446744073709551615, without sign or leading zeros), \
                 optionally followed by '-' and the first 16 lowercase hex digits of the snapshot's body SHA-256",
                shown(text)
            ),
        )
    })
}

/// The error for a body that could not be read: `413 payload_too_large`
/// over the limit (`limit` bytes), else `400 bad_request` (e.g. the client
/// closed early).
pub(super) fn body_error(rejection: &BytesRejection, limit: usize) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body longer than the limit of {limit} bytes"),
        );
    }
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "bad_request",
        format!("request body: {}", shown(&rejection.body_text())),
    )
}
