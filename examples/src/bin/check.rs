//! Checks URLs against a running blocksieve publisher with the agent.
//!
//! ```text
//! cargo run -p blocksieve-examples --bin check -- --publisher http://127.0.0.1:8080 http://evil.example/ https://example.com/
//! printf '%s\n' http://a.example/ http://b.example/ | cargo run -p blocksieve-examples --bin check
//! ```
//!
//! With no URL arguments, URLs are read from stdin, one per line. Prints one
//! line per URL — `unsafe <list> <url>`, `safe <url>`, `invalid <url> <reason>`
//! or, when the check itself failed, `error <url> <reason>` — then a summary
//! on stderr. Exits with 1 when any URL is unsafe, 2 on errors (publisher
//! unreachable, a failed full-hash request, …), else 0.
//!
//! Options: `--publisher URL` (default `http://127.0.0.1:8080`); `--list NAME`,
//! repeatable (default: every list the publisher has a snapshot of);
//! `--key BASE64_OR_FILE`, repeatable (default: `./blocksieve-data/public.key`,
//! which the publisher writes on first start).

use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use blocksieve_agent::{Agent, Error, Verdict};
use blocksieve_format::TrustedKey;
use clap::Parser;

/// Where the publisher keeps its public key, relative to its working
/// directory; the default when no `--key` is given.
const DEFAULT_KEY_FILE: &str = "blocksieve-data/public.key";

/// Check URLs against a blocksieve publisher's threat lists.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Base URL of the publisher.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080")]
    publisher: String,

    /// A threat list to check against (repeatable). Default: every list the
    /// publisher has a snapshot of.
    #[arg(long = "list", value_name = "NAME")]
    lists: Vec<String>,

    /// A trusted publisher public key: base64, or a file holding it
    /// (repeatable). Default: ./blocksieve-data/public.key.
    #[arg(long = "key", value_name = "BASE64_OR_FILE")]
    keys: Vec<String>,

    /// URLs to check. Default: read from stdin, one per line.
    #[arg(value_name = "URL")]
    urls: Vec<String>,
}

/// What happened to the URLs checked so far.
#[derive(Debug, Default)]
struct Tally {
    urls: u64,
    unsafe_: u64,
    safe: u64,
    invalid: u64,
    failed: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("check: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let keys = trusted_keys(&args.keys)?;
    let mut builder = Agent::builder(&args.publisher).trusted_keys(keys);
    let lists = if args.lists.is_empty() {
        let served = builder
            .fetch_publisher_lists()
            .await
            .with_context(|| format!("asking {} for its lists", args.publisher))?;
        let ready: Vec<String> = served
            .lists
            .into_iter()
            .filter(|l| l.snapshot.is_some())
            .map(|l| l.name)
            .collect();
        if ready.is_empty() {
            bail!("{} has no list with a snapshot yet", args.publisher);
        }
        ready
    } else {
        args.lists
    };
    builder = builder.lists(lists);
    let agent = builder.build().context("configuring the agent")?;
    let report = agent.update().await.context("loading snapshots")?;
    for (list, error) in report.failures() {
        eprintln!("check: warning: list {list} not updated, using the snapshot in use: {error}");
    }

    let mut tally = Tally::default();
    if args.urls.is_empty() {
        for line in std::io::stdin().lock().lines() {
            let line = line.context("reading URLs from stdin")?;
            let url = line.trim();
            if !url.is_empty() {
                check(&agent, url, &mut tally).await;
            }
        }
    } else {
        for url in &args.urls {
            check(&agent, url, &mut tally).await;
        }
    }

    let failed = if tally.failed > 0 {
        format!(", {} failed", tally.failed)
    } else {
        String::new()
    };
    eprintln!(
        "{} urls: {} unsafe, {} safe, {} invalid{failed}; {} full-hash requests",
        tally.urls,
        tally.unsafe_,
        tally.safe,
        tally.invalid,
        agent.stats().full_hash_requests
    );
    Ok(if tally.failed > 0 {
        ExitCode::from(2)
    } else if tally.unsafe_ > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Checks one URL and prints its line.
async fn check(agent: &Agent, url: &str, tally: &mut Tally) {
    tally.urls += 1;
    match agent.check_url(url).await {
        Ok(Verdict::Unsafe { list, .. }) => {
            tally.unsafe_ += 1;
            println!("unsafe {list} {url}");
        }
        Ok(Verdict::Safe) => {
            tally.safe += 1;
            println!("safe {url}");
        }
        Ok(other) => {
            tally.failed += 1;
            println!("error {url} unknown verdict {other:?}");
        }
        Err(Error::InvalidUrl { reason }) => {
            tally.invalid += 1;
            println!("invalid {url} {reason}");
        }
        Err(e) => {
            tally.failed += 1;
            println!("error {url} {e}");
        }
    }
}

/// The keys from `--key` values (base64, or a file holding it), or from the
/// publisher's default key file.
fn trusted_keys(values: &[String]) -> anyhow::Result<Vec<TrustedKey>> {
    if values.is_empty() {
        if !Path::new(DEFAULT_KEY_FILE).is_file() {
            bail!(
                "no trusted key: pass --key BASE64_OR_FILE (the publisher writes its public key to \
                 {DEFAULT_KEY_FILE} on first start)"
            );
        }
        return Ok(vec![key_from(DEFAULT_KEY_FILE)?]);
    }
    values.iter().map(|v| key_from(v)).collect()
}

fn key_from(value: &str) -> anyhow::Result<TrustedKey> {
    if Path::new(value).is_file() {
        let text = std::fs::read_to_string(value).with_context(|| format!("reading key file {value}"))?;
        TrustedKey::from_base64(text.trim()).with_context(|| format!("key file {value}"))
    } else {
        TrustedKey::from_base64(value.trim()).context("--key is neither an existing file nor a base64 key")
    }
}
