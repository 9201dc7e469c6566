//! 64 reader threads check URLs while snapshots swap continuously: no
//! reader waits for the updater, every answer is exactly what the old or the
//! new snapshot says, and no listed URL is ever missed.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use blocksieve_format::{DecodeLimits, canonicalize, decode};

use blocksieve_tests::fake::FakePublisher;
use blocksieve_tests::snapshot::{Snap, trusted, unix_now};

const READERS: usize = 64;
/// How long readers check at least, and the swaps they must see over it
/// at least. On a loaded machine (other builds beside the tests) the
/// updater can make fewer swaps in that time: the run goes on until it
/// has, up to [`RUN_AT_MOST`], so the test is about swaps, not speed.
const RUN_FOR: Duration = Duration::from_secs(2);
const MIN_SWAPS: u64 = 10;
const RUN_AT_MOST: Duration = Duration::from_secs(60);

fn hosts(prefix: &str) -> Vec<String> {
    (0..20).map(|i| format!("{prefix}{i}.example/")).collect()
}

#[test]
fn sixty_four_readers_never_block_and_always_see_the_old_or_the_new_list() {
    let _alone = crate::cpu_bound();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let common = hosts("common");
    let only_odd = hosts("odd");
    let only_even = hosts("even");
    let listed = |odd: bool| -> Vec<String> {
        let mut v = common.clone();
        v.extend(if odd { only_odd.clone() } else { only_even.clone() });
        v
    };
    let snap = |version: u64| {
        let exprs = listed(version % 2 == 1);
        let refs: Vec<&str> = exprs.iter().map(String::as_str).collect();
        let now = unix_now();
        // `Snap` borrows the list name only; the expressions are hashed now.
        Snap::new("malware", version, &refs)
            .valid(now - 60, now + 86_400)
            .encode()
    };

    // What each snapshot parity answers for each URL, from the decoded
    // filters themselves (so filter false positives are expected too).
    let urls: Vec<String> = common
        .iter()
        .chain(&only_odd)
        .chain(&only_even)
        .map(|h| format!("http://{h}some/page"))
        .chain((0..40).map(|i| format!("http://clean{i}.example/x")))
        .collect();
    let expected: Vec<Vec<bool>> = [snap(2), snap(1)]
        .iter()
        .map(|bytes| {
            let s = decode(bytes, &[trusted()], &DecodeLimits::default(), unix_now()).unwrap();
            urls.iter()
                .map(|u| {
                    canonicalize(u)
                        .unwrap()
                        .expressions()
                        .any(|e| s.probably_contains(&e.full_hash()))
                })
                .collect()
        })
        .collect();
    // No false negatives by construction: every listed URL hits.
    for (i, u) in urls.iter().enumerate() {
        if u.contains("common") || u.contains("odd") {
            assert!(expected[1][i], "{u}");
        }
        if u.contains("common") || u.contains("even") {
            assert!(expected[0][i], "{u}");
        }
    }

    let (fake, agent) = runtime.block_on(async {
        let fake = FakePublisher::start().await;
        fake.serve("malware", blocksieve_tests::fake::Served::Snapshot(snap(1)));
        let agent = fake.agent(&["malware"]);
        agent.update().await.unwrap();
        (fake, agent)
    });

    let stop = AtomicBool::new(false);
    let swaps = AtomicU64::new(0);
    let (stop, swaps, agent_ref, fake_ref, urls_ref, expected_ref) =
        (&stop, &swaps, &agent, &fake, &urls, &expected);
    let handle = runtime.handle().clone();
    let (results, swaps) = std::thread::scope(|scope| {
        let updater = scope.spawn(move || {
            let mut version = 1;
            while !stop.load(Ordering::Relaxed) {
                version += 1;
                fake_ref.serve("malware", blocksieve_tests::fake::Served::Snapshot(snap(version)));
                let report = handle.block_on(agent_ref.update()).unwrap();
                assert!(report.is_complete(), "{report:?}");
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        });
        let readers: Vec<_> = (0..READERS)
            .map(|r| {
                scope.spawn(move || {
                    let mut checks = 0u64;
                    let mut slowest = Duration::ZERO;
                    let mut versions = BTreeSet::new();
                    let mut i = r;
                    while !stop.load(Ordering::Relaxed) {
                        i = (i + 1) % urls_ref.len();
                        let started = Instant::now();
                        let local = agent_ref.lookup_local(&urls_ref[i]).unwrap();
                        slowest = slowest.max(started.elapsed());
                        let version = local.snapshot_versions[0];
                        let parity = (version % 2) as usize;
                        assert_eq!(
                            !local.is_empty(),
                            expected_ref[parity][i],
                            "{} under version {version}",
                            urls_ref[i]
                        );
                        versions.insert(version);
                        checks += 1;
                        if checks.is_multiple_of(50) {
                            // Leave the two cores some room for the updater.
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    (checks, slowest, versions)
                })
            })
            .collect();
        let started = Instant::now();
        std::thread::sleep(RUN_FOR);
        while swaps.load(Ordering::Relaxed) < MIN_SWAPS && started.elapsed() < RUN_AT_MOST {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        updater.join().unwrap();
        let results: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        (results, swaps.load(Ordering::Relaxed))
    });

    assert!(swaps >= MIN_SWAPS, "only {swaps} swaps in {RUN_AT_MOST:?}");
    let mut all_versions: BTreeSet<u64> = BTreeSet::new();
    for (checks, slowest, versions) in &results {
        assert!(*checks >= 100, "a reader made only {checks} checks");
        // A lookup is a few hash probes and takes no lock the updater holds.
        // Descheduled among 64 threads on two busy cores it can still wait
        // for the CPU, so the bound is generous: it catches a reader stuck
        // behind a download or a swap, not scheduling noise.
        assert!(*slowest < Duration::from_secs(2), "slowest lookup {slowest:?}");
        all_versions.extend(versions);
    }
    assert!(all_versions.len() >= 5, "readers saw versions {all_versions:?}");
    drop(agent);
    drop(fake);
}
