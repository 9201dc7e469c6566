//! Incremental updates over real HTTP: a build that finds its list
//! unchanged publishes nothing but a new freshness record; a changed one
//! publishes a delta, which `GET /v1/lists/{name}/updates/{from}` serves
//! as a chain up to the latest version, the same from a restarted builder
//! and from a replica as from the builder that built it; and what
//! `/metrics` counts of a source that falls back to its last good content.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use blocksieve_format::api::{
    DELTAS_CONTENT_TYPE, FRESHNESS_HEADER, NEXT_CHECK_AT_HEADER, NEXT_CHECK_HEADER, routes, snapshot_etag,
};
use blocksieve_format::{FreshnessRecord, FullHash, TrustedKey, decode_chain, merge_additions};
use blocksieve_publisher::internal::storage::{generate_signing_key, write_key_pair};
use blocksieve_publisher::{Config, Role, SourceConfig, SourceFormat};
use blocksieve_tests::moto::Moto;
use blocksieve_tests::{RunningPublisher, config};
use rand::{Rng as _, SeedableRng as _};

const READY: Duration = Duration::from_secs(60);
const LIST: &str = "phishing";

/// `count` random URLs of a seeded generator.
fn urls(rng: &mut rand::rngs::StdRng, count: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            format!(
                "http://h{:08x}.example/p/{:08x}",
                rng.r#gen::<u32>(),
                rng.r#gen::<u32>()
            )
        })
        .collect()
}

fn write_feed(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// The sorted distinct 32-bit prefixes of the feed's URLs.
fn prefixes(lines: &[String]) -> Vec<u32> {
    let set: BTreeSet<u32> = lines
        .iter()
        .map(|u| {
            let expression = u.strip_prefix("http://").unwrap();
            FullHash::of(expression.as_bytes()).prefix().0
        })
        .collect();
    set.into_iter().collect()
}

/// Every file under `dir` except the `latest` pointers and leases (which
/// an unchanged build may rewrite) and the sources' caches.
fn published_files(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.join("lists")];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.parent().unwrap().ends_with("builds")
                || path.parent().unwrap().ends_with("generations")
            {
                out.insert(path);
            }
        }
    }
    out
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

async fn get(base: &str, path: &str, if_none_match: Option<&str>) -> Answer {
    let client = reqwest::Client::new();
    let mut request = client.get(format!("{base}{path}"));
    if let Some(etag) = if_none_match {
        request = request.header("if-none-match", etag);
    }
    let answer = request.send().await.unwrap();
    Answer {
        status: answer.status().as_u16(),
        headers: answer.headers().clone(),
        body: answer.bytes().await.unwrap().to_vec(),
    }
}

impl Answer {
    fn freshness(&self, key: &TrustedKey) -> FreshnessRecord {
        let value = self.headers[FRESHNESS_HEADER].to_str().unwrap();
        FreshnessRecord::from_header_value(value, std::slice::from_ref(key)).unwrap()
    }

    fn error_code(&self) -> String {
        let body: serde_json::Value = serde_json::from_slice(&self.body).unwrap();
        body["error"]["code"].as_str().unwrap().to_owned()
    }
}

/// The served snapshot's version and body hash.
fn served(running: &RunningPublisher) -> (u64, [u8; 32]) {
    let state = running.publisher.state();
    let current = state.lists[0].current.load_full().unwrap();
    (current.header.version, current.header.body_sha256)
}

/// Waits until the list's first build has finished: its freshness record
/// is served.
async fn wait_fresh(running: &RunningPublisher) {
    running.wait_ready(READY).await;
    let state = running.publisher.state();
    let deadline = tokio::time::Instant::now() + READY;
    while state.lists[0].freshness.load().is_none() {
        assert!(tokio::time::Instant::now() < deadline, "no freshness record");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Builds the list now; returns (version, unchanged).
async fn build(running: &RunningPublisher) -> (u64, bool) {
    let outcome = running.publisher.build_list(0).await;
    (outcome.result.unwrap(), outcome.unchanged)
}

fn feed_config(data_dir: &Path, feed: &Path, window: usize) -> Config {
    let mut config = config(data_dir, LIST, vec![SourceConfig::file(feed, SourceFormat::Urls)]);
    config.delta_window = window;
    config
}

/// A publisher of 2,000 seeded URLs (a 336-build delta window) whose first
/// build's freshness is served; its directory, data directory and handle.
async fn start_fresh_2000() -> (tempfile::TempDir, PathBuf, RunningPublisher) {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    write_feed(&feed, &urls(&mut rng, 2000));
    let data = dir.path().join("data");
    let running = RunningPublisher::start(feed_config(&data, &feed, 336)).await;
    wait_fresh(&running).await;
    (dir, data, running)
}

/// `blocksieve_measured_fpr` is the served snapshot's canary rate (what
/// `BlocksieveFprOverBound` compares with its bound, and the status page
/// shows). An unchanged build serves nothing new: the served snapshot's
/// rate must stay, not the one its own canary (seeded by the version it
/// would have had) measured of a filter no agent holds. Else a served
/// filter over its bound (a publish forced past the canary gate) clears
/// its alert at the next unchanged build while the page stays red.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_an_unchanged_build_leaves_the_served_measured_fpr() {
    let (_dir, _, running) = start_fresh_2000().await;
    let base = running.base_url();
    let served_fpr = || {
        running.publisher.state().lists[0]
            .current
            .load_full()
            .unwrap()
            .header
            .measured_fpr
    };
    let gauge = || async {
        let metrics = String::from_utf8(get(&base, "/metrics", None).await.body).unwrap();
        let line = format!("blocksieve_measured_fpr{{list=\"{LIST}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line).map(|v| v.parse::<f64>().unwrap()))
            .unwrap()
    };
    assert_eq!(gauge().await, served_fpr());
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (_, unchanged) = build(&running).await;
        assert!(unchanged);
        assert_eq!(
            gauge().await,
            served_fpr(),
            "blocksieve_measured_fpr is not the served snapshot's after an unchanged build"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_build_publishes_nothing_and_renews_freshness() {
    let (_dir, data, running) = start_fresh_2000().await;
    let key = running.public_key();
    let base = running.base_url();
    // The first build is done when its version's freshness is served.
    let (version, body_sha256) = served(&running);
    let etag = snapshot_etag(version, &body_sha256);
    let first = get(&base, &routes::latest_snapshot(LIST), None).await;
    assert_eq!(first.status, 200);
    let first = first.freshness(&key);
    assert_eq!((first.version, first.body_sha256), (version, body_sha256));
    let files = published_files(&data);

    // A later second: the new record expires later.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(build(&running).await, (version, true));
    assert_eq!(served(&running), (version, body_sha256));
    assert_eq!(published_files(&data), files, "an unchanged build wrote objects");
    let metrics = String::from_utf8(get(&base, "/metrics", None).await.body).unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("outcome=\"unchanged\"") && l.ends_with(" 1")),
        "{metrics}"
    );

    let answer = get(&base, &routes::updates(LIST, version), Some(&etag)).await;
    assert_eq!(answer.status, 304);
    assert_eq!(answer.headers["etag"], etag.as_str());
    let renewed = answer.freshness(&key);
    assert_eq!((renewed.version, renewed.body_sha256), (version, body_sha256));
    assert!(renewed.expires_at > first.expires_at, "{renewed:?} {first:?}");
    // Both snapshot routes send it too, 200 and 304.
    for (path, tag) in [
        (routes::latest_snapshot(LIST), etag.clone()),
        (
            routes::versioned_snapshot(LIST, version),
            format!("\"{version}\""),
        ),
    ] {
        for if_none_match in [None, Some(tag.as_str())] {
            let answer = get(&base, &path, if_none_match).await;
            assert_eq!(answer.freshness(&key), renewed, "{path} {if_none_match:?}");
        }
    }
    // The test schedule fires once a year: the next check is capped at an
    // hour (agents wait no longer), not the configured 300 s fallback.
    let next: u64 = answer.headers[NEXT_CHECK_HEADER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let until_build = renewed.next_build_at - unix_now();
    if until_build > 3600 {
        assert_eq!(next, 3600);
    } else {
        assert!(
            (until_build + 25..=until_build + 605).contains(&next),
            "{next} {until_build}"
        );
    }
    assert_eq!(renewed.next_build_at % 60, 0);
    assert_eq!(
        answer.headers["cache-control"].to_str().unwrap(),
        format!("public, max-age={next}")
    );
    // The same instant as a Unix time, which a cached copy keeps right: on
    // the updates route and on the latest snapshot's 200 and 304.
    let at = |answer: &Answer| -> u64 {
        answer.headers[NEXT_CHECK_AT_HEADER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let seconds = |answer: &Answer| -> u64 {
        answer.headers[NEXT_CHECK_HEADER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let near_now = |unix: u64, next: u64| unix.abs_diff(unix_now() + next) <= 2;
    assert!(near_now(at(&answer), next), "{} {next}", at(&answer));
    for if_none_match in [None, Some(etag.as_str())] {
        let answer = get(&base, &routes::latest_snapshot(LIST), if_none_match).await;
        assert!(
            near_now(at(&answer), seconds(&answer)),
            "{if_none_match:?}: {:?}",
            answer.headers
        );
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_builds_are_followed_by_a_delta_chain() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let mut lines = urls(&mut rng, 2000);
    write_feed(&feed, &lines);
    let data = dir.path().join("data");
    // Three deltas kept.
    let running = RunningPublisher::start(feed_config(&data, &feed, 3)).await;
    wait_fresh(&running).await;
    let key = running.public_key();
    let base = running.base_url();
    let mut versions = vec![served(&running)];
    let mut held = vec![prefixes(&lines)];
    for round in 0..4 {
        let added = urls(&mut rng, 20 + round);
        lines.extend(added.iter().cloned());
        // One removed each time: deltas carry additions only.
        lines.remove(round);
        write_feed(&feed, &lines);
        let (version, unchanged) = build(&running).await;
        assert!(!unchanged);
        assert_eq!(version, served(&running).0);
        versions.push(served(&running));
        held.push(prefixes(&lines));

        // The one-delta chain from the previous version: exactly the new
        // prefixes.
        let previous = versions[versions.len() - 2];
        let answer = get(&base, &routes::updates(LIST, previous.0), None).await;
        assert_eq!(answer.status, 200, "round {round}");
        assert_eq!(answer.headers["content-type"], DELTAS_CONTENT_TYPE);
        assert_eq!(
            answer.headers["etag"],
            snapshot_etag(version, &served(&running).1).as_str()
        );
        assert_eq!(answer.freshness(&key).version, version);
        let chain = decode_chain(&answer.body, LIST, std::slice::from_ref(&key)).unwrap();
        assert_eq!(chain.len(), 1);
        let before: BTreeSet<u32> = held[held.len() - 2].iter().copied().collect();
        let new: Vec<u32> = (held.last().unwrap().iter())
            .copied()
            .filter(|p| !before.contains(p))
            .collect();
        assert_eq!(chain[0].additions(), new.as_slice());
        assert_eq!(chain[0].header().from.version, previous.0);
        assert_eq!(chain[0].header().from.body_sha256, previous.1);
        assert_eq!(chain[0].header().to.version, version);
    }
    let latest = *versions.last().unwrap();
    // Across three builds, from the oldest version the window keeps: an
    // agent holding that version and applying the chain misses nothing.
    let answer = get(&base, &routes::updates(LIST, versions[1].0), None).await;
    assert_eq!(answer.status, 200);
    let chain = decode_chain(&answer.body, LIST, std::slice::from_ref(&key)).unwrap();
    assert_eq!(chain.len(), 3);
    assert_eq!(chain.last().unwrap().header().to.version, latest.0);
    let mut agent = held[1].clone();
    for delta in &chain {
        agent = merge_additions(&agent, delta.additions());
    }
    let agent: BTreeSet<u32> = agent.into_iter().collect();
    assert!(held.last().unwrap().iter().all(|p| agent.contains(p)));
    // Past the window, and versions no delta starts at: 410.
    for gone in [versions[0].0, versions[1].0 - 1, 1] {
        let answer = get(&base, &routes::updates(LIST, gone), None).await;
        assert_eq!(
            (answer.status, answer.error_code().as_str()),
            (410, "no_delta"),
            "{gone}"
        );
    }
    // The latest: an empty chain, or 304 to its ETag.
    let etag = snapshot_etag(latest.0, &latest.1);
    let answer = get(&base, &routes::updates(LIST, latest.0), None).await;
    assert_eq!((answer.status, answer.body.len()), (200, 0));
    let answer = get(&base, &routes::updates(LIST, latest.0), Some(&etag)).await;
    assert_eq!(answer.status, 304);
    assert_eq!(answer.freshness(&key).version, latest.0);
    // Newer than served: 503 behind, with Retry-After.
    let answer = get(&base, &routes::updates(LIST, latest.0 + 1), None).await;
    assert_eq!((answer.status, answer.error_code().as_str()), (503, "behind"));
    assert!(answer.headers.contains_key("retry-after"));
    // Not canonical: 400; an unknown list: 404.
    let answer = get(&base, &format!("/v1/lists/{LIST}/updates/0{}", latest.0), None).await;
    assert_eq!(
        (answer.status, answer.error_code().as_str()),
        (400, "bad_version")
    );
    let answer = get(&base, &routes::updates("nothing", latest.0), None).await;
    assert_eq!(answer.status, 404);

    // A restart loads the chain with the generation, and the freshness
    // record from the pointer.
    let expected = get(&base, &routes::updates(LIST, versions[2].0), None).await;
    running.stop().await;
    let running = RunningPublisher::start(feed_config(&data, &feed, 3)).await;
    wait_fresh(&running).await;
    let again = get(&running.base_url(), &routes::updates(LIST, versions[2].0), None).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body, expected.body);
    assert_eq!(again.freshness(&key).version, latest.0);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_serves_the_builders_chain_and_freshness() {
    let Some(moto) = Moto::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    let mut lines = urls(&mut rng, 2000);
    write_feed(&feed, &lines);
    let builder_dir = dir.path().join("builder");
    std::fs::create_dir_all(&builder_dir).unwrap();
    let signing = generate_signing_key();
    write_key_pair(&signing, &builder_dir.join("signing.key")).unwrap();
    let on_store = |role, data: &Path| Config {
        role,
        store: Some(moto.store_url("updates")),
        store_options: moto.store_options(),
        replica_poll_s: 1,
        ..feed_config(data, &feed, 336)
    };
    let builder = RunningPublisher::start(on_store(Role::All, &builder_dir)).await;
    wait_fresh(&builder).await;
    let first = served(&builder);
    lines.extend(urls(&mut rng, 30));
    write_feed(&feed, &lines);
    assert!(!build(&builder).await.1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (latest, unchanged) = build(&builder).await;
    assert!(unchanged);

    let replica = RunningPublisher::start(Config {
        public_key: Some(signing.public_key().to_base64()),
        ..on_store(Role::Replica, &dir.path().join("replica"))
    })
    .await;
    replica.wait_ready(READY).await;
    let key = builder.public_key();
    let path = routes::updates(LIST, first.0);
    let from_builder = get(&builder.base_url(), &path, None).await;
    assert_eq!(from_builder.status, 200);
    let renewed = from_builder.freshness(&key);
    assert_eq!(renewed.version, latest);
    // The replica follows the pointer's record within a few checks.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let from_replica = get(&replica.base_url(), &path, None).await;
        if from_replica.status == 200 && from_replica.headers.get(FRESHNESS_HEADER).is_some() {
            assert_eq!(from_replica.body, from_builder.body);
            assert_eq!(from_replica.headers["etag"], from_builder.headers["etag"]);
            assert_eq!(from_replica.freshness(&key), renewed);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replica did not follow"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Another unchanged build: its record reaches the replica by the
    // pointer alone.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(build(&builder).await.1);
    let newer = get(&builder.base_url(), &path, None).await.freshness(&key);
    assert!(newer.issued_at > renewed.issued_at);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while get(&replica.base_url(), &path, None).await.freshness(&key) != newer {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replica kept the older record"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    replica.stop().await;
    builder.stop().await;
}

/// Two URLs whose full hashes share their 32-bit prefix and differ in
/// their first 64 bits (a birthday search over numbered paths).
fn sharing_a_32_bit_prefix() -> (String, String) {
    let mut seen = std::collections::HashMap::new();
    for i in 0u32.. {
        let url = format!("http://twin.example/{i}");
        let hash = FullHash::of(url.strip_prefix("http://").unwrap().as_bytes());
        if let Some(other) = seen.insert(hash.prefix().0, url.clone()) {
            let other_hash = FullHash::of(other.strip_prefix("http://").unwrap().as_bytes());
            if other_hash.prefix64() != hash.prefix64() {
                return (other, url);
            }
        }
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delta_over_64_bit_keys_adds_a_new_full_hash_sharing_an_old_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    let mut rng = rand::rngs::StdRng::seed_from_u64(64);
    let (old, new) = sharing_a_32_bit_prefix();
    let mut lines = urls(&mut rng, 500);
    lines.push(old);
    write_feed(&feed, &lines);
    let data = dir.path().join("data");
    let mut config = feed_config(&data, &feed, 10);
    config.lists[0].key_bits = 64;
    let running = RunningPublisher::start(config).await;
    wait_fresh(&running).await;
    let key = running.public_key();
    let base = running.base_url();
    let first = served(&running);
    let snapshot = get(&base, &routes::latest_snapshot(LIST), None).await;
    assert_eq!(snapshot.status, 200);
    let held = blocksieve_format::decode_ignoring_expiry(
        &snapshot.body,
        std::slice::from_ref(&key),
        &blocksieve_format::DecodeLimits::default(),
    )
    .unwrap();
    assert_eq!(held.header().version, first.0);
    assert_eq!(held.header().key_bits, blocksieve_format::KeyBits::Bits64);
    let new_hash = FullHash::of(new.strip_prefix("http://").unwrap().as_bytes());
    assert!(
        !held.probably_contains(&new_hash),
        "the old filter already answers for the new URL"
    );

    lines.push(new);
    write_feed(&feed, &lines);
    let (version, unchanged) = build(&running).await;
    assert!(!unchanged);
    let answer = get(&base, &routes::updates(LIST, first.0), None).await;
    assert_eq!(answer.status, 200);
    let chain = decode_chain(&answer.body, LIST, std::slice::from_ref(&key)).unwrap();
    assert_eq!(chain.last().unwrap().header().to.version, version);
    let mut additions = Vec::new();
    for delta in &chain {
        additions = merge_additions(&additions, delta.additions());
    }
    // The agent's probe: the base filter, or the additions.
    for url in &lines {
        let hash = FullHash::of(url.strip_prefix("http://").unwrap().as_bytes());
        assert!(
            held.probably_contains(&hash) || additions.binary_search(&hash.prefix().0).is_ok(),
            "{url} missed after the delta to version {version}"
        );
    }
}

/// The value of the series `series` (name and labels) in `/metrics`.
fn series_value(publisher: &blocksieve_publisher::Publisher, series: &str) -> String {
    let text = publisher.state().metrics.render();
    let prefix = format!("{series} ");
    (text
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned)))
    .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

/// Regression: a source whose fetch succeeded but whose content was not
/// taken (its parse collapsed: an error page, a changed layout) fell back
/// to its last good content, and `sources_on_last_good` said so, but
/// `source_failures_total` ("sources that failed and fell back to their
/// last good content") stayed at 0: only failed fetches were counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_source_whose_content_collapsed_is_counted_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("feed.txt");
    std::fs::write(&path, "http://a.example/p\nhttp://b.example/q\n").unwrap();
    let cfg = blocksieve_tests::config(
        dir.path(),
        "phishing",
        vec![SourceConfig::file(&path, SourceFormat::Urls)],
    );
    let publisher = blocksieve_publisher::Publisher::open(cfg).unwrap();
    assert!(publisher.build_all().await[0].result.is_ok());
    let failures = "blocksieve_source_failures_total{list=\"phishing\"}";
    assert_eq!(series_value(&publisher, failures), "0");
    // Numbers in the wrong column: every line rejected.
    let collapsed: String = (0..20).map(|i| format!("{}\n", 1000 + i)).collect();
    std::fs::write(&path, collapsed).unwrap();
    publisher.build_all().await;
    assert_eq!(
        series_value(&publisher, "blocksieve_sources_on_last_good{list=\"phishing\"}"),
        "1"
    );
    assert_eq!(series_value(&publisher, failures), "1");
}
