//! A list the publisher answers `404 unknown_list` for (retired, or not
//! configured on the server answering) and served again while a check
//! whose search left it out is in flight. Found by an adversarial review.

use std::time::Duration;

use blocksieve_agent::Verdict;
use blocksieve_tests::fake::{FakePublisher, Served};
use blocksieve_tests::snapshot::Snap;

const LISTED: &str = "http://evil.example/landing";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_served_again_during_a_check_that_left_it_out_is_never_answered_safe() {
    let fake = FakePublisher::start().await;
    fake.set_cache_duration_s(0);
    fake.serve_snapshot(&Snap::new("malware", 2, &["other.example/"]));
    fake.serve_snapshot(&Snap::new("phishing", 2, &["evil.example/"]));
    // The search below names `malware` alone: a publisher answers it for
    // `malware`, where the URL is not listed.
    let agent = fake.agent(&["malware", "phishing"]);
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("phishing"), Some(2));
    // One server (of a rolling deploy, or one mirror) does not know it.
    fake.serve("phishing", Served::NotBuilt);
    let _ = agent.update().await;
    let status = agent.status();
    let phishing = status.list("phishing").unwrap();
    assert!(
        phishing.last_error.as_ref().is_some_and(|e| e.is_unknown_list()),
        "{phishing:?}"
    );
    // Without the race: unverified.
    let verdict = agent.check_url(LISTED).await.unwrap();
    assert!(matches!(verdict, Verdict::Unverified { .. }), "{verdict:?}");

    // The race: the check's search (naming `malware` alone) is slow; an
    // update finds `phishing` served again meanwhile.
    fake.serve_snapshot(&Snap::new("phishing", 2, &["evil.example/"]));
    fake.set_search_delay(Duration::from_millis(3000));
    let check = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.check_url(LISTED).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    agent.update().await.unwrap();
    let status = agent.status();
    assert!(status.list("phishing").unwrap().last_error.is_none());
    let searches = fake.searches();
    let last = searches.last().unwrap();
    assert!(!last.body.contains("phishing"), "{}", last.body);
    assert_eq!(fake.searches().len(), 2);
    let verdict = check.await.unwrap().unwrap();
    assert!(
        !matches!(verdict, Verdict::Safe { .. }),
        "a hit on phishing asked of no one: {verdict:?}"
    );
}
