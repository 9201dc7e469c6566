//! What receives what reading a line finds: the build's [`Reader`] counts
//! and hashes it, [`Collect`] keeps it for [`read_line`](super::read_line).

use super::entry::{Entry, Read};
use super::outcome::{AGENT_HOST_LABELS, AGENT_PATH_PREFIXES, EntryOutcome, LineOutcome, ParseReport};
use super::sink::EntrySink;

/// Receives what reading a line finds: the build's [`Reader`] counts and
/// hashes it, [`read_line`](super::read_line)'s [`Collect`] keeps it.
pub(super) trait Visit {
    /// Runs one entry's canonicalization.
    fn canonicalizing<T>(&mut self, f: impl FnOnce() -> T) -> T {
        f()
    }

    /// Something was removed from the line or read twice (a [`cleaned`](super::cleaned) kind).
    fn cleaned(&mut self, kind: &'static str);

    /// An accepted entry, with its one or two readings.
    fn accepted(&mut self, readings: &[Read<'_>]);

    /// A rejected entry.
    fn rejected(&mut self, text: &[u8], reason: &'static str);

    /// The entry just accepted stands for a directory deeper than an agent
    /// checks (see [`ParseReport::directory_too_deep`]).
    fn directory_too_deep(&mut self) {}
}

/// The build's visitor: counts into the report, emits into the sink.
pub(super) struct Reader<'a, S> {
    pub(super) report: &'a mut ParseReport,
    pub(super) sink: &'a mut S,
}

impl<S: EntrySink> Visit for Reader<'_, S> {
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
        if let Some(Read {
            entry: Entry::Expression(e),
            ..
        }) = readings.first()
            && too_deep(e)
        {
            self.report.host_wide_too_deep += 1;
        }
    }

    fn rejected(&mut self, text: &[u8], reason: &'static str) {
        self.report.reject(text, reason);
    }

    fn directory_too_deep(&mut self) {
        self.report.directory_too_deep += 1;
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

/// Whether the host-wide expression `e` (`host/`, a domain entry's) names
/// a host of more labels than an agent reads suffixes from: dots, for an
/// IP address has at most three.
fn too_deep(e: &str) -> bool {
    e.bytes().filter(|&b| b == b'.').count() >= AGENT_HOST_LABELS
}

/// Whether the directory expression `e` (`host/a/b/c/d/`, ending in `/`)
/// is none of the directory prefixes an agent checks: its `/`s are the
/// path's, one per prefix.
pub(super) fn directory_too_deep(e: &[u8]) -> bool {
    e.iter().filter(|&&b| b == b'/').count() > AGENT_PATH_PREFIXES
}
