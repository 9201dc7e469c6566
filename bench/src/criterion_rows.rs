//! Rows 1 and 2 from the benches' output. The table's values are the
//! interleaved measurements the benches write to
//! `<out>/interleaved/<group>.<name>.json` (median time per element of each
//! side over 41 alternating rounds, and the median per-round ratio); the
//! criterion medians (`<criterion>/<group>/<function>/new/estimates.json`,
//! `median.point_estimate` over `benchmark.json`'s `throughput.Elements`),
//! measured back to back, go into the notes as a cross-check.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::Value;

use crate::report::{Report, fmt_nanos, met};

/// `blocksieve-bench rows`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Which bench: `url` (agent `lookup` and format `canonicalize`) or
    /// `probe` (format `probe`).
    section: Section,
    /// criterion's output directory (`target/criterion`).
    #[arg(long)]
    criterion: PathBuf,
    /// Where `rows/` and `notes/` go (`target/bench`).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Section {
    Url,
    Probe,
}

/// One interleaved comparison, as the benches write it.
struct Interleaved {
    ours_ns: f64,
    reference_ns: f64,
    ratio: f64,
}

fn interleaved(out: &Path, group: &str, name: &str) -> anyhow::Result<Interleaved> {
    let path = out.join("interleaved").join(format!("{group}.{name}.json"));
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (did the bench run with BLOCKSIEVE_BENCH_OUT?)",
            path.display()
        )
    })?;
    let v: Value = serde_json::from_str(&text)?;
    let num = |k: &str| {
        v[k].as_f64()
            .with_context(|| format!("{k} in {}", path.display()))
    };
    Ok(Interleaved {
        ours_ns: num("ours_ns")?,
        reference_ns: num("reference_ns")?,
        ratio: num("ratio")?,
    })
}

/// The median nanoseconds per element of `group/function`.
fn per_element(criterion: &Path, group: &str, function: &str) -> anyhow::Result<f64> {
    let dir = criterion.join(group).join(function).join("new");
    let read = |name: &str| -> anyhow::Result<Value> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {} (did the bench run?)", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    };
    let median = read("estimates.json")?["median"]["point_estimate"]
        .as_f64()
        .context("no median")?;
    let elements = read("benchmark.json")?["throughput"]["Elements"]
        .as_f64()
        .unwrap_or(1.0);
    Ok(median / elements)
}

/// Writes the rows of `args.section`.
///
/// # Errors
///
/// When criterion's files are missing.
pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    match args.section {
        Section::Url => url(args),
        Section::Probe => probe(args),
    }
}

/// The target for row 1.
const URL_TARGET: f64 = 1.5;

/// The target for row 2.
const PROBE_TARGET: f64 = 1.2;

fn url(args: &Args) -> anyhow::Result<()> {
    let (c, out) = (&args.criterion, &args.out);
    let mut report = Report::new(out, "1-url", "Row 1: URL check on the agent");
    let mut split = Vec::new();
    for (number, set, what) in [
        (
            "1.1",
            "all",
            "all 11,493 real URLs (legit-urls.txt + phishing feeds)",
        ),
        ("1.2", "benign", "the 5,715 URLs of legit-urls.txt"),
        ("1.3", "phishing", "the 5,778 phishing URLs"),
    ] {
        let group = format!("url-check-{set}");
        let ours = interleaved(out, &group, "lookup_local")?;
        let probe = interleaved(out, &group, "canonicalize+sha256+probe")?;
        let canon = interleaved(out, &group, "canonicalize+sha256")?;
        report.row(
            number,
            &format!(
                "URL check on the agent (`lookup_local`, 854k-entry snapshot), {what}; vs SHA-256 alone over the same expressions, per URL"
            ),
            &fmt_nanos(ours.ours_ns),
            &fmt_nanos(ours.reference_ns),
            ours.ratio,
            &format!("≤ {URL_TARGET}"),
            met(ours.ratio <= URL_TARGET),
        );
        let back_to_back = per_element(c, &group, "lookup_local")? / per_element(c, &group, "sha256-only")?;
        split.push(format!(
            "| {number} {set} | {} | {} ({:.2}) | {} ({:.2}) | {} ({:.2}) | {back_to_back:.2} |",
            fmt_nanos(ours.reference_ns),
            fmt_nanos(canon.ours_ns),
            canon.ratio,
            fmt_nanos(probe.ours_ns),
            probe.ratio,
            fmt_nanos(ours.ours_ns),
            ours.ratio,
        ));
    }
    let canon = interleaved(out, "urls-10k", "canonicalize+expressions+sha256")?;
    report.row(
        "1.4",
        "canonicalize + expressions + SHA-256 (`full_hashes`) without the agent (`format` bench, its 10,000 feed URLs); vs SHA-256 alone over the same expressions, per URL",
        &fmt_nanos(canon.ours_ns),
        &fmt_nanos(canon.reference_ns),
        canon.ratio,
        &format!("≤ {URL_TARGET}"),
        met(canon.ratio <= URL_TARGET),
    );
    let large = interleaved(out, "url-check-all-10m", "lookup_local")?;
    report.row(
        "1.5",
        "URL check on the agent (`lookup_local`), 10M-entry snapshot (the 854k list's keys and 9.2M random ones, an 11 MB filter), the 11,493 URLs of 1.1; vs SHA-256 alone over the same expressions, per URL",
        &fmt_nanos(large.ours_ns),
        &fmt_nanos(large.reference_ns),
        large.ratio,
        "— (measured for scale)",
        "—",
    );
    let hash = interleaved(out, "urls-10k", "sha256-blocksieve")?;
    report.row(
        "1.6",
        "SHA-256 of the expressions of 1.4 by blocksieve (`FullHash::of`: its own padding, `sha2`'s compression function) vs the `sha2` crate's `Sha256::digest`, the reference of rows 1 and 3, per URL",
        &fmt_nanos(hash.ours_ns),
        &fmt_nanos(hash.reference_ns),
        hash.ratio,
        "— (how much of rows 1.1–1.4 is the hash)",
        "—",
    );
    let ours = per_element(c, "urls-10k", "canonicalize+expressions+sha256")?;
    let via = per_element(c, "urls-10k", "canonicalize+expressions+sha256-via-canonical-url")?;
    let via_interleaved = interleaved(
        out,
        "urls-10k",
        "canonicalize+expressions+sha256-via-canonical-url",
    )?;
    let per_expression = per_element(c, "urls-10k", "canonicalize+expressions+sha256-per-expression")?;
    let sha = per_element(c, "urls-10k", "sha256-only")?;
    report.note(&format!(
        "**1.1–1.3** `cargo bench -p blocksieve-agent --bench lookup`: an `Agent` loaded from a cache \
         directory holding a BinaryFuse8 snapshot of the 854,522-line feed (built by the bench from each \
         line's most specific expression), `lookup_local` on each URL; the reference hashes the same \
         URLs' expression strings, computed beforehand, with the `sha2` crate's `Sha256::digest` (as \
         every earlier table did; blocksieve's own `FullHash::of`, which the check uses, is row 1.6). Measured interleaved (41 alternating rounds of \
         one warm pass over the set each; time = median per URL, ratio = median of the per-round ratios, so \
         it need not equal the quotient of the two medians). Where the time goes, per URL, each step \
         with its ratio to SHA-256 alone from the same interleaved run, and the criterion medians' \
         ratio measured back to back:\n\n\
         | set | SHA-256 only | canonicalize + SHA-256 | + filter probe | `lookup_local` | `lookup_local`, criterion back to back |\n\
         |---|---:|---:|---:|---:|---:|\n{}\n\n\
         **1.4** `cargo bench -p blocksieve-format --bench canonicalize`: the canonicalizer alone on \
         its own URL set, measured interleaved as above. Criterion medians, measured back to back: \
         `full_hashes` {} ({:.2}), through a `CanonicalUrl` (`canonicalize` + `full_hashes_into`) {} \
         ({:.2}, interleaved {:.3}), hashing each expression while iterating {} ({:.2}), SHA-256 alone {}.",
        split.join("\n"),
        fmt_nanos(ours),
        ours / sha,
        fmt_nanos(via),
        via / sha,
        via_interleaved.ratio,
        fmt_nanos(per_expression),
        per_expression / sha,
        fmt_nanos(sha),
    ));
    report.write()
}

fn probe(args: &Args) -> anyhow::Result<()> {
    let c = &args.criterion;
    let mut report = Report::new(&args.out, "2-probe", "Row 2: filter probe");
    let mut n = 0;
    let mut cross = Vec::new();
    for (size, keys) in [("1M", "1,000,000"), ("10M", "10,000,000")] {
        let group = format!("probe-{size}");
        for kind in ["binary_fuse8", "binary_fuse16", "binary_fuse32", "bloom"] {
            n += 1;
            let i = interleaved(&args.out, &group, kind)?;
            let back_to_back = per_element(c, &group, &format!("{kind}-ours"))?
                / per_element(c, &group, &format!("{kind}-raw"))?;
            cross.push(format!("{kind} {size} {back_to_back:.2}"));
            let reference = if kind == "bloom" {
                "a minimal hand-written probe of the same bits"
            } else {
                "raw `xorf` on the same keys"
            };
            report.row(
                &format!("2.{n}"),
                &format!("filter probe, {kind}, {keys} keys, through `VerifiedSnapshot::probably_contains`; vs {reference}, per probe"),
                &fmt_nanos(i.ours_ns),
                &fmt_nanos(i.reference_ns),
                i.ratio,
                &format!("≤ {PROBE_TARGET}"),
                met(i.ratio <= PROBE_TARGET),
            );
        }
    }
    report.note(&format!(
        "**2.x** `cargo bench -p blocksieve-format --bench probe`: distinct random 32-bit keys \
         (seeded), 200,000 queries per pass, half present, half absent, shuffled; ours probes a \
         snapshot encoded, signed and decoded as the agent gets it, with a full hash per query; the \
         reference probes the raw filter built from the same keys with the `u64` key. Both answer \
         every query identically (checked before timing). Bloom: 12 bits per key, k = 8. Measured \
         interleaved (41 alternating rounds of one warm pass each; time = median per probe, ratio = median \
         of the per-round ratios). Criterion medians' ratio, measured back to back, for comparison: {}.",
        cross.join(", ")
    ));
    report.write()
}
