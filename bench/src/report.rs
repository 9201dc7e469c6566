//! Table rows and notes in the suite's shared layout: each measurement
//! writes `rows/<N>-<name>.md` (markdown table rows, no header, columns
//! `| # | measurement | measured | reference | ratio | target | met |`) and
//! `notes/<N>-<name>.md` (opening with a `## Row N: …` heading) under the
//! output directory, and `bench/run.sh` puts them together into
//! `BENCHMARKS.md`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;

/// The rows and notes of one measurement step.
pub(crate) struct Report {
    out: PathBuf,
    name: String,
    rows: String,
    notes: String,
}

impl Report {
    /// A report to be written as `<out>/rows/<name>.md` and
    /// `<out>/notes/<name>.md`, the notes under the heading `title`.
    pub(crate) fn new(out: &Path, name: &str, title: &str) -> Self {
        Self {
            out: out.to_owned(),
            name: name.to_owned(),
            rows: String::new(),
            notes: format!("## {title}\n\n"),
        }
    }

    /// One table row.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn row(
        &mut self,
        number: &str,
        measurement: &str,
        measured: &str,
        reference: &str,
        ratio: f64,
        target: &str,
        met: &str,
    ) {
        self.rows.push_str(&format!(
            "| {number} | {measurement} | {measured} | {reference} | {ratio:.2} | {target} | {met} |\n"
        ));
    }

    /// One paragraph of notes.
    pub(crate) fn note(&mut self, text: &str) {
        self.notes.push_str(text.trim_end());
        self.notes.push_str("\n\n");
    }

    /// Writes both files, and prints the rows.
    ///
    /// # Errors
    ///
    /// When a file cannot be written.
    pub(crate) fn write(&self) -> anyhow::Result<()> {
        for (dir, text) in [("rows", &self.rows), ("notes", &self.notes)] {
            let dir = self.out.join(dir);
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let path = dir.join(format!("{}.md", self.name));
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        print!("{}", self.rows);
        Ok(())
    }
}

/// `yes` or `**no**`.
pub(crate) fn met(ok: bool) -> &'static str {
    if ok { "yes" } else { "**no**" }
}

/// A duration with three significant digits in a fitting unit.
pub(crate) fn fmt_duration(d: Duration) -> String {
    fmt_nanos(d.as_secs_f64() * 1e9)
}

/// Nanoseconds with three significant digits in a fitting unit.
pub(crate) fn fmt_nanos(ns: f64) -> String {
    let (value, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let digits = if value < 10.0 {
        2
    } else if value < 100.0 {
        1
    } else {
        0
    };
    format!("{value:.digits$} {unit}")
}

/// A count with thousands separators: `840,032`.
pub(crate) fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in MiB (or KiB below one MiB).
pub(crate) fn fmt_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(fmt_nanos(12.345), "12.3 ns");
        assert_eq!(fmt_nanos(1_234.0), "1.23 µs");
        assert_eq!(fmt_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(fmt_bytes(3 * 1024 * 1024 / 2), "1.50 MiB");
        assert_eq!(fmt_bytes(512), "0.5 KiB");
        assert_eq!(fmt_count(840_032), "840,032");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1_000_000), "1,000,000");
    }
}
