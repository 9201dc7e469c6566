//! Snapshot updates: conditional requests, verification, rollback protection
//! and keeping the current filter through every kind of bad download.

use axum::http::StatusCode;
use blocksieve_agent::{Agent, Error, ErrorKind, ListUpdate, UpdateReport};
use blocksieve_format::DecodeError;

use crate::server::{FakePublisher, RawServer, Served, Snap, etag_of, stranger_key, trusted};

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

/// The agent still answers from version 2.
async fn still_answers(agent: &Agent) {
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    assert!(agent.check_url(LISTED).await.unwrap().is_unsafe());
    assert!(!agent.check_url("http://fine.example/").await.unwrap().is_unsafe());
}

#[tokio::test]
async fn first_update_loads_every_list() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    fake.serve_snapshot(&Snap::new("phishing", 4, &["phish.example/"]));
    let agent = fake.agent(&["malware", "phishing"]);
    assert_eq!(agent.snapshot_version("malware"), None);

    let report = agent.update().await.unwrap();

    assert!(report.is_complete());
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Updated {
            previous: None,
            version: 1
        })
    ));
    assert!(matches!(
        report.get("phishing"),
        Some(ListUpdate::Updated {
            previous: None,
            version: 4
        })
    ));
    assert_eq!(agent.snapshot_version("phishing"), Some(4));
    assert_eq!(agent.snapshot_header("phishing").unwrap().list_name, "phishing");
    assert_eq!(agent.stats().snapshots_applied, 2);
    assert!(fake.requests().iter().all(|r| r.if_none_match.is_none()));
}

#[tokio::test]
async fn second_update_is_unchanged_via_304() {
    let fake = FakePublisher::start().await;
    let bytes = Snap::new("malware", 2, &["evil.example/"]).encode();
    fake.serve("malware", Served::Snapshot(bytes.clone()));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();

    let report = agent.update().await.unwrap();

    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 2 })
    ));
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].if_none_match, None);
    assert_eq!(requests[1].path, "/v1/lists/malware/snapshot");
    assert_eq!(requests[1].if_none_match, Some(etag_of(&bytes)));
    assert_eq!(agent.stats().snapshots_applied, 1);
}

#[tokio::test]
async fn server_ignoring_if_none_match_is_still_unchanged() {
    let (fake, agent) = loaded().await;
    fake.ignore_if_none_match();
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 2 })
    ));
}

#[tokio::test]
async fn same_snapshot_under_a_new_etag_is_unchanged() {
    let fake = FakePublisher::start().await;
    let bytes = Snap::new("malware", 2, &["evil.example/"]).encode();
    fake.serve("malware", Served::WithEtag(bytes.clone(), "\"first\"".into()));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    fake.serve("malware", Served::WithEtag(bytes, "\"second\"".into()));
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 2 })
    ));
    // The new ETag is remembered for the next conditional request.
    agent.update().await.unwrap();
    assert_eq!(
        fake.requests().last().unwrap().if_none_match.as_deref(),
        Some("\"second\"")
    );
}

#[tokio::test]
async fn newer_snapshot_replaces_the_filter() {
    let (fake, agent) = loaded().await;
    fake.serve_snapshot(&Snap::new("malware", 3, &["evil.example/", "worse.example/"]));
    fake.list_expressions("malware", &["worse.example/"]);
    assert!(
        !agent
            .check_url("http://worse.example/")
            .await
            .unwrap()
            .is_unsafe()
    );

    let report = agent.update().await.unwrap();

    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Updated {
            previous: Some(2),
            version: 3
        })
    ));
    assert!(
        agent
            .check_url("http://worse.example/")
            .await
            .unwrap()
            .is_unsafe()
    );
}

#[tokio::test]
async fn snapshot_signed_by_unknown_key_keeps_filter() {
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
    assert_eq!(agent.stats().update_failures, 1);
    still_answers(&agent).await;
}

#[tokio::test]
async fn snapshot_with_bad_signature_keeps_filter() {
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
    still_answers(&agent).await;
}

#[tokio::test]
async fn older_snapshot_is_a_rollback_and_keeps_filter() {
    let (fake, agent) = loaded().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &[]));
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
    assert_eq!(
        error.to_string(),
        "snapshot of list malware has version 1, not newer than trusted version 2"
    );
    still_answers(&agent).await;
}

#[tokio::test]
async fn same_version_with_different_body_is_a_rollback() {
    let (fake, agent) = loaded().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &[]));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(matches!(error, Error::Rollback { new_version: 2, .. }), "{error}");
    still_answers(&agent).await;
}

#[tokio::test]
async fn snapshot_of_another_list_keeps_filter() {
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
    still_answers(&agent).await;
}

#[tokio::test]
async fn server_error_keeps_filter() {
    let (fake, agent) = loaded().await;
    fake.serve("malware", Served::Status(StatusCode::SERVICE_UNAVAILABLE));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(matches!(error, Error::Status { status: 503, .. }), "{error}");
    assert_eq!(error.kind(), ErrorKind::Transport);
    assert!(error.to_string().contains("injected"), "{error}");
    assert!(!report.is_complete());
    assert_eq!(report.failures().count(), 1);
    still_answers(&agent).await;
}

#[tokio::test]
async fn truncated_snapshot_keeps_filter() {
    let (fake, agent) = loaded().await;
    let bytes = Snap::new("malware", 3, &["a.example/", "b.example/"]).encode();
    fake.serve("malware", Served::Snapshot(bytes[..bytes.len() - 10].to_vec()));
    let report = agent.update().await.unwrap();
    let error = kept_v2_because(&report);
    assert!(
        matches!(
            error,
            Error::Decode {
                reason: DecodeError::BodyLength { .. },
                ..
            }
        ),
        "{error}"
    );
    still_answers(&agent).await;
}

#[tokio::test]
async fn connection_cut_mid_body_keeps_filter() {
    let v2 = Snap::new("malware", 2, &["evil.example/"]).encode();
    let v3 = Snap::new("malware", 3, &[]).encode();
    let raw = RawServer::start(vec![RawServer::ok(&v2), RawServer::cut(&v3, v3.len() / 2)]).await;
    let agent = Agent::builder(&raw.base_url)
        .list("malware")
        .trusted_key(trusted())
        .build()
        .unwrap();
    agent.update().await.unwrap();

    let report = agent.update().await.unwrap();

    let error = kept_v2_because(&report);
    assert!(matches!(error, Error::Transport { .. }), "{error}");
    assert!(agent.lookup_local(LISTED).unwrap().hits.len() == 1);
}

#[tokio::test]
async fn oversized_snapshot_is_stopped_at_the_limit_without_content_length() {
    let v2 = Snap::new("malware", 2, &["evil.example/"]).encode();
    let keys: Vec<String> = (0..5_000).map(|i| format!("host{i}.example/")).collect();
    let big = Snap::new("malware", 3, &keys.iter().map(String::as_str).collect::<Vec<_>>()).encode();
    let limit = v2.len() as u64 + 100;
    assert!(big.len() as u64 > limit);
    let raw = RawServer::start(vec![RawServer::ok(&v2), RawServer::until_close(&big)]).await;
    let agent = Agent::builder(&raw.base_url)
        .list("malware")
        .trusted_key(trusted())
        .max_snapshot_bytes(limit)
        .build()
        .unwrap();
    agent.update().await.unwrap();

    let report = agent.update().await.unwrap();

    let error = kept_v2_because(&report);
    assert!(
        matches!(error, Error::ResponseTooLarge { limit_bytes, .. } if *limit_bytes == limit),
        "{error}"
    );
}

#[tokio::test]
async fn oversized_snapshot_is_refused_by_content_length() {
    let (fake, agent) = loaded().await;
    let small = Agent::builder(&fake.base_url)
        .list("malware")
        .trusted_key(trusted())
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

#[tokio::test]
async fn update_fails_while_a_list_has_no_snapshot() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    let agent = fake.agent(&["malware", "phishing"]);

    let error = agent.update().await.unwrap_err();

    assert!(matches!(error, Error::Status { status: 404, .. }), "{error}");
    assert!(error.to_string().contains("phishing"), "{error}");
    // The list that could be loaded was loaded anyway.
    assert_eq!(agent.snapshot_version("malware"), Some(1));
    let not_ready = agent.check_url(LISTED).await.unwrap_err();
    assert!(
        matches!(&not_ready, Error::NotReady { list } if list == "phishing"),
        "{not_ready}"
    );
    assert_eq!(not_ready.kind(), ErrorKind::NotReady);

    // Once the publisher has built it, the agent becomes ready.
    fake.serve_snapshot(&Snap::new("phishing", 1, &[]));
    let report = agent.update().await.unwrap();
    assert!(report.is_complete());
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 1 })
    ));
}

#[tokio::test]
async fn unreachable_publisher_is_a_transport_error() {
    // Bind and drop a listener to get a port nobody listens on.
    let addr = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let agent = Agent::builder(format!("http://{addr}"))
        .list("malware")
        .trusted_key(trusted())
        .build()
        .unwrap();
    let error = agent.update().await.unwrap_err();
    assert!(
        matches!(error, Error::Transport { timed_out: false, .. }),
        "{error}"
    );
    assert_eq!(error.kind(), ErrorKind::Transport);
}

#[tokio::test]
async fn concurrent_updates_and_checks_agree() {
    let (fake, agent) = loaded().await;
    fake.serve_snapshot(&Snap::new("malware", 3, &["evil.example/"]));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let agent = agent.clone();
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                agent.update().await.map(|_| ())
            } else {
                agent.check_url(LISTED).await.map(|v| assert!(v.is_unsafe()))
            }
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(agent.snapshot_version("malware"), Some(3));
    assert_eq!(agent.stats().snapshots_applied, 2);
}
