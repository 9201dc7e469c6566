//! A list followed by deltas for longer than one response holds, or in
//! more bytes than one snapshot: what a restart restores from the cache
//! directory is all the agent held, never its base alone.

use axum::http::StatusCode;
use blocksieve_agent::{Agent, ListUpdate, Verdict};

use super::deltas::{end, exprs, feed, refs};
use blocksieve_tests::fake::{FakePublisher, Served, unreachable_url};
use blocksieve_tests::snapshot::{Snap, delta, end_of};

fn cached(url: &str, dir: &std::path::Path) -> Agent {
    Agent::builder(url)
        .list("malware")
        .trusted_key(blocksieve_tests::snapshot::trusted())
        .cache_dir(dir)
        .build()
        .unwrap()
}

/// A rebase whose snapshot keeps failing (too large, timing out, a failing
/// route) takes the deltas meanwhile, past the 4,096 one response may hold.
/// The chain saved was refused at the next start ("chain holds more than
/// 4096 deltas") and the agent came back on its base, 4,099 versions older,
/// its rollback floor there too: a URL added since answered **safe**. The
/// chain kept since the base is now restored up to 16,384 deltas.
#[tokio::test]
async fn a_chain_grown_past_one_response_by_failed_rebases_is_restored_whole() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakePublisher::start().await;
    let base = exprs("base", 10);
    let bytes = Snap::new("malware", 1, &refs(&base)).encode();
    let v1 = end_of(&bytes);
    fake.serve("malware", Served::Snapshot(bytes));
    let agent = cached(&fake.base_url, dir.path());
    agent.update().await.unwrap();

    // 2,048 empty deltas (a list that changes little): a rebase is due.
    let mut deltas = Vec::new();
    let mut from = v1;
    for v in 2..=2049u64 {
        deltas.push((from.version, delta("malware", from, end(v), &[])));
        from = end(v);
    }
    fake.serve_updates("malware", feed(deltas.clone(), end(2049)));
    agent.update().await.unwrap();
    assert_eq!(agent.snapshot_version("malware"), Some(2049));

    // The snapshot route fails from now on; deltas keep coming, one of
    // them listing a new threat.
    fake.serve("malware", Served::Status(StatusCode::SERVICE_UNAVAILABLE));
    let late = "late-threat.example/";
    for v in 2050..=4100u64 {
        let added: &[&str] = if v == 3000 { &[late] } else { &[] };
        deltas.push((from.version, delta("malware", from, end(v), added)));
        from = end(v);
    }
    fake.serve_updates("malware", feed(deltas, end(4100)));
    fake.list_expressions("malware", &[late]);
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Updated { version: 4100, .. })
        ),
        "{report:?}"
    );
    let url = format!("http://{late}");
    assert!(matches!(agent.check_url(&url).await, Ok(Verdict::Unsafe { .. })));
    drop(agent);

    // A restart, the publisher unreachable.
    let agent = cached(&unreachable_url(), dir.path());
    let status = agent.status();
    let list = &status.lists[0];
    assert_eq!(list.version, Some(4100), "{list:?}");
    assert_eq!(list.version_floor, Some(4100), "{list:?}");
    assert!(list.last_storage_error.is_none(), "{list:?}");
    assert!(!agent.lookup_local(&url).unwrap().is_empty());
    let verdict = agent.check_url(&url).await;
    assert!(!matches!(verdict, Ok(Verdict::Safe { .. })), "{verdict:?}");
}

/// The chain file was read back at start within `max_snapshot_bytes`, the
/// limit of one snapshot, which nothing kept the chain under: a small list
/// with a limit sized to its snapshot passed it within a few hundred empty
/// deltas, and the restart came back on the base (a URL added since
/// **safe**). A kept chain now has its own bound.
#[tokio::test]
async fn a_chain_longer_than_one_snapshot_is_restored_whole() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakePublisher::start().await;
    let base = exprs("base", 100);
    let bytes = Snap::new("malware", 1, &refs(&base)).encode();
    let v1 = end_of(&bytes);
    fake.serve("malware", Served::Snapshot(bytes));
    let build = |url: &str| {
        Agent::builder(url)
            .list("malware")
            .trusted_key(blocksieve_tests::snapshot::trusted())
            .cache_dir(dir.path())
            .max_snapshot_bytes(64 * 1024)
            .build()
            .unwrap()
    };
    let agent = build(&fake.base_url);
    agent.update().await.unwrap();
    let late = "late-threat.example/";
    fake.list_expressions("malware", &[late]);
    let mut deltas = Vec::new();
    let mut from = v1;
    // One delta per round, as an agent following every build sees them,
    // the last five served (a delta window).
    for v in 2..=500u64 {
        let added: &[&str] = if v == 450 { &[late] } else { &[] };
        deltas.push((from.version, delta("malware", from, end(v), added)));
        from = end(v);
        let window = deltas[deltas.len().saturating_sub(5)..].to_vec();
        fake.serve_updates("malware", feed(window, end(v)));
        agent.update().await.unwrap();
    }
    let chain = std::fs::metadata(dir.path().join("malware.chain")).unwrap().len();
    assert!(chain > 64 * 1024, "{chain} bytes of chain");
    assert_eq!(agent.stats().rebases, 0);
    drop(agent);

    let agent = build(&unreachable_url());
    let status = agent.status();
    let list = &status.lists[0];
    assert_eq!(list.version, Some(500), "{list:?}");
    assert!(list.last_storage_error.is_none(), "{list:?}");
    let verdict = agent.check_url(&format!("http://{late}")).await;
    assert!(!matches!(verdict, Ok(Verdict::Safe { .. })), "{verdict:?}");
}
