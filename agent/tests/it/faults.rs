//! Every kind of bad download, from fault-injecting servers: the exact
//! outcome, the exact counter, and that the previous filter still answers.

use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;
use blocksieve_agent::{Agent, Error, ErrorKind, ListUpdate, UpdateFailures, UpdateReport};
use blocksieve_format::DecodeError;

use blocksieve_tests::fake::{FakePublisher, RawServer, Served};
use blocksieve_tests::snapshot::{Snap, stranger_key, unix_now};

const LISTED: &str = "http://evil.example/landing";

/// A publisher serving `malware` v2 (listing `evil.example/`) and an agent
/// that has loaded it.
async fn loaded() -> (FakePublisher, Agent) {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]));
    fake.list_expressions("malware", &["evil.example/"]);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    (fake, agent)
}

/// The error of a failed list update that kept version 2.
fn kept_v2_because(report: &UpdateReport) -> &Error {
    match report.get("malware") {
        Some(ListUpdate::Failed {
            error,
            kept_version: Some(2),
        }) => error,
        other => panic!("expected a failure keeping version 2, got {other:?}"),
    }
}

/// Exactly one failure was counted, under the reason `field` picks.
fn counted_once(agent: &Agent, field: fn(&UpdateFailures) -> u64) {
    let stats = agent.stats();
    assert_eq!(stats.update_failures, 1, "{stats:?}");
    assert_eq!(field(&stats.update_failures_by), 1, "{stats:?}");
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert_eq!(list.consecutive_failures, 1);
    assert!(list.last_error.is_some());
}

/// The agent still answers from version 2: locally, and with a full-hash
/// confirmation.
async fn still_answers(agent: &Agent) {
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    assert_eq!(agent.lookup_local(LISTED).unwrap().hits.len(), 1);
    assert!(agent.check_url(LISTED).await.unwrap().is_unsafe());
    assert!(agent.check_url("http://fine.example/").await.unwrap().is_safe());
}

/// For raw servers, which serve no full hashes: the filter still answers.
fn filter_still_answers(agent: &Agent) {
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    assert_eq!(agent.lookup_local(LISTED).unwrap().hits.len(), 1);
    assert!(agent.lookup_local("http://fine.example/").unwrap().is_empty());
}

#[tokio::test]
async fn server_error_5xx() {
    let (fake, agent) = loaded().await;
    fake.serve("malware", Served::Status(StatusCode::INTERNAL_SERVER_ERROR));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(
            error,
            Error::Status {
                status: 500,
                retry_after: None,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::Transport);
    assert!(error.to_string().contains("injected"), "{error}");
    assert!(!report.is_complete());
    counted_once(&agent, |f| f.http_status);
    still_answers(&agent).await;
}

#[tokio::test]
async fn timeout_server_accepts_and_never_answers() {
    let v2 = Snap::new("malware", 2, &["evil.example/"]).encode();
    let raw = RawServer::start(vec![RawServer::ok(&v2), blocksieve_tests::fake::Raw::Hang]).await;
    let agent = raw
        .agent_builder()
        .snapshot_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    agent.update().await.unwrap();

    let started = Instant::now();
    let report = agent.update().await.unwrap();

    let error = kept_v2_because(&report);
    assert!(error.is_timeout(), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
    counted_once(&agent, |f| f.timeout);
    filter_still_answers(&agent);
}

#[tokio::test]
async fn one_byte_per_second_drip_is_cut_by_the_snapshot_timeout() {
    let v2 = Snap::new("malware", 2, &["evil.example/"]).encode();
    let v3 = Snap::new("malware", 3, &["evil.example/"]).encode();
    let raw = RawServer::start(vec![
        RawServer::ok(&v2),
        RawServer::drip(&v3, Duration::from_secs(1)),
    ])
    .await;
    let agent = raw
        .agent_builder()
        .snapshot_timeout(Duration::from_millis(1_500))
        .build()
        .unwrap();
    agent.update().await.unwrap();

    let started = Instant::now();
    let report = agent.update().await.unwrap();
    let took = started.elapsed();

    let error = kept_v2_because(&report);
    assert!(error.is_timeout(), "{error}");
    // Bounded by the total snapshot timeout, not by bytes or reads: at one
    // byte per second the body would take minutes.
    assert!(
        took >= Duration::from_millis(1_400) && took < Duration::from_secs(4),
        "{took:?}"
    );
    counted_once(&agent, |f| f.timeout);
    filter_still_answers(&agent);
}

#[tokio::test]
async fn truncated_body() {
    let (fake, agent) = loaded().await;
    let bytes = Snap::new("malware", 3, &["a.example/", "b.example/"]).encode();
    fake.serve("malware", Served::Snapshot(bytes[..bytes.len() - 10].to_vec()));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(
            error,
            Error::Decode {
                reason: DecodeError::BodyLength { declared, actual },
                ..
            } if declared - actual == 10
        ),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::BadData);
    counted_once(&agent, |f| f.malformed);
    still_answers(&agent).await;
}

#[tokio::test]
async fn connection_cut_mid_body() {
    let v2 = Snap::new("malware", 2, &["evil.example/"]).encode();
    let v3 = Snap::new("malware", 3, &[]).encode();
    let raw = RawServer::start(vec![RawServer::ok(&v2), RawServer::cut(&v3, v3.len() / 2)]).await;
    let agent = raw.agent_builder().build().unwrap();
    agent.update().await.unwrap();

    let report = agent.update().await.unwrap();

    let error = kept_v2_because(&report);
    assert!(
        matches!(error, Error::Transport { timed_out: false, .. }),
        "{error}"
    );
    counted_once(&agent, |f| f.transport);
    filter_still_answers(&agent);
}

#[tokio::test]
async fn extra_trailing_bytes() {
    let (fake, agent) = loaded().await;
    let mut bytes = Snap::new("malware", 3, &["a.example/"]).encode();
    bytes.extend_from_slice(b"trailing garbage");
    fake.serve("malware", Served::Snapshot(bytes));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(
            error,
            Error::Decode {
                reason: DecodeError::BodyLength { declared, actual },
                ..
            } if actual - declared == 16
        ),
        "{error}"
    );
    counted_once(&agent, |f| f.malformed);
    still_answers(&agent).await;
}

#[tokio::test]
async fn bad_signature() {
    let (fake, agent) = loaded().await;
    let mut bytes = Snap::new("malware", 3, &[]).encode();
    // Lowest byte of created_at (magic 8, version 2, header length 2, name
    // length 1, "malware" 7, snapshot version 8): still a valid header, no
    // longer the signed one.
    bytes[28] ^= 1;
    fake.serve("malware", Served::Snapshot(bytes));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(
            error,
            Error::Decode {
                reason: DecodeError::BadSignature,
                ..
            }
        ),
        "{error}"
    );
    counted_once(&agent, |f| f.bad_signature);
    still_answers(&agent).await;
}

#[tokio::test]
async fn unknown_key() {
    let (fake, agent) = loaded().await;
    fake.serve_snapshot(&Snap::new("malware", 3, &[]).signed_by(stranger_key()));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(
            error,
            Error::Decode {
                reason: DecodeError::UnknownKey { .. },
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::BadData);
    counted_once(&agent, |f| f.unknown_key);
    still_answers(&agent).await;
}

#[tokio::test]
async fn older_version_is_a_rollback() {
    let (fake, agent) = loaded().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &[]));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert_eq!(
        error,
        &Error::Rollback {
            list: "malware".into(),
            trusted_version: 2,
            new_version: 1
        }
    );
    assert_eq!(
        error.to_string(),
        "snapshot of list malware has version 1, not newer than trusted version 2"
    );
    counted_once(&agent, |f| f.rollback);
    still_answers(&agent).await;
}

#[tokio::test]
async fn same_version_with_different_content_is_a_rollback() {
    let (fake, agent) = loaded().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &[]));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(
            error,
            Error::Rollback {
                trusted_version: 2,
                new_version: 2,
                ..
            }
        ),
        "{error}"
    );
    counted_once(&agent, |f| f.rollback);
    still_answers(&agent).await;
}

/// A newer snapshot that has already expired by the agent's clock (a frozen
/// feed, or a clock ahead) is not a failure: it is used, stale, and counted
/// as applied-expired.
#[tokio::test]
async fn already_expired_newer_snapshot_is_accepted_stale_not_counted_as_a_failure() {
    let (fake, agent) = loaded().await;
    let now = unix_now();
    fake.serve_snapshot(&Snap::new("malware", 3, &["evil.example/"]).valid(now - 7200, now - 60));
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Updated {
                previous: Some(2),
                version: 3
            })
        ),
        "{report:?}"
    );
    let stats = agent.stats();
    assert_eq!(stats.update_failures, 0, "{stats:?}");
    assert_eq!((stats.snapshots_applied, stats.expired_snapshots_applied), (2, 1));
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert!(list.stale && list.last_error.is_none() && list.consecutive_failures == 0);
    assert!(agent.check_url(LISTED).await.unwrap().is_stale());
    assert!(agent.check_url(LISTED).await.unwrap().is_unsafe());
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        blocksieve_agent::Verdict::Safe { stale: true }
    );
}

/// Expiry opens nothing past the version floor: an expired older snapshot
/// (the replay of a freeze attack) is the rollback it always was.
#[tokio::test]
async fn already_expired_older_snapshot_is_a_rollback() {
    let (fake, agent) = loaded().await;
    let now = unix_now();
    fake.serve_snapshot(&Snap::new("malware", 1, &[]).valid(now - 7200, now - 60));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(
            error,
            Error::Rollback {
                trusted_version: 2,
                new_version: 1,
                ..
            }
        ),
        "{error}"
    );
    counted_once(&agent, |f| f.rollback);
    assert_eq!(agent.stats().expired_snapshots_applied, 0);
    still_answers(&agent).await;
}

#[tokio::test]
async fn snapshot_of_another_list() {
    let (fake, agent) = loaded().await;
    fake.serve(
        "malware",
        Served::Snapshot(Snap::new("phishing", 9, &[]).encode()),
    );
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(error, Error::WrongList { requested, found } if requested == "malware" && found == "phishing"),
        "{error}"
    );
    counted_once(&agent, |f| f.wrong_list);
    still_answers(&agent).await;
}

#[tokio::test]
async fn not_modified_304_is_unchanged_and_no_failure() {
    let (fake, agent) = loaded().await;
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 2 })
    ));
    assert!(report.is_complete());
    let requests = fake.snapshot_requests();
    assert!(requests[1].if_none_match.is_some());
    assert_eq!(agent.stats().update_failures, 0);
    assert_eq!(agent.stats().snapshots_applied, 1);
    still_answers(&agent).await;
}

#[tokio::test]
async fn retry_after_on_503_and_429_is_reported_for_the_schedule() {
    let (fake, agent) = loaded().await;
    fake.serve(
        "malware",
        Served::RetryAfter(StatusCode::SERVICE_UNAVAILABLE, "120".into()),
    );
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(error, Error::Status { status: 503, retry_after: Some(d), .. } if *d == Duration::from_secs(120)),
        "{error}"
    );
    assert_eq!(error.retry_after(), Some(Duration::from_secs(120)));
    counted_once(&agent, |f| f.http_status);
    still_answers(&agent).await;

    // An HTTP-date works too, and a 429 carries it as well.
    let date = httpdate_in(Duration::from_secs(600));
    fake.serve("malware", Served::RetryAfter(StatusCode::TOO_MANY_REQUESTS, date));
    let report = agent.update().await.unwrap();
    let retry_after = kept_v2_because(&report).retry_after().unwrap();
    assert!(
        retry_after > Duration::from_secs(590) && retry_after <= Duration::from_secs(600),
        "{retry_after:?}"
    );
    assert_eq!(agent.status().list("malware").unwrap().consecutive_failures, 2);

    // A success resets the failure count.
    fake.serve_snapshot(&Snap::new("malware", 3, &["evil.example/"]));
    agent.update().await.unwrap();
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert_eq!(list.consecutive_failures, 0);
    assert!(list.last_error.is_none());
}

/// An HTTP-date (RFC 9110) `after` from now.
pub(crate) fn httpdate_in(after: Duration) -> String {
    let at = SystemTime::now() + after;
    // Format by hand: the test crate does not depend on httpdate.
    let secs = at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    let days = secs / 86_400;
    let (h, m, s) = ((secs % 86_400) / 3600, (secs % 3600) / 60, secs % 60);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let (year, month, day) = civil_from_days(days as i64);
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(month - 1) as usize];
    format!("{weekday}, {day:02} {month} {year} {h:02}:{m:02}:{s:02} GMT")
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[tokio::test]
async fn oversized_snapshot_is_stopped_at_the_limit_without_content_length() {
    let v2 = Snap::new("malware", 2, &["evil.example/"]).encode();
    let keys: Vec<String> = (0..5_000).map(|i| format!("host{i}.example/")).collect();
    let big = Snap::new("malware", 3, &keys.iter().map(String::as_str).collect::<Vec<_>>()).encode();
    let limit = v2.len() as u64 + 100;
    assert!(big.len() as u64 > limit);
    let raw = RawServer::start(vec![RawServer::ok(&v2), RawServer::until_close(&big)]).await;
    let agent = raw.agent_builder().max_snapshot_bytes(limit).build().unwrap();
    agent.update().await.unwrap();

    let report = agent.update().await.unwrap();

    let error = kept_v2_because(&report);
    assert!(
        matches!(error, Error::ResponseTooLarge { limit_bytes, .. } if *limit_bytes == limit),
        "{error}"
    );
    counted_once(&agent, |f| f.too_large);
    filter_still_answers(&agent);
}

#[tokio::test]
async fn oversized_snapshot_is_refused_by_content_length() {
    let (fake, agent) = loaded().await;
    let small = fake
        .agent_builder(&["malware"])
        .max_snapshot_bytes(64)
        .build()
        .unwrap();
    let error = small.update().await.unwrap_err();
    assert!(
        matches!(error, Error::ResponseTooLarge { limit_bytes: 64, .. }),
        "{error}"
    );
    assert_eq!(agent.snapshot_version("malware"), Some(2));
}
