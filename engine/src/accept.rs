//! Accepting a snapshot, and the version floor that makes rollback
//! impossible even across restarts.
//!
//! A snapshot is accepted ([`accept`]) only when, in this order:
//!
//! 1. [`blocksieve_format::decode_ignoring_expiry`] verifies it against the
//!    trusted keys and the limits (FORMAT.md "Reading", steps 1–6:
//!    signature, body hash, layout) and returns a [`VerifiedSnapshot`] — the
//!    only way to get one;
//! 2. its signed header names the requested list (a correctly signed
//!    snapshot of another list is a replay, not an update);
//! 3. its version is strictly greater than the list's [`VersionFloor`], or
//!    equal with the same body hash (the very snapshot accepted before,
//!    which is harmless to re-accept).
//!
//! The result is an [`AcceptedSnapshot`], a type only this module builds:
//! the agent's atomic swap takes nothing else (rust-tuf's `Verified<T>`).
//!
//! # Expiry marks a snapshot stale; it does not refuse it
//!
//! Step 7 of FORMAT.md "Reading" (`expires_at` against the clock) is not a
//! reason to refuse a snapshot here: an expired one that passes the checks
//! above is accepted — downloaded or read from the cache — and every status
//! and verdict based on it says *stale* ([`AcceptedSnapshot::is_stale`],
//! computed against the clock at each use, so an agent whose clock was
//! wrong recovers as soon as it is right). FORMAT.md "Expired snapshots"
//! states the rule. Expiry exists against a *freeze attack*, a network
//! attacker replaying an old genuine snapshot forever to hide newer
//! entries; the version floor already refuses anything older than what the
//! agent holds, so the only snapshots this lets in are newer than the one
//! in use (they add entries it lacked) or, with none in use, any genuine one
//! (an old list still blocks old threats; no list blocks nothing). Flagged
//! stale, a freeze stays visible to the host, which is what expiry is for.
//! Refusing them instead left an agent restarted after an outage, or whose
//! clock runs ahead of the publisher's, with no list at all.
//!
//! The floor is the last accepted `(version, body SHA-256)` of a list. The
//! runtime persists it in a [`ListRecord`] next to the snapshot, after the
//! snapshot itself, so that a restarted agent refuses anything older than
//! what it once trusted, even if its cached snapshot is gone.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use blocksieve_format::{
    DecodeLimits, FullHash, SnapshotHeader, TrustedKey, VerifiedSnapshot, decode_ignoring_expiry,
};
use serde::{Deserialize, Serialize};

use crate::Error;

/// The rollback floor of one list: the version and body hash of the last
/// snapshot accepted for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionFloor {
    /// The last accepted snapshot version.
    pub version: u64,
    /// The SHA-256 of that snapshot's compressed body, from its signed
    /// header: a different snapshot with the same version is refused.
    pub body_sha256: [u8; 32],
}

impl VersionFloor {
    /// The floor a verified `header` sets once accepted.
    pub fn of(header: &SnapshotHeader) -> Self {
        Self {
            version: header.version,
            body_sha256: header.body_sha256,
        }
    }

    /// Whether `header` may be accepted over this floor: strictly newer, or
    /// the very snapshot that set the floor.
    ///
    /// # Errors
    ///
    /// [`Error::Rollback`] carrying both versions otherwise.
    pub fn admit(&self, list: &str, header: &SnapshotHeader) -> Result<(), Error> {
        self.admit_end(list, Self::of(header))
    }

    /// Whether a state standing for `end` (a snapshot, or the `to` of the
    /// last delta of a chain) may replace one over this floor: strictly
    /// newer, or the very version and body hash of the floor.
    ///
    /// # Errors
    ///
    /// [`Error::Rollback`] carrying both versions otherwise.
    pub fn admit_end(&self, list: &str, end: VersionFloor) -> Result<(), Error> {
        if end.version > self.version || end == *self {
            Ok(())
        } else {
            Err(Error::Rollback {
                list: list.to_owned(),
                trusted_version: self.version,
                new_version: end.version,
            })
        }
    }
}

/// A snapshot that passed every check of [`accept`]. Only [`accept`] (and
/// [`restore`], which calls it) creates one, so holding one proves the
/// checks ran.
#[derive(Debug)]
pub struct AcceptedSnapshot {
    snapshot: VerifiedSnapshot,
}

impl AcceptedSnapshot {
    /// The verified snapshot: header and filter.
    pub fn snapshot(&self) -> &VerifiedSnapshot {
        &self.snapshot
    }

    /// The verified header.
    pub fn header(&self) -> &SnapshotHeader {
        self.snapshot.header()
    }

    /// The floor this snapshot sets.
    pub fn floor(&self) -> VersionFloor {
        VersionFloor::of(self.snapshot.header())
    }

    /// When the snapshot expires (its signed `expires_at`).
    pub fn expires_at(&self) -> SystemTime {
        from_unix_seconds(self.header().expires_at)
    }

    /// When the snapshot was built (its signed `created_at`).
    pub fn created_at(&self) -> SystemTime {
        from_unix_seconds(self.header().created_at)
    }

    /// Whether the snapshot has expired at `now` (its signed `expires_at`
    /// is before `now`): it is still used, but every status and verdict
    /// based on it says *stale* (FORMAT.md, "Expired snapshots"). Asked
    /// again at every use, never remembered, so a clock that is put right
    /// makes the snapshot fresh again.
    pub fn is_stale(&self, now: SystemTime) -> bool {
        is_past(now, self.header().expires_at)
    }

    /// How many leading bits of a full hash to send for this list
    /// (`request_prefix_bits`, 8..=32, a multiple of 4).
    pub fn request_prefix_bits(&self) -> u8 {
        self.header().request_prefix_bits
    }
}

/// Verifies `bytes` as the next snapshot of `list`; see the module docs for
/// the checks, in order. No clock is read: an expired snapshot is accepted
/// like a fresh one, and the caller asks [`AcceptedSnapshot::is_stale`].
///
/// # Errors
///
/// [`Error::Decode`] naming the first failed format check (never
/// [`DecodeError::Expired`](blocksieve_format::DecodeError::Expired)),
/// [`Error::WrongList`], or [`Error::Rollback`]. Whatever the error, the
/// caller keeps the snapshot it has.
///
/// ```
/// use blocksieve_engine::Error;
/// use blocksieve_engine::accept::accept;
/// use blocksieve_format::DecodeLimits;
///
/// // Not a snapshot at all.
/// let err = accept("malware", b"garbage", &[], &DecodeLimits::default(), None);
/// assert!(matches!(err, Err(Error::Decode { .. })));
/// ```
pub fn accept(
    list: &str,
    bytes: &[u8],
    trusted_keys: &[TrustedKey],
    limits: &DecodeLimits,
    floor: Option<&VersionFloor>,
) -> Result<AcceptedSnapshot, Error> {
    let snapshot = decode_ignoring_expiry(bytes, trusted_keys, limits).map_err(|reason| Error::Decode {
        list: list.to_owned(),
        reason,
    })?;
    let header = snapshot.header();
    if header.list_name != list {
        return Err(Error::WrongList {
            requested: list.to_owned(),
            found: header.list_name.clone(),
        });
    }
    if let Some(floor) = floor {
        floor.admit(list, header)?;
    }
    Ok(AcceptedSnapshot { snapshot })
}

/// What the agent persists per list next to the snapshot bytes: the floor
/// and the ETag of the snapshot that set it (so the first request after a
/// restart can be answered `304 Not Modified`).
///
/// Encoded as a small JSON object with a format number; decoding is
/// bounded to [`ListRecord::MAX_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRecord {
    /// The list this record belongs to.
    pub list: String,
    /// The last accepted version and body hash: of the snapshot, or of
    /// the last delta applied to it.
    pub floor: VersionFloor,
    /// The version and body hash of the snapshot on disk when deltas have
    /// been applied to it (the saved chain leads from it to `floor`);
    /// `None` when the snapshot is the floor.
    pub base: Option<VersionFloor>,
    /// The ETag under which the snapshot was served, if any.
    pub etag: Option<String>,
}

/// The JSON shape of a [`ListRecord`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordJson {
    format: u32,
    list: String,
    version: u64,
    body_sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_body_sha256: Option<String>,
    etag: Option<String>,
}

/// The [`ListRecord`] encoding this agent writes and reads.
const RECORD_FORMAT: u32 = 1;

impl ListRecord {
    /// The largest record file accepted, in bytes: an ETag is short, and a
    /// bigger file is not one this agent wrote.
    pub const MAX_BYTES: usize = 4 * 1024;

    /// The record's bytes, as written to the cache directory.
    pub fn to_bytes(&self) -> Vec<u8> {
        let json = RecordJson {
            format: RECORD_FORMAT,
            list: self.list.clone(),
            version: self.floor.version,
            body_sha256: FullHash(self.floor.body_sha256).to_string(),
            base_version: self.base.map(|b| b.version),
            base_body_sha256: self.base.map(|b| FullHash(b.body_sha256).to_string()),
            etag: self.etag.clone(),
        };
        let mut out = serde_json::to_vec_pretty(&json).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Parses a record of `list` read from the cache directory.
    ///
    /// # Errors
    ///
    /// The reason, as text, when the bytes are too long, not a record of
    /// this format, or of another list. The caller quarantines the file.
    pub fn from_bytes(list: &str, bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > Self::MAX_BYTES {
            return Err(format!("{} bytes, more than {}", bytes.len(), Self::MAX_BYTES));
        }
        let json: RecordJson = serde_json::from_slice(bytes).map_err(|e| format!("invalid record: {e}"))?;
        if json.format != RECORD_FORMAT {
            return Err(format!("unknown record format {}", json.format));
        }
        if json.list != list {
            return Err(format!("record of list {:?}, expected {list:?}", json.list));
        }
        let hash = FullHash::from_hex(&json.body_sha256).map_err(|e| format!("body_sha256: {e}"))?;
        let base = match (json.base_version, json.base_body_sha256) {
            (None, None) => None,
            (Some(version), Some(hex)) => Some(VersionFloor {
                version,
                body_sha256: FullHash::from_hex(&hex)
                    .map_err(|e| format!("base_body_sha256: {e}"))?
                    .0,
            }),
            _ => return Err("base_version and base_body_sha256 go together".to_owned()),
        };
        Ok(Self {
            list: json.list,
            floor: VersionFloor {
                version: json.version,
                body_sha256: hash.0,
            },
            base,
            // Sent back as `If-None-Match`: a value that could not have
            // come from an `ETag` header (control characters, a line
            // break, too long) is dropped, never sent.
            etag: json.etag.filter(|e| is_plausible_etag(e)),
        })
    }
}

/// Whether `etag` can be sent as an `If-None-Match` value: at most 256
/// bytes of visible ASCII (RFC 9110 §8.8.3: `W/` and a quoted string of
/// `etagc`; the quotes and `W/` are not required here, the characters are).
fn is_plausible_etag(etag: &str) -> bool {
    !etag.is_empty() && etag.len() <= 256 && etag.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// What [`restore`] made of a list's cached files. Exhaustive on purpose:
/// a new case must be handled by every runtime before it compiles.
#[derive(Debug)]
pub enum Restored {
    /// No cached snapshot.
    Missing,
    /// The cached snapshot verified and passed the floor: answer lookups
    /// from it right away — flagged stale if it has expired
    /// ([`AcceptedSnapshot::is_stale`]), as a snapshot that expires while in
    /// use is.
    Loaded(AcceptedSnapshot),
    /// The cached snapshot failed verification, is of another list, or is
    /// older than the persisted floor: quarantine the file.
    Rejected(Error),
}

/// The state of one list at start, from its cached files.
#[derive(Debug)]
pub struct RestoredList {
    /// What happened to the cached snapshot.
    pub snapshot: Restored,
    /// The floor to enforce from now on: the record's, or the loaded
    /// snapshot's if that is newer (the record is written after the
    /// snapshot, so a crash between the two leaves it one step behind).
    pub floor: Option<VersionFloor>,
    /// The ETag to send with the first request: the record's, only if it
    /// belongs to the loaded snapshot.
    pub etag: Option<String>,
}

/// Decides what to do with `list`'s cached files at start:
/// `snapshot_bytes` (if the file exists) is checked with [`accept`] against
/// the snapshot `record` names (its `base`, else its floor), if a valid
/// record exists; the floor kept is the record's, or the snapshot's if
/// that is newer. Expiry plays no part: the last verified snapshot is used,
/// stale, rather than none. The chain saved since the snapshot is
/// [`crate::delta::restore_chain`]'s business, and the floor finally kept
/// with a restored state [`crate::update::restore`]'s (what the restored
/// bytes prove).
pub fn restore(
    list: &str,
    snapshot_bytes: Option<&[u8]>,
    record: Option<&ListRecord>,
    trusted_keys: &[TrustedKey],
    limits: &DecodeLimits,
) -> RestoredList {
    let record_floor = record.map(|r| r.floor);
    let Some(bytes) = snapshot_bytes else {
        return RestoredList {
            snapshot: Restored::Missing,
            floor: record_floor,
            etag: None,
        };
    };
    let base_floor = record.map(|r| r.base.unwrap_or(r.floor));
    match accept(list, bytes, trusted_keys, limits, base_floor.as_ref()) {
        Ok(accepted) => {
            let own = accepted.floor();
            let floor = match record_floor {
                Some(kept) if kept.admit_end(list, own).is_err() => kept,
                _ => own,
            };
            let etag = record
                .filter(|r| r.base.unwrap_or(r.floor) == own)
                .and_then(|r| r.etag.clone());
            RestoredList {
                snapshot: Restored::Loaded(accepted),
                floor: Some(floor),
                etag,
            }
        }
        Err(error) => RestoredList {
            snapshot: Restored::Rejected(error),
            floor: record_floor,
            etag: None,
        },
    }
}

/// Whether `now` is past `seconds` (Unix seconds, the unit of snapshot
/// headers), at `now`'s full precision: truncated to whole seconds, `now`
/// would read the second after an `expires_at` as not past it. A clock
/// before 1970 is wrong; it is past nothing.
pub(crate) fn is_past(now: SystemTime, seconds: u64) -> bool {
    now.duration_since(UNIX_EPOCH)
        .is_ok_and(|d| d > Duration::from_secs(seconds))
}

/// Unix seconds as a [`SystemTime`], saturating at a far future the
/// platform can represent.
fn from_unix_seconds(seconds: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::from_secs(seconds))
        .or_else(|| UNIX_EPOCH.checked_add(Duration::from_secs(1 << 32)))
        .unwrap_or(UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use blocksieve_format::{
        DecodeError, FilterKind, KeyBits, PrefixFilter, SigningKey, SnapshotParams, encode,
    };

    use super::*;

    const NOW: u64 = 1_700_000_000;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(NOW)
    }

    fn key() -> SigningKey {
        SigningKey::from_secret_bytes([7u8; 32])
    }

    fn keys() -> Vec<TrustedKey> {
        vec![key().public_key().clone()]
    }

    fn bytes(list: &str, version: u64, expressions: &[&str], expires_at: u64) -> Vec<u8> {
        let mut k: Vec<u64> = expressions
            .iter()
            .map(|e| FullHash::of(e.as_bytes()).prefix().key())
            .collect();
        k.sort_unstable();
        k.dedup();
        let filter = match PrefixFilter::build(FilterKind::BinaryFuse8, &k) {
            Ok(f) => f,
            Err(e) => panic!("{e}"),
        };
        let params = SnapshotParams {
            list_name: list.into(),
            version,
            created_at: NOW - 10,
            expires_at,
            key_bits: KeyBits::Bits32,
            request_prefix_bits: 16,
            full_hash_count: k.len() as u64,
            measured_fpr: 0.0,
            zstd_level: 1,
        };
        match encode(&params, &filter, &key()) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        }
    }

    fn ok(list: &str, b: &[u8], floor: Option<&VersionFloor>) -> AcceptedSnapshot {
        match accept(list, b, &keys(), &DecodeLimits::default(), floor) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        }
    }

    fn err(list: &str, b: &[u8], floor: Option<&VersionFloor>) -> Error {
        match accept(list, b, &keys(), &DecodeLimits::default(), floor) {
            Ok(a) => panic!("accepted {:?}", a.header()),
            Err(e) => e,
        }
    }

    #[test]
    fn first_snapshot_is_accepted_and_sets_the_floor() {
        let a = ok("malware", &bytes("malware", 3, &["a/"], NOW + 60), None);
        assert_eq!(a.floor().version, 3);
        assert_eq!(a.request_prefix_bits(), 16);
        assert!(!a.is_stale(now()));
        assert!(a.is_stale(now() + Duration::from_secs(61)));
    }

    #[test]
    fn newer_passes_same_passes_older_and_same_version_other_body_are_rollbacks() {
        let v3 = bytes("malware", 3, &["a/"], NOW + 60);
        let floor = ok("malware", &v3, None).floor();
        ok("malware", &bytes("malware", 4, &["a/"], NOW + 60), Some(&floor));
        ok("malware", &v3, Some(&floor));
        assert_eq!(
            err("malware", &bytes("malware", 2, &["a/"], NOW + 60), Some(&floor)),
            Error::Rollback {
                list: "malware".into(),
                trusted_version: 3,
                new_version: 2
            }
        );
        assert!(matches!(
            err("malware", &bytes("malware", 3, &["b/"], NOW + 60), Some(&floor)),
            Error::Rollback {
                trusted_version: 3,
                new_version: 3,
                ..
            }
        ));
    }

    #[test]
    fn other_list_and_forged_are_refused() {
        assert!(matches!(
            err("malware", &bytes("phishing", 9, &[], NOW + 60), None),
            Error::WrongList { .. }
        ));
        let mut forged = bytes("malware", 9, &[], NOW + 60);
        forged[28] ^= 1;
        assert!(matches!(
            err("malware", &forged, None),
            Error::Decode {
                reason: DecodeError::BadSignature,
                ..
            }
        ));
        // An expired forgery is still a forgery: expiry is no shortcut past
        // the signature.
        let mut forged = bytes("malware", 9, &[], NOW - 1);
        forged[28] ^= 1;
        assert!(matches!(
            err("malware", &forged, None),
            Error::Decode {
                reason: DecodeError::BadSignature,
                ..
            }
        ));
    }

    /// A clock ahead of the publisher's makes every fresh
    /// download look expired. With nothing held, or over an older floor,
    /// the expired snapshot is accepted and reads stale until the clock is
    /// right again.
    #[test]
    fn expired_download_is_accepted_stale_with_no_floor_or_over_an_older_one() {
        let expired = bytes("malware", 9, &["a/"], NOW - 1);
        let a = ok("malware", &expired, None);
        assert!(a.is_stale(now()));
        // The clock put back before `expires_at`: fresh again, no re-accept.
        assert!(!a.is_stale(now() - Duration::from_secs(2)));

        let floor = ok("malware", &bytes("malware", 8, &["a/"], NOW + 60), None).floor();
        let a = ok("malware", &expired, Some(&floor));
        assert_eq!(a.floor().version, 9);
        assert!(a.is_stale(now()));
    }

    /// Expiry lets nothing past the version floor: an expired snapshot
    /// older than the one held is the rollback (freeze) it always was.
    #[test]
    fn expired_download_older_than_the_floor_is_still_a_rollback() {
        let floor = ok("malware", &bytes("malware", 8, &["a/"], NOW + 60), None).floor();
        assert_eq!(
            err("malware", &bytes("malware", 7, &["a/"], NOW - 1), Some(&floor)),
            Error::Rollback {
                list: "malware".into(),
                trusted_version: 8,
                new_version: 7
            }
        );
        assert!(matches!(
            err("malware", &bytes("malware", 8, &["b/"], NOW - 1), Some(&floor)),
            Error::Rollback { .. }
        ));
    }

    #[test]
    fn record_round_trips_and_rejects_garbage() {
        let r = ListRecord {
            list: "malware".into(),
            floor: VersionFloor {
                version: 42,
                body_sha256: [9; 32],
            },
            base: None,
            etag: Some("\"abc\"".into()),
        };
        assert_eq!(ListRecord::from_bytes("malware", &r.to_bytes()), Ok(r.clone()));
        let with_base = ListRecord {
            base: Some(VersionFloor {
                version: 40,
                body_sha256: [3; 32],
            }),
            ..r.clone()
        };
        assert_eq!(
            ListRecord::from_bytes("malware", &with_base.to_bytes()),
            Ok(with_base.clone())
        );
        assert!(ListRecord::from_bytes("phishing", &r.to_bytes()).is_err());
        assert!(ListRecord::from_bytes("malware", b"{").is_err());
        assert!(ListRecord::from_bytes("malware", &[b' '; 5000]).is_err());
        let other_format = String::from_utf8_lossy(&r.to_bytes()).replace("\"format\": 1", "\"format\": 2");
        assert!(ListRecord::from_bytes("malware", other_format.as_bytes()).is_err());
    }

    #[test]
    fn a_record_etag_that_no_etag_header_could_hold_is_dropped() {
        let record = |etag: &str| {
            let json = serde_json::json!({
                "format": 1, "list": "malware", "version": 2,
                "body_sha256": FullHash([2; 32]).to_string(), "etag": etag,
            });
            ListRecord::from_bytes("malware", json.to_string().as_bytes()).expect("a record")
        };
        assert_eq!(record("\"2-abc\"").etag.as_deref(), Some("\"2-abc\""));
        assert_eq!(record("W/\"2\"").etag.as_deref(), Some("W/\"2\""));
        for bad in [
            "\"x\"\r\nX-Injected: 1",
            "\"a b\"",
            "",
            "\"\u{0}\"",
            &"x".repeat(257),
            "\"é\"",
        ] {
            assert_eq!(record(bad).etag, None, "{bad:?}");
        }
    }

    #[test]
    fn restore_loads_valid_and_expired_rejects_below_floor() {
        let v5 = bytes("malware", 5, &["a/"], NOW + 60);
        let loaded = ok("malware", &v5, None);
        let record = ListRecord {
            list: "malware".into(),
            floor: loaded.floor(),
            base: None,
            etag: Some("\"e5\"".into()),
        };
        let r = restore(
            "malware",
            Some(&v5),
            Some(&record),
            &keys(),
            &DecodeLimits::default(),
        );
        assert!(matches!(r.snapshot, Restored::Loaded(_)));
        assert_eq!(r.etag.as_deref(), Some("\"e5\""));

        // Crash between writing the snapshot and the record: the newer
        // snapshot raises the floor, the stale ETag is not reused.
        let v6 = bytes("malware", 6, &["a/"], NOW + 60);
        let r = restore(
            "malware",
            Some(&v6),
            Some(&record),
            &keys(),
            &DecodeLimits::default(),
        );
        assert_eq!(r.floor.map(|f| f.version), Some(6));
        assert_eq!(r.etag, None);

        let old = bytes("malware", 4, &["a/"], NOW + 60);
        let r = restore(
            "malware",
            Some(&old),
            Some(&record),
            &keys(),
            &DecodeLimits::default(),
        );
        assert!(matches!(r.snapshot, Restored::Rejected(Error::Rollback { .. })));
        assert_eq!(r.floor.map(|f| f.version), Some(5));

        let expired = bytes("malware", 7, &["a/"], NOW - 1);
        let r = restore(
            "malware",
            Some(&expired),
            Some(&record),
            &keys(),
            &DecodeLimits::default(),
        );
        assert!(matches!(&r.snapshot, Restored::Loaded(a) if a.is_stale(now())));
        assert_eq!(r.floor.map(|f| f.version), Some(7));

        let r = restore("malware", None, Some(&record), &keys(), &DecodeLimits::default());
        assert!(matches!(r.snapshot, Restored::Missing));
        assert_eq!(r.floor, Some(record.floor));

        let r = restore("malware", Some(b"junk"), None, &keys(), &DecodeLimits::default());
        assert!(matches!(r.snapshot, Restored::Rejected(Error::Decode { .. })));
    }

    /// A restart after the cached snapshot's `expires_at`
    /// loads it — stale, with its floor and ETag — instead of leaving the
    /// list without a snapshot until the publisher answers.
    #[test]
    fn restart_after_expiry_loads_the_cached_snapshot_stale() {
        let v5 = bytes("malware", 5, &["a/"], NOW - 1);
        let record = ListRecord {
            list: "malware".into(),
            floor: VersionFloor::of(ok("malware", &v5, None).header()),
            base: None,
            etag: Some("\"e5\"".into()),
        };
        let r = restore(
            "malware",
            Some(&v5),
            Some(&record),
            &keys(),
            &DecodeLimits::default(),
        );
        let Restored::Loaded(loaded) = &r.snapshot else {
            panic!("expected the expired snapshot loaded, got {:?}", r.snapshot);
        };
        assert_eq!(loaded.header().version, 5);
        assert!(loaded.is_stale(now()));
        assert_eq!(r.floor, Some(record.floor));
        assert_eq!(r.etag.as_deref(), Some("\"e5\""));
    }
}
