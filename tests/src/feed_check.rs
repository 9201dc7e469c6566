//! Publishes a feed with a real publisher and checks every line of it with
//! a real agent: the no-false-negative check of a whole feed.
//!
//! Each line (each array string of a JSON feed) is read with
//! [`read_line`], the code the build itself runs, which says what the build
//! publishes for it: the entry as the build reads it (the URL or host a
//! user would visit, once white space, quotes, comments and columns are
//! removed) and its full hashes, or the reason it is rejected. The feed is
//! then published by a publisher on 127.0.0.1:0 and every accepted entry is
//! checked with an agent (`check_urls`, full hashes confirmed over HTTP):
//!
//! - an accepted entry must answer `unsafe` — unless an allowlist removed
//!   its full hash, when it must answer what the published set says for
//!   its expressions;
//! - a host-wide entry (`host/`) must also answer `unsafe` for another page
//!   on its host, and, for a host name of up to five labels, for a page on
//!   a subdomain (the host-suffix rule of Safe Browsing v4 tries suffixes
//!   of the last five labels only);
//! - the build's own counts (`/v1/lists`: full hashes, rejected lines by
//!   reason) must equal what the line-by-line reading predicts.
//!
//! `tests/examples/feed_check.rs` runs it on a feed file; the `feeds` tests
//! run it on every feed fixture.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, Instant};

use blocksieve_agent::{Agent, Verdict};
use blocksieve_format::FullHash;
use blocksieve_format::api::ListsResponse;
use blocksieve_publisher::internal::sources::{EntryOutcome, LineOutcome, feed_lines, read_line};
use blocksieve_publisher::{SourceConfig, SourceFormat};

use crate::{RunningPublisher, config};

/// An error of the harness itself (not a finding about the feed).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// URLs per `check_urls` call.
const BATCH: usize = 512;

/// The list the feed is published as.
const LIST: &str = "feed";

/// One item of the feed as the build reads it.
#[derive(Debug)]
pub struct Item {
    /// Where it is: `line N`, or `blacklist[i]` in a JSON document.
    pub at: String,
    /// What reading it gave.
    pub outcome: LineOutcome,
}

/// A benign URL the agent answered `unsafe`.
#[derive(Debug)]
pub struct BenignHit {
    /// The URL checked.
    pub url: String,
    /// The expression that matched.
    pub expression: String,
    /// The feed item whose entry published its full hash, if any (`None`
    /// would be a false positive of the whole system).
    pub listed_by: Option<String>,
}

/// What checking one feed found.
#[derive(Debug, Default)]
pub struct FeedCheck {
    /// Items read (lines, or JSON block-array strings).
    pub items: usize,
    /// Items with no entry: blank lines, comments, hosts boilerplate.
    pub skipped: u64,
    /// Entries the reading accepted.
    pub accepted_entries: u64,
    /// Rejected entries by reason, each with where it is and its text.
    pub rejected: BTreeMap<&'static str, Vec<(String, Vec<u8>)>>,
    /// What reading removed from lines, by kind.
    pub cleaned: BTreeMap<&'static str, u64>,
    /// Items of the allow array (JSON).
    pub allow_items: usize,
    /// Full hashes the reading predicts the build publishes.
    pub published: usize,
    /// Full hashes of accepted entries that the allowlist removed.
    pub removed_by_allow: usize,
    /// Full hashes the build says it published.
    pub build_full_hashes: Option<u64>,
    /// Where the build's counts differ from the reading's.
    pub mismatches: Vec<String>,
    /// URLs checked with the agent.
    pub checked: u64,
    /// Of them: the accepted entries' own URLs.
    pub entry_checks: usize,
    /// Of them: other pages on the hosts of host-wide entries, and pages on
    /// subdomains of those of up to five labels (the host-suffix rule
    /// covers no more).
    pub subdomain_checks: usize,
    /// Of them: entries an allowlist removed, and how many of those still
    /// match another listed expression.
    pub allowed_checks: (usize, usize),
    /// Accepted entries whose text is not UTF-8 (checked percent-escaped).
    pub not_utf8: u64,
    /// Verdicts: unsafe, safe, unverified, invalid.
    pub verdicts: [u64; 4],
    /// Checks that did not answer as expected.
    pub wrong: Vec<String>,
    /// Wall time of the checks.
    pub check_duration: Duration,
    /// Benign URLs checked, and those answered unsafe.
    pub benign: Option<(usize, Vec<BenignHit>)>,
    /// With [`check_feed_via_delta`]: the agent's whole snapshots, deltas
    /// applied, delta bytes and fallbacks after following the feed's
    /// last tenth by a delta.
    pub via_delta: Option<[u64; 4]>,
}

impl FeedCheck {
    /// Rejected entries in all.
    pub fn rejected_total(&self) -> usize {
        self.rejected.values().map(Vec::len).sum()
    }

    /// Whether every check answered as expected, nothing was unverified or
    /// invalid, the counts agree and every benign hit is genuinely listed.
    pub fn passed(&self) -> bool {
        self.wrong.is_empty()
            && self.verdicts[2] == 0
            && self.verdicts[3] == 0
            && self.mismatches.is_empty()
            && self
                .benign
                .as_ref()
                .is_none_or(|(_, hits)| hits.iter().all(|h| h.listed_by.is_some()))
    }

    /// A few lines for a human: counts, verdicts, rejections by reason with
    /// samples, what was cleaned, mismatches and wrong answers.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} items, {} skipped (blank, comments), {} entries accepted, {} rejected; {} full hashes published ({} removed by an allow array of {} items); build says {}\n",
            self.items,
            self.skipped,
            self.accepted_entries,
            self.rejected_total(),
            self.published,
            self.removed_by_allow,
            self.allow_items,
            self.build_full_hashes.map_or("?".to_owned(), |n| n.to_string()),
        );
        let [u, sa, un, inv] = self.verdicts;
        s += &format!(
            "checked {} URLs in {:.1} s ({} entries, {} other pages on the hosts or subdomains of host-wide entries, {} allowed entries of which {} still match another listed expression; {} entries not UTF-8, checked percent-escaped): {u} unsafe, {sa} safe, {un} unverified, {inv} invalid; {} not as expected\n",
            self.checked,
            self.check_duration.as_secs_f64(),
            self.entry_checks,
            self.subdomain_checks,
            self.allowed_checks.0,
            self.allowed_checks.1,
            self.not_utf8,
            self.wrong.len(),
        );
        for w in self.wrong.iter().take(50) {
            s += &format!("  WRONG {w}\n");
        }
        for m in &self.mismatches {
            s += &format!("  MISMATCH {m}\n");
        }
        if !self.rejected.is_empty() {
            s += "rejected by reason:\n";
        }
        for (reason, lines) in &self.rejected {
            s += &format!("  {:>7}  {reason}\n", lines.len());
            for (at, line) in lines.iter().take(3) {
                let shown: String = String::from_utf8_lossy(line).chars().take(100).collect();
                s += &format!("           {at}: {shown}\n");
            }
        }
        if !self.cleaned.is_empty() {
            s += "cleaned before reading:\n";
        }
        for (kind, n) in &self.cleaned {
            s += &format!("  {n:>7}  {kind}\n");
        }
        if let Some([snapshots, deltas, bytes, fallbacks]) = self.via_delta {
            s += &format!(
                "followed by a delta: the agent took {snapshots} whole snapshot(s) (nine lines in ten), then {deltas} delta(s) of {bytes} bytes for the rest, {fallbacks} fallbacks\n"
            );
        }
        if let Some((n, hits)) = &self.benign {
            let genuine = hits.iter().filter(|h| h.listed_by.is_some()).count();
            s += &format!(
                "benign: {n} URLs, {} unsafe, {genuine} of them genuinely listed (their matching full hash is published from a feed entry)\n",
                hits.len()
            );
            for h in hits {
                s += &format!(
                    "  benign unsafe: {}  expression {}  listed by {}\n",
                    h.url,
                    h.expression,
                    h.listed_by.as_deref().unwrap_or("NOTHING")
                );
            }
        }
        s
    }
}

/// The feed's bytes, gunzipped when the file name ends in `.gz` (as the
/// publisher reads it).
///
/// # Errors
///
/// When the file cannot be read or gunzipped.
pub fn read_feed(path: &Path) -> Result<Vec<u8>, BoxError> {
    let raw = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..]).read_to_end(&mut out)?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// The file `member` of the tar archive `path` (gzipped when its name
/// ends in `.gz`), read with the `tar` crate: an archived feed as another
/// reader than the build's sees it.
///
/// # Errors
///
/// When the file cannot be read, or the archive holds no such file.
pub fn read_feed_member(path: &Path, member: &str) -> Result<Vec<u8>, BoxError> {
    let tar = read_feed(path)?;
    let mut archive = tar::Archive::new(&tar[..]);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = entry.path()?.to_string_lossy().into_owned();
        if entry.header().entry_type().is_file()
            && name.trim_start_matches("./") == member.trim_start_matches("./")
        {
            let mut out = Vec::new();
            entry.read_to_end(&mut out)?;
            return Ok(out);
        }
    }
    Err(format!("{} holds no file {member}", path.display()).into())
}

/// Every item of the feed: its lines, split as the build splits them
/// ([`feed_lines`]), or the strings of a JSON document's
/// `blacklist` array; and, for JSON, the strings of its `whitelist` array.
///
/// # Errors
///
/// When a JSON feed is not valid JSON.
pub fn read_items(bytes: &[u8], format: SourceFormat) -> Result<(Vec<Item>, Vec<Item>), BoxError> {
    if format == SourceFormat::Json {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let doc: serde_json::Value = serde_json::from_slice(bytes)?;
        let array = |key: &str| -> Vec<Item> {
            let Some(items) = doc.get(key).and_then(|v| v.as_array()) else {
                return Vec::new();
            };
            items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    v.as_str().map(|s| Item {
                        at: format!("{key}[{i}]"),
                        outcome: read_line(format, s.as_bytes()),
                    })
                })
                .collect()
        };
        return Ok((array("blacklist"), array("whitelist")));
    }
    let items = feed_lines(bytes)
        .enumerate()
        .map(|(i, line)| Item {
            at: format!("line {}", i + 1),
            outcome: read_line(format, line),
        })
        .collect();
    Ok((items, Vec::new()))
}

/// `bytes` as a URL string the agent's API takes: each byte that is not
/// part of valid UTF-8 percent-escaped (the canonicalizer escapes a raw
/// byte the same way), as the `check` example reads its input.
fn url_text(bytes: &[u8]) -> String {
    blocksieve_format::url_text(bytes).into_owned()
}

/// What one check is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// An accepted entry's own URL: must be unsafe.
    Listed,
    /// A page on a host-wide entry's host, or on a subdomain of it: must be
    /// unsafe.
    Subdomain,
    /// An entry an allowlist removed: must answer what the published set
    /// says for its expressions.
    Allowed { listed: bool },
}

struct Check {
    at: String,
    url: String,
    expect: Expect,
}

/// Publishes `feed` (read as `format`) with a publisher on 127.0.0.1:0,
/// checks every accepted entry with an agent, and each of `benign` too.
///
/// # Errors
///
/// When the feed cannot be read, or the publisher or the agent cannot be
/// started; findings about the feed are in the [`FeedCheck`].
pub async fn check_feed(feed: &Path, format: SourceFormat, benign: &[String]) -> Result<FeedCheck, BoxError> {
    check(feed, None, format, benign, false).await
}

/// [`check_feed`] for the file `member` of a tar archive (`.tar` or
/// `.tar.gz`): the publisher's source reads the archive with `member`
/// set; the line-by-line reading takes the file as the `tar` crate
/// extracts it ([`read_feed_member`]).
///
/// # Errors
///
/// As [`check_feed`].
pub async fn check_feed_member(
    archive: &Path,
    member: &str,
    format: SourceFormat,
    benign: &[String],
) -> Result<FeedCheck, BoxError> {
    check(archive, Some(member), format, benign, false).await
}

/// [`check_feed`], with the agent reaching the feed by a delta: the
/// publisher first publishes the feed without every tenth line, the agent
/// takes that snapshot, then the publisher rebuilds from the whole feed and
/// the agent follows by the delta (`GET /v1/lists/{name}/updates/{from}`),
/// which must apply with no fallback; every line is then checked as
/// [`check_feed`] does. For line-based formats (a JSON feed cut by lines
/// is not JSON).
///
/// # Errors
///
/// As [`check_feed`].
pub async fn check_feed_via_delta(
    feed: &Path,
    format: SourceFormat,
    benign: &[String],
) -> Result<FeedCheck, BoxError> {
    check(feed, None, format, benign, true).await
}

async fn check(
    feed: &Path,
    member: Option<&str>,
    format: SourceFormat,
    benign: &[String],
    via_delta: bool,
) -> Result<FeedCheck, BoxError> {
    let bytes = match member {
        Some(member) => read_feed_member(feed, member)?,
        None => read_feed(feed)?,
    };
    let (items, allow_items) = read_items(&bytes, format)?;
    let whole = via_delta.then_some(bytes);
    let mut report = FeedCheck {
        items: items.len(),
        allow_items: allow_items.len(),
        ..FeedCheck::default()
    };

    // What the build publishes, by the line-by-line reading.
    let mut block: HashMap<FullHash, usize> = HashMap::new();
    for (index, item) in items.iter().enumerate() {
        for kind in &item.outcome.cleaned {
            *report.cleaned.entry(kind).or_default() += 1;
        }
        if item.outcome.is_skipped() {
            report.skipped += 1;
        }
        for entry in &item.outcome.entries {
            match entry {
                EntryOutcome::Accepted(readings) => {
                    report.accepted_entries += 1;
                    for h in readings.iter().flat_map(|r| &r.full_hashes) {
                        block.entry(*h).or_insert(index);
                    }
                }
                EntryOutcome::Rejected { text, reason } => {
                    report
                        .rejected
                        .entry(reason)
                        .or_default()
                        .push((item.at.clone(), text.clone()));
                }
            }
        }
    }
    let allow: HashSet<FullHash> = allow_items
        .iter()
        .flat_map(|item| &item.outcome.entries)
        .filter_map(|e| match e {
            EntryOutcome::Accepted(readings) => Some(readings),
            EntryOutcome::Rejected { .. } => None,
        })
        .flatten()
        .flat_map(|r| r.full_hashes.iter().copied())
        .collect();
    let published: HashSet<FullHash> = block.keys().filter(|h| !allow.contains(h)).copied().collect();
    report.published = published.len();
    report.removed_by_allow = block.len() - published.len();

    // Publish it (nine lines in ten first, when it is to reach the agent
    // by a delta).
    let dir = tempfile::tempdir()?;
    let source = match &whole {
        Some(bytes) => {
            let copy = dir.path().join("feed.txt");
            let most: Vec<&[u8]> = (bytes.split(|&b| b == b'\n').enumerate())
                .filter(|(i, _)| i % 10 != 9)
                .map(|(_, line)| line)
                .collect();
            std::fs::write(&copy, most.join(&b'\n'))?;
            copy
        }
        None => std::fs::canonicalize(feed)?,
    };
    let mut cfg = config(
        &dir.path().join("data"),
        LIST,
        vec![SourceConfig {
            member: member.map(str::to_owned),
            ..SourceConfig::file(&source, format)
        }],
    );
    // The whole run answers from one set of full-hash answers.
    cfg.cache_duration_s = 3600;
    let publisher = RunningPublisher::start(cfg).await;
    publisher.wait_ready(Duration::from_secs(900)).await;
    let agent = Agent::builder(publisher.base_url())
        .list(LIST)
        .trusted_key(publisher.public_key())
        // Noise answers would be thrown away; loopback, no one to hide from.
        .dangerous_disable_noise()
        .full_hash_cache_bytes(512 * 1024 * 1024)
        .request_timeout(Duration::from_secs(120))
        .snapshot_timeout(Duration::from_secs(120))
        .build()?;
    agent.update().await?;
    if let Some(bytes) = whole {
        std::fs::write(&source, bytes)?;
        for outcome in publisher.publisher.build_all().await {
            outcome
                .result
                .map_err(|e| format!("the rebuild from the whole feed: {e}"))?;
        }
        agent.update().await?;
        let stats = agent.stats();
        let followed = [
            stats.snapshots_applied,
            stats.deltas_applied,
            stats.delta_bytes,
            stats.delta_fallbacks,
        ];
        if followed[..2] != [1, 1] || followed[3] != 0 {
            report.mismatches.push(format!(
                "the agent did not follow the rest by one delta: snapshots, deltas, bytes, fallbacks {followed:?}"
            ));
        }
        report.via_delta = Some(followed);
    }
    // A build's status is recorded just after its snapshot is served (what
    // `wait_ready` waits for): wait for it, or the build's counts read as
    // none (a flaky `MISMATCH … build 0`).
    let recorded = std::time::Instant::now();
    while publisher.publisher.state().lists[0]
        .last_build
        .lock()
        .map_or(true, |b| b.is_none())
        && recorded.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let lists: ListsResponse = reqwest::get(format!("{}/v1/lists", publisher.base_url()))
        .await?
        .json()
        .await?;
    let list = lists
        .lists
        .iter()
        .find(|l| l.name == LIST)
        .ok_or("the publisher does not list the feed")?;
    report.build_full_hashes = list.snapshot.as_ref().map(|s| s.entries);
    if report.build_full_hashes != Some(published.len() as u64) {
        report.mismatches.push(format!(
            "the build published {:?} full hashes, the reading predicts {}",
            report.build_full_hashes,
            published.len()
        ));
    }
    let build_rejected = list
        .last_build
        .as_ref()
        .map(|b| b.rejected_by_reason.clone())
        .unwrap_or_default();
    for (reason, lines) in &report.rejected {
        let theirs = build_rejected.get(*reason).copied().unwrap_or(0);
        if theirs != lines.len() as u64 {
            report
                .mismatches
                .push(format!("{reason:?}: build {theirs}, reading {}", lines.len()));
        }
    }
    for (reason, n) in &build_rejected {
        if !report.rejected.contains_key(reason.as_str()) && *n != 0 {
            report
                .mismatches
                .push(format!("{reason:?}: build {n}, reading 0"));
        }
    }

    // Check every accepted entry with the real agent.
    let mut checks = Vec::new();
    let mut seen = HashSet::new();
    for item in &items {
        for entry in &item.outcome.entries {
            let EntryOutcome::Accepted(readings) = entry else {
                continue;
            };
            for reading in readings {
                if std::str::from_utf8(&reading.text).is_err() {
                    report.not_utf8 += 1;
                }
                let url = url_text(&reading.text);
                // A sha256 line has no URL; one check per URL.
                if reading.expressions.is_empty() || !seen.insert(url.clone()) {
                    continue;
                }
                let allowed = reading.full_hashes.iter().all(|h| allow.contains(h));
                let expect = if allowed {
                    let mut hashes = Vec::new();
                    let listed = blocksieve_format::full_hashes(url.as_bytes(), &mut hashes).is_ok()
                        && hashes.iter().any(|h| published.contains(h));
                    Expect::Allowed { listed }
                } else {
                    Expect::Listed
                };
                checks.push(Check {
                    at: item.at.clone(),
                    url,
                    expect,
                });
                // Each host-wide expression's host (an IP address host has
                // two: `1.2.3.4/` and `[::ffff:1.2.3.4]/`).
                let hosts = reading
                    .expressions
                    .iter()
                    .filter_map(|e| e.strip_suffix('/').filter(|h| !h.contains('/')));
                for host in hosts.filter(|_| !allowed) {
                    // Any page on the host itself.
                    checks.push(Check {
                        at: item.at.clone(),
                        url: format!("http://{host}/some/page.html?q=1"),
                        expect: Expect::Subdomain,
                    });
                    // A page on a subdomain: the host-suffix rule tries the
                    // exact host and suffixes of its last five labels
                    // (Safe Browsing v4, "Suffix/Prefix Expressions"), so a
                    // listed host of up to five labels covers its
                    // subdomains; a longer one only itself.
                    let is_ip = host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok();
                    if !is_ip && host.split('.').count() <= 5 {
                        checks.push(Check {
                            at: item.at.clone(),
                            url: format!("http://feed-check-sub.{host}/some/page.html?q=1"),
                            expect: Expect::Subdomain,
                        });
                    }
                }
            }
        }
    }
    report.subdomain_checks = checks.iter().filter(|c| c.expect == Expect::Subdomain).count();
    report.allowed_checks = (
        checks
            .iter()
            .filter(|c| matches!(c.expect, Expect::Allowed { .. }))
            .count(),
        checks
            .iter()
            .filter(|c| c.expect == Expect::Allowed { listed: true })
            .count(),
    );
    report.entry_checks = checks.len() - report.subdomain_checks - report.allowed_checks.0;
    let started = Instant::now();
    for batch in checks.chunks(BATCH) {
        let verdicts = agent.check_urls(batch.iter().map(|c| c.url.as_str())).await;
        for (check, verdict) in batch.iter().zip(verdicts) {
            report.checked += 1;
            let (slot, is_unsafe) = match &verdict {
                Ok(Verdict::Unsafe { .. }) => (0, Some(true)),
                Ok(Verdict::Safe { .. }) => (1, Some(false)),
                Ok(_) => (2, None), // unverified
                Err(_) => (3, None),
            };
            report.verdicts[slot] += 1;
            let (want, what) = match check.expect {
                Expect::Listed => (true, "listed entry"),
                Expect::Subdomain => (true, "other page on a listed host"),
                Expect::Allowed { listed } => (listed, "allowed entry"),
            };
            if is_unsafe != Some(want) {
                report
                    .wrong
                    .push(format!("{} ({what}): {} -> {verdict:?}", check.at, check.url));
            }
        }
    }
    report.check_duration = started.elapsed();

    // Benign URLs: every unsafe one with the feed item listing it.
    if !benign.is_empty() {
        let mut hits = Vec::new();
        for batch in benign.chunks(BATCH) {
            let verdicts = agent.check_urls(batch).await;
            for (url, verdict) in batch.iter().zip(verdicts) {
                if let Ok(Verdict::Unsafe {
                    expression,
                    full_hash,
                    ..
                }) = verdict
                {
                    let listed_by = block
                        .get(&full_hash)
                        .filter(|_| published.contains(&full_hash))
                        .map(|&i| {
                            let shown: String = match items[i].outcome.entries.first() {
                                Some(EntryOutcome::Accepted(r)) => {
                                    String::from_utf8_lossy(&r[0].text).chars().take(120).collect()
                                }
                                _ => String::new(),
                            };
                            format!("{} ({shown})", items[i].at)
                        });
                    hits.push(BenignHit {
                        url: url.clone(),
                        expression,
                        listed_by,
                    });
                }
            }
        }
        report.benign = Some((benign.len(), hits));
    }
    publisher.stop().await;
    Ok(report)
}
