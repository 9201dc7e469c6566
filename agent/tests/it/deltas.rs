//! Following a list by signed deltas: every added entry found after each
//! delta, broken chains refused and replaced by the whole snapshot in the
//! same round, `410` and `404` answered by the snapshot, `304` with a
//! freshness record, the rebase past `max_additions_ratio`, and the chain
//! persisted beside its base across restarts.

use std::path::Path;
use std::time::Duration;

use axum::http::StatusCode;
use blocksieve_agent::{Agent, AgentBuilder, Error, ListUpdate};
use blocksieve_format::DeltaEnd;
use blocksieve_format::api::snapshot_etag;

use blocksieve_tests::fake::{FakePublisher, Served, Updates, unreachable_url};
use blocksieve_tests::snapshot::{Snap, delta, end_of, freshness, publisher_key, stranger_key, unix_now};

/// `count` distinct expressions tagged `tag`.
pub(super) fn exprs(tag: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{tag}-{i}.example/")).collect()
}

pub(super) fn refs(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}

/// The end of a version past the base (its snapshot is never downloaded
/// in these tests, so any hash stands for it).
pub(super) fn end(version: u64) -> DeltaEnd {
    DeltaEnd {
        version,
        body_sha256: [version as u8; 32],
    }
}

fn url(expression: &str) -> String {
    format!("http://{expression}")
}

/// Asserts that `report` updated `malware` from `previous` to `version`.
pub(super) fn assert_updated(report: &blocksieve_agent::UpdateReport, previous: u64, version: u64) {
    assert!(
        matches!(
            report.get("malware"),
            Some(&ListUpdate::Updated {
                previous: Some(p),
                version: v
            }) if p == previous && v == version
        ),
        "{report:?}"
    );
}

/// Whether the agent's local filters hit `expression`.
pub(super) fn found(agent: &Agent, expression: &str) -> bool {
    !agent.lookup_local(&url(expression)).unwrap().is_empty()
}

/// The deltas `deltas` as the publisher would serve them, `latest` the
/// last one's `to`.
pub(super) fn feed(deltas: Vec<(u64, Vec<u8>)>, latest: DeltaEnd) -> Updates {
    Updates::Deltas {
        deltas,
        latest_version: latest.version,
        latest_etag: snapshot_etag(latest.version, &latest.body_sha256),
    }
}

fn builder(fake: &FakePublisher) -> AgentBuilder {
    fake.agent_builder(&["malware"])
}

#[tokio::test]
async fn following_twenty_deltas_finds_every_added_entry_after_each() {
    let fake = FakePublisher::start().await;
    let base = exprs("base", 20);
    let bytes = Snap::new("malware", 1, &refs(&base)).encode();
    fake.serve("malware", Served::Snapshot(bytes.clone()));
    let agent = builder(&fake).max_additions_ratio(4.0).build().unwrap();
    agent.update().await.unwrap();

    let mut deltas = Vec::new();
    let mut added: Vec<String> = Vec::new();
    let mut from = end_of(&bytes);
    for v in 2..=21u64 {
        let fresh = exprs(&format!("v{v}"), (v % 4) as usize);
        deltas.push((from.version, delta("malware", from, end(v), &refs(&fresh))));
        fake.serve_updates("malware", feed(deltas.clone(), end(v)));
        from = end(v);
        let report = agent.update().await.unwrap();
        assert!(
            matches!(report.get("malware"), Some(ListUpdate::Updated { previous: Some(p), version }) if *p == v - 1 && *version == v),
            "{report:?}"
        );
        added.extend(fresh);
        for e in base.iter().chain(&added) {
            assert!(found(&agent, e), "{e} missed at version {v}");
        }
        let lookup = agent.lookup_local(&url(&base[0])).unwrap();
        assert_eq!(*lookup.snapshot_versions, [v]);
    }
    // One snapshot download; every later round asked for the deltas since
    // the version held, conditionally.
    assert_eq!(fake.snapshot_requests().len(), 1);
    let asked = fake.update_requests();
    assert_eq!(asked.len(), 20);
    assert_eq!(asked[0].path, "/v1/lists/malware/updates/1");
    assert_eq!(asked[19].path, "/v1/lists/malware/updates/20");
    assert_eq!(
        asked[0].if_none_match.as_deref(),
        Some(snapshot_etag(1, &end_of(&bytes).body_sha256).as_str())
    );
    let stats = agent.stats();
    assert_eq!(stats.deltas_applied, 20);
    assert_eq!(stats.delta_fallbacks, 0);
    assert!(stats.delta_bytes > 0);
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert_eq!(list.version, Some(21));
    assert_eq!(list.base_version, Some(1));
    assert_eq!(list.version_floor, Some(21));
    assert_eq!(list.additions, added.len());

    // The latest: an empty chain, unchanged.
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 21 })
    ));
}

/// A chain made from the end of version 1.
type ChainOf<'a> = Box<dyn Fn(DeltaEnd) -> Vec<u8> + 'a>;

/// A fake serving `malware` v1 (`base`) and an agent holding it.
pub(super) async fn on_v1(base: &[String]) -> (FakePublisher, Agent, DeltaEnd) {
    let fake = FakePublisher::start().await;
    let bytes = Snap::new("malware", 1, &refs(base)).encode();
    fake.serve("malware", Served::Snapshot(bytes.clone()));
    let agent = builder(&fake).max_additions_ratio(4.0).build().unwrap();
    agent.update().await.unwrap();
    (fake, agent, end_of(&bytes))
}

#[tokio::test]
async fn dropped_corrupt_replayed_and_reordered_deltas_are_replaced_by_the_snapshot_in_the_same_round() {
    let base = exprs("base", 10);
    let (a, b, c) = (exprs("a", 3), exprs("b", 3), exprs("c", 3));
    let everything: Vec<String> = [base.clone(), a.clone(), b.clone(), c.clone()].concat();
    let faults: Vec<(&str, ChainOf<'_>)> = vec![
        (
            "first dropped",
            Box::new(|_| {
                [
                    delta("malware", end(2), end(3), &refs(&b)),
                    delta("malware", end(3), end(4), &refs(&c)),
                ]
                .concat()
            }),
        ),
        (
            "middle dropped",
            Box::new(|v1| {
                [
                    delta("malware", v1, end(2), &refs(&a)),
                    delta("malware", end(3), end(4), &refs(&c)),
                ]
                .concat()
            }),
        ),
        (
            "replayed",
            Box::new(|v1| {
                let d2 = delta("malware", v1, end(2), &refs(&a));
                [d2.clone(), d2, delta("malware", end(2), end(3), &refs(&b))].concat()
            }),
        ),
        (
            "reordered",
            Box::new(|v1| {
                [
                    delta("malware", v1, end(2), &refs(&a)),
                    delta("malware", end(3), end(4), &refs(&c)),
                    delta("malware", end(2), end(3), &refs(&b)),
                ]
                .concat()
            }),
        ),
        (
            "corrupt",
            Box::new(|v1| {
                let mut chain = [
                    delta("malware", v1, end(2), &refs(&a)),
                    delta("malware", end(2), end(3), &refs(&b)),
                ]
                .concat();
                let at = chain.len() - 2;
                chain[at] ^= 0x40;
                chain
            }),
        ),
        (
            "forged",
            Box::new(|v1| {
                let mut d = delta("malware", v1, end(2), &refs(&a));
                let signature_at = d.len() - 64;
                d[signature_at] ^= 1;
                d
            }),
        ),
    ];
    for (what, chain) in faults {
        let (fake, agent, v1) = on_v1(&base).await;
        fake.serve_updates("malware", Updates::Fixed(chain(v1)));
        // The snapshot fails too: the state in use is kept whole.
        fake.serve("malware", Served::Status(StatusCode::SERVICE_UNAVAILABLE));
        let report = agent.update().await.unwrap();
        assert!(
            matches!(
                report.get("malware"),
                Some(ListUpdate::Failed {
                    kept_version: Some(1),
                    ..
                })
            ),
            "{what}: {report:?}"
        );
        assert_eq!(agent.snapshot_version("malware"), Some(1), "{what}");
        assert!(base.iter().all(|e| found(&agent, e)), "{what}");
        let status = agent.status();
        let list = status.list("malware").unwrap();
        assert!(
            matches!(
                list.last_delta_error,
                Some(Error::Delta { .. } | Error::DeltaMismatch { .. })
            ),
            "{what}: {:?}",
            list.last_delta_error
        );
        assert_eq!(agent.stats().delta_fallbacks, 1, "{what}");

        // The whole snapshot of version 4 is taken in the same round.
        let v4 = Snap::new("malware", 4, &refs(&everything)).encode();
        fake.serve("malware", Served::Snapshot(v4));
        let report = agent.update().await.unwrap();
        assert!(
            matches!(
                report.get("malware"),
                Some(ListUpdate::Updated {
                    previous: Some(1),
                    version: 4
                })
            ),
            "{what}: {report:?}"
        );
        assert!(everything.iter().all(|e| found(&agent, e)), "{what}");
        let stats = agent.stats();
        assert_eq!(stats.delta_fallbacks, 2, "{what}");
        assert_eq!(stats.deltas_applied, 0, "{what}");
        assert_eq!(stats.snapshots_applied, 2, "{what}");
        assert_eq!(fake.update_requests().len(), 2, "{what}");
    }
}

#[tokio::test]
async fn gone_and_an_old_publisher_without_the_route_are_answered_by_the_snapshot() {
    let base = exprs("base", 10);
    let more = exprs("more", 3);
    for updates in [Updates::Status(StatusCode::GONE), Updates::NoRoute] {
        let (fake, agent, _) = on_v1(&base).await;
        let expected = if matches!(updates, Updates::NoRoute) {
            404
        } else {
            410
        };
        fake.serve_updates("malware", updates);
        let v2 = Snap::new("malware", 2, &refs(&[base.clone(), more.clone()].concat())).encode();
        fake.serve("malware", Served::Snapshot(v2));
        let report = agent.update().await.unwrap();
        assert!(
            matches!(
                report.get("malware"),
                Some(ListUpdate::Updated {
                    previous: Some(1),
                    version: 2
                })
            ),
            "{report:?}"
        );
        assert!(more.iter().all(|e| found(&agent, e)));
        assert_eq!(fake.update_requests().len(), 1);
        assert_eq!(fake.snapshot_requests().len(), 2);
        let status = agent.status();
        let list = status.list("malware").unwrap();
        assert!(
            matches!(list.last_delta_error, Some(Error::Status { status, .. }) if status == expected),
            "{:?}",
            list.last_delta_error
        );
        assert_eq!(agent.stats().delta_fallbacks, 1);
        // Unchanged afterwards: the snapshot answers 304.
        let report = agent.update().await.unwrap();
        assert!(matches!(
            report.get("malware"),
            Some(ListUpdate::Unchanged { version: 2 })
        ));
    }
}

#[tokio::test]
async fn behind_is_a_failure_not_a_fallback() {
    let base = exprs("base", 10);
    let (fake, agent, _) = on_v1(&base).await;
    fake.serve_updates("malware", Updates::Status(StatusCode::SERVICE_UNAVAILABLE));
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Failed {
            kept_version: Some(1),
            ..
        })
    ));
    assert_eq!(fake.snapshot_requests().len(), 1);
    assert_eq!(agent.stats().delta_fallbacks, 0);
}

#[tokio::test]
async fn not_modified_with_a_freshness_record_makes_a_stale_list_fresh_and_others_are_ignored() {
    let fake = FakePublisher::start().await;
    let now = unix_now();
    let bytes = Snap::new("malware", 1, &["evil.example/"])
        .valid(now - 7200, now - 60)
        .encode();
    let v1 = end_of(&bytes);
    fake.serve("malware", Served::Snapshot(bytes));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    assert!(agent.status().is_stale());
    fake.serve_updates("malware", feed(Vec::new(), v1));

    let other_version = DeltaEnd { version: 2, ..v1 };
    let other_hash = DeltaEnd {
        body_sha256: [0; 32],
        ..v1
    };
    for (what, record) in [
        (
            "another version",
            freshness("malware", other_version, now + 3600, &publisher_key()),
        ),
        (
            "another hash",
            freshness("malware", other_hash, now + 3600, &publisher_key()),
        ),
        (
            "another list",
            freshness("phishing", v1, now + 3600, &publisher_key()),
        ),
        (
            "an untrusted key",
            freshness("malware", v1, now + 3600, &stranger_key()),
        ),
        ("garbage", "not-a-record".to_owned()),
    ] {
        fake.set_freshness("malware", Some(record));
        let report = agent.update().await.unwrap();
        if what == "another version" {
            // A trusted record for version 2 while version 1 is served: the
            // list is behind, and the round says so (the list kept).
            assert!(
                matches!(report.get("malware"), Some(ListUpdate::Failed { kept_version: Some(1), error })
                    if error.to_string().contains("names version 2: the publisher or a cache in front of it is behind")),
                "{what}: {report:?}"
            );
        } else {
            assert!(
                matches!(report.get("malware"), Some(ListUpdate::Unchanged { version: 1 })),
                "{what}"
            );
        }
        assert!(agent.status().is_stale(), "{what} made the list fresh");
        assert_eq!(agent.stats().freshness_records_applied, 0, "{what}");
    }
    assert!(
        fake.update_requests()
            .iter()
            .all(|r| r.if_none_match.as_deref() == Some(snapshot_etag(1, &v1.body_sha256).as_str()))
    );

    fake.set_freshness(
        "malware",
        Some(freshness("malware", v1, now + 3600, &publisher_key())),
    );
    let report = agent.update().await.unwrap();
    assert!(matches!(
        report.get("malware"),
        Some(ListUpdate::Unchanged { version: 1 })
    ));
    let status = agent.status();
    assert!(!status.is_stale());
    let list = status.list("malware").unwrap();
    let until = list
        .expires_at
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(until, now + 3600);
    assert_eq!(agent.stats().freshness_records_applied, 1);
    assert!(!agent.check_url("http://clean.example/").await.unwrap().is_stale());
}

#[tokio::test]
async fn a_freshness_record_on_the_chain_names_the_version_it_leads_to() {
    let fake = FakePublisher::start().await;
    let now = unix_now();
    let bytes = Snap::new("malware", 1, &["evil.example/"]).encode();
    let v1 = end_of(&bytes);
    fake.serve("malware", Served::Snapshot(bytes));
    let agent = fake.agent(&["malware"]);
    agent.update().await.unwrap();
    let d = delta("malware", v1, end(2), &["new.example/"]);
    fake.serve_updates("malware", feed(vec![(1, d)], end(2)));
    fake.set_freshness(
        "malware",
        Some(freshness("malware", end(2), now + 5 * 86_400, &publisher_key())),
    );
    agent.update().await.unwrap();
    assert_eq!(agent.stats().freshness_records_applied, 1);
    let until = agent.status().lists[0].expires_at.unwrap();
    assert_eq!(
        until.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs(),
        now + 5 * 86_400
    );
}

#[tokio::test]
async fn past_the_additions_ratio_the_next_round_takes_the_whole_snapshot() {
    let fake = FakePublisher::start().await;
    let base = exprs("base", 10);
    let bytes = Snap::new("malware", 1, &refs(&base)).encode();
    let v1 = end_of(&bytes);
    fake.serve("malware", Served::Snapshot(bytes));
    let agent = builder(&fake).max_additions_ratio(0.3).build().unwrap();
    agent.update().await.unwrap();
    let added = exprs("added", 4);
    fake.serve_updates(
        "malware",
        feed(vec![(1, delta("malware", v1, end(2), &refs(&added)))], end(2)),
    );
    agent.update().await.unwrap();
    assert_eq!(agent.status().lists[0].additions, 4);
    assert_eq!(fake.update_requests().len(), 1);

    // 4 additions over 10 entries: past 0.3, so the snapshot, not deltas.
    let all = [base.clone(), added.clone()].concat();
    fake.serve(
        "malware",
        Served::Snapshot(Snap::new("malware", 3, &refs(&all)).encode()),
    );
    assert_updated(&agent.update().await.unwrap(), 2, 3);
    assert_eq!(fake.update_requests().len(), 1);
    let snapshot_asks = fake.snapshot_requests();
    assert_eq!(snapshot_asks.len(), 2);
    // Deltas were applied: the base's ETag no longer names the version held.
    assert_eq!(snapshot_asks[1].if_none_match, None);
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert_eq!(
        (list.version, list.base_version, list.additions),
        (Some(3), Some(3), 0)
    );
    assert_eq!(agent.stats().rebases, 1);
    assert!(all.iter().all(|e| found(&agent, e)));
}

/// Past the ratio, a round asks for the whole snapshot; when that fails
/// (here `503`; also a snapshot over `max_snapshot_bytes`, a timeout, or
/// one a lagging cache serves older than the version the deltas reached),
/// the round still takes the deltas since the version held: entries listed
/// since are found, not answered "safe" until the snapshot route recovers.
#[tokio::test]
async fn a_rebase_whose_snapshot_fails_still_takes_the_deltas() {
    let fake = FakePublisher::start().await;
    let base = exprs("base", 10);
    let bytes = Snap::new("malware", 1, &refs(&base)).encode();
    let v1 = end_of(&bytes);
    fake.serve("malware", Served::Snapshot(bytes));
    let agent = builder(&fake).max_additions_ratio(0.3).build().unwrap();
    agent.update().await.unwrap();
    let added = exprs("added", 4);
    let first = delta("malware", v1, end(2), &refs(&added));
    fake.serve_updates("malware", feed(vec![(1, first.clone())], end(2)));
    agent.update().await.unwrap();
    assert_eq!(agent.status().lists[0].additions, 4);

    fake.serve("malware", Served::Status(StatusCode::SERVICE_UNAVAILABLE));
    let late = exprs("late", 2);
    let second = delta("malware", end(2), end(3), &refs(&late));
    fake.serve_updates("malware", feed(vec![(1, first), (2, second)], end(3)));
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Updated {
                previous: Some(2),
                version: 3
            })
        ),
        "{report:?}"
    );
    assert_eq!(fake.snapshot_requests().len(), 2);
    assert_eq!(fake.update_requests().len(), 2);
    assert!(late.iter().chain(&added).chain(&base).all(|e| found(&agent, e)));
    assert_eq!(agent.status().lists[0].additions, 6);
    // The snapshot's failure is counted all the same.
    assert_eq!(
        agent.stats().update_failures_by.http_status,
        1,
        "{:?}",
        agent.stats()
    );
    // Still past the ratio: the next round asks for the snapshot first.
    let _ = agent.update().await;
    assert_eq!(fake.snapshot_requests().len(), 3);
}

#[tokio::test]
async fn a_rebase_on_the_very_version_held_swaps_in_the_snapshot_without_additions() {
    let fake = FakePublisher::start().await;
    let base = exprs("base", 10);
    let bytes = Snap::new("malware", 1, &refs(&base)).encode();
    fake.serve("malware", Served::Snapshot(bytes.clone()));
    let agent = builder(&fake).max_additions_ratio(0.1).build().unwrap();
    agent.update().await.unwrap();
    // Version 2's snapshot, and the delta that leads to it.
    let v2_list = [base.clone(), exprs("two", 3)].concat();
    let v2 = Snap::new("malware", 2, &refs(&v2_list)).encode();
    let d = delta("malware", end_of(&bytes), end_of(&v2), &refs(&exprs("two", 3)));
    fake.serve_updates("malware", feed(vec![(1, d)], end_of(&v2)));
    agent.update().await.unwrap();
    assert_eq!(agent.status().lists[0].additions, 3);
    fake.serve("malware", Served::Snapshot(v2));
    let report = agent.update().await.unwrap();
    assert!(
        matches!(report.get("malware"), Some(ListUpdate::Unchanged { version: 2 })),
        "{report:?}"
    );
    let list = &agent.status().lists[0];
    assert_eq!((list.base_version, list.additions), (Some(2), 0));
    assert_eq!(agent.stats().rebases, 1);
    assert!(v2_list.iter().all(|e| found(&agent, e)));
}

#[tokio::test]
async fn a_ratio_of_zero_takes_the_whole_snapshot_at_a_version_that_adds_anything() {
    let fake = FakePublisher::start().await;
    let base = exprs("base", 10);
    let bytes = Snap::new("malware", 1, &refs(&base)).encode();
    fake.serve("malware", Served::Snapshot(bytes.clone()));
    let agent = builder(&fake).max_additions_ratio(0.0).build().unwrap();
    agent.update().await.unwrap();
    let v2_list = [base.clone(), exprs("two", 3)].concat();
    let v2 = Snap::new("malware", 2, &refs(&v2_list)).encode();
    let d = delta("malware", end_of(&bytes), end_of(&v2), &refs(&exprs("two", 3)));
    fake.serve_updates("malware", feed(vec![(1, d)], end_of(&v2)));
    fake.serve("malware", Served::Snapshot(v2));
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Updated {
                previous: Some(1),
                version: 2
            })
        ),
        "{report:?}"
    );
    // Asked for deltas, then took the snapshot in the same round: no
    // additions held at any time.
    assert_eq!(fake.update_requests().len(), 1);
    let list = &agent.status().lists[0];
    assert_eq!(
        (list.version, list.base_version, list.additions),
        (Some(2), Some(2), 0)
    );
    assert!(v2_list.iter().all(|e| found(&agent, e)));
}

fn cached(fake_url: &str, dir: &Path) -> Agent {
    Agent::builder(fake_url)
        .list("malware")
        .trusted_key(blocksieve_tests::snapshot::trusted())
        .cache_dir(dir)
        .build()
        .unwrap()
}

/// Persists `malware` v1 (`base`) and the deltas to v3 (`a`, then `b`)
/// into `dir`; returns the fake and v1's end.
async fn persist_chain(dir: &Path, base: &[String], a: &[String], b: &[String]) -> (FakePublisher, DeltaEnd) {
    let fake = FakePublisher::start().await;
    let bytes = Snap::new("malware", 1, &refs(base)).encode();
    let v1 = end_of(&bytes);
    fake.serve("malware", Served::Snapshot(bytes));
    let agent = cached(&fake.base_url, dir);
    agent.update().await.unwrap();
    let d2 = delta("malware", v1, end(2), &refs(a));
    fake.serve_updates("malware", feed(vec![(1, d2.clone())], end(2)));
    agent.update().await.unwrap();
    let d3 = delta("malware", end(2), end(3), &refs(b));
    fake.serve_updates("malware", feed(vec![(1, d2), (2, d3)], end(3)));
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(3));
    assert!(dir.join("malware.chain").is_file());
    (fake, v1)
}

#[tokio::test]
async fn a_restart_restores_the_base_and_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let (base, a, b) = (exprs("base", 10), exprs("a", 2), exprs("b", 2));
    persist_chain(dir.path(), &base, &a, &b).await;

    let agent = cached(&unreachable_url(), dir.path());
    assert_eq!(agent.snapshot_version("malware"), Some(3));
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert_eq!(
        (list.base_version, list.additions, list.version_floor),
        (Some(1), 4, Some(3))
    );
    assert!(list.last_storage_error.is_none());
    assert!(base.iter().chain(&a).chain(&b).all(|e| found(&agent, e)));
}

#[tokio::test]
async fn a_restart_over_a_corrupt_chain_restores_the_base_reports_it_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let (base, a, b) = (exprs("base", 10), exprs("a", 2), exprs("b", 2));
    let (fake, _) = persist_chain(dir.path(), &base, &a, &b).await;
    let chain_path = dir.path().join("malware.chain");
    let mut chain = std::fs::read(&chain_path).unwrap();
    let at = chain.len() / 2;
    chain[at] ^= 0xff;
    std::fs::write(&chain_path, chain).unwrap();

    let agent = cached(&fake.base_url, dir.path());
    assert_eq!(agent.snapshot_version("malware"), Some(1));
    let status = agent.status();
    let list = status.list("malware").unwrap();
    // The floor is what the restored bytes prove: the record (3) is not
    // signed, and trusting it past them would let a corrupt one freeze the
    // list.
    assert_eq!((list.additions, list.version_floor), (0, Some(1)));
    assert!(matches!(
        list.last_storage_error,
        Some(Error::CorruptCache { .. })
    ));
    assert!(base.iter().all(|e| found(&agent, e)));

    // The next round asks for the deltas since the base and catches up.
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Updated {
                previous: Some(1),
                version: 3
            })
        ),
        "{report:?}"
    );
    assert_eq!(
        fake.update_requests().last().unwrap().path,
        "/v1/lists/malware/updates/1"
    );
    assert!(base.iter().chain(&a).chain(&b).all(|e| found(&agent, e)));

    // The chain file lost: the base restored, the loss reported, and a
    // chain from the base forward taken (a step forward from what is held,
    // even if short of what the record named).
    let dir2 = tempfile::tempdir().unwrap();
    let (fake2, v1) = persist_chain(dir2.path(), &base, &a, &b).await;
    std::fs::remove_file(dir2.path().join("malware.chain")).unwrap();
    let agent = cached(&fake2.base_url, dir2.path());
    assert_eq!(agent.snapshot_version("malware"), Some(1));
    assert!(matches!(
        agent.status().lists[0].last_storage_error,
        Some(Error::KeptChainMissing {
            restored_version: 1,
            kept_version: 3,
            ..
        })
    ));
    fake2.serve_updates(
        "malware",
        feed(vec![(1, delta("malware", v1, end(2), &refs(&a)))], end(2)),
    );
    fake2.serve("malware", Served::Status(StatusCode::SERVICE_UNAVAILABLE));
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Updated {
                previous: Some(1),
                version: 2
            })
        ),
        "{report:?}"
    );
    assert!(base.iter().chain(&a).all(|e| found(&agent, e)));
}

/// A restart that lost the chain kept (its file gone) comes back on the
/// base, behind the version it held: its background updates start as a
/// cold start's do (here with no jitter), not after the warm start's (up
/// to 5 minutes while the base is fresh), during which the entries of the
/// lost deltas answered safe.
#[tokio::test]
async fn a_list_behind_what_was_kept_is_updated_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (base, a, b) = (exprs("base", 10), exprs("a", 2), exprs("b", 2));
    let (fake, _) = persist_chain(dir.path(), &base, &a, &b).await;
    std::fs::remove_file(dir.path().join("malware.chain")).unwrap();
    let agent = Agent::builder(&fake.base_url)
        .list("malware")
        .trusted_key(blocksieve_tests::snapshot::trusted())
        .cache_dir(dir.path())
        .initial_jitter(Duration::ZERO)
        .build()
        .unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(1));
    assert!(!a.iter().chain(&b).any(|e| found(&agent, e)));
    let before = fake.update_requests().len();
    let _updates = agent.start_updates().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while agent.snapshot_version("malware") != Some(3) {
        assert!(
            std::time::Instant::now() < deadline,
            "no update within 10 s: {} requests",
            fake.update_requests().len() - before
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(a.iter().chain(&b).all(|e| found(&agent, e)));
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn readers_checking_while_deltas_swap_in_never_miss_an_entry_of_the_version_they_saw() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // 90 additions over 30 entries stay within the ratio of 4.
    let base = exprs("base", 30);
    let per_version: Vec<Vec<String>> = (2..=31u64).map(|v| exprs(&format!("r{v}"), 3)).collect();
    let (fake, agent, v1) = runtime.block_on(on_v1(&base));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let checks = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for reader in 0..4usize {
            let (agent, stop, checks, base, per_version) = (&agent, &stop, &checks, &base, &per_version);
            scope.spawn(move || {
                let mut i = reader;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    i = (i + 7) % per_version.len();
                    // Added at version i + 2: listed in every version from there.
                    for (e, since) in per_version[i]
                        .iter()
                        .map(|e| (e, i as u64 + 2))
                        .chain([(&base[i % 30], 1)])
                    {
                        let lookup = agent.lookup_local(&url(e)).unwrap();
                        let seen = lookup.snapshot_versions[0];
                        assert!(
                            seen < since || !lookup.is_empty(),
                            "{e} (since {since}) missed at version {seen}"
                        );
                        checks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
        // Stops the readers however the updates end (a failed assertion
        // here included), so the scope can join them.
        let _stop = StopOnDrop(&stop);
        let mut deltas = Vec::new();
        let mut from = v1;
        for (i, added) in per_version.iter().enumerate() {
            let v = i as u64 + 2;
            deltas.push((from.version, delta("malware", from, end(v), &refs(added))));
            fake.serve_updates("malware", feed(deltas.clone(), end(v)));
            from = end(v);
            let report = runtime.block_on(agent.update()).unwrap();
            assert!(
                matches!(report.get("malware"), Some(ListUpdate::Updated { .. })),
                "{report:?}"
            );
        }
    });
    assert_eq!(agent.snapshot_version("malware"), Some(31));
    assert!(checks.into_inner() > 100);
}

/// An agent with a cache directory that took `malware` v1 (`base.example/`)
/// from a fake publisher: the directory, the publisher, the agent, v1's bytes.
async fn cached_on_v1() -> (tempfile::TempDir, FakePublisher, Agent, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakePublisher::start().await;
    let v1 = Snap::new("malware", 1, &["base.example/"]).encode();
    fake.serve("malware", Served::Snapshot(v1.clone()));
    let agent = cached(&fake.base_url, dir.path());
    agent.update().await.unwrap();
    (dir, fake, agent, v1)
}

/// A snapshot whose write failed (a full disk) left the older one on disk;
/// the chain of deltas on the new one, and its record naming the new one as
/// base, were written all the same, and the next start refused the older
/// snapshot as a rollback: the list came back with no data at all. Now the
/// unsaved snapshot is written again before any chain on it, and while it
/// cannot be, no chain is: the cache keeps the older, consistent state.
#[tokio::test]
async fn a_chain_is_not_saved_over_a_base_whose_write_failed() {
    let (dir, fake, agent, v1) = cached_on_v1().await;
    assert_eq!(std::fs::read(dir.path().join("malware.snapshot")).unwrap(), v1);

    // v2 by a whole snapshot, whose write fails: a directory where the
    // file goes (the rename fails, even for root). v1 is what a failed
    // write leaves on disk.
    let snapshot_path = dir.path().join("malware.snapshot");
    std::fs::remove_file(&snapshot_path).unwrap();
    std::fs::create_dir_all(snapshot_path.join("blocker")).unwrap();
    let v2 = Snap::new("malware", 2, &["base.example/", "two.example/"]).encode();
    fake.serve_updates("malware", Updates::Status(StatusCode::GONE));
    fake.serve("malware", Served::Snapshot(v2.clone()));
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    assert_eq!(agent.stats().persist_failures, 1);

    // v3 by a delta on v2, while v2 still cannot be written.
    let d3 = delta("malware", end_of(&v2), end(3), &["three.example/"]);
    fake.serve_updates("malware", feed(vec![(2, d3.clone())], end(3)));
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(3));
    assert!(!dir.path().join("malware.chain").exists());

    // The failed write left v1: a start restores it, not nothing (a start
    // on a copy of the files: the agent holds the directory).
    std::fs::remove_dir_all(&snapshot_path).unwrap();
    std::fs::write(&snapshot_path, &v1).unwrap();
    let copy = crate::cache_lock::copy_of(dir.path());
    let restarted = cached(&unreachable_url(), copy.path());
    assert_eq!(restarted.snapshot_version("malware"), Some(1));
    assert!(found(&restarted, "base.example/"));
    drop(restarted);

    // Once the disk takes it again, the next chain's round writes the base
    // first, then the whole chain on it.
    let d4 = delta("malware", end(3), end(4), &["four.example/"]);
    fake.serve_updates("malware", feed(vec![(2, d3), (3, d4)], end(4)));
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(4));
    assert_eq!(std::fs::read(&snapshot_path).unwrap(), v2);
    drop(agent);
    let restarted = cached(&unreachable_url(), dir.path());
    assert_eq!(restarted.snapshot_version("malware"), Some(4));
    assert!(
        ["base.example/", "two.example/", "three.example/", "four.example/"]
            .iter()
            .all(|e| found(&restarted, e))
    );
}

/// A chain whose write failed (a directory where the file goes) is written
/// at the next round, even one that brings nothing new: before, it waited
/// for the next delta, and a restart meanwhile came back on the base alone.
#[tokio::test]
async fn a_chain_whose_write_failed_is_written_at_the_next_round() {
    let (dir, fake, agent, v1) = cached_on_v1().await;

    let chain_path = dir.path().join("malware.chain");
    std::fs::create_dir_all(chain_path.join("blocker")).unwrap();
    let d2 = delta("malware", end_of(&v1), end(2), &["two.example/"]);
    fake.serve_updates("malware", feed(vec![(1, d2)], end(2)));
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    assert_eq!(agent.stats().persist_failures, 1);

    // The disk takes it again; the next round has nothing new.
    std::fs::remove_dir_all(&chain_path).unwrap();
    let report = agent.update().await.unwrap();
    assert!(
        matches!(report.get("malware"), Some(ListUpdate::Unchanged { version: 2 })),
        "{report:?}"
    );
    assert!(chain_path.is_file());
    drop(agent);
    let restarted = cached(&unreachable_url(), dir.path());
    assert_eq!(restarted.snapshot_version("malware"), Some(2));
    assert!(found(&restarted, "two.example/"));
}

/// Under `max_additions_ratio(0.0)` a verified chain that adds anything is
/// left for the whole snapshot; when that snapshot cannot be had (the
/// route failing, too large, timing out), the round still takes the chain,
/// as a rebase whose snapshot fails does: its additions were thrown away
/// every round, the version held stayed, and a URL listed since was
/// answered "safe" from a filter without it. Found by an adversarial
/// review.
#[tokio::test]
async fn under_a_ratio_of_zero_a_snapshot_that_fails_still_leaves_the_round_the_deltas() {
    let fake = FakePublisher::start().await;
    let base = exprs("base", 10);
    let bytes = Snap::new("malware", 1, &refs(&base)).encode();
    let v1 = end_of(&bytes);
    fake.serve("malware", Served::Snapshot(bytes));
    let agent = builder(&fake).max_additions_ratio(0.0).build().unwrap();
    agent.update().await.unwrap();

    fake.serve("malware", Served::Status(StatusCode::SERVICE_UNAVAILABLE));
    let added = exprs("added", 3);
    let d = delta("malware", v1, end(2), &refs(&added));
    fake.serve_updates("malware", feed(vec![(1, d)], end(2)));
    agent.update().await.unwrap();
    assert!(
        added.iter().all(|e| found(&agent, e)),
        "version {:?}: the verified additions were dropped",
        agent.snapshot_version("malware")
    );
}
