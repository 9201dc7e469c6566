//! The reference a build's time is compared with: SHA-256 alone over the
//! expressions the build hashed, as the `sha2` crate computes it
//! (`Sha256::digest`; the build's own [`FullHash::of`] pads the message
//! itself and is faster): a yardstick that does not move with the code it
//! measures.

use std::io::Read as _;
use std::time::{Duration, Instant};

use blocksieve_format::FullHash;
use sha2::{Digest as _, Sha256};

use crate::config::{SourceConfig, SourceFormat};
use crate::fetch::ContentEncoding;
use crate::sources::{EntrySink, ParseReport, parse_source_into};

use super::pipeline::{Blocks, decoder};
use super::{SourceRole, entry_options};

/// Expressions stored end to end in one buffer (no allocation per entry).
#[derive(Default)]
struct ExpressionBatch {
    text: Vec<u8>,
    ends: Vec<usize>,
}

impl ExpressionBatch {
    fn push(&mut self, expression: &[u8]) {
        self.text.extend_from_slice(expression);
        self.ends.push(self.text.len());
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(start, &end)| &self.text[start..end])
    }

    fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }
}

/// The reference a build's time is compared with: SHA-256 of every
/// expression the build hashed, alone, in a tight loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HashReference {
    /// Expressions hashed.
    pub expressions: u64,
    /// Their total length, in bytes.
    pub bytes: u64,
    /// Wall time of the hashing alone.
    pub duration: Duration,
}

impl std::ops::AddAssign for HashReference {
    fn add_assign(&mut self, other: Self) {
        self.expressions += other.expressions;
        self.bytes += other.bytes;
        self.duration += other.duration;
    }
}

/// Measures [`HashReference`] over `sources` (content and configuration,
/// e.g. each source's last good content after a build): parses and
/// canonicalizes them untimed into batches of 65,536 expressions, then
/// times only SHA-256 over each batch. Memory stays at one batch.
pub fn hash_reference<'a>(sources: impl IntoIterator<Item = (&'a [u8], &'a SourceConfig)>) -> HashReference {
    struct Collect {
        batch: ExpressionBatch,
        hashes: Vec<FullHash>,
        reference: HashReference,
    }
    impl Collect {
        fn flush(&mut self) {
            self.hashes.clear();
            let started = Instant::now();
            self.hashes
                .extend(self.batch.iter().map(|e| FullHash(Sha256::digest(e).into())));
            self.reference.duration += started.elapsed();
            std::hint::black_box(&self.hashes);
            self.reference.expressions += self.batch.ends.len() as u64;
            self.reference.bytes += self.batch.text.len() as u64;
            self.batch.clear();
        }
    }
    impl EntrySink for Collect {
        fn expression(&mut self, expression: &[u8]) {
            self.batch.push(expression);
        }
        fn full_hash(&mut self, _hash: FullHash) {}
        fn end_of_line(&mut self) {
            if self.batch.ends.len() >= 65_536 {
                self.flush();
            }
        }
    }
    let mut sink = Collect {
        batch: ExpressionBatch::default(),
        hashes: Vec::with_capacity(65_536 + 2),
        reference: HashReference {
            expressions: 0,
            bytes: 0,
            duration: Duration::ZERO,
        },
    };
    for (bytes, config) in sources {
        let options = entry_options(config, SourceRole::Block);
        parse_source_into(
            bytes,
            config.format,
            &options,
            &mut ParseReport::default(),
            &mut sink,
        );
    }
    sink.flush();
    sink.reference
}

/// [`hash_reference`] over one source's content as stored (`stored`,
/// encoded as `encoding`), decoded as it streams: line formats in blocks
/// of whole lines, so memory stays at one block and one batch.
///
/// # Errors
///
/// When the content cannot be read or decoded.
pub fn hash_reference_encoded(
    stored: impl std::io::BufRead + Send,
    encoding: ContentEncoding,
    config: &SourceConfig,
) -> std::io::Result<HashReference> {
    let mut decoded = decoder(stored, encoding)?;
    if matches!(config.format, SourceFormat::Json | SourceFormat::Csv) {
        let mut document = Vec::new();
        decoded.read_to_end(&mut document)?;
        return Ok(hash_reference([(document.as_slice(), config)]));
    }
    let mut total = HashReference::default();
    let mut blocks = Blocks::new(decoded);
    while let Some(block) = blocks.next_block()? {
        total += hash_reference([(block.as_slice(), config)]);
    }
    Ok(total)
}
