//! JSON types of the publisher's HTTP API (version 1), shared with the agent.
//!
//! | route | response |
//! |---|---|
//! | `GET /v1/lists` | [`ListsResponse`] |
//! | `GET /v1/lists/{name}/snapshot` | latest snapshot bytes (`application/octet-stream`), strong `ETag`, `X-Blocksieve-Next-Check`, `X-Blocksieve-Next-Check-At` |
//! | `GET /v1/lists/{name}/snapshots/{version}` | that version's bytes, immutable |
//! | `GET /v1/hashes/{prefix}` | [`FullHashResponse`], or binary ([`FullHashAnswer`]) |
//! | `GET /v1/lists/{name}/hashes/{version}/{prefix}` | the bucket of one list's snapshot `{version}`: [`FullHashResponse`], or binary; immutable |
//! | `GET /v1/lists/{name}/updates/{from}` | the deltas from snapshot version `{from}` to the latest (`application/vnd.blocksieve.deltas`, FORMAT.md "Delta chains"); `304` when `{from}` is the latest; `410 no_delta` when the agent must take the snapshot |
//! | `GET /v1/lists/{name}/history` | [`HistoryResponse`]: the list's last builds, oldest first (for operators; agents never ask) |
//! | `POST /v1/hashes:search` | [`FullHashSearchRequest`] → [`FullHashSearchResponse`], or binary |
//! | any error | 4xx/5xx with [`ErrorResponse`] |
//!
//! A hash prefix in a request is 2 to 8 lowercase hex digits (8 to 32 bits);
//! the answer holds every listed full hash that starts with it. A request
//! whose `Accept` names [`FULL_HASHES_CONTENT_TYPE`] gets the answer in the
//! binary encoding of FORMAT.md "Full-hash answers" ([`FullHashAnswer`]),
//! about a third of the JSON bytes; any other gets JSON.
//!
//! This module is the one place the protocol is spelled: the [`routes`],
//! the [`NEXT_CHECK_HEADER`] and [`NEXT_CHECK_AT_HEADER`], the [`HASHES_HEADER`], the [`MAX_PREFIXES_PER_REQUEST`] limit and the
//! request-prefix rule ([`RequestPrefix::new`],
//! [`is_valid_request_prefix_bits`]).

use std::fmt;
use std::str::FromStr;

mod binary;
mod json;

pub use binary::{
    AnswerError, FULL_HASHES_ACCEPT, FULL_HASHES_CONTENT_TYPE, FULL_HASHES_MAGIC, FULL_HASHES_VERSION,
    FullHashAnswer, IndexedAnswer, IndexedFullHash, IndexedPrefixAnswer, ListedFullHash, MAX_ANSWER_BYTES,
    MAX_ANSWER_LISTS, MAX_ANSWER_MATCHES, PrefixAnswer, accepts_full_hashes_binary,
    is_full_hashes_content_type,
};

use serde::{Deserialize, Serialize};

use crate::hash::{FullHash, HashPrefix, HexError};

/// The API's routes, as axum path templates (`{name}` is a path
/// parameter), and the functions that fill them in. Publisher and agent both
/// use these, so a route is spelled once.
pub mod routes {
    use super::RequestPrefix;

    /// `GET`: every threat list the publisher serves ([`super::ListsResponse`]).
    pub const LISTS: &str = "/v1/lists";
    /// `GET`: the latest snapshot of list `{name}`.
    pub const LATEST_SNAPSHOT: &str = "/v1/lists/{name}/snapshot";
    /// `GET`: snapshot `{version}` of list `{name}`, immutable.
    pub const VERSIONED_SNAPSHOT: &str = "/v1/lists/{name}/snapshots/{version}";
    /// `GET`: the full hashes in the bucket of one request prefix
    /// ([`super::FullHashResponse`]).
    pub const FULL_HASHES: &str = "/v1/hashes/{prefix}";
    /// `GET`: the full hashes of list `{name}`'s snapshot `{version}` that
    /// start with `{prefix}` ([`super::FullHashResponse`]). The URL names
    /// the exact data, so the answer is immutable; a server that serves
    /// another version answers an error instead (`503 behind` for a newer
    /// one, `404 version_gone` for an older one).
    pub const LIST_HASHES: &str = "/v1/lists/{name}/hashes/{version}/{prefix}";
    /// `GET`: the chain of deltas from snapshot version `{from}` of list
    /// `{name}` to the latest version (FORMAT.md "Delta chains"), the body
    /// [`super::DELTAS_CONTENT_TYPE`]:
    ///
    /// - `200` with the chain (empty when `{from}` is the latest), its
    ///   `ETag` the latest snapshot's ([`super::snapshot_etag`]);
    /// - `304` when `If-None-Match` names the latest snapshot's `ETag`;
    /// - `410 no_delta` when the publisher has no chain from `{from}` (too
    ///   old, unknown, or longer than the snapshot): take the snapshot;
    /// - `503 behind` (with `Retry-After`) when `{from}` is newer than
    ///   what this server serves.
    ///
    /// Every `200` and `304` carries [`super::FRESHNESS_HEADER`],
    /// [`super::NEXT_CHECK_HEADER`] and [`super::NEXT_CHECK_AT_HEADER`].
    pub const UPDATES: &str = "/v1/lists/{name}/updates/{from}";
    /// `POST`: the full hashes of several request prefixes
    /// ([`super::FullHashSearchRequest`] → [`super::FullHashSearchResponse`]).
    pub const SEARCH: &str = "/v1/hashes:search";
    /// `GET`: list `{name}`'s build history ([`super::HistoryResponse`]),
    /// for operators: agents never ask.
    pub const LIST_HISTORY: &str = "/v1/lists/{name}/history";

    /// The path of list `name`'s latest snapshot.
    pub fn latest_snapshot(name: &str) -> String {
        format!("/v1/lists/{name}/snapshot")
    }

    /// The path of version `version` of list `name`'s snapshot.
    pub fn versioned_snapshot(name: &str, version: u64) -> String {
        format!("/v1/lists/{name}/snapshots/{version}")
    }

    /// The path of the deltas of list `name` from snapshot version `from`.
    pub fn updates(name: &str, from: u64) -> String {
        format!("/v1/lists/{name}/updates/{from}")
    }

    /// The path of the full-hash bucket of `prefix`.
    pub fn full_hashes(prefix: RequestPrefix) -> String {
        format!("/v1/hashes/{prefix}")
    }

    /// The path prefix of the full-hash buckets of list `name`'s snapshot
    /// `snapshot`, ending in `/`. The publisher advertises its buckets
    /// under the snapshot's [`super::snapshot_id`] (the value of
    /// [`super::HASHES_HEADER`]: `/v1/lists/phishing/hashes/1800000000-0123456789abcdef/`),
    /// which names one snapshot's content; a bare version number is
    /// answered too. A bucket's path is this and its request prefix
    /// ([`list_hashes`]).
    pub fn list_hashes_base(name: &str, snapshot: impl std::fmt::Display) -> String {
        format!("/v1/lists/{name}/hashes/{snapshot}/")
    }

    /// The immutable path of the full-hash bucket of `prefix` in list
    /// `name`'s snapshot `snapshot` (its [`super::snapshot_id`], or a
    /// version number).
    pub fn list_hashes(name: &str, snapshot: impl std::fmt::Display, prefix: RequestPrefix) -> String {
        format!("/v1/lists/{name}/hashes/{snapshot}/{prefix}")
    }

    /// The path of list `name`'s build history.
    pub fn list_history(name: &str) -> String {
        format!("/v1/lists/{name}/history")
    }
}

/// The publisher's next-check hint on snapshot responses: whole seconds
/// until an agent should ask again (lowercase, as HTTP/2 sends header names).
///
/// Relative to when the response was generated: a copy that a shared cache
/// (a CDN, a reverse proxy) serves later still says the whole delay, so an
/// agent takes [`NEXT_CHECK_AT_HEADER`] when it is there, and otherwise
/// subtracts the response's age (RFC 9111 §4.2.3: its `Age`, or how far
/// its `Date` is behind the agent's clock, whichever is more). Kept for
/// agents that predate [`NEXT_CHECK_AT_HEADER`].
pub const NEXT_CHECK_HEADER: &str = "x-blocksieve-next-check";

/// The same instant as [`NEXT_CHECK_HEADER`], absolute: the Unix time, in
/// whole seconds, at which an agent should ask again. A cached copy of the
/// response says the same instant as the original, so an agent behind a
/// shared cache asks again when the publisher meant, not up to a whole
/// hint later. Sent beside [`NEXT_CHECK_HEADER`] on the responses that
/// carry it; agents prefer it (lowercase, as HTTP/2 sends header names).
pub const NEXT_CHECK_AT_HEADER: &str = "x-blocksieve-next-check-at";

/// The header of snapshot responses (`200` and `304`, latest and
/// versioned) that advertises the immutable full-hash buckets of the
/// snapshot's version: its value is [`routes::list_hashes_base`] of the
/// list and version, e.g. `/v1/lists/phishing/hashes/1800000000/`. An
/// agent that holds that version of every subscribed list may fetch its
/// full hashes there, where CDNs can cache them, instead of
/// `POST /v1/hashes:search` (lowercase, as HTTP/2 sends header names).
pub const HASHES_HEADER: &str = "x-blocksieve-hashes";

/// The header of snapshot and update responses (`200` and `304`) that
/// carries the list's latest signed [`crate::FreshnessRecord`], as
/// [`crate::FreshnessRecord::to_header_value`] (lowercase, as HTTP/2 sends
/// header names). An agent holding exactly the version it names treats its
/// list as fresh until the record's `expires_at`.
pub const FRESHNESS_HEADER: &str = "x-blocksieve-freshness";

/// The media type of a delta chain (FORMAT.md "Delta chains").
pub const DELTAS_CONTENT_TYPE: &str = "application/vnd.blocksieve.deltas";

/// The strong entity tag of snapshot `version` whose body hashes to
/// `body_sha256`, quoted: `"<version>-<first 8 bytes of the hash, hex>"`
/// ([`snapshot_id`] in quotes). The latest-snapshot and update routes both
/// use it, so an agent that followed deltas to a version asks with the tag
/// of the snapshot that version stands for.
pub fn snapshot_etag(version: u64, body_sha256: &[u8; 32]) -> String {
    format!("\"{}\"", snapshot_id(version, body_sha256))
}

/// The name of one snapshot's content on the full-hash routes:
/// `<version>-<first 8 bytes of its body's SHA-256, hex>`, e.g.
/// `1800000000-0123456789abcdef`. A version number alone does not name
/// content: two publishers signing with one key (a publisher and its
/// mirror) whose builds start in the same second publish the same version
/// with what each fetched. A full-hash answer for another snapshot of the
/// same version would answer "not listed" for a URL the agent's snapshot
/// lists; so agents name the snapshot they hold by this id, and a server
/// holding another refuses (`404 version_gone` on the bucket routes,
/// `503 other_snapshot` on the search).
pub fn snapshot_id(version: u64, body_sha256: &[u8; 32]) -> String {
    format!("{version}-{}", hex::encode(&body_sha256[..8]))
}

/// Reads a [`snapshot_id`], or a version number alone: the version and,
/// when given, the first 8 bytes of the body's SHA-256. `None` unless the
/// version is a decimal number without sign or leading zeros (`0` aside)
/// and the hash, when given, exactly 16 lowercase hex digits.
pub fn parse_snapshot_id(text: &str) -> Option<(u64, Option<[u8; 8]>)> {
    let (version, hash) = match text.split_once('-') {
        Some((version, hash)) => (version, Some(hash)),
        None => (text, None),
    };
    let canonical = !version.is_empty()
        && version.bytes().all(|b| b.is_ascii_digit())
        && (version == "0" || !version.starts_with('0'));
    let version = canonical.then(|| version.parse().ok()).flatten()?;
    let hash = match hash {
        None => None,
        Some(hex) => {
            if hex.len() != 16 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return None;
            }
            let mut out = [0u8; 8];
            hex::decode_to_slice(hex, &mut out).ok()?;
            Some(out)
        }
    };
    Some((version, hash))
}

/// The most hash prefixes in one `POST /v1/hashes:search`, noise prefixes
/// included. A longer request is refused with `400 too_many_prefixes`.
pub const MAX_PREFIXES_PER_REQUEST: usize = 1_000;

/// The most threat lists a session agent (the engine's `Session`: the WASM
/// and C agents) follows. A URL has at most 30 expressions (Safe Browsing
/// v4 "Suffix/Prefix Expressions"), each needing at most one request prefix
/// per list, so 32 lists keep every check's prefixes within one request
/// ([`MAX_PREFIXES_PER_REQUEST`]). The Rust and Python agents follow up to
/// [`MAX_ANSWER_LISTS`].
pub const MAX_SESSION_LISTS: usize = 32;
const _: () = assert!(
    MAX_SESSION_LISTS * crate::canon::MAX_EXPRESSIONS <= MAX_PREFIXES_PER_REQUEST
        && MAX_SESSION_LISTS <= MAX_ANSWER_LISTS
);

/// The shortest request prefix, in bits (FORMAT.md `request_prefix_bits`).
pub const MIN_REQUEST_PREFIX_BITS: u8 = 8;
/// The longest request prefix, in bits.
pub const MAX_REQUEST_PREFIX_BITS: u8 = 32;

/// Whether `bits` is a valid request prefix length: 8 to 32, a multiple of
/// 4 (whole hex digits). Snapshots, the publisher's configuration and the
/// agent all apply this one rule.
pub fn is_valid_request_prefix_bits(bits: u8) -> bool {
    (MIN_REQUEST_PREFIX_BITS..=MAX_REQUEST_PREFIX_BITS).contains(&bits) && bits.is_multiple_of(4)
}

/// `GET /v1/lists`: every threat list the publisher serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListsResponse {
    /// One entry per configured list, in configuration order.
    pub lists: Vec<ListStatus>,
}

/// The state of one threat list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListStatus {
    /// The list name, e.g. `phishing`.
    pub name: String,
    /// The served snapshot, or `None` before the first successful build.
    pub snapshot: Option<SnapshotStatus>,
    /// The outcome of the most recent build attempt, if any since start.
    pub last_build: Option<BuildStatus>,
    /// How following the object store goes, for a replica (or a builder
    /// on a store); absent for a publisher on a data directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreStatus>,
}

/// A replica's view of the object store it follows for one list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreStatus {
    /// Whether the last check reached the store. `false` while it cannot:
    /// the served snapshot is the last one loaded, and may be behind.
    pub reachable: bool,
    /// When a check last reached the store, Unix seconds (`None`: never
    /// since start).
    pub last_checked_at: Option<u64>,
    /// The latest generation served from the store, if any: loaded from
    /// it (a replica; a builder at start) or published to it (a builder).
    pub generation: Option<u64>,
    /// Why the last check did not reach the store (absent while it
    /// does, and from publishers before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Why the newest generation the store names is not served, though
    /// the store was reached: the error of its load, e.g. a signature that
    /// does not verify under this server's public key, or an object that
    /// does not match its manifest (absent once it loads, and from
    /// publishers before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The snapshot currently served for a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotStatus {
    /// Snapshot version, strictly increasing.
    pub version: u64,
    /// Build time, Unix seconds.
    pub created_at: u64,
    /// Expiry time, Unix seconds.
    pub expires_at: u64,
    /// Distinct full hashes on the list.
    pub entries: u64,
    /// Distinct filter keys (hash prefixes).
    pub unique_prefixes: u64,
    /// Size of the snapshot file in bytes.
    pub snapshot_bytes: u64,
    /// Filter kind, e.g. `binary_fuse8`.
    pub filter_kind: String,
    /// Compressed bits per filter key.
    pub bits_per_key: f64,
    /// Hash prefix length in bits that agents send to the full-hash endpoint.
    pub request_prefix_bits: u8,
    /// The strong ETag of the snapshot (quoted, as sent in the header).
    pub etag: String,
    /// The id of the key that signed the snapshot, 16 hex digits (the
    /// first 8 bytes of the SHA-256 of the public key, as `keygen` and the
    /// publisher's log name keys): after a key rotation, every list shows
    /// the new key's id once it is published under it. Empty from a
    /// publisher that predates it.
    #[serde(default)]
    pub key_id: String,
}

/// The outcome of one build attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildStatus {
    /// When the build finished, Unix seconds.
    pub finished_at: u64,
    /// Whether a new snapshot was published.
    pub ok: bool,
    /// Why the build failed or was not published, if it was not.
    pub error: Option<String>,
    /// The publishing gate that refused the build, if one did
    /// (`min_entries`, `max_shrink`, `max_fpr_ratio`).
    #[serde(default)]
    pub refused_by_gate: Option<String>,
    /// Whether the gates were overridden (`--force`) for this build.
    #[serde(default)]
    pub forced: bool,
    /// Lines read from all sources.
    pub lines: u64,
    /// Lines rejected (not a URL or domain, or unsafe to publish).
    pub rejected: u64,
    /// Rejected lines by reason.
    #[serde(default)]
    pub rejected_by_reason: std::collections::BTreeMap<String, u64>,
    /// A few rejected lines with their reason.
    #[serde(default)]
    pub rejected_samples: Vec<(String, String)>,
    /// Entry lines read differently from their raw bytes, by what was
    /// removed or read twice: Unicode white space, surrounding quotes, a
    /// tab-separated column, a trailing comment, a space inside a URL.
    #[serde(default)]
    pub cleaned_by_kind: std::collections::BTreeMap<String, u64>,
    /// Domain entries (host-wide) on a name of more than five labels
    /// (`a.b.c.d.evil.example`): an agent checks a URL's host and the
    /// suffixes of its last five labels (Safe Browsing, "Suffix/Prefix
    /// Expressions"), so each blocks its own host, not its subdomains.
    /// Listed all the same.
    #[serde(default)]
    pub host_wide_too_deep: u64,
    /// Adblock URL rules that also stand for the URLs under their path
    /// (`||evil.example/a/b/c/d^`) where that directory is more than three
    /// levels deep: an agent checks a URL's exact path and its first four
    /// directory prefixes, `/` included (Safe Browsing, "Suffix/Prefix
    /// Expressions"), so each blocks its own URL and directory, not the
    /// pages under it. Listed all the same.
    #[serde(default)]
    pub directory_too_deep: u64,
    /// What the list's allowlists read and removed.
    #[serde(default)]
    pub allow: AllowStatus,
    /// Per source: where its content came from.
    #[serde(default)]
    pub sources: Vec<SourceStatus>,
    /// Sizing of the build, when it got as far as a filter.
    #[serde(default)]
    pub sizing: Option<Sizing>,
    /// Build wall time in milliseconds.
    pub duration_ms: u64,
}

/// `GET /v1/lists/{name}/history`: the list's last builds, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryResponse {
    /// The list name.
    pub list: String,
    /// The most builds kept per list; older ones are dropped.
    pub limit: usize,
    /// The builds, oldest first.
    pub builds: Vec<BuildRecord>,
}

/// One build attempt of a list, as its history keeps it (one JSON line of
/// the publisher's history file, too). Every field but `finished_at` and
/// `outcome` has a default, so a line written by an older publisher still
/// reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// When the build finished, Unix seconds.
    pub finished_at: u64,
    /// `published`, `unchanged` (the list is as served: its freshness
    /// renewed), `refused` (a publishing gate), `failed` or `superseded`
    /// (another builder published first).
    pub outcome: String,
    /// The snapshot version served after the build (`None`: none).
    #[serde(default)]
    pub version: Option<u64>,
    /// Distinct full hashes the build found.
    #[serde(default)]
    pub entries: u64,
    /// Distinct filter keys (hash prefixes).
    #[serde(default)]
    pub unique_prefixes: u64,
    /// False-positive rate per probe measured by the canary.
    #[serde(default)]
    pub measured_fpr: f64,
    /// The filter's false-positive rate per probe in theory.
    #[serde(default)]
    pub theoretical_fpr: f64,
    /// Wall time of the whole build attempt, milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
    /// Size of the snapshot built, in bytes.
    #[serde(default)]
    pub snapshot_bytes: u64,
    /// Filter kind (`binary_fuse8`, …; empty when the build had no filter).
    #[serde(default)]
    pub filter_kind: String,
    /// Snapshot bits per filter key.
    #[serde(default)]
    pub bits_per_key: f64,
    /// The unique prefixes at which the filter kind would exceed the list's
    /// target full-hash requests per 1,000 checks (`None`: never, or no
    /// filter).
    #[serde(default)]
    pub capacity: Option<u64>,
    /// The gate that refused the build and why, for `refused`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Why the build failed, for `failed` and `superseded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The sources (block and allow) read from their last good content
    /// instead of a fresh fetch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources_on_last_good: Vec<String>,
    /// The sources (block and allow) that failed with no usable last good
    /// content: a block source among them failed the build, an allow
    /// source was left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources_failed: Vec<String>,
}

/// A build's allowlists: the list's `allow` sources and the allow arrays of
/// its JSON sources. An allowed full hash is removed from the list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowStatus {
    /// Allow lines read (JSON: array items).
    #[serde(default)]
    pub lines: u64,
    /// Allow entries accepted.
    #[serde(default)]
    pub accepted: u64,
    /// Allow lines rejected.
    #[serde(default)]
    pub rejected: u64,
    /// Rejected allow lines by reason.
    #[serde(default)]
    pub rejected_by_reason: std::collections::BTreeMap<String, u64>,
    /// Allow lines read differently from their raw bytes, by what was
    /// removed (as [`BuildStatus::cleaned_by_kind`]).
    #[serde(default)]
    pub cleaned_by_kind: std::collections::BTreeMap<String, u64>,
    /// Distinct allowed full hashes.
    #[serde(default)]
    pub entries: u64,
    /// Distinct full hashes the sources listed that were removed because
    /// they are allowed.
    #[serde(default)]
    pub removed: u64,
    /// Per allow source (a JSON source's allow array is named
    /// `<source> (<json_allow_key>)`): where its content came from.
    #[serde(default)]
    pub sources: Vec<SourceStatus>,
}

/// Where one source's content came from in a build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceStatus {
    /// The file path or URL.
    pub source: String,
    /// `fresh`, `not_modified` (HTTP 304, cached copy used), `last_good`
    /// (the source failed; its last good content was used) or `failed`
    /// (it failed with no usable last good content: an allow source is
    /// left out and the build goes on without it, as a missing allowlist
    /// only blocks more; a block source fails the build, which still reads
    /// and reports the list's other sources).
    pub state: String,
    /// Why the source failed, for `last_good` and `failed`.
    pub error: Option<String>,
    /// When the content used was fetched, Unix seconds.
    pub content_fetched_at: Option<u64>,
    /// Lines read.
    pub lines: u64,
    /// Entries accepted.
    pub accepted: u64,
    /// Lines rejected.
    pub rejected: u64,
}

/// How big a list's filter is and what it costs agents and the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sizing {
    /// Distinct full hashes.
    pub entries: u64,
    /// Distinct filter keys.
    pub unique_keys: u64,
    /// Filter kind.
    pub filter_kind: String,
    /// Filter key width in bits.
    pub key_bits: u8,
    /// Snapshot bits per filter key (whole file, compressed).
    pub bits_per_key: f64,
    /// Snapshot size in bytes.
    pub snapshot_bytes: u64,
    /// False-positive rate per probe, in theory.
    pub theoretical_fpr: f64,
    /// False-positive rate per probe, measured on 100,000 absent keys.
    pub measured_fpr: f64,
    /// Chance that an unlisted expression shares a listed 32-bit prefix:
    /// unique keys / 2^32.
    pub prefix_collision_rate: f64,
    /// Expected full-hash requests per 1,000 checks of unlisted URLs.
    pub expected_full_hash_requests_per_1000: f64,
    /// Request prefix length in bits advertised to agents.
    pub request_prefix_bits: u8,
    /// Expected listed full hashes in the bucket of one request prefix
    /// (the anonymity set of a request).
    pub anonymity_set: f64,
    /// Expected bytes of a full-hash response for one prefix.
    pub expected_response_bytes: f64,
}

/// `GET /v1/hashes/{prefix}`: every full hash in the prefix's bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FullHashResponse {
    /// The requested prefix, lowercase hex.
    pub prefix: String,
    /// Every listed full hash that starts with the prefix, on any list.
    pub matches: Vec<FullHashMatch>,
    /// How long, in seconds, the agent may cache this answer, hits and misses
    /// alike.
    pub cache_duration_s: u64,
}

/// One listed full hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FullHashMatch {
    /// The full hash, 64 lowercase hex digits.
    pub full_hash: String,
    /// The threat list it is on.
    pub list: String,
}

/// `POST /v1/hashes:search` request body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FullHashSearchRequest {
    /// Hash prefixes, 2 to 8 lowercase hex digits each, at most 1,000.
    pub prefixes: Vec<String>,
    /// The snapshot version the client holds of each threat list, by list
    /// name. A server that serves an older version of one of them, or none,
    /// answers `503 behind` instead of answering from older data (a replica
    /// that has not loaded the newest build yet would otherwise report a
    /// newly listed URL's full hash as absent). When given, the answer
    /// holds these lists' matches only, and only their buckets count
    /// against the server's bucket limit (`400 prefix_too_short`). Empty
    /// (and left out) for clients that send no versions, answered for
    /// every list; by default, empty.
    #[serde(
        default,
        skip_serializing_if = "std::collections::BTreeMap::is_empty",
        deserialize_with = "versions_by_list"
    )]
    pub min_versions: std::collections::BTreeMap<String, u64>,
    /// The snapshot the client holds of each threat list, by list name, as
    /// its [`snapshot_id`] (`<version>-<16 hex digits>`). A server serving
    /// that list at that very version but with another body (another
    /// publisher's build of the same second) answers `503 other_snapshot`
    /// instead of answering from content the client's snapshot is not; at
    /// a newer version it answers as for `min_versions`. Empty (and left
    /// out) for clients that send none; by default, empty.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub snapshots: std::collections::BTreeMap<String, String>,
}

/// [`FullHashSearchRequest::min_versions`], each version a whole number
/// from 0 to 2^64 − 1. JSON parsers read a larger number, or a negative or
/// fractional one, as a floating-point value: refused naming the list and
/// the range, not as a "floating point" where the client sent an integer.
fn versions_by_list<'de, D>(deserializer: D) -> Result<std::collections::BTreeMap<String, u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Versions;
    impl<'de> serde::de::Visitor<'de> for Versions {
        type Value = std::collections::BTreeMap<String, u64>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of snapshot versions by list name")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut versions = std::collections::BTreeMap::new();
            while let Some(list) = map.next_key::<String>()? {
                let Version(version) = map.next_value().map_err(|e: A::Error| {
                    serde::de::Error::custom(format_args!("min_versions[{list:?}]: {e}"))
                })?;
                versions.insert(list, version);
            }
            Ok(versions)
        }
    }
    deserializer.deserialize_map(Versions)
}

/// One version of [`versions_by_list`].
struct Version(u64);

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Version;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&Expected, f)
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Version, E> {
                Ok(Version(v))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Version, E> {
                u64::try_from(v)
                    .map(Version)
                    .map_err(|_| E::custom(format_args!("{v} is not {}", Expected)))
            }

            // Past u64, negative past i64, or with a fraction or an
            // exponent: the value read is not the one written, so not shown.
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Version, E> {
                Err(E::custom(format_args!("not {Expected}")))
            }
        }
        deserializer.deserialize_u64(V)
    }
}

/// What a version must be, for the errors of [`Version`].
struct Expected;

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a snapshot version, a whole number from 0 to {}", u64::MAX)
    }
}

/// `POST /v1/hashes:search` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FullHashSearchResponse {
    /// One result per requested prefix, in request order.
    pub results: Vec<PrefixResult>,
    /// How long, in seconds, the agent may cache every result, hits and
    /// misses alike.
    pub cache_duration_s: u64,
}

/// The bucket of one requested prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixResult {
    /// The requested prefix.
    pub prefix: String,
    /// Every listed full hash that starts with it.
    pub matches: Vec<FullHashMatch>,
}

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// Details of an API error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// A stable machine-readable code, e.g. `bad_prefix`, `unknown_list`.
    pub code: String,
    /// A human-readable explanation that includes the offending value.
    pub message: String,
}

/// A hash prefix of 8 to 32 bits (2 to 8 hex digits), as sent to the
/// full-hash endpoints: shorter prefixes name bigger buckets, so a request
/// reveals less about the URL (k-anonymity).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestPrefix {
    /// Prefix length in bits: 8, 12, …, 32.
    bits: u8,
    /// The prefix left-aligned in a u32 (low bits zero).
    value: u32,
}

impl RequestPrefix {
    /// The first `bits` bits of `hash`; `None` unless
    /// [`is_valid_request_prefix_bits`]`(bits)`. The agent sends exactly the
    /// longest length its subscribed lists advertise, or nothing.
    pub fn new(hash: &FullHash, bits: u8) -> Option<Self> {
        is_valid_request_prefix_bits(bits).then(|| Self::of(hash, bits))
    }

    /// The first `bits` bits of `hash` (`bits` is clamped to 8..=32 and
    /// rounded down to a multiple of 4).
    pub fn of(hash: &FullHash, bits: u8) -> Self {
        let bits = bits.clamp(8, 32) / 4 * 4;
        Self {
            bits,
            value: hash.prefix().0 & Self::mask(bits),
        }
    }

    fn mask(bits: u8) -> u32 {
        if bits >= 32 { u32::MAX } else { !(u32::MAX >> bits) }
    }

    /// Prefix length in bits.
    pub fn bits(self) -> u8 {
        self.bits
    }

    /// The smallest and largest 32-bit prefixes in this bucket.
    pub fn range32(self) -> (u32, u32) {
        (self.value, self.value | !Self::mask(self.bits))
    }

    /// Whether `hash` starts with this prefix.
    pub fn matches(self, hash: &FullHash) -> bool {
        hash.prefix().0 & Self::mask(self.bits) == self.value
    }
}

impl fmt::Display for RequestPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = usize::from(self.bits / 4);
        let full = format!("{:08x}", self.value);
        f.write_str(&full[..digits])
    }
}

impl fmt::Debug for RequestPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestPrefix({self})")
    }
}

impl FromStr for RequestPrefix {
    type Err = HexError;

    /// Parses 2 to 8 lowercase hex digits.
    fn from_str(s: &str) -> Result<Self, HexError> {
        let err = HexError {
            expected_len: 8,
            found_len: s.len(),
        };
        if !(2..=8).contains(&s.len()) || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(err);
        }
        let v = u32::from_str_radix(s, 16).map_err(|_| err)?;
        let bits = (s.len() * 4) as u8;
        let value = if bits == 32 { v } else { v << (32 - bits) };
        Ok(Self { bits, value })
    }
}

impl From<HashPrefix> for RequestPrefix {
    fn from(p: HashPrefix) -> Self {
        Self { bits: 32, value: p.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_out_of_range_is_refused_as_such() {
        let read =
            |body: &str| serde_json::from_str::<FullHashSearchRequest>(body).map_err(|e| e.to_string());
        let max = read(r#"{"prefixes":["00"],"min_versions":{"phishing":18446744073709551615}}"#).unwrap();
        assert_eq!(max.min_versions["phishing"], u64::MAX);
        for (version, shown) in [
            ("18446744073709551616", "not"),
            ("-1", "-1 is not"),
            ("1.5", "not"),
            ("1e3", "not"),
        ] {
            let error = read(&format!(
                r#"{{"prefixes":["00"],"min_versions":{{"phishing":{version}}}}}"#
            ))
            .unwrap_err();
            assert!(
                error.starts_with(&format!(
                    "min_versions[\"phishing\"]: {shown} a snapshot version, a whole number from 0 to 18446744073709551615"
                )),
                "{version}: {error}"
            );
        }
        let error = read(r#"{"prefixes":["00"],"min_versions":{"phishing":"7"}}"#).unwrap_err();
        assert!(
            error.contains("expected a snapshot version, a whole number"),
            "{error}"
        );
        let error = read(r#"{"prefixes":["00"],"min_versions":[1]}"#).unwrap_err();
        assert!(
            error.contains("expected an object of snapshot versions by list name"),
            "{error}"
        );
    }

    #[test]
    fn request_prefixes() {
        let h = FullHash::of(b"a.b.c/"); // f9c142c4...
        let p: RequestPrefix = "f9c".parse().unwrap();
        assert_eq!(p.bits(), 12);
        assert!(p.matches(&h));
        assert_eq!(RequestPrefix::of(&h, 12), p);
        assert_eq!(p.to_string(), "f9c");
        assert_eq!(p.range32(), (0xf9c0_0000, 0xf9cf_ffff));
        assert_eq!(RequestPrefix::of(&h, 32).to_string(), "f9c142c4");
        assert!(!"f9d".parse::<RequestPrefix>().unwrap().matches(&h));
        assert!("f".parse::<RequestPrefix>().is_err());
        assert!("F9C".parse::<RequestPrefix>().is_err());
        assert!("f9c142c4a".parse::<RequestPrefix>().is_err());
    }

    #[test]
    fn request_prefix_lengths() {
        let h = FullHash::of(b"a.b.c/");
        assert_eq!(RequestPrefix::new(&h, 12), Some(RequestPrefix::of(&h, 12)));
        for bad in [0, 4, 7, 9, 13, 36, 255] {
            assert_eq!(RequestPrefix::new(&h, bad), None, "{bad} bits");
        }
        assert_eq!(routes::full_hashes(RequestPrefix::of(&h, 12)), "/v1/hashes/f9c");
        assert_eq!(routes::latest_snapshot("malware"), "/v1/lists/malware/snapshot");
        assert_eq!(
            routes::versioned_snapshot("malware", 7),
            "/v1/lists/malware/snapshots/7"
        );
        assert_eq!(
            routes::list_hashes_base("malware", 7),
            "/v1/lists/malware/hashes/7/"
        );
        assert_eq!(
            routes::list_hashes("malware", 7, RequestPrefix::of(&h, 12)),
            "/v1/lists/malware/hashes/7/f9c"
        );
        assert!(
            routes::list_hashes("malware", 7, RequestPrefix::of(&h, 12))
                .starts_with(&routes::list_hashes_base("malware", 7))
        );
        let id = snapshot_id(7, &h.0);
        assert_eq!(id, format!("7-{}", hex::encode(&h.0[..8])));
        assert_eq!(snapshot_etag(7, &h.0), format!("\"{id}\""));
        assert_eq!(
            routes::list_hashes("malware", &id, RequestPrefix::of(&h, 12)),
            format!("/v1/lists/malware/hashes/{id}/f9c")
        );
    }

    /// A snapshot id is read back; a version alone is a version; anything
    /// else (signs, leading zeros, short, long or uppercase hex, a second
    /// dash) is refused.
    #[test]
    fn snapshot_ids_are_read_back_exactly() {
        let body = [0xabu8; 32];
        let id = snapshot_id(1_800_000_000, &body);
        assert_eq!(id, "1800000000-abababababababab");
        assert_eq!(parse_snapshot_id(&id), Some((1_800_000_000, Some([0xab; 8]))));
        assert_eq!(parse_snapshot_id("7"), Some((7, None)));
        assert_eq!(parse_snapshot_id("0"), Some((0, None)));
        for bad in [
            "",
            "-",
            "07",
            "+7",
            "7-",
            "-abababababababab",
            "7-ababababababab",
            "7-abababababababab00",
            "7-ABABABABABABABAB",
            "7-abababababababag",
            "7-abababababababab-1",
            "18446744073709551616",
            "1e3",
        ] {
            assert_eq!(parse_snapshot_id(bad), None, "{bad:?}");
        }
    }
}
