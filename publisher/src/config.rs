//! Publisher configuration: a TOML file, or the built-in default.
//!
//! ```toml
//! listen = "127.0.0.1:8080"          # By default, 127.0.0.1:8080.
//! data_dir = "./blocksieve-data"     # By default, ./blocksieve-data.
//! schedule = "0 */30 * * * *"        # 6-field cron (seconds first). By default, every 30 minutes.
//! snapshot_ttl_s = 7200              # Snapshot lifetime. By default, 2 hours.
//! cache_duration_s = 300             # Full-hash cache duration. By default, 5 minutes.
//!
//! [[lists]]
//! name = "phishing"
//! filter = "binary_fuse8"            # By default, binary_fuse8.
//! sources = [
//!   { path = "feeds/urls.txt", format = "urls" },
//!   { path = "feeds/hosts.txt", format = "hosts" },
//! ]
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use blocksieve_format::{FilterKind, is_valid_list_name};
use serde::Deserialize;

use crate::Error;

/// The built-in threat list: a real phishing URL feed shipped with the
/// publisher (phishunt, CC0; see `publisher/data/README.md`).
pub const BUILTIN_LIST: &[u8] = include_bytes!("../data/phishunt-urls.txt");

/// The whole publisher configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP server listens on. By default, `127.0.0.1:8080`.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Directory holding the signing key and published snapshots. By
    /// default, `./blocksieve-data`.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// Rebuild schedule, a 6-field cron expression with seconds first. By
    /// default, `0 */30 * * * *` (every 30 minutes).
    #[serde(default = "default_schedule")]
    pub schedule: String,
    /// Path of the Ed25519 signing key; created (mode 0600) when missing. By
    /// default, `<data_dir>/signing.key`.
    #[serde(default)]
    pub signing_key: Option<PathBuf>,
    /// Seconds a snapshot stays current after it is built (its expiry). By
    /// default, 7200 (two hours: four missed 30-minute rebuilds).
    #[serde(default = "default_ttl")]
    pub snapshot_ttl_s: u64,
    /// Seconds agents may cache a full-hash answer, hits and misses alike. By
    /// default, 300.
    #[serde(default = "default_cache_duration")]
    pub cache_duration_s: u64,
    /// The threat lists to build and serve. By default, one list `phishing`
    /// from the built-in feed.
    #[serde(default)]
    pub lists: Vec<ListConfig>,
}

/// One threat list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListConfig {
    /// List name: 1–64 bytes of `a-z0-9_-`.
    pub name: String,
    /// Filter kind. By default, `binary_fuse8`.
    #[serde(default = "default_filter")]
    pub filter: FilterKind,
    /// Where the entries come from.
    pub sources: Vec<SourceConfig>,
}

/// One source of entries.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Local file path; relative paths are relative to the configuration
    /// file's directory.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// The built-in feed instead of a file (used by the default
    /// configuration).
    #[serde(default)]
    pub builtin: bool,
    /// How lines are read.
    pub format: SourceFormat,
}

/// The line format of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceFormat {
    /// One URL per line; each becomes its most specific expression
    /// (host + path + query).
    Urls,
    /// Hosts-file lines (`0.0.0.0 name [name…]`); each name becomes the
    /// expression `name/`, matching every URL on that host.
    Hosts,
    /// One domain per line; each becomes `domain/`.
    Domains,
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
fn default_data_dir() -> PathBuf {
    PathBuf::from("./blocksieve-data")
}
fn default_schedule() -> String {
    "0 */30 * * * *".to_owned()
}
fn default_ttl() -> u64 {
    2 * 60 * 60
}
fn default_cache_duration() -> u64 {
    5 * 60
}
fn default_filter() -> FilterKind {
    FilterKind::BinaryFuse8
}

impl Default for Config {
    /// The built-in default: one list `phishing` from the shipped feed.
    fn default() -> Self {
        Self {
            listen: default_listen(),
            data_dir: default_data_dir(),
            schedule: default_schedule(),
            signing_key: None,
            snapshot_ttl_s: default_ttl(),
            cache_duration_s: default_cache_duration(),
            lists: vec![ListConfig {
                name: "phishing".to_owned(),
                filter: FilterKind::BinaryFuse8,
                sources: vec![SourceConfig {
                    path: None,
                    builtin: true,
                    format: SourceFormat::Urls,
                }],
            }],
        }
    }
}

impl Config {
    /// Reads and validates a TOML configuration file. Relative source paths
    /// are resolved against the file's directory.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the file and what is wrong.
    pub fn from_file(path: &Path) -> Result<Self, Error> {
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        let mut config: Config =
            toml::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for list in &mut config.lists {
            for source in &mut list.sources {
                if let Some(p) = &source.path {
                    if p.is_relative() {
                        source.path = Some(base.join(p));
                    }
                }
            }
        }
        if config.lists.is_empty() {
            return Err(Error::Config(format!(
                "{}: no [[lists]] configured",
                path.display()
            )));
        }
        config.validate()?;
        Ok(config)
    }

    /// Checks every field.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the field and what is wrong.
    pub fn validate(&self) -> Result<(), Error> {
        let mut names = std::collections::HashSet::new();
        for list in &self.lists {
            if !is_valid_list_name(&list.name) {
                return Err(Error::Config(format!(
                    "lists.name {:?}: must be 1-64 characters of a-z, 0-9, '-' and '_'",
                    list.name
                )));
            }
            if !names.insert(&list.name) {
                return Err(Error::Config(format!("lists.name {:?}: listed twice", list.name)));
            }
            if list.sources.is_empty() {
                return Err(Error::Config(format!("lists.{}.sources: empty", list.name)));
            }
            for s in &list.sources {
                if s.path.is_some() == s.builtin {
                    return Err(Error::Config(format!(
                        "lists.{}.sources: each source needs exactly one of `path` or `builtin = true`",
                        list.name
                    )));
                }
            }
        }
        if self.snapshot_ttl_s < 60 {
            return Err(Error::Config(format!(
                "snapshot_ttl_s = {}: must be at least 60",
                self.snapshot_ttl_s
            )));
        }
        if self.schedule.split_whitespace().count() != 6 {
            return Err(Error::Config(format!(
                "schedule {:?}: must be a 6-field cron expression (sec min hour day month weekday)",
                self.schedule
            )));
        }
        Ok(())
    }

    /// The signing key path: `signing_key`, or `<data_dir>/signing.key`.
    pub fn signing_key_path(&self) -> PathBuf {
        self.signing_key
            .clone()
            .unwrap_or_else(|| self.data_dir.join("signing.key"))
    }

    /// Full-hash cache duration as a [`Duration`].
    pub fn cache_duration(&self) -> Duration {
        Duration::from_secs(self.cache_duration_s)
    }
}
