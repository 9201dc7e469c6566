//! The checked-in fixtures (`tests/fixtures`, license notes in its README).

use std::path::{Path, PathBuf};

use blocksieve_publisher::{SourceConfig, SourceFormat};

/// The directory of the checked-in fixtures (`tests/fixtures`).
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Reads a fixture's non-empty, non-comment lines.
pub fn fixture_lines(name: &str) -> Vec<String> {
    let bytes = std::fs::read(fixtures().join(name)).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// `fixtures/<name>`'s lines written to `dir/feed.txt`, one per line: a
/// feed file a test can change; returns its path.
///
/// # Panics
///
/// When the file cannot be written.
pub fn fixture_feed(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let path = dir.join("feed.txt");
    std::fs::write(&path, fixture_lines(name).join("\n") + "\n").expect("write the feed");
    path
}

/// Adds `line` to the end of the feed file at `path` (ending in a line
/// feed), as a maintainer's feed grows between two builds.
///
/// # Panics
///
/// When the file cannot be read or written.
pub fn append_line(path: &std::path::Path, line: &str) {
    let mut text = std::fs::read_to_string(path).expect("read the feed");
    text.push_str(line);
    text.push('\n');
    std::fs::write(path, text).expect("write the feed");
}

/// A source reading `fixtures/<name>` in `format`.
pub fn fixture_source(name: &str, format: SourceFormat) -> SourceConfig {
    SourceConfig::file(fixtures().join(name), format)
}
