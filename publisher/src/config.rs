//! Publisher configuration: a TOML file, or the built-in default.
//!
//! Every field, its default and its limits are documented in
//! `docs/configuration.md`; [`Config::validate`] checks them at start and
//! names the offending field, and [`Config::resolve`] turns a valid
//! configuration into the [`Settings`] a publisher runs with, its times as
//! `Duration`s. The signing key path may be overridden by the
//! environment variable `BLOCKSIEVE_SIGNING_KEY`, so secrets need not live in
//! the file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use blocksieve_format::{FilterKind, KeyBits, TrustedKey, is_valid_list_name};
use serde::Deserialize;

use crate::Error;

pub mod check;
mod headers;
mod redact;
pub mod schedule;
mod settings;
mod source;

pub use headers::{EnvLookup, HeaderValueConfig, RESERVED_HEADERS, process_env};
pub use redact::redact_url;
pub use settings::Settings;
use source::check_source;
pub use source::{
    CSV_DELIMITERS, DEFAULT_JSON_ALLOW_KEY, MAX_SOURCE_RETRIES, SourceConfig, SourceFormat, archive_path,
};

/// The built-in threat list: a real phishing URL feed shipped with the
/// publisher (phishunt, CC0; see `publisher/data/README.md`).
pub const BUILTIN_LIST: &[u8] = include_bytes!("../data/phishunt-urls.txt");

/// Environment variable that overrides [`Config::signing_key`].
pub const SIGNING_KEY_ENV: &str = "BLOCKSIEVE_SIGNING_KEY";

/// URL checks per second over the whole fleet that sizing advice assumes
/// when the configuration names none ([`Config::fleet_checks_per_second`]):
/// say 100,000 agents checking a URL every 100 seconds.
pub const DEFAULT_FLEET_CHECKS_PER_SECOND: f64 = 1_000.0;

/// The whole publisher configuration.
///
/// A field left out of the file takes its value in [`Config::default`],
/// except `lists`, which is then empty: a file names its lists.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP server listens on. By default, `127.0.0.1:8080`.
    pub listen: SocketAddr,
    /// Directory holding the signing key, source caches and published
    /// snapshots. By default, `./blocksieve-data`.
    pub data_dir: PathBuf,
    /// Rebuild schedule for lists without their own, a 6-field cron
    /// expression with seconds first. By default, `0 */30 * * * *` (every 30
    /// minutes).
    pub schedule: String,
    /// Path of the Ed25519 signing key; created (mode 0600) when missing.
    /// `BLOCKSIEVE_SIGNING_KEY` overrides it. By default,
    /// `<data_dir>/signing.key`.
    pub signing_key: Option<PathBuf>,
    /// Seconds a snapshot stays current after it is built (its expiry). By
    /// default, 7200 (two hours: four missed 30-minute rebuilds).
    pub snapshot_ttl_s: u64,
    /// Seconds agents should wait before checking for a new snapshot (the
    /// `X-Blocksieve-Next-Check` hint and the latest snapshot's `max-age`).
    /// By default, 300.
    pub next_check_s: u64,
    /// Seconds agents may cache a full-hash answer, hits and misses alike. By
    /// default, 300.
    pub cache_duration_s: u64,
    /// Published versions kept on disk per list (each stays downloadable at
    /// its immutable URL). By default, 5.
    pub keep_versions: usize,
    /// Deltas kept per list: an agent at most this many builds behind
    /// follows the list by deltas (`GET /v1/lists/{name}/updates/{from}`);
    /// an older one, or one whose chain would be larger than the snapshot,
    /// is answered `410 no_delta` and downloads the snapshot. 1 to
    /// [`blocksieve_format::MAX_CHAIN_DELTAS`]. By default, 336 (seven days
    /// of 30-minute builds).
    pub delta_window: usize,
    /// Pad every full-hash bucket in responses to at least this many entries
    /// with random hashes of the same prefix, so a hit and a miss have the
    /// same size (0 turns padding off). By default, 0.
    pub padding: usize,
    /// Refuse (400) a request prefix under which one list's expected bucket
    /// holds more full hashes than this: each list's bucket is capped, not
    /// their sum (on a search naming its lists, only those lists'). By
    /// default, 4096.
    pub max_bucket_entries: u64,
    /// Most prefixes in one `POST /v1/hashes:search`. By default, 1000.
    pub max_prefixes_per_request: usize,
    /// Seconds a request may take, once its body is read, before the server
    /// answers 408. By default, 30.
    pub request_timeout_s: u64,
    /// Seconds a client may take to send a request's body, counted from when
    /// its headers were read; a slower one is answered 408 and disconnected.
    /// Bodies are read before a request takes a `max_concurrency` slot, so a
    /// client slow to send its body holds none. By default, 10.
    pub body_read_timeout_s: u64,
    /// Seconds a client may take to send a request's line and headers,
    /// counted from when the server starts waiting for them, so an idle
    /// keep-alive connection is closed after this long too; a slower client
    /// (e.g. one sending a byte a second) is disconnected. By default, 10.
    pub header_read_timeout_s: u64,
    /// Seconds a response write may make no progress (a client that stopped
    /// reading) before the connection is closed. By default, 30.
    pub write_stall_timeout_s: u64,
    /// Requests served at once; more wait. By default, 1024.
    pub max_concurrency: usize,
    /// Origins whose web pages may call the API from the browser (CORS):
    /// `["*"]` for any, or origins such as `https://mail.example`. By
    /// default, none.
    pub cors_allowed_origins: Vec<String>,
    /// URL checks per second over the whole fleet of agents: the status
    /// page and `build`'s report turn each list's expected full-hash
    /// requests per 1,000 checks into requests per second with it. By
    /// default, 1,000 (say 100,000 agents checking a URL every 100
    /// seconds).
    pub fleet_checks_per_second: f64,
    /// Connections open at once; beyond this many the server stops accepting
    /// and new connections wait in the kernel's accept backlog until one
    /// closes. By default, 10,000.
    pub max_connections: usize,
    /// Seconds in-flight requests get to finish after a shutdown signal,
    /// and then as long again for a first build still running (cancelled
    /// after). By default, 10.
    pub drain_timeout_s: u64,
    /// Log format: `text` or `json`. By default, `text`.
    pub log_format: LogFormat,
    /// Where published snapshots and the sources' last good content are
    /// stored: an object store URL, `s3://bucket/prefix` (the keys of the
    /// data directory under `prefix`). The signing key and the lock stay in
    /// `data_dir`; builders sharing a store coordinate through a lease per
    /// list and conditional writes, each with the same signing key. By
    /// default, none: the data directory.
    pub store: Option<String>,
    /// Options of the `store`'s client, over the `AWS_*` environment
    /// variables: `endpoint`, `region`, `allow_http`, `access_key_id`,
    /// `secret_access_key`, ... (the keys of `object_store`'s
    /// `AmazonS3ConfigKey`). By default, none.
    pub store_options: std::collections::BTreeMap<String, String>,
    /// Use a `store` that fails the start-up self-test of conditional
    /// writes (it ignores `If-None-Match` or `If-Match`): safe only while one
    /// publisher at a time builds into it. By default, false.
    pub dangerous_store_ignores_conditions: bool,
    /// What `serve` does: `all` fetches, builds, stores and serves;
    /// `builder` fetches, builds and stores, and serves only the
    /// operational routes; `replica` builds nothing and serves, from
    /// memory, what a builder has published to `store` (which it then
    /// requires). By default, `all`.
    pub role: Role,
    /// Seconds between a replica's checks of the store for a newer
    /// generation of each list (one conditional GET of its `latest` pointer
    /// per list per check). Builders on a store check it as often. By
    /// default, 5.
    pub replica_poll_s: u64,
    /// Seconds a builder on an object store holds a list's lease for one
    /// build: other builders skip that list's build meanwhile. Longer than
    /// a build takes; a builder killed mid-build holds it until it expires
    /// (one stopped by SIGINT or SIGTERM releases it as its build stops).
    /// By default, 600.
    pub lease_s: u64,
    /// The public key snapshots are verified with, base64 as `keygen`
    /// prints it, for a replica, which has no signing key. By default,
    /// none: a replica reads the public key file beside the signing key
    /// (`<data_dir>/public.key`); the other roles use the signing key's.
    pub public_key: Option<String>,
    /// Public keys (base64) of signing keys used before the current one,
    /// while a key is rotated (README "Rotating the signing key"): a
    /// replica also serves generations signed by them, and a builder takes
    /// them as its own past (it follows, delta-encodes against and removes
    /// by retention what they signed, and publishes each list under its
    /// current key at the next build even when unchanged). Agents must
    /// trust the new key before builders switch to it. By default, none.
    pub previous_public_keys: Vec<String>,
    /// The threat lists to build and serve. By default, one list `phishing`
    /// from the built-in feed; a file without `[[lists]]` names none (and is
    /// refused by [`Config::from_file`]).
    #[serde(default = "Vec::new")]
    pub lists: Vec<ListConfig>,
}

/// What a publisher process does ([`Config::role`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Fetch, build, store and serve everything.
    #[default]
    All,
    /// Fetch, build and store on the schedule; serve only the status page
    /// `/` (with `GET /v1/lists/{name}/history`), `/healthz`, `/readyz` and
    /// `/metrics`.
    Builder,
    /// Build nothing: follow the store and serve the whole API from memory.
    Replica,
}

impl Role {
    /// The role's name in the configuration and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Builder => "builder",
            Self::Replica => "replica",
        }
    }

    /// The role named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::All, Self::Builder, Self::Replica]
            .into_iter()
            .find(|r| r.name() == name)
    }

    /// Whether this role fetches feeds and builds snapshots.
    pub fn builds(self) -> bool {
        self != Self::Replica
    }

    /// Whether this role serves the `/v1` API.
    pub fn serves_api(self) -> bool {
        self != Self::Builder
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Which filter a list is built with. Read from one string: a
/// [`FilterKind`] name or `auto`; any other value is an error that lists
/// the valid ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterChoice {
    /// A fixed kind: `binary_fuse8`, `binary_fuse16`, `binary_fuse32`, `bloom`.
    Kind(FilterKind),
    /// `auto`: the smallest binary fuse kind whose expected full-hash
    /// requests per 1,000 URL checks stay under the list's target.
    Auto(AutoFilter),
}

impl FilterChoice {
    /// The valid values, as written in the configuration: every filter
    /// kind, then `auto`.
    fn names() -> impl Iterator<Item = &'static str> {
        FilterKind::ALL.into_iter().map(FilterKind::name).chain(["auto"])
    }

    /// The choice named `name`, if any.
    fn from_name(name: &str) -> Option<Self> {
        if name == "auto" {
            return Some(Self::Auto(AutoFilter::Auto));
        }
        FilterKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .map(Self::Kind)
    }
}

impl<'de> Deserialize<'de> for FilterChoice {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = FilterChoice;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "one of {}", valid_filters())
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<FilterChoice, E> {
                FilterChoice::from_name(value).ok_or_else(|| {
                    E::custom(format!(
                        "unknown filter {value:?}, expected one of {}",
                        valid_filters()
                    ))
                })
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// `binary_fuse8, binary_fuse16, …, auto`: the valid `filter` values.
fn valid_filters() -> String {
    FilterChoice::names().collect::<Vec<_>>().join(", ")
}

/// The word `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoFilter {
    /// Choose by the false-positive target.
    Auto,
}

/// One threat list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListConfig {
    /// List name: 1–64 bytes of `a-z0-9_-`.
    pub name: String,
    /// Filter kind, or `auto`. By default, `binary_fuse8`.
    #[serde(default = "default_filter")]
    pub filter: FilterChoice,
    /// Bits per key when `filter = "bloom"` (1–64). By default, 12.
    #[serde(default = "default_bloom_bits")]
    pub bloom_bits_per_key: u32,
    /// Filter key width, 32 or 64 bits of each full hash. By default, 32.
    #[serde(default = "default_key_bits")]
    pub key_bits: u8,
    /// For `filter = "auto"`: the most full-hash requests per 1,000 checks
    /// of unlisted URLs to accept. By default, 10.
    #[serde(default = "default_fh_target")]
    pub target_full_hash_requests_per_1000: f64,
    /// Smallest expected number of listed full hashes in the bucket an agent
    /// asks for; sets the advertised request prefix length (the longest of
    /// 8, 12, …, 32 bits that keeps it). By default, 64.
    #[serde(default = "default_min_anonymity")]
    pub min_anonymity: u64,
    /// Fixes the advertised request prefix length in bits (8–32, a multiple
    /// of 4) instead of deriving it from `min_anonymity`. By default, unset.
    #[serde(default)]
    pub request_prefix_bits: Option<u8>,
    /// This list's rebuild schedule (6-field cron). By default, the global
    /// `schedule`.
    #[serde(default)]
    pub schedule: Option<String>,
    /// Publishing gates.
    #[serde(default)]
    pub gates: Gates,
    /// Where the entries come from.
    pub sources: Vec<SourceConfig>,
    /// Allowlists: sources of the same shape as `sources` whose entries are
    /// removed from the list. An entry is allowed by its full hash, so an
    /// allowed expression is removed wherever a source lists the same
    /// expression (allow wins), and nothing else is: an allowed `a.example`
    /// does not unblock a listed `x.a.example`, and an allowed `x.a.example`
    /// stays blocked by a listed `a.example`, whose `a.example/` matches
    /// every subdomain (a filter has no exceptions). A JSON block source's own allow array
    /// (`json_allow_key`) is read the same way. An allow source that fails
    /// keeps its last good content like any source; one that has none is
    /// left out of the build with a warning, since a missing allowlist can
    /// only block more, never less. By default, none.
    #[serde(default)]
    pub allow: Vec<SourceConfig>,
}

/// Checks a build must pass before it is published. A refused build leaves
/// the previous snapshot serving; `--force` overrides the gates once.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Gates {
    /// Refuse a list with fewer distinct entries. By default, 1 (refuse an
    /// empty list).
    pub min_entries: u64,
    /// Refuse a list that shrank by more than this fraction since the last
    /// published snapshot. By default, 0.5.
    pub max_shrink: f64,
    /// Refuse a filter whose measured false-positive rate exceeds this
    /// multiple of its theoretical rate beyond chance (the count would come
    /// from a filter at its theoretical rate with probability under 1e-6).
    /// By default, 2.0.
    pub max_fpr_ratio: f64,
}

impl Default for Gates {
    fn default() -> Self {
        Self {
            min_entries: 1,
            max_shrink: 0.5,
            max_fpr_ratio: 2.0,
        }
    }
}

// `ListConfig` has required keys (`name`, `sources`), which serde's
// container `default` cannot leave required: its other keys name their
// defaults one by one, here, and `ListConfig::new` uses the same functions
// (`SourceConfig`'s are in `config/source.rs`).
fn default_filter() -> FilterChoice {
    FilterChoice::Kind(FilterKind::BinaryFuse8)
}
fn default_bloom_bits() -> u32 {
    blocksieve_format::DEFAULT_BLOOM_BITS_PER_KEY
}
fn default_key_bits() -> u8 {
    32
}
fn default_fh_target() -> f64 {
    10.0
}
fn default_min_anonymity() -> u64 {
    64
}
impl ListConfig {
    /// A list `name` over `sources` with every other field at its default.
    pub fn new(name: impl Into<String>, sources: Vec<SourceConfig>) -> Self {
        Self {
            name: name.into(),
            filter: default_filter(),
            bloom_bits_per_key: default_bloom_bits(),
            key_bits: default_key_bits(),
            target_full_hash_requests_per_1000: default_fh_target(),
            min_anonymity: default_min_anonymity(),
            request_prefix_bits: None,
            schedule: None,
            gates: Gates::default(),
            sources,
            allow: Vec::new(),
        }
    }

    /// The filter key width.
    pub fn key_width(&self) -> KeyBits {
        if self.key_bits == 64 {
            KeyBits::Bits64
        } else {
            KeyBits::Bits32
        }
    }
}

impl Default for Config {
    /// The built-in default: one list `phishing` from the shipped feed.
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./blocksieve-data"),
            schedule: "0 */30 * * * *".to_owned(),
            signing_key: None,
            snapshot_ttl_s: 2 * 60 * 60,
            next_check_s: 5 * 60,
            cache_duration_s: 5 * 60,
            keep_versions: 5,
            delta_window: 336,
            padding: 0,
            max_bucket_entries: 4096,
            max_prefixes_per_request: blocksieve_format::api::MAX_PREFIXES_PER_REQUEST,
            request_timeout_s: 30,
            body_read_timeout_s: 10,
            header_read_timeout_s: 10,
            write_stall_timeout_s: 30,
            max_concurrency: 1024,
            cors_allowed_origins: Vec::new(),
            fleet_checks_per_second: DEFAULT_FLEET_CHECKS_PER_SECOND,
            max_connections: 10_000,
            drain_timeout_s: 10,
            log_format: LogFormat::Text,
            store: None,
            store_options: std::collections::BTreeMap::new(),
            dangerous_store_ignores_conditions: false,
            role: Role::All,
            replica_poll_s: 5,
            lease_s: 600,
            public_key: None,
            previous_public_keys: Vec::new(),
            lists: vec![ListConfig::new("phishing", vec![SourceConfig::builtin()])],
        }
    }
}

impl Config {
    /// Reads and validates a TOML configuration file. Relative source paths
    /// are resolved against the file's directory.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the file, the field and what is wrong.
    pub fn from_file(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::config(path.display(), e))?;
        let mut config: Config = toml::from_str(&text)
            .map_err(|e| Error::config(path.display(), headers::parse_error(&text, &e)))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for list in &mut config.lists {
            for source in list.sources.iter_mut().chain(&mut list.allow) {
                if let Some(p) = &source.path
                    && p.is_relative()
                {
                    source.path = Some(base.join(p));
                }
            }
        }
        if config.lists.is_empty() {
            return Err(Error::config(path.display(), "no [[lists]] configured"));
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
        self.validate_with(&process_env)
    }

    /// [`Config::validate`], reading the environment variables of sources'
    /// `headers` from `env` instead of the process environment.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the field and what is wrong.
    pub fn validate_with(&self, env: EnvLookup<'_>) -> Result<(), Error> {
        if self.lists.is_empty() {
            return Err(Error::config("lists", "at least one list is required"));
        }
        if let Some(store) = &self.store
            && (store.strip_prefix("s3://"))
                .and_then(|rest| rest.split('/').next())
                .is_none_or(str::is_empty)
        {
            return Err(Error::config(
                "store",
                format!("{store:?} is not s3://bucket[/prefix]"),
            ));
        }
        // The store's client options, as `serve` will take them (an
        // unknown key is refused here, not only when the store is opened).
        #[cfg(feature = "aws")]
        if let Some(store) = &self.store {
            crate::object_storage::ObjectStorage::check_s3(store, &self.store_options)?;
        }
        if self.role == Role::Replica && self.store.is_none() {
            return Err(Error::config(
                "role",
                "a replica follows an object store: set store = \"s3://bucket/prefix\"",
            ));
        }
        if self.replica_poll_s == 0 {
            return Err(Error::config("replica_poll_s", "must be at least 1"));
        }
        if self.lease_s == 0 {
            return Err(Error::config("lease_s", "must be at least 1"));
        }
        if let Some(key) = &self.public_key
            && TrustedKey::from_base64(key.trim()).is_err()
        {
            return Err(Error::config("public_key", "not a base64 Ed25519 public key"));
        }
        for key in &self.previous_public_keys {
            if TrustedKey::from_base64(key.trim()).is_err() {
                return Err(Error::config(
                    "previous_public_keys",
                    format!("{key:?} is not a base64 Ed25519 public key"),
                ));
            }
        }
        let mut names = std::collections::HashSet::new();
        for list in &self.lists {
            let field = |f: &str| format!("lists.{}.{f}", list.name);
            if !is_valid_list_name(&list.name) {
                return Err(Error::config(
                    format!("lists.name {:?}", list.name),
                    "must be 1-64 characters of a-z, 0-9, '-' and '_'",
                ));
            }
            if !names.insert(&list.name) {
                return Err(Error::config(
                    format!("lists.name {:?}", list.name),
                    "listed twice",
                ));
            }
            if list.sources.is_empty() {
                return Err(Error::config(field("sources"), "at least one source is required"));
            }
            if !(1..=64).contains(&list.bloom_bits_per_key) {
                return Err(Error::config(
                    field("bloom_bits_per_key"),
                    format!("{} is outside 1..=64", list.bloom_bits_per_key),
                ));
            }
            if list.key_bits != 32 && list.key_bits != 64 {
                return Err(Error::config(
                    field("key_bits"),
                    format!("{} is not 32 or 64", list.key_bits),
                ));
            }
            if list.target_full_hash_requests_per_1000.is_nan()
                || list.target_full_hash_requests_per_1000 <= 0.0
            {
                return Err(Error::config(
                    field("target_full_hash_requests_per_1000"),
                    "must be a positive number",
                ));
            }
            if let Some(bits) = list.request_prefix_bits
                && !blocksieve_format::api::is_valid_request_prefix_bits(bits)
            {
                return Err(Error::config(
                    field("request_prefix_bits"),
                    format!("{bits} is not one of 8, 12, ..., 32"),
                ));
            }
            // The advertised length is the longest whose bucket holds
            // `min_anonymity` full hashes, so its bucket can hold up to 16 ×
            // that (4 bits shorter), and up to 32 × while a growing list
            // keeps its length (`build/sizing.rs`,
            // `request_prefix_bits_after`: a change of length sends every
            // agent a whole snapshot). Over what the full-hash routes serve,
            // every confirmation of the list would be refused.
            if list.request_prefix_bits.is_none()
                && list.min_anonymity.saturating_mul(32) > self.max_bucket_entries
            {
                return Err(Error::config(
                    field("min_anonymity"),
                    format!(
                        "{}: the request prefix it sizes can select up to 16 × {} full hashes, and twice that while a growing list keeps its length, more than max_bucket_entries ({}), and agents' full-hash requests would be refused; lower min_anonymity to {} or less, or raise max_bucket_entries",
                        list.min_anonymity,
                        list.min_anonymity,
                        self.max_bucket_entries,
                        self.max_bucket_entries / 32
                    ),
                ));
            }
            if let Some(s) = &list.schedule {
                check_cron(&field("schedule"), s)?;
            }
            let g = &list.gates;
            if !(0.0..=1.0).contains(&g.max_shrink) {
                return Err(Error::config(
                    field("gates.max_shrink"),
                    format!("{} is outside 0..=1", g.max_shrink),
                ));
            }
            if g.max_fpr_ratio.is_nan() || g.max_fpr_ratio < 1.0 {
                return Err(Error::config(
                    field("gates.max_fpr_ratio"),
                    format!("{} is below 1", g.max_fpr_ratio),
                ));
            }
            for (i, s) in list.sources.iter().enumerate() {
                let field = format!("lists.{}.sources[{i}]", list.name);
                check_source(&field, s)?;
                s.check_headers(&field, env)?;
                // Its allow array removes its entries wherever a source
                // lists them: the same array would empty the source.
                let key = s.json_key.as_deref().unwrap_or("blacklist");
                if s.format == SourceFormat::Json && s.json_allow_key() == Some(key) {
                    return Err(Error::config(
                        format!("{field}.json_allow_key"),
                        format!(
                            "{key:?} is also the source's json_key: every entry of that array would be allowed, \
                             and removed from the list wherever a source lists it"
                        ),
                    ));
                }
            }
            for (i, s) in list.allow.iter().enumerate() {
                let field = format!("lists.{}.allow[{i}]", list.name);
                if s.builtin {
                    return Err(Error::config(
                        &field,
                        "`builtin` is the built-in threat feed, not an allowlist",
                    ));
                }
                check_source(&field, s)?;
                s.check_headers(&field, env)?;
                if s.format == SourceFormat::Json {
                    if s.json_key.is_some() {
                        return Err(Error::config(
                            format!("{field}.json_key"),
                            "an allow source reads `json_allow_key`, not `json_key`",
                        ));
                    }
                    if s.json_allow_key().is_none() {
                        return Err(Error::config(
                            format!("{field}.json_allow_key"),
                            "must name the array of allowed domains",
                        ));
                    }
                }
            }
        }
        if self.snapshot_ttl_s < 60 {
            return Err(Error::config(
                "snapshot_ttl_s",
                format!("{} is below 60", self.snapshot_ttl_s),
            ));
        }
        if self.keep_versions == 0 {
            return Err(Error::config("keep_versions", "must be at least 1"));
        }
        if self.delta_window == 0 || self.delta_window > blocksieve_format::MAX_CHAIN_DELTAS {
            return Err(Error::config(
                "delta_window",
                format!(
                    "{} is outside 1..={}",
                    self.delta_window,
                    blocksieve_format::MAX_CHAIN_DELTAS
                ),
            ));
        }
        // Agents send up to the protocol's `MAX_PREFIXES_PER_REQUEST` in
        // one search (one URL's hits and its noise prefixes, or a batch)
        // and take a `400 too_many_prefixes` as a failed request: below
        // that, their hits would be left unverified.
        let min_prefixes = blocksieve_format::api::MAX_PREFIXES_PER_REQUEST;
        if self.max_prefixes_per_request < min_prefixes || self.max_prefixes_per_request > 100_000 {
            return Err(Error::config(
                "max_prefixes_per_request",
                format!(
                    "{} is outside {min_prefixes}..=100000 (agents send up to {min_prefixes} prefixes in one request)",
                    self.max_prefixes_per_request
                ),
            ));
        }
        if self.padding > 10_000 {
            return Err(Error::config(
                "padding",
                format!("{} is above 10000", self.padding),
            ));
        }
        if self.max_concurrency == 0 {
            return Err(Error::config("max_concurrency", "must be at least 1"));
        }
        if !(self.fleet_checks_per_second.is_finite() && self.fleet_checks_per_second > 0.0) {
            return Err(Error::config(
                "fleet_checks_per_second",
                format!("{} is not a positive number", self.fleet_checks_per_second),
            ));
        }
        crate::server::cors::check_origins(&self.cors_allowed_origins)
            .map_err(|reason| Error::config("cors_allowed_origins", reason))?;
        if self.request_timeout_s == 0 {
            return Err(Error::config("request_timeout_s", "must be at least 1"));
        }
        if self.body_read_timeout_s == 0 {
            return Err(Error::config("body_read_timeout_s", "must be at least 1"));
        }
        if self.max_connections == 0 {
            return Err(Error::config("max_connections", "must be at least 1"));
        }
        // The connection slots are a semaphore's permits: more than it can
        // hold panicked at start.
        if self.max_connections > MAX_CONNECTIONS {
            return Err(Error::config(
                "max_connections",
                format!("{} is above {MAX_CONNECTIONS}", self.max_connections),
            ));
        }
        if self.header_read_timeout_s == 0 {
            return Err(Error::config("header_read_timeout_s", "must be at least 1"));
        }
        if self.write_stall_timeout_s == 0 {
            return Err(Error::config("write_stall_timeout_s", "must be at least 1"));
        }
        // Added to a clock reading at shutdown (three times: requests, a
        // first build, blocking work): a value past what a clock can add
        // ended the drain in a panic instead.
        // The same for a response write's stall: added to a clock reading
        // when a write stalls.
        // The same for the header read timeout: added to a clock reading
        // as each connection waits for a request's head, where a value past
        // what a clock can add panicked every serving thread it reached.
        for (field, value) in [
            ("drain_timeout_s", self.drain_timeout_s),
            ("write_stall_timeout_s", self.write_stall_timeout_s),
            ("header_read_timeout_s", self.header_read_timeout_s),
        ] {
            if value > MAX_DRAIN_TIMEOUT_S {
                return Err(Error::config(
                    field,
                    format!("{value} is above {MAX_DRAIN_TIMEOUT_S} (a day)"),
                ));
            }
        }
        check_cron("schedule", &self.schedule)?;
        Ok(())
    }
}

/// The longest `drain_timeout_s`, `write_stall_timeout_s` and
/// `header_read_timeout_s`: a day.
pub const MAX_DRAIN_TIMEOUT_S: u64 = 86_400;

/// The most `max_connections`: the permits a semaphore can hold.
pub const MAX_CONNECTIONS: usize = tokio::sync::Semaphore::MAX_PERMITS;

fn check_cron(field: &str, expr: &str) -> Result<(), Error> {
    let bad = || {
        Error::config(
            field,
            format!("{expr:?} is not a valid 6-field cron expression (sec min hour day month weekday)"),
        )
    };
    if expr.split_whitespace().count() != 6 {
        return Err(bad());
    }
    // Parse it exactly as the schedule will, so a bad value fails at start.
    schedule::Schedule::parse(expr).map(drop).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why the configuration `text` is refused (it must parse as TOML).
    fn refusal(text: &str) -> String {
        toml::from_str::<Config>(text)
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string()
    }

    /// A `min_anonymity` whose advertised request prefix could select a
    /// bucket over `max_bucket_entries` is refused: the publisher would
    /// advertise a length its own full-hash routes refuse.
    #[test]
    fn min_anonymity_must_fit_the_bucket_limit() {
        let list = |extra: &str| {
            format!(
                "max_bucket_entries = 4096\n[[lists]]\nname = \"p\"\nsources = [{{ path = \"a.txt\", format = \"urls\" }}]\n{extra}"
            )
        };
        let ok: Config = toml::from_str(&list("min_anonymity = 128")).unwrap();
        ok.validate().unwrap();
        assert_eq!(
            refusal(&list("min_anonymity = 129")),
            "configuration: lists.p.min_anonymity: 129: the request prefix it sizes can select up to 16 × 129 full hashes, and twice that while a growing list keeps its length, more than max_bucket_entries (4096), and agents' full-hash requests would be refused; lower min_anonymity to 128 or less, or raise max_bucket_entries"
        );
        // A length set by hand is the operator's (the status page turns
        // red if its bucket is over the limit).
        let fixed: Config = toml::from_str(&list("min_anonymity = 1000\nrequest_prefix_bits = 16")).unwrap();
        fixed.validate().unwrap();
    }

    #[test]
    fn store_is_an_s3_url_with_a_bucket_and_takes_options() {
        let config: Config = toml::from_str(
            r#"
            store = "s3://bucket/some/prefix"
            store_options = { endpoint = "http://127.0.0.1:5000", allow_http = "true" }
            [[lists]]
            name = "phishing"
            sources = [{ path = "a.txt", format = "urls" }]
            "#,
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.store.as_deref(), Some("s3://bucket/some/prefix"));
        assert_eq!(config.store_options["allow_http"], "true");
        assert!(!config.dangerous_store_ignores_conditions);
        assert_eq!(Config::default().store, None);
        for bad in ["bucket/prefix", "s3://", "s3:///prefix", "https://bucket/prefix"] {
            let config = Config {
                store: Some(bad.to_owned()),
                ..Config::default()
            };
            match config.validate() {
                Err(Error::Config { field, .. }) => assert_eq!(field, "store", "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        // An option the store's client does not know is refused by the
        // validation `check-config` runs, as `serve` refuses it.
        #[cfg(feature = "aws")]
        {
            let mut config = config;
            config.store_options.insert("bogus".to_owned(), "1".to_owned());
            match config.validate() {
                Err(Error::Config { field, reason }) => {
                    assert_eq!(field, "store_options.bogus");
                    assert!(reason.contains("bogus"), "{reason}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn role_parses_and_a_replica_needs_a_store_and_takes_a_public_key() {
        let key = crate::storage::generate_signing_key().public_key().to_base64();
        let config: Config = toml::from_str(&format!(
            r#"
            role = "replica"
            replica_poll_s = 2
            public_key = "{key}"
            store = "s3://bucket/p"
            [[lists]]
            name = "phishing"
            sources = [{{ path = "a.txt", format = "urls" }}]
            "#
        ))
        .unwrap();
        config.validate().unwrap();
        assert_eq!((config.role, config.replica_poll_s), (Role::Replica, 2));
        assert!(config.role.serves_api() && !config.role.builds());
        assert!(Role::Builder.builds() && !Role::Builder.serves_api());
        assert_eq!(Config::default().role, Role::All);
        for role in [Role::All, Role::Builder, Role::Replica] {
            assert_eq!(Role::from_name(role.name()), Some(role));
        }
        assert_eq!(Role::from_name("leader"), None);
        let field_of = |config: Config| match config.validate() {
            Err(Error::Config { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let no_store = Config {
            store: None,
            ..config.clone()
        };
        assert_eq!(field_of(no_store), "role");
        let never = Config {
            replica_poll_s: 0,
            ..config.clone()
        };
        assert_eq!(field_of(never), "replica_poll_s");
        let bad_key = Config {
            public_key: Some("not a key".to_owned()),
            ..config.clone()
        };
        assert_eq!(field_of(bad_key), "public_key");
        assert!(toml::from_str::<Config>("role = \"leader\"").is_err());
    }

    #[test]
    fn a_prefix_limit_below_what_agents_send_is_refused() {
        // Agents send up to MAX_PREFIXES_PER_REQUEST prefixes in one search
        // and take `400 too_many_prefixes` as a failed request: a limit of 4
        // left every hit confirmed by POST unverified (let through under the
        // default fail-open policy).
        for (limit, ok) in [
            (4, false),
            (999, false),
            (1000, true),
            (100_000, true),
            (100_001, false),
        ] {
            let config = Config {
                max_prefixes_per_request: limit,
                ..Config::default()
            };
            match config.validate() {
                Ok(()) => assert!(ok, "{limit} accepted"),
                Err(Error::Config { field, .. }) => {
                    assert!(!ok, "{limit} refused");
                    assert_eq!(field, "max_prefixes_per_request");
                }
                Err(e) => panic!("{limit}: {e}"),
            }
        }
    }

    #[test]
    fn parses_every_field_and_names_bad_ones() {
        let text = r#"
            listen = "127.0.0.1:9000"
            padding = 8
            [[lists]]
            name = "malware"
            filter = "auto"
            key_bits = 64
            gates = { max_shrink = 0.25 }
            sources = [
              { url = "https://feeds.example/urls.txt.gz", format = "urls" },
              { path = "x.csv", format = "csv", column = "URL" },
              { path = "m.json", format = "json" },
              { path = "a.txt", format = "adblock-hosts" },
            ]
            [[lists]]
            name = "bloomy"
            filter = "bloom"
            bloom_bits_per_key = 16
            sources = [{ path = "h.txt", format = "hosts" }]
        "#;
        let c: Config = toml::from_str(text).unwrap();
        c.validate().unwrap();
        assert_eq!(c.lists[0].filter, FilterChoice::Auto(AutoFilter::Auto));
        assert_eq!(c.lists[1].filter, FilterChoice::Kind(FilterKind::Bloom));
        assert_eq!(c.lists[0].gates.max_shrink, 0.25);
        assert_eq!(c.lists[0].gates.min_entries, 1);

        let bad = text.replace("key_bits = 64", "key_bits = 48");
        let err = refusal(&bad);
        assert!(
            err.contains("lists.malware.key_bits") && err.contains("48"),
            "{err}"
        );

        let valid = ["binary_fuse8", "binary_fuse16", "binary_fuse32", "bloom", "auto"];
        for (value, shown) in [
            ("\"cuckoo\"", "\"cuckoo\""),
            ("8", "8"),
            ("\"Bloom\"", "\"Bloom\""),
        ] {
            let bad = text.replace("filter = \"bloom\"", &format!("filter = {value}"));
            let err = toml::from_str::<Config>(&bad).unwrap_err().to_string();
            assert!(err.contains("filter") && err.contains(shown), "{err}");
            for name in valid {
                assert!(err.contains(name), "{name} missing from: {err}");
            }
        }
        let choices = [
            FilterChoice::Kind(FilterKind::BinaryFuse8),
            FilterChoice::Kind(FilterKind::BinaryFuse16),
            FilterChoice::Kind(FilterKind::BinaryFuse32),
            FilterChoice::Kind(FilterKind::Bloom),
            FilterChoice::Auto(AutoFilter::Auto),
        ];
        for (name, choice) in valid.into_iter().zip(choices) {
            let good = text.replace("filter = \"bloom\"", &format!("filter = \"{name}\""));
            let c: Config = toml::from_str(&good).unwrap();
            assert_eq!(c.lists[1].filter, choice, "{name}");
        }

        let bad = text.replace("padding = 8", "padding = 8\nschedule = \"0 */30 * * * foo\"");
        let err = refusal(&bad);
        assert!(
            err.starts_with("configuration: schedule") && err.contains("foo"),
            "{err}"
        );

        let bad = text.replace("https://feeds", "ftp://feeds");
        let err = refusal(&bad);
        assert!(err.contains("sources[0].url"), "{err}");

        let c: Config = toml::from_str(text).unwrap();
        assert_eq!(c.lists[1].sources[0].retries(), 2, "the default");
        let retries = |n: u32| {
            let text = text.replace(
                "format = \"urls\" },",
                &format!("format = \"urls\", retries = {n} }},"),
            );
            toml::from_str::<Config>(&text).unwrap().validate()
        };
        retries(10).unwrap();
        let err = retries(11).unwrap_err().to_string();
        assert!(
            err.contains("sources[0].retries") && err.contains("at most 10"),
            "{err}"
        );
        // A file is read, not fetched: a timeout or retries on one would do
        // nothing, and are refused.
        for (set, field) in [
            ("timeout_s = 5", "lists.bloomy.sources[0].timeout_s"),
            ("retries = 0", "lists.bloomy.sources[0].retries"),
        ] {
            let text = text.replace("format = \"hosts\" }", &format!("format = \"hosts\", {set} }}"));
            let err = refusal(&text);
            assert!(
                err.contains(field) && err.contains("applies to `url` sources only"),
                "{err}"
            );
        }
        // Its defaults too: set, they would still say something false.
        let text = text.replace("format = \"hosts\" }", "format = \"hosts\", retries = 2 }");
        let err = refusal(&text);
        assert!(err.contains("a file is read, not fetched"), "{err}");
        let builtin = SourceConfig {
            timeout_s: Some(5),
            ..SourceConfig::builtin()
        };
        let err = check_source("lists.p.sources[0]", &builtin)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("lists.p.sources[0].timeout_s: applies to `url` sources only: the built-in list is read, not fetched"),
            "{err}"
        );
    }

    #[test]
    fn a_csv_delimiter_is_a_field_separator_on_a_csv_source() {
        let source = |format: SourceFormat, delimiter: &str| SourceConfig {
            delimiter: Some(delimiter.to_owned()),
            ..SourceConfig::file("feed", format)
        };
        for ok in [";", "\t", "|", ",", " "] {
            check_source("s", &source(SourceFormat::Csv, ok)).unwrap();
            assert_eq!(source(SourceFormat::Csv, ok).delimiter_byte(), ok.bytes().next());
        }
        for (bad, says) in [
            (";;", "is not a CSV field separator"),
            ("", "is not a CSV field separator"),
            ("§", "is not a CSV field separator"),
            ("\"", "is not a CSV field separator"),
            ("\n", "is not a CSV field separator"),
            ("#", "is not a CSV field separator"),
            // Characters of URLs: a feed's URLs would be cut at them.
            (":", "may be part of a URL"),
            ("/", "is not a CSV field separator"),
            ("a", "is not a CSV field separator"),
        ] {
            let err = check_source("s", &source(SourceFormat::Csv, bad))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("s.delimiter") && err.contains(says),
                "{bad:?}: {err}"
            );
        }
        let err = check_source("s", &source(SourceFormat::Urls, ";"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("applies to `format = \"csv\"` sources only"),
            "{err}"
        );
        let c: Config = toml::from_str(
            "[[lists]]\nname = \"p\"\nsources = [{ path = \"f.csv\", format = \"csv\", delimiter = \"\\t\" }]\n",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.lists[0].sources[0].delimiter_byte(), Some(b'\t'));
    }

    /// `member`: the file of an archive a source reads. It is part of the
    /// source's label (its last good copy, its `max_shrink` baseline, the
    /// status page), so two sources reading two files of one archive keep
    /// apart.
    #[test]
    fn a_member_names_an_archive_s_file_and_labels_its_source() {
        let c: Config = toml::from_str(
            "[[lists]]\nname = \"p\"\nsources = [\n\
             { url = \"https://dl.example/phishing.tar.gz?token=s3cret\", format = \"domains\", member = \"phishing/domains\" },\n\
             { url = \"https://dl.example/phishing.tar.gz?token=s3cret\", format = \"urls\", member = \"phishing/urls\" },\n\
             { path = \"all.zip\", format = \"domains\", member = \"./blacklists/malware/domains\" },\n]\n",
        )
        .unwrap();
        c.validate().unwrap();
        let sources = &c.lists[0].sources;
        assert_eq!(
            sources[0].public_label(),
            "https://dl.example/phishing.tar.gz?token=*** [phishing/domains]"
        );
        assert_ne!(sources[0].label(), sources[1].label());
        // Spelt with `./`, the same file as without: one label, one key.
        assert_eq!(sources[2].label(), "all.zip [blacklists/malware/domains]");
        assert_eq!(SourceConfig::file("f", SourceFormat::Urls).label(), "f");
        for (bad, says) in [
            ("\"\"", "names no file"),
            ("\"./\"", "names no file"),
            ("\"/\"", "names no file"),
            ("\"/./\"", "names no file"),
            ("\"phishing/\"", "a directory's is not one"),
        ] {
            let err = refusal(&format!(
                "[[lists]]\nname = \"p\"\nsources = [{{ path = \"a.tar\", format = \"urls\", member = {bad} }}]\n"
            ));
            assert!(
                err.contains("lists.p.sources[0].member") && err.contains(says),
                "{bad}: {err}"
            );
        }
        let err = refusal(
            "[[lists]]\nname = \"p\"\nsources = [{ builtin = true, format = \"urls\", member = \"a\" }]\n",
        );
        assert!(err.contains("the built-in list is a plain file"), "{err}");
    }

    #[test]
    fn allow_sources_parse_and_are_checked() {
        let text = r#"
            [[lists]]
            name = "crypto"
            sources = [{ path = "m.json", format = "json" }]
            allow = [
              { path = "ok.txt", format = "domains" },
              { url = "https://feeds.example/m.json", format = "json", json_allow_key = "fuzzylist" },
            ]
        "#;
        let c: Config = toml::from_str(text).unwrap();
        c.validate().unwrap();
        let list = &c.lists[0];
        assert_eq!(list.allow.len(), 2);
        assert_eq!(list.sources[0].json_allow_key(), Some("whitelist"));
        assert_eq!(list.allow[1].json_allow_key(), Some("fuzzylist"));
        assert!(ListConfig::new("x", vec![]).allow.is_empty());
        for (bad, field) in [
            ("json_allow_key = \"fuzzylist\"", "allow[1].json_allow_key"),
            ("json_key = \"blacklist\"", "allow[1].json_key"),
            ("builtin = true", "allow[1]"),
        ] {
            let replaced = match bad {
                "json_allow_key = \"fuzzylist\"" => text.replace(bad, "json_allow_key = \"\""),
                "builtin = true" => {
                    text.replace("url = \"https://feeds.example/m.json\", ", "builtin = true, ")
                }
                _ => text.replace("json_allow_key = \"fuzzylist\"", bad),
            };
            let err = refusal(&replaced);
            assert!(err.contains(&format!("lists.crypto.{field}")), "{err}");
        }
        let no_source = text.replace("path = \"ok.txt\", ", "");
        let err = refusal(&no_source);
        assert!(
            err.contains("lists.crypto.allow[0]") && err.contains("exactly one"),
            "{err}"
        );
    }

    #[test]
    fn source_format_names_round_trip() {
        for f in SourceFormat::ALL {
            assert_eq!(SourceFormat::from_name(f.name()), Some(f));
            let parsed: SourceFormat = toml::from_str::<std::collections::HashMap<String, SourceFormat>>(
                &format!("f = \"{}\"", f.name()),
            )
            .unwrap()["f"];
            assert_eq!(parsed, f);
        }
        assert_eq!(SourceFormat::from_name("adblock_hosts"), None);
    }

    #[test]
    fn default_config_is_valid() {
        Config::default().validate().unwrap();
    }

    /// A drain timeout too long for a clock to add is refused at start: it
    /// was accepted, and the shutdown it was for panicked (`overflow when
    /// adding duration to instant`, exit 101).
    #[test]
    fn a_drain_timeout_over_a_day_is_refused() {
        let lists = "[[lists]]\nname = \"p\"\nsources = [{ path = \"u.txt\", format = \"urls\" }]";
        let ok: Config = toml::from_str(&format!("drain_timeout_s = 86400\n{lists}")).unwrap();
        ok.validate().unwrap();
        assert_eq!(
            refusal(&format!("drain_timeout_s = 9223372036854775807\n{lists}")),
            "configuration: drain_timeout_s: 9223372036854775807 is above 86400 (a day)"
        );
        assert_eq!(
            refusal(&format!("write_stall_timeout_s = 86401\n{lists}")),
            "configuration: write_stall_timeout_s: 86401 is above 86400 (a day)"
        );
        // Accepted, it panicked every serving thread a connection reached
        // (`overflow when adding duration to instant`): nothing was served.
        assert_eq!(
            refusal(&format!("header_read_timeout_s = 9223372036854775807\n{lists}")),
            "configuration: header_read_timeout_s: 9223372036854775807 is above 86400 (a day)"
        );
    }

    /// More connections than a semaphore holds are refused at start: they
    /// were accepted by `check-config`, and `serve` panicked at start.
    #[test]
    fn max_connections_over_the_semaphore_s_permits_is_refused() {
        let lists = "[[lists]]\nname = \"p\"\nsources = [{ path = \"u.txt\", format = \"urls\" }]";
        let ok: Config = toml::from_str(&format!("max_connections = {MAX_CONNECTIONS}\n{lists}")).unwrap();
        ok.validate().unwrap();
        assert_eq!(
            refusal(&format!("max_connections = 9223372036854775807\n{lists}")),
            format!("configuration: max_connections: 9223372036854775807 is above {MAX_CONNECTIONS}")
        );
    }

    /// A JSON source whose allow array is its block array allows every
    /// entry it lists, and removes each wherever another source lists it:
    /// refused at start, not published as an emptied list.
    #[test]
    fn a_json_source_s_allow_array_is_not_its_block_array() {
        let list = |keys: &str| {
            format!("[[lists]]\nname = \"p\"\nsources = [{{ path = \"a.json\", format = \"json\"{keys} }}]")
        };
        for keys in ["", ", json_key = \"domains\"", ", json_allow_key = \"allow\""] {
            toml::from_str::<Config>(&list(keys)).unwrap().validate().unwrap();
        }
        assert_eq!(
            refusal(&list(", json_key = \"domains\", json_allow_key = \"domains\"")),
            "configuration: lists.p.sources[0].json_allow_key: \"domains\" is also the source's json_key: every \
             entry of that array would be allowed, and removed from the list wherever a source lists it"
        );
        assert!(
            refusal(&list(", json_key = \"whitelist\""))
                .contains("\"whitelist\" is also the source's json_key"),
            "the default allow array"
        );
    }

    #[test]
    fn body_read_timeout_and_max_connections_parse_and_must_be_positive() {
        let lists = "[[lists]]\nname = \"p\"\nsources = [{ path = \"u.txt\", format = \"urls\" }]";
        let c: Config = toml::from_str(&format!(
            "body_read_timeout_s = 3\nmax_connections = 500\n{lists}"
        ))
        .unwrap();
        c.validate().unwrap();
        assert_eq!((c.body_read_timeout_s, c.max_connections), (3, 500));
        let d = Config::default();
        assert_eq!((d.body_read_timeout_s, d.max_connections), (10, 10_000));
        for field in ["body_read_timeout_s", "max_connections"] {
            let err = toml::from_str::<Config>(&format!("{field} = 0\n{lists}"))
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(err.contains(field), "{err}");
        }
    }
}
