//! Row 5: [`Agent::lookup_local`] latency while snapshots of the 854k list
//! swap every 100 ms, against the same without swaps, in one process.
//!
//! Two checker threads call `lookup_local` on the real URLs in a loop and
//! time every call. An in-process HTTP server serves the published snapshot
//! re-signed at increasing versions; during "swapping" phases an updater
//! task on a one-worker tokio runtime points the server at the next version
//! and calls [`Agent::update`] every 100 ms: the agent's real swap path
//! (download, signature, SHA-256, zstd, layout checks, atomic swap, the old
//! filter freed). "Quiet" phases run the same checkers with no update.
//! Phases alternate (ABBA) so that drift on a noisy machine falls on both.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use blocksieve_agent::Agent;
use blocksieve_format::{DecodeLimits, SnapshotParams, decode, encode};

use crate::report::{Report, fmt_count, fmt_duration, met};
use crate::workload::{Published, data_dir, unix_now, urls};

/// Checkers' samples go nowhere (start-up and phase changes).
const WARMUP: u8 = 0;
/// Samples without updates.
const QUIET: u8 = 1;
/// Samples while the updater swaps every [`SWAP_EVERY`].
const SWAPPING: u8 = 2;
/// Everyone stops.
const STOP: u8 = 3;

/// How often a new snapshot is swapped in (the figure).
const SWAP_EVERY: Duration = Duration::from_millis(100);

/// Threads calling `lookup_local` (the figure).
const CHECKERS: usize = 2;

/// The target for p99 with swaps / p99 without.
const TARGET_RATIO: f64 = 1.2;

/// `blocksieve-bench swap`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The published snapshot of the 854k list (`<data_dir>/lists/<list>/<version>.snapshot`).
    #[arg(long)]
    snapshot: PathBuf,
    /// The publisher's `signing.key`, to sign the following versions.
    #[arg(long)]
    signing_key: PathBuf,
    /// Quiet + swapping phase pairs.
    #[arg(long, default_value_t = 4)]
    rounds: u32,
    /// Length of each phase.
    #[arg(long, default_value_t = 2500)]
    phase_ms: u64,
    /// Where `rows/` and `notes/` go (`target/bench`).
    #[arg(long)]
    out: PathBuf,
}

/// What the HTTP server hands out: version `current` of the list.
struct Served {
    versions: Vec<Bytes>,
    current: AtomicUsize,
}

async fn snapshot(State(served): State<Arc<Served>>) -> axum::response::Response {
    let i = served.current.load(Ordering::SeqCst);
    match served.versions.get(i) {
        Some(bytes) => ([(header::ETAG, format!("\"v{i}\""))], bytes.clone()).into_response(),
        None => axum::http::StatusCode::NOT_FOUND.into_response(),
    }
}

/// Percentiles of a sorted sample.
struct Percentiles {
    count: usize,
    p50: Duration,
    p99: Duration,
    p999: Duration,
    max: Duration,
}

impl Percentiles {
    fn of(mut nanos: Vec<u32>) -> Self {
        nanos.sort_unstable();
        let at = |q: f64| {
            let i = ((nanos.len() as f64 * q) as usize).min(nanos.len().saturating_sub(1));
            Duration::from_nanos(nanos.get(i).copied().map_or(0, u64::from))
        };
        Self {
            count: nanos.len(),
            p50: at(0.50),
            p99: at(0.99),
            p999: at(0.999),
            max: Duration::from_nanos(nanos.last().copied().map_or(0, u64::from)),
        }
    }
}

/// One checker: times every `lookup_local` and files it under the phase it
/// started in.
fn check_loop(agent: &Agent, urls: &[String], offset: usize, mode: &AtomicU8) -> (Vec<u32>, Vec<u32>, u64) {
    // Preallocated so that no timed call waits for a reallocation.
    let mut quiet = Vec::with_capacity(16 << 20);
    let mut swapping = Vec::with_capacity(16 << 20);
    let mut errors = 0u64;
    let mut i = offset;
    loop {
        let m = mode.load(Ordering::Relaxed);
        if m == STOP {
            break;
        }
        let url = &urls[i % urls.len()];
        i += 1;
        let started = Instant::now();
        // The answer is dropped inside the timed region: freeing it is part
        // of the caller's cost.
        let hits = agent.lookup_local(black_box(url)).map(|l| l.hits.len());
        let nanos = u32::try_from(started.elapsed().as_nanos()).unwrap_or(u32::MAX);
        match hits {
            Ok(h) => {
                black_box(h);
            }
            Err(_) => errors += 1,
        }
        match m {
            QUIET => quiet.push(nanos),
            SWAPPING => swapping.push(nanos),
            _ => {}
        }
    }
    (quiet, swapping, errors)
}

/// Runs the measurement and writes `rows/5-swap.md` and `notes/5-swap.md`.
///
/// # Errors
///
/// When the inputs are missing or the agent cannot load a snapshot.
pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let data = data_dir();
    let urls = urls(&data).with_context(|| format!("shared data at {}", data.display()))?;
    let published = Published::read(&args.snapshot, &args.signing_key)?;
    let trusted = published.key.public_key().clone();
    let verified = decode(
        &published.bytes,
        std::slice::from_ref(&trusted),
        &DecodeLimits::default(),
        unix_now(),
    )
    .context("the published snapshot does not verify")?;
    let h = verified.header();

    // Every version the updater may need, signed beforehand so that no
    // publisher work competes with the checkers. zstd level 3 instead of
    // the publisher's 19: a BinaryFuse8 body is incompressible random bytes,
    // so the agent decompresses the same amount either way.
    let swaps =
        (u64::from(args.rounds) * args.phase_ms).div_ceil(SWAP_EVERY.as_millis() as u64) as usize + 20;
    eprintln!(
        "swap: signing {} versions of {} ({} entries)",
        swaps + 1,
        h.list_name,
        h.entry_count
    );
    let versions = (0..=swaps as u64)
        .map(|i| {
            let params = SnapshotParams {
                list_name: h.list_name.clone(),
                version: h.version + i,
                created_at: h.created_at,
                expires_at: h.expires_at,
                key_bits: h.key_bits,
                request_prefix_bits: h.request_prefix_bits,
                full_hash_count: h.full_hash_count,
                measured_fpr: h.measured_fpr,
                zstd_level: 3,
            };
            encode(&params, verified.filter(), &published.key).map(Bytes::from)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let snapshot_bytes = versions.first().map_or(0, Bytes::len);
    let served = Arc::new(Served {
        versions,
        current: AtomicUsize::new(0),
    });

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = Router::new()
        .route("/v1/lists/{list}/snapshot", get(snapshot))
        .with_state(Arc::clone(&served));
    runtime.spawn(async move { axum::serve(listener, app).await });
    let agent = Agent::builder(base)
        .list(h.list_name.clone())
        .trusted_key(trusted)
        .build()?;
    runtime.block_on(agent.update())?;
    anyhow::ensure!(
        agent.snapshot_version(&h.list_name) == Some(h.version),
        "first snapshot not loaded"
    );

    let mode = Arc::new(AtomicU8::new(WARMUP));
    let updater = {
        let (agent, served, mode, list) = (
            agent.clone(),
            Arc::clone(&served),
            Arc::clone(&mode),
            h.list_name.clone(),
        );
        let first = h.version;
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(SWAP_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut took = Vec::new();
            let mut failed = 0u32;
            let mut next = 1usize;
            loop {
                tick.tick().await;
                match mode.load(Ordering::Relaxed) {
                    STOP => break,
                    SWAPPING if next < served.versions.len() => {}
                    _ => continue,
                }
                served.current.store(next, Ordering::SeqCst);
                let started = Instant::now();
                let result = agent.update().await;
                let elapsed = started.elapsed();
                if result.is_ok() && agent.snapshot_version(&list) == Some(first + next as u64) {
                    took.push(elapsed);
                } else {
                    failed += 1;
                }
                next += 1;
            }
            (took, failed)
        })
    };

    let phase = Duration::from_millis(args.phase_ms);
    let (mut quiet, mut swapping, mut errors) = (Vec::new(), Vec::new(), 0u64);
    std::thread::scope(|scope| {
        let checkers: Vec<_> = (0..CHECKERS)
            .map(|t| {
                let (agent, urls, mode) = (&agent, &urls, &*mode);
                scope.spawn(move || check_loop(agent, urls, t * urls.len() / CHECKERS, mode))
            })
            .collect();
        std::thread::sleep(Duration::from_secs(1));
        for round in 0..args.rounds {
            let order = if round % 2 == 0 {
                [QUIET, SWAPPING]
            } else {
                [SWAPPING, QUIET]
            };
            for m in order {
                mode.store(m, Ordering::Relaxed);
                std::thread::sleep(phase);
            }
        }
        mode.store(STOP, Ordering::Relaxed);
        for c in checkers {
            if let Ok((q, s, e)) = c.join() {
                quiet.extend(q);
                swapping.extend(s);
                errors += e;
            }
        }
    });
    let (mut took, failed) = runtime.block_on(updater)?;
    took.sort_unstable();
    let quiet = Percentiles::of(quiet);
    let swapping = Percentiles::of(swapping);
    let ratio = swapping.p99.as_secs_f64() / quiet.p99.as_secs_f64().max(1e-12);

    let mut report = Report::new(&args.out, "5-swap", "Row 5: swap under load");
    report.row(
        "5.1",
        &format!(
            "`lookup_local` p99, {CHECKERS} threads, real URLs; {} entries ({}) swapped every {} ms vs no swaps",
            fmt_count(h.entry_count),
            crate::report::fmt_bytes(snapshot_bytes as u64),
            SWAP_EVERY.as_millis()
        ),
        &fmt_duration(swapping.p99),
        &fmt_duration(quiet.p99),
        ratio,
        &format!("≤ {TARGET_RATIO}"),
        met(ratio <= TARGET_RATIO),
    );
    let median_update = took.get(took.len() / 2).copied().unwrap_or_default();
    let max_update = took.last().copied().unwrap_or_default();
    report.note(&format!(
        "**5.1** {rounds} rounds of a {phase} ms quiet phase and a {phase} ms swapping phase, \
         alternating order (ABBA), after 1 s of warm-up; {CHECKERS} checker threads over {n} real URLs \
         (legit-urls.txt interleaved with phishing feeds), every call timed with `Instant`.\n\n\
         | phase | lookups | p50 | p99 | p99.9 | max |\n|---|---:|---:|---:|---:|---:|\n\
         | quiet | {} | {} | {} | {} | {} |\n| swapping | {} | {} | {} | {} | {} |\n\n\
         {swapped} swaps done ({failed} failed), each a full `Agent::update` over HTTP from an in-process \
         server (download of {bytes}, signature, SHA-256, zstd, layout checks, swap): median {}, max {}. \
         Lookup errors: {errors}. p50 ratio {:.2}.",
        fmt_count(quiet.count as u64),
        fmt_duration(quiet.p50),
        fmt_duration(quiet.p99),
        fmt_duration(quiet.p999),
        fmt_duration(quiet.max),
        fmt_count(swapping.count as u64),
        fmt_duration(swapping.p50),
        fmt_duration(swapping.p99),
        fmt_duration(swapping.p999),
        fmt_duration(swapping.max),
        fmt_duration(median_update),
        fmt_duration(max_update),
        swapping.p50.as_secs_f64() / quiet.p50.as_secs_f64().max(1e-12),
        rounds = args.rounds,
        phase = args.phase_ms,
        n = fmt_count(urls.len() as u64),
        swapped = took.len(),
        bytes = crate::report::fmt_bytes(snapshot_bytes as u64),
    ));
    report.write()?;
    drop(agent);
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}
