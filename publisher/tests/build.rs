//! The build is pure: feed bytes, a signing key and a time in; a signed
//! snapshot, its full hashes and a report out — no data directory, no clock.

#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use blocksieve_format::{DecodeLimits, FullHash, SigningKey, decode};
use blocksieve_publisher::internal::build::{
    BuildRequest, Cancel, KeepTo, LastGood, LoadedSource, PeakRssProbe, SourceRole, SourceUpdate, build_list,
    read_sources,
};
use blocksieve_publisher::internal::fetch::{ContentEncoding, Fetched, Validators};
use blocksieve_publisher::internal::storage::CacheMeta;
use blocksieve_publisher::{ListConfig, SourceConfig, SourceFormat};

/// A fixed build time, Unix seconds.
const NOW: u64 = 1_800_000_000;

const FEED: &str = "http://phish.example/login\nhttp://evil.example/a/b.html?x=1\n# a comment\nbad.example\n";

fn source(bytes: &str) -> LoadedSource {
    LoadedSource {
        config: SourceConfig::file("feed.txt", SourceFormat::Urls),
        role: SourceRole::Block,
        fetched: Fetched::Fresh {
            bytes: bytes.as_bytes().to_vec(),
            validators: Validators::default(),
        },
        last_good: LastGood::none(),
        read_duration: Duration::ZERO,
        keep_to: KeepTo::memory(),
    }
}

fn expected_hashes() -> Vec<FullHash> {
    let mut hashes: Vec<FullHash> = ["phish.example/login", "evil.example/a/b.html?x=1", "bad.example/"]
        .iter()
        .map(|e| FullHash::of(e.as_bytes()))
        .collect();
    hashes.sort_unstable();
    hashes
}

#[test]
fn a_build_from_feed_bytes_in_memory_decodes_and_holds_the_feed_full_hashes() {
    let key = SigningKey::from_secret_bytes([7; 32]);
    let mut list = ListConfig::new("phishing", vec![]);
    list.gates.min_entries = 0;
    let request = BuildRequest {
        list: &list,
        previous: None,
        after_version: 0,
        now: NOW,
        ttl: Duration::from_secs(3600),
        probe: PeakRssProbe::NONE,
        key: &key,
        spill: None,
        cancel: None,
    };
    let built = build_list(&request, vec![source(FEED)]).unwrap();

    assert_eq!(built.version, NOW);
    assert_eq!(built.hashes, expected_hashes());
    assert_eq!(built.report.sources[0].state, "fresh");
    assert_eq!(built.report.sizing.entries, 3);
    let snapshot = decode(
        &built.snapshot,
        &[key.public_key().clone()],
        &DecodeLimits::default(),
        NOW,
    )
    .unwrap();
    assert_eq!(snapshot.header().list_name, "phishing");
    assert_eq!(snapshot.header().created_at, NOW);
    assert_eq!(snapshot.header().expires_at, NOW + 3600);
    assert_eq!(snapshot.header().full_hash_count, 3);
    for hash in expected_hashes() {
        assert!(snapshot.probably_contains(&hash), "{hash:?}");
    }
    // No probe, no memory read: the build sampled nothing of the process.
    assert!(!built.report.timings.stages.is_empty());
    assert!(
        built
            .report
            .timings
            .stages
            .iter()
            .all(|s| s.peak_rss_bytes.is_none())
    );
    // The same inputs give the same bytes.
    let again = build_list(&request, vec![source(FEED)]).unwrap();
    assert_eq!(again.snapshot, built.snapshot);
}

#[test]
fn a_source_not_modified_is_built_from_the_last_good_content_it_is_given() {
    let validators = Validators {
        etag: Some("\"v1\"".to_owned()),
        last_modified: None,
        date: None,
    };
    let meta = CacheMeta {
        validators: validators.clone(),
        fetched_at: NOW - 60,
        accepted: 3,
    };
    let not_modified = LoadedSource {
        fetched: Fetched::NotModified,
        last_good: LastGood::in_memory(FEED.as_bytes().to_vec(), meta),
        ..source("")
    };
    let mut updates = Vec::new();
    let read = read_sources(
        "phishing",
        vec![not_modified],
        NOW,
        PeakRssProbe::NONE,
        &mut updates,
        &Cancel::default(),
    )
    .unwrap();
    assert_eq!(read.hashes, expected_hashes());
    assert_eq!(read.sources[0].state, "not_modified");
    assert_eq!(read.sources[0].content_fetched_at, Some(NOW - 60));
    // Only the metadata is to be stored again, stamped with the build time.
    assert!(matches!(
        updates.as_slice(),
        [(0, SourceUpdate::Meta(CacheMeta { fetched_at: NOW, accepted: 3, validators: v }))] if *v == validators
    ));

    // Fresh content is to be stored whole, compressed (zstd: it came
    // uncompressed and its copy is held in memory; one written to a file
    // is kept as received).
    let mut updates = Vec::new();
    read_sources(
        "phishing",
        vec![source(FEED)],
        NOW,
        PeakRssProbe::NONE,
        &mut updates,
        &Cancel::default(),
    )
    .unwrap();
    let [(0, SourceUpdate::Store { copy, encoding, meta })] = updates.as_mut_slice() else {
        panic!("{updates:?}");
    };
    assert_eq!(*encoding, ContentEncoding::Zstd);
    assert_eq!(
        zstd::stream::decode_all(copy.contents().unwrap().as_slice()).unwrap(),
        FEED.as_bytes()
    );
    assert!(meta.fetched_at == NOW && meta.accepted == 3);
}

/// Builds `config`'s source as the publisher fetches it, and returns the
/// full hashes and the source's state.
async fn fetch_and_build(config: SourceConfig) -> (Vec<FullHash>, String) {
    use blocksieve_publisher::internal::fetch::fetch;
    let (fetched, _) = fetch(Some(&reqwest::Client::new()), "test", &config, None).await;
    let key = SigningKey::from_secret_bytes([7; 32]);
    let mut list = ListConfig::new("phishing", vec![]);
    list.gates.min_entries = 0;
    let request = BuildRequest {
        list: &list,
        previous: None,
        after_version: 0,
        now: NOW,
        ttl: Duration::from_secs(3600),
        probe: PeakRssProbe::NONE,
        key: &key,
        spill: None,
        cancel: None,
    };
    let source = LoadedSource {
        config,
        role: SourceRole::Block,
        fetched,
        last_good: LastGood::none(),
        read_duration: Duration::ZERO,
        keep_to: KeepTo::memory(),
    };
    let built = build_list(&request, vec![source]).unwrap();
    (built.hashes, built.report.sources[0].state.clone())
}

/// A source file is read without seeking back after its start is checked:
/// a named pipe (or `/dev/stdin`) is a source like any file.
#[tokio::test]
async fn a_named_pipe_is_read_as_a_source_file() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("feed.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(&fifo, FEED).unwrap())
    };
    let (hashes, state) = fetch_and_build(SourceConfig::file(&fifo, SourceFormat::Urls)).await;
    writer.join().unwrap();
    assert_eq!((hashes, state.as_str()), (expected_hashes(), "fresh"));
}

/// A valid gzip file whose header alone (an extra field and a comment, each
/// within gzip's limits) runs past the start that the HTML check decodes is
/// read whole, not refused as cut short.
#[tokio::test]
async fn a_gzip_file_with_a_header_longer_than_the_checked_start_is_read() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("feed.txt.gz");
    let mut gz = flate2::GzBuilder::new()
        .extra(vec![b'x'; 65_535])
        .comment(vec![b'c'; 10_000])
        .write(Vec::new(), flate2::Compression::default());
    gz.write_all(FEED.as_bytes()).unwrap();
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    let (hashes, state) = fetch_and_build(SourceConfig::file(&path, SourceFormat::Urls)).await;
    assert_eq!((hashes, state.as_str()), (expected_hashes(), "fresh"));
}
