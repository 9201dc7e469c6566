//! What a build leaves for operators: its history line, and the health
//! gauges of its list (the status page and the alert rules read both).

use std::time::Duration;

use super::{ListBuildOutcome, Publisher, unix_now};
use crate::error::Error;
use crate::{build, status};

impl Publisher {
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
        // The bound of the filter served: a build that serves nothing (a
        // refusal, a failure) leaves it.
        let fpr_bound = report
            .filter(|_| outcome.result.is_ok())
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
