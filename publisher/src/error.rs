//! The publisher's one error type.

use std::path::PathBuf;

use blocksieve_format::{BuildError, DecodeError, EncodeError, KeyError};

/// Everything that can go wrong in the publisher, grouped by what the
/// operator does next:
///
/// * **Configuration** ([`Error::Config`], [`Error::SigningKey`]): fix the
///   configuration file or the key file, then start again.
/// * **Source** ([`Error::Source`]): a threat list's source failed and has
///   no last good content; fix the source (or its URL). The list keeps
///   serving its previous snapshot, if any.
/// * **Gate refusal** ([`Error::Refused`]): a publishing gate refused the
///   build; look at the list (or publish once with `--force`). The previous
///   snapshot keeps serving.
/// * **Build** ([`Error::Filter`], [`Error::Encode`], [`Error::Reread`],
///   [`Error::BuildTask`]): the snapshot could not be built; look at the
///   list's size and the logs.
/// * **Storage** ([`Error::Storage`], [`Error::Corrupt`], [`Error::Store`]):
///   the data directory or the object store could not be read or written;
///   fix the disk or the store (its address, credentials, permissions).
/// * **Unsafe store** ([`Error::StoreIgnoresConditions`],
///   [`Error::SecondBuilder`]): the configured object store does not
///   enforce conditional writes; use one that does, or run one builder.
/// * **Wrong key** ([`Error::OtherSigningKey`]): the store's list is signed
///   with another key than this builder's; give it the builders' key.
/// * **In use** ([`Error::InUse`]): another publisher has the data directory
///   open; stop it, or use another directory.
/// * **Another builder's turn** ([`Error::LeaseHeld`], [`Error::Superseded`]):
///   nothing to do; with several builders on one store, another one built
///   or published this round, and its generation is served.
/// * **Stopping** ([`Error::Cancelled`]): the publisher stopped before the
///   build finished; nothing to do, the next start builds again.
///
/// The Display texts are those shown in `/v1/lists` (`last_build.error`),
/// in the `build` summary and in the logs.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // --- Configuration: fix it and start again. ---
    /// A configuration field is invalid.
    #[error("configuration: {field}: {reason}")]
    Config {
        /// The field (e.g. `lists.phishing.schedule`), or the file when the
        /// file itself cannot be read or parsed.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The signing key file does not hold a key.
    #[error("configuration: {}: {reason}", path.display())]
    SigningKey {
        /// The key file.
        path: PathBuf,
        /// Why it could not be parsed.
        reason: KeyError,
    },

    // --- Source: fix the source. ---
    /// A threat-list source failed and has no last good content to fall
    /// back to.
    #[error("source: {label}: {reason}")]
    Source {
        /// The list the source belongs to.
        list: String,
        /// The source's label (its path or URL).
        label: String,
        /// Why it failed, and that there was nothing to fall back to.
        reason: String,
    },

    // --- Gate refusal: look at the list; the previous snapshot serves. ---
    /// A publishing gate refused the build.
    #[error("refused: {gate}")]
    Refused {
        /// The gate, with the value it measured and its limit.
        gate: GateRefusal,
    },

    // --- Build: look at the list and the logs. ---
    /// The filter could not be built over the list's keys.
    #[error("build: list {list}: {reason}")]
    Filter {
        /// The list.
        list: String,
        /// Why the filter could not be built.
        reason: BuildError,
    },
    /// The snapshot could not be compressed or signed.
    #[error("build: list {list}: {reason}")]
    Encode {
        /// The list.
        list: String,
        /// Why encoding failed.
        reason: EncodeError,
    },
    /// The snapshot just built does not parse back.
    #[error("build: list {list}: re-reading own snapshot: {reason}")]
    Reread {
        /// The list.
        list: String,
        /// The first check that failed.
        reason: DecodeError,
    },
    /// The build task panicked or was cancelled.
    #[error("build: build task failed: {reason}")]
    BuildTask {
        /// The list.
        list: String,
        /// The task's failure.
        reason: String,
    },

    // --- Storage: fix the disk. ---
    /// Reading or writing the data directory failed.
    #[error("i/o: {}: {reason}", path.display())]
    Storage {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        reason: std::io::Error,
    },
    /// A stored file is not what it should be (a snapshot that does not
    /// verify, a hashes file that does not match it). Not an I/O failure:
    /// the read worked, what it read is refused.
    #[error("refused stored object: {}: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    // --- Another builder's turn: nothing to do. ---
    /// Another builder holds the list's lease: this builder does not build
    /// this round.
    #[error("skipped: builder {holder} holds the lease on list {list} until {expires_at} (Unix seconds)")]
    LeaseHeld {
        /// The list.
        list: String,
        /// The other builder's id.
        holder: String,
        /// When its lease expires, Unix seconds.
        expires_at: u64,
    },
    /// Another builder published the generation this build was for first;
    /// this build was discarded and that generation serves.
    #[error("superseded: another builder published generation {generation} of list {list} first")]
    Superseded {
        /// The list.
        list: String,
        /// The generation the other builder published.
        generation: u64,
    },

    /// The publisher stopped waiting for this build (it is shutting down)
    /// before the build published: nothing was published, and no source's
    /// content was kept as its last good content.
    #[error(
        "cancelled: the publisher stopped before the build of list {list} finished; nothing was published"
    )]
    Cancelled {
        /// The list.
        list: String,
    },

    /// An object store failed a request (the `store` of the configuration).
    #[error("store: {store}: {key}: {answer}")]
    Store {
        /// The store, as configured (`s3://bucket/prefix`).
        store: String,
        /// The key asked for, under the store's prefix (empty when the
        /// failure concerns no key).
        key: String,
        /// What kind of failure it is.
        kind: StoreFailure,
        /// What the store answered.
        answer: String,
    },

    // --- Unsafe store: use a store that enforces conditional writes. ---
    /// The object store ignored a conditional write in the start-up
    /// self-test: two publishers could replace each other's objects unseen.
    #[error(
        "store: {store} does not enforce conditional writes: {reason}; use a store that does (or, with one publisher at a time, set dangerous_store_ignores_conditions)"
    )]
    StoreIgnoresConditions {
        /// The store, as configured.
        store: String,
        /// The check that failed.
        reason: String,
    },

    /// A second builder writes a store that does not enforce conditional
    /// writes (allowed with `dangerous_store_ignores_conditions` for one
    /// builder only): two builders would overwrite each other's
    /// generations unseen, so this one does not build.
    #[error(
        "store: {store} does not enforce conditional writes, so only one builder may write it, and builder {holder} also does (list {list}); stop one of them"
    )]
    SecondBuilder {
        /// The store, as configured.
        store: String,
        /// The list whose lease showed it.
        list: String,
        /// The other builder's id.
        holder: String,
    },

    /// The store's newest generation of a list is not signed by this
    /// builder's key or a previous one (another key's, or damaged): none
    /// of the last few verifies under its keys, or one past the newest
    /// that does was signed by another (a builder left on the old key
    /// after a rotation): builders sharing a store need one signing key
    /// (replicas and agents trust one). Publishing anyway (`build
    /// --force`, once) starts the list over under this key; a deliberate
    /// key change is README "Rotating the signing key".
    #[error(
        "store: {store}: list {list}'s generation {generation} is not signed by this builder's key (key id {key_id}; another key's, or damaged): builders sharing a store need the same signing key (copy signing.key, or set BLOCKSIEVE_SIGNING_KEY); a builder left on the old key after a rotation is given the new one; to change the key on purpose, see README \"Rotating the signing key\" (previous_public_keys), or stop every builder on the old key and build once with --force"
    )]
    OtherSigningKey {
        /// The store, as configured.
        store: String,
        /// The list.
        list: String,
        /// The generation the store points to.
        generation: u64,
        /// This builder's key id (hex).
        key_id: String,
    },

    // --- In use: stop the other publisher. ---
    /// Another process holds the data directory's lock (`<data_dir>/lock`).
    #[error(
        "data directory in use: {} is locked by {}; stop it, or give this one another data_dir",
        data_dir.display(),
        match holder { Some(pid) => format!("another publisher (process {pid})"), None => "another process".to_owned() }
    )]
    InUse {
        /// The data directory.
        data_dir: PathBuf,
        /// The holder's process id, when the lock file names one.
        holder: Option<u32>,
    },
}

impl Error {
    /// A [`Error::Config`] error: `field` (e.g. `lists.x.sources[0].url`)
    /// and what is wrong with it.
    pub(crate) fn config(field: impl std::fmt::Display, problem: impl std::fmt::Display) -> Self {
        Self::Config {
            field: field.to_string(),
            reason: problem.to_string(),
        }
    }

    /// A [`Error::Storage`] error about `path`.
    pub(crate) fn storage(path: impl Into<PathBuf>) -> impl Fn(std::io::Error) -> Self {
        let path = path.into();
        move |reason| Self::Storage {
            path: path.clone(),
            reason,
        }
    }
}

/// What kind of failure an object store answered ([`Error::Store`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFailure {
    /// A write's condition did not hold: the key exists (create-only) or
    /// its version changed (compare-and-swap).
    Precondition,
    /// No object under the key.
    NotFound,
    /// The store does not support the request.
    Unsupported,
    /// The store could not answer for now: it could not be reached (a
    /// refused connection, a timeout, a cut request) or answered a server
    /// error (a 5xx status, or 429 Too Many Requests), after the client's
    /// own retries. The same request may succeed later: back off and retry.
    Transient,
    /// Anything else, which retrying will not mend: the store refused the
    /// credentials or the request, or answered something unreadable.
    Other,
}

/// The publishing gate that refused a build, with what it measured and its
/// limit (the `[lists.gates]` of the configuration).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateRefusal {
    /// Fewer full hashes than `min_entries`.
    #[error(
        "gate min_entries: {entries} entries, fewer than {min_entries} ({lines} lines read, {rejected} rejected)"
    )]
    MinEntries {
        /// Full hashes built.
        entries: u64,
        /// The limit.
        min_entries: u64,
        /// Lines read over all sources.
        lines: u64,
        /// Lines rejected over all sources.
        rejected: u64,
    },
    /// The list shrank by more than `max_shrink` since the version served.
    #[error(
        "gate max_shrink: {entries} entries, down from {previous_entries} in version {previous_version} (more than {:.0}% smaller)",
        max_shrink * 100.0
    )]
    MaxShrink {
        /// Full hashes built.
        entries: u64,
        /// Full hashes of the version served.
        previous_entries: u64,
        /// The version served.
        previous_version: u64,
        /// The limit, a fraction.
        max_shrink: f64,
    },
    /// A block source (of several) gave fewer entries, by more than
    /// `max_shrink`, than its last good content (as a rule the content last
    /// published): a feed emptied or cut short beside other sources, which
    /// the list's own count need not show.
    #[error(
        "gate max_shrink: source {label} gave {accepted} entries, down from {previous_accepted} in its last good content (more than {:.0}% fewer: a feed emptied or cut short?)",
        max_shrink * 100.0
    )]
    SourceShrink {
        /// The source, as the build report names it.
        label: String,
        /// Entries its fresh content gave.
        accepted: u64,
        /// Entries its last good content gave.
        previous_accepted: u64,
        /// The limit, a fraction.
        max_shrink: f64,
    },
    /// The canary's false-positive rate is over `max_fpr_ratio` times the
    /// filter's theoretical one.
    #[error(
        "gate max_fpr_ratio: measured false-positive rate {measured_fpr:.3e} is over {max_fpr_ratio} x the theoretical {theoretical_fpr:.3e}, beyond chance (p < 1e-6)"
    )]
    MaxFprRatio {
        /// The false-positive rate the canary measured.
        measured_fpr: f64,
        /// The filter kind's theoretical rate.
        theoretical_fpr: f64,
        /// The limit, a ratio.
        max_fpr_ratio: f64,
    },
}

impl GateRefusal {
    /// The gate's name in the configuration, in `/v1/lists`
    /// (`refused_by_gate`) and in the `gate` label of the metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Self::MinEntries { .. } => "min_entries",
            Self::MaxShrink { .. } | Self::SourceShrink { .. } => "max_shrink",
            Self::MaxFprRatio { .. } => "max_fpr_ratio",
        }
    }
}
