//! What the publisher learns from full-hash requests, and what the cache
//! and single flight spare it: request prefix lengths, noise, shuffling,
//! batching, caching of hits and misses, coalescing.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use blocksieve_agent::{Agent, Verdict};
use blocksieve_format::FullHash;

use blocksieve_tests::clock::ManualClock;
use blocksieve_tests::fake::{FakePublisher, SearchMode};
use blocksieve_tests::snapshot::Snap;

/// `malware` listing `evil.example/` with 16-bit request prefixes.
async fn sixteen_bit() -> FakePublisher {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).request_prefix_bits(16));
    fake.list_expressions("malware", &["evil.example/"]);
    fake
}

#[tokio::test]
async fn a_request_carries_the_advertised_prefix_length_plus_noise_shuffled_and_never_the_url() {
    let fake = sixteen_bit().await;
    // No cache, so that every check sends a request.
    let agent = fake
        .agent_builder(&["malware"])
        .full_hash_cache_bytes(0)
        .build()
        .unwrap();
    agent.update().await.unwrap();
    let real = FullHash::of(b"evil.example/").prefix().to_string()[..4].to_owned();

    for _ in 0..40 {
        assert!(
            agent
                .check_url("http://evil.example/x")
                .await
                .unwrap()
                .is_unsafe()
        );
    }

    let searches = fake.searches();
    assert_eq!(searches.len(), 40);
    let mut positions = BTreeSet::new();
    let mut noise_seen = BTreeSet::new();
    for s in &searches {
        // One real prefix and four noise prefixes, all 16 bits, distinct.
        assert_eq!(s.prefixes.len(), 5, "{s:?}");
        assert!(s.prefixes.iter().all(|p| p.len() == 4), "{s:?}");
        assert_eq!(s.prefixes.iter().collect::<BTreeSet<_>>().len(), 5);
        positions.insert(s.prefixes.iter().position(|p| *p == real).unwrap());
        noise_seen.extend(s.prefixes.iter().filter(|p| **p != real).cloned());
        // Never the URL, an expression or a full hash.
        assert!(!s.body.contains("evil"), "{}", s.body);
        assert!(!s.body.contains(&FullHash::of(b"evil.example/").to_string()[..12]));
    }
    // Shuffled: the real prefix shows up in every position.
    assert_eq!(positions.len(), 5, "{positions:?}");
    // The same noise every time: drawn anew, the real prefix would be the
    // one every request shares.
    assert_eq!(noise_seen.len(), 4, "{noise_seen:?}");
    // Another agent (another noise key) sends other noise.
    let other = fake
        .agent_builder(&["malware"])
        .full_hash_cache_bytes(0)
        .build()
        .unwrap();
    other.update().await.unwrap();
    assert!(
        other
            .check_url("http://evil.example/x")
            .await
            .unwrap()
            .is_unsafe()
    );
    let last = fake.searches().pop().unwrap();
    let theirs: BTreeSet<_> = last.prefixes.iter().filter(|p| **p != real).cloned().collect();
    assert_eq!(theirs.len(), 4);
    // (Two random keys' 16-bit companions: one in common by chance about
    // once in 4,000 runs, two about once in 10^8.)
    assert!(
        theirs.intersection(&noise_seen).count() <= 1,
        "{theirs:?} {noise_seen:?}"
    );
}

#[tokio::test]
async fn noise_count_is_configurable_and_can_be_disabled() {
    let fake = sixteen_bit().await;
    for (builder, expected) in [
        (fake.agent_builder(&["malware"]).noise_prefixes(9), 10),
        (fake.agent_builder(&["malware"]).dangerous_disable_noise(), 1),
    ] {
        let agent = builder.build().unwrap();
        agent.update().await.unwrap();
        agent.check_url("http://evil.example/").await.unwrap();
        assert_eq!(fake.searches().last().unwrap().prefixes.len(), expected);
    }
}

/// Every prefix is sent at the longest length the subscribed lists
/// advertise, whichever list hit: the answer is cached for every list, and
/// a list's bucket under a shorter prefix than it advertises may be more
/// than its publisher serves.
#[tokio::test]
async fn the_longest_prefix_over_the_subscribed_lists_is_sent() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["other.example/"]).request_prefix_bits(16));
    fake.serve_snapshot(&Snap::new("phishing", 1, &["evil.example/"]).request_prefix_bits(8));
    fake.list_expressions("phishing", &["evil.example/"]);
    let agent = fake.agent(&["malware", "phishing"]);
    agent.update().await.unwrap();

    let verdict = agent.check_url("http://evil.example/").await.unwrap();

    assert!(
        matches!(&verdict, Verdict::Unsafe { list, .. } if list == "phishing"),
        "{verdict:?}"
    );
    let real = &FullHash::of(b"evil.example/").prefix().to_string()[..4];
    let sent = &fake.searches()[0].prefixes;
    assert!(sent.iter().all(|p| p.len() == 4), "{sent:?}");
    assert!(sent.iter().any(|p| p == real));
}

#[tokio::test]
async fn a_cache_hit_avoids_the_network_for_hits_and_misses_until_it_expires() {
    // A false positive: `innocent.example/` collides with a listed hash.
    let real = FullHash::of(b"innocent.example/");
    let mut colliding = real;
    colliding.0[31] ^= 1;
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).hashes([colliding]));
    fake.list_expressions("malware", &["evil.example/"]);
    fake.list_full_hashes([(colliding, "malware")]);
    fake.set_cache_duration_s(300);
    let clock = ManualClock::new(SystemTime::now());
    let agent = fake
        .agent_builder(&["malware"])
        .time_provider(clock.clone())
        .build()
        .unwrap();
    agent.update().await.unwrap();

    assert!(
        agent
            .check_url("http://evil.example/a")
            .await
            .unwrap()
            .is_unsafe()
    );
    assert!(
        agent
            .check_url("http://innocent.example/")
            .await
            .unwrap()
            .is_safe()
    );
    assert_eq!(fake.searches().len(), 2);

    // Within the cache duration: no request, same verdicts.
    clock.advance(Duration::from_secs(299));
    assert!(
        agent
            .check_url("http://evil.example/b")
            .await
            .unwrap()
            .is_unsafe()
    );
    assert!(
        agent
            .check_url("http://innocent.example/")
            .await
            .unwrap()
            .is_safe()
    );
    assert_eq!(fake.searches().len(), 2);
    let stats = agent.stats();
    assert_eq!(stats.cache_hits, 2);
    assert_eq!(stats.full_hash_requests, 2);
    assert_eq!((stats.confirmed_unsafe, stats.false_prefix_hits), (2, 2));
    assert!((stats.false_prefix_hit_rate() - 0.5).abs() < 1e-9);

    // Expired: asked again.
    clock.advance(Duration::from_secs(2));
    assert!(
        agent
            .check_url("http://evil.example/c")
            .await
            .unwrap()
            .is_unsafe()
    );
    assert_eq!(fake.searches().len(), 3);
}

#[tokio::test]
async fn full_hashes_outside_the_requested_prefix_are_ignored() {
    let fake = FakePublisher::start().await;
    // The filter lists `innocent.example/`, so it hits; the publisher
    // answers with a full hash of it under every prefix, which only matches
    // the real prefix by its own bucket, never as a foreign entry.
    fake.serve_snapshot(&Snap::new("malware", 1, &["innocent.example/"]).request_prefix_bits(16));
    fake.set_search_mode(SearchMode::Foreign("elsewhere.example/".into()));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();

    let verdict = agent.check_url("http://innocent.example/").await.unwrap();

    assert!(verdict.is_safe(), "{verdict:?}");
    assert!(agent.stats().ignored_full_hashes >= 1);

    // A foreign full hash that *is* the URL's is still ignored: it was not
    // listed under a prefix the agent asked about.
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["innocent.example/"]).request_prefix_bits(32));
    fake.set_search_mode(SearchMode::Foreign("innocent.example/x".into()));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    let verdict = agent.check_url("http://innocent.example/x").await.unwrap();
    assert!(verdict.is_safe(), "{verdict:?}");
}

/// An answer that lists, under the requested prefix, a full hash that is
/// not 64 hex digits is broken: the garbled entry may be the very full hash
/// asked about. The prefix stays unverified (and uncached), never a miss:
/// read as one, the listed URL was safe.
#[tokio::test]
async fn a_garbled_full_hash_under_the_asked_prefix_is_unverified_not_a_miss() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).request_prefix_bits(16));
    fake.list_expressions("malware", &["evil.example/"]);
    fake.set_search_mode(SearchMode::Garbled);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();

    let verdict = agent.check_url("http://evil.example/").await.unwrap();

    assert!(
        matches!(&verdict, Verdict::Unverified { lists, .. } if lists == &["malware"]),
        "{verdict:?}"
    );
    // Not cached: once the answers are whole again (and the pause after
    // that bad answer, at most a second, is over), the URL is unsafe.
    fake.set_search_mode(SearchMode::Normal);
    if let Some(paused) = agent.status().full_hash_paused_for {
        tokio::time::sleep(paused).await;
    }
    let verdict = agent.check_url("http://evil.example/").await.unwrap();
    assert!(verdict.is_unsafe(), "{verdict:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_checks_of_the_same_prefix_share_one_request() {
    let fake = sixteen_bit().await;
    fake.set_search_delay(Duration::from_millis(300));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();

    let checks: Vec<_> = (0..10)
        .map(|i| {
            let agent = agent.clone();
            tokio::spawn(async move { agent.check_url(&format!("http://evil.example/{i}")).await })
        })
        .collect();
    for c in checks {
        assert!(c.await.unwrap().unwrap().is_unsafe());
    }

    assert_eq!(fake.searches().len(), 1);
    let stats = agent.stats();
    assert_eq!(stats.full_hash_requests, 1);
    assert_eq!(stats.coalesced + stats.cache_hits, 9, "{stats:?}");
}

/// The check that started a full-hash request is cancelled (its task
/// aborted): the request, the agent's and not the check's, still answers
/// the check that joined it, and nothing is asked twice.
#[tokio::test]
async fn a_cancelled_leader_does_not_strand_its_followers() {
    let fake = sixteen_bit().await;
    fake.set_search_delay(Duration::from_millis(300));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();

    let leader = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.check_url("http://evil.example/").await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let follower = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.check_url("http://evil.example/2").await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    leader.abort();

    let verdict = follower.await.unwrap().unwrap();
    assert!(verdict.is_unsafe(), "{verdict:?}");
    assert_eq!(fake.searches().len(), 1);
}

#[tokio::test]
async fn a_large_batch_is_split_into_requests_of_at_most_a_thousand_prefixes() {
    let hosts: Vec<String> = (0..1_500).map(|i| format!("host{i}.example/")).collect();
    let expressions: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &expressions));
    fake.list_expressions("malware", &expressions);
    // Two searches of 1,000 and 500 prefixes: seconds in a debug build on a
    // busy machine, where the default 10-s request timeout once ran out.
    let agent: Agent = (fake.agent_builder(&["malware"]))
        .request_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    agent.update().await.unwrap();
    let urls: Vec<String> = (0..1_500).map(|i| format!("http://host{i}.example/")).collect();

    let verdicts = agent.check_urls(&urls).await;

    let not_unsafe: Vec<_> = (verdicts.iter())
        .filter(|v| !v.as_ref().is_ok_and(Verdict::is_unsafe))
        .take(3)
        .collect();
    assert!(not_unsafe.is_empty(), "{not_unsafe:?}");
    let searches = fake.searches();
    assert_eq!(searches.len(), 2);
    assert!(searches.iter().all(|s| s.prefixes.len() <= 1_000));
    let total: usize = searches.iter().map(|s| s.prefixes.len()).sum();
    assert_eq!(total, 1_500 + 2 * 4);
}

/// A prefix asked before and after its list's request prefix length grows
/// (a new snapshot; or a check refused `400 prefix_too_short`, which
/// updates and asks again at once at the new length): its noise at the
/// longer length extends its noise at the shorter one. Before, the noise
/// was drawn anew for each length, and the real prefix was the one of the
/// second request that extended a prefix of the first: singled out, as new
/// noise around a prefix asked twice singles it out.
#[tokio::test]
async fn a_prefix_asked_again_at_a_longer_length_is_not_singled_out_by_its_noise() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]).request_prefix_bits(8));
    fake.list_expressions("malware", &["evil.example/"]);
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    assert!(agent.check_url("http://evil.example/").await.unwrap().is_unsafe());
    fake.serve_snapshot(&Snap::new("malware", 2, &["evil.example/"]).request_prefix_bits(12));
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    assert!(agent.check_url("http://evil.example/").await.unwrap().is_unsafe());

    let searches = fake.searches();
    assert_eq!(searches.len(), 2);
    let (before, after) = (&searches[0].prefixes, &searches[1].prefixes);
    assert!(before.iter().all(|p| p.len() == 2) && after.iter().all(|p| p.len() == 3));
    assert_eq!((before.len(), after.len()), (5, 5));
    // Every 12-bit prefix extends an 8-bit prefix asked before, noise
    // included: not the real one alone (before, a noise prefix did only by
    // chance, about 5 times in 256).
    let extending = after
        .iter()
        .filter(|p| before.contains(&p[..2].to_owned()))
        .count();
    assert_eq!(extending, after.len(), "{before:?} then {after:?}");
}
