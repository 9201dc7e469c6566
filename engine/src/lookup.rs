//! A URL check without I/O: which expressions hit the local filters, which
//! request prefixes to confirm, and the verdict once the full hashes are
//! known.
//!
//! `blocksieve_agent::Agent::check_urls` is these steps with the
//! cache and HTTP in between: [`UrlHashes::of`] → [`probe`] →
//! [`LocalLookup::request_prefixes`] → (cache, then
//! [`plan_requests`](crate::prefix::plan_requests)) → [`decide`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use blocksieve_format::{FullHash, HashPrefix, HashedUrl};

use smallvec::SmallVec;

use crate::Error;
use crate::cache::ListedHashes;
use crate::delta::ListState;
use crate::prefix::{RequestPrefix, request_prefix};

/// The full hashes of one URL's expressions, each computed once, in the
/// order of [`CanonicalUrl::expressions`](blocksieve_format::CanonicalUrl::expressions)
/// (the exact URL first), and the expressions themselves: the URL is
/// canonicalized once, and a URL that is canonical as written (most are)
/// is hashed in place with no copy or allocation ([`HashedUrl`],
/// `benches/lookup.rs`).
#[derive(Debug, Clone, Default)]
pub struct UrlHashes<'a> {
    hashed: HashedUrl<'a>,
}

impl<'a> UrlHashes<'a> {
    /// Canonicalizes `url` (Safe Browsing v4 "Canonicalization") and hashes
    /// its expressions. White space around URL text (U+00A0 and the like,
    /// [`trim_url_text`](blocksieve_format::trim_url_text)) is trimmed
    /// first, as the publisher trims it from feed lines.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host.
    #[inline(always)]
    pub fn of(url: &'a str) -> Result<Self, Error> {
        let mut this = Self::default();
        this.set(url)?;
        Ok(this)
    }

    /// [`Self::of`] into `self`, which the check keeps in place (see
    /// [`HashedUrl::set`]); starts from [`UrlHashes::default`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host.
    #[inline(always)]
    pub fn set(&mut self, url: &'a str) -> Result<(), Error> {
        self.hashed
            .set(blocksieve_format::trim_url_text(url).as_bytes())
            .map_err(|reason| Error::InvalidUrl { reason })
    }

    /// [`Self::set`], calling `on_hash` with each full hash as soon as it
    /// is computed ([`HashedUrl::set_then`]): a check starts loading the
    /// filters' memory for an expression ([`ListState::prefetch`]) while
    /// the next ones are hashed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the URL names no host.
    #[inline(always)]
    pub fn set_then(&mut self, url: &'a str, on_hash: impl FnMut(&FullHash)) -> Result<(), Error> {
        self.hashed
            .set_then(blocksieve_format::trim_url_text(url).as_bytes(), on_hash)
            .map_err(|reason| Error::InvalidUrl { reason })
    }

    /// Each expression and its full hash, the exact URL first.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &FullHash)> {
        self.hashed.iter()
    }

    /// The full hashes alone, in expression order.
    fn hashes(&self) -> &[FullHash] {
        self.hashed.hashes()
    }

    /// The expression whose full hash is `hashes()[index]`.
    fn expression(&self, index: usize) -> &str {
        self.hashed.expression(index).unwrap_or_default()
    }
}

/// One expression of a URL whose hash prefix is (probably) in a list's
/// filter. A prefix hit is only a candidate: the full hash must still be
/// confirmed by the publisher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixHit {
    /// The threat list whose filter the prefix hit (shared with the
    /// subscription: a hit copies no name).
    pub list: Arc<str>,
    /// The expression, e.g. `evil.example/login/`.
    pub expression: String,
    /// The expression's full hash.
    pub full_hash: FullHash,
    /// The request prefix length the list advertises, in bits.
    pub request_prefix_bits: u8,
}

impl PrefixHit {
    /// The 32-bit hash prefix of the expression.
    pub fn prefix(&self) -> HashPrefix {
        self.full_hash.prefix()
    }
}

/// The result of probing the local filters with a URL's expressions: every
/// prefix hit, with no network involved. See
/// `blocksieve_agent::Agent::lookup_local`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalLookup {
    /// Every (list, expression) whose prefix hit, in expression order (the
    /// exact URL first), then in list order.
    pub hits: Vec<PrefixHit>,
    /// The snapshot version each probed list's state stands for (its
    /// base's, or its last delta's), in subscription order, skipping a list
    /// with no snapshot (not probed): no entry of these versions is missed.
    pub snapshot_versions: SnapshotVersions,
    /// Whether any probed snapshot had expired: the answer may miss entries
    /// listed since.
    pub stale: bool,
    /// The length, in bits, of every request prefix that confirms this
    /// check's hits: the longest `request_prefix_bits` any probed snapshot
    /// advertises (0 when none was probed; see
    /// [`LocalLookup::request_prefix_of`]).
    pub request_prefix_bits: u8,
}

impl LocalLookup {
    /// Whether no filter matched: the URL is certainly on none of the lists
    /// (as of the probed snapshots).
    pub fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    /// The distinct 32-bit hash prefixes that hit, in the order they first
    /// appear in [`LocalLookup::hits`].
    pub fn prefixes(&self) -> Vec<HashPrefix> {
        let mut out: Vec<HashPrefix> = Vec::new();
        for p in self.hits.iter().map(PrefixHit::prefix) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }

    /// The distinct 32-bit hash prefixes that hit `list`'s filter.
    pub fn prefixes_for(&self, list: &str) -> Vec<HashPrefix> {
        let mut out: Vec<HashPrefix> = Vec::new();
        for p in self
            .hits
            .iter()
            .filter(|h| &*h.list == list)
            .map(PrefixHit::prefix)
        {
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }

    /// The request prefix that confirms `hash`: its first `bits` bits, where
    /// `bits` is the longest `request_prefix_bits` of the probed snapshots
    /// ([`LocalLookup::request_prefix_bits`], or of the hits' lists if
    /// longer). `None` if `hash` hit no filter.
    ///
    /// The longest, not the hit lists' own: the answer to a request prefix
    /// is cached for every subscribed list, so it must hold each list's
    /// bucket under that prefix, and a list's bucket under a prefix shorter
    /// than the list advertises can hold more full hashes than the
    /// publisher serves at once (`max_bucket_entries`): a small list's
    /// 8-bit prefix beside a large list's 16 bits was refused, and the
    /// small list's hits never confirmed. Under the longest length every
    /// list's bucket is at most the one its publisher sized, and the
    /// prefix is still shared by at least the listed full hashes that
    /// list's length was chosen for (`min_anonymity` of them, or fewer on a
    /// list too small to reach it at 8 bits).
    pub fn request_prefix_of(&self, hash: &FullHash) -> Option<RequestPrefix> {
        let mut hit = false;
        let mut bits = self.request_prefix_bits;
        for h in &self.hits {
            hit |= h.full_hash == *hash;
            bits = bits.max(h.request_prefix_bits);
        }
        if !hit {
            return None;
        }
        request_prefix(hash, bits)
    }

    /// The distinct request prefixes to confirm every hit, sorted.
    pub fn request_prefixes(&self) -> Vec<RequestPrefix> {
        let set: BTreeSet<RequestPrefix> = self
            .hits
            .iter()
            .filter_map(|h| self.request_prefix_of(&h.full_hash))
            .collect();
        set.into_iter().collect()
    }
}

/// The snapshot versions a [`LocalLookup`] probed, one per list probed, in
/// subscription order (as a slice: `versions[0]` is the first probed list's;
/// a list with no snapshot is not probed, and
/// `blocksieve_agent::Agent::lookup_local` answers only once every list has
/// one).
/// Up to four are held inline: a check allocates nothing for them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotVersions(SmallVec<[u64; 4]>);

impl std::ops::Deref for SnapshotVersions {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        &self.0
    }
}

impl FromIterator<u64> for SnapshotVersions {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

/// Probes each list's state (in subscription order) with each of the
/// URL's full hashes: a hash is a hit when the base snapshot's filter or
/// the additions since hold it ([`ListState::probably_contains`]); `now`
/// decides staleness.
///
/// `snapshots` is walked several times rather than collected: no allocation
/// beyond the answer on this, the path of every check.
pub fn probe<'a, I>(hashes: &UrlHashes<'_>, snapshots: I, now: SystemTime) -> LocalLookup
where
    I: IntoIterator<Item = (&'a Arc<str>, &'a ListState)>,
    I::IntoIter: Clone,
{
    let snapshots = snapshots.into_iter();
    let all = hashes.hashes();
    let mut hits = Vec::new();
    // Batch probing: each list's filter is probed with every hash first,
    // into a bit mask, with no branch on the answers; only then are the
    // hits built. A branch per answer would make the CPU wait for each
    // probe's random reads into the filter (and, when it guessed the answer
    // wrong, start the next probes' reads over), where the masks let the
    // reads of all of a URL's probes overlap (`benches/lookup.rs`).
    let masks: SmallVec<[u32; 4]> = snapshots.clone().map(|(_, s)| probe_mask(s, all)).collect();
    if masks.iter().any(|&m| m != 0) {
        for (i, hash) in all.iter().enumerate() {
            for ((list, snapshot), mask) in snapshots.clone().zip(&masks) {
                if mask & (1 << i) != 0 {
                    hits.push(PrefixHit {
                        list: Arc::clone(list),
                        expression: hashes.expression(i).to_owned(),
                        full_hash: *hash,
                        request_prefix_bits: snapshot.request_prefix_bits(),
                    });
                }
            }
        }
    }
    LocalLookup {
        hits,
        snapshot_versions: snapshots.clone().map(|(_, s)| s.version()).collect(),
        stale: snapshots.clone().any(|(_, s)| s.is_stale(now)),
        request_prefix_bits: snapshots.map(|(_, s)| s.request_prefix_bits()).max().unwrap_or(0),
    }
}

/// Bit `i` set when `hashes[i]` probably belongs to `state`'s list; a URL
/// has at most [`MAX_EXPRESSIONS`](blocksieve_format::MAX_EXPRESSIONS)
/// (30) expressions, so a `u32` holds every answer.
#[inline(always)]
fn probe_mask(state: &ListState, hashes: &[FullHash]) -> u32 {
    const _: () = assert!(blocksieve_format::MAX_EXPRESSIONS <= 32);
    hashes.iter().take(32).enumerate().fold(0, |mask, (i, hash)| {
        mask | (u32::from(state.probably_contains(hash)) << i)
    })
}

/// What a check answers when the full-hash request for a prefix hit fails
/// (the publisher is unreachable, times out, errs, sends garbage, or
/// requests are paused by backoff).
///
/// Either way the verdict is [`Verdict::Unverified`] — never a made-up
/// [`Verdict::Safe`] or [`Verdict::Unsafe`]; the policy only sets its
/// `block` flag, i.e. what [`Verdict::should_block`] advises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// `block: false`: the caller may let the URL through. What Chrome and
    /// Safe Browsing v5 in local-list mode do: a prefix hit is usually a
    /// false positive (with BinaryFuse8, about 1 in 40 clean URLs hits), and
    /// blocking them whenever the publisher is down would break browsing.
    #[default]
    FailOpen,
    /// `block: true`: the caller should block the URL until it can be
    /// verified. For high-assurance settings that prefer an occasional
    /// false block to any chance of a miss.
    FailClosed,
}

/// The answer of a URL check.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No expression of the URL is on a subscribed list: either no prefix
    /// hit the local filters, or the publisher's full hashes for every hit
    /// prefix differ from the URL's (a false prefix hit).
    Safe {
        /// A snapshot used had expired: "safe" only as of that snapshot.
        stale: bool,
    },
    /// The publisher confirmed that the full hash of one of the URL's
    /// expressions is on a subscribed list.
    Unsafe {
        /// The threat list, e.g. `malware` (the first in subscription order
        /// if the hash is on several).
        list: String,
        /// The matching expression, e.g. `evil.example/` (the first in
        /// expression order, the exact URL first).
        expression: String,
        /// Its full hash, as returned by the publisher.
        full_hash: FullHash,
        /// A snapshot used had expired.
        stale: bool,
    },
    /// A prefix hit could not be confirmed or refuted because the full-hash
    /// request failed; see [`FailurePolicy`].
    Unverified {
        /// Why the full hashes are unknown.
        reason: Error,
        /// The lists whose filters hit, in subscription order.
        lists: Vec<String>,
        /// Whether the failure policy says to block: `true` under
        /// [`FailurePolicy::FailClosed`].
        block: bool,
        /// A snapshot used had expired.
        stale: bool,
    },
}

impl Verdict {
    /// Whether the verdict is [`Verdict::Unsafe`].
    pub fn is_unsafe(&self) -> bool {
        matches!(self, Self::Unsafe { .. })
    }

    /// Whether the verdict is [`Verdict::Safe`].
    pub fn is_safe(&self) -> bool {
        matches!(self, Self::Safe { .. })
    }

    /// Whether the verdict is [`Verdict::Unverified`].
    pub fn is_unverified(&self) -> bool {
        matches!(self, Self::Unverified { .. })
    }

    /// Whether the caller should block the URL: it is unsafe, or unverified
    /// under [`FailurePolicy::FailClosed`].
    pub fn should_block(&self) -> bool {
        match self {
            Self::Unsafe { .. } => true,
            Self::Unverified { block, .. } => *block,
            Self::Safe { .. } => false,
        }
    }

    /// Whether the verdict rests on an expired snapshot.
    pub fn is_stale(&self) -> bool {
        match self {
            Self::Safe { stale } | Self::Unsafe { stale, .. } | Self::Unverified { stale, .. } => *stale,
        }
    }
}

/// The answer to a check that probed only the lists with a snapshot, while
/// `unready` (the first subscribed list with none yet) was not probed:
/// [`Verdict::Unsafe`] stands, since a loaded list's full hash confirmed it
/// whatever the other list holds; anything else is
/// [`Error::NotReady`], since the unprobed list may hold the URL ("safe"
/// would be a guess, and so would "unverified"). With every list probed
/// (`unready` is `None`) the verdict is returned as it is.
///
/// # Errors
///
/// [`Error::NotReady`] naming `unready` unless the verdict is unsafe.
pub fn unless_unready(verdict: Verdict, unready: Option<&Arc<str>>) -> Result<Verdict, Error> {
    match unready {
        Some(list) if !verdict.is_unsafe() => Err(Error::NotReady {
            list: list.to_string(),
        }),
        _ => Ok(verdict),
    }
}

/// The verdict for `local` once a full-hash request named only the lists
/// `asked` says it did (by name): a [`Verdict::Safe`] from [`decide`] for a
/// URL with a hit on a list it did not name is no answer for that list
/// (nothing was asked of it: a list the publisher said it does not serve is
/// left out of requests), so it is [`Verdict::Unverified`], naming that
/// list, for the reason `unasked` gives of it (`block` by `policy`). Any
/// other verdict stands: unsafe is confirmed, unverified already says so.
/// Decided by what the request named, never by what the lists are by the
/// time its answer arrives (a list served again meanwhile was still not
/// asked).
pub fn unless_unasked(
    verdict: Verdict,
    local: &LocalLookup,
    asked: impl Fn(&str) -> bool,
    unasked: impl FnOnce(&str) -> Error,
    policy: FailurePolicy,
) -> Verdict {
    let Verdict::Safe { stale } = verdict else {
        return verdict;
    };
    match local.hits.iter().find(|hit| !asked(&hit.list)) {
        Some(hit) => Verdict::Unverified {
            reason: unasked(&hit.list),
            lists: vec![hit.list.to_string()],
            block: policy == FailurePolicy::FailClosed,
            stale,
        },
        None => verdict,
    }
}

/// Why a hit on `list` was not confirmed when no request named it and
/// nothing more is known (its publisher's answer that it does not serve the
/// list has since been replaced by one that does).
pub fn not_asked(list: &str) -> Error {
    Error::UnexpectedResponse {
        url: String::new(),
        reason: format!(
            "list {list} was left out of the full-hash request (its publisher did not serve it when the check began)"
        ),
    }
}

/// What is known about one request prefix: the listed full hashes under it
/// (from the cache or a response), or why they are unknown.
pub type Answer = Result<Arc<ListedHashes>, Error>;

/// The verdict for a URL whose local probe gave `local`, once `answers`
/// holds an [`Answer`] for each of [`LocalLookup::request_prefixes`].
///
/// Unsafe when a hit expression's full hash is listed in the answer for its
/// request prefix on one of `lists` (subscription order picks the list, the
/// first confirmed expression wins); otherwise unverified if any needed
/// answer is an error (or absent), with `block` set by `policy`; otherwise
/// safe. Only expressions whose prefix hit a local filter are compared: a
/// filter "no" is final.
pub fn decide(
    local: &LocalLookup,
    answers: &HashMap<RequestPrefix, Answer>,
    lists: &[&str],
    policy: FailurePolicy,
) -> Verdict {
    let stale = local.stale;
    let mut failure: Option<Error> = None;
    for hit in &local.hits {
        let Some(prefix) = local.request_prefix_of(&hit.full_hash) else {
            // No valid request prefix length (a lookup made by hand: probes
            // take it from verified headers): the hit cannot be confirmed,
            // which is a failure, never "safe".
            failure.get_or_insert_with(|| Error::UnexpectedResponse {
                url: String::new(),
                reason: format!("no valid request prefix length for the hit on list {}", hit.list),
            });
            continue;
        };
        match answers.get(&prefix) {
            Some(Ok(listed)) => {
                let list = lists.iter().find(|l| listed.contains(&hit.full_hash, l));
                if let Some(list) = list {
                    return Verdict::Unsafe {
                        list: (*list).to_owned(),
                        expression: hit.expression.clone(),
                        full_hash: hit.full_hash,
                        stale,
                    };
                }
            }
            Some(Err(e)) => {
                failure.get_or_insert_with(|| e.clone());
            }
            None => {
                failure.get_or_insert_with(|| Error::UnexpectedResponse {
                    url: String::new(),
                    reason: format!("no answer for prefix {prefix}"),
                });
            }
        }
    }
    match failure {
        Some(reason) => Verdict::Unverified {
            reason,
            lists: lists
                .iter()
                .filter(|l| local.hits.iter().any(|h| &*h.list == **l))
                .map(|l| (*l).to_owned())
                .collect(),
            block: policy == FailurePolicy::FailClosed,
            stale,
        },
        None => Verdict::Safe { stale },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(url: &str) -> UrlHashes<'_> {
        match UrlHashes::of(url) {
            Ok(h) => h,
            Err(e) => panic!("{url}: {e}"),
        }
    }

    fn hit(list: &str, expression: &str, bits: u8) -> PrefixHit {
        PrefixHit {
            list: list.into(),
            expression: expression.into(),
            full_hash: FullHash::of(expression.as_bytes()),
            request_prefix_bits: bits,
        }
    }

    fn local(hits: Vec<PrefixHit>) -> LocalLookup {
        LocalLookup {
            hits,
            snapshot_versions: SnapshotVersions::default(),
            stale: false,
            request_prefix_bits: 0,
        }
    }

    fn rp(e: &str, bits: u8) -> RequestPrefix {
        match request_prefix(&FullHash::of(e.as_bytes()), bits) {
            Some(p) => p,
            None => panic!(),
        }
    }

    fn listed(pairs: &[(&str, &str)]) -> Arc<ListedHashes> {
        Arc::new(ListedHashes::new(
            pairs.iter().map(|(e, list)| (*list, FullHash::of(e.as_bytes()))),
        ))
    }

    fn transport() -> Error {
        Error::Transport {
            url: "u".into(),
            reason: "down".into(),
            timed_out: false,
        }
    }

    #[test]
    fn url_hashes_start_with_the_exact_url() {
        let h = hashes("http://a.b.c/1/2.html?param=1");
        let exprs: Vec<&str> = h.iter().map(|(e, _)| e).collect();
        assert_eq!(exprs[0], "a.b.c/1/2.html?param=1");
        assert_eq!(exprs.len(), 8);
        assert!(matches!(
            UrlHashes::of("mailto:x@y"),
            Err(Error::InvalidUrl { .. })
        ));
    }

    /// A URL handed over as text with white space a copy from a page
    /// leaves (U+00A0, U+3000, U+FEFF) is the URL the publisher lists for
    /// the same feed line: before, `ulvis.net/IFHc%C2%A0` was checked and
    /// the listed `ulvis.net/IFHc` answered safe.
    #[test]
    fn regression_url_text_is_trimmed_of_unicode_white_space_as_feed_lines_are() {
        let exprs = |url| {
            let mut h = UrlHashes::default();
            h.set_then(url, |_| {}).unwrap();
            h.iter().map(|(e, f)| (e.to_owned(), *f)).collect::<Vec<_>>()
        };
        let plain = exprs("http://ulvis.net/IFHc");
        for text in [
            "http://ulvis.net/IFHc\u{a0}",
            "\u{a0}http://ulvis.net/IFHc",
            "\u{3000}http://ulvis.net/IFHc\u{3000}",
            "\u{feff}http://ulvis.net/IFHc\u{200e}",
        ] {
            assert_eq!(exprs(text), plain, "{text:?}");
            let hashed: Vec<_> = hashes(text).iter().map(|(e, f)| (e.to_owned(), *f)).collect();
            assert_eq!(hashed, plain, "{text:?}");
        }
        // Inside a URL it stays the canonicalizer's to escape.
        assert_ne!(exprs("http://ulvis.net/IF\u{a0}Hc"), plain);
    }

    #[test]
    fn request_prefix_is_the_longest_over_the_probed_lists() {
        let mut l = local(vec![hit("phishing", "e/", 8), hit("phishing", "f/", 8)]);
        // A list that did not hit advertises 16 bits: every prefix is 16
        // bits long, so that the answer holds that list's bucket too.
        l.request_prefix_bits = 16;
        assert_eq!(l.request_prefix_of(&FullHash::of(b"e/")), Some(rp("e/", 16)));
        let mut expected = vec![rp("e/", 16), rp("f/", 16)];
        expected.sort();
        assert_eq!(l.request_prefixes(), expected);
        assert_eq!(l.request_prefix_of(&FullHash::of(b"g/")), None);
        // A hand-made lookup with no probed length: the hits' longest.
        let l = local(vec![hit("malware", "e/", 24), hit("phishing", "f/", 12)]);
        assert_eq!(l.request_prefix_of(&FullHash::of(b"f/")), Some(rp("f/", 24)));
    }

    #[test]
    fn no_hit_is_safe_without_answers() {
        let v = decide(
            &local(vec![]),
            &HashMap::new(),
            &["malware"],
            FailurePolicy::FailClosed,
        );
        assert_eq!(v, Verdict::Safe { stale: false });
    }

    #[test]
    fn confirmed_hash_is_unsafe_on_the_first_subscribed_list() {
        let l = local(vec![hit("malware", "x/y", 16), hit("malware", "x/", 16)]);
        let answers = HashMap::from([
            (rp("x/y", 16), Ok(listed(&[("x/zzz", "malware")]))),
            (
                rp("x/", 16),
                Ok(listed(&[("x/", "social"), ("x/", "phishing"), ("x/", "malware")])),
            ),
        ]);
        let v = decide(&l, &answers, &["malware", "phishing"], FailurePolicy::FailOpen);
        assert_eq!(
            v,
            Verdict::Unsafe {
                list: "malware".into(),
                expression: "x/".into(),
                full_hash: FullHash::of(b"x/"),
                stale: false
            }
        );
        assert!(v.should_block());
    }

    #[test]
    fn a_hit_with_no_valid_request_prefix_is_unverified_not_safe() {
        let l = local(vec![hit("malware", "x/", 7)]);
        let v = decide(&l, &HashMap::new(), &["malware"], FailurePolicy::FailOpen);
        assert!(
            matches!(&v, Verdict::Unverified { lists, .. } if lists == &["malware"]),
            "{v:?}"
        );
    }

    #[test]
    fn refuted_hits_are_a_safe_false_positive() {
        let l = local(vec![hit("malware", "x/", 32)]);
        let answers = HashMap::from([(rp("x/", 32), Ok(listed(&[("other/", "malware")])))]);
        let v = decide(&l, &answers, &["malware"], FailurePolicy::FailClosed);
        assert_eq!(v, Verdict::Safe { stale: false });
    }

    #[test]
    fn failed_answers_are_unverified_flagged_by_policy() {
        let l = LocalLookup {
            stale: true,
            ..local(vec![hit("phishing", "x/", 32)])
        };
        let answers = HashMap::from([(rp("x/", 32), Err(transport()))]);
        let open = decide(&l, &answers, &["malware", "phishing"], FailurePolicy::FailOpen);
        assert_eq!(
            open,
            Verdict::Unverified {
                reason: transport(),
                lists: vec!["phishing".into()],
                block: false,
                stale: true
            }
        );
        assert!(!open.should_block());
        assert!(open.is_stale());
        let closed = decide(&l, &answers, &["malware", "phishing"], FailurePolicy::FailClosed);
        assert!(closed.should_block());
        // A missing answer is no better than a failed one.
        let missing = decide(&l, &HashMap::new(), &["phishing"], FailurePolicy::FailOpen);
        assert!(missing.is_unverified());
    }

    /// Batch probing answers as one probe per expression would: every
    /// listed expression of a URL with the most expressions (30) hits, the
    /// last as well as the first, in expression order, then list order.
    #[test]
    fn every_expression_of_the_largest_url_is_probed_in_order() {
        use crate::delta::tests::{NOW, base};
        let url = "http://a.b.c.d.e.f.g/1/2/3/4/5/6/7.html?x=1";
        let h = hashes(url);
        let all: Vec<String> = h.iter().map(|(e, _)| e.to_owned()).collect();
        assert_eq!(all.len(), blocksieve_format::MAX_EXPRESSIONS);
        let first = ListState::of_base(base("first", 1, &all[..1]));
        let last = ListState::of_base(base("last", 1, &all[29..]));
        let every = ListState::of_base(base("every", 1, &all));
        let names: [Arc<str>; 3] = ["first".into(), "last".into(), "every".into()];
        let lists = [(&names[0], &first), (&names[1], &last), (&names[2], &every)];
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(NOW);
        let local = probe(&h, lists, now);
        let got: Vec<(&str, &str)> = local
            .hits
            .iter()
            .map(|hit| (&*hit.list, hit.expression.as_str()))
            // The 8-bit filters have false positives of their own.
            .filter(|(list, e)| *list == "every" || (*list == "first" && *e == all[0]) || *e == all[29])
            .collect();
        let mut want = vec![("first", all[0].as_str())];
        want.extend(all.iter().map(|e| ("every", e.as_str())));
        want.insert(30, ("last", all[29].as_str()));
        assert_eq!(got, want);
        assert_eq!(&*local.snapshot_versions, &[1, 1, 1]);
        assert!(!local.stale);
    }

    #[test]
    fn a_confirmation_wins_over_another_prefix_failing() {
        let l = local(vec![hit("malware", "x/y", 32), hit("malware", "x/", 32)]);
        let answers = HashMap::from([
            (rp("x/y", 32), Err(transport())),
            (rp("x/", 32), Ok(listed(&[("x/", "malware")]))),
        ]);
        assert!(decide(&l, &answers, &["malware"], FailurePolicy::FailOpen).is_unsafe());
    }
}
