//! A wrong clock at start: the newest verified snapshot
//! is used, flagged stale, the skew to the publisher's clock (from its
//! `Date` headers) is reported, and everything is fresh again as soon as
//! the clock is right, without a restart.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use blocksieve_agent::{ClockSkew, ListUpdate, SnapshotSource, Verdict};

use blocksieve_tests::clock::ManualClock;
use blocksieve_tests::fake::FakePublisher;
use blocksieve_tests::snapshot::{Snap, unix_now};

const LISTED: &str = "http://evil.example/landing";
const DAY: u64 = 24 * 60 * 60;

fn at(unix: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(unix)
}

/// Whether `skew` is `expected` give or take the few seconds a test takes
/// (and the `Date` header's one-second resolution).
fn about(skew: Option<ClockSkew>, expected: ClockSkew) -> bool {
    let near = |a: Duration, b: Duration| a.abs_diff(b) <= Duration::from_secs(10);
    match (skew, expected) {
        (Some(ClockSkew::Ahead(a)), ClockSkew::Ahead(b))
        | (Some(ClockSkew::Behind(a)), ClockSkew::Behind(b)) => near(a, b),
        _ => false,
    }
}

#[tokio::test]
async fn clock_two_days_ahead_at_start_uses_the_newest_snapshot_stale_and_reports_the_skew() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).valid(now - 60, now + 7200));
    fake.list_expressions("malware", &["evil.example/"]);
    let clock = ManualClock::new(at(now + 2 * DAY));
    let builder = fake
        .agent_builder(&["malware"])
        .time_provider(clock.clone())
        .cache_dir(dir.path());
    let agent = builder.clone().build().unwrap();
    assert_eq!(agent.status().clock_skew, None, "no response yet");

    // Every fresh snapshot looks expired to this clock: used all the same.
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Updated {
                previous: None,
                version: 1
            })
        ),
        "{report:?}"
    );
    let status = agent.status();
    assert!(status.is_ready() && status.is_stale());
    let two_days_ahead = ClockSkew::Ahead(Duration::from_secs(2 * DAY));
    assert!(
        about(status.clock_skew, two_days_ahead),
        "{:?}",
        status.clock_skew
    );
    let stats = agent.stats();
    assert_eq!((stats.snapshots_applied, stats.expired_snapshots_applied), (1, 1));
    assert_eq!(stats.update_failures, 0);
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        Verdict::Safe { stale: true }
    );
    let verdict = agent.check_url(LISTED).await.unwrap();
    assert!(
        matches!(&verdict, Verdict::Unsafe { stale: true, .. }),
        "{verdict:?}"
    );

    // The newest verified snapshot is the one used.
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]).valid(now - 30, now + 7200));
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Updated {
            previous: Some(1),
            version: 2
        })
    ));

    // A restart with the clock still ahead answers from the cache, stale;
    // the skew is known again from the first response.
    drop(agent);
    let agent = builder.build().unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    assert!(agent.status().is_stale());
    assert_eq!(agent.stats().expired_snapshots_loaded_from_cache, 1);
    assert_eq!(agent.status().clock_skew, None);
    assert!(matches!(
        agent.update().await.unwrap().get("malware"),
        Some(ListUpdate::Unchanged { version: 2 })
    ));
    assert!(about(agent.status().clock_skew, two_days_ahead));

    // The clock is put right: fresh, with no skew, without an update or a
    // restart.
    clock.set(at(now + 5));
    let status = agent.status();
    assert!(!status.is_stale(), "{status:?}");
    assert_eq!(status.clock_skew, None);
    assert_eq!(
        status.list("malware").unwrap().source,
        Some(SnapshotSource::Cache)
    );
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        Verdict::Safe { stale: false }
    );
    let verdict = agent.check_url(LISTED).await.unwrap();
    assert!(
        matches!(&verdict, Verdict::Unsafe { stale: false, .. }),
        "{verdict:?}"
    );
    // The full-hash answer just now carried a `Date` as well: no skew.
    assert_eq!(agent.status().clock_skew, None);
}

#[tokio::test]
async fn clock_an_hour_behind_is_reported_as_behind() {
    let now = unix_now();
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).valid(now - 60, now + 7200));
    let agent = fake
        .agent_builder(&["malware"])
        .time_provider(ManualClock::new(at(now - 3600)))
        .build()
        .unwrap();
    agent.update().await.unwrap();
    let status = agent.status();
    assert!(!status.is_stale());
    assert!(
        about(status.clock_skew, ClockSkew::Behind(Duration::from_secs(3600))),
        "{:?}",
        status.clock_skew
    );
}

#[tokio::test]
async fn a_right_clock_reports_no_skew() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    assert_eq!(agent.status().clock_skew, None);
    assert!(!agent.status().is_stale());
}

/// Half a second past a snapshot's signed `expires_at` it has expired
/// (fresh while `now ≤ expires_at`): the status says stale, verdicts say
/// stale, and the download counts as an expired one, as `expires_at` in
/// the same status is already in the past.
#[tokio::test]
async fn a_snapshot_is_stale_as_soon_as_its_expiry_has_passed() {
    let now = unix_now();
    let expires = now + 600;
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).valid(now - 60, expires));
    let clock = ManualClock::new(at(expires) + Duration::from_millis(500));
    let agent = fake
        .agent_builder(&["malware"])
        .time_provider(clock.clone())
        .build()
        .unwrap();
    agent.update().await.unwrap();
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert!(
        list.expires_at.unwrap() < at(expires) + Duration::from_millis(500),
        "{list:?}"
    );
    assert!(list.stale, "expired half a second ago, reported fresh: {list:?}");
    assert_eq!(agent.stats().expired_snapshots_applied, 1);
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        Verdict::Safe { stale: true }
    );
    // At exactly `expires_at` it is still fresh.
    clock.set(at(expires));
    assert!(!agent.status().is_stale());
}

/// A `Retry-After` given as an HTTP-date (as a CDN or proxy in front of the
/// publisher sends it) is an instant on the clock of whoever answered: with
/// this agent's clock two hours behind, a `503` asking for 30 seconds
/// paused every full-hash request (every check's hit unverified) for the
/// longest server delay, an hour. It is read against the response's `Date`.
#[tokio::test]
async fn regression_a_retry_after_date_is_read_against_the_responses_date_not_a_clock_behind() {
    let now = unix_now();
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).valid(now - 60, now + 7200));
    fake.list_expressions("malware", &["evil.example/"]);
    let agent = fake
        .agent_builder(&["malware"])
        .time_provider(ManualClock::new(at(now - 2 * 3600)))
        .build()
        .unwrap();
    agent.update().await.unwrap();
    fake.set_search_mode(blocksieve_tests::fake::SearchMode::RetryAfter(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        crate::faults::httpdate_in(Duration::from_secs(30)),
    ));
    let verdict = agent.check_url(LISTED).await.unwrap();
    assert!(verdict.is_unverified(), "{verdict:?}");
    let paused = agent.status().full_hash_paused_for.unwrap();
    assert!(paused <= Duration::from_secs(32), "paused for {paused:?}");
}
