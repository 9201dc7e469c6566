//! The one code path a build and [`read_line`](super::read_line) share: a
//! line is cleaned, its entries read, and what is found goes to a visitor —
//! the build's [`Reader`] counts and hashes it, [`Collect`] keeps it.

use std::time::Instant;

use blocksieve_format::FullHash;

use crate::config::SourceFormat;

use super::adblock::read_adblock;
use super::clean::clean_line;
use super::hosts::{read_domain, read_hosts};
use super::sha256::read_sha256;
use super::url_entry::{UrlEntry, read_url};
use super::urls::read_url_line;
use super::{EntryOutcome, EntrySink, LineOutcome, ParseReport, Reading};

/// What an entry stands for.
pub(super) enum Entry {
    /// A URL: one expression, or two for a line with `&amp;`.
    Url(UrlEntry),
    /// An expression to hash.
    Expression(String),
    /// A full hash given as is.
    Hash(FullHash),
}

impl Entry {
    fn emit(&self, sink: &mut impl EntrySink) {
        match self {
            Entry::Url(u) => u.emit(sink),
            Entry::Expression(e) => sink.expression(e.as_bytes()),
            Entry::Hash(h) => sink.full_hash(*h),
        }
    }
}

/// One reading of an entry: the text read and what it stands for.
pub(super) struct Read<'a> {
    pub(super) text: &'a [u8],
    pub(super) entry: Entry,
}

impl Read<'_> {
    fn to_reading(&self) -> Reading {
        let expressions = match &self.entry {
            Entry::Url(u) => u.to_strings(),
            Entry::Expression(e) => vec![e.clone()],
            Entry::Hash(_) => Vec::new(),
        };
        let full_hashes = match &self.entry {
            Entry::Hash(h) => vec![*h],
            _ => expressions.iter().map(|e| FullHash::of(e.as_bytes())).collect(),
        };
        Reading {
            text: self.text.to_vec(),
            expressions,
            full_hashes,
        }
    }
}

/// Receives what reading a line finds: the build's [`Reader`] counts and
/// hashes it, [`read_line`](super::read_line)'s [`Collect`] keeps it.
pub(super) trait Visit {
    /// Runs one entry's canonicalization (timed for a timed sink).
    fn canonicalizing<T>(&mut self, f: impl FnOnce() -> T) -> T {
        f()
    }

    /// Something was removed from the line or read twice (a [`cleaned`](super::cleaned) kind).
    fn cleaned(&mut self, kind: &'static str);

    /// An accepted entry, with its one or two readings.
    fn accepted(&mut self, readings: &[Read<'_>]);

    /// A rejected entry.
    fn rejected(&mut self, text: &[u8], reason: &'static str);
}

/// The build's visitor: counts into the report, emits into the sink.
pub(super) struct Reader<'a, S> {
    pub(super) report: &'a mut ParseReport,
    pub(super) sink: &'a mut S,
}

impl<S: EntrySink> Visit for Reader<'_, S> {
    fn canonicalizing<T>(&mut self, f: impl FnOnce() -> T) -> T {
        if S::TIMED {
            let started = Instant::now();
            let out = f();
            self.sink.canonicalized(started.elapsed());
            out
        } else {
            f()
        }
    }

    fn cleaned(&mut self, kind: &'static str) {
        match self.report.cleaned.get_mut(kind) {
            Some(n) => *n += 1,
            None => {
                self.report.cleaned.insert(kind.to_owned(), 1);
            }
        }
    }

    fn accepted(&mut self, readings: &[Read<'_>]) {
        self.report.accepted += 1;
        for r in readings {
            r.entry.emit(self.sink);
        }
    }

    fn rejected(&mut self, text: &[u8], reason: &'static str) {
        self.report.reject(text, reason);
    }
}

/// [`read_line`](super::read_line)'s visitor: keeps everything as a [`LineOutcome`].
#[derive(Default)]
pub(super) struct Collect(pub(super) LineOutcome);

impl Visit for Collect {
    fn cleaned(&mut self, kind: &'static str) {
        self.0.cleaned.push(kind);
    }

    fn accepted(&mut self, readings: &[Read<'_>]) {
        let readings = readings.iter().map(Read::to_reading).collect();
        self.0.entries.push(EntryOutcome::Accepted(readings));
    }

    fn rejected(&mut self, text: &[u8], reason: &'static str) {
        self.0.entries.push(EntryOutcome::Rejected {
            text: text.to_vec(),
            reason,
        });
    }
}

/// Reads one line (or CSV value, or JSON string) into `v`; false when it
/// holds no entry.
pub(super) fn read_line_with(format: SourceFormat, raw: &[u8], v: &mut impl Visit) -> bool {
    let Some(line) = clean_line(format, raw) else {
        return false;
    };
    for kind in line.cuts.kinds() {
        v.cleaned(kind);
    }
    match format {
        SourceFormat::Urls => read_url_line(&line, v),
        SourceFormat::Csv => read_url(line.text, v),
        SourceFormat::Domains | SourceFormat::Json => read_domain(line.text, line.text, v),
        SourceFormat::Hosts => read_hosts(line.text, v),
        SourceFormat::AdblockHosts => read_adblock(line.text, v),
        SourceFormat::Sha256 => read_sha256(line.text, v),
    }
    true
}
