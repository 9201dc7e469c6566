//! The publisher API over HTTP: conditional snapshot downloads, full-hash
//! searches and immutable full-hash buckets, every body read with a hard
//! byte limit. No decisions here: the
//! headers that matter (ETag, next-check hint, bucket advertisement,
//! `Retry-After`, `Date`) are
//! handed to [`crate::engine`] as they came.

use std::time::{Duration, SystemTime};

use blocksieve_format::api::{
    FULL_HASHES_ACCEPT, FullHashResponse, FullHashSearchRequest, FullHashSearchResponse, ListsResponse,
    PrefixResult, is_full_hashes_content_type,
};
use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT, AGE, CACHE_CONTROL, CONTENT_TYPE, DATE, ETAG, HeaderMap, HeaderValue, IF_NONE_MATCH, RETRY_AFTER,
};

use crate::Error;
use crate::engine::clock::server_time;
use crate::engine::prefix::SearchAnswer;
use crate::engine::schedule::{NextCheckHeaders, parse_retry_after};

use blocksieve_format::api::{FRESHNESS_HEADER, HASHES_HEADER, MAX_ANSWER_BYTES};
use blocksieve_format::api::{NEXT_CHECK_AT_HEADER as NEXT_CHECK_AT, NEXT_CHECK_HEADER as NEXT_CHECK};

/// The most bytes read of a full-hash search answer: the most a binary
/// answer can take ([`MAX_ANSWER_BYTES`], about 34.2 MB), which bounds
/// memory against a hostile server and reads every answer a publisher
/// sends (it refuses larger ones with `413 answer_too_large`).
pub(crate) const MAX_SEARCH_RESPONSE_BYTES: u64 = MAX_ANSWER_BYTES as u64;

/// The most bytes read of one immutable full-hash bucket (one list, one
/// prefix): 512 KiB, about 15,000 full hashes in binary, so that the 64
/// bucket GETs one full-hash request may take read at most 32 MiB, under
/// what one search answer may ([`MAX_SEARCH_RESPONSE_BYTES`]), whatever a
/// hostile server sends. A larger bucket fails, and the request goes by `POST`.
pub(crate) const MAX_BUCKET_RESPONSE_BYTES: u64 = 512 * 1024;

/// The most bytes read of the list status JSON (`GET /v1/lists`): a few
/// hundred bytes per list, so 4 MiB is generous while still bounding memory
/// against a hostile server.
const MAX_JSON_BYTES: u64 = 4 * 1024 * 1024;

/// The most bytes read of an error body, only to extract its message.
const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;

/// The agent's HTTP client: `user_agent` on every request, `timeout` to
/// connect and for a whole request (snapshot downloads override it), and
/// idle pooled connections dropped after `pool_idle_timeout`.
///
/// The pool idle timeout matters because HTTP/1.1 has no way to close an
/// idle keep-alive connection safely: the publisher closes one after
/// `header_read_timeout_s` (10 s by default) without a request, and a
/// request the agent sends on it at that moment is lost with the
/// connection. reqwest keeps idle connections for 90 s by default, so
/// every request after a 10–90 s pause raced the close (one of 59,773
/// requests of the load test failed this way); dropping them after 5 s
/// ([`crate::DEFAULT_POOL_IDLE_TIMEOUT`]), before the publisher does,
/// leaves no window. Requests within 5 s of each other, the common case
/// when checking a page's URLs, still reuse the connection.
///
/// # Errors
///
/// [`Error::HttpClient`] when the TLS backend cannot be set up.
pub(crate) fn client(
    user_agent: HeaderValue,
    timeout: Duration,
    pool_idle_timeout: Duration,
    allow_plain_http: bool,
) -> Result<reqwest::Client, Error> {
    reqwest::Client::builder()
        .user_agent(user_agent)
        .connect_timeout(timeout)
        .timeout(timeout)
        .pool_idle_timeout(pool_idle_timeout)
        .redirect(redirect_policy(allow_plain_http))
        // No `Referer` on a redirect (reqwest's default sends the URL it
        // came from): the agent tells servers nothing beyond its request.
        .referer(false)
        .build()
        .map_err(|e| Error::HttpClient {
            reason: error_chain(&e),
        })
}

/// The redirects the agent follows: at most 10, as reqwest's default, and
/// none to a URL it would refuse as a base URL — plain `http` to a host
/// other than the loopback, unless `allow_plain_http`. A full-hash answer
/// is not signed: reqwest's default follows `https` to `http`, where anyone
/// on the path can answer "not listed" for a listed URL, the very path the
/// base URL rules keep the agent off. A redirect refused is a failed
/// request (an `unverified` hit, a failed update), never an answer.
fn redirect_policy(allow_plain_http: bool) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let url = attempt.url();
        let allowed = match url.scheme() {
            "https" => true,
            "http" => allow_plain_http || is_loopback(url.host_str().unwrap_or("")),
            _ => false,
        };
        if !allowed {
            let refused = format!("a redirect to {url}, which the agent does not accept as a publisher");
            attempt.error(refused)
        } else if attempt.previous().len() >= 10 {
            attempt.error("too many redirects")
        } else {
            attempt.follow()
        }
    })
}

/// Whether `host` (as in a URL, IPv6 in brackets) is the loopback
/// interface.
pub(crate) fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The result of a conditional snapshot request.
pub(crate) enum SnapshotFetch {
    /// `304 Not Modified`: the stored ETag is still current.
    NotModified {
        /// The publisher's next-check hint.
        hint: Option<Duration>,
        /// The response's [`HASHES_HEADER`], if any.
        buckets: Option<String>,
        /// The response's [`FRESHNESS_HEADER`], not yet verified.
        freshness: Option<String>,
    },
    /// `200 OK` with the complete body, not yet verified.
    Body {
        /// The snapshot bytes.
        bytes: Vec<u8>,
        /// The response's `ETag`, if it had a usable one.
        etag: Option<String>,
        /// The publisher's next-check hint.
        hint: Option<Duration>,
        /// The response's [`HASHES_HEADER`]: where the immutable
        /// full-hash buckets of the snapshot's version are, if advertised.
        buckets: Option<String>,
        /// The response's [`FRESHNESS_HEADER`], not yet verified.
        freshness: Option<String>,
    },
}

/// The result of a conditional request for the deltas since a version
/// (`GET /v1/lists/{name}/updates/{from}`).
pub(crate) enum UpdatesFetch {
    /// `304 Not Modified`: the version held is the latest.
    NotModified {
        /// The publisher's next-check hint.
        hint: Option<Duration>,
        /// The response's [`HASHES_HEADER`], if any.
        buckets: Option<String>,
        /// The response's [`FRESHNESS_HEADER`], not yet verified.
        freshness: Option<String>,
    },
    /// `200 OK` with the chain, not yet verified.
    Chain {
        /// The concatenated deltas.
        bytes: Vec<u8>,
        /// The response's `ETag`: the latest snapshot's.
        etag: Option<String>,
        /// The publisher's next-check hint.
        hint: Option<Duration>,
        /// The response's [`HASHES_HEADER`], if any.
        buckets: Option<String>,
        /// The response's [`FRESHNESS_HEADER`], not yet verified.
        freshness: Option<String>,
    },
    /// No chain to be had: `410 no_delta`, or `404` from a publisher that
    /// predates deltas. Take the whole snapshot.
    Unavailable {
        /// The status, for the list's status.
        error: Error,
    },
}

/// A header of `headers` as text, if present and visible ASCII.
fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// `GET {url}` (the update route) with `If-None-Match: if_none_match`,
/// reading at most `limit_bytes` of chain within `timeout`. `date`
/// receives the publisher's clock from any response that came back.
pub(crate) async fn fetch_updates(
    client: &reqwest::Client,
    url: &str,
    if_none_match: &str,
    limit_bytes: u64,
    timeout: Duration,
    now: SystemTime,
    date: &mut Option<SystemTime>,
) -> Result<UpdatesFetch, Error> {
    let mut request = client.get(url).timeout(timeout);
    if let Ok(value) = HeaderValue::from_str(if_none_match) {
        request = request.header(IF_NONE_MATCH, value);
    }
    let response = request.send().await.map_err(|e| transport(url, e))?;
    let headers = response.headers();
    *date = publisher_time(headers);
    let hint = next_check_hint(headers, now);
    let buckets = header_text(headers, HASHES_HEADER);
    let freshness = header_text(headers, FRESHNESS_HEADER);
    let etag = header_text(headers, ETAG.as_str());
    match response.status() {
        StatusCode::OK => {
            let bytes = read_limited(response, url, limit_bytes).await?;
            Ok(UpdatesFetch::Chain {
                bytes,
                etag,
                hint,
                buckets,
                freshness,
            })
        }
        StatusCode::NOT_MODIFIED => Ok(UpdatesFetch::NotModified {
            hint,
            buckets,
            freshness,
        }),
        StatusCode::GONE | StatusCode::NOT_FOUND => Ok(UpdatesFetch::Unavailable {
            error: status_error(response, url, now).await,
        }),
        _ => Err(status_error(response, url, now).await),
    }
}

/// The next-check hint of a snapshot response's headers, as a delay from
/// `now` (the agent's clock when the request was sent): from the absolute hint when there is one, so
/// that a copy a shared cache serves later is read right
/// ([`NextCheckHeaders::delay`]).
fn next_check_hint(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    NextCheckHeaders {
        next_check_at: text(NEXT_CHECK_AT),
        next_check: text(NEXT_CHECK),
        cache_control: text(CACHE_CONTROL.as_str()),
        date: text(DATE.as_str()),
        age: text(AGE.as_str()),
    }
    .delay(now)
}

/// The publisher's clock when it generated a response (`Date`, plus `Age`
/// for a cached answer), for [`crate::engine::clock`].
fn publisher_time(headers: &HeaderMap) -> Option<SystemTime> {
    let text = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    server_time(text(DATE), text(AGE))
}

/// `GET {url}` with `If-None-Match: etag` when an ETag is given. The whole
/// exchange, body included, must finish within `timeout`. `date` receives
/// the publisher's clock from any response that came back, error or not.
pub(crate) async fn fetch_snapshot(
    client: &reqwest::Client,
    url: &str,
    etag: Option<&str>,
    limit_bytes: u64,
    timeout: Duration,
    now: SystemTime,
    date: &mut Option<SystemTime>,
) -> Result<SnapshotFetch, Error> {
    let mut request = client.get(url).timeout(timeout);
    let conditional = etag.and_then(|e| HeaderValue::from_str(e).ok());
    let sent_condition = conditional.is_some();
    if let Some(value) = conditional {
        request = request.header(IF_NONE_MATCH, value);
    }
    let response = request.send().await.map_err(|e| transport(url, e))?;
    *date = publisher_time(response.headers());
    let hint = next_check_hint(response.headers(), now);
    let buckets = header_text(response.headers(), HASHES_HEADER);
    let freshness = header_text(response.headers(), FRESHNESS_HEADER);
    match response.status() {
        StatusCode::OK => {
            let etag = response
                .headers()
                .get(ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let bytes = read_limited(response, url, limit_bytes).await?;
            Ok(SnapshotFetch::Body {
                bytes,
                etag,
                hint,
                buckets,
                freshness,
            })
        }
        StatusCode::NOT_MODIFIED if sent_condition => Ok(SnapshotFetch::NotModified {
            hint,
            buckets,
            freshness,
        }),
        StatusCode::NOT_MODIFIED => Err(Error::UnexpectedResponse {
            url: url.to_owned(),
            reason: "304 Not Modified to a request without If-None-Match".to_owned(),
        }),
        _ => Err(status_error(response, url, now).await),
    }
}

/// `POST {url}` (`/v1/hashes:search`) with `request` as JSON, asking for
/// the binary answer ([`FULL_HASHES_ACCEPT`]) and reading the one that
/// comes by its `Content-Type` within [`MAX_SEARCH_RESPONSE_BYTES`]:
/// binary ([`SearchAnswer::from_binary`]) or JSON (a publisher older than
/// the binary answer; [`SearchAnswer::from_json`]), both into the one
/// compact [`SearchAnswer`]. The caller decides what of it to believe.
/// `date` receives the publisher's clock from any response that came back.
pub(crate) async fn search_full_hashes(
    client: &reqwest::Client,
    url: &str,
    request: &FullHashSearchRequest,
    now: SystemTime,
    date: &mut Option<SystemTime>,
) -> Result<SearchAnswer, Error> {
    let body = serde_json::to_vec(request).map_err(|e| Error::UnexpectedResponse {
        url: url.to_owned(),
        reason: format!("cannot encode request: {e}"),
    })?;
    let response = client
        .post(url)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, FULL_HASHES_ACCEPT)
        .body(body)
        .send()
        .await
        .map_err(|e| transport(url, e))?;
    *date = publisher_time(response.headers());
    read_answer(response, url, now, MAX_SEARCH_RESPONSE_BYTES, |bytes| {
        serde_json::from_slice(bytes)
    })
    .await
}

/// `GET {url}` of one immutable full-hash bucket
/// (`/v1/lists/{name}/hashes/{version}/{prefix}`), asking for the binary
/// answer and reading either encoding as [`search_full_hashes`] does (a
/// JSON bucket is one [`FullHashResponse`]), within
/// [`MAX_BUCKET_RESPONSE_BYTES`]. Any status but `200` is an
/// error: the caller asks `POST /v1/hashes:search` instead. `date`
/// receives the publisher's clock from any response that came back.
pub(crate) async fn fetch_bucket(
    client: &reqwest::Client,
    url: &str,
    now: SystemTime,
    date: &mut Option<SystemTime>,
) -> Result<SearchAnswer, Error> {
    let response = client
        .get(url)
        .header(ACCEPT, FULL_HASHES_ACCEPT)
        .send()
        .await
        .map_err(|e| transport(url, e))?;
    *date = publisher_time(response.headers());
    read_answer(response, url, now, MAX_BUCKET_RESPONSE_BYTES, |bytes| {
        serde_json::from_slice::<FullHashResponse>(bytes).map(|single| FullHashSearchResponse {
            results: vec![PrefixResult {
                prefix: single.prefix,
                matches: single.matches,
            }],
            cache_duration_s: single.cache_duration_s,
        })
    })
    .await
}

/// Reads a full-hash answer by its `Content-Type` within `limit_bytes`:
/// binary ([`SearchAnswer::from_binary`]) or
/// JSON, parsed by `json` ([`SearchAnswer::from_json`]).
async fn read_answer(
    response: reqwest::Response,
    url: &str,
    now: SystemTime,
    limit_bytes: u64,
    json: impl FnOnce(&[u8]) -> serde_json::Result<FullHashSearchResponse>,
) -> Result<SearchAnswer, Error> {
    if response.status() != StatusCode::OK {
        return Err(status_error(response, url, now).await);
    }
    let binary = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(is_full_hashes_content_type);
    let bytes = read_limited(response, url, limit_bytes).await?;
    let invalid = |e| Error::UnexpectedResponse {
        url: url.to_owned(),
        reason: format!("invalid full-hash answer: {e}"),
    };
    if binary {
        return SearchAnswer::from_binary(&bytes).map_err(invalid);
    }
    let json = json(&bytes).map_err(|e| Error::UnexpectedResponse {
        url: url.to_owned(),
        reason: format!("invalid JSON: {e}"),
    })?;
    drop(bytes);
    SearchAnswer::from_json(json).map_err(invalid)
}

/// `GET {url}` for the publisher's list of threat lists.
pub(crate) async fn fetch_lists(client: &reqwest::Client, url: &str) -> Result<ListsResponse, Error> {
    fetch_json(client, url).await
}

async fn fetch_json<T: serde::de::DeserializeOwned>(client: &reqwest::Client, url: &str) -> Result<T, Error> {
    let response = client.get(url).send().await.map_err(|e| transport(url, e))?;
    if response.status() != StatusCode::OK {
        return Err(status_error(response, url, SystemTime::now()).await);
    }
    let bytes = read_limited(response, url, MAX_JSON_BYTES).await?;
    serde_json::from_slice(&bytes).map_err(|e| Error::UnexpectedResponse {
        url: url.to_owned(),
        reason: format!("invalid JSON: {e}"),
    })
}

/// Reads the whole body, failing as soon as it exceeds `limit_bytes`. The
/// `Content-Length` header only serves to fail early: the byte count is
/// enforced on what actually arrives.
async fn read_limited(
    mut response: reqwest::Response,
    url: &str,
    limit_bytes: u64,
) -> Result<Vec<u8>, Error> {
    let too_large = || Error::ResponseTooLarge {
        url: url.to_owned(),
        limit_bytes,
    };
    let declared = response.content_length();
    if declared.is_some_and(|n| n > limit_bytes) {
        return Err(too_large());
    }
    // Preallocate at most what we would accept, and at most 16 MiB on the
    // strength of an unverified header.
    let initial = declared.unwrap_or(0).min(limit_bytes).min(16 * 1024 * 1024);
    let mut body = Vec::with_capacity(usize::try_from(initial).unwrap_or(0));
    while let Some(chunk) = response.chunk().await.map_err(|e| transport(url, e))? {
        let total = (body.len() as u64).saturating_add(chunk.len() as u64);
        if total > limit_bytes {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An [`Error::Status`] for a non-success response, with the publisher's
/// error message when the body is its JSON error, and its `Retry-After`
/// on a `429` or `503`: an HTTP-date is an instant on the answering
/// server's clock, so it is read against the response's `Date` (plus its
/// `Age`), and against `now` without one (a clock behind must not stretch
/// it).
async fn status_error(response: reqwest::Response, url: &str, now: SystemTime) -> Error {
    let status = response.status().as_u16();
    let retry_after = if matches!(
        response.status(),
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        let answered_at = publisher_time(response.headers()).unwrap_or(now);
        response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, answered_at))
    } else {
        None
    };
    let body = read_limited(response, url, MAX_ERROR_BODY_BYTES)
        .await
        .unwrap_or_default();
    Error::status(url, status, &body, retry_after)
}

/// A [`Error::Transport`] for `url` from a reqwest error.
fn transport(url: &str, err: reqwest::Error) -> Error {
    let timed_out = err.is_timeout();
    Error::Transport {
        url: url.to_owned(),
        // The variant carries the URL; do not repeat it in the reason.
        reason: error_chain(&err.without_url()),
        timed_out,
    }
}

/// `err` and its sources joined by `: `.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        // hyper and reqwest sometimes repeat the same message one level down.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A keep-alive HTTP/1.1 server answering every request `{"lists":[]}`;
    /// returns its URL and the number of connections it accepted.
    async fn counting_server() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while let Ok(n @ 1..) = stream.read(&mut buf).await {
                        head.extend_from_slice(&buf[..n]);
                        if head.windows(4).any(|w| w == b"\r\n\r\n") {
                            head.clear();
                            let body = br#"{"lists":[]}"#;
                            let answer = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                                body.len()
                            );
                            let _ = stream.write_all(answer.as_bytes()).await;
                            let _ = stream.write_all(body).await;
                        }
                    }
                });
            }
        });
        (format!("http://{addr}/v1/lists"), accepted)
    }

    /// An HTTP/1.1 server answering one request with `content_type` and
    /// `body`, and sending back the request head it read; returns its URL.
    async fn one_answer(
        content_type: &'static str,
        body: Vec<u8>,
    ) -> (String, tokio::sync::oneshot::Receiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stream.read(&mut buf).await {
                head.extend_from_slice(&buf[..n]);
                if head.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
            let _ = stream.write_all(&body).await;
            let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
        });
        (format!("http://{addr}/v1/hashes:search"), rx)
    }

    #[tokio::test]
    async fn search_answers_are_read_by_their_content_type() {
        use blocksieve_format::api::{
            FULL_HASHES_CONTENT_TYPE, FullHashAnswer, IndexedAnswer, IndexedFullHash, IndexedPrefixAnswer,
            ListedFullHash, PrefixAnswer,
        };
        use blocksieve_format::{FullHash, RequestPrefix};

        let client = client(
            HeaderValue::from_static("test"),
            Duration::from_secs(5),
            Duration::from_secs(5),
            false,
        )
        .unwrap();
        let h = FullHash::of(b"evil.example/");
        let prefix = RequestPrefix::of(&h, 12);
        let request = FullHashSearchRequest {
            prefixes: vec![prefix.to_string()],
            ..FullHashSearchRequest::default()
        };
        let answer = FullHashAnswer {
            cache_duration_s: 60,
            results: vec![PrefixAnswer {
                prefix,
                matches: vec![ListedFullHash {
                    full_hash: h,
                    list: "malware".to_owned(),
                }],
            }],
        };
        // Either encoding, the same compact answer: the list named once, the
        // full hash as bytes.
        let expected = SearchAnswer {
            answer: IndexedAnswer {
                cache_duration_s: 60,
                lists: vec!["malware".to_owned()],
                results: vec![IndexedPrefixAnswer {
                    prefix,
                    matches: vec![IndexedFullHash {
                        list: 0,
                        full_hash: h,
                    }],
                }],
            },
            unreadable: Vec::new(),
        };
        let search = |url: String| {
            let client = client.clone();
            let request = request.clone();
            async move {
                let mut date = None;
                search_full_hashes(&client, &url, &request, SystemTime::now(), &mut date).await
            }
        };

        // Binary, as asked for.
        let (url, head) = one_answer(FULL_HASHES_CONTENT_TYPE, answer.encode().unwrap()).await;
        assert_eq!(search(url).await.unwrap(), expected);
        let head = head.await.unwrap().to_lowercase();
        assert!(
            head.contains(&format!("accept: {}", FULL_HASHES_ACCEPT.to_lowercase())),
            "{head}"
        );

        // JSON, from a publisher without the binary answer.
        let json = serde_json::to_vec(&FullHashSearchResponse::from(answer.clone())).unwrap();
        let (url, _) = one_answer("application/json", json).await;
        assert_eq!(search(url).await.unwrap(), expected);

        // A binary answer cut short is an unexpected response, not a panic.
        let mut cut = answer.encode().unwrap();
        cut.pop();
        let (url, _) = one_answer(FULL_HASHES_CONTENT_TYPE, cut).await;
        match search(url).await {
            Err(Error::UnexpectedResponse { reason, .. }) => {
                assert!(reason.contains("full-hash answer truncated"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn buckets_are_read_by_their_content_type() {
        use blocksieve_format::api::{
            FULL_HASHES_CONTENT_TYPE, FullHashAnswer, FullHashMatch, ListedFullHash, PrefixAnswer,
        };
        use blocksieve_format::{FullHash, RequestPrefix};

        let client = client(
            HeaderValue::from_static("test"),
            Duration::from_secs(5),
            Duration::from_secs(5),
            false,
        )
        .unwrap();
        let h = FullHash::of(b"evil.example/");
        let prefix = RequestPrefix::of(&h, 12);
        let answer = FullHashAnswer {
            cache_duration_s: 60,
            results: vec![PrefixAnswer {
                prefix,
                matches: vec![ListedFullHash {
                    full_hash: h,
                    list: "malware".to_owned(),
                }],
            }],
        };
        let fetch = |url: String| {
            let client = client.clone();
            async move {
                let mut date = None;
                fetch_bucket(&client, &url, SystemTime::now(), &mut date).await
            }
        };
        let (url, head) = one_answer(FULL_HASHES_CONTENT_TYPE, answer.encode().unwrap()).await;
        let binary = fetch(url).await.unwrap();
        let head = head.await.unwrap().to_lowercase();
        assert!(head.starts_with("get "), "{head}");
        assert!(
            head.contains(&format!("accept: {}", FULL_HASHES_ACCEPT.to_lowercase())),
            "{head}"
        );
        // A JSON bucket is one FullHashResponse: the same answer.
        let json = serde_json::to_vec(&FullHashResponse {
            prefix: prefix.to_string(),
            matches: vec![FullHashMatch {
                full_hash: h.to_string(),
                list: "malware".to_owned(),
            }],
            cache_duration_s: 60,
        })
        .unwrap();
        let (url, _) = one_answer("application/json", json).await;
        assert_eq!(fetch(url).await.unwrap(), binary);
        assert_eq!(binary.answer.results[0].matches[0].full_hash, h);
        // A bucket over the limit is refused, unread.
        let huge = vec![0u8; MAX_BUCKET_RESPONSE_BYTES as usize + 1];
        let (url, _) = one_answer(FULL_HASHES_CONTENT_TYPE, huge).await;
        assert!(matches!(
            fetch(url).await,
            Err(Error::ResponseTooLarge {
                limit_bytes: MAX_BUCKET_RESPONSE_BYTES,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn idle_connections_are_reused_within_the_pool_idle_timeout_and_dropped_after() {
        let (url, accepted) = counting_server().await;
        let idle = Duration::from_millis(300);
        let client = client(
            HeaderValue::from_static("test"),
            Duration::from_secs(5),
            idle,
            false,
        )
        .unwrap();
        assert!(fetch_lists(&client, &url).await.is_ok());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(fetch_lists(&client, &url).await.is_ok());
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "not reused within the idle timeout"
        );
        // Idle longer than the timeout: a server closing idle connections
        // after this long could have closed it under the next request.
        tokio::time::sleep(idle * 3).await;
        assert!(fetch_lists(&client, &url).await.is_ok());
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "an expired idle connection was reused"
        );
    }
}
