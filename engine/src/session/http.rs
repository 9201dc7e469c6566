//! The HTTP exchanges of a [`Session`](super::Session) as plain values,
//! and how a response becomes an answer or an error.

use std::time::SystemTime;

use blocksieve_format::api::{FullHashSearchResponse, is_full_hashes_content_type};

use crate::Error;
use crate::clock::server_time;
use crate::prefix::SearchAnswer;
use crate::schedule::parse_retry_after;

/// The most bytes of a full-hash search answer read, as the Rust agent: the
/// most a binary answer can take
/// ([`MAX_ANSWER_BYTES`](blocksieve_format::api::MAX_ANSWER_BYTES), about
/// 34.2 MB), so that every answer a publisher sends is read.
pub const MAX_SEARCH_RESPONSE_BYTES: usize = blocksieve_format::api::MAX_ANSWER_BYTES;

/// An HTTP method the protocol uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`: snapshots and deltas.
    Get,
    /// `POST`: full-hash searches.
    Post,
}

impl Method {
    /// The method's name, e.g. `"GET"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
        }
    }
}

/// A request for the host to send as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method.
    pub method: Method,
    /// The absolute URL: the session's base URL and a route of
    /// [`routes`](blocksieve_format::api::routes).
    pub url: String,
    /// Headers to send (lowercase names), e.g. `if-none-match`, `accept`.
    pub headers: Vec<(String, String)>,
    /// The body: empty for `GET`, JSON for a search.
    pub body: Vec<u8>,
}

/// A response as the host received it. The host need not limit the body:
/// the session refuses one over its limit (though a host that can stop
/// reading early saves the memory).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code, e.g. `200`, `304`.
    pub status: u16,
    /// The headers, names in any case.
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A full-hash answer by its `Content-Type`: binary or JSON, within
/// [`MAX_SEARCH_RESPONSE_BYTES`]; any status but `200` is an error.
pub(super) fn read_answer(
    response: &HttpResponse,
    url: &str,
    now: SystemTime,
) -> Result<SearchAnswer, Error> {
    if response.status != 200 {
        return Err(status_error(response, url, now));
    }
    if response.body.len() > MAX_SEARCH_RESPONSE_BYTES {
        return Err(Error::ResponseTooLarge {
            url: url.to_owned(),
            limit_bytes: MAX_SEARCH_RESPONSE_BYTES as u64,
        });
    }
    let invalid = |e| Error::UnexpectedResponse {
        url: url.to_owned(),
        reason: format!("invalid full-hash answer: {e}"),
    };
    if response
        .header("content-type")
        .is_some_and(is_full_hashes_content_type)
    {
        return SearchAnswer::from_binary(&response.body).map_err(invalid);
    }
    let json: FullHashSearchResponse =
        serde_json::from_slice(&response.body).map_err(|e| Error::UnexpectedResponse {
            url: url.to_owned(),
            reason: format!("invalid JSON: {e}"),
        })?;
    SearchAnswer::from_json(json).map_err(invalid)
}

/// An [`Error::Status`] for a response that is not a success, with the
/// publisher's error message when the body is its JSON error, and its
/// `Retry-After` on a `429` or `503`: an HTTP-date is read against the
/// response's `Date` (plus its `Age`), the answering server's clock, and
/// against `now` without one.
pub(super) fn status_error(response: &HttpResponse, url: &str, now: SystemTime) -> Error {
    let retry_after = if matches!(response.status, 429 | 503) {
        let answered_at = server_time(response.header("date"), response.header("age")).unwrap_or(now);
        response
            .header("retry-after")
            .and_then(|v| parse_retry_after(v, answered_at))
    } else {
        None
    };
    Error::status(url, response.status, &response.body, retry_after)
}
