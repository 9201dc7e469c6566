//! The files of `deploy/` against the publisher they deploy: the alert
//! rules use only metrics the publisher registers, the systemd unit runs
//! the paths the package installs, and the package ships what it names.
//! (The rules' logic is tested by `promtool test rules` in `.ci/deploy.sh`.)

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use blocksieve_publisher::internal::metrics::{BUILD_OUTCOMES, Metrics};

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(file)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `blocksieve_*` name in the rules' `expr`s.
fn rule_metric_names() -> BTreeSet<String> {
    let rules = read(&deploy("prometheus/blocksieve.rules.yml"));
    let mut names = BTreeSet::new();
    let mut in_expr = false;
    for line in rules.lines() {
        let t = line.trim_start();
        if t.starts_with('#') {
            continue;
        }
        // An `expr:` may continue on the lines indented under it.
        if t.starts_with("expr:") {
            in_expr = true;
        } else if t.contains(':') && !t.starts_with('>') {
            in_expr = false;
        }
        if !in_expr {
            continue;
        }
        let mut rest = t;
        while let Some(at) = rest.find("blocksieve_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            names.insert(name);
        }
    }
    names
}

/// Every series name the publisher's `/metrics` shows once it has built,
/// refused, served and answered: the names of the sample lines. (A family
/// with no series yet is not in the text at all.)
fn registered_metric_names() -> BTreeSet<String> {
    let metrics = Metrics::new();
    metrics.snapshot_served("p", 7, 100, 2048);
    for outcome in BUILD_OUTCOMES {
        metrics.build_finished("p", outcome, 1.5, Some(0.004));
    }
    metrics.gate_refused("p", "shrink");
    metrics.source_failed("p", 1);
    metrics.answered_behind("p");
    metrics.request("/healthz", 200, 0.001);
    metrics.store_reachable(true);
    metrics.fresh_at("p", 1_800_000_000, Some(1_800_003_600));
    metrics.build_interval("p", 1800);
    metrics.build_health("p", Some(false), Some(0), Some(0.008));
    metrics.capacity_fill("p", 0.05);
    metrics.request_bucket_fill("p", 0.5);
    metrics.store_generation_refused("p", false);
    metrics.store_reached_at("p", 1_800_000_000);
    let text = metrics.render();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// The gauges of the operators' health states (the status page's): each
/// is registered, and some rule alerts on it.
const HEALTH_GAUGES: [&str; 8] = [
    "blocksieve_build_overdue_timestamp_seconds",
    "blocksieve_last_build_refused",
    "blocksieve_sources_on_last_good",
    "blocksieve_fpr_bound",
    "blocksieve_capacity_fill_ratio",
    "blocksieve_store_generation_refused",
    "blocksieve_request_bucket_fill_ratio",
    "blocksieve_store_last_reached_timestamp_seconds",
];

#[test]
fn every_metric_the_alert_rules_use_is_one_the_publisher_registers() {
    let used = rule_metric_names();
    let registered = registered_metric_names();
    assert!(
        registered.contains("blocksieve_builds_total") && registered.contains("blocksieve_measured_fpr"),
        "{registered:#?}"
    );
    assert!(used.len() >= 8, "{used:#?}");
    let unknown: Vec<&String> = used.iter().filter(|n| !registered.contains(*n)).collect();
    assert!(
        unknown.is_empty(),
        "the alert rules use metrics the publisher does not register: {unknown:?}"
    );
    for name in HEALTH_GAUGES {
        assert!(registered.contains(name), "{name} is not registered");
        assert!(used.contains(name), "no rule uses {name}");
    }
}

#[test]
fn the_unit_checks_and_serves_the_installed_configuration_in_its_state_directory() {
    let unit = read(&deploy("blocksieve-publisher.service"));
    let config = "/etc/blocksieve/publisher.toml";
    for want in [
        format!("ExecStartPre=/usr/bin/blocksieve-publisher check-config {config}\n"),
        format!("ExecStart=/usr/bin/blocksieve-publisher serve --config {config}\n"),
        "DynamicUser=yes\n".to_owned(),
        "StateDirectory=blocksieve\n".to_owned(),
        "ConfigurationDirectory=blocksieve\n".to_owned(),
        "ProtectSystem=strict\n".to_owned(),
        "NoNewPrivileges=yes\n".to_owned(),
        "CapabilityBoundingSet=\n".to_owned(),
        "KillSignal=SIGTERM\n".to_owned(),
    ] {
        assert!(unit.contains(&want), "{want:?} not in the unit");
    }
    // The stop timeout leaves room for the drain: requests, a first build,
    // a cancelled build's blocked work, drain_timeout_s each.
    let sample: blocksieve_publisher::Config = toml_config(&deploy("publisher.toml"));
    let stop_s: u64 = unit
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStopSec="))
        .and_then(|v| v.trim_end_matches('s').parse().ok())
        .unwrap();
    assert!(stop_s > 3 * sample.drain_timeout_s, "{stop_s}");
    assert_eq!(sample.data_dir, Path::new("/var/lib/blocksieve"));
    // The unit's LimitNOFILE covers the sample's max_connections.
    let nofile: usize = unit
        .lines()
        .find_map(|l| l.strip_prefix("LimitNOFILE="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(nofile > sample.max_connections, "{nofile}");
}

fn toml_config(path: &Path) -> blocksieve_publisher::Config {
    blocksieve_publisher::Config::from_file(path).unwrap()
}

#[test]
fn the_package_installs_the_unit_the_sample_configuration_and_the_rules() {
    let manifest = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"));
    let deb = &manifest[manifest
        .find("[package.metadata.deb]")
        .expect("[package.metadata.deb]")..];
    for want in [
        "\"/etc/blocksieve/publisher.toml\"",
        "\"../deploy/publisher.toml\"",
        "\"../deploy/prometheus/blocksieve.rules.yml\"",
        "unit-scripts = \"../deploy\"",
    ] {
        assert!(deb.contains(want), "{want} not in [package.metadata.deb]");
    }
    // Every file it takes from the tree exists.
    for quoted in deb.split('"').skip(1).step_by(2) {
        if quoted.starts_with("../") && !quoted.contains('*') {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(quoted);
            assert!(path.exists(), "{} is missing", path.display());
        }
    }
}
