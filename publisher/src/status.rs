//! What operators see of each list beyond the served snapshot: its build
//! history (kept across restarts by `storage::history`), its sources' last
//! fetches, and its health (`health`, pure). The server shows them: the
//! status page (`server::page`) and the history route (`server::history`).
//!
//! A [`ListWatch`] per list ([`ListSlot::watch`]) holds what the build
//! records: the publisher calls [`ListWatch::record`] as each build finishes.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use blocksieve_format::KeyBits;
use blocksieve_format::api::{BuildRecord, Sizing};

use crate::build;
use crate::config::schedule;
use crate::fetch::{Fetched, Validators};
use crate::storage::history::{HISTORY_LIMIT, HistoryFile};

pub mod health;

pub use health::{Health, HealthInput, State as HealthState};

/// What the configuration says of a list that its status needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ListProfile {
    /// Its cron schedule (6 fields, seconds first, UTC).
    pub schedule: String,
    /// `schedule` parsed (`None`: it does not parse).
    parsed: Option<schedule::Schedule>,
    /// The time between its schedule's next two firings (`None`: the
    /// schedule does not fire twice).
    pub build_interval: Option<Duration>,
    /// `gates.max_fpr_ratio`.
    pub max_fpr_ratio: f64,
    /// `target_full_hash_requests_per_1000`.
    pub target_per_1000: f64,
    /// The fleet's URL checks per second (`fleet_checks_per_second`).
    pub fleet_checks_per_second: f64,
    /// `max_bucket_entries`: the largest bucket the full-hash routes serve.
    pub max_bucket_entries: u64,
    /// `min_anonymity`: the listed full hashes a request prefix should
    /// select (a list too small to reach it at 8 bits selects fewer).
    pub min_anonymity: u64,
}

impl ListProfile {
    /// The profile of list `schedule` etc. as of `now` (Unix seconds).
    pub fn new(
        schedule: &str,
        max_fpr_ratio: f64,
        target_per_1000: f64,
        fleet_checks_per_second: f64,
        max_bucket_entries: u64,
        min_anonymity: u64,
        now: u64,
    ) -> Self {
        Self {
            schedule: schedule.to_owned(),
            parsed: schedule::Schedule::parse(schedule),
            build_interval: build_interval(schedule, now),
            max_fpr_ratio,
            target_per_1000,
            fleet_checks_per_second,
            max_bucket_entries,
            min_anonymity,
        }
    }

    /// When the list, last fresh at `fresh_at`, goes stale ([`overdue_at`]).
    pub fn overdue_at(&self, fresh_at: u64) -> Option<u64> {
        let schedule = self.parsed.as_ref()?;
        schedule.next_firing(schedule.next_firing(fresh_at)?)
    }

    /// The sizing advice for a filter with false-positive rate `fpr` over
    /// `unique_keys` keys of width `key_bits`.
    pub fn advice(&self, fpr: f64, unique_keys: u64, key_bits: KeyBits) -> build::Advice {
        build::advice(
            fpr,
            unique_keys,
            key_bits,
            self.target_per_1000,
            self.fleet_checks_per_second,
        )
    }
}

/// When a list last fresh at `fresh_at` (Unix seconds) goes stale: at the
/// second firing of `schedule` after it, when the build scheduled next and
/// the one after have both not renewed it. (Twice "the interval" is wrong
/// for uneven schedules: after the 06:00 build of `0 0 0,6 * * *` the
/// next gap is 6 h, but the list is due at 00:00 and 06:00, not at 18:00.)
pub fn overdue_at(schedule: &str, fresh_at: u64) -> Option<u64> {
    let schedule = schedule::Schedule::parse(schedule)?;
    schedule.next_firing(schedule.next_firing(fresh_at)?)
}

/// Seconds between the next two firings of `schedule` after `now`.
pub fn build_interval(schedule: &str, now: u64) -> Option<Duration> {
    let schedule = schedule::Schedule::parse(schedule)?;
    let next = schedule.next_firing(now)?;
    let after = schedule.next_firing(next)?;
    Some(Duration::from_secs(after.saturating_sub(next)))
}

/// A key width from its bits (as [`Sizing::key_bits`] gives it).
pub fn key_bits(bits: u8) -> KeyBits {
    if bits == 64 {
        KeyBits::Bits64
    } else {
        KeyBits::Bits32
    }
}

/// One source's last fetch, as the status page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceView {
    /// Its path or URL.
    pub label: String,
    /// `block` or `allow`.
    pub role: &'static str,
    /// When it was last fetched, Unix seconds.
    pub fetched_at: u64,
    /// `fresh`, `not_modified` or `failed`.
    pub fetch: &'static str,
    /// Why it failed, for `failed`.
    pub error: Option<String>,
    /// Bytes received (as sent: gzip stays gzip); `None` for `304` or a
    /// failure.
    pub bytes: Option<u64>,
    /// The validators its next conditional GET sends.
    pub validators: Validators,
    /// Whether the last build read its last good content instead.
    pub on_last_good: bool,
}

impl SourceView {
    /// The view of source `label` (`role`) fetched at `now` as `fetched`,
    /// the validators stored before it `stored`.
    pub fn of(
        label: String,
        role: &'static str,
        fetched: &Fetched,
        stored: Option<Validators>,
        now: u64,
    ) -> Self {
        let (fetch, error, bytes, validators) = match fetched {
            Fetched::Fresh { bytes, validators } => {
                ("fresh", None, Some(bytes.len() as u64), validators.clone())
            }
            Fetched::Stream(s) => ("fresh", None, Some(s.size), s.validators.clone()),
            Fetched::NotModified => ("not_modified", None, None, stored.unwrap_or_default()),
            Fetched::Failed(reason) => ("failed", Some(reason.clone()), None, stored.unwrap_or_default()),
        };
        Self {
            label,
            role,
            fetched_at: now,
            fetch,
            error,
            bytes,
            validators,
            on_last_good: false,
        }
    }
}

/// Whether build `r` read its sources, so that its `sources_on_last_good`
/// says which were on last good content: it got as far as a filter, or
/// it failed reading them (a source failed with nothing to fall back to).
fn read_its_sources(r: &BuildRecord) -> bool {
    r.outcome != "skipped" && (!r.filter_kind.is_empty() || !r.sources_failed.is_empty())
}

/// `(finished_at, fill ratio)` of builds, oldest first ([`ListWatch::fill_history`]).
pub type FillHistory = Arc<[(u64, f64)]>;

/// A list's build history in memory and in its file.
#[derive(Debug)]
struct History {
    file: HistoryFile,
    records: VecDeque<BuildRecord>,
}

/// What a list's status shows besides the served snapshot.
#[derive(Debug)]
pub struct ListWatch {
    /// What the configuration says.
    pub profile: ListProfile,
    history: Mutex<History>,
    /// Its sources' last fetches (block sources, then allow sources).
    pub sources: Mutex<Vec<SourceView>>,
    /// The gate refusal of the latest build attempt (`gate: reason`), until
    /// a build publishes or finds the list unchanged.
    pub refusal: Mutex<Option<String>>,
    /// The sources the latest build read from their last good content.
    pub on_last_good: Mutex<Vec<String>>,
    /// The history's charts as the page shows them, drawn once per build
    /// (`None`: not drawn since the last build).
    charts: Mutex<Option<Arc<str>>>,
    /// [`ListWatch::fill_history`], worked out once per build.
    fill_history: Mutex<Option<FillHistory>>,
}

impl ListWatch {
    /// The watch of `list`, its history read from `data_dir` (`None`: kept
    /// in memory only).
    pub fn open(profile: ListProfile, data_dir: Option<&Path>, list: &str) -> Self {
        let (file, records) = HistoryFile::open(data_dir, list, HISTORY_LIMIT);
        // What the latest builds before a restart said still stands.
        let refusal = (records.iter().rev())
            .find(|r| matches!(r.outcome.as_str(), "published" | "unchanged" | "refused"))
            .and_then(|r| r.refusal.clone());
        // As `record` keeps it: what the last build that read its sources said.
        let on_last_good = (records.iter().rev())
            .find(|r| read_its_sources(r))
            .map(|r| r.sources_on_last_good.clone());
        Self {
            profile,
            history: Mutex::new(History { file, records }),
            sources: Mutex::new(Vec::new()),
            refusal: Mutex::new(refusal),
            on_last_good: Mutex::new(on_last_good.unwrap_or_default()),
            charts: Mutex::new(None),
            fill_history: Mutex::new(None),
        }
    }

    /// Whether the latest build attempt's gate refusal stands, and how many
    /// sources the latest build read from their last good content (for the
    /// gauges of a publisher that just started).
    pub fn standing(&self) -> (bool, usize) {
        let refused = self.refusal.lock().is_ok_and(|r| r.is_some());
        let on_last_good = self.on_last_good.lock().map_or(0, |g| g.len());
        (refused, on_last_good)
    }

    /// The history's charts (HTML), drawn by `draw` when the history
    /// changed since they last were.
    pub fn charts(&self, draw: impl FnOnce(&VecDeque<BuildRecord>) -> String) -> Arc<str> {
        // Drawn and kept under the lock: a build recorded meanwhile (which
        // clears the drawing after adding its line) waits, so a drawing of
        // the history before it is never kept after it.
        let Ok(mut charts) = self.charts.lock() else {
            return self.with_history(draw).into();
        };
        if let Some(drawn) = charts.as_ref() {
            return drawn.clone();
        }
        let drawn: Arc<str> = self.with_history(draw).into();
        *charts = Some(drawn.clone());
        drawn
    }

    /// Records a finished build: its history line, and the state the
    /// health reads (the gate refusal, the sources on last good content).
    pub fn record(&self, record: BuildRecord) {
        match record.outcome.as_str() {
            // Superseded: another builder published a newer version.
            "published" | "unchanged" | "superseded" => set(&self.refusal, None),
            "refused" => set(&self.refusal, record.refusal.clone()),
            _ => {}
        }
        // A build that read its sources says which were on last good
        // content; one that read none (skipped, or failed before a report)
        // leaves what the last one said.
        if read_its_sources(&record) {
            set(&self.on_last_good, record.sources_on_last_good.clone());
        }
        if let Ok(mut sources) = self.sources.lock() {
            for s in sources.iter_mut() {
                s.on_last_good = record.sources_on_last_good.contains(&s.label);
            }
        }
        if let Ok(mut h) = self.history.lock() {
            if h.records.len() >= HISTORY_LIMIT {
                h.records.pop_front();
            }
            h.records.push_back(record.clone());
            let History { file, records } = &mut *h;
            file.append(&record, records);
        }
        set(&self.charts, None);
        set(&self.fill_history, None);
    }

    /// The fill ratio (unique prefixes over capacity, [`build::fill_ratio`])
    /// of each build in the history that published or renewed the list and
    /// knew its capacity: `(finished_at, fill)`, oldest first, for the
    /// health's trend. Worked out once per build, like the charts.
    pub fn fill_history(&self) -> FillHistory {
        let work = || -> FillHistory {
            self.with_history(|h| {
                h.iter()
                    .filter(|r| r.outcome == "published" || r.outcome == "unchanged")
                    .filter_map(|r| {
                        r.capacity
                            .map(|c| (r.finished_at, build::fill_ratio(r.unique_prefixes, Some(c))))
                    })
                    .collect()
            })
        };
        // Worked out under the lock, as the charts are drawn.
        let Ok(mut kept) = self.fill_history.lock() else {
            return work();
        };
        kept.get_or_insert_with(work).clone()
    }

    /// This builder stands down for the list: another holds its lease and
    /// builds it (a skipped build, which records no history line), so a
    /// gate refusal of this builder's own last attempt no longer stands.
    pub fn stand_down(&self) {
        set(&self.refusal, None);
    }

    /// Calls `f` with the history, oldest first.
    pub fn with_history<T>(&self, f: impl FnOnce(&VecDeque<BuildRecord>) -> T) -> T {
        match self.history.lock() {
            Ok(h) => f(&h.records),
            Err(_) => f(&VecDeque::new()),
        }
    }
}

fn set<T>(cell: &Mutex<T>, value: T) {
    if let Ok(mut held) = cell.lock() {
        *held = value;
    }
}

/// A build's history record: `outcome` as the metrics name it, `version`
/// the one served after it, `sizing` its report's, `refusal` the gate's
/// reason, `error` why it failed, `took` its wall time.
pub struct RecordOf<'a> {
    /// When it finished, Unix seconds.
    pub finished_at: u64,
    /// `published`, `unchanged`, `refused`, `failed`, `superseded`.
    pub outcome: &'a str,
    /// The version served after it.
    pub version: Option<u64>,
    /// Its report's sizing, if it got that far.
    pub sizing: Option<&'a Sizing>,
    /// The refusal, for `refused`.
    pub refusal: Option<String>,
    /// The error, for other failures.
    pub error: Option<String>,
    /// Sources read from their last good content.
    pub sources_on_last_good: Vec<String>,
    /// Sources that failed with no usable last good content.
    pub sources_failed: Vec<String>,
    /// Wall time of the attempt.
    pub took: Duration,
}

impl RecordOf<'_> {
    /// The record, with the capacity of its filter under `profile`.
    pub fn record(self, profile: &ListProfile) -> BuildRecord {
        let s = self.sizing;
        BuildRecord {
            finished_at: self.finished_at,
            outcome: self.outcome.to_owned(),
            version: self.version,
            entries: s.map_or(0, |s| s.entries),
            unique_prefixes: s.map_or(0, |s| s.unique_keys),
            measured_fpr: s.map_or(0.0, |s| s.measured_fpr),
            theoretical_fpr: s.map_or(0.0, |s| s.theoretical_fpr),
            duration_ms: self.took.as_millis() as u64,
            snapshot_bytes: s.map_or(0, |s| s.snapshot_bytes),
            filter_kind: s.map(|s| s.filter_kind.clone()).unwrap_or_default(),
            bits_per_key: s.map_or(0.0, |s| s.bits_per_key),
            capacity: s.and_then(|s| {
                build::capacity(s.theoretical_fpr, key_bits(s.key_bits), profile.target_per_1000)
            }),
            refusal: self.refusal,
            error: self.error,
            sources_on_last_good: self.sources_on_last_good,
            sources_failed: self.sources_failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> ListProfile {
        ListProfile::new("0 0,30 * * * *", 2.0, 10.0, 1000.0, 4096, 64, 1_800_000_000)
    }

    /// A build that read its sources (it has a report, so a filter kind).
    fn record(outcome: &str, refusal: Option<&str>, on_last_good: &[&str]) -> BuildRecord {
        BuildRecord {
            filter_kind: "binary_fuse8".to_owned(),
            ..unread(outcome, refusal, on_last_good)
        }
    }

    /// A build that ended before a report (no source read).
    fn unread(outcome: &str, refusal: Option<&str>, on_last_good: &[&str]) -> BuildRecord {
        RecordOf {
            finished_at: 1_800_000_000,
            outcome,
            version: Some(7),
            sizing: None,
            refusal: refusal.map(str::to_owned),
            error: None,
            sources_on_last_good: on_last_good.iter().map(|s| (*s).to_owned()).collect(),
            sources_failed: Vec::new(),
            took: Duration::from_millis(1500),
        }
        .record(&profile())
    }

    #[test]
    fn the_interval_is_between_the_next_two_firings() {
        assert_eq!(profile().build_interval, Some(Duration::from_secs(1800)));
        assert_eq!(
            build_interval("0 0 3 * * *", 1_800_000_000),
            Some(Duration::from_secs(86_400))
        );
    }

    #[test]
    fn a_refusal_stands_until_a_build_publishes_and_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let watch = ListWatch::open(profile(), Some(dir.path()), "phishing");
        watch.record(record("published", None, &[]));
        assert_eq!(watch.standing(), (false, 0));
        watch.record(record("refused", Some("max_shrink: 1 entries"), &["a.txt"]));
        // A failure says nothing of the gates: the refusal stands.
        watch.record(record("failed", None, &["a.txt"]));
        assert_eq!(watch.standing(), (true, 1));
        // One that read no source says nothing of them either.
        watch.record(unread("failed", None, &[]));
        assert_eq!(watch.standing(), (true, 1));
        drop(watch);
        let restarted = ListWatch::open(profile(), Some(dir.path()), "phishing");
        assert_eq!(restarted.standing(), (true, 1));
        assert_eq!(
            restarted.refusal.lock().unwrap().as_deref(),
            Some("max_shrink: 1 entries")
        );
        let outcomes: Vec<String> = restarted.with_history(|h| h.iter().map(|r| r.outcome.clone()).collect());
        assert_eq!(outcomes, ["published", "refused", "failed", "failed"]);
        restarted.record(record("unchanged", None, &[]));
        assert_eq!(restarted.standing(), (false, 0));
        assert_eq!(
            restarted.with_history(|h| h.back().map(|r| r.duration_ms)),
            Some(1500)
        );
        // A build that failed reading its sources (one failed with nothing
        // to fall back to) says which others were on last good content,
        // here and after a restart: none, then one.
        restarted.record(record(
            "refused",
            Some("max_shrink: 1 entries"),
            &["a.txt", "c.txt"],
        ));
        assert_eq!(restarted.standing(), (true, 2));
        let failed_read = |on_last_good: &[&str]| BuildRecord {
            sources_failed: vec!["a.txt".to_owned()],
            ..unread("failed", None, on_last_good)
        };
        restarted.record(failed_read(&[]));
        assert_eq!(restarted.standing(), (true, 0));
        restarted.record(failed_read(&["c.txt"]));
        assert_eq!(restarted.standing(), (true, 1));
        drop(restarted);
        let again = ListWatch::open(profile(), Some(dir.path()), "phishing");
        assert_eq!(again.standing(), (true, 1));
        assert_eq!(
            again.with_history(|h| h.back().map(|r| r.sources_failed.clone())),
            Some(vec!["a.txt".to_owned()])
        );
    }

    #[test]
    fn a_refusal_stands_down_when_another_builder_builds_the_list() {
        let watch = ListWatch::open(profile(), None, "phishing");
        watch.record(record("refused", Some("max_shrink: 1 entries"), &[]));
        assert_eq!(watch.standing(), (true, 0));
        // Another builder published a newer version first.
        watch.record(record("superseded", None, &[]));
        assert_eq!(watch.standing(), (false, 0));
        watch.record(record("refused", Some("max_shrink: 1 entries"), &[]));
        // Another builder holds the lease: this one skips, and stands down.
        watch.stand_down();
        assert_eq!(watch.standing(), (false, 0));
    }

    #[test]
    fn charts_are_drawn_again_only_after_a_build() {
        let watch = ListWatch::open(profile(), None, "phishing");
        let draws = std::cell::Cell::new(0);
        let draw = |h: &VecDeque<BuildRecord>| {
            draws.set(draws.get() + 1);
            h.len().to_string()
        };
        assert_eq!(&*watch.charts(draw), "0");
        assert_eq!(&*watch.charts(draw), "0");
        watch.record(record("published", None, &[]));
        assert_eq!(&*watch.charts(draw), "1");
        assert_eq!(draws.get(), 2);
    }

    #[test]
    fn the_fill_history_follows_each_build() {
        let watch = ListWatch::open(profile(), None, "phishing");
        let sized = |outcome: &str, unique_prefixes: u64| BuildRecord {
            unique_prefixes,
            capacity: Some(1_000),
            ..record(outcome, None, &[])
        };
        assert!(watch.fill_history().is_empty());
        watch.record(sized("published", 500));
        assert_eq!(&*watch.fill_history(), [(1_800_000_000, 0.5)]);
        // Only builds that published or renewed the list count.
        watch.record(sized("refused", 900));
        watch.record(sized("unchanged", 250));
        let fills: Vec<f64> = watch.fill_history().iter().map(|f| f.1).collect();
        assert_eq!(fills, [0.5, 0.25]);
    }

    #[test]
    fn the_profile_parses_its_schedule_once_and_goes_stale_as_the_schedule_says() {
        let fresh_at = 1_800_000_000 + 60;
        assert_eq!(
            profile().overdue_at(fresh_at),
            overdue_at("0 0,30 * * * *", fresh_at)
        );
        assert_eq!(profile().overdue_at(fresh_at), Some(1_800_000_000 + 3600));
        let unparsable = ListProfile::new("every hour", 2.0, 10.0, 1000.0, 4096, 64, 1_800_000_000);
        assert_eq!(unparsable.overdue_at(fresh_at), None);
        assert_eq!(unparsable.build_interval, None);
    }
}
