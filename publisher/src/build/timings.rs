//! Where a build's time goes, stage by stage.
//!
//! Stage durations come from the monotonic clock; the process's peak memory
//! comes from a [`PeakRssProbe`] the build's caller passes in, so the build
//! itself reads no file.

use std::fmt;
use std::time::Duration;

/// The stages of a build, in the order they run. Each is wall time, and
/// the stages do not overlap: their sum is the build's time.
///
/// - `read`: fetching (the HTTP response, or checking a file), then the
///   part of reading and decompressing a source (and compressing its copy
///   to keep) that the parse did not hide: a source is read block by block
///   on one thread while the blocks read before are parsed on every core,
///   and this is the wall time the parse threads waited for the next block
///   (their summed wait over their number).
/// - `parse`: the parse on every core: splitting lines, cleaning them,
///   canonicalizing each entry, its public-suffix check, SHA-256 of its
///   expressions. These are no longer timed apart: clock reads per entry
///   would cost more than some of what they time, and with every core
///   busy their sum is not wall time.
/// - `source_cache`: storing fresh sources' last good copies (compressed),
///   with fsync.
/// - `sort_dedup`: sorting and deduplicating the full hashes and the
///   filter keys, on every core.
/// - `filter`, `canary` (on every core), `compress`, `sign`, `deltas`,
///   `write`: building the filter, measuring its false-positive rate,
///   compressing and signing the snapshot, the delta from the version
///   served, writing them (`write` includes writing the full hashes out
///   of memory before the filter is built and reading them back after, see
///   [`Spill`](crate::storage::spill::Spill)).
/// - `other`: what no stage covers (sizing, gates, thread hops).
pub const STAGES: [&str; 11] = [
    "read",
    "parse",
    "source_cache",
    "sort_dedup",
    "filter",
    "canary",
    "compress",
    "sign",
    "deltas",
    "write",
    "other",
];

/// One stage's wall time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageTiming {
    /// The stage, one of [`STAGES`].
    pub stage: &'static str,
    /// Wall time spent in it (summed over sources and batches).
    pub duration: Duration,
    /// The process's peak resident set (`VmHWM`), in bytes, when the stage
    /// last ended (Linux only): shows which stage raised the peak.
    pub peak_rss_bytes: Option<u64>,
}

/// How a build samples the process's peak resident set for its stage
/// timings: the publisher passes
/// [`metrics::peak_rss_bytes`](crate::metrics::peak_rss_bytes); a build from memory (a
/// test, a benchmark) may pass [`PeakRssProbe::NONE`] and read nothing.
#[derive(Clone, Copy, Default)]
pub struct PeakRssProbe(Option<fn() -> Option<u64>>);

impl PeakRssProbe {
    /// No sampling: every stage's `peak_rss_bytes` is `None`.
    pub const NONE: Self = Self(None);

    /// Samples with `sample`.
    pub const fn new(sample: fn() -> Option<u64>) -> Self {
        Self(Some(sample))
    }

    fn sample(self) -> Option<u64> {
        self.0.and_then(|sample| sample())
    }
}

impl fmt::Debug for PeakRssProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "PeakRssProbe(sampling)"
        } else {
            "PeakRssProbe::NONE"
        })
    }
}

/// Probes never make two timings differ: equality is about what was measured.
impl PartialEq for PeakRssProbe {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PeakRssProbe {}

/// Where one build's time went, stage by stage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildTimings {
    /// Stages that ran, in [`STAGES`] order.
    pub stages: Vec<StageTiming>,
    /// Expressions hashed with SHA-256 (each accepted entry's, before
    /// deduplication).
    pub expressions_hashed: u64,
    /// Total length of those expressions, in bytes.
    pub expression_bytes: u64,
    /// Wall time from the first read to the last write.
    pub total: Duration,
    /// How each stage's peak RSS is sampled.
    pub probe: PeakRssProbe,
}

impl BuildTimings {
    /// No stages yet; peak RSS sampled with `probe`.
    pub fn new(probe: PeakRssProbe) -> Self {
        Self {
            probe,
            ..Self::default()
        }
    }

    /// Adds `took` to `stage` and records the peak RSS now.
    pub fn add(&mut self, stage: &'static str, took: Duration) {
        let peak = self.probe.sample();
        match self.stages.iter_mut().find(|s| s.stage == stage) {
            Some(s) => {
                s.duration += took;
                s.peak_rss_bytes = peak;
            }
            None => {
                self.stages.push(StageTiming {
                    stage,
                    duration: took,
                    peak_rss_bytes: peak,
                });
                let order = |s: &StageTiming| STAGES.iter().position(|n| *n == s.stage);
                self.stages.sort_by_key(order);
            }
        }
    }

    /// The time spent in `stage` (zero when it did not run).
    pub fn get(&self, stage: &str) -> Duration {
        self.stages
            .iter()
            .find(|s| s.stage == stage)
            .map_or(Duration::ZERO, |s| s.duration)
    }

    /// Sum of every stage.
    pub fn sum(&self) -> Duration {
        self.stages.iter().map(|s| s.duration).sum()
    }
}
