//! One source of entries ([`SourceConfig`]): where it is, how it is read
//! ([`SourceFormat`]), its fetch's limits and retries, and its checks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::headers::HeaderValueConfig;
use super::redact::redact_url;
use crate::Error;

/// The field separators a `csv` source may name (`delimiter`): none can be
/// part of a URL as feeds write it, a quote, a line end or a comment.
pub const CSV_DELIMITERS: [u8; 5] = [b',', b';', b'|', b'\t', b' '];

/// The JSON array of allowed domains read by default
/// ([`SourceConfig::json_allow_key`]): MetaMask's `whitelist`.
pub const DEFAULT_JSON_ALLOW_KEY: &str = "whitelist";

/// One source of entries: exactly one of `path`, `url` or `builtin`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Local file; relative paths are relative to the configuration file.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// HTTP(S) URL, fetched with a conditional GET.
    #[serde(default)]
    pub url: Option<String>,
    /// The built-in feed (used by the default configuration).
    #[serde(default)]
    pub builtin: bool,
    /// How entries are read.
    pub format: SourceFormat,
    /// For `format = "csv"`: the header name of the URL column. By default, `url`.
    #[serde(default)]
    pub column: Option<String>,
    /// For `format = "csv"`: the field separator, one of
    /// [`CSV_DELIMITERS`] ([`Self::delimiter_byte`]): `";"`, `"\t"`, `"|"`,
    /// `" "`. By default, `,`.
    #[serde(default)]
    pub delimiter: Option<String>,
    /// For `format = "json"`: the array of domains to read. By default,
    /// `blacklist` (MetaMask `eth-phishing-config`). Not used in an allow
    /// source, which reads `json_allow_key`.
    #[serde(default)]
    pub json_key: Option<String>,
    /// For `format = "json"`: the array of allowed domains. In a list's
    /// `sources`, its entries, when the document has that array, are
    /// removed from the list as an `allow` source's are (MetaMask's
    /// `whitelist` overrides its `blacklist`); `""` reads no allow array. In
    /// a list's `allow`, the array read. By default, `whitelist`.
    #[serde(default)]
    pub json_allow_key: Option<String>,
    /// For a source shipped as a tar or zip archive of several files: the
    /// path of the file inside it that is the list, as `tar -tf` or
    /// `unzip -l` lists it (a leading `./` aside), e.g.
    /// `"phishing/domains"`. Without it, an archive must hold one file.
    /// Set, the content must be an archive holding that file once.
    #[serde(default)]
    pub member: Option<String>,
    /// Seconds an HTTP fetch may take ([`Self::timeout`]); `None`: 60.
    /// For `url` sources only.
    #[serde(default)]
    pub timeout_s: Option<u64>,
    /// Largest source accepted, in bytes (after gzip decompression). By
    /// default, 512 MiB.
    #[serde(default = "default_source_max")]
    pub max_bytes: u64,
    /// How many times an HTTP fetch that failed for a reason that may pass
    /// (no connection, a timeout, a body cut off, `408`, `429`, `500`,
    /// `502`, `503`, `504`) is tried again within the build, after 1 s,
    /// then 2 s, 4 s… up to 30 s (each × a random 0.5–1), or the server's
    /// `Retry-After` up to 60 s ([`Self::retries`]); `None`: 2; at most
    /// 10. For `url` sources only.
    #[serde(default)]
    pub retries: Option<u32>,
    /// Request headers sent with each fetch: header name to a literal value
    /// or `{ env = "VARIABLE" }`, read at start (see
    /// [`HeaderValueConfig`]). For `url` sources only; a redirect to
    /// another scheme, host or port is not followed. By default, none.
    #[serde(default, deserialize_with = "super::headers::deserialize_headers")]
    pub headers: BTreeMap<String, HeaderValueConfig>,
}

impl SourceConfig {
    /// A source reading a local file.
    pub fn file(path: impl Into<PathBuf>, format: SourceFormat) -> Self {
        Self {
            path: Some(path.into()),
            url: None,
            builtin: false,
            format,
            column: None,
            delimiter: None,
            json_key: None,
            json_allow_key: None,
            member: None,
            timeout_s: None,
            max_bytes: default_source_max(),
            retries: None,
            headers: BTreeMap::new(),
        }
    }

    /// A source fetched over HTTP(S).
    pub fn http(url: impl Into<String>, format: SourceFormat) -> Self {
        Self {
            path: None,
            url: Some(url.into()),
            ..Self::file("", format)
        }
    }

    /// The built-in feed.
    pub fn builtin() -> Self {
        Self {
            path: None,
            builtin: true,
            ..Self::file("", SourceFormat::Urls)
        }
    }

    /// How long an HTTP fetch of this source may take (`timeout_s`, by
    /// default 60 s).
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_s.unwrap_or(DEFAULT_SOURCE_TIMEOUT_S))
    }

    /// How many times a failed HTTP fetch of this source is tried again
    /// within a build (`retries`, by default 2).
    pub fn retries(&self) -> u32 {
        self.retries.unwrap_or(DEFAULT_SOURCE_RETRIES)
    }

    /// The CSV field separator as a byte: `delimiter` when it is one of
    /// [`CSV_DELIMITERS`] ([`check_source`] refuses any other), else `None`
    /// (`,`).
    pub fn delimiter_byte(&self) -> Option<u8> {
        match self.delimiter.as_deref()?.as_bytes() {
            &[b] if CSV_DELIMITERS.contains(&b) => Some(b),
            _ => None,
        }
    }

    /// The JSON array of allowed domains: `json_allow_key`, by default
    /// `whitelist`; `None` when set to `""`.
    pub fn json_allow_key(&self) -> Option<&str> {
        match self.json_allow_key.as_deref() {
            None => Some(DEFAULT_JSON_ALLOW_KEY),
            Some("") => None,
            Some(key) => Some(key),
        }
    }

    /// A short human-readable name: the path, the URL or `builtin`, and
    /// the archive's file read, when `member` names one
    /// (`lists.tar.gz [phishing/domains]`).
    pub fn label(&self) -> String {
        let label = match (&self.path, &self.url) {
            (Some(p), _) => p.display().to_string(),
            (None, Some(u)) => u.clone(),
            (None, None) => "builtin".to_owned(),
        };
        self.with_member(label)
    }

    /// `label` and the archive's file read, as the build matches it
    /// (`./phishing/urls` is `phishing/urls`): the same file is one
    /// source, its last good copy and `max_shrink` baseline kept under one
    /// key however `member` spells it.
    fn with_member(&self, label: String) -> String {
        match &self.member {
            Some(member) => format!("{label} [{}]", archive_path(member)),
            None => label,
        }
    }

    /// Checks [`Self::headers`], `field` naming the source
    /// (`lists.<name>.sources[i]`), reading variables from `env`.
    pub(super) fn check_headers(&self, field: &str, env: super::headers::EnvLookup<'_>) -> Result<(), Error> {
        let read = match (&self.url, self.builtin) {
            (Some(_), _) => None,
            (None, true) => Some("the built-in list"),
            (None, false) => Some("a file"),
        };
        super::headers::check_headers(field, &self.headers, read, env)
    }

    /// The request headers a fetch of this source sends, values marked
    /// sensitive; an error names a header whose value is missing (an
    /// environment variable not read: a configuration not resolved) or not
    /// valid, never the value.
    pub fn request_headers(&self) -> Result<reqwest::header::HeaderMap, String> {
        super::headers::request_headers(&self.headers)
    }

    /// [`Self::label`] as reports, `/v1/lists`, the status page and the
    /// build history show it: a URL's credentials (`user:password@`) and
    /// the values of query parameters named like secrets (`key`, `token`,
    /// `secret`, `pass`, `auth`, `sig`, `credential`) replaced by `***`.
    pub fn public_label(&self) -> String {
        match (&self.path, &self.url) {
            (None, Some(u)) => self.with_member(redact_url(u)),
            _ => self.label(),
        }
    }
}

/// A path inside an archive as `tar -t` and `unzip -l` list it and as a
/// source's `member` names it: without leading `./` or `/`.
pub fn archive_path(name: &str) -> &str {
    let mut name = name;
    while let Some(rest) = name.strip_prefix("./").or_else(|| name.strip_prefix('/')) {
        name = rest;
    }
    name
}

/// The format of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceFormat {
    /// One URL per line; each becomes its most specific expression
    /// (host + path + query).
    Urls,
    /// Hosts-file lines (`0.0.0.0 name [name…] [# comment]`); each name
    /// becomes `name/`.
    Hosts,
    /// One domain per line (`*.` prefix allowed); each becomes `domain/`.
    Domains,
    /// Adblock-style host and URL rules (`||host^`, `||host/path^$all`, bare
    /// hosts), `!` comments, as in urlhaus-filter.
    AdblockHosts,
    /// CSV with a header row; the URL column is named by `column`.
    Csv,
    /// JSON object with an array of domains (MetaMask `eth-phishing-config`).
    Json,
    /// One SHA-256 full hash per line, 64 hex digits (already hashed lists).
    Sha256,
}

impl SourceFormat {
    /// Every format, as listed in `docs/configuration.md`.
    pub const ALL: [SourceFormat; 7] = [
        SourceFormat::Urls,
        SourceFormat::Hosts,
        SourceFormat::Domains,
        SourceFormat::AdblockHosts,
        SourceFormat::Csv,
        SourceFormat::Json,
        SourceFormat::Sha256,
    ];

    /// The format's name in the configuration, e.g. `adblock-hosts`.
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::Urls => "urls",
            SourceFormat::Hosts => "hosts",
            SourceFormat::Domains => "domains",
            SourceFormat::AdblockHosts => "adblock-hosts",
            SourceFormat::Csv => "csv",
            SourceFormat::Json => "json",
            SourceFormat::Sha256 => "sha256",
        }
    }

    /// The format named `name` (as in the configuration), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

// `SourceConfig` has a required key (`format`), which serde's container
// `default` cannot leave required: its other keys name their defaults one
// by one, here, and `SourceConfig::file` uses the same functions.
/// [`SourceConfig::timeout_s`] when not set.
pub(super) const DEFAULT_SOURCE_TIMEOUT_S: u64 = 60;
/// [`SourceConfig::retries`] when not set.
pub(super) const DEFAULT_SOURCE_RETRIES: u32 = 2;
/// The most [`SourceConfig::retries`] a configuration may ask for: with
/// the default 60 s timeout, 11 attempts of a feed that never answers and
/// the backoff waits between them (at most 181 s) hold its list's build
/// for up to 14 min 1 s of the default 30.
pub const MAX_SOURCE_RETRIES: u32 = 10;
fn default_source_max() -> u64 {
    512 * 1024 * 1024
}

/// Checks one source, `field` naming it (`lists.<name>.sources[i]`).
pub(super) fn check_source(field: &str, s: &SourceConfig) -> Result<(), Error> {
    let set = usize::from(s.path.is_some()) + usize::from(s.url.is_some()) + usize::from(s.builtin);
    if set != 1 {
        return Err(Error::config(
            field,
            "needs exactly one of `path`, `url` or `builtin = true`",
        ));
    }
    if let Some(u) = &s.url
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(Error::config(
            format!("{field}.url"),
            format!("{u:?} is not an http(s) URL"),
        ));
    }
    if s.timeout_s == Some(0) {
        return Err(Error::config(format!("{field}.timeout_s"), "must be at least 1"));
    }
    if s.max_bytes == 0 {
        return Err(Error::config(format!("{field}.max_bytes"), "must be at least 1"));
    }
    // A file or the built-in list is read, not fetched: a timeout or
    // retries set on one would do nothing, so they are refused rather than
    // left to look as if they did.
    if s.url.is_none() {
        let what = if s.builtin { "the built-in list" } else { "a file" };
        for (name, set) in [
            ("timeout_s", s.timeout_s.is_some()),
            ("retries", s.retries.is_some()),
        ] {
            if set {
                return Err(Error::config(
                    format!("{field}.{name}"),
                    format!("applies to `url` sources only: {what} is read, not fetched"),
                ));
            }
        }
    }
    if let Some(d) = &s.delimiter {
        let field = format!("{field}.delimiter");
        if s.format != SourceFormat::Csv {
            return Err(Error::config(field, "applies to `format = \"csv\"` sources only"));
        }
        if !matches!(d.as_bytes(), [b] if CSV_DELIMITERS.contains(b)) {
            return Err(Error::config(
                field,
                format!(
                    "{d:?} is not a CSV field separator: one of \",\", \";\", \"|\", \"\\t\" (a tab) or \" \" (a space); \
                     any other character may be part of a URL, a quote or a comment"
                ),
            ));
        }
    }
    if let Some(member) = &s.member {
        let field = format!("{field}.member");
        if s.builtin {
            return Err(Error::config(
                field,
                "the built-in list is a plain file, not an archive",
            ));
        }
        let path = archive_path(member);
        if path.is_empty() || path.ends_with('/') {
            return Err(Error::config(
                field,
                format!(
                    "{member:?} names no file: the path of the list's file inside the archive, as `tar -tf` \
                     or `unzip -l` lists it (a directory's is not one)"
                ),
            ));
        }
    }
    if s.retries() > MAX_SOURCE_RETRIES {
        return Err(Error::config(
            format!("{field}.retries"),
            format!("must be at most {MAX_SOURCE_RETRIES}"),
        ));
    }
    Ok(())
}
