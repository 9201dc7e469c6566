//! What one update round did to each list, and the rule that decides
//! whether a verified snapshot may replace the current one.

use blocksieve_format::VerifiedSnapshot;

use crate::Error;

/// The outcome of [`Agent::update`](crate::Agent::update): one entry per
/// subscribed list, in subscription order.
#[derive(Debug)]
#[non_exhaustive]
pub struct UpdateReport {
    /// Each list's name and what happened to it.
    pub lists: Vec<(String, ListUpdate)>,
}

impl UpdateReport {
    /// The outcome for `list`, if the agent subscribes to it.
    pub fn get(&self, list: &str) -> Option<&ListUpdate> {
        self.lists.iter().find(|(name, _)| name == list).map(|(_, u)| u)
    }

    /// Whether every list is now on the publisher's current snapshot.
    pub fn is_complete(&self) -> bool {
        self.lists
            .iter()
            .all(|(_, u)| !matches!(u, ListUpdate::Failed { .. }))
    }

    /// The lists that failed to update, with why; their previous filter is
    /// still in use.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &Error)> {
        self.lists.iter().filter_map(|(name, u)| match u {
            ListUpdate::Failed { error, .. } => Some((name.as_str(), error)),
            _ => None,
        })
    }
}

/// What an update did to one list.
#[non_exhaustive]
#[derive(Debug)]
pub enum ListUpdate {
    /// A newer snapshot was verified and swapped in.
    Updated {
        /// The version replaced, or `None` for the list's first snapshot.
        previous: Option<u64>,
        /// The version now in use.
        version: u64,
    },
    /// The publisher still serves the snapshot in use (`304 Not Modified`,
    /// or the same version with the same body).
    Unchanged {
        /// The version in use.
        version: u64,
    },
    /// The download or verification failed; the previous filter, if any,
    /// is still in use.
    Failed {
        /// Why the update failed.
        error: Error,
        /// The version still in use, or `None` if the list has no snapshot.
        kept_version: Option<u64>,
    },
}

/// What to do with a verified snapshot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// It is newer: swap it in.
    Replace,
    /// It is the snapshot already in use.
    Same,
}

/// Decides whether `new`, verified and downloaded for `requested`, may
/// replace `current`. The list name and version are read from the signed
/// header, so neither can be forged, only replayed — which is what this
/// catches (rust-tuf's `AttemptedMetadataRollBack`).
///
/// # Errors
///
/// [`Error::WrongList`] when `new` is a snapshot of another list;
/// [`Error::Rollback`] when it is older than `current`, or has the same
/// version but a different body.
pub(crate) fn decide(
    requested: &str,
    current: Option<&VerifiedSnapshot>,
    new: &VerifiedSnapshot,
) -> Result<Decision, Error> {
    let header = new.header();
    if header.list_name != requested {
        return Err(Error::WrongList {
            requested: requested.to_owned(),
            found: header.list_name.clone(),
        });
    }
    let Some(current) = current else {
        return Ok(Decision::Replace);
    };
    let trusted = current.header();
    if header.version > trusted.version {
        Ok(Decision::Replace)
    } else if header.version == trusted.version && header.body_sha256 == trusted.body_sha256 {
        Ok(Decision::Same)
    } else {
        Err(Error::Rollback {
            list: requested.to_owned(),
            trusted_version: trusted.version,
            new_version: header.version,
        })
    }
}

#[cfg(test)]
mod tests {
    use blocksieve_format::{
        DecodeLimits, FilterKind, FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotParams, decode, encode,
    };

    use super::*;

    fn snapshot(list: &str, version: u64, expressions: &[&str]) -> VerifiedSnapshot {
        let key = SigningKey::from_secret_bytes([7u8; 32]);
        let mut keys: Vec<u64> = expressions
            .iter()
            .map(|e| FullHash::of(e.as_bytes()).prefix().key())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let filter = PrefixFilter::build(FilterKind::BinaryFuse8, &keys).map_err(|e| e.to_string());
        let params = SnapshotParams {
            list_name: list.into(),
            version,
            created_at: 1_000,
            expires_at: u64::MAX,
            key_bits: KeyBits::Bits32,
            request_prefix_bits: 32,
            full_hash_count: keys.len() as u64,
            measured_fpr: 0.0,
            zstd_level: 1,
        };
        let bytes = filter
            .and_then(|f| encode(&params, &f, &key).map_err(|e| e.to_string()))
            .and_then(|b| {
                decode(&b, &[key.public_key().clone()], &DecodeLimits::default(), 2_000)
                    .map_err(|e| e.to_string())
            });
        match bytes {
            Ok(s) => s,
            Err(e) => panic!("test snapshot: {e}"),
        }
    }

    #[test]
    fn first_snapshot_is_accepted() {
        let s = snapshot("malware", 1, &["a/"]);
        assert_eq!(decide("malware", None, &s).ok(), Some(Decision::Replace));
    }

    #[test]
    fn newer_replaces_same_is_same() {
        let v1 = snapshot("malware", 1, &["a/"]);
        let v2 = snapshot("malware", 2, &["a/", "b/"]);
        assert_eq!(decide("malware", Some(&v1), &v2).ok(), Some(Decision::Replace));
        assert_eq!(
            decide("malware", Some(&v2), &v2.clone()).ok(),
            Some(Decision::Same)
        );
    }

    #[test]
    fn older_version_is_rollback_with_both_versions() {
        let v1 = snapshot("malware", 1, &["a/"]);
        let v2 = snapshot("malware", 2, &["a/"]);
        match decide("malware", Some(&v2), &v1) {
            Err(Error::Rollback {
                trusted_version: 2,
                new_version: 1,
                ..
            }) => {}
            other => panic!("expected rollback, got {other:?}"),
        }
    }

    #[test]
    fn same_version_different_body_is_rollback() {
        let a = snapshot("malware", 3, &["a/"]);
        let b = snapshot("malware", 3, &["b/"]);
        assert!(matches!(
            decide("malware", Some(&a), &b),
            Err(Error::Rollback { .. })
        ));
    }

    #[test]
    fn snapshot_of_another_list_is_rejected() {
        let p = snapshot("phishing", 9, &["a/"]);
        match decide("malware", None, &p) {
            Err(Error::WrongList { requested, found }) => {
                assert_eq!((requested.as_str(), found.as_str()), ("malware", "phishing"));
            }
            other => panic!("expected wrong list, got {other:?}"),
        }
    }
}
