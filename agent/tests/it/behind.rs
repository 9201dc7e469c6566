//! A signed freshness record seen anywhere in an update round names a newer
//! version than the one held: no answer later in the round (a `304`, an
//! empty chain, the same snapshot, another mirror) may leave the list
//! "unchanged" at the older version. The round asks for the whole
//! snapshot, without a validator; it takes a newer one if one is served,
//! and fails, showing the list behind, if not.
//!
//! The publisher here is scripted: its snapshot and updates routes answer
//! independently, as a cache in front of one route but not the other can.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use blocksieve_agent::{Agent, AgentBuilder, ErrorKind, ListUpdate, UpdateReport};
use blocksieve_format::api::{FRESHNESS_HEADER, routes};
use blocksieve_tests::snapshot::{Snap, delta, end_of, freshness, publisher_key, trusted, unix_now};

/// One scripted answer.
#[derive(Clone, Debug)]
struct Answer {
    status: StatusCode,
    etag: Option<String>,
    freshness: Option<String>,
    body: Vec<u8>,
}

impl Answer {
    fn ok(body: &[u8], etag: &str) -> Self {
        Self {
            status: StatusCode::OK,
            etag: Some(etag.to_owned()),
            freshness: None,
            body: body.to_vec(),
        }
    }

    fn not_modified() -> Self {
        Self {
            status: StatusCode::NOT_MODIFIED,
            etag: None,
            freshness: None,
            body: Vec::new(),
        }
    }

    fn status(status: StatusCode) -> Self {
        Self {
            status,
            ..Self::not_modified()
        }
    }

    fn without_etag(mut self) -> Self {
        self.etag = None;
        self
    }

    fn vouching(mut self, record: &str) -> Self {
        self.freshness = Some(record.to_owned());
        self
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.body).into_response();
        if let Some(etag) = self.etag {
            response.headers_mut().insert(header::ETAG, etag.parse().unwrap());
        }
        if let Some(record) = self.freshness {
            response
                .headers_mut()
                .insert(FRESHNESS_HEADER, record.parse().unwrap());
        }
        response
    }
}

/// What each route answers, and what was asked (`If-None-Match` sent).
#[derive(Debug)]
struct Script {
    snapshot: Answer,
    /// The snapshot route's answer to a conditional request, if not `snapshot`.
    conditional: Option<Answer>,
    updates: Answer,
    asked: Vec<String>,
}

type Shared = Arc<Mutex<Script>>;

async fn snapshot_route(State(script): State<Shared>, Path(_): Path<String>, headers: HeaderMap) -> Answer {
    let sent = headers
        .get(header::IF_NONE_MATCH)
        .map(|v| v.to_str().unwrap().to_owned());
    let mut script = script.lock().unwrap();
    let answer = match (&sent, &script.conditional) {
        (Some(_), Some(conditional)) => conditional.clone(),
        _ => script.snapshot.clone(),
    };
    script
        .asked
        .push(format!("snapshot {sent:?} -> {}", answer.status.as_u16()));
    answer
}

async fn updates_route(State(script): State<Shared>, Path(_): Path<(String, String)>) -> Answer {
    let mut script = script.lock().unwrap();
    let answer = script.updates.clone();
    script
        .asked
        .push(format!("updates -> {}", answer.status.as_u16()));
    answer
}

/// A scripted publisher serving `v1` (ETag `"v1"`) on both routes' first
/// round (the updates route: no deltas, `404`).
async fn scripted(v1: &[u8]) -> (String, Shared) {
    let script = Arc::new(Mutex::new(Script {
        snapshot: Answer::ok(v1, "\"v1\""),
        conditional: None,
        updates: Answer::status(StatusCode::NOT_FOUND),
        asked: Vec::new(),
    }));
    let app = Router::new()
        .route(routes::LATEST_SNAPSHOT, get(snapshot_route))
        .route(routes::UPDATES, get(updates_route))
        .with_state(Arc::clone(&script));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), script)
}

const OLD: &str = "evil.example/";
const NEW: &str = "added-in-v2.example/";

/// Version 1, version 2 (which adds `NEW`), and version 2's signed record.
fn versions() -> (Vec<u8>, Vec<u8>, String) {
    let v1 = Snap::new("malware", 1, &[OLD]).encode();
    let v2 = Snap::new("malware", 2, &[OLD, NEW]).encode();
    let record = freshness("malware", end_of(&v2), unix_now() + 3600, &publisher_key());
    (v1, v2, record)
}

/// An agent on `base` (with `mirrors`) that took version 1 in a first round.
async fn holding_v1(base: &str, mirrors: &[&str], build: impl FnOnce(AgentBuilder) -> AgentBuilder) -> Agent {
    let mut builder = Agent::builder(base).list("malware").trusted_key(trusted());
    for mirror in mirrors {
        builder = builder.mirror(*mirror);
    }
    let agent = build(builder).build().unwrap();
    let report = agent.update().await.unwrap();
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Updated { version: 1, .. })
        ),
        "{report:?}"
    );
    agent
}

/// The round failed with the list kept at version 1, saying it is behind
/// version 2, and the status shows it.
fn assert_behind(agent: &Agent, report: &UpdateReport, script: &Shared) {
    let asked = &script.lock().unwrap().asked;
    let Some(ListUpdate::Failed { error, kept_version }) = report.get("malware") else {
        panic!("{report:?}; asked {asked:?}");
    };
    assert_eq!(*kept_version, Some(1));
    assert_eq!(error.kind(), ErrorKind::BadData);
    assert!(error.to_string().contains("names version 2"), "{error}");
    let status = agent.status();
    let list = status.list("malware").unwrap();
    assert_eq!((list.version, list.consecutive_failures), (Some(1), 1));
    assert!(list.last_error.is_some());
}

/// The round took version 2: `NEW` hits the local filter.
fn assert_took_v2(agent: &Agent, report: &UpdateReport, script: &Shared) {
    let asked = &script.lock().unwrap().asked;
    assert!(
        matches!(
            report.get("malware"),
            Some(ListUpdate::Updated {
                previous: Some(1),
                version: 2
            })
        ),
        "{report:?}; asked {asked:?}"
    );
    assert!(!agent.lookup_local(&format!("http://{NEW}")).unwrap().is_empty());
}

/// The updates route's `304` vouches for version 2; the snapshot route's
/// `304` to the conditional request that follows (a cache in front of it)
/// carries no record: asked again without the ETag.
#[tokio::test]
async fn a_304_without_a_record_after_a_vouched_newer_version_is_asked_again_without_the_etag() {
    let (v1, v2, record) = versions();
    for served in [&v1, &v2] {
        let (base, script) = scripted(&v1).await;
        let agent = holding_v1(&base, &[], |b| b).await;
        {
            let mut s = script.lock().unwrap();
            s.asked.clear();
            s.updates = Answer::not_modified().vouching(&record);
            s.conditional = Some(Answer::not_modified());
            s.snapshot = Answer::ok(served, "\"latest\"");
        }
        let report = agent.update().await.unwrap();
        assert_eq!(
            script.lock().unwrap().asked,
            [
                "updates -> 304",
                "snapshot Some(\"\\\"v1\\\"\") -> 304",
                "snapshot None -> 200"
            ]
        );
        if served == &v2 {
            assert_took_v2(&agent, &report, &script);
        } else {
            assert_behind(&agent, &report, &script);
        }
    }
}

/// The updates route answers `200` with a chain to version 2 and its record,
/// but the chain is not used (`max_additions_ratio` 0, or it does not
/// verify); the snapshot route then serves version 1 again under another
/// ETag. The record is kept for the round: the snapshot in use is not
/// taken as unchanged (nor its new ETag kept). Under a ratio of 0 the
/// round, its snapshot failed, asks the deltas once more; the chain there
/// is cut short (its ETag names no version it reaches) but verifies, and
/// what it adds is taken: the round still fails, at version 2.
#[tokio::test]
async fn the_record_of_a_chain_not_used_holds_for_the_snapshot_that_follows() {
    let (v1, v2, record) = versions();
    let chain = delta("malware", end_of(&v1), end_of(&v2), &[NEW]);
    let mut mangled = chain.clone();
    let last = mangled.len() - 1;
    mangled[last] ^= 1;
    for (ratio, chain) in [(0.0, &chain), (0.5, &mangled)] {
        for served in [&v1, &v2] {
            let (base, script) = scripted(&v1).await;
            let agent = holding_v1(&base, &[], |b| b.max_additions_ratio(ratio)).await;
            {
                let mut s = script.lock().unwrap();
                s.asked.clear();
                s.updates = Answer::ok(chain, "\"v2\"").vouching(&record);
                s.snapshot = Answer::ok(served, "\"v1-cached\"");
            }
            let report = agent.update().await.unwrap();
            if served == &v2 {
                assert_took_v2(&agent, &report, &script);
                continue;
            }
            if ratio == 0.0 {
                let Some(ListUpdate::Failed { error, kept_version }) = report.get("malware") else {
                    panic!("{report:?}");
                };
                assert_eq!(*kept_version, Some(2));
                assert!(error.to_string().contains("names version 2"), "{error}");
                assert!(!agent.lookup_local(&format!("http://{NEW}")).unwrap().is_empty());
                continue;
            }
            assert_behind(&agent, &report, &script);
            // The ETag of the answer behind was not taken: the next round
            // sends version 1's again.
            script.lock().unwrap().asked.clear();
            agent.update().await.unwrap();
            let asked = script.lock().unwrap().asked.clone();
            assert!(
                asked.contains(&"snapshot Some(\"\\\"v1\\\"\") -> 200".to_owned()),
                "{asked:?}"
            );
        }
    }
}

/// The updates route answers `200` with no delta and no ETag (stripped by a
/// proxy) but a record naming version 2: the snapshot says which is right.
#[tokio::test]
async fn an_empty_chain_under_a_record_of_a_newer_version_is_not_unchanged() {
    let (v1, v2, record) = versions();
    for served in [&v1, &v2] {
        let (base, script) = scripted(&v1).await;
        let agent = holding_v1(&base, &[], |b| b).await;
        {
            let mut s = script.lock().unwrap();
            s.asked.clear();
            s.updates = Answer::ok(&[], "").without_etag().vouching(&record);
            s.snapshot = Answer::ok(served, "\"latest\"");
        }
        let report = agent.update().await.unwrap();
        if served == &v2 {
            assert_took_v2(&agent, &report, &script);
        } else {
            assert_behind(&agent, &report, &script);
        }
        let status = agent.status();
        let why = status
            .list("malware")
            .unwrap()
            .last_delta_error
            .as_ref()
            .unwrap()
            .to_string();
        assert!(why.contains("this round names version 2"), "{why}");
    }
}

/// The first base URL vouches for version 2 but serves version 1 (that
/// base fails); the mirror answers `304` with no record. The round does not
/// end "unchanged" on the mirror's word: the mirror is asked for its
/// snapshot, and the round takes version 2 from it or fails.
#[tokio::test]
async fn a_mirror_behind_cannot_undo_a_newer_version_vouched_by_another() {
    let (v1, v2, record) = versions();
    for mirror_serves in [&v1, &v2] {
        let (primary, primary_script) = scripted(&v1).await;
        let (mirror, mirror_script) = scripted(&v1).await;
        let agent = holding_v1(&primary, &[&mirror], |b| b).await;
        {
            let mut s = primary_script.lock().unwrap();
            s.asked.clear();
            s.updates = Answer::not_modified().vouching(&record);
            s.snapshot = Answer::ok(&v1, "\"v1-other\"");
        }
        {
            let mut s = mirror_script.lock().unwrap();
            s.updates = Answer::not_modified();
            s.snapshot = Answer::ok(mirror_serves, "\"latest\"");
        }
        let report = agent.update().await.unwrap();
        if mirror_serves == &v2 {
            assert_took_v2(&agent, &report, &mirror_script);
        } else {
            assert_behind(&agent, &report, &primary_script);
        }
    }
}
