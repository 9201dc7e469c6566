//! Crash safety of the cache directory. An agent killed with SIGKILL at
//! seeded random points while it persists snapshots (a real child process:
//! this test binary re-run as `crash::child_persists_snapshots_until_killed`),
//! and cache files torn at every length (what a non-atomic writer or a
//! broken disk would leave), never stop the next start: it loads a valid
//! snapshot or none, never an older one than it had confirmed, never
//! crashes, and removes the temporary files a killed write left.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use blocksieve_agent::{Agent, ListUpdate};
use blocksieve_format::{
    FilterKind, FullHash, KeyBits, PrefixFilter, SnapshotParams, encode, parse_header_unverified,
};
use rand::{Rng as _, SeedableRng as _};

use blocksieve_tests::fake::{FakePublisher, Served, unreachable_url};
use blocksieve_tests::snapshot::{Snap, publisher_key, trusted, unix_now};

/// Set in the child's environment: its cache directory.
const CHILD_DIR: &str = "BLOCKSIEVE_CRASH_CHILD_DIR";
/// Set in the child's environment: the first version it serves itself.
const CHILD_START: &str = "BLOCKSIEVE_CRASH_CHILD_START";
/// The child test, by its path in this binary.
const CHILD_TEST: &str = "crash::child_persists_snapshots_until_killed";

/// Snapshots of one fixed filter at successive versions: the filter is
/// built once, so the child spends its time fetching, verifying and
/// persisting rather than building.
struct Series {
    filter: PrefixFilter,
    keys: usize,
}

impl Series {
    /// 50,000 keys: a ~56 KiB snapshot, so each persist writes and fsyncs a
    /// real amount of data.
    fn new() -> Self {
        let mut keys: Vec<u64> = (0..50_000)
            .map(|i| {
                FullHash::of(format!("host{i}.example/").as_bytes())
                    .prefix()
                    .key()
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        Self {
            filter: PrefixFilter::build(FilterKind::BinaryFuse8, &keys).unwrap(),
            keys: keys.len(),
        }
    }

    fn encode(&self, version: u64) -> Vec<u8> {
        let now = unix_now();
        let params = SnapshotParams {
            list_name: "malware".to_owned(),
            version,
            created_at: now - 60,
            expires_at: now + 24 * 60 * 60,
            key_bits: KeyBits::Bits32,
            request_prefix_bits: 16,
            full_hash_count: self.keys as u64,
            measured_fpr: 0.004,
            zstd_level: 1,
        };
        encode(&params, &self.filter, &publisher_key()).unwrap()
    }
}

/// The child: an agent persisting to `$BLOCKSIEVE_CRASH_CHILD_DIR`, updated
/// from an in-process fake publisher that serves a new version each round,
/// forever. Prints `ready <version loaded from the cache>`, then `persisted
/// <version>` after each update has returned (snapshot and record written).
/// Without the variable (e.g. `cargo test -- --ignored`) it does nothing.
#[test]
#[ignore = "the child process of sigkill_while_persisting_never_leaves_an_unloadable_cache"]
fn child_persists_snapshots_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let start: u64 = std::env::var(CHILD_START).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let series = Series::new();
        let fake = FakePublisher::start().await;
        let agent = fake.agent_builder(&["malware"]).cache_dir(&dir).build().unwrap();
        println!("\nready {}", agent.snapshot_version("malware").unwrap_or(0));
        // A safety net: should the parent die without killing us, stop.
        let give_up = Instant::now() + Duration::from_secs(60);
        for version in start.. {
            if Instant::now() > give_up {
                break;
            }
            fake.serve("malware", Served::Snapshot(series.encode(version)));
            let report = agent.update().await.unwrap();
            assert!(
                matches!(report.get("malware"), Some(ListUpdate::Updated { .. })),
                "{report:?}"
            );
            assert_eq!(agent.stats().persist_failures, 0);
            println!("persisted {version}");
        }
    });
}

/// Kills the child if the parent test fails before it does.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The child's standard output, line by line, as it comes.
fn lines_of(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

/// The version of the snapshot file and of the record, as they lie on disk.
fn on_disk(dir: &Path) -> (Option<u64>, Option<u64>) {
    let snapshot = std::fs::read(dir.join("malware.snapshot"))
        .ok()
        .and_then(|b| parse_header_unverified(&b).ok())
        .map(|h| h.version);
    let record = std::fs::read(dir.join("malware.record.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["version"].as_u64());
    (snapshot, record)
}

/// A restarted agent on `dir` with the publisher unreachable: what it loads
/// is what the cache alone gives it.
fn restart(dir: &Path) -> Agent {
    Agent::builder(unreachable_url())
        .list("malware")
        .trusted_key(trusted())
        .cache_dir(dir)
        .build()
        .unwrap()
}

#[test]
fn sigkill_while_persisting_never_leaves_an_unloadable_cache() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_a6e7);
    // The newest version a start has loaded: never go below it.
    let mut confirmed = 0u64;
    let (mut mid_write, mut between, mut between_rounds, mut persisted_total) = (0, 0, 0, 0);
    let started = Instant::now();
    for round in 1..=20 {
        let mut child = KillOnDrop(
            Command::new(&exe)
                .args([
                    CHILD_TEST,
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_DIR, dir.path())
                .env(CHILD_START, (confirmed + 1).to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let lines = lines_of(&mut child.0);
        let deadline = Instant::now() + Duration::from_secs(120);
        let ready = loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let line = lines.recv_timeout(wait).expect("the child did not start");
            // libtest may print its "test … ... " on the same line.
            if let Some((_, v)) = line.rsplit_once("ready ") {
                break v.parse::<u64>().unwrap();
            }
        };
        assert_eq!(
            ready, confirmed,
            "round {round}: the child loaded another version"
        );
        // Kill somewhere in its persist loop: a few to a few dozen rounds in.
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..400)));
        child.0.kill().unwrap(); // SIGKILL
        child.0.wait().unwrap();
        let reported: Vec<u64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("persisted ").map(|v| v.parse().unwrap()))
            .collect();
        persisted_total += reported.len();
        let last_reported = reported.last().copied().unwrap_or(confirmed);

        // Where did the kill land?
        let left = temporaries(dir.path());
        let (snapshot_version, record_version) = on_disk(dir.path());
        if !left.is_empty() {
            mid_write += 1;
        } else if snapshot_version > record_version {
            between += 1;
        } else {
            between_rounds += 1;
        }

        // Restart: a valid snapshot or none, never older than what an update
        // had reported persisted, at most the one being written when killed.
        let agent = restart(dir.path());
        let loaded = agent.snapshot_version("malware").unwrap_or(0);
        assert!(
            loaded == last_reported || loaded == last_reported + 1,
            "round {round}: loaded {loaded}, last persisted {last_reported} (on disk: {snapshot_version:?}, record {record_version:?}, left {left:?})"
        );
        let stats = agent.stats();
        assert_eq!(
            stats.cache_files_quarantined, 0,
            "round {round}: an atomic write left a corrupt file"
        );
        let floor = agent.status().list("malware").unwrap().version_floor;
        assert_eq!(floor, (loaded > 0).then_some(loaded), "round {round}");
        assert!(
            temporaries(dir.path()).is_empty(),
            "round {round}: temporary files not removed: {left:?}"
        );
        confirmed = loaded;
    }
    assert!(confirmed > 0, "no snapshot was ever persisted");
    eprintln!(
        "20/20 kills recovered in {:?}: {mid_write} mid-write (temporary file left and removed), \
         {between} between snapshot and record, {between_rounds} between persists; \
         {persisted_total} persists completed, final version {confirmed}",
        started.elapsed()
    );
}

/// `v1` persisted through a real update, `v2`'s snapshot and record bytes.
async fn persisted_v1_and_v2_bytes(dir: &Path) -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let now = unix_now();
    let fake = FakePublisher::start().await;
    let expressions: Vec<String> = (0..20).map(|i| format!("evil{i}.example/")).collect();
    let refs: Vec<&str> = expressions.iter().map(String::as_str).collect();
    let agent = fake.agent_builder(&["malware"]).cache_dir(dir).build().unwrap();
    let mut files = Vec::new();
    for version in [1, 2] {
        fake.serve_snapshot(&Snap::new("malware", version, &refs).valid(now - 60, now + 3600));
        agent.update().await.unwrap();
        files.push(std::fs::read(dir.join("malware.snapshot")).unwrap());
        files.push(std::fs::read(dir.join("malware.record.json")).unwrap());
    }
    let [s1, r1, s2, r2] = <[Vec<u8>; 4]>::try_from(files).unwrap();
    (s1, r1, s2, r2)
}

#[tokio::test]
async fn torn_cache_files_at_every_length_load_a_valid_snapshot_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let (s1, r1, s2, r2) = persisted_v1_and_v2_bytes(dir.path()).await;
    let put = |name: &str, bytes: &[u8]| std::fs::write(dir.path().join(name), bytes).unwrap();
    let clear = || {
        for e in std::fs::read_dir(dir.path()).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
    };
    let mut starts = 0;

    // v2's snapshot written in place over v1 and torn at every length, v1's
    // record still there: v2 only when whole, else nothing (quarantined),
    // and the floor never drops below v1.
    for len in 0..=s2.len() {
        clear();
        put("malware.snapshot", &s2[..len]);
        put("malware.record.json", &r1);
        let agent = restart(dir.path());
        starts += 1;
        let whole = len == s2.len();
        assert_eq!(agent.snapshot_version("malware"), whole.then_some(2), "len {len}");
        let floor = agent.status().list("malware").unwrap().version_floor;
        assert_eq!(floor, Some(if whole { 2 } else { 1 }), "len {len}");
        assert_eq!(
            agent.stats().cache_files_quarantined,
            u64::from(!whole),
            "len {len}"
        );
    }

    // v2's record torn at every length after its snapshot: v2 loads, the
    // torn record is quarantined unless whole, the floor is v2 either way.
    for len in 0..=r2.len() {
        clear();
        put("malware.snapshot", &s2);
        put("malware.record.json", &r2[..len]);
        let agent = restart(dir.path());
        starts += 1;
        assert_eq!(agent.snapshot_version("malware"), Some(2), "len {len}");
        assert_eq!(agent.status().list("malware").unwrap().version_floor, Some(2));
    }

    // Killed while writing v2's temporary file (the real writer's only
    // crash window): v1 loads and the partial file is removed.
    for len in (0..=s2.len()).step_by(7) {
        clear();
        put("malware.snapshot", &s1);
        put("malware.record.json", &r1);
        put("malware.snapshot.tmp-4242-0", &s2[..len]);
        let agent = restart(dir.path());
        starts += 1;
        assert_eq!(agent.snapshot_version("malware"), Some(1), "len {len}");
        assert_eq!(agent.stats().cache_files_quarantined, 0);
        assert!(temporaries(dir.path()).is_empty());
    }
    eprintln!(
        "{starts} starts over torn files ({} + {} byte files): each loaded a valid snapshot or none",
        s2.len(),
        r2.len()
    );
}
