//! Publishes one real feed with a real publisher and checks every line of it
//! with a real agent: no false negatives, and every rejection for a reason.
//!
//! ```text
//! cargo run --release -p blocksieve-tests --example feed_check -- \
//!     FEED FORMAT [--benign URLS_FILE] [--out DIR] [--via-delta] [--member PATH]
//! ```
//!
//! `FORMAT` is a source format as in the publisher's configuration (`urls`,
//! `hosts`, `domains`, `adblock-hosts`, `json`, `sha256`); a `.gz` feed is
//! read gunzipped, as the publisher reads it. What is checked is described
//! in `blocksieve_tests::feed_check`. Rejected entries are written, one
//! file per reason, to `DIR` (if given) so that each reason can be read
//! against its lines. With `--benign`, each URL of that file (one per line)
//! is checked too, and every `unsafe` one is printed with the feed line
//! that lists its matching expression.
//!
//! With `--via-delta`, the agent reaches the feed by a delta: the publisher
//! first publishes it without every tenth line, the agent takes that
//! snapshot, then follows the rebuild from the whole feed by one delta
//! before every line is checked (line-based formats only).
//!
//! With `--member`, `FEED` is a tar archive (`.tar` or `.tar.gz`) and the
//! publisher's source reads its file `PATH` (the source's `member`); the
//! line-by-line reading takes that file as the `tar` crate extracts it.
//!
//! Exits 1 when anything did not answer as expected or a count differs, 2
//! when the check could not run, else 0.

use std::path::PathBuf;
use std::process::ExitCode;

use blocksieve_publisher::SourceFormat;
use blocksieve_tests::feed_check::{BoxError, check_feed, check_feed_member, check_feed_via_delta};

struct Args {
    feed: PathBuf,
    format: SourceFormat,
    benign: Option<PathBuf>,
    out: Option<PathBuf>,
    via_delta: bool,
    member: Option<String>,
}

fn parse_args() -> Result<Args, BoxError> {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let (mut benign, mut out, mut via_delta, mut member) = (None, None, false, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--benign" => benign = Some(PathBuf::from(args.next().ok_or("--benign needs a file")?)),
            "--out" => out = Some(PathBuf::from(args.next().ok_or("--out needs a directory")?)),
            "--via-delta" => via_delta = true,
            "--member" => member = Some(args.next().ok_or("--member needs a path")?),
            _ => positional.push(arg),
        }
    }
    let [feed, format] = <[String; 2]>::try_from(positional).map_err(
        |_| "usage: feed_check FEED FORMAT [--benign URLS_FILE] [--out DIR] [--via-delta] [--member PATH]",
    )?;
    let format = serde_json::from_value(serde_json::Value::String(format.clone()))
        .map_err(|e| format!("format {format:?}: {e}"))?;
    Ok(Args {
        feed: PathBuf::from(feed),
        format,
        benign,
        out,
        via_delta,
        member,
    })
}

/// A file name for a rejection reason.
fn slug(reason: &str) -> String {
    let s: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                ' '
            }
        })
        .collect();
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join("-")
        .chars()
        .take(60)
        .collect()
}

async fn run() -> Result<bool, BoxError> {
    let args = parse_args()?;
    let started = std::time::Instant::now();
    let benign: Vec<String> = match &args.benign {
        Some(path) => std::fs::read(path)?
            .split(|&b| b == b'\n')
            .map(|l| String::from_utf8_lossy(l.trim_ascii()).into_owned())
            .filter(|l| !l.is_empty())
            .collect(),
        None => Vec::new(),
    };
    let report = match (&args.member, args.via_delta) {
        (Some(_), true) => return Err("--member and --via-delta do not go together".into()),
        (Some(member), false) => check_feed_member(&args.feed, member, args.format, &benign).await?,
        (None, true) => check_feed_via_delta(&args.feed, args.format, &benign).await?,
        (None, false) => check_feed(&args.feed, args.format, &benign).await?,
    };
    println!("feed {}", args.feed.display());
    print!("{}", report.summary());
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        for (reason, lines) in &report.rejected {
            let mut text = Vec::new();
            for (at, line) in lines {
                text.extend_from_slice(at.as_bytes());
                text.push(b'\t');
                text.extend_from_slice(line);
                text.push(b'\n');
            }
            std::fs::write(out.join(format!("{}.txt", slug(reason))), text)?;
        }
        println!("rejected lines by reason written to {}", out.display());
    }
    println!(
        "{} in {:.1} s",
        if report.passed() { "PASSED" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    Ok(report.passed())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("feed_check: {e}");
            ExitCode::from(2)
        }
    }
}
