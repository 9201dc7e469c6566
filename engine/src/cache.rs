//! The full-hash cache: how long a publisher's answer for a requested
//! prefix may be reused, and how much memory the answers may take.
//!
//! Safe Browsing v5 semantics (`hashes:search`, "cache duration"): the
//! answer for a requested prefix lists *every* full hash under that prefix,
//! so for its cache duration it answers both ways — a full hash it lists is
//! listed, and any other full hash with that prefix is not (a cached miss).
//! An answer with no match is cached as well. Entries are keyed by the
//! requested prefix ([`RequestPrefix`], length included), exactly what went
//! over the wire, so the cache reveals nothing a request did not.
//!
//! The cache is bounded in bytes, not in entries, because an answer's size
//! is set by the list, not by the agent: under a 12-bit request prefix an
//! 840,000-entry list has about 205 full hashes, under a 32-bit one most
//! answers are empty. Each answer is stored compactly ([`ListedHashes`]: the
//! full hashes of a list in one sorted boxed slice, the list's name shared
//! with the agent's subscriptions) and accounted at what it holds on the
//! heap plus the cache's bookkeeping ([`FullHashCache::bytes`]): an answer
//! of n full hashes on one list costs 32 n + 64 bytes and 168 bytes of
//! bookkeeping (on 64-bit targets), a cached miss only the latter. Least
//! recently used answers are evicted (the `lru` crate) until the total is
//! back within the budget, and an answer larger than the whole budget is
//! not cached. Cache durations are capped at [`MAX_CACHE_DURATION`].

use std::mem::size_of;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use blocksieve_format::{FullHash, RequestPrefix};
use lru::LruCache;

/// The longest a full-hash answer is cached, whatever the publisher says:
/// one hour. An unsigned answer that wrongly says "not listed" (a broken
/// proxy, or anyone on a plain-HTTP path) then hides a listed URL for at
/// most that long.
pub const MAX_CACHE_DURATION: Duration = Duration::from_secs(60 * 60);

/// What the memory allocator keeps with each allocation besides the bytes
/// asked for (glibc: an 8-byte header, sizes rounded up to 16 bytes), so
/// that many small allocations are not accounted as free.
const ALLOCATION_OVERHEAD_BYTES: usize = 16;

/// The full hashes a publisher lists under one request prefix, on the
/// threat lists the agent subscribes to: the useful part of one answer to a
/// full-hash request, as cached. Empty for a prefix under which nothing is
/// listed (a miss).
///
/// Stored compactly, for the cache's sake: per threat list, its name
/// (an `Arc<str>`: answers made by [`sort_answers`] share the agent's one
/// copy of each subscribed list's name) and its full hashes (32 bytes each)
/// sorted in one boxed slice, so a lookup is a binary search and an answer
/// of n full hashes on one list takes 32 n + 64 bytes
/// ([`ListedHashes::heap_bytes`]).
///
/// [`sort_answers`]: crate::prefix::sort_answers
///
/// ```
/// use blocksieve_engine::cache::ListedHashes;
/// use blocksieve_format::FullHash;
///
/// let evil = FullHash::of(b"evil.example/");
/// let listed = ListedHashes::new([("malware", evil), ("malware", evil)]);
/// assert_eq!(listed.len(), 1);
/// assert!(listed.contains(&evil, "malware"));
/// // Listed on another list only, or not listed at all: no.
/// assert!(!listed.contains(&evil, "phishing"));
/// assert!(!listed.contains(&FullHash::of(b"good.example/"), "malware"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListedHashes {
    /// Per threat list, in the order the lists first appeared. A list
    /// appears once.
    by_list: Box<[OnList]>,
}

/// The full hashes listed on one threat list under a request prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OnList {
    /// The threat list's name, shared: not a copy per answer.
    list: Arc<str>,
    /// Its listed full hashes, sorted and distinct: a lookup is a binary
    /// search.
    hashes: Box<[FullHash]>,
}

impl ListedHashes {
    /// The answer listing each `(list, full hash)` pair, in any order;
    /// repeated pairs are kept once. Each list's name is kept as the first
    /// pair gave it: an `Arc<str>` is shared, a `&str` copied once per list.
    pub fn new<L>(pairs: impl IntoIterator<Item = (L, FullHash)>) -> Self
    where
        L: AsRef<str> + Into<Arc<str>>,
    {
        // Few lists per answer (only subscribed ones reach here), many full
        // hashes: a linear search over the lists is the cheap part.
        let mut groups: Vec<(L, Vec<FullHash>)> = Vec::new();
        for (list, hash) in pairs {
            match groups.iter_mut().find(|(l, _)| l.as_ref() == list.as_ref()) {
                Some((_, hashes)) => hashes.push(hash),
                None => groups.push((list, vec![hash])),
            }
        }
        Self::from_lists(groups.into_iter().map(|(list, hashes)| (list.into(), hashes)))
    }

    /// The answer listing, per threat list, its full hashes in any order;
    /// each list appears once. Repeated full hashes are kept once; a
    /// vector with room for exactly its full hashes and none repeated
    /// becomes the stored slice without a copy.
    pub(crate) fn from_lists(lists: impl IntoIterator<Item = (Arc<str>, Vec<FullHash>)>) -> Self {
        let by_list = lists
            .into_iter()
            .map(|(list, mut hashes)| {
                hashes.sort_unstable();
                hashes.dedup();
                OnList {
                    list,
                    hashes: hashes.into_boxed_slice(),
                }
            })
            .collect();
        Self { by_list }
    }

    /// Whether the publisher lists `full_hash` on `list`.
    pub fn contains(&self, full_hash: &FullHash, list: &str) -> bool {
        self.by_list
            .iter()
            .find(|on| &*on.list == list)
            .is_some_and(|on| on.hashes.binary_search(full_hash).is_ok())
    }

    /// Every listed `(list, full hash)` pair, list by list, full hashes in
    /// ascending order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &FullHash)> {
        self.by_list
            .iter()
            .flat_map(|on| on.hashes.iter().map(move |h| (&*on.list, h)))
    }

    /// How many `(list, full hash)` pairs are listed.
    pub fn len(&self) -> usize {
        self.by_list.iter().map(|on| on.hashes.len()).sum()
    }

    /// Whether nothing is listed under the prefix: a miss.
    pub fn is_empty(&self) -> bool {
        self.by_list.iter().all(|on| on.hashes.is_empty())
    }

    /// What this answer holds on the heap, in bytes: the full hashes and
    /// the per-list table (a name and a slice, 32 bytes a list), with the
    /// allocator's overhead of each allocation — 32 n + 64 bytes for n full
    /// hashes on one list, 0 for a miss. The list names are not counted:
    /// they are shared (answers made by
    /// [`sort_answers`](crate::prefix::sort_answers) share the
    /// agent's one copy of each subscribed list's name, whatever the cache
    /// holds).
    pub fn heap_bytes(&self) -> usize {
        let table = if self.by_list.is_empty() {
            0
        } else {
            self.by_list.len() * size_of::<OnList>() + ALLOCATION_OVERHEAD_BYTES
        };
        self.by_list.iter().fold(table, |total, on| {
            total + on.hashes.len() * size_of::<FullHash>() + ALLOCATION_OVERHEAD_BYTES
        })
    }
}

/// One cached answer.
#[derive(Debug)]
struct Entry {
    /// Every listed full hash under the prefix on a subscribed list; empty
    /// for a cached miss. Shared with the checks that asked for it.
    hashes: Arc<ListedHashes>,
    /// When it was stored: a clock now earlier than this has run backwards,
    /// and the entry is treated as expired rather than trusted longer.
    stored_at: SystemTime,
    /// When it stops being valid.
    expires_at: SystemTime,
    /// What it is accounted for in [`FullHashCache::bytes`], kept so that
    /// removing it subtracts exactly what inserting it added.
    bytes: usize,
}

/// What each cached answer costs besides its [`ListedHashes::heap_bytes`]:
/// the `lru` crate's list node (the key, the [`Entry`] and two links, one
/// allocation), its hash table slot (two pointers and a control byte, at a
/// load factor that can be as low as one half: four words), and the `Arc`
/// around the answer (two counts and the [`ListedHashes`], one allocation).
/// On 64-bit targets, 168 bytes: all a cached miss costs.
const ENTRY_OVERHEAD_BYTES: usize = size_of::<RequestPrefix>()
    + size_of::<Entry>()
    + 2 * size_of::<usize>()
    + ALLOCATION_OVERHEAD_BYTES
    + 4 * size_of::<usize>()
    + 2 * size_of::<usize>()
    + size_of::<ListedHashes>()
    + ALLOCATION_OVERHEAD_BYTES;

/// A cache of full-hash answers keyed by requested prefix, bounded in
/// bytes; see the module docs.
#[derive(Debug)]
pub struct FullHashCache {
    /// Least recently used first out; never evicts by itself (the byte
    /// budget decides).
    entries: LruCache<RequestPrefix, Entry>,
    /// The sum of the entries' accounted bytes.
    bytes: usize,
    /// The budget `bytes` stays within; 0 caches nothing.
    max_bytes: usize,
}

impl FullHashCache {
    /// A cache whose answers take at most `max_bytes` bytes, as accounted by
    /// [`FullHashCache::bytes`]; 0 disables caching.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            entries: LruCache::unbounded(),
            bytes: 0,
            max_bytes,
        }
    }

    /// The cached answer for `prefix` at `now`, if there is one that has not
    /// expired (an expired one is dropped). An empty answer is a cached
    /// miss: no full hash under `prefix` is listed.
    pub fn get(&mut self, prefix: RequestPrefix, now: SystemTime) -> Option<Arc<ListedHashes>> {
        let fresh = self
            .entries
            .peek(&prefix)
            .map(|e| now >= e.stored_at && now < e.expires_at)?;
        if fresh {
            self.entries.get(&prefix).map(|e| Arc::clone(&e.hashes))
        } else {
            self.remove(prefix);
            None
        }
    }

    /// Caches the answer for `prefix` received at `now`, valid for
    /// `duration` (capped at [`MAX_CACHE_DURATION`]; zero caches nothing),
    /// replacing any earlier answer for `prefix`. Least recently used
    /// answers are evicted until it fits the budget; an answer larger than
    /// the whole budget is not cached.
    pub fn insert(
        &mut self,
        prefix: RequestPrefix,
        hashes: Arc<ListedHashes>,
        duration: Duration,
        now: SystemTime,
    ) {
        self.remove(prefix);
        let duration = duration.min(MAX_CACHE_DURATION);
        let Some(expires_at) = now.checked_add(duration) else {
            return;
        };
        let bytes = ENTRY_OVERHEAD_BYTES + hashes.heap_bytes();
        if duration.is_zero() || bytes > self.max_bytes {
            return;
        }
        while self.bytes.saturating_add(bytes) > self.max_bytes {
            match self.entries.pop_lru() {
                Some((_, evicted)) => self.bytes = self.bytes.saturating_sub(evicted.bytes),
                None => break,
            }
        }
        self.bytes = self.bytes.saturating_add(bytes);
        self.entries.put(
            prefix,
            Entry {
                hashes,
                stored_at: now,
                expires_at,
                bytes,
            },
        );
    }

    /// Drops the answer for `prefix`, if any.
    fn remove(&mut self, prefix: RequestPrefix) {
        if let Some(old) = self.entries.pop(&prefix) {
            self.bytes = self.bytes.saturating_sub(old.bytes);
        }
    }

    /// How many answers are cached (expired ones included until they are
    /// looked up or evicted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes the cached answers are accounted for: each answer's
    /// [`ListedHashes::heap_bytes`] plus a fixed overhead per entry for the
    /// cache's own bookkeeping. Never more than the budget given to
    /// [`FullHashCache::new`].
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drops every cached answer.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    /// Room for a few small answers.
    const SMALL: usize = 16 * 1024;

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    fn prefix(e: &str) -> RequestPrefix {
        match RequestPrefix::new(&FullHash::of(e.as_bytes()), 16) {
            Some(p) => p,
            None => panic!(),
        }
    }

    fn listed(expressions: &[&str]) -> Arc<ListedHashes> {
        Arc::new(ListedHashes::new(
            expressions
                .iter()
                .map(|e| ("malware", FullHash::of(e.as_bytes()))),
        ))
    }

    fn none() -> Arc<ListedHashes> {
        Arc::new(ListedHashes::default())
    }

    #[test]
    fn listed_hashes_are_grouped_by_list_sorted_and_distinct() {
        let (a, b, c) = (FullHash::of(b"a/"), FullHash::of(b"b/"), FullHash::of(b"c/"));
        let l = ListedHashes::new([
            ("malware", c),
            ("phishing", a),
            ("malware", a),
            ("malware", c),
            ("phishing", b),
        ]);
        assert_eq!(l.len(), 4);
        assert!(!l.is_empty());
        let mut malware = [a, c];
        malware.sort();
        let mut phishing = [a, b];
        phishing.sort();
        let pairs: Vec<(&str, FullHash)> = l.iter().map(|(list, h)| (list, *h)).collect();
        assert_eq!(
            pairs,
            vec![
                ("malware", malware[0]),
                ("malware", malware[1]),
                ("phishing", phishing[0]),
                ("phishing", phishing[1]),
            ]
        );
        assert!(l.contains(&a, "malware") && l.contains(&c, "malware") && !l.contains(&b, "malware"));
        assert!(l.contains(&b, "phishing") && !l.contains(&c, "phishing"));
        assert!(!l.contains(&a, "social"));
        let miss = ListedHashes::new::<&str>([]);
        assert!(miss.is_empty() && miss.heap_bytes() == 0);
        assert_eq!((miss.len(), miss), (0, ListedHashes::default()));
    }

    #[test]
    fn listed_hashes_take_32_bytes_a_full_hash_and_a_list_name_once() {
        let hashes: Vec<FullHash> = (0..200u32).map(|i| FullHash::of(&i.to_be_bytes())).collect();
        let l = ListedHashes::new(hashes.iter().map(|h| ("phishing", *h)));
        let bytes = l.heap_bytes();
        assert!(bytes >= 200 * 32, "{bytes}");
        assert!(bytes <= 200 * 32 + 128, "{bytes}");
    }

    #[test]
    fn the_default_budget_holds_what_its_docs_say() {
        let bucket: Vec<FullHash> = (0..205u32).map(|i| FullHash::of(&i.to_be_bytes())).collect();
        let bucket = ListedHashes::new(bucket.iter().map(|h| ("phishing", *h)));
        let twelve_bit = ENTRY_OVERHEAD_BYTES + bucket.heap_bytes();
        let budget = 4 << 20; // the agent's default budget
        assert!((6_700..=6_900).contains(&twelve_bit), "{twelve_bit}");
        assert!(
            (580..=640).contains(&(budget / twelve_bit)),
            "{}",
            budget / twelve_bit
        );
        assert!(
            (150..=190).contains(&ENTRY_OVERHEAD_BYTES),
            "{ENTRY_OVERHEAD_BYTES}"
        );
        // The figures of the module docs, on 64-bit targets.
        if cfg!(target_pointer_width = "64") {
            assert_eq!(ENTRY_OVERHEAD_BYTES, 168);
            assert_eq!(bucket.heap_bytes(), 205 * 32 + 64);
        }
        assert!((22_000..=28_000).contains(&(budget / ENTRY_OVERHEAD_BYTES)));
    }

    #[test]
    fn hits_and_misses_are_cached_until_they_expire() {
        let mut c = FullHashCache::new(SMALL);
        c.insert(prefix("a/"), listed(&["a/"]), Duration::from_secs(300), t(0));
        c.insert(prefix("b/"), none(), Duration::from_secs(300), t(0));
        assert_eq!(c.get(prefix("a/"), t(299)), Some(listed(&["a/"])));
        assert_eq!(c.get(prefix("b/"), t(299)), Some(none()));
        assert_eq!(c.get(prefix("a/"), t(300)), None);
        assert_eq!(c.get(prefix("c/"), t(1)), None);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn durations_are_capped_and_zero_is_not_cached() {
        let mut c = FullHashCache::new(SMALL);
        c.insert(prefix("a/"), none(), Duration::from_secs(86_400), t(0));
        assert!(c.get(prefix("a/"), t(3_599)).is_some());
        assert!(c.get(prefix("a/"), t(3_600)).is_none());
        c.insert(prefix("b/"), none(), Duration::ZERO, t(0));
        assert!(c.get(prefix("b/"), t(0)).is_none());
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn a_clock_running_backwards_expires_entries() {
        let mut c = FullHashCache::new(SMALL);
        c.insert(prefix("a/"), none(), Duration::from_secs(300), t(100));
        assert!(c.get(prefix("a/"), t(99)).is_none());
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn least_recently_used_is_evicted_past_the_byte_budget() {
        let d = Duration::from_secs(300);
        // Room for exactly two misses.
        let mut c = FullHashCache::new(2 * ENTRY_OVERHEAD_BYTES);
        c.insert(prefix("a/"), none(), d, t(0));
        c.insert(prefix("b/"), none(), d, t(0));
        assert_eq!(c.bytes(), 2 * ENTRY_OVERHEAD_BYTES);
        assert!(c.get(prefix("a/"), t(1)).is_some());
        c.insert(prefix("c/"), none(), d, t(0));
        assert!(c.get(prefix("b/"), t(1)).is_none());
        assert!(c.get(prefix("a/"), t(1)).is_some());
        assert!(c.get(prefix("c/"), t(1)).is_some());
        // One big answer pushes out both small ones.
        let big: Vec<String> = (0..10).map(|i| format!("x{i}/")).collect();
        let big: Vec<&str> = big.iter().map(String::as_str).collect();
        let mut c = FullHashCache::new(ENTRY_OVERHEAD_BYTES + listed(&big).heap_bytes());
        c.insert(prefix("a/"), none(), d, t(0));
        c.insert(prefix("b/"), none(), d, t(0));
        c.insert(prefix("big/"), listed(&big), d, t(0));
        assert_eq!(c.len(), 1);
        assert!(c.get(prefix("big/"), t(1)).is_some());
        assert!(c.bytes() <= ENTRY_OVERHEAD_BYTES + listed(&big).heap_bytes());
    }

    #[test]
    fn the_accounted_bytes_follow_every_insert_replace_expiry_and_eviction() {
        let d = Duration::from_secs(300);
        let budget = 64 * 1024;
        let mut c = FullHashCache::new(budget);
        let answers: Vec<Vec<String>> = (0..200)
            .map(|i| (0..i % 37).map(|j| format!("e{i}-{j}/")).collect())
            .collect();
        for (i, exprs) in answers.iter().enumerate() {
            let exprs: Vec<&str> = exprs.iter().map(String::as_str).collect();
            let key = format!("k{}/", i % 150);
            c.insert(prefix(&key), listed(&exprs), d, t(i as u64));
            assert!(c.bytes() <= budget);
        }
        let recount: usize = c
            .entries
            .iter()
            .map(|(_, e)| ENTRY_OVERHEAD_BYTES + e.hashes.heap_bytes())
            .sum();
        assert_eq!(c.bytes(), recount);
        assert!(c.bytes() > budget / 2, "the budget is used: {}", c.bytes());
        // Everything expires.
        let keys: Vec<RequestPrefix> = c.entries.iter().map(|(k, _)| *k).collect();
        for k in keys {
            assert!(c.get(k, t(10_000)).is_none());
        }
        assert_eq!((c.bytes(), c.len()), (0, 0));
    }

    #[test]
    fn an_answer_larger_than_the_budget_is_not_cached_and_zero_caches_nothing() {
        let d = Duration::from_secs(300);
        let mut c = FullHashCache::new(ENTRY_OVERHEAD_BYTES + 100);
        c.insert(prefix("a/"), none(), d, t(0));
        // Replacing an answer with one too large drops the old one too:
        // an outdated answer must not outlive a newer one.
        c.insert(prefix("a/"), listed(&["1/", "2/", "3/", "4/"]), d, t(1));
        assert!(c.get(prefix("a/"), t(2)).is_none());
        assert!(c.is_empty());
        assert_eq!(c.bytes(), 0);
        let mut off = FullHashCache::new(0);
        off.insert(prefix("a/"), none(), d, t(0));
        assert!(off.get(prefix("a/"), t(1)).is_none());
        assert!(off.is_empty());
    }

    #[test]
    fn the_key_includes_the_prefix_length() {
        let mut c = FullHashCache::new(SMALL);
        let h = FullHash::of(b"a/");
        let (Some(p16), Some(p32)) = (RequestPrefix::new(&h, 16), RequestPrefix::new(&h, 32)) else {
            panic!()
        };
        c.insert(p16, none(), Duration::from_secs(300), t(0));
        assert!(c.get(p32, t(1)).is_none());
        assert!(c.get(p16, t(1)).is_some());
    }
}
