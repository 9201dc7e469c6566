//! The blocksieve publisher: turns threat lists into signed filter
//! snapshots and serves them, with a full-hash lookup endpoint.
//!
//! Principal types and how data flows — fetch → build → store → serve:
//!
//! 1. A [`Config`] names the threat lists ([`ListConfig`]), their sources
//!    ([`SourceConfig`], each in a [`SourceFormat`]), filters and gates.
//! 2. **Fetch**: a [`Publisher`] gets each source's bytes (a file or an HTTP feed, with
//!    conditional GET, gzip and size limits); a source that fails falls back to its last good content.
//! 3. **Build**: each entry's expression is canonicalized and hashed to a
//!    full hash; a filter over the hash-prefix keys is built, its
//!    false-positive rate measured (the canary), and a snapshot signed. The build is pure: bytes
//!    and the time in, snapshot and [`BuildReport`] out. The publishing gates may refuse it ([`GateRefusal`]).
//! 4. **Store**: the snapshot and its full hashes are published as a new generation (immutable
//!    objects, a signed manifest, a pointer moved by compare-and-swap) in a directory or a store.
//! 5. **Serve**: the [`AppState`] holds one [`ListSlot`] per list, whose
//!    [`Published`] snapshot a build swaps atomically; [`Publisher::router`]
//!    ([`Api`]) serves it. [`Publisher::run`] is the daemon: serve what is on disk at
//!    once, build every list, then rebuild each on its cron schedule.
//! 6. **Roles** ([`Role`]): `all` does all of the above; a `builder` serves
//!    only the operational routes; a `replica` builds nothing, follows the
//!    store a builder publishes to and swaps each new version in.
//! 7. **Status**: builds go to a list's history, shown at `GET /`. Every
//!    failure is one [`Error`], grouped by what the operator does next.

mod build;
mod config;
mod error;
mod fetch;
mod fuzzing;
mod generations;
mod listener;
mod metrics;
mod object_storage;
mod publisher;
mod replica;
mod sendfile;
mod server;
mod sources;
mod state;
mod status;
mod storage;

pub use build::BuildReport;
pub use config::{
    AutoFilter, Config, FilterChoice, Gates, HeaderValueConfig, ListConfig, LogFormat, Role, Settings,
    SourceConfig, SourceFormat,
};
pub use error::{Error, GateRefusal, StoreFailure};
pub use publisher::{ListBuildOutcome, Publisher, wait_until_ready};
pub use server::Api;
pub use state::{AppState, ListSlot, Published};

/// The publisher's inner parts, for its binary, tests, benchmarks and fuzz
/// targets. Not a stable API: anything here may change in any release.
#[doc(hidden)]
pub mod internal {
    pub mod build {
        pub use crate::build::*;
    }
    pub mod config {
        pub use crate::config::*;
    }
    pub mod fetch {
        pub use crate::fetch::*;
    }
    pub mod fuzzing {
        pub use crate::fuzzing::*;
    }
    pub mod listener {
        pub use crate::listener::*;
    }
    pub mod metrics {
        pub use crate::metrics::*;
    }
    pub mod server {
        pub use crate::server::*;
    }
    pub mod sources {
        pub use crate::sources::*;
    }
    pub mod state {
        pub use crate::{state::*, status::*};
    }
    pub mod storage {
        pub use crate::generations::*;
        pub use crate::object_storage::*;
        pub use crate::storage::*;
    }
}
