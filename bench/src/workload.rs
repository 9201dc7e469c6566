//! What the measurements run on: the shared data directory, the real URLs
//! checked, and the published snapshot with its key.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use blocksieve_format::{SigningKey, SnapshotHeader, parse_header_unverified};

/// The shared data directory: `BLOCKSIEVE_DATA`, else `../shared/data`
/// beside the repository.
pub(crate) fn data_dir() -> PathBuf {
    std::env::var_os("BLOCKSIEVE_DATA").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"),
        PathBuf::from,
    )
}

/// Lines of a text file, trimmed, without blanks and `#` comments; invalid
/// UTF-8 is replaced.
fn lines(path: &Path) -> anyhow::Result<Vec<String>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect())
}

/// `count` lines spread evenly over `all`.
fn spread(all: Vec<String>, count: usize) -> Vec<String> {
    let step = (all.len() / count).max(1);
    all.into_iter().step_by(step).take(count).collect()
}

/// The URLs the agent checks, the same set as `agent/benches/lookup.rs`:
/// all of `benign/legit-urls.txt` (5,715), then 5,777 phishing URLs
/// (`feeds/phishunt-urls.txt` whole, 2,500 evenly spaced lines from each of
/// `phishing-links-{active,inactive}-2020.txt`), interleaved so that every
/// stretch of checks sees both.
///
/// # Errors
///
/// When a file is missing or unreadable.
pub(crate) fn urls(data: &Path) -> anyhow::Result<Vec<String>> {
    let benign = lines(&data.join("benign/legit-urls.txt"))?;
    let mut phishing = lines(&data.join("feeds/phishunt-urls.txt"))?;
    phishing.extend(spread(
        lines(&data.join("feeds/phishing-links-active-2020.txt"))?,
        2_500,
    ));
    phishing.extend(spread(
        lines(&data.join("feeds/phishing-links-inactive-2020.txt"))?,
        2_500,
    ));
    let mut out = Vec::with_capacity(benign.len() + phishing.len());
    let (mut b, mut p) = (benign.into_iter(), phishing.into_iter());
    loop {
        match (b.next(), p.next()) {
            (None, None) => break,
            (x, y) => out.extend(x.into_iter().chain(y)),
        }
    }
    Ok(out)
}

/// A snapshot as the publisher wrote it, with the key that signed it.
pub(crate) struct Published {
    pub(crate) bytes: Vec<u8>,
    pub(crate) header: SnapshotHeader,
    pub(crate) key: SigningKey,
}

impl Published {
    /// Reads the snapshot file and the publisher's `signing.key` (base64 of
    /// the secret seed).
    ///
    /// # Errors
    ///
    /// When either file is unreadable or malformed.
    pub(crate) fn read(snapshot: &Path, signing_key: &Path) -> anyhow::Result<Self> {
        let bytes = std::fs::read(snapshot).with_context(|| format!("reading {}", snapshot.display()))?;
        let header = parse_header_unverified(&bytes).context("snapshot header")?;
        let text = std::fs::read_to_string(signing_key)
            .with_context(|| format!("reading {}", signing_key.display()))?;
        let key = SigningKey::from_base64(text.trim()).context("signing key")?;
        Ok(Self { bytes, header, key })
    }
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`), where there
/// is one.
pub(crate) fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
