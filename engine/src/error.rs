//! The agent's one error type.

use std::path::PathBuf;
use std::time::Duration;

use blocksieve_format::api::ErrorResponse;
use blocksieve_format::{CanonError, DecodeError, DeltaError};

/// The most characters of a publisher's error message kept in
/// [`Error::Status`]: enough to explain, too few to flood a log.
pub(crate) const MAX_ERROR_MESSAGE_CHARS: usize = 256;

/// Everything that can go wrong in the agent.
///
/// The variants are grouped by what the caller does next; [`Error::kind`]
/// names the group:
///
/// * **Bad data** ([`ErrorKind::BadData`]): the publisher sent something
///   malformed, forged, rolled back or oversized. The agent keeps the
///   filter it already has; report it and try again later (the next
///   snapshot may be fine), but do not expect a retry of the same download
///   to help.
/// * **Transport** ([`ErrorKind::Transport`]): the request did not complete or
///   the publisher answered with an HTTP error. Retry later.
/// * **Not ready** ([`ErrorKind::NotReady`]): no snapshot has been loaded for a
///   list yet, so the agent cannot say the URL is safe (a URL that the
///   lists already loaded confirm is still answered unsafe). Run an update
///   first.
/// * **Invalid input** ([`ErrorKind::InvalidInput`]): the URL names no host.
///   It is neither safe nor unsafe; report it to whoever supplied it.
/// * **Storage** ([`ErrorKind::Storage`]): the cache directory could not be
///   written, or a cached file was corrupt and has been quarantined. The
///   agent keeps working from memory; fix the disk.
/// * **Misconfiguration** ([`ErrorKind::Misconfigured`]): returned by
///   building an agent and starting its updates. Fail at start.
///
/// Errors are plain data (`Clone`, `Eq`), so a
/// [`Verdict`](crate::lookup::Verdict) and a list's status can carry one.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    // --- Bad data from the publisher: keep the current filter. ---
    /// A downloaded snapshot failed verification (signature, unknown key,
    /// body hash, layout or limits). Expiry is not among the reasons: an
    /// expired snapshot is used, flagged stale (see
    /// [`engine::accept`](crate::accept)).
    #[error("snapshot of list {list} rejected: {reason}")]
    Decode {
        /// The list whose snapshot was downloaded.
        list: String,
        /// The first check that failed.
        reason: DecodeError,
    },
    /// A correctly signed snapshot describes a different list than the one
    /// requested: a signed snapshot of one list replayed in place of another.
    #[error("requested a snapshot of list {requested} but got one of list {found}")]
    WrongList {
        /// The list that was requested.
        requested: String,
        /// The list named in the snapshot's signed header.
        found: String,
    },
    /// A correctly signed snapshot is not newer than the one in use: an
    /// attempted rollback to an older (or a different same-version) snapshot.
    #[error(
        "snapshot of list {list} has version {new_version}, not newer than trusted version {trusted_version}"
    )]
    Rollback {
        /// The list whose snapshot was downloaded.
        list: String,
        /// The version of the snapshot in use.
        trusted_version: u64,
        /// The version of the rejected snapshot.
        new_version: u64,
    },
    /// A delta, delta chain or freshness record failed verification
    /// (signature, unknown key, body hash, Rice coding, a broken link, or
    /// another list's). The agent keeps its state and takes the whole
    /// snapshot instead, in the same round.
    #[error("delta of list {list} rejected: {reason}")]
    Delta {
        /// The list whose deltas were downloaded or restored.
        list: String,
        /// The first check that failed.
        reason: DeltaError,
    },
    /// A correctly signed delta chain does not start at the version and
    /// body hash the agent holds: dropped, reordered or replayed deltas.
    /// The agent takes the whole snapshot instead.
    #[error(
        "delta chain of list {list} starts at version {from_version}, not at held version {held_version}"
    )]
    DeltaMismatch {
        /// The list whose deltas were downloaded or restored.
        list: String,
        /// The version the agent's state stands for.
        held_version: u64,
        /// The version the chain's first delta applies to.
        from_version: u64,
    },
    /// A delta chain that verifies and starts where the agent is, but ends
    /// short of the version its response is tagged with (`ETag`, the
    /// latest snapshot's): a delta left out at the end, or all of them.
    /// The agent takes the whole snapshot instead.
    #[error(
        "delta chain of list {list} ends at version {ends_at}, but its response names {latest} as the latest"
    )]
    DeltaChainShort {
        /// The list whose deltas were downloaded.
        list: String,
        /// The version the chain leads to (the held one if it is empty).
        ends_at: u64,
        /// The response's `ETag`.
        latest: String,
    },
    /// A delta chain that verifies and links, refused because the chain
    /// kept since the base snapshot would then be longer than a restart
    /// can restore ([`MAX_KEPT_CHAIN_DELTAS`](crate::delta::MAX_KEPT_CHAIN_DELTAS)
    /// deltas, or `limit` bytes for the cache directory): taken, it would
    /// be lost at the next start, and the list would come back on its base,
    /// many versions older. The whole snapshot is taken instead (a rebase);
    /// while that fails, the list stays at the version held, reported
    /// behind.
    #[error(
        "delta chain of list {list} not applied: the chain since the base snapshot would hold {deltas} deltas ({bytes} bytes), more than a restart restores ({limit}); the whole snapshot is needed"
    )]
    ChainPastRestoreLimit {
        /// The list whose deltas were downloaded.
        list: String,
        /// The deltas since the base, had the chain been applied.
        deltas: usize,
        /// The bytes of the chain since the base, had it been applied (0
        /// where not counted).
        bytes: u64,
        /// What a restart restores, as text.
        limit: String,
    },
    /// A response body was longer than the configured limit; the download
    /// was stopped at the limit.
    #[error("response from {url} is larger than the limit of {limit_bytes} bytes")]
    ResponseTooLarge {
        /// The requested URL.
        url: String,
        /// The limit, in bytes.
        limit_bytes: u64,
    },
    /// A response did not follow the publisher API: unparseable JSON, a
    /// full-hash answer for another prefix, or a `304 Not Modified` to a
    /// request that was not conditional.
    #[error("unexpected response from {url}: {reason}")]
    UnexpectedResponse {
        /// The requested URL.
        url: String,
        /// What was wrong with it.
        reason: String,
    },

    // --- Transport: retry later. ---
    /// The request could not be sent, timed out, or the connection failed
    /// before the whole body arrived.
    #[error("request to {url} failed: {reason}")]
    Transport {
        /// The requested URL.
        url: String,
        /// The underlying error and its causes, joined by `: `.
        reason: String,
        /// Whether the request hit the configured timeout.
        timed_out: bool,
    },
    /// The publisher answered with an HTTP status other than 200 (or 304 to
    /// a conditional request), e.g. `503`, or `404` before the publisher has
    /// built a list's first snapshot.
    #[error("{url} answered HTTP {status}{}", if message.is_empty() { String::new() } else { format!(": {message}") })]
    Status {
        /// The requested URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The `error.message` of the publisher's JSON error body, or empty
        /// when the body was not one.
        message: String,
        /// The `error.code` of the publisher's JSON error body (e.g.
        /// `prefix_too_short`, `version_gone`), or empty when the body was
        /// not one.
        code: String,
        /// The `Retry-After` of a `429` or `503` answer (RFC 9110 §10.2.3),
        /// capped at [`MAX_SERVER_DELAY`](crate::schedule::MAX_SERVER_DELAY):
        /// no request of the same kind is sent before it has passed.
        retry_after: Option<Duration>,
    },
    /// Full-hash requests are paused after failures (exponential backoff, or
    /// the publisher's `Retry-After`); no request was sent. See
    /// [`engine::schedule::FULL_HASH_BACKOFF`](crate::schedule::FULL_HASH_BACKOFF).
    #[error("full-hash requests are paused for {remaining:?} after {failures} failures")]
    BackingOff {
        /// How long the pause still lasts.
        remaining: Duration,
        /// Consecutive failed full-hash requests so far.
        failures: u32,
    },

    // --- Not ready: update first. ---
    /// No snapshot of this list has been loaded yet.
    #[error("no snapshot of list {list} has been loaded yet")]
    NotReady {
        /// The list without a snapshot.
        list: String,
    },

    // --- Invalid input: report to whoever gave the URL. ---
    /// The URL could not be canonicalized: it names no host.
    #[error("invalid url: {reason}")]
    InvalidUrl {
        /// Why canonicalization failed.
        reason: CanonError,
    },

    // --- Storage: keep working from memory, fix the disk. ---
    /// A file in the cache directory could not be written, renamed or read.
    #[error("cache file {}: {reason}", path.display())]
    Storage {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// A file in the cache directory failed verification (or was older than
    /// the persisted version floor) and was renamed aside with the suffix
    /// `.quarantined`; it is never loaded again.
    #[error("cache file {} quarantined: {reason}", path.display())]
    CorruptCache {
        /// The file, before it was renamed.
        path: PathBuf,
        /// Why it was rejected.
        reason: String,
    },
    /// The bytes kept for a list at its last save (a session's saved list,
    /// the agent's cache directory) hold no chain reaching the version
    /// their record names: the older base alone was restored, and entries
    /// added since are missing until the next update.
    #[error(
        "kept data of list {list} reaches version {restored_version}, but its record names version {kept_version}: the deltas since are missing"
    )]
    KeptChainMissing {
        /// The list.
        list: String,
        /// The version restored (the base snapshot's).
        restored_version: u64,
        /// The version the record names.
        kept_version: u64,
    },

    // --- Misconfiguration: fail at start. ---
    /// The builder was given no threat list to subscribe to.
    #[error("no threat list configured")]
    NoLists,
    /// The builder was given no trusted publisher key.
    #[error("no trusted publisher key configured")]
    NoTrustedKeys,
    /// A list name is not 1–64 bytes of `a-z0-9_-`.
    #[error("invalid list name {name:?}")]
    InvalidListName {
        /// The rejected name.
        name: String,
    },
    /// The publisher base URL is not an absolute `http` or `https` URL.
    #[error("invalid publisher url {url:?}: {reason}")]
    InvalidBaseUrl {
        /// The rejected URL.
        url: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A builder setting is outside its allowed range.
    #[error("invalid setting {setting}: {value}")]
    InvalidSetting {
        /// The builder method, e.g. `request_timeout`.
        setting: &'static str,
        /// The rejected value, as text.
        value: String,
    },
    /// The HTTP client could not be created (e.g. TLS initialisation failed).
    #[error("cannot create http client: {reason}")]
    HttpClient {
        /// The underlying error and its causes.
        reason: String,
    },
    /// The cache directory could not be created or is not a directory.
    #[error("cannot use cache directory {}: {reason}", path.display())]
    InvalidCacheDir {
        /// The configured directory.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// Another agent holds the cache directory's lock (`lock` in the
    /// directory): one agent per cache directory, or they would overwrite
    /// each other's files and a restart could come back on an older
    /// version than it held. Stop the other agent (the lock goes with it,
    /// whether it is dropped, exits or crashes; one dropped holds it until
    /// any update round or write it started has ended), or give this one a
    /// directory of its own. The message says when the holder is this
    /// process, and "process id unknown" when the lock file names none
    /// (Windows' `LockFileEx` lets no other handle read it).
    #[error(
        "cache directory {} is in use by {}; one agent per cache directory: stop that one, or give this one another directory",
        path.display(),
        cache_dir_holder(*holder)
    )]
    CacheDirInUse {
        /// The configured directory.
        path: PathBuf,
        /// The holder's process id, when the lock file names one.
        holder: Option<u32>,
    },
    /// The agent's background updates were started while
    /// the agent's background updates were already running.
    #[error("background updates are already running")]
    UpdatesAlreadyRunning,
    /// The agent's background updates were started outside a tokio
    /// runtime.
    #[error("background updates need a tokio runtime")]
    NoRuntime,
}

/// Who holds a cache directory, for [`Error::CacheDirInUse`]'s message.
fn cache_dir_holder(holder: Option<u32>) -> String {
    match holder {
        Some(pid) if is_this_process(pid) => format!(
            "another agent of this process (process {pid}: one being dropped may still be finishing an update round or a write)"
        ),
        Some(pid) => format!("another agent (process {pid})"),
        None => "another agent (process id unknown)".to_owned(),
    }
}

/// Whether `pid` is this process's id (never on WebAssembly, which has no
/// processes and no cache directory).
fn is_this_process(pid: u32) -> bool {
    #[cfg(target_family = "wasm")]
    let this = None;
    #[cfg(not(target_family = "wasm"))]
    let this = Some(std::process::id());
    this == Some(pid)
}

/// What the caller of a failed operation should do next; see [`Error`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The publisher sent malformed, forged, rolled-back or oversized data; the
    /// current filter was kept.
    BadData,
    /// The request failed or got an HTTP error; retry later.
    Transport,
    /// A list has no snapshot yet; run an update first.
    NotReady,
    /// The URL to check names no host.
    InvalidInput,
    /// The cache directory failed; the agent keeps working from memory.
    Storage,
    /// The agent was misconfigured; fail at start.
    Misconfigured,
}

impl Error {
    /// The group this error belongs to, i.e. what to do next.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Decode { .. }
            | Self::WrongList { .. }
            | Self::Rollback { .. }
            | Self::Delta { .. }
            | Self::DeltaMismatch { .. }
            | Self::DeltaChainShort { .. }
            | Self::ChainPastRestoreLimit { .. }
            | Self::ResponseTooLarge { .. }
            | Self::UnexpectedResponse { .. } => ErrorKind::BadData,
            Self::Transport { .. } | Self::Status { .. } | Self::BackingOff { .. } => ErrorKind::Transport,
            Self::NotReady { .. } => ErrorKind::NotReady,
            Self::InvalidUrl { .. } => ErrorKind::InvalidInput,
            Self::Storage { .. } | Self::CorruptCache { .. } | Self::KeptChainMissing { .. } => {
                ErrorKind::Storage
            }
            Self::NoLists
            | Self::NoTrustedKeys
            | Self::InvalidListName { .. }
            | Self::InvalidBaseUrl { .. }
            | Self::InvalidSetting { .. }
            | Self::HttpClient { .. }
            | Self::InvalidCacheDir { .. }
            | Self::CacheDirInUse { .. }
            | Self::UpdatesAlreadyRunning
            | Self::NoRuntime => ErrorKind::Misconfigured,
        }
    }

    /// The publisher's `Retry-After`, when this is a `429` or `503` answer
    /// that carried one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// An [`Error::Status`] for a `status` answer from `url` whose body
    /// (or its first bytes) is `body`: the publisher's error message and
    /// code when the body is its JSON error (the message cut at 256
    /// characters, a longer code dropped), empty otherwise, and
    /// `retry_after`.
    pub fn status(url: &str, status: u16, body: &[u8], retry_after: Option<Duration>) -> Self {
        let (message, code) = serde_json::from_slice::<ErrorResponse>(body)
            .map(|e| {
                let mut code = e.error.code;
                if code.len() > MAX_ERROR_MESSAGE_CHARS {
                    code.clear();
                }
                (
                    e.error.message.chars().take(MAX_ERROR_MESSAGE_CHARS).collect(),
                    code,
                )
            })
            .unwrap_or_default();
        Self::Status {
            url: url.to_owned(),
            status,
            message,
            code,
            retry_after,
        }
    }

    /// Whether this is the publisher's `400 prefix_too_short` to a
    /// full-hash request: most often the request prefixes were sized by a
    /// snapshot older than the one it serves, whose list grew too much for
    /// them (its request prefix length grew; the server answers the old
    /// length only while the list at most doubled). Waiting does not help;
    /// a newer snapshot does: update the lists, then check again. The Rust
    /// agent and the JavaScript agent do so by themselves. (A list given
    /// too short a `request_prefix_bits` by hand is refused at every
    /// version: its status page is red, and agents then back off.)
    pub fn is_prefix_too_short(&self) -> bool {
        matches!(self, Self::Status { status: 400, code, .. } if code == "prefix_too_short")
    }

    /// Whether this error is a `404 unknown_list`: the server answering
    /// serves no list of that name.
    pub fn is_unknown_list(&self) -> bool {
        matches!(self, Self::Status { status: 404, code, .. } if code == "unknown_list")
    }

    /// Whether this error is a request that hit its timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Transport { timed_out: true, .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_lowercase_without_period() {
        let errors = [
            Error::NotReady {
                list: "malware".into(),
            },
            Error::Rollback {
                list: "malware".into(),
                trusted_version: 7,
                new_version: 3,
            },
            Error::Status {
                url: "http://x/v1/hashes/00000000".into(),
                status: 503,
                message: String::new(),
                code: String::new(),
                retry_after: None,
            },
            Error::InvalidUrl {
                reason: CanonError::EmptyHost,
            },
            Error::NoLists,
        ];
        for e in errors {
            let text = e.to_string();
            assert!(!text.ends_with('.'), "{text}");
            assert!(text.starts_with(|c: char| !c.is_ascii_uppercase()), "{text}");
        }
        let rollback = Error::Rollback {
            list: "malware".into(),
            trusted_version: 7,
            new_version: 3,
        };
        assert_eq!(
            rollback.to_string(),
            "snapshot of list malware has version 3, not newer than trusted version 7"
        );
        assert_eq!(rollback.kind(), ErrorKind::BadData);
    }

    #[test]
    fn cache_dir_in_use_names_the_directory_and_its_holder() {
        let e = Error::CacheDirInUse {
            path: PathBuf::from("agent-cache"),
            holder: Some(4242),
        };
        assert_eq!(
            e.to_string(),
            "cache directory agent-cache is in use by another agent (process 4242); one agent per cache directory: stop that one, or give this one another directory"
        );
        assert_eq!(e.kind(), ErrorKind::Misconfigured);
        let e = Error::CacheDirInUse {
            path: PathBuf::from("agent-cache"),
            holder: None,
        };
        assert!(
            e.to_string()
                .starts_with("cache directory agent-cache is in use by another agent (process id unknown);"),
            "{e}"
        );
        let e = Error::CacheDirInUse {
            path: PathBuf::from("agent-cache"),
            holder: Some(std::process::id()),
        };
        assert!(
            e.to_string().starts_with(&format!(
                "cache directory agent-cache is in use by another agent of this process (process {}: one being dropped may still be finishing an update round or a write);",
                std::process::id()
            )),
            "{e}"
        );
    }

    #[test]
    fn status_display_includes_message_when_present() {
        let e = Error::Status {
            url: "http://p/v1/lists/x/snapshot".into(),
            status: 404,
            message: "unknown list x".into(),
            code: "unknown_list".into(),
            retry_after: None,
        };
        assert_eq!(
            e.to_string(),
            "http://p/v1/lists/x/snapshot answered HTTP 404: unknown list x"
        );
        assert_eq!(e.kind(), ErrorKind::Transport);
    }
}
