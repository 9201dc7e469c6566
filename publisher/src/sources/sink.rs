//! Where the full hashes of accepted entries go.

use std::time::Duration;

use blocksieve_format::FullHash;

/// Where parsed entries go: the expressions of accepted entries, to be
/// hashed, and full hashes given as they are. The build's sink hashes in
/// batches and times each stage; [`parse_source`](super::parse_source)'s hashes each at once.
pub trait EntrySink {
    /// Whether the parser should time canonicalization (two clock reads per
    /// entry) and report it with [`EntrySink::canonicalized`].
    const TIMED: bool = false;

    /// An expression of an accepted entry (hashed with SHA-256 into its
    /// full hash).
    fn expression(&mut self, expression: &[u8]);

    /// A full hash given as is (format `sha256`).
    fn full_hash(&mut self, hash: FullHash);

    /// Time spent canonicalizing one entry (only when [`EntrySink::TIMED`]).
    fn canonicalized(&mut self, _took: Duration) {}

    /// Called after each line or record: a sink that batches its hashing
    /// hashes here, outside the canonicalization timing.
    fn end_of_line(&mut self) {}
}

/// A sink hashing each expression at once and calling a closure.
pub(super) struct HashEach<F>(pub(super) F);

impl<F: FnMut(FullHash)> EntrySink for HashEach<F> {
    fn expression(&mut self, expression: &[u8]) {
        (self.0)(FullHash::of(expression));
    }

    fn full_hash(&mut self, hash: FullHash) {
        (self.0)(hash);
    }
}
