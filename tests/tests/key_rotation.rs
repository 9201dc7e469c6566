//! Rotating the signing key (README "Rotating the signing key"): agents
//! and replicas trust the next key first, the builders switch to it with
//! the old one in `previous_public_keys`, and every list is published
//! again under the new key at the next build, changed or not — a listed
//! URL is answered "unsafe" at every step, by agents that trust both keys
//! and, at the end, by one that trusts only the new key.

use std::path::Path;
use std::time::{Duration, Instant};

use blocksieve_agent::Agent;
use blocksieve_format::TrustedKey;
use blocksieve_format::api::{ListsResponse, routes};
use blocksieve_publisher::internal::storage::{
    ObjectStorage, PutMode, Storage as _, generate_signing_key, write_key_pair,
};
use blocksieve_publisher::{Config, Error, Publisher, Role, SourceConfig, SourceFormat};
use blocksieve_tests::moto::{Moto, store_options_at};
use blocksieve_tests::{RunningPublisher, config, fixture_feed, fixture_lines, reopen};

const READY: Duration = Duration::from_secs(60);
const FOLLOW: Duration = Duration::from_secs(20);

/// A builder (or, `Role::Replica`, a replica) on the moto store at `moto`.
fn on_store(role: Role, moto: &Moto, data_dir: &Path, feed: &Path) -> Config {
    Config {
        role,
        store: Some("s3://blocksieve-test/rotation".to_owned()),
        store_options: store_options_at(moto.addr),
        replica_poll_s: 1,
        ..config(
            data_dir,
            "phishing",
            vec![SourceConfig::file(feed, SourceFormat::Urls)],
        )
    }
}

fn agent_of(base: &str, keys: &[&TrustedKey]) -> Agent {
    Agent::builder(base)
        .list("phishing")
        .trusted_keys(keys.iter().map(|k| (*k).clone()))
        .build()
        .unwrap()
}

/// `/v1/lists`'s version and key id of the served snapshot.
async fn served(base: &str) -> (u64, String) {
    let lists: ListsResponse = reqwest::get(format!("{base}{}", routes::LISTS))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let snapshot = lists.lists[0].snapshot.clone().expect("a served snapshot");
    (snapshot.version, snapshot.key_id)
}

async fn wait_for_key(base: &str, key: &TrustedKey, within: Duration) -> u64 {
    let started = Instant::now();
    loop {
        let (version, key_id) = served(base).await;
        if key_id == hex::encode(key.id()) {
            return version;
        }
        assert!(started.elapsed() < within, "still {key_id} after {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signing_key_is_rotated_without_a_listed_url_answered_safe() {
    let Some(moto) = Moto::start().await else { return };
    let (builder_dir, replica_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let feed = fixture_feed(builder_dir.path(), "phishing-urls.txt");
    let old = generate_signing_key();
    write_key_pair(&old, &builder_dir.path().join("signing.key")).unwrap();
    let next = generate_signing_key();
    let next_path = builder_dir.path().join("next.key");
    write_key_pair(&next, &next_path).unwrap();
    let (old_public, next_public) = (old.public_key().clone(), next.public_key().clone());
    let listed = fixture_lines("phishing-urls.txt")[0].clone();

    let builder = RunningPublisher::start(on_store(Role::All, &moto, builder_dir.path(), &feed)).await;
    builder.wait_ready(READY).await;
    // A second version under the old key: its chain holds a delta the old
    // key signed.
    std::fs::write(
        &feed,
        std::fs::read_to_string(&feed).unwrap() + "http://before-rotation.example/p\n",
    )
    .unwrap();
    builder.publisher.build_list(0).await.result.unwrap();
    let (first, first_key) = served(&builder.base_url()).await;
    assert_eq!(first_key, hex::encode(old_public.id()));

    // Step 1: replicas (and agents) trust the next key, the current one
    // kept as previous: the replica serves what the old key signed.
    let replica = RunningPublisher::start(Config {
        public_key: Some(next_public.to_base64()),
        previous_public_keys: vec![old_public.to_base64()],
        ..on_store(Role::Replica, &moto, replica_dir.path(), Path::new("unused"))
    })
    .await;
    replica.wait_ready(READY).await;
    assert_eq!(served(&replica.base_url()).await, (first, first_key.clone()));
    let both = agent_of(&replica.base_url(), &[&old_public, &next_public]);
    assert!(both.update().await.unwrap().is_complete());
    assert!(both.check_url(&listed).await.unwrap().is_unsafe(), "{listed}");

    // Step 2: the builder switches to the next key, the old one previous.
    // Its first build publishes the unchanged list again, under the new
    // key, without --force (a builder given another key with no previous
    // key is refused: `store.rs`).
    builder.stop().await;
    let switched = Config {
        signing_key: Some(next_path.clone()),
        previous_public_keys: vec![old_public.to_base64()],
        ..on_store(Role::All, &moto, builder_dir.path(), &feed)
    };
    let builder = RunningPublisher::run_opened(reopen(switched.clone()).unwrap()).await;
    builder.wait_ready(READY).await;
    let second = wait_for_key(&builder.base_url(), &next_public, READY).await;
    assert!(second > first, "{second} after {first}");
    assert_eq!(
        wait_for_key(&replica.base_url(), &next_public, FOLLOW).await,
        second
    );
    // The public key file beside the new signing key is its own.
    let written = std::fs::read_to_string(next_path.with_file_name("next.key.pub")).unwrap();
    assert_eq!(written.trim(), next_public.to_base64());

    // The agent that trusts both follows (what it fetches, the new key signed).
    assert!(both.update().await.unwrap().is_complete());
    assert!(both.check_url(&listed).await.unwrap().is_unsafe(), "{listed}");
    // Step 3: an agent that trusts only the new key gets the list.
    let only_next = agent_of(&replica.base_url(), &[&next_public]);
    assert!(only_next.update().await.unwrap().is_complete());
    assert!(
        only_next.check_url(&listed).await.unwrap().is_unsafe(),
        "{listed}"
    );
    assert!(
        !only_next
            .check_url("https://example.com/")
            .await
            .unwrap()
            .is_unsafe()
    );

    // Under the new key, an unchanged build publishes nothing again.
    let again = builder.publisher.build_list(0).await;
    assert!(again.unchanged, "{:?}", again.result);
    assert_eq!(served(&builder.base_url()).await.0, second);
    builder.stop().await;
    replica.stop().await;

    // Step 4: the previous key dropped, a replica and the builder serve
    // the new key's generation at start, no build needed (its chain held
    // the old key's delta, and both refused it: the replica served
    // nothing, the builder nothing until it built anew). Found by an
    // adversarial review.
    let replica = RunningPublisher::start(Config {
        public_key: Some(next_public.to_base64()),
        ..on_store(Role::Replica, &moto, replica_dir.path(), Path::new("unused"))
    })
    .await;
    replica.wait_ready(READY).await;
    assert_eq!(
        served(&replica.base_url()).await,
        (second, hex::encode(next_public.id()))
    );
    replica.stop().await;
    let done = Config {
        previous_public_keys: Vec::new(),
        ..switched
    };
    let publisher: Publisher = reopen(done).unwrap();
    let at_start = publisher.state().lists[0].current.load_full();
    assert_eq!(at_start.map(|p| p.header.version), Some(second));
    let rebuilt = publisher.build_list(0).await;
    assert!(rebuilt.unchanged, "{:?}", rebuilt.result);
    let latest = publisher.state().lists[0].current.load_full().unwrap();
    assert_eq!(latest.header.key_id, next_public.id());
}

/// A builder left on the old key (README step 4 says to stop them all;
/// one was not, or a supervisor restarted it with its old configuration)
/// after another builder published under the new key: it is refused, as a
/// builder given the wrong key is, and the store is left as it is. Before,
/// the newest generation its key verified (the old key's last) was taken
/// as the head: an unchanged build moved `latest` back to it, a changed
/// one replaced the new key's manifest under the same number with its own
/// ("replacing what is stored as this generation's manifest"), both
/// signed by the old key, which readers that dropped it refuse (the list
/// then stale for them). Found by an adversarial review.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_builder_left_on_the_old_key_is_refused_and_changes_nothing() {
    let Some(moto) = Moto::start().await else { return };
    let (old_dir, new_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let feed = fixture_feed(old_dir.path(), "phishing-urls.txt");
    let stale = Publisher::open(on_store(Role::All, &moto, old_dir.path(), &feed)).unwrap();
    stale.build_list(0).await.result.unwrap();
    let old_public = stale.public_key().clone();

    let next = generate_signing_key();
    write_key_pair(&next, &new_dir.path().join("signing.key")).unwrap();
    let switched = Publisher::open(Config {
        previous_public_keys: vec![old_public.to_base64()],
        ..on_store(Role::All, &moto, new_dir.path(), &feed)
    })
    .unwrap();
    switched.build_list(0).await.result.unwrap();
    let store = &switched.state().lists[0].store;
    let pointer = || store.latest().unwrap().unwrap().pointer;
    let rotated = pointer();
    assert_eq!(rotated.generation, 2);
    let manifest = || {
        store
            .manifest(2, std::slice::from_ref(next.public_key()))
            .unwrap()
    };
    let rotated_manifest = manifest();

    for changed in [false, true] {
        if changed {
            std::fs::write(
                &feed,
                std::fs::read_to_string(&feed).unwrap() + "http://after-rotation.example/p\n",
            )
            .unwrap();
        }
        let refused = stale.build_list(0).await.result;
        assert!(
            matches!(refused, Err(Error::OtherSigningKey { generation: 2, .. })),
            "changed {changed}: {refused:?}"
        );
        assert_eq!(pointer(), rotated, "changed {changed}");
        assert_eq!(manifest(), rotated_manifest, "changed {changed}");
    }
    // The builder on the new key goes on.
    switched.build_list(0).await.result.unwrap();
    assert_eq!(pointer().generation, 3);

    // Past retention (generations 1 to 3 removed), with `latest` removed or
    // garbage: the old key's builder has no head (or only its own
    // generation below the rotation's), and took generation 1 again,
    // pointed `latest` at it and its retention removed the rotation's
    // objects. It is refused by the newest generation stored. Found by a
    // review.
    for round in 0..5 {
        let lines = std::fs::read_to_string(&feed).unwrap();
        std::fs::write(&feed, lines + &format!("http://later-{round}.example/p\n")).unwrap();
        switched.build_list(0).await.result.unwrap();
    }
    assert_eq!(pointer().generation, 8);
    let raw = ObjectStorage::s3("s3://blocksieve-test/rotation", &store_options_at(moto.addr)).unwrap();
    let kept = raw.get("lists/phishing/latest").unwrap().unwrap();
    for damaged in [None, Some(b"garbage".to_vec())] {
        match &damaged {
            None => raw.delete("lists/phishing/latest").unwrap(),
            Some(bytes) => {
                raw.put("lists/phishing/latest", bytes, PutMode::Overwrite)
                    .unwrap();
            }
        }
        let refused = stale.build_list(0).await.result;
        assert!(
            matches!(refused, Err(Error::OtherSigningKey { generation: 8, .. })),
            "pointer {damaged:?}: {refused:?}"
        );
        store
            .load_generation(8, std::slice::from_ref(next.public_key()))
            .unwrap();
    }
    raw.put("lists/phishing/latest", &kept, PutMode::Overwrite)
        .unwrap();
    switched.build_list(0).await.result.unwrap();
}

/// A publisher on a data directory whose `signing.key` is replaced in
/// place: `public.key`, the file agents and replicas are given, is
/// rewritten to the new key (it kept the old one, and agents given it
/// refused every snapshot), and with the old key previous, the list is
/// published again under the new one and old generations are removed by
/// retention as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signing_key_replaced_in_the_data_directory_rewrites_public_key_and_republishes() {
    let dir = tempfile::tempdir().unwrap();
    let feed = fixture_feed(dir.path(), "phishing-urls.txt");
    let cfg = Config {
        keep_versions: 2,
        ..config(
            dir.path(),
            "phishing",
            vec![SourceConfig::file(&feed, SourceFormat::Urls)],
        )
    };
    let publisher = reopen(cfg.clone()).unwrap();
    publisher.build_list(0).await.result.unwrap();
    let old = publisher.public_key().clone();
    drop(publisher);

    let next = generate_signing_key();
    std::fs::write(dir.path().join("signing.key"), next.to_base64() + "\n").unwrap();
    let cfg = Config {
        previous_public_keys: vec![old.to_base64()],
        ..cfg
    };
    let publisher = reopen(cfg).unwrap();
    let public = std::fs::read_to_string(dir.path().join("public.key")).unwrap();
    assert_eq!(public.trim(), next.public_key().to_base64());
    // Served at start: the old key's generation, as the previous key's.
    let served = publisher.state().lists[0]
        .current
        .load_full()
        .expect("served at start");
    assert_eq!(served.header.key_id, old.id());
    let republished = publisher.build_list(0).await;
    assert!(!republished.unchanged, "{:?}", republished.result);
    republished.result.unwrap();
    let served = publisher.state().lists[0].current.load_full().unwrap();
    assert_eq!(served.header.key_id, next.public_key().id());
    // Retention (2 kept) removes the old key's generation after two more.
    for _ in 0..2 {
        std::fs::write(
            &feed,
            std::fs::read_to_string(&feed).unwrap() + &format!("http://rotated-{}.example/\n", rand_suffix()),
        )
        .unwrap();
        publisher.build_list(0).await.result.unwrap();
    }
    let generations: Vec<_> = std::fs::read_dir(dir.path().join("lists/phishing/generations"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(generations.len(), 2, "{generations:?}");
    assert!(
        !generations.iter().any(|g| g.starts_with("00000000000000000001")),
        "{generations:?}"
    );
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}
