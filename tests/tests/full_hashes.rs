//! Full-hash answers in binary: content negotiation on both routes, the
//! caching and compression headers, the bytes on the wire, and agents that
//! read either encoding (a JSON-only publisher keeps working).

use std::io::Read as _;
use std::time::Duration;

use blocksieve_format::api::{
    ErrorResponse, FULL_HASHES_ACCEPT, FULL_HASHES_CONTENT_TYPE, FullHashAnswer, FullHashResponse,
    FullHashSearchRequest, FullHashSearchResponse,
};
use blocksieve_format::{FullHash, RequestPrefix};
use blocksieve_publisher::SourceFormat;
use blocksieve_publisher::internal::sources::url_expression;
use blocksieve_tests::fake::FakePublisher;
use blocksieve_tests::fault::FaultProxy;
use blocksieve_tests::{RunningPublisher, config, fixture_lines, fixture_source};

/// Every bucket is padded to this many full hashes, as on a large list.
const PADDING: usize = 100;

/// A publisher over the fixture URLs with 12-bit request prefixes and
/// buckets padded to [`PADDING`].
async fn publisher(dir: &std::path::Path) -> RunningPublisher {
    let mut cfg = config(
        dir,
        "phishing",
        vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
    );
    cfg.lists[0].request_prefix_bits = Some(12);
    cfg.padding = PADDING;
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    server
}

/// A listed URL and the full hash of its listed expression.
fn listed() -> (String, FullHash) {
    let url = fixture_lines("phishing-urls.txt").swap_remove(0);
    let expression = url_expression(url.as_bytes()).unwrap();
    (url, FullHash::of(expression.as_bytes()))
}

/// One hit and four noise prefixes, as an agent sends them.
fn search_body(hit: RequestPrefix) -> String {
    let mut prefixes = vec!["3f0".to_owned(), "b21".to_owned(), hit.to_string()];
    prefixes.extend(["07c".to_owned(), "e5d".to_owned()]);
    serde_json::to_string(&FullHashSearchRequest {
        prefixes,
        ..FullHashSearchRequest::default()
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_hash_routes_answer_binary_to_who_asks_and_say_how_to_cache() {
    let dir = tempfile::tempdir().unwrap();
    let server = publisher(dir.path()).await;
    let base = server.base_url();
    let client = reqwest::Client::builder().no_gzip().build().unwrap();
    let (_, hash) = listed();
    let prefix = RequestPrefix::of(&hash, 12);

    // GET: binary to an Accept naming it, JSON otherwise; both cacheable.
    let get = |accept: Option<&'static str>| {
        let mut request = client.get(format!("{base}/v1/hashes/{prefix}"));
        if let Some(accept) = accept {
            request = request.header("accept", accept);
        }
        request.send()
    };
    let binary = get(Some(FULL_HASHES_ACCEPT)).await.unwrap();
    assert_eq!(binary.status(), 200);
    assert_eq!(binary.headers()["content-type"], FULL_HASHES_CONTENT_TYPE);
    assert_eq!(binary.headers()["vary"], "accept");
    assert_eq!(binary.headers()["cache-control"], "public, max-age=300");
    let bytes = binary.bytes().await.unwrap();
    let answer = FullHashAnswer::decode(&bytes).unwrap();
    assert_eq!(answer.cache_duration_s, 300);
    assert_eq!(answer.results.len(), 1);
    let matches = &answer.results[0].matches;
    assert_eq!(matches.len(), PADDING);
    assert!(
        matches
            .iter()
            .any(|m| m.full_hash == hash && m.list == "phishing")
    );
    // 32 bytes a full hash at 12 bits, and a few bytes of header.
    assert!(
        bytes.len() <= 40 + 32 * matches.len(),
        "{} bytes for {} full hashes",
        bytes.len(),
        matches.len()
    );

    for accept in [None, Some("application/json"), Some("*/*")] {
        let json = get(accept).await.unwrap();
        assert_eq!(json.status(), 200);
        assert!(
            json.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        assert_eq!(json.headers()["vary"], "accept");
        assert_eq!(json.headers()["cache-control"], "public, max-age=300");
        let json: FullHashResponse = json.json().await.unwrap();
        assert_eq!(json.prefix, prefix.to_string());
        assert_eq!(json.matches.len(), PADDING);
        assert!(json.matches.iter().any(|m| m.full_hash == hash.to_string()));
    }

    // Errors are never cached.
    let bad = client.get(format!("{base}/v1/hashes/zz")).send().await.unwrap();
    assert_eq!(bad.status(), 400);
    assert_eq!(bad.headers()["cache-control"], "no-store");
    let missing = client
        .get(format!("{base}/v1/lists/nope/snapshot"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(missing.headers()["cache-control"], "no-store");
    assert!(missing.json::<ErrorResponse>().await.is_ok());

    // Snapshots are zstd already: never gzip-compressed.
    let snapshot = client
        .get(format!("{base}/v1/lists/phishing/snapshot"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(snapshot.status(), 200);
    assert!(snapshot.headers().get("content-encoding").is_none());
    server.stop().await;
}

/// The bytes on the wire of a search for one hit and four noise prefixes:
/// JSON, JSON with gzip, binary (printed, for BENCHMARKS.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_search_answer_is_a_third_of_the_json_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let server = publisher(dir.path()).await;
    let url = format!("{}/v1/hashes:search", server.base_url());
    // The bytes as sent: no transparent decompression.
    let client = reqwest::Client::builder().no_gzip().build().unwrap();
    let (_, hash) = listed();
    let body = search_body(RequestPrefix::of(&hash, 12));
    let search = |accept: &'static str, encoding: Option<&'static str>| {
        let mut request = client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.clone());
        if let Some(encoding) = encoding {
            request = request.header("accept-encoding", encoding);
        }
        request.send()
    };

    let json = search("application/json", None).await.unwrap();
    assert_eq!(json.headers()["vary"], "accept");
    assert!(json.headers().get("content-encoding").is_none());
    let json = json.bytes().await.unwrap();
    let from_json: FullHashSearchResponse = serde_json::from_slice(&json).unwrap();

    let gzip = search("application/json", Some("gzip")).await.unwrap();
    assert_eq!(gzip.headers()["content-encoding"], "gzip");
    let gzip = gzip.bytes().await.unwrap();
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&gzip[..])
        .read_to_end(&mut unzipped)
        .unwrap();
    let from_gzip: FullHashSearchResponse = serde_json::from_slice(&unzipped).unwrap();

    // Binary, even to a client that also accepts gzip: it would not shrink.
    let binary = search(FULL_HASHES_ACCEPT, Some("gzip")).await.unwrap();
    assert_eq!(binary.headers()["content-type"], FULL_HASHES_CONTENT_TYPE);
    assert!(binary.headers().get("content-encoding").is_none());
    let binary = binary.bytes().await.unwrap();
    let from_binary = FullHashSearchResponse::from(FullHashAnswer::decode(&binary).unwrap());

    // The same answer (padding is random; its count is not).
    for answer in [&from_json, &from_gzip, &from_binary] {
        let prefixes: Vec<&str> = answer.results.iter().map(|r| r.prefix.as_str()).collect();
        assert_eq!(prefixes, ["3f0", "b21", &hash.to_string()[..3], "07c", "e5d"]);
        assert!(answer.results.iter().all(|r| r.matches.len() == PADDING));
        assert!(
            answer.results[2]
                .matches
                .iter()
                .any(|m| m.full_hash == hash.to_string())
        );
    }
    let matches = 5 * PADDING;
    println!(
        "1 hit + 4 noise, {matches} full hashes: JSON {} bytes, JSON+gzip {} bytes, binary {} bytes",
        json.len(),
        gzip.len(),
        binary.len()
    );
    assert!(binary.len() <= 64 + 33 * matches, "{} bytes", binary.len());
    assert!(
        binary.len() * 3 <= json.len(),
        "binary {} JSON {}",
        binary.len(),
        json.len()
    );
    assert!(
        binary.len() < gzip.len(),
        "binary {} gzip {}",
        binary.len(),
        gzip.len()
    );
    assert!(gzip.len() < json.len());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_negotiate_the_binary_answer_with_the_same_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let server = publisher(dir.path()).await;
    let proxy = FaultProxy::start(&server.base_url()).await;
    let agent = blocksieve_agent::Agent::builder(proxy.base_url())
        .list("phishing")
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    assert!(agent.update().await.unwrap().is_complete());
    let urls = fixture_lines("phishing-urls.txt");
    for url in urls.iter().take(20) {
        let verdict = agent.check_url(url).await.unwrap();
        assert!(verdict.is_unsafe(), "listed URL {url} was {verdict:?}");
    }
    let safe = agent
        .check_url("http://blocksieve.example/not/listed")
        .await
        .unwrap();
    assert!(!safe.is_unsafe(), "{safe:?}");

    let answers = proxy.search_answers();
    assert!(!answers.is_empty());
    for (content_type, bytes) in &answers {
        assert_eq!(content_type, FULL_HASHES_CONTENT_TYPE);
        // Each answer: the agent's prefixes with their padded buckets, at
        // most 33 bytes a full hash.
        assert!(*bytes <= 64 + 33 * PADDING * 8, "{bytes} bytes");
    }
    server.stop().await;
}

#[tokio::test]
async fn agents_read_json_from_a_publisher_without_the_binary_answer() {
    for binary in [false, true] {
        let fake = FakePublisher::start().await;
        fake.set_binary_answers(binary);
        let snap = blocksieve_tests::snapshot::Snap::new("malware", 1, &["evil.example/"]);
        fake.serve_snapshot(&snap);
        fake.list_expressions("malware", &["evil.example/"]);
        let agent = fake.agent(&["malware"]);
        assert!(agent.update().await.unwrap().is_complete());
        let verdict = agent.check_url("http://evil.example/").await.unwrap();
        assert!(verdict.is_unsafe(), "binary {binary}: {verdict:?}");
        let seen = fake.searches();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].accept.as_deref(), Some(FULL_HASHES_ACCEPT));
    }
}

/// A batch check of many hits on buckets padded to 10,000 (the most
/// `padding` allows): 150 URLs' prefixes and the noise in one request
/// would be over 1.5 million full hashes, more than one answer carries
/// (2^20). The publisher refused it with `500` and every URL of the batch
/// was unverified; now it answers `413 answer_too_large` before building
/// the answer and the agent asks for half the prefixes at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_answer_is_too_large_for_one_response_is_asked_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(
        dir.path(),
        "phishing",
        vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
    );
    // 32-bit prefixes: each listed URL its own prefix.
    cfg.lists[0].request_prefix_bits = Some(32);
    cfg.padding = 10_000;
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let agent = |noise: usize| {
        blocksieve_agent::Agent::builder(server.base_url())
            .list("phishing")
            .trusted_key(server.public_key())
            .noise_prefixes(noise)
            .build()
            .unwrap()
    };
    let batch = agent(4);
    assert!(batch.update().await.unwrap().is_complete());
    let urls: Vec<String> = fixture_lines("phishing-urls.txt").into_iter().take(150).collect();
    let verdicts = batch.check_urls(&urls).await;
    for (url, verdict) in urls.iter().zip(&verdicts) {
        let verdict = verdict.as_ref().unwrap();
        assert!(verdict.is_unsafe(), "listed URL {url} was {verdict:?}");
    }
    let stats = batch.stats();
    assert_eq!(stats.full_hash_failures, 0, "{stats:?}");
    // Refused once (the prefixes and 4 noise, about 1.5 million full
    // hashes), then answered in two halves of the same prefixes.
    assert_eq!(stats.full_hash_requests, 3, "{stats:?}");

    // One URL with the most noise an agent sends (64) at the largest
    // padding: 650,000 full hashes, one answer.
    let single = agent(64);
    assert!(single.update().await.unwrap().is_complete());
    let verdict = single.check_url(&urls[0]).await.unwrap();
    assert!(verdict.is_unsafe(), "{verdict:?}");
    assert_eq!(single.stats().full_hash_requests, 1);

    // The refusal itself, as a client sees it.
    let prefixes: Vec<String> = (0..120u32)
        .map(|i| format!("{:08x}", i.wrapping_mul(0x9E37_79B9)))
        .collect();
    let body = serde_json::to_string(&FullHashSearchRequest {
        prefixes,
        ..FullHashSearchRequest::default()
    })
    .unwrap();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/hashes:search", server.base_url()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let error: ErrorResponse = response.json().await.unwrap();
    assert_eq!(error.error.code, "answer_too_large");
    server.stop().await;
}
