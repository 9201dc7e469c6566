//! Pushes every entry of every threat feed through the canonicalizer and
//! prints, per file, how many were valid and why the others were not.
//!
//! ```sh
//! cargo run --release -p blocksieve-format --example feed_sweep            # ../shared/data/feeds
//! cargo run --release -p blocksieve-format --example feed_sweep -- DIR     # any directory
//! ```
//!
//! Without an argument the directory is `$BLOCKSIEVE_SHARED/data/feeds`, else
//! `../shared/data/feeds` (the project's shared data, not in the repository).
//! Entries are read by format, decided from the file name:
//!
//! - `*.json` (MetaMask `eth-phishing-detect` config): each string of the
//!   `blacklist` array is a domain;
//! - `*hosts*`: a hosts file, `address name [name...]` with `#` comments;
//!   each name is an entry (the file's own `localhost`-style boilerplate is
//!   skipped, as the publisher does);
//! - anything else (`.gz` decompressed): one URL or domain per line, blank
//!   lines and `#` / `!` comment lines skipped.
//!
//! Each entry goes through [`canonicalize`], [`CanonicalUrl::expressions`] and
//! [`Expression::full_hash`], and through the fuzz target's invariant checks
//! (`blocksieve_format::fuzzing::check_invariants`: the same result as the
//! canonicalization steps taken one by one, printable escaped output,
//! idempotence, exactly the expressions of the v4 definition). A panic
//! anywhere aborts the sweep; an invariant violation is counted and the first
//! few are printed. The exit code is 1 when any invariant failed. The
//! "common case" column counts the entries that `canonicalize` took in its
//! one-pass common case rather than step by step, and "as written" those
//! that are canonical as written, whose expressions `full_hashes` hashes in
//! place (no copy).
//!
//! [`CanonicalUrl::expressions`]: blocksieve_format::CanonicalUrl::expressions
//! [`Expression::full_hash`]: blocksieve_format::Expression::full_hash

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use blocksieve_format::fuzzing::check_invariants;
use blocksieve_format::{CanonError, canonicalize};

/// Hosts-file names that are the file's own boilerplate, not threats.
const HOSTS_BOILERPLATE: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "local",
    "broadcasthost",
    "ip6-localhost",
    "ip6-loopback",
    "ip6-localnet",
    "ip6-mcastprefix",
    "ip6-allnodes",
    "ip6-allrouters",
    "ip6-allhosts",
    "0.0.0.0",
];

/// What sweeping one file found.
#[derive(Debug, Default)]
struct Sweep {
    /// Lines in the file (for JSON: entries of the array).
    lines: u64,
    /// Entries: URLs, domains or host names (a hosts line can hold several).
    entries: u64,
    /// Entries that canonicalized to a URL with a host.
    valid: u64,
    /// Expressions generated (and hashed) from the valid entries.
    expressions: u64,
    /// Entries `canonicalize` took in its one-pass common case.
    common_case: u64,
    /// Entries canonical as written (hashed in place by `full_hashes`).
    as_written: u64,
    /// Invalid entries by [`CanonError`] variant.
    invalid: BTreeMap<&'static str, u64>,
    /// The first few invalid entries with their reason, for the report.
    invalid_samples: Vec<String>,
    /// Entries whose canonical form broke an invariant.
    violations: u64,
    /// The first few violations, for the report.
    violation_samples: Vec<String>,
}

impl Sweep {
    fn entry(&mut self, entry: &[u8]) {
        self.entries += 1;
        self.common_case += u64::from(blocksieve_format::fuzzing::takes_common_case(entry));
        self.as_written += u64::from(blocksieve_format::fuzzing::canonical_as_written(entry));
        match canonicalize(entry) {
            Ok(url) => {
                self.valid += 1;
                for e in url.expressions() {
                    std::hint::black_box(e.full_hash());
                    self.expressions += 1;
                }
            }
            Err(e) => {
                *self.invalid.entry(reason(&e)).or_default() += 1;
                if self.invalid_samples.len() < 5 {
                    let shown: String = String::from_utf8_lossy(entry).chars().take(120).collect();
                    self.invalid_samples.push(format!("{}: {shown:?}", reason(&e)));
                }
            }
        }
        if let Err(broken) = check_invariants(entry) {
            self.violations += 1;
            if self.violation_samples.len() < 5 {
                self.violation_samples.push(broken);
            }
        }
    }
}

/// The variant name of a canonicalization error: the reason column.
fn reason(e: &CanonError) -> &'static str {
    match e {
        CanonError::Empty => "Empty",
        CanonError::TooLong { .. } => "TooLong",
        CanonError::NotHierarchical => "NotHierarchical",
        CanonError::RelativeUrl => "RelativeUrl",
        CanonError::EmptyHost => "EmptyHost",
        CanonError::InvalidIpv6 => "InvalidIpv6",
        CanonError::DelimiterInHost { .. } => "DelimiterInHost",
        _ => "Other",
    }
}

/// How a file's entries are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Lines,
    Hosts,
    MetamaskJson,
}

fn layout_of(path: &Path) -> Layout {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.ends_with(".json") {
        Layout::MetamaskJson
    } else if name.contains("hosts") {
        Layout::Hosts
    } else {
        Layout::Lines
    }
}

/// Sweeps one file's bytes (already decompressed).
fn sweep(bytes: &[u8], layout: Layout) -> Result<Sweep, String> {
    let mut s = Sweep::default();
    if layout == Layout::MetamaskJson {
        let json: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("bad JSON: {e}"))?;
        let list = json["blacklist"].as_array().ok_or("no \"blacklist\" array")?;
        for domain in list {
            s.lines += 1;
            match domain.as_str() {
                Some(d) => s.entry(d.as_bytes()),
                None => return Err(format!("blacklist entry is not a string: {domain}")),
            }
        }
        return Ok(s);
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    for raw in body.split(|&b| b == b'\n') {
        s.lines += 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw).trim_ascii();
        if line.is_empty() || line[0] == b'#' || line[0] == b'!' {
            continue;
        }
        match layout {
            Layout::Hosts => {
                let content = line.split(|&b| b == b'#').next().unwrap_or_default();
                let mut fields = content
                    .split(|b| b.is_ascii_whitespace())
                    .filter(|f| !f.is_empty());
                let Some(first) = fields.next() else { continue };
                let is_address =
                    std::str::from_utf8(first).is_ok_and(|a| a.parse::<std::net::IpAddr>().is_ok());
                let names = (!is_address).then_some(first).into_iter().chain(fields);
                for name in names {
                    if !HOSTS_BOILERPLATE
                        .iter()
                        .any(|b| b.as_bytes().eq_ignore_ascii_case(name))
                    {
                        s.entry(name);
                    }
                }
            }
            Layout::Lines | Layout::MetamaskJson => s.entry(line),
        }
    }
    Ok(s)
}

fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let raw = std::fs::read(path)?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..]).read_to_end(&mut out)?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

fn feeds_dir() -> PathBuf {
    if let Some(dir) = std::env::args_os().nth(1) {
        return PathBuf::from(dir);
    }
    match std::env::var_os("BLOCKSIEVE_SHARED") {
        Some(shared) => Path::new(&shared).join("data/feeds"),
        None => PathBuf::from("../shared/data/feeds"),
    }
}

fn main() -> ExitCode {
    let dir = feeds_dir();
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect(),
        Err(e) => {
            eprintln!("cannot read {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    files.sort();
    let reasons = [
        "Empty",
        "TooLong",
        "NotHierarchical",
        "RelativeUrl",
        "EmptyHost",
        "InvalidIpv6",
        "DelimiterInHost",
        "Other",
    ];
    println!(
        "| file | lines | entries | valid | invalid | {} | expressions | common case | as written | invariant violations | seconds |",
        reasons.join(" | ")
    );
    println!("|---|{}", "---:|".repeat(9 + reasons.len()));
    let mut failed = false;
    for path in &files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let started = Instant::now();
        let result = read_file(path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| sweep(&bytes, layout_of(path)));
        let s = match result {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{name}: {e}");
                failed = true;
                continue;
            }
        };
        let invalid: u64 = s.invalid.values().sum();
        let by_reason: Vec<String> = reasons
            .iter()
            .map(|r| s.invalid.get(r).copied().unwrap_or(0).to_string())
            .collect();
        println!(
            "| {name} | {} | {} | {} | {invalid} | {} | {} | {} | {} | {} | {:.1} |",
            s.lines,
            s.entries,
            s.valid,
            by_reason.join(" | "),
            s.expressions,
            s.common_case,
            s.as_written,
            s.violations,
            started.elapsed().as_secs_f64()
        );
        for v in &s.invalid_samples {
            eprintln!("{name}: invalid: {v}");
        }
        for v in &s.violation_samples {
            eprintln!("{name}: invariant broken: {v}");
        }
        failed |= s.violations > 0;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_each_layout() {
        let urls = sweep(
            b"! comment\nhttp://a.com/x\r\n\nmailto:x@y\n/rel\nb.com\n",
            Layout::Lines,
        )
        .unwrap();
        assert_eq!((urls.lines, urls.entries, urls.valid), (6, 4, 2));
        assert_eq!(urls.invalid.get("NotHierarchical"), Some(&1));
        assert_eq!(urls.invalid.get("RelativeUrl"), Some(&1));

        let hosts = sweep(
            b"# c\n0.0.0.0 localhost\n0.0.0.0 a.com b.com # x\nc.com\n",
            Layout::Hosts,
        )
        .unwrap();
        assert_eq!((hosts.entries, hosts.valid, hosts.violations), (3, 3, 0));

        let json = sweep(
            br#"{"blacklist": ["a.com", ""], "whitelist": ["b.com"]}"#,
            Layout::MetamaskJson,
        )
        .unwrap();
        assert_eq!((json.entries, json.valid), (2, 1));
        assert_eq!(json.invalid.get("Empty"), Some(&1));
        assert!(sweep(b"{}", Layout::MetamaskJson).is_err());
    }
}
