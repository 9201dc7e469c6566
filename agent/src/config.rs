//! The agent's settings and their validating builder.

use std::time::Duration;

use blocksieve_format::api::ListsResponse;
use blocksieve_format::{DecodeLimits, TrustedKey, is_valid_list_name};
use reqwest::header::HeaderValue;

use crate::agent::Agent;
use crate::{Error, http};

/// The default for [`AgentBuilder::request_timeout`]: 10 seconds.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The default for [`AgentBuilder::snapshot_timeout`]: 5 minutes.
pub const DEFAULT_SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The default for [`AgentBuilder::max_snapshot_bytes`]: 256 MiB, the
/// format's default decode limit.
pub const DEFAULT_MAX_SNAPSHOT_BYTES: u64 = 256 * 1024 * 1024;

/// The hard upper bound of [`AgentBuilder::max_snapshot_bytes`]: 4 GiB. A
/// snapshot is held in memory whole, twice while it is decompressed.
pub const MAX_SNAPSHOT_BYTES_LIMIT: u64 = 4 * 1024 * 1024 * 1024;

/// The longest timeout accepted: one day. Longer values are almost
/// certainly unit mistakes (milliseconds given as seconds).
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// Validated settings shared by every request of an agent.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The publisher base URL without a trailing `/`, so that routes can be
    /// appended as `{base}/v1/...`.
    pub(crate) base_url: String,
    /// Subscribed list names, deduplicated, in the order given.
    pub(crate) lists: Vec<String>,
    /// Keys a snapshot header may be signed with.
    pub(crate) trusted_keys: Vec<TrustedKey>,
    /// Decode limits; the body limits equal `max_snapshot_bytes`.
    pub(crate) limits: DecodeLimits,
    /// The most snapshot bytes downloaded before giving up.
    pub(crate) max_snapshot_bytes: u64,
    /// Total time allowed for one snapshot download.
    pub(crate) snapshot_timeout: Duration,
}

/// Builds an [`Agent`]; see [`Agent::builder`]. Every setting is checked by
/// [`AgentBuilder::build`], so a misconfiguration fails at start rather than
/// at the first update.
#[derive(Debug, Clone)]
#[must_use = "an AgentBuilder does nothing until .build() is called"]
pub struct AgentBuilder {
    base_url: String,
    lists: Vec<String>,
    trusted_keys: Vec<TrustedKey>,
    request_timeout: Duration,
    snapshot_timeout: Duration,
    max_snapshot_bytes: u64,
    user_agent: String,
}

impl AgentBuilder {
    pub(crate) fn new(base_url: String) -> Self {
        Self {
            base_url,
            lists: Vec::new(),
            trusted_keys: Vec::new(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            snapshot_timeout: DEFAULT_SNAPSHOT_TIMEOUT,
            max_snapshot_bytes: DEFAULT_MAX_SNAPSHOT_BYTES,
            user_agent: concat!("blocksieve-agent/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }

    /// Subscribes to the threat list `name` (1–64 bytes of `a-z0-9_-`).
    /// Subscribing twice to the same list is the same as once. By default,
    /// the agent subscribes to no list, and [`AgentBuilder::build`] fails
    /// until one is added.
    pub fn list(mut self, name: impl Into<String>) -> Self {
        self.lists.push(name.into());
        self
    }

    /// Subscribes to each of `names`; see [`AgentBuilder::list`]. By
    /// default, the agent subscribes to no list.
    pub fn lists<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.lists.extend(names.into_iter().map(Into::into));
        self
    }

    /// Trusts `key` to sign snapshots: a snapshot is accepted only if its
    /// header verifies under one of the trusted keys. Add the next key
    /// alongside the current one to rotate keys without downtime. By
    /// default, no key is trusted, and [`AgentBuilder::build`] fails until
    /// one is added.
    pub fn trusted_key(mut self, key: TrustedKey) -> Self {
        self.trusted_keys.push(key);
        self
    }

    /// Trusts each of `keys`; see [`AgentBuilder::trusted_key`]. By default,
    /// no key is trusted.
    pub fn trusted_keys(mut self, keys: impl IntoIterator<Item = TrustedKey>) -> Self {
        self.trusted_keys.extend(keys);
        self
    }

    /// The longest a request may take from connecting to the end of its
    /// body: full-hash requests and list queries in total, snapshot
    /// downloads for connecting. Must be between 1 ms and one day. By
    /// default, [`DEFAULT_REQUEST_TIMEOUT`] (10 seconds).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The longest one snapshot download may take in total, which is longer
    /// than [`AgentBuilder::request_timeout`] because snapshots can be large.
    /// Must be between 1 ms and one day. By default,
    /// [`DEFAULT_SNAPSHOT_TIMEOUT`] (5 minutes).
    pub fn snapshot_timeout(mut self, timeout: Duration) -> Self {
        self.snapshot_timeout = timeout;
        self
    }

    /// The largest snapshot accepted, in bytes. It is enforced on the bytes
    /// received, not on `Content-Length`: the download stops as soon as the
    /// body grows past it. The same limit applies to the decompressed
    /// filter body. Must be between 1 and [`MAX_SNAPSHOT_BYTES_LIMIT`]. By
    /// default, [`DEFAULT_MAX_SNAPSHOT_BYTES`] (256 MiB).
    pub fn max_snapshot_bytes(mut self, limit_bytes: u64) -> Self {
        self.max_snapshot_bytes = limit_bytes;
        self
    }

    /// The `User-Agent` header of every request. By default,
    /// `blocksieve-agent/` followed by this crate's version.
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// Validates the settings and creates the agent. No request is sent:
    /// call [`Agent::update`] to load the first snapshots.
    ///
    /// # Errors
    ///
    /// [`Error::NoLists`], [`Error::NoTrustedKeys`],
    /// [`Error::InvalidListName`], [`Error::InvalidBaseUrl`],
    /// [`Error::InvalidSetting`] for the setting at fault, and
    /// [`Error::HttpClient`] if the HTTP client cannot be created.
    ///
    /// ```
    /// use blocksieve_agent::{Agent, Error};
    /// use blocksieve_format::SigningKey;
    ///
    /// let key = SigningKey::from_secret_bytes([7; 32]).public_key().clone();
    /// let agent = Agent::builder("https://publisher.example")
    ///     .list("malware")
    ///     .trusted_key(key.clone())
    ///     .build()?;
    /// assert_eq!(agent.snapshot_version("malware"), None);
    ///
    /// // Upper case is not a valid list name.
    /// let err = Agent::builder("https://publisher.example").list("Malware").trusted_key(key).build();
    /// assert!(matches!(err, Err(Error::InvalidListName { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn build(self) -> Result<Agent, Error> {
        let mut lists: Vec<String> = Vec::with_capacity(self.lists.len());
        for name in &self.lists {
            if !is_valid_list_name(name) {
                return Err(Error::InvalidListName { name: name.clone() });
            }
            if !lists.contains(name) {
                lists.push(name.clone());
            }
        }
        if lists.is_empty() {
            return Err(Error::NoLists);
        }
        if self.trusted_keys.is_empty() {
            return Err(Error::NoTrustedKeys);
        }
        if !(1..=MAX_SNAPSHOT_BYTES_LIMIT).contains(&self.max_snapshot_bytes) {
            return Err(Error::InvalidSetting {
                setting: "max_snapshot_bytes",
                value: self.max_snapshot_bytes.to_string(),
            });
        }
        check_timeout("snapshot_timeout", self.snapshot_timeout)?;
        let base_url = validate_base_url(&self.base_url)?;
        let client = self.client()?;
        let limits = DecodeLimits {
            max_body_bytes: self.max_snapshot_bytes,
            max_decompressed_bytes: self.max_snapshot_bytes,
            ..DecodeLimits::default()
        };
        let settings = Settings {
            base_url,
            lists,
            trusted_keys: self.trusted_keys,
            limits,
            max_snapshot_bytes: self.max_snapshot_bytes,
            snapshot_timeout: self.snapshot_timeout,
        };
        Ok(Agent::new(settings, client))
    }

    /// Asks the publisher which threat lists it serves (`GET /v1/lists`), to
    /// subscribe to all of them. Uses this builder's base URL, timeout and
    /// user agent; lists and keys are not needed yet.
    ///
    /// # Errors
    ///
    /// A misconfiguration error as from [`AgentBuilder::build`], or a
    /// transport or bad-data error from the request.
    pub async fn fetch_publisher_lists(&self) -> Result<ListsResponse, Error> {
        let base = validate_base_url(&self.base_url)?;
        let client = self.client()?;
        http::fetch_lists(&client, &format!("{base}/v1/lists")).await
    }

    /// The one HTTP client of the agent, with the validated user agent and
    /// request timeout.
    fn client(&self) -> Result<reqwest::Client, Error> {
        check_timeout("request_timeout", self.request_timeout)?;
        let user_agent = HeaderValue::from_str(&self.user_agent).map_err(|_| Error::InvalidSetting {
            setting: "user_agent",
            value: format!("{:?}", self.user_agent),
        })?;
        reqwest::Client::builder()
            .user_agent(user_agent)
            .connect_timeout(self.request_timeout)
            .timeout(self.request_timeout)
            .build()
            .map_err(|e| Error::HttpClient {
                reason: crate::error::error_chain(&e),
            })
    }
}

fn check_timeout(setting: &'static str, timeout: Duration) -> Result<(), Error> {
    if timeout < Duration::from_millis(1) || timeout > MAX_TIMEOUT {
        return Err(Error::InvalidSetting {
            setting,
            value: format!("{timeout:?}"),
        });
    }
    Ok(())
}

/// Checks that `url` is an absolute `http`/`https` URL with a host and no
/// query, fragment or credentials, and returns it without a trailing `/`.
fn validate_base_url(url: &str) -> Result<String, Error> {
    let invalid = |reason: &str| Error::InvalidBaseUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| invalid(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("scheme must be http or https"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid("must not have a query or fragment"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid("must not contain credentials"));
    }
    Ok(parsed.as_str().trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_is_normalised_without_trailing_slash() {
        assert_eq!(
            validate_base_url("http://127.0.0.1:8080/").ok().as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            validate_base_url("https://p.example/blocksieve/").ok().as_deref(),
            Some("https://p.example/blocksieve")
        );
    }

    #[test]
    fn base_url_rejections() {
        for bad in [
            "",
            "127.0.0.1:8080",
            "ftp://p.example",
            "http://p.example/?x=1",
            "http://u:p@p.example",
        ] {
            assert!(
                matches!(validate_base_url(bad), Err(Error::InvalidBaseUrl { .. })),
                "{bad:?} should be rejected"
            );
        }
    }
}
