use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::build::BuiltList;
use crate::build::testing::build_feed;
use crate::storage::LocalStorage;
use crate::storage::testing::Intercepted;
use blocksieve_format::SigningKey;

fn key() -> SigningKey {
    SigningKey::from_secret_bytes([9; 32])
}

/// A build of `feed` at `now` (version `now`).
fn build(feed: &str, now: u64) -> BuiltList {
    build_feed(feed, now, &key())
}

fn store(dir: &std::path::Path, keep: usize) -> (ListStore, Arc<dyn Storage>) {
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::open(dir).unwrap());
    (
        ListStore::open(storage.clone(), "phishing", keep).unwrap(),
        storage,
    )
}

fn publish(store: &ListStore, built: &BuiltList, base: Option<&Latest>) -> PublishOutcome {
    let now = built.version;
    (store.publish(built.version, &built.snapshot, &built.hashes, base, &key(), now)).unwrap()
}

fn sorted(mut keys: Vec<String>) -> Vec<String> {
    keys.sort();
    keys
}

#[test]
fn generations_follow_one_another_and_every_kept_version_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    assert_eq!(store.latest().unwrap(), None);
    let first = build("http://phish.example/a\n", 1_800_000_000);
    assert_eq!(
        publish(&store, &first, None),
        PublishOutcome::Published { generation: 1 }
    );
    let base = store.latest().unwrap().unwrap();
    assert_eq!(
        (base.pointer.generation, base.pointer.version),
        (1, first.version)
    );
    let second = build("http://phish.example/b\n", 1_800_000_100);
    assert_eq!(
        publish(&store, &second, Some(&base)),
        PublishOutcome::Published { generation: 2 }
    );

    let public = key().public_key().clone();
    let manifest = store.manifest(2, std::slice::from_ref(&public)).unwrap();
    assert_eq!((manifest.parent, manifest.version), (Some(1), second.version));
    let loaded = store.load_generation(2, std::slice::from_ref(&public)).unwrap();
    assert_eq!(
        (loaded.snapshot, loaded.hashes),
        (second.snapshot.clone(), second.hashes.clone())
    );
    // A restart serves the latest and can still serve the older version.
    let (reopened, _) = self::store(dir.path(), 5);
    let latest = reopened.load_latest(std::slice::from_ref(&public)).unwrap();
    assert_eq!(latest.generation, Some(2));
    assert_eq!(
        reopened.read_snapshot(first.version).unwrap(),
        Some(first.snapshot.clone())
    );
    assert_eq!(
        reopened.read_snapshot(second.version).unwrap(),
        Some(second.snapshot)
    );
    assert_eq!(reopened.read_snapshot(7).unwrap(), None);

    // The versioned route serves a kept snapshot as immutable for a year:
    // stored bytes that are not what its manifest says are refused, never
    // served (they were, for any cache to keep). Found by an adversarial
    // review.
    let first_manifest = reopened.manifest(1, std::slice::from_ref(&public)).unwrap();
    let key = format!("lists/phishing/{}", first_manifest.snapshot.key);
    let mut tampered = first.snapshot.clone();
    *tampered.last_mut().unwrap() ^= 1;
    storage.put(&key, &tampered, PutMode::Overwrite).unwrap();
    assert!(
        matches!(reopened.read_snapshot(first.version), Err(Error::Corrupt { .. })),
        "{:?}",
        reopened.read_snapshot(first.version)
    );
    // Said so: the read worked, what it read is refused (not `i/o:`).
    let refused = reopened.read_snapshot(first.version).unwrap_err().to_string();
    assert!(refused.starts_with("refused stored object: "), "{refused}");
}

#[test]
fn of_two_builders_from_one_generation_exactly_one_publishes_and_the_other_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    let base = store.latest().unwrap().unwrap();
    let one = build("http://phish.example/b\n", 1_800_000_100);
    let other = build("http://phish.example/c\n", 1_800_000_101);
    assert_eq!(
        publish(&store, &one, Some(&base)),
        PublishOutcome::Published { generation: 2 }
    );
    assert_eq!(
        publish(&store, &other, Some(&base)),
        PublishOutcome::Superseded { generation: 2 }
    );
    let latest = store.latest().unwrap().unwrap();
    assert_eq!(
        (latest.pointer.generation, latest.pointer.version),
        (2, one.version)
    );
    // The loser's objects are gone: two builds, four objects.
    assert_eq!(storage.list("lists/phishing/builds").unwrap().len(), 4);
}

/// A builder that stops after creating its manifest leaves the pointer
/// behind; the next builder finds the manifest, rolls the pointer forward
/// to it, and the build after that continues from it.
#[test]
fn a_manifest_left_without_its_pointer_is_rolled_forward_by_the_next_builder() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    let stale = store.latest().unwrap().unwrap();
    let crashed = build("http://phish.example/b\n", 1_800_000_100);
    publish(&store, &crashed, Some(&stale));
    // Back to generation 1's pointer, as if the crash came before it moved.
    storage
        .put(
            "lists/phishing/latest",
            &stale.pointer.to_bytes(),
            PutMode::Overwrite,
        )
        .unwrap();
    let base = store.latest().unwrap().unwrap();
    assert_eq!(base.pointer.generation, 1);
    let next = build("http://phish.example/c\n", 1_800_000_200);
    assert_eq!(
        publish(&store, &next, Some(&base)),
        PublishOutcome::Superseded { generation: 2 }
    );
    let rolled = store.latest().unwrap().unwrap();
    assert_eq!(
        (rolled.pointer.generation, rolled.pointer.version),
        (2, crashed.version)
    );
    let again = build("http://phish.example/c\n", 1_800_000_300);
    assert_eq!(
        publish(&store, &again, Some(&rolled)),
        PublishOutcome::Published { generation: 3 }
    );
}

#[test]
fn a_build_not_newer_than_the_latest_generation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = store(dir.path(), 5);
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    let base = store.latest().unwrap().unwrap();
    let older = build("http://phish.example/b\n", 1_700_000_000);
    let refused = store.publish(
        older.version,
        &older.snapshot,
        &older.hashes,
        Some(&base),
        &key(),
        0,
    );
    assert!(matches!(refused, Err(Error::Corrupt { .. })), "{refused:?}");
    assert_eq!(store.latest().unwrap().unwrap(), base);
}

#[test]
fn retention_keeps_the_newest_generations_and_removes_older_garbage_only() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 2);
    // A version of the older layout, and garbage of a build that never
    // made it: one older than what is kept, one newer (still running).
    let legacy = build("http://phish.example/legacy\n", 1_799_999_000);
    let mut chunks = legacy.hashes.iter().map(|h| &h.0[..]);
    (storage.put_chunks(
        "lists/phishing/01799999000.hashes",
        &mut chunks,
        PutMode::Overwrite,
    ))
    .unwrap();
    for (key, bytes) in [
        ("lists/phishing/01799999000.snapshot", &b"old"[..]),
        (
            "lists/phishing/builds/01799999500-00000000000000aa.snapshot",
            b"old garbage",
        ),
        (
            "lists/phishing/builds/01900000000-00000000000000bb.snapshot",
            b"unfinished",
        ),
    ] {
        storage.put(key, bytes, PutMode::Overwrite).unwrap();
    }
    let mut base = None;
    for (i, now) in [1_800_000_000u64, 1_800_000_100, 1_800_000_200, 1_800_000_300]
        .into_iter()
        .enumerate()
    {
        let built = build(&format!("http://phish.example/{i}\n"), now);
        publish(&store, &built, base.as_ref());
        base = store.latest().unwrap();
    }
    assert_eq!(
        sorted(storage.list("lists/phishing/generations").unwrap()),
        [
            "lists/phishing/generations/00000000000000000003.json",
            "lists/phishing/generations/00000000000000000004.json"
        ]
    );
    let builds = sorted(storage.list("lists/phishing/builds").unwrap());
    assert_eq!(builds.len(), 5, "{builds:?}");
    assert!(builds.iter().any(|k| k.contains("01900000000-00000000000000bb")));
    assert!(!builds.iter().any(|k| k.contains("01799999500")), "{builds:?}");
    assert!(
        builds
            .iter()
            .filter(|k| k.contains("/000000000018000002"))
            .count()
            == 2
    );
    assert!(
        builds
            .iter()
            .filter(|k| k.contains("/000000000018000003"))
            .count()
            == 2
    );
    // The older layout is gone once a generation exists.
    let top = storage.list("lists/phishing").unwrap();
    assert!(
        !top.iter()
            .any(|k| k.ends_with(".snapshot") || k.ends_with(".hashes")),
        "{top:?}"
    );
}

#[test]
fn a_data_directory_of_the_older_layout_serves_until_the_first_generation() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    let legacy = build("http://phish.example/legacy\n", 1_799_999_000);
    let mut chunks = legacy.hashes.iter().map(|h| &h.0[..]);
    let hashes_key = format!("lists/phishing/{:020}.hashes", legacy.version);
    (storage.put_chunks(&hashes_key, &mut chunks, PutMode::Overwrite)).unwrap();
    let snapshot_key = format!("lists/phishing/{:020}.snapshot", legacy.version);
    storage
        .put(&snapshot_key, &legacy.snapshot, PutMode::Overwrite)
        .unwrap();
    let loaded = store
        .load_latest(std::slice::from_ref(key().public_key()))
        .unwrap();
    assert_eq!((loaded.generation, loaded.hashes), (None, legacy.hashes.clone()));
    assert_eq!(
        store.read_snapshot(legacy.version).unwrap(),
        Some(legacy.snapshot)
    );
    publish(&store, &build("http://phish.example/new\n", 1_800_000_000), None);
    assert_eq!(
        store
            .load_latest(std::slice::from_ref(key().public_key()))
            .unwrap()
            .generation,
        Some(1)
    );
    assert_eq!(storage.get(&snapshot_key).unwrap(), None);
}

#[test]
fn a_lease_is_held_by_one_builder_until_it_expires_or_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    let LeaseOutcome::Acquired(version) = store.acquire_lease("a", 1_000, 900).unwrap() else {
        panic!("a free lease")
    };
    assert_eq!(
        store.acquire_lease("b", 1_100, 950).unwrap(),
        LeaseOutcome::HeldBy(Lease {
            holder: "a".to_owned(),
            expires_at: 1_000
        })
    );
    // Its holder renews it; another takes it once it expires.
    assert!(matches!(
        store.acquire_lease("a", 1_050, 960).unwrap(),
        LeaseOutcome::Acquired(_)
    ));
    assert!(matches!(
        store.acquire_lease("b", 1_200, 1_050).unwrap(),
        LeaseOutcome::Acquired(_)
    ));
    // A released lease is free at once; an unreadable one is anybody's.
    let LeaseOutcome::Acquired(held) = store.acquire_lease("b", 2_000, 1_060).unwrap() else {
        panic!("b's own lease")
    };
    store.release_lease("b", held);
    assert!(matches!(
        store.acquire_lease("c", 2_000, 1_070).unwrap(),
        LeaseOutcome::Acquired(_)
    ));
    storage
        .put("lists/phishing/lease", b"garbage", PutMode::Overwrite)
        .unwrap();
    assert!(matches!(
        store.acquire_lease("d", 2_000, 1_080).unwrap(),
        LeaseOutcome::Acquired(_)
    ));
    // A release with a stale version leaves the new holder's lease.
    store.release_lease("a", version);
    assert!(matches!(
        store.acquire_lease("e", 2_000, 1_090).unwrap(),
        LeaseOutcome::HeldBy(_)
    ));
}

/// A conditional write of the lease that applied and was answered
/// "exists" (S3, when the client retries a conditional PUT after a 5xx the
/// first attempt had applied) is this builder's lease, not another's: the
/// build goes on (it was skipped, the lease "held by" this very builder).
/// Found by an adversarial review.
#[test]
fn regression_a_retried_lease_write_that_applied_is_acquired() {
    let dir = tempfile::tempdir().unwrap();
    let retried = Intercepted::over(LocalStorage::open(dir.path()).unwrap())
        .put_answer(|key, _, answer| answer.filter(|_| !key.ends_with("/lease")));
    let store = ListStore::open(Arc::new(retried), "phishing", 5).unwrap();
    let outcome = store.acquire_lease("a", 1_000, 900).unwrap();
    assert!(
        matches!(outcome, LeaseOutcome::Acquired(_)),
        "a's own write: {outcome:?}"
    );
    // Renewed the same way; another builder still sees it held.
    assert!(matches!(
        store.acquire_lease("a", 1_050, 960).unwrap(),
        LeaseOutcome::Acquired(_)
    ));
    assert_eq!(
        store.acquire_lease("b", 1_100, 970).unwrap(),
        LeaseOutcome::HeldBy(Lease {
            holder: "a".to_owned(),
            expires_at: 1_050
        })
    );
}

/// A lease written by anyone who can write the store, expiring long after
/// any lease a builder takes, is no lease: it must not keep every builder
/// from publishing (no new threat would reach agents).
#[test]
fn regression_a_lease_expiring_far_in_the_future_does_not_stop_every_builder() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    let forged = Lease {
        holder: "nobody".to_owned(),
        expires_at: u64::MAX,
    };
    storage
        .put("lists/phishing/lease", &forged.to_bytes(), PutMode::Overwrite)
        .unwrap();
    let now = 1_800_000_000;
    assert!(
        matches!(
            store.acquire_lease("builder", now + 300, now).unwrap(),
            LeaseOutcome::Acquired(_)
        ),
        "a lease until the end of time keeps the list unbuilt"
    );
    // Another builder's lease, its clock somewhat ahead, is still its own.
    let ahead = Lease {
        holder: "ahead".to_owned(),
        expires_at: now + 500,
    };
    storage
        .put("lists/phishing/lease", &ahead.to_bytes(), PutMode::Overwrite)
        .unwrap();
    assert_eq!(
        store.acquire_lease("builder", now + 300, now).unwrap(),
        LeaseOutcome::HeldBy(ahead)
    );
}

/// A `latest` pointer naming a version no generation has (it is not
/// signed) must not make every later build "not newer" than it.
#[test]
fn regression_a_pointer_with_a_forged_version_does_not_stop_publishing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    let forged = Pointer {
        list: "phishing".to_owned(),
        generation: 1,
        version: u64::MAX,
        freshness: None,
    };
    storage
        .put("lists/phishing/latest", &forged.to_bytes(), PutMode::Overwrite)
        .unwrap();
    let base = store.head(std::slice::from_ref(key().public_key())).unwrap();
    let next = build("http://phish.example/b\n", 1_800_000_100);
    let outcome = store.publish(
        next.version,
        &next.snapshot,
        &next.hashes,
        base.as_ref(),
        &key(),
        next.version,
    );
    assert!(
        matches!(outcome, Ok(PublishOutcome::Published { generation: 2 })),
        "{outcome:?}"
    );
    let latest = store.latest().unwrap().unwrap();
    assert_eq!(
        (latest.pointer.generation, latest.pointer.version),
        (2, next.version)
    );
    // A builder restarted over a garbage pointer serves the newest
    // generation that verifies at once, not nothing until its first build.
    storage
        .put("lists/phishing/latest", b"garbage", PutMode::Overwrite)
        .unwrap();
    let loaded = store
        .load_latest(std::slice::from_ref(key().public_key()))
        .unwrap();
    assert_eq!(loaded.generation, Some(2));
}

/// A pointer naming the last generation number must not panic a builder.
#[test]
fn regression_a_pointer_at_the_last_generation_number_does_not_panic_a_builder() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    let forged = Pointer {
        list: "phishing".to_owned(),
        generation: u64::MAX,
        version: 1,
        freshness: None,
    };
    storage
        .put("lists/phishing/latest", &forged.to_bytes(), PutMode::Overwrite)
        .unwrap();
    let base = store.latest().unwrap();
    let next = build("http://phish.example/b\n", 1_800_000_100);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.publish(
            next.version,
            &next.snapshot,
            &next.hashes,
            base.as_ref(),
            &key(),
            next.version,
        )
    }));
    let refused = outcome.expect("publishing after a forged pointer panicked");
    assert!(matches!(refused, Err(Error::Corrupt { .. })), "{refused:?}");
    // Nothing of the refused build is left behind.
    assert_eq!(
        storage.list("lists/phishing/builds").unwrap(),
        Vec::<String>::new()
    );
}

/// A `latest` pointer that is not one (garbage written over it) must not
/// stop every builder for good: nothing could ever repair it.
#[test]
fn regression_a_garbage_pointer_does_not_stop_publishing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    storage
        .put("lists/phishing/latest", b"garbage", PutMode::Overwrite)
        .unwrap();
    // What a builder starts from, and publishes on.
    let base = store.head(std::slice::from_ref(key().public_key())).unwrap();
    assert_eq!(base.as_ref().map(|b| b.pointer.generation), Some(1));
    let next = build("http://phish.example/b\n", 1_800_000_100);
    assert_eq!(
        publish(&store, &next, base.as_ref()),
        PublishOutcome::Published { generation: 2 }
    );
    let latest = store.latest().unwrap().unwrap();
    assert_eq!(
        (latest.pointer.generation, latest.pointer.version),
        (2, next.version)
    );
}

/// A manifest at the next generation that does not verify (garbage, or a
/// forger's) must not make every builder "superseded" by it for good.
#[test]
fn regression_a_garbage_manifest_at_the_next_generation_does_not_stop_publishing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    storage
        .put(
            "lists/phishing/generations/00000000000000000002.json",
            b"garbage",
            PutMode::Create,
        )
        .unwrap();
    for now in [1_800_000_100, 1_800_000_200] {
        let base = store.latest().unwrap();
        let next = build("http://phish.example/b\n", now);
        let outcome = store.publish(
            next.version,
            &next.snapshot,
            &next.hashes,
            base.as_ref(),
            &key(),
            now,
        );
        assert!(outcome.is_ok(), "publish at {now}: {outcome:?}");
    }
    let latest = store.latest().unwrap().unwrap();
    assert!(latest.pointer.version >= 1_800_000_100, "{latest:?}");
    store
        .load_generation(
            latest.pointer.generation,
            std::slice::from_ref(key().public_key()),
        )
        .unwrap();
}

/// A builder that stalls past its lease (or whose clock runs ahead) and
/// publishes from a generation that retention has since removed re-creates
/// that old generation number: it must neither report its build published
/// (the pointer never named it) nor let its retention remove the objects
/// of the generation `latest` points to.
#[test]
fn regression_a_stale_builder_neither_publishes_a_pruned_generation_nor_prunes_the_latest() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = store(dir.path(), 1);
    let public = key().public_key().clone();
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    // The stale builder read generation 1 and then stalled.
    let stale_base = store.latest().unwrap().unwrap();
    // Meanwhile another builder publishes generations 2 and 3; retention
    // (keep 1) removes generation 2's manifest.
    for now in [1_800_000_100, 1_800_000_200] {
        let base = store.latest().unwrap();
        publish(&store, &build("http://phish.example/b\n", now), base.as_ref());
    }
    let latest = store.latest().unwrap().unwrap();
    assert_eq!(latest.pointer.generation, 3);
    // The stale builder's clock runs ahead of the other's.
    let stale = build("http://phish.example/c\n", 1_800_003_600);
    let outcome = publish(&store, &stale, Some(&stale_base));
    let latest = store.latest().unwrap().unwrap();
    assert_eq!(latest.pointer.generation, 3);
    let loaded = store.load_generation(3, std::slice::from_ref(&public));
    assert!(
        loaded.is_ok(),
        "latest points at a generation that does not load: {loaded:?}"
    );
    assert_ne!(
        outcome,
        PublishOutcome::Published { generation: 2 },
        "a build the pointer never named is reported published"
    );
}

/// A data directory that records how many reads it answered and the most
/// bytes one returned.
fn recording(dir: &std::path::Path) -> (Arc<dyn Storage>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (reads, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, m) = (reads.clone(), most.clone());
    let storage = Intercepted::over(LocalStorage::open(dir).unwrap()).after_read(move |size| {
        r.fetch_add(1, Ordering::SeqCst);
        m.fetch_max(size.unwrap_or(0), Ordering::SeqCst);
    });
    (Arc::new(storage), reads, most)
}

/// A manifest or snapshot object replaced by a huge one (anyone who can
/// write the store can) is refused having read no more than the object
/// can be: every replica loads it on start, and would run out of memory.
#[test]
fn regression_an_oversized_manifest_or_snapshot_is_refused_without_reading_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, _, most) = recording(dir.path());
    let store = ListStore::open(storage.clone(), "phishing", 5).unwrap();
    let public = key().public_key().clone();
    let built = build("http://phish.example/a\n", 1_800_000_000);
    publish(&store, &built, None);
    let manifest = store.manifest(1, std::slice::from_ref(&public)).unwrap();
    let huge = vec![b' '; 4 * 1024 * 1024];
    let snapshot_key = format!("lists/phishing/{}", manifest.snapshot.key);
    let mut oversized = built.snapshot.clone();
    oversized.extend_from_slice(&huge);
    storage
        .put(&snapshot_key, &oversized, PutMode::Overwrite)
        .unwrap();
    most.store(0, Ordering::SeqCst);
    let refused = store.load_generation(1, std::slice::from_ref(&public));
    assert!(matches!(refused, Err(Error::Corrupt { .. })), "{refused:?}");
    // Its manifest, the snapshot's size and one byte more, the hashes.
    let read = most.load(Ordering::SeqCst);
    assert!(read <= built.snapshot.len().max(1024) + 1, "{read} bytes read");

    let manifest_key = "lists/phishing/generations/00000000000000000001.json";
    storage.put(manifest_key, &huge, PutMode::Overwrite).unwrap();
    most.store(0, Ordering::SeqCst);
    let refused = store.manifest(1, std::slice::from_ref(&public));
    assert!(matches!(refused, Err(Error::Corrupt { .. })), "{refused:?}");
    assert!(most.load(Ordering::SeqCst) <= 64 * 1024 + 1);
}

/// A builder whose own manifest write applied but was answered "exists"
/// (a retried conditional PUT) must not take it for another builder's,
/// delete the objects it names and leave a generation that no builder can
/// roll forward to or publish past.
#[test]
fn regression_a_retried_manifest_write_that_applied_publishes_the_build() {
    // Create-only writes of manifests apply and then answer "exists", as
    // S3 does when the client retries a conditional PUT after a 500 the
    // first attempt had applied (object_store retries 5xx answers).
    publishes_through_retried_creates("/generations/", &[1_800_000_000, 1_800_000_100, 1_800_000_200]);
}

/// The same for the build's own objects (its snapshot, hashes and
/// deltas): a create-only write that applied and was answered "exists" is
/// this build's (same size and SHA-256), not a reused build id; the build
/// used to fail as `Corrupt`. Found by an adversarial review.
#[test]
fn regression_a_retried_build_object_write_that_applied_publishes_the_build() {
    publishes_through_retried_creates("/builds/", &[1_800_000_000, 1_800_000_100]);
}

/// Publishes a build at each of `times` through a store whose create-only
/// writes of keys holding `under` apply and then answer "exists": each
/// must be published, be `latest`, and load.
fn publishes_through_retried_creates(under: &'static str, times: &[u64]) {
    let dir = tempfile::tempdir().unwrap();
    let retried =
        Intercepted::over(LocalStorage::open(dir.path()).unwrap()).put_answer(move |key, mode, answer| {
            answer.filter(|_| !(matches!(mode, PutMode::Create) && key.contains(under)))
        });
    let storage: Arc<dyn Storage> = Arc::new(retried);
    let store = ListStore::open(storage, "phishing", 5).unwrap();
    let public = key().public_key().clone();
    for (i, &now) in times.iter().enumerate() {
        let base = store.latest().unwrap();
        let built = build(&format!("http://phish.example/{i}\n"), now);
        let outcome = store.publish(
            built.version,
            &built.snapshot,
            &built.hashes,
            base.as_ref(),
            &key(),
            now,
        );
        assert!(
            matches!(outcome, Ok(PublishOutcome::Published { .. })),
            "publish at {now}: {outcome:?}"
        );
        let latest = store.latest().unwrap().unwrap();
        assert_eq!(latest.pointer.version, built.version);
        store
            .load_generation(latest.pointer.generation, std::slice::from_ref(&public))
            .unwrap();
    }
}

/// Before anything is loaded (a replica starting while its store is
/// down, or a list with no generation yet), a version nothing has is
/// answered without a store request too: the 404 is not cached, so each
/// made-up version would be one request to the store.
#[test]
fn regression_a_made_up_version_costs_no_store_request_before_anything_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, reads, _) = recording(dir.path());
    let store = ListStore::open(storage, "phishing", 5).unwrap();
    for version in 1..=100 {
        assert_eq!(store.read_snapshot(version).unwrap(), None);
    }
    assert_eq!(reads.load(Ordering::SeqCst), 0);
}

/// A `latest` pointer moved back to an older kept generation (it is not
/// signed, and older pointers' bytes are easy to replay) sends new
/// replicas and restarted builders back to that generation's version; the
/// next publish must bring it to the newest generation, not discard its
/// build and move the pointer one generation forward per round.
#[test]
fn regression_a_pointer_moved_back_is_brought_forward_by_the_next_publish() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    let mut old = None;
    for (i, now) in [1_800_000_000u64, 1_800_000_100, 1_800_000_200, 1_800_000_300]
        .into_iter()
        .enumerate()
    {
        let base = store.latest().unwrap();
        publish(
            &store,
            &build(&format!("http://phish.example/{i}\n"), now),
            base.as_ref(),
        );
        old = old.or(store.latest().unwrap());
    }
    let replayed = old.unwrap().pointer;
    assert_eq!(replayed.generation, 1);
    storage
        .put("lists/phishing/latest", &replayed.to_bytes(), PutMode::Overwrite)
        .unwrap();
    let base = store.head(std::slice::from_ref(key().public_key())).unwrap();
    let next = build("http://phish.example/next\n", 1_800_000_400);
    let outcome = store.publish(
        next.version,
        &next.snapshot,
        &next.hashes,
        base.as_ref(),
        &key(),
        1_800_000_400,
    );
    assert!(
        matches!(outcome, Ok(PublishOutcome::Published { generation: 5 })),
        "{outcome:?}"
    );
}

/// The same stale build, when the other builder publishes past it (and
/// retention removes the generation it re-creates) between its last look
/// at the pointer and its manifest: its retention still keeps what the
/// latest generation needs.
#[test]
fn regression_a_stale_build_racing_retention_never_prunes_the_latest_generation() {
    let dir = tempfile::tempdir().unwrap();
    let (other, _) = store(dir.path(), 1);
    let public = key().public_key().clone();
    publish(&other, &build("http://phish.example/a\n", 1_800_000_000), None);
    let step_other = other.clone();
    // The other builder's two publishes run just before the stale
    // builder's manifest is created.
    let interleaved = Arc::new(
        Intercepted::over(LocalStorage::open(dir.path()).unwrap()).once_before_put(
            |key| key.contains("/generations/"),
            move || {
                for now in [1_800_000_100, 1_800_000_200] {
                    let base = step_other.latest().unwrap();
                    publish(
                        &step_other,
                        &build("http://phish.example/b\n", now),
                        base.as_ref(),
                    );
                }
            },
        ),
    );
    let stale_store = ListStore::open(interleaved, "phishing", 1).unwrap();
    let stale_base = stale_store.latest().unwrap().unwrap();
    // Its clock runs ahead of the other builder's.
    let outcome = publish(
        &stale_store,
        &build("http://phish.example/c\n", 1_800_003_600),
        Some(&stale_base),
    );
    let latest = other.latest().unwrap().unwrap();
    assert_eq!(latest.pointer.generation, 3);
    // Its generation 2 (created again after retention removed the other's)
    // is not what `latest` names: not published, so the stale builder does
    // not serve it. Served, its version (ahead of the store's) would keep
    // its follower from ever loading generation 3, and a client holding
    // generation 3's filter would be answered from hashes without it.
    assert!(
        matches!(outcome, PublishOutcome::Superseded { generation: 3 }),
        "{outcome:?}"
    );
    other.load_generation(3, std::slice::from_ref(&public)).unwrap();
}

/// Generations without a `latest` pointer (it was removed): the next build
/// starts from the newest of them, not from generation 1 again.
#[test]
fn regression_generations_without_a_pointer_are_built_on_from_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    for (i, now) in [1_800_000_000u64, 1_800_000_100, 1_800_000_200]
        .into_iter()
        .enumerate()
    {
        let base = store.head(std::slice::from_ref(key().public_key())).unwrap();
        publish(
            &store,
            &build(&format!("http://phish.example/{i}\n"), now),
            base.as_ref(),
        );
    }
    storage.delete("lists/phishing/latest").unwrap();
    let base = store
        .head(std::slice::from_ref(key().public_key()))
        .unwrap()
        .unwrap();
    assert_eq!(base.pointer.generation, 3);
    let next = build("http://phish.example/next\n", 1_800_000_300);
    assert_eq!(
        publish(&store, &next, Some(&base)),
        PublishOutcome::Published { generation: 4 }
    );
}

/// Publishes `next` after `prev` (published, with chain `chain`) with the
/// delta between them; returns the new chain.
fn publish_with_delta(
    store: &ListStore,
    prev: &BuiltList,
    chain: &Chain,
    next: &BuiltList,
    freshness: Option<&str>,
) -> Chain {
    let header = |b: &BuiltList| blocksieve_format::parse_header_unverified(&b.snapshot).unwrap();
    let (from, to) = (header(prev), header(next));
    let step = deltas::NextDelta {
        from: Some((&from, &prev.hashes, chain)),
        to: (&to, &next.hashes),
        window: 10,
        snapshot_bytes: next.snapshot.len(),
    };
    let chain = step.chain(&key());
    assert!(!chain.is_empty());
    let build = Build {
        version: next.version,
        snapshot: &next.snapshot,
        hashes: &next.hashes,
        deltas: chain.bytes(),
        freshness,
        replaces_untrusted: false,
    };
    let base = store.latest().unwrap();
    let outcome = store
        .publish_build(&build, base.as_ref(), &key(), next.version)
        .unwrap();
    assert!(matches!(outcome, PublishOutcome::Published { .. }), "{outcome:?}");
    chain
}

#[test]
fn a_generation_stores_its_delta_chain_and_a_reader_loads_and_checks_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    let public = key().public_key().clone();
    // Large enough that two deltas are smaller than the snapshot.
    let feed: String = (0..500).map(|i| format!("http://phish.example/{i}\n")).collect();
    let first = build(&feed, 1_800_000_000);
    publish(&store, &first, None);
    // No chain: no object, no field, and it loads as an empty chain.
    assert_eq!(
        store.manifest(1, std::slice::from_ref(&public)).unwrap().deltas,
        None
    );
    assert!(
        store
            .load_generation(1, std::slice::from_ref(&public))
            .unwrap()
            .deltas
            .is_empty()
    );
    let second = build(&format!("{feed}http://phish.example/b\n"), 1_800_000_100);
    let chain = publish_with_delta(&store, &first, &Chain::default(), &second, Some("record"));
    let third = build(&format!("{feed}http://phish.example/c\n"), 1_800_000_200);
    let chain = publish_with_delta(&store, &second, &chain, &third, None);
    assert_eq!(chain.len(), 2);
    let manifest = store.manifest(3, std::slice::from_ref(&public)).unwrap();
    let object = manifest.deltas.clone().unwrap();
    assert!(object.key.ends_with(".deltas"), "{object:?}");
    assert_eq!(
        store
            .load_generation(3, std::slice::from_ref(&public))
            .unwrap()
            .deltas,
        chain
    );
    // The pointer of generation 2 carried its record; generation 3's none.
    assert_eq!(store.latest().unwrap().unwrap().pointer.freshness, None);

    // A chain object replaced (here by generation 2's, which is signed but
    // ends elsewhere): the generation does not load, and readers walk back.
    let second_object = store
        .manifest(2, std::slice::from_ref(&public))
        .unwrap()
        .deltas
        .unwrap();
    let older = storage.get(&store.key(&second_object.key)).unwrap().unwrap();
    let key3 = store.key(&object.key);
    storage.delete(&key3).unwrap();
    storage.put(&key3, &older, PutMode::Create).unwrap();
    let refused = store
        .load_generation(3, std::slice::from_ref(&public))
        .unwrap_err();
    assert!(matches!(refused, Error::Corrupt { .. }), "{refused}");
    assert_eq!(
        store
            .load_from(3, std::slice::from_ref(&public))
            .unwrap()
            .generation,
        Some(2)
    );
    storage.delete(&key3).unwrap();
    assert!(is_definitive(
        &store
            .load_generation(3, std::slice::from_ref(&public))
            .unwrap_err()
    ));
}

#[test]
fn a_manifest_written_before_delta_chains_still_verifies_and_loads() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    let first = build("http://phish.example/a\n", 1_800_000_000);
    publish(&store, &first, None);
    // The manifest's JSON as written before chains: no `deltas` key at all.
    let manifest_key = store.manifest_key(1);
    let stored = String::from_utf8(storage.get(&manifest_key).unwrap().unwrap()).unwrap();
    assert!(!stored.contains("deltas"), "{stored}");
    let public = key().public_key().clone();
    let loaded = store.load_latest(std::slice::from_ref(&public)).unwrap();
    assert_eq!((loaded.generation, loaded.snapshot), (Some(1), first.snapshot));
    assert!(loaded.deltas.is_empty());
}

#[test]
fn a_refresh_moves_the_pointer_only_from_the_version_read() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = store(dir.path(), 5);
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    let base = store.latest().unwrap().unwrap();
    assert!(store.refresh(&base, "first").unwrap());
    let now = store.latest().unwrap().unwrap();
    assert_eq!(now.pointer.freshness.as_deref(), Some("first"));
    assert_eq!(now.pointer.generation, base.pointer.generation);
    // From the stale version: refused, the newer record stays.
    assert!(!store.refresh(&base, "stale").unwrap());
    assert_eq!(
        store.latest().unwrap().unwrap().pointer.freshness.as_deref(),
        Some("first")
    );
    // `head` keeps the record of the generation it names.
    let head = store
        .head(std::slice::from_ref(key().public_key()))
        .unwrap()
        .unwrap();
    assert_eq!(head.pointer.freshness.as_deref(), Some("first"));
}

/// Retention removes a build's snapshot before its full hashes: a publisher
/// killed between the two leaves full hashes alone (garbage the next
/// retention removes), never a snapshot without them.
#[test]
fn retention_removes_each_snapshot_before_its_full_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let deleted = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&deleted);
    let storage: Arc<dyn Storage> = Arc::new(
        Intercepted::over(LocalStorage::open(dir.path()).unwrap()).before(move |op, key| {
            if op == crate::storage::testing::Op::Delete {
                seen.lock().unwrap().push(key.to_owned());
            }
            Ok(())
        }),
    );
    let store = ListStore::open(storage, "phishing", 1).unwrap();
    let mut base = None;
    for i in 0..4u64 {
        let built = build(&format!("http://phish.example/{i}\n"), 1_800_000_000 + i * 100);
        publish(&store, &built, base.as_ref());
        base = store.latest().unwrap();
    }
    let deleted = deleted.lock().unwrap().clone();
    let builds: Vec<&String> = deleted.iter().filter(|k| k.contains("/builds/")).collect();
    assert!(builds.len() >= 6, "{deleted:?}");
    for (i, key) in builds.iter().enumerate() {
        if let Some(build) = key.strip_suffix(".hashes") {
            let snapshot = format!("{build}.snapshot");
            assert!(
                builds[..i].iter().any(|k| **k == snapshot),
                "{key} removed before its snapshot: {deleted:?}"
            );
        }
    }
}

/// Generation 1 under the old key ([`key`]), then generation 2 published by
/// a builder rotated to a new key (the old one among its previous keys):
/// the store, a view of it as a builder left on the old key sees it, and
/// the new key.
fn rotated_past(dir: &std::path::Path) -> (ListStore, ListStore, SigningKey) {
    let (old_store, _) = store(dir, 5);
    publish(
        &old_store,
        &build("http://phish.example/a\n", 1_800_000_000),
        None,
    );
    rotate(dir)
}

/// Generation 2, published past the store's head by a builder on a new key.
fn rotate(dir: &std::path::Path) -> (ListStore, ListStore, SigningKey) {
    let (old_store, _) = store(dir, 5);
    let new_key = SigningKey::from_secret_bytes([10; 32]);
    let (rotated, _) = store(dir, 5);
    let rotated = rotated.with_previous_keys(std::slice::from_ref(key().public_key()));
    assert_eq!(
        publish_rotation(&rotated, &new_key),
        PublishOutcome::Published { generation: 2 }
    );
    (old_store, rotated, new_key)
}

/// The rotation's build (a URL added) published by `rotated` on its head,
/// signed by `new_key`, at 1,800,000,100.
fn publish_rotation(rotated: &ListStore, new_key: &SigningKey) -> PublishOutcome {
    let base = rotated.head(&rotated.trusted_with(new_key)).unwrap();
    let newer = build_feed(
        "http://phish.example/a\nhttp://phish.example/new\n",
        1_800_000_100,
        new_key,
    );
    (rotated)
        .publish(
            newer.version,
            &newer.snapshot,
            &newer.hashes,
            base.as_ref(),
            new_key,
            1_800_000_100,
        )
        .unwrap()
}

/// A builder left on the old key after a rotation reads, as its head, the
/// pointer to the new key's generation, not the newest generation its own
/// key verifies paired with that pointer's ETag: with that pair its
/// unchanged build moved `latest` back to generation 1 by compare-and-swap,
/// and its changed build replaced generation 2's manifest with its own
/// (so replicas and agents trusting the new key alone had nothing newer
/// to load, and stopped taking new listings).
#[test]
fn a_builder_left_out_of_a_rotation_reads_the_other_key_s_generation_as_its_head() {
    let dir = tempfile::tempdir().unwrap();
    let (old_store, rotated, new_key) = rotated_past(dir.path());
    let old_key = key();
    let old_public = std::slice::from_ref(old_key.public_key());
    let head = old_store.head(old_public).unwrap().unwrap();
    assert_eq!(head.pointer.generation, 2, "{head:?}");
    assert!(old_store.signed_by_another_key(2, old_public).unwrap());
    // Its changed build publishes past the new key's generation (what a
    // forced key change does; unforced, the build is refused before,
    // `Error::OtherSigningKey`), never over it.
    let stale = build("http://phish.example/a\n", 1_800_000_200);
    let outcome = publish(&old_store, &stale, Some(&head));
    assert_eq!(outcome, PublishOutcome::Published { generation: 3 });
    let new_public = [new_key.public_key().clone()];
    rotated.load_generation(2, &new_public).unwrap();
}

/// The rotation publishes while the old key's build runs, after it read
/// its head (generation 1, its own): its publish finds generation 2 signed
/// by a key it does not trust, and is superseded, leaving generation 2
/// and the pointer to it as they are. It replaced that manifest, as it
/// replaces garbage, and pointed `latest` at its own.
#[test]
fn a_build_on_the_old_key_that_the_rotation_published_past_meanwhile_replaces_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (old_store, _) = store(dir.path(), 5);
    publish(
        &old_store,
        &build("http://phish.example/a\n", 1_800_000_000),
        None,
    );
    let old_key = key();
    let old_public = std::slice::from_ref(old_key.public_key());
    let base = old_store.head(old_public).unwrap().unwrap();
    assert_eq!(base.pointer.generation, 1);
    let (_, rotated, new_key) = rotate(dir.path());

    let stale = build("http://phish.example/a\nhttp://phish.example/b\n", 1_800_000_200);
    let outcome = publish(&old_store, &stale, Some(&base));
    assert_eq!(outcome, PublishOutcome::Superseded { generation: 2 });
    let new_public = [new_key.public_key().clone()];
    rotated.load_generation(2, &new_public).unwrap();
    assert_eq!(rotated.latest().unwrap().unwrap().pointer.generation, 2);
    // An unchanged build on that base cannot move the pointer back either.
    assert!(!old_store.refresh(&base, "record").unwrap());
    assert_eq!(rotated.latest().unwrap().unwrap().pointer.generation, 2);
}

/// Generation 1 published, then generation 2's manifest damaged bytes (a
/// copy of generation 1's with its body changed: well-formed JSON, a
/// 64-byte signature that verifies under no key), which `latest` has not
/// reached.
fn damaged_manifest_at_2(dir: &std::path::Path) -> (ListStore, Arc<dyn Storage>) {
    let (store, storage) = store(dir, 5);
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    let one = storage
        .get_range("lists/phishing/generations/00000000000000000001.json", 0..1 << 20)
        .unwrap()
        .unwrap();
    let text = String::from_utf8(one).unwrap();
    let damaged = text.replacen("\"generation\":1", "\"generation\":2", 1);
    assert_ne!(damaged, text);
    (storage)
        .put(
            "lists/phishing/generations/00000000000000000002.json",
            damaged.as_bytes(),
            PutMode::Create,
        )
        .unwrap();
    let signer = key();
    assert!(
        store
            .signed_by_another_key(2, std::slice::from_ref(signer.public_key()))
            .unwrap()
    );
    (store, storage)
}

/// Publishes a build of `store`'s head signed by `signer` at `now`;
/// `replaces_untrusted` as a forced build, or a builder alone on its data
/// directory, sets it.
fn publish_at(
    store: &ListStore,
    signer: &SigningKey,
    trusted: &[TrustedKey],
    now: u64,
    replaces_untrusted: bool,
) -> PublishOutcome {
    let base = store.head(trusted).unwrap();
    let next = build_feed("http://phish.example/c\n", now, signer);
    let build = Build {
        version: next.version,
        snapshot: &next.snapshot,
        hashes: &next.hashes,
        deltas: &[],
        freshness: None,
        replaces_untrusted,
    };
    store.publish_build(&build, base.as_ref(), signer, now).unwrap()
}

/// A manifest at generation 2 signed by no key `trusted` holds, which
/// `latest` has not reached: a builder sharing a store is superseded by it
/// (it may be a key rotation's, its pointer about to move; the next build's
/// check of the store's keys refuses, `Error::OtherSigningKey`, naming
/// `--force`), and one that replaces untrusted manifests (forced, or alone
/// on its data directory) replaces it and publishes on.
fn superseded_unless_it_replaces_untrusted(
    store: &ListStore,
    signer: &SigningKey,
    trusted: &[TrustedKey],
    after: u64,
) {
    let outcome = publish_at(store, signer, trusted, after + 100, false);
    assert_eq!(outcome, PublishOutcome::Superseded { generation: 2 });
    let outcome = publish_at(store, signer, trusted, after + 200, true);
    assert_eq!(outcome, PublishOutcome::Published { generation: 2 });
    let outcome = publish_at(store, signer, trusted, after + 300, false);
    assert_eq!(outcome, PublishOutcome::Published { generation: 3 });
}

/// A damaged manifest at the next generation, which `latest` has not
/// reached, looks signed by another key: a forced build, or a builder alone
/// on its data directory, replaces it as garbage is. Kept whatever the
/// build, every later publish was superseded by it, forever (`build
/// --force` included). Found by an adversarial review of the fix for a
/// rotation's race.
#[test]
fn a_damaged_manifest_past_latest_does_not_stop_publishing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = damaged_manifest_at_2(dir.path());
    let signer = key();
    superseded_unless_it_replaces_untrusted(
        &store,
        &signer,
        std::slice::from_ref(signer.public_key()),
        1_800_000_000,
    );
}

/// The same with the unsigned `latest` pointer also damaged: garbage, or
/// forged to name a generation never written, or one holding garbage.
/// Found by two more reviews (a rule judging by the pointer stopped
/// publishing on each).
#[test]
fn a_damaged_manifest_past_latest_with_a_garbage_or_forged_pointer_does_not_stop_publishing() {
    let forged = |generation| Pointer {
        list: "phishing".to_owned(),
        generation,
        version: 1_800_000_000,
        freshness: None,
    };
    for (pointer, garbage_at_3) in [
        (forged(50).to_bytes(), false),
        (forged(3).to_bytes(), true),
        (b"garbage".to_vec(), false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (store, storage) = damaged_manifest_at_2(dir.path());
        if garbage_at_3 {
            (storage)
                .put(
                    "lists/phishing/generations/00000000000000000003.json",
                    b"garbage",
                    PutMode::Create,
                )
                .unwrap();
        }
        (storage)
            .put("lists/phishing/latest", &pointer, PutMode::Overwrite)
            .unwrap();
        let signer = key();
        let trusted = std::slice::from_ref(signer.public_key());
        let outcome = publish_at(&store, &signer, trusted, 1_800_000_100, false);
        assert_eq!(outcome, PublishOutcome::Superseded { generation: 2 });
        let outcome = publish_at(&store, &signer, trusted, 1_800_000_200, true);
        assert_eq!(outcome, PublishOutcome::Published { generation: 2 });
    }
}

/// A forced key change (old builders stopped, one build with a new key and
/// no previous keys) where an old-key builder had written the next
/// generation's manifest but stopped before moving `latest`: the forced
/// build replaces that manifest (it superseded the forced build and every
/// later one).
#[test]
fn a_forced_key_change_past_an_old_key_publish_that_stopped_before_its_pointer_publishes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, storage) = store(dir.path(), 5);
    publish(&store, &build("http://phish.example/a\n", 1_800_000_000), None);
    let pointer_one = storage
        .get_range("lists/phishing/latest", 0..1 << 20)
        .unwrap()
        .unwrap();
    let base = store.latest().unwrap();
    let stopped = build("http://phish.example/b\n", 1_800_000_100);
    publish(&store, &stopped, base.as_ref());
    // The stop: generation 2's manifest is there, `latest` still names 1.
    (storage)
        .put("lists/phishing/latest", &pointer_one, PutMode::Overwrite)
        .unwrap();
    let new_key = SigningKey::from_secret_bytes([10; 32]);
    let (forced, _) = self::store(dir.path(), 5);
    let trusted = forced.trusted_with(&new_key);
    superseded_unless_it_replaces_untrusted(&forced, &new_key, &trusted, 1_800_000_100);
}

/// Two builders on one key, both on generation 1, where generation 2 holds
/// garbage: the second judged the garbage, then the first replaced it and
/// published, then the second replaced the first's manifest by a
/// compare-and-swap on the version read after its judgement, and both
/// reported generation 2 published (the first serving a build the store no
/// longer holds). The swap is now on the version judged. Found by a review.
#[test]
fn two_builders_replacing_the_same_garbage_do_not_both_publish() {
    use crate::storage::testing::Op;
    let dir = tempfile::tempdir().unwrap();
    let (first, storage) = store(dir.path(), 5);
    publish(&first, &build("http://phish.example/a\n", 1_800_000_000), None);
    (storage)
        .put(
            "lists/phishing/generations/00000000000000000002.json",
            b"garbage",
            PutMode::Create,
        )
        .unwrap();
    let base = first.latest().unwrap();
    let first_outcome = Arc::new(std::sync::Mutex::new(None));
    let seen = Arc::clone(&first_outcome);
    let path = dir.path().to_owned();
    let base_in = base.clone();
    type Step = Box<dyn FnOnce() + Send>;
    let step: std::sync::Mutex<Option<Step>> = std::sync::Mutex::new(Some(Box::new(move || {
        let (first, _) = store(&path, 5);
        let one = build("http://phish.example/b\n", 1_800_000_100);
        *seen.lock().unwrap() = Some(publish(&first, &one, base_in.as_ref()));
    })));
    // The whole first publish just before the second reads manifest 2's
    // version: after its judgement, when it judged first and read the
    // version to swap on after.
    let storage = Intercepted::over(LocalStorage::open(dir.path()).unwrap()).before(move |op, k| {
        if op == Op::Version
            && k.ends_with("00000000000000000002.json")
            && let Some(step) = step.lock().unwrap().take()
        {
            step();
        }
        Ok(())
    });
    let second = ListStore::open(Arc::new(storage), "phishing", 5).unwrap();
    let other = build("http://phish.example/c\n", 1_800_000_101);
    let second_outcome = publish(&second, &other, base.as_ref());
    let first_outcome = first_outcome.lock().unwrap().clone();
    assert_eq!(first_outcome, Some(PublishOutcome::Published { generation: 2 }));
    assert_eq!(second_outcome, PublishOutcome::Superseded { generation: 2 });
    let held = first
        .manifest(2, std::slice::from_ref(key().public_key()))
        .unwrap();
    assert_eq!(held.version, 1_800_000_100);
    assert_eq!(first.latest().unwrap().unwrap().pointer.version, 1_800_000_100);
}

/// The rotation's builder (new key; with the old one among its previous
/// keys, or without: a forced change) has created generation 2's manifest
/// and not yet moved `latest` when a builder left on the old key, its
/// build on generation 1, publishes. Replaced as garbage (`latest` had not
/// reached it), the old builder moved `latest` to its own generation 2,
/// which the rotation's readers refuse, and the rotation's build was
/// superseded (or failed). Found by a second review of the fix for the
/// rotation's race; now the old builder's publish is superseded.
#[test]
fn an_old_key_publish_in_the_window_before_the_rotation_s_pointer_moves_replaces_nothing() {
    for previous in [vec![key().public_key().clone()], vec![]] {
        let dir = tempfile::tempdir().unwrap();
        let (old_store, _) = store(dir.path(), 5);
        publish(
            &old_store,
            &build("http://phish.example/a\n", 1_800_000_000),
            None,
        );
        let old_base = old_store.head(std::slice::from_ref(key().public_key())).unwrap();
        let old_outcome = Arc::new(std::sync::Mutex::new(None));
        let seen = Arc::clone(&old_outcome);
        let path = dir.path().to_owned();
        // Before the rotation's pointer write: the old key's publish.
        let storage = Intercepted::over(LocalStorage::open(dir.path()).unwrap()).once_before_put(
            |k| k.ends_with("/latest"),
            move || {
                let (old_store, _) = store(&path, 5);
                let stale = build("http://phish.example/a\n", 1_800_000_050);
                *seen.lock().unwrap() = Some(publish(&old_store, &stale, old_base.as_ref()));
            },
        );
        let new_key = SigningKey::from_secret_bytes([10; 32]);
        let rotated = ListStore::open(Arc::new(storage), "phishing", 5)
            .unwrap()
            .with_previous_keys(&previous);
        let outcome = publish_rotation(&rotated, &new_key);
        assert_eq!(outcome, PublishOutcome::Published { generation: 2 });
        let old_outcome = old_outcome.lock().unwrap().clone();
        assert_eq!(old_outcome, Some(PublishOutcome::Superseded { generation: 2 }));
        let latest = rotated.latest().unwrap().unwrap().pointer;
        assert_eq!(latest.generation, 2);
        rotated
            .load_generation(2, &[new_key.public_key().clone()])
            .unwrap();
    }
}

/// A forced build (a gate overridden, or a deliberate key change) by a
/// builder left out of a rotation, on a base read before the rotation
/// published generation 2 and moved `latest` to it: it replaced that
/// manifest, which `latest` names (the rotation's generation lost, `latest`
/// on the old key). A manifest `latest` names is never replaced: the forced
/// build is superseded, and the next one publishes past it. Found by a
/// review.
#[test]
fn a_forced_build_does_not_replace_the_generation_latest_names() {
    let dir = tempfile::tempdir().unwrap();
    let (old_store, _) = store(dir.path(), 5);
    publish(
        &old_store,
        &build("http://phish.example/a\n", 1_800_000_000),
        None,
    );
    let old_key = key();
    let old_public = std::slice::from_ref(old_key.public_key());
    let base = old_store.head(old_public).unwrap().unwrap();
    let (_, rotated, new_key) = rotate(dir.path());
    let stale = build("http://phish.example/a\nhttp://phish.example/b\n", 1_800_000_200);
    let forced = Build {
        version: stale.version,
        snapshot: &stale.snapshot,
        hashes: &stale.hashes,
        deltas: &[],
        freshness: None,
        replaces_untrusted: true,
    };
    let outcome = old_store
        .publish_build(&forced, Some(&base), &old_key, 1_800_000_200)
        .unwrap();
    assert_eq!(outcome, PublishOutcome::Superseded { generation: 2 });
    let new_public = [new_key.public_key().clone()];
    rotated.load_generation(2, &new_public).unwrap();
    assert_eq!(rotated.latest().unwrap().unwrap().pointer.generation, 2);
    // The next forced build starts from that pointer and publishes past it.
    let outcome = publish_at(&old_store, &old_key, old_public, 1_800_000_300, true);
    assert_eq!(outcome, PublishOutcome::Published { generation: 3 });
    rotated.load_generation(2, &new_public).unwrap();
}
