//! What `build` prints: the sizing report, the advice under it, and the
//! stage timings (as text or JSON).

use blocksieve_publisher::internal::build::{self, BuildTimings, HashReference};
use blocksieve_publisher::{ListBuildOutcome, Publisher};

/// Prints the sizing report: one row per list, in the order given. A list
/// whose build failed before it had a report shows `–` in every column but
/// the first two; every list not published is followed by a
/// `not published` line giving the reason. The last column is the whole
/// build's wall time, from fetching its sources to publishing.
pub(crate) fn print_summary<'a>(
    out: &mut impl std::io::Write,
    outcomes: impl IntoIterator<Item = &'a ListBuildOutcome>,
) -> std::io::Result<()> {
    writeln!(
        out,
        "| list | published | lines | rejected | entries | unique keys | filter | bits/key | snapshot bytes | FPR theory | FPR measured | prefix collision n/2^32 | full-hash req. / 1000 checks | request prefix bits | anonymity set | response bytes | build |"
    )?;
    writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )?;
    for outcome in outcomes {
        let name = &outcome.list;
        // An unchanged list keeps the version it served: nothing new was
        // published, and nothing failed.
        let published = match (&outcome.result, outcome.unchanged) {
            (Ok(_), false) => "yes",
            (Ok(_), true) => "unchanged",
            (Err(_), _) => "no",
        };
        match &outcome.report {
            Some(r) => {
                let s = &r.sizing;
                writeln!(
                    out,
                    "| {name} | {published} | {} | {} | {} | {} | {} | {:.2} | {} | {:.3e} | {:.3e} | {:.3e} | {:.2} | {} | {:.1} | {:.0} | {:.2} s |",
                    r.parse.lines,
                    r.parse.rejected_total(),
                    s.entries,
                    s.unique_keys,
                    s.filter_kind,
                    s.bits_per_key,
                    s.snapshot_bytes,
                    s.theoretical_fpr,
                    s.measured_fpr,
                    s.prefix_collision_rate,
                    s.expected_full_hash_requests_per_1000,
                    s.request_prefix_bits,
                    s.anonymity_set,
                    s.expected_response_bytes,
                    // The whole attempt, fetching the sources included
                    // (`/v1/lists`' `duration_ms`), as `--timings` totals it.
                    if r.timings.total.is_zero() {
                        r.duration
                    } else {
                        r.timings.total
                    }
                    .as_secs_f64(),
                )?;
            }
            None => writeln!(out, "| {name} | {published} |{}", " – |".repeat(15))?,
        }
        if let Err(e) = &outcome.result {
            writeln!(out, "|   not published: {e} |")?;
        }
        if let Some(r) = &outcome.report {
            for (reason, count) in &r.parse.rejected {
                writeln!(out, "|   rejected: {reason} | {count} |")?;
            }
            for (kind, count) in &r.parse.cleaned {
                writeln!(out, "|   cleaned: {kind} | {count} |")?;
            }
            if r.parse.host_wide_too_deep > 0 {
                writeln!(
                    out,
                    "|   listed, its subdomains not covered: a domain entry of more than 5 labels (agents check a host's last 5) | {} |",
                    r.parse.host_wide_too_deep
                )?;
            }
            if r.parse.directory_too_deep > 0 {
                writeln!(
                    out,
                    "|   listed, URLs under its path not covered: an adblock URL rule more than 3 directories deep (agents check a path's first 4 prefixes) | {} |",
                    r.parse.directory_too_deep
                )?;
            }
            let a = &r.allow;
            if !a.sources.is_empty() {
                writeln!(
                    out,
                    "|   allowlists: {} lines, {} allowed entries ({} distinct full hashes), {} listed full hashes removed |",
                    a.parse.lines, a.parse.accepted, a.entries, a.removed
                )?;
            }
            for (reason, count) in &a.parse.rejected {
                writeln!(out, "|   allowlist rejected: {reason} | {count} |")?;
            }
        }
        // Which sources failed or fell back, also when the build failed
        // reading them.
        if let Some((sources, allow)) = outcome.source_statuses() {
            let block = sources.iter().map(|s| ("source", s));
            // The source the `not published` line names is not named twice.
            let named = match &outcome.result {
                Err(blocksieve_publisher::Error::Source { label, .. }) => Some(label.as_str()),
                _ => None,
            };
            for (role, src) in block.chain(allow.sources.iter().map(|s| ("allow source", s))) {
                let Some(e) = &src.error else { continue };
                if role == "source" && src.state == "failed" && named == Some(src.source.as_str()) {
                    continue;
                }
                let what = match (src.state.as_str(), role) {
                    ("failed", "source") => "failed",
                    ("failed", _) => "was left out",
                    _ => "used its last good content",
                };
                writeln!(out, "|   {role} {} {what}: {e} |", src.source)?;
            }
        }
    }
    Ok(())
}

/// Prints the sizing advice of each list that got as far as a filter: per
/// URL check rather than per probe, full-hash requests per 1,000 checks and
/// per second at the configured fleet, and the capacity at which the
/// filter would exceed the list's target. Nothing when no list did.
pub(crate) fn print_advice<'a>(
    out: &mut impl std::io::Write,
    publisher: &Publisher,
    outcomes: impl IntoIterator<Item = &'a ListBuildOutcome> + Clone,
) -> std::io::Result<()> {
    if outcomes.clone().into_iter().all(|o| o.report.is_none()) {
        return Ok(());
    }
    let config = publisher.config();
    let fleet = config.fleet_checks_per_second;
    writeln!(out)?;
    writeln!(
        out,
        "Sizing advice (a URL check probes {} expressions on average; the fleet makes {fleet} URL checks a second, `fleet_checks_per_second`):",
        build::MEAN_EXPRESSIONS_PER_URL
    )?;
    writeln!(
        out,
        "| list | filter | false hits / check | full-hash req. / 1000 checks | full-hash req. / s | target / 1000 | capacity (unique prefixes) | fill |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|")?;
    for outcome in outcomes {
        let (Some(r), Some(list)) = (
            &outcome.report,
            config.lists.iter().find(|l| l.name == outcome.list),
        ) else {
            continue;
        };
        let s = &r.sizing;
        let target = list.target_full_hash_requests_per_1000;
        let a = build::advice(s.theoretical_fpr, s.unique_keys, list.key_width(), target, fleet);
        let capacity = a
            .capacity
            .map_or_else(|| "unbounded".to_owned(), |c| c.to_string());
        writeln!(
            out,
            "| {} | {} | {:.3e} | {:.3} | {:.3} | {target} | {capacity} | {:.1}% |",
            outcome.list,
            s.filter_kind,
            a.false_hits_per_check,
            a.requests_per_1000,
            a.requests_per_second,
            a.fill_ratio * 100.0,
        )?;
    }
    Ok(())
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "–".to_owned(),
        |b| format!("{:.1}", b as f64 / (1024.0 * 1024.0)),
    )
}

pub(crate) fn print_timings(
    out: &mut impl std::io::Write,
    name: &str,
    t: &BuildTimings,
    reference: Option<&HashReference>,
) -> std::io::Result<()> {
    let total = t.total.as_secs_f64();
    writeln!(out)?;
    writeln!(
        out,
        "Build stages of {name}: {} expressions hashed ({} bytes); wall time, and the peak RSS when the stage last ended",
        t.expressions_hashed, t.expression_bytes
    )?;
    writeln!(out, "| stage | seconds | share | peak RSS MiB |")?;
    writeln!(out, "|---|---|---|---|")?;
    for s in &t.stages {
        let secs = s.duration.as_secs_f64();
        writeln!(
            out,
            "| {} | {secs:.3} | {:.1}% | {} |",
            s.stage,
            if total > 0.0 { secs * 100.0 / total } else { 0.0 },
            mib(s.peak_rss_bytes)
        )?;
    }
    writeln!(
        out,
        "| **total** | {total:.3} | 100% | {} |",
        mib(blocksieve_publisher::internal::metrics::peak_rss_bytes())
    )?;
    if let Some(r) = reference {
        let secs = r.duration.as_secs_f64();
        writeln!(
            out,
            "| SHA-256 alone of the same {} expressions (reference) | {secs:.3} | total = {:.1} x reference | |",
            r.expressions,
            if secs > 0.0 { total / secs } else { 0.0 }
        )?;
    }
    Ok(())
}

pub(crate) fn timings_json_of(
    name: &str,
    r: &build::BuildReport,
    reference: Option<&HashReference>,
) -> serde_json::Value {
    let t = &r.timings;
    let stages: Vec<serde_json::Value> = t
        .stages
        .iter()
        .map(|s| {
            serde_json::json!({
                "stage": s.stage,
                "seconds": s.duration.as_secs_f64(),
                "peak_rss_bytes": s.peak_rss_bytes,
            })
        })
        .collect();
    serde_json::json!({
        "list": name,
        "lines": r.parse.lines,
        "entries": r.sizing.entries,
        "unique_keys": r.sizing.unique_keys,
        "filter_kind": r.sizing.filter_kind,
        "snapshot_bytes": r.sizing.snapshot_bytes,
        "expressions_hashed": t.expressions_hashed,
        "expression_bytes": t.expression_bytes,
        "total_seconds": t.total.as_secs_f64(),
        "stages": stages,
        "reference": reference.map(|r| serde_json::json!({
            "what": "SHA-256 alone over the same expressions, in a tight loop",
            "expressions": r.expressions,
            "bytes": r.bytes,
            "seconds": r.duration.as_secs_f64(),
        })),
    })
}
