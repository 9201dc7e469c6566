//! Checks every entry of a real feed as Chromium serializes it: what a user
//! who visits the entry's URL holds must hit what its line publishes
//! (`blocksieve_tests::browser_forms`).
//!
//! ```text
//! cargo run --release -p blocksieve-tests --example browser_forms -- \
//!     FEED FORMAT [--differing OUT.jsonl]
//! ```
//!
//! Needs Node.js, Chromium and the extension test's npm packages (`npm ci`
//! in `bindings/wasm/extension/test`): the forms are made by
//! `tests/browser-forms/serialize.mjs` in a headless Chromium page. Line
//! formats only (not `json`). A `.gz` feed is read gunzipped. Entries whose
//! text is not UTF-8 are left out (a browser holds them percent-escaped;
//! `feed_check` checks those). With `--differing`, every entry Chromium
//! wrote otherwise than the feed (beyond `http://` put before a host and
//! the `/` after it) is written there as a [`BrowserForm`]: the pool
//! `tests/fixtures/browser-forms.jsonl` was sampled from.
//!
//! Exits 1 when an entry's browser form misses what its line publishes, 2
//! when the check could not run, else 0.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use blocksieve_publisher::internal::sources::{EntryOutcome, feed_lines, read_line};
use blocksieve_tests::browser_forms::{BrowserForm, check, format_of};
use blocksieve_tests::feed_check::{BoxError, read_feed};
use serde::Deserialize;

#[derive(Deserialize)]
struct Answer {
    k: usize,
    href: Option<String>,
    error: Option<String>,
}

fn run(feed: &Path, format_name: &str, differing: Option<PathBuf>) -> Result<bool, BoxError> {
    let format = format_of(format_name)?;
    let bytes = read_feed(feed)?;
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut not_utf8 = 0u64;
    for line in feed_lines(&bytes) {
        for entry in read_line(format, line).entries {
            let EntryOutcome::Accepted(readings) = entry else {
                continue;
            };
            for reading in readings {
                match (std::str::from_utf8(line), String::from_utf8(reading.text)) {
                    (Ok(line), Ok(text)) => entries.push((line.to_owned(), text)),
                    _ => not_utf8 += 1,
                }
            }
        }
    }
    let dir = tempfile::tempdir()?;
    let (input, output) = (dir.path().join("entries.jsonl"), dir.path().join("forms.jsonl"));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&input)?);
    for (k, (_, text)) in entries.iter().enumerate() {
        writeln!(file, "{}", serde_json::json!({ "k": k, "text": text }))?;
    }
    file.flush()?;
    drop(file);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser-forms/serialize.mjs");
    let status = Command::new("node")
        .arg(&script)
        .arg(&input)
        .arg(&output)
        .status()?;
    if !status.success() {
        return Err(format!("{} failed: {status}", script.display()).into());
    }
    let mut out = match differing {
        Some(path) => Some(std::io::BufWriter::new(std::fs::File::create(path)?)),
        None => None,
    };
    let (mut matched, mut changed, mut refused, mut misses) = (0u64, 0u64, 0u64, 0u64);
    for line in std::fs::read_to_string(&output)?.lines() {
        let answer: Answer = serde_json::from_str(line)?;
        let (line, text) = entries.get(answer.k).ok_or("an answer for no entry")?;
        let Some(href) = answer.href else {
            refused += 1;
            println!("browser refuses {text:?}: {}", answer.error.unwrap_or_default());
            continue;
        };
        let form = BrowserForm {
            format: format_name.to_owned(),
            line: line.clone(),
            href,
        };
        let with_scheme = if text.contains("://") {
            text.clone()
        } else {
            format!("http://{text}")
        };
        if form.href != with_scheme && form.href != format!("{with_scheme}/") {
            changed += 1;
            if let Some(out) = out.as_mut() {
                writeln!(out, "{}", serde_json::to_string(&form)?)?;
            }
        }
        match check(&form) {
            Ok(()) => matched += 1,
            Err(e) => {
                misses += 1;
                println!("MISS {e}");
            }
        }
    }
    if let Some(mut out) = out {
        out.flush()?;
    }
    println!(
        "{}: {} entries ({not_utf8} not UTF-8, left out); Chromium wrote {changed} otherwise than the feed, refused {refused}; \
         {matched} hit what their line publishes, {misses} missed",
        feed.display(),
        entries.len()
    );
    Ok(misses == 0)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(feed), Some(format)) = (args.next(), args.next()) else {
        eprintln!("usage: browser_forms FEED FORMAT [--differing OUT.jsonl]");
        return ExitCode::from(2);
    };
    let differing = match (args.next().as_deref(), args.next()) {
        (Some("--differing"), Some(out)) => Some(PathBuf::from(out)),
        (None, _) => None,
        _ => {
            eprintln!("usage: browser_forms FEED FORMAT [--differing OUT.jsonl]");
            return ExitCode::from(2);
        }
    };
    match run(Path::new(&feed), &format, differing) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("FAILED");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("browser_forms: {e}");
            ExitCode::from(2)
        }
    }
}
