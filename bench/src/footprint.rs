//! Row 6: what an agent holding the 854k list costs in memory, and how long
//! a process takes from its start to its first answered lookup when the
//! snapshot comes from the cache directory.
//!
//! The parent copies the published snapshot into a fresh cache directory
//! and starts this binary again, `runs` times, as `footprint-child`: the
//! child builds an [`Agent`] on that directory (the snapshot verified and
//! loaded as at any start), answers one [`Agent::lookup_local`], prints one
//! JSON line with its `VmRSS`/`VmHWM`, and exits. The parent times each
//! child from just before `spawn` to that line on its stdout (fork, exec,
//! loading, `main`, the agent, the lookup). Each is paired with a run of
//! `noop`, the same binary printing its line at once: the cost of starting
//! any process here.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use blocksieve_agent::Agent;
use blocksieve_format::TrustedKey;

use crate::report::{Report, fmt_bytes, fmt_count, fmt_duration, met};
use crate::workload::{Published, proc_status_bytes};

/// The target: RSS at most the snapshot size plus this.
const RSS_ALLOWANCE_BYTES: u64 = 8 * 1024 * 1024;

/// The target: first answered lookup within this of process start.
const START_TARGET: Duration = Duration::from_millis(100);

/// `blocksieve-bench footprint`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The published snapshot of the 854k list.
    #[arg(long)]
    snapshot: PathBuf,
    /// The publisher's `signing.key` (only its public half is used).
    #[arg(long)]
    signing_key: PathBuf,
    /// Child processes of each kind.
    #[arg(long, default_value_t = 15)]
    runs: usize,
    /// The URL the child checks.
    #[arg(long, default_value = "http://www.example.com/index.html")]
    url: String,
    /// Where `rows/`, `notes/` and the cache directory go (`target/bench`).
    #[arg(long)]
    out: PathBuf,
}

/// `blocksieve-bench footprint-child`.
#[derive(Debug, clap::Args)]
pub(crate) struct ChildArgs {
    #[arg(long)]
    cache_dir: PathBuf,
    #[arg(long)]
    list: String,
    /// The publisher's public key, base64.
    #[arg(long)]
    key: String,
    #[arg(long)]
    url: String,
}

/// The child: agent from the cache directory, one lookup, one JSON line.
///
/// # Errors
///
/// When the agent cannot be built or the lookup fails.
pub(crate) fn child(args: &ChildArgs, started: Instant) -> anyhow::Result<()> {
    let rss_at_main = proc_status_bytes("VmRSS");
    let rss_anon_at_main = proc_status_bytes("RssAnon");
    let rss_file_at_main = proc_status_bytes("RssFile");
    // The publisher is never contacted: everything comes from the cache.
    let agent = Agent::builder("http://127.0.0.1:9")
        .list(args.list.clone())
        .trusted_key(TrustedKey::from_base64(&args.key)?)
        .cache_dir(&args.cache_dir)
        .build()?;
    let local = agent.lookup_local(&args.url)?;
    let answered = started.elapsed();
    let line = serde_json::json!({
        "main_to_answer_ns": answered.as_nanos() as u64,
        "hits": local.hits.len(),
        "version": agent.snapshot_version(&args.list),
        "rss_at_main": rss_at_main,
        "rss": proc_status_bytes("VmRSS"),
        "rss_anon": proc_status_bytes("RssAnon"),
        "rss_file": proc_status_bytes("RssFile"),
        "rss_anon_at_main": rss_anon_at_main,
        "rss_file_at_main": rss_file_at_main,
        "hwm": proc_status_bytes("VmHWM"),
    });
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    drop(agent);
    Ok(())
}

/// Runs `exe args`, returning the time to its first stdout line and the line.
fn timed(exe: &Path, args: &[&str]) -> anyhow::Result<(Duration, serde_json::Value)> {
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut line)?;
    }
    let elapsed = started.elapsed();
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "{args:?} failed: {status}");
    let value = serde_json::from_str(line.trim()).with_context(|| format!("child printed {line:?}"))?;
    Ok((elapsed, value))
}

fn median<T: Copy + Ord + Default>(mut v: Vec<T>) -> T {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Runs the measurement and writes `rows/6-footprint.md` and
/// `notes/6-footprint.md`.
///
/// # Errors
///
/// When the inputs are missing or a child fails.
pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let published = Published::read(&args.snapshot, &args.signing_key)?;
    let list = published.header.list_name.clone();
    let snapshot_bytes = published.bytes.len() as u64;
    let cache = args.out.join("agent-cache");
    if cache.exists() {
        std::fs::remove_dir_all(&cache)?;
    }
    std::fs::create_dir_all(&cache)?;
    std::fs::write(cache.join(format!("{list}.snapshot")), &published.bytes)?;
    let key = published.key.public_key().to_base64();
    let exe = std::env::current_exe()?;
    let cache_arg = cache.to_string_lossy().into_owned();
    let child_args = [
        "footprint-child",
        "--cache-dir",
        &cache_arg,
        "--list",
        &list,
        "--key",
        &key,
        "--url",
        &args.url,
    ];
    // One untimed run of each: page cache and the binary warm.
    timed(&exe, &child_args)?;
    timed(&exe, &["noop"])?;
    let (mut starts, mut noops, mut lines) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.runs {
        let (elapsed, line) = timed(&exe, &child_args)?;
        anyhow::ensure!(line["version"].is_u64(), "the child loaded no snapshot: {line}");
        starts.push(elapsed);
        lines.push(line);
        noops.push(timed(&exe, &["noop"])?.0);
    }
    // The median over the children of one field of their JSON line.
    let field = |name: &str| median(lines.iter().map(|l| l[name].as_u64().unwrap_or(0)).collect());
    let (rss, hwm, at_main) = (field("rss"), field("hwm"), field("rss_at_main"));
    let (anon, file) = (field("rss_anon"), field("rss_file"));
    let (anon_at_main, file_at_main) = (field("rss_anon_at_main"), field("rss_file_at_main"));
    let in_main = Duration::from_nanos(field("main_to_answer_ns"));
    let slowest = starts.iter().max().copied().unwrap_or_default();
    let (start, noop) = (median(starts), median(noops));

    let mut report = Report::new(&args.out, "6-footprint", "Row 6: agent footprint");
    report.row(
        "6.1",
        &format!(
            "agent RSS holding the 854k list ({} entries) vs snapshot size",
            fmt_count(published.header.entry_count)
        ),
        &fmt_bytes(rss),
        &fmt_bytes(snapshot_bytes),
        rss as f64 / snapshot_bytes.max(1) as f64,
        "≤ snapshot + 8 MiB",
        met(rss <= snapshot_bytes + RSS_ALLOWANCE_BYTES),
    );
    report.row(
        "6.2",
        "process start → first answered lookup, snapshot from the cache directory vs a process that only starts",
        &fmt_duration(start),
        &fmt_duration(noop),
        start.as_secs_f64() / noop.as_secs_f64().max(1e-12),
        &format!("≤ {} ms", START_TARGET.as_millis()),
        met(start <= START_TARGET),
    );
    report.note(&format!(
        "**6.1** `VmRSS` of the whole process (this binary, no tokio runtime started) after the agent \
         loaded the snapshot and answered a lookup, median of {runs} processes: {} (+{} over the {} \
         snapshot; allowance 8 MiB); at `main`, before the agent: {}. Of the {}: anonymous memory \
         (`RssAnon`: heap, stacks) {} ({} at `main`), file-backed pages (`RssFile`: this binary's and \
         the libraries' code and data, clean and shared) {} ({} at `main`). Peak (`VmHWM`, while the \
         snapshot bytes, their decompressed body and the filter coexist): {}.",
        fmt_bytes(rss),
        fmt_bytes(rss.saturating_sub(snapshot_bytes)),
        fmt_bytes(snapshot_bytes),
        fmt_bytes(at_main),
        fmt_bytes(rss),
        fmt_bytes(anon),
        fmt_bytes(anon_at_main),
        fmt_bytes(file),
        fmt_bytes(file_at_main),
        fmt_bytes(hwm),
        runs = args.runs,
    ));
    report.note(&format!(
        "**6.2** Wall time from `spawn` to the child's answer on its stdout, median of {runs} runs \
         interleaved with as many `noop` runs (slowest: {}); of it, {} from `main` to the answer \
         (reading and verifying the cached snapshot: signature, SHA-256, zstd, layout; then the \
         lookup). Warm page cache.",
        fmt_duration(slowest),
        fmt_duration(in_main),
        runs = args.runs,
    ));
    report.write()
}
