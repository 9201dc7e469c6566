//! Publisher roles on one object store (moto): a builder publishes, and
//! replicas, which build nothing and hold no signing key, follow the store
//! and serve the API — the same bytes and ETags — through store outages.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use blocksieve_agent::Agent;
use blocksieve_format::api::routes;
use blocksieve_publisher::internal::storage::{generate_signing_key, write_key_pair};
use blocksieve_publisher::{Config, Role, SourceConfig, SourceFormat};
use blocksieve_tests::fault::HeldWrites;
use blocksieve_tests::moto::{Moto, store_options_at};
use blocksieve_tests::{RunningPublisher, append_line, config, fixture_feed, fixture_lines};

const READY: Duration = Duration::from_secs(60);
/// How long a replica may take to follow a new build: a few checks of the
/// store, one second apart.
const FOLLOW: Duration = Duration::from_secs(20);
/// The store's URL on every moto of these tests (one bucket, one prefix).
const STORE: &str = "s3://blocksieve-test/shared";

/// A publisher in `role` on the store at `store`, over the feed `feed`.
fn on_store(role: Role, store: SocketAddr, data_dir: &Path, feed: &Path) -> Config {
    Config {
        role,
        store: Some(STORE.to_owned()),
        store_options: store_options_at(store),
        replica_poll_s: 1,
        ..config(
            data_dir,
            "phishing",
            vec![SourceConfig::file(feed, SourceFormat::Urls)],
        )
    }
}

/// A replica of that store, trusting `public_key` (base64).
fn replica(store: SocketAddr, data_dir: &Path, public_key: &str) -> Config {
    Config {
        public_key: Some(public_key.to_owned()),
        ..on_store(Role::Replica, store, data_dir, Path::new("unused"))
    }
}

/// A signing key in `dir` (the builder's data directory) and its public
/// key, base64: replicas are configured before the builder first runs.
fn key_pair(dir: &Path) -> String {
    let key = generate_signing_key();
    write_key_pair(&key, &dir.join("signing.key")).unwrap();
    key.public_key().to_base64()
}

/// A feed file of the fixture's lines in `dir`.
fn feed(dir: &Path) -> std::path::PathBuf {
    fixture_feed(dir, "phishing-urls.txt")
}

async fn status(base: &str, path: &str) -> u16 {
    reqwest::get(format!("{base}{path}"))
        .await
        .map_or(0, |r| r.status().as_u16())
}

/// The status page at `base`.
async fn status_page(base: &str) -> String {
    reqwest::get(format!("{base}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The latest snapshot's version, ETag and bytes.
async fn latest(base: &str) -> (u64, String, Vec<u8>) {
    let answer = reqwest::get(format!("{base}{}", routes::latest_snapshot("phishing")))
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let etag = answer.headers()["etag"].to_str().unwrap().to_owned();
    let bytes = answer.bytes().await.unwrap().to_vec();
    let version = blocksieve_format::parse_header_unverified(&bytes)
        .unwrap()
        .version;
    (version, etag, bytes)
}

fn served_version(server: &RunningPublisher) -> Option<u64> {
    let current = server.publisher.state().lists[0].current.load_full();
    current.map(|p| p.header.version)
}

async fn wait_for_version(server: &RunningPublisher, version: u64, within: Duration) {
    let started = Instant::now();
    while served_version(server) != Some(version) {
        assert!(
            started.elapsed() < within,
            "version {version} not served within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn agent_of(server: &RunningPublisher, public_key: &str) -> Agent {
    Agent::builder(server.base_url())
        .list("phishing")
        .trusted_key(blocksieve_format::TrustedKey::from_base64(public_key).unwrap())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builder_and_two_replicas_on_one_bucket_serve_the_same_snapshot_and_follow_builds() {
    let Some(moto) = Moto::start().await else { return };
    let (builder_dir, dirs) = (
        tempfile::tempdir().unwrap(),
        [(); 2].map(|()| tempfile::tempdir().unwrap()),
    );
    let public_key = key_pair(builder_dir.path());
    let feed = feed(builder_dir.path());

    // Replicas first: nothing is published, so they are not ready.
    let replicas = [0, 1].map(|i| replica(moto.addr, dirs[i].path(), &public_key));
    let [first, second] = replicas;
    let (first, second) = (
        RunningPublisher::start(first).await,
        RunningPublisher::start(second).await,
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for r in [&first, &second] {
        assert_eq!(status(&r.base_url(), "/readyz").await, 503);
        assert_eq!(status(&r.base_url(), routes::LISTS).await, 200);
    }
    // A replica neither needs nor creates a signing key, nor any file.
    for dir in &dirs {
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }

    let builder =
        RunningPublisher::start(on_store(Role::Builder, moto.addr, builder_dir.path(), &feed)).await;
    builder.wait_ready(READY).await;
    let version = served_version(&builder).unwrap();
    // The builder serves only the operational routes, its status page and
    // build history among them (its builds and sources are there).
    assert_eq!(status(&builder.base_url(), "/readyz").await, 200);
    assert_eq!(status(&builder.base_url(), "/metrics").await, 200);
    assert_eq!(status(&builder.base_url(), routes::LISTS).await, 404);
    assert_eq!(
        status(&builder.base_url(), &routes::list_history("phishing")).await,
        200
    );
    let page = status_page(&builder.base_url()).await;
    assert!(page.contains("Role <b>builder</b>"), "{page}");
    // The generation it published, as a replica shows the one it loaded
    // (a builder's page said "generation –": only a replica's follower
    // recorded it).
    let store_generation = |server: &RunningPublisher| {
        let status = server.publisher.state().lists[0]
            .store_status
            .lock()
            .unwrap()
            .clone();
        status.and_then(|s| s.generation)
    };
    assert_eq!(store_generation(&builder), Some(1));

    first.wait_ready(READY).await;
    second.wait_ready(READY).await;
    // A replica builds nothing: its history route says where builds are.
    assert_eq!(
        status(&first.base_url(), &routes::list_history("phishing")).await,
        404
    );
    // A replica's page: what it serves, not stale, and where builds are shown.
    let page = status_page(&first.base_url()).await;
    assert!(page.contains("It builds nothing"), "{page}");
    assert!(
        page.contains("<h2 id=\"list-phishing\">phishing <span class=\"s "),
        "{page}"
    );
    assert!(
        !page.contains("stale:") && !page.contains("no snapshot served"),
        "{page}"
    );
    let (v1, etag1, bytes1) = latest(&first.base_url()).await;
    let (v2, etag2, bytes2) = latest(&second.base_url()).await;
    assert_eq!((v1, v2), (version, version));
    assert_eq!(etag1, etag2);
    assert!(bytes1 == bytes2, "replicas serve different bytes");
    let built = builder.publisher.state().lists[0].current.load_full().unwrap();
    assert!(bytes1 == built.snapshot.as_ref(), "not the builder's bytes");
    assert_eq!(etag1, built.etag);

    // An agent pointed at a replica: a listed URL is unsafe, another safe.
    let agent = agent_of(&first, &public_key);
    assert!(agent.update().await.unwrap().is_complete());
    let listed = &fixture_lines("phishing-urls.txt")[0];
    assert!(agent.check_url(listed).await.unwrap().is_unsafe(), "{listed}");
    let added = "https://replica-follows.example/new-entry";
    assert!(!agent.check_url(added).await.unwrap().is_unsafe());

    // The feed changes and the builder rebuilds: both replicas follow.
    append_line(&feed, added);
    let rebuilt = builder.publisher.build_list(0).await.result.unwrap();
    assert!(rebuilt > version);
    wait_for_version(&first, rebuilt, FOLLOW).await;
    wait_for_version(&second, rebuilt, FOLLOW).await;
    assert_eq!(store_generation(&builder), Some(2));
    assert_eq!(store_generation(&first), Some(2));
    let page = status_page(&builder.base_url()).await;
    assert!(page.contains(", generation 2."), "{page}");
    let (_, etag1, bytes1) = latest(&first.base_url()).await;
    let (_, etag2, bytes2) = latest(&second.base_url()).await;
    assert_eq!(etag1, etag2);
    assert!(bytes1 == bytes2, "replicas serve different bytes after a rebuild");
    let agent = agent_of(&second, &public_key);
    assert!(agent.update().await.unwrap().is_complete());
    assert!(agent.check_url(added).await.unwrap().is_unsafe(), "{added}");
    assert!(!agent.check_url("https://example.com/").await.unwrap().is_unsafe());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_while_the_store_is_unreachable_becomes_ready_once_it_answers() {
    // A port where nothing listens yet; moto takes it later.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let store = SocketAddr::from(([127, 0, 0, 1], port));
    let (builder_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let public_key = key_pair(builder_dir.path());
    let replica = RunningPublisher::start(replica(store, replica_dir.path(), &public_key)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(status(&replica.base_url(), "/readyz").await, 503);
    assert_eq!(status(&replica.base_url(), "/healthz").await, 200);

    let Some(_moto) = Moto::start_on(port).await else {
        return;
    };
    let feed = feed(builder_dir.path());
    let builder = RunningPublisher::start(on_store(Role::Builder, store, builder_dir.path(), &feed)).await;
    builder.wait_ready(READY).await;
    // No operator action: the replica's next check finds the store.
    replica.wait_ready(READY).await;
    assert_eq!(status(&replica.base_url(), "/readyz").await, 200);
    assert_eq!(served_version(&replica), served_version(&builder));
    wait_for_metric(&replica, "blocksieve_replica_store_reachable 1", FOLLOW).await;
}

/// Waits until `/metrics` has the line `line`.
async fn wait_for_metric(server: &RunningPublisher, line: &str, within: Duration) {
    let started = Instant::now();
    loop {
        let metrics = reqwest::get(format!("{}/metrics", server.base_url()))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metrics.lines().any(|l| l == line) {
            return;
        }
        assert!(
            started.elapsed() < within,
            "no {line:?} within {within:?}: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_keeps_serving_what_it_loaded_when_the_store_goes_away() {
    let Some(moto) = Moto::start().await else { return };
    let (builder_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let public_key = key_pair(builder_dir.path());
    let feed = feed(builder_dir.path());
    let builder = RunningPublisher::start(on_store(Role::All, moto.addr, builder_dir.path(), &feed)).await;
    builder.wait_ready(READY).await;
    let replica = RunningPublisher::start(replica(moto.addr, replica_dir.path(), &public_key)).await;
    replica.wait_ready(READY).await;
    let before = latest(&replica.base_url()).await;

    builder.stop().await;
    drop(moto);
    // The replica notices, and keeps serving.
    wait_for_metric(&replica, "blocksieve_replica_store_reachable 0", READY).await;
    assert_eq!(status(&replica.base_url(), "/readyz").await, 200);
    // `/v1/lists` flags it too: the store is not reached, since when, and
    // which generation serves.
    let lists: blocksieve_format::api::ListsResponse =
        reqwest::get(format!("{}{}", replica.base_url(), routes::LISTS))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let store = lists.lists[0].store.clone().expect("a replica's store status");
    assert!(!store.reachable, "{store:?}");
    assert!(store.last_checked_at.is_some(), "{store:?}");
    assert_eq!(store.generation, Some(1), "{store:?}");
    // And why: the last check's error (it showed only `reachable: false`).
    assert!(
        store.last_error.as_deref().is_some_and(|e| !e.is_empty()),
        "{store:?}"
    );
    let after = latest(&replica.base_url()).await;
    assert_eq!((after.0, &after.1), (before.0, &before.1));
    assert!(after.2 == before.2, "the snapshot changed");
    let agent = agent_of(&replica, &public_key);
    assert!(agent.update().await.unwrap().is_complete());
    let listed = &fixture_lines("phishing-urls.txt")[0];
    assert!(agent.check_url(listed).await.unwrap().is_unsafe(), "{listed}");
    assert!(!agent.check_url("https://example.com/").await.unwrap().is_unsafe());
}

#[tokio::test]
async fn a_replica_takes_the_public_key_file_and_never_creates_a_signing_key() {
    // No request reaches the store when a replica opens: nothing listens.
    let store = SocketAddr::from(([127, 0, 0, 1], 9));
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = on_store(Role::Replica, store, dir.path(), Path::new("unused"));
    match blocksieve_publisher::Publisher::open(cfg.clone()) {
        Err(e @ blocksieve_publisher::Error::Config { .. }) => {
            assert!(e.to_string().contains("pass --key"), "{e}");
        }
        other => panic!("a replica without a public key: {other:?}"),
    }
    let key = generate_signing_key();
    let public = key.public_key().to_base64();
    std::fs::write(dir.path().join("public.key"), format!("{public}\n")).unwrap();
    let replica = blocksieve_publisher::Publisher::open(cfg.clone()).unwrap();
    assert_eq!(replica.public_key().to_base64(), public);
    assert!(replica.build_list(0).await.result.is_err());
    drop(replica);
    assert!(!dir.path().join("signing.key").exists());
    assert!(!dir.path().join("lock").exists());
    // A key given in the configuration wins over the file.
    let other = generate_signing_key().public_key().to_base64();
    cfg.public_key = Some(other.clone());
    let replica = blocksieve_publisher::Publisher::open(cfg).unwrap();
    assert_eq!(replica.public_key().to_base64(), other);
}

/// Two replicas behind one name are not in lockstep: an agent whose filter
/// came from the replica that followed a rebuild may ask one that has not
/// yet. The request carries the versions the agent holds, so the lagging
/// replica answers `503 behind` rather than "no match" for a newly listed
/// URL: the check is unverified (never safe), and with the fresh replica as
/// a mirror it is unsafe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_lagging_replica_never_answers_safe_for_a_url_the_agents_filter_lists() {
    let Some(moto) = Moto::start().await else { return };
    let (builder_dir, dirs) = (
        tempfile::tempdir().unwrap(),
        [(); 2].map(|()| tempfile::tempdir().unwrap()),
    );
    let public_key = key_pair(builder_dir.path());
    let feed = feed(builder_dir.path());
    let builder =
        RunningPublisher::start(on_store(Role::Builder, moto.addr, builder_dir.path(), &feed)).await;
    builder.wait_ready(READY).await;
    let fresh = RunningPublisher::start(replica(moto.addr, dirs[0].path(), &public_key)).await;
    // The lagging one checks the store every 10 minutes (or is stuck).
    let lagging = RunningPublisher::start(Config {
        replica_poll_s: 600,
        ..replica(moto.addr, dirs[1].path(), &public_key)
    })
    .await;
    fresh.wait_ready(READY).await;
    lagging.wait_ready(READY).await;

    let added = "https://replica-lag.example/new-phish";
    append_line(&feed, added);
    let rebuilt = builder.publisher.build_list(0).await.result.unwrap();
    wait_for_version(&fresh, rebuilt, FOLLOW).await;
    assert_ne!(served_version(&lagging), Some(rebuilt));

    let cache = tempfile::tempdir().unwrap();
    let key = blocksieve_format::TrustedKey::from_base64(&public_key).unwrap();
    let via = |base: String, mirror: Option<String>| {
        let mut builder = Agent::builder(base)
            .list("phishing")
            .trusted_key(key.clone())
            .cache_dir(cache.path());
        if let Some(mirror) = mirror {
            builder = builder.mirror(mirror);
        }
        builder.build().unwrap()
    };
    let a = via(fresh.base_url(), None);
    assert!(a.update().await.unwrap().is_complete());
    assert!(a.check_url(added).await.unwrap().is_unsafe());
    drop(a);
    // The same agent state (its cache directory), the next request routed
    // to the lagging replica.
    let b = via(lagging.base_url(), None);
    let _ = b.update().await;
    let verdict = b.check_url(added).await.unwrap();
    assert!(
        verdict.is_unverified(),
        "{added} is in the agent's filter: {verdict:?}"
    );
    drop(b);
    // With the fresh replica as a mirror, the agent asks it next.
    let c = via(lagging.base_url(), Some(fresh.base_url()));
    let verdict = c.check_url(added).await.unwrap();
    assert!(verdict.is_unsafe(), "{verdict:?}");
}

/// Two builders and three replicas on one store, 50 generations: every
/// replica serves every generation, the agents' versions only increase
/// and every URL added by a generation is unsafe to each agent once it
/// holds that generation, and a watcher that follows `latest` throughout
/// always finds a generation that loads whole (retention runs meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_builders_and_three_replicas_serve_fifty_generations_in_order() {
    use blocksieve_publisher::internal::storage::{ListStore, ObjectStorage, Storage};
    const GENERATIONS: u64 = 50;
    let Some(moto) = Moto::start().await else { return };
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let public_key = key_pair(dir_a.path());
    let feed = feed(dir_a.path());
    let builders = [
        RunningPublisher::start(on_store(Role::Builder, moto.addr, dir_a.path(), &feed)).await,
        RunningPublisher::start(Config {
            signing_key: Some(dir_a.path().join("signing.key")),
            ..on_store(Role::Builder, moto.addr, dir_b.path(), &feed)
        })
        .await,
    ];
    let replica_dirs = [(); 3].map(|()| tempfile::tempdir().unwrap());
    let mut replicas = Vec::new();
    for dir in &replica_dirs {
        replicas.push(RunningPublisher::start(replica(moto.addr, dir.path(), &public_key)).await);
    }
    let key = blocksieve_format::TrustedKey::from_base64(&public_key).unwrap();
    let storage: std::sync::Arc<dyn Storage> =
        std::sync::Arc::new(ObjectStorage::s3(STORE, &store_options_at(moto.addr)).unwrap());
    let store = ListStore::open(storage, "phishing", 5).unwrap();

    // The watcher: every pointer it sees names a generation that loads.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (store, key, stop) = (store.clone(), key.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if let Some(latest) = store.latest().unwrap() {
                    let g = latest.pointer.generation;
                    if let Err(e) = store.load_generation(g, std::slice::from_ref(&key)) {
                        panic!("latest points at generation {g}, which does not load: {e}");
                    }
                    seen.insert(g);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            seen
        })
    };

    // Each builder's first build (started with it) is over once a build
    // of its own has taken the list's build lock after it.
    for builder in &builders {
        let _ = builder.publisher.build_list(0).await;
    }
    let agents: Vec<Agent> = replicas.iter().map(|r| agent_of(r, &public_key)).collect();
    let mut history: Vec<Vec<u64>> = vec![Vec::new(); agents.len()];
    let mut published = 0u64;
    let mut round = 0;
    let mut outcomes = std::collections::BTreeMap::new();
    while published < GENERATIONS {
        round += 1;
        assert!(
            round < 2 * GENERATIONS as usize,
            "{published} generations in {round} rounds"
        );
        let added = format!("https://generation-{round}.example/phish");
        let mut text = std::fs::read_to_string(&feed).unwrap();
        text.push_str(&added);
        text.push('\n');
        std::fs::write(&feed, text).unwrap();
        // Both builders build at once: the lease lets one build, the
        // conditional writes let one publish.
        let (a, b) = tokio::join!(
            builders[0].publisher.build_list(0),
            builders[1].publisher.build_list(0)
        );
        for outcome in [&a, &b] {
            let kind = match &outcome.result {
                Ok(_) => "published",
                Err(blocksieve_publisher::Error::LeaseHeld { .. }) => "skipped",
                Err(blocksieve_publisher::Error::Superseded { .. }) => "superseded",
                Err(e) => panic!("a build failed: {e}"),
            };
            *outcomes.entry(kind).or_insert(0) += 1;
        }
        let versions: Vec<u64> = [&a, &b]
            .iter()
            .filter_map(|o| o.result.as_ref().ok().copied())
            .collect();
        assert!(versions.len() <= 1, "two publishes of one round: {a:?} {b:?}");
        let Some(&version) = versions.first() else {
            continue;
        };
        published = store.latest().unwrap().unwrap().pointer.generation;
        for replica in &replicas {
            wait_for_version(replica, version, FOLLOW).await;
        }
        for (agent, history) in agents.iter().zip(&mut history) {
            assert!(agent.update().await.unwrap().is_complete());
            history.push(agent.snapshot_version("phishing").unwrap());
            assert!(
                agent.check_url(&added).await.unwrap().is_unsafe(),
                "{added} at version {version}"
            );
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = watcher.join().unwrap();
    for history in &history {
        assert!(history.windows(2).all(|w| w[0] < w[1]), "{history:?}");
        assert!(history.len() as u64 >= GENERATIONS - 4, "{history:?}");
    }
    assert!(seen.len() > 1, "the watcher saw {seen:?}");
    eprintln!(
        "{published} generations in {round} rounds; builds: {outcomes:?}; the watcher loaded {} distinct latest generations",
        seen.len()
    );
    // Every replica answers the same bytes and ETag for the latest.
    let mut answers = Vec::new();
    for replica in &replicas {
        answers.push(latest(&replica.base_url()).await);
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "replicas differ");
}

/// A replica given another public key than the builders' (a key copied
/// from the wrong host) loads nothing, and says why where an operator
/// looks: the snapshot route's `no_snapshot`, `/v1/lists` (which
/// `/readyz` points to) and the status page. They said only that no load
/// had finished yet, and `store` looked healthy (reachable, no error): the
/// reason was in one log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_replica_with_another_public_key_says_why_it_serves_nothing() {
    let Some(moto) = Moto::start().await else { return };
    let (builder_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    key_pair(builder_dir.path());
    let feed = feed(builder_dir.path());
    let builder =
        RunningPublisher::start(on_store(Role::Builder, moto.addr, builder_dir.path(), &feed)).await;
    builder.wait_ready(READY).await;
    let other_key = generate_signing_key().public_key().to_base64();
    let replica = RunningPublisher::start(replica(moto.addr, replica_dir.path(), &other_key)).await;

    let lists = format!("{}{}", replica.base_url(), routes::LISTS);
    let started = Instant::now();
    let refused = loop {
        let answer: serde_json::Value = reqwest::get(&lists).await.unwrap().json().await.unwrap();
        if let Some(refused) = answer["lists"][0]["store"]["refused"].as_str() {
            break refused.to_owned();
        }
        assert!(started.elapsed() < FOLLOW, "no refusal in {answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(refused.contains("does not verify"), "{refused}");
    assert_eq!(status(&replica.base_url(), "/readyz").await, 503);

    let answer = reqwest::get(format!(
        "{}{}",
        replica.base_url(),
        routes::latest_snapshot("phishing")
    ))
    .await
    .unwrap();
    assert_eq!(answer.status(), 404);
    let body = answer.text().await.unwrap();
    assert!(
        body.contains("no_snapshot") && body.contains("does not verify"),
        "{body}"
    );
    assert!(!body.contains("has finished yet"), "{body}");

    let page = status_page(&replica.base_url()).await;
    assert!(page.contains("does not verify"), "{page}");
}

/// Asserts that `publisher`'s list 0 is leased while `build` is `doing`
/// something, cancels `build` (its task dropped, as at shutdown), and
/// waits (up to 10 s) for the lease to be released.
async fn cancel_and_see_the_lease_released(
    publisher: &blocksieve_publisher::Publisher,
    build: tokio::task::JoinHandle<blocksieve_publisher::ListBuildOutcome>,
    doing: &str,
) {
    let lease = || {
        let store = publisher.state().lists[0].store.lease();
        store.unwrap().expect("a lease object").expires_at
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(lease() > now, "no lease held while {doing}");

    build.abort();
    assert!(build.await.unwrap_err().is_cancelled());
    let deadline = Instant::now() + Duration::from_secs(10);
    while lease() != 0 {
        assert!(
            Instant::now() < deadline,
            "the build cancelled while {doing} left the lease held until {}",
            lease()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A build cancelled while it still fetches its sources (its task dropped
/// at the drain deadline, before the blocking build that releases the
/// lease when cancelled) releases the list's lease too. Before, the lease
/// stayed held until it expired (`lease_s`, 10 minutes by default), and
/// other builders on the store skipped the list meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_build_cancelled_while_fetching_releases_its_lease() {
    let Some(moto) = Moto::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    key_pair(dir.path());
    // A feed server that takes the request and never answers: the build
    // waits in its (async) fetch until its source's timeout.
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let feed_url = format!("http://{}/feed.txt", server.local_addr().unwrap());
    let (accepted, mut first) = tokio::sync::mpsc::channel(8);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = server.accept().await {
            held.push(socket);
            let _ = accepted.try_send(());
        }
    });
    let mut config = on_store(Role::Builder, moto.addr, dir.path(), Path::new("unused"));
    config.lists[0].sources = vec![SourceConfig::http(feed_url, SourceFormat::Urls)];
    let publisher = blocksieve_publisher::Publisher::open(config).unwrap();
    let building = publisher.clone();
    let build = tokio::spawn(async move { building.build_list(0).await });
    tokio::time::timeout(Duration::from_secs(30), first.recv())
        .await
        .expect("the build never asked the feed");
    cancel_and_see_the_lease_released(&publisher, build, "fetching").await;
}

/// A builder's build cancelled while it reads its source (its task
/// dropped, as at shutdown) releases the list's lease: another builder on
/// the store builds the list at its next turn. The lease was released only
/// by the task, after the build, so a cancelled build left it held for
/// `lease_s` (10 minutes by default), and every other builder skipped the
/// list ("another builder builds this list now") for a build that published
/// nothing. The source is a FIFO fed a line every 20 ms: the read lasts as
/// long as the test lets it.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_build_cancelled_while_reading_releases_its_lease() {
    let Some(moto) = Moto::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    key_pair(dir.path());
    let fifo = dir.path().join("slow.txt");
    let feed = blocksieve_tests::process::Feed::new(&fifo);
    feed.open();
    let publisher =
        blocksieve_publisher::Publisher::open(on_store(Role::Builder, moto.addr, dir.path(), &fifo)).unwrap();
    let building = publisher.clone();
    let build = tokio::spawn(async move { building.build_list(0).await });
    // (The feed is kept to the end: dropped, it ends the source, and the
    // build with it.)
    assert_eq!(tokio::task::block_in_place(|| feed.next_opening()), 1);
    cancel_and_see_the_lease_released(&publisher, build, "reading").await;
    assert!(
        publisher.state().lists[0].current.load().is_none(),
        "a cancelled build published"
    );
}

/// A build cancelled (its task dropped, as at the drain deadline) while it
/// publishes finishes publishing, and leaves its history line and status
/// for what it published. Before, the task that records them was gone: the
/// history, `/v1/lists` and the status page missed a version the store
/// served (the next start showed a gap in the list's builds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_build_cancelled_while_publishing_records_what_it_published() {
    let Some(moto) = Moto::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    key_pair(dir.path());
    let feed = feed(dir.path());
    // The store takes the build's objects, and holds its manifest.
    let store = HeldWrites::start(&moto.endpoint(), "/generations/").await;
    let config = on_store(Role::Builder, store.addr(), dir.path(), &feed);
    let publisher = blocksieve_publisher::Publisher::open(config).unwrap();
    let building = publisher.clone();
    let build = tokio::spawn(async move { building.build_list(0).await });
    assert!(
        store.arrived(Duration::from_secs(60)).await,
        "the build never wrote its manifest"
    );
    build.abort();
    assert!(build.await.unwrap_err().is_cancelled());
    store.release();

    let last = || {
        publisher.state().lists[0]
            .watch
            .with_history(|h| h.back().map(|r| (r.outcome.clone(), r.version)))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let (outcome, version) = loop {
        if let Some(last) = last() {
            break last;
        }
        assert!(
            Instant::now() < deadline,
            "the build cancelled while publishing left no history line"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(outcome, "published");
    let served = publisher.state().lists[0]
        .current
        .load()
        .as_ref()
        .map(|p| p.header.version);
    assert_eq!(version, served);
    assert!(version.is_some());
}
