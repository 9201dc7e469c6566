//! Publisher → snapshot → agent → full-hash check, on real blocklist slices.

use std::collections::HashSet;
use std::time::Duration;

use blocksieve_agent::{Agent, Verdict};
use blocksieve_format::canonicalize;
use blocksieve_publisher::SourceFormat;
use blocksieve_publisher::internal::sources::{
    EntryOutcome, domain_expression, read_line, reason, url_expression,
};
use blocksieve_tests::{RunningPublisher, config, fixture_lines, fixture_source};

const READY: Duration = Duration::from_secs(60);

/// The expressions the fixtures list, computed from the fixture lines the
/// same way a user reading them would expect: each URL stands for itself,
/// each hosts-file name for the whole host.
fn listed_expressions() -> HashSet<String> {
    let mut set = HashSet::new();
    for line in fixture_lines("phishing-urls.txt") {
        if let Ok(e) = url_expression(line.as_bytes()) {
            set.insert(e);
        }
    }
    for line in fixture_lines("phishing-hosts.txt") {
        let name = line.split_whitespace().nth(1).unwrap();
        set.insert(domain_expression(name.as_bytes()).unwrap());
    }
    set
}

fn is_genuinely_listed(url: &str, listed: &HashSet<String>) -> bool {
    canonicalize(url).is_ok_and(|u| u.expressions().any(|e| listed.contains(&e.to_string())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_false_negatives_and_no_false_verdicts_on_real_lists() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "phishing",
        vec![
            fixture_source("phishing-urls.txt", SourceFormat::Urls),
            fixture_source("phishing-hosts.txt", SourceFormat::Hosts),
        ],
    );
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(READY).await;

    let agent = Agent::builder(server.base_url())
        .list("phishing")
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    let report = agent.update().await.unwrap();
    assert!(report.is_complete(), "{report:?}");

    // Every listed URL is unsafe.
    let urls = fixture_lines("phishing-urls.txt");
    let mut checked = 0;
    for url in &urls {
        match agent.check_url(url).await {
            Ok(v) => assert!(v.is_unsafe(), "listed URL {url} was {v:?}"),
            Err(e) => panic!("listed URL {url}: {e}"),
        }
        checked += 1;
    }
    assert!(checked >= 290, "only {checked} listed URLs checked");

    // Every URL on a listed host is unsafe, whatever its path.
    let listed = listed_expressions();
    let hosts = fixture_lines("phishing-hosts.txt");
    assert!(hosts.len() >= 190);
    for line in &hosts {
        let name = line.split_whitespace().nth(1).unwrap();
        for url in [
            format!("http://{name}/"),
            format!("https://{name}/any/path?q=1"),
            format!("http://www.{name}/x"),
        ] {
            let v = agent.check_url(&url).await.unwrap();
            match &v {
                Verdict::Unsafe { list, expression, .. } => {
                    assert_eq!(list, "phishing");
                    // The host's own entry, or a listed subdomain entry that is more specific.
                    assert!(listed.contains(expression), "{url}: {expression} is not listed");
                    assert!(
                        canonicalize(&url)
                            .unwrap()
                            .expressions()
                            .any(|e| &e.to_string() == expression)
                    );
                }
                other => panic!("URL {url} on listed host was {other:?}"),
            }
        }
    }
    let after_listed = agent.stats();

    // Benign URLs and domains are safe, except those genuinely listed.
    let mut benign: Vec<String> = fixture_lines("benign-urls.txt");
    benign.extend(
        fixture_lines("benign-domains.txt")
            .into_iter()
            .map(|d| format!("https://{d}/")),
    );
    let mut unsafe_benign = Vec::new();
    for url in &benign {
        let Ok(v) = agent.check_url(url).await else {
            assert!(canonicalize(url).is_err(), "check of {url} failed");
            continue;
        };
        assert_eq!(
            v.is_unsafe(),
            is_genuinely_listed(url, &listed),
            "verdict for {url}: {v:?}"
        );
        if v.is_unsafe() {
            unsafe_benign.push(url.clone());
        }
    }
    let stats = agent.stats();
    let benign_requests = stats.full_hash_requests - after_listed.full_hash_requests;
    let benign_lookups = stats.lookups - after_listed.lookups;
    eprintln!(
        "benign: {} URLs, {} unsafe (genuinely listed: {:?}), {} full-hash requests, {} false prefix hits",
        benign_lookups,
        unsafe_benign.len(),
        unsafe_benign,
        benign_requests,
        stats.false_prefix_hits
    );
    // A filter "yes" costs a round trip, never a wrong verdict; with
    // BinaryFuse8 (2^-8 per probe) and about 10 probes per URL, fewer than
    // 15 % of 500 benign checks should need one.
    assert!(
        benign_requests < 75,
        "{benign_requests} full-hash requests for 500 benign URLs"
    );
    server.stop().await;
}

/// A stopped publisher lets go of its data directory, even while its first
/// build was still running (here: fetching from a source that never
/// answers): `run` gives the build the drain deadline, then cancels it.
/// Before, the build kept the publisher, and the lock on its data
/// directory, after `run` returned, and opening the directory again failed
/// with `InUse`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_publisher_releases_its_data_dir_with_a_first_build_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    // Accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}/feed.txt", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let mut cfg = config(
        &dir.path().join("data"),
        "phishing",
        vec![blocksieve_publisher::SourceConfig::http(
            &silent_url,
            SourceFormat::Urls,
        )],
    );
    cfg.drain_timeout_s = 1;
    let publisher = RunningPublisher::start(cfg.clone()).await;
    // The first build is waiting on the silent source by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    publisher.stop().await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "stopping took {took:?}");
    let reopened = blocksieve_tests::reopen(cfg);
    assert!(reopened.is_ok(), "{:?}", reopened.err());
    held.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_serves_last_snapshot_before_any_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.txt");
    std::fs::copy(blocksieve_tests::fixtures().join("phishing-urls.txt"), &feed).unwrap();
    let mut cfg = config(
        &dir.path().join("data"),
        "phishing",
        vec![blocksieve_publisher::SourceConfig::file(
            &feed,
            SourceFormat::Urls,
        )],
    );
    cfg.schedule = "0 0 0 1 1 *".to_owned(); // once a year: only the start-up build runs

    let first = RunningPublisher::start(cfg.clone()).await;
    first.wait_ready(READY).await;
    let version = first.publisher.state().lists[0]
        .current
        .load()
        .as_ref()
        .unwrap()
        .header
        .version;
    first.stop().await;

    // The source disappears, and with it the publisher's last good copy:
    // every rebuild after the restart fails.
    std::fs::remove_file(&feed).unwrap();
    std::fs::remove_dir_all(dir.path().join("data").join("sources")).unwrap();

    // Opening alone (no build yet) already serves the stored snapshot.
    let reopened = blocksieve_publisher::Publisher::open(cfg.clone()).unwrap();
    let served = reopened.state().lists[0]
        .current
        .load_full()
        .expect("snapshot loaded from disk");
    assert_eq!(served.header.version, version);
    drop(reopened);

    let second = RunningPublisher::start(cfg).await;
    let agent = Agent::builder(second.base_url())
        .list("phishing")
        .trusted_key(second.public_key())
        .build()
        .unwrap();
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("phishing"), Some(version));
    let url = &fixture_lines("phishing-urls.txt")[0];
    assert!(agent.check_url(url).await.unwrap().is_unsafe());

    // The failed rebuild is reported, and the old snapshot keeps serving.
    let client = reqwest::Client::new();
    let mut failed = false;
    for _ in 0..200 {
        let lists: blocksieve_format::api::ListsResponse = serde_json_from(
            &client
                .get(format!("{}/v1/lists", second.base_url()))
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap(),
        );
        let l = &lists.lists[0];
        assert_eq!(l.snapshot.as_ref().unwrap().version, version);
        if let Some(b) = &l.last_build {
            assert!(!b.ok);
            assert!(b.error.as_deref().unwrap().contains("feed.txt"), "{b:?}");
            failed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(failed, "the start-up rebuild never reported its failure");
    second.stop().await;
}

fn serde_json_from<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
    serde_json::from_slice(bytes).unwrap()
}

/// End to end on real lines: every line of the
/// 2018-2020 union feed that the build rejected before (187 as "host is a
/// public suffix", 3 invalid), and the 14 with Unicode white space at an
/// end. Each entry the build accepts answers `unsafe` as the build read it
/// (what a user would visit); each it rejects says why, truly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn union_feed_quirk_lines_answer_unsafe_or_are_rejected_truly() {
    let name = "phishing-urls-union-quirks.txt";
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "phishing",
        vec![fixture_source(name, SourceFormat::Urls)],
    );
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(READY).await;
    let agent = Agent::builder(server.base_url())
        .list("phishing")
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    assert!(agent.update().await.unwrap().is_complete());
    let bytes = std::fs::read(blocksieve_tests::fixtures().join(name)).unwrap();
    let (mut unsafe_entries, mut rejected) = (0, Vec::new());
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        for entry in read_line(SourceFormat::Urls, line).entries {
            match entry {
                EntryOutcome::Accepted(readings) => {
                    for r in readings {
                        let url = String::from_utf8(r.text.clone()).unwrap();
                        let v = agent.check_url(&url).await.unwrap();
                        assert!(v.is_unsafe(), "{url}: {v:?}");
                    }
                    unsafe_entries += 1;
                }
                EntryOutcome::Rejected { reason, .. } => rejected.push(reason),
            }
        }
    }
    // `http:///bonuscommissions.com/…` is read as browsers read it, and
    // `https:///2t2sAZF` names the single-label host `2t2sazf`.
    assert_eq!(unsafe_entries, 194);
    rejected.sort_unstable();
    let mut want = vec![reason::EMPTY_HOST; 1];
    want.extend([reason::SINGLE_LABEL; 5]);
    want.extend([reason::NOT_A_HOST_NAME; 3]);
    want.push(reason::PUBLIC_SUFFIX_PRIVATE);
    want.sort_unstable();
    assert_eq!(rejected, want);
    // The trimmed URL, not the line with its U+00A0, is the page listed.
    let v = agent.check_url("http://ulvis.net/IFHc").await.unwrap();
    assert!(v.is_unsafe(), "{v:?}");
    server.stop().await;
}
