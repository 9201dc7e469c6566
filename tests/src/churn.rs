//! A seeded churn generator: how a threat list changes from build to build.
//!
//! [`Churn`] starts from a list of entries (URLs or expressions) and, at
//! each [`Churn::next_build`], removes a fraction of them and adds new
//! ones, returning what changed ([`ChurnBuild`]); [`Churn::entries`] is the
//! list as the build publishes it. The rates are per day
//! ([`ChurnConfig`]; by default 2 % added and 2 % removed over 48 builds a
//! day, the churn of a phishing list rebuilt every 30 minutes) and apply to
//! the list's length at each build; fractions of an entry carry over to the
//! next build, so a day's changes match the daily rate however small the
//! list.
//!
//! Removed entries are drawn uniformly from the list. New entries are
//! synthetic phishing URLs (brand look-alike hosts, free-hosting
//! subdomains, raw IPv4 hosts, shared hosts with a path), each carrying a
//! token no other entry of the generator has: they are distinct from one
//! another and from every entry the list ever held, and the same seed and
//! initial list always give the same builds.

use std::collections::HashSet;
use std::hash::{Hash as _, Hasher as _};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What a [`Churn`] does each build.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChurnConfig {
    /// The generator's seed: the same seed and initial list give the same
    /// builds. By default, 1.
    pub seed: u64,
    /// Entries added per day, as a fraction of the list's length. By
    /// default, 0.02 (2 %).
    pub add_per_day: f64,
    /// Entries removed per day, as a fraction of the list's length. By
    /// default, 0.02 (2 %).
    pub remove_per_day: f64,
    /// Builds per day; each gets its share of the day's changes. By
    /// default, 48 (one every 30 minutes).
    pub builds_per_day: u32,
}

impl Default for ChurnConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            add_per_day: 0.02,
            remove_per_day: 0.02,
            builds_per_day: 48,
        }
    }
}

/// What one build changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChurnBuild {
    /// The build's number, from 1.
    pub build: u64,
    /// Entries new in this build, in the order they were made.
    pub added: Vec<String>,
    /// Entries this build dropped (all of them were listed before it).
    pub removed: Vec<String>,
}

impl ChurnBuild {
    /// Whether the build changed nothing: the list is the previous one.
    pub fn is_unchanged(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// A threat list under seeded churn; see the module docs.
#[derive(Debug)]
pub struct Churn {
    /// The list now, in no particular order (removal swaps the last entry
    /// into the removed one's place).
    entries: Vec<String>,
    /// A 64-bit hash of every entry the list ever held, so a new entry
    /// never repeats one (a hash collision only makes the generator draw
    /// another URL).
    ever_listed: HashSet<u64>,
    config: ChurnConfig,
    rng: StdRng,
    /// Fractions of an entry owed to the next build, so that small lists
    /// still change at the daily rate.
    add_due: f64,
    remove_due: f64,
    /// Synthetic URLs made so far: the source of each one's unique token.
    minted: u64,
    build: u64,
}

impl Churn {
    /// A generator over `initial` (duplicates are kept once, in first
    /// occurrence order).
    ///
    /// # Panics
    ///
    /// When `builds_per_day` is 0 or a rate is negative or not finite.
    pub fn new(initial: impl IntoIterator<Item = String>, config: ChurnConfig) -> Self {
        assert!(config.builds_per_day > 0, "builds_per_day must be at least 1");
        for rate in [config.add_per_day, config.remove_per_day] {
            assert!(
                rate.is_finite() && rate >= 0.0,
                "churn rate {rate} is not a fraction ≥ 0"
            );
        }
        let mut ever_listed = HashSet::new();
        let entries: Vec<String> = initial
            .into_iter()
            .filter(|e| ever_listed.insert(fingerprint(e)))
            .collect();
        Self {
            entries,
            ever_listed,
            rng: StdRng::seed_from_u64(config.seed),
            config,
            add_due: 0.0,
            remove_due: 0.0,
            minted: 0,
            build: 0,
        }
    }

    /// The list as the last build left it (the initial list before any).
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// The number of builds made so far.
    pub fn builds(&self) -> u64 {
        self.build
    }

    /// The configuration.
    pub fn config(&self) -> &ChurnConfig {
        &self.config
    }

    /// Makes the next build: removes its share of the day's removals, drawn
    /// uniformly from the list, then adds its share of new synthetic URLs.
    pub fn next_build(&mut self) -> ChurnBuild {
        self.build += 1;
        let per_build = |rate: f64| self.entries.len() as f64 * rate / f64::from(self.config.builds_per_day);
        self.add_due += per_build(self.config.add_per_day);
        self.remove_due += per_build(self.config.remove_per_day);
        let remove_count = (self.remove_due.floor() as usize).min(self.entries.len());
        self.remove_due -= remove_count as f64;
        let add_count = self.add_due.floor() as usize;
        self.add_due -= add_count as f64;

        let mut removed = Vec::with_capacity(remove_count);
        for _ in 0..remove_count {
            let i = self.rng.gen_range(0..self.entries.len());
            removed.push(self.entries.swap_remove(i));
        }
        let mut added = Vec::with_capacity(add_count);
        while added.len() < add_count {
            let url = self.synthetic_url();
            if self.ever_listed.insert(fingerprint(&url)) {
                self.entries.push(url.clone());
                added.push(url);
            }
        }
        ChurnBuild {
            build: self.build,
            added,
            removed,
        }
    }

    /// A realistic-looking phishing URL holding a token unique to this
    /// generator (its count of URLs made, through a bijective mix).
    fn synthetic_url(&mut self) -> String {
        self.minted += 1;
        let token = base36(mix(self.config.seed ^ mix(self.minted)));
        let rng = &mut self.rng;
        let brand = pick(rng, BRANDS);
        let word = pick(rng, WORDS);
        let tld = pick(rng, TLDS);
        let path = match rng.gen_range(0..6) {
            0 => "login.php".to_owned(),
            1 => "signin/index.html".to_owned(),
            2 => format!("verify/account.php?session={:x}", rng.r#gen::<u32>()),
            3 => format!(
                "wp-content/plugins/{}/{}/index.php",
                pick(rng, WORDS),
                pick(rng, WORDS)
            ),
            4 => format!("{}/{}.html", pick(rng, WORDS), pick(rng, WORDS)),
            _ => String::new(),
        };
        match rng.gen_range(0..6) {
            0 => format!("http://{brand}-{word}-{token}.{tld}/{path}"),
            1 => format!("https://{token}.{}/{brand}/{path}", pick(rng, HOSTING)),
            2 => format!("http://{word}.{brand}.{token}.{tld}/{path}"),
            3 => {
                // A public-looking first octet: never 0, 10 or 127 (a
                // publisher refuses entries on a loopback address).
                let first = rng.gen_range(11..223);
                let ip: [u8; 4] = [
                    if first >= 127 { first + 1 } else { first },
                    rng.r#gen(),
                    rng.r#gen(),
                    rng.gen_range(1..255),
                ];
                let [a, b, c, d] = ip;
                format!("http://{a}.{b}.{c}.{d}/{token}/{brand}/{path}")
            }
            4 => format!("https://sites.google.com/view/{brand}-{token}/{word}"),
            _ => format!("http://{brand}{word}.{tld}/{word}/{token}/{path}"),
        }
    }
}

const BRANDS: &[&str] = &[
    "paypal",
    "apple",
    "microsoft",
    "office365",
    "netflix",
    "chase",
    "wellsfargo",
    "amazon",
    "dhl",
    "bankofamerica",
    "outlook",
    "instagram",
    "facebook",
    "coinbase",
    "metamask",
    "docusign",
];
const WORDS: &[&str] = &[
    "secure", "login", "verify", "account", "update", "signin", "support", "auth", "billing", "recovery",
    "webscr", "confirm", "wallet", "online", "service",
];
const TLDS: &[&str] = &[
    "com", "net", "xyz", "top", "info", "online", "site", "club", "live", "app", "co.uk", "com.br", "ru",
];
const HOSTING: &[&str] = &[
    "000webhostapp.com",
    "weebly.com",
    "wixsite.com",
    "firebaseapp.com",
    "web.app",
    "glitch.me",
    "herokuapp.com",
    "blogspot.com",
    "github.io",
    "netlify.app",
];

fn pick(rng: &mut StdRng, from: &[&'static str]) -> &'static str {
    from[rng.gen_range(0..from.len())]
}

/// SplitMix64's finalizer: a bijection on `u64`, so distinct counts give
/// distinct tokens.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn base36(mut x: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::with_capacity(13);
    loop {
        out.push(DIGITS[(x % 36) as usize]);
        x /= 36;
        if x == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// A fixed-key 64-bit hash of an entry: the same in every run of a build.
fn fingerprint(entry: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    entry.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn initial(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("http://listed-{i}.example/phish/{i}"))
            .collect()
    }

    fn run(churn: &mut Churn, builds: u64) -> Vec<ChurnBuild> {
        (0..builds).map(|_| churn.next_build()).collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_builds_and_another_seed_other_urls() {
        let config = ChurnConfig::default();
        let a = run(&mut Churn::new(initial(3_000), config), 100);
        let b = run(&mut Churn::new(initial(3_000), config), 100);
        assert_eq!(a, b);
        let other = ChurnConfig { seed: 2, ..config };
        let c = run(&mut Churn::new(initial(3_000), other), 100);
        let added = |builds: &[ChurnBuild]| {
            builds
                .iter()
                .flat_map(|b| b.added.clone())
                .collect::<HashSet<_>>()
        };
        assert!(added(&a).is_disjoint(&added(&c)), "two seeds made the same URL");
        assert_ne!(
            a.iter().map(|b| &b.removed).collect::<Vec<_>>(),
            c.iter().map(|b| &b.removed).collect::<Vec<_>>()
        );
    }

    #[test]
    fn each_day_changes_the_list_at_the_configured_rates() {
        for (add, remove) in [(0.02, 0.02), (0.05, 0.01), (0.0, 0.03)] {
            let config = ChurnConfig {
                seed: 7,
                add_per_day: add,
                remove_per_day: remove,
                ..ChurnConfig::default()
            };
            let mut churn = Churn::new(initial(5_000), config);
            for day in 0..5 {
                let start = churn.entries().len() as f64;
                let builds = run(&mut churn, 48);
                let end = churn.entries().len() as f64;
                let added: usize = builds.iter().map(|b| b.added.len()).sum();
                let removed: usize = builds.iter().map(|b| b.removed.len()).sum();
                // The rate applies to each build's length: the day's total
                // lies between the rate of its smallest and its largest
                // length, give or take the one entry carried over.
                let (lo, hi) = (start.min(end), start.max(end));
                for (what, count, rate) in [("added", added, add), ("removed", removed, remove)] {
                    let count = count as f64;
                    assert!(
                        count >= lo * rate - 1.0 && count <= hi * rate + 1.0,
                        "day {day}: {what} {count} entries, expected {rate} of {lo}..{hi}"
                    );
                }
            }
        }
    }

    #[test]
    fn small_lists_still_change_at_the_daily_rate() {
        // 1,000 × 2 % / 48 = 0.42 entries a build: carried over, not lost.
        let mut churn = Churn::new(initial(1_000), ChurnConfig::default());
        let builds = run(&mut churn, 48 * 10);
        let added: usize = builds.iter().map(|b| b.added.len()).sum();
        let removed: usize = builds.iter().map(|b| b.removed.len()).sum();
        assert!(
            (195..=205).contains(&added),
            "added {added} in 10 days, expected ~200"
        );
        assert!(
            (195..=205).contains(&removed),
            "removed {removed} in 10 days, expected ~200"
        );
        assert!(builds.iter().any(ChurnBuild::is_unchanged));
    }

    #[test]
    fn the_list_is_the_initial_one_minus_removals_plus_additions_all_distinct() {
        let start = initial(3_000);
        let mut churn = Churn::new(
            start.iter().cloned().chain(start[..10].iter().cloned()),
            ChurnConfig::default(),
        );
        assert_eq!(churn.entries().len(), 3_000, "duplicates are kept once");
        let mut expected: HashSet<String> = start.into_iter().collect();
        let mut ever = expected.clone();
        for build in run(&mut churn, 100) {
            for r in &build.removed {
                assert!(
                    expected.remove(r),
                    "build {} removed {r}, which was not listed",
                    build.build
                );
            }
            for a in &build.added {
                assert!(ever.insert(a.clone()), "build {} re-added {a}", build.build);
                expected.insert(a.clone());
            }
        }
        let now: HashSet<String> = churn.entries().iter().cloned().collect();
        assert_eq!(now.len(), churn.entries().len(), "the list holds a duplicate");
        assert_eq!(now, expected);
        assert_eq!(churn.builds(), 100);
    }

    #[test]
    fn synthetic_urls_are_accepted_by_the_publisher_and_distinct() {
        let mut churn = Churn::new(
            Vec::new(),
            ChurnConfig {
                add_per_day: 0.0,
                ..ChurnConfig::default()
            },
        );
        let mut expressions = HashSet::new();
        // 20,000: about 16 on a raw IPv4 host with the first octet 127
        // were the generator to draw it (the publisher refuses loopback).
        for _ in 0..20_000 {
            let url = churn.synthetic_url();
            let listed = blocksieve_publisher::internal::sources::url_expression(url.as_bytes())
                .unwrap_or_else(|e| panic!("{url}: refused by the publisher: {e:?}"));
            assert!(expressions.insert(listed), "{url} repeats an expression");
        }
    }
}
