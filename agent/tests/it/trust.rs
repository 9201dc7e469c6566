//! The trust model against whoever answers the agent's requests (a network
//! path, a CDN, a mirror): what signed data protects, and what rests on
//! the transport alone (full-hash answers are not signed): README "What is
//! signed, and what rests on HTTPS".

use std::sync::Arc;

use blocksieve_agent::{ListUpdate, Verdict};
use blocksieve_format::FullHash;
use blocksieve_tests::clock::OffsetClock;
use blocksieve_tests::fake::FakePublisher;
use blocksieve_tests::snapshot::{Snap, unix_now};

const LISTED: &str = "http://evil.example/landing";

/// Inherent: a full-hash answer is not signed, so whoever answers it (a
/// CDN, a mirror, a replica, a plain-http path) makes a listed URL safe by
/// leaving its full hash out, and nothing in the status says so.
#[tokio::test]
async fn a_full_hash_answer_that_leaves_the_match_out_makes_a_listed_url_safe() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]));
    // The signed snapshot lists evil.example/; the answer does not.
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    assert_eq!(agent.lookup_local(LISTED).unwrap().hits.len(), 1);
    let verdict = agent.check_url(LISTED).await.unwrap();
    assert_eq!(verdict, Verdict::Safe { stale: false });
    // Nothing says so but the count of filter hits the answers refuted.
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert!(list.last_error.is_none() && !list.stale);
    assert_eq!(agent.stats().false_prefix_hits, 1);
}

/// A forged full hash is believed only for a URL whose prefix the signed
/// filter holds: one the filter does not hit is safe without a request.
#[tokio::test]
async fn a_forged_full_hash_never_makes_a_url_the_filter_misses_unsafe() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]));
    fake.list_expressions("malware", &["evil.example/", "fine.example/"]);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    // Warm the cache with an answer for evil's prefix, then ask for fine.
    assert!(agent.check_url(LISTED).await.unwrap().is_unsafe());
    let before = fake.searches().len();
    assert_eq!(
        agent.check_url("http://fine.example/").await.unwrap(),
        Verdict::Safe { stale: false }
    );
    assert_eq!(fake.searches().len(), before, "no request for a filter miss");
}

/// A match on a list the agent does not subscribe to confirms nothing.
#[tokio::test]
async fn a_match_on_another_list_is_not_unsafe() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]));
    fake.list_full_hashes([(FullHash::of(b"evil.example/"), "phishing")]);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    assert_eq!(
        agent.check_url(LISTED).await.unwrap(),
        Verdict::Safe { stale: false }
    );
}

/// A path that answers `304` forever (no freshness record) holds the list
/// only until its signed expiry: then every status and verdict says stale.
#[tokio::test]
async fn a_304_forever_leaves_the_list_stale_at_its_signed_expiry() {
    let fake = FakePublisher::start().await;
    let now = unix_now();
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]).valid(now, now + 3600));
    let clock = Arc::new(OffsetClock::new(0));
    let agent = fake
        .agent_builder(&["malware"])
        .time_provider(clock.clone())
        .build()
        .unwrap();
    agent.update().await.unwrap();
    clock.set_offset(7200);
    let report = agent.update().await.unwrap();
    assert!(
        matches!(report.get("malware"), Some(ListUpdate::Unchanged { version: 2 })),
        "{report:?}"
    );
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert!(list.stale && list.last_error.is_none());
    assert!(agent.check_url("http://fine.example/").await.unwrap().is_stale());
}
