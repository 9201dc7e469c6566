//! What a build leaves for operators: its metrics, log line and last
//! build status, its history line, and the health gauges of its list (the
//! status page and the alert rules read them).

use std::time::Duration;

use blocksieve_format::api::BuildStatus;

use super::{ListBuildOutcome, Publisher, unix_now};
use crate::error::Error;
use crate::{build, status};

impl Publisher {
    /// Records a build attempt's outcome: its metrics, its log line, the
    /// list's last build status, and (but for a build skipped because
    /// another builder holds the lease) what [`Self::watch_build`] keeps.
    pub(super) fn record(&self, index: usize, outcome: &ListBuildOutcome, forced: bool, elapsed: Duration) {
        let inner = &self.inner;
        let name = &inner.config.lists[index].name;
        let metrics = &inner.state.metrics;
        // The served filter's rate: a refused build's stays out of it, and
        // so does an unchanged one's (its canary, seeded by the version it
        // would have had, measured a filter that is not served).
        let measured = outcome
            .report
            .as_ref()
            .filter(|_| outcome.result.is_ok() && !outcome.unchanged)
            .map(|r| r.sizing.measured_fpr);
        let (label, gate) = match &outcome.result {
            Ok(_) if outcome.unchanged => ("unchanged", None),
            Ok(_) => ("published", None),
            Err(Error::Refused { gate }) => ("refused", Some(gate.name().to_owned())),
            Err(Error::LeaseHeld { .. }) => ("skipped", None),
            Err(Error::Superseded { .. }) => ("superseded", None),
            Err(_) => ("failed", None),
        };
        metrics.build_finished(name, label, elapsed.as_secs_f64(), measured);
        if let Some(g) = &gate {
            metrics.gate_refused(name, g);
        }
        if label == "skipped" {
            // Another builder holds the lease and builds the list: a gate
            // refusal of this one's own last attempt no longer stands (its
            // alert would fire for as long as the other builder leads).
            self.inner.state.lists[index].watch.stand_down();
            metrics.build_health(name, Some(false), None, None);
        } else {
            self.watch_build(index, outcome, label, elapsed);
        }
        match (&outcome.result, &outcome.report) {
            (Ok(version), Some(_)) if outcome.unchanged => {
                tracing::info!(
                    list = %name,
                    version,
                    duration_ms = elapsed.as_millis() as u64,
                    "list unchanged; nothing published, the served version's freshness renewed"
                );
            }
            (Ok(version), Some(r)) => {
                let s = &r.sizing;
                tracing::info!(
                    list = %name,
                    version,
                    entries = s.entries,
                    unique_keys = s.unique_keys,
                    filter = %s.filter_kind,
                    snapshot_bytes = s.snapshot_bytes,
                    bits_per_key = format_args!("{:.2}", s.bits_per_key),
                    theoretical_fpr = s.theoretical_fpr,
                    measured_fpr = s.measured_fpr,
                    request_prefix_bits = s.request_prefix_bits,
                    lines = r.parse.lines,
                    rejected = r.parse.rejected_total(),
                    allow_removed = r.allow.removed,
                    duration_ms = elapsed.as_millis() as u64,
                    "published snapshot"
                );
            }
            (Err(e @ Error::LeaseHeld { .. }), _) => {
                // Not a build: the last one's status stays.
                tracing::info!(list = %name, error = %e, "another builder builds this list now");
                return;
            }
            (Err(e @ Error::Superseded { .. }), _) => {
                tracing::info!(list = %name, error = %e, "build not published; the other builder's generation serves");
            }
            (Err(e), _) => {
                tracing::error!(list = %name, error = %e, "build not published; the list's previous snapshot, if any, stays current");
            }
            _ => {}
        }
        let statuses = outcome.source_statuses();
        // The lines read, also by a build that failed reading its sources.
        let parse = (outcome.report.as_ref().map(|r| &r.parse))
            .or_else(|| outcome.sources_read.as_ref().map(|s| &s.parse));
        let status = BuildStatus {
            finished_at: unix_now(),
            ok: outcome.result.is_ok(),
            error: outcome.result.as_ref().err().map(ToString::to_string),
            refused_by_gate: gate,
            forced,
            lines: parse.map_or(0, |p| p.lines),
            rejected: parse.map_or(0, |p| p.rejected_total()),
            rejected_by_reason: parse.map(|p| p.rejected.clone()).unwrap_or_default(),
            rejected_samples: parse.map(|p| p.samples.clone()).unwrap_or_default(),
            cleaned_by_kind: parse.map(|p| p.cleaned.clone()).unwrap_or_default(),
            host_wide_too_deep: parse.map_or(0, |p| p.host_wide_too_deep),
            directory_too_deep: parse.map_or(0, |p| p.directory_too_deep),
            allow: statuses.as_ref().map(|s| s.1.clone()).unwrap_or_default(),
            sources: statuses.map(|s| s.0.to_vec()).unwrap_or_default(),
            sizing: outcome.report.as_ref().map(|r| r.sizing.clone()),
            duration_ms: elapsed.as_millis() as u64,
        };
        if let Ok(mut g) = inner.state.lists[index].last_build.lock() {
            *g = Some(status);
        }
    }

    /// Records a build attempt for the status page and the health gauges:
    /// its history line, the gate refusal, the sources on last good
    /// content, the false-positive bound and the freshness.
    pub(super) fn watch_build(
        &self,
        index: usize,
        outcome: &ListBuildOutcome,
        label: &str,
        elapsed: Duration,
    ) {
        let inner = &self.inner;
        let name = &inner.config.lists[index].name;
        let slot = &inner.state.lists[index];
        let metrics = &inner.state.metrics;
        let report = outcome.report.as_ref();
        let statuses = outcome.source_statuses();
        let named = |state: &str| -> Vec<String> {
            (statuses.as_ref())
                .map(|(sources, allow)| sources.iter().chain(&allow.sources))
                .into_iter()
                .flatten()
                .filter(|s| s.state == state)
                .map(|s| s.source.clone())
                .collect()
        };
        let on_last_good = named("last_good");
        let refusal = match &outcome.result {
            Err(Error::Refused { gate }) => Some(gate.to_string().trim_start_matches("gate ").to_owned()),
            _ => None,
        };
        // Superseded: another builder published a newer version, which
        // this one now serves; its own earlier refusal no longer stands.
        let refused = match label {
            "published" | "unchanged" | "superseded" => Some(false),
            "refused" => Some(true),
            _ => None,
        };
        let profile = &slot.watch.profile;
        // The bound of the filter served: a build that serves nothing new (a
        // refusal, a failure, an unchanged list) leaves it.
        let fpr_bound = report
            .filter(|_| outcome.result.is_ok() && !outcome.unchanged)
            .map(|r| build::fpr_gate_bound(r.sizing.theoretical_fpr, profile.max_fpr_ratio));
        // A build that read no source says nothing of them.
        let read_sources = statuses.as_ref().map(|_| on_last_good.len());
        metrics.build_health(name, refused, read_sources, fpr_bound);
        if let Some(interval) = status::build_interval(&profile.schedule, unix_now()) {
            metrics.build_interval(name, interval.as_secs());
        }
        if let Some(at) = slot.fresh_at() {
            metrics.fresh_at(name, at, profile.overdue_at(at));
        }
        let record = status::RecordOf {
            finished_at: unix_now(),
            outcome: label,
            version: slot.current.load().as_ref().map(|p| p.header.version),
            sizing: report.map(|r| &r.sizing),
            error: match &outcome.result {
                Err(Error::Refused { .. }) | Ok(_) => None,
                Err(e) => Some(e.to_string()),
            },
            refusal,
            sources_on_last_good: on_last_good,
            sources_failed: named("failed"),
            took: elapsed,
        }
        .record(profile);
        slot.watch.record(record);
    }
}
