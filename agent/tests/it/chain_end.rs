//! A delta chain that verifies and links but stops short of the version
//! its response names (a cache that cut it at a delta boundary): what it
//! adds is in use before the whole snapshot is asked for, and stays when
//! the snapshot fails too.

use axum::http::StatusCode;
use blocksieve_agent::{Error, ListUpdate};

use super::deltas::{assert_updated, end, exprs, feed, found, on_v1, refs};
use blocksieve_tests::fake::Served;
use blocksieve_tests::snapshot::{Snap, delta};

#[tokio::test]
async fn a_chain_cut_short_is_swapped_in_before_the_snapshot_and_kept_when_it_fails() {
    let base = exprs("base", 10);
    let (a, b) = (exprs("a", 3), exprs("b", 3));
    let (fake, agent, v1) = on_v1(&base).await;
    // A chain to version 2 where the response names version 3 (a cache
    // that cut it at a delta boundary), and a failing snapshot route.
    let to_v2 = delta("malware", v1, end(2), &refs(&a));
    fake.serve_updates("malware", feed(vec![(1, to_v2)], end(3)));
    fake.serve("malware", Served::Status(StatusCode::SERVICE_UNAVAILABLE));
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Failed {
                kept_version: Some(2),
                ..
            })
        ),
        "{report:?}"
    );
    assert_eq!(agent.snapshot_version("malware"), Some(2));
    assert!(base.iter().chain(&a).all(|e| found(&agent, e)));
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert!(
        matches!(
            list.last_delta_error,
            Some(Error::DeltaChainShort { ends_at: 2, .. })
        ),
        "{:?}",
        list.last_delta_error
    );
    let stats = agent.stats();
    assert_eq!((stats.deltas_applied, stats.delta_fallbacks), (1, 1), "{stats:?}");
    assert_eq!(stats.update_failures_by.http_status, 1, "{stats:?}");
    assert_eq!(fake.snapshot_requests().len(), 2);

    // The next round asks from version 2; the snapshot of version 3 answers
    // the chain cut short again.
    let everything: Vec<String> = [base.clone(), a.clone(), b.clone()].concat();
    fake.serve(
        "malware",
        Served::Snapshot(Snap::new("malware", 3, &refs(&everything)).encode()),
    );
    assert_updated(&agent.update().await.unwrap(), 2, 3);
    assert!(everything.iter().all(|e| found(&agent, e)));
    let asked: Vec<String> = fake.update_requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        asked,
        ["/v1/lists/malware/updates/1", "/v1/lists/malware/updates/2"]
    );
}
