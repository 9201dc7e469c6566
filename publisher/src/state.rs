//! What the server shares between requests and builds: one slot per list,
//! each holding the published snapshot behind an atomic pointer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use axum::body::Bytes;
use blocksieve_format::api::BuildStatus;
use blocksieve_format::{FullHash, HashPrefix, SnapshotHeader};

/// A published snapshot and the full hashes behind it.
#[derive(Debug)]
pub struct Published {
    /// The verified header of `snapshot`.
    pub header: SnapshotHeader,
    /// The snapshot file bytes, served as they are.
    pub snapshot: Bytes,
    /// Strong entity tag: version and body hash, quoted.
    pub etag: String,
    /// The list's full hashes, sorted: the full-hash endpoint answers from it.
    pub hashes: Vec<FullHash>,
}

impl Published {
    /// Wraps a snapshot and its sorted hashes.
    pub fn new(header: SnapshotHeader, snapshot: Vec<u8>, hashes: Vec<FullHash>) -> Self {
        let etag = format!("\"{}-{}\"", header.version, hex::encode(&header.body_sha256[..8]));
        Self {
            header,
            snapshot: Bytes::from(snapshot),
            etag,
            hashes,
        }
    }

    /// The full hashes whose 32-bit prefix is `prefix` (binary search over the
    /// sorted hashes).
    pub fn bucket(&self, prefix: HashPrefix) -> &[FullHash] {
        let start = self.hashes.partition_point(|h| h.prefix() < prefix);
        let end = start + self.hashes[start..].partition_point(|h| h.prefix() == prefix);
        &self.hashes[start..end]
    }
}

/// One threat list as the server sees it.
#[derive(Debug)]
pub struct ListSlot {
    /// The list name.
    pub name: String,
    /// The snapshot being served; swapped whole by a build, never mutated.
    pub current: ArcSwapOption<Published>,
    /// The outcome of the last build attempt.
    pub last_build: Mutex<Option<BuildStatus>>,
}

/// State shared by all handlers.
#[derive(Debug)]
pub struct AppState {
    /// Lists in configuration order.
    pub lists: Vec<ListSlot>,
    /// Cache duration advertised with full-hash answers.
    pub cache_duration: Duration,
}

impl AppState {
    /// The slot of list `name`.
    pub fn list(&self, name: &str) -> Option<&ListSlot> {
        self.lists.iter().find(|l| l.name == name)
    }

    /// Shared handle.
    pub fn shared(self) -> Arc<Self> {
        Arc::new(self)
    }
}
