//! Incremental updates end to end: a real publisher rebuilding a list under
//! seeded churn, real agents following it by signed deltas
//! (`GET /v1/lists/{name}/updates/{from}`), a fault proxy mangling delta
//! chains on the way. What must hold: after every update, every URL listed
//! in the version the agent holds is found (its prefix hits the base filter
//! or the additions) and a listed URL is confirmed `unsafe` against the
//! publisher's full hashes; a delta dropped, corrupted, replayed or
//! reordered is refused and the agent takes the whole snapshot in the same
//! round, never a state missing entries; an unchanged list publishes
//! nothing and costs agents a `304` that renews their freshness.

use std::path::Path;
use std::time::{Duration, SystemTime};

use blocksieve_agent::{Agent, ListUpdate};
use blocksieve_format::api::{FRESHNESS_HEADER, routes, snapshot_etag};
use blocksieve_format::{FreshnessRecord, TrustedKey};
use blocksieve_publisher::SourceConfig;
use blocksieve_publisher::SourceFormat;
use blocksieve_tests::churn::{Churn, ChurnConfig};
use blocksieve_tests::fault::{ChainFault, FaultProxy};
use blocksieve_tests::{RunningPublisher, config, fixture_lines};

const LIST: &str = "phishing";

/// A list under seeded churn: the 299 real phishing URLs of the fixture
/// grown by synthetic ones to about `len` entries, then each build adding
/// `add` and removing `remove` of the list.
fn churn(seed: u64, len: usize, add: f64, remove: f64) -> Churn {
    let real = fixture_lines("phishing-urls.txt");
    let grow = len as f64 / real.len() as f64 - 1.0;
    let mut churn = Churn::new(
        real,
        ChurnConfig {
            seed,
            add_per_day: grow,
            remove_per_day: 0.0,
            builds_per_day: 1,
        },
    );
    churn.next_build();
    let grown = churn.entries().to_vec();
    Churn::new(
        grown,
        ChurnConfig {
            seed: seed + 1,
            add_per_day: add,
            remove_per_day: remove,
            builds_per_day: 1,
        },
    )
}

/// A publisher over `dir/feed.txt`, which holds `entries`.
async fn publisher(dir: &Path, entries: &[String]) -> RunningPublisher {
    let feed = dir.join("feed.txt");
    write_feed(&feed, entries);
    let data = dir.join("data");
    let cfg = config(&data, LIST, vec![SourceConfig::file(feed, SourceFormat::Urls)]);
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    server
}

fn write_feed(path: &Path, entries: &[String]) {
    let mut text = entries.join("\n");
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

/// Writes `entries` as the feed and builds: the version published.
async fn rebuild(server: &RunningPublisher, dir: &Path, entries: &[String]) -> (u64, bool) {
    write_feed(&dir.join("feed.txt"), entries);
    let outcomes = server.publisher.build_all().await;
    let [outcome] = outcomes.as_slice() else {
        panic!("one list expected: {outcomes:?}")
    };
    let version = *outcome
        .result
        .as_ref()
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    (version, outcome.unchanged)
}

fn agent(base_url: &str, key: TrustedKey, max_additions_ratio: f64) -> Agent {
    Agent::builder(base_url)
        .list(LIST)
        .trusted_key(key)
        .max_additions_ratio(max_additions_ratio)
        .build()
        .unwrap()
}

/// The agent's one list update: the outcome.
async fn update(agent: &Agent) -> ListUpdate {
    let report = agent.update().await.unwrap();
    report.lists.into_iter().next().map(|(_, u)| u).unwrap()
}

/// Every entry is found by the agent's local lookup (no false negative at
/// the filter level); the number checked.
fn every_entry_found(agent: &Agent, entries: &[String], when: &str) -> usize {
    for url in entries {
        let lookup = agent.lookup_local(url).unwrap();
        assert!(
            !lookup.is_empty(),
            "{when}: listed {url} missed by the local lookup"
        );
    }
    entries.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_follows_100_generations_of_churn_by_deltas_and_finds_every_listed_url() {
    let dir = tempfile::tempdir().unwrap();
    // 1,500 URLs (299 real); each generation adds and removes 3 % of the
    // list (45 URLs each way), new URLs synthetic, seeded.
    let mut churn = churn(16, 1_500, 0.03, 0.03);
    assert!(
        churn.entries().len() >= 1_490,
        "{} entries",
        churn.entries().len()
    );
    let server = publisher(dir.path(), churn.entries()).await;
    // The highest ratio, which 100 generations do not reach: every update is by deltas.
    let agent = agent(&server.base_url(), server.public_key(), 4.0);
    assert!(matches!(update(&agent).await, ListUpdate::Updated { .. }));
    let mut checked = 0;
    let mut confirmed = 0;
    let mut removals = 0;
    for generation in 1..=100 {
        let build = churn.next_build();
        assert!(!build.is_unchanged());
        let (version, unchanged) = rebuild(&server, dir.path(), churn.entries()).await;
        assert!(!unchanged, "generation {generation} changed the list");
        match update(&agent).await {
            ListUpdate::Updated { version: v, .. } => assert_eq!(v, version),
            other => panic!("generation {generation}: {other:?}"),
        }
        checked += every_entry_found(&agent, churn.entries(), &format!("generation {generation}"));
        // Confirmed against the publisher's full hashes: what was added is
        // unsafe, what was removed is not (a stale prefix in the base costs
        // a full-hash request, never a wrong verdict).
        for url in build.added.iter().take(10) {
            assert!(
                agent.check_url(url).await.unwrap().is_unsafe(),
                "added {url} not unsafe"
            );
            confirmed += 1;
        }
        for url in build.removed.iter().take(3) {
            let verdict = agent.check_url(url).await.unwrap();
            assert!(verdict.is_safe(), "removed {url} answered {verdict:?}");
            removals += 1;
        }
    }
    let stats = agent.stats();
    println!(
        "100 generations: {checked} listed URLs found locally, {confirmed} additions confirmed unsafe, \
         {} removals checked safe; \
         snapshots {} deltas {} ({} bytes), fallbacks {}",
        removals, stats.snapshots_applied, stats.deltas_applied, stats.delta_bytes, stats.delta_fallbacks
    );
    assert_eq!(stats.snapshots_applied, 1, "one whole snapshot, then deltas only");
    assert_eq!(stats.deltas_applied, 100);
    assert_eq!(stats.delta_fallbacks, 0);
    let status = &agent.status().lists[0];
    assert!(status.additions > 3_000, "{} additions held", status.additions);
}

/// Each fault on the chain is refused, and the same round takes the whole
/// snapshot: the agent ends at the latest version with every entry found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_corrupted_replayed_or_reordered_delta_is_refused_and_a_snapshot_recovers() {
    let dir = tempfile::tempdir().unwrap();
    // Large enough that a chain of three deltas is smaller than the
    // snapshot, so the publisher serves it (else it answers 410).
    let mut churn = churn(17, 5_000, 0.01, 0.01);
    let server = publisher(dir.path(), churn.entries()).await;
    let proxy = FaultProxy::start(&server.base_url()).await;
    let agent = agent(&proxy.base_url(), server.public_key(), 4.0);
    assert!(matches!(update(&agent).await, ListUpdate::Updated { .. }));
    let faults = [
        ("the middle delta dropped", ChainFault::Drop(1), 3),
        ("the last delta dropped", ChainFault::Drop(usize::MAX), 3),
        ("the only delta dropped", ChainFault::Drop(0), 1),
        ("a body byte corrupted", ChainFault::Corrupt(300), 2),
        ("a signature byte corrupted", ChainFault::Corrupt(200), 1),
        ("two deltas reordered", ChainFault::Reorder, 2),
        ("the previous chain replayed", ChainFault::Replay, 1),
    ];
    for (injected, (what, fault, builds)) in faults.into_iter().enumerate() {
        // A clean round first, so that a replay has an older chain to send.
        churn.next_build();
        rebuild(&server, dir.path(), churn.entries()).await;
        assert!(
            matches!(update(&agent).await, ListUpdate::Updated { .. }),
            "{what}: clean round"
        );
        let mut latest = 0;
        for _ in 0..builds {
            churn.next_build();
            latest = rebuild(&server, dir.path(), churn.entries()).await.0;
        }
        let before = agent.stats();
        proxy.set_chain_fault(fault);
        match update(&agent).await {
            ListUpdate::Updated { version, .. } => assert_eq!(version, latest, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
        let after = agent.stats();
        assert_eq!(
            proxy.chain_faults_applied(),
            injected + 1,
            "{what}: fault not injected"
        );
        assert_eq!(
            after.delta_fallbacks,
            before.delta_fallbacks + 1,
            "{what}: not refused"
        );
        assert_eq!(
            after.snapshots_applied,
            before.snapshots_applied + 1,
            "{what}: no snapshot"
        );
        every_entry_found(&agent, churn.entries(), what);
        assert_eq!(
            agent.status().lists[0].additions,
            0,
            "{what}: the snapshot is the new base"
        );
    }
    // And deltas again afterwards.
    churn.next_build();
    let (latest, _) = rebuild(&server, dir.path(), churn.entries()).await;
    let before = agent.stats();
    assert!(matches!(update(&agent).await, ListUpdate::Updated { version, .. } if version == latest));
    assert_eq!(agent.stats().deltas_applied, before.deltas_applied + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_input_publishes_nothing_and_agents_get_a_304_with_a_fresh_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let entries = fixture_lines("phishing-urls.txt");
    let server = publisher(dir.path(), &entries).await;
    let agent = agent(&server.base_url(), server.public_key(), 0.3);
    let ListUpdate::Updated { version, .. } = update(&agent).await else {
        panic!("first update")
    };
    let expires_before = agent.status().lists[0].expires_at.unwrap();
    let objects = |dir: &Path| -> usize { walk(&dir.join("data")) };
    // The start-up build's last writes (its sources' copies) may land after
    // its snapshot is served: counted once they have.
    let mut stored = objects(dir.path());
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = objects(dir.path());
        if now == stored {
            break;
        }
        stored = now;
    }
    // Freshness records count whole seconds.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    for round in 0..2 {
        let (again, unchanged) = rebuild(&server, dir.path(), &entries).await;
        assert!(unchanged, "round {round}: the build saw a change");
        assert_eq!(again, version, "round {round}: a new version for unchanged input");
        assert_eq!(objects(dir.path()), stored, "round {round}: objects written");
    }
    // On the wire: a 304 that carries a record for exactly this version.
    let header = agent.snapshot_header(LIST).unwrap();
    let etag = snapshot_etag(version, &header.body_sha256);
    let answer = reqwest::Client::new()
        .get(format!("{}{}", server.base_url(), routes::updates(LIST, version)))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 304);
    let record = answer.headers()[FRESHNESS_HEADER].to_str().unwrap();
    let record = FreshnessRecord::from_header_value(record, &[server.public_key()]).unwrap();
    assert_eq!(
        (record.version, record.body_sha256),
        (version, header.body_sha256)
    );
    // The agent: unchanged, fresher than before.
    let before = agent.stats();
    assert!(matches!(update(&agent).await, ListUpdate::Unchanged { version: v } if v == version));
    let after = agent.stats();
    assert_eq!(
        after.freshness_records_applied,
        before.freshness_records_applied + 1
    );
    assert_eq!(
        (after.snapshots_applied, after.deltas_applied),
        (before.snapshots_applied, before.deltas_applied)
    );
    let expires_after = agent.status().lists[0].expires_at.unwrap();
    assert!(
        expires_after > expires_before,
        "freshness not renewed: {expires_before:?} then {expires_after:?}"
    );
    assert!(expires_after > SystemTime::now());
}

/// Files under `dir`, recursively.
fn walk(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    let path = e.path();
                    if path.is_dir() { walk(&path) } else { 1 }
                })
                .sum()
        })
        .unwrap_or(0)
}
