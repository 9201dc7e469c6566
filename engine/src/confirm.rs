//! What a check's full-hash round changes, whoever sends the request: the
//! cache of answers bound to the snapshot versions they were asked for.
//!
//! The Rust agent (with single flight and the immutable buckets around it)
//! and the [`Session`](crate::session::Session) (over the host's I/O) both
//! look answers up and store them here, so a check is answered from the
//! same cache entries, and a response fills it the same way, on every path.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use blocksieve_format::api::{FullHashSearchRequest, snapshot_id};

use crate::Error;
use crate::accept::VersionFloor;
use crate::cache::FullHashCache;
use crate::lookup::Answer;
use crate::prefix::{Answers, RequestPrefix};

/// The snapshot held of each list, by name — its version and body hash:
/// what a full-hash answer must be at least as new as (`min_versions` of
/// the request) and, at the same version, made from (`snapshots`: another
/// publisher's build of the same second has another body), and what cached
/// answers were made for.
pub type Versions = BTreeMap<String, VersionFloor>;

/// The `POST /v1/hashes:search` body asking for `prefixes` for a check
/// that probed the snapshots `versions` names: their versions as
/// `min_versions`, their ids ([`snapshot_id`]) as `snapshots`.
pub fn search_request(prefixes: Vec<String>, versions: &Versions) -> FullHashSearchRequest {
    FullHashSearchRequest {
        prefixes,
        min_versions: versions
            .iter()
            .map(|(list, f)| (list.clone(), f.version))
            .collect(),
        snapshots: versions
            .iter()
            .map(|(list, f)| (list.clone(), snapshot_id(f.version, &f.body_sha256)))
            .collect(),
    }
}

/// Full-hash answers by request prefix (Safe Browsing v5 semantics: misses
/// included, each for its cache duration) for one set of snapshot
/// [`Versions`]: a check that probed other versions empties it first, since
/// an answer made for an older snapshot may lack a full hash the newer one
/// lists.
#[derive(Debug)]
pub struct AnswerCache {
    hashes: FullHashCache,
    versions: Versions,
}

impl AnswerCache {
    /// An empty cache of at most `max_bytes` (see [`FullHashCache::new`]).
    pub fn new(max_bytes: usize) -> Self {
        Self {
            hashes: FullHashCache::new(max_bytes),
            versions: Versions::new(),
        }
    }

    /// Answers what it can of `prefixes` for a check that probed
    /// `versions` at `now`, into `answers`, and returns the rest (the
    /// prefixes to ask the publisher for), in order.
    pub fn lookup(
        &mut self,
        versions: &Versions,
        prefixes: impl IntoIterator<Item = RequestPrefix>,
        now: SystemTime,
        answers: &mut HashMap<RequestPrefix, Answer>,
    ) -> Vec<RequestPrefix> {
        if self.versions != *versions {
            self.hashes.clear();
            self.versions.clone_from(versions);
        }
        let mut misses = Vec::new();
        for p in prefixes {
            match self.hashes.get(p, now) {
                Some(hashes) => {
                    answers.insert(p, Ok(hashes));
                }
                None => misses.push(p),
            }
        }
        misses
    }

    /// Takes the publisher's answer to a request asked at `versions`,
    /// already sorted by its real prefixes ([`prefix::sort_answers`]): each
    /// answered prefix goes into `answers` and, while `versions` are still
    /// the cache's, into the cache for `cache_duration` from `now`; a real
    /// prefix the answer says nothing about is an error in `answers` (it
    /// stays unverified, and uncached). `url` names the request in that
    /// error.
    ///
    /// [`prefix::sort_answers`]: crate::prefix::sort_answers
    pub fn store(
        &mut self,
        sorted: Answers,
        cache_duration: Duration,
        versions: &Versions,
        now: SystemTime,
        url: &str,
        answers: &mut HashMap<RequestPrefix, Answer>,
    ) {
        let current = self.versions == *versions;
        for (p, hashes) in sorted.by_prefix {
            let hashes = Arc::new(hashes);
            if current {
                self.hashes.insert(p, Arc::clone(&hashes), cache_duration, now);
            }
            answers.insert(p, Ok(hashes));
        }
        for p in sorted.missing {
            answers.insert(
                p,
                Err(Error::UnexpectedResponse {
                    url: url.to_owned(),
                    reason: format!("the answer has no result for requested prefix {p}"),
                }),
            );
        }
        for p in sorted.unreadable {
            answers.insert(
                p,
                Err(Error::UnexpectedResponse {
                    url: url.to_owned(),
                    reason: format!(
                        "the answer lists a full hash under requested prefix {p} that is not 64 hex digits"
                    ),
                }),
            );
        }
    }

    /// How many prefixes' answers are cached.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether no answer is cached.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::ListedHashes;
    use blocksieve_format::FullHash;

    fn prefix(byte: u8) -> RequestPrefix {
        crate::prefix::request_prefix(&FullHash([byte; 32]), 32).expect("32 bits is a valid length")
    }

    fn versions(v: u64) -> Versions {
        let floor = VersionFloor {
            version: v,
            body_sha256: [0; 32],
        };
        [("malware".to_owned(), floor)].into_iter().collect()
    }

    #[test]
    fn answers_are_reused_for_the_versions_they_were_asked_for_only() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut cache = AnswerCache::new(1 << 20);
        let mut answers = HashMap::new();
        let (a, b) = (prefix(1), prefix(2));
        assert_eq!(cache.lookup(&versions(1), [a, b], now, &mut answers), vec![a, b]);
        let listed = ListedHashes::new([("malware", FullHash([1; 32]))]);
        let sorted = Answers {
            by_prefix: [(a, listed)].into_iter().collect(),
            missing: vec![b],
            unreadable: Vec::new(),
            ignored: 0,
        };
        cache.store(
            sorted,
            Duration::from_secs(300),
            &versions(1),
            now,
            "u",
            &mut answers,
        );
        assert!(answers[&a].is_ok());
        assert!(
            answers[&b].is_err(),
            "a prefix the answer skipped stays unverified"
        );
        assert_eq!(cache.len(), 1, "only answered prefixes are cached");

        let mut again = HashMap::new();
        assert_eq!(cache.lookup(&versions(1), [a, b], now, &mut again), vec![b]);
        assert!(
            again[&a]
                .as_ref()
                .is_ok_and(|h| h.contains(&FullHash([1; 32]), "malware"))
        );
        // Past its cache duration the answer is gone.
        let later = now + Duration::from_secs(301);
        assert_eq!(
            cache.lookup(&versions(1), [a], later, &mut HashMap::new()),
            vec![a]
        );

        // A newer snapshot empties the cache; an answer asked for the old
        // versions, arriving late, is used but not cached.
        cache.store(
            Answers {
                by_prefix: [(a, ListedHashes::new([("malware", FullHash([1; 32]))]))]
                    .into_iter()
                    .collect(),
                ..Answers::default()
            },
            Duration::from_secs(300),
            &versions(1),
            now,
            "u",
            &mut HashMap::new(),
        );
        assert_eq!(cache.lookup(&versions(2), [a], now, &mut HashMap::new()), vec![a]);
        let mut late = HashMap::new();
        cache.store(
            Answers {
                by_prefix: [(a, ListedHashes::new([("malware", FullHash([1; 32]))]))]
                    .into_iter()
                    .collect(),
                ..Answers::default()
            },
            Duration::from_secs(300),
            &versions(1),
            now,
            "u",
            &mut late,
        );
        assert!(late[&a].is_ok());
        assert!(cache.is_empty(), "an answer for older versions is not cached");
    }
}
