//! A source's last good content: kept wherever the source moves in its
//! list (its fallback when the source is down, and its per-source
//! `max_shrink` baseline; copies an earlier version kept by position are
//! read and replaced), and never a fallback older than what a published
//! snapshot was built from.

use blocksieve_format::FullHash;
use blocksieve_publisher::internal::sources::url_expression;
use blocksieve_publisher::{ListConfig, Publisher, SourceConfig, SourceFormat};
use blocksieve_tests::config;
use blocksieve_tests::feed::FakeFeed;

fn publisher_with(dir: &std::path::Path, sources: Vec<SourceConfig>) -> Publisher {
    let mut cfg = config(dir, "unused", vec![]);
    cfg.lists = vec![ListConfig::new("feed", sources)];
    blocksieve_tests::reopen(cfg).unwrap()
}

fn url_hash(url: &str) -> FullHash {
    FullHash::of(url_expression(url.as_bytes()).unwrap().as_bytes())
}

fn serves(p: &Publisher, url: &str) -> bool {
    p.state().lists[0]
        .current
        .load()
        .as_ref()
        .is_some_and(|s| s.hashes.contains(&url_hash(url)))
}

fn urls(tag: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("http://{tag}{i}.example/phish\n"))
        .collect()
}

fn src(feed: &FakeFeed) -> SourceConfig {
    let mut s = SourceConfig::http(feed.url(), SourceFormat::Urls);
    s.retries = Some(0);
    s
}

/// Sources [A, B] published; a new source C inserted first while B is
/// down. B's last good content was keyed by its position, so it was not
/// found at its new one: every build failed (`no last good content to fall
/// back to`), C's URLs never published while B was down. Appended at the
/// end, C worked (the control). Now both orders publish C and keep B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_inserted_before_a_down_source_keeps_its_last_good_content() {
    for insert_first in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let a = FakeFeed::start(urls("a", 300).as_bytes()).await;
        let b = FakeFeed::start(urls("b", 100).as_bytes()).await;
        let c = FakeFeed::start(urls("c", 50).as_bytes()).await;
        {
            let p = publisher_with(dir.path(), vec![src(&a), src(&b)]);
            assert!(p.build_list(0).await.result.is_ok());
            assert!(serves(&p, "http://b0.example/phish"));
        }
        b.set(|r| r.status = 404);
        let sources = if insert_first {
            vec![src(&c), src(&a), src(&b)]
        } else {
            vec![src(&a), src(&b), src(&c)]
        };
        let p = publisher_with(dir.path(), sources);
        let outcome = p.build_list(0).await;
        assert!(
            outcome.result.is_ok(),
            "insert_first={insert_first}: {:?}",
            outcome.result
        );
        let states: Vec<String> = outcome
            .report
            .as_ref()
            .unwrap()
            .sources
            .iter()
            .map(|s| s.state.clone())
            .collect();
        let b_at = if insert_first { 2 } else { 1 };
        assert_eq!(
            states[b_at], "last_good",
            "insert_first={insert_first}: {states:?}"
        );
        assert!(
            serves(&p, "http://c0.example/phish"),
            "insert_first={insert_first}"
        );
        assert!(
            serves(&p, "http://b0.example/phish"),
            "insert_first={insert_first}"
        );
    }
}

/// Sources [A, B, C] published; C moved first, and in the first build
/// after, B answers `200` with an empty body. Its per-source `max_shrink`
/// baseline was keyed by position, so the gate skipped it: published
/// without B's entries, the empty content kept as B's last good content
/// (B's URLs gone through its later outages too). Now the gate refuses
/// the build, as it does without the reorder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_emptied_after_a_reorder_is_refused_by_its_own_gate() {
    for reorder in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let a = FakeFeed::start(urls("a", 300).as_bytes()).await;
        let b = FakeFeed::start(urls("b", 100).as_bytes()).await;
        let c = FakeFeed::start(urls("c", 50).as_bytes()).await;
        {
            let p = publisher_with(dir.path(), vec![src(&a), src(&b), src(&c)]);
            assert!(p.build_list(0).await.result.is_ok());
        }
        b.set(|r| r.body = Vec::new());
        let sources = if reorder {
            vec![src(&c), src(&a), src(&b)]
        } else {
            vec![src(&a), src(&b), src(&c)]
        };
        let p = publisher_with(dir.path(), sources);
        let outcome = p.build_list(0).await;
        assert!(
            matches!(&outcome.result, Err(blocksieve_publisher::Error::Refused { .. })),
            "reorder={reorder}: {:?}",
            outcome.result
        );
        assert!(serves(&p, "http://b0.example/phish"), "reorder={reorder}");
        // B down in the next build: its last good content is its full one.
        b.set(|r| r.status = 404);
        assert!(p.build_list(0).await.result.is_ok());
        assert!(serves(&p, "http://b0.example/phish"), "reorder={reorder}");
    }
}

/// A data directory an earlier version wrote keeps each source's copy
/// under its position (`<i>-<label>`): read as the source's last good
/// content (here while the source is down, after a reorder), and removed
/// once the source's own copy is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_kept_by_position_are_read_then_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeFeed::start(urls("a", 300).as_bytes()).await;
    let b = FakeFeed::start(urls("b", 100).as_bytes()).await;
    {
        let p = publisher_with(dir.path(), vec![src(&a), src(&b)]);
        assert!(p.build_list(0).await.result.is_ok());
    }
    // As an earlier version kept them: `<i>-<label>` for each source.
    let sources = dir.path().join("sources/feed");
    let label = |feed: &FakeFeed| hex::encode(&FullHash::of(feed.url().as_bytes()).0[..8]);
    for entry in std::fs::read_dir(&sources).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (i, feed) in [(0, &a), (1, &b)] {
            let own = format!("{}-", label(feed));
            if let Some(rest) = name.strip_prefix(&own) {
                let (_, tail) = rest.split_once('.').unwrap();
                let legacy = sources.join(format!("{i}-{}.{tail}", label(feed)));
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if name.ends_with(".meta.json") {
                    // The metadata names its content's key: the legacy one.
                    let stem = name.trim_end_matches(".meta.json");
                    let renamed = text.replace(stem, &format!("{i}-{}", label(feed)));
                    std::fs::write(&legacy, renamed).unwrap();
                    std::fs::remove_file(&path).unwrap();
                } else {
                    std::fs::rename(&path, &legacy).unwrap();
                }
            }
        }
    }
    let names = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&sources)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert!(
        names().iter().all(|n| n.starts_with("0-") || n.starts_with("1-")),
        "{:?}",
        names()
    );

    // B moved first and down: its copy (kept at position 1) is read.
    b.set(|r| r.status = 503);
    let p = publisher_with(dir.path(), vec![src(&b), src(&a)]);
    let outcome = p.build_list(0).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(outcome.report.as_ref().unwrap().sources[0].state, "last_good");
    assert!(serves(&p, "http://b0.example/phish"));
    // A's fresh content stored under its own key replaced its old copy;
    // B, back, the same.
    b.set(|r| r.status = 200);
    assert!(p.build_list(0).await.result.is_ok());
    let left = names();
    assert!(
        left.iter().all(|n| !n.starts_with("0-") && !n.starts_with("1-")),
        "position-keyed copies left: {left:?}"
    );
    assert!(serves(&p, "http://b0.example/phish"));
    assert!(serves(&p, "http://a0.example/phish"));
}

/// Fresh content is published first and stored as the source's last good
/// content after: a copy that could not be stored there (here: its file
/// name taken; a kill between the two steps, an object store's `PUT`
/// error, a full disk) left the older copy, which the next build with the
/// source down fell back to: the entries the feed added, published by
/// the build before, **left the list** (within `max_shrink`). The stored
/// copy is now marked as older before publishing; a build that would fall
/// back to it fails instead, and the published snapshot serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_not_stored_after_publishing_is_no_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let first = urls("a", 300);
    let a = FakeFeed::start(first.as_bytes()).await;
    a.set(|r| r.etag = Some("\"v1\"".into()));
    let p = publisher_with(dir.path(), vec![src(&a)]);
    assert!(p.build_list(0).await.result.is_ok());

    // The feed adds 100 URLs; the copy of that content cannot be stored:
    // every name it could take in the source's directory is taken.
    let second = format!("{first}{}", urls("new", 100));
    a.set(|r| {
        r.body = second.clone().into_bytes();
        r.etag = Some("\"v2\"".into());
    });
    let sources = dir.path().join("sources/feed");
    let stem = std::fs::read_dir(&sources)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find_map(|n| n.strip_suffix(".meta.json").map(str::to_owned))
        .unwrap();
    let content = &FullHash::of(second.as_bytes()).to_string()[..16];
    let blocker = sources.join(format!("{stem}.{content}.data"));
    std::fs::create_dir_all(blocker.join("x")).unwrap();
    let outcome = p.build_list(0).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    let listed = "http://new0.example/phish";
    assert!(serves(&p, listed), "build 2 publishes the new URL");
    let published = outcome.result.unwrap();
    std::fs::remove_dir_all(&blocker).unwrap();

    // The feed is down for the next build: no fallback to the older copy.
    a.set(|r| r.status = 503);
    let outcome = p.build_list(0).await;
    let error = match &outcome.result {
        Err(blocksieve_publisher::Error::Source { reason, .. }) => reason.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        error.contains("a fallback to it would drop published entries"),
        "{error}"
    );
    assert!(serves(&p, listed), "a URL published by build 2 left the list");
    assert_eq!(
        p.state().lists[0].current.load().as_ref().unwrap().header.version,
        published
    );

    // The feed back: its content fetched whole and stored; a later outage
    // falls back to it.
    a.set(|r| r.status = 200);
    assert!(p.build_list(0).await.result.is_ok());
    a.set(|r| r.status = 503);
    let outcome = p.build_list(0).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(outcome.report.as_ref().unwrap().sources[0].state, "last_good");
    assert!(serves(&p, listed));
}

/// A feed changed again within the second its `Last-Modified` names (a
/// generator writing its file in steps, or twice, while a build fetched
/// it: both on the same cron minute), served without an `ETag` by a server
/// that compares `If-Modified-Since` with the file's time at the
/// resolution of HTTP dates, as file servers do. The build kept that
/// `Last-Modified`, the next builds sent it back and got `304 Not
/// Modified`, and the URLs written later in that second were **never
/// published** (the copy taken mid-change served on as the source's
/// content) until the feed changed again. A `Last-Modified` is now kept
/// only when the response's `Date` is at least a second past it (RFC 9110
/// §8.8.2.2): the next build fetches the feed whole; one kept later still
/// makes an unchanged feed cost a `304`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_changed_again_within_its_last_modified_second_is_fetched_whole_again() {
    use std::time::{Duration, UNIX_EPOCH};
    let dir = tempfile::tempdir().unwrap();
    let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + ms);
    let first = urls("a", 300);
    let a = FakeFeed::start(first.as_bytes()).await;
    // Fetched 200 ms into the second the generator began writing the file.
    a.set(|r| r.last_modified = Some((at(0), at(200))));
    let p = publisher_with(dir.path(), vec![src(&a)]);
    assert!(p.build_list(0).await.result.is_ok());
    assert!(serves(&p, "http://a0.example/phish"));

    // The rest of the file, written 600 ms into that second; the next
    // build half an hour later.
    let whole = format!("{first}{}", urls("late", 20));
    a.set(|r| {
        r.body = whole.into_bytes();
        r.last_modified = Some((at(600), at(1_800_000)));
    });
    let outcome = p.build_list(0).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert!(
        serves(&p, "http://late0.example/phish"),
        "a URL written later in the second of the feed's Last-Modified is published"
    );
    assert_eq!(outcome.report.as_ref().unwrap().sources[0].state, "fresh");
    assert_eq!(
        a.seen()[1].if_modified_since,
        None,
        "a Last-Modified in the second of its Date is not sent back"
    );

    // That answer's Last-Modified, half an hour before its Date, is kept:
    // the feed unchanged costs a 304.
    let outcome = p.build_list(0).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert!(a.seen()[2].if_modified_since.is_some());
    assert_eq!(outcome.report.as_ref().unwrap().sources[0].state, "not_modified");
    assert!(serves(&p, "http://late0.example/phish"));
}

/// The same with an `ETag` made as nginx makes it, of the file's time in
/// seconds and its size (`"<mtime>-<size>"`): a rewrite of the same size
/// later in that second keeps it, and a server answers `If-None-Match`
/// before `If-Modified-Since`. The `ETag` is not sent back either while
/// `Last-Modified` is not settled, so the rewrite is fetched whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_size_rewrite_within_the_etag_second_is_fetched_whole_again() {
    use std::time::{Duration, UNIX_EPOCH};
    let dir = tempfile::tempdir().unwrap();
    let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + ms);
    let first = urls("a", 300);
    let a = FakeFeed::start(first.as_bytes()).await;
    let etag = "\"6553f100-12c\"".to_owned();
    a.set(|r| {
        r.etag = Some(etag.clone());
        r.last_modified = Some((at(0), at(200)));
    });
    let p = publisher_with(dir.path(), vec![src(&a)]);
    assert!(p.build_list(0).await.result.is_ok());

    // Rewritten 600 ms into that second, of the same size: the same ETag.
    let rewritten = first.replace("a0.example", "b0.example");
    assert_eq!(rewritten.len(), first.len());
    a.set(|r| {
        r.body = rewritten.into_bytes();
        r.last_modified = Some((at(600), at(1_800_000)));
    });
    let outcome = p.build_list(0).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(
        a.seen()[1].if_none_match,
        None,
        "an ETag beside an unsettled Last-Modified is not sent back"
    );
    assert!(
        serves(&p, "http://b0.example/phish"),
        "a URL of the same-size rewrite is published"
    );

    // Settled now: both validators go back, and the unchanged feed is a 304.
    let outcome = p.build_list(0).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(a.seen()[2].if_none_match.as_deref(), Some(etag.as_str()));
    assert_eq!(outcome.report.as_ref().unwrap().sources[0].state, "not_modified");
}

/// The reviewer's repro: a feed of 200 Google Drive URLs answered `200`
/// with no `Content-Length` and not chunked (`Connection: close`: its end
/// is the connection closing), then cut right after
/// `https://drive.google.com` on line 101. The close looked like the end:
/// the build published the cut content, its last line listing all of
/// Google Drive (`drive.google.com/`), and lost 99 entries, less than
/// `max_shrink` notices. Now a body whose end nothing marks and that ends
/// mid-line may be cut off: a failure that may pass, the source's last
/// good content used (a source without one fails its list).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_feed_cut_mid_line_without_framing_lists_no_host_and_falls_back() {
    use blocksieve_tests::fake::RawServer;
    let full: String = (0..200)
        .map(|i| format!("https://drive.google.com/file/d/1AbC{i}xyz/view?usp=sharing\n"))
        .collect();
    let cut =
        full.find("https://drive.google.com/file/d/1AbC100xyz/").unwrap() + "https://drive.google.com".len();
    let (full, cut) = (full.as_bytes(), &full.as_bytes()[..cut]);
    let why = "body ended mid-line with no Content-Length or chunked framing: may be cut off";
    let host = "https://drive.google.com";
    let listed = "https://drive.google.com/file/d/1AbC150xyz/view?usp=sharing";

    // The whole feed (its end a line end), then the cut one, every time.
    let mut script = vec![RawServer::until_close(full)];
    script.extend(std::iter::repeat_n(RawServer::until_close(cut), 8));
    let feed = RawServer::start(script).await;
    let mut source = SourceConfig::http(format!("{}/feed.txt", feed.base_url), SourceFormat::Urls);
    source.retries = Some(0);
    let dir = tempfile::tempdir().unwrap();
    let p = publisher_with(dir.path(), vec![source.clone()]);
    let first = p.build_list(0).await;
    assert!(first.result.is_ok(), "{:?}", first.result);
    assert!(serves(&p, listed) && !serves(&p, host));
    assert_eq!(feed.connections(), 1);

    let second = p.build_list(0).await;
    assert!(second.result.is_ok(), "{:?}", second.result);
    let report = second.report.unwrap();
    let status = &report.sources[0];
    assert_eq!(status.state, "last_good", "{status:?}");
    assert_eq!(status.error.as_deref(), Some(why), "{status:?}");
    assert!(!serves(&p, host), "the host listed host-wide");
    assert!(serves(&p, listed));
    // Asked once, then at once for the content uncompressed (reqwest hides
    // a gzip-encoded response's `Content-Length`).
    assert_eq!(feed.connections(), 3);

    // A new source with nothing to fall back to fails its list.
    let other = tempfile::tempdir().unwrap();
    let p = publisher_with(other.path(), vec![source]);
    let error = p.build_list(0).await.result.unwrap_err().to_string();
    assert!(error.contains(why), "{error}");
    assert!(!serves(&p, host));
}
