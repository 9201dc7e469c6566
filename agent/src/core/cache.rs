//! The full-hash cache: how long a publisher's answer for a requested
//! prefix may be reused.
//!
//! Safe Browsing v5 semantics (`hashes:search`, "cache duration"): the
//! answer for a requested prefix lists *every* full hash under that prefix,
//! so for its cache duration it answers both ways — a full hash it lists is
//! listed, and any other full hash with that prefix is not (a cached miss).
//! An answer with no match is cached as well. Entries are keyed by the
//! requested prefix ([`RequestPrefix`], length included), exactly what went
//! over the wire, so the cache reveals nothing a request did not.
//!
//! The cache is bounded: least recently used entries are evicted past the
//! configured capacity (the `lru` crate), and durations are capped at
//! [`MAX_CACHE_DURATION`].

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use blocksieve_format::FullHash;
use lru::LruCache;

use crate::core::prefix::RequestPrefix;

/// The longest a full-hash answer is cached, whatever the publisher says:
/// one hour. An unsigned answer that wrongly says "not listed" (a broken
/// proxy, or anyone on a plain-HTTP path) then hides a listed URL for at
/// most that long.
pub const MAX_CACHE_DURATION: Duration = Duration::from_secs(60 * 60);

/// A full hash the publisher lists, and on which threat list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListedHash {
    /// The listed full hash.
    pub full_hash: FullHash,
    /// The threat list it is on.
    pub list: String,
}

/// One cached answer.
#[derive(Debug)]
struct Entry {
    /// Every listed full hash under the prefix on a subscribed list; empty
    /// for a cached miss.
    hashes: Arc<[ListedHash]>,
    /// When it was stored: a clock now earlier than this has run backwards,
    /// and the entry is treated as expired rather than trusted longer.
    stored_at: SystemTime,
    /// When it stops being valid.
    expires_at: SystemTime,
}

/// A bounded cache of full-hash answers keyed by requested prefix; see the
/// module docs.
#[derive(Debug)]
pub struct FullHashCache {
    /// `None` when the capacity is zero: nothing is cached.
    entries: Option<LruCache<RequestPrefix, Entry>>,
}

impl FullHashCache {
    /// A cache holding at most `capacity` prefixes' answers; 0 disables
    /// caching.
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: NonZeroUsize::new(capacity).map(LruCache::new),
        }
    }

    /// The cached answer for `prefix` at `now`, if there is one that has not
    /// expired (an expired one is dropped). An empty slice is a cached miss:
    /// no full hash under `prefix` is listed.
    pub fn get(&mut self, prefix: RequestPrefix, now: SystemTime) -> Option<Arc<[ListedHash]>> {
        let entries = self.entries.as_mut()?;
        let fresh = entries
            .peek(&prefix)
            .map(|e| now >= e.stored_at && now < e.expires_at)?;
        if fresh {
            entries.get(&prefix).map(|e| Arc::clone(&e.hashes))
        } else {
            entries.pop(&prefix);
            None
        }
    }

    /// Caches the answer for `prefix` received at `now`, valid for
    /// `duration` (capped at [`MAX_CACHE_DURATION`]; zero caches nothing).
    pub fn insert(
        &mut self,
        prefix: RequestPrefix,
        hashes: Vec<ListedHash>,
        duration: Duration,
        now: SystemTime,
    ) {
        let Some(entries) = self.entries.as_mut() else {
            return;
        };
        let duration = duration.min(MAX_CACHE_DURATION);
        let Some(expires_at) = now.checked_add(duration) else {
            return;
        };
        if duration.is_zero() {
            entries.pop(&prefix);
            return;
        }
        entries.put(
            prefix,
            Entry {
                hashes: hashes.into(),
                stored_at: now,
                expires_at,
            },
        );
    }

    /// How many answers are cached (expired ones included until they are
    /// looked up or evicted).
    pub fn len(&self) -> usize {
        self.entries.as_ref().map_or(0, LruCache::len)
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every cached answer.
    pub fn clear(&mut self) {
        if let Some(entries) = self.entries.as_mut() {
            entries.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    fn prefix(e: &str) -> RequestPrefix {
        match crate::core::prefix::request_prefix(&FullHash::of(e.as_bytes()), 16) {
            Some(p) => p,
            None => panic!(),
        }
    }

    fn listed(e: &str) -> ListedHash {
        ListedHash {
            full_hash: FullHash::of(e.as_bytes()),
            list: "malware".into(),
        }
    }

    #[test]
    fn hits_and_misses_are_cached_until_they_expire() {
        let mut c = FullHashCache::new(10);
        c.insert(prefix("a/"), vec![listed("a/")], Duration::from_secs(300), t(0));
        c.insert(prefix("b/"), vec![], Duration::from_secs(300), t(0));
        assert_eq!(c.get(prefix("a/"), t(299)).as_deref(), Some(&[listed("a/")][..]));
        assert_eq!(c.get(prefix("b/"), t(299)).as_deref(), Some(&[][..]));
        assert_eq!(c.get(prefix("a/"), t(300)), None);
        assert_eq!(c.get(prefix("c/"), t(1)), None);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn durations_are_capped_and_zero_is_not_cached() {
        let mut c = FullHashCache::new(10);
        c.insert(prefix("a/"), vec![], Duration::from_secs(86_400), t(0));
        assert!(c.get(prefix("a/"), t(3_599)).is_some());
        assert!(c.get(prefix("a/"), t(3_600)).is_none());
        c.insert(prefix("b/"), vec![], Duration::ZERO, t(0));
        assert!(c.get(prefix("b/"), t(0)).is_none());
    }

    #[test]
    fn a_clock_running_backwards_expires_entries() {
        let mut c = FullHashCache::new(10);
        c.insert(prefix("a/"), vec![], Duration::from_secs(300), t(100));
        assert!(c.get(prefix("a/"), t(99)).is_none());
    }

    #[test]
    fn least_recently_used_is_evicted_and_zero_capacity_caches_nothing() {
        let mut c = FullHashCache::new(2);
        let d = Duration::from_secs(300);
        c.insert(prefix("a/"), vec![], d, t(0));
        c.insert(prefix("b/"), vec![], d, t(0));
        assert!(c.get(prefix("a/"), t(1)).is_some());
        c.insert(prefix("c/"), vec![], d, t(0));
        assert!(c.get(prefix("b/"), t(1)).is_none());
        assert!(c.get(prefix("a/"), t(1)).is_some());
        let mut off = FullHashCache::new(0);
        off.insert(prefix("a/"), vec![], d, t(0));
        assert!(off.get(prefix("a/"), t(1)).is_none());
        assert!(off.is_empty());
    }

    #[test]
    fn the_key_includes_the_prefix_length() {
        let mut c = FullHashCache::new(10);
        let h = FullHash::of(b"a/");
        let (Some(p16), Some(p32)) = (
            crate::core::prefix::request_prefix(&h, 16),
            crate::core::prefix::request_prefix(&h, 32),
        ) else {
            panic!()
        };
        c.insert(p16, vec![], Duration::from_secs(300), t(0));
        assert!(c.get(p32, t(1)).is_none());
        assert!(c.get(p16, t(1)).is_some());
    }
}
