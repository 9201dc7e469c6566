//! Every line of every feed fixture, published by a real publisher and
//! checked by a real agent: each entry the build accepts answers `unsafe`,
//! each host-wide entry blocks its subdomains too, the build's counts are
//! the line-by-line reading's, and no benign fixture URL is blocked unless
//! a feed entry lists it (`blocksieve_tests::feed_check`; the same check
//! runs on whole real feeds with `tests/examples/feed_check.rs`).

use blocksieve_publisher::SourceFormat;
use blocksieve_tests::feed_check::{FeedCheck, check_feed, check_feed_member, check_feed_via_delta};
use blocksieve_tests::{fixture_lines, fixtures};

async fn check(name: &str, format: SourceFormat) -> FeedCheck {
    let benign = fixture_lines("benign-urls.txt");
    let report = check_feed(&fixtures().join(name), format, &benign)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(report.passed(), "{name}:\n{}", report.summary());
    assert!(report.entry_checks > 0, "{name}: nothing checked");
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_accepted_line_of_the_url_fixtures_answers_unsafe() {
    for name in ["phishing-urls.txt", "phishing-urls-union-quirks.txt"] {
        let report = check(name, SourceFormat::Urls).await;
        assert_eq!(report.verdicts[0], report.checked, "{name}");
    }
}

/// The same for an agent that reaches the list by a delta: nine lines in
/// ten as a snapshot, the rest as one delta.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_accepted_line_answers_unsafe_when_the_last_tenth_arrives_by_a_delta() {
    let benign = fixture_lines("benign-urls.txt");
    for (name, format) in [
        ("phishing-urls.txt", SourceFormat::Urls),
        ("phishing-hosts.txt", SourceFormat::Hosts),
    ] {
        let report = check_feed_via_delta(&fixtures().join(name), format, &benign)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(report.passed(), "{name}:\n{}", report.summary());
        let [snapshots, deltas, bytes, fallbacks] = report.via_delta.unwrap();
        assert_eq!((snapshots, deltas, fallbacks), (1, 1, 0), "{name}");
        assert!(bytes > 0 && report.entry_checks > 0, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_accepted_line_of_the_host_and_domain_fixtures_blocks_its_host_and_subdomains() {
    for (name, format) in [
        ("phishing-hosts.txt", SourceFormat::Hosts),
        ("stevenblack-domains.txt", SourceFormat::Domains),
        ("urlhaus-filter.txt", SourceFormat::AdblockHosts),
    ] {
        let report = check(name, format).await;
        assert!(report.subdomain_checks > 0, "{name}");
    }
}

/// A category of UT1 as it ships, a `.tar.gz` of several files made by
/// GNU tar (`phishing/domains`, `phishing/urls`, `phishing/usage`): each
/// list file a source names by `member` is published whole, as the `tar`
/// crate extracts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_line_of_an_archived_feed_s_member_answers_unsafe() {
    let benign = fixture_lines("benign-urls.txt");
    let archive = fixtures().join("ut1-phishing.tar.gz");
    for (member, format) in [
        ("phishing/domains", SourceFormat::Domains),
        ("phishing/urls", SourceFormat::Urls),
    ] {
        let report = check_feed_member(&archive, member, format, &benign)
            .await
            .unwrap_or_else(|e| panic!("{member}: {e}"));
        assert!(report.passed(), "{member}:\n{}", report.summary());
        assert_eq!(report.rejected_total(), 0, "{member}:\n{}", report.summary());
        assert!(report.accepted_entries >= 40, "{member}:\n{}", report.summary());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metamask_blacklist_is_blocked_and_its_whitelist_is_not() {
    let report = check("metamask-whitelist-overlap.json", SourceFormat::Json).await;
    assert!(report.removed_by_allow > 0, "{}", report.summary());
    assert!(report.allowed_checks.0 > 0, "{}", report.summary());
}

/// Every entry of `fixtures/browser-forms.jsonl` as Chromium wrote it when
/// visiting it (default port dropped, `..` resolved, host lowercased, a
/// hex IPv4 address in dotted form, `'` and non-ASCII escaped, …) hits a
/// full hash its feed line publishes: a user of the extension, whose agent
/// is handed the browser's URL, is warned as the feed says.
#[test]
fn every_entry_as_a_browser_writes_it_hits_what_its_line_publishes() {
    use blocksieve_tests::browser_forms::{BrowserForm, check};
    let text = std::fs::read_to_string(fixtures().join("browser-forms.jsonl")).unwrap();
    let forms: Vec<BrowserForm> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(forms.len() >= 300, "{} forms", forms.len());
    let misses: Vec<String> = forms.iter().filter_map(|f| check(f).err()).collect();
    assert!(
        misses.is_empty(),
        "{} of {} missed:\n{}",
        misses.len(),
        forms.len(),
        misses.join("\n")
    );
    // The check can fail: the browser's form of another entry hits nothing.
    let mut other = forms[0].clone();
    other.href = "http://not-listed.example/".to_owned();
    assert!(check(&other).is_err());
}
