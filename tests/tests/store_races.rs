//! Two builders on one object store (moto), one of them reaching it through
//! a proxy that can refuse its reads of the `latest` pointer (as a store
//! does whose credentials just expired: `403`, which is not retried) or
//! hold its writes of build objects. Found by an adversarial review.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::get;
use blocksieve_format::FullHash;
use blocksieve_publisher::internal::storage::{generate_signing_key, write_key_pair};
use blocksieve_publisher::{Config, Error, Publisher, SourceConfig, SourceFormat};
use blocksieve_tests::config;
use blocksieve_tests::fault::{relay, serve_proxy};
use blocksieve_tests::moto::{Moto, store_options_at};
use tokio::sync::Notify;

use super::stalled_builder::{Feed, X, s1, s2, serves_x};

/// What the S3 proxy does to one builder's requests.
#[derive(Default)]
struct StoreFaults {
    /// `GET …/latest` answered `403 ExpiredToken`.
    refuse_latest: AtomicBool,
    /// The next `PUT` of a key under `…/sources/` held until `release`.
    hold_sources_put: AtomicBool,
    sources_put_held: AtomicUsize,
    release: Notify,
}

/// A proxy in front of the S3 server at `upstream` applying `faults`.
async fn store_proxy(upstream: String, faults: Arc<StoreFaults>) -> SocketAddr {
    let client = reqwest::Client::new();
    let app =
        axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (upstream, client, faults) = (upstream.clone(), client.clone(), faults.clone());
            async move {
                let path = uri.path().to_owned();
                if method == Method::GET
                    && path.ends_with("/latest")
                    && faults.refuse_latest.load(Ordering::SeqCst)
                {
                    let body = "<?xml version=\"1.0\"?><Error><Code>ExpiredToken</Code>\
                                <Message>The provided token has expired.</Message></Error>";
                    return (StatusCode::FORBIDDEN, body).into_response();
                }
                if method == Method::PUT
                    && path.contains("/sources/")
                    && faults.hold_sources_put.swap(false, Ordering::SeqCst)
                {
                    let released = faults.release.notified();
                    faults.sources_put_held.fetch_add(1, Ordering::SeqCst);
                    released.await;
                }
                relay(&client, &upstream, (method, uri, headers, body), &[]).await
            }
        });
    serve_proxy(app).await
}

struct Setup {
    _moto: Moto,
    feed: Arc<Feed>,
    faults: Arc<StoreFaults>,
    /// Builder A, through the proxy.
    a: Publisher,
    /// Builder B, straight to moto.
    b: Publisher,
    _dir: tempfile::TempDir,
}

async fn setup(prefix: &str) -> Option<Setup> {
    let moto = Moto::start().await?;
    let feed = Arc::new(Feed::default());
    *feed.s1.lock().unwrap() = (0..40).map(|i| format!("http://first-{i}.example/p\n")).collect();
    let app = axum::Router::new()
        .route("/s1", get(s1))
        .route("/s2", get(s2))
        .with_state(Arc::clone(&feed));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let faults = Arc::new(StoreFaults::default());
    let proxy = store_proxy(moto.endpoint(), faults.clone()).await;

    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key/signing.key");
    write_key_pair(&generate_signing_key(), &key).unwrap();
    let builder = |name: &str, options| {
        let mut first = SourceConfig::http(format!("http://{addr}/s1"), SourceFormat::Urls);
        first.retries = Some(0);
        let mut second = SourceConfig::http(format!("http://{addr}/s2"), SourceFormat::Urls);
        second.retries = Some(0);
        let mut cfg = Config {
            store: Some(moto.store_url(prefix)),
            store_options: options,
            signing_key: Some(key.clone()),
            lease_s: 1,
            ..config(&dir.path().join(name), "phishing", vec![first, second])
        };
        cfg.lists[0].gates.max_shrink = 0.5;
        Publisher::open(cfg).unwrap()
    };
    let a = builder("a", store_options_at(proxy));
    let b = builder("b", moto.store_options());
    Some(Setup {
        _moto: moto,
        feed,
        faults,
        a,
        b,
        _dir: dir,
    })
}

/// Builder A cannot read the store's `latest` pointer when its build
/// starts (a `403` for a moment: credentials being rotated), fetches `s1`
/// without X and stalls on `s2` past its 1-second lease; builder B takes
/// the lease and publishes `s1` listing X. A's build must not then publish
/// its older content over B's generation: not knowing where it started
/// from, it cannot tell that its content is older.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_that_could_not_read_the_head_before_fetching_does_not_publish_older_content() {
    let Some(Setup {
        _moto,
        feed,
        faults,
        a,
        b,
        _dir,
    }) = setup("head-unread").await
    else {
        return;
    };
    b.build_list(0).await.result.unwrap();

    // A starts: its read of the pointer refused, s1 fetched at once
    // (without X), s2 held.
    faults.refuse_latest.store(true, Ordering::SeqCst);
    feed.hold_s2.store(true, Ordering::SeqCst);
    let hits = feed.s1_hits.load(Ordering::SeqCst);
    let a_build = {
        let a = a.clone();
        tokio::spawn(async move { a.build_list(0).await })
    };
    // (A build that gives up at once, fetching nothing, is as good.)
    while !a_build.is_finished()
        && (feed.s2_held.load(Ordering::SeqCst) == 0 || feed.s1_hits.load(Ordering::SeqCst) == hits)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    faults.refuse_latest.store(false, Ordering::SeqCst);
    if a_build.is_finished() {
        feed.hold_s2.store(false, Ordering::SeqCst);
    }
    // A's lease runs out while s2 is held; the feed now lists X, and B
    // publishes it.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    feed.s1.lock().unwrap().push_str(&format!("http://{X}\n"));
    let published = b.build_list(0).await.result.unwrap();
    assert_eq!(serves_x(&b), (published, true));

    // A's fetch completes: its content (without X) is older than B's
    // generation, and must not be published over it.
    feed.release.notify_one();
    let outcome = a_build.await.unwrap();
    // What the store's latest generation lists.
    let store = &a.state().lists[0].store;
    let latest = store.latest().unwrap().unwrap().pointer;
    let stored = store
        .load_generation(latest.generation, std::slice::from_ref(a.public_key()))
        .unwrap();
    let listed = stored.hashes.binary_search(&FullHash::of(X.as_bytes())).is_ok();
    assert!(
        listed,
        "A published its older content over B's generation: version {} (B's {published}) does not list X; \
         A's build: {:?}",
        latest.version, outcome.result
    );
    assert!(outcome.result.is_err(), "{:?}", outcome.result);
}

/// Builder A's build loses the race at the last moment: before publishing,
/// it marks the stored copy of each fresh source as older than its own
/// version (its write held here, as a slow store or a long build holds
/// it), meanwhile another builder (B, A's lease having run out) publishes
/// the same content and stores its copies, and A's build then ends
/// superseded. A's mark must not outlive the build that was not published:
/// the copy stored is B's, which the published generation was built from.
/// With `s1` then down, B's next build falls back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_build_does_not_leave_the_published_sources_copies_unusable() {
    let Some(Setup {
        _moto,
        feed,
        faults,
        a,
        b,
        _dir,
    }) = setup("superseded-mark").await
    else {
        return;
    };
    b.build_list(0).await.result.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // A builds newer content (so that it publishes), and is held marking
    // the stored copies before it publishes.
    feed.s1.lock().unwrap().push_str(&format!("http://{X}\n"));
    faults.hold_sources_put.store(true, Ordering::SeqCst);
    let a_build = {
        let a = a.clone();
        tokio::spawn(async move { a.build_list(0).await })
    };
    while faults.sources_put_held.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A's lease runs out; B builds the same content and publishes it.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let published = b.build_list(0).await.result.unwrap();
    assert_eq!(serves_x(&b), (published, true));
    faults.release.notify_one();
    let outcome = a_build.await.unwrap();
    assert!(
        matches!(outcome.result, Err(Error::Superseded { .. })),
        "{:?}",
        outcome.result
    );

    // s1 down: B falls back to the copy of s1 it stored (with X).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    feed.s1_fails.store(true, Ordering::SeqCst);
    let outcome = b.build_list(0).await;
    assert!(
        outcome.result.is_ok(),
        "a source down after a superseded build of another builder: {:?}",
        outcome.result
    );
    assert_eq!(outcome.report.as_ref().unwrap().sources[0].state, "last_good");
    assert_eq!(serves_x(&b), (published, true));
}
