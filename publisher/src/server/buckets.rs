//! The bucket of a request prefix as the full-hash routes send it: every
//! listed full hash under the prefix, padded up to the configured padding
//! so that a hit and a miss have the same size — with random padding over
//! every list for `GET /v1/hashes/{prefix}` and `POST /v1/hashes:search`,
//! with padding derived from the URL for the immutable buckets of one
//! list's snapshot version.

use blocksieve_format::api::ListedFullHash;
use blocksieve_format::{FullHash, RequestPrefix};
use rand::RngCore as _;

use crate::state::AppState;

/// Every full hash starting with `prefix` listed on a list `among`
/// accepts (by name), padded with random hashes of the same prefix up to
/// the configured padding.
pub(super) fn bucket(
    state: &AppState,
    prefix: RequestPrefix,
    among: impl Fn(&str) -> bool,
) -> Vec<ListedFullHash> {
    let mut matches = Vec::new();
    for slot in state.lists.iter().filter(|l| among(&l.name)) {
        if let Some(current) = slot.current.load().as_deref() {
            for h in current.bucket(prefix) {
                matches.push(ListedFullHash {
                    full_hash: *h,
                    list: slot.name.clone(),
                });
            }
        }
    }
    if matches.len() < state.padding {
        // Padding entries look like real ones (same prefix, a real list name)
        // and can never match a URL: a random 256-bit hash collides with
        // probability 2^-(256 - bits).
        let pad_list = (state.lists.iter().find(|l| among(&l.name)))
            .map(|l| l.name.clone())
            .unwrap_or_default();
        let mut rng = rand::thread_rng();
        let (lo, hi) = prefix.range32();
        while matches.len() < state.padding {
            let mut h = [0u8; 32];
            rng.fill_bytes(&mut h);
            let p = lo | (u32::from_be_bytes([h[0], h[1], h[2], h[3]]) & (hi - lo));
            h[..4].copy_from_slice(&p.to_be_bytes());
            matches.push(ListedFullHash {
                full_hash: FullHash(h),
                list: pad_list.clone(),
            });
        }
        // Shuffle so padding cannot be told apart by position.
        use rand::seq::SliceRandom as _;
        matches.shuffle(&mut rng);
    }
    matches
}

/// The bucket of `prefix` in version `version` of list `name`: its
/// `listed` full hashes (those of the snapshot under `prefix`), padded up
/// to `padding` entries as [`bucket`] does, but with padding
/// derived from the list, version and prefix rather than drawn at random,
/// and everything sorted by full hash: an immutable URL must give the same
/// bytes on every replica and on every request. Padding hides only the
/// size of a bucket from someone who sees the encrypted response, so
/// padding anyone can recompute serves it as well as random padding; it
/// never matches a URL (a full hash that is SHA-256 output, 2^-(256 -
/// bits) per expression).
pub(super) fn list_bucket(
    name: &str,
    version: u64,
    listed: &[FullHash],
    prefix: RequestPrefix,
    padding: usize,
) -> Vec<ListedFullHash> {
    let mut hashes: Vec<FullHash> = listed.to_vec();
    let (lo, hi) = prefix.range32();
    let mut n: u64 = 0;
    while hashes.len() < padding {
        let seed = format!("blocksieve bucket padding\0{name}\0{version}\0{prefix}\0{n}");
        let FullHash(mut h) = FullHash::of(seed.as_bytes());
        let p = lo | (u32::from_be_bytes([h[0], h[1], h[2], h[3]]) & (hi - lo));
        h[..4].copy_from_slice(&p.to_be_bytes());
        hashes.push(FullHash(h));
        n += 1;
    }
    hashes.sort_unstable();
    hashes
        .into_iter()
        .map(|full_hash| ListedFullHash {
            full_hash,
            list: name.to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_immutable_bucket_is_the_same_every_time_and_padded_within_its_prefix() {
        let listed = FullHash::of(b"a.b.c/");
        let prefix = RequestPrefix::of(&listed, 12);
        let bucket = list_bucket("phishing", 7, &[listed], prefix, 16);
        assert_eq!(bucket, list_bucket("phishing", 7, &[listed], prefix, 16));
        assert_eq!(bucket.len(), 16);
        assert!(
            bucket
                .iter()
                .all(|m| m.list == "phishing" && prefix.matches(&m.full_hash))
        );
        assert!(bucket.iter().any(|m| m.full_hash == listed));
        assert!(bucket.windows(2).all(|w| w[0].full_hash < w[1].full_hash));
        // Another version or list is padded differently; no padding asked,
        // none added.
        assert_ne!(bucket, list_bucket("phishing", 8, &[listed], prefix, 16));
        assert_ne!(bucket, list_bucket("malware", 7, &[listed], prefix, 16));
        let bare = list_bucket("phishing", 7, &[listed], prefix, 0);
        assert_eq!(bare.len(), 1);
        assert_eq!(bare[0].full_hash, listed);
    }
}
