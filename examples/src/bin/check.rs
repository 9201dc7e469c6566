//! Checks URLs against a running blocksieve publisher with the agent.
//!
//! ```text
//! cargo run -p blocksieve-examples --bin check -- --publisher http://127.0.0.1:8080 http://evil.example/ https://example.com/
//! printf '%s\n' http://a.example/ http://b.example/ | cargo run -p blocksieve-examples --bin check
//! cargo run -p blocksieve-examples --bin check -- --cache-dir ./agent-cache --fail-closed --noise 8 http://evil.example/
//! ```
//!
//! With no URL arguments, URLs are read from stdin, one per line, and
//! checked in batches (one full-hash request per batch). Prints one line per
//! URL — `unsafe <list> <url>`, `safe <url>`, `invalid <url> <reason>`,
//! `unverified <url> <reason>` when a prefix hit could not be confirmed (the
//! full-hash request failed), or `error <url> <reason>` — then a summary on
//! stderr. Reading many URLs from stdin with stderr on a terminal, it shows
//! its progress there (URLs checked, their rate, unsafe so far) from the
//! second batch on, and clears it before the summary; piped or redirected,
//! stderr gets the summary alone. Exits with 1 when any URL should be blocked (unsafe, or
//! unverified with `--fail-closed`), else 2 on errors (publisher unreachable
//! without a cached snapshot, an unverified URL under the default fail-open
//! policy, an invalid URL: neither safe nor unsafe, …), else 0.
//!
//! Options: `--publisher URL` (default `http://127.0.0.1:8080`); `--mirror
//! URL`, repeatable, tried in order after the publisher; `--list NAME`,
//! repeatable (default: every list the publisher has a snapshot of, with a
//! warning naming each list it serves without one, which is not checked);
//! `--key KEY_OR_FILE`, repeatable (default: `./blocksieve-data/public.key`,
//! which the publisher writes on first start); `--cache-dir DIR` (persist
//! snapshots; with it, checks work offline from the last snapshot, even an
//! expired one, with a warning that it is stale);
//! `--noise N` (noise prefixes per full-hash request, 1 to 64, default 4);
//! `--fail-closed`; `--timeout SECONDS` (default 10, see below).
//!
//! `--timeout` bounds every network wait of the run: each request to the
//! publisher — the list query, each snapshot download (headers and whole
//! body), each full-hash request — is given up after that many seconds, and
//! each mirror tried gets as long again. A publisher that accepts
//! connections and never answers thus ends the run after about `SECONDS`
//! (one list query, or one snapshot download with `--list`), with exit code
//! 2 and a message naming `--timeout`; a full-hash request that times out
//! makes its URLs `unverified`. Raise it for a large snapshot over a slow
//! link: the download must finish within it.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use blocksieve_agent::{Agent, DEFAULT_NOISE_PREFIXES, Error, FailurePolicy, Verdict};
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

    /// A trusted publisher public key: base64, 64 hex digits, or a file holding either
    /// (repeatable). Default: ./blocksieve-data/public.key.
    #[arg(long = "key", value_name = "KEY_OR_FILE")]
    keys: Vec<String>,

    /// A mirror of the publisher, tried in order when the ones before it
    /// fail (repeatable).
    #[arg(long = "mirror", value_name = "URL")]
    mirrors: Vec<String>,

    /// Persist verified snapshots here and load them at start, so that
    /// checks work while the publisher is unreachable (from an expired
    /// snapshot too, with a warning that it is stale).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,

    /// Noise prefixes added to each full-hash request.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_NOISE_PREFIXES)]
    noise: usize,

    /// Block (exit 1) URLs whose prefix hit cannot be verified because the
    /// full-hash request failed, instead of reporting an error.
    #[arg(long)]
    fail_closed: bool,

    /// The longest any one request may take, in seconds: the list query,
    /// each snapshot download (headers and whole body), each full-hash
    /// request; each mirror tried gets as long again.
    #[arg(long, value_name = "SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,

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
    /// Prefix hits that could not be verified.
    unverified: u64,
    /// Unverified URLs the failure policy says to block.
    blocked: u64,
    failed: u64,
}

/// URLs checked per [`Agent::check_urls`] call when reading stdin: one
/// full-hash request covers a whole batch.
const BATCH: usize = 256;

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
    let policy = if args.fail_closed {
        FailurePolicy::FailClosed
    } else {
        FailurePolicy::FailOpen
    };
    // One timeout for every request, the snapshot download included: the
    // library's own snapshot timeout (minutes, for large lists) would let a
    // publisher that never answers hold the run that long.
    let timeout = Duration::from_secs(args.timeout);
    let mut builder = Agent::builder(&args.publisher)
        .trusted_keys(keys)
        .noise_prefixes(args.noise)
        .failure_policy(policy)
        .request_timeout(timeout)
        .snapshot_timeout(timeout);
    for mirror in &args.mirrors {
        builder = builder.mirror(mirror);
    }
    if let Some(dir) = &args.cache_dir {
        builder = builder.cache_dir(dir);
    }
    let lists = if args.lists.is_empty() {
        let served = builder.fetch_publisher_lists().await.map_err(|e| {
            network_error(
                e,
                format!(
                    "asking {} for its lists (pass --list to skip this)",
                    args.publisher
                ),
                args.timeout,
            )
        })?;
        let (ready, unbuilt): (Vec<_>, Vec<_>) = served.lists.into_iter().partition(|l| l.snapshot.is_some());
        if ready.is_empty() {
            bail!("{} has no list with a snapshot yet", args.publisher);
        }
        // Not checked: a URL on such a list would print `safe` and exit 0,
        // "every URL checked and safe", unless the run says which lists it
        // left out (`--list NAME` makes one a requirement: not ready).
        for list in &unbuilt {
            eprintln!(
                "check: warning: list {} has no snapshot yet and is not checked (GET /v1/lists says why)",
                list.name
            );
        }
        // An agent follows at most this many lists (one full-hash answer
        // names no more): which ones is the user's to say.
        let most = blocksieve_format::api::MAX_ANSWER_LISTS;
        if ready.len() > most {
            bail!(
                "{} serves {} lists with a snapshot, and an agent follows at most {most}: \
                 name the lists to check with --list NAME (repeatable)",
                args.publisher,
                ready.len()
            );
        }
        ready.into_iter().map(|l| l.name).collect()
    } else {
        args.lists
    };
    builder = builder.lists(lists);
    let agent = builder.build().context("configuring the agent")?;
    // A cached snapshot that failed verification was set aside at start:
    // say so before the network is tried, so an offline run explains why
    // it has no list.
    for list in &agent.status().lists {
        if let Some(error) = &list.last_storage_error {
            eprintln!("check: warning: list {}: {error}", list.name);
        }
    }
    let report = agent
        .update()
        .await
        .map_err(|e| network_error(e, "loading snapshots".to_owned(), args.timeout))?;
    for (list, error) in report.failures() {
        eprintln!("check: warning: list {list} not updated, using the snapshot in use: {error}");
    }
    let status = agent.status();
    for list in status.lists.iter().filter(|l| l.stale) {
        eprintln!(
            "check: warning: the snapshot of list {} has expired; verdicts may miss newer entries",
            list.name
        );
    }
    if let Some(skew) = status.clock_skew {
        eprintln!("check: warning: {skew} (from its Date header); snapshot expiry is judged by this clock");
    }

    let mut tally = Tally::default();
    let mut progress = Progress::new();
    if args.urls.is_empty() {
        let mut batch = Vec::with_capacity(BATCH);
        // Lines are read as bytes: one line that is not UTF-8 must not stop
        // the run (see `url_from_line`).
        for line in std::io::stdin().lock().split(b'\n') {
            let line = line.context("reading URLs from stdin")?;
            let url = url_from_line(&line);
            if !url.is_empty() {
                batch.push(url);
            }
            if batch.len() == BATCH {
                progress.check(&agent, &batch, &mut tally).await;
                batch.clear();
            }
        }
        progress.check(&agent, &batch, &mut tally).await;
    } else {
        check(&agent, &args.urls, &mut tally).await;
    }
    progress.finish();

    let mut extra = String::new();
    if tally.unverified > 0 {
        extra.push_str(&format!(", {} unverified", tally.unverified));
    }
    if tally.failed > 0 {
        extra.push_str(&format!(", {} failed", tally.failed));
    }
    eprintln!(
        "{} urls: {} unsafe, {} safe, {} invalid{extra}; {} full-hash requests",
        tally.urls,
        tally.unsafe_,
        tally.safe,
        tally.invalid,
        agent.stats().full_hash_requests
    );
    Ok(if tally.unsafe_ > 0 || tally.blocked > 0 {
        ExitCode::from(1)
    } else if tally.failed > 0 || tally.unverified > 0 || tally.invalid > 0 {
        // An invalid URL is neither safe nor unsafe (a listed host with a
        // query over 2 MiB is invalid): never the exit of "all safe".
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// A URL from one line of standard input: white space trimmed at both ends
/// (Unicode white space and U+FEFF too, as the publisher trims feed lines),
/// and each byte that is not part of valid UTF-8 percent-escaped — the
/// canonicalizer escapes a raw byte so, where replacing it with U+FFFD
/// would check another URL (a Latin-1 `caf\xe9` is `caf%E9`).
fn url_from_line(line: &[u8]) -> String {
    blocksieve_format::url_text(line)
        .trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
        .to_owned()
}

/// The progress line of a long run from stdin: on stderr, only when it
/// is a terminal, and only from the second batch on (a short run shows
/// none). Verdict lines on stdout are printed with the line cleared, so a
/// terminal showing both is not garbled.
struct Progress {
    /// Whether stderr is a terminal: decided once, at start.
    enabled: bool,
    /// Batches checked so far.
    batches: u64,
    /// When the run started checking, for the rate.
    started: std::time::Instant,
    /// The progress line, once shown.
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new() -> Self {
        Self {
            enabled: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            batches: 0,
            started: std::time::Instant::now(),
            bar: None,
        }
    }

    /// Checks a batch as [`check`] does, then updates the progress line.
    async fn check(&mut self, agent: &Agent, urls: &[String], tally: &mut Tally) {
        match &self.bar {
            // The verdicts are printed while the line is cleared.
            Some(bar) => {
                let verdicts = agent.check_urls(urls).await;
                bar.suspend(|| print_verdicts(urls, verdicts, tally));
            }
            None => check(agent, urls, tally).await,
        }
        self.batches += 1;
        if self.enabled && self.bar.is_none() && self.batches >= 2 {
            let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {human_pos} URLs checked, {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            // The rate over the whole run, steadier than per-batch steps.
            let seconds = self.started.elapsed().as_secs_f64().max(0.001);
            bar.set_position(tally.urls);
            bar.set_message(format!(
                "{:.0} URLs/s, {} unsafe so far",
                tally.urls as f64 / seconds,
                tally.unsafe_
            ));
        }
    }

    /// Clears the progress line, before the summary.
    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Checks a batch of URLs and prints one line each, in order.
async fn check(agent: &Agent, urls: &[String], tally: &mut Tally) {
    if urls.is_empty() {
        return;
    }
    let verdicts = agent.check_urls(urls).await;
    print_verdicts(urls, verdicts, tally);
}

/// Prints one line per URL with its verdict, in order, and counts them.
fn print_verdicts(urls: &[String], verdicts: Vec<Result<Verdict, Error>>, tally: &mut Tally) {
    for (url, verdict) in urls.iter().zip(verdicts) {
        tally.urls += 1;
        match verdict {
            Ok(Verdict::Unsafe { list, .. }) => {
                tally.unsafe_ += 1;
                println!("unsafe {list} {url}");
            }
            Ok(Verdict::Safe { .. }) => {
                tally.safe += 1;
                println!("safe {url}");
            }
            Ok(Verdict::Unverified { reason, block, .. }) => {
                tally.unverified += 1;
                if block {
                    tally.blocked += 1;
                }
                println!("unverified {url} {reason}");
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
}

/// `error` with `step` as context, naming `--timeout` when the request ran
/// out of time, so that the user knows which knob bounds the wait.
fn network_error(error: Error, step: String, timeout_s: u64) -> anyhow::Error {
    let step = if error.is_timeout() {
        format!("{step}: no answer within --timeout {timeout_s} s")
    } else {
        step
    };
    anyhow::Error::new(error).context(step)
}

/// The keys from `--key` values (base64 or hex, or a file holding either), or from the
/// publisher's default key file.
fn trusted_keys(values: &[String]) -> anyhow::Result<Vec<TrustedKey>> {
    if values.is_empty() {
        if !Path::new(DEFAULT_KEY_FILE).is_file() {
            bail!(
                "no trusted key: pass --key KEY_OR_FILE (the publisher writes its public key to \
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
        // An editor may have written a byte-order mark before the key.
        let text = text.trim_start_matches('\u{feff}');
        TrustedKey::from_base64_or_hex(text.trim()).with_context(|| format!("key file {value}"))
    } else {
        TrustedKey::from_base64_or_hex(value.trim()).context("--key is neither an existing file nor a key")
    }
}

#[cfg(test)]
mod tests {
    use super::url_from_line;

    /// Real lines of the union feed the check read as another URL: one with
    /// Latin-1 bytes (read with U+FFFD, it missed its listed expression)
    /// and one ending in U+FEFF.
    #[test]
    fn regression_a_line_that_is_not_utf8_is_checked_as_the_canonicalizer_reads_its_bytes() {
        for line in [
            &b"http://email302.com/l/5fc15ea1/[email\xc3\x83\xc2\x83\xe9\xff]\r"[..],
            b"  http://x.example/caf\xe9?q=\xe9 ",
            b"http://www.ethereum-airdrops.info/erc20-tokens/DENT\xef\xbb\xbf",
            "http://ulvis.net/IFHc\u{a0}".as_bytes(),
        ] {
            let url = url_from_line(line);
            let trimmed = line.trim_ascii();
            let trimmed = trimmed.strip_suffix(b"\xef\xbb\xbf").unwrap_or(trimmed);
            let trimmed = trimmed.strip_suffix("\u{a0}".as_bytes()).unwrap_or(trimmed);
            let (mut want, mut got) = (Vec::new(), Vec::new());
            blocksieve_format::full_hashes(trimmed, &mut want).unwrap();
            blocksieve_format::full_hashes(url.as_bytes(), &mut got).unwrap();
            assert_eq!(got, want, "{url}");
        }
        assert_eq!(
            url_from_line(b"http://x.example/caf\xe9"),
            "http://x.example/caf%E9"
        );
        assert_eq!(
            url_from_line("http://x.example/é".as_bytes()),
            "http://x.example/é"
        );
    }
}
