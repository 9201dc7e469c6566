//! Full-hash buckets at immutable per-version URLs
//! (`GET /v1/lists/{name}/hashes/{version}/{prefix}`): what the publisher
//! answers for each version asked, the cache headers, the advertisement on
//! snapshot responses; and agents that confirm hits there when every
//! subscribed list advertises the version they hold, falling back to
//! `POST /v1/hashes:search` otherwise, never to "safe".

use std::time::Duration;

use blocksieve_format::api::{
    ErrorResponse, FULL_HASHES_ACCEPT, FULL_HASHES_CONTENT_TYPE, FullHashAnswer, FullHashResponse,
    HASHES_HEADER, routes, snapshot_id,
};
use blocksieve_format::{FullHash, RequestPrefix};
use blocksieve_publisher::internal::sources::url_expression;
use blocksieve_publisher::{ListConfig, SourceConfig, SourceFormat};
use blocksieve_tests::{RunningPublisher, config, fixture_lines};

/// Buckets are padded to this many full hashes.
const PADDING: usize = 16;

/// The version list `name` of `server` serves, if any.
fn served(server: &RunningPublisher, name: &str) -> Option<u64> {
    let state = server.publisher.state();
    let slot = state.list(name)?;
    slot.current.load().as_ref().map(|p| p.header.version)
}

/// The id (version and body hash) of the snapshot list `name` of `server`
/// serves.
fn served_id(server: &RunningPublisher, name: &str) -> String {
    let state = server.publisher.state();
    let slot = state.list(name).unwrap();
    let current = slot.current.load();
    let header = &current.as_ref().unwrap().header;
    snapshot_id(header.version, &header.body_sha256)
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
    let feed = dir.path().join("feed.txt");
    std::fs::copy(blocksieve_tests::fixtures().join("phishing-urls.txt"), &feed).unwrap();
    let mut cfg = config(
        dir.path(),
        "alpha",
        vec![SourceConfig::file(&feed, SourceFormat::Urls)],
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
    // Under the snapshot's id (its version and body hash), which is also
    // the text of its ETag: a URL names one snapshot's content.
    let id = served_id(&server, "alpha");
    let advertised = routes::list_hashes_base("alpha", &id);
    assert_eq!(advertised, format!("/v1/lists/alpha/hashes/{id}/"));
    assert!(id.starts_with(&format!("{version}-")), "{id}");
    assert_eq!(latest.headers()[HASHES_HEADER], advertised.as_str());
    let etag = latest.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(etag, format!("\"{id}\""));
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
    // The version alone names the same bucket (clients that do not send
    // the id).
    let by_version = get(
        format!("{base}{}", routes::list_hashes("alpha", version, prefix)),
        Some(FULL_HASHES_ACCEPT),
    )
    .await
    .unwrap();
    assert_eq!(by_version.status(), 200);
    assert_eq!(by_version.bytes().await.unwrap(), bytes);
    // Another snapshot of the same version (another publisher's build of
    // the same second): refused, never answered from this one's content.
    let other = format!("{version}-{}", "0".repeat(16));
    assert_ne!(other, id);
    let refused = get(
        format!("{base}{}", routes::list_hashes("alpha", &other, prefix)),
        None,
    )
    .await
    .unwrap();
    assert_eq!(refused.status(), 404);
    assert_eq!(refused.headers()["cache-control"], "no-store");
    assert_eq!(code(refused).await, "other_snapshot");

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
        (
            format!("/v1/lists/alpha/hashes/{version}-abc/{prefix}"),
            400,
            "bad_version",
        ),
        (
            format!("/v1/lists/alpha/hashes/{}/{prefix}", id.to_uppercase()),
            400,
            "bad_version",
        ),
        (
            format!("/v1/lists/alpha/hashes/{id}-0/{prefix}"),
            400,
            "bad_version",
        ),
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
    // An unchanged list publishes no new version: the feed gains a line.
    std::io::Write::write_all(
        &mut std::fs::OpenOptions::new().append(true).open(&feed).unwrap(),
        b"\nhttp://rebuilt.example/new\n",
    )
    .unwrap();
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
    let advertised = routes::list_hashes_base("alpha", served_id(&server, "alpha"));
    assert_eq!(latest.headers()[HASHES_HEADER], advertised.as_str());
    let fresh = get(format!("{base}{advertised}{prefix}"), Some(FULL_HASHES_ACCEPT))
        .await
        .unwrap();
    assert_eq!(fresh.status(), 200);
    server.stop().await;
}

/// How many requests `server` answered on `route` (a route template), by
/// its metrics.
async fn route_requests(server: &RunningPublisher, route: &str) -> u64 {
    let text = reqwest::get(format!("{}/metrics", server.base_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let label = format!("route=\"{route}\"");
    text.lines()
        .filter(|l| l.starts_with("blocksieve_http_requests_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// `n` URLs on host `host`, one a line.
fn urls(host: &str, n: usize) -> String {
    (0..n).map(|i| format!("http://{host}/page/{i}\n")).collect()
}

/// The full hash of a URL's listed expression.
fn hash_of(url: &str) -> FullHash {
    FullHash::of(url_expression(url.as_bytes()).unwrap().as_bytes())
}

/// A list `name` over the URL file `path`, with `bits`-bit request prefixes.
fn file_list(name: &str, path: &std::path::Path, bits: u8) -> ListConfig {
    let mut list = ListConfig::new(name, vec![SourceConfig::file(path, SourceFormat::Urls)]);
    list.request_prefix_bits = Some(bits);
    list
}

/// A real agent confirms a listed URL at the immutable bucket URLs of the
/// version it holds, without a single `POST`; a safe URL stays safe. After
/// a rebuild the agent still holds the old version: its bucket is
/// `version_gone`, and the agent asks by `POST` (with `min_versions`) and
/// gets `unsafe`, not "no match". Once it downloads the new version it
/// follows the new version's URLs (no more fallbacks, no more `POST`s) and
/// finds a URL only the new version lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_confirms_at_immutable_bucket_urls_and_follows_new_versions() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    std::fs::write(&feed, urls("listed.example", 40)).unwrap();
    let mut cfg = config(dir.path(), "unused", vec![]);
    cfg.lists = vec![file_list("phishing", &feed, 12)];
    cfg.padding = 8;
    let server = RunningPublisher::start(cfg).await;
    let first_version = wait_served(&server, "phishing").await;
    let agent = blocksieve_agent::Agent::builder(server.base_url())
        .list("phishing")
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    assert!(agent.update().await.unwrap().is_complete());

    let listed = "http://listed.example/page/0";
    assert!(agent.check_url(listed).await.unwrap().is_unsafe());
    let safe = "https://unlisted.example/page/0";
    assert!(!agent.check_url(safe).await.unwrap().is_unsafe());
    let stats = agent.stats();
    assert!(stats.immutable_bucket_requests > 0, "{stats:?}");
    assert_eq!(
        stats.full_hash_requests, stats.immutable_bucket_requests,
        "{stats:?}"
    );
    assert_eq!(stats.immutable_bucket_fallbacks, 0, "{stats:?}");
    assert_eq!(route_requests(&server, routes::SEARCH).await, 0);
    assert!(route_requests(&server, routes::LIST_HASHES).await > 0);

    // A rebuild the agent has not downloaded yet: its version's buckets are
    // gone, and a listed URL whose bucket is not cached is confirmed by POST.
    let new_url = "http://newly-listed.example/page/0";
    let mut text = urls("listed.example", 40);
    text.push_str(new_url);
    text.push('\n');
    std::fs::write(&feed, text).unwrap();
    server.publisher.build_list(0).await.result.unwrap();
    let second_version = served(&server, "phishing").unwrap();
    assert!(second_version > first_version);
    let cached = RequestPrefix::of(&hash_of(listed), 12);
    let other = (1..40)
        .map(|i| format!("http://listed.example/page/{i}"))
        .find(|u| RequestPrefix::of(&hash_of(u), 12) != cached)
        .unwrap();
    assert!(agent.check_url(&other).await.unwrap().is_unsafe());
    let after_gone = agent.stats();
    assert_eq!(after_gone.immutable_bucket_fallbacks, 1, "{after_gone:?}");
    assert_eq!(route_requests(&server, routes::SEARCH).await, 1);

    // The new version, downloaded: its own buckets, no POST.
    assert!(agent.update().await.unwrap().is_complete());
    assert!(agent.check_url(new_url).await.unwrap().is_unsafe());
    assert!(agent.check_url(listed).await.unwrap().is_unsafe());
    let stats = agent.stats();
    assert!(
        stats.immutable_bucket_requests > after_gone.immutable_bucket_requests,
        "{stats:?}"
    );
    assert_eq!(stats.immutable_bucket_fallbacks, 1, "{stats:?}");
    assert_eq!(route_requests(&server, routes::SEARCH).await, 1);
    server.stop().await;
}

/// A publisher whose list `phishing` (`min_anonymity = 1`,
/// `max_bucket_entries = 32`) holds 100 URLs at 8-bit request prefixes
/// until [`Growing::grow`] makes it 20,001 at 12 bits, about 78 full
/// hashes under an 8-bit prefix: over the 2 × 32 the routes answer at a
/// length shorter than the list advertises.
struct Growing {
    _dir: tempfile::TempDir,
    feed: std::path::PathBuf,
    server: RunningPublisher,
    first: u64,
}

/// The URL only the grown list holds.
const GROWN_URL: &str = "http://newly-listed.example/page";

impl Growing {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let feed = dir.path().join("feed.txt");
        std::fs::write(&feed, urls("listed.example", 100)).unwrap();
        let mut cfg = config(dir.path(), "unused", vec![]);
        let mut list = ListConfig::new("phishing", vec![SourceConfig::file(&feed, SourceFormat::Urls)]);
        list.min_anonymity = 1;
        cfg.lists = vec![list];
        cfg.max_bucket_entries = 32;
        let server = RunningPublisher::start(cfg).await;
        let first = wait_served(&server, "phishing").await;
        Self {
            _dir: dir,
            feed,
            server,
            first,
        }
    }

    /// Grows the list and builds it: the new version.
    async fn grow(&self) -> u64 {
        std::fs::write(
            &self.feed,
            format!("{}{GROWN_URL}\n", urls("listed.example", 20_000)),
        )
        .unwrap();
        self.server.publisher.build_list(0).await.result.unwrap();
        let second = served(&self.server, "phishing").unwrap();
        assert!(second > self.first);
        second
    }
}

/// A list that grows more than fourfold in one build lengthens its request
/// prefixes past what the full-hash routes still answer at the old length
/// (up to twice `max_bucket_entries`): here 100 URLs at 8 bits become
/// 20,001 at 12, about 78 full hashes under an 8-bit prefix, over 2 × 32.
/// An agent still on the old snapshot asks at 8 bits (by `POST`: the old
/// version's buckets are gone) and is refused, `400 prefix_too_short`.
/// Before, the hit stayed `unverified` (let through by default) and every
/// confirmation paused, until the agent's next scheduled update; now the
/// check updates the list and confirms at the new length, and nothing is
/// paused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_refused_as_prefix_too_short_updates_and_confirms_at_the_new_length() {
    let growing = Growing::start().await;
    let server = &growing.server;
    let agent = blocksieve_agent::Agent::builder(server.base_url())
        .list("phishing")
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    assert!(agent.update().await.unwrap().is_complete());
    let listed = "http://listed.example/page/7";
    assert_eq!(
        agent.lookup_local(listed).unwrap().request_prefixes()[0].bits(),
        8
    );

    let second = growing.grow().await;
    let new_url = GROWN_URL;
    let old_length = reqwest::Client::new()
        .post(format!("{}{}", server.base_url(), routes::SEARCH))
        .json(&serde_json::json!({"prefixes": [RequestPrefix::of(&hash_of(listed), 8).to_string()]}))
        .send()
        .await
        .unwrap();
    assert_eq!(old_length.status(), 400);
    assert_eq!(code(old_length).await, "prefix_too_short");

    // Two checks at once, on two 8-bit prefixes: both refused, one update
    // round between them, both confirmed at 12 bits.
    let other = (8..100)
        .map(|i| format!("http://listed.example/page/{i}"))
        .find(|u| RequestPrefix::of(&hash_of(u), 8) != RequestPrefix::of(&hash_of(listed), 8))
        .unwrap();
    let (a, b) = tokio::join!(agent.check_url(listed), agent.check_url(&other));
    for verdict in [a.unwrap(), b.unwrap()] {
        assert!(verdict.is_unsafe(), "{verdict:?}");
    }
    assert_eq!(agent.snapshot_version("phishing"), Some(second));
    assert_eq!(
        agent.lookup_local(listed).unwrap().request_prefixes()[0].bits(),
        12
    );
    let verdict = agent.check_url(new_url).await.unwrap();
    assert!(verdict.is_unsafe(), "{verdict:?}");
    let stats = agent.stats();
    assert!((1..=2).contains(&stats.full_hash_failures), "{stats:?}");
    assert_eq!(stats.unverified, stats.full_hash_failures, "{stats:?}");
    assert_eq!(stats.confirmed_unsafe, 3, "{stats:?}");
    assert_eq!(stats.snapshots_applied, 2, "{stats:?}");
    assert_eq!(agent.status().full_hash_paused_for, None);
    growing.server.stop().await;
}

/// The same refusal from a mirror, the first base URL failing otherwise
/// (`503` to every search): the refusal is what the check acts on (an
/// update), not the first base URL's failure (a backoff that pauses every
/// confirmation). Before, the hit stayed `unverified`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_from_a_mirror_is_acted_on_whatever_the_first_base_url_failed_with() {
    let growing = Growing::start().await;
    let server = &growing.server;
    let proxy = blocksieve_tests::fault::FaultProxy::start(&server.base_url()).await;
    proxy.set_searches(blocksieve_tests::fault::Fault::Status(503));
    let agent = blocksieve_agent::Agent::builder(proxy.base_url())
        .mirror(server.base_url())
        .list("phishing")
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    assert!(agent.update().await.unwrap().is_complete());
    let second = growing.grow().await;
    let verdict = agent.check_url("http://listed.example/page/7").await.unwrap();
    assert!(verdict.is_unsafe(), "{verdict:?}");
    assert_eq!(agent.snapshot_version("phishing"), Some(second));
    growing.server.stop().await;
}

/// Two subscribed lists: the answer cached for a request prefix holds both
/// lists' full hashes. A URL listed only on the second list, whose prefix
/// was fetched (and cached) for a hit on the first, is still unsafe when
/// its check is answered from the cache. An answer made of the first
/// list's bucket alone would have cached "no match" for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_bucket_answer_covers_every_subscribed_list() {
    let dir = tempfile::tempdir().unwrap();
    let on_alpha = "http://alpha-only.example/page";
    let prefix = RequestPrefix::of(&hash_of(on_alpha), 8);
    let on_beta = (0..10_000)
        .map(|i| format!("http://beta-only-{i}.example/page"))
        .find(|u| RequestPrefix::of(&hash_of(u), 8) == prefix)
        .unwrap();
    let (alpha, beta) = (dir.path().join("alpha.txt"), dir.path().join("beta.txt"));
    std::fs::write(
        &alpha,
        format!("{on_alpha}\n{}", urls("alpha-filler.example", 20)),
    )
    .unwrap();
    std::fs::write(&beta, format!("{on_beta}\n{}", urls("beta-filler.example", 20))).unwrap();
    let mut cfg = config(dir.path(), "unused", vec![]);
    cfg.lists = vec![file_list("alpha", &alpha, 8), file_list("beta", &beta, 8)];
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let agent = blocksieve_agent::Agent::builder(server.base_url())
        .lists(["alpha", "beta"])
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    assert!(agent.update().await.unwrap().is_complete());

    let first = agent.check_url(on_alpha).await.unwrap();
    assert!(first.is_unsafe(), "{first:?}");
    let before = agent.stats();
    let second = agent.check_url(&on_beta).await.unwrap();
    match &second {
        blocksieve_agent::Verdict::Unsafe { list, .. } => assert_eq!(list, "beta"),
        other => panic!("{on_beta}, listed on beta, was {other:?}"),
    }
    let after = agent.stats();
    assert!(after.cache_hits > before.cache_hits, "{after:?}");
    assert_eq!(after.full_hash_requests, before.full_hash_requests, "{after:?}");
    assert!(after.immutable_bucket_requests > 0, "{after:?}");
    assert_eq!(
        after.full_hash_requests, after.immutable_bucket_requests,
        "{after:?}"
    );
    assert_eq!(route_requests(&server, routes::SEARCH).await, 0);
    server.stop().await;
}

/// A server behind the version the agent holds (a replica that has not
/// loaded the newest build) answers its bucket `503 behind`; the agent
/// then asks by `POST` with `min_versions`, which that server refuses too:
/// the verdict is unverified, never safe, though the lagging server's data
/// lacks the URL. With a mirror that serves the version, the bucket comes
/// from the mirror and the URL is unsafe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_server_leads_to_post_and_never_to_safe() {
    use blocksieve_tests::fault::FaultProxy;
    let dir = tempfile::tempdir().unwrap();
    let new_url = "http://newly-listed.example/page/0";
    let (old_feed, new_feed) = (dir.path().join("old.txt"), dir.path().join("new.txt"));
    std::fs::write(&old_feed, urls("listed.example", 20)).unwrap();
    std::fs::write(&new_feed, format!("{new_url}\n{}", urls("listed.example", 20))).unwrap();
    // Two publishers with one signing key: the lagging one never saw the
    // new URL, the current one serves a newer version that lists it.
    let key = dir.path().join("signing.key");
    let start = |data: &str, feed: &std::path::Path| {
        let mut cfg = config(&dir.path().join(data), "unused", vec![]);
        cfg.lists = vec![file_list("phishing", feed, 12)];
        cfg.signing_key = Some(key.clone());
        RunningPublisher::start(cfg)
    };
    let lagging = start("lagging", &old_feed).await;
    let lagging_version = wait_served(&lagging, "phishing").await;
    // Versions are Unix seconds: the current server builds a second later
    // (a rebuild of an unchanged feed would publish no newer version).
    while std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        <= lagging_version
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let current = start("current", &new_feed).await;
    let current_version = wait_served(&current, "phishing").await;
    assert!(current_version > lagging_version);
    let proxy = FaultProxy::start(&current.base_url()).await;
    proxy.relay_bucket_advertisement();
    let alone = blocksieve_agent::Agent::builder(proxy.base_url())
        .list("phishing")
        .trusted_key(current.public_key())
        .build()
        .unwrap();
    let with_mirror = blocksieve_agent::Agent::builder(proxy.base_url())
        .mirror(current.base_url())
        .list("phishing")
        .trusted_key(current.public_key())
        .build()
        .unwrap();
    for agent in [&alone, &with_mirror] {
        assert!(agent.update().await.unwrap().is_complete());
        assert_eq!(agent.status().lists[0].version, Some(current_version));
    }
    proxy.set_upstream(&lagging.base_url());

    let verdict = alone.check_url(new_url).await.unwrap();
    assert!(
        matches!(verdict, blocksieve_agent::Verdict::Unverified { .. }),
        "{new_url} from a lagging server: {verdict:?}"
    );
    let stats = alone.stats();
    assert_eq!(stats.immutable_bucket_fallbacks, 1, "{stats:?}");
    assert_eq!(stats.immutable_bucket_requests, 0, "{stats:?}");
    assert_eq!(stats.full_hash_failures, 1, "{stats:?}");
    assert!(route_requests(&lagging, routes::LIST_HASHES).await > 0);
    assert_eq!(route_requests(&lagging, routes::SEARCH).await, 1);

    let verdict = with_mirror.check_url(new_url).await.unwrap();
    assert!(
        verdict.is_unsafe(),
        "{new_url} with a current mirror: {verdict:?}"
    );
    let stats = with_mirror.stats();
    assert_eq!(stats.immutable_bucket_requests, 1, "{stats:?}");
    assert_eq!(stats.immutable_bucket_fallbacks, 0, "{stats:?}");
    assert_eq!(route_requests(&current, routes::SEARCH).await, 0);
    lagging.stop().await;
    current.stop().await;
}

/// Two publishers signing with one key (a publisher and its mirror) whose
/// builds start in the same second publish the same version number, each
/// with what it fetched: here the mirror's feed lacks a URL the agent's
/// snapshot lists. Its full-hash requests then reach the mirror (a load
/// balancer, or the first base URL down). Before, the mirror answered the
/// bucket of "version V" and the search with `min_versions` V from its own
/// content, and the listed URL came back **safe** (both paths). The
/// requests now name the snapshot by its id (version and body hash): the
/// mirror refuses both (`404 other_snapshot`, `503 other_snapshot`), and
/// the verdict is unverified; back at the first publisher it is unsafe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_snapshot_of_the_same_version_never_answers_for_the_agents() {
    use blocksieve_tests::fault::FaultProxy;
    let dir = tempfile::tempdir().unwrap();
    let new_url = "http://newly-listed.example/page/0";
    let (old_feed, new_feed) = (dir.path().join("old.txt"), dir.path().join("new.txt"));
    std::fs::write(&old_feed, urls("listed.example", 20)).unwrap();
    std::fs::write(&new_feed, format!("{new_url}\n{}", urls("listed.example", 20))).unwrap();
    let key = dir.path().join("signing.key");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let start = |data: &str, feed: &std::path::Path| {
        let mut cfg = config(&dir.path().join(data), "unused", vec![]);
        cfg.lists = vec![file_list("phishing", feed, 12)];
        cfg.signing_key = Some(key.clone());
        RunningPublisher::start_at(cfg, now)
    };
    // The first opens (and creates) the key, then the mirror.
    let current = start("current", &new_feed).await;
    let version = wait_served(&current, "phishing").await;
    let mirror = start("mirror", &old_feed).await;
    assert_eq!(
        wait_served(&mirror, "phishing").await,
        version,
        "same build second"
    );
    assert_ne!(served_id(&mirror, "phishing"), served_id(&current, "phishing"));

    for advertised in [true, false] {
        let proxy = FaultProxy::start(&current.base_url()).await;
        if advertised {
            proxy.relay_bucket_advertisement();
        }
        let agent = blocksieve_agent::Agent::builder(proxy.base_url())
            .list("phishing")
            .trusted_key(current.public_key())
            .build()
            .unwrap();
        assert!(agent.update().await.unwrap().is_complete());
        assert_eq!(agent.status().lists[0].version, Some(version));
        assert!(!agent.lookup_local(new_url).unwrap().hits.is_empty());
        proxy.set_upstream(&mirror.base_url());
        let verdict = agent.check_url(new_url).await.unwrap();
        assert!(
            matches!(verdict, blocksieve_agent::Verdict::Unverified { .. }),
            "{new_url} answered by another snapshot of version {version} (buckets advertised: {advertised}): {verdict:?}"
        );
        let stats = agent.stats();
        assert_eq!(stats.immutable_bucket_requests, 0, "{stats:?}");
        assert_eq!(
            stats.immutable_bucket_fallbacks,
            u64::from(advertised),
            "{stats:?}"
        );
        assert_eq!(stats.full_hash_failures, 1, "{stats:?}");
        assert_eq!(stats.false_prefix_hits, 0, "{stats:?}");
    }
    // What the mirror said, by route.
    let client = reqwest::Client::new();
    let base = mirror.base_url();
    let id = served_id(&current, "phishing");
    let prefix = RequestPrefix::of(&hash_of(new_url), 12);
    let bucket = client
        .get(format!("{base}{}", routes::list_hashes("phishing", &id, prefix)))
        .send()
        .await
        .unwrap();
    assert_eq!(bucket.status(), 404);
    assert_eq!(code(bucket).await, "other_snapshot");
    let search = client
        .post(format!("{base}{}", routes::SEARCH))
        .json(&serde_json::json!({
            "prefixes": [prefix.to_string()],
            "min_versions": {"phishing": version},
            "snapshots": {"phishing": id},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(search.status(), 503);
    assert_eq!(code(search).await, "other_snapshot");
    // Its own snapshot's id, or none (a client that sends no ids), is
    // answered as before.
    let own = served_id(&mirror, "phishing");
    let search = client
        .post(format!("{base}{}", routes::SEARCH))
        .json(&serde_json::json!({
            "prefixes": [prefix.to_string()],
            "min_versions": {"phishing": version},
            "snapshots": {"phishing": own},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(search.status(), 200);
    let malformed = client
        .post(format!("{base}{}", routes::SEARCH))
        .json(&serde_json::json!({
            "prefixes": [prefix.to_string()],
            "snapshots": {"phishing": format!("{version}")},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 400);
    assert_eq!(code(malformed).await, "bad_request");

    // With the first publisher answering again: unsafe.
    let agent = blocksieve_agent::Agent::builder(current.base_url())
        .mirror(mirror.base_url())
        .list("phishing")
        .trusted_key(current.public_key())
        .build()
        .unwrap();
    assert!(agent.update().await.unwrap().is_complete());
    let verdict = agent.check_url(new_url).await.unwrap();
    assert!(verdict.is_unsafe(), "{verdict:?}");
    mirror.stop().await;
    current.stop().await;
}

/// A snapshot restored from the cache directory carries no advertisement:
/// its hits are confirmed by `POST` until a download or a `304` says where
/// that version's buckets are; from then on by the buckets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_snapshot_uses_post_until_a_304_advertises_its_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    std::fs::write(&feed, urls("listed.example", 40)).unwrap();
    let mut cfg = config(dir.path(), "unused", vec![]);
    cfg.lists = vec![file_list("phishing", &feed, 12)];
    let server = RunningPublisher::start(cfg).await;
    wait_served(&server, "phishing").await;
    let cache = dir.path().join("agent-cache");
    let agent = || {
        blocksieve_agent::Agent::builder(server.base_url())
            .list("phishing")
            .trusted_key(server.public_key())
            .cache_dir(&cache)
            .build()
            .unwrap()
    };
    assert!(agent().update().await.unwrap().is_complete());

    let restored = agent();
    assert_eq!(restored.stats().snapshots_loaded_from_cache, 1);
    assert!(
        restored
            .check_url("http://listed.example/page/0")
            .await
            .unwrap()
            .is_unsafe()
    );
    let stats = restored.stats();
    assert_eq!(
        (stats.full_hash_requests, stats.immutable_bucket_requests),
        (1, 0)
    );
    assert_eq!(route_requests(&server, routes::SEARCH).await, 1);

    let report = restored.update().await.unwrap();
    assert!(
        matches!(report.lists[0].1, blocksieve_agent::ListUpdate::Unchanged { .. }),
        "{report:?}"
    );
    let other = (1..40)
        .map(|i| format!("http://listed.example/page/{i}"))
        .find(|u| {
            RequestPrefix::of(&hash_of(u), 12)
                != RequestPrefix::of(&hash_of("http://listed.example/page/0"), 12)
        })
        .unwrap();
    assert!(restored.check_url(&other).await.unwrap().is_unsafe());
    let stats = restored.stats();
    assert_eq!(
        (stats.full_hash_requests, stats.immutable_bucket_requests),
        (2, 1)
    );
    assert_eq!(route_requests(&server, routes::SEARCH).await, 1);
    server.stop().await;
}

/// A publisher's configuration in `dir` with two lists: `large` (2,000
/// URLs, 16-bit request prefixes) and `small` (20 URLs, 8 bits), and a
/// bucket limit of 4 full hashes, which the large list's bucket passes
/// under 8 bits (about 7.8) and not under 16 (0.03).
fn large_and_small(dir: &std::path::Path) -> blocksieve_publisher::Config {
    let (large, small) = (dir.join("large.txt"), dir.join("small.txt"));
    // 3,000: under 8 bits about 12 a bucket, over twice the cap (a prefix
    // shorter than a list advertises may select up to twice it).
    std::fs::write(&large, urls("large.example", 3_000)).unwrap();
    std::fs::write(&small, urls("small.example", 20)).unwrap();
    let mut cfg = config(dir, "unused", vec![]);
    cfg.lists = vec![file_list("large", &large, 16), file_list("small", &small, 8)];
    cfg.max_bucket_entries = 4;
    cfg
}

/// Two lists of very different sizes, each advertising its own request
/// prefix length: the large one 16 bits, the small one 8. Under 8 bits the
/// large list's bucket holds more full hashes than the publisher serves
/// (`max_bucket_entries`), so an agent subscribed to both that asked a
/// small-list hit at 8 bits got `400 prefix_too_short` from the large
/// list's bucket and from the `POST` alike: the hit was never confirmed
/// (`unverified`, let through by default) and the failure backed off every
/// confirmation. An agent asks at the longest length its lists advertise,
/// under which every list's bucket is one its publisher serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_lists_hit_is_confirmed_beside_a_large_list() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = large_and_small(dir.path());
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let agent = blocksieve_agent::Agent::builder(server.base_url())
        .lists(["large", "small"])
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    assert!(agent.update().await.unwrap().is_complete());

    for (url, expected) in [
        ("http://small.example/page/7", "small"),
        ("http://large.example/page/1234", "large"),
    ] {
        match agent.check_url(url).await.unwrap() {
            blocksieve_agent::Verdict::Unsafe { list, .. } => assert_eq!(list, expected),
            other => panic!("{url}, listed on {expected}, was {other:?}"),
        }
    }
    let local = agent.lookup_local("http://small.example/page/7").unwrap();
    assert_eq!(local.request_prefixes()[0].bits(), 16, "{local:?}");
    let stats = agent.stats();
    assert_eq!(stats.full_hash_failures, 0, "{stats:?}");
    assert_eq!(stats.immutable_bucket_fallbacks, 0, "{stats:?}");
    assert_eq!(route_requests(&server, routes::SEARCH).await, 0);
    server.stop().await;
}

/// `POST /v1/hashes:search` with `min_versions` answers the lists it names
/// only (another list need not be served), and caps only their buckets: a
/// client subscribed to the small list alone asks at its 8 bits, under
/// which a large list it does not subscribe to holds more than the cap. Counted over every served list,
/// the search was refused (`400`): a client that confirms by `POST` (the
/// sans-I/O session; the agent when buckets fail) confirmed nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_is_answered_and_capped_for_the_lists_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = large_and_small(dir.path());
    // A third list whose only source is missing: never served.
    cfg.lists
        .push(file_list("pending", &dir.path().join("missing.txt"), 8));
    let server = RunningPublisher::start(cfg).await;
    wait_served(&server, "large").await;
    let version = wait_served(&server, "small").await;
    let hash = hash_of("http://small.example/page/7");
    let prefix = RequestPrefix::of(&hash, 8).to_string();
    let client = reqwest::Client::new();
    let search = |body: serde_json::Value| {
        client
            .post(format!("{}{}", server.base_url(), routes::SEARCH))
            .json(&body)
            .send()
    };

    let named = search(serde_json::json!({"prefixes": [prefix], "min_versions": {"small": version}}))
        .await
        .unwrap();
    assert_eq!(named.status(), 200);
    let answer: blocksieve_format::api::FullHashSearchResponse = named.json().await.unwrap();
    let matches = &answer.results[0].matches;
    assert!(matches.iter().all(|m| m.list == "small"), "{matches:?}");
    assert!(
        matches.iter().any(|m| m.full_hash == hash.to_string()),
        "{matches:?}"
    );

    // Without names: every list, the large one's bucket over the cap.
    let every = search(serde_json::json!({"prefixes": [prefix]})).await.unwrap();
    assert_eq!(every.status(), 400);
    let error = every.json::<ErrorResponse>().await.unwrap().error;
    assert_eq!(error.code, "prefix_too_short");
    assert!(error.message.contains("of list large"), "{}", error.message);
    // The list with no snapshot is not named, so the search is answered
    // (above); named, it is `503 behind`, never "no match".
    let named_pending =
        search(serde_json::json!({"prefixes": [prefix], "min_versions": {"small": version, "pending": 1}}))
            .await
            .unwrap();
    assert_eq!(named_pending.status(), 503);
    assert_eq!(code(named_pending).await, "behind");
    server.stop().await;
}

/// An operator lengthens a list's request prefixes (`request_prefix_bits`
/// 8 → 12: under 8 bits its 2,000 full hashes make buckets of about 7.8,
/// over `max_bucket_entries`, 4) and restarts the publisher; the list gains
/// a URL, so a new version is published. An agent that followed it by a
/// delta kept its base's 8 bits (a delta carries no prefix length) and both
/// full-hash routes kept refusing them (`400 prefix_too_short`): every hit
/// `unverified`, let through by default, until the agent next took a whole
/// snapshot. A delta is offered only between versions with the same
/// request prefix length, so the agent takes the new snapshot and its
/// length. (A list sized by `min_anonymity` keeps its length until it
/// doubles past the threshold where it took it, or falls back under it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_request_prefix_length_reaches_agents_by_snapshot_not_by_delta() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    std::fs::write(&feed, urls("listed.example", 2_000)).unwrap();
    let mut cfg = config(dir.path(), "unused", vec![]);
    cfg.lists = vec![file_list("phishing", &feed, 8)];
    cfg.max_bucket_entries = 4;
    let server = RunningPublisher::start(cfg.clone()).await;
    let first = wait_served(&server, "phishing").await;
    let proxy = blocksieve_tests::fault::FaultProxy::start(&server.base_url()).await;
    let agent = blocksieve_agent::Agent::builder(proxy.base_url())
        .list("phishing")
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    assert!(agent.update().await.unwrap().is_complete());
    let url = "http://listed.example/page/7";
    assert_eq!(agent.lookup_local(url).unwrap().request_prefixes()[0].bits(), 8);
    server.stop().await;

    cfg.lists[0].request_prefix_bits = Some(12);
    let mut text = urls("listed.example", 2_000);
    text.push_str("http://newly-listed.example/page\n");
    std::fs::write(&feed, text).unwrap();
    let server = RunningPublisher::start(cfg).await;
    for _ in 0..600 {
        if served(&server, "phishing").is_some_and(|v| v > first) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served(&server, "phishing").unwrap() > first);
    proxy.set_upstream(&server.base_url());
    assert!(agent.update().await.unwrap().is_complete());
    assert_eq!(agent.lookup_local(url).unwrap().request_prefixes()[0].bits(), 12);
    for url in [url, "http://newly-listed.example/page"] {
        let verdict = agent.check_url(url).await.unwrap();
        assert!(verdict.is_unsafe(), "{url}: {verdict:?}");
    }
    let stats = agent.stats();
    assert_eq!(stats.full_hash_failures, 0, "{stats:?}");
    server.stop().await;
}
