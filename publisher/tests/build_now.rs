//! SIGUSR1 ("build now") against a running `serve`, when a build is
//! already running, on a replica, and at shutdown (README "Deploy",
//! `drain_timeout_s` in docs/configuration.md). A build is held open as
//! long as a test wants by a named pipe as its list's source ([`Feed`]), so
//! that "while a build runs" holds on any machine; the builds are counted
//! from the log once the process has exited, when every build it started
//! has ended. Each `serve` is killed when its test ends, passed or failed.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use blocksieve_format::SigningKey;
use blocksieve_tests::KillOnDrop;
use blocksieve_tests::process::{
    Feed, Log, PATIENCE, exit_within, http_get, kill, listening, one_list, serve,
};

const BIN: &str = env!("CARGO_BIN_EXE_blocksieve-publisher");
/// A schedule that never fires during a test: builds come from the start
/// and the signals alone.
const YEARLY: &str = "schedule = \"0 0 0 1 1 *\"\n";
/// What `serve` logs for each SIGUSR1 it acts on.
const BUILDING: &str = "SIGUSR1: building every list now";

/// How many of `lines` hold `text`.
fn count(lines: &[String], text: &str) -> usize {
    lines.iter().filter(|l| l.contains(text)).count()
}

/// A replica builds nothing: SIGUSR1 is logged as ignored (saying where to
/// send it), from the moment it says it listens, and the replica serves
/// on; SIGTERM still stops it cleanly. By default SIGUSR1 would end the
/// process. A signal sent as soon as it said it listens went unanswered
/// (about one start in four here): `run` listened for SIGUSR1 only from
/// when it started, and the signals caught before were dropped.
#[test]
fn regression_a_replica_logs_sigusr1_as_ignored_from_its_start_and_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("feed.txt"), "http://evil.example/x\n").unwrap();
    // A store nothing answers for: the replica starts and serves what it
    // has (nothing), trying the store again meanwhile.
    let builders = SigningKey::from_secret_bytes([7; 32]).public_key().to_base64();
    let config = one_list(
        dir.path(),
        &format!(
            "store = \"s3://unreachable/prefix\"\npublic_key = \"{builders}\"\n\
             store_options = {{ endpoint = \"http://127.0.0.1:1\", allow_http = \"true\", \
             region = \"us-east-1\", access_key_id = \"k\", secret_access_key = \"s\" }}\n{YEARLY}"
        ),
    );
    let (mut child, mut log) = serve(BIN, &config, &["--role", "replica"]);
    let addr = listening(&mut log);

    for _ in 0..2 {
        kill("-USR1", child.id());
        let ignored = log.wait_for("SIGUSR1 ignored");
        assert!(ignored.contains("send it to a builder"), "{ignored}");
        assert!(child.try_wait().unwrap().is_none(), "a replica ended on SIGUSR1");
        assert!(
            http_get(&addr, "/healthz").0.contains("200"),
            "no answer after SIGUSR1"
        );
    }

    kill("-TERM", child.id());
    let status = exit_within(&mut child, PATIENCE, "still running");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let lines = log.all();
    assert_eq!(count(&lines, BUILDING), 0, "{lines:#?}");
    assert_eq!(count(&lines, "published snapshot"), 0, "{lines:#?}");
    assert!(
        !dir.path().join("data/signing.key").exists(),
        "a replica made a signing key"
    );
}

/// SIGUSR1 while the list's build runs (the first one, held on its
/// source) is not lost: once that build ends, one more starts (it opens
/// the source anew) and publishes; and only one: two builds in all by the
/// time the process has exited.
#[test]
fn sigusr1_during_a_build_is_followed_by_one_more_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let feed = Feed::new(&dir.path().join("feed.txt"));
    let (child, mut log) = serve(BIN, &one_list(dir.path(), YEARLY), &[]);
    let addr = listening(&mut log);
    feed.open();
    assert_eq!(feed.next_opening(), 1);

    kill("-USR1", child.id());
    log.wait_for(BUILDING);
    feed.release();
    log.wait_for("published snapshot");
    feed.open();
    assert_eq!(feed.next_opening(), 2, "no build after the signal");
    feed.release();
    log.wait_for("published snapshot");
    let (status, history) = http_get(&addr, "/v1/lists/good/history");
    assert!(status.contains("200"), "{status}");
    assert_eq!(
        history.matches(r#""outcome":"published""#).count(),
        2,
        "{history}"
    );
    ends_with_no_third_build(&feed, child, log);
}

/// Three SIGUSR1, each acted on (logged) while the list's build runs, are
/// merged into the one more build that waits for it to end: two builds in
/// all, not four.
#[test]
fn sigusr1s_while_one_more_build_waits_are_merged_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let feed = Feed::new(&dir.path().join("feed.txt"));
    let (child, mut log) = serve(BIN, &one_list(dir.path(), YEARLY), &[]);
    listening(&mut log);
    feed.open();
    assert_eq!(feed.next_opening(), 1);

    // One at a time: signals sent at once may reach the process as one.
    for _ in 0..3 {
        kill("-USR1", child.id());
        log.wait_for(BUILDING);
    }
    feed.release();
    log.wait_for("published snapshot");
    feed.open();
    assert_eq!(feed.next_opening(), 2, "no build after the signals");
    feed.release();
    log.wait_for("published snapshot");
    let lines = ends_with_no_third_build(&feed, child, log);
    assert_eq!(count(&lines, BUILDING), 3, "{lines:#?}");
}

/// Once two builds have published: lets a third build, if any, read its
/// source whole, stops `serve` (SIGTERM: it waits for the builds it
/// started) and checks that there were two builds, neither cut off;
/// returns every log line.
fn ends_with_no_third_build(feed: &Feed, mut child: KillOnDrop, log: Log) -> Vec<String> {
    feed.open();
    feed.release();
    kill("-TERM", child.id());
    // A fourth build would wait for its source, and `serve` with it.
    let status = exit_within(&mut child, PATIENCE, "still running: more builds than two?");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let lines = log.all();
    assert_eq!(count(&lines, "published snapshot"), 2, "{lines:#?}");
    assert_eq!(count(&lines, "list unchanged"), 0, "{lines:#?}");
    assert_eq!(
        count(&lines, "did not finish by the drain deadline"),
        0,
        "{lines:#?}"
    );
    assert!(!feed.opened_since(), "a third build opened the source");
    lines
}

/// SIGTERM while a build SIGUSR1 asked for still reads its source: the
/// build gets the drain deadline (it is not cut off at once), is then
/// cancelled and publishes nothing, and the process exits 0 within
/// twice `drain_timeout_s` (requests, then builds) and a little; the
/// snapshot served before stays the latest.
#[test]
fn sigterm_during_a_requested_build_cancels_it_at_the_drain_deadline() {
    const DRAIN_S: u64 = 2;
    let dir = tempfile::tempdir().unwrap();
    let feed = Feed::new(&dir.path().join("feed.txt"));
    let config = one_list(dir.path(), &format!("drain_timeout_s = {DRAIN_S}\n{YEARLY}"));
    let (mut child, mut log) = serve(BIN, &config, &[]);
    listening(&mut log);
    feed.open();
    feed.release();
    assert_eq!(feed.next_opening(), 1);
    log.wait_for("published snapshot");
    let latest = dir.path().join("data/lists/good/latest");
    let before = std::fs::read(&latest).unwrap();

    feed.open();
    kill("-USR1", child.id());
    log.wait_for(BUILDING);
    assert_eq!(feed.next_opening(), 2);
    let stopping = Instant::now();
    kill("-TERM", child.id());
    let status = exit_within(
        &mut child,
        Duration::from_secs(2 * DRAIN_S + 5),
        "serve still running: the requested build was not cancelled",
    );
    let took = stopping.elapsed();
    assert_eq!(status.code(), Some(0), "{status:?}");
    // The deadline starts after the signal: a slow machine only takes
    // longer.
    assert!(
        took >= Duration::from_secs(DRAIN_S),
        "the build was cut off before the drain deadline: stopped in {took:?}"
    );
    let lines = log.all();
    assert_eq!(
        count(
            &lines,
            "a requested build did not finish by the drain deadline; cancelled"
        ),
        1,
        "{lines:#?}"
    );
    assert_eq!(count(&lines, "build cancelled"), 1, "{lines:#?}");
    assert_eq!(count(&lines, "published snapshot"), 1, "{lines:#?}");
    assert_eq!(
        std::fs::read(&latest).unwrap(),
        before,
        "the cancelled build published"
    );
}

/// Scheduled firings while the list's build runs longer than the
/// schedule's interval are merged into the one build that waits for it
/// (as SIGUSR1s are), not queued one build each: once the long build
/// ends, the builds that follow come at the schedule's pace, not back to
/// back until every firing has had its own. Before, each firing spawned a
/// build that waited on the list's build lock: a list whose builds
/// outlast its schedule piled up waiting builds without bound (3 firings
/// during a 10-s build: 3 builds back to back after it, and the pile grew
/// as long as builds stayed slower than the schedule).
#[test]
fn regression_scheduled_firings_during_a_long_build_are_merged_into_one_waiting_build() {
    let dir = tempfile::tempdir().unwrap();
    let feed = Feed::new(&dir.path().join("feed.txt"));
    // Every 3 s; the first build (at start) is held 10 s: 3 or 4 firings.
    let (child, mut log) = serve(BIN, &one_list(dir.path(), "schedule = \"*/3 * * * * *\"\n"), &[]);
    listening(&mut log);
    feed.open();
    assert_eq!(feed.next_opening(), 1);
    std::thread::sleep(Duration::from_secs(10));
    feed.release();
    log.wait_for("published snapshot");
    // Every build that opens the source within 2 s of the long build's end
    // is let read it at once: the one waiting build, and at most one
    // firing's (2 s hold at most one firing of a 3-s schedule).
    let window = Instant::now() + Duration::from_secs(2);
    let mut builds = 0;
    loop {
        feed.open();
        let Some(_) = feed.opening_within(window.saturating_duration_since(Instant::now())) else {
            break;
        };
        builds += 1;
        feed.release();
        log.wait_for("published snapshot");
    }
    assert!(builds >= 1, "no build after the firings during the long one");
    assert!(
        builds <= 2,
        "{builds} builds within 2 s of the long build's end: firings during it queued a build each"
    );
    drop(child);
}
