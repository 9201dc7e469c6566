//! The background update task at runtime level: it loads lists, follows new
//! versions, stops on shutdown or when its handle or agent is dropped.
//! (Its timetable — jitter, hints, backoff, `Retry-After` — is tested with a
//! paused clock in the crate's `updater` unit tests and `engine::schedule`.)

use std::time::Duration;

use blocksieve_agent::Error;

use blocksieve_tests::fake::{FakePublisher, Raw, RawServer};
use blocksieve_tests::snapshot::{Snap, unix_now};

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn publisher() -> FakePublisher {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    fake
}

#[tokio::test]
async fn updates_load_follow_and_stop_on_shutdown() {
    let fake = publisher().await;
    let agent = fake
        .agent_builder(&["malware"])
        .initial_jitter(Duration::ZERO)
        .update_interval(Duration::from_secs(1))
        .build()
        .unwrap();

    let updates = agent.start_updates().unwrap();
    assert!(updates.is_running() && agent.updates_running());
    assert!(matches!(agent.start_updates(), Err(Error::UpdatesAlreadyRunning)));
    until("the first snapshot", || {
        agent.snapshot_version("malware") == Some(1)
    })
    .await;

    // Version 2 expires in 3 s, so that the restart below is only briefly
    // "warm" (its initial jitter is at most half the time left).
    let now = unix_now();
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]).valid(now, now + 3));
    until("the next snapshot", || {
        agent.snapshot_version("malware") == Some(2)
    })
    .await;
    assert!(agent.status().updates_running);

    updates.shutdown().await;
    assert!(!agent.updates_running());
    let requests = fake.snapshot_requests().len();
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert_eq!(
        fake.snapshot_requests().len(),
        requests,
        "requests after shutdown"
    );

    // Updates can be started again, and the agent's own shutdown stops them.
    let _again = agent.start_updates().unwrap();
    fake.serve_snapshot(&Snap::new("malware", 3, &["evil.example/"]));
    until("a snapshot after restart", || {
        agent.snapshot_version("malware") == Some(3)
    })
    .await;
    agent.shutdown().await;
    assert!(!agent.updates_running());
}

#[tokio::test]
async fn dropping_the_handle_stops_the_updates() {
    let fake = publisher().await;
    let agent = fake
        .agent_builder(&["malware"])
        .initial_jitter(Duration::ZERO)
        .update_interval(Duration::from_secs(1))
        .build()
        .unwrap();
    let updates = agent.start_updates().unwrap();
    until("the first snapshot", || {
        agent.snapshot_version("malware") == Some(1)
    })
    .await;

    drop(updates);

    until("the task to end", || !agent.updates_running()).await;
    let requests = fake.snapshot_requests().len();
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert_eq!(fake.snapshot_requests().len(), requests);
}

#[tokio::test]
async fn dropping_the_agent_ends_the_task() {
    let fake = publisher().await;
    let agent = fake
        .agent_builder(&["malware"])
        .initial_jitter(Duration::ZERO)
        .update_interval(Duration::from_secs(1))
        .build()
        .unwrap();
    let updates = agent.start_updates().unwrap();
    until("the first snapshot", || {
        agent.snapshot_version("malware") == Some(1)
    })
    .await;

    drop(agent);

    assert!(!updates.is_running());
    let requests = fake.snapshot_requests().len();
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert_eq!(fake.snapshot_requests().len(), requests);
    updates.shutdown().await;
}

/// An agent dropped while its task is in the middle of a download keeps the
/// task's slot until that step ends: the handle still reports the task as
/// running and `shutdown` still waits for it to end.
#[tokio::test]
async fn dropping_the_agent_during_a_download_keeps_the_handle_truthful() {
    let raw = RawServer::repeat(Raw::Hang).await;
    let agent = raw
        .agent_builder()
        .initial_jitter(Duration::ZERO)
        .update_interval(Duration::from_secs(1))
        .build()
        .unwrap();
    let updates = agent.start_updates().unwrap();
    until("the download to start", || raw.connections() > 0).await;

    drop(agent);

    assert!(updates.is_running(), "the step still runs");
    tokio::time::timeout(Duration::from_secs(10), updates.shutdown())
        .await
        .expect("shutdown ends the task, abandoning the download");
}

#[tokio::test]
async fn the_next_check_hint_spaces_the_checks() {
    let fake = publisher().await;
    // One hour: after the first check, no other within the test.
    fake.set_next_check_s(3600);
    let agent = fake
        .agent_builder(&["malware"])
        .initial_jitter(Duration::ZERO)
        .update_interval(Duration::from_secs(1))
        .build()
        .unwrap();
    let _updates = agent.start_updates().unwrap();
    until("the first snapshot", || {
        agent.snapshot_version("malware") == Some(1)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert_eq!(fake.snapshot_requests().len(), 1);
}
