//! A long run with faults: thousands of distinct URLs, a tenth of them
//! listed, checked in concurrent batches over hours of a test clock while
//! the publisher cycles through failures (5xx, `429`/`503` with
//! `Retry-After`, bodies that do not parse, answers without the prefix
//! asked, garbled full hashes), publishes a snapshot every half hour and
//! sometimes fails its download. No listed URL is ever answered safe, the
//! counters add up, and once the faults end every listed URL is unsafe
//! again within the longest pause the publisher can ask for.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use blocksieve_agent::{Agent, Verdict};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use blocksieve_tests::clock::ManualClock;
use blocksieve_tests::fake::{FakePublisher, SearchMode, Served};
use blocksieve_tests::snapshot::{Snap, unix_now};

fn at(unix: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(unix)
}

fn expr(i: usize) -> String {
    format!("evil{i}.example/")
}

fn publish(fake: &FakePublisher, version: u64, listed: usize, t: u64) {
    let exprs: Vec<String> = (0..listed).map(expr).collect();
    let refs: Vec<&str> = exprs.iter().map(String::as_str).collect();
    fake.serve_snapshot(&Snap::new("malware", version, &refs).valid(t - 60, t + 7200));
}

#[test]
fn hours_of_faults_never_answer_a_listed_url_safe_and_end_in_recovery() {
    let _alone = crate::cpu_bound();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(hours_of_faults());
}

async fn hours_of_faults() {
    let checks_total = 8_000;
    let mut rng = StdRng::seed_from_u64(7);
    let mut t = unix_now();
    let clock = ManualClock::new(at(t));
    let fake = FakePublisher::start().await;
    let mut listed = 500usize;
    let mut version = 1u64;
    // listed count per version
    let mut listed_at: HashMap<u64, usize> = HashMap::new();
    listed_at.insert(version, listed);
    publish(&fake, version, listed, t);
    let exprs: Vec<String> = (0..listed).map(expr).collect();
    fake.list_expressions("malware", &exprs.iter().map(String::as_str).collect::<Vec<_>>());
    let budget = 64 * 1024;
    let agent: Agent = fake
        .agent_builder(&["malware"])
        .time_provider(clock.clone())
        .request_timeout(Duration::from_millis(3000))
        .full_hash_cache_bytes(budget)
        .build()
        .unwrap();
    agent.update().await.unwrap();

    let modes = [
        SearchMode::Normal,
        SearchMode::Status(StatusCode::INTERNAL_SERVER_ERROR),
        SearchMode::Normal,
        SearchMode::RetryAfter(StatusCode::TOO_MANY_REQUESTS, "120".to_owned()),
        SearchMode::Garbage,
        SearchMode::Normal,
        SearchMode::NoResults,
        SearchMode::Garbled,
        SearchMode::Normal,
        SearchMode::RetryAfter(StatusCode::SERVICE_UNAVAILABLE, "3600".to_owned()),
    ];
    let mut n = 0usize;
    let mut listed_safe = Vec::new();
    let (mut unsafe_n, mut unverified_n, mut errors) = (0, 0, 0);
    let mut last_publish = t;
    while n < checks_total {
        let mode = modes[rng.gen_range(0..modes.len())].clone();
        fake.set_search_mode(mode.clone());
        // New snapshots every 30 simulated minutes.
        if t - last_publish >= 1800 {
            version += 1;
            let old = listed;
            listed += 20;
            listed_at.insert(version, listed);
            let exprs: Vec<String> = (old..listed).map(expr).collect();
            fake.list_expressions("malware", &exprs.iter().map(String::as_str).collect::<Vec<_>>());
            publish(&fake, version, listed, t);
            last_publish = t;
            match rng.gen_range(0..4) {
                0 => fake.serve("malware", Served::Status(StatusCode::BAD_GATEWAY)),
                1 => fake.serve(
                    "malware",
                    Served::RetryAfter(StatusCode::SERVICE_UNAVAILABLE, "600".into()),
                ),
                _ => {}
            }
            // Failed or not, the filter held keeps answering.
            let _ = agent.update().await;
        }
        let held = agent.snapshot_version("malware").unwrap();
        let held_listed = listed_at[&held];
        // A batch of URLs, checked together and concurrently.
        let mut urls: Vec<(String, bool)> = Vec::new();
        for _ in 0..100 {
            n += 1;
            if rng.gen_bool(0.1) {
                let i = rng.gen_range(0..held_listed);
                urls.push((format!("http://evil{i}.example/p{n}"), true));
            } else {
                urls.push((format!("http://ok{n}.example/a/b?q={n}"), false));
            }
        }
        let mut tasks = Vec::new();
        for chunk in urls.chunks(10) {
            let agent = agent.clone();
            let chunk: Vec<(String, bool)> = chunk.to_vec();
            tasks.push(tokio::spawn(async move {
                let v = agent.check_urls(chunk.iter().map(|(u, _)| u.as_str())).await;
                chunk.into_iter().zip(v).collect::<Vec<_>>()
            }));
        }
        for task in tasks {
            for ((url, is_listed), v) in task.await.unwrap() {
                match v {
                    Ok(Verdict::Safe { .. }) if is_listed => listed_safe.push(format!("{url} ({mode:?})")),
                    Ok(Verdict::Safe { .. }) => {}
                    Ok(Verdict::Unsafe { .. }) => unsafe_n += 1,
                    Ok(_) => unverified_n += 1,
                    Err(_) => errors += 1,
                }
            }
        }
        // Time moves on: seconds to minutes.
        let step = if rng.gen_bool(0.2) {
            rng.gen_range(60..900)
        } else {
            rng.gen_range(1..30)
        };
        t += step;
        clock.advance(Duration::from_secs(step));
    }
    let s = agent.stats();
    assert_eq!(listed_safe, Vec::<String>::new(), "listed URLs answered safe");
    assert_eq!(errors, 0);
    assert!(
        unverified_n > 0 && s.full_hash_failures > 0 && s.update_failures > 0,
        "the faults were met: {s:?}"
    );
    assert_eq!(
        s.confirmed_unsafe + s.false_prefix_hits + s.unverified,
        s.prefix_hits,
        "{s:?}"
    );
    assert_eq!(s.confirmed_unsafe, unsafe_n as u64, "{s:?}");
    assert_eq!(s.lookups, n as u64, "{s:?}");

    // The faults end: a new snapshot, whole answers. Within the longest
    // pause a publisher can ask for (`Retry-After`, capped at an hour)
    // nothing is paused and every listed URL is unsafe.
    fake.set_search_mode(SearchMode::Normal);
    version += 1;
    publish(&fake, version, listed, t);
    agent.update().await.unwrap();
    clock.advance(Duration::from_secs(3601));
    let status = agent.status();
    assert_eq!(status.full_hash_paused_for, None);
    assert_eq!(status.list("malware").unwrap().consecutive_failures, 0);
    let urls: Vec<String> = (0..listed)
        .map(|i| format!("http://evil{i}.example/final"))
        .collect();
    let verdicts = agent.check_urls(urls.iter()).await;
    let not_unsafe = verdicts
        .iter()
        .filter(|v| !matches!(v, Ok(Verdict::Unsafe { .. })))
        .count();
    assert_eq!(not_unsafe, 0, "of {}", urls.len());
}
