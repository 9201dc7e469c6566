//! Stopping a build that nobody waits for any more.
//!
//! A build's stages run on a blocking thread (`spawn_blocking`), which a
//! cancelled task cannot stop: dropping the task only drops the handle.
//! Without a way to tell it, a build cancelled at shutdown ran on for as
//! long as it took (tens of seconds for a list of millions of lines),
//! holding the data directory's lock after "publisher stopped", and then
//! published. A [`Cancel`] is that way: the task sets it when it is
//! dropped ([`Cancel::on_drop`]), and the build looks at it between its
//! stages and between blocks of a source's content.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a build is to stop at its next check. Clones share one flag;
/// [`Cancel::default`] is never set unless [`Cancel::cancel`] is called.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// Asks the build to stop: it does at its next check, publishing
    /// nothing and keeping no source's content as last good.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Cancel::cancel`] was called.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// A guard that cancels when dropped: held by the task that waits for
    /// the build, it is dropped with the task when that is cancelled (and,
    /// harmlessly, when it returns after the build ended).
    #[must_use]
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }

    /// The error a read gives once cancelled, so that the read stops
    /// where it is.
    pub(crate) fn check_io(&self) -> std::io::Result<()> {
        if self.is_cancelled() {
            return Err(std::io::Error::other("build cancelled"));
        }
        Ok(())
    }
}

/// Cancels its [`Cancel`] when dropped ([`Cancel::on_drop`]).
#[derive(Debug)]
pub struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_dropped_cancels_every_clone() {
        let cancel = Cancel::default();
        let seen = cancel.clone();
        let guard = cancel.on_drop();
        assert!(!seen.is_cancelled());
        assert!(seen.check_io().is_ok());
        drop(guard);
        assert!(seen.is_cancelled());
        assert!(seen.check_io().is_err());
    }
}
