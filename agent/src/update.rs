//! What one update round did to each list. The rule that decides whether a
//! snapshot may replace the current one is [`crate::engine::accept`]; for
//! deltas, [`crate::engine::delta`].

use crate::Error;

/// The outcome of [`Agent::update`](crate::Agent::update): one entry per
/// subscribed list, in subscription order.
#[derive(Debug)]
#[non_exhaustive]
pub struct UpdateReport {
    /// Each list's name and what happened to it.
    pub lists: Vec<(String, ListUpdate)>,
}

impl UpdateReport {
    /// The outcome for `list`, if the agent subscribes to it.
    pub fn get(&self, list: &str) -> Option<&ListUpdate> {
        self.lists.iter().find(|(name, _)| name == list).map(|(_, u)| u)
    }

    /// Whether every list is now on the publisher's current snapshot.
    pub fn is_complete(&self) -> bool {
        self.lists
            .iter()
            .all(|(_, u)| !matches!(u, ListUpdate::Failed { .. }))
    }

    /// The lists that failed to update, with why; their previous filter is
    /// still in use.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &Error)> {
        self.lists.iter().filter_map(|(name, u)| match u {
            ListUpdate::Failed { error, .. } => Some((name.as_str(), error)),
            _ => None,
        })
    }
}

/// What an update did to one list.
#[non_exhaustive]
#[derive(Debug)]
pub enum ListUpdate {
    /// A newer snapshot, or a chain of deltas leading to a newer version,
    /// was verified and swapped in — possibly one that had already expired
    /// by this agent's clock, in use flagged stale (see
    /// [`ListStatus::stale`](crate::ListStatus::stale)).
    Updated {
        /// The version replaced, or `None` for the list's first snapshot.
        previous: Option<u64>,
        /// The version now in use.
        version: u64,
    },
    /// The publisher's latest version is the one in use (`304 Not
    /// Modified`, an empty delta chain, or the same version with the same
    /// body — taken whole as a rebase when deltas had been applied).
    Unchanged {
        /// The version in use.
        version: u64,
    },
    /// The download or verification failed; the previous filter, if any,
    /// is still in use.
    Failed {
        /// Why the update failed.
        error: Error,
        /// The version still in use, or `None` if the list has no snapshot.
        kept_version: Option<u64>,
    },
}
