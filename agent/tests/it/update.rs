//! Snapshot updates by hand ([`Agent::update`]): conditional requests,
//! replacement, mirrors, lists not built yet, concurrency.

use axum::http::StatusCode;
use blocksieve_agent::{Agent, Error, ErrorKind, ListUpdate, SnapshotSource, Verdict};

use blocksieve_tests::fake::{FakePublisher, SearchMode, Served, etag_of, unreachable_url};
use blocksieve_tests::snapshot::{Snap, end_of, freshness, publisher_key, trusted, unix_now};

const LISTED: &str = "http://evil.example/landing";

#[tokio::test]
async fn first_update_loads_every_list() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    fake.serve_snapshot(&Snap::new("phishing", 4, &["phish.example/"]));
    let agent = fake.agent(&["malware", "phishing"]);
    assert_eq!(agent.snapshot_version("malware"), None);
    assert!(!agent.status().is_ready());

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
    let status = agent.status();
    assert!(status.is_ready() && !status.is_stale());
    let phishing = status.list("phishing").unwrap();
    assert_eq!(phishing.version, Some(4));
    assert_eq!(phishing.version_floor, Some(4));
    assert_eq!(phishing.source, Some(SnapshotSource::Network));
    assert!(phishing.last_success.is_some() && phishing.last_error.is_none());
    assert!(phishing.age.unwrap() < std::time::Duration::from_secs(60));
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
    assert_eq!(agent.stats().update_failures, 0);
}

#[tokio::test]
async fn server_ignoring_if_none_match_is_still_unchanged() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
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

/// A 200 carrying the snapshot in use under the ETag of a newer one (a bad
/// mirror or response) makes that ETag the next `If-None-Match`; the
/// publisher's 304 to it carries a signed freshness record naming the newer
/// version. The agent must not stay on the older version: it asks again
/// without the ETag, in the same round, and takes the newer snapshot.
#[tokio::test]
async fn a_304_whose_freshness_record_names_a_newer_version_is_asked_again_without_the_etag() {
    let fake = FakePublisher::start().await;
    let v2 = Snap::new("malware", 2, &["evil.example/"]).encode();
    let v3 = Snap::new("malware", 3, &["evil.example/", "worse.example/"]).encode();
    fake.list_expressions("malware", &["evil.example/", "worse.example/"]);
    let agent = fake.agent(&["malware"]);
    fake.serve("malware", Served::WithEtag(v2.clone(), "\"v2\"".into()));
    agent.update().await.unwrap();
    // v2's body under v3's ETag: held, the ETag taken.
    fake.serve("malware", Served::WithEtag(v2, "\"v3\"".into()));
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 2 })
    ));

    // The publisher now serves v3 under that ETag, vouching for it.
    fake.serve("malware", Served::WithEtag(v3.clone(), "\"v3\"".into()));
    let record = freshness("malware", end_of(&v3), unix_now() + 3600, &publisher_key());
    fake.set_freshness("malware", Some(record));
    let before = fake.requests().len();
    // Each round also asks for deltas first, which this fake has no route
    // for: one fallback a round (a 404), and one more for the stale ETag.
    let fallbacks = agent.stats().delta_fallbacks;
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
    let sent: Vec<_> = fake.requests()[before..]
        .iter()
        .map(|r| r.if_none_match.clone())
        .collect();
    assert_eq!(sent, [Some("\"v3\"".to_owned()), None]);
    assert!(
        agent
            .check_url("http://worse.example/")
            .await
            .unwrap()
            .is_unsafe()
    );
    assert_eq!(agent.stats().delta_fallbacks, fallbacks + 2);
    let status = agent.status();
    let why = status
        .list("malware")
        .unwrap()
        .last_delta_error
        .as_ref()
        .unwrap()
        .to_string();
    assert!(
        why.contains("names version 3, newer than version 2 in use"),
        "{why}"
    );
    // The next round is conditional again, on v3's ETag: a 304 that holds.
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 3 })
    ));
    assert_eq!(
        fake.requests().last().unwrap().if_none_match.as_deref(),
        Some("\"v3\"")
    );
    assert_eq!(agent.stats().delta_fallbacks, fallbacks + 3);

    // Without a record (or with one for the version held) a 304 holds, as
    // before: nothing newer is vouched for.
    fake.set_freshness("malware", None);
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 3 })
    ));
}

/// As above, but what answers the request without the ETag (a cache in
/// front) is still the snapshot in use while the 304 vouched for a newer
/// one: the round fails, showing the list behind, rather than reporting it
/// unchanged; the list keeps answering, and the next round asks without
/// the ETag at once.
#[tokio::test]
async fn a_snapshot_still_behind_the_version_a_304_vouches_for_fails_the_round() {
    let fake = FakePublisher::start().await;
    let v2 = Snap::new("malware", 2, &["evil.example/"]).encode();
    let v3 = Snap::new("malware", 3, &["evil.example/", "worse.example/"]).encode();
    fake.list_expressions("malware", &["evil.example/"]);
    let agent = fake.agent(&["malware"]);
    fake.serve("malware", Served::WithEtag(v2.clone(), "\"v2\"".into()));
    agent.update().await.unwrap();
    fake.serve("malware", Served::WithEtag(v2, "\"v3\"".into()));
    agent.update().await.unwrap();
    let record = freshness("malware", end_of(&v3), unix_now() + 3600, &publisher_key());
    fake.set_freshness("malware", Some(record));

    let before = fake.requests().len();
    let report = agent.update().await.unwrap();

    let Some(ListUpdate::Failed { error, kept_version }) = report.get("malware") else {
        panic!("{report:?}");
    };
    assert_eq!(*kept_version, Some(2));
    assert_eq!(error.kind(), ErrorKind::BadData);
    assert!(
        error.to_string().contains(
            "serves version 2 (the snapshot in use) while its signed freshness record names version 3"
        ),
        "{error}"
    );
    let sent: Vec<_> = fake.requests()[before..]
        .iter()
        .map(|r| r.if_none_match.clone())
        .collect();
    assert_eq!(sent, [Some("\"v3\"".to_owned()), None]);
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert_eq!(list.consecutive_failures, 1);
    assert!(list.last_error.is_some());
    assert!(agent.check_url(LISTED).await.unwrap().is_unsafe());

    // One download per round, no loop: the next round asks without the ETag.
    let before = fake.requests().len();
    let report = agent.update().await.unwrap();
    assert!(
        matches!(report.get("malware"), Some(ListUpdate::Failed { .. })),
        "{report:?}"
    );
    let sent: Vec<_> = fake.requests()[before..]
        .iter()
        .map(|r| r.if_none_match.clone())
        .collect();
    assert_eq!(sent, [None]);
}

#[tokio::test]
async fn newer_snapshot_replaces_the_filter() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]));
    fake.list_expressions("malware", &["evil.example/", "worse.example/"]);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    fake.serve_snapshot(&Snap::new("malware", 3, &["evil.example/", "worse.example/"]));
    assert!(agent.lookup_local("http://worse.example/").unwrap().is_empty());

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
async fn update_fails_while_a_list_has_no_snapshot() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    let agent = fake.agent(&["malware", "phishing"]);

    let error = agent.update().await.unwrap_err();

    assert!(matches!(error, Error::Status { status: 404, .. }), "{error}");
    assert!(error.to_string().contains("phishing"), "{error}");
    // The list that could be loaded was loaded anyway.
    assert_eq!(agent.snapshot_version("malware"), Some(1));
    // A URL it does not hold cannot be called safe while phishing has no
    // snapshot.
    let not_ready = agent.check_url("http://benign.example/").await.unwrap_err();
    assert!(
        matches!(&not_ready, Error::NotReady { list } if list == "phishing"),
        "{not_ready}"
    );
    assert_eq!(not_ready.kind(), ErrorKind::NotReady);
    assert_eq!(agent.status().list("phishing").unwrap().consecutive_failures, 1);
    // But a URL that malware confirms is unsafe, phishing or not: one list
    // that cannot be fetched does not switch the others off.
    fake.list_expressions("malware", &["evil.example/"]);
    let verdicts = agent.check_urls([LISTED, "http://benign.example/"]).await;
    assert!(
        matches!(&verdicts[0], Ok(Verdict::Unsafe { list, .. }) if list == "malware"),
        "{verdicts:?}"
    );
    assert!(
        matches!(&verdicts[1], Err(Error::NotReady { .. })),
        "{verdicts:?}"
    );
    // Three URLs probed against malware's filter, one hit, confirmed.
    let stats = agent.stats();
    assert_eq!(
        (stats.lookups, stats.prefix_hits, stats.confirmed_unsafe),
        (3, 1, 1),
        "{stats:?}"
    );
    // The local probe alone still refuses: its hits are not the whole answer.
    assert!(matches!(agent.lookup_local(LISTED), Err(Error::NotReady { .. })));

    // Once the publisher has built it, the agent becomes ready.
    fake.serve_snapshot(&Snap::new("phishing", 1, &[]));
    let report = agent.update().await.unwrap();
    assert!(report.is_complete());
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 1 })
    ));
    assert_eq!(agent.status().list("phishing").unwrap().consecutive_failures, 0);
}

#[tokio::test]
async fn unreachable_publisher_is_a_transport_error() {
    let agent = Agent::builder(unreachable_url())
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
    assert_eq!(agent.stats().update_failures_by.transport, 1);
}

#[tokio::test]
async fn mirrors_are_tried_in_order() {
    let primary = FakePublisher::start().await;
    primary.serve("malware", Served::Status(StatusCode::BAD_GATEWAY));
    primary.set_search_mode(SearchMode::Status(StatusCode::BAD_GATEWAY));
    let mirror = FakePublisher::start().await;
    mirror.serve_snapshot(&Snap::new("malware", 5, &["evil.example/"]));
    mirror.list_expressions("malware", &["evil.example/"]);
    let agent = Agent::builder(unreachable_url())
        .mirror(&primary.base_url)
        .mirror(&mirror.base_url)
        .list("malware")
        .trusted_key(trusted())
        .build()
        .unwrap();
    assert_eq!(agent.base_urls().count(), 3);

    let report = agent.update().await.unwrap();

    assert!(report.is_complete());
    assert_eq!(agent.snapshot_version("malware"), Some(5));
    assert_eq!(primary.snapshot_requests().len(), 1);
    // Full-hash requests fall through to the mirror as well.
    assert!(agent.check_url(LISTED).await.unwrap().is_unsafe());
    assert_eq!(primary.searches().len(), 1);
    assert_eq!(mirror.searches().len(), 1);
}

#[tokio::test]
async fn concurrent_updates_and_checks_agree() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]));
    fake.list_expressions("malware", &["evil.example/"]);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
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
