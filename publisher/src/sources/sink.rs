//! Where the full hashes of accepted entries go.

use blocksieve_format::FullHash;

/// Where parsed entries go: the expressions of accepted entries, to be
/// hashed, and full hashes given as they are. The build's sink hashes
/// each block's expressions as they come; so does
/// [`parse_source`](super::parse_source)'s.
pub trait EntrySink {
    /// An expression of an accepted entry (hashed with SHA-256 into its
    /// full hash).
    fn expression(&mut self, expression: &[u8]);

    /// A full hash given as is (format `sha256`).
    fn full_hash(&mut self, hash: FullHash);

    /// Called after each line or record: a sink that batches its hashing
    /// hashes here.
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
