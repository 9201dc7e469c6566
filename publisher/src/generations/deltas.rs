//! A list's delta chain (FORMAT.md "Delta chains"): the signed
//! additions-only deltas between its consecutive published versions, the
//! newest last, as one byte string that the updates route serves a suffix
//! of.
//!
//! Each generation stores its chain whole (`builds/<build>.deltas`): the
//! previous generation's chain, the delta from the previous version to its
//! own appended, trimmed from the front to the last `delta_window` deltas
//! and further while it is larger than the generation's snapshot (an agent
//! would rather download the snapshot). A delta is about a kilobyte per
//! build of the union list, so a week of them is a few hundred kilobytes.

use axum::body::Bytes;
use blocksieve_format::{
    DeltaEnd, DeltaParams, FullHash, KeyId, SigningKey, SnapshotHeader, TrustedKey, decode_chain,
    encode_delta, parse_delta_header,
};

/// A delta chain and where each of its deltas starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain {
    /// The deltas, one after another, each one's `from` the previous one's `to`.
    bytes: Bytes,
    /// Per delta, oldest first: its `from` version and its offset in `bytes`.
    /// A request finds its suffix here without parsing the chain again.
    index: Vec<(u64, usize)>,
    /// The `to` end of the last delta (`None` for an empty chain).
    to: Option<DeltaEnd>,
}

impl Chain {
    /// The chain stored as `bytes`, its framing read (headers only, not
    /// verified: see [`Chain::verify`]).
    ///
    /// # Errors
    ///
    /// Why the bytes are not a chain, in words.
    pub fn parse(bytes: Bytes) -> Result<Self, String> {
        let mut index = Vec::new();
        let mut to = None;
        let mut offset = 0;
        while offset < bytes.len() {
            let (header, len) =
                parse_delta_header(&bytes[offset..]).map_err(|e| format!("delta {}: {e}", index.len()))?;
            let end = offset
                .checked_add(len)
                .filter(|&end| end <= bytes.len())
                .ok_or_else(|| format!("delta {} runs past the end of the chain", index.len()))?;
            index.push((header.from.version, offset));
            to = Some(header.to);
            offset = end;
        }
        Ok(Self { bytes, index, to })
    }

    /// Checks every delta's signature under `key` and the links, for list
    /// `list`, and that the chain ends at `end` (the version it is stored
    /// with).
    ///
    /// # Errors
    ///
    /// Why not, in words.
    pub fn verify(&self, list: &str, keys: &[TrustedKey], end: DeltaEnd) -> Result<(), String> {
        let deltas = decode_chain(&self.bytes, list, keys).map_err(|e| e.to_string())?;
        match deltas.last() {
            None => Ok(()),
            Some(last) if last.header().to == end => Ok(()),
            Some(last) => Err(format!(
                "ends at version {}, not at the generation's version {}",
                last.header().to.version,
                end.version
            )),
        }
    }

    /// The chain's bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// How many deltas it holds.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The deltas from version `from` on: `None` when no delta of the chain
    /// starts at `from` (older than the chain, or not a version it passes).
    pub fn suffix(&self, from: u64) -> Option<Bytes> {
        let at = self.index.partition_point(|&(v, _)| v < from);
        let &(version, offset) = self.index.get(at)?;
        (version == from).then(|| self.bytes.slice(offset..))
    }

    /// The deltas after the last one signed by another key than `key`
    /// (the whole chain, unless the signing key was rotated): a chain
    /// continued under a new key keeps none of the old key's deltas, which
    /// a reader trusting the new key alone would refuse, and the whole
    /// generation with them.
    fn signed_by(&self, key: &KeyId) -> Self {
        let other = |&(_, offset): &(u64, usize)| {
            parse_delta_header(&self.bytes[offset..]).map_or(true, |(h, _)| h.key_id != *key)
        };
        let Some(last) = self.index.iter().rposition(other) else {
            return self.clone();
        };
        let kept = &self.index[last + 1..];
        let cut = kept.first().map_or(self.bytes.len(), |&(_, offset)| offset);
        Self {
            bytes: self.bytes.slice(cut..),
            index: kept.iter().map(|&(v, o)| (v, o - cut)).collect(),
            to: self.to.filter(|_| !kept.is_empty()),
        }
    }

    /// This chain with `delta` (`delta_bytes` long, starting at this
    /// chain's end) appended, then its oldest deltas dropped until it holds
    /// at most `window` and is at most `max_bytes` long.
    fn appended(&self, delta: &[u8], to: DeltaEnd, window: usize, max_bytes: usize) -> Self {
        // A chain that does not end where the delta starts cannot be
        // continued: the delta alone.
        let mut index: Vec<(u64, usize)> = self.index.clone();
        let mut bytes = self.bytes.to_vec();
        let from = parse_delta_header(delta).map(|(h, _)| h.from).ok();
        if self.to.is_none() || self.to != from {
            index.clear();
            bytes.clear();
        }
        index.push((from.map_or(0, |f| f.version), bytes.len()));
        bytes.extend_from_slice(delta);
        let mut drop = 0;
        while drop < index.len() && (index.len() - drop > window || bytes.len() - index[drop].1 > max_bytes) {
            drop += 1;
        }
        let cut = index.get(drop).map_or(bytes.len(), |&(_, offset)| offset);
        let index = index[drop..].iter().map(|&(v, o)| (v, o - cut)).collect();
        let bytes = Bytes::from(bytes.split_off(cut));
        let to = (!bytes.is_empty()).then_some(to);
        Self { bytes, index, to }
    }
}

/// The 32-bit prefixes of the full hashes `to` has and `from` has not,
/// ascending and distinct; both sorted. Compared by full hash, not by
/// prefix: an agent whose base filter has 64-bit keys holds an old entry's
/// key, not that of a new full hash sharing its 32-bit prefix, so that
/// prefix must be added all the same (any key width, any base).
fn added_prefixes(from: &[FullHash], to: &[FullHash]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    let mut i = 0;
    for hash in to {
        while i < from.len() && from[i] < *hash {
            i += 1;
        }
        if from.get(i) != Some(hash) {
            out.push(hash.prefix().0);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// What a build appends to its predecessor's chain.
#[derive(Debug)]
pub struct NextDelta<'a> {
    /// The version served before the build: its header, sorted full
    /// hashes and chain (`None`: there was none, and no delta).
    pub from: Option<(&'a SnapshotHeader, &'a [FullHash], &'a Chain)>,
    /// The new version's header and sorted full hashes.
    pub to: (&'a SnapshotHeader, &'a [FullHash]),
    /// The deltas kept.
    pub window: usize,
    /// The new snapshot's size in bytes: the chain is never longer.
    pub snapshot_bytes: usize,
}

impl NextDelta<'_> {
    /// Signs the delta (the prefixes of the full hashes `to` has and `from`
    /// has not, fresh until the new snapshot expires) with `key` and returns
    /// the chain of the new version: empty when there is no `from`, or it is not older,
    /// or the delta cannot be signed (logged; agents then download the
    /// snapshot).
    ///
    /// Empty too when the two versions advertise different request prefix
    /// lengths: a delta carries none, so an agent that followed one would
    /// keep asking at its base's length, which the full-hash routes may
    /// refuse for the new version (`400 prefix_too_short`: every hit
    /// unconfirmed), or which is shorter than the operator now wants.
    /// Agents on any older version then take the new snapshot, and the
    /// chain starts again from it.
    ///
    /// Under a new signing key (a rotation), the old key's deltas are left
    /// out: agents on the old key's last version get the new delta, older
    /// ones the snapshot.
    pub fn chain(&self, key: &SigningKey) -> Chain {
        let (to, to_hashes) = self.to;
        let Some((from, from_hashes, chain)) = self.from.filter(|(from, ..)| {
            from.version < to.version && from.request_prefix_bits == to.request_prefix_bits
        }) else {
            return Chain::default();
        };
        let additions = added_prefixes(from_hashes, to_hashes);
        let end = |h: &SnapshotHeader| DeltaEnd {
            version: h.version,
            body_sha256: h.body_sha256,
        };
        let params = DeltaParams {
            list_name: to.list_name.clone(),
            from: end(from),
            to: end(to),
            created_at: to.created_at,
            expires_at: to.expires_at,
        };
        match encode_delta(&params, &additions, key) {
            Ok(delta) => (chain.signed_by(&key.public_key().id())).appended(
                &delta,
                params.to,
                self.window,
                self.snapshot_bytes,
            ),
            Err(e) => {
                tracing::warn!(list = %to.list_name, error = %e, "cannot sign the delta; agents download the snapshot");
                Chain::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(version: u64) -> DeltaEnd {
        DeltaEnd {
            version,
            body_sha256: [version as u8; 32],
        }
    }

    fn delta(key: &SigningKey, from: u64, to: u64, additions: &[u32]) -> Vec<u8> {
        let params = DeltaParams {
            list_name: "phishing".to_owned(),
            from: end(from),
            to: end(to),
            created_at: 1,
            expires_at: 2,
        };
        encode_delta(&params, additions, key).unwrap()
    }

    fn chain_of(key: &SigningKey, versions: &[u64], window: usize, max_bytes: usize) -> Chain {
        let mut chain = Chain::default();
        for pair in versions.windows(2) {
            let d = delta(key, pair[0], pair[1], &[pair[1] as u32, 7]);
            chain = chain.appended(&d, end(pair[1]), window, max_bytes);
        }
        chain
    }

    #[test]
    fn a_chain_serves_the_suffix_from_each_version_it_passes() {
        let key = SigningKey::from_secret_bytes([3; 32]);
        let chain = chain_of(&key, &[10, 20, 30, 40], 10, usize::MAX);
        assert_eq!(chain.len(), 3);
        assert_eq!(Chain::parse(chain.bytes().clone()).unwrap(), chain);
        chain
            .verify("phishing", std::slice::from_ref(key.public_key()), end(40))
            .unwrap();
        assert!(
            chain
                .verify("phishing", std::slice::from_ref(key.public_key()), end(30))
                .is_err()
        );
        for (from, deltas) in [(10, 3), (20, 2), (30, 1)] {
            let suffix = chain.suffix(from).unwrap();
            let decoded = decode_chain(&suffix, "phishing", &[key.public_key().clone()]).unwrap();
            assert_eq!(decoded.len(), deltas);
            assert_eq!(decoded[0].header().from, end(from));
            assert_eq!(decoded.last().unwrap().header().to, end(40));
        }
        for unknown in [0, 9, 15, 40, 41] {
            assert_eq!(chain.suffix(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn a_chain_keeps_the_window_and_never_outgrows_the_snapshot() {
        let key = SigningKey::from_secret_bytes([3; 32]);
        let chain = chain_of(&key, &[1, 2, 3, 4, 5, 6], 2, usize::MAX);
        assert_eq!(chain.len(), 2);
        assert!(chain.suffix(3).is_none());
        assert!(chain.suffix(4).is_some());
        chain
            .verify("phishing", std::slice::from_ref(key.public_key()), end(6))
            .unwrap();
        let one = delta(&key, 1, 2, &[2, 7]).len();
        let chain = chain_of(&key, &[1, 2, 3, 4, 5, 6], 100, 2 * one + 1);
        assert_eq!(chain.len(), 2);
        assert!(chain.bytes().len() <= 2 * one + 1);
        // A delta alone larger than the snapshot: no chain at all.
        let none = chain_of(&key, &[1, 2], 100, one - 1);
        assert!(none.is_empty());
        assert_eq!(none.suffix(1), None);
    }

    #[test]
    fn a_delta_that_does_not_continue_the_chain_starts_a_new_one() {
        let key = SigningKey::from_secret_bytes([3; 32]);
        let chain = chain_of(&key, &[1, 2, 3], 10, usize::MAX);
        let gap = delta(&key, 5, 6, &[1]);
        let restarted = chain.appended(&gap, end(6), 10, usize::MAX);
        assert_eq!(restarted.len(), 1);
        assert!(restarted.suffix(5).is_some());
        assert!(restarted.suffix(1).is_none());
    }

    fn header(version: u64, key_bits: blocksieve_format::KeyBits) -> SnapshotHeader {
        SnapshotHeader {
            list_name: "phishing".to_owned(),
            version,
            created_at: 1,
            expires_at: 2,
            key_bits,
            request_prefix_bits: 32,
            filter_kind: blocksieve_format::FilterKind::BinaryFuse8,
            filter_param: 0,
            entry_count: 1,
            full_hash_count: 1,
            body_compressed_bytes: 0,
            body_decompressed_bytes: 0,
            body_sha256: [version as u8; 32],
            theoretical_fpr: 0.0,
            measured_fpr: 0.0,
            key_id: [0; 8],
        }
    }

    /// A full hash with the given first eight bytes.
    fn hash_of(first: u64) -> FullHash {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&first.to_be_bytes());
        FullHash(bytes)
    }

    #[test]
    fn a_new_full_hash_sharing_a_32_bit_prefix_is_added_under_64_bit_keys() {
        // A 64-bit filter holds the old hash's key, not the new one's: a
        // delta that leaves the shared 32-bit prefix out makes the agent
        // miss the new entry.
        let key = SigningKey::from_secret_bytes([3; 32]);
        let old = hash_of(0x1234_5678_0000_0001);
        let new = hash_of(0x1234_5678_0000_0002);
        for (from_bits, to_bits) in [
            (
                blocksieve_format::KeyBits::Bits64,
                blocksieve_format::KeyBits::Bits64,
            ),
            (
                blocksieve_format::KeyBits::Bits64,
                blocksieve_format::KeyBits::Bits32,
            ),
            (
                blocksieve_format::KeyBits::Bits32,
                blocksieve_format::KeyBits::Bits64,
            ),
        ] {
            let (from, to) = (header(1, from_bits), header(2, to_bits));
            let from_hashes = [old];
            let to_hashes = [old, new];
            let chain = NextDelta {
                from: Some((&from, &from_hashes, &Chain::default())),
                to: (&to, &to_hashes),
                window: 10,
                snapshot_bytes: usize::MAX,
            }
            .chain(&key);
            let deltas = decode_chain(chain.bytes(), "phishing", &[key.public_key().clone()]).unwrap();
            assert_eq!(deltas.len(), 1);
            // The agent's state: the base filter's keys and the additions.
            let found = |h: &FullHash| {
                from_hashes
                    .iter()
                    .any(|b| from_bits.key_of(b) == from_bits.key_of(h))
                    || deltas[0].additions().binary_search(&h.prefix().0).is_ok()
            };
            for h in &to_hashes {
                assert!(found(h), "{from_bits:?} -> {to_bits:?}: {h} missed");
            }
        }
    }

    #[test]
    fn no_delta_joins_versions_with_different_request_prefix_lengths() {
        let key = SigningKey::from_secret_bytes([3; 32]);
        let bits32 = blocksieve_format::KeyBits::Bits32;
        let (old, new) = (hash_of(1 << 40), hash_of(2 << 40));
        let earlier = chain_of(&key, &[1, 2], 10, usize::MAX);
        for (from_bits, to_bits, joined) in [(12, 12, true), (8, 12, false), (16, 12, false)] {
            let mut from = header(2, bits32);
            from.request_prefix_bits = from_bits;
            let mut to = header(3, bits32);
            to.request_prefix_bits = to_bits;
            let chain = NextDelta {
                from: Some((&from, &[old], &earlier)),
                to: (&to, &[old, new]),
                window: 10,
                snapshot_bytes: usize::MAX,
            }
            .chain(&key);
            // Joined, the chain reaches the new version from every version
            // it passes; otherwise from none (agents take the snapshot).
            assert_eq!(chain.suffix(2).is_some(), joined, "{from_bits} -> {to_bits}");
            assert_eq!(chain.suffix(1).is_some(), joined, "{from_bits} -> {to_bits}");
            assert_eq!(chain.is_empty(), !joined, "{from_bits} -> {to_bits}");
        }
    }

    /// A key rotation: the first build under the new key continues a
    /// chain the old key signed. The new version's chain holds only what
    /// the new key signed (the delta from the old key's last version on):
    /// a reader that trusts the new key alone (a replica or builder once
    /// the old key is dropped from `previous_public_keys`) loads the whole
    /// generation, where an old delta left in its chain had it refused.
    /// Found by an adversarial review.
    #[test]
    fn regression_a_chain_continued_under_a_new_key_keeps_none_of_the_old_key_s_deltas() {
        let (old, new) = (
            SigningKey::from_secret_bytes([3; 32]),
            SigningKey::from_secret_bytes([4; 32]),
        );
        let bits32 = blocksieve_format::KeyBits::Bits32;
        let earlier = chain_of(&old, &[1, 2, 3], 10, usize::MAX);
        let (from, to) = (header(3, bits32), header(4, bits32));
        let next = |chain: &Chain, to: &SnapshotHeader, key: &SigningKey| {
            NextDelta {
                from: Some((&from, &[hash_of(1 << 40)], chain)),
                to: (to, &[hash_of(1 << 40), hash_of(2 << 40)]),
                window: 10,
                snapshot_bytes: usize::MAX,
            }
            .chain(key)
        };
        let rotated = next(&earlier, &to, &new);
        let only_new = std::slice::from_ref(new.public_key());
        rotated.verify("phishing", only_new, end(4)).unwrap();
        assert_eq!(rotated.len(), 1);
        assert!(
            rotated.suffix(3).is_some(),
            "agents on the old key's last version get a delta"
        );
        assert_eq!(rotated.suffix(1), None);
        // Under the same key, the chain is continued whole, as before.
        let same = next(&earlier, &to, &old);
        assert_eq!(same.len(), 3);
        assert!(same.suffix(1).is_some());
    }

    #[test]
    fn bytes_that_are_not_a_chain_are_refused() {
        let key = SigningKey::from_secret_bytes([3; 32]);
        let chain = chain_of(&key, &[1, 2, 3], 10, usize::MAX);
        let cut = chain.bytes().slice(..chain.bytes().len() - 1);
        assert!(Chain::parse(cut).is_err());
        assert!(Chain::parse(Bytes::from_static(b"garbage")).is_err());
        assert_eq!(Chain::parse(Bytes::new()).unwrap(), Chain::default());
    }
}
