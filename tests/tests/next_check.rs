//! End to end: an agent behind a shared cache asks again when the
//! publisher meant. A real publisher (one-hour next-check hint), a cache in
//! front of it that took its copy of the latest snapshot 40 minutes before
//! the agent asks — the agent's clock, and the cache's, moved on by hand —
//! and the agent's background updates: they schedule the next check 20
//! minutes on (the publisher's instant), not an hour (the hint the copy
//! still says).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use blocksieve_agent::{Agent, TimeProvider};
use blocksieve_format::api::{NEXT_CHECK_AT_HEADER, NEXT_CHECK_HEADER, routes};
use blocksieve_publisher::SourceFormat;
use blocksieve_tests::clock::ManualClock;
use blocksieve_tests::{RunningPublisher, config, fixture_source, until};

const READY: Duration = Duration::from_secs(60);
const MIN: Duration = Duration::from_secs(60);

/// How the cache dates the copies it serves.
#[derive(Debug, Clone, Copy)]
enum Dating {
    /// nginx's `proxy_cache`: its own `Date`, no `Age`.
    OwnDate,
    /// A CDN (RFC 9111 §5.1): the origin's `Date` and an `Age`.
    Age,
    /// The origin's `Date` and no `Age`.
    OriginDate,
}

/// One stored response: status, headers, body, and when the cache took it
/// (by its clock).
type Stored = (StatusCode, HeaderMap, Bytes, SystemTime);

/// A shared cache in front of `upstream`: the first request for a path is
/// fetched from it unconditionally and stored; every request for it is
/// answered from the stored copy (`304` when `If-None-Match` names its
/// `ETag`), dated by `dating` on `clock`.
#[derive(Clone)]
struct Cache {
    upstream: String,
    dating: Dating,
    clock: Arc<ManualClock>,
    stored: Arc<Mutex<Vec<(String, Stored)>>>,
    client: reqwest::Client,
}

impl Cache {
    async fn start(upstream: String, dating: Dating, clock: Arc<ManualClock>) -> (Self, String) {
        let cache = Self {
            upstream,
            dating,
            clock,
            stored: Arc::default(),
            client: reqwest::Client::new(),
        };
        let app = Router::new().fallback(serve).with_state(cache.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (cache, url)
    }

    fn stored(&self, path: &str) -> Option<Stored> {
        let stored = self.stored.lock().unwrap_or_else(PoisonError::into_inner);
        stored.iter().find(|(p, _)| p == path).map(|(_, s)| s.clone())
    }

    /// The stored copy of `path`, fetched from the upstream first if none.
    async fn fill(&self, path: &str) -> Stored {
        if let Some(stored) = self.stored(path) {
            return stored;
        }
        let answer = self
            .client
            .get(format!("{}{path}", self.upstream))
            .send()
            .await
            .unwrap();
        let status = answer.status();
        let headers = answer.headers().clone();
        let body = answer.bytes().await.unwrap();
        let stored = (status, headers, body, self.clock.now());
        let mut all = self.stored.lock().unwrap_or_else(PoisonError::into_inner);
        all.push((path.to_owned(), stored.clone()));
        stored
    }
}

async fn serve(State(cache): State<Cache>, uri: Uri, request: HeaderMap) -> Response {
    let (status, mut headers, body, taken) = cache.fill(uri.path()).await;
    let now = cache.clock.now();
    headers.remove(header::CONNECTION);
    headers.remove(header::TRANSFER_ENCODING);
    match cache.dating {
        Dating::OwnDate => {
            let date = httpdate::fmt_http_date(now);
            headers.insert(header::DATE, HeaderValue::from_str(&date).unwrap());
        }
        Dating::Age => {
            let age = now.duration_since(taken).unwrap_or_default().as_secs();
            headers.insert(header::AGE, HeaderValue::from(age));
        }
        Dating::OriginDate => {}
    }
    let etag = headers.get(header::ETAG).cloned();
    if etag.is_some() && request.get(header::IF_NONE_MATCH) == etag.as_ref() {
        headers.remove(header::CONTENT_LENGTH);
        headers.remove(header::CONTENT_TYPE);
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    (status, headers, body).into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_behind_a_shared_cache_checks_again_at_the_publishers_instant() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(
        &dir.path().join("data"),
        "phishing",
        vec![fixture_source("phishing-urls.txt", SourceFormat::Urls)],
    );
    // Once a year: the next build is far off, so the hint is the longest
    // the publisher sends, one hour.
    cfg.schedule = "0 0 0 1 1 *".to_owned();
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(READY).await;
    let path = routes::latest_snapshot("phishing");

    for dating in [Dating::OwnDate, Dating::Age, Dating::OriginDate] {
        let clock = ManualClock::new(SystemTime::now());
        let (cache, url) = Cache::start(server.base_url(), dating, clock.clone()).await;
        // The cache takes its copy now, then 40 minutes pass.
        let (_, headers, _, _) = cache.fill(&path).await;
        assert_eq!(headers[NEXT_CHECK_HEADER], "3600", "{headers:?}");
        assert!(headers.contains_key(NEXT_CHECK_AT_HEADER), "{headers:?}");
        clock.advance(40 * MIN);

        let agent = Agent::builder(url)
            .list("phishing")
            .trusted_key(server.public_key())
            .time_provider(clock.clone())
            .initial_jitter(Duration::ZERO)
            .build()
            .unwrap();
        let updates = agent.start_updates().unwrap();
        let scheduled = |agent: &Agent| {
            let status = agent.status();
            let list = status.list("phishing").unwrap();
            list.last_success
                .and(list.next_check)
                .and_then(|at| at.duration_since(clock.now()).ok())
                .filter(|left| *left >= MIN)
        };
        until("the check after the first", || scheduled(&agent).is_some()).await;
        updates.shutdown().await;
        let left = scheduled(&agent).unwrap();
        // 20 minutes, plus up to 10 % jitter and a second of `Date`
        // resolution; the hint alone would have said an hour.
        assert!(
            left >= 20 * MIN - Duration::from_secs(2) && left <= 22 * MIN + Duration::from_secs(2),
            "{dating:?}: next check in {left:?}"
        );
    }
    server.stop().await;
}
