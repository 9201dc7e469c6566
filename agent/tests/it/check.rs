//! URL checks: local probe, full-hash confirmation, the failure policy, and
//! that nothing but a matching full hash ever makes a URL unsafe.

use std::time::{Duration, SystemTime};

use axum::http::StatusCode;
use blocksieve_agent::{Agent, Error, ErrorKind, FailurePolicy, Verdict};
use blocksieve_format::{CanonError, FullHash, KeyBits};

use blocksieve_tests::clock::ManualClock;
use blocksieve_tests::fake::{FakePublisher, SearchMode};
use blocksieve_tests::snapshot::Snap;

const SAFE: Verdict = Verdict::Safe { stale: false };

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

/// A publisher with `malware` listing `count` hosts, `host{i}.example/`,
/// full hashes included; and those hosts.
async fn listing_hosts(count: usize) -> (FakePublisher, Vec<String>) {
    let hosts: Vec<String> = (0..count).map(|i| format!("host{i}.example/")).collect();
    let listed: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &listed));
    fake.list_expressions("malware", &listed);
    (fake, hosts)
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
            stale: false,
        }
    );
    assert!(verdict.should_block());
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
    let searches = fake.searches();
    let expected = FullHash::of(b"evil.example/").prefix().to_string();
    assert!(searches[0].prefixes.contains(&expected), "{:?}", searches[0]);
}

#[tokio::test]
async fn unlisted_url_is_safe_without_any_request() {
    let (fake, agent) = ready().await;
    let url = "http://good.example/index.html";
    assert!(agent.lookup_local(url).unwrap().is_empty());

    assert_eq!(agent.check_url(url).await.unwrap(), SAFE);

    assert!(fake.searches().is_empty());
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

    assert_eq!(agent.check_url(url).await.unwrap(), SAFE);

    let stats = agent.stats();
    assert_eq!(stats.prefix_hits, 1);
    assert_eq!(stats.full_hash_requests, 1);
    assert_eq!(stats.false_prefix_hits, 1);
    assert_eq!(stats.confirmed_unsafe, 0);
    assert!((stats.false_prefix_hit_rate() - 1.0).abs() < 1e-9);
    assert!(fake.searches()[0].prefixes.contains(&real.prefix().to_string()));
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

    assert_eq!(agent.check_url("http://evil.example/").await.unwrap(), SAFE);
    assert_eq!(agent.stats().false_prefix_hits, 1);
}

#[tokio::test]
async fn every_hit_prefix_goes_in_one_request_and_subscription_order_picks_the_list() {
    // `evil.example/a/b.html` hits malware's filter through a colliding full
    // hash; `evil.example/` is on both lists. Three prefix hits, two
    // prefixes, one request.
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
    // In subscription order: malware, phishing.
    assert_eq!(*local.snapshot_versions, [1, 1]);

    let verdict = agent.check_url("http://evil.example/a/b.html").await.unwrap();

    assert_eq!(
        verdict,
        Verdict::Unsafe {
            list: "malware".into(),
            expression: "evil.example/".into(),
            full_hash: FullHash::of(b"evil.example/"),
            stale: false,
        }
    );
    let searches = fake.searches();
    assert_eq!(searches.len(), 1);
    for p in [specific.prefix(), FullHash::of(b"evil.example/").prefix()] {
        assert!(searches[0].prefixes.contains(&p.to_string()), "{:?}", searches[0]);
    }
    let stats = agent.stats();
    assert_eq!(
        (
            stats.prefix_hits,
            stats.full_hash_requests,
            stats.confirmed_unsafe
        ),
        (1, 1, 1)
    );
}

#[tokio::test]
async fn full_hash_server_error_is_unverified_not_safe() {
    let (fake, agent) = ready().await;
    fake.set_search_mode(SearchMode::Status(StatusCode::INTERNAL_SERVER_ERROR));

    let verdict = agent.check_url("http://evil.example/").await.unwrap();

    let Verdict::Unverified {
        reason,
        lists,
        block,
        stale,
    } = &verdict
    else {
        panic!("{verdict:?}")
    };
    assert!(matches!(reason, Error::Status { status: 500, .. }), "{reason}");
    assert_eq!(reason.kind(), ErrorKind::Transport);
    assert_eq!(lists, &["malware".to_owned()]);
    assert!(!block, "fail-open is the default");
    assert!(!stale);
    assert!(!verdict.should_block());
    let stats = agent.stats();
    assert_eq!((stats.prefix_hits, stats.full_hash_requests), (1, 1));
    assert_eq!(
        (stats.confirmed_unsafe, stats.false_prefix_hits, stats.unverified),
        (0, 0, 1)
    );
    assert_eq!(stats.full_hash_failures, 1);
    // A URL with no prefix hit needs no request and is still answered.
    assert_eq!(agent.check_url("http://good.example/").await.unwrap(), SAFE);
}

#[tokio::test]
async fn fail_closed_flags_unverified_to_block() {
    let (fake, _) = ready().await;
    let agent = fake
        .agent_builder(&["malware"])
        .failure_policy(FailurePolicy::FailClosed)
        .build()
        .unwrap();
    agent.update().await.unwrap();
    fake.set_search_mode(SearchMode::Status(StatusCode::BAD_GATEWAY));

    let verdict = agent.check_url("http://evil.example/").await.unwrap();

    assert!(
        matches!(&verdict, Verdict::Unverified { block: true, .. }),
        "{verdict:?}"
    );
    assert!(verdict.should_block());
    // Fail-closed only concerns unverifiable hits: clean URLs stay safe.
    assert_eq!(agent.check_url("http://good.example/").await.unwrap(), SAFE);
}

#[tokio::test]
async fn full_hash_timeout_is_unverified() {
    let (fake, _) = ready().await;
    let agent = fake
        .agent_builder(&["malware"])
        .request_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    agent.update().await.unwrap();
    fake.set_search_mode(SearchMode::Hang);

    let verdict = agent.check_url("http://evil.example/").await.unwrap();

    assert!(
        matches!(&verdict, Verdict::Unverified { reason, .. } if reason.is_timeout()),
        "{verdict:?}"
    );
}

/// A host that gives up on each check before the request timeout (its own
/// navigation deadline) does not cancel the full-hash request: the request
/// times out by itself, the failure pauses requests, and the next hit is
/// answered `BackingOff` at once. Before, the request was dropped with the
/// check: no failure was recorded, and a publisher that hung was asked
/// again at every hit (4 requests here).
#[tokio::test]
async fn a_request_outlives_the_checks_the_host_gave_up_on() {
    let (fake, _) = ready().await;
    let agent = fake
        .agent_builder(&["malware"])
        .request_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    agent.update().await.unwrap();
    fake.set_search_mode(SearchMode::Hang);

    for i in 0..3 {
        let url = format!("http://evil.example/{i}");
        let given_up = tokio::time::timeout(Duration::from_millis(50), agent.check_url(&url)).await;
        assert!(given_up.is_err(), "{given_up:?}");
    }
    // The request's timeout ends it by itself (a deadline kept loose for a
    // busy machine; before, no failure was ever recorded).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while agent.stats().full_hash_failures == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let verdict = agent.check_url("http://evil.example/again").await.unwrap();

    assert!(
        matches!(
            &verdict,
            Verdict::Unverified {
                reason: Error::BackingOff { failures: 1, .. },
                ..
            }
        ),
        "{verdict:?}"
    );
    assert_eq!(fake.searches().len(), 1);
    assert_eq!(agent.stats().full_hash_failures, 1);
}

/// Two requests in flight together when the publisher hangs fail one
/// after the other: one outage, one step of the backoff. Before, each
/// failure counted, and twenty requests in flight paused requests for a
/// draw up to the 2-minute cap after a one-second outage.
#[tokio::test]
async fn requests_that_fail_in_one_outage_count_once() {
    let (fake, _) = ready().await;
    let clock = ManualClock::new(SystemTime::now());
    let agent = fake
        .agent_builder(&["malware"])
        .request_timeout(Duration::from_secs(2))
        .time_provider(clock.clone())
        .build()
        .unwrap();
    agent.update().await.unwrap();
    fake.set_search_mode(SearchMode::Hang);

    // Two checks of distinct hash prefixes (no single flight joins them);
    // once both requests are out, the clock moves on, so the failures are
    // recorded ten seconds after the requests were sent.
    let moved = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while fake.searches().len() < 2 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        clock.advance(Duration::from_secs(10));
    };
    let (first, second, ()) = tokio::join!(
        agent.check_url("http://evil.example/"),
        agent.check_url("http://bad.example/download/x"),
        moved
    );
    for verdict in [first.unwrap(), second.unwrap()] {
        assert!(
            matches!(
                &verdict,
                Verdict::Unverified {
                    reason: Error::Transport { timed_out: true, .. },
                    ..
                }
            ),
            "{verdict:?}"
        );
    }
    assert_eq!(fake.searches().len(), 2);
    assert_eq!(agent.stats().full_hash_failures, 2);

    // The clock has not moved since: paused, after one failure.
    let verdict = agent.check_url("http://evil.example/again").await.unwrap();
    assert!(
        matches!(
            &verdict,
            Verdict::Unverified {
                reason: Error::BackingOff { failures: 1, .. },
                ..
            }
        ),
        "{verdict:?}"
    );
}

/// A hundred checks of distinct hash prefixes against a publisher that
/// hangs: at most 64 requests are out at once; the others wait for one to
/// end, and end `BackingOff` once the failures have paused requests.
/// Before, all 100 were sent (with a host that gives up on its checks,
/// every filter hit added one more, up to hits per second × the request
/// timeout).
#[tokio::test]
async fn at_most_64_full_hash_requests_are_in_flight() {
    let (fake, hosts) = listing_hosts(100).await;
    let clock = ManualClock::new(SystemTime::now());
    let agent = fake
        .agent_builder(&["malware"])
        .request_timeout(Duration::from_secs(3))
        .time_provider(clock.clone())
        .build()
        .unwrap();
    agent.update().await.unwrap();
    fake.set_search_mode(SearchMode::Hang);

    let mut checks = tokio::task::JoinSet::new();
    for host in &hosts {
        let (agent, url) = (agent.clone(), format!("http://{host}"));
        checks.spawn(async move { agent.check_url(&url).await });
    }
    // Once the first requests are out, the clock moves on: their failures
    // count once, and the pause they start holds at the test clock's time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while fake.searches().len() < 64 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    clock.advance(Duration::from_secs(10));
    let verdicts = checks.join_all().await;

    let sent = fake.searches().len();
    assert!((1..=64).contains(&sent), "{sent} requests sent");
    let backing_off = verdicts
        .iter()
        .filter(|v| {
            matches!(
                v,
                Ok(Verdict::Unverified {
                    reason: Error::BackingOff { .. },
                    ..
                })
            )
        })
        .count();
    assert!(
        verdicts
            .iter()
            .all(|v| matches!(v, Ok(Verdict::Unverified { .. }))),
        "{verdicts:?}"
    );
    assert_eq!(backing_off, 100 - sent);
}

#[tokio::test]
async fn malformed_full_hash_responses_are_unverified() {
    for (mode, expected) in [
        (SearchMode::Garbage, "invalid JSON"),
        (SearchMode::NoResults, "no result for requested prefix"),
    ] {
        let (fake, agent) = ready().await;
        fake.set_search_mode(mode);
        let verdict = agent.check_url("http://evil.example/").await.unwrap();
        let Verdict::Unverified { reason, .. } = &verdict else {
            panic!("{verdict:?}")
        };
        assert!(matches!(reason, Error::UnexpectedResponse { .. }), "{reason}");
        assert_eq!(reason.kind(), ErrorKind::BadData);
        assert!(reason.to_string().contains(expected), "{reason}");
        // The error names the request it is about.
        let search = format!(
            "unexpected response from {}/v1/hashes:search: ",
            fake.base_url.trim_end_matches('/')
        );
        assert!(reason.to_string().starts_with(&search), "{reason}");
    }
}

#[tokio::test]
async fn failures_pause_full_hash_requests_and_a_success_resumes_them() {
    let (fake, agent) = ready().await;
    fake.set_search_mode(SearchMode::RetryAfter(
        StatusCode::SERVICE_UNAVAILABLE,
        "120".into(),
    ));
    let first = agent.check_url("http://evil.example/").await.unwrap();
    assert!(
        matches!(&first, Verdict::Unverified { reason: Error::Status { status: 503, retry_after: Some(d), .. }, .. } if *d == Duration::from_secs(120)),
        "{first:?}"
    );
    // Retry-After: no request for two minutes; checks answer at once.
    fake.set_search_mode(SearchMode::Normal);
    let second = agent.check_url("http://bad.example/download/x").await.unwrap();
    assert!(
        matches!(&second, Verdict::Unverified { reason: Error::BackingOff { failures: 1, remaining }, .. } if *remaining > Duration::from_secs(100)),
        "{second:?}"
    );
    assert_eq!(fake.searches().len(), 1);
    assert!(agent.status().full_hash_paused_for.is_some());
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
    assert!(fake.searches().is_empty());
    assert_eq!(agent.stats().lookups, 0);
}

#[tokio::test]
async fn batch_answers_in_order_with_one_request() {
    let (fake, agent) = ready().await;
    let verdicts = agent
        .check_urls([
            "http://evil.example/a",
            "http://good.example/",
            "mailto:x@y",
            "https://bad.example/download/f.exe",
            "http://evil.example/b",
        ])
        .await;
    assert_eq!(verdicts.len(), 5);
    assert!(verdicts[0].as_ref().unwrap().is_unsafe());
    assert_eq!(verdicts[1].as_ref().unwrap(), &SAFE);
    assert!(matches!(verdicts[2], Err(Error::InvalidUrl { .. })));
    assert!(verdicts[3].as_ref().unwrap().is_unsafe());
    assert!(verdicts[4].as_ref().unwrap().is_unsafe());
    assert_eq!(fake.searches().len(), 1);
    let stats = agent.stats();
    assert_eq!(
        (stats.lookups, stats.prefix_hits, stats.confirmed_unsafe),
        (4, 3, 3)
    );
}

#[tokio::test]
async fn lookup_local_reports_hits_per_list_without_requests() {
    let (fake, agent) = ready().await;
    let local = agent.lookup_local("http://evil.example/x/y").unwrap();
    assert_eq!(local.hits.len(), 1);
    assert_eq!(&*local.hits[0].list, "malware");
    assert_eq!(local.hits[0].expression, "evil.example/");
    assert_eq!(local.hits[0].request_prefix_bits, 32);
    assert_eq!(
        local.prefixes_for("malware"),
        vec![FullHash::of(b"evil.example/").prefix()]
    );
    assert!(local.prefixes_for("phishing").is_empty());
    assert!(!local.stale);
    assert!(fake.searches().is_empty());
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
    assert_eq!(agent.check_url("http://good.example/").await.unwrap(), SAFE);
}

/// A snapshot update empties the full-hash cache: a miss cached before it
/// would otherwise hide, for its whole cache duration, a URL that the new
/// snapshot lists (the filter says "maybe", the stale cached answer "no").
#[tokio::test]
async fn regression_a_snapshot_update_empties_the_full_hash_cache() {
    let fake = FakePublisher::start().await;
    fake.set_cache_duration_s(3_600);
    // Version 1's filter holds the expression, but the full-hash endpoint
    // does not list it yet: the answer is a miss, cached for an hour.
    fake.serve_snapshot(&Snap::new("malware", 1, &["late.example/"]));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    assert!(agent.check_url("http://late.example/").await.unwrap().is_safe());
    // Version 2 lists it, and so does the endpoint.
    fake.serve_snapshot(&Snap::new("malware", 2, &["late.example/"]));
    fake.list_expressions("malware", &["late.example/"]);
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    let verdict = agent.check_url("http://late.example/").await.unwrap();
    assert!(verdict.is_unsafe(), "{verdict:?}");
    assert_eq!(fake.searches().len(), 2, "the second check asked again");
}

/// An agent may subscribe to any number of lists, but a full-hash answer
/// is read with at most 64 list names (`MAX_ANSWER_LISTS`, a binary
/// answer's one-byte index; the JSON reader refuses more). A URL listed on
/// more than 64 of the subscribed lists got an answer naming them all, which
/// the agent refused whole: never confirmed, `unverified` (let through by
/// default), though the publisher answered it.
#[tokio::test]
async fn a_url_listed_on_more_than_64_subscribed_lists_is_confirmed_or_refused_at_build() {
    let names: Vec<String> = (0..65).map(|i| format!("list{i:02}")).collect();
    let fake = FakePublisher::start().await;
    for name in &names {
        fake.serve_snapshot(&Snap::new(name, 1, &["evil.example/"]));
        fake.list_expressions(name, &["evil.example/"]);
    }
    let lists: Vec<&str> = names.iter().map(String::as_str).collect();
    let Ok(agent) = fake.agent_builder(&lists).build() else {
        // Refused at build: no silent loss of confirmations.
        return;
    };
    agent.update().await.unwrap();
    let verdict = agent.check_url("http://evil.example/").await.unwrap();
    assert!(verdict.is_unsafe(), "{verdict:?}");
}

/// A full-hash answer that leaves the prefix asked about unanswered (no
/// result for it, or its full hashes unreadable) is a bad answer: the URL
/// is unverified for the same reason as after a body that is not JSON, the
/// request is counted as failed as that one is, and it pauses full-hash
/// requests as that one does. Before, such an answer reset the backoff as
/// a good one: a publisher (or a proxy) answering every request so was
/// asked again at every hit, and the status said nothing was paused.
#[tokio::test]
async fn an_answer_that_leaves_the_prefix_unanswered_is_a_failed_request() {
    for mode in [SearchMode::Garbage, SearchMode::NoResults, SearchMode::Garbled] {
        let (fake, agent) = ready().await;
        fake.set_search_mode(mode.clone());
        let verdict = agent.check_url("http://evil.example/").await.unwrap();
        assert!(
            matches!(
                &verdict,
                Verdict::Unverified {
                    reason: Error::UnexpectedResponse { .. },
                    ..
                }
            ),
            "{mode:?}: {verdict:?}"
        );
        let stats = agent.stats();
        assert_eq!(
            (
                stats.full_hash_requests,
                stats.full_hash_failures,
                stats.unverified
            ),
            (1, 1, 1),
            "{mode:?}: {stats:?}"
        );
        assert!(
            agent.status().full_hash_paused_for.is_some(),
            "{mode:?}: not paused"
        );
        let second = agent.check_url("http://bad.example/download/x").await.unwrap();
        assert!(
            matches!(
                &second,
                Verdict::Unverified {
                    reason: Error::BackingOff { failures: 1, .. },
                    ..
                }
            ),
            "{mode:?}: {second:?}"
        );
        assert_eq!(fake.searches().len(), 1, "{mode:?}");
    }
}

/// Checks refused `400 prefix_too_short` together share one update round
/// (and one after a round in progress), also when that round leaves the
/// versions as they were: a publisher that refuses at the version it
/// serves (a list given a short `request_prefix_bits`) answers `304`.
/// Before, each refused check queued an update round of its own behind the
/// round in progress, and every one of them ran, since none changed a
/// list: ten checks, ten rounds. Where a round outlasts the check's wait
/// (a slow snapshot route), the checks never learn that the refusal stood,
/// so every later hit queued one more round: without end.
#[tokio::test]
async fn regression_checks_refused_together_share_one_update_round_when_it_changes_nothing() {
    let (fake, hosts) = listing_hosts(10).await;
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    fake.set_search_mode(SearchMode::Refused(StatusCode::BAD_REQUEST, "prefix_too_short"));
    fake.set_snapshot_delay(Duration::from_millis(200));
    let before = fake.snapshot_requests().len();

    let mut checks = tokio::task::JoinSet::new();
    for host in &hosts {
        let (agent, url) = (agent.clone(), format!("http://{host}"));
        checks.spawn(async move { agent.check_url(&url).await });
    }
    let verdicts = checks.join_all().await;

    assert!(
        verdicts
            .iter()
            .all(|v| matches!(v, Ok(Verdict::Unverified { .. }))),
        "{verdicts:?}"
    );
    assert_eq!(fake.searches().len(), 10, "one request per check");
    // Whatever is still queued runs before this round.
    agent.update().await.unwrap();
    let rounds = fake.snapshot_requests().len() - before - 1;
    assert!(
        (1..=2).contains(&rounds),
        "{rounds} update rounds for 10 checks refused at the same versions"
    );
}

/// The bound on full-hash requests in flight holds for the HTTP requests
/// they are: with immutable buckets advertised, one full-hash request is
/// a `GET` per prefix (noise included) and list, all at once, so 64 of
/// them held 64 × 5 bucket `GET`s out against a CDN that hangs, where the
/// bound promised 64.
#[tokio::test]
async fn at_most_64_http_requests_are_in_flight_with_immutable_buckets() {
    let (fake, hosts) = listing_hosts(100).await;
    fake.hang_buckets();
    let agent = fake
        .agent_builder(&["malware"])
        .request_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    agent.update().await.unwrap();

    let mut checks = tokio::task::JoinSet::new();
    for host in &hosts {
        let (agent, url) = (agent.clone(), format!("http://{host}"));
        checks.spawn(async move { agent.check_url(&url).await });
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let out = fake.bucket_requests();
    checks.abort_all();
    assert!(out <= 64, "{out} bucket GETs out at once");
}
