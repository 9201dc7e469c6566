//! The publisher's HTTP API on a real socket: status codes, JSON errors,
//! conditional GET.

use std::time::Duration;

use blocksieve_format::api::{ErrorResponse, FullHashResponse};
use blocksieve_format::{FullHash, canonicalize};
use blocksieve_publisher::SourceFormat;
use blocksieve_tests::{RunningPublisher, config, fixture_lines, fixture_source};

async fn start() -> (RunningPublisher, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "phishing",
        vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
    );
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    (server, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_etag_and_304() {
    let (server, _dir) = start().await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/lists/phishing/snapshot", server.base_url());
    let first = client.get(&url).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "strong etag {etag}");
    let first_headers = first.headers().clone();
    let body = first.bytes().await.unwrap();
    assert!(body.starts_with(b"BLKSIEVE"));
    let again = client
        .get(&url)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
    // RFC 9110 §15.4.5: a 304 carries those of Content-Location, Date,
    // ETag, Vary, Cache-Control and Expires that the 200 carried.
    for name in [
        "content-location",
        "date",
        "etag",
        "vary",
        "cache-control",
        "expires",
    ] {
        assert_eq!(
            first_headers.contains_key(name),
            again.headers().contains_key(name),
            "{name}: in the 200 {:?}, in the 304 {:?}",
            first_headers.get(name),
            again.headers().get(name)
        );
    }
    assert!(first_headers.contains_key("content-location"));
    assert_eq!(
        first_headers["content-location"],
        again.headers()["content-location"]
    );
    assert!(again.bytes().await.unwrap().is_empty());
    let other = client
        .get(&url)
        .header("if-none-match", "\"nope\"")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_hash_endpoint_returns_the_bucket() {
    let (server, _dir) = start().await;
    let client = reqwest::Client::new();
    let listed = canonicalize(&fixture_lines("phishing-urls.txt")[5]).unwrap();
    let hash = listed.expressions().next().unwrap().full_hash();
    let r: FullHashResponse = client
        .get(format!("{}/v1/hashes/{}", server.base_url(), hash.prefix()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r.prefix, hash.prefix().to_string());
    assert!(
        r.matches
            .iter()
            .any(|m| m.full_hash == hash.to_string() && m.list == "phishing")
    );
    assert!(
        r.matches
            .iter()
            .all(|m| FullHash::from_hex(&m.full_hash).unwrap().prefix() == hash.prefix())
    );
    assert!(r.cache_duration_s > 0);

    // An empty bucket is a 200 with no matches.
    let empty = FullHash::of(b"not-listed.example/");
    let r: FullHashResponse = client
        .get(format!("{}/v1/hashes/{}", server.base_url(), empty.prefix()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(r.matches.is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_and_the_server_stays_up() {
    let (server, _dir) = start().await;
    let client = reqwest::Client::new();
    let base = server.base_url();
    let cases = [
        ("/v1/hashes/zz", 400, "bad_prefix"),
        ("/v1/hashes/AF30010E", 400, "bad_prefix"),
        ("/v1/hashes/af30010e00", 400, "bad_prefix"),
        ("/v1/hashes/%2e%2e%2f%2e%2e", 400, "bad_prefix"),
        ("/v1/lists/nope/snapshot", 404, "unknown_list"),
        ("/v1/lists/..%2f..%2fetc%2fpasswd/snapshot", 404, "unknown_list"),
        ("/v1/nothing", 404, "not_found"),
    ];
    for (path, status, code) in cases {
        let r = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        let body: ErrorResponse = r.json().await.unwrap();
        assert_eq!(body.error.code, code, "{path}");
        assert!(!body.error.message.is_empty());
    }
    let r = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versioned_snapshot_answers_only_the_canonical_version() {
    let (server, _dir) = start().await;
    let client = reqwest::Client::new();
    let base = server.base_url();
    let latest = client
        .get(format!("{base}/v1/lists/phishing/snapshot"))
        .send()
        .await
        .unwrap();
    let location = latest.headers()["content-location"].to_str().unwrap().to_owned();
    let version = location.rsplit('/').next().unwrap().to_owned();
    assert!(version.parse::<u64>().is_ok(), "{location}");
    let ok = client.get(format!("{base}{location}")).send().await.unwrap();
    assert_eq!(ok.status(), 200, "{location}");
    assert_eq!(ok.bytes().await.unwrap(), latest.bytes().await.unwrap());
    for alias in [
        format!("0{version}"),
        format!("000{version}"),
        format!("+{version}"),
        format!("%2B{version}"),
        "00".to_owned(),
    ] {
        let path = format!("/v1/lists/phishing/snapshots/{alias}");
        let r = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 400, "{path}");
        let body: ErrorResponse = r.json().await.unwrap();
        assert_eq!(body.error.code, "bad_version", "{path}");
    }
    // A canonical number that names no kept snapshot is a 404.
    let r = client
        .get(format!("{base}/v1/lists/phishing/snapshots/0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let body: ErrorResponse = r.json().await.unwrap();
    assert_eq!(body.error.code, "unknown_version");
    server.stop().await;
}

/// `min_versions`: a search that needs a newer snapshot than the server
/// serves is refused `503 behind` with `Retry-After`, never answered from
/// the older data; the served version or older is answered; a list the
/// server does not serve is `404 unknown_list`; no versions, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_with_min_versions_is_refused_when_the_server_is_behind() {
    let (server, _dir) = start().await;
    let client = reqwest::Client::new();
    let served = server
        .publisher
        .state()
        .list("phishing")
        .unwrap()
        .current
        .load()
        .as_ref()
        .unwrap()
        .header
        .version;
    let url = format!("{}/v1/hashes:search", server.base_url());
    let search = |versions: serde_json::Value| {
        client
            .post(&url)
            .json(&serde_json::json!({"prefixes": ["af30"], "min_versions": versions}))
            .send()
    };
    let behind = search(serde_json::json!({"phishing": served + 1})).await.unwrap();
    assert_eq!(behind.status(), 503);
    assert_eq!(behind.headers()["retry-after"], "1");
    assert_eq!(behind.headers()["cache-control"], "no-store");
    let error: ErrorResponse = behind.json().await.unwrap();
    assert_eq!(error.error.code, "behind");
    assert!(
        error.error.message.contains(&(served + 1).to_string()),
        "{}",
        error.error.message
    );
    for versions in [
        serde_json::json!({"phishing": served}),
        serde_json::json!({"phishing": 1}),
        serde_json::json!({}),
    ] {
        assert_eq!(
            search(versions.clone()).await.unwrap().status(),
            200,
            "{versions}"
        );
    }
    let unknown = search(serde_json::json!({"malware": 1})).await.unwrap();
    assert_eq!(unknown.status(), 404);
    // A newer snapshot named in `snapshots` alone is behind too (it was
    // answered 200 from the older data).
    let newer = format!("{}-0000000000000000", served + 5);
    let behind = client
        .post(&url)
        .json(&serde_json::json!({"prefixes": ["af30"], "snapshots": {"phishing": newer}}))
        .send()
        .await
        .unwrap();
    assert_eq!(behind.status(), 503);
    let error: ErrorResponse = behind.json().await.unwrap();
    assert_eq!(error.error.code, "behind");
    // A prefix given many times is answered each time, in order.
    let each: serde_json::Value = client
        .post(&url)
        .json(&serde_json::json!({"prefixes": vec!["af"; 1000]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(each["results"].as_array().unwrap().len(), 1000);
    server.stop().await;
}

/// Search answers are sent from a budget of memory: an answer holds its
/// size until it is sent or its connection closes (a slow reader holds it,
/// not more), and a search that finds too little left is `503 busy` with
/// `Retry-After`. A few kilobytes of request (1,000 padded prefixes) make
/// an answer of megabytes; 40 slow readers held 1.1 GB without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_answers_are_sent_from_a_budget_a_slow_reader_holds_until_it_goes() {
    use tokio::io::AsyncWriteExt as _;

    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(
        dir.path(),
        "phishing",
        vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
    );
    cfg.padding = 200;
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let budget = server.publisher.state().answers_in_flight.clone();
    let prefixes: Vec<String> = (0..1000).map(|i| format!("{i:04x}")).collect();
    let body = serde_json::json!({ "prefixes": prefixes }).to_string();
    let url = format!("{}/v1/hashes:search", server.base_url());
    let client = reqwest::Client::new();
    let search = || {
        client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept-encoding", "identity")
            .body(body.clone())
            .send()
    };
    let whole = search().await.unwrap();
    assert_eq!(whole.status(), 200);
    let size = whole.bytes().await.unwrap().len();
    assert!(size > 4 << 20, "{size}");
    assert_eq!(budget.held_kib(), 0);

    // A client that sends the search and reads nothing holds the answer's
    // size (what the socket buffers did not take), until it goes.
    let mut slow = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let request = format!(
        "POST /v1/hashes:search HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         accept-encoding: identity\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    slow.write_all(request.as_bytes()).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while budget.held_kib() * 1024 < size / 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "held {} KiB",
            budget.held_kib()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The whole budget taken: `503 busy`, a clean refusal.
    let left = blocksieve_publisher::internal::state::AnswersInFlight::DEFAULT_KIB - budget.held_kib();
    let rest = budget.take(left * 1024).unwrap();
    let busy = search().await.unwrap();
    assert_eq!(busy.status(), 503);
    assert_eq!(busy.headers()["retry-after"], "1");
    let error: ErrorResponse = busy.json().await.unwrap();
    assert_eq!(error.error.code, "busy");
    drop(rest);
    drop(slow);
    while budget.held_kib() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "held {} KiB",
            budget.held_kib()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(search().await.unwrap().status(), 200);
    server.stop().await;
}

/// The `ETag` of the latest snapshot of `phishing`.
async fn latest_etag(server: &RunningPublisher, client: &reqwest::Client) -> String {
    let latest = client
        .get(format!("{}/v1/lists/phishing/snapshot", server.base_url()))
        .send()
        .await
        .unwrap();
    latest.headers()["etag"].to_str().unwrap().to_owned()
}

/// A `304` carries no `Content-Length`, to `HEAD` as to `GET` (axum's
/// router gave a `HEAD` `0`, which RFC 9110 §8.6 forbids unless it is the
/// `200`'s length).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_has_no_content_length_to_head_or_get() {
    let (server, _dir) = start().await;
    let client = reqwest::Client::new();
    let etag = latest_etag(&server, &client).await;
    let version = etag.trim_matches('"').split('-').next().unwrap();
    for path in [
        "/v1/lists/phishing/snapshot".to_owned(),
        format!("/v1/lists/phishing/snapshots/{version}"),
        format!("/v1/lists/phishing/updates/{version}"),
    ] {
        for method in [reqwest::Method::HEAD, reqwest::Method::GET] {
            let r = client
                .request(method.clone(), format!("{}{path}", server.base_url()))
                .header("if-none-match", "*")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 304, "{method} {path}");
            assert!(
                r.headers().get("content-length").is_none(),
                "{method} {path}: {:?}",
                r.headers()
            );
        }
    }
    server.stop().await;
}

/// `If-None-Match` on the delta route is a precondition on a `200`: a
/// `from` with no chain is `410 no_delta` whatever the client's tag (it was
/// a `304`, telling the client to keep a chain that does not exist).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delta_chain_that_does_not_exist_is_gone_whatever_the_etag() {
    let (server, _dir) = start().await;
    let client = reqwest::Client::new();
    let etag = latest_etag(&server, &client).await;
    for tag in [etag.as_str(), "*"] {
        let r = client
            .get(format!("{}/v1/lists/phishing/updates/1", server.base_url()))
            .header("if-none-match", tag)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 410, "{tag}");
        let body: ErrorResponse = r.json().await.unwrap();
        assert_eq!(body.error.code, "no_delta");
    }
    server.stop().await;
}

/// CORS (publisher `cors_allowed_origins`): off by default; with origins,
/// a preflight from one of them is answered for the headers agents send,
/// responses name it and expose the headers agents read, and another
/// origin gets no CORS headers (its browser withholds the response).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_follows_the_allowed_origins_and_is_off_by_default() {
    let client = reqwest::Client::new();
    let allowed = "https://mail.example";
    let preflight = |base: &str, origin: &str| {
        client
            .request(reqwest::Method::OPTIONS, format!("{base}/v1/hashes:search"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type, if-none-match")
            .send()
    };
    let snapshot = |base: &str, origin: &str| {
        client
            .get(format!("{base}/v1/lists/phishing/snapshot"))
            .header("origin", origin)
            .send()
    };

    let (server, _dir) = start().await;
    let base = server.base_url();
    let answer = snapshot(&base, allowed).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert!(
        answer.headers().get("access-control-allow-origin").is_none(),
        "off by default"
    );
    let answer = preflight(&base, allowed).await.unwrap();
    assert!(answer.headers().get("access-control-allow-origin").is_none());
    server.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(
        dir.path(),
        "phishing",
        vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
    );
    cfg.cors_allowed_origins = vec![allowed.to_owned(), "http://127.0.0.1:9".to_owned()];
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let base = server.base_url();

    let answer = preflight(&base, allowed).await.unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
    let headers = answer.headers();
    assert_eq!(headers["access-control-allow-origin"], allowed);
    let methods = headers["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(methods.contains("post") && methods.contains("get"), "{methods}");
    let allowed_headers = headers["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(
        allowed_headers.contains("content-type") && allowed_headers.contains("if-none-match"),
        "{allowed_headers}"
    );
    assert_eq!(headers["access-control-max-age"], "7200");
    assert!(headers.get("access-control-allow-credentials").is_none());

    let answer = snapshot(&base, allowed).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["access-control-allow-origin"], allowed);
    let exposed = answer.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for name in [
        "etag",
        "retry-after",
        blocksieve_format::api::NEXT_CHECK_HEADER,
        blocksieve_format::api::NEXT_CHECK_AT_HEADER,
        blocksieve_format::api::HASHES_HEADER,
        blocksieve_format::api::FRESHNESS_HEADER,
    ] {
        assert!(exposed.contains(name), "{name} not exposed: {exposed}");
    }
    assert!(
        answer.headers()["vary"]
            .to_str()
            .unwrap()
            .to_ascii_lowercase()
            .contains("origin")
    );

    // Another origin: served, with no CORS headers.
    let answer = snapshot(&base, "https://elsewhere.example").await.unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.headers().get("access-control-allow-origin").is_none());
    // The operational routes never answer cross-origin.
    let metrics = client
        .get(format!("{base}/metrics"))
        .header("origin", allowed)
        .send()
        .await
        .unwrap();
    assert!(metrics.headers().get("access-control-allow-origin").is_none());
    server.stop().await;
}

/// The routes the publisher serves in front of axum's router
/// (`blocksieve_publisher::Api`: the snapshot polls, the deltas and
/// both full-hash `GET`s) answer every request exactly as the router does
/// — status, every header, body — CORS and gzip included, and everything
/// the fast path does not take (`HEAD`, escaped or empty segments, a
/// trailing slash) still reaches the router. The request metrics count a
/// fast-path request under its route's pattern, as the router's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_busiest_routes_answer_as_the_router_does() {
    use axum::body::Body;
    use axum::http::{Method, Request};
    use tower::ServiceExt as _;

    // The fixture and 5,000 more URLs: an 8-bit prefix's answer is long
    // enough to be gzipped.
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("more-urls.txt");
    let more: String = (0..5000)
        .map(|i| format!("http://host-{i}.example/p/{i}\n"))
        .collect();
    std::fs::write(&feed, more).unwrap();
    let mut cfg = config(
        dir.path(),
        "phishing",
        vec![
            fixture_source("phishing-urls.txt", SourceFormat::Urls),
            blocksieve_publisher::SourceConfig::file(feed, SourceFormat::Urls),
        ],
    );
    let origin = "https://mail.example";
    cfg.cors_allowed_origins = vec![origin.to_owned()];
    let publisher = blocksieve_publisher::Publisher::open(cfg).unwrap();
    for outcome in publisher.build_all().await {
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    }
    let api = publisher.router();
    let router = api.clone().into_router();
    // A `304` of the router has axum's `Content-Length: 0`, which hyper
    // drops from a `GET` and `Api` from every `304`: compared without it.
    let send = |service: axum::Router, request: Request<Body>| async move {
        let mut response = service.oneshot(request).await.unwrap_or_else(|e| match e {});
        if response.status() == axum::http::StatusCode::NOT_MODIFIED {
            response.headers_mut().remove(axum::http::header::CONTENT_LENGTH);
        }
        answer(response).await
    };
    let send_api = |request: Request<Body>| {
        let api = api.clone();
        async move { answer(api.oneshot(request).await.unwrap_or_else(|e| match e {})).await }
    };

    let first = send_api(get("/v1/lists/phishing/snapshot", &[])).await;
    assert_eq!(first.0, 200);
    let etag = first.1["etag"].to_str().unwrap().to_owned();
    let version = first.1["content-location"]
        .to_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let listed = canonicalize(&fixture_lines("phishing-urls.txt")[5]).unwrap();
    let prefix = listed
        .expressions()
        .next()
        .unwrap()
        .full_hash()
        .prefix()
        .to_string();
    let short = &prefix[..2];
    let binary = blocksieve_format::api::FULL_HASHES_ACCEPT;
    let long = "n".repeat(3000);
    type Case<'a> = (Method, String, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (Method::GET, "/v1/lists/phishing/snapshot".into(), vec![]),
        (
            Method::GET,
            "/v1/lists/phishing/snapshot".into(),
            vec![("if-none-match", &etag)],
        ),
        (
            Method::GET,
            "/v1/lists/phishing/snapshot".into(),
            vec![("if-none-match", "\"other\"")],
        ),
        (
            Method::GET,
            "/v1/lists/phishing/snapshot".into(),
            vec![("origin", origin)],
        ),
        (
            Method::GET,
            "/v1/lists/phishing/snapshot".into(),
            vec![("origin", "https://evil.example")],
        ),
        (Method::HEAD, "/v1/lists/phishing/snapshot".into(), vec![]),
        (Method::GET, "/v1/lists/nope/snapshot".into(), vec![]),
        (Method::GET, "/v1/lists/phish%69ng/snapshot".into(), vec![]),
        (Method::GET, "/v1/lists/phishing/snapshot/".into(), vec![]),
        (Method::GET, "/v1/lists//snapshot".into(), vec![]),
        (Method::POST, "/v1/lists/phishing/snapshot".into(), vec![]),
        (
            Method::GET,
            "/v1/lists/phishing/snapshot".into(),
            vec![("content-length", "100000000")],
        ),
        (Method::GET, format!("/v1/hashes/{prefix}"), vec![]),
        (
            Method::GET,
            format!("/v1/hashes/{prefix}"),
            vec![("accept", binary)],
        ),
        (
            Method::GET,
            format!("/v1/hashes/{prefix}"),
            vec![("origin", origin)],
        ),
        (
            Method::GET,
            format!("/v1/hashes/{short}"),
            vec![("accept-encoding", "gzip")],
        ),
        (Method::GET, "/v1/hashes/00000000".into(), vec![]),
        (Method::GET, format!("/v1/hashes/{prefix}?x=1&y=%2F"), vec![]),
        (
            Method::GET,
            "http://publisher.example/v1/hashes/00000000".into(),
            vec![],
        ),
        (Method::GET, "/v1//hashes/00000000".into(), vec![]),
        (Method::GET, "/v1/hashes/ZZ".into(), vec![]),
        (Method::GET, "/v1/hashes/0".into(), vec![]),
        (
            Method::GET,
            format!("/v1/lists/phishing/hashes/{version}/{prefix}"),
            vec![],
        ),
        (
            Method::GET,
            format!("/v1/lists/phishing/hashes/{version}/{short}"),
            vec![("accept-encoding", "gzip")],
        ),
        (
            Method::GET,
            format!("/v1/lists/phishing/hashes/{version}/{prefix}"),
            vec![("accept", binary)],
        ),
        (
            Method::GET,
            format!("/v1/lists/phishing/hashes/1/{prefix}"),
            vec![],
        ),
        (
            Method::GET,
            format!("/v1/lists/phishing/hashes/01/{prefix}"),
            vec![],
        ),
        (
            Method::GET,
            format!("/v1/lists/phishing/hashes/99999999999/{prefix}"),
            vec![],
        ),
        (
            Method::GET,
            format!("/v1/lists/phishing/updates/{version}"),
            vec![],
        ),
        (
            Method::GET,
            "/v1/lists/phishing/updates/1".into(),
            vec![("origin", origin)],
        ),
        (Method::GET, "/v1/lists/phishing/updates/x".into(), vec![]),
        (Method::GET, "/v1/lists/nope/updates/1".into(), vec![]),
        // Names and targets the router may read otherwise.
        (Method::GET, "/v1/lists/ph\u{e9}ishing/snapshot".into(), vec![]),
        (
            Method::GET,
            "/v1/lists/a{b}c/snapshot".into(),
            vec![("accept-encoding", "gzip")],
        ),
        (Method::GET, "/v1/lists/../snapshot".into(), vec![]),
        (Method::GET, "/v1/lists/./snapshot".into(), vec![]),
        (Method::GET, "/v1/lists/a+b/snapshot".into(), vec![]),
        (Method::GET, "/v1/lists/a;b=c/snapshot".into(), vec![]),
        (Method::GET, "/v1/lists/a:b/snapshot".into(), vec![]),
        (Method::GET, "/v1/lists/*x/snapshot".into(), vec![]),
        (Method::GET, "/v1/hashes/{prefix}".into(), vec![]),
        (Method::GET, "/v1/hashes/%7Bprefix%7D".into(), vec![]),
        (Method::GET, "/v1/hashes:search".into(), vec![]),
        (Method::GET, "/v1/hashes/ab?".into(), vec![]),
        (Method::GET, "/v1/hashes/00000000#frag".into(), vec![]),
        (Method::GET, "*".into(), vec![]),
        (Method::GET, "http://publisher.example".into(), vec![]),
        // Error bodies long enough to be gzipped.
        (
            Method::GET,
            format!("/v1/lists/{long}/updates/1"),
            vec![("accept-encoding", "gzip"), ("origin", origin)],
        ),
        (
            Method::GET,
            format!("/v1/lists/{long}/hashes/1/00"),
            vec![("accept-encoding", "gzip, deflate, br")],
        ),
        (
            Method::GET,
            format!("/v1/lists/{long}/snapshot"),
            vec![("accept-encoding", "gzip")],
        ),
        // gzip, CORS and conditions together.
        (
            Method::GET,
            "/v1/lists/phishing/snapshot".into(),
            vec![
                ("if-none-match", &etag),
                ("accept-encoding", "gzip"),
                ("origin", origin),
            ],
        ),
        (
            Method::GET,
            "/v1/lists/phishing/snapshot".into(),
            vec![("accept-encoding", "gzip")],
        ),
        (
            Method::GET,
            format!("/v1/lists/phishing/updates/{version}"),
            vec![("accept-encoding", "gzip"), ("if-none-match", &etag)],
        ),
        (
            Method::GET,
            format!("/v1/hashes/{short}"),
            vec![("accept-encoding", "gzip;q=0, identity")],
        ),
        (
            Method::GET,
            format!("/v1/hashes/{short}"),
            vec![
                ("accept-encoding", "gzip"),
                ("accept", binary),
                ("origin", "null"),
            ],
        ),
        (
            Method::GET,
            format!("/v1/hashes/{short}"),
            vec![("accept-encoding", "gzip"), ("range", "bytes=0-10")],
        ),
        // Declared lengths, methods.
        (
            Method::GET,
            format!("/v1/hashes/{short}"),
            vec![("content-length", "70000")],
        ),
        (
            Method::GET,
            format!("/v1/hashes/{short}"),
            vec![("content-length", "-1")],
        ),
        (
            Method::GET,
            format!("/v1/hashes/{short}"),
            vec![("content-length", "5"), ("content-length", "7")],
        ),
        (
            Method::OPTIONS,
            format!("/v1/hashes/{short}"),
            vec![("origin", origin), ("access-control-request-method", "GET")],
        ),
        (
            Method::GET,
            format!("/v1/hashes/{short}"),
            vec![("origin", origin), ("access-control-request-method", "GET")],
        ),
        (
            Method::from_bytes(b"get").unwrap(),
            format!("/v1/hashes/{short}"),
            vec![],
        ),
        (Method::CONNECT, format!("/v1/hashes/{short}"), vec![]),
    ];
    for (method, path, headers) in &cases {
        let request = || {
            let mut r = Request::builder().method(method.clone()).uri(path.as_str());
            for (name, value) in headers {
                r = r.header(*name, *value);
            }
            r.body(Body::empty()).unwrap()
        };
        let (status, headers_api, body_api) = send_api(request()).await;
        let (status_router, headers_router, body_router) = send(router.clone(), request()).await;
        let case = format!("{method} {path} {headers:?}");
        assert_eq!(status, status_router, "{case}");
        assert_eq!(headers_api, headers_router, "{case}");
        assert_eq!(body_api, body_router, "{case}");
    }
    // A body on a hot route is read (and limited) as on the router's.
    for body in ["hello", ""] {
        let request = || {
            Request::get("/v1/lists/phishing/snapshot")
                .header("if-none-match", &etag)
                .body(Body::from(body))
                .unwrap()
        };
        let via_api = send_api(request()).await;
        let via_router = send(router.clone(), request()).await;
        assert_eq!(via_api, via_router, "body {body:?}");
        assert_eq!(via_api.0, 304);
    }
    // Other HTTP versions, bodies of unknown length, a body over the limit.
    for version in [axum::http::Version::HTTP_10, axum::http::Version::HTTP_2] {
        let request = || {
            Request::get(format!("/v1/hashes/{short}"))
                .version(version)
                .header("accept-encoding", "gzip")
                .body(Body::empty())
                .unwrap()
        };
        let via_api = send_api(request()).await;
        assert_eq!(via_api, send(router.clone(), request()).await, "{version:?}");
    }
    for body in ["{\"prefixes\":[\"00\"]}", "x"] {
        let request = || {
            let chunk = axum::body::Bytes::from_static(body.as_bytes());
            let stream = futures_util::stream::iter([Ok::<_, std::io::Error>(chunk)]);
            Request::get(format!("/v1/lists/phishing/hashes/{version}/{short}"))
                .header("accept-encoding", "gzip")
                .body(Body::from_stream(stream))
                .unwrap()
        };
        let via_api = send_api(request()).await;
        assert_eq!(via_api, send(router.clone(), request()).await, "stream {body:?}");
    }
    let big = "x".repeat(70_000);
    let request = || {
        Request::get(format!("/v1/hashes/{short}"))
            .body(Body::from(big.clone()))
            .unwrap()
    };
    let via_api = send_api(request()).await;
    assert_eq!(
        via_api,
        send(router.clone(), request()).await,
        "a 70,000-byte body"
    );
    assert_eq!(via_api.0, 413);
    // A few of them must have taken the cases they were meant to.
    let gzip = send_api(get(
        &format!("/v1/hashes/{short}"),
        &[("accept-encoding", "gzip")],
    ))
    .await;
    assert_eq!(
        gzip.1.get("content-encoding").map(|v| v.to_str().unwrap()),
        Some("gzip"),
        "{gzip:?}"
    );
    let cors = send_api(get(&format!("/v1/hashes/{prefix}"), &[("origin", origin)])).await;
    assert_eq!(cors.1["access-control-allow-origin"], origin);
    let not_modified = send_api(get("/v1/lists/phishing/snapshot", &[("if-none-match", &etag)])).await;
    assert_eq!(not_modified.0, 304);

    // Metrics: one more 304 on the snapshot route, counted under its pattern.
    let count = |text: &str| {
        text.lines()
            .find(|l| {
                l.starts_with("blocksieve_http_requests_total")
                    && l.contains(r#"route="/v1/lists/{name}/snapshot""#)
                    && l.contains(r#"status="304""#)
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let metrics = || async { String::from_utf8(send_api(get("/metrics", &[])).await.2.to_vec()).unwrap() };
    let before = count(&metrics().await);
    assert!(before >= 2, "the 304s above were counted: {before}");
    let _ = send_api(get("/v1/lists/phishing/snapshot", &[("if-none-match", &etag)])).await;
    assert_eq!(count(&metrics().await), before + 1);
}

fn get(path: &str, headers: &[(&str, &str)]) -> axum::http::Request<axum::body::Body> {
    let mut r = axum::http::Request::get(path);
    for (name, value) in headers {
        r = r.header(*name, *value);
    }
    r.body(axum::body::Body::empty()).unwrap()
}

/// A response's status, headers and whole body.
async fn answer(
    response: axum::response::Response,
) -> (axum::http::StatusCode, axum::http::HeaderMap, axum::body::Bytes) {
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, 1 << 24).await.unwrap();
    (parts.status, parts.headers, body)
}
