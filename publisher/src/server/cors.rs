//! Cross-origin access to the API (the Fetch standard's CORS protocol), for
//! agents running in web pages: the WASM agent's `fetch` from a page whose
//! origin is not the publisher's. Browser extensions with host permissions
//! and native agents need none of it.
//!
//! Off unless `cors_allowed_origins` names origins. The API is public and
//! read-only and takes no credentials (no cookies, no `Authorization`), so
//! `*` is safe where any page may check URLs; a list keeps other sites from
//! spending this publisher's capacity from their visitors' browsers.
//! Operational routes (`/healthz`, `/readyz`, `/metrics`) never answer
//! cross-origin requests.

use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, Method, header};
use blocksieve_format::api::{FRESHNESS_HEADER, HASHES_HEADER, NEXT_CHECK_AT_HEADER, NEXT_CHECK_HEADER};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The paths cross-origin requests may reach: the API's.
const API_PATHS: &str = "/v1/";

/// How long a browser may reuse a preflight answer, in seconds: 2 hours,
/// Chromium's cap (Firefox allows a day).
pub const PREFLIGHT_MAX_AGE_S: u64 = 2 * 60 * 60;

/// Checks `cors_allowed_origins`: empty (off), `["*"]`, or origins as a
/// browser sends them in `Origin` — `scheme://host` or
/// `scheme://host:port`, lowercase, with no path, not even `/`.
///
/// # Errors
///
/// The first entry at fault and why, for the configuration error.
pub fn check_origins(origins: &[String]) -> Result<(), String> {
    if origins.iter().any(|o| o == "*") && origins.len() > 1 {
        return Err("\"*\" allows every origin and must be the only entry".to_owned());
    }
    for origin in origins.iter().filter(|o| *o != "*") {
        origin_problem(origin).map_err(|p| format!("{origin:?}: {p}"))?;
    }
    Ok(())
}

fn origin_problem(origin: &str) -> Result<(), &'static str> {
    let (scheme, authority) = origin
        .split_once("://")
        .ok_or("not an origin (scheme://host[:port])")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_lowercase())
        && scheme
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
    if !scheme_ok {
        return Err("the scheme must be lowercase letters, digits, '+', '-' or '.'");
    }
    if authority.is_empty() {
        return Err("no host");
    }
    if authority.contains(['/', '?', '#']) {
        return Err("an origin has no path, query or fragment (not even a trailing '/')");
    }
    if authority.contains('@') {
        return Err("an origin has no user information");
    }
    if !authority.is_ascii() {
        return Err("browsers send an international host in its ASCII form (xn--...)");
    }
    if authority.chars().any(|c| c.is_ascii_uppercase()) {
        return Err("browsers send the host in lowercase");
    }
    // The port, if any: after the last ':' that is not inside an IPv6
    // literal's brackets.
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    };
    if host.is_empty() {
        return Err("no host");
    }
    if host.ends_with('.') {
        return Err("browsers send the host without a trailing '.'");
    }
    if let Some(port) = port {
        let number = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0 && port.bytes().all(|b| b.is_ascii_digit()))
            .ok_or("the port must be a number from 1 to 65535")?;
        if (scheme, number) == ("http", 80) || (scheme, number) == ("https", 443) {
            return Err("browsers leave out the scheme's default port");
        }
    }
    if HeaderValue::from_str(origin).is_err() || origin.contains(char::is_whitespace) {
        return Err("not a valid header value");
    }
    Ok(())
}

/// The CORS layer for `origins` (checked by [`check_origins`]), or `None`
/// when the list is empty. Simple and preflighted requests from an allowed
/// origin may `GET` and `POST` with the headers agents send
/// (`Content-Type`, `Accept`, `If-None-Match`) and read the headers agents
/// act on (`ETag`, `Retry-After`, `Date`, the next-check hint, the
/// immutable buckets' advertisement and the freshness record); no
/// credentials. Requests from other origins, and to paths outside `/v1/`,
/// are served as before without `Access-Control-Allow-Origin`, so the
/// browser withholds the response from the page.
pub fn layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let any = origins.iter().any(|o| o == "*");
    // Checked at start-up; an entry that is not a header value matches
    // nothing rather than being trusted.
    let list: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    let allow = AllowOrigin::predicate(move |origin: &HeaderValue, request: &Parts| {
        request.uri.path().starts_with(API_PATHS) && (any || list.contains(origin))
    });
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::HEAD, Method::POST])
            .allow_headers([header::CONTENT_TYPE, header::ACCEPT, header::IF_NONE_MATCH])
            .expose_headers([
                header::ETAG,
                header::RETRY_AFTER,
                header::DATE,
                HeaderName::from_static(NEXT_CHECK_HEADER),
                HeaderName::from_static(NEXT_CHECK_AT_HEADER),
                HeaderName::from_static(HASHES_HEADER),
                HeaderName::from_static(FRESHNESS_HEADER),
            ])
            .max_age(Duration::from_secs(PREFLIGHT_MAX_AGE_S)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_checked_as_browsers_send_them() {
        let ok = |list: &[&str]| check_origins(&list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(ok(&[]), Ok(()));
        assert_eq!(ok(&["*"]), Ok(()));
        assert_eq!(ok(&["https://mail.example", "http://127.0.0.1:8000"]), Ok(()));
        assert_eq!(
            ok(&[
                "http://[::1]:8000",
                "https://xn--bcher-kva.example",
                "https://a.example:8443"
            ]),
            Ok(())
        );
        assert_eq!(ok(&["chrome-extension://abcdefghijklmnop"]), Ok(()));
        for (bad, reason) in [
            (&["*", "https://a.example"][..], "must be the only entry"),
            (&["https://a.example/"], "trailing '/'"),
            (&["https://a.example/path"], "no path"),
            (&["a.example"], "not an origin"),
            (&["https://"], "no host"),
            (&["HTTPS://a.example"], "scheme"),
            (&["https://A.example"], "lowercase"),
            (&["https://user@a.example"], "user information"),
            (&["https://a.example\n"], "header value"),
            (&["https://bücher.example"], "ASCII form"),
            (&["https://mail.example:443"], "default port"),
            (&["http://localhost:80"], "default port"),
            (&["https://a.example:"], "port must be"),
            (&["https://a.example:99999"], "port must be"),
            (&["https://a.example:0"], "port must be"),
            (&["https://a.example:+8"], "port must be"),
            (&["https://a.example."], "trailing '.'"),
            (&["https://:8080"], "no host"),
        ] {
            let error = ok(bad).expect_err(bad[0]);
            assert!(error.contains(reason), "{bad:?}: {error}");
        }
    }

    #[test]
    fn no_origins_no_layer() {
        assert!(layer(&[]).is_none());
        assert!(layer(&["*".to_owned()]).is_some());
    }
}
