//! The decisions of a URL check, without I/O: which expressions' hash
//! prefixes hit the local filters, and whether a full-hash response confirms
//! one of them.
//!
//! [`Agent::check_url`](crate::Agent::check_url) is these steps with HTTP in
//! between: [`UrlHashes::of`] → [`probe`] → one request per
//! [`LocalLookup::prefixes`] → [`confirm`].

use blocksieve_format::api::FullHashResponse;
use blocksieve_format::{FullHash, HashPrefix, VerifiedSnapshot, canonicalize};

use crate::Error;

/// The expressions of one URL with their full hashes, each computed once, in
/// the order of [`CanonicalUrl::expressions`](blocksieve_format::CanonicalUrl::expressions)
/// (the exact URL first).
#[derive(Debug, Clone)]
pub(crate) struct UrlHashes {
    entries: Vec<(String, FullHash)>,
}

impl UrlHashes {
    /// Canonicalizes `url` and hashes its expressions.
    pub(crate) fn of(url: &str) -> Result<Self, Error> {
        let canonical = canonicalize(url).map_err(|reason| Error::InvalidUrl { reason })?;
        let entries = canonical
            .expressions()
            .map(|e| (e.to_string(), e.full_hash()))
            .collect();
        Ok(Self { entries })
    }

    fn iter(&self) -> impl Iterator<Item = (&str, &FullHash)> {
        self.entries.iter().map(|(e, h)| (e.as_str(), h))
    }
}

/// One expression of a URL whose hash prefix is (probably) in a list's
/// filter. A prefix hit is only a candidate: the full hash must still be
/// confirmed by the publisher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixHit {
    /// The threat list whose filter the prefix hit.
    pub list: String,
    /// The expression, e.g. `evil.example/login/`.
    pub expression: String,
    /// The expression's full hash.
    pub full_hash: FullHash,
}

impl PrefixHit {
    /// The 32-bit hash prefix sent to the full-hash endpoint.
    pub fn prefix(&self) -> HashPrefix {
        self.full_hash.prefix()
    }
}

/// The result of probing the local filters with a URL's expressions: every
/// prefix hit, with no network involved. See
/// [`Agent::lookup_local`](crate::Agent::lookup_local).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalLookup {
    /// Every (list, expression) whose prefix hit, in expression order (the
    /// exact URL first), then in list order.
    pub hits: Vec<PrefixHit>,
}

impl LocalLookup {
    /// Whether no filter matched: the URL is certainly on none of the lists
    /// (as of the loaded snapshots).
    pub fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    /// The distinct hash prefixes that hit, in the order they first appear
    /// in [`LocalLookup::hits`]: one full-hash request each.
    pub fn prefixes(&self) -> Vec<HashPrefix> {
        let mut out: Vec<HashPrefix> = Vec::new();
        for hit in &self.hits {
            let p = hit.prefix();
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }

    /// The distinct hash prefixes that hit `list`'s filter.
    pub fn prefixes_for(&self, list: &str) -> Vec<HashPrefix> {
        let mut out: Vec<HashPrefix> = Vec::new();
        for hit in self.hits.iter().filter(|h| h.list == list) {
            let p = hit.prefix();
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }
}

/// Probes each list's snapshot with each of the URL's full hashes.
pub(crate) fn probe<'a>(
    hashes: &UrlHashes,
    snapshots: impl IntoIterator<Item = (&'a str, &'a VerifiedSnapshot)> + Clone,
) -> LocalLookup {
    let mut hits = Vec::new();
    for (expression, hash) in hashes.iter() {
        for (list, snapshot) in snapshots.clone() {
            if snapshot.probably_contains(hash) {
                hits.push(PrefixHit {
                    list: list.to_owned(),
                    expression: expression.to_owned(),
                    full_hash: *hash,
                });
            }
        }
    }
    LocalLookup { hits }
}

/// The answer of a URL check.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No expression of the URL is on a subscribed list: either no prefix
    /// hit the local filters, or the publisher's full hashes for every hit
    /// prefix differ from the URL's (a false prefix hit).
    Safe,
    /// The publisher confirmed that the full hash of one of the URL's
    /// expressions is on a subscribed list.
    Unsafe {
        /// The threat list, e.g. `malware`.
        list: String,
        /// The matching expression, e.g. `evil.example/`.
        expression: String,
        /// Its full hash, as returned by the publisher.
        full_hash: FullHash,
    },
}

impl Verdict {
    /// Whether the verdict is [`Verdict::Unsafe`].
    pub fn is_unsafe(&self) -> bool {
        matches!(self, Self::Unsafe { .. })
    }
}

/// Checks a full-hash response for `prefix` against the URL's full hashes.
///
/// Returns the first confirmed match in expression order (the exact URL
/// first), then in response order. Entries whose full hash does not parse,
/// does not start with `prefix`, or is on a list `subscribed` rejects are
/// ignored: they cannot be about this URL on a list the caller asked about.
///
/// # Errors
///
/// [`Error::UnexpectedResponse`] when the response is for another prefix.
pub(crate) fn confirm(
    url: &str,
    hashes: &UrlHashes,
    prefix: HashPrefix,
    response: &FullHashResponse,
    subscribed: impl Fn(&str) -> bool,
) -> Result<Option<Verdict>, Error> {
    if response.prefix != prefix.to_string() {
        return Err(Error::UnexpectedResponse {
            url: url.to_owned(),
            reason: format!(
                "asked for prefix {prefix}, got an answer for {:?}",
                response.prefix
            ),
        });
    }
    let listed: Vec<(FullHash, &str)> = response
        .matches
        .iter()
        .filter_map(|m| {
            let hash = FullHash::from_hex(&m.full_hash).ok()?;
            (prefix.matches(&hash) && subscribed(&m.list)).then_some((hash, m.list.as_str()))
        })
        .collect();
    for (expression, hash) in hashes.iter().filter(|(_, h)| prefix.matches(h)) {
        if let Some((_, list)) = listed.iter().find(|(h, _)| h == hash) {
            return Ok(Some(Verdict::Unsafe {
                list: (*list).to_owned(),
                expression: expression.to_owned(),
                full_hash: *hash,
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use blocksieve_format::api::FullHashMatch;

    use super::*;

    fn response(prefix: HashPrefix, matches: &[(String, &str)]) -> FullHashResponse {
        FullHashResponse {
            prefix: prefix.to_string(),
            matches: matches
                .iter()
                .map(|(h, l)| FullHashMatch {
                    full_hash: h.clone(),
                    list: (*l).to_owned(),
                })
                .collect(),
            cache_duration_s: 300,
        }
    }

    fn hashes(url: &str) -> UrlHashes {
        match UrlHashes::of(url) {
            Ok(h) => h,
            Err(e) => panic!("{url}: {e}"),
        }
    }

    #[test]
    fn url_hashes_start_with_the_exact_url() {
        let h = hashes("http://a.b.c/1/2.html?param=1");
        let exprs: Vec<&str> = h.iter().map(|(e, _)| e).collect();
        assert_eq!(exprs[0], "a.b.c/1/2.html?param=1");
        assert_eq!(exprs.len(), 8);
        assert_eq!(h.entries[0].1, FullHash::of(b"a.b.c/1/2.html?param=1"));
    }

    #[test]
    fn invalid_url_is_an_error_not_a_verdict() {
        assert!(matches!(
            UrlHashes::of("mailto:x@y"),
            Err(Error::InvalidUrl { .. })
        ));
    }

    #[test]
    fn confirm_matches_exact_full_hash_on_subscribed_list() {
        let h = hashes("http://evil.example/x");
        let target = FullHash::of(b"evil.example/");
        let prefix = target.prefix();
        let r = response(prefix, &[(target.to_string(), "malware")]);
        let v = confirm("u", &h, prefix, &r, |l| l == "malware");
        assert_eq!(
            v.ok().flatten(),
            Some(Verdict::Unsafe {
                list: "malware".into(),
                expression: "evil.example/".into(),
                full_hash: target,
            })
        );
    }

    #[test]
    fn confirm_ignores_other_lists_other_prefixes_and_garbage() {
        let h = hashes("http://evil.example/x");
        let target = FullHash::of(b"evil.example/");
        let prefix = target.prefix();
        let mut colliding = target;
        colliding.0[31] ^= 1;
        let other_prefix = FullHash::of(b"evil.example/x");
        let r = response(
            prefix,
            &[
                (target.to_string(), "unsubscribed"),
                (colliding.to_string(), "malware"),
                // A full hash of the URL, but not in the requested bucket.
                (other_prefix.to_string(), "malware"),
                ("not hex".into(), "malware"),
            ],
        );
        let v = confirm("u", &h, prefix, &r, |l| l == "malware");
        assert_eq!(v.ok().flatten(), None);
    }

    #[test]
    fn confirm_rejects_answer_for_another_prefix() {
        let h = hashes("http://evil.example/");
        let r = response(HashPrefix(1), &[]);
        assert!(matches!(
            confirm("u", &h, HashPrefix(2), &r, |_| true),
            Err(Error::UnexpectedResponse { .. })
        ));
    }

    #[test]
    fn prefixes_are_distinct_in_first_appearance_order() {
        let a = FullHash::of(b"a/");
        let b = FullHash::of(b"b/");
        let hit = |list: &str, h: FullHash| PrefixHit {
            list: list.into(),
            expression: "e".into(),
            full_hash: h,
        };
        let l = LocalLookup {
            hits: vec![hit("x", b), hit("y", b), hit("x", a)],
        };
        assert_eq!(l.prefixes(), vec![b.prefix(), a.prefix()]);
        assert_eq!(l.prefixes_for("y"), vec![b.prefix()]);
    }
}
