//! Builders as real processes on one object store (moto), one of them
//! killed (SIGKILL) at random points of its builds and publishes while the
//! other keeps publishing: no generation is torn or lost, `latest` always
//! names a generation that loads whole, garbage is removed by retention,
//! and building resumes. The feed changes all along, so that every build
//! publishes (an unchanged list publishes nothing).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blocksieve_format::TrustedKey;
use blocksieve_publisher::internal::storage::{
    ListStore, ObjectStorage, Storage, generate_signing_key, write_key_pair,
};
use blocksieve_tests::KillOnDrop;
use blocksieve_tests::moto::Moto;
use rand::{Rng as _, SeedableRng as _};

const BIN: &str = env!("CARGO_BIN_EXE_blocksieve-publisher");
const KEEP: u64 = 5;

/// A builder's configuration: its own data directory, the shared key, a
/// build every second and a 2-second lease.
fn write_config(dir: &Path, key: &Path, feed: &Path, moto: &Moto) -> std::path::PathBuf {
    let options: String = moto
        .store_options()
        .iter()
        .map(|(k, v)| format!("{k} = {v:?}\n"))
        .collect();
    let text = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\nsigning_key = {:?}\nrole = \"builder\"\n\
         schedule = \"* * * * * *\"\nlease_s = 2\nreplica_poll_s = 1\nkeep_versions = {KEEP}\n\
         store = {:?}\n\n[store_options]\n{options}\n\
         [[lists]]\nname = \"crash\"\nsources = [{{ path = {:?}, format = \"urls\" }}]\n",
        dir.join("data"),
        key,
        moto.store_url("crash"),
        feed
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A builder process, killed when dropped (a failed assertion left the
/// survivor running).
fn builder(config: &Path, log: &Path) -> KillOnDrop {
    KillOnDrop(
        Command::new(BIN)
            .args(["serve", "--config"])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("spawn publisher"),
    )
}

/// The latest generation loads whole, and so does every kept one below
/// it; returns the latest generation.
fn check_store(store: &ListStore, key: &TrustedKey, when: &str) -> u64 {
    let Some(latest) = store.latest().unwrap() else {
        return 0;
    };
    let g = latest.pointer.generation;
    for generation in g.saturating_sub(KEEP - 1).max(1)..=g {
        if let Err(e) = store.load_generation(generation, std::slice::from_ref(key)) {
            // A kept generation below the latest may have been pruned by a
            // publish after the pointer was read; the latest never is.
            let now = store.latest().unwrap().unwrap().pointer.generation;
            assert!(
                generation != g && now >= generation + KEEP,
                "{when}: generation {generation} (latest {g}) does not load: {e}"
            );
        }
    }
    g
}

async fn wait_for_generation(store: &ListStore, key: &TrustedKey, past: u64, within: Duration) -> u64 {
    let started = Instant::now();
    loop {
        let g = check_store(store, key, "waiting");
        if g > past {
            return g;
        }
        assert!(
            started.elapsed() < within,
            "no generation after {past} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_builders_leave_no_torn_or_lost_generation_and_building_resumes() {
    let Some(moto) = Moto::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("signing.key");
    let signing = generate_signing_key();
    write_key_pair(&signing, &key_path).unwrap();
    let key = signing.public_key().clone();
    let feed = dir.path().join("feed.txt");
    let lines: String = (0..20_000)
        .map(|i| format!("http://host{i}.example/p\n"))
        .collect();
    std::fs::write(&feed, &lines).unwrap();
    let (dir_a, dir_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&dir_a).unwrap();
    std::fs::create_dir_all(&dir_b).unwrap();
    let config_a = write_config(&dir_a, &key_path, &feed, &moto);
    let config_b = write_config(&dir_b, &key_path, &feed, &moto);

    let storage: Arc<dyn Storage> =
        Arc::new(ObjectStorage::s3(&moto.store_url("crash"), &moto.store_options()).unwrap());
    let store = ListStore::open(storage.clone(), "crash", KEEP as usize).unwrap();

    // A build of an unchanged feed publishes nothing: the feed gains a
    // line every 250 ms (written whole, then renamed into place), so that
    // every build publishes a generation.
    let changing = {
        let (feed, mut lines) = (feed.clone(), lines);
        tokio::spawn(async move {
            for n in 0.. {
                tokio::time::sleep(Duration::from_millis(250)).await;
                lines += &format!("http://more{n}.example/p\n");
                let next = feed.with_extension("next");
                std::fs::write(&next, &lines).unwrap();
                std::fs::rename(&next, &feed).unwrap();
            }
        })
    };
    let mut survivor = builder(&config_b, &dir_b.join("log"));
    let mut generation = wait_for_generation(&store, &key, 0, Duration::from_secs(60)).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_b1d5);
    for round in 1..=20 {
        let mut victim = builder(&config_a, &dir_a.join(format!("log-{round}")));
        // Anywhere from start-up through several builds and publishes.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(200..3_000))).await;
        victim.kill().unwrap(); // SIGKILL
        victim.wait().unwrap();
        let now = check_store(&store, &key, &format!("round {round}"));
        assert!(
            now >= generation,
            "round {round}: latest went back from {generation} to {now}"
        );
        generation = now;
    }
    // Building resumes: new generations within a few lease periods.
    let resumed = wait_for_generation(&store, &key, generation, Duration::from_secs(30)).await;
    let resumed = wait_for_generation(&store, &key, resumed, Duration::from_secs(30)).await;
    survivor.kill().unwrap();
    survivor.wait().unwrap();
    changing.abort();

    // No generation lost: every generation from the oldest kept to the
    // latest has its manifest, and they chain by parent.
    let latest = store.latest().unwrap().unwrap().pointer.generation;
    assert!(latest >= resumed);
    let oldest = latest - (KEEP - 1);
    let mut kept_builds = std::collections::BTreeSet::new();
    let mut oldest_version = u64::MAX;
    for g in oldest..=latest {
        let manifest = store.manifest(g, std::slice::from_ref(&key)).unwrap();
        assert_eq!(manifest.parent, Some(g - 1));
        store.load_generation(g, std::slice::from_ref(&key)).unwrap();
        oldest_version = oldest_version.min(manifest.version);
        kept_builds.insert(manifest.build);
    }
    // Garbage removed: older manifests are gone, and every build object
    // left is a stored generation's or newer than all of them (a build
    // under way when its builder was killed, removed by a later
    // retention). The survivor was killed too, maybe between its last
    // pointer move and that publish's retention: one generation more may
    // still be stored, with its objects.
    let manifests = storage.list("lists/crash/generations").unwrap();
    assert!(manifests.len() as u64 <= KEEP + 1, "{manifests:?}");
    if let Ok(manifest) = store.manifest(oldest - 1, std::slice::from_ref(&key)) {
        oldest_version = oldest_version.min(manifest.version);
        kept_builds.insert(manifest.build);
    }
    let objects = storage.list("lists/crash/builds").unwrap();
    let mut unreferenced = 0;
    for object in &objects {
        let name = object.rsplit('/').next().unwrap();
        let build = name.rsplit_once('.').unwrap().0;
        if !kept_builds.contains(build) {
            unreferenced += 1;
            let version: u64 = build.split('-').next().unwrap().parse().unwrap();
            assert!(version >= oldest_version, "garbage {object} outlived retention");
        }
    }
    // What the killed builder got done, from its logs.
    let mut logs = String::new();
    for round in 1..=20 {
        logs += &std::fs::read_to_string(dir_a.join(format!("log-{round}"))).unwrap_or_default();
    }
    let count = |text: &str| logs.matches(text).count();
    eprintln!(
        "killed builder: {} publishes, {} builds skipped (lease held), {} superseded, {} pointers rolled forward",
        count("published snapshot"),
        count("another builder builds this list now"),
        count("superseded:"),
        count("rolled the latest pointer forward")
    );
    eprintln!(
        "20/20 kills: {latest} generations, none torn or lost; {} build objects stored, {unreferenced} unreferenced and newer than the kept generations",
        objects.len()
    );
}
