//! The blocksieve agent's decisions, without I/O: the protocol engine.
//!
//! Everything here takes bytes, the current time (`now`, a [`SystemTime`]
//! the caller reads from its clock) and, where randomness is involved, an RNG
//! the caller passes in — and returns a value that says what to do next. No
//! function here opens a socket, reads a file, reads a clock or sleeps, and
//! nothing here uses tokio or reqwest or the C zstd library, so the crate
//! builds for `wasm32-unknown-unknown`; the Rust agent
//! (`blocksieve-agent`, which re-exports this crate as
//! `blocksieve_agent::engine`) is a thin tokio, reqwest and file-system
//! layer around it, C, WASM and Python bindings wrap the same rules, and
//! tests drive every decision with fixed times and seeded RNGs. (Snapshot
//! bodies decode with the C zstd library when a dependent turns on
//! `blocksieve-format`'s `zstd` feature, as the Rust agent does, and with
//! ruzstd otherwise: the same bytes either way.)
//!
//! The surface a binding wraps, in the order a client meets it:
//!
//! 1. a downloaded or cached snapshot → [`accept::accept`] or
//!    [`accept::restore`] → an [`AcceptedSnapshot`](accept::AcceptedSnapshot)
//!    and the [`ListRecord`](accept::ListRecord) to persist;
//! 2. the snapshot as a base → a [`ListState`](delta::ListState); what to
//!    ask next → [`delta::next_request`] (the deltas since the version
//!    held, or the whole snapshot to rebase); a delta chain →
//!    [`delta::apply_chain`] → the next state, all or nothing; a freshness
//!    record → [`ListState::apply_freshness`](delta::ListState::apply_freshness);
//!    at start, the saved chain → [`delta::restore_chain`];
//! 3. when to check next → an [`UpdateSchedule`](schedule::UpdateSchedule)
//!    per list, fed the publisher's hints and failures;
//! 4. a URL → [`UrlHashes`](lookup::UrlHashes) → [`lookup::probe`] against
//!    the lists' states → a [`LocalLookup`](lookup::LocalLookup) and its
//!    [`RequestPrefix`](prefix::RequestPrefix)es;
//! 5. those prefixes → the [`FullHashCache`](cache::FullHashCache), the
//!    [`FullHashBackoff`](schedule::FullHashBackoff), and for the rest
//!    [`prefix::plan_requests`] (noise, shuffling, chunks) → the response,
//!    binary or JSON, read into one compact
//!    [`SearchAnswer`](prefix::SearchAnswer), sorted by
//!    [`prefix::sort_answers`] and cached;
//! 6. the answers → [`lookup::decide`] → a [`Verdict`](lookup::Verdict).
//!
//! | module | decides |
//! |---|---|
//! | [`accept`] | whether downloaded or cached snapshot bytes may replace the filter in use: [`blocksieve_format::decode_ignoring_expiry`] (signature, limits, layout), list name, and the persisted [`VersionFloor`](accept::VersionFloor) against rollback — expiry only marks a snapshot stale; how the floor is persisted ([`ListRecord`](accept::ListRecord)) |
//! | [`delta`] | what a list is probed with between whole snapshots ([`ListState`](delta::ListState): base snapshot + sorted 32-bit prefixes added by deltas, its floor and freshness deadline), which request an update round makes, how a delta chain is verified and applied (all or nothing, from exactly the floor held, never below the rollback floor), when to rebase (`max_additions_ratio`), which freshness record extends what |
//! | [`clock`] | how far this agent's clock is from the publisher's ([`ClockSkew`](clock::ClockSkew)), from the `Date` of its responses, for the status only |
//! | [`schedule`] | when to check for the next snapshot: initial jitter, the publisher's next-check hint, exponential backoff with full jitter after failures, `Retry-After` |
//! | [`prefix`] | which hash prefixes a full-hash request carries: the shortened [`RequestPrefix`](prefix::RequestPrefix)es of the real hits plus shuffled noise, in chunks; and what of the answer ([`SearchAnswer`](prefix::SearchAnswer), either encoding) to believe |
//! | [`cache`] | how long a full-hash answer may be reused ([`FullHashCache`](cache::FullHashCache), Safe Browsing v5 semantics: per requested prefix, misses included) and which answers to keep within the cache's byte budget ([`ListedHashes`](cache::ListedHashes), least recently used evicted first) |
//! | [`update`] | what one list's update response changes, for the agent and the session alike: a delta chain ([`update::take_chain`]: applied, its end checked, or the whole snapshot instead) and a snapshot ([`update::take_snapshot`]: the one in use, or a newer verified base) |
//! | [`confirm`] | which cached full-hash answers a check may use and which answers are cached ([`AnswerCache`](confirm::AnswerCache): bound to the snapshot versions they were asked for) |
//! | [`session`] | all of the above for a host that does its own I/O ([`Session`](session::Session)): which HTTP request to send next, and what each response changes — the protocol as values, for the WASM binding and the C session API |
//! | [`lookup`] | which expressions of a URL hit the local filters ([`LocalLookup`](lookup::LocalLookup)) and the [`Verdict`](lookup::Verdict) once the full hashes are known |
//!
//! Two clocks appear: wall-clock `now` ([`SystemTime`]) for everything
//! compared with signed Unix times (snapshot expiry) or server-given
//! durations that must survive a process pause (cache and backoff
//! deadlines); plain [`Duration`](std::time::Duration)s for "wait this long",
//! which the runtime sleeps on its monotonic clock ([`clock`] also takes a
//! monotonic `Instant`, to tell a clock that was set from time passing).
//! Wall-clock values that run backwards are treated as "the deadline has
//! passed", never as "wait longer".
//!
//! Inside the engine, dependencies run one way: [`lookup`] uses [`delta`],
//! [`cache`] and [`prefix`]; [`delta`] uses [`accept`]; [`prefix`] uses
//! [`cache`]; [`update`] uses [`accept`] and [`delta`]; [`confirm`] uses
//! [`cache`], [`prefix`] and [`lookup`]; [`session`] uses them all; the
//! others use nothing of the engine. Errors are the crate's one [`Error`], which the agent returns
//! too.
//!
//! [`SystemTime`]: std::time::SystemTime

pub mod accept;
pub mod cache;
pub mod clock;
pub mod confirm;
pub mod delta;
mod error;
pub mod lookup;
pub mod prefix;
pub mod schedule;
pub mod session;
pub mod update;

pub use error::{Error, ErrorKind};
