//! The builder refuses misconfigurations at start.

use std::time::Duration;

use blocksieve_agent::{
    Agent, Error, ErrorKind, MAX_FULL_HASH_CACHE_BYTES, MAX_NOISE_PREFIXES, MAX_SNAPSHOT_BYTES_LIMIT,
};

use blocksieve_tests::fake::FakePublisher;
use blocksieve_tests::snapshot::{Snap, trusted};

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
        (builder().pool_idle_timeout(Duration::ZERO), "pool_idle_timeout"),
        (builder().max_snapshot_bytes(0), "max_snapshot_bytes"),
        (
            builder().max_snapshot_bytes(MAX_SNAPSHOT_BYTES_LIMIT + 1),
            "max_snapshot_bytes",
        ),
        (builder().user_agent("bad\nagent"), "user_agent"),
        (builder().noise_prefixes(0), "noise_prefixes"),
        (builder().noise_prefixes(MAX_NOISE_PREFIXES + 1), "noise_prefixes"),
        (
            builder().full_hash_cache_bytes(MAX_FULL_HASH_CACHE_BYTES + 1),
            "full_hash_cache_bytes",
        ),
        (
            builder().update_interval(Duration::from_millis(10)),
            "update_interval",
        ),
        (
            builder().initial_jitter(Duration::from_secs(7200)),
            "initial_jitter",
        ),
        (
            (0..8).fold(builder(), |b, i| b.mirror(format!("https://m{i}.example"))),
            "mirror",
        ),
    ];
    for (b, setting) in cases {
        let e = b.build().unwrap_err();
        assert!(
            matches!(e, Error::InvalidSetting { setting: s, .. } if s == setting),
            "{e}"
        );
    }
}

#[test]
fn plain_http_needs_a_loopback_host_or_the_dangerous_opt_in() {
    let remote = || {
        Agent::builder("http://publisher.example")
            .list("malware")
            .trusted_key(trusted())
    };
    let e = remote().build().unwrap_err();
    assert!(
        // No option named: the bindings (Python, C agent) have none.
        matches!(&e, Error::InvalidBaseUrl { reason, .. } if reason.ends_with("loopback host: use https")),
        "{e}"
    );
    assert!(remote().dangerous_allow_plain_http().build().is_ok());
    assert!(
        Agent::builder("https://publisher.example")
            .list("malware")
            .trusted_key(trusted())
            .build()
            .is_ok()
    );
    let e = builder().mirror("http://mirror.example").build().unwrap_err();
    assert!(matches!(e, Error::InvalidBaseUrl { .. }), "{e}");
}

#[test]
fn noise_can_only_be_disabled_by_the_dangerous_method() {
    assert!(builder().dangerous_disable_noise().build().is_ok());
    // A later explicit count overrides it.
    assert!(
        builder()
            .dangerous_disable_noise()
            .noise_prefixes(2)
            .build()
            .is_ok()
    );
    assert!(builder().full_hash_cache_bytes(0).build().is_ok());
    // The refusal of no noise names the method that does send none.
    let e = builder().noise_prefixes(0).build().unwrap_err();
    assert!(e.to_string().contains("dangerous_disable_noise()"), "{e}");
}

#[test]
fn cache_dir_that_cannot_be_created_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let e = builder().cache_dir(file.join("sub")).build().unwrap_err();
    assert!(matches!(e, Error::InvalidCacheDir { .. }), "{e}");
    assert_eq!(e.kind(), ErrorKind::Misconfigured);
    // An empty path: refused, not read as the working directory.
    let e = builder().cache_dir("").build().unwrap_err();
    assert!(matches!(e, Error::InvalidCacheDir { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "cannot use cache directory : the path is empty (\".\" names the working directory)"
    );
    assert_eq!(e.kind(), ErrorKind::Misconfigured);
}

#[test]
fn start_updates_needs_a_runtime() {
    let agent = builder().build().unwrap();
    assert!(matches!(agent.start_updates(), Err(Error::NoRuntime)));
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
