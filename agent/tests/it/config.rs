//! The builder refuses misconfigurations at start.

use std::time::Duration;

use blocksieve_agent::{Agent, Error, ErrorKind, MAX_SNAPSHOT_BYTES_LIMIT};

use crate::server::{FakePublisher, Snap, trusted};

fn builder() -> blocksieve_agent::AgentBuilder {
    Agent::builder("http://127.0.0.1:8080")
        .list("malware")
        .trusted_key(trusted())
}

#[test]
fn defaults_build() {
    let agent = builder().build().unwrap();
    assert_eq!(agent.lists().collect::<Vec<_>>(), ["malware"]);
    assert_eq!(agent.base_url(), "http://127.0.0.1:8080");
}

#[test]
fn lists_are_deduplicated_in_order() {
    let agent = builder()
        .lists(["phishing", "malware", "phishing"])
        .build()
        .unwrap();
    assert_eq!(agent.lists().collect::<Vec<_>>(), ["malware", "phishing"]);
}

#[test]
fn no_list_is_refused() {
    let e = Agent::builder("http://p.example")
        .trusted_key(trusted())
        .build()
        .unwrap_err();
    assert!(matches!(e, Error::NoLists), "{e}");
    assert_eq!(e.kind(), ErrorKind::Misconfigured);
}

#[test]
fn no_trusted_key_is_refused() {
    let e = Agent::builder("http://p.example")
        .list("malware")
        .build()
        .unwrap_err();
    assert!(matches!(e, Error::NoTrustedKeys), "{e}");
}

#[test]
fn invalid_list_names_are_refused() {
    for name in ["", "Malware", "mal ware", "../etc", &"x".repeat(65)] {
        let e = builder().list(name).build().unwrap_err();
        assert!(
            matches!(&e, Error::InvalidListName { name: n } if n == name),
            "{name:?}: {e}"
        );
    }
}

#[test]
fn invalid_base_urls_are_refused() {
    for url in [
        "",
        "publisher:8080",
        "ftp://p.example",
        "file:///tmp/x",
        "http://p.example/?a=b",
    ] {
        let e = Agent::builder(url)
            .list("malware")
            .trusted_key(trusted())
            .build()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidBaseUrl { .. }), "{url:?}: {e}");
    }
}

#[test]
fn out_of_range_settings_are_refused() {
    let cases = [
        (builder().request_timeout(Duration::ZERO), "request_timeout"),
        (builder().snapshot_timeout(Duration::ZERO), "snapshot_timeout"),
        (builder().max_snapshot_bytes(0), "max_snapshot_bytes"),
        (
            builder().max_snapshot_bytes(MAX_SNAPSHOT_BYTES_LIMIT + 1),
            "max_snapshot_bytes",
        ),
        (builder().user_agent("bad\nagent"), "user_agent"),
    ];
    for (b, setting) in cases {
        let e = b.build().unwrap_err();
        assert!(
            matches!(e, Error::InvalidSetting { setting: s, .. } if s == setting),
            "{e}"
        );
    }
}

#[tokio::test]
async fn publisher_lists_can_be_discovered() {
    let fake = FakePublisher::start().await;
    fake.serve_snapshot(&Snap::new("malware", 1, &[]));
    fake.serve_snapshot(&Snap::new("phishing", 1, &[]));
    let builder = Agent::builder(&fake.base_url).trusted_key(trusted());
    let lists = builder.fetch_publisher_lists().await.unwrap();
    let names: Vec<String> = lists.lists.into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["malware", "phishing"]);
    let agent = builder.lists(names).build().unwrap();
    assert!(agent.update().await.unwrap().is_complete());
}
