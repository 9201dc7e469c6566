//! Crash safety of publishing: SIGKILL at random points of a build and its
//! write, and a full disk, never leave a partial snapshot and never stop the
//! last good one from serving.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use blocksieve_format::{DecodeLimits, TrustedKey, decode, parse_header_unverified};
use blocksieve_publisher::internal::storage::{ListStore, LocalStorage};
use blocksieve_publisher::{Config, Publisher};
use blocksieve_publisher::{ListConfig, SourceConfig, SourceFormat};
use rand::{Rng as _, SeedableRng as _};

const BIN: &str = env!("CARGO_BIN_EXE_blocksieve-publisher");

fn feed(n: usize, salt: usize) -> String {
    (0..n)
        .map(|i| format!("http://host{i}.example/p/{salt}\n"))
        .collect()
}

fn write_config(dir: &Path, feed: &Path) -> PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "data_dir = {:?}\n[[lists]]\nname = \"crash\"\nsources = [{{ path = {:?}, format = \"urls\" }}]\n",
            dir.join("data"),
            feed
        ),
    )
    .unwrap();
    path
}

fn build(config: &Path) -> std::process::Child {
    Command::new(BIN)
        .args(["build", "--force", "--config"])
        .arg(config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn publisher")
}

/// Every build's snapshot on disk verifies and has its full hashes beside
/// it, the latest generation (the pointer's, or the one after it) loads
/// whole, and every kept generation does; returns the kept generations' versions.
fn check_disk(data_dir: &Path, list_dir: &Path, key: &TrustedKey) -> Vec<u64> {
    for entry in std::fs::read_dir(list_dir.join("builds")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(build) = name.strip_suffix(".snapshot") {
            let bytes = std::fs::read(&path).unwrap();
            let header = parse_header_unverified(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            decode(
                &bytes,
                std::slice::from_ref(key),
                &DecodeLimits::default(),
                header.created_at,
            )
            .unwrap_or_else(|e| panic!("partial or corrupt snapshot {name}: {e}"));
            let hashes = list_dir.join("builds").join(format!("{build}.hashes"));
            assert!(hashes.exists(), "{name} written before its hashes");
        }
    }
    let storage = std::sync::Arc::new(LocalStorage::open(data_dir).unwrap());
    let store = ListStore::open(storage, "crash", 5).unwrap();
    // What is published: the pointer, or a newer generation that verifies
    // when the build was killed between its manifest and the pointer's move
    // (`ListStore::head` follows it forward, and so does a restart).
    let latest = store
        .head(std::slice::from_ref(key))
        .unwrap()
        .expect("a latest generation");
    let pointer = store.latest().unwrap().expect("a latest pointer");
    assert!(
        latest.pointer.generation - pointer.pointer.generation <= 1,
        "the pointer is left more than one build behind: {pointer:?} vs {latest:?}"
    );
    let mut versions = Vec::new();
    let oldest = latest.pointer.generation.saturating_sub(4).max(1);
    for generation in oldest..=latest.pointer.generation {
        let loaded = store
            .load_generation(generation, std::slice::from_ref(key))
            .unwrap_or_else(|e| panic!("generation {generation} of {latest:?}: {e}"));
        versions.push(parse_header_unverified(&loaded.snapshot).unwrap().version);
    }
    assert_eq!(versions.last(), Some(&latest.pointer.version));
    versions
}

/// Temporary files under `dir` and its directories.
/// `Publisher::open` of a data directory this process just released.
/// Another test of this binary spawns processes meanwhile: a child between
/// its fork and its exec holds a copy of every descriptor, the data
/// directory's lock too, for that moment (`flock` locks belong to the
/// open file, and close-on-exec closes the copy only at the exec). So
/// `InUse` is waited out, for at most 10 s.
fn reopen(cfg: Config) -> Publisher {
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match Publisher::open(cfg.clone()) {
            Err(blocksieve_publisher::Error::InUse { .. }) if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            opened => return opened.unwrap(),
        }
    }
}

fn leftovers(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(leftovers(&path));
        } else if path.to_string_lossy().ends_with(".tmp") {
            found.push(path.display().to_string());
        }
    }
    found
}

#[test]
fn sigkill_during_builds_never_leaves_a_partial_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let feed_path = dir.path().join("feed.txt");
    std::fs::write(&feed_path, feed(40_000, 0)).unwrap();
    let config = write_config(dir.path(), &feed_path);
    let list_dir = dir.path().join("data/lists/crash");

    // One complete build: the last good snapshot, and how long a build takes.
    let started = Instant::now();
    assert!(build(&config).wait().unwrap().success());
    let full = started.elapsed();
    let cfg = Config::from_file(&config).unwrap();
    let key = Publisher::open(cfg.clone()).unwrap().public_key().clone();
    let first = check_disk(&dir.path().join("data"), &list_dir, &key);
    assert_eq!(first.len(), 1);

    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_c4a5);
    let (mut kept_old, mut got_new) = (0, 0);
    let mut served = first[0];
    for round in 1..=20 {
        std::fs::write(&feed_path, feed(40_000, round)).unwrap();
        let mut child = build(&config);
        // Kill anywhere from start-up to just past the end of a normal build.
        let delay = full.mul_f64(rng.gen_range(0.0..1.2));
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();

        // Restart: opening the data directory must find a complete, verifiable
        // snapshot, never a partial one, and clean up temporary files.
        let publisher = reopen(cfg.clone());
        let current = publisher.state().lists[0]
            .current
            .load_full()
            .expect("a snapshot after the crash");
        assert!(
            current.header.version >= served,
            "round {round}: went back in time"
        );
        if current.header.version > served {
            got_new += 1;
        } else {
            kept_old += 1;
        }
        served = current.header.version;
        let versions = check_disk(&dir.path().join("data"), &list_dir, &key);
        assert!(versions.contains(&served));
        // Anywhere in the data directory: the list's builds, its sources'
        // copies staged while read, their metadata, its history.
        let leftovers = leftovers(&dir.path().join("data"));
        assert!(
            leftovers.is_empty(),
            "round {round}: temporary files left: {leftovers:?}"
        );
    }
    eprintln!(
        "20/20 kills recovered (build {:?}): {kept_old} kept the previous snapshot, {got_new} had published the new one",
        full
    );
}

/// The window the kills above hit only now and then: a build stopped after
/// its generation's manifest was written, before the pointer moved. A
/// restart serves that generation, and the disk check follows it.
#[test]
fn regression_a_build_killed_before_the_pointer_moved_is_served_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let feed_path = dir.path().join("feed.txt");
    std::fs::write(&feed_path, feed(100, 0)).unwrap();
    let config = write_config(dir.path(), &feed_path);
    let list_dir = dir.path().join("data/lists/crash");
    assert!(build(&config).wait().unwrap().success());
    let pointer = std::fs::read(list_dir.join("latest")).unwrap();
    std::fs::write(&feed_path, feed(100, 1)).unwrap();
    assert!(build(&config).wait().unwrap().success());
    // The pointer as the killed build left it.
    std::fs::write(list_dir.join("latest"), &pointer).unwrap();

    let cfg = Config::from_file(&config).unwrap();
    let publisher = reopen(cfg);
    let served = publisher.state().lists[0].current.load_full().unwrap();
    let key = publisher.public_key().clone();
    let versions = check_disk(&dir.path().join("data"), &list_dir, &key);
    assert_eq!(versions.len(), 2);
    assert_eq!(
        served.header.version, versions[1],
        "the newer generation is served"
    );
}

#[tokio::test]
async fn disk_full_while_publishing_fails_cleanly_and_keeps_the_old_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // A 512 KiB tmpfs as the data directory (needs root; CI runs as root).
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "tmpfs"])
        .arg(&data)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED: cannot mount a tmpfs here (not root?)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(data.clone());

    let feed_path = dir.path().join("feed.txt");
    std::fs::write(&feed_path, feed(300, 0)).unwrap();
    let mut cfg = Config {
        data_dir: data.clone(),
        lists: vec![ListConfig::new(
            "full",
            vec![SourceConfig::file(&feed_path, SourceFormat::Urls)],
        )],
        ..Config::default()
    };
    cfg.schedule = "0 0 0 1 1 *".into();
    let publisher = Publisher::open(cfg.clone()).unwrap();
    let v1 = publisher.build_list(0).await.result.unwrap();

    // 30,000 entries need ~1 MiB of full hashes: more than the disk has.
    std::fs::write(&feed_path, feed(30_000, 1)).unwrap();
    let outcome = publisher.build_list(0).await;
    let err = outcome.result.unwrap_err().to_string();
    assert!(err.contains("No space left") || err.contains("i/o"), "{err}");
    let current = publisher.state().lists[0].current.load_full().unwrap();
    assert_eq!(current.header.version, v1, "the old snapshot keeps serving");

    // Nothing half-written is left, and a restart serves the old snapshot.
    let list_dir = data.join("lists/full");
    let names = leftovers(&list_dir);
    assert!(names.is_empty(), "{names:?}");
    drop(publisher);
    let reopened = reopen(cfg);
    assert_eq!(
        reopened.state().lists[0]
            .current
            .load()
            .as_ref()
            .unwrap()
            .header
            .version,
        v1
    );
}
