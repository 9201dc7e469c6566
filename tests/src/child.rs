//! A child process a test spawns, ended with the test.

use std::process::Child;

/// A spawned process that is killed (SIGKILL on Unix) and waited for when
/// dropped, so a test that fails while it runs, at an assertion or a
/// panic, leaves no process behind. It derefs to its [`Child`]; one that
/// has already exited is only reaped.
#[derive(Debug)]
pub struct KillOnDrop(pub Child);

impl std::ops::Deref for KillOnDrop {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // Errors only when it has exited and was reaped already.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
