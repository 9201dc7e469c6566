//! Two builders on one object store (moto): one whose fetch outlasts its
//! lease while the other publishes newer content. The stalled build must
//! not publish its older content over the newer generation, nor keep it
//! as the sources' last good content. Its two feeds serve `store_races`
//! too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use blocksieve_format::FullHash;
use blocksieve_publisher::internal::storage::{generate_signing_key, write_key_pair};
use blocksieve_publisher::{Config, Error, Publisher, SourceConfig, SourceFormat};
use blocksieve_tests::config;
use blocksieve_tests::moto::Moto;
use tokio::sync::Notify;

/// Two feeds: `s1` (its content set by the test, or failing) and `s2`
/// (fixed), whose next request can be held until released.
#[derive(Default)]
pub(crate) struct Feed {
    pub(crate) s1: std::sync::Mutex<String>,
    pub(crate) s1_fails: AtomicBool,
    pub(crate) s1_hits: AtomicUsize,
    pub(crate) hold_s2: AtomicBool,
    pub(crate) s2_held: AtomicUsize,
    pub(crate) release: Notify,
}

pub(crate) async fn s1(State(feed): State<Arc<Feed>>) -> (StatusCode, String) {
    feed.s1_hits.fetch_add(1, Ordering::SeqCst);
    if feed.s1_fails.load(Ordering::SeqCst) {
        return (StatusCode::INTERNAL_SERVER_ERROR, "down".to_owned());
    }
    (StatusCode::OK, feed.s1.lock().unwrap().clone())
}

pub(crate) async fn s2(State(feed): State<Arc<Feed>>) -> String {
    if feed.hold_s2.swap(false, Ordering::SeqCst) {
        let released = feed.release.notified();
        feed.s2_held.fetch_add(1, Ordering::SeqCst);
        released.await;
    }
    (0..40)
        .map(|i| format!("http://second-{i}.example/p\n"))
        .collect()
}

pub(crate) const X: &str = "x-added.example/p";

/// The version `p` serves, and whether it lists `X`.
pub(crate) fn serves_x(p: &Publisher) -> (u64, bool) {
    let served = p.state().lists[0].current.load_full().unwrap();
    let listed = served.hashes.binary_search(&FullHash::of(X.as_bytes())).is_ok();
    (served.header.version, listed)
}

/// Builder A fetches `s1` (without X) and stalls on `s2` past its 1-second
/// lease; builder B takes the lease, fetches `s1` now listing X and
/// publishes it. A's build then ends superseded: nothing published, and
/// its older copy of `s1` not kept, so that when `s1` fails B's rebuild
/// keeps X from its own last good copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_whose_fetch_outlasts_its_lease_does_not_publish_older_content() {
    let Some(moto) = Moto::start().await else { return };
    let feed = Arc::new(Feed::default());
    *feed.s1.lock().unwrap() = (0..40).map(|i| format!("http://first-{i}.example/p\n")).collect();
    let app = axum::Router::new()
        .route("/s1", get(s1))
        .route("/s2", get(s2))
        .with_state(Arc::clone(&feed));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key/signing.key");
    write_key_pair(&generate_signing_key(), &key).unwrap();
    let builder = |name: &str| {
        let mut first = SourceConfig::http(format!("http://{addr}/s1"), SourceFormat::Urls);
        first.retries = Some(0);
        let mut second = SourceConfig::http(format!("http://{addr}/s2"), SourceFormat::Urls);
        second.retries = Some(0);
        let mut cfg = Config {
            store: Some(moto.store_url("stalled")),
            store_options: moto.store_options(),
            signing_key: Some(key.clone()),
            lease_s: 1,
            ..config(&dir.path().join(name), "phishing", vec![first, second])
        };
        cfg.lists[0].gates.max_shrink = 0.5;
        Publisher::open(cfg).unwrap()
    };
    let a = builder("a");
    let b = builder("b");
    b.build_list(0).await.result.unwrap();

    // A starts: s1 fetched at once (without X), s2 held.
    feed.hold_s2.store(true, Ordering::SeqCst);
    let hits = feed.s1_hits.load(Ordering::SeqCst);
    let a_build = {
        let a = a.clone();
        tokio::spawn(async move { a.build_list(0).await })
    };
    while feed.s2_held.load(Ordering::SeqCst) == 0 || feed.s1_hits.load(Ordering::SeqCst) == hits {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A's lease runs out while s2 is held; the feed now lists X, and B
    // publishes it.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    feed.s1.lock().unwrap().push_str(&format!("http://{X}\n"));
    let published = b.build_list(0).await.result.unwrap();
    assert_eq!(serves_x(&b), (published, true));

    // A's fetch completes: its build is discarded, and A serves B's version.
    feed.release.notify_one();
    let outcome = a_build.await.unwrap();
    assert!(
        matches!(outcome.result, Err(Error::Superseded { .. })),
        "{:?}",
        outcome.result
    );
    assert_eq!(serves_x(&a), (published, true));

    // With s1 down, B's next build uses its own last good copy of s1 (with
    // X), not A's older one: the list stays as published.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    feed.s1_fails.store(true, Ordering::SeqCst);
    let outcome = b.build_list(0).await;
    assert_eq!(outcome.report.as_ref().unwrap().sources[0].state, "last_good");
    assert_eq!(serves_x(&b), (published, true), "{:?}", outcome.result);
}
