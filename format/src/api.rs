//! JSON types of the publisher's HTTP API (version 1), shared with the agent.
//!
//! | route | response |
//! |---|---|
//! | `GET /v1/lists` | [`ListsResponse`] |
//! | `GET /v1/lists/{name}/snapshot` | snapshot bytes (`application/octet-stream`), strong `ETag` |
//! | `GET /v1/hashes/{prefix}` | [`FullHashResponse`] |
//! | any error | 4xx/5xx with [`ErrorResponse`] |

use serde::{Deserialize, Serialize};

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
    /// Lines read from all sources.
    pub lines: u64,
    /// Lines rejected (not a URL or domain), counted by reason.
    pub rejected: u64,
    /// Build wall time in milliseconds.
    pub duration_ms: u64,
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
