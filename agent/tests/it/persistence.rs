//! The cache directory: offline start, staleness (an expired cached
//! snapshot is used, stale), the version floor across restarts, quarantine
//! of corrupt files.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use blocksieve_agent::{Agent, AgentBuilder, Error, FailurePolicy, ListUpdate, SnapshotSource, Verdict};

use blocksieve_tests::clock::ManualClock;
use blocksieve_tests::fake::{FakePublisher, SearchMode, Served, unreachable_url};
use blocksieve_tests::snapshot::{Snap, trusted, unix_now};

const LISTED: &str = "http://evil.example/landing";

/// An agent on `base_url` persisting to `dir`, reading time from `clock`.
fn builder(base_url: &str, dir: &Path, clock: &std::sync::Arc<ManualClock>) -> AgentBuilder {
    Agent::builder(base_url)
        .list("malware")
        .trusted_key(trusted())
        .cache_dir(dir)
        .time_provider(clock.clone())
}

fn at(unix: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(unix)
}

/// Persists `malware` v2 (listing `evil.example/`, valid for an hour from
/// `now`) into `dir` through a real update.
async fn persist_v2(dir: &Path, now: u64) -> FakePublisher {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]).valid(now - 60, now + 3600));
    let agent = builder(&fake.base_url, dir, &ManualClock::new(at(now)))
        .build()
        .unwrap();
    agent.update().await.unwrap();
    assert!(dir.join("malware.snapshot").is_file());
    assert!(dir.join("malware.record.json").is_file());
    fake
}

#[tokio::test]
async fn offline_start_answers_from_the_cache_and_flags_staleness_after_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    persist_v2(dir.path(), now).await;

    // Restart with the publisher unreachable.
    let clock = ManualClock::new(at(now + 10));
    let agent = builder(&unreachable_url(), dir.path(), &clock)
        .failure_policy(FailurePolicy::FailClosed)
        .build()
        .unwrap();

    // Lookups answer before any request.
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    assert_eq!(agent.lookup_local(LISTED).unwrap().hits.len(), 1);
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        Verdict::Safe { stale: false }
    );
    // A hit cannot be confirmed offline: unverified, blocked under fail-closed.
    let verdict = agent.check_url(LISTED).await.unwrap();
    assert!(
        matches!(
            &verdict,
            Verdict::Unverified {
                block: true,
                stale: false,
                ..
            }
        ),
        "{verdict:?}"
    );
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert_eq!(list.source, Some(SnapshotSource::Cache));
    assert!(!list.stale);
    assert_eq!(list.version_floor, Some(2));
    assert_eq!(agent.stats().snapshots_loaded_from_cache, 1);

    // The update fails, but the agent is ready: Ok with a failed report.
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Failed {
            kept_version: Some(2),
            ..
        })
    ));

    // Past expiry: still answering, but stale everywhere.
    clock.set(at(now + 3601));
    let status = agent.status();
    assert!(status.is_stale());
    assert!(status.list("malware").unwrap().stale);
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        Verdict::Safe { stale: true }
    );
    assert!(agent.lookup_local(LISTED).unwrap().stale);
    assert!(agent.check_url(LISTED).await.unwrap().is_stale());
}

/// A restart after the cached snapshot's `expires_at`,
/// with the publisher down, answers from that snapshot, flagged stale,
/// instead of `NotReady`.
#[tokio::test]
async fn restart_after_expiry_with_the_publisher_down_answers_stale_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    persist_v2(dir.path(), now).await;

    let clock = ManualClock::new(at(now + 3601));
    let agent = builder(&unreachable_url(), dir.path(), &clock)
        .failure_policy(FailurePolicy::FailClosed)
        .build()
        .unwrap();

    assert_eq!(agent.snapshot_version("malware"), Some(2));
    let status = agent.status();
    assert!(status.is_ready() && status.is_stale());
    let list = status.list("malware").unwrap();
    assert_eq!(list.source, Some(SnapshotSource::Cache));
    assert_eq!(list.version_floor, Some(2));
    // Misses are safe as of the old snapshot, and say so.
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        Verdict::Safe { stale: true }
    );
    // Hits cannot be confirmed offline: unverified (blocked under
    // fail-closed), stale.
    let verdict = agent.check_url(LISTED).await.unwrap();
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
    // The failed update leaves the agent ready: a report, not NotReady.
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Failed {
            kept_version: Some(2),
            ..
        })
    ));
    let stats = agent.stats();
    assert_eq!(stats.snapshots_loaded_from_cache, 1);
    assert_eq!(stats.expired_snapshots_loaded_from_cache, 1);
    assert_eq!(stats.cache_files_quarantined, 0);
    assert_eq!(stats.update_failures_by.transport, 1);
}

/// With the publisher answering 4xx: the expired cached
/// snapshot answers (hits confirmed as soon as the full-hash endpoint
/// works), the version floor still holds, and the background updates make
/// the list fresh once the publisher serves again.
#[tokio::test]
async fn restart_after_expiry_with_the_publisher_answering_400_answers_stale_then_updates() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    let fake = persist_v2(dir.path(), now).await;
    fake.serve("malware", Served::Status(StatusCode::BAD_REQUEST));
    fake.set_search_mode(SearchMode::Status(StatusCode::BAD_REQUEST));
    fake.list_expressions("malware", &["evil.example/"]);

    let clock = ManualClock::new(at(now + 3601));
    // A cold-start jitter of zero: the first background check of a list
    // without a fresh snapshot comes at once (a fresh one would wait).
    let agent = builder(&fake.base_url, dir.path(), &clock)
        .initial_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Failed {
                error: Error::Status { status: 400, .. },
                kept_version: Some(2),
            })
        ),
        "{report:?}"
    );
    assert!(agent.status().list("malware").unwrap().stale);
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        Verdict::Safe { stale: true }
    );
    let verdict = agent.check_url(LISTED).await.unwrap();
    assert!(
        matches!(
            &verdict,
            Verdict::Unverified {
                block: false,
                stale: true,
                ..
            }
        ),
        "{verdict:?}"
    );
    // The full-hash endpoint works again (the snapshot still does not): the
    // hit is confirmed, still stale.
    fake.set_search_mode(SearchMode::Normal);
    clock.advance(Duration::from_secs(2)); // past the full-hash backoff (at most 1 s)
    let verdict = agent.check_url(LISTED).await.unwrap();
    assert!(
        matches!(&verdict, Verdict::Unsafe { stale: true, .. }),
        "{verdict:?}"
    );

    // An older snapshot, even fresh, is still a rollback.
    fake.serve_snapshot(&Snap::new("malware", 1, &[]).valid(now, now + 7200));
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Failed {
                error: Error::Rollback {
                    trusted_version: 2,
                    new_version: 1,
                    ..
                },
                kept_version: Some(2),
            })
        ),
        "{report:?}"
    );

    // The publisher is back with a fresh v3: the background task, whose
    // first check comes soon for a list without a fresh snapshot, loads it.
    fake.serve_snapshot(&Snap::new("malware", 3, &["evil.example/"]).valid(now, now + 7200));
    let updates = agent.start_updates().unwrap();
    for _ in 0..500 {
        if agent.snapshot_version("malware") == Some(3) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    updates.shutdown().await;
    assert_eq!(agent.snapshot_version("malware"), Some(3));
    let status = agent.status();
    assert!(!status.is_stale());
    assert_eq!(
        status.list("malware").unwrap().source,
        Some(SnapshotSource::Network)
    );
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        Verdict::Safe { stale: false }
    );
    assert!(matches!(
        agent.check_url(LISTED).await.unwrap(),
        Verdict::Unsafe { stale: false, .. }
    ));
    assert_eq!(agent.stats().expired_snapshots_applied, 0);
}

#[tokio::test]
async fn the_floor_survives_a_restart_even_without_the_snapshot_file() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    let fake = persist_v2(dir.path(), now).await;
    let v2 = Snap::new("malware", 2, &["evil.example/"]).valid(now - 60, now + 3600);

    // A restarted agent refuses the older version.
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    let clock = ManualClock::new(at(now));
    let agent = builder(&fake.base_url, dir.path(), &clock).build().unwrap();
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Failed {
            error: Error::Rollback {
                trusted_version: 2,
                new_version: 1,
                ..
            },
            kept_version: Some(2)
        })
    ));
    drop(agent);

    // Without the snapshot file, the record alone still holds the floor...
    std::fs::remove_file(dir.path().join("malware.snapshot")).unwrap();
    let agent = builder(&fake.base_url, dir.path(), &clock).build().unwrap();
    assert_eq!(agent.snapshot_version("malware"), None);
    let error = agent.update().await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::Rollback {
                trusted_version: 2,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(agent.stats().update_failures_by.rollback, 1);

    // ...while the very snapshot that set it is accepted again.
    fake.serve_snapshot(&v2);
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Updated {
            previous: None,
            version: 2
        })
    ));
    assert!(dir.path().join("malware.snapshot").is_file());
}

#[tokio::test]
async fn the_first_request_after_a_restart_is_conditional() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    let fake = persist_v2(dir.path(), now).await;
    let agent = builder(&fake.base_url, dir.path(), &ManualClock::new(at(now)))
        .build()
        .unwrap();
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 2 })
    ));
    let requests = fake.snapshot_requests();
    assert!(requests.last().unwrap().if_none_match.is_some());
}

#[tokio::test]
async fn a_corrupt_cache_file_is_quarantined_not_crash_looped_on() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    let fake = persist_v2(dir.path(), now).await;
    let snapshot = dir.path().join("malware.snapshot");
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&snapshot, &bytes).unwrap();

    let clock = ManualClock::new(at(now));
    let agent = builder(&fake.base_url, dir.path(), &clock).build().unwrap();

    assert_eq!(agent.snapshot_version("malware"), None);
    assert_eq!(agent.stats().cache_files_quarantined, 1);
    let status = agent.status();
    let storage_error = status.list("malware").unwrap().last_storage_error.clone();
    assert!(
        matches!(&storage_error, Some(Error::CorruptCache { reason, .. }) if reason.contains("SHA-256")),
        "{storage_error:?}"
    );
    assert!(!snapshot.exists());
    assert!(dir.path().join("malware.snapshot.quarantined").is_file());
    // The floor (a separate file) still holds.
    assert_eq!(status.list("malware").unwrap().version_floor, Some(2));

    // A second start does not trip over it again.
    drop(agent);
    let agent = builder(&fake.base_url, dir.path(), &clock).build().unwrap();
    assert_eq!(agent.stats().cache_files_quarantined, 0);

    // The network repairs the cache.
    agent.update().await.unwrap();
    assert!(snapshot.is_file());
    drop(agent);
    let agent = builder(&unreachable_url(), dir.path(), &clock).build().unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(2));
}

#[tokio::test]
async fn a_genuine_snapshot_of_another_list_in_the_cache_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    std::fs::write(
        dir.path().join("malware.snapshot"),
        Snap::new("phishing", 9, &[]).encode(),
    )
    .unwrap();
    std::fs::write(dir.path().join("malware.record.json"), b"{ not a record").unwrap();
    let agent = builder(&unreachable_url(), dir.path(), &ManualClock::new(at(now)))
        .build()
        .unwrap();
    assert_eq!(agent.snapshot_version("malware"), None);
    assert_eq!(agent.stats().cache_files_quarantined, 2);
    assert!(dir.path().join("malware.snapshot.quarantined").is_file());
    assert!(dir.path().join("malware.record.json.quarantined").is_file());
}

#[tokio::test]
async fn a_cached_snapshot_signed_by_a_key_no_longer_trusted_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    persist_v2(dir.path(), now).await;
    let agent = Agent::builder(unreachable_url())
        .list("malware")
        .trusted_key(blocksieve_tests::snapshot::stranger_key().public_key().clone())
        .cache_dir(dir.path())
        .build()
        .unwrap();
    assert_eq!(agent.snapshot_version("malware"), None);
    let status = agent.status();
    let error = status.list("malware").unwrap().last_storage_error.clone();
    assert!(
        matches!(&error, Some(Error::CorruptCache { reason, .. }) if reason.contains("unknown key")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_failed_write_is_reported_and_the_snapshot_used_anyway() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the snapshot file should go: the rename fails, even
    // for root.
    std::fs::create_dir_all(dir.path().join("malware.snapshot/blocker")).unwrap();
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    let agent = fake
        .agent_builder(&["malware"])
        .cache_dir(dir.path())
        .build()
        .unwrap();
    // Unreadable at start: reported, not fatal.
    assert!(matches!(
        agent.status().list("malware").unwrap().last_storage_error,
        Some(Error::Storage { .. })
    ));

    let report = agent.update().await.unwrap();

    assert!(report.is_complete());
    assert_eq!(agent.snapshot_version("malware"), Some(1));
    assert_eq!(agent.stats().persist_failures, 1);
    let status = agent.status();
    let error = status.list("malware").unwrap().last_storage_error.clone();
    assert!(
        matches!(&error, Some(Error::Storage { path, .. }) if path.ends_with("malware.snapshot")),
        "{error:?}"
    );
}
