//! Clocks for agents: one that runs with real time at a settable offset (a
//! machine whose clock is ahead, or behind, and is then put right), and one
//! that only the test moves.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use blocksieve_agent::TimeProvider;

/// The system clock shifted by an offset the test sets.
#[derive(Debug, Default)]
pub struct OffsetClock {
    /// Seconds added to the system clock; negative for a clock behind.
    offset_s: Mutex<i64>,
}

impl OffsetClock {
    /// A clock `offset_s` seconds ahead of the system clock (behind if
    /// negative).
    pub fn new(offset_s: i64) -> Self {
        Self {
            offset_s: Mutex::new(offset_s),
        }
    }

    /// Moves the clock to `offset_s` seconds from the system clock.
    pub fn set_offset(&self, offset_s: i64) {
        *self.offset_s.lock().unwrap_or_else(PoisonError::into_inner) = offset_s;
    }
}

impl TimeProvider for OffsetClock {
    fn now(&self) -> SystemTime {
        let offset = *self.offset_s.lock().unwrap_or_else(PoisonError::into_inner);
        let now = SystemTime::now();
        let by = Duration::from_secs(offset.unsigned_abs());
        let shifted = if offset >= 0 {
            now.checked_add(by)
        } else {
            now.checked_sub(by)
        };
        shifted.unwrap_or(now)
    }
}

/// A clock that stands still until the test moves it.
#[derive(Debug)]
pub struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    /// A clock reading `at`, shared with the agent that reads it.
    pub fn new(at: SystemTime) -> Arc<Self> {
        Arc::new(Self(Mutex::new(at)))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) += by;
    }

    /// Sets the clock to `at`, forward or back.
    pub fn set(&self, at: SystemTime) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }
}

impl TimeProvider for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
