//! A list the publisher stops serving (retired, or not yet configured on
//! the server answering) while agents still subscribe to it and hold its
//! last snapshot: the publisher refuses a full-hash search naming a list it
//! does not serve (`404 unknown_list`), so an agent that kept naming it
//! had every other list's hits unverified — under the default fail-open
//! policy, a URL listed on a list still served let through. Found by an
//! adversarial review.

use std::time::Duration;

use blocksieve_agent::{Agent, Verdict};
use blocksieve_publisher::{ListConfig, SourceFormat};
use blocksieve_tests::{RunningPublisher, config, fixture_lines, fixture_source, reopen};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_the_publisher_stops_serving_leaves_the_other_lists_confirmed() {
    let data = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut both = config(
        data.path(),
        "phishing",
        vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
    );
    both.lists.push(ListConfig::new(
        "hosts",
        vec![fixture_source("phishing-hosts.txt", SourceFormat::Hosts)],
    ));
    let server = RunningPublisher::start(both.clone()).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let key = server.public_key();
    let listed = fixture_lines("phishing-urls.txt")[0].clone();
    let host = fixture_lines("phishing-hosts.txt")[0].clone();
    let hosted = format!("http://{}/", host.split_whitespace().last().unwrap());
    let agent_at = |base: String| {
        Agent::builder(base)
            .list("phishing")
            .list("hosts")
            .trusted_key(key.clone())
            .cache_dir(cache.path())
            .build()
            .unwrap()
    };
    let on = |verdict: &Verdict| match verdict {
        Verdict::Unsafe { list, .. } => Some(list.clone()),
        _ => None,
    };
    {
        let agent = agent_at(server.base_url());
        agent.update().await.unwrap();
        let verdict = agent.check_url(&listed).await.unwrap();
        assert_eq!(on(&verdict).as_deref(), Some("phishing"), "{verdict:?}");
        let verdict = agent.check_url(&hosted).await.unwrap();
        assert_eq!(on(&verdict).as_deref(), Some("hosts"), "{verdict:?}");
        agent.shutdown().await;
    }
    server.stop().await;

    // `hosts` retired; `phishing` served as before.
    let mut phishing_only = both.clone();
    phishing_only.lists.retain(|l| l.name == "phishing");
    let server = RunningPublisher::run_opened(reopen(phishing_only).unwrap()).await;
    server.wait_ready(Duration::from_secs(60)).await;

    // An agent still subscribed to both, restarted from its cache directory
    // and not updated yet: its first search names `hosts` and is refused;
    // the check's update round finds `hosts` not served, and the check is
    // asked again without it.
    let agent = agent_at(server.base_url());
    let verdict = agent.check_url(&listed).await.unwrap();
    assert_eq!(on(&verdict).as_deref(), Some("phishing"), "{verdict:?}");
    // A hit on `hosts` alone is asked of no one: unverified, never safe.
    let verdict = agent.check_url(&hosted).await.unwrap();
    assert!(
        matches!(&verdict, Verdict::Unverified { lists, reason, .. }
            if lists == &["hosts"] && reason.is_unknown_list()),
        "{verdict:?}"
    );
    let status = agent.status();
    let hosts = status.lists.iter().find(|l| l.name == "hosts").unwrap();
    assert!(
        hosts.last_error.as_ref().is_some_and(|e| e.is_unknown_list()) && hosts.version.is_some(),
        "{hosts:?}"
    );
    // Updates go on, and so do the answers.
    agent.update().await.unwrap();
    let verdict = agent.check_url(&listed).await.unwrap();
    assert_eq!(on(&verdict).as_deref(), Some("phishing"), "{verdict:?}");
    agent.shutdown().await;
    drop(agent);
    server.stop().await;

    // Served again: its hits are confirmed again after the next update.
    let server = RunningPublisher::run_opened(reopen(both).unwrap()).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let agent = agent_at(server.base_url());
    agent.update().await.unwrap();
    let verdict = agent.check_url(&hosted).await.unwrap();
    assert_eq!(on(&verdict).as_deref(), Some("hosts"), "{verdict:?}");
    agent.shutdown().await;
    server.stop().await;
}
