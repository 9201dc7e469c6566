//! Redirects on the full-hash routes: the agent refuses a plain-`http`
//! base URL to a host that is not the loopback (an unsigned "not listed"
//! on such a path can be forged by anyone on it), so a redirect from its
//! publisher must not take a full-hash request onto such a path either.

use std::net::IpAddr;

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use blocksieve_agent::{Agent, Error};
use blocksieve_format::api::{FullHashSearchRequest, FullHashSearchResponse, PrefixResult};
use blocksieve_tests::fake::FakePublisher;
use blocksieve_tests::snapshot::{Snap, trusted};
use tokio::net::TcpListener;

/// This machine's first address that is not the loopback, if any.
fn non_loopback_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Serves `app` on `ip`:0; its base URL.
async fn serve(ip: IpAddr, app: Router) -> String {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// Someone on a plain-HTTP path: answers every search "not listed".
async fn forger(ip: IpAddr) -> String {
    let app = Router::new().fallback(|body: Bytes| async move {
        let request: FullHashSearchRequest = serde_json::from_slice(&body).unwrap_or_default();
        let answer = FullHashSearchResponse {
            results: (request.prefixes.into_iter())
                .map(|prefix| PrefixResult {
                    prefix,
                    matches: Vec::new(),
                })
                .collect(),
            cache_duration_s: 300,
        };
        axum::Json(answer).into_response()
    });
    serve(ip, app).await
}

/// A front (on the loopback, as the agent accepts it) that sends snapshot
/// requests to the real publisher and full-hash searches to `search_to`,
/// both by `307`, which keeps the method and body.
async fn front(publisher: String, search_to: String) -> String {
    let app = Router::new().fallback(move |uri: Uri| {
        let (publisher, search_to) = (publisher.clone(), search_to.clone());
        async move {
            let path = uri.path_and_query().map_or("/", |p| p.as_str());
            let to = if path.starts_with("/v1/hashes") {
                format!("{search_to}{path}")
            } else {
                format!("{publisher}{path}")
            };
            Response::builder()
                .status(StatusCode::TEMPORARY_REDIRECT)
                .header(header::LOCATION, to)
                .body(axum::body::Body::empty())
                .unwrap()
        }
    });
    serve(IpAddr::from([127, 0, 0, 1]), app).await
}

/// A redirect from the publisher to a plain-`http` URL on another host
/// took the full-hash search there, and its "not listed" was final: a
/// listed URL answered safe, by a host the agent refuses as a base URL.
#[tokio::test]
async fn a_redirect_to_plain_http_does_not_make_a_listed_url_safe() {
    let Some(ip) = non_loopback_address() else {
        eprintln!("no non-loopback address: skipped");
        return;
    };
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &["evil.example/"]));
    fake.list_expressions("malware", &["evil.example/"]);
    let forger = forger(ip).await;
    // The agent itself refuses that host as a base URL.
    let refused = Agent::builder(&forger)
        .list("malware")
        .trusted_key(trusted())
        .build();
    assert!(
        matches!(refused, Err(Error::InvalidBaseUrl { .. })),
        "{refused:?}"
    );

    let front = front(fake.base_url.clone(), forger).await;
    let agent = Agent::builder(&front)
        .list("malware")
        .trusted_key(trusted())
        .build()
        .unwrap();
    agent.update().await.unwrap();
    let verdict = agent.check_url("http://evil.example/").await.unwrap();
    assert!(
        !verdict.is_safe(),
        "a listed URL answered {verdict:?}, by a plain-http host a redirect led to"
    );
}
