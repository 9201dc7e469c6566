//! One contract for every [`Storage`]: what the publisher relies on from
//! the data directory and from an object store alike, checked the same way
//! on each ([`check`]), and two races that only an atomic conditional write
//! survives ([`create_race`], [`update_race`]).
//!
//! Every key the checks use is under `contract/`, so a store shared with
//! other tests (a bucket prefix) is left with nothing else touched.
//!
//! The races: 16 threads write one key at once, each from its own thread,
//! and exactly one may win ([`Arbiter`]: moto's server cannot promise
//! that). The data directory ([`LocalStorage`]) creates a
//! file by hard-linking it into place, which the file system makes atomic,
//! so it runs [`create_race`]; its compare-and-swap compares the file's
//! version and then renames, which is safe only because one publisher at a
//! time holds the directory (its lock), so [`update_race`] is not its
//! contract. An object store runs both: its conditional writes are decided
//! by the server.
//!
//! [`LocalStorage`]: blocksieve_publisher::internal::storage::LocalStorage

use std::sync::Barrier;

use blocksieve_publisher::Error;
use blocksieve_publisher::internal::storage::{Conditional, PutMode, Storage, Version};

/// How many writers each race runs.
pub const RACERS: usize = 16;

/// Checks every call of `storage` against the contract, on keys under
/// `contract/` (which must be empty when it starts).
///
/// # Panics
///
/// When `storage` breaks the contract, naming the broken rule.
pub fn check(storage: &dyn Storage) {
    missing_keys(storage);
    put_modes(storage);
    ranges(storage);
    conditional_reads(storage);
    listing(storage);
    deleting(storage);
    streamed_puts(storage);
}

/// The result of a call that must succeed (its line is the caller's).
#[track_caller]
fn ok<T>(result: Result<T, Error>) -> T {
    result.unwrap_or_else(|e| panic!("{e}"))
}

#[track_caller]
fn get(storage: &dyn Storage, key: &str) -> Option<Vec<u8>> {
    storage.get(key).unwrap_or_else(|e| panic!("get {key}: {e}"))
}

#[track_caller]
fn value(storage: &dyn Storage, key: &str) -> Vec<u8> {
    get(storage, key).unwrap_or_else(|| panic!("no value under {key}"))
}

#[track_caller]
fn put(storage: &dyn Storage, key: &str, value: &[u8], mode: PutMode) -> Option<Version> {
    storage
        .put(key, value, mode)
        .unwrap_or_else(|e| panic!("put {key}: {e}"))
}

fn sorted(mut keys: Vec<String>) -> Vec<String> {
    keys.sort();
    keys
}

fn missing_keys(storage: &dyn Storage) {
    let key = "contract/missing/value";
    assert_eq!(get(storage, key), None, "get of a missing key");
    assert_eq!(
        ok(storage.get_range(key, 0..1)),
        None,
        "get_range of a missing key"
    );
    assert_eq!(ok(storage.version(key)), None, "version of a missing key");
    assert_eq!(
        ok(storage.get_if_changed(key, None)),
        Conditional::Missing,
        "get_if_changed of a missing key"
    );
    assert_eq!(ok(storage.list("contract/missing")), Vec::<String>::new());
}

fn put_modes(storage: &dyn Storage) {
    let key = "contract/modes/1.snapshot";
    // Overwrite stores, and replaces.
    let v1 = put(storage, key, b"one", PutMode::Overwrite).expect("overwrite stores");
    assert_eq!(value(storage, key), b"one");
    assert_eq!(
        ok(storage.version(key)),
        Some(v1.clone()),
        "the version put returned"
    );
    let v2 = put(storage, key, b"eins", PutMode::Overwrite).expect("overwrite replaces");
    assert_ne!(v1, v2, "a replaced value has a new version");
    assert_eq!(value(storage, key), b"eins");

    // Create never replaces.
    assert_eq!(
        put(storage, key, b"other", PutMode::Create),
        None,
        "create on an existing key"
    );
    assert_eq!(value(storage, key), b"eins", "a refused create left the value");
    assert_eq!(ok(storage.version(key)), Some(v2.clone()));
    let created =
        put(storage, "contract/modes/2.snapshot", b"two", PutMode::Create).expect("create on a new key");
    assert_eq!(ok(storage.version("contract/modes/2.snapshot")), Some(created));
    assert_eq!(value(storage, "contract/modes/2.snapshot"), b"two");

    // Update replaces only the version it was given.
    let v3 = put(storage, key, b"uno!", PutMode::Update(v2.clone())).expect("update on the current version");
    assert_ne!(v2, v3, "an updated value has a new version");
    assert_eq!(
        put(storage, key, b"stale", PutMode::Update(v2)),
        None,
        "update on a stale version"
    );
    assert_eq!(
        put(storage, key, b"older", PutMode::Update(v1)),
        None,
        "update on an older version"
    );
    assert_eq!(value(storage, key), b"uno!", "a refused update left the value");
    assert_eq!(ok(storage.version(key)), Some(v3.clone()));
    // Two writes of the same size in quick succession are two versions.
    let v4 = put(storage, key, b"dos!", PutMode::Update(v3.clone())).expect("update again");
    assert_ne!(v3, v4, "two same-size writes in quick succession");
    assert_eq!(put(storage, key, b"tres", PutMode::Update(v3)), None);
    assert_eq!(value(storage, key), b"dos!");

    // Update of a key that does not exist does not hold, and stores nothing.
    let missing = "contract/modes/none";
    assert_eq!(
        put(storage, missing, b"x", PutMode::Update(v4)),
        None,
        "update on a missing key"
    );
    assert_eq!(get(storage, missing), None, "a refused update stored nothing");
}

fn ranges(storage: &dyn Storage) {
    let key = "contract/ranges/value";
    put(storage, key, b"abcdef", PutMode::Overwrite).expect("the value is stored");
    let range = |r: std::ops::Range<u64>| {
        ok(storage.get_range(key, r.clone())).unwrap_or_else(|| panic!("range {r:?}"))
    };
    assert_eq!(range(0..6), b"abcdef");
    assert_eq!(range(1..3), b"bc");
    assert_eq!(range(2..2), b"", "an empty range");
    // Fewer bytes at its end; none past it.
    assert_eq!(range(4..10), b"ef", "a range over the end");
    assert_eq!(range(6..10), b"", "a range at the end");
    assert_eq!(range(10..20), b"", "a range past the end");
}

fn conditional_reads(storage: &dyn Storage) {
    let key = "contract/conditional/pointer";
    put(storage, key, b"generation 1", PutMode::Overwrite).expect("the value is stored");
    let Conditional::Value { bytes, version } = ok(storage.get_if_changed(key, None)) else {
        panic!("get_if_changed without a version gives the value");
    };
    assert_eq!(bytes, b"generation 1");
    assert_eq!(
        ok(storage.version(key)),
        Some(version.clone()),
        "the value's version"
    );
    assert_eq!(
        ok(storage.get_if_changed(key, Some(&version))),
        Conditional::NotModified,
        "get_if_changed on the current version"
    );
    // The version read with the value is one a compare-and-swap accepts.
    let next = put(storage, key, b"generation 2", PutMode::Update(version.clone()))
        .expect("update on the version get_if_changed gave");
    // After a write, the new value with its new version.
    match ok(storage.get_if_changed(key, Some(&version))) {
        Conditional::Value { bytes, version } => {
            assert_eq!(bytes, b"generation 2");
            assert_eq!(version, next, "the new value's version");
        }
        other => panic!("get_if_changed after a write: {other:?}"),
    }
    assert_eq!(
        ok(storage.get_if_changed(key, Some(&next))),
        Conditional::NotModified
    );
    // A version read with the value is stale once another write came.
    assert_eq!(
        put(storage, key, b"generation 2'", PutMode::Update(version)),
        None
    );
    assert_eq!(
        ok(storage.get_if_changed("contract/conditional/none", Some(&next))),
        Conditional::Missing,
        "get_if_changed of a missing key with a version"
    );
}

fn listing(storage: &dyn Storage) {
    for key in [
        "contract/tree/x.snapshot",
        "contract/tree/y.meta.json",
        "contract/tree/sub/z",
        "contract/tree/sub/deeper/w",
        "contract/tree/sub/deeper/still/v",
        "contract/treetop/not-under-tree",
    ] {
        put(storage, key, key.as_bytes(), PutMode::Overwrite).expect("the value is stored");
    }
    // One level, "directories" included, each once; with or without the
    // trailing `/`; a sibling whose name starts alike is not under it.
    let level = [
        "contract/tree/sub",
        "contract/tree/x.snapshot",
        "contract/tree/y.meta.json",
    ];
    assert_eq!(sorted(ok(storage.list("contract/tree"))), level);
    assert_eq!(sorted(ok(storage.list("contract/tree/"))), level);
    assert_eq!(
        sorted(ok(storage.list("contract/tree/sub"))),
        ["contract/tree/sub/deeper", "contract/tree/sub/z"]
    );
    assert_eq!(
        ok(storage.list("contract/tree/sub/deeper/still")),
        ["contract/tree/sub/deeper/still/v"]
    );
    assert_eq!(ok(storage.list("contract/tree/none")), Vec::<String>::new());
    // Keys of several levels read back as written.
    let deep = "contract/tree/sub/deeper/still/v";
    assert_eq!(value(storage, deep), deep.as_bytes());
    assert_eq!(
        ok(storage.get_range(deep, 9..13)).expect("a value under the key"),
        b"tree"
    );
}

fn deleting(storage: &dyn Storage) {
    let key = "contract/delete/value";
    put(storage, key, b"v", PutMode::Overwrite).expect("the value is stored");
    put(storage, "contract/delete/kept", b"k", PutMode::Overwrite).expect("the value is stored");
    ok(storage.delete(key));
    assert_eq!(get(storage, key), None, "a deleted key");
    assert_eq!(ok(storage.version(key)), None);
    // Idempotent: deleting what is gone, or never was, succeeds.
    ok(storage.delete(key));
    ok(storage.delete("contract/delete/never"));
    assert_eq!(ok(storage.list("contract/delete")), ["contract/delete/kept"]);
    // A deleted key can be created again.
    assert!(
        put(storage, key, b"again", PutMode::Create).is_some(),
        "create after delete"
    );
    assert_eq!(value(storage, key), b"again");
}

fn streamed_puts(storage: &dyn Storage) {
    let key = "contract/stream/1.hashes";
    let mut chunks = [&b"ab"[..], b"", b"cd"].into_iter();
    let version = ok(storage.put_chunks(key, &mut chunks, PutMode::Overwrite)).expect("streamed put");
    assert_eq!(value(storage, key), b"abcd");
    assert_eq!(ok(storage.version(key)), Some(version.clone()));
    // As the hashes are written: many 32-byte chunks.
    let hashes: Vec<[u8; 32]> = (0..1000u32)
        .map(|i| {
            let mut h = [0u8; 32];
            h[..4].copy_from_slice(&i.to_be_bytes());
            h
        })
        .collect();
    let mut chunks = hashes.iter().map(|h| &h[..]);
    put_chunks_with(storage, key, &mut chunks, PutMode::Update(version.clone())).expect("streamed update");
    let stored = value(storage, key);
    assert_eq!(stored, hashes.concat());
    assert_eq!(
        ok(storage.get_range(key, 32 * 500..32 * 501)).expect("a value under the key"),
        hashes[500]
    );
    // The modes hold for streamed puts too.
    let mut chunks = [&b"x"[..]].into_iter();
    assert_eq!(put_chunks_with(storage, key, &mut chunks, PutMode::Create), None);
    let mut chunks = [&b"x"[..]].into_iter();
    assert_eq!(
        put_chunks_with(storage, key, &mut chunks, PutMode::Update(version)),
        None
    );
    assert_eq!(value(storage, key), hashes.concat());
}

fn put_chunks_with(
    storage: &dyn Storage,
    key: &str,
    chunks: &mut dyn Iterator<Item = &[u8]>,
    mode: PutMode,
) -> Option<Version> {
    storage
        .put_chunks(key, chunks, mode)
        .unwrap_or_else(|e| panic!("put_chunks {key}: {e}"))
}

/// Who decides a race's conditional writes, and so what it may assert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arbiter {
    /// A store whose conditional write is atomic (S3, the in-memory
    /// store, the file system's hard link): exactly one writer wins.
    Atomic,
    /// moto's S3 server, which checks `If-None-Match` and `If-Match`
    /// against the object it finds and writes afterwards, with no lock
    /// between (`PutObject` in its `s3/responses.py`, 5.2): two writers
    /// racing on a busy machine can both pass. Against it a race asserts
    /// what is the client's part: every writer is told it won or lost
    /// (none fails), at least one wins, and the value stored is a winner's
    /// at the version it was given.
    CheckThenWrite,
}

/// Races [`RACERS`] threads creating `key` ([`PutMode::Create`]) at once,
/// each with its own value: exactly one wins (at least one, against
/// [`Arbiter::CheckThenWrite`]), the others are told the key exists (none
/// fails), and the stored value is the winner's, at the version it was
/// given.
///
/// # Panics
///
/// When no writer or more than one wins, or the value is another's.
pub fn create_race(storage: &dyn Storage, key: &str, arbiter: Arbiter) {
    race(storage, key, || PutMode::Create, arbiter);
}

/// Races [`RACERS`] threads updating `key` from one version
/// ([`PutMode::Update`]) at once: exactly one wins, as
/// [`create_race`].
///
/// # Panics
///
/// As [`create_race`].
pub fn update_race(storage: &dyn Storage, key: &str, arbiter: Arbiter) {
    let start = put(storage, key, b"start", PutMode::Overwrite).expect("the starting value");
    race(storage, key, || PutMode::Update(start.clone()), arbiter);
}

fn race(storage: &dyn Storage, key: &str, mode: impl Fn() -> PutMode + Sync, arbiter: Arbiter) {
    let barrier = Barrier::new(RACERS);
    let results: Vec<(Vec<u8>, Option<Version>)> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..RACERS)
            .map(|i| {
                let (barrier, mode) = (&barrier, &mode);
                s.spawn(move || {
                    let value = format!("writer {i}").into_bytes();
                    barrier.wait();
                    let won = storage
                        .put(key, &value, mode())
                        .unwrap_or_else(|e| panic!("writer {i} on {key}: {e}"));
                    (value, won)
                })
            })
            .collect();
        writers.into_iter().map(|w| w.join().expect("a writer")).collect()
    });
    let winners: Vec<_> = results.iter().filter(|(_, won)| won.is_some()).collect();
    match arbiter {
        Arbiter::Atomic => assert_eq!(
            winners.len(),
            1,
            "{key}: {} of {RACERS} writers won",
            winners.len()
        ),
        Arbiter::CheckThenWrite => assert!(!winners.is_empty(), "{key}: no writer won"),
    }
    let stored = get(storage, key).unwrap_or_else(|| panic!("{key}: nothing stored"));
    let Some((value, version)) = winners.iter().find(|(value, _)| *value == stored) else {
        panic!("{key}: the stored value is no winner's");
    };
    assert_eq!(
        ok(storage.version(key)).as_ref(),
        version.as_ref(),
        "{key}: at the winner's version"
    );
    assert_eq!(*value, stored);
}
