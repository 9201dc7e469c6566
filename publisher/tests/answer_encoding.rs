//! The full-hash routes under odd requests and answers the binary encoding
//! cannot carry: never a 5xx other than the intended 503s.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use axum::body::Body;
use axum::http::{Method, Request};
use blocksieve_publisher::{SourceConfig, SourceFormat};
use tower::ServiceExt as _;

async fn send(
    api: &blocksieve_publisher::internal::server::Api,
    req: Request<Body>,
) -> (u16, axum::http::HeaderMap, Vec<u8>) {
    let r = api.clone().oneshot(req).await.unwrap_or_else(|e| match e {});
    let (p, b) = r.into_parts();
    (
        p.status.as_u16(),
        p.headers,
        axum::body::to_bytes(b, 1 << 26).await.unwrap().to_vec(),
    )
}

fn feed(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let path = dir.join("feed.txt");
    let lines: String = (0..n)
        .map(|i| format!("http://host-{i}.example/p/{i}\n"))
        .collect();
    std::fs::write(&path, lines).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_requests_get_no_5xx_other_than_503() {
    let dir = tempfile::tempdir().unwrap();
    let path = feed(dir.path(), 3000);
    let cfg = blocksieve_tests::config(
        dir.path(),
        "phishing",
        vec![SourceConfig::file(path, SourceFormat::Urls)],
    );
    let publisher = blocksieve_publisher::Publisher::open(cfg).unwrap();
    for o in publisher.build_all().await {
        assert!(o.result.is_ok(), "{:?}", o.result);
    }
    let api = publisher.router();
    let (_, h, _) = send(
        &api,
        Request::get("/v1/lists/phishing/snapshot")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    let etag = h["etag"].to_str().unwrap().to_owned();
    let id = etag.trim_matches('"').to_owned();
    let version = id.split('-').next().unwrap().to_owned();
    let max = u64::MAX.to_string();
    let paths = vec![
        format!("/v1/lists/phishing/updates/{max}"),
        format!("/v1/lists/phishing/updates/18446744073709551616"),
        format!("/v1/lists/phishing/snapshots/{max}"),
        format!("/v1/lists/phishing/hashes/{max}/00"),
        format!("/v1/lists/phishing/hashes/{version}-/00"),
        format!("/v1/lists/phishing/hashes/{id}/0"),
        format!("/v1/lists/phishing/hashes/{id}/000000000"),
        format!("/v1/lists/phishing/hashes/{id}/00"),
        format!("/v1/lists/phishing/hashes/{id}/0%30"),
        format!("/v1/lists/phishing/hashes/{id}/ff"),
        format!("/v1/lists/phishing/hashes/{id}/ffffffff"),
        format!("/v1/lists/phishing/updates/{version}"),
        format!("/v1/lists/phishing/updates/0"),
        format!("/v1/hashes/ff"),
        format!("/v1/hashes/00"),
        format!("/v1/hashes/%ff"),
        format!("/v1/lists/%ff/snapshot"),
        format!("/v1/lists/phishing/history?limit=99999999999999999999"),
        format!("/v1/lists/phishing/history?limit=-1"),
        format!("/v1/lists/phishing/history?limit=0"),
        format!("/v1/lists?x=1"),
        format!("/v1/lists/phishing/hashes/{id}/00?x"),
    ];
    let mut bad = Vec::new();
    for p in &paths {
        for accept in ["application/json", blocksieve_format::api::FULL_HASHES_ACCEPT] {
            for m in [Method::GET, Method::HEAD] {
                let req = Request::builder()
                    .method(m.clone())
                    .uri(p.as_str())
                    .header("accept", accept)
                    .body(Body::empty())
                    .unwrap();
                let (s, h, b) = send(&api, req).await;
                println!(
                    "{m} {p} [{accept}] -> {s} {:?} {}",
                    h.get("cache-control"),
                    String::from_utf8_lossy(&b[..b.len().min(200)])
                );
                if s >= 500 && s != 503 {
                    bad.push(format!("{m} {p} -> {s}"));
                }
            }
        }
    }
    // POST search oddities
    let bodies: Vec<(&str, String)> = vec![
        (
            "application/json",
            r#"{"prefixes":["00"],"min_versions":{"phishing":18446744073709551615}}"#.to_owned(),
        ),
        (
            "application/json",
            r#"{"prefixes":["00"],"min_versions":{"phishing":18446744073709551616}}"#.to_owned(),
        ),
        (
            "application/json",
            r#"{"prefixes":["00"],"snapshots":{"phishing":"1-0000000000000000"}}"#.to_owned(),
        ),
        (
            "application/json",
            r#"{"prefixes":["00"],"snapshots":{"nope":"1-0000000000000000"}}"#.to_owned(),
        ),
        (
            "application/json",
            r#"{"prefixes":["00"],"min_versions":{}}"#.to_owned(),
        ),
        ("application/json", r#"{"prefixes":[]}"#.to_owned()),
        ("application/json", r#"{"prefixes":"00"}"#.to_owned()),
        ("application/json", r#"[]"#.to_owned()),
        ("application/json", "".to_owned()),
        (
            "application/json; charset=utf-8",
            r#"{"prefixes":["00"]}"#.to_owned(),
        ),
        ("text/plain", r#"{"prefixes":["00"]}"#.to_owned()),
        (
            "application/json",
            format!(r#"{{"prefixes":[{}]}}"#, vec!["\"ff\""; 1000].join(",")),
        ),
    ];
    for (ct, body) in &bodies {
        for accept in ["application/json", blocksieve_format::api::FULL_HASHES_ACCEPT] {
            let req = Request::post("/v1/hashes:search")
                .header("content-type", *ct)
                .header("accept", accept)
                .body(Body::from(body.clone()))
                .unwrap();
            let (s, _h, b) = send(&api, req).await;
            println!(
                "POST {ct} {} [{accept}] -> {s} {}",
                &body[..body.len().min(80)],
                String::from_utf8_lossy(&b[..b.len().min(200)])
            );
            if s >= 500 && s != 503 {
                bad.push(format!("POST {} -> {s}", &body[..body.len().min(80)]));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// `max_prefixes_per_request` may be raised to 100,000, but one binary
/// full-hash answer carries at most 1,000 prefixes: a search of 1,001
/// prefixes the server accepted was answered `500 internal` ("cannot
/// encode the full-hash answer") to a client asking for the binary
/// answer, as the agent does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_of_more_prefixes_than_a_binary_answer_carries_is_answered_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = feed(dir.path(), 3000);
    let mut cfg = blocksieve_tests::config(
        dir.path(),
        "phishing",
        vec![SourceConfig::file(path, SourceFormat::Urls)],
    );
    cfg.max_prefixes_per_request = 2000;
    let publisher = blocksieve_publisher::Publisher::open(cfg).unwrap();
    for o in publisher.build_all().await {
        assert!(o.result.is_ok(), "{:?}", o.result);
    }
    let api = publisher.router();
    let prefixes: Vec<String> = (0..1001u32)
        .map(|i| format!("\"{:08x}\"", i.wrapping_mul(0x9e37_79b9)))
        .collect();
    let body = format!(r#"{{"prefixes":[{}]}}"#, prefixes.join(","));
    let req = Request::post("/v1/hashes:search")
        .header("content-type", "application/json")
        .header("accept", blocksieve_format::api::FULL_HASHES_ACCEPT)
        .body(Body::from(body))
        .unwrap();
    let (status, headers, bytes) = send(&api, req).await;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["content-type"], "application/json");
    let a: blocksieve_format::api::FullHashSearchResponse = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(a.results.len(), 1001, "one result per prefix");
}

/// A publisher serving more than 64 lists (nothing caps how many it
/// serves) answered `500 internal` to a binary `GET /v1/hashes/{prefix}`
/// whose bucket holds full hashes of more than 64 of them: one binary
/// answer names at most 64 lists. The JSON answer has no such limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_over_more_lists_than_a_binary_answer_names_is_answered_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = blocksieve_tests::config(dir.path(), "l0", vec![]);
    cfg.lists.clear();
    for l in 0..65 {
        let path = dir.path().join(format!("feed{l}.txt"));
        let lines: String = (0..2000)
            .map(|i| format!("http://l{l}-host-{i}.example/\n"))
            .collect();
        std::fs::write(&path, lines).unwrap();
        cfg.lists.push(blocksieve_publisher::ListConfig::new(
            format!("l{l}"),
            vec![SourceConfig::file(path, SourceFormat::Urls)],
        ));
    }
    let publisher = blocksieve_publisher::Publisher::open(cfg).unwrap();
    for o in publisher.build_all().await {
        assert!(o.result.is_ok(), "{:?}", o.result);
    }
    let api = publisher.router();
    for prefix in ["00", "7f", "ff"] {
        let req = Request::get(format!("/v1/hashes/{prefix}"))
            .header("accept", blocksieve_format::api::FULL_HASHES_ACCEPT)
            .body(Body::empty())
            .unwrap();
        let (status, headers, bytes) = send(&api, req).await;
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
        assert_eq!(status, 200, "{prefix}: {text}");
        assert_eq!(headers["content-type"], "application/json", "{prefix}");
    }
}
