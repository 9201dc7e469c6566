//! URL checks: local probe, full-hash confirmation, and that nothing but a
//! matching full hash ever makes a URL unsafe.

use std::time::Duration;

use axum::http::StatusCode;
use blocksieve_agent::{Agent, Error, ErrorKind, Verdict};
use blocksieve_format::{CanonError, FullHash, KeyBits};

use crate::server::{FakePublisher, HashMode, Snap};

/// A publisher with `malware` listing `evil.example/` and
/// `bad.example/download/`, full hashes included, and an updated agent.
async fn ready() -> (FakePublisher, Agent) {
    let listed = ["evil.example/", "bad.example/download/"];
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &listed));
    fake.list_expressions("malware", &listed);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    (fake, agent)
}

#[tokio::test]
async fn listed_urls_are_unsafe() {
    let (fake, agent) = ready().await;

    let verdict = agent
        .check_url("http://evil.example/some/page?x=1")
        .await
        .unwrap();
    assert_eq!(
        verdict,
        Verdict::Unsafe {
            list: "malware".into(),
            expression: "evil.example/".into(),
            full_hash: FullHash::of(b"evil.example/"),
        }
    );
    let verdict = agent
        .check_url("https://www.BAD.example/download/file.exe")
        .await
        .unwrap();
    assert!(
        matches!(&verdict, Verdict::Unsafe { expression, .. } if expression == "bad.example/download/"),
        "{verdict:?}"
    );

    let stats = agent.stats();
    assert_eq!(stats.lookups, 2);
    assert_eq!(stats.prefix_hits, 2);
    assert_eq!(stats.full_hash_requests, 2);
    assert_eq!(stats.confirmed_unsafe, 2);
    assert_eq!(stats.false_prefix_hits, 0);
    let expected = format!("/v1/hashes/{}", FullHash::of(b"evil.example/").prefix());
    assert_eq!(fake.hash_requests()[0], expected);
}

#[tokio::test]
async fn unlisted_url_is_safe_without_any_request() {
    let (fake, agent) = ready().await;
    let url = "http://good.example/index.html";
    assert!(agent.lookup_local(url).unwrap().is_empty());

    assert_eq!(agent.check_url(url).await.unwrap(), Verdict::Safe);

    assert!(fake.hash_requests().is_empty());
    let stats = agent.stats();
    assert_eq!(
        (stats.lookups, stats.prefix_hits, stats.full_hash_requests),
        (1, 0, 0)
    );
}

#[tokio::test]
async fn prefix_collision_with_a_different_full_hash_is_a_false_prefix_hit() {
    // The filter holds the prefix of the URL's expression, but the listed
    // full hash in that bucket is a different one.
    let url = "http://innocent.example/";
    let real = FullHash::of(b"innocent.example/");
    let mut colliding = real;
    colliding.0[31] ^= 0xff;
    assert_eq!(colliding.prefix(), real.prefix());
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &[]).hashes([colliding]));
    fake.list_full_hashes([(colliding, "malware")]);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    assert_eq!(agent.lookup_local(url).unwrap().prefixes(), vec![real.prefix()]);

    assert_eq!(agent.check_url(url).await.unwrap(), Verdict::Safe);

    let stats = agent.stats();
    assert_eq!(stats.prefix_hits, 1);
    assert_eq!(stats.full_hash_requests, 1);
    assert_eq!(stats.false_prefix_hits, 1);
    assert_eq!(stats.confirmed_unsafe, 0);
    assert_eq!(
        fake.hash_requests(),
        vec![format!("/v1/hashes/{}", real.prefix())]
    );
}

#[tokio::test]
async fn full_hash_on_a_list_not_subscribed_is_not_unsafe() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    // The publisher's bucket says the hash is on a list this agent does not
    // subscribe to.
    fake.list_expressions("social", &["evil.example/"]);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();

    assert_eq!(
        agent.check_url("http://evil.example/").await.unwrap(),
        Verdict::Safe
    );
    assert_eq!(agent.stats().false_prefix_hits, 1);
}

#[tokio::test]
async fn one_request_per_distinct_prefix_in_expression_order() {
    // `evil.example/a/b.html` hits malware's filter through a colliding full
    // hash; `evil.example/` is on both lists. Three prefix hits, two
    // prefixes, requested in expression order (exact path first).
    let specific = FullHash::of(b"evil.example/a/b.html");
    let mut colliding = specific;
    colliding.0[20] ^= 1;
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).hashes([colliding]));
    fake.serve_snapshot(&Snap::new("phishing", 1, &["evil.example/"]));
    fake.list_full_hashes([(colliding, "malware")]);
    fake.list_expressions("phishing", &["evil.example/"]);
    fake.list_expressions("malware", &["evil.example/"]);
    let agent = fake.agent(&["malware", "phishing"]);
    agent.update().await.unwrap();
    let local = agent.lookup_local("http://evil.example/a/b.html").unwrap();
    assert_eq!(local.hits.len(), 3);
    assert_eq!(
        local.prefixes_for("phishing"),
        vec![FullHash::of(b"evil.example/").prefix()]
    );

    let verdict = agent.check_url("http://evil.example/a/b.html").await.unwrap();

    assert_eq!(
        verdict,
        Verdict::Unsafe {
            // The first listed entry in the publisher's bucket.
            list: "phishing".into(),
            expression: "evil.example/".into(),
            full_hash: FullHash::of(b"evil.example/"),
        }
    );
    assert_eq!(
        fake.hash_requests(),
        vec![
            format!("/v1/hashes/{}", specific.prefix()),
            format!("/v1/hashes/{}", FullHash::of(b"evil.example/").prefix()),
        ]
    );
    let stats = agent.stats();
    assert_eq!(
        (
            stats.prefix_hits,
            stats.full_hash_requests,
            stats.confirmed_unsafe
        ),
        (1, 2, 1)
    );
}

#[tokio::test]
async fn full_hash_server_error_is_an_error_not_safe() {
    let (fake, agent) = ready().await;
    fake.set_hash_mode(HashMode::Status(StatusCode::INTERNAL_SERVER_ERROR));

    let error = agent.check_url("http://evil.example/").await.unwrap_err();

    assert!(matches!(error, Error::Status { status: 500, .. }), "{error}");
    assert_eq!(error.kind(), ErrorKind::Transport);
    let stats = agent.stats();
    assert_eq!((stats.prefix_hits, stats.full_hash_requests), (1, 1));
    assert_eq!((stats.confirmed_unsafe, stats.false_prefix_hits), (0, 0));
    // A URL with no prefix hit needs no request and is still answered.
    assert_eq!(
        agent.check_url("http://good.example/").await.unwrap(),
        Verdict::Safe
    );
}

#[tokio::test]
async fn full_hash_timeout_is_an_error_not_safe() {
    let (fake, _) = ready().await;
    let agent = fake
        .agent_builder(&["malware"])
        .request_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    agent.update().await.unwrap();
    fake.set_hash_mode(HashMode::Hang);

    let error = agent.check_url("http://evil.example/").await.unwrap_err();

    assert!(
        matches!(error, Error::Transport { timed_out: true, .. }),
        "{error}"
    );
}

#[tokio::test]
async fn malformed_full_hash_response_is_an_error_not_safe() {
    let (fake, agent) = ready().await;
    fake.set_hash_mode(HashMode::Garbage);
    let error = agent.check_url("http://evil.example/").await.unwrap_err();
    assert!(matches!(error, Error::UnexpectedResponse { .. }), "{error}");
    assert_eq!(error.kind(), ErrorKind::BadData);

    fake.set_hash_mode(HashMode::WrongPrefix);
    let error = agent.check_url("http://evil.example/").await.unwrap_err();
    assert!(
        matches!(&error, Error::UnexpectedResponse { reason, .. } if reason.contains("prefix")),
        "{error}"
    );
}

#[tokio::test]
async fn checks_before_the_first_update_are_not_ready() {
    let fake = FakePublisher::start().await;
    let agent = fake.agent(&["malware"]);
    let error = agent.check_url("http://evil.example/").await.unwrap_err();
    assert!(
        matches!(&error, Error::NotReady { list } if list == "malware"),
        "{error}"
    );
    assert!(matches!(
        agent.lookup_local("http://evil.example/"),
        Err(Error::NotReady { .. })
    ));
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn invalid_urls_are_errors_with_the_reason() {
    let (fake, agent) = ready().await;
    for (url, reason) in [
        ("", CanonError::Empty),
        ("mailto:someone@evil.example", CanonError::NotHierarchical),
        ("/relative/path", CanonError::RelativeUrl),
        ("http://[::zz]/", CanonError::InvalidIpv6),
    ] {
        let error = agent.check_url(url).await.unwrap_err();
        assert!(
            matches!(error, Error::InvalidUrl { reason: r } if r == reason),
            "{url:?}: {error}"
        );
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
    }
    let error = agent.check_url("mailto:x@y").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("invalid url: {}", CanonError::NotHierarchical)
    );
    assert!(fake.hash_requests().is_empty());
    assert_eq!(agent.stats().lookups, 0);
}

#[tokio::test]
async fn lookup_local_reports_hits_per_list_without_requests() {
    let (fake, agent) = ready().await;
    let local = agent.lookup_local("http://evil.example/x/y").unwrap();
    assert_eq!(local.hits.len(), 1);
    assert_eq!(local.hits[0].list, "malware");
    assert_eq!(local.hits[0].expression, "evil.example/");
    assert_eq!(
        local.prefixes_for("malware"),
        vec![FullHash::of(b"evil.example/").prefix()]
    );
    assert!(local.prefixes_for("phishing").is_empty());
    assert!(fake.hash_requests().is_empty());
    assert_eq!(agent.stats().lookups, 0);
}

#[tokio::test]
async fn snapshots_with_64_bit_keys_work() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).key_bits(KeyBits::Bits64));
    fake.list_expressions("malware", &["evil.example/"]);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    assert!(agent.check_url("http://evil.example/").await.unwrap().is_unsafe());
    assert_eq!(
        agent.check_url("http://good.example/").await.unwrap(),
        Verdict::Safe
    );
}
