//! The settings a publisher runs with: a [`Config`] once validated, its
//! times as [`Duration`]s.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use blocksieve_format::TrustedKey;

use super::{Config, ListConfig, LogFormat, Role};
use crate::Error;

/// A validated [`Config`]: the same settings, with every time a
/// [`Duration`] instead of a count of seconds. Only [`Config::resolve`]
/// makes one, so holding one means the configuration passed
/// [`Config::validate`]. Field meanings and defaults are those of the
/// [`Config`] field of the same name (without `_s`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// Address the HTTP server listens on ([`Config::listen`]).
    pub listen: SocketAddr,
    /// Directory holding the signing key, source caches and published
    /// snapshots ([`Config::data_dir`]).
    pub data_dir: PathBuf,
    /// Rebuild schedule for lists without their own, a 6-field cron
    /// expression ([`Config::schedule`]).
    pub schedule: String,
    /// Path of the Ed25519 signing key, when set ([`Config::signing_key`]);
    /// see [`Settings::signing_key_path`].
    pub signing_key: Option<PathBuf>,
    /// How long a snapshot stays current after it is built: its expiry
    /// ([`Config::snapshot_ttl_s`]).
    pub snapshot_ttl: Duration,
    /// How long agents should wait before checking for a new snapshot
    /// ([`Config::next_check_s`]).
    pub next_check: Duration,
    /// How long agents may cache a full-hash answer
    /// ([`Config::cache_duration_s`]).
    pub cache_duration: Duration,
    /// Published versions kept on disk per list ([`Config::keep_versions`]).
    pub keep_versions: usize,
    /// Deltas kept per list ([`Config::delta_window`]).
    pub delta_window: usize,
    /// Full-hash bucket padding in responses, 0 for none
    /// ([`Config::padding`]).
    pub padding: usize,
    /// Largest expected bucket a request prefix may ask for
    /// ([`Config::max_bucket_entries`]).
    pub max_bucket_entries: u64,
    /// Most prefixes in one full-hash request
    /// ([`Config::max_prefixes_per_request`]).
    pub max_prefixes_per_request: usize,
    /// How long a request may take once its body is read
    /// ([`Config::request_timeout_s`]).
    pub request_timeout: Duration,
    /// How long a client may take to send a request's body
    /// ([`Config::body_read_timeout_s`]).
    pub body_read_timeout: Duration,
    /// How long a client may take to send a request's line and headers
    /// ([`Config::header_read_timeout_s`]).
    pub header_read_timeout: Duration,
    /// How long a response write may make no progress
    /// ([`Config::write_stall_timeout_s`]).
    pub write_stall_timeout: Duration,
    /// Requests served at once ([`Config::max_concurrency`]).
    pub max_concurrency: usize,
    /// Origins allowed cross-origin access ([`Config::cors_allowed_origins`]).
    pub cors_allowed_origins: Vec<String>,
    /// URL checks per second over the fleet, for sizing advice
    /// ([`Config::fleet_checks_per_second`]).
    pub fleet_checks_per_second: f64,
    /// Connections open at once ([`Config::max_connections`]).
    pub max_connections: usize,
    /// How long in-flight requests get to finish after a shutdown signal
    /// ([`Config::drain_timeout_s`]).
    pub drain_timeout: Duration,
    /// Log format ([`Config::log_format`]).
    pub log_format: LogFormat,
    /// The object store URL, when set ([`Config::store`]).
    pub store: Option<String>,
    /// Options of the store's client ([`Config::store_options`]).
    pub store_options: std::collections::BTreeMap<String, String>,
    /// Use a store that ignores conditional writes
    /// ([`Config::dangerous_store_ignores_conditions`]).
    pub dangerous_store_ignores_conditions: bool,
    /// What `serve` does ([`Config::role`]).
    pub role: Role,
    /// How often a replica checks the store ([`Config::replica_poll_s`]).
    pub replica_poll: Duration,
    /// How long a builder's lease on a list lasts ([`Config::lease_s`]).
    pub lease: Duration,
    /// The key snapshots are verified with, when configured
    /// ([`Config::public_key`]).
    pub public_key: Option<TrustedKey>,
    /// Keys of earlier signing keys ([`Config::previous_public_keys`]).
    pub previous_public_keys: Vec<TrustedKey>,
    /// The threat lists to build and serve ([`Config::lists`]); a source's
    /// fetch timeout is [`SourceConfig::timeout`](super::SourceConfig::timeout).
    pub lists: Vec<ListConfig>,
}

impl Config {
    /// Validates this configuration ([`Config::validate`]) and turns it
    /// into the [`Settings`] a publisher runs with.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the field and what is wrong, as
    /// [`Config::validate`].
    pub fn resolve(self) -> Result<Settings, Error> {
        self.resolve_with(&super::process_env)
    }

    /// [`Config::resolve`], reading the environment variables of sources'
    /// `headers` from `env` instead of the process environment: each is
    /// read once, here, and its value kept in the [`Settings`].
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the field and what is wrong, as
    /// [`Config::validate_with`].
    pub fn resolve_with(mut self, env: super::EnvLookup<'_>) -> Result<Settings, Error> {
        for list in &mut self.lists {
            for source in list.sources.iter_mut().chain(&mut list.allow) {
                for value in source.headers.values_mut() {
                    value.resolve(env);
                }
            }
        }
        self.validate_with(env)?;
        Ok(Settings {
            listen: self.listen,
            data_dir: self.data_dir,
            schedule: self.schedule,
            signing_key: self.signing_key,
            snapshot_ttl: Duration::from_secs(self.snapshot_ttl_s),
            next_check: Duration::from_secs(self.next_check_s),
            cache_duration: Duration::from_secs(self.cache_duration_s),
            keep_versions: self.keep_versions,
            delta_window: self.delta_window,
            padding: self.padding,
            max_bucket_entries: self.max_bucket_entries,
            max_prefixes_per_request: self.max_prefixes_per_request,
            request_timeout: Duration::from_secs(self.request_timeout_s),
            body_read_timeout: Duration::from_secs(self.body_read_timeout_s),
            header_read_timeout: Duration::from_secs(self.header_read_timeout_s),
            write_stall_timeout: Duration::from_secs(self.write_stall_timeout_s),
            max_concurrency: self.max_concurrency,
            cors_allowed_origins: self.cors_allowed_origins,
            fleet_checks_per_second: self.fleet_checks_per_second,
            max_connections: self.max_connections,
            drain_timeout: Duration::from_secs(self.drain_timeout_s),
            log_format: self.log_format,
            store: self.store,
            store_options: self.store_options,
            dangerous_store_ignores_conditions: self.dangerous_store_ignores_conditions,
            role: self.role,
            replica_poll: Duration::from_secs(self.replica_poll_s),
            lease: Duration::from_secs(self.lease_s),
            // Checked by `validate`.
            public_key: (self.public_key.as_deref()).and_then(|k| TrustedKey::from_base64(k.trim()).ok()),
            previous_public_keys: (self.previous_public_keys.iter())
                .filter_map(|k| TrustedKey::from_base64(k.trim()).ok())
                .collect(),
            lists: self.lists,
        })
    }
}

impl Settings {
    /// The signing key path: `BLOCKSIEVE_SIGNING_KEY`, else `signing_key`,
    /// else `<data_dir>/signing.key`.
    pub fn signing_key_path(&self) -> PathBuf {
        if let Some(p) = std::env::var_os(super::SIGNING_KEY_ENV).filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        self.signing_key
            .clone()
            .unwrap_or_else(|| crate::storage::default_signing_key_path(&self.data_dir))
    }

    /// Where [`Settings::signing_key_path`] came from, for a message after
    /// the path: ` (from BLOCKSIEVE_SIGNING_KEY)` when the environment
    /// variable set it, else nothing.
    pub fn signing_key_origin(&self) -> String {
        if std::env::var_os(super::SIGNING_KEY_ENV).is_some_and(|v| !v.is_empty()) {
            format!(" (from {})", super::SIGNING_KEY_ENV)
        } else {
            String::new()
        }
    }

    /// The schedule of list `index`: its own, else the global `schedule`.
    pub fn schedule_of(&self, index: usize) -> &str {
        self.lists
            .get(index)
            .and_then(|l| l.schedule.as_deref())
            .unwrap_or(&self.schedule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Gates, SourceConfig};

    #[test]
    fn resolve_turns_every_seconds_field_into_a_duration() {
        let text = r#"
            snapshot_ttl_s = 600
            next_check_s = 7
            cache_duration_s = 8
            request_timeout_s = 9
            body_read_timeout_s = 11
            header_read_timeout_s = 12
            write_stall_timeout_s = 13
            drain_timeout_s = 14
            schedule = "0 0 * * * *"
            [[lists]]
            name = "p"
            schedule = "0 5 * * * *"
            sources = [{ url = "https://feeds.example/u.txt", format = "urls", timeout_s = 15 }]
            [[lists]]
            name = "q"
            sources = [{ path = "v.txt", format = "urls" }]
        "#;
        let s = toml::from_str::<Config>(text).unwrap().resolve().unwrap();
        let secs = Duration::from_secs;
        assert_eq!(
            [
                s.snapshot_ttl,
                s.next_check,
                s.cache_duration,
                s.request_timeout,
                s.body_read_timeout,
                s.header_read_timeout,
                s.write_stall_timeout,
                s.drain_timeout,
                s.lists[0].sources[0].timeout(),
                s.lists[1].sources[0].timeout(),
            ],
            [
                secs(600),
                secs(7),
                secs(8),
                secs(9),
                secs(11),
                secs(12),
                secs(13),
                secs(14),
                secs(15),
                secs(60)
            ]
        );
        assert_eq!(
            (s.schedule_of(0), s.schedule_of(1)),
            ("0 5 * * * *", "0 0 * * * *")
        );
    }

    #[test]
    fn resolve_keeps_every_default() {
        let c = Config::default();
        let s = c.clone().resolve().unwrap();
        let secs = Duration::from_secs;
        assert_eq!(
            (s.snapshot_ttl, s.next_check, s.cache_duration),
            (secs(7200), secs(300), secs(300))
        );
        assert_eq!(
            (
                s.request_timeout,
                s.body_read_timeout,
                s.header_read_timeout,
                s.write_stall_timeout,
                s.drain_timeout
            ),
            (secs(30), secs(10), secs(10), secs(30), secs(10))
        );
        assert_eq!(s.cache_duration, Duration::from_secs(c.cache_duration_s));
        assert_eq!(
            (s.listen, &s.data_dir, &s.schedule, &s.signing_key),
            (c.listen, &c.data_dir, &c.schedule, &c.signing_key)
        );
        assert_eq!(
            (
                s.keep_versions,
                s.padding,
                s.max_bucket_entries,
                s.max_prefixes_per_request,
                s.max_concurrency,
                s.max_connections,
                s.log_format
            ),
            (5, 0, 4096, 1000, 1024, 10_000, LogFormat::Text)
        );
        assert_eq!(s.lists.len(), 1);
        assert_eq!(s.lists[0].name, "phishing");
        assert!(s.lists[0].sources[0].builtin);
        assert_eq!((s.role, s.replica_poll, s.public_key), (Role::All, secs(5), None));
        assert_eq!(SourceConfig::builtin().timeout(), secs(60));
    }

    #[test]
    fn a_file_naming_only_its_lists_gets_every_default() {
        let lists = "[[lists]]\nname = \"p\"\nsources = [{ path = \"u.txt\", format = \"urls\" }]";
        let parsed: Config = toml::from_str(lists).unwrap();
        assert_eq!(
            parsed.lists[0].gates,
            Gates {
                min_entries: 1,
                max_shrink: 0.5,
                max_fpr_ratio: 2.0
            }
        );
        assert_eq!(parsed.lists[0].gates, Gates::default());
        // Every other field as in `Config::default()`.
        let without_lists = |c: Config| {
            format!(
                "{:?}",
                Config {
                    lists: Vec::new(),
                    ..c
                }
            )
        };
        assert_eq!(without_lists(parsed), without_lists(Config::default()));
        // A file without lists names none: the built-in list is the default
        // of no file at all.
        assert!(toml::from_str::<Config>("").unwrap().lists.is_empty());
        // Unknown keys stay refused, at the top, in a list, its gates and
        // its sources; required keys stay required.
        for bad in [
            format!("ttl_s = 5\n{lists}"),
            format!("{lists}\nfilters = \"bloom\""),
            format!("{lists}\ngates = {{ min_entry = 1 }}"),
            lists.replace("format = \"urls\"", "format = \"urls\", timeout = 5"),
            lists.replace("name = \"p\"\n", ""),
            lists.replace(", format = \"urls\"", ""),
        ] {
            assert!(toml::from_str::<Config>(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resolve_refuses_what_validate_refuses() {
        for broken in [
            Config {
                snapshot_ttl_s: 59,
                ..Config::default()
            },
            Config {
                request_timeout_s: 0,
                ..Config::default()
            },
            Config {
                lists: Vec::new(),
                ..Config::default()
            },
        ] {
            let want = broken.validate().unwrap_err().to_string();
            let got = broken.resolve().unwrap_err().to_string();
            assert_eq!(got, want);
        }
    }
}
