//! Two builders on one store, their builds interleaved through the store's
//! calls: what one keeps of its sources never undoes what the other
//! published.

use std::path::Path;
use std::sync::Arc;

use blocksieve_format::SigningKey;

use super::Publisher;
use crate::config::{Config, ListConfig, Role, SourceConfig, SourceFormat};
use crate::generations::Lease;
use crate::storage::testing::Intercepted;
use crate::storage::{LocalStorage, PutMode, Storage};

/// A builder of list `phishing` over the `urls` feed `feed`, its data in
/// `data`, on `store` (a data directory standing for the shared store).
fn builder(data: &Path, feed: &Path, store: Arc<dyn Storage>, secret: [u8; 32]) -> Publisher {
    let key = SigningKey::from_secret_bytes(secret);
    let config = Config {
        data_dir: data.to_owned(),
        store: Some("s3://bucket/shared".to_owned()),
        role: Role::Builder,
        lists: vec![ListConfig::new(
            "phishing",
            vec![SourceConfig::file(feed, SourceFormat::Urls)],
        )],
        ..Config::default()
    };
    let settings = config.resolve().unwrap();
    let public_key = key.public_key().clone();
    Publisher::assemble(settings, store, Some(key), public_key, None).unwrap()
}

fn feed_of(urls: std::ops::Range<u32>) -> String {
    urls.map(|i| format!("http://phish{i}.example/p\n")).collect()
}

/// The full hashes `publisher` serves for its list.
fn served(publisher: &Publisher) -> Vec<blocksieve_format::FullHash> {
    let slot = &publisher.inner.state.lists[0];
    slot.current
        .load()
        .as_ref()
        .map(|p| p.hashes.clone())
        .unwrap_or_default()
}

/// Builder B finds its list unchanged while builder A, having taken the
/// lease B's build outlasted, publishes newer content (one URL more) and
/// keeps it as the source's last good content. Before: B's build, whose
/// freshness record no longer went into `latest`, kept its older content
/// as the source's last good content over A's; the next build with the
/// source down fell back to it and published the list without the URL A
/// had published (answered `safe` from then on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_an_unchanged_build_another_builder_published_past_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let feed = dir.path().join("feed.txt");
    std::fs::write(&feed, feed_of(0..100)).unwrap();
    let shared: Arc<dyn Storage> = Arc::new(LocalStorage::open(&store_dir).unwrap());
    let a_dir = dir.path().join("a");
    std::fs::create_dir_all(&a_dir).unwrap();
    let a = builder(&a_dir, &feed, shared.clone(), [5; 32]);
    let first = a.build_list(0).await;
    assert!(first.result.is_ok(), "{:?}", first.result);

    // B's store: when B's unchanged build goes to refresh `latest`, A
    // (B's lease having run out) builds the feed with one URL more.
    let racing_a = a.clone();
    let racing_feed = feed.clone();
    let racing_store = shared.clone();
    let b_store = Intercepted::over(LocalStorage::open(&store_dir).unwrap()).once_before_put(
        |key| key == "lists/phishing/latest",
        move || {
            std::fs::write(&racing_feed, feed_of(0..101)).unwrap();
            let expired = Lease {
                holder: "b".to_owned(),
                expires_at: 0,
            };
            racing_store
                .put("lists/phishing/lease", &expired.to_bytes(), PutMode::Overwrite)
                .unwrap();
            let built = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(racing_a.build_list(0)).result
            })
            .join()
            .unwrap();
            assert!(built.is_ok(), "{built:?}");
        },
    );
    let b_dir = dir.path().join("b");
    std::fs::create_dir_all(&b_dir).unwrap();
    let b = builder(&b_dir, &feed, Arc::new(b_store), [5; 32]);
    let _ = b.build_list(0).await;
    let published = served(&a);
    assert_eq!(published.len(), 101);

    // The feed goes down: the next build falls back to the last good
    // content, which must hold every entry published.
    std::fs::remove_file(&feed).unwrap();
    let _ = a.build_list(0).await;
    let now = served(&a);
    let lost = published.iter().filter(|h| now.binary_search(h).is_err()).count();
    assert_eq!(
        lost, 0,
        "entries published, then dropped by a fallback to older content"
    );
}

/// What a build that fails keeps of its sources (the sources that answered
/// keep their content) is kept only while `latest` is where the build
/// found it: a build another builder published past keeps nothing, on
/// every path ([`Publisher::published_past`]), the first build of a list
/// included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_keeps_its_sources_only_while_latest_is_where_it_found_it() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let feed = dir.path().join("feed.txt");
    std::fs::write(&feed, feed_of(0..100)).unwrap();
    let shared: Arc<dyn Storage> = Arc::new(LocalStorage::open(&store_dir).unwrap());
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let a = builder(&a_dir, &feed, shared.clone(), [5; 32]);
    let b = builder(&b_dir, &feed, shared.clone(), [5; 32]);
    let head = |p: &Publisher| p.inner.state.lists[0].store.latest().unwrap();
    // Nothing published, nothing found: not superseded.
    assert!(b.published_past(0, None).is_none());
    assert!(a.build_list(0).await.result.is_ok());
    // A first build that found no generation, once one is published.
    assert!(b.published_past(0, None).is_some());
    let base = head(&b).unwrap();
    assert!(b.published_past(0, Some(&base)).is_none());
    std::fs::write(&feed, feed_of(0..101)).unwrap();
    assert!(a.build_list(0).await.result.is_ok());
    assert!(b.published_past(0, Some(&base)).is_some());
    assert!(b.published_past(0, head(&b).as_ref()).is_none());
}
