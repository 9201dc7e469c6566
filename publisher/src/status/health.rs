//! A list's health, red, amber or green with every reason that applies:
//! pure, the time passed in. The conditions are those of the alert rules
//! on the same metrics (`blocksieve_snapshot_fresh_timestamp_seconds`,
//! `blocksieve_build_overdue_timestamp_seconds`, `blocksieve_measured_fpr`,
//! `blocksieve_fpr_bound`, `blocksieve_last_build_refused`,
//! `blocksieve_sources_on_last_good`, `blocksieve_capacity_fill_ratio`,
//! `blocksieve_builds_total{outcome="failed"}`).

use std::time::Duration;

/// How much of its capacity a list may fill before it is amber.
pub const FILL_WARNING: f64 = 0.9;

/// How far ahead a fill trend is projected: a list projected to reach its
/// capacity within this long is amber.
pub const FILL_HORIZON: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// How far back failed builds make a list amber (the window of the
/// `BlocksieveBuildsFailing` alert; the reason's text says "hour").
pub const FAILED_WINDOW: Duration = Duration::from_secs(60 * 60);

/// How long a replica (or a builder following its store) may go without
/// reaching the store before it is amber (the `BlocksieveStoreUnreachable`
/// alert's threshold).
pub const STORE_UNREACHED: Duration = Duration::from_secs(10 * 60);

/// How far back the fill trend is fitted.
pub const FILL_WINDOW: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A list's state; the worst reason decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// Nothing to look at.
    Green,
    /// Look soon: the list is served and fresh, but something degrades it.
    Amber,
    /// Look now: agents are not protected as configured.
    Red,
}

impl State {
    /// `green`, `amber` or `red`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Green => "green",
            Self::Amber => "amber",
            Self::Red => "red",
        }
    }
}

/// A list's state and every reason for it (none when green).
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    /// The worst of the reasons' states.
    pub state: State,
    /// Each reason, with its state, worst first.
    pub reasons: Vec<(State, String)>,
}

/// What the health of one list is computed from.
#[derive(Debug, Clone, Default)]
pub struct HealthInput<'a> {
    /// Whether a snapshot is served.
    pub served: bool,
    /// Unix seconds of the served version's latest freshness (its build,
    /// or the latest build that found it unchanged).
    pub fresh_at: Option<u64>,
    /// Unix seconds at which the served version goes stale: the second
    /// scheduled build after `fresh_at` ([`crate::status::overdue_at`]).
    pub overdue_at: Option<u64>,
    /// The latest build's measured false-positive rate per probe.
    pub measured_fpr: Option<f64>,
    /// The largest rate the gate accepts (theoretical × `max_fpr_ratio`,
    /// beyond chance: `build::fpr_gate_bound`).
    pub fpr_bound: Option<f64>,
    /// The latest build's gate refusal, while it stands.
    pub refusal: Option<&'a str>,
    /// Sources the latest build read from their last good content.
    pub on_last_good: &'a [String],
    /// The builds that failed within [`FAILED_WINDOW`] before now.
    pub failed: FailedBuilds<'a>,
    /// Unique prefixes served ÷ the filter's capacity.
    pub fill_ratio: f64,
    /// Earlier builds' fill ratios, (Unix seconds, ratio), oldest first.
    pub fill_history: &'a [(u64, f64)],
    /// The served version's request prefix length (bits), the full hashes
    /// its bucket holds on average under it, and `max_bucket_entries`.
    pub request_bucket: Option<(u8, f64, u64)>,
    /// Why the generation the store's `latest` pointer names is not the
    /// one served (a replica, or a builder following its store), while it
    /// is not: agents that updated from another server hold its version,
    /// and those that update here miss its additions.
    pub not_loaded: Option<&'a str>,
    /// For a publisher that follows a store and whose latest check of it
    /// failed: when a check last succeeded (Unix seconds; `None` inside:
    /// never since the start). `None`: it follows no store, or reached it.
    pub store_reached_at: Option<Option<u64>>,
}

/// The builds of a list that failed within [`FAILED_WINDOW`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FailedBuilds<'a> {
    /// How many.
    pub count: usize,
    /// The latest one: when it finished (Unix seconds) and its error.
    pub latest: Option<(u64, &'a str)>,
    /// When a build after the latest failure published or renewed the
    /// list, the latest such (Unix seconds).
    pub recovered_at: Option<u64>,
}

impl<'a> FailedBuilds<'a> {
    /// The failed builds among `records` (`(finished_at, outcome,
    /// error)`, oldest first) that finished within [`FAILED_WINDOW`]
    /// before `now`.
    pub fn among(records: impl IntoIterator<Item = (u64, &'a str, Option<&'a str>)>, now: u64) -> Self {
        let since = now.saturating_sub(FAILED_WINDOW.as_secs());
        let mut failed = Self::default();
        for (finished_at, outcome, error) in records {
            match outcome {
                "failed" if finished_at > since => {
                    failed.count += 1;
                    failed.latest = Some((finished_at, error.unwrap_or("no error recorded")));
                    failed.recovered_at = None;
                }
                "published" | "unchanged" if failed.latest.is_some() => {
                    failed.recovered_at = Some(finished_at);
                }
                _ => {}
            }
        }
        failed
    }
}

/// The health of a list at `now` (Unix seconds).
pub fn health(input: &HealthInput<'_>, now: u64) -> Health {
    let mut reasons = Vec::new();
    if !input.served {
        reasons.push((State::Red, "no snapshot served".to_owned()));
    }
    if input.served
        && let (Some(fresh), Some(overdue)) = (input.fresh_at, input.overdue_at)
        && now > overdue
    {
        reasons.push((
            State::Red,
            format!(
                "stale: last fresh {} ago; the two builds scheduled since, the later {} ago, renewed nothing",
                duration(now.saturating_sub(fresh)),
                duration(now - overdue)
            ),
        ));
    }
    if let Some(reason) = input.not_loaded {
        reasons.push((
            State::Red,
            format!("behind the store: its newest generation is not served: {reason}"),
        ));
    }
    if let (Some(measured), Some(bound)) = (input.measured_fpr, input.fpr_bound)
        && measured > bound
    {
        reasons.push((
            State::Red,
            format!("FPR over its bound: measured {measured:.3e} > {bound:.3e}"),
        ));
    }
    if let Some((bits, expected, cap)) = input.request_bucket
        && expected > cap as f64
    {
        // Agents ask this list's hits at (at least) this length; every
        // such request is refused, so no hit is ever confirmed.
        reasons.push((
            State::Red,
            format!(
                "hits cannot be confirmed: the advertised {bits}-bit request prefix selects about {expected:.0} full hashes, more than max_bucket_entries ({cap}); lengthen request_prefix_bits or raise max_bucket_entries"
            ),
        ));
    }
    if let Some(refusal) = input.refusal {
        reasons.push((State::Amber, format!("gate refused: {refusal}")));
    }
    if let Some((at, error)) = input.failed.latest {
        let builds = match input.failed.count {
            1 => "1 build".to_owned(),
            n => format!("{n} builds"),
        };
        let ago = |t: u64| duration(now.saturating_sub(t));
        // Amber for the hour either way, as the alert fires; the words say
        // whether the list builds again since.
        reasons.push((
            State::Amber,
            match input.failed.recovered_at {
                None => format!(
                    "builds failing: {builds} in the last hour, the latest {} ago: {error}",
                    ago(at)
                ),
                Some(ok) => format!(
                    "builds failed: {builds} in the last hour, the latest {} ago: {error}; a build {} ago succeeded",
                    ago(at),
                    ago(ok)
                ),
            },
        ));
    }
    if !input.on_last_good.is_empty() {
        reasons.push((
            State::Amber,
            format!("source on last good: {}", input.on_last_good.join(", ")),
        ));
    }
    if let Some(reached) = input.store_reached_at
        && reached.is_none_or(|t| now.saturating_sub(t) > STORE_UNREACHED.as_secs())
    {
        // It serves what it loaded; the builders' newer versions do not
        // reach it, and its own version looks fresh for up to two build
        // intervals.
        reasons.push((
            State::Amber,
            match reached {
                Some(t) => format!(
                    "store unreachable: last reached {} ago; newer versions published since are not served here",
                    duration(now.saturating_sub(t))
                ),
                None => "store unreachable: not reached since the start".to_owned(),
            },
        ));
    }
    if input.fill_ratio >= FILL_WARNING {
        reasons.push((
            State::Amber,
            format!("filling: {} of capacity", percent(input.fill_ratio)),
        ));
    } else if let Some(days) = days_to_fill(input.fill_history, (now, input.fill_ratio), now)
        && days <= FILL_HORIZON.as_secs_f64() / 86_400.0
    {
        reasons.push((
            State::Amber,
            format!(
                "filling: {} of capacity, projected to reach it in {days:.0} days",
                percent(input.fill_ratio)
            ),
        ));
    }
    reasons.sort_by_key(|r| std::cmp::Reverse(r.0));
    Health {
        state: reasons.first().map_or(State::Green, |r| r.0),
        reasons,
    }
}

/// Days from `now` until a least-squares line through the points of the
/// last [`FILL_WINDOW`] (and `current`) reaches 1; `None` when it does not
/// rise, or there are too few points.
pub fn days_to_fill(history: &[(u64, f64)], current: (u64, f64), now: u64) -> Option<f64> {
    let since = now.saturating_sub(FILL_WINDOW.as_secs());
    let points: Vec<(f64, f64)> = history
        .iter()
        .copied()
        .chain([current])
        .filter(|&(t, r)| t >= since && r.is_finite())
        .map(|(t, r)| ((t as f64 - now as f64) / 86_400.0, r))
        .collect();
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    if slope <= 0.0 {
        return None;
    }
    // The line at day 0 (now) is my − slope × mx.
    let at_now = my - slope * mx;
    Some(((1.0 - at_now) / slope).max(0.0))
}

fn percent(ratio: f64) -> String {
    format!("{:.0}%", ratio * 100.0)
}

/// `s` seconds in the largest two units: `3 h 2 min`, `45 s`.
pub fn duration(s: u64) -> String {
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn fresh() -> HealthInput<'static> {
        HealthInput {
            served: true,
            fresh_at: Some(NOW - 60),
            // Half-hourly builds: due again at NOW - 60 + 1800, stale
            // after the build after that.
            overdue_at: Some(NOW - 60 + 3600),
            measured_fpr: Some(1.4e-5),
            fpr_bound: Some(2.0 / 65_536.0),
            fill_ratio: 0.1,
            request_bucket: Some((12, 205.0, 4096)),
            ..HealthInput::default()
        }
    }

    fn reasons(h: &Health) -> Vec<&str> {
        h.reasons.iter().map(|r| r.1.as_str()).collect()
    }

    /// A replica that cannot reach its store serves a version that is
    /// fresh by its own dates while the builders publish newer ones: not
    /// green once the store is unreached for longer than
    /// [`STORE_UNREACHED`].
    #[test]
    fn regression_a_store_unreached_for_ten_minutes_is_amber() {
        let reached = |at| {
            health(
                &HealthInput {
                    store_reached_at: Some(at),
                    ..fresh()
                },
                NOW,
            )
        };
        assert_eq!(reached(Some(NOW - 5)).state, State::Green);
        assert_eq!(reached(Some(NOW - 600)).state, State::Green);
        let h = reached(Some(NOW - 3 * 3600));
        assert_eq!(h.state, State::Amber, "{h:?}");
        assert!(
            reasons(&h)[0].starts_with("store unreachable: last reached 3 h"),
            "{h:?}"
        );
        assert_eq!(reached(None).state, State::Amber);
        // A publisher that follows no store, or whose last check reached it.
        assert_eq!(health(&fresh(), NOW).state, State::Green);
    }

    #[test]
    fn a_fresh_list_within_its_bounds_is_green() {
        let h = health(&fresh(), NOW);
        assert_eq!(h.state, State::Green);
        assert!(h.reasons.is_empty());
    }

    /// A request prefix whose bucket is over the cap: every confirmation
    /// of the list's hits is refused (`400 prefix_too_short`).
    #[test]
    fn a_request_prefix_whose_bucket_is_over_the_cap_is_red() {
        let input = HealthInput {
            request_bucket: Some((8, 4100.0, 4096)),
            ..fresh()
        };
        let h = health(&input, NOW);
        assert_eq!(h.state, State::Red);
        assert_eq!(
            reasons(&h),
            [
                "hits cannot be confirmed: the advertised 8-bit request prefix selects about 4100 full hashes, more than max_bucket_entries (4096); lengthen request_prefix_bits or raise max_bucket_entries"
            ]
        );
        let at_cap = HealthInput {
            request_bucket: Some((8, 4096.0, 4096)),
            ..fresh()
        };
        assert_eq!(health(&at_cap, NOW).state, State::Green);
    }

    #[test]
    fn stale_once_two_scheduled_builds_renewed_nothing() {
        // NOW is 08:00 UTC. Builds at 00:00 and 06:00; the 06:00 build
        // ended at 06:00:30.
        let schedule = "0 0 0,6 * * *";
        let fresh_at = NOW - 2 * 3600 + 30;
        let overdue = crate::status::overdue_at(schedule, fresh_at);
        assert_eq!(overdue, Some(NOW + 22 * 3600), "tomorrow 06:00");
        let input = HealthInput {
            fresh_at: Some(fresh_at),
            overdue_at: overdue,
            ..fresh()
        };
        // At 18:00 the list is 12 h old, twice the 6 h gap after 06:00, but
        // no build was missed: green (twice "the interval" said red).
        assert_eq!(health(&input, NOW + 10 * 3600).state, State::Green);
        // Tomorrow 06:00 passes with no renewal: the 00:00 and 06:00 builds
        // both renewed nothing.
        assert_eq!(health(&input, NOW + 22 * 3600).state, State::Green);
        let h = health(&input, NOW + 22 * 3600 + 60);
        assert_eq!(h.state, State::Red);
        assert_eq!(
            reasons(&h),
            [
                "stale: last fresh 1 d 0 h ago; the two builds scheduled since, the later 1 min ago, renewed nothing"
            ]
        );
    }

    #[test]
    fn no_snapshot_and_fpr_over_its_bound_are_red() {
        let none = HealthInput {
            served: false,
            fresh_at: None,
            measured_fpr: None,
            ..fresh()
        };
        assert_eq!(reasons(&health(&none, NOW)), ["no snapshot served"]);
        let over = HealthInput {
            measured_fpr: Some(4e-5),
            ..fresh()
        };
        let h = health(&over, NOW);
        assert_eq!(h.state, State::Red);
        assert_eq!(reasons(&h), ["FPR over its bound: measured 4.000e-5 > 3.052e-5"]);
    }

    #[test]
    fn every_reason_is_listed_the_worst_first() {
        let names = ["https://feed.example/a.txt".to_owned(), "b.txt".to_owned()];
        let input = HealthInput {
            fresh_at: Some(NOW - 10_000),
            overdue_at: Some(NOW - 10_000 + 3600),
            refusal: Some("max_shrink: 10 entries, down from 100 in version 7 (more than 50% smaller)"),
            on_last_good: &names,
            fill_ratio: 0.93,
            ..fresh()
        };
        let h = health(&input, NOW);
        assert_eq!(h.state, State::Red);
        assert_eq!(
            reasons(&h),
            [
                "stale: last fresh 2 h 46 min ago; the two builds scheduled since, the later 1 h 46 min ago, renewed nothing",
                "gate refused: max_shrink: 10 entries, down from 100 in version 7 (more than 50% smaller)",
                "source on last good: https://feed.example/a.txt, b.txt",
                "filling: 93% of capacity",
            ]
        );
        let amber = HealthInput {
            fresh_at: Some(NOW),
            overdue_at: Some(NOW + 3600),
            ..input
        };
        assert_eq!(health(&amber, NOW).state, State::Amber);
    }

    #[test]
    fn a_build_failed_within_the_hour_is_amber_as_the_alert_fires() {
        let history = [
            (NOW - 3 * 3600, "failed", Some("old")),
            (NOW - 3600, "failed", Some("just outside the hour")),
            (
                NOW - 1800,
                "failed",
                Some("source https://feed.example/a.txt: HTTP 503"),
            ),
            (NOW - 900, "published", None),
            (
                NOW - 120,
                "failed",
                Some("writing the snapshot: No space left on device (os error 28)"),
            ),
        ];
        let failed = FailedBuilds::among(history, NOW);
        assert_eq!(failed.count, 2);
        let h = health(&HealthInput { failed, ..fresh() }, NOW);
        assert_eq!(h.state, State::Amber);
        assert_eq!(
            reasons(&h),
            [
                "builds failing: 2 builds in the last hour, the latest 2 min ago: writing the snapshot: No space left on device (os error 28)"
            ]
        );
        // A publish after the failure keeps it amber within the hour (as
        // the alert), saying so; an hour after the last failure, green.
        let recovered = [
            (
                NOW - 300,
                "failed",
                Some("HTTP 503 Service Unavailable (3 attempts)"),
            ),
            (NOW - 200, "refused", None),
            (NOW - 60, "unchanged", None),
        ];
        let h = health(
            &HealthInput {
                failed: FailedBuilds::among(recovered, NOW),
                ..fresh()
            },
            NOW,
        );
        assert_eq!(h.state, State::Amber);
        assert_eq!(
            reasons(&h),
            [
                "builds failed: 1 build in the last hour, the latest 5 min ago: HTTP 503 Service Unavailable (3 attempts); a build 1 min ago succeeded"
            ]
        );
        let later = FailedBuilds::among(history, NOW + 3600 - 120);
        assert_eq!(later.count, 0);
        assert_eq!(
            health(
                &HealthInput {
                    failed: later,
                    ..fresh()
                },
                NOW + 3600 - 120
            )
            .state,
            State::Green
        );
    }

    #[test]
    fn a_fill_trend_reaching_capacity_within_two_weeks_is_amber() {
        // From 0.4 a week ago to 0.7 now: 0.3 a week, so 1 in 7 days.
        let week = 7 * 86_400;
        let rising = [(NOW - week, 0.4), (NOW - week / 2, 0.55)];
        assert!((days_to_fill(&rising, (NOW, 0.7), NOW).unwrap() - 7.0).abs() < 1e-9);
        let input = HealthInput {
            fill_ratio: 0.7,
            fill_history: &rising,
            ..fresh()
        };
        let h = health(&input, NOW);
        assert_eq!(h.state, State::Amber);
        assert_eq!(
            reasons(&h),
            ["filling: 70% of capacity, projected to reach it in 7 days"]
        );
        // Half as fast: 14 days, still within the horizon; a third: 21, not.
        let slower = [(NOW - week, 0.55)];
        assert!((days_to_fill(&slower, (NOW, 0.7), NOW).unwrap() - 14.0).abs() < 1e-9);
        let slowest = [(NOW - week, 0.6)];
        let input = HealthInput {
            fill_ratio: 0.7,
            fill_history: &slowest,
            ..fresh()
        };
        assert_eq!(health(&input, NOW).state, State::Green);
        // Points older than the window, falling or alone: no projection.
        assert_eq!(days_to_fill(&[(NOW - 2 * week, 0.1)], (NOW, 0.7), NOW), None);
        assert_eq!(days_to_fill(&[(NOW - week, 0.8)], (NOW, 0.7), NOW), None);
        assert_eq!(days_to_fill(&[], (NOW, 0.7), NOW), None);
    }
}
