//! End to end: a real publisher behind a fault
//! proxy, and agents with a shifted clock. An old list still blocks old
//! threats; no list blocks nothing.

use std::sync::Arc;
use std::time::Duration;

use blocksieve_agent::{Agent, ClockSkew, FailurePolicy, ListUpdate, SnapshotSource, Verdict};
use blocksieve_publisher::SourceFormat;
use blocksieve_tests::clock::OffsetClock;
use blocksieve_tests::fault::{Fault, FaultProxy};
use blocksieve_tests::{RunningPublisher, append_line, config, fixture_lines, fixture_source, until};

const READY: Duration = Duration::from_secs(60);
const DAY_S: i64 = 24 * 60 * 60;
/// Benign URLs, one of which misses the filter (a filter hit on a benign
/// URL is a false positive, confirmed safe only online).
const BENIGN: [&str; 4] = [
    "https://www.wikipedia.org/",
    "https://www.rust-lang.org/learn",
    "https://example.com/",
    "https://docs.rs/tokio",
];

/// A benign URL that misses `agent`'s filters, so that its verdict comes
/// from the snapshot alone.
fn a_miss(agent: &Agent) -> &'static str {
    BENIGN
        .into_iter()
        .find(|url| agent.lookup_local(url).is_ok_and(|l| l.is_empty()))
        .expect("a benign URL that misses the filter")
}

/// A publisher of `phishing` from the fixture feed, with snapshots that
/// expire `ttl_s` after they are built, rebuilt only at start.
fn publisher_config(data_dir: &std::path::Path, ttl_s: u64) -> blocksieve_publisher::Config {
    let mut cfg = config(
        data_dir,
        "phishing",
        vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
    );
    cfg.snapshot_ttl_s = ttl_s;
    cfg.schedule = "0 0 0 1 1 *".to_owned(); // once a year: only the start-up build runs
    cfg
}

fn version(server: &RunningPublisher) -> Option<u64> {
    server.publisher.state().lists[0]
        .current
        .load()
        .as_ref()
        .map(|s| s.header.version)
}

/// Whether `skew` is `expected_s` seconds (ahead if positive) give or take
/// what a test takes and the `Date` header's one-second resolution.
fn about(skew: Option<ClockSkew>, expected_s: i64) -> bool {
    let near = |d: Duration| d.as_secs().abs_diff(expected_s.unsigned_abs()) <= 15;
    match skew {
        Some(ClockSkew::Ahead(d)) => expected_s > 0 && near(d),
        Some(ClockSkew::Behind(d)) => expected_s < 0 && near(d),
        _ => false,
    }
}

/// Item 8: an agent restarted after its cached snapshot expired, while the
/// publisher is down and its front answers errors, answers from that
/// snapshot (stale), confirms hits once the full-hash endpoint is back, and
/// becomes fresh by itself when the publisher serves again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_after_expiry_with_the_publisher_down_answers_stale_then_fresh_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cache = dir.path().join("agent-cache");
    let listed = fixture_lines("phishing-urls.txt")[0].clone();

    // The publisher's snapshots expire a minute after they are built.
    let first = RunningPublisher::start(publisher_config(&data, 60)).await;
    first.wait_ready(READY).await;
    let v1 = version(&first).unwrap();
    let key = first.public_key();
    let proxy = FaultProxy::start(&first.base_url()).await;
    let agent = |clock: &Arc<OffsetClock>| {
        Agent::builder(proxy.base_url())
            .list("phishing")
            .trusted_key(key.clone())
            .cache_dir(&cache)
            .time_provider(clock.clone())
            .failure_policy(FailurePolicy::FailClosed)
            .initial_jitter(Duration::ZERO)
            .build()
            .unwrap()
    };
    let before = agent(&Arc::new(OffsetClock::new(0)));
    before.update().await.unwrap();
    assert!(before.check_url(&listed).await.unwrap().is_unsafe());
    drop(before);

    // The publisher goes down (the proxy answers 502 for it) and its front
    // answers 400 to snapshot requests; the agent restarts two minutes
    // later by its clock, past the snapshot's expiry.
    first.stop().await;
    proxy.set_snapshots(Fault::Status(400));
    let clock = Arc::new(OffsetClock::new(120));
    let agent = agent(&clock);
    assert_eq!(agent.snapshot_version("phishing"), Some(v1));
    let status = agent.status();
    assert!(status.is_ready() && status.is_stale(), "{status:?}");
    assert_eq!(
        status.list("phishing").unwrap().source,
        Some(SnapshotSource::Cache)
    );
    assert_eq!(agent.stats().expired_snapshots_loaded_from_cache, 1);
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("phishing"),
            Some(ListUpdate::Failed {
                kept_version: Some(v),
                ..
            }) if *v == v1
        ),
        "{report:?}"
    );
    assert_eq!(
        agent.check_url(a_miss(&agent)).await.unwrap(),
        Verdict::Safe { stale: true }
    );
    let verdict = agent.check_url(&listed).await.unwrap();
    assert!(
        matches!(
            &verdict,
            Verdict::Unverified {
                block: true,
                stale: true,
                ..
            }
        ),
        "{verdict:?}"
    );

    // The publisher is back (on another port, behind the same front), its
    // snapshots now valid for a day; snapshot requests still fail at the
    // front, but the full-hash endpoint answers: the hit is confirmed.
    let second = RunningPublisher::start(publisher_config(&data, 24 * 60 * 60)).await;
    let started = second.base_url();
    until("the restarted publisher's build", || {
        version(&second).is_some_and(|v| v > v1)
    })
    .await;
    let v2 = version(&second).unwrap();
    proxy.set_upstream(&started);
    clock.set_offset(122); // past the full-hash backoff (at most 1 s)
    let verdict = agent.check_url(&listed).await.unwrap();
    assert!(
        matches!(&verdict, Verdict::Unsafe { stale: true, .. }),
        "{verdict:?}"
    );

    // Snapshots served again: the background updates, whose first check
    // comes at once for a list without a fresh snapshot, make it fresh.
    proxy.set_snapshots(Fault::Forward);
    let updates = agent.start_updates().unwrap();
    until("the fresh snapshot", || {
        agent.snapshot_version("phishing") == Some(v2)
    })
    .await;
    updates.shutdown().await;
    let status = agent.status();
    assert!(!status.is_stale(), "{status:?}");
    assert_eq!(
        status.list("phishing").unwrap().source,
        Some(SnapshotSource::Network)
    );
    // Two minutes ahead is past the one-minute threshold: reported.
    assert!(about(status.clock_skew, 122), "{:?}", status.clock_skew);
    assert_eq!(
        agent.check_url(a_miss(&agent)).await.unwrap(),
        Verdict::Safe { stale: false }
    );
    assert!(matches!(
        agent.check_url(&listed).await.unwrap(),
        Verdict::Unsafe { stale: false, .. }
    ));
    second.stop().await;
}

/// Item 9: an agent whose clock is two days ahead at start uses the newest
/// verified snapshot, stale, reports the skew, and is fresh again — without
/// a restart — as soon as its clock is put right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_two_days_ahead_at_start_uses_the_newest_snapshot_stale_and_recovers_with_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    std::fs::copy(blocksieve_tests::fixtures().join("phishing-urls.txt"), &feed).unwrap();
    let mut cfg = publisher_config(&dir.path().join("data"), 7200);
    cfg.lists[0].sources = vec![blocksieve_publisher::SourceConfig::file(
        &feed,
        SourceFormat::Urls,
    )];
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(READY).await;
    let proxy = FaultProxy::start(&server.base_url()).await;
    let listed = fixture_lines("phishing-urls.txt")[0].clone();
    let clock = Arc::new(OffsetClock::new(2 * DAY_S));
    let agent = Agent::builder(proxy.base_url())
        .list("phishing")
        .trusted_key(server.public_key())
        .time_provider(clock.clone())
        .build()
        .unwrap();

    // Every fresh snapshot has expired by this clock: used all the same.
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("phishing"),
            Some(ListUpdate::Updated { previous: None, .. })
        ),
        "{report:?}"
    );
    let status = agent.status();
    assert!(status.is_ready() && status.is_stale(), "{status:?}");
    assert!(about(status.clock_skew, 2 * DAY_S), "{:?}", status.clock_skew);
    let stats = agent.stats();
    assert_eq!((stats.snapshots_applied, stats.expired_snapshots_applied), (1, 1));
    assert_eq!(stats.update_failures, 0);
    assert_eq!(
        agent.check_url(a_miss(&agent)).await.unwrap(),
        Verdict::Safe { stale: true }
    );
    let verdict = agent.check_url(&listed).await.unwrap();
    assert!(
        matches!(&verdict, Verdict::Unsafe { stale: true, .. }),
        "{verdict:?}"
    );

    // A newer build replaces it: the newest verified snapshot is the one
    // in use.
    let v1 = version(&server).unwrap();
    // An unchanged list publishes no new version: the feed gains a line.
    std::io::Write::write_all(
        &mut std::fs::OpenOptions::new().append(true).open(&feed).unwrap(),
        b"\nhttp://rebuilt.example/new\n",
    )
    .unwrap();
    server.publisher.build_all().await;
    let v2 = version(&server).unwrap();
    assert!(v2 > v1);
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("phishing"), Some(v2));
    assert!(agent.status().is_stale());

    // The clock is put right: fresh, no skew, at once.
    clock.set_offset(0);
    let status = agent.status();
    assert!(!status.is_stale(), "{status:?}");
    assert_eq!(status.clock_skew, None);
    assert_eq!(
        agent.check_url(a_miss(&agent)).await.unwrap(),
        Verdict::Safe { stale: false }
    );
    assert!(matches!(
        agent.check_url(&listed).await.unwrap(),
        Verdict::Unsafe { stale: false, .. }
    ));
    agent.update().await.unwrap();
    assert_eq!(agent.status().clock_skew, None);
    server.stop().await;
}

/// Copies directory `from` into `to`, leaving out the entries named in
/// `skip` (at any depth).
fn copy_dir(from: &std::path::Path, to: &std::path::Path, skip: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if skip.iter().any(|s| entry.file_name() == *s) {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target, skip);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A mirror that stopped following its publisher but still answers (here:
/// a copy of the publisher's data directory whose own builds fail, as a
/// replica whose store is unreachable keeps serving what it has) answers
/// every poll "unchanged". An agent that asks it first does not keep its
/// version once the list's next build is overdue: it asks the next base
/// URL, which has the URL listed since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_mirror_stuck_on_an_old_version_does_not_keep_the_agent_there() {
    let dir = tempfile::tempdir().unwrap();
    let (data, stuck_data) = (dir.path().join("data"), dir.path().join("stuck"));
    let feed = blocksieve_tests::fixture_feed(dir.path(), "phishing-urls.txt");
    let mut cfg = config(
        &data,
        "phishing",
        vec![blocksieve_publisher::SourceConfig::file(
            &feed,
            SourceFormat::Urls,
        )],
    );
    cfg.schedule = "0 0 * * * *".to_owned(); // hourly: the next build is due within the hour
    let live = RunningPublisher::start(cfg).await;
    live.wait_ready(READY).await;
    let v1 = version(&live).unwrap();

    // The stuck mirror: version v1 and its freshness record, the same key,
    // no last good content and a source that is gone, so it never builds.
    copy_dir(&data, &stuck_data, &["lock", "sources"]);
    let mut stuck_cfg = config(
        &stuck_data,
        "phishing",
        vec![blocksieve_publisher::SourceConfig::file(
            dir.path().join("gone.txt"),
            SourceFormat::Urls,
        )],
    );
    stuck_cfg.snapshot_ttl_s = 2 * 60 * 60;
    let stuck = RunningPublisher::start(stuck_cfg).await;
    stuck.wait_ready(READY).await;
    assert_eq!(version(&stuck), Some(v1));

    let added = "https://stuck-mirror.example/new-phish";
    append_line(&feed, added);
    let v2 = live.publisher.build_list(0).await.result.unwrap();
    assert!(v2 > v1);

    let cache = dir.path().join("agent-cache");
    let agent = |offset_s: i64| {
        Agent::builder(stuck.base_url())
            .mirror(live.base_url())
            .list("phishing")
            .trusted_key(live.public_key())
            .cache_dir(&cache)
            .time_provider(Arc::new(OffsetClock::new(offset_s)))
            .initial_jitter(Duration::ZERO)
            .build()
            .unwrap()
    };
    // Before the list's next build is due, the stuck mirror's answer is
    // current as far as anyone can tell: it is taken (and the URL, listed
    // in a version the agent cannot know of yet, is safe).
    let now = agent(0);
    now.update().await.unwrap();
    assert_eq!(now.snapshot_version("phishing"), Some(v1));
    drop(now);
    // 70 minutes on, the hourly build the mirror's record announced is
    // overdue (the record itself is still fresh: 2 hours): the live
    // publisher is asked, and its version taken.
    let later = agent(70 * 60);
    let report = later.update().await.unwrap();
    assert_eq!(later.snapshot_version("phishing"), Some(v2), "{report:?}");
    assert!(later.check_url(added).await.unwrap().is_unsafe());
    let status = later.status();
    assert!(!status.is_stale(), "{status:?}");
}

/// A publisher whose data directory is lost, started again on a fresh one
/// (same key) with its clock behind the versions it had published (they
/// were built by a clock ten minutes ahead): the agent holding the lost version
/// refuses the new, lower ones, as its rollback floor must, and says why;
/// a URL listed since is not yet protected. A build past the agent's
/// version, as `build --now` makes it (README "Storage"), brings it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_that_lost_versions_ahead_of_its_clock_is_refused_until_a_build_passes_them() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    let write_feed = |count: usize| {
        let lines: Vec<String> = (0..count)
            .map(|i| format!("http://listed-{i}.example/login"))
            .collect();
        std::fs::write(&feed, lines.join("\n")).unwrap();
    };
    let key_file = dir.path().join("signing.key");
    let cfg = |data: &str| {
        let mut cfg = config(
            &dir.path().join(data),
            "urls",
            vec![blocksieve_publisher::SourceConfig::file(
                &feed,
                SourceFormat::Urls,
            )],
        );
        cfg.signing_key = Some(key_file.clone());
        cfg
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    write_feed(100);
    let lost = RunningPublisher::start_at(cfg("lost"), now + 600).await;
    lost.wait_ready(READY).await;
    let v1 = version(&lost).unwrap();
    let proxy = FaultProxy::start(&lost.base_url()).await;
    let agent = Agent::builder(proxy.base_url())
        .list("urls")
        .trusted_key(lost.public_key())
        .cache_dir(dir.path().join("agent-cache"))
        .initial_jitter(Duration::ZERO)
        .build()
        .unwrap();
    agent.update().await.unwrap();
    lost.stop().await;

    // A fresh data directory, the clock right, a URL added.
    write_feed(101);
    let fresh = RunningPublisher::start(cfg("fresh")).await;
    fresh.wait_ready(READY).await;
    assert!(version(&fresh).unwrap() < v1);
    proxy.set_upstream(&fresh.base_url());
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("urls"),
            Some(ListUpdate::Failed { kept_version: Some(v), .. }) if *v == v1
        ),
        "{report:?}"
    );
    let list = agent.status().list("urls").cloned().unwrap();
    assert!(
        list.last_error
            .as_ref()
            .is_some_and(|e| e.to_string().contains("older than version")),
        "{list:?}"
    );
    let added = "http://listed-100.example/login";
    assert!(matches!(
        agent.check_url(added).await.unwrap(),
        Verdict::Safe { .. }
    ));
    // Counted for the operators' alert (`BlocksieveAgentsAhead`).
    let metrics = reqwest::get(format!("{}/metrics", fresh.base_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let behind = metrics
        .lines()
        .find_map(|l| l.strip_prefix("blocksieve_behind_answers_total{list=\"urls\"} "))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(behind.is_some_and(|n| n >= 1), "{metrics}");

    // A build as of the version the agent holds plus `snapshot_ttl_s`:
    // past it, and (the list unchanged since the fresh start) far enough
    // past the served snapshot's creation to be published, not found
    // unchanged (at `v1 + 1` it is: only a freshness record is signed).
    let ttl = blocksieve_publisher::Config::default().snapshot_ttl_s;
    fresh.publisher.set_build_time(v1 + 1);
    fresh.publisher.build_list(0).await.result.unwrap();
    assert!(version(&fresh).unwrap() < v1, "found unchanged");
    fresh.publisher.set_build_time(v1 + ttl);
    fresh.publisher.build_list(0).await.result.unwrap();
    let report = agent.update().await.unwrap();
    assert!(
        matches!(report.get("urls"), Some(ListUpdate::Updated { .. })),
        "{report:?}"
    );
    assert!(agent.check_url(added).await.unwrap().is_unsafe());
    fresh.stop().await;
}
