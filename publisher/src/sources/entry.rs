//! What an entry stands for: a URL's canonical forms, an expression to
//! hash, or a full hash given as is; and one reading of an entry.

use blocksieve_format::{CanonicalForm, FullHash};

use super::outcome::Reading;
use super::scheme::strip_scheme_artifacts;
use super::sink::EntrySink;

/// What an entry stands for.
pub(super) enum Entry<'a> {
    /// A URL: one expression, or more for a line with `&amp;`.
    Url(UrlEntry<'a>),
    /// An expression to hash.
    Expression(String),
    /// A full hash given as is.
    Hash(FullHash),
}

impl Entry<'_> {
    pub(super) fn emit(&self, sink: &mut impl EntrySink) {
        match self {
            Entry::Url(u) => u.emit(sink),
            Entry::Expression(e) => sink.expression(e.as_bytes()),
            Entry::Hash(h) => sink.full_hash(*h),
        }
    }
}

/// One reading of an entry: the text read and what it stands for.
pub(super) struct Read<'a> {
    /// The text read; for a URL, as written (the build never shows it;
    /// [`Read::to_reading`] shows it without its scheme artifacts).
    pub(super) text: &'a [u8],
    pub(super) entry: Entry<'a>,
}

impl Read<'_> {
    pub(super) fn to_reading(&self) -> Reading {
        let expressions = match &self.entry {
            Entry::Url(u) => u.to_strings(),
            Entry::Expression(e) => vec![e.clone()],
            Entry::Hash(_) => Vec::new(),
        };
        let full_hashes = match &self.entry {
            Entry::Hash(h) => vec![*h],
            _ => expressions.iter().map(|e| FullHash::of(e.as_bytes())).collect(),
        };
        let text = match &self.entry {
            Entry::Url(_) => strip_scheme_artifacts(self.text),
            _ => self.text,
        };
        Reading {
            text: text.to_vec(),
            expressions,
            full_hashes,
        }
    }
}

/// The canonical URLs a URL entry stands for (see
/// [`url_expressions`](super::url_expressions)); the expressions are slices
/// of them, and of the line itself when it is canonical as written (most
/// are), so no string is copied per entry.
pub(super) struct UrlEntry<'a> {
    pub(super) first: CanonicalForm<'a>,
    /// For a line written with `&amp;`: the readings between its decoded
    /// form (`first`) and the line as written (the last), one per level of
    /// escaping decoded, each that differs from the one before. Empty (no
    /// allocation) for every other line.
    pub(super) others: Vec<CanonicalForm<'a>>,
}

impl UrlEntry<'_> {
    pub(super) fn emit(&self, sink: &mut impl EntrySink) {
        for url in std::iter::once(&self.first).chain(&self.others) {
            sink.expression(url.most_specific_expression());
        }
    }

    pub(super) fn to_strings(&self) -> Vec<String> {
        std::iter::once(&self.first)
            .chain(&self.others)
            .map(most_specific)
            .collect()
    }
}

/// The most specific expression of `url`, as a string.
pub(super) fn most_specific(url: &CanonicalForm<'_>) -> String {
    match url {
        CanonicalForm::Built(url) => url.most_specific_expression().to_owned(),
        // Printable ASCII (canonical as written), so never lossy.
        CanonicalForm::AsWritten(_) => String::from_utf8_lossy(url.most_specific_expression()).into_owned(),
    }
}
