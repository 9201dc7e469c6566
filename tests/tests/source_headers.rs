//! A `url` source's request headers (an API key a feed asks for): sent
//! with every fetch, so a feed that answers 401 without its key publishes;
//! followed through a redirect on the same host, never to another one; and
//! never shown on the status page, in `/v1/lists` or the build history.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use blocksieve_publisher::{HeaderValueConfig, ListBuildOutcome, Publisher, SourceConfig, SourceFormat};
use blocksieve_tests::RunningPublisher;

const KEY: &str = "abusech-key-0123456789-never-shown";
const FEED: &str = "http://evil1.example/phish\nhttp://evil2.example/phish\nhttp://evil3.example/phish\n";

/// A feed server on 127.0.0.1:0: `/feed.txt` answers the list when the
/// request's `Auth-Key` is `require` (any request when `None`), else 401;
/// `/moved` redirects to `/feed.txt` on the same host, `/away` to
/// `away` (set once known). Records each `/feed.txt` request's `Auth-Key`.
#[derive(Clone)]
struct Feed {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    require: Option<&'static str>,
    away: Mutex<String>,
    seen: Mutex<Vec<Option<String>>>,
}

impl Feed {
    async fn start(require: Option<&'static str>) -> Self {
        let shared = Arc::new(Shared {
            require,
            away: Mutex::new(String::new()),
            seen: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/feed.txt", get(feed))
            .route("/moved", get(|| async { redirect("/feed.txt".to_owned()) }))
            .route(
                "/away",
                get(|State(s): State<Arc<Shared>>| async move { redirect(s.away.lock().unwrap().clone()) }),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, shared }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Option<String>> {
        self.shared.seen.lock().unwrap().clone()
    }
}

fn redirect(to: String) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, to)], "moved\n").into_response()
}

async fn feed(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let key = (headers.get("auth-key"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    s.seen.lock().unwrap().push(key.clone());
    if s.require.is_some_and(|want| key.as_deref() != Some(want)) {
        return (StatusCode::UNAUTHORIZED, "missing or wrong Auth-Key\n").into_response();
    }
    ([(header::CONTENT_TYPE, "text/plain")], FEED).into_response()
}

/// A `urls` source at `url`, not retried, with `Auth-Key: KEY` when
/// `with_key`.
fn source(url: String, with_key: bool) -> SourceConfig {
    let mut s = SourceConfig::http(url, SourceFormat::Urls);
    s.retries = Some(0);
    if with_key {
        s.headers
            .insert("Auth-Key".to_owned(), HeaderValueConfig::literal(KEY));
    }
    s
}

async fn build_once(dir: &std::path::Path, source: SourceConfig) -> ListBuildOutcome {
    let cfg = blocksieve_tests::config(dir, "feed", vec![source]);
    let p: Publisher = blocksieve_tests::reopen(cfg).unwrap();
    p.build_list(0).await
}

/// The outcome as text: what failed and why, its report, and the
/// `Debug` of every part of it.
fn shown(outcome: &ListBuildOutcome) -> String {
    let error = outcome.result.as_ref().err().map(ToString::to_string);
    format!("{error:?} {outcome:?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_that_needs_a_key_is_refused_without_it_and_publishes_with_it() {
    let feed = Feed::start(Some(KEY)).await;
    let dir = tempfile::tempdir().unwrap();
    let without = build_once(dir.path(), source(feed.url("/feed.txt"), false)).await;
    assert!(without.result.is_err(), "{without:?}");
    assert!(shown(&without).contains("401"), "{}", shown(&without));
    let with = build_once(dir.path(), source(feed.url("/feed.txt"), true)).await;
    assert!(with.result.is_ok(), "{}", shown(&with));
    assert!(!shown(&with).contains(KEY), "{}", shown(&with));
    assert_eq!(feed.seen(), vec![None, Some(KEY.to_owned())]);
}

/// A running publisher over the keyed feed: published, and the key is in
/// neither its status page, `/v1/lists` nor the list's build history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_never_shown_by_a_running_publisher() {
    let feed = Feed::start(Some(KEY)).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = blocksieve_tests::config(dir.path(), "feed", vec![source(feed.url("/feed.txt"), true)]);
    let running = RunningPublisher::start(cfg).await;
    running.wait_ready(Duration::from_secs(60)).await;
    let base = running.base_url();
    for path in [
        "/".to_owned(),
        "/v1/lists".to_owned(),
        blocksieve_format::api::routes::list_history("feed"),
    ] {
        let response = reqwest::get(format!("{base}{path}")).await.unwrap();
        assert!(response.status().is_success(), "{path}: {}", response.status());
        let body = response.text().await.unwrap();
        assert!(!body.contains(KEY), "{path} shows the key");
    }
    assert!(!format!("{:?}", running.publisher).contains(KEY));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_host_redirect_is_followed_with_the_headers() {
    let feed = Feed::start(Some(KEY)).await;
    let dir = tempfile::tempdir().unwrap();
    let outcome = build_once(dir.path(), source(feed.url("/moved"), true)).await;
    assert!(outcome.result.is_ok(), "{}", shown(&outcome));
    assert_eq!(feed.seen(), vec![Some(KEY.to_owned())]);
}

/// `127.0.0.1:A/away` redirects to `localhost:B/feed.txt`: another host.
/// Without headers the redirect is followed (the control: B is reached);
/// with them it is not, the build says why naming the host, and B never
/// sees the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_host_is_not_followed_with_the_headers() {
    let a = Feed::start(Some(KEY)).await;
    let b = Feed::start(None).await;
    let target = format!("localhost:{}", b.addr.port());
    *a.shared.away.lock().unwrap() = format!("http://{target}/feed.txt");
    let dir = tempfile::tempdir().unwrap();
    let control = build_once(dir.path(), source(a.url("/away"), false)).await;
    assert!(control.result.is_ok(), "{}", shown(&control));
    assert_eq!(b.seen(), vec![None]);

    let dir = tempfile::tempdir().unwrap();
    let outcome = build_once(dir.path(), source(a.url("/away"), true)).await;
    assert!(outcome.result.is_err(), "{outcome:?}");
    let text = shown(&outcome);
    assert!(
        text.contains(&format!(
            "redirected to another host ({target}); a source with headers is not followed there"
        )),
        "{text}"
    );
    assert!(!text.contains(KEY), "{text}");
    assert_eq!(b.seen(), vec![None], "the second host was never asked");
    assert!(a.seen().is_empty(), "only /away was asked on the first");
}
