//! Full-hash buckets at immutable per-version URLs
//! (`GET /v1/lists/{name}/hashes/{version}/{prefix}`): what the publisher
//! answers for each version asked, the cache headers, the advertisement on
//! snapshot responses; and agents that confirm hits there when every
//! subscribed list advertises the version they hold, falling back to
//! `POST /v1/hashes:search` otherwise, never to "safe".

use std::time::Duration;

use blocksieve_format::api::{
    ErrorResponse, FULL_HASHES_ACCEPT, FULL_HASHES_CONTENT_TYPE, FullHashAnswer, FullHashResponse,
    HASHES_HEADER, routes,
};
use blocksieve_format::{FullHash, RequestPrefix};
use blocksieve_publisher::internal::sources::url_expression;
use blocksieve_publisher::{ListConfig, SourceConfig, SourceFormat};
use blocksieve_tests::{RunningPublisher, config, fixture_lines, fixture_source};

/// Buckets are padded to this many full hashes.
const PADDING: usize = 16;

/// The version list `name` of `server` serves, if any.
fn served(server: &RunningPublisher, name: &str) -> Option<u64> {
    let state = server.publisher.state();
    let slot = state.list(name)?;
    slot.current.load().as_ref().map(|p| p.header.version)
}

/// Waits until list `name` of `server` serves a snapshot; its version.
async fn wait_served(server: &RunningPublisher, name: &str) -> u64 {
    for _ in 0..600 {
        if let Some(version) = served(server, name) {
            return version;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("list {name} not served within 60 s");
}

/// A listed URL of the fixture and the full hash of its listed expression.
fn listed() -> (String, FullHash) {
    let url = fixture_lines("phishing-urls.txt").swap_remove(0);
    let expression = url_expression(url.as_bytes()).unwrap();
    (url, FullHash::of(expression.as_bytes()))
}

/// The error code of an error response.
async fn code(response: reqwest::Response) -> String {
    response.json::<ErrorResponse>().await.unwrap().error.code
}

/// Every status of the route, with its cache headers: the served version's
/// bucket is immutable and the same bytes every time; a newer version (or
/// a list with nothing served) is `503 behind` with `Retry-After`, an older
/// one `404 version_gone`, both `no-store`; bad versions and prefixes are
/// `400`, an unknown list `404`. Snapshot responses (200 and 304, latest
/// and versioned) advertise the bucket path of their version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_bucket_urls_answer_only_the_version_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(
        dir.path(),
        "alpha",
        vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
    );
    cfg.lists[0].request_prefix_bits = Some(12);
    // A list whose source is missing: its first build fails, nothing is served.
    cfg.lists.push(ListConfig::new(
        "pending",
        vec![SourceConfig::file(
            dir.path().join("missing.txt"),
            SourceFormat::Urls,
        )],
    ));
    cfg.padding = PADDING;
    let server = RunningPublisher::start(cfg).await;
    let version = wait_served(&server, "alpha").await;
    let base = server.base_url();
    let client = reqwest::Client::builder().no_gzip().build().unwrap();
    let (_, hash) = listed();
    let prefix = RequestPrefix::of(&hash, 12);

    // The advertisement, on every snapshot response.
    let latest = client
        .get(format!("{base}{}", routes::latest_snapshot("alpha")))
        .send()
        .await
        .unwrap();
    let advertised = routes::list_hashes_base("alpha", version);
    assert_eq!(advertised, format!("/v1/lists/alpha/hashes/{version}/"));
    assert_eq!(latest.headers()[HASHES_HEADER], advertised.as_str());
    let etag = latest.headers()["etag"].to_str().unwrap().to_owned();
    let not_modified = client
        .get(format!("{base}{}", routes::latest_snapshot("alpha")))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), 304);
    assert_eq!(not_modified.headers()[HASHES_HEADER], advertised.as_str());
    let versioned_url = format!("{base}{}", routes::versioned_snapshot("alpha", version));
    let versioned = client.get(&versioned_url).send().await.unwrap();
    assert_eq!(versioned.status(), 200);
    assert_eq!(versioned.headers()[HASHES_HEADER], advertised.as_str());
    let versioned_etag = versioned.headers()["etag"].to_str().unwrap().to_owned();
    let versioned = client
        .get(&versioned_url)
        .header("if-none-match", &versioned_etag)
        .send()
        .await
        .unwrap();
    assert_eq!(versioned.status(), 304);
    assert_eq!(versioned.headers()[HASHES_HEADER], advertised.as_str());

    // The served version: binary or JSON by Accept, immutable, the same
    // bytes every time (padding included), only this list's full hashes.
    let bucket_url = format!("{base}{advertised}{prefix}");
    let get = |url: String, accept: Option<&'static str>| {
        let mut request = client.get(url);
        if let Some(accept) = accept {
            request = request.header("accept", accept);
        }
        request.send()
    };
    let binary = get(bucket_url.clone(), Some(FULL_HASHES_ACCEPT)).await.unwrap();
    assert_eq!(binary.status(), 200);
    assert_eq!(binary.headers()["content-type"], FULL_HASHES_CONTENT_TYPE);
    assert_eq!(binary.headers()["vary"], "accept");
    assert_eq!(
        binary.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    let bytes = binary.bytes().await.unwrap();
    let answer = FullHashAnswer::decode(&bytes).unwrap();
    assert_eq!(answer.cache_duration_s, 300);
    let [result] = answer.results.as_slice() else {
        panic!("{answer:?}")
    };
    assert_eq!(result.prefix, prefix);
    assert_eq!(result.matches.len(), PADDING);
    assert!(
        result
            .matches
            .iter()
            .all(|m| m.list == "alpha" && prefix.matches(&m.full_hash))
    );
    assert!(result.matches.iter().any(|m| m.full_hash == hash));
    for _ in 0..3 {
        let again = get(bucket_url.clone(), Some(FULL_HASHES_ACCEPT)).await.unwrap();
        assert_eq!(
            again.bytes().await.unwrap(),
            bytes,
            "an immutable URL changed its bytes"
        );
    }
    let json = get(bucket_url.clone(), None).await.unwrap();
    assert_eq!(json.status(), 200);
    assert_eq!(json.headers()["vary"], "accept");
    assert_eq!(
        json.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    let json_bytes = json.bytes().await.unwrap();
    let parsed: FullHashResponse = serde_json::from_slice(&json_bytes).unwrap();
    assert_eq!(parsed.prefix, prefix.to_string());
    assert_eq!(parsed.matches.len(), PADDING);
    assert!(parsed.matches.iter().any(|m| m.full_hash == hash.to_string()));
    let json_again = get(bucket_url.clone(), None).await.unwrap();
    assert_eq!(json_again.bytes().await.unwrap(), json_bytes);

    // Any other version, list or text: an error, never stored.
    let newer = get(
        format!("{base}{}", routes::list_hashes("alpha", version + 1, prefix)),
        None,
    )
    .await
    .unwrap();
    assert_eq!(newer.status(), 503);
    assert_eq!(newer.headers()["retry-after"], "1");
    assert_eq!(newer.headers()["cache-control"], "no-store");
    assert_eq!(code(newer).await, "behind");
    let nothing = get(
        format!("{base}{}", routes::list_hashes("pending", 1, prefix)),
        None,
    )
    .await
    .unwrap();
    assert_eq!(nothing.status(), 503);
    assert_eq!(nothing.headers()["retry-after"], "1");
    assert_eq!(nothing.headers()["cache-control"], "no-store");
    assert_eq!(code(nothing).await, "behind");
    let older = get(
        format!("{base}{}", routes::list_hashes("alpha", version - 1, prefix)),
        None,
    )
    .await
    .unwrap();
    assert_eq!(older.status(), 404);
    assert_eq!(older.headers()["cache-control"], "no-store");
    assert!(older.headers().get("retry-after").is_none());
    assert_eq!(code(older).await, "version_gone");
    for (path, status, expected) in [
        (
            format!("/v1/lists/nope/hashes/{version}/{prefix}"),
            404,
            "unknown_list",
        ),
        (
            format!("/v1/lists/alpha/hashes/0{version}/{prefix}"),
            400,
            "bad_version",
        ),
        (
            format!("/v1/lists/alpha/hashes/+{version}/{prefix}"),
            400,
            "bad_version",
        ),
        (format!("/v1/lists/alpha/hashes/abc/{prefix}"), 400, "bad_version"),
        (format!("/v1/lists/alpha/hashes/{version}/ABC"), 400, "bad_prefix"),
        (format!("/v1/lists/alpha/hashes/{version}/a"), 400, "bad_prefix"),
        (
            format!("/v1/lists/alpha/hashes/{version}/abcdef012"),
            400,
            "bad_prefix",
        ),
        (format!("/v1/lists/alpha/hashes/{version}/"), 404, "not_found"),
    ] {
        let r = get(format!("{base}{path}"), None).await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        assert_eq!(r.headers()["cache-control"], "no-store", "{path}");
        assert_eq!(code(r).await, expected, "{path}");
    }

    // After a rebuild the old version's buckets are gone; the new ones are
    // advertised and served.
    server.publisher.build_list(0).await.result.unwrap();
    let rebuilt = served(&server, "alpha").unwrap();
    assert!(rebuilt > version);
    let gone = get(bucket_url, None).await.unwrap();
    assert_eq!(gone.status(), 404);
    assert_eq!(code(gone).await, "version_gone");
    let latest = client
        .get(format!("{base}{}", routes::latest_snapshot("alpha")))
        .send()
        .await
        .unwrap();
    let advertised = routes::list_hashes_base("alpha", rebuilt);
    assert_eq!(latest.headers()[HASHES_HEADER], advertised.as_str());
    let fresh = get(format!("{base}{advertised}{prefix}"), Some(FULL_HASHES_ACCEPT))
        .await
        .unwrap();
    assert_eq!(fresh.status(), 200);
    server.stop().await;
}
