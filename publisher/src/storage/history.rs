//! A list's build history in the data directory: one JSON line per build
//! ([`BuildRecord`]), appended as each build finishes, at
//! `<data_dir>/history/<list>.jsonl`.
//!
//! The file is bounded: once it holds twice the records kept
//! ([`HISTORY_LIMIT`]), it is rewritten (atomically) with the newest
//! `limit`. It is advisory, not a commitment: an append is not fsynced, so
//! a crash may cut the last line, and a line that does not parse (cut, or
//! damaged) is skipped with a warning when the history is read; nothing
//! about it stops the publisher.

use std::collections::VecDeque;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use blocksieve_format::api::BuildRecord;

/// The most builds kept per list: at one build every 30 minutes, three
/// weeks; at 1,000 points a chart still draws in a pixel column per few
/// points.
pub const HISTORY_LIMIT: usize = 1_000;

/// The largest history file read, in bytes: far above `2 ×` the limit's
/// lines (a line is about 400 bytes); a larger one is read from its end.
const MAX_HISTORY_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// One list's history file, and how many lines it holds.
#[derive(Debug)]
pub struct HistoryFile {
    /// `None`: history kept in memory only (a replica, which writes
    /// nothing to its data directory).
    path: Option<PathBuf>,
    /// Records kept.
    limit: usize,
    /// Lines in the file, counted when it was read and on every append.
    lines: usize,
    /// Whether the file ends in a cut line (no newline): the next append
    /// starts a new line first.
    cut: bool,
}

impl HistoryFile {
    /// The history of `list` in `data_dir` (`None`: in memory only): the
    /// file, and its newest `limit` records that parse, oldest first. A
    /// missing or unreadable file is an empty history; a line that does
    /// not parse is skipped (one warning says how many).
    pub fn open(data_dir: Option<&Path>, list: &str, limit: usize) -> (Self, VecDeque<BuildRecord>) {
        let path = data_dir.map(|d| d.join("history").join(format!("{list}.jsonl")));
        if let Some(path) = &path {
            // What a rewrite cut short by a crash left ([`super::write_atomic`]'s
            // temporary file; one publisher at a time holds the directory).
            let mut tmp = path.clone().into_os_string();
            tmp.push(super::TMP_SUFFIX);
            let _ = fs::remove_file(tmp);
        }
        let (records, lines, cut) = path
            .as_deref()
            .map_or((VecDeque::new(), 0, false), |p| read(p, list, limit));
        let file = Self {
            path,
            limit,
            lines,
            cut,
        };
        (file, records)
    }

    /// Appends `record`, whose list now keeps `kept` (newest last, `record`
    /// among them); rewrites the file with `kept` once it holds twice the
    /// limit. A failure is logged: the history is in memory still.
    pub fn append(&mut self, record: &BuildRecord, kept: &VecDeque<BuildRecord>) {
        let Some(path) = &self.path else { return };
        let written = if self.lines + 1 >= 2 * self.limit.max(1) {
            let text: String = kept.iter().filter_map(line).collect();
            let written = path
                .parent()
                .map_or(Ok(()), |dir| {
                    fs::create_dir_all(dir).map_err(super::Error::storage(dir))
                })
                .and_then(|()| super::write_atomic(path, text.as_bytes()));
            written
                .map(|()| self.lines = kept.len())
                .map_err(|e| e.to_string())
        } else {
            append_line(path, record, std::mem::take(&mut self.cut)).map(|()| self.lines += 1)
        };
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "cannot write the build history; it is kept in memory");
        }
    }
}

/// `record` as one JSON line.
fn line(record: &BuildRecord) -> Option<String> {
    serde_json::to_string(record).ok().map(|l| l + "\n")
}

fn append_line(path: &Path, record: &BuildRecord, after_cut: bool) -> Result<(), String> {
    let mut text = line(record).ok_or("a record that is not JSON")?;
    if after_cut {
        text.insert(0, '\n');
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    // One write of a whole line, appended: a reader sees whole lines, and a
    // crash cuts at most the last one.
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| e.to_string())
}

/// Whether `x` is a probability (finite, 0 to 1).
fn is_rate(x: f64) -> bool {
    (0.0..=1.0).contains(&x)
}

/// The newest `limit` records of the file at `path` that parse, its
/// lines, and whether its last line is cut.
fn read(path: &Path, list: &str, limit: usize) -> (VecDeque<BuildRecord>, usize, bool) {
    let bytes = match read_tail(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (VecDeque::new(), 0, false),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot read the build history; starting a new one");
            return (VecDeque::new(), 0, false);
        }
    };
    let cut = bytes.last().is_some_and(|&b| b != b'\n');
    let mut records = VecDeque::with_capacity(limit.min(HISTORY_LIMIT));
    let (mut lines, mut skipped) = (0, 0);
    for raw in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        lines += 1;
        match serde_json::from_slice::<BuildRecord>(raw) {
            // Rates are probabilities: a line edited or damaged into one
            // that is not is skipped like a line that does not parse.
            Ok(record) if !is_rate(record.measured_fpr) || !is_rate(record.theoretical_fpr) => skipped += 1,
            Ok(record) => {
                if records.len() == limit {
                    records.pop_front();
                }
                if limit > 0 {
                    records.push_back(record);
                }
            }
            Err(_) => skipped += 1,
        }
    }
    if skipped > 0 {
        tracing::warn!(%list, path = %path.display(), skipped, "build history lines that do not parse, or hold rates that are not probabilities, were skipped");
    }
    (records, lines, cut)
}

/// The file's bytes, or its last [`MAX_HISTORY_FILE_BYTES`] (the first
/// line then cut, and skipped).
fn read_tail(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::{Read as _, Seek as _};
    let mut file = fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len > MAX_HISTORY_FILE_BYTES {
        file.seek(std::io::SeekFrom::Start(len - MAX_HISTORY_FILE_BYTES))?;
    }
    let mut bytes = Vec::new();
    file.take(MAX_HISTORY_FILE_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(at: u64) -> BuildRecord {
        BuildRecord {
            finished_at: at,
            outcome: "published".to_owned(),
            version: Some(at),
            entries: at * 10,
            unique_prefixes: at * 10,
            measured_fpr: 1e-5,
            theoretical_fpr: 1.5e-5,
            duration_ms: 12,
            snapshot_bytes: 1000,
            filter_kind: "binary_fuse16".to_owned(),
            bits_per_key: 18.5,
            capacity: Some(9_294_018),
            refusal: None,
            error: None,
            sources_on_last_good: Vec::new(),
            sources_failed: Vec::new(),
        }
    }

    /// Opens, appends `records` as the publisher does (kept bounded), and
    /// returns what is kept in memory.
    fn append_all(dir: &Path, limit: usize, ats: impl IntoIterator<Item = u64>) -> VecDeque<BuildRecord> {
        let (mut file, mut kept) = HistoryFile::open(Some(dir), "phishing", limit);
        for at in ats {
            let r = record(at);
            if kept.len() == limit {
                kept.pop_front();
            }
            kept.push_back(r.clone());
            file.append(&r, &kept);
        }
        kept
    }

    fn history_path(dir: &Path) -> PathBuf {
        dir.join("history/phishing.jsonl")
    }

    #[test]
    fn the_history_survives_a_restart_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let kept = append_all(dir.path(), 5, 1..=3);
        let (_, read) = HistoryFile::open(Some(dir.path()), "phishing", 5);
        assert_eq!(read, kept);
        // Appended over two restarts, far past the limit: the newest 5.
        append_all(dir.path(), 5, 4..=20);
        let kept = append_all(dir.path(), 5, 21..=23);
        let (file, read) = HistoryFile::open(Some(dir.path()), "phishing", 5);
        assert_eq!(read, kept);
        let ats: Vec<u64> = read.iter().map(|r| r.finished_at).collect();
        assert_eq!(ats, [19, 20, 21, 22, 23]);
        // The file itself never holds more than twice the limit.
        assert!(file.lines < 10, "{} lines", file.lines);
        let text = fs::read_to_string(history_path(dir.path())).unwrap();
        assert!(text.lines().count() < 10, "{text}");
    }

    #[test]
    fn a_rewrite_cut_short_by_a_crash_leaves_nothing_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let kept = append_all(dir.path(), 5, 1..=3);
        let tmp = dir.path().join("history/phishing.jsonl.tmp");
        fs::write(&tmp, "{\"half\":").unwrap();
        let (_, read) = HistoryFile::open(Some(dir.path()), "phishing", 5);
        assert_eq!(read, kept);
        assert!(!tmp.exists());
    }

    #[test]
    fn damaged_and_cut_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        append_all(dir.path(), 10, 1..=2);
        let path = history_path(dir.path());
        let mut text = fs::read(&path).unwrap();
        text.extend_from_slice(b"not json\n\xff\xfe\n{\"finished_at\":3}\n");
        // Rates that are no probabilities (a status page computing the
        // gate's bound from -1e12 would count forever).
        for (measured, theoretical) in [(1e-5, -1e12), (2.0, 1e-5), (1e-5, f64::MAX)] {
            let r = BuildRecord {
                measured_fpr: measured,
                theoretical_fpr: theoretical,
                ..record(3)
            };
            text.extend_from_slice(&line(&r).unwrap().into_bytes());
        }
        text.extend_from_slice(&line(&record(4)).unwrap().into_bytes());
        // A crash in the middle of the last append.
        text.extend_from_slice(&line(&record(5)).unwrap().as_bytes()[..40]);
        fs::write(&path, text).unwrap();
        let (_, read) = HistoryFile::open(Some(dir.path()), "phishing", 10);
        let ats: Vec<u64> = read.iter().map(|r| r.finished_at).collect();
        assert_eq!(ats, [1, 2, 4]);
        // Appending after a cut line starts a new line: the cut one stays
        // skipped, the new one reads.
        append_all(dir.path(), 10, [6]);
        let (_, read) = HistoryFile::open(Some(dir.path()), "phishing", 10);
        let ats: Vec<u64> = read.iter().map(|r| r.finished_at).collect();
        assert_eq!(ats, [1, 2, 4, 6]);
    }

    #[test]
    fn a_record_from_an_older_publisher_reads_with_defaults() {
        let old: BuildRecord = serde_json::from_str(r#"{"finished_at":7,"outcome":"failed"}"#).unwrap();
        assert_eq!(old.version, None);
        assert_eq!(old.entries, 0);
        assert!(old.sources_on_last_good.is_empty());
    }

    #[test]
    fn in_memory_history_writes_nothing() {
        let (mut file, kept) = HistoryFile::open(None, "phishing", 5);
        assert!(kept.is_empty());
        file.append(&record(1), &kept);
    }
}
