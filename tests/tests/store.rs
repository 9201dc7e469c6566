//! The publisher on an object store (`store = "s3://…"`) against a real S3
//! API server (moto): build, serve, restart from the store, and the
//! start-up self-test of conditional writes; and the storage contract on
//! every backend: the data directory, an in-memory object store and moto.

use std::sync::Arc;
use std::time::Duration;

use blocksieve_agent::Agent;
use blocksieve_publisher::internal::storage::{
    LocalStorage, ObjectStorage, PutMode, Storage as _, check_conditional_writes,
};
use blocksieve_publisher::{Config, Error, Publisher, SourceFormat, StoreFailure};
use blocksieve_tests::fault::ignoring_conditions;
use blocksieve_tests::moto::Moto;
use blocksieve_tests::storage_contract::Arbiter;
use blocksieve_tests::{RunningPublisher, config, fixture_lines, fixture_source, storage_contract};

const READY: Duration = Duration::from_secs(60);

fn on_store(moto: &Moto, data_dir: &std::path::Path, prefix: &str) -> Config {
    Config {
        store: Some(moto.store_url(prefix)),
        store_options: moto.store_options(),
        ..config(
            data_dir,
            "phishing",
            vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_on_s3_builds_serves_and_restarts_from_the_store() {
    let Some(moto) = Moto::start().await else { return };
    let first_dir = tempfile::tempdir().unwrap();
    let server = RunningPublisher::start(on_store(&moto, first_dir.path(), "some/prefix")).await;
    server.wait_ready(READY).await;
    let version = server.publisher.state().lists[0]
        .current
        .load_full()
        .unwrap()
        .header
        .version;

    // An agent verifies the snapshot and checks a URL with it.
    let agent = Agent::builder(server.base_url())
        .list("phishing")
        .trusted_key(server.public_key())
        .build()
        .unwrap();
    let report = agent.update().await.unwrap();
    assert!(report.is_complete(), "{report:?}");
    let listed = &fixture_lines("phishing-urls.txt")[0];
    assert!(agent.check_url(listed).await.unwrap().is_unsafe(), "{listed}");
    assert!(!agent.check_url("https://example.com/").await.unwrap().is_unsafe());

    // The bucket holds the data directory's layout under the prefix; the
    // data directory holds only the key and the lock.
    let bucket = ObjectStorage::s3(&moto.store_url("some/prefix"), &moto.store_options()).unwrap();
    let mut keys = bucket.list("lists/phishing").unwrap();
    keys.sort();
    assert_eq!(
        keys,
        [
            "lists/phishing/builds",
            "lists/phishing/generations",
            "lists/phishing/latest",
            "lists/phishing/lease"
        ]
    );
    // One build's two objects, named by its version, and one generation.
    let builds = bucket.list("lists/phishing/builds").unwrap();
    assert_eq!(builds.len(), 2, "{builds:?}");
    let build_prefix = format!("lists/phishing/builds/{version:020}-");
    assert!(builds.iter().all(|k| k.starts_with(&build_prefix)), "{builds:?}");
    assert_eq!(
        bucket.list("lists/phishing/generations").unwrap(),
        ["lists/phishing/generations/00000000000000000001.json"]
    );
    assert_eq!(bucket.list("sources/phishing").unwrap().len(), 2);
    assert!(!first_dir.path().join("lists").exists());
    assert!(first_dir.path().join("signing.key").exists());
    // The self-test left nothing behind.
    assert_eq!(bucket.list(".blocksieve-selftest").unwrap(), Vec::<String>::new());
    let key = first_dir.path().join("signing.key");
    server.stop().await;

    // A publisher on another data directory, with the same key, serves the
    // stored snapshot at once: before any build.
    let second_dir = tempfile::tempdir().unwrap();
    let restarted = Publisher::open(Config {
        signing_key: Some(key),
        ..on_store(&moto, second_dir.path(), "some/prefix")
    })
    .unwrap();
    let served = restarted.state().lists[0]
        .current
        .load_full()
        .expect("served from the store");
    assert_eq!(served.header.version, version);
}

/// A second builder on a store given another signing key (its data
/// directory made a new one: `signing.key` not copied) published
/// generations under that key, which replicas and the first builder refuse,
/// and reported success while the list went stale everywhere. It is
/// refused before fetching, naming its key; forced once, it publishes (a
/// deliberate key change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_builder_with_another_signing_key_is_refused_unless_forced() {
    let Some(moto) = Moto::start().await else { return };
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Publisher::open(on_store(&moto, a_dir.path(), "keys")).unwrap();
    a.build_list(0).await.result.unwrap();
    let b = Publisher::open(on_store(&moto, b_dir.path(), "keys")).unwrap();
    assert_ne!(a.public_key().id(), b.public_key().id());

    let refused_as_other_key = |refused: &Result<_, Error>| match refused {
        Err(
            e @ Error::OtherSigningKey {
                generation: 1,
                key_id,
                ..
            },
        ) => {
            assert_eq!(key_id, &hex::encode(b.public_key().id()));
            assert!(e.to_string().contains("the same signing key"), "{e}");
        }
        other => panic!("{other:?}"),
    };
    refused_as_other_key(&b.build_list(0).await.result);
    // Also with no `latest` to start from (its first write failed, or it
    // was removed): the build takes generation 1, the other key's. It was
    // superseded at every build without a word (found by a review).
    let store = &b.state().lists[0].store;
    let pointer = ObjectStorage::s3(&moto.store_url("keys"), &moto.store_options()).unwrap();
    let pointer_key = "lists/phishing/latest";
    let kept = pointer.get(pointer_key).unwrap().unwrap();
    pointer.delete(pointer_key).unwrap();
    assert!(store.latest().unwrap().is_none());
    refused_as_other_key(&b.build_list(0).await.result);
    pointer.put(pointer_key, &kept, PutMode::Create).unwrap();
    let latest = || a.state().lists[0].store.latest().unwrap().unwrap().pointer;
    assert_eq!(latest().generation, 1);
    // The first builder goes on as before.
    a.build_list(0).await.result.unwrap();
    assert_eq!(latest().generation, 1);

    b.force_next_build();
    b.build_list(0).await.result.unwrap();
    let changed = latest().generation;
    assert_eq!(changed, 2);
    let store = &b.state().lists[0].store;
    assert!(
        store
            .load_generation(changed, std::slice::from_ref(b.public_key()))
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_enforces_conditional_writes_and_passes_the_self_test() {
    let Some(moto) = Moto::start().await else { return };
    let url = moto.store_url("checks");
    let storage = ObjectStorage::s3(&url, &moto.store_options()).unwrap();
    check_conditional_writes(&storage, &url).unwrap();

    // The self-test leaves nothing behind.
    assert_eq!(
        storage.list(".blocksieve-selftest").unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn the_data_directory_keeps_the_storage_contract() {
    let dir = tempfile::tempdir().unwrap();
    let storage = LocalStorage::open(dir.path()).unwrap();
    storage_contract::check(&storage);
    // Create links a file into place, atomic against other writers; Update
    // relies on the data directory's lock and is not raced here.
    for round in 0..3 {
        storage_contract::create_race(
            &storage,
            &format!("contract/race/create-{round}"),
            Arbiter::Atomic,
        );
    }
    // The writers that lost left no temporary file behind.
    let mut race = storage.list("contract/race").unwrap();
    race.sort();
    assert_eq!(
        race,
        [
            "contract/race/create-0",
            "contract/race/create-1",
            "contract/race/create-2"
        ]
    );
}

#[test]
fn an_in_memory_object_store_keeps_the_storage_contract() {
    let memory = Arc::new(object_store::memory::InMemory::new());
    let storage = ObjectStorage::new(memory, "some/prefix", "memory://some/prefix").unwrap();
    storage_contract::check(&storage);
    for round in 0..3 {
        storage_contract::create_race(
            &storage,
            &format!("contract/race/create-{round}"),
            Arbiter::Atomic,
        );
        storage_contract::update_race(
            &storage,
            &format!("contract/race/update-{round}"),
            Arbiter::Atomic,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_keeps_the_storage_contract_with_signed_requests() {
    let Some(moto) = Moto::start().await else { return };
    let storage = ObjectStorage::s3(&moto.store_url("contract-prefix"), &moto.store_options()).unwrap();
    tokio::task::spawn_blocking(move || {
        storage_contract::check(&storage);
        for round in 0..3 {
            // moto decides conditional writes without a lock: see
            // `Arbiter::CheckThenWrite` (2 of 16 writers won once, on a
            // loaded machine).
            let moto = Arbiter::CheckThenWrite;
            storage_contract::create_race(&storage, &format!("contract/race/create-{round}"), moto);
            storage_contract::update_race(&storage, &format!("contract/race/update-{round}"), moto);
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_used_is_refused_at_start_naming_it() {
    let Some(moto) = Moto::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = on_store(&moto, dir.path(), "p");
    cfg.store = Some("s3://no-such-bucket/p".to_owned());
    match Publisher::open(cfg) {
        Err(
            e @ Error::Store {
                kind: StoreFailure::Other | StoreFailure::NotFound,
                ..
            },
        ) => {
            assert!(e.to_string().contains("s3://no-such-bucket/p"), "{e}");
        }
        other => panic!("a missing bucket: {other:?}"),
    }
    let mut cfg = on_store(&moto, dir.path(), "p");
    cfg.store_options
        .insert("no_such_option".to_owned(), "1".to_owned());
    match Publisher::open(cfg) {
        Err(Error::Config { field, .. }) => assert_eq!(field, "store_options.no_such_option"),
        other => panic!("an unknown option: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_ignores_conditional_writes_is_refused_unless_dangerously_allowed() {
    let Some(moto) = Moto::start().await else { return };
    let proxy = ignoring_conditions(&moto.endpoint()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = on_store(&moto, dir.path(), "p");
    cfg.store_options
        .insert("endpoint".to_owned(), format!("http://{proxy}"));
    let feed = dir.path().join("feed.txt");
    std::fs::copy(blocksieve_tests::fixtures().join("phishing-urls.txt"), &feed).unwrap();
    cfg.lists[0].sources = vec![blocksieve_publisher::SourceConfig::file(
        &feed,
        SourceFormat::Urls,
    )];
    match Publisher::open(cfg.clone()) {
        Err(e @ Error::StoreIgnoresConditions { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("s3://blocksieve-test/p does not enforce"),
                "{message}"
            );
            assert!(message.contains("If-None-Match"), "{message}");
        }
        other => panic!("a store that ignores conditions: {other:?}"),
    }
    cfg.dangerous_store_ignores_conditions = true;
    let publisher = Publisher::open(cfg.clone()).unwrap();
    assert!(publisher.state().lists[0].current.load().is_none());
    // Nothing of the self-test is left behind.
    let bucket = ObjectStorage::s3(&moto.store_url("p"), &moto.store_options()).unwrap();
    assert_eq!(bucket.list(".blocksieve-selftest").unwrap(), Vec::<String>::new());

    // One builder may write such a store; a second one is refused with a
    // clear error while the first holds its lease, and the first goes on.
    let version = publisher.build_list(0).await.result.unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let second = Publisher::open(Config {
        data_dir: other_dir.path().to_owned(),
        signing_key: Some(dir.path().join("signing.key")),
        ..cfg.clone()
    })
    .unwrap();
    match second.build_list(0).await.result {
        Err(e @ Error::SecondBuilder { .. }) => {
            let message = e.to_string();
            assert!(message.contains("only one builder may write it"), "{message}");
            assert!(message.contains("s3://blocksieve-test/p"), "{message}");
        }
        other => panic!("a second builder on a store that ignores conditions: {other:?}"),
    }
    // An unchanged list publishes no new version: the feed gains a line.
    std::io::Write::write_all(
        &mut std::fs::OpenOptions::new().append(true).open(&feed).unwrap(),
        b"\nhttp://rebuilt.example/new\n",
    )
    .unwrap();
    assert!(publisher.build_list(0).await.result.unwrap() > version);
    // A restarted builder (the same data directory) is the same builder.
    drop(publisher);
    let restarted = blocksieve_tests::reopen(cfg).unwrap();
    assert!(restarted.build_list(0).await.result.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_key_that_is_no_object_store_path_does_not_break_a_listing() {
    let Some(moto) = Moto::start().await else { return };
    let storage = ObjectStorage::s3(&moto.store_url("stray"), &moto.store_options()).unwrap();
    for key in ["lists/a/1.snapshot", "lists/a/b/c", "lists/z"] {
        storage.put(key, key.as_bytes(), PutMode::Overwrite).unwrap();
    }
    // Keys that object_store cannot represent as a path, put by plain
    // requests (which moto takes unsigned): an empty segment, which lists
    // as the "directory" `lists/a//`, and control characters.
    let client = reqwest::Client::new();
    for raw in ["lists/a//x", "lists/a/del%7F", "lists/a/ctl%01x"] {
        let url = format!("{}/{}/stray/{raw}", moto.endpoint(), moto.bucket);
        let put = client.put(&url).body("stray").send().await.unwrap();
        assert!(put.status().is_success(), "{url}: {}", put.status());
    }
    let mut keys = storage.list("lists/a").unwrap();
    keys.sort();
    assert_eq!(keys, ["lists/a/1.snapshot", "lists/a/b"]);
    let mut keys = storage.list("lists").unwrap();
    keys.sort();
    assert_eq!(keys, ["lists/a", "lists/z"]);
    assert_eq!(
        storage.get("lists/a/1.snapshot").unwrap().unwrap(),
        b"lists/a/1.snapshot"
    );
}

/// Deletes every object under `prefix` in `bucket`.
fn delete_all(bucket: &ObjectStorage, prefix: &str) {
    for key in bucket.list(prefix).unwrap() {
        delete_all(bucket, &key);
        let _ = bucket.delete(&key);
    }
}

/// The store loses a list's objects (a prefix deleted by hand, a bucket
/// restored empty) while a builder runs: its next build publishes the
/// content again. It found the list unchanged against what it served from
/// memory and renewed the freshness there only, so the store stayed empty
/// (a replica or builder started then found nothing to serve) while the
/// builder's log and page said the list was fresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_list_the_store_lost_is_published_again_by_the_next_build() {
    let Some(moto) = Moto::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let builder = Publisher::open(on_store(&moto, dir.path(), "lost")).unwrap();
    builder.build_list(0).await.result.unwrap();
    let bucket = ObjectStorage::s3(&moto.store_url("lost"), &moto.store_options()).unwrap();
    delete_all(&bucket, "lists/phishing");
    assert!(bucket.list("lists/phishing").unwrap().is_empty());

    let rebuilt = builder.build_list(0).await;
    assert!(
        !rebuilt.unchanged,
        "found unchanged against a store that lost the list"
    );
    rebuilt.result.unwrap();
    let latest = builder.state().lists[0].store.latest().unwrap();
    assert!(latest.is_some(), "the store still holds no generation");
    // A replica's view: a publisher started on the store serves it.
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("signing.key"), other.path().join("signing.key")).unwrap();
    let restarted = Publisher::open(on_store(&moto, other.path(), "lost")).unwrap();
    assert!(restarted.state().lists[0].current.load_full().is_some());
}
